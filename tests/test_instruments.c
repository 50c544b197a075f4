/*
 * tests/test_instruments.c: tests of the training instruments in llmc/host/noise.h (gradient noise
 * scale, -ramp auto policy) and llmc/host/spike.h (loss-spike guard). Standalone:
 *     gcc -O2 -std=gnu11 -Wall -Wextra -Werror tests/test_instruments.c -lm -o test_instruments
 * One line per check, then "N passed, M failed"; the exit status is non-zero on failure.
 *
 * Statistical checks: an estimator is called unbiased when the mean of its N per-trial
 * values lies within TOL_SE = 4 standard errors (sample sd / sqrt(N)) of the truth. For a
 * truly unbiased estimator that fails with probability ~6e-5 per check (normal tail); the
 * seeds are fixed, so the outcome is deterministic. Each unbiasedness check comes with a
 * power check: a known-biased estimator (bias of the size the correction removes) must FAIL
 * the same test, so the test can tell.
 */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../llmc/host/noise.h"
#include "../llmc/host/spike.h"

#define TOL_SE 4.0

static int n_pass = 0, n_fail = 0;

static void check(int ok, const char* name, const char* fmt, ...) __attribute__((format(printf, 3, 4)));
#include <stdarg.h>
static void check(int ok, const char* name, const char* fmt, ...) {
    printf("%s %s", ok ? "PASS" : "FAIL", name);
    if (fmt != NULL && fmt[0] != '\0') {
        va_list ap;
        va_start(ap, fmt);
        printf(": ");
        vprintf(fmt, ap);
        va_end(ap);
    }
    printf("\n");
    if (ok)
        n_pass++;
    else
        n_fail++;
}

// ---------------------------------------------------------------------------------------
// random numbers (xoshiro256** seeded by splitmix64)

typedef struct {
    uint64_t s[4];
} Rng;

static uint64_t splitmix(uint64_t* x) {
    uint64_t z = (*x += 0x9E3779B97F4A7C15ULL);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
    return z ^ (z >> 31);
}
static void rng_seed(Rng* r, uint64_t seed) {
    for (int i = 0; i < 4; i++) r->s[i] = splitmix(&seed);
}
static uint64_t rotl(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }
static uint64_t rng_u64(Rng* r) {
    uint64_t* s = r->s;
    uint64_t out = rotl(s[1] * 5, 7) * 9, t = s[1] << 17;
    s[2] ^= s[0];
    s[3] ^= s[1];
    s[1] ^= s[2];
    s[0] ^= s[3];
    s[2] ^= t;
    s[3] = rotl(s[3], 45);
    return out;
}
static double rng_unif(Rng* r) { return ((rng_u64(r) >> 11) + 0.5) * (1.0 / 9007199254740992.0); } // (0,1)
static double rng_normal(Rng* r) {
    double u = rng_unif(r), v = rng_unif(r);
    return sqrt(-2.0 * log(u)) * cos(6.283185307179586 * v);
}
// mean 0, variance 1, skewed (a centred exponential): the estimators need no Gaussianity
static double rng_skewed(Rng* r) { return -log(rng_unif(r)) - 1.0; }

// ---------------------------------------------------------------------------------------
// a synthetic gradient distribution: per-sample gradient g = G + L z, z with mean 0 and
// identity covariance, so E g = G and Cov g = Sigma = L L^T, tr(Sigma) = |L|_F^2.

#define DIM 16
typedef struct {
    double G[DIM];
    double L[DIM][DIM]; // lower triangular
    double g2_true, tr_true;
    int skewed;
} GradDist;

static void dist_make(GradDist* d, uint64_t seed, double g_scale, double noise_scale, int skewed) {
    Rng r;
    rng_seed(&r, seed);
    memset(d, 0, sizeof(*d));
    d->skewed = skewed;
    for (int i = 0; i < DIM; i++) d->G[i] = g_scale * rng_normal(&r);
    for (int i = 0; i < DIM; i++)
        for (int j = 0; j <= i; j++) d->L[i][j] = noise_scale * (i == j ? 1.0 + rng_unif(&r) : 0.5 * rng_normal(&r));
    for (int i = 0; i < DIM; i++) d->g2_true += d->G[i] * d->G[i];
    for (int i = 0; i < DIM; i++)
        for (int j = 0; j < DIM; j++) d->tr_true += d->L[i][j] * d->L[i][j];
}

