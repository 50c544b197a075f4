#!/usr/bin/env bash
# test_trainer_detect.sh: the CUDA trainer itself under the emulation's hardware-like
# detectors (cuemu README "Detectors": shared/global-memory races through
# ThreadSanitizer's instrumentation with cuemu's hooks, misaligned vector accesses through
# UBSan's alignment check, the stream and pinned-buffer checks). The kernel checks of
# dev/cuda run under them in `make cuda-check-emu`; this runs train_gpt.cu's own steps:
#   - 1x1x1, -recompute selective, grid-stride grids capped at 2 blocks (CUEMU_MAX_GRID=2,
#     so a block handles several rows, as on a GPU with more rows than blocks): clean;
#   - 2x2x2 ZeRO-1 -sp 1 -vpp 2 -recompute selective over emulated NCCL (8 processes; the
#     phased pipeline schedule, the overlapped DP buckets), the stream detector on: clean,
#     and again with LLMC_DP_OVERLAP=0: clean, with bit-identical losses (the emulated
#     reductions sum every element in rank order however it is bucketed);
#   - 1x1x2 over NCCL, the DP buckets overlapped, the stream detector on: clean, with the
#     losses of the same run with the detector off (CUEMU_STREAM_RACES=0);
#   - 1x1x2 -zero 3 -grad-reduce bf16 over NCCL: each layer's weights gathered on the gathers'
#     stream (the next layer's prefetched while one computes), each micro-batch's layer
#     gradients reduced beside the backward from two scratches in turn: clean;
#   - the same 1x1x1 run with the first __syncthreads of ce_stats_kernel deleted (the barrier
#     that protects the previous row's reads): must be reported as a shared-memory race;
#   - 1x1x2 over NCCL with the communication stream's wait of the overlapped DP buckets
#     deleted: the stream detector must report the race between a bucket's reduction and
#     the backward, and with the detector off the losses must change;
#   - 1x1x2 -zero 1 over NCCL with the compute stream's wait for the DP buckets deleted
#     (dc_dp_bucket_join): the stream detector must report the race between a bucket's
#     ncclReduce and the compute stream's reads after it;
#   - 1x2x1 over NCCL with the compute stream's wait for a pipeline transfer deleted
#     (dc_pp_acquire): the stream detector must report the race with the link stream;
#   - 1x1x2 -zero 3 over NCCL with the compute stream's wait for a layer's gather deleted
#     (zero.cuh's zd_use): the stream detector must report the race with the gather.
#   - -cp 2 over NCCL (2 processes): the ring's K|V and dK|dV transfers on the CP stream
#     beside the block compute, the DP buckets over the CP group overlapped: clean, and with
#     the compute stream's wait for a block's arrival deleted (dc_cp_ring_wait): reported.
# The stream detector compares the bytes each operation really touches (kernels: what their
# threads read and wrote, cuemu README "Streams"), so the DP buckets, slices of one
# gradient buffer reduced on the communication stream while the backward writes the other
# slices, are checked as they run. Both 2x2x2 runs check the pipeline's link streams (the
# default with NCCL and PP > 1) against the compute stream.
# Usage: test_trainer_detect.sh "MPICXX FLAGS..." ROOT BUILD; prints "N passed, M failed".
set -uo pipefail
CXX=$1 ROOT=$2 BUILD=$3
unset LLMC_MUTANT # the clean runs: no mutant
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

