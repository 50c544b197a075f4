// cuemu/impl/detect.h - the race detectors of the CPU emulation of CUDA.
// Built on the compiler's ThreadSanitizer instrumentation WITHOUT its runtime:
// cuemu.mk compiles with -fsanitize=thread (every load and store calls
// __tsan_readN / __tsan_writeN) and links an empty libtsan, and this file
// defines those hooks. While an emulated GPU thread runs they check:
//  - shared memory (static __shared__, i.e. the program's static storage, which also
//    holds __device__ variables, and the dynamic buffer): two different threads of a block
//    touch the same 2-byte granule in one barrier interval, at least one writing,
//    and no __syncwarp of their warp lies between -> fatal, with the kernel and
//    the source lines of both accesses. The verdict does not depend on the order
//    in which the fibers happen to run: every access of the interval is kept.
//  - global memory (cudaMalloc/Managed/Host): two different blocks of one launch
//    write the same granule without an atomic -> fatal, with both lines.
// Atomics are not instrumented (kernel.h marks them no_sanitize_thread), so they
// never count as racing accesses. Without -fsanitize=thread (e.g. clang, or
// CUEMU_DETECT=0 in make) the hooks are never called and nothing is checked.
// CUEMU_RACECHECK=0 turns both detectors off at run time.
// The same hooks also record, for the cross-stream hazard detector (streams.h), the
// exact bytes of device memory every launch reads and writes (a read bitmap and a write
// bitmap per touched 4 KiB page, atomics included: kernel.h calls track_atomic), summed
// up after the grid as byte ranges per allocation (launch_ranges). CUEMU_TRACK_RANGES is
// 1 when the hooks exist; without them streams.h falls back to whole allocations.
// Test-only: part of the CPU emulation of CUDA, never linked into the product.
#pragma once
#include "base.h"
#include <dlfcn.h>
#include <sys/mman.h>
#include <unistd.h>
#include <string>
#include <unordered_map>

#if defined(__SANITIZE_THREAD__)
#define CUEMU_TRACK_RANGES 1
#else
#define CUEMU_TRACK_RANGES 0
#endif

// noinline only under the detectors: inlined into an instrumented caller, the function's accesses
// would be instrumented after all; elsewhere the switch path (yield, enter) is inlined.
#if CUEMU_TRACK_RANGES
#define CUEMU_NOTSAN __attribute__((no_sanitize_thread, noinline))
#else
#define CUEMU_NOTSAN __attribute__((no_sanitize_thread))
#endif
#define CUEMU_NOTSAN_INL __attribute__((no_sanitize_thread, always_inline)) inline
#define CUEMU_HOOK extern "C" __attribute__((weak, no_sanitize_thread))

// The executable's static storage (.data and .bss), where every static __shared__
// variable lives (the linker's symbols).
extern "C" {
extern char __data_start[] __attribute__((weak));
extern char _end[] __attribute__((weak));
}

