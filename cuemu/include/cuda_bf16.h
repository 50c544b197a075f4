// cuemu/include/cuda_bf16.h - CPU-emulation stand-in for CUDA's <cuda_bf16.h>: __nv_bfloat16 and its conversions.
// Found first on the include path of emulated builds (-Idev/cuemu/include).
#pragma once
#ifndef CUEMU
#error \
    "cuemu/include/cuda_bf16.h is the CPU emulation's header: it must not be on the include path of a real CUDA build"
#endif
#include "../impl/bf16.h"
