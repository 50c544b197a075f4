#!/usr/bin/python3
"""Fit the layout planner's constants to timings the 3D trainer measured.

The trainer's JSONL log (-log FILE; one JSON object per line) has, for every step and
logging rank, a line {"type":"train", "step", "gb", "ms", "micro", "t_compute_ms",
"t_comm_ms", "t_idle_ms", "rank", "tp", "pp", "dp", ...}. This script

 1. groups the train lines by layout and global batch (tp, pp, dp, gb), skips the first
    --skip steps of each group (warm-up), and per step takes the critical rank (the one
    with the most compute: the slowest pipeline stage); medians over steps;
 2. asks the planner (./train_gpt -plan ..., or ./test_planner --plan ...) for its
    predicted breakdown of the same layout (-plan-csv): GEMM, memory-bound and optimizer
    time, communication on NVLink and on the inter-node link, bubble;
 3. fits
      GEMM efficiency:   measured compute - memory-bound - optimizer = (eff0/eff) * GEMM
      link bandwidths:   measured comm = a * intra + b * inter (least squares, a,b > 0),
                         bw_intra = bw0_intra / a, bw_inter = bw0_inter / b
    (a link that none of the layouts uses keeps its value; one layout using both links
    cannot separate them, so both get one common factor, and the script says so);
 4. prints the fitted flags to pass back to -plan, and the planner's prediction with them
    next to the measurement.

    /usr/bin/python3 dev/calibrate_planner.py runs/log.jsonl [more.jsonl ...] \
        --plan-args "-model 1.3b -cluster h100" --recompute 0 --zero 0 [--gpus-per-node 8]
    /usr/bin/python3 dev/calibrate_planner.py --selftest     # synthetic logs, known answer
    /usr/bin/python3 dev/calibrate_planner.py --published [--plan-args "-plan-eff 0.73"] [--fit-eff]
        # the planner against published A100 Megatron-LM results (Narayanan et al. 2021
        # Table 1, Korthikanti et al. 2022 Table 5), quoted below; doc/planner.md

The micro-batch size is recovered from the log (mb = gb / (dp * micro)); recompute and
ZeRO are not in the log, so give them. The model, cluster and any constants already in
use go in --plan-args; the fit is relative to them. On the h100 and h200 clusters the
planner's compute is the per-kernel model of llmc/planner/gpu_step.h: -plan-eff is its
GEMM_SUSTAINED there, and its GEMM time includes attention (not scaled by -plan-eff), which
the iteration below absorbs; a lasting refit goes into gpu_step.h (doc/cuda_speed.md).
"""
import argparse
import csv
import json
import os
import random
import re
import shlex
import statistics
import subprocess
import sys
import tempfile


def default_planner():
    if os.path.exists("./train_gpt"):
        return "./train_gpt -plan"
    return "./test_planner --plan"


def rc_flag(planner, recompute):
    """-recompute value for the planner: train_gpt takes 0/1/selective, test_planner integers."""
    r = str(recompute)
    if "test_planner" in planner:
        return {"selective": "2", "full": "1", "none": "0"}.get(r, r)
    return {"2": "selective"}.get(r, r)


