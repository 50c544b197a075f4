/*
 * zero.h: sharded data parallelism, -zero 1/2/3 (ZeRO stages), over the flat parameter
 * buffer of params.h. Every level shards the AdamW state as ZeRO-1 does: DP rank d owns
 * the contiguous flat range zero_shard(total, DP, d) (layout.h), which is what a
 * checkpoint stores, so a run resumes under any level and layout.
 *   -zero 1  gradients accumulate in a full local buffer; one reduce-scatter per step.
 *   -zero 2  gradients sharded too: each micro-batch's gradients of a layer are
 *            reduce-scattered into their owners' shards as soon as the backward has made
 *            them (a bucket), and summed there over the micro-batches; the full gradient
 *            buffer is gone (one layer's scratch remains).
 *   -zero 3  weights sharded too: a layer's weights are gathered from their owners just
 *            before its forward and again before its backward (the next layer's gather
 *            started while the current one computes) and dropped after use.
 * Buckets: layer l of a stage is one bucket, its slice of each per-layer tensor (params.h's
 * PT_LN1W .. PT_FCPROJB); under zb-h1 a layer's bucket is reduced in two parts, what B
 * makes (biases, LayerNorms) and what W makes (the four weight matrices). The rest
 * (embeddings, final LayerNorm) is kept whole on the ranks that use it, its gradient
 * accumulated over the step and reduced once, as under ZeRO-1.
 *
 * Numbers. Every DP reduction of gradients here sums each element over the DP ranks in
 * rank order (an all-to-all, then the owner adds rank 0's value, rank 1's, ...), however
 * the buffer is cut into buckets or chunks, so bucketing never changes a bit. -zero 3 is
 * bit-identical to -zero 2 (the gathered weights are the owners' values). -zero 2 equals
 * -zero 1 bit for bit when every DP rank runs one micro-batch per step; with m > 1
 * micro-batches the order of the sum differs (-zero 1: each rank adds its m micro-batches,
 * then the ranks are added; -zero 2: each micro-batch's sum over the ranks, then the m
 * sums), so the gradients differ by float rounding (doc/zero.md gives the measured bound).
 * No level can keep both the -zero 1 order and sharded gradients: that order needs every
 * rank's m-micro-batch sum of an element before any rank's reaches its owner.
 *
 * -grad-reduce bf16 (ZeroComm.bf16; Megatron's --grad-reduce-in-bf16): the reduction of a
 * bucket runs in bf16, as an NCCL bf16 reduction does: each rank's contribution is rounded to
 * bf16 (round to nearest even), and so is every partial sum of the rank-order sum
 * (((b(v0) + b(v1))_b + b(v2))_b ...); the owner adds the bf16 result to its fp32 shard. The
 * CUDA trainer's NCCL path (llmc/cuda/zero.cuh) gives the same bits under the emulation, whose
 * bf16 reductions round after every addition in rank order. -zero 0's all-reduce has no bf16
 * path: config.h refuses -grad-reduce bf16 there.
 */
#ifndef LLMC_ZERO_H
#define LLMC_ZERO_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include "comm.h"
#include "layout.h"
#include "params.h"
#include "utils.h"

// A bucket: segments of the flat buffer [flat, flat + n) and where each lives in a local
// buffer (loc: its offset there; a layer's scratch, or the flat buffer itself)
#define ZERO_MAX_SEGS NUM_PARAM_TENSORS
typedef struct {
    int nseg;
    size_t flat[ZERO_MAX_SEGS], loc[ZERO_MAX_SEGS], n[ZERO_MAX_SEGS];
    size_t numel;
} ZeroBucket;

// which tensors of a layer bucket (zb-h1 reduces what B makes and what W makes apart)
enum { ZB_ALL = 0, ZB_B_PART = 1, ZB_W_PART = 2 };

// the per-layer tensors (params.h: PT_LN1W .. PT_FCPROJB)
static int zero_layered(int t) { return t >= PT_LN1W && t <= PT_FCPROJB; }
// the four weight matrices, whose gradients zb-h1's W makes
static int zero_weight_matrix(int t) { return t == PT_QKVW || t == PT_ATTPROJW || t == PT_FCW || t == PT_FCPROJW; }

