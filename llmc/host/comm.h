/*
 * comm.h: the process groups of the layout over MPI and the host-side collectives both
 * trainers use (the CUDA trainer stages through host memory with -comm mpi).
 * Groups: TP (consecutive ranks), CP (context parallelism: one sequence split over its
 * ranks), DP, PP, and the embedding group (first and last stage, for the tied embedding).
 * Rank order TP fastest, then CP, then DP, then PP (doc/design.md): with dpc = cp + CP*dp
 * and DPC = CP*DP, rank = tp + TP*dpc + TP*DPC*pp, the 3D formula with DPC in DP's place.
 * Gradients are reduced, and ZeRO shards, over the CP x DP group ("dp_comm", index dpc):
 * CP ranks hold the same weights, each with the gradient of its part of the sequences. Single process (no launcher, or
 * a build without USE_MPI): every group has size 1 and every collective is a no-op. Every call enters and leaves the
 * rank's collective trace (colltrace.h), which the step watchdog reads to say where each rank waits. Time inside
 * collectives accumulates in comm_ms; time blocked on a pipeline receive (or flushing sends) in idle_ms, the per-step
 * split the logs report.
 *
 * MPI counts and displacements are int: a 6.7B model with DP, or 530B at TP8 x PP7, has
 * buffers above 2^31 elements per rank. Every call here therefore moves at most `chunk`
 * elements (2^30 by default; the environment's LLMC_MPI_CHUNK lowers it, a test knob so a
 * small run crosses many chunks). Chunking keeps every element's reduction the same, so a
 * chunked run gives the same numbers as an unchunked one (bit for bit on groups of 2).
 */
#ifndef LLMC_COMM_H
#define LLMC_COMM_H

#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#ifdef USE_MPI
#include <mpi.h>
#endif
#include "colltrace.h"
#include "layout.h"
#include "utils.h"


#ifdef USE_MPI
#define mpiCheck(call)                                                                                                 \
    do {                                                                                                               \
        int rc_ = (call);                                                                                              \
        if (rc_ != MPI_SUCCESS) {                                                                                      \
            char s_[MPI_MAX_ERROR_STRING];                                                                             \
            int n_ = 0;                                                                                                \
            MPI_Error_string(rc_, s_, &n_);                                                                            \
            fprintf(stderr, "error: MPI call failed at %s:%d: %s (check the launch line and the network)\n", __FILE__, \
                    __LINE__, s_);                                                                                     \
            MPI_Abort(MPI_COMM_WORLD, 1);                                                                              \
        }                                                                                                              \
    } while (0)
#endif

typedef struct {
    int rank, world;
    int tp, TP, pp, PP, dp, DP; // coordinates; DP: data-parallel replicas (which samples a rank reads)
    int cp, CP, dpc, DPC;       // context parallel; dpc = cp + CP*dp in the CP x DP gradient group of DPC ranks
    int mpi;                    // MPI initialised (launched by mpirun/srun)
#ifdef USE_MPI
    MPI_Comm tp_comm, dp_comm, pp_comm, emb_comm; // dp_comm: CP x DP; emb_comm: first and last stage (else NULL)
    MPI_Comm cp_comm;                             // the CP ring
    // ring of pipeline sends: nsend slots of send_n floats, each sent as nreq chunked messages
    MPI_Request* send_req;
    float** send_buf;
    int nsend, nreq;
    size_t send_n; // send_req: (nsend, nreq)
#endif
    size_t chunk;            // most elements one MPI call moves (see the top)
    double comm_ms, idle_ms; // time inside collectives / waiting on pipeline peers, this step
    double overlap_ms;       // CUDA trainer: DP reduction on the communication stream, overlapping compute
    CollTrace trace;         // the last operation entered and left, for the watchdog
} Comm;

#define COMM_CHUNK_DEFAULT ((size_t)1 << 30)

