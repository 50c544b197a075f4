#!/usr/bin/env python3
"""dev/ablate.py: the driver behind scripts/ablate.sh (its -h says how to use it; doc/stability.md says why).

A study is a spec (dev/ablate/STUDY.json): axes whose levels are trainer flags, seeds, a scale and a token
budget. The arms are the cartesian product of the axes' levels; every arm runs every seed, each run in its
own directory OUT/ARM/seedN through the trainer (./train_gpt, or a GPU trainer under a launcher). Runs are
independent and resumable: a run whose log reached its -tokens (or that the spike guard stopped, exit 3)
is done and skipped; one with a complete checkpoint continues with `TRAINER -o DIR -resume`, which replays
the flags the trainer recorded in DIR/config.json; any other starts fresh. A run directory holding a run
of other flags is refused, never overwritten. The driver writes OUT/study.json (the resolved study) for the
report (dev/ablate_report.py), DIR/ablate_status.json per run (exit status, attempts, wall time) and the
trainer's output to DIR/train.out.

Spec keys (each optional except axes; the smoke object overrides the others under --smoke):
  claim {id, text}, question   what the study tests, for the report (prose: a string or a list of strings)
  scale, seeds, tokens, gb     defaults of --scale, --seeds, --tokens, --gb
  mb, val_every, ckpt_every    templates (below) for -mb, -val-every, -ckpt-every
  val_samples                  -val-samples
  flags                        trainer flags every arm gets (templates)
  axes                         [{name, flag, values}] (level = [flag, value]), or [{name, levels: [{label, x,
                               flags}]}], or [{name, allocation: [tokens per parameter...]}] (compute-matched
                               shapes, below)
  spikes {z, window}           the offline spike rule for runs whose guard was off (dev/spikes.py)
  report {kind, ...}           which figures and claim sentences dev/ablate_report.py writes
A template is a string in which {EXPR} is replaced by the value of EXPR, an arithmetic expression over L, H,
heads, seq, V, N (parameters), gb, dp (ranks), tokens, steps (tokens / (gb*seq)) and lr_auto (the peak LR
the trainer's -lr auto gives the arm's shape, read from its start table), with round, int, min, max, sqrt.

Allocation axes: the compute budget is C = 6*N*tokens for the scale's model and token budget; a level of R
tokens per parameter gets N* = sqrt(C/(6R)) and the shape L x H, H in whole heads of the scale's head size
and H/L within a factor 2 of the scale's H/L, whose parameter count N (tied embedding included: 6ND counts
the LM head's FLOPs) is nearest N* in log (ties: the H/L nearest the scale's); then tokens = C/(6N) in whole
steps, so every arm spends the same FLOPs up to that rounding. (A fixed H/L alone leaves too few shapes at a
few million parameters, where the embedding is half the model, and two ratios would share one.)
"""
import ast, itertools, json, math, os, re, shutil, signal, subprocess, sys, tempfile, time
from concurrent.futures import ThreadPoolExecutor

HERE = os.path.dirname(os.path.abspath(__file__))
NAME = "ablate.sh"

# the scales: shapes with the KJV vocabulary (V 8192)
SCALES = {
    "tiny": {"L": 4, "H": 128, "heads": 4, "seq": 256},  # the trainer's tiny preset, 1.9M parameters
    "small": {"L": 6, "H": 256, "heads": 8, "seq": 256},  # 6.9M parameters
    "smoke": {"L": 2, "H": 32, "heads": 1, "seq": 32},  # tests: 0.3M parameters, milliseconds per step
}
KJV = ("dev/data/kjv/kjv_train_*.bin", "dev/data/kjv/kjv_val_*.bin", 8192)
DEFAULTS = {"scale": "tiny", "seeds": [1, 2, 3], "tokens": 491520, "gb": 16, "mb": "{gb//dp}",
            "val_every": "{max(1, steps//10)}", "val_samples": 64, "ckpt_every": "{max(1, steps//4)}",
            "flags": [], "spikes": {"z": 4.0}, "report": {}}
# --smoke: a few steps of the smoke shape, 2 seeds; a spec's "smoke" object overrides these
SMOKE = {"scale": "smoke", "seeds": [1, 2], "tokens": 8 * 4 * 32, "gb": 4, "val_every": "{max(1, steps//4)}",
         "val_samples": 8, "ckpt_every": "0"}

