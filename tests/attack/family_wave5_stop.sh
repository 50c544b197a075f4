#!/usr/bin/env bash
# family_wave5_stop.sh: stopping a -cp 2 -zero 3 run on 2 ranks. SIGTERM to every rank, SIGINT to
# one, and with -ckpt-async 1 and a slow writer (the test-only mutant) SIGTERM to every rank and
# SIGUSR1 to one while a background save is written: every rank ends within 30 s with exit 4 after
# the same step, the stop's checkpoint complete, -resume bit-identical to the uninterrupted run. A
# second SIGTERM mid-save kills at once and leaves no partial checkpoint marked complete; kill -9 of
# one rank mid-write keeps the older checkpoint; -on-spike rewind under -ckpt-async equals
# -skip-data byte for byte; a disk that fills during a background save of 2 ranks (tmpfs, root).
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/wave5_lib.sh"

# --- 1. signals and kill -9 on a -cp 2 -zero 3 run of 12 steps (checkpoints only at a stop and the end; the
# reference also at 4 and 8: a checkpoint does not change the training)
ARGS=("${S[@]}" "${CPZ[@]}" -steps 12 -ckpt-every 100)
REF12=$WORK/ref12
timeout -k 5 90 "${MPI[@]}" -np 2 "$TRAIN" "${ARGS[@]}" -ckpt-every 4 -o "$REF12" > "$WORK/ref12.out" 2>&1
verdict "reference: -cp 2 -zero 3, 12 steps, checkpoints 4, 8, 12" "[ -f '$REF12/ckpt_00000004/DONE' ] && [ -f '$REF12/ckpt_00000012/DONE' ]"
# sig_case NAME SIG WHO(all|1) BIN ENV ASYNC: signal after step 3, the job must end within 30 s
sig_case() {
  local name=$1 sig=$2 who=$3 bin=$4 env=$5 d="$WORK/s$RANDOM" t0 t1 rc
  shift 5
  local x=()
  [ -n "$env" ] && x=(-x "${env%%=*}")
  # shellcheck disable=SC2086
  timeout -k 5 120 env $env "${MPI[@]}" -np 2 "${x[@]}" "$bin" "${ARGS[@]}" "$@" -o "$d" > "$d.out" 2> "$d.err" &
  local bg=$!
  wait_steps "$d/log.jsonl" 3
  local pids=()
  mapfile -t pids < <(tg_pids "$d")
  t0=$(date +%s)
  if [ "$who" = all ]; then kill -s "$sig" "${pids[@]}" 2> /dev/null; else kill -s "$sig" "${pids[1]:-0}" 2> /dev/null; fi
  rc=0
  wait "$bg" || rc=$?
  t1=$(date +%s)
  local k s0 s1
  k=$(ls -d "$d"/ckpt_* 2> /dev/null | tail -1)
  s0=$(tail -1 "$d/log.jsonl" | sed -nE 's/.*"event":"stop","step":([0-9]+).*/\1/p')
  s1=$(tail -1 "$d/log_rank00001.jsonl" 2> /dev/null | sed -nE 's/.*"event":"stop","step":([0-9]+).*/\1/p')
  verdict "$name: ${#pids[@]} ranks found, exit 4 in $((t1 - t0)) s (<= 30), both stop after step ${s0:-none}, its checkpoint complete (rc $rc)" \
    "[ ${#pids[@]} = 2 ] && [ $rc = 4 ] && [ $((t1 - t0)) -le 30 ] && [ -n '$s0' ] && [ '$s0' = '$s1' ] && [ -f '$k/DONE' ] && [ -f '$k/rank_00001.bin' ] && no_partial '$d'" \
    "$(tail -c 200 "$d.err" | tr '\n' ' ')"
  rc=0
  timeout -k 5 90 "${MPI[@]}" -np 2 "$TRAIN" "${ARGS[@]}" -o "$d" -resume >> "$d.out" 2>> "$d.err" || rc=$?
  verdict "$name, then -resume: bit-identical to the uninterrupted run (rc $rc)" \
    "[ $rc = 0 ] && same_ckpt '$REF12/ckpt_00000012' '$d/ckpt_00000012' && close_losses '$REF12' '$d' 0 1 && [ \$(losses '$d' | wc -l) = 12 ]"
  SIG_DIR=$d
}
sig_case "SIGTERM to every rank" TERM all "$TRAIN" ""
sig_case "SIGINT to rank 1 only" INT 1 "$TRAIN" ""
sig_case "SIGTERM to every rank, -ckpt-async 1, -ckpt-every 4, a 1.5 s writer" TERM all "$MUT" \
  LLMC_TEST_CKPT_DELAY_MS=1500 -ckpt-async 1 -ckpt-every 4