static void dist_sample(const GradDist* d, Rng* r, double* g) {
    double z[DIM];
    for (int j = 0; j < DIM; j++) z[j] = d->skewed ? rng_skewed(r) : rng_normal(r);
    for (int i = 0; i < DIM; i++) {
        double v = d->G[i];
        for (int j = 0; j <= i; j++) v += d->L[i][j] * z[j];
        g[i] = v;
    }
}

static double sq(const double* g) {
    double s = 0;
    for (int i = 0; i < DIM; i++) s += g[i] * g[i];
    return s;
}

// One step as the trainer sees it. DP >= 2: `groups` replicas of `per` samples each;
// |G_small|^2 = mean of the replicas' squared norms, |G_big|^2 = squared norm of the mean.
// DP = 1 (nested = 1): one replica of `groups * per` samples; the small batch is the first
// `first` samples (first group of micro-batches), the big one is all of them.
typedef struct {
    int nested, groups, per, first;
} Scheme;

static void one_step(const GradDist* d, Rng* r, Scheme sc, double* gs2, double* gb2, double* bs, double* bb) {
    double acc[DIM], sum[DIM], g[DIM];
    int B = sc.groups * sc.per;
    memset(sum, 0, sizeof(sum));
    if (!sc.nested) {
        double s2 = 0;
        for (int k = 0; k < sc.groups; k++) {
            memset(acc, 0, sizeof(acc));
            for (int n = 0; n < sc.per; n++) {
                dist_sample(d, r, g);
                for (int i = 0; i < DIM; i++) acc[i] += g[i];
            }
            for (int i = 0; i < DIM; i++) {
                sum[i] += acc[i];
                acc[i] /= sc.per;
            }
            s2 += sq(acc);
        }
        *gs2 = s2 / sc.groups;
        *bs = sc.per;
    } else {
        for (int n = 0; n < B; n++) {
            dist_sample(d, r, g);
            for (int i = 0; i < DIM; i++) sum[i] += g[i];
            if (n + 1 == sc.first) {
                for (int i = 0; i < DIM; i++) acc[i] = sum[i] / sc.first;
                *gs2 = sq(acc);
            }
        }
        *bs = sc.first;
    }
    for (int i = 0; i < DIM; i++) sum[i] /= B;
    *gb2 = sq(sum);
    *bb = B;
}

typedef struct {
    double sum, sumsq;
    int64_t n;
} Moments;
static void mom_add(Moments* m, double x) {
    m->sum += x;
    m->sumsq += x * x;
    m->n++;
}
static double mom_mean(const Moments* m) { return m->sum / m->n; }
static double mom_se(const Moments* m) {
    double mu = mom_mean(m);
    double var = (m->sumsq - m->n * mu * mu) / (m->n - 1);
    return sqrt(var > 0 ? var / m->n : 0);
}
static int within(const Moments* m, double truth) { return fabs(mom_mean(m) - truth) <= TOL_SE * mom_se(m); }

