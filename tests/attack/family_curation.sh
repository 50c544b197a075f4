#!/usr/bin/env bash
# family_curation.sh: the data curation tools (dev/data/dedup.py, dev/data/decontaminate.py) against
# bad input: missing, empty, non-UTF-8 or malformed inputs and eval files, a directory, /dev/zero,
# out-of-range and non-numeric options (--threshold outside (0, 1] or nan, --num-perm < 2, --n 0),
# an --out that is not .jsonl, in no directory, or the input itself. Each is one `error:` line and
# a non-zero exit, and a failed run leaves no output behind; valid controls run. Then (issue 45)
# outputs, side files and .tmp names against inputs and eval files (same name, symlink, hard
# link), each refused with the file intact; prepare.py's inputs against the files it writes or
# deletes, another prefix's files left alone, --merge's printed glob against stray shards, and
# its tokenization workers on a late bad line and on Ctrl-C (no hang, no process left).
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
dd_err "--out is the input" "which this run writes" --out "$OKJ" "$OKJ"
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
dc_err "--out is the input" "which this run writes" "${E[@]}" --out "$OKJ" "$OKJ"
no_output "decontaminate: every refused run"

# Outputs against inputs (issue 45 item 2): no output, side file or .tmp of either tool may be an
# input or an eval file (same name, symlink or hard link); refused before anything is written,
# and the file is intact afterwards (a failed run deletes only the .tmp files it made itself).
IO="$D/io"; mkdir -p "$IO"
# intact NAME FILE SHA: FILE still holds what it held
intact() {
  if [ -f "$2" ] && [ "$(sha256sum < "$2")" = "$3" ]; then pass "$1: ... and $(basename "$2") is intact"
  else fail "$1: ... and $(basename "$2") is intact" "changed or gone"; fi
}
EV_SHA=$(sha256sum < "$D/eval.jsonl")
cp "$D/eval.jsonl" "$IO/ev.jsonl"
dc_err "--out is the --eval file" "--eval .*which this run writes" --eval "$IO/ev.jsonl" --out "$IO/ev.jsonl" "$OKJ"
intact "decontaminate: --out is the --eval file" "$IO/ev.jsonl" "$EV_SHA"
for side in c.hits.jsonl c.report.json c.jsonl.tmp c.hits.jsonl.tmp; do
  cp "$D/eval.jsonl" "$IO/$side"
  dc_err "--eval is the side file $side" "--eval .*which this run writes" --eval "$IO/$side" --out "$IO/c.jsonl" "$OKJ"
  intact "decontaminate: --eval is $side" "$IO/$side" "$EV_SHA"
  rm -f "$IO/$side"
done
for side in c.report.json c.jsonl.tmp c.hits.jsonl; do
  cp "$OKJ" "$IO/$side"
  dc_err "a training input is the side file $side" "the input .*which this run writes" "${E[@]}" --out "$IO/c.jsonl" \
    "$IO/$side"
  intact "decontaminate: the input is $side" "$IO/$side" "$OK_SHA"
  rm -f "$IO/$side"
done
ln -s ev.jsonl "$IO/lnk.jsonl"
dc_err "--out a symlink to the --eval file" "which this run writes" --eval "$IO/ev.jsonl" --out "$IO/lnk.jsonl" "$OKJ"
intact "decontaminate: --out a symlink to --eval" "$IO/ev.jsonl" "$EV_SHA"
ln "$IO/ev.jsonl" "$IO/hard.hits.jsonl"
dc_err "the hits file a hard link of the --eval file" "which this run writes" --eval "$IO/ev.jsonl" \
  --out "$IO/hard.jsonl" "$OKJ"
intact "decontaminate: hits file a hard link of --eval" "$IO/ev.jsonl" "$EV_SHA"
for side in k.report.json k.jsonl.tmp k.removed.jsonl.tmp; do
  cp "$OKJ" "$IO/$side"
  dd_err "an input is the side file $side" "the input .*which this run writes" --out "$IO/k.jsonl" "$IO/$side"
  intact "dedup: the input is $side" "$IO/$side" "$OK_SHA"
  rm -f "$IO/$side"
