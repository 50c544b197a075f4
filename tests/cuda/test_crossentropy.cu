/*
 * test_crossentropy.cu: llmc/cuda/crossentropy.cuh against a CPU reference in fp64 on the
 * same bf16 logits (rows of ld columns, the first V real, the rest padding with nonzero
 * garbage that must never enter the softmax):
 *   - ce_fused (TP = 1, one pass): losses, lse, the loss sum; in training dlogits in place
 *     with every padded column exactly 0; in evaluation (dloss 0) the logits untouched;
 *   - the vocab-parallel path: the vocabulary split over 2 or 3 "ranks" whose statistics
 *     (ce_stats) are combined as the TP all-reduces do (max, ce_rescale, sum), then
 *     ce_finish (evaluation) and ce_backward (training: losses and each slice's dlogits);
 *   - the 16-byte and the scalar (misaligned) instantiations give the same bits;
 *   - a row too long for ce_fused's registers (the trainer then takes ce_stats + ce_backward).
 */
#include "common.h"
#include "../../llmc/cuda/crossentropy.cuh"

typedef struct {
    int BT, V, ld;
    float* logit; // (BT, ld) host copy of the bf16 logits
    int* tgt;     // (BT)
    double* loss; // (BT) reference
    double* lse;  // (BT)
    double sum;
} Ref;

static void ref_stats(Ref* r) {
    r->sum = 0.0;
    for (int n = 0; n < r->BT; n++) {
        const float* x = r->logit + (size_t)n * r->ld;
        double m = -1e300;
        double s = 0.0;
        for (int v = 0; v < r->V; v++)
            if (x[v] > m) m = x[v];
        for (int v = 0; v < r->V; v++) s += exp(x[v] - m);
        r->lse[n] = m + log(s);
        r->loss[n] = r->lse[n] - x[r->tgt[n]];
        r->sum += r->loss[n];
    }
}

// a case from the generator seeded with seed: random targets and bf16 logits (device copies in
// *dtgt, *dlogit) with their reference losses, lse and loss sum
static Ref ref_make(uint64_t seed, int BT, int V, int ld, bf16** dlogit, int** dtgt) {
    ck_state = seed;
    Ref r = {BT, V, ld, NULL, NULL, NULL, NULL, 0.0};
    r.tgt = (int*)malloc_check(sizeof(int) * BT);
    for (int n = 0; n < BT; n++) r.tgt[n] = (int)((ck_rand() * 0.5f + 0.5f) * V) % V;
    r.loss = (double*)malloc_check(8 * (size_t)BT);
    r.lse = (double*)malloc_check(8 * (size_t)BT);
    r.logit = ck_rand_bf16(dlogit, (size_t)BT * ld, 6.0f);
    ref_stats(&r);
    *dtgt = (int*)ck_up(r.tgt, sizeof(int) * BT);
    return r;
}

static void ref_free(Ref* r) {
    free(r->logit);
    free(r->tgt);
    free(r->loss);
    free(r->lse);
}

// dlogits reference over columns [c0, c0 + w) of every row: real ones (p - onehot) * dloss, padded 0
static double* ref_dlogits(const Ref* r, int c0, int w, float dloss) {
    double* d = (double*)malloc_check(8 * (size_t)r->BT * w);
    for (int n = 0; n < r->BT; n++) {
        for (int j = 0; j < w; j++) {
            int v = c0 + j;
            double p = v < r->V ? exp(r->logit[(size_t)n * r->ld + v] - r->lse[n]) : 0.0;
            d[(size_t)n * w + j] = v < r->V ? (p - (v == r->tgt[n] ? 1.0 : 0.0)) * dloss : 0.0;
        }
    }
    return d;
}

// the padded columns [V, ld) of a (BT, ld) bf16 device buffer are exactly +0
static int padded_zero(const bf16* d, int BT, int V, int ld) {
    float* h = ck_down_bf16(d, (size_t)BT * ld);
    int ok = 1;
    for (int n = 0; n < BT; n++) {
        for (int v = V; v < ld; v++) {
            float x = h[(size_t)n * ld + v];
            if (x != 0.0f || signbit(x)) ok = 0;
        }
    }
    free(h);
    return ok;
}

