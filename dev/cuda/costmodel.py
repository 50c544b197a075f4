#!/usr/bin/env python3
"""dev/cuda/costmodel.py: a per-kernel cost model of the CUDA trainer. PREDICTIONS, not measurements.

What is counted (by the CPU emulation, never guessed): build/cuda-cost/train_gpt_cu is
train_gpt.cu under cuemu built with clang's load/store instrumentation (CUEMU_COST,
cuemu/impl/cost.h). For one training step (the second of a 2-step run, counted alone inside
the trainer's profiler range, so start-up and first-use work stay out) it counts, per kernel, the
launches and the global-memory bytes
read and written, the 32-byte sectors touched per warp request against the minimum, and
every cuBLASLt GEMM with its shape, output type and epilogue. The trainer's own log gives
the host waits of the step (host_syncs) and its stdout the parameter count. These are
counts, not timings: the emulation's speed says nothing about a GPU's.

How it is scaled: the step is counted at several small shapes that vary one dimension at a
time (layers, micro-batch, sequence, hidden, vocabulary), one micro-batch per step, plus
the base shape with two micro-batches per step: that pair splits every kernel's launches
and bytes (and every GEMM) into a part per micro-batch and a part per step (AdamW, the
gradient norm, ...), by counting, so a new kernel needs no entry here. Each kernel's bytes
per step is fitted as a sum of at most three size terms (L*B*T*C, B*T*V, L*C^2, Vp*C, ...)
with non-negative coefficients; a fit that misses any counted shape by more than 3% is
rejected, and the whole model is checked on a held-out shape. GEMM dimensions are matched
to their symbols (B*T, C, 3C, 4C, V, Vp) at every counted shape. Counting pads the
vocabulary to a multiple of 64 (-vpad 64) so Vp differs from every other dimension; the
target is evaluated at the trainer's default padding (1024).

How it is turned into time: the ASSUMPTIONS of llmc/planner/gpu_step.h, each with a (slow, mid,
fast) range, the GPUs of the planner's cluster presets (read from the two headers below: the
planner's -plan takes its compute term on the h100 and h200 clusters from the same file and the
same rules, so there is one prediction of a GPU step). The prediction is the mid case; the
range is the all-slow and all-fast corners (wide on purpose, not a confidence interval); the
expected range moves one assumption at a time to its slow and fast value and combines the moves
in quadrature. Every kernel is costed by one of three rules:
  * GEMM (every cuBLASLt call): 2mnk FLOPs at GEMM_SUSTAINED of the 989 TFLOP/s dense bf16
    peak (a large, well-shaped bf16 GEMM), times the wave quantization of the best of
    128x256 / 256x128 / 128x128 output tiles over 132 SMs (128x128 tiles pay TILE_EFF_128),
    times k/(k+K0) relative to k = 8192, times FUSED_EPI_RATE for a fused epilogue; plus
    the epilogue's extra bytes (GELU aux write, DGELU aux read, bias-gradient vectors, and
    for the fp32 weight gradients the C read and fp32 D write of beta = 1) at HBM rate,
    EPI_EXPOSED of it not hidden behind the main loop; plus GEMM_FIXED_US per call.
  * attention (every kernel kernel_times.py classes as attention): causal FLOPs (half of the
    full T x T: forward 2*B*heads*T^2*hs per layer, backward 2.5x) at cuDNN's rates; the
    trainer builds cuDNN's deterministic backward first, which cuDNN 9.x on Hopper runs on a
    dP workspace (B x heads x T^2 bf16, 537 MB per call at 1.3b): ATTN_DP_PASSES of it at HBM rate.
  * everything else (any kernel name, known or not): memory-bound, counted bytes at HBM_EFF
    of the HBM bandwidth plus KERNEL_FIXED_US per launch.
  Not kernels, but in the step: the fp32 gradient memset (4 bytes per parameter), a gap of
  LAUNCH_GAP_US between back-to-back kernels (no CUDA graphs), DRAIN_US per host wait that
  drains the stream, GUARD_US per micro-batch slot guard (hidden while the host is ahead),
  the token uploads and stats reads (COPY_US each plus PCIe bytes), and, if the host
  issues launches slower than the GPU runs them, the difference. One GPU: no communication.

MFU two ways, both over 989 TFLOP/s: the paper's (Narayanan et al. 2021) model FLOPs
F = 24 f B s L H^2 (1 + s/(6H) + V/(16 L H)), f = 3, which counts full (non-causal)
attention, and llm.c's convention, which halves the causal attention term (s/(12H)).

Usage: costmodel.py [--exe build/cuda-cost/train_gpt_cu] [--out DIR] [--mb 4] [--gb 16]
       [--pred-tsv FILE]  (per-class predicted ms per step, which dev/gpu_check.sh's profile
                           stage prints beside the measured times: dev/cuda/kernel_times.py)
       [--attention cudnn-det|cudnn-nondet|tc]  (which attention the main prediction uses)
       [--markdown]   (print the per-kernel tables as markdown, for doc/cuda_speed.md)
       [--selftest]   (the check make test runs: formulas, fits, held-out shape, prediction,
                       gpu_step.h's counted rows against the counts, and -plan's one-GPU step
                       against this model's for PLAN_CONFIGS on H100 and H200, within 5%)
       [--planner CMD]  (the planner --selftest runs: ./train_gpt -plan)
"""
import argparse, concurrent.futures, csv, itertools, json, math, os, re, shlex, subprocess, sys, tempfile, threading

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from kernel_times import kernel_class  # the classes ncu's measurement is grouped by

# ------------------------------------------------------------------------------------------
# ASSUMPTIONS, COUNTED values, GEMM tables and tiles: llmc/planner/gpu_step.h, the one place the
# planner (-plan on the h100 and h200 clusters) reads them from too; the GPUs (peak, HBM, SMs):
# the planner's cluster presets in llmc/planner/planner.h. Change them there, nowhere else;
# doc/cuda_speed.md says why each has its value.
ROOT = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
GPU_STEP_H = os.path.join(ROOT, "llmc", "planner", "gpu_step.h")
PLANNER_H = os.path.join(ROOT, "llmc", "planner", "planner.h")
NUM = r"\s*([-+0-9.eE]+)\s*"


def read_shared(step_h=GPU_STEP_H, planner_h=PLANNER_H):
    """(assumed {name: (slow, mid, fast)}, counted {name: value}, layer GEMM rows, head GEMM rows,
    tiles, K_REF, devices {GPU: (peak TFLOP/s, HBM TB/s, SMs)}) from the two headers."""
    text = open(step_h).read()
    assumed, counted, layer, head, tiles = {}, {}, [], [], []
    for line in text.split("\n"):
        m = re.match(r"\s*A\(\s*(\w+)\s*," + NUM + "," + NUM + "," + NUM + r"\)", line)
        if m: assumed[m.group(1)] = tuple(float(m.group(i)) for i in (2, 3, 4))
        m = re.match(r"\s*N\(\s*(\w+)\s*," + NUM + r"\)", line)
        if m: counted[m.group(1)] = float(m.group(2))
        m = re.match(r"\s*([GH])\(\s*([FBW])\s*,\s*(\w+)\s*,\s*(\w+)\s*,\s*(\w+)\s*,\s*(\d+)\s*,\s*(\d+)\s*\)", line)
        if m: (layer if m.group(1) == "G" else head).append((m.group(2), m.group(3), m.group(4), m.group(5), int(m.group(6)), int(m.group(7))))
        m = re.match(r"\s*T\(\s*(\d+)\s*,\s*(\d+)\s*\)", line)
        if m: tiles.append((int(m.group(1)), int(m.group(2))))
    m = re.search(r"#define GPU_STEP_K_REF" + NUM, text)
    devices = {}
    for line in open(planner_h).read().split("\n"):
        d = re.match(r'\s*\{"(h100|h200)",\s*\d+,' + NUM + "," + NUM + "," + NUM + r",(?:[^,]*,){4}\s*(\d+),\s*1\s*\}", line)
        if d: devices[d.group(1).upper()] = (float(d.group(2)), float(d.group(4)) / 1e3, int(d.group(5)))
    want_a = ("GEMM_SUSTAINED", "TILE_EFF_128", "K0", "GEMM_FIXED_US", "FUSED_EPI_RATE", "EPI_EXPOSED", "HBM_EFF",
              "KERNEL_FIXED_US", "ATTN_FWD", "ATTN_BWD", "ATTN_DP_PASSES", "TC_FWD", "TC_BWD", "LAUNCH_GAP_US",
              "DRAIN_US", "GUARD_US", "COPY_US", "PCIE_GBS", "HOST_LAUNCH_US")
    missing = [n for n in want_a if n not in assumed] + ([] if m else ["GPU_STEP_K_REF"]) + \
        [g for g in ("H100", "H200") if g not in devices] + ([] if layer and head and tiles and counted else ["G/H/T/N rows"])
    if missing:
        sys.exit("costmodel: %s or %s lacks %s (one row per line, as the file's comment says)" % (step_h, planner_h, missing))
    return assumed, counted, layer, head, tuple(tiles), float(m.group(1)), devices


