"""
dedup.py: fuzzy document-level deduplication with MinHash LSH (the `datasketch` library), the
first step of MT-NLG's data curation (arXiv 2201.11990, section 3.1). The kept documents go out
as JSONL for dev/data/decontaminate.py and dev/data/prepare.py (doc/curation.md).

    ~/.cache/llmc/hf-venv/bin/python dev/data/dedup.py --out kept.jsonl [--threshold 0.8]
        [--num-perm 128] [--shingle word|char] [--ngram K] [--seed 1]
        [--field text] [--docs file|lines|blank] [--quiet] FILE_OR_GLOB ...

Inputs: what prepare.py reads, through its own reader (*.jsonl with --field, *.parquet,
  text files with --docs), in the same order.
Rule: documents are taken in input order. Each one's MinHash signature (--num-perm
  permutations of its set of shingles) is looked up in an LSH index of the documents kept
  so far; among the candidates, the one with the highest estimated Jaccard similarity is
  compared with --threshold: at or above it the document is removed as a duplicate of that
  kept document, otherwise it is kept and indexed. So the first copy is the one kept, and
  every removed document names a kept one it is similar to (not a chain of removed ones).
Shingles: --shingle word (default): runs of --ngram (default 5) words, a word being a run of
  letters or digits, lowercased, so case, punctuation and spacing do not matter; --shingle
  char: runs of --ngram (default 24) characters of the lowercased text with whitespace runs
  made one space, for text without spaces between words.
Outputs: OUT (JSONL, {"text": ...} per kept document, input order); OUT's name with
  .removed.jsonl (one line per removed document: its index, source file and index in it,
  the kept document it duplicates and the estimated Jaccard); .report.json (the counts and
  settings). Written as .tmp files and renamed at the end, so a failed run leaves none.
Memory: datasketch's MinHashLSH keeps its index in memory (a set per band value), and the
  signature of each kept document is kept for the Jaccard estimate: about 5.7 KB per kept
  document at --num-perm 128 (measured, doc/curation.md), ~6 GB per million. The documents
  themselves are streamed; removed ones cost nothing.
"""

import argparse
import bisect
import json
import os
import re
import stat
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from prepare import (PrepareError, Progress, expand_inputs, iter_documents,  # noqa: E402
                     refuse_outputs_on_inputs)

WORD = re.compile(r"[^\W_]+")  # letters and digits: punctuation and "_" separate words
DEFAULT_NGRAM = {"word": 5, "char": 24}


class Parser(argparse.ArgumentParser):
    def error(self, message):  # one `error:` line, like the other tools, not argparse's usage block
        print(f"error: {message} (dedup.py -h)", file=sys.stderr)
        sys.exit(2)


def shingles(text, kind, k):
    """The document's set of shingles as bytes (what datasketch hashes)."""
    if kind == "word":
        toks = [w.lower() for w in WORD.findall(text)]
    else:
        toks = " ".join(text.lower().split())
    if len(toks) <= k:  # shorter than one shingle: the whole text is the one shingle
        grams = [toks]
    else:
        grams = [toks[i:i + k] for i in range(len(toks) - k + 1)]
    if kind == "word":
        return {" ".join(g).encode() for g in grams}
    return {g.encode() for g in grams}


class Sources:
    """Maps a document's global index to (file, index in that file) without a per-document table."""

    def __init__(self):
        self.starts, self.paths = [], []

    def add(self, start, path):
        self.starts.append(start)
        self.paths.append(path)

    def where(self, index):
        f = bisect.bisect_right(self.starts, index) - 1
        return self.paths[f], index - self.starts[f]


def read_with_sources(paths, field, docs, sources):
    """(global index, text) of every document, registering each file's first index in sources."""
    i = 0
    for p in paths:
        sources.add(i, p)
        try:
            for text in iter_documents([p], field, docs):
                yield i, text
                i += 1
        except RecursionError:  # prepare.py's reader catches json's ValueError, not this
            raise PrepareError(f"{p}: bad JSON (nested too deeply) after document {i - sources.starts[-1]}")


def side_names(out):
    stem = out[:-len(".jsonl")]
    return stem + ".removed.jsonl", stem + ".report.json"


def check_args(a):
    if not 0.0 < a.threshold <= 1.0:  # (also refuses nan)
        raise PrepareError(f"--threshold must be in (0, 1], got {a.threshold}")
    if not 2 <= a.num_perm <= 4096:
        raise PrepareError(f"--num-perm must be in [2, 4096], got {a.num_perm}")
    if a.ngram is None:
        a.ngram = DEFAULT_NGRAM[a.shingle]
    if not 1 <= a.ngram <= 1000:
        raise PrepareError(f"--ngram must be in [1, 1000], got {a.ngram}")
    if not 0 <= a.seed < 2 ** 32:
        raise PrepareError(f"--seed must be in [0, 2^32), got {a.seed}")
    if not a.out.endswith(".jsonl"):
        raise PrepareError(f"--out must end in .jsonl (prepare.py picks the reader by extension): {a.out}")
    d = os.path.dirname(os.path.abspath(a.out))
    if not os.path.isdir(d):
        raise PrepareError(f"--out: no such directory: {d}")


