/*
 * attention_ring.cuh: the attention kernels of context parallelism (ring attention): one
 * block of query rows against one block of key/value rows at a time, partial results merged
 * exactly by the log-sum-exp (online softmax) into fp32 accumulators, and the backward's
 * gradients accumulated the same way. The block kernels are the flash kernels of
 * attention_tc.cuh (tensor cores: head sizes 16, 32, 64, 128, 160) and attention.cuh (CUDA
 * cores: any head size up to 256) with an AttnBlock (attention.cuh) saying where the rows are
 * and a mask mode: ATTN_CAUSAL (Tq == Tk, key j visible to query i iff j <= i inside the block)
 * or ATTN_FULL (every key; no causal bookkeeping, only the last tile checks the block's end).
 *
 * Layout (CP ranks): T is cut into 2 CP chunks of Tch = T / (2 CP) rows; rank r holds chunks
 * r and 2 CP - 1 - r as its local rows [0, Tch) and [Tch, Tl), Tl = 2 Tch, so every rank does
 * the same causal work. Its qkv is (B, Tl, 3Cl) bf16 as elsewhere. Ring step s brings the K/V
 * of rank j = (r - s) mod CP; attention_ring_block(r, j, Tch, ...) gives the block:
 *   j == r  CAUSAL, all Tl rows against all Tl keys (the local row order is causal);
 *   j <  r  FULL, all Tl rows against keys [0, Tch) of block j (its first chunk precedes both
 *           of ours; its second follows both);
 *   j >  r  FULL, rows [Tch, Tl) against all Tl keys of block j (only our second chunk
 *           follows block j's chunks).
 * K/V on the wire: (B, Tl, 2Cl) bf16, K at column 0 and V at Cl (attention_ring_pack_kv
 * copies it out of qkv): a third less traffic than sending qkv. The own block is read from
 * qkv in place (k = qkv + Cl, v = qkv + 2Cl, kv_ld = 3Cl); a received one as k = kv,
 * v = kv + Cl, kv_ld = 2Cl. dK and dV travel as fp32 (B, Tl, Cl) each (allocate them as one
 * (2, B, Tl, Cl) buffer and the pair is one message): block j's start at rank j (first_kv at
 * step 0), go round with its K/V gathering every rank's terms in ring order, and one more
 * hop after the last step brings them home (the test accumulates them in that order).
 *
 * API (all on stream s, no atomics, a fixed order: deterministic; tc: tensor-core kernels,
 * hs must be flash_tc_supported; else the CUDA-core ones):
 *   attention_ring_block(r, j, Tch, NH, kv_ld, &mask)       the block of ring step r <- j
 *   attention_ring_pack_kv(kv, qkv, B, Tl, Cl, s)           K|V of qkv into kv (B, Tl, 2Cl)
 *   attention_ring_forward(o_acc, lse_acc, first, qkv, k, v, blk, mask, B, hs, tc, s)
 *       o_acc (B, Tl, Cl), lse_acc (B, NH, Tl) fp32, rows [q0, q0 + Tq) merged with the
 *       block; first: overwritten (the first block). A row that sees no key of the block
 *       leaves them unchanged; lse_acc = -inf with o_acc = 0 is an empty accumulator.
 *   attention_ring_forward_finish(out, o_acc, B, Tl, Cl, s) out (B, Tl, Cl) bf16 = o_acc, rounded once
 *   attention_ring_dot(Dd, dout, out, B, Tl, NH, hs, s)     D = rowsum(dO * O) (B, NH, Tl) for
 *       the backward (attention.cuh's flash_bwd_dot_kernel)
 *   attention_ring_backward(dq, dk, dv, first_q, first_kv, dout, qkv, k, v, lse, Dd, blk,
 *       mask, B, hs, tc, s)   lse: the final lse_acc; dq (B, Tl, Cl) rows [q0, q0 + Tq) and
 *       dk, dv (B, Tka, Cl) rows [k0, k0 + Tk) fp32: += this block's gradients (first_q,
 *       first_kv: overwritten), P = exp(S - lse) recomputed as attention.cuh's backward does.
 *   attention_ring_backward_finish(dqkv, dq, dk, dv, B, Tl, Cl, s)   dqkv (B, Tl, 3Cl) bf16
 * One CAUSAL block over a whole sequence (CP = 1, q0 = k0 = 0, first) gives the bits of
 * attention_forward_tc / attention_backward_tc (attention_forward_flash / _backward_flash
 * for tc = 0): the same kernel bodies, the fp32 result rounded to bf16 once
 * (tests/cuda/test_attention.cu checks it).
 */
#ifndef LLMC_ATTENTION_RING_CUH
#define LLMC_ATTENTION_RING_CUH

#include "attention.cuh"
#include "attention_tc.cuh"

// The block of ring step "rank r attends the K/V of rank j" (layout above); kv_ld: the row
// stride of that K/V (3Cl for the own qkv, 2Cl for a packed K|V block). *mask is set.
static AttnBlock attention_ring_block(int r, int j, int Tch, int NH, int kv_ld, int* mask) {
    int Tl = 2 * Tch;
    AttnBlock a = {NH, Tl, 0, Tl, Tl, 0, Tl, kv_ld};
    *mask = r == j ? ATTN_CAUSAL : ATTN_FULL;
    if (j < r) a.Tk = Tch; // their first chunk only
    if (j > r) {           // our second chunk only
        a.q0 = Tch;
        a.Tq = Tch;
    }
    return a;
}

