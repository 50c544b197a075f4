/*
 * attention_tc.cuh: causal flash attention on tensor cores (bf16 16x16x16 MMA with fp32
 * accumulation, llmc/cuda/mma.cuh), the fast path of attention.cuh's interface: same qkv
 * (B, T, 3Cl) input, out (B, T, Cl), lse (B, NH, T), dqkv; never stores T x T.
 *
 * Forward: one block of 4 warps per (b, h, 64-query tile); each warp owns 16 query rows,
 *   keeps Q in fragments and O in fp32 accumulators; K/V tiles of 64 keys go through
 *   shared memory; S = Q K^T on tensor cores, online softmax in fp32 (two lanes per row),
 *   P rounded to bf16 for O += P V (as FlashAttention does); O is rescaled by
 *   exp(m_old - m_new) through shared memory (fragment layouts are opaque).
 * Backward (FlashAttention-2 style, recomputing P from lse), two kernels, no atomics:
 *   dK/dV: one block per 64-key tile, each warp 16 keys, over 32-query tiles:
 *     S^T = K Q^T, dP^T = V dO^T, P^T = exp(S^T - lse), dS^T = P^T (dP^T - D),
 *     dV += P^T dO, dK += dS^T Q (accumulated in fragments);
 *   dQ: one block per 64-query tile, each warp 16 queries, over 32-key tiles:
 *     S, dP as above, dQ += dS K.
 *   P and dS are rounded to bf16 as tensor-core operands; D = rowsum(dO * O) comes from
 *   attention.cuh's flash_bwd_dot_kernel.
 * Head sizes: 16, 32, 64, 128, 160 (a multiple of 16 whose fragments fit in registers);
 * other sizes use attention.cuh's CUDA-core flash kernels.
 */
#ifndef LLMC_ATTENTION_TC_CUH
#define LLMC_ATTENTION_TC_CUH

#include "cuda_utils.cuh"
#include "mma.cuh"
#include "attention.cuh"

#define TC_WARPS 4

// rows [r0, r0 + R) of one head (D columns at src, row stride `stride` elements) into dst
// (R x ld bf16), 16 bytes at a time; rows >= T are zero
template <int D>
__device__ __forceinline__ void tc_load_rows(bf16* dst, int ld, const bf16* src, size_t stride, int r0, int R, int T) {
    constexpr int V8 = D / 8;
    for (int idx = threadIdx.x; idx < R * V8; idx += blockDim.x) {
        int r = idx / V8, c = (idx % V8) * 8, t = r0 + r;
        uint4 v = make_uint4(0u, 0u, 0u, 0u);
        if (t < T) v = *reinterpret_cast<const uint4*>(src + (size_t)t * stride + c);
        *reinterpret_cast<uint4*>(dst + r * ld + c) = v;
    }
}

// The dynamic shared array rounded up to 128 bytes. Align by adding an offset to the array's
// own pointer: rounding the pointer itself through uintptr_t made nvcc lose the shared address
// space (generic LD/ST instead of LDS/STS/LDSM in SASS). LLMC_TC_SMEM_BASE_OLD brings back the
// old rounding, only so that the SASS check (dev/cuda/resources.py sass) can show it catches it.
__device__ __forceinline__ char* tc_smem_base(void* raw) {
#ifdef LLMC_TC_SMEM_BASE_OLD
    return (char*)(((uintptr_t)raw + 127) & ~(uintptr_t)127);
#else
    char* p = (char*)raw;
    return p + ((128u - (unsigned)((uintptr_t)p & 127u)) & 127u);
#endif
}

template <int D>
struct TcFwd {
    static constexpr int LDB = D + 8, LDP = 72, LDS = (D > 64 ? D : 64) + 4;
    static constexpr size_t bytes = 128 + 3 * 64 * LDB * 2 + TC_WARPS * 16 * LDP * 2 + TC_WARPS * 16 * LDS * 4;
};

