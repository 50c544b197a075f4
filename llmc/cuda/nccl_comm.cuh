/*
 * nccl_comm.cuh: the CUDA trainer's communication on device buffers, over one of two
 * backends, on top of the MPI groups of llmc/host/comm.h:
 *
 *   -comm nccl  one NCCL communicator per group (TP, DP, CP, PP, embedding), bootstrapped over
 *               the group's MPI communicator (rank 0 of the group makes the unique id and
 *               broadcasts it). Collectives run on the trainer's stream, asynchronously.
 *               NCCL needs one GPU per rank.
 *   -comm mpi   stages through pinned host memory: device -> host, the host collectives of
 *               comm.h (fp32), host -> device. bf16 data travels as fp32 (exact) and sums
 *               round to bf16 once. Several ranks may share one GPU (the 8-rank 2x2x2 check
 *               on one device).
 *
 * What travels in which precision: TP all-reduces of activations and activation
 * gradients bf16 (as Megatron); cross-entropy statistics fp32; pipeline sends bf16;
 * gradients (embedding group, DP all-reduce / ZeRO-1 reduce-scatter) fp32; ZeRO-1
 * all-gather of the updated weights bf16 (the rounded fp32 master shards). The "DP" group of
 * the gradients and ZeRO is comm.h's CP x DP group (dp_comm, DPC ranks, index dpc): CP ranks
 * hold the same weights, each with the gradient of its part of the sequences. The CP ring
 * (dc_cp_*, at the end) moves attention's K|V blocks bf16 and their dK|dV partials fp32.
 *
 * Pipeline point-to-point with NCCL blocks the stream until the peer posts the matching
 * operation, and NCCL matches a pair's messages by order. Overlapped (the default with NCCL
 * and PP > 1; dc_pp_*): one 2-rank communicator and one stream per ordered pair of
 * neighbouring stages (a link: only sends on the sender's end, only receives on the
 * receiver's, both in the schedule's per-pair order), warmed up at start-up in one global
 * order. A send's link stream waits for the compute stream's work so far, a receive's only
 * for its buffer to be free (PpBuf's events), and the compute stream waits for a transfer
 * only before it touches that buffer: a stage computes while its activations travel, and
 * the sends of neighbours no longer hold their compute streams in lock-step. Sends and
 * receives of different links are never in one ncclGroup (a group with several streams
 * joins them all). LLMC_PP_OVERLAP=0: the grouped path, the communication actions that are
 * adjacent in the schedule as one group on the compute stream (dc_group_begin/end: e.g. send
 * activations + receive gradients), as Megatron does. tests/cuda/test_pp_groups.cu simulates
 * both for every layout the trainer runs (PP <= 8, V <= 4) to show neither deadlocks. With
 * -comm mpi sends are buffered (comm.h) and grouping is a no-op.
 *
 * Every NCCL call is entered into the rank's collective trace (colltrace.h, DC_NCCL), and
 * every host wait for the device marks it, so the step watchdog can say where each rank
 * is (on a GPU "entered" means enqueued; under the emulation the call blocks, as MPI's).
 *
 * ZeRO-1 with NCCL needs equal shards: buffers given to the reduce-scatter / all-gather
 * hold DPC * ceil(n / DPC) elements (zero_shard's split, the tail zero-padded).
 */
#ifndef LLMC_NCCL_COMM_CUH
#define LLMC_NCCL_COMM_CUH

#include <nccl.h>
#include "cuda_utils.cuh"
#include "../host/comm.h"
#include "../host/seqpar.h"

// event pairs made at start-up; the pool doubles when a step makes more NCCL calls (TP > 1
// makes several per layer and micro-batch), so every call is timed
#define DC_TIMERS_INITIAL 4096

// a stage has at most four links: to and from each of its two neighbours (with -vpp the
// last and the first stage are neighbours too; with PP = 2 the two neighbours coincide)
#define DC_MAX_LINKS 4
typedef struct {
    int from, to;        // pipeline stages: messages travel from -> to only
    ncclComm_t comm;     // 2 ranks: from is NCCL rank 0, to is rank 1
    cudaStream_t stream; // this end's stream: only sends (from) or only receives (to)
    cudaEvent_t done;    // the compute stream's join at the end of a schedule
} PpLink;

// A buffer that pipeline messages travel from or into (an activation slot, a gradient
// buffer), under the overlapped pipeline: the events that order the link streams and the
// compute stream around it. used: recorded on the compute stream after the last compute
// that touched it (a receive into it waits for it); comm: recorded on a link stream after
// the last send from / receive into it (the compute stream, and a later transfer on
// another link, wait for it). pending: the compute stream has not yet waited for comm.
typedef struct {
    cudaEvent_t used, comm;
    int used_set, comm_set, pending;
} PpBuf;

