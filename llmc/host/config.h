/*
 * config.h: the run configuration shared by both trainers and the tests: model presets,
 * the recipe (defaults = the Megatron-Turing NLG 530B values), the 3D layout, I/O
 * flags; the command-line parser (unknown flags and bad values are errors), the
 * constraint checks of doc/spec.md section 3, and the start-up table rank 0 prints.
 * Parsing and validation never exit: they return a message so that, under MPI, every
 * rank can fail the same way while only rank 0 prints. Size arithmetic is done in 64
 * bits against the explicit limits below, so no flag value can overflow an int later
 * (doc/reliability.md lists them).
 */
#ifndef LLMC_CONFIG_H
#define LLMC_CONFIG_H

#include <ctype.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define CFG_ERR_LEN 512
#define CFG_PATH_LEN 512   // paths longer than CFG_PATH_LEN-1 are refused, never truncated

// explicit limits (far above any real run; they keep every product below in range)
#define CFG_MAX_L 4096
#define CFG_MAX_H 131072
#define CFG_MAX_SEQ 1048576
#define CFG_MAX_MB 1048576
#define CFG_MAX_VPAD 65536
#define CFG_MAX_TP 65536
#define CFG_MAX_PP 65536
#define CFG_MAX_RANKS 16777216LL          // tp*pp*dp
#define CFG_MAX_GB 16777216LL             // sequences per step
#define CFG_MAX_TENSOR 2147483647LL       // elements of one micro-batch activation (mb*seq*max(4H,Vp))
#define CFG_MAX_PARAMS 8796093022208LL    // 2^43 parameters
#define CFG_MAX_THREADS 1024
#define CFG_MAX_SPIKE_WINDOW 1048576

typedef struct { const char* name; int L, H, heads, seq; } ModelPreset;

static const ModelPreset MODEL_PRESETS[] = {
    {"tiny", 4, 128, 4, 256},     // CPU demo and CI
    {"125m", 12, 768, 12, 2048},
    {"350m", 24, 1024, 16, 2048},
    {"1.3b", 24, 2048, 16, 2048},  // one-GPU correctness and speed
    {"6.7b", 32, 4096, 32, 2048},
    {"530b", 105, 20480, 128, 2048}, // the paper
};
#define NUM_MODEL_PRESETS ((int)(sizeof(MODEL_PRESETS) / sizeof(MODEL_PRESETS[0])))

// -recompute: none; full (keep only each layer's input, rebuild the layer in backward; the
// old `1`); selective (keep the GEMM inputs, rebuild only the attention core in backward)
enum { RECOMPUTE_NONE = 0, RECOMPUTE_FULL = 1, RECOMPUTE_SELECTIVE = 2 };

typedef struct {
    // model: L layers, H hidden (= C in shape comments), heads, seq (= T), V real vocab,
    // Vp vocab padded to a multiple of vpad (layout independent, so never changes numbers)
    char model[32];
    int L, H, heads, seq, V, Vp, vpad;
    int scaled_init; // output projections of each block use s/sqrt(2L)
    // layout
    int tp, pp, dp; // dp = 0: derived from the world size
    int mb;         // micro-batch, sequences
    int zero, recompute;
    int sp, vpp;    // sequence parallelism in TP groups; virtual pipeline chunks per rank (interleaved 1F1B)
    char comm[8];   // CUDA trainer: nccl or mpi
    // recipe, counted in tokens (int64) and sequences
    int64_t gb;                                   // final global batch, sequences
    int64_t ramp_start, ramp_inc, ramp_tokens;    // ramp_inc == 0: no ramp
    int ramp_auto;                                // grow the batch with the measured noise scale
    double lr; int lr_auto;
    int64_t warmup_tokens, decay_tokens;
    double minlr_frac, beta1, beta2, eps, wd, clip;
    int64_t total_tokens;
    int64_t max_steps;                            // -1: until total_tokens
    // data
    char train_glob[CFG_PATH_LEN], val_glob[CFG_PATH_LEN];
    int shuffle;
    int64_t val_every, val_samples;
    // output, checkpoints, sampling
    char out_dir[CFG_PATH_LEN];
    char log_path[CFG_PATH_LEN];
    int64_t ckpt_every;
    int resume;
    char init_from[CFG_PATH_LEN];                 // start from this checkpoint dir's weights
    char tokenizer[CFG_PATH_LEN];
    int64_t sample_every; int sample_len;
    int sample_greedy;                            // argmax instead of sampling (deterministic)
    char prompt[CFG_PATH_LEN];                    // token ids "12,7,99" the sample continues (default <|endoftext|>)
    int64_t eval_every; char eval_file[CFG_PATH_LEN]; // cloze evaluation (llmc/host/eval.h)
    char dump_logits[CFG_PATH_LEN];               // test-only: logits of the first val micro-batch (-steps 0)
    uint64_t seed;
    double peak_tflops;                           // for MFU; 0 = from the device table
    // instruments
    double skip_spikes;                           // z for the spike guard; 0 = only non-finite skips
    int spike_window, spike_stop;                 // rolling window; stop after this many skips in a row
    double noise_beta;                            // EMA decay of the gradient noise scale estimates
    int threads;                                  // OpenMP threads, 0 = default
    // modes
    int plan, check, help;
    int world;                                    // -check only: pretend world size
    // run lifecycle (run.h): retention, step watchdog, ownership of -o, resume identity
    int keep;                                     // keep the newest N complete checkpoints, 0 = all
    double timeout;                               // step watchdog seconds; 0 = off, < 0 = auto
    int overwrite;                                // a fresh run may replace -o's checkpoints
    int allow_data_change;                        // -resume may change seed, shuffle or shards
} Config;

