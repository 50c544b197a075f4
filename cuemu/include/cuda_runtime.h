// cuemu/include/cuda_runtime.h - CPU-emulation stand-in for CUDA's <cuda_runtime.h>: the runtime API, kernel builtins
// and intrinsics. Found first on the include path of emulated builds (-Idev/cuemu/include).
#pragma once
#ifndef CUEMU
#error "cuemu/include/cuda_runtime.h is the CPU emulation's header: keep it off a real CUDA build's include path"
#endif
#include "../impl/runtime.h"
