"""
export_hf.py: a checkpoint of this trainer, written in ANY layout (TP x PP x DP, ZeRO or
not), becomes a Hugging Face `transformers` GPT-2 model directory that loads with
AutoModelForCausalLM.from_pretrained(OUT) and AutoTokenizer.from_pretrained(OUT), no
custom code:

    /usr/bin/python3 dev/export_hf.py CKPT_DIR OUT_DIR [--tokenizer dev/data/kjv/kjv_tokenizer.json]

CKPT_DIR is one checkpoint (DIR/ckpt_SSSSSSSS) or a run's -o directory (its newest
complete checkpoint is taken). Needs only numpy: the rank files are read here, following
the format of llmc/host/checkpoint.h (header of 128 int64, then fp32 weights, m, v), and the
TP/PP slices are put back together the way llmc/host/params.h lays them out. The safetensors
file is written here too (8-byte header length, JSON header, raw little-endian data), so
the output is a pure function of the weights: import -> export is bit-identical.

Written: config.json (GPT2LMHeadModel: pre-LN, learned positions, gelu_new = tanh GeLU,
tied LM head, LayerNorm eps 1e-5, no dropout), model.safetensors (fp32, the padded
vocabulary rows dropped), tokenizer.json + tokenizer_config.json + special_tokens_map.json.
"""

import argparse
import glob
import json
import os
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
DEFAULT_TOKENIZER = os.path.join(REPO, "dev", "data", "kjv", "kjv_tokenizer.json")
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


def fnv1a64_fast(data, h=0xcbf29ce484222325):
    """FNV-1a 64 (llmc/host/utils.h); a plain loop, ~10 MB/s (--no-verify skips it)"""
    for b in data:
        h = ((h ^ b) * 0x100000001b3) & 0xFFFFFFFFFFFFFFFF
    return h


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
    want = 8 * CKPT_HEADER_INTS + 4 * (h["n_params"] + 2 * h["n_opt"])
    size = os.path.getsize(path)
    if size != want:
        raise CkptError(f"checkpoint file {path} is truncated or corrupt ({size} bytes, header implies {want})")
    return h


def check_sum(path, h, payload):
    want = h["checksum"] & 0xFFFFFFFFFFFFFFFF
    if fnv1a64_fast(payload) == want:
        return
    if h["version"] >= 2:  # version 2 may hash the header (checksum field zeroed) before the payload
        raw = bytearray(h["_raw"])
        i = CKPT_FIELDS["checksum"] * 8
        raw[i:i + 8] = b"\0" * 8
        if fnv1a64_fast(payload, fnv1a64_fast(bytes(raw))) == want:
            return
    raise CkptError(f"checkpoint file {path} is corrupt (checksum mismatch)")


def resolve_ckpt_dir(path):
    if glob.glob(os.path.join(path, "rank_*.bin")):
        return path
    cands = sorted(d for d in glob.glob(os.path.join(path, "ckpt_*")) if os.path.exists(os.path.join(d, "DONE")))
    if not cands:
        raise CkptError(f"no checkpoint in {path} (want a ckpt_* directory, or a run directory holding one with DONE)")
    return cands[-1]


