/*
 * sp_vpp.h: tests of sequence parallelism (-sp), selective recomputation
 * (-recompute selective) and the interleaved pipeline (-vpp), included by test_gpt.c after
 * its helpers (check, run_cmd, read_runlog, compare_ckpts, write_pattern_shard, MPIRUN).
 *  - the interleaved schedule: ordering, in-flight bound, matched sends and a deadlock-free
 *    simulation of all ranks for every PP <= 8, V <= 4, m = PP, 2PP, 3PP, 4PP;
 *  - selective recomputation bit-identical to none (fixture model, 8 steps);
 *  - activation bytes kept per layer against Korthikanti et al.'s formula adapted here;
 *  - layouts with -sp / -vpp / recompute against the single process over MPI, resume across
 *    layouts, and the up-front constraint messages.
 */
#ifndef TEST_SP_VPP_H
#define TEST_SP_VPP_H

static void test_pipe_interleaved(void) {
    int ok_order = 1, ok_inflight = 1, ok_match = 1, ok_nodeadlock = 1, ok_stage = 1, cases = 0;
    enum { MAXR = 8, MAXU = 4 * 32 * 4 }; // units: V * m <= 4 * 32
    for (int PP = 2; PP <= 8; PP++)
        for (int V = 2; V <= 4; V++)
            for (int m = PP; m <= 4 * PP; m += PP) {
                Action* plans[MAXR];
                int n[MAXR];
                cases++;
                for (int r = 0; r < PP; r++) {
                    plans[r] = pipe_interleaved(r, PP, V, m, 0, &n[r]);
                    static int fwd[MAXU], bwd[MAXU];
                    memset(fwd, 0, sizeof(fwd));
                    memset(bwd, 0, sizeof(bwd));
                    int inflight = 0, maxin = 0;
                    for (int i = 0; i < n[r]; i++) {
                        const Action* a = &plans[r][i];
                        int u = a->micro * V + a->chunk;
                        if (a->chunk < 0 || a->chunk >= V || a->micro < 0 || a->micro >= m) {
                            ok_order = 0;
                            continue;
                        }
                        if (a->kind == ACT_FORWARD) {
                            // a micro-batch enters chunk c only after it left chunk c-1 on this rank
                            if (fwd[u] || (a->chunk > 0 && !fwd[u - 1])) ok_order = 0;
                            fwd[u]++;
                            inflight++;
                        }
                        if (a->kind == ACT_BACKWARD) {
                            if (!fwd[u] || bwd[u] || (a->chunk < V - 1 && !bwd[u + 1])) ok_order = 0;
                            bwd[u]++;
                            inflight--;
                        }
                        if (inflight > maxin) maxin = inflight;
                    }
                    for (int u = 0; u < m * V; u++)
                        if (fwd[u] != 1 || bwd[u] != 1) ok_order = 0;
                    // Megatron's bound: the warm-up forwards 2(PP-r-1) + (V-1)PP, plus one in steady state
                    int bound = 2 * (PP - r - 1) + (V - 1) * PP + 1;
                    if (maxin > bound || maxin > pipe_slots(r, PP, V) || maxin > m * V) ok_inflight = 0;
                }
                // every send has exactly one receive on its peer with the same tag and the right
                // virtual stages (activations s -> s+1, gradients s -> s-1), and vice versa
                for (int r = 0; r < PP; r++)
                    for (int i = 0; i < n[r]; i++) {
                        const Action* a = &plans[r][i];
                        if (a->kind == ACT_FORWARD || a->kind == ACT_BACKWARD) continue;
                        int peer, tag;
                        pipe_peer(a, r, PP, V, &peer, &tag);
                        if (peer < 0 || peer >= PP) {
                            ok_match = 0;
                            continue;
                        }
                        ActionKind want = a->kind == ACT_SEND_ACT    ? ACT_RECV_ACT
                                          : a->kind == ACT_RECV_ACT  ? ACT_SEND_ACT
                                          : a->kind == ACT_SEND_GRAD ? ACT_RECV_GRAD
                                                                     : ACT_SEND_GRAD;
                        int found = 0;
                        for (int j = 0; j < n[peer]; j++) {
                            const Action* b = &plans[peer][j];
                            if (b->kind != want) continue;
                            int p2, t2;
                            pipe_peer(b, peer, PP, V, &p2, &t2);
                            if (p2 != r || t2 != tag) continue;
                            found++;
                            int vs = a->chunk * PP + r, vs2 = b->chunk * PP + peer;
                            int dv = (a->kind == ACT_SEND_ACT || a->kind == ACT_RECV_GRAD) ? 1 : -1;
                            if (vs2 != vs + dv || b->micro != a->micro) ok_stage = 0;
                        }
                        if (found != 1) ok_match = 0;
                    }
                // simulate with the trainer's rules: sends never block, a receive waits for its message
                if (pipe_makespan(plans, n, PP, V, 0) < 0) ok_nodeadlock = 0;
                for (int r = 0; r < PP; r++) free(plans[r]);
            }
    check(ok_order,
          "interleaved: %d cases (PP 2..8, V 2..4, m = PP..4PP): every (chunk, micro-batch) forwarded then backwarded "
          "once, chunks in order",
          cases);
    check(ok_inflight,
          "interleaved: units in flight never exceed 2(PP-r-1) + (V-1)PP + 1 (Megatron's warm-up + 1) nor the slots "
          "allocated");
    check(ok_match && ok_stage,
          "interleaved: every send has exactly one matching receive, from virtual stage s to s+1 (activations) / s-1 "
          "(gradients)");
    check(ok_nodeadlock,
          "interleaved: all ranks run to completion with non-blocking sends and blocking receives (no deadlock)");
    // known order (Narayanan et al. Fig. 4 style): PP 2, V 2, m 4, rank 0 starts with
    // micro-batches 0,1 through chunk 0, then 0,1 through chunk 1 (4 warm-up forwards)
    int n0;
    Action* a0 = pipe_interleaved(0, 2, 2, 4, 0, &n0);
    int want[4][2] = {{0, 0}, {1, 0}, {0, 1}, {1, 1}}, f = 0, good = 1;
    for (int i = 0; i < n0 && f < 5; i++) {
        if (a0[i].kind == ACT_BACKWARD && f < 4) good = 0;
        if (a0[i].kind != ACT_FORWARD) continue;
        if (f < 4 && (a0[i].micro != want[f][0] || a0[i].chunk != want[f][1])) good = 0;
        f++;
    }
    check(good, "interleaved: PP 2 V 2 m 4 rank 0 warms up with (mb 0, chunk 0), (1, 0), (0, 1), (1, 1)");
    free(a0);
    // V = 1 is exactly 1F1B
    int same = 1;
    for (int PP = 1; PP <= 4; PP++)
        for (int r = 0; r < PP; r++) {
            int na, nb;
            Action* x = pipe_interleaved(r, PP, 1, 2 * PP, 0, &na);
            Action* y = pipe_1f1b(r, PP, 2 * PP, 0, &nb);
            if (na != nb) same = 0;
            for (int i = 0; i < na && same; i++)
                if (x[i].kind != y[i].kind || x[i].micro != y[i].micro || x[i].chunk != 0) same = 0;
            free(x);
            free(y);
        }
    check(same, "interleaved: V = 1 gives the 1F1B schedule");
}

