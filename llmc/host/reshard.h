/*
 * reshard.h: reads a whole checkpoint (every rank file of one ckpt_* directory) as a set
 * and assembles any tensor, one layer at a time, in its full unsliced shape. This is how
 * every checkpoint is loaded: a rank gathers the full layer of each tensor it holds and
 * keeps its own slice, so resuming in the same layout and in a different one (TP, PP, DP
 * and ZeRO all free to change) is one code path. Same layout: a pure copy, bit-identical.
 * Memory: one layer of one tensor at a time (at most 4H*H floats), never the whole model.
 * Nothing is sized or indexed from a header before checkpoint.h and ckpt_set_open have
 * validated it (ranges, the exact set of rank files, agreement of the run-wide fields).
 */
#ifndef LLMC_RESHARD_H
#define LLMC_RESHARD_H

#include <dirent.h>
#include <unistd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "checkpoint.h"
#include "layout.h"
#include "params.h"
#include "utils.h"

typedef struct {
    int nfiles;
    char** paths;
    CkptHeader* hdr; // (nfiles)
    ParamLayout* pl; // (nfiles) the writing rank's parameter layout
} CkptSet;

static void ckpt_set_close(CkptSet* s) {
    for (int i = 0; i < s->nfiles; i++) free(s->paths[i]);
    free(s->paths);
    free(s->hdr);
    free(s->pl);
    memset(s, 0, sizeof(*s));
}

// header fields that differ between the rank files of one checkpoint; all others are
// run-wide (shape, layout, progress, identity, recipe) and must agree in every file
static int ckpt_field_per_rank(int f) {
    return f == CK_TP_RANK || f == CK_PP_RANK || f == CK_DP_RANK || f == CK_RANK || f == CK_N_PARAMS ||
           f == CK_OPT_OFF || f == CK_N_OPT || f == CK_CHECKSUM;
}

// Opens every rank file of a checkpoint directory: rank_00000.bin's validated header
// gives the layout, which fixes the exact set of files (rank_00000 .. rank_{world-1}, no
// others: a stray file of another layout is an error, not ignored). Each header is
// validated and compared with the first, each file's checksum verified (header and
// payload). Returns 0, or -1 with a message in err. Paths are never globbed.
static int ckpt_set_open(CkptSet* s, const char* dir, char* err, size_t errn) {
    memset(s, 0, sizeof(*s));
    char p0[1100];
    CkptHeader h0;
    ckpt_rank_path(p0, sizeof(p0), dir, 0);
    if (access(p0, F_OK) != 0) {
        snprintf(err, errn, "no checkpoint files in %s (rank_00000.bin missing)", dir);
        return -1;
    }
    if (ckpt_read_header(p0, &h0, err, errn) != 0) return -1;
    int64_t world = h0.h[CK_TP] * h0.h[CK_PP] * h0.h[CK_DP];
    // count rank_*.bin entries: exactly the layout's files must be there
    DIR* d = opendir(dir);
    if (d == NULL) {
        snprintf(err, errn, "cannot read checkpoint directory %s", dir);
        return -1;
    }
    int64_t nrank = 0;
    struct dirent* e;
    while ((e = readdir(d)) != NULL) {
        size_t L = strlen(e->d_name);
        if (strncmp(e->d_name, "rank_", 5) == 0 && L > 9 && strcmp(e->d_name + L - 4, ".bin") == 0) nrank++;
    }
    closedir(d);
    if (nrank != world) {
        snprintf(err, errn, "checkpoint %s has %lld rank files, its layout (tp=%lld pp=%lld dp=%lld) needs %lld", dir,
                 (long long)nrank, (long long)h0.h[CK_TP], (long long)h0.h[CK_PP], (long long)h0.h[CK_DP],
                 (long long)world);
        return -1;
    }
    s->nfiles = (int)world;
    s->paths = (char**)calloc_check(s->nfiles, sizeof(char*));
    s->hdr = (CkptHeader*)calloc_check(s->nfiles, sizeof(CkptHeader));
    s->pl = (ParamLayout*)calloc_check(s->nfiles, sizeof(ParamLayout));
    for (int i = 0; i < s->nfiles; i++) {
        char path[1100];
        ckpt_rank_path(path, sizeof(path), dir, i);
        s->paths[i] = strdup(path);
        if (s->paths[i] == NULL) die("out of memory");
    }
    for (int i = 0; i < s->nfiles; i++) {
        CkptHeader* h = &s->hdr[i];
        if (ckpt_read_header(s->paths[i], h, err, errn) != 0) return -1;
        for (int f = 0; f < CKPT_HEADER_INTS; f++) {
            if (!ckpt_field_per_rank(f) && h->h[f] != h0.h[f]) {
                snprintf(
                    err, errn,
                    "checkpoint %s mixes files of different runs or saves (header entry %d: %s has %lld, %s has %lld)",
                    dir, f, s->paths[0], (long long)h0.h[f], s->paths[i], (long long)h->h[f]);
                return -1;
            }
        }
        if (h->h[CK_RANK] != i) {
            snprintf(err, errn, "checkpoint file %s says it is rank %lld", s->paths[i], (long long)h->h[CK_RANK]);
            return -1;
        }
        param_layout_init(&s->pl[i], (int)h->h[CK_L], (int)h->h[CK_H], (int)h->h[CK_HEADS], (int)h->h[CK_SEQ],
                          (int)h->h[CK_V], (int)h->h[CK_VP], (int)h->h[CK_TP_RANK], (int)h->h[CK_TP],
                          (int)h->h[CK_PP_RANK], (int)h->h[CK_PP]);
        int64_t vpp = h->h[CK_VPP];
        if (vpp < 0 || vpp > s->pl[i].nlayers || (vpp > 1 && s->pl[i].nlayers % vpp != 0)) {
            snprintf(err, errn, "checkpoint file %s has a bad chunk count (vpp %lld for %d layers per stage)",
                     s->paths[i], (long long)vpp, s->pl[i].nlayers);
            return -1;
        }
        param_layout_set_chunks(&s->pl[i], (int)vpp); // 0 (files before -vpp) = 1
        // exact payload sizes of this rank (ckpt_rank.h's save rule)
        int64_t total = (int64_t)s->pl[i].total, want_np = h->h[CK_DP_RANK] == 0 ? total : 0;
        int64_t want_off = 0, want_no = h->h[CK_DP_RANK] == 0 ? total : 0;
        if (h->h[CK_ZERO]) {
            size_t o, c;
            zero_shard((size_t)total, (int)h->h[CK_DP], (int)h->h[CK_DP_RANK], &o, &c);
            want_off = (int64_t)o;
            want_no = (int64_t)c;
        }
        if (h->h[CK_N_PARAMS] != want_np || h->h[CK_N_OPT] != want_no ||
            (want_no > 0 && h->h[CK_OPT_OFF] != want_off)) {
            snprintf(err, errn,
                     "checkpoint file %s has an invalid header: payload (n_params=%lld opt=[%lld,+%lld)) does not "
                     "match its rank (want %lld, [%lld,+%lld))",
                     s->paths[i], (long long)h->h[CK_N_PARAMS], (long long)h->h[CK_OPT_OFF], (long long)h->h[CK_N_OPT],
                     (long long)want_np, (long long)want_off, (long long)want_no);
            return -1;
        }
        // verify the checksum (header with the checksum entry 0, then the payload)
        FILE* f = fopen(s->paths[i], "rb");
        if (f == NULL) {
            snprintf(err, errn, "cannot open %s", s->paths[i]);
            return -1;
        }
        fseek(f, sizeof(h->h), SEEK_SET);
        uint64_t sum = ckpt_header_sum(h), want;
        char buf[1 << 16];
        size_t k;
        while ((k = fread(buf, 1, sizeof(buf), f)) > 0) sum = fnv1a64(sum, buf, k);
        fclose(f);
        memcpy(&want, &h->h[CK_CHECKSUM], sizeof(want));
        if (sum != want) {
            snprintf(err, errn, "checkpoint file %s is corrupt (checksum mismatch)", s->paths[i]);
            return -1;
        }
    }
    return 0;
}

