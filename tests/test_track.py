"""
test_track.py: dev/track.py, the run log into TensorBoard and W&B (run by `make test-hf`, in the
venv of dev/install.sh; no network). Every expected value is parsed from log.jsonl here, and
what track.py wrote is read back by the libraries' own readers (tensorboard's
EventAccumulator; the W&B offline file through wandb's protobuf classes):

  1. a 6-step `tiny` run: train/loss at every step and val/loss at steps 2, 4, 6 equal the
     log's (float32), by_tokens/* use the tokens as step, the config is there as text and
     as hparams
  2. a second track.py on the same DIR: one event file set, no point twice
  3. a log with nan / inf / null values, an event and a truncated last line
  4. a missing log: one `error:` line, exit 1
  5. --follow on a live run: every step, and it ends by itself once the run releases its lock
  6. --wandb: the offline run's history equals the log; rerun keeps one local copy; without
     the wandb package, one `error:` line that says how to install it
  7. --tensorboard without torch, or without tensorboard: one `error:` line that names what is
     missing and the venv that has both (no `pip install tensorboard` when torch is missing)
Prints "N passed, M failed" last; exits 1 on any failure.
"""

import glob
import importlib.util
import json
import math
import os
import shutil
import struct
import subprocess
import sys
import tempfile
import time

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
os.chdir(REPO)
sys.path.insert(0, os.path.join(REPO, "tests"))
from checks import check, summary  # noqa: E402
PY = sys.executable
TRACK = [PY, "dev/track.py"]
TRAIN = ["./train_gpt", "-model", "tiny", "-seq", "32", "-V", "8192", "-mb", "2", "-gb", "4", "-ramp", "off", "-lr",
         "1e-3", "-warmup", "0", "-threads", "1", "-i", "dev/data/kjv/kjv_train_000.bin", "-j",
         "dev/data/kjv/kjv_val_000.bin", "-val-samples", "8"]


def log_records(path, kind):
    """The log's records of one type, parsed here (not by track.py)."""
    out = []
    with open(path) as f:
        for line in f:
            r = json.loads(line)
            if r["type"] == kind:
                out.append(r)
    return out


def close(a, b):
    """A float32 point vs the log's double."""
    return abs(a - b) <= 1e-6 * max(1.0, abs(b))


def accumulator(logdir):
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator
    acc = EventAccumulator(logdir, size_guidance={"scalars": 0, "tensors": 0})
    acc.Reload()
    return acc


def scalars(acc, tag):
    return [(e.step, e.value) for e in acc.Scalars(tag)] if tag in acc.Tags()["scalars"] else []


def texts(acc, tag):
    if tag not in acc.Tags()["tensors"]:
        return []
    return [(e.step, e.tensor_proto.string_val[0].decode()) for e in acc.Tensors(tag)]


def track(*args, env=None):
    return subprocess.run(TRACK + list(args), capture_output=True, text=True, timeout=120, env=env)


def train(out, steps, val_every, background=False, extra=()):
    cmd = TRAIN + ["-steps", str(steps), "-val-every", str(val_every), "-o", out] + list(extra)
    if background:
        return subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    if r.returncode != 0:
        sys.exit(f"train_gpt failed:\n{r.stdout[-2000:]}{r.stderr[-2000:]}")


def wandb_history(run_dir):
    """The offline run's history rows and config keys, from its .wandb file (a LevelDB-style
    log of wandb Record protobufs: 7-byte file header, 32 KiB blocks, 7-byte chunk headers)."""
    from wandb.proto import wandb_internal_pb2 as pb
    files = glob.glob(os.path.join(run_dir, "wandb", "offline-run-*", "run-*.wandb"))
    b = open(files[0], "rb").read()
    pos, chunks, buf = 7, [], b""
    while pos + 7 <= len(b):
        left = 32768 - pos % 32768
        if left < 7:
            pos += left
            continue
        _, n, kind = struct.unpack("<IHB", b[pos:pos + 7])
        buf += b[pos + 7:pos + 7 + n]
        pos += 7 + n
        if kind in (1, 4):  # FULL, LAST
            chunks.append(buf)
            buf = b""
        elif kind == 0:
            buf = b""
    rows, config = [], set()
    for c in chunks:
        r = pb.Record()
        r.ParseFromString(c)
        which = r.WhichOneof("record_type")
        if which == "history":
            rows.append({(i.key or "/".join(i.nested_key)): json.loads(i.value_json) for i in r.history.item})
        elif which == "run":
            config |= {u.key for u in r.run.config.update}
        elif which == "config":
            config |= {u.key for u in r.config.update}
    return rows, config


