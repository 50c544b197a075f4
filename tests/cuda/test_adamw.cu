/*
 * test_adamw.cu: llmc/cuda/adamw.cuh against train_gpt.c's AdamW formula evaluated on the
 * CPU in fp32 (the same operations in the same order: results must agree to a few fp32
 * ulps), with and without weight decay and clipping scale, and the bf16 copy equal to
 * the round-to-nearest of the new master weight; with n % 8 == 0 the scalar path on
 * misaligned copies must give the packed path's bits.
 */
#include "common.h"
#include "../../llmc/cuda/adamw.cuh"

int main(void) {
    const size_t sizes[] = {1, 1000, 5003, 4096};
    for (size_t k = 0; k < sizeof(sizes) / sizeof(sizes[0]); k++) {
        size_t n = sizes[k];
        for (int variant = 0; variant < 2; variant++) {
            float *dp, *dgr, *dm, *dv;
            float* p = ck_rand_f32(&dp, n, 0.1f);
            float* gr = ck_rand_f32(&dgr, n, 0.01f);
            float* m = ck_rand_f32(&dm, n, 0.001f);
            float* v = ck_rand_f32(&dv, n, 1e-5f);
            for (size_t i = 0; i < n; i++) v[i] = fabsf(v[i]);
            cudaCheck(cudaMemcpy(dv, v, 4 * n, cudaMemcpyHostToDevice));
            bf16* dpb = (bf16*)dev_alloc(2 * n);
            float lr = 3e-4f, b1 = 0.9f, b2 = 0.95f, eps = 1e-8f, wd = variant ? 0.1f : 0.0f,
                  gscale = variant ? 0.37f : 1.0f;
            int t = 7;
            float bc1 = (float)(1.0 - pow(0.9, t)), bc2 = (float)(1.0 - pow(0.95, t));
            adamw_update(dp, dpb, dgr, dm, dv, n, lr, b1, b2, bc1, bc2, eps, wd, gscale, 0);
            double* rp = (double*)malloc_check(8 * n);
            double* rm = (double*)malloc_check(8 * n);
            double* rv = (double*)malloc_check(8 * n);
            double* rb = (double*)malloc_check(8 * n);
            for (size_t i = 0; i < n; i++) {
                float g = gr[i] * gscale;
                float mi = b1 * m[i] + (1.0f - b1) * g, vi = b2 * v[i] + (1.0f - b2) * g * g;
                float pi = p[i];
                pi -= lr * ((mi / bc1) / (sqrtf(vi / bc2) + eps) + wd * pi);
                rp[i] = pi;
                rm[i] = mi;
                rv[i] = vi;
                rb[i] = ck_bf(pi);
            }
            float* gp = ck_down_f32(dp, n);
            float* gm = ck_down_f32(dm, n);
            float* gv = ck_down_f32(dv, n);
            float* gb = ck_down_bf16(dpb, n);
            check(ck_err(gp, rp, n, 1e-9, 1e-6) <= 1 && ck_err(gm, rm, n, 1e-12, 1e-6) <= 1 &&
                      ck_err(gv, rv, n, 1e-15, 1e-6) <= 1,
                  "adamw n=%zu wd=%.1f gscale=%.2f: master, m, v", n, wd, gscale);
            check(ck_err(gb, rb, n, 0, 1e-6) <= 1 || ck_err(gb, rp, n, 0, 4e-3) <= 1,
                  "adamw n=%zu: bf16 copy is the rounded master", n);
            if (n % 8 == 0) { // the scalar path on a misaligned master: the packed path's bits
                void *q1, *q2;
                float* p0 = (float*)ck_up(p, 4 * n);
                float* m0 = (float*)ck_up(m, 4 * n);
                float* v0 = (float*)ck_up(v, 4 * n);
                float* mp = (float*)ck_misaligned(&q1, p0, 4 * n, 4);
                bf16* mb = (bf16*)ck_misaligned(&q2, dpb, 2 * n, 2);
                adamw_update(mp, mb, dgr, m0, v0, n, lr, b1, b2, bc1, bc2, eps, wd, gscale, 0);
                check(ck_same_bits(mp, dp, 4 * n) && ck_same_bits(m0, dm, 4 * n) && ck_same_bits(v0, dv, 4 * n) &&
                          ck_same_bits(mb, dpb, 2 * n),
                      "adamw n=%zu wd=%.1f misaligned (scalar path): the packed path's bits", n, wd);
                dev_free(q1);
                dev_free(q2);
                dev_free(p0);
                dev_free(m0);
                dev_free(v0);
            }
            free(p);
            free(gr);
            free(m);
            free(v);
            free(rp);
            free(rm);
            free(rv);
            free(rb);
            free(gp);
            free(gm);
            free(gv);
            free(gb);
            dev_free(dp);
            dev_free(dgr);
            dev_free(dm);
            dev_free(dv);
            dev_free(dpb);
        }
    }
    return test_summary();
}
