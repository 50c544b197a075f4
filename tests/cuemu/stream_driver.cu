// tests/cuemu/stream_driver.cu - stream and launch-resource programs for the emulation's
// self-tests (test_detectors.sh): `stream_driver MODE [threads]`. The res_* modes launch
// kernels that test_detectors.sh lists in a register table of its own (CUEMU_RESOURCES).
// The broken stream modes rewrite a pinned host buffer while its cudaMemcpyAsync may not
// have run yet, read a pinned D2H destination before synchronising with the copy, or
// leave out an event between two streams (a kernel pair, a non-blocking stream and
// cudaMemcpy, the data-parallel all-reduce overlap, two kernels writing overlapping
// parts of one allocation, writes through a struct's pointer or an atomic); the
// emulation must stop them (or they get wrong numbers). Two kernels writing disjoint
// halves of one allocation need no event. The correct ones must pass and print "ok". The correct modes
// work the same on a GPU (link -lnccl -lcublasLt).
#include <cuda_runtime.h>
#include <nccl.h>
#include <cublasLt.h>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include "../../llmc/cuda/cuda_common.cuh"

#define CK(x)                                                               \
    do {                                                                    \
        cudaError_t e_ = (x);                                               \
        if (e_ != cudaSuccess) {                                            \
            fprintf(stderr, "error: %s: %s\n", #x, cudaGetErrorString(e_)); \
            exit(1);                                                        \
        }                                                                   \
    } while (0)

__global__ void sum_kernel(const int* x, int n, int* out) {
    if (threadIdx.x == 0 && blockIdx.x == 0) {
        int s = 0;
        for (int i = 0; i < n; i++) s += x[i];
        *out = s;
    }
}

// Two non-blocking streams and an event to order b after a (the two-stream modes).
struct StreamPair {
    cudaStream_t a, b;
    cudaEvent_t e;
};
static StreamPair pair_create() {
    StreamPair p;
    CK(cudaStreamCreateWithFlags(&p.a, cudaStreamNonBlocking));
    CK(cudaStreamCreateWithFlags(&p.b, cudaStreamNonBlocking));
    CK(cudaEventCreateWithFlags(&p.e, cudaEventDisableTiming));
    return p;
}
// Stream b waits for the work queued on a so far.
static void pair_order(const StreamPair& p) {
    CK(cudaEventRecord(p.e, p.a));
    CK(cudaStreamWaitEvent(p.b, p.e, 0));
}
static void pair_destroy(const StreamPair& p) {
    CK(cudaEventDestroy(p.e));
    CK(cudaStreamDestroy(p.a));
    CK(cudaStreamDestroy(p.b));
}

// A mode's result: 0 if sum_kernel's sum is the expected one, else 1 with a message.
static int sum_check(const char* mode, int got, int want) {
    if (got == want) return 0;
    fprintf(stderr, "%s: sum %d, expected %d\n", mode, got, want);
    return 1;
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
        if (pinned)
            CK(cudaMallocHost(&h[k], n * sizeof(int)));
        else
            h[k] = (int*)malloc(n * sizeof(int));
        CK(cudaMalloc(&d[k], n * sizeof(int)));
        CK(cudaEventCreateWithFlags(&ev[k], cudaEventDisableTiming));
    }
    CK(cudaMalloc(&dsum, rounds * sizeof(int)));
    for (int r = 0; r < rounds; r++) {
        int k = r % 2;
        if (guard && r >= 2) CK(cudaEventSynchronize(ev[k])); // the slot's last copy has run
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
        if (got[r] != want) {
            fprintf(stderr, "round %d: sum %d, expected %d\n", r, got[r], want);
            bad = 1;
        }
    }
    for (int k = 0; k < 2; k++) {
        if (pinned)
            CK(cudaFreeHost(h[k]));
        else
            free(h[k]);
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
    if (got != 7) {
        fprintf(stderr, "pageable copy gave %d, expected 7\n", got);
        return 1;
    }
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
    h[5] = -1; // races with the copy
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
    StreamPair p = pair_create();
    cudaStream_t a = p.a, b = p.b;
    CK(cudaMallocHost(&h, n * sizeof(int)));
    CK(cudaMalloc(&d, n * sizeof(int)));
    CK(cudaMalloc(&dsum, sizeof(int)));
    for (int i = 0; i < n; i++) h[i] = 2;
    CK(cudaMemcpyAsync(d, h, n * sizeof(int), cudaMemcpyHostToDevice, a));
    pair_order(p);
    LAUNCH(sum_kernel, 1, 32, 0, b, d, n, dsum);
    CK(cudaMemcpyAsync(&got, dsum, sizeof(int), cudaMemcpyDeviceToHost, b));
    CK(cudaStreamSynchronize(b));
    CK(cudaEventSynchronize(p.e));
    h[0] = 0; // fine: the event has completed
    CK(cudaFreeHost(h));
    CK(cudaFree(d));
    CK(cudaFree(dsum));
    pair_destroy(p);
    return sum_check("two streams", got, 2 * n);
}

__global__ void fill_kernel(int* x, int n, int v) {
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) x[i] = v;
}

