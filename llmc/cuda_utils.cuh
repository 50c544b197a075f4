/*
 * cuda_utils.cuh: small pieces every CUDA kernel file uses: the bf16 type, warp and block
 * reductions whose result is the same in every thread (and the same from run to run: a
 * fixed butterfly order, no atomics), device allocation, and host-side bf16 <-> fp32
 * conversion (bit exact, round to nearest even, used by the host-staged -comm mpi path).
 */
#ifndef LLMC_CUDA_UTILS_CUH
#define LLMC_CUDA_UTILS_CUH

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cuda_runtime.h>
#include <cuda_bf16.h>
#include "cuda_common.cuh"

typedef __nv_bfloat16 bf16;

#define WARP 32

// ---------------------------------------------------------------------------------------
// device reductions. xor butterflies: at every stage lane i and lane i^o add the same two
// numbers (a+b == b+a exactly), so every lane ends with the identical value.

__device__ __forceinline__ float warp_sum(float v) {
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    return v;
}
__device__ __forceinline__ double warp_sum_d(double v) {
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    return v;
}
__device__ __forceinline__ float warp_max(float v) {
    for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
    return v;
}

// Sum over the block (blockDim.x a multiple of 32, at most 1024); every thread gets it.
// Must be reached by all threads of the block.
__device__ __forceinline__ float block_sum(float v) {
    __shared__ float part[32];
    int lane = threadIdx.x % WARP, w = threadIdx.x / WARP, nw = blockDim.x / WARP;
    v = warp_sum(v);
    __syncthreads(); // part may still be read by a previous call
    if (lane == 0) part[w] = v;
    __syncthreads();
    float r = lane < nw ? part[lane] : 0.0f;
    return warp_sum(r);
}
__device__ __forceinline__ double block_sum_d(double v) {
    __shared__ double partd[32];
    int lane = threadIdx.x % WARP, w = threadIdx.x / WARP, nw = blockDim.x / WARP;
    v = warp_sum_d(v);
    __syncthreads();
    if (lane == 0) partd[w] = v;
    __syncthreads();
    double r = lane < nw ? partd[lane] : 0.0;
    return warp_sum_d(r);
}
__device__ __forceinline__ float block_max(float v) {
    __shared__ float partm[32];
    int lane = threadIdx.x % WARP, w = threadIdx.x / WARP, nw = blockDim.x / WARP;
    v = warp_max(v);
    __syncthreads();
    if (lane == 0) partm[w] = v;
    __syncthreads();
    float r = lane < nw ? partm[lane] : -INFINITY;
    return warp_max(r);
}

__device__ __forceinline__ float bf(bf16 x) { return __bfloat162float(x); }
__device__ __forceinline__ bf16 to_bf(float x) { return __float2bfloat16(x); }

// ---------------------------------------------------------------------------------------
// elementwise helpers used by several files

// out[i] = bf16(in[i]) for n elements (round to nearest even)
__global__ void cast_f32_to_bf16_kernel(bf16* out, const float* in, size_t n) {
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x)
        out[i] = to_bf(in[i]);
}
__global__ void cast_bf16_to_f32_kernel(float* out, const bf16* in, size_t n) {
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x)
        out[i] = bf(in[i]);
}

// a grid for a grid-stride loop over n elements
static inline int grid_for(size_t n, int block) {
    size_t g = (n + block - 1) / block;
    if (g > 65535 * 8) g = 65535 * 8;
    return GRID_STRIDE_CAP(g < 1 ? 1 : (int)g);
}

static void cast_f32_to_bf16(bf16* out, const float* in, size_t n, cudaStream_t s) {
    if (n == 0) return;
    LAUNCH(cast_f32_to_bf16_kernel, grid_for(n, 256), 256, 0, s, out, in, n);
}
static void cast_bf16_to_f32(float* out, const bf16* in, size_t n, cudaStream_t s) {
    if (n == 0) return;
    LAUNCH(cast_bf16_to_f32_kernel, grid_for(n, 256), 256, 0, s, out, in, n);
}

// ---------------------------------------------------------------------------------------
// host side

// zero-filled device memory (at least 1 byte, so that every buffer has an address)
static void* dev_alloc(size_t bytes) {
    void* p = NULL;
    if (bytes == 0) bytes = 16;
    cudaError_t e = cudaMalloc(&p, bytes);
    if (e != cudaSuccess) {
        size_t fr = 0, tot = 0;
        cudaMemGetInfo(&fr, &tot);
        fprintf(stderr, "error: cudaMalloc of %.3f GiB failed (%s; %.2f of %.2f GiB free): use -recompute 1, a smaller -mb, "
                "more tensor/pipeline parallelism or -zero 1\n", bytes / 1073741824.0, cudaGetErrorString(e), fr / 1073741824.0, tot / 1073741824.0);
        exit(1);
    }
    cudaCheck(cudaMemset(p, 0, bytes));
    return p;
}
static void dev_free(void* p) { if (p) cudaCheck(cudaFree(p)); }

static inline uint16_t host_f2bf(float f) {
    uint32_t u;
    memcpy(&u, &f, 4);
    if ((u & 0x7fffffffu) > 0x7f800000u) return 0x7fff; // NaN
    u += 0x7fffu + ((u >> 16) & 1u);                     // round to nearest even
    return (uint16_t)(u >> 16);
}
static inline float host_bf2f(uint16_t b) {
    uint32_t u = (uint32_t)b << 16;
    float f;
    memcpy(&f, &u, 4);
    return f;
}

#endif // LLMC_CUDA_UTILS_CUH
