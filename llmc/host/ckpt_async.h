/*
 * ckpt_async.h: checkpoints written in the background (-ckpt-async 1), used by both trainers
 * the same way. At a save the main thread copies this rank's share (ckpt_rank.h) into a host
 * staging buffer (the CPU trainer with memcpy; the CUDA trainer into pinned memory, on a side
 * stream ordered after the optimizer step) and trains on; a writer thread writes the file with
 * the synchronous save's own header builder and file writer, so the bytes are the same, and
 * fsyncs it. MPI stays on the main thread: while a save is in flight every rank asks, at every
 * step boundary and in one collective whatever its writer's state, whether every rank's file
 * is written (cka_agree); once it is, rank 0 writes DONE and renames the directory
 * (ckpt_commit), as the synchronous save does. At most one save is in flight; run.h makes the
 * next one, a signal's stop and the end of the run wait for it.
 *
 * The states of a save (the main thread moves IDLE -> STAGED -> WRITING and, after the
 * agreement, back to IDLE; the writer thread moves WRITING -> WRITTEN or FAILED):
 *   IDLE     nothing in flight
 *   STAGED   the copy into the staging buffer is under way (CUDA: on the side stream)
 *   WRITING  the writer thread writes, fsyncs and renames the rank's file
 *   WRITTEN  done; FAILED: the write failed (err says why), reported at the next agreement
 */
#ifndef LLMC_CKPT_ASYNC_H
#define LLMC_CKPT_ASYNC_H

#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "checkpoint.h"
#include "ckpt_rank.h"
#include "comm.h"
#include "config.h"
#include "params.h"
#include "utils.h"

enum { CKA_IDLE, CKA_STAGED, CKA_WRITING, CKA_WRITTEN, CKA_FAILED };
enum { CKA_ALL_WRITING = 0, CKA_ALL_WRITTEN = 1, CKA_SOME_FAILED = -1 }; // what cka_agree learns

typedef struct {
    // the staging buffer: host floats from alloc (NULL: malloc; the CUDA trainer gives pinned memory)
    void* (*alloc)(size_t bytes);
    void (*release)(void* p);
    float* buf;
    size_t cap; // floats
    // the save in flight: set by the main thread before the writer sees WRITING
    char tmp[1200], dir[1100];
    int rank;
    CkptHeader hdr;
    const float *params, *m, *v;
    size_t n_params, opt_off, n_opt;
    int64_t step, bytes;
    double stall_ms; // main-thread time this save cost: staging, waits, agreements, commit
    double wait_ms;  // of which the wait for the save before it
    double write_ms; // the writer's (or the synchronous save's) file write: checksum, write, fsync, rename
    char err[1400];  // the writer's failure (FAILED)
    int inflight;    // main thread only: a save is between staging and its commit
    // the writer thread
    pthread_t th;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int started;
    int quit, state; // under mu
} CkptAsync;

static void cka_init(CkptAsync* a) {
    memset(a, 0, sizeof(*a));
    if (pthread_mutex_init(&a->mu, NULL) != 0 || pthread_cond_init(&a->cv, NULL) != 0)
        die("cannot create the checkpoint writer's lock");
    a->state = CKA_IDLE;
}

static int cka_state(CkptAsync* a) {
    pthread_mutex_lock(&a->mu);
    int s = a->state;
    pthread_mutex_unlock(&a->mu);
    return s;
}

static void cka_set_state(CkptAsync* a, int s) {
    pthread_mutex_lock(&a->mu);
    a->state = s;
    pthread_cond_broadcast(&a->cv);
    pthread_mutex_unlock(&a->mu);
}

// The writer thread: one file per save handed to it. It never calls MPI or the device.
static void* cka_writer(void* arg) {
    CkptAsync* a = (CkptAsync*)arg;
    for (;;) {
        pthread_mutex_lock(&a->mu);
        while (!a->quit && a->state != CKA_WRITING) pthread_cond_wait(&a->cv, &a->mu);
        int quit = a->quit;
        pthread_mutex_unlock(&a->mu);
        if (quit) return NULL;
        double t0 = wall_ms();
        int rc = ckpt_write_file(a->tmp, a->rank, &a->hdr, a->params, a->n_params, a->m, a->v, a->opt_off, a->n_opt,
                                 a->err, sizeof(a->err));
        a->write_ms = wall_ms() - t0;
        cka_set_state(a, rc == 0 ? CKA_WRITTEN : CKA_FAILED);
    }
}

