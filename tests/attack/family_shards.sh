#!/usr/bin/env bash
# family_shards.sh: corrupt token shards as -i (and -j): truncation, wrong magic, version
# and count, poison token ids (>= V) at the start, deep inside and at the very end, FIFOs,
# directories, devices, unreadable files, dangling links and empty globs. Each case runs
# twice: as a real run (must fail before step 1, naming the shard) and under -check -i.
source "$(dirname "$0")/lib.sh"
D="$WORK/shards"; mkdir -p "$D"
# shards are built here from the KJV shard's header and tokens by an independent writer
/usr/bin/python3 - "$ROOT/dev/data/kjv/kjv_train_000.bin" "$D" <<'PY'
import os, struct, sys
src, d = sys.argv[1], sys.argv[2]
raw = open(src, "rb").read()
toks = list(struct.unpack("<%dH" % 20000, raw[1024:1024 + 40000]))
def shard(name, t, magic=20240520, version=1, count=None, extra=b"", cut=0):
    h = struct.pack("<3i", magic, version, len(t) if count is None else count) + b"\0" * (1024 - 12)
    b = h + struct.pack("<%dH" % len(t), *t) + extra
    open(os.path.join(d, name), "wb").write(b[:len(b) - cut] if cut else b)
shard("good.bin", toks)
shard("trunc_body1.bin", toks, cut=1)
shard("trunc_body2.bin", toks, cut=2)
shard("trunc_half.bin", toks, cut=20000)
shard("extra.bin", toks, extra=b"\1\2")
shard("magic.bin", toks, magic=20240521)
shard("magic0.bin", toks, magic=0)
shard("version0.bin", toks, version=0)
shard("version2.bin", toks, version=2)
shard("count_big.bin", toks, count=20001)
shard("count_small.bin", toks, count=19999)
shard("count_neg.bin", toks, count=-1)
shard("count_huge.bin", toks, count=2**31 - 1)
shard("count0.bin", [])
shard("short.bin", toks[:20])           # fewer than one sample of 32+1 tokens
shard("val1.bin", toks[:40])            # one sample of 32+1 tokens
open(os.path.join(d, "hdr_trunc.bin"), "wb").write(raw[:100])
open(os.path.join(d, "empty.bin"), "wb").write(b"")
open(os.path.join(d, "text.bin"), "wb").write(b"In the beginning God created the heaven and the earth.\n" * 40)
for name, pos, val in [("poison_first.bin", 0, 8192), ("poison_deep.bin", 17321, 9000),
                       ("poison_last.bin", 19999, 65535), ("poison_v.bin", 5000, 8192)]:
    t = list(toks); t[pos] = val; shard(name, t)
PY
mkfifo "$D/fifo.bin"; mkdir -p "$D/dir.bin"
ln -s "$D/good.bin" "$D/link_good.bin"; ln -s "$D/fifo.bin" "$D/link_fifo.bin"; ln -s "$D/missing.bin" "$D/dangling.bin"
cp "$D/good.bin" "$D/noread.bin"; chmod 000 "$D/noread.bin"
mkdir -p "$D/mix"; cp "$D/good.bin" "$D/mix/a_000.bin"; cp "$D/poison_deep.bin" "$D/mix/a_001.bin"
mkdir -p "$D/mixdir"; cp "$D/good.bin" "$D/mixdir/a_000.bin"; mkdir "$D/mixdir/a_001.bin"

RUN=("$TRAIN" "${TINY[@]}" -steps 1)
both_err() { # NAME PATTERN SHARD-GLOB
  expect_err "run -i $1" "$2" -- "${RUN[@]}" -i "$3"
  expect_err "check -i $1" "$2" -- "$TRAIN" -check "${TINY[@]}" -i "$3"
}
expect_ok "control: good shard trains" -- "${RUN[@]}" -i "$D/good.bin"
expect_ok "control: check good shard" -- "$TRAIN" -check "${TINY[@]}" -i "$D/good.bin"
expect_ok "control: symlink to a good shard" -- "${RUN[@]}" -i "$D/link_good.bin"
for s in trunc_body1 trunc_body2 trunc_half extra count_big count_small count_neg count_huge; do
  both_err "$s" "$s.bin is truncated or corrupt" "$D/$s.bin"
