#!/usr/bin/env bash
# family_blends.sh: data blends as -i/-j ("0.3 a_*.bin 0.7 b_*.bin") and -blend FILE (JSON):
# malformed weights and lists, names and fields, datasets that are missing, empty, poisoned
# or too small, a blend and -i both, JSON that is not JSON (truncated, nested 10^5 deep, NUL
# bytes, lone surrogates), FIFOs and directories as the file, under a real run and -check,
# and under MPI (every rank exits). Each must be one `error:` line before step 1.
source "$(dirname "$0")/lib.sh"
D="$WORK/blends"; mkdir -p "$D"
/usr/bin/python3 - "$ROOT/dev/data/kjv/kjv_train_000.bin" "$D" <<'PY'
import os, struct, sys
src, d = sys.argv[1], sys.argv[2]
raw = open(src, "rb").read()
toks = list(struct.unpack("<%dH" % 30000, raw[1024:1024 + 60000]))
def shard(name, t):
    h = struct.pack("<3i", 20240520, 1, len(t)) + b"\0" * (1024 - 12)
    open(os.path.join(d, name), "wb").write(h + struct.pack("<%dH" % len(t), *t))
shard("a_000.bin", toks[:10000]); shard("a_001.bin", toks[10000:20000])
shard("b_000.bin", toks[20000:30000])
shard("tiny_000.bin", toks[:20])                       # fewer than one sample of 32+1
shard("one_000.bin", toks[:40])                        # one sample: under a micro-batch of 2
bad = list(toks[:5000]); bad[4321] = 9000; shard("poison_000.bin", bad)
def j(name, text):
    open(os.path.join(d, name), "wb").write(text if isinstance(text, bytes) else text.encode())