def dedup(a, paths):
    from datasketch import LeanMinHash, MinHash, MinHashLSH
    removed_path, report_path = side_names(a.out)
    refuse_outputs_on_inputs([a.out, removed_path, report_path], [("the input", p) for p in paths])
    for p in paths:
        mode = os.stat(p).st_mode
        if not (stat.S_ISREG(mode) or stat.S_ISFIFO(mode)):  # a device (/dev/zero) would be read without end
            raise PrepareError(f"{p} is not a regular file or a FIFO")
    # Candidates are checked against the threshold by their estimated Jaccard, so a false positive of
    # the bands costs one comparison and a false negative a missed duplicate: weigh the misses 9:1
    # (at 0.8 and 128 permutations: 14 bands of 9 rows, a pair at J 0.8 is a candidate with p 0.87,
    # against 9 x 13 and p 0.40 with datasketch's default equal weights).
    lsh = MinHashLSH(threshold=a.threshold, num_perm=a.num_perm, weights=(0.1, 0.9))
    template = MinHash(num_perm=a.num_perm, seed=a.seed)  # copies share its permutations
    kept_sig = {}  # kept index -> LeanMinHash, for the Jaccard estimate against candidates
    cluster = {}  # kept index -> number of documents removed as its duplicates
    sources = Sources()
    n = n_removed = nbytes = 0
    t0 = time.time()
    prog = Progress("dedup.py", sum(os.path.getsize(p) for p in paths if os.path.isfile(p)), a.quiet)
    a.created += [a.out + ".tmp", removed_path + ".tmp"]
    with open(a.out + ".tmp", "w", encoding="utf-8") as fk, open(removed_path + ".tmp", "w", encoding="utf-8") as fr:
        for i, text in read_with_sources(paths, a.field, a.docs, sources):
            m = template.copy()
            m.update_batch(shingles(text, a.shingle, a.ngram))
            best_j, best = -1.0, None
            for c in lsh.query(m):
                j = m.jaccard(kept_sig[c])
                if j > best_j or (j == best_j and c < best):  # ties: the earliest document, deterministically
                    best_j, best = j, c
            if best is not None and best_j >= a.threshold:
                n_removed += 1
                cluster[best] = cluster.get(best, 0) + 1
                src, k = sources.where(i)
                dsrc, dk = sources.where(best)
                fr.write(json.dumps({"index": i, "source": src, "source_index": k, "duplicate_of": best,
                                     "duplicate_of_source": dsrc, "duplicate_of_source_index": dk,
                                     "jaccard": round(best_j, 4)}) + "\n")
            else:
                lsh.insert(i, m, check_duplication=False)
                kept_sig[i] = LeanMinHash(m)
                fk.write(json.dumps({"text": text}, ensure_ascii=False) + "\n")
            n += 1
            b = len(text.encode("utf-8"))
            nbytes += b
            prog.update(b, 1)
    if n == 0:
        raise PrepareError("no documents in the input")
    prog.done()
    dt = max(time.time() - t0, 1e-9)
    report = {"documents_in": n, "removed": n_removed, "kept": n - n_removed, "clusters": len(cluster),
              "largest_cluster": 1 + max(cluster.values(), default=0), "input_bytes": nbytes,
              "seconds": round(dt, 3), "docs_per_s": round(n / dt, 1),
              "settings": {"threshold": a.threshold, "num_perm": a.num_perm, "lsh_bands": lsh.b, "lsh_rows": lsh.r,
                           "shingle": a.shingle, "ngram": a.ngram, "seed": a.seed, "inputs": paths,
                           "field": a.field, "docs": a.docs}}
    a.created.append(report_path + ".tmp")
    with open(report_path + ".tmp", "w", encoding="utf-8") as f:
        f.write(json.dumps(report, indent=1) + "\n")
    for p in (a.out, removed_path, report_path):
        os.replace(p + ".tmp", p)
    return report


def main(argv=None):
    ap = Parser(description=__doc__.split("\n\n")[0].strip(), formatter_class=argparse.RawDescriptionHelpFormatter,
                epilog="\n\n".join(__doc__.split("\n\n")[2:]))
    ap.add_argument("inputs", nargs="+", help="files or globs (.jsonl, .parquet, text), as for prepare.py")
    ap.add_argument("--out", required=True, help="the kept documents, JSONL (must end in .jsonl)")
    ap.add_argument("--threshold", type=float, default=0.8,
                    help="Jaccard similarity at or above which a document is a duplicate, in (0, 1] (default 0.8)")
    ap.add_argument("--num-perm", type=int, default=128, help="MinHash permutations, 2..4096 (default 128)")
    ap.add_argument("--shingle", choices=["word", "char"], default="word", help="shingles of words or characters")
    ap.add_argument("--ngram", type=int, help="shingle length (default 5 words, or 24 characters)")
    ap.add_argument("--seed", type=int, default=1, help="MinHash permutation seed (default 1)")
    ap.add_argument("--field", default="text", help="JSON field / parquet column (default text)")
    ap.add_argument("--docs", choices=["file", "lines", "blank"], default="file",
                    help="text files: one document per file, per line, or per blank-line paragraph")
    ap.add_argument("--quiet", action="store_true", help="no progress line")
    a = ap.parse_args(argv)
    a.created = []  # the .tmp files this run made: the only ones a failure may delete
    try:
        check_args(a)
        paths = expand_inputs(a.inputs)
        try:
            import datasketch  # noqa: F401
        except ImportError:
            raise PrepareError("Python package `datasketch` is missing: run `bash dev/install.sh` and use "
                               "~/.cache/llmc/hf-venv/bin/python")
        r = dedup(a, paths)
    except (PrepareError, OSError) as e:
        for p in a.created:
            if os.path.exists(p):
                os.remove(p)
        print(f"error: {e}", file=sys.stderr)
        return 1
    print(f"dedup.py: {r['documents_in']:,} documents in, {r['removed']:,} removed, {r['kept']:,} kept, "
          f"{r['clusters']:,} clusters (largest {r['largest_cluster']}); threshold {a.threshold}, "
          f"num_perm {a.num_perm} ({r['settings']['lsh_bands']} bands x {r['settings']['lsh_rows']} rows), "
          f"{a.shingle} {a.ngram}-grams; {r['seconds']} s, {r['docs_per_s']:,} docs/s; wrote {a.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
