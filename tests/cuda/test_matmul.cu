/*
 * test_matmul.cu: llmc/cuda/matmul.cuh (cuBLASLt) against a CPU reference in fp64 on the same
 * bf16 inputs: forward with and without the bias epilogue, with a padded output row
 * stride, the fused GELU_AUX_BIAS path (or its fallback), backward to the input, backward
 * to the weight accumulating onto existing fp32 gradients (beta = 1), and the bias
 * gradient (deterministic column sums), and the fused bias-gradient epilogues (BGRADB on
 * the weight GEMM, DGELU_BGRAD on the input GEMM) with and without the fusion. Needs a GPU (or the CPU emulation's
 * cuBLASLt).
 */
#include "common.h"
#include "../../llmc/cuda/matmul.cuh"

// the fp64 references of the backward to the weight and the bias, accumulated onto their fp32
// starting values w0 (OC, IC) and b0 (OC): dout (N, ldo), first OC columns; inp (N, IC)
static double* ref_dweight(const float* w0, const float* dout, const float* inp, int N, int IC, int OC, int ldo) {
    double* r = (double*)malloc_check(8 * (size_t)OC * IC);
    for (int o = 0; o < OC; o++)
        for (int i = 0; i < IC; i++) {
            double s = w0[(size_t)o * IC + i];
            for (int n = 0; n < N; n++) s += (double)dout[(size_t)n * ldo + o] * inp[(size_t)n * IC + i];
            r[(size_t)o * IC + i] = s;
        }
    return r;
}

static double* ref_dbias(const float* b0, const float* dout, int N, int OC, int ldo) {
    double* r = (double*)malloc_check(8 * (size_t)OC);
    for (int o = 0; o < OC; o++) {
        double s = b0[o];
        for (int n = 0; n < N; n++) s += dout[(size_t)n * ldo + o];
        r[o] = s;
    }
    return r;
}

