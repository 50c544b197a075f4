// tests/cuemu/test_cuemu.cu - tests of the CPU emulation of CUDA (cuemu).
// The same source is valid CUDA: `make cuemu-compile` builds it with nvcc for
// sm_80 and sm_90 (compile only), `make cuemu-test` builds it with g++ and the
// emulation and runs it. On a real GPU it runs too: the cuBLASLt and bf16 checks
// then test the reference semantics against the hardware, and the checks that
// only the emulation can promise (broken kernels must fail, misuse is caught)
// are skipped.
// Prints one line per check and ends with "N passed, M failed".
#include <cuda_runtime.h>
#include <cuda_bf16.h>
#include <cublasLt.h>
#include <cmath>
#include <cstdarg>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>
#include "../../llmc/cuda/cuda_common.cuh"
#ifdef CUEMU
#include <csignal>
#include <string>
#include <sys/wait.h>
#include <unistd.h>
#endif

static int g_pass = 0, g_fail = 0;
static bool check(bool ok, const char* name, const char* fmt = nullptr, ...) {
    if (ok) {
        g_pass++;
        printf("ok   - %s\n", name);
    } else {
        g_fail++;
        printf("FAIL - %s", name);
        if (fmt) {
            char buf[512];
            va_list ap;
            va_start(ap, fmt);
            vsnprintf(buf, sizeof buf, fmt, ap);
            va_end(ap);
            printf(": %s", buf);
        }
        printf("\n");
    }
    fflush(stdout);
    return ok;
}
[[maybe_unused]] static void skip(const char* name, const char* why) { printf("skip - %s (%s)\n", name, why); }

#define FULL 0xffffffffu

static uint32_t g_rng = 12345u;
static uint32_t rnd() {
    g_rng = g_rng * 1664525u + 1013904223u;
    return g_rng >> 8;
}
static float rnd_unit() { return (float)(rnd() % 2000001) / 1000000.0f - 1.0f; } // [-1, 1]

template <class T>
static T* dev_upload(const std::vector<T>& h) {
    T* d = nullptr;
    cudaCheck(cudaMalloc(&d, h.size() * sizeof(T) + 16));
    cudaCheck(cudaMemcpy(d, h.data(), h.size() * sizeof(T), cudaMemcpyHostToDevice));
    return d;
}
template <class T>
static std::vector<T> dev_download(const T* d, size_t n) {
    std::vector<T> h(n);
    cudaCheck(cudaMemcpy(h.data(), d, n * sizeof(T), cudaMemcpyDeviceToHost));
    return h;
}

// ============================================================ kernels
__global__ void index_kernel(int* out, int* count) {
    int bid = blockIdx.x + gridDim.x * (blockIdx.y + gridDim.y * blockIdx.z);
    int tid = threadIdx.x + blockDim.x * (threadIdx.y + blockDim.y * threadIdx.z);
    int g = bid * (blockDim.x * blockDim.y * blockDim.z) + tid;
    out[g] = (int)(blockIdx.x * 1000000 + blockIdx.y * 100000 + blockIdx.z * 10000 + threadIdx.x * 100 +
                   threadIdx.y * 10 + threadIdx.z);
    atomicAdd(&count[g], 1);
}

struct ScaleParams {
    float scale;
    int n;
};
template <typename T, int N>
__global__ void scale_kernel(T* x, ScaleParams p) {
    int i = blockIdx.x * N + threadIdx.x;
    if (i < p.n) x[i] = x[i] * (T)p.scale;
}

// Block sum over 256 threads: correct, and two deliberately broken variants.
__global__ void block_sum_ok(const float* in, float* out) {
    __shared__ float sh[256];
    int t = threadIdx.x;
    sh[t] = in[blockIdx.x * blockDim.x + t];
    __syncthreads();
    for (int s = blockDim.x / 2; s > 0; s >>= 1) {
        if (t < s) sh[t] += sh[t + s];
        __syncthreads();
    }
    if (t == 0) out[blockIdx.x] = sh[0];
}
__global__ void block_sum_no_sync_after_store(const float* in, float* out) {
    __shared__ float sh[256];
    int t = threadIdx.x;
    sh[t] = in[blockIdx.x * blockDim.x + t];
    // BUG: __syncthreads() missing here
    for (int s = blockDim.x / 2; s > 0; s >>= 1) {
        if (t < s) sh[t] += sh[t + s];
        __syncthreads();
    }
    if (t == 0) out[blockIdx.x] = sh[0];
}
__global__ void block_sum_no_sync_in_loop(const float* in, float* out) {
    __shared__ float sh[256];
    int t = threadIdx.x;
    sh[t] = in[blockIdx.x * blockDim.x + t];
    __syncthreads();
    for (int s = blockDim.x / 2; s > 0; s >>= 1) {
        if (t < s) sh[t] += sh[t + s];
        // BUG: __syncthreads() missing here
    }
    if (t == 0) out[blockIdx.x] = sh[0];
}

__global__ void sync_variants_kernel(int* out) {
    int t = threadIdx.x;
    int c = __syncthreads_count(t % 7 == 0);
    int a1 = __syncthreads_and(t < 100);
    int a0 = __syncthreads_and(t < 99);
    int o1 = __syncthreads_or(t == 57);
    int o0 = __syncthreads_or(t == 1000);
    if (t == 0) {
        out[0] = c;
        out[1] = a1;
        out[2] = a0;
        out[3] = o1;
        out[4] = o0;
    }
}

// Warp sums: correct and off-by-one variants.
__global__ void warp_xor_ok(const float* in, float* out) {
    int g = blockIdx.x * blockDim.x + threadIdx.x;
    float v = in[g];
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(FULL, v, o);
    out[g] = v;
}
__global__ void warp_xor_stops_early(const float* in, float* out) {
    int g = blockIdx.x * blockDim.x + threadIdx.x;
    float v = in[g];
    for (int o = 16; o > 1; o >>= 1) v += __shfl_xor_sync(FULL, v, o); // BUG: offset 1 never done
    out[g] = v;
}
__global__ void warp_down_ok(const float* in, float* out) {
    int g = blockIdx.x * blockDim.x + threadIdx.x;
    float v = in[g];
    for (int o = 16; o > 0; o >>= 1) v += __shfl_down_sync(FULL, v, o);
    if ((threadIdx.x & 31) == 0) out[g / 32] = v;
}
__global__ void warp_down_off_by_one(const float* in, float* out) {
    int g = blockIdx.x * blockDim.x + threadIdx.x;
    float v = in[g];
    for (int o = 15; o > 0; o >>= 1) v += __shfl_down_sync(FULL, v, o); // BUG: offsets 15,7,3,1
    if ((threadIdx.x & 31) == 0) out[g / 32] = v;
}
// Warp-synchronous reduction through shared memory, 4 warps per block.
__global__ void warp_smem_ok(const float* in, float* out) {
    __shared__ float sh[128];
    int t = threadIdx.x, lane = t & 31;
    float* s = sh + (t & ~31);
    s[lane] = in[blockIdx.x * 128 + t];
    __syncwarp();
    for (int o = 16; o > 0; o >>= 1) {
        float x = lane < o ? s[lane + o] : 0.0f;
        __syncwarp();
        if (lane < o) s[lane] += x;
        __syncwarp();
    }
    if (lane == 0) out[blockIdx.x * 4 + t / 32] = s[0];
}
__global__ void warp_smem_no_syncwarp(const float* in, float* out) {
    __shared__ float sh[128];
    int t = threadIdx.x, lane = t & 31;
    volatile float* s = sh + (t & ~31);
    s[lane] = in[blockIdx.x * 128 + t];
    // BUG: pre-Volta "warp-synchronous" code: no __syncwarp() between the steps
    for (int o = 16; o > 0; o >>= 1)
        if (lane < o) s[lane] += s[lane + o];
    if (lane == 0) out[blockIdx.x * 4 + t / 32] = s[0];
}

__global__ void shfl_semantics_kernel(int* out) {
    int l = threadIdx.x;
    int v = 100 + l;
    out[0 * 32 + l] = __shfl_sync(FULL, v, 3, 8);
    out[1 * 32 + l] = __shfl_up_sync(FULL, v, 1, 8);
    out[2 * 32 + l] = __shfl_down_sync(FULL, v, 3);
    out[3 * 32 + l] = __shfl_xor_sync(FULL, v, 16, 16);
    out[4 * 32 + l] = __shfl_sync(FULL, v, l + 35);
    out[5 * 32 + l] = __shfl_down_sync(FULL, v, 5, 16);
    out[6 * 32 + l] = __shfl_up_sync(FULL, v, 33);
}
__global__ void vote_kernel(unsigned* out) { // blockDim 40: warp 1 has 8 lanes
    int t = threadIdx.x, lane = t & 31;
    out[t * 3 + 0] = __ballot_sync(FULL, lane % 3 == 0);
    out[t * 3 + 1] = (unsigned)__any_sync(FULL, t == 39);
    out[t * 3 + 2] = (unsigned)__all_sync(FULL, t < 38);
}
__global__ void halfwarp_kernel(int* out) {
    int l = threadIdx.x;
    int v = l * 10, r;
    if (l < 16)
        r = __shfl_xor_sync(0x0000ffffu, v, 1);
    else
        r = __shfl_down_sync(0xffff0000u, v, 1);
    out[l] = r;
}
__global__ void partial_warp_shfl_kernel(float* out) { // blockDim 40
    float v = (float)threadIdx.x;
    out[threadIdx.x] = __shfl_down_sync(FULL, v, 8);
}
__global__ void redux_kernel(unsigned* out) {
    unsigned l = threadIdx.x;
    out[l] = __reduce_add_sync(FULL, l);
    out[32 + l] = __reduce_max_sync(FULL, (l * 7u) % 32u);
    out[64 + l] = __match_any_sync(FULL, (int)(l / 4));
}

