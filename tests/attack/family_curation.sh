#!/usr/bin/env bash
# family_curation.sh: the data curation tools (dev/data/dedup.py, dev/data/decontaminate.py) against
# bad input: missing, empty, non-UTF-8 or malformed inputs and eval files, a directory, /dev/zero,
# out-of-range and non-numeric options (--threshold outside (0, 1] or nan, --num-perm < 2, --n 0),
# an --out that is not .jsonl, in no directory, or the input itself. Each is one `error:` line and
# a non-zero exit, and a failed run leaves no output behind; valid controls run.
source "$(dirname "$0")/lib.sh"
PY="${HF_PY:-$HOME/.cache/llmc/hf-venv/bin/python}"
DEDUP=("$PY" "$ROOT/dev/data/dedup.py" --quiet)
DECON=("$PY" "$ROOT/dev/data/decontaminate.py" --quiet)
if ! "$PY" -c "import datasketch" 2>/dev/null; then
  echo "FAIL setup: $PY cannot import datasketch (bash dev/install.sh)"; echo "0 passed, 1 failed"; exit 1
fi
D="$WORK/cur"; mkdir -p "$D/dir"
"$PY" - "$D" <<'PYEOF'
import json, os, sys
d = sys.argv[1]
def put(name, data):
    open(os.path.join(d, name), "wb").write(data if isinstance(data, bytes) else data.encode())
words = "alpha beta gamma delta epsilon zeta eta theta iota kappa lambda mu nu xi omicron pi rho".split()
doc = " ".join(words * 3)
put("ok.jsonl", "".join(json.dumps({"text": f"{doc} {i}"}) + "\n" for i in range(5)))
put("ok.txt", doc + "\n")
put("empty.jsonl", "")
put("blank.jsonl", "\n\n")
put("bad_json.jsonl", json.dumps({"text": doc}) + "\n" + json.dumps({"text": doc}) + "\n{not json\n")
put("no_field.jsonl", json.dumps({"body": doc}) + "\n")
put("latin1.txt", b"caf\xe9 " + doc.encode())
put("endless.jsonl", "[" * (17 << 20))
put("eval.jsonl", json.dumps({"context": " ".join(words[:12]), "target": " " + words[12]}) + "\n")
put("eval_short.jsonl", json.dumps({"context": "alpha beta", "target": " gamma"}) + "\n")
put("eval_list.jsonl", "[1, 2]\n")
put("eval_nostr.jsonl", json.dumps({"ids": [1, 2, 3]}) + "\n")
PYEOF
mkfifo "$D/fifo.jsonl"
OK_SHA=$(sha256sum < "$D/ok.jsonl")
K="$D/kept.jsonl"
OKJ="$D/ok.jsonl"
# dd_err / dc_err NAME PATTERN ARGS...: dedup.py / decontaminate.py ARGS fails with one matching error line
dd_err() { local n=$1 p=$2; shift 2; expect_err "dedup: $n" "$p" -- "${DEDUP[@]}" "$@"; }
dc_err() { local n=$1 p=$2; shift 2; expect_err "decontaminate: $n" "$p" -- "${DECON[@]}" "$@"; }
# no_output NAME: the failed run left none of its files (OUT, side files, .tmp)
no_output() {
  if ls "$D"/kept* "$D"/clean* >/dev/null 2>&1; then fail "$1: nothing left behind" "$(ls "$D"/kept* "$D"/clean*)"
  else pass "$1: nothing left behind"; fi
}

# dedup.py
expect_ok "dedup control: a valid JSONL and text file" -- "${DEDUP[@]}" --out "$K" "$OKJ" "$D/ok.txt"
if [ -f "$K" ] && [ "$(wc -l < "$K")" -eq 1 ]; then pass "dedup control: 6 near-identical documents -> 1 kept"
else fail "dedup control: 6 near-identical documents -> 1 kept" "$(wc -l < "$K" 2>&1)"; fi
expect_ok "dedup -h" -- "${DEDUP[@]}" -h
rm -f "$D"/kept*
dd_err "a missing input" "not a file" --out "$K" "$D/missing.jsonl"
dd_err "a glob matching nothing" "no file matches" --out "$K" "$D/*.nothing"
dd_err "a directory" "not a file" --out "$K" "$D/dir"
dd_err "/dev/zero (no endless read)" "not a regular file or a FIFO" --out "$K" /dev/zero
dd_err "an empty file" "no documents" --out "$K" "$D/empty.jsonl"
dd_err "blank lines only" "no documents" --out "$K" "$D/blank.jsonl"
dd_err "bad JSON on line 3" "bad_json.jsonl:3: bad JSON" --out "$K" "$D/bad_json.jsonl"
no_output "dedup: bad JSON after 2 documents"
dd_err "no --field" "no field 'text'" --out "$K" "$D/no_field.jsonl"
dd_err "non-UTF-8 text" "not UTF-8" --out "$K" "$D/latin1.txt"
dd_err "a 17 MiB line without end" "bad JSON" --out "$K" "$D/endless.jsonl"
for t in 0 -0.1 1.5 1.0001 nan inf; do
  dd_err "--threshold $t" "threshold must be in \(0, 1\]" --threshold "$t" --out "$K" "$OKJ"
done
for t in abc "" 0.8x -inf; do
  dd_err "--threshold '$t'" "threshold" --threshold "$t" --out "$K" "$OKJ"
done
for n in 1 0 -5 4097; do
  dd_err "--num-perm $n" "num-perm must be in \[2, 4096\]" --num-perm "$n" --out "$K" "$OKJ"
done
for n in abc 1.5 ""; do
  dd_err "--num-perm '$n'" "num-perm" --num-perm "$n" --out "$K" "$OKJ"
