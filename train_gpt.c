/*
 * train_gpt.c: the CPU reference trainer. fp32, OpenMP, one file you can read top to
 * bottom: communication helpers, the kernels, the model (forward, backward, AdamW), the
 * training step, validation, sampling, checkpoints, main.
 *
 * Megatron GPT (doc/spec.md section 1): pre-LayerNorm blocks, learned positions, tied LM head,
 * biases everywhere, GeLU (tanh), vocabulary padded (padding never enters the softmax).
 * Every kernel is written for the tensor-parallel slice it owns (C heads/TP, 4C/TP,
 * Vp/TP) and every reduction a kernel does runs in a fixed order inside one thread, so
 * results are bit-identical from run to run and independent of the thread count.
 *
 * Shapes: B = micro-batch, T = sequence, C = hidden, NH = local heads, hs = head size,
 * Cl = local attention width (NH*hs), F = local MLP width (4C/TP), Vl = local vocab rows.
 */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#ifdef _OPENMP
#include <omp.h>
#endif
#include "llmc/host/utils.h"
#include "llmc/host/config.h"
#include "llmc/host/schedule.h"
#include "llmc/host/rand.h"
#include "llmc/host/params.h"
#include "llmc/host/dataloader.h"
#include "llmc/host/checkpoint.h"
#include "llmc/host/logger.h"
#include "llmc/host/tokenizer.h"
#include "llmc/host/layout.h"
#include "llmc/host/comm.h"
#include "llmc/host/seqpar.h"
#include "llmc/host/zero.h"
#include "llmc/host/memplan.h"
#include "llmc/host/reshard.h"
#include "llmc/host/startup.h"
#include "llmc/host/ckpt_rank.h"
#include "llmc/host/noise.h"
#include "llmc/host/spike.h"
#include "llmc/host/run.h"
#include "llmc/cpu/cpu_gemm.h"
#include "llmc/cpu/cpu_math.h"
#include <assert.h>
#include <unistd.h>

// ----------------------------------------------------------------------------------------
// kernels

// out (N, OC) = inp (N, IC) @ W (OC, IC)^T + bias (OC): the packed GEMM of
// llmc/cpu/cpu_gemm.h reading W in place (NT). work: its pack buffers.
static void matmul_forward(float* out, const float* inp, const float* W, const float* bias, int N, int IC, int OC,
                           const CpuGemmWork* work) {
    cpu_gemm(cpu_isa(), N, OC, IC, inp, IC, 1, W, 1, IC, out, OC, 0, bias, work);
}

// dW (OC, IC) += dout^T @ inp (TN, no transposed copy); with dw_first (the step's first
// write, see grads_begin) dW = instead, in non-temporal stores: nothing reads it before the
// optimizer. zb-h1's W runs this alone, later, on the same inputs: the same bits.
static void matmul_backward_weight(float* dW, int dw_first, const float* dout, const float* inp, int N, int IC, int OC,
                                   const CpuGemmWork* work) {
    cpu_gemm(cpu_isa(), OC, IC, N, dout, 1, OC, inp, IC, 1, dW, IC, dw_first ? CPU_GEMM_STREAM : CPU_GEMM_ACCUMULATE,
             NULL, work);
}

// dinp (N, IC) = dout (N, OC) @ W (OC, IC) (overwrites; may be NULL), dW as
// matmul_backward_weight unless dW is NULL (zb-h1's B: the weight gradient comes later),
// dbias (OC) += sum over N of dout, each column summed over n in order.
// work: the GEMM's pack buffers.
static void matmul_backward(float* dinp, float* dW, int dw_first, float* dbias, const float* dout, const float* inp,
                            const float* W, int N, int IC, int OC, const CpuGemmWork* work) {
    if (dinp != NULL) cpu_gemm(cpu_isa(), N, IC, OC, dout, OC, 1, W, IC, 1, dinp, IC, 0, NULL, work);
    if (dW != NULL) matmul_backward_weight(dW, dw_first, dout, inp, N, IC, OC, work);
    if (dbias != NULL) {
        const int OB = 256; // column blocks: a (OB) row of partial sums stays in registers/L1
#pragma omp parallel for schedule(static)
        for (int o0 = 0; o0 < OC; o0 += OB) {
            int ow = OC - o0 < OB ? OC - o0 : OB;
            float s[256];
            for (int o = 0; o < ow; o++) s[o] = 0.0f;
            for (int n = 0; n < N; n++) {
                const float* row = dout + (size_t)n * OC + o0;
                for (int o = 0; o < ow; o++) s[o] += row[o];
            }
            for (int o = 0; o < ow; o++) dbias[o0 + o] += s[o];
        }
    }
}

// out (N, C) = LN(inp) * w + b; mean, rstd (N)
// The row statistics are sums over i in order; LN_ROWS rows at a time, so that many
// in-order chains run side by side (one chain waited on every add).
#define LN_ROWS 4
static void layernorm_forward(float* out, float* mean, float* rstd, const float* inp, const float* w, const float* b,
                              int N, int C) {
#pragma omp parallel for schedule(static)
    for (int n0 = 0; n0 < N; n0 += LN_ROWS) {
        int nr = N - n0 < LN_ROWS ? N - n0 : LN_ROWS;
        const float* x[LN_ROWS];
        float m[LN_ROWS], v[LN_ROWS];
        for (int r = 0; r < LN_ROWS; r++) {
            x[r] = inp + (size_t)(n0 + (r < nr ? r : 0)) * C;
            m[r] = 0.0f;
            v[r] = 0.0f;
        }
        for (int i = 0; i < C; i++)
            for (int r = 0; r < LN_ROWS; r++) m[r] += x[r][i];
        for (int r = 0; r < LN_ROWS; r++) m[r] /= C;
        for (int i = 0; i < C; i++)
            for (int r = 0; r < LN_ROWS; r++) {
                float d = x[r][i] - m[r];
                v[r] += d * d;
            }
        for (int r = 0; r < nr; r++) {
            float vr = v[r] / C;
            float s = 1.0f / sqrtf(vr + 1e-5f);
            float* o = out + (size_t)(n0 + r) * C;
            for (int i = 0; i < C; i++) o[i] = (x[r][i] - m[r]) * s * w[i] + b[i];
            mean[n0 + r] = m[r];
            rstd[n0 + r] = s;
        }
    }
}

// dinp (N, C) += LN backward; dw, db (C) +=
static void layernorm_backward(float* dinp, float* dw, float* db, const float* dout, const float* inp, const float* w,
                               const float* mean, const float* rstd, int N, int C) {
#pragma omp parallel for schedule(static)
    for (int n0 = 0; n0 < N; n0 += LN_ROWS) {
        int nr = N - n0 < LN_ROWS ? N - n0 : LN_ROWS;
        const float* x[LN_ROWS];
        const float* g[LN_ROWS];
        float m[LN_ROWS], s[LN_ROWS], mg[LN_ROWS], mgn[LN_ROWS];
        for (int r = 0; r < LN_ROWS; r++) {
            int n = n0 + (r < nr ? r : 0);
            x[r] = inp + (size_t)n * C;
            g[r] = dout + (size_t)n * C;
            m[r] = mean[n];
            s[r] = rstd[n];
            mg[r] = 0.0f;
            mgn[r] = 0.0f;
        }
        for (int i = 0; i < C; i++)
            for (int r = 0; r < LN_ROWS; r++) {
                float norm = (x[r][i] - m[r]) * s[r], dn = w[i] * g[r][i];
                mg[r] += dn;
                mgn[r] += dn * norm;
            }
        for (int r = 0; r < nr; r++) {
            float mgr = mg[r] / C, mgnr = mgn[r] / C;
            float* d = dinp + (size_t)(n0 + r) * C;
            for (int i = 0; i < C; i++) {
                float norm = (x[r][i] - m[r]) * s[r], dn = w[i] * g[r][i];
                d[i] += s[r] * (dn - mgr - norm * mgnr);
            }
        }
    }
// dw, db: column sums over n in order, 64 columns at a time along the rows (a column at a
// time walked the (N, C) arrays with a stride of C)
#pragma omp parallel for schedule(static)
    for (int i0 = 0; i0 < C; i0 += 64) {
        int w = C - i0 < 64 ? C - i0 : 64;
        float sw[64], sb[64];
        for (int i = 0; i < w; i++) {
            sw[i] = 0.0f;
            sb[i] = 0.0f;
        }
        for (int n = 0; n < N; n++) {
            const float* g = dout + (size_t)n * C + i0;
            const float* x = inp + (size_t)n * C + i0;
            float m = mean[n], s = rstd[n];
            for (int i = 0; i < w; i++) {
                sw[i] += g[i] * (x[i] - m) * s;
                sb[i] += g[i];
            }
        }
        for (int i = 0; i < w; i++) {
            dw[i0 + i] += sw[i];
            db[i0 + i] += sb[i];
        }
    }
}

// GeLU, tanh form: 0.5 x (1 + tanh(u)), u = sqrt(2/pi) (x + 0.044715 x^3), computed as
// x * s with s = 0.5 (1 + tanh(u)) = 1 / (1 + exp(-2u)) (the same function, no tanhf call,
// and no cancellation in 1 + tanh for negative x); the derivative with tanh = 2s - 1,
// 1 - tanh^2 = 4 s (1 - s).
#define GELU_SCALE 0.7978845608028654f // sqrt(2/pi)
static void gelu_forward(float* out, const float* inp, size_t n) {
#pragma omp parallel for simd schedule(static)
    for (size_t i = 0; i < n; i++) {
        float x = inp[i];
        float u = GELU_SCALE * (x + 0.044715f * x * x * x);
        out[i] = x / (1.0f + exp_vec(-2.0f * u));
    }
}
static void gelu_backward(float* dinp, const float* inp, const float* dout, size_t n) {
#pragma omp parallel for simd schedule(static)
    for (size_t i = 0; i < n; i++) {
        float x = inp[i];
        float u = GELU_SCALE * (x + 0.044715f * x * x * x);
        float s = 1.0f / (1.0f + exp_vec(-2.0f * u));
        float du = GELU_SCALE * (1.0f + 3.0f * 0.044715f * x * x);
        dinp[i] = dout[i] * (s + 2.0f * x * s * (1.0f - s) * du);
    }
}

// Causal self-attention over the local heads.
// qkv (B, T, 3Cl) laid out [Q | K | V], head h at dims [h*hs, (h+1)*hs) of each block;
// att (B, NH, T, T) softmax probabilities (upper triangle 0); out (B, T, Cl).
// ht (B, NH, hs, T) (+ 32 floats) scratch: each head's keys (forward) or values (backward) transposed,
// so a query's scores against all keys are one vector loop over t2; each score is still
// the sum over i in order of q[i] k[i] (the bits of a dot product per score).
static void head_transpose(float* ht, const float* qkv, int part, int B, int T, int NH, int hs) {
    int Cl = NH * hs, C3 = 3 * Cl;
#pragma omp parallel for collapse(2) schedule(static)
    for (int b = 0; b < B; b++)
        for (int h = 0; h < NH; h++) {
            float* dst = ht + ((size_t)b * NH + h) * hs * T;
            for (int t = 0; t < T; t++) {
                const float* src = qkv + ((size_t)b * T + t) * C3 + part * Cl + h * hs;
                for (int i = 0; i < hs; i++) dst[(size_t)i * T + t] = src[i];
            }
        }
}

// out[t2] = sum over i = 0..hs-1 (in order, from 0) of x[i] mt[i*T + t2], for t2 < n.
// 32 outputs at a time stay in registers across i. mt must be readable up to 31 floats
// past each row's n (the lanes past n are computed and dropped; ht is padded for that).
static void dot_rows(float* restrict out, const float* restrict x, const float* restrict mt, int hs, int T, int n) {
    for (int t0 = 0; t0 < n; t0 += 32) {
        float acc[32];
        for (int j = 0; j < 32; j++) acc[j] = 0.0f;
        for (int i = 0; i < hs; i++) {
            float xi = x[i];
            const float* r = mt + (size_t)i * T + t0;
            for (int j = 0; j < 32; j++) acc[j] += xi * r[j];
        }
        int w = n - t0 < 32 ? n - t0 : 32;
        for (int j = 0; j < w; j++) out[t0 + j] = acc[j];
    }
}

// out[i] = sum over r = r0..r1-1 (in order, from 0) of w[r * ws] rows[r * rs + i], i < hs:
// a weighted sum of rows, 32 outputs at a time in registers (not read-modify-write of out
// per row, which bound attention on load/store ports).
static void sum_rows(float* restrict out, const float* restrict w, ptrdiff_t ws, const float* restrict rows,
                     ptrdiff_t rs, int r0, int r1, int hs) {
    for (int i0 = 0; i0 < hs; i0 += 32) {
        int n = hs - i0 < 32 ? hs - i0 : 32;
        float acc[32];
        for (int j = 0; j < 32; j++) acc[j] = 0.0f;
        if (n == 32) {
            for (int r = r0; r < r1; r++) {
                float wr = w[r * ws];
                const float* x = rows + r * rs + i0;
                for (int j = 0; j < 32; j++) acc[j] += wr * x[j];
            }
        } else {
            for (int r = r0; r < r1; r++) {
                float wr = w[r * ws];
                const float* x = rows + r * rs + i0;
                for (int j = 0; j < n; j++) acc[j] += wr * x[j];
            }
        }
        for (int j = 0; j < n; j++) out[i0 + j] = acc[j];
    }
}

