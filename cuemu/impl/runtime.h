// cuemu/impl/runtime.h - the CUDA runtime API calls the trainer uses:
// memory (device memory is host memory, registered so misuse is caught), copies,
// memset, streams and events (operations queued per stream, see streams.h; event
// times are wall time),
// device properties of a plausible fake device, errors, function attributes.
// Devices: CUEMU_DEVICES per node, of which CUDA_VISIBLE_DEVICES selects this process's
// (as CUDA does), each with a PCI bus id from its node ordinal.
// Test-only: part of the CPU emulation of CUDA, never linked into the product.
#pragma once
#include "kernel.h"

#define CUDART_VERSION 13000

enum cudaMemcpyKind {
    cudaMemcpyHostToHost = 0,
    cudaMemcpyHostToDevice = 1,
    cudaMemcpyDeviceToHost = 2,
    cudaMemcpyDeviceToDevice = 3,
    cudaMemcpyDefault = 4
};
enum cudaFuncAttribute {
    cudaFuncAttributeMaxDynamicSharedMemorySize = 8,
    cudaFuncAttributePreferredSharedMemoryCarveout = 9
};
enum cudaDeviceAttr {
    cudaDevAttrMaxThreadsPerBlock = 1,
    cudaDevAttrMaxSharedMemoryPerBlock = 8,
    cudaDevAttrWarpSize = 10,
    cudaDevAttrClockRate = 13,
    cudaDevAttrMultiProcessorCount = 16,
    cudaDevAttrMemoryClockRate = 36,
    cudaDevAttrGlobalMemoryBusWidth = 37,
    cudaDevAttrL2CacheSize = 38,
    cudaDevAttrMaxThreadsPerMultiProcessor = 39,
    cudaDevAttrComputeCapabilityMajor = 75,
    cudaDevAttrComputeCapabilityMinor = 76,
    cudaDevAttrMaxSharedMemoryPerMultiprocessor = 81,
    cudaDevAttrMaxSharedMemoryPerBlockOptin = 97
};
enum cudaLimit { cudaLimitStackSize = 0, cudaLimitPrintfFifoSize = 1, cudaLimitMallocHeapSize = 2 };

// The fields of CUDA 13's cudaDeviceProp that a trainer plausibly reads (same names).
struct cudaDeviceProp {
    char name[256];
    size_t totalGlobalMem;
    size_t sharedMemPerBlock;
    int regsPerBlock;
    int warpSize;
    size_t memPitch;
    int maxThreadsPerBlock;
    int maxThreadsDim[3];
    int maxGridSize[3];
    size_t totalConstMem;
    int major;
    int minor;
    int multiProcessorCount;
    int integrated;
    int canMapHostMemory;
    int concurrentKernels;
    int ECCEnabled;
    int pciBusID;
    int pciDeviceID;
    int pciDomainID;
    int asyncEngineCount;
    int unifiedAddressing;
    int memoryBusWidth;
    int l2CacheSize;
    int persistingL2CacheMaxSize;
    int maxThreadsPerMultiProcessor;
    size_t sharedMemPerMultiprocessor;
    int regsPerMultiprocessor;
    int managedMemory;
    int isMultiGpuBoard;
    int cooperativeLaunch;
    size_t sharedMemPerBlockOptin;
    int maxBlocksPerMultiProcessor;
    size_t reservedSharedMemPerBlock;
    int clusterLaunch;
};
struct cudaFuncAttributes {
    size_t sharedSizeBytes;
    size_t constSizeBytes;
    size_t localSizeBytes;
    int maxThreadsPerBlock;
    int numRegs;
    int ptxVersion;
    int binaryVersion;
    int cacheModeCA;
    int maxDynamicSharedSizeBytes;
    int preferredShmemCarveout;
};

