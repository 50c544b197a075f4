"""
make_cloze.py: a LAMBADA-style cloze set from the KJV validation split (the held-out
chapters of dev/data/prepare_kjv.py, never seen in training):

    /usr/bin/python3 dev/eval/make_cloze.py [--out dev/eval/kjv_cloze.jsonl] [--max-items 256]

Item: the context is the chapter's text before the last word of a verse (the preceding
verses, one per line, then the verse up to that word); the target is that last word with
its leading space and without trailing punctuation (" Moses" for "...unto Moses."). The
rule for which verses count (stated, as LAMBADA's "needs the broader context" cannot be
checked here): the target is a word of letters (and an apostrophe) that is either
split into two or more tokens by the tokenizer, or a content word, i.e. not in the
fixed FUNCTION_WORDS list below (articles, pronouns incl. thee/thou/ye, prepositions,
conjunctions, auxiliaries). Contexts keep at most --context-chars characters of the
chapter (the evaluation truncates to the model's window anyway). --max-items are taken
evenly spread over all eligible verses.

Each line: {"context", "target", "ids", "n_target", "chapter"}. ids = the tokens of
context + target, n_target = the target's tokens (the last ones). They are computed the
way lm-evaluation-harness splits a (context, continuation) pair, tokenizing the whole
string and taking the continuation as what follows the context's tokens, so the trainer
(which reads ids) and the harness (which reads text) score the same tokens.
"""

import argparse
import json
import os
import re
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.join(REPO, "dev", "data"))
import prepare_kjv  # noqa: E402  (read_bible, split_documents: the same split as the shards)

FUNCTION_WORDS = set("""
a an the and or nor but for so yet if then than that this these those there here
i me my mine we us our ours you your yours ye thee thou thy thine he him his she her hers
it its they them their theirs who whom whose which what
of in on at by to from with without into unto upon over under about above below
through throughout after before against among between toward towards within
be am is are was were been being have hath hast has had do doth dost did done
shall shalt will wilt would should can could may might must not no
all any some every each also even now when where why how as up out off again
""".split())


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0].strip())
    ap.add_argument("--out", default=os.path.join(HERE, "kjv_cloze.jsonl"))
    ap.add_argument("--tokenizer", default=os.path.join(REPO, "dev", "data", "kjv", "kjv_tokenizer.json"))
    ap.add_argument("--max-items", type=int, default=256)
    ap.add_argument("--context-chars", type=int, default=1200)
    a = ap.parse_args()
    if a.max_items <= 0 or a.context_chars <= 0:
        print("error: --max-items and --context-chars must be positive", file=sys.stderr)
        sys.exit(1)
    if not os.path.exists(a.tokenizer):
        print(f"error: tokenizer {a.tokenizer} is missing: run `make data` first", file=sys.stderr)
        sys.exit(1)
    from tokenizers import Tokenizer
    tok = Tokenizer.from_file(a.tokenizer)
    _, val = prepare_kjv.split_documents(prepare_kjv.read_bible())
    word = re.compile(r"^(.*\S) ([A-Za-z']+)[^A-Za-z']*$")
    items = []
    for ch, doc in enumerate(val):
        verses = doc.rstrip("\n").split("\n")
        for v, verse in enumerate(verses):
            m = word.match(verse)
            if not m:
                continue
            head, target = m.group(1), m.group(2)
            context = "\n".join(verses[:v] + [head])[-a.context_chars:]
            cont = " " + target
            ctx_ids = tok.encode(context).ids
            whole = tok.encode(context + cont).ids
            if whole[:len(ctx_ids)] != ctx_ids or len(whole) == len(ctx_ids):
                continue  # the pair does not split cleanly at the word: the two readers could differ
            n_t = len(whole) - len(ctx_ids)
            if n_t < 2 and target.lower() in FUNCTION_WORDS:
                continue
            items.append({"context": context, "target": cont, "ids": whole, "n_target": n_t, "chapter": ch})
    if not items:
        print("error: no eligible verses", file=sys.stderr)
        sys.exit(1)
    step = max(1.0, len(items) / a.max_items)
    picked = [items[int(i * step)] for i in range(min(a.max_items, len(items)))]
    tmp = a.out + ".tmp"
    os.makedirs(os.path.dirname(os.path.abspath(a.out)), exist_ok=True)
    with open(tmp, "w") as f:
        for it in picked:
            f.write(json.dumps(it, separators=(",", ":")) + "\n")
    os.replace(tmp, a.out)
    multi = sum(it["n_target"] > 1 for it in picked)
    print(f"make_cloze.py: {a.out}: {len(picked)} items of {len(items)} eligible verses "
          f"({multi} multi-token targets) from {len(val)} validation chapters")


if __name__ == "__main__":
    main()
