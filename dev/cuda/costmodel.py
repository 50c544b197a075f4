#!/usr/bin/env python3
"""dev/cuda/costmodel.py: a per-kernel cost model of the CUDA trainer. PREDICTIONS, not measurements.

What is counted (by the CPU emulation, never guessed): build/cuda-cost/train_gpt_cu is
train_gpt.cu under dev/cuemu built with clang's load/store instrumentation (CUEMU_COST,
dev/cuemu/impl/cost.h). For one training step (the difference of a 1-step and a 2-step run,
so start-up work cancels) it counts, per kernel, the global-memory bytes read and written,
the 32-byte sectors touched per warp request against the minimum, and every cuBLASLt GEMM
with its shape and epilogue.

How it is scaled: the step is counted at several small shapes that vary one dimension at a
time (layers, micro-batch, sequence, hidden, vocabulary). Each kernel's bytes per step is
fitted as a sum of at most three size terms (L*B*T*C, B*T*V, L*C^2, ...) with non-negative
coefficients; a fit that misses any counted shape by more than 3% is rejected, and the whole
model is checked on a held-out shape. GEMM dimensions are matched to their symbols (B*T, C,
3C, 4C, V) at every counted shape. The fitted model is then evaluated at the target (1.3b,
T = 2048 by default) on H100 and H200.

Assumptions (each a stated constant below; change them here, nowhere else):
  * GEMMs: cuBLASLt bf16 at GEMM_TFLOPS on large shapes (H200 ~790 TFLOP/s, the issue's
    figure for cuBLASLt; H100 750, assumed), times a wave-quantization factor for
    128x256 output tiles on 132 SMs and k/(k+128) for short reductions.
  * Memory-bound kernels at HBM_EFF of the HBM bandwidth (0.80, the planner's constant;
    H100 SXM 3.35 TB/s, H200 4.8 TB/s), each launch at least LAUNCH_US (3 us).
  * Attention (flash kernels' traffic excluded) at cuDNN's rate: forward 500 TFLOP/s,
    backward 400 TFLOP/s for causal bf16 at head size 128, T = 2048 on H100/H200, assumed
    from the cuDNN curves of Shah et al. 2024 (FlashAttention-3, Figs. 5-6, H100 SXM5).
  * One GPU: no communication; no host gaps between kernels (CUDA graphs absent, so this
    is optimistic by the launch overhead the host cannot hide).
MFU counts model FLOPs only (the paper's formula with f = 3) over 989 TFLOP/s.

Usage: costmodel.py [--exe build/cuda-cost/train_gpt_cu] [--out DIR] [--mb 4] [--gb 16]
       [--pred-tsv FILE]  (per-class predicted ms per step, which dev/gpu_check.sh's profile
                           stage prints beside the measured times: dev/cuda/kernel_times.py)
       [--selftest]   (the check make test runs: fits, held-out shape, printed prediction)
"""
import argparse, concurrent.futures, itertools, math, os, struct, subprocess, sys, tempfile

import numpy as np

GEMM_TFLOPS = {"H100": 750.0, "H200": 790.0}
HBM_TBS = {"H100": 3.35, "H200": 4.8}
HBM_EFF = 0.80
LAUNCH_US = 3.0
ATTN_FWD_TFLOPS, ATTN_BWD_TFLOPS = 500.0, 400.0
PEAK_TFLOPS = 989.0
SMS, TILE_M, TILE_N = 132, 128, 256
ATTN_KERNELS = ("flash_", "attn_naive")
EPI_NAMES = {1: "", 4: " +bias", 164: " +GELU_AUX_BIAS", 208: " +DGELU_BGRAD", 512: " +BGRADB"}  # cuBLASLt enum values

# counted shapes: (L, B, T, C, heads, V); head size 128 like the 1.3b preset
BASE = dict(L=2, B=2, T=32, C=256, heads=2, V=520)
VARY = [dict(), dict(L=3), dict(B=4), dict(T=64), dict(C=384, heads=3), dict(V=1040)]
HELD_OUT = dict(L=3, B=3, T=48, C=384, heads=3, V=780)
TARGET = dict(L=24, B=4, T=2048, C=2048, heads=16, V=50257)  # 1.3b


def shape(**kw):
    s = dict(BASE); s.update(kw); return s