__global__ void reverse_kernel(const float* in, float* out, int n) {
    DYNAMIC_SMEM(float, buf);
    const float* src = in + (size_t)blockIdx.x * n;
    float* dst = out + (size_t)blockIdx.x * n;
    for (int i = threadIdx.x; i < n; i += blockDim.x) buf[i] = src[i];
    __syncthreads();
    for (int i = threadIdx.x; i < n; i += blockDim.x) dst[i] = buf[n - 1 - i];
}

__global__ void atomics_kernel(float* f, int* i, unsigned long long* u, int* mx, unsigned* mn, int* cas, unsigned* inc,
                               __nv_bfloat16* bsum) {
    int g = blockIdx.x * blockDim.x + threadIdx.x;
    atomicAdd(f, (float)(g % 5));
    atomicAdd(i, g);
    atomicAdd(u, (unsigned long long)g << 33);
    atomicMax(mx, (g * 37) % 1009);
    atomicMin(mn, 5000u + (unsigned)((g * 53) % 997));
    int old = *cas, assumed;
    do {
        assumed = old;
        old = atomicCAS(cas, assumed, assumed + 2);
    } while (old != assumed);
    atomicInc(inc, 9u);
    atomicAdd(bsum, __float2bfloat16(1.0f));
}

__global__ void bf16_convert_kernel(const unsigned* fbits, unsigned short* rn, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) rn[i] = __bfloat16_as_ushort(__float2bfloat16_rn(__uint_as_float(fbits[i])));
}
__global__ void bf16_arith_kernel(unsigned short* out) {
    __nv_bfloat16 one = __ushort_as_bfloat16(0x3F80), one1 = __ushort_as_bfloat16(0x3F81),
                  eps = __ushort_as_bfloat16(0x3B80);
    out[0] = __bfloat16_as_ushort(__hadd(one, eps));
    out[1] = __bfloat16_as_ushort(__hadd(one1, eps));
    out[2] = __bfloat16_as_ushort(one1 + eps);
    out[3] = __bfloat16_as_ushort(__hmul(one1, one1));
    __nv_bfloat162 p = __floats2bfloat162_rn(1.0f, 2.0f);
    out[4] = __bfloat16_as_ushort(p.x);
    out[5] = __bfloat16_as_ushort(p.y);
    out[6] = __bfloat16_as_ushort(__float2bfloat16(__bfloat162float(one1) * 3.0f));
}

__global__ void touch_kernel(float* p) { p[threadIdx.x] = 1.0f; }

// Undefined behaviour / hangs on a GPU, which the emulation must stop loudly.
__global__ void deadlock_kernel(float* out) {
    float v = (float)threadIdx.x;
    if (threadIdx.x < 16) v = __shfl_xor_sync(FULL, v, 1); // lanes 16..31 never come: they wait below
    __syncthreads();
    out[threadIdx.x] = v;
}
__global__ void exited_lanes_kernel(float* out) {
    if (threadIdx.x >= 16) return; // exited lanes do not hold up a full-mask shuffle (PTX semantics)
    out[threadIdx.x] = __shfl_xor_sync(FULL, (float)threadIdx.x, 1);
}
__global__ void mask_without_self_kernel(float* out) {
    out[threadIdx.x] = __shfl_sync(0x1u, (float)threadIdx.x, 0); // lanes 1..31 are not in their own mask
}
__global__ void divergent_intrinsics_kernel(float* out) {
    float v = (float)threadIdx.x;
    if (threadIdx.x & 1)
        v = __shfl_xor_sync(FULL, v, 1);
    else
        v = __shfl_down_sync(FULL, v, 1);
    out[threadIdx.x] = v;
}

// ============================================================ tests
static void test_launch() {
    const dim3 grid(3, 2, 2), block(4, 3, 2);
    const int total = 3 * 2 * 2 * 4 * 3 * 2;
    int *out, *count;
    cudaCheck(cudaMalloc(&out, total * sizeof(int)));
    cudaCheck(cudaMalloc(&count, total * sizeof(int)));
    cudaCheck(cudaMemset(count, 0, total * sizeof(int)));
    LAUNCH(index_kernel, grid, block, 0, 0, out, count);
    std::vector<int> h = dev_download(out, total), c = dev_download(count, total);
    int bad = 0;
    for (unsigned bz = 0; bz < 2; bz++)
        for (unsigned by = 0; by < 2; by++)
            for (unsigned bx = 0; bx < 3; bx++)
                for (unsigned tz = 0; tz < 2; tz++)
                    for (unsigned ty = 0; ty < 3; ty++)
                        for (unsigned tx = 0; tx < 4; tx++) {
                            int g = (int)((bx + 3 * (by + 2 * bz)) * 24 + tx + 4 * (ty + 3 * tz));
                            int want = (int)(bx * 1000000 + by * 100000 + bz * 10000 + tx * 100 + ty * 10 + tz);
                            if (h[g] != want || c[g] != 1) bad++;
                        }
    check(bad == 0, "launch: 3D grid x 3D block, every (blockIdx, threadIdx) runs exactly once", "%d wrong", bad);

    LAUNCH_UNCHECKED(index_kernel, 1, 1025, 0, 0, out, count);
    cudaError_t e = cudaGetLastError();
    check(e == cudaErrorInvalidConfiguration, "launch: 1025 threads per block -> cudaErrorInvalidConfiguration",
          "got %s", cudaGetErrorName(e));
    check(cudaGetLastError() == cudaSuccess, "cudaGetLastError resets the error");
    LAUNCH_UNCHECKED(index_kernel, dim3(0, 1, 1), 32, 0, 0, out, count);
    e = cudaGetLastError();
    check(e == cudaErrorInvalidConfiguration, "launch: empty grid -> cudaErrorInvalidConfiguration", "got %s",
          cudaGetErrorName(e));

    const int n = 1000;
    std::vector<float> x(n);
    for (int i = 0; i < n; i++) x[i] = (float)i;
    float* dx = dev_upload(x);
    ScaleParams p{2.5f, n};
    LAUNCH((scale_kernel<float, 64>), CEIL_DIV(n, 64), 64, 0, 0, dx, p);
    std::vector<float> y = dev_download(dx, n);
    bad = 0;
    for (int i = 0; i < n; i++) bad += y[i] != 2.5f * (float)i;
    check(bad == 0, "launch: template kernel in parentheses, struct argument by value, partial last block", "%d wrong",
          bad);
    cudaCheck(cudaFree(dx));
    cudaCheck(cudaFree(out));
    cudaCheck(cudaFree(count));
}

