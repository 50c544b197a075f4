/*
 * test_gpt.cu: tests of the CUDA trainer on a GPU. It includes train_gpt.cu with TESTING
 * defined and calls its functions (no second copy of the model). Expected values come
 * from the independent PyTorch reference (dev/train_gpt.py fixtures: fp32) and from the
 * CPU trainer (train_gpt, fp32); never from this code's own output, except where the test
 * is bit-identity with itself (resume, recompute).
 *
 * usage: ./test_gpt_cu FIXTURE_DIR [--no-binaries]
 *   (make fixtures writes FIXTURE_DIR; the binary tests run ./train_gpt and ./train_gpt_cu,
 *   or $LLMC_TRAIN_GPT / $LLMC_TRAIN_GPT_CU, and the 3D layouts with mpirun -comm mpi)
 * Prints one line per check and `N passed, M failed` last; exits 1 on any failure, 2 when
 * there is no CUDA device (nothing run).
 *
 * Tolerances (bf16 against fp32). bf16 keeps 8 significant bits: one rounding is a relative
 * error of at most 2^-9 = 2.0e-3 (rms about 1e-3). Every stored activation, weight copy and
 * activation gradient is rounded once per layer, so errors of independent roundings add
 * in quadrature over the O(10) roundings on a path through this 2-layer fixture model:
 *   logits          rel L2 <= 3e-2   (a few 1e-3 expected; 10x margin)
 *   loss            rel    <= 1e-2   (a mean over tokens: individual errors average out)
 *   weight grads    rel L2 <= 5e-2   (a product of two rounded factors, summed over tokens
 *                                     in fp32; the attention-bias K slice, whose gradient is
 *                                     analytically zero, is compared absolutely)
 *   steps (8, with warmup, ramp and clipping): loss rel <= 1e-2, grad norm rel <= 5e-2,
 *                    lr, global batch and tokens exact
 *   final weights   rel L2 <= 1e-2 for tensors that start non-zero; tensors that start at
 *                    zero (biases) hold only updates, and Adam turns a gradient sign flip
 *                    of a near-zero gradient into a 2*lr difference: |diff| <= 2*sum(lr)
 *   vs the CPU trainer, 10 steps: loss rel <= 2e-2, grad norm rel <= 1e-1
 * These bounds are written before any GPU run: the printed errors are the measurement.
 */
#define TESTING
#include "train_gpt.cu"
#include <sys/wait.h>
#include "tests/common.h"
#include "tests/fixture.h"

static float* down_bf16(const bf16* d, size_t n) {
    uint16_t* hb = (uint16_t*)malloc_check(sizeof(uint16_t) * (n + 1));
    float* h = (float*)malloc_check(sizeof(float) * (n + 1));
    cudaCheck(cudaMemcpy(hb, d, sizeof(uint16_t) * n, cudaMemcpyDeviceToHost));
    for (size_t i = 0; i < n; i++) h[i] = host_bf2f(hb[i]);
    free(hb);
    return h;
}
static float* down_f32(const float* d, size_t n) {
    float* h = (float*)malloc_check(sizeof(float) * (n + 1));
    cudaCheck(cudaMemcpy(h, d, sizeof(float) * n, cudaMemcpyDeviceToHost));
    return h;
}

// loads the fixture's micro-batch into slot 0 (host arrays and device)
// the master weights and AdamW moments bit-identical (tests/trainer_cases.h's resume test)
static int trainer_state_equal(Train* a, Train* b) {
    GPT *ga = &a->model, *gb = &b->model;
    int same = 1;
    const float* bufs[3][2] = {{ga->master, gb->master}, {ga->m, gb->m}, {ga->v, gb->v}};
    for (int k = 0; k < 3; k++) {
        float* x = down_f32(bufs[k][0], ga->n_opt);
        float* y = down_f32(bufs[k][1], ga->n_opt);
        same = same && memcmp(x, y, sizeof(float) * ga->n_opt) == 0;
        free(x);
        free(y);
    }
    return same;
}
#include "tests/trainer_cases.h"

static void fixture_batch(Fixture* fx, Train* t) {
    GPT* g = &t->model;
    Acts* a = &g->acts[0];
    int BT = g->B * g->T;
    memcpy(a->h_inputs, fx_get(fx, "inputs")->data, sizeof(int) * BT);
    memcpy(a->h_targets, fx_get(fx, "targets")->data, sizeof(int) * BT);
    acts_upload_tokens(g, a);
}

// ----------------------------------------------------------------------------------------

static void test_fixture_forward_backward(Fixture* fx, const char* dir) {
    Train t;
    Config cfg = fixture_trainer(&t, fx, dir);
    GPT* g = &t.model;
    Acts* a = &g->acts[0];
    int BT = cfg.mb * cfg.seq;
    fixture_batch(fx, &t);
    cudaCheck(cudaMemset(g->loss_acc, 0, sizeof(double)));
    gpt_forward(g, &t.dc, a, 0, 0.0f); // evaluation forward: logits kept
    double loss = read_loss_sum(g, &t.dc) / BT;
    check(g->Vv == cfg.V, "logits cover the real vocabulary only (%d columns, row stride %d)", g->Vv, g->ldl);
    float* lg = down_bf16(a->logits, (size_t)BT * g->ldl);
    float* packed = (float*)malloc_check(sizeof(float) * (size_t)BT * cfg.V);
    for (int n = 0; n < BT; n++) memcpy(packed + (size_t)n * cfg.V, lg + (size_t)n * g->ldl, sizeof(float) * cfg.V);
    double e = rel_l2(packed, (const float*)fx_get(fx, "logits")->data, (size_t)BT * cfg.V);
    check(e < 3e-2, "logits match PyTorch (rel L2 %.2e, bf16 tolerance 3e-2)", e);
    double wl = ((const float*)fx_get(fx, "loss")->data)[0];
    check(rel_err(loss, wl) < 1e-2, "loss %.6f matches PyTorch %.6f (rel %.2e, tolerance 1e-2)", loss, wl,
          rel_err(loss, wl));
    free(lg);
    free(packed);
    // training forward (dlogits fused) and backward
    cudaCheck(cudaMemset(g->grads, 0, sizeof(float) * g->total_pad));
    gpt_forward(g, &t.dc, a, 0, 1.0f / BT);
    gpt_backward(g, &t.dc, a, 0, g->dgrad[0], 1, NULL);
    float* grads = down_f32(g->grads, g->pl.total);
    for (int tn = 0; tn < NUM_PARAM_TENSORS; tn++) {
        const float* want = fx_param(fx, "grad", tn, g->pl.numel[tn]);
        if (!want) continue;
        const float* got = grads + g->pl.offset[tn];
        if (tn == PT_QKVB) { // K slice: analytically zero; compare Q, V by rel L2 and K absolutely
            int C = cfg.H;
            double num = 0, den = 0, kmax = 0, gmax = 0;
            for (int l = 0; l < cfg.L; l++)
                for (int i = 0; i < 3 * C; i++) {
                    size_t k = (size_t)l * 3 * C + i;
                    if (i >= C && i < 2 * C) {
                        if (fabs(got[k]) > kmax) kmax = fabs(got[k]);
                    } else {
                        double d = got[k] - want[k];
                        num += d * d;
                        den += (double)want[k] * want[k];
                        if (fabs(want[k]) > gmax) gmax = fabs(want[k]);
                    }
                }
            double ge = sqrt(num / den);
            check(ge < 5e-2 && kmax <= 1e-2 * gmax,
                  "gradient qkvb    matches PyTorch (Q,V rel L2 %.2e; K max |g| %.1e vs %.1e)", ge, kmax, gmax);
            continue;
        }
        double ge = rel_l2(got, want, g->pl.numel[tn]);
        check(ge < 5e-2, "gradient %-8s matches PyTorch (rel L2 %.2e, tolerance 5e-2)", PARAM_INFO[tn].name, ge);
    }
    free(grads);
    train_free(&t);
}

static void test_fixture_steps(Fixture* fx, const char* dir) {
    Train t;
    fixture_trainer(&t, fx, dir);
    double lr_sum = fixture_steps_check(fx, &t, 1e-2, 5e-2);
    GPT* g = &t.model;
    float* master = down_f32(g->master, g->pl.total);
    for (int tn = 0; tn < NUM_PARAM_TENSORS; tn++) {
        const float* want = fx_param(fx, "final", tn, g->pl.numel[tn]);
        if (!want) continue;
        const float* got = master + g->pl.offset[tn];
        if (PARAM_INFO[tn].init == INIT_ZEROS) {
            double worst = 0;
            for (size_t i = 0; i < g->pl.numel[tn]; i++)
                if (fabs(got[i] - want[i]) > worst) worst = fabs(got[i] - want[i]);
            check(worst <= 2 * lr_sum, "final %-8s matches PyTorch (max |diff| %.2e, tolerance 2*sum(lr) = %.2e)",
                  PARAM_INFO[tn].name, worst, 2 * lr_sum);
        } else {
            double e = rel_l2(got, want, g->pl.numel[tn]);
            check(e < 1e-2, "final %-8s matches PyTorch (rel L2 %.2e, tolerance 1e-2)", PARAM_INFO[tn].name, e);
        }
    }
    free(master);
    train_free(&t);
}

