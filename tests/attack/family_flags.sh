#!/usr/bin/env bash
# family_flags.sh: every flag with bad values, table-driven. Each case runs `-check`
# (which validates and exits at once), expects a one-line `error:` and a non-zero exit;
# a few valid controls must pass so the family cannot pass by rejecting everything.
# The planner's flags run under -plan. Also the size-overflow and silent-accept defects
# of issue 13 (5, 9, 12), each by its exact reproduction.
source "$(dirname "$0")/lib.sh"
C=("$TRAIN" -check)

# --- controls: valid configurations are accepted
expect_ok "control: defaults" -- "${C[@]}"
expect_ok "control: tiny seq 32" -- "${C[@]}" "${TINY[@]}"
expect_ok "control: 530b layout on 280 nodes" -- "${C[@]}" -model 530b -tp 8 -pp 35 -world 2240 -mb 1
expect_ok "control: -ramp 32 32 12e9" -- "${C[@]}" -ramp 32 32 12e9
expect_ok "control: -ramp auto 32 32" -- "${C[@]}" -ramp auto 32 32
expect_ok "control: -eps 1e-30" -- "${C[@]}" -eps 1e-30
expect_ok "control: -threads 1024" -- "${C[@]}" -threads 1024
expect_ok "control: -steps 1" -- "${C[@]}" -steps 1
expect_ok "control: -on-spike rewind 2 with the guard and checkpoints" -- "${C[@]}" -on-spike rewind 2 -skip-spikes 4 \
  -o "$WORK/rw" -ckpt-every 2
expect_ok "control: -on-spike skip" -- "${C[@]}" -on-spike skip
expect_ok "control: -skip-data 5:3,9:1" -- "${C[@]}" -skip-data 5:3,9:1
expect_ok "control: -layout auto (1 rank)" -- "${C[@]}" -layout auto
expect_ok "control: -layout auto -world 8 -tp 2 (pinned)" -- "${C[@]}" -layout auto -world 8 -tp 2
expect_ok "control: -j ''" -- "${C[@]}" -j ''
expect_ok "control: -o ./-dash" -- "${C[@]}" -o "$WORK/./-dash"
expect_ok "control: -plan" -- "$TRAIN" -plan -cluster h100 -nodes 1 -model 1.3b
expect_ok "control: -plan with -sp 1 -recompute selective -vpp 2" -- "$TRAIN" -plan -cluster h100 -nodes 4 -model 1.3b -sp 1 -recompute selective -vpp 2
expect_ok "control: -ckpt-async 1 -mtbf-hours 1000" -- "${C[@]}" -ckpt-async 1 -mtbf-hours 1000
expect_ok "control: -plan -fs-bw 500 -d2h-bw 40 -mtbf-hours 2000" -- "$TRAIN" -plan -cluster h100 -nodes 4 -model 1.3b \
  -fs-bw 500 -d2h-bw 40 -mtbf-hours 2000
expect_ok "control: -plan -plan-gemm-dim 0 (shape term off)" -- "$TRAIN" -plan -cluster h100 -nodes 1 -model 1.3b -plan-gemm-dim 0
expect_ok "control: -plan -plan-schedule zb-h1 -plan-schedules 1" -- "$TRAIN" -plan -cluster h100 -nodes 4 -model 1.3b \
  -plan-schedule zb-h1 -plan-schedules 1
expect_ok "control: -pp-schedule zb-h1 -pp 4 -vpp 2 -world 4 -L 8" -- "${C[@]}" -pp-schedule zb-h1 -pp 4 -vpp 2 \
  -world 4 -L 8
expect_ok "control: -pp-schedule interleaved -vpp 2" -- "${C[@]}" -pp-schedule interleaved -pp 2 -vpp 2 -world 2
expect_ok "control: -layout auto -world 8 -pp-schedule zb-h1 (pinned)" -- "${C[@]}" -layout auto -world 8 \
  -pp-schedule zb-h1
expect_ok "control: -zero 3 -grad-reduce bf16 -world 2" -- "${C[@]}" -zero 3 -grad-reduce bf16 -world 2