static void attention_forward(float* out, float* att, float* ht, const float* qkv, int B, int T, int NH, int hs) {
    int Cl = NH * hs, C3 = 3 * Cl;
    float scale = 1.0f / sqrtf((float)hs);
    head_transpose(ht, qkv, 1, B, T, NH, hs); // keys
#pragma omp parallel for collapse(3) schedule(static)
    for (int b = 0; b < B; b++)
        for (int h = 0; h < NH; h++)
            for (int t = 0; t < T; t++) {
                const float* q = qkv + ((size_t)b * T + t) * C3 + h * hs;
                const float* kt = ht + ((size_t)b * NH + h) * hs * T; // (hs, T)
                float* a = att + (((size_t)b * NH + h) * T + t) * T;
                dot_rows(a, q, kt, hs, T, t + 1);
                float mx = -INFINITY;
                for (int t2 = 0; t2 <= t; t2++) {
                    a[t2] *= scale;
                    if (a[t2] > mx) mx = a[t2];
                }
                for (int t2 = 0; t2 <= t; t2++) a[t2] = exp_vec(a[t2] - mx); // vectorized
                float sum = 0.0f;
                for (int t2 = 0; t2 <= t; t2++) sum += a[t2]; // in order
                float inv = 1.0f / sum;
                for (int t2 = 0; t2 <= t; t2++) a[t2] *= inv;
                for (int t2 = t + 1; t2 < T; t2++) a[t2] = 0.0f;
                // out[t] = sum over t2 <= t of a[t2] v[t2]
                sum_rows(out + ((size_t)b * T + t) * Cl + h * hs, a, 1, qkv + (size_t)b * T * C3 + 2 * Cl + h * hs, C3,
                         0, t + 1, hs);
            }
}

// dqkv (B, T, 3Cl) overwritten. Each (b, h) pair is owned by one thread. Its score
// gradients dp (T, T) are formed row by row first; then every output row is one weighted
// sum of rows in registers, over the same terms in the same order as accumulating them one
// t at a time: dq[t] over t2 <= t, dk[t2] and dv[t2] over t >= t2.
static void attention_backward(float* dqkv, float* ht, const float* dout, const float* qkv, const float* att, int B,
                               int T, int NH, int hs) {
    int Cl = NH * hs, C3 = 3 * Cl;
    float scale = 1.0f / sqrtf((float)hs);
    head_transpose(ht, qkv, 2, B, T, NH, hs); // values
#pragma omp parallel
    {
        float* dp = (float*)malloc_check(sizeof(float) * ((size_t)T * T + 32)); // (T, T) + dot_rows' overhang
#pragma omp for collapse(2) schedule(static)
        for (int b = 0; b < B; b++)
            for (int h = 0; h < NH; h++) {
                const float* vt = ht + ((size_t)b * NH + h) * hs * T; // (hs, T)
                const float* ab = att + ((size_t)b * NH + h) * T * T; // (T, T)
                const float* qb = qkv + (size_t)b * T * C3 + h * hs;  // row t at t * C3
                const float *kb = qb + Cl, *gb = dout + (size_t)b * T * Cl + h * hs;
                float* db = dqkv + (size_t)b * T * C3 + h * hs;
                for (int t = 0; t < T; t++) {
                    const float* a = ab + (size_t)t * T;
                    float* d = dp + (size_t)t * T;
                    dot_rows(d, gb + (size_t)t * Cl, vt, hs, T, t + 1); // d[t2] = dL/da = sum over i of go[i] v[t2][i]
                    float dot = 0.0f;
                    for (int t2 = 0; t2 <= t; t2++) dot += a[t2] * d[t2];
                    for (int t2 = 0; t2 <= t; t2++) d[t2] = a[t2] * (d[t2] - dot) * scale; // dL/d(score)
                    sum_rows(db + (size_t)t * C3, d, 1, kb, C3, 0, t + 1, hs);             // dq[t]
                }
                for (int t2 = 0; t2 < T; t2++) {
                    sum_rows(db + (size_t)t2 * C3 + Cl, dp + t2, T, qb, C3, t2, T, hs);     // dk[t2]
                    sum_rows(db + (size_t)t2 * C3 + 2 * Cl, ab + t2, T, gb, Cl, t2, T, hs); // dv[t2]
                }
            }
        free(dp);
    }
}

// ----------------------------------------------------------------------------------------
// context parallelism: ring attention (doc/cp.md). A sequence of T tokens is cut into 2*CP
// chunks of Tch = T/(2CP); CP rank r holds chunks r and 2CP-1-r as its local rows [0, Tch)
// and [Tch, 2Tch), so every rank does the same attention work under the causal mask. The
// keys and values of every rank pass around the CP ring; block j (rank j's rows) is seen by
// local query row i of rank r as: j == r, keys [0, i] (causal in the local order, which is
// the global order within and across the two chunks); j < r, keys [0, Tch) (chunk j lies
// wholly before both chunks of r); j > r, keys [0, 2Tch) from row Tch on (only chunk
// 2CP-1-r comes after both of j's), none before.

// how many key rows of block j local query row i sees (keys [0, n))
static inline int cp_visible(int r, int j, int i, int Tch) {
    if (j == r) return i + 1;
    if (j < r) return Tch;
    return i >= Tch ? 2 * Tch : 0;
}

// One block of the forward, merged into the accumulators (out, lse) by the log-sum-exp
// rule (first: they start here). q rows: qkv (B, T, 3Cl); keys|values of block j: kv (B, T, 2Cl).
// out (B, T, Cl) and lse (B, NH, T): the attention output and log-sum-exp so far.
static void cp_block_forward(float* out, float* lse, const float* qkv, const float* kv, int B, int T, int NH, int hs,
                             int Tch, int r, int j, int first) {
    int Cl = NH * hs, C3 = 3 * Cl, C2 = 2 * Cl;
    float scale = 1.0f / sqrtf((float)hs);
#pragma omp parallel
    {
        float* sc = (float*)malloc_check(sizeof(float) * (T > 0 ? T : 1)); // one query row's scores
        float* ob = (float*)malloc_check(sizeof(float) * (hs > 0 ? hs : 1));
#pragma omp for collapse(2) schedule(static)
        for (int b = 0; b < B; b++)
            for (int h = 0; h < NH; h++)
                for (int i = 0; i < T; i++) {
                    int nk = cp_visible(r, j, i, Tch);
                    if (nk == 0) continue; // no key of this block: the accumulators stay
                    const float* q = qkv + ((size_t)b * T + i) * C3 + h * hs;
                    float m = -INFINITY;
                    for (int k = 0; k < nk; k++) {
                        const float* kk = kv + ((size_t)b * T + k) * C2 + h * hs;
                        float d = 0.0f;
                        for (int c = 0; c < hs; c++) d += q[c] * kk[c];
                        sc[k] = d * scale;
                        if (sc[k] > m) m = sc[k];
                    }
                    float l = 0.0f;
                    for (int c = 0; c < hs; c++) ob[c] = 0.0f;
                    for (int k = 0; k < nk; k++) {
                        float e = expf(sc[k] - m);
                        const float* vv = kv + ((size_t)b * T + k) * C2 + Cl + h * hs;
                        l += e;
                        for (int c = 0; c < hs; c++) ob[c] += e * vv[c];
                    }
                    float lb = m + logf(l);
                    float* o = out + ((size_t)b * T + i) * Cl + h * hs;
                    float* la = lse + ((size_t)b * NH + h) * T + i;
                    if (first) {
                        for (int c = 0; c < hs; c++) o[c] = ob[c] / l;
                        *la = lb;
                        continue;
                    }
                    float mx = *la > lb ? *la : lb;
                    float nl = mx + logf(expf(*la - mx) + expf(lb - mx));
                    float wa = expf(*la - nl), wb = expf(lb - nl) / l;
                    for (int c = 0; c < hs; c++) o[c] = o[c] * wa + ob[c] * wb;
                    *la = nl;
                }
        free(sc);
        free(ob);
    }
}

// One block of the backward (FlashAttention's, P recomputed from the final lse): dq (the Q
// part of dqkv (B, T, 3Cl)) += dS K, and block j's dkv (B, T, 2Cl: dK | dV) += dS^T Q, P^T dO.
// D (B, NH, T): rowsum(dO * O) of the local rows.
static void cp_block_backward(float* dqkv, float* dkv, const float* qkv, const float* kv, const float* dout,
                              const float* lse, const float* D, int B, int T, int NH, int hs, int Tch, int r, int j) {
    int Cl = NH * hs, C3 = 3 * Cl, C2 = 2 * Cl;
    float scale = 1.0f / sqrtf((float)hs);
#pragma omp parallel for collapse(2) schedule(static)
    for (int b = 0; b < B; b++)
        for (int h = 0; h < NH; h++) // (b, h) owns its head's columns of dq, dk, dv: no race
            for (int i = 0; i < T; i++) {
                int nk = cp_visible(r, j, i, Tch);
                const float* q = qkv + ((size_t)b * T + i) * C3 + h * hs;
                const float* go = dout + ((size_t)b * T + i) * Cl + h * hs;
                float* dq = dqkv + ((size_t)b * T + i) * C3 + h * hs;
                float li = lse[((size_t)b * NH + h) * T + i], Di = D[((size_t)b * NH + h) * T + i];
                for (int k = 0; k < nk; k++) {
                    const float* kk = kv + ((size_t)b * T + k) * C2 + h * hs;
                    const float* vv = kk + Cl;
                    float* dk = dkv + ((size_t)b * T + k) * C2 + h * hs;
                    float* dv = dk + Cl;
                    float sdot = 0.0f, dp = 0.0f;
                    for (int c = 0; c < hs; c++) {
                        sdot += q[c] * kk[c];
                        dp += go[c] * vv[c];
                    }
                    float p = expf(sdot * scale - li);
                    float ds = p * (dp - Di) * scale;
                    for (int c = 0; c < hs; c++) {
                        dv[c] += p * go[c];
                        dq[c] += ds * kk[c];
                        dk[c] += ds * q[c];
                    }
                }
            }
}

// ----------------------------------------------------------------------------------------
// the model

// Activations of one layer for one micro-batch (pointers into the activation buffer).
// With -sp 1 the rows outside the tensor-parallel region are this rank's sequence shard
// (B, Ts, C), Ts = T/TP; everything between the column- and row-parallel GEMMs is full.
typedef struct {
    float* ln1;
    float* ln1_mean;
    float* ln1_rstd; // (B,Ts,C) (B,Ts) (B,Ts)
    float* qkv;      // (B,T,3Cl)
    float* att;      // (B,NH,T,T) (shared by all layers with selective); -cp > 1: none (lse instead)
    float* lse;      // -cp > 1: (B,NH,T) the attention's log-sum-exp, for the ring's backward
    float* atty;     // (B,T,Cl)
    float* resid2;   // (B,Ts,C) x + attention
    float* ln2;
    float* ln2_mean;
    float* ln2_rstd; // (B,Ts,C) (B,Ts) (B,Ts)
    float* fch;
    float* fch_gelu; // (B,T,F)
} LayerActs;

// Activations of one (chunk, micro-batch) unit in flight. With full recompute, one set of
// LayerActs is shared by all layers and only each layer's input x[l] is kept; with
// selective recompute every layer keeps its GEMM inputs and only the attention
// probabilities are rebuilt in backward (one (B,NH,T,T) buffer for the whole model).
typedef struct {
    float* mem;
    float* x;         // (nl+1, B, Ts, C): x[l] = input of local layer l, x[nl] = chunk output
    LayerActs* layer; // (nl) or (1) with full recompute
    float* lnf;
    float* lnf_mean;
    float* lnf_rstd; // (B,Ts,C) (B,Ts) (B,Ts)   last stage
    float* logits;   // (B,T,Vl) last stage; holds dlogits after backward
    float* losses;   // (B,T) per-token loss
    float* lse;      // (B,T) log-sum-exp over the full vocabulary
    int* inputs;
    int* targets;              // (B,T)
    size_t bytes, layer_bytes; // activation bytes this unit keeps; of them, per layer (incl. its input)
} Acts;