// Offsets of each layered tensor in a one-layer buffer (enum order); returns its size.
static size_t zero_layer_offsets(const ParamLayout* pl, size_t* off) {
    size_t n = 0;
    for (int t = 0; t < NUM_PARAM_TENSORS; t++) {
        off[t] = n;
        if (zero_layered(t) && pl->nl[t] > 0) n += (size_t)pl->rows[t] * pl->cols[t];
    }
    return n;
}

// Local layer l's bucket of the layered tensors t whose bit (1u << t) is set in mask, located
// in a one-layer buffer laid out by zero_layer_offsets, or (flat 1) in the flat buffer.
static void zero_layer_bucket_mask(const ParamLayout* pl, int l, unsigned mask, int flat, ZeroBucket* b) {
    size_t off[NUM_PARAM_TENSORS];
    zero_layer_offsets(pl, off);
    memset(b, 0, sizeof(*b));
    for (int t = 0; t < NUM_PARAM_TENSORS; t++) {
        if (!zero_layered(t) || pl->nl[t] == 0 || !(mask >> t & 1u)) continue;
        size_t per = (size_t)pl->rows[t] * pl->cols[t];
        b->flat[b->nseg] = pl->offset[t] + (size_t)l * per;
        b->loc[b->nseg] = flat ? b->flat[b->nseg] : off[t];
        b->n[b->nseg] = per;
        b->numel += per;
        b->nseg++;
    }
}

// Local layer l's bucket (part: ZB_ALL, ZB_B_PART, ZB_W_PART), located as above.
static void zero_layer_bucket(const ParamLayout* pl, int l, int part, int flat, ZeroBucket* b) {
    unsigned mask = 0;
    for (int t = 0; t < NUM_PARAM_TENSORS; t++)
        if (part == ZB_ALL || (part == ZB_W_PART) == zero_weight_matrix(t)) mask |= 1u << t;
    zero_layer_bucket_mask(pl, l, mask, flat, b);
}

// The rest bucket (every tensor this stage holds that is not per-layer), located in a
// compact buffer of those tensors in enum order, or (flat 1) in the flat buffer.
static void zero_rest_bucket(const ParamLayout* pl, int flat, ZeroBucket* b) {
    memset(b, 0, sizeof(*b));
    size_t at = 0;
    for (int t = 0; t < NUM_PARAM_TENSORS; t++) {
        if (zero_layered(t) || pl->numel[t] == 0) continue;
        b->flat[b->nseg] = pl->offset[t];
        b->loc[b->nseg] = flat ? pl->offset[t] : at;
        b->n[b->nseg] = pl->numel[t];
        b->numel += pl->numel[t];
        b->nseg++;
        at += pl->numel[t];
    }
}

// Elements of bucket b in DP rank d's shard of total (d's part of it)
static size_t zero_part(const ZeroBucket* b, size_t total, int DP, int d) {
    size_t so, sn, k = 0;
    zero_shard(total, DP, d, &so, &sn);
    for (int s = 0; s < b->nseg; s++) {
        size_t lo = b->flat[s] > so ? b->flat[s] : so;
        size_t hi = b->flat[s] + b->n[s] < so + sn ? b->flat[s] + b->n[s] : so + sn;
        if (hi > lo) k += hi - lo;
    }
    return k;
}

// Elements per destination in one round of a bucket collective: the largest part, cut to
// chunk/DP (counts and displacements fit an int, and LLMC_MPI_CHUNK cuts them as every other
// call) and to a DP-th of the bucket (at least 64 Ki), so that a bucket held by one rank's
// shard does not need DP times its size of staging.
#define ZERO_MIN_ROUND ((size_t)1 << 16)
static size_t zero_round(const ZeroBucket* b, size_t total, int DP, size_t chunk) {
    size_t per = chunk / (size_t)DP > 0 ? chunk / (size_t)DP : 1, most = 0;
    size_t fair = (b->numel + DP - 1) / DP > ZERO_MIN_ROUND ? (b->numel + DP - 1) / DP : ZERO_MIN_ROUND;
    for (int d = 0; d < DP; d++) {
        size_t p = zero_part(b, total, DP, d);
        if (p > most) most = p;
    }
    if (per > fair) per = fair;
    return most < per ? most : per;
}

