/*
 * crossentropy.cuh: vocab-parallel softmax cross-entropy fused with its backward (doc/spec.md
 * section 3). Each TP rank holds logits (B*T, ld) for its vocabulary slice [v0, v0 + Vl):
 * the head GEMM computes all Vl columns (the padded rows of the tied embedding are zero), of
 * which the first Vv are real tokens. Only those Vv enter the softmax; every padded column
 * (Vv <= v < ld) of dlogits is written as exactly 0, so the padded rows of the embedding
 * gradient stay exactly 0. The logits are never gathered across TP.
 *
 * Passes over the logits, one pass = one read of the (B*T, ld) bf16 buffer (+ a write):
 *
 *   TP = 1 (ce_fused): ONE pass. A block takes a row, holds it in registers (8-column packs,
 *     P per thread), reduces max and sum-exp over the block, and from the same registers
 *     writes the token loss, lse and (training) dlogits in place: one read and one write.
 *     (llm.c's fused classifier reads the row twice, counting on L2 for the second.)
 *
 *   TP > 1: a row's softmax needs the max and the sum-exp over every rank's slice. They
 *     exist only after the TP all-reduce, a collective a kernel cannot wait for inside
 *     itself, and the row cannot stay in registers across the kernel boundary, so the
 *     minimum is one read before the all-reduce and one read + write after it:
 *     ce_stats     one read: per row the local max m_r and sum of exp(l - m_r) s_r (online,
 *                  pack by pack), and the target logit if this rank owns the target (else 0)
 *     (caller)     all-reduce max over TP -> M; ce_rescale: s_r *= exp(m_r - M); all-reduce
 *                  sum of (s, tl) (vectors of B*T floats, not the logits)
 *     ce_backward  one read + write: lse = M + log(s), the token loss lse - tl, and dlogits
 *                  in place (training)
 *     ce_finish    evaluation (no dlogits): the loss from the statistics, no pass at all
 *   A TP = 1 row too long for the registers (ld > CE_FUSED_MAX_COLS) takes the TP > 1 kernels
 *   without the all-reduce: two reads, one write.
 *
 *   ce_loss_sum   acc (fp64) += sum of token losses (one block, fixed order)
 *
 * dlogits = (exp(l - lse) - onehot) * dloss (bf16), the gradient of dloss * sum of token
 * losses. In evaluation (dloss = 0) the logits are left as they are (sampling reads them).
 * Deterministic: each thread owns fixed columns (8-column packs c = 8 (t + blockDim.x k)),
 * sums them in order, and the row reductions are fixed butterflies in which both partners
 * compute the same expression, so every thread ends with the same value, run to run.
 * Loads and stores are 16 bytes (x128) when ld % 8 == 0 and the pointer is 16-byte aligned
 * (the trainer's ld is Vl rounded up to 8); otherwise the scalar instantiation of the same
 * kernel runs (same arithmetic in the same order: the same bits).
 */
#ifndef LLMC_CROSSENTROPY_CUH
#define LLMC_CROSSENTROPY_CUH

#include "cuda_utils.cuh"

#define CE_THREADS 512        // the streaming kernels (TP > 1)
#define CE_FUSED_THREADS 1024 // ce_fused at most
#define CE_FUSED_PACKS 8      // 8-column packs per thread held in registers by ce_fused at most
#define CE_FUSED_MAX_COLS (8 * CE_FUSED_PACKS * CE_FUSED_THREADS)

__device__ __forceinline__ void ce_combine(float& m, float& s, float m2, float s2) {
    float mn = fmaxf(m, m2);
    float a = (m == -INFINITY) ? 0.0f : s * expf(m - mn);
    float b = (m2 == -INFINITY) ? 0.0f : s2 * expf(m2 - mn);
    m = mn;
    s = a + b;
}

