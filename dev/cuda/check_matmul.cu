/*
 * check_matmul.cu: llmc/matmul.cuh (cuBLASLt) against a CPU reference in fp64 on the same
 * bf16 inputs: forward with and without the bias epilogue, with a padded output row
 * stride, the fused GELU_AUX_BIAS path (or its fallback), backward to the input, backward
 * to the weight accumulating onto existing fp32 gradients (beta = 1), and the bias
 * gradient (deterministic column sums). Needs a GPU (or the CPU emulation's cuBLASLt).
 */
#include "check_common.h"
#include "../../llmc/matmul.cuh"

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
        for (int n = 0; n < N; n++) for (int o = 0; o < ldo; o++) {
            double s = 0;
            if (o < OC) { for (int i = 0; i < IC; i++) s += (double)inp[(size_t)n * IC + i] * W[(size_t)o * IC + i]; if (withbias) s += bias[o]; }
            ref[(size_t)n * ldo + o] = s;
        }
        float* got = ck_down_bf16(dout_f, (size_t)N * ldo);
        check(ck_err(got, ref, (size_t)N * ldo, 2e-3 * ck_maxabs(ref, (size_t)N * ldo), 8e-3) <= 1,
           "matmul_forward N=%d IC=%d OC=%d ldo=%d bias=%d", N, IC, OC, ldo, withbias);
        free(got);
    }
    // fused GeLU (pre-activation kept)
    bf16* dpre = (bf16*)dev_alloc(2 * (size_t)N * OC);
    bf16* dgel = (bf16*)dev_alloc(2 * (size_t)N * OC);
    for (int fused = 0; fused < 2; fused++) {
        matmul_forward_gelu(gm, dgel, dpre, dinp, dW, dbias, N, IC, OC, fused);
        double* rp = (double*)malloc_check(8 * (size_t)N * OC);
        double* rg = (double*)malloc_check(8 * (size_t)N * OC);
        const double k0 = sqrt(2.0 / M_PI);
        for (int n = 0; n < N; n++) for (int o = 0; o < OC; o++) {
            double s = bias[o];
            for (int i = 0; i < IC; i++) s += (double)inp[(size_t)n * IC + i] * W[(size_t)o * IC + i];
            rp[(size_t)n * OC + o] = s;
            rg[(size_t)n * OC + o] = 0.5 * s * (1 + tanh(k0 * (s + 0.044715 * s * s * s)));
        }
        float* gp = ck_down_bf16(dpre, (size_t)N * OC);
        float* gg = ck_down_bf16(dgel, (size_t)N * OC);
        check(ck_err(gp, rp, (size_t)N * OC, 2e-3 * ck_maxabs(rp, (size_t)N * OC), 8e-3) <= 1 &&
           ck_err(gg, rg, (size_t)N * OC, 2e-3 * ck_maxabs(rg, (size_t)N * OC), 1e-2) <= 1,
           "matmul_forward_gelu N=%d IC=%d OC=%d %s (cuBLASLt epilogue %s)", N, IC, OC, fused ? "fused requested" : "unfused",
           gm->gelu_fused_ok == 1 ? "used" : "not used");
        free(rp); free(rg); free(gp); free(gg);
    }
    // backward to the input
    bf16* ddinp = (bf16*)dev_alloc(2 * (size_t)N * IC);
    matmul_backward_input(gm, ddinp, ddout, ldo, dW, N, IC, OC);
    double* rdi = (double*)malloc_check(8 * (size_t)N * IC);
    for (int n = 0; n < N; n++) for (int i = 0; i < IC; i++) {
        double s = 0;
        for (int o = 0; o < OC; o++) s += (double)dout[(size_t)n * ldo + o] * W[(size_t)o * IC + i];
        rdi[(size_t)n * IC + i] = s;
    }
    float* gdi = ck_down_bf16(ddinp, (size_t)N * IC);
    check(ck_err(gdi, rdi, (size_t)N * IC, 2e-3 * ck_maxabs(rdi, (size_t)N * IC), 8e-3) <= 1, "matmul_backward_input N=%d IC=%d OC=%d", N, IC, OC);
    // backward to the weight, accumulating
    float* ddW;
    float* dW0 = ck_rand_f32(&ddW, (size_t)OC * IC, 1.0f);
    matmul_backward_weight(gm, ddW, ddout, ldo, dinp, N, IC, OC);
    double* rdw = (double*)malloc_check(8 * (size_t)OC * IC);
    for (int o = 0; o < OC; o++) for (int i = 0; i < IC; i++) {
        double s = dW0[(size_t)o * IC + i];
        for (int n = 0; n < N; n++) s += (double)dout[(size_t)n * ldo + o] * inp[(size_t)n * IC + i];
        rdw[(size_t)o * IC + i] = s;
    }
    float* gdw = ck_down_f32(ddW, (size_t)OC * IC);
    check(ck_err(gdw, rdw, (size_t)OC * IC, 1e-4 * ck_maxabs(rdw, (size_t)OC * IC), 1e-4) <= 1, "matmul_backward_weight N=%d IC=%d OC=%d (fp32 += )", N, IC, OC);
    // bias gradient
    float* ddb;
    float* db0 = ck_rand_f32(&ddb, OC, 1.0f);
    bias_backward(gm, ddb, ddout, ldo, N, OC);
    double* rdb = (double*)malloc_check(8 * OC);
    for (int o = 0; o < OC; o++) { double s = db0[o]; for (int n = 0; n < N; n++) s += dout[(size_t)n * ldo + o]; rdb[o] = s; }
    float* gdb = ck_down_f32(ddb, OC);
    check(ck_err(gdb, rdb, OC, 1e-5 * ck_maxabs(rdb, OC), 1e-5) <= 1, "bias_backward N=%d OC=%d (fp32 += )", N, OC);
    free(inp); free(W); free(bias); free(dout); free(ref); free(rdi); free(gdi); free(dW0); free(rdw); free(gdw); free(db0); free(rdb); free(gdb);
    dev_free(dinp); dev_free(dW); dev_free(dbias); dev_free(ddout); dev_free(dout_f); dev_free(dpre); dev_free(dgel); dev_free(ddinp);
    dev_free(ddW); dev_free(ddb);
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
