// cuemu/impl/nccl.h - NCCL implemented over MPI across processes (one
// process = one emulated GPU). Communicators map to MPI communicators:
//  - ncclGetUniqueId writes (magic, creator's MPI_COMM_WORLD rank, per-process
//    counter) into the id; the program broadcasts it itself, as with real NCCL;
//  - ncclCommInitRank: every member sends (rank, world rank) to the id's creator,
//    which must be a member (it always is in NCCL programs: rank 0 makes the id),
//    the creator answers with the rank table, and the members (only they) call
//    MPI_Comm_create_group, so communicators over any subset work and never need
//    the ranks outside them; MPI rank == NCCL rank in the result;
//  - ncclCommSplit is MPI_Comm_split of the parent.
// Collectives are deterministic, and every rank gets bit-identical results:
// reductions go "reduce-scatter then all-gather" with each chunk reduced in rank
// order 0..n-1 (bf16 rounded after every addition, as NCCL's bf16 rings do).
// Send/recv are posted at the call (MPI_Issend / MPI_Irecv, after the work their stream
// waits for, which includes the stream's earlier send/recv: one NCCL kernel after the
// other) and complete lazily, as an operation queued on the stream that waits for the
// request (MPI_Wait): it runs when later work needs it (an event recorded after it that
// is waited on or synchronised, the stream's next NCCL call, a stream or device sync,
// ncclCommDestroy). A send completes only once its receive is posted (Issend), as an NCCL
// send kernel does, so an unordered exchange on one stream deadlocks here as on a GPU,
// while sends and receives on different streams overlap as they do there. Inside
// ncclGroupStart/End the completions are queued at ncclGroupEnd, so a group's operations
// are all posted before any of them is waited for (grouped rings never deadlock).
// Collectives run at the call, after the work their stream waits for (streams.h: a
// blocking MPI call cannot wait for a synchronisation point).
// Without <mpi.h> (or with CUEMU_NCCL_NO_MPI) only 1-rank communicators work.
// Test-only: part of the CPU emulation of CUDA, never linked into the product.
#pragma once
#include "bf16.h"
#if !defined(CUEMU_NCCL_NO_MPI) && __has_include(<mpi.h>)
#include <mpi.h>
#define CUEMU_NCCL_MPI 1
#else
#define CUEMU_NCCL_MPI 0
#endif
#include <climits>
#include <memory>
#include <string>

#define NCCL_MAJOR 2
#define NCCL_MINOR 28
#define NCCL_PATCH 9
#define NCCL_SUFFIX "cuemu"
#define NCCL_VERSION_CODE 22809
#define NCCL_VERSION(X, Y, Z) (((X) <= 2 && (Y) <= 8) ? (X)*1000 + (Y)*100 + (Z) : (X)*10000 + (Y)*100 + (Z))
#define NCCL_UNIQUE_ID_BYTES 128
#define NCCL_SPLIT_NOCOLOR -1
#define NCCL_CONFIG_UNDEF_INT INT_MIN
#define NCCL_CONFIG_UNDEF_PTR NULL

typedef struct ncclComm* ncclComm_t;
typedef struct {
    char internal[NCCL_UNIQUE_ID_BYTES];
} ncclUniqueId;
typedef enum {
    ncclSuccess = 0,
    ncclUnhandledCudaError = 1,
    ncclSystemError = 2,
    ncclInternalError = 3,
    ncclInvalidArgument = 4,
    ncclInvalidUsage = 5,
    ncclRemoteError = 6,
    ncclInProgress = 7,
    ncclNumResults = 8
} ncclResult_t;
typedef enum { ncclSum = 0, ncclProd = 1, ncclMax = 2, ncclMin = 3, ncclAvg = 4, ncclNumOps = 5 } ncclRedOp_t;
typedef enum {
    ncclInt8 = 0,
    ncclChar = 0,
    ncclUint8 = 1,
    ncclInt32 = 2,
    ncclInt = 2,
    ncclUint32 = 3,
    ncclInt64 = 4,
    ncclUint64 = 5,
    ncclFloat16 = 6,
    ncclHalf = 6,
    ncclFloat32 = 7,
    ncclFloat = 7,
    ncclFloat64 = 8,
    ncclDouble = 8,
    ncclBfloat16 = 9,
    ncclFloat8e4m3 = 10,
    ncclFloat8e5m2 = 11,
    ncclNumTypes = 12
} ncclDataType_t;
typedef struct ncclConfig_v22800 {
    size_t size;
    unsigned int magic;
    unsigned int version;
    int blocking;
    int cgaClusterSize;
    int minCTAs;
    int maxCTAs;
    const char* netName;
    int splitShare;
    int trafficClass;
    const char* commName;
    int collnetEnable;
    int CTAPolicy;
    int shrinkShare;
    int nvlsCTAs;
    int nChannelsPerNetPeer;
    int nvlinkCentricSched;
} ncclConfig_t;
#define NCCL_CONFIG_INITIALIZER                                                                                    \
    {                                                                                                              \
        sizeof(ncclConfig_t), 0xcafebeef, NCCL_VERSION(NCCL_MAJOR, NCCL_MINOR, NCCL_PATCH), NCCL_CONFIG_UNDEF_INT, \
            NCCL_CONFIG_UNDEF_INT, NCCL_CONFIG_UNDEF_INT, NCCL_CONFIG_UNDEF_INT, NCCL_CONFIG_UNDEF_PTR,            \
            NCCL_CONFIG_UNDEF_INT, NCCL_CONFIG_UNDEF_INT, NCCL_CONFIG_UNDEF_PTR, NCCL_CONFIG_UNDEF_INT,            \
            NCCL_CONFIG_UNDEF_INT, NCCL_CONFIG_UNDEF_INT, NCCL_CONFIG_UNDEF_INT, NCCL_CONFIG_UNDEF_INT,            \
            NCCL_CONFIG_UNDEF_INT                                                                                  \
    }

