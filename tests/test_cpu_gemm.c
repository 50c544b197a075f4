/*
 * tests/test_cpu_gemm.c: llmc/cpu/cpu_gemm.h against a plain fmaf loop, bit for bit.
 *
 * The reference is the contract written out directly: for every output element,
 * acc = (accumulate ? C : 0), then acc = fmaf(A(i,k), B(k,j), acc) for k = 0..K-1 in
 * order, then + bias. Every shape (NN, NT, TN, TT), odd sizes around the micro-tile and
 * cache-block edges, K = 0, accumulate on/off, non-temporal stores (CPU_GEMM_STREAM, with C
 * aligned for them, and unaligned: the fallback), bias on/off, every ISA this CPU has and
 * 1, 2 and 3 threads must give exactly the reference's bits, through both ways cpu_gemm
 * runs threads: chunks handed out dynamically around a jointly packed shared operand, and
 * per-thread packs of both operands (a few cases with the shared buffer taken away).
 *
 * The packs alone for every ISA's tile shape (so the AVX-512 12 x 32 packing is checked on
 * any machine). Also llmc/cpu/cpu_math.h's exp_vec: within 4 ulp of double exp over its range, NaN kept, and
 * the vectorized loop giving the same bits as one-at-a-time scalar calls.
 *
 *   ./test_cpu_gemm          the test
 *   ./test_cpu_gemm bench    GFLOP/s of the 125m shapes for each ISA (not a test)
 */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#ifdef _OPENMP
#include <omp.h>
#endif
#include "../llmc/cpu/cpu_gemm.h"
#include "../llmc/cpu/cpu_math.h"

static uint64_t rng_state = 88172645463325252ull;
static float frand(void) { // xorshift64: deterministic inputs in [-1, 1)
    rng_state ^= rng_state << 13;
    rng_state ^= rng_state >> 7;
    rng_state ^= rng_state << 17;
    return (float)((rng_state >> 40) * (1.0 / 16777216.0)) * 2.0f - 1.0f;
}

static void reference(int M, int N, int K, const float* A, ptrdiff_t ars, ptrdiff_t acs, const float* B, ptrdiff_t brs,
                      ptrdiff_t bcs, float* C, int ldc, int accumulate, const float* bias) {
    for (int i = 0; i < M; i++)
        for (int j = 0; j < N; j++) {
            float acc = accumulate ? C[(size_t)i * ldc + j] : 0.0f;
            for (int k = 0; k < K; k++) acc = fmaf(A[i * ars + k * acs], B[k * brs + j * bcs], acc);
            C[(size_t)i * ldc + j] = bias ? acc + bias[j] : acc;
        }
}

static int passed = 0, failed = 0;
static CpuGemmWork work; // pack buffers for 3 threads: used by the 1- and 3-thread cases, 2 threads allocate per call
static int per_thread_packs = 0; // 1: the 3-thread cases get no shared buffer (cpu_gemm's other path)