A, COUNTED, LAYER_GEMMS, HEAD_GEMMS, TILES, K_REF, DEVICES = read_shared()
PEAK_TFLOPS = {g: d[0] for g, d in DEVICES.items()}   # dense bf16 tensor-core peak
HBM_TBS = {g: d[1] for g, d in DEVICES.items()}       # TB/s
SMS = {g: d[2] for g, d in DEVICES.items()}
CASES = {"slow": 0, "mid": 1, "fast": 2}
EPI_NAMES = {1: "", 4: " +bias", 164: " +GELU_AUX_BIAS", 208: " +DGELU_BGRAD", 512: " +BGRADB"}  # cuBLASLt enum values
FUSED_EPIS = (164, 208, 512)
COUNT_VPAD = 64

# counted shapes: (L, B, T, C, heads, V); head size 128 like the 1.3b preset
BASE = dict(L=2, B=2, T=32, C=256, heads=2, V=520)
VARY = [dict(), dict(L=3), dict(B=4), dict(T=64), dict(C=384, heads=3), dict(V=1040)]
HELD_OUT = dict(L=3, B=3, T=48, C=384, heads=3, V=780)
TARGET = dict(L=24, B=4, T=2048, C=2048, heads=16, V=50257, vpad=1024)  # 1.3b
# one GPU, 16 sequences per step: (what, shape, micro-batches per step); --selftest holds -plan's step
# on the h100 and h200 clusters within 5% of this model's at each (the first is the prediction above)
PLAN_CONFIGS = [
    ("1.3b, micro-batch 4", dict(TARGET), 4),
    ("1.3b, micro-batch 1", dict(TARGET, B=1), 16),
    ("350m shape with head size 128, micro-batch 8", dict(L=24, B=8, T=2048, C=1024, heads=8, V=50257, vpad=1024), 2),
    ("2.7b shape (L 32, C 2560), micro-batch 2", dict(L=32, B=2, T=2048, C=2560, heads=20, V=50257, vpad=1024), 8),
]


def shape(**kw):
    s = dict(BASE); s.update(kw); return s


def vp(s):
    p = s.get("vpad", COUNT_VPAD)
    return (s["V"] + p - 1) // p * p


# size terms a kernel's bytes per step may be linear in
TERMS = {
    "L*BT*C": lambda s: s["L"] * s["B"] * s["T"] * s["C"],
    "BT*C": lambda s: s["B"] * s["T"] * s["C"],
    "BT*V": lambda s: s["B"] * s["T"] * s["V"],
    "BT*Vp": lambda s: s["B"] * s["T"] * vp(s),
    "L*BT": lambda s: s["L"] * s["B"] * s["T"],
    "BT": lambda s: s["B"] * s["T"],
    "L*C^2": lambda s: s["L"] * s["C"] ** 2,
    "V*C": lambda s: s["V"] * s["C"],
    "Vp*C": lambda s: vp(s) * s["C"],
    "T*C": lambda s: s["T"] * s["C"],
    "L*C": lambda s: s["L"] * s["C"],
    "C": lambda s: s["C"],
    "V": lambda s: s["V"],
    "Vp": lambda s: vp(s),
    "L": lambda s: s["L"],
    "1": lambda s: 1,
}


def write_shard(path, V, ntok, seed):
    rng = np.random.default_rng(seed)
    hdr = np.zeros(256, dtype=np.int32); hdr[0], hdr[1], hdr[2] = 20240520, 1, ntok
    tmp = "%s.%d.tmp" % (path, threading.get_ident())  # whole or absent: two runs may want it at once
    with open(tmp, "wb") as f:
        f.write(hdr.tobytes()); f.write(rng.integers(0, V, ntok, dtype=np.uint16).tobytes())
    os.replace(tmp, path)


def count(exe, s, steps, work, micro=1):
    """One run of the emulated trainer: (kernels, gemms, meta) of its last step alone (LLMC_PROFILE_STEP puts
    it inside cudaProfilerStart/Stop, and CUEMU_COST_FROM_START=0 counts only there, as ncu's
    --profile-from-start off); meta's host_syncs has every step's."""
    shard = os.path.join(work, "shard_V%d.bin" % s["V"])
    if not os.path.exists(shard): write_shard(shard, s["V"], 200000, 1)
    tag = "L%dB%dT%dC%dV%d_m%d_s%d" % (s["L"], s["B"], s["T"], s["C"], s["V"], micro, steps)
    tsv, meta = os.path.join(work, tag + ".tsv"), os.path.join(work, tag + ".json")
    fresh = lambda p: os.path.exists(p) and os.path.getmtime(p) > os.path.getmtime(exe)
    if fresh(tsv) and fresh(meta): return parse(tsv, meta)  # counted already
    logf = os.path.join(work, tag + ".jsonl")
    for p in (tsv, meta, logf):
        if os.path.exists(p): os.remove(p)
    env = dict(os.environ, CUEMU_COST=tsv, CUEMU_COST_FROM_START="0", LLMC_PROFILE_STEP=str(steps),
               LLMC_ATTENTION="flash", OMP_NUM_THREADS="1")
    cmd = [exe, "-L", str(s["L"]), "-H", str(s["C"]), "-heads", str(s["heads"]), "-seq", str(s["T"]), "-V", str(s["V"]),
           "-vpad", str(COUNT_VPAD), "-mb", str(s["B"]), "-gb", str(s["B"] * micro), "-ramp", "off", "-steps", str(steps),
           "-i", shard, "-j", shard, "-val-every", "0", "-warmup", "1000", "-tokens", "1e6", "-log", logf]
    r = subprocess.run(cmd, env=env, capture_output=True, text=True)
    if r.returncode != 0:
        if os.path.exists(tsv): os.remove(tsv)
        sys.exit("costmodel: %s failed (rc %d):\n%s" % (" ".join(cmd), r.returncode, r.stderr[-2000:]))
    m = re.search(r"local params\s*\|\s*(\d+)", r.stdout)
    syncs = []
    for line in open(logf):
        d = json.loads(line)
        if d.get("type") == "train": syncs.append(int(d.get("host_syncs", -1)))
    if m is None or len(syncs) != steps or min(syncs) < 0:
        sys.exit("costmodel: %s: no 'local params' line or no host_syncs per step in its log (%s)" % (" ".join(cmd), syncs))
    with open(meta, "w") as f: json.dump(dict(params=int(m.group(1)), host_syncs=syncs), f)
    return parse(tsv, meta)


def parse(tsv, meta=None):
    kern, gemm = {}, {}
    for line in open(tsv):
        f = line.rstrip("\n").split("\t")
        if f[0] == "kernel": kern[f[1]] = np.array([int(x) for x in f[2:8]], dtype=np.float64)
        elif f[0] == "gemm": gemm[tuple(int(x) for x in f[1:7])] = int(f[7])
    return kern, gemm, (json.load(open(meta)) if meta else {})


def sub(a, b, wa=1.0, wb=1.0):
    """wa*a - wb*b for count dicts (kernels: arrays, gemms: ints); entries <= 0 dropped."""
    out = {}
    for n in set(a) | set(b):
        z = 0 * next(iter(a.values())) if a else 0
        v = wa * a.get(n, z) - wb * b.get(n, z)
        if np.any(np.asarray(v) > 0): out[n] = v
    return out


def one_step(exe, s, work, micro=1):
    """(kernels, gemms, meta) of one step: the second of a 2-step run, counted alone (the first holds
    the first-use work: cuBLASLt's plans, the loader's first batch)."""
    kern, gemm, m = count(exe, s, 2, work, micro)
    return {n: v for n, v in kern.items() if v[0] > 0}, gemm, dict(params=m["params"], host_syncs=m["host_syncs"][1])


def nnls_small(A_, y):
    # least squares restricted to non-negative coefficients (A_ has at most 3 columns)
    best = None
    for r in range(1, A_.shape[1] + 1):
        for cols in itertools.combinations(range(A_.shape[1]), r):
            x, *_ = np.linalg.lstsq(A_[:, cols], y, rcond=None)
            if np.any(x < 0): continue
            full = np.zeros(A_.shape[1]); full[list(cols)] = x
            err = np.max(np.abs(A_ @ full - y) / np.maximum(y, 1))
            if best is None or err < best[1]: best = (full, err)
    return best


def fit(shapes, ys, tol=0.03):
    """Smallest set (<= 3) of TERMS whose non-negative combination matches every y."""
    if np.all(np.asarray(ys) == 0): return {}, 0.0
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
    tab = {}
    for sym, val in (("BT", BT), ("C", C), ("3C", 3 * C), ("4C", 4 * C), ("V", V), ("V", ldl), ("Vp", vp(s))):
        if val in tab and tab[val] != sym:
            sys.exit("costmodel: at shape %s the GEMM dimensions %s and %s are both %d: change the counted shapes" % (s, tab[val], sym, val))
        tab[val] = sym
    return tab


def sym_value(sym, s):
    return {"BT": s["B"] * s["T"], "C": s["C"], "3C": 3 * s["C"], "4C": 4 * s["C"], "V": s["V"], "Vp": vp(s)}[sym]


# ------------------------------------------------------------------------------------------
# the costing rules (pure functions of the assumptions; the self-test checks them by hand)