done
dd_err "--ngram 0" "ngram must be" --ngram 0 --out "$K" "$OKJ"
dd_err "--seed -1" "seed must be" --seed -1 --out "$K" "$OKJ"
dd_err "--shingle line" "shingle" --shingle line --out "$K" "$OKJ"
dd_err "no --out" "out" "$OKJ"
dd_err "--out not .jsonl" "must end in .jsonl" --out "$D/kept.txt" "$OKJ"
dd_err "--out in a missing directory" "no such directory" --out "$D/no/k.jsonl" "$OKJ"
dd_err "--out is the input" "would overwrite the input" --out "$OKJ" "$OKJ"
if [ "$(sha256sum < "$D/ok.jsonl")" = "$OK_SHA" ]; then pass "dedup: ... and the input is intact"
else fail "dedup: ... and the input is intact" "ok.jsonl changed"; fi
no_output "dedup: every refused run"

# decontaminate.py
C="$D/clean.jsonl"
E=(--eval "$D/eval.jsonl")
expect_ok "decontaminate control: a valid run" -- "${DECON[@]}" "${E[@]}" --out "$C" "$OKJ" "$D/ok.txt"
if [ -f "$C" ] && [ "$(wc -l < "$C")" -eq 0 ]; then pass "decontaminate control: all 6 documents hold the eval 13-gram"
else fail "decontaminate control: all 6 documents hold the eval 13-gram" "$(wc -l < "$C" 2>&1)"; fi
FEED="cat '$OKJ' > '$D/fifo.jsonl' & exec \"\$@\""  # a writer for the FIFO, then the tool
expect_ok "decontaminate control: a FIFO input with --max-doc-hits 0" -- bash -c "$FEED" _ "${DECON[@]}" "${E[@]}" \
  --max-doc-hits 0 --out "$C" "$D/fifo.jsonl"
expect_ok "decontaminate -h" -- "${DECON[@]}" -h
rm -f "$D"/clean*
dc_err "a missing eval file" "not a readable file" --eval "$D/none.jsonl" --out "$C" "$OKJ"
dc_err "an eval directory" "not a readable file" --eval "$D/dir" --out "$C" "$OKJ"
dc_err "/dev/zero as eval" "not a readable file" --eval /dev/zero --out "$C" "$OKJ"
dc_err "an empty eval file" "hold no items" --eval "$D/empty.jsonl" --out "$C" "$OKJ"
dc_err "eval items shorter than --n" "no eval item has 13 words" --eval "$D/eval_short.jsonl" --out "$C" "$OKJ"
dc_err "bad JSON eval" "bad JSON" --eval "$D/bad_json.jsonl" --out "$C" "$OKJ"
dc_err "an eval item that is a list" "JSON object or string" --eval "$D/eval_list.jsonl" --out "$C" "$OKJ"
dc_err "an eval item without strings" "no string field" --eval "$D/eval_nostr.jsonl" --out "$C" "$OKJ"
dc_err "--eval-field missing" "no string field 'question'" "${E[@]}" --eval-field question --out "$C" "$OKJ"
dc_err "non-UTF-8 eval text" "not UTF-8" --eval "$D/latin1.txt" --out "$C" "$OKJ"
if [ "$(id -u)" -ne 0 ]; then  # root reads a mode-000 file anyway
  cp "$D/eval.jsonl" "$D/locked.jsonl"; chmod 000 "$D/locked.jsonl"
  dc_err "an unreadable eval file" "Permission denied" --eval "$D/locked.jsonl" --out "$C" "$OKJ"
fi
dc_err "no --eval" "eval" --out "$C" "$OKJ"
for n in 0 -1 1001; do
  dc_err "--n $n" "n must be in \[1, 1000\]" "${E[@]}" --n "$n" --out "$C" "$OKJ"
done
for n in abc 1.5 ""; do
  dc_err "--n '$n'" "argument --n" "${E[@]}" --n "$n" --out "$C" "$OKJ"
done
dc_err "--margin -1" "must be >= 0" "${E[@]}" --margin -1 --out "$C" "$OKJ"
dc_err "--max-doc-hits -1" "must be >= 0" "${E[@]}" --max-doc-hits -1 --out "$C" "$OKJ"
dc_err "--max-splits 0" "max-splits must be" "${E[@]}" --max-splits 0 --out "$C" "$OKJ"
dc_err "--mode cut" "mode" "${E[@]}" --mode cut --out "$C" "$OKJ"
dc_err "a missing input" "not a file" "${E[@]}" --out "$C" "$D/missing.jsonl"
dc_err "an empty input" "no documents" "${E[@]}" --out "$C" "$D/empty.jsonl"
dc_err "/dev/zero as input" "not a regular file or a FIFO" "${E[@]}" --out "$C" /dev/zero
dc_err "a FIFO read twice" "reads the input twice" "${E[@]}" --out "$C" "$D/fifo.jsonl"
dc_err "a 17 MiB line without end" "bad JSON" "${E[@]}" --out "$C" "$D/endless.jsonl"
dc_err "a 17 MiB eval line without end" "bad JSON" --eval "$D/endless.jsonl" --out "$C" "$OKJ"
dc_err "bad JSON on line 3" "bad_json.jsonl:3: bad JSON" "${E[@]}" --out "$C" "$D/bad_json.jsonl"
dc_err "--out not .jsonl" "must end in .jsonl" "${E[@]}" --out "$D/c.txt" "$OKJ"
dc_err "--out is the input" "would overwrite the input" "${E[@]}" --out "$OKJ" "$OKJ"
no_output "decontaminate: every refused run"
attack_done
