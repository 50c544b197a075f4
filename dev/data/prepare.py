"""
Any corpus in: text / .jsonl / .parquet files -> a byte-level BPE tokenizer and llm.c
token shards the trainers read.

    /usr/bin/python3 dev/data/prepare.py --out DIR --prefix NAME (--train-bpe VOCAB |
        --tokenizer tokenizer.json) [--field text] [--docs file|lines|blank] [--format auto]
        [--val-frac 0.05] [--shard-tokens N] [--workers N] [--engine fast|hf]
        [--part K/N] [--force] FILE_OR_GLOB ...
    /usr/bin/python3 dev/data/prepare.py --merge --out DIR --prefix NAME   (after all parts)
    /usr/bin/python3 dev/data/prepare.py --train-bpe VOCAB --tokenizer-only --out DIR --prefix NAME FILE ...

Inputs (globs are expanded here, files are read in sorted order per pattern; --format
overrides the choice by extension, e.g. for /dev/stdin):
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
No input may be one of these files: that is refused before anything is written.

Split: a document goes to val when the first 8 bytes of sha256(its UTF-8 text), read
as a big-endian integer / 2^64, are < --val-frac: deterministic, independent of file
order, worker count and parts, and identical documents always land on the same side.
The BPE is trained on the train split only (no val leakage), vocab-1 learned tokens
and <|endoftext|> as the last id.

Tokenization: the main process reads and splits, --workers processes encode chunks of
documents, results are consumed in input order (at most 2 chunks per worker in flight),
so the output is byte-identical for any worker count and chunk size. Each worker has a
pipe of its own each way and the main process never blocks writing to one, so an error
anywhere (bad input, a killed worker, a full disk, Ctrl-C) ends the run with one line and
no process left, never a hang. --engine fast (the
default) runs GPT-2's pre-tokenizer regex in Python's `re`, with its letter / number /
space classes taken from unicodedata and checked at start-up against the tokenizer's own
pre-tokenizer, and sends each distinct word through the tokenizer's BPE model once (then
a cache). Documents outside what was checked (a character beyond U+FFFF or unassigned,
the text of a special token) and tokenizers that are not plain byte-level BPE go through
the tokenizer's encode_batch, which --engine hf uses for everything (the old path). The
ids are Tokenizer.encode's either way. Memory is bounded by the chunks in flight, the
word cache and one shard buffer per split (and the BPE trainer's word counts when
training), not by the corpus size; a single document is held whole.

Parts (--part K/N, e.g. one Slurm array task each): the inputs, concatenated in order,
are cut into N equal byte ranges; part K takes the documents whose first byte lies in
range K (a .jsonl line, a text line or paragraph, a text file with --docs file, a parquet
row group), so every document is in exactly one part and parts 1..N in order hold the
documents in input order. Part K writes PREFIX_pKKKKofNNNN_{train,val}_NNN.bin, its
tokenizer files and its manifest; --merge checks that all N are there, complete, made
with the same settings and tokenizer, gives the parts' shards the names of one sequence
PREFIX_{train,val}_NNN.bin (hard links), so that the glob to train on, PREFIX_train_*.bin,
takes exactly the merged manifest's shards, and writes PREFIX_manifest.json listing them
plus PREFIX_tokenizer.{bin,json}. Parts need --tokenizer (train one first, e.g.
with --tokenizer-only), never a BPE trained per part. The split rule is per document,
so parts put each document on the same side as a single job.
"""

import argparse
import array
import collections
import contextlib
import glob
import hashlib
import json
import multiprocessing
import operator
import os
import pickle
import re
import select
import shlex
import signal
import struct
import sys
import time
import traceback
import unicodedata

EOT_TEXT = "<|endoftext|>"
DATA_MAGIC, DATA_VERSION = 20240520, 1
TOK_MAGIC, TOK_VERSION = 20240328, 2
MANIFEST_VERSION = 1
HEADER_BYTES = 1024
CHUNK_BYTES = 1 << 20  # text per tokenization task: big enough to amortise IPC
WORD_CACHE = 1 << 18, 1 << 25  # an encoder's word cache starts over at this many words or characters
BIG = float("inf")


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


def input_format(path, fmt="auto"):
    if fmt != "auto":
        return fmt
    return "jsonl" if path.endswith(".jsonl") else "parquet" if path.endswith(".parquet") else "text"


def input_sizes(paths):
    """Byte sizes, or None when one is not a regular file (a FIFO: size unknown)."""
    if not all(os.path.isfile(p) for p in paths):
        return None
    return [os.path.getsize(p) for p in paths]


def part_bounds(k, n, total):
    """Byte range [lo, hi) of the inputs' concatenation that part k of n owns; the last
    one is open-ended so that an empty file at the very end has an owner."""
    return (k - 1) * total // n, (k * total // n if k < n else BIG)


def _decode(b, where):
    try:
        return b.decode("utf-8")
    except UnicodeDecodeError as e:
        raise PrepareError(f"{where}: not UTF-8 ({e.reason} at byte {e.start})")


def _lines(path, lo, counter):
    """(offset, line number or None, raw line) for every line from the first one that
    starts at byte >= lo. Line numbers are known only when reading from the start."""
    with open(path, "rb") as f:
        pos, n = 0, 1
        if lo > 0:
            f.seek(lo - 1)
            pos = lo - 1 + len(f.readline())  # the rest of the line holding byte lo-1
            n = None
        for raw in f:
            counter[0] += len(raw)
            yield pos, n, raw
            pos += len(raw)
            if n is not None:
                n += 1


def _where(path, n, pos):
    return f"{path}:{n}" if n is not None else f"{path}: line at byte {pos}"


def _line_before_is_blank(path, pos):
    """Whether the line that ends at byte pos-1 (pos > 0 is a line start) is blank."""
    with open(path, "rb") as f:
        start = pos - 1
        while start > 0:
            step = min(start, 1 << 16)
            f.seek(start - step)
            i = f.read(step).rfind(b"\n")
            if i >= 0:
                start = start - step + i + 1
                break
            start -= step
        f.seek(start)
        return not _decode(f.read(pos - start), path).strip()


def _text_docs(path, mode, lo, hi, counter):
    """The documents of a text file that start in byte range [lo, hi) (--docs lines or
    blank; with --docs file the caller decides for the whole file)."""
    if mode == "file":
        with open(path, "rb") as f:
            b = f.read()
        counter[0] += len(b)
        yield _decode(b, path)
        return
    para, skipping, first = [], False, True
    for pos, n, raw in _lines(path, lo, counter):
        if mode == "lines" and pos >= hi:
            return
        line = _decode(raw, _where(path, n, pos))
        blank = not line.strip()
        if mode == "lines":
            if not blank:
                yield line.rstrip("\r\n")
        elif blank:
            if para:
                yield "".join(para).rstrip("\r\n")
            para, skipping = [], False
        elif para:
            para.append(line)
        elif not skipping:  # a paragraph starts here, unless it began before lo
            if pos >= hi:
                return
            if first and pos > 0 and not _line_before_is_blank(path, pos):
                skipping = True  # the rest of an earlier part's paragraph
            else:
                para.append(line)
        first = False
    if para:
        yield "".join(para).rstrip("\r\n")


