// cuemu/include/nccl.h - CPU-emulation stand-in for NCCL's <nccl.h>: NCCL over MPI.
// Found first on the include path of emulated builds (-Idev/cuemu/include).
#pragma once
#ifndef CUEMU
#error "cuemu/include/nccl.h is the CPU emulation's header: it must not be on the include path of a real CUDA build"
#endif
#include "../impl/nccl.h"
