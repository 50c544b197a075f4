#!/usr/bin/env python3
"""dev/ablate_report.py: the report of a study run by scripts/ablate.sh, from the runs' logs alone.

    /usr/bin/python3 dev/ablate_report.py out/ablate/beta2      # writes report.md, report/*.png, summary.json

Reads OUT/study.json (the arms and runs the driver planned) and each run's log.jsonl, config.json and
ablate_status.json. Per run: the final validation loss (the last val record), spikes by the guard's rule
(dev/spikes.py: the run's own -skip-spikes and -spike-window when its guard was on, else the study's
offline z, 4 by default, and the run's window), their heights and recoveries, the steps the live guard
skipped (the log's "skip" fields), divergence and the last B_simple. Per arm: the median and min-max over
its seeds. Then figures (matplotlib) and one sentence per claim, computed from those numbers: a
difference counts as beyond the seed spread only when the arms' min-max ranges do not overlap.

A run diverged when its log holds a non-finite loss or grad norm, when its last train loss is above its
first, or when the spike guard stopped it (exit 3).
"""
import json, math, os, sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import spikes  # noqa: E402


def median(xs):
    xs = sorted(xs)
    n = len(xs)
    if n == 0: return None
    return xs[n // 2] if n % 2 else 0.5 * (xs[n // 2 - 1] + xs[n // 2])


def agg(xs):
    """(median, min, max, count) of the finite values, or None."""
    xs = [x for x in xs if x is not None and math.isfinite(x)]
    return (median(xs), min(xs), max(xs), len(xs)) if xs else None


def overlap(a, b):
    return a is not None and b is not None and a[1] <= b[2] and b[1] <= a[2]


def f4(x):
    return "-" if x is None else "%.4f" % x


def rng(a, digits=4):
    if a is None: return "-"
    f = "%%.%df" % digits
    return (f + " [" + f + ", " + f + "]") % a[:3]


# ---------------------------------------------------------------------------------------------------------
# one run

def run_summary(run, offline_z):
    d = run["dir"]
    path = os.path.join(d, "log.jsonl")
    try:
        with open(os.path.join(d, "ablate_status.json")) as f:
            status = json.load(f)
    except (OSError, ValueError):
        status = {}
    if not os.path.exists(path): return {"state": "missing"}
    recs = spikes.read_log(path)
    train = [r for r in recs if r.get("type") == "train"]
    val = [r for r in recs if r.get("type") == "val" and r.get("val_loss") is not None]
    if not train: return {"state": "missing"}
    live_z, _ = spikes.run_params(recs)
    flagged, z, W = spikes.detect(recs, None if live_z > 0 else offline_z)
    loss = [spikes._num(r.get("loss")) for r in train]
    gnorm = [spikes._num(r.get("gnorm")) for r in train]
    nonfinite = any(not math.isfinite(x) for x in loss + gnorm)
    stopped = status.get("rc") == 3
    sp = [f for f in flagged if f["kind"] == "spike"]
    rec = [f["recovery"] for f in sp if f["recovery"] is not None]
    flags = next((r.get("flags", {}) for r in recs if r.get("type") == "config"), {})
    complete = train[-1].get("tokens", 0) >= flags.get("-tokens", 0)
    return {
        "state": "done" if complete else ("stopped" if stopped else "partial"),
        "final_val": val[-1]["val_loss"] if val else None,
        "first_loss": loss[0], "last_loss": loss[-1],
        "diverged": nonfinite or stopped or not (loss[-1] <= loss[0]),
        "spikes": len(sp), "nonfinite": sum(1 for f in flagged if f["kind"] == "nonfinite"),
        "max_height_sd": max((f["height_sd"] for f in sp), default=None),
        "max_height_loss": max((f["height_loss"] for f in sp), default=None),
        "recovery_median": median(rec), "not_recovered": sum(1 for f in sp if f["recovery"] is None),
        "skipped": sum(1 for r in train if r.get("skip")),
        "b_simple": next((r["b_simple"] for r in reversed(train) if r.get("b_simple") is not None), None),
        "z": z, "window": W, "live_guard": live_z > 0, "wall_s": status.get("wall_s"),
        "curve": [(r.get("tokens"), spikes._num(r.get("loss"))) for r in train],
        "val_curve": [(r["tokens"], r["val_loss"]) for r in val],
        "gb_curve": [(r.get("tokens"), r.get("gb")) for r in train],
        "bs_curve": [(spikes._num(r.get("loss")), r["b_simple"]) for r in train if r.get("b_simple") is not None],
    }


# ---------------------------------------------------------------------------------------------------------
# figures

def band(curves):
    """Median and min-max per position over curves of (tokens, value), aligned by step."""
    n = max(len(c) for c in curves)
    out = []
    for i in range(n):
        vals = [c[i][1] for c in curves if i < len(c) and c[i][1] is not None and math.isfinite(c[i][1])]
        tok = next(c[i][0] for c in curves if i < len(c))
        if vals: out.append((tok, median(vals), min(vals), max(vals)))
    return out


def fig_curves(study, runs_by_arm, path):
    axes = study["axes"]
    panel_axis = axes[-1] if len(axes) > 1 else None
    panels = sorted({a["levels"][panel_axis] for a in study["arms"]}, key=lambda lb: _x(study, panel_axis, lb)) \
        if panel_axis else [None]
    fig, axs = plt.subplots(1, len(panels), figsize=(4.2 * len(panels), 3.6), squeeze=False, sharey=True)
    for ax, p in zip(axs[0], panels):
        for k, arm in enumerate(a for a in study["arms"] if p is None or a["levels"][panel_axis] == p):
            rs = [s for s in runs_by_arm[arm["name"]] if s.get("curve")]
            if not rs: continue
            b = band([s["curve"] for s in rs])
            label = ", ".join("%s %s" % (k2, v) for k2, v in arm["levels"].items() if k2 != panel_axis)
            col = "C%d" % (k % 10)
            ax.plot([t for t, *_ in b], [m for _, m, _, _ in b], color=col, lw=1, label=label)
            ax.fill_between([t for t, *_ in b], [lo for *_, lo, _ in b], [hi for *_, hi in b], color=col, alpha=0.2)
            vb = band([s["val_curve"] for s in rs if s["val_curve"]]) if any(s["val_curve"] for s in rs) else []
            ax.plot([t for t, *_ in vb], [m for _, m, _, _ in vb], "o", color=col, ms=3)
        ax.set_title("%s %s" % (panel_axis, p) if p is not None else study["study"], fontsize=9)
        ax.set_xlabel("tokens")
        ax.grid(alpha=0.3)
        ax.legend(fontsize=7)
    axs[0][0].set_ylabel("train loss (line: median, band: min-max); val (dots)")
    fig.tight_layout()
    fig.savefig(path, dpi=90)
    plt.close(fig)


def _x(study, axis, label):
    arm = next(a for a in study["arms"] if a["levels"][axis] == label)
    x = arm["x"].get(axis)
    return x if isinstance(x, (int, float)) else study["arms"].index(arm)


def fig_metric(study, arms_agg, x_axis, series, metrics, path, logx=True):
    """metric (median, min-max error bars) against the x axis' values, one line per level of series."""
    fig, axs = plt.subplots(1, len(metrics), figsize=(4.6 * len(metrics), 3.6), squeeze=False)
    levels = sorted({a["levels"][series] for a in study["arms"]}, key=lambda lb: _x(study, series, lb)) \
        if series else [None]
    for ax, (key, title) in zip(axs[0], metrics):
        for k, lv in enumerate(levels):
            pts = []
            for a in study["arms"]:
                if series and a["levels"][series] != lv: continue
                g = arms_agg[a["name"]][key]
                if g is not None: pts.append((a["x"][x_axis], g))
            pts.sort(key=lambda p: p[0])
            if not pts: continue
            ax.errorbar([p[0] for p in pts], [p[1][0] for p in pts],
                        yerr=[[p[1][0] - p[1][1] for p in pts], [p[1][2] - p[1][0] for p in pts]],
                        marker="o", capsize=3, color="C%d" % k, label="%s %s" % (series, lv) if series else None)
        xs = sorted({a["x"][x_axis] for a in study["arms"]})
        if logx: ax.set_xscale("log", base=2)
        ax.set_xticks(xs)
        close = any(b < 1.5 * a for a, b in zip(xs, xs[1:]) if a > 0)  # labels would overlap: tilt them
        ax.set_xticklabels(["%.3g" % x for x in xs], rotation=35 if close else 0, ha="right" if close else "center")
        ax.minorticks_off()
        ax.set_xlabel(x_axis)
        ax.set_title(title, fontsize=9)
        ax.grid(alpha=0.3)
        if series: ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=90)
    plt.close(fig)


