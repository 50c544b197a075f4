/*
 * matmul.cuh: every GEMM of the CUDA trainer, through cuBLASLt, in the row-major shapes of
 * train_gpt.c (nn.Linear convention: W is (OC, IC)), plus the bias-gradient reduction.
 *
 *   matmul_forward          out (N, OC) bf16 = inp (N, IC) @ W^T [+ bias]   (bias epilogue)
 *   matmul_forward_gelu     out = gelu(inp @ W^T + bias), pre-activation kept (GELU_AUX_BIAS
 *                           epilogue; falls back to bias epilogue + gelu kernel when cuBLASLt
 *                           has no algorithm for it)
 *   matmul_backward_input   dinp (N, IC) bf16 = dout (N, OC) @ W
 *   matmul_backward_weight  dW (OC, IC) fp32 += dout^T @ inp  (bf16 inputs, fp32 C/D with beta=1:
 *                           gradients accumulate over micro-batches in fp32 inside the GEMM)
 *   matmul_backward_weight_bias  the same GEMM with dbias (OC) fp32 += column sums of dout
 *                           from cuBLASLt's BGRADB epilogue (no extra pass over dout)
 *   matmul_backward_input_dgelu  dinp = (dout @ W) * gelu'(pre), dbias += column sums of dinp,
 *                           in one GEMM through the DGELU_BGRAD epilogue (pre = the forward's
 *                           GELU_AUX output): replaces gelu_backward and one bias pass
 *   bias_backward           dbias (OC) fp32 += column sums of dout (deterministic two-pass)
 *
 * The bias-gradient epilogues write (never accumulate) their vector, so they write an fp32
 * scratch (OC floats) that one tiny kernel adds into dbias: O(OC) work instead of a pass
 * over the (N, OC) activations. Where cuBLASLt has no algorithm for a fused epilogue (shape,
 * alignment, type, version) the plan remembers it and the unfused kernels run instead, as
 * for the GELU forward; LLMC_BGRAD_FUSION=0 (and LLMC_GELU_FUSION=0 for the DGELU GEMM)
 * forces the unfused path.
 *
 * cuBLASLt is column-major: a row-major (R, C) matrix is a column-major (C, R) one, so
 * every product is written transposed. Set up once (gemm_init): handle, a 32 MiB workspace,
 * one preference; the algorithm of each distinct shape (and pointer alignment) is found by
 * the heuristic on first use and cached. All math: fp32 accumulation (CUBLAS_COMPUTE_32F).
 */
#ifndef LLMC_MATMUL_CUH
#define LLMC_MATMUL_CUH

#include <cublasLt.h>
#include "cuda_utils.cuh"
#include "gelu.cuh"

typedef enum { EPI_NONE, EPI_BIAS, EPI_GELU_AUX_BIAS, EPI_BGRADB, EPI_DGELU_BGRAD } GemmEpilogue;
// fused epilogues may be refused by cuBLASLt: the caller then falls back to separate kernels
static int epi_optional(int epi) { return epi == EPI_GELU_AUX_BIAS || epi == EPI_BGRADB || epi == EPI_DGELU_BGRAD; }
static int epi_has_aux(int epi) { return epi == EPI_GELU_AUX_BIAS || epi == EPI_DGELU_BGRAD; }

typedef struct {
    // key
    int ta, tb, m, n, k, lda, ldb, ldd, d_f32, epi, ldaux;
    int align_a, align_b, align_d, align_bias, align_aux;
    // value
    int ok; // 1: algo found; 0: no algorithm (only allowed for the fused GELU epilogue)
    cublasLtMatmulDesc_t desc;
    cublasLtMatrixLayout_t la, lb, ld;
    cublasLtMatmulAlgo_t algo;
} GemmPlan;

typedef struct {
    cublasLtHandle_t handle;
    void* workspace;
    size_t ws_bytes;
    GemmPlan* plans;
    int nplans, cap;
    cudaStream_t stream;
    int gelu_fused_ok; // -1 not tried, 0 cuBLASLt refused every shape so far, 1 used
    float* partials;
    size_t partials_n;  // bias_backward scratch
    float* bgrad;       // (partials_n) fp32 output of the bias-gradient epilogues
    int bgrad_fused;    // LLMC_BGRAD_FUSION: try the BGRADB / DGELU_BGRAD epilogues
    int bgrad_fused_ok; // -1 not tried, 0 refused so far, 1 used at least once
} Gemm;

