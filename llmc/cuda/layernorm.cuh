/*
 * layernorm.cuh: LayerNorm (eps 1e-5) on bf16 rows with fp32 statistics, fused with the
 * residual add where the model has one.
 *
 *   layernorm_forward        out = LN(inp) * w + b; mean, rstd kept (fp32) for backward
 *   residual_forward         resid = a + b + bias, and optionally out = LN(resid) (the fused
 *                            "x + attention -> LN2" of a block; the residual is rounded to
 *                            bf16 first and LN reads the rounded value, so backward and
 *                            recomputation see exactly what forward used)
 *   layernorm_backward       dinp = dresid + LN'(dout) (the residual gradient fused in;
 *                            dresid may be NULL or alias dinp), dw, db (fp32) += ... in the
 *                            same kernel (no second pass over dout and inp)
 *
 * Rows: one block per row (grid-stride over rows); thread t owns the 8-column packs at
 * c = 8 (t + blockDim.x k), k < P, and keeps them in registers, so every element is read
 * once and written once. P (a template argument, so the packs stay in registers) is 1 up to
 * C = 4096 (every preset but 530b) and LN_MAX_PACKS above. Loads and stores are 16 bytes (x128,
 * cuda_utils.cuh) when C % 8 == 0 and every pointer is 16-byte aligned; otherwise the
 * scalar instantiation of the same kernel runs (same arithmetic in the same order: the
 * same bits). Row sums: each thread's packs in order, then block_sum (fixed butterfly):
 * deterministic, but not the bits of the earlier one-warp-per-row kernels.
 *
 * dw/db (deterministic, no float atomics): each block adds g * norm and g of the rows it
 * takes into its own (2, C) fp32 partial sums in shared memory (every column owned by one
 * thread, so no barrier and no race), writes them to the scratch, and the blocks combine
 * in a two-level tree: the last block of each cluster of LN_FAN consecutive blocks to
 * finish (atomic ticket after __threadfence) sums its cluster's partials in block order,
 * and the last of those sums the cluster results in cluster order and adds them to dw/db.
 * The partition (grid, clusters) depends only on N, so the bits do not depend on which
 * block finishes when. Two levels instead of one last block: at 1.3b one block alone would
 * read all 512 partials (8 MiB) on one SM; here 16 blocks read 32 each, then one reads 16.
 */
#ifndef LLMC_LAYERNORM_CUH
#define LLMC_LAYERNORM_CUH

#include "cuda_utils.cuh"

#define LN_EPS 1e-5f
#define LN_MAX_PACKS 5 // 8-column packs per thread: C <= 5 * 8 * LN_MAX_THREADS = 20480 (530b)
#define LN_MAX_THREADS 512
#define LN_BWD_GRID 512 // backward blocks at most (each takes >= LN_BWD_MIN_ROWS rows)
#define LN_BWD_MIN_ROWS 8
#define LN_FAN 32 // blocks per cluster of the dw/db tree

// threads per row: one per 8-column pack, a warp multiple, at most LN_MAX_THREADS
static inline int ln_threads(int C) {
    int t = CEIL_DIV(CEIL_DIV(C, 8), WARP) * WARP;
    if (t > LN_MAX_THREADS) t = LN_MAX_THREADS;
    if (CEIL_DIV(C, 8 * t) > LN_MAX_PACKS)
        die("layernorm: C = %d above %d (LN_MAX_PACKS)", C, 8 * LN_MAX_PACKS * LN_MAX_THREADS);
    return t;
}
// packs per thread the kernels are instantiated for: 1 (C <= 8 * LN_MAX_THREADS) or LN_MAX_PACKS
static inline int ln_packs(int C, int threads) { return CEIL_DIV(C, 8 * threads) <= 1 ? 1 : LN_MAX_PACKS; }
// launches kernel<VEC, P> for the runtime vec and P (the four instantiations)
#define LN_LAUNCH(kernel, vec, P, grid, block, smem, stream, ...)                          \
    do {                                                                                   \
        if (vec && P == 1)                                                                 \
            LAUNCH((kernel<true, 1>), grid, block, smem, stream, __VA_ARGS__);             \
        else if (vec)                                                                      \
            LAUNCH((kernel<true, LN_MAX_PACKS>), grid, block, smem, stream, __VA_ARGS__);  \
        else if (P == 1)                                                                   \
            LAUNCH((kernel<false, 1>), grid, block, smem, stream, __VA_ARGS__);            \
        else                                                                               \
            LAUNCH((kernel<false, LN_MAX_PACKS>), grid, block, smem, stream, __VA_ARGS__); \
    } while (0)