static void test_unbiased(const char* label, const GradDist* d, Scheme sc, int trials, uint64_t seed) {
    Rng r;
    rng_seed(&r, seed);
    Moments mg = {0, 0, 0}, ms = {0, 0, 0}, naive_g = {0, 0, 0}, naive_s = {0, 0, 0};
    for (int t = 0; t < trials; t++) {
        double gs2 = 0, gb2, bs, bb, g2, s;
        one_step(d, &r, sc, &gs2, &gb2, &bs, &bb);
        if (noise_estimate(gs2, gb2, bs, bb, &g2, &s) != 0) {
            check(0, label, "noise_estimate rejected valid input");
            return;
        }
        mom_add(&mg, g2);
        mom_add(&ms, s);
        mom_add(&naive_g, gb2);              // |G_big|^2: biased up by tr(Sigma)/B_big
        mom_add(&naive_s, bs * (gs2 - gb2)); // plug-in: biased down by the factor (1 - B_small/B_big)
    }
    char name[160];
    snprintf(name, sizeof(name), "%s: E[G2] = |G|^2", label);
    check(within(&mg, d->g2_true), name, "mean %.5f truth %.5f (%.2f SE, SE %.5f, %d trials)", mom_mean(&mg),
          d->g2_true, (mom_mean(&mg) - d->g2_true) / mom_se(&mg), mom_se(&mg), trials);
    snprintf(name, sizeof(name), "%s: E[S] = tr(Sigma)", label);
    check(within(&ms, d->tr_true), name, "mean %.4f truth %.4f (%.2f SE, SE %.4f)", mom_mean(&ms), d->tr_true,
          (mom_mean(&ms) - d->tr_true) / mom_se(&ms), mom_se(&ms));
    snprintf(name, sizeof(name), "%s: power (biased |G_big|^2 and plug-in S fail the same test)", label);
    check(!within(&naive_g, d->g2_true) && !within(&naive_s, d->tr_true), name,
          "naive G2 %.0f SE off, naive S %.0f SE off; the test resolves a bias of %.1f%% in G2, %.1f%% in S",
          (mom_mean(&naive_g) - d->g2_true) / mom_se(&naive_g), (mom_mean(&naive_s) - d->tr_true) / mom_se(&naive_s),
          100 * TOL_SE * mom_se(&mg) / d->g2_true, 100 * TOL_SE * mom_se(&ms) / d->tr_true);
}

// The trainer's accumulated gradients are normalised by the global batch; noise_group_sq
// must turn their sums of squares into the squared norms of the groups' own mean gradients.
static void test_group_sq(void) {
    GradDist d;
    dist_make(&d, 11, 0.3, 1.0, 0);
    Rng r;
    rng_seed(&r, 12);
    const int DP = 4, per = 6, B = DP * per;
    double acc[DP][DIM], mean_k[DP][DIM], g[DIM];
    memset(acc, 0, sizeof(acc));
    memset(mean_k, 0, sizeof(mean_k));
    double worst = 0;
    for (int k = 0; k < DP; k++) {
        for (int n = 0; n < per; n++) {
            dist_sample(&d, &r, g);
            for (int i = 0; i < DIM; i++) {
                acc[k][i] += g[i] / B;
                mean_k[k][i] += g[i] / per;
            }
        }
        double a = noise_group_sq(sq(acc[k]), per, B), want = sq(mean_k[k]);
        double rel = fabs(a - want) / want;
        if (rel > worst) worst = rel;
    }
    check(worst < 1e-12, "noise_group_sq: rescales a 1/B_global-normalised partial gradient to its group mean",
          "worst rel err %.2e", worst);
}

static void test_estimate_inputs(void) {
    double g2 = 123, s = 456;
    int bad = noise_estimate(NAN, 1, 2, 4, &g2, &s) == -1 && noise_estimate(1, INFINITY, 2, 4, &g2, &s) == -1 &&
              noise_estimate(1, 1, 4, 4, &g2, &s) == -1 && noise_estimate(1, 1, 8, 4, &g2, &s) == -1 &&
              noise_estimate(1, 1, 0, 4, &g2, &s) == -1 && g2 == 123 && s == 456;
    // exact values: |G|^2 = 1, tr = 8, B_small 2, B_big 8: E|g_s|^2 = 5, E|g_b|^2 = 2
    int ok = noise_estimate(5, 2, 2, 8, &g2, &s) == 0 && fabs(g2 - 1) < 1e-12 && fabs(s - 8) < 1e-12;
    check(bad && ok, "noise_estimate: exact on expected inputs, rejects non-finite and B_small >= B_big",
          "g2 %.6g s %.6g", g2, s);
    check(noise_dp1_split(1) == 0 && noise_dp1_split(2) == 1 && noise_dp1_split(5) == 2 && noise_dp1_split(60) == 30,
          "noise_dp1_split: floor(m/2), none for one micro-batch", NULL);
}

