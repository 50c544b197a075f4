#!/usr/bin/env bash
# family_kill.sh: kill -9 at random moments (inside steps, during checkpoint saves, at
# start-up) of a single-process run (10 points) and of a 2x1x2 MPI run (tp 2, dp 2,
# ZeRO-1: 5 points, one random rank killed, as when a node dies). After each kill the run
# is continued the way scripts/lib.sh does (-resume when a complete checkpoint exists)
# and must end bit-identical to an uninterrupted run: the final checkpoint's files byte
# for byte, and the log's steps and losses (each step once). Points come from a fixed
# seed (KILL_SEED) so a failure can be replayed.
source "$(dirname "$0")/ckpt_common.sh"
need
RANDOM=${KILL_SEED:-1302}
STEPS=8
ARGS="$TINY -steps $STEPS -ckpt-every 2"

continue_run() { # DIR LAUNCH...: one attempt, resuming if there is a complete checkpoint
  local d=$1; shift
  local res=""
  compgen -G "$d/ckpt_*/DONE" > /dev/null && res=-resume
  eval "$* $BIN $ARGS -o $d $res" >> "$d.out" 2>> "$d.err"
}

same_log() { diff <(steps_losses "$1") <(steps_losses "$2") > /dev/null; }

# single process
REF=$SCRATCH/ref1
eval "$BIN $ARGS -o $REF" > "$SCRATCH/ref1.out" 2>&1
check "single: reference run" [ -f "$REF/ckpt_0000000$STEPS/DONE" ]
# how long a run takes, to place the kills inside it
t0=$(date +%s%N); eval "$BIN $ARGS -o $SCRATCH/timing" > /dev/null 2>&1; t1=$(date +%s%N)
span_ms=$(( (t1 - t0) / 1000000 ))
for i in $(seq 1 10); do
  d=$SCRATCH/k1_$i
  at=$(( 50 + RANDOM % (span_ms > 100 ? span_ms : 100) ))
  (continue_run "$d" "") & bg=$!
  sleep "$(printf '0.%03d' $((at % 1000)))"; [ "$at" -ge 1000 ] && sleep $((at / 1000))
  pids=($(rank_pids "$d"))
  for p in ${pids[@]+"${pids[@]}"}; do kill -9 "$p" 2>/dev/null; done
  wait "$bg" 2>/dev/null
  saved=$(ls -d "$d"/ckpt_*/DONE 2>/dev/null | wc -l)
  if [ "${#pids[@]}" -eq 0 ]; then fail "single: kill -9 at ${at} ms" "missed: the run had ended"; rm -rf "$d"; continue; fi
  k=0; rc=1
  while [ "$k" -lt 3 ]; do continue_run "$d" "" && { rc=0; break; }; k=$((k + 1)); done
  if [ "$rc" -eq 0 ] && same_ckpt "$REF/ckpt_0000000$STEPS" "$d/ckpt_0000000$STEPS" && same_log "$REF/log.jsonl" "$d/log.jsonl"; then
    pass "single: kill -9 at ${at} ms ($saved checkpoints complete), resume: bit-identical checkpoint and log"
  else
    fail "single: kill -9 at ${at} ms, resume: bit-identical checkpoint and log" "rc $rc, $(tail -1 "$d.err")"
  fi
  rm -rf "$d"
done

# 2x1x2 under MPI (4 ranks)
L="$MPIRUN 4"
ARGS="$TINY -steps $STEPS -ckpt-every 2 -tp 2 -dp 2 -zero 1"
REF=$SCRATCH/ref4
eval "timeout 300 $L $BIN $ARGS -o $REF" > "$SCRATCH/ref4.out" 2>&1
check "2x1x2: reference run" [ -f "$REF/ckpt_0000000$STEPS/DONE" ]
t0=$(date +%s%N); eval "timeout 300 $L $BIN $ARGS -o $SCRATCH/timing4" > /dev/null 2>&1; t1=$(date +%s%N)
span_ms=$(( (t1 - t0) / 1000000 ))
for i in $(seq 1 5); do
  d=$SCRATCH/k4_$i
  at=$(( 300 + RANDOM % (span_ms > 400 ? span_ms - 300 : 100) ))
  victim=$(( RANDOM % 4 ))
  (continue_run "$d" "timeout 300 $L") & bg=$!
  sleep "$(printf '0.%03d' $((at % 1000)))"; [ "$at" -ge 1000 ] && sleep $((at / 1000))
  pids=($(rank_pids "$d"))
  [ "${#pids[@]}" -gt 0 ] && kill -9 "${pids[$(( victim % ${#pids[@]} ))]}" 2>/dev/null
  wait "$bg" 2>/dev/null
  saved=$(ls -d "$d"/ckpt_*/DONE 2>/dev/null | wc -l)
  if [ "${#pids[@]}" -eq 0 ]; then fail "2x1x2: kill -9 at ${at} ms" "missed: no rank running"; rm -rf "$d"; continue; fi
  k=0; rc=1
  while [ "$k" -lt 3 ]; do continue_run "$d" "timeout 300 $L" && { rc=0; break; }; k=$((k + 1)); done
  if [ "$rc" -eq 0 ] && same_ckpt "$REF/ckpt_0000000$STEPS" "$d/ckpt_0000000$STEPS" && same_log "$REF/log.jsonl" "$d/log.jsonl"; then
    pass "2x1x2: kill -9 of rank $victim at ${at} ms ($saved checkpoints complete), resume: bit-identical checkpoint and log"
  else
    fail "2x1x2: kill -9 of one rank at ${at} ms, resume: bit-identical checkpoint and log" "rc $rc, $(tail -1 "$d.err")"
  fi
  rm -rf "$d"
done
summary
