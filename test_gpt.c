/*
 * test_gpt.c: tests of the CPU trainer. It includes train_gpt.c with TESTING defined and
 * calls its functions (no second copy of the model). Expected values come from the
 * independent PyTorch reference (dev/train_gpt.py fixtures), from the worked values of
 * doc/spec.md section 2, or from formulas; never from this code's own output.
 *
 * usage: ./test_gpt FIXTURE_DIR      (make test regenerates the fixtures first)
 * Prints one line per check and `N passed, M failed` last; exits 1 on any failure.
 */
#define TESTING
#include "train_gpt.c"
#include "tests/common.h"
#include "tests/fixture.h"

// weights and AdamW moments bit-identical (tests/trainer_cases.h's resume test)
static int trainer_state_equal(Train* a, Train* b) {
    GPT *ga = &a->model, *gb = &b->model;
    return memcmp(ga->params, gb->params, sizeof(float) * ga->pl.total) == 0 &&
           memcmp(ga->m, gb->m, sizeof(float) * ga->n_opt) == 0 && memcmp(ga->v, gb->v, sizeof(float) * ga->n_opt) == 0;
}
#include "tests/trainer_cases.h"

// ----------------------------------------------------------------------------------------

static void test_schedule(void) {
    // doc/spec.md section 2 worked values (W=1e9, D=340e9, peak 5e-5, min 10%)
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
        check(got == want[i], "ramp at %lld sequences = %lld (want %lld)", (long long)consumed[i], (long long)got,
              (long long)want[i]);
    }
    check(schedule_batch(G, S, I, R, 2048, 5859376) == 1920, "ramp past R gives G");
    // k = 59 increments of per = 99,311.44 sequences; the ramp takes 14,475 steps (12.0036B tokens)
    int64_t c = 0, steps = 0;
    while (schedule_batch(G, S, I, R, 2048, c) < G) {
        c += schedule_batch(G, S, I, R, 2048, c);
        steps++;
    }
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

// the flag parser's numbers: integers exact over all of int64, round numbers in scientific
// notation, nothing that strtod would take but a user did not mean (hex, inf, blanks, underflow)
static void test_parse_numbers(void) {
    int64_t i = 0;
    double d = 0;
    int ok = parse_i64("9007199254740993", &i);
    check(ok && i == 9007199254740993LL, "-seed 2^53 + 1 parses exactly (%lld)", (long long)i);
    check(parse_i64("9223372036854775807", &i) && i == INT64_MAX, "the largest int64 parses exactly");
    check(!parse_i64("9223372036854775808", &i), "one past the largest int64 is refused");
    check(parse_i64("12e9", &i) && i == 12000000000LL && parse_i64("1.5e6", &i) && i == 1500000LL,
          "round numbers in scientific notation: 12e9, 1.5e6");
    check(!parse_i64("1e300", &i) && !parse_i64("1.5", &i) && !parse_i64("9.007199254740993e15", &i),
          "non-integers and integers beyond 2^53 in scientific notation are refused");
    const char* bad[] = {"0x2", "0X10", "inf", "nan", " 5", "5 ", "", "1e-400", "2e400", "1,5"};
    int refused = 1;
    for (size_t k = 0; k < sizeof(bad) / sizeof(bad[0]); k++)
        refused = refused && !parse_f64(bad[k], &d) && !parse_i64(bad[k], &i);
    check(refused, "hex, inf, nan, blanks, empty, underflow, overflow and commas are refused as numbers");
    check(parse_f64("5e-5", &d) && d == 5e-5 && parse_f64("-.5", &d) && d == -0.5, "plain decimals parse (5e-5, -.5)");
}

// a sample's bytes as JSON text: escapes, and U+FFFD for each byte of an invalid UTF-8
// sequence (a token boundary may cut a character); the expected strings are written by hand
static void test_json_bytes(void) {
    const char in[] = "a\"\\\x01\xe2\x82\xac\xff\xe2\x82\xed\xa0\x80\xf0\x9f\x98\x80";
    const char want[] = "\"a\\\"\\\\\\u0001\xe2\x82\xac\\ufffd\\ufffd\\ufffd\\ufffd\\ufffd\\ufffd\xf0\x9f\x98\x80\"";
    char got[256] = {0};
    FILE* f = fmemopen(got, sizeof(got) - 1, "w");
    json_put_bytes(f, (const unsigned char*)in, sizeof(in) - 1);
    fclose(f);
    check(strcmp(got, want) == 0, "sample bytes as JSON: escapes, U+FFFD per invalid byte (got %s)", got);
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
    param_init(&full, pf, 42, 1, 1.0);
    // statistics against the formula
    double s = sqrt(1.0 / (3.0 * C));
    const int normal_t[3] = {PT_QKVW, PT_FCW, PT_WPE};
    for (int k = 0; k < 3; k++) {
        int t = normal_t[k];
        double sum = 0, sq = 0;
        size_t n = full.numel[t];
        float* p = pf + full.offset[t];
        for (size_t i = 0; i < n; i++) {
            sum += p[i];
            sq += (double)p[i] * p[i];
        }
        double sd = sqrt(sq / n - (sum / n) * (sum / n));
        check(fabs(sd / s - 1) < 4.0 / sqrt(2.0 * n) && fabs(sum / n) < 4 * s / sqrt((double)n),
              "init %s std %.5f (want %.5f)", PARAM_INFO[t].name, sd, s);
    }
    {
        double sq = 0;
        size_t n = full.numel[PT_FCPROJW];
        float* p = pf + full.offset[PT_FCPROJW];
        for (size_t i = 0; i < n; i++) sq += (double)p[i] * p[i];
        double want = s / sqrt(2.0 * L);
        check(fabs(sqrt(sq / n) / want - 1) < 0.03, "init fcprojw scaled std %.5f (want %.5f)", sqrt(sq / n), want);
    }
    int zeros = 1;
    for (int r = V; r < Vp; r++)
        for (int c = 0; c < C; c++)
            if (pf[full.offset[PT_WTE] + (size_t)r * C + c] != 0) zeros = 0;
    check(zeros, "init padded vocabulary rows are zero");
    int ones = 1, zb = 1;
    for (size_t i = 0; i < full.numel[PT_LN1W]; i++)
        if (pf[full.offset[PT_LN1W] + i] != 1.0f) ones = 0;
    for (size_t i = 0; i < full.numel[PT_QKVB]; i++)
        if (pf[full.offset[PT_QKVB] + i] != 0.0f) zb = 0;
    check(ones && zb, "init LayerNorm weights 1, biases 0");
    // every TP x PP slice equals the corresponding elements of the full tensor
    int same = 1;
    for (int TP = 1; TP <= 4; TP *= 2)
        for (int PP = 1; PP <= 4; PP *= 2)
            for (int tp = 0; tp < TP; tp++)
                for (int pp = 0; pp < PP; pp++) {
                    ParamLayout pl;
                    param_layout_init(&pl, L, C, NH, T, V, Vp, tp, TP, pp, PP);
                    float* p = (float*)malloc_check(sizeof(float) * (pl.total + 1));
                    param_init(&pl, p, 42, 1, 1.0);
                    for (int t = 0; t < NUM_PARAM_TENSORS; t++)
                        for (size_t i = 0; i < pl.numel[t]; i++)
                            if (p[pl.offset[t] + i] != pf[full.offset[t] + param_full_index(&pl, t, i)]) same = 0;
                    free(p);
                }
    check(same, "init is layout independent (TP, PP in 1,2,4: every slice equals the full tensor)");
    // -init-std-mult 2: every normal weight exactly doubles (a power of two scales without rounding),
    // LayerNorm weights and biases stay 1 and 0
    float* p2 = (float*)malloc_check(sizeof(float) * full.total);
    param_init(&full, p2, 42, 1, 2.0);
    int doubled = 1;
    for (int t = 0; t < NUM_PARAM_TENSORS; t++) {
        int normal = PARAM_INFO[t].init == INIT_NORMAL || PARAM_INFO[t].init == INIT_NORMAL_SCALED;
        for (size_t i = 0; i < full.numel[t]; i++) {
            float a = pf[full.offset[t] + i], b = p2[full.offset[t] + i];
            if (b != (normal ? 2.0f * a : a)) doubled = 0;
        }
    }
    check(doubled, "init with -init-std-mult 2: normal weights x2 exactly, LayerNorm and biases unchanged");
    free(p2);
    free(pf);
}

static void test_data_addressing(void) {
    // Feistel permutation is a bijection
    const int64_t ns[5] = {1, 2, 7, 1000, 4097};
    for (int k = 0; k < 5; k++) {
        int64_t n = ns[k];
        char* seen = (char*)calloc_check(n, 1);
        int ok = 1;
        for (int64_t i = 0; i < n; i++) {
            int64_t p = feistel_permute(i, n, 12345);
            if (p < 0 || p >= n || seen[p])
                ok = 0;
            else
                seen[p] = 1;
        }
        free(seen);
        check(ok, "shuffle is a permutation of %lld samples", (long long)n);
    }
    // micro-batch addressing covers [c, c+B) exactly once for every DP and mb split
    int ok = 1;
    const int dps[3] = {1, 2, 4}, mbs[3] = {1, 2, 4};
    for (int a = 0; a < 3; a++)
        for (int b = 0; b < 3; b++) {
            int DP = dps[a], mb = mbs[b];
            int64_t c = 1000, B = 32;
            char seen[32] = {0};
            for (int d = 0; d < DP; d++)
                for (int i = 0; i < B / (DP * mb); i++)
                    for (int j = 0; j < mb; j++) {
                        int64_t s = microbatch_first_sample(c, B, DP, d, mb, i) + j - c;
                        if (s < 0 || s >= B || seen[s])
                            ok = 0;
                        else
                            seen[s] = 1;
                    }
        }
    check(ok, "global batch split into DP ranks and micro-batches covers every sample once");
}

