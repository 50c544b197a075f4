"""
Builds the offline demo/test corpus: the King James Bible (Debian's `bible-kjv`),
a byte-level BPE tokenizer trained on it, and token shards in llm.c's format.

    /usr/bin/python3 dev/data/prepare_kjv.py [--out dev/data/kjv] [--vocab 8192] [--force]

Outputs (in --out):
  kjv_train_000.bin, kjv_val_000.bin  token shards: 256 x int32 header
                                      (20240520, 1, n_tokens), then n_tokens uint16
  kjv_tokenizer.bin                   for the C decoder: 256 x uint32 header
                                      (20240328, 2, vocab_size, eot_id), then per id
                                      one uint8 length + that many raw bytes
  kjv_tokenizer.json                  the Hugging Face tokenizer (Python encodes with it)
  tokenizer_check.txt                 "id id id<TAB>expected text" lines for the C test

Choices (and why):
  * Text: `bible` prints one verse per line as "Ge1:1 In the beginning...". The verse
    reference is dropped (it is not text, and a model would spend capacity learning the
    citation scheme). Each verse becomes one line, chapters are separated by a blank
    line, runs of spaces are collapsed (the source has three stray double/trailing
    spaces). Every document is preceded by <|endoftext|>, as in llm.c's shards.
  * Documents: a book is one document. Validation holds out every 20th chapter of the
    whole Bible (global chapter number 20, 40, ..., 1180: 59 of 1189 chapters, ~5% of
    tokens); each held-out chapter is its own document in the val shard and is removed
    from its book in the train shard. Spread across all books, the val set has the
    same mix of styles (law, poetry, gospels, letters) as train.
  * Tokenizer: GPT-2-style byte-level BPE (ByteLevel pre-tokenizer with GPT-2's regex,
    no prefix space, ByteLevel decoder), all 256 bytes in the base alphabet so any
    UTF-8 text encodes, trained on the TRAIN split only (no val leakage). vocab_size
    counts everything: vocab-1 learned tokens plus <|endoftext|> as the LAST id
    (8191 for the default 8192), mirroring GPT-2 where EOT is the last id (50256).
  * Determinism: same input and vocab -> byte-identical outputs (checked by sha256 over
    repeated runs). Files are written to a temp name and renamed, so an interrupted
    run never leaves a half file that looks up to date.
  * The work (BPE training, tokenization, shard/tokenizer files, kjv_manifest.json) is
    dev/data/prepare.py's `prepare()`; this script supplies the KJV's documents and its
    chapter split rule as prepare()'s split function.
"""

import argparse
import os
import re
import shutil
import struct
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import prepare as prep  # noqa: E402  (the general pipeline; this file is its KJV use)
from prepare import EOT_TEXT, TOK_MAGIC, TOK_VERSION, write_atomic  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
VAL_EVERY = 20  # every 20th chapter (global count, 1-based) goes to val
OUT_NAMES = ["kjv_train_000.bin", "kjv_val_000.bin", "kjv_tokenizer.bin",
             "kjv_tokenizer.json", "tokenizer_check.txt", "kjv_manifest.json"]
# strings whose token ids the C test decodes and compares; cover plain verse text,
# newlines (the corpus's line structure), tabs/digits, multi-byte UTF-8 that never
# occurs in the corpus (byte fallback), and the special token itself
CHECK_STRINGS = [
    "In the beginning God created the heaven and the earth.",
    "Jesus wept.",
    "And God said, Let there be light: and there was light.\n"
    "And God saw the light, that it was good.\n\n",
    "Verily, verily, I say unto thee: 3 + 4 = 7\tand 1189 chapters!",
    "na\u00efve caf\u00e9 \u2014 \u00fcn\u00efc\u00f6d\u00e9 \u2603 \U0001F600",
    EOT_TEXT,
    "The grace of our Lord Jesus Christ be with you all. Amen.",
]


def die(msg):
    print(f"prepare_kjv.py: error: {msg}", file=sys.stderr)
    sys.exit(1)


def read_bible():
    """Returns [(book, [(chapter_no, [verse, ...]), ...]), ...] in canonical order."""
    if shutil.which("bible") is None:
        die("the `bible` command is missing (Debian package bible-kjv); run `bash dev/install.sh`")
    try:
        raw = subprocess.run(["bible", "-f", "Gen1:1-Rev22:21"], check=True,
                             capture_output=True).stdout.decode("utf-8")
    except subprocess.CalledProcessError as e:
        die(f"`bible` failed with exit code {e.returncode}: {e.stderr.decode(errors='replace').strip()}")
    # "1Sm3:4 text": book abbreviation (optional leading digit), chapter:verse, text
    pat = re.compile(r"^([1-3]?[A-Za-z]+)(\d+):(\d+) (.*)$")
    books = []
    for lineno, line in enumerate(raw.splitlines(), 1):
        m = pat.match(line)
        if not m:
            die(f"unexpected line {lineno} from `bible`: {line[:60]!r}")
        book, chap, _verse, text = m.group(1), int(m.group(2)), m.group(3), m.group(4)
        text = " ".join(text.split())
        if not books or books[-1][0] != book:
            books.append((book, []))
        chapters = books[-1][1]
        if not chapters or chapters[-1][0] != chap:
            chapters.append((chap, []))
        chapters[-1][1].append(text)
    n_ch = sum(len(c) for _, c in books)
    n_v = sum(len(v) for _, c in books for _, v in c)
    # the KJV has 66 books, 1189 chapters, 31102 verses; anything else means the
    # package printed something we did not expect, and the split would silently move
    if (len(books), n_ch, n_v) != (66, 1189, 31102):
        die(f"expected 66 books / 1189 chapters / 31102 verses, got {len(books)}/{n_ch}/{n_v}")
    return books