typedef struct {
    Comm* host; // the layout's MPI groups and host collectives
    int nccl;   // 1: NCCL, 0: host-staged over MPI
    cudaStream_t stream;
    ncclComm_t tp, dp, pp, emb; // NULL where the group has one rank (or, emb, where not a member); dp: CP x DP
    float* hf;
    size_t hf_n; // pinned host staging, grown on demand
    uint16_t* hb;
    size_t hb_n;
    // NCCL time on the stream: one event pair per call (ev: (ev_cap, 2)), summed when the step ends
    cudaEvent_t* ev;
    int* ev_kind;
    int nev, ev_cap, timing, group_timer;
    long host_syncs; // host waits on the device so far (dc_wait_*): a step's count is printed and tested
    // overlapped DP reduction (NCCL, DPC > 1, unless LLMC_DP_OVERLAP=0): buckets reduce on cstream
    // while the compute stream runs on; ev_ready orders each bucket after its gradients, ev_reduced
    // the optimizer after every bucket
    int overlap;
    cudaStream_t cstream;
    cudaEvent_t ev_ready, ev_reduced;
    // pipeline links (NCCL, PP > 1, unless LLMC_PP_OVERLAP=0): one 2-rank communicator and
    // one stream per ordered pair of neighbouring stages that exchange messages (rank 0 of
    // the pair sends, rank 1 receives); only the links this rank is an end of
    int pp_overlap, nlinks;
    PpLink link[DC_MAX_LINKS];
    cudaEvent_t ev_pp; // scratch: compute-stream points the link streams wait for
    bf16* warm;        // (2 * DC_MAX_LINKS) the warm-up messages, one element per link end
    // the CP ring (CP > 1; dc_cp_*): NCCL, the CP group's communicator and its own stream, cp_ready
    // (the compute stream's work so far, which the transfer waits for) and cp_arrived (the transfer,
    // which the compute stream waits for); MPI, comm.h's ring staged through pinned cp_hs / cp_hr
    ncclComm_t cp;
    cudaStream_t cp_stream;
    cudaEvent_t cp_ready, cp_arrived;
    CpRing cp_ring;
    float* cp_hs;
    float* cp_hr;
    size_t cp_hn;
    void* cp_recv;  // the pending transfer's device destination (MPI: staged up at dc_cp_ring_wait)
    size_t cp_n;    // its elements
    int cp_bf16;    // 1: bf16 elements, 0: fp32
    int cp_pending; // a transfer started and not yet waited for
} DevComm;

// An NCCL call of group g (CollGroup) in the collective trace; peer: the pipeline stage of a
// send or receive, -1 for collectives.
#define DC_NCCL(d, g, op, peer, call)                 \
    do {                                              \
        ctrace_enter(&(d)->host->trace, g, op, peer); \
        ncclCheck(call);                              \
        ctrace_leave(&(d)->host->trace);              \
    } while (0)

// Every host wait on the device goes through these two, so a step's waits can be counted
// (and the watchdog can say that a rank waits for its device).
static void dc_wait_stream(DevComm* d, cudaStream_t s) {
    d->host_syncs++;
    ctrace_host_wait(&d->host->trace, 1);
    cudaCheck(cudaStreamSynchronize(s));
    ctrace_host_wait(&d->host->trace, 0);
}
static void dc_wait_event(DevComm* d, cudaEvent_t e) {
    d->host_syncs++;
    ctrace_host_wait(&d->host->trace, 1);
    cudaCheck(cudaEventSynchronize(e));
    ctrace_host_wait(&d->host->trace, 0);
}

#ifdef USE_MPI
static ncclComm_t dc_nccl_for(MPI_Comm mc) {
    int size, rank;
    mpiCheck(MPI_Comm_size(mc, &size));
    mpiCheck(MPI_Comm_rank(mc, &rank));
    ncclUniqueId id;
    memset(&id, 0, sizeof(id));
    if (rank == 0) ncclCheck(ncclGetUniqueId(&id));
    mpiCheck(MPI_Bcast(&id, (int)sizeof(id), MPI_BYTE, 0, mc));
    ncclComm_t c;
    ncclCheck(ncclCommInitRank(&c, size, id, rank));
    return c;
}
#endif

// grows the event-pair pool to cap pairs (events already recorded keep their handles)
static void dc_timers_grow(DevComm* d, int cap) {
    cudaEvent_t* ev = (cudaEvent_t*)malloc_check(sizeof(cudaEvent_t) * 2 * cap);
    int* kind = (int*)malloc_check(sizeof(int) * cap);
    if (d->ev) {
        memcpy(ev, d->ev, sizeof(cudaEvent_t) * 2 * d->ev_cap);
        memcpy(kind, d->ev_kind, sizeof(int) * d->ev_cap);
    }
    for (int i = 2 * d->ev_cap; i < 2 * cap; i++) cudaCheck(cudaEventCreate(&ev[i]));
    free(d->ev);
    free(d->ev_kind);
    d->ev = ev;
    d->ev_kind = kind;
    d->ev_cap = cap;
}

// use_nccl: -comm nccl. Every rank calls this (group creation is collective per group).
static void devcomm_init(DevComm* d, Comm* c, int use_nccl, cudaStream_t stream, int timing) {
    memset(d, 0, sizeof(*d));
    d->host = c;
    d->nccl = use_nccl;
    d->stream = stream;
    d->timing = timing;
#ifdef USE_MPI
    if (use_nccl && c->mpi && c->world > 1) {
        // same order on every rank; each init blocks only on its own group's members
        if (c->TP > 1) d->tp = dc_nccl_for(c->tp_comm);
        if (c->DPC > 1) d->dp = dc_nccl_for(c->dp_comm); // CP x DP: the gradients' group
        if (c->CP > 1) d->cp = dc_nccl_for(c->cp_comm);
        if (c->PP > 1) d->pp = dc_nccl_for(c->pp_comm);
        if (c->PP > 1 && c->emb_comm != MPI_COMM_NULL) d->emb = dc_nccl_for(c->emb_comm);
    }
#endif
    if (timing) dc_timers_grow(d, DC_TIMERS_INITIAL);
    const char* ov = getenv("LLMC_DP_OVERLAP");
    if (ov != NULL && strcmp(ov, "0") != 0 && strcmp(ov, "1") != 0) {
        fprintf(stderr, "error: environment LLMC_DP_OVERLAP=%s: use 1 (default) or 0\n", ov);
        exit(1);
    }
    d->overlap = use_nccl && c->DPC > 1 && !(ov != NULL && strcmp(ov, "0") == 0);
    if (d->overlap) {
        cudaCheck(cudaStreamCreateWithFlags(&d->cstream, cudaStreamNonBlocking));
        cudaCheck(cudaEventCreateWithFlags(&d->ev_ready, cudaEventDisableTiming));
        cudaCheck(cudaEventCreateWithFlags(&d->ev_reduced, cudaEventDisableTiming));
    }
    if (use_nccl && c->CP > 1) {
        cudaCheck(cudaStreamCreateWithFlags(&d->cp_stream, cudaStreamNonBlocking));
        cudaCheck(cudaEventCreateWithFlags(&d->cp_ready, cudaEventDisableTiming));
        cudaCheck(cudaEventCreateWithFlags(&d->cp_arrived, cudaEventDisableTiming));
    }
}