def fig_bsimple(study, runs_by_arm, path):
    fig, ax = plt.subplots(figsize=(5.5, 3.8))
    for k, arm in enumerate(study["arms"]):
        for j, s in enumerate(r for r in runs_by_arm[arm["name"]] if r.get("bs_curve")):
            ax.plot([p[0] for p in s["bs_curve"]], [p[1] for p in s["bs_curve"]], color="C%d" % (k % 10), lw=0.7,
                    label=arm["name"] if j == 0 else None)
    ax.set_xlabel("train loss")
    ax.set_ylabel("B_simple (sequences)")
    ax.invert_xaxis()  # training runs left to right
    ax.grid(alpha=0.3)
    ax.legend(fontsize=6)
    fig.tight_layout()
    fig.savefig(path, dpi=90)
    plt.close(fig)


def fig_batch(study, runs_by_arm, path):
    fig, ax = plt.subplots(figsize=(5.5, 3.6))
    for k, arm in enumerate(study["arms"]):
        s = next((r for r in runs_by_arm[arm["name"]] if r.get("gb_curve")), None)
        if s: ax.step([p[0] for p in s["gb_curve"]], [p[1] for p in s["gb_curve"]], color="C%d" % k, label=arm["name"])
    ax.set_xlabel("tokens")
    ax.set_ylabel("global batch (sequences), first seed")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=90)
    plt.close(fig)


