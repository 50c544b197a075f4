// dev/cuemu/stream_driver.cu - stream and launch-resource programs for the emulation's
// self-tests (test_detectors.sh): `stream_driver MODE [threads]`. The res_* modes launch
// kernels that test_detectors.sh lists in a register table of its own (CUEMU_RESOURCES). The broken ones rewrite a pinned host
// buffer while its cudaMemcpyAsync may not have run yet; the emulation must stop them
// with "host wrote pinned buffer before its async copy ...". The correct ones must
// pass and print "ok". Works the same on a GPU for the correct modes.
#include <cuda_runtime.h>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include "../../llmc/cuda_common.cuh"

#define CK(x) do { cudaError_t e_ = (x); if (e_ != cudaSuccess) { fprintf(stderr, "error: %s: %s\n", #x, cudaGetErrorString(e_)); exit(1); } } while (0)

__global__ void sum_kernel(const int* x, int n, int* out) {
    if (threadIdx.x == 0 && blockIdx.x == 0) {
        int s = 0;
        for (int i = 0; i < n; i++) s += x[i];
        *out = s;
    }
}

// Two slots, each a pinned buffer guarded by an event (the trainer's upload pattern).
// guard = 0 leaves out the cudaEventSynchronize before a slot is rewritten.
static int slots(int guard, int pinned) {
    const int n = 256, rounds = 6;
    int *h[2], *d[2], *dsum;
    cudaEvent_t ev[2];
    cudaStream_t s;
    CK(cudaStreamCreate(&s));
    for (int k = 0; k < 2; k++) {
        if (pinned) CK(cudaMallocHost(&h[k], n * sizeof(int)));
        else h[k] = (int*)malloc(n * sizeof(int));
        CK(cudaMalloc(&d[k], n * sizeof(int)));
        CK(cudaEventCreateWithFlags(&ev[k], cudaEventDisableTiming));
    }
    CK(cudaMalloc(&dsum, rounds * sizeof(int)));
    for (int r = 0; r < rounds; r++) {
        int k = r % 2;
        if (guard && r >= 2) CK(cudaEventSynchronize(ev[k]));  // the slot's last copy has run
        for (int i = 0; i < n; i++) h[k][i] = r * 1000 + i;
        CK(cudaMemcpyAsync(d[k], h[k], n * sizeof(int), cudaMemcpyHostToDevice, s));
        CK(cudaEventRecord(ev[k], s));
        LAUNCH(sum_kernel, 1, 32, 0, s, d[k], n, dsum + r);
    }
    int got[rounds];
    CK(cudaMemcpyAsync(got, dsum, sizeof got, cudaMemcpyDeviceToHost, s));
    CK(cudaStreamSynchronize(s));
    int bad = 0;
    for (int r = 0; r < rounds; r++) {
        int want = r * 1000 * n + n * (n - 1) / 2;
        if (got[r] != want) { fprintf(stderr, "round %d: sum %d, expected %d\n", r, got[r], want); bad = 1; }
    }
    for (int k = 0; k < 2; k++) {
        if (pinned) CK(cudaFreeHost(h[k]));
        else free(h[k]);
        CK(cudaFree(d[k]));
        CK(cudaEventDestroy(ev[k]));
    }
    CK(cudaFree(dsum));
    CK(cudaStreamDestroy(s));
    return bad;
}

// Pageable copies are staged at the call: rewriting the host buffer right after
// cudaMemcpyAsync is allowed and the device gets the old contents.
static int pageable_snapshot() {
    int* h = (int*)malloc(sizeof(int));
    int *d, got = 0;
    CK(cudaMalloc(&d, sizeof(int)));
    *h = 7;
    CK(cudaMemcpyAsync(d, h, sizeof(int), cudaMemcpyHostToDevice, 0));
    *h = 8;
    CK(cudaMemcpy(&got, d, sizeof(int), cudaMemcpyDeviceToHost));
    free(h);
    CK(cudaFree(d));
    if (got != 7) { fprintf(stderr, "pageable copy gave %d, expected 7\n", got); return 1; }
    return 0;
}

// The simplest broken program: a pinned buffer rewritten after cudaMemcpyAsync,
// before any synchronisation.
static int write_before_sync() {
    int *h, *d;
    CK(cudaMallocHost(&h, 64 * sizeof(int)));
    CK(cudaMalloc(&d, 64 * sizeof(int)));
    for (int i = 0; i < 64; i++) h[i] = i;
    CK(cudaMemcpyAsync(d, h, 64 * sizeof(int), cudaMemcpyHostToDevice, 0));
    h[5] = -1;  // races with the copy
    CK(cudaDeviceSynchronize());
    CK(cudaFreeHost(h));
    CK(cudaFree(d));
    return 0;
}

