/*
 * params.h: the parameter table. All parameters of a rank live in ONE contiguous float
 * buffer (and so do their gradients and AdamW moments), laid out tensor by tensor in
 * ParamId order; layered tensors hold this stage's layers contiguously, layer-major.
 * The table says, per tensor, its full shape, how tensor parallelism slices it, which
 * pipeline stage holds it, whether weight decay applies and how it is initialised.
 * Every element knows its index in the full (unsliced) tensor, which is what makes the
 * initial weights and checkpoints independent of the layout.
 *
 * Every tensor is (rows, cols) per layer, row-major, nn.Linear convention (out, in);
 * vectors are (n, 1). C = hidden size, Vp = padded vocabulary, T = max sequence.
 */
#ifndef LLMC_PARAMS_H
#define LLMC_PARAMS_H

#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include "rand.h"

typedef enum {
    PT_WTE,      // (Vp, C)      token embedding = LM head (tied); vocab-parallel rows
    PT_WPE,      // (T, C)       position embedding; first stage
    PT_LN1W,     // (L, C)
    PT_LN1B,     // (L, C)
    PT_QKVW,     // (L, 3C, C)   rows [Q | K | V], column-parallel by whole heads
    PT_QKVB,     // (L, 3C)
    PT_ATTPROJW, // (L, C, C)    row-parallel (input columns split)
    PT_ATTPROJB, // (L, C)       added once, after the all-reduce
    PT_LN2W,     // (L, C)
    PT_LN2B,     // (L, C)
    PT_FCW,      // (L, 4C, C)   column-parallel
    PT_FCB,      // (L, 4C)
    PT_FCPROJW,  // (L, C, 4C)   row-parallel
    PT_FCPROJB,  // (L, C)
    PT_LNFW,     // (C)          last stage
    PT_LNFB,     // (C)
    NUM_PARAM_TENSORS
} ParamId;

typedef enum {
    SPLIT_NONE, // replicated on every TP rank
    SPLIT_ROWS, // rows split in TP contiguous blocks (vocab-parallel wte, fc1)
    SPLIT_QKV,  // rows split within each of the Q, K, V blocks (whole heads)
    SPLIT_COLS, // columns split (row-parallel layers: input dimension)
} SplitKind;

typedef enum { ON_ALL_STAGES, ON_FIRST_STAGE, ON_LAST_STAGE, ON_FIRST_AND_LAST } Placement;
typedef enum { INIT_NORMAL, INIT_NORMAL_SCALED, INIT_ZEROS, INIT_ONES } InitKind;

typedef struct {
    const char* name;
    int layered;
    SplitKind split;
    Placement place;
    int decay; // weight decay applies (matrices and embeddings; not biases or LayerNorm)
    InitKind init;
} ParamInfo;

static const ParamInfo PARAM_INFO[NUM_PARAM_TENSORS] = {
    {"wte", 0, SPLIT_ROWS, ON_FIRST_AND_LAST, 1, INIT_NORMAL},
    {"wpe", 0, SPLIT_NONE, ON_FIRST_STAGE, 1, INIT_NORMAL},
    {"ln1w", 1, SPLIT_NONE, ON_ALL_STAGES, 0, INIT_ONES},
    {"ln1b", 1, SPLIT_NONE, ON_ALL_STAGES, 0, INIT_ZEROS},
    {"qkvw", 1, SPLIT_QKV, ON_ALL_STAGES, 1, INIT_NORMAL},
    {"qkvb", 1, SPLIT_QKV, ON_ALL_STAGES, 0, INIT_ZEROS},
    {"attprojw", 1, SPLIT_COLS, ON_ALL_STAGES, 1, INIT_NORMAL_SCALED},
    {"attprojb", 1, SPLIT_NONE, ON_ALL_STAGES, 0, INIT_ZEROS},
    {"ln2w", 1, SPLIT_NONE, ON_ALL_STAGES, 0, INIT_ONES},
    {"ln2b", 1, SPLIT_NONE, ON_ALL_STAGES, 0, INIT_ZEROS},
    {"fcw", 1, SPLIT_ROWS, ON_ALL_STAGES, 1, INIT_NORMAL},
    {"fcb", 1, SPLIT_ROWS, ON_ALL_STAGES, 0, INIT_ZEROS},
    {"fcprojw", 1, SPLIT_COLS, ON_ALL_STAGES, 1, INIT_NORMAL_SCALED},
    {"fcprojb", 1, SPLIT_NONE, ON_ALL_STAGES, 0, INIT_ZEROS},
    {"lnfw", 0, SPLIT_NONE, ON_LAST_STAGE, 0, INIT_ONES},
    {"lnfb", 0, SPLIT_NONE, ON_LAST_STAGE, 0, INIT_ZEROS},
};