// A kernel on stream b reads what a kernel on stream a wrote. Without the event the
// two may run in either order on a GPU: the emulation reports the race at the second
// launch, and with the detector off (CUEMU_STREAM_RACES=0) b's sum runs first (it is
// what the host waits for) and sees the poisoned buffer, a wrong sum.
static int cross(int with_event) {
    const int n = 256;
    int *d, *dsum, got = 0;
    StreamPair p = pair_create();
    cudaStream_t a = p.a, b = p.b;
    CK(cudaMalloc(&d, n * sizeof(int)));
    CK(cudaMalloc(&dsum, sizeof(int)));
    LAUNCH(fill_kernel, 2, 64, 0, a, d, n, 3);
    if (with_event) {
        pair_order(p);
    }
    LAUNCH(sum_kernel, 1, 32, 0, b, d, n, dsum);
    CK(cudaMemcpyAsync(&got, dsum, sizeof(int), cudaMemcpyDeviceToHost, b)); // pageable: returns when done
    CK(cudaDeviceSynchronize());
    CK(cudaFree(d));
    CK(cudaFree(dsum));
    pair_destroy(p);
    return sum_check("cross-stream read", got, 3 * n);
}

// A device-to-host copy into pinned memory completes when the stream reaches it: the
// host may read the destination only after synchronising with the copy (stream or
// event). when = 0 reads it right after the call (broken: the emulation fills the
// destination with poison at the call, the data arrives at the synchronisation).
static int d2h(int when) {
    const int n = 64;
    int *d, *h;
    cudaStream_t s;
    cudaEvent_t e;
    CK(cudaStreamCreate(&s));
    CK(cudaEventCreateWithFlags(&e, cudaEventDisableTiming));
    CK(cudaMalloc(&d, n * sizeof(int)));
    CK(cudaMallocHost(&h, n * sizeof(int)));
    LAUNCH(fill_kernel, 1, 64, 0, s, d, n, 5);
    CK(cudaMemcpyAsync(h, d, n * sizeof(int), cudaMemcpyDeviceToHost, s));
    CK(cudaEventRecord(e, s));
    if (when == 1) CK(cudaStreamSynchronize(s));
    if (when == 2) CK(cudaEventSynchronize(e));
    int bad = 0, first = h[0];
    for (int i = 0; i < n; i++) bad += h[i] != 5;
    CK(cudaStreamSynchronize(s));
    CK(cudaFreeHost(h));
    CK(cudaFree(d));
    CK(cudaEventDestroy(e));
    CK(cudaStreamDestroy(s));
    if (bad) {
        fprintf(stderr, "host read of the pinned D2H destination: %d of %d wrong (h[0] = %d, expected 5)\n", bad, n,
                first);
        return 1;
    }
    return 0;
}

// The legacy default stream (cudaMemcpy) waits for the earlier work of blocking streams,
// not for cudaStreamNonBlocking ones: reading a non-blocking stream's output with
// cudaMemcpy without synchronising is a race.
static int legacy(unsigned flags) {
    const int n = 64;
    int *d, got[n];
    cudaStream_t s;
    CK(cudaStreamCreateWithFlags(&s, flags));
    CK(cudaMalloc(&d, n * sizeof(int)));
    LAUNCH(fill_kernel, 1, 64, 0, s, d, n, 7);
    CK(cudaMemcpy(got, d, sizeof got, cudaMemcpyDeviceToHost));
    CK(cudaDeviceSynchronize());
    CK(cudaFree(d));
    CK(cudaStreamDestroy(s));
    for (int i = 0; i < n; i++)
        if (got[i] != 7) {
            fprintf(stderr, "legacy stream read: got[%d] = %d, expected 7\n", i, got[i]);
            return 1;
        }
    return 0;
}

