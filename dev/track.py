#!/usr/bin/env python3
"""Experiment tracking: a run's DIR/log.jsonl into TensorBoard (and Weights & Biases), through
the libraries' own writers, so nothing reads a format written by hand.

    PY=~/.cache/llmc/hf-venv/bin/python          # the venv of dev/install.sh
    $PY dev/track.py --tensorboard out/run        # after the fact: out/run/tb
    $PY dev/track.py --tensorboard --follow out/run   # live, until the run ends or Ctrl-C
    tensorboard --logdir out/run/tb
    $PY dev/track.py --wandb out/run              # an offline W&B run; upload with `wandb sync`

Reads the trainer's JSONL log (llmc/host/logger.h, llmc/host/run.h, llmc/host/eval.h): the
first line {"type":"config","argv":[..],"layout":{..},"flags":{..}}, then "train", "val",
"eval" and "event" records. Writes, keyed by step:
  - train/<field> for every number of a train record (loss, lr, gb, tokens, gnorm, ms, tok_s,
    ...), val/loss, eval/cloze_acc, eval/cloze_ppl, eval/cloze_items; with blends,
    val/loss_<dataset> (each -j dataset) and data/<dataset>_share, data/<dataset>_epochs;
  - by_tokens/train_loss, by_tokens/val_loss, by_tokens/cloze_acc with tokens as the step
    (TensorBoard has one x axis per tag);
  - the config as text (config/argv, config/json) and as hparams (flags without the dash,
    layout.*), events and skipped updates as text (events).
  - text samples ("sample" records: prompt and generated text, or the ids without a
    tokenizer) as text (samples), at their step.

Rerunning is safe: each run of track.py writes a fresh event file set, first deleting the
event files an earlier run of track.py left in the log dir (named *.llmc-track; other event
files there are left alone, with a warning). With --wandb the offline run has an id fixed by
the directory, and an earlier local copy of it is replaced.

What real logs hold: a last line cut off by a kill is skipped (--follow waits for its end
while the run lives); unreadable lines are skipped and counted; null (the trainer's NaN or
Inf), and bare nan / inf written by printf, become NaN / inf points (a null eta_s means
unknown and is left out); a step that goes back (a resumed run's older log) drops the
records from that step on, as dev/plot.py does. --follow polls the file and ends once the
run's lock on DIR (DIR/lock, outdir.h) is released and the log is drained; a log replaced
by a resume starts the event files over.
"""
import argparse
import glob
import hashlib
import importlib
import json
import math
import os
import re
import shlex
import shutil
import subprocess
import sys
import time

SUFFIX = ".llmc-track"  # marks the event files this tool writes (and may delete)
NOT_SCALARS = {"type", "step", "rank", "tp", "pp", "dp", "skip"}  # train fields that are not metrics
NULL_UNKNOWN = {"eta_s"}  # null means "not known yet", not a non-finite value

# bare nan / inf values (C printf) -> tokens Python's json accepts (as dev/plot.py)
_NONFINITE = re.compile(r'(?<=[:\[,])\s*(-?)(nan|inf|infinity)\b', re.IGNORECASE)


def die(msg):
    print(f"error: {msg}", file=sys.stderr)
    sys.exit(1)


def importable(name):
    try:
        importlib.import_module(name)
        return True
    except ImportError:
        return False


def tensorboard_missing(err):
    """What to do when torch.utils.tensorboard does not import: name every package this
    Python lacks, and the venv of dev/install.sh, which has them all. PyPI's torch for Linux
    pulls ~3 GB of CUDA wheels, so `pip install torch` is not what to suggest."""
    venv = os.path.join(os.environ.get("LLMC_HF_VENV", os.path.expanduser("~/.cache/llmc/hf-venv")), "bin", "python")
    missing = [m for m in ("torch", "tensorboard") if not importable(m)]
    missing = missing or [f"a working torch.utils.tensorboard ({err})"]
    ready = False
    if os.access(venv, os.X_OK) and os.path.abspath(venv) != os.path.abspath(sys.executable):
        ready = subprocess.run([venv, "-c", "import torch.utils.tensorboard"], capture_output=True).returncode == 0
    if ready:
        use = f"run track.py with {venv}, which has both"
    else:
        use = f"run `bash dev/install.sh` (it makes {venv}, with both) and run track.py with that Python"
    if missing == ["tensorboard"] and sys.prefix != sys.base_prefix:  # (a venv: Debian's own Python refuses pip)
        use += f", or {sys.executable} -m pip install tensorboard"
    return f"--tensorboard needs torch and tensorboard; {sys.executable} lacks {' and '.join(missing)}: {use}"


