/*
 * memplan.h: each trainer's memory per rank, buffer by buffer, from the configuration and
 * the rank's place in the layout alone: mem_plan_cpu for train_gpt.c, mem_plan_cuda (below)
 * for train_gpt.cu's device memory. train_gpt.c sizes its buffers with these
 * functions and counts what it allocates (the start-up table's "memory per rank"); the
 * planner (-plan) prints the same figures for a layout and stage without running it
 * (mem_plan_cpu_stage), and tests/test_plan_memory.py checks that both agree for every ZeRO
 * level and several layouts.
 *
 * Four kinds, in floats (4 bytes each):
 *   params       the weights: the flat buffer; -zero 3 its shard, the rest (embeddings,
 *                final LayerNorm) whole, two one-layer windows and their prefetch staging
 *   grads        the flat gradient buffer; -zero 2/3 one layer's scratch and the rest; the
 *                reduced shard under any ZeRO level; the bucket collectives' staging
 *   optimizer    AdamW's two moments over the rank's optimizer range
 *   activations  what the forward keeps per unit in flight (slots), the selective rebuild,
 *                zb-h1's W stashes, the backward's scratch and -sp's gathers
 *
 * mem_plan_cuda gives the CUDA trainer's device bytes in the same four kinds (train_gpt.cu
 * counts each buffer of its arena and each of its own allocations, 256-byte granules, and dies
 * at start-up when the count and this plan differ):
 *   params       the bf16 working weights: the flat buffer; -zero 3 the bf16 of its master
 *                shard, the rest whole and two one-layer windows the gathers fill
 *   grads        fp32: the flat gradient buffer; -zero 2/3 two one-layer scratches (one
 *                reduced while the backward writes the other) and the rest; the reduced shard
 *                where it is a buffer of its own; -grad-reduce bf16 the bucket in bf16
 *   optimizer    fp32 master weights and AdamW's two moments over the rank's shard
 *   activations  the activation slots (tokens included), the backward's scratch and
 *                statistics, the pipeline's gradient buffers, -cp's ring buffers (two K|V
 *                blocks, two dK|dV partials, an accumulator), zb-h1's W stashes and cuBLASLt's
 *                workspace and bias-gradient scratch (cuDNN's workspace, in a cuDNN build, and
 *                NCCL's buffers are the libraries' and not counted)
 */
#ifndef LLMC_MEMPLAN_H
#define LLMC_MEMPLAN_H

#include <stddef.h>
#include <string.h>
#include "config.h"
#include "layout.h"
#include "params.h"
#include "zero.h"

enum { MEM_PARAMS, MEM_GRADS, MEM_OPTIM, MEM_ACTS, NUM_MEM };
static const char* const MEM_NAMES[NUM_MEM] = {"params", "grads", "optimizer", "activations"};

// The shapes of one rank's model as the CPU trainer sees them.
typedef struct {
    int B, T, Ts, C, NH, Cl, F, Vl, nl, nlc, sp, last_stage, recompute, CP; // T: this rank's rows (seq/CP)
} RankShape;

static RankShape rank_shape(const Config* c, int tp, int TP, int pp, int PP) {
    (void)tp;
    RankShape s;
    s.B = c->mb;
    s.CP = c->cp > 0 ? c->cp : 1;
    s.T = c->seq / s.CP;
    s.C = c->H;
    s.sp = c->sp && TP > 1;
    s.Ts = s.sp ? s.T / TP : s.T;
    s.NH = c->heads / TP;
    s.Cl = s.NH * (c->H / c->heads);
    s.F = 4 * c->H / TP;
    s.Vl = c->Vp / TP;
    s.nl = c->L / PP;
    s.nlc = s.nl / (c->vpp > 1 ? c->vpp : 1);
    s.last_stage = pp == PP - 1;
    s.recompute = c->recompute;
    return s;
}

// Floats of one unit's activation slot (train_gpt.c's acts_alloc): the chunk's layer inputs,
// each layer's kept tensors (one set with full recompute), the head's on the last stage.
static size_t mem_slot_floats(const RankShape* s, size_t* per_layer_out) {
    size_t BT = (size_t)s->B * s->T, BTs = (size_t)s->B * s->Ts, C = s->C;
    int selective = s->recompute == RECOMPUTE_SELECTIVE;
    size_t att_n = selective || s->CP > 1 ? 0 : (size_t)s->B * s->NH * s->T * s->T; // the ring keeps lse instead
    size_t lse_n = s->CP > 1 ? (size_t)s->B * s->NH * s->T : 0;
    size_t per_layer = BTs * C * 3 + BTs * 4 + BT * 3 * s->Cl + att_n + lse_n + BT * s->Cl + 2 * BT * s->F;
    int nla = s->recompute == RECOMPUTE_FULL ? 1 : s->nlc;
    size_t total = (size_t)(s->nlc + 1) * BTs * C + (size_t)nla * per_layer;
    if (s->last_stage) total += BTs * C + 2 * BTs + BT * s->Vl + 2 * BT;
    if (per_layer_out) *per_layer_out = per_layer;
    return total;
}

