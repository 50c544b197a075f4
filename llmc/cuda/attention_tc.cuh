/*
 * attention_tc.cuh: causal flash attention on tensor cores (bf16 m16n8k16 mma.sync with fp32
 * accumulation, llmc/cuda/mma.cuh), the fast path of attention.cuh's interface: same qkv
 * (B, T, 3Cl) input, out (B, T, Cl), lse (B, NH, T), dqkv; never stores T x T.
 *
 * Data movement: tiles go global -> shared with cp.async (16 bytes a thread, rows >= T
 * zero-filled), double buffered so the next tile streams in while the current one is used;
 * shared -> registers with ldmatrix (.trans for operands stored the other way round). Scores
 * and probabilities never go through shared memory: an mma accumulator row (fp32) rounded
 * pairwise to bf16 is already an A operand (mma.cuh's layout notes), so P (and dS) feed the
 * next product from registers, and the online-softmax rescale of O is done in registers
 * (each lane holds 2 rows, g and g + 8, of every accumulator).
 * Forward: one block of 4 warps per (b, h, 64-query tile); each warp owns 16 query rows,
 *   keeps Q as A operands and O as fp32 accumulators; K/V tiles of 64 keys are double
 *   buffered; S = Q K^T, online softmax in fp32 (4 lanes per row), P rounded to bf16 for
 *   O += P V (as FlashAttention does).
 * Backward (FlashAttention-2 style, recomputing P from lse), two kernels, no atomics:
 *   dK/dV: one block per 64-key tile, each warp 16 keys, over double-buffered 32-query tiles
 *     (Q, dO, lse, D): S^T = K Q^T, dP^T = V dO^T, P^T = exp(S^T - lse),
 *     dS^T = P^T (dP^T - D), dV += P^T dO, dK += dS^T Q;
 *   dQ: one block per 64-query tile, each warp 16 queries, over double-buffered 32-key tiles
 *     (K, V): S, dP as above, dQ += dS K.
 *   P and dS are rounded to bf16 as tensor-core operands; D = rowsum(dO * O) comes from
 *   attention.cuh's flash_bwd_dot_kernel.
 * Causal work is triangular: blocks are numbered so the tiles with the most work start first
 *   (forward and dQ: the last query tiles; dK/dV: the first key tiles), and the light ones
 *   fill the gaps at the end of the grid.
 * Head sizes: 16, 32, 64, 128, 160 (a multiple of 16 whose accumulators fit in registers);
 * other sizes use attention.cuh's CUDA-core flash kernels.
 */
#ifndef LLMC_ATTENTION_TC_CUH
#define LLMC_ATTENTION_TC_CUH

#include "cuda_utils.cuh"
#include "mma.cuh"
#include "attention.cuh"
#include <type_traits>

#define TC_WARPS 4

// Issues cp.async for rows [r0, r0 + R) of one head (D columns at src, row stride `stride`
// elements) into dst (R x ld bf16), 16 bytes per copy; rows >= T are zero-filled (their
// source address is row 0, valid but not read).
template <int D, int R>
__device__ __forceinline__ void tc_async_rows(bf16* dst, int ld, const bf16* src, size_t stride, int r0, int T) {
    constexpr int V8 = D / 8;
    for (int idx = threadIdx.x; idx < R * V8; idx += blockDim.x) {
        int r = idx / V8;
        int c = (idx % V8) * 8;
        int t = r0 + r;
        bool ok = t < T;
        cp_async16(dst + r * ld + c, src + (size_t)(ok ? t : 0) * stride + c, ok);
    }
}

// The same for R floats (lse, D) at src[r0 ..], 4 bytes per copy: rows of lse are not
// 16-byte aligned when T % 4 != 0.
template <int R>
__device__ __forceinline__ void tc_async_vec(float* dst, const float* src, int r0, int T) {
    for (int i = threadIdx.x; i < R; i += blockDim.x) {
        bool ok = r0 + i < T;
        cp_async4(dst + i, src + (ok ? r0 + i : 0), ok);
    }
}

// This lane's row address for ldmatrix x4 of a 16 x 16 tile at p (row-major, ld) as
// 8x8 tiles (rows 0-7, cols 0-7), (8-15, 0-7), (0-7, 8-15), (8-15, 8-15): r[0..3] is then
// an A operand, and with .trans two B operands (k x n stored k-major: r[0], r[1] for
// columns 0-7, r[2], r[3] for 8-15).
__device__ __forceinline__ const bf16* tc_addr_a(const bf16* p, int ld) {
    int lane = threadIdx.x % WARP;
    return p + (lane % 16) * ld + (lane / 16) * 8;
}

// The same for a B operand stored n-major (16 n-rows x 16 k-columns, read without .trans):
// tiles (n 0-7, k 0-7), (n 0-7, k 8-15), (n 8-15, k 0-7), (n 8-15, k 8-15), so r[0], r[1]
// are the B operand of n 0-7 and r[2], r[3] that of n 8-15.
__device__ __forceinline__ const bf16* tc_addr_bt(const bf16* p, int ld) {
    int lane = threadIdx.x % WARP;
    return p + ((lane % 8) + 8 * (lane / 16)) * ld + ((lane / 8) % 2) * 8;
}

// acc = 0 for NJ accumulator tiles (16 x 8, fp32)
template <int NJ>
__device__ __forceinline__ void tc_zero(float (&acc)[NJ][4]) {
#pragma unroll
    for (int j = 0; j < NJ; j++) {
#pragma unroll
        for (int e = 0; e < 4; e++) acc[j][e] = 0.0f;
    }
}

