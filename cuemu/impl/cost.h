// cuemu/impl/cost.h - traffic counters for the per-kernel cost model (dev/cuda/costmodel.py).
// Only in a build with -DCUEMU_COST under clang with
//     -fsanitize-coverage=inline-8bit-counters,trace-loads,trace-stores
// (make cuda-costmodel): clang then calls __sanitizer_cov_loadN / storeN before every memory
// access of the program. While a kernel runs, an access that falls in a registered CUDA
// allocation (cudaMalloc, pinned, managed, __device__ symbols) is global-memory traffic:
// it is added to the kernel's bytes read or written. Shared memory, the fibers' stacks
// (kernel locals and parameters) and the emulator's own data are not registered, so they
// never count. For the first warp of the first blocks of each launch the per-lane access
// sequences are kept, and the k-th access of every lane is taken as one warp request: the
// number of distinct 32-byte sectors it touches, against the minimum for that many bytes,
// shows uncoalesced access. Every cuBLASLt matmul is logged with its shape.
//
// CUEMU_COST_FROM_START=0 counts only between cudaProfilerStart and cudaProfilerStop, as ncu's
// --profile-from-start off (the trainer's LLMC_PROFILE_STEP=N puts step N alone inside them).
// CUEMU_COST=FILE writes the totals at exit, one TSV row per kernel and per GEMM shape:
//   kernel NAME launches bytes_read bytes_written requests sectors min_sectors
//   gemm   m n k a_bytes d_bytes epilogue calls
#ifndef CUEMU_IMPL_COST_H
#define CUEMU_IMPL_COST_H

#ifdef CUEMU_COST
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <string>
#include <tuple>
#include <vector>

namespace cuemu {

struct CostKernel {
    unsigned long long launches = 0, rd = 0, wr = 0, req = 0, sect = 0, minsect = 0;
};
struct CostAccess {
    uintptr_t a;
    uint32_t n;
};
enum { COST_SAMPLE_BLOCKS = 4, COST_MAX_SEQ = 1024, COST_MAX_RANGES = 4096 };
// The hot path (the sanitizer callbacks) touches only this plain data and calls nothing:
// anything it called would itself be instrumented and call back into it.
struct CostHot {
    int active;   // inside a kernel launch of a CUEMU_COST build
    int lane_now; // lane of the running fiber when it is in warp 0, else -1
    int blocks_sampled;
    CostKernel* cur;
    size_t nranges;
    uintptr_t lo[COST_MAX_RANGES], hi[COST_MAX_RANGES]; // sorted registered regions
    int nseq[32];
    CostAccess seq[32][COST_MAX_SEQ];
};
inline CostHot cost_hot;
struct Cost {
    bool on = false;
    bool from_start = true; // CUEMU_COST_FROM_START=0: only inside the profiler's start/stop
    bool profiling = false; // between cudaProfilerStart and cudaProfilerStop
    std::string path;
    std::map<std::string, CostKernel> kernels;
    std::map<std::tuple<long long, long long, long long, int, int, int>, unsigned long long> gemms;
    Cost() {
        if (const char* s = getenv("CUEMU_COST")) {
            on = true;
            path = s;
        }
        if (const char* f = getenv("CUEMU_COST_FROM_START")) from_start = std::string(f) != "0";
    }
};
inline void cost_write();
// never destroyed, so the totals can be written from atexit whatever the exit order
inline Cost& cost() {
    static Cost* c = [] {
        Cost* p = new Cost();
        if (p->on) atexit(cost_write);
        return p;
    }();
    return *c;
}

#define CUEMU_NO_COV __attribute__((no_sanitize("coverage")))
CUEMU_NO_COV inline void cost_access(const void* p, uint32_t n, bool store) {
    CostHot& h = cost_hot;
    if (!h.active) return;
    uintptr_t a = (uintptr_t)p;
    size_t lo = 0, hi = h.nranges; // first range with lo > a, minus one
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        if (h.lo[mid] <= a)
            lo = mid + 1;
        else
            hi = mid;
    }
    if (lo == 0 || a >= h.hi[lo - 1]) return;
    if (store)
        h.cur->wr += n;
    else
        h.cur->rd += n;
    int l = h.lane_now;
    if (h.blocks_sampled <= COST_SAMPLE_BLOCKS && l >= 0 && h.nseq[l] < COST_MAX_SEQ) {
        h.seq[l][h.nseq[l]].a = a;
        h.seq[l][h.nseq[l]].n = n;
        h.nseq[l]++;
    }
}

