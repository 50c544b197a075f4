/*
 * watchdog.h: the step watchdog (-timeout). A thread per rank watches the main thread's
 * progress beats (run.h beats at the start and end of every step and around saves,
 * evaluations and samples); when none came for the limit it prints one line naming the
 * stuck rank, aborts the device communicators (the CUDA trainer's hook: ncclCommAbort)
 * and ends the job (MPI_Abort; _exit single process) with RUN_EXIT_WATCHDOG.
 *
 * Naming the stuck rank: every rank owns a 32-byte slot of a shared heartbeat file
 * (DIR/heartbeat with -o, else /tmp/train_gpt_heartbeat_PID of rank 0; one node only):
 * the time of its main thread's last beat and step, and the time its watchdog thread
 * last ran (every 0.1 s). A SIGSTOPped or dead process stops refreshing the latter; a
 * rank blocked in a collective keeps refreshing it but its step beat ages. So the
 * firing rank names ranks whose watchdog went silent first, else the rank(s) at the
 * lowest step with the oldest beat.
 *
 * Limits: -timeout S (fixed), 0 (off), or auto (default): 30 min until the first step
 * completes (start-up, compilation, first allocation), then max(10 min, 10 x the slowest
 * step so far).
 */
#ifndef LLMC_WATCHDOG_H
#define LLMC_WATCHDOG_H

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#ifdef USE_MPI
#include <mpi.h>
#endif
#include "stop.h"

typedef struct {
    double alive, beat;
    int64_t step, pid;
} HeartbeatSlot; // 32 bytes, CLOCK_REALTIME seconds

typedef struct {
    int on;
    double fixed_s; // > 0: fixed limit; else auto
    int rank, world, mpi;
    int fd; // heartbeat file, -1 if none
    char path[1100];
    int owner; // rank 0 removes a /tmp heartbeat file at the end
    pthread_t th;
    int64_t beat_ms, step, slowest_ms; // main thread's last beat (monotonic ms), step, slowest step; __atomic
    int quit;                          // __atomic
    void (*abort_fn)(void*);
    void* abort_self; // device communicators (NULL: none)
} Watchdog;

static double wd_now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}
static int64_t wd_mono_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static void wd_slot_write(Watchdog* w, int part, double t) {
    if (w->fd < 0) return;
    off_t off = (off_t)w->rank * sizeof(HeartbeatSlot);
    if (part == 0) {                                                    // the watchdog thread: alive
        if (pwrite(w->fd, &t, sizeof(double), off) != sizeof(double)) { /* best effort */
        }
    } else { // the main thread: beat, step, pid
        struct {
            double beat;
            int64_t step, pid;
        } b = {t, __atomic_load_n(&w->step, __ATOMIC_RELAXED), (int64_t)getpid()};
        if (pwrite(w->fd, &b, sizeof(b), off + sizeof(double)) != (ssize_t)sizeof(b)) { /* best effort */
        }
    }
}

// the limit now, in ms
static int64_t wd_limit_ms(const Watchdog* w) {
    if (w->fixed_s > 0) return (int64_t)(w->fixed_s * 1000);
    int64_t slow = __atomic_load_n(&w->slowest_ms, __ATOMIC_RELAXED);
    if (slow <= 0) return 30 * 60 * 1000;
    return slow * 10 > 600000 ? slow * 10 : 600000;
}

// which rank is stuck, from the heartbeat file (text into out)
static void wd_name_stuck(const Watchdog* w, char* out, size_t n) {
    snprintf(out, n, "rank %d (no heartbeat file to compare with other ranks)", w->rank);
    if (w->fd < 0 || w->world < 1) return;
    HeartbeatSlot* s = (HeartbeatSlot*)calloc(w->world, sizeof(HeartbeatSlot));
    if (s == NULL) return;
    if (pread(w->fd, s, sizeof(HeartbeatSlot) * w->world, 0) != (ssize_t)(sizeof(HeartbeatSlot) * w->world)) {
        free(s);
        return;
    }
    double now = wd_now_s();
    double silent = w->fixed_s > 0 && w->fixed_s < 10 ? w->fixed_s / 2 : 5.0; // a live watchdog writes every second
    size_t k = 0;
    out[0] = '\0';
    for (int r = 0; r < w->world; r++) {
        if (s[r].alive > 0 && now - s[r].alive <= silent) continue;
        k += snprintf(
            out + k, k < n ? n - k : 0,
            "%srank %d (pid %lld) is not responding: stopped or dead, its last step beat %.0f s ago in step %lld",
            k ? "; " : "", r, (long long)s[r].pid, s[r].beat > 0 ? now - s[r].beat : -1.0, (long long)s[r].step + 1);
    }
    if (k == 0) { // every process alive: the rank(s) behind, or with the oldest beat
        int worst = 0;
        for (int r = 1; r < w->world; r++)
            if (s[r].step < s[worst].step || (s[r].step == s[worst].step && s[r].beat < s[worst].beat)) worst = r;
        snprintf(out, n, "rank %d (pid %lld) is hung in step %lld (its last beat %.0f s ago)", worst,
                 (long long)s[worst].pid, (long long)s[worst].step + 1, now - s[worst].beat);
    }
    free(s);
}