static void config_defaults(Config* c) {
    memset(c, 0, sizeof(*c));
    strcpy(c->model, "tiny");
    c->L = 4; c->H = 128; c->heads = 4; c->seq = 256;
    c->V = 50257; c->vpad = 1024; c->scaled_init = 1;
    c->tp = 1; c->pp = 1; c->dp = 0; c->mb = 1; c->zero = 0; c->recompute = 0;
    c->sp = 0; c->vpp = 1;
    strcpy(c->comm, "nccl");
    // the MT-NLG 530B recipe (doc/spec.md section 2)
    c->gb = 1920; c->ramp_start = 32; c->ramp_inc = 32; c->ramp_tokens = 12000000000LL;
    c->lr = 5.0e-5; c->lr_auto = 0;
    c->warmup_tokens = 1000000000LL; c->decay_tokens = 340000000000LL;
    c->minlr_frac = 0.1; c->beta1 = 0.9; c->beta2 = 0.95; c->eps = 1e-8;
    c->wd = 0.1; c->clip = 1.0;
    c->total_tokens = 270000000000LL; c->max_steps = -1;
    strcpy(c->train_glob, "dev/data/kjv/kjv_train_*.bin");
    strcpy(c->val_glob, "dev/data/kjv/kjv_val_*.bin");
    c->shuffle = 1; c->val_every = 0; c->val_samples = 64;
    c->ckpt_every = 0;
    c->sample_every = 0; c->sample_len = 64;
    c->seed = 1337;
    c->skip_spikes = 0; c->spike_window = 100; c->spike_stop = 5; c->noise_beta = 0.99;
    c->keep = 0; c->timeout = -1; c->overwrite = 0; c->allow_data_change = 0;
}

// in 64 bits; a result beyond int range is clamped (validation then refuses it)
static int round_up(int x, int m) {
    int64_t r = (((int64_t)x + m - 1) / m) * m;
    return r > 2147483647LL ? 2147483647 : (int)r;
}

// ---------------------------------------------------------------------------------------
// parsing

static int parse_i64(const char* s, int64_t* out) {
    // accepts integers and scientific notation for round numbers (12e9, 1.5e6); strtod
    // would skip leading blanks, refused so that a value is exactly what was typed
    if (s == NULL || *s == '\0' || isspace((unsigned char)*s)) return 0;
    char* end;
    double d = strtod(s, &end);
    if (*end != '\0' || !isfinite(d) || d != floor(d) || fabs(d) > 9.0e18) return 0;
    *out = (int64_t)d;
    return 1;
}
static int parse_int(const char* s, int* out) {
    int64_t v;
    if (!parse_i64(s, &v) || v > 2147483647LL || v < -2147483647LL) return 0;
    *out = (int)v;
    return 1;
}
static int parse_f64(const char* s, double* out) {
    if (s == NULL || *s == '\0' || isspace((unsigned char)*s)) return 0;
    char* end;
    double d = strtod(s, &end);
    if (*end != '\0' || !isfinite(d)) return 0;
    *out = d;
    return 1;
}

