/*
 * zero.cuh: the CUDA trainer's sharded data parallelism on the device (-zero 2/3, and ZeRO-1
 * with -grad-reduce bf16): the bucket reductions into each owner's fp32 shard and the -zero 3
 * gathers of bf16 weights, over the shards and buckets of llmc/host/zero.h (its opening
 * comment fixes the semantics both trainers share).
 *
 *   reduction  (zd_reduce) a bucket of a local fp32 buffer (a layer's gradient scratch, the
 *              rest, or ZeRO-1's flat buffer), on the reduction stream (the DP overlap's
 *              communication stream, else the compute stream) once the compute stream's work
 *              so far has made it: NCCL cannot accumulate, so each owner's part is summed by an
 *              ncclReduce into that owner (in place in the scratch; with -grad-reduce bf16 in a
 *              bf16 copy of the bucket, each contribution rounded to bf16 and summed in bf16),
 *              then one kernel adds this rank's part to its fp32 shard. The emulation sums
 *              each element in rank order (as zero.h's host reduction), so the reduction's
 *              bits do not depend on the bucketing, and bf16 gives zero.h's emulated bits.
 *   gather     (zd_gather, -zero 3) every owner's part of a compact bucket (a layer, or the
 *              rest) from its bf16 shard into a local buffer: the owner copies its part into
 *              place, then one ncclBroadcast per owner (grouped; the parts are unequal, so
 *              no ncclAllGather), on the gathers' own stream and DP communicator, once the
 *              compute stream's work so far is done (whatever last read the buffer: a
 *              window's reuse). The caller's event, recorded after it, is what the compute
 *              stream waits for before it reads the buffer.
 *   -comm mpi  both through host memory and zero.h's dp_reduce_scatter_bucket and
 *              dp_gather_bucket, as train_gpt.c: the reductions add into a host copy of the
 *              shard that zd_finish uploads.
 */
#ifndef LLMC_ZERO_CUH
#define LLMC_ZERO_CUH

#include "cuda_utils.cuh"
#include "nccl_comm.cuh"
#include "../host/zero.h"

// Segments of an elementwise operation on several ranges: element i of segment k is
// dst[dst[k] + i] and src[src[k] + i], i < len[k]
typedef struct {
    int n;
    size_t dst[ZERO_MAX_SEGS], src[ZERO_MAX_SEGS], len[ZERO_MAX_SEGS];
} SegList;

// blockIdx.y: the segment; the x blocks (256 threads) stride over it
__global__ void __launch_bounds__(256) seg_add_f32_kernel(float* dst, const float* src, SegList L) {
    int k = blockIdx.y;
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < L.len[k]; i += (size_t)gridDim.x * blockDim.x)
        dst[L.dst[k] + i] += src[L.src[k] + i];
}
__global__ void __launch_bounds__(256) seg_add_bf16_kernel(float* dst, const bf16* src, SegList L) {
    int k = blockIdx.y;
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < L.len[k]; i += (size_t)gridDim.x * blockDim.x)
        dst[L.dst[k] + i] += __bfloat162float(src[L.src[k] + i]);
}
__global__ void __launch_bounds__(256) seg_cast_bf16_kernel(bf16* dst, const float* src, SegList L) {
    int k = blockIdx.y;
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < L.len[k]; i += (size_t)gridDim.x * blockDim.x)
        dst[L.dst[k] + i] = __float2bfloat16(src[L.src[k] + i]);
}
static dim3 seg_grid(const SegList* L) {
    size_t most = 0;
    for (int k = 0; k < L->n; k++)
        if (L->len[k] > most) most = L->len[k];
    return dim3((unsigned)grid_for(most, 256), (unsigned)L->n);
}

