/*
 * cpu_math.h: exp for the CPU trainer's elementwise loops (GeLU, softmax, cross-entropy).
 *
 * libm's expf/tanhf are calls gcc cannot vectorize: GeLU's tanhf alone was ~10% of a 125m
 * step. exp_vec is plain C without branches or calls, so loops over it vectorize at
 * whatever width the CPU has, and it rounds the same in every build: the fused steps are
 * explicit fmaf and the Makefile builds with -ffp-contract=off, so every lane of every
 * vector width (and the scalar fallback) computes the same bits.
 *
 * Method (Cody-Waite): x = n ln2 + r with n = round(x / ln2), |r| <= ln2/2;
 * exp(r) by its Taylor polynomial to degree 7 (truncation < 6e-9 relative), times 2^n
 * built from the exponent bits. Inputs are clamped to [-87, 88] so 2^n stays a normal
 * number: exp(-87) = 1.6e-38, exp(88) = 1.7e38 (nothing in the trainer needs more).
 * NaN stays NaN. Error: a few ulp (test_cpu_gemm checks <= 4 ulp against double exp).
 */
#ifndef LLMC_CPU_MATH_H
#define LLMC_CPU_MATH_H

#include <math.h>
#include <stdint.h>
#include <string.h>

static inline float exp_vec(float x) {
    x = x < -87.0f ? -87.0f : x;
    x = x > 88.0f ? 88.0f : x;
    const float round_magic = 12582912.0f;                            // 1.5 * 2^23: x + it rounds x to an integer
    float n = (x * 1.44269504088896341f + round_magic) - round_magic; // round(x / ln2)
    float r = fmaf(n, -0.693359375f, x);                              // ln2 = 0.693359375 - 2.12194440e-4 (Cody-Waite)
    r = fmaf(n, 2.12194440e-4f, r);
    float p = 1.0f / 5040.0f;
    p = fmaf(p, r, 1.0f / 720.0f);
    p = fmaf(p, r, 1.0f / 120.0f);
    p = fmaf(p, r, 1.0f / 24.0f);
    p = fmaf(p, r, 1.0f / 6.0f);
    p = fmaf(p, r, 0.5f);
    p = fmaf(p, r, 1.0f);
    p = fmaf(p, r, 1.0f);
    n = n == n ? n : 0.0f;                              // NaN: p is NaN already; keep the cast defined
    uint32_t bits = (uint32_t)((int32_t)n + 127) << 23; // 2^n, n in [-126, 127]
    float scale;
    memcpy(&scale, &bits, sizeof(scale));
    return p * scale;
}

#endif // LLMC_CPU_MATH_H
