"""
decontaminate.py: removes evaluation text from training documents by exact n-gram matching
(13-grams), as GPT-3 (arXiv 2005.14165, appendix C) and MT-NLG (arXiv 2201.11990, section 3.1)
did. The documents left go out as JSONL for dev/data/prepare.py (doc/curation.md).

    ~/.cache/llmc/hf-venv/bin/python dev/data/decontaminate.py --out clean.jsonl
        --eval dev/eval/kjv_cloze.jsonl [--eval MORE ...] [--eval-field F ...] [--n 13]
        [--mode remove|split] [--margin 200] [--min-chars 200] [--max-splits 10]
        [--max-doc-hits 10] [--field text] [--docs file|lines|blank] [--quiet] FILE_OR_GLOB ...

Inputs: the training documents as prepare.py reads them (its reader: *.jsonl with --field,
  *.parquet, text files with --docs). --eval: evaluation files; *.jsonl: one item per line,
  the --eval-field strings joined by a space (default: every string field, in order, so a
  cloze item is its context then its target); *.parquet: the --eval-field column (default
  text); other files: paragraphs separated by blank lines.
Normalization (both sides): a word is a run of letters or digits, lowercased; everything
  else separates words. So "Moses." and "moses" match, and so do texts that differ in line
  breaks or punctuation only.
Hit: a training document contains --n consecutive words that also occur consecutively in an
  eval item. Items shorter than --n words cannot be matched and are counted as such.
Common text: an eval n-gram found in more than --max-doc-hits training documents (default 10)
  is taken for common text (a quotation, a formula, boilerplate) rather than leaked eval data,
  and ignored, as GPT-3 and Megatron-LM's filter_ngrams.py do; 0 turns this off. Counting
  needs a first pass over the training files, so they must be regular files unless it is 0.
  N-grams shared by many eval items are not ignored: they are still evaluation text.
On a hit: --mode remove (default) drops the document; --mode split (GPT-3's rule) cuts out
  each matched span with --margin characters on each side (widened to whole words), keeps
  the pieces of at least --min-chars characters as separate documents, and drops the
  document when more than --max-splits pieces are left.
Outputs: OUT (JSONL, {"text": ...} per document or piece, input order); OUT's name with
  .hits.jsonl (one line per matching n-gram occurrence: the document, its source and index
  there, the eval item, the n-gram, its character offset, in how many training documents it
  occurs, whether it was acted on) and .report.json (counts, settings). Written as .tmp
  files and renamed at the end.
Memory: the eval n-grams (a dict), the counts of those found in training, the indices of the
  documents with a hit; the training documents are streamed.
"""

import argparse
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


class Parser(argparse.ArgumentParser):
    def error(self, message):  # one `error:` line, like the other tools, not argparse's usage block
        print(f"error: {message} (decontaminate.py -h)", file=sys.stderr)
        sys.exit(2)


def words(text):
    return [w.lower() for w in WORD.findall(text)]


def words_at(text):
    """(words, start offsets, end offsets): the same words as words(), with where they are."""
    ms = list(WORD.finditer(text))
    return [m.group().lower() for m in ms], [m.start() for m in ms], [m.end() for m in ms]


def eval_items(path, fields):
    """(item name, text) of each item of one eval file."""
    if not os.path.isfile(path):
        raise PrepareError(f"--eval: not a readable file: {path}")
    if path.endswith(".parquet"):
        for k, text in enumerate(iter_documents([path], fields[0] if fields else "text")):
            yield f"{path}#{k}", text
        return
    if not path.endswith(".jsonl"):
        for k, text in enumerate(iter_documents([path], docs="blank")):
            yield f"{path}#{k}", text
        return
    with open(path, "rb") as f:
        for n, raw in enumerate(f, 1):
            if not raw.strip():
                continue
            try:
                obj = json.loads(raw)
            except (ValueError, RecursionError) as e:
                raise PrepareError(f"{path}:{n}: bad JSON ({e})")
            if isinstance(obj, str):
                yield f"{path}:{n}", obj
                continue
            if not isinstance(obj, dict):
                raise PrepareError(f"{path}:{n}: an eval item must be a JSON object or string")
            if fields:
                bad = [k for k in fields if not isinstance(obj.get(k), str)]
                if bad:
                    raise PrepareError(f"{path}:{n}: no string field {bad[0]!r}")
                parts = [obj[k] for k in fields]
            else:
                parts = [v for v in obj.values() if isinstance(v, str)]
                if not parts:
                    raise PrepareError(f"{path}:{n}: no string field")
            yield f"{path}:{n}", " ".join(parts)


def build_index(eval_paths, fields, n):
    """{n-gram (tuple of words): index of the first item holding it}, the item names, counts."""
    index, names, short = {}, [], 0
    for p in eval_paths:
        for name, text in eval_items(p, fields):
            w = words(text)
            k = len(names)
            names.append(name)
            if len(w) < n:
                short += 1
            for i in range(len(w) - n + 1):
                index.setdefault(tuple(w[i:i + n]), k)
    if not names:
        raise PrepareError("the --eval files hold no items")
    if not index:
        raise PrepareError(f"no eval item has {n} words: nothing to match (--n {n})")
    return index, names, short