static int apply_preset(Config* c, const char* name) {
    for (int i = 0; i < NUM_MODEL_PRESETS; i++) {
        if (strcmp(MODEL_PRESETS[i].name, name) == 0) {
            snprintf(c->model, sizeof(c->model), "%s", name);
            c->L = MODEL_PRESETS[i].L; c->H = MODEL_PRESETS[i].H;
            c->heads = MODEL_PRESETS[i].heads; c->seq = MODEL_PRESETS[i].seq;
            return 1;
        }
    }
    return 0;
}

// Called for flags this file does not know (the planner's cluster flags). Returns 1 if
// consumed (using *i to step over values), 0 if unknown, -1 on a bad value (err filled).
typedef int (*ExtraFlagFn)(void* user, int argc, char** argv, int* i, char* err);

// returns 0 ok, 1 error (message in err)
static int config_parse(Config* c, int argc, char** argv, ExtraFlagFn extra, void* user, char* err) {
    err[0] = '\0';
    // the preset is applied first so that explicit shape flags override it wherever they are
    for (int i = 1; i < argc - 1; i++) {
        if (strcmp(argv[i], "-model") == 0) {
            if (!apply_preset(c, argv[i + 1])) {
                snprintf(err, CFG_ERR_LEN, "unknown model '%s' (choose tiny, 125m, 350m, 1.3b, 6.7b, 530b or give -L -H -heads -seq)", argv[i + 1]);
                return 1;
            }
        }
    }
    for (int i = 1; i < argc; i++) {
        const char* f = argv[i];
        const char* v = (i + 1 < argc) ? argv[i + 1] : NULL;
        #define NEED(n) do { if (i + (n) >= argc) { snprintf(err, CFG_ERR_LEN, "flag %s needs %d value(s)", f, (n)); return 1; } } while (0)
        #define BAD() do { snprintf(err, CFG_ERR_LEN, "bad value '%s' for %s", v, f); return 1; } while (0)
        #define INT_FLAG(name, field) if (strcmp(f, name) == 0) { NEED(1); if (!parse_int(v, &(field))) BAD(); i++; continue; }
        #define I64_FLAG(name, field) if (strcmp(f, name) == 0) { NEED(1); if (!parse_i64(v, &(field))) BAD(); i++; continue; }
        #define F64_FLAG(name, field) if (strcmp(f, name) == 0) { NEED(1); if (!parse_f64(v, &(field))) BAD(); i++; continue; }
        #define STR_FLAG(name, field) if (strcmp(f, name) == 0) { NEED(1); snprintf(field, sizeof(field), "%s", v); i++; continue; }
        // a path: never truncated, and a value that looks like a flag (-o -resume) is an error
        #define PATH_FLAG(name, field) if (strcmp(f, name) == 0) { NEED(1); \
            if (strlen(v) >= sizeof(field)) { snprintf(err, CFG_ERR_LEN, "path for %s is %zu characters; the limit is %d", f, strlen(v), (int)sizeof(field) - 1); return 1; } \
            if (v[0] == '-') { snprintf(err, CFG_ERR_LEN, "%s needs a path, got '%s' (a flag?); write ./%s for a file whose name starts with '-'", f, v, v); return 1; } \
            snprintf(field, sizeof(field), "%s", v); i++; continue; }
        if (strcmp(f, "-h") == 0 || strcmp(f, "--help") == 0) { c->help = 1; continue; }
        if (strcmp(f, "-plan") == 0) { c->plan = 1; continue; }
        if (strcmp(f, "-check") == 0) { c->check = 1; continue; }
        if (strcmp(f, "-resume") == 0) { c->resume = 1; continue; }
        if (strcmp(f, "-model") == 0) { NEED(1); i++; continue; } // applied above
        INT_FLAG("-L", c->L) INT_FLAG("-H", c->H) INT_FLAG("-heads", c->heads)
        INT_FLAG("-seq", c->seq) INT_FLAG("-V", c->V) INT_FLAG("-vpad", c->vpad)
        INT_FLAG("-scaled-init", c->scaled_init)
        if (strcmp(f, "-world") == 0) { NEED(1); if (!parse_int(v, &c->world) || c->world < 1 || c->world > CFG_MAX_RANKS) BAD(); i++; continue; }
        INT_FLAG("-tp", c->tp) INT_FLAG("-pp", c->pp) INT_FLAG("-dp", c->dp)
        INT_FLAG("-mb", c->mb) INT_FLAG("-zero", c->zero)
        INT_FLAG("-sp", c->sp) INT_FLAG("-vpp", c->vpp)
        if (strcmp(f, "-recompute") == 0) { // 0 | selective | full (1 = full, the older spelling)
            NEED(1);
            if (strcmp(v, "0") == 0 || strcmp(v, "none") == 0) c->recompute = RECOMPUTE_NONE;
            else if (strcmp(v, "1") == 0 || strcmp(v, "full") == 0) c->recompute = RECOMPUTE_FULL;
            else if (strcmp(v, "selective") == 0) c->recompute = RECOMPUTE_SELECTIVE;
            else { snprintf(err, CFG_ERR_LEN, "bad value '%s' for -recompute: want 0, selective or full (1 = full)", v); return 1; }
            i++; continue;
        }
        STR_FLAG("-comm", c->comm)
        I64_FLAG("-gb", c->gb)
        if (strcmp(f, "-ramp") == 0) {
            if (v != NULL && strcmp(v, "off") == 0) { c->ramp_start = c->ramp_inc = c->ramp_tokens = 0; c->ramp_auto = 0; i++; continue; }
            if (v != NULL && strcmp(v, "auto") == 0) {
                NEED(3);
                if (!parse_i64(argv[i + 2], &c->ramp_start) || !parse_i64(argv[i + 3], &c->ramp_inc) || c->ramp_start <= 0 || c->ramp_inc <= 0) {
                    snprintf(err, CFG_ERR_LEN, "bad value for -ramp auto: want positive START INCREMENT (for example -ramp auto 32 32)");
                    return 1;
                }
                c->ramp_auto = 1; c->ramp_tokens = 0;
                i += 3; continue;
            }
            c->ramp_auto = 0;
            NEED(3);
            if (!parse_i64(argv[i + 1], &c->ramp_start) || !parse_i64(argv[i + 2], &c->ramp_inc) ||
                !parse_i64(argv[i + 3], &c->ramp_tokens) || c->ramp_start <= 0 || c->ramp_inc <= 0 || c->ramp_tokens <= 0) {
                snprintf(err, CFG_ERR_LEN, "bad value for -ramp: want positive START INCREMENT TOKENS (for example -ramp 32 32 12e9) or -ramp off");
                return 1;
            }
            i += 3; continue;
        }
        if (strcmp(f, "-lr") == 0) {
            NEED(1);
            if (strcmp(v, "auto") == 0) { c->lr_auto = 1; } else { c->lr_auto = 0; if (!parse_f64(v, &c->lr)) BAD(); }
            i++; continue;
        }
        I64_FLAG("-warmup", c->warmup_tokens) I64_FLAG("-decay", c->decay_tokens)
        F64_FLAG("-minlr-frac", c->minlr_frac) F64_FLAG("-beta1", c->beta1) F64_FLAG("-beta2", c->beta2)
        F64_FLAG("-eps", c->eps) F64_FLAG("-wd", c->wd) F64_FLAG("-clip", c->clip)
        I64_FLAG("-tokens", c->total_tokens)
        // -steps -1: no step limit (the default, what the recipe scripts pass); 0 or below -1 is an error
        if (strcmp(f, "-steps") == 0) { NEED(1); if (!parse_i64(v, &c->max_steps) || (c->max_steps < 0 && c->max_steps != -1)) BAD(); i++; continue; }
        PATH_FLAG("-i", c->train_glob)
        if (strcmp(f, "-j") == 0 && v != NULL && v[0] == '\0') { c->val_glob[0] = '\0'; i++; continue; } // -j '': no validation data
        PATH_FLAG("-j", c->val_glob)
        INT_FLAG("-shuffle", c->shuffle)
        I64_FLAG("-val-every", c->val_every) I64_FLAG("-val-samples", c->val_samples)
        PATH_FLAG("-o", c->out_dir) PATH_FLAG("-log", c->log_path)
        I64_FLAG("-ckpt-every", c->ckpt_every) PATH_FLAG("-init-from", c->init_from)
        PATH_FLAG("-tokenizer", c->tokenizer)
        I64_FLAG("-sample-every", c->sample_every) INT_FLAG("-sample-len", c->sample_len)
        INT_FLAG("-sample-greedy", c->sample_greedy) STR_FLAG("-prompt", c->prompt)
        I64_FLAG("-eval-every", c->eval_every) STR_FLAG("-eval-file", c->eval_file) STR_FLAG("-dump-logits", c->dump_logits)
        F64_FLAG("-peak", c->peak_tflops) INT_FLAG("-threads", c->threads)
        F64_FLAG("-skip-spikes", c->skip_spikes) INT_FLAG("-spike-window", c->spike_window)
        INT_FLAG("-spike-stop", c->spike_stop) F64_FLAG("-noise-beta", c->noise_beta)
        INT_FLAG("-keep", c->keep) INT_FLAG("-overwrite", c->overwrite) INT_FLAG("-allow-data-change", c->allow_data_change)
        if (strcmp(f, "-timeout") == 0) { NEED(1); if (strcmp(v, "auto") == 0) c->timeout = -1; else if (!parse_f64(v, &c->timeout) || c->timeout < 0) BAD(); i++; continue; }
        if (strcmp(f, "-seed") == 0) { int64_t s; NEED(1); if (!parse_i64(v, &s) || s < 0) BAD(); c->seed = (uint64_t)s; i++; continue; }
        #undef NEED
        #undef BAD
        #undef INT_FLAG
        #undef I64_FLAG
        #undef F64_FLAG
        #undef STR_FLAG
        #undef PATH_FLAG
        if (extra != NULL) {
            int r = extra(user, argc, argv, &i, err);
            if (r == 1) continue;
            if (r < 0) return 1;
        }
        snprintf(err, CFG_ERR_LEN, "unknown flag '%s' (run with -h for the list)", f);
        return 1;
    }
    if (c->vpad > 0) c->Vp = round_up(c->V, c->vpad);
    return 0;
}

