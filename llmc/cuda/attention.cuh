/*
 * attention.cuh: causal self-attention over the local heads, two implementations with the
 * same inputs and outputs (softmax scale 1/sqrt(hs), fp32 math on bf16 data):
 *
 *   qkv (B, T, 3*Cl) laid out [Q | K | V], head h at dims [h*hs, (h+1)*hs) of each block
 *   out (B, T, Cl)
 *
 * naive: the reference path. Materialises the probabilities att (B, NH, T, T) fp32 and, in
 *   backward, the pre-softmax gradient (same size). One block per (b, h, query row);
 *   backward in three passes (row gradient; dq by rows; dk, dv by key columns), so every
 *   sum is owned by one thread and runs in a fixed order: deterministic, no atomics.
 * flash: never materialises T x T. Forward: one block per (b, h, 32-query tile), K/V tiles
 *   of 32 keys stream through shared memory, online softmax (running max and sum per row),
 *   keeps lse (B, NH, T) fp32 for backward. Backward (FlashAttention-2 style, recomputing
 *   the probabilities from lse): D = rowsum(dout * out); one kernel per key tile accumulates
 *   dk, dv over the query tiles; a second kernel per query tile accumulates dq over the key
 *   tiles. Splitting dq from dk/dv costs one more recomputation of the scores but needs no
 *   atomics: deterministic. Within a warp, lanes take keys (scores: one dot product per
 *   lane) and then dims (accumulations, the probability broadcast by a shuffle).
 *   Plain CUDA cores (fp32 FMA), no tensor cores yet: correct at any T, but slower than
 *   a tensor-core kernel (README, "The CUDA trainer"). Head size up to 256.
 */
#ifndef LLMC_ATTENTION_CUH
#define LLMC_ATTENTION_CUH

#include "cuda_utils.cuh"
#include <type_traits>

// ---------------------------------------------------------------------------------------
// naive

__global__ void attn_naive_forward_kernel(bf16* out, float* att, const bf16* qkv, int T, int NH, int hs) {
    int t = blockIdx.x, h = blockIdx.y, b = blockIdx.z;
    int Cl = NH * hs, C3 = 3 * Cl;
    float scale = 1.0f / sqrtf((float)hs);
    const bf16* q = qkv + ((size_t)b * T + t) * C3 + h * hs;
    float* a = att + (((size_t)b * NH + h) * T + t) * T;
    float mx = -INFINITY;
    for (int t2 = threadIdx.x; t2 <= t; t2 += blockDim.x) {
        const bf16* k = qkv + ((size_t)b * T + t2) * C3 + Cl + h * hs;
        float s = 0.0f;
        for (int i = 0; i < hs; i++) s += bf(q[i]) * bf(k[i]);
        s *= scale;
        a[t2] = s;
        mx = fmaxf(mx, s);
    }
    mx = block_max(mx);
    float sum = 0.0f;
    for (int t2 = threadIdx.x; t2 <= t; t2 += blockDim.x) {
        float e = expf(a[t2] - mx);
        a[t2] = e;
        sum += e;
    }
    sum = block_sum(sum);
    float inv = 1.0f / sum;
    for (int t2 = threadIdx.x; t2 < T; t2 += blockDim.x) a[t2] = t2 <= t ? a[t2] * inv : 0.0f;
    __syncthreads();
    for (int i = threadIdx.x; i < hs; i += blockDim.x) {
        float o = 0.0f;
        for (int t2 = 0; t2 <= t; t2++) o += a[t2] * bf(qkv[((size_t)b * T + t2) * C3 + 2 * Cl + h * hs + i]);
        out[((size_t)b * T + t) * Cl + h * hs + i] = to_bf(o);
    }
}

// dpre[b,h,t,t2] = att * (datt - sum(att * datt)) * scale, datt[t2] = dout[t] . v[t2]
__global__ void attn_naive_bwd_row_kernel(float* dpre, const float* att, const bf16* dout, const bf16* qkv, int T,
                                          int NH, int hs) {
    int t = blockIdx.x, h = blockIdx.y, b = blockIdx.z;
    int Cl = NH * hs, C3 = 3 * Cl;
    float scale = 1.0f / sqrtf((float)hs);
    const float* a = att + (((size_t)b * NH + h) * T + t) * T;
    float* d = dpre + (((size_t)b * NH + h) * T + t) * T;
    const bf16* go = dout + ((size_t)b * T + t) * Cl + h * hs;
    float dot = 0.0f;
    for (int t2 = threadIdx.x; t2 <= t; t2 += blockDim.x) {
        const bf16* v = qkv + ((size_t)b * T + t2) * C3 + 2 * Cl + h * hs;
        float s = 0.0f;
        for (int i = 0; i < hs; i++) s += bf(go[i]) * bf(v[i]);
        d[t2] = s;
        dot += a[t2] * s;
    }
    dot = block_sum(dot);
    for (int t2 = threadIdx.x; t2 < T; t2 += blockDim.x) d[t2] = t2 <= t ? a[t2] * (d[t2] - dot) * scale : 0.0f;
}

