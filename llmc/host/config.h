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
#include <errno.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define CFG_ERR_LEN 512
#define CFG_MAX_SKIPS 8  // -skip-data ranges (a checkpoint holds as many: CKPT_MAX_SKIPS)
#define CFG_PATH_LEN 512 // paths longer than CFG_PATH_LEN-1 are refused, never truncated

// explicit limits (far above any real run; they keep every product below in range)
#define CFG_MAX_L 4096
#define CFG_MAX_H 131072
#define CFG_MAX_SEQ 1048576
#define CFG_MAX_MB 1048576
#define CFG_MAX_VPAD 65536
#define CFG_MAX_TP 65536
#define CFG_MAX_PP 65536
#define CFG_MAX_RANKS 16777216LL       // tp*pp*dp
#define CFG_MAX_GB 16777216LL          // sequences per step
#define CFG_MAX_TENSOR 2147483647LL    // elements of one micro-batch activation (mb*seq*max(4H,Vp))
#define CFG_MAX_PARAMS 8796093022208LL // 2^43 parameters
#define CFG_MAX_THREADS 1024
#define CFG_MAX_SPIKE_WINDOW 1048576

typedef struct {
    const char* name;
    int L, H, heads, seq;
} ModelPreset;

static const ModelPreset MODEL_PRESETS[] = {
    {"tiny", 4, 128, 4, 256}, // CPU demo and CI
    {"125m", 12, 768, 12, 2048},  {"350m", 24, 1024, 16, 2048},
    {"1.3b", 24, 2048, 16, 2048},                                  // one-GPU correctness and speed
    {"6.7b", 32, 4096, 32, 2048}, {"530b", 105, 20480, 128, 2048}, // the paper
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
    int scaled_init;      // output projections of each block use s/sqrt(2L)
    double init_std_mult; // s = init_std_mult * sqrt(1/(3H)) (1: the paper; other values are ablations)
    // layout
    int tp, cp, pp, dp; // dp = 0: derived from the world size
    int mb;             // micro-batch, sequences
    int zero, recompute;
    int sp, vpp;             // sequence parallelism in TP groups; virtual pipeline chunks per rank (interleaved 1F1B)
    char comm[8];            // CUDA trainer: nccl or mpi
    char grad_reduce[8];     // -grad-reduce fp32 | bf16: the precision of the DP gradient reduction (zero.h)
    char layout[16];         // -layout manual | auto (autolayout.h)
    char pp_schedule[16];    // -pp-schedule 1f1b | interleaved | zb-h1 (layout.h)
    int layout_pins;         // the layout flags given (AL_* bits of autolayout.h): pinned under -layout auto
    char layout_choice[160]; // -layout auto's choice, as flags (for the run record)
    // recipe, counted in tokens (int64) and sequences
    int64_t gb;                                // final global batch, sequences
    int64_t ramp_start, ramp_inc, ramp_tokens; // ramp_inc == 0: no ramp
    int ramp_auto;                             // grow the batch with the measured noise scale
    double lr;
    int lr_auto;
    int64_t warmup_tokens, decay_tokens;
    double minlr_frac, beta1, beta2, eps, wd, clip;
    int64_t total_tokens;
    int64_t max_steps; // -1: until total_tokens
    // data
    char train_glob[CFG_PATH_LEN], val_glob[CFG_PATH_LEN];
    char blend_file[CFG_PATH_LEN]; // -blend: a JSON blend file (blend.h), in place of -i (and -j)
    int shuffle;
    int64_t val_every, val_samples;
    // output, checkpoints, sampling
    char out_dir[CFG_PATH_LEN];
    char log_path[CFG_PATH_LEN];
    int64_t ckpt_every;
    int resume;
    char init_from[CFG_PATH_LEN]; // start from this checkpoint dir's weights
    char tokenizer[CFG_PATH_LEN];
    int64_t sample_every;
    int sample_len;
    int sample_greedy;              // argmax instead of sampling (deterministic)
    char prompt[CFG_PATH_LEN];      // token ids "12,7,99" the sample continues (default <|endoftext|>)
    char prompt_text[CFG_PATH_LEN]; // or text, encoded with -tokenizer's .json (llmc/host/bpe.h)
    int64_t eval_every;
    char eval_file[CFG_PATH_LEN];   // cloze evaluation (llmc/host/eval.h)
    char dump_logits[CFG_PATH_LEN]; // test-only: logits of the first val micro-batch (-steps 0)
    uint64_t seed;
    double peak_tflops; // for MFU; 0 = from the device table
    // instruments
    double skip_spikes;           // z for the spike guard; 0 = only non-finite skips
    int64_t rewind_batches;       // -on-spike rewind N: batches passed over after the checkpoint (0: skip)
    int max_rewinds;              // -on-spike rewind: at most this many, then stop
    char skip_data[CFG_PATH_LEN]; // -skip-data "AT:N,...": stream samples passed over (a rewound run's)
    char rewound[CFG_PATH_LEN];   // no flag: the run record's ranges -on-spike rewind passed over ("AT:N,...")
    int spike_window, spike_stop; // rolling window; stop after this many skips in a row
    double noise_beta;            // EMA decay of the gradient noise scale estimates
    int threads;                  // OpenMP threads, 0 = default
    // modes
    int plan, check, help;
    int world; // -check only: pretend world size
    // run lifecycle (run.h): retention, step watchdog, ownership of -o, resume identity
    int keep;              // keep the newest N complete checkpoints, 0 = all
    int ckpt_async;        // checkpoints written by a background thread (ckpt_async.h)
    double mtbf_hours;     // -plan: one node's MTBF, hours (default: planner.h's PLAN_MTBF_HOURS)
    double timeout;        // step watchdog seconds; 0 = off, < 0 = auto
    int overwrite;         // a fresh run may replace -o's checkpoints
    int allow_data_change; // -resume may change seed, shuffle or shards
    // the command line that defines the run, as a JSON array body (runrecord.h): -o's record
    char argv_record[8192];
} Config;

