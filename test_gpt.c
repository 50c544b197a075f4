/*
 * test_gpt.c: tests of the CPU trainer. It includes train_gpt.c with TESTING defined and
 * calls its functions (no second copy of the model). Expected values come from the
 * independent PyTorch reference (dev/train_gpt.py fixtures), from the worked values of
 * SPEC section 2, or from formulas; never from this code's own output.
 *
 * usage: ./test_gpt FIXTURE_DIR      (make test regenerates the fixtures first)
 * Prints one line per check and `N passed, M failed` last; exits 1 on any failure.
 */
#define TESTING
#include "train_gpt.c"

static int n_pass = 0, n_fail = 0;

static void check(int ok, const char* fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    printf("%s ", ok ? "ok  " : "FAIL");
    vprintf(fmt, ap);
    printf("\n");
    va_end(ap);
    fflush(stdout);
    if (ok) n_pass++; else n_fail++;
}

static double rel_err(double got, double want) {
    double d = fabs(got - want), s = fabs(want);
    return s > 0 ? d / s : d;
}

// ||got - want|| / ||want|| over n floats
static double rel_l2(const float* got, const float* want, size_t n) {
    double num = 0, den = 0;
    for (size_t i = 0; i < n; i++) { double d = (double)got[i] - want[i]; num += d * d; den += (double)want[i] * want[i]; }
    return den > 0 ? sqrt(num / den) : sqrt(num);
}

// ----------------------------------------------------------------------------------------
// fixture file: tagged records written by dev/train_gpt.py

typedef struct { char name[48]; int32_t dtype, ndim, dims[4]; size_t n; void* data; } Record;
typedef struct { int count; Record* recs; } Fixture;

static int fixture_load(Fixture* fx, const char* path) {
    FILE* f = fopen(path, "rb");
    if (!f) return -1;
    int32_t head[3];
    if (fread(head, 4, 3, f) != 3 || head[0] != 20261204 || head[1] != 1) { fclose(f); return -1; }
    fx->count = head[2];
    fx->recs = (Record*)calloc_check(fx->count, sizeof(Record));
    for (int i = 0; i < fx->count; i++) {
        Record* r = &fx->recs[i];
        if (fread(r->name, 1, 48, f) != 48 || fread(&r->dtype, 4, 1, f) != 1 || fread(&r->ndim, 4, 1, f) != 1 ||
            fread(r->dims, 4, 4, f) != 4) { fclose(f); return -1; }
        r->name[47] = 0;
        r->n = (size_t)r->dims[0] * r->dims[1] * r->dims[2] * r->dims[3];
        r->data = malloc_check(r->n * 4);
        if (fread(r->data, 4, r->n, f) != r->n) { fclose(f); return -1; }
    }
    fclose(f);
    return 0;
}

static Record* fx_get(Fixture* fx, const char* name) {
    for (int i = 0; i < fx->count; i++) if (strcmp(fx->recs[i].name, name) == 0) return &fx->recs[i];
    die("fixture has no record '%s': regenerate it with make fixtures", name);
    return NULL;
}

// the fixture's model and recipe as a Config
static Config fixture_config(Fixture* fx, const char* dir) {
    const int32_t* c = (const int32_t*)fx_get(fx, "config")->data;
    const float* r = (const float*)fx_get(fx, "recipe")->data;
    Config cfg;
    config_defaults(&cfg);
    cfg.L = c[0]; cfg.H = c[1]; cfg.heads = c[2]; cfg.seq = c[3]; cfg.V = c[4]; cfg.mb = c[6]; cfg.seed = (uint64_t)c[8];
    cfg.vpad = c[5] - c[4] + 1; // any pad multiple in (Vp - V, Vp] rounds V up to Vp; pick one that does
    while (round_up(cfg.V, cfg.vpad) != c[5]) cfg.vpad++;
    cfg.lr = r[0]; cfg.warmup_tokens = (int64_t)r[1]; cfg.decay_tokens = (int64_t)r[2]; cfg.minlr_frac = r[3];
    cfg.beta1 = r[4]; cfg.beta2 = r[5]; cfg.eps = r[6]; cfg.wd = r[7]; cfg.clip = r[8];
    cfg.ramp_start = (int64_t)r[9]; cfg.ramp_inc = (int64_t)r[10]; cfg.ramp_tokens = (int64_t)r[11]; cfg.gb = (int64_t)r[12];
    cfg.total_tokens = 1LL << 40;
    cfg.shuffle = 0; cfg.tp = cfg.pp = cfg.dp = 1;
    snprintf(cfg.train_glob, sizeof(cfg.train_glob), "%s/data_train_000.bin", dir);
    cfg.val_glob[0] = 0;
    char err[CFG_ERR_LEN];
    if (config_validate(&cfg, err) != 0) die("fixture config invalid: %s", err);
    return cfg;
}