// Is bucket b laid out in its local buffer as its elements in flat order (a compact layer or
// rest buffer: its segments back to back)? Then DP rank d's part is the local range
// [sum of the parts before d, + its part), and no packing is needed.
static int zero_compact(const ZeroBucket* b) {
    size_t at = b->nseg > 0 ? b->loc[0] : 0;
    for (int s = 0; s < b->nseg; s++) {
        if (b->loc[s] != at || (s > 0 && b->flat[s] < b->flat[s - 1] + b->n[s - 1])) return 0;
        at += b->n[s];
    }
    return 1;
}

enum { ZC_GET, ZC_PUT, ZC_ADD, ZC_SHARD_GET };
// Elements [a, a + k) of DP rank d's part of bucket b (its elements in segment order) and
// buf[0 .. k): ZC_GET buf <- the local buffer `local` (at each segment's loc), ZC_PUT the
// other way; with local d's shard instead (flat element f at local[f - its start]):
// ZC_ADD shard += buf, ZC_SHARD_GET buf <- shard.
static void zero_part_range(const ZeroBucket* b, size_t total, int DP, int d, size_t a, size_t k, float* local,
                            float* buf, int op) {
    size_t so, sn, at = 0; // at: index in d's part of the current segment's first element
    zero_shard(total, DP, d, &so, &sn);
    for (int s = 0; s < b->nseg && k > 0; s++) {
        size_t lo = b->flat[s] > so ? b->flat[s] : so;
        size_t hi = b->flat[s] + b->n[s] < so + sn ? b->flat[s] + b->n[s] : so + sn;
        if (hi <= lo) continue;
        size_t n = hi - lo;
        if (a < at + n) { // the range starts in this segment's part
            size_t i0 = a - at, take = n - i0 < k ? n - i0 : k;
            int by_flat = op == ZC_ADD || op == ZC_SHARD_GET;
            float* p = by_flat ? local + (lo - so) + i0 : local + b->loc[s] + (lo - b->flat[s]) + i0;
            if (op == ZC_GET || op == ZC_SHARD_GET)
                memcpy(buf, p, sizeof(float) * take);
            else if (op == ZC_PUT)
                memcpy(p, buf, sizeof(float) * take);
            else
                for (size_t i = 0; i < take; i++) p[i] += buf[i];
            buf += take;
            a += take;
            k -= take;
        }
        at += n;
    }
}

// The staging of the bucket collectives (allocated once at the largest bucket's need,
// memplan.h; zero_grow only grows when a caller skipped that).
typedef struct {
    float *send, *recv;
    size_t nsend, nrecv;
    int* counts; // (4 * DP) send counts, send displacements, receive counts, receive displacements
    int fixed;   // allocated at the largest need: growing is a bug (the memory count would be wrong)
    int bf16;    // -grad-reduce bf16: reductions round to bf16 as NCCL's bf16 sum does (the top)
} ZeroComm;

// f rounded to bf16 (nearest even; a NaN stays a NaN), as a float: what an NCCL bf16 reduction
// holds after each step
static float zero_bf16(float f) {
    uint32_t u;
    memcpy(&u, &f, sizeof(u));
    if ((u & 0x7fffffffu) > 0x7f800000u)
        u = 0x7fff0000u; // the canonical NaN the GPU's conversion gives
    else
        u = (u + 0x7fffu + ((u >> 16) & 1u)) & 0xffff0000u;
    memcpy(&f, &u, sizeof(f));
    return f;
}

static void zero_comm_free(ZeroComm* z) {
    free(z->send);
    free(z->recv);
    free(z->counts);
    memset(z, 0, sizeof(*z));
}

static float* zero_grow_in(ZeroComm* z, float** p, size_t* have, size_t want) {
    if (z->fixed && want > *have)
        die("internal: a bucket collective needs %zu floats of staging, %zu were sized", want, *have);
    if (want > *have || *p == NULL) {
        free(*p);
        *p = (float*)malloc_check(sizeof(float) * (want > 0 ? want : 1));
        *have = want;
    }
    return *p;
}