static void test_fixture_forward_backward(Fixture* fx, const char* dir) {
    Train t;
    Config cfg = fixture_trainer(&t, fx, dir);
    GPT* g = &t.model;
    Acts* a = &g->acts[0];
    int BT = cfg.mb * cfg.seq;
    memcpy(a->inputs, fx_get(fx, "inputs")->data, sizeof(int) * BT);
    memcpy(a->targets, fx_get(fx, "targets")->data, sizeof(int) * BT);
    double loss = gpt_forward(g, &t.run.comm, a, 0) / BT;
    const float* want_logits = (const float*)fx_get(fx, "logits")->data; // (B, T, V)
    check(g->Vv == cfg.V, "logits cover the real vocabulary only (%d columns)", g->Vv);
    double e = rel_l2(a->logits, want_logits, (size_t)BT * cfg.V);
    check(e < 1e-5, "logits match PyTorch (rel L2 %.2e)", e);
    double wl = ((const float*)fx_get(fx, "loss")->data)[0];
    check(rel_err(loss, wl) < 1e-5, "loss %.7f matches PyTorch %.7f (rel %.2e)", loss, wl, rel_err(loss, wl));
    // stale values from a previous step must not leak in: grads_begin zeroes only the
    // small tensors, the GEMMs overwrite the rest
    for (size_t k = 0; k < g->pl.total; k++) g->grads[k] = NAN;
    grads_begin(g);
    gpt_backward(g, &t.run.comm, a, 0, 1.0f / BT, NULL);
    grads_end(g);
    for (int tn = 0; tn < NUM_PARAM_TENSORS; tn++) {
        const float* want = fx_param(fx, "grad", tn, g->pl.numel[tn]);
        if (!want) continue;
        double ge = rel_l2(g->grads + g->pl.offset[tn], want, g->pl.numel[tn]);
        check(ge < 1e-4, "gradient %-8s matches PyTorch (rel L2 %.2e)", PARAM_INFO[tn].name, ge);
    }
    train_free(&t);
}

static void test_fixture_steps(Fixture* fx, const char* dir) {
    Train t;
    Config cfg = fixture_trainer(&t, fx, dir);
    double lr_sum = fixture_steps_check(fx, &t, 1e-5, 1e-4);
    // final weights. The K slice of qkvb has an analytically zero gradient, so Adam turns
    // round-off noise into updates of up to lr per step: compare it to sum(lr) absolute.
    GPT* g = &t.model;
    for (int tn = 0; tn < NUM_PARAM_TENSORS; tn++) {
        const float* want = fx_param(fx, "final", tn, g->pl.numel[tn]);
        if (!want) continue;
        float* got = g->params + g->pl.offset[tn];
        if (tn == PT_QKVB) {
            int C = cfg.H, ok = 1;
            double e1 = 0, n1 = 0;
            for (int l = 0; l < cfg.L; l++)
                for (int i = 0; i < 3 * C; i++) {
                    size_t k = (size_t)l * 3 * C + i;
                    if (i >= C && i < 2 * C) {
                        if (fabs(got[k] - want[k]) > lr_sum) ok = 0;
                    } else {
                        e1 += (got[k] - want[k]) * (got[k] - want[k]);
                        n1 += want[k] * want[k];
                    }
                }
            check(ok && sqrt(e1 / n1) < 1e-4, "final qkvb matches PyTorch (Q,V rel L2 %.2e; K within sum(lr))",
                  sqrt(e1 / n1));
            continue;
        }
        double e = rel_l2(got, want, g->pl.numel[tn]);
        check(e < 1e-4, "final %-8s matches PyTorch (rel L2 %.2e)", PARAM_INFO[tn].name, e);
    }
    train_free(&t);
}

// 8 steps without recomputation and with `mode`: 1 when losses, grad norms and final
// weights are bit-identical; the activation bytes each keeps per micro-batch in bytes[2]
static int recompute_matches_none(Fixture* fx, const char* dir, int mode, size_t bytes[2]) {
    Train a, b;
    fixture_trainers_recompute(&a, &b, fx, dir, mode);
    int same = 1;
    for (int s = 0; s < 8; s++) {
        StepResult ra = train_step(&a), rb = train_step(&b);
        if (ra.loss != rb.loss || ra.gnorm != rb.gnorm) same = 0;
    }
    same = same && memcmp(a.model.params, b.model.params, sizeof(float) * a.model.pl.total) == 0;
    bytes[0] = a.model.acts[0].bytes;
    bytes[1] = b.model.acts[0].bytes;
    train_free(&a);
    train_free(&b);
    return same;
}

// -recompute 1 rebuilds each block's activations in backward: the same numbers exactly
static void test_recompute(Fixture* fx, const char* dir) {
    size_t bytes[2];
    check(recompute_matches_none(fx, dir, 1, bytes),
          "-recompute 1 gives bit-identical losses, grad norms and weights over 8 steps");
}

// ----------------------------------------------------------------------------------------
// the binary: bad input and end-to-end resume

static int count_lines(const char* s) {
    int n = 0;
    for (; *s; s++)
        if (*s == '\n') n++;
    return n;
}

static void expect_error(const char* what, const char* args, const char* needle) {
    char cmd[3000], err[4096];
    snprintf(cmd, sizeof(cmd), "timeout 60 ./train_gpt %s", args);
    int rc = run_cmd(cmd, err, sizeof(err));
    int ok = rc != 0 && rc != 124 && rc < 128 && strstr(err, needle) != NULL && count_lines(err) == 1 &&
             strncmp(err, "error: ", 7) == 0;
    char* nl = strchr(err, '\n');
    if (nl) *nl = 0;
    check(ok, "bad input, %s: exit %d, \"%s\"", what, rc, err);
}

static void write_shard(const char* path, int magic, int ntok_header, int ntok_written, int bad_token) {
    FILE* f = fopen_check(path, "wb");
    int32_t h[256] = {0};
    h[0] = magic;
    h[1] = 1;
    h[2] = ntok_header;
    fwrite(h, 4, 256, f);
    for (int i = 0; i < ntok_written; i++) {
        uint16_t tok = (uint16_t)(i % 100);
        if (i == 50 && bad_token) tok = 60000;
        fwrite(&tok, 2, 1, f);
    }
    fclose(f);
}

static void test_cli(const char* dir) {
    char tmp[] = "/tmp/llmc_cliXXXXXX";
    if (!mkdtemp(tmp)) die("mkdtemp failed");
    char good[1100], trunc[1100], magic[1100], badtok[1100], args[3000];
    snprintf(good, sizeof(good), "%s/good_000.bin", tmp);
    write_shard(good, 20240520, 4000, 4000, 0);
    snprintf(trunc, sizeof(trunc), "%s/trunc_000.bin", tmp);
    write_shard(trunc, 20240520, 4000, 3000, 0);
    snprintf(magic, sizeof(magic), "%s/magic_000.bin", tmp);
    write_shard(magic, 12345, 4000, 4000, 0);
    snprintf(badtok, sizeof(badtok), "%s/badtok_000.bin", tmp);
    write_shard(badtok, 20240520, 4000, 4000, 1);
    const char* base =
        "-L 2 -H 32 -heads 2 -seq 16 -V 128 -vpad 64 -mb 2 -gb 4 -ramp off -lr 1e-3 -warmup 0 -j '' -threads 1";
    expect_error("unknown flag", "-bogus 3", "unknown flag '-bogus'");
    expect_error("missing value", "-lr", "needs 1 value");
    expect_error("non-numeric value", "-mb two", "bad value 'two'");
    expect_error("zero size", "-L 0", "must be positive");
    expect_error("negative size", "-H -8", "must be positive");
    expect_error("heads not dividing H", "-H 100 -heads 3", "must divide the hidden size");
    expect_error("ramp increment not dividing", "-gb 10 -ramp 2 3 1000", "does not divide");
    expect_error("ramp batch not divisible by micro-batch", "-gb 8 -ramp 2 2 1000 -mb 4",
                 "not divisible by micro-batch");
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
    snprintf(cmd, sizeof(cmd),
             "diff <(grep '\"type\":\"train\"' %s/full/log.jsonl | sed 's/\"ms\".*//') "
             "<(grep '\"type\":\"train\"' %s/split/log.jsonl | sed 's/\"ms\".*//')",
             tmp, tmp);
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
    check(rc1 == 0 && rc2 == 0 && rc3 == 0 && rc4 == 0,
          "binary: 3 steps + -resume logs the same 6 steps as a straight run (rc %d %d %d, diff %d)", rc1, rc2, rc3,
          rc4);

    // checkpoint of a different shape, a different version, a corrupt payload (only the
    // newest is kept: with an older one -resume would fall back to it)
    snprintf(cmd, sizeof(cmd), "rm -rf %s/split/ckpt_00000003", tmp);
    if (system(cmd) != 0) printf("note: could not remove %s/split/ckpt_00000003\n", tmp);
    snprintf(args, sizeof(args),
             "-L 3 -H 32 -heads 2 -seq 16 -V 128 -vpad 64 -mb 2 -gb 4 -ramp off -j '' -i %s -o %s/split -resume", good,
             tmp);
    expect_error("checkpoint of a different shape", args, "different model");
    char rank0[1200];
    snprintf(rank0, sizeof(rank0), "%s/split/ckpt_00000006/rank_00000.bin", tmp);
    FILE* f = fopen(rank0, "r+b");
    if (f) {
        int64_t ver = 99;
        fseek(f, 8, SEEK_SET);
        fwrite(&ver, 8, 1, f);
        fclose(f);
        snprintf(args, sizeof(args), "%s -i %s -o %s/split -resume", base, good, tmp);
        expect_error("checkpoint of another version", args, "format version 99");
        f = fopen(rank0, "r+b");
        ver = CKPT_VERSION;
        fseek(f, 8, SEEK_SET);
        fwrite(&ver, 8, 1, f);
        fseek(f, 2000, SEEK_SET);
        unsigned char byte;
        if (fread(&byte, 1, 1, f) == 1) {
            byte ^= 0xFF;
            fseek(f, 2000, SEEK_SET);
            fwrite(&byte, 1, 1, f);
        }
        fclose(f);
        expect_error("corrupt checkpoint", args, "checksum mismatch");
    } else {
        check(0, "checkpoint file %s exists", rank0);
    }
    (void)dir;
    (void)bash;
    snprintf(cmd, sizeof(cmd), "rm -rf %s", tmp);
    if (system(cmd) != 0) printf("note: could not remove %s\n", tmp);
}