// ---------------------------------------------------------------------------------------
// validation: model shape and recipe, independent of the world size

static int config_validate(Config* c, char* err) {
    #define FAIL(...) do { snprintf(err, CFG_ERR_LEN, __VA_ARGS__); return 1; } while (0)
    if (c->L <= 0 || c->H <= 0 || c->heads <= 0 || c->seq <= 0 || c->V <= 0 || c->vpad <= 0)
        FAIL("model sizes must be positive (L=%d H=%d heads=%d seq=%d V=%d vpad=%d)", c->L, c->H, c->heads, c->seq, c->V, c->vpad);
    if (c->L > CFG_MAX_L || c->H > CFG_MAX_H || c->seq > CFG_MAX_SEQ || c->vpad > CFG_MAX_VPAD || c->mb > CFG_MAX_MB)
        FAIL("model size beyond the limits (L <= %d, H <= %d, seq <= %d, vpad <= %d, mb <= %d)", CFG_MAX_L, CFG_MAX_H, CFG_MAX_SEQ, CFG_MAX_VPAD, CFG_MAX_MB);
    if (c->H % c->heads != 0) FAIL("heads (%d) must divide the hidden size H (%d)", c->heads, c->H);
    if (c->V > 65536) FAIL("V=%d: token shards store uint16 ids, so the vocabulary must be <= 65536", c->V);
    if (c->tp <= 0 || c->pp <= 0 || c->dp < 0 || c->mb <= 0)
        FAIL("layout sizes must be positive (tp=%d pp=%d dp=%d mb=%d)", c->tp, c->pp, c->dp, c->mb);
    if (c->tp > CFG_MAX_TP || c->pp > CFG_MAX_PP || (int64_t)c->tp * c->pp * (c->dp > 0 ? c->dp : 1) > CFG_MAX_RANKS)
        FAIL("layout beyond the limits (tp <= %d, pp <= %d, tp*pp*dp <= %lld ranks)", CFG_MAX_TP, CFG_MAX_PP, (long long)CFG_MAX_RANKS);
    {
        int64_t Vp = round_up(c->V, c->vpad), wide = 4 * (int64_t)c->H > Vp ? 4 * (int64_t)c->H : Vp;
        if ((int64_t)c->mb * c->seq * wide > CFG_MAX_TENSOR)
            FAIL("micro-batch activations of mb*seq*max(4H, Vp) = %lld elements exceed the limit %lld: lower -mb or -seq",
                 (long long)((int64_t)c->mb * c->seq * wide), (long long)CFG_MAX_TENSOR);
        double params = 12.0 * c->L * (double)c->H * c->H + (double)Vp * c->H + (double)c->seq * c->H;
        if (params > (double)CFG_MAX_PARAMS) FAIL("the model has %.3g parameters, beyond the limit of %.3g", params, (double)CFG_MAX_PARAMS);
    }
    if (c->zero != 0 && c->zero != 1) FAIL("-zero takes 0 or 1");
    if (c->recompute < RECOMPUTE_NONE || c->recompute > RECOMPUTE_SELECTIVE) FAIL("-recompute takes 0, selective or full");
    if (c->sp != 0 && c->sp != 1) FAIL("-sp takes 0 or 1");
    if (c->vpp < 1) FAIL("-vpp must be >= 1 (1: plain 1F1B)");
    if (c->scaled_init != 0 && c->scaled_init != 1) FAIL("-scaled-init takes 0 or 1");
    if (c->shuffle != 0 && c->shuffle != 1) FAIL("-shuffle takes 0 or 1");
    if (strcmp(c->comm, "nccl") != 0 && strcmp(c->comm, "mpi") != 0) FAIL("-comm takes nccl or mpi, not '%s'", c->comm);
    if (c->gb <= 0 || c->gb > CFG_MAX_GB) FAIL("-gb must be in 1..%lld (sequences per step), not %lld", (long long)CFG_MAX_GB, (long long)c->gb);
    if (c->ramp_inc != 0) {
        if (c->ramp_start <= 0 || (c->ramp_tokens <= 0 && !c->ramp_auto) || c->ramp_inc < 0)
            FAIL("-ramp START INCREMENT TOKENS must be positive");
        if (c->ramp_start > c->gb) FAIL("ramp start batch %lld exceeds the final global batch %lld", (long long)c->ramp_start, (long long)c->gb);
        if ((c->gb - c->ramp_start) % c->ramp_inc != 0)
            FAIL("ramp increment %lld does not divide (global batch %lld - start %lld) exactly", (long long)c->ramp_inc, (long long)c->gb, (long long)c->ramp_start);
        if (c->gb == c->ramp_start) FAIL("ramp start equals the final global batch: use -ramp off");
    }
    if (!c->lr_auto && c->lr < 0) FAIL("-lr must be >= 0");
    if (c->warmup_tokens < 0 || c->decay_tokens < 0) FAIL("-warmup and -decay must be >= 0");
    if (c->decay_tokens < c->warmup_tokens) FAIL("-decay (%lld) must be >= -warmup (%lld)", (long long)c->decay_tokens, (long long)c->warmup_tokens);
    if (c->minlr_frac < 0 || c->minlr_frac > 1) FAIL("-minlr-frac must be in [0, 1]");
    if (c->beta1 < 0 || c->beta1 >= 1 || c->beta2 < 0 || c->beta2 >= 1) FAIL("-beta1 and -beta2 must be in [0, 1)");
    if (c->eps <= 0) FAIL("-eps must be positive");
    // the optimizer computes in fp32: a value that rounds to 0, 1 or infinity there is wrong
    if ((float)c->eps <= 0.0f) FAIL("-eps %g underflows to 0 in fp32 (smallest useful value ~1e-38)", c->eps);
    if ((float)c->beta1 >= 1.0f || (float)c->beta2 >= 1.0f) FAIL("-beta1 and -beta2 must stay below 1 in fp32 (%g, %g round to 1)", c->beta1, c->beta2);
    if (!isfinite((float)c->lr) || !isfinite((float)c->wd) || !isfinite((float)c->clip) || !isfinite((float)c->eps))
        FAIL("-lr, -wd, -clip and -eps must be finite in fp32");
    if (c->wd < 0) FAIL("-wd must be >= 0");
    if (c->clip < 0) FAIL("-clip must be >= 0 (0 turns clipping off)");
    if (c->total_tokens <= 0) FAIL("-tokens must be positive");
    if (c->skip_spikes < 0) FAIL("-skip-spikes must be >= 0 (0: skip only non-finite steps)");
    if (c->spike_window < 2 || c->spike_window > CFG_MAX_SPIKE_WINDOW || c->spike_stop < 0) FAIL("-spike-window must be in 2..%d and -spike-stop >= 0", CFG_MAX_SPIKE_WINDOW);
    if (c->threads < 0 || c->threads > CFG_MAX_THREADS) FAIL("-threads must be in 0..%d (0: the default)", CFG_MAX_THREADS);
    if (c->peak_tflops < 0) FAIL("-peak must be >= 0 TFLOP/s (0: from the device table)");
    if (c->ckpt_every > 0 && c->out_dir[0] == '\0') FAIL("-ckpt-every needs -o DIR (where the checkpoints go)");
    if (c->resume && c->out_dir[0] == '\0') FAIL("-resume needs -o DIR (where the checkpoints are)");
    if (c->resume && c->init_from[0] != '\0') FAIL("-resume and -init-from exclude each other (resume continues a run; -init-from starts a new one from weights)");
    if (c->noise_beta < 0 || c->noise_beta >= 1) FAIL("-noise-beta must be in [0, 1)");
    if (c->val_every < 0 || c->val_samples < 0 || c->ckpt_every < 0 || c->sample_every < 0 || c->sample_len < 0)
        FAIL("-val-every, -val-samples, -ckpt-every, -sample-every and -sample-len must be >= 0");
    if (c->keep < 0) FAIL("-keep must be >= 0 (0 keeps every checkpoint)");
    if (c->overwrite != 0 && c->overwrite != 1) FAIL("-overwrite takes 0 or 1");
    if (c->allow_data_change != 0 && c->allow_data_change != 1) FAIL("-allow-data-change takes 0 or 1");
    if (c->sample_greedy != 0 && c->sample_greedy != 1) FAIL("-sample-greedy takes 0 or 1");
    if (c->eval_every < 0) FAIL("-eval-every must be >= 0");
    if (c->eval_every > 0 && c->eval_file[0] == '\0') FAIL("-eval-every needs -eval-file FILE (a cloze .jsonl: dev/eval/make_cloze.py)");
    if (c->dump_logits[0] != '\0' && c->max_steps != 0) FAIL("-dump-logits runs with -steps 0 (it evaluates the loaded weights)");
    if (c->sample_every > 0 && c->sample_len >= c->seq) FAIL("-sample-len (%d) must be below the sequence length (%d)", c->sample_len, c->seq);
    #undef FAIL
    c->Vp = round_up(c->V, c->vpad);
    return 0;
}