struct ncclComm {
    int magic;
    int rank, size;
#if CUEMU_NCCL_MPI
    MPI_Comm mpi;
#endif
    bool local; // 1-rank communicator without MPI
    struct SelfMsg {
        void* buf;
        size_t bytes;
    };
    std::vector<SelfMsg> self_sends, self_recvs; // grouped send/recv to self
#if CUEMU_NCCL_MPI
    // posted send/recv requests whose completion may not have run yet (ncclCommDestroy
    // waits for them; a completion sets its request to MPI_REQUEST_NULL)
    std::vector<std::shared_ptr<MPI_Request>> posted;
#endif
};

namespace cuemu {
constexpr int kNcclMagic = 0x4e43454d;
constexpr char kIdMagic[16] = "cuemu-nccl-id1";
struct NcclId {
    char magic[16];
    int world_rank;
    int counter;
    int world_size;
};
#if CUEMU_NCCL_MPI
// a posted send/recv of a group: its completion is queued on `stream` at ncclGroupEnd
struct PendingP2p {
    const void* stream;
    std::shared_ptr<MPI_Request> req;
    std::vector<Access> acc;
    const char* what;
    const char* file;
    int line;
};
#endif
struct NcclGroup {
    int depth = 0;
#if CUEMU_NCCL_MPI
    std::vector<PendingP2p> pending;
#endif
    std::vector<ncclComm*> self_comms;
    int counter = 0;
    std::string last_error;
};
inline NcclGroup& nccl_state() {
    static NcclGroup g;
    return g;
}

inline ncclResult_t nccl_fail(ncclResult_t r, const char* fmt, ...) __attribute__((format(printf, 2, 3)));
inline ncclResult_t nccl_fail(ncclResult_t r, const char* fmt, ...) {
    char msg[768];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    nccl_state().last_error = msg;
    int wrank = -1;
#if CUEMU_NCCL_MPI
    int init = 0, fin = 0;
    MPI_Initialized(&init);
    MPI_Finalized(&fin);
    if (init && !fin) MPI_Comm_rank(MPI_COMM_WORLD, &wrank);
#endif
    if (wrank >= 0)
        fprintf(stderr, "cuemu nccl [rank %d]: %s\n", wrank, msg);
    else
        fprintf(stderr, "cuemu nccl: %s\n", msg);
    return r;
}
inline size_t nccl_size(int dt) {
    switch (dt) {
        case ncclInt8:
        case ncclUint8:
        case ncclFloat8e4m3:
        case ncclFloat8e5m2:
            return 1;
        case ncclFloat16:
        case ncclBfloat16:
            return 2;
        case ncclInt32:
        case ncclUint32:
        case ncclFloat32:
            return 4;
        case ncclInt64:
        case ncclUint64:
        case ncclFloat64:
            return 8;
    }
    return 0;
}
inline bool comm_ok(const ncclComm* c) { return c && c->magic == kNcclMagic; }
inline ncclResult_t check_buf(const char* op, const char* which, const void* p, size_t bytes) {
    if (bytes == 0 || !config().check_ptrs) return ncclSuccess;
    Found f = lookup(p, bytes);
    if (!device_accessible(f.kind))
        return nccl_fail(ncclInvalidArgument, "%s: %s %p is %s; NCCL needs device memory (cudaMalloc)", op, which, p,
                         kind_name(f.kind));
    if (f.overrun)
        return nccl_fail(ncclInvalidArgument, "%s: %s %p + %zu bytes runs past its allocation (%p, %zu bytes)", op,
                         which, p, bytes, (void*)f.base, f.size);
    return ncclSuccess;
}

// acc[i] = acc[i] op x[i]
template <class T>
inline void reduce_typed(T* acc, const T* x, size_t n, int op) {
    for (size_t i = 0; i < n; i++) {
        T a = acc[i], b = x[i];
        switch (op) {
            case ncclSum:
            case ncclAvg:
                acc[i] = (T)(a + b);
                break;
            case ncclProd:
                acc[i] = (T)(a * b);
                break;
            case ncclMax:
                acc[i] = b > a ? b : a;
                break;
            case ncclMin:
                acc[i] = b < a ? b : a;
                break;
        }
    }
}
inline void reduce_bf16(unsigned short* acc, const unsigned short* x, size_t n, int op) {
    for (size_t i = 0; i < n; i++) {
        float a = bf2f(acc[i]), b = bf2f(x[i]), r = a;
        switch (op) {
            case ncclSum:
            case ncclAvg:
                r = a + b;
                break;
            case ncclProd:
                r = a * b;
                break;
            case ncclMax:
                r = b > a ? b : a;
                break;
            case ncclMin:
                r = b < a ? b : a;
                break;
        }
        acc[i] = f2bf_rn(r);
    }
}
inline bool reduce_supported(int dt) {
    return dt != ncclFloat16 && dt != ncclFloat8e4m3 && dt != ncclFloat8e5m2 && nccl_size(dt) > 0;
}
inline void reduce_into(int dt, int op, void* acc, const void* x, size_t n) {
    switch (dt) {
        case ncclInt8:
            reduce_typed((int8_t*)acc, (const int8_t*)x, n, op);
            break;
        case ncclUint8:
            reduce_typed((uint8_t*)acc, (const uint8_t*)x, n, op);
            break;
        case ncclInt32:
            reduce_typed((int32_t*)acc, (const int32_t*)x, n, op);
            break;
        case ncclUint32:
            reduce_typed((uint32_t*)acc, (const uint32_t*)x, n, op);
            break;
        case ncclInt64:
            reduce_typed((int64_t*)acc, (const int64_t*)x, n, op);
            break;
        case ncclUint64:
            reduce_typed((uint64_t*)acc, (const uint64_t*)x, n, op);
            break;
        case ncclFloat32:
            reduce_typed((float*)acc, (const float*)x, n, op);
            break;
        case ncclFloat64:
            reduce_typed((double*)acc, (const double*)x, n, op);
            break;
        case ncclBfloat16:
            reduce_bf16((unsigned short*)acc, (const unsigned short*)x, n, op);
            break;
    }
}
// ncclAvg: divide the sum by the number of ranks.
inline void finish_avg(int dt, void* acc, size_t n, int nranks) {
    switch (dt) {
        case ncclInt8:
            for (size_t i = 0; i < n; i++) ((int8_t*)acc)[i] /= nranks;
            break;
        case ncclUint8:
            for (size_t i = 0; i < n; i++) ((uint8_t*)acc)[i] /= nranks;
            break;
        case ncclInt32:
            for (size_t i = 0; i < n; i++) ((int32_t*)acc)[i] /= nranks;
            break;
        case ncclUint32:
            for (size_t i = 0; i < n; i++) ((uint32_t*)acc)[i] /= (uint32_t)nranks;
            break;
        case ncclInt64:
            for (size_t i = 0; i < n; i++) ((int64_t*)acc)[i] /= nranks;
            break;
        case ncclUint64:
            for (size_t i = 0; i < n; i++) ((uint64_t*)acc)[i] /= (uint64_t)nranks;
            break;
        case ncclFloat32:
            for (size_t i = 0; i < n; i++) ((float*)acc)[i] /= (float)nranks;
            break;
        case ncclFloat64:
            for (size_t i = 0; i < n; i++) ((double*)acc)[i] /= (double)nranks;
            break;
        case ncclBfloat16:
            for (size_t i = 0; i < n; i++) {
                unsigned short* a = (unsigned short*)acc;
                a[i] = f2bf_rn(bf2f(a[i]) / (float)nranks);
            }
            break;
    }
}
inline bool fits_int(size_t bytes) { return bytes <= (size_t)INT_MAX; }

#if CUEMU_NCCL_MPI
inline bool mpi_up() {
    int init = 0, fin = 0;
    MPI_Initialized(&init);
    MPI_Finalized(&fin);
    return init && !fin;
}
inline int rendezvous_tag(int counter) {
    void* v = nullptr;
    int flag = 0;
    MPI_Comm_get_attr(MPI_COMM_WORLD, MPI_TAG_UB, &v, &flag);
    int ub = flag ? *(int*)v : 32767;
    return ub - (counter % 1024);
}
// Reduce-scatter over chunks [off[q], off[q+1]) of `count` elements: this rank
// ends with chunk `rank` reduced in rank order in `out`.
inline ncclResult_t rs_chunks(const char* opname, const void* send, size_t count, int dt, int op, ncclComm* c,
                              const std::vector<size_t>& off, std::vector<char>& out) {
    int n = c->size, r = c->rank;
    size_t es = nccl_size(dt);
    size_t mylen = off[r + 1] - off[r];
    std::vector<int> sc(n), sd(n), rc(n), rd(n);
    for (int q = 0; q < n; q++) {
        size_t len = (off[q + 1] - off[q]) * es, disp = off[q] * es;
        size_t rpos = (size_t)q * mylen * es;
        if (!fits_int(len) || !fits_int(disp) || !fits_int(rpos + mylen * es))
            return nccl_fail(ncclInvalidArgument, "%s: %zu elements are too many for the MPI emulation", opname, count);
        sc[q] = (int)len;
        sd[q] = (int)disp;
        rc[q] = (int)(mylen * es);
        rd[q] = (int)rpos;
    }
    std::vector<char> tmp((size_t)n * mylen * es + 1);
    MPI_Alltoallv(send, sc.data(), sd.data(), MPI_BYTE, tmp.data(), rc.data(), rd.data(), MPI_BYTE, c->mpi);
    out.assign(mylen * es + 1, 0);
    memcpy(out.data(), tmp.data(), mylen * es);
    for (int q = 1; q < n; q++) reduce_into(dt, op, out.data(), tmp.data() + (size_t)q * mylen * es, mylen);
    if (op == ncclAvg) finish_avg(dt, out.data(), mylen, n);
    (void)count;
    return ncclSuccess;
}
#endif

// An NCCL call runs at the call (it blocks in MPI: deferred to a synchronisation point,
// it could wait on a peer that waits on this rank's host), after what its stream waits
// for; its buffers go to the hazard detector like those of a queued operation.
inline void nccl_now(const void* stream, const std::vector<Access>& acc, const char* what, const char* file, int line) {
    issue(stream, std::function<void()>(), acc, what, file, line, true);
}
inline ncclResult_t check_coll(const char* op, ncclComm* c, int dt, int redop, bool reduces) {
    if (!comm_ok(c)) return nccl_fail(ncclInvalidArgument, "%s: invalid communicator", op);
    if (nccl_size(dt) == 0) return nccl_fail(ncclInvalidArgument, "%s: invalid datatype %d", op, dt);
    if (reduces) {
        if (redop < 0 || redop >= ncclNumOps)
            return nccl_fail(ncclInvalidArgument, "%s: invalid reduction op %d", op, redop);
        if (!reduce_supported(dt))
            return nccl_fail(ncclInvalidArgument, "%s: reductions on datatype %d are not emulated", op, dt);
    }
    return ncclSuccess;
}
inline ncclComm* new_comm(int rank, int size, bool local) {
    ncclComm* c = new ncclComm();
    c->magic = kNcclMagic;
    c->rank = rank;
    c->size = size;
    c->local = local;
#if CUEMU_NCCL_MPI
    c->mpi = MPI_COMM_NULL;
#endif
    return c;
}
// ncclGetErrorString's texts.
constexpr CodeText kNcclResultText[] = {
    {ncclSuccess, "no error"},
    {ncclUnhandledCudaError, "unhandled cuda error (run with NCCL_DEBUG=INFO for details)"},
    {ncclSystemError, "unhandled system error (run with NCCL_DEBUG=INFO for details)"},
    {ncclInternalError, "internal error - please report this issue to the NCCL developers"},
    {ncclInvalidArgument, "invalid argument (run with NCCL_DEBUG=WARN for details)"},
    {ncclInvalidUsage, "invalid usage (run with NCCL_DEBUG=WARN for details)"},
    {ncclRemoteError, "remote process exited or there was a network error"},
    {ncclInProgress, "NCCL operation in progress"},
};
} // namespace cuemu