static void test_ema_basics(void) {
    NoiseScale st;
    noise_init(&st, 0.9);
    int before = noise_bsimple(&st) == -1.0 && noise_g2(&st) == 0.0 && !noise_ready(&st, 1);
    int rej = noise_update(&st, NAN, 1, 2, 8) == 0 && noise_update(&st, 1, 1, 8, 8) == 0 && st.n == 0;
    noise_update(&st, 5, 2, 2, 8); // g2 = 1, s = 8
    int first =
        fabs(noise_g2(&st) - 1) < 1e-12 && fabs(noise_s(&st) - 8) < 1e-12 && fabs(noise_bsimple(&st) - 8) < 1e-12;
    check(before && rej && first,
          "EMA: undefined before any update, ignores bad input, bias-corrected (first value exact)",
          "after one update g2 %.6g s %.6g b_simple %.6g", noise_g2(&st), noise_s(&st), noise_bsimple(&st));
    // a constant input keeps the corrected EMA at that value at every step
    double worst = 0;
    for (int i = 0; i < 50; i++) {
        noise_update(&st, 5, 2, 2, 8);
        double e = fabs(noise_g2(&st) - 1) + fabs(noise_s(&st) - 8);
        if (e > worst) worst = e;
    }
    check(worst < 1e-9 && noise_ready(&st, 51), "EMA: constant input stays exact through warm-up", "worst err %.2e",
          worst);
    NoiseScale neg;
    noise_init(&neg, 0.5);
    noise_update(&neg, 1, 2, 2, 8); // g2 = (16 - 2)/6 > 0, s < 0
    int s_neg = noise_bsimple(&neg) == 0.0;
    noise_init(&neg, 0.5);
    noise_update(&neg, 10, 1, 2, 8); // g2 = (8 - 20)/6 < 0
    check(s_neg && noise_bsimple(&neg) == -1.0, "EMA: B_simple 0 when tr(Sigma) < 0, undefined when |G|^2 <= 0", NULL);
}

// The smoothed B_simple converges to tr(Sigma)/|G|^2. The ratio of EMAs is consistent but
// not unbiased; with beta = 0.999 (about 2000 steps of memory) the remaining spread is a few
// percent. Check: 16 independent chains of 20000 steps each; every chain's final B_simple
// within 15% of the truth, and their mean within 4 SE (or 1.5%, the ratio bias allowance).
static void test_ema_converges(void) {
    GradDist d;
    dist_make(&d, 21, 0.25, 1.0, 0);
    double truth = d.tr_true / d.g2_true;
    Scheme sc = {0, 4, 8, 0}; // DP 4, 8 sequences per replica
    Moments fin = {0, 0, 0};
    double worst = 0;
    for (int c = 0; c < 16; c++) {
        Rng r;
        rng_seed(&r, 1000 + c);
        NoiseScale st;
        noise_init(&st, 0.999);
        for (int t = 0; t < 20000; t++) {
            double gs2, gb2, bs, bb;
            one_step(&d, &r, sc, &gs2, &gb2, &bs, &bb);
            noise_update(&st, gs2, gb2, bs, bb);
        }
        double b = noise_bsimple(&st);
        mom_add(&fin, b);
        double rel = fabs(b / truth - 1);
        if (!(rel <= worst)) worst = rel;
    }
    double dev = fabs(mom_mean(&fin) - truth);
    check(worst < 0.15 && (dev <= TOL_SE * mom_se(&fin) || dev / truth < 0.015),
          "EMA B_simple converges to tr(Sigma)/|G|^2 (beta 0.999, 16 chains x 20000 steps)",
          "truth %.3f, mean %.3f (SE %.3f), worst chain %.1f%% off", truth, mom_mean(&fin), mom_se(&fin), 100 * worst);
}

// ---------------------------------------------------------------------------------------
// -ramp auto policy