typedef struct {
    Config cfg;
    ParamLayout pl;
    int B, T, C, NH, hs, Cl, F, Vl, v0, Vv; // Vv: real (unpadded) rows of the local vocab slice
    int nchunk, nlc;                        // model chunks per rank (-vpp) and layers per chunk
    int sp, Ts, t0;                         // sequence parallel (TP > 1 only); local sequence rows Ts from position t0
    int cp, CP, Tfull, Tch;                 // context parallel: T = Tfull/CP local rows, two chunks of Tch
    int* pos;                               // (T) the global position of each local row
    int *in_full, *tg_full;                 // -cp > 1: (B, Tfull) a micro-batch's tokens before the rank takes its rows
    float* cpbuf[4];                        // -cp > 1: (B, T, 2Cl) each: the ring's K|V blocks and dK|dV partials
    float* cpD;                             // -cp > 1: (B, NH, T) rowsum(dO * O)
    int zero;                               // ZeRO level, llmc/host/zero.h (0 with one DP rank)
    float* params;                          // (pl.total); -zero 3: NULL (pmaster, prest, pwin)
    float* grads;                           // (pl.total); -zero 2/3: NULL (grest, glayer, gshard)
    float* m;
    float* v;
    size_t opt_off, n_opt; // AdamW moments for flat elements [opt_off, opt_off+n_opt)
    float* pmaster;        // (n_opt) the weights AdamW updates: params + opt_off, or -zero 3's own shard
    float* gshard;         // (n_opt) reduced gradients of the optimizer range (ZeRO reduce-scatter target)
    // -zero 2/3: the per-layer tensors of one layer (loff: each one's offset, nlayer_el in all)
    // and the rest (embeddings, final LayerNorm: roff, nrest_el) in compact buffers
    size_t loff[NUM_PARAM_TENSORS], roff[NUM_PARAM_TENSORS], nlayer_el, nrest_el;
    float* glayer;       // (nlayer_el) the gradients of the layer the backward is at, one micro-batch
    float* grest;        // (nrest_el) the rest's gradients, accumulated over the step
    float* prest;        // -zero 3: (nrest_el) the rest's weights, whole
    float* pwin[2];      // -zero 3: (nlayer_el) gathered weights of a layer (the one in use, the next)
    int win_l[2];        // the local layer a window holds, -1 none
    ZeroGather wq[2];    // -zero 3: each window's gather in flight (the prefetch)
    ZeroComm zc;         // scratch of the bucket reductions and gathers
    double* sq;          // -zero 2/3, one micro-batch per step: (NUM_PARAM_TENSORS, nlayers) each slice's squared
                         // local gradient before its reduction (the noise scale's |G_small|^2, gpt_grad_sumsq's order)
    int sq_on;           // this step fills sq
    size_t mem[NUM_MEM]; // bytes allocated of each kind (memplan.h)
    int nslots;
    Acts* acts;
    int* slot_unit; // interleaved: (chunk, micro-batch) unit k*V + c held by each slot, -1 = free
    // -pp-schedule zb-h1: B copies what each layer's four weight GEMMs need (their inputs and
    // output gradients) into a W stash of the unit and gives its activation slot back; its W
    // runs the GEMMs from the stash. nstash: the most units whose W is pending at once
    // (pipe_w_pending_max). The LM head's weight GEMM stays in B (its dlogits are (B,T,Vl)).
    int zb;
    int nstash;
    size_t wstash_layer;                 // elements per layer (zb_stash_layout)
    size_t ws_off[NUM_WS], ws_n[NUM_WS]; // each part of a layer's stash (WStashPart)
    float** wstash;                      // (nstash) of (nlc * wstash_layer)
    UnitPool wpool;                      // the stash each pending unit holds
    float* att_shared;
    float* atty_re; // selective: (B,NH,T,T) probabilities, (B,T,Cl) rebuilt output
    // backward scratch, sized by the micro-batch
    float* dx;
    float* dtmp;
    float* dres2;
    float* dqkv;
    float* datty;
    float* dfch;
    float* dfch2;
    float* head_t; // (B,NH,hs,T) attention's keys / values transposed per head
    float* gat;
    float* gdout;
    float* ptmp;
    float* sptmp;          // -sp: gathered input, gathered grad, partial sums, collective staging (B,T,C)
    CpuGemmWork gemm_work; // pack buffers of every GEMM (one set per OpenMP thread)
    unsigned char* gfresh; // (NUM_PARAM_TENSORS, pl.nlayers): gradient not yet written this step (grads_begin)
} GPT;

// every buffer the model keeps, counted by kind for the start-up table's "memory per rank"
static float* gpt_alloc(GPT* g, int kind, size_t n) {
    g->mem[kind] += sizeof(float) * n;
    return (float*)calloc_big(n > 0 ? n : 1, sizeof(float));
}

static int is_first_stage(const GPT* g) { return g->pl.pp == 0; }
static int is_last_stage(const GPT* g) { return g->pl.pp == g->pl.PP - 1; }
// chunk c of this rank is the first / last virtual stage (embeddings / head)
static int is_first_chunk(const GPT* g, int c) { return g->pl.pp == 0 && c == 0; }
static int is_last_chunk(const GPT* g, int c) { return g->pl.pp == g->pl.PP - 1 && c == g->nchunk - 1; }

static LayerActs* layer_acts(const GPT* g, Acts* a, int l) {
    return &a->layer[g->cfg.recompute == RECOMPUTE_FULL ? 0 : l];
}

static void acts_alloc(GPT* g, Acts* a) {
    int B = g->B, T = g->T, C = g->C, NH = g->NH, Cl = g->Cl, F = g->F, nl = g->nlc;
    size_t BT = (size_t)B * T, BTs = (size_t)B * g->Ts;
    int selective = g->cfg.recompute == RECOMPUTE_SELECTIVE;
    size_t att_n = selective || g->CP > 1 ? 0 : (size_t)B * NH * T * T, lse_n = g->CP > 1 ? (size_t)B * NH * T : 0;
    int nla = g->cfg.recompute == RECOMPUTE_FULL ? 1 : nl;
    RankShape rs = rank_shape(&g->cfg, g->pl.tp, g->pl.TP, g->pl.pp, g->pl.PP);
    size_t per_layer, total = mem_slot_floats(&rs, &per_layer); // memplan.h: the planner's count too
    a->mem = gpt_alloc(g, MEM_ACTS, total);
    float* p = a->mem;
#define TAKE(ptr, n) \
    do {             \
        (ptr) = p;   \
        p += (n);    \
    } while (0)
    TAKE(a->x, (size_t)(nl + 1) * BTs * C);
    a->layer = (LayerActs*)calloc_check(nla, sizeof(LayerActs));
    for (int l = 0; l < nla; l++) {
        LayerActs* la = &a->layer[l];
        TAKE(la->ln1, BTs * C);
        TAKE(la->ln1_mean, BTs);
        TAKE(la->ln1_rstd, BTs);
        TAKE(la->qkv, BT * 3 * Cl);
        if (selective && g->CP == 1)
            la->att = g->att_shared;
        else
            TAKE(la->att, att_n);
        TAKE(la->lse, lse_n);
        TAKE(la->atty, BT * Cl);
        TAKE(la->resid2, BTs * C);
        TAKE(la->ln2, BTs * C);
        TAKE(la->ln2_mean, BTs);
        TAKE(la->ln2_rstd, BTs);
        TAKE(la->fch, BT * F);
        TAKE(la->fch_gelu, BT * F);
    }
    if (is_last_stage(g)) {
        TAKE(a->lnf, BTs * C);
        TAKE(a->lnf_mean, BTs);
        TAKE(a->lnf_rstd, BTs);
        TAKE(a->logits, BT * g->Vl);
        TAKE(a->losses, BT);
        TAKE(a->lse, BT);
    }
#undef TAKE
    // what is kept per layer across the pipeline's wait: its input, and its stash unless full
    // recompute (whose one working set is rebuilt layer by layer)
    a->layer_bytes = sizeof(float) * (BTs * C + (g->cfg.recompute == RECOMPUTE_FULL ? 0 : per_layer));
    a->bytes = sizeof(float) * (size_t)(p - a->mem);
    a->inputs = (int*)calloc_check(BT, sizeof(int));
    a->targets = (int*)calloc_check(BT, sizeof(int));
}

static void acts_free(Acts* a) {
    free(a->mem);
    free(a->layer);
    free(a->inputs);
    free(a->targets);
}

// Builds the model for one rank: parameter table, buffers, activation slots. The
// optimizer range [opt_off, opt_off + n_opt) is the whole buffer here; ZeRO narrows it.
static void gpt_build(GPT* g, const Config* cfg, const Comm* comm, int nslots, int nstash) {
    memset(g, 0, sizeof(*g));
    g->cfg = *cfg;
    param_layout_init(&g->pl, cfg->L, cfg->H, cfg->heads, cfg->seq, cfg->V, cfg->Vp, comm->tp, comm->TP, comm->pp,
                      comm->PP);
    param_layout_set_chunks(&g->pl, cfg->vpp);
    g->nchunk = g->pl.nchunks;
    g->nlc = g->pl.nlayers / g->nchunk;
    g->B = cfg->mb;
    g->CP = comm->CP;
    g->cp = comm->cp;
    g->Tfull = cfg->seq;
    g->T = cfg->seq / g->CP;
    g->Tch = g->T / 2;
    g->pos = (int*)malloc_check(sizeof(int) * g->T);
    for (int t = 0; t < g->T; t++) // chunks cp and 2CP-1-cp (doc/cp.md); without CP the identity
        g->pos[t] = g->CP == 1 ? t : (t < g->Tch ? g->cp * g->Tch + t : (2 * g->CP - 1 - g->cp) * g->Tch + t - g->Tch);
    if (g->CP > 1) {
        g->in_full = (int*)malloc_check(sizeof(int) * g->B * g->Tfull);
        g->tg_full = (int*)malloc_check(sizeof(int) * g->B * g->Tfull);
    }
    g->C = cfg->H;
    g->sp = cfg->sp && comm->TP > 1; // one TP rank: nothing to split
    g->Ts = g->sp ? g->T / comm->TP : g->T;
    g->t0 = g->sp ? comm->tp * g->Ts : 0;
    g->NH = cfg->heads / comm->TP;
    g->hs = cfg->H / cfg->heads;
    g->Cl = g->NH * g->hs;
    g->F = 4 * cfg->H / comm->TP;
    g->Vl = cfg->Vp / comm->TP;
    g->v0 = comm->tp * g->Vl;
    g->Vv = cfg->V - g->v0;
    if (g->Vv < 0) g->Vv = 0;
    if (g->Vv > g->Vl) g->Vv = g->Vl;
    // ZeRO: AdamW state and the update cover only this DP rank's shard of the flat buffer;
    // -zero 2 keeps no full gradient buffer, -zero 3 no full weights either (zero.h)
    g->zero = cfg->zero;
    if (g->zero)
        zero_shard(g->pl.total, comm->DPC, comm->dpc, &g->opt_off, &g->n_opt);
    else {
        g->opt_off = 0;
        g->n_opt = g->pl.total;
    }
    g->nlayer_el = zero_layer_offsets(&g->pl, g->loff);
    g->nrest_el = 0;
    for (int t = 0; t < NUM_PARAM_TENSORS; t++) {
        g->roff[t] = g->nrest_el;
        if (!zero_layered(t)) g->nrest_el += g->pl.numel[t];
    }
    if (g->zero < 3) {
        g->params = gpt_alloc(g, MEM_PARAMS, g->pl.total);
        g->pmaster = g->params + g->opt_off;
    } else {
        g->pmaster = gpt_alloc(g, MEM_PARAMS, g->n_opt);
        g->prest = gpt_alloc(g, MEM_PARAMS, g->nrest_el);
        size_t zs, zr, gcap;
        zero_staging_need(&g->pl, comm->DPC, comm->dpc, comm->chunk, g->zero, nstash > 0, &zs, &zr, &gcap);
        for (int w = 0; w < 2; w++) {
            g->pwin[w] = gpt_alloc(g, MEM_PARAMS, g->nlayer_el);
            g->win_l[w] = -1;
            zero_gather_init(&g->wq[w], gcap, comm->DPC); // this rank's part of a layer, staged for the prefetch
            g->mem[MEM_PARAMS] += sizeof(float) * gcap;
        }
    }
    if (g->zero < 2) {
        g->grads = gpt_alloc(g, MEM_GRADS, g->pl.total);
    } else {
        g->glayer = gpt_alloc(g, MEM_GRADS, g->nlayer_el);
        g->grest = gpt_alloc(g, MEM_GRADS, g->nrest_el);
    }
    g->gshard = g->zero ? gpt_alloc(g, MEM_GRADS, g->n_opt) : g->grads;
    g->m = gpt_alloc(g, MEM_OPTIM, g->n_opt);
    g->v = gpt_alloc(g, MEM_OPTIM, g->n_opt);
    g->sq = (double*)calloc_check((size_t)NUM_PARAM_TENSORS * (g->pl.nlayers > 0 ? g->pl.nlayers : 1), sizeof(double));
    size_t BT = (size_t)g->B * g->T;
    if (cfg->recompute == RECOMPUTE_SELECTIVE && g->CP == 1) { // the ring keeps no probabilities to rebuild
        g->att_shared = gpt_alloc(g, MEM_ACTS, (size_t)g->B * g->NH * g->T * g->T);
        g->atty_re = gpt_alloc(g, MEM_ACTS, BT * g->Cl);
    }
    if (g->CP > 1) {
        for (int i = 0; i < 4; i++) g->cpbuf[i] = gpt_alloc(g, MEM_ACTS, BT * 2 * g->Cl);
        g->cpD = gpt_alloc(g, MEM_ACTS, (size_t)g->B * g->NH * g->T);
    }
    g->nslots = nslots;
    g->acts = (Acts*)calloc_check(nslots, sizeof(Acts));
    g->slot_unit = (int*)malloc_check(sizeof(int) * nslots);
    for (int s = 0; s < nslots; s++) {
        acts_alloc(g, &g->acts[s]);
        g->slot_unit[s] = -1;
    }
    g->zb = nstash > 0;
    g->nstash = nstash;
    g->wstash_layer = zb_stash_layout(BT, (size_t)g->B * g->Ts, g->C, g->F, g->Cl, g->ws_off, g->ws_n);
    g->wstash = (float**)calloc_check(nstash + 1, sizeof(float*));
    for (int i = 0; i < nstash; i++) g->wstash[i] = gpt_alloc(g, MEM_ACTS, g->nlc * g->wstash_layer);
    if (!pool_init(&g->wpool, nstash + 1)) die("out of memory for the zb-h1 stash pool");
    g->dx = gpt_alloc(g, MEM_ACTS, BT * g->C);
    g->dtmp = gpt_alloc(g, MEM_ACTS, BT * g->C);
    g->dres2 = gpt_alloc(g, MEM_ACTS, BT * g->C);
    g->dqkv = gpt_alloc(g, MEM_ACTS, BT * 3 * g->Cl);
    g->datty = gpt_alloc(g, MEM_ACTS, BT * g->Cl);
    g->head_t = gpt_alloc(g, MEM_ACTS, BT * g->Cl + 32); // + 32: dot_rows reads past the end
    g->dfch = gpt_alloc(g, MEM_ACTS, BT * g->F);
    g->dfch2 = gpt_alloc(g, MEM_ACTS, BT * g->F);
    if (g->sp) {
        g->gat = gpt_alloc(g, MEM_ACTS, BT * g->C);
        g->gdout = gpt_alloc(g, MEM_ACTS, BT * g->C);
        g->ptmp = gpt_alloc(g, MEM_ACTS, BT * g->C);
        g->sptmp = gpt_alloc(g, MEM_ACTS, BT * g->C);
    }
    if (g->zero) { // the bucket collectives' staging, at its largest (zero.h)
        size_t zs, zr, gcap;
        zero_staging_need(&g->pl, comm->DPC, comm->dpc, comm->chunk, g->zero, nstash > 0, &zs, &zr, &gcap);
        zero_grow_in(&g->zc, &g->zc.send, &g->zc.nsend, zs);
        zero_grow_in(&g->zc, &g->zc.recv, &g->zc.nrecv, zr);
        g->zc.fixed = 1;
        g->zc.bf16 = config_grad_bf16(cfg); // -grad-reduce bf16: NCCL's bf16 sums, emulated
        g->mem[MEM_GRADS] += sizeof(float) * (zs + zr);
    }
    if (cpu_gemm_work_alloc(&g->gemm_work, cpu_gemm_max_threads()) != 0) die("out of memory for the GEMM pack buffers");
    g->gfresh = (unsigned char*)calloc_check((size_t)NUM_PARAM_TENSORS * (g->pl.nlayers > 0 ? g->pl.nlayers : 1), 1);
}

