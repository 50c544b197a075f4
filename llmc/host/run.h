/*
 * run.h: the host-side state and bookkeeping of a training run, shared by the CPU and the
 * CUDA trainer so that they cannot drift apart: progress counters, the step's batch and
 * LR from the recipe, the noise scale and the spike guard applied to the reduced loss and
 * gradient norm, data and tokenizer, the log, the start-up table, and the main loop (log,
 * spike stop, validation, samples, checkpoints). A trainer embeds a Run in its context and
 * plugs its model in through RunHooks.
 * The run's lifecycle lives here too: the lock on -o and the refusal to reuse another
 * run's directory (outdir.h), -resume falling back to the newest checkpoint that loads and
 * checking the run's identity, the log cut back to the resumed step, the graceful stop on
 * signals (stop.h) and the step watchdog (watchdog.h).
 */
#ifndef LLMC_RUN_H
#define LLMC_RUN_H

#include <glob.h>
#include <limits.h>
#include <stdlib.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include "checkpoint.h"
#include "ckpt_async.h"
#include "ckpt_rank.h"
#include "comm.h"
#include "config.h"
#include "dataloader.h"
#include "runrecord.h"
#include "eval.h"
#include "layout.h"
#include "logger.h"
#include "noise.h"
#include "outdir.h"
#include "params.h"
#include "rand.h"
#include "schedule.h"
#include "spike.h"
#include "startup.h"
#include "stop.h"
#include "tokenizer.h"
#include "utils.h"
#include "watchdog.h"

typedef struct {
    Config cfg;
    Comm comm;
    DataSet train;            // the training stream (a blend of tspec's datasets)
    DataSet val[BLEND_MAX];   // the validation sets: one per dataset of vspec, each evaluated alone
    int nval;                 // how many (0: no validation)
    int have_val;             // nval > 0
    BlendSpec *tspec, *vspec; // -i / -j / -blend, parsed on every rank
    Logger log;
    Tokenizer tok;
    int have_tok;
    int64_t step, tokens, samples, adam_t; // steps done, tokens and samples consumed, AdamW t
    uint64_t rng;                          // sampler state
    double lr_peak;
    NoiseScale noise;   // gradient noise scale (DP >= 2)
    SpikeGuard spike;   // loss-spike guard
    int64_t auto_gb;    // -ramp auto: the current global batch
    uint64_t data_hash; // identity of the training shards (outdir.h)
    int nskip;          // data ranges passed over (-skip-data, -on-spike rewind): at run sample skip_at[i],
    int64_t skip_at[CKPT_MAX_SKIPS], skip_n[CKPT_MAX_SKIPS]; // skip_n[i] stream samples
    int rewinds;                                             // -on-spike rewind: rewinds so far in this process
    int lock_fd;                                             // rank 0: the flock on -o (held until exit), else -1
    int lock_dir_fd;                                         // rank 0: the flock on the -o directory itself, else -1
    int log_lock_fd;                                         // the flock on this rank's log file, else -1
    int dump_lock_fd;  // the flock on -dump-logits (the rank that writes it), else -1
    Watchdog wd;       // step watchdog (-timeout)
    char events[2048]; // resume notes for the log, written once it is open
    ClozeSet cloze;    // -eval-file (every rank holds it)
    int have_cloze;
    int prompt[CFG_PATH_LEN];
    int nprompt;    // -prompt token ids, or -prompt-text's
    double t_start; // wall ms when the run started (progress)
    double win_ms[16];
    int64_t win_tok[16];
    int win_n; // recent steps (ETA)
    int64_t* saved;
    int nsaved, saved_cap; // steps this run saved (known to load: -keep counts only these)
    int64_t resumed_step;  // the checkpoint -resume loaded, -1 if none (never pruned)
    CkptAsync ck;          // the save in flight (-ckpt-async 1), the staging buffer; the last save's figures
} Run;

typedef struct {
    double loss, gnorm, lr;
    int64_t gb;
    int micro;
    int clipped;
    int host_syncs; // host waits on the device in this step (CUDA trainer; -1: not counted)
    int has_noise;
    double g2, trsigma; // this step's noise-scale estimates (DP >= 2)
    SkipKind skip;      // the update was skipped (weights unchanged)
} StepResult;

static void run_init(Run* R, const Config* cfg, const Comm* comm) {
    memset(R, 0, sizeof(*R));
    R->resumed_step = -1;
    R->cfg = *cfg;
    R->comm = *comm;
    R->lr_peak = cfg->lr_auto ? lr_auto(param_count_model(cfg->L, cfg->H, cfg->seq, cfg->V)) : cfg->lr;
    R->rng = splitmix64(cfg->seed ^ 0x5A3F1E) | 1;
    noise_init(&R->noise, cfg->noise_beta);
    if (spike_init(&R->spike, cfg->spike_window, 8) != 0) die("out of memory for the spike guard");
    R->auto_gb = cfg->ramp_start > 0 ? cfg->ramp_start : cfg->gb;
    R->lock_fd = -1;
    R->lock_dir_fd = -1;
    R->log_lock_fd = -1;
    R->dump_lock_fd = -1;
    R->wd.fd = -1;
    cka_init(&R->ck);
}

static void run_free(Run* R) {
    ctrace_unpublish(&R->comm.trace); // its slot is unmapped with the watchdog's file
    watchdog_stop(&R->wd);
    if (R->lock_fd >= 0) close(R->lock_fd); // releases the lock on -o
    if (R->lock_dir_fd >= 0) close(R->lock_dir_fd);
    if (R->log_lock_fd >= 0) close(R->log_lock_fd);
    if (R->dump_lock_fd >= 0) close(R->dump_lock_fd);
    spike_free(&R->spike);
    if (R->train.paths) dataset_close(&R->train);
    for (int d = 0; d < R->nval; d++)
        if (R->val[d].paths) dataset_close(&R->val[d]);
    free(R->tspec);
    free(R->vspec);
    if (R->have_tok) tokenizer_free(&R->tok);
    if (R->have_cloze) cloze_free(&R->cloze);
    logger_close(&R->log);
    free(R->saved);
    cka_free(&R->ck);
}

// The training and validation blends of -i / -j / -blend. Every rank parses them (the same
// files, so every rank dies alike on a bad one).
static void run_blend_specs(Run* R) {
    const Config* c = &R->cfg;
    char err[1400];
    R->tspec = (BlendSpec*)malloc_check(sizeof(BlendSpec));
    R->vspec = (BlendSpec*)malloc_check(sizeof(BlendSpec));
    int have_v = 0;
    if (c->blend_file[0] != '\0') {
        int rc = blend_load_file(c->blend_file, "train", R->tspec, err, sizeof(err));
        if (rc == 0) die("-blend file %s has no \"train\" list", c->blend_file);
        if (rc < 0) die("%s", err);
        have_v = blend_load_file(c->blend_file, "valid", R->vspec, err, sizeof(err));
        if (have_v < 0) die("%s", err);
        if (have_v && strcmp(c->val_glob, CFG_DEFAULT_VAL) != 0 && c->val_glob[0] != '\0')
            die("-blend %s has a \"valid\" list and -j %s names validation data too: give one", c->blend_file,
                c->val_glob);
    } else if (blend_parse_arg(c->train_glob, R->tspec, err, sizeof(err)) != 0) {
        die("-i: %s", err);
    }
    if (!have_v && c->val_glob[0] != '\0') {
        if (blend_parse_arg(c->val_glob, R->vspec, err, sizeof(err)) != 0) die("-j: %s", err);
        have_v = 1;
    }
    if (!have_v || (c->val_every <= 0 && c->max_steps != 0)) R->vspec->n = 0; // -steps 0 evaluates what it has
}