static void fixture_train(Train* t, const Config* cfg, const char* dir) {
    Comm comm;
    comm_init_single(&comm);
    train_setup(t, cfg, &comm);
    dataset_open(&t->train, cfg->train_glob, cfg->seq, cfg->V, cfg->shuffle, cfg->seed);
    char ck[1024], err[1024];
    snprintf(ck, sizeof(ck), "%s/init/ckpt_00000000", dir);
    if (load_checkpoint(t, ck, 0, err, sizeof(err)) != 0) die("%s", err);
}

// ----------------------------------------------------------------------------------------

static void test_schedule(void) {
    // SPEC section 2 worked values (W=1e9, D=340e9, peak 5e-5, min 10%)
    const double n[7] = {0, 0.5e9, 1e9, 12e9, 100e9, 270e9, 340e9};
    const double want[7] = {0, 2.5e-5, 5e-5, 4.988e-5, 4.118e-5, 9.571e-6, 5e-6};
    for (int i = 0; i < 7; i++) {
        double got = schedule_lr(5e-5, 0.1, 1000000000LL, 340000000000LL, (int64_t)n[i]);
        double tol = want[i] == 0 ? 1e-15 : 5e-4 * want[i] + 1e-9; // worked values are given to 4 digits
        check(fabs(got - want[i]) <= tol, "lr at %.3g tokens = %.4e (want %.4e)", n[i], got, want[i]);
    }
    check(schedule_lr(5e-5, 0.1, 1000000000LL, 340000000000LL, 400000000000LL) == 5e-6, "lr constant after decay end");
}

static void test_ramp(void) {
    const int64_t G = 1920, S = 32, I = 32, R = 12000000000LL;
    const int64_t consumed[4] = {0, 99311, 99312, 5859375};
    const int64_t want[4] = {32, 32, 64, 1920};
    for (int i = 0; i < 4; i++) {
        int64_t got = schedule_batch(G, S, I, R, 2048, consumed[i]);
        check(got == want[i], "ramp at %lld sequences = %lld (want %lld)", (long long)consumed[i], (long long)got, (long long)want[i]);
    }
    check(schedule_batch(G, S, I, R, 2048, 5859376) == 1920, "ramp past R gives G");
    // k = 59 increments of per = 99,311.44 sequences; the ramp takes 14,475 steps (12.0036B tokens)
    int64_t c = 0, steps = 0;
    while (schedule_batch(G, S, I, R, 2048, c) < G) { c += schedule_batch(G, S, I, R, 2048, c); steps++; }
    check(steps == 14475, "ramp takes %lld steps (want 14475)", (long long)steps);
    check(fabs(c * 2048.0 - 12.0036e9) < 0.00005e9, "ramp ends at %.4fB tokens (want 12.0036B)", c * 2048.0 / 1e9);
    int ok = 1;
    for (int64_t x = 0; x < 6000000; x += 997) {
        int64_t b = schedule_batch(G, S, I, R, 2048, x);
        if (b < S || b > G || (b - S) % I != 0) ok = 0;
    }
    check(ok, "every ramp batch is S + j*I within [S, G]");
    check(schedule_batch(G, 0, 0, 0, 2048, 0) == G, "no ramp gives G");
}

static void test_lr_auto(void) {
    // least-squares fit computed independently (numpy polyfit in log-log): a=0.132464, b=-0.305130
    double a, b;
    lr_auto_fit(&a, &b);
    check(fabs(a - 0.132464) < 1e-5 && fabs(b + 0.305130) < 1e-5, "lr auto fit a=%.6f b=%.6f", a, b);
    check(rel_err(lr_auto(125e6), 4.48215e-4) < 1e-4, "lr auto at 125M = %.5e", lr_auto(125e6));
    check(rel_err(lr_auto(530e9), 3.50484e-5) < 1e-4, "lr auto at 530B = %.5e", lr_auto(530e9));
}