USAGE = """usage: scripts/ablate.sh STUDY [options]   (scripts/ablate.sh -h for the options)"""


def fail(msg, rc=1):
    print("%s: %s" % (NAME, msg), file=sys.stderr)
    sys.exit(rc)


def param_count(L, H, seq, V):
    """llmc/host/params.h param_count_model: tied embedding once, padding excluded."""
    return V * H + seq * H + L * (12 * H * H + 13 * H) + 2 * H


# ---------------------------------------------------------------------------------------------------------
# templates

_FUNCS = {"round": round, "int": int, "min": min, "max": max, "sqrt": math.sqrt}
_OPS = (ast.Expression, ast.BinOp, ast.UnaryOp, ast.Constant, ast.Name, ast.Load, ast.Call, ast.Add, ast.Sub,
        ast.Mult, ast.Div, ast.FloorDiv, ast.Mod, ast.Pow, ast.USub, ast.UAdd)


def evaluate(expr, env):
    """An arithmetic expression over env's names and _FUNCS; nothing else is allowed."""
    tree = ast.parse(expr, mode="eval")
    for node in ast.walk(tree):
        if not isinstance(node, _OPS): fail("template {%s}: only arithmetic is allowed" % expr)
        if isinstance(node, ast.Call) and not (isinstance(node.func, ast.Name) and node.func.id in _FUNCS):
            fail("template {%s}: unknown function" % expr)
    names = {n.id for n in ast.walk(tree) if isinstance(n, ast.Name)} - set(_FUNCS)
    scope = dict(_FUNCS)
    for n in names: scope[n] = env[n]  # env computes lr_auto only when a template asks for it
    return eval(compile(tree, "<template>", "eval"), {"__builtins__": {}}, scope)


def fmt(v):
    """A number as a flag value: integers exactly, other values to 6 significant digits."""
    if isinstance(v, bool) or not isinstance(v, (int, float)): return str(v)
    if isinstance(v, int) or (v.is_integer() and abs(v) < 2 ** 53): return str(int(v))
    return "%.6g" % v


def expand(s, env):
    return re.sub(r"\{([^{}]+)\}", lambda m: fmt(evaluate(m.group(1), env)), str(s))


class Env(dict):
    """The template variables of one arm; lr_auto is asked of the trainer once per shape."""

    def __init__(self, probe, **kw):
        super().__init__(**kw)
        self.probe = probe

    def __missing__(self, key):
        if key == "lr_auto":
            self[key] = self.probe(self)
            return self[key]
        fail("template: unknown name '%s'" % key)


_lr_cache = {}


def lr_auto_probe(opt):
    def probe(env):
        shape = (env["L"], env["H"], env["heads"], env["seq"], env["V"])
        if shape in _lr_cache: return _lr_cache[shape]
        # -steps 0: the start table (it holds the resolved peak LR), one evaluation of nothing (-j ''), exit
        cmd = [opt.check_bin, "-steps", "0", "-j", "", "-lr", "auto", "-i", opt.data, "-L", str(env["L"]),
               "-H", str(env["H"]), "-heads", str(env["heads"]), "-seq", str(env["seq"]), "-V", str(env["V"])]
        try:
            out = subprocess.run(cmd, capture_output=True, text=True, timeout=600).stdout
        except OSError as e:
            fail("cannot run %s for -lr auto's value: %s (set --check-bin)" % (opt.check_bin, e))
        m = re.search(r"\|\s*peak lr\s*\|\s*([0-9.eE+-]+)", out)
        if not m: fail("no 'peak lr' row in the start table of: %s" % " ".join(cmd))
        _lr_cache[shape] = float(m.group(1))
        return _lr_cache[shape]
    return probe


# ---------------------------------------------------------------------------------------------------------
# the study: spec + options -> arms and runs

def text(t):
    """A spec's prose: a string, or a list of strings (JSON has no line breaks inside strings)."""
    return " ".join(t) if isinstance(t, list) else t