// acc[j] (16 x 8, fp32) += A (16 x 16 of registers) times B rows [0, 16) x columns [0, 8 NJ)
// of a row-major k x n tile in shared memory (ldmatrix .trans, two 8-column tiles per load)
template <int NJ>
__device__ __forceinline__ void tc_mma_ab(float (&acc)[NJ][4], const uint32_t (&a)[4], const bf16* b, int ld) {
#pragma unroll
    for (int jp = 0; jp < NJ / 2; jp++) {
        uint32_t bb[4];
        ldsm_x4_trans(bb, tc_addr_a(b + jp * 16, ld));
        mma_16816(acc[2 * jp], a, bb[0], bb[1]);
        mma_16816(acc[2 * jp + 1], a, bb[2], bb[3]);
    }
}

// acc[j] (16 x 8) += A_kk B^T for the 16-column slice kk of a row-major n x k tile bt in
// shared memory (n = 8 NJ rows, read without .trans)
template <int NJ>
__device__ __forceinline__ void tc_mma_abt(float (&acc)[NJ][4], const uint32_t (&a)[4], const bf16* bt, int ld) {
#pragma unroll
    for (int jp = 0; jp < NJ / 2; jp++) {
        uint32_t bb[4];
        ldsm_x4(bb, tc_addr_bt(bt + jp * 16 * ld, ld));
        mma_16816(acc[2 * jp], a, bb[0], bb[1]);
        mma_16816(acc[2 * jp + 1], a, bb[2], bb[3]);
    }
}

// Accumulators of keys (or queries) 16 kc .. 16 kc + 15 rounded to bf16 as an A operand:
// tiles 2 kc and 2 kc + 1 are its left and right 8-column halves.
template <int NJ>
__device__ __forceinline__ void tc_acc_to_a(uint32_t (&a)[4], const float (&acc)[NJ][4], int kc) {
    a[0] = pack_bf16x2(acc[2 * kc][0], acc[2 * kc][1]);
    a[1] = pack_bf16x2(acc[2 * kc][2], acc[2 * kc][3]);
    a[2] = pack_bf16x2(acc[2 * kc + 1][0], acc[2 * kc + 1][1]);
    a[3] = pack_bf16x2(acc[2 * kc + 1][2], acc[2 * kc + 1][3]);
}

// Writes a warp's 16 x D fp32 accumulators (times mul) as bf16 to rows row0 .. row0 + 15 of a
// (.., stride) tensor, rows >= T skipped; each lane stores its bf16 pairs directly.
template <int D>
__device__ __forceinline__ void tc_store_rows(bf16* dst, size_t stride, int row0, int T, const float (&acc)[D / 8][4],
                                              float mul) {
    int lane = threadIdx.x % WARP;
    int g = lane / 4;
    int q = lane % 4;
#pragma unroll
    for (int hr = 0; hr < 2; hr++) {
        int row = row0 + g + 8 * hr;
        if (row >= T) continue;
        bf16* d = dst + (size_t)row * stride + 2 * q;
#pragma unroll
        for (int j = 0; j < D / 8; j++) {
            uint32_t v = pack_bf16x2(acc[j][2 * hr] * mul, acc[j][2 * hr + 1] * mul);
            *reinterpret_cast<uint32_t*>(d + 8 * j) = v;
        }
    }
}

// The dynamic shared array rounded up to 128 bytes. Align by adding an offset to the array's
// own pointer: rounding the pointer itself through uintptr_t made nvcc lose the shared address
// space (generic LD/ST instead of shared-memory instructions in SASS), which
// dev/cuda/resources.py's SASS check rejects in every flash_tc_ kernel.
__device__ __forceinline__ char* tc_smem_base(void* raw) {
    char* p = (char*)raw;
    return p + ((128u - (unsigned)((uintptr_t)p & 127u)) & 127u);
}

// Rows of D + 8 bf16: 16-byte aligned for cp.async and ldmatrix, and the 8 rows one ldmatrix
// tile reads fall on 8 different 16-byte bank groups (the row stride is an odd multiple of 16
// bytes), so ldmatrix is free of bank conflicts.
// Where a thread of an attention block works. Block x is (b, h), head fastest; the thread is
// lane 4 g + q of warp w and holds accumulator rows g and g + 8, column pair q.
struct TcThread {
    int b;
    int h;
    int w;
    int g;
    int q;
    int Cl;
    int C3;
    float scale; // 1 / sqrt(D)
};

template <int D>
__device__ __forceinline__ TcThread tc_thread(int NH) {
    TcThread t;
    t.b = blockIdx.x / NH;
    t.h = blockIdx.x % NH;
    int lane = threadIdx.x % WARP;
    t.w = threadIdx.x / WARP;
    t.g = lane / 4;
    t.q = lane % 4;
    t.Cl = NH * D;
    t.C3 = 3 * t.Cl;
    t.scale = 1.0f / sqrtf((float)D);
    return t;
}

