/*
 * schedule.h: the recipe's clocks, all counted in tokens or sequences consumed (never in
 * steps, because with a batch ramp steps differ in size): the learning rate (linear
 * warmup, cosine decay to a floor, constant after), the Megatron batch ramp, and the
 * learning rate projected from model size (-lr auto).
 */
#ifndef LLMC_SCHEDULE_H
#define LLMC_SCHEDULE_H

#include <math.h>
#include <stdint.h>

// LR at `tokens` consumed before the step. W = warmup, D = end of decay.
static double schedule_lr(double peak, double minlr_frac, int64_t W, int64_t D, int64_t tokens) {
    double minlr = peak * minlr_frac;
    if (tokens <= W) return W > 0 ? peak * (double)tokens / (double)W : peak;
    if (tokens > D) return minlr;
    double r = (double)(tokens - W) / (double)(D - W);
    return minlr + 0.5 * (1.0 + cos(M_PI * r)) * (peak - minlr);
}

// Megatron --rampup-batch-size S I R with R = ramp_tokens / seq sequences:
// k = (G-S)/I increments, each lasting R/k sequences. Exact integer arithmetic:
// floor(consumed / (R/k)) = floor(consumed * k * seq / ramp_tokens).
static int64_t schedule_batch(int64_t G, int64_t S, int64_t I, int64_t ramp_tokens, int seq, int64_t consumed) {
    if (I == 0) return G; // no ramp
    int64_t k = (G - S) / I;
    if (consumed * (int64_t)seq > ramp_tokens) return G;
    // consumed*k*seq stays far below 2^63 for any realistic run (1e9 samples * 60 * 2048 ~ 1.2e14)
    int64_t j = (consumed * k * (int64_t)seq) / ramp_tokens;
    int64_t B = S + j * I;
    return B > G ? G : B;
}

// -lr auto: a power law lr = a * N^b fitted by least squares (in log-log) to the learning
// rates GPT-3 published per model size (Brown et al. 2020, Table 2.1; N = nominal total
// parameter count). The fit is recomputed here from the table so it is written down once:
// a = 0.1325, b = -0.3051; it gives 4.5e-4 at 125M, 2.2e-4 at 1.3B, 3.5e-5 at 530B.
static void lr_auto_fit(double* a, double* b) {
    static const double N[8] = {125e6, 350e6, 760e6, 1.3e9, 2.7e9, 6.7e9, 13e9, 175e9};
    static const double LR[8] = {6.0e-4, 3.0e-4, 2.5e-4, 2.0e-4, 1.6e-4, 1.2e-4, 1.0e-4, 0.6e-4};
    double mx = 0, my = 0, sxy = 0, sxx = 0;
    for (int i = 0; i < 8; i++) {
        mx += log(N[i]) / 8;
        my += log(LR[i]) / 8;
    }
    for (int i = 0; i < 8; i++) {
        sxy += (log(N[i]) - mx) * (log(LR[i]) - my);
        sxx += (log(N[i]) - mx) * (log(N[i]) - mx);
    }
    *b = sxy / sxx;
    *a = exp(my - *b * mx);
}
static double lr_auto(double nparams) {
    double a, b;
    lr_auto_fit(&a, &b);
    return a * pow(nparams, b);
}

// the paper's model FLOPs per step (Narayanan et al. 2021, used by MT-NLG):
// F = 24 f B s L H^2 (1 + s/(6H) + V/(16 L H)), f = 4 with full recompute, else 3
static double model_flops(int f, double B, double s, double L, double H, double V) {
    return 24.0 * f * B * s * L * H * H * (1.0 + s / (6.0 * H) + V / (16.0 * L * H));
}

#endif // LLMC_SCHEDULE_H
