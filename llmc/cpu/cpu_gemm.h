/*
 * cpu_gemm.h: the CPU trainer's matrix multiply. A packed, register-blocked fp32 GEMM
 * with micro-kernels for AVX-512, AVX2/FMA and a portable fallback, chosen at run time.
 *
 *   C (M, N) = [C +] op(A) (M, K) @ op(B) (K, N) [+ bias (N)]
 *
 * flags: CPU_GEMM_ACCUMULATE adds to C; CPU_GEMM_STREAM (when not accumulating) writes C
 * with non-temporal stores, for outputs nothing reads soon (the weight gradients): no read
 * for ownership of lines about to be overwritten, and the caches keep the operands.
 *
 * Operands are given by strides, so NN, NT and TN (and TT) need no transposed copies:
 * element (i, k) of op(A) is A[i*a_rs + k*a_cs], element (k, j) of op(B) is
 * B[k*b_rs + j*b_cs].
 *
 * Reproducibility contract (what makes this the reference): every output element is
 *   acc = ACCUMULATE ? C[i][j] : 0;  for k = 0 .. K-1: acc = fmaf(A(i,k), B(k,j), acc);
 *   C[i][j] = bias ? acc + bias[j] : acc;
 * in exactly that order, whatever the ISA, blocking or thread count. Vector lanes hold
 * different output elements (never parts of one sum), blocks over k hand the partial sum
 * on through C in fp32 (exact), and threads split the outputs only, never k. So the
 * result is bit-identical across AVX-512 / AVX2 / generic and 1..n threads; the test
 * (tests/test_cpu_gemm.c) checks that against a plain fmaf loop.
 *
 * ISA choice: the best the CPU supports, or env LLMC_CPU_ISA=avx512|avx2|generic to
 * force one (e.g. to check on an AVX-512 machine what an AVX2 machine computes).
 */
#ifndef LLMC_CPU_GEMM_H
#define LLMC_CPU_GEMM_H

#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#ifdef _OPENMP
#include <omp.h>
#endif
#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#define CPU_GEMM_X86 1
#endif

// Prefetches the cache line holding p into every level. An asm statement on x86 rather
// than __builtin_prefetch: gcc 12 deletes a loop whose only effect is __builtin_prefetch.
#ifdef CPU_GEMM_X86
#define CPU_PREFETCH(p) __asm__ volatile("prefetcht0 %0" : : "m"(*(const char*)(p)))
#else
#define CPU_PREFETCH(p) __builtin_prefetch((const void*)(p), 0, 3)
#endif

typedef enum { CPU_ISA_GENERIC = 0, CPU_ISA_AVX2 = 1, CPU_ISA_AVX512 = 2 } CpuIsa;
enum { CPU_GEMM_ACCUMULATE = 1, CPU_GEMM_STREAM = 2 }; // cpu_gemm's flags

static const char* cpu_isa_name(CpuIsa isa) {
    return isa == CPU_ISA_AVX512 ? "avx512" : isa == CPU_ISA_AVX2 ? "avx2" : "generic";
}

static int cpu_isa_supported(CpuIsa isa) {
#ifdef CPU_GEMM_X86
    if (isa == CPU_ISA_AVX512) return __builtin_cpu_supports("avx512f");
    if (isa == CPU_ISA_AVX2) return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
#endif
    return isa == CPU_ISA_GENERIC;
}

// The ISA to use: LLMC_CPU_ISA if set, else the best supported. Returns -1 and fills err
// for an unknown or unsupported forced value. Stateless (cheap: env + cpuid cache).
static int cpu_isa_choose(CpuIsa* isa, char* err, size_t n) {
    const char* e = getenv("LLMC_CPU_ISA");
    if (e != NULL && *e != '\0' && strcmp(e, "auto") != 0) {
        CpuIsa want;
        if (strcmp(e, "avx512") == 0)
            want = CPU_ISA_AVX512;
        else if (strcmp(e, "avx2") == 0)
            want = CPU_ISA_AVX2;
        else if (strcmp(e, "generic") == 0)
            want = CPU_ISA_GENERIC;
        else {
            snprintf(err, n, "LLMC_CPU_ISA=%s: expected avx512, avx2, generic or auto", e);
            return -1;
        }
        if (!cpu_isa_supported(want)) {
            snprintf(err, n, "LLMC_CPU_ISA=%s: this CPU does not support it", e);
            return -1;
        }
        *isa = want;
        return 0;
    }
    *isa = cpu_isa_supported(CPU_ISA_AVX512) ? CPU_ISA_AVX512
           : cpu_isa_supported(CPU_ISA_AVX2) ? CPU_ISA_AVX2
                                             : CPU_ISA_GENERIC;
    return 0;
}

