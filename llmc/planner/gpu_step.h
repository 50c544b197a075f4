/*
 * gpu_step.h: the per-kernel time model of one training step of the CUDA trainer on a Hopper
 * GPU (the h100 and h200 clusters), its constants and its rules, in one place for both users:
 *   - the planner (planner.h) takes its compute term there from these rules, kernel by kernel
 *     as train_gpt.cu launches them on one TP rank of one pipeline stage;
 *   - dev/cuda/costmodel.py reads the tables below from this file (it parses the A, N, G, H
 *     and T rows, one per line, and GPU_STEP_K_REF) and applies the same rules to the traffic
 *     and GEMMs it counts under the CPU emulation. Its --selftest checks that the counted
 *     rows (N, G, H) still describe the trainer, and that `-plan`'s one-GPU step and its own
 *     prediction agree within 5%.
 * The GPUs themselves (peak, HBM bandwidth, SMs) are the planner's cluster presets. The A100
 * clusters keep the planner's fitted model (gemm_eff, fitted to the MT-NLG run). Everything
 * computed from this file is a PREDICTION; doc/cuda_speed.md gives each number's basis.
 */
#ifndef LLMC_GPU_STEP_H
#define LLMC_GPU_STEP_H

#include <math.h>

// clang-format off
/* ASSUMED: name, slow, mid, fast. The prediction is the mid case. */
#define GPU_STEP_ASSUMED(A) \
    A(GEMM_SUSTAINED, 0.64, 0.72, 0.80)     /* large bf16 GEMM's fraction of peak in a training loop */ \
    A(TILE_EFF_128, 0.85, 0.90, 0.95)       /* a 128x128-tile kernel's rate relative to 128x256 */ \
    A(K0, 192.0, 128.0, 64.0)               /* per-tile pipeline fill and drain, in k */ \
    A(GEMM_FIXED_US, 5.0, 3.0, 2.0)         /* per GEMM call: ramp-up and tail */ \
    A(FUSED_EPI_RATE, 0.85, 0.95, 1.0)      /* GELU_AUX_BIAS, DGELU_BGRAD, BGRADB GEMMs vs plain */ \
    A(EPI_EXPOSED, 1.0, 0.5, 0.25)          /* share of an epilogue's extra bytes not hidden */ \
    A(HBM_EFF, 0.70, 0.80, 0.90)            /* streaming kernels' fraction of HBM bandwidth */ \
    A(KERNEL_FIXED_US, 3.0, 2.0, 1.0)       /* per launch of a memory-bound kernel */ \
    A(ATTN_FWD, 380.0, 450.0, 520.0)        /* cuDNN flash forward, TFLOP/s of causal FLOPs */ \
    A(ATTN_BWD, 320.0, 380.0, 440.0)        /* cuDNN flash backward's math, TFLOP/s of causal FLOPs */ \
    A(ATTN_DP_PASSES, 2.0, 1.0, 0.5)        /* deterministic backward: dP workspaces of HBM traffic */ \
    A(TC_FWD, 90.0, 115.0, 140.0)           /* own tensor-core kernel (LLMC_ATTENTION=tc), forward */ \
    A(TC_BWD, 55.0, 75.0, 95.0)             /* and backward */ \
    A(LAUNCH_GAP_US, 2.0, 1.0, 0.5)         /* GPU idle between back-to-back kernels */ \
    A(DRAIN_US, 50.0, 20.0, 10.0)           /* a host wait that drains the stream */ \
    A(GUARD_US, 10.0, 0.0, 0.0)             /* a micro-batch's upload-slot guard */ \
    A(COPY_US, 8.0, 4.0, 2.0)               /* one small cudaMemcpyAsync on the compute stream */ \
    A(PCIE_GBS, 20.0, 25.0, 40.0)           /* pinned host <-> device */ \
    A(HOST_LAUNCH_US, 8.0, 5.0, 3.0)        /* host time to issue one launch */

/* COUNTED: name, value. What the trainer does per step, as the cost model counts it under the
 * emulation (its --selftest fails when a count no longer matches): bytes of the memory-bound
 * kernels (GEMMs and attention are costed by their shapes and FLOPs), launches, host waits.
 * The copies are train_gpt.cu's (acts_upload_tokens, train_step's stats reads), not counted. */
