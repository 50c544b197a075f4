"""
Tests dev/data/dedup.py and dev/data/decontaminate.py on a synthetic corpus made here, with
duplicates and contamination planted at known places (the expected results come from the
planting, never from the tools):

  * dedup: ~3,000 documents of random words; copies of some with words replaced at chosen
    positions, so that the Jaccard similarity of the word 5-gram sets is known exactly
    ((S - m k) / (S + m k) for m edits k words apart in S shingles; checked against a plain
    set computation): above the 0.8 threshold (0.88..1, incl. reformatted exact copies and
    3-document clusters), below it (0.5..0.72), and near it (0.74..0.86, reported, not
    asserted: MinHash's estimate has a standard deviation of ~0.035 there). Asserted:
    document recall and precision >= 0.9, each removed copy names its original, the kept
    file is the input minus the removed documents, the counts add up.
  * decontaminate: ~2,000 documents; eval passages (13..60 words, with other case and
    punctuation) inserted into some, 12-word passages into others (must not be flagged),
    a 13-gram in 10 documents (flagged) and one in 11 (> --max-doc-hits 10: ignored as
    common, flagged with --max-doc-hits 0). Asserted: recall 1.0 and precision 1.0, the
    exact hit count, the eval item named by each hit; --mode split leaves no eval 13-gram,
    keeps the text away from the matches, and passes clean documents through unchanged.

    ~/.cache/llmc/hf-venv/bin/python tests/data/test_curation.py     (last line: "N passed, M failed")
    ... tests/data/test_curation.py --write DIR [--base N]   writes a dedup corpus and an eval file (for timing)
"""

import json
import os
import random
import re
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.join(ROOT, "tests"))
from checks import check, summary  # noqa: E402

PY = sys.executable
DEDUP = os.path.join(ROOT, "dev", "data", "dedup.py")
DECON = os.path.join(ROOT, "dev", "data", "decontaminate.py")
K = 5  # the word shingle of dedup.py's defaults
THRESHOLD = 0.8
N = 13


def vocabulary(r, n=4000):
    vs = set()
    while len(vs) < n:
        vs.add("".join(r.choice("abcdefghijklmnopqrstuvwxyz") for _ in range(r.randint(3, 9))))
    return sorted(vs)


def render(r, ws):
    """Words as text: sentences with capitals, commas, full stops and line breaks at random.
    The words a reader gets back (runs of letters, lowercased) are exactly ws."""
    out, start = [], True
    for w in ws:
        out.append(w.capitalize() if start else w)
        start = False
        x = r.random()
        if x < 0.07:
            out.append(". ")
            start = True
        elif x < 0.12:
            out.append(", ")
        elif x < 0.14:
            out.append("\n")
        else:
            out.append(" ")
    return "".join(out).rstrip() + "."


def shingle_set(ws):
    return {tuple(ws[i:i + K]) for i in range(len(ws) - K + 1)}


class Fresh:
    """Words that occur nowhere else (digits in them keep them out of the vocabulary)."""

    def __init__(self):
        self.n = 0

    def __call__(self):
        self.n += 1
        return f"q{self.n}x"


def edit_to(r, ws, target, fresh):
    """A copy of ws with m words replaced by fresh ones at positions K apart and away from the
    ends, so that exactly m K shingles are lost and m K new ones appear. Returns the copy and its
    exact Jaccard similarity with ws."""
    s = len(ws) - K + 1
    m = round(s * (1 - target) / ((1 + target) * K))
    slots = (len(ws) - 2 * K + 2) // K
    assert m <= slots, (len(ws), target)
    off = r.randrange(K)
    pos = [K - 1 + off + K * j for j in r.sample(range(slots - 1), m)]  # (slots-1: room for the offset)
    c = list(ws)
    for p in pos:
        c[p] = fresh()
    return c, (s - m * K) / (s + m * K)