static void check_fused(int BT, int V, int ld) {
    bf16* dlog;
    int* dtgt;
    Ref r = ref_make(0x9E3779B97F4A7C15ULL + (uint64_t)BT * 7919 + V, BT, V, ld, &dlog, &dtgt);
    float* losses = (float*)dev_alloc(sizeof(float) * BT);
    float* lse = (float*)dev_alloc(sizeof(float) * BT);
    double* acc = (double*)dev_alloc(sizeof(double));
    size_t bytes = sizeof(bf16) * (size_t)BT * ld;
    // evaluation: losses only, the logits left as they are (sampling reads them)
    bf16* keep = (bf16*)dev_alloc(bytes);
    cudaCheck(cudaMemcpy(keep, dlog, bytes, cudaMemcpyDeviceToDevice));
    check(ce_fused_fits(ld), "ce_fused fits rows of %d columns", ld);
    ce_fused(dlog, ld, losses, lse, dtgt, BT, V, 0.0f, 0);
    ce_loss_sum(acc, losses, BT, 0);
    float* gl = ck_down_f32(losses, BT);
    float* gs = ck_down_f32(lse, BT);
    double gsum = 0;
    cudaCheck(cudaMemcpy(&gsum, acc, sizeof(double), cudaMemcpyDeviceToHost));
    check(ck_err(gl, r.loss, BT, 1e-5, 1e-5) <= 1 && ck_err(gs, r.lse, BT, 1e-5, 1e-5) <= 1,
          "ce_fused BT=%d V=%d ld=%d evaluation: losses and lse", BT, V, ld);
    check(fabs(gsum - r.sum) <= 1e-5 * fabs(r.sum) + 1e-5, "ce_fused BT=%d V=%d: loss sum %.6f (want %.6f)", BT, V,
          gsum, r.sum);
    check(ck_same_bits(keep, dlog, bytes), "ce_fused BT=%d V=%d evaluation: the logits are untouched", BT, V);
    // training: the same losses, dlogits in place, padded columns exactly 0
    float dloss = 1.0f / 37.0f;
    ce_fused(dlog, ld, losses, lse, dtgt, BT, V, dloss, 0);
    float* gl2 = ck_down_f32(losses, BT);
    check(memcmp(gl, gl2, sizeof(float) * BT) == 0, "ce_fused BT=%d V=%d training: the evaluation's loss bits", BT, V);
    float* gd = ck_down_bf16(dlog, (size_t)BT * ld);
    double* rd = ref_dlogits(&r, 0, ld, dloss);
    check(ck_err(gd, rd, (size_t)BT * ld, 1e-3 * dloss, 8e-3) <= 1, "ce_fused BT=%d V=%d ld=%d: dlogits in place", BT,
          V, ld);
    check(padded_zero(dlog, BT, V, ld), "ce_fused BT=%d V=%d ld=%d: padded dlogits exactly 0", BT, V, ld);
    // the scalar instantiation (a misaligned copy) gives the same bits
    void* mbase;
    bf16* mis = (bf16*)ck_misaligned(&mbase, keep, bytes, 2);
    ce_fused(mis, ld, losses, lse, dtgt, BT, V, dloss, 0);
    float* gl3 = ck_down_f32(losses, BT);
    check(memcmp(gl, gl3, sizeof(float) * BT) == 0 && ck_same_bits(mis, dlog, bytes),
          "ce_fused BT=%d V=%d misaligned (scalar path): the packed path's bits", BT, V);
    ref_free(&r);
    free(gl);
    free(gs);
    free(gl2);
    free(gl3);
    free(gd);
    free(rd);
    dev_free(dlog);
    dev_free(dtgt);
    dev_free(losses);
    dev_free(lse);
    dev_free(acc);
    dev_free(keep);
    dev_free(mbase);
}