def matches(w, n, index):
    """Positions i where w[i:i+n] is an eval n-gram, with the n-gram."""
    for i in range(len(w) - n + 1):
        key = tuple(w[i:i + n])
        if key in index:
            yield i, key


def cut_pieces(text, spans, margin):
    """The text outside the spans widened by margin characters and then to whole words."""
    cuts = []
    for s, e in spans:  # spans come in text order
        a, b = max(0, s - margin), min(len(text), e + margin)
        while a > 0 and not text[a - 1].isspace():
            a -= 1
        while b < len(text) and not text[b].isspace():
            b += 1
        if cuts and a <= cuts[-1][1]:
            cuts[-1][1] = max(cuts[-1][1], b)
        else:
            cuts.append([a, b])
    pieces, pos = [], 0
    for a, b in cuts + [[len(text), len(text)]]:
        pieces.append(text[pos:a].strip())
        pos = b
    return [p for p in pieces if p]


def read_docs(paths, field, docs):
    """(global index, source file, index in that file, text) of every document."""
    i = 0
    for p in paths:
        k = 0
        try:
            for text in iter_documents([p], field, docs):
                yield i, p, k, text
                i += 1
                k += 1
        except RecursionError:  # prepare.py's reader catches json's ValueError, not this
            raise PrepareError(f"{p}: bad JSON (nested too deeply) after document {k}")


def side_names(out):
    stem = out[:-len(".jsonl")]
    return stem + ".hits.jsonl", stem + ".report.json"


def check_args(a):
    if not 1 <= a.n <= 1000:
        raise PrepareError(f"--n must be in [1, 1000], got {a.n}")
    if a.margin < 0 or a.min_chars < 0 or a.max_doc_hits < 0:
        raise PrepareError("--margin, --min-chars and --max-doc-hits must be >= 0")
    if a.max_splits < 1:
        raise PrepareError(f"--max-splits must be >= 1, got {a.max_splits}")
    if not a.out.endswith(".jsonl"):
        raise PrepareError(f"--out must end in .jsonl (prepare.py picks the reader by extension): {a.out}")
    d = os.path.dirname(os.path.abspath(a.out))
    if not os.path.isdir(d):
        raise PrepareError(f"--out: no such directory: {d}")


def decontaminate(a, paths):
    hits_path, report_path = side_names(a.out)
    refuse_outputs_on_inputs([a.out, hits_path, report_path],
                             [("the input", p) for p in paths] + [("--eval", p) for p in a.eval])
    for p in paths:
        mode = os.stat(p).st_mode
        if not (stat.S_ISREG(mode) or stat.S_ISFIFO(mode)):  # a device (/dev/zero) would be read without end
            raise PrepareError(f"{p} is not a regular file or a FIFO")
        if a.max_doc_hits and not stat.S_ISREG(mode):
            raise PrepareError(f"{p} is not a regular file: counting common n-grams reads the input twice "
                               "(--max-doc-hits 0 reads it once)")
    t0 = time.time()
    index, names, short = build_index(a.eval, a.eval_field, a.n)
    total = sum(os.path.getsize(p) for p in paths if os.path.isfile(p))
    # pass 1: in how many training documents each eval n-gram occurs, and which documents have any
    doc_hits, hit_docs, n_docs = {}, set(), None
    if a.max_doc_hits:
        prog = Progress("decontaminate.py pass 1/2", total, a.quiet)
        n_docs = 0
        for i, _, _, text in read_docs(paths, a.field, a.docs):
            found = {key for _, key in matches(words(text), a.n, index)}
            for key in found:
                doc_hits[key] = doc_hits.get(key, 0) + 1
            if found:
                hit_docs.add(i)
            n_docs += 1
            prog.update(len(text.encode("utf-8")), 1)
        prog.done()
    c = dict(documents_in=0, contaminated=0, removed=0, split=0, pieces_out=0, pieces_short=0,
             too_many_splits=0, documents_out=0, hits=0, hits_ignored=0)
    prog = Progress("decontaminate.py" + (" pass 2/2" if a.max_doc_hits else ""), total, a.quiet)
    a.created += [a.out + ".tmp", hits_path + ".tmp"]
    with open(a.out + ".tmp", "w", encoding="utf-8") as fo, open(hits_path + ".tmp", "w", encoding="utf-8") as fh:
        def emit(text):
            fo.write(json.dumps({"text": text}, ensure_ascii=False) + "\n")
            c["documents_out"] += 1
        for i, src, k, text in read_docs(paths, a.field, a.docs):
            c["documents_in"] += 1
            prog.update(len(text.encode("utf-8")), 1)
            if a.max_doc_hits and i not in hit_docs:  # pass 1 found nothing here: no need to look again
                emit(text)
                continue
            w, starts, ends = words_at(text)
            spans = []
            for j, key in matches(w, a.n, index):
                seen = doc_hits.get(key, 0) if a.max_doc_hits else None  # (None: not counted)
                used = not a.max_doc_hits or seen <= a.max_doc_hits
                c["hits" if used else "hits_ignored"] += 1
                fh.write(json.dumps({"doc": i, "source": src, "source_index": k, "eval": names[index[key]],
                                     "ngram": " ".join(key), "char": starts[j], "train_docs": seen,
                                     "used": used}, ensure_ascii=False) + "\n")
                if used:
                    spans.append((starts[j], ends[j + a.n - 1]))
            if not spans:
                emit(text)
                continue
            c["contaminated"] += 1
            if a.mode == "remove":
                c["removed"] += 1
                continue
            pieces = cut_pieces(text, spans, a.margin)
            keep = [p for p in pieces if len(p) >= a.min_chars]
            c["pieces_short"] += len(pieces) - len(keep)
            if len(keep) > a.max_splits:
                c["too_many_splits"] += 1
                keep = []
            if not keep:
                c["removed"] += 1
                continue
            c["split"] += 1
            c["pieces_out"] += len(keep)
            for p in keep:
                emit(p)
    if c["documents_in"] == 0:
        raise PrepareError("no documents in the input")
    if n_docs is not None and n_docs != c["documents_in"]:
        raise PrepareError(f"the input changed between the two passes ({n_docs} then {c['documents_in']} documents)")
    prog.done()
    dt = max(time.time() - t0, 1e-9)
    report = dict(c, eval_items=len(names), eval_items_short=short, eval_ngrams=len(index),
                  ngrams_ignored=sum(1 for v in doc_hits.values() if v > a.max_doc_hits) if a.max_doc_hits else 0,
                  seconds=round(dt, 3), docs_per_s=round(c["documents_in"] / dt, 1),
                  settings={"n": a.n, "mode": a.mode, "margin": a.margin, "min_chars": a.min_chars,
                            "max_splits": a.max_splits, "max_doc_hits": a.max_doc_hits, "eval": a.eval,
                            "eval_field": a.eval_field, "inputs": paths, "field": a.field, "docs": a.docs})
    a.created.append(report_path + ".tmp")
    with open(report_path + ".tmp", "w", encoding="utf-8") as f:
        f.write(json.dumps(report, indent=1) + "\n")
    for p in (a.out, hits_path, report_path):
        os.replace(p + ".tmp", p)
    return report


