"""
Benchmark (not a test) of corpus preparation: input MB/s of several ways to turn the same
JSONL corpus into token shards with the same tokenizer on the same cores, in one run:

  (a) old serial: dev/data/prepare.py's loop before the fast engine (what `--engine hf
      --workers 1` still does): one process reads, splits and calls the tokenizer's
      encode_batch on ~1 MB chunks (the Rust pool held to 1 thread), then appends the ids
      to shard buffers. Rewritten here, so the figure does not depend on this tree.
  (b) Megatron-LM's method (tools/preprocess_data.py): a multiprocessing.Pool of workers,
      each loading its own tokenizer in the pool initializer, pool.imap(encoder.encode,
      lines, chunksize=25), where encode parses one JSON line and tokenizes its text, and
      the main process appends each document's ids and an end-of-document token. Written
      here after that structure (with the Hugging Face tokenizer), not its code.
  (c) prepare.py as it is now, run as a command (start-up included): --engine hf (encode_batch
      in worker processes) and --engine fast, with 1 and with --workers N processes.

The tokens column shows that all rows produce the same number of tokens, and the sha256
column that (a) and every prepare.py row write the same shards, byte for byte.
Corpus (deterministic, --mb MB): documents of KJV words in random order with Pareto
lengths; 1 document in 20 gets a few non-ASCII words (accents, curly quotes, dashes,
Greek, CJK) and 1 in 200 an emoji, which the fast engine hands to encode_batch.

    /usr/bin/python3 dev/data/bench_prepare.py [--mb 50] [--workers N]
    (needs `make data` first: dev/data/kjv/kjv_tokenizer.json)
"""

import argparse
import array
import hashlib
import json
import multiprocessing
import os
import platform
import random
import shutil
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import prepare as prep  # noqa: E402
import prepare_kjv  # noqa: E402

OTHER_WORDS = ["caf\u00e9", "na\u00efve", "\u201cBehold,\u201d", "\u2014", "Z\u00fcrich",
               "\u1f38\u03b7\u03c3\u03bf\u1fe6\u03c2", "\u5317\u4eac", "\u00bd", "r\u00e9sum\u00e9", "\u2019tis"]


def make_corpus(path, mb):
    books = prepare_kjv.read_bible()
    words = " ".join(" ".join(v2 for _, v in c for v2 in v) for _, c in books).split()
    r = random.Random(0)
    size = ndocs = 0
    with open(path, "w") as f:
        while size < mb * 1e6:
            n = min(int(r.paretovariate(1.2) * 80), 20000)
            doc = [r.choice(words) for _ in range(n)]
            if ndocs % 20 == 7:
                for _ in range(r.randint(1, 5)):
                    doc.insert(r.randint(0, n), r.choice(OTHER_WORDS))
            if ndocs % 200 == 13:
                doc.insert(r.randint(0, n), "\U0001F600")
            line = json.dumps({"text": " ".join(doc)}) + "\n"
            f.write(line)
            size += len(line.encode())
            ndocs += 1
    return ndocs


def shards_digest(paths):
    h = hashlib.sha256()
    for p in paths:
        with open(p, "rb") as f:
            h.update(f.read())
    return h.hexdigest()[:12]


def old_serial(corpus, tokp, out):
    """(a) -> (tokens, digest of the train + val shards)."""
    from tokenizers import Tokenizer
    tok = Tokenizer.from_file(tokp)
    eot, vocab = tok.token_to_id(prep.EOT_TEXT), tok.get_vocab_size()
    is_val = prep.hash_split(0.05)
    bufs = {False: array.array("H"), True: array.array("H")}

    def encode(chunk):
        for (v, _), e in zip(chunk, tok.encode_batch([t for _, t in chunk])):
            if e.ids and max(e.ids) >= vocab:
                sys.exit("bench_prepare.py: error: id outside the vocabulary")
            bufs[v].append(eot)
            bufs[v].extend(e.ids)
    chunk, size = [], 0
    for i, text in enumerate(prep.iter_documents([corpus])):
        chunk.append((is_val(i, text), text))
        size += len(text)
        if size >= prep.CHUNK_BYTES:
            encode(chunk)
            chunk, size = [], 0
    encode(chunk)
    os.makedirs(out)
    paths = []
    for v, split in ((False, "train"), (True, "val")):
        paths.append(os.path.join(out, f"a_{split}_000.bin"))
        prep.write_atomic(paths[-1], prep.shard_header(len(bufs[v])), prep.u16le(bufs[v]))
    return len(bufs[False]) + len(bufs[True]), shards_digest(paths)


class MegatronStyleEncoder:
    """(b)'s worker: the shape of Megatron-LM's Encoder (initializer + encode(json line))."""

    def __init__(self, tokp):
        self.tokp = tokp

    def initializer(self):
        from tokenizers import Tokenizer
        MegatronStyleEncoder.tok = Tokenizer.from_file(self.tokp)
        MegatronStyleEncoder.eod = MegatronStyleEncoder.tok.token_to_id(prep.EOT_TEXT)

    def encode(self, line):
        ids = MegatronStyleEncoder.tok.encode(json.loads(line)["text"]).ids
        ids.append(MegatronStyleEncoder.eod)
        return ids, len(line)