template <int D>
__global__ void __launch_bounds__(TC_WARPS* WARP)
    flash_tc_forward_kernel(bf16* out, float* lse, const bf16* qkv, int T, int NH) {
    constexpr int LDB = TcFwd<D>::LDB, LDP = TcFwd<D>::LDP, LDS = TcFwd<D>::LDS;
    DYNAMIC_SMEM(float, smem_raw);
    char* base = tc_smem_base(smem_raw);
    bf16* sQ = (bf16*)base;                         // (64, LDB)
    bf16* sK = sQ + 64 * LDB;                       // (64, LDB)
    bf16* sV = sK + 64 * LDB;                       // (64, LDB)
    bf16* sP = sV + 64 * LDB;                       // (warps, 16, LDP) probabilities, bf16
    float* sW = (float*)(sP + TC_WARPS * 16 * LDP); // (warps, 16, LDS) scores, then O
    int qt = blockIdx.x, h = blockIdx.y, b = blockIdx.z;
    int lane = threadIdx.x % WARP, w = threadIdx.x / WARP;
    int Cl = NH * D, C3 = 3 * Cl, q0 = qt * 64;
    float scale = 1.0f / sqrtf((float)D);
    const bf16* hq = qkv + (size_t)b * T * C3 + h * D;
    tc_load_rows<D>(sQ, LDB, hq, C3, q0, 64, T);
    __syncthreads();
    FragA qf[D / 16];
    for (int kk = 0; kk < D / 16; kk++) frag_load(qf[kk], sQ + w * 16 * LDB + kk * 16, LDB);
    FragC of[D / 16];
    for (int j = 0; j < D / 16; j++) frag_zero(of[j]);
    bf16* sPw = sP + w * 16 * LDP;
    float* sWw = sW + w * 16 * LDS;
    int r = lane / 2, half = lane % 2, t = q0 + w * 16 + r; // lanes 2r, 2r+1 own row r
    float m = -INFINITY, l = 0.0f;
    for (int kt = 0; kt <= qt; kt++) {
        int k0 = kt * 64;
        __syncthreads(); // every warp is done with the previous K/V tile
        tc_load_rows<D>(sK, LDB, hq + Cl, C3, k0, 64, T);
        tc_load_rows<D>(sV, LDB, hq + 2 * Cl, C3, k0, 64, T);
        __syncthreads();
        for (int j = 0; j < 4; j++) { // S (16 x 64) = Q_w K^T
            FragC s;
            frag_zero(s);
            for (int kk = 0; kk < D / 16; kk++) {
                FragBT kb;
                frag_load(kb, sK + j * 16 * LDB + kk * 16, LDB);
                mma(s, qf[kk], kb);
            }
            frag_store(sWw + j * 16, s, LDS);
        }
        __syncwarp();
        float p[32], mx = -INFINITY;
#pragma unroll
        for (int c = 0; c < 32; c++) {
            int col = half * 32 + c;
            float s = (t < T && k0 + col <= t) ? sWw[r * LDS + col] * scale : -INFINITY;
            p[c] = s;
            mx = fmaxf(mx, s);
        }
        mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 1));
        float mn = fmaxf(m, mx);
        float alpha = mn == -INFINITY ? 1.0f : expf(m - mn);
        float sum = 0.0f;
#pragma unroll
        for (int c = 0; c < 32; c++) {
            float e = p[c] == -INFINITY ? 0.0f : expf(p[c] - mn);
            sum += e;
            sPw[r * LDP + half * 32 + c] = to_bf(e);
        }
        sum += __shfl_xor_sync(0xffffffffu, sum, 1);
        l = l * alpha + sum;
        m = mn;
        __syncwarp(); // the scores are read: the scratch can take O
        if (kt > 0) { // O *= alpha, row by row
            for (int j = 0; j < D / 16; j++) frag_store(sWw + j * 16, of[j], LDS);
            __syncwarp();
            for (int c = half * (D / 2); c < (half + 1) * (D / 2); c++) sWw[r * LDS + c] *= alpha;
            __syncwarp();
            for (int j = 0; j < D / 16; j++) frag_load_c(of[j], sWw + j * 16, LDS);
        }
        for (int j = 0; j < D / 16; j++) { // O += P V
            for (int kk = 0; kk < 4; kk++) {
                FragA pa;
                FragB vb;
                frag_load(pa, sPw + kk * 16, LDP);
                frag_load(vb, sV + kk * 16 * LDB + j * 16, LDB);
                mma(of[j], pa, vb);
            }
        }
        __syncwarp();
    }
    for (int j = 0; j < D / 16; j++) frag_store(sWw + j * 16, of[j], LDS);
    __syncwarp();
    if (t < T) {
        float inv = 1.0f / l;
        bf16* o = out + ((size_t)b * T + t) * Cl + h * D;
        for (int c = half * (D / 2); c < (half + 1) * (D / 2); c++) o[c] = to_bf(sWw[r * LDS + c] * inv);
        if (half == 0) lse[((size_t)b * NH + h) * T + t] = m + logf(l);
    }
}

