#!/usr/bin/python3
"""test_docs.py: every command README.md and doc/*.md show runs as written, or says why not
(issue 45). `make test` runs it.

A fenced block holds commands when one of its lines starts like a command (./ make bash mpirun
srun python $PY ~/ DRY_RUN= ...; a line "$ CMD" is a command whose output follows it). Each such
block carries a marker, an HTML comment on the line before it (invisible when rendered):

  <!-- doctest: run -->                   every command of the block runs
  <!-- doctest: run 1,3; excerpt: WHY --> commands 1 and 3 run (numbered from 1, continuation
                                          lines joined, comments skipped); the others do not, for WHY
  <!-- doctest: excerpt: WHY -->          none runs, for WHY (a GPU, a cluster, placeholders)
  <!-- test_hf.py runs this block -->      tests/test_hf.py runs it (it needs the HF venv)

A command block without a marker, a marker without a reason for what it leaves out, or a marker
on a block without commands fails. The commands that run do so in a copy of the tree (the tracked
files, the built binaries, the corpus and the cloze set) under a temporary directory, one bash
script per block with `set -e`, the documents in order (README.md, then doc/*.md by name), each
block with a fresh `out/`. What differs from a user's shell, and only this:
  - ./train_gpt in the copy is a stand-in that runs the real binary with `-steps 2` appended
    (DOCTEST_STEPS) to a command that trains: the README's 225-step run takes seconds. -plan,
    -check, -h and -steps 0 pass through unchanged.
  - mpirun may run as root and oversubscribe (OMPI_ALLOW_RUN_AS_ROOT, OMPI_MCA_rmaps_base_
    oversubscribe), and OMP_NUM_THREADS=1.
  - corpus/*.jsonl, the corpus doc/curation.md's commands name, holds the KJV's chapters.
A block whose every command an earlier block ran as written (usage.md repeats the README's) is
not run twice.
Prints one PASS/FAIL line per block and command, then "N passed, M failed".

    python3 tests/test_docs.py              every document
    python3 tests/test_docs.py README.md    some documents
    python3 tests/test_docs.py --list       the blocks, their markers and commands; runs nothing
"""
import glob
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
STEPS = os.environ.get("DOCTEST_STEPS", "2")
LIMIT = 300  # seconds per block
CMD_RE = re.compile(r"^(\./|make\b|bash\b|sh\b|mpirun\b|srun\b|python3?\b|/usr/bin/python3\b|~/|\$ |\$PY\b|PY=|"
                    r"DRY_RUN=|HF_\w+=|mkdir\b|tests/fuzz/|/tmp/\S*train_gpt)")
MARK_RE = re.compile(r"^<!-- (doctest: (.*)|test_hf\.py runs this block) -->\s*$")
passed = failed = 0


def check(ok, what, detail=""):
    global passed, failed
    print(("PASS " if ok else "FAIL ") + what, flush=True)
    if not ok and detail:
        print("    | " + detail.rstrip().replace("\n", "\n    | "))
    if ok:
        passed += 1
    else:
        failed += 1
    return ok


def documents():
    return ["README.md"] + sorted(os.path.relpath(p, ROOT) for p in glob.glob(os.path.join(ROOT, "doc", "*.md")))


def commands(lines):
    """The block's commands: continuation lines joined, comment and blank lines dropped; in a block
    with "$ " lines only those (the rest is their output)."""
    prompt = any(ln.startswith("$ ") for ln in lines)
    out, cur = [], ""
    for ln in lines:
        if prompt:
            if ln.startswith("$ "):
                out.append(ln[2:])
            continue
        s = cur + ln
        if s.rstrip().endswith("\\"):
            cur = s.rstrip()[:-1] + " "
            continue
        cur = ""
        if s.strip() and not s.lstrip().startswith("#"):
            out.append(s.strip())
    return out


