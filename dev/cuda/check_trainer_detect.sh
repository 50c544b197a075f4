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
#     that protects the previous row's reads): must be reported as a shared-memory race;
#   - 1x1x2 over NCCL with the communication stream's wait of the overlapped DP buckets
#     deleted: the losses must change;
#   - 1x2x1 over NCCL with the compute stream's wait for a pipeline transfer deleted
#     (dc_pp_acquire): the stream detector must report the race with the link stream.
# The LLMC_DP_OVERLAP=0 run has the stream detector on, so it checks the pipeline's link
# streams (the default with NCCL and PP > 1) against the compute stream.
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

# build SRC_ROOT OUT: train_gpt.cu of SRC_ROOT with the detectors, in the background (the four
# builds are single-threaded and took a minute each one after another); built OUT waits for it
build() {
    # shellcheck disable=SC2086
    ( $CXX -x c++ "$1/train_gpt.cu" -x none -o "$2" -lpthread 2>"$2.log" || { head -20 "$2.log"; rm -f "$2"; exit 1; } ) &
    pids[$2]=$!
}
declare -A pids
built() { [ -n "${pids[$1]:-}" ] && wait "${pids[$1]}" && [ -x "$1" ]; }
# mutant NAME FILE PATTERN: a copy of the sources in $TMP/NAME with the first line of llmc/FILE
# that contains PATTERN deleted, built to $TMP/NAME/train_gpt_cu; fails when PATTERN is absent
mutant() {
    mkdir -p "$TMP/$1" && cp "$ROOT/train_gpt.cu" "$TMP/$1/" && cp -r "$ROOT/llmc" "$TMP/$1/llmc" &&
    awk -v pat="$3" 'BEGIN{done = 0} { if (!done && index($0, pat)) { done = 1; next } print } END { if (!done) exit 1 }' \
        "$ROOT/llmc/$2" >"$TMP/$1/llmc/$2" && build "$TMP/$1" "$TMP/$1/train_gpt_cu"
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
build "$ROOT" "$T"
wait_ce="__syncthreads(); // the previous row's reads of sm/ss are done"
wait_dp="cudaStreamWaitEvent(d->cstream, d->ev_ready, 0)"
wait_pp="cudaCheck(cudaStreamWaitEvent(d->stream, b->comm, 0));"
# (a mutant whose pattern is missing starts no build: built then fails for it)
mutant ce crossentropy.cuh "$wait_ce"
mutant dp nccl_comm.cuh "$wait_dp"
mutant pp nccl_comm.cuh "$wait_pp"
if built "$T"; then
    export OMP_NUM_THREADS=1
    clean "train_gpt_cu 1x1x1 -recompute selective, 3 steps, grids capped at 2 blocks: no detector report" \
        env CUEMU_MAX_GRID=2 "$T" "${ARGS[@]}" -recompute selective
    # the stream detector judges kernels by whole allocations: it cannot check the DP buckets
    # overlapping the backward (other slices of the gradient buffer are written meanwhile), so
    # that run has it off and a second one checks the same layout without the overlap
    clean "train_gpt_cu 2x2x2 zero-1 -sp 1 -vpp 2 -recompute selective -comm nccl (8 processes), 3 steps: no race/alignment report" \
        env CUEMU_DEVICES=8 CUEMU_STREAM_RACES=0 timeout 900 mpirun --oversubscribe --allow-run-as-root -x CUEMU_DEVICES -x CUEMU_STREAM_RACES \
        -x OMP_NUM_THREADS -np 8 "$T" "${ARGS[@]}" -tp 2 -pp 2 -dp 2 -zero 1 -sp 1 -vpp 2 -recompute selective -comm nccl
    clean "  ... the same with LLMC_DP_OVERLAP=0: no race/alignment/stream report" \
        env CUEMU_DEVICES=8 LLMC_DP_OVERLAP=0 timeout 900 mpirun --oversubscribe --allow-run-as-root -x CUEMU_DEVICES -x LLMC_DP_OVERLAP \
        -x OMP_NUM_THREADS -np 8 "$T" "${ARGS[@]}" -tp 2 -pp 2 -dp 2 -zero 1 -sp 1 -vpp 2 -recompute selective -comm nccl
else
    bad "train_gpt.cu builds under the emulation with the detectors"
fi

# the mutation: a copy of the sources with ce_stats_kernel's first barrier deleted
if built "$TMP/ce/train_gpt_cu"; then
    out=$(env CUEMU_MAX_GRID=2 OMP_NUM_THREADS=1 "$TMP/ce/train_gpt_cu" "${ARGS[@]}" -steps 1 2>&1); rc=$?
    if [ $rc -ne 0 ] && grep -q 'shared-memory race .*ce_stats_kernel' <<<"$out"; then
        ok "ce_stats_kernel without its first __syncthreads: the trainer's run is stopped with a shared-memory race report"
    else bad "ce_stats_kernel mutation was not reported (exit $rc)" "$out"; fi
else
    bad "the ce_stats_kernel mutation applies and builds"
fi
# the overlapped DP buckets without the communication stream's wait for the gradients
# (llmc/nccl_comm.cuh): the reduction then runs before the backward that produces them
# (the emulation runs queued work late), so the losses must change. (The compute stream's
# wait for the reductions cannot be shown: emulated NCCL runs at the call.)
wait=$wait_dp
if built "$TMP/dp/train_gpt_cu"; then
    # 1x1x2: no TP or pipeline NCCL call on the compute stream makes its queue run early
    for bin in "$T" "$TMP/dp/train_gpt_cu"; do
        env CUEMU_DEVICES=8 CUEMU_STREAM_RACES=0 OMP_NUM_THREADS=1 timeout 900 mpirun --oversubscribe --allow-run-as-root -x CUEMU_DEVICES \
            -x CUEMU_STREAM_RACES -x OMP_NUM_THREADS -np 2 "$bin" "${ARGS[@]}" -dp 2 -comm nccl -log "$bin.jsonl" >/dev/null 2>&1
    done
    a=$(grep -o '"loss":[^,]*' "$T.jsonl" 2>/dev/null | tr '\n' ' '); b=$(grep -o '"loss":[^,]*' "$TMP/dp/train_gpt_cu.jsonl" 2>/dev/null | tr '\n' ' ')
    if [ -n "$a" ] && [ "$a" != "$b" ]; then ok "DP buckets without $wait: the losses change (reduced before the backward ran)"
    else bad "DP buckets without $wait gave the same losses ($a)"; fi
else
    bad "the mutation removing $wait applies and builds"
fi
# the overlapped pipeline without the compute stream's wait for a buffer's transfer: compute
# then writes a slot or gradient buffer a link stream is still sending from / receiving into
wait=$wait_pp
if built "$TMP/pp/train_gpt_cu"; then
    out=$(env CUEMU_DEVICES=8 OMP_NUM_THREADS=1 timeout 900 mpirun --oversubscribe --allow-run-as-root -x CUEMU_DEVICES -x OMP_NUM_THREADS \
        -np 2 "$TMP/pp/train_gpt_cu" "${ARGS[@]}" -pp 2 -comm nccl 2>&1); rc=$?
    if [ $rc -ne 0 ] && grep -q 'cross-stream race' <<<"$out"; then
        ok "pipeline link streams without the compute stream's wait for a transfer (dc_pp_acquire): the stream detector reports the race"
    else bad "pipeline link streams without the compute stream's wait for a transfer: no race reported (exit $rc)" "$out"; fi
else
    bad "the mutation removing $wait applies and builds"
fi
echo "$pass passed, $fail failed"
[ $fail -eq 0 ]