static void test_block_reduction() {
    const int B = 64, T = 256;
    std::vector<float> in(B * T);
    for (int i = 0; i < B * T; i++) in[i] = (float)(rnd() % 1000); // integers: every sum is exact
    std::vector<float> want(B, 0.0f);
    for (int b = 0; b < B; b++)
        for (int t = 0; t < T; t++) want[b] += in[b * T + t];
    float* din = dev_upload(in);
    float* dout;
    cudaCheck(cudaMalloc(&dout, B * sizeof(float)));
    auto wrong_blocks = [&](void (*k)(const float*, float*), std::vector<float>* got) {
        cudaCheck(cudaMemset(dout, 0, B * sizeof(float)));
        LAUNCH(k, B, T, 0, 0, din, dout);
        std::vector<float> h = dev_download(dout, B);
        if (got) *got = h;
        int bad = 0;
        for (int b = 0; b < B; b++) bad += h[b] != want[b];
        return bad;
    };
    int bad = wrong_blocks(block_sum_ok, nullptr);
    check(bad == 0, "block reduction with __syncthreads: all 64 block sums exact", "%d blocks wrong", bad);
#ifdef CUEMU
    // These checks show what the scheduling alone exposes, so the race detector (which
    // stops such kernels at once; detect_driver.cu) is off for them.
    cuemu::det().on = false;
    std::vector<float> r1;
    bad = wrong_blocks(block_sum_no_sync_after_store, &r1);
    check(bad > 0, "broken kernel detected: __syncthreads missing after the shared-memory store",
          "all %d block sums came out right", B);
    printf("       (%d of %d block sums wrong)\n", bad, B);
    bad = wrong_blocks(block_sum_no_sync_in_loop, nullptr);
    check(bad > 0, "broken kernel detected: __syncthreads missing inside the tree loop",
          "all %d block sums came out right", B);
    printf("       (%d of %d block sums wrong)\n", bad, B);
    // Determinism and seeds: children forked from the same state run the broken
    // kernel; the same seed must give the same bits, every seed must expose the bug.
    auto child_run = [&](uint64_t seed, int* nbad, uint64_t* hash, int sched = cuemu::SCHED_SHUFFLE) {
        int fd[2];
        if (pipe(fd) != 0) return false;
        pid_t pid = fork();
        if (pid == 0) {
            close(fd[0]);
            cuemu::config().seed = seed;
            cuemu::config().sched = sched;
            std::vector<float> got;
            uint64_t res[2] = {(uint64_t)wrong_blocks(block_sum_no_sync_after_store, &got), 1469598103934665603ull};
            for (float x : got) {
                uint32_t u;
                memcpy(&u, &x, 4);
                res[1] = (res[1] ^ u) * 1099511628211ull;
            }
            ssize_t w = write(fd[1], res, sizeof res);
            _exit(w == (ssize_t)sizeof res ? 0 : 1);
        }
        close(fd[1]);
        uint64_t res[2] = {0, 0};
        ssize_t r = read(fd[0], res, sizeof res);
        close(fd[0]);
        int status = 0;
        waitpid(pid, &status, 0);
        *nbad = (int)res[0];
        *hash = res[1];
        return r == (ssize_t)sizeof res && WIFEXITED(status) && WEXITSTATUS(status) == 0;
    };
    uint64_t seed0 = cuemu::config().seed, h1 = 0, h2 = 0, h3 = 0;
    int n1 = 0, n2 = 0, n3 = 0, detected_seeds = 0;
    bool ok = child_run(seed0, &n1, &h1) && child_run(seed0, &n2, &h2);
    check(ok && h1 == h2 && n1 > 0, "deterministic: the same state and seed give bit-identical wrong sums",
          "hashes %016llx %016llx", (unsigned long long)h1, (unsigned long long)h2);
    for (uint64_t sd = 1; sd <= 8; sd++) detected_seeds += child_run(sd, &n3, &h3) && n3 > 0;
    check(detected_seeds == 8, "the missing __syncthreads is exposed under every one of 8 other seeds", "%d of 8",
          detected_seeds);
    int nf = 0, nr = 0;
    child_run(seed0, &nf, &h3, cuemu::SCHED_FORWARD);
    child_run(seed0, &nr, &h3, cuemu::SCHED_REVERSE);
    printf("       (for comparison, without shuffling: thread order 0..255 gives %d wrong sums, 255..0 gives %d)\n", nf,
           nr);
    cuemu::det().on = true;
#else
    skip("broken kernels (missing __syncthreads) must fail", "only the emulation guarantees it");
#endif
    int* dsync;
    cudaCheck(cudaMalloc(&dsync, 5 * sizeof(int)));
    LAUNCH(sync_variants_kernel, 1, 100, 0, 0, dsync);
    std::vector<int> s = dev_download(dsync, 5);
    check(s[0] == 15 && s[1] == 1 && s[2] == 0 && s[3] == 1 && s[4] == 0, "__syncthreads_count / _and / _or",
          "got %d %d %d %d %d, want 15 1 0 1 0", s[0], s[1], s[2], s[3], s[4]);
    cudaCheck(cudaFree(dsync));
    cudaCheck(cudaFree(din));
    cudaCheck(cudaFree(dout));
}

static void test_warp() {
    const int B = 16, T = 128, W = B * T / 32;
    std::vector<float> in(B * T);
    for (int i = 0; i < B * T; i++) in[i] = (float)(rnd() % 100);
    std::vector<float> want(W, 0.0f);
    for (int w = 0; w < W; w++)
        for (int l = 0; l < 32; l++) want[w] += in[w * 32 + l];
    float* din = dev_upload(in);
    float *dall, *dw;
    cudaCheck(cudaMalloc(&dall, B * T * sizeof(float)));
    cudaCheck(cudaMalloc(&dw, W * sizeof(float)));
    auto run_all = [&](void (*k)(const float*, float*)) {
        LAUNCH(k, B, T, 0, 0, din, dall);
        std::vector<float> h = dev_download(dall, B * T);
        int bad = 0;
        for (int i = 0; i < B * T; i++) bad += h[i] != want[i / 32];
        return bad;
    };
    auto run_warp = [&](void (*k)(const float*, float*)) {
        LAUNCH(k, B, T, 0, 0, din, dw);
        std::vector<float> h = dev_download(dw, W);
        int bad = 0;
        for (int w = 0; w < W; w++) bad += h[w] != want[w];
        return bad;
    };
    int bad = run_all(warp_xor_ok);
    check(bad == 0, "warp xor-butterfly sum (offsets 16..1): every lane holds its warp's total", "%d lanes wrong", bad);
    bad = run_warp(warp_down_ok);
    check(bad == 0, "warp shfl_down sum (offsets 16..1): lane 0 holds its warp's total", "%d warps wrong", bad);
    bad = run_warp(warp_smem_ok);
    check(bad == 0, "warp-synchronous shared-memory sum with __syncwarp between steps", "%d warps wrong", bad);
    bad = run_all(warp_xor_stops_early);
    check(bad > 0, "broken kernel detected: xor butterfly stops one step early (offsets 16..2)", "every lane right");
    bad = run_warp(warp_down_off_by_one);
    check(bad > 0, "broken kernel detected: shfl_down offsets off by one (15,7,3,1)", "every warp right");
#ifdef CUEMU
    cuemu::det().on = false; // the scheduling alone (detect_driver.cu: the race detector stops it)
    bad = run_warp(warp_smem_no_syncwarp);
    cuemu::det().on = true;
    check(bad > 0, "broken kernel detected: warp-synchronous shared-memory sum without __syncwarp", "every warp right");
    printf("       (%d of %d warp sums wrong)\n", bad, W);
#else
    skip("broken kernel without __syncwarp must fail", "only the emulation guarantees it");
#endif
    cudaCheck(cudaFree(din));
    cudaCheck(cudaFree(dall));
    cudaCheck(cudaFree(dw));

    // Exact semantics of the shuffles (PTX shfl.sync), widths and segments.
    int* ds;
    cudaCheck(cudaMalloc(&ds, 7 * 32 * sizeof(int)));
    LAUNCH(shfl_semantics_kernel, 1, 32, 0, 0, ds);
    std::vector<int> s = dev_download(ds, 7 * 32);
    int bads[7] = {0, 0, 0, 0, 0, 0, 0};
    for (int l = 0; l < 32; l++) {
        int v = 100 + l;
        bads[0] += s[0 * 32 + l] != 100 + (l & ~7) + 3;
        bads[1] += s[1 * 32 + l] != ((l % 8 == 0) ? v : v - 1);
        bads[2] += s[2 * 32 + l] != ((l + 3 < 32) ? v + 3 : v);
        bads[3] += s[3 * 32 + l] != ((l < 16) ? v : v - 16);
        bads[4] += s[4 * 32 + l] != 100 + ((l + 3) & 31);
        bads[5] += s[5 * 32 + l] != (((l % 16) + 5 < 16) ? v + 5 : v);
        bads[6] += s[6 * 32 + l] != ((l >= 1) ? v - 1 : v);
    }
    check(bads[0] == 0, "__shfl_sync(srcLane 3, width 8) reads lane 3 of each 8-lane segment", "%d lanes wrong",
          bads[0]);
    check(bads[1] == 0, "__shfl_up_sync(1, width 8): first lane of each segment keeps its value", "%d lanes wrong",
          bads[1]);
    check(bads[2] == 0, "__shfl_down_sync(3): lanes 29..31 keep their value", "%d lanes wrong", bads[2]);
    check(bads[3] == 0, "__shfl_xor_sync(16, width 16): earlier segment readable, later segment gives own value",
          "%d lanes wrong", bads[3]);
    check(bads[4] == 0, "__shfl_sync(srcLane >= 32) wraps modulo the width", "%d lanes wrong", bads[4]);
    check(bads[5] == 0, "__shfl_down_sync(5, width 16) stays inside each 16-lane segment", "%d lanes wrong", bads[5]);
    check(bads[6] == 0, "__shfl_up_sync(33) uses delta mod 32 = 1", "%d lanes wrong", bads[6]);
    cudaCheck(cudaFree(ds));

    unsigned* dv;
    cudaCheck(cudaMalloc(&dv, 40 * 3 * sizeof(unsigned)));
    LAUNCH(vote_kernel, 1, 40, 0, 0, dv);
    std::vector<unsigned> v = dev_download(dv, 40 * 3);
    int bad_ballot = 0, bad_any = 0, bad_all = 0;
    for (int t = 0; t < 40; t++) {
        bool w1 = t >= 32;
        bad_ballot += v[t * 3 + 0] != (w1 ? 0x49u : 0x49249249u);
        bad_any += v[t * 3 + 1] != (w1 ? 1u : 0u);
        bad_all += v[t * 3 + 2] != (w1 ? 0u : 1u);
    }
    check(bad_ballot == 0, "__ballot_sync on a full warp and on a partial warp (blockDim 40)", "%d threads wrong",
          bad_ballot);
    check(bad_any == 0 && bad_all == 0, "__any_sync / __all_sync count only the lanes that exist",
          "%d/%d threads wrong", bad_any, bad_all);
    cudaCheck(cudaFree(dv));

    int* dh;
    cudaCheck(cudaMalloc(&dh, 32 * sizeof(int)));
    LAUNCH(halfwarp_kernel, 1, 32, 0, 0, dh);
    std::vector<int> hw = dev_download(dh, 32);
    bad = 0;
    for (int l = 0; l < 32; l++) bad += hw[l] != (l < 16 ? (l ^ 1) * 10 : (l < 31 ? (l + 1) * 10 : 310));
    check(bad == 0, "disjoint half-warp masks run different shuffles side by side", "%d lanes wrong", bad);
    cudaCheck(cudaFree(dh));

    unsigned* dr;
    cudaCheck(cudaMalloc(&dr, 96 * sizeof(unsigned)));
    LAUNCH(redux_kernel, 1, 32, 0, 0, dr);
    std::vector<unsigned> rr = dev_download(dr, 96);
    bad = 0;
    for (unsigned l = 0; l < 32; l++)
        bad += rr[l] != 496u || rr[32 + l] != 31u || rr[64 + l] != (0xfu << (4 * (l / 4)));
    check(bad == 0, "__reduce_add_sync / __reduce_max_sync / __match_any_sync", "%d lanes wrong", bad);
    cudaCheck(cudaFree(dr));

#ifdef CUEMU
    float* dp;
    cudaCheck(cudaMalloc(&dp, 40 * sizeof(float)));
    LAUNCH(partial_warp_shfl_kernel, 1, 40, 0, 0, dp);
    std::vector<float> pw = dev_download(dp, 40);
    bad = 0;
    for (int t = 0; t < 32; t++) bad += pw[t] != (float)(t + 8 < 32 ? t + 8 : t);
    for (int t = 32; t < 40; t++) bad += !std::isnan(pw[t]);
    check(bad == 0, "shuffle from a lane beyond blockDim gives poison (NaN), not a plausible value", "%d lanes wrong",
          bad);
    LAUNCH(exited_lanes_kernel, 1, 32, 0, 0, dp);
    pw = dev_download(dp, 16);
    bad = 0;
    for (int t = 0; t < 16; t++) bad += pw[t] != (float)(t ^ 1);
    check(bad == 0, "a full-mask shuffle completes once the other lanes have exited (PTX: non-exited lanes)",
          "%d lanes wrong", bad);
    // Fatal misuse: run in a child, expect abort() with the emulation's explanation.
    auto expect_fatal = [&](void (*k)(float*), const char* want) {
        int fd[2];
        if (pipe(fd) != 0) return false;
        fflush(stdout);
        pid_t pid = fork();
        if (pid == 0) {
            close(fd[0]);
            dup2(fd[1], 2);
            LAUNCH(k, 1, 32, 0, 0, dp);
            cudaDeviceSynchronize(); // the kernel runs when the host waits for it
            _exit(0);
        }
        close(fd[1]);
        std::string err;
        char buf[512];
        ssize_t r;
        while ((r = read(fd[0], buf, sizeof buf)) > 0) err.append(buf, (size_t)r);
        close(fd[0]);
        int status = 0;
        waitpid(pid, &status, 0);
        bool ok = WIFSIGNALED(status) && WTERMSIG(status) == SIGABRT && err.find(want) != std::string::npos;
        if (!ok) printf("       child status %d, stderr: %s\n", status, err.c_str());
        return ok;
    };
    check(expect_fatal(deadlock_kernel, "deadlock"),
          "a shuffle waiting for lanes held at __syncthreads is reported as a deadlock");
    check(expect_fatal(mask_without_self_kernel, "does not include the lane itself"),
          "a lane calling a shuffle with a mask that excludes it is fatal");
    check(expect_fatal(divergent_intrinsics_kernel, "different warp intrinsics"),
          "lanes meeting at different shuffle kinds with one mask is fatal");
    cudaCheck(cudaFree(dp));
#endif
}

