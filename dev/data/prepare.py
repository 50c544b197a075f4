"""
Any corpus in: text / .jsonl / .parquet files -> a byte-level BPE tokenizer and llm.c
token shards the trainers read.

    /usr/bin/python3 dev/data/prepare.py --out DIR --prefix NAME (--train-bpe VOCAB |
        --tokenizer tokenizer.json) [--field text] [--docs file|lines|blank]
        [--val-frac 0.05] [--shard-tokens N] [--workers N] [--force] FILE_OR_GLOB ...

Inputs (globs are expanded here, files are read in sorted order per pattern):
  *.jsonl      one JSON object per line; the document is its --field (default "text")
  *.parquet    the --field column (needs pyarrow for this interpreter)
  other files  UTF-8 text; --docs file (default): the whole file is one document;
               --docs lines: each non-empty line is one; --docs blank: paragraphs
               separated by blank lines are documents.
Outputs (in --out):
  PREFIX_train_NNN.bin, PREFIX_val_NNN.bin  shards: 256 x int32 header (20240520, 1,
                          n_tokens), then n_tokens uint16; <|endoftext|> precedes every
                          document (llm.c's convention), documents may span shards
  PREFIX_tokenizer.bin    the C decoder's file: 256 x uint32 header (20240328, 2,
                          vocab_size, eot_id), then per id a length byte + raw bytes
  PREFIX_tokenizer.json   the Hugging Face tokenizer
  PREFIX_manifest.json    written LAST: arguments, shards, token counts, sha256 of each
                          shard. Without it the directory is partial: a rerun deletes
                          this prefix's shards/.tmp files and starts again, so shards of
                          two runs never mix; with it (same arguments) a rerun is a no-op.

Split: a document goes to val when the first 8 bytes of sha256(its UTF-8 text), read
as a big-endian integer / 2^64, are < --val-frac: deterministic, independent of file
order and worker count, and identical documents always land on the same side.
The BPE is trained on the train split only (no val leakage), vocab-1 learned tokens
and <|endoftext|> as the last id. Tokenization runs in --workers processes over
chunks of documents; results are consumed in input order, so the output is
byte-identical for any worker count. Memory is bounded by a few chunks in flight plus
one shard buffer per split (and the BPE trainer's word counts when training), not by
the corpus size; a single document is held whole (with --docs file, a file).
"""

import argparse
import array
import collections
import glob
import hashlib
import json
import multiprocessing
import os
import struct
import sys
import time

EOT_TEXT = "<|endoftext|>"
DATA_MAGIC, DATA_VERSION = 20240520, 1
TOK_MAGIC, TOK_VERSION = 20240328, 2
MANIFEST_VERSION = 1
CHUNK_BYTES = 1 << 20  # text per tokenization task: big enough to amortise IPC


class PrepareError(Exception):
    """Bad input or arguments; main() prints it as one `error:` line."""


# ---------------------------------------------------------------- documents in

def expand_inputs(patterns):
    paths = []
    for p in patterns:
        hits = sorted(glob.glob(p)) if glob.has_magic(p) else [p]
        if not hits:
            raise PrepareError(f"no file matches {p!r}")
        for h in hits:
            if not os.path.exists(h) or os.path.isdir(h):  # (FIFOs are fine)
                raise PrepareError(f"not a file: {h}")
            paths.append(h)
    return paths


def _text_docs(path, mode):
    if mode == "file":
        with open(path, "rb") as f:
            yield _decode(f.read(), path)
        return
    para = []
    with open(path, "rb") as f:
        for n, raw in enumerate(f, 1):
            line = _decode(raw, f"{path}:{n}")
            if mode == "lines":
                if line.strip():
                    yield line.rstrip("\r\n")
            elif line.strip():
                para.append(line)
            elif para:
                yield "".join(para).rstrip("\r\n")
                para = []
    if para:
        yield "".join(para).rstrip("\r\n")


def _decode(b, where):
    try:
        return b.decode("utf-8")
    except UnicodeDecodeError as e:
        raise PrepareError(f"{where}: not UTF-8 ({e.reason} at byte {e.start})")