static void comm_init_single(Comm* c) {
    memset(c, 0, sizeof(*c));
    c->world = 1;
    c->TP = c->PP = c->DP = c->CP = c->DPC = 1;
    c->chunk = COMM_CHUNK_DEFAULT;
    ctrace_init(&c->trace);
    const char* v = getenv("LLMC_MPI_CHUNK");
    if (v != NULL && v[0] != '\0') {
        char* end = NULL;
        long long k = strtoll(v, &end, 10);
        if (*end != '\0' || k < 1 || (size_t)k > COMM_CHUNK_DEFAULT)
            die("environment LLMC_MPI_CHUNK=%s: use an element count from 1 to %zu", v, COMM_CHUNK_DEFAULT);
        c->chunk = (size_t)k;
    }
}

// the i-th piece [i*chunk, ...) of n elements: its length (0 past the end)
static size_t comm_piece(const Comm* c, size_t n, size_t i) {
    size_t at = i * c->chunk;
    return at >= n ? 0 : (n - at < c->chunk ? n - at : c->chunk);
}
static size_t comm_npieces(const Comm* c, size_t n) { return (n + c->chunk - 1) / c->chunk; }

// launched by an MPI launcher? (then, and only then, MPI_Init is called)
static int launched_by_mpi(void) {
    return getenv("OMPI_COMM_WORLD_SIZE") != NULL || getenv("PMIX_RANK") != NULL || getenv("PMI_SIZE") != NULL;
}

#ifdef USE_MPI
// Splits MPI_COMM_WORLD into the TP, CP, CP x DP, PP and embedding groups (layout already valid).
static void comm_init_groups(Comm* c, int TP, int PP, int DP, int CP, size_t act_floats) {
    c->TP = TP;
    c->PP = PP;
    c->DP = DP;
    c->CP = CP;
    c->DPC = DP * CP;
    Coords k = layout_coords(c->rank, TP, c->DPC);
    c->tp = k.tp;
    c->dpc = k.dp;
    c->pp = k.pp;
    c->cp = c->dpc % CP;
    c->dp = c->dpc / CP;
    int D = c->DPC, d = c->dpc;
    mpiCheck(MPI_Comm_split(MPI_COMM_WORLD, d + D * c->pp, c->tp, &c->tp_comm));
    mpiCheck(MPI_Comm_split(MPI_COMM_WORLD, c->tp + TP * c->pp, d, &c->dp_comm));
    mpiCheck(MPI_Comm_split(MPI_COMM_WORLD, c->tp + TP * d, c->pp, &c->pp_comm));
    mpiCheck(MPI_Comm_split(MPI_COMM_WORLD, c->tp + TP * (c->dp + DP * c->pp), c->cp, &c->cp_comm));
    int in_emb = PP > 1 && (c->pp == 0 || c->pp == PP - 1);
    mpiCheck(MPI_Comm_split(MPI_COMM_WORLD, in_emb ? c->tp + TP * d : MPI_UNDEFINED, c->pp, &c->emb_comm));
    c->nsend = 2 * PP;
    c->send_n = act_floats;
    c->nreq = act_floats > 0 ? (int)comm_npieces(c, act_floats) : 1;
    c->send_req = (MPI_Request*)malloc_check(sizeof(MPI_Request) * c->nsend * c->nreq);
    c->send_buf = (float**)malloc_check(sizeof(float*) * c->nsend);
    for (int i = 0; i < c->nsend * c->nreq; i++) c->send_req[i] = MPI_REQUEST_NULL;
    for (int i = 0; i < c->nsend; i++) c->send_buf[i] = (float*)malloc_check(sizeof(float) * act_floats);
}
#endif

static void comm_free(Comm* c) {
#ifdef USE_MPI
    if (!c->mpi) return;
    if (c->send_req) {
        mpiCheck(MPI_Waitall(c->nsend * c->nreq, c->send_req, MPI_STATUSES_IGNORE));
        for (int i = 0; i < c->nsend; i++) free(c->send_buf[i]);
        free(c->send_buf);
        free(c->send_req);
    }
    MPI_Comm_free(&c->tp_comm);
    MPI_Comm_free(&c->dp_comm);
    MPI_Comm_free(&c->pp_comm);
    MPI_Comm_free(&c->cp_comm);
    if (c->emb_comm != MPI_COMM_NULL) MPI_Comm_free(&c->emb_comm);
#else
    (void)c;
#endif
}