// Floats of send and receive staging one bucket's reduce-scatter (r) or gather (g) needs.
static void zero_staging(const ZeroBucket* b, size_t total, int DP, int dp, size_t chunk, int gather, size_t* send,
                         size_t* recv) {
    size_t step = zero_round(b, total, DP, chunk), mine = zero_part(b, total, DP, dp);
    size_t k_me = mine < step ? mine : step;
    int compact = zero_compact(b);
    if (DP == 1) {
        *send = k_me;
        *recv = 0;
    } else if (!gather) { // packed parts out (none when compact), every rank's piece of mine in
        *send = compact ? 0 : step * DP;
        *recv = k_me * DP;
    } else { // my piece out, every part in (straight into the destination when compact)
        *send = k_me;
        *recv = compact ? 0 : step * DP;
    }
}

// The staging (send, recv floats) of every bucket collective the trainers make at ZeRO level
// zero (zb: -pp-schedule zb-h1, whose B and W reduce a layer's two parts), and (gcap) the
// largest part of a layer this rank sends in a -zero 3 prefetch. The trainers allocate
// these once; memplan.h counts them.
static void zero_staging_need(const ParamLayout* pl, int DP, int dp, size_t chunk, int zero, int zb, size_t* send,
                              size_t* recv, size_t* gcap) {
    *send = *recv = *gcap = 0;
    if (zero == 0) return;
    for (int l = -1; l < pl->nlayers; l++)
        for (int op = 0; op < 6; op++) {
            // 0: ZeRO-1 reduce (flat); 1: ZeRO-2/3 reduce (compact, or zb's two parts: 2, 3);
            // 4: ZeRO-3 gather (compact); 5: ZeRO-3 save-time gather (flat)
            int want = (op == 0 && zero == 1) || (op == 1 && zero >= 2) || ((op == 2 || op == 3) && zero >= 2 && zb) ||
                       (op >= 4 && zero == 3);
            if (!want || (l < 0 && (op == 2 || op == 3))) continue;
            ZeroBucket b;
            int flat = op == 0 || op == 5, part = op == 2 ? ZB_B_PART : (op == 3 ? ZB_W_PART : ZB_ALL);
            if (l < 0)
                zero_rest_bucket(pl, flat, &b);
            else
                zero_layer_bucket(pl, l, part, flat, &b);
            size_t sn, rn;
            zero_staging(&b, pl->total, DP, dp, chunk, op >= 4, &sn, &rn);
            if (sn > *send) *send = sn;
            if (rn > *recv) *recv = rn;
            if (op == 4 && l >= 0 && zero_part(&b, pl->total, DP, dp) > *gcap) *gcap = zero_part(&b, pl->total, DP, dp);
        }
}

