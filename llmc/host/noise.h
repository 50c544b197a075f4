/*
 * noise.h: the gradient noise scale, measured during training at no extra
 * cost from data parallelism (McCandlish et al. 2018, "An Empirical Model of Large-Batch
 * Training", appendix A.1). Header-only, pure C11. It also compiles as C++ and under nvcc.
 * No globals, no allocation.
 *
 * The gradient of the mean loss over a batch of B samples (here a sample is one sequence)
 * has E|g_B|^2 = |G|^2 + tr(Sigma)/B, where G is the true gradient and Sigma the per-sample
 * covariance. Two batch sizes B_small < B_big give two equations in |G|^2 and tr(Sigma):
 *     G2 = (B_big |G_big|^2 - B_small |G_small|^2) / (B_big - B_small)     E[G2] = |G|^2
 *     S  = (|G_small|^2 - |G_big|^2) / (1/B_small - 1/B_big)              E[S]  = tr(Sigma)
 * Both are unbiased because they are linear in |g|^2, whose expectations are exact. Their
 * ratio is not, and one step's values are very noisy (G2 is often negative), so each is
 * smoothed by its own exponential moving average and
 *     B_simple = EMA(S) / EMA(G2)        (sequences; multiply by seq for tokens).
 *
 * Where the two batches come from:
 *  - DP >= 2 (the main path): |G_small|^2 = mean over the DP replicas of each replica's
 *    squared gradient norm before the DP reduction, B_small = global batch / DP;
 *    |G_big|^2 = squared norm after it, B_big = global batch. Cost: one scalar all-reduce.
 *  - DP == 1 (supported): two consecutive micro-batch groups of the same step. With m >= 2
 *    micro-batches, take the squared norm of the accumulated gradient after the first
 *    floor(m/2) of them (B_small = floor(m/2) * micro-batch), and the full gradient's
 *    (B_big = global batch). Each is still unbiased for its batch size (the correlation
 *    between the nested batches only raises the variance). Cost: one extra norm pass.
 *    With m == 1 there is no estimate that step.
 * The trainer's accumulated gradient is usually normalised by the GLOBAL batch (loss is the
 * mean over all of its tokens); noise_group_sq rescales a partial sum of squares to the
 * squared norm of the gradient of the group's own mean loss.
 *
 * EMA: bias-corrected like Adam's moments: m_n = beta m_{n-1} + (1-beta) x_n and the value
 * used is m_n / (1 - beta^n), so the first values are not pulled towards 0 (with one sample
 * the EMA equals it). Both EMAs share the same correction, so it cancels in B_simple; it
 * matters for the logged G2 and S. Updates with non-finite inputs or B_small >= B_big are
 * ignored (the trainer's spike guard handles non-finite gradients).
 *
 * `-ramp auto` (an experiment): noise_ramp_next grows the global batch by at most one ramp
 * increment per call while the measured B_simple is at least the next batch, never
 * shrinking it, never leaving the grid start + k*increment, never above the final batch.
 *
 * API
 *   noise_group_sq(sumsq, b_group, b_norm)      sumsq * (b_norm/b_group)^2
 *   noise_estimate(gs2, gb2, bs, bb, &G2, &S)   one step's unbiased estimates; 0 ok, -1 bad input
 *   noise_init(&st, beta)                       beta in [0, 1); 0.99 is a ~100-step memory
 *   noise_update(&st, gs2, gb2, bs, bb)         estimate + both EMAs; 1 updated, 0 skipped
 *   noise_g2(&st), noise_s(&st)                 bias-corrected EMAs (0 before any update)
 *   noise_bsimple(&st)                          EMA(S)/EMA(G2); -1 when undefined (no update
 *                                               yet, or EMA(G2) <= 0); 0 when EMA(S) < 0
 *   noise_ready(&st, min_updates)               at least min_updates updates so far
 *   noise_dp1_split(micro)                      micro-batches in the first group (DP = 1)
 *   noise_ramp_next(cur, b_simple, start, inc, final)   the -ramp auto policy
 */
#ifndef LLMC_NOISE_H
#define LLMC_NOISE_H

#include <math.h>
#include <stdint.h>

typedef struct {
    double beta;            // EMA decay
    double g2_m, s_m;       // raw (uncorrected) EMAs of G2 and S
    double beta_pow;        // beta^n, for the bias correction
    int64_t n;              // updates so far
    double last_g2, last_s; // the latest single-step estimates (for logs and tests)
} NoiseScale;

