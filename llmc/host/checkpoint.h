/*
 * checkpoint.h: the checkpoint format (version 2), its validation and its atomic writing.
 *
 * A checkpoint is a directory DIR/ckpt_SSSSSSSS (S = optimizer steps completed) holding
 * one file per rank, rank_RRRRR.bin, and an empty DONE marker. A save builds the whole
 * directory under a fresh temporary name (ckpt_SSSSSSSS.tmp), each file written to
 * NAME.tmp, fsync'ed and renamed, then DONE, and only then renames the directory into
 * place; so a crash or a full disk leaves either the previous state or a whole new
 * checkpoint, never a DONE directory that mixes files of two saves (ckpt_rank.h).
 *
 * File: a header of 128 little-endian int64 (CkptField below; unused entries 0), then
 * the payload: weights float32[n_params] (the rank's fp32 master weights, its whole
 * local flat buffer in the parameter-table order of params.h; n_params may be 0 for a
 * data-parallel replica whose weights another rank saves), then the AdamW moments
 * m float32[n_opt] and v float32[n_opt], which cover local flat-buffer elements
 * [opt_off, opt_off + n_opt) (the whole buffer without ZeRO; the rank's shard with it).
 * checksum = FNV-1a 64 over the header bytes (with the checksum entry 0) and then every
 * payload byte, so a flipped bit anywhere in the file is caught. Version 1 (checksum
 * over the payload only) is refused: its step, tokens and data position cannot be
 * trusted. Every header field is range-checked (ckpt_header_validate) before any is used
 * to size or index anything. The bf16 working weights of the CUDA trainer are not
 * stored: they are the round-to-nearest of the master weights.
 */
#ifndef LLMC_CHECKPOINT_H
#define LLMC_CHECKPOINT_H

#include <dirent.h>
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <unistd.h>
#include "layout.h"
#include "utils.h"

#define CKPT_MAGIC 20261202
#define CKPT_VERSION 2
#define CKPT_HEADER_INTS 128
#define CKPT_MAX_SKIPS 8 // data ranges a run may skip (-on-spike rewind, -skip-data; config.h's CFG_MAX_SKIPS)

typedef enum {
    CK_MAGIC,
    CK_VERSION,
    CK_L,
    CK_H,
    CK_HEADS,
    CK_SEQ,
    CK_V,
    CK_VP, // model shape
    CK_TP,
    CK_PP,
    CK_DP,
    CK_ZERO, // layout that wrote it
    CK_TP_RANK,
    CK_PP_RANK,
    CK_DP_RANK,
    CK_RANK, // this file's rank
    CK_STEP,
    CK_TOKENS,
    CK_SAMPLES,
    CK_ADAM_T, // progress: steps, tokens, data position, AdamW t
    CK_SEED,
    CK_RNG, // run seed, sampler RNG state
    CK_N_PARAMS,
    CK_OPT_OFF,
    CK_N_OPT,    // payload sizes (float32 counts)
    CK_CHECKSUM, // FNV-1a 64 of the payload
    CK_SCALED_INIT,
    CK_AUTO_GB, // -ramp auto: current global batch (0: not used)
    CK_NOISE_G2M,
    CK_NOISE_SM,
    CK_NOISE_BETAPOW, // noise-scale EMA state (double bits)
    CK_NOISE_N,
    CK_SHUFFLE,
    CK_DATA_HASH, // run identity: data order (with CK_SEED)
    CK_LR,
    CK_BETA1,
    CK_BETA2,
    CK_EPS,
    CK_WD,
    CK_CLIP, // recipe when saved (double bits): changes are logged
    CK_VPP,  // model chunks per rank that wrote it (0 = 1)
    CK_WARMUP,
    CK_DECAY,
    CK_MINLR_FRAC,
    CK_GB,
    CK_RAMP_START,
    CK_RAMP_INC,
    CK_RAMP_TOKENS,
    CK_RAMP_AUTO,
    CK_TOTAL_TOKENS, // the LR and batch schedule when saved (double bits): changes are logged
    CK_SKIP_COUNT,   // data ranges skipped by -on-spike rewind (or -skip-data): how many, then
    CK_SKIP_FIRST,   // (at, n) pairs: at run sample `at`, n stream samples are passed over
    CK_SKIP_LAST = CK_SKIP_FIRST + 2 * CKPT_MAX_SKIPS - 1,
    CK_NUM_FIELDS
} CkptField;

