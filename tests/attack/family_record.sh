#!/usr/bin/env bash
# family_record.sh: the run record DIR/config.json (issue 45). It is read as strict JSON: a
# byte-order mark, trailing garbage, a cut file, deep nesting, a file over 1 MiB, a key twice,
# \u0000 in a flag, unknown fields, flags that are not strings, bad rewound ranges, a FIFO or a
# directory in its place are each one `error:` line naming the file and what to do. It holds
# each flag once: a run resumed again and again with its whole (long) command line records the
# same bytes every time. A start stopped by -steps is not the end of the run (-steps is not
# recorded): it says how far the run is and how to go on, and `-o DIR -resume` trains on to
# -tokens. A resume or -init-from keeps the weights' -scaled-init in the checkpoints and the
# record. Under tests/attack/asan.sh the same cases run with the ASan+UBSan trainer.
source "$(dirname "$0")/ckpt_common.sh"
need
E1=$SCRATCH/e1; E2=$SCRATCH/e2
T768="$TINY -tokens 768"   # 6 steps of 4 sequences of 32 tokens
hdr() { $PY -c "import struct,sys; print(struct.unpack('<128q', open(sys.argv[1],'rb').read(1024))[int(sys.argv[2])])" "$@"; }
rec() { $PY -c "import json,sys; r=json.load(open(sys.argv[1])); print(eval(sys.argv[2]))" "$@"; }
export -f rec; export PY

# 1. a damaged record: one error line, never a half-read resume
B=$SCRATCH/base
run_tg "$E1" "$E2" "$T768 -steps 2 -o $B"
check "setup: a 2-step run with its record" [ "$RC" -eq 0 -a -f "$B/config.json" ]
damaged() { # NAME NEEDLE PYTHON-EXPR(t -> new text; bytes allowed)
  local name=$1 needle=$2 expr=$3 d=$SCRATCH/dmg
  rm -rf "$d"; cp -r "$B" "$d"
  $PY - "$d/config.json" "$expr" <<'PY'
import sys
p, expr = sys.argv[1], sys.argv[2]
t = open(p).read()
new = eval(expr)
open(p, "wb").write(new if isinstance(new, bytes) else new.encode())
PY
  run_tg "$E1" "$E2" "-o $d -resume -steps 3"
  check "damaged record: $name (rc $RC)" one_line_error "$E2" "$RC" "$needle"
}
damaged "a byte-order mark" "byte-order mark" "'\\ufeff' + t"
damaged "garbage after the object" "text after the JSON value" "t + 'x'"
damaged "a second object after it" "text after the JSON value" "t + t"
for cut in 1 2 10 100 300; do
  damaged "cut after $cut bytes" "is damaged" "t[:$cut]"