namespace cuemu {
constexpr size_t kTotalMem = 80ull << 30; // what cudaMemGetInfo / totalGlobalMem report
constexpr int kSMs = 132;
inline int& cur_device() {
    static int d = 0;
    return d;
}
inline cudaError_t ret(cudaError_t e) {
    set_error(e);
    return e;
}
// 256-byte aligned like cudaMalloc, and exactly `size` bytes, so that a build with
// -fsanitize=address reports a kernel that writes past the end of a buffer.
inline void* alloc_poisoned(size_t size) {
    size_t n = size ? size : 1;
    void* p = nullptr;
    if (posix_memalign(&p, 256, n) != 0) return nullptr;
    if (config().poison) memset(p, 0xff, n); // NaN everywhere: uninitialised reads show up
    return p;
}
inline cudaError_t bad_pointer(const char* api, const char* which, const void* p, size_t n, const Found& f,
                               const char* want) {
    if (f.kind != MEM_NONE && f.overrun)
        fprintf(stderr, "cuemu: %s: %s %p + %zu bytes runs past the end of its allocation (%p, %zu bytes)\n", api,
                which, p, n, (void*)f.base, f.size);
    else
        fprintf(stderr, "cuemu: %s: %s %p is %s, expected %s\n", api, which, p, kind_name(f.kind), want);
    return ret(cudaErrorInvalidValue);
}
inline bool is_dev(const Found& f) { return f.kind == MEM_DEVICE || f.kind == MEM_MANAGED || f.kind == MEM_SYMBOL; }
// Checks one side of a copy; `device` says what the copy kind claims.
inline bool side_ok(const void* p, size_t n, bool device, Found& f) {
    f = lookup(p, n);
    if (f.kind != MEM_NONE && f.overrun) return false;
    if (device) return is_dev(f);
    return !(f.kind == MEM_DEVICE || f.kind == MEM_SYMBOL);
}
// stream: the stream of an async copy; sync: cudaMemcpy (waits for all earlier work).
inline cudaError_t copy(const char* api, void* dst, const void* src, size_t n, cudaMemcpyKind kind,
                        const void* stream = nullptr, bool async = false, const char* file = nullptr, int line = 0) {
    if (n == 0) return cudaSuccess;
    if ((int)kind < 0 || (int)kind > 4) return ret(cudaErrorInvalidMemcpyDirection);
    if (kind != cudaMemcpyDefault) {
        bool ddev = kind == cudaMemcpyHostToDevice || kind == cudaMemcpyDeviceToDevice;
        bool sdev = kind == cudaMemcpyDeviceToHost || kind == cudaMemcpyDeviceToDevice;
        Found fd, fs;
        if (!side_ok(dst, n, ddev, fd))
            return bad_pointer(api, "destination", dst, n, fd, ddev ? "device memory" : "host memory");
        if (!side_ok(src, n, sdev, fs))
            return bad_pointer(api, "source", src, n, fs, sdev ? "device memory" : "host memory");
    } else {
        Found fd = lookup(dst, n), fs = lookup(src, n);
        if (fd.kind != MEM_NONE && fd.overrun) return bad_pointer(api, "destination", dst, n, fd, "");
        if (fs.kind != MEM_NONE && fs.overrun) return bad_pointer(api, "source", src, n, fs, "");
    }
    Found fs = lookup(src, n), fd = lookup(dst, n);
    std::vector<Access> acc{{dst, n, true}, {src, n, false}};
    if (!async) {
        // cudaMemcpy: an operation of the legacy stream that the host waits for
        issue(
            nullptr, [=] { memmove(dst, src, n); }, acc, api, file, line, true);
        stream_sync(nullptr);
        return cudaSuccess;
    }
    if (fd.kind == MEM_NONE) {
        // into pageable memory the call returns when the copy is done (CUDA stages it)
        issue(
            stream, [=] { memmove(dst, src, n); }, acc, api, file, line, true);
        stream_sync(stream);
        return cudaSuccess;
    }
    if (fs.kind == MEM_NONE) {
        // from pageable memory: staged at the call, so the host may rewrite it at once
        auto stage =
            std::make_shared<std::vector<unsigned char>>((const unsigned char*)src, (const unsigned char*)src + n);
        issue(
            stream, [=] { memmove(dst, stage->data(), n); }, acc, api, file, line);
        return cudaSuccess;
    }
    if (fd.kind == MEM_PINNED && config().poison && !pinned_source_pending(dst, n)) {
        // A pinned destination gets the data only when the copy runs (at the host's
        // synchronisation with it): until then it holds poison, so a host read before
        // the synchronisation sees NaN / -1 instead of passing by luck.
        memset(dst, 0xff, n);
    }
    if (fs.kind == MEM_PINNED) {
        // the copy engine reads the pinned source when the stream reaches the copy
        PinnedCopy c{0,    0,    dst,
                     src,  n,    std::vector<unsigned char>((const unsigned char*)src, (const unsigned char*)src + n),
                     file, line, false};
        issue(stream, std::function<void()>(), acc, api, file, line, false, &c);
        return cudaSuccess;
    }
    issue(
        stream, [=] { memmove(dst, src, n); }, acc, api, file, line);
    return cudaSuccess;
}
inline cudaError_t alloc(void** p, size_t size, int kind) {
    if (!p) return ret(cudaErrorInvalidValue);
    *p = alloc_poisoned(size);
    if (!*p) return ret(cudaErrorMemoryAllocation);
    register_region(*p, size, kind);
    return cudaSuccess;
}
inline cudaError_t release(const char* api, void* p, int kind_a, int kind_b, bool sync = true) {
    if (!p) return cudaSuccess;
    if (sync) device_sync(); // cudaFree/cudaFreeHost wait for the device (the emulation's own scratch does not)
    int k = unregister_region(p, kind_a, kind_b);
    if (k <= 0) {
        fprintf(stderr, "cuemu: %s(%p): not a pointer returned by the matching allocation call (it is %s)\n", api, p,
                kind_name(k < 0 ? -k : lookup(p, 0).kind));
        return ret(cudaErrorInvalidValue);
    }
    detect_forget(p);
    forget_accesses(p);
    free(p);
    return cudaSuccess;
}
inline void fill_props(cudaDeviceProp* p) {
    memset(p, 0, sizeof *p);
    snprintf(p->name, sizeof p->name, "cuemu (CPU emulation of an sm_%d GPU)", arch_limits().arch);
    p->totalGlobalMem = kTotalMem;
    p->sharedMemPerBlock = 48 * 1024;
    p->regsPerBlock = 65536;
    p->warpSize = 32;
    p->memPitch = 2147483647;
    p->maxThreadsPerBlock = 1024;
    p->maxThreadsDim[0] = 1024;
    p->maxThreadsDim[1] = 1024;
    p->maxThreadsDim[2] = 64;
    p->maxGridSize[0] = 2147483647;
    p->maxGridSize[1] = 65535;
    p->maxGridSize[2] = 65535;
    p->totalConstMem = 65536;
    p->major = arch_limits().arch / 10;
    p->minor = 0;
    p->multiProcessorCount = kSMs;
    p->canMapHostMemory = 1;
    p->concurrentKernels = 1;
    p->asyncEngineCount = 2;
    p->unifiedAddressing = 1;
    p->memoryBusWidth = 5120;
    p->l2CacheSize = 50 * 1024 * 1024;
    p->persistingL2CacheMaxSize = 0;
    p->maxThreadsPerMultiProcessor = 2048;
    p->sharedMemPerMultiprocessor = arch_limits().smem_per_sm;
    p->regsPerMultiprocessor = 65536;
    p->managedMemory = 1;
    p->cooperativeLaunch = 1;
    p->sharedMemPerBlockOptin = arch_limits().smem_optin;
    p->maxBlocksPerMultiProcessor = 32;
    p->reservedSharedMemPerBlock = 1024;
    p->clusterLaunch = 1;
}
// cudaGetErrorName's names.
constexpr CodeText kCudaErrorName[] = {
    CUEMU_NAMED(cudaSuccess),
    CUEMU_NAMED(cudaErrorInvalidValue),
    CUEMU_NAMED(cudaErrorMemoryAllocation),
    CUEMU_NAMED(cudaErrorInitializationError),
    CUEMU_NAMED(cudaErrorInvalidConfiguration),
    CUEMU_NAMED(cudaErrorInvalidSymbol),
    CUEMU_NAMED(cudaErrorInvalidDevicePointer),
    CUEMU_NAMED(cudaErrorInvalidMemcpyDirection),
    CUEMU_NAMED(cudaErrorInvalidDeviceFunction),
    CUEMU_NAMED(cudaErrorNoDevice),
    CUEMU_NAMED(cudaErrorInvalidDevice),
    CUEMU_NAMED(cudaErrorInvalidResourceHandle),
    CUEMU_NAMED(cudaErrorNotReady),
    CUEMU_NAMED(cudaErrorIllegalAddress),
    CUEMU_NAMED(cudaErrorLaunchOutOfResources),
    CUEMU_NAMED(cudaErrorAssert),
    CUEMU_NAMED(cudaErrorLaunchFailure),
    CUEMU_NAMED(cudaErrorNotPermitted),
    CUEMU_NAMED(cudaErrorNotSupported),
    CUEMU_NAMED(cudaErrorUnknown),
};
// cudaGetErrorString's texts.
constexpr CodeText kCudaErrorText[] = {
    {cudaSuccess, "no error"},
    {cudaErrorInvalidValue, "invalid argument"},
    {cudaErrorMemoryAllocation, "out of memory"},
    {cudaErrorInitializationError, "initialization error"},
    {cudaErrorInvalidConfiguration, "invalid configuration argument"},
    {cudaErrorInvalidSymbol, "invalid device symbol"},
    {cudaErrorInvalidDevicePointer, "invalid device pointer"},
    {cudaErrorInvalidMemcpyDirection, "invalid copy direction for memcpy"},
    {cudaErrorInvalidDeviceFunction, "invalid device function"},
    {cudaErrorNoDevice, "no CUDA-capable device is detected"},
    {cudaErrorInvalidDevice, "invalid device ordinal"},
    {cudaErrorInvalidResourceHandle, "invalid resource handle"},
    {cudaErrorNotReady, "device not ready"},
    {cudaErrorIllegalAddress, "an illegal memory access was encountered"},
    {cudaErrorLaunchOutOfResources, "too many resources requested for launch"},
    {cudaErrorAssert, "device-side assert triggered"},
    {cudaErrorLaunchFailure, "unspecified launch failure"},
    {cudaErrorNotPermitted, "operation not permitted"},
    {cudaErrorNotSupported, "operation not supported"},
};
} // namespace cuemu