// how many of a slice's Vl columns from v0 on are real (below V)
static int slice_real(int V, int v0, int Vl) { return V - v0 < 0 ? 0 : (V - v0 > Vl ? Vl : V - v0); }

// vocabulary of V real tokens split into nranks slices of Vl = ldl columns (the last ones
// partly or wholly padding); each slice its own (BT, Vl) buffer, as each TP rank holds it
static void check_split(int BT, int V, int nranks) {
    int Vl = ((CEIL_DIV(V, nranks) + 7) / 8) * 8;
    int ld = Vl * nranks;
    bf16* dall;
    int* dtgt;
    Ref r = ref_make(0x2545F4914F6CDD1DULL + (uint64_t)BT * 104729 + V, BT, V, ld, &dall, &dtgt);
    float* losses = (float*)dev_alloc(sizeof(float) * BT);
    float* lse = (float*)dev_alloc(sizeof(float) * BT);
    float* st = (float*)dev_alloc(sizeof(float) * 4 * BT * nranks);
    bf16** slice = (bf16**)malloc_check(sizeof(bf16*) * nranks);
    for (int k = 0; k < nranks; k++) { // rank k's (BT, Vl) logits: columns [k Vl, (k+1) Vl) of every row
        slice[k] = (bf16*)dev_alloc(sizeof(bf16) * (size_t)BT * Vl);
        for (int n = 0; n < BT; n++) {
            cudaCheck(cudaMemcpy(slice[k] + (size_t)n * Vl, dall + (size_t)n * ld + (size_t)k * Vl, sizeof(bf16) * Vl,
                                 cudaMemcpyDeviceToDevice));
        }
    }
    for (int k = 0; k < nranks; k++) {
        int v0 = k * Vl;
        int Vv = slice_real(V, v0, Vl);
        float* s = st + (size_t)4 * BT * k;
        ce_stats(s, s + 2 * BT, s + 3 * BT, slice[k], Vl, dtgt, BT, Vv, v0, 0);
    }
    // the all-reduces, on the host: max, rescale on the device, then the sums
    float* hs = ck_down_f32(st, (size_t)4 * BT * nranks);
    float* mg = (float*)malloc_check(4 * (size_t)BT);
    for (int n = 0; n < BT; n++) {
        mg[n] = -INFINITY;
        for (int k = 0; k < nranks; k++) mg[n] = fmaxf(mg[n], hs[(size_t)4 * BT * k + n]);
    }
    float* dmg = (float*)ck_up(mg, 4 * (size_t)BT);
    for (int k = 0; k < nranks; k++) {
        float* s = st + (size_t)4 * BT * k;
        ce_rescale(s + 2 * BT, s, dmg, BT, 0);
    }
    free(hs);
    hs = ck_down_f32(st, (size_t)4 * BT * nranks);
    float* sum2 = (float*)calloc_check(2 * (size_t)BT, sizeof(float));
    for (int k = 0; k < nranks; k++) {
        for (int i = 0; i < 2 * BT; i++) sum2[i] += hs[(size_t)4 * BT * k + 2 * BT + i];
    }
    float* dsum2 = (float*)ck_up(sum2, 8 * (size_t)BT);
    ce_finish(losses, lse, dmg, dsum2, dsum2 + BT, BT, 0);
    float* gl = ck_down_f32(losses, BT);
    check(ck_err(gl, r.loss, BT, 1e-5, 1e-5) <= 1, "cross-entropy BT=%d V=%d over %d vocab slices: ce_finish losses",
          BT, V, nranks);
    // training: every rank's ce_backward writes the same losses and its slice's dlogits
    float dloss = 1.0f / 29.0f;
    int ok_loss = 1;
    int ok_d = 1;
    int ok_pad = 1;
    for (int k = 0; k < nranks; k++) {
        int v0 = k * Vl;
        int Vv = slice_real(V, v0, Vl);
        ce_backward(slice[k], Vl, losses, lse, dmg, dsum2, dsum2 + BT, dtgt, BT, Vv, v0, dloss, 0);
        float* g2 = ck_down_f32(losses, BT);
        if (memcmp(g2, gl, sizeof(float) * BT) != 0) ok_loss = 0;
        float* gd = ck_down_bf16(slice[k], (size_t)BT * Vl);
        double* rd = ref_dlogits(&r, 0, ld, dloss);
        double* rk = (double*)malloc_check(8 * (size_t)BT * Vl);
        for (int n = 0; n < BT; n++) memcpy(rk + (size_t)n * Vl, rd + (size_t)n * ld + v0, 8 * (size_t)Vl);
        if (!(ck_err(gd, rk, (size_t)BT * Vl, 1e-3 * dloss, 8e-3) <= 1)) ok_d = 0;
        if (!padded_zero(slice[k], BT, Vv, Vl)) ok_pad = 0;
        free(g2);
        free(gd);
        free(rd);
        free(rk);
    }
    check(ok_loss, "cross-entropy BT=%d V=%d over %d slices: ce_backward's losses are ce_finish's bits", BT, V, nranks);
    check(ok_d, "cross-entropy BT=%d V=%d over %d slices: each slice's dlogits", BT, V, nranks);
    check(ok_pad, "cross-entropy BT=%d V=%d over %d slices: padded dlogits exactly 0 (all-padding slices too)", BT, V,
          nranks);
    for (int k = 0; k < nranks; k++) dev_free(slice[k]);
    free(slice);
    ref_free(&r);
    free(hs);
    free(mg);
    free(sum2);
    free(gl);
    dev_free(dall);
    dev_free(dtgt);
    dev_free(losses);
    dev_free(lse);
    dev_free(st);
    dev_free(dmg);
    dev_free(dsum2);
}