def run_planner(planner, plan_args, tp, pp, dp, mb, gb, recompute, zero, gpn, sp=0, vpp=1):
    """Runs the planner on one fixed layout; returns (csv row dict, constants dict)."""
    world = tp * pp * dp
    g = min(gpn, world)
    if world % g:
        sys.exit(f"calibrate: world {world} is not a multiple of --gpus-per-node {g}")
    with tempfile.TemporaryDirectory() as td:
        path = os.path.join(td, "plan.csv")
        cmd = shlex.split(planner) + shlex.split(plan_args) + [
            "-tp", str(tp), "-pp", str(pp), "-dp", str(dp), "-mb", str(mb), "-gb", str(gb),
            "-recompute", rc_flag(planner, recompute), "-zero", str(zero), "-sp", str(sp), "-vpp", str(vpp),
            "-nodes", str(world // g),
            "-gpus-per-node", str(g), "-plan-schedule", "1f1b,interleaved", "-plan-csv", path]  # the logs come from the trainer: its schedules
        p = subprocess.run(cmd, capture_output=True, text=True)
        if not os.path.exists(path):
            sys.exit(f"calibrate: planner failed: {' '.join(cmd)}\n{p.stdout}\n{p.stderr}")
        with open(path, newline="") as f:
            rows = [r for r in csv.DictReader(f) if r["iter_s"]]
    if len(rows) != 1:
        sys.exit(f"calibrate: planner gave {len(rows)} timed rows for one layout: {' '.join(cmd)}\n{p.stdout}")
    k = {}
    m = re.search(r"GEMM efficiency ([0-9.]+)", p.stdout)
    k["eff"] = float(m.group(1))
    m = re.search(r"NVLink ([0-9.]+) GB/s/dir, inter-node ([0-9.]+) GB/s/GPU", p.stdout)
    k["intra"], k["inter"] = float(m.group(1)), float(m.group(2))
    return rows[0], k


def read_logs(paths, skip):
    """-> {(tp, pp, dp, gb, micro): [per-step dict of critical-rank seconds]}"""
    steps = {}
    for path in paths:
        with open(path) as f:
            for line in f:
                line = line.strip()
                if not line:
                    continue
                try:
                    d = json.loads(line)
                except json.JSONDecodeError:
                    continue
                if d.get("type") != "train" or "t_compute_ms" not in d:
                    continue
                key = (int(d["tp"]), int(d["pp"]), int(d["dp"]), int(d["gb"]), int(d.get("micro", 0)))
                steps.setdefault(key, {}).setdefault(int(d["step"]), []).append(d)
    groups = {}
    for key, by_step in steps.items():
        order = sorted(by_step)[skip:]
        out = []
        for s in order:
            crit = max(by_step[s], key=lambda d: d["t_compute_ms"])
            out.append({"compute": crit["t_compute_ms"] / 1e3, "comm": crit["t_comm_ms"] / 1e3,
                        "idle": crit["t_idle_ms"] / 1e3, "step": crit["ms"] / 1e3})
        if out:
            groups[key] = out
    return groups


def median(xs):
    return statistics.median(xs) if xs else 0.0


def const_flags(f):
    return f" -plan-eff {f['eff']:.6g} -bw-intra {f['intra']:.6g} -bw-inter {f['inter']:.6g}"


def predict(recs, args, extra):
    return [run_planner(args.planner, args.plan_args + extra, *r["layout"], args.recompute, args.zero, args.gpus_per_node)[0]
            for r in recs]


def fit(groups, args, verbose=True):
    """Returns (flags dict, list of per-group records)."""
    recs = []
    k0 = None
    for (tp, pp, dp, gb, micro), steps in sorted(groups.items()):
        mb = gb // (dp * micro) if micro > 0 else args.mb
        if mb is None or mb <= 0:
            sys.exit("calibrate: the log has no 'micro' field; give --mb")
        row, k = run_planner(args.planner, args.plan_args, tp, pp, dp, mb, gb, args.recompute, args.zero, args.gpus_per_node)
        if k0 is None:
            k0 = k
        meas = {x: median([s[x] for s in steps]) for x in ("compute", "comm", "idle", "step")}
        recs.append({"layout": (tp, pp, dp, mb, gb), "n": len(steps), "meas": meas, "row": row})
    if not recs:
        sys.exit("calibrate: no train lines with timings in the log(s)")
    flags = dict(k0)
    note = []

    # GEMM efficiency. The planner's GEMM time is a roofline (FLOPs at eff x peak, or bytes
    # at HBM speed), so it is not exactly proportional to 1/eff: iterate
    #   eff <- eff * r,  r = least-squares factor of predicted GEMM time on the measured
    #   compute minus the planner's memory-bound and optimizer parts,
    # which converges to the eff that makes the two agree.
    for _ in range(8):
        rows = predict(recs, args, const_flags(flags))
        T = [r["meas"]["compute"] - float(w["t_mem_s"]) - float(w["t_opt_s"]) for r, w in zip(recs, rows)]
        G = [float(w["t_gemm_s"]) for w in rows]
        stt = sum(t * t for t in T)
        if stt <= 0 or min(T) <= 0:
            note.append("measured compute does not exceed the memory-bound part: efficiency left as is")
            break
        ratio = sum(g * t for g, t in zip(G, T)) / stt
        flags["eff"] = min(1.0, flags["eff"] * ratio)
        if abs(ratio - 1) < 1e-4:
            break

    # Link bandwidths. Communication = latency part + bytes/bandwidth part per link; the
    # latency part is what the planner predicts with (nearly) infinite bandwidth.
    rows = predict(recs, args, const_flags(flags))
    lat = predict(recs, args, f" -plan-eff {flags['eff']:.6g} -bw-intra 1e12 -bw-inter 1e12")
    I = [float(w["t_comm_intra_s"]) - float(l["t_comm_intra_s"]) for w, l in zip(rows, lat)]
    E = [float(w["t_comm_inter_s"]) - float(l["t_comm_inter_s"]) for w, l in zip(rows, lat)]
    M = [r["meas"]["comm"] - float(l["t_comm_s"]) for r, l in zip(recs, lat)]
    sii = sum(i * i for i in I); see = sum(e * e for e in E); sie = sum(i * e for i, e in zip(I, E))
    sim = sum(i * m for i, m in zip(I, M)); sem = sum(e * m for e, m in zip(E, M))
    a = b = None
    det = sii * see - sie * sie
    if sii > 0 and see > 0 and det > 1e-9 * sii * see:
        a = (sim * see - sem * sie) / det
        b = (sem * sii - sim * sie) / det
        if a <= 0 or b <= 0:  # a common factor rather than a negative bandwidth
            a = b = (sim + sem) / (sii + see + 2 * sie)
            note.append("the two links could not be separated (a non-positive factor): one common factor fitted")
    elif sii > 0 and see > 0:
        a = b = (sim + sem) / (sii + see + 2 * sie)
        note.append("every layout uses both links in the same proportion: one common factor fitted "
                    "(log a second layout to separate them)")
    elif sii > 0:
        a = sim / sii
        note.append("no layout used the inter-node link: -bw-inter left as is")
    elif see > 0:
        b = sem / see
        note.append("no layout used NVLink: -bw-intra left as is")
    else:
        note.append("no communication predicted: bandwidths left as is")
    if a is not None and a > 0:
        flags["intra"] = k0["intra"] / a
    if b is not None and b > 0:
        flags["inter"] = k0["inter"] / b
    flags["note"] = "; ".join(note)
    return flags, recs


def report(flags, recs, args):
    print("measured (critical rank, median over steps) vs planner, seconds per step:")
    print(f"  {'TP':>3} {'PP':>3} {'DP':>4} {'mb':>3} {'gb':>6} {'steps':>5} | {'compute':>15} | {'comm':>15} | {'idle':>15} | {'step':>15}")
    for r in recs:
        tp, pp, dp, mb, gb = r["layout"]
        m, row = r["meas"], r["row"]
        cols = [(m["compute"], float(row["t_compute_s"])), (m["comm"], float(row["t_comm_s"])),
                (m["idle"], float(row["t_idle_s"])), (m["step"], float(row["iter_s"]))]
        print(f"  {tp:>3} {pp:>3} {dp:>4} {mb:>3} {gb:>6} {r['n']:>5} | " +
              " | ".join(f"{a:7.4g} {b:7.4g}" for a, b in cols))
    if flags["note"]:
        print("note:", flags["note"])
    line = f"-plan-eff {flags['eff']:.3f} -bw-intra {flags['intra']:.1f} -bw-inter {flags['inter']:.2f}"
    print("fitted constants, pass them back to -plan:")
    print("  " + line)
    # the planner with the fitted constants, against the measurement
    args2 = argparse.Namespace(**vars(args))
    args2.plan_args = args.plan_args + " " + line
    print("with them the planner predicts (step seconds, measured / predicted):")
    for r in recs:
        tp, pp, dp, mb, gb = r["layout"]
        row, _ = run_planner(args.planner, args2.plan_args, tp, pp, dp, mb, gb, args.recompute, args.zero, args.gpus_per_node)
        pred = float(row["iter_s"])
        print(f"  TP {tp} PP {pp} DP {dp} mb {mb} gb {gb}: {r['meas']['step']:.4g} / {pred:.4g} ({100 * (pred / r['meas']['step'] - 1):+.1f}%)")
    return line


def selftest(args):
    """Synthetic logs from the planner itself with known constants; the fit must find them."""
    truth = {"eff": 0.42, "intra": 210.0, "inter": 18.0}
    base = "-model 1.3b -cluster h100"
    true_args = f"{base} -plan-eff {truth['eff']} -bw-intra {truth['intra']} -bw-inter {truth['inter']}"
    layouts = [(2, 2, 2, 1, 64), (4, 1, 4, 1, 64), (8, 2, 1, 1, 64), (1, 1, 16, 1, 64)]
    rng = random.Random(1)
    with tempfile.TemporaryDirectory(prefix="calib_") as td:
        return selftest_in(args, truth, base, true_args, layouts, rng, os.path.join(td, "synthetic.jsonl"))


def selftest_in(args, truth, base, true_args, layouts, rng, path):
    with open(path, "w") as f:
        for tp, pp, dp, mb, gb in layouts:
            row, _ = run_planner(args.planner, true_args, tp, pp, dp, mb, gb, 0, 0, 8)
            micro = gb // (mb * dp)
            for step in range(1, 8):
                # step-to-step noise of +-3% shared by the ranks, +-0.3% between ranks
                js = [1 + rng.uniform(-0.03, 0.03) for _ in range(3)]
                for rank in range(tp * pp * dp):
                    jr = [x * (1 + rng.uniform(-0.003, 0.003)) for x in js]
                    c, m, i = (jr[0] * float(row["t_compute_s"]), jr[1] * float(row["t_comm_s"]),
                               jr[2] * float(row["t_idle_s"]))
                    f.write(json.dumps({"type": "train", "step": step, "gb": gb, "ms": 1e3 * (c + m + i), "micro": micro,
                                        "t_compute_ms": 1e3 * c, "t_comm_ms": 1e3 * m, "t_idle_ms": 1e3 * i,
                                        "rank": rank, "tp": tp, "pp": pp, "dp": dp}) + "\n")
    print(f"selftest: synthetic log {path} from the planner with {truth}")
    args.plan_args = base
    args.recompute, args.zero, args.gpus_per_node = 0, 0, 8
    flags, recs = fit(read_logs([path], args.skip), args)
    report(flags, recs, args)
    good = [abs(flags[k] / truth[k] - 1) < 0.05 for k in truth]
    ok = all(good)
    print("selftest:", "ok" if ok else "FAIL", {k: round(flags[k], 3) for k in truth}, "want", truth)
    print(f"{sum(good)} passed, {len(good) - sum(good)} failed")  # one check per fitted constant (within 5%)
    return 0 if ok else 1


# Published A100 (Selene, 80 GB) measurements of Megatron-LM, quoted from the papers.
# Narayanan et al. 2021, "Efficient Large-Scale Language Model Training on GPU Clusters
# Using Megatron-LM", Table 1 (weak scaling; seq 2048, V 51200, full recomputation,
# TFLOP/s per GPU by their formula with f = 4; micro-batch not given: the planner picks it).
NARAYANAN_T1 = [  # name, heads, H, L, TP, PP, GPUs, global batch, TFLOP/s per GPU
    ("1.7B", 24, 2304, 24, 1, 1, 32, 512, 137), ("3.6B", 32, 3072, 30, 2, 1, 64, 512, 138),
    ("7.5B", 32, 4096, 36, 4, 1, 128, 512, 142), ("18.4B", 48, 6144, 40, 8, 1, 256, 1024, 135),
    ("39.1B", 64, 8192, 48, 8, 2, 512, 1536, 138), ("76.1B", 80, 10240, 60, 8, 4, 1024, 1792, 140),
    ("145.6B", 96, 12288, 80, 8, 8, 1536, 2304, 148), ("310.1B", 128, 16384, 96, 8, 16, 1920, 2160, 155),
    ("529.6B", 128, 20480, 105, 8, 35, 2520, 2520, 163), ("1008B", 160, 25600, 128, 8, 64, 3072, 3072, 163)]
# Korthikanti et al. 2022, "Reducing Activation Recomputation in Large Transformer Models",
# Tables 3 and 5: iteration seconds with full recomputation and with SP + selective
# (micro-batch 1, seq 2048, V 51200).
KORTHIKANTI_T5 = [  # name, heads, H, L, TP, PP, GPUs, global batch, s full, s SP+selective
    ("22B", 64, 6144, 48, 8, 1, 8, 4, 1.42, 1.10), ("175B", 96, 12288, 96, 8, 8, 64, 64, 18.13, 13.75),
    ("530B", 128, 20480, 105, 8, 35, 280, 280, 49.05, 37.83), ("1T", 160, 25600, 128, 8, 64, 512, 512, 94.42, 71.49)]


def plan_best(planner, plan_args, heads, H, L, tp, pp, gpus, gb, recompute, sp, vpp=None, mb=None):
    """The planner's fastest feasible row for a published layout (micro-batch and V searched
    unless given); None when nothing fits."""
    with tempfile.TemporaryDirectory() as td:
        path = os.path.join(td, "plan.csv")
        cmd = shlex.split(planner) + shlex.split(plan_args) + [
            "-L", str(L), "-H", str(H), "-heads", str(heads), "-seq", "2048", "-V", "51200", "-gb", str(gb),
            "-tp", str(tp), "-pp", str(pp), "-recompute", rc_flag(planner, recompute), "-zero", "0", "-sp", str(sp),
            "-nodes", str(gpus // 8), "-cluster", "selene-a100", "-plan-top", "1", "-plan-csv", path,
            "-plan-schedule", "1f1b,interleaved"]  # the published runs' schedules (Megatron-LM's)
        if "train_gpt" in planner:
            cmd += ["-ramp", "off"]  # the trainer's default ramp need not divide these batches
        if mb:
            cmd += ["-mb", str(mb)]
        if vpp:
            cmd += ["-vpp", str(vpp)]
        subprocess.run(cmd, capture_output=True, text=True)
        if not os.path.exists(path):
            return None
        with open(path, newline="") as f:
            rows = [r for r in csv.DictReader(f) if r["feasible"] == "1"]
    rows.sort(key=lambda r: float(r["iter_s"]))
    return rows[0] if rows else None


def published(args):
    """Predicted vs published throughput; returns the list of relative errors (throughput)."""
    errs = []
    print(f"published A100 Megatron-LM results against the planner ({args.plan_args or 'default constants'})")
    print("Narayanan et al. 2021 Table 1 (full recompute; TFLOP/s per GPU, f = 4):")
    for name, heads, H, L, tp, pp, g, gb, tf in NARAYANAN_T1:
        r = plan_best(args.planner, args.plan_args, heads, H, L, tp, pp, g, gb, 1, 0)
        if r is None:
            print(f"  {name:7s} nothing feasible")
            continue
        e = float(r["tflops_per_gpu"]) / tf - 1
        errs.append(e)
        print(f"  {name:7s} TP {tp} PP {pp:2d} GPUs {g:4d} gb {gb:4d}: mb {r['mb']} V {r['vpp']}, predicted {float(r['tflops_per_gpu']):6.1f}, "
              f"paper {tf}, error {100 * e:+5.1f}%")
    print("Korthikanti et al. 2022 Table 5 (micro-batch 1; s per iteration):")
    for name, heads, H, L, tp, pp, g, gb, tfull, tsel in KORTHIKANTI_T5:
        for rc, sp, tm, what in ((1, 0, tfull, "full      "), ("selective", 1, tsel, "SP + sel. ")):
            r = plan_best(args.planner, args.plan_args, heads, H, L, tp, pp, g, gb, rc, sp, vpp=1, mb=1)
            if r is None:
                print(f"  {name:5s} {what} nothing feasible")
                continue
            e = tm / float(r["iter_s"]) - 1  # as a throughput error, like the first table
            errs.append(e)
            print(f"  {name:5s} {what}: predicted {float(r['iter_s']):7.2f} s (MFU {100 * float(r['mfu']):4.1f}%), paper {tm:6.2f} s, "
                  f"throughput error {100 * e:+5.1f}%")
    if errs:
        print(f"throughput error: mean {100 * statistics.mean(errs):+.1f}%, range {100 * min(errs):+.1f}% .. {100 * max(errs):+.1f}%")
    return errs


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("logs", nargs="*", help="trainer JSONL log files")
    ap.add_argument("--planner", default=None,
                    help="planner command (default: ./train_gpt -plan, else ./test_planner --plan; --selftest: ./test_planner --plan)")
    ap.add_argument("--plan-args", default="", help="model/cluster/constant flags for the planner, e.g. '-model 1.3b -cluster h100'")
    ap.add_argument("--recompute", default="0", help="0, 1 (full) or selective")
    ap.add_argument("--published", action="store_true",
                    help="compare the planner with published A100 Megatron-LM results (Narayanan 2021 Table 1, Korthikanti 2022 Table 5)")
    ap.add_argument("--fit-eff", action="store_true", help="with --published: also the -plan-eff that centres those errors")
    ap.add_argument("--zero", type=int, default=0)
    ap.add_argument("--mb", type=int, default=None, help="micro-batch, only if the log lacks 'micro'")
    ap.add_argument("--gpus-per-node", type=int, default=8)
    ap.add_argument("--skip", type=int, default=2, help="warm-up steps skipped per layout")
    ap.add_argument("--selftest", action="store_true")
    args = ap.parse_args()
    if args.selftest:
        if args.planner is None:
            args.planner = "./test_planner --plan" if os.path.exists("./test_planner") else default_planner()
        sys.exit(selftest(args))
    if args.planner is None:
        args.planner = default_planner()
    if args.published:
        errs = published(args)
        if args.fit_eff and errs:
            # throughput is close to proportional to GEMM efficiency: scale the current one
            m = re.search(r"-plan-eff\s+([0-9.]+)", args.plan_args)
            eff = float(m.group(1)) if m else 0.57
            print(f"suggested -plan-eff {eff / (1 + statistics.median(errs)):.3f} (median error to zero; rerun with it to check)")
        sys.exit(0)
    if not args.logs:
        ap.error("give log files, or --selftest")
    flags, recs = fit(read_logs(args.logs, args.skip), args)
    report(flags, recs, args)


if __name__ == "__main__":
    main()