static void test_init(void) {
    int L = 4, C = 64, NH = 4, T = 16, V = 200, Vp = 256;
    ParamLayout full;
    param_layout_init(&full, L, C, NH, T, V, Vp, 0, 1, 0, 1);
    float* pf = (float*)malloc_check(sizeof(float) * full.total);
    param_init(&full, pf, 42, 1);
    // statistics against the formula
    double s = sqrt(1.0 / (3.0 * C));
    const int normal_t[3] = {PT_QKVW, PT_FCW, PT_WPE};
    for (int k = 0; k < 3; k++) {
        int t = normal_t[k];
        double sum = 0, sq = 0; size_t n = full.numel[t];
        float* p = pf + full.offset[t];
        for (size_t i = 0; i < n; i++) { sum += p[i]; sq += (double)p[i] * p[i]; }
        double sd = sqrt(sq / n - (sum / n) * (sum / n));
        check(fabs(sd / s - 1) < 4.0 / sqrt(2.0 * n) && fabs(sum / n) < 4 * s / sqrt((double)n), "init %s std %.5f (want %.5f)", PARAM_INFO[t].name, sd, s);
    }
    {
        double sq = 0; size_t n = full.numel[PT_FCPROJW];
        float* p = pf + full.offset[PT_FCPROJW];
        for (size_t i = 0; i < n; i++) sq += (double)p[i] * p[i];
        double want = s / sqrt(2.0 * L);
        check(fabs(sqrt(sq / n) / want - 1) < 0.03, "init fcprojw scaled std %.5f (want %.5f)", sqrt(sq / n), want);
    }
    int zeros = 1;
    for (int r = V; r < Vp; r++) for (int c = 0; c < C; c++) if (pf[full.offset[PT_WTE] + (size_t)r * C + c] != 0) zeros = 0;
    check(zeros, "init padded vocabulary rows are zero");
    int ones = 1, zb = 1;
    for (size_t i = 0; i < full.numel[PT_LN1W]; i++) if (pf[full.offset[PT_LN1W] + i] != 1.0f) ones = 0;
    for (size_t i = 0; i < full.numel[PT_QKVB]; i++) if (pf[full.offset[PT_QKVB] + i] != 0.0f) zb = 0;
    check(ones && zb, "init LayerNorm weights 1, biases 0");
    // every TP x PP slice equals the corresponding elements of the full tensor
    int same = 1;
    for (int TP = 1; TP <= 4; TP *= 2) for (int PP = 1; PP <= 4; PP *= 2)
    for (int tp = 0; tp < TP; tp++) for (int pp = 0; pp < PP; pp++) {
        ParamLayout pl;
        param_layout_init(&pl, L, C, NH, T, V, Vp, tp, TP, pp, PP);
        float* p = (float*)malloc_check(sizeof(float) * (pl.total + 1));
        param_init(&pl, p, 42, 1);
        for (int t = 0; t < NUM_PARAM_TENSORS; t++)
            for (size_t i = 0; i < pl.numel[t]; i++)
                if (p[pl.offset[t] + i] != pf[full.offset[t] + param_full_index(&pl, t, i)]) same = 0;
        free(p);
    }
    check(same, "init is layout independent (TP, PP in 1,2,4: every slice equals the full tensor)");
    free(pf);
}

static void test_data_addressing(void) {
    // Feistel permutation is a bijection
    const int64_t ns[5] = {1, 2, 7, 1000, 4097};
    for (int k = 0; k < 5; k++) {
        int64_t n = ns[k];
        char* seen = (char*)calloc_check(n, 1);
        int ok = 1;
        for (int64_t i = 0; i < n; i++) { int64_t p = feistel_permute(i, n, 12345); if (p < 0 || p >= n || seen[p]) ok = 0; else seen[p] = 1; }
        free(seen);
        check(ok, "shuffle is a permutation of %lld samples", (long long)n);
    }
    // micro-batch addressing covers [c, c+B) exactly once for every DP and mb split
    int ok = 1;
    const int dps[3] = {1, 2, 4}, mbs[3] = {1, 2, 4};
    for (int a = 0; a < 3; a++) for (int b = 0; b < 3; b++) {
        int DP = dps[a], mb = mbs[b];
        int64_t c = 1000, B = 32;
        char seen[32] = {0};
        for (int d = 0; d < DP; d++) for (int i = 0; i < B / (DP * mb); i++) for (int j = 0; j < mb; j++) {
            int64_t s = microbatch_first_sample(c, B, DP, d, mb, i) + j - c;
            if (s < 0 || s >= B || seen[s]) ok = 0; else seen[s] = 1;
        }
    }
    check(ok, "global batch split into DP ranks and micro-batches covers every sample once");
}