// a single row longer than ce_fused's registers: ce_stats + ce_backward without an all-reduce
static void check_long_row(int BT, int V) {
    int ld = ((V + 7) / 8) * 8 + 8;
    check(!ce_fused_fits(ld), "rows of %d columns do not fit ce_fused (CE_FUSED_MAX_COLS %d)", ld, CE_FUSED_MAX_COLS);
    bf16* dlog;
    int* dtgt;
    Ref r = ref_make(0x853C49E6748FEA9BULL + V, BT, V, ld, &dlog, &dtgt);
    float* ce = (float*)dev_alloc(sizeof(float) * 4 * BT);
    float* losses = (float*)dev_alloc(sizeof(float) * BT);
    float* lse = (float*)dev_alloc(sizeof(float) * BT);
    float dloss = 0.5f;
    ce_stats(ce, ce + 2 * BT, ce + 3 * BT, dlog, ld, dtgt, BT, V, 0, 0);
    ce_backward(dlog, ld, losses, lse, ce, ce + 2 * BT, ce + 3 * BT, dtgt, BT, V, 0, dloss, 0);
    float* gl = ck_down_f32(losses, BT);
    float* gd = ck_down_bf16(dlog, (size_t)BT * ld);
    double* rd = ref_dlogits(&r, 0, ld, dloss);
    check(ck_err(gl, r.loss, BT, 1e-5, 1e-5) <= 1, "long rows BT=%d V=%d: losses", BT, V);
    check(ck_err(gd, rd, (size_t)BT * ld, 1e-3 * dloss, 8e-3) <= 1 && padded_zero(dlog, BT, V, ld),
          "long rows BT=%d V=%d: dlogits, padded ones exactly 0", BT, V);
    ref_free(&r);
    free(gl);
    free(gd);
    free(rd);
    dev_free(dlog);
    dev_free(dtgt);
    dev_free(ce);
    dev_free(losses);
    dev_free(lse);
}

int main(void) {
    check_fused(1, 7, 8);
    check_fused(5, 100, 112);
    check_fused(33, 1037, 1048);
    check_fused(64, 5000, 5120);  // 2 packs per thread
    check_fused(3, 40000, 40960); // 8 packs per thread
    check_split(1, 7, 2);
    check_split(5, 100, 3);
    check_split(33, 1037, 2);
    check_split(16, 20, 4); // the last slices all padding
    check_split(64, 5000, 3);
    check_long_row(2, 70001);
    return test_summary();
}
