// cuemu/impl/kernel.h - kernel execution: every thread of a block is a
// cooperative user-space fiber with its own stack; __syncthreads() is a real
// barrier over the block's fibers; warp intrinsics exchange values between the
// lanes that actually meet at the call (true 32-lane semantics); the order in
// which fibers run between two barriers is shuffled (seeded, deterministic) so
// that a missing barrier gives wrong results instead of passing by luck.
// Also: threadIdx/blockIdx/blockDim/gridDim, __shared__, atomics, device math.
// Test-only: part of the CPU emulation of CUDA, never linked into the product.
#pragma once
#include "base.h"
#include "detect.h"
#include "cost.h"
#include "streams.h"
#include "resources.h"
#include <csignal>
#include <numeric>
#include <sys/mman.h>
#include <unistd.h>

#if defined(__x86_64__) && !defined(CUEMU_UCONTEXT)
#define CUEMU_ASM_SWITCH 1
#else
#define CUEMU_ASM_SWITCH 0
#include <ucontext.h>
#endif

// ---------------------------------------------------------------- qualifiers
#define __global__
#define __device__
#define __host__
#define __constant__
#define __managed__
#define __grid_constant__
// Empty on purpose: libstdc++ writes __attribute__((__noinline__)), which must stay valid.
#define __noinline__
#define __forceinline__ __inline__ __attribute__((always_inline))
#define __launch_bounds__(...)
#define __align__(n) __attribute__((aligned(n)))
#define __builtin_align__(n) __attribute__((aligned(n)))
#define __cudart_builtin__
#define __device_builtin__
// __shared__ variables have static storage: one instance per kernel (or per
// __device__ function), shared by all threads of the block that is running.
// That is exactly CUDA's meaning because the emulation runs the blocks of a
// launch strictly one after another (and launches one at a time, under a lock):
// two blocks never overlap, so they never see each other's shared memory. Like on
// the GPU, a block finds whatever the previous block left there (static storage
// starts at zero; the GPU gives garbage).
// `extern __shared__ T name[];` cannot be expressed with this macro (C++ forbids
// `extern static`): declare dynamic shared memory with DYNAMIC_SMEM(T, name) from
// llmc/cuda/cuda_common.cuh, which is exactly `extern __shared__` under nvcc.
#define __shared__ static

// CUDA builtin variables. The scheduler writes threadIdx before it resumes a
// fiber; every switch goes through an opaque call, so a kernel always reads the
// value of the thread it runs as.
inline uint3 threadIdx;
inline uint3 blockIdx;
inline dim3 blockDim;
inline dim3 gridDim;
constexpr int warpSize = 32;

// ---------------------------------------------------------------- context switch
#if CUEMU_ASM_SWITCH
// cuemu_ctx_switch(save, next): push callee-saved registers, MXCSR and the x87
// control word on the current stack, store the stack pointer in *save, load
// `next` and pop the same from there. MXCSR and the control word are loaded only
// when they differ from the running ones: both loads stall the pipeline, and no
// emulated thread changes them, so they were most of a switch's time. The symbols
// are local to each object file (no .globl), so every translation unit has its own
// copy and nothing clashes.
__asm__(
    ".text\n"
    ".p2align 4\n"
    ".type cuemu_ctx_switch, @function\n"
    "cuemu_ctx_switch:\n"
    "  pushq %rbp\n"
    "  pushq %rbx\n"
    "  pushq %r12\n"
    "  pushq %r13\n"
    "  pushq %r14\n"
    "  pushq %r15\n"
    "  subq $8, %rsp\n"
    "  stmxcsr (%rsp)\n"
    "  fnstcw 4(%rsp)\n"
    "  movl (%rsp), %eax\n"
    "  movzwl 4(%rsp), %edx\n"
    "  movq %rsp, (%rdi)\n"
    "  movq %rsi, %rsp\n"
    "  cmpl (%rsp), %eax\n"
    "  je 1f\n"
    "  ldmxcsr (%rsp)\n"
    "1:\n"
    "  cmpw 4(%rsp), %dx\n"
    "  je 2f\n"
    "  fldcw 4(%rsp)\n"
    "2:\n"
    "  addq $8, %rsp\n"
    "  popq %r15\n"
    "  popq %r14\n"
    "  popq %r13\n"
    "  popq %r12\n"
    "  popq %rbx\n"
    "  popq %rbp\n"
    "  ret\n"
    ".size cuemu_ctx_switch, .-cuemu_ctx_switch\n"
    ".p2align 4\n"
    ".type cuemu_ctx_trampoline, @function\n"
    "cuemu_ctx_trampoline:\n"
    "  movq %r12, %rdi\n"
    "  callq *%r13\n"
    "  ud2\n"
    ".size cuemu_ctx_trampoline, .-cuemu_ctx_trampoline\n");
extern "C" void cuemu_ctx_switch(void** save_sp, void* next_sp);
extern "C" void cuemu_ctx_trampoline();
#endif

