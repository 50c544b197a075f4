/*
 * tests/cuda/cudnn_attention.cu: cuDNN's fused attention (llmc/cuda/attention_cudnn.h) against the
 * project's own flash kernels (tensor cores where the head size has one, CUDA cores
 * otherwise) at the shapes the presets train, T = 2048 and head sizes 64 (125m), 128
 * (1.3b) and 160 (530b): output, log-sum-exp and dq, dk, dv compared element by element
 * within bf16 tolerance, head 0 of batch 0 also against an fp64 CPU reference, then both
 * timed (CUDA events, median of 10) and reported as TFLOP/s of causal attention.
 * GPU only, needs a USE_CUDNN build: `make cuda-cudnn-attention` (dev/gpu_check.sh runs it).
 * Prints `N passed, M failed` last.
 */
#include "common.h"
#include "../../llmc/cuda/attention.cuh"
#include "../../llmc/cuda/attention_tc.cuh"
#include "../../llmc/cuda/attention_cudnn.h"

static int cmp_f(const float* a, const float* b, size_t n, double atol, double rtol, double* worst) {
    *worst = 0;
    for (size_t i = 0; i < n; i++) {
        double d = fabs((double)a[i] - b[i]);
        double e = d / (atol + rtol * fabs((double)b[i]));
        if (!(e <= *worst)) *worst = e;
    }
    return *worst <= 1.0;
}

static double maxabs_f(const float* x, size_t n) {
    double m = 0;
    for (size_t i = 0; i < n; i++)
        if (fabs(x[i]) > m) m = fabs(x[i]);
    return m;
}

typedef struct {
    cudaEvent_t a, b;
} Timer;
static float median10(float* v) {
    for (int i = 1; i < 10; i++)
        for (int j = i; j > 0 && v[j] < v[j - 1]; j--) {
            float t = v[j];
            v[j] = v[j - 1];
            v[j - 1] = t;
        }
    return 0.5f * (v[4] + v[5]);
}

// the slice (T, hs) of head 0, batch 0 of a (B, T, stride) buffer at column offset off
static void head_slice(const float* x, int T, int stride, int off, int hs, float* dst) {
    for (int t = 0; t < T; t++)
        for (int i = 0; i < hs; i++) dst[(size_t)t * hs + i] = x[(size_t)t * stride + off + i];
}

// one implementation's results on the device: out (B, T, NH hs), lse (B, NH, T), dqkv (B, T, 3 NH hs)
typedef struct {
    bf16* out;
    float* lse;
    bf16* dqkv;
} Outs;

static Outs outs_alloc(size_t nout, size_t nl, size_t nqkv) {
    Outs o = {(bf16*)dev_alloc(2 * nout), (float*)dev_alloc(4 * nl), (bf16*)dev_alloc(2 * nqkv)};
    return o;
}

static void outs_free(Outs* o) {
    dev_free(o->out);
    dev_free(o->lse);
    dev_free(o->dqkv);
}

// the own flash kernels, on tensor cores where tc (the head size has a kernel): forward, or
// backward from its output
static void own_pass(int backward, int tc, Outs* o, float* scratch, const bf16* qkv, const bf16* dout, int B, int T,
                     int NH, int hs) {
    if (backward && tc)
        attention_backward_tc(o->dqkv, scratch, dout, o->out, qkv, o->lse, B, T, NH, hs, 0);
    else if (backward)
        attention_backward_flash(o->dqkv, scratch, dout, o->out, qkv, o->lse, B, T, NH, hs, 0);
    else if (tc)
        attention_forward_tc(o->out, o->lse, qkv, B, T, NH, hs, 0);
    else
        attention_forward_flash(o->out, o->lse, qkv, B, T, NH, hs, 0);
}