# build SRC_ROOT OUT [FLAGS]: train_gpt.cu of SRC_ROOT with the detectors, in the background (two
# builds, single-threaded, a minute or more each); built OUT waits for it
build() {
    # shellcheck disable=SC2086
    ( $CXX ${3:-} -x c++ "$1/train_gpt.cu" -x none -o "$2" -lpthread 2>"$2.log" ||
        { head -20 "$2.log"; rm -f "$2"; exit 1; } ) &
    pids[$2]=$!
}
declare -A pids status target
# built OUT: its build succeeded (a mutant's script: the mutants' build)
built() {
    local b=${target[$1]:-$1}
    if [ -z "${status[$b]:-}" ]; then
        if [ -n "${pids[$b]:-}" ] && wait "${pids[$b]}" && [ -x "$b" ]; then status[$b]=0; else status[$b]=1; fi
    fi
    [ "${status[$b]}" = 0 ] && [ -x "$1" ]
}
# The mutants and the clean runs share one build (a detector build of the trainer takes minutes): a
# copy of the sources in $TMP/mut where the first line of llmc/FILE that contains PATTERN runs only
# when the environment's LLMC_MUTANT is not NAME (tests/mutant.h). mutant NAME FILE PATTERN writes
# that guard and the script $TMP/NAME/train_gpt_cu, which runs the build with LLMC_MUTANT=NAME:
# that is the source with the line deleted. It fails (no script) when PATTERN is absent. With
# LLMC_MUTANT unset every guarded line runs: the clean runs below ($T) are the unmutated source.
mkdir -p "$TMP/mut" && cp "$ROOT/train_gpt.cu" "$TMP/mut/" && cp -r "$ROOT/llmc" "$TMP/mut/llmc"
mutant() {
    awk -v pat="$3" -v name="$1" 'BEGIN{done = 0}
        { if (!done && index($0, pat)) { done = 1; print "if (!llmc_mutant(\"" name "\")) {"; print; print "}"; next }
          print }
        END { if (!done) exit 1 }' "$TMP/mut/llmc/$2" >"$TMP/mut.tmp" && mv "$TMP/mut.tmp" "$TMP/mut/llmc/$2" &&
        mkdir -p "$TMP/$1" && printf '#!/bin/sh\nLLMC_MUTANT=%s exec "%s" "$@"\n' "$1" "$TMP/mut/train_gpt_cu" \
        >"$TMP/$1/train_gpt_cu" && chmod +x "$TMP/$1/train_gpt_cu" && target[$TMP/$1/train_gpt_cu]=$TMP/mut/train_gpt_cu
}
# losses FILE: the "loss" values of a -log file, on one line
losses() { grep -o '"loss":[^,]*' "$1" 2>/dev/null | tr '\n' ' '; }
# same_losses NAME A B: both logs have losses and they are identical
same_losses() {
    local a b
    a=$(losses "$2"); b=$(losses "$3")
    if [ -n "$a" ] && [ "$a" = "$b" ]; then ok "$1 ($a)"; else bad "$1: '$a' vs '$b'"; fi
}
# reported NAME PATTERN CMD...: exit non-zero and a cross-stream race report matching PATTERN
reported() {
    local name=$1 pat=$2; shift 2
    local out rc
    out=$("$@" 2>&1); rc=$?
    if [ $rc -ne 0 ] && grep -qE "$pat" <<<"$out"; then ok "$name"; else bad "$name: not reported (exit $rc)" "$out"; fi
}
# clean NAME CMD...: exit 0 and no emulation report
clean() {
    local name=$1; shift
    local out rc
    out=$("$@" 2>&1); rc=$?
    if [ $rc -eq 0 ] && ! grep -qE 'cuemu: (FATAL|race)|shared-memory race|global-memory race|misaligned address|runtime error' <<<"$out"; then ok "$name"
    else bad "$name (exit $rc)" "$out"; fi
}
# nccl NP [VAR=VALUE...] PROGRAM ARGS...: PROGRAM on NP processes over emulated NCCL (8
# emulated devices, one OpenMP thread), each VAR set for every rank
nccl() {
    local np=$1; shift
    local envs=(CUEMU_DEVICES=8 OMP_NUM_THREADS=1) xs=(-x CUEMU_DEVICES -x OMP_NUM_THREADS)
    while [[ $1 == *=* ]]; do envs+=("$1"); xs+=(-x "${1%%=*}"); shift; done
    env "${envs[@]}" timeout 900 mpirun --oversubscribe --allow-run-as-root "${xs[@]}" -np "$np" "$@"
}