namespace cuemu {

// One per 2-byte granule of shared memory. stamp identifies (block, barrier
// interval); an entry with an older stamp is empty. Thread ids are linear + 1.
struct ShadowS {
    uint32_t stamp;
    uint16_t w;                // last writer (0 = none)
    uint16_t r1, r2;           // the first two distinct readers
    uint16_t rwarp;            // warp of all readers, 0xffff when they span warps
    uint8_t many, pad;         // more than two readers (their generations folded into gx)
    uint32_t wgen, g1, g2, gx; // the lane's __syncwarp generation at the write / reads
    uintptr_t wpc, rpc;        // code addresses of the write / the first read
};
struct GRegion {
    uintptr_t lo, hi;
    uint64_t* shadow;
};
// The bytes of one 4 KiB page the running launch has read (r) and written (w), one bit each.
struct PageBits {
    uintptr_t page;
    uint64_t r[64], w[64];
};
constexpr int kPageCacheBits = 8; // direct-mapped cache of the launch's pages
// The hooks must not call instrumented code (it would call the hooks again), and an
// instrumented inline function (std::vector::operator[], a lambda) is not inlined into
// a no_sanitize_thread one: the hot path below uses raw pointers only.

struct Detect {
    bool on = true;
    long check_blocks = 8;              // blocks per launch whose shared memory is checked (0: all)
    bool shared_on = true;              // this block's shared accesses are checked
    uint32_t stamp = 1;                 // bumped at every block start and barrier release
    uint64_t launch = 0;                // launch counter (global granules)
    int tid = -1, warp = 0;             // the emulated thread that is running
    uint32_t wgen = 0;                  // its warp's __syncwarp generation it has seen
    const uint32_t* warp_gen = nullptr; // per-warp generation counters (kernel.h)
    uintptr_t slo = 0, shi = 0;         // static shared section
    uintptr_t dlo = 0, dhi = 0;         // dynamic shared memory of this launch
    uintptr_t klo = 0, khi = 0;         // the running thread's stack (kernel.h enter())
    uintptr_t glo = 0, ghi = 0;         // hull of the device regions
    ShadowS* sshadow = nullptr;         // mapped lazily by the kernel (only touched pages cost memory)
    std::vector<ShadowS> dshadow;
    ShadowS* dsh = nullptr;       // dshadow.data()
    std::vector<GRegion> regions; // device regions, sorted, for this launch
    GRegion* reg = nullptr;       // regions.data()
    size_t nreg = 0;
    std::map<uintptr_t, std::vector<uint64_t>*> gshadow; // by region base
    size_t last = 0;
    unsigned long long block = 0;
    const char* kname = "";
    // Byte-range tracking (streams.h sets `track` for the launches it needs it for).
    bool track = false;             // record this launch's device-memory bytes
    bool active = false;            // the hooks work while a thread runs: on || track
    uintptr_t symlo = 0, symhi = 0; // hull of the __device__ symbol regions in static storage
    PageBits* pcache[1 << kPageCacheBits] = {};
    std::unordered_map<uintptr_t, PageBits*> pages; // the launch's touched pages
    std::vector<PageBits*> used, pool;              // touched this launch / cleared, for reuse
    Detect() {
        if (const char* s = getenv("CUEMU_RACECHECK")) on = atoi(s) != 0;
        if (const char* s = getenv("CUEMU_RACECHECK_BLOCKS")) check_blocks = atol(s);
        slo = (uintptr_t)__data_start;
        shi = (uintptr_t)_end;
        if (shi > slo) {
            void* m = mmap(nullptr, (shi - slo + 2) / 2 * sizeof(ShadowS), PROT_READ | PROT_WRITE,
                           MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
            if (m == MAP_FAILED)
                shi = slo;
            else
                sshadow = (ShadowS*)m;
        }
    }
};
// A plain global, not a function-local static: its guard would cost an atomic load per access.
inline Detect g_det;
__attribute__((no_sanitize_thread, always_inline)) inline Detect& det() { return g_det; }
// Set only while an emulated thread runs (kernel.h run_pass()); thread_local so that
// host threads (OpenMP in the reference code) never touch the detector.
inline thread_local bool t_active = false;

// "file:line" of a code address, through addr2line on our own executable.
CUEMU_NOTSAN inline std::string where(uintptr_t pc) {
    if (!pc) return "?";
    Dl_info di;
    uintptr_t off = pc - 1;
    if (dladdr((void*)pc, &di) && di.dli_fbase) off = pc - 1 - (uintptr_t)di.dli_fbase;
    char cmd[512];
    snprintf(cmd, sizeof cmd, "addr2line -i -e /proc/%d/exe 0x%lx 2>/dev/null", (int)getpid(), (unsigned long)off);
    std::string out;
    if (FILE* p = popen(cmd, "r")) {
        char line[512];
        int n = 0;
        while (fgets(line, sizeof line, p) && n < 3) {
            line[strcspn(line, "\n")] = 0;
            const char* base = strstr(line, "/llmc/") ? strstr(line, "/llmc/") + 1
                                                      : (strstr(line, "/dev/") ? strstr(line, "/dev/") + 1 : line);
            if (n) out += " <- ";
            out += base;
            n++;
        }
        pclose(p);
    }
    if (out.empty() || out[0] == '?') {
        char b[64];
        snprintf(b, sizeof b, "pc 0x%lx (no line info)", (unsigned long)off);
        out = b;
    }
    return out;
}

void thread_desc(int linear, char* buf, size_t n); // kernel.h
[[noreturn]] void race_die(const char* msg);       // kernel.h

[[noreturn]] CUEMU_NOTSAN inline void report_shared(const char* what, int t1, uintptr_t pc1, int t2, uintptr_t pc2,
                                                    uintptr_t addr) {
    Detect& d = det();
    t_active = false;
    char a[64], b[64], loc[160], msg[2048];
    thread_desc(t1, a, sizeof a);
    thread_desc(t2, b, sizeof b);
    if (addr >= d.dlo && addr < d.dhi)
        snprintf(loc, sizeof loc, "dynamic shared memory, byte offset %lu", (unsigned long)(addr - d.dlo));
    else
        snprintf(loc, sizeof loc, "static __shared__ memory %p", (void*)addr);
    snprintf(msg, sizeof msg,
             "shared-memory race (%s) in kernel %s: %s at %s and %s at %s touch %s in the same barrier interval "
             "(no __syncthreads or __syncwarp between them)",
             what, d.kname, a, where(pc1).c_str(), b, where(pc2).c_str(), loc);
    race_die(msg);
}

CUEMU_NOTSAN_INL void shared_access(ShadowS& s, bool write, uintptr_t pc, uintptr_t addr) {
    Detect& d = det();
    uint16_t me = (uint16_t)(d.tid + 1);
    if (s.stamp != d.stamp) {
        s.stamp = d.stamp;
        s.w = s.r1 = s.r2 = 0;
        s.many = 0;
        s.rwarp = 0xffff;
        s.gx = 0;
    }
    // An earlier access by thread `other` at generation `gen` is ordered before this one when
    // both are lanes of one warp and this lane has since passed a __syncwarp with it.
#define ordered(other, gen) ((((other)-1) >> 5) == d.warp && (gen) < d.wgen)
    if (s.w && s.w != me && !ordered(s.w, s.wgen))
        report_shared(write ? "write after write" : "read after write", s.w - 1, s.wpc, d.tid, pc, addr);
    if (write) {
        int other = 0;
        if (s.r1 && s.r1 != me && !ordered(s.r1, s.g1))
            other = s.r1;
        else if (s.r2 && s.r2 != me && !ordered(s.r2, s.g2))
            other = s.r2;
        else if (s.many && !(s.rwarp == (uint16_t)d.warp && s.gx < d.wgen))
            other = -1;
        if (other)
            report_shared("write after read", other > 0 ? other - 1 : -1, other == s.r1 ? s.rpc : 0, d.tid, pc, addr);
        s.w = me;
        s.wgen = d.wgen;
        s.wpc = pc;
#undef ordered
    } else {
        if (s.r1 == me && !s.r2) {
            s.g1 = d.wgen;
            return;
        } // fast paths: nothing new to record
        if (s.many && (s.rwarp == 0xffff || s.rwarp == (uint16_t)d.warp) && d.wgen <= s.gx) return;
        if (!s.r1) {
            s.r1 = me;
            s.g1 = d.wgen;
            s.rpc = pc;
            s.rwarp = (uint16_t)d.warp;
            return;
        }
        if (s.rwarp != (uint16_t)d.warp) s.rwarp = 0xffff;
        if (s.r1 == me)
            s.g1 = d.wgen;
        else if (!s.r2 || s.r2 == me) {
            s.r2 = me;
            s.g2 = d.wgen;
        } else {
            s.many = 1;
            if (d.wgen > s.gx) s.gx = d.wgen;
        }
    }
}

[[noreturn]] CUEMU_NOTSAN inline void report_global(unsigned long long b1, unsigned long long b2, uintptr_t addr,
                                                    const GRegion& g, uintptr_t pc) {
    Detect& d = det();
    t_active = false;
    char msg[1024];
    snprintf(
        msg, sizeof msg,
        "global-memory race in kernel %s: blocks %llu and %llu (linear ids) of one launch both write byte %lu of "
        "the allocation at %p without an atomic (the order between blocks is undefined on a GPU); this write at %s",
        d.kname, b1, b2, (unsigned long)(addr - g.lo), (void*)g.lo, where(pc).c_str());
    race_die(msg);
}

// The first region (they are sorted and disjoint) that ends above address a; d.nreg if none.
// Called with the hooks switched off.
inline size_t first_region_ending_above(const Detect& d, uintptr_t a) {
    size_t lo = 0, hi = d.nreg;
    while (lo < hi) {
        size_t m = (lo + hi) / 2;
        if (d.reg[m].hi <= a)
            lo = m + 1;
        else
            hi = m;
    }
    return lo;
}

// Slow path (a new region): called with the hooks switched off.
inline GRegion* find_region_shadow_impl(uintptr_t a) {
    Detect& d = det();
    size_t lo = first_region_ending_above(d, a);
    if (lo >= d.nreg || a < d.reg[lo].lo) return nullptr;
    d.last = lo;
    GRegion& g = d.reg[lo];
    if (!g.shadow) {
        auto it = d.gshadow.find(g.lo);
        if (it == d.gshadow.end())
            it = d.gshadow.emplace(g.lo, new std::vector<uint64_t>((g.hi - g.lo + 1) / 2, 0)).first;
        g.shadow = it->second->data();
    }
    return &g;
}
CUEMU_NOTSAN inline GRegion* find_region_shadow(uintptr_t a) {
    t_active = false;
    GRegion* g = find_region_shadow_impl(a);
    t_active = true;
    return g;
}

CUEMU_NOTSAN_INL void global_write(uintptr_t a, size_t n, uintptr_t pc) {
    Detect& d = det();
    GRegion* g = d.reg + d.last;
    if (d.last >= d.nreg || a < g->lo || a >= g->hi || !g->shadow) {
        g = find_region_shadow(a);
        if (!g) return; // not device memory: the heap, a host buffer
    }
    uint64_t tag = (d.launch << 24) | ((d.block + 1) & 0xffffff);
    for (uintptr_t p = a & ~(uintptr_t)1; p < a + n && p < g->hi; p += 2) {
        uint64_t& s = g->shadow[(p - g->lo) >> 1];
        if ((s >> 24) == d.launch && s != tag) report_global((s & 0xffffff) - 1, d.block, p, *g, pc);
        s = tag;
    }
}
// ---------------------------------------------------------------- byte ranges of a launch
// Slow path (a page not in the cache): called with the hooks switched off.
inline PageBits* page_slow_impl(uintptr_t pg, size_t slot) {
    Detect& d = det();
    PageBits*& e = d.pages[pg];
    if (!e) {
        if (d.pool.empty()) {
            e = (PageBits*)calloc(1, sizeof(PageBits));
            if (!e) {
                fprintf(stderr, "cuemu: out of memory for the range tracker\n");
                abort();
            }
        } else {
            e = d.pool.back();
            d.pool.pop_back();
        }
        e->page = pg;
        d.used.push_back(e);
    }
    d.pcache[slot] = e;
    return e;
}
CUEMU_NOTSAN inline PageBits* page_slow(uintptr_t pg, size_t slot) {
    bool was = t_active;
    t_active = false;
    PageBits* e = page_slow_impl(pg, slot);
    t_active = was;
    return e;
}
CUEMU_NOTSAN_INL void set_bits(uint64_t* b, size_t off, size_t k) {
    while (k) {
        size_t sh = off & 63, t = 64 - sh < k ? 64 - sh : k;
        b[off >> 6] |= (t == 64 ? ~0ull : ((1ull << t) - 1)) << sh;
        off += t;
        k -= t;
    }
}
// Bytes [a, a+n) read or written by the running launch.
CUEMU_NOTSAN_INL void track_bytes(uintptr_t a, size_t n, bool write) {
    Detect& d = det();
    for (;;) {
        uintptr_t pg = a >> 12;
        size_t off = a & 4095, k = n < 4096 - off ? n : 4096 - off;
        size_t slot = (size_t)((pg * 0x9e3779b97f4a7c15ull) >> (64 - kPageCacheBits));
        PageBits* e = d.pcache[slot];
        if (!e || e->page != pg) e = page_slow(pg, slot);
        set_bits(write ? e->w : e->r, off, k);
        if (k >= n) return;
        a += k;
        n -= k;
    }
}
// Only what may be device memory: inside the hull of the regions, not the thread's stack,
// not dynamic shared memory, not static storage unless a __device__ symbol lies there.
// (Whatever else gets through, e.g. the heap copy of the launch's parameters, is dropped
// by launch_ranges, which keeps the bytes inside registered regions only.)
CUEMU_NOTSAN_INL void track_mem(uintptr_t a, size_t n, bool write) {
    Detect& d = det();
    if (a < d.glo || a >= d.ghi || (a >= d.klo && a < d.khi) || (a >= d.dlo && a < d.dhi)) return;
    if (a >= d.slo && a < d.shi && !(a >= d.symlo && a < d.symhi)) return;
    track_bytes(a, n, write);
}
// An atomic (not instrumented): a read and a write of its bytes.
CUEMU_NOTSAN_INL void track_atomic(const void* p, size_t n) {
    if (t_active && det().track) track_mem((uintptr_t)p, n, true);
}

CUEMU_NOTSAN_INL void access(void* p, size_t n, bool write, uintptr_t pc) {
    Detect& d = det();
    uintptr_t a = (uintptr_t)p;
    if (d.track) track_mem(a, n, write);
    if (!d.on) return;
    if (!d.shared_on) {
        if (write && a >= d.glo && a < d.ghi && !(a >= d.klo && a < d.khi)) global_write(a, n, pc);
        return;
    }
    if (a >= d.slo && a < d.shi) {
        for (uintptr_t q = a & ~(uintptr_t)1; q < a + n; q += 2)
            shared_access(d.sshadow[(q - d.slo) >> 1], write, pc, q);
    } else if (a >= d.dlo && a < d.dhi) {
        for (uintptr_t q = a & ~(uintptr_t)1; q < a + n; q += 2) shared_access(d.dsh[(q - d.dlo) >> 1], write, pc, q);
    } else if (write && a >= d.glo && a < d.ghi && !(a >= d.klo && a < d.khi)) {
        global_write(a, n, pc);
    }
}

// Launch start: the device regions as they are now (no allocation happens inside a kernel).
CUEMU_NOTSAN inline void detect_launch(const char* kname, const void* dyn, size_t dyn_size) {
    Detect& d = det();
    d.launch++;
    d.kname = kname;
    d.dlo = (uintptr_t)dyn;
    d.dhi = d.dlo + dyn_size;
    if (d.dshadow.size() < (dyn_size + 1) / 2) d.dshadow.assign((dyn_size + 1) / 2, ShadowS{});
    d.dsh = d.dshadow.data();
    d.regions.clear();
    d.last = 0;
    Registry& r = registry();
    std::lock_guard<std::mutex> lk(r.mu);
    for (auto& kv : r.regions) {
        if (!device_accessible(kv.second.kind) || kv.second.size == 0) continue;
        GRegion g{kv.first, kv.first + kv.second.size, nullptr};
        auto it = d.gshadow.find(g.lo);
        if (it != d.gshadow.end()) {
            if (it->second->size() != (kv.second.size + 1) / 2) {
                delete it->second;
                d.gshadow.erase(it);
            } else
                g.shadow = it->second->data();
        }
        d.regions.push_back(g);
    }
    d.reg = d.regions.data();
    d.nreg = d.regions.size();
    d.glo = d.regions.empty() ? 0 : d.regions.front().lo;
    d.ghi = d.regions.empty() ? 0 : d.regions.back().hi;
    d.symlo = d.symhi = 0;
    for (const GRegion& g : d.regions)
        if (g.lo >= d.slo && g.hi <= d.shi) {
            if (d.symhi == 0) d.symlo = g.lo;
            d.symhi = g.hi;
        }
    d.active = d.on || d.track;
}

// After the grid (hooks off): the bytes the launch touched, as ranges inside registered
// device regions, written ones with w = true, only-read ones with w = false; then the
// bitmaps are cleared for the next launch. emit(lo, hi, w) receives each range.
template <class F>
inline void launch_ranges(F&& emit) {
    Detect& d = det();
    std::sort(d.used.begin(), d.used.end(), [](const PageBits* x, const PageBits* y) { return x->page < y->page; });
    for (int kind = 0; kind < 2; kind++) { // 0: written, 1: read and not written
        uintptr_t olo = 0, ohi = 0;
        auto flush = [&] {
            if (ohi <= olo) return;
            // split at the region boundaries
            for (size_t i = first_region_ending_above(d, olo); i < d.nreg && d.reg[i].lo < ohi; i++) {
                uintptr_t a = std::max(olo, d.reg[i].lo), b = std::min(ohi, d.reg[i].hi);
                if (a < b) emit(a, b, kind == 0);
            }
        };
        for (const PageBits* e : d.used) {
            uintptr_t base = e->page << 12;
            for (int i = 0; i < 64; i++) {
                uint64_t bits = kind == 0 ? e->w[i] : (e->r[i] & ~e->w[i]);
                while (bits) {
                    int s = __builtin_ctzll(bits);
                    uint64_t x = bits >> s;
                    int len = ~x == 0 ? 64 - s : __builtin_ctzll(~x);
                    uintptr_t a = base + (uintptr_t)i * 64 + (uintptr_t)s, b = a + (uintptr_t)len;
                    if (a == ohi)
                        ohi = b;
                    else {
                        flush();
                        olo = a;
                        ohi = b;
                    }
                    bits &= len == 64 ? 0 : ~(((1ull << len) - 1) << s);
                }
            }
        }
        flush();
    }
    for (PageBits* e : d.used) {
        memset(e->r, 0, sizeof e->r);
        memset(e->w, 0, sizeof e->w);
        d.pool.push_back(e);
    }
    d.used.clear();
    d.pages.clear();
    memset(d.pcache, 0, sizeof d.pcache);
}
// An allocation goes away: its shadow too (the address may be reused).
CUEMU_NOTSAN inline void detect_forget(const void* p) {
    Detect& d = det();
    auto it = d.gshadow.find((uintptr_t)p);
    if (it != d.gshadow.end()) {
        delete it->second;
        d.gshadow.erase(it);
    }
}

} // namespace cuemu

// ---------------------------------------------------------------- the instrumentation hooks
// Signatures as GCC's builtin declarations (sanitizer.def).
// One hook: an access of N bytes at p, a write if W; the pc is the instrumented code's.
#define CUEMU_TSAN_ACCESS(NAME, N, W)                                                        \
    CUEMU_HOOK void NAME(void* p) {                                                          \
        if (cuemu::t_active) cuemu::access(p, N, W, (uintptr_t)__builtin_return_address(0)); \
    }
#define CUEMU_TSAN_RW(N)                                  \
    CUEMU_TSAN_ACCESS(__tsan_read##N, N, false)           \
    CUEMU_TSAN_ACCESS(__tsan_write##N, N, true)           \
    CUEMU_TSAN_ACCESS(__tsan_unaligned_read##N, N, false) \
    CUEMU_TSAN_ACCESS(__tsan_unaligned_write##N, N, true) \
    CUEMU_TSAN_ACCESS(__tsan_volatile_read##N, N, false)  \
    CUEMU_TSAN_ACCESS(__tsan_volatile_write##N, N, true)
#ifdef __SANITIZE_THREAD__
CUEMU_TSAN_RW(1)
CUEMU_TSAN_RW(2)
CUEMU_TSAN_RW(4)
CUEMU_TSAN_RW(8)
CUEMU_TSAN_RW(16)
CUEMU_HOOK void __tsan_read_range(void* p, unsigned long n) {
    if (cuemu::t_active) cuemu::access(p, n, false, (uintptr_t)__builtin_return_address(0));
}
CUEMU_HOOK void __tsan_write_range(void* p, unsigned long n) {
    if (cuemu::t_active) cuemu::access(p, n, true, (uintptr_t)__builtin_return_address(0));
}
// Vtable pointer stores (the emulation's std::shared_ptr control blocks, streams.h):
// host-side bookkeeping, never a kernel's memory access.
CUEMU_HOOK void __tsan_vptr_update(void*, void*) {}
CUEMU_HOOK void __tsan_vptr_read(void*) {}
CUEMU_HOOK void __tsan_init() {}
#include "detect_atomics.h"
#endif
#undef CUEMU_TSAN_RW
#undef CUEMU_TSAN_ACCESS
