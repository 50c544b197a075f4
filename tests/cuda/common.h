/*
 * tests/cuda/common.h: helpers for the standalone kernel checks (llm.c's kernel lab
 * habit): seeded random inputs rounded to bf16 (so the CPU reference sees exactly the
 * values the kernel reads), device upload/download, tolerance comparison, the fp64
 * attention reference the attention checks share, and the "N passed, M failed" tally
 * (tests/common.h). Each check_*.cu includes this and one kernel header of llmc/.
 * Build: make cuda-check-build (nvcc) or make cuda-check-emu (CPU emulation, cuemu).
 */
#ifndef DEV_CUDA_CHECK_COMMON_H
#define DEV_CUDA_CHECK_COMMON_H

#include <math.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "../../llmc/host/utils.h"
#include "../../llmc/cuda/cuda_common.cuh"
#include "../../llmc/cuda/cuda_utils.cuh"
#include "../common.h"


// xorshift-based uniform in [-1, 1)
static uint64_t ck_state = 0x9E3779B97F4A7C15ULL;
static float ck_rand(void) {
    ck_state ^= ck_state << 13;
    ck_state ^= ck_state >> 7;
    ck_state ^= ck_state << 17;
    return (float)((ck_state >> 40) * (1.0 / 8388608.0)) - 1.0f;
}

// n random values scaled by `scale`, rounded to bf16: host float copy and device bf16
static float* ck_rand_bf16(bf16** dev, size_t n, float scale) {
    float* h = (float*)malloc_check(sizeof(float) * (n + 1));
    uint16_t* hb = (uint16_t*)malloc_check(sizeof(uint16_t) * (n + 1));
    for (size_t i = 0; i < n; i++) {
        hb[i] = host_f2bf(ck_rand() * scale);
        h[i] = host_bf2f(hb[i]);
    }
    *dev = (bf16*)dev_alloc(sizeof(bf16) * (n + 1));
    cudaCheck(cudaMemcpy(*dev, hb, sizeof(uint16_t) * n, cudaMemcpyHostToDevice));
    free(hb);
    return h;
}

static float* ck_rand_f32(float** dev, size_t n, float scale) {
    float* h = (float*)malloc_check(sizeof(float) * (n + 1));
    for (size_t i = 0; i < n; i++) h[i] = ck_rand() * scale;
    *dev = (float*)dev_alloc(sizeof(float) * (n + 1));
    cudaCheck(cudaMemcpy(*dev, h, sizeof(float) * n, cudaMemcpyHostToDevice));
    return h;
}

static float* ck_down_bf16(const bf16* dev, size_t n) {
    uint16_t* hb = (uint16_t*)malloc_check(sizeof(uint16_t) * (n + 1));
    float* h = (float*)malloc_check(sizeof(float) * (n + 1));
    cudaCheck(cudaMemcpy(hb, dev, sizeof(uint16_t) * n, cudaMemcpyDeviceToHost));
    for (size_t i = 0; i < n; i++) h[i] = host_bf2f(hb[i]);
    free(hb);
    return h;
}

static float* ck_down_f32(const float* dev, size_t n) {
    float* h = (float*)malloc_check(sizeof(float) * (n + 1));
    cudaCheck(cudaMemcpy(h, dev, sizeof(float) * n, cudaMemcpyDeviceToHost));
    return h;
}

static void* ck_up(const void* h, size_t bytes) {
    void* d = dev_alloc(bytes);
    cudaCheck(cudaMemcpy(d, h, bytes, cudaMemcpyHostToDevice));
    return d;
}

// max over i of |got - want| / (atol + rtol * |want|); <= 1 passes
static double ck_err(const float* got, const double* want, size_t n, double atol, double rtol) {
    double worst = 0.0;
    for (size_t i = 0; i < n; i++) {
        double d = fabs((double)got[i] - want[i]);
        double e = d == 0.0 ? 0.0 : d / (atol + rtol * fabs(want[i]));
        if (!(e <= worst)) worst = e; // NaN propagates
    }
    return worst;
}

// ck_err of n bf16 (or fp32) values on the device against want
static double ck_err_bf16(const bf16* dev, const double* want, size_t n, double atol, double rtol) {
    float* h = ck_down_bf16(dev, n);
    double e = ck_err(h, want, n, atol, rtol);
    free(h);
    return e;
}