// The CPU trainer's floats of each kind on the rank (tp, pp, dp: its index in the CP x DP
// group of DP ranks, comm.h) of a layout with nslots
// activation slots and nstash zb-h1 W stashes (train_gpt.c's train_setup picks both);
// chunk: the largest MPI call (comm.h; COMM_CHUNK_DEFAULT unless LLMC_MPI_CHUNK).
static void mem_plan_cpu(const Config* c, int tp, int TP, int pp, int PP, int dp, int DP, int nslots, int nstash,
                         size_t chunk, size_t out[NUM_MEM]) {
    ParamLayout pl;
    param_layout_init(&pl, c->L, c->H, c->heads, c->seq, c->V, c->Vp, tp, TP, pp, PP);
    param_layout_set_chunks(&pl, c->vpp);
    RankShape s = rank_shape(c, tp, TP, pp, PP);
    int zero = DP > 1 ? c->zero : 0; // ZeRO over one DP rank is plain AdamW
    size_t off, n_opt = pl.total, loff[NUM_PARAM_TENSORS];
    if (zero) zero_shard(pl.total, DP, dp, &off, &n_opt);
    size_t nlayer = zero_layer_offsets(&pl, loff), nrest = 0;
    for (int t = 0; t < NUM_PARAM_TENSORS; t++)
        if (!zero_layered(t)) nrest += pl.numel[t];
    for (int k = 0; k < NUM_MEM; k++) out[k] = 0;
    size_t zsend, zrecv, gcap; // the bucket collectives' staging (zero.h)
    zero_staging_need(&pl, DP, dp, chunk, zero, config_zb(c), &zsend, &zrecv, &gcap);
    out[MEM_PARAMS] = zero < 3 ? pl.total : n_opt + nrest + 2 * nlayer + 2 * gcap;
    out[MEM_GRADS] = (zero < 2 ? pl.total : nlayer + nrest) + (zero ? n_opt : 0) + zsend + zrecv;
    out[MEM_OPTIM] = 2 * n_opt;
    size_t BT = (size_t)s.B * s.T, BTs = (size_t)s.B * s.Ts, C = s.C, off_ws[NUM_WS], n_ws[NUM_WS];
    size_t acts = (size_t)nslots * mem_slot_floats(&s, NULL);
    if (s.recompute == RECOMPUTE_SELECTIVE && s.CP == 1) acts += (size_t)s.B * s.NH * s.T * s.T + BT * s.Cl;
    if (s.CP > 1) acts += 4 * BT * 2 * s.Cl + (size_t)s.B * s.NH * s.T; // the ring's blocks and partials, D
    acts += (size_t)nstash * s.nlc * zb_stash_layout(BT, BTs, C, s.F, s.Cl, off_ws, n_ws);
    acts += 3 * BT * C + BT * 3 * s.Cl + BT * s.Cl + (BT * s.Cl + 32) + 2 * BT * s.F; // backward scratch
    if (s.sp) acts += 4 * BT * C;
    out[MEM_ACTS] = acts;
}

// The activation slots and zb-h1 W stashes of pipeline rank pp (what train_setup allocates):
// 1F1B at most PP micro-batches in flight, interleaved pipe_slots units; zb-h1 one stash per
// unit whose W is pending at once, over every micro-batch count up to the final batch's.
static void mem_plan_slots(const Config* c, int pp, int PP, int DP, int* nslots, int* nstash) {
    int m_max = (int)(c->gb / ((int64_t)c->mb * DP));
    *nslots = c->vpp > 1 ? pipe_slots(pp, PP, c->vpp) : PP;
    *nstash = config_zb(c) ? pipe_w_pending_max(pp, PP, c->vpp, m_max) : 0;
}

// -plan's "memory per rank" (startup.h): the bytes of each kind on the first rank (TP 0, CP 0,
// DP 0) of pipeline stage pp in c's layout (c->tp, c->cp, c->pp, c->dp, c->zero, ...): its slots
// from DP (the batch does not change with CP), its ZeRO shard from the CP x DP group. 0, or -1
// when zb-h1 has no schedule for it.
static int mem_plan_cpu_stage(const Config* c, size_t chunk, int pp, size_t bytes[NUM_MEM]) {
    int nslots, nstash;
    size_t f[NUM_MEM];
    mem_plan_slots(c, pp, c->pp, c->dp, &nslots, &nstash);
    if (config_zb(c) && nstash < 1) return -1;
    mem_plan_cpu(c, 0, c->tp, pp, c->pp, 0, c->dp * (c->cp > 0 ? c->cp : 1), nslots, nstash, chunk, f);
    for (int k = 0; k < NUM_MEM; k++) bytes[k] = sizeof(float) * f[k];
    return 0;
}