// Layout constraints of doc/spec.md section 3, checked up front for the whole ramp.
static int config_validate_layout(const Config* c, int world, char* err) {
    #define FAIL(...) do { snprintf(err, CFG_ERR_LEN, __VA_ARGS__); return 1; } while (0)
    int dp = c->dp;
    int64_t tpp = (int64_t)c->tp * c->pp; // 64 bits: tp*pp may exceed int (SIGFPE on a wrapped 0)
    if (world <= 0 || tpp <= 0) FAIL("world size %d and tp*pp = %lld must be positive", world, (long long)tpp);
    if (world % tpp != 0)
        FAIL("world size %d is not a multiple of tp*pp = %d*%d: launch a multiple of %lld ranks (mpirun -np N)", world, c->tp, c->pp, (long long)tpp);
    if (dp == 0) dp = (int)(world / tpp);
    if (tpp * dp != world)
        FAIL("world size %d != tp*pp*dp = %d*%d*%d: launch tp*pp*dp ranks (mpirun -np %lld)", world, c->tp, c->pp, dp, (long long)(tpp * dp));
    if (c->heads % c->tp != 0) FAIL("tp=%d must divide the number of heads (%d)", c->tp, c->heads);
    if ((4 * c->H) % c->tp != 0) FAIL("tp=%d must divide 4H (%d)", c->tp, 4 * c->H);
    if (c->Vp % c->tp != 0) FAIL("tp=%d must divide the padded vocabulary (%d): change -vpad", c->tp, c->Vp);
    if (c->L % c->pp != 0) FAIL("pp=%d must divide the number of layers (%d)", c->pp, c->L);
    if (c->sp && c->seq % c->tp != 0) FAIL("-sp 1: tp=%d must divide the sequence length (%d)", c->tp, c->seq);
    if (c->vpp > 1 && c->pp < 2) FAIL("-vpp %d needs a pipeline: interleaving takes -pp >= 2", c->vpp);
    if (c->vpp > 1 && c->L % (c->pp * c->vpp) != 0)
        FAIL("-vpp %d: pp*vpp = %d*%d must divide the number of layers (%d)", c->vpp, c->pp, c->vpp, c->L);
    int64_t unit = (int64_t)c->mb * dp;
    if (c->gb % unit != 0)
        FAIL("global batch %lld is not divisible by micro-batch*dp = %d*%d", (long long)c->gb, c->mb, dp);
    if (c->ramp_inc != 0 && (c->ramp_start % unit != 0 || c->ramp_inc % unit != 0))
        FAIL("the ramp (start %lld, increment %lld) produces global batches not divisible by micro-batch*dp = %d*%d",
             (long long)c->ramp_start, (long long)c->ramp_inc, c->mb, dp);
    // interleaving (Megatron's constraint): micro-batches per step a multiple of pp for every
    // batch the ramp produces; the ramp's batches are start + j*inc, so checking both suffices
    if (c->vpp > 1) {
        int64_t unit_pp = unit * c->pp;
        if (c->gb % unit_pp != 0 || (c->ramp_inc != 0 && (c->ramp_start % unit_pp != 0 || c->ramp_inc % unit_pp != 0)))
            FAIL("-vpp %d: every global batch (final %lld, ramp start %lld, increment %lld) must give a multiple of pp=%d micro-batches, i.e. be divisible by micro-batch*dp*pp = %lld",
                 c->vpp, (long long)c->gb, (long long)c->ramp_start, (long long)c->ramp_inc, c->pp, (long long)unit_pp);
    }
    #undef FAIL
    return 0;
}

