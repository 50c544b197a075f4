#!/usr/bin/env bash
# family_ckpt.sh: forged and corrupted checkpoints. Under AddressSanitizer + UBSan (a
# build of train_gpt.c made here): a bit flip in every header entry, self-consistent
# forgeries (checksum recomputed) of every field a loader uses, rank-file sets that
# mix runs, saves or layouts; then -resume's fallback to the newest checkpoint that
# loads, stale checkpoint directories and partial saves. Every bad case must end in one
# "error: ..." line and a non-zero exit, never a crash or a silent resume.
source "$(dirname "$0")/ckpt_common.sh"
need
ASAN=$SCRATCH/train_gpt_asan
if [ -n "${ATTACK_ASAN_BIN:-}" ]; then ASAN=$ATTACK_ASAN_BIN  # tests/attack/asan.sh: the trainer is one already
elif ! nice -n 10 gcc -O1 -g -fsanitize=address,undefined -fno-sanitize-recover=undefined -fno-omit-frame-pointer \
     -std=gnu11 -w train_gpt.c -lm -o "$ASAN" 2> "$SCRATCH/asan_build.txt"; then
  fail "asan build" "$(head -1 "$SCRATCH/asan_build.txt")"; summary; exit 1
fi
export ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0:abort_on_error=0:exitcode=99"
export UBSAN_OPTIONS="${UBSAN_OPTIONS:+$UBSAN_OPTIONS:}print_stacktrace=1:exitcode=98"
# a small model (checkpoints of ~0.3 MB, so the Python forger's checksum is quick) on a
# generated shard of 20000 tokens below V
$PY - "$SCRATCH/small.bin" <<'PYEOF'
import struct, sys
n = 20000
with open(sys.argv[1], "wb") as f:
    f.write(struct.pack("<256i", 20240520, 1, n, *([0] * 253)))
    f.write(struct.pack("<%dH" % n, *[(i * 7919 + i // 13) % 256 for i in range(n)]))
PYEOF
SMALL="-L 2 -H 32 -heads 2 -seq 16 -V 256 -vpad 64 -mb 2 -gb 4 -ramp off -lr 1e-3 -warmup 0 -j '' -threads 1 -i $SCRATCH/small.bin"
REF=$SCRATCH/ref
run_tg "$SCRATCH/ref.out" "$SCRATCH/ref.err" "$SMALL -o $REF -steps 6 -ckpt-every 2"
check "reference run (6 steps, checkpoints at 2, 4, 6)" [ "$RC" -eq 0 -a -f "$REF/ckpt_00000006/DONE" ]
# a 2-rank (dp 2, ZeRO-1) checkpoint for the set cases
REF2=$SCRATCH/ref2
if mpi_ok; then
  eval timeout 120 $MPIRUN 2 "$BIN" "$SMALL" -dp 2 -zero 1 -o "$REF2" -steps 4 -ckpt-every 2 > "$SCRATCH/ref2.out" 2>&1
  check "reference 2-rank run (dp 2, zero 1)" [ -f "$REF2/ckpt_00000004/DONE" -a -f "$REF2/ckpt_00000004/rank_00001.bin" ]
fi

# try NAME DIR_SETUP... : resume from a copy of ckpt_00000006 edited by the given commands
# ($F is its rank_00000.bin) with the ASAN build; want one error line (NEEDLE)
attempt() {
  local name=$1 needle=$2 src=$3; shift 3
  local d=$SCRATCH/case; rm -rf "$d"; mkdir -p "$d"; cp -r "$src" "$d/"
  F=$d/$(basename "$src")/rank_00000.bin; G=$d/$(basename "$src")/rank_00001.bin; CK=$d/$(basename "$src")
  eval "$@"
  BIN=$ASAN run_tg "$SCRATCH/c.out" "$SCRATCH/c.err" "$SMALL -o $d -steps 8 -resume"
  if one_line_error "$SCRATCH/c.err" "$RC" "$needle"; then pass "$name"
  else fail "$name" "exit $RC, $(head -c 300 "$SCRATCH/c.err" | tr '\n' ' ')"; fi
}

# 1. a bit flip in every defined header entry and in unused ones: the checksum covers the header
for f in $(seq 0 49) 77 127; do
  bit=$(( f % 2 == 0 ? 0 : 40 ))
  attempt "bit flip: header entry $f bit $bit" "" "$REF/ckpt_00000006" "$PY tests/attack/ckpt_forge.py \$F $f flip $bit"
done
# 2. self-consistent forgeries (checksum recomputed): validation, not the checksum, must stop them
while read -r f v what; do
  attempt "forged $what" "" "$REF/ckpt_00000006" "$PY tests/attack/ckpt_forge.py \$F $f $v"
done <<'CASES'
12 1 tp_rank=1_on_a_single-rank_checkpoint
13 1 pp_rank=1
14 3 dp_rank=3
15 2 rank=2
8 0 tp=0
9 0 pp=0
10 0 dp=0
8 2 tp=2_(files_missing)
10 -1 dp=-1
8 4294967296 tp=2^32
2 0 L=0
2 3 L=3_(another_model)
3 -32 H=-32
4 3 heads=3_(does_not_divide_H)
4 0 heads=0
5 1099511627776 seq=2^40
6 70000 V=70000
7 100 Vp_below_V
11 2 zero=2
16 -1 step=-1
17 12345 tokens_not_samples*seq
18 -4 samples=-4
19 1000 adam_t_above_step
22 999999999999 n_params_huge
22 -1 n_params=-1
23 -4 opt_off=-4
24 9223372036854775807 n_opt=INT64_MAX
24 10 n_opt_not_the_buffer
26 5 scaled_init=5
27 -3 auto_gb=-3
27 1099511627777 auto_gb=2^40+1
2 4096 L=4096_(bounds_must_not_overflow)
3 16777216 H=2^24
22 800000000000000000 n_params=8e17
24 800000000000000000 n_opt=8e17
31 -1 noise_n=-1
32 7 shuffle=7
1 1 version_1
1 99 version_99
0 7 magic
50 9 skipped_data_ranges=9_(at_most_8)
50 -1 skipped_data_ranges=-1
50 1 one_skipped_range_of_0_samples
51 5 an_unused_skipped_range_not_zero
CASES
attempt "format version 1 is refused with the reason" "version 1 headers are not covered" "$REF/ckpt_00000006" "$PY tests/attack/ckpt_forge.py \$F 1 1"
attempt "truncated rank file" "truncated" "$REF/ckpt_00000006" "truncate -s 2000 \$F"
attempt "empty rank file" "truncated" "$REF/ckpt_00000006" ": > \$F"
attempt "rank file is a directory" "" "$REF/ckpt_00000006" "rm \$F && mkdir \$F"
attempt "payload bit flip" "checksum mismatch" "$REF/ckpt_00000006" "printf '\\x55' | dd of=\$F bs=1 seek=5000 conv=notrunc status=none"
attempt "grown rank file" "truncated or corrupt" "$REF/ckpt_00000006" "printf 'xxxx' >> \$F"
# 3. rank-file sets (a 2-rank checkpoint, loaded by one process)
if mpi_ok; then
attempt "set: run-wide field differs between rank files (seed, checksum recomputed)" "mixes files" "$REF2/ckpt_00000004" "$PY tests/attack/ckpt_forge.py \$G 20 7"
attempt "set: the schedule differs between rank files (warmup, checksum recomputed)" "mixes files" "$REF2/ckpt_00000004" "$PY tests/attack/ckpt_forge.py \$G 41 7"
attempt "set: a rank file of another save (step 2 in step 4)" "mixes files" "$REF2/ckpt_00000004" "cp $REF2/ckpt_00000002/rank_00001.bin \$G"
attempt "set: a stale rank file of a wider layout" "has 3 rank files" "$REF2/ckpt_00000004" "cp \$G \$CK/rank_00002.bin"
attempt "set: a rank file missing" "has 1 rank files" "$REF2/ckpt_00000004" "rm \$G"
attempt "set: rank files swapped" "says it is rank" "$REF2/ckpt_00000004" "mv \$F \$CK/x && mv \$G \$F && mv \$CK/x \$G"
attempt "set: single-rank file inside a 2-rank set" "" "$REF2/ckpt_00000004" "cp $REF/ckpt_00000006/rank_00000.bin \$F"
attempt "set: rank 0 forged to a 1-rank layout" "" "$REF2/ckpt_00000004" "$PY tests/attack/ckpt_forge.py \$F 10 1"
fi

# 4. fallback: the newest checkpoint is corrupt, -resume takes the one before and says why
D=$SCRATCH/fb; rm -rf "$D"; mkdir -p "$D"; cp -r "$REF/ckpt_00000002" "$REF/ckpt_00000004" "$D/"
printf '\x55' | dd of="$D/ckpt_00000004/rank_00000.bin" bs=1 seek=5000 conv=notrunc status=none
cp "$REF/log.jsonl" "$D/log.jsonl"
run_tg "$SCRATCH/fb.out" "$SCRATCH/fb.err" "$SMALL -o $D -steps 6 -ckpt-every 2 -resume"
check "fallback: resumes from ckpt_00000002 after skipping the corrupt ckpt_00000004" \
  bash -c "[ $RC -eq 0 ] && grep -q 'resumed from $D/ckpt_00000002' '$SCRATCH/fb.out' && grep -q 'skips $D/ckpt_00000004: .*checksum mismatch' '$SCRATCH/fb.err'"
check "fallback: the continued run is bit-identical to the straight one (ckpt_00000006)" same_ckpt "$REF/ckpt_00000006" "$D/ckpt_00000006"
check "fallback: the corrupt step-4 checkpoint was replaced by a whole new one" same_ckpt "$REF/ckpt_00000004" "$D/ckpt_00000004"
check "fallback: the log holds steps 1-6 once, with the straight run's losses" \
  bash -c "diff <(grep '\"type\":\"train\"' '$REF/log.jsonl' | sed -E 's/.*\"step\":([0-9]+),\"loss\":([^,]*),.*/\1 \2/') <(grep '\"type\":\"train\"' '$D/log.jsonl' | sed -E 's/.*\"step\":([0-9]+),\"loss\":([^,]*),.*/\1 \2/') > /dev/null"
# every checkpoint bad: one error line
D=$SCRATCH/fb2; rm -rf "$D"; mkdir -p "$D"; cp -r "$REF/ckpt_00000002" "$REF/ckpt_00000004" "$D/"
$PY tests/attack/ckpt_forge.py "$D/ckpt_00000002/rank_00000.bin" 12 1; $PY tests/attack/ckpt_forge.py "$D/ckpt_00000004/rank_00000.bin" 16 1 --keep-sum
run_tg "$SCRATCH/fb2.out" "$SCRATCH/fb2.err" "$SMALL -o $D -steps 6 -resume"
check "fallback: no checkpoint loads -> one error line naming the newest's reason" one_line_error "$SCRATCH/fb2.err" "$RC" "none of the 2 complete checkpoints"
# 5. defect 3: a DONE directory mixing files of two layouts (a crash mid-save, then a
#    resume in another layout) is skipped, and the next save of that step replaces it whole
D=$SCRATCH/mix; rm -rf "$D"; mkdir -p "$D"; cp -r "$REF/ckpt_00000002" "$REF/ckpt_00000004" "$D/"
if mpi_ok; then cp "$REF2/ckpt_00000004/rank_00001.bin" "$D/ckpt_00000004/"
else cp "$D/ckpt_00000004/rank_00000.bin" "$D/ckpt_00000004/rank_00001.bin"; fi  # a stale file of a wider save
run_tg "$SCRATCH/mix.out" "$SCRATCH/mix.err" "$SMALL -o $D -steps 4 -ckpt-every 2 -resume"
check "stale rank files: the mixed ckpt_00000004 is skipped, resume from ckpt_00000002" \
  bash -c "[ $RC -eq 0 ] && grep -q 'resumed from $D/ckpt_00000002' '$SCRATCH/mix.out' && grep -q 'has 2 rank files' '$SCRATCH/mix.err'"
check "stale rank files: the new ckpt_00000004 holds no file of the old save and equals the straight run" \
  bash -c "[ ! -e '$D/ckpt_00000004/rank_00001.bin' ]" 
check "stale rank files: new ckpt_00000004 is bit-identical to the reference" same_ckpt "$REF/ckpt_00000004" "$D/ckpt_00000004"
# 6. partial saves are cleared at start
mkdir -p "$D/ckpt_00000006.tmp" "$D/ckpt_00000004.old"; echo junk > "$D/ckpt_00000006.tmp/rank_00000.bin.tmp"
run_tg "$SCRATCH/p.out" "$SCRATCH/p.err" "$SMALL -o $D -steps 5 -resume"
check "partial saves (ckpt_*.tmp, ckpt_*.old) are removed at start" \
  bash -c "[ $RC -eq 0 ] && [ ! -e '$D/ckpt_00000006.tmp' ] && [ ! -e '$D/ckpt_00000004.old' ] && grep -q 'removed the partial checkpoint' '$SCRATCH/p.out'"
check "a partial save is never resumed from (resumed from ckpt_00000004)" grep -q "resumed from $D/ckpt_00000004" "$SCRATCH/p.out"
summary