verdict "... the step-4 background save completed before the stop's save" \
  "[ -f '$SIG_DIR/ckpt_00000004/DONE' ] || grep -q '\"event\":\"checkpoint\",\"step\":4,' '$SIG_DIR/log.jsonl'"
sig_case "SIGUSR1 to one rank, -ckpt-async 1 with a 1.5 s writer" USR1 1 "$MUT" LLMC_TEST_CKPT_DELAY_MS=1500 \
  -ckpt-async 1 -ckpt-every 4
# a second SIGTERM while the first one's background saves are written kills at once (SA_RESETHAND): the
# save in flight never gets a DONE, the newest complete checkpoint stays, and -resume is bit-identical
d=$WORK/twice
timeout -k 5 120 env LLMC_TEST_CKPT_DELAY_MS=1500 "${MPI[@]}" -np 2 -x LLMC_TEST_CKPT_DELAY_MS "$MUT" "${ARGS[@]}" \
  -ckpt-async 1 -ckpt-every 2 -o "$d" > "$d.out" 2> "$d.err" &
bg=$!
i=0
while [ "$i" -lt 400 ] && ! { [ -f "$d/ckpt_00000002/DONE" ] && [ -d "$d/ckpt_00000004.tmp" ]; }; do sleep 0.05; i=$((i + 1)); done
mapfile -t pids < <(tg_pids "$d")
kill -TERM "${pids[@]}" 2> /dev/null
sleep 0.3
kill -TERM "${pids[@]}" 2> /dev/null
rc=0
wait "$bg" || rc=$?
verdict "a second SIGTERM to every rank mid background save: the job ends (rc $rc), ckpt_00000002 complete, nothing partial has DONE" \
  "[ ${#pids[@]} = 2 ] && [ $rc -ne 0 ] && [ $rc -ne 124 ] && [ -f '$d/ckpt_00000002/DONE' ] && ! compgen -G '$d/ckpt_*.tmp/DONE' > /dev/null && all_done '$d'"
rc=0
timeout -k 5 90 "${MPI[@]}" -np 2 "$TRAIN" "${ARGS[@]}" -o "$d" -resume >> "$d.out" 2>> "$d.err" || rc=$?
verdict "... -resume from the newest complete one: bit-identical to the uninterrupted run, no .tmp left (rc $rc)" \
  "[ $rc = 0 ] && same_ckpt '$REF12/ckpt_00000012' '$d/ckpt_00000012' && close_losses '$REF12' '$d' 0 1 && [ \$(losses '$d' | wc -l) = 12 ] && no_partial '$d'"