// Shards (only the stages that read tokens open them), the validation decision (every
// rank takes part in evaluation), the tokenizer.
static void run_open_data(Run* R, int reads_tokens) {
    const Config* c = &R->cfg;
    if (R->comm.rank == 0) {
        printf("checking data shards %s ...\n", c->blend_file[0] ? c->blend_file : c->train_glob);
        fflush(stdout);
    }
    run_blend_specs(R);
    R->nval = R->vspec->n;
    if (reads_tokens) {
        dataset_open_spec(&R->train, R->tspec, c->seq, c->V, c->shuffle, c->seed);
        // a vocabulary larger than the data's (bare ./train_gpt's V=50257 on the 8192-token KJV shards)
        // trains output rows no token ever hits: said once, before any work
        if (R->comm.rank == 0 && R->train.max_id + 1 < c->V)
            printf(
                "warning: the training shards' largest token id is %d, but V=%d: %d rows of the output layer "
                "never see a token; pass the vocabulary of the tokenizer that wrote the shards (-V %d if it is "
                "the largest id + 1)\n",
                R->train.max_id, c->V, c->V - R->train.max_id - 1, R->train.max_id + 1);
        for (int d = 0; d < R->nval; d++) { // each validation dataset alone, in order
            BlendSpec one = *R->vspec;
            one.n = 1;
            one.weight[0] = 1;
            memcpy(one.name[0], R->vspec->name[d], BLEND_NAME);
            memcpy(one.path[0], R->vspec->path[d], BLEND_PATH);
            dataset_open_spec(&R->val[d], &one, c->seq, c->V, 0, c->seed);
            const char* both = dataset_shared_shard(&R->train, &R->val[d]);
            if (both != NULL && R->comm.rank == 0)
                printf("warning: -i and -j share the shard %s: the validation loss measures training data\n", both);
        }
    }
    // every rank runs the same number of validation micro-batches (run_val_samples), but only
    // the stages that read tokens opened the sets: the others take their sizes from them (all
    // readers opened the same files, so the mean is their common count)
    double readers = world_sum(&R->comm, reads_tokens ? 1.0 : 0.0);
    for (int d = 0; d < R->nval; d++) {
        double ns = world_sum(&R->comm, reads_tokens ? (double)R->val[d].nsamples : 0.0);
        if (!reads_tokens) R->val[d].nsamples = (int64_t)(ns / readers + 0.5);
        if (R->val[d].nsamples < (int64_t)c->mb * R->comm.DP) // every rank knows: every rank stops
            die("validation data '%s' holds %lld samples of %d+1 tokens, fewer than one micro-batch per "
                "data-parallel rank (%d): give more -j data, or -val-every 0",
                R->vspec->path[d], (long long)R->val[d].nsamples, c->seq, c->mb * R->comm.DP);
    }
    R->have_val = R->nval > 0;
    if (c->tokenizer[0] != '\0') {
        if (tokenizer_init(&R->tok, c->tokenizer) != 0) die("cannot load tokenizer %s (see above)", c->tokenizer);
        R->have_tok = 1;
    }
    if (c->eval_file[0] != '\0') {
        char err[1024];
        if (cloze_load(&R->cloze, c->eval_file, c->V, c->seq, err, sizeof(err)) != 0) die("%s", err);
        R->have_cloze = 1;
    }
    // startup checked -prompt-text on every rank already: an error here means the files changed since
    if (c->prompt_text[0] != '\0') {
        char err[CFG_ERR_LEN];
        if (startup_prompt_text(c, R->prompt, CFG_PATH_LEN, &R->nprompt, err) != 0) die("%s", err);
    }
    for (const char* p = c->prompt; *p;) { // "12,7,99": ids the sample continues
        char* end;
        long v = strtol(p, &end, 10);
        if (end == p || v < 0 || v >= c->V)
            die("-prompt wants comma-separated token ids below V=%d, got '%s'", c->V, c->prompt);
        if (R->nprompt + 1 >= c->seq) die("-prompt has too many tokens for seq %d", c->seq);
        R->prompt[R->nprompt++] = (int)v;
        p = *end == ',' ? end + 1 : end;
        if (*end != ',' && *end != '\0') die("-prompt wants comma-separated token ids, got '%s'", c->prompt);
    }
}

// the rank that samples and prints: TP 0, DP 0 of the last stage
static int run_sampler_rank(const Run* R) { return layout_rank(0, 0, R->comm.PP - 1, R->comm.TP, R->comm.DPC); }

// rank 0 logs to DIR/log.jsonl (or -log); every other rank to DIR/log_rankNNNNN.jsonl ("": none)
static void run_log_path(const Run* R, char* path, size_t n) {
    const Config* c = &R->cfg;
    int rank = R->comm.rank;
    path[0] = '\0';
    if (c->log_path[0] && rank == 0)
        snprintf(path, n, "%s", c->log_path);
    else if (c->log_path[0])
        snprintf(path, n, "%s.rank%05d", c->log_path, rank);
    else if (c->out_dir[0] && rank == 0)
        snprintf(path, n, "%s/log.jsonl", c->out_dir);
    else if (c->out_dir[0])
        snprintf(path, n, "%s/log_rank%05d.jsonl", c->out_dir, rank);
}

// Claims the files this rank writes beside its checkpoints (its log; -dump-logits on the rank
// that writes it) before anything is written or deleted: never another run's file, nor one in
// another running run's -o, nor a FIFO. Every rank learns the outcome.
static void run_claim_files(Run* R) {
    const Config* c = &R->cfg;
    char path[CFG_PATH_LEN + 32];
    run_log_path(R, path, sizeof(path));
    char err[1400] = "";
    int claim = path[0] ? outdir_claim_file(path, c->out_dir, "log file", err, sizeof(err)) : -2;
    int dump = -2;
    if (claim != -1 && c->dump_logits[0] != '\0' && R->comm.rank == run_sampler_rank(R)) // it writes the dump
        dump = outdir_claim_file(c->dump_logits, c->out_dir, "-dump-logits file", err, sizeof(err));
    int bad = claim == -1 || dump == -1;
    if (world_sum(&R->comm, bad ? 1.0 : 0.0) > 0) {
        if (bad) fprintf(stderr, "error: %s\n", err);
        exit(1);
    }
    R->log_lock_fd = claim >= 0 ? claim : -1;
    R->dump_lock_fd = dump >= 0 ? dump : -1;
}

static void run_open_log(Run* R, int append) {
    const Comm* m = &R->comm;
    char path[CFG_PATH_LEN + 32];
    run_log_path(R, path, sizeof(path));
    // a resume continues the log from the checkpoint's step: later records (of steps the
    // crashed or stopped attempt took past it) go, so no step is logged twice
    if (append && path[0] && log_truncate_to_step(path, R->step) != 0)
        die("cannot rewrite the log %s on resume: check -log / -o", path);
    if (append && R->log_lock_fd >= 0) { // the rewrite replaced the file: claim the new one
        char err[1400];
        int again = outdir_claim_file(path, R->cfg.out_dir, "log file", err, sizeof(err));
        if (again == -1) die("%s (-log / -o)", err);
        close(R->log_lock_fd);
        R->log_lock_fd = again;
    }
    logger_open(&R->log, path, append, m->rank, m->tp, m->pp, m->dp, m->rank == 0);
    if (!append && R->log.f && m->rank == 0) { // the run's record first (runrecord.h)
        fputs("{\"type\":\"config\",", R->log.f);
        runrecord_json(R->log.f, &R->cfg, m);
        fputs("}\n", R->log.f);
        logger_check(&R->log);
    }
}

// ----------------------------------------------------------------------------------------
// one step's bookkeeping

// the step's global batch (ramp or -ramp auto), LR (tokens consumed before it), micro-batches
static StepResult run_step_plan(const Run* R) {
    const Config* c = &R->cfg;
    StepResult r;
    memset(&r, 0, sizeof(r));
    r.gb = c->ramp_auto ? R->auto_gb
                        : schedule_batch(c->gb, c->ramp_start, c->ramp_inc, c->ramp_tokens, c->seq, R->samples);
    r.lr = schedule_lr(R->lr_peak, c->minlr_frac, c->warmup_tokens, c->decay_tokens, R->tokens);
    r.micro = (int)(r.gb / ((int64_t)c->mb * R->comm.DP));
    r.host_syncs = -1;
    return r;
}

// Given the global loss and grad norm in r (identical on every rank) and the mean over DP
// replicas of each replica's squared norm before the DP reduction: the noise scale and the
// spike guard's decision. On SKIP_NONE the caller applies the update; r->clipped and the
// returned scale are the clipping factor for it.
static float run_step_judge(Run* R, StepResult* r, double small_sumsq) {
    const Config* c = &R->cfg;
    if (R->comm.DP > 1 && !isnan(small_sumsq)) { // NaN: no replica holds its whole gradient (-zero 2/3)
        double bs = (double)r->gb / R->comm.DP, bb = (double)r->gb;
        double gs2 = noise_group_sq(small_sumsq, bs, bb), gb2 = r->gnorm * r->gnorm;
        r->has_noise = noise_estimate(gs2, gb2, bs, bb, &r->g2, &r->trsigma) == 0;
        noise_update(&R->noise, gs2, gb2, bs, bb);
    }
    r->skip = spike_check(&R->spike, r->loss, r->gnorm, c->skip_spikes);
    float gscale = 1.0f;
    if (r->skip == SKIP_NONE && c->clip > 0 && r->gnorm > c->clip) {
        gscale = (float)(c->clip / (r->gnorm + 1e-6));
        r->clipped = 1;
    }
    if (r->skip == SKIP_NONE) R->adam_t += 1;
    return gscale;
}

