// cuemu/impl/streams.h - CUDA streams as queues. Every stream operation (kernel,
// memset, copy, cuBLASLt matmul, event record) is queued on its stream as a closure
// whose arguments were captured at the call, and queues run only at synchronisation
// points, in a seeded interleaving that respects stream order, events and the legacy
// default stream. So a missing event dependency between two streams gives the consumer
// stale data, as on a GPU that happens to run the producer late. Alongside, a
// vector-clock hazard detector reports two operations on different streams that touch
// overlapping bytes (at least one writing) with no happens-before path between them
// (checked when an operation runs: a kernel's bytes are those its threads touched, see
// detect.h; copies, memsets, cuBLASLt and NCCL give theirs exactly at the call), and
// the host must not write a pinned source before its copy ran (the copy reads it when
// it runs). NCCL collectives run at the call, after what their stream waits for (MPI
// blocks); NCCL send/recv are posted then and complete as a queued operation (nccl.h).
// CUEMU_STREAMS=eager runs every operation at the call (only pinned uploads deferred).
// Test-only: part of the CPU emulation of CUDA, never linked into the product.
#pragma once
#include "base.h"
#include <deque>
#include <functional>
#include <memory>

namespace cuemu {

// One cudaMemcpyAsync from pinned memory, from the call until the host synchronises
// with it. `snap` is the source as it was at the call: at run time and at the
// synchronisation the source must still hold exactly those bytes, otherwise the host
// wrote it while the copy may not have run yet (a race on every GPU).
struct PinnedCopy {
    uint64_t seq;
    uint64_t clock; // of its stream (vector clocks below)
    void* dst;
    const void* src;
    size_t n;
    std::vector<unsigned char> snap;
    const char* file;
    int line;
    bool ran;
};

// An operation that must have run before another can: stream `st` up to issue number `seq`.
struct Wait {
    StreamState* st;
    uint64_t seq;
};
// One range an operation reads or writes, for the hazard detector.
struct Access {
    const void* p;
    size_t n;
    bool w;
};
struct Op {
    uint64_t seq;              // global issue number (increasing over all streams)
    std::function<void()> run; // empty for markers (event records, waits)
    std::vector<Wait> waits;   // cross-stream dependencies (events, legacy stream)
    // for the hazard detector: the stream's clock and vector clock at the issue, and the
    // ranges (a kernel with exact ranges adds its own while it runs, through cur_acc)
    uint64_t clock = 0;
    VClock vc;
    std::vector<Access> acc;
    const char* what = nullptr;
    const char* file = nullptr;
    int line = 0;
};
struct StreamState {
    int id = 0;                    // creation order: index into the vector clocks
    const void* key = nullptr;     // nullptr: the legacy default stream
    bool nonblocking = false;      // cudaStreamNonBlocking: no implicit order with the legacy stream
    uint64_t last_seq = 0;         // of the last operation issued on the stream
    uint64_t clock = 0;            // operations issued on the stream
    VClock vc;                     // what the stream's next operation happens after
    std::deque<Op> ops;            // issued, not yet run (issue order)
    std::deque<PinnedCopy> pinned; // pinned-source copies not yet synchronised with
};
// One recorded access of an operation that has run, for the hazard detector.
struct AccessRec {
    uintptr_t lo, hi;
    bool w;
    int sid;
    uint64_t clock;
    uint64_t seq;
    const char* what;
    const char* file;
    int line;
};
struct Streams {
    std::recursive_mutex mu;
    uint64_t seq = 0;
    uint64_t rng = 0;
    bool eager = false, races = true, init = false;
    std::map<const void*, StreamState*> live; // key nullptr: the legacy (and per-thread) default stream
    std::vector<std::unique_ptr<StreamState>>
        all;     // every stream ever used, destroyed ones too (events may point there)
    VClock host; // what the host has synchronised with
    std::map<uintptr_t, std::vector<AccessRec>> acc; // by allocation base
    std::vector<Access>* cur_acc = nullptr;          // the running operation's ranges (kernel.h adds a kernel's)
};
inline Streams& streams() {
    static Streams s;
    if (!s.init) {
        s.init = true;
        s.rng = config().seed ^ 0x57ea3500dull;
        const char* m = getenv("CUEMU_STREAMS");
#ifdef CUEMU_COST
        s.eager = true; // the cost model attributes cuBLASLt calls to the kernels around them
#endif
        if (m && !strcmp(m, "eager"))
            s.eager = true;
        else if (m && *m && strcmp(m, "deferred") != 0)
            fprintf(stderr, "cuemu: CUEMU_STREAMS=%s unknown (deferred|eager); using deferred\n", m);
        if (const char* r = getenv("CUEMU_STREAM_RACES")) s.races = atoi(r) != 0;
    }
    return s;
}
inline const void* stream_key(const void* s) {
    return (s == nullptr || s == (const void*)0x1 || s == (const void*)0x2) ? nullptr : s;
}
inline StreamState* stream_state(const void* s) {
    Streams& S = streams();
    const void* k = stream_key(s);
    auto it = S.live.find(k);
    if (it != S.live.end()) return it->second;
    S.all.push_back(std::make_unique<StreamState>());
    StreamState* st = S.all.back().get();
    st->id = (int)S.all.size() - 1;
    st->key = k;
    S.live[k] = st;
    return st;
}
inline const char* stream_name(int sid, char* buf, size_t n) {
    Streams& S = streams();
    const StreamState* st = S.all[(size_t)sid].get();
    if (st->key == nullptr)
        snprintf(buf, n, "the default stream");
    else
        snprintf(buf, n, "stream %p", st->key);
    return buf;
}

[[noreturn]] inline void pinned_race(const PinnedCopy& c, const char* when) {
    size_t i = 0;
    while (i < c.n && ((const unsigned char*)c.src)[i] == c.snap[i]) i++;
    die("host wrote pinned buffer before its async copy %s; cudaMemcpyAsync(%p <- pinned %p, %zu bytes) at %s:%d, "
        "byte %zu changed from 0x%02x to 0x%02x (wait for the copy: cudaEventSynchronize / cudaStreamSynchronize "
        "before rewriting the buffer)",
        when, c.dst, c.src, c.n, c.file ? c.file : "?", c.line, i, c.snap[i], ((const unsigned char*)c.src)[i]);
}
inline void run_pinned(PinnedCopy& c) {
    if (c.ran) return;
    if (memcmp(c.src, c.snap.data(), c.n) != 0) pinned_race(c, "ran");
    memmove(c.dst, c.src, c.n);
    c.ran = true;
}

// Is [p, p+n) (part of) the source of a pinned copy the host has not synchronised with?
inline bool pinned_source_pending(const void* p, size_t n) {
    Streams& S = streams();
    std::lock_guard<std::recursive_mutex> lk(S.mu);
    uintptr_t lo = (uintptr_t)p, hi = lo + n;
    for (auto& up : S.all)
        for (const PinnedCopy& c : up->pinned)
            if ((uintptr_t)c.src < hi && lo < (uintptr_t)c.src + c.n) return true;
    return false;
}

// ---------------------------------------------------------------- running the queues
inline void check_and_record(int sid, const Op& op); // the hazard detector, below
inline bool reached(const StreamState* st, uint64_t seq) { return st->ops.empty() || st->ops.front().seq > seq; }
// Runs stream st's operations up to issue number `upto`, each after what it waits for
// (those run first, in a seeded order). Waits always point to earlier issue numbers, so
// this terminates and never needs an operation of st beyond the front.
inline void run_until(StreamState* st, uint64_t upto) {
    Streams& S = streams();
    while (!reached(st, upto)) {
        Op& f = st->ops.front();
        if (!f.waits.empty()) {
            std::vector<Wait> w = std::move(f.waits);
            f.waits.clear();
            for (size_t i = w.size(); i > 1; i--) std::swap(w[i - 1], w[splitmix64(S.rng) % i]);
            for (const Wait& x : w) run_until(x.st, x.seq);
            continue; // the front is still f (nothing else can run st's ops)
        }
        Op op = std::move(f);
        st->ops.pop_front();
        std::vector<Access>* saved = S.cur_acc;
        S.cur_acc = &op.acc;
        if (op.run) op.run();
        S.cur_acc = saved;
        if (!op.acc.empty()) check_and_record(st->id, op);
    }
}
// The host has learned that what `v` covers has happened: pinned sources become the
// host's again (checked once more: a write in between raced with the copy on a GPU
// even though the emulation had run it already).
inline void host_learns(const VClock& v) {
    Streams& S = streams();
    S.host.join(v);
    for (auto& up : S.all) {
        StreamState* st = up.get();
        while (!st->pinned.empty() && st->pinned.front().clock <= S.host.get(st->id)) {
            PinnedCopy& c = st->pinned.front();
            run_pinned(c);
            if (memcmp(c.src, c.snap.data(), c.n) != 0) pinned_race(c, "ran (the host had not synchronised with it)");
            st->pinned.pop_front();
        }
    }
}

// ---------------------------------------------------------------- the hazard detector
inline bool overlap(const AccessRec& a, uintptr_t lo, uintptr_t hi) { return a.lo < hi && lo < a.hi; }
// Operation `op` of stream sid has just run, with the ranges op.acc: any access of another
// stream's operation that ran before it, to an overlapping range, one of the two writing,
// that does not happen before it is a race on every GPU that runs the streams concurrently.
// Checked at run time because a kernel's ranges are known only once it has run. That
// suffices: the emulation runs an operation only after everything that happens before it
// (stream order, events, the legacy stream, host synchronisation), so of two ordered
// operations the earlier one always runs first, and "r does not happen before op" is the
// whole test.
inline void check_and_record(int sid, const Op& op) {
    Streams& S = streams();
    if (!S.races) return;
    // A record can be forgotten once it happens before everything still to run: the
    // operations still queued (each stream's queue is in vector-clock order, so its front
    // has the smallest clock) and whatever the host issues from now on (it joins S.host).
    VClock floor = S.host;
    for (auto& up : S.all)
        if (!up->ops.empty())
            for (size_t i = 0; i < floor.c.size(); i++)
                floor.c[i] = std::min(floor.c[i], up->ops.front().vc.get((int)i));
    for (const Access& a : op.acc) {
        if (a.n == 0 || a.p == nullptr) continue;
        Found f = lookup(a.p, a.n);
        if (f.kind == MEM_NONE) continue; // pageable host memory: staged at the call
        uintptr_t lo = (uintptr_t)a.p, hi = lo + a.n;
        std::vector<AccessRec>& L = S.acc[f.base];
        size_t out = 0;
        for (size_t i = 0; i < L.size(); i++) {
            AccessRec& r = L[i];
            if (r.sid != sid && (r.w || a.w) && overlap(r, lo, hi) && op.vc.get(r.sid) < r.clock) {
                // named in issue order (the emulation may have run them the other way round)
                bool rf = r.seq < op.seq;
                const char *w1 = rf ? r.what : op.what, *f1 = rf ? r.file : op.file, *w2 = rf ? op.what : r.what,
                           *f2 = rf ? op.file : r.file;
                int l1 = rf ? r.line : op.line, l2 = rf ? op.line : r.line, s1 = rf ? r.sid : sid,
                    s2 = rf ? sid : r.sid;
                bool x1 = rf ? r.w : a.w, x2 = rf ? a.w : r.w;
                char n1[64], n2[64];
                die("cross-stream race on %p + [%zu, %zu) (allocation %p, %zu bytes): %s at %s:%d on %s %s it, and "
                    "%s at %s:%d on %s %s it, with no event or synchronisation ordering the two (record an event "
                    "after the first and cudaStreamWaitEvent on the second's stream; CUEMU_STREAM_RACES=0 disables "
                    "this check)",
                    (void*)f.base, (size_t)(std::max(lo, r.lo) - f.base), (size_t)(std::min(hi, r.hi) - f.base),
                    (void*)f.base, f.size, w1, f1 ? f1 : "?", l1, stream_name(s1, n1, sizeof n1),
                    x1 ? "writes" : "reads", w2, f2 ? f2 : "?", l2, stream_name(s2, n2, sizeof n2),
                    x2 ? "writes" : "reads");
            }
            if (floor.get(r.sid) >= r.clock) continue; // before everything still to run
            // the new access makes an earlier one of its stream redundant when it covers it
            // and writes if that one wrote (whatever does not happen after that one does not
            // happen after this one either: a later conflict with it conflicts with this one)
            if (r.sid == sid && r.lo >= lo && r.hi <= hi && (a.w || !r.w)) continue;
            L[out++] = r;
        }
        L.resize(out);
        L.push_back(AccessRec{lo, hi, a.w, sid, op.clock, op.seq, op.what, op.file, op.line});
    }
}
// The bytes of a strided matrix, for the hazard detector: `batch` matrices `stride`
// elements apart, each `cols` columns of `rows` elements of es bytes, `ld` elements apart
// (cuBLASLt's column-major layouts). One range per column, merged where they touch or
// overlap, so the gaps between columns (ld > rows) are not counted; beyond 65536 columns
// the whole span (conservative: it may report a gap, never miss an overlap).
inline void matrix_access(std::vector<Access>& acc, const void* p, int64_t rows, int64_t cols, int64_t ld,
                          int64_t batch, int64_t stride, size_t es, bool w) {
    if (!p || rows <= 0 || cols <= 0 || batch <= 0) return;
    if (ld == rows) {
        rows *= cols;
        ld = rows;
        cols = 1;
    } // each matrix is contiguous
    if (batch == 1) stride = 0;
    std::vector<std::pair<int64_t, int64_t>> v; // element offsets [a, b)
    if (batch * cols <= 65536) {
        for (int64_t b = 0; b < batch; b++)
            for (int64_t j = 0; j < cols; j++) v.push_back({b * stride + j * ld, b * stride + j * ld + rows});
    } else {
        v.push_back({0, (cols - 1) * ld + rows + (batch - 1) * stride});
    }
    std::sort(v.begin(), v.end());
    size_t k = 0;
    for (size_t i = 1; i < v.size(); i++) {
        if (v[i].first <= v[k].second)
            v[k].second = std::max(v[k].second, v[i].second);
        else
            v[++k] = v[i];
    }
    v.resize(k + 1);
    for (const auto& r : v)
        acc.push_back(Access{(const char*)p + (size_t)r.first * es, (size_t)(r.second - r.first) * es, w});
}
inline void forget_accesses(const void* base) {
    Streams& S = streams();
    std::lock_guard<std::recursive_mutex> lk(S.mu);
    S.acc.erase((uintptr_t)base);
}

// ---------------------------------------------------------------- issuing
// Queues `fn` on stream s (fn may be empty: a marker). Returns its issue number.
// now: run it (and what it depends on) before returning, as the eager mode does for
// every operation and as a synchronous call (NCCL, copies to pageable memory) needs.
// lazy: never run at the call, not even in the eager mode (an NCCL point-to-point
// completion: it blocks in MPI until the peer posts, so it runs when later work needs it).
inline uint64_t issue(const void* s, std::function<void()> fn, const std::vector<Access>& accs, const char* what,
                      const char* file, int line, bool now = false, PinnedCopy* pc = nullptr, bool lazy = false) {
    Streams& S = streams();
    std::lock_guard<std::recursive_mutex> lk(S.mu);
    StreamState* st = stream_state(s);
    Op op;
    op.seq = ++S.seq;
    // Legacy default stream: its operations wait for the earlier work of every blocking
    // stream, and a blocking stream's operations wait for the earlier legacy work.
    if (st->key == nullptr) {
        for (auto& up : S.all) {
            StreamState* t = up.get();
            if (t == st || t->nonblocking || t->clock == 0) continue;
            st->vc.join(t->vc);
            if (!t->ops.empty()) op.waits.push_back(Wait{t, t->last_seq});
        }
    } else if (!st->nonblocking) {
        StreamState* lg = stream_state(nullptr);
        if (lg->clock > 0) {
            st->vc.join(lg->vc);
            if (!lg->ops.empty()) op.waits.push_back(Wait{lg, lg->last_seq});
        }
    }
    st->vc.join(S.host);
    st->clock++;
    st->vc.set(st->id, st->clock);
    st->last_seq = op.seq;
    op.clock = st->clock;
    if (S.races) {
        op.vc = st->vc;
        op.acc = accs; // checked when the operation runs (run_until)
    }
    op.what = what;
    op.file = file;
    op.line = line;
    if (pc) {
        pc->seq = op.seq;
        pc->clock = st->clock;
        st->pinned.push_back(std::move(*pc));
        PinnedCopy* c = &st->pinned.back(); // deque: stays put while others are added or retired
        op.run = [c] { run_pinned(*c); };
    } else {
        op.run = std::move(fn);
    }
    uint64_t q = op.seq;
    st->ops.push_back(std::move(op));
    if (now || (S.eager && !pc && !lazy)) run_until(st, q);
    return q;
}
inline void stream_set_flags(const void* s, unsigned flags) {
    Streams& S = streams();
    std::lock_guard<std::recursive_mutex> lk(S.mu);
    stream_state(s)->nonblocking = (flags & 0x01) != 0;
}
// cudaStreamWaitEvent: the stream's later operations wait for `ev_st` up to `seq` and
// happen after what the event's vector clock covers.
inline void stream_wait(const void* s, StreamState* ev_st, uint64_t seq, const VClock& ev_vc) {
    Streams& S = streams();
    std::lock_guard<std::recursive_mutex> lk(S.mu);
    StreamState* st = stream_state(s);
    st->vc.join(ev_vc);
    Op op;
    op.seq = ++S.seq;
    op.clock = st->clock;
    if (S.races) op.vc = st->vc;
    if (!reached(ev_st, seq)) op.waits.push_back(Wait{ev_st, seq});
    st->last_seq = op.seq;
    st->ops.push_back(std::move(op));
    if (S.eager) run_until(st, st->last_seq);
}
// cudaEventRecord: a marker on the stream (on the legacy stream it also waits for the
// blocking streams); the event completes when the stream has run up to it.
inline void event_record(const void* s, StreamState*& ev_st, uint64_t& seq, VClock& ev_vc) {
    Streams& S = streams();
    std::lock_guard<std::recursive_mutex> lk(S.mu);
    seq = issue(s, std::function<void()>(), {}, "cudaEventRecord", nullptr, 0);
    ev_st = stream_state(s);
    ev_vc = ev_st->vc;
}

// ---------------------------------------------------------------- synchronisation
inline void stream_sync(const void* s) {
    Streams& S = streams();
    std::lock_guard<std::recursive_mutex> lk(S.mu);
    StreamState* st = stream_state(s);
    // the legacy stream also waits for the work issued so far on the blocking streams
    if (st->key == nullptr) issue(nullptr, std::function<void()>(), {}, "cudaStreamSynchronize", nullptr, 0);
    run_until(st, st->last_seq);
    host_learns(st->vc);
}
inline void event_sync(StreamState* ev_st, uint64_t seq, const VClock& ev_vc) {
    Streams& S = streams();
    std::lock_guard<std::recursive_mutex> lk(S.mu);
    run_until(ev_st, seq);
    host_learns(ev_vc);
}
// Every stream, in a seeded interleaving: each step runs the front operation of a
// stream picked at random (after what it waits for).
inline void device_sync() {
    Streams& S = streams();
    std::lock_guard<std::recursive_mutex> lk(S.mu);
    for (;;) {
        std::vector<StreamState*> busy;
        for (auto& up : S.all)
            if (!up->ops.empty()) busy.push_back(up.get());
        if (busy.empty()) break;
        StreamState* st = busy[splitmix64(S.rng) % busy.size()];
        run_until(st, st->ops.front().seq);
    }
    VClock v;
    for (auto& up : S.all) v.join(up->vc);
    host_learns(v);
}
// cudaStreamDestroy: the stream's work runs (on a GPU it completes later; the host
// learns nothing, so its pinned copies stay checked until a later synchronisation).
inline void stream_forget(const void* s) {
    Streams& S = streams();
    std::lock_guard<std::recursive_mutex> lk(S.mu);
    const void* k = stream_key(s);
    auto it = S.live.find(k);
    if (it == S.live.end() || k == nullptr) return;
    run_until(it->second, it->second->last_seq);
    S.live.erase(it);
}

} // namespace cuemu
