#!/usr/bin/env bash
# test_scripts.sh: dry-runs every recipe script (DRY_RUN=1: print the command, then the CPU
# trainer validates flags, model shape and the layout for the script's world size, over the
# whole batch ramp) and expects it to pass; then dry-runs copies of scripts edited to an
# impossible layout and expects each to FAIL, for the stated reason. `make test` runs it.
# One line per check, then "N passed, M failed"; exit status 1 if any failed.
#
#   bash tests/test_scripts.sh          # needs ./train_gpt (make train_gpt)
#   CHECK_BIN=path/to/train_gpt bash tests/test_scripts.sh
set -uo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT" || exit 1
export CHECK_BIN="${CHECK_BIN:-./train_gpt}"
if [ ! -x "$CHECK_BIN" ]; then
  echo "test_scripts.sh: $CHECK_BIN is missing: run 'make train_gpt' first" >&2
  exit 1
fi
case "$CHECK_BIN" in /*) ;; *) CHECK_BIN="$ROOT/$CHECK_BIN" ;; esac  # copies run elsewhere

TMP="$(mktemp -d)"
trap 'rm -rf "$TMP"' EXIT
pass=0; fail=0
covered=" "

ok()  { echo "PASS $1"; pass=$((pass + 1)); }
bad() { echo "FAIL $1"; sed 's/^/    | /' "$2" | tail -n 8; fail=$((fail + 1)); }

# expect_pass NAME SCRIPT [VAR=VALUE...]: the dry run must exit 0 and report a valid layout
expect_pass() {
  local name="$1" script="$2"; shift 2
  covered+="$(basename "$script") "
  local log
  log="$TMP/$(echo "$name" | tr -c 'A-Za-z0-9._-' '_').log"
  if env DRY_RUN=1 TRAIN_GPT="$CHECK_BIN" "$@" bash "$script" > "$log" 2>&1; then
    ok "$name: dry run passes"
  else
    bad "$name: dry run should pass" "$log"
  fi
}

# expect_fail NAME SCRIPT SED_EXPR REASON [VAR=VALUE...]: a copy of SCRIPT edited by
# SED_EXPR must fail its dry run with an error that mentions REASON
expect_fail() {
  local name="$1" script="$2" expr="$3" reason="$4"; shift 4
  local copy
  copy="$TMP/$(basename "$script" .sh)_impossible.sh"
  local log
  log="$TMP/$(echo "$name" | tr -c 'A-Za-z0-9._-' '_').log"
  sed -e "$expr" "$script" > "$copy"
  if cmp -s "$script" "$copy"; then
    echo "the edit '$expr' changed nothing in $script" > "$log"
    bad "$name: the impossible copy could not be made" "$log"
    return
  fi
  if env DRY_RUN=1 LLMC_ROOT="$ROOT" "$@" bash "$copy" > "$log" 2>&1; then
    bad "$name: dry run should FAIL but passed" "$log"
  elif grep -qi "error.*$reason" "$log"; then
    ok "$name: dry run fails: $(grep -io 'error.*' "$log" | head -n 1 | cut -c1-110)"
  else
    bad "$name: dry run failed, but not because of '$reason'" "$log"
  fi
}

# every script, with every model it offers
expect_pass "run_mtnlg_530b.sh LAYOUT=manual (560 nodes, the paper's TP 8 x PP 35 x DP 16)" scripts/run_mtnlg_530b.sh \
  LAYOUT=manual
expect_pass "run_mtnlg_530b.sh LAYOUT=manual SP=1 RECOMPUTE=selective (the options after the paper)" \
  scripts/run_mtnlg_530b.sh LAYOUT=manual SP=1 RECOMPUTE=selective
expect_pass "run_mtnlg_530b.sh (LAYOUT=auto, 560 nodes)" scripts/run_mtnlg_530b.sh
# the planner's layout for the paper's 280 nodes: TP 8 inside a node, as the paper chose
log="$TMP/auto280.log"
if env DRY_RUN=1 NODES=280 bash scripts/run_mtnlg_530b.sh > "$log" 2>&1 && grep -q "^layout auto: -tp 8 -pp" "$log" &&
  grep -q "^layout auto: runner-up .* it loses on" "$log"; then
  ok "run_mtnlg_530b.sh NODES=280: -layout auto picks TP 8 inside a node and says why over the runner-up"
else
  bad "run_mtnlg_530b.sh NODES=280: -layout auto picks TP 8 inside a node and says why over the runner-up" "$log"
fi
# the checkpoint interval: the planner's Young/Daly interval for -ckpt-async 1, printed and used
# (steps = the rounded interval over the predicted step time), unless CKPT_EVERY is given
log="$TMP/interval.log"
env DRY_RUN=1 LAYOUT=manual bash scripts/run_mtnlg_530b.sh > "$log" 2>&1
n=$(sed -nE 's/^  -ckpt-async 1: .* every ([0-9.]+) min = -ckpt-every ([0-9]+),.*/\2/p' "$log")
if [ -n "$n" ] && grep -q "^# CKPT_EVERY=$n: the planner's interval for -ckpt-async 1" "$log" &&
  grep -q -- "-ckpt-every $n -ckpt-async 1 " "$log" && grep -q "^  interval: Young/Daly" "$log"; then
  ok "run_mtnlg_530b.sh: prints the planner's checkpoint interval and uses it (-ckpt-every $n -ckpt-async 1)"