typedef struct {
    int64_t h[CKPT_HEADER_INTS];
} CkptHeader;

static void ckpt_dir_name(char* out, size_t n, const char* base, int64_t step) {
    snprintf(out, n, "%s/ckpt_%08lld", base, (long long)step);
}
// The step a checkpoint directory's name claims (.../ckpt_NNNNNNNN), or -1 for another name
static int64_t ckpt_name_step(const char* dir) {
    size_t len = strlen(dir);
    while (len > 1 && dir[len - 1] == '/') len--;
    size_t b = len;
    while (b > 0 && dir[b - 1] != '/') b--;
    char name[64];
    if (len - b >= sizeof(name)) return -1;
    memcpy(name, dir + b, len - b);
    name[len - b] = '\0';
    long long s;
    char rest[8];
    if (sscanf(name, "ckpt_%lld%7s", &s, rest) != 1 || s < 0) return -1;
    return s;
}
static void ckpt_rank_path(char* out, size_t n, const char* dir, int rank) {
    snprintf(out, n, "%s/rank_%05d.bin", dir, rank);
}

static int mkdir_p(const char* path) {
    char tmp[1024];
    snprintf(tmp, sizeof(tmp), "%s", path);
    for (char* p = tmp + 1; *p; p++) {
        if (*p == '/') {
            *p = 0;
            if (mkdir(tmp, 0755) != 0 && errno != EEXIST) return -1;
            *p = '/';
        }
    }
    if (mkdir(tmp, 0755) != 0 && errno != EEXIST) return -1;
    return 0;
}

static int write_all(FILE* f, const void* p, size_t bytes) { return bytes == 0 || fwrite(p, 1, bytes, f) == bytes; }

// Writes one rank's file atomically: header (payload sizes and checksum filled in here), then
// the payload, fsync'ed, renamed into place. Returns 0, or -1 with the reason in err (nothing
// printed: the background writer of ckpt_async.h reports it from the main thread); on failure
// nothing is renamed, so the previous checkpoint is untouched. The one file writer of both the
// synchronous and the background save, so their files are the same bytes.
static int ckpt_write_file(const char* dir, int rank, CkptHeader* hdr, const float* params, size_t n_params,
                           const float* m, const float* v, size_t opt_off, size_t n_opt, char* err, size_t errn) {
    if (mkdir_p(dir) != 0) {
        snprintf(err, errn, "cannot create checkpoint directory %s: %s", dir, strerror(errno));
        return -1;
    }
    char path[1100], tmp[1110];
    ckpt_rank_path(path, sizeof(path), dir, rank);
    snprintf(tmp, sizeof(tmp), "%s.tmp", path);
    hdr->h[CK_MAGIC] = CKPT_MAGIC;
    hdr->h[CK_VERSION] = CKPT_VERSION;
    hdr->h[CK_N_PARAMS] = (int64_t)n_params;
    hdr->h[CK_OPT_OFF] = (int64_t)opt_off;
    hdr->h[CK_N_OPT] = (int64_t)n_opt;
    hdr->h[CK_CHECKSUM] = 0;
    uint64_t h = fnv1a64(FNV1A64_INIT, hdr->h, sizeof(hdr->h));
    h = fnv1a64(h, params, n_params * sizeof(float));
    h = fnv1a64(h, m, n_opt * sizeof(float));
    h = fnv1a64(h, v, n_opt * sizeof(float));
    memcpy(&hdr->h[CK_CHECKSUM], &h, sizeof(h));
    FILE* f = fopen(tmp, "wb");
    if (f == NULL) {
        snprintf(err, errn, "cannot write checkpoint file %s: %s", tmp, strerror(errno));
        return -1;
    }
    int ok = write_all(f, hdr->h, sizeof(hdr->h));
    ok = ok && write_all(f, params, n_params * sizeof(float));
    ok = ok && write_all(f, m, n_opt * sizeof(float));
    ok = ok && write_all(f, v, n_opt * sizeof(float));
    ok = ok && fflush(f) == 0 && fsync(fileno(f)) == 0;
    if (fclose(f) != 0) ok = 0;
    if (!ok || rename(tmp, path) != 0) {
        snprintf(err, errn, "writing checkpoint file %s failed (%s); the previous checkpoint is intact", path,
                 strerror(errno));
        unlink(tmp);
        return -1;
    }
    return 0;
}

