/*
 * colltrace.h: where each rank is in its communication, for the step watchdog. Every
 * collective and pipeline transfer (comm.h's, and the CUDA trainer's NCCL calls) enters
 * and leaves this rank's record: the operation, its group (TP, DP, PP, the embedding
 * group, the whole job), its sequence number in that group, the step and the micro-batch.
 * The watchdog (watchdog.h) maps the record into this rank's slot of the shared heartbeat
 * file, so the rank whose watchdog fires reads every rank's record and prints where each
 * one waits, and the first mismatch: ranks of one group that entered different numbers of
 * that group's operations, or different operations at the same number (a deadlock: every
 * rank alive, each waiting for a call another rank will never make).
 *
 * With NCCL on a GPU a collective is enqueued, not waited for: there "entered" means
 * enqueued, the counts still tell which rank skipped a call, and the host's own waits for
 * the device (stream synchronisation) are marked beside the last operation.
 *
 * The record is written by the main thread only and read by other processes: a version
 * counter (odd while a write is under way) lets a reader take a consistent copy.
 */
#ifndef LLMC_COLLTRACE_H
#define LLMC_COLLTRACE_H

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

typedef enum { CG_WORLD, CG_TP, CG_DP, CG_PP, CG_EMB, CG_CP, CG_NUM } CollGroup;
#define CG_MAX 8 // room in the record for groups added later (the format is the file's)
static const char* const CG_NAMES[CG_NUM] = {"world", "tp", "dp", "pp", "emb", "cp"};

enum { CT_NONE = 0, CT_INSIDE = 1, CT_LEFT = 2 };

typedef struct {
    uint64_t ver;        // odd while the owner writes
    int64_t seq[CG_MAX]; // operations entered in each group so far (the run's whole life)
    int64_t step;        // the step under way when the last operation entered (1-based; 0 start-up)
    double t;            // CLOCK_REALTIME seconds of the last enter / leave
    double wait_t;       // CLOCK_REALTIME seconds the host began to wait for the device
    int32_t group;       // CollGroup of the last operation, -1 none yet
    int32_t micro;       // its micro-batch, -1 outside the pipeline schedule
    int32_t peer;        // pipeline transfers: the peer stage; -1 otherwise
    int32_t state;       // CT_NONE, CT_INSIDE (waiting in it), CT_LEFT
    int32_t host_wait;   // 1: the host waits for the device (stream or event synchronisation)
    int32_t wait_micro;  // the micro-batch under way then
    char op[32];         // "allreduce", "reduce_scatter", "recv", ...
} CollRecord;            // 160 bytes

typedef struct {
    CollRecord* rec; // published record (the heartbeat file's slot); NULL: `local` only
    CollRecord local;
    int64_t step; // set by the run loop: the step under way
    int micro;    // set by the pipeline: the micro-batch under way, -1 none
} CollTrace;

static double ctrace_now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

static CollRecord* ctrace_rec(CollTrace* t) { return t->rec ? t->rec : &t->local; }

static void ctrace_init(CollTrace* t) {
    memset(t, 0, sizeof(*t));
    t->local.group = -1;
    t->local.micro = -1;
    t->local.peer = -1;
    t->micro = -1;
}

// Publishes the record at rec from now on (what was recorded so far is carried over).
static void ctrace_publish(CollTrace* t, CollRecord* rec) {
    if (rec == NULL) return;
    CollRecord cur = *ctrace_rec(t);
    cur.ver = 0;
    *rec = cur;
    t->local = cur;
    __atomic_thread_fence(__ATOMIC_RELEASE);
    t->rec = rec;
}
static void ctrace_unpublish(CollTrace* t) {
    if (t->rec == NULL) return;
    t->local = *t->rec;
    t->rec = NULL;
}

static void ctrace_write_begin(CollRecord* r) {
    __atomic_store_n(&r->ver, r->ver + 1, __ATOMIC_RELAXED);
    __atomic_thread_fence(__ATOMIC_RELEASE);
}
static void ctrace_write_end(CollRecord* r) { __atomic_store_n(&r->ver, r->ver + 1, __ATOMIC_RELEASE); }

// This rank enters operation op of group g; peer: the pipeline stage it exchanges with, -1
// for collectives.
static void ctrace_enter(CollTrace* t, int g, const char* op, int peer) {
    CollRecord* r = ctrace_rec(t);
    ctrace_write_begin(r);
    r->seq[g]++;
    r->group = g;
    r->step = t->step;
    r->micro = t->micro;
    r->peer = peer;
    r->state = CT_INSIDE;
    r->t = ctrace_now();
    snprintf(r->op, sizeof(r->op), "%s", op);
    ctrace_write_end(r);
}
static void ctrace_leave(CollTrace* t) {
    CollRecord* r = ctrace_rec(t);
    ctrace_write_begin(r);
    r->state = CT_LEFT;
    r->t = ctrace_now();
    ctrace_write_end(r);
}

