/*
 * check_crossentropy.cu: llmc/crossentropy.cuh against a CPU reference in fp64 on the
 * same bf16 logits: per-token losses and lse, the fused backward (dlogits in place, padded
 * columns beyond Vv untouched), the loss sum, and the vocab-parallel path: the vocabulary
 * split over 2 or 3 "ranks" whose statistics are combined as the TP all-reduces do
 * (max, rescale, sum) gives the same losses.
 */
#include "check_common.h"
#include "../../llmc/crossentropy.cuh"

static void check_size(int BT, int V, int nranks) {
    int ldl = ((V + 7) / 8) * 8 + 8; // padding beyond the real columns
    bf16* dlog;
    float* logit = ck_rand_bf16(&dlog, (size_t)BT * ldl, 6.0f);
    int* tgt = (int*)malloc_check(sizeof(int) * BT);
    for (int n = 0; n < BT; n++) tgt[n] = (int)((ck_rand() * 0.5f + 0.5f) * V) % V;
    int* dtgt = (int*)ck_up(tgt, sizeof(int) * BT);
    double* rloss = (double*)malloc_check(8 * BT);
    double* rlse = (double*)malloc_check(8 * BT);
    double rsum = 0.0;
    for (int n = 0; n < BT; n++) {
        const float* r = logit + (size_t)n * ldl;
        double m = -1e300, s = 0;
        for (int v = 0; v < V; v++) if (r[v] > m) m = r[v];
        for (int v = 0; v < V; v++) s += exp(r[v] - m);
        rlse[n] = m + log(s); rloss[n] = rlse[n] - r[tgt[n]]; rsum += rloss[n];
    }
    float* ce = (float*)dev_alloc(sizeof(float) * 4 * BT);
    float* losses = (float*)dev_alloc(sizeof(float) * BT);
    float* lse = (float*)dev_alloc(sizeof(float) * BT);
    double* acc = (double*)dev_alloc(sizeof(double));
    // single rank
    ce_stats(ce, ce + 2 * BT, ce + 3 * BT, dlog, ldl, dtgt, BT, V, 0, 0);
    ce_finish(losses, lse, ce, ce + 2 * BT, ce + 3 * BT, BT, 0);
    ce_loss_sum(acc, losses, BT, 0);
    float* gl = ck_down_f32(losses, BT);
    float* gs = ck_down_f32(lse, BT);
    double gsum = 0;
    cudaCheck(cudaMemcpy(&gsum, acc, sizeof(double), cudaMemcpyDeviceToHost));
    check(ck_err(gl, rloss, BT, 1e-5, 1e-5) <= 1 && ck_err(gs, rlse, BT, 1e-5, 1e-5) <= 1, "cross-entropy BT=%d V=%d: losses and lse", BT, V);
    check(fabs(gsum - rsum) <= 1e-5 * fabs(rsum) + 1e-5, "cross-entropy BT=%d V=%d: loss sum %.6f (want %.6f)", BT, V, gsum, rsum);
    // vocab-parallel: nranks slices; per-rank stats then the all-reduce arithmetic
    float* st = (float*)dev_alloc(sizeof(float) * 4 * BT * nranks);
    int per = (V + nranks - 1) / nranks;
    for (int r = 0; r < nranks; r++) {
        int v0 = r * per, Vv = V - v0 < per ? V - v0 : per;
        if (Vv < 0) Vv = 0;
        float* s = st + (size_t)4 * BT * r;
        ce_stats(s, s + 2 * BT, s + 3 * BT, dlog + v0, ldl, dtgt, BT, Vv, v0, 0);
    }
    float* hs = ck_down_f32(st, (size_t)4 * BT * nranks);
    float* mg = (float*)malloc_check(4 * BT);
    for (int n = 0; n < BT; n++) { mg[n] = -INFINITY; for (int r = 0; r < nranks; r++) mg[n] = fmaxf(mg[n], hs[(size_t)4 * BT * r + n]); }
    float* dmg = (float*)ck_up(mg, 4 * BT);
    for (int r = 0; r < nranks; r++) {
        float* s = st + (size_t)4 * BT * r;
        ce_rescale(s + 2 * BT, s, dmg, BT, 0);
    }
    free(hs);
    hs = ck_down_f32(st, (size_t)4 * BT * nranks);
    float* sum2 = (float*)calloc_check(2 * BT, sizeof(float));
    for (int r = 0; r < nranks; r++) for (int i = 0; i < 2 * BT; i++) sum2[i] += hs[(size_t)4 * BT * r + 2 * BT + i];
    float* dsum2 = (float*)ck_up(sum2, 8 * BT);
    ce_finish(losses, lse, dmg, dsum2, dsum2 + BT, BT, 0);
    float* gl2 = ck_down_f32(losses, BT);
    check(ck_err(gl2, rloss, BT, 1e-5, 1e-5) <= 1, "cross-entropy BT=%d V=%d split over %d vocab slices: losses", BT, V, nranks);
    // fused backward on the single-rank statistics
    ce_finish(losses, lse, ce, ce + 2 * BT, ce + 3 * BT, BT, 0);
    float dloss = 1.0f / 37.0f;
    ce_backward(dlog, ldl, lse, dtgt, BT, V, 0, dloss, 0);
    float* gd = ck_down_bf16(dlog, (size_t)BT * ldl);
    double* rd = (double*)malloc_check(8 * (size_t)BT * ldl);
    for (int n = 0; n < BT; n++) for (int v = 0; v < ldl; v++) {
        size_t i = (size_t)n * ldl + v;
        rd[i] = v < V ? (exp(logit[i] - rlse[n]) - (v == tgt[n] ? 1.0 : 0.0)) * dloss : logit[i];
    }
    check(ck_err(gd, rd, (size_t)BT * ldl, 1e-3 * dloss, 8e-3) <= 1, "cross-entropy BT=%d V=%d: dlogits in place, padding untouched", BT, V);
    free(logit); free(tgt); free(rloss); free(rlse); free(gl); free(gs); free(hs); free(mg); free(sum2); free(gl2); free(gd); free(rd);
    dev_free(dlog); dev_free(dtgt); dev_free(ce); dev_free(losses); dev_free(lse); dev_free(acc); dev_free(st); dev_free(dmg); dev_free(dsum2);
}

int main(void) {
    check_size(1, 7, 2);
    check_size(5, 100, 3);
    check_size(33, 1037, 2);
    check_size(64, 5000, 3);
    return test_summary();
}
