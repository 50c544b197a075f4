#!/usr/bin/env bash
# family_hf.sh: the Hugging Face export and import (dev/export_hf.py, dev/import_hf.py) against
# the checkpoints and model directories that broke them (issue 30):
#   1. a -pp 2 -vpp 2 checkpoint exports every layer where the trainer holds it: the same bytes
#      as the export of its weights resaved by the trainer as 1x1x1 (the C loader, not the
#      exporter, puts the layers back together there; -lr 0 keeps the weights as they are)
#   2. import of malformed configs and safetensors files: one "error:" line, never a traceback;
#      NaN/Inf weights, overlapping tensors, fewer layers in the config than in the file and
#      sharded checkpoints import, broken indexes are refused; dropout is warned about
#   3. a run directory exports its highest complete ckpt_<digits> (by number, not by name),
#      never ckpt_N.old or ckpt_N.tmp, and a renamed checkpoint directory is refused
#   4. forged headers, version 1 (whose header is not under its checksum) and 2: refused as
#      ckpt_header_validate refuses them
source "$(dirname "$0")/ckpt_common.sh"
need
EXPORT="$PY dev/export_hf.py"
IMPORT="$PY dev/import_hf.py"
# export_ok NAME ARGS...: dev/export_hf.py ARGS exits 0 (its stdout is left in $SCRATCH/o.txt)
export_ok() {
  local name=$1; shift
  RC=0; timeout 120 $EXPORT "$@" > "$SCRATCH/o.txt" 2> "$SCRATCH/e.txt" || RC=$?
  if [ "$RC" -eq 0 ]; then pass "$name"; else fail "$name" "rc $RC: $(head -c 300 "$SCRATCH/e.txt" | tr '\n' ' ')"; fi
}
# tool_err NAME NEEDLE TOOL ARGS...: fails with one "error:" line on stderr holding NEEDLE
tool_err() {
  local name=$1 needle=$2 tool=$3; shift 3
  RC=0; timeout 120 $tool "$@" > "$SCRATCH/o.txt" 2> "$SCRATCH/e.txt" || RC=$?
  if one_line_error "$SCRATCH/e.txt" "$RC" "$needle"; then pass "$name"
  else fail "$name" "rc $RC: $(head -c 300 "$SCRATCH/e.txt" | tr '\n' ' ')"; fi
}
out() { mktemp -d "$SCRATCH/out.XXXXXX"; } # a fresh directory for each export or import