// parameter ownership: chunk c of rank r holds the layers of virtual stage c*PP + r
static void test_chunk_ownership(void) {
    int ok = 1;
    for (int PP = 1; PP <= 4; PP++)
        for (int V = 1; V <= 3; V++) {
            int L = 2 * PP * V, owner[64];
            for (int l = 0; l < L; l++) owner[l] = 0;
            for (int r = 0; r < PP; r++) {
                ParamLayout pl;
                param_layout_init(&pl, L, 8, 2, 4, 10, 16, 0, 1, r, PP);
                param_layout_set_chunks(&pl, V);
                for (int j = 0; j < pl.nlayers; j++) {
                    int gl = param_global_layer(&pl, j), c = j / (L / (PP * V));
                    if (gl / (L / (PP * V)) != c * PP + r || param_local_layer(&pl, gl) != j) ok = 0;
                    owner[gl]++;
                }
            }
            for (int l = 0; l < L; l++)
                if (owner[l] != 1) ok = 0;
        }
    check(ok, "-vpp: every layer is held by exactly one (rank, chunk), chunk c of rank r = virtual stage c*PP + r");
}

// -recompute selective rebuilds the attention probabilities in backward: the same numbers exactly
static void test_recompute_selective(Fixture* fx, const char* dir) {
    size_t bytes[2];
    check(recompute_matches_none(fx, dir, RECOMPUTE_SELECTIVE, bytes),
          "-recompute selective gives bit-identical losses, grad norms and weights over 8 steps");
    check(bytes[1] < bytes[0], "-recompute selective keeps fewer activation bytes (%zu < %zu)", bytes[1], bytes[0]);
}