// Merges a warp's 16 x D block result (o unnormalised, row max m and sum l for this lane's rows
// g and g + 8) into the fp32 accumulators: rows row0 + g (+ 8) of oa (row stride ld) and la,
// rows >= T skipped; fa_merge_row's rule (attention.cuh), float2 accesses. The 4 lanes of a row
// take the old lse from lane 4 g, which alone writes the new one.
template <int D>
__device__ __forceinline__ void tc_merge_rows(float* oa, float* la, size_t ld, int row0, int T,
                                              const float (&o)[D / 8][4], const float (&m)[2], const float (&l)[2],
                                              int first) {
    int lane = threadIdx.x % WARP;
    int g = lane / 4;
    int q = lane % 4;
#pragma unroll
    for (int hr = 0; hr < 2; hr++) {
        int row = row0 + g + 8 * hr;
        float lb = l[hr] > 0.0f ? m[hr] + logf(l[hr]) : -INFINITY;
        float inv = l[hr] > 0.0f ? 1.0f / l[hr] : 0.0f;
        float lo = -INFINITY;
        if (!first && q == 0 && row < T) lo = la[row];
        lo = __shfl_sync(0xffffffffu, lo, lane & ~3);
        if (row >= T || (!first && lb == -INFINITY)) continue; // no key seen: the accumulators stay
        float ca = 0.0f;
        float cb = inv;
        if (!first) {
            float mx = fmaxf(lo, lb);
            float ln = mx + logf(expf(lo - mx) + expf(lb - mx));
            ca = expf(lo - ln);
            cb = expf(lb - ln) * inv;
            lb = ln;
        }
        float* d = oa + (size_t)row * ld + 2 * q;
#pragma unroll
        for (int j = 0; j < D / 8; j++) {
            float2* p = reinterpret_cast<float2*>(d + 8 * j);
            float2 v = make_float2(o[j][2 * hr] * cb, o[j][2 * hr + 1] * cb);
            if (!first) {
                float2 old = *p;
                v.x += old.x * ca;
                v.y += old.y * ca;
            }
            *p = v;
        }
        if (q == 0) la[row] = lb;
    }
}

// A warp's 16 x D fp32 accumulators times mul written (first) or added to rows row0 .. row0 + 15
// of a fp32 (.., stride) tensor, rows >= T skipped; float2 accesses.
template <int D>
__device__ __forceinline__ void tc_acc_rows(float* dst, size_t stride, int row0, int T, const float (&acc)[D / 8][4],
                                            float mul, int first) {
    int lane = threadIdx.x % WARP;
    int g = lane / 4;
    int q = lane % 4;
#pragma unroll
    for (int hr = 0; hr < 2; hr++) {
        int row = row0 + g + 8 * hr;
        if (row >= T) continue;
        float* d = dst + (size_t)row * stride + 2 * q;
#pragma unroll
        for (int j = 0; j < D / 8; j++) {
            float2* p = reinterpret_cast<float2*>(d + 8 * j);
            float2 v = make_float2(acc[j][2 * hr] * mul, acc[j][2 * hr + 1] * mul);
            if (!first) {
                float2 old = *p;
                v.x += old.x;
                v.y += old.y;
            }
            *p = v;
        }
    }
}

template <int D>
struct TcFwd {
    static constexpr int LDB = D + 8;
    // Q, then 2 stages of K and V (64 rows each)
    static constexpr size_t bytes = 128 + 5 * 64 * LDB * 2;
};