// ---------------------------------------------------------------- errors
static inline cudaError_t cudaGetLastError() {
    cudaError_t e = cuemu::ex().last_error;
    cuemu::ex().last_error = cudaSuccess;
    return e;
}
static inline cudaError_t cudaPeekAtLastError() { return cuemu::ex().last_error; }
static inline const char* cudaGetErrorName(cudaError_t e) {
    return cuemu::code_text(cuemu::kCudaErrorName, e, "cudaErrorUnknown");
}
static inline const char* cudaGetErrorString(cudaError_t e) {
    return cuemu::code_text(cuemu::kCudaErrorText, e, "unknown error");
}

// ---------------------------------------------------------------- device management
namespace cuemu {
// The node has CUEMU_DEVICES devices. As in CUDA, CUDA_VISIBLE_DEVICES (when set) lists the
// node ordinals this process sees, in its order: "2,0" makes node device 2 this process's
// device 0. The list ends at the first entry that is not an unused ordinal of the node; set
// but empty, no device is visible. A device's PCI bus id comes from its node ordinal, so
// processes that see one device under different ordinals can tell (cudaDeviceGetPCIBusId).
constexpr int kMaxDevices = 256;
struct Visible {
    int n;
    int node[kMaxDevices];
};
inline const Visible& visible() {
    static const Visible v = [] {
        Visible x;
        memset(&x, 0, sizeof x);
        int total = std::min(config().devices, kMaxDevices);
        const char* p = getenv("CUDA_VISIBLE_DEVICES");
        if (p == nullptr) {
            for (int i = 0; i < total; i++) x.node[x.n++] = i;
            return x;
        }
        while (*p != '\0' && x.n < kMaxDevices) {
            char* end = nullptr;
            long k = strtol(p, &end, 10);
            if (end == p || k < 0 || k >= total) break;
            bool used = false;
            for (int i = 0; i < x.n; i++) used = used || x.node[i] == (int)k;
            if (used) break;
            x.node[x.n++] = (int)k;
            p = end;
            if (*p == ',')
                p++;
            else
                break;
        }
        return x;
    }();
    return v;
}
inline int device_count() { return visible().n; }
inline bool valid_device(int d) { return d >= 0 && d < device_count(); }
inline int pci_bus(int d) { return 0x18 + visible().node[d]; }
} // namespace cuemu

