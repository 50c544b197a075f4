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
 * stages), nchunk model chunks per rank: chunk c of rank r is virtual stage c*PP + r and holds
 * layers [(c*PP + r)*L/(PP*nchunk), ...+L/(PP*nchunk)). m must be a multiple of PP. Forwards walk
 * the nchunk*m (chunk, micro-batch) units in groups of PP micro-batches: unit i is micro-batch
 * (i / (PP*nchunk))*PP + i % PP of chunk (i % (PP*nchunk)) / PP; backwards walk them the same way
 * with the chunk order reversed. Rank r runs w = min(2*(PP-r-1) + (nchunk-1)*PP, nchunk*m) warm-up
 * forwards, then one forward and one backward alternately, then drains. Activations go to
 * rank r+1 (the last rank wraps to rank 0's next chunk), gradients the other way, under
 * the same blocking-receive / non-blocking-send rules; at most w+1 units hold activations
 * at once (the tests check all of this for every PP <= 8, nchunk <= 4, m up to 4*PP).
 */
#ifndef LLMC_LAYOUT_H
#define LLMC_LAYOUT_H

#include <stdint.h>
#include <stdlib.h>

typedef struct {
    int tp, dp, pp;
} Coords;

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
    *off = lo;
    *count = hi - lo;
}

// ACT_BACKWARD is the whole backward, or with zb-h1 only B (input gradients); ACT_WEIGHT is
// zb-h1's W (the weight gradients of a unit whose B has run)
typedef enum {
    ACT_RECV_ACT,
    ACT_FORWARD,
    ACT_SEND_ACT,
    ACT_RECV_GRAD,
    ACT_BACKWARD,
    ACT_SEND_GRAD,
    ACT_WEIGHT
} ActionKind;
// a compute action (the rest move messages)
static inline int action_computes(int kind) {
    return kind == ACT_FORWARD || kind == ACT_BACKWARD || kind == ACT_WEIGHT;
}
typedef struct {
    ActionKind kind;
    int micro;
    int chunk;
} Action; // chunk: model chunk (0 without interleaving)

static const char* action_name(ActionKind k) {
    static const char* names[] = {"recv_act", "forward", "send_act", "recv_grad", "backward", "send_grad", "weight"};
    return names[k];
}

static void push_action(Action* a, int* n, ActionKind kind, int k, int c) {
    a[*n].kind = kind;
    a[*n].micro = k;
    a[*n].chunk = c;
    (*n)++;
}
// vstage: virtual stage c*PP + r; NV: number of virtual stages (PP*nchunk)
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
static Action* pipe_1f1b(int stage, int PP, int m, int forward_only, int* n) {
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
    for (; f < m; f++, b++) {
        push_forward(a, n, f, stage, PP);
        push_backward(a, n, b, stage, PP);
    }
    for (; b < m; b++) push_backward(a, n, b, stage, PP);
    return a;
}

// Interleaved unit i (0 <= i < nchunk*m) of rank `stage`: its micro-batch and chunk.
static void interleaved_unit(int i, int PP, int nchunk, int backward, int* micro, int* chunk) {
    int g = i % (PP * nchunk);
    *micro = (i / (PP * nchunk)) * PP + i % PP;
    *chunk = g / PP;
    if (backward) *chunk = nchunk - 1 - *chunk;
}

// warm-up forwards of rank `stage` in the interleaved schedule
static int interleaved_warmup(int stage, int PP, int nchunk, int m) {
    int w = 2 * (PP - stage - 1) + (nchunk - 1) * PP;
    return w < nchunk * m ? w : nchunk * m;
}

// Activation slots a rank needs: the most (chunk, micro-batch) units it holds at once.
static int pipe_slots(int stage, int PP, int nchunk) {
    return nchunk == 1 ? PP - stage : 2 * (PP - stage - 1) + (nchunk - 1) * PP + 1;
}

