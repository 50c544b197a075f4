"""
Tests dev/data/prepare.py on a small synthetic corpus (text + jsonl files):

  * the old path (--engine hf --workers 1: encode_batch in one process) and the fast
    engine with 1 and 3 workers: byte-identical shards, tokenizer files and manifest
    (small chunks, so 3 workers really interleave); the fast Encoder gives encode_batch's
    ids on documents full of edge cases (Unicode classes, odd spaces, contractions,
    characters beyond U+FFFF and the EOT text, which take the encode_batch way);
  * an independent reader (struct, not prepare.py's code) checks every shard header,
    file size and shard size, splits the token stream at EOT and decodes each document
    with the byte table parsed from PREFIX_tokenizer.bin: the documents must be exactly
    the input documents, in input order, on the side a separately computed sha256 rule
    says (split determinism), every document preceded by EOT;
  * changing --shard-tokens changes only the cut, not the token stream;
  * an interrupted run (simulated failure after 2 shards) leaves no manifest; the rerun
    (with stale extra shards and a .tmp planted) gives the reference output, no extras;
  * a loaded tokenizer whose ids exceed uint16 is refused; ids beyond the vocabulary
    are refused with no shard left; bad inputs give one `error:` line;
  * parts: every document in exactly one part, in order, for N = 1..7 and every input
    kind (--docs file/lines/blank, .jsonl); --part K/3 three times + --merge gives the
    single job's documents, tokens and split, and a manifest whose shards check out;
    the merge refuses a missing, a duplicated, a corrupted part, parts of two different
    N and a part with another tokenizer; --part 0/3, 4/3, x and with --train-bpe are
    refused; a part prints its sbatch line;
  * the workers on the error paths, each in its own session and timed out if it hangs: a
    failure in the main process with chunks in flight (PREPARE_STRESS times, default 6,
    random chunk sizes and failure points), a worker killed -9 while it holds work, Ctrl-C
    to the process group, a full disk, a bad line late; each ends with one line and leaves
    no process; kill -9 of the main process leaves no worker either;
  * no input may be a file the run writes or deletes (shard, tokenizer, manifest and .tmp
    names, also through a symlink); another prefix's files are left alone; the tokenizer
    of --tokenizer-only stays byte for byte through parts and the merge;
  * the merge's one sequence PREFIX_{train,val}_NNN.bin (hard links) and its printed globs
    take exactly the manifest's shards, with stray part-like and old shards beside (train_gpt
    reads the manifest's token count through the glob); another prefix's file under the glob
    is refused; a part run again removes the merged output;
  * the progress line has MB/s and an ETA, or says the size is unknown (a pipe);
  * ./train_gpt trains 2 steps on the produced shards.

    /usr/bin/python3 tests/data/test_prepare.py       (last line: "N passed, M failed")
"""

import glob
import hashlib
import json
import os
import random
import re
import shlex
import shutil
import signal
import struct
import subprocess
import sys
import tempfile
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
DATA_DIR = os.path.join(ROOT, "dev", "data")  # prepare.py, the tool under test
sys.path.insert(0, DATA_DIR)
sys.path.insert(0, os.path.join(ROOT, "tests"))
import prepare as prep  # noqa: E402
from checks import check, summary  # noqa: E402

PY = sys.executable
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")  # (this process encodes, then forks workers)
EOT = "<|endoftext|>"
VOCAB = 400


def make_corpus(d):
    """Returns (input paths, the documents in the order prepare.py must read them)."""
    r = random.Random(14)
    words = ("the and of to in that shall he unto I his a for they be is him not them it "
             "with all thou thy was which my me said but ye their have will thee from as are "
             "caf\u00e9 na\u00efve \u2603 token shard corpus model data 1189 3.14").split()

    def doc():
        n = r.randint(3, 120)
        s = " ".join(r.choice(words) for _ in range(n))
        return s[0].upper() + s[1:] + r.choice([".", "!", "?", ".\n\nAnd it came to pass."])
    docs, paths = [], []
    for k in range(3):  # text files, one document each
        p = os.path.join(d, f"t{k}.txt")
        t = doc() + "\n" + doc()
        with open(p, "w", encoding="utf-8") as f:
            f.write(t)
        docs.append(t)
    p = os.path.join(d, "c.jsonl")
    with open(p, "w", encoding="utf-8") as f:
        for i in range(1500):
            t = doc()
            if i == 7:
                t = ""  # an empty document is still a document (just its EOT)
            docs.append(t)
            f.write(json.dumps({"id": i, "text": t, "other": "ignored"}) + "\n")
    paths = [os.path.join(d, "t*.txt"), p]
    return paths, docs


def run_cli(args, **kw):
    return subprocess.run([PY, os.path.join(DATA_DIR, "prepare.py"), "--quiet"] + args,
                          capture_output=True, text=True, **kw)


def files_of(out, prefix):
    res = {}
    for p in sorted(glob.glob(os.path.join(out, prefix + "_*"))):
        with open(p, "rb") as f:
            b = f.read()
        if p.endswith("_manifest.json"):
            m = json.loads(b)
            m.pop("seconds")
            b = json.dumps(m, sort_keys=True).encode()
        res[os.path.basename(p)] = hashlib.sha256(b).hexdigest()
    return res


def read_shard(path):
    with open(path, "rb") as f:
        b = f.read()
    h = struct.unpack("<256i", b[:1024])
    n = h[2]
    ok = h[0] == 20240520 and h[1] == 1 and len(b) == 1024 + 2 * n
    return ok, list(struct.unpack(f"<{n}H", b[1024:1024 + 2 * n])) if ok else []


def read_tokenizer_bin(path):
    with open(path, "rb") as f:
        b = f.read()
    h = struct.unpack("<256I", b[:1024])
    assert h[0] == 20240328 and h[1] == 2, "tokenizer header"
    table, off = [], 1024
    for _ in range(h[2]):
        n = b[off]
        table.append(b[off + 1:off + 1 + n])
        off += 1 + n
    assert off == len(b), "tokenizer file length"
    return h[2], h[3], table