def dedup_corpus(seed=2201, n_base=2500):
    """(documents as word lists in corpus order, planted copies {index: (base index, group, J)})."""
    r = random.Random(seed)
    vocab = vocabulary(r)
    fresh = Fresh()
    bases = [[r.choice(vocab) for _ in range(r.randint(150, 400))] for _ in range(n_base)]
    f = n_base / 2500
    plan = (["dup"] * int(200 * f) + ["exact"] * int(20 * f) + ["cluster"] * int(20 * f) + ["far"] * int(200 * f)
            + ["near"] * int(60 * f))
    chosen = r.sample(range(n_base), len(plan))
    copies = []  # (base, words, group, J)
    for b, group in zip(chosen, plan):
        for _ in range(2 if group == "cluster" else 1):
            if group == "exact":
                copies.append((b, list(bases[b]), group, 1.0))
                continue
            lo, hi = {"dup": (0.88, 0.97), "cluster": (0.9, 0.97), "far": (0.5, 0.72), "near": (0.74, 0.86)}[group]
            c, j = edit_to(r, bases[b], r.uniform(lo, hi), fresh)
            copies.append((b, c, group, j))
    # every copy comes after its original, so "keep the first" keeps the original
    keyed = [(float(i), ("base", i)) for i in range(n_base)]
    keyed += [(r.uniform(b + 0.001, n_base), ("copy", ci)) for ci, (b, _, _, _) in enumerate(copies)]
    keyed.sort()
    docs, where_base, planted = [], {}, {}
    for _, (kind, i) in keyed:
        if kind == "base":
            where_base[i] = len(docs)
            docs.append(bases[i])
        else:
            b, c, group, j = copies[i]
            planted[len(docs)] = (where_base[b], group, j)
            docs.append(c)
    return docs, planted, r


def write_jsonl(path, texts):
    with open(path, "w", encoding="utf-8") as f:
        for t in texts:
            f.write(json.dumps({"text": t}) + "\n")


def read_jsonl(path):
    with open(path, encoding="utf-8") as f:
        return [json.loads(line) for line in f]


def run(args):
    p = subprocess.run([PY] + args, capture_output=True, text=True)
    return p.returncode, p.stdout, p.stderr


def test_dedup(d):
    docs, planted, r = dedup_corpus()
    texts = [render(r, ws) for ws in docs]
    cut = len(texts) // 2  # two input files: the side file must name the file and the index in it
    write_jsonl(os.path.join(d, "c1.jsonl"), texts[:cut])
    write_jsonl(os.path.join(d, "c2.jsonl"), texts[cut:])
    # the planting's Jaccard values, against a plain set computation
    def jaccard(x, y):
        a, b = shingle_set(x), shingle_set(y)
        return len(a & b) / len(a | b)
    exact_ok = all(abs(jaccard(docs[i], docs[b]) - j) < 1e-12 for i, (b, _, j) in planted.items())
    check(exact_ok, f"planting: the Jaccard of each of the {len(planted)} copies is the planned one (set computation)")
    out = os.path.join(d, "kept.jsonl")
    rc, so, se = run([DEDUP, "--quiet", "--out", out, os.path.join(d, "c1.jsonl"), os.path.join(d, "c2.jsonl")])
    print(so.strip())
    if not check(rc == 0, f"dedup.py runs (rc {rc}) {se.strip()[:300]}"):
        return
    removed = read_jsonl(os.path.join(d, "kept.removed.jsonl"))
    rep = json.load(open(os.path.join(d, "kept.report.json")))
    kept = [o["text"] for o in read_jsonl(out)]
    rm = {o["index"]: o for o in removed}
    expect = {i for i, (_, g, _) in planted.items() if g in ("dup", "exact", "cluster")}
    judged = set(rm) - {i for i, (_, g, _) in planted.items() if g == "near"}  # the near band is only reported
    tp = len(expect & judged)
    recall, precision = tp / len(expect), tp / max(len(judged), 1)
    far = [i for i, (_, g, _) in planted.items() if g == "far"]
    near = [(j, i in rm) for i, (_, g, j) in planted.items() if g == "near"]
    print(f"dedup: {len(texts)} documents, {len(expect)} planted above {THRESHOLD} (J 0.88..1), {len(far)} below "
          f"(J 0.5..0.72); removed {len(judged)} outside the near band: recall {recall:.4f}, "
          f"precision {precision:.4f}; "
          f"near the threshold: removed {sum(x for _, x in near)}/{len(near)} "
          f"(J >= 0.8: {sum(x for j, x in near if j >= THRESHOLD)}/{sum(1 for j, _ in near if j >= THRESHOLD)})")
    check(recall >= 0.9, f"dedup recall {recall:.4f} >= 0.9")
    check(precision >= 0.9, f"dedup precision {precision:.4f} >= 0.9")
    check(all(rm[i]["duplicate_of"] == planted[i][0] for i in expect & set(rm)),
          "every planted copy removed names its original as the kept document it duplicates")
    check(all(rm[i]["jaccard"] >= THRESHOLD for i in rm), "every removed document's estimated Jaccard >= threshold")
    src_ok = all((o["source"].endswith("c1.jsonl"), o["source_index"]) == ((True, o["index"]) if o["index"] < cut
                 else (False, o["index"] - cut)) for o in removed)
    check(src_ok, "the side file names each removed document's file and its index in that file")
    check(kept == [t for i, t in enumerate(texts) if i not in rm],
          "the kept file is the input minus the removed, in order")
    check((rep["documents_in"], rep["removed"], rep["kept"]) == (len(texts), len(rm), len(kept)),
          f"report: {rep['documents_in']} in = {rep['removed']} removed + {rep['kept']} kept")
    check(rep["clusters"] == len({o["duplicate_of"] for o in removed}),
          f"report: {rep['clusters']} clusters = the distinct kept documents named")
    return rep


