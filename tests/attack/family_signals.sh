#!/usr/bin/env bash
# family_signals.sh: SIGTERM, SIGINT and SIGUSR1 mid-run end the run gracefully: the
# step finishes, a checkpoint is saved, the exit status is 4, and -resume continues
# bit-identically to an uninterrupted run (final checkpoint byte for byte, the log's
# steps and losses once each). Single process and a 2-rank MPI run (only one rank is
# signalled: both must stop after the same step). scripts/lib.sh's loop resumes on 4.
source "$(dirname "$0")/ckpt_common.sh"
need
STEPS=12
ARGS="$TINY -steps $STEPS -ckpt-every 100"   # checkpoints only on stop and after the last step
same_log() { diff <(steps_losses "$1") <(steps_losses "$2") > /dev/null; }
ntrain() { local n; n=$(grep -c '"type":"train"' "$1" 2>/dev/null); echo "${n:-0}"; }
wait_steps() { # LOG N: until the log holds N train records (20 s at most)
  local i=0; while [ "$i" -lt 400 ]; do [ "$(ntrain "$1")" -ge "$2" ] && return 0; sleep 0.05; i=$((i + 1)); done; return 1
}

REF=$SCRATCH/ref
eval "$BIN $ARGS -o $REF" > "$SCRATCH/ref.out" 2>&1
check "single: reference run" [ -f "$REF/ckpt_000000$STEPS/DONE" ]
for sig in TERM INT USR1; do
  d=$SCRATCH/s_$sig
  eval "$BIN $ARGS -o $d" > "$d.out" 2> "$d.err" & bg=$!
  wait_steps "$d/log.jsonl" 3
  pid=$(rank_pids "$d" | head -1)
  [ -n "$pid" ] && kill -s "$sig" "$pid"
  rc=0; wait "$bg" || rc=$?
  k=$(ls -d "$d"/ckpt_* 2>/dev/null | head -1)
  check "single: SIG$sig after step >= 3 -> exit 4, message, checkpoint" \
    bash -c "[ $rc -eq 4 ] && grep -q 'stopped by a signal after step' '$d.err' && [ -f '$k/DONE' ] && [ '$k' != '$d/ckpt_000000$STEPS' ]"
  ks=$(echo "${k##*ckpt_}" | sed 's/^0*//'); ks=${ks:-none}
  check "single: SIG$sig: the log ends with a stop event at the checkpoint's step ($ks)" \
    bash -c "tail -1 '$d/log.jsonl' | grep -q '\"event\":\"stop\",\"step\":$ks,'"
  rc=0; eval "$BIN $ARGS -o $d -resume" >> "$d.out" 2>> "$d.err" || rc=$?
  check "single: SIG$sig then -resume: bit-identical to the uninterrupted run" \
    bash -c "$(declare -f same_ckpt steps_losses same_log); [ $rc -eq 0 ] && same_ckpt '$REF/ckpt_000000$STEPS' '$d/ckpt_000000$STEPS' && same_log '$REF/log.jsonl' '$d/log.jsonl'"
done
# without -o: still a clean stop with its status
eval "$BIN $TINY -steps 200" > "$SCRATCH/noo.out" 2> "$SCRATCH/noo.err" & bg=$!
i=0; while [ "$i" -lt 400 ] && ! grep -q '^step      3' "$SCRATCH/noo.out"; do sleep 0.05; i=$((i + 1)); done
for p in $(pgrep -f -- "-steps 200$" ); do [ "$(cat /proc/$p/comm 2>/dev/null)" = "$(basename "$BIN")" ] && kill -TERM "$p"; done
rc=0; wait "$bg" || rc=$?
check "single, no -o: SIGTERM -> exit 4, 'nothing saved'" bash -c "[ $rc -eq 4 ] && grep -q 'nothing saved' '$SCRATCH/noo.err'"

# 2 ranks (dp 2, ZeRO-1): one rank signalled, both stop after the same step
if mpi_ok; then
ARGS="$TINY -steps $STEPS -ckpt-every 100 -dp 2 -zero 1"
REF=$SCRATCH/ref2
eval "timeout 300 $MPIRUN 2 $BIN $ARGS -o $REF" > "$SCRATCH/ref2.out" 2>&1
check "2 ranks: reference run" [ -f "$REF/ckpt_000000$STEPS/DONE" ]
d=$SCRATCH/m
eval "timeout 300 $MPIRUN 2 $BIN $ARGS -o $d" > "$d.out" 2> "$d.err" & bg=$!
wait_steps "$d/log.jsonl" 3
pids=($(rank_pids "$d"))
[ "${#pids[@]}" -eq 2 ] && kill -TERM "${pids[1]}"
rc=0; wait "$bg" || rc=$?
k=$(ls -d "$d"/ckpt_* 2>/dev/null | head -1)
s0=$(tail -1 "$d/log.jsonl" | sed -nE 's/.*"event":"stop","step":([0-9]+).*/\1/p')
s1=$(tail -1 "$d/log_rank00001.jsonl" 2>/dev/null | sed -nE 's/.*"event":"stop","step":([0-9]+).*/\1/p')
check "2 ranks: SIGTERM to one rank -> exit 4, both ranks stop after step $s0 and save" \
  bash -c "[ $rc -eq 4 ] && [ -n '$s0' ] && [ '$s0' = '$s1' ] && [ -f '$k/DONE' ] && [ -f '$k/rank_00001.bin' ]"
rc=0; eval "timeout 300 $MPIRUN 2 $BIN $ARGS -o $d -resume" >> "$d.out" 2>> "$d.err" || rc=$?
check "2 ranks: -resume after the stop is bit-identical to the uninterrupted run" \
  bash -c "$(declare -f same_ckpt steps_losses same_log); [ $rc -eq 0 ] && same_ckpt '$REF/ckpt_000000$STEPS' '$d/ckpt_000000$STEPS' && same_log '$REF/log.jsonl' '$d/log.jsonl'"

fi

# scripts/lib.sh: exit 4 is continued at once (no wait, not a stall), and the loop ends 0
stub=$SCRATCH/stub.sh
cat > "$stub" <<STUB
#!/usr/bin/env bash
for a in "\$@"; do [ "\$a" = -check ] && exit 0; done
n=\$(cat "$SCRATCH/attempts" 2>/dev/null || echo 0); echo \$((n + 1)) > "$SCRATCH/attempts"
[ "\$n" -lt 2 ] && exit 4
exit 0
STUB
chmod +x "$stub"
t0=$(date +%s)
rc=0; (source scripts/lib.sh; WORLD=1; LAUNCH=(); TRAINER=$stub; OUT_DIR=$SCRATCH/lib; FLAGS=(-o "$OUT_DIR"); RESTART_WAIT=30 llmc_launch) > "$SCRATCH/lib.out" 2>&1 || rc=$?
t1=$(date +%s)
check "lib.sh: two exit-4 stops are resumed at once, the third attempt finishes (rc $rc, $((t1 - t0)) s)" \
  bash -c "[ $rc -eq 0 ] && [ \"\$(cat '$SCRATCH/attempts')\" = 3 ] && [ $((t1 - t0)) -lt 20 ]"
summary
