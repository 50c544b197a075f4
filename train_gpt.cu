/*
 * train_gpt.cu: the CUDA trainer. The same model, recipe, flags, data, checkpoints and 3D
 * layout as train_gpt.c (the reference for every number), on NVIDIA GPUs (A100 sm_80,
 * H100/H200 sm_90), readable top to bottom like it: the model (forward, backward), the
 * pipeline schedule, the training step (gradient reduction, norm, AdamW), validation,
 * sampling, checkpoints, main. The kernels live in llmc/ (the .cuh files); the recipe, layout, data,
 * checkpoint format and start-up are the shared llmc/ headers.
 *
 * Precision (the README's CUDA section has the table and the reasons):
 *   weights     bf16 working copy for the GEMMs and kernels (-zero 3: of this rank's shard,
 *               each layer gathered before use); fp32 master copy (the whole buffer, or this
 *               rank's 1/(CP*DP) shard with -zero >= 1) that AdamW updates
 *   activations bf16 (residual stream included); LayerNorm statistics, attention lse,
 *               cross-entropy statistics and losses fp32
 *   gradients   weight gradients accumulate in fp32 over the micro-batches (the GEMMs
 *               write fp32 with beta = 1; -zero 2/3 in the owner's fp32 shard, a layer's
 *               reduced after each micro-batch: llmc/host/zero.h); reduced (embedding group,
 *               CP x DP) in fp32, or over CP x DP in bf16 with -grad-reduce bf16; activation
 *               gradients bf16
 *   optimizer   AdamW moments fp32; global norm summed in fp64
 *   math        every GEMM and kernel accumulates in fp32
 *
 * Shapes: B = micro-batch, T = sequence, C = hidden, NH = local heads, hs = head size,
 * Cl = local attention width (NH*hs), F = local MLP width (4C/TP), Vl = local vocab rows,
 * Vv = real (unpadded) rows of the local vocab slice. With -cp N (context parallelism,
 * doc/cp.md) T is this rank's seq/N rows (two chunks of the sequence, at the positions g->tpos)
 * and attention runs over the CP ring (cp_attention_forward/_backward, attention_ring.cuh).
 *
 * Implementation choices without a flag (environment, read at start-up):
 *   LLMC_ATTENTION=auto|cudnn|tc|flash|naive  attention kernels: cudnn = cuDNN's fused flash
 *                                attention (builds with USE_CUDNN only), tc = flash attention on
 *                                tensor cores, flash = the same on CUDA cores, naive = the
 *                                reference that stores T x T; auto (default) = cudnn where the
 *                                build has it and cuDNN accepts the shape, else tc where the head
 *                                size has a tensor-core kernel, else flash. With -cp > 1 the
 *                                ring runs the own kernels: tc, or flash (LLMC_ATTENTION=flash, or
 *                                a head size without tc); cudnn and naive fall back to them
 *   LLMC_GELU_FUSION=1|0         cuBLASLt GELU_AUX_BIAS epilogue for fc1 (default 1)
 */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#ifdef _OPENMP
#include <omp.h>
#endif
#ifdef USE_MPI
#define OMPI_SKIP_MPICXX 1
#define MPICH_SKIP_MPICXX 1
#include <mpi.h>
#endif
#include <cuda_profiler_api.h>
#include "llmc/host/utils.h"
#include "llmc/host/config.h"
#include "llmc/host/schedule.h"
#include "llmc/host/rand.h"
#include "llmc/host/params.h"
#include "llmc/host/dataloader.h"
#include "llmc/host/checkpoint.h"
#include "llmc/host/logger.h"
#include "llmc/host/tokenizer.h"
#include "llmc/host/layout.h"
#include "llmc/host/reshard.h"
#include "llmc/planner/planner.h"
#include "llmc/host/comm.h"
#include "llmc/host/startup.h"
#include "llmc/host/ckpt_rank.h"
#include "llmc/host/zero.h"
#include "llmc/host/memplan.h"
#include "llmc/host/noise.h"
#include "llmc/host/spike.h"
#include "llmc/host/run.h"
#include "llmc/cuda/cuda_common.cuh"
#include "llmc/cuda/cuda_utils.cuh"
#include "llmc/cuda/matmul.cuh"
#include "llmc/cuda/encoder.cuh"
#include "llmc/cuda/layernorm.cuh"
#include "llmc/cuda/attention.cuh"
#include "llmc/cuda/attention_tc.cuh"
#include "llmc/cuda/attention_ring.cuh"
#ifdef USE_CUDNN
#include "llmc/cuda/attention_cudnn.h"
#endif
#include "llmc/cuda/gelu.cuh"
#include "llmc/cuda/crossentropy.cuh"
#include "llmc/cuda/adamw.cuh"
#include "llmc/cuda/gradnorm.cuh"
#include "llmc/cuda/nccl_comm.cuh"
#include "llmc/cuda/zero.cuh"

// ----------------------------------------------------------------------------------------
// device memory: one bump allocation per object (sizes first, then pointers), each buffer
// whole 256-byte granules; the sizing pass counts them by kind (memplan.h's MEM_*)

typedef struct {
    char* base;
    size_t off;
    size_t* mem; // (NUM_MEM) bytes of each kind, counted on the sizing pass (base NULL); NULL: not counted
    int kind;    // the kind the next buffers count as
} Arena;

static void* arena_take(Arena* a, size_t bytes) {
    a->off = (a->off + 255) & ~(size_t)255;
    void* p = a->base ? a->base + a->off : NULL;
    a->off += mem_dev_bytes(bytes);
    if (a->base == NULL && a->mem != NULL) a->mem[a->kind] += mem_dev_bytes(bytes);
    return p;
}
template <class T>
static void arena_set(Arena* a, T** p, size_t n) {
    *p = (T*)arena_take(a, sizeof(T) * n);
}
#define TAKE(ar, ptr, n) arena_set((ar), &(ptr), (size_t)(n))

// ----------------------------------------------------------------------------------------
// the model

// Activations of one layer for one micro-batch (device pointers). With -sp 1 the rows
// outside the tensor-parallel region are this rank's sequence shard (B, Ts, C), Ts = T/TP
// (else Ts = T); everything between the column- and row-parallel GEMMs covers all T.
typedef struct {
    bf16* ln1;
    float* ln1_mean;
    float* ln1_rstd; // (B,Ts,C) (B,Ts) (B,Ts)
    bf16* qkv;       // (B,T,3Cl)
    float* att;      // (B,NH,T,T) naive attention only
    float* lse;      // (B,NH,T) flash attention (tc, flash) only
    bf16* atty;      // (B,T,Cl)
    bf16* resid2;    // (B,Ts,C) x + attention
    bf16* ln2;
    float* ln2_mean;
    float* ln2_rstd; // (B,Ts,C) (B,Ts) (B,Ts)
    bf16* fch;
    bf16* fch_gelu; // (B,T,F) pre-activation, GeLU output
} LayerActs;

// Activations of one (chunk, micro-batch) unit in flight (one micro-batch without -vpp).
// With full recompute, one set of LayerActs is shared by all layers and only each layer's
// input x[j] is kept.
typedef struct {
    void* mem;
    bf16* x; // (nlc+1, B, Ts, C): x[j] = input of layer j of the chunk, x[nlc] = chunk output (Ts = T/TP with -sp 1,
             // else T)
    LayerActs* layer; // (nlc) or (1) with full recompute (host array of device pointers)
    bf16* lnf;
    float* lnf_mean;
    float* lnf_rstd; // (B,Ts,C) (B,Ts) (B,Ts)   last stage
    bf16* logits;    // (B,T,ldl) last stage: logits of the Vl padded columns (the first Vv real), then dlogits
    float* losses;   // (B,T) per-token loss
    float* lse;      // (B,T) log-sum-exp over the full vocabulary
    float* ce;       // (4, B,T) cross-entropy statistics: local max, global max, sum-exp, target logit
    int* inputs;
    int* targets; // (B,T) device
    int* h_inputs;
    int* h_targets;       // (B,T) pinned host
    EmbedBuckets hb;      // pinned host buckets of the inputs by owned token (first stage)
    cudaEvent_t uploaded; // recorded after this slot's uploads: the host arrays are free again
    int* d_uniq;
    int* d_off;
    int* d_pos;                // device copies: (B*T) (B*T+1) (B*T)
    size_t bytes, layer_bytes; // activation bytes this unit keeps (no tokens); of them, per layer (incl. its input)
} Acts;

typedef struct {
    Config cfg;
    ParamLayout pl;
    int B, T, C, NH, hs, Cl, F, Vl, v0, Vv, ldl; // ldl: row stride of the logits (Vl rounded up to 8)
    int nchunk, nlc;                             // model chunks per rank (-vpp) and layers per chunk
    int sp, Ts;              // -sp 1 (TP > 1 only): the residual stream keeps Ts = T/TP sequence rows per rank
    int CP, cp, Tfull, Tch;  // context parallel: T = Tfull/CP rows, chunks cp and 2CP-1-cp of Tch rows (doc/cp.md)
    int* tpos;               // (T) host: the position (row of wpe) of each local row; t itself without CP
    int* d_tpos;             // (T) its device copy (the encoder's)
    int* in_full;            // -cp > 1: (B, Tfull) host: a micro-batch's tokens before the rank takes its rows
    int* tg_full;            // -cp > 1: (B, Tfull) host: its targets
    bf16* cpkv[2];           // -cp > 1: (B,T,2Cl) each, own allocations: the ring's K|V blocks
    float* cpdkv[2];         // -cp > 1: (2,B,T,Cl) each, own allocations: the dK|dV partials that travel with them
    float* cpacc;            // -cp > 1: (B,T,Cl) fp32: the merged output (forward), dq (backward)
    int attn, gelu_fused;    // attn: ATTN_NAIVE, ATTN_FLASH (CUDA cores), ATTN_TC (tensor cores) or ATTN_CUDNN
    int attn_fallback;       // -cp > 1: the choice (cuDNN, naive) has no ring path, so the own kernels run
    struct CudnnAttn* cudnn; // cuDNN graphs and workspace (ATTN_CUDNN only)
    size_t total_pad;        // pl.total rounded up to a multiple of CP*DP (equal ZeRO shards for NCCL)
    int zero;                // ZeRO level (llmc/host/zero.h; 0 with one CP x DP rank)
    int grad_bf16;           // -grad-reduce bf16: the CP x DP reduction of gradients in bf16
    bf16* params;            // (total_pad) bf16 working weights; -zero 3: NULL (pshard, prest, pwin)
    float* grads;            // (total_pad) fp32 gradients, accumulated over the micro-batches; -zero 2/3: NULL
    float* master;           // (n_opt) fp32 master weights of flat elements [opt_off, opt_off+n_opt)
    float* m;
    float* v;
    size_t opt_off, n_opt, n_shard; // AdamW moments; n_shard: allocated shard
    float* gshard;  // ZeRO: reduced gradient shard (n_shard; ZeRO-1 with the overlapped fp32 DP reduction: the owner's
                    // slice of grads); else grads
    int overlap;    // DP reduction in buckets on the communication stream (DevComm.overlap)
    int nbuckets;   // buckets launched this step (one per local layer, then the rest)
    double* gn_pre; // (2 nlayers + 1) each bucket's squared norm before its DP reduction (noise scale): a layer's
                    // (zb-h1: its B part's), the rest's, then zb-h1's W parts
    // -zero 2/3 (zero.h): the per-layer tensors of one layer in a compact buffer (loff: each one's
    // offset, nlayer_el in all), the rest (embeddings, final LayerNorm) in another (roff, nrest_el)
    size_t loff[NUM_PARAM_TENSORS], roff[NUM_PARAM_TENSORS], nlayer_el, nrest_el;
    float* glayer[2];     // -zero 2/3: (nlayer_el) one micro-batch's gradients of a layer, the two in turn (the
                          // backward writes one while the other is reduced)
    int gcur;             // the scratch the next layer's gradients go to
    cudaEvent_t gfree[2]; // recorded after a scratch's reduction: its next use waits for it
    int gfree_set[2];     // gfree recorded
    float* grest;         // -zero 2/3: (nrest_el) the rest's gradients, accumulated over the step
    bf16* gstage;         // -grad-reduce bf16 over NCCL: (stage_n) a bucket in bf16, reduced in place
    size_t stage_n;       // memplan.h's mem_cuda_stage_floats
    bf16* pshard;         // -zero 3: (n_shard) the bf16 of the master shard: what the gathers send
    bf16* prest;          // -zero 3: (nrest_el) the rest's bf16 weights, whole
    bf16* pwin[2];        // -zero 3: (nlayer_el) gathered weights of a layer (the one in use, the next)
    int win_l[2];         // the local layer a window holds, -1 none
    cudaEvent_t wdone[2]; // recorded after a window's gather: the compute stream waits for it
    int sq_on;            // -zero 2/3 with one micro-batch per step: the buckets' squared norms (noise scale)
    DevZero zd;           // the sharded reductions and gathers (llmc/cuda/zero.cuh)
    size_t mem[NUM_MEM];  // device bytes of each kind (memplan.h's mem_plan_cuda gives the same)
    int nslots;
    Acts* acts;
    int* slot_unit; // (nslots) -vpp: the (chunk, micro-batch) unit k*V + c each slot holds, -1 = free
    // -pp-schedule zb-h1 (layout.h's pipe_zb_h1): B copies each layer's weight-GEMM inputs and
    // output gradients into the unit's W stash and frees its slot; its W runs those GEMMs (the
    // LM head's stays in B), as train_gpt.c
    int zb;
    int nstash;
    size_t wstash_layer;                 // elements per layer (zb_stash_layout)
    size_t ws_off[NUM_WS], ws_n[NUM_WS]; // each part of a layer's stash (WStashPart)
    bf16** wstash;                       // (nstash) of (nlc * wstash_layer)
    UnitPool wpool;                      // the stash each pending unit holds
    // micro-batch-sized scratch (device)
    int ndgrad;
    bf16** dgrad;        // (ndgrad) of (B,T,C): the gradient flowing backward; 1F1B: two, by
                         // backward parity; -vpp: a pool of ndgrad handed to units (layout.h's pipe_grad_buffers)
    UnitPool dgrad_pool; // -vpp: which unit holds each gradient buffer
    PpBuf* ppbuf;        // (nslots + ndgrad) the overlapped pipeline's events of each slot, then each gradient buffer
    bf16* ftmp;          // (B,T,C) row-parallel partial sums in forward
    bf16* gat;
    bf16* gdout;
    bf16* fsh;
    bf16* sptmp;         // -sp: gathered input (B,T,C), gathered gradient (B,T,C),
                         // reduce-scatter output (B,Ts,C), collective staging (B,T,C)
    bf16* dtmp;          // (B,T,C)
    bf16* dres2;         // (B,T,C)
    bf16* dqkv;          // (B,T,3Cl)
    bf16* datty;         // (B,T,Cl)
    bf16* dfch;          // (B,T,F)
    float* attn_scratch; // naive: (B,NH,T,T) pre-softmax gradient; flash, tc: (B,NH,T) rowsum(dO * O)
    float* red;
    size_t red_n;     // LayerNorm backward scratch: dw/db partial sums and tickets (zeroed once)
    double* loss_acc; // (1) sum of token losses of this rank, this step
    double* gn;       // (2 + GN_BLOCKS) two squared-norm results, then the partials
    double* h_stats;  // (3) pinned: loss sum, squared norm before and after the DP reduction, read with one wait
    void* dmem;       // the arena of the buffers above
    int* h_work;      // (Vl + 1) host bucket scratch
    Gemm gemm;
    cudaStream_t stream;
} GPT;

enum { ATTN_NAIVE, ATTN_FLASH, ATTN_TC, ATTN_CUDNN };
static const char* ATTN_NAMES[] = {"naive (materialised T x T)", "flash on CUDA cores (no T x T)",
                                   "flash on tensor cores (no T x T)", "cuDNN fused flash attention (no T x T)"};

// The own kernel for a head size: tc where a tensor-core kernel exists, else CUDA cores.
static int own_attention_kind(int hs) {
    return flash_tc_supported(hs) ? ATTN_TC : (hs <= FLASH_MAX_HS ? ATTN_FLASH : ATTN_NAIVE);
}

// LLMC_ATTENTION: auto (default), cudnn, tc, flash or naive. cudnn (and auto in a cuDNN
// build) is only a wish here: gpt_build asks cuDNN whether it runs the shape and falls
// back to the own kernel when it does not (auto) or stops (cudnn).
static int attention_kind(int hs) {
    const char* v = getenv("LLMC_ATTENTION");
    if (v == NULL || v[0] == '\0' || strcmp(v, "auto") == 0) {
#ifdef USE_CUDNN
        return ATTN_CUDNN;
#else
        return own_attention_kind(hs);
#endif
    }
    if (strcmp(v, "naive") == 0) return ATTN_NAIVE;
    if (strcmp(v, "flash") == 0) {
        flash_maxd(hs);
        return ATTN_FLASH;
    }
    if (strcmp(v, "tc") == 0) {
        if (!flash_tc_supported(hs))
            die("LLMC_ATTENTION=tc: no tensor-core kernel for head size %d (16, 32, 64, 128, 160): use flash", hs);
        return ATTN_TC;
    }
    if (strcmp(v, "cudnn") == 0) {
#ifdef USE_CUDNN
        return ATTN_CUDNN;
#else
        die("LLMC_ATTENTION=cudnn: this build has no cuDNN (the build says why; see README, the CUDA trainer): use "
            "auto or tc");
#endif
    }
    die("environment LLMC_ATTENTION=%s: use auto, cudnn, tc, flash or naive", v);
    return ATTN_NAIVE;
}