def chapter_text(verses):
    return "\n".join(verses) + "\n"


def split_documents(books):
    """Train docs are books minus held-out chapters; val docs are held-out chapters."""
    train, val = [], []
    g = 0  # global chapter number, 1-based
    for _book, chapters in books:
        kept = []
        for _chap, verses in chapters:
            g += 1
            if g % VAL_EVERY == 0:
                val.append(chapter_text(verses))
            else:
                kept.append(chapter_text(verses))
        if kept:
            train.append("\n".join(kept))  # blank line between chapters
    return train, val


def escape(s):
    # one check case per line, so tabs/newlines/backslashes in the text are escaped
    return s.replace("\\", "\\\\").replace("\t", "\\t").replace("\n", "\\n")


def check_file_text(tok, table):
    lines = ["# id id id ...<TAB>expected decoded text; \\n \\t \\\\ are escapes for newline, tab, backslash"]
    for s in CHECK_STRINGS:
        ids = tok.encode(s).ids
        if tok.decode(ids, skip_special_tokens=False) != s:
            die(f"HF round trip failed for {s!r}")
        if b"".join(table[i] for i in ids) != s.encode("utf-8"):
            die(f"byte table decoding disagrees with the tokenizer for {s!r}")
        lines.append(" ".join(map(str, ids)) + "\t" + escape(s))
    return "\n".join(lines) + "\n"


def up_to_date(out, vocab):
    paths = [os.path.join(out, n) for n in OUT_NAMES]
    if not all(os.path.isfile(p) for p in paths):
        return False
    script_mtime = max(os.path.getmtime(os.path.abspath(__file__)),
                       os.path.getmtime(os.path.abspath(prep.__file__)))
    if min(os.path.getmtime(p) for p in paths) <= script_mtime:
        return False
    with open(os.path.join(out, "kjv_tokenizer.bin"), "rb") as f:
        h = f.read(16)
    return len(h) == 16 and struct.unpack("<4I", h)[:3] == (TOK_MAGIC, TOK_VERSION, vocab)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0].strip())
    ap.add_argument("--out", default=os.path.join(HERE, "kjv"), help="output directory")
    ap.add_argument("--vocab", type=int, default=8192, help="vocab size including <|endoftext|>")
    ap.add_argument("--force", action="store_true", help="rebuild even if outputs are up to date")
    args = ap.parse_args()
    if not 257 <= args.vocab <= 65536:
        die("--vocab must be in 257..65536 (256 byte tokens + EOT at least; ids are uint16)")
    if not args.force and up_to_date(args.out, args.vocab):
        print(f"prepare_kjv.py: {args.out} is up to date (newer than this script); --force rebuilds")
        return
    # keep the Rust thread pool to the 2 cores we share; the result does not depend on it
    os.environ.setdefault("RAYON_NUM_THREADS", "2")
    try:
        import tokenizers  # noqa: F401
    except ImportError:
        die("Python package `tokenizers` is missing for this interpreter; run `bash dev/install.sh` "
            "and use /usr/bin/python3")

    t0 = time.time()
    books = read_bible()
    train_docs, val_docs = split_documents(books)
    n_train = len(train_docs)
    try:
        # the chapter rule above is the split: documents come train first, then val
        m, tok = prep.prepare(lambda: iter(train_docs + val_docs), args.out, "kjv",
                              vocab=args.vocab, split_fn=lambda i, _text: i >= n_train,
                              workers=1, shard_tokens=1 << 40, quiet=True,
                              settings={"kjv_vocab": args.vocab})
        table = prep.token_bytes_table(tok, args.vocab)
    except prep.PrepareError as e:
        die(str(e))
    eot = m["eot_id"]
    if len(m["train"]) != 1 or len(m["val"]) != 1:
        die("expected exactly one train and one val shard")
    write_atomic(os.path.join(args.out, "tokenizer_check.txt"), check_file_text(tok, table).encode("utf-8"))
    n_tr, n_va = m["train_tokens"], m["val_tokens"]
    print(f"prepare_kjv.py: wrote {args.out}: train {n_tr:,} tokens ({len(train_docs)} books), "
          f"val {n_va:,} tokens ({len(val_docs)} chapters, {100 * n_va / (n_tr + n_va):.1f}%), "
          f"vocab {args.vocab} (EOT id {eot}), {time.time() - t0:.1f}s")


if __name__ == "__main__":
    main()
