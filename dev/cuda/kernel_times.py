#!/usr/bin/env python3
"""dev/cuda/kernel_times.py: measured per-kernel GPU time beside the cost model's prediction.

dev/gpu_check.sh (stage `profile`) runs train_gpt_cu twice under Nsight Compute, for 1 and
for 2 training steps, recording only each kernel's duration (gpu__time_duration.sum, clocks
left alone). The difference of the two runs is one step's kernels: start-up, weight upload
and cuDNN graph building cancel, as in the cost model (dev/cuda/costmodel.py counts the same
difference under the emulation). Kernels are grouped into classes both sides can name:

  gemm        every cuBLASLt kernel (gemm/nvjet/xmma/cutlass/sm90_... names)
  attention   cuDNN's SDPA kernels and the own flash / tensor-core / naive attention
  <function>  every other kernel by its function name (templates and arguments dropped)

and printed beside the prediction table `make cuda-costmodel` writes
(dev/cuda/costmodel_pred.tsv: gpu, class, predicted ms per step), with measured/predicted,
so the first GPU run calibrates the model. ncu serializes kernels, so the sum is the time
with no overlap between kernels: the quantity the model predicts.

With --step, the CSV is one step's kernels already: ncu --profile-from-start off on a run
with LLMC_PROFILE_STEP=N, where the trainer brackets step N with cudaProfilerStart/Stop
(one run, and only that step's kernels are replayed by ncu).

With --nvtx, a second export of the same report in which ncu renamed every kernel to its
innermost NVTX range (ncu --import R --csv --print-nvtx-rename kernel): the trainer names each
layer's forward, backward and weight-gradient work "fwd L<l>", "bwd L<l>", "wgt L<l>", and
"head fwd", "head bwd", "grad sync", "optimizer"; kernels directly in "step <n>" are the rest
(embedding, loss and norm). Printed as ms per phase per step and per layer.

Usage: kernel_times.py --one NCU_1STEP.csv --two NCU_2STEP.csv --pred PRED.tsv --gpu H200
       kernel_times.py --step NCU_STEP.csv [--nvtx NCU_STEP_RENAMED.csv] --pred PRED.tsv --gpu H200
       kernel_times.py --selftest
"""
import argparse, csv, io, re, sys

UNIT_MS = {"nsecond": 1e-6, "ns": 1e-6, "usecond": 1e-3, "us": 1e-3, "msecond": 1.0, "ms": 1.0, "second": 1e3, "s": 1e3}
GEMM_RE = re.compile(r"gemm|nvjet|xmma|cutlass|cublas|^sm\d\d_", re.I)
ATTN_RE = re.compile(r"sdpa|fmha|flash|attn|attention", re.I)


def kernel_class(name):
    """The class of a kernel name, as ncu prints it or as the emulation records it."""
    n = name.strip().lstrip("(").strip()
    if n.startswith("void "): n = n[5:]
    n = re.split(r"[<(]", n, maxsplit=1)[0].strip()
    n = n.rsplit("::", 1)[-1]  # a namespace qualifier
    if GEMM_RE.search(n): return "gemm"
    if ATTN_RE.search(n): return "attention"
    return n


def read_ncu(text):
    """Per-class total ms and launch count from ncu's --csv output (other lines ignored)."""
    lines = text.splitlines()
    start = next((i for i, l in enumerate(lines) if l.startswith('"ID"')), None)
    if start is None: raise ValueError("no ncu CSV header (a line starting with \"ID\") found")
    rows = csv.DictReader(io.StringIO("\n".join(lines[start:])))
    ms, n = {}, {}
    for r in rows:
        if r.get("Metric Name") != "gpu__time_duration.sum": continue
        unit = r.get("Metric Unit", "").strip()
        if unit not in UNIT_MS: raise ValueError("unknown time unit %r" % unit)
        v = float(r["Metric Value"].replace(",", "")) * UNIT_MS[unit]
        c = kernel_class(r["Kernel Name"])
        ms[c] = ms.get(c, 0.0) + v
        n[c] = n.get(c, 0) + 1
    return ms, n


LAYER_RE = re.compile(r"\b(fwd|bwd|wgt) L(\d+)\b")
PHASES = ("head fwd", "head bwd", "grad sync", "optimizer")


