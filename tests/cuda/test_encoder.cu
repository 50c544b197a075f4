/*
 * test_encoder.cu: llmc/cuda/encoder.cuh against a CPU reference: the vocab-parallel embedding
 * forward (tokens outside the slice [v0, v0+Vl) embed to 0; positions added or not), and
 * the backward through the host-built token buckets (repeated tokens summed in position
 * order) onto existing fp32 gradients; also the TP identity: the sum over two vocab slices
 * of the per-rank embeddings (rank 0 adding positions) equals the single-rank result; with
 * C % 8 == 0 the scalar path on a misaligned wte must give the packed path's bits. Rows take
 * their positions from tpos: the identity, and a context-parallel rank's two chunks (rank cp of
 * CP holds chunks cp and 2CP-1-cp of a sequence of CP*T rows, doc/cp.md).
 */
#include "common.h"
#include "../../llmc/cuda/encoder.cuh"

// the position of local row t of CP rank cp (T rows, two chunks of T/2), written out here
static int cp_row_position(int t, int T, int cp, int CP) {
    if (CP == 1) return t;
    int half = T / 2;
    return t < half ? cp * half + t : (2 * CP - 1 - cp) * half + (t - half);
}

static void check_size(int B, int T, int C, int V, int Vl, int v0, int cp, int CP) {
    int BT = B * T, S = T * CP; // S: the whole sequence, wpe's rows
    int* tp = (int*)malloc_check(sizeof(int) * T);
    for (int t = 0; t < T; t++) tp[t] = cp_row_position(t, T, cp, CP);
    int* dtp = (int*)ck_up(tp, sizeof(int) * T);
    int* tok = (int*)malloc_check(sizeof(int) * BT);
    for (int n = 0; n < BT; n++) tok[n] = (int)((ck_rand() * 0.5f + 0.5f) * V) % V;
    tok[0] = v0;
    if (BT > 2) tok[2] = v0; // a repeat inside the slice
    int* dtok = (int*)ck_up(tok, sizeof(int) * BT);
    bf16 *dwte, *dwpe, *ddx;
    float* wte = ck_rand_bf16(&dwte, (size_t)Vl * C, 1.0f);
    float* wpe = ck_rand_bf16(&dwpe, (size_t)S * C, 1.0f);
    float* dx = ck_rand_bf16(&ddx, (size_t)BT * C, 1.0f);
    bf16* dout = (bf16*)dev_alloc(2 * (size_t)BT * C);
    double* ref = (double*)malloc_check(8 * (size_t)BT * C);
    for (int add_pos = 0; add_pos < 2; add_pos++) {
        encoder_forward(dout, dtok, dwte, dwpe, dtp, B, T, C, v0, Vl, add_pos, 0);
        for (int n = 0; n < BT; n++)
            for (int c = 0; c < C; c++) {
                int r = tok[n] - v0;
                double v = (r >= 0 && r < Vl) ? wte[(size_t)r * C + c] : 0.0;
                if (add_pos) v += wpe[(size_t)tp[n % T] * C + c];
                ref[(size_t)n * C + c] = ck_bf(v);
            }
        float* out = ck_down_bf16(dout, (size_t)BT * C);
        check(ck_err(out, ref, (size_t)BT * C, 0, 1e-6) <= 1,
              "encoder_forward B=%d T=%d C=%d slice [%d,%d) add_pos=%d, CP rank %d of %d (exact)", B, T, C, v0, v0 + Vl,
              add_pos, cp, CP);
        free(out);
    }
    if (C % 8 == 0) { // the scalar path on a misaligned wte copy: the packed path's bits
        void *b1, *b2;
        bf16* mwte = (bf16*)ck_misaligned(&b1, dwte, 2 * (size_t)Vl * C, 2);
        bf16* mout = (bf16*)ck_misaligned(&b2, dout, 2 * (size_t)BT * C, 2);
        encoder_forward(dout, dtok, dwte, dwpe, dtp, B, T, C, v0, Vl, 1, 0);
        encoder_forward(mout, dtok, mwte, dwpe, dtp, B, T, C, v0, Vl, 1, 0);
        check(ck_same_bits(mout, dout, 2 * (size_t)BT * C),
              "encoder_forward B=%d T=%d C=%d misaligned (scalar path): the packed path's bits", B, T, C);
        dev_free(b1);
        dev_free(b2);
    }
    // backward
    EmbedBuckets eb;
    eb.uniq = (int*)malloc_check(sizeof(int) * BT);
    eb.off = (int*)malloc_check(sizeof(int) * (BT + 1));
    eb.pos = (int*)malloc_check(sizeof(int) * BT);
    int* work = (int*)calloc_check(Vl + 1, sizeof(int));
    embed_buckets_build(&eb, tok, BT, v0, Vl, work);
    int zero_ok = 1;
    for (int i = 0; i <= Vl; i++)
        if (work[i] != 0) zero_ok = 0;
    check(zero_ok && (eb.nu == 0 || eb.off[eb.nu] <= BT), "embed_buckets_build leaves its scratch zeroed (%d buckets)",
          eb.nu);
    int* du = (int*)ck_up(eb.uniq, sizeof(int) * (eb.nu + 1));
    int* doff = (int*)ck_up(eb.off, sizeof(int) * (eb.nu + 1));
    int* dpos = (int*)ck_up(eb.pos, sizeof(int) * (BT + 1));
    float *gwte, *gwpe;
    float* gwte0 = ck_rand_f32(&gwte, (size_t)Vl * C, 1.0f);
    float* gwpe0 = ck_rand_f32(&gwpe, (size_t)S * C, 1.0f);
    encoder_backward(gwte, gwpe, ddx, du, doff, dpos, eb.nu, dtp, B, T, C, 0);
    double* rwte = (double*)malloc_check(8 * (size_t)Vl * C);
    double* rwpe = (double*)malloc_check(8 * (size_t)S * C);
    for (size_t i = 0; i < (size_t)Vl * C; i++) rwte[i] = gwte0[i];
    for (size_t i = 0; i < (size_t)S * C; i++) rwpe[i] = gwpe0[i]; // rows no local row holds stay
    for (int n = 0; n < BT; n++)
        for (int c = 0; c < C; c++) {
            int r = tok[n] - v0;
            if (r >= 0 && r < Vl) rwte[(size_t)r * C + c] += dx[(size_t)n * C + c];
            rwpe[(size_t)tp[n % T] * C + c] += dx[(size_t)n * C + c];
        }
    float* g1 = ck_down_f32(gwte, (size_t)Vl * C);
    float* g2 = ck_down_f32(gwpe, (size_t)S * C);
    check(ck_err(g1, rwte, (size_t)Vl * C, 1e-5, 1e-5) <= 1, "encoder_backward B=%d T=%d C=%d dwte (buckets)", B, T, C);
    check(ck_err(g2, rwpe, (size_t)S * C, 1e-5, 1e-5) <= 1, "encoder_backward B=%d T=%d C=%d dwpe, CP rank %d of %d", B,
          T, C, cp, CP);
    free(g1);
    free(g2);
    free(rwte);
    free(rwpe);
    free(gwte0);
    free(gwpe0);
    free(work);
    free(eb.uniq);
    free(eb.off);
    free(eb.pos);
    dev_free(du);
    dev_free(doff);
    dev_free(dpos);
    dev_free(gwte);
    dev_free(gwpe);
    free(tok);
    free(tp);
    free(wte);
    free(wpe);
    free(dx);
    free(ref);
    dev_free(dtp);
    dev_free(dtok);
    dev_free(dwte);
    dev_free(dwpe);
    dev_free(ddx);
    dev_free(dout);
}

