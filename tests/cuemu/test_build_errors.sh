#!/usr/bin/env bash
# tests/cuemu/test_build_errors.sh - what the CPU emulation of CUDA cannot honour
# must stop the build, and the documented fallbacks must build.
# Usage: test_build_errors.sh CXX DIR   (DIR = cuemu); one line per check,
# then "N passed, M failed"; exit status 1 on any failure.
set -u
CXX=${1:-g++}
DIR=${2:-cuemu}
ROOT=$(cd "$DIR/.." && pwd)
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
pass=0
fail=0
# expect NAME fail|build REGEX SOURCE
expect() {
    local name=$1 want=$2 regex=$3 src=$4
    printf '%s\n' "$src" >"$TMP/t.cu"
    local out rc
    out=$("$CXX" -std=c++17 -fsyntax-only -x c++ -DCUEMU -I"$DIR/include" -include "$DIR/cuemu.h" "$TMP/t.cu" 2>&1)
    rc=$?
    if { [ "$want" = fail ] && [ $rc -ne 0 ] && grep -qE -- "$regex" <<<"$out"; } ||
       { [ "$want" = build ] && [ $rc -eq 0 ]; }; then
        echo "ok   - $name"
        pass=$((pass + 1))
    else
        echo "FAIL - $name (exit $rc)"
        printf '%s\n' "$out" | head -5 | sed 's/^/       /'
        fail=$((fail + 1))
    fi
}

expect "inline PTX in a kernel stops the build with the emulation's message" fail \
    "inline PTX \(asm\) cannot be emulated" \
    '__global__ void k(int* p) { int x; asm volatile("mov.u32 %0, %%laneid;" : "=r"(x)); *p = x; }'
expect "inline PTX behind #ifndef CUEMU with a plain-CUDA fallback builds" build "" \
    '__global__ void k(int* p) {
#ifndef CUEMU
    int x; asm volatile("mov.u32 %0, %%laneid;" : "=r"(x));
#else
    int x = threadIdx.x & 31;
#endif
    *p = x; }'
expect "a <<<grid, block>>> launch does not build (launch through LAUNCH)" fail "error" \
    '__global__ void k(int* p) { *p = 1; }
void f(int* p) { k<<<1, 1>>>(p); }'
expect "extern __shared__ does not build (declare it with DYNAMIC_SMEM)" fail "conflicting specifiers|__shared__" \
    '__global__ void k(float* p) { extern __shared__ float s[]; s[threadIdx.x] = 1.0f; p[0] = s[0]; }'
expect "cooperative groups are not emulated: the include fails" fail "cooperative_groups" \
    '#include <cooperative_groups.h>'
expect "half precision (cuda_fp16.h) is not emulated: the include fails" fail "cuda_fp16" \
    '#include <cuda_fp16.h>'
expect "a kernel using the covered features builds (bf16, shuffles, shared, atomics, DYNAMIC_SMEM)" build "" \
    '#include <cuda_runtime.h>
#include <cuda_bf16.h>
#include "'"$ROOT"'/llmc/cuda/cuda_common.cuh"
template <int N> __global__ void __launch_bounds__(256) k(const __nv_bfloat16* __restrict__ x, float* out, int n) {
    __shared__ float part[32];
    DYNAMIC_SMEM(float4, extra);
    float v = 0.0f;
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) v += __bfloat162float(__ldg(x + i));
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    if ((threadIdx.x & 31) == 0) part[threadIdx.x / 32] = v;
    __syncthreads();
    if (threadIdx.x == 0) { extra[0] = make_float4(part[0], 0.f, 0.f, 0.f); atomicAdd(out, extra[0].x * N); }
}
void run(const __nv_bfloat16* x, float* out, int n, cudaStream_t s) { LAUNCH((k<2>), CEIL_DIV(n, 256), 256, 16, s, x, out, n); }'

echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
