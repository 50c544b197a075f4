/*
 * adamw.cuh: AdamW on fp32 master weights (SPEC section 2: bias-corrected, decoupled
 * weight decay), exactly the update of train_gpt.c's gpt_adamw in fp32:
 *   g = grad * gscale (clipping); m = b1 m + (1-b1) g; v = b2 v + (1-b2) g^2
 *   master -= lr * (m/bc1 / (sqrt(v/bc2) + eps) + wd * master)
 * and the bf16 working copy of each updated element is written in the same pass
 * (round to nearest even). Elementwise: deterministic.
 */
#ifndef LLMC_ADAMW_CUH
#define LLMC_ADAMW_CUH

#include "cuda_utils.cuh"

// n elements: master, m, v, grad are indexed alike; params_bf16 likewise (may be NULL)
__global__ void adamw_kernel(float* master, bf16* params_bf16, const float* grad, float* m, float* v, size_t n,
                             float lr, float b1, float b2, float bc1, float bc2, float eps, float wd, float gscale) {
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) {
        float g = grad[i] * gscale;
        float mi = b1 * m[i] + (1.0f - b1) * g;
        float vi = b2 * v[i] + (1.0f - b2) * g * g;
        m[i] = mi; v[i] = vi;
        float p = master[i];
        p -= lr * ((mi / bc1) / (sqrtf(vi / bc2) + eps) + wd * p);
        master[i] = p;
        if (params_bf16) params_bf16[i] = to_bf(p);
    }
}

static void adamw_update(float* master, bf16* params_bf16, const float* grad, float* m, float* v, size_t n, float lr,
                         float b1, float b2, float bc1, float bc2, float eps, float wd, float gscale, cudaStream_t s) {
    if (n == 0) return;
    LAUNCH(adamw_kernel, grid_for(n, 256), 256, 0, s, master, params_bf16, grad, m, v, n, lr, b1, b2, bc1, bc2, eps, wd, gscale);
}

#endif // LLMC_ADAMW_CUH