// The interleaved 1F1B action list of rank `stage` with nchunk chunks and m micro-batches
// (m % PP == 0 unless forward_only; nchunk == 1 is pipe_1f1b). forward_only: every
// micro-batch through chunk 0, 1, ... in order (evaluation and sampling).
static Action* pipe_interleaved(int stage, int PP, int nchunk, int m, int forward_only, int* n) {
    if (nchunk == 1) return pipe_1f1b(stage, PP, m, forward_only, n);
    Action* a = (Action*)malloc(sizeof(Action) * (6 * (size_t)m * nchunk + 1));
    *n = 0;
    if (a == NULL) return NULL;
    int NV = PP * nchunk;
    if (forward_only) {
        for (int k = 0; k < m; k++)
            for (int c = 0; c < nchunk; c++) push_forward_v(a, n, k, c, c * PP + stage, NV);
        return a;
    }
    int total = nchunk * m, w = interleaved_warmup(stage, PP, nchunk, m), f = 0, b = 0, k, c;
    for (; f < w; f++) {
        interleaved_unit(f, PP, nchunk, 0, &k, &c);
        push_forward_v(a, n, k, c, c * PP + stage, NV);
    }
    for (; f < total; f++, b++) {
        interleaved_unit(f, PP, nchunk, 0, &k, &c);
        push_forward_v(a, n, k, c, c * PP + stage, NV);
        interleaved_unit(b, PP, nchunk, 1, &k, &c);
        push_backward_v(a, n, k, c, c * PP + stage, NV);
    }
    for (; b < total; b++) {
        interleaved_unit(b, PP, nchunk, 1, &k, &c);
        push_backward_v(a, n, k, c, c * PP + stage, NV);
    }
    return a;
}

/*
 * Zero-bubble ZB-H1 (Qi et al. 2023, "Zero Bubble Pipeline Parallelism"): the backward of a
 * unit splits into B (the input gradients, which the previous stage waits for) and W (the
 * weight gradients, which nobody waits for). The list is the 1F1B (or interleaved) list with
 * its backwards as B, and each unit's W deferred:
 *   - a unit holds memory from its forward until its W: its activation slot until its B, then
 *     a W stash (the weight GEMMs' inputs and output gradients, about one slot's size). Before
 *     a forward would make more than S units hold memory, the oldest pending W runs. S =
 *     pipe_slots(0, ...), what 1F1B holds on the first stage, so no stage holds more than 1F1B's
 *     peak: stage r of PP defers r W's through the steady state (the last stage the most),
 *     which is ZB-H1's shape;
 *   - after the last forward the backwards alternate with W's (B W B W ..): one pending W runs
 *     after each B there, before the next gradient's receive, whose wait it fills; the rest at
 *     the end. (The first B after the last forward goes at once: that stage's gradient is on
 *     the critical path. The tests check the makespan against the paper's bubble.)
 * W's run in the order of their B's, so every weight gradient sums the micro-batches in 1F1B's
 * order and the results equal 1F1B's bit for bit. W is compute only: it never adds a message,
 * so with sends that never wait (MPI's ring, NCCL's link streams) the deadlock argument of the
 * base list stands. A W may split a run of adjacent communication actions in two (NCCL groups:
 * tests/cuda/test_pp_groups.cu simulates those lists too).
 */
static Action* pipe_zb_h1(int stage, int PP, int nchunk, int m, int forward_only, int* n) {
    int nb;
    Action* base = pipe_interleaved(stage, PP, nchunk, m, forward_only, &nb);
    if (base == NULL || forward_only) {
        *n = nb;
        return base;
    }
    int total = nchunk * m, S = pipe_slots(0, PP, nchunk);
    Action* out = (Action*)malloc(sizeof(Action) * ((size_t)nb + total + 1));
    int* qk = (int*)malloc(sizeof(int) * (total + 1));
    int* qc = (int*)malloc(sizeof(int) * (total + 1));
    if (out == NULL || qk == NULL || qc == NULL) {
        free(base);
        free(out);
        free(qk);
        free(qc);
        return NULL;
    }
    // qk/qc[head, tail): the units whose W is pending; started: forwards begun; cool: B's after the last forward
    int last_fwd = -1, head = 0, tail = 0, started = 0, no = 0, cool = 0;
    for (int i = 0; i < nb; i++)
        if (base[i].kind == ACT_FORWARD) last_fwd = i;
    for (int i = 0; i < nb; i++) {
        const Action* a = &base[i];
        int vs = a->chunk * PP + stage;
        if (a->kind == ACT_RECV_ACT || (a->kind == ACT_FORWARD && vs == 0)) { // a unit begins to hold memory
            for (; started - head >= S && head < tail; head++) push_action(out, &no, ACT_WEIGHT, qk[head], qc[head]);
            started++;
        }
        // after the first B past the last forward, a W before each gradient's receive fills the wait
        if (a->kind == ACT_RECV_GRAD && i > last_fwd && cool > 0 && head < tail) {
            push_action(out, &no, ACT_WEIGHT, qk[head], qc[head]);
            head++;
        }
        push_action(out, &no, a->kind, a->micro, a->chunk);
        if (a->kind == ACT_BACKWARD) {
            cool += i > last_fwd;
            qk[tail] = a->micro;
            qc[tail++] = a->chunk;
        }
    }
    for (; head < tail; head++) push_action(out, &no, ACT_WEIGHT, qk[head], qc[head]);
    free(base);
    free(qk);
    free(qc);
    *n = no;
    return out;
}

