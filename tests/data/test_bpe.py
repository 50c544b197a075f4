r"""
Tests llmc/host/bpe.h, the C encoder behind the trainer's -prompt-text, against the `tokenizers`
library: every expected id comes from tokenizers.Tokenizer.from_file(json).encode(text).ids.

  * a few thousand deterministic texts (KJV verses; runs of ASCII letters, digits, punctuation and
    white space (tabs, newlines, runs of spaces, trailing spaces); contractions; <|endoftext|> and
    other added tokens inside text; Unicode: accented Latin, Greek, Cyrillic, CJK, emoji with ZWJ,
    combining marks, digits of other scripts, Unicode spaces, Lm/Lo/Nl/No; random code points)
    through 6 tokenizer.json files: the KJV one (merges as ["a", "b"] pairs), a second BPE trained
    here (another vocab size, more added tokens), that one with its merges as "a b" strings, with
    add_prefix_space, with ignore_merges and laid out as GPT-2's own; the C ids must equal
    tokenizers' ids exactly;
  * the regex classes of all 1,114,112 code points (the tables of llmc/host/unicode_ranges.h)
    against \p{L}, \p{N} and \s of tokenizers' own regex engine;
  * invalid UTF-8 (which no Python str can hold) is refused, not encoded;
  * what the encoder does not implement, and broken JSON, is refused with one line;
  * the .json/.bin pair check (bpe_check_decoder): a pair passes, a mismatch is refused;
  * ./train_gpt -prompt-text TEXT samples what -prompt with tokenizers' ids for TEXT samples.

    ~/.cache/llmc/hf-venv/bin/python tests/data/test_bpe.py      (last line: "N passed, M failed")
"""
import json
import os
import random
import re
import shutil
import struct
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.join(ROOT, "tests"))
sys.path.insert(0, os.path.join(ROOT, "dev", "data"))
from checks import check, counts, summary  # noqa: E402
import prepare as prep  # noqa: E402  (only to write a second llm.c .bin, as prepare.py does)

import tokenizers  # noqa: E402
from tokenizers import AddedToken, Regex, Tokenizer, decoders, models, pre_tokenizers, trainers  # noqa: E402

KJV = os.path.join(ROOT, "dev", "data", "kjv")
EOT = "<|endoftext|>"


def build(tmp):
    exe = os.path.join(tmp, "bpe_check")
    cc = os.environ.get("CC", "cc")
    flags = ["-std=c11", "-O1", "-g", "-Wall", "-Wextra", "-Werror", "-pedantic"]
    san = ["-fsanitize=address,undefined", "-fno-sanitize-recover=all", "-fno-omit-frame-pointer"]
    probe = subprocess.run([cc, "-x", "c", *san, "-o", os.path.join(tmp, "probe"), "-"],
                           input=b"int main(void){return 0;}", capture_output=True)
    if probe.returncode == 0:
        flags += san
    r = subprocess.run([cc, *flags, "-o", exe, os.path.join(HERE, "bpe_check.c")], capture_output=True, text=True)
    check(r.returncode == 0, "bpe_check.c builds with -Wall -Wextra -Werror -pedantic" +
          (" and ASan+UBSan" if probe.returncode == 0 else "") + (": " + r.stderr[:2000] if r.returncode else ""))
    if shutil.which("c++"):  # the header is included from .cu files: it must stay valid C++
        r = subprocess.run(["c++", "-std=c++17", "-Wall", "-Wextra", "-Werror", "-fsyntax-only", "-I", ROOT,
                            "-x", "c++", "-"], input='#include "llmc/host/bpe.h"\n', capture_output=True, text=True)
        check(r.returncode == 0, "llmc/host/bpe.h compiles as C++" + (": " + r.stderr[:2000] if r.returncode else ""))
    return exe


def run(exe, *args):
    env = dict(os.environ, ASAN_OPTIONS="detect_leaks=1", UBSAN_OPTIONS="halt_on_error=1")
    return subprocess.run([exe, *args], capture_output=True, text=True, env=env)


# ---------------------------------------------------------------- texts

def kjv_lines(n):
    """Verses of the validation shard, decoded with the KJV tokenizer (its text, not expected ids)."""
    tok = Tokenizer.from_file(os.path.join(KJV, "kjv_tokenizer.json"))
    data = open(os.path.join(KJV, "kjv_val_000.bin"), "rb").read()
    ntok = struct.unpack("<256i", data[:1024])[2]
    ids = struct.unpack("<%dH" % ntok, data[1024:1024 + 2 * ntok])
    eot = tok.token_to_id(EOT)
    docs, cur = [], []
    for i in ids:
        if i == eot:
            if cur:
                docs.append(tok.decode(cur))
            cur = []
        else:
            cur.append(i)
    lines = [ln for d in docs for ln in d.split("\n") if ln.strip()]
    return lines[:n]