static void config_print_help(FILE* out) {
    fprintf(out,
        "usage: train_gpt [flags]      (mpirun -np N train_gpt ... for 3D layouts)\n"
        "model:   -model tiny|125m|350m|1.3b|6.7b|530b | -L -H -heads -seq -V   -vpad N (vocab padding multiple, 1024)\n"
        "         -scaled-init 0/1 (output projections use s/sqrt(2L), default 1)\n"
        "layout:  -tp N -pp N -dp N (0: from world size)  -mb N (micro-batch)  -zero 0/1  -recompute 0|selective|full  -comm nccl/mpi\n"
        "         -sp 0/1 (sequence parallelism in TP groups)  -vpp V (interleaved 1F1B, V model chunks per pipeline rank)\n"
        "recipe:  -gb N (final global batch)  -ramp S I TOKENS | -ramp off   -lr X|auto  -warmup TOKENS  -decay TOKENS\n"
        "         -minlr-frac X  -beta1 X  -beta2 X  -eps X  -wd X  -clip X  -tokens N  -steps N (stop early)\n"
        "data:    -i GLOB (train shards)  -j GLOB (val shards)  -shuffle 0/1  -val-every STEPS  -val-samples N\n"
        "output:  -o DIR  -log FILE (JSONL; default DIR/log.jsonl)  -ckpt-every STEPS  -resume  -init-from CKPT_DIR\n"
        "         -tokenizer FILE  -sample-every STEPS  -sample-len N  -seed N  -peak TFLOPS  -threads N\n"
        "run:     -keep N (newest N checkpoints, 0 = all)  -timeout S|auto|0 (step watchdog)  -overwrite 0/1 (fresh run\n"
        "         replaces -o's checkpoints)  -allow-data-change 0/1 (-resume with another seed/shuffle/shards)\n"
        "         -sample-greedy 0/1  -prompt IDS (\"12,7,99\")  -eval-every STEPS -eval-file CLOZE.jsonl\n"
        "         -steps 0: evaluate the loaded weights once (val, cloze, sample) and exit  -dump-logits FILE (tests)\n"
        "guards:  -skip-spikes Z (skip updates above mean + Z sd; NaN/Inf always skipped)  -spike-window N  -spike-stop K\n"
        "         -noise-beta X (EMA of the gradient noise scale, logged as b_simple with dp >= 2)  -ramp auto S I\n"
        "modes:   -check [-world N] (validate flags, model and layout for N ranks, then exit)  -h\n"
        "planner: -plan -cluster selene-a100|h100|h200 -nodes N [-scaling N1,N2,..] [-plan-csv FILE] [-plan-top K]\n"
        "         cluster overrides: -gpus-per-node -peak -gpu-mem -bw-hbm -bw-intra -bw-inter -latency -latency-intra\n"
        "         model constants: -plan-eff -plan-net-eff -plan-hbm-eff -plan-workspace -plan-headroom\n");
}

#endif // LLMC_CONFIG_H
