#!/usr/bin/python3
"""suite.py: runs the steps of `make test` (or of `make check`) with a time limit each, side by side
where that is safe, and prints a table of seconds and checks per step.

    python3 tests/suite.py test            every step CI runs (after `make test-bins`)
    python3 tests/suite.py check           the inner-loop subset (CONTRIBUTING.md)
    python3 tests/suite.py list            the steps, their limits and what they share
    python3 tests/suite.py test --only attack_flags,test_planner    some steps

Each step runs in its own process group, its output in build/suite/NAME.log (printed whole when
it fails). A step that passes its limit is a HANG: the stacks of its processes are written to
its log (Python's faulthandler through SIGABRT, gdb or eu-stack for the rest), then the group is
killed. A step's checks are the sum of its output's "N passed, M failed" lines. At the end: one
table, slowest first, with the build steps (timed by tests/timed_sh.sh during `make test-bins`),
each step's seconds, checks and status, the total and the wall time; build/suite/times.tsv
keeps the figures. Exit status 1 if any step failed or hung.

Side by side: each step keeps some cores busy (its CPU seconds per second in the last figures, to a
quarter, at most 1; or what the step says); steps start while fewer than TEST_JOBS (default: the
machine's cores) are busy. A step marked alone runs with nothing beside it but one
single-process step (timing-sensitive cases: watchdogs with a 4 s limit, kill -9 at chosen
moments; the single step keeps to the other core). The steps that run alone start first,
then the rest longest first (build/suite/times.tsv, else tests/suite_times.tsv: the figures of
a clean run on a 2-core machine; refresh it with a copy of times.tsv when steps change).
"""
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
LOGS = os.path.join(ROOT, "build", "suite")
PY = "/usr/bin/python3"
HF_PY = os.environ.get("HF_PY", os.path.expanduser("~/.cache/llmc/hf-venv/bin/python"))
MAKE = "make --no-print-directory"
COUNT_RE = re.compile(r"^(\d+) passed, (\d+) failed$")


class Step:
    def __init__(self, name, cmd, limit, cores=None, alone=False, check=False, needs=None, test=True, single=False):
        self.name = name          # unique; the log is build/suite/NAME.log
        self.test = test          # part of `make test` (a check-only step repeats part of a test step)
        self.cmd = cmd            # shell command, run from the repository root
        self.limit = limit        # seconds: a few times its normal time on a 2-core machine
        self.cores = cores        # cores it keeps busy on average; None: from the figures (auto_cores): an
        #                           MPI job of 8 emulated ranks that mostly waits on one counts 1
        self.alone = alone        # runs with nothing beside it but one single step
        self.single = single      # one process on one core (no MPI, no threads): may run beside an alone step
        self.check = check        # part of `make check`
        self.needs = needs        # None, or a function: None when it can run, else why not (a SKIP)


def have(cmd):
    return shutil.which(cmd) is not None


def need_mpi():
    return None if have("mpicc") and have("mpirun") else "mpicc/mpirun not found (bash dev/install.sh)"


def need_nvcc():
    return None if have("nvcc") or os.path.exists("/usr/local/cuda/bin/nvcc") else "nvcc not found"


def mpirun():
    return "mpirun --oversubscribe" + (" --allow-run-as-root" if os.getuid() == 0 else "")


ATTACK_FAMILIES = sorted(f[len("family_"):-3] for f in os.listdir(os.path.join(ROOT, "tests", "attack"))
                         if f.startswith("family_") and f.endswith(".sh"))
# families whose cases depend on wall-clock moments (a 4 s watchdog, kill -9 or a signal at a chosen step)
ATTACK_ALONE = {"async", "hang", "kill", "signals", "wave5_stop"}
FUZZ_TARGETS = ["shard", "tokenizer", "flags", "ckpt", "cloze", "blend", "bpe", "record"]
FUZZ_SECONDS = int(os.environ.get("FUZZ_SECONDS", "6"))  # make test's budget; make fuzz: 60 s