// The data-parallel overlap: the backward pass writes gradients on the compute stream,
// the all-reduce runs on a communication stream after an event, the optimizer waits for
// the all-reduce's event. mode 1 leaves out the communication stream's wait (the
// all-reduce may read the gradients before the backward pass wrote them), mode 2 the
// compute stream's wait (the optimizer may read the reduced gradients too early, and the
// next backward pass may overwrite gradients the all-reduce is still reading).
__global__ void backward_kernel(float* grad, int n, int step) {
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x)
        grad[i] = (float)(step + 1) * 0.5f;
}
__global__ void sgd_kernel(float* param, const float* grad, int n) {
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) param[i] -= grad[i];
}
static int dp_overlap(int mode) {
    const int n = 1024, steps = 3;
    float *grad, *reduced, *param;
    cudaStream_t compute, comm;
    cudaEvent_t grads_ready, reduced_ready;
    ncclComm_t nc;
    ncclUniqueId id;
    if (ncclGetUniqueId(&id) != ncclSuccess || ncclCommInitRank(&nc, 1, id, 0) != ncclSuccess) {
        fprintf(stderr, "nccl init\n");
        return 1;
    }
    CK(cudaStreamCreate(&compute));
    CK(cudaStreamCreateWithFlags(&comm, cudaStreamNonBlocking));
    CK(cudaEventCreateWithFlags(&grads_ready, cudaEventDisableTiming));
    CK(cudaEventCreateWithFlags(&reduced_ready, cudaEventDisableTiming));
    CK(cudaMalloc(&grad, n * sizeof(float)));
    CK(cudaMalloc(&reduced, n * sizeof(float)));
    CK(cudaMalloc(&param, n * sizeof(float)));
    CK(cudaMemsetAsync(param, 0, n * sizeof(float), compute));
    for (int step = 0; step < steps; step++) {
        LAUNCH(backward_kernel, 4, 128, 0, compute, grad, n, step);
        CK(cudaEventRecord(grads_ready, compute));
        if (mode != 1) CK(cudaStreamWaitEvent(comm, grads_ready, 0));
        if (ncclAllReduce(grad, reduced, n, ncclFloat, ncclSum, nc, comm) != ncclSuccess) {
            fprintf(stderr, "all-reduce\n");
            return 1;
        }
        CK(cudaEventRecord(reduced_ready, comm));
        if (mode != 2) CK(cudaStreamWaitEvent(compute, reduced_ready, 0));
        LAUNCH(sgd_kernel, 4, 128, 0, compute, param, reduced, n);
    }
    float h[n];
    CK(cudaMemcpyAsync(h, param, sizeof h, cudaMemcpyDeviceToHost, compute));
    CK(cudaDeviceSynchronize());
    ncclCommDestroy(nc);
    CK(cudaFree(grad));
    CK(cudaFree(reduced));
    CK(cudaFree(param));
    CK(cudaEventDestroy(grads_ready));
    CK(cudaEventDestroy(reduced_ready));
    CK(cudaStreamDestroy(compute));
    CK(cudaStreamDestroy(comm));
    const float want = -(0.5f + 1.0f + 1.5f); // exact in fp32
    for (int i = 0; i < n; i++)
        if (h[i] != want) {
            fprintf(stderr, "dp overlap: param[%d] = %g, expected %g\n", i, h[i], want);
            return 1;
        }
    return 0;
}