done
damaged "cut one byte short" "is damaged" "t.rstrip()[:-1]"
damaged "an empty file" "is damaged" "''"
damaged "nested 100000 deep" "nested too deeply" "t[:-2] + ',\"layout_auto\":' + '[' * 100000 + ']' * 100000 + '}'"
damaged "over 1 MiB" "over 1 MiB" "t[:-2] + ',\"layout_auto\":\"' + 'x' * (1 << 20) + '\"}'"
damaged "the key argv twice" 'gives the key "argv" twice' "t[:-2] + ',\"argv\":[]}'"
damaged "a flag holding \\u0000" "is damaged" "t.replace('\"-model\"', '\"-mo\\\\u0000del\"', 1)"
damaged "an unknown field" 'unknown field "argz"' "t[:-2] + ',\"argz\":1}'"
damaged "a number in argv" "is damaged" "t.replace('\"argv\":[', '\"argv\":[7,', 1)"
damaged "argv an object" "is damaged" "t.replace('\"argv\":[', '\"argv\":{\"a\":[', 1).replace('],\"layout\"', ']},\"layout\"', 1)"
damaged "no argv" "is damaged" "'{\"flags\":{}}'"
damaged "a list, not an object" "is damaged" "'[' + t + ']'"
damaged "rewound not ranges" "rewound" "t[:-2] + ',\"rewound\":\"a:b\"}'"
damaged "rewound out of order" "rewound" "t[:-2] + ',\"rewound\":\"20:8,10:8\"}'"
damaged "a control byte outside a string" "is damaged" "t.replace(',', ',\\x01', 1)"
damaged "a flag the trainer refuses" "unknown flag" "t.replace('\"-model\"', '\"-modle\"', 1)"
d=$SCRATCH/fifo; rm -rf "$d"; cp -r "$B" "$d"; rm "$d/config.json"; mkfifo "$d/config.json"
run_tg "$E1" "$E2" "-o $d -resume -steps 3"
check "damaged record: a FIFO in its place is refused at once" one_line_error "$E2" "$RC" "FIFO"
d=$SCRATCH/dir; rm -rf "$d"; cp -r "$B" "$d"; rm "$d/config.json"; mkdir "$d/config.json"
run_tg "$E1" "$E2" "-o $d -resume -steps 3"
check "damaged record: a directory in its place is refused" one_line_error "$E2" "$RC" "directory"
d=$SCRATCH/gone; rm -rf "$d"; cp -r "$B" "$d"; rm "$d/config.json"
run_tg "$E1" "$E2" "$T768 -o $d -resume -steps 3"
check "no record: -o DIR -resume with every flag given still resumes (rc $RC)" [ "$RC" -eq 0 -a -f "$d/ckpt_00000003/DONE" ]

# 2. resumed again and again with the whole command line (a Slurm requeue): the record stays one size
D=$SCRATCH/requeue
LONG="$TINY -tokens 1e6"
for k in $(seq 60); do LONG="$LONG -lr 1e-3 -wd 0.1"; done  # a ~1.5 KB command line
argv() { $PY -c "import json,sys; print(json.dumps(json.load(open(sys.argv[1]))['argv']))" "$1" 2>/dev/null; }
run_tg "$E1" "$E2" "$LONG -steps 1 -o $D"
argv0=$(argv "$D/config.json")
ok=1; grew=""
for k in $(seq 2 25); do
  run_tg "$E1" "$E2" "$LONG -steps $k -o $D -resume"
  [ "$RC" -eq 0 ] || { ok=0; echo "restart $k: rc $RC: $(head -c 200 "$E2")"; break; }
  [ "$(argv "$D/config.json")" = "$argv0" ] || grew="$grew $k:$(wc -c < "$D/config.json")"
done
check "requeue: 24 restarts with the whole 1.5 KB command line all resume (rc $RC)" [ "$ok" -eq 1 ]
check "requeue: the recorded flags are the same ${#argv0} bytes after every restart (changed:${grew:- none})" \
  [ -z "$grew" -a "${#argv0}" -gt 1400 ]
check "requeue: the run went on one step per restart to step 25" [ -f "$D/ckpt_00000025/DONE" ]
D=$SCRATCH/over
run_tg "$E1" "$E2" "$T768 -steps 1 -o $D"
for lr in 5e-4 4e-4 3e-4; do run_tg "$E1" "$E2" "-o $D -resume -lr $lr -steps 1"; done
check "record: a flag given again on three resumes is recorded once, with the last value" \
  bash -c "[ \"\$($PY -c \"import json; a=json.load(open('$D/config.json'))['argv']; print(a.count('-lr'), a[a.index('-lr') + 1])\")\" = '1 3e-4' ]"
run_tg "$E1" "$E2" "-o $D -resume -lr 2e-4 -steps 2"
check "record: the resume names the flag given again (-lr), and not -steps (one start's)" \
  bash -c "[ $RC -eq 0 ] && grep -q '^resume: -lr 0.0002 replaces the recorded 0.0003\$' '$E1' && [ \$(grep -c 'replaces the recorded' '$E1') -eq 1 ]"