#ifdef USE_MPI
// group: the CollGroup the trace files the call under
static void allreduce(Comm* c, void* buf, size_t n, MPI_Datatype type, MPI_Op op, MPI_Comm comm, int size, int group) {
    if (size == 1) return;
    int esize = 0;
    mpiCheck(MPI_Type_size(type, &esize));
    double t0 = wall_ms();
    ctrace_enter(&c->trace, group, op == MPI_MAX ? "allreduce_max" : "allreduce", -1);
    for (size_t i = 0, k; (k = comm_piece(c, n, i)) > 0; i++)
        mpiCheck(MPI_Allreduce(MPI_IN_PLACE, (char*)buf + i * c->chunk * esize, (int)k, type, op, comm));
    ctrace_leave(&c->trace);
    c->comm_ms += wall_ms() - t0;
}
#endif

static void tp_allreduce_sum(Comm* c, float* buf, size_t n) {
#ifdef USE_MPI
    allreduce(c, buf, n, MPI_FLOAT, MPI_SUM, c->tp_comm, c->TP, CG_TP);
#else
    (void)c;
    (void)buf;
    (void)n;
#endif
}

static void tp_allreduce_max(Comm* c, float* buf, size_t n) {
#ifdef USE_MPI
    allreduce(c, buf, n, MPI_FLOAT, MPI_MAX, c->tp_comm, c->TP, CG_TP);
#else
    (void)c;
    (void)buf;
    (void)n;
#endif
}

// sum of a double over every rank of the job
static double world_sum(Comm* c, double x) {
#ifdef USE_MPI
    if (c->world > 1) allreduce(c, &x, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD, c->world, CG_WORLD);
#else
    (void)c;
#endif
    return x;
}

// Pipeline point-to-point. Sends copy into a ring buffer and return at once (the receiver
// never has to be waiting); receives block and count as pipeline idle time.
// tag = 2*micro + direction (0: activations forward, 1: gradients backward)
static void pp_send(Comm* c, const float* buf, size_t n, int to_stage, int tag) {
#ifdef USE_MPI
    if (n > c->send_n) die("pp_send: %zu floats exceed the send ring's %zu", n, c->send_n);
    int slot = -1;
    double t0 = wall_ms();
    for (int i = 0; i < c->nsend && slot < 0;
         i++) { // a free ring slot: all its chunks sent (all are free after a flush)
        int done = 0;
        mpiCheck(MPI_Testall(c->nreq, &c->send_req[i * c->nreq], &done, MPI_STATUSES_IGNORE));
        if (done) slot = i;
    }
    if (slot < 0) { // every slot still in flight: grow the ring rather than wait, so a send never blocks
        int old = c->nsend;
        c->nsend *= 2;
        c->send_req = (MPI_Request*)realloc(c->send_req, sizeof(MPI_Request) * c->nsend * c->nreq);
        c->send_buf = (float**)realloc(c->send_buf, sizeof(float*) * c->nsend);
        if (c->send_req == NULL || c->send_buf == NULL) die("out of memory for pipeline send buffers");
        for (int i = old * c->nreq; i < c->nsend * c->nreq; i++) c->send_req[i] = MPI_REQUEST_NULL;
        for (int i = old; i < c->nsend; i++) c->send_buf[i] = (float*)malloc_check(sizeof(float) * c->send_n);
        slot = old;
    }
    memcpy(c->send_buf[slot], buf, sizeof(float) * n);
    ctrace_enter(&c->trace, CG_PP, "send", to_stage);
    // the chunks of one message share its tag: MPI keeps their order between a pair of ranks
    for (size_t i = 0, k; (k = comm_piece(c, n, i)) > 0; i++)
        mpiCheck(MPI_Isend(c->send_buf[slot] + i * c->chunk, (int)k, MPI_FLOAT, to_stage, tag, c->pp_comm,
                           &c->send_req[slot * c->nreq + i]));
    ctrace_leave(&c->trace);
    c->comm_ms += wall_ms() - t0;
#else
    (void)c;
    (void)buf;
    (void)n;
    (void)to_stage;
    (void)tag;
#endif
}

