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
 * Where each rank waits: each slot also holds the rank's collective trace (colltrace.h),
 * mapped into memory so that every collective updates it without a system call. The
 * first rank whose watchdog fires prints, after its one error line, a line per rank (where
 * it waits, or what it last left); when every rank is alive, the error line names the
 * deadlock: the ranks that wait for each other, among them the pair where one rank skipped
 * a call the other makes (colltrace.h). Ranks that fire later print the error line only.
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
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>
#ifdef USE_MPI
#include <mpi.h>
#endif
#include "colltrace.h"
#include "layout.h"
#include "stop.h"

typedef struct {
    double alive, beat;
    int64_t step, pid;
} HeartbeatSlot; // 32 bytes, CLOCK_REALTIME seconds

// a rank's slot of the heartbeat file: its HeartbeatSlot at 0, its CollRecord at WD_TRACE_OFF
#define WD_SLOT 256
#define WD_TRACE_OFF 64
#define WD_REPORTER_OFF 32 // in rank 0's slot: 1 + the rank that reports (0: none yet)
typedef char wd_trace_fits_its_slot[(WD_TRACE_OFF + sizeof(CollRecord) <= WD_SLOT) ? 1 : -1]; // C and C++

typedef struct {
    int on;
    double fixed_s; // > 0: fixed limit; else auto
    int rank, world, mpi;
    int TP, DP, PP, CP; // the layout (DP: the CP x DP group, comm.h), to group the ranks of the report (0: unknown)
    int fd;             // heartbeat file, -1 if none
    unsigned char* map; // the file mapped (world * WD_SLOT bytes), NULL if not
    char path[1100];
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
    off_t off = (off_t)w->rank * WD_SLOT;
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

// rank r's heartbeat and collective record; 0 if the file cannot be read
static int wd_read_slot(const Watchdog* w, int r, HeartbeatSlot* hb, CollRecord* cr) {
    unsigned char buf[WD_SLOT];
    if (w->map) {
        memcpy(hb, w->map + (size_t)r * WD_SLOT, sizeof(*hb));
        if (!ctrace_read((const CollRecord*)(w->map + (size_t)r * WD_SLOT + WD_TRACE_OFF), cr))
            memset(cr, 0, sizeof(*cr));
        return 1;
    }
    if (pread(w->fd, buf, WD_SLOT, (off_t)r * WD_SLOT) != WD_SLOT) return 0;
    memcpy(hb, buf, sizeof(*hb));
    memcpy(cr, buf + WD_TRACE_OFF, sizeof(*cr));
    if (cr->ver & 1) memset(cr, 0, sizeof(*cr)); // torn: no record rather than a wrong one
    return 1;
}

// Which rank is stuck, from the heartbeat file: one line of text into out (a rank that
// stopped responding and where it was, else the deadlock's cycle of waiting ranks, else the
// rank behind), and into more (when not NULL) a line per rank saying where it is.
static void wd_name_stuck(const Watchdog* w, char* out, size_t n, char* more, size_t nmore) {
    snprintf(out, n, "rank %d (no heartbeat file to compare with other ranks)", w->rank);
    if (more && nmore) more[0] = '\0';
    if (w->fd < 0 || w->world < 1) return;
    HeartbeatSlot* s = (HeartbeatSlot*)calloc(w->world, sizeof(HeartbeatSlot));
    CollRecord* cr = (CollRecord*)calloc(w->world, sizeof(CollRecord));
    if (s == NULL || cr == NULL) {
        free(s);
        free(cr);
        return;
    }
    for (int r = 0; r < w->world; r++)
        if (!wd_read_slot(w, r, &s[r], &cr[r])) {
            free(s);
            free(cr);
            return;
        }
    double now = wd_now_s();
    double silent = w->fixed_s > 0 && w->fixed_s < 10 ? w->fixed_s / 2 : 5.0; // a live watchdog writes every second
    size_t k = 0;
    out[0] = '\0';
    char where[256];
    for (int r = 0; r < w->world; r++) {
        if (s[r].alive > 0 && now - s[r].alive <= silent) continue;
        ctrace_where(&cr[r], now, where, sizeof(where));
        k += snprintf(out + k, k < n ? n - k : 0,
                      "%srank %d (pid %lld) is not responding: stopped or dead, its last step beat %.0f s ago in step "
                      "%lld; there it %s",
                      k ? "; " : "", r, (long long)s[r].pid, s[r].beat > 0 ? now - s[r].beat : -1.0,
                      (long long)s[r].step + 1, where);
    }
    char mismatch[1500];
    if (k == 0 && ctrace_mismatch(cr, w->world, w->TP, w->DP, w->PP, w->CP, now, mismatch, sizeof(mismatch))) {
        // every process alive, and they wait for each other
        snprintf(out, n, "the ranks wait for each other (a deadlock: a call some ranks make and others do not): %s",
                 mismatch);
    } else if (k == 0) { // every process alive: the rank(s) behind, or with the oldest beat
        int worst = 0;
        for (int r = 1; r < w->world; r++)
            if (s[r].step < s[worst].step || (s[r].step == s[worst].step && s[r].beat < s[worst].beat)) worst = r;
        ctrace_where(&cr[worst], now, where, sizeof(where));
        snprintf(out, n, "rank %d (pid %lld) is hung in step %lld (its last beat %.0f s ago); it %s", worst,
                 (long long)s[worst].pid, (long long)s[worst].step + 1, now - s[worst].beat, where);
    }
    size_t m = 0;
    for (int r = 0; more && r < w->world; r++) { // a line per rank, at most 32
        if (r == 32) {
            m += snprintf(more + m, m < nmore ? nmore - m : 0, "watchdog:   ... and %d more ranks\n", w->world - r);
            break;
        }
        ctrace_where(&cr[r], now, where, sizeof(where));
        char coords[64] = "";
        if (w->TP > 0 && w->DP > 0) {
            Coords c = layout_coords(r, w->TP, w->DP);
            int CP = w->CP > 0 ? w->CP : 1;
            if (CP > 1)
                snprintf(coords, sizeof(coords), " (tp %d, cp %d, dp %d, pp %d)", c.tp, c.dp % CP, c.dp / CP, c.pp);
            else
                snprintf(coords, sizeof(coords), " (tp %d, dp %d, pp %d)", c.tp, c.dp, c.pp);
        }
        m += snprintf(more + m, m < nmore ? nmore - m : 0, "watchdog:   rank %d%s %s\n", r, coords, where);
    }
    free(s);
    free(cr);
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
            char who[2048];
            size_t nmore = 33 * 320 + 1024;
            // the first rank to fire reports where every rank is; the rest, their error line
            int64_t none = 0, me = w->rank + 1;
            int first = w->map == NULL || __atomic_compare_exchange_n((int64_t*)(w->map + WD_REPORTER_OFF), &none, me,
                                                                      0, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE);
            char* more = first ? (char*)malloc(nmore) : NULL;
            wd_name_stuck(w, who, sizeof(who), more, more ? nmore : 0);
            // one write: mpirun forwards each write as it comes, and other ranks may print too
            size_t nrep = strlen(who) + (more ? strlen(more) : 0) + 512;
            char* rep = (char*)malloc(nrep);
            if (rep) {
                int len =
                    snprintf(rep, nrep,
                             "error: watchdog (rank %d): no progress for %.0f s in step %lld (limit %.0f s, "
                             "-timeout): %s; ending the job (exit %d)\n%s%s",
                             w->rank, idle / 1e3, (long long)__atomic_load_n(&w->step, __ATOMIC_RELAXED) + 1, lim / 1e3,
                             who, RUN_EXIT_WATCHDOG, more ? "watchdog: where each rank is:\n" : "", more ? more : "");
                if (len > 0 && write(2, rep, (size_t)len < nrep ? (size_t)len : nrep - 1) < 0) { /* best effort */
                }
            }
            free(rep);
            free(more);
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
                if (ftruncate(fd, (off_t)WD_SLOT * w->world) != 0) {
                    close(fd);
                    fd = -1;
                }
            }
            w->fd = fd;
        }
    } else {
        if (w->rank != 0) w->fd = open(path, O_RDWR | O_CLOEXEC);
        if (w->fd >= 0) { // the slots in memory: the collective trace writes there without a system call
            void* p = mmap(NULL, (size_t)w->world * WD_SLOT, PROT_READ | PROT_WRITE, MAP_SHARED, w->fd, 0);
            w->map = p == MAP_FAILED ? NULL : (unsigned char*)p;
        }
    }
}

// where this rank's collective record lives in the mapped file (NULL: no file or no map)
static CollRecord* watchdog_trace_slot(Watchdog* w) {
    return w->map ? (CollRecord*)(w->map + (size_t)w->rank * WD_SLOT + WD_TRACE_OFF) : NULL;
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
    if (w->map) {
        munmap(w->map, (size_t)w->world * WD_SLOT);
        w->map = NULL;
    }
    if (w->fd >= 0) {
        close(w->fd);
        w->fd = -1;
    }
}

#endif // LLMC_WATCHDOG_H