static void test_dynamic_smem() {
    const int nb = 7, n = 1000;
    std::vector<float> in(nb * n);
    for (int i = 0; i < nb * n; i++) in[i] = (float)i;
    float* din = dev_upload(in);
    float* dout;
    cudaCheck(cudaMalloc(&dout, nb * n * sizeof(float)));
    LAUNCH(reverse_kernel, nb, 128, n * sizeof(float), 0, din, dout, n);
    std::vector<float> h = dev_download(dout, nb * n);
    int bad = 0;
    for (int b = 0; b < nb; b++)
        for (int i = 0; i < n; i++) bad += h[b * n + i] != in[b * n + n - 1 - i];
    check(bad == 0, "dynamic shared memory (DYNAMIC_SMEM) sized by the launch: per-block reversal", "%d wrong", bad);
    cudaCheck(cudaFree(din));
    cudaCheck(cudaFree(dout));

    const int big = 16384; // 64 KiB of floats: above the default 48 KiB
    std::vector<float> in2(2 * big);
    for (int i = 0; i < 2 * big; i++) in2[i] = (float)(i * 3);
    din = dev_upload(in2);
    cudaCheck(cudaMalloc(&dout, 2 * big * sizeof(float)));
    LAUNCH_UNCHECKED(reverse_kernel, 2, 256, big * sizeof(float), 0, din, dout, big);
    cudaError_t e = cudaGetLastError();
    check(e == cudaErrorInvalidValue, "64 KiB of dynamic shared memory without cudaFuncSetAttribute is refused",
          "got %s", cudaGetErrorName(e));
    cudaCheck(
        cudaFuncSetAttribute(reverse_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)(big * sizeof(float))));
    LAUNCH(reverse_kernel, 2, 256, big * sizeof(float), 0, din, dout, big);
    h = dev_download(dout, 2 * big);
    bad = 0;
    for (int b = 0; b < 2; b++)
        for (int i = 0; i < big; i++) bad += h[b * big + i] != in2[b * big + big - 1 - i];
    check(bad == 0, "64 KiB of dynamic shared memory after cudaFuncSetAttribute(MaxDynamicSharedMemorySize)",
          "%d wrong", bad);
    cudaCheck(cudaFree(din));
    cudaCheck(cudaFree(dout));
}

static void test_atomics() {
    float* f;
    int *i, *mx, *cas;
    unsigned long long* u;
    unsigned *mn, *inc;
    __nv_bfloat16* bsum;
    cudaCheck(cudaMalloc(&f, 4));
    cudaCheck(cudaMalloc(&i, 4));
    cudaCheck(cudaMalloc(&mx, 4));
    cudaCheck(cudaMalloc(&cas, 4));
    cudaCheck(cudaMalloc(&u, 8));
    cudaCheck(cudaMalloc(&mn, 4));
    cudaCheck(cudaMalloc(&inc, 4));
    cudaCheck(cudaMalloc(&bsum, 2));
    cudaCheck(cudaMemset(f, 0, 4));
    cudaCheck(cudaMemset(i, 0, 4));
    cudaCheck(cudaMemset(mx, 0, 4));
    cudaCheck(cudaMemset(cas, 0, 4));
    cudaCheck(cudaMemset(u, 0, 8));
    cudaCheck(cudaMemset(mn, 0xff, 4));
    cudaCheck(cudaMemset(inc, 0, 4));
    cudaCheck(cudaMemset(bsum, 0, 2));
    const int N = 256;
    LAUNCH(atomics_kernel, 4, 64, 0, 0, f, i, u, mx, mn, cas, inc, bsum);
    float wf = 0;
    int wi = 0, wmx = 0;
    unsigned long long wu = 0;
    unsigned wmn = 0xffffffffu;
    for (int g = 0; g < N; g++) {
        wf += (float)(g % 5);
        wi += g;
        wu += (unsigned long long)g << 33;
        wmx = std::max(wmx, (g * 37) % 1009);
        wmn = std::min(wmn, 5000u + (unsigned)((g * 53) % 997));
    }
    float hf = dev_download(f, 1)[0];
    int hi = dev_download(i, 1)[0], hmx = dev_download(mx, 1)[0], hcas = dev_download(cas, 1)[0];
    unsigned long long hu = dev_download(u, 1)[0];
    unsigned hmn = dev_download(mn, 1)[0], hinc = dev_download(inc, 1)[0];
    float hb = __bfloat162float(dev_download(bsum, 1)[0]);
    check(hf == wf && hi == wi && hu == wu, "atomicAdd float / int / unsigned long long", "%g/%g %d/%d %llu/%llu", hf,
          wf, hi, wi, hu, wu);
    check(hmx == wmx && hmn == wmn, "atomicMax int / atomicMin unsigned", "%d/%d %u/%u", hmx, wmx, hmn, wmn);
    check(hcas == 2 * N, "atomicCAS retry loop", "%d, want %d", hcas, 2 * N);
    check(hinc == (unsigned)(N % 10), "atomicInc wraps at its limit", "%u, want %u", hinc, (unsigned)(N % 10));
    check(hb == (float)N, "atomicAdd on __nv_bfloat16", "%g, want %d", hb, N);
    cudaCheck(cudaFree(f));
    cudaCheck(cudaFree(i));
    cudaCheck(cudaFree(mx));
    cudaCheck(cudaFree(cas));
    cudaCheck(cudaFree(u));
    cudaCheck(cudaFree(mn));
    cudaCheck(cudaFree(inc));
    cudaCheck(cudaFree(bsum));
}

