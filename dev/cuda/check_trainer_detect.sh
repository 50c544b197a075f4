#!/usr/bin/env bash
# check_trainer_detect.sh: the CUDA trainer itself under the emulation's hardware-like
# detectors (dev/cuemu README "Detectors": shared/global-memory races through
# ThreadSanitizer's instrumentation with cuemu's hooks, misaligned vector accesses through
# UBSan's alignment check, the stream and pinned-buffer checks). The kernel checks of
# dev/cuda run under them in `make cuda-check-emu`; this runs train_gpt.cu's own steps:
#   - 1x1x1, -recompute selective, grid-stride grids capped at 2 blocks (CUEMU_MAX_GRID=2,
#     so a block handles several rows, as on a GPU with more rows than blocks): clean;
#   - 2x2x2 ZeRO-1 -sp 1 -vpp 2 -recompute selective over emulated NCCL (8 processes; the
#     phased pipeline schedule, the overlapped DP buckets): clean;
#   - the same 1x1x1 run with the first __syncthreads of ce_stats_kernel deleted (the barrier
#     that protects the previous row's reads): must be reported as a shared-memory race.
# Usage: check_trainer_detect.sh "MPICXX FLAGS..." ROOT BUILD; prints "N passed, M failed".
set -uo pipefail
CXX=$1 ROOT=$2 BUILD=$3
pass=0 fail=0
ok() { echo "ok   $1"; pass=$((pass + 1)); }
bad() { echo "FAIL $1"; [ -n "${2:-}" ] && printf '%s\n' "$2" | grep -E 'cuemu|error|race|misaligned' | head -6 | sed 's/^/       /'; fail=$((fail + 1)); }
mkdir -p "$BUILD"
TMP=$(mktemp -d /tmp/llmc_detect.XXXXXX)
trap 'rm -rf "$TMP"' EXIT

# a pattern shard: 256 int32 header (magic, version, count), then uint16 tokens < 300
python3 - "$TMP/p.bin" <<'EOF'
import struct, sys
n = 20000
with open(sys.argv[1], "wb") as f:
    f.write(struct.pack("<256i", 20240520, 1, n, *([0] * 253)))
    f.write(struct.pack("<%dH" % n, *[(i * 7 + i // 13) % 300 for i in range(n)]))
EOF
ARGS=(-L 4 -H 64 -heads 4 -seq 32 -V 300 -vpad 128 -mb 1 -gb 8 -ramp 4 4 512 -lr 2e-3 -warmup 2000 -decay 8000
      -tokens 1e9 -i "$TMP/p.bin" -j '' -shuffle 1 -seed 7 -threads 1 -steps 3)

# build SRC_ROOT OUT: train_gpt.cu of SRC_ROOT with the detectors
build() {
    # shellcheck disable=SC2086
    $CXX -x c++ "$1/train_gpt.cu" -x none -o "$2" -lpthread 2>"$TMP/build.log" || { cat "$TMP/build.log" | head -20; return 1; }
}
# clean NAME CMD...: exit 0 and no emulation report
clean() {
    local name=$1; shift
    local out rc
    out=$("$@" 2>&1); rc=$?
    if [ $rc -eq 0 ] && ! grep -qE 'cuemu: (FATAL|race)|shared-memory race|global-memory race|misaligned address|runtime error' <<<"$out"; then ok "$name"
    else bad "$name (exit $rc)" "$out"; fi
}

T="$BUILD/train_gpt_cu"
if build "$ROOT" "$T"; then
    export OMP_NUM_THREADS=1
    clean "train_gpt_cu 1x1x1 -recompute selective, 3 steps, grids capped at 2 blocks: no detector report" \
        env CUEMU_MAX_GRID=2 "$T" "${ARGS[@]}" -recompute selective
    clean "train_gpt_cu 2x2x2 zero-1 -sp 1 -vpp 2 -recompute selective -comm nccl (8 processes), 3 steps: no detector report" \
        env CUEMU_DEVICES=8 timeout 900 mpirun --oversubscribe --allow-run-as-root -x CUEMU_DEVICES -x OMP_NUM_THREADS -np 8 \
        "$T" "${ARGS[@]}" -tp 2 -pp 2 -dp 2 -zero 1 -sp 1 -vpp 2 -recompute selective -comm nccl
else
    bad "train_gpt.cu builds under the emulation with the detectors"
fi

# the mutation: a copy of the sources with ce_stats_kernel's first barrier deleted
mkdir -p "$TMP/m" && cp "$ROOT/train_gpt.cu" "$TMP/m/" && cp -r "$ROOT/llmc" "$TMP/m/llmc"
if awk 'BEGIN{done = 0} { if (!done && index($0, "__syncthreads(); // the previous row'"'"'s reads of sm/ss are done")) { done = 1; next } print }
        END { if (!done) exit 1 }' "$ROOT/llmc/crossentropy.cuh" >"$TMP/m/llmc/crossentropy.cuh" && build "$TMP/m" "$TMP/mut"; then
    out=$(env CUEMU_MAX_GRID=2 OMP_NUM_THREADS=1 "$TMP/mut" "${ARGS[@]}" -steps 1 2>&1); rc=$?
    if [ $rc -ne 0 ] && grep -q 'shared-memory race .*ce_stats_kernel' <<<"$out"; then
        ok "ce_stats_kernel without its first __syncthreads: the trainer's run is stopped with a shared-memory race report"
    else bad "ce_stats_kernel mutation was not reported (exit $rc)" "$out"; fi
else
    bad "the ce_stats_kernel mutation applies and builds"
fi
echo "$pass passed, $fail failed"
[ $fail -eq 0 ]