// A step (skipped or not) consumes its batch: tokens, the LR schedule and the ramp advance.
static void run_step_done(Run* R, const StepResult* r) {
    const Config* c = &R->cfg;
    R->samples += r->gb;
    R->tokens += r->gb * c->seq;
    R->step += 1;
    if (c->ramp_auto && noise_ready(&R->noise, 10))
        R->auto_gb = noise_ramp_next(R->auto_gb, noise_bsimple(&R->noise), c->ramp_start, c->ramp_inc, c->gb);
}

static int run_finished(const Run* R) {
    const Config* c = &R->cfg;
    return !(R->tokens < c->total_tokens && (c->max_steps < 0 || R->step < c->max_steps));
}

// ----------------------------------------------------------------------------------------
// checkpointed progress

static Progress run_progress(const Run* R) {
    Progress p;
    memset(&p, 0, sizeof(p));
    p.step = R->step;
    p.tokens = R->tokens;
    p.samples = R->samples;
    p.adam_t = R->adam_t;
    p.rng = R->rng;
    p.auto_gb = R->auto_gb;
    p.noise_g2m = R->noise.g2_m;
    p.noise_sm = R->noise.s_m;
    p.noise_betapow = R->noise.beta_pow;
    p.noise_n = R->noise.n;
    p.data_hash = R->data_hash;
    p.nskip = R->nskip;
    memcpy(p.skip_at, R->skip_at, sizeof(p.skip_at));
    memcpy(p.skip_n, R->skip_n, sizeof(p.skip_n));
    return p;
}

// -skip-data holds what a checkpoint holds (C and C++ alike: a negative array size fails to compile)
typedef char run_skip_sizes_agree[CFG_MAX_SKIPS == CKPT_MAX_SKIPS ? 1 : -1];

// the data ranges passed over, on every rank (the stages that read tokens apply them)
static void run_set_skips(Run* R, int n, const int64_t* at, const int64_t* count) {
    R->nskip = n;
    for (int i = 0; i < n; i++) {
        R->skip_at[i] = at[i];
        R->skip_n[i] = count[i];
    }
    if (R->train.paths) dataset_set_skips(&R->train, n, at, count);
}

static void run_restore(Run* R, const Progress* p) {
    R->step = p->step;
    R->tokens = p->tokens;
    R->samples = p->samples;
    R->adam_t = p->adam_t;
    R->rng = p->rng;
    if (p->auto_gb > 0) R->auto_gb = p->auto_gb;
    R->noise.g2_m = p->noise_g2m;
    R->noise.s_m = p->noise_sm;
    R->noise.beta_pow = p->noise_betapow;
    R->noise.n = p->noise_n;
    if (R->noise.n == 0) noise_init(&R->noise, R->cfg.noise_beta);
    run_set_skips(R, p->nskip, p->skip_at, p->skip_n);
}

// ----------------------------------------------------------------------------------------
// the start-up table (rank 0): the common rows; a trainer adds its own and closes it

static void table_rule(void) { printf("+----------------------+--------------------------------------------+\n"); }

static void table_row(const char* name, const char* fmt, ...) {
    char b[600];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(b, sizeof(b), fmt, ap);
    va_end(ap);
    printf("| %-20s | %-42s |\n", name, b);
}

static void run_print_config(const Run* R) {
    const Config* c = &R->cfg;
    const Comm* m = &R->comm;
    table_rule();
    table_row("model", "%s: L=%d H=%d heads=%d seq=%d", c->model, c->L, c->H, c->heads, c->seq);
    table_row("vocab", "V=%d padded to Vp=%d", c->V, c->Vp);
    table_row("parameters", "%.3fM (tied embedding once)", param_count_model(c->L, c->H, c->seq, c->V) / 1e6);
    if (m->CP > 1)
        table_row("layout", "tp=%d cp=%d pp=%d dp=%d world=%d", m->TP, m->CP, m->PP, m->DP, m->world);
    else
        table_row("layout", "tp=%d pp=%d dp=%d world=%d", m->TP, m->PP, m->DP, m->world);
    table_row("micro-batch", "%d sequences", c->mb);
    table_row("zero / recompute", "%d / %d", c->zero, c->recompute);
    if (c->ramp_auto)
        table_row("global batch", "%lld, -ramp auto from %lld by %lld", (long long)c->gb, (long long)c->ramp_start,
                  (long long)c->ramp_inc);
    else if (c->ramp_inc)
        table_row("global batch", "%lld, ramp %lld+%lld over %lld tokens", (long long)c->gb, (long long)c->ramp_start,
                  (long long)c->ramp_inc, (long long)c->ramp_tokens);
    else
        table_row("global batch", "%lld (no ramp)", (long long)c->gb);
    table_row("peak lr", "%.4e%s", R->lr_peak, c->lr_auto ? " (auto: GPT-3 power-law fit)" : "");
    table_row("warmup / decay", "%lld / %lld tokens", (long long)c->warmup_tokens, (long long)c->decay_tokens);
    table_row("min lr", "%.4e (%.3g of peak)", R->lr_peak * c->minlr_frac, c->minlr_frac);
    table_row("adamw", "b1=%.3g b2=%.3g eps=%.1e wd=%.3g", c->beta1, c->beta2, c->eps, c->wd);
    table_row("clip", "%.3g", c->clip);
    table_row("spike guard", "z=%.3g window=%d stop after %d", c->skip_spikes, c->spike_window, c->spike_stop);
    if (c->max_steps == 0) // the recipe's length still sets the schedule the loaded weights sit in
        table_row("total tokens", "%lld (the schedule's; -steps 0 trains none)", (long long)c->total_tokens);
    else if (c->max_steps > 0)
        table_row("total tokens", "%lld (this start stops after %lld steps)", (long long)c->total_tokens,
                  (long long)c->max_steps);
    else
        table_row("total tokens", "%lld", (long long)c->total_tokens);
    if (R->tspec->plain) {
        table_row("train data", "%s", c->train_glob);
        table_row("train samples", "%lld (%lld tokens)", (long long)R->train.nsamples, (long long)R->train.ntokens);
    } else {
        table_row("train data", "a blend of %d datasets%s%s", R->tspec->n, c->blend_file[0] ? " from " : "",
                  c->blend_file);
        for (int d = 0; d < R->tspec->n; d++) // weight, size, and the epochs the whole run will take
            table_row(R->tspec->name[d], "w %.4f, %lld samples, %.3g epochs over -tokens", R->tspec->weight[d],
                      (long long)R->train.parts[d].nsamples,
                      R->tspec->weight[d] * (double)c->total_tokens / c->seq / (double)R->train.parts[d].nsamples);
    }
    if (R->nval > 1)
        table_row("val data", "%d datasets, each alone; val_loss is their weighted mean", R->nval);
    else
        table_row("val data", "%s", R->have_val ? R->vspec->path[0] : "(none)");
    table_row("shuffle / seed", "%d / %llu", c->shuffle, (unsigned long long)c->seed);
    table_row("out dir", "%s", c->out_dir[0] ? c->out_dir : "(none)");
    if (R->have_cloze) table_row("cloze eval", "%d items every %lld steps", R->cloze.n, (long long)c->eval_every);
    double done = (double)R->tokens / c->total_tokens;
    if (c->max_steps == 0)
        table_row("progress", "step %lld; evaluation only (-steps 0)", (long long)R->step);
    else
        table_row("progress", "step %lld, %.1f%% of -tokens; ETA after a step", (long long)R->step,
                  100.0 * (done < 1 ? done : 1));
}

// ----------------------------------------------------------------------------------------
// evaluation and sampling: the parts that do not depend on the device

// validation samples: the first -val-samples of the stream, whole micro-batches on every DP rank
static int64_t run_val_samples(const Run* R, const DataSet* val) {
    const Config* c = &R->cfg;
    int64_t unit = (int64_t)c->mb * R->comm.DP;
    int64_t n = c->val_samples < val->nsamples ? c->val_samples : val->nsamples;
    n = (n / unit) * unit;
    return n == 0 ? unit : n;
}