struct BfCase {
    uint32_t f;
    uint16_t bf;
    const char* what;
};
static const BfCase kBfRN[] = {
    {0x3F800000u, 0x3F80, "1.0"},
    {0x3F808000u, 0x3F80, "tie 1+2^-8 -> even (down)"},
    {0x3F818000u, 0x3F82, "tie -> even (up)"},
    {0x3F808001u, 0x3F81, "just above a tie rounds up"},
    {0x3F807FFFu, 0x3F80, "just below a tie rounds down"},
    {0xBF808000u, 0xBF80, "negative tie -> even"},
    {0xBF818000u, 0xBF82, "negative tie -> even (away)"},
    {0x3EAAAAABu, 0x3EAB, "1/3"},
    {0x7F800000u, 0x7F80, "+inf"},
    {0xFF800000u, 0xFF80, "-inf"},
    {0x7FC00000u, 0x7FFF, "quiet NaN -> canonical NaN"},
    {0xFFC00001u, 0x7FFF, "negative NaN -> canonical NaN"},
    {0x7F800001u, 0x7FFF, "NaN with a low payload stays NaN (truncation would give inf)"},
    {0x7F7FFFFFu, 0x7F80, "FLT_MAX overflows to +inf"},
    {0x7F7F7FFFu, 0x7F7F, "largest float that rounds to the largest bf16"},
    {0x7F7F8000u, 0x7F80, "tie between the largest bf16 (odd) and inf -> inf"},
    {0x00008000u, 0x0000, "denormal tie -> even (zero)"},
    {0x00018000u, 0x0002, "denormal tie -> even (up)"},
    {0x00000001u, 0x0000, "smallest denormal -> 0"},
    {0x80000000u, 0x8000, "-0"},
};

static void test_bf16() {
    const int n = (int)(sizeof kBfRN / sizeof kBfRN[0]);
    std::vector<unsigned> fb(n);
    for (int k = 0; k < n; k++) fb[k] = kBfRN[k].f;
    unsigned* dfb = dev_upload(fb);
    unsigned short* drn;
    cudaCheck(cudaMalloc(&drn, n * sizeof(unsigned short)));
    LAUNCH(bf16_convert_kernel, 1, 32, 0, 0, dfb, drn, n);
    std::vector<unsigned short> dev = dev_download(drn, n);
    for (int k = 0; k < n; k++) {
        float x;
        memcpy(&x, &kBfRN[k].f, 4);
        unsigned short host = __bfloat16_as_ushort(__float2bfloat16(x));
        char name[200];
        snprintf(name, sizeof name, "bf16 RN 0x%08X -> 0x%04X: %s", kBfRN[k].f, kBfRN[k].bf, kBfRN[k].what);
        check(host == kBfRN[k].bf && dev[k] == kBfRN[k].bf, name, "host 0x%04X, kernel 0x%04X", host, dev[k]);
    }
    cudaCheck(cudaFree(dfb));
    cudaCheck(cudaFree(drn));

    float x1, xm1, xr;
    uint32_t b1 = 0x3F80FFFFu, bm1 = 0xBF800001u, br = 0x3F800001u;
    memcpy(&x1, &b1, 4);
    memcpy(&xm1, &bm1, 4);
    memcpy(&xr, &br, 4);
    check(__bfloat16_as_ushort(__float2bfloat16_rz(x1)) == 0x3F80, "bf16 RZ truncates 0x3F80FFFF -> 0x3F80");
    check(__bfloat16_as_ushort(__float2bfloat16_ru(xr)) == 0x3F81 &&
              __bfloat16_as_ushort(__float2bfloat16_ru(xm1)) == 0xBF80,
          "bf16 RU rounds toward +inf");
    check(__bfloat16_as_ushort(__float2bfloat16_rd(xr)) == 0x3F80 &&
              __bfloat16_as_ushort(__float2bfloat16_rd(xm1)) == 0xBF81,
          "bf16 RD rounds toward -inf");
    float back = __bfloat162float(__ushort_as_bfloat16(0x3F81));
    uint32_t bb;
    memcpy(&bb, &back, 4);
    check(bb == 0x3F810000u, "bf16 -> float is exact (0x3F81 -> 0x3F810000)");

    unsigned short* da;
    cudaCheck(cudaMalloc(&da, 7 * sizeof(unsigned short)));
    LAUNCH(bf16_arith_kernel, 1, 1, 0, 0, da);
    std::vector<unsigned short> a = dev_download(da, 7);
    check(a[0] == 0x3F80 && a[1] == 0x3F82 && a[2] == 0x3F82,
          "bf16 add: exact sum rounded once, ties to even (__hadd, operator+)", "0x%04X 0x%04X 0x%04X", a[0], a[1],
          a[2]);
    check(a[3] == 0x3F82, "bf16 mul: 1.0078125^2 -> 0x3F82", "0x%04X", a[3]);
    check(a[4] == 0x3F80 && a[5] == 0x4000, "__floats2bfloat162_rn(a, b): .x = a (low half), .y = b", "0x%04X 0x%04X",
          a[4], a[5]);
    check(a[6] == 0x4042, "float math on converted bf16 then __float2bfloat16 (1.0078125*3 -> 3.03125)", "0x%04X",
          a[6]);
    cudaCheck(cudaFree(da));
}

static void test_runtime() {
    const int n = 1000;
    std::vector<float> h(n), h2(n, -1.0f);
    for (int k = 0; k < n; k++) h[k] = (float)k * 0.5f;
    float *d1, *d2, *pinned;
    cudaCheck(cudaMalloc(&d1, n * sizeof(float)));
    cudaCheck(cudaMalloc(&d2, n * sizeof(float)));
    cudaCheck(cudaMallocHost(&pinned, n * sizeof(float)));
    cudaStream_t st;
    cudaCheck(cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking));
    cudaCheck(cudaMemcpy(d1, h.data(), n * sizeof(float), cudaMemcpyHostToDevice));
    cudaCheck(cudaMemcpyAsync(d2, d1, n * sizeof(float), cudaMemcpyDeviceToDevice, st));
    cudaCheck(cudaMemcpyAsync(pinned, d2, n * sizeof(float), cudaMemcpyDeviceToHost, st));
    cudaCheck(cudaStreamSynchronize(st));
    cudaCheck(cudaMemcpy(h2.data(), pinned, n * sizeof(float), cudaMemcpyDefault));
    check(h2 == h, "cudaMemcpy H2D, async D2D and D2H on a stream, Default");
    cudaCheck(cudaMemsetAsync(d2, 0, n * sizeof(float), st));
    cudaCheck(cudaStreamSynchronize(st)); // st is non-blocking: without this the two memsets race
    cudaCheck(cudaMemset(d2, 0, (n / 2) * sizeof(float)));
    std::vector<float> z = dev_download(d2, n);
    int bad = 0;
    for (int k = 0; k < n; k++) bad += z[k] != 0.0f;
    check(bad == 0, "cudaMemset / cudaMemsetAsync", "%d nonzero", bad);

    cudaEvent_t e0, e1;
    cudaCheck(cudaEventCreate(&e0));
    cudaCheck(cudaEventCreate(&e1));
    cudaCheck(cudaEventRecord(e0, st));
    LAUNCH(touch_kernel, 1, 32, 0, st, d1);
    cudaCheck(cudaEventRecord(e1, st));
    cudaCheck(cudaEventSynchronize(e1));
    float ms = -1.0f;
    cudaCheck(cudaEventElapsedTime(&ms, e0, e1));
    check(ms >= 0.0f, "events: cudaEventElapsedTime >= 0", "%g ms", ms);
    cudaCheck(cudaEventDestroy(e0));
    cudaCheck(cudaEventDestroy(e1));

    int count = 0, dev = -1;
    cudaCheck(cudaGetDeviceCount(&count));
    cudaCheck(cudaSetDevice(0));
    cudaCheck(cudaGetDevice(&dev));
    cudaDeviceProp prop;
    cudaCheck(cudaGetDeviceProperties(&prop, 0));
    int smem_optin = 0;
    cudaCheck(cudaDeviceGetAttribute(&smem_optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, 0));
    check(count >= 1 && dev == 0 && prop.warpSize == 32 && prop.multiProcessorCount > 0 && prop.major >= 8 &&
              prop.sharedMemPerBlock == 48 * 1024 && smem_optin >= 48 * 1024,
          "device count / set / get, properties and attributes", "count %d dev %d warp %d sms %d cc %d.%d", count, dev,
          prop.warpSize, prop.multiProcessorCount, prop.major, prop.minor);
    size_t fr = 0, tot = 0;
    cudaCheck(cudaMemGetInfo(&fr, &tot));
    check(tot > 0 && fr <= tot, "cudaMemGetInfo", "free %zu total %zu", fr, tot);
    printf("       device: %s, %d SMs, sm_%d%d\n", prop.name, prop.multiProcessorCount, prop.major, prop.minor);

#ifdef CUEMU
    // Misuse that a GPU would punish must not pass silently under the emulation.
    cudaError_t e = cudaMemcpy(h2.data(), h.data(), n * sizeof(float), cudaMemcpyHostToDevice);
    check(e == cudaErrorInvalidValue, "emulation: cudaMemcpy HostToDevice into host memory is an error", "%s",
          cudaGetErrorName(e));
    e = cudaMemcpy(d1, h.data(), (n + 100) * sizeof(float), cudaMemcpyHostToDevice);
    check(e == cudaErrorInvalidValue, "emulation: a copy running past the end of a device allocation is an error", "%s",
          cudaGetErrorName(e));
    e = cudaFree(h2.data());
    check(e == cudaErrorInvalidValue, "emulation: cudaFree of host memory is an error", "%s", cudaGetErrorName(e));
    cudaGetLastError();
    LAUNCH_UNCHECKED(touch_kernel, 1, 32, 0, 0, h2.data());
    e = cudaGetLastError();
    check(e == cudaErrorIllegalAddress, "emulation: a host pointer passed to a kernel is an illegal address", "%s",
          cudaGetErrorName(e));
    std::vector<float> fresh(4);
    float* dfresh;
    cudaCheck(cudaMalloc(&dfresh, 4 * sizeof(float)));
    cudaCheck(cudaMemcpy(fresh.data(), dfresh, 4 * sizeof(float), cudaMemcpyDeviceToHost));
    check(std::isnan(fresh[0]) && std::isnan(fresh[3]), "emulation: fresh cudaMalloc memory is NaN-poisoned");
    cudaCheck(cudaFree(dfresh));