// Joins the writer (nothing may be in flight: run.h waits for it first) and frees the buffer.
static void cka_free(CkptAsync* a) {
    if (a->started) {
        pthread_mutex_lock(&a->mu);
        a->quit = 1;
        pthread_cond_broadcast(&a->cv);
        pthread_mutex_unlock(&a->mu);
        pthread_join(a->th, NULL);
        a->started = 0;
    }
    if (a->buf) {
        if (a->release)
            a->release(a->buf);
        else
            free(a->buf);
    }
    a->buf = NULL;
    a->cap = 0;
    pthread_cond_destroy(&a->cv);
    pthread_mutex_destroy(&a->mu);
}

// The staging buffer, at least n floats (grown only between saves; kept for the next one)
static float* cka_buffer(CkptAsync* a, size_t n) {
    if (n + 1 <= a->cap) return a->buf;
    if (a->buf) {
        if (a->release)
            a->release(a->buf);
        else
            free(a->buf);
    }
    size_t bytes = sizeof(float) * (n + 1);
    a->buf = (float*)(a->alloc ? a->alloc(bytes) : malloc(bytes));
    if (a->buf == NULL)
        die("out of host memory for the checkpoint staging buffer (%.1f MiB): use -ckpt-async 0", bytes / 1048576.0);
    a->cap = n + 1;
    return a->buf;
}

// The start of a background save (every rank, at the same step): the header of Progress p, the
// temporary directory (ckpt_begin, a collective), the job. params, m, v: this rank's state in
// the staging buffer (or on its way there); staged: the copy is complete (the CPU trainer), else
// cka_hand follows once it is. Returns 0, or -1 when the directory cannot be made (every rank).
static int cka_start(CkptAsync* a, const Config* c, Comm* comm, const Progress* p, const ParamLayout* pl,
                     const float* params, const float* m, const float* v, size_t opt_off, size_t n_opt, int staged) {
    if (a->inflight) die("internal: a checkpoint was started while another is in flight");
    if (ckpt_rank_header(c, comm, p, pl, &a->hdr) != 0) return -1;
    a->n_params = ckpt_rank_n_params(c, comm, pl);
    a->n_opt = ckpt_rank_n_opt(c, comm, n_opt);
    a->opt_off = opt_off;
    a->params = params;
    a->m = m;
    a->v = v;
    a->rank = comm->rank;
    a->step = p->step;
    a->bytes = ckpt_file_bytes(a->n_params, a->n_opt);
    a->write_ms = 0;
    a->err[0] = '\0';
    if (!ckpt_begin(c, comm, p->step, a->tmp, sizeof(a->tmp), a->dir, sizeof(a->dir))) return -1;
    if (!a->started) { // the writer blocks the stop signals (stop.h): they go to the threads that handle them
        sigset_t stop, old;
        sigemptyset(&stop);
        sigaddset(&stop, SIGTERM);
        sigaddset(&stop, SIGINT);
        sigaddset(&stop, SIGUSR1);
        if (pthread_sigmask(SIG_BLOCK, &stop, &old) != 0) die("cannot set the checkpoint writer's signal mask");
        int rc = pthread_create(&a->th, NULL, cka_writer, a);
        if (pthread_sigmask(SIG_SETMASK, &old, NULL) != 0) die("cannot restore the signal mask");
        if (rc != 0) die("cannot start the checkpoint writer thread");
        a->started = 1;
    }
    a->inflight = 1;
    cka_set_state(a, staged ? CKA_WRITING : CKA_STAGED);
    return 0;
}

// The staging copy is complete: the writer may read the buffer (main thread)
static void cka_hand(CkptAsync* a) {
    if (cka_state(a) == CKA_STAGED) cka_set_state(a, CKA_WRITING);
}

// Until this rank's writer is done (main thread; the copy must have been handed)
static void cka_wait_local(CkptAsync* a) {
    pthread_mutex_lock(&a->mu);
    while (a->state == CKA_WRITING) pthread_cond_wait(&a->cv, &a->mu);
    pthread_mutex_unlock(&a->mu);
}

// The per-step agreement (every rank, at the same points, whatever its writer's state): one
// all-reduce of 0 (writing), 1 (written) or world + 1 (failed). CKA_ALL_WRITTEN when every rank's
// file is written, CKA_SOME_FAILED when any rank's write failed, else CKA_ALL_WRITING.
static int cka_agree(CkptAsync* a, Comm* comm) {
    int s = cka_state(a);
    double mine = s == CKA_FAILED ? (double)comm->world + 1.0 : s == CKA_WRITTEN ? 1.0 : 0.0;
    double sum = world_sum(comm, mine);
    if (sum >= (double)comm->world + 1.0) return CKA_SOME_FAILED;
    return sum == (double)comm->world ? CKA_ALL_WRITTEN : CKA_ALL_WRITING;
}

// The save is over (committed, or failed and cleaned up): the next may start
static void cka_done(CkptAsync* a) {
    a->inflight = 0;
    cka_set_state(a, CKA_IDLE);
}

#endif // LLMC_CKPT_ASYNC_H