static void devcomm_free(DevComm* d) {
    for (int i = 0; i < d->nlinks; i++) {
        PpLink* L = &d->link[i];
        cudaCheck(cudaStreamSynchronize(L->stream)); // its last transfers are done before the communicator goes
        ncclCommDestroy(L->comm);
        cudaStreamDestroy(L->stream);
        cudaEventDestroy(L->done);
    }
    if (d->pp_overlap) {
        cudaEventDestroy(d->ev_pp);
        dev_free(d->warm);
    }
    if (d->tp) ncclCommDestroy(d->tp);
    if (d->dp) ncclCommDestroy(d->dp);
    if (d->pp) ncclCommDestroy(d->pp);
    if (d->emb) ncclCommDestroy(d->emb);
    if (d->cp_stream) {
        cudaCheck(cudaStreamSynchronize(d->cp_stream)); // its last transfer is done before the communicator goes
        cudaStreamDestroy(d->cp_stream);
        cudaEventDestroy(d->cp_ready);
        cudaEventDestroy(d->cp_arrived);
    }
    if (d->cp) ncclCommDestroy(d->cp);
    if (d->cp_hs) cudaFreeHost(d->cp_hs);
    if (d->cp_hr) cudaFreeHost(d->cp_hr);
    if (d->hf) cudaFreeHost(d->hf);
    if (d->hb) cudaFreeHost(d->hb);
    if (d->ev) {
        for (int i = 0; i < 2 * d->ev_cap; i++) cudaEventDestroy(d->ev[i]);
        free(d->ev);
        free(d->ev_kind);
    }
    if (d->overlap) {
        cudaStreamDestroy(d->cstream);
        cudaEventDestroy(d->ev_ready);
        cudaEventDestroy(d->ev_reduced);
    }
    memset(d, 0, sizeof(*d));
}

static float* dc_hf(DevComm* d, size_t n) {
    if (n > d->hf_n) {
        if (d->hf) cudaCheck(cudaFreeHost(d->hf));
        cudaCheck(cudaMallocHost((void**)&d->hf, sizeof(float) * n));
        d->hf_n = n;
    }
    return d->hf;
}
static uint16_t* dc_hb(DevComm* d, size_t n) {
    if (n > d->hb_n) {
        if (d->hb) cudaCheck(cudaFreeHost(d->hb));
        cudaCheck(cudaMallocHost((void**)&d->hb, sizeof(uint16_t) * n));
        d->hb_n = n;
    }
    return d->hb;
}

// timing of NCCL work on a stream (kind 0: collective, 1: pipeline receive side, 2: DP
// reduction on the communication stream, beside compute)
static int dc_tic_on(DevComm* d, cudaStream_t s) {
    if (!d->timing || !d->nccl) return -1;
    if (d->nev == d->ev_cap) dc_timers_grow(d, 2 * d->ev_cap); // the first such step only: the pool keeps its size
    int i = d->nev++;
    cudaCheck(cudaEventRecord(d->ev[2 * i], s));
    return i;
}
static void dc_toc_on(DevComm* d, int i, int kind, cudaStream_t s) {
    if (i < 0) return;
    d->ev_kind[i] = kind;
    cudaCheck(cudaEventRecord(d->ev[2 * i + 1], s));
}
static int dc_tic(DevComm* d) { return dc_tic_on(d, d->stream); }
static void dc_toc(DevComm* d, int i, int kind) { dc_toc_on(d, i, kind, d->stream); }
// the end of a step: waits for the stream and adds the step's NCCL time to the host Comm's counters
static void dc_collect_time(DevComm* d) {
    dc_wait_stream(d, d->stream);
    for (int i = 0; i < d->nev; i++) {
        float ms = 0.0f;
        cudaCheck(cudaEventElapsedTime(&ms, d->ev[2 * i], d->ev[2 * i + 1]));
        if (d->ev_kind[i] == 0)
            d->host->comm_ms += ms;
        else if (d->ev_kind[i] == 1)
            d->host->idle_ms += ms;
        else
            d->host->overlap_ms += ms;
    }
    d->nev = 0;
}

// ---------------------------------------------------------------------------------------
// host staging helpers (-comm mpi)

