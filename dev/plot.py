#!/usr/bin/python3
"""Plot training logs: one PNG with loss (train and validation), learning rate, global
batch, gradient norm and the gradient noise scale B_simple against tokens consumed.

    /usr/bin/python3 dev/plot.py out/family_125m/log.jsonl -o out/family_125m/plot.png
    /usr/bin/python3 dev/plot.py out/one_gpu_125m/log.jsonl out/family_125m/log.jsonl \
        --labels "1 GPU" "8 GPUs" -o compare.png

Reads the trainer's JSONL logs (llmc/host/logger.h), one object per line:
    {"type":"train","step":..,"loss":..,"lr":..,"gb":..,"tokens":..,"gnorm":..,
     "b_simple":.. (optional), "skip":"spike"|"nonfinite" (optional), "tok_s":.. (optional)}
    {"type":"val","step":..,"tokens":..,"val_loss":..,
     "val_loss_by":{"NAME":..} (optional: a validation blend, one loss per dataset)}
Other types ("event", ...) are ignored. Robust to what real runs leave behind:
  - a resumed run appends to the same log, so steps after the last checkpoint appear
    twice: a step number that goes back replaces everything from that step on;
  - lines from several ranks: only the lowest rank present is kept;
  - nan / inf written as bare words (C's printf) are read as NaN / inf; unreadable lines
    (a line cut off by a crash) are skipped and counted.
Skipped steps (the spike guard) are marked with red crosses on the loss and grad-norm
panels. The B_simple panel (only when a log has it) also draws the global batch, in the
same unit (sequences), so one sees whether the batch is below or above the noise scale.
Needs matplotlib (Debian: python3-matplotlib); run it with /usr/bin/python3.
"""
import argparse
import json
import math
import os
import re
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
from matplotlib.ticker import FuncFormatter  # noqa: E402

# bare nan / inf values (C printf) -> tokens Python's json accepts
_NONFINITE = re.compile(r'(?<=[:\[,])\s*(-?)(nan|inf|infinity)\b', re.IGNORECASE)


def _fix_nonfinite(line):
    return _NONFINITE.sub(lambda m: ("-Infinity" if m.group(1) else "Infinity") if m.group(2).lower() != "nan" else "NaN", line)


def _dedup(records):
    """Keep the last run's view of the timeline: a step that goes back (a resume) drops
    every earlier record with that step or a later one."""
    out = []
    for r in records:
        while out and out[-1]["step"] >= r["step"]:
            out.pop()
        out.append(r)
    return out


def read_log(path):
    train, val, bad = [], [], 0
    with open(path, errors="replace") as f:
        for line in f:
            line = line.strip()
            if not line:
                continue
            try:
                r = json.loads(_fix_nonfinite(line))
            except ValueError:
                bad += 1
                continue
            if not isinstance(r, dict) or "step" not in r:
                continue
            if r.get("type") == "train" and "tokens" in r:
                train.append(r)
            elif r.get("type") == "val" and "tokens" in r and "val_loss" in r:
                val.append(r)
    ranks = [r["rank"] for r in train + val if "rank" in r]
    if ranks:
        low = min(ranks)
        train = [r for r in train if r.get("rank", low) == low]
        val = [r for r in val if r.get("rank", low) == low]
    if bad:
        print(f"plot.py: {path}: skipped {bad} unreadable line(s)", file=sys.stderr)
    return _dedup(train), _dedup(val)


def read_evals(path):
    """the cloze evaluation records (type "eval": cloze_acc, cloze_ppl; llmc/host/eval.h)"""
    out = []
    with open(path, errors="replace") as f:
        for line in f:
            try:
                r = json.loads(_fix_nonfinite(line.strip()))
            except ValueError:
                continue
            if isinstance(r, dict) and r.get("type") == "eval" and "tokens" in r and "cloze_acc" in r:
                out.append(r)
    return out


def series(records, key):
    xs, ys = [], []
    for r in records:
        v = r.get(key)
        if isinstance(v, (int, float)) and not isinstance(v, bool):
            xs.append(r["tokens"])
            ys.append(float(v))
    return xs, ys


def finite(xs, ys, positive=False):
    keep = [(x, y) for x, y in zip(xs, ys) if math.isfinite(y) and (y > 0 or not positive)]
    return [x for x, _ in keep], [y for _, y in keep]


def ema(ys, k):
    """Debiased exponential moving average with a span of k points (k <= 1: unchanged)."""
    if k <= 1:
        return ys
    beta, m, out = 1.0 - 2.0 / (k + 1.0), 0.0, []
    for i, y in enumerate(ys, 1):
        m = beta * m + (1.0 - beta) * y
        out.append(m / (1.0 - beta ** i))
    return out