def a(name, case):
    """An assumption's value in a case: "slow", "mid", "fast", or a dict of some values (the rest mid)."""
    if isinstance(case, dict): return case.get(name, A[name][1])
    return A[name][CASES[case]]


def wave_eff(m, n, tm, tn, sms=SMS["H100"]):
    """(tiles, waves, efficiency) of an m x n output in tm x tn tiles over `sms` SMs."""
    tiles = math.ceil(m / tm) * math.ceil(n / tn)
    waves = math.ceil(tiles / sms)
    return tiles, waves, tiles / (waves * sms)


def choose_tile(m, n, case="mid", gpu="H100"):
    """The tile cuBLASLt is assumed to pick: the best wave-quantized rate of TILES."""
    best = None
    for tm, tn in TILES:
        tiles, waves, w = wave_eff(m, n, tm, tn, SMS[gpu])
        e = w * (1.0 if tm * tn >= 128 * 256 else a("TILE_EFF_128", case))
        if best is None or e > best[0] + 1e-12: best = (e, "%dx%d" % (tm, tn), tiles, waves, w)
    return best


def epilogue_bytes(m, n, dbytes, epi):
    """Bytes an epilogue moves beyond a plain bf16 D write (column-major m x n D; m = OC for the
    forward and input-gradient GEMMs, n = OC for the weight gradients)."""
    extra = 0.0
    if dbytes == 4: extra += 6.0 * m * n        # beta = 1: read fp32 C (4) + write fp32 D (4) instead of bf16 (2)
    if epi == 4: extra += 2.0 * m                 # bias vector
    elif epi == 164: extra += 2.0 * m * n + 2.0 * m   # GELU aux (pre-activation) write
    elif epi == 208: extra += 2.0 * m * n + 4.0 * m   # GELU aux read, fp32 bias gradient
    elif epi == 512: extra += 4.0 * n             # fp32 bias gradient of B's columns
    elif epi != 1: extra += 2.0 * m * n           # unknown epilogue: costed as one aux pass
    return extra


def gemm_cost(m, n, k, dbytes, epi, gpu, case="mid"):
    """ms of one call, and its details."""
    flops = 2.0 * m * n * k
    eff, tile, tiles, waves, w = choose_tile(m, n, case, gpu)
    K0 = a("K0", case)
    keff = min(1.0, (k / (k + K0)) / (K_REF / (K_REF + K0)))
    rate = PEAK_TFLOPS[gpu] * 1e12 * a("GEMM_SUSTAINED", case) * eff * keff
    if epi in FUSED_EPIS or epi not in EPI_NAMES: rate *= a("FUSED_EPI_RATE", case)
    bw = HBM_TBS[gpu] * 1e12 * a("HBM_EFF", case)
    t_c = flops / rate
    t_io = (2.0 * (m * k + k * n) + 2.0 * m * n) / bw   # operands once: matters only for tiny GEMMs
    t_e = a("EPI_EXPOSED", case) * epilogue_bytes(m, n, dbytes, epi) / bw
    t_f = a("GEMM_FIXED_US", case) * 1e-6
    t = max(t_c, t_io) + t_e + t_f
    bound = "compute" if t_c >= max(t_io, t_e, t_f) else "memory" if max(t_io, t_e) >= t_f else "latency"
    return t * 1e3, dict(tile=tile, waves=waves, wave=w, keff=keff, tflops=flops / t / 1e12, bound=bound,
                         extra=epilogue_bytes(m, n, dbytes, epi), flops=flops)


def attn_flops(B, heads, T, hs, causal=True):
    """(forward, backward) FLOPs of one attention call: QK^T and PV, 2*T*T*hs each per head,
    halved when causal; the backward does 2.5x the forward's matmul work (5 matmuls vs 2)."""
    fwd = 4.0 * B * heads * T * T * hs * (0.5 if causal else 1.0)
    return fwd, 2.5 * fwd


def attn_rates(kind, case):
    """(forward, backward) TFLOP/s of causal FLOPs: cuDNN's fused kernels (the deterministic
    backward's math runs at the same rate; its dP workspace traffic is costed apart), or the own kernel."""
    if kind == "tc": return a("TC_FWD", case), a("TC_BWD", case)
    return a("ATTN_FWD", case), a("ATTN_BWD", case)


def dp_bytes(B, heads, T):
    """cuDNN's dP workspace of one deterministic backward: B x heads x T64 x T64 bf16, T rounded up
    to 64 (cuDNN 9.x on Hopper: dS goes there, a separate GEMM reads it for dQ); 537 MB at 1.3b, B 4."""
    t64 = math.ceil(T / 64) * 64
    return B * heads * t64 * t64 * 2.0


def mem_cost(byts, launches, gpu, case="mid"):
    t_bw = byts / (HBM_TBS[gpu] * 1e12 * a("HBM_EFF", case))
    t_f = launches * a("KERNEL_FIXED_US", case) * 1e-6
    return (t_bw + t_f) * 1e3, ("memory" if t_bw >= t_f else "latency")


def model_flops(s, gb, convention="paper", f=3):
    """Model FLOPs of one step of gb sequences: the paper's formula, or llm.c's (causal attention halved)."""
    L, H, T, V = s["L"], s["C"], s["T"], s["V"]
    att = T / (6.0 * H) if convention == "paper" else T / (12.0 * H)
    return 24.0 * f * gb * T * L * H * H * (1 + att + V / (16.0 * L * H))


# ------------------------------------------------------------------------------------------

def build(exe, work, log):
    shapes = [shape(**v) for v in VARY]
    for s in shapes:
        log("counting one step at L=%d B=%d T=%d C=%d heads=%d V=%d (Vp=%d)" % (s["L"], s["B"], s["T"], s["C"], s["heads"], s["V"], vp(s)))
    log("counting one step of two micro-batches at the base shape (per-step vs per-micro-batch work)")
    with concurrent.futures.ThreadPoolExecutor(2) as pool:  # two runs side by side
        runs = [pool.submit(one_step, exe, s, work) for s in shapes] + [pool.submit(one_step, exe, shapes[0], work, 2)]
        counted = [r.result() for r in runs[:-1]]
        k2, g2, m2 = runs[-1].result()
    kb, gb_, mb_ = counted[0]
    kernels = sorted(set().union(*[set(c[0]) for c in counted]) | set(k2))
    mem, attn = {}, {}
    z = np.zeros(6)
    for kname in kernels:
        ys = np.array([c[0].get(kname, z)[1] + c[0].get(kname, z)[2] for c in counted])
        ls = np.array([c[0].get(kname, z)[0] for c in counted])
        is_attn = kernel_class(kname) == "attention"  # costed by its FLOPs: its bytes need no size model
        mb, eb = ({}, 0.0) if is_attn else fit(shapes, ys)
        ml, el = fit(shapes, ls, tol=1e-9)
        if mb is None or ml is None: sys.exit("costmodel: no size model fits kernel %s (bytes %s, launches %s)" % (kname, ys, ls))
        x1, x2 = kb.get(kname, z), k2.get(kname, z)
        # per-micro-batch part = (2 micro) - (1 micro); the rest is once per step
        def step_frac(v1, v2):
            if v1 <= 0: return 0.0
            fr = min(1.0, max(0.0, (2.0 * v1 - v2) / v1))
            return 0.0 if fr < 0.02 else 1.0 if fr > 0.98 else fr
        fb = step_frac(x1[1] + x1[2], x2[1] + x2[2])
        fl = step_frac(x1[0], x2[0])
        sec = sum(c[0][kname][4] for c in counted if kname in c[0])
        mins = sum(c[0][kname][5] for c in counted if kname in c[0])
        entry = dict(bytes=mb, launches=ml, fit_err=eb, sect_ratio=(sec / mins if mins else 1.0), step_frac=fb, step_frac_l=fl,
                     cls=kernel_class(kname))
        (attn if entry["cls"] == "attention" else mem)[kname] = entry
    # GEMMs: symbolic shapes, identical at every counted shape up to a count linear in L
    def symbolic(s, g):
        tab = gemm_symbols(s)
        d = {}
        for (m, n, k, ab, db, epi), c in g.items():
            for v in (m, n, k):
                if v not in tab: sys.exit("costmodel: GEMM m=%d n=%d k=%d at shape %s: dimension %d is none of %s" % (m, n, k, s, v, sorted(set(tab.values()))))
            key = (tab[m], tab[n], tab[k], db, epi)
            d[key] = d.get(key, 0) + c
        return d
    gsym = [symbolic(s, c[1]) for s, c in zip(shapes, counted)]
    g2sym = symbolic(shapes[0], g2)
    gemms = {}
    for key in sorted(set().union(*gsym) | set(g2sym)):
        cs = np.array([d.get(key, 0) for d in gsym], dtype=np.float64)
        ml, _ = fit(shapes, cs, tol=1e-9)
        if ml is None: sys.exit("costmodel: GEMM %s count is not linear in the shape: %s" % (key, cs))
        c1, c2 = gsym[0].get(key, 0), g2sym.get(key, 0)
        fr = 0.0 if c1 == 0 else min(1.0, max(0.0, (2.0 * c1 - c2) / c1))
        gemms[key] = dict(count=ml, step_frac=fr)
    params, perr = fit(shapes, np.array([c[2]["params"] for c in counted], dtype=np.float64))
    if params is None: sys.exit("costmodel: no size model fits the parameter count")
    h1, h2 = counted[0][2]["host_syncs"], m2["host_syncs"]
    syncs = dict(per_micro=h2 - h1, per_step=2 * h1 - h2)
    return dict(mem=mem, attn=attn, gemms=gemms, params=params, syncs=syncs, shapes=shapes, counted=counted)