// one case: shape flags ta/tb (1 = operand stored transposed), cpu_gemm flags, C with padding
// columns. With CPU_GEMM_STREAM, C is 64-byte aligned with a row stride of whole 64 bytes (the
// non-temporal stores run) unless `unaligned`.
static int unaligned = 0;
static void check(CpuIsa isa, int threads, int M, int N, int K, int ta, int tb, int flags, int use_bias) {
    int accumulate = flags & CPU_GEMM_ACCUMULATE;
    int ldc = N + 3; // a row stride wider than N: columns past N must stay untouched
    if ((flags & CPU_GEMM_STREAM) && !unaligned) ldc = (N + 3 + 15) / 16 * 16;
    size_t na = (size_t)M * (K > 0 ? K : 1), nb = (size_t)(K > 0 ? K : 1) * N;
    float* A = malloc(sizeof(float) * na);
    float* B = malloc(sizeof(float) * nb);
    float* bias = malloc(sizeof(float) * N);
    float* C0 = malloc(sizeof(float) * (size_t)M * ldc);
    float* C1mem = aligned_alloc(64, sizeof(float) * (((size_t)M * ldc + 16) / 16 * 16 + 16));
    float* C1 = C1mem + ((flags & CPU_GEMM_STREAM) && unaligned ? 1 : 0);
    for (size_t i = 0; i < na; i++) A[i] = frand();
    for (size_t i = 0; i < nb; i++) B[i] = frand();
    for (int i = 0; i < N; i++) bias[i] = frand();
    for (size_t i = 0; i < (size_t)M * ldc; i++) C0[i] = C1[i] = frand();
    ptrdiff_t ars = ta ? 1 : K, acs = ta ? M : 1; // A stored (M, K) or (K, M)
    ptrdiff_t brs = tb ? 1 : N, bcs = tb ? K : 1; // B stored (K, N) or (N, K)
    reference(M, N, K, A, ars, acs, B, brs, bcs, C0, ldc, accumulate, use_bias ? bias : NULL);
#ifdef _OPENMP
    omp_set_num_threads(threads);
#endif
    CpuGemmWork w = work;
    if (per_thread_packs) w.shared_cap = 0;
    cpu_gemm(isa, M, N, K, A, ars, acs, B, brs, bcs, C1, ldc, flags, use_bias ? bias : NULL, (threads & 1) ? &w : NULL);
    if (memcmp(C0, C1, sizeof(float) * (size_t)M * ldc) == 0)
        passed++;
    else {
        failed++;
        size_t bad = 0;
        while (bad < (size_t)M * ldc && memcmp(&C0[bad], &C1[bad], sizeof(float)) == 0) bad++;
        printf(
            "FAIL %s threads %d%s M %d N %d K %d %s%s flags %d%s bias %d: first difference at (%zu, %zu): %.9g vs "
            "%.9g\n",
            cpu_isa_name(isa), threads, per_thread_packs ? " (per-thread packs)" : "", M, N, K, ta ? "T" : "N",
            tb ? "T" : "N", flags, (flags & CPU_GEMM_STREAM) && unaligned ? " (unaligned C)" : "", use_bias, bad / ldc,
            bad % ldc, C0[bad], C1[bad]);
    }
    free(A);
    free(B);
    free(bias);
    free(C0);
    free(C1mem);
}

// ulps between two finite floats of the same sign region (via the ordered integer line)
static int64_t ulp_diff(float a, float b) {
    int32_t ia, ib;
    memcpy(&ia, &a, 4);
    memcpy(&ib, &b, 4);
    int64_t la = ia < 0 ? (int64_t)INT32_MIN - ia : ia, lb = ib < 0 ? (int64_t)INT32_MIN - ib : ib;
    return la > lb ? la - lb : lb - la;
}

// one element at a time, never vectorized: what the loop below must reproduce bit for bit
__attribute__((noinline, optimize("no-tree-vectorize"))) static void exp_scalar(float* y, const float* x, int n) {
    for (int i = 0; i < n; i++) y[i] = exp_vec(x[i]);
}
__attribute__((noinline)) static void exp_loop(float* y, const float* x, int n) {
    for (int i = 0; i < n; i++) y[i] = exp_vec(x[i]); // vectorized by gcc at the CPU's width
}

