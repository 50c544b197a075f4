/*
 * cuda_utils.cuh: small pieces every CUDA kernel file uses: the bf16 type, warp and block
 * reductions whose result is the same in every thread (and the same from run to run: a
 * fixed butterfly order, no atomics), device allocation, and host-side bf16 <-> fp32
 * conversion (bit exact, round to nearest even, used by the host-staged -comm mpi path),
 * and x128: 16-byte packed loads and stores (8 bf16 or 4 float per instruction).
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

__device__ __forceinline__ float2 warp_sum2(float2 v) { return make_float2(warp_sum(v.x), warp_sum(v.y)); }

// warp_op over the block (blockDim.x a multiple of 32, at most 1024); every thread gets it.
// Must be reached by all threads of the block. Each warp reduces, its lane 0 writes part[w],
// then every warp reduces the parts; identity fills the slots beyond the block's warps.
template <typename T, T (*warp_op)(T)>
__device__ __forceinline__ T block_reduce(T v, T* part, T identity) {
    int lane = threadIdx.x % WARP, w = threadIdx.x / WARP, nw = blockDim.x / WARP;
    v = warp_op(v);
    __syncthreads(); // part may still be read by a previous call
    if (lane == 0) part[w] = v;
    __syncthreads();
    return warp_op(lane < nw ? part[lane] : identity);
}
__device__ __forceinline__ float block_sum(float v) {
    __shared__ float part[32];
    return block_reduce<float, warp_sum>(v, part, 0.0f);
}
__device__ __forceinline__ double block_sum_d(double v) {
    __shared__ double partd[32];
    return block_reduce<double, warp_sum_d>(v, partd, 0.0);
}
// two sums over the block in one exchange (same order as block_sum for each)
__device__ __forceinline__ float2 block_sum2(float a, float b) {
    __shared__ float2 part2[32];
    return block_reduce<float2, warp_sum2>(make_float2(a, b), part2, make_float2(0.0f, 0.0f));
}
__device__ __forceinline__ float block_max(float v) {
    __shared__ float partm[32];
    return block_reduce<float, warp_max>(v, partm, -INFINITY);
}

__device__ __forceinline__ float bf(bf16 x) { return __bfloat162float(x); }
__device__ __forceinline__ bf16 to_bf(float x) { return __float2bfloat16(x); }

// ---------------------------------------------------------------------------------------
// x128: 16 bytes moved by one load or store (LDG.128 / STG.128) instead of eight 2-byte
// ones, so a memory-bound kernel issues a quarter (fp32) to an eighth (bf16) of the memory
// instructions. Only the uint4 is ever read from or written to global memory, so a buffer
// is never accessed through two types in one kernel; the bf16 <-> fp32 conversions are bit
// operations (bf16 is the top half of an fp32; to_bf rounds to nearest even as before), so
// the packed and the scalar code compute identical values.
//
// Conditions, checked on the host by vec16_ok before a packed kernel is chosen: every
// pointer 16-byte aligned and the row length (C) or element count a multiple of 8, so
// every packed access is aligned (16 bytes for 8 bf16 or 4 float; 8 bytes, a uint2, for
// the 4 bf16 beside 4 float in the fp32 kernels). Otherwise the launcher takes the scalar
// instantiation of the same kernel (same arithmetic, same order: the same bits), never an
// error. A packed access through a misaligned pointer faults on a GPU and is reported by
// the emulation's alignment detector (make cuda-check-emu).
struct x128 {
    uint4 u;
};
__device__ __forceinline__ x128 ld128(const void* p) {
    x128 r;
    r.u = *reinterpret_cast<const uint4*>(p);
    return r;
}
__device__ __forceinline__ void st128(void* p, x128 v) { *reinterpret_cast<uint4*>(p) = v.u; }
// L2 only (not L1): data written by another block of the same launch
__device__ __forceinline__ x128 ld128_cg(const void* p) {
    x128 r;
    r.u = __ldcg(reinterpret_cast<const uint4*>(p));
    return r;
}

__device__ __forceinline__ unsigned x128_word(const x128& v, int i) {
    return i == 0 ? v.u.x : i == 1 ? v.u.y : i == 2 ? v.u.z : v.u.w;
}
// 8 bf16 -> 8 float (exact)
__device__ __forceinline__ void x128_to_f8(float f[8], x128 v) {
#pragma unroll
    for (int i = 0; i < 4; i++) {
        unsigned w = x128_word(v, i);
        f[2 * i] = __uint_as_float(w << 16);
        f[2 * i + 1] = __uint_as_float(w & 0xffff0000u);
    }
}
// 8 float -> 8 bf16, each rounded to nearest even (to_bf)
__device__ __forceinline__ x128 f8_to_x128(const float f[8]) {
    unsigned w[4];
#pragma unroll
    for (int i = 0; i < 4; i++)
        w[i] = (unsigned)__bfloat16_as_ushort(to_bf(f[2 * i])) |
               ((unsigned)__bfloat16_as_ushort(to_bf(f[2 * i + 1])) << 16);
    x128 r;
    r.u = make_uint4(w[0], w[1], w[2], w[3]);
    return r;
}
__device__ __forceinline__ void x128_to_f4(float f[4], x128 v) {
    f[0] = __uint_as_float(v.u.x);
    f[1] = __uint_as_float(v.u.y);
    f[2] = __uint_as_float(v.u.z);
    f[3] = __uint_as_float(v.u.w);
}
__device__ __forceinline__ x128 f4_to_x128(const float f[4]) {
    x128 r;
    r.u = make_uint4(__float_as_uint(f[0]), __float_as_uint(f[1]), __float_as_uint(f[2]), __float_as_uint(f[3]));
    return r;
}

// 8 consecutive bf16 p[c .. c+8) as one x128: one packed load (VEC: p + c 16-byte aligned)
// or eight guarded scalar loads (elements at or past n read as 0). The scalar path serves
// misaligned pointers and row lengths that are not a multiple of 8; what the kernel
// computes from the x128 is the same either way.
template <bool VEC>
__device__ __forceinline__ x128 ldx_bf16(const bf16* p, size_t c, size_t n) {
    if constexpr (VEC) {
        return ld128(p + c);
    } else {
        unsigned h[8];
#pragma unroll
        for (int j = 0; j < 8; j++) h[j] = c + j < n ? (unsigned)__bfloat16_as_ushort(p[c + j]) : 0u;
        x128 r;
        r.u = make_uint4(h[0] | h[1] << 16, h[2] | h[3] << 16, h[4] | h[5] << 16, h[6] | h[7] << 16);
        return r;
    }
}
// p[c .. min(c+8, n)) = the 8 bf16 of v
template <bool VEC>
__device__ __forceinline__ void stx_bf16(bf16* p, size_t c, size_t n, x128 v) {
    if constexpr (VEC) {
        st128(p + c, v);
    } else {
#pragma unroll
        for (int j = 0; j < 8; j++)
            if (c + j < n) p[c + j] = __ushort_as_bfloat16((unsigned short)(x128_word(v, j / 2) >> (16 * (j % 2))));
    }
}
template <bool VEC>
__device__ __forceinline__ void load_bf16x8(float f[8], const bf16* p, size_t c, size_t n) {
    x128_to_f8(f, ldx_bf16<VEC>(p, c, n));
}
template <bool VEC>
__device__ __forceinline__ void store_bf16x8(bf16* p, size_t c, size_t n, const float f[8]) {
    stx_bf16<VEC>(p, c, n, f8_to_x128(f));
}
// 4 consecutive elements (fp32 kernels: thread t's 16 bytes of fp32 sit next to thread
// t+1's, so a warp request is contiguous; the bf16 side is then 8 bytes, a uint2)
template <bool VEC>
__device__ __forceinline__ void load_f32x4(float f[4], const float* p, size_t c, size_t n) {
    if constexpr (VEC) {
        x128_to_f4(f, ld128(p + c));
    } else {
#pragma unroll
        for (int j = 0; j < 4; j++) f[j] = c + j < n ? p[c + j] : 0.0f;
    }
}
template <bool VEC>
__device__ __forceinline__ void store_f32x4(float* p, size_t c, size_t n, const float f[4]) {
    if constexpr (VEC) {
        st128(p + c, f4_to_x128(f));
    } else {
#pragma unroll
        for (int j = 0; j < 4; j++)
            if (c + j < n) p[c + j] = f[j];
    }
}
template <bool VEC>
__device__ __forceinline__ void load_bf16x4(float f[4], const bf16* p, size_t c, size_t n) {
    if constexpr (VEC) {
        uint2 u = *reinterpret_cast<const uint2*>(p + c);
        f[0] = __uint_as_float(u.x << 16);
        f[1] = __uint_as_float(u.x & 0xffff0000u);
        f[2] = __uint_as_float(u.y << 16);
        f[3] = __uint_as_float(u.y & 0xffff0000u);
    } else {
#pragma unroll
        for (int j = 0; j < 4; j++) f[j] = c + j < n ? bf(p[c + j]) : 0.0f;
    }
}
template <bool VEC>
__device__ __forceinline__ void store_bf16x4(bf16* p, size_t c, size_t n, const float f[4]) {
    if constexpr (VEC) {
        unsigned h[4];
#pragma unroll
        for (int j = 0; j < 4; j++) h[j] = __bfloat16_as_ushort(to_bf(f[j]));
        *reinterpret_cast<uint2*>(p + c) = make_uint2(h[0] | h[1] << 16, h[2] | h[3] << 16);
    } else {
#pragma unroll
        for (int j = 0; j < 4; j++)
            if (c + j < n) p[c + j] = to_bf(f[j]);
    }
}

// host: may a kernel use packed access? n (a row length or element count) a multiple of
// pack and every pointer 16-byte aligned (NULL counts as aligned: an absent operand)
static inline bool aligned16(const void* p) { return ((uintptr_t)p & 15u) == 0; }
template <class... P>
static inline bool vec16_ok(size_t n, size_t pack, P... ptrs) {
    const void* ps[] = {(const void*)ptrs...};
    if (n % pack != 0) return false;
    for (const void* p : ps)
        if (!aligned16(p)) return false;
    return true;
}

// ---------------------------------------------------------------------------------------
// elementwise helpers used by several files

// a grid for a grid-stride loop over n elements (or n packs of 8)
static inline int grid_for(size_t n, int block) {
    size_t g = (n + block - 1) / block;
    if (g > 65535 * 8) g = 65535 * 8;
    return GRID_STRIDE_CAP(g < 1 ? 1 : (int)g);
}

// out[i] = bf16(in[i]) for n elements (round to nearest even). Each thread takes 4
// consecutive elements per step (VEC: one 16-byte fp32 access, one 8-byte bf16 access).
template <bool VEC>
__global__ void cast_f32_to_bf16_kernel(bf16* out, const float* in, size_t n) {
    for (size_t i = ((size_t)blockIdx.x * blockDim.x + threadIdx.x) * 4; i < n;
         i += (size_t)gridDim.x * blockDim.x * 4) {
        float f[4];
        load_f32x4<VEC>(f, in, i, n);
        store_bf16x4<VEC>(out, i, n, f);
    }
}
template <bool VEC>
__global__ void cast_bf16_to_f32_kernel(float* out, const bf16* in, size_t n) {
    for (size_t i = ((size_t)blockIdx.x * blockDim.x + threadIdx.x) * 4; i < n;
         i += (size_t)gridDim.x * blockDim.x * 4) {
        float f[4];
        load_bf16x4<VEC>(f, in, i, n);
        store_f32x4<VEC>(out, i, n, f);
    }
}

static void cast_f32_to_bf16(bf16* out, const float* in, size_t n, cudaStream_t s) {
    if (n == 0) return;
    int g = grid_for(CEIL_DIV(n, 4), 256);
    LAUNCH_VEC(cast_f32_to_bf16_kernel, vec16_ok(n, 8, out, in), g, 256, 0, s, out, in, n);
}
static void cast_bf16_to_f32(float* out, const bf16* in, size_t n, cudaStream_t s) {
    if (n == 0) return;
    int g = grid_for(CEIL_DIV(n, 4), 256);
    LAUNCH_VEC(cast_bf16_to_f32_kernel, vec16_ok(n, 8, out, in), g, 256, 0, s, out, in, n);
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
        fprintf(stderr,
                "error: cudaMalloc of %.3f GiB failed (%s; %.2f of %.2f GiB free): use -recompute 1, a smaller -mb, "
                "more tensor/pipeline parallelism or -zero 1\n",
                bytes / 1073741824.0, cudaGetErrorString(e), fr / 1073741824.0, tot / 1073741824.0);
        exit(1);
    }
    cudaCheck(cudaMemset(p, 0, bytes));
    return p;
}
static void dev_free(void* p) {
    if (p) cudaCheck(cudaFree(p));
}

static inline uint16_t host_f2bf(float f) {
    uint32_t u;
    memcpy(&u, &f, 4);
    if ((u & 0x7fffffffu) > 0x7f800000u) return 0x7fff; // NaN
    u += 0x7fffu + ((u >> 16) & 1u);                    // round to nearest even
    return (uint16_t)(u >> 16);
}
static inline float host_bf2f(uint16_t b) {
    uint32_t u = (uint32_t)b << 16;
    float f;
    memcpy(&f, &u, 4);
    return f;
}

#endif // LLMC_CUDA_UTILS_CUH