def split(total, frac, micro):
    """A micro=1 count at the target scaled to `micro` micro-batches: its per-step part once."""
    return total * (frac + (1.0 - frac) * micro)


GEMM_ROLES = {  # labels only (a GEMM missing here is costed the same way, without a label)
    ("3C", "BT", "C", 2, 4): "QKV fwd", ("C", "BT", "C", 2, 4): "attn proj fwd", ("4C", "BT", "C", 2, 164): "fc1 fwd + GeLU",
    ("4C", "BT", "C", 2, 4): "fc1 fwd (unfused GeLU)", ("C", "BT", "4C", 2, 4): "fc2 fwd + bias", ("V", "BT", "C", 2, 1): "LM head fwd",
    ("Vp", "BT", "C", 2, 1): "LM head fwd (padded)", ("C", "BT", "V", 2, 1): "LM head dinp", ("C", "BT", "Vp", 2, 1): "LM head dinp (padded)",
    ("C", "BT", "3C", 2, 1): "QKV dinp", ("C", "BT", "C", 2, 1): "attn proj fwd + attn proj dinp", ("4C", "BT", "C", 2, 208): "fc2 dinp + dGeLU + fc1 dbias",
    ("4C", "BT", "C", 2, 1): "fc2 dinp (unfused dGeLU)", ("C", "BT", "4C", 2, 1): "fc2 fwd + fc1 dinp", ("C", "4C", "BT", 4, 1): "fc1 dW (its db from DGELU_BGRAD)",
    ("C", "3C", "BT", 4, 512): "QKV dW + db", ("C", "C", "BT", 4, 512): "attn proj dW + db", ("C", "4C", "BT", 4, 512): "fc1 dW + db",
    ("4C", "C", "BT", 4, 512): "fc2 dW + db", ("C", "V", "BT", 4, 1): "wte dW (LM head)", ("C", "Vp", "BT", 4, 1): "wte dW (LM head, padded)",
}


def gemm_label(key):
    a_, b_, c_, db, epi = key
    return "gemm m=%s n=%s k=%s%s%s" % (a_, b_, c_, " fp32 out beta=1" if db == 4 else "", EPI_NAMES.get(epi, " epilogue %d (unknown)" % epi)), GEMM_ROLES.get(key, "")


def predict(M, s, gpu, micro, case="mid", attention="cudnn-det"):
    """Rows (ms, name, class, kind, bytes, flops, launches, bound, note) and totals of one step."""
    rows = []
    for kname, m in M["mem"].items():
        byts = split(evaluate(m["bytes"], s), m["step_frac"], micro)
        launches = split(evaluate(m["launches"], s), m["step_frac_l"], micro)
        t, bound = mem_cost(byts, launches, gpu, case)
        note = "once per step" if m["step_frac"] == 1.0 else "per micro-batch" if m["step_frac"] == 0.0 else "%.0f%% per step" % (100 * m["step_frac"])
        rows.append(dict(ms=t, name=kname, cls=m["cls"], kind="kernel", bytes=byts, flops=0.0, launches=launches, bound=bound, note=note))
    for key, g in M["gemms"].items():
        a_, b_, c_, db, epi = key
        n = split(evaluate(g["count"], s), g["step_frac"], micro)
        m_, n_, k_ = sym_value(a_, s), sym_value(b_, s), sym_value(c_, s)
        t1, d = gemm_cost(m_, n_, k_, db, epi, gpu, case)
        name, role = gemm_label(key)
        note = "%s; tile %s, %d waves (%.1f%%), k-eff %.3f, %.0f TFLOP/s" % (role, d["tile"], d["waves"], 100 * d["wave"], d["keff"], d["tflops"])
        rows.append(dict(ms=t1 * n, name=name, cls="gemm", kind="gemm", bytes=d["extra"] * n, flops=d["flops"] * n, launches=n,
                         bound=d["bound"], note=note.lstrip("; ")))
    hs = s["C"] // s["heads"]
    fwd, bwd = attn_flops(s["B"], s["heads"], s["T"], hs, causal=True)
    rf, rb = attn_rates(attention, case)
    nl = s["L"] * micro
    alaunch = sum(split(evaluate(m["launches"], s), m["step_frac_l"], micro) for m in M["attn"].values())
    lbl = {"cudnn-det": "cuDNN, deterministic backward", "cudnn-nondet": "cuDNN, non-deterministic backward", "tc": "own tensor-core kernel"}[attention]
    rows.append(dict(ms=fwd * nl / (rf * 1e12) * 1e3, name="attention forward (%s)" % lbl.split(",")[0], cls="attention", kind="attention",
                     bytes=0.0, flops=fwd * nl, launches=nl, bound="compute", note="causal, %.0f TFLOP/s" % rf))
    # the deterministic backward's dP workspace: written by the dK/dV kernel, read by the dQ GEMM
    dpb = a("ATTN_DP_PASSES", case) * dp_bytes(s["B"], s["heads"], s["T"]) * nl if attention == "cudnn-det" else 0.0
    t_math = bwd * nl / (rb * 1e12)
    t_dp = dpb / (HBM_TBS[gpu] * 1e12 * a("HBM_EFF", case))
    note = "causal, %.0f TFLOP/s" % rb + (" + dP workspace %.2f GB/call x %.1f passes at HBM rate" % (
        dp_bytes(s["B"], s["heads"], s["T"]) / 1e9, a("ATTN_DP_PASSES", case)) if dpb else "")
    rows.append(dict(ms=(t_math + t_dp) * 1e3, name="attention backward (%s)" % lbl, cls="attention", kind="attention",
                     bytes=dpb, flops=bwd * nl, launches=max(alaunch - nl, nl), bound="compute" if t_math >= t_dp else "memory",
                     note=note))
    kernels_ms = sum(r["ms"] for r in rows)
    launches = sum(r["launches"] for r in rows)
    # not kernels: the gradient memset, gaps, host waits, copies
    bw = HBM_TBS[gpu] * 1e12 * a("HBM_EFF", case)
    params = evaluate(M["params"], s)
    extra = []
    extra.append(dict(ms=4.0 * params / bw * 1e3, name="memset of the fp32 gradients (cudaMemsetAsync, not a kernel)", cls="(memset)",
                      kind="other", bytes=4.0 * params, flops=0.0, launches=1, bound="memory", note="4 bytes x %.4g parameters" % params))
    extra.append(dict(ms=launches * a("LAUNCH_GAP_US", case) * 1e-3, name="gaps between back-to-back kernels", cls="(gaps)", kind="other",
                      bytes=0.0, flops=0.0, launches=0, bound="latency", note="%.0f launches x %.1f us" % (launches, a("LAUNCH_GAP_US", case))))
    sy = M["syncs"]
    drains = sy["per_step"]
    guards = sy["per_micro"] * micro
    extra.append(dict(ms=(drains * a("DRAIN_US", case) + guards * a("GUARD_US", case)) * 1e-3, name="host waits (host_syncs)", cls="(host)",
                      kind="other", bytes=0.0, flops=0.0, launches=0, bound="latency",
                      note="%d draining per step x %.0f us + %d slot guards x %.0f us" % (drains, a("DRAIN_US", case), guards, a("GUARD_US", case))))
    BT = s["B"] * s["T"]
    cbytes = micro * (4.0 * BT * 2 + 4.0 * (2 * min(BT, s["V"]) + 1 + BT)) + 24.0
    ncopies = micro * COUNTED["H2D_COPIES"] + COUNTED["D2H_COPIES"]
    extra.append(dict(ms=(ncopies * a("COPY_US", case) * 1e-6 + cbytes / (a("PCIE_GBS", case) * 1e9)) * 1e3, name="token uploads and stats reads",
                      cls="(copies)", kind="other", bytes=cbytes, flops=0.0, launches=0, bound="latency", note="%d copies" % ncopies))
    host_ms = launches * a("HOST_LAUNCH_US", case) * 1e-3
    gpu_ms = kernels_ms + sum(r["ms"] for r in extra)
    if host_ms > gpu_ms:
        extra.append(dict(ms=host_ms - gpu_ms, name="host-bound: the host issues launches slower than the GPU runs them", cls="(host)",
                          kind="other", bytes=0.0, flops=0.0, launches=0, bound="latency", note="%.0f launches x %.1f us" % (launches, a("HOST_LAUNCH_US", case))))
    rows.sort(key=lambda r: -r["ms"])
    total = kernels_ms + sum(r["ms"] for r in extra)
    gb = s["B"] * micro
    mfu = {c: model_flops(s, gb, c) / (total * 1e-3) / (PEAK_TFLOPS[gpu] * 1e12) for c in ("paper", "llmc")}
    return dict(rows=rows, extra=extra, kernels_ms=kernels_ms, ms=total, mfu=mfu, host_ms=host_ms, launches=launches)