static inline int ln_rows_grid(int N) { return GRID_STRIDE_CAP(N < (1 << 20) ? N : (1 << 20)); }

// out = (x - m) * rs * w + b for the 8 columns of one pack
__device__ __forceinline__ x128 ln_affine8(x128 xr, float m, float rs, x128 wr, x128 br) {
    float x[8], w[8], b[8], o[8];
    x128_to_f8(x, xr);
    x128_to_f8(w, wr);
    x128_to_f8(b, br);
#pragma unroll
    for (int j = 0; j < 8; j++) o[j] = (x[j] - m) * rs * w[j] + b[j];
    return f8_to_x128(o);
}

// mean and rstd of the row whose packs this thread holds in xr (elements past C are 0 and
// are left out of the variance)
template <int P>
__device__ __forceinline__ float2 ln_stats(const x128 xr[P], int C) {
    float s = 0.0f;
#pragma unroll
    for (int k = 0; k < P; k++) {
        float x[8];
        x128_to_f8(x, xr[k]);
#pragma unroll
        for (int j = 0; j < 8; j++) s += x[j];
    }
    float m = block_sum(s) / C;
    float v = 0.0f;
#pragma unroll
    for (int k = 0; k < P; k++) {
        int c = 8 * (threadIdx.x + blockDim.x * k);
        float x[8];
        x128_to_f8(x, xr[k]);
#pragma unroll
        for (int j = 0; j < 8; j++)
            if (c + j < C) {
                float d = x[j] - m;
                v += d * d;
            }
    }
    return make_float2(m, 1.0f / sqrtf(block_sum(v) / C + LN_EPS));
}

// out (N, C), mean/rstd (N), inp (N, C), w/b (C)
template <bool VEC, int P>
__global__ void __launch_bounds__(LN_MAX_THREADS)
    layernorm_forward_kernel(bf16* out, float* mean, float* rstd, const bf16* inp, const bf16* w, const bf16* b, int N,
                             int C) {
    for (int row = blockIdx.x; row < N; row += gridDim.x) {
        const bf16* x = inp + (size_t)row * C;
        x128 xr[P];
#pragma unroll
        for (int k = 0; k < P; k++) {
            int c = 8 * (threadIdx.x + blockDim.x * k);
            xr[k] = c < C ? ldx_bf16<VEC>(x, c, C) : x128{make_uint4(0, 0, 0, 0)};
        }
        float2 st = ln_stats<P>(xr, C);
        bf16* o = out + (size_t)row * C;
#pragma unroll
        for (int k = 0; k < P; k++) {
            int c = 8 * (threadIdx.x + blockDim.x * k);
            if (c < C)
                stx_bf16<VEC>(o, c, C, ln_affine8(xr[k], st.x, st.y, ldx_bf16<VEC>(w, c, C), ldx_bf16<VEC>(b, c, C)));
        }
        if (threadIdx.x == 0) {
            mean[row] = st.x;
            rstd[row] = st.y;
        }
    }
}