# --- generic bad values for every numeric flag
INT_FLAGS=(-L -H -heads -seq -V -vpad -scaled-init -tp -pp -dp -mb -zero -recompute -shuffle
           -sample-len -threads -spike-window -spike-stop -world -ckpt-async)
I64_FLAGS=(-gb -warmup -decay -tokens -steps -val-every -val-samples -ckpt-every -sample-every -seed)
F64_FLAGS=(-minlr-frac -beta1 -beta2 -eps -wd -clip -skip-spikes -noise-beta -peak -lr -init-std-mult -mtbf-hours)
for f in "${INT_FLAGS[@]}" "${I64_FLAGS[@]}" "${F64_FLAGS[@]}"; do
  for v in "" abc 1x nan inf -inf 1e999 " 1" "1 2"; do
    expect_err "$f '$v'" -- "${C[@]}" "$f" "$v"
  done
  expect_err "$f (no value)" "needs 1 value" -- "${C[@]}" "$f"
done
for f in "${INT_FLAGS[@]}" "${I64_FLAGS[@]}"; do
  expect_err "$f 1.5" -- "${C[@]}" "$f" 1.5
  expect_err "$f 1e30" -- "${C[@]}" "$f" 1e30
done
for f in "${INT_FLAGS[@]}"; do expect_err "$f 4294967297" -- "${C[@]}" "$f" 4294967297; done

# --- per-flag out-of-range values ("flag value [more flags]" per line)
while IFS= read -r line; do
  [ -z "$line" ] && continue
  # shellcheck disable=SC2206
  args=($line)
  expect_err "${line}" -- "${C[@]}" "${args[@]}"