// Activation bytes per layer against Korthikanti et al. 2022 (eq. 1-5), adapted. Their
// per-layer bytes with 16-bit activations and 1-byte dropout masks: s*b*h*(34 + 5*a*s/h)
// without parallelism; with TP t: s*b*h*(10 + 24/t + 5*a*s/(h*t)); with SP: divided by t;
// selective: the 5*a*s/h term gone; full: the layer input 2*s*b*h (/t with SP).
// This code has no dropout (no masks: -2 sbh, -a s^2 b; no dropout output: -2 a s^2 b)
// and stores fp32 (x2), and keeps LayerNorm mean and rstd (2 x 2 floats per token).
static double korthikanti_adapted(double s, double b, double h, double a, double t, int sp, int rc) {
    double sbh = s * b * h, tok = s * b;
    if (rc == RECOMPUTE_FULL) return 2.0 * 2.0 * sbh / (sp ? t : 1.0);
    double lin = sp ? (34.0 - 2.0) / t : (10.0 - 2.0) + 24.0 / t; // Korthikanti's sbh terms, no dropout masks
    double att = rc == RECOMPUTE_SELECTIVE ? 0.0 : (5.0 - 3.0) * a * s / (h * t); // softmax output only
    return 2.0 * sbh * (lin + att) + 4.0 * 4.0 * tok / (sp ? t : 1.0);
}

static void test_act_memory(void) {
    int ok = 1, n = 0;
    char worst[200] = "";
    struct {
        int H, heads, seq, mb;
    } S[] = {{64, 4, 32, 1}, {128, 8, 64, 2}};
    for (size_t si = 0; si < 2; si++)
        for (int TP = 1; TP <= 4; TP *= 2)
            for (int sp = 0; sp <= 1; sp++)
                for (int rc = 0; rc <= 2; rc++) {
                    if (sp && TP == 1) continue;
                    Config cfg;
                    config_defaults(&cfg);
                    cfg.L = 4;
                    cfg.H = S[si].H;
                    cfg.heads = S[si].heads;
                    cfg.seq = S[si].seq;
                    cfg.mb = S[si].mb;
                    cfg.V = 300;
                    cfg.vpad = 128;
                    cfg.Vp = 384;
                    cfg.sp = sp;
                    cfg.recompute = rc;
                    Comm comm = first_stage_comm(TP);
                    GPT g;
                    gpt_build(&g, &cfg, &comm, 1, 0);
                    double want = korthikanti_adapted(cfg.seq, cfg.mb, cfg.H, cfg.heads, TP, sp, rc);
                    double got = (double)g.acts[0].layer_bytes;
                    n++;
                    if (got != want) {
                        ok = 0;
                        snprintf(worst, sizeof(worst), "H %d TP %d sp %d rc %d: %.0f B, formula %.0f B", cfg.H, TP, sp,
                                 rc, got, want);
                    }
                    gpt_free(&g);
                }
    check(ok,
          "activation bytes kept per layer equal Korthikanti et al.'s formula adapted (fp32, no dropout, LN stats) in "
          "%d cases %s",
          n, worst);
}