// -recompute full (1) rebuilds exactly the same activations, selective the attention
// probabilities (naive attention) or nothing stored (flash): bit-identical training
static void test_recompute(Fixture* fx, const char* dir) {
    const char* prev = getenv("LLMC_ATTENTION");
    char saved[32] = "";
    if (prev) snprintf(saved, sizeof(saved), "%s", prev);
    for (int run = 0; run < 3; run++) { // full; selective; selective with naive attention (stores probabilities)
        int mode = run == 0 ? RECOMPUTE_FULL : RECOMPUTE_SELECTIVE;
        if (run == 2) setenv("LLMC_ATTENTION", "naive", 1);
        Train a, b;
        fixture_trainers_recompute(&a, &b, fx, dir, mode);
        int same = 1;
        for (int s = 0; s < 6; s++) {
            StepResult ra = train_step(&a), rb = train_step(&b);
            if (ra.loss != rb.loss || ra.gnorm != rb.gnorm) same = 0;
        }
        float* pa = down_f32(a.model.master, a.model.pl.total);
        float* pb = down_f32(b.model.master, b.model.pl.total);
        same = same && memcmp(pa, pb, sizeof(float) * a.model.pl.total) == 0;
        check(same, "-recompute %s gives bit-identical losses, grad norms and weights over 6 steps",
              run == 0   ? "1"
              : run == 1 ? "selective"
                         : "selective (naive attention)");
        free(pa);
        free(pb);
        train_free(&a);
        train_free(&b);
    }
    if (prev)
        setenv("LLMC_ATTENTION", saved, 1);
    else
        unsetenv("LLMC_ATTENTION");
}

// Activation bytes per layer against Korthikanti et al. (2022), eq. 2 and 4 (sbh(10 + 24/t)
// + 5as^2b/t bytes, 16-bit activations; with sequence parallelism sbh*34/t + 5as^2b/t)
// adapted to this trainer: no dropout masks (10 -> 8, 34 -> 32), no probabilities but an
// fp32 lse (4asb/t) with flash attention, fp32 probabilities (4as^2b/t) with naive
// attention unless selective recompute shares them, fp32 LayerNorm statistics (16sb, /t
// with sp); full recompute keeps the input only (2sbh, /t with sp).
static double korthikanti_bf16(double s, double b, double h, double a, double t, int sp, int rc, int naive) {
    double sbh = s * b * h, spt = sp ? t : 1.0;
    if (rc == RECOMPUTE_FULL) return 2.0 * sbh / spt;
    double att = naive ? (rc == RECOMPUTE_SELECTIVE ? 0.0 : 4.0 * a * s * s * b / t) : 4.0 * a * s * b / t;
    double lin = sp ? 32.0 / t : 8.0 + 24.0 / t;
    return sbh * lin + att + 16.0 * s * b / spt;
}

static void test_act_memory(void) {
    const char* prev = getenv("LLMC_ATTENTION");
    char saved[32] = "";
    if (prev) snprintf(saved, sizeof(saved), "%s", prev);
    cudaStream_t st;
    cudaCheck(cudaStreamCreate(&st));
    int ok = 1, n = 0;
    char worst[200] = "";
    for (int naive = 0; naive <= 1; naive++)
        for (int TP = 1; TP <= 4; TP *= 2)
            for (int sp = 0; sp <= 1; sp++)
                for (int rc = 0; rc <= 2; rc++) {
                    if (sp && TP == 1) continue;
                    setenv("LLMC_ATTENTION", naive ? "naive" : "flash", 1);
                    Config cfg;
                    config_defaults(&cfg);
                    cfg.L = 4;
                    cfg.H = 64;
                    cfg.heads = 4;
                    cfg.seq = 32;
                    cfg.mb = 2;
                    cfg.V = 300;
                    cfg.vpad = 128;
                    cfg.Vp = 384;
                    cfg.recompute = rc;
                    cfg.sp = sp;
                    Comm comm = first_stage_comm(TP);
                    GPT g;
                    gpt_build(&g, &cfg, &comm, 1, 2, 0, 0, st);
                    double want = korthikanti_bf16(cfg.seq, cfg.mb, cfg.H, cfg.heads, TP, sp, rc, naive);
                    double got = (double)g.acts[0].layer_bytes;
                    n++;
                    if (got != want) {
                        ok = 0;
                        snprintf(worst, sizeof(worst), "naive %d TP %d sp %d rc %d: %.0f B, formula %.0f B", naive, TP,
                                 sp, rc, got, want);
                    }
                    gpt_free(&g);
                }
    check(ok,
          "activation bytes kept per layer equal Korthikanti et al.'s formula adapted (bf16, no dropout, lse or fp32 "
          "probabilities, -sp) in %d cases %s",
          n, worst);
    cudaCheck(cudaStreamDestroy(st));
    if (prev)
        setenv("LLMC_ATTENTION", saved, 1);
    else
        unsetenv("LLMC_ATTENTION");
}

// the three attention paths train the same model (not bit-identical: different sum orders,
// and the tensor-core path rounds P and dS to bf16)
static void test_attention_paths(Fixture* fx, const char* dir) {
    Config cfg = fixture_config(fx, dir);
    const char* kinds[3] = {"naive", "flash", "tc"};
    double l[3][4];
    int have_tc = flash_tc_supported(cfg.H / cfg.heads);
    for (int k = 0; k < 3; k++) {
        if (k == 2 && !have_tc) continue;
        setenv("LLMC_ATTENTION", kinds[k], 1);
        Train t;
        fixture_train(&t, &cfg, dir);
        for (int s = 0; s < 4; s++) l[k][s] = train_step(&t).loss;
        train_free(&t);
    }
    unsetenv("LLMC_ATTENTION");
    for (int k = 1; k < 3; k++) {
        if (k == 2 && !have_tc) {
            printf("note: head size %d has no tensor-core kernel\n", cfg.H / cfg.heads);
            continue;
        }
        double worst = 0;
        for (int s = 0; s < 4; s++)
            if (rel_err(l[k][s], l[0][s]) > worst) worst = rel_err(l[k][s], l[0][s]);
        check(worst < 5e-3, "%s and naive attention: 4 training steps agree (worst loss rel %.1e)", kinds[k], worst);
    }
    // the cuBLASLt GELU epilogue against the separate kernel
    for (int fused = 0; fused < 2; fused++) {
        setenv("LLMC_GELU_FUSION", fused ? "1" : "0", 1);
        Train t;
        fixture_train(&t, &cfg, dir);
        for (int s = 0; s < 4; s++) l[fused][s] = train_step(&t).loss;
        if (fused)
            printf("note: cuBLASLt GELU_AUX_BIAS epilogue %s\n",
                   t.model.gemm.gelu_fused_ok == 1 ? "used" : "not available (fallback kernel)");
        train_free(&t);
    }
    unsetenv("LLMC_GELU_FUSION");
    double worst = 0;
    for (int s = 0; s < 4; s++)
        if (rel_err(l[1][s], l[0][s]) > worst) worst = rel_err(l[1][s], l[0][s]);
    check(worst < 5e-3, "fused and unfused GeLU: 4 training steps agree (worst loss rel %.1e)", worst);
}

// ----------------------------------------------------------------------------------------
// the binaries: train_gpt_cu against train_gpt (CPU, fp32) for 10 steps; -resume end to end

#define NSTEPS 10 // at most RUNLOG_STEPS (tests/trainer_cases.h)

// the binaries under test: ./train_gpt (CPU) and ./train_gpt_cu, or the environment's
// LLMC_TRAIN_GPT / LLMC_TRAIN_GPT_CU (the emulated build points the latter at its own binary)
static const char* bin_cpu(void) {
    const char* s = getenv("LLMC_TRAIN_GPT");
    return s && s[0] ? s : "./train_gpt";
}
static const char* bin_cu(void) {
    const char* s = getenv("LLMC_TRAIN_GPT_CU");
    return s && s[0] ? s : "./train_gpt_cu";
}