done <<'TABLE'
-L 0
-L -1
-L 5000
-H 0
-H -128
-H 262144 -heads 4
-H 130 -heads 4
-heads 0
-heads 3
-heads 256
-seq 0
-seq -32
-seq 2000000
-V 0
-V -5
-V 65537
-V 100000
-vpad 0
-vpad -1024
-vpad 70000
-vpad 2147483647
-scaled-init 2
-scaled-init -1
-tp 0
-tp -1
-tp 3
-tp 65536 -pp 65536
-tp 70000
-pp 0
-pp -2
-pp 3
-pp 70000
-dp -1
-dp 2
-dp 20000000
-mb 0
-mb -1
-mb 2000000
-mb 100000
-zero 4
-zero -1
-grad-reduce fp16
-grad-reduce ''
-grad-reduce bf16
-grad-reduce bf16 -zero 0 -world 2 -dp 2
-recompute 2
-shuffle 2
-shuffle -1
-comm tcp
-comm ''
-model bogus
-model
-gb 0
-gb -1920
-gb 4294967296
-gb 1e12
-lr -1
-lr autox
-lr 1e300
-warmup -1
-decay -1
-warmup 100 -decay 50
-minlr-frac -0.1
-minlr-frac 1.5
-beta1 1
-beta1 -0.1
-beta2 1
-beta2 1.5
-beta2 0.99999999999
-beta1 0.999999999999
-eps 0
-eps -1e-8
-eps 1e-50
-eps 1e-300
-wd -0.1
-wd 1e300
-clip -1
-clip 1e300
-init-std-mult 0
-init-std-mult -1
-init-std-mult 1e300
-tokens 0
-tokens -1
-steps -2
-steps -5
-skip-spikes -1
-on-spike
-on-spike rewind
-on-spike rewind 0
-on-spike rewind -3
-on-spike rewind 1e7
-on-spike rewind x
-on-spike panic
-on-spike rewind 2 -skip-spikes 4
-on-spike rewind 2 -skip-spikes 4 -o /tmp
-on-spike rewind 2 -o /tmp -ckpt-every 2
-max-rewinds 0
-max-rewinds 9
-skip-data x
-skip-data 5
-skip-data 5:0
-skip-data -5:3
-skip-data 10:3,5:3
-skip-data 1:1,2:1,3:1,4:1,5:1,6:1,7:1,8:1,9:1
-skip-data 5:2199023255553
-skip-data 5:3,
-layout bogus
-layout AUTO
-layout auto -tp 3
-layout auto -world 7 -gpus-per-node 2
-layout auto -cluster nowhere
-layout auto -gpu-mem 0.001
-layout auto -plan-schedule zb-h1
-spike-window 1
-spike-window 0
-spike-window 2000000
-spike-stop -1
-noise-beta 1
-noise-beta -0.5
-val-every -1
-val-samples -1
-ckpt-every -1
-ckpt-every 5
-sample-every -1
-sample-len -1
-sample-every 1 -sample-len 256
-seed -1
-seed 1e19
-peak -1
-peak -0.5
-threads -1
-threads 1025
-threads 100000
-world 0
-world -1
-world 20000000
-world 3
-world 8 -tp 8
-world 8 -pp 8
-world 8 -tp 2 -pp 2 -dp 3
-world 4 -dp 4 -gb 6 -ramp off
-world 4 -dp 4 -ramp 6 32 1e9 -gb 1926
-ramp
-ramp 32
-ramp 32 32
-ramp x y z
-ramp 0 32 1e9
-ramp -32 32 1e9
-ramp 32 0 1e9
-ramp 32 -32 1e9
-ramp 32 32 0
-ramp 32 32 -1
-ramp 4096 32 1e9
-ramp 32 33 1e9
-ramp 1920 32 1e9
-ramp auto
-ramp auto 32
-ramp auto 0 32
-ramp auto 32 0
-ramp auto -32 32
-ramp auto x 32
-resume
-resume -o x -init-from y
-init-from /nonexistent/ckpt
-foo
--gb 1920
gb
-
--
-plan -cluster bogus -nodes 1
-plan -cluster h100 -nodes 0
-plan -cluster h100 -nodes -3
-plan -cluster h100 -nodes x
-plan -cluster h100 -nodes 1 -scaling 1,,2
-plan -cluster h100 -nodes 1 -scaling x
-plan -cluster h100 -nodes 1 -scaling 0
-plan -cluster h100 -nodes 1 -plan-eff 0
-plan -cluster h100 -nodes 1 -plan-eff 2
-plan -cluster h100 -nodes 1 -plan-net-eff -1
-plan -cluster h100 -nodes 1 -plan-hbm-eff 1.5
-plan -cluster h100 -nodes 1 -plan-headroom 1
-plan -cluster h100 -nodes 1 -plan-workspace -1
-plan -cluster h100 -nodes 1 -plan-top -1
-plan -cluster h100 -nodes 1 -gpus-per-node 0
-plan -cluster h100 -nodes 1 -gpu-mem -1
-plan -cluster h100 -nodes 1 -bw-hbm 0
-plan -cluster h100 -nodes 1 -bw-intra -5
-plan -cluster h100 -nodes 1 -bw-inter nan
-plan -cluster h100 -nodes 1 -latency -1
-plan -cluster h100 -nodes 1 -latency-intra x
-plan -cluster h100 -nodes 1 -fs-bw 0
-plan -cluster h100 -nodes 1 -fs-bw x
-plan -cluster h100 -nodes 1 -d2h-bw -1
-plan -cluster h100 -nodes 1 -d2h-bw nan
-plan -cluster h100 -nodes 1 -mtbf-hours 0
-ckpt-async 2
-ckpt-async -1
-mtbf-hours 0
-mtbf-hours -1
-mtbf-hours 2e9
-plan -cluster h100 -nodes 1 -plan-csv -x
-plan -cluster h100 -nodes 1 -plan-csv
-plan -cluster h100 -nodes 1 -plan-gemm-dim -1
-plan -cluster h100 -nodes 1 -plan-gemm-dim x
-plan -cluster h100 -nodes 1 -sp 2
-plan -cluster h100 -nodes 1 -vpp 0
-plan -cluster h100 -nodes 1 -recompute half
-plan -cluster h100 -nodes 1 -plan-schedule zb-v
-plan -cluster h100 -nodes 1 -plan-schedule 1f1b,
-plan -cluster h100 -nodes 1 -plan-w-share 2
-plan -cluster h100 -nodes 1 -plan-schedules 2
-plan -cluster h100 -nodes 1 -vpp 2 -plan-schedule zb-h1
-pp-schedule zb
-pp-schedule ZB-H1
-pp-schedule zb-v
-pp-schedule 1f1b,zb-h1
-pp-schedule interleaved
-pp-schedule interleaved -pp 2 -vpp 1 -world 2
-pp-schedule
-pp-schedule zb-h1-and-a-value-longer-than-the-field
TABLE