# ---------------------------------------------------------------------------------------------------------
# the claims: sentences computed from the numbers

def tokens_phrase(study):
    toks = {a["tokens"] for a in study["arms"]}
    if len(toks) == 1: return "%s tokens per run" % format(toks.pop(), ",")
    return "the compute of %s tokens at this size per run" % format(study["tokens"], ",")


def scale_phrase(study):
    sh = study["shape"]
    return "at this scale (%s: L %d, H %d, %.2gM parameters, %s, %d seeds per arm)" % (
        study["scale"], sh["L"], sh["H"], study["N"] / 1e6, tokens_phrase(study), len(study["seeds"]))


def cap(s):
    return s[:1].upper() + s[1:]


def arm_of(study, **levels):
    return next((a["name"] for a in study["arms"] if all(a["levels"].get(k) == v for k, v in levels.items())), None)


def claim_beta2(study, A, rep):
    x, ser, lo, hi = rep.get("x", "lr"), rep.get("series", "beta2"), rep.get("low", "0.95"), rep.get("high", "0.999")
    xs = sorted({a["levels"][x] for a in study["arms"]}, key=lambda lb: _x(study, x, lb))
    total = sum(g["spikes_total"] for g in A.values())
    fewer = same = more = 0
    ov, lower_loss, n = [], 0, 0
    for lv in xs:
        a, b = arm_of(study, **{ser: lo, x: lv}), arm_of(study, **{ser: hi, x: lv})
        if a is None or b is None or A[a]["spikes"] is None or A[b]["spikes"] is None: continue
        n += 1
        sa, sb = A[a]["spikes"], A[b]["spikes"]
        fewer += sa[0] < sb[0]
        same += sa[0] == sb[0]
        more += sa[0] > sb[0]
        if overlap(sa, sb): ov.append(lv)
        fa, fb = A[a]["final_val"], A[b]["final_val"]
        lower_loss += fa is not None and fb is not None and fa[0] < fb[0]
    levels = sorted({a["levels"][ser] for a in study["arms"]}, key=lambda lb: _x(study, ser, lb))
    div = ", ".join("%s %s: %d/%d" % (ser, lv, sum(A[a["name"]]["diverged"] for a in study["arms"]
                                                    if a["levels"][ser] == lv),
                                      sum(A[a["name"]]["runs"] for a in study["arms"] if a["levels"][ser] == lv))
                    for lv in levels)
    s = "**%s** (%s): %s, " % (study["claim"]["id"], study["claim"]["text"], cap(scale_phrase(study)))
    if n == 0: return s + "no pair of arms to compare (missing runs)."
    if total == 0:
        s += ("no run had a spike by the guard's rule (z %s, window %s), so this scale neither supports nor "
              "contradicts the claim about spikes. " % (_z(A), _w(A)))
    else:
        s += ("%s %s had fewer spikes than %s in %d of %d %s arms, as many in %d, more in %d (medians over seeds; "
              "%d spikes in all, z %s, window %s); the seed ranges overlap in %d of %d%s. " % (
                  ser, lo, hi, fewer, n, x, same, more, total, _z(A), _w(A), len(ov), n,
                  " (%s %s)" % (x, ", ".join(ov)) if ov else ""))
        verdict = ("consistent with the claim in every arm, beyond the seed spread" if fewer == n and not ov else
                   "leaning towards the claim, within the seed spread in %d arm(s)" % len(ov) if fewer > n / 2 else
                   "not supporting the claim at this scale")
        s += "Evidence: %s. " % verdict
    s += "Diverged runs: %s. The final validation loss of %s %s was lower than %s's in %d of %d %s arms." % (
        div, ser, lo, hi, lower_loss, n, x)
    return s