static void test_binaries(void) {
    const char* CPU = bin_cpu();
    const char* CU = bin_cu();
    if (access(CPU, X_OK) != 0 || access(CU, X_OK) != 0) {
        check(0, "%s and %s exist (make train_gpt cuda-build)", CPU, CU);
        return;
    }
    char tmp[] = "/tmp/llmc_cu_binXXXXXX";
    char data[1200], args[3000], cmd[4000], err[4096], path[1400];
    pattern_tmpdir(tmp, data, sizeof(data), 40000);
    snprintf(args, sizeof(args),
             "-L 4 -H 64 -heads 4 -seq 64 -V 300 -vpad 128 -mb 2 -gb 8 -ramp 4 4 1024 -lr 2e-3 -warmup 1000 "
             "-decay 8000 -tokens 1e9 -i %s -j '' -shuffle 1 -seed 7 -threads 2",
             data);
    RunLog cpu, gpu;
    snprintf(cmd, sizeof(cmd), "timeout 300 %s %s -o %s/cpu -steps %d", CPU, args, tmp, NSTEPS);
    int rc1 = run_cmd(cmd, err, sizeof(err));
    snprintf(cmd, sizeof(cmd), "timeout 300 %s %s -o %s/gpu -steps %d -peak 100", CU, args, tmp, NSTEPS);
    int rc2 = run_cmd(cmd, err, sizeof(err));
    snprintf(path, sizeof(path), "%s/cpu/log.jsonl", tmp);
    read_runlog(path, &cpu);
    snprintf(path, sizeof(path), "%s/gpu/log.jsonl", tmp);
    read_runlog(path, &gpu);
    double wl = 0, wg = 0;
    int ok = rc1 == 0 && rc2 == 0 && cpu.n == NSTEPS && gpu.n == NSTEPS;
    if (ok) runlog_worst(&gpu, &cpu, NSTEPS, &wl, &wg);
    check(ok && wl <= 2e-2 && wg <= 1e-1,
          "train_gpt_cu vs train_gpt (CPU fp32), %d steps: worst loss rel %.1e, grad norm rel %.1e (rc %d %d)", NSTEPS,
          wl, wg, rc1, rc2);
    if (ok)
        printf("      step 1 loss cpu %.6f gpu %.6f; step %d loss cpu %.6f gpu %.6f\n", cpu.loss[1], gpu.loss[1],
               NSTEPS, cpu.loss[NSTEPS], gpu.loss[NSTEPS]);
    // the log carries the CUDA trainer's extra field
    snprintf(path, sizeof(path), "%s/gpu/log.jsonl", tmp);
    FILE* f = fopen(path, "r");
    char line[4096];
    int has_mfu = 0;
    while (f && fgets(line, sizeof(line), f))
        if (strstr(line, "\"type\":\"train\"") && strstr(line, "\"mfu\":")) has_mfu = 1;
    if (f) fclose(f);
    check(has_mfu, "train_gpt_cu logs mfu in its JSONL");
    // resume end to end: 3 steps + checkpoint + -resume for 3 more == 6 straight
    snprintf(cmd, sizeof(cmd), "timeout 300 %s %s -o %s/full -steps 6", CU, args, tmp);
    rc1 = run_cmd(cmd, err, sizeof(err));
    snprintf(cmd, sizeof(cmd), "timeout 300 %s %s -o %s/split -steps 3 -ckpt-every 3", CU, args, tmp);
    rc2 = run_cmd(cmd, err, sizeof(err));
    snprintf(cmd, sizeof(cmd), "timeout 300 %s %s -o %s/split -steps 6 -ckpt-every 3 -resume", CU, args, tmp);
    int rc3 = run_cmd(cmd, err, sizeof(err));
    RunLog a, b;
    snprintf(path, sizeof(path), "%s/full/log.jsonl", tmp);
    read_runlog(path, &a);
    snprintf(path, sizeof(path), "%s/split/log.jsonl", tmp);
    read_runlog(path, &b);
    int same = rc1 == 0 && rc2 == 0 && rc3 == 0 && a.n == 6 && b.n == 6;
    for (int s = 1; same && s <= 6; s++)
        if (strcmp(a.raw[s], b.raw[s]) != 0) same = 0;
    check(same, "train_gpt_cu: 3 steps + -resume log the same 6 steps as a straight run, bit for bit (rc %d %d %d)",
          rc1, rc2, rc3);
    // a CUDA checkpoint resumes in the CPU trainer (same format, any layout)
    snprintf(
        cmd, sizeof(cmd),
        "mkdir -p %s/cross && cp -r %s/split/ckpt_00000003 %s/cross/ && timeout 300 %s %s -o %s/cross -steps 4 -resume",
        tmp, tmp, tmp, CPU, args, tmp);
    rc1 = run_cmd(cmd, err, sizeof(err));
    RunLog x;
    snprintf(path, sizeof(path), "%s/cross/log.jsonl", tmp);
    read_runlog(path, &x);
    check(rc1 == 0 && x.n == 4 && rel_err(x.loss[4], a.loss[4]) < 2e-2,
          "a train_gpt_cu checkpoint resumes in train_gpt (step 4 loss %.5f vs %.5f)", x.loss[4], a.loss[4]);
    snprintf(cmd, sizeof(cmd), "rm -rf %s", tmp);
    if (system(cmd) != 0) printf("note: could not remove %s\n", tmp);
}

static const char* const ZLABEL[4] = {"", " zero-1", " zero-2", " zero-3"};

// The 3D layout runs: LAYOUT_STEPS steps over the ramp 4 -> 16 (global batches 4, 4, 8, 12, 16: with
// DP = 2 the pipeline sees m = 2, 4, 6, 8 micro-batches, the first fewer than 1x4x2's stages); the
// -comm mpi -vpp run checkpoints at LAYOUT_CKPT. (A sixth step at 16 took a fifth longer and reached
// no new state; ten steps over a slower ramp took half again as long: 8-process emulated runs.)
enum { LAYOUT_STEPS = 5, LAYOUT_CKPT = 3 };

// The step-LAYOUT_CKPT checkpoint of the 2x2x2 -sp 1 -vpp 2 run (layout-free) resumes as 1x1x1:
// the steps after it within the layout tolerance of the straight 1x1x1 run ref.
static void test_vpp_resume_single(const char* CU, const char* args, const char* tmp, const RunLog* ref) {
    char cmd[4000], err[4096], path[1400];
    snprintf(cmd, sizeof(cmd),
             "mkdir -p %s/vre && cp -r %s/vpp/ckpt_%08d %s/vre/ && timeout 300 %s %s -o %s/vre -resume", tmp, tmp,
             LAYOUT_CKPT, tmp, CU, args, tmp);
    int rc = run_cmd(cmd, err, sizeof(err));
    RunLog x;
    snprintf(path, sizeof(path), "%s/vre/log.jsonl", tmp);
    int ok = rc == 0 && read_runlog(path, &x) == 0 && x.n == LAYOUT_STEPS && x.loss[LAYOUT_CKPT] == 0.0 &&
             ref->n == LAYOUT_STEPS;
    double wl = 0;
    for (int st = LAYOUT_CKPT + 1; ok && st <= LAYOUT_STEPS; st++)
        if (rel_err(x.loss[st], ref->loss[st]) > wl) wl = rel_err(x.loss[st], ref->loss[st]);
    check(ok && wl <= 1e-2,
          "a 2x2x2 -sp 1 -vpp 2 checkpoint (step %d) resumes as 1x1x1: steps %d-%d worst loss rel %.1e vs straight "
          "1x1x1 (rc %d)",
          LAYOUT_CKPT, LAYOUT_CKPT + 1, LAYOUT_STEPS, wl, rc);
}

// the ids of the first "sample" record of a -log file into ids (cap bytes): 0, or -1 if it has none
static int runlog_first_sample(const char* path, char* ids, size_t cap) {
    FILE* f = fopen(path, "r");
    char line[8192];
    int rc = -1;
    while (f && rc != 0 && fgets(line, sizeof(line), f)) {
        char* p = strstr(line, "\"type\":\"sample\"") ? strstr(line, "\"ids\":[") : NULL;
        char* e = p ? strchr(p, ']') : NULL;
        if (e == NULL || (size_t)(e - p) >= cap) continue;
        memcpy(ids, p, (size_t)(e - p));
        ids[e - p] = 0;
        rc = 0;
    }
    if (f) fclose(f);
    return rc;
}