#define GPU_STEP_COUNTED(N) \
    N(LAYER_FWD_BYTES, 28.0)     /* per B*T*C, layer forward: the two fused residual + LayerNorm */ \
    N(LAYER_BWD_BYTES, 22.0)     /* per B*T*C, layer backward: the two LayerNorm backwards */ \
    N(BIAS_ACC_BYTES, 12.0)      /* per bias element per layer: its fp32 scratch added in */ \
    N(FIRST_FWD_BYTES, 14.5)     /* per B*T*C, first stage forward: embedding, first LayerNorm */ \
    N(FIRST_BWD_BYTES, 15.5)     /* per B*T*C, first stage backward: wte and wpe gradients */ \
    N(LAST_BWD_BYTES, 10.2)      /* per B*T*C, last stage backward: the final LayerNorm */ \
    N(HEAD_BYTES, 4.5)           /* per B*T*Vp logit: the fused cross-entropy (loss + gradient) */ \
    N(PARAM_STEP_BYTES, 38.0)    /* per parameter per step: AdamW 30, grad norm 4, memset 4 */ \
    N(LAYER_FWD_LAUNCHES, 2)     /* memory-bound kernels per layer and micro-batch, forward */ \
    N(LAYER_BWD_LAUNCHES, 6)     /* and backward (2 LayerNorm, 4 bias-gradient adds) */ \
    N(ATTN_FWD_LAUNCHES, 1)      /* attention kernels per layer and micro-batch, forward */ \
    N(ATTN_BWD_LAUNCHES, 3)      /* and backward */ \
    N(FIRST_FWD_LAUNCHES, 2)     /* first stage, per micro-batch */ \
    N(FIRST_BWD_LAUNCHES, 2) \
    N(LAST_FWD_LAUNCHES, 2)      /* last stage: the fused cross-entropy and the loss sum */ \
    N(LAST_BWD_LAUNCHES, 1) \
    N(STEP_LAUNCHES, 18)         /* per step: AdamW 16, grad norm 2 */ \
    N(H2D_COPIES, 5)             /* per micro-batch: tokens, targets, embedding buckets */ \
    N(D2H_COPIES, 2)             /* per step: loss and norm */ \
    N(DRAINS, 2)                 /* host waits that drain the stream, per step */ \
    N(GUARDS, 1)                 /* upload-slot guards, per micro-batch */

/* The GEMMs of one layer and of the LM head per micro-batch, as train_gpt.cu calls cuBLASLt
 * (column-major D = m x n; m is the output features for the forward and input-gradient GEMMs,
 * n for the weight gradients): pass (F forward, B input gradient, W weight gradient), m, n,
 * k as symbols (C, CT = C/TP, C3T = 3C/TP, C4T = 4C/TP, VT = Vp/TP, BT = tokens), bytes per
 * output element (4: fp32 weight gradient accumulated with beta = 1), cuBLASLt epilogue. */
#define GPU_STEP_LAYER_GEMMS(G) \
    G(F, C3T, BT, C, 2, 4)       /* QKV + bias */ \
    G(F, C, BT, CT, 2, 1)        /* attention projection (its bias: the residual kernel) */ \
    G(F, C4T, BT, C, 2, 164)     /* fc1 + bias + GeLU, pre-activation kept (GELU_AUX_BIAS) */ \
    G(F, C, BT, C4T, 2, 1)       /* fc2 */ \
    G(B, C4T, BT, C, 2, 208)     /* fc2 input gradient + GeLU' + fc1 bias gradient (DGELU_BGRAD) */ \
    G(B, C, BT, C4T, 2, 1)       /* fc1 input gradient */ \
    G(B, CT, BT, C, 2, 1)        /* attention projection input gradient */ \
    G(B, C, BT, C3T, 2, 1)       /* QKV input gradient */ \
    G(W, C4T, C, BT, 4, 512)     /* fc2 weight + bias gradient (BGRADB) */ \
    G(W, C, C4T, BT, 4, 1)       /* fc1 weight gradient */ \
    G(W, C, C3T, BT, 4, 512)     /* QKV weight + bias gradient */ \
    G(W, CT, C, BT, 4, 512)      /* attention projection weight + bias gradient */
#define GPU_STEP_HEAD_GEMMS(H) \
    H(F, VT, BT, C, 2, 1)        /* logits on the padded vocabulary */ \
    H(B, C, BT, VT, 2, 1)        /* head input gradient */ \
    H(W, C, VT, BT, 4, 1)        /* wte gradient from the head */

/* the output tiles cuBLASLt is assumed to choose from (the best wave-quantized rate): m, n */
#define GPU_STEP_TILES(T) \
    T(128, 256) \
    T(256, 128) \
    T(128, 128)
// clang-format on

/* the k at which GEMM_SUSTAINED is stated (the k-efficiency is relative to it) */
#define GPU_STEP_K_REF 8192.0