// Byte ranges (README "Streams"): two kernels on two streams with no event between them
// write parts of ONE allocation through the same base pointer. mode 0: the two halves,
// disjoint and neighbouring (no race: a GPU may run them concurrently); mode 1: b's part
// starts one element early, overlapping a's last element (a race); mode 2: the same
// overlap ordered by an event (no race). The host checks the contents in every mode.
__global__ void range_fill_kernel(int* x, int lo, int hi, int v) {
    for (int i = lo + blockIdx.x * blockDim.x + threadIdx.x; i < hi; i += gridDim.x * blockDim.x) x[i] = v;
}
static int halves(int mode) {
    const int n = 256;
    int *d, h[2 * n];
    StreamPair p = pair_create();
    cudaStream_t a = p.a, b = p.b;
    CK(cudaMalloc(&d, 2 * n * sizeof(int)));
    LAUNCH(range_fill_kernel, 2, 64, 0, a, d, 0, n, 1);
    if (mode == 2) {
        pair_order(p);
    }
    LAUNCH(range_fill_kernel, 2, 64, 0, b, d, mode == 0 ? n : n - 1, 2 * n, 2);
    CK(cudaDeviceSynchronize());
    CK(cudaMemcpy(h, d, sizeof h, cudaMemcpyDeviceToHost));
    CK(cudaFree(d));
    pair_destroy(p);
    for (int i = 0; i < 2 * n; i++) {
        int want = i < (mode == 0 ? n : n - 1) ? 1 : 2;
        if (h[i] != want) {
            fprintf(stderr, "halves: h[%d] = %d, expected %d\n", i, h[i], want);
            return 1;
        }
    }
    return 0;
}
// What a kernel reaches other than through a pointer parameter counts too: a pointer
// inside a struct argument (mode 0), an atomicAdd (mode 1). Stream a writes the counter
// that way, stream b's sum_kernel reads it with no event between them (a race).
struct IntSlice {
    int* p;
    int n;
};
__global__ void struct_fill_kernel(IntSlice s, int v) {
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < s.n; i += gridDim.x * blockDim.x) s.p[i] = v;
}
__global__ void atomic_count_kernel(int* counter) { atomicAdd(counter, 1); }
static int hidden_write(int mode) {
    int *d, *dsum, got = 0;
    cudaStream_t a, b;
    CK(cudaStreamCreateWithFlags(&a, cudaStreamNonBlocking));
    CK(cudaStreamCreateWithFlags(&b, cudaStreamNonBlocking));
    CK(cudaMalloc(&d, 64 * sizeof(int)));
    CK(cudaMalloc(&dsum, sizeof(int)));
    CK(cudaMemset(d, 0, 64 * sizeof(int)));
    CK(cudaDeviceSynchronize()); // a and b are non-blocking: the legacy memset does not order them
    if (mode == 0)
        LAUNCH(struct_fill_kernel, 1, 64, 0, a, IntSlice{d, 64}, 1);
    else
        LAUNCH(atomic_count_kernel, 1, 64, 0, a, d);
    LAUNCH(sum_kernel, 1, 32, 0, b, d, 64, dsum);
    CK(cudaDeviceSynchronize());
    CK(cudaMemcpy(&got, dsum, sizeof(int), cudaMemcpyDeviceToHost));
    CK(cudaFree(d));
    CK(cudaFree(dsum));
    CK(cudaStreamDestroy(a));
    CK(cudaStreamDestroy(b));
    return got != 64;
}