def decon_corpus(d, seed=1990):
    """Writes the training file and two eval files; returns what the planting expects."""
    r = random.Random(seed)
    vocab = vocabulary(r)
    docs = [[r.choice(vocab) for _ in range(r.randint(150, 400))] for _ in range(2000)]
    items = [[r.choice(vocab) for _ in range(r.randint(40, 80))] for _ in range(300)]
    items[7] = items[7][:60] + [r.choice(vocab) for _ in range(N)]  # their last 13 words go into 10 and 11
    items[8] = items[8][:60] + [r.choice(vocab) for _ in range(N)]  # documents: common text
    names = [f"{d}/eval_a.jsonl:{i + 1}" for i in range(200)] + [f"{d}/eval_b.txt#{i - 200}" for i in range(200, 300)]
    ctx = r.sample([i for i in range(2000)], 100 + 100 + 10 + 11)
    contaminated, near, c10, c11 = ctx[:100], ctx[100:200], ctx[200:210], ctx[210:]
    plant = {}  # doc -> (item, span length, insertion word index)

    def insert(doc, item, length, at_end=False):
        """Inserts `length` words of the item, so that exactly they match."""
        it = items[item]
        s = len(it) - length if at_end else r.randrange(len(it) - length + 1)
        while True:  # the neighbours must differ, so that the match is exactly `length` words
            p = r.randrange(1, len(docs[doc]))
            before_ok = s == 0 or docs[doc][p - 1] != it[s - 1]
            after_ok = s + length == len(it) or p == len(docs[doc]) or docs[doc][p] != it[s + length]
            if before_ok and after_ok:
                break
        docs[doc][p:p] = it[s:s + length]
        return p
    for j, doc in enumerate(contaminated):
        length = N if j < 30 else r.randint(N + 1, 40)
        item = r.choice([i for i in range(300) if i not in (7, 8)])
        plant[doc] = (item, length, insert(doc, item, length, at_end=j % 5 == 0))
    for doc in near:
        insert(doc, r.choice([i for i in range(300) if i not in (7, 8)]), N - 1)
    for doc in c10:
        insert(doc, 7, N, at_end=True)
    for doc in c11:
        insert(doc, 8, N, at_end=True)
    texts = [render(r, ws) for ws in docs]
    write_jsonl(os.path.join(d, "train.jsonl"), texts)
    with open(os.path.join(d, "eval_a.jsonl"), "w") as f:  # cloze-like: the last word is the target
        for it in items[:200]:
            f.write(json.dumps({"context": render(r, it[:-1])[:-1], "target": " " + it[-1], "chapter": 3}) + "\n")
    with open(os.path.join(d, "eval_b.txt"), "w") as f:  # paragraphs
        f.write("\n\n".join(render(r, it) for it in items[200:]) + "\n")
    grams = {tuple(it[i:i + N]) for it in items for i in range(len(it) - N + 1)}
    return texts, docs, names, plant, set(contaminated), set(near), set(c10), set(c11), grams


