#!/usr/bin/env bash
# run.sh: bounded libFuzzer runs, one per target, on the committed seed corpus (which
# also holds every crash found so far as a regression input: all of them are replayed
# first). New inputs go to a temporary directory, never into the committed corpus.
#   bash tests/fuzz/run.sh SECONDS TARGET...      (make fuzz: 60 s each; make test: 6 s)
# A crash leaves its input in tests/fuzz/crashes/; after fixing the bug, copy it into
# tests/fuzz/corpus/TARGET/ as regress-WHAT.bin so it is replayed forever.
set -u
DIR="$(cd "$(dirname "$0")" && pwd)"
secs="${1:-15}"; shift || true
targets=("$@"); [ ${#targets[@]} -eq 0 ] && targets=(shard tokenizer flags ckpt cloze blend bpe record)
pass=0; fail=0
mkdir -p "$DIR/crashes"
for t in "${targets[@]}"; do
  new="$(mktemp -d "${TMPDIR:-/tmp}/fuzz_$t.XXXXXX")"
  log="$new.log"
  timeout -k 10 $((secs + 120)) "$DIR/bin/fuzz_$t" -max_total_time="$secs" -rss_limit_mb=2048 -timeout=10 \
      -artifact_prefix="$DIR/crashes/$t-" "$new" "$DIR/corpus/$t" >"$log" 2>&1
  rc=$?
  runs="$(grep -Eo 'Done [0-9]+ runs' "$log" | grep -Eo '[0-9]+' | tail -1)"
  if [ "$rc" -eq 0 ]; then pass=$((pass + 1)); echo "PASS fuzz_$t: ${runs:-?} inputs in ${secs}s, $(ls "$DIR/corpus/$t" | wc -l) corpus files replayed"
  else fail=$((fail + 1)); echo "FAIL fuzz_$t (exit $rc):"; grep -E "ERROR|runtime error|SUMMARY|Test unit written" "$log" | head -5; fi
  rm -rf "$new" "$log"
done
echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