# size terms a kernel's bytes per step may be linear in
TERMS = {
    "L*BT*C": lambda s: s["L"] * s["B"] * s["T"] * s["C"],
    "BT*C": lambda s: s["B"] * s["T"] * s["C"],
    "BT*V": lambda s: s["B"] * s["T"] * s["V"],
    "L*BT": lambda s: s["L"] * s["B"] * s["T"],
    "BT": lambda s: s["B"] * s["T"],
    "L*C^2": lambda s: s["L"] * s["C"] ** 2,
    "V*C": lambda s: s["V"] * s["C"],
    "T*C": lambda s: s["T"] * s["C"],
    "L*C": lambda s: s["L"] * s["C"],
    "C": lambda s: s["C"],
    "V": lambda s: s["V"],
    "L": lambda s: s["L"],
    "1": lambda s: 1,
}


def write_shard(path, V, ntok, seed):
    rng = np.random.default_rng(seed)
    hdr = np.zeros(256, dtype=np.int32); hdr[0], hdr[1], hdr[2] = 20240520, 1, ntok
    with open(path, "wb") as f:
        f.write(hdr.tobytes()); f.write(rng.integers(0, V, ntok, dtype=np.uint16).tobytes())


def count(exe, s, steps, work):
    shard = os.path.join(work, "shard_V%d.bin" % s["V"])
    if not os.path.exists(shard): write_shard(shard, s["V"], 200000, 1)
    tsv = os.path.join(work, "L%dB%dT%dC%dV%d_s%d.tsv" % (s["L"], s["B"], s["T"], s["C"], s["V"], steps))
    if os.path.exists(tsv) and os.path.getmtime(tsv) > os.path.getmtime(exe): return parse(tsv)  # counted already
    env = dict(os.environ, CUEMU_COST=tsv, LLMC_ATTENTION="flash", OMP_NUM_THREADS="1")
    cmd = [exe, "-L", str(s["L"]), "-H", str(s["C"]), "-heads", str(s["heads"]), "-seq", str(s["T"]), "-V", str(s["V"]),
           "-mb", str(s["B"]), "-gb", str(s["B"]), "-ramp", "off", "-steps", str(steps), "-i", shard, "-j", shard,
           "-val-every", "0", "-warmup", "1000", "-tokens", "1e6"]
    r = subprocess.run(cmd, env=env, capture_output=True, text=True)
    if r.returncode != 0:
        if os.path.exists(tsv): os.remove(tsv)
        sys.exit("costmodel: %s failed (rc %d):\n%s" % (" ".join(cmd), r.returncode, r.stderr[-2000:]))
    return parse(tsv)


def parse(tsv):
    kern, gemm = {}, {}
    for line in open(tsv):
        f = line.rstrip("\n").split("\t")
        if f[0] == "kernel": kern[f[1]] = np.array([int(x) for x in f[2:8]], dtype=np.float64)
        elif f[0] == "gemm": gemm[tuple(int(x) for x in f[1:7])] = int(f[7])
    return kern, gemm


def one_step(exe, s, work):
    with concurrent.futures.ThreadPoolExecutor(2) as pool:  # the two runs side by side
        r1, r2 = pool.submit(count, exe, s, 1, work), pool.submit(count, exe, s, 2, work)
        (k1, g1), (k2, g2) = r1.result(), r2.result()
    kern = {n: k2[n] - k1.get(n, 0 * k2[n]) for n in k2}
    kern = {n: v for n, v in kern.items() if v[0] > 0}
    gemm = {k: g2[k] - g1.get(k, 0) for k in g2 if g2[k] - g1.get(k, 0) > 0}
    return kern, gemm


def nnls_small(A, y):
    # least squares restricted to non-negative coefficients (A has at most 3 columns)
    best = None
    for r in range(1, A.shape[1] + 1):
        for cols in itertools.combinations(range(A.shape[1]), r):
            x, *_ = np.linalg.lstsq(A[:, cols], y, rcond=None)
            if np.any(x < 0): continue
            full = np.zeros(A.shape[1]); full[list(cols)] = x
            err = np.max(np.abs(A @ full - y) / np.maximum(y, 1))
            if best is None or err < best[1]: best = (full, err)
    return best


def fit(shapes, ys, tol=0.03):
    """Smallest set (<= 3) of TERMS whose non-negative combination matches every y."""
    names = list(TERMS)
    M = np.array([[TERMS[n](s) for n in names] for s in shapes], dtype=np.float64)
    for r in (1, 2, 3):
        best = None
        for cols in itertools.combinations(range(len(names)), r):
            res = nnls_small(M[:, cols], ys)
            if res is None: continue
            if best is None or res[1] < best[2]: best = (cols, res[0], res[1])
        if best is not None and best[2] <= tol:
            return {names[c]: float(x) for c, x in zip(best[0], best[1]) if x > 0}, best[2]
    return None, None