// Degenerate layouts against the single process: TP ranks whose vocabulary slice is all
// padding (V 300 padded to 1024: with TP 2 rank 1 holds rows 512-1023, with TP 4 ranks 2
// and 3 hold only padding), one layer per pipeline chunk or stage, and fewer micro-batches
// than stages (the ramp starts at 2 sequences). A collective that a rank skips for its
// local data hangs such a layout; timeout ends it and the check fails.
static void test_layouts_degenerate(const char* tmp, const char* data) {
    char args[3000], cmd[4400], err[4096], path[1400], dir[1300];
    const char* extra = "-V 300 -vpad 1024 -ramp 2 2 1536";
    RunLog ref;
    snprintf(dir, sizeof(dir), "%s/dref", tmp);
    layout_args(args, sizeof(args), data, dir);
    snprintf(cmd, sizeof(cmd), "OMP_NUM_THREADS=1 timeout 300 ./train_gpt %s %s -steps %d", args, extra, LAYOUT_STEPS);
    int rc = run_cmd(cmd, err, sizeof(err));
    snprintf(path, sizeof(path), "%s/log.jsonl", dir);
    check(rc == 0 && read_runlog(path, &ref) == 0 && ref.n == LAYOUT_STEPS,
          "degenerate-layout reference 1x1x1 runs %d steps (rc %d)", LAYOUT_STEPS, rc);
    struct {
        int tp, pp, dp, zero, sp, vpp;
        const char* rc;
        const char* what;
    } D[] = {
        {2, 1, 1, 0, 1, 1, "0", "TP rank 1 all padding"},
        {4, 1, 1, 0, 1, 1, "selective", "TP ranks 2, 3 all padding"},
        {2, 2, 1, 0, 1, 2, "selective", "all-padding TP rank, one layer per chunk"},
        {2, 2, 2, 1, 1, 1, "0", "all-padding TP rank, 1 micro-batch for 2 stages"},
        {1, 4, 1, 0, 0, 1, "full", "one layer per stage, 2 micro-batches for 4 stages"},
    };
    for (size_t i = 0; i < sizeof(D) / sizeof(D[0]); i++) {
        snprintf(dir, sizeof(dir), "%s/d%zu", tmp, i);
        layout_args(args, sizeof(args), data, dir);
        int np = D[i].tp * D[i].pp * D[i].dp;
        snprintf(cmd, sizeof(cmd),
                 "%s -np %d ./train_gpt %s %s -tp %d -pp %d -dp %d -zero %d -sp %d -vpp %d -recompute %s -steps %d",
                 MPIRUN, np, args, extra, D[i].tp, D[i].pp, D[i].dp, D[i].zero, D[i].sp, D[i].vpp, D[i].rc,
                 LAYOUT_STEPS);
        rc = run_cmd(cmd, err, sizeof(err));
        RunLog rl;
        snprintf(path, sizeof(path), "%s/log.jsonl", dir);
        double wl = 0, wg = 0;
        int ok = rc == 0 && read_runlog(path, &rl) == 0 && rl.n == LAYOUT_STEPS;
        if (ok) runlog_worst(&rl, &ref, LAYOUT_STEPS, &wl, &wg);
        check(ok && wl <= 1e-5 && wg <= 1e-5,
              "degenerate layout %dx%dx%d%s sp %d vpp %d recompute %s (%s): %d steps, loss rel %.1e, "
              "gnorm rel %.1e (rc %d)",
              D[i].tp, D[i].pp, D[i].dp, D[i].zero ? " zero-1" : "", D[i].sp, D[i].vpp, D[i].rc, D[i].what,
              LAYOUT_STEPS, wl, wg, rc);
    }
}

