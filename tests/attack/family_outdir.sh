#!/usr/bin/env bash
# family_outdir.sh: a run owns its -o directory. A second run (fresh or -resume) into a
# directory in use is refused, the lock dies with its holder (kill -9); a fresh run never
# overwrites another run's checkpoints (unless -overwrite 1); two runs started together
# leave one clean log; after a resume no step is logged twice; -keep N; -resume refuses
# a changed data order (seed, shuffle, shards) unless -allow-data-change 1 and logs
# recipe and schedule changes; -o DIR -resume alone continues a run from its config.json (to its
# -tokens: -steps ends one start).
# No -log may write into a running run's -o or another run's log, and deleting DIR/lock by
# hand does not release the lock.
source "$(dirname "$0")/ckpt_common.sh"
need
E1=$SCRATCH/e1; E2=$SCRATCH/e2
# 1. the lock
D=$SCRATCH/lock
eval "$BIN $TINY -steps 400 -ckpt-every 2 -o $D" > "$SCRATCH/a.out" 2> "$SCRATCH/a.err" & bg=$!
wait_for "$D/ckpt_*/DONE" 30
run_tg "$E1" "$E2" "$TINY -steps 5 -o $D -overwrite 1"
check "lock: a fresh run (even -overwrite 1) into a directory in use is refused" one_line_error "$E2" "$RC" "is in use by another run"
run_tg "$E1" "$E2" "$TINY -steps 5 -o $D -resume"
check "lock: a -resume into a directory in use is refused" one_line_error "$E2" "$RC" "is in use by another run"
sz=$(wc -c < "$D/log.jsonl")
run_tg "$E1" "$E2" "$TINY -steps 2 -o $SCRATCH/lockB -log $D/log.jsonl"
check "lock: -log naming the running run's log is refused" one_line_error "$E2" "$RC" "lies in the -o directory of a running run"
run_tg "$E1" "$E2" "$TINY -steps 2 -log $D/other.jsonl"
check "lock: -log to a new file inside a running run's -o is refused" one_line_error "$E2" "$RC" "lies in the -o directory of a running run"
check "lock: ... and the running run's log kept growing, no NUL bytes" \
  bash -c "[ \$(wc -c < '$D/log.jsonl') -ge $sz ] && ! grep -qaP '\\x00' '$D/log.jsonl' && [ ! -e '$D/other.jsonl' ]"
for p in $(rank_pids "$D"); do kill -9 "$p"; done; wait "$bg" 2>/dev/null
run_tg "$E1" "$E2" "$TINY -steps 6 -o $D -resume"
check "lock: released when its holder is killed (-9): -resume proceeds" [ "$RC" -eq 0 ]
eval "exec $BIN $TINY -steps 100000 -ckpt-every 50 -o $SCRATCH/lockR" > "$SCRATCH/r.out" 2> "$SCRATCH/r.err" & br=$!
eval "exec $BIN $TINY -steps 100000 -log $SCRATCH/free.jsonl" > "$SCRATCH/l.out" 2> "$SCRATCH/l.err" & bl=$!
wait_for "$SCRATCH/lockR/ckpt_*/DONE" 30; wait_for "$SCRATCH/free.jsonl" 30; sleep 0.5
rm -f "$SCRATCH/lockR/lock"
run_tg "$E1" "$E2" "$TINY -steps 5 -o $SCRATCH/lockR -resume"
check "lock: with DIR/lock deleted by hand, a -resume into the directory in use is still refused" one_line_error "$E2" "$RC" "is in use by another run"
run_tg "$E1" "$E2" "$TINY -steps 2 -log $SCRATCH/free.jsonl -o $SCRATCH/lockM"
check "lock: -log naming the log another run writes (no -o) is refused" one_line_error "$E2" "$RC" "being written by another run"
kill -9 "$br" "$bl"; wait "$br" "$bl" 2>/dev/null
run_tg "$E1" "$E2" "$TINY -steps 2 -o $SCRATCH/lockN -log $SCRATCH/free.jsonl"
check "lock: -log released when its writer is killed (-9): reused" [ "$RC" -eq 0 ]
# 2. reuse
D=$SCRATCH/reuse
run_tg "$E1" "$E2" "$TINY -steps 6 -ckpt-every 2 -o $D"
run_tg "$E1" "$E2" "$TINY -steps 2 -o $D"
check "reuse: a fresh run into a directory with checkpoints is refused" one_line_error "$E2" "$RC" "holds 3 checkpoint(s) of an earlier run"
check "reuse: ... and the earlier run's checkpoints and log are untouched" bash -c "[ -f '$D/ckpt_00000006/DONE' ] && [ \$(grep -c '\"type\":\"train\"' '$D/log.jsonl') -eq 6 ]"
run_tg "$E1" "$E2" "$TINY -steps 2 -ckpt-every 1 -o $D -overwrite 1"
check "reuse: -overwrite 1 starts over: the old checkpoints are gone, the log is the new run's" \
  bash -c "[ $RC -eq 0 ] && [ ! -e '$D/ckpt_00000006' ] && [ -f '$D/ckpt_00000002/DONE' ] && [ \$(grep -c '\"type\":\"train\"' '$D/log.jsonl') -eq 2 ]"