static inline cudaError_t cudaGetDeviceCount(int* count) {
    if (!count) return cuemu::ret(cudaErrorInvalidValue);
    *count = cuemu::device_count();
    return *count > 0 ? cudaSuccess : cuemu::ret(cudaErrorNoDevice); // as CUDA with no device
}
static inline cudaError_t cudaDeviceGetPCIBusId(char* id, int len, int d) {
    if (!id || len < 13) return cuemu::ret(cudaErrorInvalidValue);
    if (!cuemu::valid_device(d)) return cuemu::ret(cudaErrorInvalidDevice);
    snprintf(id, (size_t)len, "0000:%02x:00.0", cuemu::pci_bus(d));
    return cudaSuccess;
}
static inline cudaError_t cudaSetDevice(int d) {
    if (!cuemu::valid_device(d)) return cuemu::ret(cudaErrorInvalidDevice);
    cuemu::cur_device() = d;
    return cudaSuccess;
}
static inline cudaError_t cudaGetDevice(int* d) {
    if (!d) return cuemu::ret(cudaErrorInvalidValue);
    *d = cuemu::cur_device();
    return cudaSuccess;
}
static inline cudaError_t cudaSetDeviceFlags(unsigned) { return cudaSuccess; }
namespace cuemu {
// CUEMU_SYNC_LOG=FILE: the number of host waits on the device (cudaDeviceSynchronize,
// cudaStreamSynchronize, cudaEventSynchronize, blocking cudaMemcpy; the queries too) is written to FILE at exit,
// so a test can count a program's synchronisations without trusting the program's own count.
inline long& sync_count() {
    static long n = [] {
        if (getenv("CUEMU_SYNC_LOG") != nullptr)
            atexit([] {
                FILE* f = fopen(getenv("CUEMU_SYNC_LOG"), "w");
                if (f) {
                    fprintf(f, "%ld\n", sync_count());
                    fclose(f);
                }
            });
        return 0L;
    }();
    return n;
}
} // namespace cuemu
static inline cudaError_t cudaDeviceSynchronize() {
    cuemu::sync_count()++;
    cuemu::device_sync();
    return cudaSuccess;
}
static inline cudaError_t cudaDeviceReset() { return cudaSuccess; }
static inline cudaError_t cudaDeviceSetLimit(cudaLimit, size_t) { return cudaSuccess; }
static inline cudaError_t cudaGetDeviceProperties(cudaDeviceProp* p, int d) {
    if (!p) return cuemu::ret(cudaErrorInvalidValue);
    if (!cuemu::valid_device(d)) return cuemu::ret(cudaErrorInvalidDevice);
    cuemu::fill_props(p);
    p->pciBusID = cuemu::pci_bus(d);
    return cudaSuccess;
}
static inline cudaError_t cudaDeviceGetAttribute(int* value, cudaDeviceAttr attr, int d) {
    if (!value) return cuemu::ret(cudaErrorInvalidValue);
    if (!cuemu::valid_device(d)) return cuemu::ret(cudaErrorInvalidDevice);
    cudaDeviceProp p;
    cuemu::fill_props(&p);
    switch (attr) {
        case cudaDevAttrMaxThreadsPerBlock:
            *value = p.maxThreadsPerBlock;
            break;
        case cudaDevAttrMaxSharedMemoryPerBlock:
            *value = (int)p.sharedMemPerBlock;
            break;
        case cudaDevAttrWarpSize:
            *value = 32;
            break;
        case cudaDevAttrClockRate:
            *value = 1980000;
            break;
        case cudaDevAttrMultiProcessorCount:
            *value = p.multiProcessorCount;
            break;
        case cudaDevAttrMemoryClockRate:
            *value = 2619000;
            break;
        case cudaDevAttrGlobalMemoryBusWidth:
            *value = p.memoryBusWidth;
            break;
        case cudaDevAttrL2CacheSize:
            *value = p.l2CacheSize;
            break;
        case cudaDevAttrMaxThreadsPerMultiProcessor:
            *value = p.maxThreadsPerMultiProcessor;
            break;
        case cudaDevAttrComputeCapabilityMajor:
            *value = p.major;
            break;
        case cudaDevAttrComputeCapabilityMinor:
            *value = p.minor;
            break;
        case cudaDevAttrMaxSharedMemoryPerMultiprocessor:
            *value = (int)p.sharedMemPerMultiprocessor;
            break;
        case cudaDevAttrMaxSharedMemoryPerBlockOptin:
            *value = (int)p.sharedMemPerBlockOptin;
            break;
        default:
            return cuemu::ret(cudaErrorInvalidValue);
    }
    return cudaSuccess;
}
static inline cudaError_t cudaRuntimeGetVersion(int* v) {
    *v = CUDART_VERSION;
    return cudaSuccess;
}
static inline cudaError_t cudaDriverGetVersion(int* v) {
    *v = CUDART_VERSION;
    return cudaSuccess;
}
static inline cudaError_t cudaMemGetInfo(size_t* free_bytes, size_t* total_bytes) {
    size_t used = cuemu::registry().device_bytes;
    if (free_bytes) *free_bytes = used < cuemu::kTotalMem ? cuemu::kTotalMem - used : 0;
    if (total_bytes) *total_bytes = cuemu::kTotalMem;
    return cudaSuccess;
}

