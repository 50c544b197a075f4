/*
 * test_pp_groups.cu: the pipeline communication of train_gpt.cu under NCCL semantics,
 * simulated on the host (no GPU needed). NCCL point-to-point is blocking on the stream: a
 * group of sends/receives finishes only when every peer has posted the matching operation,
 * and two ranks' messages are matched by order, not by tag. The trainer posts
 *   - 1F1B (-vpp 1): each maximal run of adjacent communication actions as one group;
 *   - interleaved (-vpp V > 1): pipe_phased's list, one group per run of actions with
 *     the same phase (llmc/host/layout.h explains the phases).
 * For every PP <= 8 and micro-batch count <= 16 (1F1B), every PP <= 8, V <= 4 and m in
 * PP, 2PP, 3PP, 4PP (interleaved), training and forward-only, this check shows that
 *   1. the n-th send on each directed link carries the message of the n-th receive,
 *   2. no layout deadlocks: every stage finishes all its groups,
 *   3. no group both writes and reads/writes one buffer (the operations of a group run
 *      concurrently): activation slots as the trainer assigns them (k % PP for 1F1B, the
 *      first free of pipe_slots for interleaved, released at the unit's backward, or
 *      at the end of its send's group when forward-only), gradient buffers (k % 2, or the
 *      pool of pipe_grad_buffers), and the pools never run dry.
 * It also shows that posting the interleaved list's runs of adjacent actions as groups
 * (what the trainer did before the phases) deadlocks in some layouts: the simulation can
 * fail.
 *
 * The same layouts under the overlapped pipeline (the default with NCCL, LLMC_PP_OVERLAP=1;
 * sim_build says what waits for what): per rank a compute stream and a stream per link, a
 * send completing only with the matching receive (the k-th on its link) posted and its data
 * produced. It shows that every layout completes, each rank computes in its list's order
 * (the same as the plain list's: numbers unchanged), each link's k-th send and receive carry
 * the same message, and no buffer is written while a send from it or a receive into it is in
 * flight (every two ops on a buffer, one writing, are ordered by the waits). Three mistakes
 * must each be caught somewhere: a receive that does not wait for its buffer's last compute,
 * a transfer that does not wait for the buffer's previous transfer, and one link whose
 * receiver takes two messages in the other order.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "../../llmc/host/layout.h"

typedef struct {
    ActionKind kind;
    int micro, chunk, group;
} Op;

static int is_comm(ActionKind k) { return !action_computes(k); }

// the schedule simulated: 0 1F1B / interleaved, 1 zb-h1 (W's, compute only: they touch no
// slot or gradient buffer, so they wait only for the compute before them)
static int g_zb = 0;
static int sim_slots(int stage, int PP, int V) { return V == 1 ? PP : pipe_slots(stage, PP, V); }
static Action* sim_plan(int mode, int s, int PP, int V, int m, int fo, int** phase, int* n) {
    *phase = NULL;
    if (mode == 1) return pipe_phased(g_zb, s, PP, V, m, fo, phase, n);
    return pipe_schedule(g_zb, s, PP, V, m, fo, n);
}

// Groups of one stage's list: a comm action starts a new group after a compute, or when
// its phase differs from the previous action's (phase NULL: runs of adjacent actions).
// Buffers as the trainer assigns them; *hazard / *dry are set on a conflict / empty pool.
static int build_ops(const Action* plan, const int* phase, int n, int stage, int PP, int V, int fo, Op* ops,
                     int* ngroups, int* hazard, int* dry) {
    int nops = 0, g = -1;
    UnitPool slots, grads;
    int nslots = sim_slots(stage, PP, V);
    int ngrad = V == 1 ? 2 : pipe_grad_buffers(plan, phase, n, stage, PP, V);
    pool_init(&slots, nslots);
    pool_init(&grads, ngrad > 0 ? ngrad : 1);
    int* buf = (int*)malloc(sizeof(int) * (n + 1)); // buffer id of each op in the current group
    int* wr = (int*)malloc(sizeof(int) * (n + 1));
    int nbw = 0;
    for (int i = 0; i < n; i++) {
        const Action* a = &plan[i];
        int unit = a->micro * V + a->chunk, last = a->chunk * PP + stage == PP * V - 1;
        if (a->kind == ACT_WEIGHT) continue; // zb-h1's W: its stash only
        if (!is_comm(a->kind)) {
            if (V > 1) {
                if (pool_get(&slots, unit) < 0) *dry = 1;
                if (grad_takes(a, stage, PP, V) && pool_get(&grads, unit) < 0) *dry = 1;
                if (a->kind == ACT_BACKWARD) pool_release(&slots, unit, 0);
                if (a->kind == ACT_FORWARD && fo && last) pool_release(&slots, unit, 0);
                if (grad_frees_now(a, stage, PP)) pool_release(&grads, unit, 0);
            }
            continue;
        }
        if (i == 0 || !is_comm(plan[i - 1].kind) || (phase != NULL && phase[i] != phase[i - 1])) {
            g++;
            nbw = 0;
        }
        int b, w;
        if (V == 1) {
            switch (a->kind) { // slot inputs x[0], slot outputs x[nl], gradient buffers by backward parity
                case ACT_RECV_ACT:
                    b = 100 + a->micro % PP;
                    w = 1;
                    break;
                case ACT_SEND_ACT:
                    b = 200 + a->micro % PP;
                    w = 0;
                    break;
                case ACT_RECV_GRAD:
                    b = 300 + a->micro % 2;
                    w = 1;
                    break;
                default:
                    b = 300 + a->micro % 2;
                    w = 0;
                    break;
            }
        } else {
            int act = a->kind == ACT_RECV_ACT || a->kind == ACT_SEND_ACT;
            int s = act ? pool_get(&slots, unit) : -1, gb = act ? -1 : pool_get(&grads, unit);
            if ((act ? s : gb) < 0) *dry = 1;
            switch (a->kind) {
                case ACT_RECV_ACT:
                    b = 100 + s;
                    w = 1;
                    break;
                case ACT_SEND_ACT:
                    b = 1000 + s;
                    w = 0;
                    if (fo) pool_release(&slots, unit, 1);
                    break;
                case ACT_RECV_GRAD:
                    b = 10000 + gb;
                    w = 1;
                    break;
                default:
                    b = 10000 + gb;
                    w = 0;
                    pool_release(&grads, unit, 1);
                    break;
            }
        }
        for (int j = 0; j < nbw; j++)
            if (buf[j] == b && (wr[j] || w)) *hazard = 1;
        buf[nbw] = b;
        wr[nbw] = w;
        nbw++;
        Op o = {a->kind, a->micro, a->chunk, g};
        ops[nops++] = o;
        int next_comm = i + 1 < n && is_comm(plan[i + 1].kind) && (phase == NULL || phase[i + 1] == phase[i]);
        if (!next_comm) {
            pool_group_end(&slots);
            pool_group_end(&grads);
        }
    }
    pool_free(&slots);
    pool_free(&grads);
    free(buf);
    free(wr);
    *ngroups = g + 1;
    return nops;
}

// the receiving (chunk, direction) a send names, as its receiver does
static void send_target(const Op* o, int stage, int PP, int* to, int* chunk) {
    if (o->kind == ACT_SEND_ACT) {
        *to = (stage + 1) % PP;
        *chunk = stage == PP - 1 ? o->chunk + 1 : o->chunk;
    } else {
        *to = (stage + PP - 1) % PP;
        *chunk = stage == 0 ? o->chunk - 1 : o->chunk;
    }
}

// Matches sends and receives per directed link (stage pair, in order) and runs the groups:
// a group completes when each of its ops' partners is in its stage's current group.
static void simulate(Op** ops, const int* nops, const int* ngroups, int PP, int* ok_order, int* finished) {
    int* pst[8];
    int* pop[8];
    for (int s = 0; s < PP; s++) {
        pst[s] = (int*)malloc(sizeof(int) * (nops[s] + 1));
        pop[s] = (int*)malloc(sizeof(int) * (nops[s] + 1));
        for (int i = 0; i < nops[s]; i++) pst[s][i] = -1;
    }
    for (int from = 0; from < PP; from++)
        for (int to = 0; to < PP; to++) {
            if (from == to) continue;
            int i = 0, j = 0;
            for (;;) {
                int t = -1, c = -1;
                for (; i < nops[from]; i++) {
                    if (ops[from][i].kind != ACT_SEND_ACT && ops[from][i].kind != ACT_SEND_GRAD) continue;
                    send_target(&ops[from][i], from, PP, &t, &c);
                    if (t == to) break;
                }
                for (; j < nops[to]; j++) {
                    const Op* r = &ops[to][j];
                    if (r->kind == ACT_RECV_ACT && (to + PP - 1) % PP == from) break;
                    if (r->kind == ACT_RECV_GRAD && (to + 1) % PP == from) break;
                }
                if (i >= nops[from] || j >= nops[to]) {
                    if (i < nops[from] || j < nops[to]) *ok_order = 0;
                    break;
                }
                const Op* sd = &ops[from][i];
                const Op* rv = &ops[to][j];
                int want = sd->kind == ACT_SEND_ACT ? ACT_RECV_ACT : ACT_RECV_GRAD;
                if ((int)rv->kind != want || rv->micro != sd->micro || rv->chunk != c) *ok_order = 0;
                pst[from][i] = to;
                pop[from][i] = j;
                pst[to][j] = from;
                pop[to][j] = i;
                i++;
                j++;
            }
        }
    for (int s = 0; s < PP; s++)
        for (int i = 0; i < nops[s]; i++)
            if (pst[s][i] < 0) *ok_order = 0;
    int cur[8] = {0};
    char* done[8];
    for (int s = 0; s < PP; s++) done[s] = (char*)calloc(nops[s] + 1, 1);
    int progress = 1;
    while (progress) {
        progress = 0;
        for (int s = 0; s < PP; s++)
            for (int i = 0; i < nops[s]; i++) {
                if (done[s][i] || ops[s][i].group != cur[s] || pst[s][i] < 0) continue;
                int ps = pst[s][i], pi = pop[s][i];
                if (ops[ps][pi].group == cur[ps]) {
                    done[s][i] = done[ps][pi] = 1;
                    progress = 1;
                }
            }
        for (int s = 0; s < PP; s++) {
            if (cur[s] >= ngroups[s]) continue;
            int all = 1;
            for (int i = 0; i < nops[s]; i++)
                if (ops[s][i].group == cur[s] && !done[s][i]) all = 0;
            if (all) {
                cur[s]++;
                progress = 1;
            }
        }
    }
    *finished = 1;
    for (int s = 0; s < PP; s++)
        if (cur[s] != ngroups[s]) *finished = 0;
    for (int s = 0; s < PP; s++) {
        free(pst[s]);
        free(pop[s]);
        free(done[s]);
    }
}

// ---------------------------------------------------------------------------------------
// The overlapped pipeline (LLMC_PP_OVERLAP=1, nccl_comm.cuh's dc_pp_*): per rank a compute
// stream and one stream per link (ordered pair of neighbouring stages: only sends on the
// sender's end, only receives on the receiver's). What waits for what, as pipe_execute and
// dc_pp_* issue it (per buffer b: used = the last compute that touched b, comm = the last
// send from / receive into b, pending = compute has not waited for comm yet):
//   send from b:   its link stream's previous op, the compute issued so far, b's comm;
//   receive into b: its link stream's previous op, b's used, b's comm;
//   compute on buffers B (the unit's slot; backward also its gradient buffer): the previous
//                  compute, comm of each pending b in B;
//   end:           the compute stream waits for every link stream's last op.
// The k-th send on a link and the k-th receive complete together, once both have started
// (their waits are done): an NCCL send waits for its receiver. Buffers: as the trainer
// assigns them (slots and gradient buffers, released at the end of a run of communication
// actions as before), one id per allocation (x[0] and x[L] of a slot are one buffer: the
// emulation's detector sees them so).
enum { SIM_COMPUTE, SIM_SEND, SIM_RECV, SIM_END };
enum { MUT_NONE, MUT_NO_USED_WAIT, MUT_LINK_ORDER, MUT_NO_COMM_WAIT };
#define SIM_MAXDEP 8
typedef struct {
    int kind, link; // link: from * 8 + to
    ActionKind akind;
    int micro, chunk, tchunk;  // the action; tchunk: the receiving chunk a send names
    int buf[2], nbuf;          // buffer ids (slot s, or 1000 + gradient buffer)
    int dep[SIM_MAXDEP], ndep; // op indices within the rank
    int partner_rank, partner; // the matched op (comm)
} SimOp;
typedef struct {
    SimOp* op;
    int n;
} SimRank;

// the neighbour pairs that exchange messages (nccl_comm.cuh's dc_pp_neighbours)
static int sim_neighbours(int a, int b, int PP, int V) {
    if (a == b) return 0;
    if (a - b == 1 || b - a == 1) return 1;
    return V > 1 && ((a == 0 && b == PP - 1) || (a == PP - 1 && b == 0));
}

static void sim_dep(SimOp* o, int d) {
    if (d < 0) return;
    if (o->ndep == SIM_MAXDEP) {
        printf("FAIL internal: more than %d waits on one op\n", SIM_MAXDEP);
        exit(1);
    }
    o->dep[o->ndep++] = d;
}

// One rank's ops in the overlapped pipeline, built the way pipe_execute walks its list.
// *dry: a pool ran out; *bad_link: a message to or from a stage that is no neighbour.
static void sim_build(const Action* plan, const int* phase, int n, int stage, int PP, int V, int fo, int mut,
                      SimRank* R, int* dry, int* bad_link) {
    R->op = (SimOp*)calloc(n + 2, sizeof(SimOp));
    R->n = 0;
    UnitPool slots, grads;
    int nslots = sim_slots(stage, PP, V);
    int ngrad = V == 1 ? 2 : pipe_grad_buffers(plan, phase, n, stage, PP, V);
    pool_init(&slots, nslots);
    pool_init(&grads, ngrad > 0 ? ngrad : 1);
    int nb = 1000 + (ngrad > 0 ? ngrad : 1);
    int* used = (int*)malloc(sizeof(int) * nb);
    int* commop = (int*)malloc(sizeof(int) * nb);
    char* pending = (char*)calloc(nb, 1);
    for (int i = 0; i < nb; i++) used[i] = commop[i] = -1;
    int link_last[64], compute_last = -1;
    for (int i = 0; i < 64; i++) link_last[i] = -1;
    for (int i = 0; i < n; i++) {
        const Action* a = &plan[i];
        int unit = a->micro * V + a->chunk, last = a->chunk * PP + stage == PP * V - 1;
        SimOp* o = &R->op[R->n];
        memset(o, 0, sizeof(*o));
        o->akind = a->kind;
        o->micro = a->micro;
        o->chunk = a->chunk;
        o->partner = -1;
        if (a->kind == ACT_WEIGHT) { // zb-h1's W on the compute stream: its stash only, no slot
            o->kind = SIM_COMPUTE;
            sim_dep(o, compute_last);
            compute_last = R->n++;
            continue;
        }
        if (!is_comm(a->kind)) { // FORWARD / BACKWARD on the compute stream
            int s = V == 1 ? a->micro % nslots : pool_get(&slots, unit);
            if (s < 0) {
                *dry = 1;
                s = 0;
            }
            o->kind = SIM_COMPUTE;
            o->buf[o->nbuf++] = s;
            if (a->kind == ACT_BACKWARD) {
                int gb = V == 1 ? a->micro % 2 : pool_get(&grads, unit);
                if (gb < 0) {
                    *dry = 1;
                    gb = 0;
                }
                o->buf[o->nbuf++] = 1000 + gb;
            }
            sim_dep(o, compute_last);
            for (int j = 0; j < o->nbuf; j++)
                if (pending[o->buf[j]]) {
                    sim_dep(o, commop[o->buf[j]]);
                    pending[o->buf[j]] = 0;
                }
            for (int j = 0; j < o->nbuf; j++) used[o->buf[j]] = R->n;
            compute_last = R->n++;
            if (V > 1) {
                if (a->kind == ACT_BACKWARD) pool_release(&slots, unit, 0);
                if (a->kind == ACT_FORWARD && fo && last) pool_release(&slots, unit, 0);
                if (grad_frees_now(a, stage, PP)) pool_release(&grads, unit, 0);
            }
            continue;
        }
        int peer, tag;
        pipe_peer(a, stage, PP, V, &peer, &tag);
        int send = a->kind == ACT_SEND_ACT || a->kind == ACT_SEND_GRAD,
            act = a->kind == ACT_RECV_ACT || a->kind == ACT_SEND_ACT;
        if (!sim_neighbours(stage, peer, PP, V)) *bad_link = 1;
        int b;
        if (act) {
            b = V == 1 ? a->micro % nslots : pool_get(&slots, unit);
        } else {
            b = V == 1 ? a->micro % 2 : pool_get(&grads, unit);
            if (b >= 0) b += 1000;
        }
        if (b < 0) {
            *dry = 1;
            b = 0;
        }
        o->kind = send ? SIM_SEND : SIM_RECV;
        o->link = send ? stage * 8 + peer : peer * 8 + stage;
        o->buf[o->nbuf++] = b;
        o->tchunk = a->kind == ACT_SEND_ACT ? (stage == PP - 1 ? a->chunk + 1 : a->chunk)
                                            : (stage == 0 ? a->chunk - 1 : a->chunk);
        sim_dep(o, link_last[o->link]);
        if (send)
            sim_dep(o, compute_last);
        else if (mut != MUT_NO_USED_WAIT)
            sim_dep(o, used[b]);
        if (mut != MUT_NO_COMM_WAIT) sim_dep(o, commop[b]);
        commop[b] = R->n;
        pending[b] = 1;
        link_last[o->link] = R->n++;
        if (V > 1 && a->kind == ACT_SEND_ACT && fo) pool_release(&slots, unit, 1);
        if (V > 1 && a->kind == ACT_SEND_GRAD) pool_release(&grads, unit, 1);
        int next_comm = i + 1 < n && is_comm(plan[i + 1].kind) && (phase == NULL || phase[i + 1] == phase[i]);
        if (!next_comm) {
            pool_group_end(&slots);
            pool_group_end(&grads);
        }
    }
    SimOp* e = &R->op[R->n]; // the compute stream's join of the link streams
    memset(e, 0, sizeof(*e));
    e->kind = SIM_END;
    e->partner = -1;
    sim_dep(e, compute_last);
    for (int l = 0; l < 64; l++) sim_dep(e, link_last[l]);
    R->n++;
    pool_free(&slots);
    pool_free(&grads);
    free(used);
    free(commop);
    free(pending);
}
// Matches each link's k-th send and k-th receive (*ok_order: the same message, every op
// matched), runs every rank's streams (an op starts when its waits are done; a matched pair
// completes when both have started; compute completes when it starts) and checks that all
// complete (*finished), that each rank's computes complete in list order (*in_order), and
// that every two ops on one buffer, one of them writing (a receive or a compute), are
// ordered: the earlier one in the rank's list completes before the later one starts (*hazard
// when not). mut == MUT_LINK_ORDER: the receiver of one link takes its first two messages
// in the other order.
static void sim_run(SimRank* R, int PP, int mut, int* ok_order, int* finished, int* in_order, int* hazard) {
    int base[9], N = 0;
    for (int s = 0; s < PP; s++) {
        base[s] = N;
        N += R[s].n;
    }
    base[PP] = N;
    for (int from = 0; from < PP; from++)
        for (int to = 0; to < PP; to++) {
            if (from == to) continue;
            int l = from * 8 + to, i = 0, j = 0, swapped = 0;
            for (;;) {
                while (i < R[from].n && !(R[from].op[i].kind == SIM_SEND && R[from].op[i].link == l)) i++;
                while (j < R[to].n && !(R[to].op[j].kind == SIM_RECV && R[to].op[j].link == l)) j++;
                if (i >= R[from].n || j >= R[to].n) {
                    if (i < R[from].n || j < R[to].n) *ok_order = 0;
                    break;
                }
                if (mut == MUT_LINK_ORDER && !swapped && from == 0 &&
                    to == 1) { // find the receiver's next one on the link
                    int j2 = j + 1;
                    while (j2 < R[to].n && !(R[to].op[j2].kind == SIM_RECV && R[to].op[j2].link == l)) j2++;
                    if (j2 < R[to].n) {
                        SimOp t = R[to].op[j]; // swap the two receives' messages (their place in the list stays)
                        R[to].op[j].akind = R[to].op[j2].akind;
                        R[to].op[j].micro = R[to].op[j2].micro;
                        R[to].op[j].chunk = R[to].op[j2].chunk;
                        R[to].op[j2].akind = t.akind;
                        R[to].op[j2].micro = t.micro;
                        R[to].op[j2].chunk = t.chunk;
                    }
                    swapped = 1;
                }
                SimOp* sd = &R[from].op[i];
                SimOp* rv = &R[to].op[j];
                ActionKind want = sd->akind == ACT_SEND_ACT ? ACT_RECV_ACT : ACT_RECV_GRAD;
                if (rv->akind != want || rv->micro != sd->micro || rv->chunk != sd->tchunk) *ok_order = 0;
                sd->partner_rank = to;
                sd->partner = j;
                rv->partner_rank = from;
                rv->partner = i;
                i++;
                j++;
            }
        }
    for (int s = 0; s < PP; s++)
        for (int i = 0; i < R[s].n; i++)
            if ((R[s].op[i].kind == SIM_SEND || R[s].op[i].kind == SIM_RECV) && R[s].op[i].partner < 0) *ok_order = 0;
    // event-driven run: remaining waits per op, the ops waiting on each, a queue of completions
    int* left = (int*)calloc(N + 1, sizeof(int));
    char* started = (char*)calloc(N + 1, 1);
    char* done = (char*)calloc(N + 1, 1);
    int* nwait = (int*)calloc(N + 1, sizeof(int));
    int* woff = (int*)calloc(N + 2, sizeof(int));
    for (int s = 0; s < PP; s++)
        for (int i = 0; i < R[s].n; i++)
            for (int d = 0; d < R[s].op[i].ndep; d++) nwait[base[s] + R[s].op[i].dep[d]]++;
    for (int x = 0; x < N; x++) woff[x + 1] = woff[x] + nwait[x];
    int* waiters = (int*)malloc(sizeof(int) * (woff[N] + 1));
    int* wpos = (int*)calloc(N + 1, sizeof(int));
    for (int s = 0; s < PP; s++)
        for (int i = 0; i < R[s].n; i++) {
            left[base[s] + i] = R[s].op[i].ndep;
            for (int d = 0; d < R[s].op[i].ndep; d++) {
                int x = base[s] + R[s].op[i].dep[d];
                waiters[woff[x] + wpos[x]++] = base[s] + i;
            }
        }
    int* order = (int*)malloc(sizeof(int) * (N + 1));
    int nord = 0, head = 0;
    int* ready = (int*)malloc(sizeof(int) * (N + 1));
    int nready = 0;
    for (int x = 0; x < N; x++)
        if (left[x] == 0) ready[nready++] = x;
    // rank and index of a global op
    int* rk = (int*)malloc(sizeof(int) * (N + 1));
    for (int s = 0; s < PP; s++)
        for (int i = 0; i < R[s].n; i++) rk[base[s] + i] = s;
    while (nready > 0 || head < nord) {
        while (nready > 0) { // start it; complete what can
            int x = ready[--nready];
            started[x] = 1;
            const SimOp* o = &R[rk[x]].op[x - base[rk[x]]];
            if (o->kind == SIM_COMPUTE || o->kind == SIM_END) {
                done[x] = 1;
                order[nord++] = x;
            } else if (o->partner >= 0) {
                int y = base[o->partner_rank] + o->partner;
                if (started[y]) {
                    done[x] = done[y] = 1;
                    order[nord++] = x;
                    order[nord++] = y;
                }
            }
        }
        while (head < nord) {
            int x = order[head++];
            for (int w = woff[x]; w < woff[x + 1]; w++)
                if (--left[waiters[w]] == 0) ready[nready++] = waiters[w];
        }
    }
    *finished = nord == N;
    // computes in list order
    for (int s = 0; s < PP; s++) {
        int prev = -1;
        for (int k = 0; k < nord; k++) {
            if (rk[order[k]] != s) continue;
            int i = order[k] - base[s];
            if (R[s].op[i].kind != SIM_COMPUTE) continue;
            if (i < prev) *in_order = 0;
            prev = i;
        }
    }
    // happens-before: startanc(x) = union over x's waits d of endanc(d); endanc(d) = startanc(d)
    // + d, and for a matched pair also the partner's startanc + the partner (they end together)
    size_t W = (size_t)(N + 63) / 64;
    uint64_t* anc = (uint64_t*)calloc((size_t)(N + 1) * W, sizeof(uint64_t));
    for (int k = 0; *finished && k < nord; k++) {
        int x = order[k];
        const SimOp* o = &R[rk[x]].op[x - base[rk[x]]];
        uint64_t* ax = anc + (size_t)x * W;
        for (int d = 0; d < o->ndep; d++) {
            int y = base[rk[x]] + o->dep[d];
            const SimOp* oy = &R[rk[y]].op[y - base[rk[y]]];
            const uint64_t* ay = anc + (size_t)y * W;
            for (size_t w = 0; w < W; w++) ax[w] |= ay[w];
            ax[y / 64] |= 1ull << (y % 64);
            if (oy->kind == SIM_SEND || oy->kind == SIM_RECV) {
                int z = base[oy->partner_rank] + oy->partner;
                const uint64_t* az = anc + (size_t)z * W;
                for (size_t w = 0; w < W; w++) ax[w] |= az[w];
                ax[z / 64] |= 1ull << (z % 64);
            }
        }
    }
    // (a matched pair's startanc is computed when the second of the two completes: both
    // have started, so their waits' ancestries are final by then; order[] lists x before y
    // only after every wait of both completed)
    for (int s = 0; *finished && s < PP; s++)
        for (int i = 0; i < R[s].n; i++) {
            const SimOp* a = &R[s].op[i];
            if (a->kind == SIM_END) continue;
            for (int j = i + 1; j < R[s].n; j++) {
                const SimOp* b = &R[s].op[j];
                if (b->kind == SIM_END) continue;
                int wa = a->kind != SIM_SEND, wb = b->kind != SIM_SEND;
                if (!wa && !wb) continue;
                if (a->kind == SIM_COMPUTE && b->kind == SIM_COMPUTE) continue; // one stream: in order
                int share = 0;
                for (int p = 0; p < a->nbuf; p++)
                    for (int q = 0; q < b->nbuf; q++) share |= a->buf[p] == b->buf[q];
                if (!share) continue;
                int x = base[s] + i, y = base[s] + j;
                if (!(anc[(size_t)y * W + x / 64] >> (x % 64) & 1)) *hazard = 1;
            }
        }
    free(left);
    free(started);
    free(done);
    free(nwait);
    free(woff);
    free(waiters);
    free(wpos);
    free(order);
    free(ready);
    free(rk);
    free(anc);
}

// mode 0: 1F1B, 1: phased interleaved (the lists the trainer runs with NCCL), under the
// overlapped pipeline; mut: a deliberate mistake (MUT_*) that must be caught somewhere
static int check_overlap_layout(int mode, int PP, int V, int m, int fo, int mut, int quiet) {
    SimRank R[8];
    int ok_order = 1, finished = 0, in_order = 1, hazard = 0, dry = 0, bad_link = 0, same_computes = 1;
    for (int s = 0; s < PP; s++) {
        int n, *phase = NULL, n0;
        Action* plan = sim_plan(mode, s, PP, V, m, fo, &phase, &n);
        Action* plain = pipe_schedule(g_zb, s, PP, V, m, fo, &n0);
        if (plan == NULL || plain == NULL) {
            printf("FAIL PP=%d V=%d m=%d: no schedule\n", PP, V, m);
            exit(1);
        }
        // the computes keep the plain list's order (the numbers do not change)
        int i = 0, j = 0;
        for (;;) {
            while (i < n && is_comm(plan[i].kind)) i++;
            while (j < n0 && is_comm(plain[j].kind)) j++;
            if (i >= n || j >= n0) {
                if (i < n || j < n0) same_computes = 0;
                break;
            }
            if (plan[i].kind != plain[j].kind || plan[i].micro != plain[j].micro || plan[i].chunk != plain[j].chunk)
                same_computes = 0;
            i++;
            j++;
        }
        sim_build(plan, phase, n, s, PP, V, fo, mut, &R[s], &dry, &bad_link);
        free(plan);
        free(phase);
        free(plain);
    }
    sim_run(R, PP, mut, &ok_order, &finished, &in_order, &hazard);
    for (int s = 0; s < PP; s++) free(R[s].op);
    int ok = ok_order && finished && in_order && !hazard && !dry && !bad_link && same_computes;
    if (!ok && !quiet)
        printf(
            "FAIL overlapped PP=%d V=%d m=%d %s: order %d, no deadlock %d, computes in order %d (as the plain list "
            "%d), "
            "buffer hazard-free %d, pools enough %d, links only to neighbours %d\n",
            PP, V, m, fo ? "forward-only" : "training", ok_order, finished, in_order, same_computes, !hazard, !dry,
            !bad_link);
    return ok;
}

// mode 0: 1F1B runs; 1: phased interleaved; 2: interleaved runs (the old grouping)
static int check_layout(int mode, int PP, int V, int m, int fo, int* most_grads, int quiet) {
    Op* ops[8];
    int nops[8], ngroups[8];
    int ok_order = 1, hazard = 0, dry = 0, finished = 0;
    for (int s = 0; s < PP; s++) {
        int n, *phase = NULL;
        Action* plan = sim_plan(mode, s, PP, V, m, fo, &phase, &n);
        if (plan == NULL) {
            printf("FAIL PP=%d V=%d m=%d: no schedule\n", PP, V, m);
            exit(1);
        }
        if (mode == 1 && !fo) {
            int gb = pipe_grad_buffers(plan, phase, n, s, PP, V);
            if (gb > *most_grads) *most_grads = gb;
        }
        ops[s] = (Op*)malloc(sizeof(Op) * (n + 1));
        nops[s] = build_ops(plan, phase, n, s, PP, V, fo, ops[s], &ngroups[s], &hazard, &dry);
        free(plan);
        free(phase);
    }
    simulate(ops, nops, ngroups, PP, &ok_order, &finished);
    for (int s = 0; s < PP; s++) free(ops[s]);
    int ok = ok_order && !hazard && !dry && finished;
    if (!ok && !quiet)
        printf("FAIL PP=%d V=%d m=%d %s: order %d, buffer hazard-free %d, pools enough %d, no deadlock %d\n", PP, V, m,
               fo ? "forward-only" : "training", ok_order, !hazard, !dry, finished);
    return ok;
}

int main(void) {
    int pass = 0, fail = 0, n1 = 0, n2 = 0, old_deadlocks = 0, old_total = 0, most_grads = 0;
    for (int fo = 0; fo < 2; fo++)
        for (int PP = 1; PP <= 8; PP++)
            for (int m = 1; m <= 16; m++, n1++) check_layout(0, PP, 1, m, fo, &most_grads, 0) ? pass++ : fail++;
    printf("ok   1F1B groups: %d layouts (PP 1..8, m 1..16, training and forward-only) simulated\n", n1);
    for (int fo = 0; fo < 2; fo++)
        for (int PP = 2; PP <= 8; PP++)
            for (int V = 2; V <= 4; V++)
                for (int m = PP; m <= 4 * PP; m += PP, n2++) {
                    check_layout(1, PP, V, m, fo, &most_grads, 0) ? pass++ : fail++;
                    old_total++;
                    if (!check_layout(2, PP, V, m, fo, &most_grads, 1)) old_deadlocks++;
                }
    printf(
        "ok   phased interleaved groups: %d layouts (PP 2..8, V 2..4, m = PP..4PP, training and forward-only) "
        "simulated; "
        "at most %d gradient buffers\n",
        n2, most_grads);
    // the overlapped pipeline (the default with NCCL): the same layouts
    int n3 = 0, n4 = 0, caught[4] = {0, 0, 0, 0};
    for (int fo = 0; fo < 2; fo++)
        for (int PP = 1; PP <= 8; PP++)
            for (int m = 1; m <= 16; m++, n3++) {
                check_overlap_layout(0, PP, 1, m, fo, MUT_NONE, 0) ? pass++ : fail++;
                for (int mu = 1; mu < 4; mu++)
                    if (!check_overlap_layout(0, PP, 1, m, fo, mu, 1)) caught[mu]++;
            }
    printf("ok   overlapped 1F1B (link streams): %d layouts (PP 1..8, m 1..16, training and forward-only) simulated\n",
           n3);
    for (int fo = 0; fo < 2; fo++)
        for (int PP = 2; PP <= 8; PP++)
            for (int V = 2; V <= 4; V++)
                for (int m = PP; m <= 4 * PP; m += PP, n4++) {
                    check_overlap_layout(1, PP, V, m, fo, MUT_NONE, 0) ? pass++ : fail++;
                    for (int mu = 1; mu < 4; mu++)
                        if (!check_overlap_layout(1, PP, V, m, fo, mu, 1)) caught[mu]++;
                }
    printf(
        "ok   overlapped phased interleaved (link streams): %d layouts (PP 2..8, V 2..4, m = PP..4PP, training and "
        "forward-only) "
        "simulated: all complete, computes in list order, no buffer written while a transfer of it is in flight\n",
        n4);
    // zero bubble (-pp-schedule zb-h1): its lists, W's inserted, under both ways of posting
    g_zb = 1;
    int n5 = 0, zb_most = 0;
    for (int fo = 0; fo < 2; fo++) {
        for (int PP = 1; PP <= 8; PP++)
            for (int m = 1; m <= 16; m++, n5++) {
                check_layout(0, PP, 1, m, fo, &zb_most, 0) ? pass++ : fail++;
                check_overlap_layout(0, PP, 1, m, fo, MUT_NONE, 0) ? pass++ : fail++;
            }
        for (int PP = 2; PP <= 8; PP++)
            for (int V = 2; V <= 4; V++)
                for (int m = PP; m <= 4 * PP; m += PP, n5++) {
                    check_layout(1, PP, V, m, fo, &zb_most, 0) ? pass++ : fail++;
                    check_overlap_layout(1, PP, V, m, fo, MUT_NONE, 0) ? pass++ : fail++;
                }
    }
    g_zb = 0;
    printf(
        "ok   zb-h1: %d layouts (1F1B PP 1..8 m 1..16, phased interleaved PP 2..8 V 2..4 m PP..4PP, training and "
        "forward-only) simulated grouped and overlapped: no deadlock, messages matched, no buffer hazard\n",
        n5);
    // the simulation can fail: each mistake is caught in some layout
    const char* mname[4] = {"", "a receive not waiting for its buffer's last compute",
                            "one link's receiver taking two messages in the other order",
                            "a transfer not waiting for the buffer's previous transfer"};
    for (int mu = 1; mu < 4; mu++) {
        if (caught[mu] > 0) {
            pass++;
            printf("ok   mutation caught: %s (fails in %d of %d layouts)\n", mname[mu], caught[mu], n3 + n4);
        } else {
            fail++;
            printf("FAIL mutation not caught: %s\n", mname[mu]);
        }
    }
    // the simulation can fail: the interleaved list's runs of adjacent actions as groups
    if (old_deadlocks > 0) {
        pass++;
        printf("ok   interleaved runs as groups (the old rule) fail in %d of %d layouts\n", old_deadlocks, old_total);
    } else {
        fail++;
        printf("FAIL the old grouping was expected to deadlock somewhere\n");
    }
    printf("%d passed, %d failed\n", pass, fail);
    return fail ? 1 : 0;
}