// dq[t] = sum_{t2 <= t} dpre[t][t2] k[t2]
__global__ void attn_naive_bwd_dq_kernel(bf16* dqkv, const float* dpre, const bf16* qkv, int T, int NH, int hs) {
    int t = blockIdx.x, h = blockIdx.y, b = blockIdx.z;
    int Cl = NH * hs, C3 = 3 * Cl;
    const float* d = dpre + (((size_t)b * NH + h) * T + t) * T;
    for (int i = threadIdx.x; i < hs; i += blockDim.x) {
        float s = 0.0f;
        for (int t2 = 0; t2 <= t; t2++) s += d[t2] * bf(qkv[((size_t)b * T + t2) * C3 + Cl + h * hs + i]);
        dqkv[((size_t)b * T + t) * C3 + h * hs + i] = to_bf(s);
    }
}

// dk[t2] = sum_{t >= t2} dpre[t][t2] q[t]; dv[t2] = sum_{t >= t2} att[t][t2] dout[t]
__global__ void attn_naive_bwd_dkv_kernel(bf16* dqkv, const float* dpre, const float* att, const bf16* dout,
                                          const bf16* qkv, int T, int NH, int hs) {
    int t2 = blockIdx.x, h = blockIdx.y, b = blockIdx.z;
    int Cl = NH * hs, C3 = 3 * Cl;
    size_t bh = ((size_t)b * NH + h) * T;
    for (int i = threadIdx.x; i < hs; i += blockDim.x) {
        float sk = 0.0f, sv = 0.0f;
        for (int t = t2; t < T; t++) {
            sk += dpre[(bh + t) * T + t2] * bf(qkv[((size_t)b * T + t) * C3 + h * hs + i]);
            sv += att[(bh + t) * T + t2] * bf(dout[((size_t)b * T + t) * Cl + h * hs + i]);
        }
        dqkv[((size_t)b * T + t2) * C3 + Cl + h * hs + i] = to_bf(sk);
        dqkv[((size_t)b * T + t2) * C3 + 2 * Cl + h * hs + i] = to_bf(sv);
    }
}

// out (B, T, Cl); att (B, NH, T, T) probabilities
static void attention_forward_naive(bf16* out, float* att, const bf16* qkv, int B, int T, int NH, int hs,
                                    cudaStream_t s) {
    dim3 grid(T, NH, B);
    LAUNCH(attn_naive_forward_kernel, grid, 128, 0, s, out, att, qkv, T, NH, hs);
}

// dqkv (B, T, 3Cl) overwritten; dpre: (B, NH, T, T) fp32 scratch
static void attention_backward_naive(bf16* dqkv, float* dpre, const bf16* dout, const bf16* qkv, const float* att,
                                     int B, int T, int NH, int hs, cudaStream_t s) {
    dim3 grid(T, NH, B);
    LAUNCH(attn_naive_bwd_row_kernel, grid, 128, 0, s, dpre, att, dout, qkv, T, NH, hs);
    LAUNCH(attn_naive_bwd_dq_kernel, grid, 64, 0, s, dqkv, (const float*)dpre, qkv, T, NH, hs);
    LAUNCH(attn_naive_bwd_dkv_kernel, grid, 64, 0, s, dqkv, (const float*)dpre, att, dout, qkv, T, NH, hs);
}

// ---------------------------------------------------------------------------------------
// flash

#define FA_TILE 32 // queries per query tile = keys per key tile = lanes
#define FA_WARPS 8
#define FA_ROWS (FA_TILE / FA_WARPS) // rows (queries or keys) owned by one warp

// acc[i] += x * v[d] over this lane's dimensions d = lane + 32 i < hs of one row
template <int MAXD>
__device__ __forceinline__ void fa_axpy(float (&acc)[MAXD], float x, const float* v, int hs) {
    int lane = threadIdx.x % WARP;
#pragma unroll
    for (int i = 0; i < MAXD; i++) {
        int d = lane + WARP * i;
        if (d < hs) acc[i] += x * v[d];
    }
}

// dst[d] = bf16(acc[i] * mul) over this lane's dimensions of one row
template <int MAXD>
__device__ __forceinline__ void fa_store_row(bf16* dst, const float (&acc)[MAXD], float mul, int hs) {
    int lane = threadIdx.x % WARP;
#pragma unroll
    for (int i = 0; i < MAXD; i++) {
        int d = lane + WARP * i;
        if (d < hs) dst[d] = to_bf(acc[i] * mul);
    }
}

// loads rows [r0, r0 + FA_TILE) of one head of a (B, T, stride) bf16 tensor into a
// FA_TILE x ld fp32 tile (rows >= T are zero)
__device__ __forceinline__ void fa_load_tile(float* dst, int ld, const bf16* src, size_t stride, int r0, int T,
                                             int hs) {
    for (int idx = threadIdx.x; idx < FA_TILE * hs; idx += blockDim.x) {
        int r = idx / hs, d = idx % hs, t = r0 + r;
        dst[r * ld + d] = t < T ? bf(src[(size_t)t * stride + d]) : 0.0f;
    }
}

