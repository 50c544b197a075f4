#!/usr/bin/env bash
# family_async.sh: background checkpoints (-ckpt-async 1) under failure. kill -9 at three points of
# a background write (its file created but empty, half written, every file written but no DONE), on
# one process and on one rank of two; a disk that fills (tmpfs; ulimit -f) during a background
# write; SIGTERM while a save is being written; saves that come due while the previous one still
# writes; -keep 1 while a save is in flight. The points are reached exactly by the test-only mutant
# build/mutants/train_gpt_ckpt_points (tests/attack/ckpt_points.h: kill at a named point, or a
# slow writer). Each run then resumes, with the product binary, from the newest complete
# checkpoint and ends bit-identical to an uninterrupted synchronous run (checkpoint files byte
# for byte, every step's loss once); nothing complete is ever lost. Then -ckpt-async's and
# -mtbf-hours's bad values.
source "$(dirname "$0")/ckpt_common.sh"
need
MUT=${MUT:-build/mutants/train_gpt_ckpt_points}
if [ ! -x "$MUT" ]; then
  echo "FAIL setup: $MUT missing (make build/mutants/train_gpt_ckpt_points)"; echo "0 passed, 1 failed"; exit 1
fi
ARGS="$TINY -steps 8 -ckpt-every 2"
same_log() { diff <(steps_losses "$1") <(steps_losses "$2") > /dev/null; }
no_partial() { ! compgen -G "$1/ckpt_*.tmp" > /dev/null && ! compgen -G "$1/ckpt_*.old" > /dev/null; }
complete() { ls -d "$1"/ckpt_*/DONE 2> /dev/null | wc -l; }
ntrain() { local n; n=$(grep -c '"type":"train"' "$1" 2> /dev/null); echo "${n:-0}"; }
mut_pids() { # DIR: pids of the mutant writing -o DIR (/proc's comm holds 15 characters of the name)
  pgrep -f -- "-o $1( |$)" | while read -r p; do [ "$(cat /proc/"$p"/comm 2> /dev/null)" = "$(basename "$MUT" | cut -c1-15)" ] && echo "$p"; done
}
wait_steps() { # LOG N: until the log holds N train records (30 s at most)
  local i=0; while [ "$i" -lt 600 ]; do [ "$(ntrain "$1")" -ge "$2" ] && return 0; sleep 0.05; i=$((i + 1)); done; return 1
}

# references: synchronous runs, and the asynchronous run's checkpoints byte for byte equal to them
REF=$SCRATCH/ref
eval "$BIN $ARGS -o $REF" > "$SCRATCH/ref.out" 2>&1
check "reference: a synchronous run with checkpoints 2, 4, 6, 8" [ -f "$REF/ckpt_00000008/DONE" ]
A=$SCRATCH/async
eval "$BIN $ARGS -ckpt-async 1 -o $A" > "$SCRATCH/async.out" 2>&1
ok=1
for s in 2 4 6 8; do same_ckpt "$REF/ckpt_0000000$s" "$A/ckpt_0000000$s" || ok=0; done
check "-ckpt-async 1: checkpoints 2, 4, 6, 8 byte-equal to the synchronous ones, the same losses" \
  bash -c "[ $ok = 1 ] && $(declare -f steps_losses same_log); same_log '$REF/log.jsonl' '$A/log.jsonl'"
check "-ckpt-async 1: a checkpoint event per save (step, bytes, stall_ms, write_ms, MB_s)" \
  bash -c "[ \$(grep -c '\"event\":\"checkpoint\",\"step\":[0-9]*,\"bytes\":22153216,\"stall_ms\":[0-9.]*,\"write_ms\":[0-9.]*,\"MB_s\":[0-9.]*,.*\"async\":1' '$A/log.jsonl') = 4 ]"

# resume_ok NAME D LAUNCH: D (a run that was killed) continued with the product binary, resuming from
# its newest complete checkpoint WANT, must end bit-identical to REF
resume_ok() {
  local name=$1 d=$2 launch=$3 want=$4 rc=0
  eval "$launch $BIN $ARGS -ckpt-async 1 -o $d -resume" > "$d.res.out" 2> "$d.res.err" || rc=$?
  check "$name: -resume takes $want and ends bit-identical to the uninterrupted run (rc $rc)" \
    bash -c "$(declare -f same_ckpt steps_losses same_log); [ $rc = 0 ] && grep -q 'resumed from .*$want at' '$d.res.out' && same_ckpt '$REF/ckpt_00000008' '$d/ckpt_00000008' && same_log '$REF/log.jsonl' '$d/log.jsonl'"
}

