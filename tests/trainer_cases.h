/*
 * tests/trainer_cases.h: the test cases and helpers that test_gpt.c (CPU trainer) and
 * test_gpt.cu (CUDA trainer) both run, written once over the API the two trainers share:
 * Train, train_setup, train_step, save_checkpoint, load_checkpoint, train_free and Run's
 * state (llmc/host/run.h). Included after the trainer and tests/common.h, tests/fixture.h.
 *
 * The including file defines, before the include:
 *   static int trainer_state_equal(Train* a, Train* b)   1 if weights and AdamW moments
 *                                                        are bit-identical
 */
#ifndef LLMC_TESTS_TRAINER_CASES_H
#define LLMC_TESTS_TRAINER_CASES_H

#include <sys/wait.h>

// a single-process trainer on the fixture's data, started from the fixture's initial weights
static void fixture_train(Train* t, const Config* cfg, const char* dir) {
    Comm comm;
    comm_init_single(&comm);
    train_setup(t, cfg, &comm);
    dataset_open(&t->run.train, cfg->train_glob, cfg->seq, cfg->V, cfg->shuffle, cfg->seed);
    char ck[1024], err[1024];
    snprintf(ck, sizeof(ck), "%s/init/ckpt_00000000", dir);
    if (load_checkpoint(t, ck, 0, err, sizeof(err)) != 0) die("%s", err);
}

// fixture_train with the fixture's own configuration, which it returns
static Config fixture_trainer(Train* t, Fixture* fx, const char* dir) {
    Config cfg = fixture_config(fx, dir);
    fixture_train(t, &cfg, dir);
    return cfg;
}

// Two trainers on the fixture for the recomputation tests: a without recomputation, b with mode
static Config fixture_trainers_recompute(Train* a, Train* b, Fixture* fx, const char* dir, int mode) {
    Config cfg = fixture_trainer(a, fx, dir);
    cfg.recompute = mode;
    fixture_train(b, &cfg, dir);
    return cfg;
}

// Loads DIR/fixture.bin: 0 when it loads, else a failed check that says how to make it
static int fixture_open(Fixture* fx, const char* dir) {
    char path[1024];
    snprintf(path, sizeof(path), "%s/fixture.bin", dir);
    int rc = fixture_load(fx, path);
    if (rc != 0) check(0, "fixture %s loads (run make fixtures)", path);
    return rc;
}

// PyTorch's values of parameter tensor tn under "prefix/" (grad/, final/): numel floats,
// or NULL after a failed check when the fixture holds another number of them
static const float* fx_param(Fixture* fx, const char* prefix, int tn, size_t numel) {
    char name[64];
    snprintf(name, sizeof(name), "%s/%s", prefix, PARAM_INFO[tn].name);
    Record* r = fx_get(fx, name);
    if (r->n == numel) return (const float*)r->data;
    check(0, "%s holds %zu values, the model's tensor %zu", name, r->n, numel);
    return NULL;
}

// The fixture's recipe steps on t against PyTorch's: loss and gradient norm within loss_tol
// and gnorm_tol (relative), learning rate, global batch and tokens exact; the run must ramp
// the batch at least twice under warmup and clip in some steps but not all. Returns sum(lr).
static double fixture_steps_check(Fixture* fx, Train* t, double loss_tol, double gnorm_tol) {
    int nsteps = ((const int32_t*)fx_get(fx, "config")->data)[7];
    const float* wloss = (const float*)fx_get(fx, "steps/loss")->data;
    const float* wlr = (const float*)fx_get(fx, "steps/lr")->data;
    const float* wgb = (const float*)fx_get(fx, "steps/gb")->data;
    const float* wgn = (const float*)fx_get(fx, "steps/gnorm")->data;
    const float* wtok = (const float*)fx_get(fx, "steps/tokens")->data;
    int distinct_gb = 1, clipped = 0, unclipped = 0;
    double lr_sum = 0;
    for (int s = 0; s < nsteps; s++) {
        int64_t tok_before = t->run.tokens;
        StepResult r = train_step(t);
        lr_sum += r.lr;
        if (s > 0 && wgb[s] != wgb[s - 1]) distinct_gb++;
        clipped += r.clipped;
        unclipped += !r.clipped;
        int ok = rel_err(r.loss, wloss[s]) < loss_tol && rel_err(r.gnorm, wgn[s]) < gnorm_tol &&
                 fabs(r.lr - wlr[s]) <= 1e-6 * wlr[s] + 1e-12 && r.gb == (int64_t)wgb[s] &&
                 tok_before == (int64_t)wtok[s];
        check(ok,
              "step %d: loss %.7f (want %.7f, rel %.1e) gnorm %.6f (want %.6f, rel %.1e) lr %.4e (want %.4e) gb %lld "
              "(want %d) tokens %lld (want %.0f)",
              s, r.loss, wloss[s], rel_err(r.loss, wloss[s]), r.gnorm, wgn[s], rel_err(r.gnorm, wgn[s]), r.lr, wlr[s],
              (long long)r.gb, (int)wgb[s], (long long)tok_before, wtok[s]);
    }
    check(distinct_gb >= 3 && wlr[0] < wlr[1], "the recipe run ramps the batch at least twice (%d sizes) under warmup",
          distinct_gb);
    check(clipped > 0 && unclipped > 0, "clipping active in %d steps, inactive in %d", clipped, unclipped);
    return lr_sum;
}