def _jsonl_docs(path, field):
    with open(path, "rb") as f:
        for n, raw in enumerate(f, 1):
            if not raw.strip():
                continue
            try:
                obj = json.loads(raw)
            except ValueError as e:
                raise PrepareError(f"{path}:{n}: bad JSON ({e})")
            if not isinstance(obj, dict) or field not in obj:
                raise PrepareError(f"{path}:{n}: no field {field!r}")
            if not isinstance(obj[field], str):
                raise PrepareError(f"{path}:{n}: field {field!r} is not a string")
            yield obj[field]


def _parquet_docs(path, field):
    try:
        import pyarrow.parquet as pq
    except ImportError:
        raise PrepareError(f"{path}: reading .parquet needs pyarrow, which this Python "
                           f"({sys.executable}) lacks; convert to .jsonl or install pyarrow")
    pf = pq.ParquetFile(path)
    if field not in pf.schema_arrow.names:
        raise PrepareError(f"{path}: no column {field!r}")
    for batch in pf.iter_batches(columns=[field], batch_size=1024):
        for v in batch.column(0).to_pylist():
            if v is not None:
                yield v


def iter_documents(paths, field="text", docs="file"):
    """Streams the documents of all files, in order."""
    for p in paths:
        if p.endswith(".jsonl"):
            yield from _jsonl_docs(p, field)
        elif p.endswith(".parquet"):
            yield from _parquet_docs(p, field)
        else:
            yield from _text_docs(p, docs)


def hash_split(val_frac):
    """split function: (index, text) -> True for val, by a hash of the text."""
    if not 0.0 <= val_frac < 1.0:
        raise PrepareError("--val-frac must be in [0, 1)")

    def is_val(_index, text):
        h = hashlib.sha256(text.encode("utf-8")).digest()
        return int.from_bytes(h[:8], "big") < val_frac * 2.0 ** 64
    return is_val


# ---------------------------------------------------------------- tokenizer