run_tg "$E1" "$E2" "-o $D -resume -seed 9 -allow-data-change 1 -steps 3"
check "record: -allow-data-change, -steps and -o are not recorded (one start's)" \
  bash -c "[ $RC -eq 0 ] && [ \"\$(rec '$D/config.json' \"[f for f in ('-allow-data-change', '-steps', '-o', '-resume') if f in r['argv']]\")\" = '[]' ]"

# 3. a start stopped by -steps is not the end of the run
D=$SCRATCH/steps; S=$SCRATCH/steps_straight
run_tg "$E1" "$E2" "$T768 -o $S"
run_tg "$E1" "$E2" "$T768 -steps 3 -o $D"
check "-steps stop: says how far the run is and how to go on" \
  grep -q "stopped by -steps 3 at step 3: 384 of -tokens 768 (50.0%), checkpoint in $D; continue with -o $D -resume" "$E1"
check "-steps stop: the log's progress is of -tokens (50% at step 3, not 100%)" \
  bash -c "grep '\"type\":\"train\",\"step\":3,' '$D/log.jsonl' | grep -q '\"pct\":50.0000,'"
run_tg "$E1" "$E2" "-o $D -resume"
check "-steps stop: -o DIR -resume alone trains on to -tokens (rc $RC), bit-identical to the straight run" \
  bash -c "$(declare -f same_ckpt); [ $RC -eq 0 ] && ! grep -q 'the run is complete' '$E1' && same_ckpt '$S/ckpt_00000006' '$D/ckpt_00000006'"
run_tg "$E1" "$E2" "-o $D -resume"
check "-steps stop: then the run is complete, and says so" grep -q "the run is complete: step 6, 768 of -tokens 768" "$E1"
run_tg "$E1" "$E2" "$T768 -steps 2"
check "-steps stop without -o: says nothing is saved" grep -q "stopped by -steps 2 at step 2: 256 of -tokens 768 (33.3%); no -o" "$E1"
run_tg "$E1" "$E2" "-o $SCRATCH/over -resume -steps 2"
check "-steps below the run's step: nothing to train, says how to go on" \
  bash -c "[ $RC -eq 0 ] && grep -q -- '-steps 2: step 3 is done already (384 of -tokens 768)' '$E1'"

# 4. the weights' -scaled-init stays theirs
D=$SCRATCH/init; rm -rf "$D"; cp -r "$B" "$D"
run_tg "$E1" "$E2" "-o $D -resume -scaled-init 0 -steps 3"
check "-resume -scaled-init 0: a note, and the checkpoint keeps the weights' 1" \
  bash -c "[ $RC -eq 0 ] && grep -q 'acts on fresh weights only; these were initialised with -scaled-init 1' '$E1' && [ \$($PY -c \"import struct; print(struct.unpack('<128q', open('$D/ckpt_00000003/rank_00000.bin','rb').read(1024))[26])\") = 1 ]"
check "-resume -scaled-init 0: the record keeps 1 too (flags and argv)" \
  bash -c "[ \"\$(rec '$D/config.json' \"(r['flags']['-scaled-init'], r['argv'][r['argv'].index('-scaled-init') + 1])\")\" = \"(1, '1')\" ]"
D=$SCRATCH/initfrom
run_tg "$E1" "$E2" "$T768 -init-from $B/ckpt_00000002 -scaled-init 0 -steps 1 -o $D"
check "-init-from -scaled-init 0: the new run's checkpoint says how its weights were initialised (1)" \
  bash -c "[ $RC -eq 0 ] && [ \$($PY -c \"import struct; print(struct.unpack('<128q', open('$D/ckpt_00000001/rank_00000.bin','rb').read(1024))[26])\") = 1 ]"
D=$SCRATCH/fresh0
run_tg "$E1" "$E2" "$T768 -scaled-init 0 -steps 1 -o $D"
check "control: a fresh run with -scaled-init 0 records 0" \
  bash -c "[ $RC -eq 0 ] && [ \$($PY -c \"import struct; print(struct.unpack('<128q', open('$D/ckpt_00000001/rank_00000.bin','rb').read(1024))[26])\") = 0 ]"
summary
