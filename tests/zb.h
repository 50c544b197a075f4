/*
 * zb.h: tests of the zero-bubble schedule (-pp-schedule zb-h1), included by test_gpt.c
 * after sp_vpp.h (it uses its helpers and those of test_gpt.c).
 *  - the lists of pipe_zb_h1 for every PP <= 8, V <= 4 and m: each unit forwarded, then B,
 *    then W, once; W's in B's order; without the W's the list is the 1F1B / interleaved list
 *    (so the activation slots are 1F1B's); the units holding memory (a slot, then a W stash)
 *    never exceed the first stage's 1F1B count; all ranks run to the
 *    end with non-blocking sends; the phased NCCL list keeps every compute in order;
 *  - the bubble, by an independent timing model (F = B = W = 1 time unit, messages free):
 *    1F1B's makespan is 3m + 3(PP-1) and ZB-H1's must be 3m + (PP-1), Qi et al.'s
 *    (PP-1)(T_F + T_B - T_W) bubble;
 *  - the trainer over MPI: zb-h1 layouts bit-identical to the same layout's 1F1B and equal to
 *    the single process over a ramped run (with -sp, -vpp, recomputation, ZeRO-1, and fewer
 *    micro-batches than stages).
 */
#ifndef TEST_ZB_H
#define TEST_ZB_H

// makespan of all ranks' lists under the timing model: a compute takes 1 unit (a 1F1B
// backward 2: its B and W), starts when its stage is free and its messages have arrived; a
// message arrives when its sender's last compute before the send ended. Sends never block
// and receives wait, the trainer's rules: -1 when the ranks deadlock (sp_vpp.h uses it too).
static int pipe_makespan(Action** plans, const int* n, int PP, int V, int zb) {
    enum { MAXR = 8, MAXT = 2 * 4 * 32 * 4 + 8 };
    static int box[MAXR][MAXR][MAXT]; // arrival time + 1 (0: not sent)
    memset(box, 0, sizeof(box));
    int pc[MAXR] = {0}, clock[MAXR] = {0}, ready[MAXR] = {0}, progress = 1;
    while (progress) {
        progress = 0;
        for (int r = 0; r < PP; r++)
            while (pc[r] < n[r]) {
                const Action* a = &plans[r][pc[r]];
                int peer, tag;
                pipe_peer(a, r, PP, V, &peer, &tag);
                if (a->kind == ACT_RECV_ACT || a->kind == ACT_RECV_GRAD) {
                    if (!box[peer][r][tag]) break;
                    if (box[peer][r][tag] - 1 > ready[r]) ready[r] = box[peer][r][tag] - 1;
                } else if (a->kind == ACT_SEND_ACT || a->kind == ACT_SEND_GRAD) {
                    box[r][peer][tag] = clock[r] + 1;
                } else {
                    int start = clock[r] > ready[r] ? clock[r] : ready[r];
                    clock[r] = start + (a->kind == ACT_BACKWARD && !zb ? 2 : 1);
                }
                pc[r]++;
                progress = 1;
            }
    }
    int end = 0;
    for (int r = 0; r < PP; r++) {
        if (pc[r] != n[r]) return -1; // deadlock
        if (clock[r] > end) end = clock[r];
    }
    return end;
}

