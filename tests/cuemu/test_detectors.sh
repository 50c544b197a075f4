#!/usr/bin/env bash
# tests/cuemu/test_detectors.sh - the emulation's hardware-like detectors must stop
# broken kernels and let correct ones run (README "Detectors"):
#  - detect_driver.cu: a shared-memory race, a warp race without __syncwarp, two
#    blocks writing one global word, a misaligned float4 load must fail; the fixed
#    versions must pass;
#  - mutation tests on the real llmc headers: removing the first __syncthreads of
#    ce_block_combine (crossentropy.cuh: ce_fused_kernel, the first of its kernels
#    test_crossentropy runs, and ce_stats_kernel) or of block_reduce (cuda_utils.cuh: block_sum,
#    block_max) must be reported as a race when CUEMU_MAX_GRID gives each block several rows;
#  - stream_driver.cu: a pinned buffer rewritten after its cudaMemcpyAsync and before
#    the host synchronised with the copy must fail; so must a kernel on one stream
#    reading another stream's output without an event, cudaMemcpy after a non-blocking
#    stream's kernel, a pinned D2H destination read before the copy was synchronised,
#    and the data-parallel all-reduce overlap without either of its two event waits;
#    the event-guarded versions, pageable copies and blocking-stream order must pass;
#  - launch resources (impl/resources.h) against a register table written here: too
#    many registers (template instantiation resolved from the symbol), too many threads,
#    shared memory over sm_80's opt-in maximum (CUEMU_ARCH=80) must fail.
# Usage: test_detectors.sh "CXX FLAGS..." ROOT BUILD; prints "N passed, M failed".
set -u
CXXCMD=$1
ROOT=$(cd "$2" && pwd)
BUILD=$3
mkdir -p "$BUILD"
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
pass=0
fail=0
ok() { echo "ok   - $1"; pass=$((pass + 1)); }
bad() { echo "FAIL - $1"; [ -n "${2:-}" ] && printf '%s\n' "$2" | head -6 | sed 's/^/       /'; fail=$((fail + 1)); }
build() { # build SRC OUT
    $CXXCMD -x c++ "$1" -x none -o "$2" 2>"$TMP/build.log" || { cat "$TMP/build.log" | head -20; return 1; }
}
# expect NAME pass|REGEX CMD...: pass = exit 0; REGEX = non-zero exit and stderr matches
expect() {
    local name=$1 want=$2
    shift 2
    local out rc
    out=$("$@" 2>&1)
    rc=$?
    if [ "$want" = pass ]; then
        [ $rc -eq 0 ] && ok "$name" || bad "$name (exit $rc)" "$out"
    else
        if [ $rc -ne 0 ] && grep -qE -- "$want" <<<"$out"; then ok "$name"; else bad "$name (exit $rc)" "$out"; fi
    fi
}
# mutate FILE PATTERN: a copy of the repo's llmc, cuemu, tests/cuda and tests/cuemu with the first line of FILE
# (after the line matching AFTER, if given) that matches PATTERN deleted
mutate() {
    local file=$1 pattern=$2 after=${3:-}
    rm -rf "$TMP/m" && mkdir -p "$TMP/m/tests" && cp -r "$ROOT/llmc" "$ROOT/cuemu" "$TMP/m/" &&
        cp -r "$ROOT/tests/cuda" "$ROOT/tests/cuemu" "$TMP/m/tests/" && cp "$ROOT"/tests/*.h "$TMP/m/tests/"
    awk -v pat="$pattern" -v after="$after" 'BEGIN{armed = (after == ""); done = 0}
        { if (!armed && index($0, after)) armed = 1
          if (armed && !done && index($0, pat)) { done = 1; next }
          print } END { if (!done) exit 1 }' "$ROOT/$file" >"$TMP/m/$file" || { echo "mutation of $file failed"; return 1; }
}

D="$BUILD/detect_driver"
if build "$ROOT/tests/cuemu/detect_driver.cu" "$D"; then
    expect "block_sum / block_max in grid-stride loops, one block per row: exact" pass "$D" rows
    expect "shared-memory race without __syncthreads is reported with kernel and lines" \
        "shared-memory race .* in kernel smem_race_kernel: .*detect_driver.cu:[0-9]+.*detect_driver.cu:[0-9]+" "$D" smem_race
    expect "warp-synchronous exchange without __syncwarp is reported" "shared-memory race .* in kernel warp_race_kernel" "$D" warp_race
    expect "the same exchange with __syncwarp runs" pass "$D" warp_ok
    expect "two blocks writing one global word without an atomic are reported" \
        "global-memory race in kernel global_race_kernel: blocks [0-9]+ and [0-9]+" "$D" global_race
    expect "blocks adding to one global word with atomicAdd run" pass "$D" global_atomic
    expect "a float4 load through a misaligned pointer fails" "misaligned address .*float4" "$D" misaligned
    expect "block_sum/block_max in a grid-stride loop, 2 blocks for 16 rows: exact" pass env CUEMU_MAX_GRID=2 "$D" rows
    for seed in 1 2 3; do
        expect "the race detector does not depend on the fiber order (seed $seed)" "shared-memory race" env CUEMU_SEED=$seed "$D" warp_race
    done
    expect "the race detector also fires with a fixed thread order (reverse)" "shared-memory race" env CUEMU_SCHED=reverse "$D" warp_race
else
    bad "detect_driver.cu builds under the emulation with the detectors"
fi

mutate llmc/cuda/cuda_utils.cuh "__syncthreads(); // part may still be read" && build "$TMP/m/tests/cuemu/detect_driver.cu" "$TMP/d1" &&
    expect "block_reduce (block_sum, block_max) without its first __syncthreads is reported (CUEMU_MAX_GRID=2)" \
        "shared-memory race .*cuda_utils.cuh" env CUEMU_MAX_GRID=2 "$TMP/d1" rows || bad "block_reduce mutation built"
if build "$ROOT/tests/cuda/test_crossentropy.cu" "$TMP/ce0"; then
    expect "test_crossentropy passes with the grid capped to 3 blocks (CUEMU_MAX_GRID=3)" pass env CUEMU_MAX_GRID=3 "$TMP/ce0"
else bad "test_crossentropy builds"; fi
mutate llmc/cuda/crossentropy.cuh "the previous row's reads of sm/ss are done" && build "$TMP/m/tests/cuda/test_crossentropy.cu" "$TMP/ce1" &&
    expect "ce_block_combine without its first __syncthreads is reported (CUEMU_MAX_GRID=3)" \
        "shared-memory race .*in kernel \\(ce_[a-z_]+kernel.*crossentropy.cuh" \
        env CUEMU_MAX_GRID=3 "$TMP/ce1" || bad "ce_stats mutation built"

S="$BUILD/stream_driver"
if build "$ROOT/tests/cuemu/stream_driver.cu" "$S"; then
    expect "pinned buffer rewritten after cudaMemcpyAsync, before any sync, is reported with the call site" \
        "host wrote pinned buffer before its async copy ran.*stream_driver.cu:[0-9]+" "$S" write_before_sync
    expect "two pinned slots rewritten without waiting for their events are reported" \
        "host wrote pinned buffer before its async copy ran" "$S" slots_unguarded
    expect "two pinned slots, each guarded by an event: correct sums" pass "$S" slots_guarded
    expect "pageable slots without guard: staged at the call, correct sums" pass "$S" slots_pageable
    expect "pageable copy snapshots the host buffer at the call" pass "$S" pageable_snapshot
    expect "a pinned copy on one stream, read on another after cudaStreamWaitEvent" pass "$S" two_streams
    X="cross-stream race on 0x[0-9a-f]+ "
    expect "a kernel on stream b reading what stream a wrote, no event: both launch sites reported" \
        "$X.*fill_kernel at .*stream_driver.cu:[0-9]+ on stream .* writes it, and sum_kernel at .*stream_driver.cu:[0-9]+ on stream .* reads it" \
        "$S" cross_no_event
    for seed in 1 2 3; do
        expect "the same with the detector off: b runs before a, the sum is wrong (seed $seed)" "cross-stream read: sum -256, expected 768" \
            env CUEMU_STREAM_RACES=0 CUEMU_SEED=$seed "$S" cross_no_event
    done
    expect "for comparison, CUEMU_STREAMS=eager (run at the call) hides the missing event" pass \
        env CUEMU_STREAM_RACES=0 CUEMU_STREAMS=eager "$S" cross_no_event
    expect "the same two kernels ordered by cudaEventRecord + cudaStreamWaitEvent: exact sum" pass "$S" cross_event
    expect "the host reading a pinned D2H destination before synchronising sees poison" \
        "host read of the pinned D2H destination: 64 of 64 wrong \\(h\\[0\\] = -1" "$S" d2h_read_early
    expect "... after cudaStreamSynchronize: exact" pass "$S" d2h_stream_sync
    expect "... after cudaEventSynchronize on an event recorded after the copy: exact" pass "$S" d2h_event_sync
    expect "cudaMemcpy (legacy stream) after a kernel on a blocking stream: ordered, exact" pass "$S" legacy_blocking
    expect "cudaMemcpy after a kernel on a cudaStreamNonBlocking stream: reported" \
        "$X.*fill_kernel at .*on stream .* writes it, and cudaMemcpy at .*stream_driver.cu:[0-9]+ on the default stream reads it" \
        "$S" legacy_nonblocking
    # byte ranges: the detector compares the bytes kernels really touched, not allocations
    expect "two streams' kernels writing disjoint neighbouring halves of one allocation, no event: no race" pass "$S" halves_disjoint
    expect "... the second half starting one int early (overlap of 4 bytes), no event: reported with the overlap" \
        "${X}\\+ \\[1020, 1024\\) \\(allocation 0x[0-9a-f]+, 2048 bytes\\): range_fill_kernel at .*stream_driver.cu:[0-9]+ on stream .* writes it, and range_fill_kernel at .*stream_driver.cu:[0-9]+ on stream .* writes it" \
        "$S" halves_overlap
    expect "... the same overlap ordered by an event: no race, exact contents" pass "$S" halves_overlap_event
    expect "two cuBLASLt matmuls on two streams writing interleaved row halves (ld = 2m), no event: no race" pass "$S" lt_halves
    expect "... the second starting a row early, no event: reported" \
        "$X.*cublasLtMatmul at .*stream_driver.cu:[0-9]+ on stream .* writes it, and cublasLtMatmul at .*stream_driver.cu:[0-9]+ on stream .* writes it" \
        "$S" lt_halves_overlap
    expect "a write through a pointer inside a struct argument, read on another stream without an event: reported" \
        "$X.*struct_fill_kernel at .*writes it, and sum_kernel at .* reads it" "$S" struct_ptr_no_event
    expect "an atomicAdd, read on another stream without an event: reported" \
        "$X.*atomic_count_kernel at .*writes it, and sum_kernel at .* reads it" "$S" atomic_no_event
    expect "data-parallel overlap (compute stream, all-reduce on a comm stream, events both ways): exact" pass "$S" dp_overlap
    expect "... without the comm stream's cudaStreamWaitEvent: backward kernel vs ncclAllReduce reported" \
        "$X.*backward_kernel at .*stream_driver.cu:[0-9]+ on stream .* writes it, and ncclAllReduce at .*stream_driver.cu:[0-9]+" \
        "$S" dp_no_comm_wait
    expect "... and with the detector off the all-reduce reads unwritten gradients (NaN)" "dp overlap: param\\[0\\] = -?nan" \
        env CUEMU_STREAM_RACES=0 "$S" dp_no_comm_wait
    expect "... without the compute stream's cudaStreamWaitEvent: ncclAllReduce vs the optimizer kernel reported" \
        "$X.*ncclAllReduce at .*stream_driver.cu:[0-9]+ on stream .* writes it, and sgd_kernel at .*stream_driver.cu:[0-9]+" \
        "$S" dp_no_compute_wait
    T="$TMP/res.tsv"
    printf '# test table\nkernel\tregs\tspill_st\tspill_ld\tsmem_static\tmax_threads\nres_kernel<128>\t200\t0\t0\t0\t1024\nres_kernel<64>\t32\t0\t0\t0\t1024\nres_plain_kernel\t40\t0\t0\t1024\t256\n' >"$T"
    R="too many resources requested for launch"
    expect "res_kernel<128> (200 registers) x 512 threads exceeds the register file" "$R: 512 threads x 200 registers" \
        env CUEMU_RESOURCES="$T" "$S" res_tmpl128 512
    expect "res_kernel<128> x 256 threads fits" pass env CUEMU_RESOURCES="$T" "$S" res_tmpl128 256
    expect "res_kernel<64> (32 registers) x 512 threads fits" pass env CUEMU_RESOURCES="$T" "$S" res_tmpl64 512
    expect "512 threads above the kernel's max_threads 256 fail" "$R: 512 threads exceed the kernel's max_threads" \
        env CUEMU_RESOURCES="$T" "$S" res_plain 512
    expect "1 KiB static + 163 KiB dynamic shared memory fits sm_90" pass env CUEMU_ARCH=90 CUEMU_RESOURCES="$T" "$S" res_smem
    expect "1 KiB static + 163 KiB dynamic shared memory fails on sm_80" "$R: 1024 bytes static \\+ 166912 dynamic" \
        env CUEMU_ARCH=80 CUEMU_RESOURCES="$T" "$S" res_smem
    expect "cudaFuncSetAttribute with 200 KiB is refused on sm_80" "cudaFuncSetAttribute.*invalid argument" env CUEMU_ARCH=80 "$S" res_optin
    expect "cudaFuncSetAttribute with 200 KiB is accepted on sm_90" pass env CUEMU_ARCH=90 "$S" res_optin
else
    bad "stream_driver.cu builds under the emulation"
fi

echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
