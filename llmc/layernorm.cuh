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
 *                            dresid may be NULL or alias dinp), dw, db (fp32) += ...
 *
 * Rows: one warp per row, sums in a fixed lane order. dw/db: column sums over rows in
 * fixed row chunks, then the chunks in order (no atomics): deterministic.
 */
#ifndef LLMC_LAYERNORM_CUH
#define LLMC_LAYERNORM_CUH

#include "cuda_utils.cuh"

#define LN_EPS 1e-5f

// one warp per row; out (N, C), mean/rstd (N), inp (N, C), w/b (C)
__global__ void layernorm_forward_kernel(bf16* out, float* mean, float* rstd, const bf16* inp, const bf16* w,
                                         const bf16* b, int N, int C) {
    int row = blockIdx.x * (blockDim.x / WARP) + threadIdx.x / WARP, lane = threadIdx.x % WARP;
    if (row >= N) return;
    const bf16* x = inp + (size_t)row * C;
    float s = 0.0f;
    for (int i = lane; i < C; i += WARP) s += bf(x[i]);
    float m = warp_sum(s) / C;
    float v = 0.0f;
    for (int i = lane; i < C; i += WARP) { float d = bf(x[i]) - m; v += d * d; }
    float rs = 1.0f / sqrtf(warp_sum(v) / C + LN_EPS);
    bf16* o = out + (size_t)row * C;
    for (int i = lane; i < C; i += WARP) o[i] = to_bf((bf(x[i]) - m) * rs * bf(w[i]) + bf(b[i]));
    if (lane == 0) { mean[row] = m; rstd[row] = rs; }
}

// resid = a + b (+ bias); if out: out = LN(resid) * w + lb. One warp per row. resid may
// alias a or b (each element is read and written by one thread).
__global__ void residual_forward_kernel(bf16* resid, bf16* out, float* mean, float* rstd, const bf16* a, const bf16* b,
                                        const bf16* bias, const bf16* w, const bf16* lb, int N, int C) {
    int row = blockIdx.x * (blockDim.x / WARP) + threadIdx.x / WARP, lane = threadIdx.x % WARP;
    if (row >= N) return;
    size_t base = (size_t)row * C;
    float s = 0.0f;
    for (int i = lane; i < C; i += WARP) {
        float r = bf(a[base + i]) + bf(b[base + i]);
        if (bias) r += bf(bias[i]);
        bf16 rb = to_bf(r);
        resid[base + i] = rb;
        s += bf(rb);
    }
    if (out == NULL) return;
    float m = warp_sum(s) / C;
    float v = 0.0f;
    for (int i = lane; i < C; i += WARP) { float d = bf(resid[base + i]) - m; v += d * d; }
    float rs = 1.0f / sqrtf(warp_sum(v) / C + LN_EPS);
    for (int i = lane; i < C; i += WARP) out[base + i] = to_bf((bf(resid[base + i]) - m) * rs * bf(w[i]) + bf(lb[i]));
    if (lane == 0) { mean[row] = m; rstd[row] = rs; }
}

// dinp = dresid + LN backward of dout. One warp per row.
__global__ void layernorm_backward_dinp_kernel(bf16* dinp, const bf16* dresid, const bf16* dout, const bf16* inp,
                                               const bf16* w, const float* mean, const float* rstd, int N, int C) {
    int row = blockIdx.x * (blockDim.x / WARP) + threadIdx.x / WARP, lane = threadIdx.x % WARP;
    if (row >= N) return;
    size_t base = (size_t)row * C;
    float m = mean[row], rs = rstd[row];
    float mg = 0.0f, mgn = 0.0f;
    for (int i = lane; i < C; i += WARP) {
        float norm = (bf(inp[base + i]) - m) * rs, dn = bf(w[i]) * bf(dout[base + i]);
        mg += dn; mgn += dn * norm;
    }
    mg = warp_sum(mg) / C; mgn = warp_sum(mgn) / C;
    for (int i = lane; i < C; i += WARP) {
        float norm = (bf(inp[base + i]) - m) * rs, dn = bf(w[i]) * bf(dout[base + i]);
        float d = rs * (dn - mg - norm * mgn);
        if (dresid) d += bf(dresid[base + i]);
        dinp[base + i] = to_bf(d);
    }
}