# --- path flags: a value that is a flag, an over-long path (never truncated)
LONG="$WORK/$(printf 'p%.0s' $(seq 600))"
for f in -i -j -o -log -init-from -tokenizer; do
  expect_err "$f -resume (flag taken as a path)" "needs a path" -- "${C[@]}" "$f" -resume
  expect_err "$f -x" "needs a path" -- "${C[@]}" "$f" -x
  expect_err "$f 600-character path" "limit is 511" -- "${C[@]}" "$f" "$LONG"
done

# --- issue 13's exact reproductions (defects 5 and 12), message checked
expect_err "defect 5: -gb 4294967296" "-gb must be in" -- "${C[@]}" "${TINY[@]}" -gb 4294967296
expect_err "defect 5: -vpad 2147483647" "vpad <= 65536" -- "${C[@]}" "${TINY[@]}" -vpad 2147483647
expect_err "defect 5: -check -tp 65536 -pp 65536" "layout beyond the limits" -- "${C[@]}" -tp 65536 -pp 65536
expect_err "defect 12: -ramp S 0 T" "positive START" -- "${C[@]}" -ramp 32 0 1e9
expect_err "defect 12: -ramp auto S 0" "positive START" -- "${C[@]}" -ramp auto 32 0
expect_err "defect 12: -o -resume" "needs a path" -- "${C[@]}" -o -resume
expect_err "defect 12: -ckpt-every without -o" "needs -o" -- "${C[@]}" -ckpt-every 10
expect_err "defect 12: tokenizer vocab < V" "fewer than the vocabulary" -- "${C[@]}" -tokenizer "$ROOT/dev/data/kjv/kjv_tokenizer.bin"
expect_ok  "defect 12 control: tokenizer vocab = V" -- "${C[@]}" -V 8192 -tokenizer "$ROOT/dev/data/kjv/kjv_tokenizer.bin"
expect_err "defect 12: -resume with -init-from" "exclude each other" -- "${C[@]}" -o "$WORK/o" -resume -init-from "$WORK"
mkdir -p "$WORK/nodone"
expect_err "defect 12: -init-from without DONE" "no DONE" -- "${C[@]}" -init-from "$WORK/nodone"
expect_err "defect 12: -threads unbounded" "-threads must be in" -- "${C[@]}" -threads 1000000
expect_err "defect 12: -eps underflow in fp32" "underflows" -- "${C[@]}" -eps 1e-46
expect_err "defect 12: -steps -5" "-steps" -- "${C[@]}" -steps -5
expect_err "defect 12: -world 0" "-world" -- "${C[@]}" -world 0
expect_err "defect 12: -peak -1" "-peak" -- "${C[@]}" -peak -1
expect_err "defect 9: -o 600 characters" "limit is 511" -- "${C[@]}" -o "$LONG"
# a real run, not only -check: the same limits hold where the numbers are used
expect_err "defect 5 (run): -gb 4294967296" "-gb must be in" -- "$TRAIN" "${TINY[@]}" -gb 4294967296 -steps 1
expect_err "defect 5 (run): -vpad 2147483647" "vpad" -- "$TRAIN" "${TINY[@]}" -vpad 2147483647 -steps 1
# -h comes from the flag table (llmc/host/config.h): defaults shown, and every flag it lists is
# one the parser knows
HELP="$("$TRAIN" -h 2>&1)"
for pat in '^  -beta2 X .*\[0\.95\]$' '^  -gb N .*\[1920\]$' '^  -lr X\|auto .*\[5e-05\]$' '^  -warmup N .*\[1000000000\]$' \
    '^  -ramp S I TOKENS .*\[32 32 12e9\]$' '^  -i PATH .*\[dev/data/kjv/kjv_train_\*\.bin\]$'; do
  if grep -Eq -- "$pat" <<<"$HELP"; then pass "-h shows /$pat/"; else fail "-h shows /$pat/" "not in -h"; fi