def load_spec(study):
    path = study if study.endswith(".json") else os.path.join(HERE, "ablate", study + ".json")
    if not os.path.isfile(path):
        have = sorted(f[:-5] for f in os.listdir(os.path.join(HERE, "ablate")) if f.endswith(".json"))
        fail("no study '%s' (built in: %s; or a path to a spec .json)" % (study, ", ".join(have)), 2)
    with open(path) as f:
        spec = json.load(f)
    spec.setdefault("study", os.path.basename(path)[:-5])
    if spec.get("claim"): spec["claim"]["text"] = text(spec["claim"].get("text", ""))
    if spec.get("report", {}).get("notes"): spec["report"]["notes"] = text(spec["report"]["notes"])
    return spec


def allocation_levels(axis, base):
    """Compute-matched shapes, one per tokens-per-parameter ratio (the rule in this file's opening comment)."""
    L0, H0, heads0, seq, V, gb = base["L"], base["H"], base["heads"], base["seq"], base["V"], base["gb"]
    hd, aspect = H0 // heads0, H0 / L0
    C = 6.0 * param_count(L0, H0, seq, V) * base["tokens"]
    levels = []
    for r in axis["allocation"]:
        target = math.sqrt(C / (6.0 * r))
        cands = [(abs(math.log(param_count(L, H, seq, V) / target)) + 0.01 * abs(math.log(H / L / aspect)), L, H)
                 for L in range(1, 4 * L0 + 9) for H in range(hd, 8 * H0 + 1, hd) if 0.5 <= H / L / aspect <= 2]
        _, L, H = min(cands)
        n = param_count(L, H, seq, V)
        steps = max(1, int(round(C / (6.0 * n) / (gb * seq))))
        tokens = steps * gb * seq
        levels.append({"label": fmt(r), "x": tokens / n, "flags": [],
                       "vars": {"L": L, "H": H, "heads": H // hd, "tokens": tokens}})
    shapes = [(lv["vars"]["L"], lv["vars"]["H"]) for lv in levels]
    if len(set(shapes)) < len(shapes):
        print("%s: warning: allocation: two ratios get the same shape at this scale and budget (%s); a larger "
              "--scale or --tokens separates them" % (NAME, ", ".join("L%d H%d" % s for s in shapes)))
    return levels


def axis_levels(axis, base):
    if "allocation" in axis: return allocation_levels(axis, base)
    if "values" in axis:
        return [{"label": fmt(v), "x": v, "flags": [axis["flag"], fmt(v)]} for v in axis["values"]]
    return [dict(lv) for lv in axis["levels"]]


def plan(opt):
    spec = load_spec(opt.study)
    cfg = dict(DEFAULTS)
    cfg.update({k: v for k, v in spec.items() if k != "smoke"})
    if opt.smoke:
        cfg.update(SMOKE)
        cfg.update(spec.get("smoke", {}))
    if opt.scale: cfg["scale"] = opt.scale
    if cfg["scale"] not in SCALES: fail("--scale takes %s" % ", ".join(SCALES), 2)
    shape = dict(SCALES[cfg["scale"]])
    for k in ("L", "H", "heads", "seq"):
        if getattr(opt, k) is not None: shape[k] = getattr(opt, k)
    if shape != SCALES[cfg["scale"]]: cfg["scale"] += " (reshaped)"
    for k in ("tokens", "gb"):
        if getattr(opt, k) is not None: cfg[k] = getattr(opt, k)
    if opt.seeds is not None: cfg["seeds"] = opt.seeds
    base = dict(shape, V=opt.V, gb=int(cfg["gb"]), tokens=int(cfg["tokens"]), dp=opt.ranks)
    axes = [(ax["name"], axis_levels(ax, base)) for ax in spec["axes"]]
    probe = lr_auto_probe(opt)
    arms = []
    for combo in itertools.product(*[lv for _, lv in axes]):
        name = "_".join("%s-%s" % (ax, lv["label"]) for (ax, _), lv in zip(axes, combo))
        if not re.fullmatch(r"[A-Za-z0-9._-]+", name): fail("arm name '%s': labels take [A-Za-z0-9.]" % name)
        if opt.arms and not re.search(opt.arms, name): continue
        env = Env(probe, **base)
        for lv in combo: env.update(lv.get("vars", {}))
        env["N"] = param_count(env["L"], env["H"], env["seq"], env["V"])
        env["steps"] = max(1, env["tokens"] // (env["gb"] * env["seq"]))
        flags = ["-L", env["L"], "-H", env["H"], "-heads", env["heads"], "-seq", env["seq"], "-V", env["V"],
                 "-i", opt.data, "-j", opt.val, "-gb", env["gb"], "-mb", expand(cfg["mb"], env),
                 "-tokens", env["tokens"], "-val-every", expand(cfg["val_every"], env),
                 "-val-samples", cfg["val_samples"], "-ckpt-every", expand(cfg["ckpt_every"], env), "-keep", 1]
        flags += [expand(f, env) for f in cfg["flags"]]
        for lv in combo: flags += [expand(f, env) for f in lv.get("flags", [])]
        flags = [str(f) for f in flags] + opt.extra
        arms.append({"name": name, "levels": {ax: lv["label"] for (ax, _), lv in zip(axes, combo)},
                     "x": {ax: lv.get("x") for (ax, _), lv in zip(axes, combo)}, "flags": flags,
                     "N": env["N"], "tokens": env["tokens"], "shape": [env["L"], env["H"], env["heads"]]})
    if not arms: fail("--arms '%s' matches no arm" % opt.arms, 2)
    runs = [{"arm": a["name"], "seed": s, "dir": os.path.join(opt.out, a["name"], "seed%d" % s),
             "flags": a["flags"] + ["-seed", str(s)]} for a in arms for s in cfg["seeds"]]
    study = {"study": spec["study"], "claim": spec.get("claim"), "question": text(spec.get("question", "")),
             "scale": cfg["scale"], "shape": shape, "V": opt.V, "gb": base["gb"], "tokens": base["tokens"],
             "N": param_count(shape["L"], shape["H"], shape["seq"], opt.V), "ranks": opt.ranks,
             "smoke": opt.smoke, "seeds": cfg["seeds"], "axes": [ax for ax, _ in axes], "arms": arms,
             "spikes": cfg["spikes"], "report": cfg["report"], "runs": runs, "trainer": opt.trainer,
             "launch": opt.launch}
    return study


# ---------------------------------------------------------------------------------------------------------
# one run: its state, its command

def read_json(path):
    try:
        with open(path) as f:
            return json.load(f)
    except (OSError, ValueError):
        return None


def log_complete(d):
    """The run's log reached the -tokens (or -steps) its record names."""
    rec = read_json(os.path.join(d, "config.json"))
    if not rec: return False
    flags = rec.get("flags", {})
    last = None
    try:
        with open(os.path.join(d, "log.jsonl")) as f:
            for line in f:
                if '"type":"train"' in line:
                    try:
                        last = json.loads(line)
                    except ValueError:
                        pass
    except OSError:
        return False
    if last is None: return False
    steps = flags.get("-steps", -1)
    return last.get("tokens", 0) >= flags.get("-tokens", 0) or (steps > 0 and last.get("step", 0) >= steps)


def run_state(run):
    """("done" | "stopped" | "resume" | "fresh" | "other", why)"""
    d = run["dir"]
    rec = read_json(os.path.join(d, "config.json"))
    if rec is not None and rec.get("argv") != run["flags"]:
        return "other", "%s holds a run with other flags: delete it to run this arm again" % d
    status = read_json(os.path.join(d, "ablate_status.json")) or {}
    if log_complete(d): return "done", ""
    if status.get("rc") == 3: return "stopped", "the spike guard stopped it (exit 3)"
    if any(os.path.exists(os.path.join(d, c, "DONE")) for c in (os.listdir(d) if os.path.isdir(d) else [])
           if c.startswith("ckpt_")):
        return "resume", ""
    return "fresh", ""


def command(opt, run, state):
    tail = ["-o", run["dir"], "-resume"] if state == "resume" else run["flags"] + ["-o", run["dir"]]
    return opt.launch + [opt.trainer] + tail


class Runner:
    def __init__(self, opt):
        self.opt, self.stop = opt, False
        self.failed, self.done = [], 0

    def signal(self, signum, frame):
        # Ctrl-C, Slurm and `kill -- -PGID` signal the trainers too (one process group): they finish their
        # step, save and exit 4. Forwarding it would be a second signal, which kills a trainer at once.
        self.stop = True

    def run(self, i, n, run):
        if self.stop: return
        state, why = run_state(run)
        tag = "[%d/%d] %s seed %d" % (i, n, run["arm"], run["seed"])
        if state in ("done", "stopped", "other"):
            if state == "other": self.failed.append(run["dir"])
            print("%s: %s%s" % (tag, state, ": " + why if why else ""), flush=True)
            return
        os.makedirs(run["dir"], exist_ok=True)
        spath = os.path.join(run["dir"], "ablate_status.json")
        status = read_json(spath) or {"attempts": 0, "wall_s": 0.0}
        cmd = command(self.opt, run, state)
        t0 = time.time()
        # each mpirun its own session directory: two starting at once in one (ompi.HOST.UID under /tmp)
        # can fail with "orte_session_dir failed" as the other cleans it up (--jobs 2)
        ompi_tmp = tempfile.mkdtemp(prefix="llmc_ompi_")
        env = dict(os.environ, OMPI_MCA_orte_tmpdir_base=ompi_tmp)
        with open(os.path.join(run["dir"], "train.out"), "a") as out:
            out.write("# %s\n" % " ".join(cmd))
            out.flush()
            rc = subprocess.run(cmd, stdout=out, stderr=subprocess.STDOUT, env=env).returncode
        shutil.rmtree(ompi_tmp, ignore_errors=True)
        status.update({"rc": rc, "attempts": status["attempts"] + 1, "wall_s": status["wall_s"] + time.time() - t0,
                       "last_cmd": cmd})
        with open(spath + ".tmp", "w") as f:
            json.dump(status, f)
        os.replace(spath + ".tmp", spath)
        done = rc == 0 and log_complete(run["dir"])
        what = {0: "done" if done else "exit 0 but the log is not complete", 3: "stopped by the spike guard",
                4: "interrupted (rerun to resume)"}.get(rc, "FAILED, exit %d (see %s/train.out)" % (rc, run["dir"]))
        print("%s: %s%s in %.1f s" % (tag, "resumed, " if state == "resume" else "", what, time.time() - t0),
              flush=True)
        if rc == 4: self.stop = True
        elif not done and rc != 3: self.failed.append(run["dir"])


# ---------------------------------------------------------------------------------------------------------
# command line

OPTIONS = {  # option: (attribute, type); None type = a switch
    "--scale": ("scale", str), "--L": ("L", int), "--H": ("H", int), "--heads": ("heads", int),
    "--seq": ("seq", int), "--V": ("V", int), "--tokens": ("tokens", float), "--gb": ("gb", int),
    "--seeds": ("seeds", str), "--data": ("data", str), "--val": ("val", str), "--mpirun": ("ranks", int),
    "--launch": ("launch", str), "--trainer": ("trainer", str), "--check-bin": ("check_bin", str),
    "--out": ("out", str), "--jobs": ("jobs", int), "--arms": ("arms", str), "--extra": ("extra", str),
    "--smoke": ("smoke", None), "--dry-run": ("dry_run", None), "--no-report": ("no_report", None),
}


class Opt:
    pass


def parse(argv):
    opt = Opt()
    for attr, kind in OPTIONS.values(): setattr(opt, attr, False if kind is None else None)
    opt.study = None
    i = 0
    while i < len(argv):
        a = argv[i]
        if a in OPTIONS:
            attr, kind = OPTIONS[a]
            if kind is None:
                setattr(opt, attr, True)
            else:
                if i + 1 >= len(argv): fail("%s needs a value (see -h)" % a, 2)
                try:
                    setattr(opt, attr, kind(argv[i + 1]))
                except ValueError:
                    fail("bad value '%s' for %s" % (argv[i + 1], a), 2)
                i += 1
        elif a.startswith("-") or opt.study is not None:
            fail("unknown argument '%s': see -h" % a, 2)
        else:
            opt.study = a
        i += 1
    if opt.study is None: fail("no STUDY given\n" + USAGE, 2)
    if opt.tokens is not None: opt.tokens = int(opt.tokens)
    if opt.seeds is not None:
        s = [int(x) for x in opt.seeds.split(",") if x.strip()] if re.fullmatch(r"[0-9, ]+", opt.seeds) else None
        if not s: fail("--seeds takes a count (3) or a list (1,2,3)", 2)
        opt.seeds = list(range(1, s[0] + 1)) if "," not in opt.seeds else s
    if opt.data is not None and (opt.val is None or opt.V is None):
        fail("--data needs --val GLOB (validation shards) and --V (the tokenizer's vocabulary)", 2)
    opt.data = opt.data or KJV[0]
    opt.val = KJV[1] if opt.val is None else opt.val
    opt.V = opt.V or KJV[2]
    opt.trainer = opt.trainer or "./train_gpt"
    opt.check_bin = opt.check_bin or "./train_gpt"
    opt.out = opt.out or os.path.join("out", "ablate", os.path.basename(opt.study).replace(".json", "") +
                                      ("_smoke" if opt.smoke else ""))
    opt.jobs = max(1, opt.jobs or 1)
    opt.extra = opt.extra.split() if opt.extra else []
    if opt.launch is not None:
        opt.launch = opt.launch.split()
        opt.ranks = opt.ranks or 1  # the launcher's world size, for -check and the report
    else:
        if opt.ranks is None: opt.ranks = 2 if shutil.which("mpirun") else 1
        opt.launch = []
        if opt.ranks > 1:
            opt.launch = ["mpirun", "-np", str(opt.ranks)]
            if hasattr(os, "geteuid") and os.geteuid() == 0: opt.launch.append("--allow-run-as-root")
            if opt.ranks > (os.cpu_count() or 1): opt.launch.append("--oversubscribe")
    return opt


def preflight(opt, study):
    """The trainer's own validation of every arm's flags for the launch's world size, before any run."""
    if not os.access(opt.check_bin, os.X_OK):
        print("%s: %s is missing: flags not validated (make train_gpt, or --check-bin)" % (NAME, opt.check_bin))
        return True
    ok = True
    for arm in study["arms"]:
        run = next(r for r in study["runs"] if r["arm"] == arm["name"])
        cmd = [opt.check_bin, "-check", "-world", str(opt.ranks)] + run["flags"] + ["-o", run["dir"]]
        r = subprocess.run(cmd, capture_output=True, text=True)
        if r.returncode != 0:
            ok = False
            print("%s: arm %s: %s" % (NAME, arm["name"], (r.stderr or r.stdout).strip()), file=sys.stderr)
    return ok


def main(argv):
    opt = parse(argv)
    study = plan(opt)
    runs = study["runs"]
    arms = study["arms"]
    print("%s: study %s%s: %d arms x %d seeds = %d runs, %s (N %.3gM), %d ranks per run, out %s" % (
        NAME, study["study"], " (smoke)" if opt.smoke else "", len(arms), len(study["seeds"]), len(runs),
        study["scale"], study["N"] / 1e6, opt.ranks, opt.out), flush=True)
    if not preflight(opt, study): fail("the trainer refused the flags above; nothing was run")
    if opt.dry_run:
        for r in runs:
            state, why = run_state(r)
            line = " ".join(_quote(c) for c in command(opt, r, state))
            print("# %s seed %d: %s%s" % (r["arm"], r["seed"], state, ": " + why if why else ""))
            if state in ("fresh", "resume"): print(line)
        return 0
    os.makedirs(opt.out, exist_ok=True)
    with open(os.path.join(opt.out, "study.json"), "w") as f:
        json.dump(study, f, indent=1)
    runner = Runner(opt)
    for s in (signal.SIGTERM, signal.SIGINT, signal.SIGUSR1): signal.signal(s, runner.signal)
    t0 = time.time()
    with ThreadPoolExecutor(max_workers=opt.jobs) as ex:
        for fut in [ex.submit(runner.run, i + 1, len(runs), r) for i, r in enumerate(runs)]: fut.result()
    print("%s: %d runs in %.1f s%s" % (NAME, len(runs), time.time() - t0,
                                       "; FAILED: " + " ".join(runner.failed) if runner.failed else ""), flush=True)
    if runner.stop:
        print("%s: stopped by a signal: rerun the same command to resume" % NAME)
        return 4
    if not opt.no_report:
        sys.path.insert(0, HERE)
        import ablate_report
        print("%s: report %s" % (NAME, ablate_report.write_report(opt.out)), flush=True)
    return 1 if runner.failed else 0


def _quote(s):
    return s if re.fullmatch(r"[A-Za-z0-9_./=,:+-]+", s) else "'" + s.replace("'", "'\\''") + "'"


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
