/*
 * spike.h: the loss-spike guard. Header-only, pure C11. It also compiles as C++ and under
 * nvcc. No globals. A rolling window (size W) of the loss and gradient norm of recent
 * ACCEPTED steps; each step spike_check decides whether to skip the optimizer update:
 *   SKIP_NONFINITE  the loss or the grad norm is NaN or Inf: always skipped, at any z,
 *                   from the first step on;
 *   SKIP_SPIKE      z > 0, the window holds >= min_samples values, and the loss or the
 *                   grad norm exceeds mean + z * sd of its window (one-sided: a sudden
 *                   drop is not trouble). sd = the sample standard deviation, floored at
 *                   rel_floor * |mean| (default 1e-3) so that a nearly constant window
 *                   does not turn rounding noise into spikes;
 *   SKIP_NONE       otherwise; only then are the two values added to the window.
 * Skipped values are NOT added to the window: a spike inside the window inflates its mean
 * and sd, which hides the spikes that follow (a burst would become the new normal), and a
 * NaN would poison the statistics. The window stands for healthy training only. The cost
 * is that a genuine level shift (a loss that stays higher) is skipped until the
 * consecutive-skip limit stops the run, which is the intended outcome: a person decides.
 *
 * consecutive counts skips in a row (reset by an accepted step); spike_should_stop(K) is
 * true once K > 0 skips in a row happened. Because a skipped step does not change the
 * weights or the optimizer state, the weights at that point equal those before the
 * trouble began.
 *
 * Every rank must call spike_check with the same GLOBAL loss and grad norm (after their
 * reductions), so that all ranks take the same decision.
 *
 * What a skipped step means for the trainer (the policy this guard is designed for): the
 * optimizer update is not applied (weights, moments and Adam's step count t unchanged);
 * the batch is still consumed (data position and tokens advance, so a bad batch is not
 * retried), and since the LR schedule and the batch ramp are functions of tokens consumed,
 * they advance too; the step is logged with its kind.
 *
 * API
 *   spike_init(&g, W, min_samples)   W >= 2, 2 <= min_samples <= W (else clamped); 0 ok, -1 no memory
 *   spike_free(&g)
 *   spike_check(&g, loss, gnorm, z)  -> SKIP_NONE / SKIP_SPIKE / SKIP_NONFINITE (z <= 0: only non-finite)
 *   spike_should_stop(&g, K)         K > 0 and at least K consecutive skips
 *   spike_kind_name(kind)            "none" / "spike" / "nonfinite" (for logs)
 *   after a check: g.last_mean_loss, g.last_sd_loss, g.last_mean_gnorm, g.last_sd_gnorm
 *   (the statistics used; 0 while the window is too short) for the log line.
 */
#ifndef LLMC_SPIKE_H
#define LLMC_SPIKE_H

#include <math.h>
#include <stdint.h>
#include <stdlib.h>

typedef enum { SKIP_NONE = 0, SKIP_SPIKE = 1, SKIP_NONFINITE = 2 } SkipKind;

typedef struct {
    int W, min_samples;
    double rel_floor; // sd floor as a fraction of |mean|
    double* loss;     // ring buffers of W accepted values
    double* gnorm;
    int n, head;                              // values held (<= W), next slot to write
    int consecutive;                          // skips in a row
    int64_t n_spike, n_nonfinite, n_accepted; // totals
    double last_mean_loss, last_sd_loss, last_mean_gnorm, last_sd_gnorm;
} SpikeGuard;

static inline int spike_init(SpikeGuard* g, int W, int min_samples) {
    if (W < 2) W = 2;
    if (min_samples < 2) min_samples = 2;
    if (min_samples > W) min_samples = W;
    g->W = W;
    g->min_samples = min_samples;
    g->rel_floor = 1e-3;
    g->n = g->head = 0;
    g->consecutive = 0;
    g->n_spike = g->n_nonfinite = g->n_accepted = 0;
    g->last_mean_loss = g->last_sd_loss = g->last_mean_gnorm = g->last_sd_gnorm = 0.0;
    g->loss = (double*)malloc(sizeof(double) * (size_t)W);
    g->gnorm = (double*)malloc(sizeof(double) * (size_t)W);
    if (g->loss == NULL || g->gnorm == NULL) {
        free(g->loss);
        free(g->gnorm);
        g->loss = g->gnorm = NULL;
        return -1;
    }
    return 0;
}

static inline void spike_free(SpikeGuard* g) {
    free(g->loss);
    free(g->gnorm);
    g->loss = g->gnorm = NULL;
    g->n = g->head = 0;
}

// mean and sample standard deviation of the first n values (two passes: exact enough and
// W is small)
static inline void spike_stats(const double* x, int n, double* mean, double* sd) {
    double m = 0.0, v = 0.0;
    for (int i = 0; i < n; i++) m += x[i];
    m /= n;
    for (int i = 0; i < n; i++) v += (x[i] - m) * (x[i] - m);
    *mean = m;
    *sd = n > 1 ? sqrt(v / (n - 1)) : 0.0;
}

static inline SkipKind spike_check(SpikeGuard* g, double loss, double gnorm, double z) {
    g->last_mean_loss = g->last_sd_loss = g->last_mean_gnorm = g->last_sd_gnorm = 0.0;
    if (!isfinite(loss) || !isfinite(gnorm)) {
        g->consecutive++;
        g->n_nonfinite++;
        return SKIP_NONFINITE;
    }
    if (z > 0.0 && g->n >= g->min_samples) {
        double ml, sl, mg, sg;
        spike_stats(g->loss, g->n, &ml, &sl);
        spike_stats(g->gnorm, g->n, &mg, &sg);
        if (sl < g->rel_floor * fabs(ml)) sl = g->rel_floor * fabs(ml);
        if (sg < g->rel_floor * fabs(mg)) sg = g->rel_floor * fabs(mg);
        g->last_mean_loss = ml;
        g->last_sd_loss = sl;
        g->last_mean_gnorm = mg;
        g->last_sd_gnorm = sg;
        if (loss > ml + z * sl || gnorm > mg + z * sg) {
            g->consecutive++;
            g->n_spike++;
            return SKIP_SPIKE;
        }
    }
    g->loss[g->head] = loss;
    g->gnorm[g->head] = gnorm;
    g->head = (g->head + 1) % g->W;
    if (g->n < g->W) g->n++;
    g->consecutive = 0;
    g->n_accepted++;
    return SKIP_NONE;
}

static inline int spike_should_stop(const SpikeGuard* g, int K) { return K > 0 && g->consecutive >= K; }

static inline const char* spike_kind_name(SkipKind k) {
    return k == SKIP_SPIKE ? "spike" : (k == SKIP_NONFINITE ? "nonfinite" : "none");
}

#endif // LLMC_SPIKE_H