T="$TMP/mut/train_gpt_cu"
wait_ce="__syncthreads(); // the previous row's reads of sm/ss are done"
wait_dp="cudaStreamWaitEvent(d->cstream, d->ev_ready, 0)"
wait_join="cudaStreamWaitEvent(d->stream, d->ev_reduced, 0)"
wait_pp="cudaCheck(cudaStreamWaitEvent(d->stream, b->comm, 0));"
wait_gather="cudaCheck(cudaStreamWaitEvent(s, done, 0)); // the gathered bytes have arrived"
wait_cp="cudaCheck(cudaStreamWaitEvent(d->stream, d->cp_arrived, 0));"
# (a mutant whose pattern is missing writes no script: built then fails for it)
mutant ce cuda/crossentropy.cuh "$wait_ce"
mutant dp cuda/nccl_comm.cuh "$wait_dp"
mutant join cuda/nccl_comm.cuh "$wait_join"
mutant pp cuda/nccl_comm.cuh "$wait_pp"
mutant gather cuda/zero.cuh "$wait_gather"
mutant cp cuda/nccl_comm.cuh "$wait_cp"
build "$TMP/mut" "$TMP/mut/train_gpt_cu" "-include $ROOT/tests/mutant.h"
if built "$T"; then
    export OMP_NUM_THREADS=1
    clean "train_gpt_cu 1x1x1 -recompute selective, 3 steps, grids capped at 2 blocks: no detector report" \
        env CUEMU_MAX_GRID=2 "$T" "${ARGS[@]}" -recompute selective
    # the DP buckets overlap the backward on the communication stream, under the stream detector
    L222=(-tp 2 -pp 2 -dp 2 -zero 1 -sp 1 -vpp 2 -recompute selective -comm nccl)
    clean "train_gpt_cu 2x2x2 zero-1 -sp 1 -vpp 2 -recompute selective -comm nccl (8 processes), DP buckets overlapped, 3 steps: no race/alignment/stream report" \
        nccl 8 "$T" "${ARGS[@]}" "${L222[@]}" -log "$T.222.jsonl"
    clean "  ... the same with LLMC_DP_OVERLAP=0: no race/alignment/stream report" \
        nccl 8 LLMC_DP_OVERLAP=0 "$T" "${ARGS[@]}" "${L222[@]}" -log "$T.222nov.jsonl"
    same_losses "  ... the overlapped run's losses are those of the LLMC_DP_OVERLAP=0 run" "$T.222.jsonl" "$T.222nov.jsonl"
    # 1x1x2: the DP buckets beside the backward with nothing else on the compute stream
    nccl 2 CUEMU_STREAM_RACES=0 "$T" "${ARGS[@]}" -dp 2 -comm nccl -log "$T.jsonl" >/dev/null 2>&1
    clean "train_gpt_cu 1x1x2 -comm nccl (2 processes), DP buckets overlapped, 3 steps: no race/alignment/stream report" \
        nccl 2 "$T" "${ARGS[@]}" -dp 2 -comm nccl -log "$T.112.jsonl"
    same_losses "  ... its losses are those of the same run with the stream detector off" "$T.112.jsonl" "$T.jsonl"
    # -zero 3: the gathers' stream and the reduction stream beside the compute stream
    clean "train_gpt_cu 1x1x2 -zero 3 -grad-reduce bf16 -comm nccl (2 processes), gathers prefetched, buckets reduced beside the backward, 3 steps: no race/alignment/stream report" \
        nccl 2 "$T" "${ARGS[@]}" -dp 2 -zero 3 -grad-reduce bf16 -comm nccl
    # -cp 2: the ring's transfers overlap the block compute on the CP stream
    clean "train_gpt_cu -cp 2 -comm nccl (2 processes), ring transfers and DP buckets overlapped, 3 steps: no race/alignment/stream report" \
        nccl 2 "$T" "${ARGS[@]}" -cp 2 -comm nccl
else
    bad "train_gpt.cu builds under the emulation with the detectors"
fi

# the mutation: a copy of the sources with ce_stats_kernel's first barrier deleted
if built "$TMP/ce/train_gpt_cu"; then
    # (the kernel is named by the report; any crossentropy.cuh kernel holding the barrier counts)
    reported "ce_stats_kernel without its first __syncthreads: the trainer's run is stopped with a shared-memory race report" \
        'shared-memory race .*in kernel \(?ce_[a-z_]+kernel[^)]*\)?: thread \([0-9,]+\) of block \([0-9,]+\) at [^ ]*crossentropy\.cuh' \
        env CUEMU_MAX_GRID=2 OMP_NUM_THREADS=1 "$TMP/ce/train_gpt_cu" "${ARGS[@]}" -steps 1
else
    bad "the ce_stats_kernel mutation applies and builds"