LATIN = "àáâãäåæçèéêëìíîïñòóôõöøùúûüýÿĀāĂăĄąĆćČčĎďĐđĒēĖėĘęĚěĞğĪīıŁłŃńŇňŐőŒœŘřŚśŠšŤťŪūŮůŰűŸŹźŻżŽžßÆØÅÉ"
GREEK = "ΑΒΓΔΕΖΗΘΙΚΛΜΝΞΟΠΡΣΤΥΦΧΨΩαβγδεζηθικλμνξοπρστυφχψωάέήίόύώϊϋΐΰ"
CYRILLIC = "АБВГДЕЁЖЗИЙКЛМНОПРСТУФХЦЧШЩЪЫЬЭЮЯабвгдеёжзийклмнопрстуфхцчшщъыьэюяіїєґ"
CJK = "日本語中文字漢字天地人山川水火木金土月日年時間東京北京上海你好世界こんにちはカタカナひらがな한국어조선말"
EMOJI = ["😀", "🎉", "👍🏽", "❤️", "👨‍👩‍👧‍👦", "🏳️‍🌈", "🇺🇸", "🧑‍💻", "✨", "🙏", "👩🏿‍🚀", "☺", "©", "™"]
COMBINING = "\u0301\u0300\u0308\u0327\u0303\u20dd\u0336\u05b7\u093f\u0e31"  # Mn, Me, Mc
DIGITS = "0123456789٠١٢٣٤٥٦٧٨٩۰۱۲۳۴۵۶۷۸۹०१२३४५६७८९０１２３４５６７８９"  # Nd of other scripts
SPACES = ["\u00a0", "\u1680", "\u2000", "\u2003", "\u2007", "\u2009", "\u200a", "\u2028", "\u2029", "\u202f",
          "\u205f", "\u3000", "\u0085", "\u000b", "\u000c", "\u001c", "\u001d", "\u001e", "\u001f", "\u180e",
          "\u200b", "\ufeff", "\r\n", "\t", "\n", " ", "  "]
LM_LO_NL_NO = "ʰʲˠˤᴬᵃᵇⁱⁿ々ゝーאבגדהوهيกขคงจ" + "ⅠⅡⅢⅣⅫⅰⅱↂ〇〡〢" + "²³¹¼½¾⁰⁴₁₂①②③⑴⒈⓵➀"
PUNCT = "!\"#$%&'()*+,-./:;<=>?@[\\]^_`{|}~"
ASCII_WS = [" ", "  ", "   ", "\t", "\n", "\n\n", " \n", "\r\n", "\t ", " \t", "\x0b", "\x0c"]
CONTRACTIONS = ["'s", "'t", "'re", "'ve", "'m", "'ll", "'d", "'S", "'T", "'RE", "'Ll", "'D", "''", "'", "’s"]
ADDED = [EOT, "<|pad|>", "<|end", "Amen.", " the LORD", "and", "<|endoftext|", "<|endoftext|>>", "<<|endoftext|>"]


def random_code_point(rng):
    while True:
        cp = rng.choice([rng.randrange(0x80), rng.randrange(0x800), rng.randrange(0x10000),
                         rng.randrange(0x110000)])
        if not 0xD800 <= cp <= 0xDFFF:
            return chr(cp)


