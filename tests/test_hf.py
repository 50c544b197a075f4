"""
test_hf.py: the Hugging Face export/import and the cloze evaluation, end to end (run by
`make test-hf`, part of `make test`; needs the venv dev/install.sh makes, no network):

  1. train `tiny` (vocab padded 8192 -> 9000 so padded rows exist): 16 steps single-process,
     then resumed for 2 steps as 2x2x2 ZeRO-1 over mpirun, which writes the checkpoint
  2. the HF commands doc/hf_eval.md shows (its blocks marked "test_hf.py runs this block": export,
     generate, pipeline, import, the trainer's cloze evaluation, lm_eval), verbatim but for their
     out/... paths (the README run's checkpoint: a 2-step run of its model); then
     AutoModelForCausalLM / AutoTokenizer load the export without custom code
  3. transformers' logits on the first validation micro-batch vs the trainer's (-dump-logits),
     1e-5 relative; transformers' loss on the validation samples vs the 2x2x2 run's val_loss
  4. dev/import_hf.py -> dev/export_hf.py again: every file bit-identical; the imported
     checkpoint, loaded with -init-from, gives bit-identical trainer logits
  5. greedy text: the trainer's -sample-greedy 1 -prompt vs transformers' generate()
  6. cloze: the trainer's -eval-file in 2x2x2 and single-process vs lm-evaluation-harness
     on the export: accuracy equal, perplexity within 1e-4 relative
Prints "N passed, M failed" last; exits 1 on any failure.
"""

import json
import os
import shutil
import subprocess
import sys
import tempfile
import time

import numpy as np

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
os.chdir(REPO)
for k in ("HF_DATASETS_OFFLINE", "HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE"):
    os.environ[k] = "1"
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
PY = "/usr/bin/python3"
MPIRUN = ["timeout", "300", "mpirun", "--oversubscribe", "--allow-run-as-root", "-x", "OMP_NUM_THREADS=1"]
MODEL = ["-V", "8192", "-vpad", "1000", "-gb", "8", "-ramp", "off", "-seed", "7"]
TOK_JSON = "dev/data/kjv/kjv_tokenizer.json"
TOK_BIN = "dev/data/kjv/kjv_tokenizer.bin"
passed = failed = 0


def check(ok, what):
    global passed, failed
    print(("ok   " if ok else "FAIL ") + what, flush=True)
    if ok:
        passed += 1
    else:
        failed += 1
    return ok


def run(cmd, env=None, what=""):
    e = dict(os.environ, OMP_NUM_THREADS="2", **(env or {}))
    r = subprocess.run(cmd, capture_output=True, text=True, env=e)
    if r.returncode != 0:
        print(f"command failed ({r.returncode}): {' '.join(cmd)}\n{r.stdout[-2000:]}\n{r.stderr[-2000:]}")
        raise SystemExit(finish(extra_fail=what or "a command"))
    return r.stdout


def finish(extra_fail=None):
    global failed
    if extra_fail:
        failed += 1
        print(f"FAIL {extra_fail} (stopped here)")
    print(f"{passed} passed, {failed} failed")
    return 1 if failed else 0


def doc_commands(n):
    """block n of doc/hf_eval.md marked "test_hf.py runs this block": its commands, continuation lines
    joined, comment lines dropped"""
    doc = open("doc/hf_eval.md").read().split("<!-- test_hf.py runs this block -->\n```\n")
    block = doc[1 + n].split("\n```")[0]
    return [c for c in block.replace("\\\n", "").splitlines() if c.strip() and not c.lstrip().startswith("#")]


def run_doc(cmd, paths):
    """one documented command, in bash, with its out/... paths (longest first) replaced"""
    for k in sorted(paths, key=len, reverse=True):
        cmd = cmd.replace(k, paths[k])
    e = dict(os.environ, OMP_NUM_THREADS="2")
    r = subprocess.run(["bash", "-c", cmd], capture_output=True, text=True, env=e)
    ok = check(r.returncode == 0, f"doc/hf_eval.md runs: {cmd[:100]}")
    if not ok:
        print(r.stdout[-2000:] + r.stderr[-3000:])
    return r.stdout