// ---------------------------------------------------------------- memory
static inline cudaError_t cudaMalloc(void** p, size_t size) { return cuemu::alloc(p, size, cuemu::MEM_DEVICE); }
static inline cudaError_t cudaMallocManaged(void** p, size_t size, unsigned = cudaMemAttachGlobal) {
    return cuemu::alloc(p, size, cuemu::MEM_MANAGED);
}
static inline cudaError_t cudaMallocHost(void** p, size_t size) { return cuemu::alloc(p, size, cuemu::MEM_PINNED); }
static inline cudaError_t cudaHostAlloc(void** p, size_t size, unsigned) {
    return cuemu::alloc(p, size, cuemu::MEM_PINNED);
}
static inline cudaError_t cudaMallocAsync(void** p, size_t size, cudaStream_t) {
    return cuemu::alloc(p, size, cuemu::MEM_DEVICE);
}
template <class T>
static inline cudaError_t cudaMalloc(T** p, size_t size) {
    return cudaMalloc((void**)(void*)p, size);
}
template <class T>
static inline cudaError_t cudaMallocManaged(T** p, size_t size, unsigned f = cudaMemAttachGlobal) {
    return cudaMallocManaged((void**)(void*)p, size, f);
}
template <class T>
static inline cudaError_t cudaMallocHost(T** p, size_t size) {
    return cudaMallocHost((void**)(void*)p, size);
}
template <class T>
static inline cudaError_t cudaHostAlloc(T** p, size_t size, unsigned f) {
    return cudaHostAlloc((void**)(void*)p, size, f);
}
template <class T>
static inline cudaError_t cudaMallocAsync(T** p, size_t size, cudaStream_t s) {
    return cudaMallocAsync((void**)(void*)p, size, s);
}
static inline cudaError_t cudaFree(void* p) {
    return cuemu::release("cudaFree", p, cuemu::MEM_DEVICE, cuemu::MEM_MANAGED);
}
static inline cudaError_t cudaFreeAsync(void* p, cudaStream_t) {
    return cuemu::release("cudaFreeAsync", p, cuemu::MEM_DEVICE, cuemu::MEM_MANAGED);
}
static inline cudaError_t cudaFreeHost(void* p) {
    return cuemu::release("cudaFreeHost", p, cuemu::MEM_PINNED, cuemu::MEM_PINNED);
}
static inline cudaError_t cudaHostRegister(void* p, size_t size, unsigned) {
    cuemu::register_region(p, size, cuemu::MEM_PINNED);
    return cudaSuccess;
}
static inline cudaError_t cudaHostUnregister(void* p) {
    cuemu::device_sync();
    return cuemu::unregister_region(p, cuemu::MEM_PINNED) == cuemu::MEM_PINNED ? cudaSuccess
                                                                               : cuemu::ret(cudaErrorInvalidValue);
}
static inline cudaError_t cudaMemcpy(void* dst, const void* src, size_t n, cudaMemcpyKind kind,
                                     const char* file = __builtin_FILE(), int line = __builtin_LINE()) {
    cuemu::sync_count()++; // blocking: the host waits for the device
    return cuemu::copy("cudaMemcpy", dst, src, n, kind, nullptr, false, file, line);
}
static inline cudaError_t cudaMemcpyAsync(void* dst, const void* src, size_t n, cudaMemcpyKind kind, cudaStream_t s = 0,
                                          const char* file = __builtin_FILE(), int line = __builtin_LINE()) {
    return cuemu::copy("cudaMemcpyAsync", dst, src, n, kind, s, true, file, line);
}
namespace cuemu {
inline cudaError_t memset_op(const char* api, void* p, int value, size_t n, const void* s, const char* file, int line) {
    if (n == 0) return cudaSuccess;
    Found f;
    if (!side_ok(p, n, true, f)) return bad_pointer(api, "destination", p, n, f, "device memory");
    issue(
        s, [=] { memset(p, value, n); }, {{p, n, true}}, api, file, line);
    return cudaSuccess;
}
} // namespace cuemu
static inline cudaError_t cudaMemset(void* p, int value, size_t n, const char* file = __builtin_FILE(),
                                     int line = __builtin_LINE()) {
    return cuemu::memset_op("cudaMemset", p, value, n, nullptr, file, line);
}
static inline cudaError_t cudaMemsetAsync(void* p, int value, size_t n, cudaStream_t s = 0,
                                          const char* file = __builtin_FILE(), int line = __builtin_LINE()) {
    return cuemu::memset_op("cudaMemsetAsync", p, value, n, s, file, line);
}
template <class T>
static inline cudaError_t cudaMemcpyToSymbol(const T& symbol, const void* src, size_t n, size_t offset = 0,
                                             cudaMemcpyKind = cudaMemcpyHostToDevice) {
    if (offset + n > sizeof(T)) return cuemu::ret(cudaErrorInvalidValue);
    cuemu::device_sync();
    memmove((char*)&symbol + offset, src, n);
    return cudaSuccess;
}
template <class T>
static inline cudaError_t cudaMemcpyFromSymbol(void* dst, const T& symbol, size_t n, size_t offset = 0,
                                               cudaMemcpyKind = cudaMemcpyDeviceToHost) {
    if (offset + n > sizeof(T)) return cuemu::ret(cudaErrorInvalidValue);
    cuemu::device_sync();
    memmove(dst, (const char*)&symbol + offset, n);
    return cudaSuccess;
}
template <class T>
static inline cudaError_t cudaMemcpyToSymbolAsync(const T& symbol, const void* src, size_t n, size_t offset = 0,
                                                  cudaMemcpyKind k = cudaMemcpyHostToDevice, cudaStream_t = 0) {
    return cudaMemcpyToSymbol(symbol, src, n, offset, k);
}
template <class T>
static inline cudaError_t cudaGetSymbolAddress(void** p, const T& symbol) {
    *p = (void*)&symbol;
    if (cuemu::lookup(*p, 0).kind == cuemu::MEM_NONE) cuemu::register_region(*p, sizeof(T), cuemu::MEM_SYMBOL);
    return cudaSuccess;
}

