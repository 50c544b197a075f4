/*
 * mma.cuh: the tensor-core building blocks of the tensor-core flash attention, as thin
 * wrappers around PTX (sm_80+): ldmatrix (8x8 bf16 tiles from shared memory into the
 * registers of a warp), mma.sync m16n8k16 (bf16 inputs, fp32 accumulation) and cp.async
 * (16- and 4-byte global -> shared copies that do not block the issuing thread).
 * Under the CPU emulation (LLMC_EMULATED, from cuda_common.cuh) each wrapper has a plain-CUDA branch that reproduces
 * the PTX register layout exactly (lanes exchange row addresses and operand registers with
 * __shfl_sync), so the kernels that use them run, and are checked, on the CPU; and
 * tests/cuda/test_attention.cu checks these wrappers against a direct matrix product.
 *
 * Register layouts (PTX ISA, "Matrix fragments for mma.m16n8k16"), lane l, g = l / 4,
 * q = l % 4; a 32-bit register holds two bf16, the lower column / row in the low half:
 *   A (16 x 16, row-major)  a[0] = A[g][2q..2q+1]     a[1] = A[g+8][2q..2q+1]
 *                           a[2] = A[g][2q+8..2q+9]   a[3] = A[g+8][2q+8..2q+9]
 *   B (16 x 8, k x n)       b0 = B[2q..2q+1][g]       b1 = B[2q+8..2q+9][g]
 *   C (16 x 8, fp32)        c[0], c[1] = C[g][2q], C[g][2q+1]; c[2], c[3] = C[g+8][2q..2q+1]
 * ldmatrix .x4: lanes 8i .. 8i+7 give the row addresses of 8x8 matrix i (16-byte aligned rows
 * in shared memory); r[i] of lane l = M_i[g][2q..2q+1], with .trans M_i[2q..2q+1][g] (the
 * matrix read transposed). So C's layout is A's for two 8-column halves: the accumulators of
 * two neighbouring 16 x 8 products, rounded pairwise to bf16, are an A operand (pack_bf16x2).
 *
 * All wrappers except the cp.async ones are warp-collective (all 32 lanes, converged).
 */
#ifndef LLMC_MMA_CUH
#define LLMC_MMA_CUH

#include "cuda_utils.cuh"

// two floats as a bf16 pair (lo in the low half), each rounded to nearest even like to_bf
__device__ __forceinline__ uint32_t pack_bf16x2(float lo, float hi) {
    __nv_bfloat162 v = __floats2bfloat162_rn(lo, hi);
    uint32_t r;
    memcpy(&r, &v, 4);
    return r;
}

#if !LLMC_EMULATED // data movement; dev/cuda/resources.py's "emulation" mutant turns this branch off

// the 32-bit shared-window address PTX's .shared instructions take
__device__ __forceinline__ uint32_t smem_u32(const void* p) { return (uint32_t)__cvta_generic_to_shared(p); }

// r[i] = matrix i of the four 8x8 tiles whose rows this lane's p addresses (lanes 8i..8i+7)
__device__ __forceinline__ void ldsm_x4(uint32_t (&r)[4], const bf16* p) {
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];\n"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                 : "r"(smem_u32(p))
                 : "memory");
}

// the same four tiles, each transposed
__device__ __forceinline__ void ldsm_x4_trans(uint32_t (&r)[4], const bf16* p) {
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];\n"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                 : "r"(smem_u32(p))
                 : "memory");
}

// 16 bytes global -> shared without waiting (L2 only, .cg); !valid: the 16 bytes are zeroed
// and nothing is read (src must still be a valid address)
__device__ __forceinline__ void cp_async16(void* dst, const void* src, bool valid) {
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n"
                 :
                 : "r"(smem_u32(dst)), "l"(src), "r"(valid ? 16 : 0)
                 : "memory");
}

// 4 bytes (one float) the same way (.ca: 4-byte copies cannot bypass L1)
__device__ __forceinline__ void cp_async4(void* dst, const void* src, bool valid) {
    asm volatile("cp.async.ca.shared.global [%0], [%1], 4, %2;\n"
                 :
                 : "r"(smem_u32(dst)), "l"(src), "r"(valid ? 4 : 0)
                 : "memory");
}

// closes the group of this thread's cp.async issued since the last commit
__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;\n" ::: "memory"); }

// waits until at most N of this thread's committed groups are still in flight (then a
// __syncthreads makes every thread's copies visible to the block)
template <int N>
__device__ __forceinline__ void cp_async_wait() {
    asm volatile("cp.async.wait_group %0;\n" ::"n"(N) : "memory");
}

#else // emulated: the same semantics in plain CUDA (valid CUDA too: the SASS check's mutant builds
      // it for the GPU and must see it flagged)

