// cuemu/include/cuda_profiler_api.h - CPU-emulation stand-in for CUDA's <cuda_profiler_api.h>:
// there is no profiler to start or stop, so both calls succeed and do nothing.
#pragma once
#ifndef CUEMU
#error "cuemu/include/cuda_profiler_api.h is the CPU emulation's header: keep it off a real CUDA build's include path"
#endif
#include "cuda_runtime.h"
static inline cudaError_t cudaProfilerStart(void) { return cudaSuccess; }
static inline cudaError_t cudaProfilerStop(void) { return cudaSuccess; }