// resid = a + b (+ bias); if out: out = LN(resid) * w + lb. resid may alias a or b (each
// element is read and written by one thread).
template <bool VEC, int P>
__global__ void __launch_bounds__(LN_MAX_THREADS)
    residual_forward_kernel(bf16* resid, bf16* out, float* mean, float* rstd, const bf16* a, const bf16* b,
                            const bf16* bias, const bf16* w, const bf16* lb, int N, int C) {
    for (int row = blockIdx.x; row < N; row += gridDim.x) {
        size_t base = (size_t)row * C;
        x128 rr[P];
#pragma unroll
        for (int k = 0; k < P; k++) {
            int c = 8 * (threadIdx.x + blockDim.x * k);
            rr[k] = x128{make_uint4(0, 0, 0, 0)};
            if (c >= C) continue;
            float fa[8], fb[8], fc[8];
            load_bf16x8<VEC>(fa, a + base, c, C);
            load_bf16x8<VEC>(fb, b + base, c, C);
            if (bias) load_bf16x8<VEC>(fc, bias, c, C);
#pragma unroll
            for (int j = 0; j < 8; j++) {
                fa[j] += fb[j];
                if (bias) fa[j] += fc[j];
            }
            rr[k] = f8_to_x128(fa); // rounded once; LN reads the rounded value
            stx_bf16<VEC>(resid + base, c, C, rr[k]);
        }
        if (out == NULL) continue;
        float2 st = ln_stats<P>(rr, C);
#pragma unroll
        for (int k = 0; k < P; k++) {
            int c = 8 * (threadIdx.x + blockDim.x * k);
            if (c < C)
                stx_bf16<VEC>(out + base, c, C,
                              ln_affine8(rr[k], st.x, st.y, ldx_bf16<VEC>(w, c, C), ldx_bf16<VEC>(lb, c, C)));
        }
        if (threadIdx.x == 0) {
            mean[row] = st.x;
            rstd[row] = st.y;
        }
    }
}

// Backward blocks for N rows: at most LN_BWD_GRID, each with at least LN_BWD_MIN_ROWS rows
// (fewer blocks, fewer partials to combine). Depends on N only (and the emulation's cap).
static inline int ln_bwd_grid(int N) {
    int g = CEIL_DIV(N, LN_BWD_MIN_ROWS);
    if (g > LN_BWD_GRID) g = LN_BWD_GRID;
    return GRID_STRIDE_CAP(g < 1 ? 1 : g);
}
// scratch floats layernorm_backward needs for any N <= Nmax rows: LN_TICKETS ticket
// counters (at a fixed place, whatever N), then (G + clusters) x 2C partial sums. Zero
// before the first use (dev_alloc zeroes); every launch leaves the counters at 0 again.
#define LN_TICKETS 32 // >= 1 + LN_BWD_GRID / LN_FAN; a multiple of 4 keeps the partials 16-byte aligned
static inline size_t layernorm_backward_scratch(int Nmax, int C) {
    size_t G = ln_bwd_grid(Nmax), ncl = CEIL_DIV(G, LN_FAN);
    return LN_TICKETS + (G + ncl) * 2 * (size_t)C;
}

// The partials are (2, C) fp32 read and written as one flat array of 2C floats, 4
// consecutive floats per thread and step (a warp covers 512 contiguous bytes: coalesced).
// VEC needs C % 4 == 0 (so no float4 straddles the dw/db halves) and aligned pointers.

// dst (2C) = the block's shared sums src (2C); the caller has passed a barrier
template <bool VEC>
__device__ __forceinline__ void ln_copy_partial(float* dst, const float* src, int C) {
    int n = 2 * C;
    if constexpr (VEC) {
        for (int f = 4 * threadIdx.x; f < n; f += 4 * blockDim.x) st128(dst + f, ld128(src + f));
    } else {
        for (int f = threadIdx.x; f < n; f += blockDim.x) dst[f] = src[f];
    }
}
// d0 (C) (+)= sum over i < m of src[i][0], d1 (C) likewise of src[i][1] (src (m, 2, C)),
// in order i = 0, 1, ... from 0 (L2 loads: other blocks of this launch wrote src)
template <bool VEC>
__device__ __forceinline__ void ln_sum_partials(float* d0, float* d1, const float* src, int m, int C, bool accumulate) {
    const int W = VEC ? 4 : 1; // floats per thread and step
    int n = 2 * C;
    for (int f = W * threadIdx.x; f < n; f += W * blockDim.x) {
        float s[4] = {0, 0, 0, 0}, v[4];
#pragma unroll 8
        for (int i = 0; i < m; i++) { // unrolled: 8 independent L2 loads in flight per thread
            const float* p = src + (size_t)i * n + f;
            if constexpr (VEC)
                x128_to_f4(v, ld128_cg(p));
            else
                v[0] = __ldcg(p);
#pragma unroll
            for (int j = 0; j < W; j++) s[j] += v[j];
        }
        float* d = f < C ? d0 + f : d1 + (f - C);
        if constexpr (VEC) {
            if (accumulate) {
                x128_to_f4(v, ld128(d));
                for (int j = 0; j < 4; j++) s[j] = v[j] + s[j];
            }
            st128(d, f4_to_x128(s));
        } else {
            *d = accumulate ? *d + s[0] : s[0];
        }
    }
}

