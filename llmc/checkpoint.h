/*
 * checkpoint.h: the checkpoint format (version 1) and its atomic writing.
 *
 * A checkpoint is a directory DIR/ckpt_SSSSSSSS (S = optimizer steps completed) holding
 * one file per rank, rank_RRRRR.bin, and an empty DONE marker written last, after every
 * rank's file is complete. Each file is written to NAME.tmp, flushed, fsync'ed and then
 * renamed, so a crash leaves either no file or a whole one; resume only ever considers
 * directories with DONE, so a half-written checkpoint is never picked.
 *
 * File: a header of 128 little-endian int64 (CkptField below; unused entries 0), then
 * the payload: weights float32[n_params] (the rank's fp32 master weights, its whole
 * local flat buffer in the parameter-table order of params.h; n_params may be 0 for a
 * data-parallel replica whose weights another rank saves), then the AdamW moments
 * m float32[n_opt] and v float32[n_opt], which cover local flat-buffer elements
 * [opt_off, opt_off + n_opt) (the whole buffer without ZeRO; the rank's shard with it).
 * checksum = FNV-1a 64 over all payload bytes. The bf16 working weights of the CUDA
 * trainer are not stored: they are the round-to-nearest of the master weights.
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
#include "utils.h"

#define CKPT_MAGIC 20261202
#define CKPT_VERSION 1
#define CKPT_HEADER_INTS 128

typedef enum {
    CK_MAGIC, CK_VERSION,
    CK_L, CK_H, CK_HEADS, CK_SEQ, CK_V, CK_VP,       // model shape
    CK_TP, CK_PP, CK_DP, CK_ZERO,                    // layout that wrote it
    CK_TP_RANK, CK_PP_RANK, CK_DP_RANK, CK_RANK,     // this file's rank
    CK_STEP, CK_TOKENS, CK_SAMPLES, CK_ADAM_T,       // progress: steps, tokens, data position, AdamW t
    CK_SEED, CK_RNG,                                 // run seed, sampler RNG state
    CK_N_PARAMS, CK_OPT_OFF, CK_N_OPT,               // payload sizes (float32 counts)
    CK_CHECKSUM,                                     // FNV-1a 64 of the payload
    CK_SCALED_INIT,
    CK_AUTO_GB,                                      // -ramp auto: current global batch (0: not used)
    CK_NOISE_G2M, CK_NOISE_SM, CK_NOISE_BETAPOW,     // noise-scale EMA state (double bits)
    CK_NOISE_N,
    CK_NUM_FIELDS
} CkptField;

typedef struct { int64_t h[CKPT_HEADER_INTS]; } CkptHeader;

static void ckpt_dir_name(char* out, size_t n, const char* base, int64_t step) {
    snprintf(out, n, "%s/ckpt_%08lld", base, (long long)step);
}
static void ckpt_rank_path(char* out, size_t n, const char* dir, int rank) {
    snprintf(out, n, "%s/rank_%05d.bin", dir, rank);
}

static int mkdir_p(const char* path) {
    char tmp[1024];
    snprintf(tmp, sizeof(tmp), "%s", path);
    for (char* p = tmp + 1; *p; p++) {
        if (*p == '/') { *p = 0; if (mkdir(tmp, 0755) != 0 && errno != EEXIST) return -1; *p = '/'; }
    }
    if (mkdir(tmp, 0755) != 0 && errno != EEXIST) return -1;
    return 0;
}

static int write_all(FILE* f, const void* p, size_t bytes) {
    return bytes == 0 || fwrite(p, 1, bytes, f) == bytes;
}

// Writes one rank's file atomically. Returns 0 on success, -1 (with a message) on failure;
// on failure nothing is renamed, so the previous checkpoint is untouched.
static int ckpt_write_rank(const char* dir, int rank, CkptHeader* hdr,
                           const float* params, size_t n_params,
                           const float* m, const float* v, size_t opt_off, size_t n_opt) {
    if (mkdir_p(dir) != 0) { fprintf(stderr, "error: cannot create checkpoint directory %s: %s\n", dir, strerror(errno)); return -1; }
    char path[1100], tmp[1110];
    ckpt_rank_path(path, sizeof(path), dir, rank);
    snprintf(tmp, sizeof(tmp), "%s.tmp", path);
    uint64_t h = FNV1A64_INIT;
    h = fnv1a64(h, params, n_params * sizeof(float));
    h = fnv1a64(h, m, n_opt * sizeof(float));
    h = fnv1a64(h, v, n_opt * sizeof(float));
    hdr->h[CK_MAGIC] = CKPT_MAGIC; hdr->h[CK_VERSION] = CKPT_VERSION;
    hdr->h[CK_N_PARAMS] = (int64_t)n_params; hdr->h[CK_OPT_OFF] = (int64_t)opt_off; hdr->h[CK_N_OPT] = (int64_t)n_opt;
    memcpy(&hdr->h[CK_CHECKSUM], &h, sizeof(h));
    FILE* f = fopen(tmp, "wb");
    if (f == NULL) { fprintf(stderr, "error: cannot write checkpoint file %s: %s\n", tmp, strerror(errno)); return -1; }
    int ok = write_all(f, hdr->h, sizeof(hdr->h)) && write_all(f, params, n_params * sizeof(float)) &&
             write_all(f, m, n_opt * sizeof(float)) && write_all(f, v, n_opt * sizeof(float));
    ok = ok && fflush(f) == 0 && fsync(fileno(f)) == 0;
    if (fclose(f) != 0) ok = 0;
    if (!ok || rename(tmp, path) != 0) {
        fprintf(stderr, "error: writing checkpoint file %s failed (%s); the previous checkpoint is intact\n", path, strerror(errno));
        unlink(tmp);
        return -1;
    }
    return 0;
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

// Reads and checks a rank file's header. Returns 0, or -1 with a message in err.
static int ckpt_read_header(const char* path, CkptHeader* hdr, char* err, size_t errn) {
    FILE* f = fopen(path, "rb");
    if (f == NULL) { snprintf(err, errn, "cannot open checkpoint file %s", path); return -1; }
    size_t got = fread(hdr->h, sizeof(int64_t), CKPT_HEADER_INTS, f);
    fseek(f, 0, SEEK_END);
    long size = ftell(f);
    fclose(f);
    if (got != CKPT_HEADER_INTS) { snprintf(err, errn, "checkpoint file %s is truncated (no complete header)", path); return -1; }
    if (hdr->h[CK_MAGIC] != CKPT_MAGIC) { snprintf(err, errn, "%s is not a checkpoint file (bad magic)", path); return -1; }
    if (hdr->h[CK_VERSION] != CKPT_VERSION) {
        snprintf(err, errn, "checkpoint %s has format version %lld; this build reads version %d", path, (long long)hdr->h[CK_VERSION], CKPT_VERSION);
        return -1;
    }
    // sizes are range-checked before any arithmetic (a forged header overflowed here)
    if (hdr->h[CK_N_PARAMS] < 0 || hdr->h[CK_N_PARAMS] > (1LL << 40) || hdr->h[CK_N_OPT] < 0 || hdr->h[CK_N_OPT] > (1LL << 40)) {
        snprintf(err, errn, "checkpoint file %s is corrupt (payload sizes %lld, %lld out of range)", path, (long long)hdr->h[CK_N_PARAMS], (long long)hdr->h[CK_N_OPT]);
        return -1;
    }
    long want = (long)(sizeof(hdr->h) + 4 * (hdr->h[CK_N_PARAMS] + 2 * hdr->h[CK_N_OPT]));
    if (size != want) { snprintf(err, errn, "checkpoint file %s is truncated or corrupt (%ld bytes, header implies %ld)", path, size, want); return -1; }
    return 0;
}

// Reads a rank file's payload into caller buffers sized from its header, checking the
// checksum. Returns 0, or -1 with a message in err.
static int ckpt_read_payload(const char* path, const CkptHeader* hdr, float* params, float* m, float* v, char* err, size_t errn) {
    FILE* f = fopen(path, "rb");
    if (f == NULL) { snprintf(err, errn, "cannot open checkpoint file %s", path); return -1; }
    size_t np = (size_t)hdr->h[CK_N_PARAMS], no = (size_t)hdr->h[CK_N_OPT];
    fseek(f, sizeof(hdr->h), SEEK_SET);
    int ok = fread(params, sizeof(float), np, f) == np && fread(m, sizeof(float), no, f) == no &&
             fread(v, sizeof(float), no, f) == no;
    fclose(f);
    if (!ok) { snprintf(err, errn, "checkpoint file %s is truncated", path); return -1; }
    uint64_t h = FNV1A64_INIT, want;
    h = fnv1a64(h, params, np * sizeof(float));
    h = fnv1a64(h, m, no * sizeof(float));
    h = fnv1a64(h, v, no * sizeof(float));
    memcpy(&want, &hdr->h[CK_CHECKSUM], sizeof(want));
    if (h != want) { snprintf(err, errn, "checkpoint file %s is corrupt (checksum mismatch)", path); return -1; }
    return 0;
}

#endif // LLMC_CHECKPOINT_H