done
both_err "hdr_trunc" "hdr_trunc.bin is truncated" "$D/hdr_trunc.bin"
both_err "empty file" "empty.bin is truncated" "$D/empty.bin"
both_err "text file" "wrong magic" "$D/text.bin"
both_err "magic" "wrong magic 20240521" "$D/magic.bin"
both_err "magic 0" "wrong magic 0" "$D/magic0.bin"
both_err "version 0" "version 0" "$D/version0.bin"
both_err "version 2" "version 2" "$D/version2.bin"
expect_err "run -i count 0" "fewer than one sample" -- "${RUN[@]}" -i "$D/count0.bin"
expect_err "run -i short shard" "fewer than one sample" -- "${RUN[@]}" -i "$D/short.bin"
expect_err "check -i count 0 (refused as the run refuses it)" "has 0 tokens: 0 samples" -- "$TRAIN" -check "${TINY[@]}" -i "$D/count0.bin"
expect_err "check -i short shard" "has 20 tokens: 0 samples" -- "$TRAIN" -check "${TINY[@]}" -i "$D/short.bin"
expect_err "run -j with one sample for mb 2: too short for a micro-batch" "fewer than one micro-batch" -- \
  "${RUN[@]}" -i "$D/good.bin" -j "$D/val1.bin" -mb 2 -val-every 1
expect_err "check -j with one sample for mb 2" "1 samples of 32.1 tokens, fewer than the 2 it needs" -- \
  "$TRAIN" -check "${TINY[@]}" -mb 2 -val-every 1 -j "$D/val1.bin"
both_err "poison at token 0" "poison_first.bin: token id 8192 at token offset 0 " "$D/poison_first.bin"
both_err "poison deep (defect 8)" "poison_deep.bin: token id 9000 at token offset 17321 " "$D/poison_deep.bin"
both_err "poison at the last token" "poison_last.bin: token id 65535 at token offset 19999 " "$D/poison_last.bin"
both_err "poison = V" "token id 8192 at token offset 5000 " "$D/poison_v.bin"
both_err "poison in the second shard of a glob" "a_001.bin: token id 9000 at token offset 17321 " "$D/mix/a_*.bin"
expect_err "run -j poison (val shard)" "poison_deep.bin: token id 9000" -- "${RUN[@]}" -i "$D/good.bin" -j "$D/poison_deep.bin" -val-every 1
expect_err "check -j poison (val shard)" "poison_deep.bin: token id 9000" -- "$TRAIN" -check "${TINY[@]}" -j "$D/poison_deep.bin"
expect_ok "control: the poison is below a larger V" -- "$TRAIN" -check -seq 32 -V 9001 -i "$D/poison_deep.bin"
both_err "FIFO (defect 11)" "fifo.bin is a FIFO" "$D/fifo.bin"
both_err "symlink to a FIFO" "is a FIFO" "$D/link_fifo.bin"
both_err "directory" "dir.bin is a directory" "$D/dir.bin"
both_err "directory matched by a glob" "a_001.bin is a directory" "$D/mixdir/a_*.bin"
both_err "/dev/null" "is a character device" /dev/null
both_err "/dev/zero" "is a character device" /dev/zero
both_err "dangling symlink" "cannot open data shard" "$D/dangling.bin"
expect_err "run -i missing file" "no data shards match" -- "${RUN[@]}" -i "$D/nothere.bin"
expect_err "run -i empty glob" "no data shards match" -- "${RUN[@]}" -i "$D/none_*.bin"
# -check away from the data (a recipe's dry run) notes shards that are not there
run_case "$TRAIN" -check "${TINY[@]}" -i "$D/none_*.bin"
if [ "$RC" -eq 0 ] && grep -q "no data shards match .* (not validated)" "$OUT"; then pass "check -i empty glob: noted, not validated"
else fail "check -i empty glob: noted, not validated" "exit $RC, stdout: $(head -c 200 "$OUT")"; fi
if [ "$(id -u)" -ne 0 ]; then both_err "unreadable" "Permission denied" "$D/noread.bin"
else echo "(running as root: the unreadable-file case is skipped, root reads any file)"; fi
# the same file as -i and -j (named two ways): the run goes on, with a warning
ln -sf "$ROOT/dev/data/kjv/kjv_train_000.bin" "$D/alias_val.bin"
run_case "${RUN[@]}" -i "$ROOT/dev/data/kjv/kjv_train_000.bin" -j "$D/alias_val.bin" -val-every 1 -val-samples 4
if [ "$RC" -eq 0 ] && grep -q "warning: -i and -j share the shard" "$OUT"; then pass "the same shard as -i and -j: a warning"
else fail "the same shard as -i and -j: a warning" "exit $RC, stdout: $(head -c 200 "$OUT")"; fi
attack_done