// dinp = dresid + LN backward of dout; dw/db += column sums (see the top of the file).
// partial: (G, 2, C) then (ncl, 2, C) of the scratch; tickets: (1 + ncl) at its start.
template <bool VEC, int P>
__global__ void __launch_bounds__(LN_MAX_THREADS)
    layernorm_backward_kernel(bf16* dinp, const bf16* dresid, float* dw, float* db, const bf16* dout, const bf16* inp,
                              const bf16* w, const float* mean, const float* rstd, int N, int C, float* partial,
                              unsigned* tickets) {
    DYNAMIC_SMEM(float, acc); // (2, C): this block's sums of g * norm (dw) and g (db)
    __shared__ unsigned ticket;
    int t = threadIdx.x, BS = blockDim.x, G = gridDim.x, ncl = CEIL_DIV(G, LN_FAN);
    x128 wr[P];
#pragma unroll
    for (int k = 0; k < P; k++) {
        int c = 8 * (t + BS * k);
        wr[k] = x128{make_uint4(0, 0, 0, 0)};
        if (c >= C) continue;
        wr[k] = ldx_bf16<VEC>(w, c, C);
        for (int j = 0; j < 8; j++)
            if (c + j < C) {
                acc[c + j] = 0.0f;
                acc[C + c + j] = 0.0f;
            }
    }
    for (int row = blockIdx.x; row < N; row += G) {
        size_t base = (size_t)row * C;
        float m = mean[row], rs = rstd[row];
        x128 xr[P], gr[P];
        float mg = 0.0f, mgn = 0.0f;
#pragma unroll
        for (int k = 0; k < P; k++) {
            int c = 8 * (t + BS * k);
            xr[k] = gr[k] = x128{make_uint4(0, 0, 0, 0)};
            if (c >= C) continue;
            xr[k] = ldx_bf16<VEC>(inp + base, c, C);
            gr[k] = ldx_bf16<VEC>(dout + base, c, C);
            float x[8], g[8], wf[8];
            x128_to_f8(x, xr[k]);
            x128_to_f8(g, gr[k]);
            x128_to_f8(wf, wr[k]);
#pragma unroll
            for (int j = 0; j < 8; j++) {
                if (c + j >= C) break;
                float norm = (x[j] - m) * rs, dn = wf[j] * g[j];
                mg += dn;
                mgn += dn * norm;
                acc[c + j] += g[j] * norm; // own columns only: no race, no barrier
                acc[C + c + j] += g[j];
            }
        }
        float2 r = block_sum2(mg, mgn);
        mg = r.x / C;
        mgn = r.y / C;
#pragma unroll
        for (int k = 0; k < P; k++) {
            int c = 8 * (t + BS * k);
            if (c >= C) continue;
            float x[8], g[8], wf[8], d[8], res[8];
            x128_to_f8(x, xr[k]);
            x128_to_f8(g, gr[k]);
            x128_to_f8(wf, wr[k]);
            if (dresid) load_bf16x8<VEC>(res, dresid + base, c, C);
#pragma unroll
            for (int j = 0; j < 8; j++) {
                float norm = (x[j] - m) * rs, dn = wf[j] * g[j];
                d[j] = rs * (dn - mg - norm * mgn);
                if (dresid) d[j] += res[j];
            }
            store_bf16x8<VEC>(dinp + base, c, C, d);
        }
    }
    // the tree: this block's partial, then its cluster, then all clusters
    float* mine = partial + (size_t)blockIdx.x * 2 * C;
    __syncthreads(); // acc is copied out in another thread-to-column mapping
    ln_copy_partial<VEC>(mine, acc, C);
    __threadfence(); // the partial is visible to every block before the ticket is taken
    __syncthreads();
    int cl = blockIdx.x / LN_FAN, b0 = cl * LN_FAN, nb = min(LN_FAN, G - b0);
    if (t == 0) ticket = atomicAdd(&tickets[1 + cl], 1u);
    __syncthreads();
    if (ticket != (unsigned)(nb - 1)) return; // not the last block of the cluster
    float* cpart = partial + ((size_t)G + cl) * 2 * C;
    ln_sum_partials<VEC>(cpart, cpart + C, partial + (size_t)b0 * 2 * C, nb, C, false);
    if (t == 0) tickets[1 + cl] = 0; // every block of the cluster has taken its ticket
    __threadfence();
    __syncthreads();
    if (t == 0) ticket = atomicAdd(&tickets[0], 1u);
    __syncthreads();
    if (ticket != (unsigned)(ncl - 1)) return;
    // the last cluster to finish: dw, db += the cluster sums in cluster order
    ln_sum_partials<VEC>(dw, db, partial + (size_t)G * 2 * C, ncl, C, true);
    if (t == 0) tickets[0] = 0;
}

