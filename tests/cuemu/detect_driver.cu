// tests/cuemu/detect_driver.cu - kernels for the detector self-tests (test_detectors.sh):
// `detect_driver MODE` runs one of them; the broken ones must be stopped by the
// emulation's detectors (impl/detect.h, UBSan alignment), the correct ones must pass.
// Built with the llmc headers as they are, or with a mutated copy of them.
#include <cuda_runtime.h>
#include <cstdio>
#include <cstring>
#include "../../llmc/cuda/cuda_utils.cuh"

// Grid-stride rows: one block reduces several rows (CUEMU_MAX_GRID caps the grid), so
// consecutive block_sum (block_max) calls of one block must not overlap.
__global__ void rows_sum_kernel(float* sums, const float* x, int rows, int cols) {
    for (int r = blockIdx.x; r < rows; r += gridDim.x) {
        float s = 0.0f;
        for (int c = threadIdx.x; c < cols; c += blockDim.x) s += x[r * cols + c];
        s = block_sum(s);
        if (threadIdx.x == 0) sums[r] = s;
    }
}
__global__ void rows_max_kernel(float* maxs, const float* x, int rows, int cols) {
    for (int r = blockIdx.x; r < rows; r += gridDim.x) {
        float m = -INFINITY;
        for (int c = threadIdx.x; c < cols; c += blockDim.x) m = fmaxf(m, x[r * cols + c]);
        m = block_max(m);
        if (threadIdx.x == 0) maxs[r] = m;
    }
}
// Broken: thread t reads what thread t+1 wrote, no barrier.
__global__ void smem_race_kernel(float* out) {
    __shared__ float buf[64];
    buf[threadIdx.x] = (float)threadIdx.x;
    out[threadIdx.x] = buf[(threadIdx.x + 1) % 64];
}
// Broken: lanes of one warp exchange through shared memory without __syncwarp.
__global__ void warp_race_kernel(float* out) {
    __shared__ float buf[32];
    buf[threadIdx.x] = (float)threadIdx.x;
    out[threadIdx.x] = buf[threadIdx.x ^ 1];
}
// Correct: the same with __syncwarp.
__global__ void warp_ok_kernel(float* out) {
    __shared__ float buf[32];
    buf[threadIdx.x] = (float)threadIdx.x;
    __syncwarp();
    out[threadIdx.x] = buf[threadIdx.x ^ 1];
}
// Broken: every block writes out[0] without an atomic.
__global__ void global_race_kernel(float* out) {
    if (threadIdx.x == 0) out[0] = (float)blockIdx.x;
}
// Correct: every block adds to out[0] atomically.
__global__ void global_atomic_kernel(float* out) {
    if (threadIdx.x == 0) atomicAdd(out, 1.0f);
}
// Broken: a float4 load through a pointer 4 bytes off 16-byte alignment.
__global__ void misaligned_kernel(float* out, const float* in) {
    const float4* p = reinterpret_cast<const float4*>(in + 1);
    float4 v = p[threadIdx.x];
    out[threadIdx.x] = v.x + v.y + v.z + v.w;
}

int main(int argc, char** argv) {
    const char* mode = argc > 1 ? argv[1] : "";
    float *d, *d2;
    cudaCheck(cudaMalloc(&d, 4096 * sizeof(float)));
    cudaCheck(cudaMalloc(&d2, 4096 * sizeof(float)));
    cudaCheck(cudaMemset(d, 0, 4096 * sizeof(float)));
    if (!strcmp(mode, "rows")) {
        const int R = 16, C = 300;
        float h[R * C], hs[R], hm[R];
        for (int i = 0; i < R * C; i++) h[i] = (float)((i * 7919) % 101); // integers: exact sums
        float *dx, *ds, *dm;
        cudaCheck(cudaMalloc(&dx, sizeof h));
        cudaCheck(cudaMalloc(&ds, sizeof hs));
        cudaCheck(cudaMalloc(&dm, sizeof hm));
        cudaCheck(cudaMemcpy(dx, h, sizeof h, cudaMemcpyHostToDevice));
        LAUNCH(rows_sum_kernel, GRID_STRIDE_CAP(R), 128, 0, 0, ds, dx, R, C);
        LAUNCH(rows_max_kernel, GRID_STRIDE_CAP(R), 128, 0, 0, dm, dx, R, C);
        cudaCheck(cudaMemcpy(hs, ds, sizeof hs, cudaMemcpyDeviceToHost));
        cudaCheck(cudaMemcpy(hm, dm, sizeof hm, cudaMemcpyDeviceToHost));
        int bad = 0;
        for (int r = 0; r < R; r++) {
            float s = 0.0f, m = -INFINITY;
            for (int c = 0; c < C; c++) {
                s += h[r * C + c];
                m = fmaxf(m, h[r * C + c]);
            }
            bad += s != hs[r] || m != hm[r];
        }
        printf("rows: %d of %d rows wrong\n", bad, R);
        return bad != 0;
    }
    if (!strcmp(mode, "smem_race"))
        LAUNCH(smem_race_kernel, 1, 64, 0, 0, d);
    else if (!strcmp(mode, "warp_race"))
        LAUNCH(warp_race_kernel, 1, 32, 0, 0, d);
    else if (!strcmp(mode, "warp_ok"))
        LAUNCH(warp_ok_kernel, 1, 32, 0, 0, d);
    else if (!strcmp(mode, "global_race"))
        LAUNCH(global_race_kernel, 4, 32, 0, 0, d);
    else if (!strcmp(mode, "global_atomic"))
        LAUNCH(global_atomic_kernel, 4, 32, 0, 0, d);
    else if (!strcmp(mode, "misaligned"))
        LAUNCH(misaligned_kernel, 1, 32, 0, 0, d, d2);
    else {
        fprintf(stderr, "error: unknown mode '%s'\n", mode);
        return 2;
    }
    cudaCheck(cudaDeviceSynchronize());
    printf("%s: ran to the end\n", mode);
    return 0;
}