typedef struct {
    DevComm* dc;
    int on;            // -zero >= 2, or ZeRO-1 with -grad-reduce bf16, over DP > 1
    int bf16;          // -grad-reduce bf16
    size_t total;      // the local flat buffer's elements (pl.total)
    size_t opt_off, n; // this rank's shard: flat elements [opt_off, opt_off + n)
    cudaStream_t rs;   // reductions (NCCL): the DP overlap's stream, else the compute stream
    cudaEvent_t ev_rs; // scratch: the compute stream's point the reduction stream waits for
    cudaStream_t gs;   // -zero 3 gathers (NCCL): their stream,
    ncclComm_t gcomm;  // their DP communicator (never used on another stream)
    cudaEvent_t ev_gs; // and the compute stream's point they wait for
    ZeroComm zc;       // -comm mpi: zero.h's host staging (grows as needed: host memory)
    float* hacc;       // -comm mpi: (n) the shard's gradient sums, on the host
    float* hw;         // -comm mpi, -zero 3: (n) the weight shard as floats, this gather's part
    uint16_t* hb;      // -comm mpi, -zero 3: (n) its bf16 bits
} DevZero;

// Every rank of the DP group calls it (the gathers' communicator is made collectively).
static void zd_init(DevZero* z, DevComm* dc, int on, int gathers, int bf, size_t total) {
    memset(z, 0, sizeof(*z));
    z->dc = dc;
    z->on = on && dc->host->DPC > 1;
    z->bf16 = bf;
    z->total = total;
    zero_shard(total, dc->host->DPC, dc->host->dpc, &z->opt_off, &z->n);
    if (!z->on) return;
    z->zc.bf16 = bf;
    if (!dc->nccl) {
        z->hacc = (float*)calloc_check(z->n + 1, sizeof(float));
        if (gathers) {
            z->hw = (float*)calloc_check(z->n + 1, sizeof(float));
            z->hb = (uint16_t*)calloc_check(z->n + 1, sizeof(uint16_t));
        }
        return;
    }
    z->rs = dc->overlap ? dc->cstream : dc->stream;
    cudaCheck(cudaEventCreateWithFlags(&z->ev_rs, cudaEventDisableTiming));
    if (!gathers) return;
    cudaCheck(cudaStreamCreateWithFlags(&z->gs, cudaStreamNonBlocking));
    cudaCheck(cudaEventCreateWithFlags(&z->ev_gs, cudaEventDisableTiming));
#ifdef USE_MPI
    z->gcomm = dc_nccl_for(dc->host->dp_comm);
#endif
}

static void zd_free(DevZero* z) {
    if (z->gs) {
        cudaCheck(cudaStreamSynchronize(z->gs));
        cudaStreamDestroy(z->gs);
        cudaEventDestroy(z->ev_gs);
    }
    if (z->gcomm) ncclCommDestroy(z->gcomm);
    if (z->ev_rs) cudaEventDestroy(z->ev_rs);
    zero_comm_free(&z->zc);
    free(z->hacc);
    free(z->hw);
    free(z->hb);
    memset(z, 0, sizeof(*z));
}

// The start of a step's reductions: the shard sums start at zero (shard: the device shard)
static void zd_begin(DevZero* z, float* shard) {
    cudaCheck(cudaMemsetAsync(shard, 0, sizeof(float) * z->n, z->dc->stream));
    if (z->hacc) memset(z->hacc, 0, sizeof(float) * z->n);
}

// One piece of a bucket: flat elements [a, a + len) owned by DP rank r, at src in the local
// buffer and at pk in the bucket's packed order (its elements in segment order)
typedef struct {
    int r;
    size_t a, src, pk, len;
} ZdPiece;

// The pieces of bucket b, in segment order (at most one per segment and owner)
static int zd_pieces(const DevZero* z, const ZeroBucket* b, ZdPiece* p, int cap) {
    int DP = z->dc->host->DPC, n = 0; // the CP x DP group
    size_t pk = 0;
    for (int s = 0; s < b->nseg; s++) {
        for (int r = 0; r < DP; r++) {
            size_t so, sn;
            zero_shard(z->total, DP, r, &so, &sn);
            size_t lo = b->flat[s] > so ? b->flat[s] : so;
            size_t hi = b->flat[s] + b->n[s] < so + sn ? b->flat[s] + b->n[s] : so + sn;
            if (hi <= lo) continue;
            if (n == cap) die("internal: a bucket has more than %d pieces", cap);
            p[n].r = r;
            p[n].a = lo;
            p[n].src = b->loc[s] + (lo - b->flat[s]);
            p[n].pk = pk + (lo - b->flat[s]);
            p[n].len = hi - lo;
            n++;
        }
        pk += b->n[s];
    }
    return n;
}

#define ZD_MAX_PIECES (ZERO_MAX_SEGS * 8)

