/*
 * cp_cases.h: context parallelism in the CPU trainer (-cp N, ring attention, doc/cp.md),
 * included by test_gpt.c after zero_cases.h (it uses the helpers of test_gpt.c and
 * zero_cases.h). Over MPI, 20 steps of the layout recipe (a ramp that changes the micro-batch
 * count) with validation every 10 and the text sample at step 20:
 *  - -cp 2, -cp 4, TP2 x CP2 x DP2 -sp 1 -zero 1, CP2 x PP2 x DP2 -pp-schedule zb-h1
 *    -recompute selective, and CP2 x PP2 -vpp 2 (one layer per chunk) equal the single
 *    process: loss, grad norm and validation loss within 1e-5, the same greedy sample;
 *  - a -cp 2 checkpoint (step 10) resumes as -cp 4 and as one process, steps 11-20 within 1e-5;
 *  - activation memory per rank of the start-up table: -cp 2 keeps less than -cp 1 for the
 *    same sequence (rows halve; the ring keeps no probabilities).
 */
#ifndef TEST_CP_CASES_H
#define TEST_CP_CASES_H

// the greedy text sample a run printed (the "sample:" line of its stdout), "" if none
static void cp_sample_line(const char* out, char* line, size_t n) {
    FILE* f = fopen(out, "r");
    char buf[4096];
    line[0] = '\0';
    while (f && fgets(buf, sizeof(buf), f))
        if (strncmp(buf, "sample:", 7) == 0) snprintf(line, n, "%s", buf);
    if (f) fclose(f);
}

// activations MiB of the "memory per rank" row of a run's stdout (0 if absent)
static double cp_act_mib(const char* out) {
    FILE* f = fopen(out, "r");
    char line[4096];
    double a = 0.0;
    while (f && fgets(line, sizeof(line), f)) {
        const char* p = strstr(line, "activations ");
        if (strstr(line, "memory per rank") && p) a = atof(p + 12);
    }
    if (f) fclose(f);
    return a;
}

static void test_cp_layouts(void) {
    if (!have_mpirun()) {
        check(0, "mpirun is available for the context-parallel tests (bash dev/install.sh)");
        return;
    }
    char tmp[] = "/tmp/llmc_cpXXXXXX";
    char data[1200], flags[2000], refdir[1300], refck[1400], path[1400], refval[1400];
    pattern_tmpdir(tmp, data, sizeof(data), 40000);
    // the sample needs a tokenizer only to print text; ids are compared through -sample-greedy 1
    snprintf(flags, sizeof(flags), "-j %s -val-every 10 -val-samples 8 -sample-every 20 -sample-len 6 -sample-greedy 1",
             data);
    RunLog ref;
    int rc;
    int ok = run_layout(tmp, "ref", data, 1, flags, refdir, sizeof(refdir), refck, sizeof(refck), &ref, &rc);
    check(ok, "cp reference 1x1x1: %d steps with validation (rc %d)", LAYOUT_STEPS, rc);
    snprintf(refval, sizeof(refval), "%s/log.jsonl", refdir);
    struct {
        const char* name;
        int np;
        const char* flags;
    } Z[] = {
        {"cp2", 2, "-cp 2"},
        {"cp4", 4, "-cp 4"},
        {"tcd", 8, "-tp 2 -cp 2 -dp 2 -sp 1 -zero 1"},
        {"cpd", 8, "-cp 2 -pp 2 -dp 2 -pp-schedule zb-h1 -recompute selective"},
        {"cpv", 4, "-cp 2 -pp 2 -vpp 2"},
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
    // the greedy sample: the same ids from every layout (run_layout keeps no stdout: rerun the last step)
    char s0[4096] = "", s1[4096] = "";
    for (int k = 0; k < 2; k++) {
        char dir[1300], args[3000], cmd[4400], out[1400];
        snprintf(dir, sizeof(dir), "%s/smp%d", tmp, k);
        snprintf(out, sizeof(out), "%s/smp%d.out", tmp, k);
        layout_args(args, sizeof(args), data, dir);
        snprintf(cmd, sizeof(cmd), "%s %s ./train_gpt %s %s %s -steps 2 > %s 2>&1",
                 k == 0 ? "OMP_NUM_THREADS=1 timeout 300" : MPIRUN, k == 0 ? "" : "-np 4", args, flags,
                 k == 0 ? "-sample-every 2" : "-cp 2 -pp 2 -sample-every 2", out);
        rc = system(cmd);
        cp_sample_line(out, k == 0 ? s0 : s1, sizeof(s0));
    }
    check(s0[0] != 0 && strcmp(s0, s1) == 0, "the greedy sample of -cp 2 -pp 2 equals the single process's: %.60s", s0);
    // a -cp 2 checkpoint resumed as -cp 4 and as one process
    struct {
        const char* name;
        int np;
        const char* flags;
    } R[] = {{"rcp4", 4, "-cp 4"}, {"r1", 1, ""}};
    for (int i = 0; i < 2; i++) {
        char rdir[1300], args[3000], cmd[4400], err[4096];
        snprintf(rdir, sizeof(rdir), "%s/%s", tmp, R[i].name);
        snprintf(cmd, sizeof(cmd), "mkdir -p %s && cp -r %s/ckpt_00000010 %s/", rdir, dirs[0], rdir);
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
        double worst = good ? runlog_worst_loss(&rr, &logs[0], 11, LAYOUT_STEPS) : INFINITY;
        check(good && worst <= 1e-5, "-cp 2 checkpoint resumed as %s: steps 11-%d losses rel %.1e (rc %d)",
              R[i].np == 1 ? "1x1x1" : R[i].flags, LAYOUT_STEPS, worst, rc);
    }
    // activation memory per rank, -cp 1 against -cp 2 (rank 0's table)
    double act[2] = {0, 0};
    for (int k = 0; k < 2; k++) {
        char dir[1300], args[3000], cmd[4400], out[1400];
        snprintf(dir, sizeof(dir), "%s/mem%d", tmp, k);
        snprintf(out, sizeof(out), "%s/mem%d.out", tmp, k);
        layout_args(args, sizeof(args), data, dir);
        snprintf(cmd, sizeof(cmd), "%s -np %d ./train_gpt %s -cp %d -steps 1 > %s 2>&1", MPIRUN, k + 1, args, k + 1,
                 out);
        rc = system(cmd);
        act[k] = cp_act_mib(out);
    }
    check(act[0] > 0 && act[1] > 0 && act[1] < act[0], "activations per rank: %.3f MiB at -cp 1, %.3f MiB at -cp 2",
          act[0], act[1]);
    char cmd[1400];
    snprintf(cmd, sizeof(cmd), "rm -rf %s", tmp);
    if (system(cmd) != 0) printf("note: could not remove %s\n", tmp);
}

#endif // TEST_CP_CASES_H
