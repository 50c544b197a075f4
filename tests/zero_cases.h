/*
 * zero_cases.h: -zero 1/2/3 in the CPU trainer (llmc/host/zero.h), included by test_gpt.c
 * after zb.h (it uses the helpers of test_gpt.c). Over MPI, 20 steps of the layout recipe
 * (warmup, decay, a ramp that changes the micro-batch count) with validation every 10:
 *  - 1x1x4 -zero 1, 2, 3 and 2x2x2 -zero 3 -sp 1 (and with -vpp 2, zb-h1, selective
 *    recomputation: one layer per chunk) equal the single process (loss, grad norm and
 *    validation loss within 1e-5);
 *  - -zero 3 equals -zero 2 bit for bit (logs and step-20 checkpoint), and with one
 *    micro-batch per rank per step -zero 2 and 3 write byte-equal checkpoints to -zero 1's;
 *    with more micro-batches -zero 2 differs from -zero 1 by float rounding: measured and
 *    held within 1e-6;
 *  - a -zero 3 checkpoint resumes under -zero 1 (1x1x4) and as 1x1x1;
 *  - the memory per rank the start-up table prints (rank 0): -zero 2 holds fewer gradient
 *    bytes than -zero 1, -zero 3 fewer weight bytes than -zero 2 (their figures equal
 *    memplan.h's, which the trainer checks at every start).
 */
#ifndef TEST_ZERO_CASES_H
#define TEST_ZERO_CASES_H

// the "val_loss" of the step-s validation record of a log (NAN if none)
static double zero_val_loss(const char* log, int s) {
    FILE* f = fopen(log, "r");
    char line[4096], key[64];
    double v = NAN;
    snprintf(key, sizeof(key), "\"type\":\"val\",\"step\":%d,", s);
    while (f && fgets(line, sizeof(line), f)) {
        const char* p = strstr(line, "\"val_loss\":");
        if (strstr(line, key) && p) v = atof(p + 11);
    }
    if (f) fclose(f);
    return v;
}

// "memory per rank" of a run's stdout: params and grads MiB (0 if absent)
static void zero_mem_row(const char* out, double* params, double* grads) {
    FILE* f = fopen(out, "r");
    char line[4096];
    *params = *grads = 0.0;
    while (f && fgets(line, sizeof(line), f)) {
        const char* p = strstr(line, "memory per rank");
        if (p && sscanf(strstr(p, "params"), "params %lf MiB | grads %lf", params, grads) != 2) *params = *grads = 0.0;
    }
    if (f) fclose(f);
}

// every rank file of two checkpoint directories byte-equal (and at least one)
static int zero_same_ckpt(const char* a, const char* b, int nranks) {
    char pa[1400], pb[1400];
    for (int r = 0; r < nranks; r++) {
        ckpt_rank_path(pa, sizeof(pa), a, r);
        ckpt_rank_path(pb, sizeof(pb), b, r);
        FILE* fa = fopen(pa, "rb");
        FILE* fb = fopen(pb, "rb");
        int same = fa && fb;
        while (same) {
            int x = fgetc(fa), y = fgetc(fb);
            if (x != y) same = 0;
            if (x == EOF || y == EOF) break;
        }
        if (fa) fclose(fa);
        if (fb) fclose(fb);
        if (!same) return 0;
    }
    return nranks > 0;
}