def blocks(doc):
    """(line, marker text or None, lines) of each fenced block of doc"""
    text = open(os.path.join(ROOT, doc)).read().split("\n")
    res, i = [], 0
    while i < len(text):
        if text[i].lstrip().startswith("```"):
            start, body = i, []
            i += 1
            while i < len(text) and not text[i].lstrip().startswith("```"):
                body.append(text[i])
                i += 1
            res.append((start + 1, text[start - 1] if start > 0 else "", body))
        i += 1
    return res


def plan(doc, line, prev, body):
    """(commands to run, why the others do not, or None on a bad marker, error)"""
    cmds = commands(body)
    has_cmd = any(CMD_RE.match(ln.strip()) for ln in body)
    m = MARK_RE.match(prev.strip())
    where = f"{doc}:{line}"
    if not m:
        return ([], None, f"{where}: a block of commands without a doctest marker") if has_cmd else ([], "", None)
    if m.group(1).startswith("test_hf.py"):
        return [], "tests/test_hf.py runs it", None
    spec = m.group(2).strip()
    if not cmds:
        return [], None, f"{where}: a doctest marker on a block without commands"
    if spec.startswith("excerpt:") and spec[8:].strip():
        return [], spec[8:].strip(), None
    mm = re.match(r"^run(?: ([0-9,]+); excerpt: (.+))?$", spec)
    if not mm:
        return [], None, f"{where}: marker '{spec}': want run, run N,M; excerpt: WHY, or excerpt: WHY"
    if mm.group(1) is None:
        return cmds, "", None
    want = [int(x) for x in mm.group(1).split(",")]
    if any(k < 1 or k > len(cmds) for k in want):
        return [], None, f"{where}: marker names command {want} of {len(cmds)}"
    return [cmds[k - 1] for k in want], mm.group(2).strip(), None


STANDIN = """#!/bin/sh
# test_docs.py's stand-in for ./train_gpt: the real binary, with -steps {steps} appended to a command
# that trains (-plan, -check, -h and -steps 0 pass through)
prev=""
for a in "$@"; do
  case "$a" in -plan | -check | -h | --help) exec {real} "$@" ;; esac
  [ "$prev" = -steps ] && [ "$a" = 0 ] && exec {real} "$@"
  prev=$a
done
exec {real} "$@" -steps {steps}
"""


def make_copy(tmp):
    """the tree the documents' commands run in"""
    tree = os.path.join(tmp, "tree")
    files = subprocess.run(["git", "ls-files", "-z"], cwd=ROOT, capture_output=True).stdout.decode().split("\0")
    for f in files:
        src = os.path.join(ROOT, f)
        if not f or not os.path.isfile(src):
            continue
        dst = os.path.join(tree, f)
        os.makedirs(os.path.dirname(dst), exist_ok=True)
        shutil.copy2(src, dst)
    extra = glob.glob(os.path.join(ROOT, "dev/data/kjv/*")) + glob.glob(os.path.join(ROOT, "dev/eval/kjv_cloze.jsonl"))
    for f in extra:
        dst = os.path.join(tree, os.path.relpath(f, ROOT))
        os.makedirs(os.path.dirname(dst), exist_ok=True)
        shutil.copy2(f, dst)
    if not os.path.exists(os.path.join(tree, "dev/eval/kjv_cloze.jsonl")):  # what `make cloze` makes
        subprocess.run(["/usr/bin/python3", "dev/eval/make_cloze.py", "--out", "dev/eval/kjv_cloze.jsonl"], cwd=tree,
                       check=True, capture_output=True)
    real = os.path.join(ROOT, "train_gpt")
    with open(os.path.join(tree, "train_gpt"), "w") as f:
        f.write(STANDIN.format(steps=STEPS, real=real))
    os.chmod(os.path.join(tree, "train_gpt"), 0o755)
    # doc/curation.md names the user's corpus/*.jsonl: the KJV's chapters, in two files
    sys.path.insert(0, os.path.join(ROOT, "dev", "data"))
    import prepare_kjv
    texts = [prepare_kjv.chapter_text(v) for _, chapters in prepare_kjv.read_bible() for _, v in chapters]
    os.makedirs(os.path.join(tree, "corpus"))
    for k in range(2):
        with open(os.path.join(tree, "corpus", f"kjv_{k}.jsonl"), "w") as f:
            for t in texts[k::2]:
                f.write(json.dumps({"text": t}) + "\n")
    return tree