def claim_init(study, A, rep):
    x, ser, ref = rep.get("x", "sigma"), rep.get("series", "scaled"), rep.get("ref", "1")
    above = [a for a in study["arms"] if _x(study, x, a["levels"][x]) > float(ref)]
    runs = sum(A[a["name"]]["runs"] for a in above)
    div = sum(A[a["name"]]["diverged"] for a in above)
    worse = beyond = n = 0
    parts = []
    for a in above:
        r = arm_of(study, **{x: ref, ser: a["levels"][ser]})
        fa, fr = A[a["name"]]["final_val"], A[r]["final_val"] if r else None
        if fa is None or fr is None: continue
        n += 1
        worse += fa[0] > fr[0]
        beyond += not overlap(fa, fr)
        parts.append("%s %s, %s %s: %.4f vs %.4f" % (x, a["levels"][x], ser, a["levels"][ser], fa[0], fr[0]))
    s = "**%s** (%s): %s, " % (study["claim"]["id"], study["claim"]["text"], cap(scale_phrase(study)))
    if runs == 0: return s + "no run above sigma %s finished." % ref
    s += "runs with the init std above %s x sqrt(1/(3H)) diverged in %d of %d; " % (ref, div, runs)
    s += ("their final validation loss was above sigma %s's (same %s) in %d of %d arms, beyond the seed spread in %d "
          "(%s). " % (ref, ser, worse, n, beyond, "; ".join(parts)))
    verdict = ("'fails to converge' holds here: every run above sigma %s diverged" % ref if div == runs else
               "'fails to converge' holds only in part: %d of %d runs diverged" % (div, runs) if div else
               "'fails to converge' does not hold at this scale: every run converged; a larger init %s" % (
                   "cost final loss beyond the seed spread in %d of %d arms" % (beyond, n) if beyond else
                   "changed the final loss within the seed spread"))
    return s + "Evidence: %s." % verdict


