#!/usr/bin/env bash
# family_cp.sh: context parallelism's inputs (-cp N, doc/cp.md). Bad values and layouts are
# one error line and a non-zero exit at start (-check, and a real launch on every rank: no
# hang); valid controls pass, and a 2-rank -cp 2 run trains and resumes as one process.
source "$(dirname "$0")/lib.sh"
C=("$TRAIN" -check)
KJV="$ROOT/dev/data/kjv/kjv_train_000.bin"
MPIRUN=(mpirun --oversubscribe --allow-run-as-root)

# --- controls
expect_ok "control: -cp 2 -world 2" -- "${C[@]}" "${TINY[@]}" -cp 2 -world 2
expect_ok "control: -cp 4 -world 4 (seq 32: 8 chunks of 4)" -- "${C[@]}" "${TINY[@]}" -cp 4 -world 4
expect_ok "control: -tp 2 -cp 2 -sp 1 -world 4" -- "${C[@]}" "${TINY[@]}" -tp 2 -cp 2 -sp 1 -world 4
expect_ok "control: -cp 2 -pp 2 -dp 2 -zero 3 -world 8" -- "${C[@]}" "${TINY[@]}" -cp 2 -pp 2 -dp 2 -zero 3 -world 8
expect_ok "control: -cp 1" -- "${C[@]}" "${TINY[@]}" -cp 1

# --- bad values
for v in 0 -1 abc 1.5 "" 1e30 4294967297 nan; do
  expect_err "-cp '$v'" -- "${C[@]}" "${TINY[@]}" -cp "$v"
done
expect_err "-cp (no value)" "needs 1 value" -- "${C[@]}" -cp
expect_err "-cp 3 with seq 32: not 2*cp equal chunks" "2\\*cp = 6 equal chunks" -- "${C[@]}" "${TINY[@]}" -cp 3 -world 3
expect_err "-cp 64 with seq 32" "equal chunks" -- "${C[@]}" "${TINY[@]}" -cp 64 -world 64
expect_err "-cp 2 on 3 ranks" "world size 3" -- "${C[@]}" "${TINY[@]}" -cp 2 -world 3
expect_err "-cp 2 -tp 2 on 2 ranks" "tp\\*cp\\*pp\\*dp|multiple of" -- "${C[@]}" "${TINY[@]}" -cp 2 -tp 2 -world 2
expect_err "-cp 2 -tp 4 -sp 1 -seq 36: 18 rows per CP rank over 4 TP ranks" "-sp 1: tp=4 must divide" -- \
  "${C[@]}" "${TINY[@]}" -seq 36 -cp 2 -tp 4 -sp 1 -world 8
expect_err "-cp 2 -ramp auto" "splits over ranks" -- "${C[@]}" "${TINY[@]}" -cp 2 -world 2 -gb 8 -ramp auto 4 4
expect_err "-cp 100000 (beyond the limits)" "beyond the limits" -- "${C[@]}" "${TINY[@]}" -cp 100000

# --- real launches: a bad layout ends at start on every rank; a good one trains and resumes
if command -v mpirun > /dev/null && [ -f "$KJV" ]; then
  expect_err "launch: -cp 2 on 3 ranks (every rank exits, no hang)" "world size 3" -- \
    "${MPIRUN[@]}" -np 3 "$TRAIN" "${TINY[@]}" -model tiny -i "$KJV" -j '' -cp 2 -steps 1
  run_case "${MPIRUN[@]}" -np 2 -x OMP_NUM_THREADS=1 "$TRAIN" "${TINY[@]}" -model tiny -i "$KJV" -j '' -cp 2 -steps 3 \
    -ckpt-every 3 -o "$WORK/cp2"
  if [ "$RC" -eq 0 ] && [ -f "$WORK/cp2/ckpt_00000003/DONE" ]; then pass "launch: -cp 2 trains 3 steps and saves"
  else fail "launch: -cp 2 trains 3 steps and saves" "exit $RC: $(head -c 300 "$ERR" | tr '\n' ' ')"; fi
  run_case env OMP_NUM_THREADS=1 "$TRAIN" "${TINY[@]}" -model tiny -i "$KJV" -j '' -steps 4 -cp 1 -o "$WORK/cp2" -resume
  if [ "$RC" -eq 0 ] && grep -q '^step      4' "$OUT"; then pass "launch: its checkpoint resumes as one process"
  else fail "launch: its checkpoint resumes as one process" "exit $RC: $(head -c 300 "$ERR" | tr '\n' ' ')"; fi
else
  fail "launch cases" "mpirun or $KJV missing (bash dev/install.sh; make data)"
fi
attack_done
