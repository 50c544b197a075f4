/*
 * layout.h: the 3D layout as pure functions, shared by both trainers and the tests:
 * rank <-> (tp, dp, pp) coordinates (TP fastest, then DP, then PP, so a TP group is a run
 * of consecutive ranks inside a node), the ZeRO-1 shard of a flat buffer, and the 1F1B
 * (PipeDream-flush) pipeline schedule as an explicit list of actions.
 *
 * 1F1B for stage r of PP with m micro-batches: w = min(PP-r-1, m) warm-up forwards, then
 * m-w pairs of one forward and one backward, then w backwards to drain. Communication is
 * part of the list: a forward on any stage but the first is preceded by RECV_ACT, on any
 * stage but the last followed by SEND_ACT; a backward on any stage but the last is preceded
 * by RECV_GRAD, on any stage but the first followed by SEND_GRAD. Sends are non-blocking
 * (a send never waits for its receiver) and receives block; with this order every receive
 * is matched by a send its peer reaches without waiting on the receiver, so no PP deadlocks
 * (the tests simulate every PP and m to prove it). At most w+1 <= PP micro-batches hold
 * activations on a stage at any time, so micro-batch k can live in slot k % PP.
 *
 * Interleaved 1F1B (Narayanan et al. 2021; Megatron's schedule with virtual pipeline
 * stages), V model chunks per rank: chunk c of rank r is virtual stage c*PP + r and holds
 * layers [(c*PP + r)*L/(PP*V), ...+L/(PP*V)). m must be a multiple of PP. Forwards walk
 * the V*m (chunk, micro-batch) units in groups of PP micro-batches: unit i is micro-batch
 * (i / (PP*V))*PP + i % PP of chunk (i % (PP*V)) / PP; backwards walk them the same way
 * with the chunk order reversed. Rank r runs w = min(2*(PP-r-1) + (V-1)*PP, V*m) warm-up
 * forwards, then one forward and one backward alternately, then drains. Activations go to
 * rank r+1 (the last rank wraps to rank 0's next chunk), gradients the other way, under
 * the same blocking-receive / non-blocking-send rules; at most w+1 units hold activations
 * at once (the tests check all of this for every PP <= 8, V <= 4, m up to 4*PP).
 */
#ifndef LLMC_LAYOUT_H
#define LLMC_LAYOUT_H

#include <stdint.h>
#include <stdlib.h>

typedef struct { int tp, dp, pp; } Coords;

static inline Coords layout_coords(int rank, int TP, int DP) {
    Coords c;
    c.tp = rank % TP;
    c.dp = (rank / TP) % DP;
    c.pp = rank / (TP * DP);
    return c;
}
static inline int layout_rank(int tp, int dp, int pp, int TP, int DP) { return tp + TP * dp + TP * DP * pp; }

// ZeRO-1: the flat buffer of n elements is split into DP contiguous shards of
// ceil(n/DP) elements (the last may be shorter or empty).
static inline void zero_shard(size_t n, int DP, int d, size_t* off, size_t* count) {
    size_t per = (n + DP - 1) / DP;
    size_t lo = per * d < n ? per * d : n;
    size_t hi = per * (d + 1) < n ? per * (d + 1) : n;
    *off = lo; *count = hi - lo;
}

typedef enum { ACT_RECV_ACT, ACT_FORWARD, ACT_SEND_ACT, ACT_RECV_GRAD, ACT_BACKWARD, ACT_SEND_GRAD } ActionKind;
typedef struct { ActionKind kind; int micro; int chunk; } Action; // chunk: model chunk (0 without interleaving)

static const char* action_name(ActionKind k) {
    static const char* names[] = {"recv_act", "forward", "send_act", "recv_grad", "backward", "send_grad"};
    return names[k];
}

static void push_action(Action* a, int* n, ActionKind kind, int k, int c) { a[*n].kind = kind; a[*n].micro = k; a[*n].chunk = c; (*n)++; }
// vstage: virtual stage c*PP + r; NV: number of virtual stages (PP*V)
static void push_forward_v(Action* a, int* n, int k, int c, int vstage, int NV) {
    if (vstage > 0) push_action(a, n, ACT_RECV_ACT, k, c);
    push_action(a, n, ACT_FORWARD, k, c);
    if (vstage < NV - 1) push_action(a, n, ACT_SEND_ACT, k, c);
}
static void push_backward_v(Action* a, int* n, int k, int c, int vstage, int NV) {
    if (vstage < NV - 1) push_action(a, n, ACT_RECV_GRAD, k, c);
    push_action(a, n, ACT_BACKWARD, k, c);
    if (vstage > 0) push_action(a, n, ACT_SEND_GRAD, k, c);
}
static void push_forward(Action* a, int* n, int k, int stage, int PP) { push_forward_v(a, n, k, 0, stage, PP); }
static void push_backward(Action* a, int* n, int k, int stage, int PP) { push_backward_v(a, n, k, 0, stage, PP); }