static void test_ramp_policy(void) {
    const int64_t start = 32, inc = 32, fin = 1920;
    Rng r;
    rng_seed(&r, 31);
    int64_t cur = start;
    int bad_shrink = 0, bad_cap = 0, bad_grid = 0, bad_step = 0, bad_rule = 0;
    double b = 0;
    for (int t = 0; t < 200000; t++) {
        // a wandering B_simple, with undefined and non-finite readings mixed in
        double u = rng_unif(&r);
        if (u < 0.01)
            b = -1.0;
        else if (u < 0.02)
            b = NAN;
        else if (u < 0.025)
            b = INFINITY;
        else if (u < 0.03)
            b = 1e9;
        else
            b = fabs((isfinite(b) && b >= 0 ? b : 500.0) + 40.0 * rng_normal(&r));
        int64_t nx = noise_ramp_next(cur, b, start, inc, fin);
        if (nx < cur) bad_shrink++;
        if (nx > fin) bad_cap++;
        if ((nx - start) % inc != 0) bad_grid++;
        if (nx != cur && nx != cur + inc) bad_step++;
        int want_grow = cur + inc <= fin && isfinite(b) && b >= (double)(cur + inc);
        if ((nx == cur + inc) != want_grow) bad_rule++;
        cur = nx;
    }
    check(bad_shrink == 0 && bad_cap == 0 && bad_grid == 0 && bad_step == 0 && bad_rule == 0,
          "ramp auto: never shrinks, never above final, stays on the grid, one increment at most, grows iff B_simple "
          ">= next",
          "violations: shrink %d cap %d grid %d step %d rule %d (final batch %lld)", bad_shrink, bad_cap, bad_grid,
          bad_step, bad_rule, (long long)cur);
    // a huge B_simple walks to the final batch in exactly (final - start)/inc calls, then stays
    cur = start;
    int calls = 0;
    while (cur < fin && calls < 1000) {
        cur = noise_ramp_next(cur, 1e12, start, inc, fin);
        calls++;
    }
    int64_t after = noise_ramp_next(cur, 1e12, start, inc, fin);
    check(cur == fin && calls == (fin - start) / inc && after == fin,
          "ramp auto: reaches the final batch in (final-start)/inc steps and stops there", "%d calls, batch %lld",
          calls, (long long)cur);
    // a constant B_simple settles at the largest grid batch <= B_simple; falling B_simple never shrinks it
    cur = start;
    for (int t = 0; t < 100; t++) cur = noise_ramp_next(cur, 100.0, start, inc, fin);
    int64_t settled = cur;
    for (int t = 0; t < 100; t++) cur = noise_ramp_next(cur, 10.0, start, inc, fin);
    check(settled == 96 && cur == 96, "ramp auto: settles at the largest grid batch <= B_simple, holds when it falls",
          "settled %lld then %lld", (long long)settled, (long long)cur);
    check(noise_ramp_next(8, 1e9, 32, 32, 1920) == 64 && noise_ramp_next(4000, 1e9, 32, 32, 1920) == 1920 &&
              noise_ramp_next(64, 1e9, 32, 0, 1920) == 64,
          "ramp auto: below start is lifted to the grid, above final is capped, inc 0 holds", NULL);
}

// ---------------------------------------------------------------------------------------
// spike guard

// healthy training: slowly falling loss with noise, grad norm with noise
static void healthy(Rng* r, int t, double* loss, double* gnorm) {
    *loss = 4.0 - 0.0001 * t + 0.05 * rng_normal(r);
    *gnorm = 1.0 + 0.1 * rng_normal(r);
}