template <int D>
struct TcBwd {
    static constexpr int LDB = D + 8, LDF = 36, LDH = 40;
    // dK/dV kernel: K, V (64 rows), Q, dO (32 rows), lse, D (32), per-warp S, dP (fp32), P, dS (bf16)
    static constexpr size_t bytes_dkv =
        128 + (2 * 64 + 2 * 32) * LDB * 2 + 2 * 32 * 4 + TC_WARPS * 16 * (2 * LDF * 4 + 2 * LDH * 2);
    // dQ kernel: Q, dO (64 rows), K, V (32 rows), lse, D (64), per-warp S, dP (fp32), dS (bf16)
    static constexpr size_t bytes_dq =
        128 + (2 * 64 + 2 * 32) * LDB * 2 + 2 * 64 * 4 + TC_WARPS * 16 * (2 * LDF * 4 + LDH * 2);
};

// writes a warp's 16 x D fp32 accumulators (times mul) as bf16 rows row0.. of a (B, T, stride) tensor
template <int D>
__device__ __forceinline__ void tc_write_rows(bf16* dst, size_t stride, int row0, int T, FragC* acc, float* scratch,
                                              float mul) {
    constexpr int LDO = D + 4;
    int lane = threadIdx.x % WARP;
    for (int j = 0; j < D / 16; j++) frag_store(scratch + j * 16, acc[j], LDO);
    __syncwarp();
    for (int idx = lane; idx < 16 * D; idx += WARP) {
        int rr = idx / D, c = idx % D;
        if (row0 + rr < T) dst[(size_t)(row0 + rr) * stride + c] = to_bf(scratch[rr * LDO + c] * mul);
    }
    __syncwarp();
}