// kernel.h calls these around a launch, each block and each fiber switch
inline bool cost_counting(const Cost& c) { return c.on && (c.from_start || c.profiling); }
inline void cost_profiler(bool start) { cost().profiling = start; }
inline void cost_kernel_begin(const char* name) {
    Cost& c = cost();
    if (!cost_counting(c)) return;
    CostHot& h = cost_hot;
    h.cur = &c.kernels[name];
    h.cur->launches++;
    h.nranges = 0;
    Registry& r = registry();
    {
        std::lock_guard<std::mutex> lk(r.mu);
        for (auto& kv : r.regions) {
            if (h.nranges == COST_MAX_RANGES) break;
            h.lo[h.nranges] = kv.first;
            h.hi[h.nranges] = kv.first + kv.second.size;
            h.nranges++;
        }
    }
    h.blocks_sampled = 0;
    h.lane_now = -1;
    h.active = 1;
}
inline void cost_fiber(int warp, int lane) { cost_hot.lane_now = warp == 0 ? lane : -1; }
inline void cost_block_begin() {
    CostHot& h = cost_hot;
    if (!h.active) return;
    h.blocks_sampled++;
    for (int l = 0; l < 32; l++) h.nseq[l] = 0;
}
// the k-th global access of every lane of warp 0 is one request
inline void cost_block_end() {
    CostHot& h = cost_hot;
    h.lane_now = -1;
    if (!h.active || h.blocks_sampled > COST_SAMPLE_BLOCKS) return;
    int most = 0;
    for (int l = 0; l < 32; l++) most = std::max(most, h.nseq[l]);
    std::vector<uintptr_t> sec;
    for (int k = 0; k < most; k++) {
        sec.clear();
        uint64_t bytes = 0;
        for (int l = 0; l < 32; l++) {
            if (k >= h.nseq[l]) continue;
            const CostAccess& x = h.seq[l][k];
            bytes += x.n;
            for (uintptr_t s = x.a >> 5; s <= (x.a + x.n - 1) >> 5; s++) sec.push_back(s);
        }
        std::sort(sec.begin(), sec.end());
        h.cur->sect += (unsigned long long)(std::unique(sec.begin(), sec.end()) - sec.begin());
        h.cur->minsect += (bytes + 31) / 32;
        h.cur->req++;
    }
}
inline void cost_kernel_end() {
    cost_hot.active = 0;
    cost_hot.lane_now = -1;
}

inline void cost_gemm(long long m, long long n, long long k, int abytes, int dbytes, int epi) {
    Cost& c = cost();
    if (cost_counting(c)) c.gemms[std::make_tuple(m, n, k, abytes, dbytes, epi)]++;
}

inline void cost_write() {
    fflush(stdout);
    Cost& c = cost();
    if (!c.on) return;
    FILE* f = fopen(c.path.c_str(), "w");
    if (!f) {
        fprintf(stderr, "cuemu: CUEMU_COST=%s: cannot write\n", c.path.c_str());
        return;
    }
    for (auto& kv : c.kernels)
        fprintf(f, "kernel\t%s\t%llu\t%llu\t%llu\t%llu\t%llu\t%llu\n", kv.first.c_str(), kv.second.launches,
                kv.second.rd, kv.second.wr, kv.second.req, kv.second.sect, kv.second.minsect);
    for (auto& kv : c.gemms)
        fprintf(f, "gemm\t%lld\t%lld\t%lld\t%d\t%d\t%d\t%llu\n", std::get<0>(kv.first), std::get<1>(kv.first),
                std::get<2>(kv.first), std::get<3>(kv.first), std::get<4>(kv.first), std::get<5>(kv.first), kv.second);
    if (fclose(f) != 0) fprintf(stderr, "cuemu: CUEMU_COST=%s: write failed\n", c.path.c_str());
}

} // namespace cuemu

extern "C" {
CUEMU_NO_COV void __sanitizer_cov_8bit_counters_init(char*, char*) {}
CUEMU_NO_COV void __sanitizer_cov_load1(uint8_t* p) { cuemu::cost_access(p, 1, false); }
CUEMU_NO_COV void __sanitizer_cov_load2(uint16_t* p) { cuemu::cost_access(p, 2, false); }
CUEMU_NO_COV void __sanitizer_cov_load4(uint32_t* p) { cuemu::cost_access(p, 4, false); }
CUEMU_NO_COV void __sanitizer_cov_load8(uint64_t* p) { cuemu::cost_access(p, 8, false); }
CUEMU_NO_COV void __sanitizer_cov_load16(__int128* p) { cuemu::cost_access(p, 16, false); }
CUEMU_NO_COV void __sanitizer_cov_store1(uint8_t* p) { cuemu::cost_access(p, 1, true); }
CUEMU_NO_COV void __sanitizer_cov_store2(uint16_t* p) { cuemu::cost_access(p, 2, true); }
CUEMU_NO_COV void __sanitizer_cov_store4(uint32_t* p) { cuemu::cost_access(p, 4, true); }
CUEMU_NO_COV void __sanitizer_cov_store8(uint64_t* p) { cuemu::cost_access(p, 8, true); }
CUEMU_NO_COV void __sanitizer_cov_store16(__int128* p) { cuemu::cost_access(p, 16, true); }
}

#define CUEMU_COST_HOOK(call) ::cuemu::call
#else
#define CUEMU_COST_HOOK(call) ((void)0)
#endif // CUEMU_COST

#endif // CUEMU_IMPL_COST_H