def read_checkpoint(path, verify=True):
    """Returns (header of rank 0, {tensor name: full array (layers, rows, cols)}): the
    weights of a checkpoint in any layout, gathered."""
    d = resolve_ckpt_dir(path)
    files = sorted(glob.glob(os.path.join(d, "rank_*.bin")))
    hdrs = [read_header(p) for p in files]
    h0 = hdrs[0]
    for p, h in zip(files, hdrs):
        for k in ("L", "H", "heads", "seq", "V", "Vp", "tp", "pp", "dp", "zero", "step", "tokens"):
            if h[k] != h0[k]:
                raise CkptError(f"checkpoint {d} mixes files of different runs or steps ({files[0]} vs {p}: {k})")
    world = h0["tp"] * h0["pp"] * h0["dp"]
    if len(files) != world:
        raise CkptError(f"checkpoint {d} has {len(files)} rank files, its layout (tp={h0['tp']} pp={h0['pp']} dp={h0['dp']}) needs {world}")
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
        if total != h["n_params"]:
            raise CkptError(f"checkpoint file {p}: {h['n_params']} weights, its layout implies {total}")
        buf = np.frombuffer(payload, dtype="<f4", count=total)
        tp, TP = h["tp_rank"], h["tp"]
        layer0 = h["pp_rank"] * (L // h["pp"])
        for t, (name, layered, split, _) in enumerate(PARAMS):
            off, nl, r, c = lay[t]
            if nl == 0:
                continue
            a = buf[off:off + nl * r * c].reshape(nl, r, c)
            ls = slice(layer0, layer0 + nl) if layered else slice(0, 1)
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
            raise CkptError(f"checkpoint {d} does not cover tensor {name} ({int(mask[name].sum())} of {mask[name].size} elements)")
    return h0, full


# ---------------------------------------------------------------------------------------
# safetensors (format: u64 little-endian header size, JSON header, then the raw tensors)

def write_safetensors(path, tensors):
    names = sorted(tensors)
    header, off = {}, 0
    for n in names:
        a = tensors[n]
        header[n] = {"dtype": "F32", "shape": list(a.shape), "data_offsets": [off, off + a.nbytes]}
        off += a.nbytes
    header["__metadata__"] = {"format": "pt"}
    hj = json.dumps(header, separators=(",", ":"), sort_keys=True).encode()
    hj += b" " * ((8 - len(hj) % 8) % 8)
    tmp = path + ".tmp"
    with open(tmp, "wb") as f:
        f.write(struct.pack("<Q", len(hj)))
        f.write(hj)
        for n in names:
            f.write(np.ascontiguousarray(tensors[n], dtype="<f4").tobytes())
    os.replace(tmp, path)


def read_safetensors(path):
    with open(path, "rb") as f:
        data = f.read()
    (n,) = struct.unpack("<Q", data[:8])
    header = json.loads(data[8:8 + n])
    base = 8 + n
    out = {}
    for name, info in header.items():
        if name == "__metadata__":
            continue
        dt = {"F32": "<f4", "F16": "<f2", "BF16": None, "F64": "<f8"}.get(info["dtype"], "?")
        a, b = info["data_offsets"]
        raw = data[base + a:base + b]
        if dt is None:  # bf16 -> fp32 exactly
            u = np.frombuffer(raw, dtype="<u2").astype(np.uint32) << 16
            arr = u.view(np.float32)
        elif dt == "?":
            raise CkptError(f"{path}: tensor {name} has unsupported dtype {info['dtype']}")
        else:
            arr = np.frombuffer(raw, dtype=dt).astype(np.float32)
        out[name] = arr.reshape(info["shape"])
    return out


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
        raise CkptError(f"tokenizer {tok_json} has {len(ids)} tokens, the checkpoint's vocabulary is {V}: pass --tokenizer")
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


def export(ckpt, out, tok_json, verify=True):
    h, w = read_checkpoint(ckpt, verify)
    L, C, NH, T, V = h["L"], h["H"], h["heads"], h["seq"], h["V"]
    os.makedirs(out, exist_ok=True)
    eot = write_tokenizer(out, tok_json, V, T)
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
    return h


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("ckpt", help="a ckpt_SSSSSSSS directory or a run's -o directory")
    ap.add_argument("out", help="the Hugging Face model directory to write")
    ap.add_argument("--tokenizer", default=DEFAULT_TOKENIZER, help="tokenizer.json of the run's vocabulary")
    ap.add_argument("--no-verify", action="store_true", help="skip the payload checksums (large checkpoints)")
    a = ap.parse_args()
    try:
        h = export(a.ckpt, a.out, a.tokenizer, not a.no_verify)
    except (CkptError, OSError, ValueError, KeyError) as e:
        print(f"error: {e}", file=sys.stderr)
        sys.exit(1)
    print(f"export_hf.py: {resolve_ckpt_dir(a.ckpt)} (step {h['step']}, written as tp={h['tp']} pp={h['pp']} dp={h['dp']} "
          f"zero={h['zero']}) -> {a.out}: GPT-2 L={h['L']} H={h['H']} heads={h['heads']} seq={h['seq']} V={h['V']} "
          f"(padded rows {h['Vp'] - h['V']} dropped)")


if __name__ == "__main__":
    main()
