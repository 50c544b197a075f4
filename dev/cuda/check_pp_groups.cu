/*
 * check_pp_groups.cu: the pipeline communication of train_gpt.cu under NCCL semantics,
 * simulated on the host for every PP <= 8 and micro-batch count <= 16 (training and
 * forward-only schedules). NCCL point-to-point is blocking on the stream: a group of
 * sends/receives finishes only when every peer has posted the matching operation. The
 * trainer posts each maximal run of adjacent communication actions of its 1F1B list as
 * one group (run_schedule); this check shows that
 *   1. the n-th send on each link carries the same micro-batch as the n-th receive
 *      (NCCL matches by order, not by tag),
 *   2. no layout deadlocks: every stage finishes all its groups,
 *   3. no group both writes and reads/writes one buffer (activation slot k % PP, gradient
 *      buffer k % 2), since the operations of a group run concurrently.
 * Host code only: it runs on any machine (no GPU needed).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "../../llmc/layout.h"

typedef struct { ActionKind kind; int micro, group; } Op;

static int is_comm(ActionKind k) { return k != ACT_FORWARD && k != ACT_BACKWARD; }

// buffer id an op touches and whether it writes: slot inputs x[0] (recv act), slot
// outputs x[nl] (send act), gradient buffers (recv/send grad)
static void op_buffer(const Op* o, int PP, int* buf, int* writes) {
    switch (o->kind) {
        case ACT_RECV_ACT: *buf = 100 + o->micro % PP; *writes = 1; break;
        case ACT_SEND_ACT: *buf = 200 + o->micro % PP; *writes = 0; break;
        case ACT_RECV_GRAD: *buf = 300 + o->micro % 2; *writes = 1; break;
        default: *buf = 300 + o->micro % 2; *writes = 0; break;
    }
}

int main(void) {
    int pass = 0, fail = 0;
    for (int fo = 0; fo < 2; fo++)
    for (int PP = 1; PP <= 8; PP++)
    for (int m = 1; m <= 16; m++) {
        Op* ops[8]; int nops[8], ngroups[8];
        int ok_order = 1, ok_hazard = 1;
        for (int s = 0; s < PP; s++) {
            int n;
            Action* plan = schedule_1f1b(s, PP, m, fo, &n);
            ops[s] = (Op*)malloc(sizeof(Op) * (n + 1));
            nops[s] = 0; ngroups[s] = 0;
            for (int i = 0; i < n;) { // same rule as run_schedule: maximal runs of comm actions
                if (!is_comm(plan[i].kind)) { i++; continue; }
                int g = ngroups[s]++;
                int first = nops[s];
                for (; i < n && is_comm(plan[i].kind); i++) {
                    Op o = {plan[i].kind, plan[i].micro, g};
                    for (int j = first; j < nops[s]; j++) {
                        int b1, w1, b2, w2;
                        op_buffer(&ops[s][j], PP, &b1, &w1);
                        op_buffer(&o, PP, &b2, &w2);
                        if (b1 == b2 && (w1 || w2)) ok_hazard = 0;
                    }
                    ops[s][nops[s]++] = o;
                }
            }
            free(plan);
        }
        // match the n-th send with the n-th receive per directed link
        int* partner_stage[8]; int* partner_op[8];
        for (int s = 0; s < PP; s++) {
            partner_stage[s] = (int*)malloc(sizeof(int) * (nops[s] + 1));
            partner_op[s] = (int*)malloc(sizeof(int) * (nops[s] + 1));
            for (int i = 0; i < nops[s]; i++) partner_stage[s][i] = -1;
        }
        for (int s = 0; s + 1 < PP; s++) {
            // link s -> s+1 carries activations; s+1 -> s gradients
            for (int dir = 0; dir < 2; dir++) {
                int from = dir == 0 ? s : s + 1, to = dir == 0 ? s + 1 : s;
                ActionKind sk = dir == 0 ? ACT_SEND_ACT : ACT_SEND_GRAD, rk = dir == 0 ? ACT_RECV_ACT : ACT_RECV_GRAD;
                int i = 0, j = 0;
                for (;;) {
                    while (i < nops[from] && ops[from][i].kind != sk) i++;
                    while (j < nops[to] && ops[to][j].kind != rk) j++;
                    if (i >= nops[from] || j >= nops[to]) { if (i < nops[from] || j < nops[to]) ok_order = 0; break; }
                    if (ops[from][i].micro != ops[to][j].micro) ok_order = 0;
                    partner_stage[from][i] = to; partner_op[from][i] = j;
                    partner_stage[to][j] = from; partner_op[to][j] = i;
                    i++; j++;
                }
            }
        }
        for (int s = 0; s < PP; s++) for (int i = 0; i < nops[s]; i++) if (partner_stage[s][i] < 0) ok_order = 0;
        // run: a group completes when each of its ops' partners is in its stage's current group
        int cur[8] = {0};
        char* done[8];
        for (int s = 0; s < PP; s++) done[s] = (char*)calloc(nops[s] + 1, 1);
        int progress = 1;
        while (progress) {
            progress = 0;
            for (int s = 0; s < PP; s++) for (int i = 0; i < nops[s]; i++) {
                if (done[s][i] || ops[s][i].group != cur[s] || partner_stage[s][i] < 0) continue;
                int ps = partner_stage[s][i], pi = partner_op[s][i];
                if (ops[ps][pi].group == cur[ps]) { done[s][i] = done[ps][pi] = 1; progress = 1; }
            }
            for (int s = 0; s < PP; s++) {
                if (cur[s] >= ngroups[s]) continue;
                int all = 1;
                for (int i = 0; i < nops[s]; i++) if (ops[s][i].group == cur[s] && !done[s][i]) all = 0;
                if (all) { cur[s]++; progress = 1; }
            }
        }
        int finished = 1;
        for (int s = 0; s < PP; s++) if (cur[s] != ngroups[s]) finished = 0;
        int ok = ok_order && ok_hazard && finished;
        if (ok) pass++;
        else {
            fail++;
            printf("FAIL PP=%d m=%d %s: order %d, buffer hazard-free %d, no deadlock %d\n", PP, m, fo ? "forward-only" : "1F1B", ok_order, ok_hazard, finished);
        }
        for (int s = 0; s < PP; s++) { free(ops[s]); free(partner_stage[s]); free(partner_op[s]); free(done[s]); }
    }
    printf("ok   grouped NCCL pipeline schedule: %d layouts (PP 1..8, m 1..16, 1F1B and forward-only) checked\n", pass + fail);
    printf("%d passed, %d failed\n", pass, fail);
    return fail ? 1 : 0;
}