def evaluate(model, s):
    return sum(x * TERMS[n](s) for n, x in model.items())


def gemm_symbols(s):
    BT, C, V = s["B"] * s["T"], s["C"], s["V"]
    ldl = (V + 7) // 8 * 8
    return {BT: "BT", C: "C", 3 * C: "3C", 4 * C: "4C", V: "V", ldl: "V"}


def sym_value(sym, s):
    return {"BT": s["B"] * s["T"], "C": s["C"], "3C": 3 * s["C"], "4C": 4 * s["C"], "V": s["V"]}[sym]


def gemm_time_ms(m, n, k, gpu):
    tiles = math.ceil(m / TILE_M) * math.ceil(n / TILE_N)
    waves = math.ceil(tiles / SMS)
    eff = tiles / (waves * SMS) * (k / (k + 128.0))
    return 2.0 * m * n * k / (GEMM_TFLOPS[gpu] * 1e12 * eff) * 1e3


def model_flops(s):
    L, H, T, V = s["L"], s["C"], s["T"], s["V"]
    return 24 * 3 * s["B"] * T * L * H * H * (1 + T / (6 * H) + V / (16 * L * H))


def build(exe, work, log):
    shapes = [shape(**v) for v in VARY]
    counted = []
    for s in shapes:
        log("counting one step at L=%d B=%d T=%d C=%d heads=%d V=%d" % (s["L"], s["B"], s["T"], s["C"], s["heads"], s["V"]))
        counted.append(one_step(exe, s, work))
    kernels = sorted(set().union(*[set(k) for k, _ in counted]))
    mem = {}
    for kname in kernels:
        if kname.startswith(ATTN_KERNELS): continue  # attention is costed by its FLOPs (cuDNN rate)
        ys = np.array([k.get(kname, np.zeros(6))[1] + k.get(kname, np.zeros(6))[2] for k, _ in counted])
        ls = np.array([k.get(kname, np.zeros(6))[0] for k, _ in counted])
        mb, eb = fit(shapes, ys)
        ml, el = fit(shapes, ls, tol=1e-9)
        if mb is None or ml is None: sys.exit("costmodel: no size model fits kernel %s (bytes %s, launches %s)" % (kname, ys, ls))
        sec = sum(k[kname][4] for k, _ in counted if kname in k)
        mins = sum(k[kname][5] for k, _ in counted if kname in k)
        mem[kname] = dict(bytes=mb, launches=ml, fit_err=eb, sect_ratio=(sec / mins if mins else 1.0))
    # GEMMs: symbolic shapes, identical at every counted shape up to a count linear in L
    gsym = []
    for s, (_, g) in zip(shapes, counted):
        tab = gemm_symbols(s)
        d = {}
        for (m, n, k, ab, db, epi), c in g.items():
            key = (tab[m], tab[n], tab[k], db, epi)
            d[key] = d.get(key, 0) + c
        gsym.append(d)
    keys = sorted(set().union(*gsym))
    gemms = {}
    for key in keys:
        cs = np.array([d.get(key, 0) for d in gsym], dtype=np.float64)
        ml, _ = fit(shapes, cs, tol=1e-9)
        if ml is None: sys.exit("costmodel: GEMM %s count is not linear in L: %s" % (key, cs))
        gemms[key] = ml
    return dict(mem=mem, gemms=gemms, shapes=shapes, counted=counted)