template <int D>
__global__ void __launch_bounds__(TC_WARPS* WARP)
    flash_tc_bwd_dkv_kernel(bf16* dqkv, const bf16* dout, const bf16* qkv, const float* lse, const float* Dd, int T,
                            int NH) {
    constexpr int LDB = TcBwd<D>::LDB, LDF = TcBwd<D>::LDF, LDH = TcBwd<D>::LDH;
    DYNAMIC_SMEM(float, smem_raw);
    char* base = tc_smem_base(smem_raw);
    bf16* sK = (bf16*)base;                         // (64, LDB)
    bf16* sV = sK + 64 * LDB;                       // (64, LDB)
    bf16* sQ = sV + 64 * LDB;                       // (32, LDB)
    bf16* sG = sQ + 32 * LDB;                       // (32, LDB) dO
    float* sL = (float*)(sG + 32 * LDB);            // (32)
    float* sD = sL + 32;                            // (32)
    float* sS = sD + 32;                            // (warps, 16, LDF) S^T, fp32
    float* sDP = sS + TC_WARPS * 16 * LDF;          // (warps, 16, LDF) dP^T
    bf16* sPb = (bf16*)(sDP + TC_WARPS * 16 * LDF); // (warps, 16, LDH) P^T
    bf16* sDSb = sPb + TC_WARPS * 16 * LDH;         // (warps, 16, LDH) dS^T
    int kt = blockIdx.x, h = blockIdx.y, b = blockIdx.z;
    int lane = threadIdx.x % WARP, w = threadIdx.x / WARP;
    int Cl = NH * D, C3 = 3 * Cl, k0 = kt * 64, nq = (T + 31) / 32;
    float scale = 1.0f / sqrtf((float)D);
    const bf16* hq = qkv + (size_t)b * T * C3 + h * D;
    const bf16* hg = dout + (size_t)b * T * Cl + h * D;
    const float* hl = lse + ((size_t)b * NH + h) * T;
    const float* hd = Dd + ((size_t)b * NH + h) * T;
    tc_load_rows<D>(sK, LDB, hq + Cl, C3, k0, 64, T);
    tc_load_rows<D>(sV, LDB, hq + 2 * Cl, C3, k0, 64, T);
    float* sSw = sS + w * 16 * LDF;
    float* sDPw = sDP + w * 16 * LDF;
    bf16* sPbw = sPb + w * 16 * LDH;
    bf16* sDSbw = sDSb + w * 16 * LDH;
    FragC dk[D / 16], dv[D / 16];
    for (int j = 0; j < D / 16; j++) {
        frag_zero(dk[j]);
        frag_zero(dv[j]);
    }
    int r = lane / 2, half = lane % 2, key = k0 + w * 16 + r; // lanes 2r, 2r+1 own key row r
    for (int qt = k0 / 32; qt < nq; qt++) {
        int q0 = qt * 32;
        __syncthreads();
        tc_load_rows<D>(sQ, LDB, hq, C3, q0, 32, T);
        tc_load_rows<D>(sG, LDB, hg, Cl, q0, 32, T);
        if (threadIdx.x < 32) {
            int q = q0 + threadIdx.x;
            sL[threadIdx.x] = q < T ? hl[q] : 0.0f;
            sD[threadIdx.x] = q < T ? hd[q] : 0.0f;
        }
        __syncthreads();
        if (q0 + 31 < k0 + w * 16) continue; // warp-uniform: every query precedes this warp's keys
        for (int j = 0; j < 2; j++) {        // S^T = K_w Q^T, dP^T = V_w dO^T (16 keys x 32 queries)
            FragC s, dp;
            frag_zero(s);
            frag_zero(dp);
            for (int kk = 0; kk < D / 16; kk++) {
                FragA ka, va;
                FragBT qb, gb;
                frag_load(ka, sK + w * 16 * LDB + kk * 16, LDB);
                frag_load(qb, sQ + j * 16 * LDB + kk * 16, LDB);
                mma(s, ka, qb);
                frag_load(va, sV + w * 16 * LDB + kk * 16, LDB);
                frag_load(gb, sG + j * 16 * LDB + kk * 16, LDB);
                mma(dp, va, gb);
            }
            frag_store(sSw + j * 16, s, LDF);
            frag_store(sDPw + j * 16, dp, LDF);
        }
        __syncwarp();
        for (int c = 0; c < 16; c++) {
            int col = half * 16 + c, q = q0 + col;
            int vis = key < T && q < T && q >= key;
            float p = vis ? expf(sSw[r * LDF + col] * scale - sL[col]) : 0.0f;
            float ds = vis ? p * (sDPw[r * LDF + col] - sD[col]) : 0.0f;
            sPbw[r * LDH + col] = to_bf(p);
            sDSbw[r * LDH + col] = to_bf(ds);
        }
        __syncwarp();
        for (int j = 0; j < D / 16; j++) { // dV_w += P^T dO, dK_w += dS^T Q
            for (int kk = 0; kk < 2; kk++) {
                FragA pa, sa;
                FragB gb, qb;
                frag_load(pa, sPbw + kk * 16, LDH);
                frag_load(gb, sG + kk * 16 * LDB + j * 16, LDB);
                mma(dv[j], pa, gb);
                frag_load(sa, sDSbw + kk * 16, LDH);
                frag_load(qb, sQ + kk * 16 * LDB + j * 16, LDB);
                mma(dk[j], sa, qb);
            }
        }
    }
    __syncthreads(); // K, V no longer read: their space takes the fp32 results
    float* sOw = (float*)base + w * 16 * (D + 4);
    tc_write_rows<D>(dqkv + (size_t)b * T * C3 + Cl + h * D, C3, k0 + w * 16, T, dk, sOw, scale);
    tc_write_rows<D>(dqkv + (size_t)b * T * C3 + 2 * Cl + h * D, C3, k0 + w * 16, T, dv, sOw, 1.0f);
}