// The shape of one model (what checkpoints must agree on) and where this rank sits.
typedef struct {
    int L, C, NH, T, V, Vp; // full model
    int tp, TP, pp, PP;     // this rank's TP and PP coordinates
    int layer0, nlayers;    // the stage's layers [layer0, layer0 + nlayers) when V == 1
    int nchunks;            // model chunks per rank (interleaved pipeline): chunk c holds the
                            // nlayers/V layers of virtual stage c*PP + pp; 1 = contiguous
    int full_rows[NUM_PARAM_TENSORS], full_cols[NUM_PARAM_TENSORS]; // per layer, unsliced
    int rows[NUM_PARAM_TENSORS], cols[NUM_PARAM_TENSORS];           // per layer, local slice
    int nl[NUM_PARAM_TENSORS];                                      // local layers held (0 = tensor not on this stage)
    size_t numel[NUM_PARAM_TENSORS], offset[NUM_PARAM_TENSORS];
    size_t total;
} ParamLayout;

static int param_on_stage(Placement p, int pp, int PP) {
    switch (p) {
        case ON_ALL_STAGES:
            return 1;
        case ON_FIRST_STAGE:
            return pp == 0;
        case ON_LAST_STAGE:
            return pp == PP - 1;
        case ON_FIRST_AND_LAST:
            return pp == 0 || pp == PP - 1;
    }
    return 0;
}

static void param_layout_init(ParamLayout* pl, int L, int C, int NH, int T, int V, int Vp, int tp, int TP, int pp,
                              int PP) {
    pl->L = L;
    pl->C = C;
    pl->NH = NH;
    pl->T = T;
    pl->V = V;
    pl->Vp = Vp;
    pl->tp = tp;
    pl->TP = TP;
    pl->pp = pp;
    pl->PP = PP;
    pl->nlayers = L / PP;
    pl->layer0 = pp * pl->nlayers;
    pl->nchunks = 1; // param_layout_set_chunks for V > 1
    const int fr[NUM_PARAM_TENSORS] = {Vp, T, C, C, 3 * C, 3 * C, C, C, C, C, 4 * C, 4 * C, C, C, C, C};
    const int fc[NUM_PARAM_TENSORS] = {C, C, 1, 1, C, 1, C, 1, 1, 1, C, 1, 4 * C, 1, 1, 1};
    size_t off = 0;
    for (int t = 0; t < NUM_PARAM_TENSORS; t++) {
        const ParamInfo* pi = &PARAM_INFO[t];
        pl->full_rows[t] = fr[t];
        pl->full_cols[t] = fc[t];
        pl->rows[t] = fr[t];
        pl->cols[t] = fc[t];
        if (pi->split == SPLIT_ROWS || pi->split == SPLIT_QKV) pl->rows[t] = fr[t] / TP;
        if (pi->split == SPLIT_COLS) pl->cols[t] = fc[t] / TP;
        int here = param_on_stage(pi->place, pp, PP);
        pl->nl[t] = here ? (pi->layered ? pl->nlayers : 1) : 0;
        pl->numel[t] = (size_t)pl->nl[t] * pl->rows[t] * pl->cols[t];
        pl->offset[t] = off;
        off += pl->numel[t];
    }
    pl->total = off;
}

// Interleaved pipeline: this rank holds V chunks; the tensors' sizes do not change, only
// which global layer each local layer is. Local layer l = c*(nlayers/V) + j of chunk c is
// global layer (c*PP + pp)*(nlayers/V) + j.
static void param_layout_set_chunks(ParamLayout* pl, int V) { pl->nchunks = V > 1 ? V : 1; }