// ---------------------------------------------------------------------------------------
// the CUDA trainer (train_gpt.cu), in bytes

// Device bytes a buffer of `bytes` takes: whole 256-byte granules (the arena's alignment;
// cudaMalloc's is at least that), at least one
static size_t mem_dev_bytes(size_t bytes) { return ((bytes > 0 ? bytes : 1) + 255) & ~(size_t)255; }

// Floats of layernorm_backward's scratch for up to N rows of C columns (layernorm.cuh's
// layernorm_backward_scratch without an emulation's grid cap: its LN_TICKETS, LN_BWD_GRID,
// LN_BWD_MIN_ROWS and LN_FAN), and at least N (train_gpt.cu sizes it so; the kernel checks it).
static size_t mem_ln_scratch_floats(size_t N, size_t C) {
    size_t G = (N + 7) / 8, n;
    if (G > 512) G = 512;
    if (G < 1) G = 1;
    n = 32 + (G + (G + 31) / 32) * 2 * C;
    return n > N ? n : N;
}

// ZeRO-1's buckets in the CUDA trainer: a local layer's slices of the per-layer tensors,
// without the LayerNorms under -sp (they wait for their TP sum), and the last bucket of the
// rest; the same for -zero 2/3 without the -sp exception (the layer bucket sums its LayerNorms
// over TP first, as zero.h's). 1 when tensor t belongs to a layer bucket.
static int mem_cuda_in_layer_bucket(int t, int zero, int sp) {
    int ln = t == PT_LN1W || t == PT_LN1B || t == PT_LN2W || t == PT_LN2B;
    return zero_layered(t) && !(zero < 2 && sp && ln);
}

// Elements of the largest bucket the -grad-reduce bf16 path converts to bf16 (the staging it
// reduces in place): a layer bucket or the last one.
static size_t mem_cuda_stage_floats(const ParamLayout* pl, int zero, int sp) {
    size_t layer = 0, last = 0;
    for (int t = 0; t < NUM_PARAM_TENSORS; t++) {
        if (pl->numel[t] == 0) continue;
        if (mem_cuda_in_layer_bucket(t, zero, sp))
            layer += (size_t)pl->rows[t] * pl->cols[t];
        else
            last += pl->numel[t];
    }
    return layer > last ? layer : last;
}

