// dev/cuemu/impl/streams.h - what the emulation models of CUDA streams: host-to-device
// copies from pinned memory are deferred (they read the host buffer when they run, as
// a DMA engine does), and the host must not write such a buffer until it has
// synchronised with the copy. Everything else still runs at the call, after the
// deferred copies its stream (and the legacy default stream) has queued.
// Test-only: part of the CPU emulation of CUDA, never linked into the product.
#pragma once
#include "base.h"
#include <deque>
#include <memory>

namespace cuemu {

// One cudaMemcpyAsync host-to-device from pinned memory, from the call until the host
// synchronises with it. `snap` is the source as it was at the call: at run time and
// at the synchronisation the source must still hold exactly those bytes, otherwise
// the host wrote it while the copy may not have run yet (a race on every GPU).
struct PinnedCopy {
    uint64_t seq;
    void* dst;
    const void* src;
    size_t n;
    std::vector<unsigned char> snap;
    const char* file;
    int line;
    bool ran;
};
struct StreamState {
    uint64_t last_seq = 0;      // of the last operation issued on the stream
    bool nonblocking = false;   // cudaStreamNonBlocking: no implicit order with the legacy stream
    std::deque<PinnedCopy> q;   // issue order
};
struct Streams {
    std::recursive_mutex mu;
    uint64_t seq = 0;
    std::map<const void*, StreamState> st;  // key nullptr: the default (legacy / per-thread) stream
};
inline Streams& streams() { static Streams s; return s; }
inline const void* stream_key(const void* s) { return (s == nullptr || s == (const void*)0x1 || s == (const void*)0x2) ? nullptr : s; }

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
// Runs the deferred copies of stream s (and of the default stream, whose earlier work
// every blocking stream waits for; running work early is always a valid schedule).
inline void stream_flush(const void* s) {
    Streams& S = streams();
    std::lock_guard<std::recursive_mutex> lk(S.mu);
    const void* k = stream_key(s);
    if (k == nullptr) {
        for (auto& kv : S.st)
            for (auto& c : kv.second.q) run_pinned(c);
        return;
    }
    for (const void* kk : {(const void*)nullptr, k}) {
        auto it = S.st.find(kk);
        if (it != S.st.end())
            for (auto& c : it->second.q) run_pinned(c);
    }
}
// An operation is issued on s: it is ordered after the deferred copies before it.
inline uint64_t stream_op(const void* s) {
    Streams& S = streams();
    std::lock_guard<std::recursive_mutex> lk(S.mu);
    stream_flush(s);
    uint64_t q = ++S.seq;
    S.st[stream_key(s)].last_seq = q;
    return q;
}
inline void stream_set_flags(const void* s, unsigned flags) {
    Streams& S = streams();
    std::lock_guard<std::recursive_mutex> lk(S.mu);
    S.st[stream_key(s)].nonblocking = (flags & 0x01) != 0;
}
inline void enqueue_pinned(const void* s, void* dst, const void* src, size_t n, const char* file, int line) {
    Streams& S = streams();
    std::lock_guard<std::recursive_mutex> lk(S.mu);
    stream_flush(s);  // stream order: what was queued before runs first
    uint64_t q = ++S.seq;
    StreamState& ss = S.st[stream_key(s)];
    ss.last_seq = q;
    PinnedCopy c{q, dst, src, n, std::vector<unsigned char>((const unsigned char*)src, (const unsigned char*)src + n), file, line, false};
    ss.q.push_back(std::move(c));
}
// The host has synchronised with stream s up to operation `upto`: the copies up to there
// have run, and their sources become the host's again (checked once more: a write in
// between raced with the copy on a GPU even though the emulation ran it already).
inline void retire_queue(StreamState& ss, uint64_t upto) {
    while (!ss.q.empty() && ss.q.front().seq <= upto) {
        PinnedCopy& c = ss.q.front();
        run_pinned(c);
        if (memcmp(c.src, c.snap.data(), c.n) != 0) pinned_race(c, "ran (the host had not synchronised with it)");
        ss.q.pop_front();
    }
}
inline void stream_retire(const void* s, uint64_t upto) {
    Streams& S = streams();
    std::lock_guard<std::recursive_mutex> lk(S.mu);
    const void* k = stream_key(s);
    if (k == nullptr) {  // the legacy stream waits for the earlier work of every blocking stream
        for (auto& kv : S.st)
            if (kv.first == nullptr || !kv.second.nonblocking) retire_queue(kv.second, upto);
        return;
    }
    StreamState& ss = S.st[k];
    retire_queue(ss, upto);
    // a blocking stream's operations wait for the earlier default-stream work
    if (!ss.nonblocking) retire_queue(S.st[nullptr], upto);
}
inline void stream_sync(const void* s) {
    Streams& S = streams();
    std::lock_guard<std::recursive_mutex> lk(S.mu);
    stream_flush(s);
    stream_retire(s, S.seq);
}
inline void device_sync() {
    Streams& S = streams();
    std::lock_guard<std::recursive_mutex> lk(S.mu);
    for (auto& kv : S.st) {
        for (auto& c : kv.second.q) run_pinned(c);
        retire_queue(kv.second, S.seq);
    }
}
inline uint64_t stream_last(const void* s) {
    Streams& S = streams();
    std::lock_guard<std::recursive_mutex> lk(S.mu);
    return S.st[stream_key(s)].last_seq;
}
// A destroyed stream's work still completes: its queue joins the default stream's.
inline void stream_forget(const void* s) {
    Streams& S = streams();
    std::lock_guard<std::recursive_mutex> lk(S.mu);
    auto it = S.st.find(stream_key(s));
    if (it == S.st.end() || it->first == nullptr) return;
    for (auto& c : it->second.q) run_pinned(c);
    auto& d = S.st[nullptr].q;
    for (auto& c : it->second.q) d.push_back(std::move(c));
    std::sort(d.begin(), d.end(), [](const PinnedCopy& a, const PinnedCopy& b) { return a.seq < b.seq; });
    S.st.erase(it);
}

}  // namespace cuemu
