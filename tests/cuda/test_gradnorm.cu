/*
 * test_gradnorm.cu: llmc/cuda/gradnorm.cuh (sum of squares over a list of flat ranges, fp64)
 * against a CPU fp64 sum, for empty, single-element and block-size-crossing ranges, ranges
 * that start and end off a 16-byte boundary (the scalar head and tail elements), ranges
 * shorter than the head, and one long enough that every thread flushes its fp32 partials
 * into fp64 more than once (GN_CHUNK steps of GN_UNROLL packs over the full grid); within
 * the documented bound (GN_CHUNK + 1) 2^-24 relative, and bit-identical on a rerun.
 */
#include "common.h"
#include "../../llmc/cuda/gradnorm.cuh"

int main(void) {
    // every thread of the full grid runs GN_CHUNK steps and then some
    const size_t big = (size_t)(GN_CHUNK + 3) * GN_UNROLL * 4 * GN_BLOCKS * GN_THREADS + 5;
    const size_t n = big + 8;
    float* dx;
    float* x = ck_rand_f32(&dx, n, 0.01f);
    double* dout = (double*)dev_alloc(sizeof(double) * (1 + GN_BLOCKS));
    const size_t cases[][6] = {
        {0, 1, 0, 0, 0, 0},  {5, 5, 0, 0, 0, 0},     {0, n, 0, 0, 0, 0},      {3, 1000, 1000, 70000, 80001, 200003},
        {1, 2, 5, 7, 9, 13}, {2, 3, 6, 6, 11, 4099}, {1, big + 1, 0, 0, 0, 0}};
    for (size_t c = 0; c < sizeof(cases) / sizeof(cases[0]); c++) {
        RangeList r;
        memset(&r, 0, sizeof(r));
        double ref = 0.0;
        for (int k = 0; k < 3; k++) {
            size_t lo = cases[c][2 * k], hi = cases[c][2 * k + 1];
            if (k > 0 && lo == 0 && hi == 0) break;
            r.lo[r.n] = lo;
            r.hi[r.n] = hi;
            r.n++;
            for (size_t i = lo; i < hi; i++) ref += (double)x[i] * x[i];
        }
        sumsq(dout, dout + 1, dx, &r, 0);
        double got = 0, got2 = 0;
        cudaCheck(cudaMemcpy(&got, dout, sizeof(double), cudaMemcpyDeviceToHost));
        sumsq(dout, dout + 1, dx, &r, 0);
        cudaCheck(cudaMemcpy(&got2, dout, sizeof(double), cudaMemcpyDeviceToHost));
        check(fabs(got - ref) <= (GN_CHUNK + 1) * 0x1p-24 * fabs(ref) + 1e-300,
              "sumsq case %zu (%d ranges): %.15g (want %.15g)", c, r.n, got, ref);
        check(memcmp(&got, &got2, sizeof(double)) == 0, "sumsq case %zu bit-identical on a rerun", c);
    }
    free(x);
    dev_free(dx);
    dev_free(dout);
    return test_summary();
}
