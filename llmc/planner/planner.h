/*
 * planner.h: the layout planner (header-only, pure C99; also compiles as C++ under nvcc).
 * Given a model, a global batch and a cluster, it predicts for each layout (TP x CP x PP x DP,
 * micro-batch, recomputation, ZeRO 0-3; CP = context parallelism) the memory per GPU and the time of
 * one training iteration, ranks the feasible layouts and recommends one (`-plan`), and
 * reports per-GPU throughput as the node count grows at a fixed global batch (`-scaling`).
 * The paper's first recommendation (choose the split from the interconnect hierarchy) and
 * its fourth (expect per-GPU throughput to fall with cluster size at fixed batch) are what
 * this file turns into numbers. Every modelling assumption is written next to its code.
 *
 * Interface (everything is `static inline`, no global mutable state):
 *   cluster_preset(name, &Cluster)                  selene-a100 | h100 | h200 -> 0, unknown -> -1
 *   plan_model_preset(name, &PlanModel)             tiny 125m 350m 1.3b 6.7b 530b (V = 51200)
 *   plan_default_consts() -> PlanConsts             the one set of constants (see below)
 *   plan_request_init(&PlanRequest)                 defaults: selene-a100, search everything
 *   plan_parse_flag(&r, flag, value)                1 consumed, 0 not ours, -1 bad value (prints one line)
 *   plan_parse_flag_err(&r, flag, value, err, n)    same, message into err instead of stderr
 *   plan_config_flag(user=&r, argc, argv, &i, err)  adapter for config.h's ExtraFlagFn
 *   plan_argv_has(argc, argv, flag)                 did the user give this flag (else: search it)
 *   plan_run(&r, FILE*)                             prints the plan / scaling tables; 0 ok, 1 nothing feasible, 2 bad
 * request model terms the tests call: plan_layer_params_gpu, plan_stage_params, plan_total_params,
 *   plan_layer_act_bytes, plan_memory, plan_time, plan_evaluate, plan_paper_flops,
 *   plan_tflops_per_gpu, plan_ring_allreduce_s, plan_reduce_scatter_s, plan_p2p_s,
 *   plan_gemm_s, plan_gemm_eff, plan_layer_fwd(_sp), plan_attn_core_fwd, plan_slot(_kernels), plan_group_crosses_node,
 *   plan_check_layout; for SP / selective / interleaving plan_layer_keep_bytes,
 *   plan_recompute_work_bytes, plan_inflight_layers, plan_model_flops, plan_hw_flops; for the
 *   pipeline schedules plan_layer_w_bytes, plan_zb_backlog, plan_sched_name, plan_parse_schedules;
 *   for ZeRO 2/3 plan_zero_eff, plan_zero_slot_s, plan_zero_dp_s, plan_memory_c (the cluster's attention);
 *   for CP plan_cp, plan_grad_group, plan_cp_searched, plan_cp_ring_bytes, plan_cp_ring_s, plan_links_cp,
 *   plan_slot_cp, plan_layer_fwd_cp, plan_attn_core_fwd_cp.
 *
 * Planner flags (plan_parse_flag): -cluster NAME, -nodes N, -gpus-per-node N, -peak TFLOPS,
 * -gpu-mem GiB, -bw-hbm GBps, -bw-intra GBps, -bw-inter GBps (per GPU, per direction),
 * -latency US (inter-node), -latency-intra US, -scaling N1,N2,... (scaling report),
 * -plan-csv PATH, -plan-top N (rows per table, 0 = all), and the constants -plan-eff,
 * -plan-gemm-dim, -plan-net-eff, -plan-hbm-eff, -plan-workspace GiB, -plan-headroom FRACTION,
 * -plan-w-share FRACTION (W's share of the weight GEMMs' backward), -plan-schedule LIST
 * (1f1b,interleaved,zb-h1 or any: the pipeline schedules searched) and -plan-schedules 0|1
 * (print the schedule comparison for the layout family).
 * The trainer fills the model (V = padded vocab), gb, and the layout: tp/cp/pp/dp/mb/vpp = 0
 * and recompute/zero/sp = -1 mean "search" (CP from seq 8192 on, plan_cp_searched, else 1;
 * mb searches 1, 2, 4, 8; recompute full,
 * selective, none; ZeRO 0-3 where DP > 1; sp 0/1 where TP > 1; V 1..8 where L % (PP*V) == 0
 * and m % PP == 0; the schedule over 1F1B, interleaved 1F1B (V > 1) and ZB-H1 (V = 1, PP > 1,
 * m >= PP)). The trainer may set rank_mem (PlanRankMemFn): -plan then prints its own count of
 * one rank's memory for the layout it reports (memplan.h; doc/planner.md, "Memory per rank").
 *
 * ZeRO (the trainers' -zero, llmc/host/zero.h): 1 shards the optimizer state over DP; 2 also
 * the gradients, each layer's reduce-scattered per micro-batch during the backward (one
 * layer's scratch stays); 3 also the weights, each layer's all-gathered before its forward and
 * again before its backward into one of two windows, prefetched behind the compute. The
 * traffic of 2 and 3 overlaps the backward (and forward): only what exceeds a layer's compute
 * is on the critical path (plan_zero_slot_s).
 *
 * Pipeline schedules (per micro-batch and stage: F forward, B activation-gradient backward,
 * W weight-gradient backward; equal stages):
 *   1f1b         Megatron's PipeDream-flush: bubble (PP-1)(F+B+W), PP micro-batches in flight;
 *   interleaved  V model chunks per rank: bubble (PP-1)(F+B+W)/V, more in flight (Narayanan 2021);
 *   zb-h1        Qi, Wan, Huang, Lin, "Zero Bubble Pipeline Parallelism" (ICLR 2024,
 *                arXiv 2401.10241), Table 2: W leaves the backward's critical path and fills
 *                the bubble, (PP-1)(F+B-W) for W <= min(F, B), with 1F1B's peak activation
 *                memory (pM_B) when a deferred W keeps less than a micro-batch's activations
 *                (M_W <= M_B); the trainers' stash holds one unit more (see plan_zb_backlog).
 *   ZB-H2 and ZB-V (zero bubble for more memory, or 2 chunks and post-validation) are not modelled.
 *   Both trainers run all three (-pp-schedule zb-h1; -layout auto searches it); the search
 *   models zb-h1 with one chunk per rank and m >= PP, though the trainers also run it with -vpp.
 *
 * Units: bytes and seconds inside; memory printed in GiB (2^30), bandwidth in GB/s (1e9),
 * compute in TFLOP/s (1e12). Bandwidths are per GPU and per direction (NVIDIA quotes
 * NVLink bidirectional: A100's "600 GB/s" is 300 GB/s each way).
 *
 * Compute: on the A100 cluster (selene-a100) each GEMM runs at the fitted gemm_eff x a shape
 * term and the elementwise work at HBM rate (the model the paper's points are fitted with);
 * on h100 and h200 the compute is the CUDA trainer's per-kernel model of gpu_step.h, the one
 * dev/cuda/costmodel.py uses, so -plan and the cost model make one prediction of a GPU step
 * (plan_slot_kernels; make cuda-costmodel holds them within 5%).
 *
 * Context parallelism (the trainers' -cp, doc/cp.md): a CP rank holds seq/CP rows (two of the
 * 2 CP load-balanced causal chunks); its row-wise work, activations and messages are those of
 * seq/CP rows, its attention 1/CP of the sequence's with the log-sum-exp kept (no s x s
 * probabilities, whatever the cluster), and the ring's K|V and dK|dV hops hide behind the
 * attention blocks, only their excess on the critical path (plan_cp_ring_s). Rank order TP, CP,
 * DP, PP: a CP group is inside a node when TP*CP <= GPUs per node. Gradients reduce and ZeRO
 * shards over CP x DP; the micro-batches per pipeline stay gb/(mb*DP).
 *
 * What the model leaves out (so the numbers are an estimate, not a promise):
 *   - overlap of communication with compute (everything modelled is on the critical path,
 *     as in Megatron's non-interleaved 1F1B with a DP all-reduce after the flush), except
 *     ZeRO-2/3's per-layer traffic, which hides behind the layer's compute, and the CP ring's;
 *   - network contention between concurrent collectives in the fat tree (each GPU gets its
 *     own NIC's bandwidth), switch hops, NCCL protocol/algorithm choice (rings only);
 *   - fitted model: GEMM tile and wave quantisation (the shape term x/(x + gemm_dim0) per
 *     dimension is a smooth stand-in), kernel launch gaps and host overheads (folded into
 *     gemm_eff), kernel fusion, FlashAttention (attention is materialised); the per-kernel
 *     model costs these (its own omissions: doc/cuda_speed.md, "Not modelled");
 *   - memory: attention's probabilities are counted as materialised on selene-a100 (Megatron
 *     2021, the paper's run); on h100/h200 (the CUDA trainer's flash attention) only its
 *     log-sum-exp; contention of ZeRO's DP traffic with the pipeline's on one NIC;
 *   - dropout (the model has none); Megatron's scatter-gather of p2p messages without SP;
 *   - the software stack's own level: gemm_eff is fitted to MT-NLG's measured run (DeepSpeed
 *     + Megatron, 2021); Megatron-LM's published A100 runs sit at ~0.73 (README);
 *   - memory fragmentation, the CUDA context beyond the fixed workspace, data loading,
 *     checkpointing and logging time, failures and restarts.
 */
#ifndef LLMC_PLANNER_H
#define LLMC_PLANNER_H

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gpu_step.h"

#define PLAN_MAX_SCALING 32
/* one node's mean time between failures, hours: 54 days x 24 h x 2048 nodes / 419 unexpected
 * interruptions, the 16,384-GPU H100 pre-training run of Llama 3 (Meta, "The Llama 3 Herd of
 * Models", 2024: its reliability section), rounded (doc/planner.md, "Checkpoints"); config.h's -mtbf-hours
 * default is the same number */
#define PLAN_MTBF_HOURS 6300.0
#define PLAN_ERR_LEN 512 /* same as config.h's CFG_ERR_LEN */

/* ------------------------------------------------------------------------------------ */
/* types                                                                                  */

typedef struct {
    int L, H, heads, seq, V;
} PlanModel; /* V = padded vocabulary */

typedef struct {
    char name[32];
    int gpus_per_node;
    double peak_tflops;      /* dense bf16 peak per GPU */
    double mem_gb;           /* GPU memory, GiB */
    double hbm_gbps;         /* GPU memory bandwidth, GB/s */
    double intra_gbps;       /* NVLink/NVSwitch per GPU per direction, GB/s */
    double inter_gbps;       /* InfiniBand per GPU per direction, GB/s */
    double intra_latency_us; /* per ring step inside a node */
    double latency_us;       /* per ring step / message across nodes */
    int sms;                 /* streaming multiprocessors per GPU (the GEMMs' wave quantization) */
    int kernels;             /* 1: compute from the per-kernel model (gpu_step.h); 0: the fitted A100 model */
    double fs_gbps;          /* checkpoints: the shared filesystem's aggregate write bandwidth, GB/s */
    double d2h_gbps;         /* checkpoints: one GPU's device-to-host copy (PCIe), GB/s */
} Cluster;

/* The one set of constants. gemm_eff is fitted (to the paper's three Selene points, see
 * README "Planning a run" and dev/calibrate_planner.py); the other three are typical measured
 * fractions, documented rather than fitted. On the h100 and h200 clusters the compute comes
 * from gpu_step.h's per-kernel model instead, whose GEMM and HBM efficiencies are kernel_gemm
 * and kernel_hbm (-plan-eff and -plan-hbm-eff set both models' value). */
typedef struct {
    double gemm_eff;     /* achieved fraction of peak for large GEMMs (lumps kernel gaps) */
    double gemm_dim0;    /* shape term: a GEMM dimension x reaches x/(x + gemm_dim0) of gemm_eff */
    double net_eff;      /* achieved fraction of link bandwidth for NCCL rings and p2p */
    double hbm_eff;      /* achieved fraction of HBM bandwidth for memory-bound kernels */
    double workspace_gb; /* per-GPU fixed extra: CUDA context, cuBLAS workspace, NCCL buffers (GiB) */
    double headroom;     /* the recommendation leaves this fraction of GPU memory free */
    double w_share;      /* W (weight-gradient GEMMs) / the backward of the weight-carrying GEMMs */
    double kernel_gemm;  /* per-kernel model: a large GEMM's sustained fraction of peak (GEMM_SUSTAINED) */
    double kernel_hbm;   /* per-kernel model: streaming kernels' fraction of HBM bandwidth (HBM_EFF) */
} PlanConsts;

/* recompute: 0 none, 1 full (the paper), 2 selective (config.h's RECOMPUTE_* values);
 * sp: Megatron sequence parallelism in the TP group; vpp: model chunks per pipeline rank
 * (1 = plain 1F1B, V > 1 = interleaved 1F1B); sched: PLAN_SCHED_1F1B (Megatron's 1F1B,
 * interleaved when V > 1) or PLAN_SCHED_ZBH1 (zero-bubble ZB-H1, V = 1). */
enum { PLAN_RC_NONE = 0, PLAN_RC_FULL = 1, PLAN_RC_SELECTIVE = 2 };
enum { PLAN_SCHED_1F1B = 0, PLAN_SCHED_ZBH1 = 1 };
/* -plan-schedule bits: which schedules the search may use (0 = all) */
enum { PLAN_SB_1F1B = 1, PLAN_SB_INTERLEAVED = 2, PLAN_SB_ZBH1 = 4, PLAN_SB_ALL = 7 };
/* cp: context-parallel ranks splitting each sequence (ring attention; 0 or 1 = none), last so
 * that a layout written without it has none. World = TP x CP x PP x DP. */
typedef struct {
    int tp, pp, dp, mb, recompute, zero, sp, vpp, sched, cp;
} PlanLayout;

typedef struct { /* bytes on the worst stage (the one with the largest total) */
    int stage;
    double params;  /* parameters of that stage's model part on one GPU (before any ZeRO shard) */
    double weights; /* bf16 weights, 2 B/param (ZeRO-3: the 1/DP shard, the rest whole, 2 layer windows) */
    double grads;   /* fp32 gradients, 4 B/param (ZeRO-2/3: one layer's scratch, the rest, the 1/DP shard) */
    double optim;   /* fp32 master + Adam m + v, 12 B/param (/DP with ZeRO 1-3) */
    double act;     /* activations of the in-flight micro-batches (+ recompute working set) */
    double extra;   /* embedding / LM-head stage extras, p2p and gradient buffers */
    double workspace;
    double total;
} PlanMem;

typedef struct {
    int m;         /* micro-batches per pipeline per iteration = gb/(mb*dp) */
    double slot_s; /* slowest stage: one micro-batch forward + backward (+ recompute) */
    double slot_gemm_s, slot_mem_s, slot_tp_s, slot_pp_s; /* its parts */
    double slot_f_s, slot_w_s; /* its forward (F) and weight-gradient GEMMs (W); B = the rest */
    double pipe_s;             /* the pipeline, plan_pipe_s: m slowest slots + fill and drain */
    double bubble_s;           /* pipe_s - m * slot_s: fill and drain */
    double dp_s;               /* after the flush: gradient all-reduce, or ZeRO's reduce-scatter + all-gather */
    double slot_dp_s;          /* ZeRO-2/3: DP traffic per slot not hidden behind compute (in slot_s) */
    double slot_cp_s;   /* CP: the ring's K|V and dK|dV transfers per slot not hidden behind attention (in slot_s) */
    double slot_ring_s; /* CP: the ring's transfers per slot in all, hidden or not (not in slot_s) */
    double emb_s;       /* tied-embedding gradient all-reduce, first <-> last stage */
    double ln_s;        /* -sp 1: LayerNorm weight/bias gradient all-reduce over TP */
    double norm_s;      /* grad-norm scalar all-reduce (latency) */
    double opt_s;       /* AdamW step, memory bound */
    double iter_s;
    double compute_s, comm_s, idle_s;  /* iter_s = compute_s + comm_s + idle_s */
    double comm_intra_s, comm_inter_s; /* comm_s split by link (for calibration) */
    double tflops; /* per GPU, hardware FLOPs (recompute included; = the paper's formula with f = 4 for full) */
    double mfu;    /* model FLOPs (f = 3, no recompute) / peak */
    double hfu;    /* hardware FLOPs / peak */
} PlanTime;

typedef struct {
    PlanLayout lay;
    int feasible; /* 1 ok; 0 infeasible (why says which constraint) */
    int kind;     /* 0 feasible, 1 memory, 2 batch divisibility, 3 shape divisibility */
    char why[96];
    int tp_inter, pp_inter, dp_inter; /* 1: that group crosses a node boundary (DP: the CP x DP gradient group) */
    int cp_inter;                     /* 1: the CP ring crosses a node boundary */
    PlanMem mem;
    PlanTime time;
} PlanRow;

/* -plan's "memory per rank" rows: the trainer's own count of what the first rank (TP 0, DP 0)
 * of pipeline stage `stage` allocates under layout l (llmc/host/memplan.h): bytes of params,
 * grads, optimizer state and activations. The trainer that runs -plan sets it (startup.h);
 * NULL prints no rows. Returns 0, or -1 when it has no count for the layout. */
typedef int (*PlanRankMemFn)(void* user, const PlanLayout* l, int stage, double bytes[4]);

typedef struct {
    PlanModel model;
    char cluster_name[32];
    /* cluster overrides, applied over the preset whatever the flag order; < 0 = unset */
    int o_gpus_per_node;
    double o_peak, o_mem, o_hbm, o_intra, o_inter, o_latency, o_latency_intra, o_fs, o_d2h;
    double mtbf_hours; /* one node's mean time between failures (the checkpoint interval; -mtbf-hours) */
    PlanConsts k;
    int nodes;
    int gb, mb;          /* mb = 0: search 1, 2, 4, 8 */
    int tp, pp, dp;      /* 0 = search */
    int cp;              /* 0 = search where the sequence is long (plan_cp_searched), else 1 */
    int recompute, zero; /* -1 = search */
    int sp;              /* -1 = search (0 and 1 where TP > 1) */
    int vpp;             /* 0 = search (1 and every V with L % (PP*V) == 0, V <= 8) */
    int sched_mask;      /* PLAN_SB_* bits the search may use; 0 = all that apply */
    int compare_sched;   /* -plan-schedules 1: print the schedule comparison for the family */
    int top;             /* rows shown per table, 0 = all */
    int scaling_n;       /* > 0: scaling report over scaling_nodes */
    int scaling_nodes[PLAN_MAX_SCALING];
    const char* csv_path;   /* -plan-csv: every evaluated row (plan) or the scaling table */
    PlanRankMemFn rank_mem; /* the trainer's memory per rank (see PlanRankMemFn), or NULL */
    void* rank_mem_user;
    const char* rank_mem_name; /* whose count: "the CPU trainer (fp32)" */
} PlanRequest;

/* ------------------------------------------------------------------------------------ */
/* presets                                                                                */