// -zero 3: from whole weights (pl.total), keep this rank's shard and the rest
static void gpt_keep_shard(GPT* g, const float* full) {
    memcpy(g->pmaster, full + g->opt_off, sizeof(float) * g->n_opt);
    for (int t = 0; t < NUM_PARAM_TENSORS; t++)
        if (!zero_layered(t)) memcpy(g->prest + g->roff[t], full + g->pl.offset[t], sizeof(float) * g->pl.numel[t]);
    g->win_l[0] = g->win_l[1] = -1; // gathered weights are stale
    if (g->wq[0].pending || g->wq[1].pending) die("internal: -zero 3: weights replaced while a gather is in flight");
}

static void gpt_free(GPT* g) {
    if (g->gshard != g->grads) free(g->gshard);
    free(g->params);
    free(g->grads);
    if (g->zero >= 3) free(g->pmaster);
    free(g->prest);
    free(g->pwin[0]);
    free(g->pwin[1]);
    zero_gather_free(&g->wq[0]);
    zero_gather_free(&g->wq[1]);
    free(g->glayer);
    free(g->grest);
    free(g->sq);
    zero_comm_free(&g->zc);
    free(g->pos);
    free(g->in_full);
    free(g->tg_full);
    for (int i = 0; i < 4; i++) free(g->cpbuf[i]);
    free(g->cpD);
    free(g->m);
    free(g->v);
    for (int s = 0; s < g->nslots; s++) acts_free(&g->acts[s]);
    free(g->acts);
    free(g->slot_unit);
    for (int i = 0; i < g->nstash; i++) free(g->wstash[i]);
    free(g->wstash);
    pool_free(&g->wpool);
    free(g->att_shared);
    free(g->atty_re);
    free(g->dx);
    free(g->dtmp);
    free(g->dres2);
    free(g->dqkv);
    free(g->datty);
    free(g->head_t);
    free(g->dfch);
    free(g->dfch2);
    free(g->gat);
    free(g->gdout);
    free(g->ptmp);
    free(g->sptmp);
    cpu_gemm_work_free(&g->gemm_work);
    free(g->gfresh);
}

// Tensor t of local layer l (l 0 for the others): in the flat buffers, or under -zero 2/3 in
// the compact ones (a layer's gradients: the one scratch of the layer the backward is at;
// -zero 3, a layer's weights: the window it was gathered into, z3_need)
static float* gpt_param(GPT* g, int t, int l) {
    if (g->zero < 3) return param_ptr(&g->pl, g->params, t, l);
    if (!zero_layered(t)) return g->prest + g->roff[t];
    for (int w = 0; w < 2; w++)
        if (g->win_l[w] == l) return g->pwin[w] + g->loff[t];
    die("internal: -zero 3: the weights of local layer %d are not gathered", l);
    return NULL;
}
static float* gpt_grad(GPT* g, int t, int l) {
    if (g->zero < 2) return param_ptr(&g->pl, g->grads, t, l);
    return zero_layered(t) ? g->glayer + g->loff[t] : g->grest + g->roff[t];
}
#define P(t, l) gpt_param(g, (t), (l))
#define G(t, l) gpt_grad(g, (t), (l))

// Gradients start a step at zero without a sweep over all of them (at 125m that memset
// was ~6% of a step): the weight matrices written by a dW GEMM are overwritten by their
// first GEMM of the step (accumulate off: the same bits as adding to zeros) and added to
// by later micro-batches; only the small tensors are zeroed up front. grads_end zeroes
// whatever the step did not write.
static int grad_by_gemm(int t) {
    return t == PT_WTE || t == PT_QKVW || t == PT_ATTPROJW || t == PT_FCW || t == PT_FCPROJW;
}
static void grads_begin(GPT* g) {
    for (int t = 0; t < NUM_PARAM_TENSORS; t++) {
        if (g->zero >= 2 && zero_layered(t)) continue; // the layer scratch is fresh for each micro-batch
        if (!grad_by_gemm(t)) memset(G(t, 0), 0, sizeof(float) * g->pl.numel[t]);
        for (int l = 0; l < g->pl.nl[t]; l++) g->gfresh[t * g->pl.nlayers + l] = grad_by_gemm(t);
    }
    if (g->zero) memset(g->gshard, 0, sizeof(float) * g->n_opt); // the buckets add into it
}
// 1 when tensor t, local layer l has not been written yet this step; marks it written
// (-zero 2/3: a layer's gradients are fresh in every backward, the scratch reduced after it)
static int grad_first(GPT* g, int t, int l) {
    if (g->zero >= 2 && zero_layered(t)) return 1;
    unsigned char* f = &g->gfresh[t * g->pl.nlayers + l];
    int first = *f;
    *f = 0;
    return first;
}
static void grads_end(GPT* g) {
    for (int t = 0; t < NUM_PARAM_TENSORS; t++)
        for (int l = 0; l < g->pl.nl[t] && !(g->zero >= 2 && zero_layered(t)); l++)
            if (grad_first(g, t, l)) memset(G(t, l), 0, sizeof(float) * g->pl.rows[t] * g->pl.cols[t]);
}

// Sum of squares of n floats: fixed-size chunks summed in order, deterministic.
static double slice_sumsq(const float* gp0, size_t n0) {
    const size_t CH = 1 << 16;
    size_t nch = (n0 + CH - 1) / CH;
    if (nch == 0) return 0.0;
    double* part = (double*)malloc_check(sizeof(double) * nch);
#pragma omp parallel for schedule(static)
    for (size_t c = 0; c < nch; c++) {
        // 8 interleaved partial sums (element i into sum i % 8), added up in order at the
        // end: the same fixed order whatever the threads, and the loop vectorizes (a
        // single running sum waited on every add: ~3% of a 125m step)
        const float* gp = gp0 + c * CH;
        size_t n = n0 - c * CH < CH ? n0 - c * CH : CH, i = 0;
        double acc[8] = {0, 0, 0, 0, 0, 0, 0, 0};
        // 2 KiB ahead: a read-only stream from memory otherwise waits on every line
        // (125m: 17-19 ms -> 14-16 ms for 496 MB); the sums are the same
        for (; i + 64 <= n; i += 64) {
            CPU_PREFETCH(gp + i + 512);
            CPU_PREFETCH(gp + i + 528);
            CPU_PREFETCH(gp + i + 544);
            CPU_PREFETCH(gp + i + 560);
            for (int u = 0; u < 64; u += 8)
                for (int j = 0; j < 8; j++) acc[j] += (double)gp[i + u + j] * gp[i + u + j];
        }
        for (; i + 8 <= n; i += 8)
            for (int j = 0; j < 8; j++) acc[j] += (double)gp[i + j] * gp[i + j];
        for (; i < n; i++) acc[i % 8] += (double)gp[i] * gp[i];
        double sum = 0.0;
        for (int j = 0; j < 8; j++) sum += acc[j];
        part[c] = sum;
    }
    double total = 0.0;
    for (size_t c = 0; c < nch; c++) total += part[c];
    free(part);
    return total;
}

// Does this rank count tensor t in the global norm? Every unique parameter once:
// TP-replicated tensors only on TP rank 0, the tied embedding only on the first stage (the
// last stage holds the same, all-reduced, gradient).
static int norm_counts(const GPT* g, int t) {
    if (PARAM_INFO[t].split == SPLIT_NONE && g->pl.tp != 0) return 0;
    return !(t == PT_WTE && g->pl.PP > 1 && !is_first_stage(g));
}

// -zero 3: the weights of local layer l into a window (zero.h): gathered from their owners
// now, unless a window holds them already. A layer in use is never replaced: at most two are
// held, the one computing and the next (z3_prefetch).
static void z3_need(GPT* g, Comm* comm, int l) {
    if (g->zero < 3) return;
    for (int w = 0; w < 2; w++)
        if (g->win_l[w] == l) {
            dp_gather_finish(comm, &g->wq[w]); // a prefetch: wait for it
            return;
        }
    int w = g->win_l[0] < 0 ? 0 : (g->win_l[1] < 0 ? 1 : 0);
    dp_gather_finish(comm, &g->wq[w]); // a prefetch nobody used: its collective completes everywhere
    ZeroBucket b;
    zero_layer_bucket(&g->pl, l, ZB_ALL, 0, &b);
    dp_gather_bucket(comm, &g->zc, &b, g->pl.total, g->pmaster, g->pwin[w]);
    g->win_l[w] = l;
}
// ... and starts gathering the next layer's into the other window while layer cur computes
static void z3_prefetch(GPT* g, Comm* comm, int l, int cur) {
    if (g->zero < 3) return;
    for (int w = 0; w < 2; w++)
        if (g->win_l[w] == l) return;
    int w = g->win_l[0] == cur ? 1 : 0;
    dp_gather_finish(comm, &g->wq[w]);
    ZeroBucket b;
    zero_layer_bucket(&g->pl, l, ZB_ALL, 0, &b);
    dp_gather_start(comm, &g->zc, &g->wq[w], &b, g->pl.total, g->pmaster, g->pwin[w]);
    g->win_l[w] = l;
}
static void z3_release(GPT* g, int l) {
    for (int w = 0; w < 2 && g->zero >= 3; w++)
        if (g->win_l[w] == l) g->win_l[w] = -1;
}

// -zero 2/3, before layer l's backward (part: ZB_ALL, or zb-h1's B): the scratch's summed
// tensors (biases, LayerNorms) start at zero; the GEMMs overwrite the weight matrices
static void zero_layer_begin(GPT* g) {
    for (int t = 0; t < NUM_PARAM_TENSORS && g->zero >= 2; t++)
        if (zero_layered(t) && !zero_weight_matrix(t) && g->pl.nl[t] > 0)
            memset(g->glayer + g->loff[t], 0, sizeof(float) * g->pl.rows[t] * g->pl.cols[t]);
}
// -zero 2/3, after it: this micro-batch's gradients of layer l (part) from the scratch into
// the owners' shards (with -sp the LayerNorms' first summed over TP, as sp_reduce_ln_grads)
static void zero_layer_reduce(GPT* g, Comm* comm, int l, int part) {
    static const int LN[] = {PT_LN1W, PT_LN1B, PT_LN2W, PT_LN2B};
    if (g->zero < 2) return;
    for (int i = 0; i < 4 && g->sp && part != ZB_W_PART; i++)
        tp_allreduce_sum(comm, g->glayer + g->loff[LN[i]], (size_t)g->pl.rows[LN[i]] * g->pl.cols[LN[i]]);
    for (int t = 0; t < NUM_PARAM_TENSORS && g->sq_on; t++) // the noise scale's local norm (one micro-batch)
        if (zero_layered(t) && g->pl.nl[t] > 0 && norm_counts(g, t) &&
            (part == ZB_ALL || zero_weight_matrix(t) == (part == ZB_W_PART)))
            g->sq[t * g->pl.nlayers + l] = slice_sumsq(g->glayer + g->loff[t], (size_t)g->pl.rows[t] * g->pl.cols[t]);
    ZeroBucket b;
    zero_layer_bucket(&g->pl, l, part, 0, &b);
    dp_reduce_scatter_bucket(comm, &g->zc, &b, g->pl.total, g->glayer, g->gshard);
}

// Sequence parallelism in three helpers; without it they are the plain TP code path.
// The input of a column-parallel GEMM: this rank's rows, all-gathered along the sequence.
static const float* gather_seq(GPT* g, Comm* comm, const float* shard, float* full) {
    if (!g->sp) return shard;
    sp_allgather(comm, full, shard, g->B, g->Ts, g->C, g->sptmp);
    return full;
}
// Where a row-parallel GEMM writes its partial sums (B,T,C): in place, or a full buffer
// that reduce_seq then reduce-scatters into the shard `out`.
static float* rowpar_out(GPT* g, float* out) { return g->sp ? g->ptmp : out; }
static void reduce_seq(GPT* g, Comm* comm, float* partial, float* out) {
    if (!g->sp)
        tp_allreduce_sum(comm, out, (size_t)g->B * g->T * g->C);
    else
        sp_reduce_scatter(comm, out, partial, g->B, g->Ts, g->C, g->sptmp);
}