# -on-spike rewind under -cp 2 -zero 3 -ckpt-async 1 (the rewind reloads sharded weights while a save may be in
# flight): the run equals one given -skip-data over the same range, byte for byte (family_resume's poison data)
"$PY" - "$WORK" << 'PY'
import random, struct, sys
rng = random.Random(5)
toks = [(i * 7 + i // 13) % 300 for i in range(12000)]
for i in range(60 * 32, 64 * 32 + 1):
    toks[i] = rng.randrange(300)
with open(sys.argv[1] + "/poison_000.bin", "wb") as f:
    f.write(struct.pack("<256i", 20240520, 1, len(toks), *([0] * 253)))
    f.write(struct.pack("<%dH" % len(toks), *toks))
PY
RW=(-L 2 -H 64 -heads 4 -seq 32 -V 300 -vpad 128 -mb 1 -gb 4 -ramp off -lr 3e-3 -warmup 0 -tokens 1e9 -j '' -shuffle 0
  -seed 7 -threads 1 -i "$WORK/poison_000.bin" -steps 20 -ckpt-every 2 "${CPZ[@]}")
timeout -k 5 60 "${MPI[@]}" -np 2 "$TRAIN" "${RW[@]}" -ckpt-async 1 -skip-spikes 4 -spike-window 8 -on-spike rewind 2 \
  -o "$WORK/rw" > "$WORK/rw.out" 2>&1
rc=$?
timeout -k 5 60 "${MPI[@]}" -np 2 "$TRAIN" "${RW[@]}" -skip-data 56:8 -o "$WORK/sk" > "$WORK/sk.out" 2>&1
verdict "-on-spike rewind under -cp 2 -zero 3 -ckpt-async 1: back to ckpt 14 once, step 20 = the -skip-data 56:8 run's (rc $rc)" \
  "[ $rc = 0 ] && [ \$(grep -c '^rewind ' '$WORK/rw.out') = 1 ] && grep -q 'back to .*ckpt_00000014' '$WORK/rw.out' && same_ckpt '$WORK/sk/ckpt_00000020' '$WORK/rw/ckpt_00000020'" \
  "$(grep -m2 '^rewind\|^error' "$WORK/rw.out" | tr '\n' ' ')"

# kill -9 of rank 1 mid-write of the step-4 background save: the job ends, step 2 stays the newest complete
ARGS=("${S[@]}" "${CPZ[@]}" -steps 4 -ckpt-every 2)
d=$WORK/k9
rc=0
timeout -k 5 60 env LLMC_TEST_CKPT_KILL=mid_file:4:1 "${MPI[@]}" -np 2 -x LLMC_TEST_CKPT_KILL "$MUT" "${ARGS[@]}" \
  -ckpt-async 1 -o "$d" > "$d.out" 2> "$d.err" || rc=$?
verdict "kill -9 of rank 1 mid-write of the step-4 background save: the job ends (rc $rc), ckpt_00000002 complete, no ckpt_00000004" \
  "[ $rc -ne 0 ] && [ $rc -ne 124 ] && grep -q 'kill -9 at mid_file' '$d.err' && [ -f '$d/ckpt_00000002/DONE' ] && [ ! -e '$d/ckpt_00000004/DONE' ]"
rc=0
timeout -k 5 60 "${MPI[@]}" -np 2 "$TRAIN" "${ARGS[@]}" -ckpt-async 1 -o "$d" -resume >> "$d.out" 2>> "$d.err" || rc=$?
verdict "... -resume takes ckpt_00000002 and ends byte-equal to the uninterrupted run (rc $rc)" \
  "[ $rc = 0 ] && grep -q 'resumed from .*ckpt_00000002' '$d.out' && same_ckpt '$REF12/ckpt_00000004' '$d/ckpt_00000004' && no_partial '$d'"

# --- 2. the disk fills during a background save of 2 ranks (a 20 MB tmpfs: a checkpoint is 22 MB)
MNT=$WORK/mnt
mkdir -p "$MNT"
if mount -t tmpfs -o size=20m tmpfs "$MNT" 2> /dev/null; then
  d=$MNT/run
  run_case "${MPI[@]}" -np 2 "$TRAIN" "${ARGS[@]}" -ckpt-async 1 -o "$d"
  verdict "tmpfs full under the step-2 background save of -cp 2 -zero 3: exit 1, 'checkpoint at step 2 failed', nothing partial, no DONE" \
    "[ $RC = 1 ] && grep -q '^error: checkpoint at step 2 failed' '$ERR' && no_partial '$d' && ! compgen -G '$d/ckpt_*/DONE' > /dev/null" \
    "exit $RC: $(head -c 300 "$ERR" | tr '\n' ' ')"
  umount "$MNT"
else
  echo "note: mount -t tmpfs is not allowed here: the full-disk case is skipped"
fi

attack_done