static inline int cluster_preset(const char* name, Cluster* out) {
    /* name, GPUs/node, bf16 TFLOP/s, GiB, HBM GB/s, NVLink GB/s/dir, IB GB/s/GPU, lat intra, lat inter,
     * SMs, compute model (1: gpu_step.h's per-kernel model; 0: the fitted one). dev/cuda/costmodel.py
     * reads the h100 and h200 rows (peak, HBM, SMs): keep each row on one line. */
    static const struct {
        const char* name;
        int g;
        double peak, mem, hbm, intra, inter, lat_intra, lat;
        int sms, kernels;
    } P[] = {
        /* DGX A100 80GB (Selene): 8x A100-SXM4-80GB, 312 TFLOP/s dense bf16, 2039 GB/s HBM2e,
         * NVLink3 via NVSwitch 600 GB/s bidirectional = 300 GB/s per direction,
         * 8x 200 Gb/s HDR InfiniBand per node = 25 GB/s per GPU, 108 SMs. The fitted model: its
         * gemm_eff is fitted to the MT-NLG run on this cluster. */
        {"selene-a100", 8, 312.0, 80.0, 2039.0, 300.0, 25.0, 2.0, 5.0, 108, 0},
        /* DGX H100: 8x H100-SXM5-80GB, 989 TFLOP/s dense bf16, 3350 GB/s HBM3, NVLink4 900 GB/s
         * bidirectional = 450 per direction, 8x 400 Gb/s NDR InfiniBand = 50 GB/s per GPU, 132 SMs. */
        {"h100", 8, 989.0, 80.0, 3350.0, 450.0, 50.0, 2.0, 5.0, 132, 1},
        /* DGX H200: as H100 with 141 GB HBM3e (140 GiB usable) at 4800 GB/s. */
        {"h200", 8, 989.0, 140.0, 4800.0, 450.0, 50.0, 2.0, 5.0, 132, 1},
    };
    for (size_t i = 0; i < sizeof(P) / sizeof(P[0]); i++) {
        if (strcmp(P[i].name, name) == 0) {
            memset(out, 0, sizeof(*out));
            snprintf(out->name, sizeof(out->name), "%s", P[i].name);
            out->gpus_per_node = P[i].g;
            out->peak_tflops = P[i].peak;
            out->mem_gb = P[i].mem;
            out->hbm_gbps = P[i].hbm;
            out->intra_gbps = P[i].intra;
            out->inter_gbps = P[i].inter;
            out->intra_latency_us = P[i].lat_intra;
            out->latency_us = P[i].lat;
            out->sms = P[i].sms;
            out->kernels = P[i].kernels;
            /* Checkpoint I/O, ASSUMED (no published figure for these clusters; doc/planner.md,
             * "Checkpoints"): an all-NVMe parallel filesystem's aggregate write bandwidth (-fs-bw),
             * and PCIe device-to-host per GPU (-d2h-bw): Gen4 x16 on DGX A100, Gen5 x16 on DGX
             * H100/H200 (32 and 64 GB/s per direction nominal, ~80% reached). */
            static const struct {
                const char* name;
                double fs, d2h;
            } IO[] = {{"selene-a100", 100.0, 25.0}, {"h100", 200.0, 50.0}, {"h200", 200.0, 50.0}};
            for (size_t j = 0; j < sizeof(IO) / sizeof(IO[0]); j++)
                if (strcmp(IO[j].name, name) == 0) {
                    out->fs_gbps = IO[j].fs;
                    out->d2h_gbps = IO[j].d2h;
                }
            return 0;
        }
    }
    return -1;
}

static inline int plan_model_preset(const char* name, PlanModel* out) {
    static const struct {
        const char* name;
        int L, H, heads, seq;
    } P[] = {
        {"tiny", 4, 128, 4, 256},     {"125m", 12, 768, 12, 2048},  {"350m", 24, 1024, 16, 2048},
        {"1.3b", 24, 2048, 16, 2048}, {"6.7b", 32, 4096, 32, 2048}, {"530b", 105, 20480, 128, 2048},
    };
    for (size_t i = 0; i < sizeof(P) / sizeof(P[0]); i++) {
        if (strcmp(P[i].name, name) == 0) {
            out->L = P[i].L;
            out->H = P[i].H;
            out->heads = P[i].heads;
            out->seq = P[i].seq;
            out->V = 51200;
            return 0;
        }
    }
    return -1;
}

static inline PlanConsts plan_default_consts(void) {
    PlanConsts k = {
        /* Fitted: the one free constant. With it the planner reproduces the paper's Selene
         * points (530b, TP 8, PP 35, mb 1, gb 1920, recompute) within 2% (README, "Planning a run").
         * It is low against cuBLAS's ~80% on these shapes because it carries everything the
         * model does not time explicitly: launch gaps, framework overhead, attention batching.
         * Megatron-LM's own published A100 runs (Narayanan et al. 2021 Table 1, Korthikanti et
         * al. 2022 Table 5) need ~0.73: `dev/calibrate_planner.py --published`. */
        .gemm_eff = 0.57,
        /* Shape term: each GEMM dimension x contributes x/(x + 64), so a GEMM whose every side is
         * >= 2048 runs at >= 91% of gemm_eff, an attention GEMM with head size 160 at 71%, a
         * skinny TP shard or a micro-batch of a few tokens far lower. 64 is one tensor-core tile
         * edge of the A100/H100 bf16 kernels: a side of one tile wastes about half of it on
         * average. Chosen, not fitted (the published points all have large GEMMs and cannot
         * separate it from gemm_eff; -plan-gemm-dim 0 turns it off). */
        .gemm_dim0 = 64.0,
        /* NCCL's measured bus bandwidth is ~80% of the link rate on NVSwitch and HDR IB. */
        .net_eff = 0.80,
        /* STREAM-like kernels reach ~80% of HBM peak on A100/H100. */
        .hbm_eff = 0.80,
        /* CUDA context (~0.5 GiB), cuBLAS workspace, NCCL channel buffers for 3-4 communicators. */
        .workspace_gb = 2.0,
        /* Feasible means "fits"; the recommended layout must also leave 10% of the GPU free
         * for what the memory model leaves out (fragmentation, allocator slack, NCCL growth). */
        .headroom = 0.10,
        /* Zero-bubble schedules split each weight-carrying GEMM's backward (QKV, attention
         * out, fc1, fc2, LM head: 2x the forward) into dX = dY W^T (B, on the critical path)
         * and dW = X^T dY (W, deferrable): the same FLOPs each, so W gets half. Attention's
         * own GEMMs (Q K^T, att V) have no weights: their backward is all B; so are the
         * memory-bound kernels, the TP/PP communication and any recomputation. */
        .w_share = 0.5,
        /* The per-kernel model's two efficiencies (h100, h200): gpu_step.h's mid case. */
        .kernel_gemm = gpu_step_mid(GS_GEMM_SUSTAINED),
        .kernel_hbm = gpu_step_mid(GS_HBM_EFF),
    };
    return k;
}

static inline void plan_request_init(PlanRequest* r) {
    memset(r, 0, sizeof(*r));
    plan_model_preset("530b", &r->model);
    snprintf(r->cluster_name, sizeof(r->cluster_name), "%s", "selene-a100");
    r->o_gpus_per_node = -1;
    r->o_peak = r->o_mem = r->o_hbm = r->o_intra = r->o_inter = r->o_latency = r->o_latency_intra = -1.0;
    r->o_fs = r->o_d2h = -1.0;
    r->mtbf_hours = PLAN_MTBF_HOURS;
    r->k = plan_default_consts();
    r->nodes = 0;
    r->gb = 1920;
    r->mb = 0;
    r->tp = r->pp = r->dp = 0;
    r->recompute = -1;
    r->zero = -1;
    r->sp = -1;
    r->vpp = 0;
    r->sched_mask = 0;
    r->compare_sched = 0;
    r->top = 15;
    r->scaling_n = 0;
    r->csv_path = NULL;
}

/* The preset named in the request with the flag overrides applied. 0 ok, -1 unknown name. */
static inline int plan_request_cluster(const PlanRequest* r, Cluster* c) {
    memset(c, 0, sizeof(*c));
    if (cluster_preset(r->cluster_name, c) != 0) return -1;
    if (r->o_gpus_per_node > 0) c->gpus_per_node = r->o_gpus_per_node;
    if (r->o_peak > 0) c->peak_tflops = r->o_peak;
    if (r->o_mem > 0) c->mem_gb = r->o_mem;
    if (r->o_hbm > 0) c->hbm_gbps = r->o_hbm;
    if (r->o_intra > 0) c->intra_gbps = r->o_intra;
    if (r->o_inter > 0) c->inter_gbps = r->o_inter;
    if (r->o_latency >= 0) c->latency_us = r->o_latency;
    if (r->o_latency_intra >= 0) c->intra_latency_us = r->o_latency_intra;
    if (r->o_fs > 0) c->fs_gbps = r->o_fs;
    if (r->o_d2h > 0) c->d2h_gbps = r->o_d2h;
    return 0;
}

/* ------------------------------------------------------------------------------------ */
/* flags                                                                                  */

static inline int planx_parse_double(const char* s, double* out) {
    if (s == NULL || *s == '\0') return 0;
    char* end;
    double d = strtod(s, &end);
    if (*end != '\0' || !(d == d) || d > 1e300 || d < -1e300) return 0;
    *out = d;
    return 1;
}
static inline int planx_parse_int(const char* s, int* out) {
    double d;
    if (!planx_parse_double(s, &d) || d != floor(d) || d > 2147483647.0 || d < -2147483647.0) return 0;
    *out = (int)d;
    return 1;
}

/* -plan-schedule: a comma-separated list of 1f1b, interleaved, zb-h1, or any. 1 ok (bits in
 * *mask), 0 bad. */
static inline int plan_parse_schedules(const char* s, int* mask) {
    static const struct {
        const char* name;
        int bit;
    } S[] = {
        {"1f1b", PLAN_SB_1F1B}, {"interleaved", PLAN_SB_INTERLEAVED}, {"zb-h1", PLAN_SB_ZBH1}, {"any", PLAN_SB_ALL}};
    int m = 0;
    if (s == NULL || *s == '\0') return 0;
    while (*s) {
        size_t n = strcspn(s, ",");
        int found = 0;
        for (size_t i = 0; i < sizeof(S) / sizeof(S[0]); i++)
            if (n == strlen(S[i].name) && strncmp(s, S[i].name, n) == 0) {
                m |= S[i].bit;
                found = 1;
            }
        if (!found) return 0;
        s += n;
        if (*s == ',' && *++s == '\0') return 0; /* a trailing comma */
    }
    *mask = m;
    return 1;
}

/* Parses one planner flag with its value. Returns 1 if consumed, 0 if the flag is not a
 * planner flag, -1 on a bad value (message in err). The model and layout flags (-model,
 * -L ..., -tp, -pp, -dp, -mb, -gb, -recompute, -zero) belong to the trainer's parser,
 * which fills r->model, r->tp ... directly. */
static inline int plan_parse_flag_err(PlanRequest* r, const char* flag, const char* value, char* err, size_t errlen) {
    double d = 0;
    int n = 0;
#define PLAN_BAD(what)                                                                                 \
    do {                                                                                               \
        snprintf(err, errlen, "bad value '%s' for %s: want %s", value ? value : "(none)", flag, what); \
        return -1;                                                                                     \
    } while (0)
#define PLAN_POS(field)                                                              \
    do {                                                                             \
        if (!planx_parse_double(value, &d) || d <= 0) PLAN_BAD("a positive number"); \
        field = d;                                                                   \
        return 1;                                                                    \
    } while (0)
#define PLAN_NONNEG(field)                                                      \
    do {                                                                        \
        if (!planx_parse_double(value, &d) || d < 0) PLAN_BAD("a number >= 0"); \
        field = d;                                                              \
        return 1;                                                               \
    } while (0)
    if (err && errlen) err[0] = '\0';
    if (strcmp(flag, "-cluster") == 0) {
        Cluster c;
        if (value == NULL || cluster_preset(value, &c) != 0) PLAN_BAD("selene-a100, h100 or h200");
        snprintf(r->cluster_name, sizeof(r->cluster_name), "%s", value);
        return 1;
    }
    if (strcmp(flag, "-nodes") == 0) {
        if (!planx_parse_int(value, &n) || n <= 0) PLAN_BAD("a positive integer");
        r->nodes = n;
        return 1;
    }
    if (strcmp(flag, "-gpus-per-node") == 0) {
        if (!planx_parse_int(value, &n) || n <= 0) PLAN_BAD("a positive integer");
        r->o_gpus_per_node = n;
        return 1;
    }
    if (strcmp(flag, "-peak") == 0) PLAN_POS(r->o_peak);
    if (strcmp(flag, "-gpu-mem") == 0) PLAN_POS(r->o_mem);
    if (strcmp(flag, "-bw-hbm") == 0) PLAN_POS(r->o_hbm);
    if (strcmp(flag, "-bw-intra") == 0) PLAN_POS(r->o_intra);
    if (strcmp(flag, "-bw-inter") == 0) PLAN_POS(r->o_inter);
    if (strcmp(flag, "-latency") == 0) PLAN_NONNEG(r->o_latency);
    if (strcmp(flag, "-latency-intra") == 0) PLAN_NONNEG(r->o_latency_intra);
    if (strcmp(flag, "-fs-bw") == 0) PLAN_POS(r->o_fs);
    if (strcmp(flag, "-d2h-bw") == 0) PLAN_POS(r->o_d2h);
    if (strcmp(flag, "-plan-gemm-dim") == 0) PLAN_NONNEG(r->k.gemm_dim0);
    if (strcmp(flag, "-plan-eff") == 0) {
        if (!planx_parse_double(value, &d) || d <= 0 || d > 1) PLAN_BAD("a fraction in (0, 1]");
        r->k.gemm_eff = d;
        r->k.kernel_gemm = d;
        return 1;
    }
    if (strcmp(flag, "-plan-net-eff") == 0) {
        if (!planx_parse_double(value, &d) || d <= 0 || d > 1) PLAN_BAD("a fraction in (0, 1]");
        r->k.net_eff = d;
        return 1;
    }
    if (strcmp(flag, "-plan-hbm-eff") == 0) {
        if (!planx_parse_double(value, &d) || d <= 0 || d > 1) PLAN_BAD("a fraction in (0, 1]");
        r->k.hbm_eff = d;
        r->k.kernel_hbm = d;
        return 1;
    }
    if (strcmp(flag, "-plan-workspace") == 0) PLAN_NONNEG(r->k.workspace_gb);
    if (strcmp(flag, "-plan-headroom") == 0) {
        if (!planx_parse_double(value, &d) || d < 0 || d >= 1) PLAN_BAD("a fraction in [0, 1)");
        r->k.headroom = d;
        return 1;
    }
    if (strcmp(flag, "-plan-w-share") == 0) {
        if (!planx_parse_double(value, &d) || d < 0 || d > 1) PLAN_BAD("a fraction in [0, 1]");
        r->k.w_share = d;
        return 1;
    }
    if (strcmp(flag, "-plan-schedule") == 0) {
        if (!plan_parse_schedules(value, &r->sched_mask))
            PLAN_BAD("a comma-separated list of 1f1b, interleaved, zb-h1, or any");
        return 1;
    }
    if (strcmp(flag, "-plan-schedules") == 0) {
        if (!planx_parse_int(value, &n) || n < 0 || n > 1) PLAN_BAD("0 or 1");
        r->compare_sched = n;
        return 1;
    }
    if (strcmp(flag, "-plan-top") == 0) {
        if (!planx_parse_int(value, &n) || n < 0) PLAN_BAD("an integer >= 0 (0 = all)");
        r->top = n;
        return 1;
    }
    if (strcmp(flag, "-plan-csv") == 0) {
        if (value == NULL || value[0] == '\0' || value[0] == '-') PLAN_BAD("a file path (not starting with '-')");
        r->csv_path = value;
        return 1;
    }
    if (strcmp(flag, "-scaling") == 0) {
        /* comma-separated node counts, e.g. 280,350,420,560 */
        int cnt = 0;
        const char* p = value;
        if (p == NULL || *p == '\0') PLAN_BAD("a comma-separated list of node counts, e.g. 280,350,420");
        while (*p) {
            char* end;
            long v = strtol(p, &end, 10);
            if (end == p || v <= 0 || v > 1000000 || cnt >= PLAN_MAX_SCALING || (*end != ',' && *end != '\0'))
                PLAN_BAD("a comma-separated list of up to 32 positive node counts, e.g. 280,350,420");
            r->scaling_nodes[cnt++] = (int)v;
            p = (*end == ',') ? end + 1 : end;
            if (*end == ',' && *p == '\0') PLAN_BAD("a comma-separated list of node counts, e.g. 280,350,420");
        }
        r->scaling_n = cnt;
        return 1;
    }
#undef PLAN_BAD
#undef PLAN_POS
#undef PLAN_NONNEG
    return 0;
}

static inline int plan_is_flag(const char* flag) {
    static const char* F[] = {
        "-cluster",       "-nodes",          "-gpus-per-node", "-peak",           "-gpu-mem",  "-bw-hbm",
        "-bw-intra",      "-bw-inter",       "-latency",       "-latency-intra",  "-plan-eff", "-plan-net-eff",
        "-plan-hbm-eff",  "-plan-workspace", "-plan-headroom", "-plan-top",       "-plan-csv", "-scaling",
        "-plan-gemm-dim", "-plan-w-share",   "-plan-schedule", "-plan-schedules", "-fs-bw",    "-d2h-bw"};
    for (size_t i = 0; i < sizeof(F) / sizeof(F[0]); i++)
        if (strcmp(F[i], flag) == 0) return 1;
    return 0;
}

static inline int plan_parse_flag(PlanRequest* r, const char* flag, const char* value) {
    char err[PLAN_ERR_LEN];
    if (!plan_is_flag(flag)) return 0;
    int rc = plan_parse_flag_err(r, flag, value, err, sizeof(err));
    if (rc < 0) fprintf(stderr, "plan: %s\n", err);
    return rc;
}

/* 1 if argv holds `flag` (so the trainer can tell a layout flag the user gave from its
 * default, and leave the rest for the planner to search). */
static inline int plan_argv_has(int argc, char** argv, const char* flag) {
    for (int i = 1; i < argc; i++)
        if (strcmp(argv[i], flag) == 0) return 1;
    return 0;
}

/* Adapter with config.h's ExtraFlagFn signature: user is a PlanRequest*, err holds
 * PLAN_ERR_LEN bytes. Steps *i over the value when it consumes the flag. */
static inline int plan_config_flag(void* user, int argc, char** argv, int* i, char* err) {
    PlanRequest* r = (PlanRequest*)user;
    const char* f = argv[*i];
    if (!plan_is_flag(f)) return 0;
    if (*i + 1 >= argc) {
        snprintf(err, PLAN_ERR_LEN, "flag %s needs a value", f);
        return -1;
    }
    int rc = plan_parse_flag_err(r, f, argv[*i + 1], err, PLAN_ERR_LEN);
    if (rc == 1) (*i)++;
    return rc;
}

/* ------------------------------------------------------------------------------------ */
/* parameters and FLOPs                                                                   */

/* One transformer block on one TP rank. Per block: QKV 3H^2 + 3H, attention out H^2 + H,
 * fc1 4H^2 + 4H, fc2 4H^2 + H, two LayerNorms 4H: 12H^2 + 13H in all. Megatron split:
 * the matrices and the column-parallel biases (QKV, fc1: 7H) are divided by TP; the
 * row-parallel biases (2H) and LayerNorms (4H) are replicated. */
static inline double plan_layer_params_gpu(const PlanModel* m, int tp) {
    double H = m->H;
    return 12.0 * H * H / tp + 7.0 * H / tp + 6.0 * H;
}

/* Parameters one GPU of pipeline stage `stage` holds. Stage 0 adds the vocab-parallel
 * token embedding (V*H/TP) and the replicated position embedding (seq*H); the last stage
 * adds the final LayerNorm (2H) and, when PP > 1, its own copy of the tied LM head
 * (V*H/TP), kept in sync by the embedding-group all-reduce. */