def texts():
    rng = random.Random(20240601)
    out = kjv_lines(1000)
    words = [w for ln in out[:300] for w in ln.split()]
    for _ in range(800):  # ASCII: letters, digits, punctuation, runs of white space
        parts = []
        for _ in range(rng.randrange(1, 12)):
            k = rng.randrange(6)
            if k == 0:
                parts.append(rng.choice(words))
            elif k == 1:
                parts.append("".join(rng.choice("0123456789") for _ in range(rng.randrange(1, 7))))
            elif k == 2:
                parts.append("".join(rng.choice(PUNCT) for _ in range(rng.randrange(1, 4))))
            elif k == 3:
                parts.append(rng.choice(ASCII_WS))
            elif k == 4:
                parts.append("".join(rng.choice("abcXYZ") for _ in range(rng.randrange(1, 5))))
            else:
                parts.append(rng.choice(CONTRACTIONS))
        out.append("".join(parts))
    for _ in range(200):  # contractions after words, letters, spaces, quotes
        out.append("".join(rng.choice([rng.choice(words), rng.choice(CONTRACTIONS), " ", "'", "x", "s", "ll"])
                           for _ in range(rng.randrange(1, 8))))
    for _ in range(250):  # added tokens inside text, next to each other, cut short
        out.append("".join(rng.choice([rng.choice(ADDED), rng.choice(words), " ", "\n", "<", "|", ">", "Amen"])
                           for _ in range(rng.randrange(1, 9))))
    pools = [LATIN, GREEK, CYRILLIC, CJK, COMBINING, DIGITS, LM_LO_NL_NO, PUNCT]
    for _ in range(900):  # Unicode runs with spaces of every kind between them
        parts = []
        for _ in range(rng.randrange(1, 10)):
            k = rng.randrange(len(pools) + 3)
            if k < len(pools):
                parts.append("".join(rng.choice(pools[k]) for _ in range(rng.randrange(1, 6))))
            elif k == len(pools):
                parts.append(rng.choice(EMOJI))
            elif k == len(pools) + 1:
                parts.append(rng.choice(SPACES))
            else:
                parts.append(rng.choice(words))
        out.append("".join(parts))
    for _ in range(200):  # any code point (NUL and controls included)
        out.append("".join(random_code_point(rng) for _ in range(rng.randrange(1, 16))))
    out += ["", " ", "  ", "\n", "a", "'", "'s", " 's", "s'", EOT, EOT + EOT, " " + EOT + " ", "x  ", "x \n",
            "And God said", "Hello  world", "a\u00a0b", "1\u00a0\u00a02", "\u3000\u3000a", "a \u0301",
            "\x00", "a\x00b", "\U0010ffff", "\ufffd", "x" * 3000, " " * 100 + "y", "'" * 7 + "sss"]
    return out


# ---------------------------------------------------------------- tokenizers

def train_small(lines, path):
    """A second byte-level BPE, trained here: 700 ids and more added tokens than the KJV one."""
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=700, show_progress=False,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), special_tokens=[])
    tok.train_from_iterator(lines, trainer=trainer)
    tok.add_special_tokens([EOT, "<|pad|>"])
    # normalized=False tokens are cut first, the others in between; "and" is in the vocab (its id)
    tok.add_tokens([AddedToken("<|end", normalized=False), AddedToken("Amen.", normalized=True),
                    AddedToken(" the LORD", normalized=True), AddedToken("and", normalized=True)])
    tok.save(path)


def variants(tmp, small):
    """The second tokenizer with its merges in the other format, with add_prefix_space, with ignore_merges."""
    d = json.load(open(small, encoding="utf-8"))
    out = {}
    merges = d["model"]["merges"]
    legacy = json.loads(json.dumps(d))
    if merges and isinstance(merges[0], list):
        legacy["model"]["merges"] = ["#version: 0.2"] + [a + " " + b for a, b in merges]
        out["small-merges-as-strings"] = legacy
    else:
        legacy["model"]["merges"] = [a.split(" ") for a in merges if not a.startswith("#version")]
        out["small-merges-as-pairs"] = legacy
    prefix = json.loads(json.dumps(d))
    prefix["pre_tokenizer"]["add_prefix_space"] = True
    out["small-add-prefix-space"] = prefix
    ignore = json.loads(json.dumps(d))
    ignore["model"]["ignore_merges"] = True
    out["small-ignore-merges"] = ignore
    # laid out as GPT-2's own tokenizer.json: "a b" merges, "" affixes, a ByteLevel post-processor,
    # <|endoftext|> in the model's vocab too (normalized)
    gpt2 = json.loads(json.dumps(legacy if isinstance(legacy["model"]["merges"][-1], str) else d))
    gpt2["model"].update(continuing_subword_prefix="", end_of_word_suffix="")
    gpt2["post_processor"] = {"type": "ByteLevel", "add_prefix_space": True, "trim_offsets": False, "use_regex": True}
    eot = next(t for t in gpt2["added_tokens"] if t["content"] == EOT)
    gpt2["model"]["vocab"][EOT] = eot["id"]
    eot["normalized"] = True
    out["small-gpt2-layout"] = gpt2
    paths = {}
    for name, dd in out.items():
        paths[name] = os.path.join(tmp, name + ".json")
        with open(paths[name], "w", encoding="utf-8") as f:
            json.dump(dd, f, ensure_ascii=(name == "small-add-prefix-space"))  # \u escapes in one of them
    return paths