def docs_from_shards(shards, eot, table):
    toks = []
    for s in shards:
        ok, t = read_shard(s)
        if not ok:
            return None, None
        toks += t
    if not toks or toks[0] != eot:
        return None, toks
    docs, cur = [], None
    for t in toks:
        if t == eot:
            if cur is not None:
                docs.append(cur)
            cur = bytearray()
        else:
            cur += table[t]
    docs.append(cur)
    return [bytes(x).decode("utf-8") for x in docs], toks


def main():
    tmp = tempfile.mkdtemp(prefix="test_prepare.")
    try:
        body(tmp)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    sys.exit(summary())


def body(tmp):
    inputs, docs = make_corpus(tmp)
    common = ["--prefix", "c", "--train-bpe", str(VOCAB), "--val-frac", "0.1",
              "--shard-tokens", "7000", "--chunk-bytes", "2000"] + inputs
    o1, o3, oh = os.path.join(tmp, "o1"), os.path.join(tmp, "o3"), os.path.join(tmp, "oh")
    rh = run_cli(["--out", oh, "--workers", "1", "--engine", "hf"] + common)
    check(rh.returncode == 0, f"old path (--engine hf, 1 worker) runs ({rh.stderr.strip()[-200:]})")
    r1 = run_cli(["--out", o1, "--workers", "1"] + common)
    check(r1.returncode == 0, f"fast engine, 1 worker runs ({r1.stderr.strip()[-200:]})")
    r3 = run_cli(["--out", o3, "--workers", "3"] + common)
    check(r3.returncode == 0, f"fast engine, 3 workers run ({r3.stderr.strip()[-200:]})")
    f1, f3, fh = files_of(o1, "c"), files_of(o3, "c"), files_of(oh, "c")
    check(f1 == fh and len(f1) >= 6, f"fast engine = old path: byte-identical outputs ({len(f1)} files)")
    check(f1 == f3, "1 and 3 workers: byte-identical outputs")

    # independent reader and split rule
    V, eot, table = read_tokenizer_bin(os.path.join(o1, "c_tokenizer.bin"))
    check(V == VOCAB and eot == VOCAB - 1, f"tokenizer.bin: vocab {V}, EOT id {eot}")
    is_val = [int.from_bytes(hashlib.sha256(d.encode()).digest()[:8], "big") / 2 ** 64 < 0.1 for d in docs]
    want_tr = [d for d, v in zip(docs, is_val) if not v]
    want_va = [d for d, v in zip(docs, is_val) if v]
    tr_sh = sorted(glob.glob(os.path.join(o1, "c_train_*.bin")))
    va_sh = sorted(glob.glob(os.path.join(o1, "c_val_*.bin")))
    heads = [read_shard(s)[0] for s in tr_sh + va_sh]
    check(all(heads) and len(tr_sh) >= 3,
          f"shard headers (magic, version, count = file size): {len(tr_sh)} train, {len(va_sh)} val")
    sizes = [len(read_shard(s)[1]) for s in tr_sh]
    check(all(n == 7000 for n in sizes[:-1]) and 0 < sizes[-1] <= 7000, f"--shard-tokens 7000: sizes {sizes}")
    got_tr, toks_tr = docs_from_shards(tr_sh, eot, table)
    got_va, toks_va = docs_from_shards(va_sh, eot, table)
    check(got_tr == want_tr,
          f"train shards decode to the {len(want_tr)} train documents in input order, EOT before each")
    check(got_va == want_va and 0 < len(want_va) < len(docs) // 4,
          f"val shards decode to the {len(want_va)} documents the sha256 rule picks")
    check(all(t < V for t in toks_tr + toks_va), "every id < vocab")
    with open(os.path.join(o1, "c_manifest.json")) as f:
        m = json.load(f)
    check(m["train_tokens"] == len(toks_tr) and m["val_docs"] == len(want_va), "manifest counts")

    # same token stream whatever the shard size; a second run with the same args is a no-op
    o4 = os.path.join(tmp, "o4")
    r = run_cli(["--out", o4, "--workers", "2"] + [a if a != "7000" else "100000" for a in common])
    sh = sorted(glob.glob(os.path.join(o4, "c_train_*.bin")))
    check(r.returncode == 0 and len(sh) == 1 and read_shard(sh[0])[1] == toks_tr,
          "--shard-tokens 100000: one train shard, same token stream")
    r = run_cli(["--out", o1, "--workers", "1"] + common)
    check(r.returncode == 0 and "up to date" in r.stdout and files_of(o1, "c") == f1, "rerun with same args: no-op")

    # interrupted run, then rerun
    oi = os.path.join(tmp, "oi")
    paths = prep.expand_inputs(inputs)
    try:
        prep.prepare(lambda: prep.iter_documents(paths), oi, "c", vocab=VOCAB,
                     split_fn=prep.hash_split(0.1), workers=2, shard_tokens=7000, quiet=True,
                     chunk_bytes=2000, _fail_after_shards=2)
        interrupted = False
    except RuntimeError:
        interrupted = True
    left = sorted(os.listdir(oi))
    check(interrupted and "c_manifest.json" not in left and len(left) == 2,
          f"simulated interruption leaves 2 shards and no manifest ({left})")
    for stale in ("c_train_042.bin", "c_val_000.bin.tmp"):
        with open(os.path.join(oi, stale), "wb") as f:
            f.write(b"stale")
    r = run_cli(["--out", oi, "--workers", "3"] + common)
    check(r.returncode == 0 and files_of(oi, "c") == f1 and set(os.listdir(oi)) == set(os.listdir(o1)),
          "rerun after interruption: reference output, no stale or partial shards")

    # a real kill -9 mid-run: the input is a FIFO we feed and never close, so the run is
    # certainly still going (blocked reading) when the shards are there
    with open(os.path.join(tmp, "c.jsonl"), "rb") as f:
        raw = f.read() * 2
    bigin, fifo = os.path.join(tmp, "big.jsonl"), os.path.join(tmp, "fifo.jsonl")
    with open(bigin, "wb") as f:
        f.write(raw)
    os.mkfifo(fifo)
    kargs = ["--prefix", "k", "--tokenizer", os.path.join(o1, "c_tokenizer.json"), "--shard-tokens", "2000",
             "--chunk-bytes", "2000", "--workers", "2"]
    ok_ = os.path.join(tmp, "ok")
    p = subprocess.Popen([PY, os.path.join(DATA_DIR, "prepare.py"), "--quiet", "--out", ok_] + kargs + [fifo],
                         stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)

    def feed():
        try:
            with open(fifo, "wb") as f:
                f.write(raw)
                f.flush()
                time.sleep(120)  # hold it open: no EOF until the kill
        except OSError:
            pass
    threading.Thread(target=feed, daemon=True).start()
    t_end = time.time() + 60
    while time.time() < t_end and p.poll() is None and len(glob.glob(os.path.join(ok_, "k_train_*.bin"))) < 3:
        time.sleep(0.01)
    killed = p.poll() is None
    if killed:
        os.kill(p.pid, signal.SIGKILL)
    p.wait()
    partial = glob.glob(os.path.join(ok_, "k_train_*.bin"))
    check(killed and len(partial) >= 3 and not os.path.exists(os.path.join(ok_, "k_manifest.json")),
          f"kill -9 mid-run: {len(partial)} shards, no manifest")
    left = gone(p.pid, 20)
    check(killed and not left, f"kill -9 of the main process: its workers exit by themselves (left: {left})")
    for pid in left:
        os.kill(pid, signal.SIGKILL)
    r = run_cli(["--out", ok_] + kargs + [bigin])
    r2 = run_cli(["--out", os.path.join(tmp, "ok2")] + kargs + [bigin])
    fk = files_of(ok_, "k")
    check(r.returncode == 0 and r2.returncode == 0 and fk == files_of(os.path.join(tmp, "ok2"), "k")
          and len(fk) > 20 and set(os.listdir(ok_)) == set(os.listdir(os.path.join(tmp, "ok2"))),
          f"rerun after kill -9 = a fresh run ({len(fk)} files)")

    # out-of-vocabulary ids
    tok = prep.load_tokenizer(os.path.join(o1, "c_tokenizer.json"))
    big = json.loads(tok.to_str())
    big["model"]["vocab"]["zzzzqq"] = 70000
    bigp = os.path.join(tmp, "big.json")
    with open(bigp, "w") as f:
        json.dump(big, f)
    ob = os.path.join(tmp, "ob")
    r = run_cli(["--out", ob, "--tokenizer", bigp] + inputs)
    check(r.returncode != 0 and r.stderr.count("\n") == 1 and "error:" in r.stderr and "65536" in r.stderr
          and not glob.glob(os.path.join(ob, "*.bin")), f"tokenizer with id 70000 refused: {r.stderr.strip()}")
    orig, calls = prep._encode_chunk, [0]

    def bad_encode(flags, texts):  # the 5th chunk carries an id the vocabulary lacks
        train, val, top = orig(flags, texts)
        calls[0] += 1
        if calls[0] == 5:
            return train + prep.u16le([VOCAB + 3]), val, VOCAB + 3
        return train, val, top
    prep._encode_chunk = bad_encode
    try:
        prep.prepare(lambda: prep.iter_documents(paths), ob, "c", tok=tok, workers=1,
                     shard_tokens=500, quiet=True, chunk_bytes=2000)
        msg = None
    except prep.PrepareError as e:
        msg = str(e)
    finally:
        prep._encode_chunk = orig
    check(calls[0] == 5 and msg is not None and f"id {VOCAB + 3} is outside" in msg
          and not glob.glob(os.path.join(ob, "c_*")),
          f"an id >= vocab in a late chunk is refused, shards written before are deleted: {msg}")
    check(prep.check_ids([0, VOCAB - 1], VOCAB) is None, "check_ids accepts ids < vocab")

    # loading the tokenizer gives the same shards as training it
    ol = os.path.join(tmp, "ol")
    r = run_cli(["--out", ol, "--prefix", "c", "--tokenizer", os.path.join(o1, "c_tokenizer.json"),
                 "--val-frac", "0.1", "--shard-tokens", "7000", "--workers", "2"] + inputs)
    same = all(open(a, "rb").read() == open(b, "rb").read() for a, b in
               zip(sorted(glob.glob(os.path.join(o1, "c_*.bin"))), sorted(glob.glob(os.path.join(ol, "c_*.bin")))))
    check(r.returncode == 0 and same, "--tokenizer (the trained one) reproduces the shards")

    # text modes and bad input
    tp = os.path.join(tmp, "lines.txt")
    with open(tp, "w") as f:
        f.write("one a\n\ntwo b\nthree c\n\n\nfour d\n")
    got = list(prep.iter_documents([tp], docs="lines")), list(prep.iter_documents([tp], docs="blank"))
    check(got == (["one a", "two b", "three c", "four d"], ["one a", "two b\nthree c", "four d"]),
          "--docs lines / blank split")
    bad = os.path.join(tmp, "bad.jsonl")
    with open(bad, "w") as f:
        f.write('{"text": "x"}\n{"body": "y"}\n')
    for args, want in ((["--train-bpe", "300", bad], "bad.jsonl:2: no field 'text'"),
                       (["--train-bpe", "300", os.path.join(tmp, "nope*.txt")], "no file matches"),
                       (["--train-bpe", "300", "--workers", "-1", bad], "--workers"),
                       (["--tokenizer", os.path.join(tmp, "none.json"), bad], "no such tokenizer")):
        r = run_cli(["--out", os.path.join(tmp, "oe")] + args)
        check(r.returncode == 1 and r.stderr.count("\n") == 1 and want in r.stderr, f"error line: {r.stderr.strip()}")
    pq = os.path.join(tmp, "x.parquet")
    try:
        import pyarrow  # noqa: F401
        import pyarrow.parquet
        pyarrow.parquet.write_table(pyarrow.table({"text": docs}), pq)
        r = run_cli(["--out", os.path.join(tmp, "op"), "--prefix", "c", "--tokenizer",
                     os.path.join(o1, "c_tokenizer.json"), "--val-frac", "0.1", "--shard-tokens", "7000", pq])
        bins = [{k: v for k, v in files_of(d, "c").items() if k.endswith(".bin")}
                for d in (os.path.join(tmp, "op"), ol)]
        check(r.returncode == 0 and bins[0] == bins[1] and len(bins[0]) > 3, "parquet = same shards")
    except ImportError:
        with open(pq, "wb") as f:
            f.write(b"PAR1")
        r = run_cli(["--out", os.path.join(tmp, "op"), "--train-bpe", "300", pq])
        check(r.returncode == 1 and r.stderr.count("\n") == 1 and "pyarrow" in r.stderr,
              f"no pyarrow: {r.stderr.strip()}")

    pool_cases(tmp, os.path.join(o1, "c_tokenizer.json"), bigin)
    inputs_vs_outputs(tmp, inputs)
    encoder_cases(tok)
    part_ranges(tmp)
    parts_cli(tmp, inputs, o1, ol, want_tr, want_va, toks_tr)
    progress_cases(tmp, o1)

    # the trainer reads the shards
    exe = os.path.join(ROOT, "train_gpt")
    if not os.access(exe, os.X_OK):
        check(False, "./train_gpt exists (make train_gpt)")
        return
    r = subprocess.run([exe, "-L", "2", "-H", "64", "-heads", "2", "-seq", "32", "-V", str(V), "-mb", "2",
                        "-gb", "2", "-ramp", "off", "-steps", "2", "-threads", "1",
                        "-i", os.path.join(o1, "c_train_*.bin"), "-j", os.path.join(o1, "c_val_*.bin"),
                        "-o", os.path.join(tmp, "run")], capture_output=True, text=True, timeout=120)
    log = os.path.join(tmp, "run", "log.jsonl")
    steps = [json.loads(l) for l in open(log)] if os.path.isfile(log) else []
    steps = [s for s in steps if "loss" in s or "train_loss" in s]
    check(r.returncode == 0 and len(steps) >= 2, f"train_gpt trains 2 steps on the shards (rc {r.returncode}, "
          f"{len(steps)} loss lines) {r.stderr.strip()[-300:]}")