static void gemm_init(Gemm* g, cudaStream_t stream, size_t max_bias_cols) {
    memset(g, 0, sizeof(*g));
    cublasCheck(cublasLtCreate(&g->handle));
    g->ws_bytes = (size_t)32 << 20;
    g->workspace = dev_alloc(g->ws_bytes);
    g->stream = stream;
    g->gelu_fused_ok = -1;
    g->partials_n = 32 * (max_bias_cols > 0 ? max_bias_cols : 1);
    g->partials = (float*)dev_alloc(sizeof(float) * g->partials_n);
    g->bgrad = (float*)dev_alloc(sizeof(float) * g->partials_n);
    const char* f = getenv("LLMC_BGRAD_FUSION");
    g->bgrad_fused = !(f != NULL && strcmp(f, "0") == 0);
    g->bgrad_fused_ok = -1;
}

static void gemm_free(Gemm* g) {
    for (int i = 0; i < g->nplans; i++) {
        GemmPlan* p = &g->plans[i];
        cublasLtMatmulDescDestroy(p->desc);
        cublasLtMatrixLayoutDestroy(p->la);
        cublasLtMatrixLayoutDestroy(p->lb);
        cublasLtMatrixLayoutDestroy(p->ld);
    }
    free(g->plans);
    dev_free(g->workspace);
    dev_free(g->partials);
    dev_free(g->bgrad);
    cublasLtDestroy(g->handle);
    memset(g, 0, sizeof(*g));
}

// largest power of two <= 256 dividing the address (cuBLASLt's alignment preference)
static int ptr_align(const void* p) {
    uintptr_t a = (uintptr_t)p;
    int al = 256;
    while (al > 1 && (a % al) != 0) al >>= 1;
    return al;
}