def claim_ramp(study, A, rep):
    ref, vs = rep.get("ref", "paper"), rep.get("vs", "off")
    ax = study["axes"][0]
    parts = ["%s %s: %s" % (ax, a["levels"][ax], rng(A[a["name"]]["final_val"])) for a in study["arms"]]
    s = "**%s** (%s): %s, at equal tokens the final validation loss (median [min, max]) was %s. " % (
        study["claim"]["id"], study["claim"]["text"], cap(scale_phrase(study)), "; ".join(parts))
    a, b = arm_of(study, **{ax: ref}), arm_of(study, **{ax: vs})
    fa, fb = (A[a]["final_val"] if a else None), (A[b]["final_val"] if b else None)
    if fa is None or fb is None: return s + "The %s and %s arms are not both finished." % (ref, vs)
    d = fa[0] - fb[0]
    s += "The %s ramp ended %.4f %s than %s, %s the seed spread. " % (
        ref, abs(d), "lower" if d < 0 else "higher", vs, "within" if overlap(fa, fb) else "beyond")
    verdict = ("no conclusion at this scale (the ranges overlap)" if overlap(fa, fb) else
               "supports ramping at this scale" if d < 0 else "contradicts ramping at this scale")
    sp = "; ".join("%s %s: %d" % (ax, x["levels"][ax], A[x["name"]]["spikes_total"]) for x in study["arms"])
    return s + "Evidence: %s. Spikes in all seeds: %s." % (verdict, sp)


def claim_allocation(study, A, rep):
    ax = study["axes"][0]
    done = [(A[a["name"]]["final_val"], a) for a in study["arms"] if A[a["name"]]["final_val"] is not None]
    C = 6.0 * study["N"] * study["tokens"]
    s = "**allocation**: %s, at a budget of C = %.3g FLOPs (6ND) " % (scale_phrase(study), C)
    if not done: return s + "no arm finished."
    done.sort(key=lambda p: p[0][0])
    (fb, best) = done[0]
    s += "the lowest median validation loss was %.4f at %s tokens per parameter (N %.3gM, %s tokens, realized " \
         "%.2g tokens per parameter)" % (fb[0], best["levels"][ax], best["N"] / 1e6, format(best["tokens"], ","),
                                         best["x"][ax])
    if len(done) > 1:
        (f2, nxt) = done[1]
        s += "; next %.4f at %s, %s the seed spread" % (f2[0], nxt["levels"][ax],
                                                        "within" if overlap(fb, f2) else "beyond")
    return s + "."


def _z(A):
    zs = sorted({z for g in A.values() for z in g["z"]})
    return "/".join("%g" % z for z in zs) or "-"


def _w(A):
    ws = sorted({w for g in A.values() for w in g["window"]})
    return "/".join("%d" % w for w in ws) or "-"


CLAIMS = {"beta2": claim_beta2, "init": claim_init, "ramp": claim_ramp, "allocation": claim_allocation}


# ---------------------------------------------------------------------------------------------------------
# the page

