/*
 * ckpt_rank.h: saving and loading one rank's share of a checkpoint, on host fp32 buffers
 * (the CUDA trainer copies its master weights and moments down first). Saving: every rank
 * writes its file (format in checkpoint.h): weights from DP rank 0 only (the replicas are
 * equal), AdamW moments from DP rank 0 without ZeRO or from every rank's shard with it;
 * DONE is written once every rank succeeded. Loading goes through reshard.h, so a
 * checkpoint of any layout loads into any other.
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

// where a run is: steps done, tokens and samples consumed, AdamW t, sampler RNG state,
// and the state -ramp auto needs to continue exactly (its batch and the noise-scale EMAs)
typedef struct {
    int64_t step, tokens, samples, adam_t; uint64_t rng;
    int64_t auto_gb; double noise_g2m, noise_sm, noise_betapow; int64_t noise_n;
} Progress;

// Returns 0, or -1 if any rank could not write (the previous checkpoint stays).
static int save_checkpoint_rank(const Config* c, Comm* comm, const Progress* p, const ParamLayout* pl,
                                const float* params, const float* m, const float* v, size_t opt_off, size_t n_opt) {
    char dir[1024];
    ckpt_dir_name(dir, sizeof(dir), c->out_dir, p->step);
    CkptHeader h;
    memset(&h, 0, sizeof(h));
    h.h[CK_L] = c->L; h.h[CK_H] = c->H; h.h[CK_HEADS] = c->heads; h.h[CK_SEQ] = c->seq;
    h.h[CK_V] = c->V; h.h[CK_VP] = c->Vp;
    h.h[CK_TP] = comm->TP; h.h[CK_PP] = comm->PP; h.h[CK_DP] = comm->DP; h.h[CK_ZERO] = c->zero;
    h.h[CK_TP_RANK] = comm->tp; h.h[CK_PP_RANK] = comm->pp; h.h[CK_DP_RANK] = comm->dp; h.h[CK_RANK] = comm->rank;
    h.h[CK_STEP] = p->step; h.h[CK_TOKENS] = p->tokens; h.h[CK_SAMPLES] = p->samples; h.h[CK_ADAM_T] = p->adam_t;
    h.h[CK_SEED] = (int64_t)c->seed; h.h[CK_RNG] = (int64_t)p->rng; h.h[CK_SCALED_INIT] = c->scaled_init;
    h.h[CK_AUTO_GB] = p->auto_gb; h.h[CK_NOISE_N] = p->noise_n;
    h.h[CK_VPP] = pl->nchunks;
    memcpy(&h.h[CK_NOISE_G2M], &p->noise_g2m, 8); memcpy(&h.h[CK_NOISE_SM], &p->noise_sm, 8);
    memcpy(&h.h[CK_NOISE_BETAPOW], &p->noise_betapow, 8);
    int writes_weights = comm->dp == 0;
    int writes_moments = c->zero || comm->dp == 0;
    int rc = ckpt_write_rank(dir, comm->rank, &h, params, writes_weights ? pl->total : 0, m, v, opt_off, writes_moments ? n_opt : 0);
    int ok = world_sum(comm, rc == 0 ? 0.0 : 1.0) == 0.0;
    if (ok && comm->rank == 0) ok = ckpt_mark_done(dir) == 0;
    ok = world_sum(comm, ok ? 0.0 : 1.0) == 0.0;
    if (ok && comm->rank == 0) { printf("checkpoint %s\n", dir); fflush(stdout); }
    return ok ? 0 : -1;
}

// Checks that a checkpoint header matches this run's model. Returns 0 or -1 (err).
static int ckpt_check_model(const Config* c, const CkptHeader* h, const char* path, char* err, size_t n) {
    if (h->h[CK_L] != c->L || h->h[CK_H] != c->H || h->h[CK_HEADS] != c->heads || h->h[CK_SEQ] != c->seq ||
        h->h[CK_V] != c->V || h->h[CK_VP] != c->Vp) {
        snprintf(err, n, "checkpoint %s is for a different model (L=%lld H=%lld heads=%lld seq=%lld V=%lld Vp=%lld; this run: L=%d H=%d heads=%d seq=%d V=%d Vp=%d)",
                 path, (long long)h->h[CK_L], (long long)h->h[CK_H], (long long)h->h[CK_HEADS], (long long)h->h[CK_SEQ],
                 (long long)h->h[CK_V], (long long)h->h[CK_VP], c->L, c->H, c->heads, c->seq, c->V, c->Vp);
        return -1;
    }
    return 0;
}

// Loads this rank's slices (layout pl, optimizer range [opt_off, opt_off+n_opt)) from a
// checkpoint written in any layout. weights_only: m, v and progress are left alone.
static int load_checkpoint_rank(const Config* c, const char* dir, const ParamLayout* pl, float* params, float* m, float* v,
                                size_t opt_off, size_t n_opt, int weights_only, Progress* p, char* err, size_t n) {
    CkptSet set;
    if (ckpt_set_open(&set, dir, err, n) != 0) { ckpt_set_close(&set); return -1; }
    const CkptHeader* h = &set.hdr[0];
    int rc = ckpt_check_model(c, h, set.paths[0], err, n);
    if (rc == 0) rc = ckpt_set_load_local(&set, pl, params, weights_only ? NULL : m, weights_only ? NULL : v, opt_off, n_opt, err, n);
    if (rc == 0 && !weights_only) {
        p->step = h->h[CK_STEP]; p->tokens = h->h[CK_TOKENS]; p->samples = h->h[CK_SAMPLES];
        p->adam_t = h->h[CK_ADAM_T]; p->rng = (uint64_t)h->h[CK_RNG];
        p->auto_gb = h->h[CK_AUTO_GB]; p->noise_n = h->h[CK_NOISE_N];
        memcpy(&p->noise_g2m, &h->h[CK_NOISE_G2M], 8); memcpy(&p->noise_sm, &h->h[CK_NOISE_SM], 8);
        memcpy(&p->noise_betapow, &h->h[CK_NOISE_BETAPOW], 8);
    }
    ckpt_set_close(&set);
    return rc;
}

#endif // LLMC_CKPT_RANK_H