static void layernorm_forward(bf16* out, float* mean, float* rstd, const bf16* inp, const bf16* w, const bf16* b, int N,
                              int C, cudaStream_t s) {
    if (N == 0) return;
    int th = ln_threads(C), g = ln_rows_grid(N), P = ln_packs(C, th);
    LN_LAUNCH(layernorm_forward_kernel, vec16_ok(C, 8, out, inp, w, b), P, g, th, 0, s, out, mean, rstd, inp, w, b, N,
              C);
}

// resid (N, C) = a + b + bias; out = LN(resid) unless out is NULL
static void residual_forward(bf16* resid, bf16* out, float* mean, float* rstd, const bf16* a, const bf16* b,
                             const bf16* bias, const bf16* w, const bf16* lb, int N, int C, cudaStream_t s) {
    if (N == 0) return;
    int th = ln_threads(C), g = ln_rows_grid(N), P = ln_packs(C, th);
    LN_LAUNCH(residual_forward_kernel, vec16_ok(C, 8, resid, out, a, b, bias, w, lb), P, g, th, 0, s, resid, out, mean,
              rstd, a, b, bias, w, lb, N, C);
}

// dinp (N, C) = dresid + LN'(dout); dw, db (C) fp32 +=. scratch: scratch_n >=
// layernorm_backward_scratch(N, C) floats, zero before its first use (the kernel leaves it
// reusable). Launches on one stream at a time (the tickets are shared).
static void layernorm_backward(bf16* dinp, const bf16* dresid, float* dw, float* db, const bf16* dout, const bf16* inp,
                               const bf16* w, const float* mean, const float* rstd, int N, int C, float* scratch,
                               size_t scratch_n, cudaStream_t s) {
    if (N == 0) return;
    size_t need = layernorm_backward_scratch(N, C);
    if (scratch_n < need)
        die("layernorm_backward: scratch of %zu floats is below the %zu needed for N = %d, C = %d", scratch_n, need, N,
            C);
    int th = ln_threads(C), G = ln_bwd_grid(N), P = ln_packs(C, th);
    size_t smem = 2 * (size_t)C * sizeof(float);
    unsigned* tickets = (unsigned*)scratch;
    float* partial = scratch + LN_TICKETS;
    bool vec = vec16_ok(C, 8, dinp, dresid, dw, db, dout, inp, w, scratch);
    if (smem > 48 * 1024) { // 2C floats above 48 KiB: C > 6144, only the LN_MAX_PACKS instantiations
        cudaCheck(cudaFuncSetAttribute(layernorm_backward_kernel<true, LN_MAX_PACKS>,
                                       cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem));
        cudaCheck(cudaFuncSetAttribute(layernorm_backward_kernel<false, LN_MAX_PACKS>,
                                       cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem));
    }
    LN_LAUNCH(layernorm_backward_kernel, vec, P, G, th, smem, s, dinp, dresid, dw, db, dout, inp, w, mean, rstd, N, C,
              partial, tickets);
}

#endif // LLMC_LAYERNORM_CUH
