// cuemu/impl/base.h - CUDA builtin types (dim3, vector types), error codes,
// stream/event handles, the emulator's configuration (environment variables),
// the registry of emulated device allocations, and fatal-error reporting.
// Test-only: part of the CPU emulation of CUDA, never linked into the product.
#pragma once
#ifndef CUEMU
#error "cuemu is the CPU emulation of CUDA: build with -DCUEMU -Idev/cuemu/include -include cuemu/cuemu.h"
#endif
#ifndef __cplusplus
#error "cuemu needs a C++17 compiler (compile .cu files with g++ -std=c++17 -x c++)"
#endif

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdarg>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>
#include <tuple>
#include <type_traits>
#include <utility>
#include <vector>
#include <math.h>

// ---------------------------------------------------------------- vector types
// Same names, members and alignments as CUDA's vector_types.h.
#define CUEMU_VALIGN2(T) (2 * sizeof(T) > 16 ? 16 : 2 * sizeof(T))
#define CUEMU_VALIGN4(T) (4 * sizeof(T) > 16 ? 16 : 4 * sizeof(T))
#define CUEMU_VECTOR_TYPES(T, N)                                                       \
    struct N##1 {                                                                      \
        T x;                                                                           \
    };                                                                                 \
    struct alignas(CUEMU_VALIGN2(T)) N##2 {                                            \
        T x, y;                                                                        \
    };                                                                                 \
    struct N##3 {                                                                      \
        T x, y, z;                                                                     \
    };                                                                                 \
    struct alignas(CUEMU_VALIGN4(T)) N##4 {                                            \
        T x, y, z, w;                                                                  \
    };                                                                                 \
    static inline constexpr N##1 make_##N##1(T x) { return N##1 {x}; }                 \
    static inline constexpr N##2 make_##N##2(T x, T y) { return N##2 {x, y}; }         \
    static inline constexpr N##3 make_##N##3(T x, T y, T z) { return N##3 {x, y, z}; } \
    static inline constexpr N##4 make_##N##4(T x, T y, T z, T w) { return N##4 {x, y, z, w}; }
CUEMU_VECTOR_TYPES(signed char, char)
CUEMU_VECTOR_TYPES(unsigned char, uchar)
CUEMU_VECTOR_TYPES(short, short)
CUEMU_VECTOR_TYPES(unsigned short, ushort)
CUEMU_VECTOR_TYPES(int, int)
CUEMU_VECTOR_TYPES(unsigned int, uint)
CUEMU_VECTOR_TYPES(long, long)
CUEMU_VECTOR_TYPES(unsigned long, ulong)
CUEMU_VECTOR_TYPES(long long, longlong)
CUEMU_VECTOR_TYPES(unsigned long long, ulonglong)
CUEMU_VECTOR_TYPES(float, float)
CUEMU_VECTOR_TYPES(double, double)
#undef CUEMU_VECTOR_TYPES

struct dim3 {
    unsigned int x, y, z;
    constexpr dim3(unsigned int vx = 1, unsigned int vy = 1, unsigned int vz = 1) : x(vx), y(vy), z(vz) {}
    constexpr dim3(uint3 v) : x(v.x), y(v.y), z(v.z) {}
    constexpr operator uint3() const { return uint3{x, y, z}; }
};

// ---------------------------------------------------------------- error codes
// Values as in CUDA's driver_types.h (the subset the emulation can produce).
enum cudaError {
    cudaSuccess = 0,
    cudaErrorInvalidValue = 1,
    cudaErrorMemoryAllocation = 2,
    cudaErrorInitializationError = 3,
    cudaErrorInvalidConfiguration = 9,
    cudaErrorInvalidSymbol = 13,
    cudaErrorInvalidDevicePointer = 17,
    cudaErrorInvalidMemcpyDirection = 21,
    cudaErrorInvalidDeviceFunction = 98,
    cudaErrorNoDevice = 100,
    cudaErrorInvalidDevice = 101,
    cudaErrorInvalidResourceHandle = 400,
    cudaErrorNotReady = 600,
    cudaErrorIllegalAddress = 700,
    cudaErrorLaunchOutOfResources = 701,
    cudaErrorAssert = 710,
    cudaErrorLaunchFailure = 719,
    cudaErrorNotPermitted = 800,
    cudaErrorNotSupported = 801,
    cudaErrorUnknown = 999
};
typedef enum cudaError cudaError_t;