// ---------------------------------------------------------------------------------------
// The flag table: one row per flag whose value is a plain number, 0/1 switch, word or
// path. X(KIND, flag, Config field, default, help group, what). It generates the defaults
// (config_defaults), the parser (config_parse), the 0/1 checks of BOOL flags
// (config_validate) and -h with every default (config_print_help). The flags with a syntax
// of their own (-model, -ramp, -lr, -recompute, -steps, -timeout, -seed, -world and the
// modes) are parsed by hand below and listed for -h in CONFIG_SPECIAL_FLAGS.
// KIND: INT, I64, F64, BOOL (int, 0 or 1), WORD (char[], any text), PATH (char[], never
// truncated, never a value that starts with '-').
#define CFG_DEFAULT_TRAIN "dev/data/kjv/kjv_train_*.bin"
#define CFG_DEFAULT_VAL "dev/data/kjv/kjv_val_*.bin"
#define CONFIG_FLAGS(X)                                                                                       \
    X(INT, "-L", L, 4, "model", "layers")                                                                     \
    X(INT, "-H", H, 128, "model", "hidden size")                                                              \
    X(INT, "-heads", heads, 4, "model", "attention heads")                                                    \
    X(INT, "-seq", seq, 256, "model", "sequence length")                                                      \
    X(INT, "-V", V, 50257, "model", "vocabulary")                                                             \
    X(INT, "-vpad", vpad, 1024, "model", "the vocabulary is padded to a multiple of this")                    \
    X(BOOL, "-scaled-init", scaled_init, 1, "model", "output projections initialised with s/sqrt(2L)")        \
    X(F64, "-init-std-mult", init_std_mult, 1.0, "model", "init std s = this x sqrt(1/(3H)) (ablations)")     \
    X(INT, "-tp", tp, 1, "layout", "tensor-parallel ranks")                                                   \
    X(INT, "-pp", pp, 1, "layout", "pipeline stages")                                                         \
    X(INT, "-cp", cp, 1, "layout", "context-parallel ranks: each sequence split over them (ring attention)")  \
    X(INT, "-dp", dp, 0, "layout", "data-parallel replicas (0: from the world size)")                         \
    X(INT, "-mb", mb, 1, "layout", "micro-batch, sequences")                                                  \
    X(INT, "-zero", zero, 0, "layout", "ZeRO: 1 optimizer state, 2 + gradients, 3 + weights sharded over DP") \
    X(BOOL, "-sp", sp, 0, "layout", "sequence parallelism in the TP groups")                                  \
    X(INT, "-vpp", vpp, 1, "layout", "model chunks per pipeline rank (interleaved 1F1B)")                     \
    X(WORD, "-pp-schedule", pp_schedule, "1f1b", "layout",                                                    \
      "1f1b (interleaved with -vpp > 1) or zb-h1 (zero bubble: weight gradients fill the bubble)")            \
    X(WORD, "-comm", comm, "nccl", "layout", "CUDA trainer: nccl or mpi")                                     \
    X(WORD, "-grad-reduce", grad_reduce, "fp32", "layout",                                                    \
      "DP gradient reduction in fp32 or bf16 (Megatron's --grad-reduce-in-bf16; needs -zero >= 1)")           \
    X(WORD, "-layout", layout, "manual", "layout", "auto: the planner picks the layout flags not given")      \
    X(I64, "-gb", gb, 1920, "recipe", "final global batch, sequences")                                        \
    X(I64, "-warmup", warmup_tokens, 1000000000LL, "recipe", "LR warmup, tokens")                             \
    X(I64, "-decay", decay_tokens, 340000000000LL, "recipe", "LR cosine decay ends here, tokens")             \
    X(F64, "-minlr-frac", minlr_frac, 0.1, "recipe", "final LR as a fraction of -lr")                         \
    X(F64, "-beta1", beta1, 0.9, "recipe", "AdamW beta1")                                                     \
    X(F64, "-beta2", beta2, 0.95, "recipe", "AdamW beta2")                                                    \
    X(F64, "-eps", eps, 1e-8, "recipe", "AdamW epsilon")                                                      \
    X(F64, "-wd", wd, 0.1, "recipe", "weight decay")                                                          \
    X(F64, "-clip", clip, 1.0, "recipe", "gradient-norm clipping (0: off)")                                   \
    X(I64, "-tokens", total_tokens, 270000000000LL, "recipe", "training tokens")                              \
    X(PATH, "-i", train_glob, CFG_DEFAULT_TRAIN, "data",                                                      \
      "training shards: a glob, or a blend \"0.3 a_*.bin 0.7 b_*.bin\"")                                      \
    X(PATH, "-j", val_glob, CFG_DEFAULT_VAL, "data", "validation shards, as -i ('': none)")                   \
    X(PATH, "-blend", blend_file, "", "data", "JSON blend file: its train list replaces -i, valid list -j")   \
    X(BOOL, "-shuffle", shuffle, 1, "data", "shuffle the sequences each epoch")                               \
    X(I64, "-val-every", val_every, 0, "data", "validation every N steps (0: off)")                           \
    X(I64, "-val-samples", val_samples, 64, "data", "validation sequences")                                   \
    X(PATH, "-o", out_dir, "", "output", "output directory (checkpoints, log)")                               \
    X(PATH, "-log", log_path, "", "output", "JSONL log (default DIR/log.jsonl)")                              \
    X(I64, "-ckpt-every", ckpt_every, 0, "output", "checkpoint every N steps (0: only the last)")             \
    X(PATH, "-init-from", init_from, "", "output", "start a new run from this checkpoint's weights")          \
    X(PATH, "-tokenizer", tokenizer, "", "output", "tokenizer file, for samples")                             \
    X(I64, "-sample-every", sample_every, 0, "output", "sample every N steps (0: off)")                       \
    X(INT, "-sample-len", sample_len, 64, "output", "sample length, tokens")                                  \
    X(BOOL, "-sample-greedy", sample_greedy, 0, "output", "argmax instead of sampling")                       \
    X(WORD, "-prompt", prompt, "", "output", "token ids \"12,7,99\" the sample continues")                    \
    X(WORD, "-prompt-text", prompt_text, "", "output", "text the sample continues (needs -tokenizer)")        \
    X(I64, "-eval-every", eval_every, 0, "output", "cloze evaluation every N steps (0: off)")                 \
    X(PATH, "-eval-file", eval_file, "", "output", "cloze set (.jsonl)")                                      \
    X(PATH, "-dump-logits", dump_logits, "", "output", "tests: the logits of the first val micro-batch")      \
    X(F64, "-peak", peak_tflops, 0.0, "output", "peak TFLOP/s for MFU (0: the device table)")                 \
    X(INT, "-threads", threads, 0, "output", "OpenMP threads (0: the default)")                               \
    X(INT, "-keep", keep, 0, "run", "keep the newest N checkpoints (0: all)")                                 \
    X(BOOL, "-ckpt-async", ckpt_async, 0, "run", "write checkpoints in the background (stall: a copy)")       \
    X(F64, "-mtbf-hours", mtbf_hours, 6300.0, "run", "-plan: one node's mean time between failures, h")       \
    X(BOOL, "-overwrite", overwrite, 0, "run", "a fresh run may replace -o's checkpoints")                    \
    X(BOOL, "-allow-data-change", allow_data_change, 0, "run", "-resume may change seed, shuffle or shards")  \
    X(F64, "-skip-spikes", skip_spikes, 0.0, "guards", "skip updates above mean + Z sd (0: non-finite only)") \
    X(INT, "-spike-window", spike_window, 100, "guards", "steps in the spike guard's window")                 \
    X(INT, "-spike-stop", spike_stop, 5, "guards", "stop after this many skips in a row")                     \
    X(INT, "-max-rewinds", max_rewinds, 3, "guards", "-on-spike rewind: stop after this many rewinds")        \
    X(WORD, "-skip-data", skip_data, "", "guards", "\"AT:N,...\": pass over N samples at run sample AT")      \
    X(F64, "-noise-beta", noise_beta, 0.99, "guards", "EMA decay of the gradient noise scale")