static inline double plan_stage_params(const PlanModel* m, int tp, int pp, int stage) {
    double p = (double)(m->L / pp) * plan_layer_params_gpu(m, tp);
    if (stage == 0) p += (double)m->V * m->H / tp + (double)m->seq * m->H;
    if (stage == pp - 1) {
        p += 2.0 * m->H;
        if (pp > 1) p += (double)m->V * m->H / tp;
    }
    return p;
}

static inline double plan_total_params(const PlanModel* m) {
    double H = m->H;
    return m->L * (12.0 * H * H + 13.0 * H) + (double)m->V * H + (double)m->seq * H + 2.0 * H;
}

/* The paper's FLOPs per iteration (doc/spec.md section 5): F = 24 f B s L H^2 (1 + s/(6H) + V/(16 L H)),
 * f = 4 with full activation recomputation, else 3. B = global batch in sequences. */
static inline double plan_paper_flops(const PlanModel* m, double gb, int recompute) {
    double f = recompute ? 4.0 : 3.0, s = m->seq, L = m->L, H = m->H, V = m->V;
    return 24.0 * f * gb * s * L * H * H * (1.0 + s / (6.0 * H) + V / (16.0 * L * H));
}
static inline double plan_tflops_per_gpu(const PlanModel* m, double gb, int recompute, double iter_s, int gpus) {
    return plan_paper_flops(m, gb, recompute) / (iter_s * gpus) / 1e12;
}
/* Model FLOPs per iteration: the paper's formula with f = 3 (doc/spec.md section 5), the same
 * count the trainers' MFU uses, so -plan and a run report one MFU. Forward + backward of
 * the transformer, 3 x (24bsH^2 + 4bs^2H) per layer, and of the LM head (4.5bsHV in the
 * paper's count; Korthikanti et al. 2022 count 6bsHV, 0.05% more at 530B). */
static inline double plan_model_flops(const PlanModel* m, double gb) { return plan_paper_flops(m, gb, 0); }
/* Hardware FLOPs: model FLOPs plus what recomputation runs again. Full: every layer's
 * forward (24bsH^2 + 4bs^2H): the paper's formula with f = 4 (whose head term grows with f
 * as well, 1.5BsVH, 0.04% of the total at 530B). Selective: the attention core's forward, QK^T and P*V,
 * 4bs^2H per layer. */
static inline double plan_hw_flops(const PlanModel* m, double gb, int recompute) {
    double s = m->seq, L = m->L, H = m->H;
    double x = 0.0;
    if (recompute == PLAN_RC_FULL) return plan_paper_flops(m, gb, 1);
    if (recompute == PLAN_RC_SELECTIVE) x = 4.0 * gb * s * s * L * H;
    return plan_model_flops(m, gb) + x;
}

/* ------------------------------------------------------------------------------------ */
/* context parallelism                                                                    */

/* CP (the trainers' -cp, doc/cp.md): each sequence is cut into 2 CP chunks and a CP rank holds
 * two of them (r and 2CP-1-r), so it keeps seq/CP rows and every rank does the same causal
 * attention work. The rank order is TP fastest, then CP, then DP, then PP:
 * rank = tp + TP*cp + TP*CP*dp + TP*CP*DP*pp, the 3D formula with CP x DP in DP's place. */
static inline int plan_cp(const PlanLayout* l) { return l->cp > 1 ? l->cp : 1; }
/* CP ranks hold the same weights, each with the gradient of its rows: gradients are reduced,
 * and ZeRO shards, over the CP x DP group. The batch does not change with CP: the micro-batches
 * per pipeline stay gb/(mb*DP). */
static inline int plan_grad_group(const PlanLayout* l) { return plan_cp(l) * l->dp; }
/* The model as a CP rank sees it row by row: seq/CP rows (the LayerNorms, GEMMs, the head,
 * the pipeline's and TP's messages); attention alone needs the whole sequence's keys. */
static inline PlanModel plan_cp_rows(const PlanModel* m, const PlanLayout* l) {
    PlanModel r = *m;
    r.seq = m->seq / plan_cp(l);
    return r;
}
/* When CP is searched (no -cp given): from PLAN_CP_MIN_SEQ tokens on, over every CP that cuts the
 * sequence into 2 CP chunks and leaves a rank at least PLAN_CP_MIN_ROWS rows. Below 8192 tokens
 * the activations are not what fills a GPU (the paper's 2048 fits with SP and selective
 * recomputation), and a rank's ring blocks would be too small to hide their transfers; the
 * floor of 1024 rows bounds the search (CP <= seq/1024) for the same reason. */
#define PLAN_CP_MIN_SEQ 8192
#define PLAN_CP_MIN_ROWS 1024
static inline int plan_cp_searched(const PlanRequest* r) { return r->cp <= 0 && r->model.seq >= PLAN_CP_MIN_SEQ; }
/* Does the CP column belong in the tables (CP given above 1, or searched)? */
static inline int planx_cp_shown(const PlanRequest* r) { return r->cp > 1 || plan_cp_searched(r); }

/* The ring's buffers on a CP rank, one set for every layer (the CUDA trainer's, attention_ring.cuh):
 * the K|V block computed on and the one arriving, bf16 (b, s/CP, 2H/TP) each; the dK|dV partials
 * passed on and arriving, fp32, two likewise; D = rowsum(dO * O), fp32 (b, a/TP, s/CP):
 * 24 b (s/CP) H/TP + 4 b a (s/CP)/TP bytes. */
static inline double plan_cp_ring_bytes(const PlanModel* m, const PlanLayout* l) {
    int cp = plan_cp(l);
    if (cp <= 1) return 0.0;
    double rows = (double)l->mb * (m->seq / cp);
    return 24.0 * rows * m->H / l->tp + 4.0 * rows * m->heads / l->tp;
}

/* ------------------------------------------------------------------------------------ */
/* memory                                                                                 */

/* Activation bytes one layer stores for backward, one micro-batch of mb sequences, on one
 * TP rank, bf16, no recomputation. Korthikanti et al. 2022 (Reducing Activation
 * Recomputation), their eq. without sequence parallelism, minus the dropout terms (this
 * model has no dropout): replicated on every TP rank 8sbh (LN1 in, LN2 in, QKV in, fc1 in:
 * 2 bytes each), split 24sbh/TP (Q, K, V, attention-out in, GeLU in 4H, fc2 in 4H),
 * and the materialised softmax 2*a*s^2*b/TP (no FlashAttention). */
static inline double plan_layer_act_bytes(const PlanModel* m, int tp, int mb) {
    double s = m->seq, b = mb, H = m->H, a = m->heads;
    return s * b * H * (8.0 + 24.0 / tp) + 2.0 * a * s * s * b / tp;
}
/* With full recomputation a layer keeps only its bf16 input (2sbh, replicated on TP ranks). */
static inline double plan_layer_ckpt_bytes(const PlanModel* m, int mb) { return 2.0 * m->seq * (double)mb * m->H; }
/* 1F1B keeps min(PP - stage, m) micro-batches in flight on a stage (stage 0 the most). */
static inline int plan_inflight(int pp, int stage, int m) {
    int k = pp - stage;
    return k < m ? k : m;
}
/* Bytes one layer keeps between its forward and its backward, for every recompute mode and
 * SP (Korthikanti et al. 2022, Table 2, without dropout, bf16, attention materialised):
 *   none:      sbh(8 + 24/t) + 2as^2b/t;  with SP the replicated 8sbh is split too: 32sbh/t + 2as^2b/t
 *   selective: the attention probabilities 2as^2b/t are dropped (rebuilt in backward)
 *   full:      the layer input 2sbh, a 1/t shard of it with SP.
 * The same choices as the trainers (doc/sp_recompute_vpp.md), there in fp32 (2x). */
static inline double plan_layer_keep_bytes(const PlanModel* m, int tp, int mb, int sp, int rc) {
    double s = m->seq, b = mb, H = m->H, a = m->heads, t = tp, spd = sp ? t : 1.0;
    if (rc == PLAN_RC_FULL) return 2.0 * s * b * H / spd;
    double keep = s * b * H * (8.0 / spd + 24.0 / t);
    if (rc != PLAN_RC_SELECTIVE) keep += 2.0 * a * s * s * b / t;
    return keep;
}
/* Working set a recomputation rebuilds during one layer's backward: full rebuilds one whole
 * layer's activations; selective one layer's attention probabilities (one buffer shared
 * by all layers, as in the CPU trainer). */
static inline double plan_recompute_work_bytes(const PlanModel* m, int tp, int mb, int sp, int rc) {
    if (rc == PLAN_RC_FULL) return plan_layer_keep_bytes(m, tp, mb, sp, PLAN_RC_NONE);
    if (rc == PLAN_RC_SELECTIVE) return 2.0 * m->heads * (double)m->seq * m->seq * mb / tp;
    return 0.0;
}
/* The same two on a cluster whose trainer runs flash attention (h100, h200: the CUDA trainer,
 * doc/cuda.md): the probabilities are never stored, only their fp32 log-sum-exp (4asb/t bytes
 * per layer), so selective keeps what no recomputation keeps and rebuilds nothing. flash 0:
 * the materialised model above (selene-a100: Megatron's 2021 kernels, the paper's run). */
static inline double plan_layer_keep_bytes_attn(const PlanModel* m, int tp, int mb, int sp, int rc, int flash) {
    if (!flash || rc == PLAN_RC_FULL) return plan_layer_keep_bytes(m, tp, mb, sp, rc);
    return plan_layer_keep_bytes(m, tp, mb, sp, PLAN_RC_SELECTIVE) + 4.0 * m->heads * (double)m->seq * mb / tp;
}
static inline double plan_recompute_work_bytes_attn(const PlanModel* m, int tp, int mb, int sp, int rc, int flash) {
    if (!flash) return plan_recompute_work_bytes(m, tp, mb, sp, rc);
    return rc == PLAN_RC_FULL ? plan_layer_keep_bytes_attn(m, tp, mb, sp, PLAN_RC_NONE, 1) : 0.0;
}
/* Interleaved 1F1B (V > 1): rank r runs 2(PP-r-1) + (V-1)PP warm-up forwards of model
 * chunks, so at most that + 1 (chunk, micro-batch) units hold activations (Narayanan et al.
 * 2021; the bound the trainer's schedule test checks), each of L/(PP*V) layers. Returns
 * the number of layers' activations held, in units of one layer. */
static inline double plan_inflight_layers(int L, int pp, int vpp, int stage, int m) {
    if (vpp <= 1) return (double)plan_inflight(pp, stage, m) * (L / pp);
    long units = 2L * (pp - stage - 1) + (long)(vpp - 1) * pp + 1;
    if (units > (long)vpp * m) units = (long)vpp * m;
    return (double)units * (L / (pp * vpp));
}

/* What one layer keeps for a deferred W (zero-bubble schedules) once its B has run, as the
 * trainers' W stash holds it (bf16): the inputs of its four weight GEMMs, QKV's (LN1 out) and
 * fc1's (LN2 out) sbh each, attention-out's sbh/TP and fc2's (GeLU out) 4sbh/TP, and their
 * output gradients, the layer's and resid2's sbh each, fc1's 4sbh/TP and QKV's 3sbh/TP. What
 * SP splits along the sequence is kept as a 1/TP shard and re-gathered in W (as Megatron
 * does in the backward): sbh(8/spd + 24/TP). Without recomputation this is about what the
 * layer kept for B (M_W ~ M_B); with full recomputation the recomputed inputs must outlive
 * B, so it is more than the 2sbh checkpoint. */
static inline double plan_layer_w_bytes(const PlanModel* m, int tp, int mb, int sp) {
    double sbh = (double)m->seq * mb * m->H, spd = sp ? tp : 1;
    return sbh * (8.0 / spd + 24.0 / tp);
}
/* ZB-H1 (Qi et al. 2024, section 2.1): stage r runs F_x, B_(x-PP+1+r), W_(x-PP+1), so its W
 * lags its B by r micro-batches: r deferred W's on top of 1F1B's min(PP - r, m) in flight
 * (stage 0 none). Capped so that at most m are held. The trainers hold one stash more (the
 * unit between its B and its W: r + 1, llmc/host/layout.h's pipe_w_pending_max for m >= PP),
 * which plan_memory_stage counts. */
static inline int plan_zb_backlog(int pp, int stage, int m) {
    int left = m - plan_inflight(pp, stage, m);
    return stage < left ? stage : left;
}

/* The ZeRO level in effect: over one rank of the CP x DP group every level is plain AdamW, as
 * in the trainers (llmc/host/memplan.h). */
static inline int plan_zero_eff(const PlanLayout* l) { return plan_grad_group(l) > 1 ? l->zero : 0; }

/* Memory of one GPU of one stage (bytes). m = micro-batches per pipeline per iteration;
 * flash: the cluster's trainer runs flash attention (plan_layer_keep_bytes_attn). With CP every
 * activation term counts the rank's seq/CP rows, attention keeps its log-sum-exp whatever the
 * cluster (ring attention merges blocks by it: no s x s probabilities), and the ring's buffers
 * are added (plan_cp_ring_bytes). */
static inline void planx_memory_stage(const PlanModel* mfull, const PlanConsts* k, const PlanLayout* l, int m,
                                      int stage, int flash, PlanMem* o) {
    PlanModel rows = plan_cp_rows(mfull, l);
    const PlanModel* md = &rows;
    double sbh = (double)md->seq * l->mb * md->H;
    if (plan_cp(l) > 1) flash = 1;
    memset(o, 0, sizeof(*o));
    o->stage = stage;
    o->params = plan_stage_params(mfull, l->tp, l->pp, stage); /* the position embedding stays whole */
    /* Mixed precision as the CUDA trainer does it: bf16 weights for compute, fp32
     * gradients, fp32 master weights and Adam moments. ZeRO-1 shards the last three (master,
     * m, v) over DP, the gradients stay whole (doc/spec.md section 3). ZeRO-2 also shards the
     * gradients: the 1/DP shard the reductions sum into, one layer's scratch the backward
     * writes, and the rest (embeddings, final LayerNorm), kept whole and reduced once per
     * step. ZeRO-3 also the bf16 weights: the 1/DP shard, the rest whole, and two one-layer
     * windows (the layer computing and the one prefetched). As llmc/host/zero.h does it. */
    double P = o->params, Pl = plan_layer_params_gpu(md, l->tp), rest = P - (double)(md->L / l->pp) * Pl;
    int z = plan_zero_eff(l);
    double shard = P / plan_grad_group(l);
    o->weights = z >= 3 ? 2.0 * (shard + rest + 2.0 * Pl) : 2.0 * P;
    o->grads = z >= 2 ? 4.0 * (shard + rest + Pl) : 4.0 * P;
    o->optim = 12.0 * (z ? shard : P);
    int inflight = plan_inflight(l->pp, stage, m);
    /* what every in-flight layer keeps, plus the recompute working set */
    o->act = plan_inflight_layers(md->L, l->pp, l->vpp, stage, m) *
                 plan_layer_keep_bytes_attn(md, l->tp, l->mb, l->sp, l->recompute, flash) +
             plan_recompute_work_bytes_attn(md, l->tp, l->mb, l->sp, l->recompute, flash);
    if (l->sched == PLAN_SCHED_ZBH1)
        o->act += (double)(plan_zb_backlog(l->pp, stage, m) + 1) * (md->L / l->pp) *
                  plan_layer_w_bytes(md, l->tp, l->mb, l->sp);
    o->act += plan_cp_ring_bytes(mfull, l);
    /* buffers every stage has: p2p send/recv of activations and their gradients, the
     * backward's running dx in/out (6 tensors of b*s*H bf16; 1/TP shards with SP) */
    o->extra = 6.0 * 2.0 * sbh / (l->sp ? l->tp : 1);
    if (stage == l->pp - 1) {
        /* LM-head stage: bf16 logits and fp32 softmax/grad of b*s*V/TP, final LN in and
         * out (one micro-batch at a time: the last stage runs F then B back to back) */
        o->extra += (double)md->seq * l->mb * md->V / l->tp * 6.0 + 4.0 * sbh;
    }
    if (stage == 0) {
        /* embedding stage: token ids and the embedding output of the in-flight
         * micro-batches (already counted as layer 0's input), so only ids here */
        o->extra += 4.0 * md->seq * (double)l->mb * inflight;
    }
    o->workspace = k->workspace_gb * 1073741824.0;
    o->total = o->weights + o->grads + o->optim + o->act + o->extra + o->workspace;
}
/* the materialised-attention model (selene-a100) */
static inline void plan_memory_stage(const PlanModel* md, const PlanConsts* k, const PlanLayout* l, int m, int stage,
                                     PlanMem* o) {
    planx_memory_stage(md, k, l, m, stage, 0, o);
}

/* Worst stage's memory for a layout on cluster c (flash attention where c's compute is the
 * CUDA trainer's per-kernel model). */
static inline void plan_memory_c(const PlanModel* md, const Cluster* c, const PlanConsts* k, const PlanLayout* l, int m,
                                 PlanMem* out) {
    PlanMem cur;
    planx_memory_stage(md, k, l, m, 0, c->kernels, out);
    for (int j = 1; j < l->pp; j++) {
        planx_memory_stage(md, k, l, m, j, c->kernels, &cur);
        if (cur.total > out->total) *out = cur;
    }
}
/* the same with materialised attention (selene-a100) */
static inline void plan_memory(const PlanModel* md, const PlanConsts* k, const PlanLayout* l, int m, PlanMem* out) {
    Cluster c;
    memset(&c, 0, sizeof(c));
    plan_memory_c(md, &c, k, l, m, out);
}

/* ------------------------------------------------------------------------------------ */
/* time: building blocks                                                                  */

/* Ring all-reduce of `bytes` over n ranks on links of bw_gbps (already times net_eff):
 * 2(n-1)/n * bytes / bw + 2(n-1) steps of latency. */
static inline double plan_ring_allreduce_s(double bytes, int n, double bw_gbps, double lat_us) {
    if (n <= 1 || bytes <= 0) return 0.0;
    return 2.0 * (n - 1) / n * bytes / (bw_gbps * 1e9) + 2.0 * (n - 1) * lat_us * 1e-6;
}
/* Ring reduce-scatter or all-gather: half an all-reduce. `bytes` = the full tensor. */
static inline double plan_reduce_scatter_s(double bytes, int n, double bw_gbps, double lat_us) {
    if (n <= 1 || bytes <= 0) return 0.0;
    return (double)(n - 1) / n * bytes / (bw_gbps * 1e9) + (n - 1) * lat_us * 1e-6;
}
static inline double plan_p2p_s(double bytes, double bw_gbps, double lat_us) {
    return bytes / (bw_gbps * 1e9) + lat_us * 1e-6;
}

/* One GEMM (batch x [M,K]@[K,N]) in bf16: a roofline, the larger of its FLOPs at
 * the shape's efficiency of peak and its bytes (A, B read, C written once) at hbm_eff of HBM bandwidth.
 * The second term only matters for small models / skinny shards. */
static inline double plan_gemm_eff(double M, double N, double K, const PlanConsts* k) {
    double d0 = k->gemm_dim0;
    return k->gemm_eff * (M / (M + d0)) * (N / (N + d0)) * (K / (K + d0));
}
static inline double plan_gemm_s(double M, double N, double K, double batch, const Cluster* c, const PlanConsts* k) {
    double flops = 2.0 * M * N * K * batch;
    double bytes = 2.0 * (M * K + K * N + M * N) * batch;
    double tc = flops / (plan_gemm_eff(M, N, K, k) * c->peak_tflops * 1e12);
    double tm = bytes / (k->hbm_eff * c->hbm_gbps * 1e9);
    return tc > tm ? tc : tm;
}