// The 1F1B action list of `stage` (0-based) for m micro-batches; *n receives its length.
// The caller frees the list. forward_only: the evaluation schedule (forwards in order).
static Action* schedule_1f1b(int stage, int PP, int m, int forward_only, int* n) {
    Action* a = (Action*)malloc(sizeof(Action) * (6 * (size_t)m + 1));
    *n = 0;
    if (a == NULL) return NULL;
    if (forward_only) {
        for (int k = 0; k < m; k++) push_forward(a, n, k, stage, PP);
        return a;
    }
    int w = PP - stage - 1;
    if (w > m) w = m;
    int f = 0, b = 0;
    for (; f < w; f++) push_forward(a, n, f, stage, PP);
    for (; f < m; f++, b++) { push_forward(a, n, f, stage, PP); push_backward(a, n, b, stage, PP); }
    for (; b < m; b++) push_backward(a, n, b, stage, PP);
    return a;
}

// Interleaved unit i (0 <= i < V*m) of rank `stage`: its micro-batch and chunk.
static void interleaved_unit(int i, int PP, int V, int backward, int* micro, int* chunk) {
    int g = i % (PP * V);
    *micro = (i / (PP * V)) * PP + i % PP;
    *chunk = g / PP;
    if (backward) *chunk = V - 1 - *chunk;
}

// warm-up forwards of rank `stage` in the interleaved schedule
static int interleaved_warmup(int stage, int PP, int V, int m) {
    int w = 2 * (PP - stage - 1) + (V - 1) * PP;
    return w < V * m ? w : V * m;
}

// Activation slots a rank needs: the most (chunk, micro-batch) units it holds at once.
static int schedule_slots(int stage, int PP, int V) {
    return V == 1 ? PP - stage : 2 * (PP - stage - 1) + (V - 1) * PP + 1;
}

// The interleaved 1F1B action list of rank `stage` with V chunks and m micro-batches
// (m % PP == 0 unless forward_only; V == 1 is schedule_1f1b). forward_only: every
// micro-batch through chunk 0, 1, ... in order (evaluation and sampling).
static Action* schedule_interleaved(int stage, int PP, int V, int m, int forward_only, int* n) {
    if (V == 1) return schedule_1f1b(stage, PP, m, forward_only, n);
    Action* a = (Action*)malloc(sizeof(Action) * (6 * (size_t)m * V + 1));
    *n = 0;
    if (a == NULL) return NULL;
    int NV = PP * V;
    if (forward_only) {
        for (int k = 0; k < m; k++) for (int c = 0; c < V; c++) push_forward_v(a, n, k, c, c * PP + stage, NV);
        return a;
    }
    int total = V * m, w = interleaved_warmup(stage, PP, V, m), f = 0, b = 0, k, c;
    for (; f < w; f++) { interleaved_unit(f, PP, V, 0, &k, &c); push_forward_v(a, n, k, c, c * PP + stage, NV); }
    for (; f < total; f++, b++) {
        interleaved_unit(f, PP, V, 0, &k, &c); push_forward_v(a, n, k, c, c * PP + stage, NV);
        interleaved_unit(b, PP, V, 1, &k, &c); push_backward_v(a, n, k, c, c * PP + stage, NV);
    }
    for (; b < total; b++) { interleaved_unit(b, PP, V, 1, &k, &c); push_backward_v(a, n, k, c, c * PP + stage, NV); }
    return a;
}

// Peer rank (pipeline coordinate) and message tag of a communication action of rank
// `stage`. Activations go to the next virtual stage (rank+1, or rank 0's next chunk from
// the last rank), gradients to the previous one. The tag names the receiving (chunk,
// micro-batch) and the direction, so sender and receiver compute the same one.
static void schedule_peer(const Action* a, int stage, int PP, int V, int* peer, int* tag) {
    int c = a->chunk, rc = c, dir = 0;
    switch (a->kind) {
        case ACT_SEND_ACT: *peer = (stage + 1) % PP; rc = stage == PP - 1 ? c + 1 : c; break;
        case ACT_RECV_ACT: *peer = (stage + PP - 1) % PP; break;
        case ACT_SEND_GRAD: *peer = (stage + PP - 1) % PP; rc = stage == 0 ? c - 1 : c; dir = 1; break;
        case ACT_RECV_GRAD: *peer = (stage + 1) % PP; dir = 1; break;
        default: *peer = -1; *tag = -1; return;
    }
    *tag = 2 * (a->micro * V + rc) + dir;
}

#endif // LLMC_LAYOUT_H