// shard += this rank's part of the sum over DP of the local fp32 buffers src at bucket b (see
// the top). stage: (b->numel) bf16, with -grad-reduce bf16 only. done (or NULL): recorded on
// the reduction stream after the shard's add; after it the bucket's src may be written again.
// NCCL: on the reduction stream, after the compute stream's work so far. -comm mpi: src's
// extent is downloaded and reduced on the host now (zd_finish uploads the sums).
static void zd_reduce(DevZero* z, const ZeroBucket* b, float* src, float* shard, bf16* stage, cudaEvent_t done) {
    DevComm* dc = z->dc;
    if (!dc->nccl) {
        size_t ext = 0;
        for (int s = 0; s < b->nseg; s++)
            if (b->loc[s] + b->n[s] > ext) ext = b->loc[s] + b->n[s];
        float* h = dc_stage_down_f32(dc, src, ext, 0);
        dp_reduce_scatter_bucket(dc->host, &z->zc, b, z->total, h, z->hacc);
        return;
    }
    ZdPiece p[ZD_MAX_PIECES];
    int np = zd_pieces(z, b, p, ZD_MAX_PIECES), me = dc->host->dpc;
    cudaStream_t rs = z->rs;
    if (rs != dc->stream) {
        cudaCheck(cudaEventRecord(z->ev_rs, dc->stream));
        cudaCheck(cudaStreamWaitEvent(rs, z->ev_rs, 0));
    }
    int k = dc_tic_on(dc, rs);
    SegList mine; // this rank's pieces: shard index, then where its sum is
    memset(&mine, 0, sizeof(mine));
    if (z->bf16) { // the bucket in bf16, packed (each owner's part is then one run)
        SegList cast;
        memset(&cast, 0, sizeof(cast));
        size_t at = 0;
        for (int s = 0; s < b->nseg; s++) {
            cast.dst[cast.n] = at;
            cast.src[cast.n] = b->loc[s];
            cast.len[cast.n] = b->n[s];
            cast.n++;
            at += b->n[s];
        }
        if (cast.n > 0) LAUNCH(seg_cast_bf16_kernel, seg_grid(&cast), 256, 0, rs, stage, (const float*)src, cast);
    }
    ncclCheck(ncclGroupStart());
    for (int i = 0; i < np;) { // one ncclReduce per run of pieces contiguous where they are summed
        size_t at = z->bf16 ? p[i].pk : p[i].src, len = p[i].len;
        int j = i + 1;
        for (; j < np && p[j].r == p[i].r && (z->bf16 ? p[j].pk : p[j].src) == at + len; j++) len += p[j].len;
        if (z->bf16)
            DC_NCCL(dc, CG_DP, "reduce", -1,
                    ncclReduce(stage + at, stage + at, len, ncclBfloat16, ncclSum, p[i].r, dc->dp, rs));
        else
            DC_NCCL(dc, CG_DP, "reduce", -1,
                    ncclReduce(src + at, src + at, len, ncclFloat, ncclSum, p[i].r, dc->dp, rs));
        i = j;
    }
    ncclCheck(ncclGroupEnd());
    for (int i = 0; i < np; i++) {
        if (p[i].r != me) continue;
        mine.dst[mine.n] = p[i].a - z->opt_off;
        mine.src[mine.n] = z->bf16 ? p[i].pk : p[i].src;
        mine.len[mine.n] = p[i].len;
        mine.n++;
    }
    if (mine.n > 0 && z->bf16)
        LAUNCH(seg_add_bf16_kernel, seg_grid(&mine), 256, 0, rs, shard, (const bf16*)stage, mine);
    if (mine.n > 0 && !z->bf16) LAUNCH(seg_add_f32_kernel, seg_grid(&mine), 256, 0, rs, shard, (const float*)src, mine);
    dc_toc_on(dc, k, 2, rs);
    if (done) cudaCheck(cudaEventRecord(done, rs));
}

// The end of a step's reductions: the compute stream waits for them (NCCL), or the host sums
// go up into the device shard (-comm mpi).
static void zd_finish(DevZero* z, float* shard) {
    DevComm* dc = z->dc;
    if (!dc->nccl) {
        dc_stage_up_f32(dc, shard, z->hacc, z->n);
        return;
    }
    if (z->rs != dc->stream) dc_dp_bucket_join(dc);
}