/* Forward of one transformer layer, one micro-batch, one TP rank: GEMM time and
 * memory-bound (elementwise) time. Backward = 2x forward; recomputation adds 1x.
 * Elementwise bytes in the forward (bf16, read + write): LN1 and LN2 4sbh each, two
 * residual adds 6sbh each, q/k/v permutes 12sbh/TP, attention-out unpermute 4sbh/TP,
 * GeLU 16sbh/TP, scale+mask+softmax 4*a*s^2*b/TP: 20sbh + 32sbh/TP + 4as^2b/TP.
 * (Biases are fused into GEMM epilogues.) */
/* With CP (cp > 1) a rank runs the row-wise work on its s/CP rows and the attention of its
 * rows against every key: 1/CP of the whole sequence's attention (the ring's load-balanced
 * chunks), Q K^T and att V as (s/CP) x s per head, its softmax 4a(s/CP)sb/TP bytes. */
static inline void plan_layer_fwd_cp(const PlanModel* md, int tp, int mb, int sp, int cp, const Cluster* c,
                                     const PlanConsts* k, double* gemm_s, double* mem_s) {
    double s = md->seq, sl = md->seq / (cp > 1 ? cp : 1), b = mb, H = md->H, a = md->heads,
           d = (double)md->H / md->heads;
    double bs = b * sl, hp = a / tp * b; /* attention GEMMs are batched over local heads x batch */
    double g = 0.0;
    g += plan_gemm_s(bs, 3.0 * H / tp, H, 1, c, k); /* QKV (column-parallel) */
    g += plan_gemm_s(sl, s, d, hp, c, k);           /* Q K^T */
    g += plan_gemm_s(sl, d, s, hp, c, k);           /* att V */
    g += plan_gemm_s(bs, H, H / tp, 1, c, k);       /* attention out (row-parallel) */
    g += plan_gemm_s(bs, 4.0 * H / tp, H, 1, c, k); /* fc1 (column-parallel) */
    g += plan_gemm_s(bs, H, 4.0 * H / tp, 1, c, k); /* fc2 (row-parallel) */
    double sbh = sl * b * H;
    /* with SP the LayerNorms and residual adds (the 20sbh) work on a 1/TP shard */
    double bytes = 20.0 * sbh / (sp ? tp : 1) + 32.0 * sbh / tp + 4.0 * a * sl * s * b / tp;
    *gemm_s = g;
    *mem_s = bytes / (k->hbm_eff * c->hbm_gbps * 1e9);
}
static inline void plan_layer_fwd_sp(const PlanModel* md, int tp, int mb, int sp, const Cluster* c, const PlanConsts* k,
                                     double* gemm_s, double* mem_s) {
    plan_layer_fwd_cp(md, tp, mb, sp, 1, c, k, gemm_s, mem_s);
}
static inline void plan_layer_fwd(const PlanModel* md, int tp, int mb, const Cluster* c, const PlanConsts* k,
                                  double* gemm_s, double* mem_s) {
    plan_layer_fwd_sp(md, tp, mb, 0, c, k, gemm_s, mem_s);
}
/* What selective recomputation runs again per layer: the attention core's forward, Q K^T
 * and att V (4bs^2H/TP FLOPs) and scale + mask + softmax (4as^2b/TP bytes); a CP rank's share
 * of it with cp > 1 (its s/CP rows against every key). */
static inline void plan_attn_core_fwd_cp(const PlanModel* md, int tp, int mb, int cp, const Cluster* c,
                                         const PlanConsts* k, double* gemm_s, double* mem_s) {
    double s = md->seq, sl = md->seq / (cp > 1 ? cp : 1), a = md->heads, d = (double)md->H / md->heads,
           hp = a / tp * mb;
    *gemm_s = plan_gemm_s(sl, s, d, hp, c, k) + plan_gemm_s(sl, d, s, hp, c, k);
    *mem_s = 4.0 * a * sl * s * mb / tp / (k->hbm_eff * c->hbm_gbps * 1e9);
}
static inline void plan_attn_core_fwd(const PlanModel* md, int tp, int mb, const Cluster* c, const PlanConsts* k,
                                      double* gemm_s, double* mem_s) {
    plan_attn_core_fwd_cp(md, tp, mb, 1, c, k, gemm_s, mem_s);
}

/* Does a group of ranks {base + stride*i, i < count} span more than one node? Ranks are
 * placed on nodes in order (node = rank / gpus_per_node), so only the ends matter. */
static inline int plan_group_crosses_node(long base, long stride, long count, int gpn) {
    if (count <= 1) return 0;
    return base / gpn != (base + stride * (count - 1)) / gpn;
}
/* Which of the TP / CP / PP / DP groups cross nodes, with the spec's (doc/spec.md) rank order
 * and CP after TP (doc/design.md): rank = tp + TP*cp + TP*CP*dp + TP*CP*DP*pp, i.e. with
 * dpc = cp + CP*dp and D = CP*DP, rank = tp + TP*dpc + TP*D*pp. Any crossing group makes that
 * dimension use the inter-node link (the ring runs at its slowest hop, and 1F1B at its slowest
 * stage). dp_inter is the gradient group's, CP x DP (stride TP, D ranks); cp_inter the CP
 * ring's (stride TP, CP ranks): inside a node when TP*CP <= GPUs per node (and divides it). */
static inline void plan_links_cp(const PlanLayout* l, int gpn, int* tp_inter, int* pp_inter, int* dp_inter,
                                 int* cp_inter) {
    long TP = l->tp, PP = l->pp, CP = plan_cp(l), D = (long)plan_cp(l) * l->dp;
    *tp_inter = *pp_inter = *dp_inter = *cp_inter = 0;
    for (long p = 0; p < PP && !*tp_inter; p++)
        for (long d = 0; d < D && !*tp_inter; d++)
            if (plan_group_crosses_node(TP * d + TP * D * p, 1, TP, gpn)) *tp_inter = 1;
    for (long t = 0; t < TP && !*pp_inter; t++)
        for (long d = 0; d < D && !*pp_inter; d++)
            if (plan_group_crosses_node(t + TP * d, TP * D, PP, gpn)) *pp_inter = 1;
    for (long t = 0; t < TP && !*dp_inter; t++)
        for (long p = 0; p < PP && !*dp_inter; p++)
            if (plan_group_crosses_node(t + TP * D * p, TP, D, gpn)) *dp_inter = 1;
    for (long t = 0; t < TP && CP > 1 && !*cp_inter; t++)
        for (long p = 0; p < PP && !*cp_inter; p++)
            for (long d = 0; d < l->dp && !*cp_inter; d++)
                if (plan_group_crosses_node(t + TP * CP * d + TP * D * p, TP, CP, gpn)) *cp_inter = 1;
}
static inline void plan_links(const PlanLayout* l, int gpn, int* tp_inter, int* pp_inter, int* dp_inter) {
    int cp_inter;
    plan_links_cp(l, gpn, tp_inter, pp_inter, dp_inter, &cp_inter);
}

/* One micro-batch slot (forward + backward, + recompute) on pipeline stage j: its parts
 * gemm + mem + tp + pp, and the same time split by pass: f the forward (F), w the weight-
 * gradient GEMMs (W); the rest is B (activation gradients, recomputation, their comm). */
typedef struct {
    double gemm, mem, tp, pp;
    double dp;   /* ZeRO-2/3's DP traffic not hidden behind compute (plan_time adds it: plan_zero_slot_s) */
    double cp;   /* CP: the ring's transfers not hidden behind the attention blocks (plan_cp_ring_s) */
    double ring; /* CP: the ring's transfers in all (reported, not added) */
    double f, w;
    int tp_inter, pp_inter, cp_inter;
} PlanSlot;

/* The h100 and h200 clusters: the compute of one slot from the per-kernel model of gpu_step.h
 * (the cost model's, dev/cuda/costmodel.py), kernel by kernel as train_gpt.cu launches them on
 * one TP rank: each layer's 12 cuBLASLt GEMMs on their TP shards (wave quantization, k, epilogue),
 * cuDNN flash attention on heads/TP (causal FLOPs, and the deterministic backward's dP workspace),
 * the memory-bound kernels' counted bytes (the residual/LayerNorm traffic outside the TP region
 * is 1/TP with SP), a fixed cost per launch and the gaps between launches; the first stage's
 * embedding and uploads, the last stage's LM head and fused cross-entropy. Full recomputation
 * runs each layer's forward twice; selective recomputes nothing with flash attention (the
 * trainer keeps what no recomputation keeps). gemm gets the GEMMs and attention, mem the rest. */
static inline GpuStepDevice plan_device(const Cluster* c) {
    GpuStepDevice d = {c->peak_tflops, c->hbm_gbps, c->sms};
    return d;
}
static inline GpuStepCase plan_step_case(const PlanConsts* k) {
    GpuStepCase g = gpu_step_case(GS_MID);
    g.a[GS_GEMM_SUSTAINED] = k->kernel_gemm;
    g.a[GS_HBM_EFF] = k->kernel_hbm;
    return g;
}
/* With CP the row-wise kernels run on the rank's mb*seq/CP rows and attention is 1/CP of the
 * whole sequence's (the load-balanced chunks), each ring step launching its kernels again. */
static inline void plan_slot_kernels(const PlanModel* md, const Cluster* c, const PlanConsts* k, const PlanLayout* l,
                                     int stage, PlanSlot* o) {
    GpuStepDevice d = plan_device(c);
    GpuStepCase g = plan_step_case(k);
    int cp = plan_cp(l);
    double C = md->H, BT = (double)l->mb * (md->seq / cp), Vp = md->V, T = md->seq;
    double heads = (double)md->heads / l->tp, hs = (double)md->H / md->heads;
    double spd = l->sp ? l->tp : 1, gap = g.a[GS_LAUNCH_GAP_US] * 1e-6;
    int layers = md->L / l->pp, fwd_runs = l->recompute == PLAN_RC_FULL ? 2 : 1, n = 0;
    double pass[3] = {0.0, 0.0, 0.0}, launch[3] = {0.0, 0.0, 0.0}; /* one layer's GEMMs by pass */
    const GpuStepGemm* gm = gpu_step_gemms(0, &n);
    for (int i = 0; i < n; i++) {
        pass[gm[i].pass] +=
            gpu_step_gemm_s(gpu_step_dim(gm[i].m, C, BT, Vp, l->tp), gpu_step_dim(gm[i].n, C, BT, Vp, l->tp),
                            gpu_step_dim(gm[i].k, C, BT, Vp, l->tp), gm[i].dbytes, gm[i].epi, &d, &g);
        launch[gm[i].pass] += 1.0;
    }
    double attn_f = gpu_step_attn_fwd_s(l->mb, heads, T, hs, &g) / cp;
    double attn_b = gpu_step_attn_bwd_s(l->mb, heads, T, hs, &d, &g) / cp;
    double nf = launch[GSP_F] + cp * gpu_step_counted(GSN_ATTN_FWD_LAUNCHES) + gpu_step_counted(GSN_LAYER_FWD_LAUNCHES);
    double nb = launch[GSP_B] + launch[GSP_W] + cp * gpu_step_counted(GSN_ATTN_BWD_LAUNCHES) +
                gpu_step_counted(GSN_LAYER_BWD_LAUNCHES);
    /* the forward's memory-bound kernels; the backward's, with the fp32 adds of the bias
     * gradients (QKV 3C and fc1 4C split over TP, attention projection and fc2 C each whole) */
    double mem_f = gpu_step_mem_s(gpu_step_counted(GSN_LAYER_FWD_BYTES) * BT * C / spd,
                                  gpu_step_counted(GSN_LAYER_FWD_LAUNCHES), &d, &g);
    double mem_b = gpu_step_mem_s(gpu_step_counted(GSN_LAYER_BWD_BYTES) * BT * C / spd +
                                      gpu_step_counted(GSN_BIAS_ACC_BYTES) * (7.0 * C / l->tp + 2.0 * C),
                                  gpu_step_counted(GSN_LAYER_BWD_LAUNCHES), &d, &g);
    double launches = layers * (fwd_runs * nf + nb);
    o->gemm = layers * (fwd_runs * (pass[GSP_F] + attn_f) + pass[GSP_B] + pass[GSP_W] + attn_b);
    o->mem = layers * (fwd_runs * mem_f + mem_b) + launches * gap;
    o->f = layers * (pass[GSP_F] + attn_f + mem_f + nf * gap);
    o->w = k->w_share * layers * (pass[GSP_B] + pass[GSP_W]);
    if (stage == 0) {
        /* embedding forward and the first LayerNorm, the wte/wpe gradients, the uploads */
        double nfe = gpu_step_counted(GSN_FIRST_FWD_LAUNCHES), nbe = gpu_step_counted(GSN_FIRST_BWD_LAUNCHES);
        double fe = gpu_step_mem_s(gpu_step_counted(GSN_FIRST_FWD_BYTES) * BT * C, nfe, &d, &g) + nfe * gap;
        double up_bytes = 8.0 * BT + 4.0 * (2.0 * (BT < Vp ? BT : Vp) + 1.0 + BT); /* int32 tokens, targets, buckets */
        double up = gpu_step_counted(GSN_H2D_COPIES) * g.a[GS_COPY_US] * 1e-6 + up_bytes / (g.a[GS_PCIE_GBS] * 1e9) +
                    gpu_step_counted(GSN_GUARDS) * g.a[GS_GUARD_US] * 1e-6;
        o->mem += fe + gpu_step_mem_s(gpu_step_counted(GSN_FIRST_BWD_BYTES) * BT * C, nbe, &d, &g) + nbe * gap + up;
        o->f += fe + up;
        launches += nfe + nbe;
    }
    if (stage == l->pp - 1) {
        /* the LM head's three GEMMs (not recomputed), the fused cross-entropy (loss and logit
         * gradient in one pass: forward) and the final LayerNorm's backward */
        double hp[3] = {0.0, 0.0, 0.0};
        const GpuStepGemm* hg = gpu_step_gemms(1, &n);
        for (int i = 0; i < n; i++)
            hp[hg[i].pass] +=
                gpu_step_gemm_s(gpu_step_dim(hg[i].m, C, BT, Vp, l->tp), gpu_step_dim(hg[i].n, C, BT, Vp, l->tp),
                                gpu_step_dim(hg[i].k, C, BT, Vp, l->tp), hg[i].dbytes, hg[i].epi, &d, &g);
        double nfl = gpu_step_counted(GSN_LAST_FWD_LAUNCHES), nbl = gpu_step_counted(GSN_LAST_BWD_LAUNCHES);
        double ce = gpu_step_mem_s(gpu_step_counted(GSN_HEAD_BYTES) * BT * Vp / l->tp, nfl, &d, &g);
        double lnb = gpu_step_mem_s(gpu_step_counted(GSN_LAST_BWD_BYTES) * BT * C / spd, nbl, &d, &g);
        o->gemm += hp[GSP_F] + hp[GSP_B] + hp[GSP_W];
        o->mem += ce + lnb + (n + nfl + nbl) * gap;
        o->f += hp[GSP_F] + ce + (1 + nfl) * gap;
        o->w += k->w_share * (hp[GSP_B] + hp[GSP_W]);
        launches += n + nfl + nbl;
    }
    /* a host slower at issuing launches than the GPU at running them paces the slot */
    double host = launches * g.a[GS_HOST_LAUNCH_US] * 1e-6;
    if (host > o->gemm + o->mem) o->mem += host - (o->gemm + o->mem);
}

/* The CP ring's transfers in one layer and micro-batch on a CP rank (the CUDA trainer's,
 * attention_ring.cuh). Forward: CP-1 hops of a K|V block, bf16 (b, s/CP, 2H/TP), each received
 * while the rank computes on the block before it. Backward: CP-1 hops of a K|V block with its
 * dK|dV partial (fp32: twice the bytes), each against one block's backward, then one more hop
 * of the partials that brings each block's gradient home; nothing hides that one (the layer's
 * QKV backward waits for it). Every block is 1/CP of the rank's attention (each is half a
 * (s/CP)^2 square under the load-balanced chunks), so a hop costs max(0, transfer - block).
 * att_f, att_b: the rank's attention forward and backward of one layer. Out: the exposed
 * seconds of the forward and the backward, and the transfers' seconds in all of each. */
static inline void plan_cp_ring_s(const PlanModel* md, const Cluster* c, const PlanConsts* k, const PlanLayout* l,
                                  int cp_inter, double att_f, double att_b, double* fwd_x, double* bwd_x, double* fwd_t,
                                  double* bwd_t) {
    int cp = plan_cp(l);
    *fwd_x = *bwd_x = *fwd_t = *bwd_t = 0.0;
    if (cp <= 1) return;
    double bw = (cp_inter ? c->inter_gbps : c->intra_gbps) * k->net_eff;
    double lat = cp_inter ? c->latency_us : c->intra_latency_us;
    double blk = (double)l->mb * (md->seq / cp) * md->H / l->tp; /* elements of b (s/CP) H/TP */
    double kv = plan_p2p_s(4.0 * blk, bw, lat), dkv = plan_p2p_s(8.0 * blk, bw, lat);
    double bf = att_f / cp, bb = att_b / cp;
    *fwd_x = (cp - 1) * (kv > bf ? kv - bf : 0.0);
    *bwd_x = (cp - 1) * (kv + dkv > bb ? kv + dkv - bb : 0.0) + dkv;
    *fwd_t = (cp - 1) * kv;
    *bwd_t = (cp - 1) * (kv + dkv) + dkv;
}

/* One slot of stage `stage`; cp_inter: the CP ring crosses nodes. With CP (plan_cp(l) > 1) every
 * row-wise term counts the rank's seq/CP rows (GEMMs, memory-bound kernels, TP's all-reduces,
 * the pipeline's messages, the head), attention is 1/CP of the sequence's, and the ring's
 * exposed transfers are added (plan_cp_ring_s; full recomputation runs the forward's ring again). */