// ckpt_write_file with its failure printed as an error line
static int ckpt_write_rank(const char* dir, int rank, CkptHeader* hdr, const float* params, size_t n_params,
                           const float* m, const float* v, size_t opt_off, size_t n_opt) {
    char err[1400];
    if (ckpt_write_file(dir, rank, hdr, params, n_params, m, v, opt_off, n_opt, err, sizeof(err)) == 0) return 0;
    fprintf(stderr, "error: %s\n", err);
    return -1;
}

// The size of a rank's file with these payload sizes (float32 counts)
static int64_t ckpt_file_bytes(size_t n_params, size_t n_opt) {
    return (int64_t)(sizeof(int64_t) * CKPT_HEADER_INTS + sizeof(float) * (n_params + 2 * n_opt));
}

// Marks a checkpoint complete; call once every rank's file is written (after a barrier).
static int ckpt_mark_done(const char* dir) {
    char path[1100], tmp[1110];
    snprintf(path, sizeof(path), "%s/DONE", dir);
    snprintf(tmp, sizeof(tmp), "%s/DONE.tmp", dir);
    FILE* f = fopen(tmp, "wb");
    if (f == NULL || fclose(f) != 0 || rename(tmp, path) != 0) {
        fprintf(stderr, "error: cannot write %s: %s\n", path, strerror(errno));
        return -1;
    }
    return 0;
}

static int ckpt_is_done(const char* dir) {
    char path[1100];
    snprintf(path, sizeof(path), "%s/DONE", dir);
    return access(path, F_OK) == 0;
}

// The latest complete checkpoint under base: its step, or -1 if none (dir filled).
static int64_t ckpt_find_latest(const char* base, char* dir, size_t n) {
    DIR* d = opendir(base);
    if (d == NULL) return -1;
    int64_t best = -1;
    struct dirent* e;
    while ((e = readdir(d)) != NULL) {
        long long s;
        char rest[8];
        if (sscanf(e->d_name, "ckpt_%lld%7s", &s, rest) != 1) continue;
        char cand[1100];
        ckpt_dir_name(cand, sizeof(cand), base, s);
        if (s > best && ckpt_is_done(cand)) best = s;
    }
    closedir(d);
    if (best >= 0) ckpt_dir_name(dir, n, base, best);
    return best;
}

// Every complete checkpoint under base, newest first: fills steps (up to max), returns
// how many there are (ckpt_* directories holding DONE; temporary ones never match).
static int ckpt_list_complete(const char* base, int64_t* steps, int max) {
    DIR* d = opendir(base);
    if (d == NULL) return 0;
    int n = 0;
    struct dirent* e;
    while ((e = readdir(d)) != NULL) {
        long long s;
        char rest[8], cand[1100];
        if (sscanf(e->d_name, "ckpt_%lld%7s", &s, rest) != 1 || s < 0) continue;
        ckpt_dir_name(cand, sizeof(cand), base, s);
        if (!ckpt_is_done(cand)) continue;
        int k = n < max ? n : max; // insert into the newest `max` so far, newest first
        int b = k;
        while (b > 0 && steps[b - 1] < s) b--;
        if (b < max) {
            for (int a = (k < max ? k : max - 1); a > b; a--) steps[a] = steps[a - 1];
            steps[b] = s;
        }
        n++;
    }
    closedir(d);
    return n;
}