def parse_line(line):
    """One log line -> a record dict, or None when it is not a readable record."""
    line = line.strip()
    if not line:
        return None
    line = _NONFINITE.sub(
        lambda m: "NaN" if m.group(2).lower() == "nan" else ("-Infinity" if m.group(1) else "Infinity"), line)
    try:
        rec = json.loads(line)
    except ValueError:
        return None
    if not isinstance(rec, dict) or not isinstance(rec.get("type"), str):
        return None
    return rec


def num(x):
    """A log value as a float: null -> NaN; None when it is not a number at all."""
    if x is None:
        return math.nan
    if isinstance(x, bool) or not isinstance(x, (int, float)):
        return None
    return float(x)


def int_step(rec):
    s = rec.get("step")
    return s if isinstance(s, int) and not isinstance(s, bool) else None


def dedup(records):
    """The last attempt's view of the timeline: a train record whose step is at or below one
    already seen (a resume appended to an older log) drops every train, val and eval record
    from that step on, and a resume event drops those past its step."""
    out = []
    for r in records:
        s = int_step(r)
        cut = None
        if r["type"] == "train" and s is not None:
            cut = s
        elif r["type"] == "event" and r.get("event") in ("resume", "rewind") and s is not None:
            cut = s + 1
        if cut is not None:
            out = [o for o in out
                   if not (o["type"] in ("train", "val", "eval", "sample") and (int_step(o) or 0) >= cut)]
        out.append(r)
    return out


class LogReader:
    """Reads the complete lines appended to a log since the last call; notices a log
    replaced (another inode) or cut shorter, which the caller answers by starting over."""

    def __init__(self, path):
        self.path = path
        self.reset()

    def reset(self):
        self.offset = 0
        self.ino = None
        self.partial = b""
        self.bad = 0

    def read(self):
        """-> (records, replaced)."""
        try:
            st = os.stat(self.path)
        except FileNotFoundError:
            return [], False
        replaced = self.ino is not None and (st.st_ino != self.ino or st.st_size < self.offset)
        if replaced:
            self.reset()
        self.ino = st.st_ino
        with open(self.path, "rb") as f:
            f.seek(self.offset)
            data = f.read()
        self.offset += len(data)
        data = self.partial + data
        lines = data.split(b"\n")
        self.partial = lines.pop()  # the text after the last newline: a line still being written
        return self._parse(lines), replaced

    def finish(self):
        """The end of the log: a last line without its newline is kept only if it is whole."""
        tail, self.partial = self.partial, b""
        if not tail.strip():
            return [], 0
        rec = parse_line(tail.decode("utf-8", "replace"))
        return ([rec], 0) if rec is not None else ([], 1)

    def _parse(self, lines):
        out = []
        for b in lines:
            if not b.strip():
                continue
            rec = parse_line(b.decode("utf-8", "replace"))
            if rec is None:
                self.bad += 1
            else:
                out.append(rec)
        return out


def lock_held(run_dir):
    """1 while a trainer holds its flock on DIR/lock. Read from /proc/locks, so probing
    never takes the lock itself (a trainer starting at that moment would be refused);
    elsewhere, whether the pid written in DIR/lock is alive."""
    path = os.path.join(run_dir, "lock")
    try:
        st = os.stat(path)
    except OSError:
        return False
    try:
        with open("/proc/locks") as f:
            table = f.read().splitlines()
    except OSError:
        table = None
    if table is not None:
        want = (os.major(st.st_dev), os.minor(st.st_dev), st.st_ino)
        for row in table:
            parts = row.split()
            if len(parts) < 6 or parts[1] != "FLOCK":
                continue
            dev = parts[5].split(":")
            try:
                if (int(dev[0], 16), int(dev[1], 16), int(dev[2])) == want:
                    return True
            except (ValueError, IndexError):
                continue
        return False
    try:
        with open(path) as f:
            pid = int(f.read().split()[0])
        os.kill(pid, 0)
        return True
    except (OSError, ValueError, IndexError):
        return False


