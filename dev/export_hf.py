"""
export_hf.py: a checkpoint of this trainer, written in ANY layout (TP x PP x DP, ZeRO or
not), becomes a Hugging Face `transformers` GPT-2 model directory that loads with
AutoModelForCausalLM.from_pretrained(OUT) and AutoTokenizer.from_pretrained(OUT), no
custom code:

    /usr/bin/python3 dev/export_hf.py CKPT_DIR OUT_DIR [--tokenizer TOKENIZER.json [--force-tokenizer]]

CKPT_DIR is one checkpoint (DIR/ckpt_SSSSSSSS) or a run's -o directory (the complete
ckpt_<digits> of the highest step is taken, as -resume takes it; a checkpoint whose header step
is not the one in its name is refused). The rank files are read here with numpy,
following the format of llmc/host/checkpoint.h (header of 128 int64, then fp32 weights, m, v;
every header field checked as ckpt_header_validate checks it, for versions 1 and 2), and the
TP/PP slices and -vpp chunks are put back together the way llmc/host/params.h lays them out.
model.safetensors is written by the safetensors library (save_file; tensors sorted by name), so the
output is a pure function of the weights: import -> export is bit-identical. It runs under the HF
venv of dev/install.sh, which has the library; started by another python without it, it
re-executes itself there.

Written: config.json (GPT2LMHeadModel: pre-LN, learned positions, gelu_new = tanh GeLU,
tied LM head, LayerNorm eps 1e-5, no dropout), model.safetensors (fp32, the padded
vocabulary rows dropped), tokenizer.json + tokenizer_config.json + special_tokens_map.json.
The tokenizer is the run's own: the run record (DIR/config.json) names its -tokenizer FILE.bin,
and FILE.json beside it (dev/data/prepare.py writes both) is attached. --tokenizer names another,
refused when it differs from the run's unless --force-tokenizer; a run without a tokenizer
(pre-tokenized data) exports the weights only, and says so.
"""

import argparse
import json
import os
import re
import struct
import sys

import numpy as np

CKPT_MAGIC = 20261202
CKPT_HEADER_INTS = 128
CKPT_VERSIONS = (1, 2)  # 2: rel13a's header with a checksum covering the header too
# The header fields, by name, at their int64 index (llmc/host/checkpoint.h, CkptField). The one
# table every read and write of a header goes through.
CKPT_FIELDS = {name: i for i, name in enumerate([
    "magic", "version",
    "L", "H", "heads", "seq", "V", "Vp",
    "tp", "pp", "dp", "zero",
    "tp_rank", "pp_rank", "dp_rank", "rank",
    "step", "tokens", "samples", "adam_t",
    "seed", "rng",
    "n_params", "opt_off", "n_opt",
    "checksum",
    "scaled_init",
    "auto_gb",
    "noise_g2m", "noise_sm", "noise_betapow",
    "noise_n",
    "shuffle", "data_hash",
    "lr", "beta1", "beta2", "eps", "wd", "clip",
    "vpp",
])}

# llmc/host/params.h: the tensors in buffer order: (name, layered, split, placement)
PARAMS = [
    ("wte", 0, "rows", "first_last"), ("wpe", 0, "none", "first"),
    ("ln1w", 1, "none", "all"), ("ln1b", 1, "none", "all"),
    ("qkvw", 1, "qkv", "all"), ("qkvb", 1, "qkv", "all"),
    ("attprojw", 1, "cols", "all"), ("attprojb", 1, "none", "all"),
    ("ln2w", 1, "none", "all"), ("ln2b", 1, "none", "all"),
    ("fcw", 1, "rows", "all"), ("fcb", 1, "rows", "all"),
    ("fcprojw", 1, "cols", "all"), ("fcprojb", 1, "none", "all"),
    ("lnfw", 0, "none", "last"), ("lnfb", 0, "none", "last"),
]

# HF GPT-2 name <- (our tensor, transpose): Conv1D stores (in, out), our matrices are (out, in)
HF_LAYER = [("ln_1.weight", "ln1w", 0), ("ln_1.bias", "ln1b", 0),
            ("attn.c_attn.weight", "qkvw", 1), ("attn.c_attn.bias", "qkvb", 0),
            ("attn.c_proj.weight", "attprojw", 1), ("attn.c_proj.bias", "attprojb", 0),
            ("ln_2.weight", "ln2w", 0), ("ln_2.bias", "ln2b", 0),
            ("mlp.c_fc.weight", "fcw", 1), ("mlp.c_fc.bias", "fcb", 0),
            ("mlp.c_proj.weight", "fcprojw", 1), ("mlp.c_proj.bias", "fcprojb", 0)]

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
EOT_TEXT = "<|endoftext|>"