// The forward of one block (attention.cuh's AttnBlock; rows relative to q0 and k0 below). ACC:
// merge into the fp32 o_acc (B, Tqa, Cl) and lse_acc (B, NH, Tqa) (tc_merge_rows); else store
// out (B, Tqa, Cl) bf16 and lse (B, NH, Tqa).
template <int D, int MASK, bool ACC>
__device__ __forceinline__ void tc_forward_body(bf16* out, float* lse, float* o_acc, float* lse_acc, int first,
                                                const bf16* qkv, const bf16* kp, const bf16* vp, AttnBlock a) {
    constexpr int LDB = TcFwd<D>::LDB;
    constexpr int DJ = D / 8; // 8-column accumulator tiles of O
    DYNAMIC_SMEM(float, smem_raw);
    char* base = tc_smem_base(smem_raw);
    bf16* sQ = (bf16*)base;              // (64, LDB)
    bf16* sKV = sQ + 64 * LDB;           // (2 stages, K then V, 64, LDB)
    int qt = gridDim.y - 1 - blockIdx.y; // heavy first: the last query tiles see the most key tiles
    const auto [b, h, w, g, q, Cl, C3, scale] = tc_thread<D>(a.NH);
    const bf16* hq = qkv + ((size_t)b * a.Tqa + a.q0) * C3 + h * D; // this (b, h)'s query row 0
    const bf16* hk = kp + ((size_t)b * a.Tka + a.k0) * a.kv_ld + h * D;
    const bf16* hv = vp + ((size_t)b * a.Tka + a.k0) * a.kv_ld + h * D;
    int T = a.Tq;
    int Tk = a.Tk;
    int q0 = qt * 64;
    int nkt = MASK == ATTN_CAUSAL ? qt + 1 : (Tk + 63) / 64;
    tc_async_rows<D, 64>(sQ, LDB, hq, C3, q0, T);
    if (MASK == ATTN_CAUSAL || nkt > 0) {
        tc_async_rows<D, 64>(sKV, LDB, hk, a.kv_ld, 0, Tk);
        tc_async_rows<D, 64>(sKV + 64 * LDB, LDB, hv, a.kv_ld, 0, Tk);
    }
    cp_async_commit();
    uint32_t qf[D / 16][4]; // Q_w (16 x D) as A operands
    float o[DJ][4];         // O_w (16 x D), unnormalised
    tc_zero(o);
    int row[2] = {q0 + w * 16 + g, q0 + w * 16 + g + 8}; // this lane's two query rows
    float m[2] = {-INFINITY, -INFINITY};
    float l[2] = {0.0f, 0.0f};
    for (int kt = 0; kt < nkt; kt++) {
        int k0 = kt * 64;
        if (kt + 1 < nkt) { // stage (kt + 1) % 2 was last read in iteration kt - 1, before its closing barrier
            bf16* nxt = sKV + ((kt + 1) % 2) * 128 * LDB;
            tc_async_rows<D, 64>(nxt, LDB, hk, a.kv_ld, k0 + 64, Tk);
            tc_async_rows<D, 64>(nxt + 64 * LDB, LDB, hv, a.kv_ld, k0 + 64, Tk);
        }
        cp_async_commit(); // possibly empty: keeps "all but the newest group" meaning tile kt
        cp_async_wait<1>();
        __syncthreads(); // every thread's copies of tile kt (and Q) are visible
        if (kt == 0) {
#pragma unroll
            for (int kk = 0; kk < D / 16; kk++) ldsm_x4(qf[kk], tc_addr_a(sQ + w * 16 * LDB + kk * 16, LDB));
        }
        const bf16* sK = sKV + (kt % 2) * 128 * LDB;
        const bf16* sV = sK + 64 * LDB;
        float s[8][4]; // S (16 x 64 keys)
        tc_zero(s);
#pragma unroll
        for (int kk = 0; kk < D / 16; kk++) tc_mma_abt<8>(s, qf[kk], sK + kk * 16, LDB);
        float mx[2] = {-INFINITY, -INFINITY};
        if (MASK == ATTN_CAUSAL || k0 + 64 > Tk) { // FULL: only the last tile has keys past the block
#pragma unroll
            for (int j = 0; j < 8; j++) {
#pragma unroll
                for (int e = 0; e < 4; e++) {
                    int key = k0 + 8 * j + 2 * q + (e % 2);
                    int t = row[e / 2];
                    bool vis = MASK == ATTN_CAUSAL ? t < T && key <= t : key < Tk;
                    float v = vis ? s[j][e] * scale : -INFINITY;
                    s[j][e] = v;
                    mx[e / 2] = fmaxf(mx[e / 2], v);
                }
            }
        } else {
#pragma unroll
            for (int j = 0; j < 8; j++) {
#pragma unroll
                for (int e = 0; e < 4; e++) {
                    float v = s[j][e] * scale;
                    s[j][e] = v;
                    mx[e / 2] = fmaxf(mx[e / 2], v);
                }
            }
        }
        float alpha[2];
#pragma unroll
        for (int hr = 0; hr < 2; hr++) { // the 4 lanes of a row (same g) agree on its max
            mx[hr] = fmaxf(mx[hr], __shfl_xor_sync(0xffffffffu, mx[hr], 1));
            mx[hr] = fmaxf(mx[hr], __shfl_xor_sync(0xffffffffu, mx[hr], 2));
            float mn = fmaxf(m[hr], mx[hr]);
            alpha[hr] = mn == -INFINITY ? 1.0f : expf(m[hr] - mn);
            m[hr] = mn;
        }
        float sum[2] = {0.0f, 0.0f};
#pragma unroll
        for (int j = 0; j < 8; j++) {
#pragma unroll
            for (int e = 0; e < 4; e++) {
                float p = s[j][e] == -INFINITY ? 0.0f : expf(s[j][e] - m[e / 2]);
                s[j][e] = p;
                sum[e / 2] += p;
            }
        }
#pragma unroll
        for (int hr = 0; hr < 2; hr++) {
            sum[hr] += __shfl_xor_sync(0xffffffffu, sum[hr], 1);
            sum[hr] += __shfl_xor_sync(0xffffffffu, sum[hr], 2);
            l[hr] = l[hr] * alpha[hr] + sum[hr];
        }
#pragma unroll
        for (int j = 0; j < DJ; j++) { // O *= alpha, row by row, in registers
            o[j][0] *= alpha[0];
            o[j][1] *= alpha[0];
            o[j][2] *= alpha[1];
            o[j][3] *= alpha[1];
        }
#pragma unroll
        for (int kc = 0; kc < 4; kc++) { // O += P V, P (bf16) straight from the S registers
            uint32_t pa[4];
            tc_acc_to_a<8>(pa, s, kc);
            tc_mma_ab<DJ>(o, pa, sV + kc * 16 * LDB, LDB);
        }
        __syncthreads(); // every warp is done with stage kt % 2 before iteration kt + 1 refills it
    }
    if (MASK == ATTN_FULL && nkt == 0) cp_async_wait<0>(); // no key tile: Q's copies are still in flight
    size_t orow = (size_t)b * a.Tqa + a.q0;                // row 0 of this (b, h)'s block in out / o_acc
    size_t lrow = ((size_t)b * a.NH + h) * a.Tqa + a.q0;
    if constexpr (ACC) {
        tc_merge_rows<D>(o_acc + orow * Cl + h * D, lse_acc + lrow, Cl, q0 + w * 16, T, o, m, l, first);
    } else {
        float inv[2] = {1.0f / l[0], 1.0f / l[1]};
#pragma unroll
        for (int j = 0; j < DJ; j++) { // normalise in place: tc_store_rows takes one factor per call
            o[j][0] *= inv[0];
            o[j][1] *= inv[0];
            o[j][2] *= inv[1];
            o[j][3] *= inv[1];
        }
        tc_store_rows<D>(out + orow * Cl + h * D, Cl, q0 + w * 16, T, o, 1.0f);
        if (q == 0) {
#pragma unroll
            for (int hr = 0; hr < 2; hr++) {
                if (row[hr] < T) lse[lrow + row[hr]] = m[hr] + logf(l[hr]);
            }
        }
    }
}

template <int D>
__global__ void __launch_bounds__(TC_WARPS* WARP)
    flash_tc_forward_kernel(bf16* out, float* lse, const bf16* qkv, int T, int NH) {
    int Cl = NH * D;
    tc_forward_body<D, ATTN_CAUSAL, false>(out, lse, nullptr, nullptr, 0, qkv, qkv + Cl, qkv + 2 * Cl,
                                           attn_block_causal(NH, T, D));
}