static void check_size(Gemm* gm, int N, int IC, int OC, int ldo) {
    bf16 *dinp, *dW, *dbias, *ddout;
    float* inp = ck_rand_bf16(&dinp, (size_t)N * IC, 1.0f);
    float* W = ck_rand_bf16(&dW, (size_t)OC * IC, 0.2f);
    float* bias = ck_rand_bf16(&dbias, OC, 0.5f);
    float* dout = ck_rand_bf16(&ddout, (size_t)N * ldo, 1.0f);
    bf16* dout_f = (bf16*)dev_alloc(2 * (size_t)N * ldo);
    double* ref = (double*)malloc_check(8 * (size_t)N * ldo);
    for (int withbias = 0; withbias < 2; withbias++) {
        cudaCheck(cudaMemset(dout_f, 0, 2 * (size_t)N * ldo));
        matmul_forward(gm, dout_f, ldo, dinp, dW, withbias ? dbias : NULL, N, IC, OC);
        for (int n = 0; n < N; n++)
            for (int o = 0; o < ldo; o++) {
                double s = 0;
                if (o < OC) {
                    for (int i = 0; i < IC; i++) s += (double)inp[(size_t)n * IC + i] * W[(size_t)o * IC + i];
                    if (withbias) s += bias[o];
                }
                ref[(size_t)n * ldo + o] = s;
            }
        check(ck_err_bf16(dout_f, ref, (size_t)N * ldo, 2e-3 * ck_maxabs(ref, (size_t)N * ldo), 8e-3) <= 1,
              "matmul_forward N=%d IC=%d OC=%d ldo=%d bias=%d", N, IC, OC, ldo, withbias);
    }
    // fused GeLU (pre-activation kept)
    bf16* dpre = (bf16*)dev_alloc(2 * (size_t)N * OC);
    bf16* dgel = (bf16*)dev_alloc(2 * (size_t)N * OC);
    for (int fused = 0; fused < 2; fused++) {
        matmul_forward_gelu(gm, dgel, dpre, dinp, dW, dbias, N, IC, OC, fused);
        double* rp = (double*)malloc_check(8 * (size_t)N * OC);
        double* rg = (double*)malloc_check(8 * (size_t)N * OC);
        const double k0 = sqrt(2.0 / M_PI);
        for (int n = 0; n < N; n++)
            for (int o = 0; o < OC; o++) {
                double s = bias[o];
                for (int i = 0; i < IC; i++) s += (double)inp[(size_t)n * IC + i] * W[(size_t)o * IC + i];
                rp[(size_t)n * OC + o] = s;
                rg[(size_t)n * OC + o] = 0.5 * s * (1 + tanh(k0 * (s + 0.044715 * s * s * s)));
            }
        check(ck_err_bf16(dpre, rp, (size_t)N * OC, 2e-3 * ck_maxabs(rp, (size_t)N * OC), 8e-3) <= 1 &&
                  ck_err_bf16(dgel, rg, (size_t)N * OC, 2e-3 * ck_maxabs(rg, (size_t)N * OC), 1e-2) <= 1,
              "matmul_forward_gelu N=%d IC=%d OC=%d %s (cuBLASLt epilogue %s)", N, IC, OC,
              fused ? "fused requested" : "unfused", gm->gelu_fused_ok == 1 ? "used" : "not used");
        free(rp);
        free(rg);
    }
    // backward to the input
    bf16* ddinp = (bf16*)dev_alloc(2 * (size_t)N * IC);
    matmul_backward_input(gm, ddinp, ddout, ldo, dW, N, IC, OC);
    double* rdi = (double*)malloc_check(8 * (size_t)N * IC);
    for (int n = 0; n < N; n++)
        for (int i = 0; i < IC; i++) {
            double s = 0;
            for (int o = 0; o < OC; o++) s += (double)dout[(size_t)n * ldo + o] * W[(size_t)o * IC + i];
            rdi[(size_t)n * IC + i] = s;
        }
    check(ck_err_bf16(ddinp, rdi, (size_t)N * IC, 2e-3 * ck_maxabs(rdi, (size_t)N * IC), 8e-3) <= 1,
          "matmul_backward_input N=%d IC=%d OC=%d", N, IC, OC);
    // backward to the weight, accumulating
    float* ddW;
    float* dW0 = ck_rand_f32(&ddW, (size_t)OC * IC, 1.0f);
    matmul_backward_weight(gm, ddW, ddout, ldo, dinp, N, IC, OC);
    double* rdw = ref_dweight(dW0, dout, inp, N, IC, OC, ldo);
    check(ck_err_f32(ddW, rdw, (size_t)OC * IC, 1e-4 * ck_maxabs(rdw, (size_t)OC * IC), 1e-4) <= 1,
          "matmul_backward_weight N=%d IC=%d OC=%d (fp32 += )", N, IC, OC);
    // bias gradient
    float* ddb;
    float* db0 = ck_rand_f32(&ddb, OC, 1.0f);
    bias_backward(gm, ddb, ddout, ldo, N, OC);
    double* rdb = ref_dbias(db0, dout, N, OC, ldo);
    check(ck_err_f32(ddb, rdb, OC, 1e-5 * ck_maxabs(rdb, OC), 1e-5) <= 1, "bias_backward N=%d OC=%d (fp32 += )", N, OC);
    // fused bias gradients: BGRADB on the weight GEMM, DGELU_BGRAD on the input GEMM (and
    // their fallbacks with the fusion off); every result against fp64
    for (int fused = 0; fused < 2; fused++) {
        gm->bgrad_fused = fused;
        float *ddW2, *ddb2;
        float* w0 = ck_rand_f32(&ddW2, (size_t)OC * IC, 1.0f);
        float* b0 = ck_rand_f32(&ddb2, OC, 1.0f);
        matmul_backward_weight_bias(gm, ddW2, ddb2, ddout, ldo, dinp, N, IC, OC);
        double* rw = ref_dweight(w0, dout, inp, N, IC, OC, ldo);
        double* rb = ref_dbias(b0, dout, N, OC, ldo);
        check(ck_err_f32(ddW2, rw, (size_t)OC * IC, 1e-4 * ck_maxabs(rw, (size_t)OC * IC), 1e-4) <= 1 &&
                  ck_err_f32(ddb2, rb, OC, 1e-5 * ck_maxabs(rb, OC), 1e-5) <= 1,
              "matmul_backward_weight_bias N=%d IC=%d OC=%d fusion %s (BGRADB epilogue %s)", N, IC, OC,
              fused ? "on" : "off", gm->bgrad_fused_ok == 1 ? "used" : "not used");
        // DGELU_BGRAD: pre (N, IC) is an arbitrary pre-activation, dinp = (dout @ W) * gelu'(pre)
        bf16* dpre2;
        float* pre = ck_rand_bf16(&dpre2, (size_t)N * IC, 2.0f);
        float* dbg;
        float* bg0 = ck_rand_f32(&dbg, IC, 1.0f);
        bf16* ddi2 = (bf16*)dev_alloc(2 * (size_t)N * IC);
        matmul_backward_input_dgelu(gm, ddi2, dbg, ddout, ldo, dW, dpre2, N, IC, OC, 1);
        double* rdi2 = (double*)malloc_check(8 * (size_t)N * IC);
        double* rbg = (double*)malloc_check(8 * (size_t)IC);
        const double k0 = sqrt(2.0 / M_PI), k1 = 0.044715;
        for (int i = 0; i < IC; i++) rbg[i] = bg0[i];
        for (int n = 0; n < N; n++)
            for (int i = 0; i < IC; i++) {
                double x = pre[(size_t)n * IC + i], u = k0 * (x + k1 * x * x * x), th = tanh(u);
                double gg = 0.5 * (1 + th) + 0.5 * x * (1 - th * th) * k0 * (1 + 3 * k1 * x * x);
                double v = rdi[(size_t)n * IC + i] * gg;
                rdi2[(size_t)n * IC + i] = v;
                rbg[i] += v;
            }
        check(ck_err_bf16(ddi2, rdi2, (size_t)N * IC, 2e-3 * ck_maxabs(rdi2, (size_t)N * IC), 1e-2) <= 1 &&
                  ck_err_f32(dbg, rbg, IC, 4e-3 * ck_maxabs(rbg, IC), 1e-2) <= 1,
              "matmul_backward_input_dgelu N=%d IC=%d OC=%d fusion %s (DGELU_BGRAD epilogue %s)", N, IC, OC,
              fused ? "on" : "off", gm->bgrad_fused_ok == 1 ? "used" : "not used");
        gm->bgrad_fused_ok = -1;
        free(w0);
        free(b0);
        free(rw);
        free(rb);
        free(pre);
        free(bg0);
        free(rdi2);
        free(rbg);
        dev_free(ddW2);
        dev_free(ddb2);
        dev_free(dpre2);
        dev_free(dbg);
        dev_free(ddi2);
    }
    gm->bgrad_fused = 1;
    free(inp);
    free(W);
    free(bias);
    free(dout);
    free(ref);
    free(rdi);
    free(dW0);
    free(rdw);
    free(db0);
    free(rdb);
    dev_free(dinp);
    dev_free(dW);
    dev_free(dbias);
    dev_free(ddout);
    dev_free(dout_f);
    dev_free(dpre);
    dev_free(dgel);
    dev_free(ddinp);
    dev_free(ddW);
    dev_free(ddb);
}

int main(void) {
    Gemm gm;
    gemm_init(&gm, 0, 4096);
    check_size(&gm, 8, 64, 96, 96);
    check_size(&gm, 37, 40, 50, 56);
    check_size(&gm, 130, 128, 384, 384);
    gemm_free(&gm);
    return test_summary();
}
