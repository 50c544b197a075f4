#!/usr/bin/env bash
# family_firstuse.sh: a new user's first commands (issue 45). An empty value of any word or path
# flag (an unset shell variable: -o "$OUT") is refused, -j '' alone meaning "no validation data";
# a mistyped flag gets "did you mean"; a layout that needs N ranks says N; -layout auto on the CPU
# says which GPUs it planned for; a vocabulary larger than the data's is a warning before step 1;
# -steps 0 evaluates what it has (validation, a sample); every script answers -h without running.
source "$(dirname "$0")/lib.sh"
RUN=("$TRAIN" "${TINY[@]}" -steps 1)

# 1. empty values: every WORD and PATH flag of -h
flags=$("$TRAIN" -h | awk '$2 == "WORD" || $2 == "PATH" { print $1 }')
[ "$(echo "$flags" | wc -w)" -ge 15 ] && pass "the -h table lists the word and path flags" || fail "the -h table lists the word and path flags" "$flags"
for f in $flags; do
  if [ "$f" = "-j" ]; then
    expect_ok "-j '' means no validation data" -- "${RUN[@]}" -j ''
    continue
  fi
  expect_err "$f '' (empty) is refused" "^error: $f has an empty value" -- "${RUN[@]}" "$f" ''
  expect_err "-check $f '' is refused too" "^error: $f has an empty value" -- "$TRAIN" -check "${TINY[@]}" "$f" ''
done

# 2. did you mean
for pair in -modle:-model -lrr:-lr --steps:-steps -stpes:-steps -tokns:-tokens -val-evry:-val-every \
  -ckpt_every:-ckpt-every -Seed:-seed -resum:-resume -blnd:-blend; do
  typo=${pair%%:*}; want=${pair#*:}
  expect_err "$typo: did you mean $want?" "unknown flag '$typo': did you mean $want\\?" -- "${RUN[@]}" "$typo" 5
done
expect_err "-x (near several flags): no guess" "unknown flag '-x' \\(run with -h" -- "${RUN[@]}" -x 5
expect_err "-qqqqqq (near none): no guess" "unknown flag '-qqqqqq' \\(run with -h" -- "${RUN[@]}" -qqqqqq 5

# 3. a layout's rank count
expect_err "one process with -tp 2 -pp 2 -dp 2: needs exactly 8 ranks" "need exactly 8 ranks, not 1: launch with mpirun -np 8" \
  -- "${RUN[@]}" -tp 2 -pp 2 -dp 2
expect_err "-check -world 4 with -tp 2 -pp 2 -dp 2: exactly 8" "need exactly 8 ranks, not 4" \
  -- "$TRAIN" -check -world 4 "${TINY[@]}" -tp 2 -pp 2 -dp 2
expect_ok "control: -check -world 8 -tp 2 -pp 2 -dp 2" -- "$TRAIN" -check -world 8 "${TINY[@]}" -tp 2 -pp 2 -dp 2

# 4. -layout auto on the CPU says which machine it planned for
run_case "$TRAIN" -check -layout auto "${TINY[@]}"
if [ "$RC" -eq 0 ] && grep -q "layout auto: planned for selene-a100 GPUs (80 GiB, 312 TFLOP/s each), not this machine" "$OUT"
then pass "-layout auto on the CPU: says it planned for selene-a100 GPUs"
else fail "-layout auto on the CPU: says it planned for selene-a100 GPUs" "exit $RC: $(head -c 300 "$OUT")"; fi
run_case "$TRAIN" -check -layout auto -cluster h100 "${TINY[@]}"
if [ "$RC" -eq 0 ] && grep -q "layout auto: planned for h100 GPUs" "$OUT"; then pass "-layout auto -cluster h100: says h100"
else fail "-layout auto -cluster h100: says h100" "exit $RC: $(head -c 300 "$OUT")"; fi

# 5. a vocabulary larger than the data's
run_case "$TRAIN" -seq 32 -gb 4 -ramp off -threads 1 -steps 1
if [ "$RC" -eq 0 ] && grep -q "warning: the training shards' largest token id is 8191, but V=50257: .*(-V 8192" "$OUT" &&
  [ "$(grep -n 'warning: the training shards' "$OUT" | cut -d: -f1)" -lt "$(grep -n '^step ' "$OUT" | head -1 | cut -d: -f1)" ]
then pass "bare ./train_gpt (V=50257 on the 8192-token KJV shards): a warning before step 1"
else fail "bare ./train_gpt (V=50257 on the 8192-token KJV shards): a warning before step 1" "exit $RC"; fi
run_case "${RUN[@]}"
if [ "$RC" -eq 0 ] && ! grep -q "largest token id" "$OUT"; then pass "control: -V 8192 on KJV: no warning"
else fail "control: -V 8192 on KJV: no warning" "exit $RC"; fi

# 6. -steps 0 evaluates the weights once
run_case "$TRAIN" "${TINY[@]}" -steps 0 -val-samples 8
if [ "$RC" -eq 0 ] && grep -q "^val       0 | val_loss " "$OUT"; then pass "-steps 0: validation on the -j data (no -val-every needed)"
else fail "-steps 0: validation on the -j data (no -val-every needed)" "exit $RC: $(tail -c 300 "$OUT")"; fi
run_case "$TRAIN" "${TINY[@]}" -steps 0 -val-samples 8 -tokenizer "$ROOT/dev/data/kjv/kjv_tokenizer.bin" -sample-len 8
if [ "$RC" -eq 0 ] && grep -q "^sample: ." "$OUT"; then pass "-steps 0 with -tokenizer: a sample"
else fail "-steps 0 with -tokenizer: a sample" "exit $RC: $(tail -c 300 "$OUT")"; fi
run_case "$TRAIN" "${TINY[@]}" -steps 0 -j ''
if [ "$RC" -eq 0 ] && ! grep -q "^val " "$OUT"; then pass "control: -steps 0 -j '': nothing to validate, exit 0"
else fail "control: -steps 0 -j '': nothing to validate, exit 0" "exit $RC"; fi

# 7. every script answers -h: its opening comment, exit 0, no work started (20 s at most)
for s in "$ROOT"/scripts/*.sh "$ROOT"/dev/*.sh "$ROOT"/dev/*/*.sh "$ROOT"/tests/attack/run.sh; do
  [ -f "$s" ] || continue
  rel=${s#"$ROOT"/}
  case "$rel" in dev/bench_cpu.sh | dev/data/*) continue ;; esac  # the corpus tools' owner takes these (issue 45)
  CASE_TIMEOUT=20 run_case bash "$s" -h
  second=$(sed -n 2p "$s" | sed 's/^# \?//' | cut -c1-40)
  if [ "$RC" -eq 0 ] && [ -s "$OUT" ] && grep -qF -- "$second" "$OUT"; then pass "bash $rel -h: its opening comment"
  else fail "bash $rel -h: its opening comment" "exit $RC, $(wc -l < "$OUT") lines: $(head -c 120 "$OUT")"; fi
done
attack_done
