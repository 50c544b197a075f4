/*
 * reshard.h: reads a whole checkpoint (every rank file of one ckpt_* directory) as a set
 * and assembles any tensor, one layer at a time, in its full unsliced shape. This is how
 * every checkpoint is loaded: a rank gathers the full layer of each tensor it holds and
 * keeps its own slice, so resuming in the same layout and in a different one (TP, PP, DP
 * and ZeRO all free to change) is one code path. Same layout: a pure copy, bit-identical.
 * Memory: one layer of one tensor at a time (at most 4H*H floats), never the whole model.
 */
#ifndef LLMC_RESHARD_H
#define LLMC_RESHARD_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "checkpoint.h"
#include "dirlist.h"
#include "params.h"
#include "utils.h"

typedef struct {
    int nfiles;
    char** paths;
    CkptHeader* hdr;   // (nfiles)
    ParamLayout* pl;   // (nfiles) the writing rank's parameter layout
} CkptSet;

static void ckpt_set_close(CkptSet* s) {
    for (int i = 0; i < s->nfiles; i++) free(s->paths[i]);
    free(s->paths); free(s->hdr); free(s->pl);
    memset(s, 0, sizeof(*s));
}

// The header fields a layout is built from, range- and consistency-checked before use
// (a forged TP/PP of 0 divided by zero, a TP rank >= TP indexed past a buffer; found by
// dev/fuzz/fuzz_ckpt.c). 0, or -1 with a message in err.
static int ckpt_header_layout_ok(const CkptHeader* hd, const char* path, char* err, size_t errn) {
    const int64_t* h = hd->h;
    int ok = h[CK_L] >= 1 && h[CK_L] <= 4096 && h[CK_H] >= 1 && h[CK_H] <= 131072 && h[CK_HEADS] >= 1 && h[CK_HEADS] <= h[CK_H] &&
             h[CK_H] % h[CK_HEADS] == 0 && h[CK_SEQ] >= 1 && h[CK_SEQ] <= 1048576 && h[CK_V] >= 1 && h[CK_V] <= 65536 &&
             h[CK_VP] >= h[CK_V] && h[CK_VP] <= 131072 &&
             h[CK_TP] >= 1 && h[CK_TP] <= 65536 && h[CK_PP] >= 1 && h[CK_PP] <= 65536 && h[CK_DP] >= 1 && h[CK_DP] <= 16777216 &&
             h[CK_HEADS] % h[CK_TP] == 0 && h[CK_VP] % h[CK_TP] == 0 && h[CK_L] % h[CK_PP] == 0 &&
             h[CK_TP_RANK] >= 0 && h[CK_TP_RANK] < h[CK_TP] && h[CK_PP_RANK] >= 0 && h[CK_PP_RANK] < h[CK_PP] &&
             h[CK_DP_RANK] >= 0 && h[CK_DP_RANK] < h[CK_DP];
    if (!ok) { snprintf(err, errn, "checkpoint file %s is corrupt (model or layout fields out of range)", path); return -1; }
    return 0;
}

// Opens every rank file of a checkpoint directory, checks headers, completeness and
// checksums. Returns 0, or -1 with a message in err.
static int ckpt_set_open(CkptSet* s, const char* dir, char* err, size_t errn) {
    memset(s, 0, sizeof(*s));
    // never glob(): the directory is a user path (-o, -init-from) that may hold [ or *
    int nf = dir_list_files(dir, "rank_", ".bin", &s->paths);
    if (nf <= 0) {
        snprintf(err, errn, "no checkpoint files in %s", dir);
        return -1;
    }
    s->nfiles = nf;
    s->hdr = (CkptHeader*)calloc_check(s->nfiles, sizeof(CkptHeader));
    s->pl = (ParamLayout*)calloc_check(s->nfiles, sizeof(ParamLayout));
    for (int i = 0; i < s->nfiles; i++) {
        CkptHeader* h = &s->hdr[i];
        if (ckpt_read_header(s->paths[i], h, err, errn) != 0) return -1;
        const CkptHeader* h0 = &s->hdr[0];
        for (int f = CK_L; f <= CK_ZERO; f++) {
            if (h->h[f] != h0->h[f]) { snprintf(err, errn, "checkpoint %s mixes files of different runs (%s vs %s)", dir, s->paths[0], s->paths[i]); return -1; }
        }
        if (h->h[CK_STEP] != h0->h[CK_STEP] || h->h[CK_TOKENS] != h0->h[CK_TOKENS]) {
            snprintf(err, errn, "checkpoint %s mixes files of different steps", dir);
            return -1;
        }
        if (ckpt_header_layout_ok(h, s->paths[i], err, errn) != 0) return -1;
        param_layout_init(&s->pl[i], (int)h->h[CK_L], (int)h->h[CK_H], (int)h->h[CK_HEADS], (int)h->h[CK_SEQ], (int)h->h[CK_V],
                          (int)h->h[CK_VP], (int)h->h[CK_TP_RANK], (int)h->h[CK_TP], (int)h->h[CK_PP_RANK], (int)h->h[CK_PP]);
        // verify the checksum by streaming the payload
        FILE* f = fopen(s->paths[i], "rb");
        if (f == NULL) { snprintf(err, errn, "cannot open %s", s->paths[i]); return -1; }
        fseek(f, sizeof(h->h), SEEK_SET);
        uint64_t sum = FNV1A64_INIT, want;
        char buf[1 << 16];
        size_t k;
        while ((k = fread(buf, 1, sizeof(buf), f)) > 0) sum = fnv1a64(sum, buf, k);
        fclose(f);
        memcpy(&want, &h->h[CK_CHECKSUM], sizeof(want));
        if (sum != want) { snprintf(err, errn, "checkpoint file %s is corrupt (checksum mismatch)", s->paths[i]); return -1; }
    }
    int64_t world = s->hdr[0].h[CK_TP] * s->hdr[0].h[CK_PP] * s->hdr[0].h[CK_DP];
    if (s->nfiles != world) {
        snprintf(err, errn, "checkpoint %s has %d rank files, its layout (tp=%lld pp=%lld dp=%lld) needs %lld",
                 dir, s->nfiles, (long long)s->hdr[0].h[CK_TP], (long long)s->hdr[0].h[CK_PP], (long long)s->hdr[0].h[CK_DP], (long long)world);
        return -1;
    }
    return 0;
}