def pred_classes(P):
    """Predicted ms per step by kernel class (the classes dev/cuda/kernel_times.py measures): kernels only."""
    out = {}
    for r in P["rows"]: out[r["cls"]] = out.get(r["cls"], 0.0) + r["ms"]
    return out


def fmt_bytes(b):
    return "-" if b <= 0 else "%.2f GB" % (b / 1e9) if b >= 1e8 else "%.1f MB" % (b / 1e6) if b >= 1e5 else "%.0f kB" % (b / 1e3)


def report(M, target, micro, log, attention="cudnn-det", markdown=False):
    log("PREDICTION (cost model, not a measurement): %s micro-batch %d x %d per step, T=%d, attention %s" % (
        "1.3b" if target["L"] == TARGET["L"] and target["C"] == TARGET["C"] else "target", target["B"], micro, target["T"], attention))
    res = {}
    gb = target["B"] * micro
    for gpu in ("H100", "H200"):
        P = {c: predict(M, target, gpu, micro, c, attention) for c in CASES}
        res[gpu] = P
        mid, lo, hi = P["mid"], P["slow"], P["fast"]
        log("  %s: predicted %.1f ms/step (range %.1f-%.1f), %.0f tokens/s; kernels %.1f ms, not kernels %.1f ms" % (
            gpu, mid["ms"], hi["ms"], lo["ms"], gb * target["T"] / (mid["ms"] * 1e-3), mid["kernels_ms"], mid["ms"] - mid["kernels_ms"]))
        for c, lbl in (("paper", "paper's model FLOPs (f=3, full attention)"), ("llmc", "llm.c convention (causal attention halved)")):
            log("      MFU %-44s %.1f%% (range %.1f-%.1f%%) of %.0f TFLOP/s" % (lbl, 100 * mid["mfu"][c], 100 * lo["mfu"][c], 100 * hi["mfu"][c], PEAK_TFLOPS[gpu]))
        log("  every kernel on %s (mid case), then what is not a kernel:" % gpu)
        for r in mid["rows"] + mid["extra"]:
            log("    %8.3f ms  %5.1f%%  %-8s %s [%s; %s; %s]" % (r["ms"], 100 * r["ms"] / mid["ms"], r["bound"], r["name"],
                r["note"], "bytes " + fmt_bytes(r["bytes"]), "%.1f TFLOP" % (r["flops"] / 1e12) if r["flops"] else "no FLOPs"))
    if markdown:  # one table, both GPUs (mid case), for doc/cuda_speed.md
        P1, P2 = res["H100"]["mid"], res["H200"]["mid"]
        by = {r["name"]: r for r in P2["rows"] + P2["extra"]}
        print("\n| kernel (what) | launches/step | bytes/step | FLOPs/step | H100 ms | H200 ms | bound (H100) |")
        print("|---|---:|---:|---:|---:|---:|---|")
        for r in P1["rows"] + P1["extra"]:
            r2 = by.get(r["name"], dict(ms=0.0))
            what = r["name"] + (" (%s)" % r["note"].split("; tile")[0] if r["kind"] == "gemm" and r["note"].split("; tile")[0] and not r["note"].startswith("tile") else "")
            if r["kind"] == "gemm": what += "; tile %s" % r["note"].split("tile ")[1].split(",")[0]
            print("| %s | %s | %s | %s | %.2f | %.2f | %s |" % (what.replace("|", "/"), "%.0f" % r["launches"] if r["launches"] else "-",
                  fmt_bytes(r["bytes"]), "%.1f T" % (r["flops"] / 1e12) if r["flops"] else "-", r["ms"], r2["ms"], r["bound"]))
        print("| **step** | | | | **%.1f** (%.1f-%.1f) | **%.1f** (%.1f-%.1f) | |\n" % (
            P1["ms"], res["H100"]["fast"]["ms"], res["H100"]["slow"]["ms"], P2["ms"], res["H200"]["fast"]["ms"], res["H200"]["slow"]["ms"]))
    # what would move it: each assumption alone at its slow and fast value, the rest mid; the
    # expected range combines those moves in quadrature (each slow/fast pair read as that
    # factor's plausible extremes, the factors independent), narrower than the corners
    for gpu in ("H100", "H200"):
        sens, lo_ms, hi_ms = sensitivity(M, target, gpu, micro, attention)
        mid = res[gpu]["mid"]
        res[gpu]["expected"] = (lo_ms, hi_ms)
        mfu = lambda ms: model_flops(target, gb, "paper") / (ms * 1e-3) / (PEAK_TFLOPS[gpu] * 1e12)
        log("  %s expected range (one assumption at a time, combined in quadrature): %.1f-%.1f ms/step, MFU paper %.1f-%.1f%% "
            "(mid %.1f%%); what moves it most (ms at slow / fast, MFU points):" % (gpu, lo_ms, hi_ms, 100 * mfu(hi_ms), 100 * mfu(lo_ms),
                                                                                   100 * mid["mfu"]["paper"]))
        for name, t_slow, t_fast in sens[:8]:
            log("    %-16s %-22s %+7.1f / %+6.1f ms   %+5.1f / %+4.1f points" % (name, "%g / %g / %g" % A[name], t_slow - mid["ms"],
                t_fast - mid["ms"], 100 * (mfu(t_slow) - mid["mfu"]["paper"]), 100 * (mfu(t_fast) - mid["mfu"]["paper"])))
    # the alternatives: the other attention paths
    for alt in ("cudnn-nondet", "tc", "cudnn-det"):
        if alt == attention: continue
        for gpu in ("H100", "H200"):
            P = {c: predict(M, target, gpu, micro, c, alt) for c in CASES}
            log("  alternative attention %-12s on %s: %.1f ms/step (%.1f-%.1f), MFU paper %.1f%% (%.1f-%.1f), llm.c %.1f%% (%.1f-%.1f)" % (
                alt, gpu, P["mid"]["ms"], P["fast"]["ms"], P["slow"]["ms"], 100 * P["mid"]["mfu"]["paper"], 100 * P["slow"]["mfu"]["paper"],
                100 * P["fast"]["mfu"]["paper"], 100 * P["mid"]["mfu"]["llmc"], 100 * P["slow"]["mfu"]["llmc"], 100 * P["fast"]["mfu"]["llmc"]))
    bad = [(k, m["sect_ratio"]) for k, m in M["mem"].items() if m["sect_ratio"] > 2.0]
    log("  kernels touching > 2x the minimum sectors per warp request: %s" % (
        ", ".join("%s (%.1fx)" % b for b in bad) if bad else "none"))
    return res, bad


def sensitivity(M, target, gpu, micro, attention):
    """[(name, ms with it slow, ms with it fast)] sorted by the spread, and the expected range (ms)."""
    mid = predict(M, target, gpu, micro, "mid", attention)["ms"]
    out = []
    for name in A:
        if name.startswith("TC_") != (attention == "tc"): continue  # the other attention path's rates
        t = [predict(M, target, gpu, micro, {name: A[name][i]}, attention)["ms"] for i in (0, 2)]
        out.append((name, t[0], t[1]))
    out.sort(key=lambda x: -abs(x[1] - x[2]))
    up = math.sqrt(sum(max(0.0, x - mid) ** 2 + max(0.0, y - mid) ** 2 for _, x, y in out))
    down = math.sqrt(sum(max(0.0, mid - x) ** 2 + max(0.0, mid - y) ** 2 for _, x, y in out))
    return out, mid - down, mid + up


def write_pred_tsv(path, res, target, micro, attention):
    with open(path, "w") as f:
        f.write("# PREDICTION of the cost model (dev/cuda/costmodel.py), not a measurement: ms per step by kernel class\n")
        f.write("# generated by make cuda-costmodel (commit it with the change it predicts): 1.3b, T=%d, micro-batch %d x %d per step, attention %s\n" % (
            target["T"], target["B"], micro, attention))
        for gpu, P in res.items():
            mid, lo, hi = P["mid"], P["slow"], P["fast"]
            e_lo, e_hi = P["expected"]
            f.write("# %s: kernels %.1f ms (range %.1f-%.1f); step %.1f ms (%.1f-%.1f; expected %.1f-%.1f) with what ncu does not time (gradient memset, gaps, "
                    "host waits, copies: %.2f ms); MFU paper %.1f%% (%.1f-%.1f; expected %.1f-%.1f), llm.c %.1f%% (%.1f-%.1f)\n" % (
                        gpu, mid["kernels_ms"], hi["kernels_ms"], lo["kernels_ms"], mid["ms"], hi["ms"], lo["ms"], e_lo, e_hi, mid["ms"] - mid["kernels_ms"],
                        100 * mid["mfu"]["paper"], 100 * lo["mfu"]["paper"], 100 * hi["mfu"]["paper"],
                        100 * mid["mfu"]["paper"] * mid["ms"] / e_hi, 100 * mid["mfu"]["paper"] * mid["ms"] / e_lo,
                        100 * mid["mfu"]["llmc"], 100 * lo["mfu"]["llmc"], 100 * hi["mfu"]["llmc"]))
        for gpu, P in res.items():
            for c, t in sorted(pred_classes(P["mid"]).items(), key=lambda x: -x[1]): f.write("%s\t%s\t%.4f\n" % (gpu, c, t))