// One pack into a 0xff-filled buffer against its layout written out directly. X holds the
// operand, element (i, k) at X[i * rs + k * cs]; pack_b 0: gemm_pack_a, rows [i0, i0 + mc) in
// micro-panels of mr = w rows; 1: gemm_pack_b of op(B) = X^T, columns [i0, i0 + mc) in panels of
// nr = w; k [k0, k0 + kc), zero past M. Returns the number of failures (each printed).
static int check_pack(CpuIsa isa, int pack_b, float* got, float* want, const float* X, ptrdiff_t rs, ptrdiff_t cs,
                      int M, int i0, int k0, int kc, int w, int t) {
    int mc = (M - i0 + w - 1) / w * w;
    for (int p = 0; p < mc; p += w)
        for (int k = 0; k < kc; k++)
            for (int r = 0; r < w; r++) {
                int i = i0 + p + r;
                want[p * kc + k * w + r] = i < M ? X[i * rs + (k0 + k) * cs] : 0.0f;
            }
    memset(got, 0xff, sizeof(float) * 64 * 64);
    if (pack_b) // op(B)(k, j) = X[j * rs + k * cs]: element (k, j) at B[k * brs + j * bcs]
        gemm_pack_b(isa, got, X, cs, rs, M, i0, mc, k0, kc, w);
    else
        gemm_pack_a(isa, got, X, rs, cs, M, i0, mc, k0, kc, w);
    const char* name = pack_b ? "pack_b" : "pack_a";
    const char* wname = pack_b ? "nr" : "mr";
    int bad = 0;
    if (memcmp(got, want, sizeof(float) * mc * kc) != 0) {
        bad++;
        printf("FAIL %s %s %s %d %s\n", name, cpu_isa_name(isa), wname, w, t ? "T" : "N");
    }
    // nothing past the panels: threads pack neighbouring slices of one shared buffer
    for (int i = mc * kc; i < 64 * 64; i++)
        if (((uint32_t*)got)[i] != 0xffffffffu) {
            bad++;
            printf("FAIL %s %s %s %d %s wrote float %d past the panel\n", name, cpu_isa_name(isa), wname, w,
                   t ? "T" : "N", i - mc * kc);
            break;
        }
    return bad;
}

// The packs alone, for every micro-tile shape of every ISA (4/6/12 rows, 16/32 columns), with
// the scalar and the AVX2 transposing copies: the AVX-512 kernel's 12 x 32 packing is checked
// even on a machine without AVX-512.
static void check_packs(void) {
    const int M = 29, K = 21; // odd: partial micro-panels, k tails of the 8-deep transposes
    float* A = malloc(sizeof(float) * M * K);
    for (int i = 0; i < M * K; i++) A[i] = frand();
    float* got = malloc(sizeof(float) * 64 * 64);
    float* want = malloc(sizeof(float) * 64 * 64);
    int bad = 0, cases = 0;
    for (int isa = CPU_ISA_GENERIC; isa <= CPU_ISA_AVX2; isa++) {
        if (!cpu_isa_supported((CpuIsa)isa)) continue;
        for (int t = 0; t < 2; t++) { // stored (M, K) or (K, M): op = stored or stored^T
            ptrdiff_t rs = t ? 1 : K, cs = t ? M : 1;
            const int mrs[] = {4, 6, 12}, nrs[] = {16, 32};
            for (int m = 0; m < 6; m++) { // A: rows [i0, i0+mc) of an M-row operand, k [k0, k0+kc)
                // i0 = 5: 24 rows, whole panels for every mr (the last one's stores end the buffer);
                // kc 18 ends in a scalar k tail, kc 16 in an 8-deep transpose (its last row's store)
                int i0 = m < 3 ? 4 : 5, k0 = 3, kc = m < 3 ? K - 3 : K - 5;
                bad += check_pack((CpuIsa)isa, 0, got, want, A, rs, cs, M, i0, k0, kc, mrs[m % 3], t);
                cases++;
            }
            for (int q = 0; q < 2; q++) { // B = this operand as (K', N') = op(.) with N' = M columns
                int j0 = 2, k0 = 1, kc = K - 1;
                bad += check_pack((CpuIsa)isa, 1, got, want, A, rs, cs, M, j0, k0, kc, nrs[q], t);
                cases++;
            }
        }
    }
    if (bad == 0)
        passed++;
    else
        failed++;
    printf("packs: %d layouts, %d wrong\n", cases, bad);
    free(A);
    free(got);
    free(want);
}