// zb-h1's W stash of one layer, shared by both trainers (in elements of their type): the
// inputs and output gradients of its four weight GEMMs. What -sp splits along the sequence
// (BTs rows) is kept as this rank's shard and gathered again in W.
typedef enum {
    WS_D_FC,      // (B,T,F) fc1's output gradient
    WS_D_QKV,     // (B,T,3Cl)
    WS_FCH_GELU,  // (B,T,F) fc2's input
    WS_ATTY,      // (B,T,Cl) the attention projection's input
    WS_D_FCPROJ,  // (B,Ts,C) the layer's output gradient
    WS_D_ATTPROJ, // (B,Ts,C) resid2's
    WS_LN1,       // (B,Ts,C) QKV's input
    WS_LN2,       // (B,Ts,C) fc1's input
    NUM_WS
} WStashPart;
// each part's offset and size in one layer's stash; returns the layer's elements
static size_t zb_stash_layout(size_t BT, size_t BTs, size_t C, size_t F, size_t Cl, size_t off[NUM_WS],
                              size_t n[NUM_WS]) {
    n[WS_D_FC] = BT * F;
    n[WS_D_QKV] = BT * 3 * Cl;
    n[WS_FCH_GELU] = BT * F;
    n[WS_ATTY] = BT * Cl;
    n[WS_D_FCPROJ] = n[WS_D_ATTPROJ] = n[WS_LN1] = n[WS_LN2] = BTs * C;
    size_t total = 0;
    for (int k = 0; k < NUM_WS; k++) {
        off[k] = total;
        total += n[k];
    }
    return total;
}

// The list of `stage` for schedule zb (0: 1F1B / interleaved, 1: zb-h1).
static Action* pipe_schedule(int zb, int stage, int PP, int nchunk, int m, int forward_only, int* n) {
    if (zb) return pipe_zb_h1(stage, PP, nchunk, m, forward_only, n);
    return pipe_interleaved(stage, PP, nchunk, m, forward_only, n);
}

// Most units whose W is pending at once on `stage` (zb-h1), over the micro-batch counts a run
// can make (1..m_max, multiples of PP with nchunk > 1): how many W stashes the stage needs.
static int pipe_w_pending_max(int stage, int PP, int nchunk, int m_max) {
    int most = 0;
    for (int m = nchunk > 1 ? PP : 1; m <= m_max; m += nchunk > 1 ? PP : 1) {
        int n, pend = 0;
        Action* a = pipe_zb_h1(stage, PP, nchunk, m, 0, &n);
        if (a == NULL) return -1;
        for (int i = 0; i < n; i++) {
            pend += a[i].kind == ACT_BACKWARD ? 1 : a[i].kind == ACT_WEIGHT ? -1 : 0;
            if (pend > most) most = pend;
        }
        free(a);
    }
    return most;
}