// -h lines of the flags parsed by hand: X(flag and syntax, help group, what, default)
#define CONFIG_SPECIAL_FLAGS(X)                                                                                 \
    X("-model tiny|125m|350m|1.3b|6.7b|530b", "model", "a preset for -L -H -heads -seq", "tiny")                \
    X("-recompute 0|selective|full", "layout", "activation recomputation (1 = full)", "0")                      \
    X("-ramp S I TOKENS | off | auto S I", "recipe", "batch ramp: start, increment, over TOKENS", "32 32 12e9") \
    X("-lr X|auto", "recipe", "peak learning rate", "5e-05")                                                    \
    X("-steps N", "recipe", "stop after N steps (0: evaluate once; -1: until -tokens)", "-1")                   \
    X("-seed N", "output", "random seed", "1337")                                                               \
    X("-on-spike skip | rewind N", "guards",                                                                    \
      "a skipped step: skip it, or reload the last checkpoint and pass "                                        \
      "over N batches",                                                                                         \
      "skip")                                                                                                   \
    X("-resume", "run", "continue from the newest complete checkpoint in -o", "off")                            \
    X("-timeout S|auto|0", "run", "step watchdog, seconds (1..1e8; 0: off)", "auto")                            \
    X("-check [-world N]", "modes", "validate flags, model and layout for N ranks, then exit", "off")           \
    X("-plan", "modes", "the layout planner (flags below)", "off")                                              \
    X("-h", "modes", "this help", "")

#define CFG_SET_INT(f, d) (f) = (d)
#define CFG_SET_BOOL(f, d) (f) = (d)
#define CFG_SET_I64(f, d) (f) = (d)
#define CFG_SET_F64(f, d) (f) = (d)
#define CFG_SET_WORD(f, d) snprintf((f), sizeof(f), "%s", (d))
#define CFG_SET_PATH(f, d) snprintf((f), sizeof(f), "%s", (d))

static void config_defaults(Config* c) {
    memset(c, 0, sizeof(*c));
#define CFG_DEFAULT(KIND, flag, field, def, group, what) CFG_SET_##KIND(c->field, def);
    CONFIG_FLAGS(CFG_DEFAULT)
#undef CFG_DEFAULT
    // the flags parsed by hand; the recipe is MT-NLG 530B's (doc/spec.md section 2)
    strcpy(c->model, "tiny");
    c->recompute = RECOMPUTE_NONE;
    c->ramp_start = 32;
    c->ramp_inc = 32;
    c->ramp_tokens = 12000000000LL;
    c->lr = 5.0e-5;
    c->max_steps = -1;
    c->seed = 1337;
    c->timeout = -1;
}

// in 64 bits; a result beyond int range is clamped (validation then refuses it)
static int round_up(int x, int m) {
    int64_t r = (((int64_t)x + m - 1) / m) * m;
    return r > 2147483647LL ? 2147483647 : (int)r;
}

// ---------------------------------------------------------------------------------------
// parsing

// a decimal number as typed: digits, one sign, '.', an exponent; no blanks (strtod would skip
// them), no hex, inf or nan (strtod would take them)
static int is_decimal(const char* s) {
    if (s == NULL || *s == '\0') return 0;
    for (const char* p = s; *p; p++)
        if (!isdigit((unsigned char)*p) && strchr("+-.eE", *p) == NULL) return 0;
    return 1;
}

// integers as integers (strtoll: every int64 exact); scientific notation for round numbers
// (12e9, 1.5e6) only below 2^53, where every integer is a double exactly
static int parse_i64(const char* s, int64_t* out) {
    if (!is_decimal(s)) return 0;
    char* end;
    errno = 0;
    long long i = strtoll(s, &end, 10);
    if (*end == '\0') {
        if (errno == ERANGE) return 0;
        *out = (int64_t)i;
        return 1;
    }
    errno = 0;
    double d = strtod(s, &end);
    if (*end != '\0' || !isfinite(d) || errno == ERANGE || d != floor(d) || fabs(d) >= 9007199254740992.0) return 0;
    *out = (int64_t)d;
    return 1;
}
static int parse_int(const char* s, int* out) {
    int64_t v;
    if (!parse_i64(s, &v) || v > 2147483647LL || v < -2147483647LL) return 0;
    *out = (int)v;
    return 1;
}
// a finite double; a value that underflows (1e-400 would become 0) is refused
static int parse_f64(const char* s, double* out) {
    if (!is_decimal(s)) return 0;
    char* end;
    errno = 0;
    double d = strtod(s, &end);
    if (*end != '\0' || !isfinite(d) || errno == ERANGE) return 0;
    *out = d;
    return 1;
}

static int apply_preset(Config* c, const char* name) {
    for (int i = 0; i < NUM_MODEL_PRESETS; i++) {
        if (strcmp(MODEL_PRESETS[i].name, name) == 0) {
            snprintf(c->model, sizeof(c->model), "%s", name);
            c->L = MODEL_PRESETS[i].L;
            c->H = MODEL_PRESETS[i].H;
            c->heads = MODEL_PRESETS[i].heads;
            c->seq = MODEL_PRESETS[i].seq;
            return 1;
        }
    }
    return 0;
}

// one value of a table flag; 1 ok, 0 bad (err filled)
static int cfg_bad(const char* f, const char* v, char* err) {
    snprintf(err, CFG_ERR_LEN, "bad value '%s' for %s", v, f);
    return 0;
}
static int cfg_parse_INT(const char* f, const char* v, int* out, char* err) {
    return parse_int(v, out) ? 1 : cfg_bad(f, v, err);
}
static int cfg_parse_BOOL(const char* f, const char* v, int* out, char* err) { return cfg_parse_INT(f, v, out, err); }
static int cfg_parse_I64(const char* f, const char* v, int64_t* out, char* err) {
    return parse_i64(v, out) ? 1 : cfg_bad(f, v, err);
}
static int cfg_parse_F64(const char* f, const char* v, double* out, char* err) {
    return parse_f64(v, out) ? 1 : cfg_bad(f, v, err);
}
// An empty value ('' from an unset shell variable: -o "$OUT") is refused for every word and path,
// so a run never goes on without what the flag was meant to give it. -j '' alone is a value: no
// validation data.
static int cfg_empty(const char* f, const char* v, char* err) {
    if (v[0] != '\0' || strcmp(f, "-j") == 0) return 0;
    snprintf(err, CFG_ERR_LEN, "%s has an empty value (an unset shell variable?): give it a value, or leave %s out", f,
             f);
    return 1;
}

