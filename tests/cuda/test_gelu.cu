/*
 * test_gelu.cu: llmc/cuda/gelu.cuh (tanh-approximation GeLU forward and backward) against
 * a CPU reference in fp64 on the same bf16 inputs, at sizes that are not multiples of
 * the block, with the backward also in place (dinp aliasing dout); with n % 8 == 0 the
 * scalar path on misaligned copies must give the packed path's bits, and the fp32 <-> bf16
 * casts of cuda_utils.cuh (both paths) are checked to round-trip bf16 values exactly.
 */
#include "common.h"
#include "../../llmc/cuda/gelu.cuh"

int main(void) {
    const size_t sizes[] = {1, 1000, 4099, 70001, 65536};
    for (size_t k = 0; k < sizeof(sizes) / sizeof(sizes[0]); k++) {
        size_t n = sizes[k];
        bf16 *dx, *dg;
        float* x = ck_rand_bf16(&dx, n, 4.0f);
        float* g = ck_rand_bf16(&dg, n, 1.0f);
        bf16* dout = (bf16*)dev_alloc(2 * n);
        double* ref = (double*)malloc_check(8 * n);
        const double k0 = sqrt(2.0 / M_PI);
        for (size_t i = 0; i < n; i++)
            ref[i] = 0.5 * x[i] * (1.0 + tanh(k0 * (x[i] + 0.044715 * x[i] * (double)x[i] * x[i])));
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
        if (n % 8 == 0) { // scalar path on misaligned copies: the packed path's bits
            void *b1, *b2, *b3;
            bf16* mx = (bf16*)ck_misaligned(&b1, dx, 2 * n, 2);
            bf16* mo = (bf16*)ck_misaligned(&b2, dout, 2 * n, 2);
            bf16* mg = (bf16*)ck_misaligned(&b3, dg, 2 * n, 2);
            gelu_forward(dout, dx, n, 0);
            gelu_forward(mo, mx, n, 0);
            check(ck_same_bits(mo, dout, 2 * n), "gelu_forward n=%zu misaligned (scalar path): the packed path's bits",
                  n);
            gelu_backward(dout, dx, dg, n, 0);
            gelu_backward(mo, mx, mg, n, 0);
            check(ck_same_bits(mo, dout, 2 * n), "gelu_backward n=%zu misaligned (scalar path): the packed path's bits",
                  n);
            // the casts (cuda_utils.cuh) on the same sizes: fp32 -> bf16 -> fp32 is exact on bf16 values
            float* f = (float*)dev_alloc(4 * n);
            bf16* h = (bf16*)dev_alloc(2 * n);
            cast_bf16_to_f32(f, dx, n, 0);
            cast_f32_to_bf16(h, f, n, 0);
            float* hf = ck_down_f32(f, n);
            int exact = ck_same_bits(h, dx, 2 * n) && memcmp(hf, x, 4 * n) == 0;
            void* b4;
            float* mf = (float*)ck_misaligned(&b4, f, 4 * n, 4);
            cast_f32_to_bf16(mo, mf, n, 0);
            cast_bf16_to_f32(mf, mo, n, 0);
            check(exact && ck_same_bits(mo, dx, 2 * n) && ck_same_bits(mf, f, 4 * n),
                  "cast_bf16_to_f32 / cast_f32_to_bf16 n=%zu exact, packed and misaligned", n);
            free(hf);
            dev_free(f);
            dev_free(h);
            dev_free(b4);
            dev_free(b1);
            dev_free(b2);
            dev_free(b3);
        }
        free(x);
        free(g);
        free(out);
        free(din);
        free(ref);
        dev_free(dx);
        dev_free(dg);
        dev_free(dout);
    }
    return test_summary();
}