template <int D, int MASK>
__global__ void __launch_bounds__(TC_WARPS* WARP)
    flash_tc_ring_forward_kernel(float* o_acc, float* lse_acc, int first, const bf16* qkv, const bf16* k, const bf16* v,
                                 AttnBlock a) {
    tc_forward_body<D, MASK, true>(nullptr, nullptr, o_acc, lse_acc, first, qkv, k, v, a);
}

template <int D>
struct TcBwd {
    static constexpr int LDB = D + 8;
    // dK/dV kernel: K, V (64 rows); 2 stages of Q, dO (32 rows) and lse, D (32 floats)
    static constexpr size_t bytes_dkv = 128 + (2 * 64 + 2 * 2 * 32) * LDB * 2 + 2 * 2 * 32 * 4;
    // dQ kernel: Q, dO (64 rows); 2 stages of K, V (32 rows)
    static constexpr size_t bytes_dq = 128 + (2 * 64 + 2 * 2 * 32) * LDB * 2;
};

// dK, dV of one 64-key tile of a block. ACC: into the fp32 dk_acc, dv_acc (B, Tka, Cl) (first:
// overwrite); else bf16 into dqkv's K and V (the key side is qkv then). FULL masks only the
// query rows past the block (keys past it are never stored).
template <int D, int MASK, bool ACC>
__device__ __forceinline__ void tc_bwd_dkv_body(bf16* dqkv, float* dk_acc, float* dv_acc, int first, const bf16* dout,
                                                const bf16* qkv, const bf16* kp, const bf16* vp, const float* lse,
                                                const float* Dd, AttnBlock a) {
    constexpr int LDB = TcBwd<D>::LDB;
    constexpr int DJ = D / 8;
    constexpr int SQ = 2 * 32 * LDB; // bf16 elements of one stage's Q and dO
    DYNAMIC_SMEM(float, smem_raw);
    char* base = tc_smem_base(smem_raw);
    bf16* sK = (bf16*)base;              // (64, LDB)
    bf16* sV = sK + 64 * LDB;            // (64, LDB)
    bf16* sQG = sV + 64 * LDB;           // (2 stages, Q then dO, 32, LDB)
    float* sLD = (float*)(sQG + 2 * SQ); // (2 stages, lse then D, 32)
    int kt = blockIdx.y;                 // heavy first as is: the first key tiles see the most query tiles
    const auto [b, h, w, g, q, Cl, C3, scale] = tc_thread<D>(a.NH);
    const bf16* hq = qkv + ((size_t)b * a.Tqa + a.q0) * C3 + h * D;
    const bf16* hk = kp + ((size_t)b * a.Tka + a.k0) * a.kv_ld + h * D;
    const bf16* hv = vp + ((size_t)b * a.Tka + a.k0) * a.kv_ld + h * D;
    int T = a.Tq;
    int Tk = a.Tk;
    int k0 = kt * 64;
    int nq = (T + 31) / 32;
    int qs = MASK == ATTN_CAUSAL ? k0 / 32 : 0; // the first query tile with a query >= k0
    const bf16* hg = dout + ((size_t)b * a.Tqa + a.q0) * Cl + h * D;
    const float* hl = lse + ((size_t)b * a.NH + h) * a.Tqa + a.q0;
    const float* hd = Dd + ((size_t)b * a.NH + h) * a.Tqa + a.q0;
    tc_async_rows<D, 64>(sK, LDB, hk, a.kv_ld, k0, Tk);
    tc_async_rows<D, 64>(sV, LDB, hv, a.kv_ld, k0, Tk);
    tc_async_rows<D, 32>(sQG, LDB, hq, C3, qs * 32, T);
    tc_async_rows<D, 32>(sQG + 32 * LDB, LDB, hg, Cl, qs * 32, T);
    tc_async_vec<32>(sLD, hl, qs * 32, T);
    tc_async_vec<32>(sLD + 32, hd, qs * 32, T);
    cp_async_commit();
    float dk[DJ][4]; // dK_w, dV_w (16 keys x D)
    float dv[DJ][4];
    tc_zero(dk);
    tc_zero(dv);
    int key[2] = {k0 + w * 16 + g, k0 + w * 16 + g + 8}; // this lane's two key rows
    for (int qt = qs; qt < nq; qt++) {
        int q0 = qt * 32;
        int st = (qt - qs) % 2;
        if (qt + 1 < nq) { // stage 1 - st was last read in the previous iteration, before its closing barrier
            bf16* nxt = sQG + (1 - st) * SQ;
            float* nl = sLD + (1 - st) * 64;
            tc_async_rows<D, 32>(nxt, LDB, hq, C3, q0 + 32, T);
            tc_async_rows<D, 32>(nxt + 32 * LDB, LDB, hg, Cl, q0 + 32, T);
            tc_async_vec<32>(nl, hl, q0 + 32, T);
            tc_async_vec<32>(nl + 32, hd, q0 + 32, T);
        }
        cp_async_commit();
        cp_async_wait<1>();
        __syncthreads();
        const bf16* sQ = sQG + st * SQ;
        const bf16* sG = sQ + 32 * LDB;
        const float* sL = sLD + st * 64;
        const float* sD = sL + 32;
        // warp-uniform: CAUSAL skips a warp whose keys follow every query of the tile
        if (MASK == ATTN_FULL || q0 + 31 >= k0 + w * 16) {
            float s[4][4];  // S^T (16 keys x 32 queries)
            float dp[4][4]; // dP^T
            tc_zero(s);
            tc_zero(dp);
#pragma unroll
            for (int kk = 0; kk < D / 16; kk++) { // S^T = K_w Q^T, dP^T = V_w dO^T
                uint32_t ka[4];
                uint32_t va[4];
                ldsm_x4(ka, tc_addr_a(sK + w * 16 * LDB + kk * 16, LDB));
                ldsm_x4(va, tc_addr_a(sV + w * 16 * LDB + kk * 16, LDB));
                tc_mma_abt<4>(s, ka, sQ + kk * 16, LDB);
                tc_mma_abt<4>(dp, va, sG + kk * 16, LDB);
            }
#pragma unroll
            for (int j = 0; j < 4; j++) { // P^T and dS^T in place of S^T and dP^T
#pragma unroll
                for (int e = 0; e < 4; e++) {
                    int col = 8 * j + 2 * q + (e % 2);
                    int qi = q0 + col;
                    int k = key[e / 2];
                    bool vis = MASK == ATTN_FULL ? qi < T : k < T && qi < T && qi >= k;
                    float p = vis ? expf(s[j][e] * scale - sL[col]) : 0.0f;
                    float ds = vis ? p * (dp[j][e] - sD[col]) : 0.0f;
                    s[j][e] = p;
                    dp[j][e] = ds;
                }
            }
#pragma unroll
            for (int kc = 0; kc < 2; kc++) { // dV_w += P^T dO, dK_w += dS^T Q (16 queries at a time)
                uint32_t pa[4];
                uint32_t sa[4];
                tc_acc_to_a<4>(pa, s, kc);
                tc_acc_to_a<4>(sa, dp, kc);
                tc_mma_ab<DJ>(dv, pa, sG + kc * 16 * LDB, LDB);
                tc_mma_ab<DJ>(dk, sa, sQ + kc * 16 * LDB, LDB);
            }
        }
        __syncthreads(); // every warp is done with stage st before the next iteration refills it
    }
    size_t krow = (size_t)b * a.Tka + a.k0; // row 0 of this (b, h)'s block on the key side
    if constexpr (ACC) {
        tc_acc_rows<D>(dk_acc + krow * Cl + h * D, Cl, k0 + w * 16, Tk, dk, scale, first);
        tc_acc_rows<D>(dv_acc + krow * Cl + h * D, Cl, k0 + w * 16, Tk, dv, 1.0f, first);
    } else {
        bf16* dst = dqkv + krow * C3 + h * D;
        tc_store_rows<D>(dst + Cl, C3, k0 + w * 16, Tk, dk, scale);
        tc_store_rows<D>(dst + 2 * Cl, C3, k0 + w * 16, Tk, dv, 1.0f);
    }
}

