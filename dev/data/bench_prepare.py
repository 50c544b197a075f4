"""
Benchmark (not a test) of dev/data/prepare.py: input MB/s, total and per worker, for
1 and 2 workers, on the KJV (66 books as text files, one document each) and on a larger
synthetic .jsonl corpus. Tokenization uses the KJV tokenizer (--tokenizer path), so
the figures are for the streaming read + split + tokenize + shard write pipeline; the
BPE training time on the KJV is reported separately.

    /usr/bin/python3 dev/data/bench_prepare.py [--mb 200] [--workers 1,2]
    (needs `make data` first: dev/data/kjv/kjv_tokenizer.json)
"""

import argparse
import hashlib
import glob
import json
import os
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


def digest(out):
    h = hashlib.sha256()
    for p in sorted(glob.glob(os.path.join(out, "b_*.bin"))):
        with open(p, "rb") as f:
            h.update(f.read())
    return h.hexdigest()[:12]


def run(inputs, tokenizer, workers, out):
    t0 = time.time()
    r = subprocess.run([sys.executable, os.path.join(HERE, "prepare.py"), "--quiet", "--force",
                        "--out", out, "--prefix", "b", "--tokenizer", tokenizer,
                        "--workers", str(workers)] + inputs, capture_output=True, text=True)
    dt = time.time() - t0
    if r.returncode:
        sys.exit(f"bench_prepare.py: error: prepare.py failed: {r.stderr.strip()}")
    return dt


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--mb", type=float, default=200, help="size of the synthetic corpus")
    ap.add_argument("--workers", default="1,2")
    args = ap.parse_args()
    tokp = os.path.join(HERE, "kjv", "kjv_tokenizer.json")
    if not os.path.isfile(tokp):
        sys.exit("bench_prepare.py: error: run `make data` first (needs dev/data/kjv/kjv_tokenizer.json)")
    workers = [int(w) for w in args.workers.split(",")]
    tmp = tempfile.mkdtemp(prefix="bench_prepare.")
    try:
        books = prepare_kjv.read_bible()
        kdir = os.path.join(tmp, "kjv")
        os.makedirs(kdir)
        for i, (name, chapters) in enumerate(books):
            with open(os.path.join(kdir, f"{i:02d}_{name}.txt"), "w") as f:
                f.write("\n".join(prepare_kjv.chapter_text(v) for _, v in chapters))
        # synthetic: documents of KJV words in random order (a Zipf-ish mix of lengths)
        words = " ".join(" ".join(v2 for _, v in c for v2 in v) for _, c in books).split()
        r = random.Random(0)
        syn = os.path.join(tmp, "syn.jsonl")
        target, size = args.mb * 1e6, 0
        with open(syn, "w") as f:
            while size < target:
                n = int(r.paretovariate(1.2) * 80)
                s = " ".join(r.choice(words) for _ in range(min(n, 20000)))
                line = json.dumps({"text": s}) + "\n"
                f.write(line)
                size += len(line)
        t0 = time.time()
        prep.prepare(lambda: prep.iter_documents(sorted(glob.glob(os.path.join(kdir, "*.txt")))),
                     os.path.join(tmp, "bpe"), "b", vocab=8192, quiet=True)
        print(f"BPE training, vocab 8192, on the KJV train split: {time.time() - t0:.1f} s "
              f"(incl. tokenizing it once)")
        print(f"{'corpus':<10} {'MB':>7} {'workers':>7} {'s':>7} {'MB/s':>7} {'MB/s/worker':>11}  shards sha256")
        for label, inputs in (("kjv", [os.path.join(kdir, "*.txt")]), ("synthetic", [syn])):
            mb = sum(os.path.getsize(p) for p in prep.expand_inputs(inputs)) / 1e6
            for w in workers:
                out = os.path.join(tmp, f"o_{label}_{w}")
                dt = run(inputs, tokp, w, out)
                print(f"{label:<10} {mb:7.1f} {w:7d} {dt:7.1f} {mb / dt:7.2f} {mb / dt / w:11.2f}  {digest(out)}",
                      flush=True)
                shutil.rmtree(out)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    print(f"nproc {os.cpu_count()}; load average {' '.join(f'{x:.2f}' for x in os.getloadavg())}")


if __name__ == "__main__":
    main()
