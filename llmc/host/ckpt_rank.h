/*
 * ckpt_rank.h: saving and loading one rank's share of a checkpoint, on host fp32 buffers
 * (the CUDA trainer copies its master weights and moments down first). Saving: every rank
 * writes its file (format in checkpoint.h): weights from DP rank 0 only (the replicas are
 * equal), AdamW moments from DP rank 0 without ZeRO or from every rank's shard with it.
 * Every file goes into a fresh DIR/ckpt_N.tmp; once every rank succeeded rank 0 writes
 * DONE there and renames the directory to DIR/ckpt_N (replacing a stale one of the same
 * step), so no save ever mixes with files of an earlier one; a failed save removes its
 * temporary directory. The save is three parts (ckpt_begin, the file of ckpt_write_file with
 * ckpt_rank_header's header, ckpt_commit), which save_checkpoint_rank runs in a row and the
 * background save of ckpt_async.h spreads over steps. -keep N is applied by run.h after each
 * save (ckpt_prune). Loading goes through reshard.h, so a checkpoint of any layout loads into
 * any other.
 */
#ifndef LLMC_CKPT_RANK_H
#define LLMC_CKPT_RANK_H

#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include "checkpoint.h"
#include "comm.h"
#include "config.h"
#include "params.h"
#include "reshard.h"

// The recipe values a checkpoint header records (written by save_checkpoint_rank, compared by
// run_check_identity on -resume, where each change is logged): X(name, header slot, value
// in Config c). lr is -1 for -lr auto.
#define CKPT_RECIPE(X, c)                                      \
    X("lr", CK_LR, (c)->lr_auto ? -1.0 : (c)->lr)              \
    X("beta1", CK_BETA1, (c)->beta1)                           \
    X("beta2", CK_BETA2, (c)->beta2)                           \
    X("eps", CK_EPS, (c)->eps)                                 \
    X("wd", CK_WD, (c)->wd)                                    \
    X("clip", CK_CLIP, (c)->clip)                              \
    X("warmup", CK_WARMUP, (double)(c)->warmup_tokens)         \
    X("decay", CK_DECAY, (double)(c)->decay_tokens)            \
    X("minlr-frac", CK_MINLR_FRAC, (c)->minlr_frac)            \
    X("gb", CK_GB, (double)(c)->gb)                            \
    X("ramp start", CK_RAMP_START, (double)(c)->ramp_start)    \
    X("ramp increment", CK_RAMP_INC, (double)(c)->ramp_inc)    \
    X("ramp tokens", CK_RAMP_TOKENS, (double)(c)->ramp_tokens) \
    X("ramp auto", CK_RAMP_AUTO, (double)(c)->ramp_auto)       \
    X("tokens", CK_TOTAL_TOKENS, (double)(c)->total_tokens)

// where a run is: steps done, tokens and samples consumed, AdamW t, sampler RNG state,
// and the state -ramp auto needs to continue exactly (its batch and the noise-scale EMAs)
typedef struct {
    int64_t step, tokens, samples, adam_t;
    uint64_t rng;
    int64_t auto_gb;
    double noise_g2m, noise_sm, noise_betapow;
    int64_t noise_n;
    uint64_t data_hash; // identity of the training shards (run.h), saved to refuse a silent change
    int nskip;          // data ranges skipped so far (-on-spike rewind): at run sample skip_at, skip_n samples
    int64_t skip_at[CKPT_MAX_SKIPS], skip_n[CKPT_MAX_SKIPS];
} Progress;

static void ckpt_put_f64(CkptHeader* h, int f, double x) { memcpy(&h->h[f], &x, 8); }
static double ckpt_get_f64(const CkptHeader* h, int f) {
    double x;
    memcpy(&x, &h->h[f], 8);
    return x;
}

// Moves a complete temporary checkpoint directory into place as final (rank 0). A
// directory already at final (a save of the same step that a crash or a failed load left
// behind) is moved aside first and removed after, because rename cannot replace a
// non-empty directory.
static int ckpt_install(const char* tmp, const char* final) {
    char old[1200];
    snprintf(old, sizeof(old), "%s.old", final);
    ckpt_remove_dir(old);
    struct stat st;
    int had = stat(final, &st) == 0;
    if (had && rename(final, old) != 0) {
        fprintf(stderr, "error: cannot move %s aside: %s\n", final, strerror(errno));
        return -1;
    }
    if (rename(tmp, final) != 0) {
        fprintf(stderr, "error: cannot rename %s to %s: %s\n", tmp, final, strerror(errno));
        return -1;
    }
    if (had) ckpt_remove_dir(old);
    return 0;
}