static void pp_recv(Comm* c, float* buf, size_t n, int from_stage, int tag) {
#ifdef USE_MPI
    double t0 = wall_ms();
    ctrace_enter(&c->trace, CG_PP, "recv", from_stage);
    for (size_t i = 0, k; (k = comm_piece(c, n, i)) > 0; i++)
        mpiCheck(MPI_Recv(buf + i * c->chunk, (int)k, MPI_FLOAT, from_stage, tag, c->pp_comm, MPI_STATUS_IGNORE));
    ctrace_leave(&c->trace);
    c->idle_ms += wall_ms() - t0;
#else
    (void)c;
    (void)buf;
    (void)n;
    (void)from_stage;
    (void)tag;
#endif
}

static void pp_flush(Comm* c) {
#ifdef USE_MPI
    if (c->PP > 1) {
        double t0 = wall_ms();
        ctrace_enter(&c->trace, CG_PP, "send_wait", -1);
        mpiCheck(MPI_Waitall(c->nsend * c->nreq, c->send_req, MPI_STATUSES_IGNORE));
        ctrace_leave(&c->trace);
        c->idle_ms += wall_ms() - t0;
    }
#else
    (void)c;
#endif
}

// The tied embedding's gradient: summed between the first and the last stage.
static void emb_allreduce_sum(Comm* c, float* buf, size_t n) {
#ifdef USE_MPI
    if (c->PP > 1 && c->emb_comm != MPI_COMM_NULL) allreduce(c, buf, n, MPI_FLOAT, MPI_SUM, c->emb_comm, 2, CG_EMB);
#else
    (void)c;
    (void)buf;
    (void)n;
#endif
}

// sum over the CP group (the pieces of a row that only one CP rank holds)
static void cp_allreduce_sum(Comm* c, float* buf, size_t n) {
#ifdef USE_MPI
    allreduce(c, buf, n, MPI_FLOAT, MPI_SUM, c->cp_comm, c->CP, CG_CP);
#else
    (void)c;
    (void)buf;
    (void)n;
#endif
}

static void dp_allreduce_sum(Comm* c, float* buf, size_t n) {
#ifdef USE_MPI
    allreduce(c, buf, n, MPI_FLOAT, MPI_SUM, c->dp_comm, c->DPC, CG_DP);
#else
    (void)c;
    (void)buf;
    (void)n;
#endif
}

// ZeRO-1: full (total) summed over DP, this rank's shard (zero_shard) written to shard.
// Whole buffers up to one chunk: one MPI_Reduce_scatter (its int counts and offsets fit).
// Larger: each shard in chunks, reduced to its owner (MPI_Reduce, same sums).
static void dp_reduce_scatter_sum(Comm* c, const float* full, float* shard, size_t total) {
#ifdef USE_MPI
    if (c->DPC == 1) {
        memcpy(shard, full, sizeof(float) * total);
        return;
    }
    double t0 = wall_ms();
    ctrace_enter(&c->trace, CG_DP, "reduce_scatter", -1);
    if (total <= c->chunk) {
        int* counts = (int*)malloc_check(sizeof(int) * c->DPC);
        for (int d = 0; d < c->DPC; d++) {
            size_t off, cnt;
            zero_shard(total, c->DPC, d, &off, &cnt);
            counts[d] = (int)cnt;
        }
        mpiCheck(MPI_Reduce_scatter(full, shard, counts, MPI_FLOAT, MPI_SUM, c->dp_comm));
        free(counts);
    } else {
        for (int d = 0; d < c->DPC; d++) {
            size_t off, cnt;
            zero_shard(total, c->DPC, d, &off, &cnt);
            for (size_t i = 0, k; (k = comm_piece(c, cnt, i)) > 0; i++)
                mpiCheck(MPI_Reduce(full + off + i * c->chunk, d == c->dpc ? shard + i * c->chunk : NULL, (int)k,
                                    MPI_FLOAT, MPI_SUM, d, c->dp_comm));
        }
    }
    ctrace_leave(&c->trace);
    c->comm_ms += wall_ms() - t0;
#else
    (void)c;
    memcpy(shard, full, sizeof(float) * total);
#endif
}