done

# prepare.py (Debian's python3 with tokenizers): its outputs against its inputs (item 2), the
# merge's globs (item 4), the tokenization workers on the error paths (item 0)
PPY=/usr/bin/python3
PP=("$PPY" "$ROOT/dev/data/prepare.py" --quiet)
if ! "$PPY" -c "import tokenizers" 2>/dev/null; then
  fail "prepare setup" "$PPY cannot import tokenizers (bash dev/install.sh)"; attack_done; exit
fi
# pp_err NAME PATTERN ARGS...: prepare.py ARGS fails with exactly one 'prepare.py: error:' line matching PATTERN
pp_err() {
  local n=$1 p=$2; shift 2
  run_case "${PP[@]}" "$@"
  local why
  if why="$(bad_run)"; then fail "prepare: $n" "$why"; return; fi
  if [ "$RC" -eq 0 ]; then fail "prepare: $n" "exit 0 (silently accepted)"; return; fi
  if [ "$(wc -l < "$ERR")" -ne 1 ] || ! grep -q '^prepare.py: error: ' "$ERR"; then
    fail "prepare: $n" "not one error line: $(head -c 300 "$ERR" | tr '\n' ' ')"; return; fi
  if ! grep -Eq -e "$p" "$ERR"; then fail "prepare: $n" "message does not match /$p/: $(cat "$ERR")"; return; fi
  pass "prepare: $n"
}
P="$D/prep"; mkdir -p "$P"
"$PY" - "$P" <<'PYEOF'
import json, random, sys
r = random.Random(1)
w = "alpha beta gamma delta epsilon zeta eta theta iota kappa lambda mu nu xi omicron pi rho sigma".split()
with open(sys.argv[1] + "/corpus.jsonl", "w") as f:
    for i in range(3000):
        f.write(json.dumps({"text": " ".join(r.choice(w) for _ in range(r.randint(5, 80)))}) + "\n")
PYEOF
CORP="$P/corpus.jsonl"; CORP_SHA=$(sha256sum < "$CORP")
expect_ok "prepare control: --tokenizer-only" -- "${PP[@]}" --out "$P/tok" --prefix t --train-bpe 300 --tokenizer-only "$CORP"
TOK="$P/tok/t_tokenizer.json"
for name in c_manifest.json c_train_7.bin c_val_000.bin.tmp c_tokenizer.json.tmp; do
  cp "$CORP" "$P/$name"
  pp_err "an input named $name in --out" "which this run writes or deletes" --out "$P" --prefix c --tokenizer "$TOK" \
    "$P/$name"
  intact "prepare: an input named $name in --out" "$P/$name" "$CORP_SHA"
  rm -f "$P/$name"
done
cp "$CORP" "$P/c_train_000.bin"; ln -s "$P/c_train_000.bin" "$D/via_link.jsonl"
pp_err "an input that is a symlink to a shard name in --out" "which this run writes or deletes" --out "$P" \
  --prefix c --tokenizer "$TOK" "$D/via_link.jsonl"
intact "prepare: an input symlinked to c_train_000.bin" "$P/c_train_000.bin" "$CORP_SHA"
rm -f "$P/c_train_000.bin"
cp "$TOK" "$P/c_tokenizer.json"; echo >> "$P/c_tokenizer.json"; TOKX_SHA=$(sha256sum < "$P/c_tokenizer.json")
pp_err "--tokenizer that is the run's own tokenizer.json, other bytes" "--tokenizer .*which this run writes" --out "$P" \
  --prefix c --tokenizer "$P/c_tokenizer.json" "$CORP"