template <int D>
__global__ void __launch_bounds__(TC_WARPS* WARP)
    flash_tc_bwd_dkv_kernel(bf16* dqkv, const bf16* dout, const bf16* qkv, const float* lse, const float* Dd, int T,
                            int NH) {
    int Cl = NH * D;
    tc_bwd_dkv_body<D, ATTN_CAUSAL, false>(dqkv, nullptr, nullptr, 0, dout, qkv, qkv + Cl, qkv + 2 * Cl, lse, Dd,
                                           attn_block_causal(NH, T, D));
}

template <int D, int MASK>
__global__ void __launch_bounds__(TC_WARPS* WARP)
    flash_tc_ring_bwd_dkv_kernel(float* dk_acc, float* dv_acc, int first, const bf16* dout, const bf16* qkv,
                                 const bf16* k, const bf16* v, const float* lse, const float* Dd, AttnBlock a) {
    tc_bwd_dkv_body<D, MASK, true>(nullptr, dk_acc, dv_acc, first, dout, qkv, k, v, lse, Dd, a);
}

// dQ of one 64-query tile of a block. ACC: into the fp32 dq_acc (B, Tqa, Cl) (first: overwrite);
// else bf16 into dqkv's Q. FULL masks only the last key tile (keys past the block).
template <int D, int MASK, bool ACC>
__device__ __forceinline__ void tc_bwd_dq_body(bf16* dqkv, float* dq_acc, int first, const bf16* dout, const bf16* qkv,
                                               const bf16* kp, const bf16* vp, const float* lse, const float* Dd,
                                               AttnBlock a) {
    constexpr int LDB = TcBwd<D>::LDB;
    constexpr int DJ = D / 8;
    constexpr int SK = 2 * 32 * LDB; // bf16 elements of one stage's K and V
    DYNAMIC_SMEM(float, smem_raw);
    char* base = tc_smem_base(smem_raw);
    bf16* sQ = (bf16*)base;              // (64, LDB)
    bf16* sG = sQ + 64 * LDB;            // (64, LDB) dO
    bf16* sKV = sG + 64 * LDB;           // (2 stages, K then V, 32, LDB)
    int qt = gridDim.y - 1 - blockIdx.y; // heavy first: the last query tiles see the most key tiles
    const auto [b, h, w, g, q, Cl, C3, scale] = tc_thread<D>(a.NH);
    const bf16* hq = qkv + ((size_t)b * a.Tqa + a.q0) * C3 + h * D;
    const bf16* hk = kp + ((size_t)b * a.Tka + a.k0) * a.kv_ld + h * D;
    const bf16* hv = vp + ((size_t)b * a.Tka + a.k0) * a.kv_ld + h * D;
    int T = a.Tq;
    int Tk = a.Tk;
    int q0 = qt * 64;
    const float* hl = lse + ((size_t)b * a.NH + h) * a.Tqa + a.q0;
    const float* hd = Dd + ((size_t)b * a.NH + h) * a.Tqa + a.q0;
    int last = q0 + 63 < T - 1 ? q0 + 63 : T - 1;
    int nkt = MASK == ATTN_CAUSAL ? last / 32 + 1 : (Tk + 31) / 32;
    tc_async_rows<D, 64>(sQ, LDB, hq, C3, q0, T);
    tc_async_rows<D, 64>(sG, LDB, dout + ((size_t)b * a.Tqa + a.q0) * Cl + h * D, Cl, q0, T);
    if (MASK == ATTN_CAUSAL || nkt > 0) {
        tc_async_rows<D, 32>(sKV, LDB, hk, a.kv_ld, 0, Tk);
        tc_async_rows<D, 32>(sKV + 32 * LDB, LDB, hv, a.kv_ld, 0, Tk);
    }
    cp_async_commit();
    int row[2] = {q0 + w * 16 + g, q0 + w * 16 + g + 8}; // this lane's two query rows
    float lr[2]; // their lse and D, straight from global memory: 2 values per lane, read once
    float dr[2];
#pragma unroll
    for (int hr = 0; hr < 2; hr++) {
        lr[hr] = row[hr] < T ? hl[row[hr]] : 0.0f;
        dr[hr] = row[hr] < T ? hd[row[hr]] : 0.0f;
    }
    float dq[DJ][4]; // dQ_w (16 queries x D)
    tc_zero(dq);
    for (int kt = 0; kt < nkt; kt++) {
        int k0 = kt * 32;
        if (kt + 1 < nkt) { // stage (kt + 1) % 2 was last read in iteration kt - 1, before its closing barrier
            bf16* nxt = sKV + ((kt + 1) % 2) * SK;
            tc_async_rows<D, 32>(nxt, LDB, hk, a.kv_ld, k0 + 32, Tk);
            tc_async_rows<D, 32>(nxt + 32 * LDB, LDB, hv, a.kv_ld, k0 + 32, Tk);
        }
        cp_async_commit();
        cp_async_wait<1>();
        __syncthreads();
        const bf16* sK = sKV + (kt % 2) * SK;
        const bf16* sV = sK + 32 * LDB;
        // warp-uniform: CAUSAL skips a warp whose queries precede every key of the tile
        if (MASK == ATTN_FULL || k0 <= q0 + w * 16 + 15) {
            float s[4][4];  // S (16 queries x 32 keys)
            float dp[4][4]; // dP
            tc_zero(s);
            tc_zero(dp);
#pragma unroll
            for (int kk = 0; kk < D / 16; kk++) { // S = Q_w K^T, dP = dO_w V^T
                uint32_t qa[4];
                uint32_t ga[4];
                ldsm_x4(qa, tc_addr_a(sQ + w * 16 * LDB + kk * 16, LDB));
                ldsm_x4(ga, tc_addr_a(sG + w * 16 * LDB + kk * 16, LDB));
                tc_mma_abt<4>(s, qa, sK + kk * 16, LDB);
                tc_mma_abt<4>(dp, ga, sV + kk * 16, LDB);
            }
            bool all = MASK == ATTN_FULL && k0 + 32 <= Tk; // FULL: only the last tile has keys past the block
#pragma unroll
            for (int j = 0; j < 4; j++) { // dS in place of dP
#pragma unroll
                for (int e = 0; e < 4; e++) {
                    int k = k0 + 8 * j + 2 * q + (e % 2);
                    int t = row[e / 2];
                    bool vis = MASK == ATTN_CAUSAL ? t < T && k <= t : all || k < Tk;
                    float p = vis ? expf(s[j][e] * scale - lr[e / 2]) : 0.0f;
                    dp[j][e] = vis ? p * (dp[j][e] - dr[e / 2]) : 0.0f;
                }
            }
#pragma unroll
            for (int kc = 0; kc < 2; kc++) { // dQ_w += dS K (16 keys at a time)
                uint32_t sa[4];
                tc_acc_to_a<4>(sa, dp, kc);
                tc_mma_ab<DJ>(dq, sa, sK + kc * 16 * LDB, LDB);
            }
        }
        __syncthreads(); // every warp is done with stage kt % 2 before iteration kt + 1 refills it
    }
    if (MASK == ATTN_FULL && nkt == 0) cp_async_wait<0>(); // no key tile: Q's and dO's copies are in flight
    size_t qrow = (size_t)b * a.Tqa + a.q0;
    if constexpr (ACC)
        tc_acc_rows<D>(dq_acc + qrow * Cl + h * D, Cl, q0 + w * 16, T, dq, scale, first);
    else
        tc_store_rows<D>(dqkv + qrow * C3 + h * D, C3, q0 + w * 16, T, dq, scale);
}