# 1. kill -9 at each point of the step-4 save's background write (single process)
for pt in before_data mid_file before_done; do
  d=$SCRATCH/k_$pt
  rc=0; eval "LLMC_TEST_CKPT_KILL=$pt:4 $MUT $ARGS -ckpt-async 1 -o $d" > "$d.out" 2> "$d.err" || rc=$?
  check "kill -9 at $pt of the step-4 background save: killed there (rc $rc), ckpt_00000002 complete, ckpt_00000004 not" \
    bash -c "[ $rc = 137 ] && grep -q 'kill -9 at $pt of the save of step 4' '$d.err' && [ -f '$d/ckpt_00000002/DONE' ] && [ ! -e '$d/ckpt_00000004' ]"
  resume_ok "kill -9 at $pt" "$d" "" ckpt_00000002
done
# the kill comes while training goes on: with a slow writer (1 s), step 5 and 6 are trained first
d=$SCRATCH/k_slow
rc=0; eval "LLMC_TEST_CKPT_DELAY_MS=1000 LLMC_TEST_CKPT_KILL=mid_file:4 $MUT $ARGS -ckpt-async 1 -o $d" > "$d.out" 2> "$d.err" || rc=$?
check "kill -9 mid-file of a slow background save: steps after 4 were trained while it wrote (rc $rc)" \
  bash -c "[ $rc = 137 ] && grep -q 'saving ckpt 4' '$d.out' && [ \$(grep -c '\"type\":\"train\"' '$d/log.jsonl') -ge 5 ]"
resume_ok "kill -9 mid-file of a slow background save" "$d" "" ckpt_00000002