def hparams_of(cfg):
    """The config record's flags and layout as hparams: int, float, str or bool values."""
    hp = {}
    for k, v in (cfg.get("flags") or {}).items():
        name = k.lstrip("-")
        if isinstance(v, (bool, int, float, str)):
            hp[name] = v
        else:
            hp[name] = json.dumps(v)
    for k, v in (cfg.get("layout") or {}).items():
        if isinstance(v, (bool, int, float, str)):
            hp["layout." + k] = v
    return hp


def argv_text(cfg):
    return "train_gpt " + " ".join(shlex.quote(str(a)) for a in cfg.get("argv") or [])


def sample_text(rec):
    """A sample as markdown: the prompt in bold, then the generated text (ids without a tokenizer)."""
    if isinstance(rec.get("text"), str):
        return f"**{rec.get('prompt', '')}**{rec['text']}"
    return f"ids {rec.get('prompt_ids')} -> {rec.get('ids')}"


def event_text(rec):
    return json.dumps({k: v for k, v in rec.items() if k != "type"})


class TensorBoardSink:
    """Event files through torch.utils.tensorboard's SummaryWriter (the tensorboard package
    underneath)."""

    def __init__(self, logdir):
        try:
            from torch.utils.tensorboard import SummaryWriter
            from torch.utils.tensorboard.summary import hparams
        except ImportError as e:
            die(tensorboard_missing(e))
        self.SummaryWriter, self.hparams = SummaryWriter, hparams
        self.logdir = logdir
        self.w = None
        self.start()

    def start(self):
        """A fresh event file set: the ones an earlier run of this tool wrote go first."""
        if self.w is not None:
            self.w.close()
        os.makedirs(self.logdir, exist_ok=True)
        for p in glob.glob(os.path.join(self.logdir, "events.out.tfevents.*" + SUFFIX)):
            os.remove(p)
        others = [p for p in glob.glob(os.path.join(self.logdir, "events.out.tfevents.*")) if not p.endswith(SUFFIX)]
        if others:
            print(f"track: warning: {self.logdir} holds {len(others)} event file(s) not written by track.py; "
                  "TensorBoard shows their points too", file=sys.stderr)
        self.w = self.SummaryWriter(log_dir=self.logdir, filename_suffix=SUFFIX)

    def config(self, cfg):
        self.w.add_text("config/argv", argv_text(cfg), 0)
        self.w.add_text("config/json", "    " + json.dumps(cfg, indent=1).replace("\n", "\n    "), 0)
        # hparams in this run (SummaryWriter.add_hparams would make a run of its own); the
        # metrics are this run's own scalar tags
        for s in self.hparams(hparams_of(cfg), {"train/loss": 0.0, "val/loss": 0.0}):
            self.w._get_file_writer().add_summary(s)

    def scalar(self, tag, value, step):
        self.w.add_scalar(tag, value, step)

    def text(self, tag, text, step):
        self.w.add_text(tag, text, step)

    def flush(self):
        self.w.flush()

    def close(self):
        self.w.close()