// ---------------------------------------------------------------------------------------
// attention blocks: the flash kernels work on one block of query rows against one block of
// key rows. The whole causal attention is one CAUSAL block; ring attention
// (llmc/cuda/attention_ring.cuh) runs one block per ring step.

// Which keys of a block a query sees. CAUSAL: Tq == Tk, key j visible to query i iff j <= i
// (row numbers inside the block); FULL: every key of the block.
enum AttnMask { ATTN_CAUSAL = 0, ATTN_FULL = 1 };

// Where a block's rows are, per sequence. Query side: rows [q0, q0 + Tq) of buffers with Tqa
// rows (qkv (B, Tqa, 3Cl), dout and o (B, Tqa, Cl), lse and D (B, NH, Tqa)). Key side: rows
// [k0, k0 + Tk) of buffers with Tka rows: K and V (B, Tka, kv_ld) bf16, head h at columns
// h*hs of each (inside qkv: kv_ld = 3Cl; a packed K|V buffer: 2Cl), dK and dV (B, Tka, Cl).
struct AttnBlock {
    int NH;
    int Tqa;
    int q0;
    int Tq;
    int Tka;
    int k0;
    int Tk;
    int kv_ld;
};

// the whole causal attention over T rows of qkv
__host__ __device__ inline AttnBlock attn_block_causal(int NH, int T, int hs) {
    AttnBlock a = {NH, T, 0, T, T, 0, T, 3 * NH * hs};
    return a;
}

// Merges one row of a block's result into the fp32 accumulators o (hs floats) and *lse:
// acc / l is the block's output, lse_blk = m + log(l) its log-sum-exp. first: overwrite (the
// row's first block); else the online-softmax rule lse' = log(exp(lse) + exp(lse_blk)),
// o' = o exp(lse - lse') + o_blk exp(lse_blk - lse'). A row that saw no key (l = 0, lse_blk
// = -inf) leaves the accumulators as they are; an empty accumulator (lse = -inf) takes the
// block's values. The whole warp calls it (lane 0's lse is broadcast before lane 0 writes).
template <int MAXD>
__device__ __forceinline__ void fa_merge_row(float* o, float* lse, const float (&acc)[MAXD], float m, float l,
                                             int first, int hs) {
    int lane = threadIdx.x % WARP;
    float lb = l > 0.0f ? m + logf(l) : -INFINITY;
    float inv = l > 0.0f ? 1.0f / l : 0.0f;
    float la = -INFINITY;
    if (!first && lane == 0) la = *lse;
    la = __shfl_sync(0xffffffffu, la, 0);
    float ca = 0.0f;
    float cb = inv;
    if (!first) {
        if (lb == -INFINITY) return;
        float mx = fmaxf(la, lb);
        float ln = mx + logf(expf(la - mx) + expf(lb - mx));
        ca = expf(la - ln);
        cb = expf(lb - ln) * inv;
        lb = ln;
    }
#pragma unroll
    for (int i = 0; i < MAXD; i++) {
        int d = lane + WARP * i;
        if (d < hs) o[d] = first ? acc[i] * cb : o[d] * ca + acc[i] * cb;
    }
    if (lane == 0) *lse = lb;
}

// dst[d] = acc[i] * mul (first) or dst[d] += acc[i] * mul over this lane's dimensions of one row
template <int MAXD>
__device__ __forceinline__ void fa_acc_row(float* dst, const float (&acc)[MAXD], float mul, int first, int hs) {
    int lane = threadIdx.x % WARP;
#pragma unroll
    for (int i = 0; i < MAXD; i++) {
        int d = lane + WARP * i;
        if (d < hs) dst[d] = first ? acc[i] * mul : dst[d] + acc[i] * mul;
    }
}