// 3D layouts with -comm mpi (host-staged: several ranks share the one GPU) against the
// single process; with LLMC_TEST_NCCL_LAYOUTS=1 also -comm nccl (needs a GPU per rank, or
// the emulation with CUEMU_DEVICES=8). Needs mpirun; said and skipped without it.
static void test_layouts(void) {
    const char* CU = bin_cu();
    if (getenv("LLMC_TEST_LAYOUTS") && strcmp(getenv("LLMC_TEST_LAYOUTS"), "0") == 0) {
        printf("note: LLMC_TEST_LAYOUTS=0: 3D layout tests of train_gpt_cu skipped\n");
        return;
    }
    if (system("command -v mpirun > /dev/null 2>&1") != 0) {
        printf("note: mpirun not found: 3D layout tests of train_gpt_cu skipped\n");
        return;
    }
    char tmp[] = "/tmp/llmc_cu_layoutXXXXXX";
    char data[1200], args[3000], cmd[4000], err[4096], path[1400];
    pattern_tmpdir(tmp, data, sizeof(data), 40000);
    snprintf(args, sizeof(args),
             "-L 4 -H 64 -heads 4 -seq 32 -V 300 -vpad 128 -mb 1 -gb 16 -ramp 4 4 768 -lr 2e-3 -warmup 2000 "
             "-decay 8000 -tokens 1e9 -i %s -j '' -shuffle 1 -seed 7 -threads 1 -steps %d",
             data, LAYOUT_STEPS);
    RunLog ref;
    snprintf(cmd, sizeof(cmd), "timeout 300 %s %s -log %s/ref.jsonl", CU, args, tmp);
    int rc = run_cmd(cmd, err, sizeof(err));
    snprintf(path, sizeof(path), "%s/ref.jsonl", tmp);
    // the CPU trainer (fp32, single process) is the reference every layout is held to
    RunLog cpu;
    snprintf(cmd, sizeof(cmd), "OMP_NUM_THREADS=1 timeout 300 %s %s -log %s/cpu.jsonl", bin_cpu(), args, tmp);
    int rcc = run_cmd(cmd, err, sizeof(err));
    snprintf(path, sizeof(path), "%s/cpu.jsonl", tmp);
    int okc = rcc == 0 && read_runlog(path, &cpu) == 0 && cpu.n == LAYOUT_STEPS;
    snprintf(path, sizeof(path), "%s/ref.jsonl", tmp);
    int okr = rc == 0 && read_runlog(path, &ref) == 0 && ref.n == LAYOUT_STEPS;
    double cl = 0;
    for (int st = 1; okc && okr && st <= LAYOUT_STEPS; st++)
        if (rel_err(ref.loss[st], cpu.loss[st]) > cl) cl = rel_err(ref.loss[st], cpu.loss[st]);
    check(okc && okr && cl <= 2e-2,
          "train_gpt_cu 1x1x1 vs train_gpt (CPU fp32): %d steps, worst loss rel %.1e (rc %d %d)", LAYOUT_STEPS, cl, rc,
          rcc);
    // host waits per step with NCCL on a stage that uploads tokens: one per micro-batch (the
    // slot guard), one for the loss and norms, one at the end (the ramp gives 4..16 micro-batches)
    int sync_ok = okr, bad_step = 0;
    for (int st = 1; okr && st <= LAYOUT_STEPS; st++)
        if (ref.micro[st] < 1 || ref.syncs[st] != ref.micro[st] + 2) {
            sync_ok = 0;
            if (!bad_step) bad_step = st;
        }
    check(sync_ok,
          "train_gpt_cu 1x1x1: every step logs micro-batches + 2 host syncs (step 1: %d micro, %d syncs; first bad "
          "step %d)",
          ref.micro[1], ref.syncs[1], bad_step);
#ifdef CUEMU
    { // the emulation's own count of host waits (CUEMU_SYNC_LOG): a 2-step run minus a 1-step run is step 2's
        long total[2] = {-1, -1};
        for (int r = 0; r < 2; r++) {
            char a2[3000], logf[1400];
            snprintf(a2, sizeof(a2), "%s", args);
            char* p = strstr(a2, "-steps ");
            if (p) p[7] = r == 0 ? '1' : '2'; // LAYOUT_STEPS has one digit
            snprintf(logf, sizeof(logf), "%s/syncs%d.txt", tmp, r);
            snprintf(cmd, sizeof(cmd), "CUEMU_SYNC_LOG=%s timeout 300 %s %s", logf, CU, a2);
            int rs = run_cmd(cmd, err, sizeof(err));
            FILE* f = fopen(logf, "r");
            if (rs == 0 && f && fscanf(f, "%ld", &total[r]) != 1) total[r] = -1;
            if (f) fclose(f);
        }
        long step2 = total[0] >= 0 && total[1] >= 0 ? total[1] - total[0] : -1;
        check(okr && step2 == ref.syncs[2],
              "the emulation counts %ld host waits in step 2 (2-step minus 1-step run: %ld - %ld), as the trainer logs "
              "(%d)",
              step2, total[1], total[0], ref.syncs[2]);
    }
#endif
    const char* envx = getenv("CUEMU_DEVICES") ? "-x CUEMU_DEVICES" : "";
    // sp: -sp 1 -recompute selective; vpp > 1: the interleaved schedule (with NCCL: the phased
    // list, whose m = 2, 4, 6, 8 steps include PP=2 V=2 m=4, where the old grouping deadlocked),
    // and with -comm mpi a checkpoint at step 5 that resumes below as 1x1x1
    // same: the layout without -sp/-vpp it must match to 1e-5 (only the fp32 sum order of
    // the LayerNorm gradients differs: a missing TP sum of them moves the norm by ~5e-4; the
    // -zero 3 run also sums each micro-batch over DP before the micro-batches, zero.h)
    struct {
        int tp, pp, dp, zero;
        const char* comm;
        int sp, vpp, same;
    } L[] = {
        {2, 2, 2, 0, "mpi", 0, 1, -1}, {2, 2, 2, 1, "mpi", 0, 1, -1},  {1, 4, 2, 1, "mpi", 0, 1, -1},
        {2, 2, 2, 1, "mpi", 1, 2, 1},  {2, 2, 2, 1, "nccl", 0, 1, -1}, {4, 1, 2, 0, "nccl", 0, 1, -1},
        {2, 2, 2, 1, "nccl", 1, 1, 4}, {2, 2, 2, 3, "nccl", 1, 2, 4},
    };
    int nccl = getenv("LLMC_TEST_NCCL_LAYOUTS") && strcmp(getenv("LLMC_TEST_NCCL_LAYOUTS"), "1") == 0;
    for (size_t i = 0; i < sizeof(L) / sizeof(L[0]); i++) {
        if (strcmp(L[i].comm, "nccl") == 0 && !nccl) continue;
        int np = L[i].tp * L[i].pp * L[i].dp;
        char label[80] = "", extra[1600] = "";
        if (L[i].sp || L[i].vpp > 1)
            snprintf(label, sizeof(label), " -sp %d -vpp %d -recompute selective", L[i].sp, L[i].vpp);
        int vpp_ckpt = L[i].vpp > 1 && strcmp(L[i].comm, "mpi") == 0;
        if (vpp_ckpt)
            snprintf(extra, sizeof(extra), "%s -o %s/vpp -ckpt-every %d", label, tmp, LAYOUT_CKPT);
        else
            snprintf(extra, sizeof(extra), "%s", label);
        // NCCL with DP > 1 overlaps the DP buckets with the backward on a second stream: the
        // emulation's stream detector sees a kernel's accesses as its whole allocation, and the
        // backward writes other slices of the gradient buffer while a bucket is reduced, so it
        // cannot judge that overlap (it reports it); those runs check the numbers, and the
        // stream detector runs on the -comm mpi layouts and the LLMC_DP_OVERLAP=0 run below
        const char* races =
            strcmp(L[i].comm, "nccl") == 0 && L[i].dp > 1 ? "CUEMU_STREAM_RACES=0" : "CUEMU_STREAM_RACES=1";
        snprintf(cmd, sizeof(cmd),
                 "%s timeout 600 mpirun --oversubscribe --allow-run-as-root %s -x CUEMU_STREAM_RACES -np %d %s %s -tp "
                 "%d -pp %d -dp %d -zero %d -comm %s %s -log %s/l%zu.jsonl",
                 races, envx, np, CU, args, L[i].tp, L[i].pp, L[i].dp, L[i].zero, L[i].comm, extra, tmp, i);
        rc = run_cmd(cmd, err, sizeof(err));
        RunLog rl;
        snprintf(path, sizeof(path), "%s/l%zu.jsonl", tmp, i);
        int ok = rc == 0 && read_runlog(path, &rl) == 0 && rl.n == LAYOUT_STEPS && okc && okr;
        double wl = 0, wg = 0, wc = 0, wcg = 0;
        if (ok) runlog_worst(&rl, &ref, LAYOUT_STEPS, &wl, &wg);
        if (ok) runlog_worst(&rl, &cpu, LAYOUT_STEPS, &wc, &wcg);
        // bf16: TP partial sums are rounded before their all-reduce, so layouts differ by bf16 rounding
        // and against the CPU trainer with the bf16 bound of the single-GPU comparison
        check(ok && wl <= 1e-2 && wg <= 5e-2 && wc <= 2e-2,
              "train_gpt_cu layout %dx%dx%d%s%s -comm %s: %d steps, worst loss rel %.1e (vs CPU trainer %.1e), gnorm "
              "rel %.1e vs 1x1x1 (rc %d)",
              L[i].tp, L[i].pp, L[i].dp, ZLABEL[L[i].zero], label, L[i].comm, LAYOUT_STEPS, wl, wc, wg, rc);
        if (strcmp(L[i].comm, "nccl") == 0) { // rank 0 (first stage) uploads tokens: micro-batches + 2 waits per step
            int sync_ok = ok;
            for (int st = 1; ok && st <= LAYOUT_STEPS; st++)
                if (rl.micro[st] < 1 || rl.syncs[st] != rl.micro[st] + 2) sync_ok = 0;
            check(sync_ok,
                  "train_gpt_cu layout %dx%dx%d%s -comm nccl, rank 0: micro-batches + 2 host syncs per step (step %d: "
                  "%d, %d)",
                  L[i].tp, L[i].pp, L[i].dp, label, LAYOUT_STEPS, ok ? rl.micro[LAYOUT_STEPS] : -1,
                  ok ? rl.syncs[LAYOUT_STEPS] : -1);
        }
        if (strcmp(L[i].comm, "nccl") == 0 && L[i].pp > 1 && (L[i].vpp > 1 || !L[i].sp)) {
            // the pipeline's messages on their link streams (default) vs one NCCL group per run
            // of communication actions on the compute stream: the same numbers, bit for bit (the
            // same kernels in the same order on the same data), and the same host waits
            snprintf(
                cmd, sizeof(cmd),
                "LLMC_PP_OVERLAP=0 %s timeout 600 mpirun --oversubscribe --allow-run-as-root %s -x CUEMU_STREAM_RACES "
                "-x LLMC_PP_OVERLAP -np %d %s %s -tp %d -pp %d -dp %d -zero %d -comm nccl %s -log %s/g%zu.jsonl",
                races, envx, np, CU, args, L[i].tp, L[i].pp, L[i].dp, L[i].zero, extra, tmp, i);
            int rg = run_cmd(cmd, err, sizeof(err));
            RunLog gl;
            snprintf(path, sizeof(path), "%s/g%zu.jsonl", tmp, i);
            int okg = ok && rg == 0 && read_runlog(path, &gl) == 0 && gl.n == LAYOUT_STEPS, same = okg;
            for (int st = 1; okg && st <= LAYOUT_STEPS; st++)
                if (gl.loss[st] != rl.loss[st] || gl.gnorm[st] != rl.gnorm[st] || gl.syncs[st] != rl.syncs[st])
                    same = 0;
            check(same,
                  "train_gpt_cu layout %dx%dx%d%s%s -comm nccl: pipeline link streams equal LLMC_PP_OVERLAP=0 "
                  "(grouped) bit for bit, same host syncs (rc %d)",
                  L[i].tp, L[i].pp, L[i].dp, ZLABEL[L[i].zero], label, rg);
        }
        if (L[i].same >= 0) {
            RunLog base;
            snprintf(path, sizeof(path), "%s/l%d.jsonl", tmp, L[i].same);
            int okb = ok && read_runlog(path, &base) == 0 && base.n == LAYOUT_STEPS;
            double sl = 0, sg = 0;
            for (int st = 1; okb && st <= LAYOUT_STEPS; st++) {
                if (rel_err(rl.loss[st], base.loss[st]) > sl) sl = rel_err(rl.loss[st], base.loss[st]);
                if (rel_err(rl.gnorm[st], base.gnorm[st]) > sg) sg = rel_err(rl.gnorm[st], base.gnorm[st]);
            }
            check(okb && sl <= 1e-5 && sg <= 1e-5,
                  "train_gpt_cu layout 2x2x2%s%s -comm %s equals 2x2x2 zero-1 without them: loss rel %.1e, gnorm rel "
                  "%.1e",
                  ZLABEL[L[i].zero], label, L[i].comm, sl, sg);
        }
        if (vpp_ckpt) test_vpp_resume_single(CU, args, tmp, &ref);
    }
    // -pp-schedule zb-h1 (B and W split, W's deferred into the bubble): bit-identical to the
    // same layout's 1F1B run above (the same kernels on the same data; only their order moves):
    // over NCCL with -sp -vpp -zero 3 (the phased list, link streams, each micro-batch's B and W
    // parts of a layer reduced apart, every element's micro-batches added in the same order, the
    // layers' weights gathered), and over MPI -zero 1 with 2 micro-batches for 4 stages at the
    // ramp's start
    struct {
        int tp, pp, dp, zero, same;
        const char* comm;
        const char* flags;
    } Z[] = {
        {2, 2, 2, 3, 7, "nccl", "-sp 1 -vpp 2 -recompute selective"},
        {1, 4, 2, 1, 2, "mpi", ""},
    };
    for (size_t i = 0; i < sizeof(Z) / sizeof(Z[0]); i++) {
        if (strcmp(Z[i].comm, "nccl") == 0 && !nccl) continue;
        int np = Z[i].tp * Z[i].pp * Z[i].dp;
        const char* races = strcmp(Z[i].comm, "nccl") == 0 ? "CUEMU_STREAM_RACES=0" : "CUEMU_STREAM_RACES=1";
        snprintf(cmd, sizeof(cmd),
                 "%s timeout 600 mpirun --oversubscribe --allow-run-as-root %s -x CUEMU_STREAM_RACES -np %d %s %s -tp "
                 "%d -pp %d -dp %d -zero %d -comm %s %s -pp-schedule zb-h1 -log %s/zb%zu.jsonl",
                 races, envx, np, CU, args, Z[i].tp, Z[i].pp, Z[i].dp, Z[i].zero, Z[i].comm, Z[i].flags, tmp, i);
        rc = run_cmd(cmd, err, sizeof(err));
        RunLog zl, base;
        snprintf(path, sizeof(path), "%s/zb%zu.jsonl", tmp, i);
        int ok = rc == 0 && read_runlog(path, &zl) == 0 && zl.n == LAYOUT_STEPS;
        snprintf(path, sizeof(path), "%s/l%d.jsonl", tmp, Z[i].same);
        ok = ok && read_runlog(path, &base) == 0 && base.n == LAYOUT_STEPS;
        int same = ok;
        for (int st = 1; ok && st <= LAYOUT_STEPS; st++)
            if (zl.loss[st] != base.loss[st] || zl.gnorm[st] != base.gnorm[st]) same = 0;
        check(same,
              "train_gpt_cu layout %dx%dx%d%s %s -comm %s -pp-schedule zb-h1: %d steps bit-identical to its "
              "1F1B (rc %d)",
              Z[i].tp, Z[i].pp, Z[i].dp, ZLABEL[Z[i].zero], Z[i].flags, Z[i].comm, LAYOUT_STEPS, rc);
    }
    // -cp 2 (context parallelism, doc/cp.md): each sequence split over 2 ranks, attention over the
    // ring (K|V blocks and dK|dV partials passed round, the next block's transfer overlapping the
    // compute), CP_STEPS steps against the single process within the bf16 layout bounds above:
    // over NCCL with ZeRO-1 sharded over the CP group (the DP buckets overlapped: stream detector
    // off, as above; test_trainer_detect.sh runs the ring under it), host-staged over MPI on the
    // CUDA-core kernels (detector on), and composed with TP 2 and -sp 1 over NCCL (4 processes);
    // -zero 3 -grad-reduce bf16 over NCCL and -zero 2 over MPI shard over the CP group too.
    // Those bounds would let a misplaced position or dK|dV block through, so step 1 (the same
    // weights) of the CUDA-core run is held to 1e-4 of a 1-step single process on the same
    // kernels: K|V travel as the bf16 they are, the merge and the partials are fp32 and each
    // result is rounded once, as the single kernel does, so only fp32 sum orders differ (the
    // tensor-core kernels round P and dS to bf16 after each block's running max, which the block
    // split moves: ~5e-4 on the norm, the size of those breaks). Its greedy sample after step 1
    // (each position's logits from the CP rank holding it) is the single process's. The NCCL
    // run's checkpoint (ZeRO-1 shards over the CP group) resumes as one process.
    enum { CP_STEPS = 2 };
    RunLog fref;
    const char* sample = "-sample-every 1 -sample-greedy 1 -sample-len 16";
    snprintf(cmd, sizeof(cmd), "LLMC_ATTENTION=flash timeout 300 %s %s -steps 1 %s -log %s/fref.jsonl", CU, args,
             sample, tmp);
    rc = run_cmd(cmd, err, sizeof(err));
    snprintf(path, sizeof(path), "%s/fref.jsonl", tmp);
    int okf = rc == 0 && read_runlog(path, &fref) == 0 && fref.n == 1;
    struct {
        int tp, cp, zero;
        const char* comm;
        const char* flags;
        const char* attn;
    } K[] = {
        {1, 2, 1, "nccl", "", "auto"},
        {1, 2, 0, "mpi", sample, "flash"},
        {2, 2, 0, "nccl", "-sp 1", "auto"},
        {1, 2, 3, "nccl", "-grad-reduce bf16", "auto"}, // weights and gradients sharded over the CP group
        {1, 2, 2, "mpi", "", "auto"},
    };
    for (size_t i = 0; i < sizeof(K) / sizeof(K[0]); i++) {
        if (strcmp(K[i].comm, "nccl") == 0 && !nccl) continue;
        int np = K[i].tp * K[i].cp;
        const char* races = strcmp(K[i].comm, "nccl") == 0 ? "CUEMU_STREAM_RACES=0" : "CUEMU_STREAM_RACES=1";
        char ck[1400] = "";
        int resume = i == 0 || K[i].zero == 3; // the shards gathered over the CP group into the files
        if (resume) snprintf(ck, sizeof(ck), "-o %s/cpk%zu -ckpt-every %d", tmp, i, CP_STEPS);
        snprintf(cmd, sizeof(cmd),
                 "%s LLMC_ATTENTION=%s timeout 600 mpirun --oversubscribe --allow-run-as-root %s -x CUEMU_STREAM_RACES "
                 "-x LLMC_ATTENTION -np %d %s %s -tp %d -cp %d -zero %d -comm %s %s -steps %d %s -log %s/cp%zu.jsonl",
                 races, K[i].attn, envx, np, CU, args, K[i].tp, K[i].cp, K[i].zero, K[i].comm, K[i].flags, CP_STEPS, ck,
                 tmp, i);
        rc = run_cmd(cmd, err, sizeof(err));
        RunLog rl;
        snprintf(path, sizeof(path), "%s/cp%zu.jsonl", tmp, i);
        int ok = rc == 0 && read_runlog(path, &rl) == 0 && rl.n == CP_STEPS && okc && okr;
        double wl = 0, wg = 0, wc = 0, wcg = 0;
        if (ok) runlog_worst(&rl, &ref, CP_STEPS, &wl, &wg);
        if (ok) runlog_worst(&rl, &cpu, CP_STEPS, &wc, &wcg);
        check(ok && wl <= 1e-2 && wg <= 5e-2 && wc <= 2e-2,
              "train_gpt_cu -tp %d -cp %d%s %s -comm %s (attention %s): %d steps, worst loss rel %.1e (vs CPU trainer "
              "%.1e), gnorm rel %.1e vs 1x1x1 (rc %d)",
              K[i].tp, K[i].cp, ZLABEL[K[i].zero], K[i].flags, K[i].comm, K[i].attn, CP_STEPS, wl, wc, wg, rc);
        if (strcmp(K[i].comm, "nccl") == 0) { // the ring waits on the GPU only: no host wait added
            int sync_ok = ok;
            for (int st = 1; ok && st <= CP_STEPS; st++)
                if (rl.micro[st] < 1 || rl.syncs[st] != rl.micro[st] + 2) sync_ok = 0;
            check(sync_ok, "  ... rank 0: micro-batches + 2 host syncs per step (step %d: %d, %d)", CP_STEPS,
                  ok ? rl.micro[CP_STEPS] : -1, ok ? rl.syncs[CP_STEPS] : -1);
        }
        if (strcmp(K[i].attn, "flash") == 0) {
            int o1 = ok && okf;
            double l1 = o1 ? rel_err(rl.loss[1], fref.loss[1]) : 1, g1 = o1 ? rel_err(rl.gnorm[1], fref.gnorm[1]) : 1;
            check(o1 && l1 <= 1e-4 && g1 <= 1e-4,
                  "  ... step 1 (the same weights) loss rel %.1e, gnorm rel %.1e vs 1x1x1 on the same kernels (bound "
                  "1e-4: sum orders only)",
                  l1, g1);
            char sa[4096] = "", sb[4096] = "";
            char pa[1400];
            snprintf(pa, sizeof(pa), "%s/fref.jsonl", tmp);
            int same = runlog_first_sample(pa, sa, sizeof(sa)) == 0 && runlog_first_sample(path, sb, sizeof(sb)) == 0 &&
                       strcmp(sa, sb) == 0;
            check(o1 && same, "  ... its greedy sample after step 1 is the single process's (%.40s)", sb);
        }
        if (resume) { // its step-CP_STEPS checkpoint resumed with -cp 1 for one step, against the straight run
            snprintf(cmd, sizeof(cmd), "timeout 300 %s %s -o %s/cpk%zu -resume -cp 1 -steps %d -log %s/cpr.jsonl", CU,
                     args, tmp, i, CP_STEPS + 1, tmp);
            int rr = run_cmd(cmd, err, sizeof(err));
            RunLog x;
            snprintf(path, sizeof(path), "%s/cpr.jsonl", tmp);
            int okx = ok && rr == 0 && read_runlog(path, &x) == 0 && x.n == CP_STEPS + 1 && x.loss[CP_STEPS] == 0.0;
            double e = okx ? rel_err(x.loss[CP_STEPS + 1], ref.loss[CP_STEPS + 1]) : 1;
            check(okx && e <= 1e-2,
                  "  ... its step-%d checkpoint resumes as 1x1x1: step %d loss rel %.1e vs the straight 1x1x1 run (rc "
                  "%d)",
                  CP_STEPS, CP_STEPS + 1, e, rr);
        }
    }
    if (nccl) { // the DP buckets overlapped with the backward (default) vs one reduction after it (stream detector on)
        snprintf(cmd, sizeof(cmd),
                 "LLMC_DP_OVERLAP=0 timeout 600 mpirun --oversubscribe --allow-run-as-root %s -x LLMC_DP_OVERLAP -np 8 "
                 "%s %s -tp 2 -pp 2 -dp 2 -zero 1 -comm nccl -log %s/nov.jsonl",
                 envx, CU, args, tmp);
        rc = run_cmd(cmd, err, sizeof(err));
        RunLog on, off;
        snprintf(path, sizeof(path), "%s/l4.jsonl", tmp);
        int ok = read_runlog(path, &on) == 0 && on.n == LAYOUT_STEPS;
        snprintf(path, sizeof(path), "%s/nov.jsonl", tmp);
        ok = ok && rc == 0 && read_runlog(path, &off) == 0 && off.n == LAYOUT_STEPS;
        int same = ok, ran = ok;
        for (int st = 1; ok && st <= LAYOUT_STEPS; st++) {
            if (on.loss[st] != off.loss[st] || on.gnorm[st] != off.gnorm[st]) same = 0;
            if (!(on.overlap[st] > 0.0) || off.overlap[st] != 0.0) ran = 0;
        }
        // each element is reduced once by the same NCCL sum in both: identical here (NCCL's
        // own order on GPUs could differ by rounding)
        check(same,
              "train_gpt_cu 2x2x2 zero-1 -comm nccl: DP buckets overlapped with the backward equal one reduction after "
              "it, bit for bit (rc %d)",
              rc);
        check(ran,
              "  ... and the log shows the overlapped reduction time (t_overlap_ms > 0, step 1 %.3f ms) only when on",
              ok ? on.overlap[1] : -1.0);
        snprintf(cmd, sizeof(cmd),
                 "LLMC_DP_OVERLAP=yes timeout 300 mpirun --oversubscribe --allow-run-as-root %s -x LLMC_DP_OVERLAP -np "
                 "2 %s %s -dp 2 -comm nccl -log %s/bad.jsonl",
                 envx, CU, args, tmp);
        rc = run_cmd(cmd, err, sizeof(err));
        check(rc != 0 && strstr(err, "LLMC_DP_OVERLAP=yes: use 1 (default) or 0") != NULL,
              "LLMC_DP_OVERLAP=yes: refused with a message (rc %d)", rc);
        snprintf(cmd, sizeof(cmd),
                 "LLMC_PP_OVERLAP=on timeout 300 mpirun --oversubscribe --allow-run-as-root %s -x LLMC_PP_OVERLAP -np "
                 "2 %s %s -pp 2 -comm nccl -log %s/bad.jsonl",
                 envx, CU, args, tmp);
        rc = run_cmd(cmd, err, sizeof(err));
        check(rc != 0 && strstr(err, "LLMC_PP_OVERLAP=on: use 1 (default) or 0") != NULL,
              "LLMC_PP_OVERLAP=on: refused with a message (rc %d)", rc);
    }
    snprintf(cmd, sizeof(cmd), "rm -rf %s", tmp);
    if (system(cmd) != 0) printf("note: could not remove %s\n", tmp);
}