class CkptError(Exception):
    pass


def full_shapes(L, C, T, Vp):
    """per tensor: (rows, cols) of one layer, unsliced (params.h)"""
    rows = [Vp, T, C, C, 3 * C, 3 * C, C, C, C, C, 4 * C, 4 * C, C, C, C, C]
    cols = [C, C, 1, 1, C, 1, C, 1, 1, 1, C, 1, 4 * C, 1, 1, 1]
    return rows, cols


def on_stage(place, pp, PP):
    return {"all": True, "first": pp == 0, "last": pp == PP - 1, "first_last": pp == 0 or pp == PP - 1}[place]


def local_layout(h):
    """the writing rank's buffer: per tensor (offset, nl, rows, cols) as in param_layout_init"""
    L, C, T, Vp, TP, PP = h["L"], h["H"], h["seq"], h["Vp"], h["tp"], h["pp"]
    fr, fc = full_shapes(L, C, T, Vp)
    nlayers = L // PP
    out, off = [], 0
    for t, (name, layered, split, place) in enumerate(PARAMS):
        r, c = fr[t], fc[t]
        if split in ("rows", "qkv"):
            r //= TP
        if split == "cols":
            c //= TP
        nl = (nlayers if layered else 1) if on_stage(place, h["pp_rank"], PP) else 0
        out.append((off, nl, r, c))
        off += nl * r * c
    return out, off


FNV_OFFSET, FNV_PRIME, U64 = 0xcbf29ce484222325, 0x100000001b3, (1 << 64) - 1
FNV_CHUNK = 1 << 18  # bytes per vectorised step (a few MB of temporaries)
_fnv_pow = []  # [i] = FNV_PRIME**(FNV_CHUNK - i) mod 2**64, made on first use


def fnv1a64(data, h=FNV_OFFSET):
    """FNV-1a 64 (llmc/host/utils.h), the plain byte loop: the definition, ~10 MB/s"""
    for b in data:
        h = ((h ^ b) * FNV_PRIME) & U64
    return h


def fnv1a64_fast(data, h=FNV_OFFSET):
    """fnv1a64(data, h) exactly, in numpy at ~100 MB/s. FNV-1a is byte-serial, but only through the
    low 8 bits of the state: with l_i = h_i mod 256 and d_i = (l_i ^ b_i) - l_i (a small integer),
    h_{i+1} = (h_i ^ b_i) * P = (h_i + d_i) * P, so h_m = h_0 P^m + sum_i d_i P^(m-i) mod 2^64, a
    vectorised dot product once the l_i are known. And l_{i+1} = ((l_i ^ b_i) * 0xb3) mod 256 is
    triangular in its bits (P is odd: bit k of x*P is x_k xor a function of x's lower bits), so
    bit k of every l_i is a prefix XOR of a sequence that depends only on the bits below k: eight
    prefix XORs (done on packed bits) give the whole low-byte sequence."""
    if not _fnv_pow:
        pw = np.empty(FNV_CHUNK, dtype=np.uint64)
        pw[0] = FNV_PRIME
        n = 1
        with np.errstate(over="ignore"):  # uint64 products wrap: arithmetic mod 2**64, as intended
            while n < FNV_CHUNK:
                pw[n:2 * n] = pw[:n] * np.uint64(pow(FNV_PRIME, n, 1 << 64))
                n *= 2
        _fnv_pow.append(pw[::-1].copy())
    powr = _fnv_pow[0]
    buf = np.frombuffer(data, dtype=np.uint8)
    ones = np.uint64(U64)
    for s in range(0, len(buf), FNV_CHUNK):
        b = buf[s:s + FNV_CHUNK]  # (m,)
        m = len(b)
        if m < 64:
            h = fnv1a64(b.tobytes(), h)
            continue
        l0 = h & 0xff
        low = np.zeros(m + 1, dtype=np.uint8)  # (m+1,) l_0 .. l_m, filled one bit per pass
        t = np.empty(m, dtype=np.uint8)
        for k in range(8):
            bit = 1 << k
            low[0] = l0 & (bit - 1)
            np.bitwise_xor(low[:-1], b, out=t)
            np.multiply(t, 0xb3, out=t)  # FNV_PRIME mod 256; bit k of the product needs bits <= k only
            np.bitwise_and(t, bit, out=t)  # bit k of l_{i+1} xor bit k of l_i
            p = np.packbits(t, bitorder="little")
            p = np.concatenate([p, np.zeros(-len(p) % 8, np.uint8)])
            w = p.view(np.uint64)  # (ceil(m/64),) 64 positions per word
            for sh in (1, 2, 4, 8, 16, 32):  # prefix XOR inside each word
                w ^= w << np.uint64(sh)
            top = (w >> np.uint64(63)).astype(np.uint8)
            np.bitwise_xor.accumulate(top, out=top)  # ... and across words
            w[1:] ^= top[:-1].astype(np.uint64) * ones
            if l0 & bit:
                w ^= ones
            r = np.unpackbits(p, bitorder="little")[:m]
            np.multiply(r, bit, out=r)
            np.bitwise_or(low[1:], r, out=low[1:])
        low[0] = l0
        d = np.bitwise_xor(low[:-1], b).astype(np.int64)  # (m,) in [-255, 255]
        d -= low[:-1]
        with np.errstate(over="ignore"):
            acc = int(np.dot(d.view(np.uint64), powr[FNV_CHUNK - m:]))
        h = (h * pow(FNV_PRIME, m, 1 << 64) + acc) & U64
        assert h & 0xff == low[m]
    return h