static GemmPlan* gemm_plan(Gemm* g, int ta, int tb, int m, int n, int k, int lda, int ldb, int ldd, int d_f32, int epi,
                           int ldaux, int al_a, int al_b, int al_d, int al_bias, int al_aux) {
    for (int i = 0; i < g->nplans; i++) {
        GemmPlan* p = &g->plans[i];
        if (p->ta == ta && p->tb == tb && p->m == m && p->n == n && p->k == k && p->lda == lda && p->ldb == ldb &&
            p->ldd == ldd && p->d_f32 == d_f32 && p->epi == epi && p->ldaux == ldaux && p->align_a == al_a &&
            p->align_b == al_b && p->align_d == al_d && p->align_bias == al_bias && p->align_aux == al_aux)
            return p;
    }
    if (g->nplans == g->cap) {
        g->cap = g->cap ? 2 * g->cap : 32;
        g->plans = (GemmPlan*)realloc(g->plans, sizeof(GemmPlan) * g->cap);
        if (g->plans == NULL) die("out of host memory for GEMM plans");
    }
    GemmPlan* p = &g->plans[g->nplans++];
    memset(p, 0, sizeof(*p));
    p->ta = ta;
    p->tb = tb;
    p->m = m;
    p->n = n;
    p->k = k;
    p->lda = lda;
    p->ldb = ldb;
    p->ldd = ldd;
    p->d_f32 = d_f32;
    p->epi = epi;
    p->ldaux = ldaux;
    p->align_a = al_a;
    p->align_b = al_b;
    p->align_d = al_d;
    p->align_bias = al_bias;
    p->align_aux = al_aux;
    cublasCheck(cublasLtMatmulDescCreate(&p->desc, CUBLAS_COMPUTE_32F, CUDA_R_32F));
    cublasOperation_t opa = ta ? CUBLAS_OP_T : CUBLAS_OP_N, opb = tb ? CUBLAS_OP_T : CUBLAS_OP_N;
    cublasCheck(cublasLtMatmulDescSetAttribute(p->desc, CUBLASLT_MATMUL_DESC_TRANSA, &opa, sizeof(opa)));
    cublasCheck(cublasLtMatmulDescSetAttribute(p->desc, CUBLASLT_MATMUL_DESC_TRANSB, &opb, sizeof(opb)));
    cublasLtEpilogue_t e = CUBLASLT_EPILOGUE_DEFAULT;
    if (epi == EPI_BIAS) e = CUBLASLT_EPILOGUE_BIAS;
    if (epi == EPI_GELU_AUX_BIAS) e = CUBLASLT_EPILOGUE_GELU_AUX_BIAS;
    if (epi == EPI_BGRADB) e = CUBLASLT_EPILOGUE_BGRADB;
    if (epi == EPI_DGELU_BGRAD) e = CUBLASLT_EPILOGUE_DGELU_BGRAD;
    cublasCheck(cublasLtMatmulDescSetAttribute(p->desc, CUBLASLT_MATMUL_DESC_EPILOGUE, &e, sizeof(e)));
    if (epi != EPI_NONE) { // bias inputs are the bf16 weights; bias gradients are fp32 outputs
        cudaDataType_t bt = (epi == EPI_BGRADB || epi == EPI_DGELU_BGRAD) ? CUDA_R_32F : CUDA_R_16BF;
        cublasCheck(cublasLtMatmulDescSetAttribute(p->desc, CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE, &bt, sizeof(bt)));
    }
    if (epi_has_aux(epi)) {
        int64_t ld64 = ldaux;
        cublasCheck(cublasLtMatmulDescSetAttribute(p->desc, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_LD, &ld64, sizeof(ld64)));
    }
    // A is (rows x cols) as stored: op(A) is m x k
    cublasCheck(cublasLtMatrixLayoutCreate(&p->la, CUDA_R_16BF, ta ? k : m, ta ? m : k, lda));
    cublasCheck(cublasLtMatrixLayoutCreate(&p->lb, CUDA_R_16BF, tb ? n : k, tb ? k : n, ldb));
    cublasCheck(cublasLtMatrixLayoutCreate(&p->ld, d_f32 ? CUDA_R_32F : CUDA_R_16BF, m, n, ldd));
    cublasLtMatmulPreference_t pref;
    cublasCheck(cublasLtMatmulPreferenceCreate(&pref));
    uint64_t ws = g->ws_bytes;
    cublasCheck(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws, sizeof(ws)));
    uint32_t a1 = (uint32_t)al_a, a2 = (uint32_t)al_b, a3 = (uint32_t)al_d;
    cublasCheck(
        cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, &a1, sizeof(a1)));
    cublasCheck(
        cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES, &a2, sizeof(a2)));
    cublasCheck(
        cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, &a3, sizeof(a3)));
    cublasCheck(
        cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES, &a3, sizeof(a3)));
    cublasLtMatmulHeuristicResult_t res;
    int found = 0;
    cublasStatus_t st =
        cublasLtMatmulAlgoGetHeuristic(g->handle, p->desc, p->la, p->lb, p->ld, p->ld, pref, 1, &res, &found);
    cublasLtMatmulPreferenceDestroy(pref);
    if (st == CUBLAS_STATUS_SUCCESS && found > 0) {
        p->ok = 1;
        p->algo = res.algo;
    } else if (!epi_optional(epi)) {
        die("cuBLASLt has no algorithm for GEMM m=%d n=%d k=%d (transa=%d transb=%d lda=%d ldb=%d ldd=%d %s out, "
            "epilogue %d, "
            "alignments %d/%d/%d): a shape this build cannot run",
            m, n, k, ta, tb, lda, ldb, ldd, d_f32 ? "fp32" : "bf16", epi, al_a, al_b, al_d);
    }
    return p;
}