namespace cuemu {

enum FiberState { F_PARKED = 0, F_RUNNABLE, F_WAIT_BAR, F_WAIT_WARP, F_DONE };
enum BarKind { BAR_PLAIN = 0, BAR_COUNT, BAR_AND, BAR_OR };
enum CollKind {
    C_SHFL_IDX = 0,
    C_SHFL_UP,
    C_SHFL_DOWN,
    C_SHFL_XOR,
    C_BALLOT,
    C_ANY,
    C_ALL,
    C_SYNCWARP,
    C_MATCH_ANY,
    C_RED_ADD,
    C_RED_MIN_U,
    C_RED_MAX_U,
    C_RED_MIN_S,
    C_RED_MAX_S,
    C_RED_AND,
    C_RED_OR,
    C_RED_XOR
};
inline const char* coll_name(int k) {
    static const char* names[] = {"__shfl_sync",       "__shfl_up_sync",    "__shfl_down_sync",  "__shfl_xor_sync",
                                  "__ballot_sync",     "__any_sync",        "__all_sync",        "__syncwarp",
                                  "__match_any_sync",  "__reduce_add_sync", "__reduce_min_sync", "__reduce_max_sync",
                                  "__reduce_min_sync", "__reduce_max_sync", "__reduce_and_sync", "__reduce_or_sync",
                                  "__reduce_xor_sync"};
    return (k >= 0 && k <= C_RED_XOR) ? names[k] : "?";
}

struct Fiber {
    void* sp = nullptr;
#if !CUEMU_ASM_SWITCH
    ucontext_t uc;
#endif
    char* mem = nullptr; // mapping: guard page + stack
    size_t mem_size = 0;
    uint3 tid{0, 0, 0};
    int linear = 0, lane = 0, warp = 0;
    uint64_t xval = 0, xres = 0; // warp collective: my contribution / my result
    int xarg = 0, xwidth = 32;
    int bar_kind = 0, bar_pred = 0, bar_res = 0;
    uint32_t wgen = 0; // generation of the last __syncwarp this lane took part in (detect.h)
};
struct Coll {
    uint32_t mask;
    int kind;
    uint32_t arrived;
};
struct Warp {
    uint32_t exist = 0, live = 0;
    int ncoll = 0;
    uint32_t sync_gen = 0;
    Coll coll[32];
};

struct Exec {
    std::vector<Fiber*> fibers;
    size_t page = 4096;
    void* sched_sp = nullptr;
#if !CUEMU_ASM_SWITCH
    ucontext_t sched_uc;
#endif
    Fiber* cur = nullptr;
    bool in_kernel = false;
    int nthreads = 0, live = 0, at_bar = 0;
    std::vector<Warp> warps;
    std::vector<int> order;     // this barrier interval's run order of the block's threads
    std::vector<uint8_t> state; // FiberState of each thread, by linear index: scanned at every switch
    int pos = 0;                // position in `order` of the thread running now (or last run)
    unsigned long long block_linear = 0;
    unsigned interval = 0;
    void (*body)(void*) = nullptr;
    void* body_ctx = nullptr;
    const char* kname = "";
    const char* kfile = "";
    int kline = 0;
    char* dyn = nullptr;
    size_t dyn_cap = 0, dyn_size = 0;
    std::map<const void*, int> max_dyn_smem; // cudaFuncSetAttribute(MaxDynamicSharedMemorySize)
    std::mutex launch_mu;
    unsigned long long launches = 0;
    cudaError_t last_error = cudaSuccess;
    bool segv_installed = false;
};
inline Exec& ex() {
    static Exec e;
    return e;
}

inline void kernel_context(char* buf, size_t n) {
    Exec& e = ex();
    if (!e.in_kernel) {
        snprintf(buf, n, "(host code)");
        return;
    }
    Fiber* f = e.cur;
    if (!f) {
        snprintf(buf, n, "kernel %s launched at %s:%d, block (%u,%u,%u)", e.kname, e.kfile, e.kline, blockIdx.x,
                 blockIdx.y, blockIdx.z);
        return;
    }
    snprintf(buf, n, "kernel %s launched at %s:%d, block (%u,%u,%u), thread (%u,%u,%u)", e.kname, e.kfile, e.kline,
             blockIdx.x, blockIdx.y, blockIdx.z, f->tid.x, f->tid.y, f->tid.z);
}

[[noreturn]] inline void die(const char* fmt, ...) {
    char msg[1024], ctx[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    kernel_context(ctx, sizeof ctx);
    fflush(stdout);
    fprintf(stderr,
            "cuemu: FATAL: %s\n  in %s\n  (this is undefined behaviour or a hang on a real GPU; fix the code)\n", msg,
            ctx);
    fflush(stderr);
    abort();
}

// For the race reports of detect.h.
inline void thread_desc(int linear, char* buf, size_t n) {
    if (linear < 0) {
        snprintf(buf, n, "another thread");
        return;
    }
    unsigned bx = blockDim.x, by = blockDim.y, i = (unsigned)linear;
    snprintf(buf, n, "thread (%u,%u,%u) of block (%u,%u,%u)", i % bx, (i / bx) % by, i / (bx * by), blockIdx.x,
             blockIdx.y, blockIdx.z);
}
[[noreturn]] inline void race_die(const char* msg) { die("%s", msg); }

inline void set_error(cudaError_t err) {
    if (err != cudaSuccess) ex().last_error = err;
}

// ---------------------------------------------------------------- fibers
inline void fiber_main(Fiber* f);

inline void segv_handler(int sig, siginfo_t* si, void*) {
    Exec& e = ex();
    char ctx[512];
    kernel_context(ctx, sizeof ctx);
    uintptr_t a = (uintptr_t)si->si_addr;
    bool overflow = false;
    for (Fiber* f : e.fibers)
        if (a >= (uintptr_t)f->mem && a < (uintptr_t)f->mem + e.page) overflow = true;
    char msg[1024];
    if (overflow)
        snprintf(msg, sizeof msg,
                 "cuemu: stack overflow of an emulated GPU thread in %s: raise CUEMU_STACK_KB (now %zu)\n", ctx,
                 config().stack_bytes / 1024);
    else if (e.in_kernel)
        snprintf(msg, sizeof msg, "cuemu: segmentation fault at %p in %s (an out-of-bounds access in the kernel?)\n",
                 si->si_addr, ctx);
    else
        snprintf(msg, sizeof msg, "cuemu: segmentation fault at %p in host code\n", si->si_addr);
    ssize_t ignored = write(2, msg, strlen(msg));
    (void)ignored;
    signal(sig, SIG_DFL);
    raise(sig);
}

inline void install_segv_handler() {
    Exec& e = ex();
    if (e.segv_installed) return;
    e.segv_installed = true;
    struct sigaction old;
    if (sigaction(SIGSEGV, nullptr, &old) != 0 || old.sa_handler != SIG_DFL) return; // someone else owns it
    static char altstack[64 * 1024];
    stack_t ss;
    ss.ss_sp = altstack;
    ss.ss_size = sizeof altstack;
    ss.ss_flags = 0;
    sigaltstack(&ss, nullptr);
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_sigaction = segv_handler;
    sa.sa_flags = SA_SIGINFO | SA_ONSTACK;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGSEGV, &sa, nullptr);
}

#if !CUEMU_ASM_SWITCH
inline void fiber_entry_uc() { fiber_main(ex().cur); }
#endif

inline Fiber* new_fiber() {
    Exec& e = ex();
    Fiber* f = new Fiber();
    size_t page = e.page;
    size_t stack = (config().stack_bytes + page - 1) / page * page;
    f->mem_size = stack + page;
    void* m = mmap(nullptr, f->mem_size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (m == MAP_FAILED) die("cannot map a %zu-byte fiber stack", f->mem_size);
    f->mem = (char*)m;
    mprotect(f->mem, page, PROT_NONE); // guard page below the stack
#if CUEMU_ASM_SWITCH
    // Stacks are a whole number of pages apart: without an offset every fiber's hot top-of-stack
    // lines would fall into the same few L1 sets and evict each other at every switch.
    size_t color = (e.fibers.size() % 64) * 64;
    uintptr_t top = ((uintptr_t)(f->mem + f->mem_size - color)) & ~(uintptr_t)15;
    uint64_t* sp = (uint64_t*)(top - 80); // 16-byte aligned; see cuemu_ctx_switch
    unsigned int mxcsr = __builtin_ia32_stmxcsr();
    unsigned short fpcw;
    __asm__ volatile("fnstcw %0" : "=m"(fpcw));
    sp[0] = (uint64_t)mxcsr | ((uint64_t)fpcw << 32);
    sp[1] = 0;                                          // r15
    sp[2] = 0;                                          // r14
    sp[3] = (uint64_t)(uintptr_t)&fiber_main;           // r13: function the trampoline calls
    sp[4] = (uint64_t)(uintptr_t)f;                     // r12: its argument
    sp[5] = 0;                                          // rbx
    sp[6] = 0;                                          // rbp
    sp[7] = (uint64_t)(uintptr_t)&cuemu_ctx_trampoline; // return address
    sp[8] = sp[9] = 0;
    f->sp = sp;
#else
    getcontext(&f->uc);
    f->uc.uc_stack.ss_sp = f->mem + page;
    f->uc.uc_stack.ss_size = stack;
    f->uc.uc_link = nullptr;
    makecontext(&f->uc, (void (*)())fiber_entry_uc, 0);
#endif
    return f;
}

// The bookkeeping for running thread f, done by whoever switches to it: the scheduler or
// the thread that blocks before it.
CUEMU_NOTSAN inline void enter(Exec& e, Fiber* f) {
    e.cur = f;
    threadIdx = f->tid;
    Detect& d = det();
    d.tid = f->linear;
    d.warp = f->warp;
    d.wgen = f->wgen;
    d.klo = (uintptr_t)f->mem;
    d.khi = (uintptr_t)f->mem + f->mem_size;
    CUEMU_COST_HOOK(cost_fiber(f->warp, f->lane));
}

// The next runnable thread after position e.pos of this pass's order (and it becomes the
// position), or null when the pass is over.
CUEMU_NOTSAN inline Fiber* next_runnable(Exec& e) {
    for (int k = e.pos + 1; k < e.nthreads; k++)
        if (e.state[e.order[k]] == F_RUNNABLE) {
            e.pos = k;
            return e.fibers[e.order[k]];
        }
    e.pos = e.nthreads;
    return nullptr;
}

// Scheduler: one pass over the order, running every thread that is runnable when its turn
// comes. The threads hand over to each other directly (yield); the last one returns here.
// False when no thread could run.
inline bool run_pass(Exec& e) {
    e.pos = -1;
    Fiber* f = next_runnable(e);
    if (!f) return false;
    enter(e, f);
    t_active = det().active;
#if CUEMU_ASM_SWITCH
    cuemu_ctx_switch(&e.sched_sp, f->sp);
#else
    swapcontext(&e.sched_uc, &f->uc);
#endif
    t_active = false;
    return true;
}
// Thread f blocks (warp collective, barrier, exit): on to the next runnable thread of the
// pass, or back to the scheduler. The same order as returning to the scheduler each time,
// at half the switches.
CUEMU_NOTSAN inline void yield(Fiber* f) {
    Exec& e = ex();
    Fiber* g = next_runnable(e);
    if (g) enter(e, g);
#if CUEMU_ASM_SWITCH
    cuemu_ctx_switch(&f->sp, g ? g->sp : e.sched_sp);
#else
    swapcontext(&f->uc, g ? &g->uc : &e.sched_uc);
#endif
}

CUEMU_NOTSAN inline Fiber* current(const char* what) {
    Exec& e = ex();
    if (!e.in_kernel || !e.cur) die("%s called outside a kernel (host code cannot use device intrinsics)", what);
    return e.cur;
}

// ---------------------------------------------------------------- warp collectives
inline uint64_t poison_bits() { return ~0ull; } // NaN for float/double/bf16, -1 for integers

// All lanes named in the collective's mask that are still alive have arrived?
// Then compute every participant's result and wake them.
CUEMU_NOTSAN inline bool try_complete(Exec& e, int warp, int ci) {
    Warp& w = e.warps[warp];
    Coll c = w.coll[ci];
    uint32_t need = c.mask & w.live;
    if ((c.arrived & need) != need) return false;
    Fiber** lanes = &e.fibers[(size_t)warp * 32];
    uint32_t in = c.arrived;
    // Only lanes that exist can be looked at: `in` holds arrived (hence existing) lanes.
    auto val = [&](int j) -> uint64_t { return (in >> j) & 1u ? lanes[j]->xval : poison_bits(); };
    uint64_t all = 0;
    int cnt = 0;
    switch (c.kind) {
        case C_BALLOT:
        case C_ANY:
        case C_ALL:
            for (int j = 0; j < 32; j++)
                if ((in >> j) & 1u) {
                    cnt++;
                    if (lanes[j]->xval) all |= 1ull << j;
                }
            break;
        default:
            break;
    }
    uint64_t red = 0;
    if (c.kind >= C_RED_ADD) {
        bool first = true;
        for (int j = 0; j < 32; j++) {
            if (!((in >> j) & 1u)) continue;
            uint32_t v = (uint32_t)lanes[j]->xval;
            uint32_t r = (uint32_t)red;
            if (first) {
                r = v;
                first = false;
            } else
                switch (c.kind) {
                    case C_RED_ADD:
                        r = r + v;
                        break;
                    case C_RED_MIN_U:
                        r = std::min(r, v);
                        break;
                    case C_RED_MAX_U:
                        r = std::max(r, v);
                        break;
                    case C_RED_MIN_S:
                        r = (uint32_t)std::min((int32_t)r, (int32_t)v);
                        break;
                    case C_RED_MAX_S:
                        r = (uint32_t)std::max((int32_t)r, (int32_t)v);
                        break;
                    case C_RED_AND:
                        r = r & v;
                        break;
                    case C_RED_OR:
                        r = r | v;
                        break;
                    case C_RED_XOR:
                        r = r ^ v;
                        break;
                }
            red = r;
        }
    }
    if (c.kind == C_SYNCWARP) w.sync_gen++; // orders the lanes' shared-memory accesses (detect.h)
    for (int L = 0; L < 32; L++) {
        if (!((in >> L) & 1u)) continue;
        Fiber* f = lanes[L];
        if (c.kind == C_SYNCWARP) {
            f->wgen = w.sync_gen;
            if (f == e.cur) det().wgen = f->wgen; // the lane that completed it runs on
        }
        uint64_t r = 0;
        switch (c.kind) {
            case C_SHFL_IDX:
            case C_SHFL_UP:
            case C_SHFL_DOWN:
            case C_SHFL_XOR: {
                // PTX shfl.sync semantics; CUDA passes c = ((32 - width) << 8) | (up ? 0 : 31).
                int segmask = (32 - f->xwidth) & 31;
                int b = f->xarg & 31;
                int minLane = L & segmask;
                int maxLane = minLane | (31 & ~segmask);
                int j = L;
                bool ok = true;
                if (c.kind == C_SHFL_IDX) {
                    j = minLane | (b & ~segmask & 31);
                    ok = j <= maxLane;
                } else if (c.kind == C_SHFL_UP) {
                    j = L - b;
                    ok = j >= minLane;
                } else if (c.kind == C_SHFL_DOWN) {
                    j = L + b;
                    ok = j <= maxLane;
                } else {
                    j = L ^ b;
                    ok = j <= maxLane;
                }
                if (!ok) j = L;
                r = val(j); // a source lane that did not take part: undefined on the GPU -> poison
                break;
            }
            case C_BALLOT:
                r = all;
                break;
            case C_ANY:
                r = all != 0;
                break;
            case C_ALL:
                r = (uint64_t)__builtin_popcountll(all) == (uint64_t)cnt;
                break;
            case C_SYNCWARP:
                r = 0;
                break;
            case C_MATCH_ANY: {
                uint32_t m = 0;
                for (int j = 0; j < 32; j++)
                    if (((in >> j) & 1u) && lanes[j]->xval == f->xval) m |= 1u << j;
                r = m;
                break;
            }
            default:
                r = red;
                break;
        }
        f->xres = r;
        uint8_t& st = e.state[(size_t)warp * 32 + L];
        if (st == F_WAIT_WARP) st = F_RUNNABLE;
    }
    w.coll[ci] = w.coll[--w.ncoll];
    return true;
}

CUEMU_NOTSAN inline uint64_t warp_collective(int kind, unsigned mask, uint64_t val, int arg, int width) {
    const char* what = coll_name(kind);
    Fiber* f = current(what);
    Exec& e = ex();
    uint32_t bit = 1u << f->lane;
    if (!(mask & bit))
        die("%s: lane %d calls it with mask 0x%08x, which does not include the lane itself", what, f->lane, mask);
    if (width <= 0 || width > 32 || (width & (width - 1)))
        die("%s: width %d is not a power of two in [1, 32]", what, width);
    f->xval = val;
    f->xarg = arg;
    f->xwidth = width;
    Warp& w = e.warps[f->warp];
    int ci = -1;
    for (int c = 0; c < w.ncoll; c++)
        if (w.coll[c].mask == mask && !(w.coll[c].arrived & bit)) {
            ci = c;
            break;
        }
    if (ci < 0) {
        if (w.ncoll >= 32) die("%s: too many concurrent warp collectives in warp %d", what, f->warp);
        ci = w.ncoll++;
        w.coll[ci] = Coll{mask, kind, 0};
    }
    if (w.coll[ci].kind != kind)
        die("lanes of warp %d with mask 0x%08x meet at different warp intrinsics (%s and %s): divergent code "
            "reaching different collectives",
            f->warp, mask, coll_name(w.coll[ci].kind), what);
    w.coll[ci].arrived |= bit;
    if (!try_complete(e, f->warp, ci)) {
        e.state[f->linear] = F_WAIT_WARP;
        yield(f);
    }
    return f->xres;
}

CUEMU_NOTSAN inline int block_barrier(int kind, int pred) {
    Fiber* f = current("__syncthreads");
    Exec& e = ex();
    f->bar_kind = kind;
    f->bar_pred = pred != 0;
    e.state[f->linear] = F_WAIT_BAR;
    e.at_bar++;
    yield(f);
    return f->bar_res;
}

CUEMU_NOTSAN inline void thread_exit(Fiber* f) {
    Exec& e = ex();
    e.state[f->linear] = F_DONE;
    e.live--;
    Warp& w = e.warps[f->warp];
    w.live &= ~(1u << f->lane);
    // A lane that exits no longer holds up the collectives of its warp.
    for (int c = 0; c < w.ncoll;)
        if (!try_complete(e, f->warp, c)) c++;
    yield(f);
}

// Runs on the fiber's own stack; one fiber serves one thread slot of every block
// of every launch (stacks are made once and reused).
inline void fiber_main(Fiber* f) {
    for (;;) {
        Exec& e = ex();
        e.body(e.body_ctx);
        thread_exit(f);
    }
}

// ---------------------------------------------------------------- the scheduler
inline void make_order(Exec& e) {
    int n = e.nthreads;
    e.order.resize(n);
    int mode = config().sched;
    for (int i = 0; i < n; i++) e.order[i] = (mode == SCHED_REVERSE) ? n - 1 - i : i;
    if (mode == SCHED_SHUFFLE) {
        uint64_t s = config().seed ^ (e.block_linear * 0x9e3779b97f4a7c15ull) ^ ((uint64_t)e.interval << 40);
        for (int i = n - 1; i > 0; i--) {
            int j = (int)(splitmix64(s) % (uint64_t)(i + 1));
            std::swap(e.order[i], e.order[j]);
        }
    }
}

[[noreturn]] inline void report_deadlock(Exec& e) {
    char buf[900];
    int off = snprintf(buf, sizeof buf, "deadlock in block (%u,%u,%u): %d live threads, %d at __syncthreads",
                       blockIdx.x, blockIdx.y, blockIdx.z, e.live, e.at_bar);
    for (size_t w = 0; w < e.warps.size() && off < 700; w++)
        for (int c = 0; c < e.warps[w].ncoll && off < 700; c++) {
            const Coll& cc = e.warps[w].coll[c];
            off += snprintf(buf + off, sizeof buf - off,
                            "; warp %zu: lanes 0x%08x wait in %s(mask 0x%08x) for lanes 0x%08x", w, cc.arrived,
                            coll_name(cc.kind), cc.mask, (cc.mask & e.warps[w].live) & ~cc.arrived);
        }
    e.cur = nullptr;
    die("%s", buf);
}

inline void run_block(Exec& e) {
    int n = e.nthreads;
    unsigned bx = blockDim.x, by = blockDim.y;
    for (int i = 0; i < n; i++) {
        Fiber* f = e.fibers[i];
        f->tid = uint3{(unsigned)i % bx, ((unsigned)i / bx) % by, (unsigned)i / (bx * by)};
        f->linear = i;
        f->lane = i & 31;
        f->warp = i >> 5;
        f->wgen = 0;
    }
    e.state.assign(n, F_RUNNABLE);
    det().stamp++; // a new block: no shared-memory access before this one counts
    for (size_t w = 0; w < e.warps.size(); w++) {
        int lanes = std::min(32, n - (int)w * 32);
        e.warps[w].exist = e.warps[w].live = lanes == 32 ? 0xffffffffu : ((1u << lanes) - 1u);
        e.warps[w].ncoll = 0;
        e.warps[w].sync_gen = 0;
    }
    if (e.dyn_size && config().poison) memset(e.dyn, 0xff, e.dyn_size);
    e.live = n;
    e.at_bar = 0;
    e.interval = 0;
    make_order(e);
    CUEMU_COST_HOOK(cost_block_begin());
    while (e.live > 0) {
        bool ran = run_pass(e);
        if (e.live == 0) break;
        if (e.at_bar == e.live) { // everyone still alive is at the barrier: release it
            int count = 0;
            for (int i = 0; i < n; i++)
                if (e.state[i] == F_WAIT_BAR) count += e.fibers[i]->bar_pred;
            for (int i = 0; i < n; i++) {
                Fiber* f = e.fibers[i];
                if (e.state[i] != F_WAIT_BAR) continue;
                f->bar_res = f->bar_kind == BAR_COUNT ? count
                             : f->bar_kind == BAR_AND ? (count == e.at_bar)
                             : f->bar_kind == BAR_OR  ? (count > 0)
                                                      : 0;
                e.state[i] = F_RUNNABLE;
            }
            e.at_bar = 0;
            e.interval++;
            det().stamp++; // a new barrier interval
            make_order(e);
            continue;
        }
        if (!ran) report_deadlock(e);
    }
    CUEMU_COST_HOOK(cost_block_end());
}

// GRID_STRIDE_CAP (llmc/cuda/cuda_common.cuh): CUEMU_MAX_GRID=n caps grid-stride grids.
inline int grid_cap(long long g) {
    static long cap = [] {
        const char* s = getenv("CUEMU_MAX_GRID");
        return s ? atol(s) : 0L;
    }();
    return (int)(cap > 0 && g > cap ? cap : g);
}

inline int dyn_smem_limit(const void* kernel) {
    Exec& e = ex();
    auto it = e.max_dyn_smem.find(kernel);
    return it == e.max_dyn_smem.end() ? 48 * 1024 : it->second;
}

// The launch checks a GPU makes at the launch (the error is there for cudaGetLastError
// right after it): configuration, dynamic shared memory, the register table.
inline bool grid_ok(const void* kernel, const char* name, const char* file, int line, dim3 grid, dim3 block,
                    size_t smem) {
    Exec& e = ex();
    if (e.in_kernel) die("kernel %s launched from inside a kernel (dynamic parallelism is not emulated)", name);
    unsigned long long nthreads = (unsigned long long)block.x * block.y * block.z;
    if (nthreads == 0 || nthreads > 1024 || block.x > 1024 || block.y > 1024 || block.z > 64 || grid.x == 0 ||
        grid.y == 0 || grid.z == 0 || grid.x > 2147483647u || grid.y > 65535 || grid.z > 65535) {
        fprintf(stderr, "cuemu: %s:%d: launch of %s with grid (%u,%u,%u) block (%u,%u,%u): invalid configuration\n",
                file, line, name, grid.x, grid.y, grid.z, block.x, block.y, block.z);
        set_error(cudaErrorInvalidConfiguration);
        return false;
    }
    int limit = dyn_smem_limit(kernel);
    if (smem > (size_t)limit) {
        fprintf(stderr,
                "cuemu: %s:%d: launch of %s with %zu bytes of dynamic shared memory, above the kernel's limit of %d "
                "(raise it with cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, bytes))\n",
                file, line, name, smem, limit);
        set_error(cudaErrorInvalidValue);
        return false;
    }
    if (!check_resources(kernel, name, file, line, nthreads, smem)) {
        set_error(cudaErrorLaunchOutOfResources);
        return false;
    }
    return true;
}

// Runs a whole grid (checked by grid_ok at the launch). body(ctx) runs one thread of the kernel.
inline void run_grid(const char* name, const char* file, int line, dim3 grid, dim3 block, size_t smem,
                     void (*body)(void*), void* ctx) {
    Exec& e = ex();
    unsigned long long nthreads = (unsigned long long)block.x * block.y * block.z;
    std::lock_guard<std::mutex> lk(e.launch_mu);
    install_segv_handler();
    e.page = (size_t)sysconf(_SC_PAGESIZE);
    while (e.fibers.size() < nthreads) e.fibers.push_back(new_fiber());
    e.nthreads = (int)nthreads;
    e.warps.assign((nthreads + 31) / 32, Warp());
    if (smem > e.dyn_cap) {
        free(e.dyn);
        e.dyn_cap = (smem + 4095) / 4096 * 4096;
        e.dyn = (char*)aligned_alloc(256, e.dyn_cap);
        if (!e.dyn) die("cannot allocate %zu bytes of dynamic shared memory", smem);
    }
    e.dyn_size = smem;
    e.body = body;
    e.body_ctx = ctx;
    e.kname = name;
    e.kfile = file;
    e.kline = line;
    e.launches++;
    gridDim = grid;
    blockDim = block;
    unsigned long long total = (unsigned long long)grid.x * grid.y * grid.z;
    // Block order: an affine permutation b = (a*i + c) mod total in shuffle mode,
    // so that no kernel can depend on blocks running in index order.
    unsigned long long a = 1, c0 = 0;
    int mode = config().sched;
    if (mode == SCHED_SHUFFLE && total > 1) {
        uint64_t s = config().seed ^ (e.launches * 0x51ed27ull);
        a = splitmix64(s) % total;
        if (a == 0) a = 1;
        while (std::gcd(a, total) != 1) a = a + 1 < total ? a + 1 : 1;
        c0 = splitmix64(s) % total;
    }
    detect_launch(name, e.dyn, smem);
    e.in_kernel = true;
    CUEMU_COST_HOOK(cost_kernel_begin(name));
    for (unsigned long long i = 0; i < total; i++) {
        unsigned long long b = i;
        if (mode == SCHED_REVERSE)
            b = total - 1 - i;
        else if (mode == SCHED_SHUFFLE)
            b = (unsigned long long)(((unsigned __int128)a * i + c0) % total);
        blockIdx = uint3{(unsigned)(b % grid.x), (unsigned)((b / grid.x) % grid.y),
                         (unsigned)(b / ((unsigned long long)grid.x * grid.y))};
        e.block_linear = b;
        det().block = b;
        // Shared-memory races show in any block: checking the first few (in run order) of
        // every launch keeps the cost down; writes to global memory are checked in all.
        det().shared_on = det().check_blocks <= 0 || (long long)i < det().check_blocks;
        run_block(e);
    }
    CUEMU_COST_HOOK(cost_kernel_end());
    e.in_kernel = false;
    e.cur = nullptr;
    e.body = nullptr;
    threadIdx = uint3{0, 0, 0};
    blockIdx = uint3{0, 0, 0};
}

template <class T>
inline void check_kernel_arg(const char* name, const char* file, int line, int idx, const T& v, bool& bad) {
    if constexpr (std::is_pointer<T>::value && !std::is_function<typename std::remove_pointer<T>::type>::value) {
        if (v == nullptr || !config().check_ptrs) return;
        Found f = lookup((const void*)v, 0);
        if (!device_accessible(f.kind)) {
            fprintf(stderr,
                    "cuemu: %s:%d: kernel %s, argument #%d = %p is %s; on a GPU dereferencing it is an illegal "
                    "address (pass memory from cudaMalloc; CUEMU_CHECK_PTRS=0 disables this check)\n",
                    file, line, name, idx, (const void*)v, kind_name(f.kind));
            bad = true;
        }
    }
}

template <class Tup, size_t... I>
inline bool check_kernel_args(const char* name, const char* file, int line, const Tup& t, std::index_sequence<I...>) {
    bool bad = false;
    (void)name;
    (void)file;
    (void)line;
    (void)t; // unused when the kernel has no parameters
    (check_kernel_arg(name, file, line, (int)I, std::get<I>(t), bad), ...);
    return !bad;
}

// What a kernel touches, for the cross-stream hazard detector (streams.h). With the
// ThreadSanitizer hooks (CUEMU_TRACK_RANGES, detect.h): exactly the bytes its threads read
// and wrote, recorded while it runs. Without them, conservatively: the whole allocation
// behind every pointer argument, read-only when the parameter is `const T*` (pointers
// inside struct arguments are not seen).
inline bool exact_kernel_ranges() { return CUEMU_TRACK_RANGES && streams().races; }
template <class P, class T>
inline void kernel_access(const T& v, std::vector<Access>& acc) {
    if constexpr (std::is_pointer<P>::value && !std::is_function<typename std::remove_pointer<P>::type>::value) {
        if (v == nullptr) return;
        Found f = lookup((const void*)v, 0);
        if (f.kind == MEM_NONE) return;
        acc.push_back(
            Access{(const void*)f.base, f.size, !std::is_const<typename std::remove_pointer<P>::type>::value});
    }
}
template <class... P, class Tup, size_t... I>
inline void kernel_accesses(const Tup& t, std::vector<Access>& acc, std::index_sequence<I...>) {
    (void)t;
    (void)acc;
    (kernel_access<typename std::decay<P>::type>(std::get<I>(t), acc), ...);
}

// The launch: what LAUNCH(kernel, grid, block, smem, stream, args...) calls under CUEMU.
// The arguments are copied at the call (as a GPU captures kernel parameters) and the
// grid runs when its stream's queue runs (streams.h).
template <class... P, class... A>
inline void launch(void (*kernel)(P...), const char* name, const char* file, int line, dim3 grid, dim3 block,
                   size_t smem, cudaStream_t stream, A&&... args) {
    static_assert(sizeof...(P) == sizeof...(A),
                  "LAUNCH: the number of arguments does not match the kernel's parameters");
    using Tup = std::tuple<typename std::decay<P>::type...>;
    auto params = std::make_shared<Tup>(std::forward<A>(args)...);
    if (!check_kernel_args(name, file, line, *params, std::index_sequence_for<P...>{})) {
        set_error(cudaErrorIllegalAddress);
        return;
    }
    if (!grid_ok(reinterpret_cast<const void*>(kernel), name, file, line, grid, block, smem)) return;
    std::vector<Access> acc;
    bool exact = exact_kernel_ranges();
    if (!exact) kernel_accesses<P...>(*params, acc, std::index_sequence_for<P...>{});
    issue(
        stream,
        [kernel, name, file, line, grid, block, smem, params, exact] {
            struct Ctx {
                void (*k)(P...);
                Tup* t;
            };
            Ctx ctx{kernel, params.get()};
            auto body = [](void* p) {
                Ctx* c = static_cast<Ctx*>(p);
                std::apply(c->k, *c->t); // each thread gets its own copy of the parameters
            };
            det().track = exact;
            run_grid(name, file, line, grid, block, smem, +body, &ctx);
            if (exact) {
                // the bytes it really touched become the operation's accesses (run_until checks them)
                std::vector<Access>* out = streams().cur_acc;
                launch_ranges([out](uintptr_t a, uintptr_t b, bool w) {
                    if (out) out->push_back(Access{(const void*)a, (size_t)(b - a), w});
                });
                det().track = false;
            }
        },
        acc, name, file, line);
}

inline void* dynamic_smem() {
    Exec& e = ex();
    if (!e.in_kernel) die("dynamic shared memory used outside a kernel");
    return e.dyn;
}

} // namespace cuemu

// ---------------------------------------------------------------- barriers and warp intrinsics
static inline void __syncthreads() { cuemu::block_barrier(cuemu::BAR_PLAIN, 0); }
static inline int __syncthreads_count(int pred) { return cuemu::block_barrier(cuemu::BAR_COUNT, pred); }
static inline int __syncthreads_and(int pred) { return cuemu::block_barrier(cuemu::BAR_AND, pred); }
static inline int __syncthreads_or(int pred) { return cuemu::block_barrier(cuemu::BAR_OR, pred); }
static inline void __syncwarp(unsigned mask = 0xffffffffu) {
    cuemu::warp_collective(cuemu::C_SYNCWARP, mask, 0, 0, 32);
}
static inline void __threadfence() { __atomic_thread_fence(__ATOMIC_SEQ_CST); }
static inline void __threadfence_block() { __atomic_thread_fence(__ATOMIC_SEQ_CST); }
static inline void __threadfence_system() { __atomic_thread_fence(__ATOMIC_SEQ_CST); }
static inline void __nanosleep(unsigned) {}
static inline void __trap() { cuemu::die("__trap() called"); }
static inline void __brkpt() { cuemu::die("__brkpt() called"); }

namespace cuemu {
template <class T>
inline T shfl(int kind, unsigned mask, T var, int arg, int width) {
    static_assert(std::is_trivially_copyable<T>::value && sizeof(T) <= 8, "shuffle of a type larger than 8 bytes");
    uint64_t v = 0;
    memcpy(&v, &var, sizeof(T));
    uint64_t r = warp_collective(kind, mask, v, arg, width);
    T out;
    memcpy(&out, &r, sizeof(T));
    return out;
}
} // namespace cuemu
template <class T>
static inline T __shfl_sync(unsigned mask, T var, int srcLane, int width = warpSize) {
    return cuemu::shfl(cuemu::C_SHFL_IDX, mask, var, srcLane, width);
}
template <class T>
static inline T __shfl_up_sync(unsigned mask, T var, unsigned int delta, int width = warpSize) {
    return cuemu::shfl(cuemu::C_SHFL_UP, mask, var, (int)delta, width);
}
template <class T>
static inline T __shfl_down_sync(unsigned mask, T var, unsigned int delta, int width = warpSize) {
    return cuemu::shfl(cuemu::C_SHFL_DOWN, mask, var, (int)delta, width);
}
template <class T>
static inline T __shfl_xor_sync(unsigned mask, T var, int laneMask, int width = warpSize) {
    return cuemu::shfl(cuemu::C_SHFL_XOR, mask, var, laneMask, width);
}
static inline unsigned __ballot_sync(unsigned mask, int pred) {
    return (unsigned)cuemu::warp_collective(cuemu::C_BALLOT, mask, pred != 0, 0, 32);
}
static inline int __any_sync(unsigned mask, int pred) {
    return (int)cuemu::warp_collective(cuemu::C_ANY, mask, pred != 0, 0, 32);
}
static inline int __all_sync(unsigned mask, int pred) {
    return (int)cuemu::warp_collective(cuemu::C_ALL, mask, pred != 0, 0, 32);
}
template <class T>
static inline unsigned __match_any_sync(unsigned mask, T value) {
    static_assert(std::is_integral<T>::value || std::is_floating_point<T>::value, "__match_any_sync: scalar type");
    uint64_t v = 0;
    memcpy(&v, &value, sizeof(T));
    return (unsigned)cuemu::warp_collective(cuemu::C_MATCH_ANY, mask, v, 0, 32);
}
// The unsigned and int overloads of the __reduce_*_sync functions; the int one hands
// the collective its value's bits.
#define CUEMU_REDUCE_U(NAME, KIND)                                            \
    static inline unsigned NAME(unsigned mask, unsigned v) {                  \
        return (unsigned)cuemu::warp_collective(cuemu::KIND, mask, v, 0, 32); \
    }
#define CUEMU_REDUCE_S(NAME, KIND)                                                           \
    static inline int NAME(unsigned mask, int v) {                                           \
        return (int)(unsigned)cuemu::warp_collective(cuemu::KIND, mask, (unsigned)v, 0, 32); \
    }
CUEMU_REDUCE_U(__reduce_add_sync, C_RED_ADD)
CUEMU_REDUCE_S(__reduce_add_sync, C_RED_ADD)
CUEMU_REDUCE_U(__reduce_min_sync, C_RED_MIN_U)
CUEMU_REDUCE_S(__reduce_min_sync, C_RED_MIN_S)
CUEMU_REDUCE_U(__reduce_max_sync, C_RED_MAX_U)
CUEMU_REDUCE_S(__reduce_max_sync, C_RED_MAX_S)
CUEMU_REDUCE_U(__reduce_and_sync, C_RED_AND)
CUEMU_REDUCE_U(__reduce_or_sync, C_RED_OR)
CUEMU_REDUCE_U(__reduce_xor_sync, C_RED_XOR)
#undef CUEMU_REDUCE_S
#undef CUEMU_REDUCE_U

// ---------------------------------------------------------------- atomics
// Fibers never switch inside these functions, so a plain read-modify-write is
// atomic with respect to every other emulated thread.
#define CUEMU_ATOMIC2(NAME, T, EXPR)                       \
    CUEMU_NOTSAN static inline T NAME(T* address, T val) { \
        cuemu::track_atomic(address, sizeof(T));           \
        T old = *address;                                  \
        *address = (EXPR);                                 \
        return old;                                        \
    }
CUEMU_ATOMIC2(atomicAdd, int, old + val)
CUEMU_ATOMIC2(atomicAdd, unsigned int, old + val)
CUEMU_ATOMIC2(atomicAdd, unsigned long long, old + val)
CUEMU_ATOMIC2(atomicAdd, float, old + val)
CUEMU_ATOMIC2(atomicAdd, double, old + val)
CUEMU_ATOMIC2(atomicSub, int, old - val)
CUEMU_ATOMIC2(atomicSub, unsigned int, old - val)
CUEMU_ATOMIC2(atomicExch, int, val)
CUEMU_ATOMIC2(atomicExch, unsigned int, val)
CUEMU_ATOMIC2(atomicExch, unsigned long long, val)
CUEMU_ATOMIC2(atomicExch, float, val)
CUEMU_ATOMIC2(atomicMin, int, val < old ? val : old)
CUEMU_ATOMIC2(atomicMin, unsigned int, val < old ? val : old)
CUEMU_ATOMIC2(atomicMin, long long, val < old ? val : old)
CUEMU_ATOMIC2(atomicMin, unsigned long long, val < old ? val : old)
CUEMU_ATOMIC2(atomicMax, int, val > old ? val : old)
CUEMU_ATOMIC2(atomicMax, unsigned int, val > old ? val : old)
CUEMU_ATOMIC2(atomicMax, long long, val > old ? val : old)
CUEMU_ATOMIC2(atomicMax, unsigned long long, val > old ? val : old)
CUEMU_ATOMIC2(atomicAnd, int, old& val)
CUEMU_ATOMIC2(atomicAnd, unsigned int, old& val)
CUEMU_ATOMIC2(atomicAnd, unsigned long long, old& val)
CUEMU_ATOMIC2(atomicOr, int, old | val)
CUEMU_ATOMIC2(atomicOr, unsigned int, old | val)
CUEMU_ATOMIC2(atomicOr, unsigned long long, old | val)
CUEMU_ATOMIC2(atomicXor, int, old ^ val)
CUEMU_ATOMIC2(atomicXor, unsigned int, old ^ val)
CUEMU_ATOMIC2(atomicXor, unsigned long long, old ^ val)
CUEMU_ATOMIC2(atomicInc, unsigned int, (old >= val) ? 0u : old + 1u)
CUEMU_ATOMIC2(atomicDec, unsigned int, (old == 0u || old > val) ? val : old - 1u)
#undef CUEMU_ATOMIC2
#define CUEMU_ATOMIC_CAS(T)                                                \
    CUEMU_NOTSAN static inline T atomicCAS(T* address, T compare, T val) { \
        cuemu::track_atomic(address, sizeof(T));                           \
        T old = *address;                                                  \
        if (old == compare) *address = val;                                \
        return old;                                                        \
    }
CUEMU_ATOMIC_CAS(int)
CUEMU_ATOMIC_CAS(unsigned int)
CUEMU_ATOMIC_CAS(unsigned long long)
CUEMU_ATOMIC_CAS(unsigned short)
#undef CUEMU_ATOMIC_CAS
// Scoped variants behave the same in a single-device emulation.
#define atomicAdd_block atomicAdd
#define atomicAdd_system atomicAdd
#define atomicCAS_block atomicCAS
#define atomicCAS_system atomicCAS
#define atomicMax_block atomicMax
#define atomicMin_block atomicMin
#define atomicExch_block atomicExch

// ---------------------------------------------------------------- cache hints and loads
// Cache-hinted loads and stores: plain accesses here (there is no cache to steer).
#define CUEMU_LOAD(NAME)               \
    template <class T>                 \
    static inline T NAME(const T* p) { \
        return *p;                     \
    }
#define CUEMU_STORE(NAME)                \
    template <class T>                   \
    static inline void NAME(T* p, T v) { \
        *p = v;                          \
    }
CUEMU_LOAD(__ldg)
CUEMU_LOAD(__ldcg)
CUEMU_LOAD(__ldca)
CUEMU_LOAD(__ldcs)
CUEMU_LOAD(__ldlu)
CUEMU_LOAD(__ldcv)
CUEMU_STORE(__stcg)
CUEMU_STORE(__stcs)
CUEMU_STORE(__stwb)
CUEMU_STORE(__stwt)
#undef CUEMU_STORE
#undef CUEMU_LOAD

// ---------------------------------------------------------------- device math
// Fast-math intrinsics map to the accurate host functions (the GPU versions are
// approximations: a test must allow for their documented error, not rely on it).
// Not static and noexcept: glibc's <math.h> already declares __expf, __logf, ...
// (internal, unexported names), and these definitions must match those declarations.
inline float __expf(float x) noexcept { return expf(x); }
inline float __exp10f(float x) noexcept { return powf(10.0f, x); }
inline float __logf(float x) noexcept { return logf(x); }
inline float __log2f(float x) noexcept { return log2f(x); }
inline float __log10f(float x) noexcept { return log10f(x); }
inline float __powf(float x, float y) noexcept { return powf(x, y); }
inline float __sinf(float x) noexcept { return sinf(x); }
inline float __cosf(float x) noexcept { return cosf(x); }
inline float __tanf(float x) noexcept { return tanf(x); }
inline void __sincosf(float x, float* s, float* c) noexcept {
    *s = sinf(x);
    *c = cosf(x);
}
inline float __tanhf(float x) noexcept { return tanhf(x); }
inline float __fdividef(float x, float y) noexcept { return x / y; }
inline float fdividef(float x, float y) noexcept { return x / y; }
inline float rsqrtf(float x) noexcept { return 1.0f / sqrtf(x); }
inline double rsqrt(double x) noexcept { return 1.0 / sqrt(x); }
inline float rcbrtf(float x) noexcept { return 1.0f / cbrtf(x); }
inline float __frcp_rn(float x) noexcept { return 1.0f / x; }
inline float __fsqrt_rn(float x) noexcept { return sqrtf(x); }
inline float __frsqrt_rn(float x) noexcept { return 1.0f / sqrtf(x); }
inline float __fadd_rn(float a, float b) noexcept { return a + b; }
inline float __fsub_rn(float a, float b) noexcept { return a - b; }
inline float __fmul_rn(float a, float b) noexcept { return a * b; }
inline float __fdiv_rn(float a, float b) noexcept { return a / b; }
inline float __fmaf_rn(float a, float b, float c) noexcept { return fmaf(a, b, c); }
inline double __dadd_rn(double a, double b) noexcept { return a + b; }
inline double __dmul_rn(double a, double b) noexcept { return a * b; }
inline double __fma_rn(double a, double b, double c) noexcept { return fma(a, b, c); }
inline float __saturatef(float x) noexcept { return x != x ? 0.0f : (x < 0.0f ? 0.0f : (x > 1.0f ? 1.0f : x)); }
inline float normcdff(float x) noexcept { return 0.5f * erfcf(-x * 0.70710678118654752f); }
static inline int __float2int_rn(float x) { return (int)nearbyintf(x); }
static inline int __float2int_rz(float x) { return (int)x; }
static inline int __float2int_rd(float x) { return (int)floorf(x); }
static inline int __float2int_ru(float x) { return (int)ceilf(x); }
static inline unsigned __float2uint_rn(float x) { return (unsigned)nearbyintf(x); }
static inline unsigned __float2uint_rz(float x) { return (unsigned)x; }
static inline float __int2float_rn(int x) { return (float)x; }
static inline float __uint2float_rn(unsigned x) { return (float)x; }
static inline int __float_as_int(float x) { return cuemu::bit_cast<int>(x); }
static inline unsigned __float_as_uint(float x) { return cuemu::bit_cast<unsigned>(x); }
static inline float __int_as_float(int i) { return cuemu::bit_cast<float>(i); }
static inline float __uint_as_float(unsigned i) { return cuemu::bit_cast<float>(i); }
static inline long long __double_as_longlong(double x) { return cuemu::bit_cast<long long>(x); }
static inline double __longlong_as_double(long long i) { return cuemu::bit_cast<double>(i); }
static inline int __popc(unsigned x) { return __builtin_popcount(x); }
static inline int __popcll(unsigned long long x) { return __builtin_popcountll(x); }
static inline int __clz(int x) { return x == 0 ? 32 : __builtin_clz((unsigned)x); }
static inline int __clzll(long long x) { return x == 0 ? 64 : __builtin_clzll((unsigned long long)x); }
static inline int __ffs(int x) { return __builtin_ffs(x); }
static inline int __ffsll(long long x) { return __builtin_ffsll(x); }
static inline unsigned __brev(unsigned x) {
    x = ((x >> 1) & 0x55555555u) | ((x & 0x55555555u) << 1);
    x = ((x >> 2) & 0x33333333u) | ((x & 0x33333333u) << 2);
    x = ((x >> 4) & 0x0f0f0f0fu) | ((x & 0x0f0f0f0fu) << 4);
    x = ((x >> 8) & 0x00ff00ffu) | ((x & 0x00ff00ffu) << 8);
    return (x >> 16) | (x << 16);
}
static inline unsigned __umulhi(unsigned a, unsigned b) { return (unsigned)(((unsigned long long)a * b) >> 32); }
static inline int __mulhi(int a, int b) { return (int)(((long long)a * b) >> 32); }
static inline unsigned long long __umul64hi(unsigned long long a, unsigned long long b) {
    return (unsigned long long)(((unsigned __int128)a * b) >> 64);
}
static inline int __mul24(int a, int b) { return a * b; }
static inline unsigned __umul24(unsigned a, unsigned b) { return a * b; }
static inline long long clock64() { return (long long)(cuemu::now_ms() * 1e6); }
static inline unsigned long long __globaltimer() { return (unsigned long long)(cuemu::now_ms() * 1e6); }

// min/max overloads as CUDA's math headers provide them on host and device.
static inline int min(int a, int b) { return a < b ? a : b; }
static inline int max(int a, int b) { return a > b ? a : b; }
static inline unsigned min(unsigned a, unsigned b) { return a < b ? a : b; }
static inline unsigned max(unsigned a, unsigned b) { return a > b ? a : b; }
static inline unsigned min(unsigned a, int b) { return min(a, (unsigned)b); }
static inline unsigned max(unsigned a, int b) { return max(a, (unsigned)b); }
static inline unsigned min(int a, unsigned b) { return min((unsigned)a, b); }
static inline unsigned max(int a, unsigned b) { return max((unsigned)a, b); }
static inline long long min(long long a, long long b) { return a < b ? a : b; }
static inline long long max(long long a, long long b) { return a > b ? a : b; }
static inline unsigned long long min(unsigned long long a, unsigned long long b) { return a < b ? a : b; }
static inline unsigned long long max(unsigned long long a, unsigned long long b) { return a > b ? a : b; }
static inline long min(long a, long b) { return a < b ? a : b; }
static inline long max(long a, long b) { return a > b ? a : b; }
static inline unsigned long min(unsigned long a, unsigned long b) { return a < b ? a : b; }
static inline unsigned long max(unsigned long a, unsigned long b) { return a > b ? a : b; }
static inline float min(float a, float b) { return fminf(a, b); }
static inline float max(float a, float b) { return fmaxf(a, b); }
static inline double min(double a, double b) { return fmin(a, b); }
static inline double max(double a, double b) { return fmax(a, b); }
static inline double min(float a, double b) { return fmin(a, b); }
static inline double max(float a, double b) { return fmax(a, b); }
static inline double min(double a, float b) { return fmin(a, b); }
static inline double max(double a, float b) { return fmax(a, b); }
