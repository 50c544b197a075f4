// llmc/cuda/cuda_common.cuh - the one place every CUDA kernel launch goes through, plus
// checked-call macros for the CUDA runtime, cuBLAS(Lt) and NCCL:
//   cudaCheck(call), cublasCheck(call), ncclCheck(call)  print file:line, the error
//       and what to try next, then exit(1);
//   LAUNCH(kernel, grid, block, smem, stream, args...)    launch + check;
//   LAUNCH_UNCHECKED(...)                                 launch only (for code that
//       inspects cudaGetLastError() itself);
//   DYNAMIC_SMEM(T, name)   declares the block's dynamic shared memory as T name[]
//       (`extern __shared__ T name[]` under nvcc);
//   CEIL_DIV(a, b);
//   nvtx_push(fmt, ...), nvtx_pop()  an NVTX range (the step's phases, each layer) for a profiler.
// Under nvcc LAUNCH is kernel<<<grid, block, smem, stream>>>(args...). When CUEMU
// is defined (the CPU emulation in cuemu, tests only) it runs the kernel on
// the CPU with the same grid, block and shared memory. Write launches only with
// LAUNCH: `<<<...>>>` does not compile under the emulation. A template kernel
// with several template arguments goes in parentheses: LAUNCH((k<T, 256>), ...).
// cublasCheck/ncclCheck need <cublasLt.h>/<nccl.h> included where they are used.
#ifndef LLMC_CUDA_COMMON_CUH
#define LLMC_CUDA_COMMON_CUH

#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <cuda_runtime.h>
// NVTX 3 is header-only (no library to link); a toolkit without it gets ranges that do nothing
#if __has_include(<nvtx3/nvToolsExt.h>)
#include <nvtx3/nvToolsExt.h>
#define LLMC_NVTX 1
#else
#define LLMC_NVTX 0
#endif

#define CEIL_DIV(a, b) (((a) + (b)-1) / (b))

// The seam: the one place a production header learns whether it runs under the CPU
// emulation (cuemu defines CUEMU). LAUNCH, DYNAMIC_SMEM and GRID_STRIDE_CAP below hide the
// difference; code that must branch (mma.cuh's inline PTX, which the emulation cannot run)
// tests LLMC_EMULATED, never CUEMU.
#ifdef CUEMU
#define LLMC_EMULATED 1
#else
#define LLMC_EMULATED 0
#endif

static inline void cuda_check_(cudaError_t err, const char* call, const char* file, int line) {
    if (err == cudaSuccess) return;
    fprintf(stderr,
            "[CUDA ERROR] %s:%d: %s failed: %s (%s)\n"
            "  next: errors from kernels surface at the next call, so rerun with CUDA_LAUNCH_BLOCKING=1 or under\n"
            "  compute-sanitizer to find the launch that failed; check the launch configuration (block <= 1024\n"
            "  threads, dynamic shared memory > 48 KiB needs cudaFuncSetAttribute), pointers passed to kernels\n"
            "  (device memory only) and free memory (nvidia-smi).\n",
            file, line, call, cudaGetErrorString(err), cudaGetErrorName(err));
    exit(1);
}
#define cudaCheck(call) cuda_check_((call), #call, __FILE__, __LINE__)

// NVTX ranges name the kernels inside them for a profiler (dev/gpu_check.sh's profile stage:
// ncu --nvtx, per phase and per layer). With no profiler attached NVTX's push and pop return at
// once (a null tool pointer), so the cost is the snprintf of the name: ~0.1 us, a few hundred
// times a step. Their results only report the nesting depth: not checked.
__attribute__((format(printf, 1, 2))) static inline void nvtx_push(const char* fmt, ...) {
#if LLMC_NVTX
    char name[48];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(name, sizeof(name), fmt, ap);
    va_end(ap);
    nvtxRangePushA(name);
#else
    (void)fmt;
#endif
}
static inline void nvtx_pop(void) {
#if LLMC_NVTX
    nvtxRangePop();
#endif
}