// ---------------------------------------------------------------- streams and events
// Work runs on the calling host thread, queued per stream (impl/streams.h): a stream is
// a tag; an event records the host wall clock, the stream position it marks and the
// vector clock of what happened before it (for the cross-stream hazard detector).
namespace cuemu {
// Vector clock: entry i = how many operations of stream i are known to have happened.
struct VClock {
    std::vector<uint64_t> c;
    uint64_t get(int i) const { return (size_t)i < c.size() ? c[(size_t)i] : 0; }
    void set(int i, uint64_t v) {
        if ((size_t)i >= c.size()) c.resize((size_t)i + 1, 0);
        c[(size_t)i] = v;
    }
    void join(const VClock& o) {
        if (o.c.size() > c.size()) c.resize(o.c.size(), 0);
        for (size_t i = 0; i < o.c.size(); i++) c[i] = std::max(c[i], o.c[i]);
    }
};
struct StreamState;
} // namespace cuemu
struct CUstream_st {
    unsigned int flags;
    int priority;
};
struct CUevent_st {
    unsigned int flags;
    bool recorded;
    double t_ms;
    cuemu::StreamState* stream = nullptr;
    uint64_t seq = 0;
    cuemu::VClock vc;
};
typedef struct CUstream_st* cudaStream_t;
typedef struct CUevent_st* cudaEvent_t;
#define cudaStreamDefault 0x00
#define cudaStreamNonBlocking 0x01
#define cudaStreamLegacy ((cudaStream_t)0x1)
#define cudaStreamPerThread ((cudaStream_t)0x2)
#define cudaEventDefault 0x00
#define cudaEventBlockingSync 0x01
#define cudaEventDisableTiming 0x02
#define cudaEventInterprocess 0x04
#define cudaHostAllocDefault 0x00
#define cudaHostAllocPortable 0x01
#define cudaHostAllocMapped 0x02
#define cudaHostAllocWriteCombined 0x04
#define cudaHostRegisterDefault 0x00
#define cudaMemAttachGlobal 0x01
#define cudaDeviceScheduleAuto 0x00
#define cudaDeviceScheduleSpin 0x01
#define cudaDeviceScheduleYield 0x02
#define cudaDeviceScheduleBlockingSync 0x04
#define cudaDeviceMapHost 0x08

