#!/usr/bin/python3
"""Plot the planner's scaling report (the paper's R4) from its CSV.

    ./train_gpt -plan -model 530b -gb 1920 -mb 1 -tp 8 -pp 35 -recompute 1 -zero 0 \
        -cluster selene-a100 -scaling 140,210,280,350,420,560,700,840,1120 -plan-csv scaling.csv
    /usr/bin/python3 dev/plot_scaling.py scaling.csv -o doc/scaling_530b.png

Left: predicted per-GPU TFLOP/s (paper formula) against node count at a fixed global
batch, with the paper's measured points where the CSV carries them. Right: where the time
goes (compute, communication, pipeline bubble) as shares of the iteration.
Needs matplotlib (Debian: python3-matplotlib); run it with /usr/bin/python3.
"""
import argparse
import csv
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402


def read_rows(path):
    rows = []
    with open(path, newline="") as f:
        for r in csv.DictReader(f):
            if r.get("feasible") != "1":
                continue
            rows.append(r)
    if not rows:
        sys.exit(f"plot_scaling: no feasible rows in {path}")
    return rows


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("csv", help="CSV written by -plan ... -scaling LIST -plan-csv PATH")
    ap.add_argument("-o", "--out", default="scaling.png", help="PNG to write")
    ap.add_argument("--title", default=None)
    args = ap.parse_args()

    rows = read_rows(args.csv)
    nodes = [int(r["nodes"]) for r in rows]
    tflops = [float(r["tflops_per_gpu"]) for r in rows]
    bubble = [100 * float(r["bubble_frac"]) for r in rows]
    comm = [100 * float(r["comm_frac"]) for r in rows]
    compute = [100 - b - c for b, c in zip(bubble, comm)]
    paper = [(int(r["nodes"]), float(r["paper_tflops"])) for r in rows if r.get("paper_tflops")]
    r0 = rows[0]
    family = f"TP {r0['tp']} x PP {r0['pp']}, mb {r0['mb']}, recompute {r0['recompute']}, ZeRO-1 {r0['zero']}"

    fig, (ax, ax2) = plt.subplots(1, 2, figsize=(11, 4.2))
    ax.plot(nodes, tflops, "o-", color="tab:blue", label="planner")
    if paper:
        ax.plot([p[0] for p in paper], [p[1] for p in paper], "s", color="tab:red", markersize=8,
                label="paper, measured (Selene)")
    for n, t in zip(nodes, tflops):
        ax.annotate(f"{t:.0f}", (n, t), textcoords="offset points", xytext=(0, 7), ha="center", fontsize=8)
    ax.set_xlabel("nodes (8 GPUs each)")
    ax.set_ylabel("TFLOP/s per GPU (paper formula)")
    ax.set_title(args.title or "per-GPU throughput at fixed global batch")
    ax.grid(alpha=0.3)
    ax.legend(loc="upper right", fontsize=8)
    ax.set_ylim(0, max(tflops + [p[1] for p in paper]) * 1.15)

    ax2.stackplot(nodes, compute, comm, bubble, labels=["compute", "communication", "pipeline bubble"],
                  colors=["tab:green", "tab:orange", "tab:gray"], alpha=0.8)
    ax2.set_xlabel("nodes")
    ax2.set_ylabel("share of iteration time (%)")
    ax2.set_ylim(0, 100)
    ax2.set_title("where the time goes")
    ax2.legend(loc="lower left", fontsize=8)
    ax2.grid(alpha=0.3)
    fig.suptitle(f"{family}, global batch {r0['gb']} sequences", fontsize=10)
    fig.tight_layout()
    fig.savefig(args.out, dpi=120)
    print(f"plot_scaling: wrote {args.out}")


if __name__ == "__main__":
    main()