// cuBLASLt's exact ranges: two matmuls on two streams, no event, write the top and the
// bottom half of the rows of one column-major 2m x n matrix (ld = 2m): their column runs
// interleave, so the spans overlap but the bytes do not (no race). overlap = 1 starts the
// second one a row early: row m-1 of every column is written by both (a race).
static int lt_halves(int overlap) {
    const int m = 4, n = 3, k = 2, ldd = 2 * m;
    float *A, *B, *D, h[ldd * n], hA[m * k], hB[k * n];
    for (int i = 0; i < m * k; i++) hA[i] = 1.0f;
    for (int i = 0; i < k * n; i++) hB[i] = 1.0f;
    cudaStream_t s[2];
    cublasLtHandle_t lt;
    cublasLtMatmulDesc_t desc;
    cublasLtMatrixLayout_t la, lb, ld;
    CK(cudaStreamCreateWithFlags(&s[0], cudaStreamNonBlocking));
    CK(cudaStreamCreateWithFlags(&s[1], cudaStreamNonBlocking));
    CK(cudaMalloc(&A, sizeof hA));
    CK(cudaMalloc(&B, sizeof hB));
    CK(cudaMalloc(&D, sizeof h));
    CK(cudaMemcpy(A, hA, sizeof hA, cudaMemcpyHostToDevice));
    CK(cudaMemcpy(B, hB, sizeof hB, cudaMemcpyHostToDevice));
    CK(cudaMemset(D, 0, sizeof h));
    CK(cudaDeviceSynchronize()); // the streams are non-blocking: the legacy memset does not order them
    if (cublasLtCreate(&lt) != CUBLAS_STATUS_SUCCESS ||
        cublasLtMatmulDescCreate(&desc, CUBLAS_COMPUTE_32F, CUDA_R_32F) != CUBLAS_STATUS_SUCCESS ||
        cublasLtMatrixLayoutCreate(&la, CUDA_R_32F, m, k, m) != CUBLAS_STATUS_SUCCESS ||
        cublasLtMatrixLayoutCreate(&lb, CUDA_R_32F, k, n, k) != CUBLAS_STATUS_SUCCESS ||
        cublasLtMatrixLayoutCreate(&ld, CUDA_R_32F, m, n, ldd) != CUBLAS_STATUS_SUCCESS) {
        fprintf(stderr, "cublasLt setup\n");
        return 1;
    }
    const float alpha[2] = {1.0f, 2.0f}, beta = 0.0f;
    for (int i = 0; i < 2; i++) {
        float* Di = D + (i == 0 ? 0 : m - overlap);
        if (cublasLtMatmul(lt, desc, &alpha[i], A, la, B, lb, &beta, Di, ld, Di, ld, NULL, NULL, 0, s[i]) !=
            CUBLAS_STATUS_SUCCESS) {
            fprintf(stderr, "cublasLtMatmul\n");
            return 1;
        }
    }
    CK(cudaDeviceSynchronize());
    CK(cudaMemcpy(h, D, sizeof h, cudaMemcpyDeviceToHost));
    cublasLtMatrixLayoutDestroy(la);
    cublasLtMatrixLayoutDestroy(lb);
    cublasLtMatrixLayoutDestroy(ld);
    cublasLtMatmulDescDestroy(desc);
    cublasLtDestroy(lt);
    CK(cudaFree(A));
    CK(cudaFree(B));
    CK(cudaFree(D));
    CK(cudaStreamDestroy(s[0]));
    CK(cudaStreamDestroy(s[1]));
    for (int j = 0; j < n; j++)
        for (int i = 0; i < ldd; i++) {
            float want = i < m ? (float)k : 2.0f * k;
            if (h[j * ldd + i] != want) {
                fprintf(stderr, "lt halves: D[%d,%d] = %g, expected %g\n", i, j, h[j * ldd + i], want);
                return 1;
            }
        }
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
    if (!strcmp(m, "res_tmpl128"))
        launch_res<128>(d, threads);
    else if (!strcmp(m, "res_tmpl64"))
        launch_res<64>(d, threads);
    else if (!strcmp(m, "res_plain"))
        LAUNCH(res_plain_kernel, 1, threads, 1024, 0, d);
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
    if (!strncmp(m, "res_", 4))
        bad = resources(m, argc > 2 ? atoi(argv[2]) : 256);
    else if (!strcmp(m, "slots_guarded"))
        bad = slots(1, 1);
    else if (!strcmp(m, "slots_unguarded"))
        bad = slots(0, 1);
    else if (!strcmp(m, "slots_pageable"))
        bad = slots(0, 0);
    else if (!strcmp(m, "pageable_snapshot"))
        bad = pageable_snapshot();
    else if (!strcmp(m, "write_before_sync"))
        bad = write_before_sync();
    else if (!strcmp(m, "two_streams"))
        bad = two_streams();
    else if (!strcmp(m, "cross_no_event"))
        bad = cross(0);
    else if (!strcmp(m, "cross_event"))
        bad = cross(1);
    else if (!strcmp(m, "d2h_read_early"))
        bad = d2h(0);
    else if (!strcmp(m, "d2h_stream_sync"))
        bad = d2h(1);
    else if (!strcmp(m, "d2h_event_sync"))
        bad = d2h(2);
    else if (!strcmp(m, "legacy_blocking"))
        bad = legacy(cudaStreamDefault);
    else if (!strcmp(m, "legacy_nonblocking"))
        bad = legacy(cudaStreamNonBlocking);
    else if (!strcmp(m, "halves_disjoint"))
        bad = halves(0);
    else if (!strcmp(m, "halves_overlap"))
        bad = halves(1);
    else if (!strcmp(m, "halves_overlap_event"))
        bad = halves(2);
    else if (!strcmp(m, "lt_halves"))
        bad = lt_halves(0);
    else if (!strcmp(m, "lt_halves_overlap"))
        bad = lt_halves(1);
    else if (!strcmp(m, "struct_ptr_no_event"))
        bad = hidden_write(0);
    else if (!strcmp(m, "atomic_no_event"))
        bad = hidden_write(1);
    else if (!strcmp(m, "dp_overlap"))
        bad = dp_overlap(0);
    else if (!strcmp(m, "dp_no_comm_wait"))
        bad = dp_overlap(1);
    else if (!strcmp(m, "dp_no_compute_wait"))
        bad = dp_overlap(2);
    else {
        fprintf(stderr, "error: unknown mode '%s'\n", m);
        return 2;
    }
    if (bad) return 1;
    printf("ok\n");
    return 0;
}