// Builds the cuDNN graphs when cuDNN was chosen; falls back to the own kernels when cuDNN
// has no engine for the shape (auto) or stops with its reason (LLMC_ATTENTION=cudnn).
// -cp > 1: the ring runs the own block kernels (attention_ring.cuh: tc or flash), which take
// and return the log-sum-exp the merge needs; cuDNN (and naive, which stores T x T) have no
// ring path, so they fall back to them (documented in doc/cp.md, said in the start-up table).
static void attention_setup(GPT* g) {
    g->cudnn = NULL;
    if (g->CP > 1) {
        g->attn_fallback = g->attn != ATTN_TC && g->attn != ATTN_FLASH;
        if (g->attn_fallback) g->attn = own_attention_kind(g->hs);
        if (g->attn == ATTN_NAIVE)
            die("-cp %d: ring attention has no kernel for head size %d (flash kernels up to %d): change -heads or "
                "use -cp 1",
                g->CP, g->hs, FLASH_MAX_HS);
        const char* v = getenv("LLMC_ATTENTION");
        if (g->attn_fallback && v != NULL && (strcmp(v, "cudnn") == 0 || strcmp(v, "naive") == 0))
            fprintf(stderr, "note: LLMC_ATTENTION=%s has no ring attention: -cp %d runs %s\n", v, g->CP,
                    ATTN_NAMES[g->attn]);
        return;
    }
#ifdef USE_CUDNN
    if (g->attn != ATTN_CUDNN) return;
    char why[512];
    g->cudnn = cudnn_attn_create(g->B, g->T, g->NH, g->hs, g->stream, why, sizeof why);
    if (g->cudnn != NULL && !cudnn_attn_deterministic(g->cudnn))
        fprintf(
            stderr,
            "warning: cuDNN %zu has no deterministic attention backward for T=%d heads=%d head size %d: the "
            "non-deterministic one runs, so a resumed run is not bit-identical (LLMC_ATTENTION=tc keeps the bits)\n",
            cudnn_attn_version(), g->T, g->NH, g->hs);
    if (g->cudnn != NULL) return;
    const char* v = getenv("LLMC_ATTENTION");
    if (v != NULL && strcmp(v, "cudnn") == 0) die("LLMC_ATTENTION=cudnn: %s", why);
    fprintf(stderr, "note: %s; using the own kernels\n", why);
    g->attn = own_attention_kind(g->hs);
#endif
}

static int is_first_stage(const GPT* g) { return g->pl.pp == 0; }
static int is_last_stage(const GPT* g) { return g->pl.pp == g->pl.PP - 1; }
// chunk c of this rank is the first / last virtual stage (embeddings / head)
static int is_first_chunk(const GPT* g, int c) { return g->pl.pp == 0 && c == 0; }
static int is_last_chunk(const GPT* g, int c) { return g->pl.pp == g->pl.PP - 1 && c == g->nchunk - 1; }

static LayerActs* layer_acts(const GPT* g, Acts* a, int l) {
    return &a->layer[g->cfg.recompute == RECOMPUTE_FULL ? 0 : l];
}

// Activation bytes of one unit, counted from the shapes acts_carve takes (no alignment
// padding, no token buffers), as train_gpt.c counts them: layer_bytes is what one layer
// keeps across the pipeline's wait (its bf16 input, plus its stash unless full recompute,
// whose one working set is rebuilt layer by layer); bytes the whole unit, head included.
// The probabilities that naive attention shares under selective recompute are counted once
// per rank by print_act_memory, not here.
static void acts_count_bytes(const GPT* g, Acts* a) {
    size_t B = g->B, T = g->T, C = g->C, NH = g->NH, Cl = g->Cl, F = g->F, BT = B * T, BTs = B * g->Ts;
    size_t att = g->attn != ATTN_NAIVE                     ? sizeof(float) * B * NH * T // lse
                 : g->cfg.recompute == RECOMPUTE_SELECTIVE ? 0
                                                           : sizeof(float) * B * NH * T * T; // probabilities
    size_t stash =
        sizeof(bf16) * (BTs * C + BT * 3 * Cl + BT * Cl + 2 * BTs * C + 2 * BT * F) + sizeof(float) * 4 * BTs + att;
    int full = g->cfg.recompute == RECOMPUTE_FULL;
    a->layer_bytes = sizeof(bf16) * BTs * C + (full ? 0 : stash);
    a->bytes = sizeof(bf16) * (size_t)(g->nlc + 1) * BTs * C + (size_t)(full ? 1 : g->nlc) * stash;
    if (is_last_stage(g))
        a->bytes += sizeof(bf16) * (BTs * C + BT * (size_t)g->ldl) + sizeof(float) * (2 * BTs + 6 * BT);
}

static void acts_carve(GPT* g, Acts* a, Arena* ar) {
    int B = g->B, T = g->T, C = g->C, NH = g->NH, Cl = g->Cl, F = g->F, nl = g->nlc;
    size_t BT = (size_t)B * T, BTs = (size_t)B * g->Ts; // -sp: the residual stream and LayerNorms keep (B,Ts,C)
    int nla = g->cfg.recompute == RECOMPUTE_FULL ? 1 : nl;
    TAKE(ar, a->x, (size_t)(nl + 1) * BTs * C);
    // -recompute selective: flash attention (tc, flash) never stores the probabilities (its
    // backward rebuilds them from qkv and lse), so selective keeps what no recompute keeps;
    // naive attention shares one probability buffer among the layers and rebuilds it
    // (a flag, not the pointer: the sizing pass's pointers are all NULL)
    float* att_shared = NULL;
    int shared = g->attn == ATTN_NAIVE && g->cfg.recompute == RECOMPUTE_SELECTIVE;
    if (shared) TAKE(ar, att_shared, (size_t)B * NH * T * T);
    for (int l = 0; l < nla; l++) {
        LayerActs* la = &a->layer[l];
        TAKE(ar, la->ln1, BTs * C);
        TAKE(ar, la->ln1_mean, BTs);
        TAKE(ar, la->ln1_rstd, BTs);
        TAKE(ar, la->qkv, BT * 3 * Cl);
        if (g->attn != ATTN_NAIVE) {
            la->att = NULL;
            TAKE(ar, la->lse, (size_t)B * NH * T);
        } else if (shared) {
            la->lse = NULL;
            la->att = att_shared;
        } else {
            la->lse = NULL;
            TAKE(ar, la->att, (size_t)B * NH * T * T);
        }
        TAKE(ar, la->atty, BT * Cl);
        TAKE(ar, la->resid2, BTs * C);
        TAKE(ar, la->ln2, BTs * C);
        TAKE(ar, la->ln2_mean, BTs);
        TAKE(ar, la->ln2_rstd, BTs);
        TAKE(ar, la->fch, BT * F);
        TAKE(ar, la->fch_gelu, BT * F);
    }
    if (is_last_stage(g)) {
        TAKE(ar, a->lnf, BTs * C);
        TAKE(ar, a->lnf_mean, BTs);
        TAKE(ar, a->lnf_rstd, BTs);
        TAKE(ar, a->logits, BT * g->ldl);
        TAKE(ar, a->losses, BT);
        TAKE(ar, a->lse, BT);
        TAKE(ar, a->ce, 4 * BT);
    }
    acts_count_bytes(g, a);
    TAKE(ar, a->inputs, BT);
    TAKE(ar, a->targets, BT);
    TAKE(ar, a->d_uniq, BT);
    TAKE(ar, a->d_off, BT + 1);
    TAKE(ar, a->d_pos, BT);
}

static void acts_alloc(GPT* g, Acts* a) {
    size_t BT = (size_t)g->B * g->T;
    a->layer = (LayerActs*)calloc_check(g->cfg.recompute == RECOMPUTE_FULL ? 1 : g->nlc, sizeof(LayerActs));
    Arena ar = {NULL, 0, g->mem, MEM_ACTS};
    acts_carve(g, a, &ar);
    a->mem = dev_alloc(ar.off);
    ar.base = (char*)a->mem;
    ar.off = 0;
    acts_carve(g, a, &ar);
    // pinned, so the uploads are asynchronous DMA instead of a staged copy that holds the
    // host at every micro-batch; acts_host_claim guards their reuse
    cudaCheck(cudaMallocHost((void**)&a->h_inputs, sizeof(int) * BT));
    cudaCheck(cudaMallocHost((void**)&a->h_targets, sizeof(int) * BT));
    cudaCheck(cudaMallocHost((void**)&a->hb.uniq, sizeof(int) * BT));
    cudaCheck(cudaMallocHost((void**)&a->hb.off, sizeof(int) * (BT + 1)));
    cudaCheck(cudaMallocHost((void**)&a->hb.pos, sizeof(int) * BT));
    memset(a->h_inputs, 0, sizeof(int) * BT);
    memset(a->h_targets, 0, sizeof(int) * BT);
    memset(a->hb.off, 0, sizeof(int) * (BT + 1));
    a->hb.nu = 0;
    cudaCheck(cudaEventCreateWithFlags(&a->uploaded, cudaEventDisableTiming));
}

static void acts_free(Acts* a) {
    dev_free(a->mem);
    free(a->layer);
    cudaCheck(cudaFreeHost(a->h_inputs));
    cudaCheck(cudaFreeHost(a->h_targets));
    cudaCheck(cudaFreeHost(a->hb.uniq));
    cudaCheck(cudaFreeHost(a->hb.off));
    cudaCheck(cudaFreeHost(a->hb.pos));
    cudaCheck(cudaEventDestroy(a->uploaded));
}

// ZeRO-1 with the overlapped fp32 DP reduction reduces each owner's slice of the gradient
// buffer in place; every other ZeRO path sums into a shard of its own
static int gshard_in_grads(const GPT* g) { return g->zero == 1 && g->overlap && !g->grad_bf16; }

// a device allocation of the model's own (not the arena), counted as kind
static void* gpt_dev(GPT* g, int kind, size_t bytes) {
    g->mem[kind] += mem_dev_bytes(bytes);
    return dev_alloc(bytes);
}

// The model's buffers by kind, in memplan.h's order (mem_plan_cuda counts the same)
static void gpt_carve(GPT* g, Arena* ar) {
    size_t BT = (size_t)g->B * g->T;
    ar->kind = MEM_PARAMS;
    if (g->zero < 3)
        TAKE(ar, g->params, g->total_pad);
    else {
        TAKE(ar, g->pshard, g->n_shard);
        TAKE(ar, g->prest, g->nrest_el);
        TAKE(ar, g->pwin[0], g->nlayer_el);
        TAKE(ar, g->pwin[1], g->nlayer_el);
    }
    ar->kind = MEM_GRADS;
    if (g->zero < 2)
        TAKE(ar, g->grads, g->total_pad);
    else {
        TAKE(ar, g->glayer[0], g->nlayer_el);
        TAKE(ar, g->glayer[1], g->nlayer_el);
        TAKE(ar, g->grest, g->nrest_el);
    }
    if (g->zero && !gshard_in_grads(g)) TAKE(ar, g->gshard, g->n_shard);
    if (g->stage_n > 0) TAKE(ar, g->gstage, g->stage_n);
    ar->kind = MEM_ACTS;
    TAKE(ar, g->ftmp, BT * g->C);
    TAKE(ar, g->dtmp, BT * g->C);
    TAKE(ar, g->dres2, BT * g->C);
    if (g->sp) {
        TAKE(ar, g->gat, BT * g->C);
        TAKE(ar, g->gdout, BT * g->C);
        TAKE(ar, g->fsh, (size_t)g->B * g->Ts * g->C);
        TAKE(ar, g->sptmp, BT * g->C);
    }
    TAKE(ar, g->dqkv, BT * 3 * g->Cl);
    TAKE(ar, g->datty, BT * g->Cl);
    TAKE(ar, g->dfch, BT * g->F);
    TAKE(ar, g->attn_scratch, g->attn != ATTN_NAIVE ? (size_t)g->B * g->NH * g->T : (size_t)g->B * g->NH * g->T * g->T);
    if (g->CP > 1) TAKE(ar, g->cpacc, BT * g->Cl);
    TAKE(ar, g->red, g->red_n);
    TAKE(ar, g->loss_acc, 1);
    TAKE(ar, g->gn, 2 + GN_BLOCKS + 2 * g->pl.nlayers + 1);
}

static int env_flag(const char* name, const char* on, const char* off, int dflt) {
    const char* v = getenv(name);
    if (v == NULL || v[0] == '\0') return dflt;
    if (strcmp(v, on) == 0) return 1;
    if (strcmp(v, off) == 0) return 0;
    die("environment %s=%s: use %s or %s", name, v, on, off);
    return dflt;
}

// Builds the model for one rank on the device: parameter table, buffers, activation slots.
// The optimizer range [opt_off, opt_off + n_opt) is the whole buffer; ZeRO narrows it.
static void gpt_build(GPT* g, const Config* cfg, const Comm* comm, int nslots, int ndgrad, int nstash, int overlap,
                      cudaStream_t stream) {
    memset(g, 0, sizeof(*g));
    g->overlap = overlap;
    g->ndgrad = ndgrad;
    g->dgrad = (bf16**)calloc_check(ndgrad, sizeof(bf16*));
    if (!pool_init(&g->dgrad_pool, ndgrad)) die("out of host memory for the gradient buffer pool");
    g->cfg = *cfg;
    g->stream = stream;
    param_layout_init(&g->pl, cfg->L, cfg->H, cfg->heads, cfg->seq, cfg->V, cfg->Vp, comm->tp, comm->TP, comm->pp,
                      comm->PP);
    param_layout_set_chunks(&g->pl, cfg->vpp); // chunk c holds local layers [c*nlc, (c+1)*nlc): virtual stage c*PP + pp
    g->nchunk = g->pl.nchunks;
    g->nlc = g->pl.nlayers / g->nchunk;
    g->sp = cfg->sp && comm->TP > 1; // one TP rank: nothing to split
    g->CP = comm->CP;
    g->cp = comm->cp;
    g->Tfull = cfg->seq;
    g->B = cfg->mb;
    g->T = cfg->seq / g->CP;
    g->Tch = g->T / 2;
    g->Ts = g->sp ? g->T / comm->TP : g->T;
    g->C = cfg->H;
    g->NH = cfg->heads / comm->TP;
    g->hs = cfg->H / cfg->heads;
    g->Cl = g->NH * g->hs;
    g->F = 4 * cfg->H / comm->TP;
    g->Vl = cfg->Vp / comm->TP;
    g->v0 = comm->tp * g->Vl;
    g->Vv = cfg->V - g->v0;
    if (g->Vv < 0) g->Vv = 0;
    if (g->Vv > g->Vl) g->Vv = g->Vl;
    g->ldl = ((g->Vl + 7) / 8) * 8; // the head GEMMs run on all Vl rows of the slice (see head_forward)
    g->attn = attention_kind(g->hs);
    attention_setup(g);
    g->gelu_fused = env_flag("LLMC_GELU_FUSION", "1", "0", 1);
    g->zero = comm->DPC > 1 ? cfg->zero : 0;
    g->grad_bf16 = config_grad_bf16(cfg) && g->zero > 0;
    // gradients reduce, and ZeRO shards, over the CP x DP group (llmc/host/comm.h)
    size_t per = (g->pl.total + comm->DPC - 1) / comm->DPC;
    g->total_pad = per * comm->DPC;
    g->nlayer_el = zero_layer_offsets(&g->pl, g->loff);
    g->nrest_el = 0;
    for (int t = 0; t < NUM_PARAM_TENSORS; t++) {
        g->roff[t] = g->nrest_el;
        if (!zero_layered(t)) g->nrest_el += g->pl.numel[t];
    }
    g->stage_n = g->grad_bf16 && strcmp(cfg->comm, "nccl") == 0 ? mem_cuda_stage_floats(&g->pl, g->zero, g->sp) : 0;
    g->win_l[0] = g->win_l[1] = -1;
    if (g->zero) {
        zero_shard(g->pl.total, comm->DPC, comm->dpc, &g->opt_off, &g->n_opt);
        g->n_shard = per;
    } else {
        g->opt_off = 0;
        g->n_opt = g->pl.total;
        g->n_shard = g->pl.total;
    }
    size_t BT = (size_t)g->B * g->T;
    // LayerNorm dw/db partials and tickets (memplan.h's count of layernorm_backward_scratch: it checks)
    g->red_n = mem_ln_scratch_floats(BT, (size_t)g->C);
    Arena ar = {NULL, 0, g->mem, MEM_ACTS};
    gpt_carve(g, &ar);
    g->dmem = dev_alloc(ar.off);
    ar.base = (char*)g->dmem;
    ar.off = 0;
    gpt_carve(g, &ar);
    if (!g->zero)
        g->gshard = g->grads;
    else if (gshard_in_grads(g))
        g->gshard = g->grads + g->opt_off; // the buckets reduce each owner's slice in place
    g->gn_pre = g->gn + 2 + GN_BLOCKS;
    // the optimizer state in own allocations: a background checkpoint copies it on a side stream
    // while the next step's kernels use the arena (the emulation's stream detector sees a kernel's
    // access as its whole allocation)
    g->master = (float*)gpt_dev(g, MEM_OPTIM, sizeof(float) * g->n_shard);
    g->m = (float*)gpt_dev(g, MEM_OPTIM, sizeof(float) * g->n_shard);
    g->v = (float*)gpt_dev(g, MEM_OPTIM, sizeof(float) * g->n_shard);
    for (int i = 0; i < 2 && g->zero >= 2; i++)
        cudaCheck(cudaEventCreateWithFlags(&g->gfree[i], cudaEventDisableTiming));
    for (int i = 0; i < 2 && g->zero >= 3; i++)
        cudaCheck(cudaEventCreateWithFlags(&g->wdone[i], cudaEventDisableTiming));
    // own allocations, not the arena: the emulation's stream detector sees a kernel's access
    // as its whole allocation, and these travel on the pipeline links beside compute
    for (int i = 0; i < ndgrad; i++) g->dgrad[i] = (bf16*)gpt_dev(g, MEM_ACTS, sizeof(bf16) * BT * g->C);
    // the rows' positions: chunks cp and 2CP-1-cp of the sequence (doc/cp.md); without CP the identity
    g->tpos = (int*)malloc_check(sizeof(int) * g->T);
    for (int t = 0; t < g->T; t++)
        g->tpos[t] = g->CP == 1 ? t : (t < g->Tch ? g->cp * g->Tch + t : (2 * g->CP - 1 - g->cp) * g->Tch + t - g->Tch);
    g->d_tpos = (int*)gpt_dev(g, MEM_ACTS, sizeof(int) * g->T);
    cudaCheck(cudaMemcpy(g->d_tpos, g->tpos, sizeof(int) * g->T, cudaMemcpyHostToDevice));
    if (g->CP > 1) { // the ring's buffers travel on the CP stream beside compute: own allocations too
        g->in_full = (int*)malloc_check(sizeof(int) * g->B * g->Tfull);
        g->tg_full = (int*)malloc_check(sizeof(int) * g->B * g->Tfull);
        for (int i = 0; i < 2; i++) {
            g->cpkv[i] = (bf16*)gpt_dev(g, MEM_ACTS, sizeof(bf16) * BT * 2 * g->Cl);
            g->cpdkv[i] = (float*)gpt_dev(g, MEM_ACTS, sizeof(float) * BT * 2 * g->Cl);
        }
    }
    g->ppbuf = (PpBuf*)calloc_check((size_t)nslots + ndgrad, sizeof(PpBuf));
    for (int i = 0; i < nslots + ndgrad; i++) dc_ppbuf_init(&g->ppbuf[i]);
    g->nslots = nslots;
    g->acts = (Acts*)calloc_check(nslots, sizeof(Acts));
    for (int s = 0; s < nslots; s++) acts_alloc(g, &g->acts[s]);
    g->slot_unit = (int*)malloc_check(sizeof(int) * nslots);
    for (int s = 0; s < nslots; s++) g->slot_unit[s] = -1;
    g->zb = nstash > 0;
    g->nstash = nstash;
    g->wstash_layer = zb_stash_layout(BT, (size_t)g->B * g->Ts, g->C, g->F, g->Cl, g->ws_off, g->ws_n);
    g->wstash = (bf16**)calloc_check(nstash + 1, sizeof(bf16*));
    for (int i = 0; i < nstash; i++)
        g->wstash[i] = (bf16*)gpt_dev(g, MEM_ACTS, sizeof(bf16) * g->nlc * g->wstash_layer);
    if (!pool_init(&g->wpool, nstash + 1)) die("out of host memory for the zb-h1 stash pool");
    g->h_work = (int*)calloc_check((size_t)g->Vl + 1, sizeof(int));
    cudaCheck(
        cudaMallocHost((void**)&g->h_stats, 3 * sizeof(double))); // pinned: the reads are DMA, never a staged copy
    int maxcols = 3 * g->Cl;
    if (g->F > maxcols) maxcols = g->F;
    if (g->C > maxcols) maxcols = g->C;
    gemm_init(&g->gemm, stream, (size_t)maxcols);
    // cuBLASLt's workspace and the bias-gradient scratch, allocated by gemm_init
    g->mem[MEM_ACTS] += mem_dev_bytes(g->gemm.ws_bytes) + 2 * mem_dev_bytes(sizeof(float) * g->gemm.partials_n);
}