echo x > "$SCRATCH/afile"
run_tg "$E1" "$E2" "$TINY -steps 2 -o $SCRATCH/afile"
check "reuse: -o naming a regular file is one error line" one_line_error "$E2" "$RC" "cannot create -o directory"
# 3. concurrent fresh runs into one directory
D=$SCRATCH/conc
eval "timeout 120 $BIN $TINY -steps 6 -ckpt-every 3 -o $D" > "$SCRATCH/c1.out" 2> "$SCRATCH/c1.err" & b1=$!
eval "timeout 120 $BIN $TINY -steps 6 -ckpt-every 3 -o $D" > "$SCRATCH/c2.out" 2> "$SCRATCH/c2.err" & b2=$!
r1=0; wait "$b1" || r1=$?; r2=0; wait "$b2" || r2=$?
ok=0
{ [ "$r1" -eq 0 ] && one_line_error "$SCRATCH/c2.err" "$r2"; } && ok=1
{ [ "$r2" -eq 0 ] && one_line_error "$SCRATCH/c1.err" "$r1"; } && ok=1
check "concurrent: two runs started together on one -o: one trains, the other is refused (rc $r1, $r2)" [ "$ok" -eq 1 ]
check "concurrent: the log is one run's: 6 valid JSON lines, steps 1-6 once" \
  bash -c "$PY -c 'import json,sys; r=[json.loads(l) for l in open(sys.argv[1])]; s=[x[\"step\"] for x in r if x[\"type\"]==\"train\"]; sys.exit(s!=list(range(1,7)))' '$D/log.jsonl'"
# 4. no step twice in the log after a resume from an older checkpoint
D=$SCRATCH/log
run_tg "$E1" "$E2" "$TINY -steps 9 -ckpt-every 4 -o $D"
rm -rf "$D/ckpt_00000008" "$D/ckpt_00000009"   # as if the run died after step 9 but before those saves
run_tg "$E1" "$E2" "$TINY -steps 9 -ckpt-every 4 -o $D -resume"
check "log: resumed from step 4, the log holds steps 1-9 once and a resume event" \
  bash -c "[ $RC -eq 0 ] && [ \"\$(grep '\"type\":\"train\"' '$D/log.jsonl' | sed -E 's/.*\"step\":([0-9]+),.*/\1/' | tr '\n' ' ')\" = '1 2 3 4 5 6 7 8 9 ' ] && grep -q '\"event\":\"resume\",\"step\":4' '$D/log.jsonl'"
# 5. -keep
D=$SCRATCH/keep
run_tg "$E1" "$E2" "$TINY -steps 10 -ckpt-every 2 -keep 2 -o $D"
check "-keep 2: only the newest two checkpoints remain (8 and 10)" \
  bash -c "[ $RC -eq 0 ] && [ \"\$(cd '$D' && ls -d ckpt_* | tr '\n' ' ')\" = 'ckpt_00000008 ckpt_00000010 ' ]"
run_tg "$E1" "$E2" "$TINY -steps 4 -keep -1 -o $SCRATCH/keepbad"
check "-keep -1 is one error line" one_line_error "$E2" "$RC" "-keep"
# 6. the run's identity on resume
D=$SCRATCH/id
run_tg "$E1" "$E2" "$TINY -steps 2 -ckpt-every 2 -o $D"
cp -r "$D" "$SCRATCH/id_base"
again() { rm -rf "$D"; cp -r "$SCRATCH/id_base" "$D"; run_tg "$E1" "$E2" "$TINY -steps 3 -o $D -resume $1"; }
again "-seed 7"
check "identity: -resume -seed 7 is refused" one_line_error "$E2" "$RC" "-seed 1337 -> 7"
again "-shuffle 0"
check "identity: -resume -shuffle 0 is refused" one_line_error "$E2" "$RC" "-shuffle 1 -> 0"
mkdir -p "$SCRATCH/shards"; cp "$KJV" "$SCRATCH/shards/other_000.bin"
again "-i $SCRATCH/shards/other_000.bin"
check "identity: -resume with other shards (-i) is refused" one_line_error "$E2" "$RC" "training shards"
mkdir -p "$SCRATCH/moved"; cp "$KJV" "$SCRATCH/moved/"
again "-i $SCRATCH/moved/$(basename "$KJV")"
check "identity: the same shards moved elsewhere resume" [ "$RC" -eq 0 ]
again "-seed 7 -allow-data-change 1"
check "identity: -allow-data-change 1 accepts the change with a warning and an event" \
  bash -c "[ $RC -eq 0 ] && grep -q 'warning: -allow-data-change 1' '$E1' && grep -q '\"event\":\"data_change\"' '$D/log.jsonl'"
