/*
 * gelu.cuh: GeLU, tanh approximation (doc/spec.md section 1), on bf16 tensors with fp32 math:
 * forward out = 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))) and its backward
 * dinp = dout * gelu'(x). Elementwise, so trivially deterministic. dinp may alias dout
 * (each 8-element pack is read, then written, by one thread). 16-byte packed access where
 * aligned (x128, cuda_utils.cuh), else the scalar instantiation.
 */
#ifndef LLMC_GELU_CUH
#define LLMC_GELU_CUH

#include "cuda_utils.cuh"

#define GELU_K0 0.7978845608028654f // sqrt(2/pi)
#define GELU_K1 0.044715f

__device__ __forceinline__ float gelu_f(float x) {
    return 0.5f * x * (1.0f + tanhf(GELU_K0 * (x + GELU_K1 * x * x * x)));
}
__device__ __forceinline__ float gelu_grad_f(float x) {
    float u = GELU_K0 * (x + GELU_K1 * x * x * x);
    float th = tanhf(u), sech2 = 1.0f - th * th;
    float du = GELU_K0 * (1.0f + 3.0f * GELU_K1 * x * x);
    return 0.5f * (1.0f + th) + 0.5f * x * sech2 * du;
}

// 8 consecutive elements per thread and step (VEC: 16-byte loads and stores; the scalar
// instantiation serves misaligned pointers and n % 8 != 0, with the same arithmetic)
template <bool VEC>
__global__ void gelu_forward_kernel(bf16* out, const bf16* inp, size_t n) {
    for (size_t i = ((size_t)blockIdx.x * blockDim.x + threadIdx.x) * 8; i < n;
         i += (size_t)gridDim.x * blockDim.x * 8) {
        float x[8];
        load_bf16x8<VEC>(x, inp, i, n);
#pragma unroll
        for (int j = 0; j < 8; j++) x[j] = gelu_f(x[j]);
        store_bf16x8<VEC>(out, i, n, x);
    }
}

template <bool VEC>
__global__ void gelu_backward_kernel(bf16* dinp, const bf16* inp, const bf16* dout, size_t n) {
    for (size_t i = ((size_t)blockIdx.x * blockDim.x + threadIdx.x) * 8; i < n;
         i += (size_t)gridDim.x * blockDim.x * 8) {
        float x[8], d[8];
        load_bf16x8<VEC>(x, inp, i, n);
        load_bf16x8<VEC>(d, dout, i, n);
#pragma unroll
        for (int j = 0; j < 8; j++) d[j] = d[j] * gelu_grad_f(x[j]);
        store_bf16x8<VEC>(dinp, i, n, d);
    }
}

// out (n) = gelu(inp (n))
static void gelu_forward(bf16* out, const bf16* inp, size_t n, cudaStream_t s) {
    if (n == 0) return;
    int g = grid_for(CEIL_DIV(n, 8), 256);
    LAUNCH_VEC(gelu_forward_kernel, vec16_ok(n, 8, out, inp), g, 256, 0, s, out, inp, n);
}
// dinp (n) = dout (n) * gelu'(inp (n))
static void gelu_backward(bf16* dinp, const bf16* inp, const bf16* dout, size_t n, cudaStream_t s) {
    if (n == 0) return;
    int g = grid_for(CEIL_DIV(n, 8), 256);
    LAUNCH_VEC(gelu_backward_kernel, vec16_ok(n, 8, dinp, inp, dout), g, 256, 0, s, dinp, inp, dout, n);
}

#endif // LLMC_GELU_CUH