// Removes a directory of plain files (a checkpoint directory has no subdirectories).
static int ckpt_remove_dir(const char* dir) {
    DIR* d = opendir(dir);
    if (d == NULL) return errno == ENOENT ? 0 : -1;
    struct dirent* e;
    char p[1400];
    int rc = 0;
    while ((e = readdir(d)) != NULL) {
        if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0) continue;
        snprintf(p, sizeof(p), "%s/%s", dir, e->d_name);
        if (unlink(p) != 0) rc = -1;
    }
    closedir(d);
    if (rmdir(dir) != 0) rc = -1;
    return rc;
}

// FNV-1a 64 of a header with its checksum entry taken as 0 (the start of the file checksum)
static uint64_t ckpt_header_sum(const CkptHeader* hdr) {
    CkptHeader c = *hdr;
    c.h[CK_CHECKSUM] = 0;
    return fnv1a64(FNV1A64_INIT, c.h, sizeof(c.h));
}

// Limits on what a header may claim: far above any real model, low enough that every
// size below fits in 64 bits and every division has a nonzero divisor.
#define CKPT_MAX_DIM (1LL << 24)
#define CKPT_MAX_RANKS (1LL << 20)
#define CKPT_MAX_BATCH (1LL << 40)

// a * b + c, saturating at INT64_MAX (a, b, c >= 0): bounds computed from forged header fields
static int64_t ckpt_muladd_sat(int64_t a, int64_t b, int64_t c) {
    int64_t r;
    if (__builtin_mul_overflow(a, b, &r) || __builtin_add_overflow(r, c, &r)) return INT64_MAX;
    return r;
}

#define CKPT_MAX_SKIP_SAMPLES ((int64_t)1 << 40) // stream samples one skipped range may pass over

// The skipped data ranges a checkpoint at run sample `samples` may hold, checked by its reader
// (ckpt_header_validate) and its writer (ckpt_skips_for_save) alike, so every checkpoint the
// trainer writes loads: at most CKPT_MAX_SKIPS, in strictly increasing order of `at`, each already
// reached (at <= samples: a range ahead of the run is the command line's, -skip-data), each of 1 to
// 2^40 stream samples. 0, or -1 with the bad range in err.
static int ckpt_skips_check(int n, const int64_t* at, const int64_t* cnt, int64_t samples, char* err, size_t errn) {
    if (n < 0 || n > CKPT_MAX_SKIPS) {
        snprintf(err, errn, "skipped data ranges %d (at most %d)", n, CKPT_MAX_SKIPS);
        return -1;
    }
    for (int i = 0; i < n; i++) {
        if (at[i] < 0 || at[i] > samples || cnt[i] < 1 || cnt[i] > CKPT_MAX_SKIP_SAMPLES ||
            (i > 0 && at[i] <= at[i - 1])) {
            snprintf(err, errn, "skipped data range %d (at %lld, %lld samples; run sample %lld)", i, (long long)at[i],
                     (long long)cnt[i], (long long)samples);
            return -1;
        }
    }
    return 0;
}

// Adds the range (a, c) to a list sorted by `at` (*k ranges; room for CKPT_MAX_SKIPS): a range at
// the same `at` grows by c (grow = 1: a second rewind to the same checkpoint passes over more) or
// keeps the larger count (grow = 0: one range from two records). 0, or -1 when the list is full.
static int ckpt_skips_add(int* k, int64_t* at, int64_t* cnt, int64_t a, int64_t c, int grow) {
    int i = 0;
    while (i < *k && at[i] < a) i++;
    if (i < *k && at[i] == a) {
        cnt[i] = grow ? cnt[i] + c : (c > cnt[i] ? c : cnt[i]);
        return 0;
    }
    if (*k == CKPT_MAX_SKIPS) return -1;
    for (int j = *k; j > i; j--) {
        at[j] = at[j - 1];
        cnt[j] = cnt[j - 1];
    }
    at[i] = a;
    cnt[i] = c;
    (*k)++;
    return 0;
}