class WandbSink:
    """An offline Weights & Biases run in DIR/wandb, uploaded later by `wandb sync`."""

    def __init__(self, run_dir, project):
        os.environ["WANDB_MODE"] = "offline"
        os.environ.setdefault("WANDB_SILENT", "true")
        try:
            import wandb
        except ImportError:
            die(f"--wandb needs the wandb package: {sys.executable} -m pip install wandb (or run dev/install.sh)")
        self.wandb = wandb
        self.run_dir = os.path.abspath(run_dir)
        self.project = project
        self.id = "llmc-" + hashlib.sha1(self.run_dir.encode()).hexdigest()[:12]
        self.run = None
        self.rows = {}  # step -> the metrics of that step not yet logged
        self.events, self.samples = [], []
        self.last = -1

    def start(self, cfg):
        wdir = os.path.join(self.run_dir, "wandb")
        os.makedirs(wdir, exist_ok=True)
        for p in glob.glob(os.path.join(wdir, "offline-run-*-" + self.id)):  # one local copy
            shutil.rmtree(p, ignore_errors=True)
        conf = hparams_of(cfg)
        conf["argv"] = argv_text(cfg)
        self.run = self.wandb.init(project=self.project, dir=self.run_dir, id=self.id, mode="offline",
                                   name=os.path.basename(self.run_dir), config=conf)

    def scalar(self, tag, value, step):
        if tag.startswith("by_tokens/"):
            return  # "tokens" is logged with every step: choose it as the x axis in W&B
        self.rows.setdefault(step, {})[tag] = value

    def text(self, tag, text, step):
        if tag == "events":
            self.events.append((step, text))
        elif tag == "samples":
            self.samples.append((step, text))

    def flush(self):
        # one wandb.log per step, in order; W&B drops a step below one already logged
        for step in sorted(self.rows):
            if step >= self.last:
                self.run.log(self.rows[step], step=step)
                self.last = step
        self.rows = {}

    def close(self):
        if self.run is None:
            return
        self.flush()
        if self.events:
            self.run.log({"events": self.wandb.Table(columns=["step", "event"], data=self.events)}, step=self.last)
        if self.samples:
            self.run.log({"samples": self.wandb.Table(columns=["step", "sample"], data=self.samples)}, step=self.last)
        self.run.finish()
        print(f"track: W&B offline run in {os.path.join(self.run_dir, 'wandb')}; upload: "
              f"wandb sync {os.path.join(self.run_dir, 'wandb', 'offline-run-*-' + self.id)}")


class Tracker:
    """Turns records into points for the sinks."""

    def __init__(self, tb, wb):
        self.tb, self.wb = tb, wb
        self.sinks = [s for s in (tb, wb) if s is not None]
        self.counts = {"train": 0, "val": 0, "eval": 0, "event": 0, "sample": 0}
        self.step = 0  # the last train step: where an event without a step is placed
        self.have_config = False

    def restart(self):
        if self.tb:
            self.tb.start()
        self.counts = dict.fromkeys(self.counts, 0)
        self.step = 0
        self.have_config = False

    def scalar(self, tag, value, step):
        for s in self.sinks:
            s.scalar(tag, value, step)

    def text(self, tag, text, step):
        for s in self.sinks:
            s.text(tag, text, step)

    def add(self, rec):
        t, step = rec["type"], int_step(rec)
        if t == "config":
            if not self.have_config:
                self.have_config = True
                if self.tb:
                    self.tb.config(rec)
                if self.wb and self.wb.run is None:
                    self.wb.start(rec)
            return
        if self.wb and self.wb.run is None:
            self.wb.start({})  # a log without its config line (written by -log before the record existed)
        tokens = rec.get("tokens") if isinstance(rec.get("tokens"), int) else None
        if t == "train" and step is not None:
            self.step = step
            for k, v in rec.items():
                x = num(v)
                if k in NOT_SCALARS or x is None or (v is None and k in NULL_UNKNOWN):
                    continue
                self.scalar("train/" + k, x, step)
            if tokens is not None and num(rec.get("loss")) is not None:
                self.scalar("by_tokens/train_loss", num(rec.get("loss")), tokens)
            if isinstance(rec.get("skip"), str):
                self.text("events", f"step {step}: update skipped ({rec['skip']})", step)
            self.counts["train"] += 1
        elif t == "val" and step is not None and num(rec.get("val_loss")) is not None:
            self.scalar("val/loss", num(rec["val_loss"]), step)
            by = rec.get("val_loss_by") if isinstance(rec.get("val_loss_by"), dict) else {}
            for name, v in by.items():  # a validation blend: each dataset's loss
                if num(v) is not None:
                    self.scalar(f"val/loss_{name}", num(v), step)
            data = rec.get("data") if isinstance(rec.get("data"), dict) else {}
            for name, d in data.items():  # a training blend: what each dataset has given so far
                for k in ("share", "epochs"):
                    if isinstance(d, dict) and num(d.get(k)) is not None:
                        self.scalar(f"data/{name}_{k}", num(d[k]), step)
            if tokens is not None:
                self.scalar("by_tokens/val_loss", num(rec["val_loss"]), tokens)
            self.counts["val"] += 1
        elif t == "eval" and step is not None:
            for k in ("cloze_acc", "cloze_ppl", "cloze_items"):
                if num(rec.get(k)) is not None:
                    self.scalar("eval/" + k, num(rec[k]), step)
            if tokens is not None and num(rec.get("cloze_acc")) is not None:
                self.scalar("by_tokens/cloze_acc", num(rec["cloze_acc"]), tokens)
            self.counts["eval"] += 1
        elif t == "sample" and step is not None:
            self.text("samples", sample_text(rec), step)
            self.counts["sample"] += 1
        elif t == "event":
            self.text("events", event_text(rec), step if step is not None else self.step)
            self.counts["event"] += 1

    def flush(self):
        for s in self.sinks:
            s.flush()

    def close(self):
        for s in self.sinks:
            s.close()