static float* dc_stage_down_bf16(DevComm* d, const bf16* buf, size_t n, size_t extra) {
    uint16_t* hb = dc_hb(d, n);
    float* hf = dc_hf(d, n + extra);
    cudaCheck(cudaMemcpyAsync(hb, buf, sizeof(uint16_t) * n, cudaMemcpyDeviceToHost, d->stream));
    dc_wait_stream(d, d->stream);
    for (size_t i = 0; i < n; i++) hf[i] = host_bf2f(hb[i]);
    return hf;
}
static void dc_stage_up_bf16(DevComm* d, bf16* buf, const float* hf, size_t n) {
    uint16_t* hb = dc_hb(d, n);
    for (size_t i = 0; i < n; i++) hb[i] = host_f2bf(hf[i]);
    cudaCheck(cudaMemcpyAsync(buf, hb, sizeof(uint16_t) * n, cudaMemcpyHostToDevice, d->stream));
    dc_wait_stream(d, d->stream);
}
static float* dc_stage_down_f32(DevComm* d, const float* buf, size_t n, size_t extra) {
    float* hf = dc_hf(d, n + extra);
    cudaCheck(cudaMemcpyAsync(hf, buf, sizeof(float) * n, cudaMemcpyDeviceToHost, d->stream));
    dc_wait_stream(d, d->stream);
    return hf;
}
static void dc_stage_up_f32(DevComm* d, float* buf, const float* hf, size_t n) {
    cudaCheck(cudaMemcpyAsync(buf, hf, sizeof(float) * n, cudaMemcpyHostToDevice, d->stream));
    dc_wait_stream(d, d->stream);
}

// ---------------------------------------------------------------------------------------
// collectives

// sum over the TP group, bf16 in place
static void dc_tp_allreduce_bf16(DevComm* d, bf16* buf, size_t n) {
    if (d->host->TP == 1 || n == 0) return;
    if (d->nccl) {
        int k = dc_tic(d);
        DC_NCCL(d, CG_TP, "allreduce", -1, ncclAllReduce(buf, buf, n, ncclBfloat16, ncclSum, d->tp, d->stream));
        dc_toc(d, k, 0);
        return;
    }
    float* hf = dc_stage_down_bf16(d, buf, n, 0);
    tp_allreduce_sum(d->host, hf, n);
    dc_stage_up_bf16(d, buf, hf, n);
}

// sum (op_max 0) or max (op_max 1) over the TP group, fp32 in place
static void dc_tp_allreduce_f32(DevComm* d, float* buf, size_t n, int op_max) {
    if (d->host->TP == 1 || n == 0) return;
    if (d->nccl) {
        int k = dc_tic(d);
        DC_NCCL(d, CG_TP, op_max ? "allreduce_max" : "allreduce", -1,
                ncclAllReduce(buf, buf, n, ncclFloat, op_max ? ncclMax : ncclSum, d->tp, d->stream));
        dc_toc(d, k, 0);
        return;
    }
    float* hf = dc_stage_down_f32(d, buf, n, 0);
    if (op_max)
        tp_allreduce_max(d->host, hf, n);
    else
        tp_allreduce_sum(d->host, hf, n);
    dc_stage_up_f32(d, buf, hf, n);
}

// tied embedding gradient: sum between the first and the last stage (members only)
static void dc_emb_allreduce_f32(DevComm* d, float* buf, size_t n) {
    if (d->host->PP == 1 || n == 0) return;
    if (d->nccl) {
        if (d->emb == NULL) return;
        int k = dc_tic(d);
        DC_NCCL(d, CG_EMB, "allreduce", -1, ncclAllReduce(buf, buf, n, ncclFloat, ncclSum, d->emb, d->stream));
        dc_toc(d, k, 0);
        return;
    }
#ifdef USE_MPI
    if (d->host->emb_comm == MPI_COMM_NULL) return;
#endif
    float* hf = dc_stage_down_f32(d, buf, n, 0);
    emb_allreduce_sum(d->host, hf, n);
    dc_stage_up_f32(d, buf, hf, n);
}

static void dc_dp_allreduce_f32(DevComm* d, float* buf, size_t n) {
    if (d->host->DPC == 1 || n == 0) return;
    if (d->nccl) {
        int k = dc_tic(d);
        DC_NCCL(d, CG_DP, "allreduce", -1, ncclAllReduce(buf, buf, n, ncclFloat, ncclSum, d->dp, d->stream));
        dc_toc(d, k, 0);
        return;
    }
    float* hf = dc_stage_down_f32(d, buf, n, 0);
    dp_allreduce_sum(d->host, hf, n);
    dc_stage_up_f32(d, buf, hf, n);
}

// Overlapped DP reduction of the flat ranges [lo[i], hi[i]) of grads (total_pad = DPC * per
// elements), on the communication stream once the compute stream's work so far (the ranges'
// last gradient contributions) is done. Without ZeRO each range is all-reduced in place; with
// ZeRO-1 each part of it goes to the DP rank whose shard holds it (ncclReduce in place: the
// shards are the equal slices [r*per, (r+1)*per), as in dc_dp_reduce_scatter_f32), so the
// owner's slice of grads ends as its reduced shard. One NCCL group per bucket.
static void dc_dp_bucket_f32(DevComm* d, float* grads, const size_t* lo, const size_t* hi, int n, size_t per,
                             int zero) {
    cudaCheck(cudaEventRecord(d->ev_ready, d->stream));
    cudaCheck(cudaStreamWaitEvent(d->cstream, d->ev_ready, 0));
    int k = dc_tic_on(d, d->cstream);
    ncclCheck(ncclGroupStart());
    for (int i = 0; i < n; i++) {
        if (!zero) {
            DC_NCCL(d, CG_DP, "allreduce", -1,
                    ncclAllReduce(grads + lo[i], grads + lo[i], hi[i] - lo[i], ncclFloat, ncclSum, d->dp, d->cstream));
            continue;
        }
        for (int r = (int)(lo[i] / per); r < d->host->DPC && (size_t)r * per < hi[i]; r++) {
            size_t a = lo[i] > (size_t)r * per ? lo[i] : (size_t)r * per;
            size_t b = hi[i] < (size_t)(r + 1) * per ? hi[i] : (size_t)(r + 1) * per;
            if (a < b)
                DC_NCCL(d, CG_DP, "reduce", -1,
                        ncclReduce(grads + a, grads + a, b - a, ncclFloat, ncclSum, r, d->dp, d->cstream));
        }
    }
    ncclCheck(ncclGroupEnd());
    dc_toc_on(d, k, 2, d->cstream);
}
// the compute stream waits for every bucket launched so far
static void dc_dp_bucket_join(DevComm* d) {
    cudaCheck(cudaEventRecord(d->ev_reduced, d->cstream));
    cudaCheck(cudaStreamWaitEvent(d->stream, d->ev_reduced, 0));
}

