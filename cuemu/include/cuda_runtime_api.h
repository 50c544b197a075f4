// cuemu/include/cuda_runtime_api.h - CPU-emulation stand-in for CUDA's <cuda_runtime_api.h>: the runtime API.
// Found first on the include path of emulated builds (-Idev/cuemu/include).
#pragma once
#ifndef CUEMU
#error "cuemu/include/cuda_runtime_api.h is the CPU emulation's header: keep it off a real CUDA build's include path"
#endif
#include "../impl/runtime.h"
