#!/usr/bin/env bash
# family_zero.sh: -zero (ZeRO 0-3, llmc/host/zero.h). Bad levels end in one `error:` line
# before any work; -zero 2/3 with -ramp auto are refused (the noise scale needs each
# replica's whole gradient); -zero 3 over one DP rank is plain AdamW (the same losses as
# -zero 0); a -zero 3 checkpoint resumes under -zero 0, 1 and 2 in its own layout (the same
# losses as the uninterrupted -zero 3 run: one micro-batch per DP rank sums in the same
# order) and under other layouts (1x1x1 and 2x1x2 -zero 2: within 1e-5); -layout auto with
# -zero 3 pinned plans and runs a -zero 3 layout.
source "$(dirname "$0")/lib.sh"
C=("$TRAIN" -check)
export OMP_NUM_THREADS=1
MPI=(mpirun --oversubscribe)
[ "$(id -u)" = 0 ] && MPI+=(--allow-run-as-root)
# one micro-batch of 2 sequences per DP rank at DP 2 (gb 4)
SMALL=(-model tiny -seq 32 -V 8192 -mb 2 -gb 4 -ramp off -lr 1e-3 -warmup 0 -j '' -threads 1)

# --- bad levels, before any work
expect_err "-zero 4" "-zero 4" -- "${C[@]}" -zero 4
expect_err "-zero -1" "-zero -1" -- "${C[@]}" -zero -1
expect_err "-zero x" "-zero" -- "${C[@]}" -zero x
expect_err "-zero 1.5" "-zero" -- "${C[@]}" -zero 1.5
expect_err "-zero (no value)" "needs 1 value" -- "${C[@]}" -zero
expect_err "-zero 2 -ramp auto 32 32: refused" "ramp auto.*-zero 2" -- "${C[@]}" -zero 2 -ramp auto 32 32
expect_err "-zero 3 -ramp auto 32 32 (2 ranks): refused" "ramp auto.*-zero 3" -- "${C[@]}" -zero 3 -ramp auto 32 32 \
  -world 2
expect_err "-layout auto -zero 2 -ramp auto: refused before planning" "ramp auto" -- "${C[@]}" -layout auto \
  -zero 2 -ramp auto 32 32 -world 4
expect_ok "control: -zero 1 -ramp auto 32 32" -- "${C[@]}" -zero 1 -ramp auto 32 32
# unpinned, the planner's pick on 8 ranks is -zero 3 (see the next case); with -ramp auto it must not be 2 or 3
run_case "${C[@]}" -layout auto -ramp auto 32 32 -world 8
if [ "$RC" -eq 0 ] && grep -q "^layout auto: -tp .*-zero [01] " "$OUT"; then pass "-layout auto -ramp auto: a level <= 1"
else fail "-layout auto -ramp auto: a level <= 1" "exit $RC: $(head -c 300 "$OUT" "$ERR" | tr '\n' ' ')"; fi
run_case "${C[@]}" -layout auto -world 8
if [ "$RC" -eq 0 ] && grep -q "^layout auto: -tp .*-zero [23] " "$OUT"; then pass "control: -layout auto -world 8 picks -zero 2/3"
else fail "control: -layout auto -world 8 picks -zero 2/3" "exit $RC: $(head -c 300 "$OUT" "$ERR" | tr '\n' ' ')"; fi
expect_ok "control: -zero 3 -world 8 -tp 2 -pp 2 -sp 1" -- "${C[@]}" -zero 3 -world 8 -tp 2 -pp 2 -sp 1

# losses of a run's log (one per line, as printed)
losses() { grep '"type":"train"' "$1/log.jsonl" | sed 's/.*"loss":\([^,]*\),.*/\1/'; }
# same_losses NAME A B [TOL]: the train losses of run dirs A and B over their common steps,
# equal (or within relative TOL); both must hold at least 2 steps
same_losses() {
  local name=$1 a=$2 b=$3 tol=${4:-0}
  paste <(losses "$a") <(losses "$b") > "$WORK/pair.txt"
  if awk -v tol="$tol" 'NF != 2 { bad = 1 } NF == 2 { n++; d = $1 - $2; if (d < 0) d = -d; m = $1 < 0 ? -$1 : $1;
      if ((tol == 0 && $1 != $2) || (tol > 0 && d > tol * m)) bad = 1 } END { exit (bad || n < 2) }' "$WORK/pair.txt"
  then pass "$name"; else fail "$name" "losses $(tr '\n\t' ' /' < "$WORK/pair.txt")"; fi
}

# --- -zero 3 over one DP rank: plain AdamW, the same losses as -zero 0
run_case "$TRAIN" "${SMALL[@]}" -steps 3 -zero 3 -o "$WORK/z3dp1"
run_case "$TRAIN" "${SMALL[@]}" -steps 3 -zero 0 -o "$WORK/z0dp1"
same_losses "-zero 3 with -dp 1 runs plain AdamW: -zero 0's losses bit for bit" "$WORK/z3dp1" "$WORK/z0dp1"