def train_bpe(texts, vocab):
    """Byte-level BPE with GPT-2's pre-tokenizer, all 256 bytes in the alphabet,
    vocab-1 learned tokens, then <|endoftext|> as the last id. texts: any iterable."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    if not 257 <= vocab <= 65536:
        raise PrepareError("vocab must be in 257..65536 (256 byte tokens + EOT at least; ids are uint16)")
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=vocab - 1, show_progress=False,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
                                  special_tokens=[])
    tok.train_from_iterator(texts, trainer=trainer)
    if tok.get_vocab_size() != vocab - 1:
        raise PrepareError(f"BPE reached only {tok.get_vocab_size()} tokens, wanted {vocab - 1} "
                           f"(+1 special): the corpus is too small for this vocabulary")
    tok.add_special_tokens([EOT_TEXT])  # after training so it takes the last id
    eot = tok.token_to_id(EOT_TEXT)
    if eot != vocab - 1 or tok.get_vocab_size() != vocab:
        raise PrepareError(f"<|endoftext|> got id {eot}, expected {vocab - 1}")
    return tok


def load_tokenizer(path):
    from tokenizers import Tokenizer
    try:
        tok = Tokenizer.from_file(path)
    except Exception as e:  # the Rust side raises plain Exception
        raise PrepareError(f"{path}: cannot load tokenizer ({str(e).splitlines()[0]})")
    if tok.token_to_id(EOT_TEXT) is None:
        raise PrepareError(f"{path}: tokenizer has no {EOT_TEXT} token")
    return tok


def vocab_size(tok):
    """Ids must be dense 0..V-1 (the C file stores one entry per id) and fit uint16."""
    ids = tok.get_vocab(with_added_tokens=True).values()
    v = max(ids) + 1
    if v > 65536:
        raise PrepareError(f"tokenizer has ids up to {v - 1}; shards store uint16 (< 65536)")
    if len(set(ids)) != v:
        raise PrepareError(f"tokenizer ids are not dense: {len(set(ids))} tokens, max id {v - 1}")
    return v


def byte_decoder():
    """Inverse of GPT-2's bytes->unicode map that the ByteLevel pre-tokenizer uses:
    printable bytes map to themselves, the other 68 bytes to chr(256 + k) in order."""
    keep = list(range(ord("!"), ord("~") + 1)) + list(range(0xA1, 0xAC + 1)) + list(range(0xAE, 0xFF + 1))
    chars, n = {}, 0
    for b in range(256):
        if b in keep:
            chars[chr(b)] = b
        else:
            chars[chr(256 + n)] = b
            n += 1
    return chars


def token_bytes_table(tok, vocab):
    """Raw bytes of every id: byte-level tokens decoded, added tokens as their text."""
    dec = byte_decoder()
    added = set(tok.get_vocab(with_added_tokens=True)) - set(tok.get_vocab(with_added_tokens=False))
    table = []
    for i in range(vocab):
        s = tok.id_to_token(i)
        if s in added:
            b = s.encode("utf-8")
        else:
            try:
                b = bytes(dec[c] for c in s)
            except KeyError:
                raise PrepareError(f"token {i} {s!r} has a character outside the byte-level "
                                   f"alphabet (only byte-level BPE tokenizers are supported)")
        if not 1 <= len(b) <= 255:
            raise PrepareError(f"token {i} is {len(b)} bytes long; the tokenizer file allows 1..255")
        table.append(b)
    return table


def tokenizer_bin_bytes(table, eot):
    out = bytearray(struct.pack("<256I", TOK_MAGIC, TOK_VERSION, len(table), eot, *([0] * 252)))
    for b in table:
        out.append(len(b))
        out += b
    return bytes(out)


# ---------------------------------------------------------------- shards out

def write_atomic(path, data):
    tmp = path + ".tmp"
    with open(tmp, "wb") as f:
        f.write(data)
    os.replace(tmp, path)


def shard_bytes(tokens):
    header = array.array("i", [0] * 256)
    header[0], header[1], header[2] = DATA_MAGIC, DATA_VERSION, len(tokens)
    body = array.array("H", tokens)
    if sys.byteorder != "little":
        header.byteswap()
        body.byteswap()
    return header.tobytes() + body.tobytes()


class ShardWriter:
    """Cuts one split's token stream into shards of shard_tokens (the last one shorter)."""

    def __init__(self, out, prefix, split, shard_tokens):
        self.out, self.prefix, self.split, self.n = out, prefix, split, shard_tokens
        self.buf = array.array("H")
        self.shards = []  # (name, tokens, sha256)
        self.tokens = 0

    def add(self, toks):
        self.buf.extend(toks)
        self.tokens += len(toks)
        while len(self.buf) >= self.n:
            self._flush(self.buf[:self.n])
            del self.buf[:self.n]

    def close(self):
        if len(self.buf):
            self._flush(self.buf)
            self.buf = array.array("H")

    def _flush(self, toks):
        name = f"{self.prefix}_{self.split}_{len(self.shards):03d}.bin"
        data = shard_bytes(toks)
        write_atomic(os.path.join(self.out, name), data)
        self.shards.append({"file": name, "tokens": len(toks), "sha256": hashlib.sha256(data).hexdigest()})


def check_ids(ids, vocab):
    """Every id < vocab (and < 65536) before it may enter a shard."""
    if len(ids) and max(ids) >= vocab:
        raise PrepareError(f"token id {max(ids)} is outside the vocabulary (size {vocab})")


# ---------------------------------------------------------------- tokenization workers

_worker_tok = None


def _worker_init(tok_json):
    global _worker_tok
    from tokenizers import Tokenizer
    _worker_tok = Tokenizer.from_str(tok_json)


def _encode_chunk(texts):
    """-> list of uint16-able id lists, one per text, in order (EOT not included)."""
    return [e.ids for e in _worker_tok.encode_batch(texts)]


def _chunks(labeled, limit):
    """Groups (is_val, text) into lists of about `limit` bytes, keeping order."""
    chunk, size = [], 0
    for item in labeled:
        chunk.append(item)
        size += len(item[1])
        if size >= limit:
            yield chunk
            chunk, size = [], 0
    if chunk:
        yield chunk