def test_decontaminate(d):
    texts, docs, names, plant, contaminated, near, c10, c11, grams = decon_corpus(d)
    train, ev = os.path.join(d, "train.jsonl"), ["--eval", os.path.join(d, "eval_a.jsonl"),
                                                 "--eval", os.path.join(d, "eval_b.txt")]
    out = os.path.join(d, "clean.jsonl")
    rc, so, se = run([DECON, "--quiet", "--out", out] + ev + [train])
    print(so.strip())
    if not check(rc == 0, f"decontaminate.py runs (rc {rc}) {se.strip()[:300]}"):
        return
    rep = json.load(open(os.path.join(d, "clean.report.json")))
    hits = read_jsonl(os.path.join(d, "clean.hits.jsonl"))
    flagged = {h["doc"] for h in hits if h["used"]}
    expect = contaminated | c10
    tp = len(flagged & expect)
    recall, precision = tp / len(expect), tp / max(len(flagged), 1)
    print(f"decontaminate: {len(texts)} documents, {len(expect)} contaminated planted ({len(contaminated)} passages "
          f"of 13..40 words + {len(c10)} with a 13-gram found in 10 documents), {len(near)} with 12-word passages, "
          f"{len(c11)} with a 13-gram in 11 documents; flagged {len(flagged)}: recall {recall:.4f}, "
          f"precision {precision:.4f}")
    check(recall == 1.0, f"decontamination recall {recall:.4f} == 1.0")
    check(precision == 1.0, f"decontamination precision {precision:.4f} == 1.0 (no 12-gram, no common 13-gram)")
    n_hits = sum(length - N + 1 for _, length, _ in plant.values()) + len(c10)
    check(rep["hits"] == n_hits and sum(h["used"] for h in hits) == n_hits,
          f"hits: {rep['hits']} = the planted {n_hits} (a passage of L words holds L - 12 13-grams)")
    check(rep["hits_ignored"] == len(c11) and rep["ngrams_ignored"] == 1,
          f"the 13-gram of 11 documents is ignored as common: {rep['hits_ignored']} hits, "
          f"{rep['ngrams_ignored']} n-gram")
    check(all(names[plant[h["doc"]][0]] == h["eval"] for h in hits if h["doc"] in plant),
          "each hit names the eval item the passage came from (file:line, file#paragraph)")
    left = [o["text"] for o in read_jsonl(out)]
    check(left == [t for i, t in enumerate(texts) if i not in expect],
          f"--mode remove: the output is the input minus the {len(expect)} contaminated documents, in order")
    check((rep["documents_in"], rep["removed"], rep["documents_out"]) == (len(texts), len(expect), len(left)),
          "report: documents in, removed, out")
    rc, so, se = run([DECON, "--quiet", "--max-doc-hits", "0", "--out", os.path.join(d, "all.jsonl")] + ev + [train])
    hits0 = read_jsonl(os.path.join(d, "all.hits.jsonl")) if rc == 0 else []
    check({h["doc"] for h in hits0} == expect | c11, f"--max-doc-hits 0: the 11 documents are flagged too (rc {rc})")
    # split: GPT-3's rule, with the defaults (margin 200, pieces >= 200 characters, <= 10 pieces)
    out = os.path.join(d, "split.jsonl")
    rc, so, se = run([DECON, "--quiet", "--mode", "split", "--out", out] + ev + [train])
    print(so.strip())
    if not check(rc == 0, f"--mode split runs (rc {rc}) {se.strip()[:300]}"):
        return
    pieces = [o["text"] for o in read_jsonl(out)]

    def ws(t):
        return re.findall(r"[a-z0-9]+", t.lower())
    leaked = sum(1 for t in pieces for w in [ws(t)] for i in range(len(w) - N + 1) if tuple(w[i:i + N]) in grams)
    check(leaked == len(c11), f"--mode split: the only eval 13-grams left are the 11 common ones ({leaked})")
    clean = [t for i, t in enumerate(texts) if i not in expect]
    check(set(clean) <= set(pieces), "--mode split: clean documents pass through unchanged")
    kept_ends = far = 0
    for doc, (_, length, p) in plant.items():
        w = docs[doc]
        if p >= 120 and len(w) - (p + length) >= 120:  # ~120 words: far more than margin + min-chars
            far += 1
            head, tail = " ".join(w[:8]), " ".join(w[-8:])
            kept_ends += any(" ".join(ws(t)[:8]) == head for t in pieces) and any(
                " ".join(ws(t)[-8:]) == tail for t in pieces)
    check(far > 0 and kept_ends == far,
          f"--mode split: text far from the match survives on both sides ({kept_ends}/{far})")
    return rep


def main():
    if "--write" in sys.argv:
        d = sys.argv[sys.argv.index("--write") + 1]
        n = int(sys.argv[sys.argv.index("--base") + 1]) if "--base" in sys.argv else 2500
        docs, planted, r = dedup_corpus(n_base=n)
        write_jsonl(os.path.join(d, "corpus.jsonl"), [render(r, ws) for ws in docs])
        vocab = vocabulary(r)  # eval items of random words: for timing, they match nothing
        with open(os.path.join(d, "eval.jsonl"), "w") as f:
            for _ in range(300):
                f.write(json.dumps({"text": render(r, [r.choice(vocab) for _ in range(r.randint(40, 80))])}) + "\n")
        print(f"wrote {d}/corpus.jsonl: {len(docs)} documents, {len(planted)} planted copies; {d}/eval.jsonl: "
              "300 items")
        return 0
    with tempfile.TemporaryDirectory() as d:
        test_dedup(d)
        test_decontaminate(d)
    return summary()


if __name__ == "__main__":
    sys.exit(main())