# --- a -zero 3 checkpoint (DP 2, step 2) resumed under other levels and layouts
if command -v mpirun > /dev/null; then
  REF=$WORK/ref
  timeout -k 5 120 "${MPI[@]}" -np 2 "$TRAIN" "${SMALL[@]}" -dp 2 -zero 3 -steps 4 -ckpt-every 2 -o "$REF" \
    > "$WORK/ref.out" 2>&1
  if [ -f "$REF/ckpt_00000002/DONE" ] && [ "$(losses "$REF" | wc -l)" -eq 4 ]; then
    pass "reference: 1x1x2 -zero 3, 4 steps, checkpoint at step 2"
  else
    fail "reference: 1x1x2 -zero 3, 4 steps, checkpoint at step 2" "$(tail -c 300 "$WORK/ref.out" | tr '\n' ' ')"
  fi
  # resume_as NAME NP TOL FLAGS...: a copy of the run cut back to its step-2 checkpoint, resumed
  # to step 4 with FLAGS; its steps 3-4 against the reference's
  resume_as() {
    local name=$1 np=$2 tol=$3; shift 3
    local d="$WORK/r_${np}_$RANDOM"
    rm -rf "$d"; mkdir -p "$d"
    cp -r "$REF/ckpt_00000002" "$REF/config.json" "$d/"
    timeout -k 5 120 "${MPI[@]}" -np "$np" "$TRAIN" "${SMALL[@]}" -o "$d" -resume -steps 4 "$@" > "$d.out" 2>&1
    local rc=$?
    if [ "$rc" -ne 0 ] || ! grep -q "^step      3 " "$d.out"; then
      fail "$name" "exit $rc: $(grep -m1 'error' "$d.out" || tail -c 200 "$d.out" | tr '\n' ' ')"
      return
    fi
    losses "$REF" | tail -n 2 > "$WORK/ref34.txt"
    losses "$d" | tail -n 2 > "$WORK/res34.txt"
    if awk -v tol="$tol" 'NR == FNR { want[FNR] = $1; next } { n++; d = $1 - want[FNR]; if (d < 0) d = -d;
        if ((tol == 0 && $1 + 0 != want[FNR] + 0) || (tol > 0 && d > tol * want[FNR])) bad = 1 }
        END { exit (bad || n != 2) }' "$WORK/ref34.txt" "$WORK/res34.txt"; then
      pass "$name"
    else
      fail "$name" "steps 3-4: $(tr '\n' ' ' < "$WORK/res34.txt")against $(tr '\n' ' ' < "$WORK/ref34.txt")"
    fi
  }
  # the same losses: to the log's 8 significant decimals (the sums run in the same order)
  resume_as "-zero 3 checkpoint resumed as 1x1x2 -zero 0: the uninterrupted losses" 2 0 -dp 2 -zero 0
  resume_as "-zero 3 checkpoint resumed as 1x1x2 -zero 1: the uninterrupted losses" 2 0 -dp 2 -zero 1
  resume_as "-zero 3 checkpoint resumed as 1x1x2 -zero 2: the uninterrupted losses" 2 0 -dp 2 -zero 2
  resume_as "-zero 3 checkpoint resumed on one process (1x1x1 -zero 0): losses within 1e-5" 1 1e-5 -dp 1 -zero 0
  resume_as "-zero 3 checkpoint resumed as 2x1x2 -zero 2: losses within 1e-5" 4 1e-5 -tp 2 -dp 2 -zero 2

  # --- -layout auto with -zero 3 pinned: the choice keeps it, and it trains
  run_case "${C[@]}" -layout auto -zero 3 -world 4
  if [ "$RC" -eq 0 ] && grep -q "^layout auto: -tp .*-zero 3 " "$OUT"; then pass "-layout auto -zero 3 -world 4: plans -zero 3"
  else fail "-layout auto -zero 3 -world 4: plans -zero 3" "exit $RC: $(head -c 300 "$OUT" "$ERR" | tr '\n' ' ')"; fi
  timeout -k 5 120 "${MPI[@]}" -np 2 "$TRAIN" "${SMALL[@]}" -layout auto -zero 3 -steps 2 > "$WORK/auto.out" 2>&1
  rc=$?
  if [ "$rc" -eq 0 ] && grep -q "^layout auto: -tp .*-zero 3 " "$WORK/auto.out" && grep -q "zero / recompute.* 3 / " \
    "$WORK/auto.out" && grep -q "^step      2 " "$WORK/auto.out"; then
    pass "mpirun -np 2 -layout auto -zero 3: trains 2 steps under -zero 3"
  else
    fail "mpirun -np 2 -layout auto -zero 3: trains 2 steps under -zero 3" "$(tail -c 300 "$WORK/auto.out" | tr '\n' ' ')"
  fi
else
  echo "SKIP the checkpoint and -layout auto cases: mpirun not found"
fi
attack_done
