/*
 * mma.cuh: 16x16x16 warp matrix multiply-accumulate on bf16 with fp32 accumulation, the
 * tensor-core building block of the tensor-core flash attention. Under nvcc it is CUDA's
 * WMMA API (nvcuda::wmma, sm_80+); under the CPU emulation (CUEMU) a plain-CUDA stand-in
 * with the same semantics, so the kernels that use it run (and are checked) on the CPU.
 *
 * Warp-collective: all 32 lanes call every function with the same arguments. The element
 * layout inside a fragment is opaque (as in WMMA): code only moves fragments through
 * shared memory with the load/store functions. Their constraints, which the emulation
 * checks: the pointer is 32-byte aligned, ld is a multiple of 8 (bf16) or 4 (fp32).
 *
 *   FragA / FragAT   16x16 bf16 A operand, read row-major / column-major (A^T stored)
 *   FragB / FragBT   16x16 bf16 B operand, read row-major / column-major (B^T stored)
 *   FragC            16x16 fp32 accumulator
 *   mma(c, a, b)     c += a b
 */
#ifndef LLMC_MMA_CUH
#define LLMC_MMA_CUH

#include "cuda_utils.cuh"

#ifndef CUEMU
#include <mma.h>

typedef nvcuda::wmma::fragment<nvcuda::wmma::matrix_a, 16, 16, 16, __nv_bfloat16, nvcuda::wmma::row_major> FragA;
typedef nvcuda::wmma::fragment<nvcuda::wmma::matrix_a, 16, 16, 16, __nv_bfloat16, nvcuda::wmma::col_major> FragAT;
typedef nvcuda::wmma::fragment<nvcuda::wmma::matrix_b, 16, 16, 16, __nv_bfloat16, nvcuda::wmma::row_major> FragB;
typedef nvcuda::wmma::fragment<nvcuda::wmma::matrix_b, 16, 16, 16, __nv_bfloat16, nvcuda::wmma::col_major> FragBT;
typedef nvcuda::wmma::fragment<nvcuda::wmma::accumulator, 16, 16, 16, float> FragC;

template <class F>
__device__ __forceinline__ void frag_load(F& f, const bf16* p, int ld) {
    nvcuda::wmma::load_matrix_sync(f, p, ld);
}
__device__ __forceinline__ void frag_zero(FragC& c) { nvcuda::wmma::fill_fragment(c, 0.0f); }
__device__ __forceinline__ void frag_store(float* p, const FragC& c, int ld) {
    nvcuda::wmma::store_matrix_sync(p, c, ld, nvcuda::wmma::mem_row_major);
}
__device__ __forceinline__ void frag_load_c(FragC& c, const float* p, int ld) {
    nvcuda::wmma::load_matrix_sync(c, p, ld, nvcuda::wmma::mem_row_major);
}
template <class FA, class FB>
__device__ __forceinline__ void mma(FragC& c, const FA& a, const FB& b) {
    nvcuda::wmma::mma_sync(c, a, b, c);
}

#else // CUEMU: lane l holds elements 8l .. 8l+7 of the row-major 16x16 tile

struct FragA {
    float x[8];
};
struct FragAT {
    float x[8];
};
struct FragB {
    float x[8];
};
struct FragBT {
    float x[8];
};
struct FragC {
    float x[8];
};

__device__ __forceinline__ void frag_check(const void* p, int ld, int mult) {
    if (((uintptr_t)p % 32) != 0 || ld % mult != 0) {
        printf("mma.cuh: fragment pointer %p not 32-byte aligned or ld %d not a multiple of %d\n", p, ld, mult);
        abort();
    }
}
// element (r, c) of the logical 16x16 operand; `trans`: stored transposed
__device__ __forceinline__ void frag_load_(float* x, const bf16* p, int ld, int trans) {
    frag_check(p, ld, 8);
    int lane = threadIdx.x % WARP;
    for (int i = 0; i < 8; i++) {
        int e = lane * 8 + i, r = e / 16, c = e % 16;
        x[i] = bf(trans ? p[c * ld + r] : p[r * ld + c]);
    }
}
__device__ __forceinline__ void frag_load(FragA& f, const bf16* p, int ld) { frag_load_(f.x, p, ld, 0); }
__device__ __forceinline__ void frag_load(FragAT& f, const bf16* p, int ld) { frag_load_(f.x, p, ld, 1); }
__device__ __forceinline__ void frag_load(FragB& f, const bf16* p, int ld) { frag_load_(f.x, p, ld, 0); }
__device__ __forceinline__ void frag_load(FragBT& f, const bf16* p, int ld) { frag_load_(f.x, p, ld, 1); }
__device__ __forceinline__ void frag_zero(FragC& c) {
    for (int i = 0; i < 8; i++) c.x[i] = 0.0f;
}
__device__ __forceinline__ void frag_store(float* p, const FragC& c, int ld) {
    frag_check(p, ld, 4);
    int lane = threadIdx.x % WARP;
    for (int i = 0; i < 8; i++) {
        int e = lane * 8 + i;
        p[(e / 16) * ld + e % 16] = c.x[i];
    }
}
__device__ __forceinline__ void frag_load_c(FragC& c, const float* p, int ld) {
    frag_check(p, ld, 4);
    int lane = threadIdx.x % WARP;
    for (int i = 0; i < 8; i++) {
        int e = lane * 8 + i;
        c.x[i] = p[(e / 16) * ld + e % 16];
    }
}
template <class FA, class FB>
__device__ __forceinline__ void mma(FragC& c, const FA& a, const FB& b) {
    __shared__ float mma_scratch[32][512]; // one A and one B tile per warp
    int lane = threadIdx.x % WARP, w = threadIdx.x / WARP;
    float* A = mma_scratch[w];
    float* B = A + 256;
    for (int i = 0; i < 8; i++) {
        A[lane * 8 + i] = a.x[i];
        B[lane * 8 + i] = b.x[i];
    }
    __syncwarp();
    for (int i = 0; i < 8; i++) {
        int e = lane * 8 + i, r = e / 16, col = e % 16;
        float s = c.x[i];
        for (int k = 0; k < 16; k++) s += A[r * 16 + k] * B[k * 16 + col];
        c.x[i] = s;
    }
    __syncwarp();
}
#endif

#endif // LLMC_MMA_CUH