// ---------------------------------------------------------------- API
static inline const char* ncclGetErrorString(ncclResult_t r) {
    return cuemu::code_text(cuemu::kNcclResultText, r, "unknown result code");
}
static inline const char* ncclGetLastError(ncclComm_t) { return cuemu::nccl_state().last_error.c_str(); }
static inline ncclResult_t ncclGetVersion(int* v) {
    if (!v) return ncclInvalidArgument;
    *v = NCCL_VERSION_CODE;
    return ncclSuccess;
}
static inline ncclResult_t ncclMemAlloc(void** p, size_t size) {
    return cudaMalloc(p, size) == cudaSuccess ? ncclSuccess : ncclUnhandledCudaError;
}
static inline ncclResult_t ncclMemFree(void* p) {
    return cudaFree(p) == cudaSuccess ? ncclSuccess : ncclUnhandledCudaError;
}

static inline ncclResult_t ncclGetUniqueId(ncclUniqueId* id) {
    using namespace cuemu;
    if (!id) return nccl_fail(ncclInvalidArgument, "ncclGetUniqueId: NULL id");
    memset(id, 0, sizeof *id);
    NcclId x;
    memset(&x, 0, sizeof x);
    memcpy(x.magic, kIdMagic, sizeof x.magic);
    x.world_rank = 0;
    x.world_size = 1;
#if CUEMU_NCCL_MPI
    if (mpi_up()) {
        MPI_Comm_rank(MPI_COMM_WORLD, &x.world_rank);
        MPI_Comm_size(MPI_COMM_WORLD, &x.world_size);
    }
#endif
    x.counter = ++nccl_state().counter;
    memcpy(id->internal, &x, sizeof x);
    return ncclSuccess;
}