// ZeRO-1: shard (this rank's zero_shard of total) = sum over CP x DP of full. full holds
// DPC*ceil(total/DPC) elements (tail zero).
static void dc_dp_reduce_scatter_f32(DevComm* d, const float* full, float* shard, size_t total) {
    Comm* c = d->host;
    size_t off, cnt;
    zero_shard(total, c->DPC, c->dpc, &off, &cnt);
    if (c->DPC == 1) {
        cudaCheck(cudaMemcpyAsync(shard, full, sizeof(float) * total, cudaMemcpyDeviceToDevice, d->stream));
        return;
    }
    if (d->nccl) {
        size_t per = (total + c->DPC - 1) / c->DPC;
        int k = dc_tic(d);
        DC_NCCL(d, CG_DP, "reduce_scatter", -1,
                ncclReduceScatter(full, shard, per, ncclFloat, ncclSum, d->dp, d->stream));
        dc_toc(d, k, 0);
        return;
    }
    float* hf = dc_stage_down_f32(d, full, total, total);
    dp_reduce_scatter_sum(c, hf, hf + total, total);
    dc_stage_up_f32(d, shard, hf + total, cnt);
}

// ZeRO-1: every rank of the CP x DP group holds its shard of full (bf16, in place); gather the
// rest. full holds DPC*ceil(total/DPC) elements.
static void dc_dp_allgather_bf16(DevComm* d, bf16* full, size_t total) {
    Comm* c = d->host;
    if (c->DPC == 1) return;
    if (d->nccl) {
        size_t per = (total + c->DPC - 1) / c->DPC;
        int k = dc_tic(d);
        DC_NCCL(d, CG_DP, "allgather", -1,
                ncclAllGather(full + (size_t)c->dpc * per, full, per, ncclBfloat16, d->dp, d->stream));
        dc_toc(d, k, 0);
        return;
    }
    float* hf = dc_stage_down_bf16(d, full, total, 0);
    dp_allgather(c, hf, total);
    dc_stage_up_bf16(d, full, hf, total);
}

// ZeRO-1: the fp32 master shards into one whole buffer (checkpoint saving only)
static void dc_dp_allgather_f32(DevComm* d, float* full, size_t total) {
    Comm* c = d->host;
    if (c->DPC == 1) return;
    if (d->nccl) {
        size_t per = (total + c->DPC - 1) / c->DPC;
        DC_NCCL(d, CG_DP, "allgather", -1,
                ncclAllGather(full + (size_t)c->dpc * per, full, per, ncclFloat, d->dp, d->stream));
        return;
    }
    float* hf = dc_stage_down_f32(d, full, total, 0);
    dp_allgather(c, hf, total);
    dc_stage_up_f32(d, full, hf, total);
}

// -sp 1 (llmc/host/seqpar.h's layout): full (B, T, C) <- the (B, Ts, C) sequence shard of every
// TP rank. NCCL gathers rank-major (TP, B, Ts, C) into tmp (B*T*C) and copies each piece to
// its rows; -comm mpi stages through the host and uses seqpar.h itself.
static void dc_sp_allgather_bf16(DevComm* d, bf16* full, const bf16* shard, int B, int Ts, int C, bf16* tmp) {
    Comm* c = d->host;
    size_t piece = (size_t)Ts * C, ns = (size_t)B * piece, nf = ns * c->TP;
    if (d->nccl) {
        int k = dc_tic(d);
        DC_NCCL(d, CG_TP, "allgather", -1, ncclAllGather(shard, tmp, ns, ncclBfloat16, d->tp, d->stream));
        dc_toc(d, k, 0);
        for (int r = 0; r < c->TP; r++)
            for (int b = 0; b < B; b++)
                cudaCheck(cudaMemcpyAsync(full + ((size_t)b * c->TP + r) * piece, tmp + ((size_t)r * B + b) * piece,
                                          sizeof(bf16) * piece, cudaMemcpyDeviceToDevice, d->stream));
        return;
    }
    float* hf = dc_stage_down_bf16(d, shard, ns, 2 * nf); // shard | full | seqpar.h's staging
    sp_allgather(c, hf + ns, hf, B, Ts, C, hf + ns + nf);
    dc_stage_up_bf16(d, full, hf + ns, nf);
}