// ----------------------------------------------------------------------------------------
// 1F1B schedule: per-stage invariants and a simulation of all stages together

static void test_schedule_1f1b(void) {
    int ok_order = 1, ok_inflight = 1, ok_match = 1, ok_nodeadlock = 1;
    for (int PP = 1; PP <= 8; PP++)
        for (int m = 1; m <= 3 * PP; m++) {
            Action* plans[8];
            int n[8];
            for (int r = 0; r < PP; r++) {
                plans[r] = pipe_1f1b(r, PP, m, 0, &n[r]);
                int fwd[64] = {0}, bwd[64] = {0}, inflight = 0, maxin = 0;
                for (int i = 0; i < n[r]; i++) {
                    int k = plans[r][i].micro;
                    if (plans[r][i].kind == ACT_FORWARD) {
                        if (fwd[k]) ok_order = 0;
                        fwd[k]++;
                        inflight++;
                    }
                    if (plans[r][i].kind == ACT_BACKWARD) {
                        if (!fwd[k] || bwd[k]) ok_order = 0;
                        bwd[k]++;
                        inflight--;
                    }
                    if (inflight > maxin) maxin = inflight;
                }
                for (int k = 0; k < m; k++)
                    if (fwd[k] != 1 || bwd[k] != 1) ok_order = 0;
                if (maxin > PP || maxin > m) ok_inflight = 0;
            }
            // every send has its matching receive on the neighbouring stage, and vice versa
            for (int r = 0; r < PP; r++)
                for (int i = 0; i < n[r]; i++) {
                    ActionKind k = plans[r][i].kind;
                    int mi = plans[r][i].micro;
                    int peer = -1;
                    ActionKind want = ACT_FORWARD;
                    if (k == ACT_SEND_ACT) {
                        peer = r + 1;
                        want = ACT_RECV_ACT;
                    }
                    if (k == ACT_RECV_ACT) {
                        peer = r - 1;
                        want = ACT_SEND_ACT;
                    }
                    if (k == ACT_SEND_GRAD) {
                        peer = r - 1;
                        want = ACT_RECV_GRAD;
                    }
                    if (k == ACT_RECV_GRAD) {
                        peer = r + 1;
                        want = ACT_SEND_GRAD;
                    }
                    if (peer == -1 && (k == ACT_FORWARD || k == ACT_BACKWARD)) continue;
                    if (peer < 0 || peer >= PP) {
                        ok_match = 0;
                        continue;
                    }
                    int found = 0;
                    for (int j = 0; j < n[peer]; j++)
                        if (plans[peer][j].kind == want && plans[peer][j].micro == mi) found++;
                    if (found != 1) ok_match = 0;
                }
            // simulate: sends never block, a receive waits for its message
            int pc[8] = {0}, sent_act[8][64] = {{0}}, sent_grad[8][64] = {{0}}, progress = 1;
            while (progress) {
                progress = 0;
                for (int r = 0; r < PP; r++) {
                    while (pc[r] < n[r]) {
                        Action a = plans[r][pc[r]];
                        if (a.kind == ACT_RECV_ACT && !sent_act[r - 1][a.micro]) break;
                        if (a.kind == ACT_RECV_GRAD && !sent_grad[r + 1][a.micro]) break;
                        if (a.kind == ACT_SEND_ACT) sent_act[r][a.micro] = 1;
                        if (a.kind == ACT_SEND_GRAD) sent_grad[r][a.micro] = 1;
                        pc[r]++;
                        progress = 1;
                    }
                }
            }
            for (int r = 0; r < PP; r++) {
                if (pc[r] != n[r]) ok_nodeadlock = 0;
                free(plans[r]);
            }
        }
    check(ok_order, "1F1B: PP 1..8, m 1..3PP: every micro-batch forwarded then backwarded exactly once per stage");
    check(ok_inflight, "1F1B: activations in flight never exceed PP (nor m)");
    check(ok_match, "1F1B: every send has exactly one matching receive");
    check(ok_nodeadlock, "1F1B: all stages run to completion with non-blocking sends (no deadlock)");
    int n0, n3;
    Action* a0 = pipe_1f1b(0, 4, 8, 0, &n0);
    Action* a3 = pipe_1f1b(3, 4, 8, 0, &n3);
    int w0 = 0;
    while (a0[w0 * 2].kind == ACT_FORWARD && a0[w0 * 2 + 1].kind == ACT_SEND_ACT && w0 < 4) w0++;
    check(w0 == 4 && a3[0].kind == ACT_RECV_ACT && a3[1].kind == ACT_FORWARD && a3[2].kind == ACT_BACKWARD,
          "1F1B: stage 0 of 4 starts with 3 warm-up forwards (+1 steady), the last stage alternates at once");
    free(a0);
    free(a3);
}

// ----------------------------------------------------------------------------------------
// 3D layouts over MPI against the single process (needs mpirun; skipped, and said, without)

#define LAYOUT_STEPS 20 // at most RUNLOG_STEPS (tests/trainer_cases.h)

static const char* MPIRUN = "timeout 300 mpirun --oversubscribe --allow-run-as-root -x OMP_NUM_THREADS=1";

// the layouts' shared flags: 20 steps, warmup and cosine decay inside them, a ramp 4->16 by 4
static void layout_args(char* out, size_t n, const char* data, const char* outdir) {
    snprintf(out, n,
             "-L 4 -H 64 -heads 4 -seq 32 -V 300 -vpad 128 -mb 1 -gb 16 -ramp 4 4 1536 -lr 2e-3 -warmup 2000 "
             "-decay 8000 -tokens 1e9 -i %s -j '' -shuffle 1 -seed 7 -threads 1 -o %s",
             data, outdir);
}

// One layout run for LAYOUT_STEPS steps: ./train_gpt on np ranks (1: no mpirun) with
// layout_args (-o DIR = tmp/name), then flags, checkpointing every 10 steps. Fills dir, its
// log in *rl and the step-LAYOUT_STEPS checkpoint's directory in ck; returns 1 when the run
// exited 0 with every step logged (*rc: its exit status).
static int run_layout(const char* tmp, const char* name, const char* data, int np, const char* flags, char* dir,
                      size_t dirn, char* ck, size_t ckn, RunLog* rl, int* rc) {
    char args[3000], cmd[4400], err[4096], path[1400];
    snprintf(dir, dirn, "%s/%s", tmp, name);
    layout_args(args, sizeof(args), data, dir);
    if (np == 1)
        snprintf(cmd, sizeof(cmd), "OMP_NUM_THREADS=1 timeout 300 ./train_gpt %s %s -steps %d -ckpt-every 10", args,
                 flags, LAYOUT_STEPS);
    else
        snprintf(cmd, sizeof(cmd), "%s -np %d ./train_gpt %s %s -steps %d -ckpt-every 10", MPIRUN, np, args, flags,
                 LAYOUT_STEPS);
    *rc = run_cmd(cmd, err, sizeof(err));
    snprintf(path, sizeof(path), "%s/log.jsonl", dir);
    ckpt_dir_name(ck, ckn, dir, LAYOUT_STEPS);
    return *rc == 0 && read_runlog(path, rl) == 0 && rl->n == LAYOUT_STEPS;
}