// The chosen ISA; a bad LLMC_CPU_ISA ends the process with one line (callers check it
// once at start-up with cpu_isa_choose, so this never fires mid-run).
static CpuIsa cpu_isa(void) {
    CpuIsa isa;
    char err[160];
    if (cpu_isa_choose(&isa, err, sizeof(err)) != 0) {
        fprintf(stderr, "error: %s\n", err);
        exit(1);
    }
    return isa;
}

// Cache blocking (floats): a KC x NC panel of B and an MC x KC block of A per thread.
// Blocking never changes the numbers, only the speed.
#define GEMM_KC 256
#define GEMM_MC 96
#define GEMM_NC 1536
#define GEMM_MR_MAX 12
#define GEMM_NR_MAX 32

// Micro-kernel: C tile (mr, nr) at C (row stride ldc) = (load & 1 ? C : 0) + Ap @ Bp over kc,
// Ap packed (kc, mr), Bp packed (kc, nr), both zero-padded to the full tile. load & 2: store
// the tile with non-temporal stores (vector kernels; C rows aligned to the vector width).
typedef void (*GemmKernel)(int kc, const float* Ap, const float* Bp, float* C, int ldc, int load);

static void gemm_kernel_generic(int kc, const float* Ap, const float* Bp, float* C, int ldc, int load) {
    enum { MR = 4, NR = 16 };
    float acc[MR][NR];
    for (int r = 0; r < MR; r++)
        for (int j = 0; j < NR; j++) acc[r][j] = (load & 1) ? C[(size_t)r * ldc + j] : 0.0f;
    for (int k = 0; k < kc; k++) {
        for (int r = 0; r < MR; r++) {
            float a = Ap[r];
            for (int j = 0; j < NR; j++) acc[r][j] = fmaf(a, Bp[j], acc[r][j]);
        }
        Ap += MR;
        Bp += NR;
    }
    for (int r = 0; r < MR; r++)
        for (int j = 0; j < NR; j++) C[(size_t)r * ldc + j] = acc[r][j];
}

#ifdef CPU_GEMM_X86
// The accumulators are named variables, not arrays: with __m256 c[6] gcc spilled them to the
// stack inside the k loop (a store per FMA pair: ~35% of peak). Written out, they stay in
// registers. The per-element order (one fma per k, k ascending) is the same either way.
//
// One kernel body for both vector widths, written against GV(I, name): the ISA I's entry of
// the tables below. Tile (MR, 2 vectors); per k two B vectors and one broadcast of A per
// row. ROWS(X, I) names the rows computed: all MR, or the first few of an MR-row packed
// panel for the last tile of a column panel when M % MR leaves them (M = 256: 4 rows for
// both widths), which otherwise went through a copy with the missing rows computed as
// zeros. AVX2 (tested on every CI machine) and AVX-512 share this text.
#define GV(I, name) GV_##I##_##name
#define GEMM_ROWS2(X, I) X(0, I) X(1, I)
#define GEMM_ROWS4(X, I) GEMM_ROWS2(X, I) X(2, I) X(3, I)
#define GEMM_ROWS6(X, I) GEMM_ROWS4(X, I) X(4, I) X(5, I)
#define GEMM_ROWS8(X, I) GEMM_ROWS6(X, I) X(6, I) X(7, I)
#define GEMM_ROWS12(X, I) GEMM_ROWS8(X, I) X(8, I) X(9, I) X(10, I) X(11, I)
#define GEMM_VEC_KERNEL(NAME, ROWS, MR, I)                                                                      \
    __attribute__((target(GV(I, TARGET)))) static void NAME(int kc, const float* Ap, const float* Bp, float* C, \
                                                            int ldc, int load) {                                \
        ROWS(GEMM_V_DECL, I)                                                                                    \
        if (load & 1) {                                                                                         \
            ROWS(GEMM_V_LOAD, I)                                                                                \
        }                                                                                                       \
        for (int k = 0; k < kc; k++) {                                                                          \
            GV(I, T) b0 = GV(I, LOAD)(Bp), b1 = GV(I, LOAD)(Bp + GV(I, W)), a;                                  \
            ROWS(GEMM_V_FMA, I)                                                                                 \
            Ap += (MR);                                                                                         \
            Bp += 2 * GV(I, W);                                                                                 \
        }                                                                                                       \
        if (load & 2) {                                                                                         \
            ROWS(GEMM_V_STREAM, I)                                                                              \
        } else {                                                                                                \
            ROWS(GEMM_V_STORE, I)                                                                               \
        }                                                                                                       \
    }
#define GEMM_V_DECL(r, I) GV(I, T) c##r##0 = GV(I, ZERO)(), c##r##1 = GV(I, ZERO)();
#define GEMM_V_LOAD(r, I)                        \
    c##r##0 = GV(I, LOADU)(C + (size_t)r * ldc); \
    c##r##1 = GV(I, LOADU)(C + (size_t)r * ldc + GV(I, W));