def _jsonl_docs(path, field, lo, hi, counter):
    for pos, n, raw in _lines(path, lo, counter):
        if pos >= hi:
            return
        if not raw.strip():
            continue
        where = _where(path, n, pos)
        try:
            obj = json.loads(raw)
        except ValueError as e:
            raise PrepareError(f"{where}: bad JSON ({e})")
        if not isinstance(obj, dict) or field not in obj:
            raise PrepareError(f"{where}: no field {field!r}")
        if not isinstance(obj[field], str):
            raise PrepareError(f"{where}: field {field!r} is not a string")
        yield obj[field]


def _parquet_docs(path, field, lo, hi, counter):
    """The --field values of the row groups whose first data page is in [lo, hi)."""
    try:
        import pyarrow.parquet as pq
    except ImportError:
        raise PrepareError(f"{path}: reading .parquet needs pyarrow, which this Python "
                           f"({sys.executable}) lacks; convert to .jsonl or install pyarrow")
    pf = pq.ParquetFile(path)
    if field not in pf.schema_arrow.names:
        raise PrepareError(f"{path}: no column {field!r}")
    md = pf.metadata
    starts = [md.row_group(j).column(0).data_page_offset for j in range(md.num_row_groups)]
    ends = starts[1:] + [os.path.getsize(path)]
    for j, (start, end) in enumerate(zip(starts, ends)):
        if not lo <= start < hi:
            continue
        for batch in pf.iter_batches(columns=[field], batch_size=1024, row_groups=[j]):
            for v in batch.column(0).to_pylist():
                if v is not None:
                    yield v
        counter[0] += end - start


def iter_documents(paths, field="text", docs="file", fmt="auto", part=None, counter=None):
    """Streams the documents of all files, in order. part=(k, n): only those part k of n
    owns (see part_bounds). counter: a one-element list that the input bytes read are
    added to (for progress)."""
    counter = counter if counter is not None else [0]
    lo, hi, sizes = 0, BIG, [None] * len(paths)
    if part is not None:
        sizes = input_sizes(paths)
        if sizes is None:
            raise PrepareError("--part needs regular files (their sizes cut the parts)")
        lo, hi = part_bounds(part[0], part[1], sum(sizes))
    base = 0
    for p, size in zip(paths, sizes):
        kind = input_format(p, fmt)
        if base >= hi:
            return  # every later document starts at or beyond the range
        a, b = lo - base, hi - base  # the range in this file's offsets
        if size is not None:
            base += size
            if (a > 0) if kind == "text" and docs == "file" else (a >= size):
                continue  # no document of this file starts in the range
        if kind == "jsonl":
            yield from _jsonl_docs(p, field, max(a, 0), b, counter)
        elif kind == "parquet":
            yield from _parquet_docs(p, field, a, b, counter)
        else:
            yield from _text_docs(p, docs, max(a, 0), b, counter)


def refuse_outputs_on_inputs(outputs, inputs):
    """Before anything is written: no output file, nor its .tmp, may be an input (the same
    file, through a symlink or a hard link too). inputs: (label, path) pairs. For the tools
    that write fixed names (dedup.py, decontaminate.py)."""
    for out in outputs:
        for o in (out, out + ".tmp"):
            if not os.path.exists(o):
                continue
            for label, p in inputs:
                if os.path.exists(p) and os.path.samefile(p, o):
                    raise PrepareError(f"{label} {p} is {o}, which this run writes: give another --out "
                                       f"(nothing was written)")


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


# ---------------------------------------------------------------- encoding

# GPT-2's pre-tokenizer pattern (tokenizers' ByteLevel) with its \s, \p{L} and \p{N}
# spelled out as character classes, so that Python's `re` can run it
GPT2_PATTERN = "'s|'t|'re|'ve|'m|'ll|'d| ?[{L}]+| ?[{N}]+| ?[^{S}{L}{N}]+|[{S}]+(?![^{S}])|[{S}]+"
# Oniguruma's \s (Unicode White_Space), the one that pattern means
WHITESPACE = ("\t\n\x0b\x0c\r \x85\xa0\u1680" + "".join(map(chr, range(0x2000, 0x200B)))
              + "\u2028\u2029\u202f\u205f\u3000")


def _char_class(chars):
    """The inside of a regex [...] matching exactly `chars` (sorted), as ranges."""
    out, i = [], 0
    while i < len(chars):
        j = i
        while j + 1 < len(chars) and ord(chars[j + 1]) == ord(chars[j]) + 1:
            j += 1
        out.append(re.escape(chars[i]) + ("-" + re.escape(chars[j]) if j > i else ""))
        i = j + 1
    return "".join(out)