def encode_ordered(tok, labeled, workers, chunk_bytes=CHUNK_BYTES):
    """Yields (chunk, ids_per_doc) in input order; at most 2*workers chunks in flight."""
    if workers <= 1:
        _worker_init(tok.to_str())
        for ch in _chunks(labeled, chunk_bytes):
            yield ch, _encode_chunk([t for _, t in ch])
        return
    ctx = multiprocessing.get_context("fork" if "fork" in multiprocessing.get_all_start_methods() else "spawn")
    with ctx.Pool(workers, initializer=_worker_init, initargs=(tok.to_str(),)) as pool:
        pending = collections.deque()
        for ch in _chunks(labeled, chunk_bytes):
            pending.append((ch, pool.apply_async(_encode_chunk, ([t for _, t in ch],))))
            if len(pending) >= 2 * workers:
                c, r = pending.popleft()
                yield c, r.get()
        while pending:
            c, r = pending.popleft()
            yield c, r.get()


class Progress:
    """One status line on stderr: MB, MB/s, docs, docs/s (redrawn on a tty, else
    a line every 10 s and at the end)."""

    def __init__(self, label, total_bytes=None, quiet=False):
        self.label, self.total, self.quiet = label, total_bytes, quiet
        self.t0 = self.last = time.time()
        self.bytes = self.docs = 0
        self.tty = sys.stderr.isatty()

    def update(self, nbytes, ndocs):
        self.bytes += nbytes
        self.docs += ndocs
        now = time.time()
        if now - self.last >= (0.2 if self.tty else 10.0):
            self.last = now
            self._draw(end="\r" if self.tty else "\n")

    def done(self):
        self._draw(end="\n", final=True)

    def _draw(self, end, final=False):
        if self.quiet:
            return
        dt = max(time.time() - self.t0, 1e-9)
        mb = self.bytes / 1e6
        pct = ""
        if self.total:
            # (text modes strip line ends, so the bytes seen end a little short of the total)
            f = 1.0 if final else min(self.bytes / self.total, 1.0)
            pct = f"[{'#' * int(f * 20):<20}] {100 * f:5.1f}% "
        print(f"{self.label}: {pct}{mb:,.1f} MB {mb / dt:,.2f} MB/s {self.docs:,} docs "
              f"{self.docs / dt:,.0f} docs/s", end=end, file=sys.stderr, flush=True)


# ---------------------------------------------------------------- the pipeline

def _manifest_path(out, prefix):
    return os.path.join(out, f"{prefix}_manifest.json")


def clean_partial(out, prefix):
    """Deletes this prefix's shards and leftovers (run before writing anything)."""
    for pat in (f"{prefix}_train_*.bin", f"{prefix}_val_*.bin", f"{prefix}_*.tmp"):
        for p in glob.glob(os.path.join(glob.escape(out), pat)):
            os.remove(p)


def is_done(out, prefix, settings):
    """True when a manifest with these settings exists and all its files are present."""
    try:
        with open(_manifest_path(out, prefix)) as f:
            m = json.load(f)
    except (OSError, ValueError):
        return False
    if m.get("settings") != settings:
        return False
    files = [s["file"] for s in m["train"] + m["val"]] + m["tokenizer_files"]
    return all(os.path.isfile(os.path.join(out, n)) for n in files)


def prepare(doc_source, out, prefix, tok=None, vocab=None, split_fn=None, workers=1,
            shard_tokens=100_000_000, total_bytes=None, settings=None, quiet=False,
            chunk_bytes=CHUNK_BYTES, _fail_after_shards=None):
    """The library entry point.

    doc_source: a callable returning a fresh iterator of document strings (called once
      to train the BPE when tok is None, once to tokenize).
    tok: a loaded `tokenizers.Tokenizer` with <|endoftext|>, or None to train a BPE of
      `vocab` ids on the train split.
    split_fn(index, text) -> True for val; default hash_split(0.05).
    Returns (manifest dict, tokenizer). On bad input (PrepareError) this prefix's
    shards are deleted again, so refused ids never leave a shard behind.
    `_fail_after_shards` (tests) raises RuntimeError after that many shard files,
    leaving them, as a killed run would.
    """
    try:
        return _prepare(doc_source, out, prefix, tok, vocab, split_fn, workers, shard_tokens,
                        total_bytes, settings, quiet, chunk_bytes, _fail_after_shards)
    except PrepareError:
        clean_partial(out, prefix)
        raise