static inline void plan_slot_cp(const PlanModel* md, const Cluster* c, const PlanConsts* k, const PlanLayout* l,
                                int stage, int tp_inter, int pp_inter, int cp_inter, PlanSlot* o) {
    int cp = plan_cp(l);
    double s = md->seq / cp, b = l->mb, H = md->H, V = md->V;
    double sbh = s * b * H, act_bytes = 2.0 * sbh; /* one bf16 activation tensor [b, s, H] */
    int layers = md->L / l->pp;
    double spd = l->sp ? l->tp : 1; /* SP: tensors outside the TP region are 1/TP shards */
    double bw_tp = (tp_inter ? c->inter_gbps : c->intra_gbps) * k->net_eff;
    double lat_tp = tp_inter ? c->latency_us : c->intra_latency_us;
    double bw_pp = (pp_inter ? c->inter_gbps : c->intra_gbps) * k->net_eff;
    double lat_pp = pp_inter ? c->latency_us : c->intra_latency_us;
    double hbm = k->hbm_eff * c->hbm_gbps * 1e9;
    memset(o, 0, sizeof(*o));
    if (c->kernels) {
        plan_slot_kernels(md, c, k, l, stage, o);
    } else {
        /* the fitted model (the A100 clusters): each GEMM at gemm_eff x its shape term, the
         * layer's elementwise bytes at HBM rate, backward 2x forward, recompute 1x more */
        double fg, fm, attn_g, attn_m;
        int passes = 3 + (l->recompute == PLAN_RC_FULL ? 1 : 0);
        plan_layer_fwd_cp(md, l->tp, l->mb, l->sp, cp, c, k, &fg, &fm);
        o->gemm = layers * passes * fg;
        o->mem = layers * passes * fm;
        /* F and W (see w_share): the weight GEMMs are the layer's GEMMs less attention's two */
        plan_attn_core_fwd_cp(md, l->tp, l->mb, cp, c, k, &attn_g, &attn_m);
        o->f = layers * (fg + fm);
        o->w = k->w_share * 2.0 * layers * (fg - attn_g);
        if (l->recompute == PLAN_RC_SELECTIVE && cp == 1) { /* ring attention keeps its lse: nothing to rebuild */
            o->gemm += layers * attn_g;
            o->mem += layers * attn_m;
        }
        if (stage == 0) {
            /* embedding gather + position add (fwd ~6sbh bytes), backward scatter-add into fp32
             * gradients (~10sbh) */
            o->mem += 16.0 * sbh / hbm;
            o->f += 6.0 * sbh / hbm;
        }
        if (stage == l->pp - 1) {
            /* LM head: [bs, H] @ [H, V/TP] forward and 2x backward, not recomputed; final LN
             * (4sbh per pass, 3 passes); vocab-parallel cross-entropy reads logits and writes
             * their gradient twice (8 bytes per logit); the fused cross-entropy (loss and logit
             * gradient in one pass) counts as forward */
            double head_g = plan_gemm_s(b * s, V / l->tp, H, 1, c, k);
            o->gemm += 3.0 * head_g;
            o->mem += (12.0 * sbh / spd + 8.0 * b * s * V / l->tp) / hbm;
            o->f += head_g + (4.0 * sbh / spd + 8.0 * b * s * V / l->tp) / hbm;
            o->w += k->w_share * 2.0 * head_g;
        }
    }
    /* TP all-reduces of a [b, s, H] bf16 tensor (Megatron f/g operators): 2 in each block's
     * forward, 2 in its backward, 2 more in the recomputed forward (full only: selective
     * recomputes inside the TP region). With SP each becomes a reduce-scatter + all-gather
     * pair of the same ring volume, so the count and the cost stay. Stage 0: 1 all-reduce for
     * the vocab-parallel embedding output. Last stage: 1 of the head input's gradient and 3
     * tiny ones of the vocab-parallel cross-entropy (max, target logit, sum-exp: 4bs bytes each). */
    int n_ar = layers * (4 + (l->recompute == PLAN_RC_FULL ? 2 : 0));
    o->tp = 0.0;
    if (stage == 0) n_ar += 1;
    if (stage == l->pp - 1) {
        n_ar += 1;
        double ce_ar = l->tp > 1 ? 3.0 * plan_ring_allreduce_s(4.0 * b * s, l->tp, bw_tp, lat_tp) : 0.0;
        o->tp += ce_ar;
        o->f += ce_ar;
    }
    if (l->tp > 1) {
        double ar = plan_ring_allreduce_s(act_bytes, l->tp, bw_tp, lat_tp);
        o->tp += n_ar * ar;
        o->f += (2 * layers + (stage == 0)) * ar; /* the forward's 2 per block + the embedding's */
    }
    /* PP: each TP rank sends its full copy of the boundary activation to the same TP rank
     * of the next stage (no scatter-gather optimisation) and the gradient back. Per slot,
     * an interior stage waits for one receive of each; the end stages for one. */
    /* Interleaved (V chunks): every chunk receives an activation and a gradient per
     * micro-batch, except chunk 0 of rank 0 (no activation) and chunk V-1 of the last
     * rank (no gradient): 2V - [first] - [last], V times plain 1F1B's messages. With SP
     * each TP rank sends its 1/TP sequence shard. */
    int v = l->vpp > 1 ? l->vpp : 1;
    int hops = 2 * v - (stage == 0) - (stage == l->pp - 1);
    o->pp = hops * plan_p2p_s(act_bytes / spd, bw_pp, lat_pp);
    o->f += (v - (stage == 0)) * plan_p2p_s(act_bytes / spd, bw_pp, lat_pp); /* activations in */
    if (cp > 1) {
        /* the rank's attention per layer, which the ring's hops hide behind: the per-kernel
         * model's flash attention, or the fitted model's attention core (backward 2x forward) */
        double att_f, att_b, xf, xb, tf, tb;
        if (c->kernels) {
            GpuStepDevice d = plan_device(c);
            GpuStepCase g = plan_step_case(k);
            double heads = (double)md->heads / l->tp, hs = (double)md->H / md->heads;
            att_f = gpu_step_attn_fwd_s(l->mb, heads, md->seq, hs, &g) / cp;
            att_b = gpu_step_attn_bwd_s(l->mb, heads, md->seq, hs, &d, &g) / cp;
        } else {
            double ag, am;
            plan_attn_core_fwd_cp(md, l->tp, l->mb, cp, c, k, &ag, &am);
            att_f = ag + am;
            att_b = 2.0 * att_f;
        }
        plan_cp_ring_s(md, c, k, l, cp_inter, att_f, att_b, &xf, &xb, &tf, &tb);
        int runs = l->recompute == PLAN_RC_FULL ? 2 : 1;
        o->cp = layers * (runs * xf + xb);
        o->ring = layers * (runs * tf + tb);
        o->f += layers * xf;
    }
    o->tp_inter = tp_inter;
    o->pp_inter = pp_inter;
    o->cp_inter = cp_inter;
}
/* The same with the CP ring's placement from the layout (plan_links_cp). */
static inline void plan_slot(const PlanModel* md, const Cluster* c, const PlanConsts* k, const PlanLayout* l, int stage,
                             int tp_inter, int pp_inter, PlanSlot* o) {
    int ti, pi, di, ci;
    plan_links_cp(l, c->gpus_per_node, &ti, &pi, &di, &ci);
    plan_slot_cp(md, c, k, l, stage, tp_inter, pp_inter, ci, o);
}

/* ZeRO-2/3's DP traffic in one micro-batch slot of a stage, the part not hidden behind the
 * stage's work (seconds; *fwd gets the forward's part). Per layer and micro-batch: ZeRO-2 and 3
 * reduce-scatter the layer's fp32 gradients over DP as the backward makes them (m times the
 * gradient bytes per step); ZeRO-3 also all-gathers the layer's bf16 weights before its forward
 * and again before its backward. Each is started ahead (the next layer's gather while this one
 * computes, a layer's reduction while the layers below run their backward), so a layer's
 * traffic in a pass costs only what exceeds that layer's time in the pass: the slot's forward
 * F over its layers, or the rest of the slot (B + W, recomputation included) over its layers.
 * The DP link carries it; sharing a NIC with the pipeline's messages is not modelled. */
static inline double plan_zero_slot_s(const PlanModel* md, const Cluster* c, const PlanConsts* k, const PlanLayout* l,
                                      const PlanSlot* sl, int dp_inter, double* fwd) {
    int z = plan_zero_eff(l), layers = md->L / l->pp;
    *fwd = 0.0;
    if (z < 2 || layers < 1) return 0.0;
    double bw = (dp_inter ? c->inter_gbps : c->intra_gbps) * k->net_eff;
    double lat = dp_inter ? c->latency_us : c->intra_latency_us;
    double pl = plan_layer_params_gpu(md, l->tp);
    int n = plan_grad_group(l);
    double rs = plan_reduce_scatter_s(4.0 * pl, n, bw, lat);
    double ag = z >= 3 ? plan_reduce_scatter_s(2.0 * pl, n, bw, lat) : 0.0; /* an all-gather: the same ring */
    double slot = sl->gemm + sl->mem + sl->tp + sl->pp + sl->cp;
    double f_l = sl->f / layers, b_l = (slot - sl->f) / layers;
    double xf = ag > f_l ? ag - f_l : 0.0, xb = rs + ag > b_l ? rs + ag - b_l : 0.0;
    *fwd = layers * xf;
    return layers * (xf + xb);
}

/* The DP reduction after the pipeline's flush for stage j (seconds; the largest stage's ends the
 * iteration). P: the stage's parameters on one GPU.
 *   ZeRO 0: ring all-reduce of the fp32 gradients (4P bytes);
 *   ZeRO 1: reduce-scatter of them, then all-gather of the updated bf16 weights (2P);
 *   ZeRO 2: the layers' gradients are reduced already; the rest's (embeddings, final LayerNorm,
 *           accumulated over the step) are reduce-scattered once, with the last micro-batch's
 *           last layer bucket (no backward left to hide it); then the bf16 weights' all-gather;
 *   ZeRO 3: the same reductions, then only the rest's weights are gathered: the layers' stay
 *           sharded until their next gather. */
static inline double plan_zero_dp_s(const PlanModel* md, const PlanLayout* l, int stage, double bw, double lat) {
    double p = plan_stage_params(md, l->tp, l->pp, stage), pl = plan_layer_params_gpu(md, l->tp);
    double rest = p - (double)(md->L / l->pp) * pl;
    int n = plan_grad_group(l); /* CP x DP */
    switch (plan_zero_eff(l)) {
        case 0:
            return plan_ring_allreduce_s(4.0 * p, n, bw, lat);
        case 1:
            return plan_reduce_scatter_s(4.0 * p, n, bw, lat) + plan_reduce_scatter_s(2.0 * p, n, bw, lat);
        case 2:
            return plan_reduce_scatter_s(4.0 * rest, n, bw, lat) + plan_reduce_scatter_s(4.0 * pl, n, bw, lat) +
                   plan_reduce_scatter_s(2.0 * p, n, bw, lat);
        default:
            return plan_reduce_scatter_s(4.0 * rest, n, bw, lat) + plan_reduce_scatter_s(4.0 * pl, n, bw, lat) +
                   plan_reduce_scatter_s(2.0 * rest, n, bw, lat);
    }
}

/* ------------------------------------------------------------------------------------ */
/* time: one iteration                                                                    */

/* The pipeline of m micro-batches over pp stages, from the stages' slots t_j = F_j + B_j + W_j
 * (their sum sum_t, and sum_w of their W's) and the slowest stage's F, B and W. Every schedule
 * runs m slots on the slowest stage; they differ in the fill and drain (the bubble):
 *   1F1B: the first micro-batch crosses every other stage once, sum_t - t_max; equal stages
 *     (PP-1)(F+B+W), the familiar (m+PP-1) t;
 *   interleaved, V chunks: the crossing is of 1/V chunks, (sum_t - t_max)/V;
 *   ZB-H1 (Qi et al. 2024, Table 2, for equal stages and W <= min(F, B), the paper's regime of
 *     comparable F, B, W): W leaves the critical path, so fill and drain cross the other
 *     stages' F and B only, and the slowest stage fills PP-1 gaps with its deferred W's:
 *     (PP-1)(F+B-W). A W longer than the F or B it is paired with cannot hide all of
 *     itself (ZB-H1's fixed order F, B, W: an event simulation in tests/test_planner.c
 *     gives (PP-1)(F+B-min(F,B,W))), hence the min. With unequal stages (first and last)
 *     this is an estimate, as 1F1B's sum_t - t_max is. */
static inline double plan_pipe_s(int sched, int vpp, int pp, int m, double sum_t, double sum_w, double f, double b,
                                 double w) {
    double tmax = f + b + w;
    if (sched == PLAN_SCHED_ZBH1 && pp > 1) {
        double hide = w < f ? w : f;
        hide = hide < b ? hide : b;
        double fill = (sum_t - sum_w - (f + b)) - (pp - 1) * hide;
        return m * tmax + (fill > 0.0 ? fill : 0.0); /* lighter other stages: never below no bubble */
    }
    return m * tmax + (sum_t - tmax) / (vpp > 1 ? vpp : 1);
}

/* Time of one iteration of global batch gb (sequences) for a layout on nodes x gpn GPUs.
 * Model: Megatron's non-interleaved 1F1B (PipeDream-flush). With per-stage slot times t_j
 * (forward + backward of one micro-batch incl. its TP and PP communication), the pipeline
 * takes sum_j t_j + (m - 1) * max_j t_j: the first micro-batch crosses every stage once
 * (fill and drain), then the slowest stage paces the other m - 1. For equal stages this is
 * the familiar (m + PP - 1) t, bubble share (PP - 1)/(m + PP - 1). After the flush: the DP
 * gradient reduction, the tied-embedding all-reduce, the grad-norm all-reduce and the
 * AdamW step, all on the critical path (no overlap). Interleaving and ZB-H1: plan_pipe_s. */
static inline void plan_time(const PlanModel* md, const Cluster* c, const PlanConsts* k, const PlanLayout* l, int gb,
                             PlanTime* o) {
    int tp_i, pp_i, dp_i, cp_i;
    memset(o, 0, sizeof(*o));
    plan_links_cp(l, c->gpus_per_node, &tp_i, &pp_i, &dp_i, &cp_i);
    o->m = gb / (l->mb * l->dp);
    double sum = 0.0, sum_w = 0.0, comm_slot_intra = 0.0, comm_slot_inter = 0.0;
    PlanSlot sl, worst;
    memset(&worst, 0, sizeof(worst));
    double tmax = -1.0;
    for (int j = 0; j < l->pp; j++) {
        plan_slot_cp(md, c, k, l, j, tp_i, pp_i, cp_i, &sl);
        double zf = 0.0;
        sl.dp = plan_zero_slot_s(md, c, k, l, &sl, dp_i, &zf);
        sl.f += zf;
        double t = sl.gemm + sl.mem + sl.tp + sl.pp + sl.dp + sl.cp;
        sum += t;
        sum_w += sl.w;
        if (t > tmax) {
            tmax = t;
            worst = sl;
        }
    }
    o->slot_s = tmax;
    o->slot_gemm_s = worst.gemm;
    o->slot_mem_s = worst.mem;
    o->slot_tp_s = worst.tp;
    o->slot_pp_s = worst.pp;
    o->slot_dp_s = worst.dp;
    o->slot_cp_s = worst.cp;
    o->slot_ring_s = worst.ring;
    o->slot_f_s = worst.f;
    o->slot_w_s = worst.w;
    o->pipe_s = plan_pipe_s(l->sched, l->vpp, l->pp, o->m, sum, sum_w, worst.f, tmax - worst.f - worst.w, worst.w);
    o->bubble_s = o->pipe_s - o->m * tmax;
    /* DP after the flush: the largest stage's reduction ends the iteration (plan_zero_dp_s:
     * plain all-reduce, or ZeRO's reduce-scatter and all-gather) */
    double pmax = 0.0;
    double bw_dp = (dp_i ? c->inter_gbps : c->intra_gbps) * k->net_eff;
    double lat_dp = dp_i ? c->latency_us : c->intra_latency_us;
    for (int j = 0; j < l->pp; j++) {
        double p = plan_stage_params(md, l->tp, l->pp, j), d = plan_zero_dp_s(md, l, j, bw_dp, lat_dp);
        if (p > pmax) pmax = p;
        if (d > o->dp_s) o->dp_s = d;
    }
    /* tied embedding: fp32 gradient of V*H/TP summed between first and last stage */
    int world = l->tp * plan_cp(l) * l->pp * l->dp;
    int emb_inter = 0;
    if (l->pp > 1) {
        emb_inter = plan_group_crosses_node(0, (long)l->tp * plan_grad_group(l) * (l->pp - 1), 2, c->gpus_per_node);
        double bw = (emb_inter ? c->inter_gbps : c->intra_gbps) * k->net_eff;
        o->emb_s = plan_ring_allreduce_s(4.0 * md->V * (double)md->H / l->tp, 2, bw,
                                         emb_inter ? c->latency_us : c->intra_latency_us);
    }
    /* grad norm: one scalar over all ranks, a latency-bound tree: 2 log2(world) hops. The
     * zero-bubble paper replaces this barrier before the optimizer step by a check after it
     * ("post-validation": step eagerly, roll back if clipping or inf/nan was due); its
     * schedules that need that are not modelled, and ZB-H1's bubble above keeps the flush,
     * so every schedule pays the same one all-reduce of latency here. */
    int nodes_used = (world + c->gpus_per_node - 1) / c->gpus_per_node;
    o->norm_s = world > 1
                    ? 2.0 * ceil(log2((double)world)) * ((nodes_used > 1) ? c->latency_us : c->intra_latency_us) * 1e-6
                    : 0.0;
    /* AdamW, memory bound: per parameter it reads the fp32 gradient twice (norm, update),
     * reads and writes master, m, v (24 B), writes the bf16 copy (2 B) and zeroes the
     * gradient (4 B): 38 bytes; over the local shard with ZeRO 1-3. */
    double popt = pmax / (plan_zero_eff(l) ? plan_grad_group(l) : 1);
    o->opt_s = 38.0 * popt / (k->hbm_eff * c->hbm_gbps * 1e9);
    if (c->kernels) {
        /* the per-kernel model: the same pass over the parameters as counted (AdamW, grad norm,
         * gradient memset), its launches and gaps, and the step's host waits and stats reads */
        GpuStepDevice d = plan_device(c);
        GpuStepCase g = plan_step_case(k);
        double n = gpu_step_counted(GSN_STEP_LAUNCHES);
        o->opt_s = gpu_step_mem_s(gpu_step_counted(GSN_PARAM_STEP_BYTES) * popt, n, &d, &g) +
                   n * g.a[GS_LAUNCH_GAP_US] * 1e-6 + gpu_step_counted(GSN_DRAINS) * g.a[GS_DRAIN_US] * 1e-6 +
                   gpu_step_counted(GSN_D2H_COPIES) * g.a[GS_COPY_US] * 1e-6 + 24.0 / (g.a[GS_PCIE_GBS] * 1e9);
    }
    /* SP: each rank's LayerNorm weight/bias gradients cover its shard; one fp32 all-reduce
     * over TP of the stage's 4H per layer (+2H final LN) after the micro-batches */
    if (l->sp && l->tp > 1) {
        double bw_tp = (tp_i ? c->inter_gbps : c->intra_gbps) * k->net_eff;
        o->ln_s = plan_ring_allreduce_s(4.0 * (4.0 * md->H * (md->L / l->pp) + 2.0 * md->H), l->tp, bw_tp,
                                        tp_i ? c->latency_us : c->intra_latency_us);
    }
    o->iter_s = o->pipe_s + o->dp_s + o->emb_s + o->ln_s + o->norm_s + o->opt_s;
    /* split for the shares: the busiest stage's m slots are compute + comm; the rest of the
     * pipeline is idle (bubble) */
    double slot_comm = worst.tp + worst.pp + worst.dp + worst.cp;
    o->compute_s = o->m * (worst.gemm + worst.mem) + o->opt_s;
    o->comm_s = o->m * slot_comm + o->dp_s + o->emb_s + o->ln_s + o->norm_s;
    o->idle_s = o->bubble_s;
    comm_slot_intra =
        (tp_i ? 0.0 : worst.tp) + (pp_i ? 0.0 : worst.pp) + (dp_i ? 0.0 : worst.dp) + (cp_i ? 0.0 : worst.cp);
    comm_slot_inter =
        (tp_i ? worst.tp : 0.0) + (pp_i ? worst.pp : 0.0) + (dp_i ? worst.dp : 0.0) + (cp_i ? worst.cp : 0.0);
    o->comm_intra_s =
        o->m * comm_slot_intra + (dp_i ? 0.0 : o->dp_s) + (emb_inter ? 0.0 : o->emb_s) + (tp_i ? 0.0 : o->ln_s);
    o->comm_inter_s = o->m * comm_slot_inter + (dp_i ? o->dp_s : 0.0) + (emb_inter ? o->emb_s : 0.0) +
                      (tp_i ? o->ln_s : 0.0) + o->norm_s;
    /* hardware FLOP/s (recompute counted, comparable with the paper's formula) and MFU
     * from model FLOPs only, so recomputation is never counted as useful work */
    /* a CP rank's selective recomputation rebuilds nothing (ring attention keeps its lse) */
    int rc_hw = plan_cp(l) > 1 && l->recompute == PLAN_RC_SELECTIVE ? PLAN_RC_NONE : l->recompute;
    o->tflops = plan_hw_flops(md, gb, rc_hw) / (o->iter_s * world) / 1e12;
    o->hfu = o->tflops / c->peak_tflops;
    o->mfu = plan_model_flops(md, gb) / (o->iter_s * world) / (c->peak_tflops * 1e12);
}