def run_block(tree, doc, line, cmds):
    env = dict(os.environ, OMP_NUM_THREADS="1", OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1",
               OMPI_MCA_rmaps_base_oversubscribe="1")
    script = "set -e\n" + "".join(f"echo '@@doctest {k}' >&2\n{c}\n" for k, c in enumerate(cmds))
    t0 = time.time()
    try:
        r = subprocess.run(["bash", "-c", script], cwd=tree, env=env, capture_output=True, text=True, timeout=LIMIT)
        rc, out, err = r.returncode, r.stdout, r.stderr
    except subprocess.TimeoutExpired as e:
        rc, out, err = 124, (e.stdout or b"").decode(errors="replace"), (e.stderr or b"").decode(errors="replace")
    done = [int(x) for x in re.findall(r"^@@doctest (\d+)$", err, re.M)]
    last = done[-1] if done else 0
    print(f"     {doc}:{line}: {len(cmds)} command(s), {time.time() - t0:.1f} s", flush=True)
    for k, c in enumerate(cmds):
        ok = rc == 0 or k < last
        if k > last:
            check(False, f"{doc}:{line} runs: {c[:110]}", "not reached: an earlier command of the block failed")
            continue
        check(ok, f"{doc}:{line} runs: {c[:110]}", "" if ok else f"exit {rc} after {time.time() - t0:.0f} s\n"
              + out[-1500:] + "\n" + err[-2500:])


def main(argv):
    if len(argv) > 1 and argv[1] in ("-h", "--help"):
        print(__doc__)
        return 0
    listing = len(argv) > 1 and argv[1] == "--list"
    only = [a for a in argv[1:] if a != "--list"]
    bad = [d for d in only if d not in documents()]
    if bad:
        print(f"error: not a document this test reads: {', '.join(bad)} (README.md or doc/NAME.md)", file=sys.stderr)
        return 2
    todo, nrun, nskip = [], 0, 0
    for doc in only or documents():
        for line, prev, body in blocks(doc):
            cmds, why, err = plan(doc, line, prev, body)
            if err:
                check(False, err)
                continue
            if why is None or (not cmds and why == ""):
                continue  # no commands
            nrun += len(cmds)
            nskip += len(commands(body)) - len(cmds)
            if listing:
                print(f"{doc}:{line}: run {len(cmds)}" + (f"; not run: {why}" if why else ""))
                for c in cmds:
                    print(f"    {c[:150]}")
            elif why:
                check(True, f"{doc}:{line}: marked, {len(commands(body)) - len(cmds)} command(s) not run: {why}")
            if cmds:
                todo.append((doc, line, cmds))
    print(f"{nrun} commands run, {nskip} marked as excerpts", flush=True)
    if listing:
        return 0
    tmp = tempfile.mkdtemp(prefix="test_docs_")
    try:
        tree = make_copy(tmp)
        ran = {}  # command -> the block that ran it and passed
        for doc, line, cmds in todo:
            if all(c in ran for c in cmds):  # a block another document shows too (usage.md repeats the README's)
                check(True, f"{doc}:{line}: its {len(cmds)} command(s) ran as written in {ran[cmds[0]]}")
                continue
            shutil.rmtree(os.path.join(tree, "out"), ignore_errors=True)  # each block from a fresh out/
            before = failed
            run_block(tree, doc, line, cmds)
            if failed == before:
                for c in cmds:
                    ran.setdefault(c, f"{doc}:{line}")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    print(f"{passed} passed, {failed} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