static void gpt_free(GPT* g) {
#ifdef USE_CUDNN
    cudnn_attn_destroy(g->cudnn);
#endif
    gemm_free(&g->gemm);
    for (int s = 0; s < g->nslots; s++) acts_free(&g->acts[s]);
    free(g->acts);
    free(g->slot_unit);
    for (int i = 0; i < g->ndgrad; i++) dev_free(g->dgrad[i]);
    for (int i = 0; i < g->nslots + g->ndgrad; i++) dc_ppbuf_free(&g->ppbuf[i]);
    free(g->tpos);
    dev_free(g->d_tpos);
    free(g->in_full);
    free(g->tg_full);
    for (int i = 0; i < 2; i++) {
        dev_free(g->cpkv[i]);
        dev_free(g->cpdkv[i]);
    }
    pool_free(&g->dgrad_pool);
    free(g->dgrad);
    for (int i = 0; i < g->nstash; i++) dev_free(g->wstash[i]);
    free(g->wstash);
    pool_free(&g->wpool);
    free(g->ppbuf);
    cudaCheck(cudaFreeHost(g->h_stats));
    dev_free(g->master);
    dev_free(g->m);
    dev_free(g->v);
    for (int i = 0; i < 2 && g->zero >= 2; i++) cudaCheck(cudaEventDestroy(g->gfree[i]));
    for (int i = 0; i < 2 && g->zero >= 3; i++) cudaCheck(cudaEventDestroy(g->wdone[i]));
    zd_free(&g->zd);
    dev_free(g->dmem);
    free(g->h_work);
}

// n bf16 (round to nearest even, as the device's cast) of the floats src, up into device dst
static void upload_as_bf16(bf16* dst, const float* src, size_t n) {
    uint16_t* h = (uint16_t*)malloc_check(sizeof(uint16_t) * (n + 1));
    for (size_t i = 0; i < n; i++) h[i] = host_f2bf(src[i]);
    cudaCheck(cudaMemcpy(dst, h, sizeof(uint16_t) * n, cudaMemcpyHostToDevice));
    free(h);
}

// Sets the weights from a host fp32 buffer of the whole local flat buffer (pl.total):
// the master weights of the optimizer range, and the bf16 working copy of everything
// (-zero 3: of the shard, and the rest whole).
static void gpt_upload_weights(GPT* g, const float* h_params) {
    if (g->zero >= 2) { // no fp32 buffer of everything on the device: the bf16 made on the host
        cudaCheck(cudaStreamSynchronize(g->stream));
        cudaCheck(cudaMemcpy(g->master, h_params + g->opt_off, sizeof(float) * g->n_opt, cudaMemcpyHostToDevice));
        if (g->zero == 2) upload_as_bf16(g->params, h_params, g->pl.total);
        if (g->zero == 3) {
            upload_as_bf16(g->pshard, h_params + g->opt_off, g->n_opt);
            float* rest = (float*)malloc_check(sizeof(float) * (g->nrest_el + 1));
            for (int t = 0; t < NUM_PARAM_TENSORS; t++)
                if (!zero_layered(t))
                    memcpy(rest + g->roff[t], h_params + g->pl.offset[t], sizeof(float) * g->pl.numel[t]);
            upload_as_bf16(g->prest, rest, g->nrest_el);
            free(rest);
            g->win_l[0] = g->win_l[1] = -1; // gathered weights are stale
        }
        return;
    }
    // stage the fp32 values through the (idle) gradient buffer, cast on the device
    cudaCheck(cudaMemcpyAsync(g->grads, h_params, sizeof(float) * g->pl.total, cudaMemcpyHostToDevice, g->stream));
    cast_f32_to_bf16(g->params, g->grads, g->pl.total, g->stream);
    cudaCheck(cudaMemcpyAsync(g->master, g->grads + g->opt_off, sizeof(float) * g->n_opt, cudaMemcpyDeviceToDevice,
                              g->stream));
    cudaCheck(cudaMemsetAsync(g->grads, 0, sizeof(float) * g->total_pad, g->stream));
    cudaCheck(cudaStreamSynchronize(g->stream));
}

// Tensor t of local layer l (l 0 for the others): in the flat buffers, or under -zero 2/3 in
// the compact ones (a layer's gradients: the scratch the backward writes now; -zero 3, a
// layer's weights: the window it was gathered into, z3_need)
static bf16* gpt_param(const GPT* g, int t, int l) {
    if (g->zero < 3) return g->params + g->pl.offset[t] + (size_t)l * g->pl.rows[t] * g->pl.cols[t];
    if (!zero_layered(t)) return g->prest + g->roff[t];
    for (int w = 0; w < 2; w++)
        if (g->win_l[w] == l) return g->pwin[w] + g->loff[t];
    die("internal: -zero 3: the weights of local layer %d are not gathered", l);
    return NULL;
}
static float* gpt_grad(const GPT* g, int t, int l) {
    if (g->zero < 2) return g->grads + g->pl.offset[t] + (size_t)l * g->pl.rows[t] * g->pl.cols[t];
    return zero_layered(t) ? g->glayer[g->gcur] + g->loff[t] : g->grest + g->roff[t];
}
#define P(t, l) gpt_param(g, (t), (l))
#define G(t, l) gpt_grad(g, (t), (l))

// -sp 1 (Megatron sequence parallelism, llmc/host/seqpar.h): the input of a column-parallel GEMM
// is the all-gather of the rank's sequence shard; the partial sums of a row-parallel GEMM
// are reduce-scattered to it. Without -sp both are the plain tensor (and an all-reduce).
static bf16* gather_seq(GPT* g, DevComm* dc, bf16* shard, bf16* full) {
    if (!g->sp) return shard;
    dc_sp_allgather_bf16(dc, full, shard, g->B, g->Ts, g->C, g->sptmp);
    return full;
}
// partial (B,T,C) summed over TP: in place, or with -sp this rank's rows into shard (B,Ts,C)
static bf16* reduce_seq(GPT* g, DevComm* dc, bf16* partial, bf16* shard) {
    if (!g->sp) {
        dc_tp_allreduce_bf16(dc, partial, (size_t)g->B * g->T * g->C);
        return partial;
    }
    dc_sp_reduce_scatter_bf16(dc, shard, partial, g->B, g->Ts, g->C, g->sptmp);
    return shard;
}

// x (B,T,C) = wte[tokens] + wpe[tpos[t]], vocab-parallel: each TP rank embeds the rows it owns,
// TP rank 0 adds the positions, one all-reduce (exact: see encoder.cuh); -sp: a
// reduce-scatter to the rank's (B,Ts,C) shard
static void embedding_forward(GPT* g, DevComm* dc, bf16* x, const Acts* a) {
    bf16* e = g->sp ? g->ftmp : x;
    encoder_forward(e, a->inputs, P(PT_WTE, 0), P(PT_WPE, 0), g->d_tpos, g->B, g->T, g->C, g->v0, g->Vl, g->pl.tp == 0,
                    g->stream);
    reduce_seq(g, dc, e, x);
}

// atty (B,T,Cl) from qkv (B,T,3Cl)
static void attention_forward(GPT* g, LayerActs* la) {
    switch (g->attn) {
#ifdef USE_CUDNN
        case ATTN_CUDNN:
            cudnn_attn_forward(g->cudnn, la->atty, la->lse, la->qkv, g->stream);
            break;
#endif
        case ATTN_TC:
            attention_forward_tc(la->atty, la->lse, la->qkv, g->B, g->T, g->NH, g->hs, g->stream);
            break;
        case ATTN_FLASH:
            attention_forward_flash(la->atty, la->lse, la->qkv, g->B, g->T, g->NH, g->hs, g->stream);
            break;
        default:
            attention_forward_naive(la->atty, la->att, la->qkv, g->B, g->T, g->NH, g->hs, g->stream);
            break;
    }
}

// dqkv (B,T,3Cl) from datty (B,T,Cl)
static void attention_backward(GPT* g, LayerActs* la) {
    switch (g->attn) {
#ifdef USE_CUDNN
        case ATTN_CUDNN:
            cudnn_attn_backward(g->cudnn, g->dqkv, g->datty, la->atty, la->qkv, la->lse, g->stream);
            break;
#endif
        case ATTN_TC:
            attention_backward_tc(g->dqkv, g->attn_scratch, g->datty, la->atty, la->qkv, la->lse, g->B, g->T, g->NH,
                                  g->hs, g->stream);
            break;
        case ATTN_FLASH:
            attention_backward_flash(g->dqkv, g->attn_scratch, g->datty, la->atty, la->qkv, la->lse, g->B, g->T, g->NH,
                                     g->hs, g->stream);
            break;
        default:
            attention_backward_naive(g->dqkv, g->attn_scratch, g->datty, la->qkv, la->att, g->B, g->T, g->NH, g->hs,
                                     g->stream);
            break;
    }
}

// -cp > 1 (doc/cp.md): attention over the CP ring. Ring step st brings the K|V block of CP rank
// j = cp - st (mod CP); attention_ring_block says which of this rank's rows see which of its
// keys, and the block's partial output merges into the fp32 accumulator by the log-sum-exp
// (la->lse holds the merged lse: what the backward needs). The own block is read from qkv in
// place; the next block's transfer (nccl_comm.cuh's dc_cp_ring_*: NCCL on the CP stream, or
// host-staged MPI) runs while the current one is computed; cpkv[st % 2] holds block st, and
// the transfer into the other buffer waits for the compute that last read it. atty (B,T,Cl) is
// the merged output rounded to bf16 once.
static void cp_attention_forward(GPT* g, DevComm* dc, LayerActs* la) {
    int B = g->B, T = g->T, Cl = g->Cl, tc = g->attn == ATTN_TC;
    size_t nkv = (size_t)B * T * 2 * Cl;
    cudaStream_t s = g->stream;
    attention_ring_pack_kv(g->cpkv[0], la->qkv, B, T, Cl, s); // this rank's block, as it travels
    for (int st = 0; st < g->CP; st++) {
        int j = (g->cp - st + g->CP) % g->CP, mask;
        if (st + 1 < g->CP) dc_cp_ring_start(dc, g->cpkv[st % 2], g->cpkv[(st + 1) % 2], nkv, 1, 20);
        const bf16* k = st == 0 ? la->qkv + Cl : g->cpkv[st % 2];
        const bf16* v = st == 0 ? la->qkv + 2 * Cl : g->cpkv[st % 2] + Cl;
        AttnBlock a = attention_ring_block(g->cp, j, g->Tch, g->NH, st == 0 ? 3 * Cl : 2 * Cl, &mask);
        attention_ring_forward(g->cpacc, la->lse, st == 0, la->qkv, k, v, a, mask, B, g->hs, tc, s);
        dc_cp_ring_wait(dc); // block st + 1 has arrived (and block st has left)
    }
    attention_ring_forward_finish(la->atty, g->cpacc, B, T, Cl, s);
}

// -cp > 1: the backward of cp_attention_forward, dqkv (B,T,3Cl) from datty (B,T,Cl). The K|V
// blocks go around the ring again (each transfer overlapping the compute of the block before);
// with each travels the dK|dV partial of its keys (cpdkv, fp32): block j's starts at rank j,
// every rank adds its queries' terms and passes it on, and one more hop after the last step
// brings it home complete (the order tests/cuda/test_attention.cu's ring check sums in). A
// partial is what the compute just made, so its transfer cannot overlap it.
static void cp_attention_backward(GPT* g, DevComm* dc, LayerActs* la) {
    int B = g->B, T = g->T, Cl = g->Cl, tc = g->attn == ATTN_TC;
    size_t nkv = (size_t)B * T * 2 * Cl, npart = (size_t)B * T * Cl;
    cudaStream_t s = g->stream;
    attention_ring_dot(g->attn_scratch, g->datty, la->atty, B, T, g->NH, g->hs, s); // D = rowsum(dO * O)
    attention_ring_pack_kv(g->cpkv[0], la->qkv, B, T, Cl, s);
    for (int st = 0; st < g->CP; st++) {
        int j = (g->cp - st + g->CP) % g->CP, mask, cur = st % 2, nxt = (st + 1) % 2;
        if (st + 1 < g->CP) dc_cp_ring_start(dc, g->cpkv[cur], g->cpkv[nxt], nkv, 1, 21);
        const bf16* k = st == 0 ? la->qkv + Cl : g->cpkv[cur];
        const bf16* v = st == 0 ? la->qkv + 2 * Cl : g->cpkv[cur] + Cl;
        AttnBlock a = attention_ring_block(g->cp, j, g->Tch, g->NH, st == 0 ? 3 * Cl : 2 * Cl, &mask);
        attention_ring_backward(g->cpacc, g->cpdkv[cur], g->cpdkv[cur] + npart, st == 0, st == 0, g->datty, la->qkv, k,
                                v, la->lse, g->attn_scratch, a, mask, B, g->hs, tc, s);
        dc_cp_ring_wait(dc);
        // block j's partial to the next rank (its next holder), block j-1's from the previous one;
        // after the last step block cp+1's, complete, goes home and this rank's own arrives
        dc_cp_ring_start(dc, g->cpdkv[cur], g->cpdkv[nxt], 2 * npart, 0, 22);
        dc_cp_ring_wait(dc);
    }
    const float* dkv = g->cpdkv[g->CP % 2];
    attention_ring_backward_finish(g->dqkv, g->cpacc, dkv, dkv + npart, B, T, Cl, s);
}