// 8 steps straight against 4 steps, a checkpoint, and 4 more after loading it: the same
// bits. Then a save that fails leaves the previous checkpoint usable (its temporary
// directory cannot be made: a file holds the name; tests/attack/family_disk.sh fills a disk).
static void test_resume_bitwise(Fixture* fx, const char* dir) {
    Config cfg = fixture_config(fx, dir);
    char tmp[] = "/tmp/llmc_resumeXXXXXX";
    if (!mkdtemp(tmp)) die("mkdtemp failed");
    snprintf(cfg.out_dir, sizeof(cfg.out_dir), "%s", tmp);
    Train a, b;
    fixture_train(&a, &cfg, dir);
    double la[8];
    for (int s = 0; s < 8; s++) la[s] = train_step(&a).loss;
    fixture_train(&b, &cfg, dir);
    for (int s = 0; s < 4; s++) train_step(&b);
    b.run.rng = 0xDEADBEEF;
    check(save_checkpoint(&b) == 0, "checkpoint saved at step 4");
    train_free(&b);
    Train c;
    Comm comm;
    comm_init_single(&comm);
    train_setup(&c, &cfg, &comm);
    dataset_open(&c.run.train, cfg.train_glob, cfg.seq, cfg.V, cfg.shuffle, cfg.seed);
    char latest[1100], err[1024];
    int64_t st = ckpt_find_latest(tmp, latest, sizeof(latest));
    check(st == 4 && load_checkpoint(&c, latest, 0, err, sizeof(err)) == 0, "resume finds and loads step %lld",
          (long long)st);
    check(c.run.step == 4 && c.run.tokens == (int64_t)((const float*)fx_get(fx, "steps/tokens")->data)[4] &&
              c.run.rng == 0xDEADBEEF && c.run.adam_t == 4,
          "resume restores step, tokens, AdamW t and sampler state");
    int same = 1;
    for (int s = 4; s < 8; s++) {
        double l = train_step(&c).loss;
        if (memcmp(&l, &la[s], sizeof(l)) != 0) same = 0;
    }
    same = same && trainer_state_equal(&a, &c);
    check(same, "steps 5-8 after resume are bit-identical (losses, weights, moments)");

    char bad[1200], link[1300];
    ckpt_dir_name(bad, sizeof(bad), tmp, 8);
    snprintf(link, sizeof(link), "%s.tmp", bad);
    FILE* blocker = fopen(link, "w");
    int have_full = blocker != NULL && fclose(blocker) == 0;
    if (have_full) {
        check(save_checkpoint(&c) != 0, "a save that cannot make its directory reports failure");
        st = ckpt_find_latest(tmp, latest, sizeof(latest));
        Train d;
        train_setup(&d, &cfg, &comm);
        check(st == 4 && load_checkpoint(&d, latest, 0, err, sizeof(err)) == 0,
              "after the failed save, resume still picks step %lld and it loads", (long long)st);
        train_free(&d);
    }
    train_free(&a);
    train_free(&c);
    char cmd[1200];
    snprintf(cmd, sizeof(cmd), "rm -rf %s", tmp);
    if (system(cmd) != 0) printf("note: could not remove %s\n", tmp);
}

// runs a command, returns its exit status; stderr captured into errbuf
static int run_cmd(const char* cmd, char* errbuf, size_t n) {
    char full[4400], out[64], errf[64];
    // per-process names: test runs of other checkouts may run at the same time
    snprintf(out, sizeof(out), "/tmp/llmc_test_out_%d.txt", (int)getpid());
    snprintf(errf, sizeof(errf), "/tmp/llmc_test_err_%d.txt", (int)getpid());
    snprintf(full, sizeof(full), "%s > %s 2> %s", cmd, out, errf);
    int rc = system(full);
    errbuf[0] = 0;
    FILE* f = fopen(errf, "r");
    if (f) {
        size_t k = fread(errbuf, 1, n - 1, f);
        errbuf[k] = 0;
        fclose(f);
    }
    unlink(out);
    unlink(errf);
    return WIFEXITED(rc) ? WEXITSTATUS(rc) : 128;
}