// x (B,Ts,C) = wte[tokens] + wpe[t], vocab-parallel: each TP rank adds the rows it owns
static void embedding_forward(GPT* g, Comm* comm, float* x, const int* tokens) {
    int BT = g->B * g->T, BTs = g->B * g->Ts, C = g->C;
    const float* wte = P(PT_WTE, 0);
    float* xe = rowpar_out(g, x);
#pragma omp parallel for schedule(static)
    for (int n = 0; n < BT; n++) {
        int tok = tokens[n] - g->v0;
        float* o = xe + (size_t)n * C;
        if (tok >= 0 && tok < g->Vl)
            memcpy(o, wte + (size_t)tok * C, sizeof(float) * C);
        else
            memset(o, 0, sizeof(float) * C);
    }
    reduce_seq(g, comm, xe, x);
    const float* wpe = P(PT_WPE, 0);
#pragma omp parallel for schedule(static)
    for (int n = 0; n < BTs; n++) {
        const float* pe = wpe + (size_t)g->pos[g->t0 + n % g->Ts] * C;
        float* o = x + (size_t)n * C;
        for (int i = 0; i < C; i++) o[i] += pe[i];
    }
}

// parallel over channels so that repeated tokens never race; rows summed in order.
// dx (B,T,C): the full-sequence gradient.
static void embedding_backward(GPT* g, const float* dx, const int* tokens) {
    int B = g->B, T = g->T, C = g->C;
    float* dwte = G(PT_WTE, 0);
    float* dwpe = G(PT_WPE, 0);
    if (grad_first(g, PT_WTE, 0)) memset(dwte, 0, sizeof(float) * g->Vl * C); // no head on this rank
#pragma omp parallel for schedule(static)
    for (int i = 0; i < C; i++) {
        for (int n = 0; n < B * T; n++) {
            int tok = tokens[n] - g->v0;
            if (tok >= 0 && tok < g->Vl) dwte[(size_t)tok * C + i] += dx[(size_t)n * C + i];
        }
        for (int t = 0; t < T; t++) {
            float s = 0.0f;
            for (int b = 0; b < B; b++) s += dx[((size_t)b * T + t) * C + i];
            dwpe[(size_t)g->pos[t] * C + i] += s;
        }
    }
}

// -cp > 1: the attention of layer activations la over the CP ring (cp_block_forward): each
// block's transfer to the next rank runs while this rank computes with it.
static void cp_attention_forward(GPT* g, Comm* comm, LayerActs* la) {
    int B = g->B, T = g->T, Cl = g->Cl, C3 = 3 * Cl, C2 = 2 * Cl;
    float *cur = g->cpbuf[0], *nxt = g->cpbuf[1];
    for (size_t n = 0; n < (size_t)B * T; n++) memcpy(cur + n * C2, la->qkv + n * C3 + Cl, sizeof(float) * C2);
    for (int s = 0; s < g->CP; s++) {
        int j = (g->cp - s + g->CP) % g->CP;
        CpRing ring;
        ring.nreq = 0;
        if (s + 1 < g->CP) cp_ring_start(comm, &ring, cur, nxt, (size_t)B * T * C2, 10);
        cp_block_forward(la->atty, la->lse, la->qkv, cur, B, T, g->NH, g->hs, g->Tch, g->cp, j, s == 0);
        cp_ring_wait(comm, &ring);
        float* tmp = cur;
        cur = nxt;
        nxt = tmp;
    }
}

// -cp > 1: the attention's backward: dout (B,T,Cl) -> dqkv (B,T,3Cl). The keys and values go
// around the ring again (their transfer overlapping the compute) with the partial dK|dV of
// each block, which ends at its owner after one more step.
static void cp_attention_backward(GPT* g, Comm* comm, LayerActs* la, const float* dout) {
    int B = g->B, T = g->T, NH = g->NH, hs = g->hs, Cl = g->Cl, C3 = 3 * Cl, C2 = 2 * Cl;
    size_t BT = (size_t)B * T;
    float *kv = g->cpbuf[0], *kvn = g->cpbuf[1], *dkv = g->cpbuf[2], *dkvn = g->cpbuf[3];
#pragma omp parallel for collapse(2) schedule(static)
    for (int b = 0; b < B; b++)
        for (int h = 0; h < NH; h++)
            for (int i = 0; i < T; i++) {
                const float* o = la->atty + ((size_t)b * T + i) * Cl + h * hs;
                const float* go = dout + ((size_t)b * T + i) * Cl + h * hs;
                float d = 0.0f;
                for (int c = 0; c < hs; c++) d += go[c] * o[c];
                g->cpD[((size_t)b * NH + h) * T + i] = d;
            }
    memset(g->dqkv, 0, sizeof(float) * BT * C3);
    memset(dkv, 0, sizeof(float) * BT * C2);
    for (size_t n = 0; n < BT; n++) memcpy(kv + n * C2, la->qkv + n * C3 + Cl, sizeof(float) * C2);
    for (int s = 0; s < g->CP; s++) {
        int j = (g->cp - s + g->CP) % g->CP;
        CpRing ring;
        ring.nreq = 0;
        if (s + 1 < g->CP) cp_ring_start(comm, &ring, kv, kvn, BT * C2, 11);
        cp_block_backward(g->dqkv, dkv, la->qkv, kv, dout, la->lse, g->cpD, B, T, NH, hs, g->Tch, g->cp, j);
        cp_ring_wait(comm, &ring);
        if (s + 1 < g->CP) { // block j's partial to the next rank, block j-1's from the previous
            cp_ring_start(comm, &ring, dkv, dkvn, BT * C2, 12);
            cp_ring_wait(comm, &ring);
            float* t0 = kv;
            kv = kvn;
            kvn = t0;
            float* t1 = dkv;
            dkv = dkvn;
            dkvn = t1;
        }
    }
    if (g->CP > 1) { // block cp+1 is complete here: to its owner; this rank's own arrives
        CpRing ring;
        cp_ring_start(comm, &ring, dkv, dkvn, BT * C2, 13);
        cp_ring_wait(comm, &ring);
        dkv = dkvn;
    }
    for (size_t n = 0; n < BT; n++) memcpy(g->dqkv + n * C3 + Cl, dkv + n * C2, sizeof(float) * C2);
}

// Forward of layer j of the unit (parameters: local layer l): x[j] -> x[j+1]
static void block_forward(GPT* g, Comm* comm, Acts* a, int j, int l) {
    int B = g->B, T = g->T, C = g->C, Cl = g->Cl, F = g->F, BT = B * T, BTs = B * g->Ts;
    LayerActs* la = layer_acts(g, a, j);
    float* x = a->x + (size_t)j * BTs * C;
    float* y = a->x + (size_t)(j + 1) * BTs * C;
    layernorm_forward(la->ln1, la->ln1_mean, la->ln1_rstd, x, P(PT_LN1W, l), P(PT_LN1B, l), BTs, C);
    const float* ln1 = gather_seq(g, comm, la->ln1, g->gat); // (B,T,C)
    matmul_forward(la->qkv, ln1, P(PT_QKVW, l), P(PT_QKVB, l), BT, C, 3 * Cl, &g->gemm_work);
    if (g->CP > 1)
        cp_attention_forward(g, comm, la);
    else
        attention_forward(la->atty, la->att, g->head_t, la->qkv, B, T, g->NH, g->hs);
    float* po = rowpar_out(g, la->resid2);
    matmul_forward(po, la->atty, P(PT_ATTPROJW, l), NULL, BT, Cl, C, &g->gemm_work); // partial sum
    reduce_seq(g, comm, po, la->resid2);
    const float* ab = P(PT_ATTPROJB, l);
#pragma omp parallel for schedule(static)
    for (int n = 0; n < BTs; n++)
        for (int i = 0; i < C; i++) la->resid2[(size_t)n * C + i] += ab[i] + x[(size_t)n * C + i];
    layernorm_forward(la->ln2, la->ln2_mean, la->ln2_rstd, la->resid2, P(PT_LN2W, l), P(PT_LN2B, l), BTs, C);
    const float* ln2 = gather_seq(g, comm, la->ln2, g->gat);
    matmul_forward(la->fch, ln2, P(PT_FCW, l), P(PT_FCB, l), BT, C, F, &g->gemm_work);
    gelu_forward(la->fch_gelu, la->fch, (size_t)BT * F);
    po = rowpar_out(g, y);
    matmul_forward(po, la->fch_gelu, P(PT_FCPROJW, l), NULL, BT, F, C, &g->gemm_work); // partial sum
    reduce_seq(g, comm, po, y);
    const float* fb = P(PT_FCPROJB, l);
#pragma omp parallel for schedule(static)
    for (int n = 0; n < BTs; n++)
        for (int i = 0; i < C; i++) y[(size_t)n * C + i] += fb[i] + la->resid2[(size_t)n * C + i];
}

// part k (WStashPart) of layer j's W stash in ws, or NULL without one (1F1B)
static float* stash_part(const GPT* g, float* ws, int j, int k) {
    return ws != NULL ? ws + (size_t)j * g->wstash_layer + g->ws_off[k] : NULL;
}
// keep part k of layer j's weight-GEMM inputs / output gradients for W (zb-h1), or nothing (1F1B: ws NULL)
static void stash_copy(const GPT* g, float* ws, int j, int k, const float* src) {
    if (ws != NULL) memcpy(stash_part(g, ws, j, k), src, sizeof(float) * g->ws_n[k]);
}

// Backward of layer j (parameters: local layer l): dout = dL/dx[j+1] (B,Ts,C) -> din =
// dL/dx[j] (may alias dout). With SP the row-parallel biases see the gathered (full)
// gradient, so their gradients are complete; the LayerNorms' are partial (train_step sums them).
// ws: zb-h1's B (the unit's W stash: the weight gradients are left to block_weight), or NULL.
static void block_backward(GPT* g, Comm* comm, Acts* a, int j, int l, const float* dout, float* din, float* ws) {
    int B = g->B, T = g->T, C = g->C, Cl = g->Cl, F = g->F, BT = B * T, BTs = B * g->Ts;
    LayerActs* la = layer_acts(g, a, j);
    float* x = a->x + (size_t)j * BTs * C;
#define DW(t) (ws ? NULL : G(t, l)), (ws ? 0 : grad_first(g, t, l)) // the weight gradient now, or in W
    // MLP: y = resid2 + fcproj(gelu(fc(ln2(resid2))))
    const float* dfull = gather_seq(g, comm, dout, g->gdout);
    matmul_backward(g->dfch2, DW(PT_FCPROJW), G(PT_FCPROJB, l), dfull, la->fch_gelu, P(PT_FCPROJW, l), BT, F, C,
                    &g->gemm_work);
    stash_copy(g, ws, j, WS_D_FCPROJ, dout);
    stash_copy(g, ws, j, WS_FCH_GELU, la->fch_gelu);
    gelu_backward(g->dfch, la->fch, g->dfch2, (size_t)BT * F);
    const float* ln2 = gather_seq(g, comm, la->ln2, g->gat); // stored as a shard, gathered again
    float* pd = rowpar_out(g, g->dtmp);
    matmul_backward(pd, DW(PT_FCW), G(PT_FCB, l), g->dfch, ln2, P(PT_FCW, l), BT, C, F, &g->gemm_work);
    stash_copy(g, ws, j, WS_D_FC, g->dfch);
    stash_copy(g, ws, j, WS_LN2, la->ln2);
    reduce_seq(g, comm, pd, g->dtmp); // conjugate of the column-parallel fc1
    memcpy(g->dres2, dout, sizeof(float) * BTs * C);
    layernorm_backward(g->dres2, G(PT_LN2W, l), G(PT_LN2B, l), g->dtmp, la->resid2, P(PT_LN2W, l), la->ln2_mean,
                       la->ln2_rstd, BTs, C);
    // attention: resid2 = x + attproj(attn(qkv(ln1(x))))
    const float* dres2 = gather_seq(g, comm, g->dres2, g->gdout);
    // selective: rebuild the probabilities from the kept qkv (the same deterministic code, so
    // the same bits); atty itself was kept, as the input of the projection GEMM
    if (g->cfg.recompute == RECOMPUTE_SELECTIVE && g->CP == 1)
        attention_forward(g->atty_re, la->att, g->head_t, la->qkv, B, T, g->NH, g->hs);
    matmul_backward(g->datty, DW(PT_ATTPROJW), G(PT_ATTPROJB, l), dres2, la->atty, P(PT_ATTPROJW, l), BT, Cl, C,
                    &g->gemm_work);
    stash_copy(g, ws, j, WS_D_ATTPROJ, g->dres2);
    stash_copy(g, ws, j, WS_ATTY, la->atty);
    if (g->CP > 1)
        cp_attention_backward(g, comm, la, g->datty);
    else
        attention_backward(g->dqkv, g->head_t, g->datty, la->qkv, la->att, B, T, g->NH, g->hs);
    const float* ln1 = gather_seq(g, comm, la->ln1, g->gat);
    pd = rowpar_out(g, g->dtmp);
    matmul_backward(pd, DW(PT_QKVW), G(PT_QKVB, l), g->dqkv, ln1, P(PT_QKVW, l), BT, C, 3 * Cl, &g->gemm_work);
    stash_copy(g, ws, j, WS_D_QKV, g->dqkv);
    stash_copy(g, ws, j, WS_LN1, la->ln1);
#undef DW
    reduce_seq(g, comm, pd, g->dtmp);
    if (din != g->dres2) memcpy(din, g->dres2, sizeof(float) * BTs * C);
    layernorm_backward(din, G(PT_LN1W, l), G(PT_LN1B, l), g->dtmp, x, P(PT_LN1W, l), la->ln1_mean, la->ln1_rstd, BTs,
                       C);
}

