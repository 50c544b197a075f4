#!/usr/bin/env bash
# bench_zb.sh: measured CPU step time of -pp-schedule zb-h1 against 1F1B (a benchmark, not a
# test: nothing is asserted). Two pipeline stages, one rank per core and one thread per rank,
# so a waiting stage leaves its core idle as a GPU would. Each cell trains STEPS steps REPS
# times, the two schedules alternating, and reports the median over the runs of each run's
# median step time (steps 2..STEPS): a shared VM's step times wander by tens of percent. At
# a few micro-batch counts m (the bubble is a larger share when m is small). Beside it, the
# timing model's prediction with F = B = W (1F1B 3m + 3(PP-1), zb-h1 3m + (PP-1) slots): a
# PREDICTION, for comparison only.
#
#   bash scripts/bench_zb.sh            # needs ./train_gpt, mpirun and dev/data/kjv (make data)
#   STEPS=10 REPS=5 bash scripts/bench_zb.sh
set -euo pipefail
source "${LLMC_ROOT:-$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)}/scripts/args.sh" && llmc_args "${BASH_SOURCE[0]}" "$@"
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
STEPS=${STEPS:-8}
REPS=${REPS:-3}
TMP="$(mktemp -d)"
trap 'rm -rf "$TMP"' EXIT
ARGS="-L 8 -H 256 -heads 4 -seq 128 -V 8192 -mb 1 -ramp off -lr 1e-3 -warmup 0 -decay 1e6 -tokens 1e9
      -i dev/data/kjv/kjv_train_*.bin -j '' -seed 1 -threads 1 -steps $STEPS -pp 2"
echo "cpu: $(grep -m1 'model name' /proc/cpuinfo | sed 's/.*: //'), $(nproc) cores; 2 ranks x 1 thread"
printf "%4s %12s %12s %8s %14s\n" "m" "1f1b ms" "zb-h1 ms" "gain" "model gain"
median() { sort -g | awk '{v[NR] = $1} END {printf "%.1f", NR % 2 ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2}'; }
run() { # gb schedule rep -> median ms over steps 2..STEPS
  local dir="$TMP/$1_$2_$3"
  eval mpirun --oversubscribe --allow-run-as-root -x OMP_NUM_THREADS=1 -np 2 ./train_gpt $ARGS -gb "$1" \
    -pp-schedule "$2" -o "$dir" > "$dir.out" 2>&1
  grep '"type":"train"' "$dir/log.jsonl" | awk -F'"ms":' 'NR>1 {split($2,a,","); print a[1]}' | median
}
for m in 2 4 8 16; do
  ra=() rb=()
  for r in $(seq "$REPS"); do
    ra+=("$(run "$m" 1f1b "$r")")
    rb+=("$(run "$m" zb-h1 "$r")")
  done
  a=$(printf '%s\n' "${ra[@]}" | median)
  b=$(printf '%s\n' "${rb[@]}" | median)
  gain=$(awk -v a="$a" -v b="$b" 'BEGIN {printf "%+.1f%%", 100 * (a / b - 1)}')
  model=$(awk -v m="$m" 'BEGIN {printf "%+.1f%%", 100 * ((3 * m + 3) / (3 * m + 1) - 1)}')
  printf "%4s %12s %12s %8s %14s\n" "$m" "$a" "$b" "$gain" "$model"
done