def megatron_style(corpus, tokp, out, workers):
    """(b) -> (tokens, None): its output is a different format (EOD after each document)."""
    encoder = MegatronStyleEncoder(tokp)
    ids = array.array("H")
    with multiprocessing.Pool(workers, initializer=encoder.initializer) as pool, open(corpus) as fin:
        for doc, _ in pool.imap(encoder.encode, fin, 25):
            ids.extend(doc)
    os.makedirs(out)
    prep.write_atomic(os.path.join(out, "b.bin"), prep.u16le(ids))
    return len(ids), None


def prepare_cli(corpus, tokp, out, workers, engine):
    """(c) -> (tokens, digest of the shards)."""
    r = subprocess.run([sys.executable, os.path.join(HERE, "prepare.py"), "--quiet", "--out", out, "--prefix", "c",
                        "--tokenizer", tokp, "--workers", str(workers), "--engine", engine, corpus],
                       capture_output=True, text=True)
    if r.returncode:
        sys.exit(f"bench_prepare.py: error: prepare.py failed: {r.stderr.strip()}")
    with open(os.path.join(out, "c_manifest.json")) as f:
        m = json.load(f)
    shards = [os.path.join(out, s["file"]) for s in m["train"] + m["val"]]
    return m["train_tokens"] + m["val_tokens"], shards_digest(shards)


def cpu_model():
    try:
        with open("/proc/cpuinfo") as f:
            return next(line.split(":", 1)[1].strip() for line in f if line.startswith("model name"))
    except (OSError, StopIteration):
        return platform.processor() or "unknown"


def main():
    ncpu = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0].strip(),
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--mb", type=float, default=50, help="size of the synthetic corpus in MB (default 50)")
    ap.add_argument("--workers", type=int, default=ncpu, help=f"processes for the parallel rows (default {ncpu})")
    args = ap.parse_args()
    tokp = os.path.join(HERE, "kjv", "kjv_tokenizer.json")
    if not os.path.isfile(tokp):
        sys.exit("bench_prepare.py: error: run `make data` first (needs dev/data/kjv/kjv_tokenizer.json)")
    os.environ["RAYON_NUM_THREADS"] = "1"  # every method gets its parallelism from processes alone
    os.environ["TOKENIZERS_PARALLELISM"] = "false"
    import tokenizers
    tmp = tempfile.mkdtemp(prefix="bench_prepare.")
    try:
        corpus = os.path.join(tmp, "corpus.jsonl")
        ndocs = make_corpus(corpus, args.mb)
        mb = os.path.getsize(corpus) / 1e6
        w = args.workers
        print(f"CPU: {cpu_model()}, {ncpu} usable cores; tokenizers {tokenizers.__version__}; "
              f"Python {platform.python_version()}; tokenizer: KJV BPE, vocab 8192")
        print(f"corpus: {mb:.1f} MB JSONL, {ndocs:,} documents; load average at start "
              f"{' '.join(f'{x:.2f}' for x in os.getloadavg())}")
        rows = [("(a) old serial: encode_batch, 1 process", 1, lambda o: old_serial(corpus, tokp, o)),
                ("(b) Megatron-LM style: Pool.imap, chunksize 25", w, lambda o: megatron_style(corpus, tokp, o, w)),
                ("(c) prepare.py --engine hf", w, lambda o: prepare_cli(corpus, tokp, o, w, "hf")),
                ("(c) prepare.py --engine fast", 1, lambda o: prepare_cli(corpus, tokp, o, 1, "fast")),
                ("(c) prepare.py --engine fast", w, lambda o: prepare_cli(corpus, tokp, o, w, "fast"))]
        print(f"| {'method':<48} | workers | {'s':>6} | {'MB/s':>6} | vs (a) | {'tokens':>11} | shards sha256  |")
        print(f"|{'-' * 50}|--------:|-------:|-------:|-------:|------------:|----------------|")
        base = None
        for i, (label, workers, fn) in enumerate(rows):
            t0 = time.time()
            tokens, digest = fn(os.path.join(tmp, f"out{i}"))
            dt = time.time() - t0
            base = base or mb / dt
            print(f"| {label:<48} | {workers:7d} | {dt:6.1f} | {mb / dt:6.2f} | {mb / dt / base:5.1f}x | {tokens:11,d} "
                  f"| {digest or '(other format)':<14} |", flush=True)
            shutil.rmtree(os.path.join(tmp, f"out{i}"))
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    print(f"load average at the end {' '.join(f'{x:.2f}' for x in os.getloadavg())} (other jobs on these cores "
          f"slow every row)")


if __name__ == "__main__":
    main()