static void check_exp(void) {
    enum { N = 1 << 21 };
    float* x = malloc(sizeof(float) * N);
    float* y0 = malloc(sizeof(float) * N);
    float* y1 = malloc(sizeof(float) * N);
    for (int i = 0; i < N; i++) x[i] = -87.0f + 175.0f * (float)i / (float)(N - 1); // the whole range, evenly
    x[0] = -87.0f;
    x[1] = 88.0f;
    x[2] = 0.0f;
    x[3] = -0.0f;
    x[4] = 1e-30f;
    x[5] = 0.34657359f;
    x[6] = -0.34657359f;
    exp_scalar(y0, x, N);
    exp_loop(y1, x, N);
    int64_t worst = 0;
    int at = 0;
    for (int i = 0; i < N; i++) {
        int64_t u = ulp_diff(y0[i], (float)exp((double)x[i]));
        if (u > worst) {
            worst = u;
            at = i;
        }
    }
    if (worst <= 4)
        passed++;
    else {
        failed++;
        printf("FAIL exp_vec: %lld ulp from exp at x = %.9g (%.9g vs %.9g)\n", (long long)worst, x[at], y0[at],
               exp((double)x[at]));
    }
    if (memcmp(y0, y1, sizeof(float) * N) == 0)
        passed++;
    else {
        failed++;
        printf("FAIL exp_vec: the vectorized loop differs from scalar calls\n");
    }
    // outside the range: clamped (not inf / 0), NaN stays NaN
    float big = exp_vec(1000.0f), small = exp_vec(-1000.0f), nan = exp_vec(NAN);
    if (big == exp_vec(88.0f) && small == exp_vec(-87.0f) && isnan(nan))
        passed++;
    else {
        failed++;
        printf("FAIL exp_vec: exp(1000) %g, exp(-1000) %g, exp(NaN) %g\n", big, small, nan);
    }
    printf("exp_vec: worst %lld ulp from double exp over [-87, 88]\n", (long long)worst);
    free(x);
    free(y0);
    free(y1);
}

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec + 1e-9 * t.tv_nsec;
}

static void bench(void) {
    // the 125m step at B=4, T=64 (BT=256): forward NT, backward NN (dinp) and TN (dW)
    struct {
        const char* name;
        int M, N, K, ta, tb;
    } s[] = {
        {"fc fwd NT 256x3072x768", 256, 3072, 768, 0, 1}, {"fc dinp NN 256x768x3072", 256, 768, 3072, 0, 0},
        {"fc dW TN 3072x768x256", 3072, 768, 256, 1, 0},  {"head fwd NT 256x50257x768", 256, 50257, 768, 0, 1},
        {"square NN 2048^3", 2048, 2048, 2048, 0, 0},
    };
    for (int isa = CPU_ISA_AVX512; isa >= CPU_ISA_GENERIC; isa--) {
        if (!cpu_isa_supported((CpuIsa)isa)) continue;
        for (size_t c = 0; c < sizeof(s) / sizeof(s[0]); c++) {
            int M = s[c].M, N = s[c].N, K = s[c].K;
            float* A = malloc(sizeof(float) * M * K);
            float* B = malloc(sizeof(float) * K * N);
            float* C = malloc(sizeof(float) * M * N);
            for (size_t i = 0; i < (size_t)M * K; i++) A[i] = frand();
            for (size_t i = 0; i < (size_t)K * N; i++) B[i] = frand();
            ptrdiff_t ars = s[c].ta ? 1 : K, acs = s[c].ta ? M : 1, brs = s[c].tb ? 1 : N, bcs = s[c].tb ? K : 1;
            double best = 1e30;
            for (int r = 0; r < 3; r++) {
                double t0 = now();
                cpu_gemm((CpuIsa)isa, M, N, K, A, ars, acs, B, brs, bcs, C, N, 0, NULL, &work);
                double t = now() - t0;
                if (t < best) best = t;
            }
            printf("%-8s %-28s %8.1f GFLOP/s\n", cpu_isa_name((CpuIsa)isa), s[c].name, 2.0 * M * N * K / best * 1e-9);
            free(A);
            free(B);
            free(C);
        }
    }
}