// Peer rank (pipeline coordinate) and message tag of a communication action of rank
// `stage`. Activations go to the next virtual stage (rank+1, or rank 0's next chunk from
// the last rank), gradients to the previous one. The tag names the receiving (chunk,
// micro-batch) and the direction, so sender and receiver compute the same one.
static void pipe_peer(const Action* a, int stage, int PP, int nchunk, int* peer, int* tag) {
    int c = a->chunk, rc = c, dir = 0;
    switch (a->kind) {
        case ACT_SEND_ACT:
            *peer = (stage + 1) % PP;
            rc = stage == PP - 1 ? c + 1 : c;
            break;
        case ACT_RECV_ACT:
            *peer = (stage + PP - 1) % PP;
            break;
        case ACT_SEND_GRAD:
            *peer = (stage + PP - 1) % PP;
            rc = stage == 0 ? c - 1 : c;
            dir = 1;
            break;
        case ACT_RECV_GRAD:
            *peer = (stage + 1) % PP;
            dir = 1;
            break;
        default:
            *peer = -1;
            *tag = -1;
            return;
    }
    *tag = 2 * (a->micro * nchunk + rc) + dir;
}


/*
 * Phased interleaved schedule, for blocking sends (NCCL). An NCCL send waits on the stream
 * until its receiver posts the matching receive, and NCCL matches messages between two
 * ranks by order, not by tag. Posting each run of adjacent communication actions of the
 * interleaved list as one group deadlocks in many layouts (the tests show which), so with
 * -vpp > 1 and NCCL the list is rearranged in phases, as Megatron's batched p2p does:
 * all stages are simulated together in rounds (in round r every stage whose next unit's
 * inputs arrived before r computes it); every message then travels in the phase just
 * before the round its receiver computes with it, and sender and receiver both post it in
 * that phase's group. A stage's compute of round r only needs phases < r, and phase j of
 * one stage only waits for its peers' phase j, which in turn needs only phases < j: no
 * layout can deadlock. Within a phase, messages of one link are ordered by the round that
 * produced them on both sides, so NCCL's order matching pairs the right ones. Computes keep
 * their order, so results do not change; receives come exactly where the plain list has
 * them, so a stage holds the same activation slots; a send may wait until its receiver
 * needs it, so gradients being sent back are held longer (pipe_grad_buffers).
 * zb: the zb-h1 lists (pipe_schedule). Returns the stage's list and, in *phase, the phase of each action (-1 for
 * computes); adjacent actions with equal phase form one group. NULL if out of memory.
 */
typedef struct {
    int t;
    int prod;
    int kind;
    Action a;
    int phase;
} PhasedItem;

static int phased_cmp(const void* x, const void* y) {
    const PhasedItem* a = (const PhasedItem*)x;
    const PhasedItem* b = (const PhasedItem*)y;
    if (a->t != b->t) return a->t < b->t ? -1 : 1;
    if (a->prod != b->prod) return a->prod < b->prod ? -1 : 1;
    return a->kind - b->kind;
}

// message index: receiving stage, direction (0 activation, 1 gradient), micro-batch, receiving chunk
static size_t phased_msg(int to, int dir, int k, int c, int m, int nchunk) {
    return (((size_t)to * 2 + dir) * m + k) * nchunk + c;
}
// the message a send of `stage` carries (as its receiver names it)
static size_t phased_send_msg(const Action* a, int stage, int PP, int nchunk, int m) {
    if (a->kind == ACT_SEND_ACT)
        return phased_msg((stage + 1) % PP, 0, a->micro, stage == PP - 1 ? a->chunk + 1 : a->chunk, m, nchunk);
    return phased_msg((stage + PP - 1) % PP, 1, a->micro, stage == 0 ? a->chunk - 1 : a->chunk, m, nchunk);
}