// a word is never truncated either
static int cfg_parse_WORD(const char* f, const char* v, char* out, size_t n, char* err) {
    if (cfg_empty(f, v, err)) return 0;
    if (strlen(v) >= n) {
        snprintf(err, CFG_ERR_LEN, "value for %s is %zu characters; the limit is %d", f, strlen(v), (int)n - 1);
        return 0;
    }
    snprintf(out, n, "%s", v);
    return 1;
}
// a path: never truncated, and a value that looks like a flag (-o -resume) is an error
static int cfg_parse_PATH(const char* f, const char* v, char* out, size_t n, char* err) {
    if (cfg_empty(f, v, err)) return 0;
    if (strlen(v) >= n) {
        snprintf(err, CFG_ERR_LEN, "path for %s is %zu characters; the limit is %d", f, strlen(v), (int)n - 1);
        return 0;
    }
    if (v[0] == '-') {
        snprintf(err, CFG_ERR_LEN,
                 "%s needs a path, got '%s' (a flag?); write ./%s for a file whose name starts with '-'", f, v, v);
        return 0;
    }
    snprintf(out, n, "%s", v);
    return 1;
}
#define CFG_ARG_INT(x) &(x)
#define CFG_ARG_BOOL(x) &(x)
#define CFG_ARG_I64(x) &(x)
#define CFG_ARG_F64(x) &(x)
#define CFG_ARG_WORD(x) (x), sizeof(x)
#define CFG_ARG_PATH(x) (x), sizeof(x)

// Called for flags this file does not know (the planner's cluster flags). Returns 1 if
// consumed (using *i to step over values), 0 if unknown, -1 on a bad value (err filled).
typedef int (*ExtraFlagFn)(void* user, int argc, char** argv, int* i, char* err);

// the flags with a syntax of their own: 1 consumed (*i stepped over its values), 0 not one
// of them, -1 bad value (err filled)
static int config_parse_special(Config* c, int argc, char** argv, int* i, char* err) {
    const char* f = argv[*i];
    const char* v = (*i + 1 < argc) ? argv[*i + 1] : NULL;
    int need = 0; // values the flag takes
    if (strcmp(f, "-h") == 0 || strcmp(f, "--help") == 0)
        c->help = 1;
    else if (strcmp(f, "-plan") == 0)
        c->plan = 1;
    else if (strcmp(f, "-check") == 0)
        c->check = 1;
    else if (strcmp(f, "-resume") == 0)
        c->resume = 1;
    else if (strcmp(f, "-model") == 0 || strcmp(f, "-world") == 0 || strcmp(f, "-recompute") == 0 ||
             strcmp(f, "-lr") == 0 || strcmp(f, "-steps") == 0 || strcmp(f, "-timeout") == 0 || strcmp(f, "-seed") == 0)
        need = 1;
    else if (strcmp(f, "-ramp") == 0)
        need = (v != NULL && strcmp(v, "off") == 0) ? 1 : 3;
    else if (strcmp(f, "-on-spike") == 0)
        need = (v != NULL && strcmp(v, "rewind") == 0) ? 2 : 1;
    else
        return 0;
    if (*i + need >= argc) {
        snprintf(err, CFG_ERR_LEN, "flag %s needs %d value(s)", f, need);
        return -1;
    }
    int ok = 1;
    if (strcmp(f, "-world") == 0) {
        ok = parse_int(v, &c->world) && c->world >= 1 && c->world <= CFG_MAX_RANKS;
    } else if (strcmp(f, "-recompute") == 0) { // 0 | selective | full (1 = full, the older spelling)
        if (strcmp(v, "0") == 0 || strcmp(v, "none") == 0)
            c->recompute = RECOMPUTE_NONE;
        else if (strcmp(v, "1") == 0 || strcmp(v, "full") == 0)
            c->recompute = RECOMPUTE_FULL;
        else if (strcmp(v, "selective") == 0)
            c->recompute = RECOMPUTE_SELECTIVE;
        else {
            snprintf(err, CFG_ERR_LEN, "bad value '%s' for -recompute: want 0, selective or full (1 = full)", v);
            return -1;
        }
    } else if (strcmp(f, "-lr") == 0) {
        c->lr_auto = strcmp(v, "auto") == 0;
        if (!c->lr_auto) ok = parse_f64(v, &c->lr);
    } else if (strcmp(f, "-steps") == 0) { // -1: no step limit; 0 or below -1 is an error
        ok = parse_i64(v, &c->max_steps) && (c->max_steps >= 0 || c->max_steps == -1);
    } else if (strcmp(f, "-timeout") == 0) {
        if (strcmp(v, "auto") == 0)
            c->timeout = -1;
        else
            ok = parse_f64(v, &c->timeout) && (c->timeout == 0 || (c->timeout >= 1 && c->timeout <= 1e8));
    } else if (strcmp(f, "-seed") == 0) {
        int64_t s;
        ok = parse_i64(v, &s) && s >= 0;
        if (ok) c->seed = (uint64_t)s;
    } else if (strcmp(f, "-on-spike") == 0) { // skip | rewind N
        c->rewind_batches = 0;
        if (need == 2 &&
            (!parse_i64(argv[*i + 2], &c->rewind_batches) || c->rewind_batches < 1 || c->rewind_batches > 1000000)) {
            snprintf(err, CFG_ERR_LEN,
                     "bad value for -on-spike rewind: want N batches from 1 to 1e6 (-on-spike "
                     "rewind 200)");
            return -1;
        }
        if (need == 1 && strcmp(v, "skip") != 0) {
            snprintf(err, CFG_ERR_LEN, "bad value '%s' for -on-spike: want skip or rewind N", v);
            return -1;
        }
    } else if (strcmp(f, "-ramp") == 0 && need == 1) {
        c->ramp_start = 0;
        c->ramp_inc = 0;
        c->ramp_tokens = 0;
        c->ramp_auto = 0;
    } else if (strcmp(f, "-ramp") == 0 && strcmp(v, "auto") == 0) {
        if (!parse_i64(argv[*i + 2], &c->ramp_start) || !parse_i64(argv[*i + 3], &c->ramp_inc) || c->ramp_start <= 0 ||
            c->ramp_inc <= 0) {
            snprintf(err, CFG_ERR_LEN,
                     "bad value for -ramp auto: want positive START INCREMENT (for example -ramp auto 32 32)");
            return -1;
        }
        c->ramp_auto = 1;
        c->ramp_tokens = 0;
    } else if (strcmp(f, "-ramp") == 0) {
        c->ramp_auto = 0;
        if (!parse_i64(argv[*i + 1], &c->ramp_start) || !parse_i64(argv[*i + 2], &c->ramp_inc) ||
            !parse_i64(argv[*i + 3], &c->ramp_tokens) || c->ramp_start <= 0 || c->ramp_inc <= 0 ||
            c->ramp_tokens <= 0) {
            snprintf(err, CFG_ERR_LEN,
                     "bad value for -ramp: want positive START INCREMENT TOKENS (for example -ramp 32 32 12e9) or "
                     "-ramp off");
            return -1;
        }
    } // -model: applied before the other flags (config_parse)
    if (!ok) {
        cfg_bad(f, v, err);
        return -1;
    }
    *i += need;
    return 1;
}