// TP=2 identity: rank 0 (rows [0, V/2), adds wpe) + rank 1 (rows [V/2, V)) == one rank
static void check_tp_sum(int B, int T, int C, int V) {
    int BT = B * T, h = V / 2;
    int* tok = (int*)malloc_check(sizeof(int) * BT);
    for (int n = 0; n < BT; n++) tok[n] = (int)((ck_rand() * 0.5f + 0.5f) * V) % V;
    int* dtok = (int*)ck_up(tok, sizeof(int) * BT);
    bf16 *dwte, *dwpe;
    float* wte = ck_rand_bf16(&dwte, (size_t)V * C, 1.0f);
    float* wpe = ck_rand_bf16(&dwpe, (size_t)T * C, 1.0f);
    int* tp = (int*)malloc_check(sizeof(int) * T);
    for (int t = 0; t < T; t++) tp[t] = t;
    int* dtp = (int*)ck_up(tp, sizeof(int) * T);
    bf16* o0 = (bf16*)dev_alloc(2 * (size_t)BT * C);
    bf16* o1 = (bf16*)dev_alloc(2 * (size_t)BT * C);
    bf16* o = (bf16*)dev_alloc(2 * (size_t)BT * C);
    encoder_forward(o, dtok, dwte, dwpe, dtp, B, T, C, 0, V, 1, 0);
    encoder_forward(o0, dtok, dwte, dwpe, dtp, B, T, C, 0, h, 1, 0);
    encoder_forward(o1, dtok, dwte + (size_t)h * C, dwpe, dtp, B, T, C, h, V - h, 0, 0);
    float* a = ck_down_bf16(o0, (size_t)BT * C);
    float* b = ck_down_bf16(o1, (size_t)BT * C);
    float* s = ck_down_bf16(o, (size_t)BT * C);
    int same = 1;
    for (size_t i = 0; i < (size_t)BT * C; i++)
        if (host_bf2f(host_f2bf(a[i] + b[i])) != s[i]) same = 0;
    check(same, "encoder_forward TP=2: bf16 sum of the two ranks equals the one-rank embedding bit for bit");
    free(tok);
    free(wte);
    free(wpe);
    free(a);
    free(b);
    free(s);
    dev_free(dtok);
    dev_free(dwte);
    dev_free(dwpe);
    dev_free(o0);
    dev_free(o1);
    dev_free(o);
    free(tp);
    dev_free(dtp);
}

int main(void) {
    check_size(1, 5, 33, 30, 11, 7, 0, 1);
    check_size(2, 17, 64, 50, 50, 0, 0, 1);
    check_size(3, 40, 100, 1000, 300, 600, 0, 1);
    check_size(2, 33, 264, 200, 120, 40, 0, 1); // C % 8 == 0 but not a multiple of 256
    check_size(2, 16, 64, 50, 50, 0, 1, 4);     // CP rank 1 of 4: positions 8..15 and 48..55 of 64
    check_size(3, 6, 33, 30, 11, 7, 2, 3);      // CP rank 2 of 3 (the last): its chunks 2 and 3 meet
    check_tp_sum(2, 9, 40, 64);
    return test_summary();
}