static void test_zero_layouts(void) {
    if (!have_mpirun()) {
        check(0, "mpirun is available for the ZeRO tests (bash dev/install.sh)");
        return;
    }
    char tmp[] = "/tmp/llmc_zeroXXXXXX";
    char data[1200], flags[2000], dir[1300], ck[1400], refdir[1300], refck[1400], path[1400];
    pattern_tmpdir(tmp, data, sizeof(data), 40000);
    snprintf(flags, sizeof(flags), "-j %s -val-every 10 -val-samples 8", data);
    RunLog ref;
    int rc;
    int ok = run_layout(tmp, "ref", data, 1, flags, refdir, sizeof(refdir), refck, sizeof(refck), &ref, &rc);
    check(ok, "zero reference 1x1x1: %d steps with validation (rc %d)", LAYOUT_STEPS, rc);
    char refval[1400];
    snprintf(refval, sizeof(refval), "%s/log.jsonl", refdir);
    struct {
        const char* name;
        int np;
        const char* flags;
    } Z[] = {
        {"z1", 4, "-dp 4 -zero 1"},
        {"z2", 4, "-dp 4 -zero 2"},
        {"z3", 4, "-dp 4 -zero 3"},
        {"z3sp", 8, "-tp 2 -pp 2 -dp 2 -zero 3 -sp 1"},
        {"z3zb", 8, "-tp 2 -pp 2 -dp 2 -zero 3 -sp 1 -vpp 2 -pp-schedule zb-h1 -recompute selective"},
    };
    RunLog logs[5];
    char dirs[5][1300], cks[5][1400];
    for (int i = 0; i < 5; i++) {
        char f2[2200];
        snprintf(f2, sizeof(f2), "%s %s", flags, Z[i].flags);
        ok = run_layout(tmp, Z[i].name, data, Z[i].np, f2, dirs[i], sizeof(dirs[i]), cks[i], sizeof(cks[i]), &logs[i],
                        &rc);
        double wl = 1, wg = 1, wv = 0;
        if (ok) runlog_worst(&logs[i], &ref, LAYOUT_STEPS, &wl, &wg);
        snprintf(path, sizeof(path), "%s/log.jsonl", dirs[i]);
        for (int s = 10; s <= LAYOUT_STEPS; s += 10) {
            double a = zero_val_loss(path, s), b = zero_val_loss(refval, s);
            double e = isnan(a) || isnan(b) ? INFINITY : fabs(a - b) / fabs(b);
            if (e > wv) wv = e;
        }
        check(ok && wl <= 1e-5 && wg <= 1e-5 && wv <= 1e-5,
              "%s: %d ramped steps equal the single process: loss rel %.1e, gnorm rel %.1e, val loss rel %.1e (rc %d)",
              Z[i].flags, LAYOUT_STEPS, wl, wg, wv, rc);
    }
    int same = logs[1].n == LAYOUT_STEPS && logs[2].n == LAYOUT_STEPS;
    for (int s = 1; same && s <= LAYOUT_STEPS; s++) same = strcmp(logs[1].raw[s], logs[2].raw[s]) == 0;
    check(same && zero_same_ckpt(cks[1], cks[2], 4),
          "-zero 3 equals -zero 2 bit for bit: %d logged steps and the step-%d checkpoint", LAYOUT_STEPS, LAYOUT_STEPS);
    double wl, wg;
    runlog_worst(&logs[1], &logs[0], LAYOUT_STEPS, &wl, &wg);
    int m_gt1 = 0;
    for (int s = 1; s <= LAYOUT_STEPS; s++) m_gt1 |= logs[0].micro[s] > 1;
    check(m_gt1 && wl <= 1e-6 && wg <= 1e-6,
          "-zero 2 against -zero 1 with up to %d micro-batches per rank: loss rel %.1e, gnorm rel %.1e (the sum's "
          "order differs; bound 1e-6)",
          logs[0].micro[LAYOUT_STEPS], wl, wg);
    // one micro-batch per rank per step: byte-equal checkpoints
    char d1[1300], d2[1300], d3[1300], c1[1400], c2[1400], c3[1400];
    RunLog r1, r2, r3;
    const char* one = "-dp 4 -gb 4 -ramp off -mb 1";
    char fz[2200];
    snprintf(fz, sizeof(fz), "%s %s -zero 1", flags, one);
    int k1 = run_layout(tmp, "m1z1", data, 4, fz, d1, sizeof(d1), c1, sizeof(c1), &r1, &rc);
    snprintf(fz, sizeof(fz), "%s %s -zero 2", flags, one);
    int k2 = run_layout(tmp, "m1z2", data, 4, fz, d2, sizeof(d2), c2, sizeof(c2), &r2, &rc);
    snprintf(fz, sizeof(fz), "%s %s -zero 3", flags, one);
    int k3 = run_layout(tmp, "m1z3", data, 4, fz, d3, sizeof(d3), c3, sizeof(c3), &r3, &rc);
    check(k1 && k2 && k3 && zero_same_ckpt(c1, c2, 4) && zero_same_ckpt(c1, c3, 4),
          "one micro-batch per rank: -zero 2 and -zero 3 checkpoints byte-equal to -zero 1's (step %d, 4 ranks)",
          LAYOUT_STEPS);
    // a -zero 3 checkpoint (step 10) resumed under -zero 1 and as one process
    struct {
        const char* name;
        int np;
        const char* flags;
    } R[] = {{"rz1", 4, "-dp 4 -zero 1"}, {"r1", 1, ""}};
    for (int i = 0; i < 2; i++) {
        char rdir[1300], args[3000], cmd[4400], err[4096];
        snprintf(rdir, sizeof(rdir), "%s/%s", tmp, R[i].name);
        snprintf(cmd, sizeof(cmd), "mkdir -p %s && cp -r %s/ckpt_00000010 %s/", rdir, dirs[2], rdir);
        int rc0 = system(cmd);
        layout_args(args, sizeof(args), data, rdir);
        if (R[i].np == 1)
            snprintf(cmd, sizeof(cmd), "OMP_NUM_THREADS=1 timeout 300 ./train_gpt %s -steps %d -resume", args,
                     LAYOUT_STEPS);
        else
            snprintf(cmd, sizeof(cmd), "%s -np %d ./train_gpt %s %s -steps %d -resume", MPIRUN, R[i].np, args,
                     R[i].flags, LAYOUT_STEPS);
        rc = run_cmd(cmd, err, sizeof(err));
        RunLog rr;
        snprintf(path, sizeof(path), "%s/log.jsonl", rdir);
        int good = rc0 == 0 && rc == 0 && read_runlog(path, &rr) == 0;
        double worst = good ? runlog_worst_loss(&rr, &logs[2], 11, LAYOUT_STEPS) : INFINITY;
        check(good && worst <= 1e-5, "-zero 3 checkpoint resumed as %s: steps 11-%d losses rel %.1e (rc %d)",
              R[i].np == 1 ? "1x1x1" : R[i].flags, LAYOUT_STEPS, worst, rc);
    }
    // memory per rank: the start-up table of rank 0, one step of each level
    double p[4] = {0}, gr[4] = {0};
    for (int z = 0; z <= 3; z++) {
        char args[3000], cmd[4400], out[1400];
        snprintf(out, sizeof(out), "%s/mem%d.out", tmp, z);
        snprintf(dir, sizeof(dir), "%s/mem%d", tmp, z);
        layout_args(args, sizeof(args), data, dir);
        snprintf(cmd, sizeof(cmd), "%s -np 4 ./train_gpt %s -dp 4 -zero %d -steps 1 > %s 2>&1", MPIRUN, args, z, out);
        rc = system(cmd);
        zero_mem_row(out, &p[z], &gr[z]);
    }
    check(p[0] > 0 && gr[2] < gr[1] && p[3] < p[2] && p[2] == p[1] && p[1] == p[0],
          "memory per rank (rank 0 of 1x1x4): params %.3f/%.3f/%.3f/%.3f MiB, grads %.3f/%.3f/%.3f/%.3f MiB at "
          "-zero 0/1/2/3: -zero 2 holds fewer gradients than -zero 1, -zero 3 fewer weights",
          p[0], p[1], p[2], p[3], gr[0], gr[1], gr[2], gr[3]);
    (void)ck;
    char cmd[1400];
    snprintf(cmd, sizeof(cmd), "rm -rf %s", tmp);
    if (system(cmd) != 0) printf("note: could not remove %s\n", tmp);
}

#endif // TEST_ZERO_CASES_H
