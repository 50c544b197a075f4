#!/usr/bin/env bash
# bench_ckpt.sh: how long a checkpoint stops the CPU trainer's loop, synchronous (-ckpt-async 0)
# against background (-ckpt-async 1), side by side in one run (a benchmark, not a test: nothing
# is asserted). A model whose checkpoint is a few hundred MB (L 8, H 512: 29.4M parameters,
# 353 MB) trains STEPS steps with a save every EVERY steps, REPS times per mode, the modes
# alternating; the figures are the log's checkpoint events (doc/formats.md): the median over
# every save of stall_ms (the loop blocked: the whole save when synchronous; the copy into the
# staging buffer, the per-step agreements and the commit in the background), write_ms and MB/s.
# The run's last save is left out of the medians: the end of a run waits for its write whatever
# the mode. EVERY must leave the writer time to finish before the next save is due, else the
# next save waits for it (wait_ms, part of its stall).
#
#   bash scripts/bench_ckpt.sh          # needs ./train_gpt and dev/data/kjv (make train_gpt data)
#   STEPS=30 EVERY=6 REPS=3 OUT=/tmp bash scripts/bench_ckpt.sh
# Environment: STEPS [24], EVERY [6], REPS [2], OUT (where the checkpoints go; a local disk) [a
# fresh directory under /tmp], THREADS (trainer threads) [all cores].
set -euo pipefail
source "${LLMC_ROOT:-$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)}/scripts/args.sh" && llmc_args "${BASH_SOURCE[0]}" "$@"
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
STEPS=${STEPS:-24}
EVERY=${EVERY:-6}
REPS=${REPS:-2}
THREADS=${THREADS:-0}
TMP="$(mktemp -d "${OUT:-/tmp}/bench_ckpt.XXXXXX")"
trap 'rm -rf "$TMP"' EXIT
[ -x ./train_gpt ] || { echo "bench_ckpt.sh: ./train_gpt is missing: make train_gpt" >&2; exit 1; }
ARGS="-L 8 -H 512 -heads 8 -seq 64 -V 8192 -mb 1 -gb 2 -ramp off -lr 1e-4 -warmup 0 -decay 1e6 -tokens 1e9
      -i dev/data/kjv/kjv_train_*.bin -j '' -seed 1 -threads $THREADS -steps $STEPS -ckpt-every $EVERY -keep 1"
echo "cpu: $(grep -m1 'model name' /proc/cpuinfo | sed 's/.*: //'), $(nproc) cores; load average $(cut -d' ' -f1-3 /proc/loadavg)"
echo "disk: $(df -h "$TMP" | awk 'NR == 2 {print $1 " (" $2 ")"}'); $STEPS steps, a save every $EVERY, $REPS runs per mode"
median() { sort -g | awk '{v[NR] = $1} END {if (NR == 0) print "nan"; else printf "%.1f", NR % 2 ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2}'; }
field() { sed -nE "s/.*\"$1\":([0-9.]+).*/\\1/p"; }
for mode in 0 1; do : > "$TMP/events_$mode"; : > "$TMP/steps_$mode"; done
for r in $(seq "$REPS"); do
  for mode in 0 1; do
    dir="$TMP/run_${mode}_$r"
    eval ./train_gpt $ARGS -ckpt-async "$mode" -o "$dir" > "$dir.out" 2>&1 || {
      echo "bench_ckpt.sh: the run failed:"; tail -n 5 "$dir.out"; exit 1
    }
    # every save but the run's last
    grep '"event":"checkpoint"' "$dir/log.jsonl" | grep -v "\"step\":$STEPS," >> "$TMP/events_$mode"
    grep '"type":"train"' "$dir/log.jsonl" | awk -F'"ms":' 'NR>1 {split($2,a,","); print a[1]}' >> "$TMP/steps_$mode"
  done
done
bytes=$(head -n 1 "$TMP/events_0" | field bytes)
echo "checkpoint: $(awk -v b="$bytes" 'BEGIN {printf "%.0f MB", b / 1e6}') per save; $(wc -l < "$TMP/events_0") saves per mode in the medians"
printf "%-14s %12s %12s %10s %10s %14s\n" "mode" "stall_ms" "write_ms" "MB/s" "wait_ms" "step ms (all)"
for mode in 0 1; do
  name=$([ "$mode" = 0 ] && echo "synchronous" || echo "-ckpt-async 1")
  printf "%-14s %12s %12s %10s %10s %14s\n" "$name" "$(field stall_ms < "$TMP/events_$mode" | median)" \
    "$(field write_ms < "$TMP/events_$mode" | median)" "$(field MB_s < "$TMP/events_$mode" | median)" \
    "$(field wait_ms < "$TMP/events_$mode" | median)" "$(median < "$TMP/steps_$mode")"
done
s0=$(field stall_ms < "$TMP/events_0" | median)
s1=$(field stall_ms < "$TMP/events_1" | median)
awk -v a="$s0" -v b="$s1" 'BEGIN {printf "median stall, background / synchronous: %.3f\n", b / a}'