/* ------------------------------------------------------------------------------------ */
/* feasibility and evaluation                                                             */

/* doc/spec.md section 3 constraints for the final global batch. 0 ok; else 2 (batch) or 3
 * (shape / world) with the reason in why. */
static inline int plan_check_layout(const PlanModel* md, int world, int gb, const PlanLayout* l, char* why, size_t n) {
    if (l->tp <= 0 || l->pp <= 0 || l->dp <= 0 || l->mb <= 0) {
        snprintf(why, n, "layout sizes must be positive");
        return 3;
    }
    int cp = plan_cp(l);
    if ((long)l->tp * cp * l->pp * l->dp != world) {
        if (cp > 1)
            snprintf(why, n, "tp*cp*pp*dp=%ld != %d GPUs", (long)l->tp * cp * l->pp * l->dp, world);
        else
            snprintf(why, n, "tp*pp*dp=%ld != %d GPUs", (long)l->tp * l->pp * l->dp, world);
        return 3;
    }
    if (md->seq % (2 * cp)) { /* the load-balanced causal chunks: two per CP rank */
        snprintf(why, n, "cp %d: seq %d %% 2cp != 0", cp, md->seq);
        return 3;
    }
    if (md->heads % l->tp) {
        snprintf(why, n, "heads %d %% tp %d != 0", md->heads, l->tp);
        return 3;
    }
    if ((4L * md->H) % l->tp) {
        snprintf(why, n, "4H %d %% tp %d != 0", 4 * md->H, l->tp);
        return 3;
    }
    if (md->V % l->tp) {
        snprintf(why, n, "padded vocab %d %% tp %d != 0", md->V, l->tp);
        return 3;
    }
    if (md->L % l->pp) {
        snprintf(why, n, "layers %d %% pp %d != 0", md->L, l->pp);
        return 3;
    }
    if (l->sp && (md->seq / cp) % l->tp) {
        if (cp > 1)
            snprintf(why, n, "sp: seq/cp %d %% tp %d != 0", md->seq / cp, l->tp);
        else
            snprintf(why, n, "sp: seq %d %% tp %d != 0", md->seq, l->tp);
        return 3;
    }
    if (l->vpp > 1 && l->pp < 2) {
        snprintf(why, n, "vpp %d needs pp >= 2", l->vpp);
        return 3;
    }
    if (l->sched == PLAN_SCHED_ZBH1 && l->vpp > 1) {
        snprintf(why, n, "zb-h1 runs one chunk per rank (vpp %d)", l->vpp);
        return 3;
    }
    if (l->vpp > 1 && md->L % (l->pp * l->vpp)) {
        snprintf(why, n, "layers %d %% (pp %d * vpp %d) != 0", md->L, l->pp, l->vpp);
        return 3;
    }
    if (gb % ((long)l->mb * l->dp)) {
        snprintf(why, n, "gb %d %% (mb %d * dp %d) != 0", gb, l->mb, l->dp);
        return 2;
    }
    if (l->vpp > 1 && (gb / ((long)l->mb * l->dp)) % l->pp) {
        snprintf(why, n, "vpp %d: m %ld %% pp %d != 0", l->vpp, gb / ((long)l->mb * l->dp), l->pp);
        return 2;
    }
    /* the paper's ZB-H1 fills PP-1 bubbles per stage with deferred W's: at least PP micro-batches */
    if (l->sched == PLAN_SCHED_ZBH1 && l->pp > 1 && gb / ((long)l->mb * l->dp) < l->pp) {
        snprintf(why, n, "zb-h1: m %ld < pp %d", gb / ((long)l->mb * l->dp), l->pp);
        return 2;
    }
    why[0] = '\0';
    return 0;
}

/* Evaluates one layout: constraints, memory, time. Returns row.feasible. */
static inline int plan_evaluate(const PlanModel* md, const Cluster* c, const PlanConsts* k, int nodes, int gb,
                                const PlanLayout* l, PlanRow* row) {
    int world = nodes * c->gpus_per_node;
    memset(row, 0, sizeof(*row));
    row->lay = *l;
    row->kind = plan_check_layout(md, world, gb, l, row->why, sizeof(row->why));
    if (row->kind) {
        row->feasible = 0;
        return 0;
    }
    plan_links_cp(l, c->gpus_per_node, &row->tp_inter, &row->pp_inter, &row->dp_inter, &row->cp_inter);
    int m = gb / (l->mb * l->dp);
    plan_memory_c(md, c, k, l, m, &row->mem);
    plan_time(md, c, k, l, gb, &row->time);
    double cap = c->mem_gb * 1073741824.0;
    if (row->mem.total > cap) {
        row->kind = 1;
        snprintf(row->why, sizeof(row->why), "memory %.1f GiB > %.0f GiB (stage %d)", row->mem.total / 1073741824.0,
                 c->mem_gb, row->mem.stage);
        row->feasible = 0;
        return 0;
    }
    row->feasible = 1;
    return 1;
}

/* ------------------------------------------------------------------------------------ */
/* the -plan and -scaling reports                                                         */

/* none, selective, full, then unset (a shape failure's -1) */
static inline int planx_rc_rank(int rc) {
    return rc == PLAN_RC_NONE ? 0 : (rc == PLAN_RC_SELECTIVE ? 1 : (rc == PLAN_RC_FULL ? 2 : 3));
}

static inline int planx_cmp_rows(const void* a, const void* b) {
    const PlanRow* x = (const PlanRow*)a;
    const PlanRow* y = (const PlanRow*)b;
    /* feasible first, ranked by iteration time (= throughput at fixed gb); then memory
     * failures by time, then batch, then shape failures */
    if (x->kind != y->kind) return x->kind < y->kind ? -1 : 1;
    if (x->kind <= 1) {
        if (x->time.iter_s != y->time.iter_s) return x->time.iter_s < y->time.iter_s ? -1 : 1;
        if (x->mem.total != y->mem.total) return x->mem.total < y->mem.total ? -1 : 1;
    }
    if (x->lay.tp != y->lay.tp) return x->lay.tp - y->lay.tp;
    if (plan_cp(&x->lay) != plan_cp(&y->lay)) return plan_cp(&x->lay) - plan_cp(&y->lay);
    if (x->lay.pp != y->lay.pp) return x->lay.pp - y->lay.pp;
    if (x->lay.mb != y->lay.mb) return x->lay.mb - y->lay.mb;
    if (x->lay.recompute != y->lay.recompute) /* a tie (h100: selective = none): the less recomputation */
        return planx_rc_rank(x->lay.recompute) - planx_rc_rank(y->lay.recompute);
    if (x->lay.sp != y->lay.sp) return x->lay.sp - y->lay.sp;
    if (x->lay.vpp != y->lay.vpp) return x->lay.vpp - y->lay.vpp;
    if (x->lay.sched != y->lay.sched) return x->lay.sched - y->lay.sched;
    return x->lay.zero - y->lay.zero;
}

/* 1f1b, inter(leaved 1F1B) or zb-h1 */
static inline const char* plan_sched_name(const PlanLayout* l) {
    return l->sched == PLAN_SCHED_ZBH1 ? "zb-h1" : (l->vpp > 1 ? "inter" : "1f1b");
}

static inline const char* planx_link(int inter, int n) { return n <= 1 ? "-" : (inter ? "IB" : "NV"); }
static inline const char* planx_rc_name(int rc) {
    return rc == PLAN_RC_FULL ? "full" : (rc == PLAN_RC_SELECTIVE ? "sel" : (rc == 0 ? "0" : "-"));
}

static inline void planx_print_header(const PlanRequest* r, const Cluster* c, FILE* out) {
    const PlanModel* md = &r->model;
    fprintf(out, "model: L=%d H=%d heads=%d seq=%d V=%d (%.1fB parameters), global batch %d sequences\n", md->L, md->H,
            md->heads, md->seq, md->V, plan_total_params(md) / 1e9, r->gb);
    fprintf(out,
            "cluster %s: %d GPUs/node, %.0f TFLOP/s bf16, %.0f GiB, HBM %.0f GB/s, NVLink %.0f GB/s/dir, "
            "inter-node %.1f GB/s/GPU, latency %.1f/%.1f us\n",
            c->name, c->gpus_per_node, c->peak_tflops, c->mem_gb, c->hbm_gbps, c->intra_gbps, c->inter_gbps,
            c->intra_latency_us, c->latency_us);
    if (c->kernels)
        fprintf(out,
                "constants: compute from the per-kernel model (llmc/planner/gpu_step.h, the cost model's; %d SMs): "
                "GEMM efficiency %.2f, HBM efficiency %.2f, attention %.0f/%.0f TFLOP/s + %.1f dP passes; "
                "network efficiency %.2f, workspace %.1f GiB\n",
                c->sms, r->k.kernel_gemm, r->k.kernel_hbm, gpu_step_mid(GS_ATTN_FWD), gpu_step_mid(GS_ATTN_BWD),
                gpu_step_mid(GS_ATTN_DP_PASSES), r->k.net_eff, r->k.workspace_gb);
    else
        fprintf(out,
                "constants: GEMM efficiency %.2f, network efficiency %.2f, HBM efficiency %.2f, workspace %.1f GiB\n",
                r->k.gemm_eff, r->k.net_eff, r->k.hbm_eff, r->k.workspace_gb);
}

/* show_cp: the tables have a CP column, and the links read TP/CP/PP/DP (planx_cp_shown) */
static inline void planx_print_row(const PlanRow* w, int idx, int mark, const char* note, int show_cp, FILE* out) {
    const PlanLayout* l = &w->lay;
    char links[24], cpc[16] = "";
    if (show_cp) {
        snprintf(cpc, sizeof(cpc), " %4d", plan_cp(l));
        snprintf(links, sizeof(links), "%s/%s/%s/%s", planx_link(w->tp_inter, l->tp),
                 planx_link(w->cp_inter, plan_cp(l)), planx_link(w->pp_inter, l->pp), planx_link(w->dp_inter, l->dp));
    } else {
        snprintf(links, sizeof(links), "%s/%s/%s", planx_link(w->tp_inter, l->tp), planx_link(w->pp_inter, l->pp),
                 planx_link(w->dp_inter, l->dp));
    }
    if (w->kind >= 2) {
        char mbs[16];
        if (l->mb > 0)
            snprintf(mbs, sizeof(mbs), "%d", l->mb);
        else
            snprintf(mbs, sizeof(mbs), "-");
        char vs[16], zs[16];
        if (l->zero < 0)
            snprintf(zs, sizeof(zs), "-");
        else
            snprintf(zs, sizeof(zs), "%d", l->zero);
        if (l->recompute < 0)
            snprintf(vs, sizeof(vs), "-");
        else
            snprintf(vs, sizeof(vs), "%d", l->vpp);
        fprintf(out, "   %4d %4d%s %4d %5d %3s %4s %2s %2s %5s %2s  %s\n", idx, l->tp, cpc, l->pp, l->dp, mbs,
                planx_rc_name(l->recompute), l->recompute < 0 ? "-" : (l->sp ? "1" : "0"), vs,
                l->recompute < 0 ? "-" : plan_sched_name(l), zs, w->why);
        return;
    }
    const PlanTime* t = &w->time;
    const char* txt = w->feasible ? note : w->why;
    fprintf(out,
            "%s %4d %4d%s %4d %5d %3d %4s %2d %2d %5s %2d %5d  %-*s %7.1f %8.2f %6.1f%% %6.1f%% %7.1f %5.1f%%%s%s\n",
            mark ? " *" : "  ", idx, l->tp, cpc, l->pp, l->dp, l->mb, planx_rc_name(l->recompute), l->sp, l->vpp,
            plan_sched_name(l), l->zero, t->m, show_cp ? 11 : 8, links, w->mem.total / 1073741824.0, t->iter_s,
            100.0 * t->idle_s / t->iter_s, 100.0 * t->comm_s / t->iter_s, t->tflops, 100.0 * t->mfu, txt[0] ? "  " : "",
            txt);
}

static inline void planx_table_head(int show_cp, FILE* out) {
    if (show_cp)
        fprintf(out,
                "     #   TP   CP   PP    DP  mb   rc sp  V sched  z     m  TP/CP/PP/DP  mem GiB   iter s  bubble    "
                "comm  HW TF/s   MFU\n");
    else
        fprintf(out,
                "     #   TP   PP    DP  mb   rc sp  V sched  z     m  TP/PP/DP  mem GiB   iter s  bubble    comm  "
                "HW TF/s   MFU\n");
}

/* Closes a CSV written by the planner; a failed write (full disk, /dev/full) is an error. */
static inline int planx_csv_close(FILE* f, const char* path) {
    int bad = ferror(f) != 0;
    if (fclose(f) != 0) bad = 1;
    if (bad) fprintf(stderr, "error: plan: writing %s failed (disk full?)\n", path);
    return bad ? -1 : 0;
}

static inline void planx_csv_head(FILE* f) {
    fprintf(f,
            "nodes,gpus,tp,pp,dp,mb,recompute,zero,feasible,reason,m,tp_link,pp_link,dp_link,mem_gib,iter_s,"
            "bubble_frac,comm_frac,tflops_per_gpu,mfu,t_compute_s,t_gemm_s,t_mem_s,t_opt_s,t_comm_s,"
            "t_comm_intra_s,t_comm_inter_s,t_idle_s,slot_s,sp,vpp,hfu,rc_name,schedule,slot_f_s,slot_w_s,cp,cp_link,"
            "slot_cp_s,slot_ring_s\n");
}
static inline void planx_csv_row(FILE* f, const PlanRow* w, int nodes, int gpus) {
    const PlanLayout* l = &w->lay;
    const PlanTime* t = &w->time;
    fprintf(f, "%d,%d,%d,%d,%d,%d,%d,%d,%d,\"%s\",", nodes, gpus, l->tp, l->pp, l->dp, l->mb, l->recompute, l->zero,
            w->feasible, w->why);
    if (w->kind >= 2) {
        fprintf(f, ",,,,,,,,,,,,,,,,,,,%d,%d,,%s,%s,,,%d,,,\n", l->sp, l->vpp, planx_rc_name(l->recompute),
                l->recompute < 0 ? "" : plan_sched_name(l), plan_cp(l));
        return;
    }
    fprintf(f,
            "%d,%s,%s,%s,%.3f,%.4f,%.4f,%.4f,%.3f,%.4f,%.4f,%.4f,%.4f,%.4f,%.4f,%.4f,%.4f,%.4f,%.5f,%d,%d,%.4f,%s,%s,"
            "%.5f,%.5f,%d,%s,%.5f,%.5f\n",
            t->m, planx_link(w->tp_inter, l->tp), planx_link(w->pp_inter, l->pp), planx_link(w->dp_inter, l->dp),
            w->mem.total / 1073741824.0, t->iter_s, t->idle_s / t->iter_s, t->comm_s / t->iter_s, t->tflops, t->mfu,
            t->compute_s, t->m * t->slot_gemm_s, t->m * t->slot_mem_s, t->opt_s, t->comm_s, t->comm_intra_s,
            t->comm_inter_s, t->idle_s, t->slot_s, l->sp, l->vpp, t->hfu, planx_rc_name(l->recompute),
            plan_sched_name(l), t->slot_f_s, t->slot_w_s, plan_cp(l), planx_link(w->cp_inter, plan_cp(l)), t->slot_cp_s,
            t->slot_ring_s);
}

static inline int planx_sched_mask(const PlanRequest* r) { return r->sched_mask ? r->sched_mask : PLAN_SB_ALL; }
/* the -plan-schedule bit of a layout's schedule */
static inline int planx_sched_bit(int sched, int vpp) {
    return sched == PLAN_SCHED_ZBH1 ? PLAN_SB_ZBH1 : (vpp > 1 ? PLAN_SB_INTERLEAVED : PLAN_SB_1F1B);
}