// ZeRO-2/3 (llmc/host/zero.h, llmc/cuda/zero.cuh) against ZeRO-1, 1x1x2, 4 steps each:
//   one micro-batch per rank and step (-gb 2): -zero 3 over NCCL logs -zero 1's losses and
//   norms bit for bit (each element summed over the ranks in the same order, the gathered
//   weights the owners' bits); its step-2 checkpoint resumes under -zero 1 bit for bit and as
//   1x1x1 within the layout tolerance (1e-2);
//   2 to 6 micro-batches per rank (the ramp): -zero 2 over NCCL and -zero 3 over MPI (zero.h's
//   host bucket collectives) bit for bit;
//   -grad-reduce bf16: ZeRO-1 over NCCL (the device's bf16 ncclReduce) and -zero 3 over MPI
//   (zero.h's host rounding, train_gpt.c's emulation) bit for bit, and not the fp32 numbers.
// The -zero 3 -sp -vpp and zb-h1 layouts against the CPU trainer are in test_layouts.
static void test_zero_levels(void) {
    const char* CU = bin_cu();
    const char* nv = getenv("LLMC_TEST_NCCL_LAYOUTS");
    if (!(nv && strcmp(nv, "1") == 0) || system("command -v mpirun > /dev/null 2>&1") != 0) {
        printf("note: -zero 2/3 tests need mpirun and LLMC_TEST_NCCL_LAYOUTS=1 (GPUs per rank, or the emulation)\n");
        return;
    }
    char tmp[] = "/tmp/llmc_cu_zeroXXXXXX";
    char data[1200], base[3000], cmd[4000], err[4096], path[1400];
    pattern_tmpdir(tmp, data, sizeof(data), 40000);
    snprintf(base, sizeof(base),
             "-L 4 -H 64 -heads 4 -seq 32 -V 300 -vpad 128 -mb 1 -lr 2e-3 -warmup 2000 -decay 8000 -tokens 1e9 -i %s "
             "-j '' -shuffle 1 -seed 7 -threads 1 -steps 4",
             data);
    const char* envx = getenv("CUEMU_DEVICES") ? "-x CUEMU_DEVICES" : "";
    const char* M1 = "-gb 2 -ramp off";
    const char* RAMP = "-gb 16 -ramp 4 4 768";
    // {flags, batch, log (relative to tmp)}: 2 ranks; a log under an -o directory is its log.jsonl
    struct {
        const char* flags;
        const char* batch;
        const char* log;
    } R[] = {
        {"-zero 1 -comm nccl", M1, "z1.jsonl"},
        {"-zero 3 -comm nccl -o %s/z3 -ckpt-every 2", M1, "z3/log.jsonl"},
        {"-zero 2 -comm nccl", RAMP, "r2.jsonl"},
        {"-zero 3 -comm mpi", RAMP, "r3.jsonl"},
        {"-zero 1 -comm nccl -grad-reduce bf16", M1, "b1.jsonl"},
        {"-zero 3 -comm mpi -grad-reduce bf16", M1, "b3.jsonl"},
    };
    RunLog rl[6];
    int rc[6];
    for (int i = 0; i < 6; i++) {
        char flags[1600], logflag[1500] = "";
        snprintf(flags, sizeof(flags), R[i].flags, tmp);
        if (strstr(R[i].flags, "-o ") == NULL) snprintf(logflag, sizeof(logflag), "-log %s/%s", tmp, R[i].log);
        snprintf(cmd, sizeof(cmd),
                 "CUEMU_STREAM_RACES=0 timeout 600 mpirun --oversubscribe --allow-run-as-root %s -x CUEMU_STREAM_RACES "
                 "-np 2 %s %s %s -dp 2 %s %s",
                 envx, CU, base, R[i].batch, flags, logflag);
        rc[i] = run_cmd(cmd, err, sizeof(err));
        snprintf(path, sizeof(path), "%s/%s", tmp, R[i].log);
        if (rc[i] != 0 || read_runlog(path, &rl[i]) != 0 || rl[i].n != 4) {
            rl[i].n = 0;
            printf("      %s: rc %d, %s\n", R[i].flags, rc[i], err);
        }
    }
    // a and b log the same 4 steps: losses and norms bit for bit (from step s0)
    struct {
        int a, b;
        const char* what;
    } S[] = {
        {0, 1, "-zero 3 equals -zero 1 (one micro-batch per rank)"},
        {2, 3, "-zero 2 over NCCL equals -zero 3 over MPI (2-6 micro-batches per rank)"},
        {4, 5, "-grad-reduce bf16: ZeRO-1's bf16 ncclReduce equals -zero 3's host emulation over MPI"},
    };
    for (int k = 0; k < 3; k++) {
        const RunLog *a = &rl[S[k].a], *b = &rl[S[k].b];
        int same = a->n == 4 && b->n == 4;
        for (int st = 1; same && st <= 4; st++)
            if (a->loss[st] != b->loss[st] || a->gnorm[st] != b->gnorm[st]) same = 0;
        check(same, "train_gpt_cu 1x1x2: %s, 4 steps bit for bit (step 4 loss %.9g, %.9g)", S[k].what, a->loss[4],
              b->loss[4]);
    }
    int differs = 0;
    for (int st = 1; st <= 4; st++) differs |= rl[4].gnorm[st] != rl[0].gnorm[st];
    differs = differs && rl[4].n == 4 && rl[0].n == 4;
    check(differs, "  ... and -grad-reduce bf16 changes the norms (step 1 gnorm %.9g vs fp32 %.9g)", rl[4].gnorm[1],
          rl[0].gnorm[1]);
    // the -zero 3 checkpoint of step 2 (the same files as -zero 1's: zero.h) resumed
    for (int one = 0; one < 2; one++) {
        const char* dir = one ? "r111" : "r1";
        snprintf(cmd, sizeof(cmd), "mkdir -p %s/%s && cp -r %s/z3/ckpt_00000002 %s/%s/", tmp, dir, tmp, tmp, dir);
        int rcp = run_cmd(cmd, err, sizeof(err));
        if (one)
            snprintf(cmd, sizeof(cmd), "timeout 600 %s %s %s -o %s/%s -resume", CU, base, M1, tmp, dir);
        else
            snprintf(cmd, sizeof(cmd),
                     "CUEMU_STREAM_RACES=0 timeout 600 mpirun --oversubscribe --allow-run-as-root %s -x "
                     "CUEMU_STREAM_RACES -np 2 %s %s %s -dp 2 -zero 1 -comm nccl -o %s/%s -resume",
                     envx, CU, base, M1, tmp, dir);
        int rr = rcp == 0 ? run_cmd(cmd, err, sizeof(err)) : rcp;
        RunLog x;
        snprintf(path, sizeof(path), "%s/%s/log.jsonl", tmp, dir);
        int ok = rr == 0 && read_runlog(path, &x) == 0 && x.n == 4 && x.loss[2] == 0.0 && rl[0].n == 4;
        double worst = ok ? runlog_worst_loss(&x, &rl[0], 3, 4) : INFINITY;
        int bits = ok;
        for (int st = 3; ok && st <= 4; st++)
            if (x.loss[st] != rl[0].loss[st] || x.gnorm[st] != rl[0].gnorm[st]) bits = 0;
        if (one)
            check(ok && worst <= 1e-2,
                  "a -zero 3 checkpoint (step 2) resumes as 1x1x1: steps 3-4 worst loss rel %.1e vs -zero 1 (rc %d)",
                  worst, rr);
        else
            check(bits, "a -zero 3 checkpoint (step 2) resumes under -zero 1: steps 3-4 bit for bit (rc %d)", rr);
    }
    snprintf(cmd, sizeof(cmd), "rm -rf %s", tmp);
    if (system(cmd) != 0) printf("note: could not remove %s\n", tmp);
}