// The host begins (on 1) or ends (on 0) a wait for the device.
static void ctrace_host_wait(CollTrace* t, int on) {
    CollRecord* r = ctrace_rec(t);
    ctrace_write_begin(r);
    r->host_wait = on;
    r->wait_t = ctrace_now();
    r->wait_micro = t->micro;
    ctrace_write_end(r);
}

// A consistent copy of a record another process writes; 0 when none came in 100 tries.
static int ctrace_read(const CollRecord* src, CollRecord* out) {
    for (int i = 0; i < 100; i++) {
        uint64_t v0 = __atomic_load_n(&src->ver, __ATOMIC_ACQUIRE);
        if (v0 & 1) continue;
        memcpy(out, (const void*)src, sizeof(*out));
        __atomic_thread_fence(__ATOMIC_ACQUIRE);
        if (__atomic_load_n(&src->ver, __ATOMIC_RELAXED) == v0) return 1;
    }
    return 0;
}

// "tp allreduce #57 (step 3, micro 1)" for the record's last operation
static void ctrace_describe(const CollRecord* r, char* out, size_t n) {
    if (r->group < 0 || r->group >= CG_NUM || r->state == CT_NONE) {
        snprintf(out, n, "no communication yet");
        return;
    }
    char where[64];
    if (r->micro >= 0)
        snprintf(where, sizeof(where), "step %lld, micro-batch %d", (long long)r->step, r->micro);
    else
        snprintf(where, sizeof(where), "step %lld", (long long)r->step);
    if (r->peer >= 0)
        snprintf(out, n, "%s %s #%lld %s %s %d (%s)", CG_NAMES[r->group], r->op, (long long)r->seq[r->group],
                 strcmp(r->op, "send") == 0 ? "to" : "from", r->group == CG_CP ? "cp rank" : "stage", r->peer, where);
    else
        snprintf(out, n, "%s %s #%lld (%s)", CG_NAMES[r->group], r->op, (long long)r->seq[r->group], where);
}

// "waits 12 s in tp allreduce #57 (...)" or "last left tp allreduce #57 (...) 3 s ago"
static void ctrace_where(const CollRecord* r, double now, char* out, size_t n) {
    char d[160];
    ctrace_describe(r, d, sizeof(d));
    if (r->host_wait && r->wait_micro >= 0)
        snprintf(out, n, "waits %.0f s for the device (micro-batch %d), its last operation %s", now - r->wait_t,
                 r->wait_micro, d);
    else if (r->host_wait)
        snprintf(out, n, "waits %.0f s for the device, its last operation %s", now - r->wait_t, d);
    else if (r->state == CT_INSIDE)
        snprintf(out, n, "waits %.0f s in %s", now - r->t, d);
    else if (r->state == CT_LEFT)
        snprintf(out, n, "computes; last left %s %.0f s ago", d, now - r->t);
    else
        snprintf(out, n, "%s", d);
}

// The group instance of a rank in a layout (rank = tp + TP*dp + TP*DP*pp, with DP the
// CP x DP group's size and dp = cp + CP*(data-parallel index), comm.h): ranks with the same
// key are one group; -1: not a member (the embedding group holds the first and the last
// stage only).
static int ctrace_group_key(int g, int rank, int TP, int DP, int PP, int CP) {
    int tp = rank % TP, dp = (rank / TP) % DP, pp = rank / (TP * DP);
    switch (g) {
        case CG_WORLD:
            return 0;
        case CG_TP:
            return dp + DP * pp;
        case CG_DP:
            return tp + TP * pp;
        case CG_PP:
            return tp + TP * dp;
        case CG_EMB:
            return (PP > 1 && (pp == 0 || pp == PP - 1)) ? tp + TP * dp : -1;
        case CG_CP:
            return tp + TP * (dp / CP + (DP / CP) * pp);
        default:
            return -1;
    }
}

