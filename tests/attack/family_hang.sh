#!/usr/bin/env bash
# family_hang.sh: a stopped (SIGSTOP) rank must not hang the job. With -timeout 4 the
# step watchdog of a live rank ends the whole job within the limit (plus start-up slack)
# with one message naming the stopped rank, and the documented exit status 5; the same
# with the stopped rank 0. Also a single-process run is not ended by its watchdog while
# it makes progress, and -timeout takes only auto, 0 or a non-negative number. An MPMD
# launch whose ranks got different flags ends at start on every rank.
# Where each rank waits (llmc/host/colltrace.h): a SIGSTOPped rank of a 2x2x2 job is named
# with the collective it was in, every rank gets a line, and a planted deadlock (a mutant in
# which rank 0 skips the tied embedding's all-reduce of step 3) is named with both sides.
source "$(dirname "$0")/ckpt_common.sh"
need
DEADLOCK_BIN=${DEADLOCK_BIN:-build/mutants/train_gpt_deadlock}
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
# a 2x2x2 job with rank 5 stopped: named, with its last collective, and every rank's line
d=$SCRATCH/h3d
eval "timeout 120 $MPIRUN 8 $BIN $TINY -gb 8 -steps 100000 -tp 2 -pp 2 -dp 2 -timeout 4 -o $d" > "$d.out" 2> "$d.err" & bg=$!
i=0; while [ "$i" -lt 1200 ] && [ "$(ntrain "$d/log.jsonl")" -lt 3 ]; do sleep 0.05; i=$((i + 1)); done
target=""
for p in $(rank_pids "$d"); do
  PIDS+=("$p")
  ls -l /proc/"$p"/fd 2>/dev/null | grep -q "$d/log_rank00005.jsonl" && target=$p
done
[ -n "$target" ] && kill -STOP "$target"
rc=0; wait "$bg" || rc=$?
[ -n "$target" ] && kill -CONT "$target" 2>/dev/null
check "2x2x2, rank 5 stopped: exit $rc (want 5)" bash -c "[ -n '$target' ] && [ $rc -eq 5 ]"
check "2x2x2, rank 5 stopped: named as not responding, with the collective it was in" \
  grep -Eq "rank 5 \(pid $target\) is not responding.*; there it (waits [0-9]+ s in|computes; last left) (tp|dp|pp|emb|world) [a-z_]+ #[0-9]+ " "$d.err"
check "2x2x2, rank 5 stopped: one report with a line per rank (tp, dp, pp coordinates)" \
  bash -c "[ \$(grep -c '^watchdog: where each rank is:' '$d.err') -eq 1 ] && \
    [ \$(grep -cE '^watchdog:   rank [0-7] \(tp [01], dp [01], pp [01]\) ' '$d.err') -eq 8 ]"
# the planted deadlock: every rank alive; rank 0 waits in the world all-reduce that rank 4,
# still in the embedding all-reduce rank 0 skipped, never reaches
if [ -x "$DEADLOCK_BIN" ]; then
  d=$SCRATCH/dl
  rc=0; eval "timeout 120 $MPIRUN 8 $DEADLOCK_BIN $TINY -gb 8 -steps 6 -tp 2 -pp 2 -dp 2 -timeout 4 -o $d" \
    > "$d.out" 2> "$d.err" || rc=$?
  check "planted deadlock: the job ends by the watchdog, exit $rc (want 5), after 2 steps" \
    bash -c "[ $rc -eq 5 ] && [ \$(grep -c '\"type\":\"train\"' '$d/log.jsonl') -eq 2 ]"
  check "planted deadlock: named as a deadlock, with both sides (rank 0 in world, rank 4 in emb)" \
    bash -c "grep -q 'the ranks wait for each other (a deadlock' '$d.err' && \
      grep -Eq 'rank 0 waits in world allreduce #[0-9]+ \(step 3\), but rank 4 has entered only' '$d.err' && \
      grep -Eq 'rank 4 waits in emb allreduce #3 \(step 3\), but rank 0 has entered only 2 emb operations' '$d.err'"
else
  fail "planted deadlock: $DEADLOCK_BIN missing (make build/mutants/train_gpt_deadlock)"
fi
run_tg "$SCRATCH/s.out" "$SCRATCH/s.err" "$TINY -steps 20 -timeout 1"
check "single process making progress with -timeout 1: not ended (20 steps, exit 0)" bash -c "[ $RC -eq 0 ] && grep -q '^step     20' '$SCRATCH/s.out'"
# without -o the heartbeat file is /tmp/train_gpt_heartbeat_PID: removed as soon as every rank has it
# mapped, so a run that is killed (or aborted by its watchdog) leaves nothing in /tmp
eval "exec $BIN $TINY -steps 100000" > "$SCRATCH/hb.out" 2> "$SCRATCH/hb.err" & hb=$!
PIDS+=("$hb")
i=0; while [ "$i" -lt 600 ] && ! grep -q '^step  *2 ' "$SCRATCH/hb.out"; do sleep 0.05; i=$((i + 1)); done
kill -9 "$hb" 2>/dev/null; wait "$hb" 2>/dev/null
check "a run without -o, killed with -9 after step 2: no /tmp/train_gpt_heartbeat_$hb left behind" \
  bash -c "grep -q '^step  *2 ' '$SCRATCH/hb.out' && [ ! -e /tmp/train_gpt_heartbeat_$hb ]"
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
