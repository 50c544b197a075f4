#!/usr/bin/env bash
# bench_sp_vpp.sh: measured CPU cost of -recompute, -sp and -vpp on a small shape (a
# benchmark, not a test: nothing is asserted). Each row trains STEPS steps of the same run
# and reports the mean step time over steps 2..STEPS and the activation memory a rank
# reports for one micro-batch; ranks share the machine's cores (mpirun --oversubscribe).
#
#   bash scripts/bench_sp_vpp.sh            # needs ./train_gpt and dev/data/kjv (make data)
#   STEPS=10 THREADS=1 bash scripts/bench_sp_vpp.sh
set -euo pipefail
source "${LLMC_ROOT:-$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)}/scripts/args.sh" && llmc_args "${BASH_SOURCE[0]}" "$@"
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
STEPS=${STEPS:-6}
THREADS=${THREADS:-1}
TMP="$(mktemp -d)"
trap 'rm -rf "$TMP"' EXIT
ARGS="-L 8 -H 128 -heads 4 -seq 128 -V 8192 -mb 2 -gb 16 -ramp off -lr 1e-3 -warmup 0 -decay 1e6 -tokens 1e9
      -i dev/data/kjv/kjv_train_*.bin -j '' -seed 1 -threads $THREADS -steps $STEPS"
printf "%-34s %10s %16s\n" "layout and option" "ms/step" "act MiB/mb/rank"
row() { # name np flags...
  local name="$1" np="$2"; shift 2
  local dir="$TMP/$(echo "$name" | tr -c 'A-Za-z0-9' '_')"
  if [ "$np" = 1 ]; then eval OMP_NUM_THREADS=$THREADS ./train_gpt $ARGS -o "$dir" "$@" > "$dir.out" 2>&1
  else eval mpirun --oversubscribe --allow-run-as-root -x OMP_NUM_THREADS=$THREADS -np "$np" ./train_gpt $ARGS -o "$dir" "$@" > "$dir.out" 2>&1; fi
  local ms act
  ms=$(grep '"type":"train"' "$dir/log.jsonl" | awk -F'"ms":' 'NR>1 {split($2,a,","); s+=a[1]; n++} END {printf "%.1f", s/n}')
  act=$(grep -m1 'activations / micro-batch' "$dir.out" | sed 's/.*| \([0-9.]*\) MiB.*/\1/')
  printf "%-34s %10s %16s\n" "$name" "$ms" "$act"
}
row "1x1x1" 1
row "1x1x1 -recompute selective" 1 -recompute selective
row "1x1x1 -recompute full" 1 -recompute full
row "2x1x1" 2 -tp 2
row "2x1x1 -sp 1" 2 -tp 2 -sp 1
row "2x1x1 -sp 1 -recompute selective" 2 -tp 2 -sp 1 -recompute selective
row "1x2x1" 2 -pp 2
row "1x2x1 -vpp 2" 2 -pp 2 -vpp 2
row "1x2x1 -vpp 4" 2 -pp 2 -vpp 4
