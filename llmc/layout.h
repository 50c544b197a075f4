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
typedef struct { ActionKind kind; int micro; } Action;

static const char* action_name(ActionKind k) {
    static const char* names[] = {"recv_act", "forward", "send_act", "recv_grad", "backward", "send_grad"};
    return names[k];
}

static void push_forward(Action* a, int* n, int k, int stage, int PP) {
    if (stage > 0) { a[*n].kind = ACT_RECV_ACT; a[*n].micro = k; (*n)++; }
    a[*n].kind = ACT_FORWARD; a[*n].micro = k; (*n)++;
    if (stage < PP - 1) { a[*n].kind = ACT_SEND_ACT; a[*n].micro = k; (*n)++; }
}
static void push_backward(Action* a, int* n, int k, int stage, int PP) {
    if (stage < PP - 1) { a[*n].kind = ACT_RECV_GRAD; a[*n].micro = k; (*n)++; }
    a[*n].kind = ACT_BACKWARD; a[*n].micro = k; (*n)++;
    if (stage > 0) { a[*n].kind = ACT_SEND_GRAD; a[*n].micro = k; (*n)++; }
}

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

#endif // LLMC_LAYOUT_H