def compare_encodings(exe, tmp, name, path, strings):
    tok = Tokenizer.from_file(path)
    want = [e.ids for e in tok.encode_batch(strings)]
    sfile = os.path.join(tmp, "strings.hex")
    with open(sfile, "w") as f:
        for s in strings:
            f.write(s.encode("utf-8").hex() + "\n")
    r = run(exe, "encode", path, sfile)
    got = r.stdout.split("\n")[:-1]
    if r.returncode != 0 or len(got) != len(strings):
        check(False, f"{name}: bpe_check encode ran (exit {r.returncode}, {len(got)} lines): {r.stderr[:1500]}")
        return
    bad = 0
    for s, w, g in zip(strings, want, got):
        if g == " ".join(map(str, w)):
            counts["passed"] += 1
            continue
        counts["failed"] += 1
        bad += 1
        if bad <= 10:
            print(f"FAIL  {name}: {s[:80]!r}\n        tokenizers {w[:40]}\n        bpe.h      {g[:200]}", flush=True)
    print(f"{'ok   ' if bad == 0 else 'FAIL '} {name}: {len(strings) - bad} of {len(strings)} texts encode to "
          f"tokenizers' ids", flush=True)


# ---------------------------------------------------------------- the classes of every code point

def tokenizers_classes():
    r"""L, N, S or O for every code point, from tokenizers' own regex engine: tokenizers.Regex is
    the Oniguruma build its ByteLevel pre-tokenizer runs GPT-2's regex on, so \p{L}, \p{N} and \s
    here are the classes there. Each pattern's runs over a string of consecutive code points mark
    them; surrogates (no str holds them) stay O."""
    out = bytearray(b"O" * 0x110000)
    splits = [(ord(c), pre_tokenizers.Split(Regex(p), behavior="removed", invert=True))
              for c, p in (("L", r"\p{L}+"), ("N", r"\p{N}+"), ("S", r"\s+"))]
    step = 1 << 13
    for lo in range(0, 0x110000, step):
        cps = [cp for cp in range(lo, lo + step) if not 0xD800 <= cp <= 0xDFFF]
        text = "".join(map(chr, cps))
        for mark, split in splits:
            for _, (a, b) in split.pre_tokenize_str(text):
                for k in range(a, b):
                    out[cps[k]] = mark
    return out.decode()


def main():
    if not os.path.exists(os.path.join(KJV, "kjv_tokenizer.json")):
        check(False, f"{KJV}/kjv_tokenizer.json exists (run `make data`)")
        return summary()
    tmp = tempfile.mkdtemp(prefix="test_bpe.")
    try:
        exe = build(tmp)
        if counts["failed"]:
            return summary()
        strings = texts()
        small = os.path.join(tmp, "small.json")
        train_small([s for s in strings if s], small)
        files = {"kjv": os.path.join(KJV, "kjv_tokenizer.json"), "small": small}
        files.update(variants(tmp, small))
        fmt = {n: type(json.load(open(p, encoding="utf-8"))["model"]["merges"][0]).__name__ for n, p in files.items()}
        check(set(fmt.values()) == {"list", "str"}, f"both merge formats are covered: {fmt}")
        for name, path in files.items():
            compare_encodings(exe, tmp, name, path, strings)

        r = run(exe, "classes")
        mine = r.stdout.rstrip("\n")
        theirs = tokenizers_classes()
        diff = [cp for cp in range(0x110000) if cp >= len(mine) or mine[cp] != theirs[cp]]
        check(r.returncode == 0 and not diff,
              f"the regex class of all {len(theirs)} code points matches tokenizers' Oniguruma"
              + (f": {len(diff)} differ, first {[hex(c) for c in diff[:8]]} (tokenizers {tokenizers.__version__}; "
                 f"regenerate llmc/host/unicode_ranges.h for its Unicode version)" if diff else ""))

        # invalid UTF-8: refused (and indeed not text: Python's strict decoder refuses each too)
        bad = [b"\x80", b"a\xc0\x80", b"\xed\xa0\x80", b"\xf4\x90\x80\x80", b"\xe2\x82", b"abc\xff", b"\xf8\x88\x80\x80\x80",
               b"ok " + EOT.encode() + b"\xc3"]
        sfile = os.path.join(tmp, "bad.hex")
        with open(sfile, "w") as f:
            f.write("".join(b.hex() + "\n" for b in bad))
        r = run(exe, "encode", files["kjv"], sfile)
        lines = r.stdout.split("\n")[:-1]
        for b, ln in zip(bad, lines):
            try:
                b.decode("utf-8")
                python_refuses = False
            except UnicodeDecodeError:
                python_refuses = True
            check(python_refuses and ln.startswith("ERR ") and "not valid UTF-8" in ln,
                  f"invalid UTF-8 {b!r} is refused: {ln[:100]}")
        check(r.returncode == 0 and len(lines) == len(bad), "bpe_check survives the invalid texts")

        refusals(exe, tmp, small)
        pairs(exe, tmp, small)
        trainer()
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return summary()