static void test_pipe_zb(void) {
    int ok_order = 1, ok_base = 1, ok_slots = 1, ok_run = 1, ok_phased = 1, ok_pend = 1, cases = 0;
    int ok_bubble = 1, bubble_cases = 0;
    char why[200] = "";
    enum { MAXR = 8, MAXU = 4 * 32 * 4 };
    for (int PP = 1; PP <= 8; PP++)
        for (int V = 1; V <= (PP > 1 ? 4 : 1); V++)
            for (int m = V > 1 ? PP : 1; m <= 4 * PP; m += V > 1 ? PP : 1) {
                Action *plans[MAXR], *base[MAXR];
                int n[MAXR], nb[MAXR];
                cases++;
                for (int r = 0; r < PP; r++) {
                    plans[r] = pipe_zb_h1(r, PP, V, m, 0, &n[r]);
                    base[r] = pipe_interleaved(r, PP, V, m, 0, &nb[r]);
                    static int fwd[MAXU], bwd[MAXU], wgt[MAXU], border[MAXU], worder[MAXU];
                    memset(fwd, 0, sizeof(fwd));
                    memset(bwd, 0, sizeof(bwd));
                    memset(wgt, 0, sizeof(wgt));
                    int nbo = 0, nwo = 0, held = 0, most = 0, pend = 0, most_pend = 0, j = 0;
                    for (int i = 0; i < n[r]; i++) {
                        const Action* a = &plans[r][i];
                        int u = a->micro * V + a->chunk;
                        if (a->kind == ACT_RECV_ACT || (a->kind == ACT_FORWARD && a->chunk * PP + r == 0)) held++;
                        if (a->kind == ACT_FORWARD) fwd[u]++;
                        if (a->kind == ACT_BACKWARD) {
                            if (!fwd[u] || bwd[u]) ok_order = 0;
                            bwd[u]++;
                            border[nbo++] = u;
                            pend++;
                        }
                        if (a->kind == ACT_WEIGHT) {
                            if (!bwd[u] || wgt[u]) ok_order = 0;
                            wgt[u]++;
                            worder[nwo++] = u;
                            held--;
                            pend--;
                        }
                        if (held > most) most = held;
                        if (pend > most_pend) most_pend = pend;
                        // the list without its W's is the base list
                        if (a->kind != ACT_WEIGHT) {
                            if (j >= nb[r] || base[r][j].kind != a->kind || base[r][j].micro != a->micro ||
                                base[r][j].chunk != a->chunk)
                                ok_base = 0;
                            j++;
                        }
                    }
                    if (j != nb[r]) ok_base = 0;
                    for (int u = 0; u < m * V; u++)
                        if (fwd[u] != 1 || bwd[u] != 1 || wgt[u] != 1) ok_order = 0;
                    for (int i = 0; i < nbo && i < nwo; i++)
                        if (border[i] != worder[i]) ok_order = 0;
                    if (most > pipe_slots(0, PP, V) || held != 0) {
                        ok_slots = 0;
                        snprintf(why, sizeof(why), "PP %d V %d m %d stage %d holds %d > %d", PP, V, m, r, most,
                                 pipe_slots(0, PP, V));
                    }
                    if (most_pend > pipe_w_pending_max(r, PP, V, 4 * PP)) ok_pend = 0;
                    // the NCCL list: the same computes in the same order, every message still there
                    if (V > 1) {
                        int np, *phase = NULL, k = 0, ncomm = 0, ncomm0 = 0;
                        Action* ph = pipe_phased(1, r, PP, V, m, 0, &phase, &np);
                        if (ph == NULL || np != n[r]) ok_phased = 0;
                        for (int i = 0; ph && i < np; i++) {
                            if (!action_computes(ph[i].kind)) {
                                ncomm++;
                                continue;
                            }
                            while (k < n[r] && !action_computes(plans[r][k].kind)) k++;
                            if (k >= n[r] || plans[r][k].kind != ph[i].kind || plans[r][k].micro != ph[i].micro ||
                                plans[r][k].chunk != ph[i].chunk)
                                ok_phased = 0;
                            k++;
                        }
                        for (int i = 0; i < n[r]; i++) ncomm0 += !action_computes(plans[r][i].kind);
                        if (ncomm != ncomm0) ok_phased = 0;
                        free(ph);
                        free(phase);
                    }
                }
                int t_zb = pipe_makespan(plans, n, PP, V, 1);
                int t_base = pipe_makespan(base, nb, PP, V, 0);
                if (t_zb < 0 || t_base < 0) ok_run = 0;
                // 1F1B (V = 1, m >= PP): 3m + 3(PP-1) and ZB-H1 3m + (PP-1)
                if (V == 1 && m >= PP) {
                    bubble_cases++;
                    if (t_base != 3 * m + 3 * (PP - 1) || t_zb != 3 * m + (PP - 1)) {
                        ok_bubble = 0;
                        snprintf(why, sizeof(why), "PP %d m %d: 1F1B %d (want %d), zb-h1 %d (want %d)", PP, m, t_base,
                                 3 * m + 3 * (PP - 1), t_zb, 3 * m + (PP - 1));
                    }
                } else if (t_zb > t_base) {
                    ok_bubble = 0;
                    snprintf(why, sizeof(why), "PP %d V %d m %d: zb-h1 %d > base %d", PP, V, m, t_zb, t_base);
                }
                for (int r = 0; r < PP; r++) {
                    free(plans[r]);
                    free(base[r]);
                }
            }
    check(ok_order, "zb-h1: %d lists (PP 1..8, V 1..4, m 1..4PP): each unit F, then B, then W, once; W's in B order",
          cases);
    check(ok_base, "zb-h1: without its W's every list is the 1F1B / interleaved list");
    check(ok_slots, "zb-h1: the units holding a slot or a W stash never exceed 1F1B's first stage (pipe_slots(0)) %s",
          why);
    check(ok_pend, "zb-h1: the pending W's never exceed pipe_w_pending_max (the stashes allocated)");
    check(ok_run, "zb-h1: all ranks run to the end with non-blocking sends and blocking receives (no deadlock)");
    check(ok_phased, "zb-h1: the phased (NCCL) lists keep every compute in order and every message");
    check(ok_bubble,
          "zb-h1: timing model F=B=W=1 over %d 1F1B cases: 1F1B takes 3m+3(PP-1), zb-h1 3m+(PP-1) (Qi et al.'s "
          "bubble); interleaved zb never slower than interleaved %s",
          bubble_cases, why);
}