A, B = os.path.join(d, "a_*.bin"), os.path.join(d, "b_*.bin")
ok = '{"train": [{"name": "a", "weight": 0.6, "path": "%s"}, {"name": "b", "weight": 0.4, "path": "%s"}]}' % (A, B)
j("ok.json", ok)
j("ok_valid.json", ok[:-1] + ', "valid": [{"name": "va", "weight": 1, "path": "%s"}]}' % B)
j("trunc.json", ok[:len(ok) // 2])
j("notjson.json", "train: [a, b]\n")
j("list.json", "[1, 2]")
j("notrain.json", '{"valid": []}')
j("emptytrain.json", '{"train": []}')
j("deep.json", "[" * 100000 + "]" * 100000)
j("nul.json", ok.encode().replace(b'"a"', b'"\x00a"', 1))
j("surrogate.json", ok.replace('"name": "a"', '"name": "\\ud800"', 1))
j("trailing.json", ok[:-2] + "],}")
j("comment.json", "// blend\n" + ok)
j("noweight.json", '{"train": [{"name": "a", "path": "%s"}]}' % A)
j("strweight.json", '{"train": [{"name": "a", "weight": "0.5", "path": "%s"}]}' % A)
j("zeroweight.json", '{"train": [{"name": "a", "weight": 0, "path": "%s"}, {"name": "b", "weight": 1, "path": "%s"}]}' % (A, B))
j("negweight.json", '{"train": [{"name": "a", "weight": -1, "path": "%s"}, {"name": "b", "weight": 2, "path": "%s"}]}' % (A, B))
j("hugeweight.json", '{"train": [{"name": "a", "weight": 1e400, "path": "%s"}]}' % A)
j("dupname.json", '{"train": [{"name": "a", "weight": 1, "path": "%s"}, {"name": "a", "weight": 1, "path": "%s"}]}' % (A, B))
j("badname.json", '{"train": [{"name": "a b/c", "weight": 1, "path": "%s"}]}' % A)
j("longname.json", '{"train": [{"name": "%s", "weight": 1, "path": "%s"}]}' % ("n" * 60, A))
j("unknown.json", '{"train": [{"name": "a", "weight": 1, "path": "%s", "wieght": 2}]}' % A)
j("badtokens.json", '{"train": [{"name": "a", "weight": 1, "path": "%s", "tokens": 1.5}]}' % A)
j("badepochs.json", '{"train": [{"name": "a", "weight": 1, "path": "%s", "epochs": -2}]}' % A)
j("missing.json", '{"train": [{"name": "a", "weight": 1, "path": "%s"}, {"name": "z", "weight": 1, "path": "%s"}]}' % (A, os.path.join(d, "z_*.bin")))
j("many.json", '{"train": [%s]}' % ", ".join('{"name": "d%d", "weight": 1, "path": "%s"}' % (k, A) for k in range(65)))
j("bigfile.json", " " * (17 << 20) + ok)
# issue 45: keys refused and named (a typo fell back to -j), \u0000, a BOM, a path with a blank
j("vaild.json", ok[:-1] + ', "vaild": [{"name": "va", "weight": 1, "path": "%s"}]}' % B)
j("topdup.json", ok[:-1] + ', "train": [{"name": "b", "weight": 1, "path": "%s"}]}' % B)
j("fielddup.json", '{"train": [{"name": "a", "weight": 1, "path": "%s", "weight": 2}]}' % A)
j("typo.json", '{"train": [{"name": "a", "wieght": 1, "path": "%s"}]}' % A)
j("nulname.json", '{"train": [{"name": "a\\u0000b", "weight": 1, "path": "%s"}]}' % A)
j("nulpath.json", '{"train": [{"name": "a", "weight": 1, "path": "%s\\u0000.x"}]}' % A)
j("bom.json", b"\xef\xbb\xbf" + ok.encode())
open(os.path.join(d, "my shard_000.bin"), "wb").write(open(os.path.join(d, "a_000.bin"), "rb").read())
j("space.json", '{"train": [{"name": "sp", "weight": 1, "path": "%s"}]}' % os.path.join(d, "my shard_*.bin"))
PY
mkfifo "$D/fifo.json"; mkdir -p "$D/dir.json"
A="$D/a_*.bin"; B="$D/b_*.bin"
RUN=("$TRAIN" "${TINY[@]}" -steps 1)
both() { # NAME PATTERN FLAGS...: a real run and -check refuse it alike
  local name="$1" pat="$2"; shift 2
  expect_err "run $name" "$pat" -- "${RUN[@]}" "$@"
  expect_err "check $name" "$pat" -- "$TRAIN" -check "${TINY[@]}" "$@"
}
expect_ok "control: -i '0.6 a 0.4 b' trains" -- "${RUN[@]}" -i "0.6 $A 0.4 $B"
expect_ok "control: -blend ok.json trains, with its valid list" -- "${RUN[@]}" -blend "$D/ok_valid.json" -val-every 1 \
  -val-samples 4
expect_ok "control: -check -blend ok.json" -- "$TRAIN" -check "${TINY[@]}" -blend "$D/ok.json"
both "-i a weight without a glob" "weights and globs in turn" -i "0.6 $A 0.4"
both "-i two globs" "one glob, or weights and globs" -i "$A $B"
both "-i a glob where a weight goes" "is not a weight" -i "0.6 $A $B 0.4"
both "-i weight 0" "weights must be positive" -i "0 $A 1 $B"
both "-i weight -1 (a value that starts with '-')" "needs a path" -i "-1 $A 2 $B"
both "-i weight nan" "weights and globs in turn" -i "nan $A 1 $B"
both "-i weight 1e400" "is not a weight" -i "0.5 $A 1e400 $B"
expect_err "run -i a dataset that matches nothing" "no data shards match .*z_" -- "${RUN[@]}" -i "0.5 $A 0.5 $D/z_*.bin"
run_case "$TRAIN" -check "${TINY[@]}" -i "0.5 $A 0.5 $D/z_*.bin"
if [ "$RC" -eq 0 ] && grep -q "dataset z .*no shards here" "$OUT"; then pass "check -i a dataset with no shards: noted"
else fail "check -i a dataset with no shards: noted" "exit $RC, stdout: $(head -c 300 "$OUT")"; fi
both "-i a dataset with less than one sample" "tiny.*fewer than one sample" -i "0.5 $A 0.5 $D/tiny_*.bin"
both "-i a poisoned dataset" "poison_000.bin: token id 9000 at token offset 4321" -i "0.5 $A 0.5 $D/poison_*.bin"
both "-j a blend with a poisoned dataset" "poison_000.bin: token id 9000" -i "$A" -j "0.5 $B 0.5 $D/poison_*.bin" \
  -val-every 1
expect_err "run -j a blend with a dataset under one micro-batch" "one_.*fewer than one micro-batch" -- "${RUN[@]}" \
  -i "$A" -j "0.5 $B 0.5 $D/one_*.bin" -val-every 1 -mb 2
both "-i 65 datasets" "more than 64 datasets" -i "$(for k in $(seq 65); do printf '1 x '; done)"
for c in trunc notjson list trailing comment nul deep surrogate; do
  both "-blend $c.json" "is not valid JSON|must be a JSON object" -blend "$D/$c.json"
done
both "-blend without a train list" "no \"train\" list|must be a list" -blend "$D/notrain.json"
both "-blend an empty train list" "must be a list of 1 to 64" -blend "$D/emptytrain.json"
both "-blend 65 datasets" "must be a list of 1 to 64" -blend "$D/many.json"
both "-blend a dataset without a weight" "\"weight\" \\(number\\)" -blend "$D/noweight.json"
both "-blend a weight as a string" "\"weight\" \\(number\\)" -blend "$D/strweight.json"
both "-blend weight 0" "weights must be positive" -blend "$D/zeroweight.json"
both "-blend weight -1" "weights must be positive" -blend "$D/negweight.json"
both "-blend weight 1e400" "weights must be positive|not valid JSON" -blend "$D/hugeweight.json"
both "-blend a name twice" "the name a is given twice" -blend "$D/dupname.json"
both "-blend a name with a slash" "a dataset name is" -blend "$D/badname.json"
both "-blend a 60-byte name" "a dataset name is" -blend "$D/longname.json"
both "-blend an unknown field (a typo)" "unknown field \"wieght\"" -blend "$D/unknown.json"
both "-blend tokens 1.5" "\"tokens\" is a whole number" -blend "$D/badtokens.json"
both "-blend epochs -2" "\"epochs\" is a whole|positive number" -blend "$D/badepochs.json"
expect_err "run -blend a dataset that matches nothing" "no data shards match .*z_" -- "${RUN[@]}" -blend "$D/missing.json"
both "-blend a file over 16 MiB" "over 16 MiB" -blend "$D/bigfile.json"
both "-blend a missing file" "cannot open -blend file" -blend "$D/nothere.json"
both "-blend a FIFO" "fifo.json is a FIFO" -blend "$D/fifo.json"
both "-blend a directory" "dir.json is a directory" -blend "$D/dir.json"
both "-blend and -i both" "both name the training data" -blend "$D/ok.json" -i "$A"
both "-blend an unknown top-level key (\"vaild\")" 'unknown key "vaild"' -blend "$D/vaild.json"
both "-blend the key \"train\" twice" 'gives the key "train" twice' -blend "$D/topdup.json"
both "-blend a field twice in one dataset" 'dataset 1 \("a"\) gives the field "weight" twice' -blend "$D/fielddup.json"
both "-blend a misspelt field without the right one" 'dataset 1 \("a"\) has the unknown field "wieght"' \
  -blend "$D/typo.json"
both "-blend \\u0000 in a name" "NUL character" -blend "$D/nulname.json"
both "-blend \\u0000 in a path" "NUL character" -blend "$D/nulpath.json"
both "-blend a byte-order mark" "byte-order mark" -blend "$D/bom.json"
both "-i a path with a blank (unescaped)" "backslash before the blank" -i "$D/my shard_000.bin"
expect_ok "control: -i a path with its blank escaped trains" -- "${RUN[@]}" -i "$D/my\ shard_000.bin"
expect_ok "control: -i a blend with an escaped blank trains" -- "${RUN[@]}" -i "0.5 $D/my\ shard_*.bin 0.5 $B"
expect_ok "control: -blend a path with a blank trains" -- "${RUN[@]}" -blend "$D/space.json"
both "-blend with a valid list and -j both" "give one" -blend "$D/ok_valid.json" -j "$B" -val-every 1
# under MPI: every rank parses the blend, says why, and exits (no rank left waiting)
mpi_err() { # NAME PATTERN CMD...: non-zero exit, no hang, every error line matches PATTERN, no step
  local name="$1" pat="$2"; shift 2
  run_case "$@"
  local why
  if why="$(bad_run)"; then fail "$name" "$why"; return; fi
  if [ "$RC" -eq 0 ]; then fail "$name" "exit 0 (silently accepted)"; return; fi
  if ! grep -q "^error: " "$ERR" || grep "^error: " "$ERR" | grep -Evq -e "$pat"; then
    fail "$name" "error lines do not all match /$pat/: $(grep -m2 '^error: ' "$ERR" | tr '\n' ' ')"; return; fi
  if grep -q "^step " "$OUT"; then fail "$name" "trained before failing"; return; fi
  pass "$name"
}
if command -v mpirun > /dev/null && [ "${ATTACK_NO_MPI:-0}" != 1 ]; then  # asan.sh: a trainer without MPI
  MPI=(mpirun --oversubscribe --allow-run-as-root -np 4)
  mpi_err "mpirun -np 4 (2x2): a bad -blend file ends every rank" "is not valid JSON" "${MPI[@]}" \
    "$TRAIN" "${TINY[@]}" -tp 2 -pp 2 -steps 1 -blend "$D/trunc.json"
  mpi_err "mpirun -np 4 (dp 4): a poisoned blend dataset ends every rank" "token id 9000" "${MPI[@]}" \
    "$TRAIN" "${TINY[@]}" -steps 1 -i "0.5 $A 0.5 $D/poison_*.bin"
fi
attack_done