def read_phases(text):
    """Per-phase ms, launches and layers from the NVTX-renamed export: {phase: [ms, launches, {layers}]}."""
    ms = {}
    lines = text.splitlines()
    start = next((i for i, l in enumerate(lines) if l.startswith('"ID"')), None)
    if start is None: raise ValueError("no ncu CSV header (a line starting with \"ID\") found")
    for r in csv.DictReader(io.StringIO("\n".join(lines[start:]))):
        if r.get("Metric Name") != "gpu__time_duration.sum": continue
        unit = r.get("Metric Unit", "").strip()
        if unit not in UNIT_MS: raise ValueError("unknown time unit %r" % unit)
        v = float(r["Metric Value"].replace(",", "")) * UNIT_MS[unit]
        name = r["Kernel Name"].strip()
        m = LAYER_RE.search(name)
        if m: phase, layer = m.group(1) + " layers", int(m.group(2))
        else:
            phase = next((p for p in PHASES if p in name), None)
            if phase is None: phase = "step, outside the phases" if re.search(r"\bstep \d+\b", name) else "outside every range"
            layer = None
        e = ms.setdefault(phase, [0.0, 0, set()])
        e[0] += v; e[1] += 1
        if layer is not None: e[2].add(layer)
    return ms


def phase_table(ph):
    out = ["PER PHASE (the same step, each kernel by its innermost NVTX range)",
           "%-34s %12s %9s %8s %14s" % ("phase", "measured ms", "launches", "layers", "ms per layer")]
    for p, (v, n, layers) in sorted(ph.items(), key=lambda kv: -kv[1][0]):
        out.append("%-34s %12.3f %9d %8s %14s" % (p[:34], v, n, len(layers) or "-", "%.3f" % (v / len(layers)) if layers else "-"))
    return "\n".join(out)


def read_pred(text, gpu):
    pred = {}
    for line in text.splitlines():
        if not line.strip() or line.startswith("#"): continue
        g, cls, t = line.split("\t")
        if g == gpu: pred[cls] = pred.get(cls, 0.0) + float(t)
    return pred


def compare(one, two, pred):
    """Rows (class, measured ms per step, launches per step, predicted ms), largest first."""
    (m1, n1), (m2, n2) = one, two
    classes = set(m2) | set(pred)
    rows = []
    for c in classes:
        meas = m2.get(c, 0.0) - m1.get(c, 0.0)
        rows.append((c, meas, n2.get(c, 0) - n1.get(c, 0), pred.get(c)))
    rows.sort(key=lambda r: -max(r[1], r[3] or 0.0))
    return rows


def table(rows, gpu, header):
    out = [header, "%-34s %12s %9s %14s %9s" % ("kernel class", "measured ms", "launches", "predicted ms", "meas/pred")]
    tm = tp = 0.0
    for c, meas, n, p in rows:
        tm += meas; tp += p or 0.0
        out.append("%-34s %12.3f %9d %14s %9s" % (c[:34], meas, n, "-" if p is None else "%.3f" % p,
                                                  "-" if not p else "%.2f" % (meas / p)))
    out.append("%-34s %12.3f %9s %14.3f %9s" % ("total (kernels only, serialized)", tm, "", tp, "%.2f" % (tm / tp) if tp else "-"))
    return "\n".join(out), tm, tp


def ncu_csv(rows):
    """A synthetic ncu --csv output (for the self-test): rows of (kernel name, value, unit)."""
    s = io.StringIO()
    w = csv.writer(s, quoting=csv.QUOTE_ALL)
    w.writerow(["ID", "Process ID", "Process Name", "Host Name", "Kernel Name", "Context", "Stream",
                "Block Size", "Grid Size", "Device", "CC", "Section Name", "Metric Name", "Metric Unit", "Metric Value"])
    for i, (k, v, u) in enumerate(rows):
        w.writerow([i, 1, "train_gpt_cu", "h", k, 1, 7, "(256, 1, 1)", "(64, 1, 1)", 0, "9.0", "Command line profiler metrics",
                    "gpu__time_duration.sum", u, v])
    return "==PROF== Connected to process 1 (train_gpt_cu)\nstep 1 | loss 10.9\n" + s.getvalue()