def loss_ylim(xs, ys):
    """Show the interesting part: from a bit under the minimum to the maximum after the
    first 5% of the run (the first steps' ~ln(V) loss would squash everything else; those
    points run off the top)."""
    pts = [(x, y) for x, y in zip(xs, ys) if math.isfinite(y)]
    if len(pts) < 10:
        return None
    xmax = max(x for x, _ in pts)
    late = [y for x, y in pts if x >= 0.05 * xmax] or [y for _, y in pts]
    lo, hi = min(y for _, y in pts), max(late)
    if hi <= lo:
        return None
    pad = 0.05 * (hi - lo)
    return lo - pad, hi + pad


def human(v, _pos=None):
    """1234567 -> 1.23M, 2.5e9 -> 2.5B (tokens read as K, M, B, T)."""
    for div, unit in ((1e12, "T"), (1e9, "B"), (1e6, "M"), (1e3, "K")):
        if abs(v) >= div:
            return f"{v / div:.3g}{unit}"
    return f"{v:.3g}"


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("logs", nargs="+", help="JSONL log file(s)")
    ap.add_argument("-o", "--out", default=None, help="output PNG (default: plot.png next to the first log)")
    ap.add_argument("--labels", nargs="+", default=None, help="one label per log (default: the log's directory)")
    ap.add_argument("--smooth", type=int, default=0, help="EMA span in steps for the train loss (0: off; the raw curve stays, faint)")
    ap.add_argument("--title", default=None)
    args = ap.parse_args()
    if args.labels is not None and len(args.labels) != len(args.logs):
        ap.error("give one --labels entry per log")
    out = args.out or os.path.join(os.path.dirname(os.path.abspath(args.logs[0])), "plot.png")

    runs = []
    for i, path in enumerate(args.logs):
        if not os.path.exists(path):
            sys.exit(f"plot.py: no such log: {path}")
        train, val = read_log(path)
        if not train and not val:
            sys.exit(f"plot.py: {path} holds no train or val records")
        label = args.labels[i] if args.labels else (os.path.basename(os.path.dirname(os.path.abspath(path))) or path)
        runs.append((label, train, val))

    evals = {label: read_evals(path) for (label, _, _), path in zip(runs, args.logs)}
    has_eval = any(evals.values())
    has_bs = any("b_simple" in r for _, t, _ in runs for r in t)
    has_tps = any("tok_s" in r for _, t, _ in runs for r in t)
    has_by = any(isinstance(r.get("val_loss_by"), dict) for _, _, v in runs for r in v)
    panels = ["loss", "lr", "gb", "gnorm"] + (["b_simple"] if has_bs else []) + (["tok_s"] if has_tps else []) + (["cloze"] if has_eval else [])
    panels += ["val_by"] if has_by else []
    ncols = 2
    nrows = (len(panels) + 1) // 2
    fig, axes = plt.subplots(nrows, ncols, figsize=(13, 3.6 * nrows), squeeze=False)
    ax_of = {}
    for k, name in enumerate(panels):
        ax_of[name] = axes[k // ncols][k % ncols]
    for k in range(len(panels), nrows * ncols):
        axes[k // ncols][k % ncols].set_visible(False)
    colors = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    loss_x, loss_all = [], []
    skipped_runs = []

    for i, (label, train, val) in enumerate(runs):
        c = colors[i % len(colors)]
        ax = ax_of["loss"]
        # skipped steps (spike guard) are drawn as crosses, not as part of the curve
        x, y = finite(*series([r for r in train if r.get("skip") in (None, "", "none")], "loss"))
        if x:
            if args.smooth > 1:
                ax.plot(x, y, color=c, alpha=0.25, lw=0.8)
                ax.plot(x, ema(y, args.smooth), color=c, lw=1.4, label=f"{label} train (EMA {args.smooth})")
            else:
                ax.plot(x, y, color=c, lw=1.0, label=f"{label} train")
            loss_x += x
            loss_all += y
        xv, yv = finite(*series(val, "val_loss"))
        if xv:
            ax.plot(xv, yv, color=c, lw=1.6, ls="--", marker="o", ms=3, label=f"{label} val")
            loss_x += xv
            loss_all += yv
        skipped = [r for r in train if r.get("skip") not in (None, "", "none")]
        if skipped:
            skipped_runs.append((label, skipped))

        x, y = finite(*series(train, "lr"))
        ax_of["lr"].plot(x, y, color=c, lw=1.2, label=label)
        x, y = finite(*series(train, "gb"))
        ax_of["gb"].step(x, y, where="post", color=c, lw=1.2, label=label)
        x, y = finite(*series([r for r in train if r.get("skip") in (None, "", "none")], "gnorm"), positive=True)
        ax_of["gnorm"].plot(x, y, color=c, lw=0.8, label=label)
        if skipped:
            gs = [(r["tokens"], r["gnorm"]) for r in skipped if isinstance(r.get("gnorm"), float) and math.isfinite(r["gnorm"]) and r["gnorm"] > 0]
            if gs:
                ax_of["gnorm"].scatter([a for a, _ in gs], [b for _, b in gs], marker="x", color="red", s=30, zorder=5)
        if has_bs:
            ax = ax_of["b_simple"]
            x, y = finite(*series(train, "b_simple"), positive=True)
            if x:
                ax.plot(x, y, color=c, lw=1.2, label=f"{label} B_simple")
                xg, yg = finite(*series(train, "gb"))
                ax.step(xg, yg, where="post", color=c, lw=1.0, ls=":", label=f"{label} global batch")
        if has_eval and evals[label]:
            x, y = finite(*series(evals[label], "cloze_acc"))
            ax_of["cloze"].plot(x, y, color=c, lw=1.4, marker="o", ms=3, label=f"{label} accuracy")
            x, y = finite(*series(evals[label], "cloze_ppl"), positive=True)
            if not hasattr(ax_of["cloze"], "_ppl"):
                ax_of["cloze"]._ppl = ax_of["cloze"].twinx()
                ax_of["cloze"]._ppl.set_ylabel("target perplexity (dotted)")
                ax_of["cloze"]._ppl.set_yscale("log")
            ax_of["cloze"]._ppl.plot(x, y, color=c, lw=1.0, ls=":", label=f"{label} perplexity")
        if has_tps:
            x, y = finite(*series(train, "tok_s"), positive=True)
            ax_of["tok_s"].plot(x, y, color=c, lw=0.8, label=label)
        if has_by:  # one line per validation dataset: a color each, a line style per run
            names = sorted({k for r in val if isinstance(r.get("val_loss_by"), dict) for k in r["val_loss_by"]})
            for j, name in enumerate(names):
                recs = [{"tokens": r["tokens"], "v": r["val_loss_by"].get(name)} for r in val
                        if isinstance(r.get("val_loss_by"), dict)]
                x, y = finite(*series(recs, "v"))
                ax_of["val_by"].plot(x, y, color=colors[j % len(colors)], ls=["-", "--", ":", "-."][i % 4], lw=1.3,
                                     marker="o", ms=3, label=f"{label} {name}" if len(runs) > 1 else name)

    lim = loss_ylim(loss_x, loss_all)
    if lim:
        ax_of["loss"].set_ylim(*lim)
    # skipped steps: a cross at the step's loss, or at the top edge when it is off the
    # scale or not finite
    ytop = lim[1] if lim else (max(loss_all) if loss_all else 0.0)
    for label, skipped in skipped_runs:
        sx = [r["tokens"] for r in skipped]
        sy = [min(r["loss"], ytop) if isinstance(r.get("loss"), (int, float)) and math.isfinite(r["loss"]) else ytop for r in skipped]
        ax_of["loss"].scatter(sx, sy, marker="x", color="red", s=30, zorder=5, clip_on=False,
                              label=f"{label} skipped steps ({len(skipped)})")
    titles = {
        "loss": ("loss (train, validation)", "loss"),
        "lr": ("learning rate", "lr"),
        "gb": ("global batch", "sequences"),
        "gnorm": ("gradient norm (before clipping)", "L2 norm"),
        "b_simple": ("gradient noise scale B_simple (EMA) and global batch", "sequences"),
        "tok_s": ("throughput", "tokens/s"),
        "cloze": ("cloze (last word of a verse): zero-shot accuracy, target perplexity", "accuracy"),
        "val_by": ("validation loss per dataset (a -j blend; val_loss is their weighted mean)", "loss"),
    }
    for name, ax in ax_of.items():
        t, yl = titles[name]
        ax.set_title(t, fontsize=10)
        ax.set_ylabel(yl)
        ax.set_xlabel("tokens")
        ax.xaxis.set_major_formatter(FuncFormatter(human))
        ax.grid(True, alpha=0.3)
        if name in ("gnorm", "b_simple"):
            # log scale when the values span more than a factor 20 (spikes, a growing B_simple)
            ys = [y for line in ax.get_lines() for y in line.get_ydata() if y > 0]
            if ys and max(ys) > 20 * min(ys):
                ax.set_yscale("log")
        if name in ("tok_s",):
            ax.yaxis.set_major_formatter(FuncFormatter(human))
        handles, _ = ax.get_legend_handles_labels()
        if handles and (len(runs) > 1 or name in ("loss", "b_simple", "val_by")):
            ax.legend(fontsize=8)
    fig.suptitle(args.title or ", ".join(label for label, _, _ in runs), fontsize=11)
    fig.tight_layout()
    os.makedirs(os.path.dirname(os.path.abspath(out)), exist_ok=True)
    fig.savefig(out, dpi=110)
    print(f"plot.py: wrote {out}")


if __name__ == "__main__":
    main()