// zb-h1 layouts of the trainer against the same layout's 1F1B (bit for bit: the final
// checkpoints are equal) and the single process. ref: the 1x1x1 reference's log (L 4) and
// checkpoint; onef1b: the 1F1B run of the first case (2x2x2 ZeRO-1 -sp 1 -vpp 2 selective).
static void test_layouts_zb(const char* tmp, const char* data, const RunLog* ref, const char* refck,
                            const char* onef1b_ck) {
    char args[3000], cmd[4400], err[4096], ck[1400], dir[1300];
    struct {
        int tp, pp, dp, zero, sp, vpp;
        const char* rc;
        const char* extra;
    } Z[] = {
        {2, 2, 2, 1, 1, 2, "selective", ""}, // the same flags as onef1b
        {2, 2, 2, 1, 0, 1, "0", ""},
        {2, 2, 2, 1, 1, 1, "full", ""},
        {1, 4, 2, 1, 0, 1, "0", "-ramp 2 2 1536"}, // 1 micro-batch for 4 stages at first
    };
    for (size_t i = 0; i < sizeof(Z) / sizeof(Z[0]); i++) {
        char name[16], flags[400];
        int np = Z[i].tp * Z[i].pp * Z[i].dp, rc;
        snprintf(name, sizeof(name), "zb%zu", i);
        snprintf(flags, sizeof(flags), "%s -tp %d -pp %d -dp %d -zero %d -sp %d -vpp %d -recompute %s", Z[i].extra,
                 Z[i].tp, Z[i].pp, Z[i].dp, Z[i].zero, Z[i].sp, Z[i].vpp, Z[i].rc);
        RunLog rl;
        double wl = 0, wg = 0, we = 1.0, same = 1.0;
        char wname[256] = "", sname[256] = "", zflags[440];
        snprintf(zflags, sizeof(zflags), "%s -pp-schedule zb-h1", flags);
        int ok = run_layout(tmp, name, data, np, zflags, dir, sizeof(dir), ck, sizeof(ck), &rl, &rc);
        if (ok && Z[i].extra[0] == '\0') {
            runlog_worst(&rl, ref, LAYOUT_STEPS, &wl, &wg);
            we = compare_ckpts(ck, refck, wname, sizeof(wname));
        } else if (ok) {
            we = 0.0; // another ramp: its own 1F1B is the reference below
        }
        if (ok && i == 0) same = compare_ckpts(ck, onef1b_ck, sname, sizeof(sname));
        if (ok && i == 3) { // the same flags under 1F1B
            char d2[1300], ck2[1400];
            RunLog r2;
            int rc2;
            ok = run_layout(tmp, "zb3_1f1b", data, np, flags, d2, sizeof(d2), ck2, sizeof(ck2), &r2, &rc2);
            if (ok) same = compare_ckpts(ck, ck2, sname, sizeof(sname));
        }
        if (i != 0 && i != 3) same = 0.0;
        char vs_ref[200] = "its own ramp: compared with its 1F1B only";
        if (Z[i].extra[0] == '\0')
            snprintf(vs_ref, sizeof(vs_ref), "vs 1x1x1 loss rel %.1e, gnorm rel %.1e, weights rel L2 %.1e (%s)", wl, wg,
                     we, wname);
        check(ok && wl <= 1e-5 && wg <= 1e-5 && we <= 1e-5 && same == 0.0,
              "zb-h1 %dx%dx%d%s sp %d vpp %d recompute %s%s%s: %d steps %s; vs its own 1F1B %s (rc %d)", Z[i].tp,
              Z[i].pp, Z[i].dp, Z[i].zero ? " zero-1" : "", Z[i].sp, Z[i].vpp, Z[i].rc, Z[i].extra[0] ? " " : "",
              Z[i].extra, LAYOUT_STEPS, vs_ref,
              (i == 0 || i == 3) ? (same == 0.0 ? "bit-identical" : sname) : "not run", rc);
    }
    layout_args(args, sizeof(args), data, tmp);
    snprintf(cmd, sizeof(cmd), "timeout 60 ./train_gpt %s -pp-schedule zb -check", args);
    int rc = run_cmd(cmd, err, sizeof(err));
    check(rc == 1 && strstr(err, "want 1f1b, interleaved or zb-h1"), "-pp-schedule zb: exit %d, one clear line", rc);
}

#endif // TEST_ZB_H