// -keep N (rank 0, after a save): keeps the newest N checkpoints known to load (the ones this
// run saved and the one it resumed from) and always the resumed one. A checkpoint not known to
// load (an earlier run's: it may be corrupt) never counts towards N: newer ones of those stay,
// older ones go once N known-good checkpoints are newer. So pruning never leaves a directory in
// which no checkpoint loads.
static int ckpt_known_good(int64_t s, const int64_t* good, int ngood, int64_t resumed) {
    if (s == resumed) return 1;
    for (int i = 0; i < ngood; i++)
        if (good[i] == s) return 1;
    return 0;
}
static void ckpt_prune(const char* base, int keep, const int64_t* good, int ngood, int64_t resumed) {
    if (keep <= 0) return;
    int n = ckpt_list_complete(base, NULL, 0);
    if (n <= keep) return;
    int64_t* steps = (int64_t*)malloc_check(sizeof(int64_t) * n);
    n = ckpt_list_complete(base, steps, n);
    int kept_good = 0;
    for (int i = 0; i < n; i++) { // newest first
        int known = ckpt_known_good(steps[i], good, ngood, resumed);
        if (kept_good < keep) {
            kept_good += known;
            continue;
        }
        if (steps[i] == resumed) continue;
        char d[1100];
        ckpt_dir_name(d, sizeof(d), base, steps[i]);
        if (ckpt_remove_dir(d) != 0) fprintf(stderr, "warning: -keep: could not remove %s\n", d);
    }
    free(steps);
}

// The header of this rank's file (ckpt_write_file adds the payload sizes and the checksum):
// the one header builder of the synchronous and the background save (ckpt_async.h). 0, or -1
// when the run's skipped data ranges cannot be recorded (the same on every rank: nothing saved).
static int ckpt_rank_header(const Config* c, const Comm* comm, const Progress* p, const ParamLayout* pl,
                            CkptHeader* hp) {
    CkptHeader h;
    memset(&h, 0, sizeof(h));
    h.h[CK_L] = c->L;
    h.h[CK_H] = c->H;
    h.h[CK_HEADS] = c->heads;
    h.h[CK_SEQ] = c->seq;
    h.h[CK_V] = c->V;
    h.h[CK_VP] = c->Vp;
    h.h[CK_TP] = comm->TP;
    h.h[CK_PP] = comm->PP;
    h.h[CK_DP] = comm->DPC;         // CP x DP: the ranks that share the weights and shard the moments
    h.h[CK_ZERO] = c->zero ? 1 : 0; // the moments are a shard: every level >= 1 writes the same file
    h.h[CK_TP_RANK] = comm->tp;
    h.h[CK_PP_RANK] = comm->pp;
    h.h[CK_DP_RANK] = comm->dpc;
    h.h[CK_RANK] = comm->rank;
    h.h[CK_STEP] = p->step;
    h.h[CK_TOKENS] = p->tokens;
    h.h[CK_SAMPLES] = p->samples;
    h.h[CK_ADAM_T] = p->adam_t;
    h.h[CK_SEED] = (int64_t)c->seed;
    h.h[CK_RNG] = (int64_t)p->rng;
    h.h[CK_SCALED_INIT] = c->scaled_init;
    h.h[CK_AUTO_GB] = p->auto_gb;
    h.h[CK_NOISE_N] = p->noise_n;
    h.h[CK_VPP] = pl->nchunks;
    memcpy(&h.h[CK_NOISE_G2M], &p->noise_g2m, 8);
    memcpy(&h.h[CK_NOISE_SM], &p->noise_sm, 8);
    memcpy(&h.h[CK_NOISE_BETAPOW], &p->noise_betapow, 8);
    h.h[CK_SHUFFLE] = c->shuffle;
    h.h[CK_DATA_HASH] = (int64_t)p->data_hash;
    int64_t skip_at[CKPT_MAX_SKIPS] = {0};
    int64_t skip_n[CKPT_MAX_SKIPS] = {0};
    char why[200];
    int nskip = ckpt_skips_for_save(p->nskip, p->skip_at, p->skip_n, p->samples, skip_at, skip_n, why, sizeof(why));
    if (nskip < 0) { // never written: the reader would refuse it (every rank has the same ranges)
        if (comm->rank == 0) fprintf(stderr, "error: checkpoint at step %lld not saved: %s\n", (long long)p->step, why);
        return -1;
    }
    h.h[CK_SKIP_COUNT] = nskip;
    for (int i = 0; i < nskip; i++) {
        h.h[CK_SKIP_FIRST + 2 * i] = skip_at[i];
        h.h[CK_SKIP_FIRST + 2 * i + 1] = skip_n[i];
    }
#define CKPT_PUT_RECIPE(name, slot, value) ckpt_put_f64(&h, slot, value);
    CKPT_RECIPE(CKPT_PUT_RECIPE, c)
#undef CKPT_PUT_RECIPE
    *hp = h;
    return 0;
}