// -sp 1: shard (B, Ts, C) <- this rank's sequence rows of the partial sums full (B, T, C),
// summed over the TP group (the transpose of dc_sp_allgather_bf16). tmp: B*T*C.
static void dc_sp_reduce_scatter_bf16(DevComm* d, bf16* shard, const bf16* full, int B, int Ts, int C, bf16* tmp) {
    Comm* c = d->host;
    size_t piece = (size_t)Ts * C, ns = (size_t)B * piece, nf = ns * c->TP;
    if (d->nccl) {
        for (int r = 0; r < c->TP; r++)
            for (int b = 0; b < B; b++)
                cudaCheck(cudaMemcpyAsync(tmp + ((size_t)r * B + b) * piece, full + ((size_t)b * c->TP + r) * piece,
                                          sizeof(bf16) * piece, cudaMemcpyDeviceToDevice, d->stream));
        int k = dc_tic(d);
        DC_NCCL(d, CG_TP, "reduce_scatter", -1,
                ncclReduceScatter(tmp, shard, ns, ncclBfloat16, ncclSum, d->tp, d->stream));
        dc_toc(d, k, 0);
        return;
    }
    float* hf = dc_stage_down_bf16(d, full, nf, ns + nf); // full | shard | seqpar.h's staging
    sp_reduce_scatter(c, hf + nf, hf, B, Ts, C, hf + nf + ns);
    dc_stage_up_bf16(d, shard, hf + nf, ns);
}

// pipeline: bf16 activations or their gradients to / from a neighbouring stage, inside one
// group per run of messages (LLMC_PP_OVERLAP=0, or -comm mpi); dc_pp_send_bf16 below picks
static void dc_pp_group_send_bf16(DevComm* d, const bf16* buf, size_t n, int to_stage, int tag) {
    if (d->nccl) {
        DC_NCCL(d, CG_PP, "send", to_stage, ncclSend(buf, n, ncclBfloat16, to_stage, d->pp, d->stream));
        return;
    } // inside a group
    float* hf = dc_stage_down_bf16(d, buf, n, 0);
    pp_send(d->host, hf, n, to_stage, tag); // copies into comm.h's send ring
}
static void dc_pp_group_recv_bf16(DevComm* d, bf16* buf, size_t n, int from_stage, int tag) {
    if (d->nccl) {
        DC_NCCL(d, CG_PP, "recv", from_stage, ncclRecv(buf, n, ncclBfloat16, from_stage, d->pp, d->stream));
        return;
    } // inside a group
    float* hf = dc_hf(d, n);
    pp_recv(d->host, hf, n, from_stage, tag);
    dc_stage_up_bf16(d, buf, hf, n);
}
// Every NCCL send/recv goes between these; the group's time on the stream counts as
// pipeline idle time (it is mostly waiting for the peer).
static void dc_group_begin(DevComm* d) {
    if (!d->nccl) return;
    d->group_timer = dc_tic(d);
    ncclCheck(ncclGroupStart());
}
static void dc_group_end(DevComm* d) {
    if (!d->nccl) return;
    ncclCheck(ncclGroupEnd());
    dc_toc(d, d->group_timer, 1);
}
static void dc_pp_flush(DevComm* d) {
    if (!d->nccl) pp_flush(d->host);
}


// ---------------------------------------------------------------------------------------
// overlapped pipeline (LLMC_PP_OVERLAP, default on with NCCL and PP > 1)

// Do stages a and b exchange messages? Neighbours, and with -vpp (V > 1) also the last and
// the first stage (activations wrap to the next chunk, gradients back).
static int dc_pp_neighbours(int a, int b, int PP, int V) {
    if (a == b) return 0;
    if (a - b == 1 || b - a == 1) return 1;
    return V > 1 && ((a == 0 && b == PP - 1) || (a == PP - 1 && b == 0));
}

// The links, made by every rank (the splits are collective over the PP group, in the same
// order everywhere: the ordered pairs sorted by (from, to)), then warmed up: NCCL's first
// use of a point-to-point connection may block the host in a handshake with the peer, so
// each link carries one element first, all of them in that one global order (each rank's
// sequence is a subsequence of it: no two ranks can wait on each other in a cycle), and the
// host waits for them before any step. V: model chunks per rank (-vpp). Call after
// devcomm_init on every rank.
static void dc_pp_links_init(DevComm* d, int V) {
    Comm* c = d->host;
    const char* ov = getenv("LLMC_PP_OVERLAP");
    if (ov != NULL && strcmp(ov, "0") != 0 && strcmp(ov, "1") != 0) {
        fprintf(stderr, "error: environment LLMC_PP_OVERLAP=%s: use 1 (default) or 0\n", ov);
        exit(1);
    }
    d->pp_overlap = d->nccl && c->PP > 1 && !(ov != NULL && strcmp(ov, "0") == 0);
#ifdef USE_MPI
    if (!d->pp_overlap) return;
    int me = c->pp;
    for (int from = 0; from < c->PP; from++)
        for (int to = 0; to < c->PP; to++) {
            if (!dc_pp_neighbours(from, to, c->PP, V)) continue;
            int member = me == from || me == to;
            MPI_Comm sub;
            mpiCheck(MPI_Comm_split(c->pp_comm, member ? 0 : MPI_UNDEFINED, me == from ? 0 : 1, &sub));
            if (!member) continue;
            if (d->nlinks == DC_MAX_LINKS) {
                fprintf(stderr, "internal: more than %d pipeline links\n", DC_MAX_LINKS);
                exit(1);
            }
            PpLink* L = &d->link[d->nlinks++];
            L->from = from;
            L->to = to;
            L->comm = dc_nccl_for(sub); // blocks on the pair only
            mpiCheck(MPI_Comm_free(&sub));
            cudaCheck(cudaStreamCreateWithFlags(&L->stream, cudaStreamNonBlocking));
            cudaCheck(cudaEventCreateWithFlags(&L->done, cudaEventDisableTiming));
        }
    cudaCheck(cudaEventCreateWithFlags(&d->ev_pp, cudaEventDisableTiming));
    d->warm = (bf16*)dev_alloc(sizeof(bf16) * 2 * DC_MAX_LINKS);
    cudaCheck(cudaEventRecord(d->ev_pp, d->stream)); // after dev_alloc's zeroing (d->stream is a blocking stream)
    for (int i = 0; i < d->nlinks; i++) {            // d->link is already in the global (from, to) order
        PpLink* L = &d->link[i];
        cudaCheck(cudaStreamWaitEvent(L->stream, d->ev_pp, 0));
        if (L->from == me)
            ncclCheck(ncclSend(d->warm + 2 * i, 1, ncclBfloat16, 1, L->comm, L->stream));
        else
            ncclCheck(ncclRecv(d->warm + 2 * i + 1, 1, ncclBfloat16, 0, L->comm, L->stream));
    }
    for (int i = 0; i < d->nlinks; i++) dc_wait_stream(d, d->link[i].stream);
#else
    (void)V;
    d->pp_overlap = 0; // one process: no pipeline
#endif
}