else bad "run_mtnlg_530b.sh: prints the planner's checkpoint interval and uses it" "$log"; fi
env DRY_RUN=1 LAYOUT=manual CKPT_EVERY=77 CKPT_ASYNC=0 bash scripts/run_mtnlg_530b.sh > "$log" 2>&1
if grep -q -- "-ckpt-every 77 -ckpt-async 0 " "$log" && ! grep -q "^# CKPT_EVERY=" "$log"; then
  ok "run_mtnlg_530b.sh CKPT_EVERY=77 CKPT_ASYNC=0: used as given"
else bad "run_mtnlg_530b.sh CKPT_EVERY=77 CKPT_ASYNC=0: used as given" "$log"; fi
for m in 125m 350m 1.3b 6.7b; do
  expect_pass "run_family.sh MODEL=$m (1 node of 8 GPUs)" scripts/run_family.sh MODEL="$m"
done
for m in tiny 125m; do
  expect_pass "run_one_gpu.sh MODEL=$m" scripts/run_one_gpu.sh MODEL="$m"
done
if [ -f scripts/run_cpu.sh ]; then expect_pass "run_cpu.sh" scripts/run_cpu.sh; fi

# a script added later must be added above
for s in scripts/run_*.sh; do
  case "$covered" in
    *" $(basename "$s") "*) ;;
    *) echo "$s has no dry run in tests/test_scripts.sh" > "$TMP/uncovered.log"; bad "$(basename "$s"): not covered" "$TMP/uncovered.log" ;;
  esac
done

# impossible layouts must fail, each for its own reason
expect_fail "impossible: 125m with TP 8 (12 heads)" scripts/run_family.sh \
  's/TP=1; PP=1; DP=8; CKPT_EVERY=500/TP=8; PP=1; DP=1; CKPT_EVERY=500/' "heads" MODEL=125m
expect_fail "impossible: 530b with PP 2 x DP 280 (105 layers)" scripts/run_mtnlg_530b.sh \
  's/LAYOUT=${LAYOUT:-auto}/LAYOUT=manual/' "layers" PP=2 DP=280
expect_fail "impossible: 530b on 559 nodes (world 4472 != 8 x 35 x 16)" scripts/run_mtnlg_530b.sh \
  's/LAYOUT=${LAYOUT:-auto}/LAYOUT=manual/' "world" NODES=559 DP=16
expect_fail "impossible: 530b with VPP=3 (2..120 micro-batches, not multiples of PP 35)" scripts/run_mtnlg_530b.sh \
  's/LAYOUT=${LAYOUT:-auto}/LAYOUT=manual/' "multiple of pp" VPP=3
expect_fail "impossible: 530b -layout auto pinned to TP 3 (128 heads)" scripts/run_mtnlg_530b.sh \
  's/LAYOUT=${LAYOUT:-auto}/LAYOUT=auto/' "no layout of 4480 ranks fits" TP=3
expect_fail "impossible: tiny with micro-batch 3 (ramp batches 8, 16, ... not divisible)" scripts/run_one_gpu.sh \
  's/GB=480; MB=8 /GB=480; MB=3 /' "ramp" MODEL=tiny

# the command line: -h prints the script's comment and exits 0, anything else exits 2; no
# script starts (or overwrites) a run then
R="$TMP/run_dir"; mkdir -p "$R/ckpt_00000003"; touch "$R/ckpt_00000003/DONE"
for s in scripts/*.sh; do
  case "$(basename "$s")" in lib.sh | args.sh) continue ;; esac
  log="$TMP/help_$(basename "$s").log"
  if OUT="$R" OUT_DIR="$R" bash "$s" -h > "$log" 2>&1 && grep -q "^$(basename "$s"):" "$log" && [ -f "$R/ckpt_00000003/DONE" ]
  then ok "$(basename "$s") -h: prints its help, exit 0, touches nothing"; else bad "$(basename "$s") -h" "$log"; fi
  if OUT="$R" bash "$s" --no-such-option > "$log" 2>&1; then bad "$(basename "$s") --no-such-option: exit 0" "$log"
  elif [ $? -eq 2 ] && grep -q "unknown argument" "$log"; then ok "$(basename "$s") --no-such-option: refused (exit 2)"
  else bad "$(basename "$s") --no-such-option: not refused as an unknown argument" "$log"; fi
done
# run_cpu.sh (make quickstart) on a directory holding checkpoints resumes; FRESH=1 starts over
log="$TMP/cpu_resume.log"
env DRY_RUN=1 TRAIN_GPT="$CHECK_BIN" OUT="$R" bash scripts/run_cpu.sh > "$log" 2>&1
if grep -q -- " -resume" "$log" && ! grep -q -- "-overwrite" "$log"; then ok "run_cpu.sh with checkpoints in OUT: -resume, never -overwrite"
else bad "run_cpu.sh with checkpoints in OUT: -resume, never -overwrite" "$log"; fi
env DRY_RUN=1 FRESH=1 TRAIN_GPT="$CHECK_BIN" OUT="$R" bash scripts/run_cpu.sh > "$log" 2>&1
if grep -q -- "-overwrite 1" "$log"; then ok "run_cpu.sh FRESH=1: -overwrite 1"; else bad "run_cpu.sh FRESH=1: -overwrite 1" "$log"; fi

echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