// zb-h1's W of layer j: the four weight gradients from the stash, the calls block_backward
// makes without a stash (the same bits). The activation slot is no longer needed.
static void block_weight(GPT* g, Comm* comm, int j, int l, float* ws) {
    int BT = g->B * g->T, C = g->C, Cl = g->Cl, F = g->F;
    const float* dfull = gather_seq(g, comm, stash_part(g, ws, j, WS_D_FCPROJ), g->gdout);
    matmul_backward_weight(G(PT_FCPROJW, l), grad_first(g, PT_FCPROJW, l), dfull, stash_part(g, ws, j, WS_FCH_GELU), BT,
                           F, C, &g->gemm_work);
    const float* ln2 = gather_seq(g, comm, stash_part(g, ws, j, WS_LN2), g->gat);
    matmul_backward_weight(G(PT_FCW, l), grad_first(g, PT_FCW, l), stash_part(g, ws, j, WS_D_FC), ln2, BT, C, F,
                           &g->gemm_work);
    const float* dres2 = gather_seq(g, comm, stash_part(g, ws, j, WS_D_ATTPROJ), g->gdout);
    matmul_backward_weight(G(PT_ATTPROJW, l), grad_first(g, PT_ATTPROJW, l), dres2, stash_part(g, ws, j, WS_ATTY), BT,
                           Cl, C, &g->gemm_work);
    const float* ln1 = gather_seq(g, comm, stash_part(g, ws, j, WS_LN1), g->gat);
    matmul_backward_weight(G(PT_QKVW, l), grad_first(g, PT_QKVW, l), stash_part(g, ws, j, WS_D_QKV), ln1, BT, C, 3 * Cl,
                           &g->gemm_work);
}

// Last stage: final LayerNorm, tied LM head over the local vocabulary slice and the
// vocab-parallel cross-entropy (all-reduces of max, sum-exp and target logit; the logits
// are never gathered). Padded columns are never computed. Returns the sum of token losses.
static double head_forward(GPT* g, Comm* comm, Acts* a) {
    int BT = g->B * g->T, BTs = g->B * g->Ts, C = g->C, Vl = g->Vl, Vv = g->Vv;
    float* xL = a->x + (size_t)g->nlc * BTs * C;
    layernorm_forward(a->lnf, a->lnf_mean, a->lnf_rstd, xL, P(PT_LNFW, 0), P(PT_LNFB, 0), BTs, C);
    const float* lnf = gather_seq(g, comm, a->lnf, g->gat);
    if (Vv > 0)
        matmul_forward(a->logits, lnf, P(PT_WTE, 0), NULL, BT, C, Vv, &g->gemm_work); // (BT, Vv) with row stride Vv
    float* mx = a->losses; // reuse (BT) buffers for the three reductions
    float* se = a->lse;
    float* tl = (float*)malloc_check(sizeof(float) * BT);
#pragma omp parallel for schedule(static)
    for (int n = 0; n < BT; n++) {
        // 16 running maxima, then theirs: a max is exact, so any order gives the same value
        // (NaNs are skipped either way; a zero maximum's sign changes no exp or sum below)
        const float* row = a->logits + (size_t)n * Vv;
        float m16[16], m = -INFINITY;
        for (int j = 0; j < 16; j++) m16[j] = -INFINITY;
        int v = 0;
        for (; v + 16 <= Vv; v += 16)
            for (int j = 0; j < 16; j++) m16[j] = row[v + j] > m16[j] ? row[v + j] : m16[j];
        for (; v < Vv; v++) m = row[v] > m ? row[v] : m;
        for (int j = 0; j < 16; j++) m = m16[j] > m ? m16[j] : m;
        mx[n] = m;
    }
    tp_allreduce_max(comm, mx, BT);
// sum-exp of each row: the exps vectorized a block at a time, summed in order. Four rows
// at a time, so their four in-order sums run as independent chains (one chain waited on
// every add)
#pragma omp parallel for schedule(static)
    for (int n0 = 0; n0 < BT; n0 += 4) {
        int nr = BT - n0 < 4 ? BT - n0 : 4;
        float s[4] = {0.0f, 0.0f, 0.0f, 0.0f}, e[4][1024];
        for (int v0 = 0; v0 < Vv; v0 += 1024) {
            int w = Vv - v0 < 1024 ? Vv - v0 : 1024;
            for (int r = 0; r < nr; r++) {
                const float* row = a->logits + (size_t)(n0 + r) * Vv + v0;
                float m = mx[n0 + r];
                for (int v = 0; v < w; v++) e[r][v] = exp_vec(row[v] - m);
            }
            if (nr == 4)
                for (int v = 0; v < w; v++) {
                    s[0] += e[0][v];
                    s[1] += e[1][v];
                    s[2] += e[2][v];
                    s[3] += e[3][v];
                }
            else
                for (int r = 0; r < nr; r++)
                    for (int v = 0; v < w; v++) s[r] += e[r][v];
        }
        for (int r = 0; r < nr; r++) {
            int n = n0 + r, tgt = a->targets[n] - g->v0;
            se[n] = s[r];
            tl[n] = (tgt >= 0 && tgt < Vv) ? a->logits[(size_t)n * Vv + tgt] : 0.0f;
        }
    }
    tp_allreduce_sum(comm, se, BT);
    tp_allreduce_sum(comm, tl, BT);
    double sum = 0.0;
    for (int n = 0; n < BT; n++) {
        float lse = mx[n] + logf(se[n]);
        float loss = lse - tl[n];
        a->lse[n] = lse;
        a->losses[n] = loss;
        sum += loss;
    }
    free(tl);
    (void)Vl;
    return sum;
}


// The tied LM head's weight gradient from the kept dlogits and final LayerNorm output.
static void head_weight(GPT* g, Comm* comm, Acts* a) {
    int BT = g->B * g->T, C = g->C, Vv = g->Vv;
    // every TP rank gathers, also one whose vocabulary slice is all padding (Vv = 0): which
    // collectives a rank calls never depends on its share of the data
    const float* lnf = gather_seq(g, comm, a->lnf, g->gat);
    if (Vv == 0) return;
    int first = grad_first(g, PT_WTE, 0);
    if (first)
        memset(G(PT_WTE, 0) + (size_t)Vv * C, 0, sizeof(float) * (g->Vl - Vv) * C); // padded rows: the GEMM writes Vv
    matmul_backward_weight(G(PT_WTE, 0), first, a->logits, lnf, BT, C, Vv, &g->gemm_work);
}

// dloss: gradient of the total loss w.r.t. each token's loss (1/(global batch tokens)).
// Writes dL/dx[nl] (B,Ts,C) into g->dx.
static void head_backward(GPT* g, Comm* comm, Acts* a, float dloss) {
    int BT = g->B * g->T, BTs = g->B * g->Ts, C = g->C, Vv = g->Vv;
    float* xL = a->x + (size_t)g->nlc * BTs * C;
#pragma omp parallel for schedule(static)
    for (int n = 0; n < BT; n++) {
        float* row = a->logits + (size_t)n * Vv;
        float lse = a->lse[n];
        int tgt = a->targets[n] - g->v0;
        for (int v = 0; v < Vv; v++) row[v] = (exp_vec(row[v] - lse) - (v == tgt ? 1.0f : 0.0f)) * dloss;
    }
    float* pd = rowpar_out(g, g->dtmp);
    head_weight(g, comm, a);
    if (Vv > 0) {
        matmul_backward(pd, NULL, 0, NULL, a->logits, NULL, P(PT_WTE, 0), BT, C, Vv, &g->gemm_work);
    } else {
        memset(pd, 0, sizeof(float) * BT * C);
    }
    reduce_seq(g, comm, pd, g->dtmp);
    memset(g->dx, 0, sizeof(float) * BTs * C);
    layernorm_backward(g->dx, G(PT_LNFW, 0), G(PT_LNFB, 0), g->dtmp, xL, P(PT_LNFW, 0), a->lnf_mean, a->lnf_rstd, BTs,
                       C);
}

// Forward of chunk c of this rank for the unit in slot a (inputs/targets already loaded).
// The first virtual stage embeds; others expect x[0] filled from the previous one.
// Returns the sum of token losses on the last virtual stage, 0 elsewhere.
static double gpt_forward(GPT* g, Comm* comm, Acts* a, int c) {
    if (is_first_chunk(g, c)) embedding_forward(g, comm, a->x, a->inputs);
    for (int j = 0; j < g->nlc; j++) {
        int l = c * g->nlc + j;
        z3_need(g, comm, l);
        if (j + 1 < g->nlc) z3_prefetch(g, comm, l + 1, l);
        block_forward(g, comm, a, j, l);
        z3_release(g, l);
    }
    return is_last_chunk(g, c) ? head_forward(g, comm, a) : 0.0;
}

// Backward of chunk c. On the last virtual stage dloss scales the loss; elsewhere g->dx
// must hold dL/d(chunk output). Leaves dL/d(chunk input) in g->dx; gradients accumulate.
// ws: zb-h1's B, which leaves the weight GEMMs to gpt_weight (the unit's stash), or NULL.
static void gpt_backward(GPT* g, Comm* comm, Acts* a, int c, float dloss, float* ws) {
    if (is_last_chunk(g, c)) head_backward(g, comm, a, dloss);
    for (int j = g->nlc - 1; j >= 0; j--) {
        int l = c * g->nlc + j;
        z3_need(g, comm, l);
        if (j > 0) z3_prefetch(g, comm, l - 1, l);
        if (g->cfg.recompute == RECOMPUTE_FULL) block_forward(g, comm, a, j, l); // rebuild this layer's activations
        zero_layer_begin(g);
        block_backward(g, comm, a, j, l, g->dx, g->dx, ws);
        zero_layer_reduce(g, comm, l, ws ? ZB_B_PART : ZB_ALL);
        z3_release(g, l);
    }
    if (is_first_chunk(g, c)) embedding_backward(g, gather_seq(g, comm, g->dx, g->gdout), a->inputs);
}

// zb-h1's W of chunk c: the weight gradients gpt_backward left in the stash ws.
static void gpt_weight(GPT* g, Comm* comm, int c, float* ws) {
    for (int j = g->nlc - 1; j >= 0; j--) {
        block_weight(g, comm, j, c * g->nlc + j, ws);
        zero_layer_reduce(g, comm, c * g->nlc + j, ZB_W_PART);
    }
}

// -sp: the LayerNorm gradients of each rank cover its sequence shard only; sum them over TP
static void sp_reduce_ln_grads(GPT* g, Comm* comm) {
    static const int LN[] = {PT_LN1W, PT_LN1B, PT_LN2W, PT_LN2B, PT_LNFW, PT_LNFB};
    if (!g->sp) return;
    for (int i = 0; i < 6; i++) // -zero 2/3: a layer's were summed with its bucket (zero_layer_reduce)
        if (g->pl.numel[LN[i]] > 0 && !(g->zero >= 2 && zero_layered(LN[i])))
            tp_allreduce_sum(comm, G(LN[i], 0), g->pl.numel[LN[i]]);
}
// Sum of squared gradients over flat elements [lo, hi) (grads[i - lo]) of the tensors this
// rank counts (norm_counts), tensor by tensor, each layer's slice on its own (so -zero 2,
// which sees a layer's gradients one at a time, sums in the same order). Summed over every
// rank of the job this is the squared global norm.
static double gpt_grad_sumsq(const GPT* g, const float* grads, size_t lo, size_t hi) {
    double total = 0.0;
    for (int t = 0; t < NUM_PARAM_TENSORS; t++) {
        if (!norm_counts(g, t)) continue;
        size_t per = g->pl.nl[t] > 0 ? g->pl.numel[t] / g->pl.nl[t] : 0;
        for (int l = 0; l < g->pl.nl[t]; l++) {
            size_t a = g->pl.offset[t] + (size_t)l * per, b = a + per;
            if (a < lo) a = lo;
            if (b > hi) b = hi;
            if (a < b) total += slice_sumsq(grads + (a - lo), b - a);
        }
    }
    return total;
}

// AdamW on flat elements [opt_off, opt_off + n_opt) (bias-corrected, decoupled weight decay
// only where the table says so): pmaster[j] and grads[j] are the weight and the gradient of
// element opt_off + j, the gradient pre-scaled by gscale (the clipping factor).
static void gpt_adamw(GPT* g, float* pmaster, const float* grads, double lr, int64_t t, float gscale) {
    const Config* c = &g->cfg;
    float b1 = (float)c->beta1, b2 = (float)c->beta2, eps = (float)c->eps;
    float bc1 = (float)(1.0 - pow(c->beta1, (double)t)), bc2 = (float)(1.0 - pow(c->beta2, (double)t));
    size_t lo = g->opt_off, hi = g->opt_off + g->n_opt;
    for (int tn = 0; tn < NUM_PARAM_TENSORS; tn++) {
        size_t a = g->pl.offset[tn], b = a + g->pl.numel[tn];
        if (a < lo) a = lo;
        if (b > hi) b = hi;
        if (a >= b) continue;
        float wd = PARAM_INFO[tn].decay ? (float)c->wd : 0.0f;
        float flr = (float)lr;
        // distinct buffers, element-wise: restrict lets the loop use vector divides and
        // square roots (IEEE-exact like the scalar ones, so the bits do not change)
        float* restrict pp = pmaster + (a - lo);
        float* restrict pm = g->m + (a - lo);
        float* restrict pv = g->v + (a - lo);
        const float* restrict pg = grads + (a - lo);
        size_t n = b - a;
// a line (16 floats) at a time, each of the four streams prefetched 2 KiB ahead: the
// loop is memory-bound, and the hardware prefetcher alone left it at ~70 ms for the
// 125m bench's 124M parameters (~59 ms with this; the arithmetic is the same)
#pragma omp parallel for schedule(static)
        for (size_t i0 = 0; i0 < n; i0 += 16) {
            CPU_PREFETCH(pp + i0 + 512);
            CPU_PREFETCH(pm + i0 + 512);
            CPU_PREFETCH(pv + i0 + 512);
            CPU_PREFETCH(pg + i0 + 512);
            size_t ie = i0 + 16 < n ? i0 + 16 : n;
#pragma omp simd
            for (size_t i = i0; i < ie; i++) {
                float gr = pg[i] * gscale;
                float m = b1 * pm[i] + (1.0f - b1) * gr;
                float v = b2 * pv[i] + (1.0f - b2) * gr * gr;
                pm[i] = m;
                pv[i] = v;
                float mhat = m / bc1, vhat = v / bc2;
                pp[i] -= flr * (mhat / (sqrtf(vhat) + eps) + wd * pp[i]);
            }
        }
    }
}