// dst (laid out as compact bucket b's loc) <- every DP rank's part of b from its bf16 shard
// (pshard: this rank's, flat element f at pshard[f - opt_off]), see the top. done: recorded
// after the gather (NCCL: on the gathers' stream; the compute stream waits for it before it
// reads dst). -comm mpi: at once, on the compute stream.
static void zd_gather(DevZero* z, const ZeroBucket* b, const bf16* pshard, bf16* dst, cudaEvent_t done) {
    DevComm* dc = z->dc;
    int DP = dc->host->DPC; // the CP x DP group
    if (!zero_compact(b)) die("internal: -zero 3 gathers a bucket that is not compact");
    size_t loc0 = b->nseg > 0 ? b->loc[0] : 0;
    if (!dc->nccl) { // this rank's part as floats, zero.h's host gather, up as bf16
        for (int s = 0; s < b->nseg; s++) {
            size_t lo = b->flat[s] > z->opt_off ? b->flat[s] : z->opt_off;
            size_t hi = b->flat[s] + b->n[s] < z->opt_off + z->n ? b->flat[s] + b->n[s] : z->opt_off + z->n;
            if (hi > lo)
                cudaCheck(cudaMemcpyAsync(z->hb + (lo - z->opt_off), pshard + (lo - z->opt_off),
                                          sizeof(uint16_t) * (hi - lo), cudaMemcpyDeviceToHost, dc->stream));
        }
        dc_wait_stream(dc, dc->stream);
        for (int s = 0; s < b->nseg; s++) {
            size_t lo = b->flat[s] > z->opt_off ? b->flat[s] : z->opt_off;
            size_t hi = b->flat[s] + b->n[s] < z->opt_off + z->n ? b->flat[s] + b->n[s] : z->opt_off + z->n;
            for (size_t f = lo; f < hi; f++) z->hw[f - z->opt_off] = host_bf2f(z->hb[f - z->opt_off]);
        }
        float* h = dc_hf(dc, loc0 + b->numel);
        dp_gather_bucket(dc->host, &z->zc, b, z->total, z->hw, h);
        dc_stage_up_bf16(dc, dst + loc0, h + loc0, b->numel);
        if (done) cudaCheck(cudaEventRecord(done, dc->stream));
        return;
    }
    cudaCheck(cudaEventRecord(z->ev_gs, dc->stream)); // the window's last reader, the shard's last writer
    cudaCheck(cudaStreamWaitEvent(z->gs, z->ev_gs, 0));
    int k = dc_tic_on(dc, z->gs);
    for (int s = 0; s < b->nseg; s++) { // this rank's part into its place
        size_t lo = b->flat[s] > z->opt_off ? b->flat[s] : z->opt_off;
        size_t hi = b->flat[s] + b->n[s] < z->opt_off + z->n ? b->flat[s] + b->n[s] : z->opt_off + z->n;
        if (hi > lo)
            cudaCheck(cudaMemcpyAsync(dst + b->loc[s] + (lo - b->flat[s]), pshard + (lo - z->opt_off),
                                      sizeof(bf16) * (hi - lo), cudaMemcpyDeviceToDevice, z->gs));
    }
    ncclCheck(ncclGroupStart());
    size_t at = loc0;
    for (int d = 0; d < DP; d++) {
        size_t part = zero_part(b, z->total, DP, d);
        if (part > 0)
            DC_NCCL(dc, CG_DP, "broadcast", -1,
                    ncclBroadcast(dst + at, dst + at, part, ncclBfloat16, d, z->gcomm, z->gs));
        at += part;
    }
    ncclCheck(ncclGroupEnd());
    dc_toc_on(dc, k, 2, z->gs);
    if (done) cudaCheck(cudaEventRecord(done, z->gs));
}

// Before the compute stream reads what a gather wrote: it waits for the gather's event done
// (tests/cuda/test_trainer_detect.sh deletes this wait and expects the race report)
static void zd_use(DevZero* z, cudaEvent_t done) {
    cudaStream_t s = z->dc->stream;
    cudaCheck(cudaStreamWaitEvent(s, done, 0)); // the gathered bytes have arrived
}

#endif // LLMC_ZERO_CUH