namespace cuemu {

// ---------------------------------------------------------------- configuration
// Environment variables (read once):
//   CUEMU_SCHED   shuffle (default) | forward | reverse: order in which the threads
//                 of a block run between two barriers (and the order of blocks)
//   CUEMU_SEED    seed of the shuffle (default fixed, so every run is identical)
//   CUEMU_STACK_KB  stack of each emulated thread (default 64)
//   CUEMU_POISON  0 disables filling fresh device / dynamic shared memory with 0xFF bytes
//   CUEMU_CHECK_PTRS 0 disables the "kernel argument is not device memory" check
//   CUEMU_DEVICES number of emulated devices (default 1)
enum { SCHED_SHUFFLE = 0, SCHED_FORWARD = 1, SCHED_REVERSE = 2 };
struct Config {
    int sched = SCHED_SHUFFLE;
    uint64_t seed = 0x5eed0cafe1234567ull;
    size_t stack_bytes = 64 * 1024;
    bool poison = true;
    bool check_ptrs = true;
    int devices = 1;
    Config() {
        if (const char* s = getenv("CUEMU_SCHED")) {
            if (!strcmp(s, "forward"))
                sched = SCHED_FORWARD;
            else if (!strcmp(s, "reverse"))
                sched = SCHED_REVERSE;
            else if (!strcmp(s, "shuffle"))
                sched = SCHED_SHUFFLE;
            else
                fprintf(stderr, "cuemu: CUEMU_SCHED=%s unknown (shuffle|forward|reverse); using shuffle\n", s);
        }
        if (const char* s = getenv("CUEMU_SEED")) seed = strtoull(s, nullptr, 0);
        if (const char* s = getenv("CUEMU_STACK_KB")) {
            long kb = atol(s);
            if (kb >= 16) stack_bytes = (size_t)kb * 1024;
        }
        if (const char* s = getenv("CUEMU_POISON")) poison = atoi(s) != 0;
        if (const char* s = getenv("CUEMU_CHECK_PTRS")) check_ptrs = atoi(s) != 0;
        if (const char* s = getenv("CUEMU_DEVICES")) {
            int d = atoi(s);
            if (d >= 1) devices = d;
        }
    }
};
inline Config& config() {
    static Config c;
    return c;
}

inline uint64_t splitmix64(uint64_t& s) {
    uint64_t z = (s += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

inline double now_ms() {
    using namespace std::chrono;
    return duration<double, std::milli>(steady_clock::now().time_since_epoch()).count();
}

// Fatal error inside the emulation (a misuse that is undefined behaviour or a hang
// on the GPU): say what and where, then abort. Defined in kernel.h, which knows the
// kernel that is running.
[[noreturn]] inline void die(const char* fmt, ...) __attribute__((format(printf, 1, 2)));

// ---------------------------------------------------------------- allocations
// Every cudaMalloc / cudaMallocHost / cudaMallocManaged / symbol is registered, so
// that copies, kernel arguments, cuBLASLt and NCCL buffers can be checked the way
// a GPU would reject them (host pointer passed as device memory, copy past the end).
enum MemKind { MEM_NONE = 0, MEM_DEVICE = 1, MEM_PINNED = 2, MEM_MANAGED = 3, MEM_SYMBOL = 4 };
struct Region {
    size_t size;
    int kind;
};
struct Registry {
    std::mutex mu;
    std::map<uintptr_t, Region> regions;
    size_t device_bytes = 0;
};
inline Registry& registry() {
    static Registry r;
    return r;
}

struct Found {
    int kind;
    uintptr_t base;
    size_t size;
    bool overrun;
};
// Which registered region holds [p, p+n)? kind MEM_NONE when p is in none of them.
// A pointer one past the end of a region (n == 0) counts as inside it.
inline Found lookup(const void* p, size_t n) {
    Found f{MEM_NONE, 0, 0, false};
    uintptr_t a = (uintptr_t)p;
    Registry& r = registry();
    std::lock_guard<std::mutex> lk(r.mu);
    auto it = r.regions.upper_bound(a);
    if (it == r.regions.begin()) return f;
    --it;
    uintptr_t base = it->first;
    size_t size = it->second.size;
    if (a > base + size || (a == base + size && n > 0)) {
        // p may also be the start of the next region: upper_bound handled that.
        return f;
    }
    f.kind = it->second.kind;
    f.base = base;
    f.size = size;
    f.overrun = (a - base) + n > size;
    return f;
}
inline bool device_accessible(int kind) {
    return kind == MEM_DEVICE || kind == MEM_MANAGED || kind == MEM_PINNED || kind == MEM_SYMBOL;
}
inline const char* kind_name(int kind) {
    switch (kind) {
        case MEM_DEVICE:
            return "device memory (cudaMalloc)";
        case MEM_PINNED:
            return "pinned host memory (cudaMallocHost)";
        case MEM_MANAGED:
            return "managed memory (cudaMallocManaged)";
        case MEM_SYMBOL:
            return "a __device__ symbol";
        default:
            return "host memory not known to CUDA";
    }
}
// The bits of `from` read as a To (C++20's std::bit_cast): __float_as_int and kin.
template <class To, class From>
inline To bit_cast(From from) {
    static_assert(sizeof(To) == sizeof(From), "bit_cast: the sizes differ");
    To to;
    memcpy(&to, &from, sizeof to);
    return to;
}
// The name or text of a library's status code (cudaGetErrorName, cudaGetErrorString, ...):
// one table per function, `other` for a code it does not list.
struct CodeText {
    int code;
    const char* text;
};
template <size_t N>
inline const char* code_text(const CodeText (&table)[N], int code, const char* other) {
    for (const CodeText& t : table)
        if (t.code == code) return t.text;
    return other;
}
// A row of a name table: the enumerator and its own name.
#define CUEMU_NAMED(x) \
    { x, #x }
inline void register_region(const void* p, size_t size, int kind) {
    Registry& r = registry();
    std::lock_guard<std::mutex> lk(r.mu);
    r.regions[(uintptr_t)p] = Region{size, kind};
    if (kind == MEM_DEVICE || kind == MEM_MANAGED) r.device_bytes += size;
}
// Returns the kind of the region that started at p (MEM_NONE if p is no region start).
inline int unregister_region(const void* p, int want_kind_a, int want_kind_b = -1) {
    Registry& r = registry();
    std::lock_guard<std::mutex> lk(r.mu);
    auto it = r.regions.find((uintptr_t)p);
    if (it == r.regions.end()) return MEM_NONE;
    int kind = it->second.kind;
    if (kind != want_kind_a && kind != want_kind_b) return -kind;
    if (kind == MEM_DEVICE || kind == MEM_MANAGED) r.device_bytes -= it->second.size;
    r.regions.erase(it);
    return kind;
}

} // namespace cuemu