#endif
    cudaCheck(cudaStreamDestroy(st));
    cudaCheck(cudaFreeHost(pinned));
    cudaCheck(cudaFree(d1));
    cudaCheck(cudaFree(d2));
}

// ============================================================ cuBLASLt
static cublasLtHandle_t g_lt;
static void* g_ws;
static const size_t kWs = 32u << 20;

struct LtCall {
    bool ta = false, tb = false;
    int m = 0, n = 0, k = 0, batch = 1;
    const void *A = nullptr, *B = nullptr, *C = nullptr;
    void* D = nullptr;
    int lda = 0, ldb = 0, ldc = 0, ldd = 0;
    long long sA = 0, sB = 0, sC = 0, sD = 0;
    cudaDataType_t ab = CUDA_R_32F, cd = CUDA_R_32F;
    float alpha = 1.0f, beta = 0.0f;
    cublasLtEpilogue_t epi = CUBLASLT_EPILOGUE_DEFAULT;
    const void* bias = nullptr;
    void* aux = nullptr;
    long long aux_ld = 0;
    unsigned align = 0; // if set: CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_{A,B,C,D}_BYTES
    // D(m x n) = op(A)(m x k) * op(B)(k x n) [+ C], with the leading dimensions (C's = D's)
    void shape(int m_, int n_, int k_, int lda_, int ldb_, int ldcd) {
        m = m_;
        n = n_;
        k = k_;
        lda = lda_;
        ldb = ldb_;
        ldc = ldd = ldcd;
    }
};

static cublasStatus_t lt_run(const LtCall& c) {
    cublasLtMatmulDesc_t desc;
    cublasStatus_t st = cublasLtMatmulDescCreate(&desc, CUBLAS_COMPUTE_32F, CUDA_R_32F);
    if (st != CUBLAS_STATUS_SUCCESS) return st;
    cublasOperation_t opa = c.ta ? CUBLAS_OP_T : CUBLAS_OP_N, opb = c.tb ? CUBLAS_OP_T : CUBLAS_OP_N;
    cublasCheck(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_TRANSA, &opa, sizeof opa));
    cublasCheck(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_TRANSB, &opb, sizeof opb));
    cublasCheck(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_EPILOGUE, &c.epi, sizeof c.epi));
    if (c.bias)
        cublasCheck(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &c.bias, sizeof c.bias));
    if (c.aux) {
        cublasCheck(
            cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_POINTER, &c.aux, sizeof c.aux));
        int64_t ld = c.aux_ld;
        cublasCheck(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_LD, &ld, sizeof ld));
    }
    cublasLtMatrixLayout_t L[4];
    int rows[4] = {c.ta ? c.k : c.m, c.tb ? c.n : c.k, c.m, c.m};
    int cols[4] = {c.ta ? c.m : c.k, c.tb ? c.k : c.n, c.n, c.n};
    int ld[4] = {c.lda, c.ldb, c.ldc, c.ldd};
    long long stride[4] = {c.sA, c.sB, c.sC, c.sD};
    cudaDataType_t ty[4] = {c.ab, c.ab, c.cd, c.cd};
    for (int q = 0; q < 4; q++) {
        cublasCheck(cublasLtMatrixLayoutCreate(&L[q], ty[q], rows[q], cols[q], ld[q]));
        if (c.batch > 1) {
            int32_t bc = c.batch;
            int64_t s = stride[q];
            cublasCheck(cublasLtMatrixLayoutSetAttribute(L[q], CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, &bc, sizeof bc));
            cublasCheck(
                cublasLtMatrixLayoutSetAttribute(L[q], CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET, &s, sizeof s));
        }
    }
    cublasLtMatmulPreference_t pref;
    cublasCheck(cublasLtMatmulPreferenceCreate(&pref));
    uint64_t ws = kWs;
    cublasCheck(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws, sizeof ws));
    if (c.align) {
        uint32_t al = c.align;
        cublasCheck(
            cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, &al, sizeof al));
        cublasCheck(
            cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES, &al, sizeof al));
        cublasCheck(
            cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, &al, sizeof al));
        cublasCheck(
            cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES, &al, sizeof al));
    }
    cublasLtMatmulHeuristicResult_t heur;
    int found = 0;
    st = cublasLtMatmulAlgoGetHeuristic(g_lt, desc, L[0], L[1], L[2], L[3], pref, 1, &heur, &found);
    if (st == CUBLAS_STATUS_SUCCESS && found == 0) st = CUBLAS_STATUS_NOT_SUPPORTED;
    if (st == CUBLAS_STATUS_SUCCESS)
        st = cublasLtMatmul(g_lt, desc, &c.alpha, c.A, L[0], c.B, L[1], &c.beta, c.C ? c.C : c.D, L[2], c.D, L[3],
                            &heur.algo, g_ws, kWs, 0);
    cudaCheck(cudaDeviceSynchronize());
    cublasCheck(cublasLtMatmulPreferenceDestroy(pref));
    for (int q = 0; q < 4; q++) cublasCheck(cublasLtMatrixLayoutDestroy(L[q]));
    cublasCheck(cublasLtMatmulDescDestroy(desc));
    return st;
}

// Host matrices are kept as floats; bf16 ones hold bf16-exact values.
static void* upload_as(const std::vector<float>& h, cudaDataType_t t) {
    if (t == CUDA_R_32F) return dev_upload(h);
    std::vector<__nv_bfloat16> b(h.size());
    for (size_t q = 0; q < h.size(); q++) b[q] = __float2bfloat16(h[q]);
    return dev_upload(b);
}
static std::vector<float> download_as(const void* d, size_t n, cudaDataType_t t) {
    std::vector<float> out(n);
    if (t == CUDA_R_32F) return dev_download((const float*)d, n);
    std::vector<__nv_bfloat16> b = dev_download((const __nv_bfloat16*)d, n);
    for (size_t q = 0; q < n; q++) out[q] = __bfloat162float(b[q]);
    return out;
}
static float bf16_round(double x) { return __bfloat162float(__float2bfloat16((float)x)); }
static double gelu_ref(double x) { return 0.5 * x * (1.0 + tanh(0.7978845608028654 * (x + 0.044715 * x * x * x))); }
static double dgelu_ref(double x) {
    double s = 0.7978845608028654, t = tanh(s * (x + 0.044715 * x * x * x));
    return 0.5 * (1.0 + t) + 0.5 * x * (1.0 - t * t) * s * (1.0 + 3.0 * 0.044715 * x * x);
}
// Frees the call's device buffers (C only where it is not D).
static void lt_free(const LtCall& c) {
    cudaCheck(cudaFree((void*)c.A));
    cudaCheck(cudaFree((void*)c.B));
    if (c.C && c.C != c.D) cudaCheck(cudaFree((void*)c.C));
    if (c.bias) cudaCheck(cudaFree((void*)c.bias));
    cudaCheck(cudaFree(c.D));
}
// op(A)[i][p] and op(B)[p][j] for column-major storage with leading dimensions.
static double opA(const std::vector<float>& A, const LtCall& c, int b, int i, int p) {
    return A[(size_t)(b * c.sA) + (c.ta ? p + (size_t)i * c.lda : i + (size_t)p * c.lda)];
}
static double opB(const std::vector<float>& B, const LtCall& c, int b, int p, int j) {
    return B[(size_t)(b * c.sB) + (c.tb ? j + (size_t)p * c.ldb : p + (size_t)j * c.ldb)];
}
static double ref_dot(const std::vector<float>& A, const std::vector<float>& B, const LtCall& c, int b, int i, int j,
                      double* absdot) {
    double s = 0, sa = 0;
    for (int p = 0; p < c.k; p++) {
        double t = opA(A, c, b, i, p) * opB(B, c, b, p, j);
        s += t;
        sa += fabs(t);
    }
    if (absdot) *absdot = sa;
    return s;
}
// A matrix filled with values (NaN in the padding that must never be read).
static std::vector<float> make_mat(int rows, int cols, int ld, int batch, long long stride, bool exact) {
    size_t total = batch > 1 ? (size_t)(stride * (batch - 1)) + (size_t)ld * cols : (size_t)ld * cols;
    std::vector<float> h(total, NAN);
    for (int b = 0; b < batch; b++)
        for (int j = 0; j < cols; j++)
            for (int i = 0; i < rows; i++)
                h[(size_t)(b * stride) + i + (size_t)j * ld] =
                    exact ? (float)((int)(rnd() % 17) - 8) / 8.0f : rnd_unit();
    return h;
}