// Fills out (full_rows x full_cols) with global layer `layer` of tensor t from section
// 0 (weights), 1 (AdamW m) or 2 (AdamW v). mask: scratch of full_rows*full_cols bytes.
// Returns 0, or -1 (err) if the files do not cover the whole layer.
static int ckpt_set_gather(const CkptSet* s, int t, int layer, int section, float* out, char* mask, char* err,
                           size_t errn) {
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
        int ll = PARAM_INFO[t].layered ? param_local_layer(pl, layer) : 0;
        if (ll < 0 || ll >= pl->nl[t]) continue;
        size_t per = (size_t)pl->rows[t] * pl->cols[t];
        size_t lo = pl->offset[t] + (size_t)ll * per, hi = lo + per; // local flat range of this layer
        size_t np = (size_t)h->h[CK_N_PARAMS], oo = (size_t)h->h[CK_OPT_OFF], no = (size_t)h->h[CK_N_OPT];
        size_t a, b;
        long fpos;
        if (section == 0) {
            if (np == 0) continue;
            a = lo;
            b = hi;
            fpos = (long)(sizeof(h->h) + 4 * a);
        } else {
            a = lo > oo ? lo : oo;
            b = hi < oo + no ? hi : oo + no;
            if (a >= b) continue;
            fpos = (long)(sizeof(h->h) + 4 * np + (section == 2 ? 4 * no : 0) + 4 * (a - oo));
        }
        if (b - a > bufn) {
            free(buf);
            bufn = b - a;
            buf = (float*)malloc_check(sizeof(float) * bufn);
        }
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
            if (!mask[k]) {
                mask[k] = 1;
                filled++;
            }
        }
    }
    free(buf);
    if (filled != full) {
        snprintf(err, errn, "checkpoint does not cover tensor %s layer %d (%zu of %zu elements)", PARAM_INFO[t].name,
                 layer, filled, full);
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
            int gl = PARAM_INFO[t].layered ? param_global_layer(pl, l) : 0;
            size_t lo = pl->offset[t] + (size_t)l * per;
            for (int section = 0; section < 3 && rc == 0; section++) {
                float* dst = section == 0 ? params : (section == 1 ? m : v);
                if (dst == NULL) continue;
                size_t a = lo, b = lo + per;
                if (section > 0) {
                    if (a < opt_off) a = opt_off;
                    if (b > opt_off + n_opt) b = opt_off + n_opt;
                }
                if (a >= b) continue;
                if (ckpt_set_gather(s, t, gl, section, full, mask, err, errn) != 0) {
                    rc = -1;
                    break;
                }
                for (size_t j = a; j < b; j++) {
                    int gl2, row, col;
                    param_full_coords(pl, t, j - pl->offset[t], &gl2, &row, &col);
                    float val = full[(size_t)row * pl->full_cols[t] + col];
                    if (section == 0)
                        dst[j] = val;
                    else
                        dst[j - opt_off] = val;
                }
            }
        }
    }
    free(full);
    free(mask);
    return rc;
}

#endif // LLMC_RESHARD_H