// dies unless the block fits its buffers and the mask (bad input must not reach a kernel)
static void attention_ring_check(AttnBlock a, int mask, int hs, int tc) {
    int ok = a.NH > 0 && a.Tq > 0 && a.Tk >= 0 && a.q0 >= 0 && a.k0 >= 0 && a.q0 + a.Tq <= a.Tqa &&
             a.k0 + a.Tk <= a.Tka && a.kv_ld >= a.NH * hs && (mask == ATTN_FULL || mask == ATTN_CAUSAL);
    if (!ok)
        die("ring attention: bad block (NH %d, query rows [%d, %d) of %d, key rows [%d, %d) of %d, kv_ld %d, mask "
            "%d): build it with attention_ring_block",
            a.NH, a.q0, a.q0 + a.Tq, a.Tqa, a.k0, a.k0 + a.Tk, a.Tka, a.kv_ld, mask);
    if (mask == ATTN_CAUSAL && a.Tq != a.Tk)
        die("ring attention: a CAUSAL block needs as many query as key rows (%d, %d): use ATTN_FULL", a.Tq, a.Tk);
    if (tc && !flash_tc_supported(hs))
        die("ring attention: no tensor-core kernel for head size %d: pass tc = 0 (CUDA-core flash kernels)", hs);
    if (!tc) flash_maxd(hs); // dies above FLASH_MAX_HS
}

// kv[b, t] = (K, V) of qkv[b, t]: (B, T, 2Cl) from (B, T, 3Cl), 4 bf16 (8 bytes) a step when
// Cl % 4 == 0, else one
template <bool VEC>
__global__ void attn_ring_pack_kv_kernel(bf16* kv, const bf16* qkv, size_t rows, int Cl) {
    int step = VEC ? 4 : 1;
    size_t n = rows * 2 * Cl / step;
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) {
        size_t e = i * step;
        size_t r = e / (2 * Cl);
        size_t c = e % (2 * Cl);
        const bf16* src = qkv + r * 3 * Cl + Cl + c;
        if constexpr (VEC)
            *reinterpret_cast<uint2*>(kv + e) = *reinterpret_cast<const uint2*>(src);
        else
            kv[e] = *src;
    }
}

static void attention_ring_pack_kv(bf16* kv, const bf16* qkv, int B, int T, int Cl, cudaStream_t s) {
    size_t rows = (size_t)B * T;
    bool vec = Cl % 4 == 0 && ((uintptr_t)kv & 7u) == 0 && ((uintptr_t)qkv & 7u) == 0;
    int g = grid_for(rows * 2 * Cl / (vec ? 4 : 1), 256);
    LAUNCH_VEC(attn_ring_pack_kv_kernel, vec, g, 256, 0, s, kv, qkv, rows, Cl);
}

// o_acc, lse_acc: see the opening comment. k, v: K and V of the key-side buffer (row 0, head 0)
static void attention_ring_forward(float* o_acc, float* lse_acc, int first, const bf16* qkv, const bf16* k,
                                   const bf16* v, AttnBlock a, int mask, int B, int hs, int tc, cudaStream_t s) {
    attention_ring_check(a, mask, hs, tc);
    if (tc)
        flash_tc_ring_forward(o_acc, lse_acc, first, qkv, k, v, a, mask, B, hs, s);
    else
        flash_ring_forward(o_acc, lse_acc, first, qkv, k, v, a, mask, B, hs, s);
}

// out (B, T, Cl) bf16 from the merged o_acc (B, T, Cl) fp32
static void attention_ring_forward_finish(bf16* out, const float* o_acc, int B, int T, int Cl, cudaStream_t s) {
    cast_f32_to_bf16(out, o_acc, (size_t)B * T * Cl, s);
}

// Dd (B, NH, T) = rowsum(dout * out) per head, out the bf16 output of the forward
static void attention_ring_dot(float* Dd, const bf16* dout, const bf16* out, int B, int T, int NH, int hs,
                               cudaStream_t s) {
    int rows = B * T * NH;
    LAUNCH(flash_bwd_dot_kernel, CEIL_DIV(rows, 8), 256, 0, s, Dd, dout, out, B, T, NH, hs);
}

static void attention_ring_backward(float* dq, float* dk, float* dv, int first_q, int first_kv, const bf16* dout,
                                    const bf16* qkv, const bf16* k, const bf16* v, const float* lse, const float* Dd,
                                    AttnBlock a, int mask, int B, int hs, int tc, cudaStream_t s) {
    attention_ring_check(a, mask, hs, tc);
    if (tc)
        flash_tc_ring_backward(dq, dk, dv, first_q, first_kv, dout, qkv, k, v, lse, Dd, a, mask, B, hs, s);
    else
        flash_ring_backward(dq, dk, dv, first_q, first_kv, dout, qkv, k, v, lse, Dd, a, mask, B, hs, s);
}

// dqkv[b, t] = bf16(dq, dk, dv)[b, t]: (B, T, 3Cl) from three (B, T, Cl) fp32
__global__ void attn_ring_dqkv_kernel(bf16* dqkv, const float* dq, const float* dk, const float* dv, size_t rows,
                                      int Cl) {
    size_t n = rows * Cl;
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) {
        size_t r = i / Cl;
        size_t c = i % Cl;
        bf16* d = dqkv + r * 3 * Cl + c;
        d[0] = to_bf(dq[i]);
        d[Cl] = to_bf(dk[i]);
        d[2 * Cl] = to_bf(dv[i]);
    }
}

static void attention_ring_backward_finish(bf16* dqkv, const float* dq, const float* dk, const float* dv, int B, int T,
                                           int Cl, cudaStream_t s) {
    size_t rows = (size_t)B * T;
    LAUNCH(attn_ring_dqkv_kernel, grid_for(rows * Cl, 256), 256, 0, s, dqkv, dq, dk, dv, rows, Cl);
}

#endif // LLMC_ATTENTION_RING_CUH