done
nflags=0
for f in $(grep -oE '^  -[a-z0-9-]+' <<<"$HELP"); do
  nflags=$((nflags + 1))
  run_case "$TRAIN" "$f"
  if grep -q "unknown flag" "$ERR"; then fail "-h lists $f, which the parser knows" "$(head -c 200 "$ERR")"; fi
done
if [ "$nflags" -ge 55 ]; then pass "-h lists $nflags flags, each known to the parser"; else fail "-h lists the flags" "only $nflags"; fi
# numbers and strings as typed (issue: integers exact, no hex, no underflow, nothing truncated)
for a in "-steps 0x2" "-L 0x2" "-lr 1e-400" "-clip 1e-400" "-timeout 1e16" "-timeout 1e-300" "-timeout 0.5" \
    "-lr inf" "-seed 1e300" "-seed 18446744073709551616"; do
  expect_err "numbers: $a" "bad value" -- "$TRAIN" -check -V 8192 $a
done
expect_ok "numbers: -seed 9007199254740993 (2^53 + 1, above a double's exact integers)" -- "$TRAIN" -check -V 8192 \
  -seed 9007199254740993
expect_ok "numbers: -timeout 1 and -timeout 0" -- "$TRAIN" -check -V 8192 -timeout 1 -timeout 0
LONGIDS="$(printf '99,%.0s' $(seq 1 200))99"
expect_err "strings: a 599-character -prompt is refused, not cut" "limit is 511" -- "$TRAIN" -check -V 8192 \
  -prompt "$LONGIDS"
expect_err "strings: a 520-character -eval-file is refused, not cut" "limit is 511" -- "$TRAIN" -check -V 8192 \
  -eval-file "/tmp/$(printf 'e%.0s' $(seq 1 515))"
expect_err "strings: a 520-character -dump-logits is refused, not cut" "limit is 511" -- "$TRAIN" -check -V 8192 \
  -dump-logits "/tmp/$(printf 'd%.0s' $(seq 1 515))"
expect_err "strings: -eval-file given a flag" "needs a path" -- "$TRAIN" -check -V 8192 -eval-file -resume
# -prompt-text: the text is encoded with the tokenizer.json beside -tokenizer FILE.bin (llmc/host/bpe.h)
KJVTOK="$ROOT/dev/data/kjv/kjv_tokenizer"
PT="$WORK/prompt"; mkdir -p "$PT/fifo" "$PT/dir" "$PT/none" "$PT/cut" "$PT/wordpiece" "$PT/bent"
for d in fifo dir none cut wordpiece bent; do cp "$KJVTOK.bin" "$PT/$d/tok.bin"; done
mkfifo "$PT/fifo/tok.json"; mkdir "$PT/dir/tok.json"
head -c 100000 "$KJVTOK.json" > "$PT/cut/tok.json"
sed 's/"type": "BPE"/"type": "WordPiece"/' "$KJVTOK.json" > "$PT/wordpiece/tok.json"
cp "$KJVTOK.json" "$PT/bent/tok.json"
# token 20's one byte becomes '!': the .bin no longer matches the .json
printf '\x21' | dd of="$PT/bent/tok.bin" bs=1 seek=$((1024 + 2 * 20 + 1)) conv=notrunc status=none
PTC=("$TRAIN" -check "${TINY[@]}" -tokenizer "$KJVTOK.bin")
expect_ok "-prompt-text: control" -- "${PTC[@]}" -prompt-text "And God said"
expect_err "-prompt-text: without -tokenizer" "needs -tokenizer" -- "$TRAIN" -check "${TINY[@]}" -prompt-text "And God"
expect_err "-prompt-text: with -prompt" "exclude each other" -- "${PTC[@]}" -prompt-text "And God" -prompt 295,386
expect_err "-prompt-text: no .json beside the .bin" "cannot open tokenizer json .*tok\.json.*prepare\.py" -- \
  "$TRAIN" -check "${TINY[@]}" -tokenizer "$PT/none/tok.bin" -prompt-text "And God said"