#undef P
#undef G

// ----------------------------------------------------------------------------------------
// training context

typedef struct {
    Run run; // recipe progress, data, log and instruments, shared with the CUDA trainer (llmc/host/run.h)
    GPT model;
} Train;

// Runs this rank's part of m micro-batches through the pipeline: 1F1B, or interleaved
// 1F1B with -vpp (forward_only: the evaluation schedule). load(k) fills the inputs/targets
// of micro-batch k where the first or last virtual stage needs them. Returns the sum of
// token losses (last stage, else 0).
typedef void (*LoadFn)(Train* t, Acts* a, int k, void* user);

// The activation slot of unit (chunk c, micro-batch k): 1F1B uses k % PP; interleaved
// units take the lowest free slot on first touch and give it back after their backward
// (pipe_slots bounds how many are held at once).
static Acts* unit_slot(GPT* g, int c, int k) {
    if (g->nchunk == 1) return &g->acts[k % g->nslots];
    int unit = k * g->nchunk + c, free_slot = -1;
    for (int s = 0; s < g->nslots; s++) {
        if (g->slot_unit[s] == unit) return &g->acts[s];
        if (g->slot_unit[s] < 0 && free_slot < 0) free_slot = s;
    }
    if (free_slot < 0) die("internal: more pipeline units in flight than activation slots (%d)", g->nslots);
    g->slot_unit[free_slot] = unit;
    return &g->acts[free_slot];
}
static void unit_release(GPT* g, int c, int k) {
    for (int s = 0; s < g->nslots && g->nchunk > 1; s++)
        if (g->slot_unit[s] == k * g->nchunk + c) g->slot_unit[s] = -1;
}
// zb-h1: the W stash of unit (c, k), taken at its B and given back after its W
static float* unit_stash(GPT* g, int c, int k) {
    int i = pool_get(&g->wpool, k * g->nchunk + c);
    if (i < 0 || i >= g->nstash) die("internal: more units wait for their W than W stashes (%d)", g->nstash);
    return g->wstash[i];
}

static double pipe_execute(Train* t, int m, int forward_only, float dloss, LoadFn load, void* user) {
    GPT* g = &t->model;
    Comm* comm = &t->run.comm;
    size_t nact = (size_t)g->B * g->Ts * g->C; // with -sp only this rank's sequence shard travels
    int n;
    Action* plan = pipe_schedule(g->zb, comm->pp, comm->PP, g->nchunk, m, forward_only, &n);
    if (plan == NULL) die("out of memory for the pipeline schedule");
    double loss_sum = 0.0;
    for (int i = 0; i < n; i++) {
        int k = plan[i].micro, c = plan[i].chunk, peer, tag;
        comm->trace.micro = k; // the watchdog's report says which micro-batch a rank waits in
        pipe_peer(&plan[i], comm->pp, comm->PP, g->nchunk, &peer, &tag);
        ActionKind kind = plan[i].kind;
        // gradients travel in g->dx; a W reads its stash only
        Acts* a = (kind == ACT_RECV_GRAD || kind == ACT_SEND_GRAD || kind == ACT_WEIGHT) ? NULL : unit_slot(g, c, k);
        float* xout = a ? a->x + (size_t)g->nlc * nact : NULL;
        switch (kind) {
            case ACT_RECV_ACT:
                pp_recv(comm, a->x, nact, peer, tag);
                break;
            case ACT_FORWARD:
                if (is_first_chunk(g, c) || is_last_chunk(g, c)) load(t, a, k, user);
                loss_sum += gpt_forward(g, comm, a, c);
                if (forward_only && is_last_chunk(g, c)) unit_release(g, c, k);
                break;
            case ACT_SEND_ACT:
                pp_send(comm, xout, nact, peer, tag); // copies: the slot may be reused at once
                if (forward_only) unit_release(g, c, k);
                break;
            case ACT_RECV_GRAD:
                pp_recv(comm, g->dx, nact, peer, tag);
                break;
            case ACT_BACKWARD:
                gpt_backward(g, comm, a, c, dloss, g->zb ? unit_stash(g, c, k) : NULL);
                unit_release(g, c, k);
                break;
            case ACT_WEIGHT: // zb-h1: the unit's stash is free after its W
                gpt_weight(g, comm, c, unit_stash(g, c, k));
                pool_release(&g->wpool, k * g->nchunk + c, 0);
                break;
            case ACT_SEND_GRAD:
                pp_send(comm, g->dx, nact, peer, tag);
                break;
        }
    }
    comm->trace.micro = -1;
    pp_flush(comm);
    free(plan);
    return loss_sum;
}

typedef struct {
    int64_t first;
    int64_t gb;
    DataSet* ds;
} BatchRef;

// -cp > 1: this rank's rows (g->pos) of a micro-batch's (B, Tfull) tokens
static void cp_take_rows(const GPT* g, int* dst, const int* full) {
    for (int b = 0; b < g->B; b++)
        for (int t = 0; t < g->T; t++) dst[b * g->T + t] = full[(size_t)b * g->Tfull + g->pos[t]];
}

static void load_train_micro(Train* t, Acts* a, int k, void* user) {
    const BatchRef* br = (const BatchRef*)user;
    GPT* g = &t->model;
    int64_t first = microbatch_first_sample(br->first, br->gb, t->run.comm.DP, t->run.comm.dp, t->run.cfg.mb, k);
    if (g->CP == 1) {
        dataset_load_microbatch(br->ds, first, t->run.cfg.mb, a->inputs, a->targets);
        return;
    }
    dataset_load_microbatch(br->ds, first, t->run.cfg.mb, g->in_full, g->tg_full); // every CP rank reads it
    cp_take_rows(g, a->inputs, g->in_full);
    cp_take_rows(g, a->targets, g->tg_full);
}

// One optimizer step on the global batch starting at run sample t->run.samples:
// micro-batches through the pipeline, gradient reductions (tied embedding over the
// embedding group, then data parallel: all-reduce, or reduce-scatter into this rank's
// shard under ZeRO-1; loss scaling already divides by the global batch, so both sum),
// noise scale, global norm, spike guard, clipping, AdamW (on the shard), all-gather.
static StepResult train_step(Train* t) {
    GPT* g = &t->model;
    Comm* comm = &t->run.comm;
    const Config* c = &t->run.cfg;
    StepResult r = run_step_plan(&t->run); // batch, LR, micro-batches from the recipe
    float dloss = (float)(1.0 / ((double)r.gb * c->seq));
    grads_begin(g);
    // -zero 2/3 see a replica's whole gradient with one micro-batch (and no CP: a CP rank's is a part of it)
    g->sq_on = g->zero >= 2 && comm->DP > 1 && comm->CP == 1 && r.micro == 1;
    BatchRef br = {t->run.samples, r.gb, &t->run.train};
    double loss_sum = pipe_execute(t, r.micro, 0, dloss, load_train_micro, &br);
    grads_end(g);
    sp_reduce_ln_grads(g, comm);
    // the loss lives on the last stage's TP ranks (all equal): count TP rank 0 of each replica
    r.loss = world_sum(comm, (is_last_stage(g) && comm->tp == 0) ? loss_sum : 0.0) / ((double)r.gb * c->seq);
    if (is_first_stage(g) || is_last_stage(g)) emb_allreduce_sum(comm, gpt_grad(g, PT_WTE, 0), g->pl.numel[PT_WTE]);
    // |G_small|^2: each replica's squared norm before the DP reduction (mean over replicas).
    // -zero 2/3 hold a replica's whole gradient only with one micro-batch per step, a layer at
    // a time (g->sq, the same order); else NaN: no noise-scale estimate this step
    double small_sumsq = 0.0;
    if (comm->DP > 1 && comm->CP > 1)
        small_sumsq = NAN; // a replica's gradient is the sum of its CP ranks': never whole on one
    else if (comm->DP > 1 && g->zero < 2)
        small_sumsq = world_sum(comm, gpt_grad_sumsq(g, g->grads, 0, g->pl.total)) / comm->DP;
    else if (comm->DP > 1 && g->sq_on) {
        double local = 0.0;
        for (int tn = 0; tn < NUM_PARAM_TENSORS; tn++) {
            if (!norm_counts(g, tn)) continue;
            if (!zero_layered(tn) && g->pl.numel[tn] > 0) local += slice_sumsq(g->grest + g->roff[tn], g->pl.numel[tn]);
            for (int l = 0; l < g->pl.nl[tn] && zero_layered(tn); l++) local += g->sq[tn * g->pl.nlayers + l];
        }
        small_sumsq = world_sum(comm, local) / comm->DP;
    } else if (comm->DP > 1)
        small_sumsq = NAN;
    ZeroBucket rb;
    if (g->zero >= 2) { // the layers' buckets were reduced during the backward; the rest now
        zero_rest_bucket(&g->pl, 0, &rb);
        dp_reduce_scatter_bucket(comm, &g->zc, &rb, g->pl.total, g->grest, g->gshard);
    } else if (g->zero) { // ZeRO-1: the whole buffer, a bucket at a time (the same sums: zero.h)
        for (int l = -1; l < g->pl.nlayers; l++) {
            if (l < 0)
                zero_rest_bucket(&g->pl, 1, &rb);
            else
                zero_layer_bucket(&g->pl, l, ZB_ALL, 1, &rb);
            dp_reduce_scatter_bucket(comm, &g->zc, &rb, g->pl.total, g->grads, g->gshard);
        }
    } else
        dp_allreduce_sum(comm, g->grads, g->pl.total);
    // each unique parameter once: without ZeRO the DP replicas hold equal gradients (count DP rank 0)
    double sumsq = (g->zero || comm->dpc == 0) ? gpt_grad_sumsq(g, g->gshard, g->opt_off, g->opt_off + g->n_opt) : 0.0;
    r.gnorm = sqrt(world_sum(comm, sumsq));
    // noise scale and spike guard: every rank sees the same global loss and norm, so every
    // rank takes the same decision
    float gscale = run_step_judge(&t->run, &r, small_sumsq);
    if (r.skip == SKIP_NONE) {
        gpt_adamw(g, g->pmaster, g->gshard + (g->zero ? 0 : g->opt_off), r.lr, t->run.adam_t, gscale);
        if (g->zero == 1 || g->zero == 2) dp_allgather(comm, g->params, g->pl.total); // every DP rank updated its shard
        if (g->zero == 3) {                                                           // the rest, whole again
            zero_rest_bucket(&g->pl, 0, &rb);
            dp_gather_bucket(comm, &g->zc, &rb, g->pl.total, g->pmaster, g->prest);
            g->win_l[0] = g->win_l[1] = -1; // gathered before the update
        }
    }
    run_step_done(&t->run, &r); // a skipped step still consumes its batch
    return r;
}

// Mean loss over the first val_samples samples of the validation stream (in order).
static double evaluate(Train* t, DataSet* val) {
    int64_t n = run_val_samples(&t->run, val);
    BatchRef br = {0, n, val};
    double sum = pipe_execute(t, (int)(n / ((int64_t)t->run.cfg.mb * t->run.comm.DP)), 1, 0.0f, load_train_micro, &br);
    return world_sum(&t->run.comm, (is_last_stage(&t->model) && t->run.comm.tp == 0) ? sum : 0.0) /
           ((double)n * t->run.cfg.seq);
}

// user: the (B, Tfull) tokens
static void load_sample_micro(Train* t, Acts* a, int k, void* user) {
    (void)k;
    if (t->model.CP > 1)
        cp_take_rows(&t->model, a->inputs, (const int*)user);
    else
        memcpy(a->inputs, user, sizeof(int) * t->model.B * t->model.T);
    memset(a->targets, 0, sizeof(int) * t->model.B * t->model.T);
}

// Row (b, pos) of the last stage's logits, this TP rank's Vv columns at v0 of row (Vp):
// -cp > 1, from the CP rank that holds position pos (summed over the CP group: the others
// give zeros). Every last-stage rank of the CP group calls it for the same row.
static void logits_row(Train* t, int b, int pos, float* row) {
    GPT* g = &t->model;
    memset(row, 0, sizeof(float) * g->cfg.Vp);
    int local = -1;
    for (int i = 0; i < g->T && local < 0; i++)
        if (g->pos[i] == pos) local = i;
    if (local >= 0) memcpy(row + g->v0, g->acts[0].logits + ((size_t)b * g->T + local) * g->Vv, sizeof(float) * g->Vv);
    cp_allreduce_sum(&t->run.comm, row, g->cfg.Vp);
}