again "-beta2 0.9 -lr 5e-4"
check "identity: recipe changes (beta2, lr) are allowed and logged as changes" \
  bash -c "[ $RC -eq 0 ] && grep -q 'beta2 changed from 0.95 to 0.9' '$E1' && grep -q '\"what\":\"beta2\",\"old\":0.95' '$D/log.jsonl' && grep -q '\"what\":\"lr\"' '$D/log.jsonl'"
again "-warmup 12345 -minlr-frac 0.2"
check "identity: schedule changes (warmup, minlr-frac) are logged as changes" \
  bash -c "[ $RC -eq 0 ] && grep -q 'warmup changed from 0 to 12345' '$E1' && grep -q '\"what\":\"minlr-frac\",\"old\":0.1' '$D/log.jsonl'"
# 7. the run directory remembers its run: -o DIR -resume needs no other flag
D=$SCRATCH/rec; S=$SCRATCH/rec_straight
run_tg "$E1" "$E2" "$TINY -tokens 768 -o $S"
run_tg "$E1" "$E2" "$TINY -tokens 768 -steps 3 -o $D"
check "record: a fresh run writes DIR/config.json (JSON, its command line) and a config record first in the log" \
  $PY -c "import json,sys; r=json.load(open('$D/config.json')); l=json.loads(open('$D/log.jsonl').readline()); \
sys.exit(not ('-V' in r['argv'] and '-o' not in r['argv'] and r['flags']['-V'] == 8192 and l['type'] == 'config'))"
run_tg "$E1" "$E2" "-o $D -resume -steps 6 -keep 5"
ok=0
[ $RC -eq 0 ] && grep -q 'flags recorded in' "$E1" && [ "$(steps_losses "$D/log.jsonl" | tail -3)" = "$(steps_losses "$S/log.jsonl" | tail -3)" ] &&
  same_ckpt "$S/ckpt_00000006" "$D/ckpt_00000006" && ok=1
check "record: -o DIR -resume -steps 6 alone continues the run, steps 4-6 equal the straight run's bits (rc $RC)" [ $ok -eq 1 ]
check "record: the resume names each flag given again that differs from the record, and only those" \
  bash -c "grep -q '^resume: -keep 5 replaces the recorded 0\$' '$E1' && [ \$(grep -c 'replaces the recorded' '$E1') -eq 1 ]"
run_tg "$E1" "$E2" "-o $D -resume"
check "record: -o DIR -resume alone on a finished run says it is complete (rc $RC)" \
  bash -c "[ $RC -eq 0 ] && grep -q 'the run is complete: step 6' '$E1'"
run_tg "$E1" "$E2" "-o $D -resume -heads 2"
check "record: a shape flag given again that differs from the record is refused" one_line_error "$E2" "$RC" "different model"
echo '{"argv": [' > "$D/config.json"
run_tg "$E1" "$E2" "-o $D -resume"
check "record: a damaged config.json is one error line" one_line_error "$E2" "$RC" "is damaged"
# the same for a 2x2x2 layout stopped after 3 steps, resumed with -o DIR -resume -steps 6
D8=$SCRATCH/rec8; S8=$SCRATCH/rec8_straight
eval "timeout 300 $MPIRUN 8 $BIN $TINY -tp 2 -pp 2 -dp 2 -steps 6 -o $S8" > "$SCRATCH/s8.out" 2>&1
eval "timeout 300 $MPIRUN 8 $BIN $TINY -tp 2 -pp 2 -dp 2 -steps 3 -o $D8" > "$SCRATCH/d8.out" 2>&1
rc=0; eval "timeout 300 $MPIRUN 8 $BIN -o $D8 -resume -steps 6" > "$SCRATCH/r8.out" 2>&1 || rc=$?
ok=0; [ $rc -eq 0 ] && same_ckpt "$S8/ckpt_00000006" "$D8/ckpt_00000006" && ok=1
check "record: 2x2x2 resumed with -o DIR -resume -steps 6 alone: bit-identical to the straight run (rc $rc)" [ $ok -eq 1 ]
summary