def steps():
    s = [
        Step("test_refs", "bash tests/test_refs.sh", 120, check=True, single=True),
        Step("lint_selftest", "python3 tests/lint.py --selftest", 120, check=True, single=True),
        Step("lint", f"{MAKE} lint", 300, check=True, single=True),
        Step("test_planner", "./test_planner", 120, check=True, single=True),
        Step("test_plan_memory", f"{PY} tests/test_plan_memory.py", 600, needs=need_mpi),
        Step("test_cpu_gemm", "./test_cpu_gemm", 300, cores=2),
        Step("test_cpu_gemm_asan", "./test_cpu_gemm_asan", 300, cores=2),
        Step("test_cpu_repro", "bash tests/test_cpu_repro.sh", 300, cores=2),
        Step("test_comm", f"LLMC_MPI_CHUNK=7 {mpirun()} -np 4 ./test_comm", 120, cores=2, needs=need_mpi),
        Step("test_instruments", "./test_instruments", 120, single=True),
        Step("test_colltrace", "./test_colltrace", 60, check=True, single=True),
        Step("test_scripts", "bash tests/test_scripts.sh", 600),
        Step("test_ckpt_async", "bash tests/test_ckpt_async.sh", 600, needs=need_mpi),
        Step("test_slurm", "bash tests/test_slurm.sh", 600),
        Step("test_ablate", "bash tests/test_ablate.sh", 600),
        Step("calibrate_planner", f"{PY} dev/calibrate_planner.py --selftest", 300, check=True, single=True),
        Step("test_bench_torch_init", f"{PY} tests/test_bench_torch_init.py", 300),
        Step("test_tokenizer", "bash tests/data/test_tokenizer.sh", 300),
        Step("test_prepare", f"{PY} tests/data/test_prepare.py", 600),
        # test_gpt in its parts (test_gpt.c's TEST_PARTS), so they can run beside other steps
        Step("test_gpt_core", "./test_gpt fixtures --part core", 900, check=True),
        Step("test_gpt_layouts", "./test_gpt fixtures --part layouts", 1800, cores=0.5, needs=need_mpi),
        Step("test_gpt_layout222", "./test_gpt fixtures --part layout222", 600, cores=2, needs=need_mpi, check=True,
             test=False),
        Step("test_gpt_blend", "./test_gpt fixtures --part blend", 900, needs=need_mpi),
        Step("test_gpt_rewind", "./test_gpt fixtures --part rewind", 900, needs=need_mpi),
        Step("test_gpt_auto", "./test_gpt fixtures --part auto", 900, needs=need_mpi),
        Step("test_gpt_sp_vpp", "./test_gpt fixtures --part sp_vpp", 1800, needs=need_mpi),
        Step("test_gpt_noise", "./test_gpt fixtures --part noise", 900, needs=need_mpi),
        Step("test_gpt_zero", "./test_gpt fixtures --part zero", 900, needs=need_mpi),
        Step("test_gpt_cp", "./test_gpt fixtures --part cp", 900, needs=need_mpi),
        Step("cuemu_test", f"{MAKE} cuemu-test", 900),
        Step("cuemu_compile", f"{MAKE} cuemu-compile", 600, needs=need_nvcc),
        Step("hf_bpe", f"{HF_PY} tests/data/test_bpe.py", 600),
        Step("hf_export_import", f"{HF_PY} tests/test_hf.py", 900),
        Step("hf_fuzz_import", f"{HF_PY} tests/fuzz/fuzz_import_hf.py", 600),
        Step("hf_track", f"{HF_PY} tests/test_track.py", 600),
        Step("hf_curation", f"{HF_PY} tests/data/test_curation.py", 600),
        Step("cuda_build", f"{MAKE} cuda-build cuda-rpath-check", 900, needs=need_nvcc),
        Step("cuda_resources_check", f"{MAKE} cuda-resources-check", 900, needs=need_nvcc),
        Step("cuda_check_host", f"{MAKE} cuda-check-host", 600),
        # (test_attention without arguments runs in gpu_rehearsal's attention stage)
        Step("cuda_check_emu", f"{MAKE} cuda-check-emu CUDA_CHECK_EMU_SKIP=test_attention", 900, single=True),
        Step("cuda_emu_test", f"{MAKE} cuda-emu-test", 2400),
        Step("cuda_emu_detect", f"{MAKE} cuda-emu-detect", 1800, cores=2),
        Step("cuda_costmodel", f"{MAKE} cuda-costmodel", 900),
        # (its run A's tests stage is make cuda-nompi-emu-test, and its attention stage test_attention:
        # they run only here, and the rehearsal prints their counts)
        Step("gpu_rehearsal", f"{MAKE} gpu-rehearsal", 900, cores=2),
        Step("test_gpt_asan", "./test_gpt_asan fixtures --quick", 900, single=True),
        Step("attack_asan", "bash tests/attack/asan.sh", 2400, single=True),  # the ASan trainer: no MPI, no OpenMP
        Step("test_docs", f"{PY} tests/test_docs.py", 900, needs=need_mpi),
    ]
    touched = attack_families_touched()
    for f in ATTACK_FAMILIES:
        pre = f"{MAKE} -s {FAMILY_BINS[f]} && " if f in FAMILY_BINS else ""  # a no-op after make test-bins
        s.append(Step("attack_" + f, f"{pre}bash tests/attack/run.sh {f}", 900, cores=2 if f in ATTACK_ALONE else None,
                      alone=f in ATTACK_ALONE, check=f in touched))
    for t in FUZZ_TARGETS:
        s.append(Step("fuzz_" + t, f"bash tests/fuzz/run.sh {FUZZ_SECONDS} {t}", FUZZ_SECONDS * 10 + 120, single=True))
    figs = last_figures()
    for st in s:
        if st.cores is None:
            st.cores = auto_cores(figs.get(st.name))
    return s