// (max, sum-exp) pairs over the block: every thread gets the same pair. blockDim.x a
// multiple of 32; reached by all threads. sm, ss: 32 floats of shared memory each.
__device__ __forceinline__ void ce_block_combine(float& m, float& s, float* sm, float* ss) {
    int lane = threadIdx.x % WARP, w = threadIdx.x / WARP, nw = blockDim.x / WARP;
    for (int o = 16; o > 0; o >>= 1) {
        float m2 = __shfl_xor_sync(0xffffffffu, m, o);
        float s2 = __shfl_xor_sync(0xffffffffu, s, o);
        ce_combine(m, s, m2, s2);
    }
    __syncthreads(); // the previous row's reads of sm/ss are done
    if (lane == 0) {
        sm[w] = m;
        ss[w] = s;
    }
    __syncthreads();
    m = lane < nw ? sm[lane] : -INFINITY;
    s = lane < nw ? ss[lane] : 0.0f;
    for (int o = 16; o > 0; o >>= 1) {
        float m2 = __shfl_xor_sync(0xffffffffu, m, o);
        float s2 = __shfl_xor_sync(0xffffffffu, s, o);
        ce_combine(m, s, m2, s2);
    }
}

// dlogits of the pack at column c (8 columns) of a row with lse l and local target t:
// real columns (c + j < Vv) get (p - onehot) * dloss, padded ones exactly 0
__device__ __forceinline__ x128 ce_dlogits8(x128 xr, int c, int Vv, int t, float l, float dloss) {
    float x[8], d[8];
    x128_to_f8(x, xr);
#pragma unroll
    for (int j = 0; j < 8; j++) {
        float p = expf(x[j] - l);
        d[j] = c + j < Vv ? (p - (c + j == t ? 1.0f : 0.0f)) * dloss : 0.0f;
    }
    return f8_to_x128(d);
}

// TP = 1, one pass: logits (BT, ld) -> losses, lse (BT) and, if dloss != 0, dlogits in
// place over all ld columns. One block per row (grid-stride); 8 * blockDim.x * P >= ld.
template <bool VEC, int P>
__global__ void __launch_bounds__(CE_FUSED_THREADS)
    ce_fused_kernel(bf16* logits, int ld, float* losses, float* lse, const int* targets, int BT, int Vv, float dloss) {
    __shared__ float sm[32], ss[32];
    int tid = threadIdx.x, BS = blockDim.x;
    for (int n = blockIdx.x; n < BT; n += gridDim.x) {
        bf16* row = logits + (size_t)n * ld;
        int t = targets[n];
        // the row's packs, held until the dlogits are written (padded columns read but unused)
        x128 xr[P];
#pragma unroll
        for (int k = 0; k < P; k++) {
            int c = 8 * (tid + BS * k);
            xr[k] = c < Vv ? ldx_bf16<VEC>(row, c, ld) : x128{make_uint4(0, 0, 0, 0)};
        }
        // this thread's max, then its sum of exp relative to it, and the target logit if owned
        float m = -INFINITY;
#pragma unroll
        for (int k = 0; k < P; k++) {
            int c = 8 * (tid + BS * k);
            float x[8];
            x128_to_f8(x, xr[k]);
#pragma unroll
            for (int j = 0; j < 8; j++)
                if (c + j < Vv) m = fmaxf(m, x[j]);
        }
        float s = 0.0f, tl = 0.0f;
        int own = 0;
#pragma unroll
        for (int k = 0; k < P; k++) {
            int c = 8 * (tid + BS * k);
            float x[8];
            x128_to_f8(x, xr[k]);
#pragma unroll
            for (int j = 0; j < 8; j++) {
                if (c + j < Vv) s += expf(x[j] - m);
                if (c + j == t) {
                    tl = x[j];
                    own = 1;
                }
            }
        }
        ce_block_combine(m, s, sm, ss);
        float l = m + logf(s);
        // the owner of the target writes the loss (thread 0 if no column is the target)
        if (own || (tid == 0 && (t < 0 || t >= Vv))) {
            losses[n] = l - tl;
            lse[n] = l;
        }
        if (dloss == 0.0f) continue;
#pragma unroll
        for (int k = 0; k < P; k++) {
            int c = 8 * (tid + BS * k);
            if (c < ld) stx_bf16<VEC>(row, c, ld, ce_dlogits8(xr[k], c, Vv, t, l, dloss));
        }
    }
}