// layouts with the three techniques against the single process, over MPI
static void test_layouts_sp_vpp(void) {
    if (!have_mpirun()) {
        check(0, "mpirun is available for the -sp / -vpp layout tests");
        return;
    }
    char tmp[] = "/tmp/llmc_spvppXXXXXX";
    char data[1200], args[3000], cmd[4400], err[4096], path[1400], ck[1400], refck[2][1400], refdir[2][1300];
    pattern_tmpdir(tmp, data, sizeof(data), 40000);
    test_layouts_degenerate(tmp, data);
    RunLog ref[2];
    for (int i = 0; i < 2; i++) { // references: L 4 and L 8 (1x4x1 V=2 needs L % 8 == 0)
        snprintf(refdir[i], sizeof(refdir[i]), "%s/ref%d", tmp, i);
        layout_args(args, sizeof(args), data, refdir[i]);
        snprintf(cmd, sizeof(cmd), "OMP_NUM_THREADS=1 timeout 300 ./train_gpt %s -L %d -steps %d -ckpt-every 10", args,
                 4 + 4 * i, LAYOUT_STEPS);
        int rc = run_cmd(cmd, err, sizeof(err));
        snprintf(path, sizeof(path), "%s/log.jsonl", refdir[i]);
        check(rc == 0 && read_runlog(path, &ref[i]) == 0 && ref[i].n == LAYOUT_STEPS,
              "-sp/-vpp reference 1x1x1 L %d runs %d steps (rc %d)", 4 + 4 * i, LAYOUT_STEPS, rc);
        ckpt_dir_name(refck[i], sizeof(refck[i]), refdir[i], LAYOUT_STEPS);
    }
    // every TP > 1 layout of the main matrix with -sp 1, each recompute mode, interleaving
    struct {
        int tp, pp, dp, zero, sp, vpp, L;
        const char* rc;
    } Y[] = {
        {2, 1, 1, 0, 1, 1, 4, "0"},         {4, 1, 1, 0, 1, 1, 4, "selective"}, {2, 2, 2, 0, 1, 1, 4, "full"},
        {4, 2, 1, 0, 1, 1, 4, "0"},         {1, 2, 1, 0, 0, 2, 4, "0"},         {1, 4, 1, 0, 0, 2, 8, "full"},
        {2, 2, 2, 1, 1, 2, 4, "selective"},
    };
    int ny = (int)(sizeof(Y) / sizeof(Y[0]));
    char lastdir[1300] = "";
    for (int i = 0; i < ny; i++) {
        char dir[1300], name[16], flags[300];
        int li = Y[i].L == 8, rc;
        snprintf(name, sizeof(name), "y%d", i);
        snprintf(flags, sizeof(flags), "-L %d -tp %d -pp %d -dp %d -zero %d -sp %d -vpp %d -recompute %s", Y[i].L,
                 Y[i].tp, Y[i].pp, Y[i].dp, Y[i].zero, Y[i].sp, Y[i].vpp, Y[i].rc);
        RunLog rl;
        double wl = 0, wg = 0;
        int ok =
            run_layout(tmp, name, data, Y[i].tp * Y[i].pp * Y[i].dp, flags, dir, sizeof(dir), ck, sizeof(ck), &rl, &rc);
        if (ok) runlog_worst(&rl, &ref[li], LAYOUT_STEPS, &wl, &wg);
        ok = ok && wl <= 1e-5 && wg <= 1e-5;
        char wname[256] = "";
        double we = ok ? compare_ckpts(ck, refck[li], wname, sizeof(wname)) : 1.0;
        check(ok && we <= 1e-5,
              "layout %dx%dx%d%s sp %d vpp %d recompute %s (L %d): %d steps, loss rel %.1e, gnorm rel %.1e, final "
              "weights rel L2 %.1e (%s) (rc %d)",
              Y[i].tp, Y[i].pp, Y[i].dp, Y[i].zero ? " zero-1" : "", Y[i].sp, Y[i].vpp, Y[i].rc, Y[i].L, LAYOUT_STEPS,
              wl, wg, we, wname, rc);
        if (i == ny - 1) snprintf(lastdir, sizeof(lastdir), "%s", dir);
    }
    char lastck[1400];
    ckpt_dir_name(lastck, sizeof(lastck), lastdir, LAYOUT_STEPS);
    test_layouts_zb(tmp, data, &ref[0], refck[0], lastck);
    // checkpoints stay layout-free: 2x2x2 -sp 1 -vpp 2 at step 10 resumed as 1x1x1, and the
    // 1x1x1 reference's step 10 resumed as 2x2x2 -sp 1 -vpp 2; steps 11-20 equal the reference
    for (int dirn = 0; dirn < 2; dirn++) {
        char rdir[1300];
        snprintf(rdir, sizeof(rdir), "%s/re%d", tmp, dirn);
        snprintf(cmd, sizeof(cmd), "mkdir -p %s && cp -r %s/ckpt_00000010 %s/", rdir, dirn == 0 ? lastdir : refdir[0],
                 rdir);
        int rc0 = system(cmd);
        layout_args(args, sizeof(args), data, rdir);
        if (dirn == 0)
            snprintf(cmd, sizeof(cmd), "OMP_NUM_THREADS=1 timeout 300 ./train_gpt %s -steps %d -resume", args,
                     LAYOUT_STEPS);
        else
            snprintf(
                cmd, sizeof(cmd),
                "%s -np 8 ./train_gpt %s -tp 2 -pp 2 -dp 2 -zero 1 -sp 1 -vpp 2 -recompute selective -steps %d -resume",
                MPIRUN, args, LAYOUT_STEPS);
        int rc = run_cmd(cmd, err, sizeof(err));
        RunLog rl;
        snprintf(path, sizeof(path), "%s/log.jsonl", rdir);
        int ok = rc0 == 0 && rc == 0 && read_runlog(path, &rl) == 0;
        double worst = ok ? runlog_worst_loss(&rl, &ref[0], 11, LAYOUT_STEPS) : INFINITY;
        check(ok && worst <= 1e-5, "checkpoint of %s resumed as %s: steps 11-20 losses rel %.1e (rc %d)",
              dirn == 0 ? "2x2x2 -sp 1 -vpp 2" : "1x1x1", dirn == 0 ? "1x1x1" : "2x2x2 -sp 1 -vpp 2", worst, rc);
    }
    // constraints, checked up front (-check -world N: the same validation every rank runs)
    struct {
        const char* flags;
        const char* needle;
    } B[] = {
        {"-world 4 -pp 4 -vpp 2", "must divide the number of layers"},
        {"-world 4 -pp 2 -vpp 2 -L 8 -ramp 2 2 1536", "multiple of pp=2 micro-batches"},
        {"-world 2 -tp 2 -sp 1 -seq 31", "must divide the sequence length"},
        {"-world 1 -vpp 2", "interleaving takes -pp >= 2"},
        {"-recompute 2", "bad value '2' for -recompute"},
    };
    for (size_t i = 0; i < sizeof(B) / sizeof(B[0]); i++) {
        layout_args(args, sizeof(args), data, tmp);
        snprintf(cmd, sizeof(cmd), "timeout 60 ./train_gpt %s %s -check", args, B[i].flags);
        int rc = run_cmd(cmd, err, sizeof(err));
        check(rc == 1 && strstr(err, "error: ") && strstr(err, B[i].needle), "bad flags %s: exit %d, \"%s\"",
              B[i].flags, rc, B[i].needle);
    }
    snprintf(cmd, sizeof(cmd), "rm -rf %s", tmp);
    if (system(cmd) != 0) printf("note: could not remove %s\n", tmp);
}

#endif // TEST_SP_VPP_H