static double ck_err_f32(const float* dev, const double* want, size_t n, double atol, double rtol) {
    float* h = ck_down_f32(dev, n);
    double e = ck_err(h, want, n, atol, rtol);
    free(h);
    return e;
}

// A device copy of `bytes` bytes of dev at an address that is NOT 16-byte aligned (base +
// off, off in 1..15; 2 for bf16, 4 for float keeps the element alignment): kernels with
// 16-byte packed access must take their scalar path on it. *base: what to dev_free.
static void* ck_misaligned(void** base, const void* dev, size_t bytes, size_t off) {
    *base = dev_alloc(bytes + 16);
    char* p = (char*)*base + off;
    cudaCheck(cudaMemcpy(p, dev, bytes, cudaMemcpyDeviceToDevice));
    return p;
}

// bitwise equality of two device buffers
static int ck_same_bits(const void* a, const void* b, size_t bytes) {
    char* ha = (char*)malloc_check(bytes + 1);
    char* hb = (char*)malloc_check(bytes + 1);
    cudaCheck(cudaMemcpy(ha, a, bytes, cudaMemcpyDeviceToHost));
    cudaCheck(cudaMemcpy(hb, b, bytes, cudaMemcpyDeviceToHost));
    int same = memcmp(ha, hb, bytes) == 0;
    free(ha);
    free(hb);
    return same;
}

// max |x| of a reference (sets the absolute tolerance of a comparison)
static double ck_maxabs(const double* x, size_t n) {
    double m = 0.0;
    for (size_t i = 0; i < n; i++)
        if (fabs(x[i]) > m) m = fabs(x[i]);
    return m;
}

// bf16 round trip of a double (what a kernel storing bf16 can at best produce)
static double ck_bf(double x) { return (double)host_bf2f(host_f2bf((float)x)); }

// Causal attention of one head in fp64, the reference of test_attention and cudnn_attention:
// q, k, v of row t at qkv + t * 3 Cl + {0, Cl, 2 Cl} (qkv and dout already at the head's
// column), dout row t at dout + t * Cl. out, dq, dk, dv (T, hs) each and lse (T) are written.
static void ck_attention_head(const float* qkv, const float* dout, int T, int Cl, int hs, double* out, double* lse,
                              double* dq, double* dk, double* dv) {
    int C3 = 3 * Cl;
    double scale = 1.0 / sqrt((double)hs);
    double* p = (double*)malloc_check(8 * (size_t)T);
    double* dp = (double*)malloc_check(8 * (size_t)T);
    memset(out, 0, 8 * (size_t)T * hs);
    memset(dq, 0, 8 * (size_t)T * hs);
    memset(dk, 0, 8 * (size_t)T * hs);
    memset(dv, 0, 8 * (size_t)T * hs);
    for (int t = 0; t < T; t++) {
        const float* q = qkv + (size_t)t * C3;
        double m = -1e300;
        for (int t2 = 0; t2 <= t; t2++) {
            const float* k = qkv + (size_t)t2 * C3 + Cl;
            double s = 0;
            for (int i = 0; i < hs; i++) s += (double)q[i] * k[i];
            p[t2] = s * scale;
            if (p[t2] > m) m = p[t2];
        }
        double sum = 0;
        for (int t2 = 0; t2 <= t; t2++) {
            p[t2] = exp(p[t2] - m);
            sum += p[t2];
        }
        for (int t2 = 0; t2 <= t; t2++) p[t2] /= sum;
        lse[t] = m + log(sum);
        const float* go = dout + (size_t)t * Cl;
        double dot = 0;
        for (int t2 = 0; t2 <= t; t2++) {
            const float* v = qkv + (size_t)t2 * C3 + 2 * Cl;
            double s = 0;
            for (int i = 0; i < hs; i++) {
                out[(size_t)t * hs + i] += p[t2] * v[i];
                s += (double)go[i] * v[i];
            }
            dp[t2] = s;
            dot += p[t2] * s;
        }
        for (int t2 = 0; t2 <= t; t2++) {
            const float* k = qkv + (size_t)t2 * C3 + Cl;
            double ds = p[t2] * (dp[t2] - dot) * scale;
            for (int i = 0; i < hs; i++) {
                dq[(size_t)t * hs + i] += ds * k[i];
                dk[(size_t)t2 * hs + i] += ds * q[i];
                dv[(size_t)t2 * hs + i] += p[t2] * go[i];
            }
        }
    }
    free(p);
    free(dp);
}

#endif // DEV_CUDA_CHECK_COMMON_H