template <int D>
__global__ void __launch_bounds__(TC_WARPS* WARP)
    flash_tc_bwd_dq_kernel(bf16* dqkv, const bf16* dout, const bf16* qkv, const float* lse, const float* Dd, int T,
                           int NH) {
    int Cl = NH * D;
    tc_bwd_dq_body<D, ATTN_CAUSAL, false>(dqkv, nullptr, 0, dout, qkv, qkv + Cl, qkv + 2 * Cl, lse, Dd,
                                          attn_block_causal(NH, T, D));
}

template <int D, int MASK>
__global__ void __launch_bounds__(TC_WARPS* WARP)
    flash_tc_ring_bwd_dq_kernel(float* dq_acc, int first, const bf16* dout, const bf16* qkv, const bf16* k,
                                const bf16* v, const float* lse, const float* Dd, AttnBlock a) {
    tc_bwd_dq_body<D, MASK, true>(nullptr, dq_acc, first, dout, qkv, k, v, lse, Dd, a);
}

// head sizes with a tensor-core kernel
static int flash_tc_supported(int hs) { return hs == 16 || hs == 32 || hs == 64 || hs == 128 || hs == 160; }

template <class K>
static void tc_smem_attr(K kernel, size_t bytes) {
    if (bytes > 48 * 1024) {
        cudaCheck(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)bytes));
    }
}