// Forward of layer j of chunk c of the unit (local layer l = c * nlc + j): x[j] -> x[j+1]
// (-sp: x, y, resid2 and the LayerNorms are (B,Ts,C); the GEMMs and attention see all T.)
// The closing residual add is fused with the LayerNorm that reads its output (llm.c's
// fused_residual_forward, one pass less over the residual stream): the next layer's ln1
// inside the chunk, the final LayerNorm after the model's last layer. A chunk's last layer
// on any other virtual stage ends with the plain add: its output travels to the next stage,
// whose first layer normalises it itself. The fused kernel rounds the sum to bf16 first and
// normalises the rounded value, so it gives the bits of the add and a separate LayerNorm.
// rebuild (-recompute 1, in backward): layer j's own activations are rebuilt from the kept
// x[j], its ln1 included; nothing after them is written (x[j+1] and the next layer's ln1 are
// kept or already consumed, and the one shared LayerActs holds layer j now).
static void block_forward(GPT* g, DevComm* dc, Acts* a, int c, int j, int rebuild) {
    int B = g->B, T = g->T, C = g->C, Cl = g->Cl, F = g->F, BT = B * T, BTs = B * g->Ts;
    int l = c * g->nlc + j;
    Gemm* mm = &g->gemm;
    cudaStream_t s = g->stream;
    LayerActs* la = layer_acts(g, a, j);
    bf16* x = a->x + (size_t)j * BTs * C;
    bf16* y = a->x + (size_t)(j + 1) * BTs * C;
    // ln1 (B,Ts,C): the previous layer of the chunk wrote it already, fused with its residual add
    // (-zero 3: not fused, the next layer's weights are not gathered yet; the same bits)
    if (j == 0 || rebuild || g->zero >= 3)
        layernorm_forward(la->ln1, la->ln1_mean, la->ln1_rstd, x, P(PT_LN1W, l), P(PT_LN1B, l), BTs, C, s);
    matmul_forward(mm, la->qkv, 3 * Cl, gather_seq(g, dc, la->ln1, g->gat), P(PT_QKVW, l), P(PT_QKVB, l), BT, C,
                   3 * Cl);
    if (g->CP > 1)
        cp_attention_forward(g, dc, la);
    else
        attention_forward(g, la);
    matmul_forward(mm, g->ftmp, C, la->atty, P(PT_ATTPROJW, l), NULL, BT, Cl, C); // partial sum
    bf16* att = reduce_seq(g, dc, g->ftmp, g->fsh);
    // resid2 = x + attn + bias (bias once, after the all-reduce); ln2 = LN(resid2)
    residual_forward(la->resid2, la->ln2, la->ln2_mean, la->ln2_rstd, x, att, P(PT_ATTPROJB, l), P(PT_LN2W, l),
                     P(PT_LN2B, l), BTs, C, s);
    matmul_forward_gelu(mm, la->fch_gelu, la->fch, gather_seq(g, dc, la->ln2, g->gat), P(PT_FCW, l), P(PT_FCB, l), BT,
                        C, F, g->gelu_fused);
    matmul_forward(mm, g->ftmp, C, la->fch_gelu, P(PT_FCPROJW, l), NULL, BT, F, C); // partial sum
    bf16* mlp = reduce_seq(g, dc, g->ftmp, g->fsh);
    if (rebuild) return;
    // y = resid2 + mlp + bias; then the next LayerNorm of y on this rank, if any, in the same kernel
    bf16* out = NULL;
    float* mean = NULL;
    float* rstd = NULL;
    const bf16* w = NULL;
    const bf16* b = NULL;
    if (j + 1 < g->nlc && g->zero < 3) {
        LayerActs* nx = layer_acts(g, a, j + 1); // with -recompute 1 the shared set: layer j is done with it
        out = nx->ln1;
        mean = nx->ln1_mean;
        rstd = nx->ln1_rstd;
        w = P(PT_LN1W, l + 1);
        b = P(PT_LN1B, l + 1);
    } else if (j + 1 == g->nlc && is_last_chunk(g, c)) {
        out = a->lnf;
        mean = a->lnf_mean;
        rstd = a->lnf_rstd;
        w = P(PT_LNFW, 0);
        b = P(PT_LNFB, 0);
    }
    residual_forward(y, out, mean, rstd, la->resid2, mlp, P(PT_FCPROJB, l), w, b, BTs, C, s);
}

// part k (WStashPart) of layer j's W stash in ws, or NULL without one (1F1B)
static bf16* stash_part(const GPT* g, bf16* ws, int j, int k) {
    return ws != NULL ? ws + (size_t)j * g->wstash_layer + g->ws_off[k] : NULL;
}
// keep part k of layer j's weight-GEMM inputs / output gradients for W (zb-h1)
static void stash_copy(GPT* g, bf16* ws, int j, int k, const bf16* src) {
    cudaCheck(
        cudaMemcpyAsync(stash_part(g, ws, j, k), src, sizeof(bf16) * g->ws_n[k], cudaMemcpyDeviceToDevice, g->stream));
}

// Backward of layer j of the unit (local layer l): dio holds dL/dx[j+1] (B,Ts,C) on entry
// and dL/dx[j] on exit
// (-sp: dio, dres2 and the LayerNorms are (B,Ts,C), gathered before the GEMMs; the
// conjugates of the column-parallel GEMMs are reduce-scatters.)
// ws: zb-h1's B (the weight GEMMs, with their fused bias gradients, are left to
// block_weight; their inputs and output gradients go to the unit's stash), or NULL.
static void block_backward(GPT* g, DevComm* dc, Acts* a, int j, int l, bf16* dio, bf16* ws) {
    int B = g->B, T = g->T, C = g->C, Cl = g->Cl, F = g->F, BT = B * T, BTs = B * g->Ts;
    Gemm* mm = &g->gemm;
    cudaStream_t s = g->stream;
    LayerActs* la = layer_acts(g, a, j);
    bf16* x = a->x + (size_t)j * BTs * C;
    // MLP: y = resid2 + fcproj(gelu(fc(ln2(resid2))))
    // dfch = (dio @ Wfcproj) * gelu'(fch) and the fc1 bias gradient in one GEMM (DGELU_BGRAD)
    bf16* dy = gather_seq(g, dc, dio, g->gdout);
    matmul_backward_input_dgelu(mm, g->dfch, G(PT_FCB, l), dy, C, P(PT_FCPROJW, l), la->fch, BT, F, C, g->gelu_fused);
    if (ws == NULL)
        matmul_backward_weight_bias(mm, G(PT_FCPROJW, l), G(PT_FCPROJB, l), dy, C, la->fch_gelu, BT, F, C);
    else {
        stash_copy(g, ws, j, WS_D_FCPROJ, dio);
        stash_copy(g, ws, j, WS_FCH_GELU, la->fch_gelu);
    }
    matmul_backward_input(mm, g->dtmp, g->dfch, F, P(PT_FCW, l), BT, C, F);
    if (ws == NULL)
        matmul_backward_weight(mm, G(PT_FCW, l), g->dfch, F, gather_seq(g, dc, la->ln2, g->gat), BT, C, F);
    else {
        stash_copy(g, ws, j, WS_D_FC, g->dfch);
        stash_copy(g, ws, j, WS_LN2, la->ln2);
    }
    bf16* dln2 = reduce_seq(g, dc, g->dtmp, g->fsh); // conjugate of the column-parallel fc1
    layernorm_backward(g->dres2, dio, G(PT_LN2W, l), G(PT_LN2B, l), dln2, la->resid2, P(PT_LN2W, l), la->ln2_mean,
                       la->ln2_rstd, BTs, C, g->red, g->red_n, s);
    // attention: resid2 = x + attproj(attn(qkv(ln1(x))))
    bf16* dres2 = gather_seq(g, dc, g->dres2, g->gdout);
    matmul_backward_input(mm, g->datty, dres2, C, P(PT_ATTPROJW, l), BT, Cl, C);
    if (ws == NULL)
        matmul_backward_weight_bias(mm, G(PT_ATTPROJW, l), G(PT_ATTPROJB, l), dres2, C, la->atty, BT, Cl, C);
    else {
        stash_copy(g, ws, j, WS_D_ATTPROJ, g->dres2);
        stash_copy(g, ws, j, WS_ATTY, la->atty);
    }
    if (g->attn == ATTN_NAIVE && g->cfg.recompute == RECOMPUTE_SELECTIVE)
        attention_forward(g, la); // rebuild the shared probabilities (atty: the same bits)
    if (g->CP > 1)
        cp_attention_backward(g, dc, la);
    else
        attention_backward(g, la);
    matmul_backward_input(mm, g->dtmp, g->dqkv, 3 * Cl, P(PT_QKVW, l), BT, C, 3 * Cl);
    if (ws == NULL)
        matmul_backward_weight_bias(mm, G(PT_QKVW, l), G(PT_QKVB, l), g->dqkv, 3 * Cl,
                                    gather_seq(g, dc, la->ln1, g->gat), BT, C, 3 * Cl);
    else {
        stash_copy(g, ws, j, WS_D_QKV, g->dqkv);
        stash_copy(g, ws, j, WS_LN1, la->ln1);
    }
    bf16* dln1 = reduce_seq(g, dc, g->dtmp, g->fsh);
    layernorm_backward(dio, g->dres2, G(PT_LN1W, l), G(PT_LN1B, l), dln1, x, P(PT_LN1W, l), la->ln1_mean, la->ln1_rstd,
                       BTs, C, g->red, g->red_n, s);
}

// zb-h1's W of layer j of chunk c: the weight GEMMs block_backward makes without a stash, on
// the stashed inputs and output gradients (the same calls: the same bits).
static void block_weight(GPT* g, DevComm* dc, int c, int j, bf16* ws) {
    int BT = g->B * g->T, C = g->C, Cl = g->Cl, F = g->F, l = c * g->nlc + j;
    Gemm* mm = &g->gemm;
    matmul_backward_weight_bias(mm, G(PT_FCPROJW, l), G(PT_FCPROJB, l),
                                gather_seq(g, dc, stash_part(g, ws, j, WS_D_FCPROJ), g->gdout), C,
                                stash_part(g, ws, j, WS_FCH_GELU), BT, F, C);
    matmul_backward_weight(mm, G(PT_FCW, l), stash_part(g, ws, j, WS_D_FC), F,
                           gather_seq(g, dc, stash_part(g, ws, j, WS_LN2), g->gat), BT, C, F);
    matmul_backward_weight_bias(mm, G(PT_ATTPROJW, l), G(PT_ATTPROJB, l),
                                gather_seq(g, dc, stash_part(g, ws, j, WS_D_ATTPROJ), g->gdout), C,
                                stash_part(g, ws, j, WS_ATTY), BT, Cl, C);
    matmul_backward_weight_bias(mm, G(PT_QKVW, l), G(PT_QKVB, l), stash_part(g, ws, j, WS_D_QKV), 3 * Cl,
                                gather_seq(g, dc, stash_part(g, ws, j, WS_LN1), g->gat), BT, C, 3 * Cl);
}

// Last stage: tied LM head over the local vocabulary slice and the vocab-parallel
// cross-entropy (all-reduces of max, sum-exp and target logit; the logits are never
// gathered). The final LayerNorm lnf was written by the last layer, fused with its residual
// add (block_forward). Adds the sum of token losses to g->loss_acc. dloss > 0 (training):
// the logits turn into dlogits = dloss * dL/dlogits.
// The head GEMMs run on all Vl rows of the slice, padding included, so cuBLASLt gets the
// aligned, tile-friendly m = Vl (the padded vocabulary is a multiple of -vpad) instead of the
// odd real count Vv: the padded rows of the tied embedding are zero, so their logits are 0,
// the cross-entropy leaves them out of the softmax and writes their dlogits as exactly 0,
// and so the padded rows' gradient stays exactly 0 and the real columns' numbers are those
// of the GEMMs on Vv (the extra products are zeros).
static void head_forward(GPT* g, DevComm* dc, Acts* a, float dloss) {
    int BT = g->B * g->T, BTs = g->B * g->Ts, C = g->C, Vv = g->Vv;
    cudaStream_t s = g->stream;
    bf16* xL = a->x + (size_t)g->nlc * BTs * C;
    if (g->nlc == 0) layernorm_forward(a->lnf, a->lnf_mean, a->lnf_rstd, xL, P(PT_LNFW, 0), P(PT_LNFB, 0), BTs, C, s);
    // (BT, Vl), row stride ldl; -sp: every TP rank's logits cover all T rows of its vocab slice
    matmul_forward(&g->gemm, a->logits, g->ldl, gather_seq(g, dc, a->lnf, g->gat), P(PT_WTE, 0), NULL, BT, C, g->Vl);
    if (g->pl.TP == 1 && ce_fused_fits(g->ldl)) {
        // one pass over the logits: statistics, loss and (training) dlogits in place
        ce_fused(a->logits, g->ldl, a->losses, a->lse, a->targets, BT, Vv, dloss, s);
    } else {
        // the row's statistics need every TP rank's slice: one pass for the local ones, their
        // all-reduce (vectors of BT floats), one pass for the loss and dlogits (crossentropy.cuh)
        float* mloc = a->ce;
        float* mglob = a->ce + BT;
        float* se = a->ce + 2 * (size_t)BT;
        float* tl = a->ce + 3 * (size_t)BT;
        ce_stats(mloc, se, tl, a->logits, g->ldl, a->targets, BT, Vv, g->v0, s);
        const float* mx = mloc;
        if (g->pl.TP > 1) {
            cudaCheck(cudaMemcpyAsync(mglob, mloc, sizeof(float) * BT, cudaMemcpyDeviceToDevice, s));
            dc_tp_allreduce_f32(dc, mglob, BT, 1);
            ce_rescale(se, mloc, mglob, BT, s);
            dc_tp_allreduce_f32(dc, se, 2 * (size_t)BT, 0); // sum-exp and target logit together
            mx = mglob;
        }
        if (dloss > 0.0f)
            ce_backward(a->logits, g->ldl, a->losses, a->lse, mx, se, tl, a->targets, BT, Vv, g->v0, dloss, s);
        else
            ce_finish(a->losses, a->lse, mx, se, tl, BT, s);
    }
    ce_loss_sum(g->loss_acc, a->losses, BT, s);
}

// The tied LM head's weight gradient from the kept dlogits and final LayerNorm output.
static void head_weight(GPT* g, DevComm* dc, Acts* a) {
    matmul_backward_weight(&g->gemm, G(PT_WTE, 0), a->logits, g->ldl, gather_seq(g, dc, a->lnf, g->gat), g->B * g->T,
                           g->C, g->Vl);
}

// Writes dL/dx[nl] into dx (the logits buffer holds dlogits from the training forward).
static void head_backward(GPT* g, DevComm* dc, Acts* a, bf16* dx) {
    int BT = g->B * g->T, BTs = g->B * g->Ts, C = g->C, Vl = g->Vl;
    bf16* xL = a->x + (size_t)g->nlc * BTs * C;
    // on the padded slice (head_forward): the padded dlogits are 0, so is their rows' gradient
    matmul_backward_input(&g->gemm, g->dtmp, a->logits, g->ldl, P(PT_WTE, 0), BT, C, Vl);
    head_weight(g, dc, a);
    bf16* dlnf = reduce_seq(g, dc, g->dtmp, g->fsh);
    layernorm_backward(dx, NULL, G(PT_LNFW, 0), G(PT_LNFB, 0), dlnf, xL, P(PT_LNFW, 0), a->lnf_mean, a->lnf_rstd, BTs,
                       C, g->red, g->red_n, g->stream);
}

// ---------------------------------------------------------------------------------------
// -zero 3: a layer's weights gathered into a window (llmc/cuda/zero.cuh's zd_gather) before its
// forward and its backward, the next layer's gather started while it computes

// the compute stream waits for window w's gather before it reads the weights
static void z3_wait(GPT* g, int w) { zd_use(&g->zd, g->wdone[w]); }
static void z3_gather(GPT* g, int l, int w) {
    ZeroBucket b;
    zero_layer_bucket(&g->pl, l, ZB_ALL, 0, &b);
    zd_gather(&g->zd, &b, g->pshard, g->pwin[w], g->wdone[w]);
    g->win_l[w] = l;
}
// The weights of local layer l in a window: its prefetch, or a gather now. A layer in use is
// never replaced: at most two are held, the one computing and the next (z3_prefetch).
static void z3_need(GPT* g, int l) {
    if (g->zero < 3) return;
    int w = g->win_l[0] == l ? 0 : (g->win_l[1] == l ? 1 : -1);
    if (w < 0) {
        w = g->win_l[0] < 0 ? 0 : (g->win_l[1] < 0 ? 1 : 0);
        z3_gather(g, l, w);
    }
    z3_wait(g, w);
}
// ... and starts gathering layer l into the other window while layer cur computes
static void z3_prefetch(GPT* g, int l, int cur) {
    if (g->zero < 3 || g->win_l[0] == l || g->win_l[1] == l) return;
    z3_gather(g, l, g->win_l[0] == cur ? 1 : 0);
}
static void z3_release(GPT* g, int l) {
    for (int w = 0; w < 2 && g->zero >= 3; w++)
        if (g->win_l[w] == l) g->win_l[w] = -1;
}
// After the update: the rest's bf16 weights (embeddings, final LayerNorm) whole again from
// their owners' shards; the compute stream waits for them
static void z3_rest_gather(GPT* g) {
    ZeroBucket rb;
    zero_rest_bucket(&g->pl, 0, &rb);
    zd_gather(&g->zd, &rb, g->pshard, g->prest, g->wdone[0]);
    z3_wait(g, 0);
    g->win_l[0] = g->win_l[1] = -1;
}

