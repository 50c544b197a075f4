// cuemu/cuemu.h - forced include of the CPU emulation of CUDA (test-only,
// never linked into the product). Compile a .cu file unchanged with
//   g++ -std=c++17 -x c++ -DCUEMU -Idev/cuemu/include -include cuemu/cuemu.h file.cu
// (mpicxx instead of g++ when it uses NCCL). It brings in what nvcc makes
// implicit (the runtime API, kernel qualifiers and builtins, bf16); <cublasLt.h>
// and <nccl.h> come from cuemu/include when the file includes them.
// See cuemu/README.md for what is covered and how kernels must be written.
#pragma once
#ifndef CUEMU
#define CUEMU 1
#endif
#include "impl/runtime.h"
#include "impl/bf16.h"

// nvcc defines __CUDACC__ for .cu files; code that tests it expects CUDA syntax,
// which the emulation accepts. __CUDA_ARCH__ stays undefined: there is a single
// (host) compilation pass, so `#ifdef __CUDA_ARCH__` selects the host branch.
#ifndef __CUDACC__
#define __CUDACC__ 1
#endif
#define CUEMU_ARCH 900

// Inline PTX cannot run on the CPU: any `asm` in code compiled after this point
// stops the build here. Keep inline PTX behind `#ifndef CUEMU` with a plain-CUDA
// fallback in the #else branch. (System headers use __asm__, which stays valid.)
#ifndef CUEMU_ALLOW_ASM
#define asm                                                                                                        \
    static_assert(                                                                                                 \
        false,                                                                                                     \
        "inline PTX (asm) cannot be emulated on the CPU: put it behind #ifndef CUEMU with a plain-CUDA fallback"); \
    (void)
#endif