static void test_fixture_forward_backward(Fixture* fx, const char* dir) {
    Config cfg = fixture_config(fx, dir);
    Train t;
    fixture_train(&t, &cfg, dir);
    GPT* g = &t.model;
    Acts* a = &g->acts[0];
    int BT = cfg.mb * cfg.seq;
    memcpy(a->inputs, fx_get(fx, "inputs")->data, sizeof(int) * BT);
    memcpy(a->targets, fx_get(fx, "targets")->data, sizeof(int) * BT);
    double loss = gpt_forward(g, &t.comm, a) / BT;
    const float* want_logits = (const float*)fx_get(fx, "logits")->data; // (B, T, V)
    check(g->Vv == cfg.V, "logits cover the real vocabulary only (%d columns)", g->Vv);
    double e = rel_l2(a->logits, want_logits, (size_t)BT * cfg.V);
    check(e < 1e-5, "logits match PyTorch (rel L2 %.2e)", e);
    double wl = ((const float*)fx_get(fx, "loss")->data)[0];
    check(rel_err(loss, wl) < 1e-5, "loss %.7f matches PyTorch %.7f (rel %.2e)", loss, wl, rel_err(loss, wl));
    memset(g->grads, 0, sizeof(float) * g->pl.total);
    gpt_backward(g, &t.comm, a, 1.0f / BT);
    for (int tn = 0; tn < NUM_PARAM_TENSORS; tn++) {
        char name[64];
        snprintf(name, sizeof(name), "grad/%s", PARAM_INFO[tn].name);
        Record* r = fx_get(fx, name);
        int shape_ok = r->n == g->pl.numel[tn];
        double ge = shape_ok ? rel_l2(g->grads + g->pl.offset[tn], (const float*)r->data, r->n) : 1.0;
        check(shape_ok && ge < 1e-4, "gradient %-8s matches PyTorch (rel L2 %.2e)", PARAM_INFO[tn].name, ge);
    }
    train_free(&t);
}

static void test_fixture_steps(Fixture* fx, const char* dir) {
    Config cfg = fixture_config(fx, dir);
    Train t;
    fixture_train(&t, &cfg, dir);
    int nsteps = ((const int32_t*)fx_get(fx, "config")->data)[7];
    const float* wloss = (const float*)fx_get(fx, "steps/loss")->data;
    const float* wlr = (const float*)fx_get(fx, "steps/lr")->data;
    const float* wgb = (const float*)fx_get(fx, "steps/gb")->data;
    const float* wgn = (const float*)fx_get(fx, "steps/gnorm")->data;
    const float* wtok = (const float*)fx_get(fx, "steps/tokens")->data;
    int distinct_gb = 1, clipped = 0, unclipped = 0;
    double lr_sum = 0;
    for (int s = 0; s < nsteps; s++) {
        int64_t tok_before = t.tokens;
        StepResult r = train_step(&t);
        lr_sum += r.lr;
        if (s > 0 && wgb[s] != wgb[s - 1]) distinct_gb++;
        clipped += r.clipped; unclipped += !r.clipped;
        int ok = rel_err(r.loss, wloss[s]) < 1e-5 && rel_err(r.gnorm, wgn[s]) < 1e-4 &&
                 fabs(r.lr - wlr[s]) <= 1e-6 * wlr[s] + 1e-12 && r.gb == (int64_t)wgb[s] && tok_before == (int64_t)wtok[s];
        check(ok, "step %d: loss %.7f (want %.7f) gnorm %.6f (want %.6f) lr %.4e (want %.4e) gb %lld (want %d) tokens %lld (want %.0f)",
              s, r.loss, wloss[s], r.gnorm, wgn[s], r.lr, wlr[s], (long long)r.gb, (int)wgb[s], (long long)tok_before, wtok[s]);
    }
    check(distinct_gb >= 3 && wlr[0] < wlr[1], "the recipe run ramps the batch at least twice (%d sizes) under warmup", distinct_gb);
    check(clipped > 0 && unclipped > 0, "clipping active in %d steps, inactive in %d", clipped, unclipped);
    // final weights. The K slice of qkvb has an analytically zero gradient, so Adam turns
    // round-off noise into updates of up to lr per step: compare it to sum(lr) absolute.
    GPT* g = &t.model;
    for (int tn = 0; tn < NUM_PARAM_TENSORS; tn++) {
        char name[64];
        snprintf(name, sizeof(name), "final/%s", PARAM_INFO[tn].name);
        Record* r = fx_get(fx, name);
        const float* want = (const float*)r->data;
        float* got = g->params + g->pl.offset[tn];
        if (tn == PT_QKVB) {
            int C = cfg.H, ok = 1;
            double e1 = 0, n1 = 0;
            for (int l = 0; l < cfg.L; l++) for (int i = 0; i < 3 * C; i++) {
                size_t k = (size_t)l * 3 * C + i;
                if (i >= C && i < 2 * C) { if (fabs(got[k] - want[k]) > lr_sum) ok = 0; }
                else { e1 += (got[k] - want[k]) * (got[k] - want[k]); n1 += want[k] * want[k]; }
            }
            check(ok && sqrt(e1 / n1) < 1e-4, "final qkvb matches PyTorch (Q,V rel L2 %.2e; K within sum(lr))", sqrt(e1 / n1));
            continue;
        }
        double e = rel_l2(got, want, r->n);
        check(e < 1e-4, "final %-8s matches PyTorch (rel L2 %.2e)", PARAM_INFO[tn].name, e);
    }
    train_free(&t);
}