def predict(M, s, gpu, micro):
    rows = []
    bw = HBM_TBS[gpu] * 1e12 * HBM_EFF
    for kname, m in M["mem"].items():
        launches, byts = evaluate(m["launches"], s), evaluate(m["bytes"], s)
        optimizer = kname.startswith(("adamw", "sumsq", "cast_"))  # once per step, not per micro-batch
        reps = 1 if optimizer else micro
        t = max(byts / bw * 1e3, launches * LAUNCH_US * 1e-3) * reps
        rows.append((t, kname, "memory %.2f GB/step" % (byts * reps / 1e9)))
    for (a, b, c, db, epi), cnt in M["gemms"].items():
        n = evaluate(cnt, s) * micro
        m_, n_, k_ = sym_value(a, s), sym_value(b, s), sym_value(c, s)
        t = gemm_time_ms(m_, n_, k_, gpu) * n
        rows.append((t, "gemm m=%s n=%s k=%s%s" % (a, b, c, EPI_NAMES.get(epi, " epilogue %d" % epi)), "%d calls, %.1f TFLOP" % (n, 2.0 * m_ * n_ * k_ * n / 1e12)))
    hs = s["C"] // s["heads"]
    fwd = 4.0 * s["B"] * s["heads"] * s["T"] ** 2 / 2 * hs * s["L"] * micro
    rows.append((fwd / (ATTN_FWD_TFLOPS * 1e12) * 1e3, "attention forward (cuDNN rate)", "%.1f TFLOP" % (fwd / 1e12)))
    rows.append((2.5 * fwd / (ATTN_BWD_TFLOPS * 1e12) * 1e3, "attention backward (cuDNN rate)", "%.1f TFLOP" % (2.5 * fwd / 1e12)))
    rows.sort(reverse=True)
    ms = sum(r[0] for r in rows)
    mfu = model_flops(s) * micro / (ms * 1e-3) / (PEAK_TFLOPS * 1e12)
    return ms, mfu, rows


def pred_rows(rows):
    """Predicted ms per step by kernel class (the classes dev/cuda/kernel_times.py measures)."""
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    from kernel_times import kernel_class
    out = {}
    for t, name, _ in rows:
        c = "gemm" if name.startswith("gemm ") else "attention" if name.startswith("attention ") else kernel_class(name)
        out[c] = out.get(c, 0.0) + t
    return out


