/*
 * test_layernorm.cu: llmc/cuda/layernorm.cuh against a CPU reference (fp64 on the same bf16
 * inputs): layernorm_forward, residual_forward (with and without the fused LayerNorm),
 * layernorm_backward (dinp with the residual gradient fused in, also in place; dw/db
 * accumulated onto existing values, inside the backward kernel). Sizes include C not a
 * multiple of 8 (the scalar instantiations), C up to the 20480 of the 530b preset (5 packs
 * per thread, 160 KiB of dynamic shared memory), and N large enough for the dw/db tree to
 * have both levels (512 blocks, 16 clusters). With C % 8 == 0 every kernel is also run on
 * misaligned copies (the scalar path) and must give the packed path's bits. One scratch
 * serves every size (the tickets must come back to 0 after every launch). make
 * cuda-check-emu also runs it with CUEMU_MAX_GRID=3 (every block takes many rows).
 */
#include "common.h"
#include "../../llmc/cuda/layernorm.cuh"

static void ln_ref(double* out, double* mean, double* rstd, const float* x, const float* w, const float* b, int N,
                   int C) {
    for (int n = 0; n < N; n++) {
        const float* r = x + (size_t)n * C;
        double m = 0, v = 0;
        for (int i = 0; i < C; i++) m += r[i];
        m /= C;
        for (int i = 0; i < C; i++) v += (r[i] - m) * (r[i] - m);
        v /= C;
        double s = 1.0 / sqrt(v + 1e-5);
        for (int i = 0; i < C; i++) out[(size_t)n * C + i] = (r[i] - m) * s * w[i] + b[i];
        mean[n] = m;
        rstd[n] = s;
    }
}