// resume continues bit-identically: 8 straight steps == 4 steps, save, load, 4 steps
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
    b.rng = 0xDEADBEEF;
    check(save_checkpoint(&b) == 0, "checkpoint saved at step 4");
    train_free(&b);
    Train c;
    Comm comm;
    comm_init_single(&comm);
    train_setup(&c, &cfg, &comm);
    dataset_open(&c.train, cfg.train_glob, cfg.seq, cfg.V, cfg.shuffle, cfg.seed);
    char latest[1100], err[1024];
    int64_t st = ckpt_find_latest(tmp, latest, sizeof(latest));
    check(st == 4 && load_checkpoint(&c, latest, 0, err, sizeof(err)) == 0, "resume finds and loads step %lld", (long long)st);
    check(c.step == 4 && c.tokens == (int64_t)((const float*)fx_get(fx, "steps/tokens")->data)[4] && c.rng == 0xDEADBEEF && c.adam_t == 4,
          "resume restores step, tokens, AdamW t and sampler state");
    int same = 1;
    for (int s = 4; s < 8; s++) { double l = train_step(&c).loss; if (memcmp(&l, &la[s], sizeof(l)) != 0) same = 0; }
    GPT *ga = &a.model, *gc = &c.model;
    same = same && memcmp(ga->params, gc->params, sizeof(float) * ga->pl.total) == 0 &&
           memcmp(ga->m, gc->m, sizeof(float) * ga->n_opt) == 0 && memcmp(ga->v, gc->v, sizeof(float) * ga->n_opt) == 0;
    check(same, "steps 5-8 after resume are bit-identical (losses, weights, moments)");

    // a save that fails part-way leaves the previous checkpoint usable
    char bad[1200], link[1300];
    ckpt_dir_name(bad, sizeof(bad), tmp, 8);
    mkdir_p(bad);
    snprintf(link, sizeof(link), "%s/rank_00000.bin.tmp", bad);
    int have_full = symlink("/dev/full", link) == 0;
    if (have_full) {
        check(save_checkpoint(&c) != 0, "a save onto a full disk reports failure");
        st = ckpt_find_latest(tmp, latest, sizeof(latest));
        Train d;
        train_setup(&d, &cfg, &comm);
        check(st == 4 && load_checkpoint(&d, latest, 0, err, sizeof(err)) == 0, "after the failed save, resume still picks step %lld and it loads", (long long)st);
        train_free(&d);
    }
    train_free(&a);
    train_free(&c);
    char cmd[1200];
    snprintf(cmd, sizeof(cmd), "rm -rf %s", tmp);
    if (system(cmd) != 0) printf("note: could not remove %s\n", tmp);
}

// ----------------------------------------------------------------------------------------
// the binary: bad input and end-to-end resume