int main(int argc, char** argv) {
    if (cpu_gemm_work_alloc(&work, 3) != 0) {
        printf("out of memory\n");
        return 1;
    }
    if (argc > 1 && strcmp(argv[1], "bench") == 0) {
        bench();
        return 0;
    }
    // sizes around micro-tiles (4/6/12 rows, 16/32 columns) and blocks (KC 256, MC 96)
    // 8, 130: the 2- and 4-row AVX2 edge kernels; 8 and the 64-row case below: AVX-512's 8 and 4
    const int Ms[] = {1, 5, 8, 13, 97, 130};
    const int Ns[] = {1, 17, 33, 70};
    const int Ks[] = {0, 1, 7, 13, 257, 520}; // 13, 257: the 8-deep transposing packs' tails
    int threads[] = {1, 2, 3};
    for (int isa = CPU_ISA_GENERIC; isa <= CPU_ISA_AVX512; isa++) {
        if (!cpu_isa_supported((CpuIsa)isa)) {
            printf("(%s: not on this CPU, skipped)\n", cpu_isa_name((CpuIsa)isa));
            continue;
        }
        int before = failed;
        for (size_t mi = 0; mi < sizeof(Ms) / sizeof(int); mi++)
            for (size_t ni = 0; ni < sizeof(Ns) / sizeof(int); ni++)
                for (size_t ki = 0; ki < sizeof(Ks) / sizeof(int); ki++)
                    for (int sh = 0; sh < 4; sh++) {
                        int c = (int)(mi * 7 + ni * 3 + ki + sh); // vary threads/flags across cases
                        int flags = c % 2 ? CPU_GEMM_ACCUMULATE : (c / 4) % 2 ? CPU_GEMM_STREAM : 0;
                        unaligned = (c / 8) % 2;
                        check((CpuIsa)isa, threads[c % 3], Ms[mi], Ns[ni], Ks[ki], sh & 1, sh >> 1, flags, (c / 2) % 2);
                    }
        // the trainer's large shapes (one each): a wide NT head slice, a tall TN weight gradient
        check((CpuIsa)isa, 2, 64, 1601, 96, 0, 1, 0, 0);
        check((CpuIsa)isa, 2, 1601, 96, 64, 1, 0, 1, 0);
        check((CpuIsa)isa, 3, 300, 200, 600, 0, 0, 1, 1);
        unaligned = 0; // a weight gradient's first write: TN, non-temporal stores
        check((CpuIsa)isa, 2, 1601, 96, 64, 1, 0, CPU_GEMM_STREAM, 0);
        check((CpuIsa)isa, 3, 130, 600, 300, 1, 0, CPU_GEMM_STREAM, 1);
        // the same through per-thread packs of both operands (what a shared operand too large
        // for the work's shared buffer takes), and both paths from 1 to 3 threads
        per_thread_packs = 1;
        check((CpuIsa)isa, 3, 64, 1601, 96, 0, 1, 0, 0);
        check((CpuIsa)isa, 3, 1601, 96, 64, 1, 0, 1, 0);
        check((CpuIsa)isa, 3, 300, 200, 600, 0, 0, 1, 1);
        check((CpuIsa)isa, 3, 97, 70, 520, 1, 1, 0, 1);
        check((CpuIsa)isa, 71, 300, 200, 600, 0, 1, 0,
              0); // more threads than the 2-core machine has chunks of some shapes
        per_thread_packs = 0;
        check((CpuIsa)isa, 70, 300, 200, 600, 0, 1, 0, 0); // and around a shared operand
        printf("%s: %s\n", cpu_isa_name((CpuIsa)isa),
               failed == before ? "bit-identical to the fmaf reference" : "MISMATCH");
    }
    check_packs();
    check_exp();
    printf("%d passed, %d failed\n", passed, failed);
    return failed ? 1 : 0;
}
