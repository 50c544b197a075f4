#!/usr/bin/env bash
# dev/eval/eval_quickstart.sh: the cloze evaluation of the quickstart model, both ways.
# Trains (or reuses) the quickstart run in $OUT (scripts/run_cpu.sh), builds the cloze set,
# evaluates the newest checkpoint with the trainer (-steps 0 -eval-file), exports it to a
# Hugging Face directory (dev/export_hf.py) and evaluates that with lm-evaluation-harness on
# the same items (dev/eval/kjv_cloze.yaml). Prints both accuracies and perplexities.
#   bash dev/eval/eval_quickstart.sh            (OUT=out/cpu_tiny, TRAIN=1 trains first)
set -euo pipefail
case "${1:-}" in -h | --help) awk 'NR > 1 && /^#/ { sub(/^# ?/, ""); print; next } NR > 1 { exit }' "$0"; exit 0 ;; esac
cd "$(dirname "$0")/../.."
OUT=${OUT:-out/cpu_tiny}
HF_PY=${HF_PY:-$HOME/.cache/llmc/hf-venv/bin/python}
[ "${TRAIN:-1}" = 1 ] && OUT="$OUT" bash scripts/run_cpu.sh
ckpt=$(ls -d "$OUT"/ckpt_* 2>/dev/null | grep -v '\.tmp$\|\.old$' | sort | tail -n 1)
[ -n "$ckpt" ] && [ -f "$ckpt/DONE" ] || { echo "error: no complete checkpoint in $OUT (run scripts/run_cpu.sh)"; exit 1; }
make --no-print-directory cloze >/dev/null
ev="$OUT/cloze_eval"
rm -rf "$ev"
./train_gpt -model tiny -V 8192 -mb 4 -gb 16 -ramp off -init-from "$ckpt" -steps 0 \
    -eval-file dev/eval/kjv_cloze.jsonl -o "$ev" > "$ev.log" 2>&1 || { cat "$ev.log"; exit 1; }
trainer=$(grep '"type":"eval"' "$ev/log.jsonl" | tail -n 1)
hf="$OUT/hf"
rm -rf "$hf"
/usr/bin/python3 dev/export_hf.py "$ckpt" "$hf" --tokenizer dev/data/kjv/kjv_tokenizer.json > /dev/null
harness=$("$HF_PY" - "$hf" <<'PY'
import json, os, sys, tempfile
import lm_eval
from lm_eval.tasks import TaskManager
d = tempfile.mkdtemp()
open(os.path.join(d, "kjv_cloze.yaml"), "w").write(open("dev/eval/kjv_cloze.yaml").read().replace(
    "dev/eval/kjv_cloze.jsonl", os.path.abspath("dev/eval/kjv_cloze.jsonl")))
r = lm_eval.simple_evaluate(model="hf", model_args=f"pretrained={sys.argv[1]},dtype=float32", tasks=["kjv_cloze"],
                            task_manager=TaskManager(include_path=d), batch_size=4, device="cpu")
m = r["results"]["kjv_cloze"]
print(json.dumps({"acc": m["acc,none"], "ppl": m["perplexity,none"]}))
PY
)
echo "checkpoint: $ckpt"
echo "trainer  (-eval-file): $trainer"
echo "lm-eval  (exported):   $(echo "$harness" | tail -n 1)"
