/*
 * encoder.cuh: the input embedding, vocab-parallel (doc/spec.md section 3): token embedding rows
 * [v0, v0 + Vl) live on TP rank tp; position embedding replicated.
 *
 *   encoder_forward   x (B, T, C) = (token owned ? wte[tok - v0] : 0) + (add_pos ? wpe[tpos[t]] : 0)
 *                     in fp32, rounded once. With TP > 1 only TP rank 0 adds wpe and the
 *                     caller all-reduces: exactly one rank holds wte[tok] and the sum of
 *                     {rn(wte+wpe), 0} or {wte, wpe} rounds to rn(wte + wpe) in any order,
 *                     so every TP layout embeds bit-identically.
 *   encoder_backward  dwte (Vl, C) fp32 += dx rows of each owned token, dwpe row tpos[t] += sum
 *                     over the batch of row t. Tokens repeat, so the host buckets the micro-batch's
 *                     positions by token (EmbedBuckets, built when the batch is loaded) and
 *                     one block sums one token's rows in position order: deterministic,
 *                     no atomics.
 * tpos (T) on the device: the position (the row of wpe) of each of the T rows; t itself,
 * except under context parallelism, where a rank holds two chunks of the sequence (doc/cp.md).
 */
#ifndef LLMC_ENCODER_CUH
#define LLMC_ENCODER_CUH

#include "cuda_utils.cuh"

// Host-built buckets of one micro-batch: the owned tokens that occur (uniq, local row ids),
// and for bucket u the positions pos[off[u] .. off[u+1]) in increasing order.
typedef struct {
    int nu;    // owned distinct tokens
    int* uniq; // (nu) local row (tok - v0)
    int* off;  // (nu + 1)
    int* pos;  // (off[nu]) positions n in [0, B*T)
} EmbedBuckets;

static int embed_cmp_int(const void* a, const void* b) {
    int x = *(const int*)a, y = *(const int*)b;
    return (x > y) - (x < y);
}

// Fills host buckets for tokens (BT) and the vocabulary slice [v0, v0 + Vl).
// work: (Vl + 1) ints of scratch. Counting sort: O(BT + distinct).
static void embed_buckets_build(EmbedBuckets* e, const int* tokens, int BT, int v0, int Vl, int* work) {
    // work[r] = count of local row r; only rows that occur are touched twice
    e->nu = 0;
    for (int n = 0; n < BT; n++) {
        int r = tokens[n] - v0;
        if (r < 0 || r >= Vl) continue;
        if (work[r]++ == 0) e->uniq[e->nu++] = r;
    }
    // order buckets by row id (deterministic, independent of first occurrence)
    qsort(e->uniq, (size_t)e->nu, sizeof(int), embed_cmp_int);
    int acc = 0;
    for (int u = 0; u < e->nu; u++) {
        int r = e->uniq[u];
        e->off[u] = acc;
        acc += work[r];
        work[r] = e->off[u];
    }
    e->off[e->nu] = acc;
    for (int n = 0; n < BT; n++) {
        int r = tokens[n] - v0;
        if (r < 0 || r >= Vl) continue;
        e->pos[work[r]++] = n;
    }
    for (int u = 0; u < e->nu; u++) work[e->uniq[u]] = 0; // leave the scratch zeroed
}

// x (BT, C); tokens (BT); wte (Vl, C); wpe (seq, C); tpos (T). Each thread takes 8 consecutive columns
// of one row per step (CP = ceil(C / 8) packs per row; VEC: 16-byte loads and stores, the
// scalar instantiation for misaligned pointers or C % 8 != 0, same arithmetic).
template <bool VEC>
__global__ void encoder_forward_kernel(bf16* x, const int* tokens, const bf16* wte, const bf16* wpe, const int* tpos,
                                       int BT, int T, int C, int v0, int Vl, int add_pos) {
    int CP = (C + 7) / 8;
    size_t total = (size_t)BT * CP;
    for (size_t p = (size_t)blockIdx.x * blockDim.x + threadIdx.x; p < total; p += (size_t)gridDim.x * blockDim.x) {
        int n = (int)(p / CP), c = (int)(p % CP) * 8;
        int r = tokens[n] - v0;
        float v[8], q[8];
        if (r >= 0 && r < Vl)
            load_bf16x8<VEC>(v, wte + (size_t)r * C, c, C);
        else
            for (int j = 0; j < 8; j++) v[j] = 0.0f;
        if (add_pos) {
            load_bf16x8<VEC>(q, wpe + (size_t)tpos[n % T] * C, c, C);
            for (int j = 0; j < 8; j++) v[j] += q[j];
        }
        store_bf16x8<VEC>(x + (size_t)n * C, c, C, v);
    }
}

// one block per bucket (grid-stride), threads over channels
__global__ void encoder_backward_wte_kernel(float* dwte, const bf16* dx, const int* uniq, const int* off,
                                            const int* pos, int nu, int C) {
    for (int u = blockIdx.x; u < nu; u += gridDim.x) {
        int r = uniq[u], a = off[u], b = off[u + 1];
        for (int c = threadIdx.x; c < C; c += blockDim.x) {
            float s = 0.0f;
            for (int j = a; j < b; j++) s += bf(dx[(size_t)pos[j] * C + c]);
            dwte[(size_t)r * C + c] += s;
        }
    }
}

// dwpe[tpos[t]][c] += sum over b of dx[b][t][c] (the T positions are distinct: no race)
__global__ void encoder_backward_wpe_kernel(float* dwpe, const bf16* dx, const int* tpos, int B, int T, int C) {
    size_t total = (size_t)T * C;
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < total; i += (size_t)gridDim.x * blockDim.x) {
        float s = 0.0f;
        for (int b = 0; b < B; b++) s += bf(dx[(size_t)b * total + i]);
        dwpe[(size_t)tpos[i / C] * C + i % C] += s;
    }
}

static void encoder_forward(bf16* x, const int* tokens, const bf16* wte, const bf16* wpe, const int* tpos, int B, int T,
                            int C, int v0, int Vl, int add_pos, cudaStream_t s) {
    int g = grid_for((size_t)B * T * CEIL_DIV(C, 8), 256);
    LAUNCH_VEC(encoder_forward_kernel, vec16_ok(C, 8, x, wte, wpe), g, 256, 0, s, x, tokens, wte, wpe, tpos, B * T, T,
               C, v0, Vl, add_pos);
}

// d_uniq/d_off/d_pos: the device copies of a host EmbedBuckets with nu buckets; tpos: as forward.
// dwte may be NULL (a rank without the token embedding); dwpe likewise.
static void encoder_backward(float* dwte, float* dwpe, const bf16* dx, const int* d_uniq, const int* d_off,
                             const int* d_pos, int nu, const int* tpos, int B, int T, int C, cudaStream_t s) {
    if (dwte != NULL && nu > 0) {
        int grid = GRID_STRIDE_CAP(nu < 65535 ? nu : 65535);
        int block = C >= 256 ? 256 : ((C + 31) / 32) * 32;
        LAUNCH(encoder_backward_wte_kernel, grid, block, 0, s, dwte, dx, d_uniq, d_off, d_pos, nu, C);
    }
    if (dwpe != NULL)
        LAUNCH(encoder_backward_wpe_kernel, grid_for((size_t)T * C, 256), 256, 0, s, dwpe, dx, tpos, B, T, C);
}

#endif // LLMC_ENCODER_CUH
