"""
fuzz_import_hf.py: dev/import_hf.py's parsing of config.json and model.safetensors under
hypothesis (run by `make test-hf`; about 10 s). Each property writes a model directory built
here from a tiny well-formed GPT-2 (L 1, C 4, 2 heads, T 2, V 3) and imports it; the import
must end in a checkpoint or in a CkptError with a one-line message (what main() prints as
its one `error:` line), never in any other exception:

  1. random JSON configs: any JSON document, and the good config with fields set to random
     JSON values or deleted
  2. garbled safetensors headers: fields of the good header set to random JSON values,
     entries deleted or added, the whole header replaced, the header length wrong
  3. garbled data: the good file cut short, extended, or with random bytes in the data
  4. random bytes as model.safetensors and as config.json

Bounded: a fixed number of examples per property, no example database written. Prints
"N passed, M failed" last (one case per property); exits 1 on any failure.
"""

import io
import json
import os
import shutil
import struct
import sys
import tempfile
import traceback

import numpy as np

# hypothesis caches its Unicode tables in ./.hypothesis unless told otherwise: keep the tree clean
os.environ.setdefault("HYPOTHESIS_STORAGE_DIRECTORY", os.path.join(tempfile.gettempdir(), "llmc_hypothesis"))
from hypothesis import HealthCheck, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))), "dev"))
import import_hf  # noqa: E402
from export_hf import CkptError  # noqa: E402

EXAMPLES = int(os.environ.get("FUZZ_EXAMPLES", "150"))
L, C, NH, T, V = 1, 4, 2, 2, 3
CONFIG = {"model_type": "gpt2", "n_layer": L, "n_embd": C, "n_head": NH, "n_positions": T, "vocab_size": V,
          "activation_function": "gelu_new", "layer_norm_epsilon": 1e-5, "tie_word_embeddings": True}
SHAPES = {"transformer.wte.weight": [V, C], "transformer.wpe.weight": [T, C], "transformer.ln_f.weight": [C],
          "transformer.ln_f.bias": [C]}
for _n, _s in (("ln_1.weight", [C]), ("ln_1.bias", [C]), ("attn.c_attn.weight", [C, 3 * C]),
               ("attn.c_attn.bias", [3 * C]), ("attn.c_proj.weight", [C, C]), ("attn.c_proj.bias", [C]),
               ("ln_2.weight", [C]), ("ln_2.bias", [C]), ("mlp.c_fc.weight", [C, 4 * C]),
               ("mlp.c_fc.bias", [4 * C]), ("mlp.c_proj.weight", [4 * C, C]), ("mlp.c_proj.bias", [C])):
    SHAPES[f"transformer.h.0.{_n}"] = _s
NAMES = sorted(SHAPES)


def good_header():
    hdr, off = {}, 0
    for n in NAMES:
        nb = 4 * int(np.prod(SHAPES[n]))
        hdr[n] = {"dtype": "F32", "shape": list(SHAPES[n]), "data_offsets": [off, off + nb]}
        off += nb
    return hdr, off