// compares two checkpoints tensor by tensor (full, gathered); returns the worst rel L2
static double compare_ckpts(const char* a, const char* b, char* worst, size_t wn) {
    CkptSet sa, sb;
    char err[1024];
    if (ckpt_set_open(&sa, a, err, sizeof(err)) != 0) {
        snprintf(worst, wn, "%s", err);
        return 1.0;
    }
    if (ckpt_set_open(&sb, b, err, sizeof(err)) != 0) {
        snprintf(worst, wn, "%s", err);
        ckpt_set_close(&sa);
        return 1.0;
    }
    const ParamLayout* p = &sa.pl[0];
    double worst_e = 0;
    for (int t = 0; t < NUM_PARAM_TENSORS; t++) {
        size_t full = (size_t)p->full_rows[t] * p->full_cols[t];
        float* fa = (float*)malloc_check(sizeof(float) * full);
        float* fb = (float*)malloc_check(sizeof(float) * full);
        char* mask = (char*)malloc_check(full);
        double num = 0, den = 0;
        int layers = PARAM_INFO[t].layered ? p->L : 1;
        for (int l = 0; l < layers; l++) {
            if (ckpt_set_gather(&sa, t, l, 0, fa, mask, err, sizeof(err)) != 0 ||
                ckpt_set_gather(&sb, t, l, 0, fb, mask, err, sizeof(err)) != 0) {
                snprintf(worst, wn, "%s", err);
                num = 1;
                den = 1;
                break;
            }
            for (size_t i = 0; i < full; i++) {
                // K slice of qkvb: analytically zero gradient, Adam-amplified round-off (see test_fixture_steps)
                if (t == PT_QKVB && i >= (size_t)p->C && i < 2 * (size_t)p->C) continue;
                double d = (double)fa[i] - fb[i];
                num += d * d;
                den += (double)fb[i] * fb[i];
            }
        }
        double e = den > 0 ? sqrt(num / den) : sqrt(num);
        if (e > worst_e) {
            worst_e = e;
            snprintf(worst, wn, "%s", PARAM_INFO[t].name);
        }
        free(fa);
        free(fb);
        free(mask);
    }
    ckpt_set_close(&sa);
    ckpt_set_close(&sb);
    return worst_e;
}

static int have_mpirun(void) { return system("command -v mpirun > /dev/null 2>&1") == 0; }

// Megatron's blending rule as its helpers write it, in double precision: the independent
// reference for blend.h's fixed-point version (the same picks, and counts within 1 of w*N)
static void test_blend_order(void) {
    BlendSpec b;
    char err[512];
    int ok = blend_parse_arg("0.5 a_*.bin 0.3 b_*.bin 0.2 c_*.bin", &b, err, sizeof(err)) == 0 && b.n == 3;
    check(ok && !b.plain && strcmp(b.name[1], "b") == 0 && fabs(b.weight[2] - 0.2) < 1e-15,
          "-i \"0.5 a_*.bin 0.3 b_*.bin 0.2 c_*.bin\" is a blend of a, b, c (%s)", ok ? "" : err);
    BlendOrder o;
    blend_order_init(&o, &b);
    const int64_t N = 3 * BLEND_STRIDE + 77;
    double cnt[3] = {0, 0, 0};
    int64_t seen[3] = {0, 0, 0};
    int64_t mism = 0;
    int64_t off = 0;
    double worst = 0;
    for (int64_t s = 0; s < N; s++) {
        double x = s > 1 ? (double)s : 1.0;
        int arg = 0;
        double best = b.weight[0] * x - cnt[0];
        for (int d = 1; d < 3; d++)
            if (b.weight[d] * x - cnt[d] > best) {
                best = b.weight[d] * x - cnt[d];
                arg = d;
            }
        int64_t j = -1;
        int d = blend_locate(&o, s, &j);
        if (d != arg || j != (int64_t)cnt[arg]) mism++;
        cnt[arg] += 1;
        for (int e = 0; e < 3; e++) {
            double dev = fabs(cnt[e] - b.weight[e] * (double)(s + 1));
            if (dev > worst) worst = dev;
        }
    }
    check(mism == 0, "blend order: %lld samples, %lld picks differ from Megatron's rule in double precision",
          (long long)N, (long long)mism);
    check(worst < 1.0, "blend order: every dataset's count stays within 1 of weight x N (worst %.3f)", worst);
    for (int64_t s = N - 1; s >= 0; s -= 4099) { // backwards, through the memo: the same counts as forwards
        blend_counts(&o, s, seen);
        double x0 = 0;
        for (int e = 0; e < 3; e++) x0 += (double)seen[e];
        if (x0 != (double)s) off++;
    }
    blend_counts(&o, N, seen);
    check(off == 0 && seen[0] == (int64_t)cnt[0] && seen[1] == (int64_t)cnt[1] && seen[2] == (int64_t)cnt[2],
          "blend order: counts looked up backwards and at random equal the forward pass");
    blend_order_free(&o);
    const char* bad[] = {"0.5 a_*.bin 0.5",     "0.5 a_*.bin b_*.bin 0.5", "a_*.bin b_*.bin",
                         "0 a_*.bin 1 b_*.bin", "-1 a_*.bin 2 b_*.bin",    ""};
    int refused = 1;
    for (size_t k = 0; k < sizeof(bad) / sizeof(bad[0]); k++)
        refused = refused && blend_parse_arg(bad[k], &b, err, sizeof(err)) != 0;
    check(refused, "odd blends are refused: a weight without a glob, two globs, weight 0 or negative, nothing");
}

// -layout auto under mpirun -np 8: the planner's choice is printed with its runner-up, the run
// trains in it, the choice goes into the run record, and -o DIR -resume keeps it
static void test_layout_auto(void) {
    char tmp[] = "/tmp/llmc_lautoXXXXXX";
    char data[1200], cmd[4000], path[1400], out[1300];
    pattern_tmpdir(tmp, data, sizeof(data), 40000);
    snprintf(out, sizeof(out), "%s/run", tmp);
    const char* args =
        "-L 4 -H 64 -heads 4 -seq 32 -V 300 -vpad 128 -gb 16 -ramp 8 8 1024 -lr 2e-3 -tokens 1e9 "
        "-j '' -threads 1 -layout auto";
    snprintf(cmd, sizeof(cmd), "%s -np 8 ./train_gpt %s -i %s -steps 3 -o %s > %s/out.txt 2>&1", MPIRUN, args, data,
             out, tmp);
    int rc = system(cmd);
    snprintf(path, sizeof(path), "%s/out.txt", tmp);
    FILE* f = fopen(path, "r");
    char line[2048], choice[400] = "";
    int runner = 0;
    while (f && fgets(line, sizeof(line), f)) {
        if (strncmp(line, "layout auto: -tp", 16) == 0) snprintf(choice, sizeof(choice), "%s", line + 13);
        if (strstr(line, "layout auto: runner-up") && strstr(line, "it loses on")) runner = 1;
    }
    if (f) fclose(f);
    int tp = 0, pp = 0, dp = 0;
    int parsed = sscanf(choice, "-tp %d -pp %d -dp %d", &tp, &pp, &dp) == 3;
    check(rc == 0 && parsed && tp * pp * dp == 8 && runner,
          "-layout auto on 8 ranks: a layout of 8 ranks (tp %d pp %d dp %d), with the runner-up and why (rc %d)", tp,
          pp, dp, rc);
    snprintf(path, sizeof(path), "%s/config.json", out);
    f = fopen(path, "r");
    char rec[16384] = "";
    size_t got = f ? fread(rec, 1, sizeof(rec) - 1, f) : 0;
    rec[got] = '\0';
    if (f) fclose(f);
    char want[120];
    snprintf(want, sizeof(want), "\"-tp\",\"%d\",\"-pp\",\"%d\",\"-dp\",\"%d\"", tp, pp, dp);
    check(strstr(rec, want) != NULL && strstr(rec, "\"layout_auto\":\"-tp") != NULL,
          "-layout auto: the choice is in the run record (%s)", want);
    snprintf(cmd, sizeof(cmd), "%s -np 8 ./train_gpt -o %s -resume -steps 5 > %s/out2.txt 2>&1", MPIRUN, out, tmp);
    rc = system(cmd);
    snprintf(path, sizeof(path), "%s/out2.txt", tmp);
    f = fopen(path, "r");
    char layout[200];
    snprintf(layout, sizeof(layout), "tp=%d pp=%d dp=%d world=8", tp, pp, dp);
    int same = 0;
    while (f && fgets(line, sizeof(line), f)) same |= strstr(line, layout) != NULL && strstr(line, "| layout") != NULL;
    if (f) fclose(f);
    check(rc == 0 && same, "-layout auto: -o DIR -resume keeps the chosen layout (%s; rc %d)", layout, rc);
}

