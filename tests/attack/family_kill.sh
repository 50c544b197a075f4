#!/usr/bin/env bash
# family_kill.sh: kill -9 at random moments (inside steps, during checkpoint saves, at
# start-up) of a single-process run (10 points) and of a 2x1x2 MPI run (tp 2, dp 2,
# ZeRO-1: 5 points, one random rank killed, as when a node dies). After each kill the run
# is continued the way scripts/lib.sh does (-resume when a complete checkpoint exists)
# and must end bit-identical to an uninterrupted run: the final checkpoint's files byte
# for byte, and the log's steps and losses (each step once). A point is "after K logged
# steps + a few ms", drawn from a fixed seed (KILL_SEED) so a failure can be replayed.
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
# a kill point: after K logged steps (K random in 0..STEPS-1), plus a random 0-150 ms, so
# it lands inside a step or a checkpoint save whatever the machine's load
kill_point() { # DIR: waits for the point; sets AT (a description)
  local k=$(( RANDOM % STEPS )) ms=$(( RANDOM % 150 )) i=0 n
  while [ "$i" -lt 1200 ]; do
    n=$(grep -c '"type":"train"' "$1/log.jsonl" 2>/dev/null); n=${n:-0}
    if [ "$k" -eq 0 ] && [ -n "$(rank_pids "$1")" ]; then break; fi
    [ "$n" -ge "$k" ] && [ "$k" -gt 0 ] && break
    sleep 0.025; i=$((i + 1))
  done
  sleep "$(printf '0.%03d' "$ms")"
  AT="step $k + $ms ms"
}
# kill_resume NAME D LAUNCH VICTIM: a run in D (LAUNCH: the mpirun prefix or ""), killed with
# -9 at a kill point (every process, or with VICTIM >= 0 the rank VICTIM), continued up to 3
# times, must end with $REF's final checkpoint and log
kill_resume() {
  local name=$1 d=$2 launch=$3 victim=$4 try at bg p saved k rc pids
  # a point drawn after the run's last step can miss it (the run ended first, more often on a
  # fast machine): draw again, up to 3 times, from a fresh directory
  for try in 1 2 3; do
    rm -rf "$d" "$d.out" "$d.err"
    (continue_run "$d" "$launch") & bg=$!
    kill_point "$d"; at=$AT
    pids=($(rank_pids "$d"))
    if [ "$victim" -lt 0 ]; then
      for p in ${pids[@]+"${pids[@]}"}; do kill -9 "$p" 2>/dev/null; done
    elif [ "${#pids[@]}" -gt 0 ]; then
      kill -9 "${pids[$(( victim % ${#pids[@]} ))]}" 2>/dev/null
    fi
    wait "$bg" 2>/dev/null
    [ "${#pids[@]}" -gt 0 ] && break
  done
  saved=$(ls -d "$d"/ckpt_*/DONE 2>/dev/null | wc -l)
  if [ "${#pids[@]}" -eq 0 ]; then fail "$name: kill -9 at ${at}" "missed 3 times: no process running"; rm -rf "$d"; return; fi
  k=0; rc=1
  while [ "$k" -lt 3 ]; do continue_run "$d" "$launch" && { rc=0; break; }; k=$((k + 1)); done
  local what="$name: kill -9"
  [ "$victim" -ge 0 ] && what="$name: kill -9 of rank $victim"
  if [ "$rc" -eq 0 ] && same_ckpt "$REF/ckpt_0000000$STEPS" "$d/ckpt_0000000$STEPS" && same_log "$REF/log.jsonl" "$d/log.jsonl"; then
    pass "$what at ${at} ($saved checkpoints complete), resume: bit-identical checkpoint and log"
  else
    fail "$what at ${at}, resume: bit-identical checkpoint and log" "rc $rc, $(tail -1 "$d.err")"
  fi
  rm -rf "$d"
}
for i in $(seq 1 10); do kill_resume single "$SCRATCH/k1_$i" "" -1; done

# 2x1x2 under MPI (4 ranks)
L="$MPIRUN 4"
ARGS="$TINY -steps $STEPS -ckpt-every 2 -tp 2 -dp 2 -zero 1"
REF=$SCRATCH/ref4
eval "timeout 300 $L $BIN $ARGS -o $REF" > "$SCRATCH/ref4.out" 2>&1
check "2x1x2: reference run" [ -f "$REF/ckpt_0000000$STEPS/DONE" ]
for i in $(seq 1 5); do
  victim=$(( RANDOM % 4 ))
  kill_resume 2x1x2 "$SCRATCH/k4_$i" "timeout 300 $L" "$victim"
done
summary