// What this rank's file holds: the weights from DP rank 0 only (the replicas are equal), the
// moments from DP rank 0 without ZeRO or from every rank's shard with it (float32 counts)
static size_t ckpt_rank_n_params(const Config* c, const Comm* comm, const ParamLayout* pl) {
    (void)c;
    return comm->dpc == 0 ? pl->total : 0;
}
static size_t ckpt_rank_n_opt(const Config* c, const Comm* comm, size_t n_opt) {
    return c->zero || comm->dpc == 0 ? n_opt : 0;
}

// The start of a save (every rank): the names of its temporary and final directories, and a
// fresh temporary directory made by rank 0 (whatever an earlier attempt left there goes).
// Returns 1 when it exists (every rank learns the same).
static int ckpt_begin(const Config* c, Comm* comm, int64_t step, char* tmp, size_t tn, char* dir, size_t dn) {
    ckpt_dir_name(dir, dn, c->out_dir, step);
    snprintf(tmp, tn, "%s.tmp", dir);
    int ok = 1;
    if (comm->rank == 0 && (ckpt_remove_dir(tmp) != 0 || mkdir_p(tmp) != 0)) {
        fprintf(stderr, "error: cannot create %s: %s\n", tmp, strerror(errno));
        ok = 0;
    }
    return world_sum(comm, ok ? 0.0 : 1.0) == 0.0;
}

// The end of a save (every rank, with the same ok: every rank's file is written). Rank 0
// marks the temporary directory DONE and renames it into place, or removes it when a rank
// failed. Returns 0, or -1 (the previous checkpoint stays).
static int ckpt_commit(Comm* comm, int ok, const char* tmp, const char* dir) {
    if (comm->rank == 0) {
        if (ok) ok = ckpt_mark_done(tmp) == 0 && ckpt_install(tmp, dir) == 0;
        if (!ok) ckpt_remove_dir(tmp); // partial: never left behind
    }
    ok = world_sum(comm, ok ? 0.0 : 1.0) == 0.0;
    if (ok && comm->rank == 0) {
        printf("checkpoint %s\n", dir);
        fflush(stdout);
    }
    return ok ? 0 : -1;
}

// The synchronous save: every rank writes its file, then the commit. Returns 0, or -1 if any
// rank could not write (the previous checkpoint stays). write_ms, bytes (may be NULL): this
// rank's file write and its size.
static int save_checkpoint_rank(const Config* c, Comm* comm, const Progress* p, const ParamLayout* pl,
                                const float* params, const float* m, const float* v, size_t opt_off, size_t n_opt,
                                double* write_ms, int64_t* bytes) {
    char dir[1100], tmp[1200];
    CkptHeader h;
    if (ckpt_rank_header(c, comm, p, pl, &h) != 0) return -1;
    size_t np = ckpt_rank_n_params(c, comm, pl), no = ckpt_rank_n_opt(c, comm, n_opt);
    int ok = ckpt_begin(c, comm, p->step, tmp, sizeof(tmp), dir, sizeof(dir));
    double t0 = wall_ms(), t1 = t0;
    if (ok) {
        int rc = ckpt_write_rank(tmp, comm->rank, &h, params, np, m, v, opt_off, no);
        t1 = wall_ms();
        ok = world_sum(comm, rc == 0 ? 0.0 : 1.0) == 0.0;
    }
    if (write_ms) *write_ms = t1 - t0;
    if (bytes) *bytes = ckpt_file_bytes(np, no);
    return ckpt_commit(comm, ok, tmp, dir);
}