static Action* pipe_phased(int zb, int stage, int PP, int nchunk, int m, int forward_only, int** phase, int* n) {
    Action** plans = (Action**)calloc(PP, sizeof(Action*));
    int* len = (int*)calloc(PP, sizeof(int));
    int* pos = (int*)calloc(PP, sizeof(int));
    size_t nmsg = (size_t)PP * 2 * m * nchunk;
    int* made = (int*)calloc(nmsg, sizeof(int)); // round that produced each message (0: not yet)
    int* need = (int*)calloc(nmsg, sizeof(int)); // round whose compute consumes it
    int* round_of = NULL;                        // (len[stage]) round of each action of `stage`
    Action* out = NULL;
    int* ph = NULL;
    PhasedItem* items = NULL;
    int ok = plans && len && pos && made && need;
    for (int s = 0; ok && s < PP; s++) {
        plans[s] = pipe_schedule(zb, s, PP, nchunk, m, forward_only, &len[s]);
        ok = plans[s] != NULL;
    }
    if (ok) {
        round_of = (int*)calloc(len[stage] + 1, sizeof(int));
        ok = round_of != NULL;
    }
    // rounds: each stage computes its next unit once every receive before it has arrived
    int left = 0;
    for (int s = 0; ok && s < PP; s++) left += len[s];
    for (int r = 1; ok && left > 0; r++) {
        int progress = 0;
        for (int s = 0; s < PP; s++) {
            int i = pos[s], ready = 1;
            for (; i < len[s] && (plans[s][i].kind == ACT_RECV_ACT || plans[s][i].kind == ACT_RECV_GRAD); i++) {
                const Action* a = &plans[s][i];
                int d = made[phased_msg(s, a->kind == ACT_RECV_GRAD, a->micro, a->chunk, m, nchunk)];
                if (d == 0 || d >= r) ready = 0;
            }
            if (!ready || i >= len[s]) continue;
            for (int j = pos[s]; j < i; j++) {
                const Action* a = &plans[s][j];
                need[phased_msg(s, a->kind == ACT_RECV_GRAD, a->micro, a->chunk, m, nchunk)] = r;
            }
            for (i++; i < len[s] && (plans[s][i].kind == ACT_SEND_ACT || plans[s][i].kind == ACT_SEND_GRAD); i++)
                made[phased_send_msg(&plans[s][i], s, PP, nchunk, m)] = r;
            if (s == stage)
                for (int j = pos[s]; j < i; j++) round_of[j] = r;
            left -= i - pos[s];
            pos[s] = i;
            progress = 1;
        }
        if (!progress) ok = 0; // cannot happen for lists the tests accept; refuse rather than spin
    }
    int ns = ok ? len[stage] : 0;
    if (ok) {
        items = (PhasedItem*)malloc(sizeof(PhasedItem) * (ns + 1));
        out = (Action*)malloc(sizeof(Action) * (ns + 1));
        ph = (int*)malloc(sizeof(int) * (ns + 1));
        ok = items && out && ph;
    }
    for (int i = 0; ok && i < ns; i++) {
        const Action* a = &plans[stage][i];
        PhasedItem* it = &items[i];
        it->a = *a;
        it->kind = a->kind;
        it->prod = 0;
        it->phase = -1;
        if (action_computes(a->kind)) {
            it->t = 2 * round_of[i];
            continue;
        }
        size_t msg = (a->kind == ACT_SEND_ACT || a->kind == ACT_SEND_GRAD)
                         ? phased_send_msg(a, stage, PP, nchunk, m)
                         : phased_msg(stage, a->kind == ACT_RECV_GRAD, a->micro, a->chunk, m, nchunk);
        it->phase = need[msg] - 1;
        it->prod = made[msg];
        it->t = 2 * it->phase + 1;
    }
    if (ok) {
        qsort(items, ns, sizeof(PhasedItem), phased_cmp);
        for (int i = 0; i < ns; i++) {
            out[i] = items[i].a;
            ph[i] = items[i].phase;
        }
        *n = ns;
        *phase = ph;
    } else {
        free(out);
        free(ph);
        out = NULL;
    }
    for (int s = 0; plans && s < PP; s++) free(plans[s]);
    free(plans);
    free(len);
    free(pos);
    free(made);
    free(need);
    free(round_of);
    free(items);
    return out;
}

/*
 * Gradient buffers of the interleaved schedule: a pool of buffers, each held by one unit
 * from its RECV_GRAD (or its BACKWARD where the unit is the last virtual stage) until its
 * SEND_GRAD's group has ended (or its BACKWARD, on virtual stage 0). A release inside a
 * group takes effect when the group ends, so no group both reads and writes one buffer.
 */
typedef struct {
    int n;
    int* unit;
    int* pending;
} UnitPool; // unit: k*nchunk + c or -1; pending: released at group end