def report(M, target, micro, log):
    log("PREDICTION (cost model, not a measurement): %s micro-batch %d x %d per step, T=%d" % (
        "1.3b" if target == TARGET else "target", target["B"], micro, target["T"]))
    res = {}
    for gpu in ("H100", "H200"):
        ms, mfu, rows = predict(M, target, gpu, micro)
        res[gpu] = (ms, mfu, pred_rows(rows))
        log("  %s: predicted %.1f ms/step, %.0f tokens/s, MFU %.1f%% (model FLOPs, f=3, of %.0f TFLOP/s)" % (
            gpu, ms, target["B"] * target["T"] * micro / (ms * 1e-3), 100 * mfu, PEAK_TFLOPS))
        log("  top five costs on %s:" % gpu)
        for t, name, what in rows[:5]: log("    %8.2f ms  %5.1f%%  %s (%s)" % (t, 100 * t / ms, name, what))
    bad = [(k, m["sect_ratio"]) for k, m in M["mem"].items() if m["sect_ratio"] > 2.0]
    log("  kernels touching > 2x the minimum sectors per warp request: %s" % (
        ", ".join("%s (%.1fx)" % b for b in bad) if bad else "none"))
    return res, bad


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--exe", default="build/cuda-cost/train_gpt_cu")
    ap.add_argument("--out", default=None)
    ap.add_argument("--mb", type=int, default=4)
    ap.add_argument("--gb", type=int, default=16)
    ap.add_argument("--selftest", action="store_true")
    ap.add_argument("--pred-tsv", default=None)
    ap.add_argument("--attn-tflops", nargs=2, type=float, metavar=("FWD", "BWD"),
                    help="attention rate instead of cuDNN's (e.g. the own tensor-core kernel's estimate)")
    a = ap.parse_args()
    work = a.out or tempfile.mkdtemp(prefix="costmodel_")
    os.makedirs(work, exist_ok=True)
    log = lambda m: print(m, flush=True)
    if a.attn_tflops:
        global ATTN_FWD_TFLOPS, ATTN_BWD_TFLOPS
        ATTN_FWD_TFLOPS, ATTN_BWD_TFLOPS = a.attn_tflops
    log("assumptions: GEMM %s TFLOP/s on large shapes, HBM %s TB/s at %.0f%%, >= %.0f us per launch, attention %.0f/%.0f TFLOP/s fwd/bwd" % (
        GEMM_TFLOPS, HBM_TBS, 100 * HBM_EFF, LAUNCH_US, ATTN_FWD_TFLOPS, ATTN_BWD_TFLOPS))
    M = build(a.exe, work, log)
    log("fitted size models (bytes per step; launches per step):")
    for k, m in sorted(M["mem"].items()):
        log("  %-34s bytes %-40s launches %-14s fit %.2f%%  sectors/min %.2f" % (
            k, " + ".join("%.3g*%s" % (x, n) for n, x in m["bytes"].items()),
            " + ".join("%g*%s" % (x, n) for n, x in m["launches"].items()), 100 * m["fit_err"], m["sect_ratio"]))
    target = dict(TARGET, B=a.mb)
    res, bad = report(M, target, a.gb // a.mb, log)
    if a.pred_tsv:
        with open(a.pred_tsv, "w") as f:
            f.write("# PREDICTION of the cost model (dev/cuda/costmodel.py), not a measurement: ms per step by kernel class\n")
            f.write("# generated by make cuda-costmodel (commit it with the change it predicts): 1.3b, T=%d, micro-batch %d x %d per step\n" % (target["T"], target["B"], a.gb // a.mb))
            for gpu, (_, _, cls) in res.items():
                for c, t in sorted(cls.items(), key=lambda x: -x[1]): f.write("%s\t%s\t%.4f\n" % (gpu, c, t))
        log("per-class prediction written to %s (dev/gpu_check.sh prints it beside ncu's measurement)" % a.pred_tsv)
    if not a.selftest: return 0
    # held-out shape: the model's bytes and GEMM FLOPs against a fresh count
    npass = nfail = 0
    def check(ok, msg):
        nonlocal npass, nfail
        print(("ok   " if ok else "FAIL ") + msg)
        npass += ok; nfail += not ok
    s = HELD_OUT
    log("counting the held-out shape L=%d B=%d T=%d C=%d heads=%d V=%d" % (s["L"], s["B"], s["T"], s["C"], s["heads"], s["V"]))
    kern, g = one_step(a.exe, s, work)
    tot_want = tot_got = 0.0
    for kname, m in sorted(M["mem"].items()):
        got = kern.get(kname, np.zeros(6))
        want = evaluate(m["bytes"], s)
        e = abs(want - (got[1] + got[2])) / max(got[1] + got[2], 1)
        check(e <= 0.10, "held-out %s: predicted %.0f bytes, counted %.0f (%.1f%%, tolerance 10%%)" % (kname, want, got[1] + got[2], 100 * e))
        tot_want += want; tot_got += got[1] + got[2]
        check(abs(evaluate(m["launches"], s) - got[0]) < 1e-6, "held-out %s: predicted %g launches, counted %g" % (kname, evaluate(m["launches"], s), got[0]))
    e = abs(tot_want - tot_got) / tot_got
    check(e <= 0.05, "held-out memory traffic of all kernels: predicted %.4g bytes, counted %.4g (%.1f%%, tolerance 5%%)" % (tot_want, tot_got, 100 * e))
    tab = gemm_symbols(s)
    flops_counted = sum(2.0 * m * n * k * c for (m, n, k, _, _, _), c in g.items())
    flops_model = sum(2.0 * sym_value(a_, s) * sym_value(b_, s) * sym_value(c_, s) * evaluate(cnt, s) for (a_, b_, c_, _, _), cnt in M["gemms"].items())
    check(abs(flops_model - flops_counted) <= 1e-9 * flops_counted, "held-out GEMM FLOPs: model %.4g, counted %.4g" % (flops_model, flops_counted))
    check(all(m in tab and n in tab and k in tab for (m, n, k, _, _, _) in g), "held-out GEMM dimensions are all B*T, C, 3C, 4C or V")
    # the model's GEMM FLOPs at the target, from first principles: 24*B*T*C^2 per layer forward
    # (QKV 6, projection 2, fc1 8, fc2 8), the LM head 2*B*T*C*V; backward twice the forward
    t = target
    want = 3 * (24 * t["B"] * t["T"] * t["L"] * t["C"] ** 2 + 2 * t["B"] * t["T"] * t["C"] * t["V"])
    got = sum(2.0 * sym_value(a_, t) * sym_value(b_, t) * sym_value(c_, t) * evaluate(cnt, t) for (a_, b_, c_, _, _), cnt in M["gemms"].items())
    check(abs(got - want) / want < 1e-9, "GEMM FLOPs at the target: %.6g vs 3 x (24 B T L C^2 + 2 B T C V) = %.6g" % (got, want))
    for gpu, (ms, mfu, cls) in res.items():
        check(abs(sum(cls.values()) - ms) <= 1e-9 * ms, "%s per-class prediction sums to the step: %.3f ms" % (gpu, sum(cls.values())))
        check(ms > 0 and 0 < mfu < 1, "%s prediction is a finite step time and an MFU in (0, 1): %.1f ms, %.1f%%" % (gpu, ms, 100 * mfu))
    print("%d passed, %d failed" % (npass, nfail))
    return 0 if nfail == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
