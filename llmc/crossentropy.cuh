/*
 * crossentropy.cuh: vocab-parallel softmax cross-entropy fused with its backward (SPEC
 * section 3). Each TP rank holds logits (B*T, Vv) for its real vocabulary columns [v0,
 * v0 + Vv) (padded columns are never computed); the logits are never gathered:
 *
 *   ce_stats      per row: local max m_r, sum of exp(l - m_r) s_r, and the target logit if
 *                 this rank owns the target (else 0), in one pass (online softmax)
 *   (caller)      all-reduce max over TP -> M; s_r *= exp(m_r - M); all-reduce sum of (s, tl)
 *   ce_finish     lse = M + log(s); loss = lse - target logit (fp32, per token)
 *   ce_backward   in place: dlogits = (exp(l - lse) - onehot) * dloss (bf16), the gradient of
 *                 dloss * sum of token losses; run right after the forward in training, so
 *                 the logits buffer turns into its gradient without another pass
 *   ce_loss_sum   acc (fp64) += sum of token losses (one block, fixed order)
 *
 * Row reductions combine (max, sum) pairs with an xor butterfly in which both partners
 * compute the same expression: every thread ends with the same value, run to run.
 */
#ifndef LLMC_CROSSENTROPY_CUH
#define LLMC_CROSSENTROPY_CUH

#include "cuda_utils.cuh"

__device__ __forceinline__ void ce_combine(float& m, float& s, float m2, float s2) {
    float mn = fmaxf(m, m2);
    float a = (m == -INFINITY) ? 0.0f : s * expf(m - mn);
    float b = (m2 == -INFINITY) ? 0.0f : s2 * expf(m2 - mn);
    m = mn; s = a + b;
}

// one block per row (grid-stride); blockDim a multiple of 32
__global__ void ce_stats_kernel(float* mloc, float* se, float* tl, const bf16* logits, int ld, const int* targets,
                                int BT, int Vv, int v0) {
    __shared__ float sm[32], ss[32];
    int lane = threadIdx.x % WARP, w = threadIdx.x / WARP, nw = blockDim.x / WARP;
    for (int n = blockIdx.x; n < BT; n += gridDim.x) {
        const bf16* row = logits + (size_t)n * ld;
        float m = -INFINITY, s = 0.0f;
        for (int v = threadIdx.x; v < Vv; v += blockDim.x) {
            float x = bf(row[v]);
            if (x > m) { s = s * expf(m - x) + 1.0f; m = x; }
            else s += expf(x - m);
        }
        for (int o = 16; o > 0; o >>= 1) {
            float m2 = __shfl_xor_sync(0xffffffffu, m, o), s2 = __shfl_xor_sync(0xffffffffu, s, o);
            ce_combine(m, s, m2, s2);
        }
        __syncthreads(); // the previous row's reads of sm/ss are done
        if (lane == 0) { sm[w] = m; ss[w] = s; }
        __syncthreads();
        m = lane < nw ? sm[lane] : -INFINITY;
        s = lane < nw ? ss[lane] : 0.0f;
        for (int o = 16; o > 0; o >>= 1) {
            float m2 = __shfl_xor_sync(0xffffffffu, m, o), s2 = __shfl_xor_sync(0xffffffffu, s, o);
            ce_combine(m, s, m2, s2);
        }
        if (threadIdx.x == 0) {
            int t = targets[n] - v0;
            mloc[n] = m; se[n] = s;
            tl[n] = (t >= 0 && t < Vv) ? bf(row[t]) : 0.0f;
        }
    }
}

// s *= exp(m_local - M) so that every rank's sum is relative to the global max M
__global__ void ce_rescale_kernel(float* se, const float* mloc, const float* mglob, int BT) {
    int n = blockIdx.x * blockDim.x + threadIdx.x;
    if (n >= BT) return;
    se[n] = se[n] > 0.0f ? se[n] * expf(mloc[n] - mglob[n]) : 0.0f;
}

__global__ void ce_finish_kernel(float* losses, float* lse, const float* m, const float* se, const float* tl, int BT) {
    int n = blockIdx.x * blockDim.x + threadIdx.x;
    if (n >= BT) return;
    float l = m[n] + logf(se[n]);
    lse[n] = l;
    losses[n] = l - tl[n];
}

// logits (BT, ld) -> dlogits in place over the Vv real columns
__global__ void ce_backward_kernel(bf16* logits, int ld, const float* lse, const int* targets, int BT, int Vv, int v0, float dloss) {
    for (int n = blockIdx.x; n < BT; n += gridDim.x) {
        bf16* row = logits + (size_t)n * ld;
        float l = lse[n];
        int t = targets[n] - v0;
        for (int v = threadIdx.x; v < Vv; v += blockDim.x) {
            float p = expf(bf(row[v]) - l);
            row[v] = to_bf((p - (v == t ? 1.0f : 0.0f)) * dloss);
        }
    }
}

// *acc += sum of losses (BT); one block
__global__ void ce_loss_sum_kernel(double* acc, const float* losses, int BT) {
    double s = 0.0;
    for (int n = threadIdx.x; n < BT; n += blockDim.x) s += (double)losses[n];
    s = block_sum_d(s);
    if (threadIdx.x == 0) *acc += s;
}

static void ce_stats(float* mloc, float* se, float* tl, const bf16* logits, int ld, const int* targets, int BT, int Vv, int v0, cudaStream_t s) {
    int grid = GRID_STRIDE_CAP(BT < 65535 ? BT : 65535);
    LAUNCH(ce_stats_kernel, grid, 512, 0, s, mloc, se, tl, logits, ld, targets, BT, Vv, v0);
}
static void ce_rescale(float* se, const float* mloc, const float* mglob, int BT, cudaStream_t s) {
    LAUNCH(ce_rescale_kernel, CEIL_DIV(BT, 256), 256, 0, s, se, mloc, mglob, BT);
}
static void ce_finish(float* losses, float* lse, const float* m, const float* se, const float* tl, int BT, cudaStream_t s) {
    LAUNCH(ce_finish_kernel, CEIL_DIV(BT, 256), 256, 0, s, losses, lse, m, se, tl, BT);
}
static void ce_backward(bf16* logits, int ld, const float* lse, const int* targets, int BT, int Vv, int v0, float dloss, cudaStream_t s) {
    if (Vv == 0) return;
    int grid = GRID_STRIDE_CAP(BT < 65535 ? BT : 65535);
    LAUNCH(ce_backward_kernel, grid, 512, 0, s, logits, ld, lse, targets, BT, Vv, v0, dloss);
}
static void ce_loss_sum(double* acc, const float* losses, int BT, cudaStream_t s) {
    LAUNCH(ce_loss_sum_kernel, 1, 1024, 0, s, acc, losses, BT);
}

#endif // LLMC_CROSSENTROPY_CUH