// The squared norm of the gradient of a group's mean loss, from the sum of squares of an
// accumulated gradient normalised by b_norm samples (for example the global batch) but
// summed over only b_group of them: the accumulated gradient is (b_group/b_norm) times
// the group's mean gradient.
static inline double noise_group_sq(double sumsq, double b_group, double b_norm) {
    double r = b_norm / b_group;
    return sumsq * r * r;
}

// One step's unbiased estimates of |G|^2 and tr(Sigma). gs2 = |G_small|^2 (the mean over
// the small batches of their squared gradient norms), gb2 = |G_big|^2. Returns 0, or -1
// (outputs untouched) if an input is not finite or not 0 < b_small < b_big.
static inline int noise_estimate(double gs2, double gb2, double b_small, double b_big, double* g2, double* s) {
    if (!isfinite(gs2) || !isfinite(gb2) || !isfinite(b_small) || !isfinite(b_big)) return -1;
    if (!(b_small > 0.0) || !(b_big > b_small)) return -1;
    *g2 = (b_big * gb2 - b_small * gs2) / (b_big - b_small);
    *s = (gs2 - gb2) / (1.0 / b_small - 1.0 / b_big);
    return 0;
}

static inline void noise_init(NoiseScale* st, double beta) {
    st->beta = (beta >= 0.0 && beta < 1.0) ? beta : 0.99;
    st->g2_m = st->s_m = 0.0;
    st->beta_pow = 1.0;
    st->n = 0;
    st->last_g2 = st->last_s = 0.0;
}

// Returns 1 if the EMAs were updated, 0 if the inputs were rejected (see noise_estimate).
static inline int noise_update(NoiseScale* st, double gs2, double gb2, double b_small, double b_big) {
    double g2, s;
    if (noise_estimate(gs2, gb2, b_small, b_big, &g2, &s) != 0) return 0;
    st->last_g2 = g2;
    st->last_s = s;
    st->g2_m = st->beta * st->g2_m + (1.0 - st->beta) * g2;
    st->s_m = st->beta * st->s_m + (1.0 - st->beta) * s;
    st->beta_pow *= st->beta;
    st->n += 1;
    return 1;
}

static inline double noise_g2(const NoiseScale* st) { return st->n > 0 ? st->g2_m / (1.0 - st->beta_pow) : 0.0; }
static inline double noise_s(const NoiseScale* st) { return st->n > 0 ? st->s_m / (1.0 - st->beta_pow) : 0.0; }

// B_simple in samples (sequences). -1: undefined (no update yet, or the smoothed |G|^2 is
// not positive: the signal is below the noise floor). 0 when the smoothed tr(Sigma) < 0.
static inline double noise_bsimple(const NoiseScale* st) {
    if (st->n <= 0) return -1.0;
    double g2 = noise_g2(st), s = noise_s(st);
    if (!(g2 > 0.0)) return -1.0;
    if (s < 0.0) return 0.0;
    return s / g2;
}

static inline int noise_ready(const NoiseScale* st, int64_t min_updates) { return st->n >= min_updates; }

// DP = 1: how many of `micro` micro-batches form the first group (0: no estimate this step).
static inline int noise_dp1_split(int micro) { return micro >= 2 ? micro / 2 : 0; }

// The -ramp auto policy: the global batch for the next step, given the current one (cur
// is first clamped to [start, final]). It returns cur, or the next batch on the grid
// start + k*inc above it when b_simple >= that batch and that batch <= final. So the batch
// never shrinks, never exceeds final, grows by at most one increment per call and stays on
// the grid when it starts on it (the trainer starts at `start`; config validation makes
// final - start a multiple of inc). An undefined b_simple (< 0, not finite) never grows it.
// inc <= 0 or final < start: cur is returned clamped.
static inline int64_t noise_ramp_next(int64_t cur, double b_simple, int64_t start, int64_t inc, int64_t final_gb) {
    if (cur < start) cur = start;
    if (cur > final_gb) cur = final_gb;
    if (inc <= 0 || final_gb < start) return cur;
    int64_t on_grid = start + ((cur - start) / inc) * inc;
    int64_t next = on_grid + inc;
    if (next > final_gb || !isfinite(b_simple) || b_simple < 0.0) return cur;
    if (b_simple >= (double)next) return next;
    return cur;
}

#endif // LLMC_NOISE_H
