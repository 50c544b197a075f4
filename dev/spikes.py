#!/usr/bin/env python3
"""dev/spikes.py: the loss-spike rule of the live guard (llmc/host/spike.h), offline, on a run's log.jsonl.

One definition, used live and offline. Step t is flagged when
  - its loss or grad norm is not finite ("nonfinite", at any z), or
  - z > 0, the window holds >= min_samples values, and loss_t > mean + z*sd of the window's losses or
    gnorm_t > mean + z*sd of its grad norms ("spike"); sd is the sample standard deviation, floored at
    1e-3 * |mean|.
The window holds the loss and grad norm of the last W ACCEPTED steps: a flagged step never enters it.
min_samples = min(8, W) (llmc/host/run.h: spike_init(&R->spike, W, 8)). The window is not checkpointed,
so a "resume" event in the log empties it, as the trainer's restart does. The sums run in the ring
buffer's slot order, as spike.h's do, so the statistics round the same way.

With the live guard on (-skip-spikes Z > 0) the flagged steps are exactly the skipped ones (the "skip"
fields of the log); with it off the run's own Z is 0 and the rule runs offline at z = 4 and the run's
-spike-window (default 100), so spikes are counted but were not skipped. The log holds 9 significant
digits of the loss and grad norm; a value within ~1e-9 relative of the threshold could be judged
differently from the live guard, which used the full double.

Per flagged step: the height in SDs, max((loss-mean)/sd, (gnorm-mean)/sd) over the two series, and in
loss units, loss - mean; the recovery: steps from it to the first later step whose loss is at most
the window's mean + 1 sd at the flagged step (the pre-spike level), None when the loss never got back.

usage: spikes.py LOG [--z Z] [--window W] [--flagged]
  prints one line per flagged step and a summary; --flagged: only the flagged steps, space-separated.
"""
import argparse, json, math, sys

OFFLINE_Z = 4.0   # z for runs whose guard was off (their recorded -skip-spikes is 0)
MIN_SAMPLES = 8   # llmc/host/run.h
REL_FLOOR = 1e-3  # llmc/host/spike.h


def _num(x):
    """A logged number: null (a non-finite value, JSON has none) and missing become NaN."""
    return float(x) if isinstance(x, (int, float)) else math.nan


def _stats(xs, n):
    """Mean and sample sd of the first n slots, two passes in slot order (spike_stats)."""
    m = 0.0
    for i in range(n): m += xs[i]
    m /= n
    v = 0.0
    for i in range(n): v += (xs[i] - m) * (xs[i] - m)
    return m, (math.sqrt(v / (n - 1)) if n > 1 else 0.0)


class Guard:
    """spike.h's SpikeGuard: a ring buffer of W accepted (loss, gnorm) pairs."""

    def __init__(self, window=100, min_samples=MIN_SAMPLES):
        self.W = max(int(window), 2)
        self.min_samples = min(max(int(min_samples), 2), self.W)
        self.reset()

    def reset(self):
        self.loss, self.gnorm = [0.0] * self.W, [0.0] * self.W
        self.n = self.head = 0

    def check(self, loss, gnorm, z):
        """("none" | "spike" | "nonfinite", stats); stats = (mean_loss, sd_loss, mean_gnorm, sd_gnorm) or None."""
        if not (math.isfinite(loss) and math.isfinite(gnorm)):
            return "nonfinite", None
        stats = None
        if z > 0 and self.n >= self.min_samples:
            ml, sl = _stats(self.loss, self.n)
            mg, sg = _stats(self.gnorm, self.n)
            sl = max(sl, REL_FLOOR * abs(ml))
            sg = max(sg, REL_FLOOR * abs(mg))
            stats = (ml, sl, mg, sg)
            if loss > ml + z * sl or gnorm > mg + z * sg:
                return "spike", stats  # a flagged step never enters the window
        self._push(loss, gnorm)
        return "none", stats

    def _push(self, loss, gnorm):
        self.loss[self.head], self.gnorm[self.head] = loss, gnorm
        self.head = (self.head + 1) % self.W
        self.n = min(self.n + 1, self.W)


def read_log(path):
    """The records of a log.jsonl, in order; a cut-off or unreadable line is skipped."""
    recs = []
    with open(path, encoding="utf-8", errors="replace") as f:
        for line in f:
            try:
                r = json.loads(line)
            except ValueError:
                continue
            if isinstance(r, dict): recs.append(r)
    return recs


def run_params(recs):
    """The guard's z and window as the run recorded them (the config record), defaults otherwise."""
    flags = next((r.get("flags", {}) for r in recs if r.get("type") == "config"), {})
    return float(flags.get("-skip-spikes", 0.0)), int(flags.get("-spike-window", 100))


def detect(recs, z=None, window=None):
    """Flagged steps of a log's records: a list of dicts (step, kind, loss, gnorm, height_sd, height_loss,
    level, recovery). z and window default to the run's own guard (z = OFFLINE_Z when it was off)."""
    live_z, live_w = run_params(recs)
    z = z if z is not None else (live_z if live_z > 0 else OFFLINE_Z)
    g = Guard(window if window is not None else live_w)
    flagged, train = [], []
    for r in recs:
        if r.get("type") == "event" and r.get("event") == "resume":
            g.reset()
            continue
        if r.get("type") != "train": continue
        loss, gnorm = _num(r.get("loss")), _num(r.get("gnorm"))
        train.append((r.get("step"), loss))
        kind, st = g.check(loss, gnorm, z)
        if kind == "none": continue
        f = {"step": r.get("step"), "kind": kind, "loss": loss, "gnorm": gnorm, "index": len(train) - 1,
             "height_sd": None, "height_loss": None, "level": None, "recovery": None}
        if st is not None:
            ml, sl, mg, sg = st
            f["height_sd"] = max((loss - ml) / sl, (gnorm - mg) / sg)
            f["height_loss"] = loss - ml
            f["level"] = ml + sl
        flagged.append(f)
    for f in flagged:  # recovery: the first later step back at or below the pre-spike mean + 1 sd
        if f["level"] is None: continue
        for step, loss in train[f["index"] + 1:]:
            if math.isfinite(loss) and loss <= f["level"]:
                f["recovery"] = step - f["step"]
                break
    return flagged, z, g.W


def main():
    ap = argparse.ArgumentParser(description="the live spike guard's rule, offline, on a log.jsonl")
    ap.add_argument("log")
    ap.add_argument("--z", type=float, default=None, help="z (default: the run's -skip-spikes, or %g when 0)"
                    % OFFLINE_Z)
    ap.add_argument("--window", type=int, default=None, help="window (default: the run's -spike-window)")
    ap.add_argument("--flagged", action="store_true", help="print only the flagged steps, space-separated")
    a = ap.parse_args()
    flagged, z, W = detect(read_log(a.log), a.z, a.window)
    if a.flagged:
        print(" ".join(str(f["step"]) for f in flagged))
        return
    for f in flagged:
        h = "" if f["height_sd"] is None else " height %.2f sd (%+.4f loss)" % (f["height_sd"], f["height_loss"])
        rec = "" if f["level"] is None else (" recovered after %s steps" % f["recovery"] if f["recovery"] is not None
                                             else " never recovered")
        print("step %s %s loss %.6g gnorm %.6g%s%s" % (f["step"], f["kind"], f["loss"], f["gnorm"], h, rec))
    print("%d flagged (z %g, window %d)" % (len(flagged), z, W))


if __name__ == "__main__":
    sys.exit(main())