# ---------------------------------------------------------------- refusals

def refusals(exe, tmp, small):
    base = json.load(open(small, encoding="utf-8"))

    def edit(fn):
        d = json.loads(json.dumps(base))
        fn(d)
        return json.dumps(d)

    def setm(key, value):
        return lambda d: d["model"].__setitem__(key, value)

    first_merge = base["model"]["merges"][0]
    cases = [
        ("model WordPiece", edit(setm("type", "WordPiece")), "model type WordPiece is not supported"),
        ("model without a type", edit(lambda d: d["model"].pop("type")), "model type \\? is not supported"),
        ("dropout 0.1", edit(setm("dropout", 0.1)), "model.dropout is set"),
        ("byte_fallback", edit(setm("byte_fallback", True)), "model.byte_fallback is set"),
        ("unk_token", edit(setm("unk_token", "<|pad|>")), "model.unk_token is set"),
        ("continuing_subword_prefix", edit(setm("continuing_subword_prefix", "##")), "continuing_subword_prefix"),
        ("end_of_word_suffix", edit(setm("end_of_word_suffix", "</w>")), "end_of_word_suffix"),
        ("normalizer NFC", edit(lambda d: d.__setitem__("normalizer", {"type": "NFC"})), "normalizer NFC"),
        ("pre_tokenizer Sequence", edit(lambda d: d.__setitem__("pre_tokenizer", {"type": "Sequence",
                                                                                 "pretokenizers": []})),
         "pre_tokenizer Sequence is not supported"),
        ("pre_tokenizer null", edit(lambda d: d.__setitem__("pre_tokenizer", None)), "pre_tokenizer null"),
        ("use_regex false", edit(lambda d: d["pre_tokenizer"].__setitem__("use_regex", False)), "use_regex is false"),
        ("post_processor template", edit(lambda d: d.__setitem__("post_processor", {"type": "TemplateProcessing"})),
         "post_processor TemplateProcessing"),
        ("truncation", edit(lambda d: d.__setitem__("truncation", {"max_length": 4})), "truncation is set"),
        ("lstrip added token", edit(lambda d: d["added_tokens"][0].__setitem__("lstrip", True)), "added_tokens\\[\\]\\.lstrip is set"),
        ("added token with a wrong id", edit(lambda d: d["added_tokens"][0].__setitem__("id", 5)),
         "tokenizers gives it"),
        ("a merge of unknown tokens", edit(lambda d: d["model"]["merges"].append(["Zq", "qZ"])), "not in model.vocab"),
        ("a merge of three tokens", edit(lambda d: d["model"].__setitem__("merges", ["a b c"])), "one space"),
        ("mixed merge formats", edit(lambda d: d["model"]["merges"].append(" ".join(first_merge)
                                                                           if isinstance(first_merge, list)
                                                                           else first_merge.split(" "))),
         "mixes"),
        ("sparse vocab ids", edit(lambda d: d["model"]["vocab"].__setitem__("Zq", 100000)), "0..size-1"),
        ("version 2.0", edit(lambda d: d.__setitem__("version", "2.0")), "version"),
        ("truncated file", json.dumps(base)[:len(json.dumps(base)) // 2], "invalid JSON at byte"),
        ("truncated after a member", json.dumps(base)[:json.dumps(base).index('"model"')], "unexpected end"),
        ("trailing comma", json.dumps(base)[:-1] + ",}", "member name"),
        ("nested 100 deep", "[" * 100 + "]" * 100, "deeper than 64"),
        ("lone surrogate", json.dumps(base).replace('"version"', '"v\\ud800ersion"', 1), "surrogate"),
        ("a raw control character", json.dumps(base).replace('"1.0"', '"1\t0"', 1), "control character"),
        ("a duplicate member", '{"version": "1.0", "version": "1.0"}', "twice"),
        ("not an object", "[]", "not a JSON object"),
        ("empty file", "", "unexpected end"),
        ("invalid UTF-8 inside", json.dumps(base).replace('"1.0"', '"1.\udcff0"', 1), "invalid UTF-8"),
        ("nothing after the document", json.dumps(base) + " x", "more after the end"),
    ]
    for name, text, pat in cases:
        p = os.path.join(tmp, "bad.json")
        with open(p, "wb") as f:
            f.write(text.encode("utf-8", "surrogateescape"))
        r = run(exe, "load", p)
        out = r.stdout.strip()
        check(r.returncode == 0 and out.startswith("ERR tokenizer json ") and re.search(pat, out) is not None
              and "\n" not in out, f"refused, one line: {name}: {out[:150]}")
    r = run(exe, "load", os.path.join(tmp, "missing.json"))
    check(r.stdout.startswith("ERR cannot open tokenizer json"), f"a missing file: {r.stdout.strip()[:120]}")


# ---------------------------------------------------------------- the .json/.bin pair

def pairs(exe, tmp, small):
    tok = Tokenizer.from_file(small)
    vocab = prep.vocab_size(tok)
    table = prep.token_bytes_table(tok, vocab)
    small_bin = os.path.join(tmp, "small.bin")
    with open(small_bin, "wb") as f:
        f.write(prep.tokenizer_bin_bytes(table, tok.token_to_id(EOT)))
    kjv_json, kjv_bin = os.path.join(KJV, "kjv_tokenizer.json"), os.path.join(KJV, "kjv_tokenizer.bin")
    for js, bn, ok in [(kjv_json, kjv_bin, True), (small, small_bin, True), (kjv_json, small_bin, False),
                       (small, kjv_bin, False)]:
        r = run(exe, "load", js, bn)
        good = r.stdout.strip() == "ok" if ok else ("not a pair" in r.stdout)
        check(r.returncode == 0 and good, f"pair {os.path.basename(js)} + {os.path.basename(bn)}: "
              f"{'accepted' if ok else 'refused'}: {r.stdout.strip()[:120]}")
    bent = bytearray(open(kjv_bin, "rb").read())
    bent[1024 + 2 * 20 + 1] ^= 1  # token 20's one byte (ids 0..255 are single bytes, 2 bytes each in the file)
    p = os.path.join(tmp, "bent.bin")
    open(p, "wb").write(bent)
    r = run(exe, "load", kjv_json, p)
    check("disagree on token" in r.stdout, f"a .bin with one token changed is refused: {r.stdout.strip()[:120]}")
    bent = bytearray(open(kjv_bin, "rb").read())
    bent[12:16] = struct.pack("<I", 7)  # another <|endoftext|> id
    open(p, "wb").write(bent)
    r = run(exe, "load", kjv_json, p)
    check("<|endoftext|>" in r.stdout, f"a .bin with another <|endoftext|> is refused: {r.stdout.strip()[:120]}")


# ---------------------------------------------------------------- the trainer

def trainer():
    """./train_gpt -prompt-text TEXT samples exactly what -prompt IDS does with tokenizers' ids."""
    exe = os.path.join(ROOT, "train_gpt")
    if not os.path.exists(exe):
        check(False, "./train_gpt is built (make train_gpt)")
        return
    tok = Tokenizer.from_file(os.path.join(KJV, "kjv_tokenizer.json"))
    base = [exe, "-seq", "32", "-V", "8192", "-gb", "4", "-ramp", "off", "-threads", "1", "-steps", "0", "-j", "",
            "-tokenizer", os.path.join(KJV, "kjv_tokenizer.bin"), "-sample-len", "12"]

    def sample(*extra):
        r = subprocess.run(base + list(extra), capture_output=True, text=True)
        return r.returncode, [ln for ln in r.stdout.split("\n") if ln.startswith("sample: ")], r.stderr.strip()

    first = None
    for text in ["And God said", "In the beginning,\tthe LORD's  word<|endoftext|>Amen", "Ünïcödé 日本 ½\u00a0x"]:
        ids = tok.encode(text).ids
        a = sample("-prompt-text", text)
        b = sample("-prompt", ",".join(map(str, ids)))
        first = first or a
        check(a[0] == 0 and len(a[1]) == 1 and a == b,
              f"train_gpt -prompt-text {text!r} samples as -prompt {ids}: {a[1][:1]} {a[2][-200:]}")
    other = sample("-prompt", ",".join(map(str, tok.encode("And God saw").ids)))
    check(other[0] == 0 and other[1] != first[1], "... and another prompt samples something else (the check can fail)")


if __name__ == "__main__":
    sys.exit(main())