#define GEMM_V_FMA(r, I)                  \
    a = GV(I, BCAST)(Ap + r);             \
    c##r##0 = GV(I, FMA)(a, b0, c##r##0); \
    c##r##1 = GV(I, FMA)(a, b1, c##r##1);
#define GEMM_V_STREAM(r, I)                      \
    GV(I, STREAM)(C + (size_t)r * ldc, c##r##0); \
    GV(I, STREAM)(C + (size_t)r * ldc + GV(I, W), c##r##1);
#define GEMM_V_STORE(r, I)                       \
    GV(I, STOREU)(C + (size_t)r * ldc, c##r##0); \
    GV(I, STOREU)(C + (size_t)r * ldc + GV(I, W), c##r##1);

// AVX2: 6 x 16, 12 ymm accumulators, 2 for B, 1 broadcast (of 16 registers)
#define GV_avx2_TARGET "avx2,fma"
#define GV_avx2_T __m256
#define GV_avx2_W 8
#define GV_avx2_ZERO _mm256_setzero_ps
#define GV_avx2_LOAD _mm256_load_ps
#define GV_avx2_LOADU _mm256_loadu_ps
#define GV_avx2_STOREU _mm256_storeu_ps
#define GV_avx2_STREAM _mm256_stream_ps
#define GV_avx2_FMA _mm256_fmadd_ps
#define GV_avx2_BCAST _mm256_broadcast_ss
GEMM_VEC_KERNEL(gemm_kernel_avx2, GEMM_ROWS6, 6, avx2)
GEMM_VEC_KERNEL(gemm_kernel_avx2_r4, GEMM_ROWS4, 6, avx2)
GEMM_VEC_KERNEL(gemm_kernel_avx2_r2, GEMM_ROWS2, 6, avx2)

// AVX-512: 12 x 32, 24 zmm accumulators, 2 for B, broadcasts (of 32 registers)
#define GV_avx512_TARGET "avx512f"
#define GV_avx512_T __m512
#define GV_avx512_W 16
#define GV_avx512_ZERO _mm512_setzero_ps
#define GV_avx512_LOAD _mm512_load_ps
#define GV_avx512_LOADU _mm512_loadu_ps
#define GV_avx512_STOREU _mm512_storeu_ps
#define GV_avx512_STREAM _mm512_stream_ps
#define GV_avx512_FMA _mm512_fmadd_ps
#define GV_avx512_BCAST(p) _mm512_set1_ps(*(p))
GEMM_VEC_KERNEL(gemm_kernel_avx512, GEMM_ROWS12, 12, avx512)
GEMM_VEC_KERNEL(gemm_kernel_avx512_r8, GEMM_ROWS8, 12, avx512)
GEMM_VEC_KERNEL(gemm_kernel_avx512_r4, GEMM_ROWS4, 12, avx512)
#endif

// kernel: the full mr x nr tile; rows[h]: a kernel for the first h rows of a full-width tile
// (NULL: that edge goes through a full-size copy)
typedef struct {
    GemmKernel kernel;
    int mr, nr;
    GemmKernel rows[GEMM_MR_MAX + 1];
} GemmArch;

static GemmArch gemm_arch(CpuIsa isa) {
    GemmArch g = {gemm_kernel_generic, 4, 16, {NULL}};
#ifdef CPU_GEMM_X86
    if (isa == CPU_ISA_AVX512) {
        g.kernel = gemm_kernel_avx512;
        g.mr = 12;
        g.nr = 32;
        g.rows[8] = gemm_kernel_avx512_r8;
        g.rows[4] = gemm_kernel_avx512_r4;
    } else if (isa == CPU_ISA_AVX2) {
        g.kernel = gemm_kernel_avx2;
        g.mr = 6;
        g.nr = 16;
        g.rows[4] = gemm_kernel_avx2_r4;
        g.rows[2] = gemm_kernel_avx2_r2;
    }
#else
    (void)isa;
#endif
    return g;
}

#ifdef CPU_GEMM_X86
// 8 x 8 transpose in registers: r[i] lane j -> r[j] lane i (data movement only)
__attribute__((target("avx2"))) static inline void gemm_transpose8(__m256 r[8]) {
    __m256 t0 = _mm256_unpacklo_ps(r[0], r[1]), t1 = _mm256_unpackhi_ps(r[0], r[1]);
    __m256 t2 = _mm256_unpacklo_ps(r[2], r[3]), t3 = _mm256_unpackhi_ps(r[2], r[3]);
    __m256 t4 = _mm256_unpacklo_ps(r[4], r[5]), t5 = _mm256_unpackhi_ps(r[4], r[5]);
    __m256 t6 = _mm256_unpacklo_ps(r[6], r[7]), t7 = _mm256_unpackhi_ps(r[6], r[7]);
    __m256 u0 = _mm256_shuffle_ps(t0, t2, 0x44), u1 = _mm256_shuffle_ps(t0, t2, 0xEE);
    __m256 u2 = _mm256_shuffle_ps(t1, t3, 0x44), u3 = _mm256_shuffle_ps(t1, t3, 0xEE);
    __m256 u4 = _mm256_shuffle_ps(t4, t6, 0x44), u5 = _mm256_shuffle_ps(t4, t6, 0xEE);
    __m256 u6 = _mm256_shuffle_ps(t5, t7, 0x44), u7 = _mm256_shuffle_ps(t5, t7, 0xEE);
    r[0] = _mm256_permute2f128_ps(u0, u4, 0x20);
    r[1] = _mm256_permute2f128_ps(u1, u5, 0x20);
    r[2] = _mm256_permute2f128_ps(u2, u6, 0x20);
    r[3] = _mm256_permute2f128_ps(u3, u7, 0x20);
    r[4] = _mm256_permute2f128_ps(u0, u4, 0x31);
    r[5] = _mm256_permute2f128_ps(u1, u5, 0x31);
    r[6] = _mm256_permute2f128_ps(u2, u6, 0x31);
    r[7] = _mm256_permute2f128_ps(u3, u7, 0x31);
}

// dst[k * ld + c] = src[c * ss + k] for c < n (<= 8), k < kc: a transposing copy, 8 x 8
// blocks in registers (the scalar form was a third of the step's packing time). Rows c >= n
// read as zero; only lanes c < n are written, except when ld == n (a dense panel, e.g. 6-row
// A panels): then each row is stored 8 wide in increasing k, its extra lanes landing in the
// next rows, which the next stores overwrite (masked stores cost several times more). The
// last rows, whose extra lanes would land past the panel, are stored masked: nothing outside
// the panel is written, so threads may pack neighbouring panels of one buffer at once.
__attribute__((target("avx2"))) static void gemm_transpose_copy(float* dst, ptrdiff_t ld, const float* src,
                                                                ptrdiff_t ss, int n, int kc) {
    static const int lanes[16] = {-1, -1, -1, -1, -1, -1, -1, -1, 0, 0, 0, 0, 0, 0, 0, 0};
    __m256i mask = _mm256_loadu_si256((const __m256i*)(lanes + 8 - n));
    int wide = n == 8 || ld == n;
    int k = 0;
    for (; k + 8 <= kc; k += 8) {
        __m256 r[8];
        for (int c = 0; c < 8; c++) r[c] = c < n ? _mm256_loadu_ps(src + (ptrdiff_t)c * ss + k) : _mm256_setzero_ps();
        gemm_transpose8(r);
        for (int q = 0; q < 8; q++) {
            if (wide && (ld != n || (ptrdiff_t)(k + q) * ld + 8 <= (ptrdiff_t)kc * ld))
                _mm256_storeu_ps(dst + (ptrdiff_t)(k + q) * ld, r[q]);
            else
                _mm256_maskstore_ps(dst + (ptrdiff_t)(k + q) * ld, mask, r[q]);
        }
    }
    for (; k < kc; k++)
        for (int c = 0; c < n; c++) dst[(ptrdiff_t)k * ld + c] = src[(ptrdiff_t)c * ss + k];
}
#endif

// dst[k * ld + c] = src[c * ss + k] for c < n, k < kc (vector blocks where the CPU has AVX2)
static void gemm_transpose_pack(CpuIsa isa, float* dst, ptrdiff_t ld, const float* src, ptrdiff_t ss, int n, int kc) {
#ifdef CPU_GEMM_X86
    if (isa != CPU_ISA_GENERIC) {
        for (int c = 0; c < n; c += 8)
            gemm_transpose_copy(dst + c, ld, src + (ptrdiff_t)c * ss, ss, n - c < 8 ? n - c : 8, kc);
        return;
    }
#else
    (void)isa;
#endif
    for (int c = 0; c < n; c++)
        for (int k = 0; k < kc; k++) dst[(ptrdiff_t)k * ld + c] = src[(ptrdiff_t)c * ss + k];
}

// d[0..n) = s[0..n): constant-length memcpy for the tile widths, so they become vector moves
// (element loops stayed scalar moves: gcc cannot rule out that d and s overlap)
static inline void gemm_copy(float* d, const float* s, int n) {
    if (n == 16)
        memcpy(d, s, sizeof(float) * 16);
    else if (n == 32)
        memcpy(d, s, sizeof(float) * 32);
    else if (n == 6)
        memcpy(d, s, sizeof(float) * 6);
    else if (n == 12)
        memcpy(d, s, sizeof(float) * 12);
    else
        memcpy(d, s, sizeof(float) * (size_t)n);
}

// Ap: rows [i0, i0+mc) x k [k0, k0+kc) of op(A) as mr-row micro-panels, each (kc, mr),
// rows past M zero. Reads along whichever stride is contiguous; writes nothing past Ap[mc * kc].
static void gemm_pack_a(CpuIsa isa, float* Ap, const float* A, ptrdiff_t rs, ptrdiff_t cs, int M, int i0, int mc,
                        int k0, int kc, int mr) {
    int full = 0; // micro-panels with all mr rows inside M
    while (full + mr <= mc && i0 + full + mr <= M) full += mr;
    if (rs == 1 && full > 0) {
        // op(A) = stored^T: for each k the rows are contiguous. k outer, so each stored row is
        // read once, front to back (panel by panel it was a strided walk: cold-cache slow)
        for (int k = 0; k < kc; k++) {
            const float* src = A + (ptrdiff_t)i0 + (ptrdiff_t)(k0 + k) * cs;
            for (int p = 0; p < full; p += mr) gemm_copy(Ap + (size_t)p * kc + (size_t)k * mr, src + p, mr);
        }
    } else if (cs == 1) { // rows contiguous along k: a transposing copy per panel
        for (int p = 0; p < full; p += mr)
            gemm_transpose_pack(isa, Ap + (size_t)p * kc, mr, A + (ptrdiff_t)(i0 + p) * rs + k0, rs, mr, kc);
    } else {
        full = 0;
    }
    for (int p = full; p < mc; p += mr) { // the rest, element by element (rows past M zero)
        float* dst = Ap + (size_t)p * kc;
        for (int r = 0; r < mr; r++) {
            int i = i0 + p + r;
            if (i >= M || p + r >= mc) {
                for (int k = 0; k < kc; k++) dst[(size_t)k * mr + r] = 0.0f;
                continue;
            }
            const float* src = A + (ptrdiff_t)i * rs + (ptrdiff_t)k0 * cs;
            for (int k = 0; k < kc; k++) dst[(size_t)k * mr + r] = src[(ptrdiff_t)k * cs];
        }
    }
}

// Bp: k [k0, k0+kc) x columns [j0, j0+nc) of op(B) as nr-column micro-panels (kc, nr),
// columns past N zero.
static void gemm_pack_b(CpuIsa isa, float* Bp, const float* B, ptrdiff_t rs, ptrdiff_t cs, int N, int j0, int nc,
                        int k0, int kc, int nr) {
    if (cs == 1) {
        // rows of B contiguous: 8 rows at a time, each row segment read once front to back
        // (panel by panel it was a strided walk through cold memory), the 8 rows then spread
        // over the panels, 8 consecutive lines to each (one row at a time spread its stores
        // over nc / nr lines 16 KiB apart, all in one L1 set)
        for (int kb = 0; kb < kc; kb += 8) {
            int ke = kb + 8 < kc ? kb + 8 : kc;
            for (int q = 0; q < nc; q += nr) {
                int w = nc - q < nr ? nc - q : nr;
                if (j0 + q + w > N) w = N - (j0 + q);
                for (int k = kb; k < ke; k++) {
                    const float* src = B + (ptrdiff_t)(k0 + k) * rs + j0 + q;
                    float* d = Bp + (size_t)q * kc + (size_t)k * nr;
                    if (w == nr) {
                        gemm_copy(d, src, nr);
                        continue;
                    }
                    for (int c = 0; c < nr; c++) d[c] = c < w ? src[c] : 0.0f;
                }
            }
        }
        return;
    }
    for (int q = 0; q < nc; q += nr) {
        float* dst = Bp + (size_t)q * kc;
        int w = nc - q < nr ? nc - q : nr;
        if (j0 + q + w > N) w = N - (j0 + q);
        if (w < 0) w = 0;
        if (rs == 1) { // columns contiguous (B = W^T): a transposing copy
            if (w > 0) gemm_transpose_pack(isa, dst, nr, B + k0 + (ptrdiff_t)(j0 + q) * cs, cs, w, kc);
            for (int c = w; c < nr; c++)
                for (int k = 0; k < kc; k++) dst[(size_t)k * nr + c] = 0.0f;
        } else { // neither stride contiguous: element by element
            for (int c = 0; c < nr; c++) {
                if (c >= w) {
                    for (int k = 0; k < kc; k++) dst[(size_t)k * nr + c] = 0.0f;
                    continue;
                }
                const float* src = B + (ptrdiff_t)k0 * rs + (ptrdiff_t)(j0 + q + c) * cs;
                for (int k = 0; k < kc; k++) dst[(size_t)k * nr + c] = src[(ptrdiff_t)k * rs];
            }
        }
    }
}

// One thread's sub-problem: rows [m0, m1) x columns [n0, n1) of C, all of k. sa / sb: op(A)
// for all M rows / op(B) for all N columns already packed for every k block (block pc at
// sa + Mp * pc, Mp = M rounded up to mr; likewise sb + Np * pc), or NULL: packed here into
// the thread's Ap / Bp.
static void gemm_serial(CpuIsa isa, GemmArch ar, int M, int N, int K, const float* A, ptrdiff_t a_rs, ptrdiff_t a_cs,
                        const float* B, ptrdiff_t b_rs, ptrdiff_t b_cs, float* C, int ldc, int flags, int m0, int m1,
                        int n0, int n1, float* Ap, float* Bp, const float* sa, const float* sb) {
    int mr = ar.mr, nr = ar.nr;
    int accumulate = flags & CPU_GEMM_ACCUMULATE;
    // non-temporal stores need every full tile's rows aligned to the vector (the nr-column
    // panels start at multiples of nr floats: 64 B or more)
    size_t va = isa == CPU_ISA_AVX512 ? 64 : 32;
    int stream = (flags & CPU_GEMM_STREAM) && !accumulate && isa != CPU_ISA_GENERIC && (uintptr_t)C % va == 0 &&
                 ((size_t)ldc * sizeof(float)) % va == 0;
    size_t Mp = (size_t)(M + mr - 1) / mr * mr, Np = (size_t)(N + nr - 1) / nr * nr;
    float tile[GEMM_MR_MAX * GEMM_NR_MAX];
    for (int jc = n0; jc < n1; jc += GEMM_NC) {
        int nc = n1 - jc < GEMM_NC ? n1 - jc : GEMM_NC;
        int ncp = (nc + nr - 1) / nr * nr;
        for (int pc = 0; pc < K; pc += GEMM_KC) {
            int kc = K - pc < GEMM_KC ? K - pc : GEMM_KC;
            int load = accumulate || pc > 0;
            int st = stream && pc + GEMM_KC >= K ? 2 : 0; // the last k block writes C for good
            const float* bk = sb != NULL ? sb + Np * pc + (size_t)jc * kc : Bp;
            if (sb == NULL) gemm_pack_b(isa, Bp, B, b_rs, b_cs, N, jc, ncp, pc, kc, nr);
            for (int ic = m0; ic < m1; ic += GEMM_MC) {
                int mc = m1 - ic < GEMM_MC ? m1 - ic : GEMM_MC;
                int mcp = (mc + mr - 1) / mr * mr;
                const float* ak = sa != NULL ? sa + Mp * pc + (size_t)ic * kc : Ap;
                if (sa == NULL) gemm_pack_a(isa, Ap, A, a_rs, a_cs, m1, ic, mcp, pc, kc, mr);
                for (int jr = 0; jr < nc; jr += nr) {
                    const float* bp = bk + (size_t)jr * kc;
                    int w = nc - jr < nr ? nc - jr : nr;
                    for (int ir = 0; ir < mc; ir += mr) {
                        const float* ap = ak + (size_t)ir * kc;
                        int h = mc - ir < mr ? mc - ir : mr;
                        float* c = C + (size_t)(ic + ir) * ldc + (jc + jr);
                        if (!st && ir + mr < mc) { // the next tile's C rows (read or only written: owned either way)
                                                   // while this one computes
                            for (int r = 0; r < mr; r++) {
                                const char* pf = (const char*)(c + (size_t)(mr + r) * ldc);
                                __builtin_prefetch(pf, 1, 3);
                                if (nr > 16) __builtin_prefetch(pf + 64, 1, 3);
                            }
                        }
                        if (h == mr && w == nr) {
                            ar.kernel(kc, ap, bp, c, ldc, load | st);
                            continue;
                        }
                        if (w == nr && ar.rows[h] != NULL) {
                            ar.rows[h](kc, ap, bp, c, ldc, load);
                            continue;
                        }
                        // edge tile: through a full-size copy, only the valid part written back
                        for (int r = 0; r < mr; r++)
                            for (int j = 0; j < nr; j++)
                                tile[r * nr + j] = (load && r < h && j < w) ? c[(size_t)r * ldc + j] : 0.0f;
                        ar.kernel(kc, ap, bp, tile, nr, 1);
                        for (int r = 0; r < h; r++) memcpy(c + (size_t)r * ldc, tile + r * nr, sizeof(float) * w);
                    }
                }
            }
        }
    }
}

// With several threads the outputs are cut into chunks handed out dynamically: in a shared
// VM the two threads of a 2-core guest ran 7-25% apart per GEMM (measured on the 125m step's
// shapes), and with one half each the faster one idled for the difference. The chunks shrink
// as they go (gemm_chunks_guided), so the wait at the end is short. The operand every chunk needs whole (op(A) when the
// chunks split the columns, op(B) when they split the rows) is then packed once, by all threads together, into a shared
// buffer of at most GEMM_SHARED_MAX floats (256 rows x K 4096: the widest layer of 350m at
// B x T = 256); a larger one is packed per thread and the outputs cut into one part per thread.
// Every chunk reads all of the shared operand: past GEMM_SHARED_L2 floats (more than a core's
// L2 keeps beside the rest) it streams from L3 per chunk, so those GEMMs take fewer, larger
// chunks (the 125m step's K = 2304 / 3072 products: ~3% of the step on a 2-core AVX-512
// guest, measured per step toggled in one binary).
#define GEMM_SHARED_MAX ((size_t)1 << 22)
#define GEMM_SHARED_L2 ((size_t)1 << 18)

// Chunk boundaries cb[0..n] (n returned) over `panels` panels for nt threads: each chunk
// 1/div of what is left (a big first share, small last ones; div = 2 nt usually, nt when
// every chunk re-reads a large shared operand), at most GEMM_CHUNKS_CAP(nt) chunks. div 0: one
// equal part per thread (no shared operand: each chunk packs both operands itself).
// cb holds GEMM_CHUNKS_CAP(nt) + 1 entries.
#define GEMM_CHUNKS_CAP(nt) (8 * (nt) + 8)
static int gemm_chunks_guided(int panels, int nt, int div, int* cb) {
    int n = 0, p = 0;
    cb[0] = 0;
    if (div == 0) {
        for (int c = 1; c <= nt; c++) cb[c] = (int)((long long)panels * c / nt);
        return nt;
    }
    while (p < panels) {
        int s = (panels - p + div - 1) / div;
        if (n == GEMM_CHUNKS_CAP(nt) - 1) s = panels - p;
        p += s;
        cb[++n] = p;
    }
    return n;
}

// Pack buffers for up to `threads` OpenMP threads, made once by the caller: allocating them
// per call cost page faults and TLB shootdowns in every GEMM (~2.5% of a 125m step). shared:
// the jointly packed operand, shared_cap floats (a test sets it lower to force the other path).
typedef struct {
    float* mem;
    int threads;
    float* shared;
    size_t shared_cap;
} CpuGemmWork;

// floats of one thread's pack buffers for blocks of at most mc rows, nc columns, kc deep:
// an (mc + MR) x kc block of A and an (nc + NR) x kc panel of B, each a multiple of 16
static void gemm_pack_floats(size_t mc, size_t nc, size_t kc, size_t* na, size_t* nb) {
    *na = ((mc + GEMM_MR_MAX) * kc + 15) / 16 * 16;
    *nb = ((nc + GEMM_NR_MAX) * kc + 15) / 16 * 16;
}

// The most threads a later OpenMP region may use (1 in a build without OpenMP).
static int cpu_gemm_max_threads(void) {
#ifdef _OPENMP
    return omp_get_max_threads();
#else
    return 1;
#endif
}

// Returns 0, or -1 when out of memory. The pages are touched here, not in the first step.
static int cpu_gemm_work_alloc(CpuGemmWork* w, int threads) {
    size_t na, nb;
    gemm_pack_floats(GEMM_MC, GEMM_NC, GEMM_KC, &na, &nb);
    w->threads = threads > 0 ? threads : 1;
    size_t n = (size_t)w->threads * (na + nb), ns = w->threads > 1 ? GEMM_SHARED_MAX : 0;
    w->mem = (float*)aligned_alloc(64, sizeof(float) * (n + ns));
    if (w->mem == NULL) return -1;
    memset(w->mem, 0, sizeof(float) * (n + ns));
    w->shared = ns > 0 ? w->mem + n : NULL;
    w->shared_cap = ns;
    return 0;
}
static void cpu_gemm_work_free(CpuGemmWork* w) {
    free(w->mem);
    w->mem = NULL;
    w->shared = NULL;
    w->shared_cap = 0;
    w->threads = 0;
}

// C (M, N), row stride ldc. See the top of the file. Parallel over outputs only: the larger of
// M and N is cut into chunks of whole micro-panels (one OpenMP region; see gemm_chunks_guided).
// flags: CPU_GEMM_ACCUMULATE, CPU_GEMM_STREAM. work: pack buffers for at least this region's
// threads, or NULL (allocated per call).
static void cpu_gemm(CpuIsa isa, int M, int N, int K, const float* A, ptrdiff_t a_rs, ptrdiff_t a_cs, const float* B,
                     ptrdiff_t b_rs, ptrdiff_t b_cs, float* C, int ldc, int flags, const float* bias,
                     const CpuGemmWork* work) {
    int accumulate = flags & CPU_GEMM_ACCUMULATE;
    if (M <= 0 || N <= 0) return;
    GemmArch ar = gemm_arch(isa);
    double work_flops = (double)M * N * (K > 0 ? K : 1);
    int parallel = work_flops > 2e5 && cpu_gemm_max_threads() > 1;
    int split_rows = M >= N;
    int panels = split_rows ? (M + ar.mr - 1) / ar.mr : (N + ar.nr - 1) / ar.nr;
    // the shared operand: op(A) for all Mp rows when splitting columns, op(B) for all Np
    // columns when splitting rows, every k block
    size_t Mp = (size_t)(M + ar.mr - 1) / ar.mr * ar.mr, Np = (size_t)(N + ar.nr - 1) / ar.nr * ar.nr;
    size_t need = (split_rows ? Np : Mp) * (size_t)(K > 0 ? K : 0);
    float *shared = NULL, *shared_own = NULL;
    if (parallel && K > 0 && need <= GEMM_SHARED_MAX) {
        if (work == NULL)
            shared = shared_own = (float*)aligned_alloc(64, sizeof(float) * ((need + 15) / 16 * 16));
        else if (work->shared != NULL && need <= work->shared_cap)
            shared = work->shared;
    }
#pragma omp parallel if (parallel)
    {
        int nt = 1, id = 0;
#ifdef _OPENMP
        nt = omp_get_num_threads();
        id = omp_get_thread_num();
#endif
        const float* sa = NULL;
        const float* sb = NULL;
        int div = 0;                    // chunking: equal parts, or guided around the shared operand
        if (shared != NULL && nt > 1) { // pack the shared operand together: each thread a slice of every k block
            int units = split_rows ? (int)(Np / ar.nr) : (int)(Mp / ar.mr);
            int u0 = (int)((long long)units * id / nt), u1 = (int)((long long)units * (id + 1) / nt);
            for (int pc = 0; pc < K && u0 < u1; pc += GEMM_KC) {
                int kc = K - pc < GEMM_KC ? K - pc : GEMM_KC;
                if (split_rows)
                    gemm_pack_b(isa, shared + Np * pc + (size_t)u0 * ar.nr * kc, B, b_rs, b_cs, N, u0 * ar.nr,
                                (u1 - u0) * ar.nr, pc, kc, ar.nr);
                else
                    gemm_pack_a(isa, shared + Mp * pc + (size_t)u0 * ar.mr * kc, A, a_rs, a_cs, M, u0 * ar.mr,
                                (u1 - u0) * ar.mr, pc, kc, ar.mr);
            }
            if (split_rows)
                sb = shared;
            else
                sa = shared;
            div = need > GEMM_SHARED_L2 ? nt : 2 * nt;
#pragma omp barrier
        }
        float *Ap = NULL, *Bp = NULL, *own = NULL;
        if (K > 0) {
            size_t na, nb;
            if (work != NULL && work->mem != NULL && nt <= work->threads) {
                gemm_pack_floats(GEMM_MC, GEMM_NC, GEMM_KC, &na, &nb);
                Ap = work->mem + (size_t)id * (na + nb);
                Bp = Ap + na;
            } else { // pack buffers sized by the problem (small products stay small)
                size_t kc = K < GEMM_KC ? (size_t)K : GEMM_KC;
                size_t mc = (size_t)M < GEMM_MC ? (size_t)M : GEMM_MC;
                size_t nc = (size_t)N < GEMM_NC ? (size_t)N : GEMM_NC;
                gemm_pack_floats(mc, nc, kc, &na, &nb);
                own = (float*)aligned_alloc(64, sizeof(float) * (na + nb));
                if (own == NULL) {
                    fprintf(stderr, "error: out of memory in cpu_gemm\n");
                    exit(1);
                }
                Ap = own;
                Bp = own + na;
            }
        }
        // chunks in order, each to whichever thread is free (the bits do not depend on which):
        // sizes decreasing (guided), so the last ones, where one thread may wait for the
        // other, are small
        int cb[GEMM_CHUNKS_CAP(nt) + 1];
        int chunks = gemm_chunks_guided(panels, nt, div, cb);
#pragma omp for schedule(dynamic, 1)
        for (int ch = 0; ch < chunks; ch++) {
            int p0 = cb[ch], p1 = cb[ch + 1];
            int m0 = 0, m1 = M, n0 = 0, n1 = N;
            if (split_rows) {
                m0 = p0 * ar.mr;
                m1 = p1 * ar.mr < M ? p1 * ar.mr : M;
            } else {
                n0 = p0 * ar.nr;
                n1 = p1 * ar.nr < N ? p1 * ar.nr : N;
            }
            if (m0 >= m1 || n0 >= n1) continue;
            if (K > 0)
                gemm_serial(isa, ar, M, N, K, A, a_rs, a_cs, B, b_rs, b_cs, C, ldc, flags, m0, m1, n0, n1, Ap, Bp, sa,
                            sb);
            else if (!accumulate)
                for (int i = m0; i < m1; i++) memset(C + (size_t)i * ldc + n0, 0, sizeof(float) * (n1 - n0));
#ifdef CPU_GEMM_X86
            if (flags & CPU_GEMM_STREAM) _mm_sfence(); // the non-temporal stores land before the bias or anyone reads C
#endif
            if (bias != NULL) {
                for (int i = m0; i < m1; i++) {
                    float* c = C + (size_t)i * ldc;
                    for (int j = n0; j < n1; j++) c[j] += bias[j];
                }
            }
        }
        free(own);
    }
    free(shared_own);
}

#endif // LLMC_CPU_GEMM_H