GOOD_HEADER, DATA_BYTES = good_header()
GOOD_DATA = np.random.default_rng(1).standard_normal(DATA_BYTES // 4).astype("<f4").tobytes()


def safetensors_bytes(header, data=GOOD_DATA, hlen=None):
    h = header if isinstance(header, bytes) else json.dumps(header).encode()
    return struct.pack("<Q", len(h) if hlen is None else hlen) + h + data


# JSON values as json.loads can return them (NaN and infinities included: Python's json reads them)
scalars = (st.none() | st.booleans() | st.integers(-2 ** 70, 2 ** 70) | st.floats() | st.text(max_size=12)
           | st.sampled_from([0, 1, 2, 3, 4, 8, -1, 2 ** 24, 2 ** 24 + 1, 65536, 65537, 2 ** 63, 2 ** 64, 10 ** 400,
                              "F32", "BF16", "F16", "F64", "gpt2"]))
json_values = st.recursive(scalars, lambda c: st.lists(c, max_size=4) | st.dictionaries(st.text(max_size=8), c,
                                                                                        max_size=4), max_leaves=12)
CONFIG_KEYS = sorted(CONFIG) + ["n_inner", "scale_attn_weights", "scale_attn_by_inverse_layer_idx", "resid_pdrop",
                                "embd_pdrop", "attn_pdrop"]


@st.composite
def configs(draw):
    if draw(st.integers(0, 4)) == 0:
        return draw(json_values)
    cfg = dict(CONFIG)
    for k in draw(st.lists(st.sampled_from(CONFIG_KEYS), max_size=3)):
        if draw(st.booleans()):
            cfg[k] = draw(json_values)
        else:
            cfg.pop(k, None)
    return cfg


@st.composite
def headers(draw):
    if draw(st.integers(0, 5)) == 0:
        return draw(json_values)
    hdr = json.loads(json.dumps(GOOD_HEADER))
    for _ in range(draw(st.integers(1, 4))):
        op = draw(st.integers(0, 4))
        name = draw(st.sampled_from(NAMES))
        if op == 0 and isinstance(hdr.get(name), dict):  # one field of one tensor
            field = draw(st.sampled_from(["dtype", "shape", "data_offsets"]))
            hdr[name][field] = draw(json_values | st.lists(st.integers(-2, DATA_BYTES + 8), max_size=3))
        elif op == 1:
            hdr.pop(name, None)
        elif op == 2:
            hdr[draw(st.text(max_size=24) | st.sampled_from(["transformer.h.7.ln_1.weight", "lm_head.weight"]))] = \
                draw(json_values)
        elif op == 3:
            hdr["__metadata__"] = draw(json_values)
        else:  # a whole entry replaced
            hdr[name] = draw(json_values)
    return hdr


passed = failed = 0


def run_import(cfg_bytes, st_bytes):
    """writes the directory, imports it; returns None or raises AssertionError on a bad ending"""
    d = tempfile.mkdtemp(prefix="fuzz_import_hf_")
    try:
        with open(os.path.join(d, "config.json"), "wb") as f:
            f.write(cfg_bytes)
        with open(os.path.join(d, "model.safetensors"), "wb") as f:
            f.write(st_bytes)
        err = io.StringIO()
        old, sys.stderr = sys.stderr, err  # the dropout warning goes to stderr; keep the output clean
        try:
            import_hf.import_hf(d, os.path.join(d, "out"), 1)
        except CkptError as e:
            msg = str(e)
            assert msg and "\n" not in msg and "\r" not in msg, f"error message not one line: {msg!r}"
            return
        except Exception as e:  # anything else would be a traceback from main()
            raise AssertionError(f"{type(e).__name__}: {e}\n{traceback.format_exc()}") from None
        finally:
            sys.stderr = old
        assert os.path.exists(os.path.join(d, "out", "DONE")), "import returned without writing DONE"
    finally:
        shutil.rmtree(d, ignore_errors=True)


def cfg_bytes(cfg):
    return json.dumps(cfg).encode()


SETTINGS = settings(max_examples=EXAMPLES, deadline=None, database=None, print_blob=True,
                    suppress_health_check=list(HealthCheck))


@SETTINGS
@given(configs())
def prop_configs(cfg):
    run_import(cfg_bytes(cfg), safetensors_bytes(GOOD_HEADER))


@SETTINGS
@given(headers(), st.one_of(st.none(), st.integers(0, 2 ** 64 - 1), st.integers(-8, 8)))
def prop_headers(hdr, hlen):
    h = json.dumps(hdr).encode()
    if hlen is not None and hlen < 0:
        hlen = max(0, len(h) + hlen)  # near the right length
    run_import(cfg_bytes(CONFIG), safetensors_bytes(h, hlen=hlen))


@SETTINGS
@given(st.integers(-DATA_BYTES - 16, 64), st.binary(max_size=64), st.integers(0, DATA_BYTES))
def prop_data(cut, junk, at):
    data = bytearray(GOOD_DATA)
    data[at:at + len(junk)] = junk  # random bytes in the data: NaN, Inf, or just other weights
    data = bytes(data[:len(GOOD_DATA)])
    data = data[:cut] if cut < 0 else data + bytes(cut)
    run_import(cfg_bytes(CONFIG), safetensors_bytes(GOOD_HEADER, data))


# documents nested past Python's recursion limit, and other shapes random bytes rarely take
NASTY = [b"[" * 100000 + b"]" * 100000, b'{"a":' * 100000 + b"1" + b"}" * 100000, b"\xff\xfe{}", b"NaN",
         b'{"model_type": "gpt2", "model_type": "gpt2"}', b"1e999999", b"\"" + b"\\u0000" * 10 + b"\""]


@SETTINGS
@given(st.binary(max_size=96) | st.sampled_from(NASTY), st.binary(max_size=96), st.booleans())
def prop_bytes(a, b, which):
    if which:
        run_import(cfg_bytes(CONFIG), a)
    else:
        run_import(a, safetensors_bytes(GOOD_HEADER))
        run_import(cfg_bytes(CONFIG), safetensors_bytes(a))  # the same bytes as the safetensors JSON header
    run_import(b, b)


def main():
    global passed, failed
    # the control: the well-formed directory imports
    cases = [("the well-formed tiny model imports", lambda: run_import(cfg_bytes(CONFIG),
                                                                         safetensors_bytes(GOOD_HEADER))),
             (f"random JSON configs ({EXAMPLES} examples)", prop_configs),
             (f"garbled safetensors headers and header lengths ({EXAMPLES} examples)", prop_headers),
             (f"garbled safetensors data: cut, extended, random bytes ({EXAMPLES} examples)", prop_data),
             (f"random bytes as model.safetensors and config.json ({EXAMPLES} examples)", prop_bytes)]
    for what, fn in cases:
        try:
            fn()
            passed += 1
            print(f"ok   {what}", flush=True)
        except Exception as e:  # hypothesis re-raises the shrunk failing example's AssertionError
            failed += 1
            print(f"FAIL {what}: {str(e)[:2000]}", flush=True)
    print(f"{passed} passed, {failed} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