def selftest():
    npass = nfail = 0
    def check(ok, msg):
        nonlocal npass, nfail
        print(("ok   " if ok else "FAIL ") + msg); npass += bool(ok); nfail += not ok
    names = {"void layernorm_forward_kernel<__nv_bfloat16>(float*, int)": "layernorm_forward_kernel",
             "(matmul_kernel<float, 128>)": "matmul_kernel", "nvjet_tst_128x256_64x4_2x1_v_bz_coopB_TNN": "gemm",
             "sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x256x64": "gemm",
             "cudnn_generated_fort_native_sdpa_sm90_flash_fprop_wgmma_f16_knob_7_64x128x128_4x1x1_kernel0_0": "attention",
             "flash_bwd_kernel<128>": "attention", "attn_naive_softmax": "attention", "adamw_kernel3": "adamw_kernel3",
             "llmc::encoder_forward_kernel": "encoder_forward_kernel"}
    for n, want in names.items():
        check(kernel_class(n) == want, "class of %r is %r (got %r)" % (n, want, kernel_class(n)))
    # one step = the 2-step run minus the 1-step run; units converted (1,500 ns = 0.0015 ms)
    one = ncu_csv([("init_kernel", "2,000,000", "nsecond"), ("layernorm_forward_kernel", "1,500", "nsecond"),
                   ("nvjet_tst_x", "2.5", "msecond"), ("cudnn_sdpa_fprop", "300", "usecond")])
    two = ncu_csv([("init_kernel", "2,000,000", "nsecond"), ("layernorm_forward_kernel", "1,500", "nsecond"),
                   ("nvjet_tst_x", "2.5", "msecond"), ("cudnn_sdpa_fprop", "300", "usecond"),
                   ("layernorm_forward_kernel", "1,500", "nsecond"), ("layernorm_forward_kernel", "2,500", "nsecond"),
                   ("nvjet_tst_x", "2.5", "msecond"), ("sm90_xmma_gemm_y", "0.5", "msecond"), ("cudnn_sdpa_fprop", "300", "usecond")])
    pred = "# PREDICTION\nH200\tgemm\t2.0\nH200\tattention\t0.25\nH200\tlayernorm_forward_kernel\t0.004\nH100\tgemm\t9\nH200\tgelu\t0.1\n"
    rows = compare(read_ncu(one), read_ncu(two), read_pred(pred, "H200"))
    d = {r[0]: r for r in rows}
    check(abs(d["gemm"][1] - 3.0) < 1e-12 and d["gemm"][2] == 2 and d["gemm"][3] == 2.0, "gemm: 2.5 + 0.5 ms measured in 2 launches vs 2.0 predicted (%s)" % (d["gemm"],))
    check(abs(d["layernorm_forward_kernel"][1] - 0.004) < 1e-12 and d["layernorm_forward_kernel"][2] == 2, "layernorm: 1.5 + 2.5 us = 0.004 ms in 2 launches (%s)" % (d["layernorm_forward_kernel"],))
    check(abs(d["attention"][1] - 0.3) < 1e-12, "attention: 300 us = 0.3 ms (%s)" % (d["attention"],))
    check(abs(d["init_kernel"][1]) < 1e-12 and d["init_kernel"][2] == 0, "start-up kernels cancel in the difference (%s)" % (d["init_kernel"],))
    check(d["gelu"][1] == 0.0 and d["gelu"][3] == 0.1, "a predicted class the GPU never ran shows 0 measured (%s)" % (d["gelu"],))
    check(rows[0][0] == "gemm", "rows sorted by the larger of measured and predicted: gemm first")
    alone = {r[0]: r for r in compare(({}, {}), read_ncu(one), read_pred(pred, "H200"))}
    check(abs(alone["gemm"][1] - 2.5) < 1e-12 and alone["init_kernel"][2] == 1, "--step: the CSV is the step itself, nothing subtracted (%s)" % (alone["gemm"],))
    # the NVTX-renamed export: per phase and per layer
    ren = ncu_csv([("fwd L0", "1", "msecond"), ("fwd L1", "1.5", "msecond"), ("fwd L1", "500", "usecond"),
                   ("bwd L0", "4", "msecond"), ("head fwd", "2", "msecond"), ("step 2", "300", "usecond"),
                   ("optimizer", "0.7", "msecond"), ("layernorm_forward_kernel", "1", "usecond")])
    ph = read_phases(ren)
    check(abs(ph["fwd layers"][0] - 3.0) < 1e-12 and ph["fwd layers"][1] == 3 and ph["fwd layers"][2] == {0, 1},
          "NVTX: fwd L0 + fwd L1 = 3.0 ms in 3 launches over 2 layers (%s)" % (ph["fwd layers"],))
    check(abs(ph["bwd layers"][0] - 4.0) < 1e-12 and abs(ph["head fwd"][0] - 2.0) < 1e-12 and abs(ph["optimizer"][0] - 0.7) < 1e-12,
          "NVTX: bwd layers 4.0 ms, head fwd 2.0 ms, optimizer 0.7 ms")
    check(abs(ph["step, outside the phases"][0] - 0.3) < 1e-12 and abs(ph["outside every range"][0] - 0.001) < 1e-12,
          "NVTX: kernels in the step range only, and in no range, kept apart")
    pt = phase_table(ph)
    check(pt.splitlines()[2].split()[:2] == ["bwd", "layers"] and pt.splitlines()[3].split()[-1] == "1.500",
          "NVTX table: largest phase first, fwd 1.500 ms per layer")
    txt, tm, tp = table(rows, "H200", "test")
    check(abs(tm - 3.304) < 1e-9 and abs(tp - 2.354) < 1e-9, "totals: measured 3.304 ms, predicted 2.354 ms (%.6f, %.6f)" % (tm, tp))
    check(txt.splitlines()[2].split()[-1] == "1.50", "gemm row ends with meas/pred 1.50 (%s)" % txt.splitlines()[2])
    try:
        read_ncu("no csv here"); check(False, "text without an ncu header is refused")
    except ValueError:
        check(True, "text without an ncu header is refused")
    try:
        read_ncu(ncu_csv([("k", "1", "furlong")])); check(False, "an unknown time unit is refused")
    except ValueError:
        check(True, "an unknown time unit is refused")
    print("%d passed, %d failed" % (npass, nfail))
    return 0 if nfail == 0 else 1


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--one"); ap.add_argument("--two"); ap.add_argument("--pred"); ap.add_argument("--gpu", default="H200")
    ap.add_argument("--step", help="one step's kernels (LLMC_PROFILE_STEP); instead of --one/--two")
    ap.add_argument("--nvtx", help="the same step's kernels renamed to their NVTX ranges (per-phase table)")
    ap.add_argument("--selftest", action="store_true")
    a = ap.parse_args()
    if a.selftest: return selftest()
    if not ((a.step or (a.one and a.two)) and a.pred): ap.error("--step (or --one and --two) and --pred are required")
    with open(a.pred) as fp:
        ptxt = fp.read()
    if a.step:
        with open(a.step) as f:
            one, two = ({}, {}), read_ncu(f.read())
    else:
        with open(a.one) as f1, open(a.two) as f2:
            one, two = read_ncu(f1.read()), read_ncu(f2.read())
    pred = read_pred(ptxt, a.gpu)
    if not pred: print("no prediction rows for %s in %s: measured times only" % (a.gpu, a.pred))
    stamp = next((l[1:].strip() for l in ptxt.splitlines() if l.startswith("# generated")), "generation unknown")
    txt, tm, tp = table(compare(one, two, pred), a.gpu,
                        "MEASURED (ncu, %s) beside PREDICTED (cost model on %s, %s)"
                        % ("one step alone" if a.step else "one step = 2-step run - 1-step run", a.gpu, stamp))
    print(txt)
    if a.nvtx:
        try:
            with open(a.nvtx) as f:
                print(phase_table(read_phases(f.read())))
        except (OSError, ValueError) as e:
            print("per phase: not available (%s: %s)" % (a.nvtx, e))
    print("kernel time per step: measured %.1f ms, predicted %.1f ms" % (tm, tp))
    return 0


if __name__ == "__main__":
    sys.exit(main())