// -skip-data "AT:N,AT:N": the ranges into at/n (CFG_MAX_SKIPS each); how many, or -1 (err)
static int config_skip_ranges(const char* s, int64_t* at, int64_t* n, char* err) {
    int k = 0;
    char buf[CFG_PATH_LEN];
    snprintf(buf, sizeof(buf), "%s", s);
    size_t len = strlen(s);
    if (len > 0 && (s[0] == ',' || s[len - 1] == ',' || strstr(s, ",,") != NULL)) {
        snprintf(err, CFG_ERR_LEN, "bad -skip-data '%s': an empty range between commas", s);
        return -1;
    }
    for (char* save = NULL;;) {
        char* tok = strtok_r(k == 0 && save == NULL ? buf : NULL, ",", &save);
        if (tok == NULL) break;
        char* colon = strchr(tok, ':');
        if (k == CFG_MAX_SKIPS || colon == NULL) {
            snprintf(err, CFG_ERR_LEN,
                     "bad -skip-data '%s': want up to %d ranges AT:N (run sample, samples), "
                     "comma-separated, in order",
                     s, CFG_MAX_SKIPS);
            return -1;
        }
        *colon = '\0';
        if (!parse_i64(tok, &at[k]) || !parse_i64(colon + 1, &n[k]) || at[k] < 0 || n[k] < 1 ||
            n[k] > ((int64_t)1 << 40) || (k > 0 && at[k] <= at[k - 1])) {
            snprintf(err, CFG_ERR_LEN,
                     "bad -skip-data '%s': want up to %d ranges AT:N (run sample, samples), "
                     "comma-separated, AT increasing",
                     s, CFG_MAX_SKIPS);
            return -1;
        }
        k++;
    }
    return k;
}

// bits of the layout flags in argv (-tp -pp -dp -mb -recompute -zero -sp -vpp -pp-schedule -cp, in
// this order: bit k is flag k, autolayout.h's AL_* values): under -layout auto these are pinned and
// the rest searched
static int config_layout_pins(int argc, char** argv) {
    static const char* flags[10] = {"-tp",   "-pp", "-dp",  "-mb",          "-recompute",
                                    "-zero", "-sp", "-vpp", "-pp-schedule", "-cp"};
    int bits = 0;
    for (int i = 1; i < argc; i++)
        for (int k = 0; k < 10; k++)
            if (strcmp(argv[i], flags[k]) == 0) bits |= 1 << k;
    return bits;
}

// Optimal string alignment distance: insertions, deletions, substitutions and swaps of
// neighbours, one each ("-modle" is 1 from "-model"); 99 for long strings
static int cfg_edit_distance(const char* a, const char* b) {
    int n = (int)strlen(a), m = (int)strlen(b);
    if (n > 40 || m > 40) return 99;
    int d[41][41];
    for (int i = 0; i <= n; i++) d[i][0] = i;
    for (int j = 0; j <= m; j++) d[0][j] = j;
    for (int i = 1; i <= n; i++) {
        for (int j = 1; j <= m; j++) {
            int v = d[i - 1][j - 1] + (a[i - 1] != b[j - 1]);
            if (d[i - 1][j] + 1 < v) v = d[i - 1][j] + 1;
            if (d[i][j - 1] + 1 < v) v = d[i][j - 1] + 1;
            if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1] && d[i - 2][j - 2] + 1 < v)
                v = d[i - 2][j - 2] + 1;
            d[i][j] = v;
        }
    }
    return d[n][m];
}

// "did you mean": name as a candidate for f, keeping the nearest and how many tie with it
static void cfg_consider(const char* f, const char* name, const char** best, int* bd, int* ties) {
    int e = cfg_edit_distance(f, name);
    if (e == *bd) (*ties)++;
    if (e < *bd) {
        *bd = e;
        *best = name;
        *ties = 0;
    }
}

// the flag of the table or of CONFIG_SPECIAL_FLAGS nearest to f, when it is near (1 edit for flags
// of up to 4 characters, 2 above) and no other is as near; else NULL
static const char* config_suggest(const char* f) {
    static const char* special[] = {"-model",  "-recompute", "-ramp",  "-lr",    "-steps", "-seed", "-on-spike",
                                    "-resume", "-timeout",   "-check", "-world", "-plan",  "-h"};
    const char* best = NULL;
    int bd = 99;
    int ties = 0;
    for (size_t k = 0; k < sizeof(special) / sizeof(special[0]); k++) cfg_consider(f, special[k], &best, &bd, &ties);
#define CFG_SUGGEST(KIND, flag, field, def, group, what) cfg_consider(f, flag, &best, &bd, &ties);
    CONFIG_FLAGS(CFG_SUGGEST)
#undef CFG_SUGGEST
    int len = (int)strlen(f);
    if (best == NULL || ties > 0 || bd == 0 || bd > (len <= 4 ? 1 : 2)) return NULL;
    return best;
}