static void check_size(int N, int C, float* scratch, size_t scratch_n) {
    size_t NC = (size_t)N * C;
    bf16 *dx, *dw, *db, *da, *dbias, *dg, *dres;
    float* x = ck_rand_bf16(&dx, NC, 2.0f);
    float* w = ck_rand_bf16(&dw, C, 1.0f);
    float* b = ck_rand_bf16(&db, C, 0.5f);
    float* a = ck_rand_bf16(&da, NC, 1.0f);
    float* bias = ck_rand_bf16(&dbias, C, 0.3f);
    float* g = ck_rand_bf16(&dg, NC, 1.0f);
    float* res = ck_rand_bf16(&dres, NC, 1.0f);
    for (int i = 0; i < C; i++) {
        w[i] += 1.0f;
    } // keep w around 1 as in a model (device copy below)
    {
        uint16_t* hb = (uint16_t*)malloc_check(2 * C);
        for (int i = 0; i < C; i++) {
            hb[i] = host_f2bf(w[i]);
            w[i] = host_bf2f(hb[i]);
        }
        cudaCheck(cudaMemcpy(dw, hb, 2 * C, cudaMemcpyHostToDevice));
        free(hb);
    }
    bf16* dout = (bf16*)dev_alloc(2 * NC);
    bf16* dresid = (bf16*)dev_alloc(2 * NC);
    float* dmean = (float*)dev_alloc(4 * N);
    float* drstd = (float*)dev_alloc(4 * N);
    double* ref = (double*)malloc_check(8 * NC);
    double* rm = (double*)malloc_check(8 * N);
    double* rs = (double*)malloc_check(8 * N);

    // forward
    layernorm_forward(dout, dmean, drstd, dx, dw, db, N, C, 0);
    ln_ref(ref, rm, rs, x, w, b, N, C);
    double amax = ck_maxabs(ref, NC);
    check(ck_err_bf16(dout, ref, NC, 1e-3 * amax, 8e-3) <= 1, "layernorm_forward N=%d C=%d out", N, C);
    check(ck_err_f32(dmean, rm, N, 1e-5, 1e-4) <= 1 && ck_err_f32(drstd, rs, N, 1e-5, 1e-4) <= 1,
          "layernorm_forward N=%d C=%d mean, rstd", N, C);

    // residual + bias + LN
    double* rref = (double*)malloc_check(8 * NC);
    for (size_t i = 0; i < NC; i++) rref[i] = ck_bf((double)x[i] + a[i] + bias[i % C]);
    residual_forward(dresid, dout, dmean, drstd, dx, da, dbias, dw, db, N, C, 0);
    float* gr = ck_down_bf16(dresid, NC);
    check(ck_err(gr, rref, NC, 1e-3 * ck_maxabs(rref, NC), 8e-3) <= 1,
          "residual_forward N=%d C=%d resid = a + b + bias", N, C);
    ln_ref(ref, rm, rs, gr, w, b, N, C); // LN of what the kernel stored
    check(ck_err_bf16(dout, ref, NC, 1e-3 * ck_maxabs(ref, NC), 8e-3) <= 1,
          "residual_forward N=%d C=%d fused LayerNorm", N, C);
    free(gr);
    // residual only, no bias, in place into b
    residual_forward(da, NULL, NULL, NULL, dx, da, NULL, NULL, NULL, N, C, 0);
    for (size_t i = 0; i < NC; i++) rref[i] = ck_bf((double)x[i] + a[i]);
    check(ck_err_bf16(da, rref, NC, 1e-3 * ck_maxabs(rref, NC), 8e-3) <= 1,
          "residual_forward N=%d C=%d in place, no bias, no LN", N, C);
    free(rref);

    // backward: statistics of x (as forward stores them)
    float* hm = (float*)malloc_check(4 * N);
    float* hr = (float*)malloc_check(4 * N);
    ln_ref(ref, rm, rs, x, w, b, N, C);
    for (int n = 0; n < N; n++) {
        hm[n] = (float)rm[n];
        hr[n] = (float)rs[n];
    }
    cudaCheck(cudaMemcpy(dmean, hm, 4 * N, cudaMemcpyHostToDevice));
    cudaCheck(cudaMemcpy(drstd, hr, 4 * N, cudaMemcpyHostToDevice));
    float *ddw, *ddb;
    float* dw0 = ck_rand_f32(&ddw, C, 1.0f);
    float* db0 = ck_rand_f32(&ddb, C, 1.0f);
    double* rdin = (double*)malloc_check(8 * NC);
    double* rdw = (double*)malloc_check(8 * C);
    double* rdb = (double*)malloc_check(8 * C);
    for (int i = 0; i < C; i++) {
        rdw[i] = dw0[i];
        rdb[i] = db0[i];
    }
    for (int n = 0; n < N; n++) {
        double mg = 0, mgn = 0;
        for (int i = 0; i < C; i++) {
            double norm = (x[(size_t)n * C + i] - hm[n]) * (double)hr[n], dn = (double)w[i] * g[(size_t)n * C + i];
            mg += dn;
            mgn += dn * norm;
            rdw[i] += g[(size_t)n * C + i] * norm;
            rdb[i] += g[(size_t)n * C + i];
        }
        mg /= C;
        mgn /= C;
        for (int i = 0; i < C; i++) {
            double norm = (x[(size_t)n * C + i] - hm[n]) * (double)hr[n], dn = (double)w[i] * g[(size_t)n * C + i];
            rdin[(size_t)n * C + i] = res[(size_t)n * C + i] + hr[n] * (dn - mg - norm * mgn);
        }
    }
    layernorm_backward(dres, dres, ddw, ddb, dg, dx, dw, dmean, drstd, N, C, scratch, scratch_n, 0); // in place
    float* gdw = ck_down_f32(ddw, C);
    check(ck_err_bf16(dres, rdin, NC, 2e-3 * ck_maxabs(rdin, NC), 8e-3) <= 1,
          "layernorm_backward N=%d C=%d dinp = dresid + LN' (in place)", N, C);
    check(ck_err(gdw, rdw, C, 1e-4 * ck_maxabs(rdw, C), 1e-4) <= 1 &&
              ck_err_f32(ddb, rdb, C, 1e-4 * ck_maxabs(rdb, C), 1e-4) <= 1,
          "layernorm_backward N=%d C=%d dw, db accumulate", N, C);
    // determinism: the same call twice gives the same bits
    cudaCheck(cudaMemcpy(ddw, dw0, 4 * C, cudaMemcpyHostToDevice));
    cudaCheck(cudaMemcpy(ddb, db0, 4 * C, cudaMemcpyHostToDevice));
    layernorm_backward(dresid, NULL, ddw, ddb, dg, dx, dw, dmean, drstd, N, C, scratch, scratch_n, 0);
    float* gdw2 = ck_down_f32(ddw, C);
    check(memcmp(gdw, gdw2, 4 * C) == 0, "layernorm_backward N=%d C=%d dw bit-identical on a rerun", N, C);
    { // dresid NULL: dinp = LN' alone
        double* rr = (double*)malloc_check(8 * NC);
        for (size_t i = 0; i < NC; i++) rr[i] = rdin[i] - res[i];
        check(ck_err_bf16(dresid, rr, NC, 2e-3 * ck_maxabs(rr, NC), 8e-3) <= 1,
              "layernorm_backward N=%d C=%d dinp without dresid", N, C);
        free(rr);
    }

    // the scalar instantiations on misaligned copies give the packed path's bits
    if (C % 8 == 0) {
        void *b1, *b2, *b3, *b4, *b5, *b6, *b7;
        layernorm_forward(dout, dmean, drstd, dx, dw, db, N, C, 0);
        bf16* mx = (bf16*)ck_misaligned(&b1, dx, 2 * NC, 2);
        bf16* mo = (bf16*)ck_misaligned(&b2, dout, 2 * NC, 2);
        float* mmean = (float*)ck_misaligned(&b3, dmean, 4 * N, 4);
        float* mrstd = (float*)ck_misaligned(&b4, drstd, 4 * N, 4);
        layernorm_forward(mo, mmean, mrstd, mx, dw, db, N, C, 0);
        check(ck_same_bits(mo, dout, 2 * NC) && ck_same_bits(mmean, dmean, 4 * N) && ck_same_bits(mrstd, drstd, 4 * N),
              "layernorm_forward N=%d C=%d misaligned (scalar path): the packed path's bits", N, C);
        residual_forward(dresid, dout, dmean, drstd, dx, da, dbias, dw, db, N, C, 0);
        bf16* mr = (bf16*)ck_misaligned(&b5, dresid, 2 * NC, 2);
        residual_forward(mr, mo, mmean, mrstd, mx, da, dbias, dw, db, N, C, 0);
        check(ck_same_bits(mr, dresid, 2 * NC) && ck_same_bits(mo, dout, 2 * NC) && ck_same_bits(mrstd, drstd, 4 * N),
              "residual_forward N=%d C=%d misaligned (scalar path): the packed path's bits", N, C);
        // backward: dw, db from the same start; dinp from dresid = res (dg, a fresh copy)
        cudaCheck(cudaMemcpy(dmean, hm, 4 * N, cudaMemcpyHostToDevice));
        cudaCheck(cudaMemcpy(drstd, hr, 4 * N, cudaMemcpyHostToDevice));
        cudaCheck(cudaMemcpy(ddw, dw0, 4 * C, cudaMemcpyHostToDevice));
        cudaCheck(cudaMemcpy(ddb, db0, 4 * C, cudaMemcpyHostToDevice));
        float* mdw = (float*)ck_misaligned(&b6, ddw, 4 * C, 4);
        float* mdb = (float*)ck_misaligned(&b7, ddb, 4 * C, 4);
        layernorm_backward(dresid, da, ddw, ddb, dg, dx, dw, dmean, drstd, N, C, scratch, scratch_n, 0);
        layernorm_backward(mr, da, mdw, mdb, dg, mx, dw, dmean, drstd, N, C, scratch, scratch_n, 0);
        check(ck_same_bits(mr, dresid, 2 * NC) && ck_same_bits(mdw, ddw, 4 * C) && ck_same_bits(mdb, ddb, 4 * C),
              "layernorm_backward N=%d C=%d misaligned (scalar path): the packed path's bits", N, C);
        dev_free(b1);
        dev_free(b2);
        dev_free(b3);
        dev_free(b4);
        dev_free(b5);
        dev_free(b6);
        dev_free(b7);
    }
    free(gdw);
    free(gdw2);
    free(x);
    free(w);
    free(b);
    free(a);
    free(bias);
    free(g);
    free(res);
    free(hm);
    free(hr);
    free(dw0);
    free(db0);
    free(ref);
    free(rm);
    free(rs);
    free(rdin);
    free(rdw);
    free(rdb);
    dev_free(dx);
    dev_free(dw);
    dev_free(db);
    dev_free(da);
    dev_free(dbias);
    dev_free(dg);
    dev_free(dres);
    dev_free(dout);
    dev_free(dresid);
    dev_free(dmean);
    dev_free(drstd);
    dev_free(ddw);
    dev_free(ddb);
}

int main(void) {
    // N = 1000: 125 backward blocks in 4 clusters; N = 4100: 512 blocks (capped), 16 clusters
    const int sizes[][2] = {{1, 32},   {7, 96},   {37, 130},  {130, 64},  {64, 768},
                            {9, 2056}, {5, 4099}, {1000, 64}, {4100, 24}, {3, 20480}};
    const int nsizes = (int)(sizeof(sizes) / sizeof(sizes[0]));
    size_t scratch_n = 0;
    for (int i = 0; i < nsizes; i++) {
        size_t n = layernorm_backward_scratch(sizes[i][0], sizes[i][1]);
        if (n > scratch_n) scratch_n = n;
    }
    float* scratch = (float*)dev_alloc(4 * scratch_n); // zeroed: the tickets start at 0
    for (int i = 0; i < nsizes; i++) check_size(sizes[i][0], sizes[i][1], scratch, scratch_n);
    dev_free(scratch);
    return test_summary();
}