// Events order streams: stream b reads what stream a's pinned copy wrote, after
// cudaStreamWaitEvent; the host rewrites the pinned buffer only after the event.
static int two_streams() {
    const int n = 64;
    int *h, *d, *dsum, got = 0;
    cudaStream_t a, b;
    cudaEvent_t e;
    CK(cudaStreamCreateWithFlags(&a, cudaStreamNonBlocking));
    CK(cudaStreamCreateWithFlags(&b, cudaStreamNonBlocking));
    CK(cudaEventCreateWithFlags(&e, cudaEventDisableTiming));
    CK(cudaMallocHost(&h, n * sizeof(int)));
    CK(cudaMalloc(&d, n * sizeof(int)));
    CK(cudaMalloc(&dsum, sizeof(int)));
    for (int i = 0; i < n; i++) h[i] = 2;
    CK(cudaMemcpyAsync(d, h, n * sizeof(int), cudaMemcpyHostToDevice, a));
    CK(cudaEventRecord(e, a));
    CK(cudaStreamWaitEvent(b, e, 0));
    LAUNCH(sum_kernel, 1, 32, 0, b, d, n, dsum);
    CK(cudaMemcpyAsync(&got, dsum, sizeof(int), cudaMemcpyDeviceToHost, b));
    CK(cudaStreamSynchronize(b));
    CK(cudaEventSynchronize(e));
    h[0] = 0;  // fine: the event has completed
    CK(cudaFreeHost(h));
    CK(cudaFree(d));
    CK(cudaFree(dsum));
    CK(cudaEventDestroy(e));
    CK(cudaStreamDestroy(a));
    CK(cudaStreamDestroy(b));
    if (got != 2 * n) { fprintf(stderr, "two streams: sum %d, expected %d\n", got, 2 * n); return 1; }
    return 0;
}

// Launch-resource checks (impl/resources.h): the same template kernel at two sizes, so
// the table row must be found from the instantiation, not the LAUNCH text "res_kernel<N>".
template <int N>
__global__ void res_kernel(float* out) {
    if (threadIdx.x == 0) out[blockIdx.x] = (float)N;
}
__global__ void res_plain_kernel(float* out) {
    DYNAMIC_SMEM(float, buf);
    buf[threadIdx.x] = 1.0f;
    __syncthreads();
    if (threadIdx.x == 0) out[0] = buf[0];
}
template <int N>
static void launch_res(float* d, int threads) {
    LAUNCH(res_kernel<N>, 1, threads, 0, 0, d);
}
static int resources(const char* m, int threads) {
    float* d;
    CK(cudaMalloc(&d, 4096));
    if (!strcmp(m, "res_tmpl128")) launch_res<128>(d, threads);
    else if (!strcmp(m, "res_tmpl64")) launch_res<64>(d, threads);
    else if (!strcmp(m, "res_plain")) LAUNCH(res_plain_kernel, 1, threads, 1024, 0, d);
    else if (!strcmp(m, "res_smem")) {
        // 163 KiB of dynamic shared memory: the opt-in maximum of sm_80, so with the
        // kernel's static shared memory it fits sm_90 (227 KiB) but not sm_80
        int bytes = 163 * 1024;
        CK(cudaFuncSetAttribute(res_plain_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, bytes));
        LAUNCH(res_plain_kernel, 1, threads, bytes, 0, d);
    } else if (!strcmp(m, "res_optin")) {
        // above sm_80's opt-in maximum: cudaFuncSetAttribute itself must refuse it there
        CK(cudaFuncSetAttribute(res_plain_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, 200 * 1024));
    }
    CK(cudaDeviceSynchronize());
    CK(cudaFree(d));
    return 0;
}

int main(int argc, char** argv) {
    const char* m = argc > 1 ? argv[1] : "";
    int bad;
    if (!strncmp(m, "res_", 4)) bad = resources(m, argc > 2 ? atoi(argv[2]) : 256);
    else
    if (!strcmp(m, "slots_guarded")) bad = slots(1, 1);
    else if (!strcmp(m, "slots_unguarded")) bad = slots(0, 1);
    else if (!strcmp(m, "slots_pageable")) bad = slots(0, 0);
    else if (!strcmp(m, "pageable_snapshot")) bad = pageable_snapshot();
    else if (!strcmp(m, "write_before_sync")) bad = write_before_sync();
    else if (!strcmp(m, "two_streams")) bad = two_streams();
    else { fprintf(stderr, "error: unknown mode '%s'\n", m); return 2; }
    if (bad) return 1;
    printf("ok\n");
    return 0;
}