// Fills out (full_rows x full_cols) with global layer `layer` of tensor t from section
// 0 (weights), 1 (AdamW m) or 2 (AdamW v). mask: scratch of full_rows*full_cols bytes.
// Returns 0, or -1 (err) if the files do not cover the whole layer.
static int ckpt_set_gather(const CkptSet* s, int t, int layer, int section, float* out, char* mask, char* err, size_t errn) {
    const ParamLayout* p0 = &s->pl[0];
    size_t full = (size_t)p0->full_rows[t] * p0->full_cols[t];
    memset(mask, 0, full);
    size_t filled = 0;
    float* buf = NULL;
    size_t bufn = 0;
    for (int i = 0; i < s->nfiles; i++) {
        const ParamLayout* pl = &s->pl[i];
        const CkptHeader* h = &s->hdr[i];
        if (pl->nl[t] == 0) continue;
        int ll = PARAM_INFO[t].layered ? layer - pl->layer0 : 0;
        if (ll < 0 || ll >= pl->nl[t]) continue;
        size_t per = (size_t)pl->rows[t] * pl->cols[t];
        size_t lo = pl->offset[t] + (size_t)ll * per, hi = lo + per; // local flat range of this layer
        size_t np = (size_t)h->h[CK_N_PARAMS], oo = (size_t)h->h[CK_OPT_OFF], no = (size_t)h->h[CK_N_OPT];
        size_t a, b;
        long fpos;
        if (section == 0) {
            if (np == 0) continue;
            a = lo; b = hi; fpos = (long)(sizeof(h->h) + 4 * a);
        } else {
            a = lo > oo ? lo : oo; b = hi < oo + no ? hi : oo + no;
            if (a >= b) continue;
            fpos = (long)(sizeof(h->h) + 4 * np + (section == 2 ? 4 * no : 0) + 4 * (a - oo));
        }
        if (b - a > bufn) { free(buf); bufn = b - a; buf = (float*)malloc_check(sizeof(float) * bufn); }
        FILE* f = fopen(s->paths[i], "rb");
        if (f == NULL || fseek(f, fpos, SEEK_SET) != 0 || fread(buf, sizeof(float), b - a, f) != b - a) {
            if (f) fclose(f);
            free(buf);
            snprintf(err, errn, "cannot read %s", s->paths[i]);
            return -1;
        }
        fclose(f);
        for (size_t j = a; j < b; j++) {
            int gl, row, col;
            param_full_coords(pl, t, j - pl->offset[t], &gl, &row, &col);
            size_t k = (size_t)row * p0->full_cols[t] + col;
            out[k] = buf[j - a];
            if (!mask[k]) { mask[k] = 1; filled++; }
        }
    }
    free(buf);
    if (filled != full) {
        snprintf(err, errn, "checkpoint does not cover tensor %s layer %d (%zu of %zu elements)", PARAM_INFO[t].name, layer, filled, full);
        return -1;
    }
    return 0;
}

// Loads the slices a rank with layout `pl` holds: weights into params (whole local
// buffer) and, if m and v are not NULL, moments for local elements [opt_off, opt_off+n_opt).
static int ckpt_set_load_local(const CkptSet* s, const ParamLayout* pl, float* params, float* m, float* v,
                               size_t opt_off, size_t n_opt, char* err, size_t errn) {
    size_t maxfull = 0;
    for (int t = 0; t < NUM_PARAM_TENSORS; t++) {
        size_t f = (size_t)pl->full_rows[t] * pl->full_cols[t];
        if (f > maxfull) maxfull = f;
    }
    float* full = (float*)malloc_check(sizeof(float) * maxfull);
    char* mask = (char*)malloc_check(maxfull);
    int rc = 0;
    for (int t = 0; t < NUM_PARAM_TENSORS && rc == 0; t++) {
        size_t per = (size_t)pl->rows[t] * pl->cols[t];
        for (int l = 0; l < pl->nl[t] && rc == 0; l++) {
            int gl = PARAM_INFO[t].layered ? pl->layer0 + l : 0;
            size_t lo = pl->offset[t] + (size_t)l * per;
            for (int section = 0; section < 3 && rc == 0; section++) {
                float* dst = section == 0 ? params : (section == 1 ? m : v);
                if (dst == NULL) continue;
                size_t a = lo, b = lo + per;
                if (section > 0) { if (a < opt_off) a = opt_off; if (b > opt_off + n_opt) b = opt_off + n_opt; }
                if (a >= b) continue;
                if (ckpt_set_gather(s, t, gl, section, full, mask, err, errn) != 0) { rc = -1; break; }
                for (size_t j = a; j < b; j++) {
                    int gl2, row, col;
                    param_full_coords(pl, t, j - pl->offset[t], &gl2, &row, &col);
                    float val = full[(size_t)row * pl->full_cols[t] + col];
                    if (section == 0) dst[j] = val; else dst[j - opt_off] = val;
                }
            }
        }
    }
    free(full); free(mask);
    return rc;
}

#endif // LLMC_RESHARD_H