static int pool_init(UnitPool* p, int n) {
    p->n = n;
    p->unit = (int*)malloc(sizeof(int) * n);
    p->pending = (int*)malloc(sizeof(int) * n);
    if (p->unit == NULL || p->pending == NULL) return 0;
    for (int i = 0; i < n; i++) {
        p->unit[i] = -1;
        p->pending[i] = 0;
    }
    return 1;
}
static void pool_free(UnitPool* p) {
    free(p->unit);
    free(p->pending);
    p->unit = p->pending = NULL;
    p->n = 0;
}
// the buffer of `unit`, taken from the free ones on first touch; -1 when none is free
static int pool_get(UnitPool* p, int unit) {
    int free_i = -1;
    for (int i = 0; i < p->n; i++) {
        if (p->unit[i] == unit) return i;
        if (p->unit[i] < 0 && free_i < 0) free_i = i;
    }
    if (free_i >= 0) p->unit[free_i] = unit;
    return free_i;
}
static void pool_release(UnitPool* p, int unit, int at_group_end) {
    for (int i = 0; i < p->n; i++)
        if (p->unit[i] == unit) {
            if (at_group_end)
                p->pending[i] = 1;
            else
                p->unit[i] = -1;
        }
}
static void pool_group_end(UnitPool* p) {
    for (int i = 0; i < p->n; i++)
        if (p->pending[i]) {
            p->pending[i] = 0;
            p->unit[i] = -1;
        }
}
static int pool_held(const UnitPool* p) {
    int h = 0;
    for (int i = 0; i < p->n; i++) h += p->unit[i] >= 0;
    return h;
}

// The gradient-pool events of action a (stage `stage`): the unit's buffer is taken at
// RECV_GRAD or at BACKWARD on the last virtual stage, released at group end after
// SEND_GRAD or right after BACKWARD on virtual stage 0.
static int grad_takes(const Action* a, int stage, int PP, int nchunk) {
    return a->kind == ACT_RECV_GRAD || (a->kind == ACT_BACKWARD && a->chunk * PP + stage == PP * nchunk - 1);
}
static int grad_frees_now(const Action* a, int stage, int PP) {
    return a->kind == ACT_BACKWARD && a->chunk * PP + stage == 0;
}

// The most gradient buffers `stage` holds at once with list a (phase: the groups, or
// NULL for runs of adjacent communication actions).
static int pipe_grad_buffers(const Action* a, const int* phase, int n, int stage, int PP, int nchunk) {
    UnitPool p;
    if (!pool_init(&p, n + 1)) return -1; // room for every unit: the count is never capped
    int most = 0;
    for (int i = 0; i < n; i++) {
        int unit = a[i].micro * nchunk + a[i].chunk;
        if (grad_takes(&a[i], stage, PP, nchunk)) pool_get(&p, unit);
        int h = pool_held(&p);
        if (h > most) most = h;
        if (grad_frees_now(&a[i], stage, PP)) pool_release(&p, unit, 0);
        if (a[i].kind == ACT_SEND_GRAD) pool_release(&p, unit, 1);
        int comm = !action_computes(a[i].kind);
        int next_comm = i + 1 < n && !action_computes(a[i + 1].kind);
        int group_ends = comm && (!next_comm || (phase != NULL && phase[i + 1] != phase[i]));
        if (group_ends) pool_group_end(&p);
    }
    pool_free(&p);
    return most;
}

// Gradient buffers `stage` needs for every step a run can make: the most over the
// micro-batch counts PP, 2PP, ... up to m_max (-vpp needs multiples of PP); phased: the NCCL
// list; zb: the zb-h1 lists. Two (the 1F1B double buffer) at least; -1 if out of memory.
static int pipe_grad_buffers_max(int zb, int stage, int PP, int nchunk, int m_max, int phased) {
    int most = 2;
    for (int m = PP; nchunk > 1 && m <= m_max; m += PP) {
        int n, *phase = NULL;
        Action* a = phased ? pipe_phased(zb, stage, PP, nchunk, m, 0, &phase, &n)
                           : pipe_schedule(zb, stage, PP, nchunk, m, 0, &n);
        if (a == NULL) return -1;
        int k = pipe_grad_buffers(a, phase, n, stage, PP, nchunk);
        free(a);
        free(phase);
        if (k < 0) return -1;
        if (k > most) most = k;
    }
    return most;
}

#endif // LLMC_LAYOUT_H
