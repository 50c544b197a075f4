"""
import_hf.py: a local Hugging Face GPT-2-architecture model directory (config.json +
model.safetensors, as transformers writes it or dev/export_hf.py does) becomes a
checkpoint directory this trainer loads with -init-from, in any layout (loading reshards):

    ~/.cache/llmc/hf-venv/bin/python dev/import_hf.py HF_DIR CKPT_DIR [--vpad 1024]
    ./train_gpt -L 12 -H 768 -heads 12 -seq 1024 -V 50257 -init-from CKPT_DIR ...

The checkpoint is one rank file (written as layout 1x1x1, step 0, format version 2, weights and
zero AdamW moments; AdamW starts fresh as -init-from does anyway) plus DONE. The vocabulary is
padded with zero rows to a multiple of --vpad, which must be the -vpad of the run that loads it.
Only the GPT-2 architecture this trainer implements is accepted (tanh GeLU, LayerNorm eps 1e-5,
4H MLP, tied head, no layer-index attention scaling, finite fp32/fp16/bf16/fp64 weights, in
model.safetensors or sharded as transformers writes it above its max_shard_size:
model.safetensors.index.json and the shard files its weight_map names); anything else is a
one-line error. Dropout in the config is warned about: the trainer has none.
"""

import argparse
import json
import os
import re
import struct
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from export_hf import (CKPT_FIELDS, CKPT_HEADER_INTS, CKPT_MAGIC, CKPT_MAX_DIM, HF_LAYER, PARAMS,  # noqa: E402
                       CkptError, SafetensorsReader, fnv1a64, fnv1a64_fast, fnv1a64_zeros, full_shapes, is_count,
                       need_safetensors)

CKPT_WRITE_VERSION = 2  # the version this build's trainer reads (llmc/host/checkpoint.h)


def cfg_int(cfg, key, hi):
    v = cfg.get(key)
    if not is_count(v) or not 1 <= v <= hi:
        raise CkptError(f"config.json: {key} must be an integer from 1 to {hi} (got {v!r})")
    return v


def cfg_typed(cfg, key, default, types, what):
    v = cfg.get(key, default)
    types = types if isinstance(types, tuple) else (types,)
    if not isinstance(v, types) or (isinstance(v, bool) and bool not in types):
        raise CkptError(f"config.json: {key} must be {what} (got {v!r})")
    return v


NUMBER = (int, float)
DROPOUTS = ("resid_pdrop", "embd_pdrop", "attn_pdrop")
LAYER_KEY = re.compile(r"(?:transformer\.)?h\.([0-9]+)\.")


def read_json(path):
    """a JSON file's value; an unreadable or invalid file is one CkptError line"""
    try:
        with open(path, "rb") as f:
            return json.loads(f.read().decode("utf-8"))
    except OSError as e:
        raise CkptError(f"cannot read {path}: {e.strerror}")
    except (ValueError, RecursionError) as e:
        raise CkptError(f"{path} is not valid JSON ({str(e) or type(e).__name__})")


class ShardedReader:
    """A sharded checkpoint read like one file: the index's weight_map names each tensor's shard,
    a file name inside the model directory; every shard is checked as one model.safetensors is,
    and must hold exactly the tensors the map gives it (a tensor in two shards, or one the map
    does not name, means the files and the index disagree)."""

    def __init__(self, d, index):
        idx = read_json(index)
        wmap = idx.get("weight_map") if isinstance(idx, dict) else None
        if not isinstance(wmap, dict) or not wmap:
            raise CkptError(f"{index} has no weight_map object naming each tensor's shard file")
        for name, f in wmap.items():
            if not isinstance(f, str) or not f or os.path.basename(f) != f or f in (".", ".."):
                raise CkptError(f"{index}: weight_map[{name!r}] = {f!r} is not a file name in {d}")
        self.shards, self.where = {}, {}
        for f in sorted(set(wmap.values())):
            p = os.path.join(d, f)
            if not os.path.isfile(p):
                raise CkptError(f"{index} names shard {f}, which {d} lacks (an interrupted download?)")
            self.shards[f] = SafetensorsReader(p)
            for name in self.shards[f]:
                if wmap.get(name) != f:
                    raise CkptError(f"{p} holds tensor {name!r}, which the index places "
                                    f"{'in ' + str(wmap[name]) if name in wmap else 'nowhere'}")
                self.where[name] = f
        missing = sorted(set(wmap) - set(self.where))
        if missing:
            raise CkptError(f"{index} places {missing[0]!r} in {wmap[missing[0]]}, which does not hold it")

    def __contains__(self, name):
        return name in self.where

    def __iter__(self):
        return iter(self.where)

    def shape(self, name):
        return self.shards[self.where[name]].shape(name)

    def get(self, name):
        return self.shards[self.where[name]].get(name)