intact "prepare: --tokenizer is its own output" "$P/c_tokenizer.json" "$TOKX_SHA"
rm -f "$P/c_tokenizer.json"
cp "$CORP" "$P/c_train_x_train_000.bin"
expect_ok "prepare control: a run of prefix c" -- "${PP[@]}" --out "$P" --prefix c --tokenizer "$TOK" --workers 2 "$CORP"
intact "prepare: prefix c_train_x's file beside a run of prefix c" "$P/c_train_x_train_000.bin" "$CORP_SHA"
rm -f "$P/c_train_x_train_000.bin"
# the merge: a stray part-like shard and an old merged-name shard must not join the glob it prints
M="$D/merge"; mkdir -p "$M"
for k in 1 2 3; do
  "${PP[@]}" --out "$M" --prefix m --tokenizer "$TOK" --shard-tokens 5000 --workers 1 --part "$k/3" "$CORP" >/dev/null 2>&1
done
cp "$M/m_p0001of0003_train_000.bin" "$M/m_p0002of0003_train_077.bin"
cp "$M/m_p0001of0003_train_000.bin" "$M/m_train_099.bin"
run_case "${PP[@]}" --merge --out "$M" --prefix m
GLOB_I=$("$PY" -c 'import shlex, sys; w = shlex.split(sys.argv[1].split("train on", 1)[1]); print(w[w.index("-i") + 1])' \
  "$(tail -n 1 "$OUT")" 2>/dev/null)
MATCH=$("$PY" - "$M" "$GLOB_I" <<'PYEOF'
import glob, json, os, sys
m = json.load(open(os.path.join(sys.argv[1], "m_manifest.json")))
got = sorted(os.path.basename(p) for p in glob.glob(sys.argv[2]))
print("ok" if got == [s["file"] for s in m["train"]] and got else f"glob {got} vs manifest {[s['file'] for s in m['train']]}")
PYEOF
)
if [ "$RC" -eq 0 ] && [ "$MATCH" = ok ]; then pass "prepare --merge: the printed -i glob takes the manifest's shards only (strays beside)"
else fail "prepare --merge: the printed -i glob takes the manifest's shards only (strays beside)" "rc $RC: $MATCH"; fi
cp "$M/m_p0001of0003_train_000.bin" "$M/m_train_x_train_000.bin"
pp_err "--merge with another prefix's file under its glob" "m_train_x_train_000.bin is not a shard of m" --merge \
  --out "$M" --prefix m
# the workers on the error path: a bad line after 3,000 documents, 2 workers busy; then Ctrl-C
{ cat "$CORP"; echo '{not json'; head -n 100 "$CORP"; } > "$P/late.jsonl"
pp_err "bad JSON after 3,000 documents with --workers 2" "late.jsonl:3001: bad JSON" --out "$P/late" --tokenizer "$TOK" \
  --workers 2 --chunk-bytes 2000 "$P/late.jsonl"
if pgrep -f "$P/late " >/dev/null; then fail "prepare: bad JSON with --workers 2: no process left" "$(pgrep -af "$P/late ")"
else pass "prepare: bad JSON with --workers 2: no process left"; fi
mkfifo "$P/fifo.jsonl"
( exec 3>"$P/fifo.jsonl"; cat "$CORP" >&3; sleep 20 ) &
FEEDER=$!
# SIGINT to prepare.py and its workers after 3 s, as Ctrl-C gives it (reset to default first: a
# background job inherits it ignored)
run_case "$PY" -c 'import os, signal, sys; signal.signal(signal.SIGINT, signal.SIG_DFL); os.execvp(sys.argv[1], sys.argv[1:])' \
  timeout --preserve-status -s INT 3 "${PP[@]}" --out "$P/ctrlc" --tokenizer "$TOK" --workers 2 --chunk-bytes 2000 \
  "$P/fifo.jsonl"
kill "$FEEDER" 2>/dev/null; wait "$FEEDER" 2>/dev/null
if [ "$RC" -eq 130 ] && [ "$(wc -l < "$ERR")" -eq 1 ] && grep -q "interrupted" "$ERR" && ! pgrep -f "$P/ctrlc " >/dev/null; then
  pass "prepare: Ctrl-C with --workers 2 mid-run: exit 130, one line, no process left"
else fail "prepare: Ctrl-C with --workers 2 mid-run: exit 130, one line, no process left" \
  "rc $RC, $(head -c 300 "$ERR" | tr '\n' ' ') $(pgrep -af "$P/ctrlc ")"; fi
attack_done