def group_procs(pgid):
    """The live (not zombie) processes of process group pgid, from /proc."""
    pids = []
    for d in os.listdir("/proc"):
        try:
            with open(f"/proc/{d}/stat") as f:
                st = f.read()
        except (OSError, ValueError):
            continue
        fields = st[st.rindex(")") + 2:].split()  # state, ppid, pgrp, ...
        if int(fields[2]) == pgid and fields[0] != "Z":
            pids.append(int(d))
    return pids


def children(pid):
    out = []
    for d in os.listdir("/proc"):
        try:
            with open(f"/proc/{d}/stat") as f:
                st = f.read()
        except (OSError, ValueError):
            continue
        if int(st[st.rindex(")") + 2:].split()[1]) == pid:
            out.append(int(d))
    return out


def gone(pgid, wait):
    """[] once no process of group pgid is left (waiting up to `wait` s), else those left."""
    t_end = time.time() + wait
    while group_procs(pgid) and time.time() < t_end:
        time.sleep(0.05)
    return group_procs(pgid)


FAIL_DRIVER = """
import sys
sys.path.insert(0, sys.argv[1])
import prepare as prep
tok = prep.load_tokenizer(sys.argv[3])
paths = prep.expand_inputs([sys.argv[4]])
try:
    prep.prepare(lambda: prep.iter_documents(paths), sys.argv[2], "c", tok=tok, split_fn=prep.hash_split(0.1),
                 workers=int(sys.argv[5]), shard_tokens=2000, quiet=True, chunk_bytes=int(sys.argv[6]),
                 _fail_after_shards=int(sys.argv[7]))
except RuntimeError as e:
    print("stopped:", e)
    sys.exit(3)
"""