// shard += the sum over the DP ranks of their local buffers src at bucket b, each element
// summed in rank order 0, 1, ..., DP-1 (see the top). Collective over the DP group: every
// rank calls it with the same bucket. shard: this rank's zero_shard of total. The parts go
// in rounds (zero_round); every rank runs the same rounds.
static void dp_reduce_scatter_bucket(Comm* c, ZeroComm* z, const ZeroBucket* b, size_t total, float* src,
                                     float* shard) {
    int DP = c->DPC, compact = zero_compact(b);
    size_t step = zero_round(b, total, DP, c->chunk), most = 0, sneed, rneed;
    for (int d = 0; d < DP; d++)
        if (zero_part(b, total, DP, d) > most) most = zero_part(b, total, DP, d);
    zero_staging(b, total, DP, c->dpc, c->chunk, 0, &sneed, &rneed);
    float* send = zero_grow_in(z, &z->send, &z->nsend, sneed);
    float* recv = zero_grow_in(z, &z->recv, &z->nrecv, rneed);
    double t0 = wall_ms();
    if (DP > 1) ctrace_enter(&c->trace, CG_DP, "reduce_scatter", -1);
    size_t mine = zero_part(b, total, DP, c->dpc);
    for (size_t a = 0; a < most; a += step) {
        size_t k_me = a < mine ? (mine - a < step ? mine - a : step) : 0;
        if (DP == 1) {
            zero_part_range(b, total, 1, 0, a, k_me, src, send, ZC_GET);
            for (size_t i = 0; i < k_me && z->bf16; i++) send[i] = zero_bf16(send[i]);
            zero_part_range(b, total, 1, 0, a, k_me, shard, send, ZC_ADD);
            continue;
        }
#ifdef USE_MPI
        if (z->counts == NULL) z->counts = (int*)malloc_check(sizeof(int) * 4 * DP);
        int *sc = z->counts, *sd = sc + DP, *rc = sc + 2 * DP, *rd = sc + 3 * DP;
        size_t at = 0, part0 = 0; // part0: where d's part starts in a compact src
        const float* sbase = compact ? src + (b->nseg > 0 ? b->loc[0] : 0) + a : send;
        for (int d = 0; d < DP; d++) { // round a: elements [a, a + step) of each destination's part
            size_t p = zero_part(b, total, DP, d), k = a < p ? (p - a < step ? p - a : step) : 0;
            if (!compact) zero_part_range(b, total, DP, d, a, k, src, send + at, ZC_GET);
            sc[d] = (int)k;
            sd[d] = (int)(compact ? part0 : at);
            rc[d] = (int)k_me; // every rank sends me this round's piece of my part
            rd[d] = (int)((size_t)d * k_me);
            at += k;
            part0 += p;
        }
        mpiCheck(MPI_Alltoallv(sbase, sc, sd, MPI_FLOAT, recv, rc, rd, MPI_FLOAT, c->dp_comm));
        if (z->bf16) // the same order, every contribution and partial sum rounded to bf16
            for (size_t i = 0; i < k_me; i++) {
                float s = zero_bf16(recv[i]);
                for (int r = 1; r < DP; r++) s = zero_bf16(s + zero_bf16(recv[(size_t)r * k_me + i]));
                recv[i] = s;
            }
        for (int r = 1; r < DP && !z->bf16; r++) { // rank order: ((v0 + v1) + v2) + ...
            const float* w = recv + (size_t)r * k_me;
            for (size_t i = 0; i < k_me; i++) recv[i] += w[i];
        }
        zero_part_range(b, total, DP, c->dpc, a, k_me, shard, recv, ZC_ADD);
#else
        (void)compact;
        (void)recv;
#endif
    }
    if (DP > 1) ctrace_leave(&c->trace);
    c->comm_ms += wall_ms() - t0;
}

// dst (a local buffer laid out as bucket b's loc) <- every DP rank's part of bucket b from
// its shard: the weights of a layer gathered from their owners (-zero 3), or the rest
// bucket after the update. Collective over the DP group.
static void dp_gather_bucket(Comm* c, ZeroComm* z, const ZeroBucket* b, size_t total, float* shard, float* dst) {
    int DP = c->DPC, compact = zero_compact(b);
    size_t step = zero_round(b, total, DP, c->chunk), most = 0, sneed, rneed;
    for (int d = 0; d < DP; d++)
        if (zero_part(b, total, DP, d) > most) most = zero_part(b, total, DP, d);
    zero_staging(b, total, DP, c->dpc, c->chunk, 1, &sneed, &rneed);
    float* send = zero_grow_in(z, &z->send, &z->nsend, sneed);
    float* recv = zero_grow_in(z, &z->recv, &z->nrecv, rneed);
    double t0 = wall_ms();
    if (DP > 1) ctrace_enter(&c->trace, CG_DP, "allgather", -1);
    size_t mine = zero_part(b, total, DP, c->dpc);
    for (size_t a = 0; a < most; a += step) {
        size_t k_me = a < mine ? (mine - a < step ? mine - a : step) : 0;
        if (DP == 1) {
            zero_part_range(b, total, 1, 0, a, k_me, shard, send, ZC_SHARD_GET);
            zero_part_range(b, total, 1, 0, a, k_me, dst, send, ZC_PUT);
            continue;
        }
#ifdef USE_MPI
        zero_part_range(b, total, DP, c->dpc, a, k_me, shard, send, ZC_SHARD_GET);
        if (z->counts == NULL) z->counts = (int*)malloc_check(sizeof(int) * 4 * DP);
        int *rc = z->counts + 2 * DP, *rd = z->counts + 3 * DP;
        size_t at = 0, part0 = 0;
        float* rbase = compact ? dst + (b->nseg > 0 ? b->loc[0] : 0) + a : recv;
        for (int d = 0; d < DP; d++) {
            size_t p = zero_part(b, total, DP, d), k = a < p ? (p - a < step ? p - a : step) : 0;
            rc[d] = (int)k;
            rd[d] = (int)(compact ? part0 : at);
            at += k;
            part0 += p;
        }
        mpiCheck(MPI_Allgatherv(send, (int)k_me, MPI_FLOAT, rbase, rc, rd, MPI_FLOAT, c->dp_comm));
        for (int d = 0; d < DP && !compact; d++)
            zero_part_range(b, total, DP, d, a, (size_t)rc[d], dst, recv + rd[d], ZC_PUT);
#else
        (void)compact;
        (void)recv;
#endif
    }
    if (DP > 1) ctrace_leave(&c->trace);
    c->comm_ms += wall_ms() - t0;
}