// ---------------------------------------------------------------------------------------
// -zero 2/3: each micro-batch's gradients of a layer reduced into the owners' shards as soon as
// the backward has made them (zero.h), from one of two scratches: the backward writes one while
// the other's reduction runs on the reduction stream. zb-h1's B makes a layer's LayerNorm and
// fc1 bias gradients (ZB_B_MASK), its W the weight matrices and the biases their GEMMs'
// epilogues give: each part is a bucket of its own.

#define LAYER_MASK (((1u << (PT_FCPROJB + 1)) - 1) & ~((1u << PT_LN1W) - 1))
#define ZB_B_MASK ((1u << PT_LN1W) | (1u << PT_LN1B) | (1u << PT_LN2W) | (1u << PT_LN2B) | (1u << PT_FCB))
#define ZB_W_MASK (LAYER_MASK & ~ZB_B_MASK)

// Before a layer's gradients (the tensors of mask) are made: the scratch they go to is free
// (its last reduction has run) and zero where they go (the GEMMs and kernels add).
static void zero_bucket_begin(GPT* g, unsigned mask) {
    if (g->zero < 2) return;
    float* sc = g->glayer[g->gcur];
    if (g->gfree_set[g->gcur]) cudaCheck(cudaStreamWaitEvent(g->stream, g->gfree[g->gcur], 0));
    if (mask == LAYER_MASK) {
        cudaCheck(cudaMemsetAsync(sc, 0, sizeof(float) * g->nlayer_el, g->stream));
        return;
    }
    for (int t = 0; t < NUM_PARAM_TENSORS; t++)
        if (mask >> t & 1u)
            cudaCheck(cudaMemsetAsync(sc + g->loff[t], 0, sizeof(float) * g->pl.rows[t] * g->pl.cols[t], g->stream));
}

// The ranges of bucket b (laid out in buf) this rank counts in the global norm (grad_norm_ranges'
// rule), relative to buf
static RangeList bucket_norm_ranges(const GPT* g, const ZeroBucket* b) {
    RangeList r;
    memset(&r, 0, sizeof(r));
    for (int s = 0; s < b->nseg; s++) {
        int t = 0;
        for (int u = 0; u < NUM_PARAM_TENSORS; u++) // the tensor holding the segment
            if (g->pl.numel[u] > 0 && b->flat[s] >= g->pl.offset[u] && b->flat[s] < g->pl.offset[u] + g->pl.numel[u])
                t = u;
        if (PARAM_INFO[t].split == SPLIT_NONE && g->pl.tp != 0) continue;
        if (t == PT_WTE && g->pl.PP > 1 && !is_first_stage(g)) continue;
        r.lo[r.n] = b->loc[s];
        r.hi[r.n] = b->loc[s] + b->n[s];
        r.n++;
    }
    return r;
}
// gn_pre[slot] = the squared norm of bucket b in buf before its reduction (the noise scale's
// |G_small|^2, one micro-batch per step only)
static void bucket_sumsq(GPT* g, const ZeroBucket* b, const float* buf, int slot) {
    RangeList r = bucket_norm_ranges(g, b);
    if (r.n > 0)
        sumsq(g->gn_pre + slot, g->gn + 2, buf, &r, g->stream);
    else
        cudaCheck(cudaMemsetAsync(g->gn_pre + slot, 0, sizeof(double), g->stream));
}

// After them: this micro-batch's gradients of layer l (mask) from the scratch into the owners'
// shards (with -sp the LayerNorms' first summed over TP, as sp_reduce_ln_grads does for the
// whole buffer); the next layer's go to the other scratch.
static void zero_bucket_reduce(GPT* g, DevComm* dc, int l, unsigned mask) {
    static const int LN[] = {PT_LN1W, PT_LN1B, PT_LN2W, PT_LN2B};
    if (g->zero < 2) return;
    float* sc = g->glayer[g->gcur];
    for (int i = 0; i < 4 && g->sp; i++)
        if (mask >> LN[i] & 1u)
            dc_tp_allreduce_f32(dc, sc + g->loff[LN[i]], (size_t)g->pl.rows[LN[i]] * g->pl.cols[LN[i]], 0);
    ZeroBucket b;
    zero_layer_bucket_mask(&g->pl, l, mask, 0, &b);
    if (g->sq_on) bucket_sumsq(g, &b, sc, mask == ZB_W_MASK ? g->pl.nlayers + 1 + l : l);
    zd_reduce(&g->zd, &b, sc, g->gshard, g->gstage, g->gfree[g->gcur]);
    g->gfree_set[g->gcur] = 1;
    g->gcur ^= 1;
}

// Forward of chunk c of this rank for the unit in slot a (inputs/targets already loaded).
// The first virtual stage embeds; others expect x[0] filled from the previous one. On the
// last virtual stage the token losses are added to g->loss_acc; dloss > 0 prepares the backward.
// NVTX ranges (profilers only): "fwd L<l>", "bwd L<l>", "wgt L<l>" per layer l of this rank's chunks
static void gpt_forward(GPT* g, DevComm* dc, Acts* a, int c, float dloss) {
    if (is_first_chunk(g, c)) embedding_forward(g, dc, a->x, a);
    for (int j = 0; j < g->nlc; j++) {
        int l = c * g->nlc + j;
        z3_need(g, l);
        if (j + 1 < g->nlc) z3_prefetch(g, l + 1, l);
        nvtx_push("fwd L%d", l);
        block_forward(g, dc, a, c, j, 0);
        nvtx_pop();
        z3_release(g, l);
    }
    if (is_last_chunk(g, c)) {
        nvtx_push("head fwd");
        head_forward(g, dc, a, dloss);
        nvtx_pop();
    }
}

// Backward of chunk c. On the last virtual stage the head starts it (after a training
// forward); elsewhere dx must hold dL/d(chunk output). Leaves dL/d(chunk input) in dx;
// gradients accumulate (fp32).
static void dp_bucket_launch(GPT* g, DevComm* dc, int l);

// last: this is chunk c's last backward of the step, so each layer's gradients are final
// once its backward has run: with overlap its DP reduction starts then (dp_bucket_launch).
// ws: zb-h1's B (weight gradients left to gpt_weight; no bucket is final yet), or NULL.
// -zero 2/3: each layer's gradients of this micro-batch (zb-h1's B: its B part) are reduced
// after its backward (zero_bucket_reduce); -zero 3 gathers each layer's weights (the next
// layer's while it computes).
static void gpt_backward(GPT* g, DevComm* dc, Acts* a, int c, bf16* dx, int last, bf16* ws) {
    if (is_last_chunk(g, c)) {
        nvtx_push("head bwd");
        head_backward(g, dc, a, dx);
        nvtx_pop();
    }
    for (int j = g->nlc - 1; j >= 0; j--) {
        int l = c * g->nlc + j;
        z3_need(g, l);
        if (j > 0) z3_prefetch(g, l - 1, l);
        nvtx_push("bwd L%d", l);
        if (g->cfg.recompute == RECOMPUTE_FULL) block_forward(g, dc, a, c, j, 1); // rebuild this layer's activations
        zero_bucket_begin(g, ws ? ZB_B_MASK : LAYER_MASK);
        block_backward(g, dc, a, j, l, dx, ws);
        zero_bucket_reduce(g, dc, l, ws ? ZB_B_MASK : LAYER_MASK);
        nvtx_pop();
        z3_release(g, l);
        if (last && g->overlap && ws == NULL && g->zero < 2) dp_bucket_launch(g, dc, l);
    }
    if (is_first_chunk(g, c))
        encoder_backward(G(PT_WTE, 0), G(PT_WPE, 0), gather_seq(g, dc, dx, g->gdout), a->d_uniq, a->d_off, a->d_pos,
                         a->hb.nu, g->d_tpos, g->B, g->T, g->C, g->stream);
}

// zb-h1's W of chunk c (the unit's stash ws). last: the chunk's last W of the step, after
// which each layer's gradients are final (B ran first): with overlap its DP reduction starts.
static void gpt_weight(GPT* g, DevComm* dc, int c, bf16* ws, int last) {
    for (int j = g->nlc - 1; j >= 0; j--) {
        nvtx_push("wgt L%d", c * g->nlc + j);
        zero_bucket_begin(g, ZB_W_MASK);
        block_weight(g, dc, c, j, ws);
        zero_bucket_reduce(g, dc, c * g->nlc + j, ZB_W_MASK); // -zero 2/3: the W part's bucket
        nvtx_pop();
        if (last && g->overlap && g->zero < 2) dp_bucket_launch(g, dc, c * g->nlc + j);
    }
}

// The flat ranges this rank counts in the squared global norm, within [lo, hi): every
// unique parameter once (TP-replicated tensors on TP rank 0, the tied embedding on the
// first stage only), as train_gpt.c's gpt_grad_sumsq. Offsets relative to lo.
static RangeList grad_norm_ranges(const GPT* g, size_t lo, size_t hi) {
    RangeList r;
    memset(&r, 0, sizeof(r));
    for (int t = 0; t < NUM_PARAM_TENSORS; t++) {
        if (PARAM_INFO[t].split == SPLIT_NONE && g->pl.tp != 0) continue;
        if (t == PT_WTE && g->pl.PP > 1 && !is_first_stage(g)) continue;
        size_t a = g->pl.offset[t], b = a + g->pl.numel[t];
        if (a < lo) a = lo;
        if (b > hi) b = hi;
        if (a >= b) continue;
        r.lo[r.n] = a - lo;
        r.hi[r.n] = b - lo;
        r.n++;
    }
    return r;
}

// Sum of squared gradients (fp64) of grads (element i = flat element lo + i) over [lo, hi)
// into g->gn[slot] on the device; the host reads it later with the step's other statistics.
static void gpt_grad_sumsq(GPT* g, const float* grads, size_t lo, size_t hi, int slot) {
    RangeList r = grad_norm_ranges(g, lo, hi);
    if (r.n == 0) {
        cudaCheck(cudaMemsetAsync(g->gn + slot, 0, sizeof(double), g->stream));
        return;
    }
    sumsq(g->gn + slot, g->gn + 2, grads, &r, g->stream);
}

// ---------------------------------------------------------------------------------------
// Overlapped data-parallel reduction (-comm nccl, DP > 1). A bucket is one local layer's
// gradients (its per-layer slices of the twelve layer tensors; with -sp the LayerNorm ones
// wait for their TP sum at the end), reduced on the communication stream as soon as the
// layer's last backward of the step has run, while the backward of the layers below goes on.
// The last bucket (embeddings, final LayerNorm, and the LayerNorms with -sp) follows the
// embedding all-reduce. Each element is reduced once, by the same NCCL sum as without
// buckets, so only NCCL's own order could differ (the emulation's is the same: identical).

// the per-layer tensors are the enum's run PT_LN1W .. PT_FCPROJB (llmc/host/params.h); with -sp
// the LayerNorm ones among them go in the last bucket, after their TP sum
static int in_layer_bucket(const GPT* g, int t) { return mem_cuda_in_layer_bucket(t, 1, g->sp); }

// flat ranges of bucket l (a local layer), or of the last bucket (l < 0)
static int bucket_ranges(const GPT* g, int l, size_t* lo, size_t* hi) {
    int n = 0;
    for (int t = 0; t < NUM_PARAM_TENSORS; t++) {
        if (l >= 0 && in_layer_bucket(g, t)) { // this layer's slice
            size_t per = (size_t)g->pl.rows[t] * g->pl.cols[t];
            lo[n] = g->pl.offset[t] + (size_t)l * per;
            hi[n] = lo[n] + per;
            n++;
        } else if (l < 0 && !in_layer_bucket(g, t) && g->pl.numel[t] > 0) { // the whole tensor
            lo[n] = g->pl.offset[t];
            hi[n] = lo[n] + g->pl.numel[t];
            n++;
        }
    }
    return n;
}

// The flat ranges [lo[i], hi[i]) (in flat order) as a zero.h bucket located in the flat buffer
static ZeroBucket flat_bucket(const size_t* lo, const size_t* hi, int n) {
    ZeroBucket b;
    memset(&b, 0, sizeof(b));
    for (int i = 0; i < n; i++) {
        b.flat[i] = b.loc[i] = lo[i];
        b.n[i] = hi[i] - lo[i];
        b.numel += b.n[i];
    }
    b.nseg = n;
    return b;
}

// Bucket l (l < 0: the last one): its squared norm before the reduction into gn_pre (the
// noise scale needs each replica's), then its reduction on the communication stream.
static void dp_bucket_launch(GPT* g, DevComm* dc, int l) {
    size_t lo[NUM_PARAM_TENSORS], hi[NUM_PARAM_TENSORS];
    int n = bucket_ranges(g, l, lo, hi);
    double* slot = g->gn_pre + (l >= 0 ? l : g->pl.nlayers);
    RangeList r;
    memset(&r, 0, sizeof(r));
    for (int i = 0; i < n; i++) {
        RangeList p = grad_norm_ranges(g, lo[i], hi[i]);
        for (int k = 0; k < p.n; k++) {
            r.lo[r.n] = lo[i] + p.lo[k];
            r.hi[r.n] = lo[i] + p.hi[k];
            r.n++;
        }
    }
    if (r.n > 0)
        sumsq(slot, g->gn + 2, g->grads, &r, g->stream);
    else
        cudaCheck(cudaMemsetAsync(slot, 0, sizeof(double), g->stream));
    if (g->grad_bf16) { // ZeRO-1 with -grad-reduce bf16: zero.cuh's reduction into the shard
        ZeroBucket b = flat_bucket(lo, hi, n);
        zd_reduce(&g->zd, &b, g->grads, g->gshard, g->gstage, NULL);
    } else
        dc_dp_bucket_f32(dc, g->grads, lo, hi, n, g->total_pad / dc->host->DPC, g->cfg.zero);
    g->nbuckets++;
}

// The last bucket, then the compute stream waits for all of them; gn[0] = this replica's
// squared norm before the reduction (the buckets' in a fixed order).
static void dp_buckets_finish(GPT* g, DevComm* dc) {
    dp_bucket_launch(g, dc, -1);
    if (g->nbuckets != g->pl.nlayers + 1)
        die("internal: %d DP buckets reduced this step, expected %d (one per local layer and the rest)", g->nbuckets,
            g->pl.nlayers + 1);
    g->nbuckets = 0;
    if (g->grad_bf16)
        zd_finish(&g->zd, g->gshard);
    else
        dc_dp_bucket_join(dc);
    LAUNCH(sumsq_finish_kernel, 1, 256, 0, g->stream, g->gn, (const double*)g->gn_pre, g->pl.nlayers + 1);
}

// AdamW on flat elements [opt_off, opt_off + n_opt): master weights (index i - opt_off),
// the bf16 copy (index i), gradients grads[i - opt_off] pre-scaled by gscale. Per tensor,
// because weight decay applies to matrices and embeddings only.
static void gpt_adamw(GPT* g, const float* grads, double lr, int64_t t, float gscale) {
    const Config* c = &g->cfg;
    float b1 = (float)c->beta1, b2 = (float)c->beta2, eps = (float)c->eps;
    float bc1 = (float)(1.0 - pow(c->beta1, (double)t)), bc2 = (float)(1.0 - pow(c->beta2, (double)t));
    size_t lo = g->opt_off, hi = g->opt_off + g->n_opt;
    for (int tn = 0; tn < NUM_PARAM_TENSORS; tn++) {
        size_t a = g->pl.offset[tn], b = a + g->pl.numel[tn];
        if (a < lo) a = lo;
        if (b > hi) b = hi;
        if (a >= b) continue;
        float wd = PARAM_INFO[tn].decay ? (float)c->wd : 0.0f;
        bf16* pb = g->zero >= 3 ? g->pshard + (a - lo) : g->params + a; // -zero 3: the shard's bf16
        adamw_update(g->master + (a - lo), pb, grads + (a - lo), g->m + (a - lo), g->v + (a - lo), b - a, (float)lr, b1,
                     b2, bc1, bc2, eps, wd, gscale, g->stream);
    }
}

#undef P
#undef G

// ----------------------------------------------------------------------------------------
// training context

typedef struct {
    Run run; // recipe progress, data, log and instruments, shared with the CPU trainer (llmc/host/run.h)
    DevComm dc;
    GPT model;
    double peak_tflops; // bf16 dense peak of this device (0: unknown)
    char device[256];
    char bus[32]; // PCI bus id of this rank's GPU
    cudaStream_t stream;
    int64_t profile_step; // LLMC_PROFILE_STEP=N: only step N runs inside cudaProfilerStart/Stop
    int reported;         // the GEMM report (fused epilogues, algorithms) is printed after the first step
    // -ckpt-async 1: the staging copies run on ck_stream after ck_ready (the optimizer step);
    // ck_weights after the weights' copy, ck_copied after all of them
    cudaStream_t ck_stream;
    cudaEvent_t ck_ready, ck_weights, ck_copied;
    int ck_pending; // the next AdamW update waits for ck_copied
} Train;