// ---------------------------------------------------------------- streams and events
static inline cudaError_t cudaStreamCreate(cudaStream_t* s) {
    *s = new CUstream_st{0, 0};
    cuemu::stream_set_flags(*s, 0);
    return cudaSuccess;
}
static inline cudaError_t cudaStreamCreateWithFlags(cudaStream_t* s, unsigned flags) {
    *s = new CUstream_st{flags, 0};
    cuemu::stream_set_flags(*s, flags);
    return cudaSuccess;
}
static inline cudaError_t cudaStreamCreateWithPriority(cudaStream_t* s, unsigned flags, int prio) {
    *s = new CUstream_st{flags, prio};
    cuemu::stream_set_flags(*s, flags);
    return cudaSuccess;
}
static inline cudaError_t cudaDeviceGetStreamPriorityRange(int* least, int* greatest) {
    if (least) *least = 0;
    if (greatest) *greatest = -5;
    return cudaSuccess;
}
static inline bool cuemu_is_special_stream(cudaStream_t s) {
    return s == nullptr || s == cudaStreamLegacy || s == cudaStreamPerThread;
}
static inline cudaError_t cudaStreamDestroy(cudaStream_t s) {
    if (cuemu_is_special_stream(s)) return cuemu::ret(cudaErrorInvalidResourceHandle);
    cuemu::stream_forget(s);
    delete s;
    return cudaSuccess;
}
static inline cudaError_t cudaStreamSynchronize(cudaStream_t s) {
    cuemu::sync_count()++;
    cuemu::stream_sync(s);
    return cudaSuccess;
}
static inline cudaError_t cudaStreamQuery(cudaStream_t s) {
    cuemu::sync_count()++;
    cuemu::stream_sync(s);
    return cudaSuccess;
} // always done
static inline cudaError_t cudaEventCreate(cudaEvent_t* e) {
    *e = new CUevent_st{0, false, 0.0, nullptr, 0, {}};
    return cudaSuccess;
}
static inline cudaError_t cudaEventCreateWithFlags(cudaEvent_t* e, unsigned flags) {
    *e = new CUevent_st{flags, false, 0.0, nullptr, 0, {}};
    return cudaSuccess;
}
static inline cudaError_t cudaEventDestroy(cudaEvent_t e) {
    if (!e) return cuemu::ret(cudaErrorInvalidResourceHandle);
    delete e;
    return cudaSuccess;
}
static inline cudaError_t cudaEventRecord(cudaEvent_t e, cudaStream_t s = 0) {
    if (!e) return cuemu::ret(cudaErrorInvalidResourceHandle);
    cuemu::event_record(s, e->stream, e->seq, e->vc); // completes with the stream's work issued so far
    e->recorded = true;
    e->t_ms = cuemu::now_ms();
    return cudaSuccess;
}
static inline cudaError_t cudaEventSynchronize(cudaEvent_t e) {
    if (!e) return cuemu::ret(cudaErrorInvalidResourceHandle);
    cuemu::sync_count()++;
    if (e->recorded) cuemu::event_sync(e->stream, e->seq, e->vc);
    return cudaSuccess;
}
static inline cudaError_t cudaEventQuery(cudaEvent_t e) { return cudaEventSynchronize(e); } // always complete
// The waiting stream's later work runs after the event's stream reached the event and
// happens after everything the event covers (the host learns nothing).
static inline cudaError_t cudaStreamWaitEvent(cudaStream_t s, cudaEvent_t e, unsigned = 0) {
    if (!e) return cuemu::ret(cudaErrorInvalidResourceHandle);
    if (e->recorded) cuemu::stream_wait(s, e->stream, e->seq, e->vc);
    return cudaSuccess;
}
static inline cudaError_t cudaEventElapsedTime(float* ms, cudaEvent_t start, cudaEvent_t end) {
    if (!ms || !start || !end) return cuemu::ret(cudaErrorInvalidValue);
    if ((start->flags | end->flags) & cudaEventDisableTiming) return cuemu::ret(cudaErrorInvalidResourceHandle);
    if (!start->recorded || !end->recorded) return cuemu::ret(cudaErrorNotReady);
    *ms = (float)(end->t_ms - start->t_ms);
    return cudaSuccess;
}