// The next token from one position's logits. On the last stage row (Vp) holds this TP
// rank's real-vocabulary columns at their offset and zeros elsewhere; the TP ranks sum
// their rows, so every one sees the whole row and draws the same token. Every rank then
// receives it from the sampler.
static int run_sample_next(Run* R, float* row, int last_stage) {
    const Config* c = &R->cfg;
    int next = 0;
    if (last_stage) {
        tp_allreduce_sum(&R->comm, row, c->Vp);
        float mx = -INFINITY;
        int am = 0;
        for (int v = 0; v < c->V; v++)
            if (row[v] > mx) {
                mx = row[v];
                am = v;
            }
        if (c->sample_greedy) {
            next = am;
            goto done;
        } // the first maximum, as torch.argmax
        double sum = 0.0;
        for (int v = 0; v < c->V; v++) {
            row[v] = expf(row[v] - mx);
            sum += row[v];
        }
        double u = rng_uniform(&R->rng) * sum, cdf = 0.0;
        next = c->V - 1;
        for (int v = 0; v < c->V; v++) {
            cdf += row[v];
            if (u < cdf) {
                next = v;
                break;
            }
        }
    }
done:
    world_bcast(&R->comm, &next, sizeof(next), run_sampler_rank(R));
    return next;
}

// the token the text starts from
static int run_sample_start(const Run* R) {
    int eot = R->have_tok ? (int)R->tok.eot_token : 0;
    return eot < R->cfg.V ? eot : 0;
}

// Fills the start of a sample's tokens (T of them): the -prompt (-prompt-text) ids, or <|endoftext|>.
// Returns how many; generation continues at that position.
static int run_sample_prompt(const Run* R, int* tokens, int T) {
    for (int i = 0; i < T; i++) tokens[i] = run_sample_start(R);
    for (int i = 0; i < R->nprompt; i++) tokens[i] = R->prompt[i];
    return R->nprompt > 0 ? R->nprompt : 1;
}

static void run_sample_print(const Run* R, FILE* out, int token) {
    if (R->comm.rank != run_sampler_rank(R)) return;
    if (R->have_tok)
        tokenizer_print_token(out, &R->tok, (uint32_t)token);
    else
        fprintf(out, "%d ", token);
}

// after the last token: the sampler's RNG advanced on the last stage only, keep every
// rank's copy equal; end the line; log the sample (tokens[0..n0) the prompt, [n0..n) generated)
static void run_sample_end(Run* R, FILE* out, const int* tokens, int n0, int n) {
    world_bcast(&R->comm, &R->rng, sizeof(R->rng), run_sampler_rank(R));
    logger_sample(&R->log, R->step, tokens, n0, n, R->have_tok ? &R->tok : NULL); // every rank has the ids
    if (R->comm.rank == run_sampler_rank(R)) {
        fprintf(out, "\n");
        fflush(out);
    }
}

// ----------------------------------------------------------------------------------------
// the main loop

typedef struct {
    void* self;                                   // the trainer's context
    StepResult (*step)(void* self);               // one optimizer step (calls the run_step_* functions)
    double (*evaluate)(void* self, DataSet* val); // mean loss on a validation set (every rank takes part)
    void (*sample)(void* self, FILE* out);        // a text sample (every rank takes part)
    int (*save)(void* self);                      // a checkpoint: 0 ok, -1 failed (the previous one stays)
    int (*load)(void* self, const char* dir, int weights_only, char* err, size_t n); // any layout; 0 or -1 (err)
    void (*init)(void* self);                                                        // fresh weights from the seed
    double peak_tflops;        // device bf16 peak for MFU; <= 0: report GFLOP/s instead
    void (*abort)(void* self); // the watchdog ends a stuck job: abort device communicators (NULL: none)
    EvalHooks ev;              // forward of a token batch + a logits row (cloze eval, logits dump)
    // -ckpt-async 1 (ckpt_async.h): stage copies this rank's state into R->ck's staging buffer and
    // calls cka_start (0, or -1: the save cannot start); staged waits until that copy has landed
    // (NULL: stage copies synchronously)
    int (*stage)(void* self);
    void (*staged)(void* self);
} RunHooks;

// 1 when path (which must exist) is dir or lies below it, after resolving links and "..".
static int path_inside(const char* path, const char* dir) {
    char rp[PATH_MAX], rd[PATH_MAX];
    if (realpath(path, rp) == NULL || realpath(dir, rd) == NULL) return 0;
    size_t n = strlen(rd);
    return strncmp(rp, rd, n) == 0 && (rp[n] == '\0' || rp[n] == '/' || (n == 1 && rd[0] == '/'));
}

// -o: rank 0 takes the lock, clears partial saves and refuses a fresh run into a
// directory holding checkpoints unless -overwrite 1 (which deletes them, once every rank
// has claimed its log file). Every rank learns the outcome, so a refusal ends the job on
// all of them.
static void run_claim_outdir(Run* R) {
    const Config* c = &R->cfg;
    char err[1400] = "";
    int bad = 0;
    int overwrite = 0;
    if (R->comm.rank == 0 && c->out_dir[0] != '\0') {
        R->lock_fd = outdir_lock(c->out_dir, &R->lock_dir_fd, err, sizeof(err));
        if (R->lock_fd < 0)
            bad = 1;
        else {
            outdir_clean_partial(c->out_dir);
            int n = ckpt_list_complete(c->out_dir, NULL, 0);
            if (!c->resume && n > 0) {
                if (!c->overwrite) {
                    snprintf(err, sizeof(err),
                             "-o %s holds %d checkpoint(s) of an earlier run: add -resume to continue it, "
                             "-overwrite 1 to start over (deletes them), or choose another -o",
                             c->out_dir, n);
                    bad = 1;
                } else if (c->init_from[0] != '\0' && path_inside(c->init_from, c->out_dir)) {
                    snprintf(err, sizeof(err),
                             "-init-from %s lies in -o %s, whose checkpoints -overwrite 1 would delete "
                             "first: copy it out of %s, or choose another -o",
                             c->init_from, c->out_dir, c->out_dir);
                    bad = 1;
                } else {
                    overwrite = 1;
                }
            }
        }
    }
    if (world_sum(&R->comm, bad) > 0) {
        if (R->comm.rank == 0) {
            fprintf(stderr, "error: %s\n", err);
            fflush(stderr);
        }
        exit(1);
    }
    run_claim_files(R); // before -overwrite deletes anything
    if (R->comm.rank == 0 && c->out_dir[0] != '\0' && runrecord_write(c->out_dir, c, &R->comm, err, sizeof(err)) != 0)
        die("%s", err); // -o DIR -resume needs it
    if (overwrite) {
        int removed = outdir_remove_checkpoints(c->out_dir);
        printf("-overwrite 1: removed %d checkpoint(s) of the earlier run in %s\n", removed, c->out_dir);
    }
}

static void run_event(Run* R, const char* fmt, ...) {
    size_t k = strlen(R->events);
    va_list ap;
    va_start(ap, fmt);
    if (k < sizeof(R->events)) vsnprintf(R->events + k, sizeof(R->events) - k, fmt, ap);
    va_end(ap);
}

// The weights came from a checkpoint (-resume, -init-from): how they were initialised is its
// -scaled-init, which later checkpoints and the run record keep; a value given now (it only acts
// on fresh weights) is noted and replaced, never recorded as the weights' origin.
static void run_keep_init(Run* R, const CkptHeader* h, const char* how) {
    Config* c = &R->cfg;
    int was = (int)h->h[CK_SCALED_INIT];
    if (was == c->scaled_init) return;
    if (R->comm.rank == 0)
        printf(
            "%s: -scaled-init %d acts on fresh weights only; these were initialised with -scaled-init %d, which the "
            "run keeps\n",
            how, c->scaled_init, was);
    c->scaled_init = was;
    int n = 0;
    char** rec = NULL;
    char v[8];
    snprintf(v, sizeof(v), "%d", was);
    char* fix[3] = {(char*)"train_gpt", (char*)"-scaled-init", v};
    PlanRequest scratch; // the planner flags' spans
    plan_request_init(&scratch);
    char* merged = (char*)malloc_check(sizeof(c->argv_record));
    if (runrecord_tokens(c->argv_record, &n, &rec) == 0 &&
        runrecord_merge(merged, sizeof(c->argv_record), n, rec, 3, fix, plan_config_flag, &scratch) == 0)
        memcpy(c->argv_record, merged, sizeof(c->argv_record));
    if (rec != NULL) runrecord_free_argv(n, rec);
    free(merged);
    char err[1400];
    if (R->comm.rank == 0 && c->out_dir[0] != '\0' && runrecord_write(c->out_dir, c, &R->comm, err, sizeof(err)) != 0)
        die("%s", err);
}