// Uploads a micro-batch's tokens (and on the first stage the embedding buckets).
static void acts_upload_tokens(GPT* g, Acts* a) {
    int BT = g->B * g->T;
    cudaStream_t s = g->stream;
    cudaCheck(cudaMemcpyAsync(a->inputs, a->h_inputs, sizeof(int) * BT, cudaMemcpyHostToDevice, s));
    cudaCheck(cudaMemcpyAsync(a->targets, a->h_targets, sizeof(int) * BT, cudaMemcpyHostToDevice, s));
    if (is_first_stage(g)) {
        embed_buckets_build(&a->hb, a->h_inputs, BT, g->v0, g->Vl, g->h_work);
        if (a->hb.nu > 0) {
            cudaCheck(cudaMemcpyAsync(a->d_uniq, a->hb.uniq, sizeof(int) * a->hb.nu, cudaMemcpyHostToDevice, s));
            cudaCheck(cudaMemcpyAsync(a->d_off, a->hb.off, sizeof(int) * (a->hb.nu + 1), cudaMemcpyHostToDevice, s));
            cudaCheck(
                cudaMemcpyAsync(a->d_pos, a->hb.pos, sizeof(int) * a->hb.off[a->hb.nu], cudaMemcpyHostToDevice, s));
        }
    }
    cudaCheck(cudaEventRecord(a->uploaded, s));
}

// Before the host rewrites a slot's pinned arrays: their last uploads must have run (the
// copy engine reads them when it gets there). tests/cuemu/test_upload_guard.sh runs a build
// without this wait and expects the emulation to report the race.
static void acts_host_claim(DevComm* dc, Acts* a) { dc_wait_event(dc, a->uploaded); }

// Runs this rank's part of m micro-batches through the pipeline: 1F1B, or interleaved 1F1B
// with -vpp (llmc/host/layout.h; forward_only: the evaluation schedule). load(k) fills the host
// inputs/targets of micro-batch k where the first or last virtual stage needs them.
// With NCCL each message goes on its own link's stream (nccl_comm.cuh's overlapped pipeline:
// a send waits for the compute so far, a receive for its buffer, the compute for a buffer's
// transfer only before it touches the buffer), so a stage computes while its activations
// travel; LLMC_PP_OVERLAP=0 posts the communication actions that are adjacent in the list as
// one NCCL group on the compute stream instead, so blocking point-to-point never deadlocks
// in 1F1B. The plain interleaved list needs sends that never wait for their receiver (-comm
// mpi: comm.h's send ring); NCCL's do wait, so with NCCL the interleaved list is phased
// (pipeline_plan), which also gives both ends of each link one order.
// tests/cuda/test_pp_groups.cu simulates every layout, both ways.
typedef void (*LoadFn)(Train* t, Acts* a, int k, void* user);

static int is_comm_action(ActionKind k) { return !action_computes(k); }

// The activation slot of unit (chunk c, micro-batch k): 1F1B uses k % PP; interleaved
// units take the lowest free slot on first touch and give it back after their backward
// (pipe_slots bounds how many are held at once), as in train_gpt.c.
static Acts* unit_slot(GPT* g, int c, int k) {
    if (g->nchunk == 1) return &g->acts[k % g->nslots];
    int unit = k * g->nchunk + c, free_slot = -1;
    for (int s = 0; s < g->nslots; s++) {
        if (g->slot_unit[s] == unit) return &g->acts[s];
        if (g->slot_unit[s] < 0 && free_slot < 0) free_slot = s;
    }
    if (free_slot < 0) die("internal: more pipeline units in flight than activation slots (%d)", g->nslots);
    g->slot_unit[free_slot] = unit;
    return &g->acts[free_slot];
}
static void unit_release(GPT* g, int c, int k) {
    for (int s = 0; s < g->nslots && g->nchunk > 1; s++)
        if (g->slot_unit[s] == k * g->nchunk + c) g->slot_unit[s] = -1;
}

// The gradient buffer of unit (c, k). 1F1B: alternates with the micro-batch, so the send of
// one unit's input gradient and the receive of the next never share a buffer. Interleaved:
// the pool's buffer for the unit, taken on first touch and given back when the group that
// sends it has ended (pool_release, pool_group_end), so no group reads and writes one buffer.
static int unit_dgrad_index(GPT* g, int c, int k) {
    if (g->nchunk == 1) return k % 2;
    int i = pool_get(&g->dgrad_pool, k * g->nchunk + c);
    if (i < 0) die("internal: more pipeline units hold gradients than gradient buffers (%d)", g->ndgrad);
    return i;
}
// zb-h1: the W stash of unit (c, k), taken at its B and given back after its W
static bf16* unit_stash(GPT* g, int c, int k) {
    int i = pool_get(&g->wpool, k * g->nchunk + c);
    if (i < 0 || i >= g->nstash) die("internal: more units wait for their W than W stashes (%d)", g->nstash);
    return g->wstash[i];
}
// the overlapped pipeline's events of a slot and of gradient buffer i
static PpBuf* slot_buf(GPT* g, const Acts* a) { return &g->ppbuf[a - g->acts]; }
static PpBuf* dgrad_buf(GPT* g, int i) { return &g->ppbuf[g->nslots + i]; }

// Interleaved with NCCL, whose sends wait for their receiver: the phased list (llmc/host/layout.h,
// a group per phase); otherwise the plain list (a group per run of adjacent comm actions).
static Action* pipeline_plan(const GPT* g, const DevComm* dc, int stage, int PP, int m, int forward_only, int** phase,
                             int* n) {
    *phase = NULL;
    if (g->nchunk > 1 && dc->nccl) return pipe_phased(g->zb, stage, PP, g->nchunk, m, forward_only, phase, n);
    return pipe_schedule(g->zb, stage, PP, g->nchunk, m, forward_only, n);
}

static void pipe_execute(Train* t, int m, int forward_only, float dloss, LoadFn load, void* user) {
    GPT* g = &t->model;
    DevComm* dc = &t->dc;
    Comm* comm = &t->run.comm;
    size_t nact = (size_t)g->B * g->Ts * g->C; // with -sp only this rank's sequence shard travels
    int *release = (int*)malloc_check(sizeof(int) * (g->nslots + 1)), nrel = 0; // slots freed by a group's sends
    int* last_bw = (int*)malloc_check(sizeof(int) * g->nchunk); // each chunk's last backward in the list
    int n, *phase;
    Action* plan = pipeline_plan(g, dc, comm->pp, comm->PP, m, forward_only, &phase, &n);
    if (plan == NULL) die("out of memory for the pipeline schedule");
    for (int c = 0; c < g->nchunk; c++) last_bw[c] = -1;
    for (int i = 0; i < n; i++) // zb-h1: a chunk's gradients are final after its last W
        if (plan[i].kind == (g->zb ? ACT_WEIGHT : ACT_BACKWARD)) last_bw[plan[i].chunk] = i;
    int ov = dc->pp_overlap; // each message on its link's stream (nccl_comm.cuh), else one group per run
    dc_pp_begin(dc, g->ppbuf, g->nslots + g->ndgrad);
    for (int i = 0; i < n;) {
        if (is_comm_action(plan[i].kind)) {
            if (!ov) dc_group_begin(dc);
            for (int first = i; i < n && is_comm_action(plan[i].kind) && (phase == NULL || phase[i] == phase[first]);
                 i++) {
                int k = plan[i].micro, c = plan[i].chunk, peer, tag;
                comm->trace.micro = k; // the watchdog's report says which micro-batch a rank waits in
                pipe_peer(&plan[i], comm->pp, comm->PP, g->nchunk, &peer, &tag);
                switch (plan[i].kind) {
                    case ACT_RECV_ACT: {
                        Acts* a = unit_slot(g, c, k);
                        dc_pp_recv_bf16(dc, slot_buf(g, a), a->x, nact, peer, tag);
                        break;
                    }
                    case ACT_SEND_ACT: {
                        Acts* a = unit_slot(g, c, k);
                        dc_pp_send_bf16(dc, slot_buf(g, a), a->x + (size_t)g->nlc * nact, nact, peer, tag);
                        // grouped: later work on the slot is stream-ordered after the group; overlapped:
                        // the slot's next receive and compute wait for this send (its PpBuf)
                        if (forward_only) release[nrel++] = k * g->nchunk + c;
                        break;
                    }
                    case ACT_RECV_GRAD: {
                        int d = unit_dgrad_index(g, c, k);
                        dc_pp_recv_bf16(dc, dgrad_buf(g, d), g->dgrad[d], nact, peer, tag);
                        break;
                    }
                    case ACT_SEND_GRAD: {
                        int d = unit_dgrad_index(g, c, k);
                        dc_pp_send_bf16(dc, dgrad_buf(g, d), g->dgrad[d], nact, peer, tag);
                        if (g->nchunk > 1) pool_release(&g->dgrad_pool, k * g->nchunk + c, 1);
                        break;
                    }
                    default:
                        break;
                }
            }
            if (!ov) dc_group_end(dc);
            // buffers given back inside the group are free once it has ended (overlapped: the
            // same bookkeeping, so every unit gets the same buffers; the events order the reuse)
            for (int r = 0; r < nrel; r++) unit_release(g, release[r] % g->nchunk, release[r] / g->nchunk);
            nrel = 0;
            if (g->nchunk > 1) pool_group_end(&g->dgrad_pool);
            continue;
        }
        int k = plan[i].micro, c = plan[i].chunk;
        comm->trace.micro = k;
        if (plan[i].kind == ACT_WEIGHT) { // zb-h1: reads its stash only (compute stream order), frees it
            gpt_weight(g, dc, c, unit_stash(g, c, k), i == last_bw[c]);
            pool_release(&g->wpool, k * g->nchunk + c, 0);
            i++;
            continue;
        }
        Acts* a = unit_slot(g, c, k);
        PpBuf* sb = slot_buf(g, a);
        dc_pp_acquire(dc, sb); // overlapped: a receive into the slot has arrived, a send from it is done
        if (plan[i].kind == ACT_FORWARD) {
            if (is_first_chunk(g, c) || is_last_chunk(g, c)) {
                acts_host_claim(dc, a);
                load(t, a, k, user);
                acts_upload_tokens(g, a);
            }
            gpt_forward(g, dc, a, c, forward_only ? 0.0f : dloss);
            dc_pp_used(dc, sb);
            if (forward_only && is_last_chunk(g, c)) unit_release(g, c, k);
        } else {
            int d = unit_dgrad_index(g, c, k);
            dc_pp_acquire(dc, dgrad_buf(g, d));
            gpt_backward(g, dc, a, c, g->dgrad[d], i == last_bw[c], g->zb ? unit_stash(g, c, k) : NULL);
            dc_pp_used(dc, sb);
            dc_pp_used(dc, dgrad_buf(g, d));
            unit_release(g, c, k);
            if (g->nchunk > 1 && grad_frees_now(&plan[i], comm->pp, comm->PP))
                pool_release(&g->dgrad_pool, k * g->nchunk + c, 0);
        }
        i++;
    }
    comm->trace.micro = -1;
    dc_pp_end(dc); // the compute stream waits for the last transfers
    dc_pp_flush(dc);
    free(plan);
    free(phase);
    free(release);
    free(last_bw);
}

typedef struct {
    int64_t first;
    int64_t gb;
    DataSet* ds;
} BatchRef;

// -cp > 1: this rank's rows (g->tpos) of a micro-batch's (B, Tfull) tokens
static void cp_take_rows(const GPT* g, int* dst, const int* full) {
    for (int b = 0; b < g->B; b++)
        for (int t = 0; t < g->T; t++) dst[b * g->T + t] = full[(size_t)b * g->Tfull + g->tpos[t]];
}

// the samples of the data-parallel replica (every CP rank of it reads them, and takes its rows)
static void load_train_micro(Train* t, Acts* a, int k, void* user) {
    const BatchRef* br = (const BatchRef*)user;
    GPT* g = &t->model;
    int64_t first = microbatch_first_sample(br->first, br->gb, t->run.comm.DP, t->run.comm.dp, t->run.cfg.mb, k);
    if (g->CP == 1) {
        dataset_load_microbatch(br->ds, first, t->run.cfg.mb, a->h_inputs, a->h_targets);
        return;
    }
    dataset_load_microbatch(br->ds, first, t->run.cfg.mb, g->in_full, g->tg_full);
    cp_take_rows(g, a->h_inputs, g->in_full);
    cp_take_rows(g, a->h_targets, g->tg_full);
}

// the sum of token losses this rank accumulated on the device since the last reset
static double read_loss_sum(GPT* g, DevComm* dc) {
    cudaCheck(cudaMemcpyAsync(g->h_stats, g->loss_acc, sizeof(double), cudaMemcpyDeviceToHost, g->stream));
    dc_wait_stream(dc, g->stream);
    return g->h_stats[0];
}

// -sp: the LayerNorm gradients of each rank cover its sequence shard only; sum them over TP
// (-zero 2/3: a layer's were summed with its bucket, zero_bucket_reduce)
static void sp_reduce_ln_grads(GPT* g, DevComm* dc) {
    static const int LN[] = {PT_LN1W, PT_LN1B, PT_LN2W, PT_LN2B, PT_LNFW, PT_LNFB};
    if (!g->sp) return;
    for (int i = 0; i < 6; i++)
        if (g->zero < 2 || !zero_layered(LN[i])) dc_tp_allreduce_f32(dc, gpt_grad(g, LN[i], 0), g->pl.numel[LN[i]], 0);
}

// -zero 2/3 after the pipeline: the rest's bucket (embeddings, final LayerNorm: accumulated over
// the step) reduced as the layers' were, then the compute stream waits for every reduction;
// with one micro-batch per step gn[0] = this replica's squared norm before the reduction.
static void zero_rest_reduce(GPT* g) {
    ZeroBucket rb;
    zero_rest_bucket(&g->pl, 0, &rb);
    if (g->sq_on) bucket_sumsq(g, &rb, g->grest, g->pl.nlayers);
    zd_reduce(&g->zd, &rb, g->grest, g->gshard, g->gstage, NULL);
    zd_finish(&g->zd, g->gshard);
    if (g->sq_on)
        LAUNCH(sumsq_finish_kernel, 1, 256, 0, g->stream, g->gn, (const double*)g->gn_pre, 2 * g->pl.nlayers + 1);
}

// ZeRO-1 with -grad-reduce bf16 without the overlap: every bucket now, as the overlap's
static void zero1_bf16_reduce(GPT* g) {
    size_t lo[NUM_PARAM_TENSORS], hi[NUM_PARAM_TENSORS];
    for (int l = -1; l < g->pl.nlayers; l++) {
        int n = bucket_ranges(g, l, lo, hi);
        ZeroBucket b = flat_bucket(lo, hi, n);
        zd_reduce(&g->zd, &b, g->grads, g->gshard, g->gstage, NULL);
    }
    zd_finish(&g->zd, g->gshard);
}