static void test_cublaslt_fp32() {
    const int m = 37, n = 29, k = 45;
    for (int combo = 0; combo < 4; combo++) {
        LtCall c;
        c.ta = combo & 1;
        c.tb = (combo >> 1) & 1;
        int arows = c.ta ? k : m, acols = c.ta ? m : k, brows = c.tb ? n : k, bcols = c.tb ? k : n;
        c.shape(m, n, k, arows + 3, brows + 5, m + 2);
        c.ldd = m + 7;
        std::vector<float> A = make_mat(arows, acols, c.lda, 1, 0, false),
                           B = make_mat(brows, bcols, c.ldb, 1, 0, false);
        std::vector<float> C = make_mat(m, n, c.ldc, 1, 0, false);
        c.A = upload_as(A, CUDA_R_32F);
        c.B = upload_as(B, CUDA_R_32F);
        c.C = upload_as(C, CUDA_R_32F);
        std::vector<float> Dinit((size_t)c.ldd * n, 12345.0f);
        c.D = upload_as(Dinit, CUDA_R_32F);
        c.alpha = 0.75f;
        c.beta = 0.5f;
        cublasStatus_t st = lt_run(c);
        std::vector<float> D = download_as(c.D, (size_t)c.ldd * n, CUDA_R_32F);
        double worst = 0;
        int pad_bad = 0;
        for (int j = 0; j < n; j++) {
            for (int i = 0; i < m; i++) {
                double sa;
                double ref = c.alpha * ref_dot(A, B, c, 0, i, j, &sa) + c.beta * C[i + (size_t)j * c.ldc];
                worst = std::max(worst, fabs(D[i + (size_t)j * c.ldd] - ref) / (sa + 1e-30));
            }
            for (int i = m; i < c.ldd; i++) pad_bad += D[i + (size_t)j * c.ldd] != 12345.0f;
        }
        char name[160];
        snprintf(name, sizeof name, "cuBLASLt fp32 op(A)=%s op(B)=%s, 37x29x45, lda/ldb/ldc/ldd > rows, alpha, beta*C",
                 c.ta ? "T" : "N", c.tb ? "T" : "N");
        check(st == CUBLAS_STATUS_SUCCESS && worst < 1e-5 && pad_bad == 0, name,
              "status %d, rel err %.3g, padding touched %d", (int)st, worst, pad_bad);
        lt_free(c);
    }

    // In-place accumulate (C == D, beta = 1), the dW += pattern.
    {
        LtCall c;
        c.tb = true;
        c.shape(40, 33, 70, 40, 33, 40);
        std::vector<float> A = make_mat(40, 70, 40, 1, 0, false), B = make_mat(33, 70, 33, 1, 0, false),
                           D0 = make_mat(40, 33, 40, 1, 0, false);
        c.A = upload_as(A, CUDA_R_32F);
        c.B = upload_as(B, CUDA_R_32F);
        c.D = upload_as(D0, CUDA_R_32F);
        c.C = c.D;
        c.beta = 1.0f;
        cublasStatus_t st = lt_run(c);
        std::vector<float> D = download_as(c.D, 40 * 33, CUDA_R_32F);
        double worst = 0;
        for (int j = 0; j < 33; j++)
            for (int i = 0; i < 40; i++) {
                double sa, ref = ref_dot(A, B, c, 0, i, j, &sa) + D0[i + j * 40];
                worst = std::max(worst, fabs(D[i + j * 40] - ref) / (sa + 1e-30));
            }
        check(st == CUBLAS_STATUS_SUCCESS && worst < 1e-5, "cuBLASLt fp32 in place: D = A*B^T + D (C == D, beta = 1)",
              "status %d, rel err %.3g", (int)st, worst);
        lt_free(c);
    }

    // Strided batches (attention-style TN), strides larger than each matrix.
    {
        LtCall c;
        c.ta = true;
        c.shape(19, 23, 33, 33, 35, 21);
        c.batch = 3;
        c.sA = 33 * 19 + 11;
        c.sB = 35 * 23 + 7;
        c.sC = c.sD = 21 * 23 + 5;
        std::vector<float> A = make_mat(33, 19, c.lda, 3, c.sA, false), B = make_mat(33, 23, c.ldb, 3, c.sB, false);
        size_t dsz = (size_t)(c.sD * 2) + 21 * 23;
        c.A = upload_as(A, CUDA_R_32F);
        c.B = upload_as(B, CUDA_R_32F);
        c.D = upload_as(std::vector<float>(dsz, -7.0f), CUDA_R_32F);
        c.C = c.D;
        cublasStatus_t st = lt_run(c);
        std::vector<float> D = download_as(c.D, dsz, CUDA_R_32F);
        double worst = 0;
        int gap_bad = 0;
        for (int b = 0; b < 3; b++)
            for (int j = 0; j < 23; j++)
                for (int i = 0; i < 21; i++) {
                    float got = D[(size_t)(b * c.sD) + i + (size_t)j * 21];
                    if (i >= 19) {
                        gap_bad += got != -7.0f;
                        continue;
                    }
                    double sa, ref = ref_dot(A, B, c, b, i, j, &sa);
                    worst = std::max(worst, fabs(got - ref) / (sa + 1e-30));
                }
        check(st == CUBLAS_STATUS_SUCCESS && worst < 1e-5 && gap_bad == 0,
              "cuBLASLt fp32 strided batch of 3 (op(A)=T), strides > matrix size",
              "status %d, rel err %.3g, gaps touched %d", (int)st, worst, gap_bad);
        lt_free(c);
    }

    // Bias (one value per row of D) and GELU+bias, fp32.
    for (int ep = 0; ep < 2; ep++) {
        LtCall c;
        c.ta = true;
        c.shape(45, 31, 37, 37, 37, 45);
        std::vector<float> A = make_mat(37, 45, 37, 1, 0, false), B = make_mat(37, 31, 37, 1, 0, false), bias(45);
        for (int i = 0; i < 45; i++) bias[i] = (float)i * 0.25f - 3.0f;
        c.A = upload_as(A, CUDA_R_32F);
        c.B = upload_as(B, CUDA_R_32F);
        c.bias = upload_as(bias, CUDA_R_32F);
        cudaCheck(cudaMalloc(&c.D, 45 * 31 * sizeof(float)));
        c.epi = ep == 0 ? CUBLASLT_EPILOGUE_BIAS : CUBLASLT_EPILOGUE_GELU_BIAS;
        cublasStatus_t st = lt_run(c);
        std::vector<float> D = download_as(c.D, 45 * 31, CUDA_R_32F);
        double worst = 0;
        for (int j = 0; j < 31; j++)
            for (int i = 0; i < 45; i++) {
                double sa, pre = ref_dot(A, B, c, 0, i, j, &sa) + bias[i];
                double ref = ep == 0 ? pre : gelu_ref(pre);
                worst = std::max(worst, fabs(D[i + j * 45] - ref) / (sa + 1.0));
            }
        check(st == CUBLAS_STATUS_SUCCESS && worst < 2e-5,
              ep == 0 ? "cuBLASLt fp32 EPILOGUE_BIAS: bias[i] added to row i of D (length m)"
                      : "cuBLASLt fp32 EPILOGUE_GELU_BIAS: tanh-approximation GELU of (A*B + bias)",
              "status %d, err %.3g", (int)st, worst);
        lt_free(c);
    }
}

static bool bf16_near(float got, double ref) { return fabs(got - ref) <= fabs(ref) * (1.0 / 128.0) + 1e-6; }