static PpLink* dc_pp_link(DevComm* d, int from, int to) {
    for (int i = 0; i < d->nlinks; i++)
        if (d->link[i].from == from && d->link[i].to == to) return &d->link[i];
    fprintf(stderr, "internal: no pipeline link %d -> %d on stage %d\n", from, to, d->host->pp);
    exit(1);
}

static void dc_ppbuf_init(PpBuf* b) {
    memset(b, 0, sizeof(*b));
    cudaCheck(cudaEventCreateWithFlags(&b->used, cudaEventDisableTiming));
    cudaCheck(cudaEventCreateWithFlags(&b->comm, cudaEventDisableTiming));
}
static void dc_ppbuf_free(PpBuf* b) {
    cudaEventDestroy(b->used);
    cudaEventDestroy(b->comm);
    memset(b, 0, sizeof(*b));
}

// The start of a schedule: every link stream waits for the compute stream's work so far
// (whatever touched the buffers before), and the buffers' events start afresh.
static void dc_pp_begin(DevComm* d, PpBuf* bufs, int nbufs) {
    if (!d->pp_overlap) return;
    cudaCheck(cudaEventRecord(d->ev_pp, d->stream));
    for (int i = 0; i < d->nlinks; i++) cudaCheck(cudaStreamWaitEvent(d->link[i].stream, d->ev_pp, 0));
    for (int i = 0; i < nbufs; i++) bufs[i].used_set = bufs[i].comm_set = bufs[i].pending = 0;
}
// Send n bf16 of buf (b: its events) to stage to_stage on that link's stream, once the
// compute stream's work so far has produced them and an earlier transfer of the buffer on
// another link is done.
static void dc_pp_isend_bf16(DevComm* d, PpBuf* b, const bf16* buf, size_t n, int to_stage) {
    PpLink* L = dc_pp_link(d, d->host->pp, to_stage);
    cudaCheck(cudaEventRecord(d->ev_pp, d->stream));
    cudaCheck(cudaStreamWaitEvent(L->stream, d->ev_pp, 0));
    if (b->comm_set) cudaCheck(cudaStreamWaitEvent(L->stream, b->comm, 0));
    DC_NCCL(d, CG_PP, "send", to_stage, ncclSend(buf, n, ncclBfloat16, 1, L->comm, L->stream));
    cudaCheck(cudaEventRecord(b->comm, L->stream));
    b->comm_set = b->pending = 1;
}
// Receive n bf16 into buf from stage from_stage on that link's stream, once the buffer is
// free: the compute that last used it and its last transfer are done (GPU-side waits only).
static void dc_pp_irecv_bf16(DevComm* d, PpBuf* b, bf16* buf, size_t n, int from_stage) {
    PpLink* L = dc_pp_link(d, from_stage, d->host->pp);
    if (b->used_set) cudaCheck(cudaStreamWaitEvent(L->stream, b->used, 0));
    if (b->comm_set) cudaCheck(cudaStreamWaitEvent(L->stream, b->comm, 0));
    DC_NCCL(d, CG_PP, "recv", from_stage, ncclRecv(buf, n, ncclBfloat16, 0, L->comm, L->stream));
    cudaCheck(cudaEventRecord(b->comm, L->stream));
    b->comm_set = b->pending = 1;
}
// A message of the schedule: on its link's stream when the links overlap (b: the buffer's
// events), else inside the caller's group (tag: the host ring's message tag).
static void dc_pp_send_bf16(DevComm* d, PpBuf* b, const bf16* buf, size_t n, int to_stage, int tag) {
    if (d->pp_overlap)
        dc_pp_isend_bf16(d, b, buf, n, to_stage);
    else
        dc_pp_group_send_bf16(d, buf, n, to_stage, tag);
}
static void dc_pp_recv_bf16(DevComm* d, PpBuf* b, bf16* buf, size_t n, int from_stage, int tag) {
    if (d->pp_overlap)
        dc_pp_irecv_bf16(d, b, buf, n, from_stage);
    else
        dc_pp_group_recv_bf16(d, buf, n, from_stage, tag);
}
// Before compute touches b: the compute stream waits for its last transfer (a receive's
// data has arrived, a send no longer reads it). The time the compute stream spends in this
// wait is pipeline idle time (kind 1): the stage waiting for a neighbour.
static void dc_pp_acquire(DevComm* d, PpBuf* b) {
    if (!d->pp_overlap || !b->pending) return;
    int k = dc_tic(d);
    cudaCheck(cudaStreamWaitEvent(d->stream, b->comm, 0));
    dc_toc(d, k, 1);
    b->pending = 0;
}
// After compute touched b: a later receive into it waits for this point.
static void dc_pp_used(DevComm* d, PpBuf* b) {
    if (!d->pp_overlap) return;
    cudaCheck(cudaEventRecord(b->used, d->stream));
    b->used_set = 1;
}
// The end of a schedule: the compute stream waits for every link stream (the last sends
// are done before anything after the schedule reuses a buffer or the step ends).
static void dc_pp_end(DevComm* d) {
    if (!d->pp_overlap) return;
    int k = dc_tic(d);
    for (int i = 0; i < d->nlinks; i++) {
        cudaCheck(cudaEventRecord(d->link[i].done, d->link[i].stream));
        cudaCheck(cudaStreamWaitEvent(d->stream, d->link[i].done, 0));
    }
    dc_toc(d, k, 1);
}

