#!/usr/bin/env python3
"""test_bench_torch_init.py: dev/bench_torch_gpu.py -init llmc -data against the C trainer.

At a tiny shape (L 2, H 32, 2 heads, T 16, V 100 padded to 128) on CPU:
  0. normal_at (vectorised int64 torch) equals llmc/host/rand.h's, compiled here, at large indices;
  1. the PyTorch model's initial weights equal train_gpt's, element for element (fp32), read
     independently from a train_gpt checkpoint (written after one step at -lr 0, which leaves
     the weights untouched; the payload offset comes from the header's size fields);
  2. bench_torch_gpu.py -device cpu -dtype fp32 on the same shard gives train_gpt's step-1
     and step-2 losses (same samples, same recipe) to 1e-5 relative.
usage: python3 tests/test_bench_torch_init.py [path/to/train_gpt]; prints "N passed, M failed".
"""
import importlib.util
import json
import os
import random
import struct
import subprocess
import sys
import tempfile

import torch

HERE = os.path.dirname(os.path.abspath(__file__))
TRAIN = sys.argv[1] if len(sys.argv) > 1 else os.path.join(HERE, "..", "train_gpt")
L, H, NH, T, V, VPAD, SEED = 2, 32, 2, 16, 100, 64, 7
Vp = (V + VPAD - 1) // VPAD * VPAD
SHAPE = ["-L", str(L), "-H", str(H), "-heads", str(NH), "-seq", str(T), "-V", str(V), "-vpad", str(VPAD)]
npass = nfail = 0


def check(ok, what):
    global npass, nfail
    npass, nfail = npass + bool(ok), nfail + (not ok)
    print("%s %s" % ("ok  " if ok else "FAIL", what))


def train_gpt(tmp, data, extra):
    cmd = [TRAIN] + SHAPE + ["-mb", "2", "-gb", "4", "-ramp", "off", "-warmup", "0", "-decay", "1000000000000",
                             "-tokens", "1000000000000", "-i", data, "-j", "", "-seed", str(SEED), "-shuffle", "0",
                             "-threads", "1"] + extra
    r = subprocess.run(cmd, cwd=tmp, capture_output=True, text=True)
    if r.returncode != 0:
        sys.exit("error: %s failed: %s" % (" ".join(cmd), r.stderr.strip()[-400:]))


