/*
 * gradnorm.cuh: sum of squares of fp32 gradients over a list of flat ranges (the tensors
 * this rank counts for the global norm: SPEC section 3, each unique parameter once), in
 * fp64. A fixed grid of GN_BLOCKS blocks each sums a fixed strided subset, then one block
 * sums the partials in order: the same value on every run. The caller sums it over ranks.
 */
#ifndef LLMC_GRADNORM_CUH
#define LLMC_GRADNORM_CUH

#include "cuda_utils.cuh"

#define GN_MAX_RANGES 32
#define GN_BLOCKS 256

typedef struct { int n; size_t lo[GN_MAX_RANGES], hi[GN_MAX_RANGES]; } RangeList;

__global__ void sumsq_partial_kernel(double* partial, const float* x, RangeList r) {
    double s = 0.0;
    size_t stride = (size_t)gridDim.x * blockDim.x;
    for (int k = 0; k < r.n; k++) {
        for (size_t i = r.lo[k] + (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < r.hi[k]; i += stride) {
            double g = (double)x[i];
            s += g * g;
        }
    }
    s = block_sum_d(s);
    if (threadIdx.x == 0) partial[blockIdx.x] = s;
}

__global__ void sumsq_finish_kernel(double* out, const double* partial, int n) {
    double s = 0.0;
    for (int i = threadIdx.x; i < n; i += blockDim.x) s += partial[i];
    s = block_sum_d(s);
    if (threadIdx.x == 0) *out = s;
}

// *out (device) = sum over the ranges of x[i]^2. partial: GN_BLOCKS doubles of scratch.
static void sumsq(double* out, double* partial, const float* x, const RangeList* r, cudaStream_t s) {
    LAUNCH(sumsq_partial_kernel, GN_BLOCKS, 256, 0, s, partial, x, *r);
    LAUNCH(sumsq_finish_kernel, 1, 256, 0, s, out, (const double*)partial, GN_BLOCKS);
}

#endif // LLMC_GRADNORM_CUH