template <int D>
__global__ void __launch_bounds__(TC_WARPS* WARP)
    flash_tc_bwd_dq_kernel(bf16* dqkv, const bf16* dout, const bf16* qkv, const float* lse, const float* Dd, int T,
                           int NH) {
    constexpr int LDB = TcBwd<D>::LDB, LDF = TcBwd<D>::LDF, LDH = TcBwd<D>::LDH;
    DYNAMIC_SMEM(float, smem_raw);
    char* base = tc_smem_base(smem_raw);
    bf16* sQ = (bf16*)base;                          // (64, LDB)
    bf16* sG = sQ + 64 * LDB;                        // (64, LDB) dO
    bf16* sK = sG + 64 * LDB;                        // (32, LDB)
    bf16* sV = sK + 32 * LDB;                        // (32, LDB)
    float* sL = (float*)(sV + 32 * LDB);             // (64)
    float* sD = sL + 64;                             // (64)
    float* sS = sD + 64;                             // (warps, 16, LDF)
    float* sDP = sS + TC_WARPS * 16 * LDF;           // (warps, 16, LDF)
    bf16* sDSb = (bf16*)(sDP + TC_WARPS * 16 * LDF); // (warps, 16, LDH)
    int qt = blockIdx.x, h = blockIdx.y, b = blockIdx.z;
    int lane = threadIdx.x % WARP, w = threadIdx.x / WARP;
    int Cl = NH * D, C3 = 3 * Cl, q0 = qt * 64;
    float scale = 1.0f / sqrtf((float)D);
    const bf16* hq = qkv + (size_t)b * T * C3 + h * D;
    const float* hl = lse + ((size_t)b * NH + h) * T;
    const float* hd = Dd + ((size_t)b * NH + h) * T;
    tc_load_rows<D>(sQ, LDB, hq, C3, q0, 64, T);
    tc_load_rows<D>(sG, LDB, dout + (size_t)b * T * Cl + h * D, Cl, q0, 64, T);
    if (threadIdx.x < 64) {
        int q = q0 + threadIdx.x;
        sL[threadIdx.x] = q < T ? hl[q] : 0.0f;
        sD[threadIdx.x] = q < T ? hd[q] : 0.0f;
    }
    float* sSw = sS + w * 16 * LDF;
    float* sDPw = sDP + w * 16 * LDF;
    bf16* sDSbw = sDSb + w * 16 * LDH;
    FragC dq[D / 16];
    for (int j = 0; j < D / 16; j++) frag_zero(dq[j]);
    int r = lane / 2, half = lane % 2, t = q0 + w * 16 + r; // lanes 2r, 2r+1 own query row r
    int last = q0 + 63 < T - 1 ? q0 + 63 : T - 1;
    int nkt = last / 32 + 1;
    for (int kt = 0; kt < nkt; kt++) {
        int k0 = kt * 32;
        __syncthreads();
        tc_load_rows<D>(sK, LDB, hq + Cl, C3, k0, 32, T);
        tc_load_rows<D>(sV, LDB, hq + 2 * Cl, C3, k0, 32, T);
        __syncthreads();
        if (k0 > q0 + w * 16 + 15) continue; // warp-uniform: every key follows this warp's queries
        for (int j = 0; j < 2; j++) {        // S = Q_w K^T, dP = dO_w V^T (16 queries x 32 keys)
            FragC s, dp;
            frag_zero(s);
            frag_zero(dp);
            for (int kk = 0; kk < D / 16; kk++) {
                FragA qa, ga;
                FragBT kb, vb;
                frag_load(qa, sQ + w * 16 * LDB + kk * 16, LDB);
                frag_load(kb, sK + j * 16 * LDB + kk * 16, LDB);
                mma(s, qa, kb);
                frag_load(ga, sG + w * 16 * LDB + kk * 16, LDB);
                frag_load(vb, sV + j * 16 * LDB + kk * 16, LDB);
                mma(dp, ga, vb);
            }
            frag_store(sSw + j * 16, s, LDF);
            frag_store(sDPw + j * 16, dp, LDF);
        }
        __syncwarp();
        float lr = sL[w * 16 + r], dr = sD[w * 16 + r];
        for (int c = 0; c < 16; c++) {
            int col = half * 16 + c, key = k0 + col;
            int vis = t < T && key <= t;
            float p = vis ? expf(sSw[r * LDF + col] * scale - lr) : 0.0f;
            float ds = vis ? p * (sDPw[r * LDF + col] - dr) : 0.0f;
            sDSbw[r * LDH + col] = to_bf(ds);
        }
        __syncwarp();
        for (int j = 0; j < D / 16; j++) { // dQ_w += dS K
            for (int kk = 0; kk < 2; kk++) {
                FragA sa;
                FragB kb;
                frag_load(sa, sDSbw + kk * 16, LDH);
                frag_load(kb, sK + kk * 16 * LDB + j * 16, LDB);
                mma(dq[j], sa, kb);
            }
        }
    }
    __syncthreads(); // Q, dO no longer read: their space takes the fp32 results
    float* sOw = (float*)base + w * 16 * (D + 4);
    tc_write_rows<D>(dqkv + (size_t)b * T * C3 + h * D, C3, q0 + w * 16, T, dq, sOw, scale);
}

