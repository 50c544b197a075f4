#!/usr/bin/env bash
# plan_530b_techniques.sh: the planner's answer to "what would sequence parallelism with
# selective recomputation (Korthikanti et al. 2022) and the interleaved 1F1B schedule
# (Narayanan et al. 2021) and the zero-bubble ZB-H1 schedule (Qi et al. 2024) have given the
# MT-NLG 530B run?". For the paper's recipe (global batch 1920, micro-batch 1, TP 8) on 280,
# 350 and 420 selene-a100 nodes it prints, per layout, the predicted iteration time, bubble,
# MFU (model FLOPs), hardware TFLOP/s per GPU and the memory per GPU that makes the layout
# feasible (or why it is not); then the planner's schedule comparison (-plan-schedules 1)
# for the paper's layout. Every number is a PLANNER PREDICTION, not a measurement; the
# paper's measured times are in the last column where the layout is the paper's.
#
#   bash scripts/plan_530b_techniques.sh             # needs ./train_gpt (make train_gpt)
#   NODES="280 560" EXTRA="-plan-eff 0.73" bash scripts/plan_530b_techniques.sh
#   (EXTRA: planner flags, e.g. -plan-eff 0.73 = the Megatron-LM level, README "Planning a run")
set -euo pipefail
source "${LLMC_ROOT:-$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)}/scripts/args.sh" && llmc_args "${BASH_SOURCE[0]}" "$@"
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
BIN=${TRAIN_GPT:-./train_gpt}
[ -x "$BIN" ] || { echo "plan_530b_techniques.sh: $BIN is missing: run 'make train_gpt' first" >&2; exit 1; }
NODES=${NODES:-280 350 420}
EXTRA=${EXTRA:-}
TMP="$(mktemp -d)"
trap 'rm -rf "$TMP"' EXIT
BASE=(-model 530b -gb 1920 -mb 1 -tp 8 -cluster selene-a100 -ramp off -plan-top 0)

# row NODES LABEL PAPER_S FLAGS...: the fastest feasible row of the planner's CSV for FLAGS
# (filtered by $FILTER, a python expression over the CSV row r), or the reason none is.
row() {
  local nodes="$1" label="$2" paper="$3"; shift 3
  # exit 1 (nothing feasible) still writes the CSV with the reasons
  # shellcheck disable=SC2086
  "$BIN" -plan "${BASE[@]}" -nodes "$nodes" "$@" $EXTRA -plan-csv "$TMP/p.csv" > "$TMP/out.txt" 2>&1 || true
  [ -f "$TMP/p.csv" ] || { echo "plan_530b_techniques.sh: planner failed:"; cat "$TMP/out.txt"; exit 1; } >&2
  /usr/bin/python3 - "$TMP/p.csv" "$nodes" "$label" "$paper" "${FILTER:-True}" <<'EOF'
import csv, sys
path, nodes, label, paper, filt = sys.argv[1:6]
rows = list(csv.DictReader(open(path, newline="")))
ok = [r for r in rows if r["feasible"] == "1" and eval(filt, {}, {"r": r})]
if ok:
    r = min(ok, key=lambda r: float(r["iter_s"]))
    lay = f"PP {r['pp']:>2} DP {r['dp']:>2} {r['rc_name']:>4} sp {r['sp']} V {r['vpp']} z {r['zero']} {r['schedule']}"
    print(f"| {nodes} | {label} | {lay} | {float(r['mem_gib']):.1f} | {float(r['iter_s']):.2f} | "
          f"{100 * float(r['bubble_frac']):.1f}% | {100 * float(r['mfu']):.1f}% | {float(r['tflops_per_gpu']):.1f} | {paper} |")
else:
    why = sorted({r["reason"] for r in rows if eval(filt, {}, {"r": r})})[:2]
    print(f"| {nodes} | {label} | infeasible: {'; '.join(why) or 'no layout'} | | | | | | {paper} |")
EOF
  rm -f "$TMP/p.csv"
}

echo "PLANNER PREDICTIONS for the 530B recipe (gb 1920, mb 1, TP 8, selene-a100${EXTRA:+, $EXTRA})"
echo
echo "| nodes | variant | layout | GiB/GPU | s/iter | bubble | MFU | HW TFLOP/s/GPU | paper s/iter |"
echo "|---|---|---|---|---|---|---|---|---|"
for n in $NODES; do
  case "$n" in 280) P=60.1 ;; 350) P=50.2 ;; 420) P=44.4 ;; *) P="" ;; esac
  # the trainer's schedules (1F1B, interleaved) first, then ZB-H1 (a schedule this trainer does not run)
  MEG=(-plan-schedule 1f1b,interleaved)
  FILTER=True row "$n" "paper: PP 35, full recompute" "$P" -pp 35 -recompute 1 -sp 0 -vpp 1 -zero 0 "${MEG[@]}"
  FILTER=True row "$n" "PP 35, SP + selective" "" -pp 35 -recompute selective -sp 1 -vpp 1 -zero 0 "${MEG[@]}"
  FILTER=True row "$n" "PP 35, SP + selective, V 3" "" -pp 35 -recompute selective -sp 1 -vpp 3 -zero 0
  FILTER="int(r['vpp']) > 1" row "$n" "best interleaved, SP + selective" "" -recompute selective -sp 1 -zero 0
  FILTER=True row "$n" "best of everything (ZeRO 0-3 too)" "" "${MEG[@]}"
  FILTER=True row "$n" "paper's layout, zb-h1" "" -pp 35 -recompute 1 -sp 0 -vpp 1 -zero 0 -plan-schedule zb-h1
  FILTER=True row "$n" "PP 35, SP + selective, zb-h1" "" -pp 35 -recompute selective -sp 1 -vpp 1 -zero 0 \
    -plan-schedule zb-h1
  FILTER=True row "$n" "best of everything, zb-h1 searched too" ""
  # At gb 1920 no layout on these node counts gives a multiple of PP micro-batches
  # (m/PP = gb/(mb*nodes) must be an integer), so interleaving needs the nearest batch that is
  # a multiple of the node count (MFU compares across batches; s/iter does not).
  G=$(( (1920 + n / 2) / n * n ))
  FILTER="int(r['vpp']) > 1" row "$n" "gb $G: best interleaved, SP + selective" "" -gb "$G" -recompute selective -sp 1 -zero 0
  FILTER="int(r['vpp']) == 1" row "$n" "gb $G: same search, V 1 only" "" -gb "$G" -recompute selective -sp 1 -zero 0 \
    "${MEG[@]}"
done

# The schedules side by side on the paper's layout (its 1f1b rows are the paper's reproductions)
echo
echo '```'
# shellcheck disable=SC2086
"$BIN" -plan "${BASE[@]}" -pp 35 -recompute 1 -sp 0 -zero 0 -scaling "${NODES// /,}" -plan-schedules 1 $EXTRA \
  | sed -n '/^schedule comparison/,$p'
echo '```'
