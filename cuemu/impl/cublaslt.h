// cuemu/impl/cublaslt.h - cuBLASLt matmul computed on the CPU:
// D = epilogue(alpha * op(A) op(B) + beta * C) in column-major storage with
// leading dimensions, transposes, strided batches; A/B/C/D in CUDA_R_32F or
// CUDA_R_16BF; fp32 accumulation; bf16 outputs rounded to nearest even.
// Epilogues: DEFAULT, RELU(_BIAS), BIAS, GELU(_BIAS), GELU_AUX(_BIAS), DGELU,
// DGELU_BGRAD, BGRADA, BGRADB (names and values as in the real cublasLt.h).
// Test-only: part of the CPU emulation of CUDA, never linked into the product.
#pragma once
#include "bf16.h"

// ---------------------------------------------------------------- library types
typedef enum cudaDataType_t {
    CUDA_R_16F = 2,
    CUDA_R_16BF = 14,
    CUDA_R_32F = 0,
    CUDA_R_64F = 1,
    CUDA_R_8I = 3,
    CUDA_R_32I = 10
} cudaDataType;
typedef enum {
    CUBLAS_STATUS_SUCCESS = 0,
    CUBLAS_STATUS_NOT_INITIALIZED = 1,
    CUBLAS_STATUS_ALLOC_FAILED = 3,
    CUBLAS_STATUS_INVALID_VALUE = 7,
    CUBLAS_STATUS_ARCH_MISMATCH = 8,
    CUBLAS_STATUS_MAPPING_ERROR = 11,
    CUBLAS_STATUS_EXECUTION_FAILED = 13,
    CUBLAS_STATUS_INTERNAL_ERROR = 14,
    CUBLAS_STATUS_NOT_SUPPORTED = 15,
    CUBLAS_STATUS_LICENSE_ERROR = 16
} cublasStatus_t;
typedef enum { CUBLAS_OP_N = 0, CUBLAS_OP_T = 1, CUBLAS_OP_C = 2 } cublasOperation_t;
typedef enum {
    CUBLAS_COMPUTE_16F = 64,
    CUBLAS_COMPUTE_16F_PEDANTIC = 65,
    CUBLAS_COMPUTE_32F = 68,
    CUBLAS_COMPUTE_32F_PEDANTIC = 69,
    CUBLAS_COMPUTE_32F_FAST_16F = 74,
    CUBLAS_COMPUTE_32F_FAST_16BF = 75,
    CUBLAS_COMPUTE_32F_FAST_TF32 = 77,
    CUBLAS_COMPUTE_64F = 70,
    CUBLAS_COMPUTE_32I = 72
} cublasComputeType_t;
typedef enum { CUBLASLT_POINTER_MODE_HOST = 0, CUBLASLT_POINTER_MODE_DEVICE = 1 } cublasLtPointerMode_t;
typedef enum { CUBLASLT_ORDER_COL = 0, CUBLASLT_ORDER_ROW = 1 } cublasLtOrder_t;
typedef enum {
    CUBLASLT_MATRIX_LAYOUT_TYPE = 0,
    CUBLASLT_MATRIX_LAYOUT_ORDER = 1,
    CUBLASLT_MATRIX_LAYOUT_ROWS = 2,
    CUBLASLT_MATRIX_LAYOUT_COLS = 3,
    CUBLASLT_MATRIX_LAYOUT_LD = 4,
    CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT = 5,
    CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET = 6
} cublasLtMatrixLayoutAttribute_t;
typedef enum {
    CUBLASLT_MATMUL_DESC_COMPUTE_TYPE = 0,
    CUBLASLT_MATMUL_DESC_SCALE_TYPE = 1,
    CUBLASLT_MATMUL_DESC_POINTER_MODE = 2,
    CUBLASLT_MATMUL_DESC_TRANSA = 3,
    CUBLASLT_MATMUL_DESC_TRANSB = 4,
    CUBLASLT_MATMUL_DESC_TRANSC = 5,
    CUBLASLT_MATMUL_DESC_EPILOGUE = 7,
    CUBLASLT_MATMUL_DESC_BIAS_POINTER = 8,
    CUBLASLT_MATMUL_DESC_BIAS_BATCH_STRIDE = 10,
    CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_POINTER = 11,
    CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_LD = 12,
    CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_BATCH_STRIDE = 13,
    CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_DATA_TYPE = 22,
    CUBLASLT_MATMUL_DESC_FAST_ACCUM = 25,
    CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE = 26
} cublasLtMatmulDescAttributes_t;
typedef enum {
    CUBLASLT_EPILOGUE_DEFAULT = 1,
    CUBLASLT_EPILOGUE_RELU = 2,
    CUBLASLT_EPILOGUE_RELU_AUX = (CUBLASLT_EPILOGUE_RELU | 128),
    CUBLASLT_EPILOGUE_BIAS = 4,
    CUBLASLT_EPILOGUE_RELU_BIAS = (CUBLASLT_EPILOGUE_RELU | CUBLASLT_EPILOGUE_BIAS),
    CUBLASLT_EPILOGUE_RELU_AUX_BIAS = (CUBLASLT_EPILOGUE_RELU_AUX | CUBLASLT_EPILOGUE_BIAS),
    CUBLASLT_EPILOGUE_DRELU = 8 | 128,
    CUBLASLT_EPILOGUE_DRELU_BGRAD = CUBLASLT_EPILOGUE_DRELU | 16,
    CUBLASLT_EPILOGUE_GELU = 32,
    CUBLASLT_EPILOGUE_GELU_AUX = (CUBLASLT_EPILOGUE_GELU | 128),
    CUBLASLT_EPILOGUE_GELU_BIAS = (CUBLASLT_EPILOGUE_GELU | CUBLASLT_EPILOGUE_BIAS),
    CUBLASLT_EPILOGUE_GELU_AUX_BIAS = (CUBLASLT_EPILOGUE_GELU_AUX | CUBLASLT_EPILOGUE_BIAS),
    CUBLASLT_EPILOGUE_DGELU = 64 | 128,
    CUBLASLT_EPILOGUE_DGELU_BGRAD = CUBLASLT_EPILOGUE_DGELU | 16,
    CUBLASLT_EPILOGUE_BGRADA = 256,
    CUBLASLT_EPILOGUE_BGRADB = 512
} cublasLtEpilogue_t;
typedef enum {
    CUBLASLT_MATMUL_PREF_SEARCH_MODE = 0,
    CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES = 1,
    CUBLASLT_MATMUL_PREF_REDUCTION_SCHEME_MASK = 3,
    CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES = 5,
    CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES = 6,
    CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES = 7,
    CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES = 8,
    CUBLASLT_MATMUL_PREF_MAX_WAVES_COUNT = 9,
    CUBLASLT_MATMUL_PREF_IMPL_MASK = 12
} cublasLtMatmulPreferenceAttributes_t;