// The forward of one block (one thread block per (b, h, 32-query tile)). ACC: merge into the
// fp32 accumulators o_acc (B, Tqa, Cl) and lse_acc (B, NH, Tqa) (fa_merge_row); else store
// out (B, Tqa, Cl) bf16 and lse (B, NH, Tqa).
template <int MAXD, int MASK, bool ACC>
__device__ __forceinline__ void fa_forward_body(bf16* out, float* lse, float* o_acc, float* lse_acc, int first,
                                                const bf16* qkv, const bf16* kp, const bf16* vp, AttnBlock a, int hs) {
    DYNAMIC_SMEM(float, sm);
    int qt = blockIdx.x, h = blockIdx.y, b = blockIdx.z;
    int lane = threadIdx.x % WARP, w = threadIdx.x / WARP;
    int NH = a.NH, Cl = NH * hs, C3 = 3 * Cl, ldk = hs + 1;
    int T = a.Tq;
    float scale = 1.0f / sqrtf((float)hs);
    float* sQ = sm;                 // (32, hs)   rows read by broadcast
    float* sK = sQ + FA_TILE * hs;  // (32, hs+1) lane = key reads its row
    float* sV = sK + FA_TILE * ldk; // (32, hs)   lanes over dims
    const bf16* hq = qkv + ((size_t)b * a.Tqa + a.q0) * C3 + h * hs;
    const bf16* hk = kp + ((size_t)b * a.Tka + a.k0) * a.kv_ld + h * hs;
    const bf16* hv = vp + ((size_t)b * a.Tka + a.k0) * a.kv_ld + h * hs;
    int q0 = qt * FA_TILE;
    fa_load_tile(sQ, hs, hq, C3, q0, T, hs);
    float o[FA_ROWS][MAXD], m[FA_ROWS], l[FA_ROWS];
#pragma unroll
    for (int r = 0; r < FA_ROWS; r++) {
        m[r] = -INFINITY;
        l[r] = 0.0f;
#pragma unroll
        for (int i = 0; i < MAXD; i++) o[r][i] = 0.0f;
    }
    int nkt = MASK == ATTN_CAUSAL ? qt + 1 : CEIL_DIV(a.Tk, FA_TILE);
    for (int kt = 0; kt < nkt; kt++) {
        int k0 = kt * FA_TILE;
        __syncthreads(); // everyone is done with the previous K/V tile
        fa_load_tile(sK, ldk, hk, a.kv_ld, k0, a.Tk, hs);
        fa_load_tile(sV, hs, hv, a.kv_ld, k0, a.Tk, hs);
        __syncthreads();
#pragma unroll
        for (int r = 0; r < FA_ROWS; r++) {
            int row = w * FA_ROWS + r, t = q0 + row;
            if (t >= T || (MASK == ATTN_CAUSAL && k0 > t)) continue; // warp-uniform
            int last = MASK == ATTN_CAUSAL ? t : a.Tk - 1;           // the last key this row sees
            float s = 0.0f;
            for (int d = 0; d < hs; d++) s += sQ[row * hs + d] * sK[lane * ldk + d];
            s *= scale;
            int vis = k0 + lane <= last; // this lane's key
            if (!vis) s = -INFINITY;
            float mn = fmaxf(m[r], warp_max(s)); // finite: key k0 <= last is visible
            float p = vis ? expf(s - mn) : 0.0f;
            float alpha = expf(m[r] - mn);
            l[r] = l[r] * alpha + warp_sum(p);
#pragma unroll
            for (int i = 0; i < MAXD; i++) o[r][i] *= alpha;
            for (int j = 0; j < FA_TILE; j++) {
                if (k0 + j > last) break; // warp-uniform
                fa_axpy(o[r], __shfl_sync(0xffffffffu, p, j), sV + j * hs, hs);
            }
            m[r] = mn;
        }
    }
#pragma unroll
    for (int r = 0; r < FA_ROWS; r++) {
        int t = q0 + w * FA_ROWS + r;
        if (t >= T) continue;
        size_t orow = (size_t)b * a.Tqa + a.q0 + t;
        size_t lrow = ((size_t)b * NH + h) * a.Tqa + a.q0 + t;
        if constexpr (ACC) {
            fa_merge_row(o_acc + orow * Cl + h * hs, lse_acc + lrow, o[r], m[r], l[r], first, hs);
        } else {
            fa_store_row(out + orow * Cl + h * hs, o[r], 1.0f / l[r], hs);
            if (lane == 0) lse[lrow] = m[r] + logf(l[r]);
        }
    }
}

template <int MAXD>
__global__ void flash_forward_kernel(bf16* out, float* lse, const bf16* qkv, int T, int NH, int hs) {
    int Cl = NH * hs;
    fa_forward_body<MAXD, ATTN_CAUSAL, false>(out, lse, nullptr, nullptr, 0, qkv, qkv + Cl, qkv + 2 * Cl,
                                              attn_block_causal(NH, T, hs), hs);
}

template <int MAXD, int MASK>
__global__ void flash_ring_forward_kernel(float* o_acc, float* lse_acc, int first, const bf16* qkv, const bf16* k,
                                          const bf16* v, AttnBlock a, int hs) {
    fa_forward_body<MAXD, MASK, true>(nullptr, nullptr, o_acc, lse_acc, first, qkv, k, v, a, hs);
}

// Dd[b,h,t] = sum_d dout[b,t,h,d] * out[b,t,h,d]; one warp per (b, t, h)
__global__ void flash_bwd_dot_kernel(float* Dd, const bf16* dout, const bf16* out, int B, int T, int NH, int hs) {
    int idx = blockIdx.x * (blockDim.x / WARP) + threadIdx.x / WARP, lane = threadIdx.x % WARP;
    if (idx >= B * T * NH) return;
    int h = idx % NH, bt = idx / NH, b = bt / T, t = bt % T;
    size_t o = (size_t)bt * NH * hs + (size_t)h * hs;
    float s = 0.0f;
    for (int d = lane; d < hs; d += WARP) s += bf(dout[o + d]) * bf(out[o + d]);
    s = warp_sum(s);
    if (lane == 0) Dd[((size_t)b * NH + h) * T + t] = s;
}