// One optimizer step on the global batch starting at run sample t->run.samples:
// micro-batches through the pipeline, gradient reductions (tied embedding over the
// embedding group, then data parallel: all-reduce, or reduce-scatter into this rank's
// shard under ZeRO-1, or -zero 2/3 each layer's per micro-batch during the backward and the
// rest's after it; loss scaling already divides by the global batch, so all sum; fp32, or
// bf16 over DP with -grad-reduce bf16), noise scale, global norm, spike guard, clipping,
// AdamW (on the shard), all-gather of the bf16 weights (-zero 3: of the rest only). The same
// sequence as train_gpt.c's train_step.
static StepResult train_step(Train* t) {
    GPT* g = &t->model;
    Comm* comm = &t->run.comm;
    DevComm* dc = &t->dc;
    const Config* c = &t->run.cfg;
    StepResult r = run_step_plan(&t->run); // batch, LR, micro-batches from the recipe
    int profiled = t->profile_step == t->run.step + 1;
    if (profiled) cudaCheck(cudaProfilerStart()); // ncu --profile-from-start off sees this step alone
    // NVTX: the step, and in it each layer's work, "grad sync" and "optimizer" (profilers only)
    nvtx_push("step %lld", (long long)t->run.step + 1);
    long syncs0 = dc->host_syncs;
    float dloss = (float)(1.0 / ((double)r.gb * c->seq));
    if (g->grads) cudaCheck(cudaMemsetAsync(g->grads, 0, sizeof(float) * g->total_pad, g->stream));
    if (g->zero >= 2) {
        cudaCheck(cudaMemsetAsync(g->grest, 0, sizeof(float) * g->nrest_el, g->stream));
        cudaCheck(cudaMemsetAsync(g->gn_pre, 0, sizeof(double) * (2 * g->pl.nlayers + 1), g->stream));
    }
    if (g->zd.on) zd_begin(&g->zd, g->gshard); // the buckets add into the shard
    // -zero 2/3 see a replica's whole gradient (the noise scale's) only with one micro-batch per step
    g->sq_on = g->zero >= 2 && comm->DP > 1 && comm->CP == 1 && r.micro == 1;
    cudaCheck(cudaMemsetAsync(g->loss_acc, 0, sizeof(double), g->stream));
    BatchRef br = {t->run.samples, r.gb, &t->run.train};
    pipe_execute(t, r.micro, 0, dloss, load_train_micro, &br);
    nvtx_push("grad sync");
    sp_reduce_ln_grads(g, dc);
    if (is_first_stage(g) || is_last_stage(g))
        dc_emb_allreduce_f32(dc, g->grads ? g->grads + g->pl.offset[PT_WTE] : gpt_grad(g, PT_WTE, 0),
                             g->pl.numel[PT_WTE]);
    // |G_small|^2: each replica's squared norm before the DP reduction (mean over replicas)
    if (g->zero >= 2)
        zero_rest_reduce(g); // the layers' buckets were reduced during the backward
    else if (g->overlap)
        dp_buckets_finish(g, dc); // the layers' buckets were launched during the backward
    else {
        if (comm->DP > 1) gpt_grad_sumsq(g, g->grads, 0, g->pl.total, 0);
        if (g->zero && g->grad_bf16)
            zero1_bf16_reduce(g);
        else if (g->zero)
            dc_dp_reduce_scatter_f32(dc, g->grads, g->gshard, g->pl.total);
        else
            dc_dp_allreduce_f32(dc, g->grads, g->pl.total);
    }
    // each unique parameter once: without ZeRO the CP x DP ranks hold equal gradients (count rank 0)
    int count_norm = g->zero || comm->dpc == 0;
    nvtx_pop();
    if (count_norm) gpt_grad_sumsq(g, g->gshard, g->opt_off, g->opt_off + g->n_opt, 1);
    // one host wait for the loss and both norms (the spike guard and clipping need them here)
    cudaCheck(cudaMemcpyAsync(g->h_stats, g->loss_acc, sizeof(double), cudaMemcpyDeviceToHost, g->stream));
    cudaCheck(cudaMemcpyAsync(g->h_stats + 1, g->gn, 2 * sizeof(double), cudaMemcpyDeviceToHost, g->stream));
    dc_wait_stream(dc, g->stream);
    // the loss lives on the last stage's TP ranks (all equal): count TP rank 0 of each replica
    r.loss = world_sum(comm, (is_last_stage(g) && comm->tp == 0) ? g->h_stats[0] : 0.0) / ((double)r.gb * c->seq);
    // -zero 2/3 with several micro-batches per step, or -cp > 1 (a replica's gradient is the sum
    // of its CP ranks'): no replica holds its whole gradient (NaN: no estimate)
    double small_sumsq = 0.0;
    if (comm->DP > 1)
        small_sumsq = (g->zero < 2 || g->sq_on) && comm->CP == 1 ? world_sum(comm, g->h_stats[1]) / comm->DP : NAN;
    r.gnorm = sqrt(world_sum(comm, count_norm ? g->h_stats[2] : 0.0));
    // noise scale and spike guard: every rank sees the same global loss and norm, so every
    // rank takes the same decision
    float gscale = run_step_judge(&t->run, &r, small_sumsq);
    if (r.skip == SKIP_NONE && t->ck_pending) { // a background checkpoint's copy still reads master, m and v
        cudaCheck(cudaStreamWaitEvent(g->stream, t->ck_copied, 0));
        t->ck_pending = 0;
    }
    nvtx_push("optimizer");
    if (r.skip == SKIP_NONE) {
        gpt_adamw(g, g->gshard + (g->zero ? 0 : g->opt_off), r.lr, t->run.adam_t, gscale);
        if (g->zero == 1 || g->zero == 2) dc_dp_allgather_bf16(dc, g->params, g->pl.total); // each updated its shard
        if (g->zero == 3) z3_rest_gather(g); // the rest whole again; the layers are gathered when used
    }
    nvtx_pop();
    dc_collect_time(dc); // the step's end: waits for the stream
    nvtx_pop();
    if (profiled) cudaCheck(cudaProfilerStop());
    if (!t->reported && comm->rank == 0) gemm_report(&g->gemm, g->gelu_fused, stdout);
    t->reported = 1;
    r.host_syncs = (int)(dc->host_syncs - syncs0);
    run_step_done(&t->run, &r); // a skipped step still consumes its batch
    return r;
}

// Mean loss over the first val_samples samples of the validation stream (in order).
static double evaluate(Train* t, DataSet* val) {
    GPT* g = &t->model;
    int64_t n = run_val_samples(&t->run, val);
    BatchRef br = {0, n, val};
    cudaCheck(cudaMemsetAsync(g->loss_acc, 0, sizeof(double), g->stream));
    pipe_execute(t, (int)(n / ((int64_t)t->run.cfg.mb * t->run.comm.DP)), 1, 0.0f, load_train_micro, &br);
    double sum = is_last_stage(g) ? read_loss_sum(g, &t->dc) : 0.0;
    return world_sum(&t->run.comm, (is_last_stage(g) && t->run.comm.tp == 0) ? sum : 0.0) /
           ((double)n * t->run.cfg.seq);
}

// user: the (B, Tfull) tokens
static void load_sample_micro(Train* t, Acts* a, int k, void* user) {
    (void)k;
    if (t->model.CP > 1)
        cp_take_rows(&t->model, a->h_inputs, (const int*)user);
    else
        memcpy(a->h_inputs, user, sizeof(int) * t->model.B * t->model.T);
    memset(a->h_targets, 0, sizeof(int) * t->model.B * t->model.T);
}

// Row (b, pos) of the last stage's logits (bf16 on the device), this TP rank's Vv columns at
// v0 of row (Vp): -cp > 1, from the CP rank that holds position pos (summed over the CP group:
// the others give zeros). Every last-stage rank of the CP group calls it for the same row.
static void logits_row(Train* t, int b, int pos, float* row) {
    GPT* g = &t->model;
    memset(row, 0, sizeof(float) * g->cfg.Vp);
    int local = -1;
    for (int i = 0; i < g->T && local < 0; i++)
        if (g->tpos[i] == pos) local = i;
    if (local >= 0 && g->Vv > 0) {
        uint16_t* hrow = (uint16_t*)malloc_check(sizeof(uint16_t) * g->Vv);
        cudaCheck(cudaMemcpyAsync(hrow, g->acts[0].logits + ((size_t)b * g->T + local) * g->ldl,
                                  sizeof(uint16_t) * g->Vv, cudaMemcpyDeviceToHost, g->stream));
        cudaCheck(cudaStreamSynchronize(g->stream));
        for (int v = 0; v < g->Vv; v++) row[g->v0 + v] = host_bf2f(hrow[v]);
        free(hrow);
    }
    cp_allreduce_sum(&t->run.comm, row, g->cfg.Vp);
}

// Generates sample_len tokens after an <|endoftext|>, sampling from the softmax. Every
// rank takes part (the pipeline runs forward); the sampler rank prints.
static void sample_text(Train* t, FILE* out) {
    GPT* g = &t->model;
    const Config* c = &t->run.cfg;
    int Tf = g->Tfull; // the whole sequence (-cp: each CP rank runs its rows of it)
    int* tokens = (int*)malloc_check(sizeof(int) * g->B * Tf);
    // every row defined, as in train_gpt.c; then the -prompt ids or <|endoftext|>
    for (int i = 0; i < g->B * Tf; i++) tokens[i] = run_sample_start(&t->run);
    int n0 = run_sample_prompt(&t->run, tokens, Tf);
    float* row = (float*)malloc_check(sizeof(float) * c->Vp);
    if (t->run.comm.rank == run_sampler_rank(&t->run)) fprintf(out, "sample: ");
    for (int pos = n0; pos < n0 + c->sample_len && pos < Tf; pos++) {
        pipe_execute(t, 1, 1, 0.0f, load_sample_micro, tokens);
        if (is_last_stage(g)) logits_row(t, 0, pos - 1, row); // this TP rank's Vv columns of the row at pos-1
        tokens[pos] = run_sample_next(&t->run, row, is_last_stage(g));
        run_sample_print(&t->run, out, tokens[pos]);
    }
    int n = n0 + c->sample_len < Tf ? n0 + c->sample_len : Tf;
    run_sample_end(&t->run, out, tokens, n0, n);
    free(tokens);
    free(row);
}

// the cloze evaluation's hooks (llmc/host/eval.h): a forward of a (B, T) token batch, and one
// logits row of the last stage at this TP rank's vocabulary offset
static void eval_forward(void* self, const int* tokens) {
    pipe_execute((Train*)self, 1, 1, 0.0f, load_sample_micro, (void*)tokens);
}
static void eval_row(void* self, int b, int pos, float* row) { logits_row((Train*)self, b, pos, row); }

// ----------------------------------------------------------------------------------------
// checkpoints: the format of llmc/host/checkpoint.h, written from host fp32 copies of the master
// weights and moments (the bf16 working weights are their rounding, so not stored)

// The whole fp32 master buffer for DP rank 0's file, on the device: the master weights, or
// with ZeRO-1 the shards gathered into the (idle) gradient buffer, which the caller zeroes again
// once it is copied. -zero 2/3 have no such device buffer: the shards are gathered into the host
// buffer full (total floats) and it returns NULL. Every DP rank takes part in the gather.
static const float* master_for_save(Train* t, float* full) {
    GPT* g = &t->model;
    if (!g->zero) return g->master;
    if (g->zero >= 2) { // no fp32 buffer of everything on the device: the shards meet on the host
        cudaCheck(
            cudaMemcpyAsync(full + g->opt_off, g->master, sizeof(float) * g->n_opt, cudaMemcpyDeviceToHost, g->stream));
        cudaCheck(cudaStreamSynchronize(g->stream));
        dp_allgather(&t->run.comm, full, g->pl.total);
        return NULL;
    }
    cudaCheck(cudaMemcpyAsync(g->grads + (size_t)t->run.comm.dpc * g->n_shard, g->master, sizeof(float) * g->n_shard,
                              cudaMemcpyDeviceToDevice, g->stream));
    dc_dp_allgather_f32(&t->dc, g->grads, g->pl.total);
    return g->grads;
}

// Returns 0, or -1 (the previous checkpoint stays).
static int save_checkpoint(Train* t) {
    GPT* g = &t->model;
    cudaStream_t s = g->stream;
    float* hp = (float*)malloc_check(sizeof(float) * (g->pl.total + 1));
    const float* dmaster = master_for_save(t, hp);
    float* hm = (float*)malloc_check(sizeof(float) * (g->n_opt + 1));
    float* hv = (float*)malloc_check(sizeof(float) * (g->n_opt + 1));
    if (dmaster) cudaCheck(cudaMemcpyAsync(hp, dmaster, sizeof(float) * g->pl.total, cudaMemcpyDeviceToHost, s));
    cudaCheck(cudaMemcpyAsync(hm, g->m, sizeof(float) * g->n_opt, cudaMemcpyDeviceToHost, s));
    cudaCheck(cudaMemcpyAsync(hv, g->v, sizeof(float) * g->n_opt, cudaMemcpyDeviceToHost, s));
    cudaCheck(cudaStreamSynchronize(s));
    if (g->zero == 1) cudaCheck(cudaMemsetAsync(g->grads, 0, sizeof(float) * g->total_pad, s));
    Progress p = run_progress(&t->run);
    int rc = save_checkpoint_rank(&t->run.cfg, &t->run.comm, &p, &g->pl, hp, hm, hv, g->opt_off, g->n_opt,
                                  &t->run.ck.write_ms, &t->run.ck.bytes);
    free(hp);
    free(hm);
    free(hv);
    return rc;
}

// -ckpt-async 1: this rank's share copied into pinned staging memory on ck_stream, ordered after
// the optimizer step by ck_ready; the host does not wait. The next update waits for the copies
// (ck_pending); with ZeRO-1 the main stream waits for the gathered weights' copy before it zeroes
// the gradient buffer that holds them. The writer thread starts once they have landed
// (staged_checkpoint, at the next step boundary). 0, or -1 (the directory cannot be made).
static int stage_checkpoint(Train* t) {
    GPT* g = &t->model;
    const Config* c = &t->run.cfg;
    Comm* comm = &t->run.comm;
    size_t np = ckpt_rank_n_params(c, comm, &g->pl), no = ckpt_rank_n_opt(c, comm, g->n_opt);
    float* hp = cka_buffer(&t->run.ck, np + 2 * no);
    float* hm = hp + np;
    float* hv = hm + no;
    float* full = g->zero >= 2 && np != g->pl.total ? (float*)malloc_check(sizeof(float) * g->pl.total) : hp;
    const float* dmaster = master_for_save(t, full); // -zero 2/3: gathered on the host now (DP rank 0: into hp)
    if (full != hp) free(full);
    cudaCheck(cudaEventRecord(t->ck_ready, g->stream));
    cudaCheck(cudaStreamWaitEvent(t->ck_stream, t->ck_ready, 0));
    if (np > 0 && dmaster)
        cudaCheck(cudaMemcpyAsync(hp, dmaster, sizeof(float) * np, cudaMemcpyDeviceToHost, t->ck_stream));
    cudaCheck(cudaEventRecord(t->ck_weights, t->ck_stream));
    if (no > 0) {
        cudaCheck(cudaMemcpyAsync(hm, g->m, sizeof(float) * no, cudaMemcpyDeviceToHost, t->ck_stream));
        cudaCheck(cudaMemcpyAsync(hv, g->v, sizeof(float) * no, cudaMemcpyDeviceToHost, t->ck_stream));
    }
    cudaCheck(cudaEventRecord(t->ck_copied, t->ck_stream));
    if (g->zero == 1) {
        cudaCheck(cudaStreamWaitEvent(g->stream, t->ck_weights, 0));
        cudaCheck(cudaMemsetAsync(g->grads, 0, sizeof(float) * g->total_pad, g->stream));
    }
    t->ck_pending = 1;
    Progress p = run_progress(&t->run);
    return cka_start(&t->run.ck, c, comm, &p, &g->pl, hp, hm, hv, g->opt_off, g->n_opt, 0);
}

// The staging copies have landed (the host waits for them; by the next step boundary they have)
static void staged_checkpoint(Train* t) { cudaCheck(cudaEventSynchronize(t->ck_copied)); }

// pinned staging memory for ckpt_async.h
static void* pinned_alloc(size_t bytes) {
    void* p = NULL;
    return cudaMallocHost(&p, bytes) == cudaSuccess ? p : NULL;
}
static void pinned_free(void* p) { cudaCheck(cudaFreeHost(p)); }

// Loads this rank's slices from a checkpoint written in ANY layout (by either trainer).
// With weights_only, progress and optimizer state stay fresh (-init-from). 0 or -1 (err).
static int load_checkpoint(Train* t, const char* dir, int weights_only, char* err, size_t n) {
    GPT* g = &t->model;
    float* hp = (float*)calloc_check(g->pl.total + 1, sizeof(float));
    float* hm = (float*)calloc_check(g->n_opt + 1, sizeof(float));
    float* hv = (float*)calloc_check(g->n_opt + 1, sizeof(float));
    Progress p = run_progress(&t->run);
    int rc = load_checkpoint_rank(&t->run.cfg, dir, &g->pl, hp, hm, hv, g->opt_off, g->n_opt, weights_only, &p, err, n);
    if (rc == 0) {
        gpt_upload_weights(g, hp);
        if (!weights_only) {
            cudaCheck(cudaMemcpy(g->m, hm, sizeof(float) * g->n_opt, cudaMemcpyHostToDevice));
            cudaCheck(cudaMemcpy(g->v, hv, sizeof(float) * g->n_opt, cudaMemcpyHostToDevice));
            run_restore(&t->run, &p);
        }
    }
    free(hp);
    free(hm);
    free(hv);
    return rc;
}

// fresh weights from the seed (the same values as train_gpt.c: initialised on the host)
static void init_weights(Train* t) {
    GPT* g = &t->model;
    float* hp = (float*)malloc_check(sizeof(float) * (g->pl.total + 1));
    param_init(&g->pl, hp, t->run.cfg.seed, t->run.cfg.scaled_init, t->run.cfg.init_std_mult);
    gpt_upload_weights(g, hp);
    free(hp);
}

// ----------------------------------------------------------------------------------------
// device, peak FLOP/s, start-up

// dense bf16 tensor-core peak in TFLOP/s by device name (0: unknown; -peak overrides)
static double device_peak_tflops(const char* name) {
    static const struct {
        const char* key;
        double tflops;
    } table[] = {
        {"H200", 989.0},                                                              // H200 SXM
        {"GH200", 989.0}, {"H100 PCIe", 756.0}, {"H100 NVL", 835.0}, {"H100", 989.0}, // H100 SXM
        {"H800", 989.0},  {"A100", 312.0},      {"A800", 312.0},     {"L40S", 362.0},
        {"L4", 121.0},    {"A10", 125.0},       {"B200", 2250.0},
    };
    for (size_t i = 0; i < sizeof(table) / sizeof(table[0]); i++)
        if (strstr(name, table[i].key) != NULL) return table[i].tflops;
    return 0.0;
}

static const char* device_arch_note(int major, int minor) {
    if (major == 8 && minor == 0) return "sm_80";
    if (major == 9 && minor == 0) return "sm_90";
    return "not a build target (sm_80, sm_90): rebuild with CUDA_ARCHS";
}