// -on-spike rewind N against a planted poison batch (samples 60-63 are uniform noise, step 16
// of a 4-sequence batch): the guard skips step 16, the run goes back to the step-14 checkpoint
// and passes over 2 batches (samples 56-63). From there it must equal, bit for bit, a run that
// never saw those samples (-skip-data 56:8), in 1x1x1 and in 2x2x2 ZeRO-1.
static void test_rewind(void) {
    char tmp[] = "/tmp/llmc_rewindXXXXXX";
    if (!mkdtemp(tmp)) die("mkdtemp failed");
    char data[1300], base[3000], err[4096], path[1400];
    snprintf(data, sizeof(data), "%s/poison_000.bin", tmp);
    FILE* f = fopen_check(data, "wb");
    int32_t hdr[256] = {20240520, 1, 12000};
    fwrite(hdr, 4, 256, f);
    uint64_t st = 5;
    for (int i = 0; i < 12000; i++) { // a noise-free pattern (learnt in a few steps), noise in samples 60..63
        uint16_t tok = (uint16_t)((i * 7 + i / 13) % 300);
        if (i >= 60 * 32 && i <= 64 * 32) tok = (uint16_t)(rng_next(&st) % 300);
        fwrite(&tok, 2, 1, f);
    }
    fclose(f);
    const char* lay[2] = {"", "-tp 2 -pp 2 -dp 2 -zero 1"};
    for (int k = 0; k < 2; k++) {
        RunLog rw, ref;
        char pre[256] = "OMP_NUM_THREADS=1 timeout 300";
        if (k) snprintf(pre, sizeof(pre), "%s -np 8", MPIRUN);
        for (int which = 0; which < 2; which++) {
            snprintf(base, sizeof(base),
                     "%s ./train_gpt -L 2 -H 64 -heads 4 -seq 32 -V 300 -vpad 128 -mb 1 -gb 4 -ramp off -lr 3e-3 "
                     "-warmup 0 -tokens 1e9 -i %s -j '' -shuffle 0 -seed 7 -threads 1 -steps 20 %s -o %s/%s%d %s",
                     pre, data, lay[k], tmp, which ? "ref" : "rw", k,
                     which ? "-skip-data 56:8" : "-skip-spikes 4 -spike-window 8 -on-spike rewind 2 -ckpt-every 2");
            int rc = run_cmd(base, err, sizeof(err));
            snprintf(path, sizeof(path), "%s/%s%d/log.jsonl", tmp, which ? "ref" : "rw", k);
            int ok = rc == 0 && read_runlog(path, which ? &ref : &rw) == 0;
            check(ok, "rewind %s %s: runs 20 steps (rc %d)", k ? "2x2x2" : "1x1x1", which ? "reference" : "run", rc);
        }
        snprintf(path, sizeof(path), "%s/rw%d/log.jsonl", tmp, k);
        f = fopen(path, "r");
        char line[4096];
        int rewinds = 0;
        int skip16 = 0;
        while (f && fgets(line, sizeof(line), f)) {
            if (strstr(line, "\"event\":\"rewind\"") && strstr(line, "\"bad_step\":16,") &&
                strstr(line, "\"checkpoint\":\"ckpt_00000014\"") && strstr(line, "\"skip_at\":56,\"skip_samples\":8"))
                rewinds++;
            if (strstr(line, "\"type\":\"train\",\"step\":16,") && strstr(line, "\"skip\":\"spike\"")) skip16++;
        }
        if (f) fclose(f);
        check(rewinds == 1 && skip16 == 0,
              "rewind %s: the poison batch (step 16) is a spike, one rewind to ckpt 14 passes over samples 56-63, and "
              "the log is cut back to ckpt 14: no record of the abandoned step 16 (%d rewinds, %d skipped 16s)",
              k ? "2x2x2" : "1x1x1", rewinds, skip16);
        int same = rw.n == 20 && ref.n == 20;
        for (int st2 = 1; same && st2 <= 20; st2++) same = strcmp(rw.raw[st2], ref.raw[st2]) == 0;
        check(same,
              "rewind %s: every logged step (the last record of each) equals the run with -skip-data 56:8, "
              "bit for bit",
              k ? "2x2x2" : "1x1x1");
    }
}

// A three-dataset blend (0.5/0.3/0.2; c has 5 samples, so it wraps epochs) with a two-dataset
// validation blend: 2x2x2 ZeRO-1 equals the single process; a stopped run resumed in another
// layout continues the same sample order; the log's realized counts equal the rule's.
static void test_blend_layouts(void) {
    char tmp[] = "/tmp/llmc_blendXXXXXX";
    if (!mkdtemp(tmp)) die("mkdtemp failed");
    const char* names[5] = {"a", "b", "c", "va", "vb"};
    const int ntok[5] = {20000, 12000, 5 * 32 + 1, 3000, 3000};
    for (int d = 0; d < 5; d++) {
        char path[1300];
        snprintf(path, sizeof(path), "%s/%s_000.bin", tmp, names[d]);
        write_pattern_shard_seeded(path, ntok[d], 300, 1000 + (uint64_t)d);
    }
    char data[1500], base[3500], cmd[5000], err[4096], path[1400], dir[1300];
    snprintf(data, sizeof(data),
             "'0.5 %s/a_*.bin 0.3 %s/b_*.bin 0.2 %s/c_*.bin' -j '0.7 %s/va_*.bin 0.3 %s/vb_*.bin' "
             "-val-every 4 -val-samples 8",
             tmp, tmp, tmp, tmp, tmp);
    struct {
        const char* name;
        int np; // ranks under mpirun; 0: the single process, no MPI
        const char* lay;
        int steps;
        int resume;
    } R[] = {
        {"ref", 0, "", 12, 0},
        {"l2221", 8, "-tp 2 -pp 2 -dp 2 -zero 1", 12, 0},
        {"stop", 8, "-tp 2 -pp 2 -dp 2 -zero 1", 6, 0},
        {"stop", 8, "-tp 1 -pp 2 -dp 4 -zero 1", 12, 1},
    };
    RunLog lg[4];
    for (int i = 0; i < 4; i++) {
        snprintf(dir, sizeof(dir), "%s/%s", tmp, R[i].name);
        snprintf(base, sizeof(base),
                 "-L 4 -H 64 -heads 4 -seq 32 -V 300 -vpad 128 -mb 1 -gb 16 -ramp 4 4 1536 -lr 2e-3 -warmup 2000 "
                 "-decay 8000 -tokens 1e9 -i %s -shuffle 1 -seed 7 -threads 1 -o %s",
                 data, dir);
        char pre[256] = "OMP_NUM_THREADS=1 timeout 300";
        if (R[i].np > 0) snprintf(pre, sizeof(pre), "%s -np %d", MPIRUN, R[i].np);
        snprintf(cmd, sizeof(cmd), "%s ./train_gpt %s %s -steps %d -ckpt-every 6%s", pre, base, R[i].lay, R[i].steps,
                 R[i].resume ? " -resume" : "");
        int rc = run_cmd(cmd, err, sizeof(err));
        snprintf(path, sizeof(path), "%s/log.jsonl", dir);
        int ok = rc == 0 && read_runlog(path, &lg[i]) == 0 && lg[i].n == R[i].steps;
        check(ok, "blend run %s %s: %d steps (rc %d)", R[i].name, R[i].lay, R[i].steps, rc);
    }
    double wl = 0;
    double wg = 0;
    runlog_worst(&lg[1], &lg[0], 12, &wl, &wg);
    check(wl <= 1e-5 && wg <= 1e-5, "blend: 2x2x2 ZeRO-1 over a ramp = the single process (loss rel %.1e, gnorm %.1e)",
          wl, wg);
    double wr = runlog_worst_loss(&lg[3], &lg[0], 7, 12);
    check(wr <= 1e-5,
          "blend: 2x2x2 stopped at step 6, resumed as 1x2x4 ZeRO-1: steps 7-12 = the single process "
          "(loss rel %.1e: the same samples, summed in another order)",
          wr);
    // the log's realized counts at the last validation vs the rule (a double-precision replay)
    snprintf(path, sizeof(path), "%s/ref/log.jsonl", tmp);
    FILE* f = fopen(path, "r");
    char line[8192];
    char last[8192] = "";
    long long tokens = -1;
    while (f && fgets(line, sizeof(line), f))
        if (strstr(line, "\"type\":\"val\"")) {
            snprintf(last, sizeof(last), "%s", line);
            sscanf(strstr(line, "\"tokens\":"), "\"tokens\":%lld", &tokens);
        }
    if (f) fclose(f);
    int64_t S = tokens / 32;
    double w[3] = {0.5, 0.3, 0.2};
    double cnt[3] = {0, 0, 0};
    for (int64_t s = 0; s < S; s++) {
        double x = s > 1 ? (double)s : 1.0;
        int arg = 0;
        for (int d = 1; d < 3; d++)
            if (w[d] * x - cnt[d] > w[arg] * x - cnt[arg]) arg = d;
        cnt[arg] += 1;
    }
    char want[512];
    snprintf(want, sizeof(want), "\"data\":{\"a\":{\"samples\":%lld,", (long long)cnt[0]);
    char want_c[128];
    snprintf(want_c, sizeof(want_c), "\"c\":{\"samples\":%lld,", (long long)cnt[2]);
    double va = 0;
    double vb = 0;
    double vl = 0;
    const char* by = strstr(last, "\"val_loss_by\":");
    int parsed = by && sscanf(by, "\"val_loss_by\":{\"va\":%lf,\"vb\":%lf}", &va, &vb) == 2 &&
                 sscanf(strstr(last, "\"val_loss\":"), "\"val_loss\":%lf", &vl) == 1;
    check(S > 0 && strstr(last, want) && strstr(last, want_c),
          "blend: the log's samples per dataset after %lld samples are the rule's (a %.0f, c %.0f; c wraps %.0f "
          "epochs)",
          (long long)S, cnt[0], cnt[2], cnt[2] / 5);
    check(parsed && fabs(vl - (0.7 * va + 0.3 * vb)) <= 1e-6 * vl,
          "blend: per-dataset validation losses logged (va %.4f, vb %.4f), val_loss their weighted mean %.4f", va, vb,
          vl);
}