// ---------------------------------------------------------------------------------------
// context parallelism's ring (CP > 1): n elements of send to the next CP rank and n into recv
// from the previous one, started by dc_cp_ring_start and completed by dc_cp_ring_wait, with a
// ring step's compute issued between the two (train_gpt.cu's cp_attention_forward/_backward).
// NCCL: on the CP stream, once the compute stream's work so far is done (it made send, and it
// has finished reading what recv held), the send and the receive in one group (every rank of
// the ring sends and receives at once: no layout can deadlock); the compute stream waits for
// the arrival only at dc_cp_ring_wait, so the compute issued in between overlaps the transfer.
// MPI: staged down at the start, comm.h's non-blocking ring while the device computes, staged
// up at the wait. bf16_elems: bf16 elements (fp32 on the host: exact), else fp32. One
// transfer at a time; tag: the host ring's message tag.
static void dc_cp_ring_start(DevComm* d, const void* send, void* recv, size_t n, int bf16_elems, int tag) {
    Comm* c = d->host;
    if (c->CP == 1 || n == 0) return;
    if (d->cp_pending) {
        fprintf(stderr, "internal: a CP ring transfer started before the previous one was waited for\n");
        exit(1);
    }
    d->cp_pending = 1;
    d->cp_recv = recv;
    d->cp_n = n;
    d->cp_bf16 = bf16_elems;
    if (d->nccl) {
        int next = (c->cp + 1) % c->CP, prev = (c->cp + c->CP - 1) % c->CP;
        ncclDataType_t ty = bf16_elems ? ncclBfloat16 : ncclFloat;
        cudaCheck(cudaEventRecord(d->cp_ready, d->stream));
        cudaCheck(cudaStreamWaitEvent(d->cp_stream, d->cp_ready, 0));
        int k = dc_tic_on(d, d->cp_stream);
        ncclCheck(ncclGroupStart());
        DC_NCCL(d, CG_CP, "send", next, ncclSend(send, n, ty, next, d->cp, d->cp_stream));
        DC_NCCL(d, CG_CP, "recv", prev, ncclRecv(recv, n, ty, prev, d->cp, d->cp_stream));
        ncclCheck(ncclGroupEnd());
        dc_toc_on(d, k, 2, d->cp_stream); // beside the compute, as the DP buckets
        cudaCheck(cudaEventRecord(d->cp_arrived, d->cp_stream));
        return;
    }
    if (n > d->cp_hn) {
        if (d->cp_hs) cudaCheck(cudaFreeHost(d->cp_hs));
        if (d->cp_hr) cudaCheck(cudaFreeHost(d->cp_hr));
        cudaCheck(cudaMallocHost((void**)&d->cp_hs, sizeof(float) * n));
        cudaCheck(cudaMallocHost((void**)&d->cp_hr, sizeof(float) * n));
        d->cp_hn = n;
    }
    if (bf16_elems) {
        uint16_t* hb = dc_hb(d, n);
        cudaCheck(cudaMemcpyAsync(hb, send, sizeof(uint16_t) * n, cudaMemcpyDeviceToHost, d->stream));
        dc_wait_stream(d, d->stream);
        for (size_t i = 0; i < n; i++) d->cp_hs[i] = host_bf2f(hb[i]);
    } else {
        cudaCheck(cudaMemcpyAsync(d->cp_hs, send, sizeof(float) * n, cudaMemcpyDeviceToHost, d->stream));
        dc_wait_stream(d, d->stream);
    }
    cp_ring_start(c, &d->cp_ring, d->cp_hs, d->cp_hr, n, tag);
}
// The compute stream waits for the transfer dc_cp_ring_start began (MPI: the host waits, then
// copies the received elements up).
static void dc_cp_ring_wait(DevComm* d) {
    if (!d->cp_pending) return;
    d->cp_pending = 0;
    if (d->nccl) {
        cudaCheck(cudaStreamWaitEvent(d->stream, d->cp_arrived, 0));
        return;
    }
    cp_ring_wait(d->host, &d->cp_ring);
    if (d->cp_bf16)
        dc_stage_up_bf16(d, (bf16*)d->cp_recv, d->cp_hr, d->cp_n);
    else
        dc_stage_up_f32(d, (float*)d->cp_recv, d->cp_hr, d->cp_n);
}
#endif // LLMC_NCCL_COMM_CUH