// A gather of a compact bucket that runs while the caller computes (-zero 3's prefetch of
// the next layer's weights): started with dp_gather_start, waited for by dp_gather_finish.
// The parts land in the destination directly; only this rank's part is staged (cap floats).
// (Sent from the shard through an indexed datatype instead, Open MPI 4 picked different
// all-gather algorithms on different ranks for the same call and the job hung.)
typedef struct {
    float* send; // (cap)
    size_t cap;
    int* counts; // (2 * DP) receive counts and displacements
    int pending;
#ifdef USE_MPI
    MPI_Request req;
#endif
} ZeroGather;

static void zero_gather_init(ZeroGather* q, size_t cap, int DP) {
    memset(q, 0, sizeof(*q));
    q->cap = cap;
    q->send = (float*)malloc_check(sizeof(float) * (cap > 0 ? cap : 1));
    q->counts = (int*)malloc_check(sizeof(int) * 2 * (DP > 0 ? DP : 1));
}
static void zero_gather_free(ZeroGather* q) {
    free(q->send);
    free(q->counts);
    memset(q, 0, sizeof(*q));
}

// Starts gathering compact bucket b into dst (as dp_gather_bucket). A bucket that needs
// several rounds, or a single DP rank, is gathered at once instead.
static void dp_gather_start(Comm* c, ZeroComm* z, ZeroGather* q, const ZeroBucket* b, size_t total, float* shard,
                            float* dst) {
    int DP = c->DPC;
    size_t mine = zero_part(b, total, DP, c->dpc);
    int one_round = zero_compact(b) && mine <= q->cap && zero_round(b, total, DP, c->chunk) >= mine;
    for (int d = 0; d < DP && one_round; d++)
        one_round = zero_part(b, total, DP, d) <= zero_round(b, total, DP, c->chunk);
    if (DP == 1 || !one_round) {
        dp_gather_bucket(c, z, b, total, shard, dst);
        return;
    }
#ifdef USE_MPI
    zero_part_range(b, total, DP, c->dpc, 0, mine, shard, q->send, ZC_SHARD_GET);
    int *rc = q->counts, *rd = q->counts + DP;
    size_t at = 0;
    for (int d = 0; d < DP; d++) {
        rc[d] = (int)zero_part(b, total, DP, d);
        rd[d] = (int)at;
        at += (size_t)rc[d];
    }
    ctrace_enter(&c->trace, CG_DP, "iallgather", -1);
    mpiCheck(MPI_Iallgatherv(q->send, (int)mine, MPI_FLOAT, dst + (b->nseg > 0 ? b->loc[0] : 0), rc, rd, MPI_FLOAT,
                             c->dp_comm, &q->req));
    ctrace_leave(&c->trace);
    q->pending = 1;
#endif
}

// Waits for a started gather (nothing if none is pending).
static void dp_gather_finish(Comm* c, ZeroGather* q) {
    if (!q->pending) return;
#ifdef USE_MPI
    double t0 = wall_ms();
    ctrace_enter(&c->trace, CG_DP, "iallgather_wait", -1);
    mpiCheck(MPI_Wait(&q->req, MPI_STATUS_IGNORE));
    ctrace_leave(&c->trace);
    c->comm_ms += wall_ms() - t0;
#else
    (void)c;
#endif
    q->pending = 0;
}

#endif // LLMC_ZERO_H