// one: only the reference and 2x2x2 ZeRO-1 (the "layout222" part, for make check)
static void test_layouts(int one) {
    if (!have_mpirun()) {
        check(0, "mpirun is available for the 3D layout tests (bash dev/install.sh)");
        return;
    }
    char tmp[] = "/tmp/llmc_layoutXXXXXX";
    char data[1200], args[3000], cmd[4000], err[4096], path[1400], ref_ck[1400], ck[1400];
    pattern_tmpdir(tmp, data, sizeof(data), 40000);
    // the single-process reference (no mpirun, so no MPI)
    char refdir[1300];
    snprintf(refdir, sizeof(refdir), "%s/ref", tmp);
    layout_args(args, sizeof(args), data, refdir);
    snprintf(cmd, sizeof(cmd), "OMP_NUM_THREADS=1 timeout 300 ./train_gpt %s -steps %d -ckpt-every %d", args,
             LAYOUT_STEPS, LAYOUT_STEPS);
    int rc = run_cmd(cmd, err, sizeof(err));
    RunLog ref;
    snprintf(path, sizeof(path), "%s/log.jsonl", refdir);
    check(rc == 0 && read_runlog(path, &ref) == 0 && ref.n == LAYOUT_STEPS,
          "layout reference 1x1x1 runs %d steps (rc %d)", LAYOUT_STEPS, rc);
    int sizes = 1;
    for (int s = 2; s <= LAYOUT_STEPS; s++) {
        (void)s;
    }
    ckpt_dir_name(ref_ck, sizeof(ref_ck), refdir, LAYOUT_STEPS);
    struct {
        int tp, pp, dp, zero;
    } L[] = {
        {2, 1, 1, 0}, {4, 1, 1, 0}, {1, 2, 1, 0}, {1, 4, 1, 0}, {1, 1, 2, 0},
        {1, 1, 4, 0}, {2, 2, 2, 0}, {2, 2, 2, 1}, {4, 2, 1, 0}, {1, 2, 4, 1},
    };
    (void)sizes;
    for (size_t i = 0; i < sizeof(L) / sizeof(L[0]); i++) {
        if (one && !(L[i].tp == 2 && L[i].pp == 2 && L[i].dp == 2 && L[i].zero)) continue;
        char dir[1300];
        snprintf(dir, sizeof(dir), "%s/l%d%d%d%d", tmp, L[i].tp, L[i].pp, L[i].dp, L[i].zero);
        layout_args(args, sizeof(args), data, dir);
        int np = L[i].tp * L[i].pp * L[i].dp;
        snprintf(cmd, sizeof(cmd), "%s -np %d ./train_gpt %s -tp %d -pp %d -dp %d -zero %d -steps %d -ckpt-every %d",
                 MPIRUN, np, args, L[i].tp, L[i].pp, L[i].dp, L[i].zero, LAYOUT_STEPS, LAYOUT_STEPS);
        rc = run_cmd(cmd, err, sizeof(err));
        RunLog rl;
        snprintf(path, sizeof(path), "%s/log.jsonl", dir);
        double worst_l = 0, worst_g = 0;
        int ok = rc == 0 && read_runlog(path, &rl) == 0 && rl.n == LAYOUT_STEPS;
        if (ok) runlog_worst(&rl, &ref, LAYOUT_STEPS, &worst_l, &worst_g);
        ok = ok && worst_l <= 1e-5 && worst_g <= 1e-5;
        char wname[256] = "";
        ckpt_dir_name(ck, sizeof(ck), dir, LAYOUT_STEPS);
        double we = ok ? compare_ckpts(ck, ref_ck, wname, sizeof(wname)) : 1.0;
        check(ok && we <= 1e-5,
              "layout %dx%dx%d%s: %d steps, loss rel %.1e, gnorm rel %.1e, final weights rel L2 %.1e (%s) (rc %d)",
              L[i].tp, L[i].pp, L[i].dp, L[i].zero ? " zero-1" : "", LAYOUT_STEPS, worst_l, worst_g, we, wname, rc);
        if (i == 7 && !one) { // per-rank timing split on every rank
            int all = 1;
            for (int r = 1; r < np; r++) {
                snprintf(path, sizeof(path), "%s/log_rank%05d.jsonl", dir, r);
                FILE* f = fopen(path, "r");
                char line[4096];
                int has =
                    f && fgets(line, sizeof(line), f) && strstr(line, "\"t_idle_ms\"") && strstr(line, "\"t_comm_ms\"");
                if (f) fclose(f);
                if (!has) all = 0;
            }
            check(all, "every rank of 2x2x2 logs its compute/comm/idle split");
            // every MPI call in chunks of 1000 floats (llmc/host/comm.h; test_comm counts the calls):
            // groups of 2 sum a + b whatever the chunking, so the log is the same bit for bit
            char cdir[1300];
            snprintf(cdir, sizeof(cdir), "%s/chunked", tmp);
            layout_args(args, sizeof(args), data, cdir);
            snprintf(
                cmd, sizeof(cmd),
                "LLMC_MPI_CHUNK=1000 %s -x LLMC_MPI_CHUNK -np 8 ./train_gpt %s -tp 2 -pp 2 -dp 2 -zero 1 -steps %d",
                MPIRUN, args, LAYOUT_STEPS);
            int rcc = run_cmd(cmd, err, sizeof(err));
            RunLog ch;
            snprintf(path, sizeof(path), "%s/log.jsonl", cdir);
            int same = rcc == 0 && read_runlog(path, &ch) == 0 && ch.n == LAYOUT_STEPS;
            for (int s = 1; same && s <= LAYOUT_STEPS; s++)
                if (strcmp(ch.raw[s], rl.raw[s]) != 0) same = 0;
            check(same,
                  "2x2x2 zero-1 with LLMC_MPI_CHUNK=1000 (every MPI call chunked): %d steps bit-identical (rc %d)",
                  LAYOUT_STEPS, rcc);
        }
    }
    if (one) {
        snprintf(cmd, sizeof(cmd), "rm -rf %s", tmp);
        if (system(cmd) != 0) printf("note: could not remove %s\n", tmp);
        return;
    }
    // ramp check: the reference's global batch changed at least three times
    {
        snprintf(path, sizeof(path), "%s/log.jsonl", refdir);
        FILE* f = fopen(path, "r");
        char line[4096];
        long long prev = -1;
        int changes = -1;
        while (f && fgets(line, sizeof(line), f)) {
            char* p = strstr(line, "\"gb\":");
            long long gb;
            if (p && sscanf(p, "\"gb\":%lld", &gb) == 1 && gb != prev) {
                changes++;
                prev = gb;
            }
        }
        if (f) fclose(f);
        check(changes >= 3, "the layout runs ramp the global batch %d times (micro-batch count changes)", changes);
    }
    // resume: 2x2x2 zero-1 stopped at 10 and resumed == straight; resumed as 1x1x1 and 4x1x2
    char sdir[1300], fdir[1300];
    snprintf(fdir, sizeof(fdir), "%s/l2221", tmp);
    snprintf(sdir, sizeof(sdir), "%s/stop", tmp);
    layout_args(args, sizeof(args), data, sdir);
    snprintf(cmd, sizeof(cmd), "%s -np 8 ./train_gpt %s -tp 2 -pp 2 -dp 2 -zero 1 -steps 10 -ckpt-every 10", MPIRUN,
             args);
    int rc1 = run_cmd(cmd, err, sizeof(err));
    snprintf(cmd, sizeof(cmd), "%s -np 8 ./train_gpt %s -tp 2 -pp 2 -dp 2 -zero 1 -steps %d -resume", MPIRUN, args,
             LAYOUT_STEPS);
    int rc2 = run_cmd(cmd, err, sizeof(err));
    RunLog straight, resumed;
    snprintf(path, sizeof(path), "%s/log.jsonl", fdir);
    read_runlog(path, &straight);
    snprintf(path, sizeof(path), "%s/log.jsonl", sdir);
    read_runlog(path, &resumed);
    int same = rc1 == 0 && rc2 == 0 && resumed.n == LAYOUT_STEPS;
    for (int s = 11; same && s <= LAYOUT_STEPS; s++)
        if (strcmp(straight.raw[s], resumed.raw[s]) != 0 || straight.raw[s][0] == 0) same = 0;
    check(same, "2x2x2 zero-1 stopped at step 10 and resumed: steps 11-20 bit-identical (rc %d %d)", rc1, rc2);
    struct {
        int tp, pp, dp, np;
    } R[] = {{1, 1, 1, 1}, {4, 1, 2, 8}};
    for (int i = 0; i < 2; i++) {
        char rdir[1300];
        snprintf(rdir, sizeof(rdir), "%s/re%d", tmp, i);
        snprintf(cmd, sizeof(cmd), "mkdir -p %s && cp -r %s/ckpt_00000010 %s/", rdir, sdir, rdir);
        int rc0 = system(cmd);
        layout_args(args, sizeof(args), data, rdir);
        if (R[i].np == 1)
            snprintf(cmd, sizeof(cmd), "OMP_NUM_THREADS=1 timeout 300 ./train_gpt %s -steps %d -resume", args,
                     LAYOUT_STEPS);
        else
            snprintf(cmd, sizeof(cmd), "%s -np %d ./train_gpt %s -tp %d -pp %d -dp %d -steps %d -resume", MPIRUN,
                     R[i].np, args, R[i].tp, R[i].pp, R[i].dp, LAYOUT_STEPS);
        rc = run_cmd(cmd, err, sizeof(err));
        RunLog rl;
        snprintf(path, sizeof(path), "%s/log.jsonl", rdir);
        int ok = rc0 == 0 && rc == 0 && read_runlog(path, &rl) == 0;
        double worst = ok ? runlog_worst_loss(&rl, &straight, 11, LAYOUT_STEPS) : INFINITY;
        check(ok && worst <= 1e-5, "2x2x2 zero-1 checkpoint resumed as %dx%dx%d: steps 11-20 losses rel %.1e (rc %d)",
              R[i].tp, R[i].pp, R[i].dp, worst, rc);
    }
    // bad layouts: one message, printed once, every rank exits non-zero, no hang
    struct {
        int np;
        const char* flags;
        const char* needle;
    } B[] = {
        {4, "-tp 2 -pp 1 -dp 3", "need exactly 6 ranks, not 4"},
        {3, "-tp 3", "must divide the number of heads"},
        {4, "-tp 4 -vpad 151", "must divide the padded vocabulary"},
        {3, "-pp 3", "must divide the number of layers"},
        {8, "-dp 8", "not divisible by micro-batch*dp"},
    };
    for (size_t i = 0; i < sizeof(B) / sizeof(B[0]); i++) {
        layout_args(args, sizeof(args), data, tmp);
        snprintf(cmd, sizeof(cmd), "%s -np %d ./train_gpt %s %s -steps 2", MPIRUN, B[i].np, args, B[i].flags);
        double t0 = wall_ms();
        rc = run_cmd(cmd, err, sizeof(err));
        double secs = (wall_ms() - t0) / 1e3;
        int count = 0;
        for (char* p = err; (p = strstr(p, "error: ")) != NULL; p++) count++;
        char* hit = strstr(err, B[i].needle);
        char line[300] = "";
        if (hit) {
            char* st = hit;
            while (st > err && st[-1] != '\n') st--;
            snprintf(line, sizeof(line), "%.*s", (int)(strchr(st, '\n') ? strchr(st, '\n') - st : (long)strlen(st)),
                     st);
        }
        check(rc != 0 && rc != 124 && hit && count == 1 && secs < 60,
              "bad layout np=%d %s: exit %d in %.1fs, once: \"%s\"", B[i].np, B[i].flags, rc, secs, line);
    }
    // validation loss and the text sample do not depend on the layout either
    {
        char out1[4096] = "", out2[4096] = "", line[4096];
        for (int k = 0; k < 2; k++) {
            char sdir[1400]; // each run its own -o: the first keeps its final checkpoint there
            snprintf(sdir, sizeof(sdir), "%s/sample%d", tmp, k);
            layout_args(args, sizeof(args), data, sdir);
            snprintf(cmd, sizeof(cmd),
                     "%s ./train_gpt %s -j %s -val-every 2 -val-samples 8 -steps 2 -sample-every 2 -sample-len 12 %s > "
                     "%s/sample%d.txt 2>&1",
                     k == 0 ? "OMP_NUM_THREADS=1 timeout 120"
                            : "timeout 300 mpirun --oversubscribe --allow-run-as-root -x OMP_NUM_THREADS=1 -np 4",
                     args, data, k == 0 ? "" : "-tp 2 -pp 2", tmp, k);
            // layout_args already holds -j ''; the later -j (the same shard) wins
            if (system(cmd) != 0) continue;
            snprintf(path, sizeof(path), "%s/sample%d.txt", tmp, k);
            FILE* f = fopen(path, "r");
            char* dst = k == 0 ? out1 : out2;
            while (f && fgets(line, sizeof(line), f))
                if (strncmp(line, "sample:", 7) == 0 || strncmp(line, "val ", 4) == 0)
                    strncat(dst, line, 4095 - strlen(dst));
            if (f) fclose(f);
        }
        check(out1[0] != 0 && strstr(out1, "sample:") && strcmp(out1, out2) == 0,
              "validation loss and text sample are the same in 1x1x1 and 2x2x1 (%.80s)", out1);
    }
    // a rank killed with -9 mid-run ends the whole job quickly
    {
        char kdir[1300];
        snprintf(kdir, sizeof(kdir), "%s/kill", tmp);
        layout_args(args, sizeof(args), data, kdir);
        snprintf(cmd, sizeof(cmd),
                 "%s -np 4 ./train_gpt %s -pp 2 -dp 2 -steps 100000 > /dev/null 2>&1 & MP=$!; sleep 4; "
                 "R=$(pgrep -P $(pgrep -P $MP -x mpirun) -x train_gpt | head -n 1); [ -n \"$R\" ] || { kill $MP; echo "
                 "-1 -1 > %s/kill_result; exit; }; "
                 "kill -9 $R; S=$(date +%%s); wait $MP; RC=$?; E=$(date +%%s); echo $RC $((E-S)) > %s/kill_result",
                 MPIRUN, args, tmp, tmp);
        char script[1400];
        snprintf(script, sizeof(script), "%s/kill.sh", tmp);
        FILE* f = fopen_check(script, "w");
        fprintf(f, "%s\n", cmd);
        fclose(f);
        snprintf(cmd, sizeof(cmd), "bash %s", script);
        run_cmd(cmd, err, sizeof(err));
        snprintf(path, sizeof(path), "%s/kill_result", tmp);
        f = fopen(path, "r");
        int krc = -1, ksecs = -1;
        if (f) {
            if (fscanf(f, "%d %d", &krc, &ksecs) != 2) krc = -1;
            fclose(f);
        }
        check(krc != 0 && krc != -1 && ksecs >= 0 && ksecs < 60, "kill -9 of one rank ends the job in %ds with exit %d",
              ksecs, krc);
    }
    snprintf(cmd, sizeof(cmd), "rm -rf %s", tmp);
    if (system(cmd) != 0) printf("note: could not remove %s\n", tmp);
}

