#!/usr/bin/env bash
# test_cpu_repro.sh: the CPU trainer gives bit-identical results whatever the thread
# count and whichever GEMM micro-kernel runs (LLMC_CPU_ISA=avx512|avx2|generic, every one
# this CPU has). Trains `tiny` for 3 steps on the KJV corpus with an evaluation and a
# sample, and compares the step losses and gradient norms (all 9 printed digits of the
# JSONL log), the validation loss and the sample text against the first configuration. And
# that asking for thread binding (OMP_PROC_BIND) keeps every CPU.
# Ends with "N passed, M failed"; non-zero exit on any difference.
set -uo pipefail
TRAIN_GPT=${TRAIN_GPT:-./train_gpt}
DATA=${DATA:-dev/data/kjv}
OUT=${OUT:-$(mktemp -d)}
for f in "$TRAIN_GPT" "$DATA/kjv_train_000.bin" "$DATA/kjv_tokenizer.bin"; do
  [ -e "$f" ] || { echo "test_cpu_repro.sh: $f is missing (make train_gpt data)" >&2; exit 1; }
done
isas="generic"
grep -qw avx2 /proc/cpuinfo && grep -qw fma /proc/cpuinfo && isas="$isas avx2"
grep -qw avx512f /proc/cpuinfo && isas="$isas avx512"

# one run -> its numbers (no timings) in $OUT/$1.txt
run() { # name isa threads
  LLMC_CPU_ISA=$2 "$TRAIN_GPT" -model tiny -seq 64 -V 8192 -vpad 1024 \
    -i "$DATA/kjv_train_*.bin" -j "$DATA/kjv_val_*.bin" -tokenizer "$DATA/kjv_tokenizer.bin" \
    -mb 4 -gb 8 -ramp off -lr 3e-3 -warmup 0 -steps 3 -val-every 3 -val-samples 8 \
    -sample-every 3 -sample-len 16 -threads "$3" -log "$OUT/$1.jsonl" > "$OUT/$1.out" 2>&1 || return 1
  { grep -o '"step":[0-9]*,"loss":[^,]*' "$OUT/$1.jsonl"; grep -o '"gnorm":[^,]*' "$OUT/$1.jsonl"
    grep -E '^(val |sample:)' "$OUT/$1.out" | sed 's/| ms .*//'; } > "$OUT/$1.txt"
  [ "$(grep -c '"loss"' "$OUT/$1.txt")" -eq 3 ] && grep -q '^val ' "$OUT/$1.txt" && grep -q '^sample:' "$OUT/$1.txt"
}

passed=0; failed=0
ref=""
for isa in $isas; do
  for th in 1 2; do
    name="${isa}_t$th"
    if ! run "$name" "$isa" "$th"; then
      echo "FAIL $name: the run failed:"; tail -3 "$OUT/$name.out"; failed=$((failed + 1)); continue
    fi
    if [ -z "$ref" ]; then ref=$name; echo "reference: $name ($(wc -l < "$OUT/$name.txt") lines of numbers)"; continue; fi
    if cmp -s "$OUT/$ref.txt" "$OUT/$name.txt"; then echo "ok   $name == $ref"; passed=$((passed + 1))
    else echo "FAIL $name != $ref:"; diff "$OUT/$ref.txt" "$OUT/$name.txt" | head -6; failed=$((failed + 1)); fi
  done
done
# thread binding asked for (OMP_PROC_BIND): every CPU of this shell stays an OpenMP place.
# libgomp binds the first thread to place 0 when it loads; a process that re-executed itself
# then (to set GOMP_SPINCOUNT) inherited that one-CPU mask, and all threads shared one core.
ncpu=$(nproc)
if [ "$ncpu" -ge 2 ]; then
  OMP_PROC_BIND=true OMP_DISPLAY_ENV=true "$TRAIN_GPT" -model tiny -seq 64 -V 8192 -vpad 1024 -i "$DATA/kjv_train_*.bin" \
    -mb 4 -gb 4 -ramp off -steps 1 -threads 2 > "$OUT/bind.out" 2>&1
  places=$(grep "OMP_PLACES" "$OUT/bind.out" | tail -1 | grep -o "{" | wc -l)
  if [ "$places" -eq "$ncpu" ]; then echo "ok   OMP_PROC_BIND=true: $places OpenMP places for $ncpu CPUs"; passed=$((passed + 1))
  else echo "FAIL OMP_PROC_BIND=true: $places OpenMP places for $ncpu CPUs: $(grep OMP_PLACES "$OUT/bind.out" | tr -s ' ' | tr '\n' ' ')"; failed=$((failed + 1)); fi
fi
# a bad value is refused with one line, before any work
if LLMC_CPU_ISA=sse9 "$TRAIN_GPT" -model tiny -i "$DATA/kjv_train_*.bin" -steps 1 > "$OUT/bad.out" 2>&1; then
  echo "FAIL LLMC_CPU_ISA=sse9 was accepted"; failed=$((failed + 1))
elif grep -q '^error: LLMC_CPU_ISA=sse9' "$OUT/bad.out"; then echo "ok   LLMC_CPU_ISA=sse9 refused"; passed=$((passed + 1))
else echo "FAIL LLMC_CPU_ISA=sse9: no clear error:"; cat "$OUT/bad.out"; failed=$((failed + 1)); fi
echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