fi
# the overlapped DP buckets without the communication stream's wait for the gradients
# (llmc/cuda/nccl_comm.cuh): a bucket's reduction is unordered with the backward kernels and
# matmuls that produce its gradients. The stream detector must say so, naming the bucket's
# NCCL call; with it off the reduction runs before the backward (the emulation runs queued
# work late), so the losses must change. (1x1x2: no TP or pipeline NCCL call on the compute
# stream makes its queue run early. $T.jsonl is the unmutated run with the detector off.)
wait=$wait_dp
if built "$TMP/dp/train_gpt_cu"; then
    reported "DP buckets without $wait: the stream detector reports the bucket's reduction racing with the backward" \
        'cross-stream race on .*nccl_comm.cuh:[0-9]+' \
        nccl 2 "$TMP/dp/train_gpt_cu" "${ARGS[@]}" -dp 2 -comm nccl
    nccl 2 CUEMU_STREAM_RACES=0 "$TMP/dp/train_gpt_cu" "${ARGS[@]}" -dp 2 -comm nccl -log "$TMP/dp/train_gpt_cu.jsonl" \
        >/dev/null 2>&1
    a=$(losses "$T.jsonl"); b=$(losses "$TMP/dp/train_gpt_cu.jsonl")
    if [ -n "$a" ] && [ "$a" != "$b" ]; then ok "  ... and with the detector off the losses change (reduced before the backward ran)"
    else bad "DP buckets without $wait gave the same losses ($a)"; fi
else
    bad "the mutation removing $wait applies and builds"
fi
# ... without the compute stream's wait for the buckets (dc_dp_bucket_join): the gradient norm
# and the optimizer read the gradient buffer while its buckets' ncclReduce (ZeRO-1) may still
# write it (emulated NCCL runs at the call, so only the detector can show this one)
wait=$wait_join
if built "$TMP/join/train_gpt_cu"; then
    reported "DP buckets without $wait (-zero 1): the stream detector reports the bucket's ncclReduce racing with the compute stream" \
        'cross-stream race on .*ncclReduce at [^ ]*llmc/cuda/nccl_comm.cuh:[0-9]+' \
        nccl 2 "$TMP/join/train_gpt_cu" "${ARGS[@]}" -dp 2 -zero 1 -comm nccl
else
    bad "the mutation removing $wait applies and builds"
fi
# the overlapped pipeline without the compute stream's wait for a buffer's transfer: compute
# then writes a slot or gradient buffer a link stream is still sending from / receiving into
wait=$wait_pp
if built "$TMP/pp/train_gpt_cu"; then
    reported "pipeline link streams without the compute stream's wait for a transfer (dc_pp_acquire): the stream detector reports the race" \
        'cross-stream race' nccl 2 "$TMP/pp/train_gpt_cu" "${ARGS[@]}" -pp 2 -comm nccl
else
    bad "the mutation removing $wait applies and builds"
fi
# -zero 3 without the compute stream's wait for a layer's gather: the layer's kernels read a
# window the gathers' stream may still be writing
wait=$wait_gather
if built "$TMP/gather/train_gpt_cu"; then
    reported "-zero 3 without the compute stream's wait for a gather (zd_use): the stream detector reports the race" \
        'cross-stream race on .*ncclBroadcast' nccl 2 "$TMP/gather/train_gpt_cu" "${ARGS[@]}" -dp 2 -zero 3 -comm nccl
else
    bad "the mutation removing $wait applies and builds"
fi
# the CP ring without the compute stream's wait for a block's arrival: the next block's compute
# reads the K|V buffer the CP stream's ncclRecv is still writing (the report names both)
wait=$wait_cp
if built "$TMP/cp/train_gpt_cu"; then
    reported "the CP ring without the compute stream's wait for a block's arrival (dc_cp_ring_wait): the stream detector reports the race" \
        'cross-stream race on .*ncclRecv at [^ ]*nccl_comm.cuh:[0-9]+ .*ring_[a-z_]*kernel' \
        nccl 2 "$TMP/cp/train_gpt_cu" "${ARGS[@]}" -cp 2 -comm nccl -steps 1
else
    bad "the mutation removing $wait applies and builds"
fi
echo "$pass passed, $fail failed"
[ $fail -eq 0 ]