// ----------------------------------------------------------------------------------------
// instruments: the spike guard in the trainer, the noise scale against brute force

static void test_spike_guard(Fixture* fx, const char* dir) {
    Config cfg = fixture_config(fx, dir);
    cfg.skip_spikes = 3.0;
    Train t;
    fixture_train(&t, &cfg, dir);
    GPT* g = &t.model;
    for (int s = 0; s < 12; s++) train_step(&t); // fill the window with healthy steps
    size_t n = g->pl.total;
    float* before = (float*)malloc_check(sizeof(float) * n * 3);
    // an injected spike: the final LayerNorm gain x20 makes the logits (and the loss) jump
    float* lnfw = g->params + g->pl.offset[PT_LNFW];
    for (int i = 0; i < cfg.H; i++) lnfw[i] *= 20.0f;
    memcpy(before, g->params, sizeof(float) * n);
    memcpy(before + n, g->m, sizeof(float) * n);
    memcpy(before + 2 * n, g->v, sizeof(float) * n);
    int64_t t0 = t.run.adam_t, tok0 = t.run.tokens;
    StepResult r = train_step(&t);
    int same = memcmp(before, g->params, sizeof(float) * n) == 0 && memcmp(before + n, g->m, sizeof(float) * n) == 0 &&
               memcmp(before + 2 * n, g->v, sizeof(float) * n) == 0;
    check(r.skip == SKIP_SPIKE && same && t.run.adam_t == t0 && t.run.tokens > tok0,
          "spike guard skips an injected spike (loss %.3f): weights, moments and AdamW t unchanged, tokens consumed",
          r.loss);
    for (int i = 0; i < cfg.H; i++) lnfw[i] /= 20.0f;
    // an injected NaN in one weight
    float keep = g->params[g->pl.offset[PT_FCW] + 5];
    g->params[g->pl.offset[PT_FCW] + 5] = NAN;
    memcpy(before, g->params, sizeof(float) * n);
    r = train_step(&t);
    check(r.skip == SKIP_NONFINITE && memcmp(before, g->params, sizeof(float) * n) == 0,
          "spike guard skips a NaN step and leaves the weights alone");
    g->params[g->pl.offset[PT_FCW] + 5] = keep;
    r = train_step(&t);
    check(r.skip == SKIP_NONE && isfinite(r.loss), "training continues after the skipped steps (loss %.4f)", r.loss);
    free(before);
    train_free(&t);
}

// splits a flag string on spaces ('' = an empty argument) into argv
static int split_args(char* s, char** argv, int max) {
    int n = 0;
    argv[n++] = (char*)"train_gpt";
    for (char* tok = strtok(s, " "); tok && n < max; tok = strtok(NULL, " "))
        argv[n++] = strcmp(tok, "''") == 0 ? (char*)"" : tok;
    return n;
}