// the "train" records of a -log file, steps 1..RUNLOG_STEPS; raw: each record up to "ms"
// (the fields that must not depend on the layout or the machine)
#define RUNLOG_STEPS 20
typedef struct {
    double loss[RUNLOG_STEPS + 1], gnorm[RUNLOG_STEPS + 1], overlap[RUNLOG_STEPS + 1];
    int micro[RUNLOG_STEPS + 1], syncs[RUNLOG_STEPS + 1];
    char raw[RUNLOG_STEPS + 1][200];
    int n;
} RunLog;

static int read_runlog(const char* path, RunLog* rl) {
    memset(rl, 0, sizeof(*rl));
    FILE* f = fopen(path, "r");
    if (!f) return -1;
    char line[4096];
    while (fgets(line, sizeof(line), f)) {
        if (!strstr(line, "\"type\":\"train\"")) continue;
        long long step;
        double loss, gnorm;
        char* p = strstr(line, "\"step\":");
        if (!p || sscanf(p, "\"step\":%lld", &step) != 1) continue;
        p = strstr(line, "\"loss\":");
        if (!p || sscanf(p, "\"loss\":%lf", &loss) != 1) continue;
        p = strstr(line, "\"gnorm\":");
        if (!p || sscanf(p, "\"gnorm\":%lf", &gnorm) != 1) continue;
        if (step < 1 || step > RUNLOG_STEPS) continue;
        rl->loss[step] = loss;
        rl->gnorm[step] = gnorm;
        p = strstr(line, "\"micro\":");
        rl->micro[step] = p ? atoi(p + 8) : -1;
        p = strstr(line, "\"host_syncs\":");
        rl->syncs[step] = p ? atoi(p + 13) : -1;
        p = strstr(line, "\"t_overlap_ms\":");
        rl->overlap[step] = p ? atof(p + 15) : -1.0;
        char* e = strstr(line, ",\"ms\"");
        size_t len = e ? (size_t)(e - line) : 0;
        if (len > sizeof(rl->raw[0]) - 1) len = sizeof(rl->raw[0]) - 1;
        memcpy(rl->raw[step], line, len);
        rl->raw[step][len] = 0;
        if (step > rl->n) rl->n = (int)step;
    }
    fclose(f);
    return 0;
}

// the worst relative errors of the losses (wl) and gradient norms (wg) of a against b over
// steps 1..n
static void runlog_worst(const RunLog* a, const RunLog* b, int n, double* wl, double* wg) {
    *wl = 0.0;
    *wg = 0.0;
    for (int s = 1; s <= n; s++) {
        double el = rel_err(a->loss[s], b->loss[s]);
        double eg = rel_err(a->gnorm[s], b->gnorm[s]);
        if (el > *wl) *wl = el;
        if (eg > *wg) *wg = eg;
    }
}

// the worst relative error of a's losses against b's over steps s0..n: infinite when a
// logged none for one of them (a resumed run that did not reach the end)
static double runlog_worst_loss(const RunLog* a, const RunLog* b, int s0, int n) {
    double worst = 0.0;
    for (int s = s0; s <= n; s++) {
        if (a->raw[s][0] == 0) return INFINITY;
        double e = rel_err(a->loss[s], b->loss[s]);
        if (e > worst) worst = e;
    }
    return worst;
}

// The single process posing as the last TP rank of a first pipeline stage (no head buffers):
// what the activation-memory tests build a model for, to count its bytes
static Comm first_stage_comm(int TP) {
    Comm comm;
    comm_init_single(&comm);
    comm.TP = TP;
    comm.tp = TP - 1;
    comm.PP = 2;
    comm.pp = 0;
    return comm;
}

// a learnable shard of ntok tokens: mostly an arithmetic pattern over V tokens, 20% noise
// drawn from seed (99: the fixtures')
static void write_pattern_shard_seeded(const char* path, int ntok, int V, uint64_t seed) {
    FILE* f = fopen_check(path, "wb");
    int32_t h[256] = {0};
    h[0] = 20240520;
    h[1] = 1;
    h[2] = ntok;
    fwrite(h, 4, 256, f);
    uint64_t st = seed;
    for (int i = 0; i < ntok; i++) {
        uint16_t tok = (uint16_t)((i * 7 + (i / 13)) % V);
        if (rng_uniform(&st) < 0.2f) tok = (uint16_t)(rng_next(&st) % V);
        fwrite(&tok, 2, 1, f);
    }
    fclose(f);
}

static void write_pattern_shard(const char* path, int ntok, int V) { write_pattern_shard_seeded(path, ntok, V, 99); }

// Makes the temporary directory tmp (a mkdtemp template) with one pattern shard of ntok
// tokens over V = 300, the corpus of the layout tests; its path goes to data (cap bytes)
static void pattern_tmpdir(char* tmp, char* data, size_t cap, int ntok) {
    if (!mkdtemp(tmp)) die("mkdtemp failed");
    snprintf(data, cap, "%s/pattern_000.bin", tmp);
    write_pattern_shard(data, ntok, 300);
}

#endif // LLMC_TESTS_TRAINER_CASES_H