// runs a command, returns its exit status; stderr captured into errbuf
static int run_cmd(const char* cmd, char* errbuf, size_t n) {
    char full[4096];
    snprintf(full, sizeof(full), "%s > /tmp/llmc_test_out.txt 2> /tmp/llmc_test_err.txt", cmd);
    int rc = system(full);
    errbuf[0] = 0;
    FILE* f = fopen("/tmp/llmc_test_err.txt", "r");
    if (f) { size_t k = fread(errbuf, 1, n - 1, f); errbuf[k] = 0; fclose(f); }
    return WIFEXITED(rc) ? WEXITSTATUS(rc) : 128;
}

static int count_lines(const char* s) { int n = 0; for (; *s; s++) if (*s == '\n') n++; return n; }

static void expect_error(const char* what, const char* args, const char* needle) {
    char cmd[3000], err[4096];
    snprintf(cmd, sizeof(cmd), "timeout 60 ./train_gpt %s", args);
    int rc = run_cmd(cmd, err, sizeof(err));
    int ok = rc != 0 && rc != 124 && rc < 128 && strstr(err, needle) != NULL && count_lines(err) == 1 && strncmp(err, "error: ", 7) == 0;
    char* nl = strchr(err, '\n');
    if (nl) *nl = 0;
    check(ok, "bad input, %s: exit %d, \"%s\"", what, rc, err);
}

static void write_shard(const char* path, int magic, int ntok_header, int ntok_written, int bad_token) {
    FILE* f = fopen_check(path, "wb");
    int32_t h[256] = {0};
    h[0] = magic; h[1] = 1; h[2] = ntok_header;
    fwrite(h, 4, 256, f);
    for (int i = 0; i < ntok_written; i++) { uint16_t tok = (uint16_t)(i % 100); if (i == 50 && bad_token) tok = 60000; fwrite(&tok, 2, 1, f); }
    fclose(f);
}