// returns 0 ok, 1 error (message in err)
static int config_parse(Config* c, int argc, char** argv, ExtraFlagFn extra, void* user, char* err) {
    err[0] = '\0';
    c->layout_pins |= config_layout_pins(argc, argv); // a resume parses the record, then this line: both pin
    // the preset is applied first so that explicit shape flags override it wherever they are
    for (int i = 1; i < argc - 1; i++) {
        if (strcmp(argv[i], "-model") == 0) {
            if (!apply_preset(c, argv[i + 1])) {
                snprintf(err, CFG_ERR_LEN,
                         "unknown model '%s' (choose tiny, 125m, 350m, 1.3b, 6.7b, 530b or give -L -H -heads -seq)",
                         argv[i + 1]);
                return 1;
            }
        }
    }
    for (int i = 1; i < argc; i++) {
        const char* f = argv[i];
        const char* v = (i + 1 < argc) ? argv[i + 1] : NULL;
#define CFG_PARSE(KIND, flag, field, def, group, what)                        \
    if (strcmp(f, flag) == 0) {                                               \
        if (v == NULL) {                                                      \
            snprintf(err, CFG_ERR_LEN, "flag %s needs 1 value(s)", f);        \
            return 1;                                                         \
        }                                                                     \
        if (!cfg_parse_##KIND(f, v, CFG_ARG_##KIND(c->field), err)) return 1; \
        i++;                                                                  \
        continue;                                                             \
    }
        CONFIG_FLAGS(CFG_PARSE)
#undef CFG_PARSE
        int r = config_parse_special(c, argc, argv, &i, err);
        if (r < 0) return 1;
        if (r > 0) continue;
        if (extra != NULL) {
            r = extra(user, argc, argv, &i, err);
            if (r == 1) continue;
            if (r < 0) return 1;
        }
        const char* near = config_suggest(f);
        if (near != NULL)
            snprintf(err, CFG_ERR_LEN, "unknown flag '%s': did you mean %s? (run with -h for the list)", f, near);
        else
            snprintf(err, CFG_ERR_LEN, "unknown flag '%s' (run with -h for the list)", f);
        return 1;
    }
    if (c->vpad > 0) c->Vp = round_up(c->V, c->vpad);
    return 0;
}

// ---------------------------------------------------------------------------------------
// validation: model shape and recipe, independent of the world size

// -pp-schedule zb-h1: the backward split into B and W (llmc/host/layout.h's pipe_zb_h1)
static int config_zb(const Config* c) { return strcmp(c->pp_schedule, "zb-h1") == 0; }
// -grad-reduce bf16: the DP reductions of gradients in bf16 (zero.h's ZeroComm.bf16)
static int config_grad_bf16(const Config* c) { return strcmp(c->grad_reduce, "bf16") == 0; }

static int config_validate(Config* c, char* err) {
#define FAIL(...)                                \
    do {                                         \
        snprintf(err, CFG_ERR_LEN, __VA_ARGS__); \
        return 1;                                \
    } while (0)
    if (c->L <= 0 || c->H <= 0 || c->heads <= 0 || c->seq <= 0 || c->V <= 0 || c->vpad <= 0)
        FAIL("model sizes must be positive (L=%d H=%d heads=%d seq=%d V=%d vpad=%d)", c->L, c->H, c->heads, c->seq,
             c->V, c->vpad);
    if (c->L > CFG_MAX_L || c->H > CFG_MAX_H || c->seq > CFG_MAX_SEQ || c->vpad > CFG_MAX_VPAD || c->mb > CFG_MAX_MB)
        FAIL("model size beyond the limits (L <= %d, H <= %d, seq <= %d, vpad <= %d, mb <= %d)", CFG_MAX_L, CFG_MAX_H,
             CFG_MAX_SEQ, CFG_MAX_VPAD, CFG_MAX_MB);
    if (c->H % c->heads != 0) FAIL("heads (%d) must divide the hidden size H (%d)", c->heads, c->H);
    if (c->V > 65536) FAIL("V=%d: token shards store uint16 ids, so the vocabulary must be <= 65536", c->V);
    if (c->tp <= 0 || c->pp <= 0 || c->cp <= 0 || c->dp < 0 || c->mb <= 0)
        FAIL("layout sizes must be positive (tp=%d cp=%d pp=%d dp=%d mb=%d)", c->tp, c->cp, c->pp, c->dp, c->mb);
    if (c->tp > CFG_MAX_TP || c->pp > CFG_MAX_PP || c->cp > CFG_MAX_TP ||
        (int64_t)c->tp * c->pp * c->cp * (c->dp > 0 ? c->dp : 1) > CFG_MAX_RANKS)
        FAIL("layout beyond the limits (tp, cp <= %d, pp <= %d, tp*cp*pp*dp <= %lld ranks)", CFG_MAX_TP, CFG_MAX_PP,
             (long long)CFG_MAX_RANKS);
    {
        int64_t Vp = round_up(c->V, c->vpad);
        double params = 12.0 * c->L * (double)c->H * c->H + (double)Vp * c->H + (double)c->seq * c->H;
        if (params > (double)CFG_MAX_PARAMS)
            FAIL("the model has %.3g parameters, beyond the limit of %.3g", params, (double)CFG_MAX_PARAMS);
    }
#define CFG_CHECK_INT(flag, x)
#define CFG_CHECK_I64(flag, x)
#define CFG_CHECK_F64(flag, x)
#define CFG_CHECK_WORD(flag, x)
#define CFG_CHECK_PATH(flag, x)
#define CFG_CHECK_BOOL(flag, x) \
    if ((x) != 0 && (x) != 1) FAIL("%s takes 0 or 1", flag);
#define CFG_CHECK(KIND, flag, field, def, group, what) CFG_CHECK_##KIND(flag, c->field)
    CONFIG_FLAGS(CFG_CHECK)
#undef CFG_CHECK
    if (c->recompute < RECOMPUTE_NONE || c->recompute > RECOMPUTE_SELECTIVE)
        FAIL("-recompute takes 0, selective or full");
    if (c->vpp < 1) FAIL("-vpp must be >= 1 (1: plain 1F1B)");
    if (c->zero < 0 || c->zero > 3)
        FAIL("-zero %d: give 0 (off), 1 (optimizer state sharded), 2 (and gradients) or 3 (and weights)", c->zero);
    if (c->cp > 1 && c->ramp_auto)
        FAIL("-ramp auto measures each replica's whole gradient, which -cp %d splits over ranks: use a fixed -ramp",
             c->cp);
    if (c->zero >= 2 && c->ramp_auto)
        FAIL(
            "-ramp auto measures each replica's whole gradient, which -zero %d never holds: use -zero 1 or a fixed "
            "-ramp",
            c->zero);
    if (strcmp(c->comm, "nccl") != 0 && strcmp(c->comm, "mpi") != 0) FAIL("-comm takes nccl or mpi, not '%s'", c->comm);
    if (strcmp(c->grad_reduce, "fp32") != 0 && strcmp(c->grad_reduce, "bf16") != 0)
        FAIL("-grad-reduce takes fp32 or bf16, not '%s'", c->grad_reduce);
    if (config_grad_bf16(c) && c->zero == 0)
        FAIL(
            "-grad-reduce bf16 needs -zero 1, 2 or 3 (the sharded reductions sum in rank order, as the CPU trainer's "
            "bf16 emulation does)");
    if (strcmp(c->pp_schedule, "1f1b") != 0 && strcmp(c->pp_schedule, "interleaved") != 0 &&
        strcmp(c->pp_schedule, "zb-h1") != 0)
        FAIL("bad value '%s' for -pp-schedule: want 1f1b, interleaved or zb-h1", c->pp_schedule);
    if (strcmp(c->pp_schedule, "interleaved") == 0 && c->vpp < 2)
        FAIL("-pp-schedule interleaved needs model chunks: give -vpp >= 2 (-vpp 1 is plain 1F1B)");
    if (c->gb <= 0 || c->gb > CFG_MAX_GB)
        FAIL("-gb must be in 1..%lld (sequences per step), not %lld", (long long)CFG_MAX_GB, (long long)c->gb);
    if (c->ramp_inc != 0) {
        if (c->ramp_start <= 0 || (c->ramp_tokens <= 0 && !c->ramp_auto) || c->ramp_inc < 0)
            FAIL("-ramp START INCREMENT TOKENS must be positive");
        if (c->ramp_start > c->gb)
            FAIL("ramp start batch %lld exceeds the final global batch %lld", (long long)c->ramp_start,
                 (long long)c->gb);
        if ((c->gb - c->ramp_start) % c->ramp_inc != 0)
            FAIL("ramp increment %lld does not divide (global batch %lld - start %lld) exactly", (long long)c->ramp_inc,
                 (long long)c->gb, (long long)c->ramp_start);
        if (c->gb == c->ramp_start) FAIL("ramp start equals the final global batch: use -ramp off");
    }
    if (!c->lr_auto && c->lr < 0) FAIL("-lr must be >= 0");
    if (c->warmup_tokens < 0 || c->decay_tokens < 0) FAIL("-warmup and -decay must be >= 0");
    if (c->decay_tokens < c->warmup_tokens)
        FAIL("-decay (%lld) must be >= -warmup (%lld)", (long long)c->decay_tokens, (long long)c->warmup_tokens);
    if (c->minlr_frac < 0 || c->minlr_frac > 1) FAIL("-minlr-frac must be in [0, 1]");
    if (c->beta1 < 0 || c->beta1 >= 1 || c->beta2 < 0 || c->beta2 >= 1) FAIL("-beta1 and -beta2 must be in [0, 1)");
    if (c->eps <= 0) FAIL("-eps must be positive");
    // the optimizer computes in fp32: a value that rounds to 0, 1 or infinity there is wrong
    if ((float)c->eps <= 0.0f) FAIL("-eps %g underflows to 0 in fp32 (smallest useful value ~1e-38)", c->eps);
    if ((float)c->beta1 >= 1.0f || (float)c->beta2 >= 1.0f)
        FAIL("-beta1 and -beta2 must stay below 1 in fp32 (%g, %g round to 1)", c->beta1, c->beta2);
    if (!isfinite((float)c->lr) || !isfinite((float)c->wd) || !isfinite((float)c->clip) || !isfinite((float)c->eps))
        FAIL("-lr, -wd, -clip and -eps must be finite in fp32");
    if (c->wd < 0) FAIL("-wd must be >= 0");
    if (!(c->init_std_mult > 0) || c->init_std_mult > 1e3) FAIL("-init-std-mult must be in (0, 1000]");
    if (c->clip < 0) FAIL("-clip must be >= 0 (0 turns clipping off)");
    if (c->total_tokens <= 0) FAIL("-tokens must be positive");
    if (c->skip_spikes < 0) FAIL("-skip-spikes must be >= 0 (0: skip only non-finite steps)");
    if (c->max_rewinds < 1 || c->max_rewinds > CFG_MAX_SKIPS)
        FAIL("-max-rewinds must be 1 to %d (each rewind adds a skipped data range to the checkpoint)", CFG_MAX_SKIPS);
    if (c->rewind_batches > 0 && (c->out_dir[0] == '\0' || c->ckpt_every <= 0))
        FAIL("-on-spike rewind needs checkpoints to go back to: -o DIR and -ckpt-every N");
    if (c->rewind_batches > 0 && c->skip_spikes <= 0)
        FAIL("-on-spike rewind acts on the steps the spike guard flags: give -skip-spikes Z (e.g. 4)");
    int64_t sat[CFG_MAX_SKIPS], sn[CFG_MAX_SKIPS];
    if (config_skip_ranges(c->skip_data, sat, sn, err) < 0) return 1;
    if (c->spike_window < 2 || c->spike_window > CFG_MAX_SPIKE_WINDOW || c->spike_stop < 0)
        FAIL("-spike-window must be in 2..%d and -spike-stop >= 0", CFG_MAX_SPIKE_WINDOW);
    if (c->threads < 0 || c->threads > CFG_MAX_THREADS)
        FAIL("-threads must be in 0..%d (0: the default)", CFG_MAX_THREADS);
    if (c->peak_tflops < 0) FAIL("-peak must be >= 0 TFLOP/s (0: from the device table)");
    if (c->ckpt_every > 0 && c->out_dir[0] == '\0') FAIL("-ckpt-every needs -o DIR (where the checkpoints go)");
    if (c->resume && c->out_dir[0] == '\0') FAIL("-resume needs -o DIR (where the checkpoints are)");
    if (c->resume && c->init_from[0] != '\0')
        FAIL(
            "-resume and -init-from exclude each other (resume continues a run; -init-from starts a new one from "
            "weights)");
    if (c->noise_beta < 0 || c->noise_beta >= 1) FAIL("-noise-beta must be in [0, 1)");
    if (c->val_every < 0 || c->val_samples < 0 || c->ckpt_every < 0 || c->sample_every < 0 || c->sample_len < 0)
        FAIL("-val-every, -val-samples, -ckpt-every, -sample-every and -sample-len must be >= 0");
    if (c->keep < 0) FAIL("-keep must be >= 0 (0 keeps every checkpoint)");
    if (!(c->mtbf_hours > 0 && c->mtbf_hours <= 1e9)) FAIL("-mtbf-hours must be above 0 and at most 1e9 (hours)");
    if (c->eval_every < 0) FAIL("-eval-every must be >= 0");
    if (c->eval_every > 0 && c->eval_file[0] == '\0')
        FAIL("-eval-every needs -eval-file FILE (a cloze .jsonl: dev/eval/make_cloze.py)");
    if (strcmp(c->layout, "manual") != 0 && strcmp(c->layout, "auto") != 0)
        FAIL("bad value '%s' for -layout: want manual or auto", c->layout);
    if (c->blend_file[0] != '\0' && strcmp(c->train_glob, CFG_DEFAULT_TRAIN) != 0)
        FAIL("-blend %s and -i %s both name the training data: give one", c->blend_file, c->train_glob);
    if (c->dump_logits[0] != '\0' && c->max_steps != 0)
        FAIL("-dump-logits runs with -steps 0 (it evaluates the loaded weights)");
    if (c->prompt[0] != '\0' && c->prompt_text[0] != '\0')
        FAIL("-prompt and -prompt-text exclude each other (token ids, or text to encode): give one");
    if (c->prompt_text[0] != '\0' && c->tokenizer[0] == '\0')
        FAIL("-prompt-text needs -tokenizer FILE.bin (the FILE.json beside it encodes the text)");
    if (c->sample_every > 0 && c->sample_len >= c->seq)
        FAIL("-sample-len (%d) must be below the sequence length (%d)", c->sample_len, c->seq);
#undef FAIL
    c->Vp = round_up(c->V, c->vpad);
    return 0;
}

// Layout constraints of doc/spec.md section 3, checked up front for the whole ramp.
static int config_validate_layout(const Config* c, int world, char* err) {
#define FAIL(...)                                \
    do {                                         \
        snprintf(err, CFG_ERR_LEN, __VA_ARGS__); \
        return 1;                                \
    } while (0)
    int dp = c->dp;
    int64_t tpp = (int64_t)c->tp * c->pp * c->cp; // 64 bits: tp*cp*pp may exceed int (SIGFPE on a wrapped 0)
    if (world <= 0 || tpp <= 0) FAIL("world size %d and tp*cp*pp = %lld must be positive", world, (long long)tpp);
    if (dp > 0 && tpp * dp != world) // all given: the launch must match them exactly
        FAIL(
            "-tp %d -cp %d -pp %d -dp %d need exactly %lld ranks, not %d: launch with mpirun -np %lld (or check the "
            "layout with -check -world %lld)",
            c->tp, c->cp, c->pp, dp, (long long)(tpp * dp), world, (long long)(tpp * dp), (long long)(tpp * dp));
    if (world % tpp != 0)
        FAIL("world size %d is not a multiple of tp*cp*pp = %d*%d*%d: launch a multiple of %lld ranks (mpirun -np N)",
             world, c->tp, c->cp, c->pp, (long long)tpp);
    if (dp == 0) dp = (int)(world / tpp);
    if (tpp * dp != world)
        FAIL("world size %d != tp*cp*pp*dp = %d*%d*%d*%d: launch tp*cp*pp*dp ranks (mpirun -np %lld)", world, c->tp,
             c->cp, c->pp, dp, (long long)(tpp * dp));
    if (c->cp > 1 && c->seq % (2 * c->cp) != 0)
        FAIL(
            "-cp %d: the sequence (%d) must split into 2*cp = %d equal chunks (each rank takes two, for the causal "
            "load balance): choose -seq or -cp so",
            c->cp, c->seq, 2 * c->cp);
    {
        // a rank's rows are seq/cp: checked with the layout, so that -plan and -layout auto can search -cp first
        int64_t Vp = round_up(c->V, c->vpad), wide = 4 * (int64_t)c->H > Vp ? 4 * (int64_t)c->H : Vp;
        int64_t n = (int64_t)c->mb * (c->seq / c->cp) * wide;
        if (n > CFG_MAX_TENSOR)
            FAIL(
                "micro-batch activations of mb*(seq/cp)*max(4H, Vp) = %lld elements exceed the limit %lld: lower -mb "
                "or -seq, or raise -cp",
                (long long)n, (long long)CFG_MAX_TENSOR);
    }
    if (c->heads % c->tp != 0) FAIL("tp=%d must divide the number of heads (%d)", c->tp, c->heads);
    if ((4 * c->H) % c->tp != 0) FAIL("tp=%d must divide 4H (%d)", c->tp, 4 * c->H);
    if (c->Vp % c->tp != 0) FAIL("tp=%d must divide the padded vocabulary (%d): change -vpad", c->tp, c->Vp);
    if (c->L % c->pp != 0) FAIL("pp=%d must divide the number of layers (%d)", c->pp, c->L);
    if (c->sp && (c->seq / c->cp) % c->tp != 0)
        FAIL("-sp 1: tp=%d must divide the sequence length per context-parallel rank (%d)", c->tp, c->seq / c->cp);
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
            FAIL(
                "-vpp %d: every global batch (final %lld, ramp start %lld, increment %lld) must give a multiple of "
                "pp=%d micro-batches, i.e. be divisible by micro-batch*dp*pp = %lld",
                c->vpp, (long long)c->gb, (long long)c->ramp_start, (long long)c->ramp_inc, c->pp, (long long)unit_pp);
    }
#undef FAIL
    return 0;
}