def _prepare(doc_source, out, prefix, tok, vocab, split_fn, workers, shard_tokens,
             total_bytes, settings, quiet, chunk_bytes, _fail_after_shards):
    split_fn = split_fn or hash_split(0.05)
    if shard_tokens < 1:
        raise PrepareError("--shard-tokens must be >= 1")
    os.makedirs(out, exist_ok=True)
    # forget any previous result first: from here until the new manifest is written the
    # directory counts as partial, and partial output is deleted, never extended
    try:
        os.remove(_manifest_path(out, prefix))
    except FileNotFoundError:
        pass
    clean_partial(out, prefix)

    def labeled():
        for i, text in enumerate(doc_source()):
            yield split_fn(i, text), text

    t0 = time.time()
    if tok is None:
        prog = Progress(f"{prefix}: training BPE", total_bytes, quiet)

        def train_texts():
            for is_val, text in labeled():
                prog.update(len(text.encode("utf-8")), 1)
                if not is_val:
                    yield text
        tok = train_bpe(train_texts(), vocab)
        prog.done()
    vocab = vocab_size(tok)
    eot = tok.token_to_id(EOT_TEXT)
    table = token_bytes_table(tok, vocab)
    check_ids([eot], vocab)

    writers = {s: ShardWriter(out, prefix, s, shard_tokens) for s in ("train", "val")}
    ndocs = {"train": 0, "val": 0}
    if _fail_after_shards is not None:
        for w in writers.values():
            orig = w._flush

            def flush(toks, orig=orig):
                if sum(len(x.shards) for x in writers.values()) >= _fail_after_shards:
                    raise RuntimeError("simulated interruption")
                orig(toks)
            w._flush = flush
    prog = Progress(f"{prefix}: tokenizing", total_bytes, quiet)
    for chunk, ids_list in encode_ordered(tok, labeled(), workers, chunk_bytes):
        nbytes = 0
        for (is_val, text), ids in zip(chunk, ids_list):
            check_ids(ids, vocab)
            split = "val" if is_val else "train"
            writers[split].add([eot])  # EOT precedes each document
            writers[split].add(ids)
            ndocs[split] += 1
            nbytes += len(text.encode("utf-8"))
        prog.update(nbytes, len(chunk))
    for w in writers.values():
        w.close()
    prog.done()
    if ndocs["train"] == 0:
        raise PrepareError("no training documents (empty input, or --val-frac took them all)")

    tok_bin, tok_json = f"{prefix}_tokenizer.bin", f"{prefix}_tokenizer.json"
    write_atomic(os.path.join(out, tok_bin), tokenizer_bin_bytes(table, eot))
    write_atomic(os.path.join(out, tok_json), tok.to_str(pretty=True).encode("utf-8"))
    manifest = {
        "version": MANIFEST_VERSION, "settings": settings or {}, "vocab_size": vocab, "eot_id": eot,
        "train": writers["train"].shards, "val": writers["val"].shards,
        "train_docs": ndocs["train"], "val_docs": ndocs["val"],
        "train_tokens": writers["train"].tokens, "val_tokens": writers["val"].tokens,
        "tokenizer_files": [tok_bin, tok_json], "seconds": round(time.time() - t0, 2),
    }
    write_atomic(_manifest_path(out, prefix), (json.dumps(manifest, indent=1) + "\n").encode())
    return manifest, tok


