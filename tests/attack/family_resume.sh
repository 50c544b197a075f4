#!/usr/bin/env bash
# family_resume.sh: what a resume continues on (issue 45). The data identity covers the shards'
# content: a shard rewritten at the same size is refused on -resume (unless -allow-data-change 1).
# Every checkpoint the trainer writes loads: a -skip-data range ahead of the run stays out of the
# checkpoint and comes back from the command line or the record on resume; -on-spike rewind keeps
# its ranges sorted, cuts the log back to the checkpoint it returns to, says how much it passes over
# in all, and records its ranges in DIR/config.json, so a -resume that goes back to an older
# checkpoint passes over them again. Each continued run is compared bit for bit with a straight one.
source "$(dirname "$0")/ckpt_common.sh"
need
E1=$SCRATCH/e1; E2=$SCRATCH/e2
# a learnable pattern of 300 ids, with uniform noise in samples 60-63 (poison1) or 60-71 (poison2)
$PY - "$SCRATCH" <<'PY'
import random, struct, sys
d = sys.argv[1]
for name, noisy in (("clean", 0), ("poison1", 4), ("poison2", 12)):
    rng = random.Random(5)
    toks = [(i * 7 + i // 13) % 300 for i in range(12000)]
    for i in range(60 * 32, (60 + noisy) * 32 + 1 if noisy else 0):
        toks[i] = rng.randrange(300)
    with open("%s/%s_000.bin" % (d, name), "wb") as f:
        f.write(struct.pack("<256i", 20240520, 1, len(toks), *([0] * 253)))
        f.write(struct.pack("<%dH" % len(toks), *toks))
PY
SMALL="-L 2 -H 64 -heads 4 -seq 32 -V 300 -vpad 128 -mb 1 -gb 4 -ramp off -lr 3e-3 -warmup 0 -tokens 1e9 -j '' \
-shuffle 0 -seed 7 -threads 1"
REWIND="-skip-spikes 4 -spike-window 8 -on-spike rewind 2 -ckpt-every 2"
steps_once() { # LOG N: the log's train records are steps 1..N, each once, none of them a skipped one
  [ "$(grep '"type":"train"' "$1" | sed -E 's/.*"step":([0-9]+),.*/\1/' | tr '\n' ' ')" = "$(seq -s ' ' 1 "$2") " ] &&
    ! grep -q '"skip":"spike"' "$1"
}

# 1. a rewind: the log cut back, the ranges recorded, the run equal to one that never saw the batches
RW=$SCRATCH/rw; REF=$SCRATCH/ref
run_tg "$E1" "$E2" "$SMALL -i $SCRATCH/poison1_000.bin -steps 20 $REWIND -o $RW"
check "rewind: the poison batch of step 16 is rewound once, to ckpt 14 (rc $RC)" \
  bash -c "[ $RC -eq 0 ] && [ \$(grep -c '^rewind ' '$E1') -eq 1 ] && grep -q 'rewind 1 of 3: step 16 was skipped; back to $RW/ckpt_00000014' '$E1'"
check "rewind: the message says what it passes over (2 batches, 8 samples from 56, 8 in all)" \
  grep -q "passing over 2 more batches (8 samples from run sample 56, 8 in all)" "$E1"
check "rewind: the log is cut back to ckpt 14: steps 1-20 once each, no record of the abandoned step" \
  steps_once "$RW/log.jsonl" 20
check "rewind: the rewind event follows step 14 in the log (after its checkpoint event)" \
  bash -c "sed -n '/\"type\":\"train\",\"step\":14,/,/\"type\":\"train\",\"step\":15,/p' '$RW/log.jsonl' |
    grep -q '\"event\":\"rewind\",\"step\":14,\"bad_step\":16'"
check "rewind: the run record keeps the range passed over (\"rewound\":\"56:8\")" \
  bash -c "$PY -c \"import json,sys; sys.exit(json.load(open('$RW/config.json')).get('rewound') != '56:8')\""
run_tg "$E1" "$E2" "$SMALL -i $SCRATCH/poison1_000.bin -steps 20 -skip-data 56:8 -ckpt-every 2 -o $REF"
check "rewind: its step-20 checkpoint equals the run given -skip-data 56:8, bit for bit" \
  same_ckpt "$REF/ckpt_00000020" "$RW/ckpt_00000020"
# a resume from the checkpoint the rewind went back to (the run killed before its next save)
D=$SCRATCH/back; rm -rf "$D"; cp -r "$RW" "$D"; rm -rf "$D"/ckpt_0000001[6-9] "$D"/ckpt_0000002*
run_tg "$E1" "$E2" "-o $D -resume -steps 20"
check "rewind, then -resume from ckpt 14: no new spike or rewind, the recorded range is passed over (rc $RC)" \
  bash -c "[ $RC -eq 0 ] && ! grep -q '^rewind ' '$E1' && ! grep -q '\"skip\":\"spike\"' '$D/log.jsonl' && grep -q 'resume: 1 data range' '$E1'"
check "rewind, then -resume from ckpt 14: step 20 equals the straight run, bit for bit" \
  same_ckpt "$REF/ckpt_00000020" "$D/ckpt_00000020"
# two rewinds to the same checkpoint (noise in the batches after the first range too)
RW2=$SCRATCH/rw2
run_tg "$E1" "$E2" "$SMALL -i $SCRATCH/poison2_000.bin -steps 20 $REWIND -o $RW2"
check "two rewinds to ckpt 14: the second says the range now holds 16 samples in all (rc $RC)" \
  bash -c "[ $RC -eq 0 ] && grep -q '^rewind 2 of 3: .*back to $RW2/ckpt_00000014, passing over 2 more batches (8 samples from run sample 56, 16 in all)' '$E1'"
check "two rewinds: the log holds steps 1-20 once each" steps_once "$RW2/log.jsonl" 20
check "two rewinds: the record holds the grown range (56:16)" \
  bash -c "$PY -c \"import json,sys; sys.exit(json.load(open('$RW2/config.json')).get('rewound') != '56:16')\""

# 2. -skip-data ahead of the run: the checkpoint holds what the run passed, the resume the rest
S=$SCRATCH/skip_straight; D=$SCRATCH/skip
run_tg "$E1" "$E2" "$TINY -skip-data 24:8 -steps 10 -o $S"
run_tg "$E1" "$E2" "$TINY -skip-data 24:8 -steps 5 -o $D"
check "-skip-data 24:8 stopped at run sample 20: the checkpoint saved (rc $RC)" [ "$RC" -eq 0 -a -f "$D/ckpt_00000005/DONE" ]
run_tg "$E1" "$E2" "-o $D -resume -steps 10"
check "-skip-data ahead: -o DIR -resume loads that checkpoint and passes over the range (rc $RC)" \
  bash -c "[ $RC -eq 0 ] && grep -q 'resumed from $D/ckpt_00000005' '$E1'"
check "-skip-data ahead: step 10 equals the straight run, bit for bit" same_ckpt "$S/ckpt_00000010" "$D/ckpt_00000010"
D=$SCRATCH/skipfar
run_tg "$E1" "$E2" "$TINY -skip-data 1000:8 -steps 5 -o $D"
run_tg "$E1" "$E2" "-o $D -resume -steps 6"
check "-skip-data 1000:8 -steps 5, then -resume: loads (the issue's case; rc $RC)" [ "$RC" -eq 0 -a -f "$D/ckpt_00000006/DONE" ]
D=$SCRATCH/rwfar
run_tg "$E1" "$E2" "$SMALL -i $SCRATCH/poison1_000.bin -steps 20 $REWIND -skip-data 1000:8 -o $D"
check "-on-spike rewind with a -skip-data range ahead: rewinds and finishes (rc $RC)" \
  bash -c "[ $RC -eq 0 ] && grep -q '^rewind 1 of 3' '$E1' && [ -f '$D/ckpt_00000020/DONE' ]"
run_tg "$E1" "$E2" "-o $D -resume -steps 22"
check "-on-spike rewind with a -skip-data range ahead: its checkpoints load (rc $RC)" [ "$RC" -eq 0 ]
check "... and the ranges in the checkpoint are sorted (56:8 only: 1000 is ahead)" \
  bash -c "[ \"\$($PY -c \"import struct; h=struct.unpack('<128q', open('$D/ckpt_00000022/rank_00000.bin','rb').read(1024)); print(h[50:53])\")\" = '(1, 56, 8)' ]"
run_tg "$E1" "$E2" "$TINY -skip-data 24:8,20:8 -steps 2"
check "-skip-data out of order is refused" one_line_error "$E2" "$RC" "AT increasing"
run_tg "$E1" "$E2" "$TINY -skip-data 20:8,20:8 -steps 2"
check "-skip-data with one AT twice is refused" one_line_error "$E2" "$RC" "AT increasing"
D=$SCRATCH/skipbad
run_tg "$E1" "$E2" "$TINY -skip-data 8:4 -steps 5 -o $D"
run_tg "$E1" "$E2" "-o $D -resume -skip-data 12:4 -steps 6"
check "-skip-data behind the checkpoint that it did not pass over is refused" \
  one_line_error "$E2" "$RC" "lies before the checkpoint's position"

# 3. the data identity covers the shards' content
mkdir -p "$SCRATCH/data"; cp "$KJV" "$SCRATCH/data/"
DATA=$SCRATCH/data/$(basename "$KJV")
T2="${TINY% -i *} -i $DATA"
D=$SCRATCH/id
run_tg "$E1" "$E2" "$T2 -steps 2 -o $D"
cp -r "$D" "$SCRATCH/id_base"; cp "$DATA" "$SCRATCH/orig.bin"
again() { rm -rf "$D"; cp -r "$SCRATCH/id_base" "$D"; run_tg "$E1" "$E2" "-o $D -resume -steps 3 $1"; }
rewrite() { # FRACTION: the first FRACTION of the tokens moved by one id (the same size, ids < 8192)
  $PY - "$SCRATCH/orig.bin" "$DATA" "$1" <<'PY'
import array, sys
src, dst, frac = sys.argv[1], sys.argv[2], float(sys.argv[3])
b = open(src, "rb").read()
t = array.array("H", b[1024:])
for i in range(int(len(t) * frac)):
    t[i] = (t[i] + 1) % 8191
open(dst, "wb").write(b[:1024] + t.tobytes())
PY
}
rewrite 1.0
again ""
check "identity: every token rewritten at the same size is refused on -resume" \
  one_line_error "$E2" "$RC" "contents differ"
again "-allow-data-change 1"
check "identity: ... unless -allow-data-change 1 (a warning and a data_change event)" \
  bash -c "[ $RC -eq 0 ] && grep -q 'warning: -allow-data-change 1' '$E1' && grep -q '\"event\":\"data_change\"' '$D/log.jsonl'"
rewrite 0.5
again ""
check "identity: the first half of the tokens rewritten is refused" one_line_error "$E2" "$RC" "contents differ"
rewrite 0.0
again ""
check "identity: the same bytes written again resume (rc $RC)" [ "$RC" -eq 0 ]
summary