// The ranges of a run's list (sorted) a checkpoint at run sample `samples` holds: those reached.
// Returns how many went to out_at/out_n, or -1 (err) if they would not load (ckpt_skips_check).
static int ckpt_skips_for_save(int n, const int64_t* at, const int64_t* cnt, int64_t samples, int64_t* out_at,
                               int64_t* out_n, char* err, size_t errn) {
    int k = 0;
    for (int i = 0; i < n && i < CKPT_MAX_SKIPS; i++) {
        if (at[i] > samples) continue; // ahead of the run: -skip-data gives it again on resume
        out_at[k] = at[i];
        out_n[k++] = cnt[i];
    }
    return ckpt_skips_check(k, out_at, out_n, samples, err, errn) == 0 ? k : -1;
}

// Range and internal consistency of every field a loader uses, before any is used.
// file_size: the file's length in bytes (the payload sizes must match it exactly).
static int ckpt_header_validate(const CkptHeader* hdr, const char* path, int64_t file_size, char* err, size_t errn) {
    const int64_t* h = hdr->h;
#define CKBAD(...)                                                                        \
    do {                                                                                  \
        int n_ = snprintf(err, errn, "checkpoint file %s has an invalid header: ", path); \
        if (n_ >= 0 && (size_t)n_ < errn) {                                               \
            snprintf(err + n_, errn - n_, __VA_ARGS__);                                   \
        }                                                                                 \
        return -1;                                                                        \
    } while (0)
    if (h[CK_L] < 1 || h[CK_L] > 4096 || h[CK_H] < 1 || h[CK_H] > CKPT_MAX_DIM || h[CK_HEADS] < 1 ||
        h[CK_HEADS] > h[CK_H] || h[CK_SEQ] < 1 || h[CK_SEQ] > CKPT_MAX_DIM || h[CK_V] < 1 || h[CK_V] > 65536 ||
        h[CK_VP] < h[CK_V] || h[CK_VP] > CKPT_MAX_DIM)
        CKBAD("model shape out of range (L=%lld H=%lld heads=%lld seq=%lld V=%lld Vp=%lld)", (long long)h[CK_L],
              (long long)h[CK_H], (long long)h[CK_HEADS], (long long)h[CK_SEQ], (long long)h[CK_V],
              (long long)h[CK_VP]);
    if (h[CK_H] % h[CK_HEADS] != 0)
        CKBAD("heads=%lld do not divide H=%lld", (long long)h[CK_HEADS], (long long)h[CK_H]);
    if (h[CK_TP] < 1 || h[CK_PP] < 1 || h[CK_DP] < 1 || h[CK_TP] > CKPT_MAX_RANKS || h[CK_PP] > CKPT_MAX_RANKS ||
        h[CK_DP] > CKPT_MAX_RANKS || h[CK_TP] * h[CK_PP] * h[CK_DP] > CKPT_MAX_RANKS)
        CKBAD("layout out of range (tp=%lld pp=%lld dp=%lld)", (long long)h[CK_TP], (long long)h[CK_PP],
              (long long)h[CK_DP]);
    if (h[CK_HEADS] % h[CK_TP] != 0 || (4 * h[CK_H]) % h[CK_TP] != 0 || h[CK_VP] % h[CK_TP] != 0 ||
        h[CK_L] % h[CK_PP] != 0)
        CKBAD("layout tp=%lld pp=%lld does not fit the model", (long long)h[CK_TP], (long long)h[CK_PP]);
    if (h[CK_ZERO] != 0 && h[CK_ZERO] != 1) CKBAD("zero=%lld", (long long)h[CK_ZERO]);
    if (h[CK_SCALED_INIT] != 0 && h[CK_SCALED_INIT] != 1) CKBAD("scaled_init=%lld", (long long)h[CK_SCALED_INIT]);
    if (h[CK_SHUFFLE] != 0 && h[CK_SHUFFLE] != 1) CKBAD("shuffle=%lld", (long long)h[CK_SHUFFLE]);
    if (h[CK_TP_RANK] < 0 || h[CK_TP_RANK] >= h[CK_TP] || h[CK_PP_RANK] < 0 || h[CK_PP_RANK] >= h[CK_PP] ||
        h[CK_DP_RANK] < 0 || h[CK_DP_RANK] >= h[CK_DP] ||
        h[CK_RANK] !=
            layout_rank((int)h[CK_TP_RANK], (int)h[CK_DP_RANK], (int)h[CK_PP_RANK], (int)h[CK_TP], (int)h[CK_DP]))
        CKBAD("rank %lld (tp %lld, pp %lld, dp %lld) is not a rank of layout tp=%lld pp=%lld dp=%lld",
              (long long)h[CK_RANK], (long long)h[CK_TP_RANK], (long long)h[CK_PP_RANK], (long long)h[CK_DP_RANK],
              (long long)h[CK_TP], (long long)h[CK_PP], (long long)h[CK_DP]);
    if (h[CK_STEP] < 0 || h[CK_TOKENS] < 0 || h[CK_SAMPLES] < 0 || h[CK_ADAM_T] < 0 || h[CK_ADAM_T] > h[CK_STEP] ||
        h[CK_SAMPLES] > (INT64_MAX / h[CK_SEQ]) || h[CK_TOKENS] != h[CK_SAMPLES] * h[CK_SEQ] ||
        (h[CK_STEP] == 0) != (h[CK_SAMPLES] == 0))
        CKBAD("inconsistent progress (step=%lld tokens=%lld samples=%lld adam_t=%lld)", (long long)h[CK_STEP],
              (long long)h[CK_TOKENS], (long long)h[CK_SAMPLES], (long long)h[CK_ADAM_T]);
    if (h[CK_AUTO_GB] < 0 || h[CK_AUTO_GB] > CKPT_MAX_BATCH || h[CK_NOISE_N] < 0)
        CKBAD("auto_gb=%lld noise_n=%lld", (long long)h[CK_AUTO_GB], (long long)h[CK_NOISE_N]);
    if (h[CK_SKIP_COUNT] < 0 || h[CK_SKIP_COUNT] > CKPT_MAX_SKIPS)
        CKBAD("skipped data ranges %lld (at most %d)", (long long)h[CK_SKIP_COUNT], CKPT_MAX_SKIPS);
    {
        int64_t at[CKPT_MAX_SKIPS], cnt[CKPT_MAX_SKIPS];
        for (int i = 0; i < CKPT_MAX_SKIPS; i++) { // unused pairs zero
            at[i] = h[CK_SKIP_FIRST + 2 * i];
            cnt[i] = h[CK_SKIP_FIRST + 2 * i + 1];
            if (i >= h[CK_SKIP_COUNT] && (at[i] != 0 || cnt[i] != 0))
                CKBAD("unused skipped data range %d (at %lld, %lld samples)", i, (long long)at[i], (long long)cnt[i]);
        }
        char why[160];
        if (ckpt_skips_check((int)h[CK_SKIP_COUNT], at, cnt, h[CK_SAMPLES], why, sizeof(why)) != 0) CKBAD("%s", why);
    }
    // the payload this rank's layout implies (params.h's sizes from the validated shape)
    // a bound on any rank's payload: the whole model (exact per-rank sizes: reshard.h)
    int64_t C = h[CK_H];
    int64_t per_layer = 12 * C * C + 13 * C; // C <= 2^24: fits
    int64_t bound = ckpt_muladd_sat(h[CK_L], per_layer, ckpt_muladd_sat(h[CK_VP] + h[CK_SEQ], C, 2 * C));
    if (h[CK_N_PARAMS] != 0 && (h[CK_N_PARAMS] < 0 || h[CK_N_PARAMS] > bound))
        CKBAD("n_params=%lld (at most %lld for this shape and layout)", (long long)h[CK_N_PARAMS], (long long)bound);
    if (h[CK_N_OPT] < 0 || h[CK_OPT_OFF] < 0 || h[CK_N_OPT] > bound || h[CK_OPT_OFF] > bound - h[CK_N_OPT])
        CKBAD("optimizer range [%lld, +%lld) out of bounds", (long long)h[CK_OPT_OFF], (long long)h[CK_N_OPT]);
    if (h[CK_N_PARAMS] > 0 && h[CK_DP_RANK] != 0)
        CKBAD("a data-parallel replica (dp %lld) holds weights", (long long)h[CK_DP_RANK]);
    if (!h[CK_ZERO] && h[CK_N_OPT] > 0 && (h[CK_OPT_OFF] != 0 || h[CK_N_OPT] != h[CK_N_PARAMS]))
        CKBAD("moments [%lld, +%lld) without ZeRO must cover the weights (%lld)", (long long)h[CK_OPT_OFF],
              (long long)h[CK_N_OPT], (long long)h[CK_N_PARAMS]);
    // a payload larger than the file cannot match it (and its size could overflow below)
    int64_t payload = file_size - (int64_t)sizeof(hdr->h);
    if (payload < 0 || h[CK_N_PARAMS] > payload / 4 || h[CK_N_OPT] > payload / 8) {
        snprintf(err, errn,
                 "checkpoint file %s is truncated or corrupt (%lld bytes, header claims n_params=%lld n_opt=%lld)",
                 path, (long long)file_size, (long long)h[CK_N_PARAMS], (long long)h[CK_N_OPT]);
        return -1;
    }
    int64_t want = (int64_t)sizeof(hdr->h) + 4 * (h[CK_N_PARAMS] + 2 * h[CK_N_OPT]);
    if (file_size != want) {
        snprintf(err, errn, "checkpoint file %s is truncated or corrupt (%lld bytes, header implies %lld)", path,
                 (long long)file_size, (long long)want);
        return -1;
    }
#undef CKBAD
    return 0;
}