SYM = {"C": "C", "CT": "C", "C3T": "3C", "C4T": "4C", "VT": "Vp", "BT": "BT"}  # gpu_step.h's symbols at TP 1


def table_gemms(s):
    """The GEMMs gpu_step.h lists for one micro-batch at TP 1: {(m, n, k, bytes out, epilogue): count}."""
    out = {}
    for rows, n in ((LAYER_GEMMS, s["L"]), (HEAD_GEMMS, 1)):
        for _, m, n_, k, db, epi in rows:
            key = (SYM[m], SYM[n_], SYM[k], db, epi)
            out[key] = out.get(key, 0) + n
    return out


def table_counts(s, params):
    """What gpu_step.h's COUNTED rows say one GPU does (TP 1, one stage): bytes of the memory-bound
    kernels per micro-batch and per step (the gradient memset included), launches per micro-batch
    and per step (kernels, GEMMs and attention)."""
    N, L = COUNTED, s["L"]
    btc = s["B"] * s["T"] * s["C"]
    micro_b = (L * (N["LAYER_FWD_BYTES"] + N["LAYER_BWD_BYTES"]) * btc + L * N["BIAS_ACC_BYTES"] * 9 * s["C"] +
               (N["FIRST_FWD_BYTES"] + N["FIRST_BWD_BYTES"] + N["LAST_BWD_BYTES"]) * btc + N["HEAD_BYTES"] * s["B"] * s["T"] * vp(s))
    micro_l = (L * (len(LAYER_GEMMS) + N["ATTN_FWD_LAUNCHES"] + N["ATTN_BWD_LAUNCHES"] + N["LAYER_FWD_LAUNCHES"] + N["LAYER_BWD_LAUNCHES"]) +
               len(HEAD_GEMMS) + N["FIRST_FWD_LAUNCHES"] + N["FIRST_BWD_LAUNCHES"] + N["LAST_FWD_LAUNCHES"] + N["LAST_BWD_LAUNCHES"])
    return micro_b, N["PARAM_STEP_BYTES"] * params, micro_l, N["STEP_LAUNCHES"]


def model_counts(M, s):
    """The same four from the counted model (fitted sizes) at shape s."""
    micro_b = step_b = micro_l = step_l = 0.0
    for m in M["mem"].values():
        b, n = evaluate(m["bytes"], s), evaluate(m["launches"], s)
        micro_b += b * (1 - m["step_frac"]); step_b += b * m["step_frac"]
        micro_l += n * (1 - m["step_frac_l"]); step_l += n * m["step_frac_l"]
    micro_l += sum(evaluate(m["launches"], s) for m in M["attn"].values()) + sum(evaluate(g["count"], s) for g in M["gemms"].values())
    return micro_b, step_b + 4.0 * evaluate(M["params"], s), micro_l, step_l


def selftest_counted(M, held, kern, g, meta, check):
    """gpu_step.h's COUNTED rows and GEMM tables (what the planner uses) against the counts."""
    t = TARGET
    want, got = table_gemms(t), {k: evaluate(v["count"], t) for k, v in M["gemms"].items()}
    check(set(want) == set(got) and all(abs(want[k] - got[k]) < 1e-6 for k in want),
          "gpu_step.h's GEMM tables are the counted GEMMs (per micro-batch at 1.3b): %s" % (
              "same" if set(want) == set(got) else "table only %s, counted only %s" % (sorted(set(want) - set(got)), sorted(set(got) - set(want)))))
    tb = table_counts(t, evaluate(M["params"], t))
    mb = model_counts(M, t)
    for i, what, tol in ((0, "bytes per micro-batch", 0.03), (1, "bytes per step", 0.03)):
        e = abs(tb[i] - mb[i]) / mb[i]
        check(e <= tol, "gpu_step.h's counted rows at 1.3b, memory-bound %s: %.4g against the counted model's %.4g (%.1f%%, tolerance %.0f%%)" % (
            what, tb[i], mb[i], 100 * e, 100 * tol))
    check(tb[2] == round(mb[2]) and tb[3] == round(mb[3]), "gpu_step.h's launches at 1.3b: %d per micro-batch + %d per step, counted %.0f + %.0f" % (
        tb[2], tb[3], mb[2], mb[3]))
    check(COUNTED["DRAINS"] == M["syncs"]["per_step"] and COUNTED["GUARDS"] == M["syncs"]["per_micro"],
          "gpu_step.h's host waits: %d draining per step + %d guard per micro-batch, the trainer's log %d + %d" % (
              COUNTED["DRAINS"], COUNTED["GUARDS"], M["syncs"]["per_step"], M["syncs"]["per_micro"]))
    # against the held-out shape's fresh count (one step of one micro-batch; the memset is no kernel)
    hb = table_counts(held, meta["params"])
    cb = sum(v[1] + v[2] for k, v in kern.items() if kernel_class(k) != "attention")
    e = abs(hb[0] + hb[1] - 4.0 * meta["params"] - cb) / cb
    check(e <= 0.05, "gpu_step.h's counted rows at the held-out shape: %.4g bytes, counted afresh %.4g (%.1f%%, tolerance 5%%)" % (
        hb[0] + hb[1] - 4.0 * meta["params"], cb, 100 * e))
    cl = sum(v[0] for v in kern.values()) + sum(g.values())
    check(hb[2] + hb[3] == cl, "gpu_step.h's launches at the held-out shape: %d, counted afresh %d" % (hb[2] + hb[3], cl))


def plan_step(planner, s, micro, gpu):
    """-plan's one-GPU step for shape s: {column: value} of its CSV row (seconds), or an error line."""
    with tempfile.TemporaryDirectory(prefix="costmodel_plan_") as td:
        path = os.path.join(td, "plan.csv")
        cmd = shlex.split(planner) + [
            "-L", str(s["L"]), "-H", str(s["C"]), "-heads", str(s["heads"]), "-seq", str(s["T"]), "-V", str(s["V"]),
            "-vpad", str(s.get("vpad", 1024)), "-mb", str(s["B"]), "-gb", str(s["B"] * micro), "-ramp", "off", "-tp", "1", "-pp", "1",
            "-dp", "1", "-recompute", "0", "-zero", "0", "-sp", "0", "-vpp", "1", "-cluster", gpu.lower(), "-nodes", "1",
            "-gpus-per-node", "1", "-plan-csv", path]
        try:
            r = subprocess.run(cmd, capture_output=True, text=True, timeout=60)
        except (OSError, subprocess.TimeoutExpired) as e:
            return "%s: %s (build it: make train_gpt)" % (" ".join(cmd), e)
        rows = [x for x in csv.DictReader(open(path, newline=""))] if os.path.exists(path) else []
        rows = [x for x in rows if x.get("iter_s")]
        if len(rows) != 1:
            return "%s gave %d timed rows (rc %d): %s" % (" ".join(cmd), len(rows), r.returncode, (r.stdout + r.stderr)[-400:])
        return {k: float(v) for k, v in rows[0].items() if k in ("iter_s", "t_gemm_s", "t_mem_s", "t_opt_s", "mfu")}


def selftest_planner(M, planner, check, log):
    """-plan's one-GPU step against this model's (mid case, cuDNN with the deterministic backward):
    within 5% for every PLAN_CONFIGS shape on H100 and H200, and their GEMMs + attention within 1%
    (the same table, the same rules, gpu_step.h's constants)."""
    log("-plan's one-GPU step (llmc/planner/planner.h with gpu_step.h) against this model's, mid case:")
    for what, s, micro in PLAN_CONFIGS:
        for gpu in ("H100", "H200"):
            P = predict(M, s, gpu, micro, "mid", "cudnn-det")
            q = plan_step(planner, s, micro, gpu)
            if isinstance(q, str):
                check(False, "-plan %s on %s: %s" % (what, gpu, q))
                continue
            comp = sum(r["ms"] for r in P["rows"] if r["kind"] in ("gemm", "attention"))
            e = q["iter_s"] * 1e3 / P["ms"] - 1
            ec = q["t_gemm_s"] * 1e3 / comp - 1
            check(abs(e) <= 0.05, "%s on %s: -plan %.1f ms/step (MFU %.1f%%), cost model %.1f ms (%.1f%%): %+.1f%% (tolerance 5%%)" % (
                what, gpu, q["iter_s"] * 1e3, 100 * q["mfu"], P["ms"], 100 * P["mfu"]["paper"], 100 * e))
            check(abs(ec) <= 0.01, "%s on %s: GEMMs + attention, -plan %.1f ms, cost model %.1f ms (%+.2f%%); the rest %.1f against %.1f ms" % (
                what, gpu, q["t_gemm_s"] * 1e3, comp, 100 * ec, (q["iter_s"] - q["t_gemm_s"]) * 1e3, P["ms"] - comp))