// The CUDA trainer's device bytes of each kind on the rank (tp, pp, dp) of a layout:
//   nslots, ndgrad, nstash  activation slots, pipeline gradient buffers and zb-h1 W stashes
//                           (train_gpt.cu's train_setup: nslots PP for 1F1B or pipe_slots with
//                           -vpp; ndgrad pipe_grad_buffers_max; nstash pipe_w_pending_max or 0)
//   naive                   the attention keeps its (B, NH, T, T) probabilities (LLMC_ATTENTION=naive);
//                           else flash, tensor-core or cuDNN attention, which keep the lse only
//   overlap                 the DP reduction runs in buckets beside the backward (NCCL with DP > 1,
//                           unless LLMC_DP_OVERLAP=0: DevComm.overlap); ZeRO-1 then reduces into the
//                           gradient buffer itself
// c->comm (nccl or mpi), c->grad_reduce and the ZeRO level (0 with one DP rank) come from c.
static void mem_plan_cuda(const Config* c, int tp, int TP, int pp, int PP, int dp, int DP, int nslots, int ndgrad,
                          int nstash, int naive, int overlap, size_t out[NUM_MEM]) {
    ParamLayout pl;
    param_layout_init(&pl, c->L, c->H, c->heads, c->seq, c->V, c->Vp, tp, TP, pp, PP);
    param_layout_set_chunks(&pl, c->vpp);
    RankShape s = rank_shape(c, tp, TP, pp, PP);
    int zero = DP > 1 ? c->zero : 0, bf = strcmp(c->grad_reduce, "bf16") == 0 && zero > 0;
    int nccl = strcmp(c->comm, "nccl") == 0;
    size_t per = (pl.total + DP - 1) / DP, n_shard = zero ? per : pl.total, loff[NUM_PARAM_TENSORS];
    size_t nlayer = zero_layer_offsets(&pl, loff), nrest = 0;
    for (int t = 0; t < NUM_PARAM_TENSORS; t++)
        if (!zero_layered(t)) nrest += pl.numel[t];
    const size_t F4 = sizeof(float), H2 = 2; // fp32 and bf16 bytes
    (void)dp;
    for (int k = 0; k < NUM_MEM; k++) out[k] = 0;
    if (zero < 3)
        out[MEM_PARAMS] = mem_dev_bytes(H2 * per * DP);
    else
        out[MEM_PARAMS] = mem_dev_bytes(H2 * n_shard) + mem_dev_bytes(H2 * nrest) + 2 * mem_dev_bytes(H2 * nlayer);
    if (zero < 2)
        out[MEM_GRADS] = mem_dev_bytes(F4 * per * DP);
    else
        out[MEM_GRADS] = 2 * mem_dev_bytes(F4 * nlayer) + mem_dev_bytes(F4 * nrest);
    if (zero >= 2 || (zero == 1 && (!overlap || bf))) out[MEM_GRADS] += mem_dev_bytes(F4 * n_shard);
    if (bf && nccl) out[MEM_GRADS] += mem_dev_bytes(H2 * mem_cuda_stage_floats(&pl, zero, s.sp));
    out[MEM_OPTIM] = 3 * mem_dev_bytes(F4 * n_shard);
    // activations: one slot (train_gpt.cu's acts_carve, in its order)
    size_t B = s.B, T = s.T, C = s.C, NH = s.NH, Cl = s.Cl, F = s.F, BT = B * T, BTs = B * s.Ts;
    int selective = s.recompute == RECOMPUTE_SELECTIVE, nla = s.recompute == RECOMPUTE_FULL ? 1 : s.nlc;
    size_t ldl = ((size_t)s.Vl + 7) / 8 * 8, slot = mem_dev_bytes(H2 * (s.nlc + 1) * BTs * C);
    if (naive && selective) slot += mem_dev_bytes(F4 * B * NH * T * T);
    size_t layer = 3 * mem_dev_bytes(H2 * BTs * C) + 4 * mem_dev_bytes(F4 * BTs) + mem_dev_bytes(H2 * BT * 3 * Cl) +
                   mem_dev_bytes(H2 * BT * Cl) + 2 * mem_dev_bytes(H2 * BT * F);
    if (!naive)
        layer += mem_dev_bytes(F4 * B * NH * T);
    else if (!selective)
        layer += mem_dev_bytes(F4 * B * NH * T * T);
    slot += (size_t)nla * layer;
    if (s.last_stage)
        slot += mem_dev_bytes(H2 * BTs * C) + 2 * mem_dev_bytes(F4 * BTs) + mem_dev_bytes(H2 * BT * ldl) +
                2 * mem_dev_bytes(F4 * BT) + mem_dev_bytes(F4 * 4 * BT);
    slot += 4 * mem_dev_bytes(sizeof(int) * BT) + mem_dev_bytes(sizeof(int) * (BT + 1)); // tokens, embedding buckets
    size_t acts = (size_t)nslots * slot;
    // the model's scratch (train_gpt.cu's gpt_carve, in its order)
    acts += 3 * mem_dev_bytes(H2 * BT * C); // ftmp, dtmp, dres2
    if (s.sp) acts += 3 * mem_dev_bytes(H2 * BT * C) + mem_dev_bytes(H2 * BTs * C);
    acts += mem_dev_bytes(H2 * BT * 3 * Cl) + mem_dev_bytes(H2 * BT * Cl) + mem_dev_bytes(H2 * BT * F);
    acts += mem_dev_bytes(F4 * (naive ? B * NH * T * T : B * NH * T));
    if (s.CP > 1) acts += mem_dev_bytes(F4 * BT * Cl); // the ring's fp32 accumulator
    acts += mem_dev_bytes(F4 * mem_ln_scratch_floats(BT, C));
    acts += mem_dev_bytes(sizeof(double)) + mem_dev_bytes(sizeof(double) * (2 + 512 + 2 * (size_t)pl.nlayers + 1));
    acts += (size_t)ndgrad * mem_dev_bytes(H2 * BT * C);
    acts += mem_dev_bytes(sizeof(int) * T); // the rows' positions
    if (s.CP > 1) acts += 2 * mem_dev_bytes(H2 * BT * 2 * Cl) + 2 * mem_dev_bytes(F4 * BT * 2 * Cl); // ring K|V, dK|dV
    size_t off_ws[NUM_WS], n_ws[NUM_WS];
    acts += (size_t)nstash * mem_dev_bytes(H2 * s.nlc * zb_stash_layout(BT, BTs, C, F, Cl, off_ws, n_ws));
    size_t maxcols = 3 * Cl > F ? 3 * Cl : F; // cuBLASLt: 32 MiB workspace, bias-gradient partials and output
    if (C > maxcols) maxcols = C;
    acts += mem_dev_bytes((size_t)32 << 20) + 2 * mem_dev_bytes(F4 * 32 * maxcols);
    out[MEM_ACTS] = acts;
}

#endif // LLMC_MEMPLAN_H