expect_err "-prompt-text: a truncated .json" "tok\.json: invalid JSON" -- \
  "$TRAIN" -check "${TINY[@]}" -tokenizer "$PT/cut/tok.bin" -prompt-text "And God said"
expect_err "-prompt-text: a WordPiece .json" "model type WordPiece is not supported" -- \
  "$TRAIN" -check "${TINY[@]}" -tokenizer "$PT/wordpiece/tok.bin" -prompt-text "And God said"
expect_err "-prompt-text: a .json that is a FIFO (no hang)" "is a FIFO" -- \
  "$TRAIN" -check "${TINY[@]}" -tokenizer "$PT/fifo/tok.bin" -prompt-text "And God said"
expect_err "-prompt-text: a .json that is a directory" "is a directory" -- \
  "$TRAIN" -check "${TINY[@]}" -tokenizer "$PT/dir/tok.bin" -prompt-text "And God said"
expect_err "-prompt-text: a .bin that is not the .json's pair" "disagree on token 20: not a pair" -- \
  "$TRAIN" -check "${TINY[@]}" -tokenizer "$PT/bent/tok.bin" -prompt-text "And God said"
expect_err "-prompt-text: invalid UTF-8" "not valid UTF-8 \(byte 4 " -- "${PTC[@]}" \
  -prompt-text "$(printf 'And \xc3\x28God')"
expect_err "-prompt-text: a lone surrogate in UTF-8" "not valid UTF-8" -- "${PTC[@]}" \
  -prompt-text "$(printf '\xed\xa0\x80')"
expect_err "-prompt-text: 600 characters" "limit is 511" -- "${PTC[@]}" -prompt-text "$(printf 'w%.0s' $(seq 600))"
expect_err "-prompt-text: more tokens than -seq 32 holds" "is 61 tokens, too many for seq 32" -- "${PTC[@]}" \
  -prompt-text "$(printf 'word %.0s' $(seq 60))"
expect_err "-prompt-text: an id not below -V" "token 8191, not below V=8000" -- "$TRAIN" -check -V 8000 \
  -tokenizer "$KJVTOK.bin" -prompt-text "Amen<|endoftext|>"
expect_ok "-prompt-text: a run samples after the text" -- "$TRAIN" "${TINY[@]}" -steps 0 -j '' \
  -tokenizer "$KJVTOK.bin" -sample-len 8 -prompt-text "And God said"
if grep -q "^sample: ." "$OUT"; then pass "-prompt-text: the sample is printed"
else fail "-prompt-text: the sample is printed" "no sample line"; fi
# 200 tabs: escaped in the run record (-o DIR/config.json), each takes 6 bytes
TABS="$(printf '\t%.0s' $(seq 200))And"
expect_ok "-prompt-text: 200 tabs, recorded with -o" -- "$TRAIN" "${TINY[@]}" -seq 256 -steps 0 -j '' -sample-len 1 \
  -tokenizer "$KJVTOK.bin" -prompt-text "$TABS" -o "$PT/tabs"
if /usr/bin/python3 -c 'import json, sys; a = json.load(open(sys.argv[1]))["argv"]; sys.exit(sys.argv[2] not in a)' \
    "$PT/tabs/config.json" "$TABS"; then pass "-prompt-text: the run record holds the text"
else fail "-prompt-text: the run record holds the text" "$(head -c 200 "$PT/tabs/config.json")"; fi
attack_done