static void run_shape(int B, int T, int NH, int hs) {
    int Cl = NH * hs, C3 = 3 * Cl;
    size_t nqkv = (size_t)B * T * C3, nout = (size_t)B * T * Cl, nl = (size_t)B * NH * T;
    bf16 *d_qkv, *d_dout;
    float* qkv = ck_rand_bf16(&d_qkv, nqkv, 1.5f);
    float* dout = ck_rand_bf16(&d_dout, nout, 1.0f);
    Outs mine = outs_alloc(nout, nl, nqkv), dnn = outs_alloc(nout, nl, nqkv);
    float* scratch = (float*)dev_alloc(4 * nl);
    int tc = flash_tc_supported(hs);
    const char* own = tc ? "own tensor-core flash" : "own CUDA-core flash";
    char why[512];
    CudnnAttn* ca = cudnn_attn_create(B, T, NH, hs, 0, why, sizeof why);
    check(ca != NULL, "cuDNN builds graphs for B=%d T=%d heads=%d hs=%d%s%s", B, T, NH, hs, ca ? "" : ": ",
          ca ? "" : why);
    if (ca == NULL) return;
    own_pass(0, tc, &mine, scratch, d_qkv, d_dout, B, T, NH, hs);
    own_pass(1, tc, &mine, scratch, d_qkv, d_dout, B, T, NH, hs);
    cudaCheck(cudaMemset(dnn.dqkv, 0xFF, 2 * nqkv)); // NaN fill: every element must be written
    cudnn_attn_forward(ca, dnn.out, dnn.lse, d_qkv, 0);
    cudnn_attn_backward(ca, dnn.dqkv, d_dout, dnn.out, d_qkv, dnn.lse, 0);
    cudaCheck(cudaDeviceSynchronize());
    float *ho = ck_down_bf16(mine.out, nout), *hO = ck_down_bf16(dnn.out, nout);
    float *hl = ck_down_f32(mine.lse, nl), *hL = ck_down_f32(dnn.lse, nl);
    float *hg = ck_down_bf16(mine.dqkv, nqkv), *hG = ck_down_bf16(dnn.dqkv, nqkv);
    double w = 0;
    int ok;
    // bf16 tolerance: two bf16 roundings of the output (~2 * 2^-8 relative) plus fp32 order
    ok = cmp_f(hO, ho, nout, 1e-2 * maxabs_f(ho, nout), 1e-2, &w);
    check(ok, "hs=%d T=%d: cuDNN output vs %s (error %.2f of tolerance)", hs, T, own, w);
    ok = cmp_f(hL, hl, nl, 1e-3, 1e-3, &w);
    check(ok, "hs=%d T=%d: cuDNN log-sum-exp vs %s (error %.2f of tolerance)", hs, T, own, w);
    ok = cmp_f(hG, hg, nqkv, 2e-2 * maxabs_f(hg, nqkv), 3e-2, &w);
    check(ok, "hs=%d T=%d: cuDNN dq, dk, dv vs %s (error %.2f of tolerance)", hs, T, own, w);
    // head 0, batch 0 against fp64
    size_t nh = (size_t)T * hs;
    double *ro = (double*)malloc_check(8 * nh), *rl = (double*)malloc_check(8 * (size_t)T);
    double *rq = (double*)malloc_check(8 * nh), *rk = (double*)malloc_check(8 * nh),
           *rv = (double*)malloc_check(8 * nh);
    ck_attention_head(qkv, dout, T, Cl, hs, ro, rl, rq, rk, rv);
    float* s = (float*)malloc_check(4 * nh);
    double ao = 2e-3 * ck_maxabs(ro, nh);
    head_slice(hO, T, Cl, 0, hs, s);
    check(ck_err(s, ro, nh, ao, 1e-2) <= 1, "hs=%d T=%d: cuDNN output of head 0 vs fp64", hs, T);
    check(ck_err(hL, rl, T, 1e-3, 1e-3) <= 1, "hs=%d T=%d: cuDNN log-sum-exp of head 0 vs fp64", hs, T);
    double* refs[3] = {rq, rk, rv};
    const char* names[3] = {"dq", "dk", "dv"};
    for (int j = 0; j < 3; j++) {
        head_slice(hG, T, C3, j * Cl, hs, s);
        double ad = 2e-3 * ck_maxabs(refs[j], nh);
        double e = ck_err(s, refs[j], nh, ad, 2e-2);
        check(e <= 1, "hs=%d T=%d: cuDNN %s of head 0 vs fp64 (error %.2f of tolerance)", hs, T, names[j], e);
    }
    // timing
    Timer tm;
    cudaCheck(cudaEventCreate(&tm.a));
    cudaCheck(cudaEventCreate(&tm.b));
    float tf[4][10];
    for (int rep = 0; rep < 12; rep++) {
        for (int k = 0; k < 4; k++) {
            cudaCheck(cudaEventRecord(tm.a, 0));
            if (k == 0)
                cudnn_attn_forward(ca, dnn.out, dnn.lse, d_qkv, 0);
            else if (k == 1)
                cudnn_attn_backward(ca, dnn.dqkv, d_dout, dnn.out, d_qkv, dnn.lse, 0);
            else
                own_pass(k == 3, tc, &mine, scratch, d_qkv, d_dout, B, T, NH, hs);
            cudaCheck(cudaEventRecord(tm.b, 0));
            cudaCheck(cudaEventSynchronize(tm.b));
            float ms;
            cudaCheck(cudaEventElapsedTime(&ms, tm.a, tm.b));
            if (rep >= 2) tf[k][rep - 2] = ms;
        }
    }
    // causal attention FLOPs: forward 2 GEMMs of B*NH*T*T/2*hs MACs; backward 2.5x forward
    double fwd = 4.0 * B * NH * (double)T * T / 2 * hs, bwd = 2.5 * fwd;
    const char* kinds[4] = {"cudnn forward", "cudnn backward", tc ? "own-tc forward" : "own-flash forward",
                            tc ? "own-tc backward" : "own-flash backward"};
    for (int k = 0; k < 4; k++) {
        float ms = median10(tf[k]);
        printf("BENCH\t%s\tB=%d T=%d heads=%d hs=%d\t%.3f ms\t%.1f TFLOP/s\n", kinds[k], B, T, NH, hs, ms,
               (k % 2 == 0 ? fwd : bwd) / (ms * 1e-3) / 1e12);
    }
    printf("cuDNN backward: %s\n",
           cudnn_attn_deterministic(ca) ? "deterministic algorithm" : "non-deterministic algorithm");
    cudnn_attn_destroy(ca);
    free(qkv);
    free(dout);
    free(ho);
    free(hO);
    free(hl);
    free(hL);
    free(hg);
    free(hG);
    free(ro);
    free(rl);
    free(rq);
    free(rk);
    free(rv);
    free(s);
    dev_free(d_qkv);
    dev_free(d_dout);
    outs_free(&mine);
    outs_free(&dnn);
    dev_free(scratch);
}

int main(void) {
    printf("cuDNN %zu\n", cudnn_attn_version());
    run_shape(4, 2048, 12, 64);  // 125m, micro-batch 4
    run_shape(4, 2048, 16, 128); // 1.3b, micro-batch 4
    run_shape(1, 2048, 16, 160); // 530b, TP 8: 128 heads / 8 per rank
    return test_summary();
}