static void test_spike(void) {
    Rng r;
    rng_seed(&r, 41);
    SpikeGuard g;
    if (spike_init(&g, 100, 8) != 0) {
        check(0, "spike_init", "out of memory");
        return;
    }
    // 1. normal noise is never skipped at z = 6
    int skips = 0;
    double loss, gn;
    for (int t = 0; t < 5000; t++) {
        healthy(&r, t, &loss, &gn);
        if (spike_check(&g, loss, gn, 6.0) != SKIP_NONE) skips++;
    }
    check(skips == 0, "spike: 5000 steps of normal noise (z 6, W 100): no skips", "%d skipped", skips);
    // 2. an injected loss spike is skipped and does not enter the window
    int n_before = g.n;
    int64_t acc_before = g.n_accepted;
    healthy(&r, 5000, &loss, &gn);
    SkipKind k = spike_check(&g, loss + 1.5, gn, 6.0); // +1.5 = 30 sd
    double m_after = g.last_mean_loss;
    healthy(&r, 5001, &loss, &gn);
    SkipKind k2 = spike_check(&g, loss, gn, 6.0);
    check(k == SKIP_SPIKE && g.n_accepted == acc_before + 1 && g.n == n_before && g.consecutive == 0 && k2 == SKIP_NONE,
          "spike: injected loss spike skipped, not added to the window, next normal step accepted",
          "kind %s, window mean %.3f sd %.3f", spike_kind_name(k), m_after, g.last_sd_loss);
    // 3. an injected grad-norm spike is skipped
    healthy(&r, 5002, &loss, &gn);
    k = spike_check(&g, loss, gn * 5, 6.0);
    check(k == SKIP_SPIKE, "spike: injected grad-norm spike skipped", "kind %s", spike_kind_name(k));
    // 4. a burst of spikes is skipped throughout (the window is not inflated by them)
    healthy(&r, 5003, &loss, &gn);
    spike_check(&g, loss, gn, 6.0);
    int burst = 0;
    for (int i = 0; i < 5; i++) {
        healthy(&r, 5003 + i, &loss, &gn);
        if (spike_check(&g, loss + 1.5, gn, 6.0) == SKIP_SPIKE) burst++;
    }
    check(burst == 5 && g.consecutive == 5, "spike: a burst of 5 spikes is skipped every time", "%d of 5 skipped",
          burst);
    healthy(&r, 5010, &loss, &gn);
    spike_check(&g, loss, gn, 6.0);
    // 5. a sudden drop is not a spike (one-sided)
    healthy(&r, 5011, &loss, &gn);
    k = spike_check(&g, loss - 1.5, gn * 0.2, 6.0);
    check(k == SKIP_NONE, "spike: a sudden drop in loss or grad norm is not skipped", "kind %s", spike_kind_name(k));
    // 6. NaN / Inf always skip, even with spikes off (z = 0); a spike with z = 0 does not
    SkipKind kn = spike_check(&g, NAN, 1.0, 6.0);
    SkipKind ki = spike_check(&g, 3.0, INFINITY, 6.0);
    SkipKind kz = spike_check(&g, -INFINITY, 1.0, 0.0);
    SkipKind ks = spike_check(&g, 100.0, 1.0, 0.0);
    check(kn == SKIP_NONFINITE && ki == SKIP_NONFINITE && kz == SKIP_NONFINITE && ks == SKIP_NONE && g.n_nonfinite == 3,
          "spike: NaN loss, Inf grad norm, -Inf loss skipped as non-finite; z <= 0 turns only spike detection off",
          "NaN %s, Inf %s, z=0 -Inf %s, z=0 spike %s", spike_kind_name(kn), spike_kind_name(ki), spike_kind_name(kz),
          spike_kind_name(ks));
    spike_free(&g);

    // 7. before min_samples values, no spike is skipped, but a NaN is: guard A sees the
    //    jump with 7 values in its window (accepted), guard B with 8 (skipped)
    SpikeGuard gb2;
    spike_init(&g, 100, 8);
    spike_init(&gb2, 100, 8);
    SkipKind k0 = spike_check(&g, NAN, 1.0, 3.0);
    int early = 0;
    for (int t = 0; t < 8; t++) {
        if (t < 7 && spike_check(&g, 3.0 + 0.01 * t, 1.0, 3.0) != SKIP_NONE) early++;
        spike_check(&gb2, 3.0 + 0.01 * t, 1.0, 3.0);
    }
    SkipKind k7 = spike_check(&g, 50.0, 1.0, 3.0);
    SkipKind k8 = spike_check(&gb2, 50.0, 1.0, 3.0);
    check(k0 == SKIP_NONFINITE && early == 0 && k7 == SKIP_NONE && k8 == SKIP_SPIKE,
          "spike: NaN skipped from step 1; spikes only once the window holds min_samples (8)",
          "first %s, early skips %d, jump after 7 values %s, after 8 values %s", spike_kind_name(k0), early,
          spike_kind_name(k7), spike_kind_name(k8));
    spike_free(&g);
    spike_free(&gb2);

    // 8. a constant window: the sd floor (1e-3 |mean|) keeps rounding noise from counting
    spike_init(&g, 16, 8);
    for (int t = 0; t < 16; t++) spike_check(&g, 2.5, 0.75, 4.0);
    SkipKind kf = spike_check(&g, 2.5 * (1 + 1e-6), 0.75 * (1 + 1e-6), 4.0);
    SkipKind kb = spike_check(&g, 2.6, 0.75, 4.0);
    check(kf == SKIP_NONE && kb == SKIP_SPIKE, "spike: flat window ignores rounding noise, still skips a real jump",
          "%s, %s", spike_kind_name(kf), spike_kind_name(kb));
    spike_free(&g);

    // 9. stop after K consecutive skips: not before, a normal step resets the count
    spike_init(&g, 50, 8);
    rng_seed(&r, 42);
    for (int t = 0; t < 50; t++) {
        healthy(&r, t, &loss, &gn);
        spike_check(&g, loss, gn, 5.0);
    }
    const int K = 3;
    int stop_early = 0;
    for (int i = 0; i < K - 1; i++) {
        spike_check(&g, NAN, gn, 5.0);
        stop_early |= spike_should_stop(&g, K);
    }
    healthy(&r, 50, &loss, &gn);
    spike_check(&g, loss, gn, 5.0);
    int reset = g.consecutive == 0 && !spike_should_stop(&g, K);
    int stops_at = 0;
    for (int i = 1; i <= K + 1 && !stops_at; i++) {
        healthy(&r, 51 + i, &loss, &gn);
        if (i % 2)
            spike_check(&g, NAN, gn, 5.0);
        else
            spike_check(&g, loss + 10.0, gn, 5.0); // mixed kinds count together
        if (spike_should_stop(&g, K)) stops_at = i;
    }
    check(!stop_early && reset && stops_at == K && !spike_should_stop(&g, 0),
          "spike: stops after exactly K=3 consecutive skips (NaN and spikes mixed), an accepted step resets, K=0 never "
          "stops",
          "stopped after %d", stops_at);
    spike_free(&g);
}