def main():
    tmp = tempfile.mkdtemp(prefix="test_track_")
    try:
        run = os.path.join(tmp, "run")
        samples = ["-sample-every", "3", "-sample-len", "4", "-tokenizer", "dev/data/kjv/kjv_tokenizer.bin"]
        train(run, 6, 2, extra=samples)
        log = os.path.join(run, "log.jsonl")
        tr, va = log_records(log, "train"), log_records(log, "val")

        # 1. after the fact
        r = track("--tensorboard", run)
        check(r.returncode == 0, f"track.py --tensorboard exits 0 ({r.stderr.strip()[-300:]})")
        acc = accumulator(os.path.join(run, "tb"))
        got = scalars(acc, "train/loss")
        check([s for s, _ in got] == [x["step"] for x in tr] == [1, 2, 3, 4, 5, 6],
              f"train/loss at steps 1..6 (got {[s for s, _ in got]})")
        check(len(got) == len(tr) and all(close(v, x["loss"]) for (_, v), x in zip(got, tr)),
              "train/loss equals the log's loss at every step")
        got = scalars(acc, "val/loss")
        check([s for s, _ in got] == [2, 4, 6] and all(close(v, x["val_loss"]) for (_, v), x in zip(got, va)),
              f"val/loss at steps 2, 4, 6 equals the log's (got {got})")
        got = scalars(acc, "train/lr")
        check(len(got) == 6 and all(close(v, x["lr"]) for (_, v), x in zip(got, tr)), "train/lr equals the log's")
        got = scalars(acc, "by_tokens/train_loss")
        check([s for s, _ in got] == [x["tokens"] for x in tr], "by_tokens/train_loss uses the tokens as step")
        got = texts(acc, "config/argv/text_summary")
        # the run's defining flags; -steps and -o are per invocation (runrecord.h), so not in argv
        check(len(got) == 1 and "-model tiny" in got[0][1] and "-val-every 2" in got[0][1] and
              "-steps" not in got[0][1], f"the config's command line is there as text ({got[:1]})")
        got = texts(acc, "config/json/text_summary")
        check(len(got) == 1 and '"-lr": 0.001' in got[0][1], "the config's flags are there as text")
        check("_hparams_/session_start_info" in acc.PluginTagToContent("hparams"), "the config is there as hparams")
        sa = log_records(log, "sample")
        got = texts(acc, "samples/text_summary")
        check([x["step"] for x in sa] == [3, 6] and all(len(x["ids"]) == 4 for x in sa),
              f"the log holds a 4-token sample at steps 3 and 6 (got {[(x['step'], x['ids']) for x in sa]})")
        check([s for s, _ in got] == [3, 6] and all(x["text"] in t for (_, t), x in zip(got, sa)),
              f"the samples' text is there at their steps (got {got})")

        # 1b. a blend: per-dataset validation losses and the training datasets' shares
        blend = os.path.join(tmp, "blend")
        kjv = "dev/data/kjv/kjv_"
        train(blend, 4, 2, extra=["-i", f"0.7 {kjv}train_*.bin 0.3 {kjv}val_*.bin",
                                  "-j", f"0.5 {kjv}val_*.bin 0.5 {kjv}train_*.bin"])
        bv = log_records(os.path.join(blend, "log.jsonl"), "val")
        r = track("--tensorboard", blend)
        bacc = accumulator(os.path.join(blend, "tb"))
        got = scalars(bacc, "val/loss_kjv_val")
        want = [(x["step"], x["val_loss_by"]["kjv_val"]) for x in bv]
        check(r.returncode == 0 and len(got) == len(want) == 2 and all(s == w[0] and close(v, w[1])
                                                                       for (s, v), w in zip(got, want)),
              f"a -j blend: val/loss_kjv_val equals the log's per-dataset loss (got {got}, want {want})")
        got = scalars(bacc, "data/kjv_train_share")
        check(len(got) == 2 and close(got[-1][1], bv[-1]["data"]["kjv_train"]["share"]),
              f"a -i blend: data/kjv_train_share equals the log's realized share (got {got})")

        # 2. a second run: one event file set, no point twice
        r = track("--tensorboard", run)
        files = glob.glob(os.path.join(run, "tb", "events.out.tfevents.*"))
        check(r.returncode == 0 and len(files) == 1, f"a second run leaves one event file (got {len(files)})")
        acc = accumulator(os.path.join(run, "tb"))
        check([s for s, _ in scalars(acc, "train/loss")] == [1, 2, 3, 4, 5, 6]
              and len(scalars(acc, "val/loss")) == 3 and len(texts(acc, "config/argv/text_summary")) == 1,
              "after a second run every point is there once")

        # 3. what real logs hold: nan / inf written by printf, null, an event, a cut-off last line
        odd = os.path.join(tmp, "odd")
        os.makedirs(odd)
        with open(log) as f:
            lines = f.read().splitlines(keepends=True)
        lines.insert(3, "this is not json\n")
        lines.append('{"type":"train","step":7,"loss":nan,"lr":0.001,"gb":4,"tokens":896,"gnorm":null,'
                     '"ms":inf,"eta_s":null,"skip":"nonfinite","rank":0}\n')
        lines.append('{"type":"event","event":"stop","step":7,"signal":15}\n')
        lines.append('{"type":"train","step":8,"loss":8.01,"lr":0.0')
        with open(os.path.join(odd, "log.jsonl"), "w") as f:
            f.writelines(lines)
        r = track(odd, "--logdir", os.path.join(odd, "events"))
        check(r.returncode == 0 and "skipped 2 unreadable" in r.stdout,
              f"a bad line and a cut-off last line are skipped and counted ({r.stdout.strip()} {r.stderr.strip()})")
        acc = accumulator(os.path.join(odd, "events"))
        got = dict(scalars(acc, "train/loss"))
        check(sorted(got) == [1, 2, 3, 4, 5, 6, 7] and math.isnan(got[7]), "nan loss is a NaN point; step 8 is not")
        check(math.isinf(dict(scalars(acc, "train/ms")).get(7, 0.0)), "inf is an inf point")
        check(math.isnan(dict(scalars(acc, "train/gnorm")).get(7, 0.0)), "null is a NaN point")
        check(7 not in dict(scalars(acc, "train/eta_s")), "a null eta_s (unknown) is left out")
        ev = texts(acc, "events/text_summary")
        check(any(s == 7 and '"stop"' in t for s, t in ev) and any("skipped (nonfinite)" in t for _, t in ev),
              f"the stop event and the skipped update are text at step 7 (got {ev})")

        # 4. a missing log
        r = track("--tensorboard", os.path.join(tmp, "nothing"))
        err = r.stderr.strip().splitlines()
        check(r.returncode == 1 and len(err) == 1 and err[0].startswith("error: "),
              f"a missing log is one error line and exit 1 (got {r.returncode}, {err})")

        # 5. --follow on a live run
        live = os.path.join(tmp, "live")
        p = train(live, 80, 10, background=True)
        llog = os.path.join(live, "log.jsonl")
        t0 = time.time()
        while not os.path.exists(llog) and time.time() - t0 < 30 and p.poll() is None:
            time.sleep(0.02)
        f = subprocess.Popen(TRACK + ["--tensorboard", "--follow", "--poll", "0.2", live], stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, text=True)
        with open(llog) as g:
            before = sum('"type":"train"' in line for line in g)
        check(p.poll() is None and before < 80, f"--follow started while the run was live ({before} of 80 steps)")
        p.wait(timeout=120)
        try:
            out, errs = f.communicate(timeout=30)
            ended = f.returncode == 0
        except subprocess.TimeoutExpired:
            f.kill()
            out, errs = f.communicate()
            ended = False
        check(ended, f"--follow ends by itself when the run ends ({out.strip()} {errs.strip()[-300:]})")
        ltr = log_records(llog, "train")
        acc = accumulator(os.path.join(live, "tb"))
        got = scalars(acc, "train/loss")
        check([s for s, _ in got] == list(range(1, 81)) and all(close(v, x["loss"]) for (_, v), x in zip(got, ltr)),
              f"--follow caught every step with the log's loss ({len(got)} points)")
        check([s for s, _ in scalars(acc, "val/loss")] == list(range(10, 81, 10)), "--follow caught every val point")

        # 6. W&B, offline
        if importlib.util.find_spec("wandb") is not None:
            env = dict(os.environ, WANDB_MODE="offline")
            r = track("--wandb", run, env=env)
            check(r.returncode == 0 and "wandb sync" in r.stdout, f"--wandb exits 0 ({r.stderr.strip()[-300:]})")
            r = track("--wandb", run, env=env)
            runs = glob.glob(os.path.join(run, "wandb", "offline-run-*"))
            check(r.returncode == 0 and len(runs) == 1, f"a second --wandb keeps one local run (got {len(runs)})")
            rows, config = wandb_history(run)
            loss = [(h["_step"], h["train/loss"]) for h in rows if "train/loss" in h]
            check([s for s, _ in loss] == [1, 2, 3, 4, 5, 6] and all(v == x["loss"] for (_, v), x in zip(loss, tr)),
                  f"the W&B history's train/loss equals the log's (got {loss})")
            vloss = [(h["_step"], h["val/loss"]) for h in rows if "val/loss" in h]
            check([s for s, _ in vloss] == [2, 4, 6] and all(v == x["val_loss"] for (_, v), x in zip(vloss, va)),
                  f"the W&B history's val/loss at steps 2, 4, 6 equals the log's (got {vloss})")
            check({"lr", "steps", "argv", "layout.tp"} <= config, "the W&B config holds the flags")
        # 7. --tensorboard without torch, or without tensorboard: a shim that makes the import fail;
        # the message names what is missing and never suggests pip for torch (PyPI's is CUDA, ~3 GB)
        for pkg in ("torch", "tensorboard"):
            sd = os.path.join(tmp, "shim_" + pkg, pkg)
            os.makedirs(sd)
            with open(os.path.join(sd, "__init__.py"), "w") as g:
                g.write(f"raise ImportError('no {pkg} here')\n")
            r = track("--tensorboard", run, env=dict(os.environ, PYTHONPATH=os.path.dirname(sd)))
            err = r.stderr.strip().splitlines()
            said = err[0] if err else ""
            lacks = said.split(" lacks ", 1)[1].split(":")[0] if " lacks " in said else ""
            ok = r.returncode == 1 and len(err) == 1 and said.startswith("error: ") and "install.sh" in said
            if pkg == "torch":
                ok = ok and "torch" in lacks and "pip install" not in said
            else:
                ok = ok and lacks == "tensorboard"
            check(ok, f"--tensorboard without {pkg}: one error line naming what is missing and how to get it "
                      f"(got {err})")
        # without the package: a shim that makes `import wandb` fail
        shim = os.path.join(tmp, "shim", "wandb")
        os.makedirs(shim)
        with open(os.path.join(shim, "__init__.py"), "w") as g:
            g.write("raise ImportError('no wandb here')\n")
        r = track("--wandb", run, env=dict(os.environ, PYTHONPATH=os.path.dirname(shim)))
        err = r.stderr.strip().splitlines()
        check(r.returncode == 1 and len(err) == 1 and err[0].startswith("error: ") and "pip install wandb" in err[0],
              f"--wandb without the package: one error line saying how to install it (got {err})")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    sys.exit(summary())


if __name__ == "__main__":
    main()