// After a resume: the data order must be the checkpoint's (seed, shuffle, shards) unless
// -allow-data-change 1; recipe values may change and are logged as changes.
static void run_check_identity(Run* R, const char* dir) {
    const Config* c = &R->cfg;
    char path[1100], err[1400];
    CkptHeader h;
    ckpt_rank_path(path, sizeof(path), dir, 0);
    if (ckpt_read_header(path, &h, err, sizeof(err)) != 0) die("%s", err);
    char what[600] = "";
    size_t k = 0;
    if ((uint64_t)h.h[CK_SEED] != c->seed)
        k += snprintf(what + k, sizeof(what) - k, " -seed %llu -> %llu", (unsigned long long)h.h[CK_SEED],
                      (unsigned long long)c->seed);
    if (h.h[CK_SHUFFLE] != c->shuffle)
        k += snprintf(what + k, sizeof(what) - k, " -shuffle %lld -> %d", (long long)h.h[CK_SHUFFLE], c->shuffle);
    if ((uint64_t)h.h[CK_DATA_HASH] != R->data_hash && k < sizeof(what))
        k += snprintf(what + k, sizeof(what) - k, " the training shards (-i: names, sizes or contents differ)");
    if (k > 0) {
        if (!c->allow_data_change)
            die("-resume would change the run's data order:%s; resume with the original values, or pass "
                "-allow-data-change 1 to accept the change",
                what);
        if (R->comm.rank == 0) printf("warning: -allow-data-change 1: the data order changes on resume:%s\n", what);
        run_event(R, "{\"type\":\"event\",\"event\":\"data_change\",\"step\":%lld,\"what\":\"%s\"}\n",
                  (long long)R->step, what + 1);
    }
    run_keep_init(R, &h, "-resume");
    struct {
        const char* name;
        int f;
        double now;
    } rv[] = {
#define RUN_RECIPE_ROW(name, slot, value) {name, slot, value},
        CKPT_RECIPE(RUN_RECIPE_ROW, c)
#undef RUN_RECIPE_ROW
    };
    for (size_t i = 0; i < sizeof(rv) / sizeof(rv[0]); i++) {
        double was = ckpt_get_f64(&h, rv[i].f);
        if (was == rv[i].now) continue;
        if (R->comm.rank == 0)
            printf("resume: %s changed from %g to %g at step %lld\n", rv[i].name, was, rv[i].now, (long long)R->step);
        run_event(R,
                  "{\"type\":\"event\",\"event\":\"change\",\"step\":%lld,\"what\":\"%s\",\"old\":%.9g,\"new\":%.9g}\n",
                  (long long)R->step, rv[i].name, was, rv[i].now);
    }
}

// -resume: the newest complete checkpoint that loads on every rank. One that does not
// (corrupt, stale files, another model) is skipped with the reason; every rank takes the
// same decision (an all-reduce of the failures per candidate).
static void run_resume(Run* R, const RunHooks* hk) {
    const Config* c = &R->cfg;
    if (c->out_dir[0] == '\0') die("-resume needs -o DIR (where the checkpoints are)");
    int n = ckpt_list_complete(c->out_dir, NULL, 0);
    if (n == 0) die("-resume: no complete checkpoint in %s", c->out_dir);
    int64_t* steps = (int64_t*)malloc_check(sizeof(int64_t) * n);
    n = ckpt_list_complete(c->out_dir, steps, n);
    char dir[1100], err[1400], first_err[1400] = "", skipped[4096] = "";
    int chosen = -1, first_failed = 0;
    for (int i = 0; i < n && chosen < 0; i++) {
        ckpt_dir_name(dir, sizeof(dir), c->out_dir, steps[i]);
        int rc = hk->load(hk->self, dir, 0, err, sizeof(err));
        int fails = (int)world_sum(&R->comm, rc != 0 ? 1.0 : 0.0);
        if (fails == 0) {
            chosen = i;
            break;
        }
        if (i == 0) {
            first_failed = rc != 0;
            snprintf(first_err, sizeof(first_err), "%s", rc != 0 ? err : "it does not load on another rank");
        }
        // the reasons are printed once a fallback loads (all failing: one error line below)
        size_t k = strlen(skipped);
        if (rc != 0)
            snprintf(skipped + k, sizeof(skipped) - k, "warning: rank %d: -resume skips %s: %s\n", R->comm.rank, dir,
                     err);
        else if (R->comm.rank == 0)
            snprintf(skipped + k, sizeof(skipped) - k,
                     "warning: -resume skips %s: it does not load on %d other rank(s)\n", dir, fails);
        run_event(R, "{\"type\":\"event\",\"event\":\"skip_checkpoint\",\"checkpoint\":\"ckpt_%08lld\"}\n",
                  (long long)steps[i]);
    }
    free(steps);
    if (chosen < 0) {
        if (first_failed || (R->comm.rank == 0 && first_err[0])) {
            if (n == 1) die("-resume: %s", first_err);
            die("-resume: none of the %d complete checkpoints in %s loads; the newest: %s", n, c->out_dir, first_err);
        }
        exit(1);
    }
    if (skipped[0]) {
        fputs(skipped, stderr);
        fflush(stderr);
    }
    run_check_identity(R, dir);
    R->resumed_step = R->step;
    if (R->comm.rank == 0)
        printf("resumed from %s at step %lld (%lld tokens)%s\n", dir, (long long)R->step, (long long)R->tokens,
               chosen > 0 ? " (newer checkpoints skipped, see above)" : "");
    run_event(R,
              "{\"type\":\"event\",\"event\":\"resume\",\"step\":%lld,\"tokens\":%lld,\"checkpoint\":\"ckpt_%08lld\","
              "\"skipped\":%d}\n",
              (long long)R->step, (long long)R->tokens, (long long)R->step, chosen);
}

// -resume: the data ranges the run passes over. The checkpoint's (those already reached) stand; a
// -skip-data range (given or recorded) before its position must be one of them; the ones at or
// after it are added, and so are the ranges an -on-spike rewind passed over after it (the run
// record's "rewound": the rewind went back to an older checkpoint, which cannot hold them).
static void run_resume_skips(Run* R, int given, const int64_t* at, const int64_t* n) {
    const Config* c = &R->cfg;
    int k = R->nskip;
    int64_t all_at[CKPT_MAX_SKIPS], all_n[CKPT_MAX_SKIPS];
    memcpy(all_at, R->skip_at, sizeof(all_at));
    memcpy(all_n, R->skip_n, sizeof(all_n));
    int full = 0;
    for (int i = 0; i < given; i++) {
        if (at[i] >= R->samples) {
            full |= ckpt_skips_add(&k, all_at, all_n, at[i], n[i], 0) != 0;
            continue;
        }
        int found = 0;
        for (int j = 0; j < R->nskip; j++) found |= R->skip_at[j] == at[i] && R->skip_n[j] >= n[i];
        if (!found)
            die("-skip-data range %lld:%lld lies before the checkpoint's position (run sample %lld) but the checkpoint "
                "did not pass over it: resume without it, or start over",
                (long long)at[i], (long long)n[i], (long long)R->samples);
    }
    int64_t rat[CKPT_MAX_SKIPS], rn[CKPT_MAX_SKIPS];
    char e[CFG_ERR_LEN];
    int nr = config_skip_ranges(c->rewound, rat, rn, e); // read strictly with the record: >= 0
    for (int i = 0; i < nr; i++)
        if (rat[i] >= R->samples) full |= ckpt_skips_add(&k, all_at, all_n, rat[i], rn[i], 0) != 0;
    if (full)
        die("-resume: more than %d skipped data ranges (the checkpoint's, -skip-data's and the rewinds'): resume with "
            "fewer -skip-data ranges",
            CKPT_MAX_SKIPS);
    if (k > R->nskip && R->comm.rank == 0)
        printf("resume: %d data range(s) ahead of the checkpoint will be passed over (-skip-data, rewinds)\n",
               k - R->nskip);
    run_set_skips(R, k, all_at, all_n);
}

// The starting weights: the newest loadable checkpoint under -o (-resume), a checkpoint's
// weights (-init-from), or fresh from the seed; then the log (cut back to the checkpoint
// and appended to when resuming).
static void run_load_weights(Run* R, const RunHooks* h) {
    const Config* c = &R->cfg;
    char err[1400];
    double t0 = wall_ms();
    R->data_hash = blend_identity(R->tspec);
    run_claim_outdir(R);
    if (c->resume) {
        if (R->comm.rank == 0) {
            printf("loading the newest checkpoint in %s (resharding to this layout) ...\n", c->out_dir);
            fflush(stdout);
        }
        run_resume(R, h);
        if (R->comm.rank == 0) {
            printf("loaded in %.1f s\n", (wall_ms() - t0) / 1e3);
            fflush(stdout);
        }
    } else if (c->init_from[0] != '\0') {
        if (R->comm.rank == 0) {
            printf("loading weights from %s (resharding to this layout) ...\n", c->init_from);
            fflush(stdout);
        }
        if (h->load(h->self, c->init_from, 1, err, sizeof(err)) != 0) die("%s", err);
        char path[1100];
        CkptHeader hd;
        ckpt_rank_path(path, sizeof(path), c->init_from, 0);
        if (ckpt_read_header(path, &hd, err, sizeof(err)) != 0) die("%s", err);
        run_keep_init(R, &hd, "-init-from");
        if (R->comm.rank == 0) {
            printf("loaded in %.1f s\n", (wall_ms() - t0) / 1e3);
            fflush(stdout);
        }
    } else {
        h->init(h->self);
    }
    int64_t at[CKPT_MAX_SKIPS], n[CKPT_MAX_SKIPS];
    char e[CFG_ERR_LEN];
    int given = config_skip_ranges(c->skip_data, at, n, e); // validated at start-up: >= 0
    if (!c->resume) {
        run_set_skips(R, given, at, n);
    } else {
        run_resume_skips(R, given, at, n);
    }
    run_open_log(R, c->resume);
    if (R->log.f && R->events[0]) {
        fputs(R->events, R->log.f);
        fflush(R->log.f);
    }
    R->events[0] = '\0';
}

