#!/usr/bin/env bash
# family_cp.sh: context parallelism's inputs (-cp N, doc/cp.md). Bad values and layouts are
# one error line and a non-zero exit at start (-check, and a real launch on every rank: no
# hang); valid controls pass, and a 2-rank -cp 2 run trains and resumes as one process. -plan and
# -layout auto with -cp: pinned, searched from seq 8192 on (and never under -ramp auto), refused.
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

# --- the planner (-plan) and -layout auto with -cp: pinned, searched from seq 8192 on, refused
P=("$TRAIN" -plan -cluster h100 -nodes 1 "${TINY[@]}")
run_case "${P[@]}" -cp 2
if [ "$RC" -eq 0 ] && grep -q "^recommended: TP 1 x CP 2 x PP" "$OUT" && grep -q "TP/CP/PP/DP" "$OUT"; then
  pass "-plan -cp 2: pinned, a CP column and the CP in the recommendation"
else fail "-plan -cp 2: pinned, a CP column and the CP in the recommendation" "exit $RC: $(head -c 300 "$OUT" "$ERR" | tr '\n' ' ')"; fi
expect_err "-plan -cp 3 with seq 32: not 2*cp equal chunks" "2\\*cp = 6 equal chunks" -- "${P[@]}" -cp 3
expect_err "-plan -cp 3 -seq 48 on 8 GPUs: does not divide them" "-cp 3 does not divide the 8 GPUs" -- "${P[@]}" -seq 48 -cp 3
expect_err "-plan -cp 0" -- "${P[@]}" -cp 0
run_case "$TRAIN" -plan -model 530b -gb 1920 -ramp off -cluster selene-a100 -nodes 280 -plan-top 3
if [ "$RC" -eq 0 ] && ! grep -Eq "TP/CP|x CP " "$OUT"; then pass "-plan at seq 2048: CP not searched, no CP column"
else fail "-plan at seq 2048: CP not searched, no CP column" "exit $RC: $(grep -m1 -E "TP/CP|x CP " "$OUT")"; fi
run_case "$TRAIN" -plan -model 530b -seq 32768 -gb 120 -ramp off -cluster h100 -nodes 280 -plan-top 3
if [ "$RC" -eq 0 ] && grep -Eq "^recommended: TP [0-9]+ x CP ([2-9]|[1-9][0-9]) x " "$OUT"; then
  pass "-plan 530b -seq 32768 on 280 h100 nodes: searched, recommends CP > 1 (the planner.md example)"
else fail "-plan 530b -seq 32768 on 280 h100 nodes: recommends CP > 1" "exit $RC: $(head -c 300 "$ERR" | tr '\n' ' ')"; fi
# the activation limit counts a rank's seq/cp rows: 530b at seq 32768 needs -cp 2 on the CPU trainer
expect_err "530b -seq 32768 -cp 1: beyond the activation limit" "mb\\*\\(seq/cp\\).*raise -cp" -- \
  "${C[@]}" -model 530b -seq 32768 -V 8192 -gb 4 -ramp off -world 1
expect_ok "control: 530b -seq 32768 -cp 2 is within it" -- "${C[@]}" -model 530b -seq 32768 -V 8192 -gb 4 -ramp off \
  -cp 2 -world 2
L=(-seq 8192 -V 8192 -gb 8 -ramp off -threads 1 -layout auto -world 4)
run_case "${C[@]}" "${L[@]}" -gpu-mem 4
if [ "$RC" -eq 0 ] && grep -q "^layout auto: -tp .* -cp 2 (PREDICTED" "$OUT" && grep -q "cp=2" "$OUT"; then
  pass "-layout auto -seq 8192 -world 4 -gpu-mem 4: CP searched, -cp 2 chosen and valid"
else fail "-layout auto -seq 8192 -world 4 -gpu-mem 4: -cp 2 chosen" "exit $RC: $(head -c 300 "$OUT" "$ERR" | tr '\n' ' ')"; fi
run_case "${C[@]}" "${L[@]}" -gpu-mem 4 -cp 1
if [ "$RC" -eq 0 ] && grep -q "^layout auto: -tp " "$OUT" && ! grep -q "^layout auto: .*-cp" "$OUT" && grep -q "cp=1" "$OUT"; then
  pass "-layout auto ... -cp 1: pinned, no CP"
else fail "-layout auto ... -cp 1: pinned, no CP" "exit $RC: $(head -c 300 "$OUT" "$ERR" | tr '\n' ' ')"; fi
run_case "${C[@]}" -seq 8192 -V 8192 -gb 8 -threads 1 -layout auto -world 4 -gpu-mem 4 -ramp auto 4 4
if [ "$RC" -eq 0 ] && grep -q "^layout auto: -tp " "$OUT" && grep -q "cp=1" "$OUT"; then
  pass "-layout auto -ramp auto: never a CP layout (the noise scale needs whole gradients)"
else fail "-layout auto -ramp auto: never a CP layout" "exit $RC: $(head -c 300 "$OUT" "$ERR" | tr '\n' ' ')"; fi
expect_err "-layout auto -cp 3 -world 4: no layout" "no layout of 4 ranks fits" -- "${C[@]}" "${TINY[@]}" -layout auto \
  -world 4 -cp 3
if command -v mpirun > /dev/null && [ -f "$KJV" ]; then
  run_case "${MPIRUN[@]}" -np 2 -x OMP_NUM_THREADS=1 "$TRAIN" "${TINY[@]}" -model tiny -i "$KJV" -j '' -layout auto \
    -cp 2 -steps 2 -o "$WORK/auto_cp"
  if [ "$RC" -eq 0 ] && grep -q "^layout auto: -tp 1 .* -cp 2 (PREDICTED" "$OUT" && grep -q '^step      2' "$OUT" &&
    grep -q '"-cp","2"' "$WORK/auto_cp/config.json"; then
    pass "launch: -layout auto -cp 2 on 2 ranks trains, -cp 2 in the run record"
  else fail "launch: -layout auto -cp 2 on 2 ranks trains" "exit $RC: $(tail -c 300 "$OUT" "$ERR" | tr '\n' ' ')"; fi
fi
attack_done