__device__ __forceinline__ void ldsm_check(const bf16* p) {
    if (((uintptr_t)p % 16) != 0) {
        printf("mma.cuh: ldmatrix row address %p not 16-byte aligned\n", (const void*)p);
        __trap();
    }
}

__device__ __forceinline__ uint32_t bf16_bits(const bf16* p) {
    uint16_t u;
    memcpy(&u, p, 2);
    return u;
}

// the row address lane src gave (shuffled as an integer: CUDA has no pointer shuffle)
__device__ __forceinline__ const bf16* ldsm_row(const bf16* p, int src) {
    unsigned long long a = __shfl_sync(0xffffffffu, (unsigned long long)(uintptr_t)p, src);
    return (const bf16*)(uintptr_t)a;
}

// row addresses come from lanes 8i + row; lane l reads its two elements of each tile
__device__ __forceinline__ void ldsm_x4_(uint32_t (&r)[4], const bf16* p, bool trans) {
    ldsm_check(p);
    int lane = threadIdx.x % WARP;
    int g = lane / 4;
    int q = lane % 4;
    for (int i = 0; i < 4; i++) {
        if (!trans) { // M_i[g][2q], M_i[g][2q+1]: consecutive in row g
            const bf16* row = ldsm_row(p, 8 * i + g);
            r[i] = bf16_bits(row + 2 * q) | bf16_bits(row + 2 * q + 1) << 16;
        } else { // M_i[2q][g], M_i[2q+1][g]: column g of two rows
            const bf16* r0 = ldsm_row(p, 8 * i + 2 * q);
            const bf16* r1 = ldsm_row(p, 8 * i + 2 * q + 1);
            r[i] = bf16_bits(r0 + g) | bf16_bits(r1 + g) << 16;
        }
    }
}
__device__ __forceinline__ void ldsm_x4(uint32_t (&r)[4], const bf16* p) { ldsm_x4_(r, p, false); }
__device__ __forceinline__ void ldsm_x4_trans(uint32_t (&r)[4], const bf16* p) { ldsm_x4_(r, p, true); }

// cp.async: each thread queues its copies and makes them at the cp.async.wait_group that
// retires their group, the latest moment hardware may. So a read of a destination before its
// wait (a missing or too weak wait_group) sees the old bytes and fails the numeric checks, and
// the race detector sees the write at the wait: a missing __syncthreads after it is reported.
// Blocks run one after another under the emulation, so one queue per thread slot suffices.
#define CP_ASYNC_QUEUE 256
struct CpAsyncCopy {
    char* dst;
    const char* src; // NULL: zero-fill
    int bytes;       // 16 or 4
    int group;       // index of the commit group it belongs to
};
struct CpAsyncQueue {
    unsigned long long launch; // the launch and block the queue belongs to: a new block, or a
    unsigned long long block;  // block of a later launch, starts with an empty queue
    int n;                     // copies queued, in issue order
    int committed;             // groups committed: copies issued now belong to group `committed`
    CpAsyncCopy q[CP_ASYNC_QUEUE];
};
__device__ CpAsyncQueue cp_async_queues[1024]; // one per thread slot of the running block

__device__ __forceinline__ CpAsyncQueue& cp_async_queue() {
#if LLMC_EMULATED
    unsigned long long launch = ::cuemu::ex().launches;
    unsigned long long block = ::cuemu::ex().block_linear;
#else // only the SASS check's mutant builds this branch for the GPU, and never runs it
    unsigned long long launch = 0;
    unsigned long long block = blockIdx.x + (unsigned long long)gridDim.x * (blockIdx.y + gridDim.y * blockIdx.z);
#endif
    int t = threadIdx.x + blockDim.x * (threadIdx.y + blockDim.y * threadIdx.z);
    CpAsyncQueue& s = cp_async_queues[t];
    if (s.launch != launch || s.block != block) { // copies a block left in flight end with it
        s.launch = launch;
        s.block = block;
        s.n = 0;
        s.committed = 0;
    }
    return s;
}

__device__ __forceinline__ void cp_async_(void* dst, const void* src, bool valid, int bytes) {
    if (((uintptr_t)dst % bytes) != 0 || ((uintptr_t)src % bytes) != 0) {
        printf("mma.cuh: cp.async %d-byte copy %p <- %p not %d-byte aligned\n", bytes, dst, src, bytes);
        __trap();
    }
    CpAsyncQueue& s = cp_async_queue();
    if (s.n == CP_ASYNC_QUEUE) {
        printf("mma.cuh: more than %d cp.async copies of one thread in flight\n", CP_ASYNC_QUEUE);
        __trap();
    }
    CpAsyncCopy& c = s.q[s.n];
    c.dst = (char*)dst;
    c.src = valid ? (const char*)src : NULL;
    c.bytes = bytes;
    c.group = s.committed;
    s.n++;
}
__device__ __forceinline__ void cp_async16(void* dst, const void* src, bool valid) { cp_async_(dst, src, valid, 16); }
__device__ __forceinline__ void cp_async4(void* dst, const void* src, bool valid) { cp_async_(dst, src, valid, 4); }
__device__ __forceinline__ void cp_async_commit() { cp_async_queue().committed++; }