# the sources each attack family attacks beyond its own script (make check runs the families
# whose sources changed since the last commit, in the working tree or in that commit)
FAMILY_SOURCES = {
    "async": ["llmc/host/ckpt_async.h", "llmc/host/ckpt_rank.h", "llmc/host/checkpoint.h", "llmc/host/run.h",
              "tests/attack/ckpt_points.h", "tests/attack/ckpt_points.py"],
    "blends": ["llmc/host/blend.h", "llmc/host/dataloader.h"],
    "ckpt": ["llmc/host/checkpoint.h", "llmc/host/ckpt_rank.h", "llmc/host/reshard.h", "tests/attack/ckpt_forge.py"],
    "cp": ["llmc/host/config.h", "llmc/host/autolayout.h", "llmc/planner/planner.h"],
    "curation": ["dev/data/"],
    "disk": ["llmc/host/checkpoint.h", "llmc/host/safeio.h"],
    "eval": ["llmc/host/eval.h", "dev/eval/"],
    "flags": ["llmc/host/config.h", "llmc/host/startup.h"],
    "hang": ["llmc/host/watchdog.h", "llmc/host/colltrace.h", "llmc/host/comm.h", "llmc/host/seqpar.h"],
    "hf": ["dev/export_hf.py", "dev/import_hf.py", "llmc/host/bpe.h"],
    "kill": ["llmc/host/checkpoint.h", "llmc/host/run.h", "llmc/host/stop.h"],
    "firstuse": ["llmc/host/config.h", "llmc/host/autolayout.h", "llmc/host/run.h", "scripts/"],
    "outdir": ["llmc/host/outdir.h", "llmc/host/runrecord.h", "llmc/host/run.h"],
    "paths": ["llmc/host/dirlist.h", "llmc/host/safeio.h"],
    "record": ["llmc/host/runrecord.h", "llmc/host/json.h", "llmc/host/startup.h"],
    "resume": ["llmc/host/run.h", "llmc/host/outdir.h", "llmc/host/checkpoint.h", "llmc/host/dataloader.h"],
    "retention": ["llmc/host/outdir.h", "llmc/host/checkpoint.h"],
    "shards": ["llmc/host/dataloader.h", "llmc/host/tokenizer.h"],
    "signals": ["llmc/host/stop.h", "llmc/host/run.h"],
    "writes": ["llmc/host/safeio.h", "llmc/host/logger.h"],
    "zero": ["llmc/host/zero.h", "llmc/host/memplan.h", "llmc/host/autolayout.h", "llmc/planner/planner.h"],
    "wave5": ["tests/attack/wave5_lib.sh", "tests/attack/ckpt_forge.py", "llmc/host/ckpt_rank.h", "llmc/host/reshard.h",
              "llmc/host/checkpoint.h", "llmc/host/ckpt_async.h", "llmc/host/zero.h", "llmc/host/comm.h",
              "llmc/host/config.h"],
    "wave5_stop": ["tests/attack/wave5_lib.sh", "llmc/host/stop.h", "llmc/host/run.h", "llmc/host/ckpt_async.h",
                   "llmc/host/ckpt_rank.h", "tests/attack/ckpt_points.h", "tests/attack/ckpt_points.py"],
}