// Checks that a checkpoint header matches this run's model. Returns 0 or -1 (err).
static int ckpt_check_model(const Config* c, const CkptHeader* h, const char* path, char* err, size_t n) {
    if (h->h[CK_L] != c->L || h->h[CK_H] != c->H || h->h[CK_HEADS] != c->heads || h->h[CK_SEQ] != c->seq ||
        h->h[CK_V] != c->V || h->h[CK_VP] != c->Vp) {
        snprintf(err, n,
                 "checkpoint %s is for a different model (L=%lld H=%lld heads=%lld seq=%lld V=%lld Vp=%lld; this run: "
                 "L=%d H=%d heads=%d seq=%d V=%d Vp=%d)",
                 path, (long long)h->h[CK_L], (long long)h->h[CK_H], (long long)h->h[CK_HEADS], (long long)h->h[CK_SEQ],
                 (long long)h->h[CK_V], (long long)h->h[CK_VP], c->L, c->H, c->heads, c->seq, c->V, c->Vp);
        return -1;
    }
    return 0;
}

// A -ramp auto batch from a checkpoint that this run's ramp can hold: 0 (none), the final
// batch, or start + k * increment below it (noise_ramp_next never leaves that grid)
static int ckpt_auto_gb_ok(const Config* c, int64_t gb) {
    if (!c->ramp_auto || gb == 0 || gb == c->gb) return 1;
    if (gb < c->ramp_start || gb > c->gb) return 0;
    return c->ramp_inc > 0 ? (gb - c->ramp_start) % c->ramp_inc == 0 : gb == c->ramp_start;
}

// Loads this rank's slices (layout pl, optimizer range [opt_off, opt_off+n_opt)) from a
// checkpoint written in any layout. weights_only: m, v and progress are left alone.
static int load_checkpoint_rank(const Config* c, const char* dir, const ParamLayout* pl, float* params, float* m,
                                float* v, size_t opt_off, size_t n_opt, int weights_only, Progress* p, char* err,
                                size_t n) {
    CkptSet set;
    if (ckpt_set_open(&set, dir, err, n) != 0) {
        ckpt_set_close(&set);
        return -1;
    }
    const CkptHeader* h = &set.hdr[0];
    int rc = ckpt_check_model(c, h, set.paths[0], err, n);
    int64_t named = ckpt_name_step(dir);
    if (rc == 0 && named >= 0 && named != h->h[CK_STEP]) { // a renamed directory would be resumed out of order
        snprintf(err, n, "checkpoint %s holds step %lld, not the step its name says: rename it back to ckpt_%08lld",
                 dir, (long long)h->h[CK_STEP], (long long)h->h[CK_STEP]);
        rc = -1;
    }
    if (rc == 0)
        rc = ckpt_set_load_local(&set, pl, params, weights_only ? NULL : m, weights_only ? NULL : v, opt_off, n_opt,
                                 err, n);
    if (rc == 0 && !weights_only && !ckpt_auto_gb_ok(c, h->h[CK_AUTO_GB])) {
        snprintf(err, n,
                 "checkpoint %s: its -ramp auto batch %lld is not on this run's ramp (%lld + k * %lld, up to %lld)",
                 dir, (long long)h->h[CK_AUTO_GB], (long long)c->ramp_start, (long long)c->ramp_inc, (long long)c->gb);
        rc = -1;
    }
    if (rc == 0 && !weights_only) {
        p->step = h->h[CK_STEP];
        p->tokens = h->h[CK_TOKENS];
        p->samples = h->h[CK_SAMPLES];
        p->adam_t = h->h[CK_ADAM_T];
        p->rng = (uint64_t)h->h[CK_RNG];
        p->auto_gb = h->h[CK_AUTO_GB];
        p->noise_n = h->h[CK_NOISE_N];
        memcpy(&p->noise_g2m, &h->h[CK_NOISE_G2M], 8);
        memcpy(&p->noise_sm, &h->h[CK_NOISE_SM], 8);
        memcpy(&p->noise_betapow, &h->h[CK_NOISE_BETAPOW], 8);
        p->nskip = (int)h->h[CK_SKIP_COUNT];
        for (int i = 0; i < p->nskip; i++) {
            p->skip_at[i] = h->h[CK_SKIP_FIRST + 2 * i];
            p->skip_n[i] = h->h[CK_SKIP_FIRST + 2 * i + 1];
        }
    }
    ckpt_set_close(&set);
    return rc;
}

#endif // LLMC_CKPT_RANK_H