// -h: every flag with its default, by group (the table and CONFIG_SPECIAL_FLAGS), then the
// planner's flags
static void config_help_row(FILE* out, const char* flag, const char* value, const char* what, const char* def) {
    char lhs[64];
    snprintf(lhs, sizeof(lhs), "%s %s", flag, value);
    fprintf(out, "  %-36s %s%s%s%s\n", lhs, what, def[0] ? " [" : "", def, def[0] ? "]" : "");
}
#define CFG_HELP_VALUE_INT "N"
#define CFG_HELP_VALUE_I64 "N"
#define CFG_HELP_VALUE_F64 "X"
#define CFG_HELP_VALUE_BOOL "0/1"
#define CFG_HELP_VALUE_WORD "WORD"
#define CFG_HELP_VALUE_PATH "PATH"
#define CFG_HELP_DEF_INT(d, buf) snprintf(buf, sizeof(buf), "%d", (int)(d))
#define CFG_HELP_DEF_BOOL(d, buf) snprintf(buf, sizeof(buf), "%d", (int)(d))
#define CFG_HELP_DEF_I64(d, buf) snprintf(buf, sizeof(buf), "%lld", (long long)(d))
#define CFG_HELP_DEF_F64(d, buf) snprintf(buf, sizeof(buf), "%g", (double)(d))
#define CFG_HELP_DEF_WORD(d, buf) snprintf(buf, sizeof(buf), "%s", (d)[0] ? (d) : "none")
#define CFG_HELP_DEF_PATH(d, buf) snprintf(buf, sizeof(buf), "%s", (d)[0] ? (d) : "none")