template <int D>
static void flash_tc_forward_launch(bf16* out, float* lse, const bf16* qkv, int B, int T, int NH, cudaStream_t s) {
    size_t smem = TcFwd<D>::bytes;
    tc_smem_attr(flash_tc_forward_kernel<D>, smem);
    dim3 grid(NH * B, CEIL_DIV(T, 64)); // (b, h) fastest: all heads of the heaviest tile go first
    LAUNCH(flash_tc_forward_kernel<D>, grid, TC_WARPS * WARP, smem, s, out, lse, qkv, T, NH);
}

template <int D>
static void flash_tc_backward_launch(bf16* dqkv, const float* Dd, const bf16* dout, const bf16* qkv, const float* lse,
                                     int B, int T, int NH, cudaStream_t s) {
    tc_smem_attr(flash_tc_bwd_dkv_kernel<D>, TcBwd<D>::bytes_dkv);
    tc_smem_attr(flash_tc_bwd_dq_kernel<D>, TcBwd<D>::bytes_dq);
    dim3 grid(NH * B, CEIL_DIV(T, 64)); // (b, h) fastest: all heads of the heaviest tile go first
    LAUNCH(flash_tc_bwd_dkv_kernel<D>, grid, TC_WARPS * WARP, TcBwd<D>::bytes_dkv, s, dqkv, dout, qkv, lse, Dd, T, NH);
    LAUNCH(flash_tc_bwd_dq_kernel<D>, grid, TC_WARPS * WARP, TcBwd<D>::bytes_dq, s, dqkv, dout, qkv, lse, Dd, T, NH);
}

// f(std::integral_constant<int, hs>()): the kernels are templates on the head size
template <typename F>
static void tc_for_head_size(int hs, F f) {
    switch (hs) {
        case 16:
            f(std::integral_constant<int, 16>());
            break;
        case 32:
            f(std::integral_constant<int, 32>());
            break;
        case 64:
            f(std::integral_constant<int, 64>());
            break;
        case 128:
            f(std::integral_constant<int, 128>());
            break;
        case 160:
            f(std::integral_constant<int, 160>());
            break;
        default:
            die("tensor-core attention: head size %d not supported", hs);
    }
}

// out (B, T, Cl); lse (B, NH, T). hs must be flash_tc_supported.
static void attention_forward_tc(bf16* out, float* lse, const bf16* qkv, int B, int T, int NH, int hs, cudaStream_t s) {
    tc_for_head_size(hs, [&](auto d) { flash_tc_forward_launch<decltype(d)::value>(out, lse, qkv, B, T, NH, s); });
}

// dqkv (B, T, 3Cl) overwritten; Dd: (B, NH, T) fp32 scratch; out/lse from the forward
static void attention_backward_tc(bf16* dqkv, float* Dd, const bf16* dout, const bf16* out, const bf16* qkv,
                                  const float* lse, int B, int T, int NH, int hs, cudaStream_t s) {
    int rows = B * T * NH;
    LAUNCH(flash_bwd_dot_kernel, CEIL_DIV(rows, 8), 256, 0, s, Dd, dout, out, B, T, NH, hs);
    tc_for_head_size(
        hs, [&](auto d) { flash_tc_backward_launch<decltype(d)::value>(dqkv, Dd, dout, qkv, lse, B, T, NH, s); });
}

// one block on tensor cores, into fp32 accumulators (the arguments of attention.cuh's
// flash_ring_forward / flash_ring_backward; hs must be flash_tc_supported)
static void flash_tc_ring_forward(float* o_acc, float* lse_acc, int first, const bf16* qkv, const bf16* k,
                                  const bf16* v, AttnBlock a, int mask, int B, int hs, cudaStream_t s) {
    tc_for_head_size(hs, [&](auto d) {
        attn_for_mask(mask, [&](auto mk) {
            constexpr int D = decltype(d)::value;
            constexpr int MASK = decltype(mk)::value;
            tc_smem_attr(flash_tc_ring_forward_kernel<D, MASK>, TcFwd<D>::bytes);
            LAUNCH((flash_tc_ring_forward_kernel<D, MASK>), dim3(a.NH * B, CEIL_DIV(a.Tq, 64)), TC_WARPS * WARP,
                   TcFwd<D>::bytes, s, o_acc, lse_acc, first, qkv, k, v, a);
        });
    });
}

static void flash_tc_ring_backward(float* dq, float* dk, float* dv, int first_q, int first_kv, const bf16* dout,
                                   const bf16* qkv, const bf16* k, const bf16* v, const float* lse, const float* Dd,
                                   AttnBlock a, int mask, int B, int hs, cudaStream_t s) {
    tc_for_head_size(hs, [&](auto d) {
        attn_for_mask(mask, [&](auto mk) {
            constexpr int D = decltype(d)::value;
            constexpr int MASK = decltype(mk)::value;
            tc_smem_attr(flash_tc_ring_bwd_dkv_kernel<D, MASK>, TcBwd<D>::bytes_dkv);
            tc_smem_attr(flash_tc_ring_bwd_dq_kernel<D, MASK>, TcBwd<D>::bytes_dq);
            if (a.Tk > 0)
                LAUNCH((flash_tc_ring_bwd_dkv_kernel<D, MASK>), dim3(a.NH * B, CEIL_DIV(a.Tk, 64)), TC_WARPS * WARP,
                       TcBwd<D>::bytes_dkv, s, dk, dv, first_kv, dout, qkv, k, v, lse, Dd, a);
            LAUNCH((flash_tc_ring_bwd_dq_kernel<D, MASK>), dim3(a.NH * B, CEIL_DIV(a.Tq, 64)), TC_WARPS * WARP,
                   TcBwd<D>::bytes_dq, s, dq, first_q, dout, qkv, k, v, lse, Dd, a);
        });
    });
}

#endif // LLMC_ATTENTION_TC_CUH