def write_report(out):
    with open(os.path.join(out, "study.json")) as f:
        study = json.load(f)
    offline_z = float(study.get("spikes", {}).get("z", spikes.OFFLINE_Z))
    rep = study.get("report", {})
    kind = rep.get("kind")
    by_arm = {a["name"]: [] for a in study["arms"]}
    rows = []
    for run in study["runs"]:
        s = run_summary(run, offline_z)
        s.update({"arm": run["arm"], "seed": run["seed"], "dir": run["dir"]})
        by_arm[run["arm"]].append(s)
        rows.append(s)
    A = {}
    for name, rs in by_arm.items():
        ok = [r for r in rs if r["state"] != "missing"]
        A[name] = {"runs": len(ok), "planned": len(rs), "final_val": agg([r["final_val"] for r in ok]),
                   "spikes": agg([r["spikes"] for r in ok]), "spikes_total": sum(r["spikes"] for r in ok),
                   "skipped": sum(r["skipped"] for r in ok), "diverged": sum(bool(r["diverged"]) for r in ok),
                   "recovery": agg([r["recovery_median"] for r in ok]),
                   "height_sd": agg([r["max_height_sd"] for r in ok]), "b_simple": agg([r["b_simple"] for r in ok]),
                   "z": {r["z"] for r in ok}, "window": {r["window"] for r in ok}}
    figdir = os.path.join(out, "report")
    os.makedirs(figdir, exist_ok=True)
    figs = []
    if any(r.get("curve") for r in rows):
        fig_curves(study, by_arm, os.path.join(figdir, "curves.png"))
        figs.append(("curves.png", "Train loss per arm against tokens: median over seeds (line), min-max (band); "
                                   "validation loss medians (dots)."))
        if kind == "beta2":
            fig_metric(study, A, rep.get("x", "lr"), rep.get("series", "beta2"),
                       [("spikes", "spikes per run (median, min-max)"), ("final_val", "final validation loss")],
                       os.path.join(figdir, "spikes.png"))
            figs.append(("spikes.png", "Spikes per run and final validation loss against the LR multiple, one "
                                       "line per beta2 (median, min-max over seeds)."))
        if kind == "init":
            fig_metric(study, A, rep.get("x", "sigma"), rep.get("series", "scaled"),
                       [("final_val", "final validation loss"), ("spikes", "spikes per run")],
                       os.path.join(figdir, "init.png"))
            figs.append(("init.png", "Final validation loss and spikes against the init std multiple sigma "
                                     "(x sqrt(1/(3H))), with and without the scaled output init."))
        if kind == "ramp":
            fig_batch(study, by_arm, os.path.join(figdir, "batch.png"))
            figs.append(("batch.png", "The global batch each arm used against tokens (first seed)."))
        if kind == "allocation":
            fig_metric(study, A, study["axes"][0], None, [("final_val", "final validation loss at equal FLOPs")],
                       os.path.join(figdir, "allocation.png"))
            figs.append(("allocation.png", "Final validation loss against the realized tokens per parameter, every "
                                           "arm at the same compute (median, min-max over seeds)."))
    has_bs = any(r.get("bs_curve") for r in rows)
    if has_bs:
        fig_bsimple(study, by_arm, os.path.join(figdir, "bsimple.png"))
        figs.append(("bsimple.png", "The gradient noise scale B_simple against the train loss, every run."))

    L = ["# Ablation: %s%s" % (study["study"], " (smoke)" if study.get("smoke") else ""), ""]
    if study.get("question"): L += [study["question"], ""]
    sh = study["shape"]
    L += ["Scale %s: L %d, H %d, heads %d, seq %d, V %d, %s parameters; %s (%d steps of the final global batch of "
          "%d sequences); %d rank(s) per run; seeds %s. Generated by dev/ablate_report.py from the runs' logs "
          "under `%s`." % (
              study["scale"], sh["L"], sh["H"], sh["heads"], sh["seq"], study["V"], format(study["N"], ","),
              tokens_phrase(study), study["tokens"] // (study["gb"] * sh["seq"]), study["gb"], study["ranks"],
              ",".join(map(str, study["seeds"])), out), ""]
    notes = rep.get("notes")
    if notes: L += [notes, ""]
    L += ["## The claim", ""]
    L += [CLAIMS[kind](study, A, rep) if kind in CLAIMS and study.get("claim") else "(no claim for this study)", ""]
    if not has_bs:
        L += ["B_simple: absent (it is logged only with DP >= 2; these runs had %d rank(s))." % study["ranks"], ""]
    L += ["## Arms", "", "Median [min, max] over the finished seeds.", "",
          "| arm | runs | final val loss | spikes | max height (sd) | recovery (steps) | skipped | diverged "
          "| B_simple |", "|---|---|---|---|---|---|---|---|---|"]
    for a in study["arms"]:
        g = A[a["name"]]
        L.append("| %s | %d/%d | %s | %s | %s | %s | %d | %d | %s |" % (
            a["name"], g["runs"], g["planned"], rng(g["final_val"]), rng(g["spikes"], 0), rng(g["height_sd"], 1),
            rng(g["recovery"], 0), g["skipped"], g["diverged"], rng(g["b_simple"], 1)))
    L += [""]
    if len({(a["N"], a["tokens"]) for a in study["arms"]}) > 1:  # allocation: each arm its own shape and tokens
        L += ["| arm | L | H | heads | parameters | tokens | tokens per parameter | 6ND FLOPs |",
              "|---|---|---|---|---|---|---|---|"]
        for a in study["arms"]:
            L.append("| %s | %d | %d | %d | %s | %s | %.3g | %.3g |" % (
                a["name"], a["shape"][0], a["shape"][1], a["shape"][2], format(a["N"], ","),
                format(a["tokens"], ","), a["tokens"] / a["N"], 6.0 * a["N"] * a["tokens"]))
        L += [""]
    for fn, cap in figs: L += ["![%s](report/%s)" % (fn, fn), "", cap, ""]
    L += ["## Runs", "", "| arm | seed | state | final val loss | spikes | max height (sd / loss) | recovery median "
          "| not recovered | skipped | diverged | wall s |", "|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        if r["state"] == "missing":
            L.append("| %s | %d | missing | | | | | | | | |" % (r["arm"], r["seed"]))
            continue
        h = "-" if r["max_height_sd"] is None else "%.1f / %.4f" % (r["max_height_sd"], r["max_height_loss"])
        L.append("| %s | %d | %s | %s | %d | %s | %s | %d | %d | %s | %s |" % (
            r["arm"], r["seed"], r["state"], f4(r["final_val"]), r["spikes"], h,
            "-" if r["recovery_median"] is None else "%g" % r["recovery_median"], r["not_recovered"], r["skipped"],
            "yes" if r["diverged"] else "no", "-" if r["wall_s"] is None else "%.0f" % r["wall_s"]))
    L += ["", "## Definitions", "",
          "- **spike**: the live guard's rule (llmc/host/spike.h, offline in dev/spikes.py): the loss or the grad "
          "norm above mean + z sd of the window of the last W accepted steps (sd floored at 1e-3 |mean|, judged "
          "once the window holds min(8, W) values); a flagged step never enters the window. z and W are the "
          "run's own when its guard was on (then spikes = skipped steps), else z = %g and the run's W." % offline_z,
          "- **height**: max((loss - mean)/sd, (gnorm - mean)/sd) of the window at the spike, and loss - mean.",
          "- **recovery**: steps from a spike to the first later step whose loss is at most the window's mean "
          "+ 1 sd at the spike; *not recovered* counts spikes after which it never was.",
          "- **skipped**: steps the live guard skipped (the log's `skip` fields).",
          "- **diverged**: a non-finite loss or grad norm in the log, a last train loss above the first, or a "
          "run stopped by the guard (exit 3).",
          "- **final val loss**: the run's last validation record (the trainer validates after its last step)."]
    path = os.path.join(out, "report.md")
    with open(path, "w") as f:
        f.write("\n".join(L) + "\n")
    slim = {k: {kk: (sorted(vv) if isinstance(vv, set) else vv) for kk, vv in v.items()} for k, v in A.items()}
    runs = [{k: v for k, v in r.items() if not k.endswith("curve")} for r in rows]
    with open(os.path.join(out, "summary.json"), "w") as f:
        json.dump({"arms": slim, "runs": runs}, f, indent=1)
    return path


if __name__ == "__main__":
    if len(sys.argv) != 2 or sys.argv[1] in ("-h", "--help"):
        print(__doc__)
        sys.exit(0 if len(sys.argv) == 2 else 2)
    print(write_report(sys.argv[1]))