// Activation bytes this rank keeps for one micro-batch (one unit per chunk; what the
// schedule multiplies by its in-flight count) and per layer, as train_gpt.c prints them,
// and what -recompute selective means with this attention path.
static void print_act_memory(const GPT* g, int nccl) {
    static const char* RC[] = {"0", "full", "selective"};
    table_row("recompute / sp / vpp", "%s / %d / %d, schedule %s", RC[g->cfg.recompute], g->sp, g->nchunk,
              g->zb           ? "zb-h1"
              : g->nchunk > 1 ? "interleaved 1F1B"
                              : "1F1B");
    int shared_att = g->attn == ATTN_NAIVE && g->cfg.recompute == RECOMPUTE_SELECTIVE;
    size_t shared = shared_att ? sizeof(float) * (size_t)g->B * g->NH * g->T * g->T : 0;
    table_row("activations / micro-batch", "%.3f MiB (%zu B per layer; %d slots, %.3f MiB held at most)",
              (double)g->acts[0].bytes * g->nchunk / 1048576.0, g->acts[0].layer_bytes, g->nslots,
              ((double)g->acts[0].bytes * g->nslots + shared) / 1048576.0);
    if (g->nchunk > 1)
        table_row("pipeline gradient buffers", "%d x %.3f MiB (%s)", g->ndgrad,
                  (double)g->B * g->T * g->C * sizeof(bf16) / 1048576.0,
                  nccl ? "phased NCCL schedule: a send may wait until its receiver needs it" : "interleaved schedule");
    if (g->CP > 1)
        table_row("context parallel", "cp %d of %d: %d rows (positions %d.. and %d..), ring buffers %.3f MiB", g->cp,
                  g->CP, g->T, g->tpos[0], g->tpos[g->Tch], (double)g->B * g->T * g->Cl * 28 / 1048576.0);
    if (g->zb)
        table_row("zb-h1 W stashes", "%d x %.3f MiB (weight-GEMM inputs and output gradients of units awaiting W)",
                  g->nstash, (double)g->nlc * g->wstash_layer * sizeof(bf16) / 1048576.0);
    if (g->cfg.recompute == RECOMPUTE_SELECTIVE)
        table_row("selective recompute", "%s",
                  shared_att ? "keeps the GEMM inputs; one (B,NH,T,T) probability buffer per rank, rebuilt in backward"
                             : "keeps the GEMM inputs and lse; flash attention stores no probabilities "
                               "(its backward rebuilds them), so it saves and recomputes nothing more");
}

// Host waits per training step with NCCL: one per micro-batch on the stages that upload
// tokens (a slot's pinned inputs are rewritten only after its previous upload ran), one for
// the loss and the norms (the spike guard and clipping decide on the host), one at the end.
static void print_config_table(const Train* t) {
    const Config* c = &t->run.cfg;
    const GPT* g = &t->model;
    run_print_config(&t->run);
    table_row("local params", "%zu (bf16 + fp32 master)", g->pl.total);
    const size_t* mb = g->mem;
    table_row("memory per rank",
              "params %.3f MiB | grads %.3f MiB | optimizer %.3f MiB | activations %.3f MiB | "
              "total %.3f MiB",
              mb[MEM_PARAMS] / 1048576.0, mb[MEM_GRADS] / 1048576.0, mb[MEM_OPTIM] / 1048576.0,
              mb[MEM_ACTS] / 1048576.0, (mb[MEM_PARAMS] + mb[MEM_GRADS] + mb[MEM_OPTIM] + mb[MEM_ACTS]) / 1048576.0);
    table_row("device", "%.42s", t->device);
    table_row("device bus id", "%s (rank 0; each rank of a node on its own GPU with -comm nccl)", t->bus);
    if (t->peak_tflops > 0)
        table_row("peak (MFU)", "%.0f TFLOP/s bf16 dense%s", t->peak_tflops, c->peak_tflops > 0 ? " (-peak)" : "");
    else
        table_row("peak (MFU)", "%s", "unknown device: give -peak TFLOPS");
    table_row("communication", "%s", t->dc.nccl ? "nccl" : "mpi (host-staged)");
#ifdef USE_CUDNN
    if (g->attn == ATTN_CUDNN)
        table_row("attention", "cuDNN %zu fused flash, %s backward, %.1f MiB workspace", cudnn_attn_version(),
                  cudnn_attn_deterministic(g->cudnn) ? "deterministic" : "non-deterministic",
                  cudnn_attn_workspace_bytes(g->cudnn) / 1048576.0);
#endif
    if (g->CP > 1) // cuDNN never runs with -cp (attention_setup)
        table_row("attention", "ring over -cp %d: %s%s", g->CP, ATTN_NAMES[g->attn],
                  g->attn_fallback ? "; cuDNN and naive have no ring path: the own kernels" : "");
    else if (g->attn != ATTN_CUDNN)
        table_row("attention", "%s", ATTN_NAMES[g->attn]);
    table_row("precision", "bf16 weights/acts, fp32 master/moments/grads, DP reduction %s",
              g->grad_bf16 ? "bf16 (-grad-reduce)" : "fp32");
    print_act_memory(g, t->dc.nccl);
    if (t->dc.nccl)
        table_row("host syncs / step", "%s",
                  is_first_stage(g) || is_last_stage(g)
                      ? "2 + 1 per micro-batch (uploads' slot guard; loss and norms; step end)"
                      : "2 (loss and norms; step end)");
    else
        table_row("host syncs / step", "%s",
                  "each host-staged collective waits (-comm mpi); counted in the log (host_syncs)");
    table_rule();
    fflush(stdout);
}

// This rank's GPU: local rank (ranks on the same node) modulo the devices it sees. With
// -comm nccl every rank needs its own GPU. Counting devices cannot tell (with srun
// --gpus-per-task=1 or a per-rank CUDA_VISIBLE_DEVICES each rank sees one device, its own),
// so the ranks of a node exchange the PCI bus ids of their choices and only a real
// duplicate is refused; several ranks per GPU need -comm mpi.
static void select_device(Train* t) {
    Comm* comm = &t->run.comm;
    int ndev = 0;
    cudaError_t e = cudaGetDeviceCount(&ndev);
    int bad = (e != cudaSuccess || ndev == 0) ? 1 : 0;
    int local = 0;
    int dev = bad ? -1 : 0;
    char bus[32] = ""; // PCI bus id of this rank's choice ("" without a device)
    int dup_with = -1; // a lower local rank on the same GPU, if any
#ifdef USE_MPI
    if (comm->mpi) {
        MPI_Comm node;
        int nlocal = 1; // declared here: a build without MPI has no use for it (-Werror)
        mpiCheck(MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, comm->rank, MPI_INFO_NULL, &node));
        mpiCheck(MPI_Comm_rank(node, &local));
        mpiCheck(MPI_Comm_size(node, &nlocal));
        if (!bad) {
            dev = local % ndev;
            cudaCheck(cudaDeviceGetPCIBusId(bus, (int)sizeof(bus), dev));
        }
        char* all = (char*)calloc_check((size_t)nlocal, sizeof(bus));
        mpiCheck(MPI_Allgather(bus, (int)sizeof(bus), MPI_CHAR, all, (int)sizeof(bus), MPI_CHAR, node));
        for (int r = 0; r < local && dup_with < 0; r++)
            if (bus[0] != '\0' && strcmp(all + r * sizeof(bus), bus) == 0) dup_with = r;
        free(all);
        MPI_Comm_free(&node);
    }
#endif
    if (!bad && !comm->mpi) cudaCheck(cudaDeviceGetPCIBusId(bus, (int)sizeof(bus), dev));
    int share = !bad && t->dc.nccl && comm->world > 1 && dup_with >= 0;
    int any_bad = (int)world_sum(comm, (double)bad), any_share = (int)world_sum(comm, (double)share);
    if (any_bad || any_share) {
        if (any_bad && comm->rank == 0)
            fprintf(stderr,
                    "error: no CUDA device found on %d rank(s) (%s): run train_gpt (the CPU trainer) on this machine\n",
                    any_bad, e != cudaSuccess ? cudaGetErrorString(e) : "0 devices");
        // one line, from the lowest world rank that found a duplicate
        int me_first = 0;
#ifdef USE_MPI
        if (comm->mpi) {
            int mine = share ? comm->rank : comm->world, low = comm->world;
            mpiCheck(MPI_Allreduce(&mine, &low, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD));
            me_first = share && low == comm->rank;
        }
#endif
        if (!any_bad && me_first)
            fprintf(stderr,
                    "error: local ranks %d and %d of a node (world rank %d) both use GPU %s (of %d visible): NCCL "
                    "needs one GPU "
                    "per rank; give each rank its own (e.g. CUDA_VISIBLE_DEVICES per rank) or use -comm mpi to share a "
                    "GPU\n",
                    dup_with, local, comm->rank, bus, ndev);
#ifdef USE_MPI
        if (comm->mpi) MPI_Finalize();
#endif
        exit(1);
    }
    cudaCheck(cudaSetDevice(dev));
    cudaDeviceProp prop;
    cudaCheck(cudaGetDeviceProperties(&prop, dev));
    snprintf(t->device, sizeof(t->device), "%s (%s), %.0f GiB", prop.name, device_arch_note(prop.major, prop.minor),
             prop.totalGlobalMem / 1073741824.0);
    snprintf(t->bus, sizeof(t->bus), "%s", bus);
    t->peak_tflops = t->run.cfg.peak_tflops > 0 ? t->run.cfg.peak_tflops : device_peak_tflops(prop.name);
}

// Sets up everything but the weights.
static void train_setup(Train* t, const Config* cfg, const Comm* comm) {
    memset(t, 0, sizeof(*t));
    run_init(&t->run, cfg, comm);
    const char* ps = getenv("LLMC_PROFILE_STEP");
    t->profile_step = ps != NULL ? atoll(ps) : 0;
    t->dc.nccl = strcmp(cfg->comm, "nccl") == 0;
    select_device(t);
    cudaCheck(cudaStreamCreate(&t->stream));
    cudaCheck(cudaStreamCreate(&t->ck_stream));
    cudaCheck(cudaEventCreateWithFlags(&t->ck_ready, cudaEventDisableTiming));
    cudaCheck(cudaEventCreateWithFlags(&t->ck_weights, cudaEventDisableTiming));
    cudaCheck(cudaEventCreateWithFlags(&t->ck_copied, cudaEventDisableTiming));
    t->run.ck.alloc = pinned_alloc;
    t->run.ck.release = pinned_free;
    devcomm_init(&t->dc, &t->run.comm, t->dc.nccl, t->stream, 1);
    dc_pp_links_init(&t->dc, cfg->vpp > 1 ? cfg->vpp : 1); // the overlapped pipeline's links, warmed up
    // 1F1B: at most PP micro-batches in flight; interleaved: pipe_slots units (zb-h1 the same:
    // a unit's slot is free after its B, its W stash after its W)
    int zb = config_zb(cfg), m_max = (int)(cfg->gb / ((int64_t)cfg->mb * comm->DP));
    int nslots = cfg->vpp > 1 ? pipe_slots(comm->pp, comm->PP, cfg->vpp) : comm->PP;
    // gradient buffers: two for 1F1B; interleaved, what the largest step of the run needs
    int ndgrad = pipe_grad_buffers_max(zb, comm->pp, comm->PP, cfg->vpp, m_max, t->dc.nccl);
    int nstash = zb ? pipe_w_pending_max(comm->pp, comm->PP, cfg->vpp, m_max) : 0;
    if (ndgrad < 0 || (zb && nstash < 1)) die("out of host memory for the pipeline schedule");
    gpt_build(&t->model, &t->run.cfg, &t->run.comm, nslots, ndgrad, nstash, t->dc.overlap, t->stream);
    GPT* g = &t->model;
    zd_init(&g->zd, &t->dc, g->zero >= 2 || g->grad_bf16, g->zero == 3, g->grad_bf16, g->pl.total);
    // what memplan.h says this rank allocates on the device is what it allocated
    size_t plan[NUM_MEM];
    const Comm* c = &t->run.comm;
    mem_plan_cuda(&t->run.cfg, c->tp, c->TP, c->pp, c->PP, c->dpc, c->DPC, nslots, ndgrad, nstash,
                  g->attn == ATTN_NAIVE, t->dc.overlap, plan);
    for (int k = 0; k < NUM_MEM; k++)
        if (plan[k] != g->mem[k])
            die("internal: %s: %zu device bytes allocated, memplan.h's mem_plan_cuda says %zu: update it with the new "
                "buffer",
                MEM_NAMES[k], g->mem[k], plan[k]);
}

static void train_free(Train* t) {
    gpt_free(&t->model);
    devcomm_free(&t->dc);
    cudaCheck(cudaEventDestroy(t->ck_ready));
    cudaCheck(cudaEventDestroy(t->ck_weights));
    cudaCheck(cudaEventDestroy(t->ck_copied));
    cudaStreamDestroy(t->ck_stream);
    cudaStreamDestroy(t->stream);
    run_free(&t->run);
}

// the hooks run_loop drives
static StepResult hook_step(void* self) { return train_step((Train*)self); }
static double hook_evaluate(void* self, DataSet* val) { return evaluate((Train*)self, val); }
static void hook_sample(void* self, FILE* out) { sample_text((Train*)self, out); }
static int hook_save(void* self) { return save_checkpoint((Train*)self); }
static int hook_stage(void* self) { return stage_checkpoint((Train*)self); }
static void hook_staged(void* self) { staged_checkpoint((Train*)self); }
static int hook_load(void* self, const char* dir, int weights_only, char* err, size_t n) {
    return load_checkpoint((Train*)self, dir, weights_only, err, n);
}
static void hook_init(void* self) { init_weights((Train*)self); }
// the step watchdog (another thread) ends a stuck job: NCCL communicators abort so that no
// kernel keeps waiting on a peer that will never come (ncclCommAbort is safe to call then)
static void hook_abort(void* self) {
    DevComm* d = &((Train*)self)->dc;
    if (!d->nccl) return;
    ncclComm_t cs[5] = {d->tp, d->dp, d->pp, d->emb, d->cp};
    for (int i = 0; i < 5; i++)
        if (cs[i]) ncclCommAbort(cs[i]); // the job is ending: the result is not checked
    for (int i = 0; i < d->nlinks; i++) ncclCommAbort(d->link[i].comm);
    if (((Train*)self)->model.zd.gcomm) ncclCommAbort(((Train*)self)->model.zd.gcomm); // -zero 3's gathers
}

// -plan's "memory per rank" rows (startup.h): the device bytes train_setup allocates on the first
// rank of stage pp of c's layout, by memplan.h's mem_plan_cuda with the slots, gradient buffers,
// W stashes, attention kind and DP overlap train_setup and gpt_build pick (the start-up check
// holds that count to the allocations)
static int plan_stage_bytes(const Config* c, size_t chunk, int pp, size_t bytes[NUM_MEM]) {
    (void)chunk;
    int CP = c->cp > 0 ? c->cp : 1, zb = config_zb(c), nccl = strcmp(c->comm, "nccl") == 0;
    int nslots, nstash;
    mem_plan_slots(c, pp, c->pp, c->dp, &nslots, &nstash);
    int m_max = (int)(c->gb / ((int64_t)c->mb * c->dp));
    int ndgrad = pipe_grad_buffers_max(zb, pp, c->pp, c->vpp, m_max, nccl);
    if (ndgrad < 0 || (zb && nstash < 1)) return -1;
    const char* ov = getenv("LLMC_DP_OVERLAP");
    int overlap = nccl && c->dp * CP > 1 && !(ov != NULL && strcmp(ov, "0") == 0);
    int naive = CP == 1 && attention_kind(c->H / c->heads) == ATTN_NAIVE; // -cp runs the ring's own kernels
    mem_plan_cuda(c, 0, c->tp, pp, c->pp, 0, c->dp * CP, nslots, ndgrad, nstash, naive, overlap, bytes);
    return 0;
}

// -layout auto sizes the layout to the GPU's memory (the GPUs of a node alike: device 0's). Only
// then is the runtime touched before startup; no GPU (a dry run on a login node) is not an error
// here: the layout falls back to -gpu-mem or the cluster preset, so these calls are not checked.
static double device_mem_gib(int argc, char** argv) {
    int want = 0;
    for (int i = 1; i + 1 < argc; i++) want |= strcmp(argv[i], "-layout") == 0 && strcmp(argv[i + 1], "auto") == 0;
    int n = 0;
    cudaDeviceProp p;
    if (!want || cudaGetDeviceCount(&n) != cudaSuccess || n == 0 || cudaGetDeviceProperties(&p, 0) != cudaSuccess)
        return 0.0;
    return (double)p.totalGlobalMem / 1073741824.0;
}

// test_gpt.cu includes this file with TESTING defined; its emulated builds call this as trainer_main when run
// under the trainer's name, so the emulation compiles the trainer once (dev/cuda/cuda.mk)
#ifdef TESTING
#define TRAINER_MAIN trainer_main
#else
#define TRAINER_MAIN main
#endif
int TRAINER_MAIN(int argc, char** argv) {
    Config cfg;
    Comm comm;
    static const StartupMemPlan memplan = {"the CUDA trainer (device bytes)", plan_stage_bytes}; // -plan's rows
    startup(&cfg, &comm, argc, argv, device_mem_gib(argc, argv), &memplan); // -h, -check, -plan, bad flags end here
#ifdef _OPENMP
    if (cfg.threads > 0) omp_set_num_threads(cfg.threads);
#endif
    Train t;
    train_setup(&t, &cfg, &comm);
    run_open_data(&t.run, is_first_stage(&t.model) || is_last_stage(&t.model)); // only these stages read tokens
    RunHooks hooks = {&t,         hook_step,  hook_evaluate, hook_sample, hook_save,
                      hook_load,  hook_init,  t.peak_tflops, hook_abort,  {&t, eval_forward, eval_row},
                      hook_stage, hook_staged};
    run_load_weights(&t.run, &hooks);
    if (comm.rank == 0) print_config_table(&t);
    int rc = run_loop(&t.run, &hooks);
    train_free(&t);
    comm_free(&t.run.comm);
#ifdef USE_MPI
    if (comm.mpi) MPI_Finalize();
#endif
    return rc;
}