static void test_cli(const char* dir) {
    char tmp[] = "/tmp/llmc_cliXXXXXX";
    if (!mkdtemp(tmp)) die("mkdtemp failed");
    char good[1100], trunc[1100], magic[1100], badtok[1100], args[3000];
    snprintf(good, sizeof(good), "%s/good_000.bin", tmp); write_shard(good, 20240520, 4000, 4000, 0);
    snprintf(trunc, sizeof(trunc), "%s/trunc_000.bin", tmp); write_shard(trunc, 20240520, 4000, 3000, 0);
    snprintf(magic, sizeof(magic), "%s/magic_000.bin", tmp); write_shard(magic, 12345, 4000, 4000, 0);
    snprintf(badtok, sizeof(badtok), "%s/badtok_000.bin", tmp); write_shard(badtok, 20240520, 4000, 4000, 1);
    const char* base = "-L 2 -H 32 -heads 2 -seq 16 -V 128 -vpad 64 -mb 2 -gb 4 -ramp off -lr 1e-3 -warmup 0 -j '' -threads 1";
    expect_error("unknown flag", "-bogus 3", "unknown flag '-bogus'");
    expect_error("missing value", "-lr", "needs 1 value");
    expect_error("non-numeric value", "-mb two", "bad value 'two'");
    expect_error("zero size", "-L 0", "must be positive");
    expect_error("negative size", "-H -8", "must be positive");
    expect_error("heads not dividing H", "-H 100 -heads 3", "must divide the hidden size");
    expect_error("ramp increment not dividing", "-gb 10 -ramp 2 3 1000", "does not divide");
    expect_error("ramp batch not divisible by micro-batch", "-gb 8 -ramp 2 2 1000 -mb 4", "not divisible by micro-batch");
    expect_error("global batch not divisible by micro-batch", "-gb 6 -ramp off -mb 4", "not divisible by micro-batch");
    expect_error("unknown model", "-model 7b", "unknown model");
    snprintf(args, sizeof(args), "%s -i '%s/nothing_*.bin'", base, tmp);
    expect_error("missing shard", args, "no data shards match");
    snprintf(args, sizeof(args), "%s -i %s", base, trunc);
    expect_error("truncated shard", args, "truncated");
    snprintf(args, sizeof(args), "%s -i %s", base, magic);
    expect_error("wrong-magic shard", args, "wrong magic");
    snprintf(args, sizeof(args), "%s -i %s -steps 2 -shuffle 0", base, badtok);
    expect_error("token id >= vocabulary", args, ">= the vocabulary size 128");
    snprintf(args, sizeof(args), "%s -i %s -o %s/empty -resume", base, good, tmp);
    expect_error("-resume with no checkpoint", args, "no complete checkpoint");

    // end-to-end: 6 steps straight vs 3 steps + checkpoint + resume for 3 more
    char cmd[4000], err[4096];
    snprintf(cmd, sizeof(cmd), "./train_gpt %s -i %s -o %s/full -steps 6", base, good, tmp);
    int rc1 = run_cmd(cmd, err, sizeof(err));
    snprintf(cmd, sizeof(cmd), "./train_gpt %s -i %s -o %s/split -steps 3 -ckpt-every 3", base, good, tmp);
    int rc2 = run_cmd(cmd, err, sizeof(err));
    snprintf(cmd, sizeof(cmd), "./train_gpt %s -i %s -o %s/split -steps 6 -ckpt-every 3 -resume", base, good, tmp);
    int rc3 = run_cmd(cmd, err, sizeof(err));
    snprintf(cmd, sizeof(cmd), "diff <(grep '\"type\":\"train\"' %s/full/log.jsonl | sed 's/\"ms\".*//') "
             "<(grep '\"type\":\"train\"' %s/split/log.jsonl | sed 's/\"ms\".*//')", tmp, tmp);
    char bash[4200];
    snprintf(bash, sizeof(bash), "bash -c \"%s\"", cmd);
    // the command holds double quotes: write it to a script instead of escaping
    char script[1200];
    snprintf(script, sizeof(script), "%s/cmp.sh", tmp);
    FILE* sf = fopen_check(script, "w");
    fprintf(sf, "%s\n", cmd);
    fclose(sf);
    snprintf(cmd, sizeof(cmd), "bash %s", script);
    int rc4 = run_cmd(cmd, err, sizeof(err));
    check(rc1 == 0 && rc2 == 0 && rc3 == 0 && rc4 == 0, "binary: 3 steps + -resume logs the same 6 steps as a straight run (rc %d %d %d, diff %d)", rc1, rc2, rc3, rc4);

    // checkpoint of a different shape, a different version, a corrupt payload
    snprintf(args, sizeof(args), "-L 3 -H 32 -heads 2 -seq 16 -V 128 -vpad 64 -mb 2 -gb 4 -ramp off -j '' -i %s -o %s/split -resume", good, tmp);
    expect_error("checkpoint of a different shape", args, "different model");
    char rank0[1200];
    snprintf(rank0, sizeof(rank0), "%s/split/ckpt_00000006/rank_00000.bin", tmp);
    FILE* f = fopen(rank0, "r+b");
    if (f) {
        int64_t ver = 99;
        fseek(f, 8, SEEK_SET); fwrite(&ver, 8, 1, f); fclose(f);
        snprintf(args, sizeof(args), "%s -i %s -o %s/split -resume", base, good, tmp);
        expect_error("checkpoint of another version", args, "format version 99");
        f = fopen(rank0, "r+b");
        ver = 1;
        fseek(f, 8, SEEK_SET); fwrite(&ver, 8, 1, f);
        fseek(f, 2000, SEEK_SET); unsigned char byte; if (fread(&byte, 1, 1, f) == 1) { byte ^= 0xFF; fseek(f, 2000, SEEK_SET); fwrite(&byte, 1, 1, f); }
        fclose(f);
        expect_error("corrupt checkpoint", args, "checksum mismatch");
    } else {
        check(0, "checkpoint file %s exists", rank0);
    }
    (void)dir; (void)bash;
    snprintf(cmd, sizeof(cmd), "rm -rf %s", tmp);
    if (system(cmd) != 0) printf("note: could not remove %s\n", tmp);
}

int main(int argc, char** argv) {
    const char* dir = argc > 1 ? argv[1] : "fixtures";
    test_schedule();
    test_ramp();
    test_lr_auto();
    test_init();
    test_data_addressing();
    Fixture fx;
    char path[1024];
    snprintf(path, sizeof(path), "%s/fixture.bin", dir);
    if (fixture_load(&fx, path) != 0) {
        check(0, "fixture %s loads (run make fixtures)", path);
    } else {
        test_fixture_forward_backward(&fx, dir);
        test_fixture_steps(&fx, dir);
        test_resume_bitwise(&fx, dir);
    }
    test_cli(dir);
    printf("%d passed, %d failed\n", n_pass, n_fail);
    return n_fail == 0 ? 0 : 1;
}