def main(argv=None):
    ap = Parser(description=__doc__.split("\n\n")[0].strip(), formatter_class=argparse.RawDescriptionHelpFormatter,
                epilog="\n\n".join(__doc__.split("\n\n")[2:]))
    ap.add_argument("inputs", nargs="+", help="training files or globs (.jsonl, .parquet, text), as for prepare.py")
    ap.add_argument("--out", required=True, help="the documents left, JSONL (must end in .jsonl)")
    ap.add_argument("--eval", action="append", required=True, metavar="FILE",
                    help="an evaluation file (.jsonl, .parquet or text); repeat for more")
    ap.add_argument("--eval-field", action="append", metavar="F",
                    help="the eval JSONL fields that make an item, joined in this order (default: all strings)")
    ap.add_argument("--n", type=int, default=13, help="n-gram length in words (default 13)")
    ap.add_argument("--mode", choices=["remove", "split"], default="remove",
                    help="on a hit, drop the document (default) or cut the matches out")
    ap.add_argument("--margin", type=int, default=200, help="split: characters cut on each side (default 200)")
    ap.add_argument("--min-chars", type=int, default=200, help="split: shorter pieces are dropped (default 200)")
    ap.add_argument("--max-splits", type=int, default=10, help="split: more pieces drop the document (default 10)")
    ap.add_argument("--max-doc-hits", type=int, default=10,
                    help="ignore n-grams found in more training documents than this (default 10; 0: never)")
    ap.add_argument("--field", default="text", help="JSON field / parquet column of the training files (default text)")
    ap.add_argument("--docs", choices=["file", "lines", "blank"], default="file",
                    help="training text files: one document per file, per line, or per blank-line paragraph")
    ap.add_argument("--quiet", action="store_true", help="no progress line")
    a = ap.parse_args(argv)
    a.created = []  # the .tmp files this run made: the only ones a failure may delete
    try:
        check_args(a)
        r = decontaminate(a, expand_inputs(a.inputs))
    except (PrepareError, OSError) as e:
        for p in a.created:
            if os.path.exists(p):
                os.remove(p)
        print(f"error: {e}", file=sys.stderr)
        return 1
    print(f"decontaminate.py: {r['documents_in']:,} documents in, {r['contaminated']:,} contaminated "
          f"({r['hits']:,} {a.n}-gram hits; {r['hits_ignored']:,} more ignored as common, "
          f"{r['ngrams_ignored']:,} n-grams), {r['removed']:,} removed, {r['split']:,} split into "
          f"{r['pieces_out']:,} pieces, {r['documents_out']:,} documents out; {r['eval_items']:,} eval items "
          f"({r['eval_items_short']:,} shorter than {a.n} words), {r['eval_ngrams']:,} n-grams; "
          f"{r['seconds']} s, {r['docs_per_s']:,} docs/s; wrote {a.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
