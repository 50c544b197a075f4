#!/usr/bin/env bash
# family_hang.sh: a stopped (SIGSTOP) rank must not hang the job. With -timeout 4 the
# step watchdog of a live rank ends the whole job within the limit (plus start-up slack)
# with one message naming the stopped rank, and the documented exit status 5; the same
# with the stopped rank 0. Also a single-process run is not ended by its watchdog while
# it makes progress, and -timeout takes only auto, 0 or a non-negative number. An MPMD
# launch whose ranks got different flags ends at start on every rank.
source "$(dirname "$0")/ckpt_common.sh"
need
ARGS="$TINY -steps 100000 -dp 2 -timeout 4"
ntrain() { local n; n=$(grep -c '"type":"train"' "$1" 2>/dev/null); echo "${n:-0}"; }
for victim in 1 0; do
  d=$SCRATCH/h$victim
  eval "timeout 120 $MPIRUN 2 $BIN $ARGS -o $d" > "$d.out" 2> "$d.err" & bg=$!
  i=0; while [ "$i" -lt 600 ] && [ "$(ntrain "$d/log.jsonl")" -lt 3 ]; do sleep 0.05; i=$((i + 1)); done
  pids=($(rank_pids "$d"))
  PIDS+=(${pids[@]+"${pids[@]}"})
  # pids are not in rank order: a rank is the process holding its own log file open
  target=""
  for p in ${pids[@]+"${pids[@]}"}; do
    if [ "$victim" = 0 ] && ls -l /proc/"$p"/fd 2>/dev/null | grep -q "$d/log.jsonl"; then target=$p; fi
    if [ "$victim" = 1 ] && ls -l /proc/"$p"/fd 2>/dev/null | grep -q "$d/log_rank00001.jsonl"; then target=$p; fi
  done
  t0=$(date +%s)
  [ -n "$target" ] && kill -STOP "$target"
  rc=0; wait "$bg" || rc=$?
  t1=$(date +%s)
  [ -n "$target" ] && kill -CONT "$target" 2>/dev/null
  check "stopped rank $victim: the job ends in $((t1 - t0)) s (limit 4 s, < 20 s), exit $rc (want 5)" \
    bash -c "[ -n '$target' ] && [ $rc -eq 5 ] && [ $((t1 - t0)) -lt 20 ]"
  check "stopped rank $victim: the watchdog's message names rank $victim as not responding" \
    grep -q "watchdog (rank $((1 - victim))): no progress .*rank $victim (pid $target) is not responding" "$d.err"
done
run_tg "$SCRATCH/s.out" "$SCRATCH/s.err" "$TINY -steps 20 -timeout 1"
check "single process making progress with -timeout 1: not ended (20 steps, exit 0)" bash -c "[ $RC -eq 0 ] && grep -q '^step     20' '$SCRATCH/s.out'"
for v in -1 abc; do
  run_tg "$SCRATCH/b.out" "$SCRATCH/b.err" "$TINY -steps 2 -timeout $v"
  check "-timeout $v is one error line" one_line_error "$SCRATCH/b.err" "$RC" "-timeout"
done
# validation with 3 stages: the middle stage reads no tokens, so it once ran a different
# number of validation micro-batches than its neighbours and the job hung
d=$SCRATCH/pv
rc=0; eval "timeout 120 $MPIRUN 3 $BIN $TINY -j '${KJV%_train_*}_val_*.bin' -pp 3 -L 3 -steps 3 -val-every 2 -val-samples 8 -o $d" > "$d.out" 2> "$d.err" || rc=$?
check "3 stages with validation (the middle stage reads no tokens): the job ends, exit $rc (want 0), val_loss printed" \
  bash -c "[ $rc -eq 0 ] && grep -q 'val_loss' '$d.out'"
# an MPMD launch whose second rank has another -lr: refused at start by every rank, no hang
rc=0; eval "timeout 60 $MPIRUN 1 $BIN $TINY -dp 2 -steps 2 -lr 1e-3 : -np 1 $BIN $TINY -dp 2 -steps 2 -lr 2e-3" \
  > "$SCRATCH/mpmd.out" 2> "$SCRATCH/mpmd.err" || rc=$?
check "MPMD ranks with different -lr: the job ends at start (exit $rc, not 0 or a timeout) with the reason" \
  bash -c "[ $rc -ne 0 ] && [ $rc -ne 124 ] && grep -q '^error: the ranks were started with different flags' '$SCRATCH/mpmd.err'"
summary