// The watchdog of this rank; the heartbeat file is shared by every rank (see watchdog.h).
static void run_start_watchdog(Run* R, const RunHooks* h) {
    const Config* c = &R->cfg;
    Watchdog* w = &R->wd;
    w->on = c->timeout != 0;
    w->fixed_s = c->timeout > 0 ? c->timeout : 0;
    w->rank = R->comm.rank;
    w->world = R->comm.world;
    w->mpi = R->comm.mpi;
    w->TP = R->comm.TP;
    w->DP = R->comm.DPC;
    w->PP = R->comm.PP;
    w->CP = R->comm.CP;
    w->abort_fn = h->abort;
    w->abort_self = h->self;
    if (!w->on) return;
    char path[1100];
    if (c->out_dir[0])
        snprintf(path, sizeof(path), "%s/heartbeat", c->out_dir);
    else {
        int pid = (int)getpid();
        world_bcast(&R->comm, &pid, sizeof(pid), 0);
        snprintf(path, sizeof(path), "/tmp/train_gpt_heartbeat_%d", pid);
    }
    watchdog_open_file(w, path, 0);
    world_sum(&R->comm, 0.0); // the file exists before the others open it
    watchdog_open_file(w, path, 1);
    if (!c->out_dir[0]) { // once every rank has it mapped, the /tmp file goes: no abort or kill leaves it behind
        world_sum(&R->comm, 0.0);
        if (R->comm.rank == 0) unlink(w->path);
    }
    ctrace_publish(&R->comm.trace, watchdog_trace_slot(w));
    watchdog_start(w);
}

// Progress after a step: percent of the run done (of -tokens: a -steps stop ends one start, not the
// run) and the ETA to -tokens, at the speed of the last up to 16 steps.
static void run_progress_mark(Run* R, double now_ms) {
    int k = R->win_n % 16;
    R->win_ms[k] = now_ms;
    R->win_tok[k] = R->tokens;
    R->win_n++;
}

static void run_progress_est(Run* R, double now_ms, double* pct, double* eta_s) {
    const Config* c = &R->cfg;
    run_progress_mark(R, now_ms); // the window: the run's start, then the last 16 steps
    int o = R->win_n > 16 ? R->win_n % 16 : 0;
    double f = (double)R->tokens / c->total_tokens; // the run's progress: -tokens, not this start's -steps
    *pct = 100.0 * (f < 1.0 ? f : 1.0);
    double dt = (now_ms - R->win_ms[o]) / 1e3, eta = -1.0;
    int64_t dtok = R->tokens - R->win_tok[o];
    if (dt > 0 && dtok > 0) eta = (double)(c->total_tokens - R->tokens) * dt / (double)dtok;
    if (R->tokens >= c->total_tokens) eta = 0.0;
    *eta_s = eta;
}

// Validation: each dataset of the validation blend alone (its first -val-samples), the loss
// their blend-weighted mean, logged with the per-dataset losses and, for a training blend,
// what each dataset has given so far (samples, share, epochs). Every rank takes part.
static void run_validate(Run* R, const RunHooks* h) {
    double loss[BLEND_MAX];
    double mean = 0;
    for (int d = 0; d < R->nval; d++) {
        loss[d] = h->evaluate(h->self, &R->val[d]);
        mean += R->vspec->weight[d] * loss[d];
    }
    char extra[BLEND_MAX * 3 * (BLEND_NAME + 64) + 64];
    size_t k = 0;
    extra[0] = '\0';
    if (R->nval > 1) {
        k += snprintf(extra + k, sizeof(extra) - k, "\"val_loss_by\":{");
        for (int d = 0; d < R->nval; d++)
            if (isfinite(loss[d]))
                k += snprintf(extra + k, sizeof(extra) - k, "%s\"%s\":%.9g", d ? "," : "", R->vspec->name[d], loss[d]);
            else // JSON has no NaN
                k += snprintf(extra + k, sizeof(extra) - k, "%s\"%s\":null", d ? "," : "", R->vspec->name[d]);
        k += snprintf(extra + k, sizeof(extra) - k, "},");
    }
    if (R->tspec->n > 1 && R->train.paths) { // rank 0 reads tokens: it has the training blend
        int64_t n[BLEND_MAX];
        blend_counts(&R->train.order, R->samples, n);
        k += snprintf(extra + k, sizeof(extra) - k, "\"data\":{");
        for (int d = 0; d < R->tspec->n; d++)
            k += snprintf(extra + k, sizeof(extra) - k, "%s\"%s\":{\"samples\":%lld,\"share\":%.6f,\"epochs\":%.6f}",
                          d ? "," : "", R->tspec->name[d], (long long)n[d],
                          R->samples > 0 ? (double)n[d] / (double)R->samples : 0.0,
                          (double)n[d] / (double)R->train.parts[d].nsamples);
        k += snprintf(extra + k, sizeof(extra) - k, "},");
    }
    logger_val(&R->log, R->step, R->tokens, mean, extra);
    if (R->log.print && R->nval > 1) {
        printf("val  %6lld |", (long long)R->step);
        for (int d = 0; d < R->nval; d++)
            printf(" %s %.6f%s", R->vspec->name[d], loss[d], d + 1 < R->nval ? " |" : "\n");
        fflush(stdout);
    }
}

// -eval-file: the cloze evaluation, logged
static void run_cloze(Run* R, const RunHooks* h) {
    if (h->ev.forward == NULL) die("this trainer has no cloze evaluation hooks");
    if (R->comm.rank == 0) {
        printf("evaluating cloze %s (%d items) ...\n", R->cfg.eval_file, R->cloze.n);
        fflush(stdout);
    }
    int last = R->comm.pp == R->comm.PP - 1;
    ClozeResult r = cloze_evaluate(&R->cloze, &h->ev, &R->comm, R->cfg.mb, R->cfg.seq, R->cfg.V, R->cfg.Vp, last,
                                   run_sample_start(R));
    eval_log(&R->log, R->step, R->tokens, &r);
}

// -steps 0: evaluate the loaded weights once: validation (any -j data), cloze (-eval-file), the
// logits dump, and a sample when there is text to show (-tokenizer, a prompt, or -sample-every)
static int run_eval_only(Run* R, const RunHooks* h) {
    const Config* c = &R->cfg;
    if (R->have_val) run_validate(R, h);
    if (R->have_cloze) run_cloze(R, h);
    if (c->dump_logits[0] != '\0') {
        if (!R->have_val) die("-dump-logits needs validation data (-j GLOB)");
        int B = c->mb, T = c->seq;
        int* in = (int*)calloc_check((size_t)B * T, sizeof(int));
        int* tg = (int*)calloc_check((size_t)B * T, sizeof(int));
        if (R->val[0].paths) dataset_load_microbatch(&R->val[0], 0, B, in, tg);
        int last = R->comm.pp == R->comm.PP - 1;
        if (eval_dump_logits(&h->ev, &R->comm, in, B, T, c->V, c->Vp, last, run_sampler_rank(R), c->dump_logits) != 0)
            die("cannot write -dump-logits %s", c->dump_logits);
        free(in);
        free(tg);
    }
    if (c->sample_len > 0 && (c->sample_every > 0 || R->nprompt > 0 || R->have_tok)) h->sample(h->self, stdout);
    return 0;
}