// Whom rank a waits for: inside operation #s of group g, a fellow member that entered
// fewer than s of g's operations (it has not come yet; one waiting itself is preferred), or
// that waits inside #s of another operation (*conflict = 1); inside a pipeline receive, the
// sending stage's rank. -1: a waits for nobody it can name.
static int ctrace_waits_for(const CollRecord* rec, int world, int TP, int DP, int PP, int CP, int a, int* conflict) {
    const CollRecord* ra = &rec[a];
    int g = ra->group;
    *conflict = 0;
    if (ra->state != CT_INSIDE || ra->host_wait || g < 0 || g >= CG_NUM) return -1;
    if (g == CG_PP) {
        if (strcmp(ra->op, "recv") != 0 || ra->peer < 0 || ra->peer >= PP) return -1;
        return a % (TP * DP) + TP * DP * ra->peer;
    }
    if (g == CG_CP) { // the ring: a rank waits for the previous one's block
        if (ra->peer < 0 || ra->peer >= CP) return -1;
        int dp = (a / TP) % DP;
        return a + TP * (ra->peer - dp % CP);
    }
    int key = ctrace_group_key(g, a, TP, DP, PP, CP), late = -1;
    if (key < 0) return -1;
    for (int b = 0; b < world; b++) {
        if (b == a || ctrace_group_key(g, b, TP, DP, PP, CP) != key) continue;
        const CollRecord* rb = &rec[b];
        if (rb->seq[g] == ra->seq[g] && rb->state == CT_INSIDE && !rb->host_wait && rb->group == g &&
            strcmp(rb->op, ra->op) != 0) {
            *conflict = 1;
            return b;
        }
        if (rb->seq[g] < ra->seq[g] && (late < 0 || (rec[late].state != CT_INSIDE && rb->state == CT_INSIDE))) late = b;
    }
    return late;
}

// The deadlock in the records of a whole job (rec: (world), every rank alive): a cycle of
// ranks each waiting for the next (the pair where one rank skipped or reordered a call is
// on it), or two ranks inside the same number of one group's operations that are different
// operations. When no rank waits inside an operation (NCCL on a GPU enqueues and returns,
// and the hosts wait for their devices): members of one group that entered different
// numbers of its operations. Returns 1 and the text in out, else 0.
static int ctrace_mismatch(const CollRecord* rec, int world, int TP, int DP, int PP, int CP, double now, char* out,
                           size_t n) {
    if (TP < 1 || DP < 1 || PP < 1 || CP < 1 || DP % CP != 0 || TP * DP * PP != world || world > (1 << 20)) return 0;
    char wa[300], wb[300];
    int* next = (int*)malloc(sizeof(int) * world * 2);
    if (next == NULL) return 0;
    int* mark = next + world;
    for (int a = 0; a < world; a++) {
        int conflict = 0;
        next[a] = ctrace_waits_for(rec, world, TP, DP, PP, CP, a, &conflict);
        mark[a] = -1;
        if (conflict) {
            int b = next[a];
            ctrace_describe(&rec[a], wa, sizeof(wa));
            ctrace_describe(&rec[b], wb, sizeof(wb));
            snprintf(out, n, "%s group: rank %d waits in %s, but rank %d waits in %s", CG_NAMES[rec[a].group], a, wa, b,
                     wb);
            free(next);
            return 1;
        }
    }
    for (int s = 0; s < world; s++) { // walk a -> next[a] from each start; a rank seen on this walk closes a cycle
        int a = s;
        while (a >= 0 && mark[a] < 0) {
            mark[a] = s;
            a = next[a];
        }
        if (a < 0 || mark[a] != s) continue;
        size_t k = 0; // the cycle from a: each rank, what it waits in and for whom
        int c = a;
        for (int i = 0; i < 8; i++) {
            const CollRecord* rc = &rec[c];
            int d = next[c];
            ctrace_describe(rc, wa, sizeof(wa));
            if (rc->group == CG_PP || rc->group == CG_CP)
                k += snprintf(out + k, k < n ? n - k : 0, "%srank %d waits in %s for rank %d", i ? "; " : "", c, wa, d);
            else
                k += snprintf(out + k, k < n ? n - k : 0,
                              "%srank %d waits in %s, but rank %d has entered only %lld %s operations", i ? "; " : "",
                              c, wa, d, (long long)rec[d].seq[rc->group], CG_NAMES[rc->group]);
            c = d;
            if (c == a) break;
        }
        if (c != a) snprintf(out + k, k < n ? n - k : 0, "; ...");
        free(next);
        return 1;
    }
    free(next);
    for (int a = 0; a < world; a++) // a rank inside an operation that is on no cycle: not a deadlock
        if (rec[a].state == CT_INSIDE && !rec[a].host_wait) return 0;
    for (int a = 0; a < world; a++) // no rank inside an operation: compare the counts
        for (int g = 0; g < CG_NUM; g++) {
            int key = ctrace_group_key(g, a, TP, DP, PP, CP);
            if (g == CG_PP || g == CG_CP || key < 0) continue;
            for (int b = 0; b < world; b++) {
                if (b == a || ctrace_group_key(g, b, TP, DP, PP, CP) != key || rec[b].seq[g] >= rec[a].seq[g]) continue;
                ctrace_where(&rec[a], now, wa, sizeof(wa));
                ctrace_where(&rec[b], now, wb, sizeof(wb));
                snprintf(out, n,
                         "%s group: rank %d has entered %lld %s operations and %s, but rank %d only %lld and %s",
                         CG_NAMES[g], a, (long long)rec[a].seq[g], CG_NAMES[g], wa, b, (long long)rec[b].seq[g], wb);
                return 1;
            }
        }
    return 0;
}

#endif // LLMC_COLLTRACE_H