def load_hf(d):
    cpath = os.path.join(d, "config.json")
    cfg = read_json(cpath)
    if not isinstance(cfg, dict):
        raise CkptError(f"{cpath} is a JSON {type(cfg).__name__}, not an object")
    if cfg.get("model_type") != "gpt2":
        raise CkptError(f"{d} is model_type {cfg.get('model_type')!r}; only GPT-2's architecture can be imported")
    # the trainer's own limits (llmc/host/checkpoint.h, ckpt_header_validate)
    L = cfg_int(cfg, "n_layer", 4096)
    C = cfg_int(cfg, "n_embd", CKPT_MAX_DIM)
    NH = cfg_int(cfg, "n_head", C)
    T = cfg_int(cfg, "n_positions", CKPT_MAX_DIM)
    V = cfg_int(cfg, "vocab_size", 65536)  # uint16 token shards
    act = cfg_typed(cfg, "activation_function", "gelu_new", str, "a string")
    eps = cfg_typed(cfg, "layer_norm_epsilon", 1e-5, NUMBER, "a number")
    inner = cfg_typed(cfg, "n_inner", None, (int, type(None)), "an integer or null")
    flags = {k: cfg_typed(cfg, k, dflt, bool, "true or false") for k, dflt in (
        ("tie_word_embeddings", True), ("scale_attn_by_inverse_layer_idx", False), ("scale_attn_weights", True))}
    drops = {k: cfg_typed(cfg, k, 0.0, (int, float, type(None)), "a number or null") for k in DROPOUTS}
    checks = [(act in ("gelu_new", "gelu_pytorch_tanh"), "activation_function must be the tanh GeLU (gelu_new)"),
              (isinstance(eps, float) and abs(eps - 1e-5) < 1e-12, "layer_norm_epsilon must be 1e-5"),
              (inner in (None, 4 * C), "n_inner must be 4*n_embd"),
              (flags["tie_word_embeddings"], "the LM head must be tied to the embedding"),
              (not flags["scale_attn_by_inverse_layer_idx"], "scale_attn_by_inverse_layer_idx is not supported"),
              (flags["scale_attn_weights"], "scale_attn_weights must be true"),
              (C % NH == 0, "n_head must divide n_embd")]
    for ok, msg in checks:
        if not ok:
            raise CkptError(f"{d}: {msg}")
    drop = [f"{k}={v}" for k, v in drops.items() if v]
    if drop:  # a fine-tune of the import would differ from one in transformers with its dropout
        print(f"import_hf.py: warning: config.json has {', '.join(drop)}; this trainer has no dropout, so it "
              f"trains the imported model without it", file=sys.stderr)
    path = os.path.join(d, "model.safetensors")
    if os.path.exists(path):  # transformers, too, takes the single file first
        t = SafetensorsReader(path)
    elif os.path.exists(os.path.join(d, "model.safetensors.index.json")):
        path = os.path.join(d, "model.safetensors.index.json")
        t = ShardedReader(d, path)
    else:
        raise CkptError(f"{d} has no model.safetensors (save with safe_serialization=True)")
    # a tensor of a layer the config does not have: the config and the weights disagree
    deep = max((int(m.group(1)) for k in t if (m := LAYER_KEY.match(k))), default=-1)
    if deep >= L:
        raise CkptError(f"{path} holds weights of layer {deep}, but config.json says n_layer={L}")
    pre = "transformer." if "transformer.wte.weight" in t else ""

    def get(name, shape):
        """one tensor, checked, as fp32"""
        if pre + name not in t:
            raise CkptError(f"{path} lacks tensor {pre + name}")
        if t.shape(pre + name) != list(shape):
            raise CkptError(f"{path}: {pre + name} has shape {t.shape(pre + name)}, config implies {list(shape)}")
        a = t.get(pre + name)
        bad = a.size - int(np.count_nonzero(np.isfinite(a)))
        if bad:  # the trainer would train on with loss nan
            raise CkptError(f"{path}: {pre + name} has {bad} NaN or infinite values (as fp32)")
        return a
    if "lm_head.weight" in t:
        if t.shape("lm_head.weight") != [V, C] or not np.array_equal(t.get("lm_head.weight"), get("wte.weight", (V, C))):
            raise CkptError(f"{path}: lm_head.weight differs from wte.weight (untied head)")
    return cfg, (L, C, NH, T, V), get