static void test_noise_scale_vs_bruteforce(void) {
    if (!have_mpirun()) {
        check(0, "mpirun is available for the noise-scale test");
        return;
    }
    char tmp[] = "/tmp/llmc_noiseXXXXXX";
    char data[1200], outdir[1300], args[3000], cmd[4000], err[4096], path[1400];
    pattern_tmpdir(tmp, data, sizeof(data), 40000);
    snprintf(outdir, sizeof(outdir), "%s/dp4", tmp);
    layout_args(args, sizeof(args), data, outdir);
    snprintf(cmd, sizeof(cmd), "%s -np 4 ./train_gpt %s -dp 4 -steps 3", MPIRUN, args);
    int rc = run_cmd(cmd, err, sizeof(err));
    // the trainer's step-1 estimates and its B_simple field
    double lg2 = NAN, ls = NAN, lb = -1;
    snprintf(path, sizeof(path), "%s/log.jsonl", outdir);
    FILE* f = fopen(path, "r");
    char line[4096];
    int nb = 0;
    while (f && fgets(line, sizeof(line), f)) {
        char* p;
        if (strstr(line, "\"step\":1,") && (p = strstr(line, "\"g2\":"))) sscanf(p, "\"g2\":%lf", &lg2);
        if (strstr(line, "\"step\":1,") && (p = strstr(line, "\"trsigma\":"))) sscanf(p, "\"trsigma\":%lf", &ls);
        if ((p = strstr(line, "\"b_simple\":"))) {
            sscanf(p, "\"b_simple\":%lf", &lb);
            nb++;
        }
    }
    if (f) fclose(f);
    check(rc == 0 && nb == 3, "DP=4 run logs b_simple on every step (rc %d, %d lines)", rc, nb);
    // brute force in one process: each replica's gradient from its own micro-batches
    Config cfg;
    config_defaults(&cfg);
    char* argv[128];
    int argc = split_args(args, argv, 128);
    char perr[CFG_ERR_LEN];
    if (config_parse(&cfg, argc, argv, NULL, NULL, perr) != 0 || config_validate(&cfg, perr) != 0)
        die("noise test config: %s", perr);
    cfg.dp = 1;
    Comm comm;
    comm_init_single(&comm);
    Train t;
    train_setup(&t, &cfg, &comm);
    dataset_open(&t.run.train, cfg.train_glob, cfg.seq, cfg.V, cfg.shuffle, cfg.seed);
    param_init(&t.model.pl, t.model.params, cfg.seed, cfg.scaled_init, cfg.init_std_mult);
    GPT* g = &t.model;
    int DP = 4;
    int64_t B = schedule_batch(cfg.gb, cfg.ramp_start, cfg.ramp_inc, cfg.ramp_tokens, cfg.seq, 0);
    float* total = (float*)calloc_check(g->pl.total, sizeof(float));
    double mean_sq = 0;
    for (int d = 0; d < DP; d++) {
        for (size_t k = 0; k < g->pl.total; k++) g->grads[k] = NAN; // nothing stale may survive grads_begin
        grads_begin(g);
        for (int i = 0; i < (int)(B / (DP * cfg.mb)); i++) {
            Acts* a = &g->acts[0];
            dataset_load_microbatch(&t.run.train, microbatch_first_sample(0, B, DP, d, cfg.mb, i), cfg.mb, a->inputs,
                                    a->targets);
            gpt_forward(g, &t.run.comm, a, 0);
            gpt_backward(g, &t.run.comm, a, 0, (float)(1.0 / ((double)B * cfg.seq)), NULL);
        }
        grads_end(g);
        mean_sq += gpt_grad_sumsq(g, g->grads, 0, g->pl.total) / DP;
        for (size_t k = 0; k < g->pl.total; k++) total[k] += g->grads[k];
    }
    double big_sq = gpt_grad_sumsq(g, total, 0, g->pl.total);
    double bs = (double)B / DP, bb = (double)B, g2 = NAN, s = NAN;
    double gs2 = noise_group_sq(mean_sq, bs, bb);
    noise_estimate(gs2, big_sq, bs, bb, &g2, &s);
    // tolerance: both are differences of float32 sums of the same gradients added in other
    // orders; scale the error by the size of the terms being subtracted (bb*|G_big|^2)
    double scale = bb * big_sq;
    check(fabs(lg2 - g2) <= 1e-4 * scale && fabs(ls - s) <= 1e-4 * scale * bs,
          "in-trainer noise scale (DP=4) = brute force from per-replica gradients: |G|^2 %.6g vs %.6g, tr(Sigma) %.6g "
          "vs %.6g",
          lg2, g2, ls, s);
    free(total);
    train_free(&t);
    snprintf(cmd, sizeof(cmd), "rm -rf %s", tmp);
    if (system(cmd) != 0) printf("note: could not remove %s\n", tmp);
    (void)lb;
}

// K consecutive non-finite steps stop the run (exit 3) with a checkpoint from before them
static void test_spike_stop(void) {
    char tmp[] = "/tmp/llmc_stopXXXXXX";
    char data[1200], cmd[4000], err[4096], done[1400];
    pattern_tmpdir(tmp, data, sizeof(data), 20000);
    // an absurd LR blows the weights up within a few steps; afterwards every step is non-finite
    snprintf(cmd, sizeof(cmd),
             "OMP_NUM_THREADS=1 timeout 120 ./train_gpt -L 2 -H 32 -heads 2 -seq 16 -V 300 -vpad 128 -mb 2 -gb 4 "
             "-ramp off -lr 1e30 -warmup 0 -clip 0 -wd 0 -i %s -j '' -steps 60 -spike-stop 3 -o %s/run",
             data, tmp);
    int rc = run_cmd(cmd, err, sizeof(err));
    char* nl = strchr(err, '\n');
    if (nl) *nl = 0;
    int64_t st = ckpt_find_latest((snprintf(done, sizeof(done), "%s/run", tmp), done), done, sizeof(done));
    check(rc == 3 && strstr(err, "consecutive steps skipped") && st > 0,
          "3 non-finite steps in a row stop the run: exit %d, checkpoint at step %lld, \"%s\"", rc, (long long)st, err);
    snprintf(cmd, sizeof(cmd), "rm -rf %s", tmp);
    if (system(cmd) != 0) printf("note: could not remove %s\n", tmp);
}

#include "tests/zb.h"         // -pp-schedule zb-h1
#include "tests/zero_cases.h" // -zero 1/2/3
#include "tests/cp_cases.h"   // -cp
#include "tests/sp_vpp.h"     // -sp, -recompute selective, -vpp

// which parts run: "core" (everything in-process, the CLI and the schedules) and the parts
// that start MPI jobs, so `make test` can run them side by side (tests/suite.py)
static const char* const TEST_PARTS[] = {"core", "layouts", "layout222", "blend", "rewind",
                                         "auto", "sp_vpp",  "noise",     "zero",  "cp"};
static int part_on(const char* parts, const char* name) {
    if (parts == NULL) return 1;
    size_t n = strlen(name);
    for (const char* p = parts; (p = strstr(p, name)) != NULL; p += n)
        if ((p == parts || p[-1] == ',') && (p[n] == '\0' || p[n] == ',')) return 1;
    return 0;
}

int main(int argc, char** argv) {
    const char* dir = argc > 1 ? argv[1] : "fixtures";
    // --quick: only the in-process tests, no child processes (the ASan/UBSan build, make asan)
    int quick = argc > 2 && strcmp(argv[2], "--quick") == 0;
    int nompi = quick || (argc > 2 && strcmp(argv[2], "--no-mpi") == 0);
    // --part a,b: only these parts (TEST_PARTS)
    const char* parts = argc > 3 && strcmp(argv[2], "--part") == 0 ? argv[3] : NULL;
    if (argc > 2 && strcmp(argv[2], "--part") == 0) {
        int known = parts != NULL;
        for (const char* p = parts; known && *p;) {
            size_t n = strcspn(p, ",");
            int one = 0;
            for (size_t i = 0; i < sizeof(TEST_PARTS) / sizeof(TEST_PARTS[0]); i++)
                if (strlen(TEST_PARTS[i]) == n && strncmp(TEST_PARTS[i], p, n) == 0) one = 1;
            known = one;
            p += n + (p[n] == ',');
        }
        if (!known) {
            fprintf(stderr,
                    "error: --part takes a comma-separated list of core, layouts, layout222, blend, rewind, auto, "
                    "sp_vpp, noise, zero, cp\n");
            return 2;
        }
    }
    if (part_on(parts, "core")) {
        test_schedule();
        test_ramp();
        test_lr_auto();
        test_parse_numbers();
        test_json_bytes();
        test_init();
        test_data_addressing();
        test_blend_order();
        Fixture fx;
        if (fixture_open(&fx, dir) == 0) {
            test_fixture_forward_backward(&fx, dir);
            test_fixture_steps(&fx, dir);
            test_resume_bitwise(&fx, dir);
            test_recompute(&fx, dir);
            test_recompute_selective(&fx, dir);
            test_spike_guard(&fx, dir);
            for (int i = 0; i < fx.count; i++) free(fx.recs[i].data); // LeakSanitizer (make asan) checks
            free(fx.recs);
        }
        if (!quick) test_cli(dir);
        test_schedule_1f1b();
        test_pipe_interleaved();
        test_pipe_zb();
        test_chunk_ownership();
        test_act_memory();
        if (!quick) test_spike_stop();
    }
    if (nompi)
        printf("note: 3D layout tests skipped (%s)\n", argv[2]);
    else {
        if (part_on(parts, "layouts")) test_layouts(0);
        if (parts && part_on(parts, "layout222")) test_layouts(1); // a subset of "layouts"
        if (part_on(parts, "blend")) test_blend_layouts();
        if (part_on(parts, "rewind")) test_rewind();
        if (part_on(parts, "auto")) test_layout_auto();
        if (part_on(parts, "sp_vpp")) test_layouts_sp_vpp();
        if (part_on(parts, "noise")) test_noise_scale_vs_bruteforce();
        if (part_on(parts, "zero")) test_zero_layouts();
        if (part_on(parts, "cp")) test_cp_layouts();
    }
    return test_summary();
}
