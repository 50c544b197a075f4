// cuemu/include/cublasLt.h - CPU-emulation stand-in for CUDA's <cublasLt.h>: cuBLASLt matmul computed on the CPU.
// Found first on the include path of emulated builds (-Idev/cuemu/include).
#pragma once
#ifndef CUEMU
#error "cuemu/include/cublasLt.h is the CPU emulation's header: it must not be on the include path of a real CUDA build"
#endif
#include "../impl/cublaslt.h"