def import_hf(d, out, vpad):
    """Writes OUT/rank_00000.bin one tensor (one layer) at a time, hashing as it goes: the memory
    is that of the largest tensor, not of the checkpoint, and the bytes are those of llmc's own
    single-rank save (header, fp32 weights, zero AdamW m and v)."""
    cfg, (L, C, NH, T, V), get = load_hf(d)
    Vp = (V + vpad - 1) // vpad * vpad
    if Vp > CKPT_MAX_DIM:
        raise CkptError(f"--vpad {vpad} pads the vocabulary to {Vp} rows, more than the trainer's {CKPT_MAX_DIM}")
    fr, fc = full_shapes(L, C, T, Vp)
    idx = {name: t for t, (name, _, _, _) in enumerate(PARAMS)}
    hf_of = {ours: (hf, tr) for hf, ours, tr in HF_LAYER}

    def pieces(name):
        """the tensor's bytes in buffer order (params.h): (L, rows, cols) layer by layer, our (out, in)"""
        if name == "wte":
            emb = get("wte.weight", (V, C))  # before the padded copy is allocated: its size is checked in the file
            wte = np.zeros((Vp, C), dtype="<f4")  # (Vp, C) zero rows past V
            wte[:V] = emb
            del emb
            yield wte
        elif name == "wpe":
            yield get("wpe.weight", (T, C))  # (T, C)
        elif name in ("lnfw", "lnfb"):
            yield get("ln_f.weight" if name == "lnfw" else "ln_f.bias", (C,))  # (C,)
        else:
            hf, tr = hf_of[name]
            t = idx[name]
            for l in range(L):
                a = get(f"h.{l}.{hf}", (fc[t], fr[t]) if tr else (fr[t],))  # Conv1D (in, out), or (rows,)
                yield a.T if tr else a

    n_params = sum((L if layered else 1) * fr[t] * fc[t] for t, (_, layered, _, _) in enumerate(PARAMS))
    h = [0] * CKPT_HEADER_INTS
    vals = {"magic": CKPT_MAGIC, "version": CKPT_WRITE_VERSION, "L": L, "H": C, "heads": NH, "seq": T, "V": V,
            "Vp": Vp, "tp": 1, "pp": 1, "dp": 1, "zero": 0, "n_params": n_params, "opt_off": 0, "n_opt": n_params,
            "scaled_init": 1}
    for k, v in vals.items():
        h[CKPT_FIELDS[k]] = v
    # version 2: FNV-1a 64 over the header (checksum entry 0), then the payload
    s = fnv1a64(struct.pack(f"<{CKPT_HEADER_INTS}q", *h))
    made = not os.path.isdir(out)
    os.makedirs(out, exist_ok=True)
    path = os.path.join(out, "rank_00000.bin")
    try:
        write_rank(path + ".tmp", h, n_params, s, pieces)
    except BaseException:  # a tensor refused halfway: leave nothing behind, as before any write
        if os.path.exists(path + ".tmp"):
            os.remove(path + ".tmp")
        if made and not os.listdir(out):
            os.rmdir(out)
        raise
    os.replace(path + ".tmp", path)
    open(os.path.join(out, "DONE"), "wb").close()
    return L, C, NH, T, V, Vp


def write_rank(tmp, h, n_params, s, pieces):
    """the rank file: header, weights (hashed as they are written), zero m and v, then the header
    again with its checksum"""
    with open(tmp, "wb") as f:
        f.write(bytes(8 * CKPT_HEADER_INTS))  # the header, once its checksum is known
        wrote = 0
        for name, _, _, _ in PARAMS:
            for a in pieces(name):
                raw = np.ascontiguousarray(a, dtype="<f4").tobytes()  # row-major: the transpose happens here
                s = fnv1a64_fast(raw, s)
                f.write(raw)
                wrote += len(raw)
        if wrote != 4 * n_params:
            raise CkptError(f"internal: wrote {wrote} weight bytes, the layout has {4 * n_params}")
        # AdamW m and v: zero (a fresh optimizer); extending the file writes zeros
        s = fnv1a64_zeros(8 * n_params, s)
        f.truncate(8 * CKPT_HEADER_INTS + 12 * n_params)
        h[CKPT_FIELDS["checksum"]] = s - (1 << 64) if s >= (1 << 63) else s
        f.seek(0)
        f.write(struct.pack(f"<{CKPT_HEADER_INTS}q", *h))
        f.flush()
        os.fsync(f.fileno())


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("hf_dir")
    ap.add_argument("out", help="checkpoint directory to write (pass it to -init-from)")
    ap.add_argument("--vpad", type=int, default=1024, help="pad the vocabulary to a multiple of this (the run's -vpad)")
    a = ap.parse_args(argv)
    need_safetensors(__file__)
    if a.vpad <= 0:
        print("error: --vpad must be positive", file=sys.stderr)
        sys.exit(1)
    try:
        L, C, NH, T, V, Vp = import_hf(a.hf_dir, a.out, a.vpad)
    except (CkptError, OSError, ValueError) as e:
        print(f"error: {e}", file=sys.stderr)
        sys.exit(1)
    except MemoryError:
        print(f"error: {a.hf_dir}: out of memory reading the model", file=sys.stderr)
        sys.exit(1)
    print(f"import_hf.py: {a.hf_dir} -> {a.out}: load with ./train_gpt -L {L} -H {C} -heads {NH} -seq {T} -V {V} "
          f"-vpad {a.vpad} -init-from {a.out}  (Vp={Vp})")


if __name__ == "__main__":
    main()