static void* wd_thread(void* arg) {
    Watchdog* w = (Watchdog*)arg;
    int64_t tick = wd_mono_ms();
    while (!__atomic_load_n(&w->quit, __ATOMIC_RELAXED)) {
        wd_slot_write(w, 0, wd_now_s());
        // a long gap between two 0.1 s ticks: this process itself was stopped (SIGSTOP,
        // a suspended VM); the time it lost is not a peer's fault, so it does not count
        int64_t now = wd_mono_ms();
        if (now - tick > 2000) __atomic_fetch_add(&w->beat_ms, now - tick, __ATOMIC_RELAXED);
        tick = now;
        int64_t idle = wd_mono_ms() - __atomic_load_n(&w->beat_ms, __ATOMIC_RELAXED);
        int64_t lim = wd_limit_ms(w);
        if (idle > lim) {
            char who[1024];
            wd_name_stuck(w, who, sizeof(who));
            fprintf(stderr,
                    "error: watchdog (rank %d): no progress for %.0f s in step %lld (limit %.0f s, -timeout): %s; "
                    "ending the job (exit %d)\n",
                    w->rank, idle / 1e3, (long long)__atomic_load_n(&w->step, __ATOMIC_RELAXED) + 1, lim / 1e3, who,
                    RUN_EXIT_WATCHDOG);
            fflush(stderr);
            if (w->abort_fn) w->abort_fn(w->abort_self);
#ifdef USE_MPI
            if (w->mpi) MPI_Abort(MPI_COMM_WORLD, RUN_EXIT_WATCHDOG);
#endif
            _exit(RUN_EXIT_WATCHDOG);
        }
        struct timespec ts = {0, 100000000}; // 0.1 s: alive beats and a prompt exit
        nanosleep(&ts, NULL);
    }
    return NULL;
}

// the main thread made progress; step = steps done so far
static void watchdog_beat(Watchdog* w, int64_t step) {
    if (!w->on) return;
    __atomic_store_n(&w->step, step, __ATOMIC_RELAXED);
    __atomic_store_n(&w->beat_ms, wd_mono_ms(), __ATOMIC_RELAXED);
    wd_slot_write(w, 1, wd_now_s());
}

static void watchdog_step_ms(Watchdog* w, double ms) {
    if ((int64_t)ms > __atomic_load_n(&w->slowest_ms, __ATOMIC_RELAXED))
        __atomic_store_n(&w->slowest_ms, (int64_t)ms, __ATOMIC_RELAXED);
}

// Starts the watchdog. path: the heartbeat file, created (world slots) by rank 0 before
// the other ranks open it (the caller orders this with a barrier between phase 0 and 1).
static void watchdog_open_file(Watchdog* w, const char* path, int phase) {
    if (phase == 0) {
        snprintf(w->path, sizeof(w->path), "%s", path);
        if (w->rank == 0) {
            int fd = open(path, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
            if (fd >= 0) {
                if (ftruncate(fd, (off_t)sizeof(HeartbeatSlot) * w->world) != 0) {
                    close(fd);
                    fd = -1;
                }
            }
            w->fd = fd;
        }
    } else if (w->rank != 0) {
        w->fd = open(path, O_RDWR | O_CLOEXEC);
    }
}

static void watchdog_start(Watchdog* w) {
    if (!w->on) return;
    __atomic_store_n(&w->beat_ms, wd_mono_ms(), __ATOMIC_RELAXED);
    wd_slot_write(w, 0, wd_now_s());
    wd_slot_write(w, 1, wd_now_s());
    if (pthread_create(&w->th, NULL, wd_thread, w) != 0) {
        fprintf(stderr, "warning: cannot start the step watchdog\n");
        w->on = 0;
    }
}

static void watchdog_stop(Watchdog* w) {
    if (w->on) {
        __atomic_store_n(&w->quit, 1, __ATOMIC_RELAXED);
        pthread_join(w->th, NULL);
        w->on = 0;
    }
    if (w->fd >= 0) {
        close(w->fd);
        w->fd = -1;
        if (w->owner) unlink(w->path);
    }
}

#endif // LLMC_WATCHDOG_H
