// cuemu/include/cuda_profiler_api.h - CPU-emulation stand-in for CUDA's <cuda_profiler_api.h>:
// there is no profiler to start or stop, so both calls succeed; in the cost-model build they bound what
// CUEMU_COST_FROM_START=0 counts (cuemu/impl/cost.h), as ncu's --profile-from-start off.
#pragma once
#ifndef CUEMU
#error "cuemu/include/cuda_profiler_api.h is the CPU emulation's header: keep it off a real CUDA build's include path"
#endif
#include "cuda_runtime.h"
static inline cudaError_t cudaProfilerStart(void) {
    CUEMU_COST_HOOK(cost_profiler(true));
    return cudaSuccess;
}
static inline cudaError_t cudaProfilerStop(void) {
    CUEMU_COST_HOOK(cost_profiler(false));
    return cudaSuccess;
}