# 2. two ranks (dp 2, ZeRO-1): one rank killed mid-file, or rank 0 before DONE
L="timeout 120 $MPIRUN 2"
ARGS="$TINY -steps 8 -ckpt-every 2 -dp 2 -zero 1"
REF=$SCRATCH/ref2
eval "$L $BIN $ARGS -o $REF" > "$SCRATCH/ref2.out" 2>&1
check "2 ranks: synchronous reference" [ -f "$REF/ckpt_00000008/DONE" ]
for kill in mid_file:4:1 before_done:4:0; do
  d=$SCRATCH/m_${kill//:/_}
  rc=0; eval "LLMC_TEST_CKPT_KILL=$kill $L -x LLMC_TEST_CKPT_KILL $MUT $ARGS -ckpt-async 1 -o $d" > "$d.out" 2> "$d.err" || rc=$?
  check "2 ranks, kill -9 at $kill (point:step:rank): the job ends (rc $rc), ckpt_00000002 complete, ckpt_00000004 not" \
    bash -c "[ $rc -ne 0 ] && [ $rc -ne 124 ] && grep -q 'kill -9 at' '$d.err' && [ -f '$d/ckpt_00000002/DONE' ] && [ ! -e '$d/ckpt_00000004' ]"
  resume_ok "2 ranks, kill -9 at $kill" "$d" "$L" ckpt_00000002
done
ARGS="$TINY -steps 8 -ckpt-every 2"
REF=$SCRATCH/ref

# 3. the disk fills during a background write: one error line at a later step boundary, exit 1,
# ckpt_00000002 complete and kept (-keep 1 pruned nothing), nothing partial; resumed with space
# elsewhere, bit-identical. A 30 MB tmpfs (root only) and a 10 MB file-size limit (SIGXFSZ ignored).
full_checks() { # NAME D RC ERR
  check "$1: exit 1 after one error line 'checkpoint at step 4 failed (written in the background, found at step 5..8)'" \
    bash -c "$(declare -f one_line_error); one_line_error '$4' $3 'checkpoint at step 4 failed (written in the background, found at step' && grep -Eq 'found at step [5-8]\\)' '$4' && [ $3 = 1 ]"
  check "$1: ckpt_00000002 complete and kept, no ckpt_00000004, nothing partial" \
    bash -c "$(declare -f no_partial); [ -f '$2/ckpt_00000002/DONE' ] && [ ! -e '$2/ckpt_00000004' ] && no_partial '$2'"
  local c=$SCRATCH/$(basename "$2")_cont
  rm -rf "$c"; cp -r "$2" "$c"; rm -f "$c/lock"
  local rc=0
  eval "timeout 120 $BIN $ARGS -ckpt-async 1 -o $c -resume" > "$c.out" 2> "$c.err" || rc=$?
  check "$1: resumed with space, bit-identical (rc $rc)" same_ckpt "$REF/ckpt_00000008" "$c/ckpt_00000008"
}
MNT=$SCRATCH/mnt; mkdir -p "$MNT"
if mount -t tmpfs -o size=30m tmpfs "$MNT" 2> /dev/null; then
  d=$MNT/run
  rc=0; eval "$BIN $ARGS -ckpt-async 1 -keep 1 -o $d" > "$SCRATCH/t.out" 2> "$SCRATCH/t.err" || rc=$?
  full_checks "tmpfs full" "$d" "$rc" "$SCRATCH/t.err"
  umount "$MNT"
else
  echo "note: mount -t tmpfs is not allowed here: the tmpfs case is skipped (the file-size case below still runs)"
fi
d=$SCRATCH/lim
mkdir -p "$d"; cp -r "$REF/ckpt_00000002" "$d/"
rc=0; bash -c "trap '' XFSZ; ulimit -f 10000; exec $BIN $ARGS -ckpt-async 1 -keep 1 -o $d -resume" > "$d.out" 2> "$d.err" || rc=$?
full_checks "file limit" "$d" "$rc" "$d.err"
check "file limit: the error names the file that failed" grep -q 'rank_00000.bin failed (File too large)' "$d.err"

# 4. SIGTERM while the step-4 save is written (a 1.5 s writer): the stop waits for it, saves the
# stop's checkpoint, exits 4; -resume is bit-identical
ARGS="$TINY -steps 12 -ckpt-every 4"
REF=$SCRATCH/ref12
eval "$BIN $ARGS -o $REF" > "$SCRATCH/ref12.out" 2>&1
d=$SCRATCH/term
eval "LLMC_TEST_CKPT_DELAY_MS=1500 $MUT $ARGS -ckpt-async 1 -o $d" > "$d.out" 2> "$d.err" & bg=$!
wait_steps "$d/log.jsonl" 5
pid=$(mut_pids "$d" | head -1)
[ -n "$pid" ] && PIDS+=("$pid") && kill -TERM "$pid"
rc=0; wait "$bg" || rc=$?
k=$(ls -d "$d"/ckpt_* 2> /dev/null | tail -1); ks=$(echo "${k##*ckpt_}" | sed 's/^0*//')
check "SIGTERM while the step-4 save is written: exit 4 ($rc), ckpt_00000004 and the stop's ckpt (step ${ks:-none}) complete" \
  bash -c "[ $rc = 4 ] && grep -q 'saving ckpt 4' '$d.out' && [ -f '$d/ckpt_00000004/DONE' ] && [ -n '$ks' ] && [ '$ks' -gt 4 ] && [ -f '$k/DONE' ] && grep -q '\"event\":\"checkpoint\",\"step\":4,' '$d/log.jsonl' && tail -1 '$d/log.jsonl' | grep -q '\"event\":\"stop\",\"step\":$ks,'"
rc=0; eval "$BIN $ARGS -ckpt-async 1 -o $d -resume" >> "$d.out" 2>> "$d.err" || rc=$?
check "SIGTERM while writing, then -resume: bit-identical to the uninterrupted run (rc $rc)" \
  bash -c "$(declare -f same_ckpt steps_losses same_log); [ $rc = 0 ] && same_ckpt '$REF/ckpt_00000012' '$d/ckpt_00000012' && same_log '$REF/log.jsonl' '$d/log.jsonl'"

# 5. a save every step with a 400 ms writer: each waits for the previous one (logged), and every
# checkpoint is the synchronous run's
ARGS="$TINY -steps 5 -ckpt-every 1"
REF=$SCRATCH/ref1
eval "$BIN $ARGS -o $REF" > "$SCRATCH/ref1.out" 2>&1
d=$SCRATCH/every1
rc=0; eval "LLMC_TEST_CKPT_DELAY_MS=400 $MUT $ARGS -ckpt-async 1 -o $d" > "$d.out" 2> "$d.err" || rc=$?
ok=1
for s in 1 2 3 4 5; do same_ckpt "$REF/ckpt_0000000$s" "$d/ckpt_0000000$s" || ok=0; done
check "saves due while the previous one writes: they wait (logged), all 5 complete and byte-equal to synchronous (rc $rc)" \
  bash -c "[ $rc = 0 ] && [ $ok = 1 ] && [ \$(grep -c 'waited .* ms for the save of step' '$d.out') -ge 3 ] && grep -q '\"wait_ms\":[1-9]' '$d/log.jsonl'"

# 6. -keep 1 while a save is in flight (an 800 ms writer): from the first complete checkpoint on,
# the directory never holds none; at the end only the last; a kill -9 mid-file keeps the previous
ARGS="$TINY -steps 8 -ckpt-every 2"
REF=$SCRATCH/ref
d=$SCRATCH/keep
eval "LLMC_TEST_CKPT_DELAY_MS=800 $MUT $ARGS -ckpt-async 1 -keep 1 -o $d" > "$d.out" 2> "$d.err" & bg=$!
seen=0; gap=0
while kill -0 "$bg" 2> /dev/null; do
  n=$(complete "$d")
  [ "$n" -ge 1 ] && seen=1
  [ "$seen" = 1 ] && [ "$n" -lt 1 ] && gap=1
  sleep 0.02
done
rc=0; wait "$bg" || rc=$?
check "-keep 1 with saves in flight: never no complete checkpoint once one exists; only ckpt_00000008 at the end (rc $rc)" \
  bash -c "[ $rc = 0 ] && [ $seen = 1 ] && [ $gap = 0 ] && [ \$(ls -d '$d'/ckpt_* | wc -l) = 1 ] && [ -f '$d/ckpt_00000008/DONE' ]"
d=$SCRATCH/keep_kill
rc=0; eval "LLMC_TEST_CKPT_DELAY_MS=300 LLMC_TEST_CKPT_KILL=mid_file:6 $MUT $ARGS -ckpt-async 1 -keep 1 -o $d" > "$d.out" 2> "$d.err" || rc=$?
check "-keep 1, kill -9 mid-file of the step-6 save: ckpt_00000004 kept (rc $rc), ckpt_00000002 pruned" \
  bash -c "[ $rc = 137 ] && [ -f '$d/ckpt_00000004/DONE' ] && [ ! -e '$d/ckpt_00000002' ] && [ ! -e '$d/ckpt_00000006' ]"
ARGS="$ARGS -keep 1"
resume_ok "-keep 1, kill -9 mid-file" "$d" "" ckpt_00000004

# 7. the flags' bad values: one error line, nothing trained
for v in 2 -1 abc ''; do
  rc=0; eval "$BIN $TINY -steps 1 -ckpt-async '$v'" > "$SCRATCH/f.out" 2> "$SCRATCH/f.err" || rc=$?
  check "-ckpt-async '$v': one error line (rc $rc)" one_line_error "$SCRATCH/f.err" "$rc" "-ckpt-async"
done
for v in 0 -5 nan inf 1e10 x; do
  rc=0; eval "$BIN $TINY -steps 1 -mtbf-hours '$v'" > "$SCRATCH/f.out" 2> "$SCRATCH/f.err" || rc=$?
  check "-mtbf-hours '$v': one error line (rc $rc)" one_line_error "$SCRATCH/f.err" "$rc" "-mtbf-hours"
done
for f in -fs-bw -d2h-bw; do
  rc=0; eval "$BIN -plan -model 530b -nodes 280 $f 0" > "$SCRATCH/f.out" 2> "$SCRATCH/f.err" || rc=$?
  check "-plan $f 0: one error line (rc $rc)" one_line_error "$SCRATCH/f.err" "$rc" "$f"
done
summary
