/*
 * gradnorm.cuh: sum of squares of fp32 gradients over a list of flat ranges (the tensors
 * this rank counts for the global norm: doc/spec.md section 3, each unique parameter once),
 * in fp64. The caller sums it over ranks.
 *
 * At memory bandwidth: the pass reads every gradient once (the whole fp32 gradient buffer,
 * the largest a step reads), so each thread issues GN_UNROLL independent 16-byte loads per
 * step (4 floats each) and squares them into GN_UNROLL x 4 fp32 partial sums in registers:
 * one fp32 FMA per element, so the arithmetic keeps up with the loads (fp64 costs more issue
 * slots and runs at a fraction of the fp32 rate on most GPUs). The error stays small: each
 * fp32 sum takes at most GN_CHUNK squares (all positive: relative error below
 * (GN_CHUNK + 1) * 2^-24) before it is added to the thread's fp64 total, which carries the
 * long sums.
 *
 * Deterministic (the same bits on every run): element i of a range goes to a fixed thread,
 * fixed partial and fixed step, set by the range list alone (the grid is a function of the
 * total length); each thread adds in a fixed order, the block sums its threads in fp64 with
 * a fixed butterfly (block_sum_d), and one block sums the block partials in index order. A
 * range's first elements up to a 16-byte boundary and its last ones after the final whole
 * pack (at most 3 each) are added to the fp64 totals of fixed threads (0, 1, 2).
 */
#ifndef LLMC_GRADNORM_CUH
#define LLMC_GRADNORM_CUH

#include "cuda_utils.cuh"

#define GN_MAX_RANGES 32
#define GN_BLOCKS 512 // blocks at most (partial sums); all resident at once on an A100 or H100
#define GN_THREADS 256
#define GN_UNROLL 4 // 16-byte loads in flight per thread and step
#define GN_CHUNK 16 // steps summed in fp32 before the fp64 total takes them

typedef struct {
    int n;
    size_t lo[GN_MAX_RANGES], hi[GN_MAX_RANGES];
} RangeList;

// partial[blockIdx.x] = this block's share of the sum of x[i]^2 over the ranges
__global__ void __launch_bounds__(GN_THREADS) sumsq_partial_kernel(double* partial, const float* x, RangeList r) {
    size_t S = (size_t)gridDim.x * blockDim.x; // threads of the grid
    size_t gid = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    float acc[GN_UNROLL][4];
#pragma unroll
    for (int u = 0; u < GN_UNROLL; u++) {
#pragma unroll
        for (int q = 0; q < 4; q++) acc[u][q] = 0.0f;
    }
    double total = 0.0;
    int steps = 0; // steps summed in acc since its last flush
    for (int k = 0; k < r.n; k++) {
        size_t lo = r.lo[k], hi = r.hi[k];
        if (lo >= hi) continue;
        // [lo, a): up to 3 elements before the first 16-byte boundary; [b, hi): the rest after the last pack
        size_t head = ((16 - ((uintptr_t)(x + lo) & 15)) & 15) / sizeof(float);
        size_t a = lo + head < hi ? lo + head : hi;
        size_t npk = (hi - a) / 4;
        size_t b = a + 4 * npk;
        if (gid < a - lo) total += (double)x[lo + gid] * x[lo + gid];
        if (gid < hi - b) total += (double)x[b + gid] * x[b + gid];
        const float4* p4 = reinterpret_cast<const float4*>(x + a);
        for (size_t p = gid; p < npk; p += GN_UNROLL * S) {
            float4 v[GN_UNROLL];
#pragma unroll
            for (int u = 0; u < GN_UNROLL; u++) { // the loads first: GN_UNROLL requests in flight
                size_t i = p + u * S;
                v[u] = i < npk ? p4[i] : make_float4(0.0f, 0.0f, 0.0f, 0.0f);
            }
#pragma unroll
            for (int u = 0; u < GN_UNROLL; u++) {
                acc[u][0] += v[u].x * v[u].x;
                acc[u][1] += v[u].y * v[u].y;
                acc[u][2] += v[u].z * v[u].z;
                acc[u][3] += v[u].w * v[u].w;
            }
            if (++steps == GN_CHUNK) { // the fp32 partials into the fp64 total, in a fixed order
                steps = 0;
#pragma unroll
                for (int u = 0; u < GN_UNROLL; u++) {
#pragma unroll
                    for (int q = 0; q < 4; q++) {
                        total += (double)acc[u][q];
                        acc[u][q] = 0.0f;
                    }
                }
            }
        }
    }
#pragma unroll
    for (int u = 0; u < GN_UNROLL; u++) {
#pragma unroll
        for (int q = 0; q < 4; q++) total += (double)acc[u][q];
    }
    total = block_sum_d(total);
    if (threadIdx.x == 0) partial[blockIdx.x] = total;
}

// *out = sum of partial[0 .. n) (fixed order); one block
__global__ void sumsq_finish_kernel(double* out, const double* partial, int n) {
    double s = 0.0;
    for (int i = threadIdx.x; i < n; i += blockDim.x) s += partial[i];
    s = block_sum_d(s);
    if (threadIdx.x == 0) *out = s;
}

// blocks for the ranges: enough for one step of GN_UNROLL packs per thread, at most
// GN_BLOCKS (a function of the ranges only, so the partition and the bits are too)
static inline int sumsq_grid(const RangeList* r) {
    size_t n = 0;
    for (int k = 0; k < r->n; k++) n += r->hi[k] > r->lo[k] ? r->hi[k] - r->lo[k] : 0;
    size_t g = CEIL_DIV(n, (size_t)4 * GN_UNROLL * GN_THREADS);
    if (g > GN_BLOCKS) g = GN_BLOCKS;
    return g < 1 ? 1 : (int)g;
}

// *out (device) = sum over the ranges of x[i]^2. partial: GN_BLOCKS doubles of scratch.
static void sumsq(double* out, double* partial, const float* x, const RangeList* r, cudaStream_t s) {
    int grid = sumsq_grid(r);
    LAUNCH(sumsq_partial_kernel, grid, GN_THREADS, 0, s, partial, x, *r);
    LAUNCH(sumsq_finish_kernel, 1, 256, 0, s, out, (const double*)partial, grid);
}

#endif // LLMC_GRADNORM_CUH