// zero.h's bf16 rounding (-grad-reduce bf16's emulation, shared with train_gpt.c) against
// values worked by hand: round to nearest, ties to the even 7-bit mantissa, NaN kept; and
// a one-rank bucket reduction adds the rounded value to the fp32 shard
static void test_zero_bf16(void) {
    const float u = 1.0f / 128; // bf16's spacing above 1
    struct {
        float in;
        uint32_t want; // the bits
    } C[] = {
        {1.0f, 0x3F800000u},
        {1.0f + u / 2, 0x3F800000u},            // a tie: to the even mantissa (1)
        {1.0f + 3 * u / 2, 0x3F820000u},        // a tie: to the even mantissa (1 + 2u)
        {1.0f + u / 2 + u / 4096, 0x3F810000u}, // just above the tie: 1 + u
        {-2.5f, 0xC0200000u},                   // exact
        {3.0e38f, 0x7F620000u},                 // 0x7F61B1E6: the low half above 0x8000, up
        {1e-40f, 0x00010000u},                  // a denormal, 0x000116C2: down, kept denormal
    };
    int ok = 1;
    for (size_t i = 0; i < sizeof(C) / sizeof(C[0]); i++) {
        float got = zero_bf16(C[i].in);
        uint32_t gb;
        memcpy(&gb, &got, 4);
        if (gb != C[i].want) {
            ok = 0;
            printf("      zero_bf16(%.9g) = %.9g (0x%08x), want 0x%08x\n", C[i].in, got, gb, C[i].want);
        }
    }
    ok = ok && isnan(zero_bf16(NAN)) && isinf(zero_bf16(INFINITY));
    // one rank: shard += bf16(src) over a bucket of two segments
    Comm c;
    comm_init_single(&c);
    ZeroComm z;
    memset(&z, 0, sizeof(z));
    z.bf16 = 1;
    ZeroBucket b;
    memset(&b, 0, sizeof(b));
    b.nseg = 2;
    b.flat[0] = 1, b.loc[0] = 0, b.n[0] = 2;
    b.flat[1] = 4, b.loc[1] = 2, b.n[1] = 1;
    b.numel = 3;
    float src[3] = {1.0f + u / 2, 1.0f + 3 * u / 2, -2.5f}, shard[5] = {0.5f, 0.5f, 0.5f, 0.5f, 0.5f};
    dp_reduce_scatter_bucket(&c, &z, &b, 5, src, shard);
    ok =
        ok && shard[0] == 0.5f && shard[1] == 1.5f && shard[2] == 1.5f + 2 * u && shard[3] == 0.5f && shard[4] == -2.0f;
    zero_comm_free(&z);
    check(ok,
          "zero.h's bf16 rounding (-grad-reduce bf16's emulation) against hand-worked values, and a one-rank "
          "bucket adding it to the fp32 shard");
}