// head sizes with a tensor-core kernel
static int flash_tc_supported(int hs) { return hs == 16 || hs == 32 || hs == 64 || hs == 128 || hs == 160; }

template <class K>
static void tc_smem_attr(K kernel, size_t bytes) {
    if (bytes > 48 * 1024)
        cudaCheck(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)bytes));
}

template <int D>
static void flash_tc_forward_launch(bf16* out, float* lse, const bf16* qkv, int B, int T, int NH, cudaStream_t s) {
    size_t smem = TcFwd<D>::bytes;
    tc_smem_attr(flash_tc_forward_kernel<D>, smem);
    dim3 grid(CEIL_DIV(T, 64), NH, B);
    LAUNCH(flash_tc_forward_kernel<D>, grid, TC_WARPS * WARP, smem, s, out, lse, qkv, T, NH);
}

template <int D>
static void flash_tc_backward_launch(bf16* dqkv, const float* Dd, const bf16* dout, const bf16* qkv, const float* lse,
                                     int B, int T, int NH, cudaStream_t s) {
    tc_smem_attr(flash_tc_bwd_dkv_kernel<D>, TcBwd<D>::bytes_dkv);
    tc_smem_attr(flash_tc_bwd_dq_kernel<D>, TcBwd<D>::bytes_dq);
    dim3 grid(CEIL_DIV(T, 64), NH, B);
    LAUNCH(flash_tc_bwd_dkv_kernel<D>, grid, TC_WARPS * WARP, TcBwd<D>::bytes_dkv, s, dqkv, dout, qkv, lse, Dd, T, NH);
    LAUNCH(flash_tc_bwd_dq_kernel<D>, grid, TC_WARPS * WARP, TcBwd<D>::bytes_dq, s, dqkv, dout, qkv, lse, Dd, T, NH);
}

// out (B, T, Cl); lse (B, NH, T). hs must be flash_tc_supported.
static void attention_forward_tc(bf16* out, float* lse, const bf16* qkv, int B, int T, int NH, int hs, cudaStream_t s) {
    switch (hs) {
        case 16:
            flash_tc_forward_launch<16>(out, lse, qkv, B, T, NH, s);
            break;
        case 32:
            flash_tc_forward_launch<32>(out, lse, qkv, B, T, NH, s);
            break;
        case 64:
            flash_tc_forward_launch<64>(out, lse, qkv, B, T, NH, s);
            break;
        case 128:
            flash_tc_forward_launch<128>(out, lse, qkv, B, T, NH, s);
            break;
        case 160:
            flash_tc_forward_launch<160>(out, lse, qkv, B, T, NH, s);
            break;
        default:
            die("tensor-core attention: head size %d not supported", hs);
    }
}

// dqkv (B, T, 3Cl) overwritten; Dd: (B, NH, T) fp32 scratch; out/lse from the forward
static void attention_backward_tc(bf16* dqkv, float* Dd, const bf16* dout, const bf16* out, const bf16* qkv,
                                  const float* lse, int B, int T, int NH, int hs, cudaStream_t s) {
    int rows = B * T * NH;
    LAUNCH(flash_bwd_dot_kernel, CEIL_DIV(rows, 8), 256, 0, s, Dd, dout, out, B, T, NH, hs);
    switch (hs) {
        case 16:
            flash_tc_backward_launch<16>(dqkv, Dd, dout, qkv, lse, B, T, NH, s);
            break;
        case 32:
            flash_tc_backward_launch<32>(dqkv, Dd, dout, qkv, lse, B, T, NH, s);
            break;
        case 64:
            flash_tc_backward_launch<64>(dqkv, Dd, dout, qkv, lse, B, T, NH, s);
            break;
        case 128:
            flash_tc_backward_launch<128>(dqkv, Dd, dout, qkv, lse, B, T, NH, s);
            break;
        case 160:
            flash_tc_backward_launch<160>(dqkv, Dd, dout, qkv, lse, B, T, NH, s);
            break;
        default:
            die("tensor-core attention: head size %d not supported", hs);
    }
}

#endif // LLMC_ATTENTION_TC_CUH