int main(void) {
    // |G|^2 ~ 1-4 and tr(Sigma) ~ 40-80: B_simple of a few tens of sequences, comparable to the batches
    GradDist gauss, skew;
    dist_make(&gauss, 1, 0.35, 1.0, 0);
    dist_make(&skew, 2, 0.5, 1.0, 1);
    printf(
        "synthetic gradients: dim %d; gaussian |G|^2 %.4f tr(Sigma) %.4f; skewed |G|^2 %.4f tr(Sigma) %.4f; tolerance "
        "%.0f SE\n",
        DIM, gauss.g2_true, gauss.tr_true, skew.g2_true, skew.tr_true, TOL_SE);
    test_estimate_inputs();
    test_group_sq();
    test_unbiased("DP 2 x 8 seqs (gaussian)", &gauss, (Scheme){0, 2, 8, 0}, 40000, 101);
    test_unbiased("DP 8 x 4 seqs (skewed)", &skew, (Scheme){0, 8, 4, 0}, 40000, 102);
    test_unbiased("DP 1, first 3 of 6 micro-batches of 2 (gaussian)", &gauss, (Scheme){1, 6, 2, 6}, 40000, 103);
    test_unbiased("DP 1, first 2 of 5 micro-batches of 1 (skewed)", &skew, (Scheme){1, 5, 1, 2}, 40000, 104);
    test_ema_basics();
    test_ema_converges();
    test_ramp_policy();
    test_spike();
    printf("%d passed, %d failed\n", n_pass, n_fail);
    return n_fail == 0 ? 0 : 1;
}
