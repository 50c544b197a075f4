/*
 * test_common.h: the few lines every test program shares: check() prints one line per
 * check ("ok" or "FAIL" and a description) and counts; test_summary() prints the closing
 * "N passed, M failed" line and returns the exit status (non-zero on any failure).
 * Plain C, also valid C++ (the CUDA tests include it).
 */
#ifndef DEV_TEST_COMMON_H
#define DEV_TEST_COMMON_H

#include <math.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>

static int n_pass = 0, n_fail = 0;

#if defined(__GNUC__)
static void check(int ok, const char* fmt, ...) __attribute__((format(printf, 2, 3)));
#endif
static void check(int ok, const char* fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    printf("%s ", ok ? "ok  " : "FAIL");
    vprintf(fmt, ap);
    printf("\n");
    va_end(ap);
    fflush(stdout);
    if (ok)
        n_pass++;
    else
        n_fail++;
}

static int test_summary(void) {
    printf("%d passed, %d failed\n", n_pass, n_fail);
    return n_fail == 0 ? 0 : 1;
}

// |got - want| / |want| (absolute when want is 0)
static inline double rel_err(double got, double want) {
    double d = fabs(got - want), s = fabs(want);
    return s > 0 ? d / s : d;
}

// ||got - want|| / ||want|| over n floats
static inline double rel_l2(const float* got, const float* want, size_t n) {
    double num = 0, den = 0;
    for (size_t i = 0; i < n; i++) {
        double d = (double)got[i] - want[i];
        num += d * d;
        den += (double)want[i] * want[i];
    }
    return den > 0 ? sqrt(num / den) : sqrt(num);
}

#endif // DEV_TEST_COMMON_H