// dk, dv for one key tile of a block, accumulated over the query tiles that can see it. ACC:
// into the fp32 dk_acc, dv_acc (B, Tka, Cl) (first: overwrite); else bf16 into dqkv's K and V
// (the key side is qkv then).
template <int MAXD, int MASK, bool ACC>
__device__ __forceinline__ void fa_bwd_dkv_body(bf16* dqkv, float* dk_acc, float* dv_acc, int first, const bf16* dout,
                                                const bf16* qkv, const bf16* kp, const bf16* vp, const float* lse,
                                                const float* Dd, AttnBlock a, int hs) {
    DYNAMIC_SMEM(float, sm);
    int kt = blockIdx.x, h = blockIdx.y, b = blockIdx.z;
    int lane = threadIdx.x % WARP, w = threadIdx.x / WARP;
    int NH = a.NH, Cl = NH * hs, C3 = 3 * Cl, ldq = hs + 1;
    int T = a.Tq;
    float scale = 1.0f / sqrtf((float)hs);
    float* sK = sm;                 // (32, hs)   broadcast
    float* sV = sK + FA_TILE * hs;  // (32, hs)   broadcast
    float* sQ = sV + FA_TILE * hs;  // (32, hs+1) lane = query reads its row; lanes over dims read row j
    float* sG = sQ + FA_TILE * ldq; // (32, hs+1) dout, same access
    float* sL = sG + FA_TILE * ldq; // (32) lse
    float* sD = sL + FA_TILE;       // (32) D
    const bf16* hq = qkv + ((size_t)b * a.Tqa + a.q0) * C3 + h * hs;
    const bf16* hg = dout + ((size_t)b * a.Tqa + a.q0) * Cl + h * hs;
    const bf16* hk = kp + ((size_t)b * a.Tka + a.k0) * a.kv_ld + h * hs;
    const bf16* hv = vp + ((size_t)b * a.Tka + a.k0) * a.kv_ld + h * hs;
    const float* hl = lse + ((size_t)b * NH + h) * a.Tqa + a.q0;
    const float* hd = Dd + ((size_t)b * NH + h) * a.Tqa + a.q0;
    int k0 = kt * FA_TILE, nqt = (T + FA_TILE - 1) / FA_TILE;
    fa_load_tile(sK, hs, hk, a.kv_ld, k0, a.Tk, hs);
    fa_load_tile(sV, hs, hv, a.kv_ld, k0, a.Tk, hs);
    float dk[FA_ROWS][MAXD], dv[FA_ROWS][MAXD];
#pragma unroll
    for (int r = 0; r < FA_ROWS; r++) {
#pragma unroll
        for (int i = 0; i < MAXD; i++) {
            dk[r][i] = 0.0f;
            dv[r][i] = 0.0f;
        }
    }
    for (int qt = MASK == ATTN_CAUSAL ? kt : 0; qt < nqt; qt++) {
        int q0 = qt * FA_TILE;
        __syncthreads();
        fa_load_tile(sQ, ldq, hq, C3, q0, T, hs);
        fa_load_tile(sG, ldq, hg, Cl, q0, T, hs);
        if (threadIdx.x < FA_TILE) {
            int t = q0 + threadIdx.x;
            sL[threadIdx.x] = t < T ? hl[t] : 0.0f;
            sD[threadIdx.x] = t < T ? hd[t] : 0.0f;
        }
        __syncthreads();
        int t = q0 + lane; // this lane's query
#pragma unroll
        for (int r = 0; r < FA_ROWS; r++) {
            int kr = w * FA_ROWS + r, key = k0 + kr;
            if (key >= a.Tk || (MASK == ATTN_CAUSAL && q0 + FA_TILE - 1 < key)) continue; // warp-uniform
            float s = 0.0f, dp = 0.0f;
            for (int d = 0; d < hs; d++) {
                s += sQ[lane * ldq + d] * sK[kr * hs + d];
                dp += sG[lane * ldq + d] * sV[kr * hs + d];
            }
            int vis = t < T && (MASK == ATTN_FULL || t >= key);
            float p = vis ? expf(s * scale - sL[lane]) : 0.0f;
            float ds = vis ? p * (dp - sD[lane]) : 0.0f;
            int j0 = MASK == ATTN_CAUSAL && key - q0 > 0 ? key - q0 : 0; // queries before the key see nothing
            for (int j = j0; j < FA_TILE; j++) {
                fa_axpy(dv[r], __shfl_sync(0xffffffffu, p, j), sG + j * ldq, hs);
                fa_axpy(dk[r], __shfl_sync(0xffffffffu, ds, j), sQ + j * ldq, hs);
            }
        }
    }
#pragma unroll
    for (int r = 0; r < FA_ROWS; r++) {
        int key = k0 + w * FA_ROWS + r;
        if (key >= a.Tk) continue;
        size_t krow = (size_t)b * a.Tka + a.k0 + key;
        if constexpr (ACC) {
            fa_acc_row(dk_acc + krow * Cl + h * hs, dk[r], scale, first, hs);
            fa_acc_row(dv_acc + krow * Cl + h * hs, dv[r], 1.0f, first, hs);
        } else {
            bf16* dst = dqkv + krow * C3 + h * hs;
            fa_store_row(dst + Cl, dk[r], scale, hs);
            fa_store_row(dst + 2 * Cl, dv[r], 1.0f, hs);
        }
    }
}