/* All layouts of the request on `nodes` nodes (searching what is 0/-1). Caller frees. */
static inline PlanRow* planx_enumerate(const PlanRequest* r, const Cluster* c, int nodes, int* count) {
    const PlanModel* md = &r->model;
    int world = nodes * c->gpus_per_node;
    int cap = 256, n = 0;
    PlanRow* rows = (PlanRow*)malloc(sizeof(PlanRow) * cap);
    static const int MB[] = {1, 2, 4, 8};
    int mbs[4], nmb = 0;
    if (r->mb > 0)
        mbs[nmb++] = r->mb;
    else
        for (int i = 0; i < 4; i++) mbs[nmb++] = MB[i];
    for (int tp = 1; tp <= world && tp <= md->heads; tp++) {
        if (world % tp || (r->tp > 0 && tp != r->tp)) continue;
        /* CP: the given one; searched (plan_cp_searched): every CP that splits the world and the
         * sequence into 2 CP chunks of at least PLAN_CP_MIN_ROWS / 2 rows; else none */
        for (int cp = 1; cp <= world / tp; cp++) {
            if (r->cp > 0 ? cp != r->cp : (cp > 1 && !plan_cp_searched(r))) continue;
            if (r->cp <= 0 && cp > 1 && ((world / tp) % cp || md->seq % (2 * cp) || md->seq / cp < PLAN_CP_MIN_ROWS))
                continue;
            for (int pp = 1; pp <= world / tp && pp <= md->L; pp++) {
                if ((world / tp) % pp || (r->pp > 0 && pp != r->pp)) continue;
                if (cp > 1 && (world / tp / pp) % cp) continue;
                int dp = world / (tp * pp * cp);
                if (r->dp > 0 && dp != r->dp) continue;
                PlanLayout l;
                memset(&l, 0, sizeof(l));
                l.tp = tp;
                l.cp = cp;
                l.pp = pp;
                l.dp = dp;
                l.mb = mbs[0];
                l.recompute = -1;
                l.zero = -1;
                l.sp = 0;
                l.vpp = 1;
                l.sched = PLAN_SCHED_1F1B;
                char why[96];
                int kind = plan_check_layout(md, world, r->gb, &l, why, sizeof(why));
                if (kind == 3) { /* shape failure: one row for the (tp, pp) pair */
                    if (n == cap) {
                        cap *= 2;
                        rows = (PlanRow*)realloc(rows, sizeof(PlanRow) * cap);
                    }
                    memset(&rows[n], 0, sizeof(PlanRow));
                    rows[n].lay = l;
                    rows[n].lay.mb = r->mb > 0 ? r->mb : 0;
                    rows[n].kind = 3;
                    snprintf(rows[n].why, sizeof(rows[n].why), "%s", why);
                    n++;
                    continue;
                }
                for (int im = 0; im < nmb; im++) {
                    l.mb = mbs[im];
                    l.recompute = -1;
                    l.zero = -1;
                    l.sp = 0;
                    l.vpp = 1;
                    if (plan_check_layout(md, world, r->gb, &l, why, sizeof(why)) == 2) {
                        if (r->mb <= 0 && (long)l.mb * dp > r->gb) continue; /* searched mb too big: not a candidate */
                        if (n == cap) {
                            cap *= 2;
                            rows = (PlanRow*)realloc(rows, sizeof(PlanRow) * cap);
                        }
                        memset(&rows[n], 0, sizeof(PlanRow));
                        rows[n].lay = l;
                        rows[n].kind = 2;
                        snprintf(rows[n].why, sizeof(rows[n].why), "%s", why);
                        n++;
                        continue;
                    }
                    static const int RC[3] = {PLAN_RC_FULL, PLAN_RC_SELECTIVE, PLAN_RC_NONE};
                    for (int ir = 0; ir < 3; ir++) {
                        int rc = RC[ir];
                        if (r->recompute >= 0 && rc != r->recompute) continue;
                        for (int sp = 0; sp <= 1; sp++) {
                            if (r->sp >= 0 && sp != r->sp) continue;
                            if (r->sp < 0 && sp == 1 && (tp == 1 || (md->seq / cp) % tp))
                                continue; /* = 0, or impossible */
                            for (int v = 1; v <= 8; v++) {
                                if (r->vpp > 0 && v != r->vpp) continue;
                                /* searched V: only those the shape and batch allow */
                                if (r->vpp <= 0 && v > 1 && (pp < 2 || md->L % (pp * v) || (r->gb / (l.mb * dp)) % pp))
                                    continue;
                                for (int z = 0; z <= 3; z++) {
                                    if (r->zero >= 0 && z != r->zero) continue;
                                    if (r->zero < 0 && z >= 1 && dp == 1) continue; /* same as z = 0 */
                                    for (int sc = PLAN_SCHED_1F1B; sc <= PLAN_SCHED_ZBH1; sc++) {
                                        if (!(planx_sched_mask(r) & planx_sched_bit(sc, v))) continue;
                                        if (sc == PLAN_SCHED_ZBH1 && (v > 1 || pp == 1)) continue; /* n/a, or 1F1B */
                                        /* searched: too few micro-batches is no candidate (as for V) */
                                        if (sc == PLAN_SCHED_ZBH1 && r->sched_mask != PLAN_SB_ZBH1 &&
                                            r->gb / (l.mb * dp) < pp)
                                            continue;
                                        l.recompute = rc;
                                        l.zero = z;
                                        l.sp = sp;
                                        l.vpp = v;
                                        l.sched = sc;
                                        if (n == cap) {
                                            cap *= 2;
                                            rows = (PlanRow*)realloc(rows, sizeof(PlanRow) * cap);
                                        }
                                        plan_evaluate(md, c, &r->k, nodes, r->gb, &l, &rows[n]);
                                        n++;
                                    }
                                }
                            }
                        }
                    }
                }
            }
        }
    }
    qsort(rows, n, sizeof(PlanRow), planx_cmp_rows);
    *count = n;
    return rows;
}

/* Index of the recommended row in sorted rows: the fastest feasible layout that leaves
 * `headroom` of the GPU memory free, else the fastest feasible one; -1 if none. */
static inline int planx_pick(const PlanRow* rows, int n, const Cluster* c, const PlanConsts* k) {
    double cap = c->mem_gb * 1073741824.0 * (1.0 - k->headroom);
    for (int i = 0; i < n && rows[i].feasible; i++)
        if (rows[i].mem.total <= cap) return i;
    return (n > 0 && rows[0].feasible) ? 0 : -1;
}

/* The recommended layout on `nodes` nodes. 0 found, -1 none. */
static inline int plan_recommend(const PlanRequest* r, const Cluster* c, int nodes, PlanRow* best) {
    int n = 0;
    PlanRow* rows = planx_enumerate(r, c, nodes, &n);
    int i = planx_pick(rows, n, c, &r->k);
    if (i >= 0) *best = rows[i];
    free(rows);
    return i >= 0 ? 0 : -1;
}

/* The paper's measured Selene points (Smith et al. 2022) for the exact configuration. */
static inline int plan_paper_point(const PlanRequest* r, const Cluster* c, const PlanLayout* l, int nodes,
                                   double* iter_s, double* tflops) {
    const PlanModel* md = &r->model;
    if (md->L != 105 || md->H != 20480 || md->heads != 128 || md->seq != 2048 || r->gb != 1920) return 0;
    if (strcmp(c->name, "selene-a100") != 0 || l->tp != 8 || l->pp != 35 || l->mb != 1 || l->recompute != 1 || l->sp ||
        l->vpp > 1 || l->sched != PLAN_SCHED_1F1B || plan_cp(l) != 1)
        return 0;
    if (nodes == 280) {
        *iter_s = 60.1;
        *tflops = 126;
        return 1;
    }
    if (nodes == 350) {
        *iter_s = 50.2;
        *tflops = 121;
        return 1;
    }
    if (nodes == 420) {
        *iter_s = 44.4;
        *tflops = 113;
        return 1;
    }
    return 0;
}

/* -plan's "memory per rank" rows for layout l: the trainer's own count (r->rank_mem, from
 * llmc/host/memplan.h) for the first rank of stage 0, which the trainer's start-up table
 * prints too, and of the stage whose rank holds the most (the same row when that is stage 0).
 * The same figures and format as the start-up table's row, so they compare as text. */
static inline void planx_print_rank_mem(const PlanRequest* r, const PlanLayout* l, FILE* out) {
    double b[4], b0[4] = {0, 0, 0, 0}, bm[4] = {0, 0, 0, 0}, most = -1.0;
    int sm = 0;
    if (r->rank_mem == NULL) return;
    for (int j = 0; j < l->pp; j++) {
        if (r->rank_mem(r->rank_mem_user, l, j, b) != 0) return;
        double tot = b[0] + b[1] + b[2] + b[3];
        if (j == 0) memcpy(b0, b, sizeof(b));
        if (tot > most) {
            most = tot;
            sm = j;
            memcpy(bm, b, sizeof(b));
        }
    }
    fprintf(out, "  memory per rank: %s, the first rank (TP 0, DP 0) of a stage, as its start-up table counts it:\n",
            r->rank_mem_name ? r->rank_mem_name : "the trainer");
    for (int k = 0; k < (sm == 0 ? 1 : 2); k++) {
        const double* x = k == 0 ? b0 : bm;
        fprintf(
            out,
            "  memory per rank (stage %d): params %.3f MiB | grads %.3f MiB | optimizer %.3f MiB | activations %.3f "
            "MiB | total %.3f MiB%s\n",
            k == 0 ? 0 : sm, x[0] / 1048576.0, x[1] / 1048576.0, x[2] / 1048576.0, x[3] / 1048576.0,
            (x[0] + x[1] + x[2] + x[3]) / 1048576.0, (k == 0) == (sm == 0) ? " (the most)" : "");
    }
}

/* ------------------------------------------------------------------------------------ */
/* checkpoints: size, write time, stall, and how often to save                            */

typedef struct {
    double total_bytes;   /* every rank's file: 12 B per parameter held (fp32 weights on DP rank 0, m and v once) */
    double rank_bytes;    /* the largest rank's file (DP rank 0 of the stage with the most parameters) */
    double write_s;       /* the whole checkpoint at the filesystem's aggregate write bandwidth */
    double copy_s;        /* the largest rank's share copied device -> host */
    double stall_sync_s;  /* -ckpt-async 0: the loop waits for the copy and the write */
    double stall_async_s; /* -ckpt-async 1: the loop waits for the copy only */
    double mtbf_job_s;    /* node MTBF / nodes */
    double every_sync_s, every_async_s; /* intervals: the Young/Daly optimum in whole steps */
    int every_sync, every_async;        /* the same in steps (-ckpt-every) */
    double lost_sync, lost_async;       /* expected fraction of the run lost to saves and to failures */
} PlanCkpt;

/* The checkpoint of layout l (the format of llmc/host/checkpoint.h: fp32 weights from DP rank 0
 * of each (TP, PP) position, AdamW m and v once, sharded over DP with ZeRO-1, a 1 KiB header per
 * rank) and how often to save it. Young (1974) / Daly (2006), first order: a save costing C
 * seconds of training every tau seconds, with failures every M seconds on average (the job's
 * MTBF), loses C/tau + tau/(2M) of the time, least at tau = sqrt(2 C M). The cost C is the
 * stall; a background write (-ckpt-async 1) also delays the checkpoint's completion by the
 * write (lost work W/M more per failure) and needs tau >= W (one save in flight). */
static inline void plan_checkpoint(const PlanModel* md, const PlanLayout* l, const Cluster* c, int nodes, double iter_s,
                                   double mtbf_hours, PlanCkpt* o) {
    memset(o, 0, sizeof(*o));
    int world = l->tp * l->pp * l->dp;
    double held = 0.0, big = 0.0;
    for (int s = 0; s < l->pp; s++) {
        double p = plan_stage_params(md, l->tp, l->pp, s);
        held += (double)l->tp * p;
        if (p > big) big = p;
    }
    o->total_bytes = 12.0 * held + 1024.0 * world;
    o->rank_bytes = 1024.0 + 4.0 * big + 8.0 * (l->zero ? big / l->dp : big);
    o->write_s = o->total_bytes / (c->fs_gbps * 1e9);
    o->copy_s = (o->rank_bytes - 1024.0) / (c->d2h_gbps * 1e9);
    o->stall_sync_s = o->copy_s + o->write_s;
    o->stall_async_s = o->copy_s;
    o->mtbf_job_s = mtbf_hours * 3600.0 / (nodes > 0 ? nodes : 1);
    double M = o->mtbf_job_s;
    double ts = sqrt(2.0 * o->stall_sync_s * M), ta = sqrt(2.0 * o->stall_async_s * M);
    o->every_sync = (int)fmax(1.0, floor(ts / iter_s + 0.5));
    o->every_async = (int)fmax(1.0, floor(ta / iter_s + 0.5));
    while (o->every_async * iter_s < o->write_s) o->every_async++;
    o->every_sync_s = o->every_sync * iter_s;
    o->every_async_s = o->every_async * iter_s;
    o->lost_sync = o->stall_sync_s / o->every_sync_s + o->every_sync_s / (2.0 * M);
    o->lost_async = o->stall_async_s / o->every_async_s + (o->every_async_s / 2.0 + o->write_s) / M;
}

static inline void planx_print_ckpt(const PlanRequest* r, const Cluster* c, const PlanRow* b, FILE* out) {
    PlanCkpt k;
    plan_checkpoint(&r->model, &b->lay, c, r->nodes, b->time.iter_s, r->mtbf_hours, &k);
    fprintf(out,
            "checkpoints of the recommended layout (PREDICTED; filesystem and PCIe rates assumed, -fs-bw, -d2h-bw):\n");
    fprintf(out,
            "  size %.3g TB in all (12 B per parameter: fp32 weights, AdamW m and v), %.3g GB on the largest rank\n",
            k.total_bytes / 1e12, k.rank_bytes / 1e9);
    fprintf(out, "  write %.3g s at the filesystem's %.0f GB/s; copy to host %.3g s at %.0f GB/s per GPU\n", k.write_s,
            c->fs_gbps, k.copy_s, c->d2h_gbps);
    fprintf(out,
            "  interval: Young/Daly sqrt(2 x stall x job MTBF), job MTBF %.3g h = node MTBF %.0f h (-mtbf-hours) / %d "
            "nodes\n",
            k.mtbf_job_s / 3600.0, r->mtbf_hours, r->nodes);
    fprintf(out, "  -ckpt-async 0: stall %.3g s per save, every %.3g min = -ckpt-every %d, %.2f%% of the run lost\n",
            k.stall_sync_s, k.every_sync_s / 60.0, k.every_sync, 100.0 * k.lost_sync);
    fprintf(out, "  -ckpt-async 1: stall %.3g s per save, every %.3g min = -ckpt-every %d, %.2f%% of the run lost\n",
            k.stall_async_s, k.every_async_s / 60.0, k.every_async, 100.0 * k.lost_async);
}

static inline int planx_run_plan(const PlanRequest* r, const Cluster* c, FILE* out) {
    int n = 0, world = r->nodes * c->gpus_per_node;
    PlanRow* rows = planx_enumerate(r, c, r->nodes, &n);
    int nfeas = 0, nmem = 0, nbatch = 0, nshape = 0;
    for (int i = 0; i < n; i++) {
        if (rows[i].kind == 0)
            nfeas++;
        else if (rows[i].kind == 1)
            nmem++;
        else if (rows[i].kind == 2)
            nbatch++;
        else
            nshape++;
    }
    int show_cp = planx_cp_shown(r);
    if (show_cp)
        fprintf(out,
                "plan for %d nodes = %d GPUs (rank = tp + TP*cp + TP*CP*dp + TP*CP*DP*pp; TP/CP/PP/DP: NV = inside a "
                "node, IB = across nodes; DP's link is the CP x DP gradient group's)\n",
                r->nodes, world);
    else
        fprintf(out,
                "plan for %d nodes = %d GPUs (rank = tp + TP*dp + TP*DP*pp; TP/PP/DP: NV = inside a node, IB = across "
                "nodes)\n",
                r->nodes, world);
    fprintf(out,
            "feasible layouts: %d, ranked by predicted iteration time (rc = recompute, z = ZeRO level 0-3, m = "
            "micro-batches "
            "per pipeline;\n"
            "rc = full/sel(ective)/0, sp = sequence parallel, V = chunks per pipeline rank (interleaved 1F1B);\n"
            "sched = pipeline schedule: 1f1b, inter(leaved 1F1B), zb-h1 (zero bubble; the trainers run all three: "
            "-pp-schedule);\n"
            "HW TF/s = hardware FLOP/s per GPU, recompute included (the paper's formula with f = 4 for full);\n"
            "MFU = model FLOPs (f = 3, recompute never counted) / peak)\n",
            nfeas);
    if (show_cp)
        fprintf(out, "CP = context-parallel ranks per sequence (ring attention; %s)\n",
                r->cp > 0 ? "given" : "searched from seq 8192 on, at least 1024 rows per rank");
    planx_table_head(show_cp, out);
    int shown = 0, rec = planx_pick(rows, n, c, &r->k);
    double tight = c->mem_gb * 1073741824.0 * (1.0 - r->k.headroom);
    char note[64];
    for (int i = 0; i < n && rows[i].kind == 0; i++) {
        if (r->top > 0 && shown >= r->top && i > rec) break;
        if (r->top > 0 && shown >= r->top && i != rec) continue; /* always show the recommended row */
        if (i == rec)
            snprintf(note, sizeof(note), "recommended");
        else if (rows[i].mem.total > tight)
            snprintf(note, sizeof(note), "tight: < %.0f%% memory free", 100.0 * r->k.headroom);
        else
            note[0] = '\0';
        planx_print_row(&rows[i], i + 1, i == rec, note, show_cp, out);
        shown++;
    }
    if (nfeas > shown) fprintf(out, "  ... %d more feasible (-plan-top 0 shows all)\n", nfeas - shown);
    if (rec >= 0) {
        const PlanRow* b = &rows[rec];
        const PlanTime* t = &b->time;
        double ep, et;
        if (show_cp)
            fprintf(out,
                    "recommended: TP %d x CP %d x PP %d x DP %d, micro-batch %d, recompute %s, SP %d, V %d, schedule "
                    "%s, ZeRO %d: TP %s, CP %s, PP %s, CP x DP %s\n",
                    b->lay.tp, plan_cp(&b->lay), b->lay.pp, b->lay.dp, b->lay.mb, planx_rc_name(b->lay.recompute),
                    b->lay.sp, b->lay.vpp, plan_sched_name(&b->lay), b->lay.zero,
                    b->lay.tp == 1 ? "none" : (b->tp_inter ? "ACROSS nodes" : "inside a node"),
                    plan_cp(&b->lay) == 1 ? "none" : (b->cp_inter ? "across nodes" : "inside a node"),
                    b->lay.pp == 1 ? "none" : (b->pp_inter ? "across nodes" : "inside a node"),
                    plan_grad_group(&b->lay) == 1 ? "none" : (b->dp_inter ? "across nodes" : "inside a node"));
        else
            fprintf(out,
                    "recommended: TP %d x PP %d x DP %d, micro-batch %d, recompute %s, SP %d, V %d, schedule %s, ZeRO "
                    "%d: TP %s, PP %s, DP %s\n",
                    b->lay.tp, b->lay.pp, b->lay.dp, b->lay.mb, planx_rc_name(b->lay.recompute), b->lay.sp, b->lay.vpp,
                    plan_sched_name(&b->lay), b->lay.zero,
                    b->lay.tp == 1 ? "none" : (b->tp_inter ? "ACROSS nodes" : "inside a node"),
                    b->lay.pp == 1 ? "none" : (b->pp_inter ? "across nodes" : "inside a node"),
                    b->lay.dp == 1 ? "none" : (b->dp_inter ? "across nodes" : "inside a node"));
        fprintf(
            out,
            "  memory per GPU %.1f GiB of %.0f (stage %d: weights %.1f, grads %.1f, optimizer %.1f, activations %.1f, "
            "extra %.1f, workspace %.1f)\n",
            b->mem.total / 1073741824.0, c->mem_gb, b->mem.stage, b->mem.weights / 1073741824.0,
            b->mem.grads / 1073741824.0, b->mem.optim / 1073741824.0, b->mem.act / 1073741824.0,
            b->mem.extra / 1073741824.0, b->mem.workspace / 1073741824.0);
        planx_print_rank_mem(r, &b->lay, out);
        fprintf(out,
                "  iteration %.4g s = pipeline %.4g (slot %.1f ms x (m=%d) + bubble %.2f) + DP %.2f + embedding %.3f + "
                "optimizer %.3f\n",
                t->iter_s, t->pipe_s, 1e3 * t->slot_s, t->m, t->bubble_s, t->dp_s, t->emb_s, t->opt_s);
        fprintf(out,
                "  slot %.1f ms = GEMM %.1f + memory-bound %.1f + TP all-reduce (SP: reduce-scatter + all-gather) %.1f "
                "+ PP p2p %.1f",
                1e3 * t->slot_s, 1e3 * t->slot_gemm_s, 1e3 * t->slot_mem_s, 1e3 * t->slot_tp_s, 1e3 * t->slot_pp_s);
        if (plan_zero_eff(&b->lay) >= 2) fprintf(out, " + ZeRO DP not hidden %.1f", 1e3 * t->slot_dp_s);
        if (plan_cp(&b->lay) > 1)
            fprintf(out, " + CP ring not hidden %.1f (of %.1f moved)", 1e3 * t->slot_cp_s, 1e3 * t->slot_ring_s);
        fprintf(out, "; shares: compute %.1f%%, comm %.1f%%, bubble %.1f%%\n", 100.0 * t->compute_s / t->iter_s,
                100.0 * t->comm_s / t->iter_s, 100.0 * t->idle_s / t->iter_s);
        fprintf(out, "  slot by pass: F %.1f + B %.1f + W %.1f ms (W = %.2f of the weight GEMMs' backward)\n",
                1e3 * t->slot_f_s, 1e3 * (t->slot_s - t->slot_f_s - t->slot_w_s), 1e3 * t->slot_w_s, r->k.w_share);
        fprintf(
            out,
            "  throughput %.1f hardware TFLOP/s per GPU (recompute included), MFU %.1f%%, HFU %.1f%%, %.0f tokens/s",
            t->tflops, 100.0 * t->mfu, 100.0 * t->hfu, (double)r->gb * r->model.seq / t->iter_s);
        if (plan_paper_point(r, c, &b->lay, r->nodes, &ep, &et))
            fprintf(out, "; paper measured %.1f s, %.0f TFLOP/s", ep, et);
        fprintf(out, "\n");
        planx_print_ckpt(r, c, b, out);
    }
    /* every layout flag given but the layout does not fit the GPU: the trainer's rows all the same */
    int pinned = r->tp > 0 && r->pp > 0 && r->mb > 0 && r->recompute >= 0 && r->zero >= 0 && r->sp >= 0 && r->vpp > 0 &&
                 !plan_cp_searched(r);
    if (rec < 0 && pinned && n > 0 && rows[0].kind == 1) {
        char cps[24] = "";
        if (show_cp) snprintf(cps, sizeof(cps), " x CP %d", plan_cp(&rows[0].lay));
        fprintf(out,
                "layout given: TP %d%s x PP %d x DP %d, micro-batch %d, recompute %s, SP %d, V %d, schedule %s, ZeRO "
                "%d (%s)\n",
                rows[0].lay.tp, cps, rows[0].lay.pp, rows[0].lay.dp, rows[0].lay.mb,
                planx_rc_name(rows[0].lay.recompute), rows[0].lay.sp, rows[0].lay.vpp, plan_sched_name(&rows[0].lay),
                rows[0].lay.zero, rows[0].why);
        planx_print_rank_mem(r, &rows[0].lay, out);
    }
    int ninf = nmem + nbatch + nshape;
    if (ninf > 0) {
        fprintf(out, "infeasible layouts: %d (memory %d, batch divisibility %d, shape divisibility %d)\n", ninf, nmem,
                nbatch, nshape);
        planx_table_head(show_cp, out);
        int sh = 0, per_kind[4] = {0, 0, 0, 0};
        for (int i = nfeas; i < n; i++) { /* up to `top` of each reason */
            if (r->top > 0 && per_kind[rows[i].kind] >= r->top) continue;
            planx_print_row(&rows[i], i + 1, 0, "", show_cp, out);
            per_kind[rows[i].kind]++;
            sh++;
        }
        if (ninf > sh) fprintf(out, "  ... %d more infeasible (-plan-top 0 shows all)\n", ninf - sh);
    }
    if (r->csv_path) {
        FILE* f = fopen(r->csv_path, "w");
        if (f == NULL) {
            fprintf(stderr, "error: plan: cannot write %s\n", r->csv_path);
            free(rows);
            return 2;
        }
        planx_csv_head(f);
        for (int i = 0; i < n; i++) planx_csv_row(f, &rows[i], r->nodes, world);
        if (planx_csv_close(f, r->csv_path) != 0) {
            free(rows);
            return 2;
        }
        fprintf(out, "wrote %s (%d rows)\n", r->csv_path, n);
    }
    free(rows);
    return nfeas > 0 ? 0 : 1;
}