# the test-only builds a family needs besides train_gpt (make check builds them only with their family)
FAMILY_BINS = {"async": "build/mutants/train_gpt_ckpt_points", "hang": "build/mutants/train_gpt_deadlock",
               "wave5": "build/mutants/train_gpt_ckpt_points", "wave5_stop": "build/mutants/train_gpt_ckpt_points"}
CHECK_FAMILY_BUDGET_S = 100  # make check: the touched families, cheapest first, within this many seconds


def read_figures(path):
    """{step: (seconds, CPU seconds or None)} of a times.tsv (step, seconds, cpu_s, ...; a header
    line first), else {}."""
    out = {}
    try:
        with open(path) as fh:
            for ln in fh.readlines()[1:]:
                p = ln.rstrip("\n").split("\t")
                if len(p) >= 2 and not p[0].startswith("build "):
                    out[p[0]] = (float(p[1]), float(p[2]) if len(p) >= 3 and p[2] else None)
    except (OSError, ValueError):
        pass
    return out


def last_figures():
    """Each step's figures: the last run's here (build/suite/times.tsv) over the committed
    figures of a clean run on a 2-core machine (tests/suite_times.tsv)."""
    out = read_figures(os.path.join(ROOT, "tests", "suite_times.tsv"))
    out.update(read_figures(os.path.join(LOGS, "times.tsv")))
    return out


def last_seconds():
    return {k: v[0] for k, v in last_figures().items()}


def auto_cores(fig):
    """The cores a step keeps busy on average, from its (seconds, CPU seconds): to a quarter, in
    [0.25, 1] (a step that waits on timers or on mpirun leaves room for another beside it); 1 when
    unknown or too short to tell (under 5 s). A step that keeps two cores busy says so."""
    if not fig or fig[1] is None or fig[0] < 5:
        return 1.0
    return min(1.0, max(0.25, round(fig[1] / fig[0] * 4) / 4))


def start_order(sel):
    """The order steps start in: those that run alone first (nothing is running yet, so none
    waits for the machine to drain), then the longest first, by last_seconds() (an unknown step
    as 30 s), so that the short ones fill the cores at the end instead of a long one starting
    late and running by itself."""
    secs = last_seconds()
    return sorted(sel, key=lambda st: (not st.alone, -secs.get(st.name, 30.0)))