struct cublasLtContext {
    int magic;
};
typedef struct cublasLtContext* cublasLtHandle_t;
typedef struct {
    int magic;
    int32_t compute, scale, pointer_mode, transa, transb;
    uint32_t epilogue;
    const void* bias;
    void* aux;
    int64_t aux_ld, bias_bstride, aux_bstride;
    int32_t bias_type, aux_type;
    int8_t fast_accum;
} cublasLtMatmulDescOpaque_t;
typedef cublasLtMatmulDescOpaque_t* cublasLtMatmulDesc_t;
typedef struct {
    int magic;
    uint32_t type;
    int32_t order;
    uint64_t rows, cols;
    int64_t ld;
    int32_t batch;
    int64_t stride;
} cublasLtMatrixLayoutOpaque_t;
typedef cublasLtMatrixLayoutOpaque_t* cublasLtMatrixLayout_t;
typedef struct {
    int magic;
    uint32_t search_mode;
    uint64_t max_workspace;
    uint32_t reduction_mask;
    uint32_t min_align[4]; // A, B, C, D in bytes (default 256, as cuBLASLt)
    float max_waves;
    uint64_t impl_mask;
} cublasLtMatmulPreferenceOpaque_t;
typedef cublasLtMatmulPreferenceOpaque_t* cublasLtMatmulPreference_t;
typedef struct {
    uint64_t data[8];
} cublasLtMatmulAlgo_t;
typedef struct {
    cublasLtMatmulAlgo_t algo;
    size_t workspaceSize;
    cublasStatus_t state;
    float wavesCount;
    int reserved[4];
} cublasLtMatmulHeuristicResult_t;