// D (m x n col-major, ldd) = op(A) op(B) (+ beta D) [epilogue]. Returns 0, or -1 when no
// algorithm exists (only for the optional fused epilogues; the caller falls back).
static int gemm_run(Gemm* g, int ta, int tb, int m, int n, int k, const bf16* A, int lda, const bf16* B, int ldb,
                    void* D, int ldd, int d_f32, float beta, int epi, const void* bias, bf16* aux, int ldaux) {
    GemmPlan* p = gemm_plan(g, ta, tb, m, n, k, lda, ldb, ldd, d_f32, epi, ldaux, ptr_align(A), ptr_align(B),
                            ptr_align(D), bias ? ptr_align(bias) : 0, aux ? ptr_align(aux) : 0);
    if (!p->ok) return -1;
    if (epi != EPI_NONE)
        cublasCheck(cublasLtMatmulDescSetAttribute(p->desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &bias, sizeof(bias)));
    if (epi_has_aux(epi))
        cublasCheck(
            cublasLtMatmulDescSetAttribute(p->desc, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_POINTER, &aux, sizeof(aux)));
    float alpha = 1.0f;
    cublasStatus_t st = cublasLtMatmul(g->handle, p->desc, &alpha, A, p->la, B, p->lb, &beta, D, p->ld, D, p->ld,
                                       &p->algo, g->workspace, g->ws_bytes, g->stream);
    if (st != CUBLAS_STATUS_SUCCESS && epi_optional(epi)) {
        p->ok = 0;
        return -1;
    }
    cublasCheck(st);
    return 0;
}

// out (N, OC) row stride ldo = inp (N, IC) @ W (OC, IC)^T (+ bias (OC))
static void matmul_forward(Gemm* g, bf16* out, int ldo, const bf16* inp, const bf16* W, const bf16* bias, int N, int IC,
                           int OC) {
    if (N == 0 || OC == 0) return;
    gemm_run(g, 1, 0, OC, N, IC, W, IC, inp, IC, out, ldo, 0, 0.0f, bias ? EPI_BIAS : EPI_NONE, bias, NULL, 0);
}

// out (N, OC) = gelu(pre), pre (N, OC) = inp @ W^T + bias. use_fused: try cuBLASLt's
// GELU_AUX_BIAS epilogue first (its GeLU is the tanh approximation, like gelu.cuh).
static void matmul_forward_gelu(Gemm* g, bf16* out, bf16* pre, const bf16* inp, const bf16* W, const bf16* bias, int N,
                                int IC, int OC, int use_fused) {
    if (use_fused) { // a shape cuBLASLt refuses is remembered by its plan and not tried again
        if (gemm_run(g, 1, 0, OC, N, IC, W, IC, inp, IC, out, OC, 0, 0.0f, EPI_GELU_AUX_BIAS, bias, pre, OC) == 0) {
            g->gelu_fused_ok = 1;
            return;
        }
        if (g->gelu_fused_ok != 1) g->gelu_fused_ok = 0;
    }
    matmul_forward(g, pre, OC, inp, W, bias, N, IC, OC);
    gelu_forward(out, pre, (size_t)N * OC, g->stream);
}

// dinp (N, IC) = dout (N, OC; row stride ldd) @ W (OC, IC)
static void matmul_backward_input(Gemm* g, bf16* dinp, const bf16* dout, int ldd, const bf16* W, int N, int IC,
                                  int OC) {
    if (N == 0 || IC == 0) return;
    if (OC == 0) {
        cudaCheck(cudaMemsetAsync(dinp, 0, sizeof(bf16) * (size_t)N * IC, g->stream));
        return;
    }
    gemm_run(g, 0, 0, IC, N, OC, W, IC, dout, ldd, dinp, IC, 0, 0.0f, EPI_NONE, NULL, NULL, 0);
}

// dW (OC, IC) fp32 += dout (N, OC; stride ldd)^T @ inp (N, IC)
static void matmul_backward_weight(Gemm* g, float* dW, const bf16* dout, int ldd, const bf16* inp, int N, int IC,
                                   int OC) {
    if (N == 0 || OC == 0 || IC == 0) return;
    gemm_run(g, 0, 1, IC, OC, N, inp, IC, dout, ldd, dW, IC, 1, 1.0f, EPI_NONE, NULL, NULL, 0);
}