template <int MAXD>
__global__ void flash_bwd_dkv_kernel(bf16* dqkv, const bf16* dout, const bf16* qkv, const float* lse, const float* Dd,
                                     int T, int NH, int hs) {
    int Cl = NH * hs;
    fa_bwd_dkv_body<MAXD, ATTN_CAUSAL, false>(dqkv, nullptr, nullptr, 0, dout, qkv, qkv + Cl, qkv + 2 * Cl, lse, Dd,
                                              attn_block_causal(NH, T, hs), hs);
}

template <int MAXD, int MASK>
__global__ void flash_ring_bwd_dkv_kernel(float* dk_acc, float* dv_acc, int first, const bf16* dout, const bf16* qkv,
                                          const bf16* k, const bf16* v, const float* lse, const float* Dd, AttnBlock a,
                                          int hs) {
    fa_bwd_dkv_body<MAXD, MASK, true>(nullptr, dk_acc, dv_acc, first, dout, qkv, k, v, lse, Dd, a, hs);
}

// dq for one query tile of a block, accumulated over the key tiles it sees. ACC: into the
// fp32 dq_acc (B, Tqa, Cl) (first: overwrite); else bf16 into dqkv's Q.
template <int MAXD, int MASK, bool ACC>
__device__ __forceinline__ void fa_bwd_dq_body(bf16* dqkv, float* dq_acc, int first, const bf16* dout, const bf16* qkv,
                                               const bf16* kp, const bf16* vp, const float* lse, const float* Dd,
                                               AttnBlock a, int hs) {
    DYNAMIC_SMEM(float, sm);
    int qt = blockIdx.x, h = blockIdx.y, b = blockIdx.z;
    int lane = threadIdx.x % WARP, w = threadIdx.x / WARP;
    int NH = a.NH, Cl = NH * hs, C3 = 3 * Cl, ldk = hs + 1;
    int T = a.Tq;
    float scale = 1.0f / sqrtf((float)hs);
    float* sQ = sm;                 // (32, hs)   broadcast
    float* sG = sQ + FA_TILE * hs;  // (32, hs)   broadcast
    float* sK = sG + FA_TILE * hs;  // (32, hs+1) lane = key reads its row; lanes over dims read row j
    float* sV = sK + FA_TILE * ldk; // (32, hs+1)
    float* sL = sV + FA_TILE * ldk; // (32)
    float* sD = sL + FA_TILE;       // (32)
    const bf16* hq = qkv + ((size_t)b * a.Tqa + a.q0) * C3 + h * hs;
    const bf16* hk = kp + ((size_t)b * a.Tka + a.k0) * a.kv_ld + h * hs;
    const bf16* hv = vp + ((size_t)b * a.Tka + a.k0) * a.kv_ld + h * hs;
    const float* hl = lse + ((size_t)b * NH + h) * a.Tqa + a.q0;
    const float* hd = Dd + ((size_t)b * NH + h) * a.Tqa + a.q0;
    int q0 = qt * FA_TILE;
    fa_load_tile(sQ, hs, hq, C3, q0, T, hs);
    fa_load_tile(sG, hs, dout + ((size_t)b * a.Tqa + a.q0) * Cl + h * hs, Cl, q0, T, hs);
    if (threadIdx.x < FA_TILE) {
        int t = q0 + threadIdx.x;
        sL[threadIdx.x] = t < T ? hl[t] : 0.0f;
        sD[threadIdx.x] = t < T ? hd[t] : 0.0f;
    }
    float dq[FA_ROWS][MAXD];
#pragma unroll
    for (int r = 0; r < FA_ROWS; r++) {
#pragma unroll
        for (int i = 0; i < MAXD; i++) dq[r][i] = 0.0f;
    }
    int nkt = MASK == ATTN_CAUSAL ? qt + 1 : CEIL_DIV(a.Tk, FA_TILE);
    for (int kt = 0; kt < nkt; kt++) {
        int k0 = kt * FA_TILE;
        __syncthreads();
        fa_load_tile(sK, ldk, hk, a.kv_ld, k0, a.Tk, hs);
        fa_load_tile(sV, ldk, hv, a.kv_ld, k0, a.Tk, hs);
        __syncthreads();
#pragma unroll
        for (int r = 0; r < FA_ROWS; r++) {
            int row = w * FA_ROWS + r, t = q0 + row;
            if (t >= T || (MASK == ATTN_CAUSAL && k0 > t)) continue; // warp-uniform
            int last = MASK == ATTN_CAUSAL ? t : a.Tk - 1;           // the last key this row sees
            float s = 0.0f, dp = 0.0f;
            for (int d = 0; d < hs; d++) {
                s += sQ[row * hs + d] * sK[lane * ldk + d];
                dp += sG[row * hs + d] * sV[lane * ldk + d];
            }
            int vis = k0 + lane <= last; // this lane's key
            float p = vis ? expf(s * scale - sL[row]) : 0.0f;
            float ds = vis ? p * (dp - sD[row]) : 0.0f;
            for (int j = 0; j < FA_TILE; j++) {
                if (k0 + j > last) break; // warp-uniform
                fa_axpy(dq[r], __shfl_sync(0xffffffffu, ds, j), sK + j * ldk, hs);
            }
        }
    }
#pragma unroll
    for (int r = 0; r < FA_ROWS; r++) {
        int t = q0 + w * FA_ROWS + r;
        if (t >= T) continue;
        size_t qrow = (size_t)b * a.Tqa + a.q0 + t;
        if constexpr (ACC) {
            fa_acc_row(dq_acc + qrow * Cl + h * hs, dq[r], scale, first, hs);
        } else {
            fa_store_row(dqkv + qrow * C3 + h * hs, dq[r], scale, hs);
        }
    }
}