def attack_families_touched():
    """Families whose script, shared helpers or sources differ from HEAD~1 (committed or not),
    cheapest first (by the last recorded run) within CHECK_FAMILY_BUDGET_S, at least one
    (CHECK_ALL_FAMILIES=1: every touched one); flags if none is touched."""
    try:
        out = subprocess.run("git diff --name-only HEAD~1; git diff --name-only; git ls-files -o --exclude-standard",
                             shell=True, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, timeout=30)
        changed = set(out.stdout.decode().split())
    except (OSError, subprocess.TimeoutExpired):
        changed = set()
    fams = set()
    for f in ATTACK_FAMILIES:
        mine = [f"tests/attack/family_{f}.sh"] + FAMILY_SOURCES.get(f, [])
        if any(c == m or (m.endswith("/") and c.startswith(m)) for c in changed for m in mine):
            fams.add(f)
    if any(c in ("tests/attack/lib.sh", "tests/attack/ckpt_common.sh", "tests/attack/run.sh") for c in changed):
        fams.update(ATTACK_FAMILIES)
    if not fams:
        return {"flags"}
    if os.environ.get("CHECK_ALL_FAMILIES") == "1":
        return fams
    secs = last_seconds()
    keep, spent = set(), 0.0
    for f in sorted(fams, key=lambda f: (secs.get("attack_" + f, 30.0), f)):
        t = secs.get("attack_" + f, 30.0)
        if keep and spent + t > CHECK_FAMILY_BUDGET_S:
            break
        keep.add(f)
        spent += t
    return keep


# ------------------------------------------------------------------------------------------
# running


def log_path(name):
    return os.path.join(LOGS, name + ".log")


def group_pids(pgid):
    """The processes of a process group (Linux /proc)."""
    pids = []
    for d in os.listdir("/proc"):
        if not d.isdigit():
            continue
        try:
            with open(f"/proc/{d}/stat") as f:
                st = f.read()
            fields = st[st.rindex(")") + 2:].split()
            if int(fields[2]) == pgid:
                pids.append(int(d))
        except (OSError, ValueError):
            continue
    return sorted(pids)


def cmdline(pid):
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            return f.read().replace(b"\0", b" ").decode(errors="replace").strip()
    except OSError:
        return "?"


def dump_stacks(pgid, log):
    """Where a hung step's processes are: native stacks by gdb (or eu-stack), Python ones by
    faulthandler (PYTHONFAULTHANDLER is set for every step, so SIGABRT prints them)."""
    pids = group_pids(pgid)
    log.write(f"\n===== suite.py: HANG: stacks of {len(pids)} processes of the step =====\n")
    log.flush()
    for pid in pids[:16]:
        cl = cmdline(pid)
        log.write(f"\n--- pid {pid}: {cl[:300]}\n")
        log.flush()
        if re.search(r"(^|/)python[0-9.]*( |$)", cl.split(" ")[0] + " "):
            try:
                os.kill(pid, signal.SIGABRT)  # faulthandler writes the traceback to the step's stderr (this log)
                time.sleep(0.5)
            except OSError:
                pass
            continue
        tool = None
        if have("gdb"):
            tool = ["gdb", "-batch", "-nx", "-p", str(pid), "-ex", "thread apply all bt 30"]
        elif have("eu-stack"):
            tool = ["eu-stack", "-p", str(pid)]
        if tool is None:
            log.write("(no gdb or eu-stack to print the stack)\n")
            continue
        try:
            r = subprocess.run(tool, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=30)
            out = r.stdout.decode(errors="replace")
            keep = [ln for ln in out.splitlines() if ln.startswith("#") or ln.startswith("Thread") or "TID" in ln]
            log.write("\n".join(keep[:120]) + "\n")
        except subprocess.TimeoutExpired:
            log.write("(the stack tool timed out)\n")
    log.flush()