// Device memory per rank (the start-up table's "memory per rank"): what gpt_build allocates,
// counted by kind, equals memplan.h's mem_plan_cuda for every ZeRO level over DP 2 and 4 (each
// DP rank's shard), with TP 2 -sp on the last of two stages with -vpp 2 and zb-h1 stashes, naive
// and flash attention, -grad-reduce bf16 and both backends, with and without the overlapped
// reduction. And against the shapes by hand: -zero 3 keeps a 1/DP shard of the bf16 weights plus
// the rest whole and two layer windows; -zero 2 two layer scratches, the rest and a 1/DP shard
// of the fp32 gradients (256-byte granules).
static void test_zero_memory(void) {
    const char* prev = getenv("LLMC_ATTENTION");
    char saved[32] = "";
    if (prev) snprintf(saved, sizeof(saved), "%s", prev);
    cudaStream_t st;
    cudaCheck(cudaStreamCreate(&st));
    int n = 0, bad = 0;
    char worst[300] = "";
    for (int c = 0; c < 20; c++) {
        int zero = c % 4, DP = c < 8 || c >= 16 ? 2 : 4,
            big = (c / 4) % 2;    // big: TP 2 -sp, PP 2 last stage, -vpp 2, zb-h1
        int CP = c >= 16 ? 2 : 1; // -cp 2: the ring's buffers, ZeRO over CP x DP
        int naive = c % 3 == 0, bf = zero > 0 && c % 2 == 1, comm = c % 3, overlap = comm == 0;
        setenv("LLMC_ATTENTION", naive ? "naive" : "flash", 1);
        Config cfg;
        config_defaults(&cfg);
        cfg.L = 4;
        cfg.H = 64;
        cfg.heads = 4;
        cfg.seq = 32;
        cfg.mb = 2;
        cfg.V = 300;
        cfg.vpad = 128;
        cfg.Vp = 384;
        cfg.zero = zero;
        cfg.sp = big;
        cfg.vpp = big ? 2 : 1;
        snprintf(cfg.comm, sizeof(cfg.comm), "%s", comm == 2 ? "mpi" : "nccl");
        snprintf(cfg.grad_reduce, sizeof(cfg.grad_reduce), "%s", bf ? "bf16" : "fp32");
        Comm cm;
        comm_init_single(&cm);
        cm.TP = big ? 2 : 1;
        cm.tp = big ? 1 : 0;
        cm.PP = big ? 2 : 1;
        cm.pp = cm.PP - 1;
        cm.DP = DP;
        cm.dp = (c / 2) % 2 ? DP - 1 : 0;
        cfg.cp = CP;
        cm.CP = CP;
        cm.cp = CP - 1;
        cm.DPC = DP * CP;
        cm.dpc = cm.cp + CP * cm.dp;
        int nslots = big ? 3 : 1, ndgrad = big ? 3 : 2, nstash = big ? 2 : 0;
        GPT g;
        gpt_build(&g, &cfg, &cm, nslots, ndgrad, nstash, overlap, st);
        size_t plan[NUM_MEM];
        mem_plan_cuda(&cfg, cm.tp, cm.TP, cm.pp, cm.PP, cm.dpc, cm.DPC, nslots, ndgrad, nstash, g.attn == ATTN_NAIVE,
                      overlap, plan);
        n++;
        for (int k = 0; k < NUM_MEM; k++)
            if (plan[k] != g.mem[k]) {
                bad++;
                snprintf(worst, sizeof(worst),
                         "(zero %d DP %d dp %d CP %d big %d naive %d bf16 %d %s overlap %d: %s %zu vs %zu)", zero, DP,
                         cm.dp, CP, big, naive, bf, cfg.comm, overlap, MEM_NAMES[k], g.mem[k], plan[k]);
            }
        if (!big && DP * CP == 4 && zero >= 2) { // by hand from the shapes: TP 1, one stage, 4 CP x DP shards
            size_t C = 64, total = 384 * C + 32 * C + 4 * (12 * C * C + 13 * C) + 2 * C, per = (total + 3) / 4;
            size_t rest = 384 * C + 32 * C + 2 * C, layer = 12 * C * C + 13 * C;
            size_t want = zero == 3 ? mem_dev_bytes(2 * per) + mem_dev_bytes(2 * rest) + 2 * mem_dev_bytes(2 * layer)
                                    : mem_dev_bytes(2 * 4 * per);
            size_t wgrad = 2 * mem_dev_bytes(4 * layer) + mem_dev_bytes(4 * rest) + mem_dev_bytes(4 * per) +
                           (bf && comm < 2 ? mem_dev_bytes(2 * (rest > layer ? rest : layer)) : 0);
            n++;
            if (g.mem[MEM_PARAMS] != want || g.mem[MEM_GRADS] != wgrad) {
                bad++;
                snprintf(worst, sizeof(worst), "(zero %d CP x DP 4 by hand: params %zu vs %zu, grads %zu vs %zu)", zero,
                         g.mem[MEM_PARAMS], want, g.mem[MEM_GRADS], wgrad);
            }
        }
        gpt_free(&g);
    }
    check(bad == 0, "device memory per rank: gpt_build's count equals mem_plan_cuda in %d of %d cases %s", n - bad, n,
          worst);
    cudaCheck(cudaStreamDestroy(st));
    if (prev)
        setenv("LLMC_ATTENTION", saved, 1);
    else
        unsetenv("LLMC_ATTENTION");
}

