/*
 * llmc/cuda/attention_cudnn.h - causal self-attention through cuDNN's fused flash attention
 * (the cuDNN frontend graph API, `sdpa` and `sdpa_backward`), with the same buffers as the
 * project's own kernels in attention.cuh / attention_tc.cuh, so the trainer selects it by
 * the same switch and everything around it (layouts, recompute, checkpoints) is shared:
 *
 *   qkv  (B, T, 3*Cl) bf16, [Q | K | V], head h at dims [h*hs, (h+1)*hs) of each block
 *   out  (B, T, Cl)   bf16
 *   lse  (B, NH, T)   fp32, log-sum-exp of the scaled scores (natural log), cuDNN's "Stats"
 *   dqkv (B, T, 3*Cl) bf16, written (not accumulated)
 *
 * Q, K and V are strided views into qkv (no copy), as are dQ, dK, dV into dqkv.
 * The graphs are built once per (B, T) and cached in the context; the workspace is sized
 * at creation for the largest graph and never reallocated inside a step. Backward asks
 * cuDNN for its deterministic algorithm first (so runs repeat bit for bit) and takes the
 * fastest one only if cuDNN has no deterministic engine for the shape; the start-up table
 * says which. Everything is compiled only with USE_CUDNN (the build finds cuDNN and the
 * frontend headers by itself, dev/cuda/cuda.mk); the CPU emulation never compiles it
 * (cuDNN does not run on a CPU), so there the own kernels run behind the same interface.
 *
 * Implementation in attention_cudnn.cpp: a separate translation unit, because the
 * header-only frontend is heavy C++ and would otherwise double the trainer's compile time.
 */
#ifndef LLMC_ATTENTION_CUDNN_H
#define LLMC_ATTENTION_CUDNN_H

#include <stddef.h>
#include <cuda_runtime.h>

typedef struct CudnnAttn CudnnAttn;

// Builds forward and backward graphs for one shape. Returns NULL when cuDNN cannot run it
// (head size, GPU, cuDNN version), with the reason in why[n]; the caller falls back to
// its own kernels. Exits with a message on a real error (a failed CUDA or cuDNN call).
CudnnAttn* cudnn_attn_create(int B, int T, int NH, int hs, cudaStream_t stream, char* why, size_t n);
// out (B,T,Cl), lse (B,NH,T) from qkv (B,T,3Cl)
void cudnn_attn_forward(CudnnAttn* ca, void* out, float* lse, const void* qkv, cudaStream_t stream);
// dqkv (B,T,3Cl) from dout (B,T,Cl) and the forward's out, qkv, lse
void cudnn_attn_backward(CudnnAttn* ca, void* dqkv, const void* dout, const void* out, const void* qkv,
                         const float* lse, cudaStream_t stream);
// 1 when the backward graph uses cuDNN's deterministic algorithm
int cudnn_attn_deterministic(const CudnnAttn* ca);
size_t cudnn_attn_workspace_bytes(const CudnnAttn* ca);
// cuDNN library version (e.g. 91900) for the start-up table
size_t cudnn_attn_version(void);
void cudnn_attn_destroy(CudnnAttn* ca);

#endif // LLMC_ATTENTION_CUDNN_H