def fnv1a64_zeros(n, h=FNV_OFFSET):
    """fnv1a64(bytes(n), h): a zero byte only multiplies by P"""
    return h * pow(FNV_PRIME, n, 1 << 64) & U64


# checkpoint.h's limits on what a header may claim (far above any real model)
CKPT_MAX_DIM = 1 << 24
CKPT_MAX_RANKS = 1 << 20
# the entries that differ between the rank files of one save (reshard.h, ckpt_field_per_rank)
PER_RANK_FIELDS = ("tp_rank", "pp_rank", "dp_rank", "rank", "n_params", "opt_off", "n_opt", "checksum")
CKPT_NAME = re.compile(r"ckpt_([0-9]+)")  # what ckpt_dir_name writes; ckpt_N.old, ckpt_N.tmp are not saves
RANK_NAME = re.compile(r"rank_([0-9]{5})\.bin")


def validate_header(h, path, size):
    """ckpt_header_validate (llmc/host/checkpoint.h), for version 1 as for 2: every field used
    here is range-checked and consistent with the file size before it sizes or indexes anything.
    A version-1 header is not under its checksum, so this is all that stands between a forged
    step or shape and the export."""
    def bad(what):
        return CkptError(f"checkpoint file {path} has an invalid header: {what}")
    L, C, NH, T, V, Vp = (h[k] for k in ("L", "H", "heads", "seq", "V", "Vp"))
    if not (1 <= L <= 4096 and 1 <= C <= CKPT_MAX_DIM and 1 <= NH <= C and 1 <= T <= CKPT_MAX_DIM
            and 1 <= V <= 65536 and V <= Vp <= CKPT_MAX_DIM):
        raise bad(f"model shape out of range (L={L} H={C} heads={NH} seq={T} V={V} Vp={Vp})")
    if C % NH:
        raise bad(f"heads={NH} do not divide H={C}")
    TP, PP, DP = h["tp"], h["pp"], h["dp"]
    if not (1 <= TP <= CKPT_MAX_RANKS and 1 <= PP <= CKPT_MAX_RANKS and 1 <= DP <= CKPT_MAX_RANKS
            and TP * PP * DP <= CKPT_MAX_RANKS):
        raise bad(f"layout out of range (tp={TP} pp={PP} dp={DP})")
    if NH % TP or (4 * C) % TP or Vp % TP or L % PP:
        raise bad(f"layout tp={TP} pp={PP} does not fit the model")
    for k in ("zero", "scaled_init", "shuffle"):
        if h[k] not in (0, 1):
            raise bad(f"{k}={h[k]}")
    if not (0 <= h["tp_rank"] < TP and 0 <= h["pp_rank"] < PP and 0 <= h["dp_rank"] < DP
            and h["rank"] == h["tp_rank"] + TP * h["dp_rank"] + TP * DP * h["pp_rank"]):
        raise bad(f"rank {h['rank']} (tp {h['tp_rank']}, pp {h['pp_rank']}, dp {h['dp_rank']}) is not a rank of "
                  f"layout tp={TP} pp={PP} dp={DP}")
    step, tokens, samples, adam_t = h["step"], h["tokens"], h["samples"], h["adam_t"]
    if (step < 0 or tokens < 0 or samples < 0 or adam_t < 0 or adam_t > step or tokens != samples * T
            or (step == 0) != (samples == 0)):
        raise bad(f"inconsistent progress (step={step} tokens={tokens} samples={samples} adam_t={adam_t})")
    if h["auto_gb"] < 0 or h["noise_n"] < 0:
        raise bad(f"auto_gb={h['auto_gb']} noise_n={h['noise_n']}")
    nlayers, vpp = L // PP, h["vpp"]
    if vpp < 0 or vpp > nlayers or (vpp > 1 and nlayers % vpp):  # reshard.h's rule; 0 (before -vpp) = 1
        raise bad(f"bad chunk count (vpp {vpp} for {nlayers} layers per stage)")
    # the exact payload of this rank (ckpt_rank.h's save rule, as reshard.h checks it)
    total = local_layout(h)[1]
    want_np = want_no = total if h["dp_rank"] == 0 else 0
    want_off = 0
    if h["zero"]:
        per = -(-total // DP)
        want_off = min(per * h["dp_rank"], total)
        want_no = min(per * (h["dp_rank"] + 1), total) - want_off
    n_params, opt_off, n_opt = h["n_params"], h["opt_off"], h["n_opt"]
    if n_params != want_np or n_opt != want_no or (want_no > 0 and opt_off != want_off):
        raise bad(f"payload (n_params={n_params} opt=[{opt_off},+{n_opt})) does not match its rank "
                  f"(want {want_np}, [{want_off},+{want_no}))")
    want = 8 * CKPT_HEADER_INTS + 4 * (n_params + 2 * n_opt)
    if size != want:
        raise CkptError(f"checkpoint file {path} is truncated or corrupt ({size} bytes, header implies {want})")


def read_header(path):
    with open(path, "rb") as f:
        raw = f.read(8 * CKPT_HEADER_INTS)
    if len(raw) != 8 * CKPT_HEADER_INTS:
        raise CkptError(f"checkpoint file {path} is truncated (no complete header)")
    ints = struct.unpack(f"<{CKPT_HEADER_INTS}q", raw)
    h = {name: ints[i] for name, i in CKPT_FIELDS.items()}
    h["_raw"] = raw
    if h["magic"] != CKPT_MAGIC:
        raise CkptError(f"{path} is not a checkpoint file (bad magic)")
    if h["version"] not in CKPT_VERSIONS:
        raise CkptError(f"checkpoint {path} has format version {h['version']}; this script reads {CKPT_VERSIONS}")
    validate_header(h, path, os.path.getsize(path))
    return h


def check_sum(path, h, payload):
    """version 1: FNV-1a 64 of the payload; version 2: of the header (checksum entry 0), then the
    payload, as ckpt_write_rank writes it and reshard.h checks it"""
    want = h["checksum"] & 0xFFFFFFFFFFFFFFFF
    s = 0xcbf29ce484222325
    if h["version"] >= 2:
        raw = bytearray(h["_raw"])
        i = CKPT_FIELDS["checksum"] * 8
        raw[i:i + 8] = b"\0" * 8
        s = fnv1a64(bytes(raw))
    if fnv1a64_fast(payload, s) != want:
        raise CkptError(f"checkpoint file {path} is corrupt (checksum mismatch)")


def resolve_ckpt_dir(path):
    """path itself if it holds rank files, else the complete (DONE) ckpt_<digits> directory
    of the highest step in it (by number: ckpt_100000000 is newer than ckpt_99999999; ckpt_N.old
    and ckpt_N.tmp are not saves), as ckpt_find_latest picks it for -resume"""
    try:
        names = os.listdir(path)
    except OSError as e:
        raise CkptError(f"cannot read checkpoint directory {path}: {e.strerror}")
    if any(RANK_NAME.fullmatch(n) for n in names):
        return path
    cands = [(int(m.group(1)), n) for n in names
             if (m := CKPT_NAME.fullmatch(n)) and os.path.exists(os.path.join(path, n, "DONE"))]
    if not cands:
        raise CkptError(f"no checkpoint in {path} (want a ckpt_* directory, or a run directory holding one with DONE)")
    return os.path.join(path, max(cands)[1])


def global_layer(h, l):
    """the global layer of local layer l of the writing rank (params.h, param_global_layer): with
    -vpp the rank's chunk c holds virtual stage c*PP + pp, not a contiguous run of layers"""
    nchunk = max(h["vpp"], 1)
    nlc = h["L"] // h["pp"] // nchunk
    return ((l // nlc) * h["pp"] + h["pp_rank"]) * nlc + l % nlc


def read_checkpoint(path, verify=True):
    """Returns (header of rank 0, {tensor name: full array (layers, rows, cols)}, the directory
    read): the weights of a checkpoint in any layout, gathered."""
    d = resolve_ckpt_dir(path)
    names = os.listdir(d)
    h0 = read_header(os.path.join(d, "rank_00000.bin"))
    m = CKPT_NAME.fullmatch(os.path.basename(os.path.normpath(d)))
    if m and int(m.group(1)) != h0["step"]:
        raise CkptError(f"checkpoint {d} holds step {h0['step']} but is named for step {int(m.group(1))} "
                        f"(a renamed directory?): rename it to ckpt_{h0['step']:08d}")
    world = h0["tp"] * h0["pp"] * h0["dp"]
    nfiles = sum(1 for n in names if n.startswith("rank_") and n.endswith(".bin"))
    if nfiles != world:
        raise CkptError(f"checkpoint {d} has {nfiles} rank files, its layout (tp={h0['tp']} pp={h0['pp']} "
                        f"dp={h0['dp']}) needs {world}")
    files = [os.path.join(d, f"rank_{i:05d}.bin") for i in range(world)]
    hdrs = [h0] + [read_header(p) for p in files[1:]]
    for i, (p, h) in enumerate(zip(files, hdrs)):
        for k in CKPT_FIELDS:
            if k not in PER_RANK_FIELDS and h[k] != h0[k]:
                raise CkptError(f"checkpoint {d} mixes files of different runs or saves ({files[0]} vs {p}: {k})")
        if h["rank"] != i:
            raise CkptError(f"checkpoint file {p} says it is rank {h['rank']}")
    L, C, T, Vp = h0["L"], h0["H"], h0["seq"], h0["Vp"]
    fr, fc = full_shapes(L, C, T, Vp)
    full, mask = {}, {}
    for t, (name, layered, _, _) in enumerate(PARAMS):
        nl = L if layered else 1
        full[name] = np.zeros((nl, fr[t], fc[t]), dtype=np.float32)
        mask[name] = np.zeros((nl, fr[t], fc[t]), dtype=bool)
    for p, h in zip(files, hdrs):
        with open(p, "rb") as f:
            f.seek(8 * CKPT_HEADER_INTS)
            payload = f.read()
        if verify:
            check_sum(p, h, payload)
        if h["n_params"] == 0:
            continue  # a DP replica: DP rank 0 holds its weights
        lay, total = local_layout(h)
        buf = np.frombuffer(payload, dtype="<f4", count=total)
        tp = h["tp_rank"]
        for t, (name, layered, split, _) in enumerate(PARAMS):
            off, nl, r, c = lay[t]
            if nl == 0:
                continue
            a = buf[off:off + nl * r * c].reshape(nl, r, c)
            ls = [global_layer(h, l) for l in range(nl)] if layered else [0]
            if split == "none":
                idx = [(slice(None), slice(None), slice(None))]
                parts = [a]
            elif split == "rows":
                idx = [(slice(None), slice(tp * r, tp * r + r), slice(None))]
                parts = [a]
            elif split == "cols":
                idx = [(slice(None), slice(None), slice(tp * c, tp * c + c))]
                parts = [a]
            else:  # qkv: rows split inside each of the Q, K, V blocks
                blk, F = r // 3, fr[t] // 3
                idx = [(slice(None), slice(w * F + tp * blk, w * F + tp * blk + blk), slice(None)) for w in range(3)]
                parts = [a[:, w * blk:(w + 1) * blk] for w in range(3)]
            for (_, ri, ci), part in zip(idx, parts):
                full[name][ls, ri, ci] = part
                mask[name][ls, ri, ci] = True
    for name in full:
        if not mask[name].all():
            raise CkptError(f"checkpoint {d} does not cover tensor {name} "
                            f"({int(mask[name].sum())} of {mask[name].size} elements)")
    return h0, full, d


# ---------------------------------------------------------------------------------------
# safetensors, through the safetensors library (format: u64 little-endian header size, JSON header,
# then the raw tensors). It is in the venv dev/install.sh makes, not in Debian's Python: the
# scripts run there (main() re-executes them under it when started by /usr/bin/python3).

HF_PY = os.environ.get("HF_PY", os.path.expanduser("~/.cache/llmc/hf-venv/bin/python"))


def need_safetensors(script):
    """import safetensors, or re-execute SCRIPT with the HF venv's python, or exit with an error"""
    try:
        import safetensors  # noqa: F401
        return
    except ImportError:
        pass
    if os.path.exists(HF_PY) and not os.environ.get("LLMC_HF_REEXEC"):
        os.environ["LLMC_HF_REEXEC"] = "1"
        os.execv(HF_PY, [HF_PY, os.path.abspath(script)] + sys.argv[1:])
    print(f"error: {os.path.basename(script)} needs the safetensors package, which {HF_PY} has: run "
          f"dev/install.sh to make it (or set HF_PY to a python that has safetensors and numpy)", file=sys.stderr)
    sys.exit(1)


def write_safetensors(path, tensors):
    from safetensors.numpy import save_file
    tmp = path + ".tmp"
    save_file({n: np.ascontiguousarray(a, dtype="<f4") for n, a in tensors.items()}, tmp, metadata={"format": "pt"})
    os.replace(tmp, path)


ST_DTYPES = {"F32": "<f4", "F16": "<f2", "BF16": "<u2", "F64": "<f8"}
ST_MAX_HEADER = 100 << 20  # the safetensors format's own limit on the JSON header


def _no_duplicate_keys(pairs):
    d = {}
    for k, v in pairs:
        if k in d:
            raise CkptError(f"duplicate key {k!r}")
        d[k] = v
    return d


def is_count(v):
    """a JSON integer >= 0 (json gives bool for true/false, which Python counts as int)"""
    return isinstance(v, int) and not isinstance(v, bool) and v >= 0


def safetensors_header(path):
    """{name: entry} of the tensors. Every field of the header is checked (types, dtype, shape
    against byte size, data_offsets inside the file and not overlapping) before any data is
    read, so a malformed file is a CkptError naming what is wrong, not a traceback. Reads only the
    header."""
    size_all = os.path.getsize(path)
    with open(path, "rb") as f:
        head = f.read(8)
        if len(head) < 8:
            raise CkptError(f"{path} is not a safetensors file ({len(head)} bytes, shorter than its 8-byte header "
                            f"length)")
        (n,) = struct.unpack("<Q", head)
        if n > min(ST_MAX_HEADER, size_all - 8):
            raise CkptError(f"{path}: header length {n} runs past the end of the file ({size_all} bytes) or the limit")
        raw = f.read(n)
    try:
        header = json.loads(raw.decode("utf-8"), object_pairs_hook=_no_duplicate_keys)
    except (ValueError, RecursionError, CkptError) as e:
        raise CkptError(f"{path}: the safetensors header is not valid JSON ({str(e) or type(e).__name__})")
    if not isinstance(header, dict):
        raise CkptError(f"{path}: the safetensors header is a JSON {type(header).__name__}, not an object")
    size = size_all - 8 - n
    out, spans = {}, []
    for name, info in header.items():
        if name == "__metadata__":
            continue
        what = f"{path}: tensor {name!r}"
        if not isinstance(info, dict):
            raise CkptError(f"{what}: its entry is not an object")
        dt, shape, offs = info.get("dtype"), info.get("shape"), info.get("data_offsets")
        if not isinstance(dt, str) or dt not in ST_DTYPES:
            raise CkptError(f"{what} has unsupported dtype {dt!r} (F32, F16, BF16 or F64)")
        if not isinstance(shape, list) or len(shape) > 8 or not all(is_count(x) for x in shape):
            raise CkptError(f"{what} has a bad shape {shape!r}")
        if not (isinstance(offs, list) and len(offs) == 2 and all(is_count(x) for x in offs)
                and offs[0] <= offs[1] <= size):
            raise CkptError(f"{what} has bad data_offsets {offs!r} (the data is {size} bytes)")
        itemsize = np.dtype(ST_DTYPES[dt]).itemsize
        if int(np.prod(shape, dtype=object)) * itemsize != offs[1] - offs[0]:
            raise CkptError(f"{what}: shape {shape} of {dt} does not fill data_offsets {offs}")
        spans.append((offs[0], offs[1], name))
        out[name] = info
    spans.sort()
    for (a0, a1, an), (b0, b1, bn) in zip(spans, spans[1:]):
        if b0 < a1:
            raise CkptError(f"{path}: tensors {an!r} and {bn!r} overlap (data_offsets {[a0, a1]} and {[b0, b1]})")
    return out


class SafetensorsReader:
    """the tensors of a checked model.safetensors, one at a time as fp32 arrays, read by the
    safetensors library (safe_open maps the file; get_tensor copies one tensor out)"""

    def __init__(self, path):
        self.path = path
        self.header = safetensors_header(path)
        self._np = self._pt = None

    def _open(self, framework):
        from safetensors import safe_open
        try:
            return safe_open(self.path, framework=framework)
        except Exception as e:  # SafetensorError, or OSError: its message, on one line
            raise CkptError(f"{self.path}: the safetensors library refuses it ({' '.join(str(e).split())})")

    def __contains__(self, name):
        return name in self.header

    def __iter__(self):
        return iter(self.header)

    def shape(self, name):
        return list(self.header[name]["shape"])

    def get(self, name):
        """(shape) fp32: BF16 through torch (numpy has no bfloat16), the other dtypes through numpy"""
        try:
            if self.header[name]["dtype"] == "BF16":
                self._pt = self._pt or self._open("pt")
                import torch
                return self._pt.get_tensor(name).to(torch.float32).numpy()
            self._np = self._np or self._open("np")
            a = self._np.get_tensor(name)
        except CkptError:
            raise
        except Exception as e:
            raise CkptError(f"{self.path}: tensor {name!r} cannot be read ({' '.join(str(e).split())})")
        with np.errstate(all="ignore"):  # an F64 beyond fp32's range becomes inf, which the importer refuses
            return a.astype(np.float32, copy=False)


# ---------------------------------------------------------------------------------------

def hf_config(L, C, NH, T, V, eot):
    return {
        "architectures": ["GPT2LMHeadModel"], "model_type": "gpt2",
        "vocab_size": V, "n_positions": T, "n_ctx": T, "n_embd": C, "n_layer": L, "n_head": NH,
        "n_inner": 4 * C, "activation_function": "gelu_new", "layer_norm_epsilon": 1e-5,
        "resid_pdrop": 0.0, "embd_pdrop": 0.0, "attn_pdrop": 0.0, "summary_first_dropout": 0.0,
        "initializer_range": 0.02, "scale_attn_weights": True, "scale_attn_by_inverse_layer_idx": False,
        "reorder_and_upcast_attn": False, "tie_word_embeddings": True, "use_cache": True,
        "bos_token_id": eot, "eos_token_id": eot, "torch_dtype": "float32",
    }


def write_tokenizer(out, tok_json, V, T):
    with open(tok_json, "rb") as f:
        raw = f.read()
    tj = json.loads(raw)
    vocab = tj["model"]["vocab"]
    ids = set(vocab.values()) | {t["id"] for t in tj.get("added_tokens", [])}
    if len(ids) != V:
        raise CkptError(f"tokenizer {tok_json} has {len(ids)} tokens, the checkpoint's vocabulary is {V}: "
                        f"pass --tokenizer")
    eot = next((t["id"] for t in tj.get("added_tokens", []) if t["content"] == EOT_TEXT), vocab.get(EOT_TEXT))
    if eot is None:
        raise CkptError(f"tokenizer {tok_json} has no {EOT_TEXT} token")
    with open(os.path.join(out, "tokenizer.json"), "wb") as f:
        f.write(raw)
    special = {"bos_token": EOT_TEXT, "eos_token": EOT_TEXT, "unk_token": EOT_TEXT}
    cfg = dict(special, tokenizer_class="GPT2TokenizerFast", model_max_length=T, add_prefix_space=False,
               clean_up_tokenization_spaces=False)
    with open(os.path.join(out, "tokenizer_config.json"), "w") as f:
        json.dump(cfg, f, indent=2, sort_keys=True)
        f.write("\n")
    with open(os.path.join(out, "special_tokens_map.json"), "w") as f:
        json.dump(special, f, indent=2, sort_keys=True)
        f.write("\n")
    return eot


def run_record(ckpt):
    """The trainer's run record (DIR/config.json, written with -o) of a run directory or of the run
    directory a checkpoint lies in: (path, record), or (None, None)"""
    p = os.path.abspath(ckpt)
    for d in (p, os.path.dirname(p)):
        f = os.path.join(d, "config.json")
        if not os.path.isfile(f):
            continue
        try:
            r = json.load(open(f))
        except ValueError:
            raise CkptError(f"run record {f} is damaged (not JSON)")
        if isinstance(r, dict) and isinstance(r.get("flags"), dict):
            return f, r
    return None, None


def choose_tokenizer(ckpt, given, force):
    """The tokenizer.json to export with, and a note for the user. The run's own tokenizer (its
    -tokenizer FILE.bin, with FILE.json beside it, as dev/data/prepare.py writes them) is the
    default; another one is refused unless forced; a run without one exports weights only."""
    rec_path, rec = run_record(ckpt)
    recorded = rec["flags"].get("-tokenizer") if rec else None
    run_tok = os.path.splitext(recorded)[0] + ".json" if isinstance(recorded, str) and recorded else None
    if given:
        if run_tok and not force:
            if not os.path.isfile(run_tok):
                raise CkptError(f"the run's tokenizer {run_tok} (beside {recorded}, recorded in {rec_path}) is not "
                                f"found from here: run from the run's directory, or pass --force-tokenizer")
            if open(run_tok, "rb").read() != open(given, "rb").read():
                raise CkptError(f"--tokenizer {given} is not the run's tokenizer {run_tok} (recorded in {rec_path}): "
                                f"the model would read other ids; pass --force-tokenizer to export with it anyway")
        return given, f"tokenizer {given}"
    if run_tok:
        if not os.path.isfile(run_tok):
            raise CkptError(f"the run's tokenizer {recorded} (recorded in {rec_path}) has no {run_tok} beside it: "
                            f"pass --tokenizer FILE.json")
        return run_tok, f"the run's tokenizer {run_tok}"
    why = "the run recorded none (pre-tokenized data)" if rec else "no run record (config.json) beside the checkpoint"
    return None, f"weights only, no tokenizer: {why}; pass --tokenizer FILE.json to add one"


def export(ckpt, out, tok_json, verify=True):
    h, w, d = read_checkpoint(ckpt, verify)
    L, C, NH, T, V = h["L"], h["H"], h["heads"], h["seq"], h["V"]
    os.makedirs(out, exist_ok=True)
    eot = write_tokenizer(out, tok_json, V, T) if tok_json else None
    t = {"transformer.wte.weight": w["wte"][0, :V], "transformer.wpe.weight": w["wpe"][0],
         "transformer.ln_f.weight": w["lnfw"][0, :, 0], "transformer.ln_f.bias": w["lnfb"][0, :, 0]}
    for l in range(L):
        for hf, ours, tr in HF_LAYER:
            a = w[ours][l]
            t[f"transformer.h.{l}.{hf}"] = a.T.copy() if tr else a[:, 0].copy()
    write_safetensors(os.path.join(out, "model.safetensors"), t)
    with open(os.path.join(out, "config.json"), "w") as f:
        json.dump(hf_config(L, C, NH, T, V, eot), f, indent=2, sort_keys=True)
        f.write("\n")
    return h, d


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("ckpt", help="a ckpt_SSSSSSSS directory or a run's -o directory")
    ap.add_argument("out", help="the Hugging Face model directory to write")
    ap.add_argument("--tokenizer", help="tokenizer.json to attach (default: the run's own, from DIR/config.json)")
    ap.add_argument("--force-tokenizer", action="store_true", help="attach --tokenizer even if the run used another")
    ap.add_argument("--no-verify", action="store_true", help="skip the payload checksums (large checkpoints)")
    a = ap.parse_args()
    need_safetensors(__file__)
    try:
        tok, note = choose_tokenizer(a.ckpt, a.tokenizer, a.force_tokenizer)
        h, d = export(a.ckpt, a.out, tok, not a.no_verify)
    except (CkptError, OSError, ValueError, KeyError) as e:
        print(f"error: {e}", file=sys.stderr)
        sys.exit(1)
    print(f"export_hf.py: {d} (step {h['step']}, written as tp={h['tp']} pp={h['pp']} dp={h['dp']} "
          f"zero={h['zero']}) -> {a.out}: GPT-2 L={h['L']} H={h['H']} heads={h['heads']} seq={h['seq']} V={h['V']} "
          f"(padded rows {h['Vp'] - h['V']} dropped); {note}")


if __name__ == "__main__":
    main()