def follow(reader, tracker, run_dir, poll):
    """Live: new lines as they come, until the run's lock is released (then the rest)."""
    seen = []  # every record so far: a replaced log or a step that goes back starts over
    last_train = None
    try:
        while True:
            held = lock_held(run_dir)  # before reading: what was written before the release is read
            recs, replaced = reader.read()
            if not held:
                tail, bad = reader.finish()
                recs += tail
                reader.bad += bad
            if replaced:
                print("track: the log was replaced (a resume): starting the event files over", file=sys.stderr)
            back, prev = False, last_train
            for r in recs:
                if r["type"] == "train" and int_step(r) is not None:
                    back = back or (prev is not None and int_step(r) <= prev)
                    prev = int_step(r)
            seen = ([] if replaced else seen) + recs
            if replaced or back:
                tracker.restart()
                todo = dedup(seen)
            else:
                todo = recs
            for r in todo:
                tracker.add(r)
                if r["type"] == "train" and int_step(r) is not None:
                    last_train = int_step(r)
            if todo:
                tracker.flush()
            if not held:
                return
            time.sleep(poll)
    except KeyboardInterrupt:
        print("track: interrupted; what was read is written", file=sys.stderr)


def main():
    ap = argparse.ArgumentParser(description="DIR/log.jsonl -> TensorBoard event files and/or an offline W&B run")
    ap.add_argument("dir", help="the run's -o directory (or a log.jsonl file)")
    ap.add_argument("--tensorboard", action="store_true", help="write TensorBoard event files (the default)")
    ap.add_argument("--logdir", help="where the event files go (default DIR/tb)")
    ap.add_argument("--wandb", action="store_true", help="also write an offline W&B run in DIR/wandb")
    ap.add_argument("--wandb-project", default="llmc", help="the W&B project (default llmc)")
    ap.add_argument("--follow", action="store_true", help="follow a live run until its lock is released or Ctrl-C")
    ap.add_argument("--poll", type=float, default=1.0, help="--follow: seconds between reads (default 1)")
    a = ap.parse_args()
    if os.path.isfile(a.dir) or a.dir.endswith(".jsonl"):
        run_dir, log = os.path.dirname(a.dir) or ".", a.dir
    else:
        run_dir, log = a.dir, os.path.join(a.dir, "log.jsonl")
    if not os.path.isfile(log):
        # --follow on a run that is starting: it holds the lock before it creates the log
        while a.follow and lock_held(run_dir) and not os.path.isfile(log):
            time.sleep(a.poll)
        if not os.path.isfile(log):
            die(f"no log {log}: give the run's -o directory (the trainer writes DIR/log.jsonl)")
    tb = TensorBoardSink(a.logdir or os.path.join(run_dir, "tb")) if a.tensorboard or not a.wandb else None
    wb = WandbSink(run_dir, a.wandb_project) if a.wandb else None
    tracker = Tracker(tb, wb)
    reader = LogReader(log)
    if a.follow:
        follow(reader, tracker, run_dir, a.poll)
    else:
        recs, _ = reader.read()
        tail, bad = reader.finish()
        reader.bad += bad
        for r in dedup(recs + tail):
            tracker.add(r)
    tracker.close()
    c = tracker.counts
    where = [tb.logdir] if tb else []
    where += [os.path.join(run_dir, "wandb")] if wb else []
    skipped = f" (skipped {reader.bad} unreadable line(s))" if reader.bad else ""
    print(f"track: {c['train']} train, {c['val']} val, {c['eval']} eval, {c['event']} event, {c['sample']} sample "
          f"record(s) -> "
          f"{', '.join(where)}{skipped}")


if __name__ == "__main__":
    try:
        main()
    except KeyboardInterrupt:  # before --follow's loop (which writes what it read): nothing to keep
        print("track: interrupted", file=sys.stderr)
        sys.exit(130)
