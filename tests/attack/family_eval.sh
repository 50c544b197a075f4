#!/usr/bin/env bash
# family_eval.sh: the evaluation inputs and outputs. A cloze file (-eval-file) whose item
# asks for more target tokens than -seq predicts, or an n_target that is not a whole number
# (1.9, 2^32 + 1), or that is a FIFO, a device (/dev/zero) or a line without end, is one
# error line before training; a valid one evaluates. -dump-logits refuses a FIFO, a
# directory, and a file another run writes, and writes a regular file.
source "$(dirname "$0")/lib.sh"
D="$WORK/eval"; mkdir -p "$D"
KJV="$ROOT/dev/data/kjv"
# the cloze files, written here independently of the trainer's reader
/usr/bin/python3 - "$D" <<'PY'
import json, os, sys
d = sys.argv[1]
def put(name, text):
    open(os.path.join(d, name), "w").write(text)
put("ok.jsonl", json.dumps({"ids": [5, 6, 7, 8, 9], "n_target": 2}) + "\n")
put("long_target.jsonl", json.dumps({"ids": list(range(1, 6001)), "n_target": 5000}) + "\n")
put("target_over_seq.jsonl", json.dumps({"ids": list(range(1, 60)), "n_target": 33}) + "\n")
put("target_frac.jsonl", '{"ids": [1, 2, 3, 4], "n_target": 1.9}\n')
put("target_wrap.jsonl", '{"ids": [1, 2, 3, 4], "n_target": 4294967297}\n')
put("target_neg.jsonl", '{"ids": [1, 2, 3, 4], "n_target": -1}\n')
put("target_word.jsonl", '{"ids": [1, 2, 3, 4], "n_target": "two"}\n')
put("target_all.jsonl", json.dumps({"ids": [1, 2, 3], "n_target": 3}) + "\n")
put("id_over_v.jsonl", json.dumps({"ids": [1, 2, 9000], "n_target": 1}) + "\n")
put("empty.jsonl", "")
put("endless.jsonl", "[" * (17 << 20))
PY
mkfifo "$D/fifo.jsonl" "$D/fifo.bin"
RUN=("$TRAIN" "${TINY[@]}" -i "$KJV/kjv_train_000.bin" -j '' -steps 1 -eval-every 1)
expect_ok "control: a valid cloze file evaluates" -- "${RUN[@]}" -eval-file "$D/ok.jsonl"
if ! grep -q "cloze_acc" "$OUT"; then fail "control: the cloze result is printed" "no cloze_acc in stdout"; fi
for f in long_target target_over_seq target_frac target_wrap target_neg target_word; do
  expect_err "cloze $f: n_target refused" "n_target must be a whole number in \[1, 32\]" -- "${RUN[@]}" -eval-file "$D/$f.jsonl"
done
expect_err "cloze: n_target leaving no context" "leave at least one context id" -- "${RUN[@]}" -eval-file "$D/target_all.jsonl"
expect_err "cloze: a token id >= V" "bad token id" -- "${RUN[@]}" -eval-file "$D/id_over_v.jsonl"
expect_err "cloze: an empty file" "has no items" -- "${RUN[@]}" -eval-file "$D/empty.jsonl"
expect_err "cloze: a 17 MiB line without end" "longer than" -- "${RUN[@]}" -eval-file "$D/endless.jsonl"
expect_err "cloze: a FIFO (no hang)" "is a FIFO" -- "${RUN[@]}" -eval-file "$D/fifo.jsonl"
expect_err "cloze: /dev/zero (no endless read)" "is a character device" -- "${RUN[@]}" -eval-file /dev/zero
expect_err "cloze: a directory" "is a directory" -- "${RUN[@]}" -eval-file "$D"
# -dump-logits (test-only, with -steps 0 on validation data)
DUMP=("$TRAIN" "${TINY[@]}" -i "$KJV/kjv_train_000.bin" -j "$KJV/kjv_val_000.bin" -val-every 1 -steps 0)
expect_ok "control: -dump-logits writes a regular file" -- "${DUMP[@]}" -dump-logits "$D/logits.bin"
if [ ! -s "$D/logits.bin" ]; then fail "control: the dump holds the logits" "empty or missing"; fi
expect_err "-dump-logits to a FIFO (no hang)" "is a FIFO" -- "${DUMP[@]}" -dump-logits "$D/fifo.bin"
expect_err "-dump-logits to a directory" "[Ii]s a directory" -- "${DUMP[@]}" -dump-logits "$D"
"$TRAIN" "${TINY[@]}" -i "$KJV/kjv_train_000.bin" -j '' -steps 100000 -log "$D/busy.jsonl" >/dev/null 2>&1 &
bg=$!
i=0; while [ "$i" -lt 200 ] && [ ! -s "$D/busy.jsonl" ]; do sleep 0.05; i=$((i + 1)); done
expect_err "-dump-logits onto the log another run writes" "being written by another run" -- "${DUMP[@]}" -dump-logits "$D/busy.jsonl"
kill -9 "$bg" 2>/dev/null; wait "$bg" 2>/dev/null
attack_done