// ---------------------------------------------------------------- function attributes and occupancy
static inline cudaError_t cudaFuncSetAttribute(const void* func, cudaFuncAttribute attr, int value) {
    if (!func) return cuemu::ret(cudaErrorInvalidDeviceFunction);
    if (attr == cudaFuncAttributeMaxDynamicSharedMemorySize) {
        if (value < 0 || (size_t)value > cuemu::arch_limits().smem_optin) return cuemu::ret(cudaErrorInvalidValue);
        cuemu::ex().max_dyn_smem[func] = value;
        return cudaSuccess;
    }
    if (attr == cudaFuncAttributePreferredSharedMemoryCarveout) return cudaSuccess;
    return cuemu::ret(cudaErrorInvalidValue);
}
template <class T>
static inline cudaError_t cudaFuncSetAttribute(T* entry, cudaFuncAttribute attr, int value) {
    return cudaFuncSetAttribute(reinterpret_cast<const void*>(entry), attr, value);
}
static inline cudaError_t cudaFuncGetAttributes(cudaFuncAttributes* a, const void* func) {
    if (!a || !func) return cuemu::ret(cudaErrorInvalidValue);
    memset(a, 0, sizeof *a);
    a->maxThreadsPerBlock = 1024;
    a->numRegs = 32;
    a->ptxVersion = cuemu::arch_limits().arch;
    a->binaryVersion = cuemu::arch_limits().arch;
    a->maxDynamicSharedSizeBytes = cuemu::dyn_smem_limit(func);
    return cudaSuccess;
}
template <class T>
static inline cudaError_t cudaFuncGetAttributes(cudaFuncAttributes* a, T* entry) {
    return cudaFuncGetAttributes(a, reinterpret_cast<const void*>(entry));
}
template <class T>
static inline cudaError_t cudaOccupancyMaxActiveBlocksPerMultiprocessor(int* n, T func, int blockSize, size_t dynSmem) {
    (void)func;
    if (!n || blockSize <= 0 || blockSize > 1024) return cuemu::ret(cudaErrorInvalidValue);
    int warps = (blockSize + 31) / 32;
    int by_threads = 64 / warps;
    int by_smem = dynSmem ? (int)(cuemu::arch_limits().smem_per_sm / (dynSmem + 1024)) : 32;
    *n = std::max(0, std::min({32, by_threads, by_smem}));
    return cudaSuccess;
}