static inline ncclResult_t ncclCommInitRank(ncclComm_t* comm, int nranks, ncclUniqueId id, int rank) {
    using namespace cuemu;
    if (!comm) return nccl_fail(ncclInvalidArgument, "ncclCommInitRank: NULL comm");
    *comm = nullptr;
    NcclId x;
    memcpy(&x, id.internal, sizeof x);
    if (memcmp(x.magic, kIdMagic, sizeof x.magic) != 0)
        return nccl_fail(ncclInvalidArgument,
                         "ncclCommInitRank: the unique id was not made by ncclGetUniqueId (not broadcast?)");
    if (nranks < 1 || rank < 0 || rank >= nranks)
        return nccl_fail(ncclInvalidArgument, "ncclCommInitRank: rank %d of %d is invalid", rank, nranks);
    if (nranks == 1) {
        *comm = new_comm(0, 1, true);
        return ncclSuccess;
    }
#if CUEMU_NCCL_MPI
    if (!mpi_up())
        return nccl_fail(ncclInvalidUsage,
                         "ncclCommInitRank: %d ranks need MPI (the emulated NCCL runs over MPI): call MPI_Init first "
                         "and start with mpirun",
                         nranks);
    int wrank = 0, wsize = 1;
    MPI_Comm_rank(MPI_COMM_WORLD, &wrank);
    MPI_Comm_size(MPI_COMM_WORLD, &wsize);
    if (nranks > wsize)
        return nccl_fail(ncclInvalidArgument, "ncclCommInitRank: %d ranks but only %d MPI processes", nranks, wsize);
    if (x.world_rank < 0 || x.world_rank >= wsize)
        return nccl_fail(ncclInvalidArgument, "ncclCommInitRank: corrupt unique id");
    int tag = rendezvous_tag(x.counter);
    std::vector<int> table(nranks, -1);
    int msg[4] = {x.counter, nranks, rank, wrank};
    if (wrank == x.world_rank) { // the id's creator collects the members
        table[rank] = wrank;
        for (int i = 1; i < nranks; i++) {
            int in[4];
            MPI_Recv(in, 4, MPI_INT, MPI_ANY_SOURCE, tag, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
            if (in[0] != x.counter || in[1] != nranks || in[2] < 0 || in[2] >= nranks || table[in[2]] != -1) {
                fprintf(stderr,
                        "cuemu nccl: ncclCommInitRank: world rank %d joined with (id %d, nranks %d, rank %d), "
                        "expected id %d, nranks %d and a rank not yet taken\n",
                        in[3], in[0], in[1], in[2], x.counter, nranks);
                MPI_Abort(MPI_COMM_WORLD, 3);
            }
            table[in[2]] = in[3];
        }
        for (int i = 0; i < nranks; i++)
            if (table[i] != wrank) MPI_Send(table.data(), nranks, MPI_INT, table[i], tag, MPI_COMM_WORLD);
    } else {
        MPI_Send(msg, 4, MPI_INT, x.world_rank, tag, MPI_COMM_WORLD);
        MPI_Recv(table.data(), nranks, MPI_INT, x.world_rank, tag, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    }
    MPI_Group world, group;
    MPI_Comm_group(MPI_COMM_WORLD, &world);
    MPI_Group_incl(world, nranks, table.data(), &group);
    MPI_Comm nc = MPI_COMM_NULL;
    MPI_Comm_create_group(MPI_COMM_WORLD, group, tag, &nc);
    MPI_Group_free(&group);
    MPI_Group_free(&world);
    if (nc == MPI_COMM_NULL) return nccl_fail(ncclSystemError, "ncclCommInitRank: MPI_Comm_create_group failed");
    int r = -1;
    MPI_Comm_rank(nc, &r);
    if (r != rank) return nccl_fail(ncclInternalError, "ncclCommInitRank: MPI rank %d != NCCL rank %d", r, rank);
    ncclComm* c = new_comm(rank, nranks, false);
    c->mpi = nc;
    *comm = c;
    return ncclSuccess;
#else
    return nccl_fail(ncclInvalidUsage,
                     "ncclCommInitRank: %d ranks need the MPI build of the emulation (compile with mpicxx)", nranks);
#endif
}
static inline ncclResult_t ncclCommInitRankConfig(ncclComm_t* comm, int nranks, ncclUniqueId id, int rank,
                                                  ncclConfig_t*) {
    return ncclCommInitRank(comm, nranks, id, rank);
}
static inline ncclResult_t ncclCommInitAll(ncclComm_t* comms, int ndev, const int*) {
    if (ndev != 1)
        return cuemu::nccl_fail(ncclInvalidArgument,
                                "ncclCommInitAll: the emulation runs one device per process (ndev must be 1)");
    comms[0] = cuemu::new_comm(0, 1, true);
    return ncclSuccess;
}
static inline ncclResult_t ncclCommSplit(ncclComm_t comm, int color, int key, ncclComm_t* newcomm, ncclConfig_t*) {
    using namespace cuemu;
    (void)key;
    if (!comm_ok(comm) || !newcomm) return nccl_fail(ncclInvalidArgument, "ncclCommSplit: invalid communicator");
    *newcomm = nullptr;
    if (comm->local) {
        if (color != NCCL_SPLIT_NOCOLOR) *newcomm = new_comm(0, 1, true);
        return ncclSuccess;
    }
#if CUEMU_NCCL_MPI
    MPI_Comm nc = MPI_COMM_NULL;
    MPI_Comm_split(comm->mpi, color == NCCL_SPLIT_NOCOLOR ? MPI_UNDEFINED : color, key, &nc);
    if (nc == MPI_COMM_NULL) return ncclSuccess;
    int r, s;
    MPI_Comm_rank(nc, &r);
    MPI_Comm_size(nc, &s);
    ncclComm* c = new_comm(r, s, false);
    c->mpi = nc;
    *newcomm = c;
#endif
    return ncclSuccess;
}
static inline ncclResult_t ncclCommDestroy(ncclComm_t comm) {
    if (!comm) return ncclSuccess;
    if (!cuemu::comm_ok(comm)) return cuemu::nccl_fail(ncclInvalidArgument, "ncclCommDestroy: invalid communicator");
#if CUEMU_NCCL_MPI
    if (cuemu::mpi_up()) // its send/recv must be done before the communicator goes (completions queued later find
                         // MPI_REQUEST_NULL)
        for (auto& r : comm->posted) MPI_Wait(r.get(), MPI_STATUS_IGNORE);
    comm->posted.clear();
    if (!comm->local && comm->mpi != MPI_COMM_NULL && cuemu::mpi_up()) MPI_Comm_free(&comm->mpi);
#endif
    comm->magic = 0;
    delete comm;
    return ncclSuccess;
}
static inline ncclResult_t ncclCommAbort(ncclComm_t comm) { return ncclCommDestroy(comm); }
static inline ncclResult_t ncclCommFinalize(ncclComm_t comm) {
    return cuemu::comm_ok(comm) ? ncclSuccess : ncclInvalidArgument;
}
static inline ncclResult_t ncclCommGetAsyncError(ncclComm_t comm, ncclResult_t* e) {
    if (!cuemu::comm_ok(comm) || !e) return ncclInvalidArgument;
    *e = ncclSuccess;
    return ncclSuccess;
}
static inline ncclResult_t ncclCommCount(const ncclComm_t comm, int* count) {
    if (!cuemu::comm_ok(comm) || !count) return ncclInvalidArgument;
    *count = comm->size;
    return ncclSuccess;
}
static inline ncclResult_t ncclCommUserRank(const ncclComm_t comm, int* rank) {
    if (!cuemu::comm_ok(comm) || !rank) return ncclInvalidArgument;
    *rank = comm->rank;
    return ncclSuccess;
}
static inline ncclResult_t ncclCommCuDevice(const ncclComm_t comm, int* device) {
    if (!cuemu::comm_ok(comm) || !device) return ncclInvalidArgument;
    *device = cuemu::cur_device();
    return ncclSuccess;
}

static inline ncclResult_t ncclAllReduce(const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t dt,
                                         ncclRedOp_t op, ncclComm_t comm, cudaStream_t stream_,
                                         const char* file = __builtin_FILE(), int line = __builtin_LINE()) {
    using namespace cuemu;
    ncclResult_t r;
    if ((r = check_coll("ncclAllReduce", comm, dt, op, true))) return r;
    size_t bytes = count * nccl_size(dt);
    if ((r = check_buf("ncclAllReduce", "sendbuff", sendbuff, bytes)) ||
        (r = check_buf("ncclAllReduce", "recvbuff", recvbuff, bytes)))
        return r;
    nccl_now(stream_, {{sendbuff, bytes, false}, {recvbuff, bytes, true}}, "ncclAllReduce", file, line);
    if (comm->size == 1) {
        if (sendbuff != recvbuff) memmove(recvbuff, sendbuff, bytes);
        return ncclSuccess;
    }
#if CUEMU_NCCL_MPI
    int n = comm->size;
    std::vector<size_t> off(n + 1);
    for (int q = 0; q <= n; q++) off[q] = count * (size_t)q / (size_t)n;
    std::vector<char> mine;
    if ((r = rs_chunks("ncclAllReduce", sendbuff, count, dt, op, comm, off, mine))) return r;
    size_t es = nccl_size(dt);
    std::vector<int> rc(n), rd(n);
    for (int q = 0; q < n; q++) {
        rc[q] = (int)((off[q + 1] - off[q]) * es);
        rd[q] = (int)(off[q] * es);
    }
    MPI_Allgatherv(mine.data(), rc[comm->rank], MPI_BYTE, recvbuff, rc.data(), rd.data(), MPI_BYTE, comm->mpi);
#endif
    return ncclSuccess;
}
static inline ncclResult_t ncclReduceScatter(const void* sendbuff, void* recvbuff, size_t recvcount, ncclDataType_t dt,
                                             ncclRedOp_t op, ncclComm_t comm, cudaStream_t stream_,
                                             const char* file = __builtin_FILE(), int line = __builtin_LINE()) {
    using namespace cuemu;
    ncclResult_t r;
    if ((r = check_coll("ncclReduceScatter", comm, dt, op, true))) return r;
    size_t es = nccl_size(dt), bytes = recvcount * es;
    if ((r = check_buf("ncclReduceScatter", "sendbuff", sendbuff, bytes * comm->size)) ||
        (r = check_buf("ncclReduceScatter", "recvbuff", recvbuff, bytes)))
        return r;
    nccl_now(stream_, {{sendbuff, bytes * comm->size, false}, {recvbuff, bytes, true}}, "ncclReduceScatter", file,
             line);
    if (comm->size == 1) {
        if (sendbuff != recvbuff) memmove(recvbuff, sendbuff, bytes);
        return ncclSuccess;
    }
#if CUEMU_NCCL_MPI
    int n = comm->size;
    std::vector<size_t> off(n + 1);
    for (int q = 0; q <= n; q++) off[q] = recvcount * (size_t)q;
    std::vector<char> mine;
    if ((r = rs_chunks("ncclReduceScatter", sendbuff, recvcount * n, dt, op, comm, off, mine))) return r;
    memcpy(recvbuff, mine.data(), bytes);
#endif
    return ncclSuccess;
}
static inline ncclResult_t ncclAllGather(const void* sendbuff, void* recvbuff, size_t sendcount, ncclDataType_t dt,
                                         ncclComm_t comm, cudaStream_t stream_, const char* file = __builtin_FILE(),
                                         int line = __builtin_LINE()) {
    using namespace cuemu;
    ncclResult_t r;
    if ((r = check_coll("ncclAllGather", comm, dt, 0, false))) return r;
    size_t bytes = sendcount * nccl_size(dt);
    if ((r = check_buf("ncclAllGather", "sendbuff", sendbuff, bytes)) ||
        (r = check_buf("ncclAllGather", "recvbuff", recvbuff, bytes * comm->size)))
        return r;
    // in place (sendbuff is this rank's part of recvbuff): the write covers the read
    nccl_now(stream_, {{sendbuff, bytes, false}, {recvbuff, bytes * comm->size, true}}, "ncclAllGather", file, line);
    if (comm->size == 1) {
        if (sendbuff != recvbuff) memmove(recvbuff, sendbuff, bytes);
        return ncclSuccess;
    }
#if CUEMU_NCCL_MPI
    if (!fits_int(bytes) || !fits_int(bytes * comm->size))
        return nccl_fail(ncclInvalidArgument, "ncclAllGather: too large for the MPI emulation");
    const void* src = (const char*)recvbuff + bytes * comm->rank == sendbuff ? MPI_IN_PLACE : sendbuff;
    MPI_Allgather(src, (int)bytes, MPI_BYTE, recvbuff, (int)bytes, MPI_BYTE, comm->mpi);
#endif
    return ncclSuccess;
}
static inline ncclResult_t ncclBroadcast(const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t dt,
                                         int root, ncclComm_t comm, cudaStream_t stream_,
                                         const char* file = __builtin_FILE(), int line = __builtin_LINE()) {
    using namespace cuemu;
    ncclResult_t r;
    if ((r = check_coll("ncclBroadcast", comm, dt, 0, false))) return r;
    if (root < 0 || root >= comm->size)
        return nccl_fail(ncclInvalidArgument, "ncclBroadcast: root %d of %d", root, comm->size);
    size_t bytes = count * nccl_size(dt);
    if (comm->rank == root && (r = check_buf("ncclBroadcast", "sendbuff", sendbuff, bytes))) return r;
    if ((r = check_buf("ncclBroadcast", "recvbuff", recvbuff, bytes))) return r;
    nccl_now(stream_, {{comm->rank == root ? sendbuff : nullptr, bytes, false}, {recvbuff, bytes, true}},
             "ncclBroadcast", file, line);
    if (comm->rank == root && sendbuff != recvbuff) memmove(recvbuff, sendbuff, bytes);
#if CUEMU_NCCL_MPI
    if (comm->size > 1) {
        if (!fits_int(bytes)) return nccl_fail(ncclInvalidArgument, "ncclBroadcast: too large for the MPI emulation");
        MPI_Bcast(recvbuff, (int)bytes, MPI_BYTE, root, comm->mpi);
    }
#endif
    return ncclSuccess;
}
static inline ncclResult_t ncclBcast(void* buff, size_t count, ncclDataType_t dt, int root, ncclComm_t comm,
                                     cudaStream_t s, const char* file = __builtin_FILE(), int line = __builtin_LINE()) {
    return ncclBroadcast(buff, buff, count, dt, root, comm, s, file, line);
}
static inline ncclResult_t ncclReduce(const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t dt,
                                      ncclRedOp_t op, int root, ncclComm_t comm, cudaStream_t s,
                                      const char* file = __builtin_FILE(), int line = __builtin_LINE()) {
    using namespace cuemu;
    ncclResult_t r;
    if ((r = check_coll("ncclReduce", comm, dt, op, true))) return r;
    if (root < 0 || root >= comm->size)
        return nccl_fail(ncclInvalidArgument, "ncclReduce: root %d of %d", root, comm->size);
    size_t bytes = count * nccl_size(dt);
    void* tmp = nullptr;
    if (cudaMalloc(&tmp, bytes ? bytes : 1) != cudaSuccess) return ncclUnhandledCudaError;
    r = ncclAllReduce(sendbuff, tmp, count, dt, op, comm, s, file, line);
    if (r == ncclSuccess && comm->rank == root) {
        if ((r = check_buf("ncclReduce", "recvbuff", recvbuff, bytes)) == ncclSuccess) {
            nccl_now(s, {{recvbuff, bytes, true}}, "ncclReduce", file, line);
            memmove(recvbuff, tmp, bytes);
        }
    }
    release("ncclReduce scratch", tmp, MEM_DEVICE, MEM_DEVICE,
            false); // no cudaFree: that would synchronise the device and hide races
    return r;
}

#if CUEMU_NCCL_MPI
namespace cuemu {
// The completion of a posted send/recv: an operation on its stream that waits for the
// request (lazy: it runs when later work on or after the stream needs it, never at the
// call). The buffer access is the completion's: until it has run the transfer may be
// reading or writing the buffer, so the hazard detector holds other streams to it.
inline void queue_completion(const PendingP2p& p) {
    std::shared_ptr<MPI_Request> req = p.req;
    issue(
        p.stream, [req] { MPI_Wait(req.get(), MPI_STATUS_IGNORE); }, p.acc, p.what, p.file, p.line, false, nullptr,
        true);
}
} // namespace cuemu
#endif
static inline ncclResult_t ncclGroupStart() {
    cuemu::nccl_state().depth++;
    return ncclSuccess;
}
static inline ncclResult_t ncclGroupEnd() {
    using namespace cuemu;
    NcclGroup& g = nccl_state();
    if (g.depth <= 0) return nccl_fail(ncclInvalidUsage, "ncclGroupEnd without ncclGroupStart");
    if (--g.depth > 0) return ncclSuccess;
    ncclResult_t res = ncclSuccess;
    for (ncclComm* c : g.self_comms) {
        if (c->self_sends.size() != c->self_recvs.size())
            res = nccl_fail(ncclInvalidUsage, "ncclGroupEnd: %zu sends to self but %zu receives from self",
                            c->self_sends.size(), c->self_recvs.size());
        for (size_t i = 0; i < std::min(c->self_sends.size(), c->self_recvs.size()); i++) {
            if (c->self_sends[i].bytes != c->self_recvs[i].bytes)
                res =
                    nccl_fail(ncclInvalidUsage, "ncclGroupEnd: send to self of %zu bytes matched with a receive of %zu",
                              c->self_sends[i].bytes, c->self_recvs[i].bytes);
            else
                memmove(c->self_recvs[i].buf, c->self_sends[i].buf, c->self_sends[i].bytes);
        }
        c->self_sends.clear();
        c->self_recvs.clear();
    }
    g.self_comms.clear();
#if CUEMU_NCCL_MPI
    std::vector<PendingP2p> pend = std::move(g.pending);
    g.pending.clear();
    for (PendingP2p& p : pend) queue_completion(p);
#endif
    return res;
}

namespace cuemu {
inline ncclResult_t p2p(bool send, void* buf, size_t count, int dt, int peer, ncclComm* c, const void* stream,
                        const char* file, int line) {
    const char* op = send ? "ncclSend" : "ncclRecv";
    ncclResult_t r;
    if ((r = check_coll(op, c, dt, 0, false))) return r;
    if (peer < 0 || peer >= c->size) return nccl_fail(ncclInvalidArgument, "%s: peer %d of %d", op, peer, c->size);
    size_t bytes = count * nccl_size(dt);
    if ((r = check_buf(op, send ? "sendbuff" : "recvbuff", buf, bytes))) return r;
    NcclGroup& g = nccl_state();
    if (peer == c->rank) {
        nccl_now(stream, {{buf, bytes, !send}}, op, file, line);
        if (g.depth == 0)
            return nccl_fail(ncclInvalidUsage, "%s to self outside ncclGroupStart/End would hang on real NCCL", op);
        (send ? c->self_sends : c->self_recvs).push_back(ncclComm::SelfMsg{buf, bytes});
        if (std::find(g.self_comms.begin(), g.self_comms.end(), c) == g.self_comms.end()) g.self_comms.push_back(c);
        return ncclSuccess;
    }
#if CUEMU_NCCL_MPI
    if (!fits_int(bytes))
        return nccl_fail(ncclInvalidArgument, "%s: %zu bytes too large for the MPI emulation", op, bytes);
    // the stream's earlier work (its earlier send/recv completions too) runs first, as a
    // kernel starts after it; then the operation is posted and its completion queued
    nccl_now(stream, {}, op, file, line);
    std::shared_ptr<MPI_Request> req = std::make_shared<MPI_Request>(MPI_REQUEST_NULL);
    if (send)
        MPI_Issend(buf, (int)bytes, MPI_BYTE, peer, 0, c->mpi, req.get());
    else
        MPI_Irecv(buf, (int)bytes, MPI_BYTE, peer, 0, c->mpi, req.get());
    c->posted.push_back(req);
    if (c->posted.size() > 64) { // forget completed ones
        size_t o = 0;
        for (size_t i = 0; i < c->posted.size(); i++)
            if (*c->posted[i] != MPI_REQUEST_NULL) c->posted[o++] = c->posted[i];
        c->posted.resize(o);
    }
    PendingP2p p{stream, req, {{buf, bytes, !send}}, op, file, line};
    if (g.depth > 0)
        g.pending.push_back(std::move(p));
    else
        queue_completion(p);
    return ncclSuccess;
#else
    return nccl_fail(ncclInternalError, "%s: no MPI", op);
#endif
}
} // namespace cuemu
static inline ncclResult_t ncclSend(const void* sendbuff, size_t count, ncclDataType_t dt, int peer, ncclComm_t comm,
                                    cudaStream_t stream_, const char* file = __builtin_FILE(),
                                    int line = __builtin_LINE()) {
    return cuemu::p2p(true, const_cast<void*>(sendbuff), count, dt, peer, comm, stream_, file, line);
}
static inline ncclResult_t ncclRecv(void* recvbuff, size_t count, ncclDataType_t dt, int peer, ncclComm_t comm,
                                    cudaStream_t stream_, const char* file = __builtin_FILE(),
                                    int line = __builtin_LINE()) {
    return cuemu::p2p(false, recvbuff, count, dt, peer, comm, stream_, file, line);
}