template <int MAXD>
__global__ void flash_bwd_dq_kernel(bf16* dqkv, const bf16* dout, const bf16* qkv, const float* lse, const float* Dd,
                                    int T, int NH, int hs) {
    int Cl = NH * hs;
    fa_bwd_dq_body<MAXD, ATTN_CAUSAL, false>(dqkv, nullptr, 0, dout, qkv, qkv + Cl, qkv + 2 * Cl, lse, Dd,
                                             attn_block_causal(NH, T, hs), hs);
}

template <int MAXD, int MASK>
__global__ void flash_ring_bwd_dq_kernel(float* dq_acc, int first, const bf16* dout, const bf16* qkv, const bf16* k,
                                         const bf16* v, const float* lse, const float* Dd, AttnBlock a, int hs) {
    fa_bwd_dq_body<MAXD, MASK, true>(nullptr, dq_acc, first, dout, qkv, k, v, lse, Dd, a, hs);
}

static size_t flash_fwd_smem(int hs) { return sizeof(float) * (size_t)FA_TILE * (3 * hs + 1); }
static size_t flash_bwd_smem(int hs) { return sizeof(float) * ((size_t)FA_TILE * (4 * hs + 2) + 2 * FA_TILE); }

// the largest head size the flash kernels take
#define FLASH_MAX_HS 256

static int flash_maxd(int hs) {
    if (hs <= 32) return 1;
    if (hs <= 64) return 2;
    if (hs <= 128) return 4;
    if (hs <= FLASH_MAX_HS) return 8;
    die("flash attention supports head size <= %d (this model: %d): set LLMC_ATTENTION=naive", FLASH_MAX_HS, hs);
    return 0;
}

template <int MAXD>
static void flash_forward_launch(bf16* out, float* lse, const bf16* qkv, int B, int T, int NH, int hs, cudaStream_t s) {
    size_t smem = flash_fwd_smem(hs);
    if (smem > 48 * 1024)
        cudaCheck(
            cudaFuncSetAttribute(flash_forward_kernel<MAXD>, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem));
    dim3 grid(CEIL_DIV(T, FA_TILE), NH, B);
    LAUNCH(flash_forward_kernel<MAXD>, grid, FA_WARPS * WARP, smem, s, out, lse, qkv, T, NH, hs);
}

template <int MAXD>
static void flash_backward_launch(bf16* dqkv, const float* Dd, const bf16* dout, const bf16* qkv, const float* lse,
                                  int B, int T, int NH, int hs, cudaStream_t s) {
    size_t smem = flash_bwd_smem(hs);
    if (smem > 48 * 1024) {
        cudaCheck(
            cudaFuncSetAttribute(flash_bwd_dkv_kernel<MAXD>, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem));
        cudaCheck(
            cudaFuncSetAttribute(flash_bwd_dq_kernel<MAXD>, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem));
    }
    dim3 grid(CEIL_DIV(T, FA_TILE), NH, B);
    LAUNCH(flash_bwd_dkv_kernel<MAXD>, grid, FA_WARPS * WARP, smem, s, dqkv, dout, qkv, lse, Dd, T, NH, hs);
    LAUNCH(flash_bwd_dq_kernel<MAXD>, grid, FA_WARPS * WARP, smem, s, dqkv, dout, qkv, lse, Dd, T, NH, hs);
}

// out (B, T, Cl); lse (B, NH, T)
static void attention_forward_flash(bf16* out, float* lse, const bf16* qkv, int B, int T, int NH, int hs,
                                    cudaStream_t s) {
    switch (flash_maxd(hs)) {
        case 1:
            flash_forward_launch<1>(out, lse, qkv, B, T, NH, hs, s);
            break;
        case 2:
            flash_forward_launch<2>(out, lse, qkv, B, T, NH, hs, s);
            break;
        case 4:
            flash_forward_launch<4>(out, lse, qkv, B, T, NH, hs, s);
            break;
        default:
            flash_forward_launch<8>(out, lse, qkv, B, T, NH, hs, s);
            break;
    }
}