def selftest_formulas(check):
    """The costing rules on hand-computed cases (no counting needed)."""
    # wave quantization: 2048 x 8192 in 128x256 tiles = 16 x 32 = 512 tiles, 4 waves of 132 SMs
    tiles, waves, w = wave_eff(2048, 8192, 128, 256)
    check(tiles == 512 and waves == 4 and abs(w - 512 / 528) < 1e-12, "wave quantization 2048x8192 / 128x256: 512 tiles, 4 waves, %.4f = 512/528 (got %d, %d, %.4f)" % (512 / 528, tiles, waves, w))
    # 2304 x 2304: 128x256 gives 18 x 9 = 162 tiles -> 2 waves (61.4%); 128x128 gives 324 -> 3 waves (81.8%) x 0.90 = 73.6%: 128x128 wins
    e, tile, tiles, waves, w = choose_tile(2304, 2304)
    check(tile == "128x128" and tiles == 324 and waves == 3 and abs(e - 324 / 396 * A["TILE_EFF_128"][1]) < 1e-12,
          "tile choice 2304x2304: 128x128 (324 tiles, 3 waves, %.3f) beats 128x256 (162 tiles, 2 waves, 0.614): got %s %d %d %.3f" % (324 / 396 * 0.9, tile, tiles, waves, e))
    e, tile, _, _, _ = choose_tile(6144, 8192)
    check(tile == "128x256" and abs(e - 1536 / 1584) < 1e-12, "tile choice 6144x8192 (QKV at 1.3b): 128x256, 1536 tiles in 12 waves (%.4f): got %s %.4f" % (1536 / 1584, tile, e))
    # a large GEMM at k = K_REF on full waves runs at exactly GEMM_SUSTAINED x peak (minus the fixed cost)
    m_, n_, k_ = 128 * 12, 256 * 11, 8192   # 132 tiles: one full wave
    t, d = gemm_cost(m_, n_, k_, 2, 1, "H100")
    want = 2.0 * m_ * n_ * k_ / (PEAK_TFLOPS["H100"] * 1e12 * A["GEMM_SUSTAINED"][1]) * 1e3 + A["GEMM_FIXED_US"][1] * 1e-3
    check(abs(t - want) < 1e-12 and d["wave"] == 1.0, "one full wave at k=8192: %.6f ms = 2mnk / (%.2f x 989 TFLOP/s) + %.0f us (got %.6f)" % (want, A["GEMM_SUSTAINED"][1], A["GEMM_FIXED_US"][1], t))
    # fp32 weight gradient (beta = 1) pays C read + fp32 D write: 6 bytes per element more than bf16 out
    check(epilogue_bytes(100, 30, 4, 1) == 6.0 * 3000 and epilogue_bytes(100, 30, 2, 164) == 2.0 * 3000 + 200,
          "epilogue bytes: fp32 accumulate 6mn (%g), GELU aux 2mn + bias (%g)" % (epilogue_bytes(100, 30, 4, 1), epilogue_bytes(100, 30, 2, 164)))
    t32, _ = gemm_cost(2048, 6144, 8192, 4, 1, "H100")
    t16, _ = gemm_cost(2048, 6144, 8192, 2, 1, "H100")
    check(t32 > t16, "an fp32-accumulating weight gradient costs more than the same GEMM with bf16 out (%.4f > %.4f ms)" % (t32, t16))
    # causal halving: B=1, 1 head, T=4, hs=2: full 4*T^2*hs = 128 FLOPs forward, causal 64, backward 2.5x
    f_c, b_c = attn_flops(1, 1, 4, 2, causal=True)
    f_f, b_f = attn_flops(1, 1, 4, 2, causal=False)
    check(f_f == 128.0 and f_c == 64.0 and b_c == 160.0 and b_f == 320.0, "attention FLOPs T=4 hs=2: full 128 / causal 64 forward, backward 320 / 160 (got %g %g %g %g)" % (f_f, f_c, b_f, b_c))
    # cuDNN's dP workspace at 1.3b, micro-batch 4: 4 x 16 heads x 2048 x 2048 x 2 bytes = 512 MiB; T rounds up to 64
    check(dp_bytes(4, 16, 2048) == 536870912.0 and dp_bytes(1, 1, 65) == 128 * 128 * 2.0,
          "dP workspace: 4 x 16 x 2048^2 x 2 = 536870912 bytes (got %.0f); T = 65 pads to 128 (got %.0f)" % (dp_bytes(4, 16, 2048), dp_bytes(1, 1, 65)))
    # the two MFU conventions: B=1, s=12, L=1, H=2, V=32, f=3: 72*12*4 = 3456 x (1 + 1 + 1) = 10368
    # (paper); x (1 + 0.5 + 1) = 8640 (llm.c); at 1 s over a 20736 FLOP/s peak: 50% and 41.67%
    s = dict(L=1, B=1, T=12, C=2, heads=1, V=32)
    fp, fl = model_flops(s, 1, "paper"), model_flops(s, 1, "llmc")
    check(fp == 10368.0 and fl == 8640.0, "model FLOPs on the hand example: paper 10368, llm.c 8640 (got %g, %g)" % (fp, fl))
    check(abs(fp / 1.0 / 20736.0 - 0.5) < 1e-15 and abs(fl / 1.0 / 20736.0 - 8640 / 20736) < 1e-15, "MFU on the hand example at 1 s, 20736 FLOP/s: 50.0% and 41.67%")
    # the generic rule: any kernel name is costed by its bytes (1 GB at 80% of 3.35 TB/s + 1 launch)
    t, bound = mem_cost(1e9, 1, "H100")
    check(abs(t - (1e9 / (3.35e12 * 0.8) + 2e-6) * 1e3) < 1e-12 and bound == "memory", "memory rule: 1 GB on H100 = %.4f ms, memory-bound (got %.4f %s)" % ((1e9 / 2.68e12 + 2e-6) * 1e3, t, bound))
    t, bound = mem_cost(1e3, 1, "H100")
    check(bound == "latency", "a 1 kB kernel is latency-bound (%s)" % bound)
    check(kernel_class("made_up_new_kernel<4>") == "made_up_new_kernel", "an unknown kernel keeps its own class (memory rule)")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--exe", default="build/cuda-cost/train_gpt_cu")
    ap.add_argument("--out", default=None)
    ap.add_argument("--mb", type=int, default=4)
    ap.add_argument("--gb", type=int, default=16)
    ap.add_argument("--selftest", action="store_true")
    ap.add_argument("--pred-tsv", default=None)
    ap.add_argument("--markdown", action="store_true")
    ap.add_argument("--attention", default="cudnn-det", choices=("cudnn-det", "cudnn-nondet", "tc"))
    ap.add_argument("--planner", default="./train_gpt -plan",
                    help="the planner whose one-GPU step --selftest compares (default ./train_gpt -plan)")
    ap.add_argument("--attn-tflops", nargs=2, type=float, metavar=("FWD", "BWD"),
                    help="attention rate (all cases) instead of the assumed one of --attention")
    a_ = ap.parse_args()
    work = a_.out or tempfile.mkdtemp(prefix="costmodel_")
    os.makedirs(work, exist_ok=True)
    log = lambda m: print(m, flush=True)
    if a_.attn_tflops:
        key = {"tc": ("TC_FWD", "TC_BWD")}.get(a_.attention, ("ATTN_FWD", "ATTN_BWD"))
        A[key[0]] = (a_.attn_tflops[0],) * 3
        A[key[1]] = (a_.attn_tflops[1],) * 3
    log("assumptions (slow, mid, fast): " + "; ".join("%s %s" % (k, v) for k, v in A.items()))
    log("  GPUs (planner.h's presets): %s; tiles %s (gpu_step.h)" % ("; ".join("%s %.0f TFLOP/s bf16 dense, HBM %.2f TB/s, %d SMs" % (
        g, PEAK_TFLOPS[g], HBM_TBS[g], SMS[g]) for g in sorted(DEVICES)), ", ".join("%dx%d" % t for t in TILES)))
    npass = nfail = 0
    def check(ok, msg):
        nonlocal npass, nfail
        print(("ok   " if ok else "FAIL ") + msg)
        npass += bool(ok); nfail += not ok
    if a_.selftest: selftest_formulas(check)
    M = build(a_.exe, work, log)
    log("fitted size models (bytes per step; launches per step; share once per step, the rest per micro-batch):")
    for k, m in sorted(list(M["mem"].items()) + list(M["attn"].items())):
        log("  %-36s bytes %-40s launches %-14s fit %.2f%%  sectors/min %.2f  per-step %.0f%%%s" % (
            k, " + ".join("%.3g*%s" % (x, n) for n, x in m["bytes"].items()),
            " + ".join("%g*%s" % (x, n) for n, x in m["launches"].items()), 100 * m["fit_err"], m["sect_ratio"], 100 * m["step_frac"],
            "  (attention: costed by FLOPs)" if m["cls"] == "attention" else ""))
    log("  parameters: %s; host waits per step: %d + %d per micro-batch (from the trainer's log)" % (
        " + ".join("%.4g*%s" % (x, n) for n, x in M["params"].items()), M["syncs"]["per_step"], M["syncs"]["per_micro"]))
    micro = a_.gb // a_.mb
    target = dict(TARGET, B=a_.mb)
    res, bad = report(M, target, micro, log, a_.attention, a_.markdown)
    if a_.pred_tsv:
        write_pred_tsv(a_.pred_tsv, res, target, micro, a_.attention)
        log("per-class prediction written to %s (dev/gpu_check.sh prints it beside ncu's measurement)" % a_.pred_tsv)
    if not a_.selftest: return 0
    # held-out shape: the model's bytes and GEMM FLOPs against a fresh count
    s = HELD_OUT
    log("counting the held-out shape L=%d B=%d T=%d C=%d heads=%d V=%d" % (s["L"], s["B"], s["T"], s["C"], s["heads"], s["V"]))
    kern, g, meta = one_step(a_.exe, s, work)
    tot_want = tot_got = 0.0
    for kname, m in sorted(list(M["mem"].items()) + list(M["attn"].items())):
        got = kern.get(kname, np.zeros(6))
        if m["cls"] == "attention":
            check(abs(evaluate(m["launches"], s) - got[0]) < 1e-6, "held-out %s (attention, costed by FLOPs): predicted %g launches, counted %g" % (kname, evaluate(m["launches"], s), got[0]))
            continue
        want = evaluate(m["bytes"], s)
        e = abs(want - (got[1] + got[2])) / max(got[1] + got[2], 1)
        # a kernel of a few kB (sumsq_finish: one partial per block of a grid capped at GN_BLOCKS, a
        # min() no sum of size terms fits) takes no measurable time: 4 kB of slack at any size
        d = abs(want - (got[1] + got[2]))
        check(e <= 0.10 or d <= 4096, "held-out %s: predicted %.0f bytes, counted %.0f (%.1f%%, tolerance 10%% or 4 kB)" % (
            kname, want, got[1] + got[2], 100 * e))
        tot_want += want; tot_got += got[1] + got[2]
        check(abs(evaluate(m["launches"], s) - got[0]) < 1e-6, "held-out %s: predicted %g launches, counted %g" % (kname, evaluate(m["launches"], s), got[0]))
    check(set(kern) <= set(M["mem"]) | set(M["attn"]), "every kernel of the held-out step is in the model (%s)" % sorted(set(kern) - set(M["mem"]) - set(M["attn"])))
    e = abs(tot_want - tot_got) / tot_got
    check(e <= 0.05, "held-out memory traffic of all kernels: predicted %.4g bytes, counted %.4g (%.1f%%, tolerance 5%%)" % (tot_want, tot_got, 100 * e))
    e = abs(evaluate(M["params"], s) - meta["params"]) / meta["params"]
    check(e <= 0.01, "held-out parameter count: predicted %.0f, the trainer says %d (%.2f%%)" % (evaluate(M["params"], s), meta["params"], 100 * e))
    check(meta["host_syncs"] == M["syncs"]["per_step"] + M["syncs"]["per_micro"], "held-out host waits: %d = %d per step + %d per micro-batch" % (
        meta["host_syncs"], M["syncs"]["per_step"], M["syncs"]["per_micro"]))
    check(M["syncs"]["per_step"] == 2 and M["syncs"]["per_micro"] == 1, "host waits as train_gpt.cu documents: 2 per step + 1 per micro-batch (got %d + %d)" % (
        M["syncs"]["per_step"], M["syncs"]["per_micro"]))
    ada = [k for k, m in M["mem"].items() if m["cls"].startswith("adamw")]
    act = [k for k, m in M["mem"].items() if any("BT" in t for t in m["bytes"])]
    check(ada and all(M["mem"][k]["step_frac"] == 1.0 for k in ada), "counted split: AdamW runs once per step (%s)" % ada)
    check(act and all(M["mem"][k]["step_frac"] == 0.0 for k in act), "counted split: every kernel whose traffic grows with B*T runs per micro-batch (%d kernels: %s)" % (
        len(act), [k for k in act if M["mem"][k]["step_frac"] != 0.0]))
    check(all(g_["step_frac"] == 0.0 for g_ in M["gemms"].values()), "every GEMM runs per micro-batch")
    tab = gemm_symbols(s)
    flops_counted = sum(2.0 * m * n * k * c for (m, n, k, _, _, _), c in g.items())
    flops_model = sum(2.0 * sym_value(a2, s) * sym_value(b2, s) * sym_value(c2, s) * evaluate(gg["count"], s) for (a2, b2, c2, _, _), gg in M["gemms"].items())
    check(abs(flops_model - flops_counted) <= 1e-9 * flops_counted, "held-out GEMM FLOPs: model %.4g, counted %.4g" % (flops_model, flops_counted))
    check(all(m in tab and n in tab and k in tab for (m, n, k, _, _, _) in g), "held-out GEMM dimensions are all B*T, C, 3C, 4C, V or Vp")
    # the model's GEMM FLOPs at the target, from first principles: 24*B*T*C^2 per layer forward
    # (QKV 6, projection 2, fc1 8, fc2 8), the LM head 2*B*T*C*Vp (its three GEMMs run on the
    # padded vocabulary, whose rows are zero: aligned m and k); backward twice the forward
    t = target
    want = 3 * (24 * t["B"] * t["T"] * t["L"] * t["C"] ** 2 + 2 * t["B"] * t["T"] * t["C"] * vp(t))
    got = sum(2.0 * sym_value(a2, t) * sym_value(b2, t) * sym_value(c2, t) * evaluate(gg["count"], t) for (a2, b2, c2, _, _), gg in M["gemms"].items())
    check(abs(got - want) / want < 1e-9, "GEMM FLOPs at the target: %.6g vs 3 x (24 B T L C^2 + 2 B T C Vp) = %.6g" % (got, want))
    for gpu, P in res.items():
        mid = P["mid"]
        cls = pred_classes(mid)
        check(abs(sum(cls.values()) - mid["kernels_ms"]) <= 1e-9 * mid["ms"], "%s per-class prediction sums to the kernels' time: %.3f ms" % (gpu, sum(cls.values())))
        check(P["fast"]["ms"] <= mid["ms"] <= P["slow"]["ms"], "%s range is ordered: %.1f <= %.1f <= %.1f ms" % (gpu, P["fast"]["ms"], mid["ms"], P["slow"]["ms"]))
        check(mid["ms"] > mid["kernels_ms"], "%s step includes what is not a kernel (%.2f ms)" % (gpu, mid["ms"] - mid["kernels_ms"]))
        check(all(0 < P[c]["mfu"]["llmc"] < P[c]["mfu"]["paper"] < 1 for c in CASES), "%s MFU: 0 < llm.c (%.1f%%) < paper (%.1f%%) < 100%%" % (
            gpu, 100 * mid["mfu"]["llmc"], 100 * mid["mfu"]["paper"]))
        want_ratio = model_flops(target, t["B"] * micro, "llmc") / model_flops(target, t["B"] * micro, "paper")
        check(abs(mid["mfu"]["llmc"] / mid["mfu"]["paper"] - want_ratio) < 1e-12, "%s MFU ratio llm.c/paper = FLOP ratio %.4f" % (gpu, want_ratio))
    h1, h2 = res["H100"]["mid"], res["H200"]["mid"]
    check(h2["ms"] < h1["ms"], "H200 (more HBM bandwidth) predicted faster than H100: %.1f < %.1f ms" % (h2["ms"], h1["ms"]))
    # cuDNN's deterministic backward on cuDNN 9.x / Hopper (the dP-workspace path): its extra over the
    # non-deterministic backward is the workspace traffic, 96 calls x 537 MB x ATTN_DP_PASSES at HBM rate
    bd = [r for r in h1["rows"] if r["name"].startswith("attention backward")][0]
    bn = [r for r in predict(M, target, "H100", micro, "mid", "cudnn-nondet")["rows"] if r["name"].startswith("attention backward")][0]
    want = t["L"] * micro * dp_bytes(t["B"], t["heads"], t["T"]) * A["ATTN_DP_PASSES"][1] / (HBM_TBS["H100"] * 1e12 * A["HBM_EFF"][1]) * 1e3
    check(abs(bd["ms"] - bn["ms"] - want) < 1e-9 * want, "deterministic backward = non-deterministic + dP traffic: %.2f ms = %d x %.0f MB x %.1f at %.0f GB/s" % (
        bd["ms"] - bn["ms"], t["L"] * micro, dp_bytes(t["B"], t["heads"], t["T"]) / 1e6, A["ATTN_DP_PASSES"][1], HBM_TBS["H100"] * 1e3 * A["HBM_EFF"][1]))
    for gpu in ("H100", "H200"):
        lo_ms, hi_ms = res[gpu]["expected"]
        P = res[gpu]
        check(P["fast"]["ms"] <= lo_ms <= P["mid"]["ms"] <= hi_ms <= P["slow"]["ms"], "%s expected range %.1f-%.1f ms lies inside the corners %.1f-%.1f" % (
            gpu, lo_ms, hi_ms, P["fast"]["ms"], P["slow"]["ms"]))
    selftest_counted(M, s, kern, g, meta, check)
    selftest_planner(M, a_.planner, check, log)
    print("%d passed, %d failed" % (npass, nfail))
    return 0 if nfail == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