// one block per row (grid-stride); blockDim a multiple of 32. mloc, se, tl (BT): this
// slice's max, sum of exp relative to it, and the target logit (0 if not in the slice)
template <bool VEC>
__global__ void __launch_bounds__(CE_THREADS) ce_stats_kernel(float* mloc, float* se, float* tl, const bf16* logits,
                                                              int ld, const int* targets, int BT, int Vv, int v0) {
    __shared__ float sm[32], ss[32];
    for (int n = blockIdx.x; n < BT; n += gridDim.x) {
        const bf16* row = logits + (size_t)n * ld;
        int t = targets[n] - v0;
        float m = -INFINITY, s = 0.0f;
        for (int c = 8 * threadIdx.x; c < Vv; c += 8 * blockDim.x) {
            float x[8];
            load_bf16x8<VEC>(x, row, c, ld);
            float pm = -INFINITY;
#pragma unroll
            for (int j = 0; j < 8; j++)
                if (c + j < Vv) pm = fmaxf(pm, x[j]);
            float mn = fmaxf(m, pm); // finite: the pack has a real column
            float ps = 0.0f;
#pragma unroll
            for (int j = 0; j < 8; j++) {
                if (c + j < Vv) ps += expf(x[j] - mn);
                if (c + j == t && t < Vv) tl[n] = x[j]; // the one owner of the target column
            }
            s = (m == -INFINITY ? 0.0f : s * expf(m - mn)) + ps;
            m = mn;
        }
        ce_block_combine(m, s, sm, ss);
        if (threadIdx.x == 0) {
            mloc[n] = m;
            se[n] = s;
            if (t < 0 || t >= Vv) tl[n] = 0.0f;
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

// after the all-reduce, one pass: losses, lse (BT) from the global statistics m, se, tl,
// and logits (BT, ld) -> dlogits in place over all ld columns (padded ones 0)
template <bool VEC>
__global__ void __launch_bounds__(CE_THREADS)
    ce_backward_kernel(bf16* logits, int ld, float* losses, float* lse, const float* m, const float* se,
                       const float* tl, const int* targets, int BT, int Vv, int v0, float dloss) {
    for (int n = blockIdx.x; n < BT; n += gridDim.x) {
        bf16* row = logits + (size_t)n * ld;
        float l = m[n] + logf(se[n]);
        int t = targets[n] - v0;
        if (threadIdx.x == 0) {
            lse[n] = l;
            losses[n] = l - tl[n];
        }
        for (int c = 8 * threadIdx.x; c < ld; c += 8 * blockDim.x) {
            x128 xr = c < Vv ? ldx_bf16<VEC>(row, c, ld) : x128{make_uint4(0, 0, 0, 0)};
            stx_bf16<VEC>(row, c, ld, ce_dlogits8(xr, c, Vv, t, l, dloss));
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

static inline int ce_rows_grid(int BT) { return GRID_STRIDE_CAP(BT < 65535 ? BT : 65535); }
// the streaming kernels' threads for rows of ld columns: one per 8-column pack, a warp
// multiple, at most CE_THREADS
static inline int ce_threads(int ld) {
    int th = CEIL_DIV(CEIL_DIV(ld, 8), WARP) * WARP;
    return th < WARP ? WARP : (th > CE_THREADS ? CE_THREADS : th);
}

// ce_fused's packs per thread (1, 2, 4 or CE_FUSED_PACKS) and threads for rows of ld
// columns: the fewest packs that fit in CE_FUSED_THREADS threads. 0 if the row does not fit.
static inline int ce_fused_packs(int ld, int* threads) {
    int packs = CEIL_DIV(ld, 8);
    for (int P = 1; P <= CE_FUSED_PACKS; P *= 2) {
        int th = CEIL_DIV(CEIL_DIV(packs, P), WARP) * WARP;
        if (th <= CE_FUSED_THREADS) {
            *threads = th;
            return P;
        }
    }
    return 0;
}
static inline bool ce_fused_fits(int ld) {
    int th;
    return ld >= 1 && ce_fused_packs(ld, &th) > 0;
}

#define CE_FUSED_LAUNCH(VEC, P, grid, th, s, ...)                                        \
    do {                                                                                 \
        if (P == 1)                                                                      \
            LAUNCH((ce_fused_kernel<VEC, 1>), grid, th, 0, s, __VA_ARGS__);              \
        else if (P == 2)                                                                 \
            LAUNCH((ce_fused_kernel<VEC, 2>), grid, th, 0, s, __VA_ARGS__);              \
        else if (P == 4)                                                                 \
            LAUNCH((ce_fused_kernel<VEC, 4>), grid, th, 0, s, __VA_ARGS__);              \
        else                                                                             \
            LAUNCH((ce_fused_kernel<VEC, CE_FUSED_PACKS>), grid, th, 0, s, __VA_ARGS__); \
    } while (0)

// TP = 1: losses, lse (BT) and, if dloss != 0, dlogits in place, in one pass over logits
// (BT, ld) whose first Vv columns are real. Needs ce_fused_fits(ld).
static void ce_fused(bf16* logits, int ld, float* losses, float* lse, const int* targets, int BT, int Vv, float dloss,
                     cudaStream_t s) {
    if (BT == 0) return;
    int th = 0, P = ce_fused_packs(ld, &th);
    if (P == 0) die("ce_fused: rows of %d columns exceed %d (use ce_stats + ce_backward)", ld, CE_FUSED_MAX_COLS);
    int grid = ce_rows_grid(BT);
    if (vec16_ok(ld, 8, logits))
        CE_FUSED_LAUNCH(true, P, grid, th, s, logits, ld, losses, lse, targets, BT, Vv, dloss);
    else
        CE_FUSED_LAUNCH(false, P, grid, th, s, logits, ld, losses, lse, targets, BT, Vv, dloss);
}
static void ce_stats(float* mloc, float* se, float* tl, const bf16* logits, int ld, const int* targets, int BT, int Vv,
                     int v0, cudaStream_t s) {
    if (BT == 0) return;
    int grid = ce_rows_grid(BT), th = ce_threads(ld);
    LAUNCH_VEC(ce_stats_kernel, vec16_ok(ld, 8, logits), grid, th, 0, s, mloc, se, tl, logits, ld, targets, BT, Vv, v0);
}
static void ce_rescale(float* se, const float* mloc, const float* mglob, int BT, cudaStream_t s) {
    if (BT == 0) return;
    LAUNCH(ce_rescale_kernel, CEIL_DIV(BT, 256), 256, 0, s, se, mloc, mglob, BT);
}
static void ce_finish(float* losses, float* lse, const float* m, const float* se, const float* tl, int BT,
                      cudaStream_t s) {
    if (BT == 0) return;
    LAUNCH(ce_finish_kernel, CEIL_DIV(BT, 256), 256, 0, s, losses, lse, m, se, tl, BT);
}
// losses, lse from the (all-reduced) statistics m, se, tl and dlogits in place (all ld columns)
static void ce_backward(bf16* logits, int ld, float* losses, float* lse, const float* m, const float* se,
                        const float* tl, const int* targets, int BT, int Vv, int v0, float dloss, cudaStream_t s) {
    if (BT == 0) return;
    int grid = ce_rows_grid(BT), th = ce_threads(ld);
    LAUNCH_VEC(ce_backward_kernel, vec16_ok(ld, 8, logits), grid, th, 0, s, logits, ld, losses, lse, m, se, tl, targets,
               BT, Vv, v0, dloss);
}
static void ce_loss_sum(double* acc, const float* losses, int BT, cudaStream_t s) {
    LAUNCH(ce_loss_sum_kernel, 1, 1024, 0, s, acc, losses, BT);
}

#endif // LLMC_CROSSENTROPY_CUH