enum {
#define GPU_STEP_ENUM_A(name, slow, mid, fast) GS_##name,
    GPU_STEP_ASSUMED(GPU_STEP_ENUM_A) GS_NASSUMED
#undef GPU_STEP_ENUM_A
};
enum {
#define GPU_STEP_ENUM_N(name, value) GSN_##name,
    GPU_STEP_COUNTED(GPU_STEP_ENUM_N) GSN_NCOUNTED
#undef GPU_STEP_ENUM_N
};
enum { GS_SLOW = 0, GS_MID = 1, GS_FAST = 2 };
enum { GSD_C, GSD_CT, GSD_C3T, GSD_C4T, GSD_VT, GSD_BT }; /* GEMM dimension symbols */
enum { GSP_F, GSP_B, GSP_W };                             /* GEMM passes */
/* the cuBLASLt epilogues of the GEMM tables (their enum values, as the cost model counts them) */
enum { GS_EPI_NONE = 1, GS_EPI_BIAS = 4, GS_EPI_GELU_AUX_BIAS = 164, GS_EPI_DGELU_BGRAD = 208, GS_EPI_BGRADB = 512 };

typedef struct {
    int pass, m, n, k, dbytes, epi;
} GpuStepGemm;

typedef struct {
    double peak_tflops; /* dense bf16 */
    double hbm_gbps;
    int sms;
} GpuStepDevice;

/* One case's assumptions (a column of GPU_STEP_ASSUMED; the planner's flags may override). */
typedef struct {
    double a[GS_NASSUMED];
} GpuStepCase;

static inline GpuStepCase gpu_step_case(int which) {
#define GPU_STEP_COL(name, slow, mid, fast) {slow, mid, fast},
    static const double T[GS_NASSUMED][3] = {GPU_STEP_ASSUMED(GPU_STEP_COL)};
#undef GPU_STEP_COL
    GpuStepCase c;
    for (int i = 0; i < GS_NASSUMED; i++) c.a[i] = T[i][which];
    return c;
}
static inline double gpu_step_mid(int name) { return gpu_step_case(GS_MID).a[name]; }

static inline double gpu_step_counted(int name) {
#define GPU_STEP_VAL(name, value) value,
    static const double V[GSN_NCOUNTED] = {GPU_STEP_COUNTED(GPU_STEP_VAL)};
#undef GPU_STEP_VAL
    return V[name];
}

/* The GEMM table of one layer (head = 0) or of the LM head (head = 1); *n gets its length. */
static inline const GpuStepGemm* gpu_step_gemms(int head, int* n) {
#define GPU_STEP_ROW(p, m, n, k, db, epi) {GSP_##p, GSD_##m, GSD_##n, GSD_##k, db, epi},
    static const GpuStepGemm LAYER[] = {GPU_STEP_LAYER_GEMMS(GPU_STEP_ROW)};
    static const GpuStepGemm HEAD[] = {GPU_STEP_HEAD_GEMMS(GPU_STEP_ROW)};
#undef GPU_STEP_ROW
    *n = head ? (int)(sizeof(HEAD) / sizeof(HEAD[0])) : (int)(sizeof(LAYER) / sizeof(LAYER[0]));
    return head ? HEAD : LAYER;
}

/* A dimension symbol's value for hidden size C, tokens BT, padded vocabulary Vp, TP degree tp. */
static inline double gpu_step_dim(int sym, double C, double BT, double Vp, int tp) {
    switch (sym) {
        case GSD_C:
            return C;
        case GSD_CT:
            return C / tp;
        case GSD_C3T:
            return 3.0 * C / tp;
        case GSD_C4T:
            return 4.0 * C / tp;
        case GSD_VT:
            return Vp / tp;
        default:
            return BT;
    }
}

static inline double gpu_step_hbm(const GpuStepDevice* d, const GpuStepCase* k) {
    return d->hbm_gbps * 1e9 * k->a[GS_HBM_EFF];
}

/* Wave quantization of an m x n output in tm x tn tiles over the SMs: tiles / (waves x SMs). */
static inline double gpu_step_wave_eff(double m, double n, int tm, int tn, int sms) {
    double tiles = ceil(m / tm) * ceil(n / tn);
    double waves = ceil(tiles / sms);
    return tiles / (waves * sms);
}

/* The best rate over the tiles (a 128x128 tile pays TILE_EFF_128): the tile cuBLASLt is assumed to pick. */
static inline double gpu_step_tile_eff(double m, double n, int sms, const GpuStepCase* k) {
#define GPU_STEP_TILE(tm, tn) {tm, tn},
    static const int TILES[][2] = {GPU_STEP_TILES(GPU_STEP_TILE)};
#undef GPU_STEP_TILE
    double best = -1.0;
    for (size_t i = 0; i < sizeof(TILES) / sizeof(TILES[0]); i++) {
        double e = gpu_step_wave_eff(m, n, TILES[i][0], TILES[i][1], sms);
        if (TILES[i][0] * TILES[i][1] < 128 * 256) e *= k->a[GS_TILE_EFF_128];
        if (e > best + 1e-12) best = e;
    }
    return best;
}