// makes the copies of every group but the newest N (in issue order); copies not yet
// committed to a group are not waited for (as in PTX)
template <int N>
__device__ __forceinline__ void cp_async_wait() {
    CpAsyncQueue& s = cp_async_queue();
    int keep = 0;
    for (int i = 0; i < s.n; i++) {
        CpAsyncCopy c = s.q[i];
        if (c.group >= s.committed - N) { // still in flight
            s.q[keep] = c;
            keep++;
        } else if (c.bytes == 16) {
            uint4 v = make_uint4(0u, 0u, 0u, 0u);
            if (c.src) v = *reinterpret_cast<const uint4*>(c.src);
            *reinterpret_cast<uint4*>(c.dst) = v;
        } else {
            float v = 0.0f;
            if (c.src) v = *reinterpret_cast<const float*>(c.src);
            *reinterpret_cast<float*>(c.dst) = v;
        }
    }
    s.n = keep;
}

#endif

#if !LLMC_EMULATED // the product

// c (16 x 8) += a (16 x 16) b (16 x 8)
__device__ __forceinline__ void mma_16816(float (&c)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1) {
    asm volatile(
        "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 "
        "{%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};\n"
        : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

#else // emulated

// a bf16 is the top half of an fp32
__device__ __forceinline__ float bits_to_float(uint32_t v) {
    float f;
    memcpy(&f, &v, 4);
    return f;
}
__device__ __forceinline__ float bf16_lo(uint32_t v) { return bits_to_float(v << 16); }
__device__ __forceinline__ float bf16_hi(uint32_t v) { return bits_to_float(v & 0xffff0000u); }

// lane l computes C[g][2q..2q+1] and C[g+8][2q..2q+1]: it needs rows g, g+8 of A (in lanes
// 4g .. 4g+3) and columns 2q, 2q+1 of B (lanes 8q .. 8q+3 and 8q+4 .. 8q+7); registers
// travel in pairs (64-bit shuffles) to halve the warp exchanges
__device__ __forceinline__ void mma_16816(float (&c)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1) {
    int lane = threadIdx.x % WARP;
    int g = lane / 4;
    int q = lane % 4;
    unsigned long long a01 = a[0] | (unsigned long long)a[1] << 32;
    unsigned long long a23 = a[2] | (unsigned long long)a[3] << 32;
    unsigned long long b01 = b0 | (unsigned long long)b1 << 32;
    float arow[2][16];            // rows g, g+8 of A
    float bcol[2][16];            // columns 2q, 2q+1 of B
    for (int j = 0; j < 4; j++) { // lane 4g + j holds k = 2j, 2j+1 (a[0], a[1]) and 2j+8, 2j+9 (a[2], a[3])
        unsigned long long lo = __shfl_sync(0xffffffffu, a01, 4 * g + j);
        unsigned long long hi = __shfl_sync(0xffffffffu, a23, 4 * g + j);
        for (int h = 0; h < 2; h++) { // h: row g or g + 8
            uint32_t vlo = (uint32_t)(lo >> (32 * h));
            uint32_t vhi = (uint32_t)(hi >> (32 * h));
            arow[h][2 * j] = bf16_lo(vlo);
            arow[h][2 * j + 1] = bf16_hi(vlo);
            arow[h][2 * j + 8] = bf16_lo(vhi);
            arow[h][2 * j + 9] = bf16_hi(vhi);
        }
        for (int n = 0; n < 2; n++) { // lane 4 (2q + n) + j holds column 2q + n, k = 2j, 2j+1, 2j+8, 2j+9
            unsigned long long v = __shfl_sync(0xffffffffu, b01, 4 * (2 * q + n) + j);
            bcol[n][2 * j] = bf16_lo((uint32_t)v);
            bcol[n][2 * j + 1] = bf16_hi((uint32_t)v);
            bcol[n][2 * j + 8] = bf16_lo((uint32_t)(v >> 32));
            bcol[n][2 * j + 9] = bf16_hi((uint32_t)(v >> 32));
        }
    }
    for (int e = 0; e < 4; e++) {
        float s = c[e];
        for (int k = 0; k < 16; k++) s += arow[e / 2][k] * bcol[e % 2][k];
        c[e] = s;
    }
}

#endif

#endif // LLMC_MMA_CUH