// Reads a rank file's header and checks magic, version and every field's range against
// the file (ckpt_header_validate). The checksum is checked by whoever streams the
// payload (reshard.h). Returns 0, or -1 with a message in err.
static int ckpt_read_header(const char* path, CkptHeader* hdr, char* err, size_t errn) {
    struct stat st;
    if (stat(path, &st) != 0) {
        snprintf(err, errn, "cannot open checkpoint file %s: %s", path, strerror(errno));
        return -1;
    }
    if (!S_ISREG(st.st_mode)) {
        snprintf(err, errn, "checkpoint file %s is not a regular file", path);
        return -1;
    }
    FILE* f = fopen(path, "rb");
    if (f == NULL) {
        snprintf(err, errn, "cannot open checkpoint file %s: %s", path, strerror(errno));
        return -1;
    }
    size_t got = fread(hdr->h, sizeof(int64_t), CKPT_HEADER_INTS, f);
    fclose(f);
    if (got != CKPT_HEADER_INTS) {
        snprintf(err, errn, "checkpoint file %s is truncated (no complete header)", path);
        return -1;
    }
    if (hdr->h[CK_MAGIC] != CKPT_MAGIC) {
        snprintf(err, errn, "%s is not a checkpoint file (bad magic)", path);
        return -1;
    }
    if (hdr->h[CK_VERSION] != CKPT_VERSION) {
        snprintf(err, errn, "checkpoint %s has format version %lld; this build reads version %d only%s", path,
                 (long long)hdr->h[CK_VERSION], CKPT_VERSION,
                 hdr->h[CK_VERSION] == 1
                     ? " (version 1 headers are not covered by the checksum; resume with the build that wrote it)"
                     : "");
        return -1;
    }
    return ckpt_header_validate(hdr, path, (int64_t)st.st_size, err, errn);
}

#endif // LLMC_CHECKPOINT_H