static inline int param_global_layer(const ParamLayout* pl, int l) {
    int nlc = pl->nlayers / pl->nchunks;
    return ((l / nlc) * pl->PP + pl->pp) * nlc + l % nlc;
}
// the local index of global layer gl, or -1 if this rank does not hold it
static inline int param_local_layer(const ParamLayout* pl, int gl) {
    int nlc = pl->nlayers / pl->nchunks, vs = gl / nlc;
    if (gl < 0 || vs % pl->PP != pl->pp || vs / pl->PP >= pl->nchunks) return -1;
    return (vs / pl->PP) * nlc + gl % nlc;
}

// pointer to tensor t (layer l, local numbering) inside a flat buffer laid out by pl
static inline float* param_ptr(const ParamLayout* pl, float* buf, int t, int l) {
    return buf + pl->offset[t] + (size_t)l * pl->rows[t] * pl->cols[t];
}

// full-tensor coordinates of a local element: global layer, row, column
static void param_full_coords(const ParamLayout* pl, int t, size_t local, int* layer, int* row, int* col) {
    int r = pl->rows[t], c = pl->cols[t];
    size_t per = (size_t)r * c;
    int l = (int)(local / per);
    size_t rem = local % per;
    int lr = (int)(rem / c), lc = (int)(rem % c);
    *layer = PARAM_INFO[t].layered ? param_global_layer(pl, l) : 0;
    *row = lr;
    *col = lc;
    switch (PARAM_INFO[t].split) {
        case SPLIT_NONE:
            break;
        case SPLIT_ROWS:
            *row = pl->tp * r + lr;
            break;
        case SPLIT_COLS:
            *col = pl->tp * c + lc;
            break;
        case SPLIT_QKV: {
            int blk = r / 3; // local rows per Q/K/V block
            int which = lr / blk, within = lr % blk;
            *row = which * (pl->full_rows[t] / 3) + pl->tp * blk + within;
            break;
        }
    }
}

static size_t param_full_index(const ParamLayout* pl, int t, size_t local) {
    int layer, row, col;
    param_full_coords(pl, t, local, &layer, &row, &col);
    return ((size_t)layer * pl->full_rows[t] + row) * pl->full_cols[t] + col;
}

// Initialisation (doc/spec.md section 1): matrices and embeddings N(0, s^2), s = sqrt(1/(3C))
// (times std_mult, 1 in the recipe; -init-std-mult for ablations); the two output projections
// s/sqrt(2L) when scaled; biases 0; LayerNorm weight 1.
// Padded vocabulary rows are 0: they are never looked up and never enter the softmax.
static void param_init(const ParamLayout* pl, float* params, uint64_t seed, int scaled_init, double std_mult) {
    double s = std_mult * sqrt(1.0 / (3.0 * pl->C));
    for (int t = 0; t < NUM_PARAM_TENSORS; t++) {
        float* p = params + pl->offset[t];
        size_t n = pl->numel[t];
        InitKind k = PARAM_INFO[t].init;
        double std = (k == INIT_NORMAL_SCALED && scaled_init) ? s / sqrt(2.0 * pl->L) : s;
#pragma omp parallel for schedule(static)
        for (size_t i = 0; i < n; i++) {
            if (k == INIT_ZEROS) {
                p[i] = 0.0f;
                continue;
            }
            if (k == INIT_ONES) {
                p[i] = 1.0f;
                continue;
            }
            int layer, row, col;
            param_full_coords(pl, t, i, &layer, &row, &col);
            if (t == PT_WTE && row >= pl->V) {
                p[i] = 0.0f;
                continue;
            }
            size_t full = ((size_t)layer * pl->full_rows[t] + row) * pl->full_cols[t] + col;
            p[i] = (float)(std * normal_at(seed, (uint64_t)t, (uint64_t)full));
        }
    }
}

// Number of unique parameters of the full model (tied embedding once, padding excluded)
static double param_count_model(int L, int C, int T, int V) {
    return (double)V * C + (double)T * C + (double)L * (12.0 * C * C + 13.0 * C) + 2.0 * C;
}

#endif // LLMC_PARAMS_H