// partial[r][o] = sum of dout[n][o] over rows n in chunk r (rows in order)
__global__ void colsum_partial_kernel(float* partial, const bf16* dout, int N, int OC, int ld, int rows_per) {
    int o = blockIdx.x * blockDim.x + threadIdx.x;
    int r = blockIdx.y;
    if (o >= OC) return;
    int n0 = r * rows_per, n1 = min(N, n0 + rows_per);
    float s = 0.0f;
    for (int n = n0; n < n1; n++) s += bf(dout[(size_t)n * ld + o]);
    partial[(size_t)r * OC + o] = s;
}
// dst[o] += sum over r of partial[r][o] (in order)
__global__ void colsum_finish_kernel(float* dst, const float* partial, int R, int OC) {
    int o = blockIdx.x * blockDim.x + threadIdx.x;
    if (o >= OC) return;
    float s = 0.0f;
    for (int r = 0; r < R; r++) s += partial[(size_t)r * OC + o];
    dst[o] += s;
}

// number of row chunks for a column reduction of N rows with `partials_n` scratch floats
static int colsum_chunks(int N, int OC, size_t partials_n) {
    int R = N / 64;
    if (R < 1) R = 1;
    if (R > 32) R = 32;
    while (R > 1 && (size_t)R * OC > partials_n) R--;
    return R;
}

// dbias (OC) fp32 += sum over N rows of dout (N, OC; stride ld). Deterministic.
static void bias_backward(Gemm* g, float* dbias, const bf16* dout, int ld, int N, int OC) {
    if (N == 0 || OC == 0) return;
    int R = colsum_chunks(N, OC, g->partials_n);
    if ((size_t)OC > g->partials_n) die("bias_backward: %d columns exceed the scratch (%zu)", OC, g->partials_n);
    int rows_per = (N + R - 1) / R;
    dim3 grid(CEIL_DIV(OC, 256), R);
    LAUNCH(colsum_partial_kernel, grid, 256, 0, g->stream, g->partials, dout, N, OC, ld, rows_per);
    LAUNCH(colsum_finish_kernel, CEIL_DIV(OC, 256), 256, 0, g->stream, dbias, (const float*)g->partials, R, OC);
}

// dst (n) += src (n), fp32
__global__ void vec_add_f32_kernel(float* dst, const float* src, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) dst[i] += src[i];
}

// dW (OC, IC) fp32 += dout (N, OC; stride ldd)^T @ inp (N, IC), dbias (OC) fp32 += column sums
// of dout: one GEMM with the BGRADB epilogue (bias of op(B) = dout^T reduced over k = N).
static void matmul_backward_weight_bias(Gemm* g, float* dW, float* dbias, const bf16* dout, int ldd, const bf16* inp,
                                        int N, int IC, int OC) {
    if (N == 0 || OC == 0) return;
    if (IC > 0 && g->bgrad_fused && (size_t)OC <= g->partials_n &&
        gemm_run(g, 0, 1, IC, OC, N, inp, IC, dout, ldd, dW, IC, 1, 1.0f, EPI_BGRADB, g->bgrad, NULL, 0) == 0) {
        g->bgrad_fused_ok = 1;
        LAUNCH(vec_add_f32_kernel, CEIL_DIV(OC, 256), 256, 0, g->stream, dbias, (const float*)g->bgrad, OC);
        return;
    }
    if (g->bgrad_fused_ok != 1) g->bgrad_fused_ok = 0;
    matmul_backward_weight(g, dW, dout, ldd, inp, N, IC, OC);
    bias_backward(g, dbias, dout, ldd, N, OC);
}

