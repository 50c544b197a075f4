#!/usr/bin/env bash
# bench_zero.sh: measured CPU step time of -zero 1, 2 and 3 side by side (a benchmark, not a
# test: nothing is asserted). DP 2: two ranks, one thread each, on a model whose layers hold
# most of the weights (-L 8 -H 256 -seq 64, V 8192), so ZeRO-2's per-micro-batch
# reduce-scatters and ZeRO-3's per-layer gathers move most of the parameters. Each level
# trains STEPS steps REPS times, the three levels alternating within each round, and the
# report gives the median over the runs of each run's median step time (steps 2..STEPS: a
# shared machine's step times wander by tens of percent), each level against -zero 1, the
# same medians of the time rank 0 spent inside collectives (the log's t_comm_ms), and the
# start-up table's memory per rank (rank 0) of each level.
#
#   bash scripts/bench_zero.sh            # needs ./train_gpt, mpirun and dev/data/kjv (make data)
#   STEPS=10 REPS=5 GB=8 MB=1 bash scripts/bench_zero.sh
#   (GB, MB: global batch and micro-batch; micro-batches per rank per step = GB / (MB x 2))
set -euo pipefail
source "${LLMC_ROOT:-$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)}/scripts/args.sh" && llmc_args "${BASH_SOURCE[0]}" "$@"
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
STEPS=${STEPS:-8}
REPS=${REPS:-3}
GB=${GB:-8}
MB=${MB:-2}
TMP="$(mktemp -d)"
trap 'rm -rf "$TMP"' EXIT
ARGS=(-L 8 -H 256 -heads 4 -seq 64 -V 8192 -mb "$MB" -gb "$GB" -ramp off -lr 1e-3 -warmup 0 -decay 1e6 -tokens 1e9
  -i 'dev/data/kjv/kjv_train_*.bin' -j '' -seed 1 -threads 1 -steps "$STEPS" -dp 2)
MPI=(mpirun --oversubscribe -x OMP_NUM_THREADS=1 -np 2)
[ "$(id -u)" = 0 ] && MPI=(mpirun --oversubscribe --allow-run-as-root -x OMP_NUM_THREADS=1 -np 2)
echo "cpu: $(grep -m1 'model name' /proc/cpuinfo | sed 's/.*: //'), $(nproc) cores, load average $(cut -d' ' -f1-3 \
  /proc/loadavg) (a shared machine); 2 ranks x 1 thread, DP 2, gb $GB, mb $MB, $STEPS steps x $REPS rounds"
median() { sort -g | awk '{v[NR] = $1} END {printf "%.1f", NR % 2 ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2}'; }
field() { # log.jsonl field -> its median over steps 2..STEPS
  grep '"type":"train"' "$1" | awk -F"\"$2\":" 'NR>1 {split($2,a,","); print a[1]}' | median
}
run() { # level rep -> "ms comm_ms", medians over steps 2..STEPS
  local dir="$TMP/z$1_$2"
  "${MPI[@]}" ./train_gpt "${ARGS[@]}" -zero "$1" -o "$dir" > "$dir.out" 2>&1 || {
    echo "bench_zero.sh: -zero $1 failed:" >&2
    tail -n 5 "$dir.out" >&2
    exit 1
  }
  echo "$(field "$dir/log.jsonl" ms) $(field "$dir/log.jsonl" t_comm_ms)"
}
declare -A ms cm
for r in $(seq "$REPS"); do
  for z in 1 2 3; do
    read -r a b <<< "$(run "$z" "$r")"
    ms[$z]+="$a "
    cm[$z]+="$b "
  done
done
printf "%6s %10s %12s %14s  %s\n" "zero" "ms/step" "vs -zero 1" "comm ms/step" "memory per rank (rank 0, the start-up table)"
for z in 1 2 3; do
  m=$(tr ' ' '\n' <<< "${ms[$z]}" | grep . | median)
  c=$(tr ' ' '\n' <<< "${cm[$z]}" | grep . | median)
  [ "$z" = 1 ] && base=$m
  rel=$(awk -v a="$m" -v b="$base" 'BEGIN {printf "%+.1f%%", 100 * (a / b - 1)}')
  mem=$(grep -m1 '^| memory per rank' "$TMP/z${z}_1.out" | sed 's/^| memory per rank *| //; s/ *|$//')
  printf "%6s %10s %12s %14s  %s\n" "$z" "$m" "$rel" "$c" "$mem"
  echo "        runs (ms/step): ${ms[$z]}"
done