// ZeRO-1: every DP rank holds its shard of full (in place); gather the whole buffer.
// Up to one chunk: one MPI_Allgatherv; larger: each shard broadcast by its owner in chunks.
static void dp_allgather(Comm* c, float* full, size_t total) {
#ifdef USE_MPI
    if (c->DPC == 1) return;
    double t0 = wall_ms();
    ctrace_enter(&c->trace, CG_DP, "allgather", -1);
    if (total <= c->chunk) {
        int* counts = (int*)malloc_check(sizeof(int) * c->DPC);
        int* displs = (int*)malloc_check(sizeof(int) * c->DPC);
        for (int d = 0; d < c->DPC; d++) {
            size_t off, cnt;
            zero_shard(total, c->DPC, d, &off, &cnt);
            counts[d] = (int)cnt;
            displs[d] = (int)off;
        }
        mpiCheck(MPI_Allgatherv(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, full, counts, displs, MPI_FLOAT, c->dp_comm));
        free(counts);
        free(displs);
    } else {
        for (int d = 0; d < c->DPC; d++) {
            size_t off, cnt;
            zero_shard(total, c->DPC, d, &off, &cnt);
            for (size_t i = 0, k; (k = comm_piece(c, cnt, i)) > 0; i++)
                mpiCheck(MPI_Bcast(full + off + i * c->chunk, (int)k, MPI_FLOAT, d, c->dp_comm));
        }
    }
    ctrace_leave(&c->trace);
    c->comm_ms += wall_ms() - t0;
#else
    (void)c;
    (void)full;
    (void)total;
#endif
}

// Context parallelism's ring: send n floats to the next CP rank and receive n from the
// previous one (cp - 1), started now and completed by cp_ring_wait, so a block's compute
// overlaps the next block's transfer (chunked: at most chunk floats per message).
typedef struct {
#ifdef USE_MPI
    MPI_Request req[64];
#endif
    int nreq;
} CpRing;
static void cp_ring_start(Comm* c, CpRing* r, const float* send, float* recv, size_t n, int tag) {
    r->nreq = 0;
#ifdef USE_MPI
    if (c->CP == 1) return;
    int next = (c->cp + 1) % c->CP, prev = (c->cp + c->CP - 1) % c->CP;
    ctrace_enter(&c->trace, CG_CP, "ring", prev);
    for (size_t i = 0, k; (k = comm_piece(c, n, i)) > 0; i++) {
        if (r->nreq + 2 > 64) die("internal: a CP ring message of %zu floats needs more than 32 pieces", n);
        mpiCheck(MPI_Irecv(recv + i * c->chunk, (int)k, MPI_FLOAT, prev, tag, c->cp_comm, &r->req[r->nreq++]));
        mpiCheck(MPI_Isend(send + i * c->chunk, (int)k, MPI_FLOAT, next, tag, c->cp_comm, &r->req[r->nreq++]));
    }
    ctrace_leave(&c->trace);
#else
    (void)c;
    (void)send;
    (void)recv;
    (void)n;
    (void)tag;
#endif
}
static void cp_ring_wait(Comm* c, CpRing* r) {
#ifdef USE_MPI
    if (r->nreq == 0) return;
    double t0 = wall_ms();
    ctrace_enter(&c->trace, CG_CP, "ring_wait", (c->cp + c->CP - 1) % c->CP);
    mpiCheck(MPI_Waitall(r->nreq, r->req, MPI_STATUSES_IGNORE));
    ctrace_leave(&c->trace);
    c->comm_ms += wall_ms() - t0;
    r->nreq = 0;
#else
    (void)c;
    (void)r;
#endif
}

// broadcast over the whole job from world rank root
static void world_bcast(Comm* c, void* buf, size_t bytes, int root) {
#ifdef USE_MPI
    if (c->world > 1) {
        ctrace_enter(&c->trace, CG_WORLD, "bcast", -1);
        for (size_t i = 0, k; (k = comm_piece(c, bytes, i)) > 0; i++)
            mpiCheck(MPI_Bcast((char*)buf + i * c->chunk, (int)k, MPI_BYTE, root, MPI_COMM_WORLD));
        ctrace_leave(&c->trace);
    }
#else
    (void)c;
    (void)buf;
    (void)bytes;
    (void)root;
#endif
}

#endif // LLMC_COMM_H