def _file_settings(args, paths):
    st = [(p, os.path.getsize(p), os.path.getmtime(p)) for p in paths]
    tok_sha = None
    if args.tokenizer:
        with open(args.tokenizer, "rb") as f:
            tok_sha = hashlib.sha256(f.read()).hexdigest()
    return {"inputs": st, "field": args.field, "docs": args.docs, "val_frac": args.val_frac,
            "shard_tokens": args.shard_tokens, "train_bpe": args.train_bpe, "tokenizer_sha256": tok_sha}


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0].strip(),
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("inputs", nargs="+", help="files or globs (.jsonl, .parquet, text)")
    ap.add_argument("--out", required=True, help="output directory")
    ap.add_argument("--prefix", default="data", help="output file prefix (default data)")
    g = ap.add_mutually_exclusive_group(required=True)
    g.add_argument("--train-bpe", type=int, metavar="VOCAB", help="train a byte-level BPE of VOCAB ids (incl. EOT)")
    g.add_argument("--tokenizer", metavar="JSON", help="use this tokenizer.json (must have <|endoftext|>)")
    ap.add_argument("--field", default="text", help="JSON field / parquet column (default text)")
    ap.add_argument("--docs", choices=["file", "lines", "blank"], default="file",
                    help="text files: one document per file, per line, or per blank-line paragraph")
    ap.add_argument("--val-frac", type=float, default=0.05, help="fraction of documents for val (by hash)")
    ap.add_argument("--shard-tokens", type=int, default=100_000_000, help="tokens per shard")
    ap.add_argument("--workers", type=int, default=1, help="tokenization processes")
    ap.add_argument("--chunk-bytes", type=int, default=CHUNK_BYTES,
                    help="text per tokenization task (tuning; the output does not depend on it)")
    ap.add_argument("--force", action="store_true", help="rebuild even if the manifest matches")
    ap.add_argument("--quiet", action="store_true", help="no progress line")
    args = ap.parse_args(argv)
    # parallelism is --workers (processes), not the Rust thread pool; this also keeps
    # tokenizers quiet about forking after it has been used
    os.environ.setdefault("RAYON_NUM_THREADS", "1")
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    try:
        import tokenizers  # noqa: F401
    except ImportError:
        print("prepare.py: error: Python package `tokenizers` is missing; run `bash dev/install.sh` "
              "and use /usr/bin/python3", file=sys.stderr)
        return 1
    try:
        if args.workers < 1 or args.chunk_bytes < 1:
            raise PrepareError("--workers and --chunk-bytes must be >= 1")
        paths = expand_inputs(args.inputs)
        if args.tokenizer and not os.path.isfile(args.tokenizer):
            raise PrepareError(f"no such tokenizer file: {args.tokenizer}")
        settings = _file_settings(args, paths)
        settings["inputs"] = [list(x) for x in settings["inputs"]]
        if not args.force and is_done(args.out, args.prefix, settings):
            print(f"prepare.py: {args.out}/{args.prefix}_* is up to date (manifest matches); --force rebuilds")
            return 0
        tok = load_tokenizer(args.tokenizer) if args.tokenizer else None
        if tok is not None:
            vocab_size(tok)  # refuse a too-large vocabulary before reading the corpus
        m, _ = prepare(lambda: iter_documents(paths, args.field, args.docs), args.out, args.prefix,
                       tok=tok, vocab=args.train_bpe, split_fn=hash_split(args.val_frac),
                       workers=args.workers, shard_tokens=args.shard_tokens,
                       total_bytes=sum(os.path.getsize(p) for p in paths), settings=settings,
                       quiet=args.quiet, chunk_bytes=args.chunk_bytes)
    except PrepareError as e:
        print(f"prepare.py: error: {e}", file=sys.stderr)
        return 1
    print(f"prepare.py: wrote {args.out}: train {m['train_tokens']:,} tokens ({m['train_docs']:,} docs, "
          f"{len(m['train'])} shards), val {m['val_tokens']:,} tokens ({m['val_docs']:,} docs, "
          f"{len(m['val'])} shards), vocab {m['vocab_size']} (EOT id {m['eot_id']}), {m['seconds']}s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