// A save is complete (committed on every rank): it is known to load, -keep prunes around it
// (ckpt_prune, rank 0), and the log gets its checkpoint event (each rank its own file's figures).
static void run_ckpt_complete(Run* R, int64_t step, double stall_ms, double wait_ms, int async) {
    const CkptAsync* a = &R->ck;
    if (R->nsaved == R->saved_cap) {
        R->saved_cap = R->saved_cap ? 2 * R->saved_cap : 16;
        R->saved = (int64_t*)realloc(R->saved, sizeof(int64_t) * R->saved_cap);
        if (R->saved == NULL) die("out of host memory for the list of saved checkpoints");
    }
    R->saved[R->nsaved++] = step;
    if (R->comm.rank == 0) ckpt_prune(R->cfg.out_dir, R->cfg.keep, R->saved, R->nsaved, R->resumed_step);
    if (R->log.f) {
        double mbs = a->write_ms > 0 ? (double)a->bytes / 1e6 / (a->write_ms / 1e3) : 0.0;
        fprintf(R->log.f,
                "{\"type\":\"event\",\"event\":\"checkpoint\",\"step\":%lld,\"bytes\":%lld,\"stall_ms\":%.3f,"
                "\"write_ms\":%.3f,\"MB_s\":%.3f,\"wait_ms\":%.3f,\"async\":%d}\n",
                (long long)step, (long long)a->bytes, stall_ms, a->write_ms, mbs, wait_ms, async);
        logger_check(&R->log);
    }
}

// The background save at a step boundary (every rank, at every boundary while one is in flight:
// the collectives of cka_agree never depend on this rank's writer). A staged copy goes to the
// writer; with wait, this rank's writer is waited for first, so the save ends here. When every
// rank's file is written rank 0 commits it (DONE, rename) and it is complete; when a rank's
// write failed, every rank waits for its writer, rank 0 removes the partial directory, the
// failed rank says why, and every rank exits 1 (as a failed synchronous save).
static void run_ckpt_tick(Run* R, const RunHooks* h, int wait) {
    CkptAsync* a = &R->ck;
    if (!a->inflight) return;
    double t0 = wall_ms();
    if (cka_state(a) == CKA_STAGED) {
        if (h->staged) h->staged(h->self);
        cka_hand(a);
    }
    if (wait) cka_wait_local(a);
    int all = cka_agree(a, &R->comm);
    if (all == CKA_SOME_FAILED) {
        cka_wait_local(a);
        world_sum(&R->comm, 0.0); // every writer has stopped before the directory goes
        if (R->comm.rank == 0) ckpt_remove_dir(a->tmp);
        if (cka_state(a) == CKA_FAILED)
            fprintf(stderr,
                    "error: checkpoint at step %lld failed (written in the background, found at step %lld): %s: free "
                    "disk space or fix -o, then -resume\n",
                    (long long)a->step, (long long)R->step, a->err);
        fflush(stderr);
        exit(1);
    }
    if (all == CKA_ALL_WRITTEN) {
        if (ckpt_commit(&R->comm, 1, a->tmp, a->dir) != 0)
            die("checkpoint at step %lld failed: free disk space or fix -o", (long long)a->step);
        a->stall_ms += wall_ms() - t0;
        run_ckpt_complete(R, a->step, a->stall_ms, a->wait_ms, 1);
        cka_done(a);
        return;
    }
    a->stall_ms += wall_ms() - t0;
}

// Waits for the save in flight, if any, until it is complete (every rank at the same point).
// Returns the milliseconds waited.
static double run_ckpt_drain(Run* R, const RunHooks* h) {
    if (!R->ck.inflight) return 0.0;
    double t0 = wall_ms();
    watchdog_beat(&R->wd, R->step);
    run_ckpt_tick(R, h, 1);
    watchdog_beat(&R->wd, R->step);
    return wall_ms() - t0;
}

// One checkpoint of the current step through the trainer's hooks. Synchronous: the save, then
// complete. -ckpt-async 1: a save still in flight is waited for (logged), then this one is
// staged and handed to the writer; it completes at a later step boundary (run_ckpt_tick).
// Returns 0, or -1 when the save failed (the previous checkpoint stays).
static int run_save(Run* R, const RunHooks* h) {
    if (!R->cfg.ckpt_async) {
        double t0 = wall_ms();
        if (h->save(h->self) != 0) return -1;
        run_ckpt_complete(R, R->step, wall_ms() - t0, 0.0, 0);
        return 0;
    }
    int64_t prev = R->ck.inflight ? R->ck.step : -1;
    double waited = run_ckpt_drain(R, h);
    if (prev >= 0 && R->comm.rank == 0) {
        printf("checkpoint at step %lld waited %.0f ms for the save of step %lld to finish writing\n",
               (long long)R->step, waited, (long long)prev);
        fflush(stdout);
    }
    double t1 = wall_ms();
    if (h->stage(h->self) != 0) return -1;
    R->ck.wait_ms = waited;
    R->ck.stall_ms = waited + (wall_ms() - t1);
    return 0;
}

// Trains to -tokens / -steps. Returns the exit status (stop.h): 0; 3 after -spike-stop
// skips in a row (a checkpoint of the weights from before the trouble is saved first);
// 4 after SIGTERM/SIGINT/SIGUSR1 (the step finishes, a checkpoint is saved with -o).
// -on-spike rewind N, after a step the guard skipped: back to the newest complete checkpoint,
// and the next N batches after it passed over (recorded as a skipped range, saved in every later
// checkpoint and logged, so the run can be reproduced with -skip-data). 1 rewound, 0 no
// checkpoint yet (the step stays skipped). Every rank takes part.
static int run_rewind(Run* R, const RunHooks* h, int64_t bad_step) {
    const Config* c = &R->cfg;
    char dir[1100], err[1400];
    run_ckpt_drain(R, h); // the newest complete checkpoint is the same on every rank, and it loads
    int64_t newest = ckpt_find_latest(c->out_dir, dir, sizeof(dir));
    if (world_sum(&R->comm, newest < 0 ? 1.0 : 0.0) > 0) return 0; // every rank sees the same directory
    int64_t at[CKPT_MAX_SKIPS], n[CKPT_MAX_SKIPS];
    memcpy(at, R->skip_at, sizeof(at)); // the ranges so far, not the checkpoint's: an earlier rewind
    memcpy(n, R->skip_n, sizeof(n));    // to this checkpoint passed over some already
    int k = R->nskip;
    int rc = h->load(h->self, dir, 0, err, sizeof(err));
    if (world_sum(&R->comm, rc != 0 ? 1.0 : 0.0) > 0) die("-on-spike rewind: %s", rc ? err : "a rank failed to load");
    int64_t gb = c->ramp_auto ? R->auto_gb
                              : schedule_batch(c->gb, c->ramp_start, c->ramp_inc, c->ramp_tokens, c->seq, R->samples);
    // a second rewind to the same checkpoint passes over more from the same run sample; every rank
    // has the same ranges, so every rank stops alike
    if (ckpt_skips_add(&k, at, n, R->samples, c->rewind_batches * gb, 1) != 0)
        die("-on-spike rewind: %d skipped data ranges already, the most a checkpoint holds; resume with a lower -lr "
            "or -beta2",
            CKPT_MAX_SKIPS);
    int r = 0;
    while (at[r] != R->samples) r++;
    if (n[r] > CKPT_MAX_SKIP_SAMPLES)
        die("-on-spike rewind: the data passed over at run sample %lld would exceed 2^40 samples; resume with a lower "
            "-lr or -beta2",
            (long long)R->samples);
    run_set_skips(R, k, at, n);
    R->rewinds++;
    // the log goes back to the checkpoint too: the abandoned steps' records go (as on -resume)
    logger_close(&R->log);
    run_open_log(R, 1);
    if (R->comm.rank == 0) {
        printf(
            "rewind %d of %d: step %lld was skipped; back to %s, passing over %lld more batches (%lld samples from run "
            "sample %lld, %lld in all)\n",
            R->rewinds, c->max_rewinds, (long long)bad_step, dir, (long long)c->rewind_batches,
            (long long)(c->rewind_batches * gb), (long long)R->samples, (long long)n[r]);
        fflush(stdout);
    }
    // the run record keeps the range, so a -resume that goes back to this (older) checkpoint passes over it too
    int64_t rat[CKPT_MAX_SKIPS], rn[CKPT_MAX_SKIPS];
    int nr = config_skip_ranges(c->rewound, rat, rn, err);
    if (nr < 0 || ckpt_skips_add(&nr, rat, rn, at[r], n[r], 0) != 0) nr = -1;
    size_t w = 0;
    for (int i = 0; i < nr; i++)
        w += snprintf(R->cfg.rewound + w, sizeof(R->cfg.rewound) - w, "%s%lld:%lld", i ? "," : "", (long long)rat[i],
                      (long long)rn[i]);
    if (nr < 0 || w >= sizeof(R->cfg.rewound)) die("-on-spike rewind: cannot record the range passed over");
    if (R->comm.rank == 0 && runrecord_write(c->out_dir, c, &R->comm, err, sizeof(err)) != 0) die("%s", err);
    if (R->log.f) {
        fprintf(R->log.f,
                "{\"type\":\"event\",\"event\":\"rewind\",\"step\":%lld,\"bad_step\":%lld,\"checkpoint\":"
                "\"ckpt_%08lld\",\"skip_at\":%lld,\"skip_samples\":%lld,\"rewinds\":%d}\n",
                (long long)R->step, (long long)bad_step, (long long)newest, (long long)at[r], (long long)n[r],
                R->rewinds);
        logger_check(&R->log);
    }
    return 1;
}

