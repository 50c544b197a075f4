#!/usr/bin/python3
"""
Reads back what dev/train_gpt.py wrote and checks the file formats (no torch needed):
  /usr/bin/python3 tests/test_fixture_format.py fixtures
- fixture.bin: magic/version/record count, every record's header and size, the expected
  record names and shapes, padded wte rows zero in grad/ and final/;
- init/ckpt_00000000/rank_00000.bin: header fields, n_params = sum of tensor sizes,
  FNV-1a 64 checksum of the header (checksum entry 0) and payload, m and v zero, DONE present, no .tmp left;
- data_train_000.bin: header and token range;
- logits/loss consistency: loss recomputed from the stored logits and targets.
Exits non-zero on any failure.
"""
import os
import struct
import sys

import numpy as np

NAMES = ["wte", "wpe", "ln1w", "ln1b", "qkvw", "qkvb", "attprojw", "attprojb",
         "ln2w", "ln2b", "fcw", "fcb", "fcprojw", "fcprojb", "lnfw", "lnfb"]


def shapes(L, C, T, Vp):
    return {"wte": (Vp, C), "wpe": (T, C), "ln1w": (L, C), "ln1b": (L, C),
            "qkvw": (L, 3 * C, C), "qkvb": (L, 3 * C), "attprojw": (L, C, C),
            "attprojb": (L, C), "ln2w": (L, C), "ln2b": (L, C), "fcw": (L, 4 * C, C),
            "fcb": (L, 4 * C), "fcprojw": (L, C, 4 * C), "fcprojb": (L, C),
            "lnfw": (C,), "lnfb": (C,)}


fails = 0


def check(cond, what):
    global fails
    if not cond:
        fails += 1
        print("FAIL:", what)


def read_fixture(path):
    buf = open(path, "rb").read()
    magic, ver, n = struct.unpack_from("<3i", buf, 0)
    check(magic == 20261204 and ver == 1, "fixture magic/version")
    off, recs = 12, {}
    for _ in range(n):
        name = buf[off:off + 48].split(b"\0")[0].decode()
        dtype, ndim, *dims = struct.unpack_from("<6i", buf, off + 48)
        off += 48 + 24
        check(dtype in (0, 1) and 1 <= ndim <= 4 and all(d == 1 for d in dims[ndim:]),
              f"record {name} header")
        cnt = int(np.prod(dims))
        arr = np.frombuffer(buf, dtype="<f4" if dtype == 0 else "<i4", count=cnt, offset=off)
        off += 4 * cnt
        recs[name] = arr.reshape(dims[:ndim])
    check(off == len(buf), "fixture has no trailing bytes")
    return recs


def fnv1a64(data):
    h = 14695981039346656037
    for b in data:
        h = ((h ^ b) * 1099511628211) & 0xFFFFFFFFFFFFFFFF
    return h


def main():
    out = sys.argv[1] if len(sys.argv) > 1 else "fixtures"
    R = read_fixture(os.path.join(out, "fixture.bin"))
    L, C, NH, T, V, Vp, mb, nsteps, seed = (int(v) for v in R["config"])
    S = shapes(L, C, T, Vp)
    check(R["recipe"].shape == (13,), "recipe has 13 values")
    check(R["inputs"].shape == (mb, T) and R["targets"].shape == (mb, T), "inputs/targets shape")
    check(R["logits"].shape == (mb, T, V), "logits shape")
    for n in NAMES:
        for pre in ("grad/", "final/"):
            check(pre + n in R and R[pre + n].shape == S[n], f"{pre}{n} shape")
    check(not R["grad/wte"][V:].any(), "grad/wte padded rows are 0")
    check(not R["final/wte"][V:].any(), "final/wte padded rows are 0")
    for k in ("loss", "lr", "gb", "gnorm", "tokens"):
        check(R["steps/" + k].shape == (nsteps,), f"steps/{k} shape")
    # loss from stored logits (float32 logits, so ~1e-6 agreement)
    lg = R["logits"].astype(np.float64)
    m = lg.max(-1, keepdims=True)
    lse = np.log(np.exp(lg - m).sum(-1)) + m[..., 0]
    tl = np.take_along_axis(lg, R["targets"][..., None].astype(np.int64), -1)[..., 0]
    check(abs((lse - tl).mean() - R["loss"][0]) < 1e-5, "loss matches logits")
    # data shard
    d = open(os.path.join(out, "data_train_000.bin"), "rb").read()
    hdr = np.frombuffer(d, "<i4", 256)
    toks = np.frombuffer(d, "<u2", offset=1024)
    check(hdr[0] == 20240520 and hdr[1] == 1 and hdr[2] == toks.size, "shard header")
    check(toks.max() < V, "tokens < V")
    check((R["inputs"][0] == toks[:T]).all() and (R["targets"][0] == toks[1:T + 1]).all(),
          "sample 0 addressing")
    check((R["inputs"][mb - 1] == toks[(mb - 1) * T:mb * T]).all(), "sample mb-1 addressing")
    # checkpoint
    ck = os.path.join(out, "init", "ckpt_00000000")
    check(os.path.exists(os.path.join(ck, "DONE")), "DONE present")
    check(not os.path.exists(os.path.join(ck, "rank_00000.bin.tmp")), "no .tmp left")
    b = open(os.path.join(ck, "rank_00000.bin"), "rb").read()
    h = struct.unpack_from("<128q", b, 0)
    n = sum(int(np.prod(s)) for s in S.values())
    check(h[0] == 20261202 and h[1] == 2, "ckpt magic/version")
    check(list(h[2:8]) == [L, C, NH, T, V, Vp], "ckpt shape")
    check(list(h[8:20]) == [1, 1, 1, 0] + [0] * 8, "ckpt layout/state")
    check(h[20] == seed and h[22] == n and h[23] == 0 and h[24] == n and h[26] == 1,
          "ckpt seed/n_params/opt fields")
    check(all(v == 0 for v in h[27:]) and h[21] == 0, "ckpt unused fields 0")
    check(len(b) == 1024 + 12 * n, "ckpt size")
    h0 = list(h)
    h0[25] = 0
    check(fnv1a64(struct.pack("<128q", *h0) + b[1024:]) == h[25] & 0xFFFFFFFFFFFFFFFF, "ckpt checksum")
    w = np.frombuffer(b, "<f4", n, 1024)
    check(not np.frombuffer(b, "<f4", 2 * n, 1024 + 4 * n).any(), "ckpt m, v zero")
    check(not w[V * C:Vp * C].any(), "ckpt wte padded rows 0")
    print(f"test_fixture_format {out}: {len(R)} records, n_params {n}:",
          "OK" if fails == 0 else f"{fails} FAILED")
    sys.exit(1 if fails else 0)


if __name__ == "__main__":
    main()