// dinp (N, IC) = (dout (N, OC; stride ldd) @ W (OC, IC)) * gelu'(pre (N, IC)), dbias (IC) fp32
// += column sums of dinp: one GEMM with the DGELU_BGRAD epilogue when use_fused (pre is the
// aux the GELU_AUX_BIAS forward wrote, row stride IC); else the GEMM, gelu_backward, and the
// bias pass. dinp must not alias pre.
static void matmul_backward_input_dgelu(Gemm* g, bf16* dinp, float* dbias, const bf16* dout, int ldd, const bf16* W,
                                        const bf16* pre, int N, int IC, int OC, int use_fused) {
    if (N == 0 || IC == 0) return;
    if (use_fused && OC > 0 && g->bgrad_fused && (size_t)IC <= g->partials_n &&
        gemm_run(g, 0, 0, IC, N, OC, W, IC, dout, ldd, dinp, IC, 0, 0.0f, EPI_DGELU_BGRAD, g->bgrad, (bf16*)pre, IC) ==
            0) {
        g->bgrad_fused_ok = 1;
        LAUNCH(vec_add_f32_kernel, CEIL_DIV(IC, 256), 256, 0, g->stream, dbias, (const float*)g->bgrad, IC);
        return;
    }
    if (g->bgrad_fused_ok != 1) g->bgrad_fused_ok = 0;
    matmul_backward_input(g, dinp, dout, ldd, W, N, IC, OC);
    gelu_backward(dinp, pre, dinp, (size_t)N * IC, g->stream);
    bias_backward(g, dbias, dinp, IC, N, IC);
}

static const char* fused_state(int ok) {
    return ok == 1 ? "used" : (ok == 0 ? "REFUSED by cuBLASLt, unfused kernels run" : "not tried");
}

// What the GEMMs actually ran: the fused epilogues (used, refused and fallen back, or never
// tried) and, with per_shape, each planned shape's cuBLASLt algorithm (id, tile, stages,
// split-K), so a benchmark says which kernels it timed. Call after a step.
static void gemm_report(const Gemm* g, int gelu_wanted, FILE* out) {
    static const char* EPI[] = {"none", "bias", "gelu_aux_bias", "bgradb", "dgelu_bgrad"};
    fprintf(out, "gemm: fused GELU forward epilogue: %s; fused bias-gradient epilogues: %s\n",
            gelu_wanted ? fused_state(g->gelu_fused_ok) : "off (LLMC_GELU_FUSION=0)",
            g->bgrad_fused ? fused_state(g->bgrad_fused_ok) : "off (LLMC_BGRAD_FUSION=0)");
    if (gelu_wanted && g->gelu_fused_ok == 0)
        fprintf(stderr,
                "warning: cuBLASLt refused the fused GELU epilogue: the unfused GEMM + gelu kernel run (slower)\n");
    if (g->bgrad_fused && g->bgrad_fused_ok == 0)
        fprintf(stderr,
                "warning: cuBLASLt refused the fused bias-gradient epilogues: separate bias passes run (slower)\n");
    const char* v = getenv("LLMC_GEMM_REPORT");
    if (v == NULL || strcmp(v, "1") != 0) return;
    for (int i = 0; i < g->nplans; i++) {
        const GemmPlan* p = &g->plans[i];
        int32_t id = -1;
        uint32_t tile = 0, stages = 0, splitk = 0;
        size_t w = 0;
        if (p->ok) {
            cublasCheck(cublasLtMatmulAlgoConfigGetAttribute(&p->algo, CUBLASLT_ALGO_CONFIG_ID, &id, sizeof id, &w));
            cublasCheck(
                cublasLtMatmulAlgoConfigGetAttribute(&p->algo, CUBLASLT_ALGO_CONFIG_TILE_ID, &tile, sizeof tile, &w));
            cublasCheck(cublasLtMatmulAlgoConfigGetAttribute(&p->algo, CUBLASLT_ALGO_CONFIG_STAGES_ID, &stages,
                                                             sizeof stages, &w));
            cublasCheck(cublasLtMatmulAlgoConfigGetAttribute(&p->algo, CUBLASLT_ALGO_CONFIG_SPLITK_NUM, &splitk,
                                                             sizeof splitk, &w));
        }
        fprintf(out, "gemm plan %2d: m %6d n %6d k %6d op %c%c out %s epilogue %-13s align %3d/%3d/%3d: ", i, p->m,
                p->n, p->k, p->ta ? 'T' : 'N', p->tb ? 'T' : 'N', p->d_f32 ? "fp32" : "bf16", EPI[p->epi], p->align_a,
                p->align_b, p->align_d);
        if (p->ok)
            fprintf(out, "algo %d tile %u stages %u split-k %u\n", id, tile, stages, splitk);
        else
            fprintf(out, "no algorithm (fell back)\n");
    }
}

#endif // LLMC_MATMUL_CUH