// dqkv (B, T, 3Cl) overwritten; Dd: (B, NH, T) fp32 scratch; out/lse from the forward
static void attention_backward_flash(bf16* dqkv, float* Dd, const bf16* dout, const bf16* out, const bf16* qkv,
                                     const float* lse, int B, int T, int NH, int hs, cudaStream_t s) {
    int rows = B * T * NH;
    LAUNCH(flash_bwd_dot_kernel, CEIL_DIV(rows, 8), 256, 0, s, Dd, dout, out, B, T, NH, hs);
    switch (flash_maxd(hs)) {
        case 1:
            flash_backward_launch<1>(dqkv, Dd, dout, qkv, lse, B, T, NH, hs, s);
            break;
        case 2:
            flash_backward_launch<2>(dqkv, Dd, dout, qkv, lse, B, T, NH, hs, s);
            break;
        case 4:
            flash_backward_launch<4>(dqkv, Dd, dout, qkv, lse, B, T, NH, hs, s);
            break;
        default:
            flash_backward_launch<8>(dqkv, Dd, dout, qkv, lse, B, T, NH, hs, s);
            break;
    }
}

// ---------------------------------------------------------------------------------------
// one block on CUDA cores, into fp32 accumulators (llmc/cuda/attention_ring.cuh checks the
// arguments and picks these or the tensor-core kernels)

// f(std::integral_constant<int, MASK>()): the block kernels are templates on the mask
template <typename F>
static void attn_for_mask(int mask, F f) {
    if (mask == ATTN_CAUSAL)
        f(std::integral_constant<int, ATTN_CAUSAL>());
    else
        f(std::integral_constant<int, ATTN_FULL>());
}

// f(std::integral_constant<int, MAXD>()) for the head size's flash_maxd
template <typename F>
static void fa_for_maxd(int hs, F f) {
    switch (flash_maxd(hs)) {
        case 1:
            f(std::integral_constant<int, 1>());
            break;
        case 2:
            f(std::integral_constant<int, 2>());
            break;
        case 4:
            f(std::integral_constant<int, 4>());
            break;
        default:
            f(std::integral_constant<int, 8>());
            break;
    }
}

template <class K>
static void fa_smem_attr(K kernel, size_t bytes) {
    if (bytes > 48 * 1024)
        cudaCheck(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)bytes));
}

// o_acc (B, Tqa, Cl), lse_acc (B, NH, Tqa) fp32: rows [q0, q0 + Tq) merged with this block
static void flash_ring_forward(float* o_acc, float* lse_acc, int first, const bf16* qkv, const bf16* k, const bf16* v,
                               AttnBlock a, int mask, int B, int hs, cudaStream_t s) {
    size_t smem = flash_fwd_smem(hs);
    dim3 grid(CEIL_DIV(a.Tq, FA_TILE), a.NH, B);
    fa_for_maxd(hs, [&](auto md) {
        attn_for_mask(mask, [&](auto mk) {
            constexpr int MAXD = decltype(md)::value;
            constexpr int MASK = decltype(mk)::value;
            fa_smem_attr(flash_ring_forward_kernel<MAXD, MASK>, smem);
            LAUNCH((flash_ring_forward_kernel<MAXD, MASK>), grid, FA_WARPS * WARP, smem, s, o_acc, lse_acc, first, qkv,
                   k, v, a, hs);
        });
    });
}

// dq (B, Tqa, Cl) fp32 rows [q0, q0 + Tq) and dk, dv (B, Tka, Cl) fp32 rows [k0, k0 + Tk)
// accumulated (first_q, first_kv: overwritten) with this block's gradients; lse, Dd (B, NH, Tqa)
static void flash_ring_backward(float* dq, float* dk, float* dv, int first_q, int first_kv, const bf16* dout,
                                const bf16* qkv, const bf16* k, const bf16* v, const float* lse, const float* Dd,
                                AttnBlock a, int mask, int B, int hs, cudaStream_t s) {
    size_t smem = flash_bwd_smem(hs);
    fa_for_maxd(hs, [&](auto md) {
        attn_for_mask(mask, [&](auto mk) {
            constexpr int MAXD = decltype(md)::value;
            constexpr int MASK = decltype(mk)::value;
            fa_smem_attr(flash_ring_bwd_dkv_kernel<MAXD, MASK>, smem);
            fa_smem_attr(flash_ring_bwd_dq_kernel<MAXD, MASK>, smem);
            if (a.Tk > 0)
                LAUNCH((flash_ring_bwd_dkv_kernel<MAXD, MASK>), dim3(CEIL_DIV(a.Tk, FA_TILE), a.NH, B), FA_WARPS * WARP,
                       smem, s, dk, dv, first_kv, dout, qkv, k, v, lse, Dd, a, hs);
            LAUNCH((flash_ring_bwd_dq_kernel<MAXD, MASK>), dim3(CEIL_DIV(a.Tq, FA_TILE), a.NH, B), FA_WARPS * WARP,
                   smem, s, dq, first_q, dout, qkv, k, v, lse, Dd, a, hs);
        });
    });
}

#endif // LLMC_ATTENTION_CUH