class Running:
    def __init__(self, step):
        self.step = step
        self.t0 = time.time()
        self.log = open(log_path(step.name), "w")
        env = dict(os.environ)
        env["PYTHONFAULTHANDLER"] = "1"
        env["PYTHONUNBUFFERED"] = "1"
        # Open MPI's session directory apart from the other steps': two mpirun starting at once in one
        # (ompi.HOST.UID under /tmp) can fail with "orte_session_dir failed" as the other cleans it up
        self.ompi_tmp = tempfile.mkdtemp(prefix="llmc_ompi_")
        env["OMPI_MCA_orte_tmpdir_base"] = self.ompi_tmp
        self.proc = subprocess.Popen(["bash", "-c", step.cmd], cwd=ROOT, stdout=self.log, stderr=subprocess.STDOUT,
                                     stdin=subprocess.DEVNULL, start_new_session=True, env=env)
        self.hung = False
        self.cpu = 0.0

    def reap(self, block):
        """The exit status (None while it runs), with the CPU seconds of the step's process tree."""
        try:
            pid, status, ru = os.wait4(self.proc.pid, 0 if block else os.WNOHANG)
        except ChildProcessError:
            return self.proc.returncode if self.proc.returncode is not None else -1
        if pid == 0:
            return None
        self.cpu = ru.ru_utime + ru.ru_stime
        rc = os.waitstatus_to_exitcode(status)
        self.proc.returncode = rc
        return rc

    def poll(self):
        rc = self.reap(False)
        if rc is None and time.time() - self.t0 > self.step.limit:
            self.hung = True
            dump_stacks(self.proc.pid, self.log)
            try:
                os.killpg(self.proc.pid, signal.SIGKILL)
            except OSError:
                pass
            rc = self.reap(True)
        if rc is not None:
            try:  # whatever the step left in its group (a daemon, an mpirun child) goes too
                os.killpg(self.proc.pid, signal.SIGKILL)
            except OSError:
                pass
        return rc


def count_checks(path):
    p = f = 0
    try:
        with open(path, errors="replace") as fh:
            for ln in fh:
                m = COUNT_RE.match(ln.strip())
                if m:
                    p += int(m.group(1))
                    f += int(m.group(2))
    except OSError:
        pass
    return p, f


def can_start(st, running, jobs):
    """A step that runs alone starts with nothing beside it but one single-process step (which keeps
    to its own core, so the timing of the other stays its own); beside it only such a step starts.
    Any other step starts while the running steps keep fewer than `jobs` cores busy, so a step may
    start beside two that mostly wait (the machine runs over its cores for a while rather than one
    idle: no timing depends on it)."""
    if st.alone:
        return len(running) == 0 or (len(running) == 1 and running[0].step.single)
    if any(r.step.alone for r in running):
        return st.single and len(running) == 1
    return sum(r.step.cores for r in running) < jobs


def run(selected, jobs):
    os.makedirs(LOGS, exist_ok=True)
    pending = list(selected)
    running, results = [], []
    t_start = time.time()
    total = len(pending)
    done = 0
    while pending or running:
        i = 0
        alone_waiting = False
        while i < len(pending):
            st = pending[i]
            why = st.needs() if st.needs else None
            if why:
                pending.pop(i)
                done += 1
                results.append((st, 0.0, "SKIP", 0, 0, why, 0.0))
                print(f"[{done:3d}/{total}] SKIP {st.name}: {why}", flush=True)
                continue
            if alone_waiting and not st.single:  # only a one-process step overtakes a step waiting to run alone
                i += 1
                continue
            if can_start(st, running, jobs):
                pending.pop(i)
                running.append(Running(st))
                continue
            alone_waiting = alone_waiting or st.alone
            i += 1
        time.sleep(0.2)
        for r in list(running):
            rc = r.poll()
            if rc is None:
                continue
            running.remove(r)
            dt = time.time() - r.t0
            r.log.close()
            shutil.rmtree(r.ompi_tmp, ignore_errors=True)
            p, f = count_checks(log_path(r.step.name))
            status = "HANG" if r.hung else ("PASS" if rc == 0 else "FAIL")
            done += 1
            note = f"exit {rc}" if status == "FAIL" else (f"over its {r.step.limit} s limit" if r.hung else "")
            results.append((r.step, dt, status, p, f, note, r.cpu))
            print(f"[{done:3d}/{total}] {status} {r.step.name} {dt:.1f} s ({r.cpu:.0f} s CPU), {p} checks"
                  + (f" ({note})" if note else ""), flush=True)
            if status != "PASS":
                with open(log_path(r.step.name), errors="replace") as fh:
                    text = fh.read()
                tail = text[-20000:]
                print(f"----- {r.step.name}: the end of {log_path(r.step.name)} -----\n{tail}\n----- end -----",
                      flush=True)
    return results, time.time() - t_start