// partial[r][0][c] = sum over rows of chunk r of dout*norm, partial[r][1][c] of dout
__global__ void layernorm_dwdb_partial_kernel(float* partial, const bf16* dout, const bf16* inp, const float* mean,
                                              const float* rstd, int N, int C, int rows_per) {
    int c = blockIdx.x * blockDim.x + threadIdx.x, r = blockIdx.y;
    if (c >= C) return;
    int n0 = r * rows_per, n1 = min(N, n0 + rows_per);
    float sw = 0.0f, sb = 0.0f;
    for (int n = n0; n < n1; n++) {
        float g = bf(dout[(size_t)n * C + c]);
        sw += g * (bf(inp[(size_t)n * C + c]) - mean[n]) * rstd[n];
        sb += g;
    }
    partial[((size_t)r * 2) * C + c] = sw;
    partial[((size_t)r * 2 + 1) * C + c] = sb;
}
__global__ void layernorm_dwdb_finish_kernel(float* dw, float* db, const float* partial, int R, int C) {
    int c = blockIdx.x * blockDim.x + threadIdx.x;
    if (c >= C) return;
    float sw = 0.0f, sb = 0.0f;
    for (int r = 0; r < R; r++) { sw += partial[((size_t)r * 2) * C + c]; sb += partial[((size_t)r * 2 + 1) * C + c]; }
    dw[c] += sw; db[c] += sb;
}

static void layernorm_forward(bf16* out, float* mean, float* rstd, const bf16* inp, const bf16* w, const bf16* b,
                              int N, int C, cudaStream_t s) {
    if (N == 0) return;
    LAUNCH(layernorm_forward_kernel, CEIL_DIV(N, 8), 256, 0, s, out, mean, rstd, inp, w, b, N, C);
}

// resid (N, C) = a + b + bias; out = LN(resid) unless out is NULL
static void residual_forward(bf16* resid, bf16* out, float* mean, float* rstd, const bf16* a, const bf16* b,
                             const bf16* bias, const bf16* w, const bf16* lb, int N, int C, cudaStream_t s) {
    if (N == 0) return;
    LAUNCH(residual_forward_kernel, CEIL_DIV(N, 8), 256, 0, s, resid, out, mean, rstd, a, b, bias, w, lb, N, C);
}

// dinp (N, C) = dresid + LN'(dout); dw, db (C) fp32 +=. scratch: >= 2*C floats (more
// allows more row chunks, i.e. more parallelism; the result does not depend on it beyond
// the fixed chunking, which depends only on N and scratch_n).
static void layernorm_backward(bf16* dinp, const bf16* dresid, float* dw, float* db, const bf16* dout, const bf16* inp,
                               const bf16* w, const float* mean, const float* rstd, int N, int C,
                               float* scratch, size_t scratch_n, cudaStream_t s) {
    if (N == 0) return;
    LAUNCH(layernorm_backward_dinp_kernel, CEIL_DIV(N, 8), 256, 0, s, dinp, dresid, dout, inp, w, mean, rstd, N, C);
    int R = N / 64;
    if (R < 1) R = 1;
    if (R > 32) R = 32;
    while (R > 1 && (size_t)R * 2 * C > scratch_n) R--;
    if ((size_t)2 * C > scratch_n) die("layernorm_backward: scratch of %zu floats is below 2*C = %d", scratch_n, 2 * C);
    int rows_per = (N + R - 1) / R;
    dim3 grid(CEIL_DIV(C, 256), R);
    LAUNCH(layernorm_dwdb_partial_kernel, grid, 256, 0, s, scratch, dout, inp, mean, rstd, N, C, rows_per);
    LAUNCH(layernorm_dwdb_finish_kernel, CEIL_DIV(C, 256), 256, 0, s, dw, db, (const float*)scratch, R, C);
}

#endif // LLMC_LAYERNORM_CUH