// A start ended by -steps before -tokens: the run is not complete; say how far it is and how to go on
static void run_steps_stop_note(const Run* R) {
    const Config* c = &R->cfg;
    if (R->comm.rank != 0 || c->max_steps <= 0 || R->step < c->max_steps || R->tokens >= c->total_tokens) return;
    if (c->out_dir[0] != '\0')
        printf(
            "stopped by -steps %lld at step %lld: %lld of -tokens %lld (%.1f%%), checkpoint in %s; continue with "
            "-o %s -resume\n",
            (long long)c->max_steps, (long long)R->step, (long long)R->tokens, (long long)c->total_tokens,
            100.0 * (double)R->tokens / (double)c->total_tokens, c->out_dir, c->out_dir);
    else
        printf(
            "stopped by -steps %lld at step %lld: %lld of -tokens %lld (%.1f%%); no -o, nothing saved to continue "
            "from\n",
            (long long)c->max_steps, (long long)R->step, (long long)R->tokens, (long long)c->total_tokens,
            100.0 * (double)R->tokens / (double)c->total_tokens);
    fflush(stdout);
}

static int run_loop(Run* R, const RunHooks* h) {
    const Config* c = &R->cfg;
    int f = c->recompute == RECOMPUTE_FULL ? 4 : 3; // selective's attention rebuild is not in the paper's formula
    stop_install();
    run_start_watchdog(R, h);
    R->t_start = wall_ms();
    run_progress_mark(R, R->t_start);
    if (c->max_steps == 0) return run_eval_only(R, h);
    int64_t step0 = R->step;
    if (run_finished(R) && R->comm.rank == 0) { // a resumed run that had already finished, or -steps already reached
        if (R->tokens >= c->total_tokens)
            printf("the run is complete: step %lld, %lld of -tokens %lld; nothing to train (raise -tokens to go on)\n",
                   (long long)R->step, (long long)R->tokens, (long long)c->total_tokens);
        else
            printf(
                "-steps %lld: step %lld is done already (%lld of -tokens %lld); nothing to train: give a larger "
                "-steps, or none to train to -tokens\n",
                (long long)c->max_steps, (long long)R->step, (long long)R->tokens, (long long)c->total_tokens);
    }
    while (!run_finished(R)) {
        watchdog_beat(&R->wd, R->step);
        R->comm.trace.step = R->step + 1;
        double t0 = wall_ms();
        R->comm.comm_ms = R->comm.idle_ms = R->comm.overlap_ms = 0;
        StepResult r = h->step(h->self);
        double ms = wall_ms() - t0;
        watchdog_step_ms(&R->wd, ms);
        watchdog_beat(&R->wd, R->step);
        StepLog s;
        memset(&s, 0, sizeof(s));
        s.step = R->step;
        s.loss = r.loss;
        s.lr = r.lr;
        s.gnorm = r.gnorm;
        s.gb = r.gb;
        s.tokens = R->tokens;
        s.ms = ms;
        s.tok_s = r.gb * c->seq / (ms / 1e3);
        s.micro = r.micro;
        s.tflops = model_flops(f, (double)r.gb, c->seq, c->L, c->H, c->Vp) / (ms / 1e3) / R->comm.world / 1e12;
        // MFU: model FLOPs (f = 3, recomputation not counted) over the device peak
        s.mfu = h->peak_tflops > 0 ? model_flops(3, (double)r.gb, c->seq, c->L, c->H, c->Vp) / (ms / 1e3) /
                                         R->comm.world / 1e12 / h->peak_tflops
                                   : -1;
        s.t_comm_ms = R->comm.comm_ms;
        s.t_idle_ms = R->comm.idle_ms;
        s.t_compute_ms = ms - s.t_comm_ms - s.t_idle_ms;
        s.t_overlap_ms = R->comm.overlap_ms;
        s.has_noise = r.has_noise;
        s.g2 = r.g2;
        s.trsigma = r.trsigma;
        s.host_syncs = r.host_syncs;
        s.b_simple = R->comm.DP > 1 ? noise_bsimple(&R->noise) : -1.0;
        s.skip = r.skip != SKIP_NONE ? spike_kind_name(r.skip) : NULL;
        s.elapsed_s = (wall_ms() - R->t_start) / 1e3;
        s.saving = R->ck.inflight ? R->ck.step : -1; // a background save was being written during this step
        run_progress_est(R, wall_ms(), &s.pct, &s.eta_s);
        logger_step(&R->log, &s);
        run_ckpt_tick(R, h, 0);
        if (r.skip != SKIP_NONE && c->rewind_batches > 0) {
            if (R->rewinds >= c->max_rewinds) {
                if (R->comm.rank == 0)
                    fprintf(stderr,
                            "error: step %lld was skipped (%s) after %d rewinds (-max-rewinds): lower -lr or -beta2, "
                            "then -resume from the checkpoints in %s\n",
                            (long long)R->step, spike_kind_name(r.skip), R->rewinds, c->out_dir);
                fflush(stderr);
                return RUN_EXIT_SPIKE;
            }
            if (run_rewind(R, h, R->step)) continue;
        }
        if (spike_should_stop(&R->spike, c->spike_stop)) {
            // skipped steps leave the weights alone: this checkpoint holds the weights from before the trouble
            if (c->out_dir[0] && run_save(R, h) != 0) die("checkpoint after %d skipped steps failed", c->spike_stop);
            run_ckpt_drain(R, h);
            if (R->comm.rank == 0)
                fprintf(stderr,
                        "error: %d consecutive steps skipped (last: %s, loss %g, gnorm %g) at step %lld: "
                        "lower -lr or -beta2, then -resume from the checkpoint in %s\n",
                        c->spike_stop, spike_kind_name(r.skip), r.loss, r.gnorm, (long long)R->step,
                        c->out_dir[0] ? c->out_dir : "(no -o)");
            fflush(stderr);
            return RUN_EXIT_SPIKE;
        }
        int last = run_finished(R);
        if (R->have_val && (R->step % c->val_every == 0 || last)) run_validate(R, h);
        if (R->have_cloze && c->eval_every > 0 && (R->step % c->eval_every == 0 || last)) run_cloze(R, h);
        if (c->sample_every > 0 && c->sample_len > 0 && (R->step % c->sample_every == 0 || last))
            h->sample(h->self, stdout);
        watchdog_beat(&R->wd, R->step);
        int saved = 0;
        // with -o the last step is always saved, as Megatron's --save does: a finished run keeps its weights
        if (c->out_dir[0] && ((c->ckpt_every > 0 && R->step % c->ckpt_every == 0) || last)) {
            if (run_save(R, h) != 0)
                die("checkpoint at step %lld failed: free disk space or fix -o", (long long)R->step);
            saved = 1;
        }
        watchdog_beat(&R->wd, R->step);
        // a signal on any rank stops every rank after this same step
        int sig = stop_requested();
        if (world_sum(&R->comm, sig ? 1.0 : 0.0) > 0 && !last) {
            if (c->out_dir[0] && !saved && run_save(R, h) != 0)
                die("checkpoint on stop at step %lld failed: free disk space or fix -o", (long long)R->step);
            run_ckpt_drain(R, h); // the stop waits for the write in flight
            if (R->log.f) {
                fprintf(R->log.f, "{\"type\":\"event\",\"event\":\"stop\",\"step\":%lld,\"signal\":%d}\n",
                        (long long)R->step, sig);
                fflush(R->log.f);
            }
            if (R->comm.rank == 0) {
                if (c->out_dir[0])
                    fprintf(stderr,
                            "stopped by a signal after step %lld: checkpoint saved in %s; continue with -resume (exit "
                            "%d)\n",
                            (long long)R->step, c->out_dir, RUN_EXIT_STOPPED);
                else
                    fprintf(stderr, "stopped by a signal after step %lld: no -o, nothing saved (exit %d)\n",
                            (long long)R->step, RUN_EXIT_STOPPED);
                fflush(stderr);
            }
            return RUN_EXIT_STOPPED;
        }
    }
    run_ckpt_drain(R, h); // the end waits for the last save's write
    if (R->step > step0) run_steps_stop_note(R);
    return 0;
}

#endif // LLMC_RUN_H