static void test_cublaslt_bf16() {
    // bf16 in, bf16 out; inputs are multiples of 1/8, so every sum is exact and D
    // must be the exact result rounded once (to nearest even).
    const int m = 37, n = 29, k = 45;
    for (int combo = 0; combo < 4; combo++) {
        LtCall c;
        c.ta = combo & 1;
        c.tb = (combo >> 1) & 1;
        int arows = c.ta ? k : m, acols = c.ta ? m : k, brows = c.tb ? n : k, bcols = c.tb ? k : n;
        c.shape(m, n, k, arows + 1, brows + 2, m);
        c.ab = c.cd = CUDA_R_16BF;
        std::vector<float> A = make_mat(arows, acols, c.lda, 1, 0, true), B = make_mat(brows, bcols, c.ldb, 1, 0, true);
        c.A = upload_as(A, c.ab);
        c.B = upload_as(B, c.ab);
        cudaCheck(cudaMalloc(&c.D, (size_t)m * n * 2));
        cublasStatus_t st = lt_run(c);
        std::vector<float> D = download_as(c.D, (size_t)m * n, c.cd);
        int bad = 0;
        for (int j = 0; j < n; j++)
            for (int i = 0; i < m; i++) bad += D[i + j * m] != bf16_round(ref_dot(A, B, c, 0, i, j, nullptr));
        char name[160];
        snprintf(name, sizeof name, "cuBLASLt bf16 in/out op(A)=%s op(B)=%s: exact sums rounded once to nearest even",
                 c.ta ? "T" : "N", c.tb ? "T" : "N");
        check(st == CUBLAS_STATUS_SUCCESS && bad == 0, name, "status %d, %d of %d wrong", (int)st, bad, m * n);
        lt_free(c);
    }

    // A sub-matrix pointer (one bf16 element past an allocation's start) is only 2-byte
    // aligned: it needs the real alignment in the preference.
    {
        LtCall c;
        c.shape(16, 8, 24, 16, 24, 16);
        c.ab = c.cd = CUDA_R_16BF;
        std::vector<float> A = make_mat(16, 24, 16, 1, 0, true), B = make_mat(24, 8, 24, 1, 0, true),
                           A1(A.size() + 1, 0.0f);
        for (size_t q = 0; q < A.size(); q++) A1[q + 1] = A[q];
        void* base = upload_as(A1, c.ab);
        c.A = (const __nv_bfloat16*)base + 1;
        c.B = upload_as(B, c.ab);
        cudaCheck(cudaMalloc(&c.D, 16 * 8 * 2));
#ifdef CUEMU
        check(lt_run(c) != CUBLAS_STATUS_SUCCESS,
              "emulation: a 2-byte aligned A with the default alignment preference (256) is refused");
#endif
        c.align = 2;
        cublasStatus_t st = lt_run(c);
        std::vector<float> D = download_as(c.D, 16 * 8, c.cd);
        int bad = 0;
        for (int j = 0; j < 8; j++)
            for (int i = 0; i < 16; i++) bad += D[i + j * 16] != bf16_round(ref_dot(A, B, c, 0, i, j, nullptr));
        check(st == CUBLAS_STATUS_SUCCESS && bad == 0,
              "cuBLASLt bf16 with a 2-byte aligned A and MIN_ALIGNMENT_*_BYTES = 2", "status %d, %d wrong", (int)st,
              bad);
        cudaCheck(cudaFree(base));
        cudaCheck(cudaFree((void*)c.B));
        cudaCheck(cudaFree(c.D));
    }

    // Forward MLP matmul: GELU_AUX_BIAS (pre-GELU values to aux), bf16 in/out, llm.c-style
    // layout: out(OC x BT) = W^T(OC x C) * inp(C x BT) with W stored C x OC.
    const int C = 45, OC = 37, BT = 29, aux_ld = 40;
    LtCall c;
    c.ta = true;
    c.shape(OC, BT, C, C, C, OC);
    c.ab = c.cd = CUDA_R_16BF;
    std::vector<float> W = make_mat(C, OC, C, 1, 0, true), X = make_mat(C, BT, C, 1, 0, true), bias(OC);
    for (int i = 0; i < OC; i++) bias[i] = (float)((int)(rnd() % 33) - 16) / 8.0f;
    c.A = upload_as(W, c.ab);
    c.B = upload_as(X, c.ab);
    c.bias = upload_as(bias, CUDA_R_16BF);
    cudaCheck(cudaMalloc(&c.D, (size_t)OC * BT * 2));
    cudaCheck(cudaMalloc(&c.aux, (size_t)aux_ld * BT * 2));
    c.aux_ld = aux_ld;
    c.epi = CUBLASLT_EPILOGUE_GELU_AUX_BIAS;
    cublasStatus_t st = lt_run(c);
    std::vector<float> D = download_as(c.D, (size_t)OC * BT, c.cd),
                       AUX = download_as(c.aux, (size_t)aux_ld * BT, CUDA_R_16BF);
    int bad_d = 0, bad_aux = 0;
    for (int j = 0; j < BT; j++)
        for (int i = 0; i < OC; i++) {
            double pre = ref_dot(W, X, c, 0, i, j, nullptr) + bias[i];
            bad_aux += AUX[i + (size_t)j * aux_ld] != bf16_round(pre);
            bad_d += !bf16_near(D[i + j * OC], gelu_ref(pre));
        }
    check(st == CUBLAS_STATUS_SUCCESS && bad_d == 0 && bad_aux == 0,
          "cuBLASLt bf16 GELU_AUX_BIAS: D = gelu(W^T x + b), aux (ld 40) = the pre-GELU values",
          "status %d, D %d wrong, aux %d wrong", (int)st, bad_d, bad_aux);

    // Backward through the GELU: DGELU multiplies A*B by gelu'(aux).
    LtCall g;
    g.shape(OC, BT, 23, OC, 23, OC);
    g.ab = g.cd = CUDA_R_16BF;
    std::vector<float> GA = make_mat(OC, 23, OC, 1, 0, true), GB = make_mat(23, BT, 23, 1, 0, true);
    g.A = upload_as(GA, g.ab);
    g.B = upload_as(GB, g.ab);
    cudaCheck(cudaMalloc(&g.D, (size_t)OC * BT * 2));
    g.aux = c.aux;
    g.aux_ld = aux_ld;
    g.epi = CUBLASLT_EPILOGUE_DGELU;
    st = lt_run(g);
    std::vector<float> GD = download_as(g.D, (size_t)OC * BT, g.cd);
    int bad_g = 0;
    for (int j = 0; j < BT; j++)
        for (int i = 0; i < OC; i++)
            bad_g += !bf16_near(GD[i + j * OC],
                                ref_dot(GA, GB, g, 0, i, j, nullptr) * dgelu_ref(AUX[i + (size_t)j * aux_ld]));
    check(st == CUBLAS_STATUS_SUCCESS && bad_g == 0, "cuBLASLt bf16 DGELU: D = (A*B) * gelu'(aux)",
          "status %d, %d wrong", (int)st, bad_g);

    // Weight gradient with bias gradient: dW(C x OC) = inp(C x BT) * dout^T, BGRADB gives
    // dbias[j] = sum over BT of dout[j] (one value per column of D).
    LtCall w;
    w.tb = true;
    w.shape(C, OC, BT, C, OC, C);
    w.ab = w.cd = CUDA_R_16BF;
    std::vector<float> dout = make_mat(OC, BT, OC, 1, 0, true);
    w.A = c.B;
    w.B = upload_as(dout, w.ab);
    cudaCheck(cudaMalloc(&w.D, (size_t)C * OC * 2));
    void* dbias;
    cudaCheck(cudaMalloc(&dbias, OC * 2));
    w.bias = dbias;
    w.epi = CUBLASLT_EPILOGUE_BGRADB;
    st = lt_run(w);
    std::vector<float> WD = download_as(w.D, (size_t)C * OC, w.cd), DB = download_as(dbias, OC, CUDA_R_16BF);
    int bad_w = 0, bad_b = 0;
    for (int j = 0; j < OC; j++) {
        double s = 0;
        for (int p = 0; p < BT; p++) s += dout[j + (size_t)p * OC];
        bad_b += !bf16_near(DB[j], s);
        for (int i = 0; i < C; i++) bad_w += WD[i + j * C] != bf16_round(ref_dot(X, dout, w, 0, i, j, nullptr));
    }
    check(st == CUBLAS_STATUS_SUCCESS && bad_w == 0 && bad_b == 0,
          "cuBLASLt bf16 BGRADB: dW = inp * dout^T and dbias = column sums of op(B)",
          "status %d, dW %d wrong, dbias %d wrong", (int)st, bad_w, bad_b);

    // bf16 in, fp32 out.
    LtCall f = c;
    f.cd = CUDA_R_32F;
    f.epi = CUBLASLT_EPILOGUE_DEFAULT;
    f.bias = nullptr;
    f.aux = nullptr;
    cudaCheck(cudaMalloc(&f.D, (size_t)OC * BT * 4));
    st = lt_run(f);
    std::vector<float> FD = download_as(f.D, (size_t)OC * BT, CUDA_R_32F);
    int bad_f = 0;
    for (int j = 0; j < BT; j++)
        for (int i = 0; i < OC; i++) bad_f += FD[i + j * OC] != (float)ref_dot(W, X, f, 0, i, j, nullptr);
    check(st == CUBLAS_STATUS_SUCCESS && bad_f == 0,
          "cuBLASLt bf16 in, fp32 out (fp32 accumulation, no rounding to bf16)", "status %d, %d wrong", (int)st, bad_f);

    // Misuse is reported, not computed: aux leading dimension not a multiple of 8.
    LtCall bad = c;
    bad.aux_ld = OC;
    st = lt_run(bad);
    check(st != CUBLAS_STATUS_SUCCESS,
          "cuBLASLt refuses GELU_AUX with an aux leading dimension that is not a multiple of 8");

    cudaCheck(cudaFree((void*)c.A));
    cudaCheck(cudaFree((void*)c.B));
    cudaCheck(cudaFree((void*)c.bias));
    cudaCheck(cudaFree(c.D));
    cudaCheck(cudaFree(c.aux));
    cudaCheck(cudaFree((void*)g.A));
    cudaCheck(cudaFree((void*)g.B));
    cudaCheck(cudaFree(g.D));
    cudaCheck(cudaFree((void*)w.B));
    cudaCheck(cudaFree(w.D));
    cudaCheck(cudaFree(dbias));
    cudaCheck(cudaFree(f.D));
}

int main() {
#ifdef CUEMU
    printf(
        "# CPU emulation of CUDA; stderr lines starting with 'cuemu' are its diagnostics, expected for the misuse "
        "checks\n");
#endif
    cudaCheck(cudaSetDevice(0));
    test_launch();
    test_block_reduction();
    test_warp();
    test_dynamic_smem();
    test_atomics();
    test_bf16();
    test_runtime();
    cublasCheck(cublasLtCreate(&g_lt));
    cudaCheck(cudaMalloc(&g_ws, kWs));
    test_cublaslt_fp32();
    test_cublaslt_bf16();
    cudaCheck(cudaFree(g_ws));
    cublasCheck(cublasLtDestroy(g_lt));
    printf("%d passed, %d failed\n", g_pass, g_fail);
    return g_fail ? 1 : 0;
}