// Generates sample_len tokens after an <|endoftext|>, sampling from the softmax. Every
// rank takes part (the pipeline runs forward); the sampler rank prints.
static void sample_text(Train* t, FILE* out) {
    GPT* g = &t->model;
    const Config* c = &t->run.cfg;
    int Tf = g->Tfull; // the whole sequence (-cp: each CP rank runs its rows of it)
    int* tokens = (int*)malloc_check(sizeof(int) * g->B * Tf);
    for (int i = 0; i < g->B * Tf; i++) tokens[i] = run_sample_start(&t->run);
    int n0 = run_sample_prompt(&t->run, tokens, Tf); // -prompt ids or <|endoftext|>
    float* row = (float*)malloc_check(sizeof(float) * c->Vp);
    if (t->run.comm.rank == run_sampler_rank(&t->run)) fprintf(out, "sample: ");
    for (int pos = n0; pos < n0 + c->sample_len && pos < Tf; pos++) {
        pipe_execute(t, 1, 1, 0.0f, load_sample_micro, tokens);
        if (is_last_stage(g)) logits_row(t, 0, pos - 1, row); // this TP rank's Vv columns of the row at pos-1
        tokens[pos] = run_sample_next(&t->run, row, is_last_stage(g));
        run_sample_print(&t->run, out, tokens[pos]);
    }
    int n = n0 + c->sample_len < Tf ? n0 + c->sample_len : Tf;
    run_sample_end(&t->run, out, tokens, n0, n);
    free(tokens);
    free(row);
}

// the cloze evaluation's hooks (llmc/host/eval.h): a forward of a (B, T) token batch, and a
// logits row of the last stage at this TP rank's vocabulary offset
static void eval_forward(void* self, const int* tokens) {
    Train* t = (Train*)self;
    pipe_execute(t, 1, 1, 0.0f, load_sample_micro, (void*)tokens);
}
static void eval_row(void* self, int b, int pos, float* row) { logits_row((Train*)self, b, pos, row); }

// ----------------------------------------------------------------------------------------
// checkpoints (the format and the any-layout loading live in llmc/)

// -zero 3: the whole weights (pl.total) into full, gathered from the owners a bucket at a
// time (the staging stays one layer's). Collective over the CP x DP group.
static void gpt_gather_weights(GPT* g, Comm* comm, float* full) {
    for (int l = -1; l < g->pl.nlayers; l++) {
        ZeroBucket b;
        if (l < 0)
            zero_rest_bucket(&g->pl, 1, &b);
        else
            zero_layer_bucket(&g->pl, l, ZB_ALL, 1, &b);
        dp_gather_bucket(comm, &g->zc, &b, g->pl.total, g->pmaster, full);
    }
}

// Returns 0, or -1 if any rank could not write (the previous checkpoint stays).
static int save_checkpoint(Train* t) {
    GPT* g = &t->model;
    Progress p = run_progress(&t->run);
    if (g->zero < 3)
        return save_checkpoint_rank(&t->run.cfg, &t->run.comm, &p, &g->pl, g->params, g->m, g->v, g->opt_off, g->n_opt,
                                    &t->run.ck.write_ms, &t->run.ck.bytes);
    // -zero 3: the file holds the whole weights (DP rank 0 writes them), gathered for the save
    float* full = (float*)calloc_big(g->pl.total, sizeof(float));
    gpt_gather_weights(g, &t->run.comm, full);
    int rc = save_checkpoint_rank(&t->run.cfg, &t->run.comm, &p, &g->pl, full, g->m, g->v, g->opt_off, g->n_opt,
                                  &t->run.ck.write_ms, &t->run.ck.bytes);
    free(full);
    return rc;
}

// -ckpt-async 1: this rank's share copied into the staging buffer, then written in the
// background (llmc/host/ckpt_async.h); the loop waits only for the copy. 0, or -1 (the
// directory cannot be made).
static int stage_checkpoint(Train* t) {
    GPT* g = &t->model;
    const Config* c = &t->run.cfg;
    Comm* comm = &t->run.comm;
    size_t np = ckpt_rank_n_params(c, comm, &g->pl), no = ckpt_rank_n_opt(c, comm, g->n_opt);
    float* hp = cka_buffer(&t->run.ck, np + 2 * no);
    float* hm = hp + np;
    float* hv = hm + no;
    if (g->zero < 3)
        memcpy(hp, g->params, sizeof(float) * np);
    else { // -zero 3: every rank takes part in the gather; DP rank 0 gathers straight into the staging
        float* full = np == g->pl.total ? hp : (float*)calloc_big(g->pl.total, sizeof(float));
        gpt_gather_weights(g, comm, full);
        if (full != hp) free(full);
    }
    memcpy(hm, g->m, sizeof(float) * no);
    memcpy(hv, g->v, sizeof(float) * no);
    Progress p = run_progress(&t->run);
    return cka_start(&t->run.ck, c, comm, &p, &g->pl, hp, hm, hv, g->opt_off, g->n_opt, 1);
}

// Loads this rank's slices from a checkpoint written in any layout. With weights_only,
// progress and optimizer state stay fresh (-init-from). 0 or -1 (err).
static int load_checkpoint(Train* t, const char* dir, int weights_only, char* err, size_t n) {
    GPT* g = &t->model;
    Progress p = run_progress(&t->run);
    float* full = g->zero < 3 ? g->params : (float*)calloc_big(g->pl.total, sizeof(float));
    int rc = load_checkpoint_rank(&t->run.cfg, dir, &g->pl, full, g->m, g->v, g->opt_off, g->n_opt, weights_only, &p,
                                  err, n);
    if (g->zero >= 3) { // -zero 3 keeps its shard and the rest
        if (rc == 0) gpt_keep_shard(g, full);
        free(full);
    }
    if (rc != 0) return -1;
    run_restore(&t->run, &p);
    return 0;
}

// ----------------------------------------------------------------------------------------
// start-up and main

// Activation bytes this rank keeps for one micro-batch (one unit per chunk; what the
// schedule multiplies by its in-flight count), and per layer (compare doc/sp_recompute_vpp.md).
static void print_act_memory(const GPT* g) {
    static const char* RC[] = {"0", "full", "selective"};
    table_row("recompute / sp / vpp", "%s / %d / %d, schedule %s", RC[g->cfg.recompute], g->sp, g->nchunk,
              g->zb           ? "zb-h1"
              : g->nchunk > 1 ? "interleaved 1F1B"
                              : "1F1B");
    size_t shared =
        g->att_shared ? sizeof(float) * ((size_t)g->B * g->NH * g->T * g->T + (size_t)g->B * g->T * g->Cl) : 0;
    table_row("activations / micro-batch", "%.3f MiB (%zu B per layer; %d slots, %.3f MiB held at most)",
              (double)g->acts[0].bytes * g->nchunk / 1048576.0, g->acts[0].layer_bytes, g->nslots,
              ((double)g->acts[0].bytes * g->nslots + shared) / 1048576.0);
    if (g->zb)
        table_row("zb-h1 W stashes", "%d x %.3f MiB (weight-GEMM inputs and output gradients of units awaiting W)",
                  g->nstash, (double)g->nlc * g->wstash_layer * sizeof(float) / 1048576.0);
}

static void print_config_table(const Train* t) {
    run_print_config(&t->run);
    table_row("local params", "%zu floats", t->model.pl.total);
    const size_t* mb = t->model.mem;
    table_row("memory per rank",
              "params %.3f MiB | grads %.3f MiB | optimizer %.3f MiB | activations %.3f MiB | "
              "total %.3f MiB",
              mb[MEM_PARAMS] / 1048576.0, mb[MEM_GRADS] / 1048576.0, mb[MEM_OPTIM] / 1048576.0,
              mb[MEM_ACTS] / 1048576.0, (mb[MEM_PARAMS] + mb[MEM_GRADS] + mb[MEM_OPTIM] + mb[MEM_ACTS]) / 1048576.0);
    print_act_memory(&t->model);
#ifdef _OPENMP
    table_row("threads", "%d", omp_get_max_threads());
#endif
    table_row("cpu kernels", "%s (LLMC_CPU_ISA to force)", cpu_isa_name(cpu_isa()));
    table_rule();
    fflush(stdout);
}

// Sets up everything but the weights.
static void train_setup(Train* t, const Config* cfg, const Comm* comm) {
    memset(t, 0, sizeof(*t));
    run_init(&t->run, cfg, comm);
    // 1F1B: at most PP micro-batches in flight; interleaved: pipe_slots units (zb-h1 the same:
    // a unit's slot is free after its B, its W stash after its W)
    int zb = config_zb(cfg), nslots, nstash;
    mem_plan_slots(cfg, comm->pp, comm->PP, comm->DP, &nslots, &nstash); // -plan's count too
    if (zb && nstash < 1) die("out of memory for the zb-h1 schedule");
    gpt_build(&t->model, &t->run.cfg, &t->run.comm, nslots, nstash);
    // what the planner says this rank allocates (memplan.h) is what it allocated
    size_t plan[NUM_MEM];
    const Comm* c = &t->run.comm;
    mem_plan_cpu(&t->run.cfg, c->tp, c->TP, c->pp, c->PP, c->dpc, c->DPC, nslots, nstash, c->chunk, plan);
    for (int k = 0; k < NUM_MEM; k++)
        if (plan[k] * sizeof(float) != t->model.mem[k])
            die("internal: %s: %zu bytes allocated, memplan.h says %zu: update memplan.h with the new buffer",
                MEM_NAMES[k], t->model.mem[k], plan[k] * sizeof(float));
}

static void train_free(Train* t) {
    gpt_free(&t->model);
    run_free(&t->run);
}

// the hooks run_loop drives
static StepResult hook_step(void* self) { return train_step((Train*)self); }
static double hook_evaluate(void* self, DataSet* val) { return evaluate((Train*)self, val); }
static void hook_sample(void* self, FILE* out) { sample_text((Train*)self, out); }
static int hook_save(void* self) { return save_checkpoint((Train*)self); }
static int hook_stage(void* self) { return stage_checkpoint((Train*)self); }
static int hook_load(void* self, const char* dir, int weights_only, char* err, size_t n) {
    return load_checkpoint((Train*)self, dir, weights_only, err, n);
}
static void hook_init(void* self) {
    Train* t = (Train*)self;
    GPT* g = &t->model;
    float* full = g->zero < 3 ? g->params : (float*)calloc_big(g->pl.total, sizeof(float));
    param_init(&g->pl, full, t->run.cfg.seed, t->run.cfg.scaled_init, t->run.cfg.init_std_mult);
    if (g->zero >= 3) { // drawn whole (every layout starts from the same weights), then sharded
        gpt_keep_shard(g, full);
        free(full);
    }
}

#ifndef TESTING
int main(int argc, char** argv) {
    // How OpenMP threads wait between parallel regions. libgomp's default spins ~300000
    // pauses (~8 ms here) and steals the core from the thread it waits for when another
    // process shares it (tiny steps 2x slower under load); sleeping at once (passive) costs a
    // futex wake-up per region, which in a VM made the 125m step's GEMMs ~10% slower. A short
    // spin (GOMP_SPINCOUNT=30000, ~0.85 ms of pauses) covers the gaps between a step's
    // back-to-back regions and still sleeps through long waits. libgomp reads it when it
    // loads, so set it (unless the user set a policy or count) and re-exec once. Not when the
    // user asked for thread binding: libgomp has then already bound this thread to one place,
    // and the new process would inherit that one-CPU mask (all threads on one core: 2x slower).
    if (getenv("OMP_WAIT_POLICY") == NULL && getenv("GOMP_SPINCOUNT") == NULL && getenv("OMP_PROC_BIND") == NULL &&
        getenv("OMP_PLACES") == NULL && getenv("GOMP_CPU_AFFINITY") == NULL) {
        char self[4096];
        ssize_t n = readlink("/proc/self/exe", self, sizeof(self) - 1); // the real path keeps the process name
        if (n > 0) {
            self[n] = '\0';
            setenv("GOMP_SPINCOUNT", "30000", 1);
            execv(self, argv); // on failure carry on with the default policy
        }
    }
    Config cfg;
    Comm comm;
    static const StartupMemPlan memplan = {"the CPU trainer (fp32)", mem_plan_cpu_stage}; // -plan's memory rows
    startup(&cfg, &comm, argc, argv, 0.0, &memplan); // -layout auto on the CPU: -gpu-mem or the cluster preset's
    {
        CpuIsa isa;
        char err[160];
        if (cpu_isa_choose(&isa, err, sizeof(err)) != 0) die("%s", err);
    } // before any work
#ifdef _OPENMP
    // under mpirun, by default share the node's cores among its ranks instead of giving
    // every rank all of them (-threads or OMP_NUM_THREADS override)
    const char* local = getenv("OMPI_COMM_WORLD_LOCAL_SIZE");
    if (cfg.threads == 0 && comm.world > 1 && getenv("OMP_NUM_THREADS") == NULL && local != NULL && atoi(local) > 0) {
        long cores = sysconf(_SC_NPROCESSORS_ONLN);
        cfg.threads = cores / atoi(local) > 1 ? (int)(cores / atoi(local)) : 1;
    }
    if (cfg.threads > 0) omp_set_num_threads(cfg.threads);
#endif
    Train t;
    train_setup(&t, &cfg, &comm);
    run_open_data(&t.run, is_first_stage(&t.model) || is_last_stage(&t.model)); // only these stages read tokens
    RunHooks hooks = {&t,
                      hook_step,
                      hook_evaluate,
                      hook_sample,
                      hook_save,
                      hook_load,
                      hook_init,
                      0.0,
                      NULL, // CPU: GFLOP/s, no MFU; no device communicators
                      {&t, eval_forward, eval_row},
                      hook_stage,
                      NULL}; // the staging copy is done when hook_stage returns
    run_load_weights(&t.run, &hooks);
    if (comm.rank == 0) print_config_table(&t);
    int rc = run_loop(&t.run, &hooks);
    train_free(&t);
    comm_free(&t.run.comm);
#ifdef USE_MPI
    if (comm.mpi) MPI_Finalize();
#endif
    return rc;
}
#endif