namespace cuemu {
constexpr int kLtMagic = 0x4c74454d;
constexpr uint64_t kLtAlgoTag = 0x63756d75616c676full; // marks an algorithm returned by the emulation

inline cublasStatus_t lt_fail(cublasStatus_t st, const char* fmt, ...) __attribute__((format(printf, 2, 3)));
inline cublasStatus_t lt_fail(cublasStatus_t st, const char* fmt, ...) {
    char msg[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    fprintf(stderr, "cuemu cublasLt: %s\n", msg);
    return st;
}
// A GPU algorithm chosen for pointers aligned to `align` bytes uses vector loads of up
// to 16 bytes: a less aligned pointer is a misaligned access there, an error here.
inline cublasStatus_t lt_check_align(const cublasLtMatmulAlgo_t* algo, int which, const char* what, const void* p) {
    if (!algo || algo->data[0] != kLtAlgoTag || !p) return CUBLAS_STATUS_SUCCESS;
    uint64_t want = std::min<uint64_t>(algo->data[1 + which], 16);
    if (want > 1 && ((uintptr_t)p % want) != 0)
        return lt_fail(CUBLAS_STATUS_INVALID_VALUE,
                       "cublasLtMatmul: %s %p is not %llu-byte aligned, but the algorithm was chosen for "
                       "CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_%c_BYTES = %llu (on a GPU: misaligned address); "
                       "pass the real alignment in the preference",
                       what, p, (unsigned long long)want, "ABCD"[which], (unsigned long long)algo -> data[1 + which]);
    return CUBLAS_STATUS_SUCCESS;
}
template <class T>
inline bool get_attr(const void* buf, size_t size, T& out) {
    if (!buf || size != sizeof(T)) return false;
    memcpy(&out, buf, sizeof(T));
    return true;
}
inline bool lt_type_ok(int t) { return t == CUDA_R_32F || t == CUDA_R_16BF; }
inline float lt_load(int t, const void* base, int64_t i) {
    if (t == CUDA_R_32F) return ((const float*)base)[i];
    return bf2f(((const unsigned short*)base)[i]);
}
inline void lt_store(int t, void* base, int64_t i, float v) {
    if (t == CUDA_R_32F)
        ((float*)base)[i] = v;
    else
        ((unsigned short*)base)[i] = f2bf_rn(v);
}
inline size_t lt_size(int t) { return t == CUDA_R_32F ? 4 : 2; }
// GELU, tanh approximation (what cuBLASLt's GELU epilogues compute).
inline float lt_gelu(float x) {
    const float s = 0.7978845608028654f; // sqrt(2/pi)
    float u = s * (x + 0.044715f * x * x * x);
    return 0.5f * x * (1.0f + tanhf(u));
}
inline float lt_dgelu(float x) {
    const float s = 0.7978845608028654f;
    float x2 = x * x;
    float t = tanhf(s * (x + 0.044715f * x2 * x));
    return 0.5f * (1.0f + t) + 0.5f * x * (1.0f - t * t) * s * (1.0f + 3.0f * 0.044715f * x2);
}
// Sum of a[p]*b[p] with fp32 accumulation in 8 interleaved partial sums.
inline float lt_dot(const float* a, const float* b, int64_t k) {
    float s[8] = {0, 0, 0, 0, 0, 0, 0, 0};
    int64_t p = 0;
    for (; p + 8 <= k; p += 8)
        for (int q = 0; q < 8; q++) s[q] += a[p + q] * b[p + q];
    for (int q = 0; p < k; p++, q++) s[q] += a[p] * b[p];
    return ((s[0] + s[1]) + (s[2] + s[3])) + ((s[4] + s[5]) + (s[6] + s[7]));
}

struct LtPlan {
    int64_t m, n, k, batch;
    bool ta, tb;
    int atype, ctype, bias_type, aux_type;
    uint32_t epi;
    bool use_bias, bgrad_rows, bgrada, bgradb, gelu, relu, aux_out, dgelu;
};

inline cublasStatus_t lt_plan(cublasLtMatmulDesc_t d, cublasLtMatrixLayout_t A, cublasLtMatrixLayout_t B,
                              cublasLtMatrixLayout_t C, cublasLtMatrixLayout_t D, LtPlan& P) {
    if (!d || d->magic != kLtMagic) return lt_fail(CUBLAS_STATUS_INVALID_VALUE, "matmul descriptor not created");
    for (cublasLtMatrixLayout_t L : {A, B, C, D})
        if (!L || L->magic != kLtMagic) return lt_fail(CUBLAS_STATUS_INVALID_VALUE, "matrix layout not created");
    if (d->compute != CUBLAS_COMPUTE_32F && d->compute != CUBLAS_COMPUTE_32F_PEDANTIC &&
        d->compute != CUBLAS_COMPUTE_32F_FAST_16BF && d->compute != CUBLAS_COMPUTE_32F_FAST_TF32)
        return lt_fail(CUBLAS_STATUS_NOT_SUPPORTED, "compute type %d not emulated (use CUBLAS_COMPUTE_32F)",
                       d->compute);
    if (d->scale != CUDA_R_32F)
        return lt_fail(CUBLAS_STATUS_NOT_SUPPORTED, "scale type %d not emulated (CUDA_R_32F only)", d->scale);
    for (cublasLtMatrixLayout_t L : {A, B, C, D}) {
        if (L->order != CUBLASLT_ORDER_COL)
            return lt_fail(CUBLAS_STATUS_NOT_SUPPORTED, "only CUBLASLT_ORDER_COL layouts are emulated");
        if (!lt_type_ok((int)L->type))
            return lt_fail(CUBLAS_STATUS_NOT_SUPPORTED, "matrix type %u not emulated (CUDA_R_32F, CUDA_R_16BF)",
                           L->type);
        if (L->ld < (int64_t)std::max<uint64_t>(1, L->rows))
            return lt_fail(CUBLAS_STATUS_INVALID_VALUE, "leading dimension %lld smaller than rows %llu",
                           (long long)L->ld, (unsigned long long)L->rows);
        if (L->batch < 1) return lt_fail(CUBLAS_STATUS_INVALID_VALUE, "batch count %d", L->batch);
    }
    if (A->type != B->type) return lt_fail(CUBLAS_STATUS_NOT_SUPPORTED, "A and B types differ");
    if (C->type != D->type) return lt_fail(CUBLAS_STATUS_NOT_SUPPORTED, "C and D types differ");
    P.ta = d->transa != CUBLAS_OP_N;
    P.tb = d->transb != CUBLAS_OP_N;
    P.m = (int64_t)D->rows;
    P.n = (int64_t)D->cols;
    P.k = P.ta ? (int64_t)A->rows : (int64_t)A->cols;
    int64_t am = P.ta ? (int64_t)A->cols : (int64_t)A->rows;
    int64_t bk = P.tb ? (int64_t)B->cols : (int64_t)B->rows;
    int64_t bn = P.tb ? (int64_t)B->rows : (int64_t)B->cols;
    if (am != P.m || bk != P.k || bn != P.n || (int64_t)C->rows != P.m || (int64_t)C->cols != P.n)
        return lt_fail(CUBLAS_STATUS_INVALID_VALUE,
                       "shapes do not chain: op(A) %lldx%lld, op(B) %lldx%lld, C %llux%llu, D %lldx%lld", (long long)am,
                       (long long)P.k, (long long)bk, (long long)bn, (unsigned long long)C->rows,
                       (unsigned long long)C->cols, (long long)P.m, (long long)P.n);
    P.batch = D->batch;
    if (A->batch != P.batch || B->batch != P.batch || C->batch != P.batch)
        return lt_fail(CUBLAS_STATUS_INVALID_VALUE, "batch counts differ (A %d, B %d, C %d, D %d)", A->batch, B->batch,
                       C->batch, D->batch);
    P.atype = (int)A->type;
    P.ctype = (int)D->type;
    P.bias_type = d->bias_type >= 0 ? d->bias_type : P.ctype;
    P.aux_type = d->aux_type >= 0 ? d->aux_type : P.ctype;
    if (!lt_type_ok(P.bias_type) || !lt_type_ok(P.aux_type))
        return lt_fail(CUBLAS_STATUS_NOT_SUPPORTED, "bias/aux type not emulated");
    P.epi = d->epilogue;
    P.use_bias = P.bgrad_rows = P.bgrada = P.bgradb = P.gelu = P.relu = P.aux_out = P.dgelu = false;
    switch (P.epi) {
        case CUBLASLT_EPILOGUE_DEFAULT:
            break;
        case CUBLASLT_EPILOGUE_RELU:
            P.relu = true;
            break;
        case CUBLASLT_EPILOGUE_RELU_BIAS:
            P.relu = P.use_bias = true;
            break;
        case CUBLASLT_EPILOGUE_BIAS:
            P.use_bias = true;
            break;
        case CUBLASLT_EPILOGUE_GELU:
            P.gelu = true;
            break;
        case CUBLASLT_EPILOGUE_GELU_BIAS:
            P.gelu = P.use_bias = true;
            break;
        case CUBLASLT_EPILOGUE_GELU_AUX:
            P.gelu = P.aux_out = true;
            break;
        case CUBLASLT_EPILOGUE_GELU_AUX_BIAS:
            P.gelu = P.aux_out = P.use_bias = true;
            break;
        case CUBLASLT_EPILOGUE_DGELU:
            P.dgelu = true;
            break;
        case CUBLASLT_EPILOGUE_DGELU_BGRAD:
            P.dgelu = P.bgrad_rows = true;
            break;
        case CUBLASLT_EPILOGUE_BGRADA:
            P.bgrada = true;
            break;
        case CUBLASLT_EPILOGUE_BGRADB:
            P.bgradb = true;
            break;
        default:
            return lt_fail(CUBLAS_STATUS_NOT_SUPPORTED, "epilogue %u not emulated", P.epi);
    }
    if (P.aux_out || P.dgelu) {
        if (d->aux_ld < P.m || d->aux_ld % 8 != 0)
            return lt_fail(CUBLAS_STATUS_INVALID_VALUE,
                           "EPILOGUE_AUX_LD %lld must be a multiple of 8 and >= rows of D (%lld)", (long long)d->aux_ld,
                           (long long)P.m);
        if (P.batch > 1 && d->aux_bstride % 8 != 0)
            return lt_fail(CUBLAS_STATUS_INVALID_VALUE, "EPILOGUE_AUX_BATCH_STRIDE %lld must be a multiple of 8",
                           (long long)d->aux_bstride);
    }
    return CUBLAS_STATUS_SUCCESS;
}

inline cublasStatus_t lt_check_ptr(const char* what, const void* p, size_t bytes) {
    if (!config().check_ptrs) return CUBLAS_STATUS_SUCCESS;
    Found f = lookup(p, bytes);
    if (!device_accessible(f.kind))
        return lt_fail(CUBLAS_STATUS_INVALID_VALUE, "cublasLtMatmul: %s %p is %s (on a GPU: illegal address)", what, p,
                       kind_name(f.kind));
    if (f.overrun)
        return lt_fail(CUBLAS_STATUS_INVALID_VALUE,
                       "cublasLtMatmul: %s %p + %zu bytes runs past its allocation (%p, %zu bytes)", what, p, bytes,
                       (void*)f.base, f.size);
    return CUBLAS_STATUS_SUCCESS;
}
// Bytes spanned by a column-major rows x cols matrix with leading dimension ld, batches.
inline size_t lt_span(int64_t rows, int64_t cols, int64_t ld, int64_t batch, int64_t stride, size_t es) {
    if (rows == 0 || cols == 0) return 0;
    int64_t last = (cols - 1) * ld + rows;
    if (batch > 1) last += (batch - 1) * stride;
    return (size_t)last * es;
}
// cublasLtGetStatusName's names.
constexpr CodeText kCublasStatusName[] = {
    CUEMU_NAMED(CUBLAS_STATUS_SUCCESS),          CUEMU_NAMED(CUBLAS_STATUS_NOT_INITIALIZED),
    CUEMU_NAMED(CUBLAS_STATUS_ALLOC_FAILED),     CUEMU_NAMED(CUBLAS_STATUS_INVALID_VALUE),
    CUEMU_NAMED(CUBLAS_STATUS_ARCH_MISMATCH),    CUEMU_NAMED(CUBLAS_STATUS_MAPPING_ERROR),
    CUEMU_NAMED(CUBLAS_STATUS_EXECUTION_FAILED), CUEMU_NAMED(CUBLAS_STATUS_INTERNAL_ERROR),
    CUEMU_NAMED(CUBLAS_STATUS_NOT_SUPPORTED),    CUEMU_NAMED(CUBLAS_STATUS_LICENSE_ERROR),
};
// cublasLtGetStatusString's texts.
constexpr CodeText kCublasStatusText[] = {
    {CUBLAS_STATUS_SUCCESS, "the operation completed successfully"},
    {CUBLAS_STATUS_NOT_INITIALIZED, "the library was not initialized"},
    {CUBLAS_STATUS_INVALID_VALUE, "an invalid value was used as an argument"},
    {CUBLAS_STATUS_NOT_SUPPORTED, "the functionality requested is not supported"},
    {CUBLAS_STATUS_EXECUTION_FAILED, "the GPU program failed to execute"},
    {CUBLAS_STATUS_INTERNAL_ERROR, "an internal operation failed"},
};
} // namespace cuemu

// ---------------------------------------------------------------- API
static inline const char* cublasLtGetStatusName(cublasStatus_t s) {
    return cuemu::code_text(cuemu::kCublasStatusName, s, "CUBLAS_STATUS_UNKNOWN");
}
static inline const char* cublasLtGetStatusString(cublasStatus_t s) {
    return cuemu::code_text(cuemu::kCublasStatusText, s, "cuBLAS error");
}
static inline size_t cublasLtGetVersion() { return 130000; }
static inline cublasStatus_t cublasLtCreate(cublasLtHandle_t* h) {
    if (!h) return CUBLAS_STATUS_INVALID_VALUE;
    *h = new cublasLtContext{cuemu::kLtMagic};
    return CUBLAS_STATUS_SUCCESS;
}
static inline cublasStatus_t cublasLtDestroy(cublasLtHandle_t h) {
    if (!h || h->magic != cuemu::kLtMagic) return CUBLAS_STATUS_NOT_INITIALIZED;
    h->magic = 0;
    delete h;
    return CUBLAS_STATUS_SUCCESS;
}
static inline cublasStatus_t cublasLtMatmulDescCreate(cublasLtMatmulDesc_t* d, cublasComputeType_t compute,
                                                      cudaDataType_t scale) {
    if (!d) return CUBLAS_STATUS_INVALID_VALUE;
    cublasLtMatmulDescOpaque_t* p = new cublasLtMatmulDescOpaque_t();
    p->magic = cuemu::kLtMagic;
    p->compute = compute;
    p->scale = scale;
    p->pointer_mode = CUBLASLT_POINTER_MODE_HOST;
    p->transa = p->transb = CUBLAS_OP_N;
    p->epilogue = CUBLASLT_EPILOGUE_DEFAULT;
    p->bias_type = p->aux_type = -1;
    *d = p;
    return CUBLAS_STATUS_SUCCESS;
}
static inline cublasStatus_t cublasLtMatmulDescDestroy(cublasLtMatmulDesc_t d) {
    if (!d || d->magic != cuemu::kLtMagic) return CUBLAS_STATUS_INVALID_VALUE;
    d->magic = 0;
    delete d;
    return CUBLAS_STATUS_SUCCESS;
}
static inline cublasStatus_t cublasLtMatmulDescSetAttribute(cublasLtMatmulDesc_t d, cublasLtMatmulDescAttributes_t attr,
                                                            const void* buf, size_t size) {
    using cuemu::get_attr;
    if (!d || d->magic != cuemu::kLtMagic) return CUBLAS_STATUS_INVALID_VALUE;
    bool ok = false;
    switch (attr) {
        case CUBLASLT_MATMUL_DESC_COMPUTE_TYPE:
            ok = get_attr(buf, size, d->compute);
            break;
        case CUBLASLT_MATMUL_DESC_SCALE_TYPE:
            ok = get_attr(buf, size, d->scale);
            break;
        case CUBLASLT_MATMUL_DESC_POINTER_MODE:
            ok = get_attr(buf, size, d->pointer_mode);
            break;
        case CUBLASLT_MATMUL_DESC_TRANSA:
            ok = get_attr(buf, size, d->transa);
            break;
        case CUBLASLT_MATMUL_DESC_TRANSB:
            ok = get_attr(buf, size, d->transb);
            break;
        case CUBLASLT_MATMUL_DESC_EPILOGUE:
            ok = get_attr(buf, size, d->epilogue);
            break;
        case CUBLASLT_MATMUL_DESC_BIAS_POINTER:
            ok = get_attr(buf, size, d->bias);
            break;
        case CUBLASLT_MATMUL_DESC_BIAS_BATCH_STRIDE:
            ok = get_attr(buf, size, d->bias_bstride);
            break;
        case CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_POINTER:
            ok = get_attr(buf, size, d->aux);
            break;
        case CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_LD:
            ok = get_attr(buf, size, d->aux_ld);
            break;
        case CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_BATCH_STRIDE:
            ok = get_attr(buf, size, d->aux_bstride);
            break;
        case CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_DATA_TYPE:
            ok = get_attr(buf, size, d->aux_type);
            break;
        case CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE:
            ok = get_attr(buf, size, d->bias_type);
            break;
        case CUBLASLT_MATMUL_DESC_FAST_ACCUM:
            ok = get_attr(buf, size, d->fast_accum);
            break;
        default:
            return cuemu::lt_fail(CUBLAS_STATUS_NOT_SUPPORTED, "matmul descriptor attribute %d not emulated",
                                  (int)attr);
    }
    if (!ok)
        return cuemu::lt_fail(CUBLAS_STATUS_INVALID_VALUE, "matmul descriptor attribute %d: wrong size %zu", (int)attr,
                              size);
    return CUBLAS_STATUS_SUCCESS;
}
static inline cublasStatus_t cublasLtMatrixLayoutCreate(cublasLtMatrixLayout_t* L, cudaDataType type, uint64_t rows,
                                                        uint64_t cols, int64_t ld) {
    if (!L) return CUBLAS_STATUS_INVALID_VALUE;
    cublasLtMatrixLayoutOpaque_t* p = new cublasLtMatrixLayoutOpaque_t();
    p->magic = cuemu::kLtMagic;
    p->type = (uint32_t)type;
    p->order = CUBLASLT_ORDER_COL;
    p->rows = rows;
    p->cols = cols;
    p->ld = ld;
    p->batch = 1;
    p->stride = 0;
    *L = p;
    return CUBLAS_STATUS_SUCCESS;
}
static inline cublasStatus_t cublasLtMatrixLayoutDestroy(cublasLtMatrixLayout_t L) {
    if (!L || L->magic != cuemu::kLtMagic) return CUBLAS_STATUS_INVALID_VALUE;
    L->magic = 0;
    delete L;
    return CUBLAS_STATUS_SUCCESS;
}
static inline cublasStatus_t cublasLtMatrixLayoutSetAttribute(cublasLtMatrixLayout_t L,
                                                              cublasLtMatrixLayoutAttribute_t attr, const void* buf,
                                                              size_t size) {
    using cuemu::get_attr;
    if (!L || L->magic != cuemu::kLtMagic) return CUBLAS_STATUS_INVALID_VALUE;
    bool ok = false;
    switch (attr) {
        case CUBLASLT_MATRIX_LAYOUT_TYPE:
            ok = get_attr(buf, size, L->type);
            break;
        case CUBLASLT_MATRIX_LAYOUT_ORDER:
            ok = get_attr(buf, size, L->order);
            break;
        case CUBLASLT_MATRIX_LAYOUT_ROWS:
            ok = get_attr(buf, size, L->rows);
            break;
        case CUBLASLT_MATRIX_LAYOUT_COLS:
            ok = get_attr(buf, size, L->cols);
            break;
        case CUBLASLT_MATRIX_LAYOUT_LD:
            ok = get_attr(buf, size, L->ld);
            break;
        case CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT:
            ok = get_attr(buf, size, L->batch);
            break;
        case CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET:
            ok = get_attr(buf, size, L->stride);
            break;
        default:
            return cuemu::lt_fail(CUBLAS_STATUS_NOT_SUPPORTED, "matrix layout attribute %d not emulated", (int)attr);
    }
    if (!ok)
        return cuemu::lt_fail(CUBLAS_STATUS_INVALID_VALUE, "matrix layout attribute %d: wrong size %zu", (int)attr,
                              size);
    return CUBLAS_STATUS_SUCCESS;
}
static inline cublasStatus_t cublasLtMatmulPreferenceCreate(cublasLtMatmulPreference_t* p) {
    if (!p) return CUBLAS_STATUS_INVALID_VALUE;
    *p = new cublasLtMatmulPreferenceOpaque_t{cuemu::kLtMagic, 0, 0, 0x7, {256, 256, 256, 256}, 0.0f, ~0ull};
    return CUBLAS_STATUS_SUCCESS;
}
static inline cublasStatus_t cublasLtMatmulPreferenceDestroy(cublasLtMatmulPreference_t p) {
    if (!p || p->magic != cuemu::kLtMagic) return CUBLAS_STATUS_INVALID_VALUE;
    p->magic = 0;
    delete p;
    return CUBLAS_STATUS_SUCCESS;
}
static inline cublasStatus_t cublasLtMatmulPreferenceSetAttribute(cublasLtMatmulPreference_t p,
                                                                  cublasLtMatmulPreferenceAttributes_t attr,
                                                                  const void* buf, size_t size) {
    if (!p || p->magic != cuemu::kLtMagic) return CUBLAS_STATUS_INVALID_VALUE;
    bool ok = false;
    if (attr == CUBLASLT_MATMUL_PREF_SEARCH_MODE)
        ok = cuemu::get_attr(buf, size, p->search_mode);
    else if (attr == CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES)
        ok = cuemu::get_attr(buf, size, p->max_workspace);
    else if (attr == CUBLASLT_MATMUL_PREF_REDUCTION_SCHEME_MASK)
        ok = cuemu::get_attr(buf, size, p->reduction_mask);
    else if (attr >= CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES && attr <= CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES)
        ok = cuemu::get_attr(buf, size, p->min_align[attr - CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES]);
    else if (attr == CUBLASLT_MATMUL_PREF_MAX_WAVES_COUNT)
        ok = cuemu::get_attr(buf, size, p->max_waves);
    else if (attr == CUBLASLT_MATMUL_PREF_IMPL_MASK)
        ok = cuemu::get_attr(buf, size, p->impl_mask);
    else
        return cuemu::lt_fail(CUBLAS_STATUS_NOT_SUPPORTED, "preference attribute %d not emulated", (int)attr);
    if (!ok)
        return cuemu::lt_fail(CUBLAS_STATUS_INVALID_VALUE, "preference attribute %d: wrong size %zu", (int)attr, size);
    return CUBLAS_STATUS_SUCCESS;
}
// One algorithm, no workspace, whenever the emulation can run the problem.
static inline cublasStatus_t cublasLtMatmulAlgoGetHeuristic(cublasLtHandle_t h, cublasLtMatmulDesc_t d,
                                                            cublasLtMatrixLayout_t A, cublasLtMatrixLayout_t B,
                                                            cublasLtMatrixLayout_t C, cublasLtMatrixLayout_t D,
                                                            cublasLtMatmulPreference_t pref, int requested,
                                                            cublasLtMatmulHeuristicResult_t results[], int* returned) {
    if (!h || h->magic != cuemu::kLtMagic) return CUBLAS_STATUS_NOT_INITIALIZED;
    if (!pref || pref->magic != cuemu::kLtMagic || requested < 1 || !results || !returned)
        return CUBLAS_STATUS_INVALID_VALUE;
    *returned = 0;
    cuemu::LtPlan P;
    cublasStatus_t st = cuemu::lt_plan(d, A, B, C, D, P);
    if (st != CUBLAS_STATUS_SUCCESS) return st;
    memset(&results[0], 0, sizeof results[0]);
    results[0].algo.data[0] = cuemu::kLtAlgoTag;
    // The algorithm remembers the alignments it was chosen for (see cublasLtMatmul).
    for (int q = 0; q < 4; q++) results[0].algo.data[1 + q] = pref->min_align[q];
    results[0].workspaceSize = 0;
    results[0].state = CUBLAS_STATUS_SUCCESS;
    results[0].wavesCount = 1.0f;
    *returned = 1;
    return CUBLAS_STATUS_SUCCESS;
}

// The emulation has one algorithm: every configuration attribute reads as 0 (id 0, no
// tile, no split-K), so a trainer that reports its algorithms prints something under emulation.
typedef enum {
    CUBLASLT_ALGO_CONFIG_ID = 0,
    CUBLASLT_ALGO_CONFIG_TILE_ID = 1,
    CUBLASLT_ALGO_CONFIG_SPLITK_NUM = 2,
    CUBLASLT_ALGO_CONFIG_REDUCTION_SCHEME = 3,
    CUBLASLT_ALGO_CONFIG_CTA_SWIZZLING = 4,
    CUBLASLT_ALGO_CONFIG_CUSTOM_OPTION = 5,
    CUBLASLT_ALGO_CONFIG_STAGES_ID = 6,
    CUBLASLT_ALGO_CONFIG_INNER_SHAPE_ID = 7,
    CUBLASLT_ALGO_CONFIG_CLUSTER_SHAPE_ID = 8,
} cublasLtMatmulAlgoConfigAttributes_t;
static inline cublasStatus_t cublasLtMatmulAlgoConfigGetAttribute(const cublasLtMatmulAlgo_t* algo,
                                                                  cublasLtMatmulAlgoConfigAttributes_t attr, void* buf,
                                                                  size_t size, size_t* written) {
    if (!algo || algo->data[0] != cuemu::kLtAlgoTag) return CUBLAS_STATUS_INVALID_VALUE;
    if ((int)attr < 0 || (int)attr > 8)
        return cuemu::lt_fail(CUBLAS_STATUS_INVALID_VALUE, "algo config attribute %d", (int)attr);
    size_t need = attr == CUBLASLT_ALGO_CONFIG_CLUSTER_SHAPE_ID || attr == CUBLASLT_ALGO_CONFIG_INNER_SHAPE_ID ? 2 : 4;
    if (written) *written = need;
    if (size == 0 && buf == NULL) return CUBLAS_STATUS_SUCCESS;
    if (size < need || !buf) return CUBLAS_STATUS_INVALID_VALUE;
    memset(buf, 0, need);
    return CUBLAS_STATUS_SUCCESS;
}

namespace cuemu {
inline void lt_compute(const LtPlan& P, const cublasLtMatmulDescOpaque_t* d, const cublasLtMatrixLayoutOpaque_t* Ad,
                       const cublasLtMatrixLayoutOpaque_t* Bd, const cublasLtMatrixLayoutOpaque_t* Cd,
                       const cublasLtMatrixLayoutOpaque_t* Dd, float al, float be, const void* A_, const void* B_,
                       const void* C_, void* D_);
} // namespace cuemu
static inline cublasStatus_t cublasLtMatmul(cublasLtHandle_t h, cublasLtMatmulDesc_t d, const void* alpha,
                                            const void* A_, cublasLtMatrixLayout_t Ad, const void* B_,
                                            cublasLtMatrixLayout_t Bd, const void* beta, const void* C_,
                                            cublasLtMatrixLayout_t Cd, void* D_, cublasLtMatrixLayout_t Dd,
                                            const cublasLtMatmulAlgo_t* algo, void* workspace, size_t workspaceSize,
                                            cudaStream_t stream, const char* file = __builtin_FILE(),
                                            int line = __builtin_LINE()) {
    using namespace cuemu;
    (void)workspace;
    (void)workspaceSize;
    if (!h || h->magic != kLtMagic) return CUBLAS_STATUS_NOT_INITIALIZED;
    LtPlan P;
    cublasStatus_t st = lt_plan(d, Ad, Bd, Cd, Dd, P);
    if (st != CUBLAS_STATUS_SUCCESS) return st;
    if (!alpha || !beta) return lt_fail(CUBLAS_STATUS_INVALID_VALUE, "alpha/beta must not be NULL");
    if ((st = lt_check_align(algo, 0, "A", A_)) || (st = lt_check_align(algo, 1, "B", B_)) ||
        (*(const float*)beta != 0.0f && (st = lt_check_align(algo, 2, "C", C_))) ||
        (st = lt_check_align(algo, 3, "D", D_)))
        return st;
    const float al = *(const float*)alpha, be = *(const float*)beta;
    const int64_t m = P.m, n = P.n, k = P.k;
    if (m == 0 || n == 0) return CUBLAS_STATUS_SUCCESS;
    size_t es = lt_size(P.atype), cs = lt_size(P.ctype);
    CUEMU_COST_HOOK(cost_gemm(m, n, k, (int)es, (int)cs, (int)P.epi));
    if (k > 0) {
        if ((st = lt_check_ptr("A", A_, lt_span(Ad->rows, Ad->cols, Ad->ld, P.batch, Ad->stride, es)))) return st;
        if ((st = lt_check_ptr("B", B_, lt_span(Bd->rows, Bd->cols, Bd->ld, P.batch, Bd->stride, es)))) return st;
    }
    if (be != 0.0f && (st = lt_check_ptr("C", C_, lt_span(m, n, Cd->ld, P.batch, Cd->stride, cs)))) return st;
    if ((st = lt_check_ptr("D", D_, lt_span(m, n, Dd->ld, P.batch, Dd->stride, cs)))) return st;
    size_t bs = lt_size(P.bias_type), xs = lt_size(P.aux_type);
    int64_t bias_len = P.bgradb ? n : m;
    if (P.use_bias || P.bgrad_rows || P.bgrada || P.bgradb) {
        if (!d->bias)
            return lt_fail(CUBLAS_STATUS_INVALID_VALUE, "epilogue %u needs CUBLASLT_MATMUL_DESC_BIAS_POINTER", P.epi);
        size_t span = (size_t)(bias_len + (P.batch - 1) * d->bias_bstride) * bs;
        if ((st = lt_check_ptr("bias", d->bias, span))) return st;
    }
    if (P.aux_out || P.dgelu) {
        if (!d->aux)
            return lt_fail(CUBLAS_STATUS_INVALID_VALUE, "epilogue %u needs CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_POINTER",
                           P.epi);
        if ((st = lt_check_ptr("aux", d->aux, lt_span(m, n, d->aux_ld, P.batch, d->aux_bstride, xs)))) return st;
    }
    // What it reads and writes (streams.h's hazard detector), then the product itself,
    // queued on the stream with copies of the descriptors (the caller may destroy them).
    // (exact bytes: the columns of each matrix, not the gaps up to its leading dimension)
    std::vector<Access> acc;
    if (k > 0) {
        matrix_access(acc, A_, Ad->rows, Ad->cols, Ad->ld, P.batch, Ad->stride, es, false);
        matrix_access(acc, B_, Bd->rows, Bd->cols, Bd->ld, P.batch, Bd->stride, es, false);
    }
    if (be != 0.0f) matrix_access(acc, C_, m, n, Cd->ld, P.batch, Cd->stride, cs, false);
    matrix_access(acc, D_, m, n, Dd->ld, P.batch, Dd->stride, cs, true);
    if (P.use_bias || P.bgrad_rows || P.bgrada || P.bgradb)
        matrix_access(acc, d->bias, bias_len, 1, bias_len, P.batch, d->bias_bstride, bs, !P.use_bias);
    if (P.aux_out || P.dgelu) matrix_access(acc, d->aux, m, n, d->aux_ld, P.batch, d->aux_bstride, xs, P.aux_out);
    issue(
        stream,
        [P, dc = *d, Ac = *Ad, Bc = *Bd, Cc = *Cd, Dc = *Dd, al, be, A_, B_, C_, D_] {
            lt_compute(P, &dc, &Ac, &Bc, &Cc, &Dc, al, be, A_, B_, C_, D_);
        },
        acc, "cublasLtMatmul", file, line);
    return CUBLAS_STATUS_SUCCESS;
}

namespace cuemu {
// D = epilogue(alpha op(A) op(B) + beta C), run when the stream reaches the matmul.
inline void lt_compute(const LtPlan& P, const cublasLtMatmulDescOpaque_t* d, const cublasLtMatrixLayoutOpaque_t* Ad,
                       const cublasLtMatrixLayoutOpaque_t* Bd, const cublasLtMatrixLayoutOpaque_t* Cd,
                       const cublasLtMatrixLayoutOpaque_t* Dd, float al, float be, const void* A_, const void* B_,
                       const void* C_, void* D_) {
    const int64_t m = P.m, n = P.n, k = P.k;
    size_t es = lt_size(P.atype), cs = lt_size(P.ctype);
    size_t bs = lt_size(P.bias_type), xs = lt_size(P.aux_type);
    std::vector<float> Am((size_t)m * k), Bn((size_t)n * k), bg;
    const int64_t lda = Ad->ld, ldb = Bd->ld, ldc = Cd->ld, ldd = Dd->ld;
    for (int64_t b = 0; b < P.batch; b++) {
        const char* A = (const char*)A_ + (size_t)(b * Ad->stride) * es;
        const char* B = (const char*)B_ + (size_t)(b * Bd->stride) * es;
        const char* C = (const char*)C_ + (size_t)(b * Cd->stride) * cs;
        char* D = (char*)D_ + (size_t)(b * Dd->stride) * cs;
        // op(A) as m rows of k, op(B) as n columns of k: both contiguous in k.
        for (int64_t i = 0; i < m; i++)
            for (int64_t p = 0; p < k; p++)
                Am[(size_t)i * k + p] = lt_load(P.atype, A, P.ta ? p + i * lda : i + p * lda);
        for (int64_t j = 0; j < n; j++)
            for (int64_t p = 0; p < k; p++)
                Bn[(size_t)j * k + p] = lt_load(P.atype, B, P.tb ? j + p * ldb : p + j * ldb);
        const char* bias = nullptr;
        if (d->bias) bias = (const char*)d->bias + (size_t)(b * d->bias_bstride) * bs;
        char* aux = nullptr;
        if (d->aux) aux = (char*)d->aux + (size_t)(b * d->aux_bstride) * xs;
        if (P.bgrad_rows) bg.assign((size_t)m, 0.0f);
        const int64_t TI = 64, TJ = 64;
        for (int64_t j0 = 0; j0 < n; j0 += TJ)
            for (int64_t i0 = 0; i0 < m; i0 += TI)
                for (int64_t j = j0; j < std::min(n, j0 + TJ); j++)
                    for (int64_t i = i0; i < std::min(m, i0 + TI); i++) {
                        float acc = lt_dot(&Am[(size_t)i * k], &Bn[(size_t)j * k], k);
                        float v = al * acc;
                        if (be != 0.0f) v += be * lt_load(P.ctype, C, i + j * ldc);
                        if (P.use_bias) v += lt_load(P.bias_type, bias, i);
                        if (P.aux_out) lt_store(P.aux_type, aux, i + j * d->aux_ld, v);
                        if (P.gelu) v = lt_gelu(v);
                        if (P.relu) v = v > 0.0f ? v : 0.0f;
                        if (P.dgelu) v *= lt_dgelu(lt_load(P.aux_type, aux, i + j * d->aux_ld));
                        lt_store(P.ctype, D, i + j * ldd, v);
                        if (P.bgrad_rows) bg[(size_t)i] += v;
                    }
        if (P.bgrad_rows)
            for (int64_t i = 0; i < m; i++) lt_store(P.bias_type, (void*)bias, i, bg[(size_t)i]);
        if (P.bgrada)
            for (int64_t i = 0; i < m; i++) {
                float s = 0.0f;
                for (int64_t p = 0; p < k; p++) s += Am[(size_t)i * k + p];
                lt_store(P.bias_type, (void*)bias, i, s);
            }
        if (P.bgradb)
            for (int64_t j = 0; j < n; j++) {
                float s = 0.0f;
                for (int64_t p = 0; p < k; p++) s += Bn[(size_t)j * k + p];
                lt_store(P.bias_type, (void*)bias, j, s);
            }
    }
}
} // namespace cuemu