def build_times():
    """(target, seconds) of the build steps tests/timed_sh.sh logged during `make test-bins`."""
    path = os.path.join(LOGS, "build_times.tsv")
    out = {}
    try:
        with open(path) as fh:
            for ln in fh:
                parts = ln.rstrip("\n").split("\t")
                if len(parts) >= 3:
                    out[parts[1]] = out.get(parts[1], 0.0) + float(parts[0])
    except OSError:
        pass
    return sorted(out.items(), key=lambda kv: -kv[1])


def report(results, wall):
    builds = build_times()
    rows = [(f"build {t}", s, "", "", "") for t, s in builds if s >= 0.5]
    nbuild = sum(s for t, s in builds)
    for st, dt, status, p, f, note, cpu in results:
        rows.append((st.name, dt, status, str(p), f"{cpu:.0f}"))
    rows.sort(key=lambda r: -r[1])
    print("\nseconds per step (build steps: make test-bins, each recipe line; slowest first):")
    print(f"  {'step':44s} {'seconds':>8s} {'CPU s':>6s}  {'status':6s} {'checks':>7s}")
    for name, dt, status, p, cpu in rows:
        print(f"  {name[:44]:44s} {dt:8.1f} {cpu:>6s}  {status:6s} {p:>7s}")
    ntest = sum(r[1] for r in results)
    checks = sum(r[3] for r in results)
    failed = [r[0].name for r in results if r[2] in ("FAIL", "HANG")]
    label = f"total (build {nbuild:.0f} s, steps {ntest:.0f} s)"
    print(f"  {label:44s} {nbuild + ntest:8.1f} {sum(r[6] for r in results):6.0f}  {'':6s} {checks:7d}")
    print(f"the steps took {wall:.0f} s of wall time ({len(results)} steps, up to {JOBS} cores at once)")
    with open(os.path.join(LOGS, "times.tsv"), "w") as fh:
        fh.write("step\tseconds\tcpu_s\tstatus\tchecks\n")
        for t, s in builds:
            fh.write(f"build {t}\t{s:.1f}\t\tBUILD\t0\n")
        for st, dt, status, p, f, note, cpu in results:
            fh.write(f"{st.name}\t{dt:.1f}\t{cpu:.1f}\t{status}\t{p}\n")
    if failed:
        print("failed or hung: " + ", ".join(failed))
    print(f"{len(results) - len(failed)} passed, {len(failed)} failed")
    return 1 if failed else 0


JOBS = int(os.environ.get("TEST_JOBS", "0") or 0) or os.cpu_count() or 2


def main(argv):
    if len(argv) < 2 or argv[1] in ("-h", "--help"):
        print(__doc__)
        return 0 if len(argv) >= 2 else 2
    mode = argv[1]
    all_steps = steps()
    if mode == "list":
        for st in all_steps:
            where = ("test " if st.test else "") + ("check" if st.check else "")
            kind = "  alone" if st.alone else "  single" if st.single else ""
            print(f"{st.name:28s} limit {st.limit:5d} s  cores {st.cores}{kind:8s}"
                  f"  {where:10s}  {st.cmd}")
        return 0
    if mode not in ("test", "check"):
        print(f"error: unknown mode {mode!r}: use test, check or list", file=sys.stderr)
        return 2
    sel = [s for s in all_steps if s.test] if mode == "test" else [s for s in all_steps if s.check]
    if len(argv) >= 4 and argv[2] == "--only":
        want = argv[3].split(",")
        names = {s.name for s in all_steps}
        bad = [w for w in want if w not in names]
        if bad:
            print(f"error: no step named {', '.join(bad)} (python3 tests/suite.py list)", file=sys.stderr)
            return 2
        sel = [s for s in all_steps if s.name in want]
    results, wall = run(start_order(sel), JOBS)
    return report(results, wall)


if __name__ == "__main__":
    sys.exit(main(sys.argv))