// t_comm_ms / t_idle_ms count every NCCL call of a step: 5000 timed calls (more than the
// 4096 event pairs made at start-up), the last three of them (calls 4998-5000) 30 ms long
// each (a host sleep between the events on an idle stream), must add at least 90 ms.
static void test_comm_timers(void) {
    Comm comm;
    comm_init_single(&comm);
    cudaStream_t s;
    cudaCheck(cudaStreamCreate(&s));
    DevComm d;
    devcomm_init(&d, &comm, 1, s, 1); // nccl timing on; one process, so no communicator
    int cap0 = d.ev_cap;
    for (int step = 0; step < 2; step++) {
        comm.comm_ms = comm.idle_ms = 0;
        for (int i = 0; i < 5000; i++) {
            int k = dc_tic(&d);
            if (i >= 4997) usleep(30000);
            dc_toc(&d, k, i == 4999 ? 1 : 0); // the last counts as pipeline idle time
        }
        dc_collect_time(&d);
        check(comm.comm_ms >= 0.9 * 60 && comm.idle_ms >= 0.9 * 30 && comm.comm_ms + comm.idle_ms < 5000,
              "step %d: 5000 timed NCCL calls (pool %d -> %d pairs): comm %.1f ms (>= 54), idle %.1f ms (>= 27) from "
              "the last three",
              step + 1, cap0, d.ev_cap, comm.comm_ms, comm.idle_ms);
    }
    devcomm_free(&d);
    cudaCheck(cudaStreamDestroy(s));
}

// Rank-to-GPU choice with -comm nccl (emulation: CUEMU_DEVICES GPUs per node,
// CUDA_VISIBLE_DEVICES per rank): ranks that each see only their own GPU run; ranks whose
// choices are one GPU (one bus id, whatever its ordinal) are refused with one error line;
// -comm mpi shares a GPU. A real machine would need as many GPUs: emulation only.
static void test_device_choice(void) {
#if defined(CUEMU) && !defined(USE_MPI)
    printf("note: a build without MPI runs one process: device choice test skipped\n");
#elif defined(CUEMU)
    if (system("command -v mpirun > /dev/null 2>&1") != 0) {
        printf("note: mpirun not found: device choice test skipped\n");
        return;
    }
    const char* CU = bin_cu();
    char tmp[] = "/tmp/llmc_cu_devXXXXXX";
    char data[1200], wrap[1200], args[3000], cmd[4000], err[4096], path[1400];
    pattern_tmpdir(tmp, data, sizeof(data), 20000);
    // per-rank visible devices, as srun --gpus-per-task=1 sets them: rank r sees node GPU map[r]
    snprintf(wrap, sizeof(wrap), "%s/wrap.sh", tmp);
    FILE* f = fopen_check(wrap, "w");
    fprintf(f,
            "#!/bin/sh\nm=$1; shift\nexport CUDA_VISIBLE_DEVICES=$(echo $m | cut -d: -f$((OMPI_COMM_WORLD_LOCAL_RANK + "
            "1)))\nexec \"$@\"\n");
    fclose(f);
    snprintf(args, sizeof(args),
             "-L 2 -H 64 -heads 4 -seq 32 -V 300 -vpad 128 -mb 1 -gb 4 -ramp off -lr 2e-3 -warmup 2000 "
             "-decay 8000 -tokens 1e9 -i %s -j '' -shuffle 1 -seed 7 -threads 1 -steps 2 -dp 2",
             data);
    // {CUEMU_DEVICES, per-rank CUDA_VISIBLE_DEVICES (":" between ranks, "-" unset), comm, should run}
    struct {
        const char* ndev;
        const char* map;
        const char* comm;
        int runs;
        const char* what;
    } C[] = {
        {"8", "0:1", "nccl", 1, "each rank sees only its own GPU (visible 0 | 1)"},
        {"8", "5,2:2,5", "nccl", 0, "ranks see GPUs 5,2 | 2,5: local rank modulo picks GPU 5 twice"},
        {"8", "3:3", "nccl", 0, "both ranks see only GPU 3"},
        {"8", "3:6,3", "nccl", 0, "one GPU under two ordinals (3 | 6,3: rank 1 picks its device 1 = GPU 3)"},
        {"1", "-", "nccl", 0, "one GPU on the node, two ranks"},
        {"1", "-", "mpi", 1, "one GPU shared by two ranks with -comm mpi"},
    };
    RunLog logs[6];
    for (int i = 0; i < 6; i++) {
        char launch[1400] = ""; // sh wrap.sh MAP train_gpt_cu ...
        if (strcmp(C[i].map, "-") != 0) snprintf(launch, sizeof(launch), "sh %s %s", wrap, C[i].map);
        // (CUEMU_STREAM_RACES=0: -dp 2 over NCCL overlaps the DP buckets, see test_layouts)
        snprintf(cmd, sizeof(cmd),
                 "CUEMU_DEVICES=%s CUEMU_STREAM_RACES=0 timeout 300 mpirun --oversubscribe --allow-run-as-root -x "
                 "CUEMU_DEVICES -x CUEMU_STREAM_RACES -np 2 %s %s %s -comm %s -log %s/d%d.jsonl",
                 C[i].ndev, launch, CU, args, C[i].comm, tmp, i);
        int rc = run_cmd(cmd, err, sizeof(err));
        snprintf(path, sizeof(path), "%s/d%d.jsonl", tmp, i);
        int n = read_runlog(path, &logs[i]) == 0 ? logs[i].n : 0;
        if (C[i].runs) {
            check(rc == 0 && n == 2, "-comm %s, %s GPU(s) per node, %s: runs 2 steps (rc %d)", C[i].comm, C[i].ndev,
                  C[i].what, rc);
        } else {
            const char* e = strstr(err, "error: local ranks 0 and 1 of a node");
            int lines = 0;
            for (const char* q = err; (q = strstr(q, "error:")) != NULL; q++) lines++;
            check(rc != 0 && e != NULL && lines == 1 && strstr(err, "-comm mpi") != NULL,
                  "-comm %s, %s GPU(s) per node, %s: refused with one error line (rc %d)", C[i].comm, C[i].ndev,
                  C[i].what, rc);
        }
    }
    double wl = 1;
    if (logs[0].n == 2 && logs[5].n == 2)
        wl = fmax(rel_err(logs[0].loss[1], logs[5].loss[1]), rel_err(logs[0].loss[2], logs[5].loss[2]));
    check(wl <= 1e-2, "one GPU per rank (nccl) and a shared GPU (mpi) train alike (loss rel %.1e)", wl);
    snprintf(cmd, sizeof(cmd), "rm -rf %s", tmp);
    if (system(cmd) != 0) printf("note: could not remove %s\n", tmp);
#else
    printf(
        "note: the rank-to-GPU choice test needs several GPUs per node: run in the emulation (make cuda-emu-test)\n");
#endif
}

int main(int argc, char** argv) {
#ifdef CUEMU
    // the emulated train_gpt_cu is a link to this binary: the trainer, compiled once for both (dev/cuda/cuda.mk)
    const char* self = strrchr(argv[0], '/');
    if (strcmp(self ? self + 1 : argv[0], "train_gpt_cu") == 0) return trainer_main(argc, argv);
#endif
    const char* dir = argc > 1 ? argv[1] : "fixtures";
    int ndev = 0;
    if (cudaGetDeviceCount(&ndev) != cudaSuccess || ndev == 0) {
        printf("no CUDA device: the GPU tests did not run (build-only machine)\n0 passed, 0 failed\n");
        return 2;
    }
    Fixture fx;
    if (fixture_open(&fx, dir) == 0) {
        test_fixture_forward_backward(&fx, dir);
        test_fixture_steps(&fx, dir);
        test_recompute(&fx, dir);
        test_attention_paths(&fx, dir);
        test_resume_bitwise(&fx, dir);
    }
    test_comm_timers();
    test_act_memory();
    test_zero_memory();
    test_zero_bf16();
    if (!(argc > 2 && strcmp(argv[2], "--no-binaries") == 0)) {
        test_binaries();
        test_layouts();
        test_zero_levels();
        test_device_choice();
    }
    return test_summary();
}