# a small model (checkpoints of ~0.4 MB, so the Python checksums are quick) on a generated shard
# of 20000 tokens below V, and a 256-token tokenizer.json for its exports
$PY - "$SCRATCH/small.bin" "$SCRATCH/tok256.json" <<'PYEOF'
import json, struct, sys
n = 20000
with open(sys.argv[1], "wb") as f:
    f.write(struct.pack("<256i", 20240520, 1, n, *([0] * 253)))
    f.write(struct.pack("<%dH" % n, *[(i * 7919 + i // 13) % 256 for i in range(n)]))
vocab = {f"t{i}": i for i in range(255)}
json.dump({"model": {"type": "BPE", "vocab": vocab, "merges": []},
           "added_tokens": [{"id": 255, "content": "<|endoftext|>", "special": True}]}, open(sys.argv[2], "w"))
# the same vocabulary as the trainer's decoder file (llmc/host/tokenizer.h), beside it: an own BPE
with open(sys.argv[2][:-5] + ".bin", "wb") as f:
    f.write(struct.pack("<256I", 20240328, 2, 256, 255, *([0] * 252)))
    for t in [f"t{i}".encode() for i in range(255)] + [b"<|endoftext|>"]:
        f.write(struct.pack("<B", len(t)) + t)
PYEOF
SMALL="-H 32 -heads 2 -seq 16 -V 256 -vpad 64 -mb 2 -gb 4 -ramp off -lr 1e-3 -warmup 0 -j '' -threads 1"
SMALL="$SMALL -i $SCRATCH/small.bin"
TOK=(--tokenizer "$SCRATCH/tok256.json")

# 1. -vpp: the export of an interleaved checkpoint vs the export of the trainer's 1x1x1 resave
vpp_case() { # vpp_case NAME FLAGS TOKENIZER_ARGS...
  local name=$1 flags=$2 d r1 a b; shift 2
  d=$(mktemp -d "$SCRATCH/vpp.XXXXXX"); r1=$(mktemp -d "$SCRATCH/vpp1.XXXXXX")
  eval timeout 120 $MPIRUN 2 "$BIN" "$flags" -pp 2 -vpp 2 -steps 2 -ckpt-every 2 -o "$d" > "$SCRATCH/v.out" 2>&1
  check "$name: setup: the -pp 2 -vpp 2 run saved step 2" [ -f "$d/ckpt_00000002/DONE" ]
  cp -r "$d/ckpt_00000002" "$r1/"
  run_tg "$SCRATCH/v.out" "$SCRATCH/v.err" "$flags -lr 0 -steps 3 -ckpt-every 1 -o $r1 -resume"
  check "$name: setup: resumed as 1x1x1 with -lr 0, saved step 3 (rc $RC)" [ -f "$r1/ckpt_00000003/DONE" ]
  a=$(out); b=$(out)
  export_ok "$name: export of the -vpp 2 checkpoint" "$d" "$a" "$@"
  export_ok "$name: export of the 1x1x1 resave" "$r1/ckpt_00000003" "$b" "$@"
  check "$name: both exports hold the same tensors, every layer in its place" cmp -s "$a/model.safetensors" \
    "$b/model.safetensors"
}
vpp_case "-L 4 tiny (1 layer per chunk)" "$TINY -L 4"
vpp_case "-L 8 small (2 layers per chunk)" "$SMALL -L 8" "${TOK[@]}"

# a single-process small run with checkpoints 2 and 4: the base of items 3 and 4
R=$SCRATCH/run
run_tg "$SCRATCH/r.out" "$SCRATCH/r.err" "$SMALL -L 2 -steps 4 -ckpt-every 2 -o $R"
check "setup: small run with checkpoints 2 and 4 (rc $RC)" [ -f "$R/ckpt_00000004/DONE" ]
REF4=$(out)
export_ok "export of ckpt_00000004 itself" "$R/ckpt_00000004" "$REF4" "${TOK[@]}"

# 3. which checkpoint of a run directory
# exports_step NAME DIR STEP: the export of run directory DIR took checkpoint step STEP
exports_step() {
  local name=$1 d=$2 step=$3 o; o=$(out)
  RC=0; timeout 120 $EXPORT "$d" "$o" "${TOK[@]}" > "$SCRATCH/o.txt" 2> "$SCRATCH/e.txt" || RC=$?
  if [ "$RC" -eq 0 ] && grep -q "(step $step," "$SCRATCH/o.txt"; then pass "$name"
  else fail "$name" "rc $RC: $(head -c 300 "$SCRATCH/o.txt" "$SCRATCH/e.txt" | tr '\n' ' ')"; fi
}
D=$SCRATCH/pick1; mkdir -p "$D"; cp -r "$R/ckpt_00000002" "$R/ckpt_00000004" "$D/"
cp -r "$R/ckpt_00000002" "$D/ckpt_00000004.old"
cp -r "$R/ckpt_00000002" "$D/ckpt_00000008.tmp"
mkdir -p "$D/ckpt_00000006"; cp "$R/ckpt_00000002/rank_00000.bin" "$D/ckpt_00000006/"
exports_step "run dir with ckpt_00000004.old, ckpt_00000008.tmp and an unfinished 6: step 4 is taken" "$D" 4
O=$(out); $EXPORT "$D" "$O" "${TOK[@]}" > /dev/null 2>&1
check "... and its export is that of ckpt_00000004" cmp -s "$O/model.safetensors" "$REF4/model.safetensors"
D=$SCRATCH/pick2; mkdir -p "$D"; cp -r "$R/ckpt_00000002" "$D/ckpt_99999999"
cp -r "$R/ckpt_00000004" "$D/ckpt_100000000"
$PY tests/attack/ckpt_forge.py "$D/ckpt_99999999/rank_00000.bin" 16 99999999
$PY tests/attack/ckpt_forge.py "$D/ckpt_100000000/rank_00000.bin" 16 100000000
exports_step "run dir with ckpt_99999999 and ckpt_100000000: the higher step 100000000 is taken" "$D" 100000000
D=$SCRATCH/pick3; mkdir -p "$D"; cp -r "$R/ckpt_00000004" "$D/"; cp -r "$R/ckpt_00000002" "$D/ckpt_00000009"
tool_err "run dir whose newest ckpt_00000009 holds step 2 (renamed): refused" "renamed" "$EXPORT" "$D" "$(out)" \
  "${TOK[@]}"
tool_err "the renamed ckpt_00000009 named directly: refused" "renamed" "$EXPORT" "$D/ckpt_00000009" "$(out)" "${TOK[@]}"
D=$SCRATCH/pick4; mkdir -p "$D"; cp -r "$R/ckpt_00000004" "$D/ckpt_00000004.old"
tool_err "run dir holding only ckpt_00000004.old: no checkpoint" "no checkpoint" "$EXPORT" "$D" "$(out)" "${TOK[@]}"

# 4. forged headers. forge FILE VERSION FIELD=VALUE...: sets the fields and rewrites the
# checksum as that version computes it (1: the payload only; 2: the header, entry 25 zero,
# then the payload), so only validation can stop the forgery.
forge() {
  $PY - "$@" <<'PYEOF'
import struct, sys
def fnv(data, h=0xcbf29ce484222325):
    for b in data:
        h = ((h ^ b) * 0x100000001b3) & 0xFFFFFFFFFFFFFFFF
    return h
path, version = sys.argv[1], int(sys.argv[2])
b = bytearray(open(path, "rb").read())
h = list(struct.unpack_from("<128q", b))
h[1] = version
for kv in sys.argv[3:]:
    k, v = kv.split("=")
    h[int(k)] = int(v)
h[25] = 0
s = fnv(bytes(b[1024:]), 0xcbf29ce484222325 if version == 1 else fnv(struct.pack("<128q", *h)))
h[25] = s - (1 << 64) if s >= 1 << 63 else s
struct.pack_into("<128q", b, 0, *h)
open(path, "wb").write(b)
PYEOF
}
# forged NAME NEEDLE VERSION FIELD=VALUE...: a copy of ckpt_00000004 under a name that is not
# ckpt_<digits> (so the header alone is judged), forged, must be refused by the export
forged() {
  local name=$1 needle=$2 v=$3 d; shift 3
  d=$(mktemp -d "$SCRATCH/forged.XXXXXX"); cp "$R/ckpt_00000004"/* "$d/"; forge "$d/rank_00000.bin" "$v" "$@"
  tool_err "$name" "$needle" "$EXPORT" "$d" "$(out)" "${TOK[@]}"
}
# the header fields by index (llmc/host/checkpoint.h, CkptField)
F_L=2; F_HEADS=4; F_TP=8; F_ZERO=11; F_RANK=15; F_STEP=16; F_TOKENS=17; F_SAMPLES=18; F_ADAM_T=19; F_VPP=40
D=$SCRATCH/v1ok; cp -r "$R/ckpt_00000004" "$D"; forge "$D/rank_00000.bin" 1
O=$(out); export_ok "version 1 (checksum over the payload), unforged: exported" "$D" "$O" "${TOK[@]}"
check "... the same tensors as the version-2 original" cmp -s "$O/model.safetensors" "$REF4/model.safetensors"
for v in 1 2; do
  forged "v$v: step -1" "inconsistent progress" $v $F_STEP=-1
  forged "v$v: step 0 with samples > 0" "inconsistent progress" $v $F_STEP=0 $F_ADAM_T=0
  forged "v$v: adam_t above step" "inconsistent progress" $v $F_ADAM_T=5
  forged "v$v: tokens not samples x seq" "inconsistent progress" $v $F_TOKENS=7
  forged "v$v: L 0" "model shape" $v $F_L=0
  forged "v$v: heads 0" "model shape" $v $F_HEADS=0
  forged "v$v: heads 3 do not divide H 32" "do not divide" $v $F_HEADS=3
  forged "v$v: tp 0" "layout" $v $F_TP=0
  forged "v$v: zero 2" "zero=2" $v $F_ZERO=2
  forged "v$v: rank 1 of a 1-rank layout" "is not a rank" $v $F_RANK=1
  forged "v$v: vpp 3 for 2 layers" "chunk count" $v $F_VPP=3
  forged "v$v: vpp -1" "chunk count" $v $F_VPP=-1
  D=$SCRATCH/named$v; mkdir -p "$D"; cp -r "$R/ckpt_00000004" "$D/"
  forge "$D/ckpt_00000004/rank_00000.bin" $v $F_STEP=3 $F_ADAM_T=3
  tool_err "v$v: step forged to 3 in ckpt_00000004 (self-consistent otherwise): refused" "named for step 4" \
    "$EXPORT" "$D" "$(out)" "${TOK[@]}"
done
D=$SCRATCH/v2payload; cp -r "$R/ckpt_00000004" "$D"
$PY - "$D/rank_00000.bin" <<'PYEOF'
import struct, sys
def fnv(data, h=0xcbf29ce484222325):
    for b in data:
        h = ((h ^ b) * 0x100000001b3) & 0xFFFFFFFFFFFFFFFF
    return h
b = bytearray(open(sys.argv[1], "rb").read())
h = list(struct.unpack_from("<128q", b))
h[16], h[19] = 3, 3  # a forged step, then a checksum over the payload only, as version 1 computes it
s = fnv(bytes(b[1024:]))
h[25] = s - (1 << 64) if s >= 1 << 63 else s
struct.pack_into("<128q", b, 0, *h)
open(sys.argv[1], "wb").write(b)
PYEOF
tool_err "v2 whose checksum leaves out the header (step forged): refused" "checksum mismatch" "$EXPORT" "$D" "$(out)" \
  "${TOK[@]}"

# 2. import. mkhf DIR CASE: a GPT-2 model directory written here from numpy (L 2, C 8, 2 heads,
# T 8, V 16), then broken as CASE says
cat > "$SCRATCH/mkhf.py" <<'PYEOF'
import json, os, struct, sys
import numpy as np
d, case = sys.argv[1], sys.argv[2]
os.makedirs(d, exist_ok=True)
L, C, NH, T, V = 2, 8, 2, 8, 16
cfg = {"model_type": "gpt2", "n_layer": L, "n_embd": C, "n_head": NH, "n_positions": T, "vocab_size": V,
       "activation_function": "gelu_new", "layer_norm_epsilon": 1e-5, "tie_word_embeddings": True}
rng = np.random.default_rng(5)
t = {"transformer.wte.weight": (V, C), "transformer.wpe.weight": (T, C), "transformer.ln_f.weight": (C,),
     "transformer.ln_f.bias": (C,)}
for l in range(L):
    for n, s in (("ln_1.weight", (C,)), ("ln_1.bias", (C,)), ("attn.c_attn.weight", (C, 3 * C)),
                 ("attn.c_attn.bias", (3 * C,)), ("attn.c_proj.weight", (C, C)), ("attn.c_proj.bias", (C,)),
                 ("ln_2.weight", (C,)), ("ln_2.bias", (C,)), ("mlp.c_fc.weight", (C, 4 * C)),
                 ("mlp.c_fc.bias", (4 * C,)), ("mlp.c_proj.weight", (4 * C, C)), ("mlp.c_proj.bias", (C,))):
        t[f"transformer.h.{l}.{n}"] = s
t = {k: rng.standard_normal(s).astype(np.float32) for k, s in t.items()}
edits = {"n_head0": ("n_head", 0), "n_head_str": ("n_head", "2"), "n_embd_float": ("n_embd", 8.0),
         "n_layer_null": ("n_layer", None), "eps_str": ("layer_norm_epsilon", "1e-5"), "n_layer1": ("n_layer", 1),
         "tie_str": ("tie_word_embeddings", "yes"), "dropout": ("resid_pdrop", 0.1), "V_big": ("vocab_size", 70000)}
if case in edits:
    cfg[edits[case][0]] = edits[case][1]
if case == "no_n_head":
    del cfg["n_head"]
if case == "nan":
    t["transformer.wte.weight"][3, 4] = np.nan
if case == "inf":
    t["transformer.h.1.mlp.c_fc.bias"][0] = np.inf
dtype = {"f16": np.float16}.get(case, np.float32)
names = sorted(t)
hdr, off = {}, 0
for n in names:
    nb = t[n].size * np.dtype(dtype).itemsize
    hdr[n] = {"dtype": "F16" if dtype == np.float16 else "F32", "shape": list(t[n].shape),
              "data_offsets": [off, off + nb]}
    off += nb
if case == "overlap":  # ln_1.bias of layer 0 laid over ln_1.weight (the same size)
    hdr["transformer.h.0.ln_1.bias"]["data_offsets"] = hdr["transformer.h.0.ln_1.weight"]["data_offsets"]
if case == "bad_dtype":
    hdr["transformer.wpe.weight"]["dtype"] = "I8"
if case == "offsets_str":
    hdr["transformer.wpe.weight"]["data_offsets"] = ["0", "4"]
if case == "entry_list":
    hdr["transformer.wpe.weight"] = [1, 2]
h = json.dumps([hdr] if case == "st_list" else hdr).encode()
blob = struct.pack("<Q", 2 ** 62 if case == "hlen_huge" else len(h)) + h
blob += b"".join(t[n].astype(dtype).tobytes() for n in names)
if case == "st_short":
    blob = b"\x05\0\0\0\0"
if case == "st_trunc":
    blob = blob[:-4]
json.dump([cfg] if case == "cfg_list" else cfg, open(os.path.join(d, "config.json"), "w"))
if case == "cfg_garbage":
    open(os.path.join(d, "config.json"), "wb").write(b"\xff{")
def st_file(names):
    hdr, off = {}, 0
    for n in names:
        nb = t[n].size * 4
        hdr[n] = {"dtype": "F32", "shape": list(t[n].shape), "data_offsets": [off, off + nb]}
        off += nb
    h = json.dumps(hdr).encode()
    return struct.pack("<Q", len(h)) + h + b"".join(t[n].tobytes() for n in names)
if case.startswith("sharded"):  # as transformers writes above max_shard_size: two shards and an index
    st = ["model-00001-of-00002.safetensors", "model-00002-of-00002.safetensors"]
    half = {n: st[i % 2] for i, n in enumerate(names)}
    for f in st:
        open(os.path.join(d, f), "wb").write(st_file([n for n in names if half[n] == f]))
    if case == "sharded_lost":
        os.remove(os.path.join(d, st[1]))
    if case == "sharded_path":
        half[names[0]] = "../" + st[0]
    if case == "sharded_moved":  # the index places a tensor in the other shard
        half[names[0]] = st[1]
    if case == "sharded_gap":  # a tensor the index names, in no shard
        half["transformer.h.9.ln_1.weight"] = st[0]
    index = {"metadata": {}, "weight_map": half}
    if case == "sharded_nomap":
        index = {"metadata": {}}
    json.dump(index, open(os.path.join(d, "model.safetensors.index.json"), "w"))
else:
    open(os.path.join(d, "model.safetensors"), "wb").write(blob)
PYEOF
imp_err() { # imp_err CASE NEEDLE WHAT
  local d=$SCRATCH/hf_$1; $PY "$SCRATCH/mkhf.py" "$d" "$1"
  tool_err "import: $3" "$2" "$IMPORT" "$d" "$(out)" --vpad 8
}
for c in ok f16 dropout; do $PY "$SCRATCH/mkhf.py" "$SCRATCH/hf_$c" "$c"; done
O=$(out)
RC=0; timeout 60 $IMPORT "$SCRATCH/hf_ok" "$O" --vpad 8 > "$SCRATCH/o.txt" 2> "$SCRATCH/e.txt" || RC=$?
check "import: a well-formed model directory imports (rc $RC), nothing on stderr" \
  bash -c "[ $RC -eq 0 ] && [ -f '$O/DONE' ] && [ ! -s '$SCRATCH/e.txt' ]"
OK_IMPORT=$O
RC=0; timeout 60 $IMPORT "$SCRATCH/hf_f16" "$(out)" --vpad 8 > "$SCRATCH/o.txt" 2> "$SCRATCH/e.txt" || RC=$?
check "import: fp16 weights import (rc $RC)" [ "$RC" -eq 0 ]
RC=0; timeout 60 $IMPORT "$SCRATCH/hf_dropout" "$(out)" --vpad 8 > "$SCRATCH/o.txt" 2> "$SCRATCH/e.txt" || RC=$?
check "import: resid_pdrop 0.1 imports (rc $RC) with one warning that the trainer has no dropout" \
  bash -c "[ $RC -eq 0 ] && [ \$(wc -l < '$SCRATCH/e.txt') -eq 1 ] && grep -q 'warning: .*resid_pdrop=0.1.*no dropout' \
    '$SCRATCH/e.txt'"
imp_err n_head0 "n_head must be" "n_head 0"
imp_err n_head_str "n_head must be" "n_head a string"
imp_err n_embd_float "n_embd must be" "n_embd a float"
imp_err n_layer_null "n_layer must be" "n_layer null"
imp_err no_n_head "n_head must be" "n_head missing"
imp_err eps_str "layer_norm_epsilon must be" "layer_norm_epsilon a string"
imp_err tie_str "tie_word_embeddings must be" "tie_word_embeddings a string"
imp_err V_big "vocab_size must be" "vocab_size 70000 (over uint16)"
imp_err cfg_list "not an object" "config.json a list"
imp_err cfg_garbage "not valid JSON" "config.json not UTF-8 JSON"
imp_err st_list "not an object" "safetensors header a list"
imp_err st_short "shorter than its 8-byte" "model.safetensors of 5 bytes"
imp_err st_trunc "data_offsets" "model.safetensors missing its last 4 bytes"
imp_err hlen_huge "header length" "header length 2^62"
imp_err entry_list "not an object" "a tensor entry a list"
imp_err offsets_str "data_offsets" "data_offsets strings"
imp_err bad_dtype "unsupported dtype" "dtype I8"
imp_err overlap "overlap" "two tensors' data_offsets overlap"
imp_err nan "NaN or infinite" "a NaN weight"
imp_err inf "NaN or infinite" "an infinite weight"
imp_err n_layer1 "n_layer=1" "n_layer 1, tensors of 2 layers in the file"
$PY "$SCRATCH/mkhf.py" "$SCRATCH/hf_sharded" sharded
O=$(out)
RC=0; timeout 60 $IMPORT "$SCRATCH/hf_sharded" "$O" --vpad 8 > "$SCRATCH/o.txt" 2> "$SCRATCH/e.txt" || RC=$?
check "import: a sharded model (index + 2 shards) imports (rc $RC) to the same checkpoint as the single file" \
  bash -c "[ $RC -eq 0 ] && cmp -s '$O/rank_00000.bin' '$OK_IMPORT/rank_00000.bin'"
imp_err sharded_lost "lacks" "sharded, one shard file missing"
imp_err sharded_path "is not a file name" "sharded, a weight_map entry '../model-...'"
imp_err sharded_moved "which the index places" "sharded, a tensor in a shard the index does not place it in"
imp_err sharded_gap "which does not hold it" "sharded, the index names a tensor no shard holds"
imp_err sharded_nomap "no weight_map" "sharded, an index without weight_map"

# 5. the tokenizer: the run's own (from its config.json), another only when forced, none when the run had none
RT=$SCRATCH/own_tok
run_tg "$SCRATCH/t.out" "$SCRATCH/t.err" "$SMALL -L 2 -steps 2 -tokenizer $SCRATCH/tok256.bin -o $RT"
O=$(out)
export_ok "a run with its own tokenizer: exported without --tokenizer" "$RT" "$O"
check "... with the run's tokenizer.json, byte for byte (its ids are the run's)" cmp -s "$O/tokenizer.json" "$SCRATCH/tok256.json"
tool_err "... --tokenizer naming another tokenizer is refused" "is not the run's tokenizer" $EXPORT "$RT" "$(out)" \
  --tokenizer dev/data/kjv/kjv_tokenizer.json
export_ok "... and accepted with --force-tokenizer where the sizes fit" "$RT" "$(out)" --tokenizer "$SCRATCH/tok256.json" \
  --force-tokenizer
O=$(out)
export_ok "a run without -tokenizer: the weights only" "$R" "$O"
check "... says so, and writes no tokenizer files" bash -c "grep -q 'weights only, no tokenizer' '$SCRATCH/o.txt' && \
  [ -f '$O/model.safetensors' ] && [ ! -e '$O/tokenizer.json' ]"
cp "$SCRATCH/tok256.bin" "$SCRATCH/lonely.bin"
run_tg "$SCRATCH/t.out" "$SCRATCH/t.err" "$SMALL -L 2 -steps 2 -tokenizer $SCRATCH/lonely.bin -o $SCRATCH/lonely_run"
tool_err "a run whose tokenizer has no .json beside it: one error line" "has no" $EXPORT "$SCRATCH/lonely_run" "$(out)"
summary