static void config_print_help(FILE* out) {
    static const char* groups[] = {"model", "layout", "recipe", "data", "output", "run", "guards", "modes"};
    fprintf(out, "usage: train_gpt [flags]      (mpirun -np N train_gpt ... for 3D layouts)\n");
    for (size_t g = 0; g < sizeof(groups) / sizeof(groups[0]); g++) {
        fprintf(out, "%s:\n", groups[g]);
        char def[64];
#define CFG_HELP_SPECIAL(syntax, group, what, dflt) \
    if (strcmp(group, groups[g]) == 0) config_help_row(out, syntax, "", what, dflt);
        CONFIG_SPECIAL_FLAGS(CFG_HELP_SPECIAL)
#undef CFG_HELP_SPECIAL
#define CFG_HELP(KIND, flag, field, dflt, group, what)                \
    if (strcmp(group, groups[g]) == 0) {                              \
        CFG_HELP_DEF_##KIND(dflt, def);                               \
        config_help_row(out, flag, CFG_HELP_VALUE_##KIND, what, def); \
    }
        CONFIG_FLAGS(CFG_HELP)
#undef CFG_HELP
    }
    fprintf(
        out,
        "planner: -plan -cluster selene-a100|h100|h200 -nodes N [-scaling N1,N2,..] [-plan-csv FILE] [-plan-top K]\n"
        "         cluster overrides: -gpus-per-node -peak -gpu-mem -bw-hbm -bw-intra -bw-inter -latency "
        "-latency-intra -fs-bw -d2h-bw\n"
        "         model constants: -plan-eff -plan-net-eff -plan-hbm-eff -plan-workspace -plan-headroom -plan-w-share\n"
        "         schedules: -plan-schedule 1f1b,interleaved,zb-h1|any (searched) -plan-schedules 1 (compare them)\n");
}

#endif // LLMC_CONFIG_H
