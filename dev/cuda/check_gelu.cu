/*
 * check_gelu.cu: llmc/gelu.cuh (tanh-approximation GeLU forward and backward) against
 * a CPU reference in fp64 on the same bf16 inputs, at sizes that are not multiples of
 * the block, with the backward also in place (dinp aliasing dout).
 */
#include "check_common.h"
#include "../../llmc/gelu.cuh"

int main(void) {
    const size_t sizes[] = {1, 1000, 4099, 70001};
    for (size_t k = 0; k < sizeof(sizes) / sizeof(sizes[0]); k++) {
        size_t n = sizes[k];
        bf16 *dx, *dg;
        float* x = ck_rand_bf16(&dx, n, 4.0f);
        float* g = ck_rand_bf16(&dg, n, 1.0f);
        bf16* dout = (bf16*)dev_alloc(2 * n);
        double* ref = (double*)malloc_check(8 * n);
        const double k0 = sqrt(2.0 / M_PI);
        for (size_t i = 0; i < n; i++) ref[i] = 0.5 * x[i] * (1.0 + tanh(k0 * (x[i] + 0.044715 * x[i] * (double)x[i] * x[i])));
        gelu_forward(dout, dx, n, 0);
        float* out = ck_down_bf16(dout, n);
        check(ck_err(out, ref, n, 1e-4, 8e-3) <= 1, "gelu_forward n=%zu", n);
        for (size_t i = 0; i < n; i++) {
            double xx = x[i], u = k0 * (xx + 0.044715 * xx * xx * xx), th = tanh(u);
            double d = 0.5 * (1 + th) + 0.5 * xx * (1 - th * th) * k0 * (1 + 3 * 0.044715 * xx * xx);
            ref[i] = g[i] * d;
        }
        gelu_backward(dg, dx, dg, n, 0); // in place
        float* din = ck_down_bf16(dg, n);
        check(ck_err(din, ref, n, 1e-4, 8e-3) <= 1, "gelu_backward n=%zu (in place)", n);
        free(x); free(g); free(out); free(din); free(ref);
        dev_free(dx); dev_free(dg); dev_free(dout);
    }
    return test_summary();
}