FULL_DRIVER = """
import errno, sys
sys.path.insert(0, sys.argv[1])
import prepare as prep
orig, n = prep.write_atomic, [0]


def full(path, *parts):  # the disk fills up at the third file
    n[0] += 1
    if n[0] > 2:
        raise OSError(errno.ENOSPC, "No space left on device", path + ".tmp")
    orig(path, *parts)
prep.write_atomic = full
sys.exit(prep.main(sys.argv[2:]))
"""


def default_sigint():
    """Ctrl-C as a terminal gives it, even when this test runs in the background (where
    SIGINT is ignored, and a child would inherit that)."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def with_fifo_run(tmp, name, tokp, raw, act):
    """prepare.py --workers 2 on a FIFO in its own session: half the input, then act(p, workers,
    go) once both workers have done work (shards exist); the rest and EOF follow go.set() (after
    act at the latest). -> (returncode or
    None if it hung, stderr, the processes of its group left after it ended, the out dir)."""
    fifo, out = os.path.join(tmp, name + ".jsonl"), os.path.join(tmp, name)
    os.mkfifo(fifo)
    p = subprocess.Popen([PY, os.path.join(DATA_DIR, "prepare.py"), "--quiet", "--out", out, "--prefix", "k",
                          "--tokenizer", tokp, "--shard-tokens", "2000", "--chunk-bytes", "2000", "--workers", "2",
                          fifo], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                         start_new_session=True, preexec_fn=default_sigint)
    go = threading.Event()

    def feed():
        try:
            with open(fifo, "wb") as f:
                f.write(raw[:len(raw) // 2])
                f.flush()
                go.wait(60)
                f.write(raw[len(raw) // 2:])
        except OSError:
            pass
    threading.Thread(target=feed, daemon=True).start()
    t_end = time.time() + 60
    while time.time() < t_end and p.poll() is None and (
            len(children(p.pid)) < 2 or len(glob.glob(os.path.join(out, "k_train_*.bin"))) < 2):
        time.sleep(0.01)
    ready = p.poll() is None and len(children(p.pid)) == 2
    if ready:
        act(p, children(p.pid), go)
    go.set()
    try:
        _, err = p.communicate(timeout=60)
        rc = p.returncode
    except subprocess.TimeoutExpired:
        os.killpg(p.pid, signal.SIGKILL)
        _, err = p.communicate()
        rc = None
    left = gone(p.pid, 10)
    for pid in left:
        os.kill(pid, signal.SIGKILL)
    return (rc if ready else "not started"), err, left, out


def pool_cases(tmp, tokp, bigin):
    """The tokenization workers on the error paths: a failure in the main process with
    chunks in flight (many times), a worker killed, Ctrl-C. Each must end, promptly and
    with its own message, leaving no process behind (multiprocessing.Pool could hang in
    its shutdown, and a killed worker's lost task hung it for good)."""
    with open(bigin, "rb") as f:
        raw = f.read()
    n = int(os.environ.get("PREPARE_STRESS", "6"))
    rnd = random.Random(3)
    bad, t0 = [], time.time()
    for i in range(n):
        out = os.path.join(tmp, f"stress{i}")
        args = [str(rnd.choice([2, 3])), str(rnd.choice([300, 2000, 20000, 200000])), str(rnd.randint(1, 4))]
        p = subprocess.Popen([PY, "-c", FAIL_DRIVER, DATA_DIR, out, tokp, bigin] + args, stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, text=True, start_new_session=True)
        try:
            so, se = p.communicate(timeout=60)
            rc = p.returncode
        except subprocess.TimeoutExpired:
            os.killpg(p.pid, signal.SIGKILL)
            so, se = p.communicate()
            rc = "hung 60 s"
        left = gone(p.pid, 10)
        for pid in left:
            os.kill(pid, signal.SIGKILL)
        if (rc != 3 or "simulated interruption" not in so or left
                or os.path.exists(os.path.join(out, "c_manifest.json"))):
            bad.append(f"run {i} (workers, chunk bytes, fail after = {args}): rc {rc}, left {left}, "
                       f"{se.strip()[-200:]}")
        shutil.rmtree(out, ignore_errors=True)
    check(not bad, f"a failure in the main process with chunks in flight, {n} times (PREPARE_STRESS=N for more): "
                   f"each ends at once, no worker left ({time.time() - t0:.1f} s) {bad}")

    def kill_one(p, workers, go):
        # stopped first, so that it is sure to be holding work when it dies: the rest of the
        # input comes, the main process hands it chunks, then the kill
        os.kill(workers[0], signal.SIGSTOP)
        go.set()
        time.sleep(0.5)
        os.kill(workers[0], signal.SIGKILL)
    rc, err, left, out = with_fifo_run(tmp, "kw", tokp, raw, kill_one)
    lines = err.strip().splitlines()
    check(rc == 1 and len(lines) == 1 and "worker" in err and "killed by signal 9" in err and not left
          and not os.path.exists(os.path.join(out, "k_manifest.json")),
          f"a worker killed -9 while it holds work: exit 1, one error line, nothing left (rc {rc}, left {left}): "
          f"{lines[-1:]}")

    def ctrl_c(p, workers, go):
        os.killpg(p.pid, signal.SIGINT)
    rc, err, left, out = with_fifo_run(tmp, "kc", tokp, raw, ctrl_c)
    lines = err.strip().splitlines()
    check(rc == 130 and len(lines) == 1 and "interrupted" in err and not left
          and not os.path.exists(os.path.join(out, "k_manifest.json")),
          f"Ctrl-C (SIGINT to the process group) mid-run: exit 130, one line, no process left "
          f"(rc {rc}, left {left}): {lines[-1:] if len(lines) < 3 else lines[:3]}")

    p = subprocess.Popen([PY, "-c", FULL_DRIVER, DATA_DIR, "--quiet", "--out", os.path.join(tmp, "full"), "--tokenizer",
                          tokp, "--workers", "2", "--chunk-bytes", "2000", "--shard-tokens", "2000", bigin],
                         stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, start_new_session=True)
    try:
        _, err = p.communicate(timeout=60)
        rc = p.returncode
    except subprocess.TimeoutExpired:
        os.killpg(p.pid, signal.SIGKILL)
        _, err = p.communicate()
        rc = None
    left = gone(p.pid, 10)
    check(rc == 1 and err.count("\n") == 1 and "No space left on device" in err and not left,
          f"a full disk at the 3rd shard, 2 workers busy: one error line, no process left (rc {rc}): "
          f"{err.strip()[:120]}")

    bad_in = os.path.join(tmp, "late_bad.jsonl")
    with open(bad_in, "wb") as f:
        f.write(raw + b"{not json\n" + raw[:20000])
    p = subprocess.Popen([PY, os.path.join(DATA_DIR, "prepare.py"), "--quiet", "--out", os.path.join(tmp, "lb"),
                          "--tokenizer", tokp, "--chunk-bytes", "2000", "--workers", "2", bad_in],
                         stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, start_new_session=True)
    try:
        _, err = p.communicate(timeout=60)
        rc = p.returncode
    except subprocess.TimeoutExpired:
        os.killpg(p.pid, signal.SIGKILL)
        _, err = p.communicate()
        rc = None
    left = gone(p.pid, 10)
    check(rc == 1 and err.count("\n") == 1 and "bad JSON" in err and not left
          and not glob.glob(os.path.join(tmp, "lb", "*.bin")),
          f"bad JSON after 3,000 documents, 2 workers busy: one error line, shards deleted, no process left: "
          f"{err.strip()[:120]}")


TRICKY = (list("abcXYZ019 '!?.,-_\"\\[]^") +
          ["'s", "'S", "'ll", "'ve", " 's", "  ", "   ", "\n", "\n\n", "\r\n", "\t", "\x0b", "\x0c", "\x1c", "\x00",
           "\x85", "\xa0", "\u2000", "\u200b", "\u3000", "\u2028", "\u180e", "\u1680", "caf\u00e9", "\u00df", "\u03a9",
           "e\u0301", "\u0915\u0903", "\u0660", "\u2160", "\u00bd", "\u00b2", "\u4e2d", "\ud55c", "\u01c5", "\u02b0",
           "\u200d", "\ufeff", "\ue000", "\u201c", "\u2014", "\u20ac", "<|endo"])
UNSAFE = ["\U0001F600", "\U00020000", EOT, "\u0378"]  # beyond U+FFFF, the EOT text, unassigned


def encoder_cases(tok):
    """The fast Encoder against encode_batch, on documents made of edge cases."""
    r = random.Random(5)
    docs = ["".join(r.choice(TRICKY if r.random() < 0.98 else UNSAFE) for _ in range(r.randint(0, 120)))
            for _ in range(1500)]
    pats = prep.fast_patterns(tok)
    enc = prep.Encoder(tok, pats)
    got, _ = enc.encode(docs)
    want = [prep.u16le(e.ids) for e in tok.encode_batch(docs)]
    n_slow = sum(1 for d in docs if not d.isascii() and enc.unsafe(d) or enc.special(d))
    check(pats is not None and got == want and 100 < n_slow < 1000,
          f"fast Encoder = encode_batch on {len(docs)} edge-case documents ({n_slow} through encode_batch)")
    cfg = json.loads(tok.to_str())
    cfg["normalizer"] = {"type": "Lowercase"}
    check(prep.fast_patterns(type(tok).from_str(json.dumps(cfg))) is None,
          "a tokenizer with a normalizer is not taken for plain byte-level BPE (encode_batch only)")


def part_ranges(tmp):
    """Every document in exactly one part and in order, whatever N and input kind."""
    d = os.path.join(tmp, "ranges")
    os.makedirs(d)
    files = {"a.txt": "one\ntwo three\n\n\nfour\r\n  \nfive\nsix\n\n" * 7 + "last para\nno newline",
             "b.txt": "", "c.txt": "\n\nx\ny\n\n\nz " * 5,
             "d.jsonl": "".join(json.dumps({"text": f"doc {i}" * i}) + "\n" + "\n" * (i % 3) for i in range(30))}
    for name, text in files.items():
        with open(os.path.join(d, name), "w") as f:
            f.write(text)
    paths = [os.path.join(d, n) for n in sorted(files)]
    try:  # parquet parts go by row group
        import pyarrow
        import pyarrow.parquet
        pyarrow.parquet.write_table(pyarrow.table({"text": [f"row {i}" for i in range(60)]}),
                                    os.path.join(d, "e.parquet"), row_group_size=7)
        paths.append(os.path.join(d, "e.parquet"))
    except ImportError:
        pass
    bad = []
    for mode in ("file", "lines", "blank"):
        full = list(prep.iter_documents(paths, docs=mode))
        for n in (1, 2, 3, 5, 7, 40, 300):
            got = [x for k in range(1, n + 1) for x in prep.iter_documents(paths, docs=mode, part=(k, n))]
            if got != full:
                bad.append(f"{mode} N={n}")
    check(not bad, f"parts of N = 1..300 hold every document once, in order, for --docs file/lines/blank, "
                   f".jsonl{' and .parquet' if paths[-1].endswith('.parquet') else ''} {bad}")


def validate(out, m):
    """The manifest's shards exist, with the size, header and sha256 it says."""
    for s in m["train"] + m["val"]:
        with open(os.path.join(out, s["file"]), "rb") as f:
            b = f.read()
        if (hashlib.sha256(b).hexdigest() != s["sha256"] or len(b) != 1024 + 2 * s["tokens"]
                or struct.unpack("<3i", b[:12]) != (20240520, 1, s["tokens"])):
            return False
    return (sum(s["tokens"] for s in m["train"]) == m["train_tokens"]
            and all(os.path.isfile(os.path.join(out, t)) for t in m["tokenizer_files"]))


def one_line_error(r, want):
    return r.returncode != 0 and r.stderr.count("\n") == 1 and "error:" in r.stderr and want in r.stderr


def sha_of(path):
    """sha256 of a file, None if it is gone."""
    try:
        with open(path, "rb") as f:
            return hashlib.sha256(f.read()).hexdigest()
    except OSError:
        return None


def inputs_vs_outputs(tmp, inputs):
    """No input is ever a file the run writes or deletes; the tokenizer made by --tokenizer-only
    in the same directory and prefix is the one exception, and it stays untouched."""
    d = os.path.join(tmp, "io")
    os.makedirs(d)
    src = os.path.join(tmp, "t0.txt")
    for name in ("c_manifest.json", "c_train_7.bin", "c_val_000.bin.tmp", "c_tokenizer.bin"):
        p = os.path.join(d, name)
        shutil.copy(src, p)
        r = run_cli(["--out", d, "--prefix", "c", "--train-bpe", "300", p])
        check(one_line_error(r, "which this run writes or deletes") and sha_of(p) == sha_of(src),
              f"input {name} in --out: refused before anything is written, file intact: {r.stderr.strip()[:90]}...")
        if os.path.exists(p):
            os.remove(p)
    link = os.path.join(tmp, "link.txt")
    os.symlink(os.path.join(d, "c_train_000.bin"), link)
    shutil.copy(src, os.path.join(d, "c_train_000.bin"))
    r = run_cli(["--out", d, "--prefix", "c", "--train-bpe", "300", link])
    check(one_line_error(r, "which this run writes or deletes") and sha_of(link) == sha_of(src),
          f"an input that is a symlink to c_train_000.bin in --out: refused, intact: {r.stderr.strip()[:80]}...")
    if os.path.exists(os.path.join(d, "c_train_000.bin")):
        os.remove(os.path.join(d, "c_train_000.bin"))
    other = os.path.join(d, "c_train_x_train_000.bin")  # another prefix's shard, a glob c_train_*.bin takes
    shutil.copy(src, other)
    r = run_cli(["--out", d, "--prefix", "c", "--train-bpe", "300"] + inputs)
    check(r.returncode == 0 and os.path.exists(other), "a run of prefix c leaves prefix c_train_x's files alone")
    tj = os.path.join(d, "c_tokenizer.json")
    with open(tj, "a") as f:
        f.write("\n")  # the same tokenizer, other bytes: the run would rewrite it
    r = run_cli(["--out", d, "--prefix", "c", "--tokenizer", tj] + inputs)
    check(one_line_error(r, "--tokenizer") and sha_of(tj) != sha_of(os.path.join(tmp, "o1", "c_tokenizer.json")),
          f"--tokenizer that is this run's own tokenizer.json with other bytes: refused: {r.stderr.strip()[:80]}...")
    # the documented workflow: --tokenizer-only, then parts and the merge in the same --out and --prefix
    pt = os.path.join(tmp, "ptok")
    r0 = run_cli(["--out", pt, "--prefix", "c", "--train-bpe", "300", "--tokenizer-only"] + inputs)
    tokp = os.path.join(pt, "c_tokenizer.json")
    sha0 = sha_of(tokp)
    args = ["--out", pt, "--prefix", "c", "--tokenizer", tokp, "--workers", "1"] + inputs
    rs = [run_cli(args + ["--part", f"{k}/2"]) for k in (1, 2)]
    rm = run_cli(["--merge", "--out", pt, "--prefix", "c"])
    again = run_cli(args + ["--part", "2/2"])
    check(all(x.returncode == 0 for x in [r0, rm] + rs) and sha_of(tokp) == sha0 and "up to date" in again.stdout,
          "--tokenizer-only, 2 parts and the merge in one --out and --prefix: the tokenizer stays byte for byte, "
          "a part rerun is still a no-op")


def printed_glob(stdout, flag):
    """The glob after `flag` in prepare.py --merge's last line ('' if none)."""
    last = stdout.strip().splitlines()[-1] if stdout.strip() else ""
    words = shlex.split(last.split("train on", 1)[1]) if "train on" in last else []
    return words[words.index(flag) + 1] if flag in words else ""


def trainer_tokens(pattern, V):
    """The train tokens ./train_gpt reads through -i pattern (its 'train samples' row)."""
    r = subprocess.run([os.path.join(ROOT, "train_gpt"), "-L", "2", "-H", "64", "-heads", "2", "-seq", "32", "-V",
                        str(V), "-mb", "1", "-gb", "1", "-ramp", "off", "-steps", "1", "-threads", "1", "-i", pattern],
                       capture_output=True, text=True, timeout=120)
    m = re.search(r"train samples\s*\|\s*\d+ \((\d+) tokens\)", r.stdout)
    return int(m.group(1)) if m else f"none (rc {r.returncode}: {r.stderr.strip()[-200:]})"


def strays(tmp, op, V):
    """Files named like shards around a merge: the globs it prints take exactly its manifest's."""
    d = os.path.join(tmp, "strays")
    shutil.copytree(op, d)
    shard = os.path.join(d, "c_p0001of0003_train_000.bin")
    shutil.copy(shard, os.path.join(d, "c_p0002of0003_train_099.bin"))  # like a part's shard, in no manifest
    shutil.copy(shard, os.path.join(d, "c_train_042.bin"))  # an earlier output of this prefix
    r = run_cli(["--merge", "--out", d, "--prefix", "c"])
    with open(os.path.join(d, "c_manifest.json")) as f:
        m = json.load(f)
    gi = printed_glob(r.stdout, "-i")
    names = sorted(os.path.basename(x) for x in glob.glob(gi))
    check(r.returncode == 0 and names == [s["file"] for s in m["train"]],
          f"a stray part-like shard and an old c_train_042.bin: the printed -i glob matches the manifest's "
          f"{len(m['train'])} shards only ({names})")
    got = trainer_tokens(gi, V)
    check(got == m["train_tokens"], f"train_gpt -i {os.path.basename(gi)} reads the manifest's "
                                    f"{m['train_tokens']:,} tokens (got {got})")
    shutil.copy(shard, os.path.join(d, "c_train_x_train_000.bin"))  # another prefix's shard
    r = run_cli(["--merge", "--out", d, "--prefix", "c"])
    check(one_line_error(r, "c_train_x_train_000.bin is not a shard of c"),
          f"a file of another prefix that the glob would take: merge refused: {r.stderr.strip()}")
    if os.path.exists(os.path.join(d, "c_train_x_train_000.bin")):
        os.remove(os.path.join(d, "c_train_x_train_000.bin"))
    tokp = os.path.join(tmp, "o1", "c_tokenizer.json")
    r = run_cli(["--out", d, "--part", "2/3", "--force", "--prefix", "c", "--tokenizer", tokp, "--val-frac", "0.1",
                 "--shard-tokens", "7000", "--workers", "2", os.path.join(tmp, "t*.txt"), os.path.join(tmp, "c.jsonl")])
    check(r.returncode == 0 and not glob.glob(os.path.join(d, "c_train_*.bin"))
          and not os.path.exists(os.path.join(d, "c_manifest.json")),
          "a part that runs again deletes the merged manifest and the merged shards (no stale glob)")


def parts_cli(tmp, inputs, o1, ol, want_tr, want_va, toks_tr):
    tokp = os.path.join(o1, "c_tokenizer.json")
    args = ["--prefix", "c", "--tokenizer", tokp, "--val-frac", "0.1", "--shard-tokens", "7000", "--workers", "2"]
    op = os.path.join(tmp, "parts")
    rs = [run_cli(["--out", op, "--part", f"{k}/3"] + args + inputs) for k in (1, 2, 3)]
    check(all(r.returncode == 0 for r in rs) and "sbatch --array=1-3 " in rs[0].stdout
          and "--part $SLURM_ARRAY_TASK_ID/3" in rs[0].stdout,
          f"--part 1/3, 2/3, 3/3 run and print the sbatch line: {rs[0].stdout.splitlines()[1].strip()[:110]}...")
    r = run_cli(["--merge", "--out", op, "--prefix", "c"])
    with open(os.path.join(op, "c_manifest.json")) as f:
        m = json.load(f)
    with open(os.path.join(ol, "c_manifest.json")) as f:
        single = json.load(f)
    V, eot, table = read_tokenizer_bin(os.path.join(op, "c_tokenizer.bin"))
    tr = [os.path.join(op, s["file"]) for s in m["train"]]
    got_tr, toks = docs_from_shards(tr, eot, table)
    got_va, _ = docs_from_shards([os.path.join(op, s["file"]) for s in m["val"]], eot, table)
    check(r.returncode == 0 and validate(op, m) and len(m["train"]) >= 3 and m["parts"] == 3
          and all(m[k] == single[k] for k in ("settings", "train_docs", "val_docs", "train_tokens", "val_tokens")),
          f"--merge: one manifest of {len(m['train'])} + {len(m['val'])} shards that check out; settings and "
          f"counts = the single job's")
    check(got_tr == want_tr and got_va == want_va and toks == toks_tr,
          "merged parts = the single job: same documents on the same side, in order, same token stream")
    names = [s["file"] for s in m["train"]]
    gi, gj = printed_glob(r.stdout, "-i"), printed_glob(r.stdout, "-j")
    check(names == [f"c_train_{i:03d}.bin" for i in range(len(names))]
          and all(os.path.samefile(os.path.join(op, s["file"]), os.path.join(op, s["part_file"]))
                  for s in m["train"] + m["val"])
          and sorted(glob.glob(gi)) == tr and sorted(glob.glob(gj)) == [os.path.join(op, s["file"]) for s in m["val"]],
          f"--merge: one sequence c_train_NNN.bin, hard links to the parts' shards; the printed globs ({gi}, "
          f"{gj}) match exactly the manifest's shards")
    strays(tmp, op, V)
    r = run_cli(["--out", op, "--part", "2/3"] + args + inputs)
    check(r.returncode == 0 and "up to date" in r.stdout and os.path.exists(os.path.join(op, "c_manifest.json")),
          "a part rerun with the same arguments is a no-op (the merged manifest stays)")

    def broken(name, how):
        d = os.path.join(tmp, name)
        shutil.copytree(op, d)
        how(d)
        return run_cli(["--merge", "--out", d, "--prefix", "c"])
    r = broken("missing", lambda d: os.remove(os.path.join(d, "c_p0002of0003_manifest.json")))
    check(one_line_error(r, "part 2/3 missing"), f"missing part refused: {r.stderr.strip()}")
    r = broken("dup", lambda d: shutil.copy(os.path.join(d, "c_p0002of0003_manifest.json"),
                                             os.path.join(d, "c_p0003of0003_manifest.json")))
    check(one_line_error(r, "manifest of part 2/3, not 3/3"), f"duplicate part refused: {r.stderr.strip()}")
    r = broken("twon", lambda d: shutil.copy(os.path.join(d, "c_p0001of0003_manifest.json"),
                                              os.path.join(d, "c_p0001of0004_manifest.json")))
    check(one_line_error(r, "3 and 4-part runs"), f"parts of two different N refused: {r.stderr.strip()}")

    def flip(d):
        with open(os.path.join(d, "c_p0003of0003_train_000.bin"), "r+b") as f:
            f.seek(2000)
            b = f.read(1)
            f.seek(2000)
            f.write(bytes([b[0] ^ 1]))
    r = broken("flip", flip)
    check(one_line_error(r, "does not match its manifest"), f"a changed shard refused: {r.stderr.strip()}")
    ot = os.path.join(tmp, "tok300")
    r = run_cli(["--out", ot, "--prefix", "t", "--train-bpe", "300", "--tokenizer-only"] + inputs)
    check(r.returncode == 0 and sorted(os.listdir(ot)) == ["t_tokenizer.bin", "t_tokenizer.json"],
          "--tokenizer-only writes just the tokenizer files")
    other = ["--prefix", "c", "--tokenizer", os.path.join(ot, "t_tokenizer.json")] + args[4:]
    r = broken("othertok", lambda d: run_cli(["--out", d, "--part", "2/3"] + other + inputs))
    check(one_line_error(r, "part 2/3 was made with another tokenizer"), f"a part with another tokenizer refused: "
          f"{r.stderr.strip()}")
    for part, want in (("0/3", "1 <= K <= N"), ("4/3", "1 <= K <= N"), ("x", "K/N")):
        r = run_cli(["--out", os.path.join(tmp, "bad"), "--part", part] + args + inputs)
        check(one_line_error(r, want) and not os.path.exists(os.path.join(tmp, "bad")),
              f"--part {part} refused: {r.stderr.strip()}")
    r = run_cli(["--out", os.path.join(tmp, "bad"), "--part", "1/3", "--train-bpe", "300"] + inputs)
    check(one_line_error(r, "--part needs --tokenizer"),
          f"--part with --train-bpe refused: {r.stderr.strip()[:100]}...")


def progress_cases(tmp, o1):
    jl = os.path.join(tmp, "c.jsonl")
    args = ["--out", os.path.join(tmp, "pg"), "--prefix", "p", "--tokenizer", os.path.join(o1, "c_tokenizer.json")]
    r = subprocess.run([PY, os.path.join(DATA_DIR, "prepare.py")] + args + [jl], capture_output=True, text=True)
    line = r.stderr.strip().splitlines()[-1] if r.stderr.strip() else ""
    check(r.returncode == 0 and "MB/s" in line and "100.0%" in line and "ETA" in line, f"progress: {line}")
    with open(jl) as f:
        r = subprocess.run([PY, os.path.join(DATA_DIR, "prepare.py"), "--force", "--format", "jsonl"] + args
                           + ["/dev/stdin"], input=f.read(), capture_output=True, text=True)
    line = r.stderr.strip().splitlines()[-1] if r.stderr.strip() else ""
    check(r.returncode == 0 and "MB/s" in line and "size unknown" in line, f"progress from a pipe: {line}")


if __name__ == "__main__":
    main()
