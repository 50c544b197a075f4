/*
 * check_pp_groups.cu: the pipeline communication of train_gpt.cu under NCCL semantics,
 * simulated on the host (no GPU needed). NCCL point-to-point is blocking on the stream: a
 * group of sends/receives finishes only when every peer has posted the matching operation,
 * and two ranks' messages are matched by order, not by tag. The trainer posts
 *   - 1F1B (-vpp 1): each maximal run of adjacent communication actions as one group;
 *   - interleaved (-vpp V > 1): schedule_phased's list, one group per run of actions with
 *     the same phase (llmc/layout.h explains the phases).
 * For every PP <= 8 and micro-batch count <= 16 (1F1B), every PP <= 8, V <= 4 and m in
 * PP, 2PP, 3PP, 4PP (interleaved), training and forward-only, this check shows that
 *   1. the n-th send on each directed link carries the message of the n-th receive,
 *   2. no layout deadlocks: every stage finishes all its groups,
 *   3. no group both writes and reads/writes one buffer (the operations of a group run
 *      concurrently): activation slots as the trainer assigns them (k % PP for 1F1B, the
 *      first free of schedule_slots for interleaved, released at the unit's backward, or
 *      at the end of its send's group when forward-only), gradient buffers (k % 2, or the
 *      pool of schedule_grad_buffers), and the pools never run dry.
 * It also shows that posting the interleaved list's runs of adjacent actions as groups
 * (what the trainer did before the phases) deadlocks in some layouts: the simulation can
 * fail.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "../../llmc/layout.h"

typedef struct { ActionKind kind; int micro, chunk, group; } Op;

static int is_comm(ActionKind k) { return k != ACT_FORWARD && k != ACT_BACKWARD; }

// Groups of one stage's list: a comm action starts a new group after a compute, or when
// its phase differs from the previous action's (phase NULL: runs of adjacent actions).
// Buffers as the trainer assigns them; *hazard / *dry are set on a conflict / empty pool.
static int build_ops(const Action* plan, const int* phase, int n, int stage, int PP, int V, int fo, Op* ops, int* ngroups,
                     int* hazard, int* dry) {
    int nops = 0, g = -1;
    UnitPool slots, grads;
    int nslots = V == 1 ? PP : schedule_slots(stage, PP, V);
    int ngrad = V == 1 ? 2 : schedule_grad_buffers(plan, phase, n, stage, PP, V);
    pool_init(&slots, nslots); pool_init(&grads, ngrad > 0 ? ngrad : 1);
    int* buf = (int*)malloc(sizeof(int) * (n + 1)); // buffer id of each op in the current group
    int* wr = (int*)malloc(sizeof(int) * (n + 1));
    int nbw = 0;
    for (int i = 0; i < n; i++) {
        const Action* a = &plan[i];
        int unit = a->micro * V + a->chunk, last = a->chunk * PP + stage == PP * V - 1;
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
        if (i == 0 || !is_comm(plan[i - 1].kind) || (phase != NULL && phase[i] != phase[i - 1])) { g++; nbw = 0; }
        int b, w;
        if (V == 1) {
            switch (a->kind) { // slot inputs x[0], slot outputs x[nl], gradient buffers by backward parity
                case ACT_RECV_ACT: b = 100 + a->micro % PP; w = 1; break;
                case ACT_SEND_ACT: b = 200 + a->micro % PP; w = 0; break;
                case ACT_RECV_GRAD: b = 300 + a->micro % 2; w = 1; break;
                default: b = 300 + a->micro % 2; w = 0; break;
            }
        } else {
            int act = a->kind == ACT_RECV_ACT || a->kind == ACT_SEND_ACT;
            int s = act ? pool_get(&slots, unit) : -1, gb = act ? -1 : pool_get(&grads, unit);
            if ((act ? s : gb) < 0) *dry = 1;
            switch (a->kind) {
                case ACT_RECV_ACT: b = 100 + s; w = 1; break;
                case ACT_SEND_ACT: b = 1000 + s; w = 0; if (fo) pool_release(&slots, unit, 1); break;
                case ACT_RECV_GRAD: b = 10000 + gb; w = 1; break;
                default: b = 10000 + gb; w = 0; pool_release(&grads, unit, 1); break;
            }
        }
        for (int j = 0; j < nbw; j++) if (buf[j] == b && (wr[j] || w)) *hazard = 1;
        buf[nbw] = b; wr[nbw] = w; nbw++;
        Op o = {a->kind, a->micro, a->chunk, g};
        ops[nops++] = o;
        int next_comm = i + 1 < n && is_comm(plan[i + 1].kind) && (phase == NULL || phase[i + 1] == phase[i]);
        if (!next_comm) { pool_group_end(&slots); pool_group_end(&grads); }
    }
    pool_free(&slots); pool_free(&grads); free(buf); free(wr);
    *ngroups = g + 1;
    return nops;
}

// the receiving (chunk, direction) a send names, as its receiver does
static void send_target(const Op* o, int stage, int PP, int* to, int* chunk) {
    if (o->kind == ACT_SEND_ACT) { *to = (stage + 1) % PP; *chunk = stage == PP - 1 ? o->chunk + 1 : o->chunk; }
    else { *to = (stage + PP - 1) % PP; *chunk = stage == 0 ? o->chunk - 1 : o->chunk; }
}

// Matches sends and receives per directed link (stage pair, in order) and runs the groups:
// a group completes when each of its ops' partners is in its stage's current group.
static void simulate(Op** ops, const int* nops, const int* ngroups, int PP, int* ok_order, int* finished) {
    int* pst[8]; int* pop[8];
    for (int s = 0; s < PP; s++) {
        pst[s] = (int*)malloc(sizeof(int) * (nops[s] + 1)); pop[s] = (int*)malloc(sizeof(int) * (nops[s] + 1));
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
                if (i >= nops[from] || j >= nops[to]) { if (i < nops[from] || j < nops[to]) *ok_order = 0; break; }
                const Op* sd = &ops[from][i]; const Op* rv = &ops[to][j];
                int want = sd->kind == ACT_SEND_ACT ? ACT_RECV_ACT : ACT_RECV_GRAD;
                if ((int)rv->kind != want || rv->micro != sd->micro || rv->chunk != c) *ok_order = 0;
                pst[from][i] = to; pop[from][i] = j; pst[to][j] = from; pop[to][j] = i;
                i++; j++;
            }
        }
    for (int s = 0; s < PP; s++) for (int i = 0; i < nops[s]; i++) if (pst[s][i] < 0) *ok_order = 0;
    int cur[8] = {0};
    char* done[8];
    for (int s = 0; s < PP; s++) done[s] = (char*)calloc(nops[s] + 1, 1);
    int progress = 1;
    while (progress) {
        progress = 0;
        for (int s = 0; s < PP; s++) for (int i = 0; i < nops[s]; i++) {
            if (done[s][i] || ops[s][i].group != cur[s] || pst[s][i] < 0) continue;
            int ps = pst[s][i], pi = pop[s][i];
            if (ops[ps][pi].group == cur[ps]) { done[s][i] = done[ps][pi] = 1; progress = 1; }
        }
        for (int s = 0; s < PP; s++) {
            if (cur[s] >= ngroups[s]) continue;
            int all = 1;
            for (int i = 0; i < nops[s]; i++) if (ops[s][i].group == cur[s] && !done[s][i]) all = 0;
            if (all) { cur[s]++; progress = 1; }
        }
    }
    *finished = 1;
    for (int s = 0; s < PP; s++) if (cur[s] != ngroups[s]) *finished = 0;
    for (int s = 0; s < PP; s++) { free(pst[s]); free(pop[s]); free(done[s]); }
}

// mode 0: 1F1B runs; 1: phased interleaved; 2: interleaved runs (the old grouping)
static int check_layout(int mode, int PP, int V, int m, int fo, int* most_grads, int quiet) {
    Op* ops[8]; int nops[8], ngroups[8];
    int ok_order = 1, hazard = 0, dry = 0, finished = 0;
    for (int s = 0; s < PP; s++) {
        int n, *phase = NULL;
        Action* plan = mode == 1 ? schedule_phased(s, PP, V, m, fo, &phase, &n) : schedule_interleaved(s, PP, V, m, fo, &n);
        if (plan == NULL) { printf("FAIL PP=%d V=%d m=%d: no schedule\n", PP, V, m); exit(1); }
        if (mode == 1 && !fo) {
            int gb = schedule_grad_buffers(plan, phase, n, s, PP, V);
            if (gb > *most_grads) *most_grads = gb;
        }
        ops[s] = (Op*)malloc(sizeof(Op) * (n + 1));
        nops[s] = build_ops(plan, phase, n, s, PP, V, fo, ops[s], &ngroups[s], &hazard, &dry);
        free(plan); free(phase);
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
    printf("ok   phased interleaved groups: %d layouts (PP 2..8, V 2..4, m = PP..4PP, training and forward-only) simulated; "
           "at most %d gradient buffers\n", n2, most_grads);
    // the simulation can fail: the interleaved list's runs of adjacent actions as groups
    if (old_deadlocks > 0) { pass++; printf("ok   interleaved runs as groups (the old rule) fail in %d of %d layouts\n", old_deadlocks, old_total); }
    else { fail++; printf("FAIL the old grouping was expected to deadlock somewhere\n"); }
    printf("%d passed, %d failed\n", pass, fail);
    return fail ? 1 : 0;
}