def main():
    spec = importlib.util.spec_from_file_location("bench", os.path.join(HERE, "..", "dev", "bench_torch_gpu.py"))
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    with tempfile.TemporaryDirectory() as tmp:
        data = os.path.join(tmp, "d.bin")
        rnd = random.Random(3)
        n = 4000
        with open(data, "wb") as f:
            f.write(struct.pack("<256i", 20240520, 1, n, *([0] * 253)))
            f.write(struct.pack("<%dH" % n, *[(i * 7 + i // 13) % V if rnd.random() > 0.3 else rnd.randrange(V) for i in range(n)]))

        # 0. normal_at itself against llmc/host/rand.h compiled by cc, at indices and seeds beyond 2^31
        #    (the tiny shape below only reaches small ones): equal up to libm's last bit
        cases = [(7, 0, 0), (1337, 4, 5), (2**63 + 12345, 15, 2**33 + 7), (99, 12, 2**40 + 3), (0, 3, 2**52 - 1)]
        src = os.path.join(tmp, "n.c")
        with open(src, "w") as f:
            f.write('#include <stdio.h>\n#include "llmc/host/rand.h"\nint main(void) {\n')
            for sd, st, ix in cases:
                f.write('printf("%%.17g\\n", normal_at(%dULL, %dULL, %dULL));\n' % (sd, st, ix))
            f.write("return 0; }\n")
        exe = os.path.join(tmp, "n")
        subprocess.run(["cc", "-O2", "-I", os.path.join(HERE, ".."), src, "-lm", "-o", exe], check=True)
        want = [float(x) for x in subprocess.run([exe], capture_output=True, text=True, check=True).stdout.split()]
        got = [bench.normal_at(sd, st, torch.tensor([ix], dtype=torch.int64)).item() for sd, st, ix in cases]
        worst = max(abs(g - w) / max(abs(w), 1e-300) for g, w in zip(got, want))
        check(worst <= 1e-15, "normal_at equals llmc/host/rand.h over %d (seed, stream, index) up to 2^52 (worst rel %.1e)" % (len(cases), worst))

        # 1. initial weights: train_gpt's checkpoint after a step at lr 0
        train_gpt(tmp, data, ["-lr", "0", "-steps", "1", "-ckpt-every", "1", "-o", "ck"])
        path = os.path.join(tmp, "ck", "ckpt_00000001", "rank_00000.bin")
        raw = open(path, "rb").read()
        hdr = struct.unpack("<128q", raw[:1024])
        n_params, n_opt = hdr[22], hdr[24]  # CK_N_PARAMS, CK_N_OPT (llmc/host/checkpoint.h)
        off = len(raw) - 4 * (n_params + 2 * n_opt)  # the header's size, whatever its version
        c = torch.frombuffer(bytearray(raw[off:off + 4 * n_params]), dtype=torch.float32)
        # the parameter table of llmc/host/params.h (1 rank): (layers, rows, cols) per tensor id
        shapes = [(1, Vp, H), (1, T, H), (L, H, 1), (L, H, 1), (L, 3 * H, H), (L, 3 * H, 1), (L, H, H), (L, H, 1),
                  (L, H, 1), (L, H, 1), (L, 4 * H, H), (L, 4 * H, 1), (L, H, 4 * H), (L, H, 1), (1, H, 1), (1, H, 1)]
        check(sum(a * b * d for a, b, d in shapes) == n_params, "checkpoint holds the whole parameter table (%d floats)" % n_params)
        ours, o = [], 0
        for a, b, d in shapes:
            ours.append(c[o:o + a * b * d].view(a, b, d)); o += a * b * d
        m = bench.GPT(L, H, NH, T, V, Vp)
        m.init_llmc(SEED, L, True)
        P = bench.PT
        pairs = [("wte", m.wte.weight, ours[P["wte"]][0]), ("wpe", m.wpe.weight, ours[P["wpe"]][0]),
                 ("lnfw", m.lnf.weight, ours[P["lnfw"]][0, :, 0]), ("lnfb", m.lnf.bias, ours[P["lnfb"]][0, :, 0])]
        for l, blk in enumerate(m.blocks):
            for mod, w, b in [(blk.ln1, "ln1w", "ln1b"), (blk.qkv, "qkvw", "qkvb"), (blk.proj, "attprojw", "attprojb"),
                              (blk.ln2, "ln2w", "ln2b"), (blk.fc1, "fcw", "fcb"), (blk.fc2, "fcprojw", "fcprojb")]:
                cw = ours[P[w]][l]
                pairs.append(("%s[%d]" % (w, l), mod.weight, cw if cw.shape[1] > 1 else cw[:, 0]))
                pairs.append(("%s[%d]" % (b, l), mod.bias, ours[P[b]][l, :, 0]))
        worst, bad = 0.0, []
        for name, tp, tc in pairs:
            d = (tp.detach() - tc.reshape(tp.shape)).abs().max().item()
            worst = d if d != d else max(worst, d)  # NaN sticks
            if not torch.equal(tp.detach(), tc.reshape(tp.shape)):  # NaN is never equal
                bad.append(name)
        check(not bad, "PyTorch -init llmc equals train_gpt's initial weights bit for bit over %d tensors (max |diff| %.2e%s)"
              % (len(pairs), worst, "; differ: " + ",".join(bad[:6]) if bad else ""))
        check(m.wte.weight[V:].abs().max().item() == 0 and m.wte.weight[:V].abs().max().item() > 0, "padded wte rows are 0, real rows drawn")

        # 2. step-1 and step-2 losses on the same shard, same recipe (constant lr 1e-3)
        train_gpt(tmp, data, ["-lr", "1e-3", "-steps", "2", "-log", "c.jsonl"])
        cl = [json.loads(x)["loss"] for x in open(os.path.join(tmp, "c.jsonl")) if '"type":"train"' in x]
        r = subprocess.run([sys.executable, os.path.join(HERE, "..", "dev", "bench_torch_gpu.py")] + SHAPE +
                           ["-mb", "2", "-gb", "4", "-steps", "2", "-warmup-steps", "0", "-compile", "0", "-init", "llmc",
                            "-seed", str(SEED), "-data", data, "-lr", "1e-3", "-device", "cpu", "-dtype", "fp32"],
                           capture_output=True, text=True)
        if r.returncode != 0:
            sys.exit("error: bench_torch_gpu.py failed: " + r.stderr.strip()[-400:])
        pl = json.loads([x for x in r.stdout.splitlines() if x.startswith("{")][-1])["losses"]
        for k in range(2):
            rel = abs(pl[k] - cl[k]) / abs(cl[k])
            check(rel <= 1e-5, "step %d loss: PyTorch %.7f vs train_gpt %.7f (rel %.1e)" % (k + 1, pl[k], cl[k], rel))
        check(abs(cl[1] - cl[0]) > 1e-3, "step 2 differs from step 1 (the update happened: %.5f -> %.5f)" % (cl[0], cl[1]))
    print("%d passed, %d failed" % (npass, nfail))
    return 1 if nfail else 0


if __name__ == "__main__":
    sys.exit(main())