def log_entries(path, typ):
    return [json.loads(l) for l in open(path) if json.loads(l).get("type") == typ]


def main():
    t0 = time.time()
    tmp = tempfile.mkdtemp(prefix="test_hf_")
    try:
        rc = body(tmp)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    print(f"test_hf.py: {time.time() - t0:.0f} s")
    return rc


def body(tmp):
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer
    torch.set_num_threads(2)
    run_dir, hf, hf2, imp = (os.path.join(tmp, n) for n in ("run", "hf", "hf2", "imported"))
    # 1. a trained checkpoint written by a 2x2x2 ZeRO-1 run
    # with -tokenizer, as the quickstart: the export attaches the run's own tokenizer (its .json sibling)
    run(["./train_gpt", *MODEL, "-tokenizer", TOK_BIN, "-mb", "2", "-lr", "3e-3", "-warmup", "20000", "-steps", "16",
         "-ckpt-every", "16", "-o", run_dir], what="single-process pre-training")
    run(MPIRUN + ["-np", "8", "./train_gpt", *MODEL, "-tp", "2", "-pp", "2", "-dp", "2", "-zero", "1", "-mb", "1",
                  "-lr", "3e-3", "-warmup", "20000", "-steps", "18", "-val-every", "2", "-val-samples", "8",
                  "-ckpt-every", "2", "-o", run_dir, "-resume"], what="2x2x2 ZeRO-1 training")
    ckpt = os.path.join(run_dir, "ckpt_00000018")
    h = json.loads(subprocess.run([PY, "-c", f"import sys; sys.path.insert(0,'dev'); import export_hf, json; "
                                   f"h = export_hf.read_header('{ckpt}/rank_00005.bin'); "
                                   f"print(json.dumps({{k: h[k] for k in ('tp','pp','dp','zero')}}))"],
                                  capture_output=True, text=True).stdout)
    check(h == {"tp": 2, "pp": 2, "dp": 2, "zero": 1}, f"the checkpoint was written as tp=2 pp=2 dp=2 zero=1 ({h})")
    val_loss = log_entries(os.path.join(run_dir, "log.jsonl"), "val")[-1]["val_loss"]

    # 2. the documented commands (export, generate, pipeline, import), then load
    paths = {"out/cpu_tiny": run_dir, "out/cpu_tiny_hf": hf, "out/cpu_tiny_imported": os.path.join(tmp, "doc_imp")}
    cmds = doc_commands(0)
    check(len(cmds) == 4 and "export_hf.py" in cmds[0] and "import_hf.py" in cmds[3],
          f"doc/hf_eval.md's first block holds export, generate, pipeline, import ({len(cmds)} commands)")
    for c in cmds:
        out = run_doc(c, paths).strip()
        print("  " + out.splitlines()[-1][:150] if out else "  (no output)")
        if "generate(" in c or "pipeline(" in c:
            check(out.startswith("And God said") and len(out) > len("And God said"), "... it prints a continuation")
    check(os.path.exists(os.path.join(tmp, "doc_imp", "DONE")), "... the documented import wrote a checkpoint")
    model = AutoModelForCausalLM.from_pretrained(hf).eval()
    tok = AutoTokenizer.from_pretrained(hf)
    cfg = json.load(open(os.path.join(hf, "config.json")))
    check(type(model).__name__ == "GPT2LMHeadModel" and cfg["vocab_size"] == 8192 and
          model.transformer.wte.weight.shape[0] == 8192, "GPT2LMHeadModel, vocabulary 8192 (the 808 padded rows dropped)")
    check(tok.encode("And God said") == json.loads(subprocess.run(
        [PY, "-c", f"from tokenizers import Tokenizer; print(Tokenizer.from_file('{TOK_JSON}').encode('And God said').ids)"],
        capture_output=True, text=True).stdout), "AutoTokenizer encodes as the corpus tokenizer")

    # 3. logits and validation loss
    dump = os.path.join(tmp, "logits.bin")
    run(["./train_gpt", *MODEL, "-mb", "2", "-init-from", ckpt, "-steps", "0", "-val-every", "1", "-val-samples", "8",
         "-dump-logits", dump], what="trainer logits dump")
    ours = np.fromfile(dump, dtype=np.float32).reshape(2, 256, 8192)
    val = np.fromfile("dev/data/kjv/kjv_val_000.bin", dtype=np.uint16, offset=1024).astype(np.int64)
    x = torch.tensor(np.stack([val[i * 256:i * 256 + 257] for i in range(8)]))
    with torch.no_grad():
        logits = model(x[:, :-1]).logits
    theirs = logits[:2].numpy()
    rel = float(np.abs(theirs - ours).max() / np.abs(ours).max())
    check(rel < 1e-5, f"transformers' logits = the trainer's on the first val micro-batch (max rel {rel:.2e} < 1e-5)")
    lp = torch.log_softmax(logits.double(), -1).gather(-1, x[:, 1:, None])
    hf_loss = float(-lp.mean())
    check(abs(hf_loss - val_loss) / val_loss < 1e-5,
          f"transformers' loss on the 8 val samples {hf_loss:.6f} = the 2x2x2 run's val_loss {val_loss:.6f}")

    # 4. import -> export round trip
    print(run([PY, "dev/import_hf.py", hf, imp, "--vpad", "1000"]).strip())
    run([PY, "dev/export_hf.py", imp, hf2, "--tokenizer", TOK_JSON])  # an import has no run record: name it
    names = sorted(os.listdir(hf))
    same = names == sorted(os.listdir(hf2)) and all(open(os.path.join(hf, n), "rb").read() == open(os.path.join(hf2, n), "rb").read() for n in names)
    check(same, f"import -> export is bit-identical ({', '.join(names)})")
    dump2 = os.path.join(tmp, "logits2.bin")
    run(["./train_gpt", *MODEL, "-mb", "2", "-init-from", imp, "-steps", "0", "-val-every", "1", "-val-samples", "8",
         "-dump-logits", dump2], what="-init-from the imported checkpoint")
    check(open(dump, "rb").read() == open(dump2, "rb").read(), "-init-from the imported checkpoint: bit-identical trainer logits")

    # 4b. a sharded copy, as transformers writes one above max_shard_size: the same checkpoint
    sharded = os.path.join(tmp, "hf_sharded")
    model.save_pretrained(sharded, max_shard_size="1MB", safe_serialization=True)
    nshards = len([n for n in os.listdir(sharded) if n.endswith(".safetensors")])
    imp_sh = os.path.join(tmp, "imported_sharded")
    run([PY, "dev/import_hf.py", sharded, imp_sh, "--vpad", "1000"], what="import of a sharded model")
    same = open(os.path.join(imp, "rank_00000.bin"), "rb").read() == open(os.path.join(imp_sh, "rank_00000.bin"), "rb").read()
    check(nshards > 1 and same, f"a model transformers saved in {nshards} shards imports to the same checkpoint")

    # 5. greedy text
    prompt = tok.encode("And the LORD said unto")
    out = run(MPIRUN + ["-np", "2", "./train_gpt", *MODEL, "-tp", "2", "-mb", "1", "-init-from", ckpt, "-steps", "0",
                        "-sample-greedy", "1", "-prompt", ",".join(map(str, prompt)), "-sample-len", "24"], what="greedy sample")
    line = [l for l in out.splitlines() if l.startswith("sample: ")]
    ours_ids = [int(v) for v in line[-1][len("sample: "):].split()] if line else []
    with torch.no_grad():
        gen = model.generate(torch.tensor([prompt]), do_sample=False, max_new_tokens=24, pad_token_id=tok.eos_token_id)
    theirs_ids = gen[0, len(prompt):].tolist()
    check(ours_ids == theirs_ids, f"greedy text from transformers = the trainer's (tp=2): {tok.decode(theirs_ids)!r}")

    # 6. cloze: trainer (2x2x2 and single-process) vs lm-evaluation-harness
    cloze = os.path.join(tmp, "cloze.jsonl")
    print(run([PY, "dev/eval/make_cloze.py", "--out", cloze, "--max-items", "64"]).strip())
    res = {}
    for name, pre, lay in (("2x2x2", MPIRUN + ["-np", "8"], ["-tp", "2", "-pp", "2", "-dp", "2", "-mb", "2"]),
                           ("1x1x1", [], ["-mb", "4"])):
        d = os.path.join(tmp, "eval_" + name)
        run(pre + ["./train_gpt", *MODEL, *lay, "-init-from", ckpt, "-steps", "0", "-eval-file", cloze, "-o", d], what=f"cloze eval {name}")
        res[name] = log_entries(os.path.join(d, "log.jsonl"), "eval")[-1]
    a, b = res["2x2x2"], res["1x1x1"]
    check(a["cloze_items"] == 64 and a["cloze_acc"] == b["cloze_acc"] and abs(a["cloze_ppl"] - b["cloze_ppl"]) / b["cloze_ppl"] < 1e-6,
          f"trainer cloze 2x2x2 = 1x1x1: acc {a['cloze_acc']:.4f} ppl {a['cloze_ppl']:.4f} / {b['cloze_ppl']:.4f}")
    import lm_eval
    from lm_eval.tasks import TaskManager
    taskdir = os.path.join(tmp, "tasks")
    os.makedirs(taskdir)
    yml = open("dev/eval/kjv_cloze.yaml").read().replace("dev/eval/kjv_cloze.jsonl", cloze)
    open(os.path.join(taskdir, "kjv_cloze.yaml"), "w").write(yml)
    r = lm_eval.simple_evaluate(model="hf", model_args=f"pretrained={hf},dtype=float32", tasks=["kjv_cloze"],
                                task_manager=TaskManager(include_path=taskdir), batch_size=1, device="cpu")
    m = r["results"]["kjv_cloze"]
    acc, ppl = m["acc,none"], m["perplexity,none"]
    check(abs(acc - b["cloze_acc"]) < 1e-12, f"lm-eval accuracy {acc:.4f} = the trainer's {b['cloze_acc']:.4f} (64 items)")
    check(abs(ppl - b["cloze_ppl"]) / b["cloze_ppl"] < 1e-4, f"lm-eval perplexity {ppl:.4f} = the trainer's {b['cloze_ppl']:.4f} (1e-4 rel)")
    # the documented cloze evaluation of the README's run (its last checkpoint: one of that model, 2 steps)
    cmds = doc_commands(1)
    check(len(cmds) == 2 and cmds[0].startswith("make cloze") and "-eval-file" in cmds[1],
          "doc/hf_eval.md's second block is make cloze and the trainer's cloze evaluation")
    readme_run = os.path.join(tmp, "readme_run")
    run(["./train_gpt", "-V", "8192", "-gb", "8", "-ramp", "off", "-steps", "2", "-o", readme_run], what="README model")
    for c in cmds:
        out = run_doc(c, {"out/cpu_tiny/ckpt_00000225": os.path.join(readme_run, "ckpt_00000002")})
    check("cloze" in out and os.path.exists("dev/eval/kjv_cloze.jsonl"), "... it evaluates the cloze set")
    # the documented lm_eval command line, on the same 64 items (its --include_path pointed at them)
    cmds = doc_commands(2)
    check(len(cmds) == 1 and "lm_eval" in cmds[0], "doc/hf_eval.md's third block is the lm_eval command line")
    out = run_doc(cmds[0], dict(paths, **{"dev/eval": taskdir}))
    cli_acc = -1.0
    for line in out.splitlines():  # its table: |kjv_cloze| 1|none | 0|acc |↑ |0.0156|± |0.0156|
        cells = [c.strip() for c in line.split("|")]
        if "kjv_cloze" in cells and "acc" in cells:
            vals = [c for c in cells[cells.index("acc") + 1:] if c.replace(".", "", 1).isdigit()]
            cli_acc = float(vals[0]) if vals else -1.0
    check(abs(cli_acc - round(acc, 4)) < 1e-9, f"... its table's accuracy {cli_acc} = simple_evaluate's {acc:.4f}")
    return finish()


if __name__ == "__main__":
    sys.exit(main())
