// test_colltrace.c: the collective trace's deadlock analysis (llmc/host/colltrace.h) on
// records written by hand for 2x2x2 and other layouts: a cycle of waiting ranks is named
// with both sides, two ranks at the same number in different operations are named, a
// stopped rank (a chain that ends, no cycle) is not called a deadlock, NCCL's enqueued
// calls (no rank inside one) are compared by their counts, and a consistent state is left
// alone. The group membership is checked against the layout formula written out here.
#include <stdio.h>
#include <string.h>
#include "../llmc/host/colltrace.h"
#include "common.h"

// a record of a rank that entered the given counts of (world, tp, dp, pp, emb) operations
// and is inside (state CT_INSIDE) or has left the last one, of group g
static CollRecord rec_make(const int64_t seq[CG_NUM], int g, const char* op, int state, int64_t step) {
    CollRecord r;
    memset(&r, 0, sizeof(r));
    for (int i = 0; i < CG_NUM; i++) r.seq[i] = seq[i];
    r.group = g;
    r.state = state;
    r.step = step;
    r.micro = -1;
    r.wait_micro = -1;
    r.peer = -1;
    snprintf(r.op, sizeof(r.op), "%s", op);
    return r;
}

int main(void) {
    char out[2000];
    // group membership, against rank = tp + TP*dp + TP*DP*pp written out
    int ok = 1;
    for (int TP = 1; TP <= 4; TP++)
        for (int DP = 1; DP <= 3; DP++)
            for (int PP = 1; PP <= 4; PP++)
                for (int a = 0; a < TP * DP * PP; a++)
                    for (int b = 0; b < TP * DP * PP; b++) {
                        int ta = a % TP, da = (a / TP) % DP, pa = a / (TP * DP);
                        int tb = b % TP, db = (b / TP) % DP, pb = b / (TP * DP);
                        int same_tp = da == db && pa == pb, same_dp = ta == tb && pa == pb;
                        int same_pp = ta == tb && da == db;
                        int in_a = PP > 1 && (pa == 0 || pa == PP - 1), in_b = PP > 1 && (pb == 0 || pb == PP - 1);
                        int same_emb = in_a && in_b && same_pp;
                        ok &= (ctrace_group_key(CG_TP, a, TP, DP, PP, 1) ==
                               ctrace_group_key(CG_TP, b, TP, DP, PP, 1)) == same_tp;
                        ok &= (ctrace_group_key(CG_DP, a, TP, DP, PP, 1) ==
                               ctrace_group_key(CG_DP, b, TP, DP, PP, 1)) == same_dp;
                        ok &= (ctrace_group_key(CG_PP, a, TP, DP, PP, 1) ==
                               ctrace_group_key(CG_PP, b, TP, DP, PP, 1)) == same_pp;
                        int ka = ctrace_group_key(CG_EMB, a, TP, DP, PP, 1),
                            kb = ctrace_group_key(CG_EMB, b, TP, DP, PP, 1);
                        ok &= (ka >= 0) == in_a;
                        ok &= (ka >= 0 && ka == kb) == same_emb;
                    }
    check(ok, "group keys: TP, DP, PP and embedding groups as the layout formula says (TP 1-4, DP 1-3, PP 1-4)");

    // the CP group with CP 2 inside a CP x DP group of 4 (DP 2), TP 2, PP 2: same tp, data-parallel index and pp
    ok = 1;
    for (int a = 0; a < 16; a++)
        for (int b = 0; b < 16; b++) {
            int ta = a % 2, da = (a / 2) % 4, pa = a / 8, tb = b % 2, db = (b / 2) % 4, pb = b / 8;
            int same = ta == tb && pa == pb && da / 2 == db / 2; // cp = d % 2, data index d / 2
            ok &= (ctrace_group_key(CG_CP, a, 2, 4, 2, 2) == ctrace_group_key(CG_CP, b, 2, 4, 2, 2)) == same;
        }
    check(ok, "group keys: the CP group (TP 2, CP 2, DP 2, PP 2) as the rank order says");

    // 2x2x2: rank 0 skipped the embedding all-reduce #3 and waits in world #14; rank 4, its
    // embedding partner, waits in emb #3; everyone else waits in world #14
    CollRecord r[8];
    int64_t base[CG_NUM] = {14, 60, 2, 12, 3};
    for (int i = 0; i < 8; i++) r[i] = rec_make(base, CG_WORLD, "allreduce", CT_INSIDE, 3);
    for (int i = 0; i < 8; i++)
        if (i != 0 && i != 4 && i != 7 && i != 3) r[i].seq[CG_EMB] = 3; // emb members: pp 0 and pp 1 of each (tp, dp)
    r[0].seq[CG_EMB] = 2;
    int64_t s4[CG_NUM] = {13, 60, 2, 12, 3};
    r[4] = rec_make(s4, CG_EMB, "allreduce", CT_INSIDE, 3);
    int found = ctrace_mismatch(r, 8, 2, 2, 2, 1, 100.0, out, sizeof(out));
    check(found && strstr(out, "rank 0 waits in world allreduce #14 (step 3), but rank 4 has entered only 13 world") &&
              strstr(out, "rank 4 waits in emb allreduce #3 (step 3), but rank 0 has entered only 2 emb"),
          "skipped embedding all-reduce: the cycle names rank 0 (world #14) and rank 4 (emb #3): %s", out);

    // the same with rank 4 stopped outside any call (it computes): a chain, not a cycle
    r[4].state = CT_LEFT;
    out[0] = '\0';
    found = ctrace_mismatch(r, 8, 2, 2, 2, 1, 100.0, out, sizeof(out));
    check(!found, "a rank that computes ends the chain: no deadlock reported (%s)", found ? out : "none");

    // every rank inside world #14 with the same counts: consistent, nothing to report
    for (int i = 0; i < 8; i++) r[i] = rec_make(base, CG_WORLD, "allreduce", CT_INSIDE, 3);
    check(!ctrace_mismatch(r, 8, 2, 2, 2, 1, 100.0, out, sizeof(out)), "a consistent state: no mismatch");

    // TP pair at the same number in different operations (an allgather against an allreduce)
    int64_t tp1[CG_NUM] = {5, 40, 1, 0, 0};
    CollRecord t2[2] = {rec_make(tp1, CG_TP, "allreduce", CT_INSIDE, 2),
                        rec_make(tp1, CG_TP, "allgather", CT_INSIDE, 2)};
    found = ctrace_mismatch(t2, 2, 2, 1, 1, 1, 100.0, out, sizeof(out));
    check(found && strstr(out, "rank 0 waits in tp allreduce #40") && strstr(out, "rank 1 waits in tp allgather #40"),
          "different operations at the same number: both named: %s", out);

    // a pipeline receive in the cycle: stage 1 (rank 1) waits to receive from stage 0 (rank 0),
    // which waits in the world all-reduce #5 that rank 1 has not reached (1x2x1)
    int64_t p0[CG_NUM] = {5, 0, 0, 7, 1}, p1[CG_NUM] = {4, 0, 0, 7, 1};
    CollRecord pr[2] = {rec_make(p0, CG_WORLD, "allreduce", CT_INSIDE, 2), rec_make(p1, CG_PP, "recv", CT_INSIDE, 2)};
    pr[1].peer = 0;
    found = ctrace_mismatch(pr, 2, 1, 1, 2, 1, 100.0, out, sizeof(out));
    check(found && strstr(out, "rank 1 waits in pp recv #7 from stage 0 (step 2) for rank 0") &&
              strstr(out, "rank 0 waits in world allreduce #5 (step 2), but rank 1 has entered only 4 world"),
          "a cycle through a pipeline receive: %s", out);

    // the CP ring (TP 1, CP 2, DP 1): rank 1 waits for rank 0's block in the ring, rank 0 in a
    // world all-reduce that rank 1 has not reached
    int64_t c0[CG_NUM] = {5, 0, 0, 0, 0, 3}, c1[CG_NUM] = {4, 0, 0, 0, 0, 3};
    CollRecord cr[2] = {rec_make(c0, CG_WORLD, "allreduce", CT_INSIDE, 2),
                        rec_make(c1, CG_CP, "ring_wait", CT_INSIDE, 2)};
    cr[1].peer = 0;
    found = ctrace_mismatch(cr, 2, 1, 2, 1, 2, 100.0, out, sizeof(out));
    check(found && strstr(out, "rank 1 waits in cp ring_wait #3 from cp rank 0 (step 2) for rank 0") &&
              strstr(out, "rank 0 waits in world allreduce #5 (step 2), but rank 1 has entered only 4 world"),
          "a cycle through the CP ring: %s", out);

    // NCCL on a GPU: the calls were enqueued and every host waits for its device; DP rank 1
    // enqueued one DP reduction fewer
    int64_t n0[CG_NUM] = {9, 0, 4, 0, 0}, n1[CG_NUM] = {9, 0, 3, 0, 0};
    CollRecord nr[2] = {rec_make(n0, CG_DP, "allreduce", CT_LEFT, 4), rec_make(n1, CG_DP, "allreduce", CT_LEFT, 4)};
    nr[0].host_wait = nr[1].host_wait = 1;
    nr[0].wait_t = nr[1].wait_t = 90.0;
    found = ctrace_mismatch(nr, 2, 1, 2, 1, 1, 100.0, out, sizeof(out));
    check(found &&
              strstr(out, "dp group: rank 0 has entered 4 dp operations and waits 10 s for the device, its last") &&
              strstr(out, "but rank 1 only 3"),
          "NCCL (enqueued, host waits): the count difference is named: %s", out);

    // a layout that is not the world's: no analysis rather than a wrong one
    check(!ctrace_mismatch(nr, 2, 2, 2, 1, 1, 100.0, out, sizeof(out)),
          "a layout that does not match the world: no report");

    // the trace itself: counts per group, enter/leave states, the seqlock
    CollTrace t;
    ctrace_init(&t);
    t.step = 7;
    t.micro = 2;
    ctrace_enter(&t, CG_TP, "allreduce", -1);
    ctrace_leave(&t);
    ctrace_enter(&t, CG_TP, "allreduce", -1);
    ctrace_enter(&t, CG_PP, "recv", 1);
    CollRecord copy;
    check(ctrace_read(ctrace_rec(&t), &copy) && copy.seq[CG_TP] == 2 && copy.seq[CG_PP] == 1 &&
              copy.state == CT_INSIDE && copy.group == CG_PP && copy.peer == 1 && copy.step == 7 && copy.micro == 2,
          "enter/leave: counts per group, the last operation, its step and micro-batch");
    ctrace_describe(&copy, out, sizeof(out));
    check(strcmp(out, "pp recv #1 from stage 1 (step 7, micro-batch 2)") == 0, "described: %s", out);
    CollRecord shared;
    memset(&shared, 0, sizeof(shared));
    ctrace_publish(&t, &shared);
    ctrace_leave(&t);
    check(shared.state == CT_LEFT && shared.seq[CG_TP] == 2 && (shared.ver & 1) == 0,
          "published: the record moved to the shared slot, later writes land there");
    shared.ver = 5; // a write under way
    check(!ctrace_read(&shared, &copy), "a record being written (odd version) is not read");
    return test_summary();
}