def fast_patterns(tok):
    """Regex sources (split, unsafe, special) for Encoder's fast path, or None when `tok`
    is not plain GPT-2-style byte-level BPE (then everything goes through encode_batch).

    split is GPT2_PATTERN over the BMP characters whose class (space, letter, number,
    other) tok's own pre-tokenizer confirms; unsafe finds any other character, special
    the text of an added token (the tokenizer splits those out before pre-tokenizing).
    Characters beyond U+FFFF stay out because `re` is 4x slower on classes that hold them.
    """
    cfg = json.loads(tok.to_str())
    pre, post, model = cfg.get("pre_tokenizer") or {}, cfg.get("post_processor"), cfg.get("model") or {}
    if (cfg.get("normalizer") is not None or cfg.get("truncation") is not None or cfg.get("padding") is not None
            or pre.get("type") != "ByteLevel" or pre.get("add_prefix_space") or not pre.get("use_regex", True)
            or (post is not None and post.get("type") != "ByteLevel")  # (that one only trims offsets)
            or model.get("type") != "BPE" or model.get("dropout")):
        return None
    classes = {"S": [], "L": [], "N": [], "O": []}
    for cp in range(0x10000):
        c = chr(cp)
        cat = unicodedata.category(c)
        if cat not in ("Cn", "Cs"):  # unassigned here may be assigned in the tokenizer's Unicode
            classes["S" if c in WHITESPACE else cat[0] if cat[0] in "LN" else "O"].append(c)
    lead = {"S": "", "L": "a", "N": "0", "O": "!"}

    def confirmed(k, chars):
        # a run of one class after a lead of that class is a single pre-token exactly when
        # the tokenizer agrees about every character; else halve it to find the exceptions
        if len(tok.pre_tokenizer.pre_tokenize_str(lead[k] + "".join(chars))) == 1:
            return chars
        if len(chars) == 1:
            return []
        return confirmed(k, chars[:len(chars) // 2]) + confirmed(k, chars[len(chars) // 2:])
    classes = {k: confirmed(k, v) for k, v in classes.items()}
    if sum(c < "\x80" for v in classes.values() for c in v) < 128:
        return None  # an odd tokenizer: ASCII documents skip the `unsafe` search, so all of ASCII must agree
    split = GPT2_PATTERN.format(**{k: _char_class(v) for k, v in classes.items()})
    if sys.version_info >= (3, 11):
        # nothing follows these three runs in their alternatives, so they never give back
        # characters: possessive makes that explicit and saves `re` its bookkeeping (~10%)
        split = split.replace("]+|", "]++|", 3)
    unsafe = "[^" + _char_class(sorted(c for v in classes.values() for c in v)) + "]"
    specials = "|".join(re.escape(t["content"]) for t in cfg.get("added_tokens") or [])
    return split, unsafe, specials or None


def u16le(ids):
    a = array.array("H", ids)
    if sys.byteorder != "little":
        a.byteswap()
    return a.tobytes()


# byte -> the character the ByteLevel pre-tokenizer maps it to, indexed by the byte
# read as a Latin-1 character (so str.translate does the whole word at once)
BYTE_CHARS = {b: c for c, b in byte_decoder().items()}


class Encoder:
    """Documents -> their token ids (as u16le bytes, no EOT), the same ids that
    tok.encode_batch gives. patterns: fast_patterns(tok), or None for encode_batch only."""

    def __init__(self, tok, patterns):
        self.tok, self.model = tok, tok.model
        self.eot_bytes = u16le([tok.token_to_id(EOT_TEXT)])
        self.cache, self.cache_chars, self.top = {}, 0, 0  # word -> u16le ids
        self.split = None
        if patterns:
            self.split = re.compile(patterns[0]).findall
            self.unsafe = re.compile(patterns[1]).search
            self.special = re.compile(patterns[2]).search if patterns[2] else None
            self.to_chars = str.maketrans({chr(b): c for b, c in BYTE_CHARS.items()})

    def _word(self, w):
        """A word the cache lacks, through the tokenizer's BPE model."""
        ids = [t.id for t in self.model.tokenize(w.encode("utf-8").decode("latin-1").translate(self.to_chars))]
        self.top = max(self.top, max(ids, default=0))
        self.cache[w] = u16le(ids)
        self.cache_chars += len(w)

    def _lookup(self, words):
        # itemgetter does the lookups in C: twice as fast as a loop or map here
        return operator.itemgetter(*words)(self.cache) if len(words) > 1 else [self.cache[w] for w in words]

    def encode(self, texts):
        """-> (list of u16le bytes per text, the largest id of the words new in this call
        and of the documents encode_batch did)."""
        out, slow, self.top = [], [], 0
        if len(self.cache) >= WORD_CACHE[0] or self.cache_chars >= WORD_CACHE[1]:
            # the simplest bound (the frequent words come back at once); only between calls,
            # so that a call's words stay until its lookups are done
            self.cache, self.cache_chars = {}, 0
        for i, t in enumerate(texts):
            if (self.split is None or not t.isascii() and self.unsafe(t)
                    or self.special is not None and self.special(t)):
                slow.append(i)
                out.append(None)
                continue
            words = self.split(t)
            try:
                ids = self._lookup(words)
            except KeyError:
                for w in set(words).difference(self.cache):
                    self._word(w)
                ids = self._lookup(words)
            out.append(b"".join(ids))
        if slow:
            for i, e in zip(slow, self.tok.encode_batch([texts[i] for i in slow])):
                out[i] = u16le(e.ids)
                self.top = max([self.top] + e.ids)
        return out, self.top


_encoder = None


def _worker_init(tok_json, patterns):
    global _encoder
    from tokenizers import Tokenizer
    _encoder = Encoder(Tokenizer.from_str(tok_json), patterns)


def _encode_chunk(flags, texts):
    """One task -> (train bytes, val bytes, largest new id): the chunk's documents of each
    split in order, each preceded by EOT, as u16le."""
    blobs, top = _encoder.encode(texts)
    parts = ([], [])
    for v, b in zip(flags, blobs):
        parts[1 if v else 0].extend((_encoder.eot_bytes, b))
    return b"".join(parts[0]), b"".join(parts[1]), top


def _chunks(labeled, limit):
    """Groups (is_val, text) into (flags, texts) of about `limit` bytes, keeping order."""
    flags, texts, size = [], [], 0
    for v, t in labeled:
        flags.append(v)
        texts.append(t)
        size += len(t)
        if size >= limit:
            yield flags, texts
            flags, texts, size = [], [], 0
    if texts:
        yield flags, texts


def encode_ordered(tok, labeled, workers, chunk_bytes=CHUNK_BYTES, engine="fast"):
    """Yields (flags, _encode_chunk's result) in input order; at most 2*workers chunks in flight."""
    patterns = fast_patterns(tok) if engine == "fast" else None
    if workers <= 1 or not hasattr(os, "fork"):
        _worker_init(tok.to_str(), patterns)
        for flags, texts in _chunks(labeled, chunk_bytes):
            yield flags, _encode_chunk(flags, texts)
        return
    pool = _Workers(workers, tok.to_str(), patterns)
    finished = False
    try:
        pending = collections.deque()
        for j, (flags, texts) in enumerate(_chunks(labeled, chunk_bytes)):
            pool.submit(j % workers, (flags, texts))
            pending.append((flags, j % workers))
            if len(pending) >= 2 * workers:
                f, k = pending.popleft()
                yield f, pool.result(k)
        while pending:
            f, k = pending.popleft()
            yield f, pool.result(k)
        finished = True
    finally:
        pool.close(wait=finished)


# ---------------------------------------------------------------- the worker processes

_FRAME = struct.Struct("<Q")  # a message on a pipe: its length, then the pickle


def _read_exact(fd, n):
    """n bytes from a blocking fd; None on EOF before the first byte."""
    parts, got = [], 0
    while got < n:
        b = os.read(fd, min(n - got, 1 << 22))
        if not b:
            if got == 0:
                return None
            raise EOFError("pipe closed inside a message")
        parts.append(b)
        got += len(b)
    return b"".join(parts)


def _write_all(fd, b):
    view = memoryview(b)
    while view:
        view = view[os.write(fd, view):]


def _worker_main(task_fd, result_fd, inherited, tok_json, patterns):
    """A tokenization process: tasks in on task_fd, results out on result_fd, in order, until
    the main process closes its end. No thread, no lock shared with any other process."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C: the main process ends the workers
    for fd in inherited:  # the main process's ends of every pipe: EOF must mean it is gone
        os.close(fd)
    _worker_init(tok_json, patterns)
    try:
        while True:
            head = _read_exact(task_fd, _FRAME.size)
            if head is None:
                return
            flags, texts = pickle.loads(_read_exact(task_fd, _FRAME.unpack(head)[0]))
            try:
                res = (True, _encode_chunk(flags, texts))
            except Exception:
                res = (False, traceback.format_exc())
            b = pickle.dumps(res, protocol=pickle.HIGHEST_PROTOCOL)
            _write_all(result_fd, _FRAME.pack(len(b)))
            _write_all(result_fd, b)
    except (BrokenPipeError, EOFError):
        return  # the main process is gone or has stopped: it says why, not us


class _Workers:
    """The tokenization processes of encode_ordered. Each has a pipe of its own each way; no
    queue, lock or thread is shared (multiprocessing.Pool's shutdown could hang for good
    when a worker died holding its result queue's lock). The main process never blocks on
    a write: its ends are non-blocking, and while it waits for a result it pushes the tasks
    still pending, so it and a worker can never wait on each other. A worker that dies is
    an EOF or EPIPE here, so an error, never a hang; close() always returns."""

    def __init__(self, n, tok_json, patterns):
        ctx = multiprocessing.get_context("fork")
        self.procs, self.tfd, self.rfd = [], [], []
        self.out = []  # per worker: memoryviews of task bytes not yet written
        self.inbuf = []  # per worker: result bytes read, not yet a whole message
        try:
            for _ in range(n):
                tr, tw = os.pipe()
                rr, rw = os.pipe()
                for fd in (tw, rw):
                    _grow_pipe(fd)
                mine = self.tfd + self.rfd + [tw, rr]
                p = ctx.Process(target=_worker_main, args=(tr, rw, mine, tok_json, patterns), daemon=True)
                try:
                    p.start()
                finally:
                    os.close(tr)
                    os.close(rw)
                os.set_blocking(tw, False)
                os.set_blocking(rr, False)
                self.procs.append(p)
                self.tfd.append(tw)
                self.rfd.append(rr)
                self.out.append(collections.deque())
                self.inbuf.append(bytearray())
        except BaseException:
            self.close(wait=False)
            raise

    def submit(self, i, task):
        b = pickle.dumps(task, protocol=pickle.HIGHEST_PROTOCOL)
        self.out[i].extend((memoryview(_FRAME.pack(len(b))), memoryview(b)))
        self._push(i)

    def _push(self, i):
        q = self.out[i]
        while q:
            try:
                n = os.write(self.tfd[i], q[0])
            except BlockingIOError:
                return
            except BrokenPipeError:
                raise self._died(i)
            q[0] = q[0][n:]
            if not q[0]:
                q.popleft()

    def _message(self, i):
        buf = self.inbuf[i]
        if len(buf) < _FRAME.size:
            return None
        end = _FRAME.size + _FRAME.unpack_from(buf)[0]
        if len(buf) < end:
            return None
        msg = pickle.loads(memoryview(buf)[_FRAME.size:end])
        del buf[:end]
        return msg

    def result(self, i):
        """Worker i's next result; meanwhile every pending task goes out as the pipes take it."""
        while True:
            msg = self._message(i)
            if msg is not None:
                break
            poll = select.poll()
            poll.register(self.rfd[i], select.POLLIN)
            for k, q in enumerate(self.out):
                if q:
                    poll.register(self.tfd[k], select.POLLOUT)
            for fd, _ in poll.poll():
                if fd != self.rfd[i]:
                    self._push(self.tfd.index(fd))
                    continue
                try:
                    b = os.read(fd, 1 << 22)
                except BlockingIOError:
                    continue
                if not b:
                    raise self._died(i)
                self.inbuf[i] += b
        ok, value = msg
        if not ok:
            raise RuntimeError(f"tokenization worker {i + 1} failed:\n{value}")
        return value

    def _died(self, i):
        p = self.procs[i]
        p.join(5)
        how = (f"killed by signal {-p.exitcode}" if p.exitcode is not None and p.exitcode < 0
               else f"exit status {p.exitcode}" if p.exitcode is not None else "it closed its pipe")
        return PrepareError(f"tokenization worker {i + 1} (pid {p.pid}) died ({how}; out of memory?): "
                            f"rerun, perhaps with fewer --workers or a smaller --chunk-bytes")

    def close(self, wait):
        """Ends the workers: wait=True lets them see EOF and exit, else they are terminated
        at once; one still there after 5 s is terminated, and killed 5 s later. Returns."""
        if not wait:
            for p in self.procs:
                if p.is_alive():
                    p.terminate()
        for fd in self.tfd + self.rfd:
            try:
                os.close(fd)
            except OSError:
                pass
        self.tfd, self.rfd = [], []
        deadline = time.time() + 5
        for p in self.procs:
            p.join(max(0.0, deadline - time.time()))
            if p.is_alive():
                p.terminate()
        for p in self.procs:
            p.join(5)
            if p.is_alive():
                p.kill()
                p.join()


def _grow_pipe(fd):
    """A 1 MiB pipe where Linux allows it, so a whole task fits (64 KiB by default)."""
    try:
        import fcntl
        fcntl.fcntl(fd, fcntl.F_SETPIPE_SZ, 1 << 20)
    except (ImportError, AttributeError, OSError):
        pass


# ---------------------------------------------------------------- shards out

def write_atomic(path, *parts):
    tmp = path + ".tmp"
    with open(tmp, "wb") as f:
        for data in parts:
            f.write(data)
    os.replace(tmp, path)


def shard_header(n_tokens):
    return struct.pack("<256i", DATA_MAGIC, DATA_VERSION, n_tokens, *([0] * 253))


class ShardWriter:
    """Cuts one split's token stream (u16le bytes) into shards of shard_tokens (the last
    one shorter)."""

    def __init__(self, out, prefix, split, shard_tokens):
        self.out, self.prefix, self.split, self.n = out, prefix, split, shard_tokens
        self.buf = bytearray()
        self.shards = []  # {file, tokens, sha256}
        self.tokens = 0

    def add(self, b):
        self.buf += b
        self.tokens += len(b) // 2
        while len(self.buf) >= 2 * self.n:
            self._flush(self.buf[:2 * self.n])
            del self.buf[:2 * self.n]

    def close(self):
        if self.buf:
            self._flush(self.buf)
            self.buf = bytearray()

    def _flush(self, body):
        name = f"{self.prefix}_{self.split}_{len(self.shards):03d}.bin"
        head = shard_header(len(body) // 2)
        write_atomic(os.path.join(self.out, name), head, body)
        sha = hashlib.sha256(head)
        sha.update(body)
        self.shards.append({"file": name, "tokens": len(body) // 2, "sha256": sha.hexdigest()})


def check_ids(ids, vocab):
    """Every id < vocab (and < 65536) before it may enter a shard."""
    if len(ids) and max(ids) >= vocab:
        raise PrepareError(f"token id {max(ids)} is outside the vocabulary (size {vocab})")


class Progress:
    """One status line on stderr: input MB (of how many), MB/s, documents, ETA; redrawn
    on a tty, else a line every 10 s and at the end. The bytes are those update() is
    given, or counter[0] when a counter (a one-element list someone else adds to) is."""

    def __init__(self, label, total_bytes=None, quiet=False, counter=None):
        self.label, self.total, self.quiet = label, total_bytes, quiet
        self.counter, self.own = (counter, False) if counter is not None else ([0], True)
        self.t0 = self.last = time.time()
        self.docs = 0
        self.tty = sys.stderr.isatty()

    def update(self, nbytes, ndocs):
        if self.own:
            self.counter[0] += nbytes
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
        mb = self.counter[0] / 1e6
        if self.total:
            f = 1.0 if final else min(self.counter[0] / self.total, 1.0)
            eta = "done" if final else "?" if f == 0 else time.strftime("%H:%M:%S", time.gmtime(dt * (1 - f) / f))
            head = f"[{'#' * int(f * 20):<20}] {100 * f:5.1f}% {mb:,.1f}/{self.total / 1e6:,.1f} MB"
            tail = f" ETA {eta}"
        else:
            head, tail = f"{mb:,.1f} MB", " (input size unknown: no ETA)"
        print(f"{self.label}: {head} {mb / dt:,.2f} MB/s {self.docs:,} docs{tail}",
              end=end, file=sys.stderr, flush=True)


# ---------------------------------------------------------------- the pipeline

def _manifest_path(out, prefix):
    return os.path.join(out, f"{prefix}_manifest.json")


def _shard_re(prefix):
    """The names of prefix's shards, exactly: PREFIX_train_<digits>.bin and _val_ (a glob like
    PREFIX_train_*.bin would also take another prefix's, e.g. PREFIX_train_x's)."""
    return re.compile(re.escape(prefix) + r"_(train|val)_\d+\.bin")


def _output_re(prefix, tokenizer=True):
    """Every name a run of prefix writes or deletes: shards, tokenizer files, manifest, .tmp
    (tokenizer=False: all but the tokenizer files, what a part touches of the merged prefix)."""
    tok = r"|tokenizer\.(bin|json)" if tokenizer else ""
    return re.compile(re.escape(prefix) + r"_((train|val)_\d+\.bin" + tok + r"|manifest\.json)(\.tmp)?")


def _own_names(out, rx):
    try:
        return sorted(n for n in os.listdir(out) if rx.fullmatch(n))
    except FileNotFoundError:
        return []


def clean_partial(out, prefix):
    """Deletes this prefix's shards and .tmp leftovers (run before writing anything)."""
    shard, out_rx = _shard_re(prefix), _output_re(prefix)
    for n in _own_names(out, out_rx):
        if shard.fullmatch(n) or n.endswith(".tmp"):
            os.remove(os.path.join(out, n))


def refuse_overwriting_inputs(out, rxs, inputs, tokenizer=None, own_tok=None, tok_bytes=None):
    """Before anything is written: no input may be a file that this run writes or deletes in
    `out` (the names the regexes rxs match), symlinks resolved. The one exception is
    --tokenizer being own_tok, the run's own tokenizer.json, holding the bytes the run would
    write: it stays as it is."""
    if not os.path.isdir(out):
        return
    for path in list(inputs) + ([tokenizer] if tokenizer else []):
        real = os.path.realpath(path)
        name = os.path.basename(real)
        try:
            here = os.path.samefile(os.path.dirname(real), out)
        except OSError:
            continue
        if not here or not any(rx.fullmatch(name) for rx in rxs):
            continue
        if path is tokenizer and name == own_tok and tok_bytes is not None:
            with open(real, "rb") as f:
                if f.read() == tok_bytes:
                    continue
        what = "--tokenizer" if path is tokenizer else "the input"
        raise PrepareError(f"{what} {path} is {os.path.join(out, name)}, which this run writes or deletes: "
                           f"give another --out or --prefix, or move that file first")


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


def write_if_changed(path, data):
    """write_atomic unless the file already holds exactly data (a --tokenizer that is this
    run's own tokenizer.json stays untouched)."""
    try:
        with open(path, "rb") as f:
            if f.read() == data:
                return
    except OSError:
        pass
    write_atomic(path, data)


def write_tokenizer_files(out, prefix, tok, table, eot):
    names = f"{prefix}_tokenizer.bin", f"{prefix}_tokenizer.json"
    write_if_changed(os.path.join(out, names[0]), tokenizer_bin_bytes(table, eot))
    write_if_changed(os.path.join(out, names[1]), tok.to_str(pretty=True).encode("utf-8"))
    return list(names)


def prepare(doc_source, out, prefix, tok=None, vocab=None, split_fn=None, workers=1,
            shard_tokens=100_000_000, total_bytes=None, settings=None, quiet=False,
            chunk_bytes=CHUNK_BYTES, engine="fast", counter=None, extra=None, allow_empty=False,
            tokenizer_only=False, _fail_after_shards=None):
    """The library entry point.

    doc_source: a callable returning a fresh iterator of document strings (called once
      to train the BPE when tok is None, once to tokenize).
    tok: a loaded `tokenizers.Tokenizer` with <|endoftext|>, or None to train a BPE of
      `vocab` ids on the train split.
    split_fn(index, text) -> True for val; default hash_split(0.05).
    engine: "fast" or "hf" (see the module's doc); the output is the same.
    counter: a one-element list the doc_source adds its input bytes to (progress, against
      total_bytes); without it progress counts the documents' UTF-8 bytes.
    extra: more keys for the manifest (a part's identity); allow_empty: no train
      document is fine (a part may own none); tokenizer_only: stop after writing the
      tokenizer files (no shards, no manifest).
    Returns (manifest dict, tokenizer). On bad input (PrepareError) this prefix's
    shards are deleted again, so refused ids never leave a shard behind.
    `_fail_after_shards` (tests) raises RuntimeError after that many shard files,
    leaving them, as a killed run would.
    """
    try:
        return _prepare(doc_source, out, prefix, tok, vocab, split_fn, workers, shard_tokens,
                        total_bytes, settings, quiet, chunk_bytes, engine, counter, extra, allow_empty,
                        tokenizer_only, _fail_after_shards)
    except PrepareError:
        clean_partial(out, prefix)
        raise


def _prepare(doc_source, out, prefix, tok, vocab, split_fn, workers, shard_tokens, total_bytes,
             settings, quiet, chunk_bytes, engine, counter, extra, allow_empty, tokenizer_only,
             _fail_after_shards):
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
    own_count = counter is None
    counter = [0] if own_count else counter

    def labeled():
        counter[0] = 0
        for i, text in enumerate(doc_source()):
            v = split_fn(i, text)
            if own_count:
                counter[0] += len(text.encode("utf-8"))
            yield v, text

    t0 = time.time()
    if tok is None:
        prog = Progress(f"{prefix}: training BPE", total_bytes, quiet, counter)

        def train_texts():
            for is_val, text in labeled():
                prog.update(0, 1)
                if not is_val:
                    yield text
        tok = train_bpe(train_texts(), vocab)
        prog.done()
    vocab = vocab_size(tok)
    eot = tok.token_to_id(EOT_TEXT)
    table = token_bytes_table(tok, vocab)
    check_ids([eot], vocab)
    if tokenizer_only:
        write_tokenizer_files(out, prefix, tok, table, eot)
        return None, tok

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
    prog = Progress(f"{prefix}: tokenizing", total_bytes, quiet, counter)
    # closing(): on any error the workers end here and now, not when the generator is collected
    with contextlib.closing(encode_ordered(tok, labeled(), workers, chunk_bytes, engine)) as results:
        for flags, (train, val, top) in results:
            if top >= vocab:
                raise PrepareError(f"token id {top} is outside the vocabulary (size {vocab})")
            writers["train"].add(train)
            writers["val"].add(val)
            n_val = sum(1 for v in flags if v)
            ndocs["val"] += n_val
            ndocs["train"] += len(flags) - n_val
            prog.update(0, len(flags))
    for w in writers.values():
        w.close()
    prog.done()
    if ndocs["train"] == 0 and not allow_empty:
        raise PrepareError("no training documents (empty input, or --val-frac took them all)")

    tok_files = write_tokenizer_files(out, prefix, tok, table, eot)
    manifest = {
        "version": MANIFEST_VERSION, "settings": settings or {}, "vocab_size": vocab, "eot_id": eot,
        "train": writers["train"].shards, "val": writers["val"].shards,
        "train_docs": ndocs["train"], "val_docs": ndocs["val"],
        "train_tokens": writers["train"].tokens, "val_tokens": writers["val"].tokens,
        "tokenizer_files": tok_files, "seconds": round(time.time() - t0, 2),
    }
    manifest.update(extra or {})
    write_atomic(_manifest_path(out, prefix), (json.dumps(manifest, indent=1) + "\n").encode())
    return manifest, tok


# ---------------------------------------------------------------- parts

def parse_part(s):
    """'K/N' -> (K, N), 1 <= K <= N."""
    m = re.fullmatch(r"\s*(\d+)\s*/\s*(\d+)\s*", s)
    if not m:
        raise PrepareError(f"--part wants K/N, e.g. 3/16 for part 3 of 16 (got {s!r})")
    k, n = int(m.group(1)), int(m.group(2))
    if not 1 <= k <= n or n > 9999:
        raise PrepareError(f"--part K/N needs 1 <= K <= N <= 9999 (got {k}/{n})")
    return k, n


def part_prefix(prefix, k, n):
    return f"{prefix}_p{k:04d}of{n:04d}"


def sbatch_line(argv, n, workers):
    """The Slurm array submission that runs every part of this command."""
    rest, skip = [], False
    for a in argv:
        if skip or a in ("--part", "--print-sbatch") or a.startswith("--part="):
            skip = a == "--part"
            continue
        rest.append(a)
    job = shlex.join([sys.executable, sys.argv[0]] + rest) + f" --part $SLURM_ARRAY_TASK_ID/{n}"
    return f"sbatch --array=1-{n} --cpus-per-task={workers} --wrap={shlex.quote(job)}"


def _sha256_file(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 24), b""):
            h.update(block)
    return h.hexdigest()


def _check_shard(out, s, label):
    path = os.path.join(out, s["file"])
    try:
        with open(path, "rb") as f:
            head = f.read(HEADER_BYTES)
        size = os.path.getsize(path)
    except OSError:
        raise PrepareError(f"{label}: {path} is missing: rerun that part")
    if len(head) < 12 or struct.unpack("<3i", head[:12]) != (DATA_MAGIC, DATA_VERSION, s["tokens"]) \
            or size != HEADER_BYTES + 2 * s["tokens"] or _sha256_file(path) != s["sha256"]:
        raise PrepareError(f"{label}: {path} does not match its manifest (size, header or sha256): rerun that part")


def merge_parts(out, prefix):
    """Checks that parts 1..N of `prefix` in `out` are all there, complete and alike, then
    writes PREFIX_tokenizer.{bin,json} and PREFIX_manifest.json (last). -> the manifest."""
    t0 = time.time()
    pat = re.compile(re.escape(prefix) + r"_p(\d{4})of(\d{4})_manifest\.json")
    found = {}
    for name in os.listdir(out) if os.path.isdir(out) else []:
        m = pat.fullmatch(name)
        if m:
            found[int(m.group(1)), int(m.group(2))] = name
    if not found:
        raise PrepareError(f"no part manifests {prefix}_pKKKKofNNNN_manifest.json in {out}: run the parts first")
    ns = sorted({n for _, n in found})
    if len(ns) > 1:
        raise PrepareError(f"{out} holds parts of {' and '.join(map(str, ns))}-part runs of {prefix}: "
                           f"delete the stale run's files")
    n = ns[0]
    stray = [f"{k}/{n}" for k, _ in sorted(found) if not 1 <= k <= n]
    missing = [k for k in range(1, n + 1) if (k, n) not in found]
    if stray:
        raise PrepareError(f"{out} has manifests of parts {', '.join(stray)}, which do not exist: delete them")
    if missing:
        raise PrepareError(f"part{'s' * (len(missing) > 1)} {', '.join(f'{k}/{n}' for k in missing)} missing or "
                           f"unfinished (no {part_prefix(prefix, missing[0], n)}_manifest.json): run "
                           f"{'them' if len(missing) > 1 else 'it'} with --part K/{n}")
    parts = []
    for k in range(1, n + 1):
        try:
            with open(os.path.join(out, found[k, n])) as f:
                parts.append(json.load(f))
        except (OSError, ValueError) as e:
            raise PrepareError(f"{found[k, n]}: unreadable ({e}): rerun part {k}/{n}")
    ref, total = parts[0], None
    tok_sha = None
    for k, m in enumerate(parts, 1):
        label, info = f"part {k}/{n}", m.get("part") or {}
        if (info.get("k"), info.get("n")) != (k, n):
            raise PrepareError(f"{found[k, n]} is the manifest of part {info.get('k')}/{info.get('n')}, not "
                               f"{k}/{n} (a copy?): delete it and rerun part {k}/{n}")
        files = [os.path.join(out, t) for t in m["tokenizer_files"]]
        try:
            sha = [m["settings"].get("tokenizer_sha256"), m["vocab_size"], m["eot_id"]] + \
                  [_sha256_file(p) for p in files]
        except OSError:
            raise PrepareError(f"{label}: its tokenizer files {m['tokenizer_files']} are missing: rerun it")
        tok_sha = tok_sha or sha
        if sha != tok_sha:
            raise PrepareError(f"{label} was made with another tokenizer than part 1/{n}: rerun it with the "
                               f"same --tokenizer")
        diff = sorted(key for key in set(m["settings"]) | set(ref["settings"])
                      if m["settings"].get(key) != ref["settings"].get(key))
        if diff:
            raise PrepareError(f"{label} was made with other settings than part 1/{n} (differ: "
                               f"{', '.join(diff)}): rerun it")
        total = total if total is not None else info.get("input_bytes")
        lo, hi = part_bounds(k, n, total)
        if info.get("bytes") != [lo, total if hi == BIG else hi]:
            raise PrepareError(f"{label} covers bytes {info.get('bytes')}, not [{lo}, {hi}) of {total}: rerun it")
    merged = {"train": [], "val": []}
    seen = set()
    for k, m in enumerate(parts, 1):
        own = part_prefix(prefix, k, n)
        for split in ("train", "val"):
            for s in m[split]:
                if not re.fullmatch(re.escape(f"{own}_{split}_") + r"\d+\.bin", s["file"]) or s["file"] in seen:
                    raise PrepareError(f"part {k}/{n} lists {s['file']}, not one of its own shards: rerun it")
                seen.add(s["file"])
                _check_shard(out, s, f"part {k}/{n}")
                merged[split].append(s)
            if sum(s["tokens"] for s in m[split]) != m[f"{split}_tokens"]:
                raise PrepareError(f"part {k}/{n}: its {split} shards do not add up to {split}_tokens: rerun it")
    counts = {key: sum(m[key] for m in parts) for key in ("train_docs", "val_docs", "train_tokens", "val_tokens")}
    if counts["train_docs"] == 0:
        raise PrepareError("the parts hold no training documents (empty input, or --val-frac took them all)")
    # The merged output is one sequence PREFIX_{train,val}_NNN.bin (hard links to the parts'
    # shards; zero-padded so that name order is part order), so that the glob to train on
    # matches exactly the manifest's shards: no stray part-like file can join it.
    part_files = sorted(seen) + [found[key] for key in found] + [t for m in parts for t in m["tokenizer_files"]]
    refuse_overwriting_inputs(out, [_output_re(prefix)], [os.path.join(out, f) for f in part_files])
    globs = {split: f"{prefix}_{split}_*.bin" for split in merged}
    foreign = sorted(g for split in merged for g in glob.glob(os.path.join(glob.escape(out), globs[split]))
                     if not _shard_re(prefix).fullmatch(os.path.basename(g)))
    if foreign:
        raise PrepareError(f"{foreign[0]} is not a shard of {prefix} but matches {globs['train']} or "
                           f"{globs['val']}, the globs to train on: move it, or merge under another --prefix")
    for name in _own_names(out, _shard_re(prefix)):  # this prefix's earlier output (as a single run does)
        os.remove(os.path.join(out, name))
    copied = 0
    for split, shards in merged.items():
        width = max(3, len(str(len(shards) - 1)))
        for i, s in enumerate(shards):
            name = f"{prefix}_{split}_{i:0{width}d}.bin"
            copied += _link_or_copy(os.path.join(out, s["file"]), os.path.join(out, name))
            shards[i] = {"file": name, "tokens": s["tokens"], "sha256": s["sha256"], "part_file": s["file"]}
    for split, shards in merged.items():
        got = sorted(os.path.basename(g) for g in glob.glob(os.path.join(glob.escape(out), globs[split])))
        if got != [s["file"] for s in shards]:
            raise PrepareError(f"{globs[split]} in {out} does not match exactly the merged {split} shards (another "
                               f"process writing there?): merge again")
    tok_files = [f"{prefix}_tokenizer.bin", f"{prefix}_tokenizer.json"]
    given = ref["settings"].get("tokenizer_sha256")
    for src, dst in zip(ref["tokenizer_files"], tok_files):
        dst = os.path.join(out, dst)
        if dst.endswith(".json") and os.path.isfile(dst) and _sha256_file(dst) == given:
            continue  # the --tokenizer the parts were given (made by --tokenizer-only): it stays
        with open(os.path.join(out, src), "rb") as f:
            write_if_changed(dst, f.read())
    manifest = {"version": MANIFEST_VERSION, "settings": ref["settings"], "vocab_size": ref["vocab_size"],
                "eot_id": ref["eot_id"], "train": merged["train"], "val": merged["val"], **counts,
                "tokenizer_files": tok_files, "seconds": round(sum(m["seconds"] for m in parts), 2),
                "parts": n, "copied": copied, "merge_seconds": round(time.time() - t0, 2)}
    write_atomic(_manifest_path(out, prefix), (json.dumps(manifest, indent=1) + "\n").encode())
    return manifest


def _link_or_copy(src, dst):
    """dst as a hard link to src (no space used), or a copy where the filesystem has no hard
    links. -> 1 if it copied."""
    try:
        os.link(src, dst)
        return 0
    except OSError:
        pass
    with open(src, "rb") as f, open(dst + ".tmp", "wb") as g:
        for block in iter(lambda: f.read(1 << 24), b""):
            g.write(block)
    os.replace(dst + ".tmp", dst)
    return 1


# ---------------------------------------------------------------- command line

def _file_settings(args, paths):
    st = [(p, os.path.getsize(p), os.path.getmtime(p)) for p in paths]
    tok_sha = None
    if args.tokenizer:
        with open(args.tokenizer, "rb") as f:
            tok_sha = hashlib.sha256(f.read()).hexdigest()
    s = {"inputs": st, "field": args.field, "docs": args.docs, "val_frac": args.val_frac,
         "shard_tokens": args.shard_tokens, "train_bpe": args.train_bpe, "tokenizer_sha256": tok_sha}
    if args.format != "auto":  # (only then, so that older manifests still match)
        s["format"] = args.format
    return s


def _summary(m):
    return (f"train {m['train_tokens']:,} tokens ({m['train_docs']:,} docs, {len(m['train'])} shards), "
            f"val {m['val_tokens']:,} tokens ({m['val_docs']:,} docs, {len(m['val'])} shards), "
            f"vocab {m['vocab_size']} (EOT id {m['eot_id']})")


def main(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0].strip(), epilog=__doc__.split("\n\n", 2)[2],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("inputs", nargs="*", help="files or globs (.jsonl, .parquet, text)")
    ap.add_argument("--out", required=True, help="output directory")
    ap.add_argument("--prefix", default="data", help="output file prefix (default data)")
    g = ap.add_mutually_exclusive_group()
    g.add_argument("--train-bpe", type=int, metavar="VOCAB", help="train a byte-level BPE of VOCAB ids (incl. EOT)")
    g.add_argument("--tokenizer", metavar="JSON", help="use this tokenizer.json (must have <|endoftext|>)")
    ap.add_argument("--field", default="text", help="JSON field / parquet column (default text)")
    ap.add_argument("--docs", choices=["file", "lines", "blank"], default="file",
                    help="text files: one document per file, per line, or per blank-line paragraph")
    ap.add_argument("--format", choices=["auto", "jsonl", "parquet", "text"], default="auto",
                    help="input format (default auto: by extension: .jsonl, .parquet, else text)")
    ap.add_argument("--val-frac", type=float, default=0.05, help="fraction of documents for val (by hash)")
    ap.add_argument("--shard-tokens", type=int, default=100_000_000, help="tokens per shard")
    ncpu = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1
    ap.add_argument("--workers", type=int, default=0,
                    help=f"tokenization processes (default 0: one per usable CPU, {ncpu} here)")
    ap.add_argument("--engine", choices=["fast", "hf"], default="fast",
                    help="fast: regex + word cache, encode_batch where unsure; hf: encode_batch only (same output)")
    ap.add_argument("--chunk-bytes", type=int, default=CHUNK_BYTES,
                    help="text per tokenization task (tuning; the output does not depend on it)")
    ap.add_argument("--part", metavar="K/N", help="do only part K of N (byte ranges of the inputs; see below)")
    ap.add_argument("--print-sbatch", action="store_true", help="with --part: print the Slurm array line, exit")
    ap.add_argument("--merge", action="store_true", help="check parts 1..N of --prefix in --out, write the manifest")
    ap.add_argument("--tokenizer-only", action="store_true",
                    help="with --train-bpe: write only PREFIX_tokenizer.{bin,json} (to give parts --tokenizer)")
    ap.add_argument("--force", action="store_true", help="rebuild even if the manifest matches")
    ap.add_argument("--quiet", action="store_true", help="no progress line")
    args = ap.parse_args(argv)
    # parallelism is --workers (processes), not the Rust thread pool; this also keeps
    # tokenizers quiet about forking after it has been used
    os.environ.setdefault("RAYON_NUM_THREADS", "1")
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    try:
        if args.merge:
            if args.inputs or args.tokenizer or args.train_bpe or args.part or args.tokenizer_only:
                raise PrepareError("--merge takes only --out and --prefix (the parts' manifests say the rest)")
            m = merge_parts(args.out, args.prefix)
            how = f"{m['copied']} shards copied (no hard links here)" if m["copied"] else "hard links"
            train = shlex.quote(os.path.join(args.out, f"{args.prefix}_train_*.bin"))
            val = shlex.quote(os.path.join(args.out, f"{args.prefix}_val_*.bin"))
            print(f"prepare.py: merged {m['parts']} parts into {args.out}/{args.prefix}_manifest.json: {_summary(m)}; "
                  f"its shards are {args.prefix}_{{train,val}}_NNN.bin ({how} to the shards of the parts)")
            print(f"prepare.py: train on -i {train}" + (f" -j {val}" if m["val"] else ""))
            return 0
        return _run(args, argv, ncpu)
    except PrepareError as e:
        print(f"prepare.py: error: {e}", file=sys.stderr)
        return 1
    except OSError as e:  # a full disk, a read-only --out...: the run wrote no manifest
        print(f"prepare.py: error: {e.strerror or e} ({e.filename or 'writing the output'}): fix that and "
              f"rerun (this run wrote no manifest, so the rerun starts over)", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print("prepare.py: interrupted: this run wrote no manifest, so a rerun starts its prefix over",
              file=sys.stderr)
        return 130


def _run(args, argv, ncpu):
    if not args.inputs:
        raise PrepareError("no input files given")
    if not args.train_bpe and not args.tokenizer:
        raise PrepareError("give --train-bpe VOCAB or --tokenizer FILE")
    part = parse_part(args.part) if args.part else None
    if part and args.train_bpe:
        raise PrepareError("--part needs --tokenizer: a BPE trained in each part would differ between parts; "
                           "train one first (--train-bpe V --tokenizer-only) and pass its .json")
    if args.print_sbatch and not part:
        raise PrepareError("--print-sbatch goes with --part K/N")
    if args.tokenizer_only and (part or not args.train_bpe):
        raise PrepareError("--tokenizer-only needs --train-bpe and no --part")
    if args.workers < 0 or args.chunk_bytes < 1:
        raise PrepareError("--workers must be >= 0 and --chunk-bytes >= 1")
    workers = args.workers or ncpu
    try:
        import tokenizers  # noqa: F401
    except ImportError:
        raise PrepareError("Python package `tokenizers` is missing; run `bash dev/install.sh` and use /usr/bin/python3")
    paths = expand_inputs(args.inputs)
    if args.tokenizer and not os.path.isfile(args.tokenizer):
        raise PrepareError(f"no such tokenizer file: {args.tokenizer}")
    sizes = input_sizes(paths)
    prefix, extra, total = args.prefix, None, sum(sizes) if sizes else None
    if part:
        if sizes is None:
            raise PrepareError("--part needs regular files (their sizes cut the parts), not pipes")
        k, n = part
        prefix = part_prefix(args.prefix, k, n)
        lo, hi = part_bounds(k, n, total)
        hi = total if hi == BIG else hi
        extra = {"part": {"k": k, "n": n, "bytes": [lo, hi], "input_bytes": total}}
        print(f"prepare.py: part {k}/{n}: bytes [{lo:,}, {hi:,}) of {total:,}. All parts as a Slurm array, then "
              f"the merge:\n  {sbatch_line(argv, n, workers)}\n  {sys.executable} {sys.argv[0]} --merge "
              f"--out {shlex.quote(args.out)} --prefix {shlex.quote(args.prefix)}", flush=True)
        if args.print_sbatch:
            return 0
        total = hi - lo
    settings = _file_settings(args, paths)
    settings["inputs"] = [list(x) for x in settings["inputs"]]
    if not args.force and not args.tokenizer_only and is_done(args.out, prefix, settings):
        print(f"prepare.py: {args.out}/{prefix}_* is up to date (manifest matches); --force rebuilds")
        return 0
    tok = load_tokenizer(args.tokenizer) if args.tokenizer else None
    if tok is not None:
        vocab_size(tok)  # refuse a too-large vocabulary before reading the corpus
    rxs = [_output_re(prefix)] + ([_output_re(args.prefix, tokenizer=False)] if part else [])
    refuse_overwriting_inputs(args.out, rxs, paths, args.tokenizer, f"{prefix}_tokenizer.json",
                              tok.to_str(pretty=True).encode("utf-8") if tok is not None else None)
    if part:  # the merged output would now be stale
        try:
            os.remove(_manifest_path(args.out, args.prefix))
        except FileNotFoundError:
            pass
        for n in _own_names(args.out, _shard_re(args.prefix)):
            os.remove(os.path.join(args.out, n))
    counter = [0]
    m, _ = prepare(lambda: iter_documents(paths, args.field, args.docs, args.format, part, counter),
                   args.out, prefix, tok=tok, vocab=args.train_bpe, split_fn=hash_split(args.val_frac),
                   workers=workers, shard_tokens=args.shard_tokens, total_bytes=total, settings=settings,
                   quiet=args.quiet, chunk_bytes=args.chunk_bytes, engine=args.engine, counter=counter,
                   extra=extra, allow_empty=part is not None, tokenizer_only=args.tokenizer_only)
    if args.tokenizer_only:
        print(f"prepare.py: wrote {args.out}/{prefix}_tokenizer.{{bin,json}}; give the parts "
              f"--tokenizer {args.out}/{prefix}_tokenizer.json")
        return 0
    print(f"prepare.py: wrote {args.out}: {_summary(m)}, {m['seconds']}s")
    if part:
        print(f"prepare.py: part {part[0]}/{part[1]} done; when all are: {sys.executable} {sys.argv[0]} --merge "
              f"--out {shlex.quote(args.out)} --prefix {shlex.quote(args.prefix)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