/* Bytes an epilogue moves beyond a plain bf16 D write. */
static inline double gpu_step_epilogue_bytes(double m, double n, int dbytes, int epi) {
    double extra = 0.0;
    if (dbytes == 4) extra += 6.0 * m * n; /* beta = 1: read fp32 C and write fp32 D instead of bf16 */
    if (epi == GS_EPI_BIAS)
        extra += 2.0 * m;
    else if (epi == GS_EPI_GELU_AUX_BIAS)
        extra += 2.0 * m * n + 2.0 * m; /* the pre-activation written */
    else if (epi == GS_EPI_DGELU_BGRAD)
        extra += 2.0 * m * n + 4.0 * m; /* the pre-activation read, an fp32 bias gradient */
    else if (epi == GS_EPI_BGRADB)
        extra += 4.0 * n; /* fp32 bias gradient of B's columns */
    else if (epi != GS_EPI_NONE)
        extra += 2.0 * m * n; /* an unknown epilogue: one more aux pass */
    return extra;
}

/* Seconds of one cuBLASLt call: 2mnk at GEMM_SUSTAINED of peak x the tile's wave efficiency x
 * k/(k + K0) relative to K_REF (x FUSED_EPI_RATE for a fused epilogue), at least the operands'
 * bytes at HBM rate; plus EPI_EXPOSED of the epilogue's extra bytes and GEMM_FIXED_US. */
static inline double gpu_step_gemm_s(double m, double n, double kk, int dbytes, int epi, const GpuStepDevice* d,
                                     const GpuStepCase* k) {
    double k0 = k->a[GS_K0];
    double keff = (kk / (kk + k0)) / (GPU_STEP_K_REF / (GPU_STEP_K_REF + k0));
    if (keff > 1.0) keff = 1.0;
    double rate = d->peak_tflops * 1e12 * k->a[GS_GEMM_SUSTAINED] * gpu_step_tile_eff(m, n, d->sms, k) * keff;
    int known = epi == GS_EPI_NONE || epi == GS_EPI_BIAS || epi == GS_EPI_GELU_AUX_BIAS || epi == GS_EPI_DGELU_BGRAD ||
                epi == GS_EPI_BGRADB;
    if (!known || epi == GS_EPI_GELU_AUX_BIAS || epi == GS_EPI_DGELU_BGRAD || epi == GS_EPI_BGRADB)
        rate *= k->a[GS_FUSED_EPI_RATE];
    double bw = gpu_step_hbm(d, k);
    double t_c = 2.0 * m * n * kk / rate;
    double t_io = (2.0 * (m * kk + kk * n) + 2.0 * m * n) / bw;
    double t_e = k->a[GS_EPI_EXPOSED] * gpu_step_epilogue_bytes(m, n, dbytes, epi) / bw;
    return (t_c > t_io ? t_c : t_io) + t_e + k->a[GS_GEMM_FIXED_US] * 1e-6;
}

/* Causal FLOPs of one attention forward (Q K^T and P V, half of the full T x T); the backward does 2.5x. */
static inline double gpu_step_attn_flops(double B, double heads, double T, double hs) {
    return 4.0 * B * heads * T * T * hs * 0.5;
}

/* Bytes of cuDNN's dP workspace for one deterministic backward: B x heads x T64 x T64 bf16,
 * T rounded up to 64 (cuDNN 9.x on Hopper takes the dP-workspace path for a deterministic
 * backward: dS goes to this workspace, a separate GEMM reads it for dQ). */
static inline double gpu_step_dp_bytes(double B, double heads, double T) {
    double t64 = ceil(T / 64.0) * 64.0;
    return B * heads * t64 * t64 * 2.0;
}

/* Seconds of one attention forward and one deterministic backward with cuDNN: the causal
 * FLOPs at their rates, and the backward's dP workspace traffic (ATTN_DP_PASSES of it) at HBM rate. */
static inline double gpu_step_attn_fwd_s(double B, double heads, double T, double hs, const GpuStepCase* k) {
    return gpu_step_attn_flops(B, heads, T, hs) / (k->a[GS_ATTN_FWD] * 1e12);
}
static inline double gpu_step_attn_bwd_s(double B, double heads, double T, double hs, const GpuStepDevice* d,
                                         const GpuStepCase* k) {
    double math = 2.5 * gpu_step_attn_flops(B, heads, T, hs) / (k->a[GS_ATTN_BWD] * 1e12);
    return math + k->a[GS_ATTN_DP_PASSES] * gpu_step_dp_bytes(B, heads, T) / gpu_step_hbm(d, k);
}

/* Seconds of memory-bound kernels: their bytes at HBM_EFF of the bandwidth + KERNEL_FIXED_US per launch. */
static inline double gpu_step_mem_s(double bytes, double launches, const GpuStepDevice* d, const GpuStepCase* k) {
    return bytes / gpu_step_hbm(d, k) + launches * k->a[GS_KERNEL_FIXED_US] * 1e-6;
}

#endif /* LLMC_GPU_STEP_H */
