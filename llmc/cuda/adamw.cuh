/*
 * adamw.cuh: AdamW on fp32 master weights (doc/spec.md section 2: bias-corrected, decoupled
 * weight decay), exactly the update of train_gpt.c's gpt_adamw in fp32:
 *   g = grad * gscale (clipping); m = b1 m + (1-b1) g; v = b2 v + (1-b2) g^2
 *   master -= lr * (m/bc1 / (sqrt(v/bc2) + eps) + wd * master)
 * and the bf16 working copy of each updated element is written in the same pass
 * (round to nearest even). Elementwise: deterministic. 16-byte packed access where aligned
 * (x128, cuda_utils.cuh), else the scalar instantiation (the same bits).
 */
#ifndef LLMC_ADAMW_CUH
#define LLMC_ADAMW_CUH

#include "cuda_utils.cuh"

// n elements: master, m, v, grad are indexed alike; params_bf16 likewise (may be NULL).
// Each thread takes 4 consecutive elements per step (VEC: 16-byte fp32 loads and stores, an
// 8-byte bf16 store, all coalesced; the scalar instantiation for misaligned pointers or
// n % 8 != 0, same arithmetic).
template <bool VEC>
__global__ void adamw_kernel(float* master, bf16* params_bf16, const float* grad, float* m, float* v, size_t n,
                             float lr, float b1, float b2, float bc1, float bc2, float eps, float wd, float gscale) {
    for (size_t i = ((size_t)blockIdx.x * blockDim.x + threadIdx.x) * 4; i < n;
         i += (size_t)gridDim.x * blockDim.x * 4) {
        float g[4], mi[4], vi[4], p[4];
        load_f32x4<VEC>(g, grad, i, n);
        load_f32x4<VEC>(mi, m, i, n);
        load_f32x4<VEC>(vi, v, i, n);
        load_f32x4<VEC>(p, master, i, n);
#pragma unroll
        for (int j = 0; j < 4; j++) {
            float gj = g[j] * gscale;
            mi[j] = b1 * mi[j] + (1.0f - b1) * gj;
            vi[j] = b2 * vi[j] + (1.0f - b2) * gj * gj;
            p[j] -= lr * ((mi[j] / bc1) / (sqrtf(vi[j] / bc2) + eps) + wd * p[j]);
        }
        store_f32x4<VEC>(m, i, n, mi);
        store_f32x4<VEC>(v, i, n, vi);
        store_f32x4<VEC>(master, i, n, p);
        if (params_bf16) store_bf16x4<VEC>(params_bf16, i, n, p);
    }
}

static void adamw_update(float* master, bf16* params_bf16, const float* grad, float* m, float* v, size_t n, float lr,
                         float b1, float b2, float bc1, float bc2, float eps, float wd, float gscale, cudaStream_t s) {
    if (n == 0) return;
    int g = grid_for(CEIL_DIV(n, 4), 256);
    LAUNCH_VEC(adamw_kernel, vec16_ok(n, 8, master, params_bf16, grad, m, v), g, 256, 0, s, master, params_bf16, grad,
               m, v, n, lr, b1, b2, bc1, bc2, eps, wd, gscale);
}

#endif // LLMC_ADAMW_CUH