/* The layout family of the scaling report and the schedule comparison: TP, PP, micro-batch,
 * recompute, ZeRO (and SP, V, schedule) given, or those of the layout recommended on
 * base_nodes; DP follows the node count. A given family without -plan-schedule runs
 * Megatron's 1F1B (interleaved when -vpp > 1), the trainer's own schedule. 0 ok, 1 none. */
static inline int planx_family(const PlanRequest* r, const Cluster* c, int base_nodes, PlanLayout* fam, FILE* out,
                               const char* what) {
    char cps[24] = "";
    if (r->tp > 0 && r->pp > 0 && r->mb > 0 && r->recompute >= 0 && r->zero >= 0 && !plan_cp_searched(r)) {
        memset(fam, 0, sizeof(*fam));
        fam->tp = r->tp;
        fam->cp = r->cp > 0 ? r->cp : 1;
        fam->pp = r->pp;
        fam->mb = r->mb;
        fam->recompute = r->recompute;
        fam->zero = r->zero;
        fam->dp = 0;
        fam->sp = r->sp > 0 ? 1 : 0;
        fam->vpp = r->vpp > 0 ? r->vpp : 1;
        fam->sched = (planx_sched_mask(r) & (PLAN_SB_1F1B | PLAN_SB_INTERLEAVED)) ? PLAN_SCHED_1F1B : PLAN_SCHED_ZBH1;
        if (plan_cp(fam) > 1) snprintf(cps, sizeof(cps), " x CP %d", plan_cp(fam));
        fprintf(out,
                "%s: layout family TP %d%s x PP %d, micro-batch %d, recompute %s, SP %d, V %d, schedule %s, ZeRO %d "
                "(given), global batch %d\n",
                what, fam->tp, cps, fam->pp, fam->mb, planx_rc_name(fam->recompute), fam->sp, fam->vpp,
                plan_sched_name(fam), fam->zero, r->gb);
        return 0;
    }
    PlanRow best;
    if (plan_recommend(r, c, base_nodes, &best) != 0) {
        fprintf(out, "%s: no feasible layout on %d nodes to fix the family; give -tp -pp -mb -recompute -zero\n", what,
                base_nodes);
        return 1;
    }
    *fam = best.lay;
    fam->dp = 0;
    if (plan_cp(fam) > 1) snprintf(cps, sizeof(cps), " x CP %d", plan_cp(fam));
    fprintf(out,
            "%s: layout family TP %d%s x PP %d, micro-batch %d, recompute %s, SP %d, V %d, schedule %s, ZeRO %d "
            "(recommended on %d nodes), global batch %d\n",
            what, fam->tp, cps, fam->pp, fam->mb, planx_rc_name(fam->recompute), fam->sp, fam->vpp,
            plan_sched_name(fam), fam->zero, base_nodes, r->gb);
    return 0;
}

/* R4: one layout family (TP, PP, micro-batch, recompute, ZeRO fixed; DP = GPUs/(TP*PP))
 * over growing node counts at a fixed global batch. */
static inline int planx_run_scaling(const PlanRequest* r, const Cluster* c, FILE* out) {
    PlanLayout fam;
    int base_nodes = r->nodes > 0 ? r->nodes : r->scaling_nodes[0];
    if (planx_family(r, c, base_nodes, &fam, out, "scaling report") != 0) return 1;
    fprintf(out, "per-GPU throughput at fixed global batch as the cluster grows (the paper's R4)\n");
    fprintf(out,
            "  nodes   GPUs    DP     m  mem GiB   iter s  bubble    comm  HW TF/s   MFU   vs first  paper s  paper "
            "TFLOP/s\n");
    FILE* f = NULL;
    if (r->csv_path) {
        f = fopen(r->csv_path, "w");
        if (f == NULL) {
            fprintf(stderr, "error: plan: cannot write %s\n", r->csv_path);
            return 2;
        }
        fprintf(f,
                "nodes,gpus,gb,tp,pp,dp,mb,recompute,zero,m,feasible,reason,mem_gib,iter_s,bubble_frac,comm_frac,"
                "tflops_per_gpu,rel_first,paper_iter_s,paper_tflops,schedule,cp\n");
    }
    double first = 0.0;
    int nok = 0;
    for (int i = 0; i < r->scaling_n; i++) {
        int nodes = r->scaling_nodes[i], world = nodes * c->gpus_per_node;
        PlanLayout l = fam;
        PlanRow w;
        int tcp = l.tp * plan_cp(&l) * l.pp;
        l.dp = (world % tcp == 0) ? world / tcp : 0;
        if (l.dp == 0) {
            memset(&w, 0, sizeof(w));
            w.lay = l;
            w.kind = 3;
            snprintf(w.why, sizeof(w.why), "%d GPUs %% (tp*%spp=%d) != 0", world, plan_cp(&l) > 1 ? "cp*" : "", tcp);
        } else {
            plan_evaluate(&r->model, c, &r->k, nodes, r->gb, &l, &w);
        }
        double ep = 0, et = 0;
        int has = plan_paper_point(r, c, &l, nodes, &ep, &et);
        if (w.kind >= 2) {
            fprintf(out, "  %5d %6d %5d     -  infeasible: %s\n", nodes, world, l.dp, w.why);
            if (f)
                fprintf(f, "%d,%d,%d,%d,%d,%d,%d,%d,%d,,0,\"%s\",,,,,,,,,%s,%d\n", nodes, world, r->gb, l.tp, l.pp,
                        l.dp, l.mb, l.recompute, l.zero, w.why, plan_sched_name(&l), plan_cp(&l));
            continue;
        }
        const PlanTime* t = &w.time;
        if (first == 0.0 && w.feasible) first = t->tflops;
        double rel = first > 0 ? t->tflops / first : 0.0;
        nok += w.feasible;
        fprintf(out, "  %5d %6d %5d %5d %8.1f %8.2f %6.1f%% %6.1f%% %8.1f %5.1f%% %9.1f%%", nodes, world, l.dp, t->m,
                w.mem.total / 1073741824.0, t->iter_s, 100.0 * t->idle_s / t->iter_s, 100.0 * t->comm_s / t->iter_s,
                t->tflops, 100.0 * t->mfu, 100.0 * rel);
        if (has) fprintf(out, "  %7.1f  %13.0f", ep, et);
        if (!w.feasible) fprintf(out, "  infeasible: %s", w.why);
        fprintf(out, "\n");
        if (f) {
            fprintf(f, "%d,%d,%d,%d,%d,%d,%d,%d,%d,%d,%d,\"%s\",%.3f,%.4f,%.4f,%.4f,%.3f,%.4f,", nodes, world, r->gb,
                    l.tp, l.pp, l.dp, l.mb, l.recompute, l.zero, t->m, w.feasible, w.why, w.mem.total / 1073741824.0,
                    t->iter_s, t->idle_s / t->iter_s, t->comm_s / t->iter_s, t->tflops, rel);
            if (has)
                fprintf(f, "%.1f,%.0f,%s,%d\n", ep, et, plan_sched_name(&l), plan_cp(&l));
            else
                fprintf(f, ",,%s,%d\n", plan_sched_name(&l), plan_cp(&l));
        }
    }
    if (f) {
        if (planx_csv_close(f, r->csv_path) != 0) return 2;
        fprintf(out, "wrote %s\n", r->csv_path);
    }
    return nok > 0 ? 0 : 1;
}

/* One row of the schedule comparison: the family on `nodes` under schedule sched (V chunks). */
static inline void planx_sched_row(const PlanRequest* r, const Cluster* c, const PlanLayout* fam, int nodes, int sched,
                                   int vpp, PlanRow* w) {
    int world = nodes * c->gpus_per_node;
    PlanLayout l = *fam;
    l.sched = sched;
    l.vpp = vpp;
    int tcp = l.tp * plan_cp(&l) * l.pp;
    l.dp = (world % tcp == 0) ? world / tcp : 0;
    if (l.dp == 0) {
        memset(w, 0, sizeof(*w));
        w->lay = l;
        w->kind = 3;
        snprintf(w->why, sizeof(w->why), "%d GPUs %% (tp*%spp=%d) != 0", world, plan_cp(&l) > 1 ? "cp*" : "", tcp);
        return;
    }
    plan_evaluate(&r->model, c, &r->k, nodes, r->gb, &l, w);
}

/* -plan-schedules 1: the family under 1F1B, interleaved 1F1B (the fastest V > 1 that the
 * shape allows, or the family's V) and ZB-H1 on each node count, with the bubble and the
 * predicted ZB-H1 gain over 1F1B. */
static inline int planx_run_schedules(const PlanRequest* r, const Cluster* c, FILE* out) {
    PlanLayout fam;
    int nn = r->scaling_n > 0 ? r->scaling_n : 1;
    const int* nodes = r->scaling_n > 0 ? r->scaling_nodes : &r->nodes;
    fprintf(out, "\n");
    if (planx_family(r, c, r->nodes > 0 ? r->nodes : nodes[0], &fam, out, "schedule comparison (PREDICTED)") != 0)
        return 1;
    fprintf(out,
            "PREDICTED by the planner's model, not measured. Per micro-batch (columns: the slowest stage): F "
            "forward; W the\n"
            "  weight-gradient GEMMs, %.2f of the weight-carrying GEMMs' backward (-plan-w-share; dX and dW GEMMs "
            "have equal FLOPs);\n"
            "  B the rest of the backward (attention's GEMMs, memory-bound kernels, recomputation, TP/PP comm).\n"
            "  Bubble, equal stages: 1f1b (PP-1)(F+B+W); inter (PP-1)(F+B+W)/V; zb-h1 (PP-1)(F+B-W) while W <= "
            "min(F,B) (Qi et al.\n"
            "  2024, arXiv 2401.10241, Table 2), else (PP-1)(F+B-min(F,B,W)) (ZB-H1's order, simulated in "
            "tests/test_planner.c).\n"
            "  zb-h1 memory: 1F1B's PP - r micro-batches on stage r, plus r + 1 W stashes (the W's GEMM inputs and "
            "output\n"
            "  gradients, as the trainers keep them; with full recompute these exceed the checkpoints, so a later "
            "stage can\n"
            "  pass 1F1B's peak).\n"
            "  Sync: every schedule keeps the flush and the grad-norm all-reduce before the optimizer step (ZB-H1's "
            "bubble needs no\n"
            "  post-validation; the paper's post-validation would move that latency-bound all-reduce after the "
            "step, not remove it).\n",
            r->k.w_share);
    fprintf(out,
            "  nodes    DP     m  sched  V   F ms   B ms   W ms  mem GiB   iter s  bubble s  bubble    MFU  "
            "vs 1f1b  paper s\n");
    int nok = 0;
    for (int i = 0; i < nn; i++) {
        PlanRow rows[3];
        planx_sched_row(r, c, &fam, nodes[i], PLAN_SCHED_1F1B, 1, &rows[0]);
        /* interleaved: the family's V, else the fastest feasible V in 2..8 the layer count allows */
        int have_v = 0;
        for (int v = 2; v <= 8; v++) {
            if ((fam.vpp > 1 && v != fam.vpp) || r->model.L % (fam.pp * v)) continue;
            PlanRow w;
            planx_sched_row(r, c, &fam, nodes[i], PLAN_SCHED_1F1B, v, &w);
            int better = !have_v || (w.feasible && (!rows[1].feasible || w.time.iter_s < rows[1].time.iter_s));
            if (better) rows[1] = w;
            have_v = 1;
        }
        if (!have_v) {
            memset(&rows[1], 0, sizeof(rows[1]));
            rows[1].lay = fam;
            rows[1].lay.vpp = 0;
            rows[1].kind = 3;
            snprintf(rows[1].why, sizeof(rows[1].why), "no V in 2..8 divides L/PP = %d/%d", r->model.L, fam.pp);
        }
        planx_sched_row(r, c, &fam, nodes[i], PLAN_SCHED_ZBH1, 1, &rows[2]);
        for (int j = 0; j < 3; j++) {
            const PlanRow* w = &rows[j];
            const PlanTime* t = &w->time;
            static const char* NAMES[3] = {"1f1b", "inter", "zb-h1"};
            if (w->kind >= 2) {
                char vs[16] = "-";
                if (w->lay.vpp > 0) snprintf(vs, sizeof(vs), "%d", w->lay.vpp);
                fprintf(out, "  %5d %5d     -  %-5s %2s  infeasible: %s\n", nodes[i], w->lay.dp, NAMES[j], vs, w->why);
                continue;
            }
            double ep = 0, et = 0, b = t->slot_s - t->slot_f_s - t->slot_w_s;
            fprintf(out, "  %5d %5d %5d  %-5s %2d %6.1f %6.1f %6.1f %8.1f %8.2f %9.2f %6.1f%% %5.1f%%", nodes[i],
                    w->lay.dp, t->m, NAMES[j], w->lay.vpp, 1e3 * t->slot_f_s, 1e3 * b, 1e3 * t->slot_w_s,
                    w->mem.total / 1073741824.0, t->iter_s, t->bubble_s, 100.0 * t->bubble_s / t->iter_s,
                    100.0 * t->mfu);
            if (j > 0 && rows[0].kind < 2)
                fprintf(out, "  %+6.1f%%", 100.0 * (rows[0].time.iter_s / t->iter_s - 1.0));
            else
                fprintf(out, "  %7s", "-");
            if (plan_paper_point(r, c, &w->lay, nodes[i], &ep, &et)) fprintf(out, "  %7.1f", ep);
            if (!w->feasible) fprintf(out, "  infeasible: %s", w->why);
            fprintf(out, "\n");
            nok += w->feasible;
        }
    }
    fprintf(out,
            "  (vs 1f1b: predicted throughput gain over the 1f1b row at the same node count; paper s: measured)\n");
    return nok > 0 ? 0 : 1;
}

/* Entry point for `-plan`. Returns 0 ok, 1 when nothing is feasible, 2 on a bad request. */
static inline int plan_run(const PlanRequest* r, FILE* out) {
    Cluster c;
    const PlanModel* md = &r->model;
    if (plan_request_cluster(r, &c) != 0) {
        fprintf(stderr, "plan: unknown cluster '%s' (selene-a100, h100, h200)\n", r->cluster_name);
        return 2;
    }
    if (md->L <= 0 || md->H <= 0 || md->heads <= 0 || md->seq <= 0 || md->V <= 0 || md->H % md->heads) {
        fprintf(stderr, "plan: bad model shape L=%d H=%d heads=%d seq=%d V=%d\n", md->L, md->H, md->heads, md->seq,
                md->V);
        return 2;
    }
    if (r->gb <= 0) {
        fprintf(stderr, "plan: the global batch must be positive\n");
        return 2;
    }
    if (r->nodes <= 0 && r->scaling_n == 0) {
        fprintf(stderr, "plan: give -nodes N (or -scaling N1,N2,...)\n");
        return 2;
    }
    for (int i = -1; i < r->scaling_n; i++) {
        long n = i < 0 ? r->nodes : r->scaling_nodes[i];
        if (n * c.gpus_per_node > 1048576L) {
            fprintf(stderr, "plan: %ld nodes x %d GPUs is more than the planner handles (2^20 GPUs)\n", n,
                    c.gpus_per_node);
            return 2;
        }
    }
    if (r->cp > 1 && md->seq % (2 * r->cp)) {
        fprintf(
            stderr,
            "error: plan: -cp %d: the sequence (%d) must split into 2*cp = %d equal chunks: choose -seq or -cp so\n",
            r->cp, md->seq, 2 * r->cp);
        return 2;
    }
    if (r->cp > 1 && r->scaling_n == 0 && ((long)r->nodes * c.gpus_per_node) % r->cp) {
        fprintf(stderr, "error: plan: -cp %d does not divide the %ld GPUs of %d nodes: choose -cp or -nodes so\n",
                r->cp, (long)r->nodes * c.gpus_per_node, r->nodes);
        return 2;
    }
    int mask = planx_sched_mask(r);
    if ((r->vpp > 1 && !(mask & PLAN_SB_INTERLEAVED)) || (r->vpp == 1 && !(mask & (PLAN_SB_1F1B | PLAN_SB_ZBH1)))) {
        fprintf(
            stderr,
            "error: plan: -vpp %d and -plan-schedule exclude each other (interleaved is V > 1, 1f1b and zb-h1 V 1)\n",
            r->vpp);
        return 2;
    }
    planx_print_header(r, &c, out);
    int rc = r->scaling_n > 0 ? planx_run_scaling(r, &c, out) : planx_run_plan(r, &c, out);
    if (r->compare_sched && rc != 2) {
        int rs = planx_run_schedules(r, &c, out);
        if (rc == 0 && rs != 0) rc = rs;
    }
    return rc;
}

#endif /* LLMC_PLANNER_H */