#define cublasCheck(call)                                                                                        \
    do {                                                                                                         \
        cublasStatus_t cublas_status_ = (call);                                                                  \
        if (cublas_status_ != CUBLAS_STATUS_SUCCESS) {                                                           \
            fprintf(stderr,                                                                                      \
                    "[cuBLAS ERROR] %s:%d: %s failed: %s (%d)\n"                                                 \
                    "  next: check the matrix layouts (rows, cols, leading dimension >= rows, column-major),\n"  \
                    "  the transposes, the data types, the epilogue and its bias/aux pointers and aux leading\n" \
                    "  dimension (a multiple of 8); run with CUBLASLT_LOG_LEVEL=5 for cuBLASLt's own reason.\n", \
                    __FILE__, __LINE__, #call, cublasLtGetStatusString(cublas_status_), (int)cublas_status_);    \
            exit(1);                                                                                             \
        }                                                                                                        \
    } while (0)

#define ncclCheck(call)                                                                                             \
    do {                                                                                                            \
        ncclResult_t nccl_result_ = (call);                                                                         \
        if (nccl_result_ != ncclSuccess) {                                                                          \
            fprintf(stderr,                                                                                         \
                    "[NCCL ERROR] %s:%d: %s failed: %s (%d)\n"                                                      \
                    "  next: rerun with NCCL_DEBUG=WARN (or INFO) for NCCL's reason; check that every rank calls\n" \
                    "  the same collectives in the same order with the same counts and types, that buffers are\n"   \
                    "  device memory, and that peers of grouped send/recv match.\n",                                \
                    __FILE__, __LINE__, #call, ncclGetErrorString(nccl_result_), (int)nccl_result_);                \
            exit(1);                                                                                                \
        }                                                                                                           \
    } while (0)

#ifdef CUEMU
#define LAUNCH_UNCHECKED(kernel, grid, block, smem, stream, ...) \
    ::cuemu::launch(kernel, #kernel, __FILE__, __LINE__, grid, block, smem, stream, ##__VA_ARGS__)
#define DYNAMIC_SMEM(T, name) T* const name = reinterpret_cast<T*>(::cuemu::dynamic_smem())
#else
#define LAUNCH_UNCHECKED(kernel, grid, block, smem, stream, ...) kernel<<<grid, block, smem, stream>>>(__VA_ARGS__)
#define DYNAMIC_SMEM(T, name) extern __shared__ __align__(16) T name[]
#endif

// GRID_STRIDE_CAP(g): the grid of a grid-stride kernel. Under the emulation the
// environment variable CUEMU_MAX_GRID=n lowers it to n (tests only), so that every
// block runs several rows and a barrier missing between two rows is exposed.
#ifdef CUEMU
#define GRID_STRIDE_CAP(g) ::cuemu::grid_cap(g)
#else
#define GRID_STRIDE_CAP(g) (g)
#endif

#define LAUNCH(kernel, grid, block, smem, stream, ...)                      \
    do {                                                                    \
        LAUNCH_UNCHECKED(kernel, grid, block, smem, stream, ##__VA_ARGS__); \
        cudaCheck(cudaGetLastError());                                      \
    } while (0)

// kernel<true> (16-byte accesses) when vec holds, else kernel<false>: the launch of a kernel
// templated on VEC, whose aligned and unaligned variants take the same arguments
#define LAUNCH_VEC(kernel, vec, grid, block, smem, stream, ...)              \
    do {                                                                     \
        if (vec)                                                             \
            LAUNCH(kernel<true>, grid, block, smem, stream, ##__VA_ARGS__);  \
        else                                                                 \
            LAUNCH(kernel<false>, grid, block, smem, stream, ##__VA_ARGS__); \
    } while (0)

#endif // LLMC_CUDA_COMMON_CUH
