/*
 * tests/test_planner.c: checks of the layout planner (llmc/planner/planner.h): the paper's three
 * measured Selene points, the 530B memory fit, the interconnect-aware recommendation,
 * the scaling report, each model term against a value computed by hand, and the terms of
 * sequence parallelism, selective recomputation and the interleaved schedule (Korthikanti
 * et al. 2022 per-layer bytes, the (PP-1)/(V m) bubble, model vs hardware FLOPs), and the
 * pipeline schedules (1F1B, interleaved and ZB-H1 bubbles against hand formulas and a small
 * event simulation, ZB-H1's memory, the schedule search).
 *   gcc -O2 -std=c11 -Wall -Wextra -Werror tests/test_planner.c -lm -o test_planner && ./test_planner
 * Also a small CLI for trying the planner without the trainer:
 *   ./test_planner --plan -model 530b -gb 1920 -mb 1 -cluster selene-a100 -nodes 280 [planner flags]
 *   (-recompute 0/1/2 = none/full/selective, -sp 0/1, -vpp V as integers)
 */
#include "../llmc/planner/planner.h"
#include "common.h"

static double relerr(double got, double want) { return fabs(got - want) / fabs(want); }
/* equal to within a relative 1e-9 (hand-computed values are exact up to rounding) */
static int same(double got, double want) { return relerr(got, want) < 1e-9; }

/* the shape term of the GEMM efficiency, x/(x + 64) per dimension (planner default) */
static double u64(double x) { return x / (x + 64.0); }

/* 530b on nodes selene-a100 nodes, global batch 1920, micro-batch 1; the rest searched */
static PlanRequest request_530b(int nodes) {
    PlanRequest r;
    plan_request_init(&r);
    plan_model_preset("530b", &r.model);
    r.nodes = nodes;
    r.gb = 1920;
    r.mb = 1;
    return r;
}

/* the paper's layout: TP 8, PP 35, full recompute, no ZeRO, SP or interleaving */
static PlanRequest paper_request(int nodes) {
    PlanRequest r = request_530b(nodes);
    r.tp = 8;
    r.pp = 35;
    r.recompute = 1;
    r.zero = 0;
    r.sp = 0;
    r.vpp = 1;
    return r;
}

/* the terms' inputs: the 530b model on selene-a100 with the default constants */
static void paper_setup(PlanModel* m, Cluster* c, PlanConsts* k) {
    plan_model_preset("530b", m);
    cluster_preset("selene-a100", c);
    *k = plan_default_consts();
}

static void eval_request(const PlanRequest* r, PlanRow* row) {
    Cluster c;
    plan_request_cluster(r, &c);
    PlanLayout l;
    memset(&l, 0, sizeof(l));
    l.tp = r->tp;
    l.pp = r->pp;
    l.mb = r->mb;
    l.recompute = r->recompute;
    l.zero = r->zero;
    l.sp = r->sp > 0;
    l.vpp = r->vpp > 0 ? r->vpp : 1;
    l.sched = PLAN_SCHED_1F1B; /* was left unset: it read whatever the stack held */
    l.dp = r->nodes * c.gpus_per_node / (r->tp * r->pp);
    plan_evaluate(&r->model, &c, &r->k, r->nodes, r->gb, &l, row);
}

/* plan_run with its tables to /dev/null and its CSV to path: the return code, and the CSV's
 * line count in *lines (the file is removed) */
static int plan_run_csv(PlanRequest* r, const char* path, int* lines) {
    r->csv_path = path;
    FILE* devnull = fopen("/dev/null", "w");
    int rc = plan_run(r, devnull);
    fclose(devnull);
    r->csv_path = NULL;
    FILE* f = fopen(path, "r");
    char buf[1024];
    *lines = 0;
    while (f && fgets(buf, sizeof(buf), f)) (*lines)++;
    if (f) fclose(f);
    remove(path);
    return rc;
}

/* the 1F1B pipeline's stage slots (forward + backward + recompute, all four parts) over the
 * PP stages: their sum and the slowest */
static void slot_sum_max(const PlanModel* m, const Cluster* c, const PlanConsts* k, const PlanLayout* l, double* sum,
                         double* mx) {
    PlanSlot sl;
    *sum = 0;
    *mx = 0;
    for (int j = 0; j < l->pp; j++) {
        plan_slot(m, c, k, l, j, 0, 1, &sl);
        double x = sl.gemm + sl.mem + sl.tp + sl.pp;
        *sum += x;
        if (x > *mx) *mx = x;
    }
}

/* ---------------------------------------------------------------------------------- */

static void test_paper_points(void) {
    const int nodes[3] = {280, 350, 420};
    const double t_meas[3] = {60.1, 50.2, 44.4}, tf_meas[3] = {126, 121, 113};
    const double tf_formula[3] = {125.7, 120.4, 113.5};
    PlanModel m;
    plan_model_preset("530b", &m);
    for (int i = 0; i < 3; i++) {
        /* the formula itself, fed the measured times */
        double tf = plan_tflops_per_gpu(&m, 1920, 1, t_meas[i], nodes[i] * 8);
        check(fabs(tf - tf_formula[i]) < 0.05,
              "paper formula, f=4, %d nodes, measured %.1f s -> %.2f TFLOP/s (want %.1f)", nodes[i], t_meas[i], tf,
              tf_formula[i]);
    }
    for (int z = 0; z <= 1; z++) {
        for (int i = 0; i < 3; i++) {
            PlanRequest r = paper_request(nodes[i]);
            r.zero = z;
            PlanRow w;
            eval_request(&r, &w);
            double et = relerr(w.time.iter_s, t_meas[i]), ef = relerr(w.time.tflops, tf_meas[i]);
            check(w.feasible && et < 0.05,
                  "530b TP8 PP35 DP%d mb1 rc1 zero%d on %d selene-a100 nodes: %.2f s/iter, paper %.1f (err %.1f%%)",
                  w.lay.dp, z, nodes[i], w.time.iter_s, t_meas[i], 100 * et);
            check(
                w.feasible && ef < 0.05,
                "530b TP8 PP35 DP%d mb1 rc1 zero%d on %d selene-a100 nodes: %.1f TFLOP/s/GPU, paper %.0f (err %.1f%%)",
                w.lay.dp, z, nodes[i], w.time.tflops, tf_meas[i], 100 * ef);
        }
    }
}

static void test_memory_530b(void) {
    PlanRequest r = paper_request(280);
    PlanRow w;
    eval_request(&r, &w);
    double gib = w.mem.total / 1073741824.0;
    check(w.feasible && gib < 80.0, "530b TP8 PP35 DP8 mb1 recompute fits in 80 GiB: %.1f GiB on stage %d", gib,
          w.mem.stage);
    r.recompute = 0;
    eval_request(&r, &w);
    check(!w.feasible && w.kind == 1, "530b TP8 PP35 DP8 mb1 without recompute or ZeRO does not fit: %.1f GiB (%s)",
          w.mem.total / 1073741824.0, w.why);
}

static void test_recommendation(void) {
    PlanRequest r = request_530b(280); /* layout, recompute and ZeRO searched */
    r.sp = 0;
    r.vpp = 1;
    r.sched_mask = PLAN_SB_1F1B; /* the paper's techniques only (SP and the schedules are checked below) */
    Cluster c;
    plan_request_cluster(&r, &c);
    PlanRow best;
    int ok = plan_recommend(&r, &c, 280, &best);
    check(ok == 0 && !best.tp_inter && best.lay.tp <= c.gpus_per_node,
          "R1: recommended layout for 530b on 280 selene-a100 nodes keeps TP inside a node: TP %d PP %d DP %d rc %d z "
          "%d, %.1f s",
          best.lay.tp, best.lay.pp, best.lay.dp, best.lay.recompute, best.lay.zero, best.time.iter_s);
    check(best.mem.total <= 0.9 * 80 * 1073741824.0, "recommendation leaves 10%% of the GPU free: %.1f GiB",
          best.mem.total / 1073741824.0);
    PlanLayout tl = {.tp = 8, .pp = 35, .dp = 8, .mb = 1, .recompute = 0, .zero = 1, .sp = 0, .vpp = 1};
    PlanRow tight;
    plan_evaluate(&r.model, &c, &r.k, 280, r.gb, &tl, &tight);
    check(tight.feasible && tight.time.iter_s < best.time.iter_s && tight.mem.total > 0.9 * 80 * 1073741824.0,
          "a faster layout that fits with < 10%% free (TP8 PP35 no recompute, ZeRO-1: %.1f GiB, %.1f s) is not "
          "recommended",
          tight.mem.total / 1073741824.0, tight.time.iter_s);
    /* a layout forcing TP across nodes is slower than the recommendation */
    PlanLayout l = best.lay;
    PlanRow w;
    l.tp = 16;
    l.dp = 280 * 8 / (16 * l.pp);
    plan_evaluate(&r.model, &c, &r.k, 280, r.gb, &l, &w);
    check(w.tp_inter && w.time.iter_s > best.time.iter_s * 1.2,
          "R1: TP 16 (across nodes) predicted slower: %.1f s vs %.1f s", w.time.iter_s, best.time.iter_s);
    /* with SP, selective, V and the schedule searched too the recommendation uses SP and is faster */
    r.sp = -1;
    r.vpp = 0;
    r.recompute = -1;
    r.sched_mask = 0;
    PlanRow best2;
    ok = plan_recommend(&r, &c, 280, &best2);
    check(ok == 0 && best2.lay.sp == 1 && best2.time.iter_s < best.time.iter_s * 0.97,
          "searching SP/selective/V/schedule: recommended TP %d PP %d sp %d rc %d V %d %s, %.1f s (without: %.1f s)",
          best2.lay.tp, best2.lay.pp, best2.lay.sp, best2.lay.recompute, best2.lay.vpp, plan_sched_name(&best2.lay),
          best2.time.iter_s, best.time.iter_s);
}

static void test_scaling(void) {
    const int nodes[4] = {280, 350, 420, 560};
    double prev = 1e9;
    int falling = 1;
    for (int i = 0; i < 4; i++) {
        PlanRequest r = paper_request(nodes[i]);
        PlanRow w;
        eval_request(&r, &w);
        if (!(w.time.tflops < prev)) falling = 0;
        prev = w.time.tflops;
    }
    check(falling, "R4: per-GPU TFLOP/s falls from 280 to 350 to 420 to 560 nodes at global batch 1920");
    PlanRequest r = paper_request(0); /* no -nodes: the scaling report's node counts */
    plan_parse_flag(&r, "-scaling", "280,350,420,560");
    int lines = 0;
    int rc = plan_run_csv(&r, "test_planner_scaling.tmp.csv", &lines);
    check(rc == 0 && lines == 5,
          "scaling report over 4 node counts returns 0 and writes a CSV of header + 4 rows (%d lines)", lines);
    /* the same family with SP + selective: every node count faster than with full recompute */
    int faster = 1;
    for (int i = 0; i < 3; i++) {
        PlanRequest a = paper_request(nodes[i]), b = paper_request(nodes[i]);
        b.sp = 1;
        b.recompute = PLAN_RC_SELECTIVE;
        PlanRow wa, wb;
        eval_request(&a, &wa);
        eval_request(&b, &wb);
        if (!(wb.feasible && wb.time.iter_s < 0.8 * wa.time.iter_s && wb.time.mfu > wa.time.mfu)) faster = 0;
    }
    check(faster,
          "TP8 PP35 with SP + selective: > 20%% faster than full recompute on 280, 350, 420 nodes, higher MFU, fits");
}

static void test_presets_and_flags(void) {
    Cluster c;
    int ok = cluster_preset("selene-a100", &c) == 0 && c.gpus_per_node == 8 && c.peak_tflops == 312 && c.mem_gb == 80 &&
             c.intra_gbps == 300 && c.inter_gbps == 25;
    check(ok,
          "selene-a100 preset: 8 GPUs/node, 312 TFLOP/s, 80 GiB, NVSwitch 600 GB/s bidir (300/dir), 8x200 Gb/s HDR = "
          "25 GB/s/GPU");
    check(cluster_preset("h100", &c) == 0 && c.peak_tflops == 989 && c.inter_gbps == 50,
          "h100 preset: 989 TFLOP/s, 400 Gb/s NDR per GPU");
    check(cluster_preset("h200", &c) == 0 && c.mem_gb == 140 && c.hbm_gbps == 4800, "h200 preset: 140 GiB, 4.8 TB/s");
    check(cluster_preset("tpu", &c) == -1, "unknown cluster preset -> -1");
    PlanModel m;
    check(plan_model_preset("530b", &m) == 0 && m.L == 105 && m.H == 20480 && m.heads == 128 && m.seq == 2048 &&
              m.V == 51200,
          "530b model preset: 105 x 20480, 128 heads, seq 2048, V 51200");

    PlanRequest r;
    plan_request_init(&r);
    int a = plan_parse_flag(&r, "-peak", "500");
    int b = plan_parse_flag(&r, "-cluster", "h100");
    plan_request_cluster(&r, &c);
    check(a == 1 && b == 1 && c.peak_tflops == 500 && c.inter_gbps == 50,
          "-peak before -cluster still overrides the preset (%.0f)", c.peak_tflops);
    check(plan_parse_flag(&r, "-nodes", "350") == 1 && r.nodes == 350, "-nodes 350 parsed");
    char e[PLAN_ERR_LEN]; /* the _err variant keeps the expected messages off stderr */
    check(plan_parse_flag_err(&r, "-nodes", "0", e, sizeof(e)) == -1 &&
              plan_parse_flag_err(&r, "-bw-inter", "x", e, sizeof(e)) == -1 &&
              plan_parse_flag_err(&r, "-cluster", "nope", e, sizeof(e)) == -1 &&
              plan_parse_flag_err(&r, "-scaling", "280,,350", e, sizeof(e)) == -1 &&
              plan_parse_flag_err(&r, "-plan-eff", "1.5", e, sizeof(e)) == -1 && strstr(e, "-plan-eff") != NULL,
          "bad values rejected with a message (-nodes 0, -bw-inter x, -cluster nope, -scaling 280,,350, -plan-eff "
          "1.5): %s",
          e);
    check(plan_parse_flag(&r, "-lr", "1") == 0, "non-planner flag -> 0 (not ours)");
    check(plan_parse_flag(&r, "-scaling", "280,350,420,560") == 1 && r.scaling_n == 4 && r.scaling_nodes[3] == 560,
          "-scaling list parsed");
    plan_parse_flag(&r, "-gpus-per-node", "4");
    plan_parse_flag(&r, "-gpu-mem", "40");
    plan_parse_flag(&r, "-bw-intra", "100");
    plan_parse_flag(&r, "-latency", "7");
    plan_parse_flag(&r, "-bw-hbm", "1000");
    plan_request_cluster(&r, &c);
    check(c.gpus_per_node == 4 && c.mem_gb == 40 && c.intra_gbps == 100 && c.latency_us == 7 && c.hbm_gbps == 1000,
          "-gpus-per-node -gpu-mem -bw-intra -latency -bw-hbm override the preset");
    char* argv[4] = {(char*)"x", (char*)"-bw-inter", (char*)"12.5", (char*)"-bogus"};
    char err[PLAN_ERR_LEN];
    int i = 1;
    int rc1 = plan_config_flag(&r, 4, argv, &i, err);
    int i2 = 3;
    int rc2 = plan_config_flag(&r, 4, argv, &i2, err);
    check(rc1 == 1 && i == 2 && r.o_inter == 12.5 && rc2 == 0,
          "config.h adapter consumes flag + value and leaves unknown flags");
}

/* each term of the model against a value computed by hand */
static void test_terms(void) {
    PlanModel m;
    Cluster c;
    PlanConsts k;
    paper_setup(&m, &c, &k);
    /* parameters: 12*20480^2/8 + 7*20480/8 + 6*20480 = 629,145,600 + 17,920 + 122,880 */
    check(same(plan_layer_params_gpu(&m, 8), 629286400.0),
          "params of one 530b block on one of 8 TP ranks = 629,286,400");
    check(same(plan_stage_params(&m, 8, 35, 0), 2060874240.0),
          "530b stage 0 (3 blocks + V*H/8 + s*H) = 2,060,874,240 params/GPU");
    check(same(plan_stage_params(&m, 8, 35, 17), 1887859200.0),
          "530b middle stage (3 blocks) = 1,887,859,200 params/GPU");
    check(same(plan_stage_params(&m, 8, 35, 34), 2018972160.0),
          "530b last stage (3 blocks + 2H + V*H/8) = 2,018,972,160 params/GPU");
    check(same(plan_total_params(&m), 529600819200.0), "530b total parameters (tied head) = 529,600,819,200");
    /* activations: sbh = 2048*20480 = 41,943,040; 11 sbh + 2*128*2048^2/8 */
    check(same(plan_layer_act_bytes(&m, 8, 1), 595591168.0),
          "one 530b layer's activations, TP 8, mb 1 = 595,591,168 bytes");
    check(same(plan_layer_ckpt_bytes(&m, 1), 83886080.0),
          "one 530b layer's recompute checkpoint, mb 1 = 83,886,080 bytes");
    check(plan_inflight(35, 0, 240) == 35 && plan_inflight(35, 34, 240) == 1 && plan_inflight(35, 0, 2) == 2,
          "1F1B in-flight micro-batches: min(PP - stage, m)");
    /* memory of stage 0, TP8 PP35 DP8 mb1, recompute, no ZeRO */
    PlanLayout l = {.tp = 8, .pp = 35, .dp = 8, .mb = 1, .recompute = 1, .zero = 0, .sp = 0, .vpp = 1};
    PlanMem mem;
    plan_memory_stage(&m, &k, &l, 240, 0, &mem);
    double P0 = 2060874240.0;
    double act = 35.0 * 3 * 83886080.0 + 595591168.0;
    double extra = 12.0 * 41943040.0 + 4.0 * 2048 * 35;
    double total = 18.0 * P0 + act + extra + 2.0 * 1073741824.0;
    check(same(mem.weights, 2 * P0) && same(mem.grads, 4 * P0) && same(mem.optim, 12 * P0) && same(mem.act, act) &&
              same(mem.extra, extra) && same(mem.total, total),
          "stage-0 memory = 18 B/param + 105 checkpoints + 1 layer + buffers + 2 GiB = %.3f GiB", total / 1073741824.0);
    l.zero = 1;
    plan_memory_stage(&m, &k, &l, 240, 0, &mem);
    check(same(mem.optim, 12 * P0 / 8), "ZeRO-1 shards master + moments over DP 8: 1.5 B/param");
    l.zero = 0;
    /* the last stage holds logits of one micro-batch: 2048*51200/8 * 6 bytes + 4 sbh more */
    plan_memory_stage(&m, &k, &l, 240, 34, &mem);
    check(same(mem.extra, 12.0 * 41943040.0 + 2048.0 * 51200 / 8 * 6 + 4.0 * 41943040.0) &&
              same(mem.act, 1.0 * 3 * 83886080.0 + 595591168.0),
          "last-stage memory: 1 in-flight micro-batch, logits 6 B x b*s*V/TP");

    /* communication primitives */
    check(same(plan_ring_allreduce_s(1e9, 8, 100, 0), 0.0175),
          "ring all-reduce 1 GB over 8 at 100 GB/s = 2*7/8*10 ms = 17.5 ms");
    check(same(plan_ring_allreduce_s(1e9, 8, 100, 5), 0.0175 + 14 * 5e-6),
          "ring all-reduce latency: 2(n-1) steps of 5 us");
    check(same(plan_reduce_scatter_s(1e9, 8, 100, 5), 0.00875 + 7 * 5e-6), "ring reduce-scatter = half an all-reduce");
    check(plan_ring_allreduce_s(1e9, 1, 100, 5) == 0.0, "all-reduce over one rank costs nothing");
    check(same(plan_p2p_s(1e9, 25, 5), 0.04 + 5e-6), "p2p 1 GB at 25 GB/s + 5 us = 40.005 ms");
    /* GEMM roofline: 8192^3 compute bound; a matrix-vector product memory bound */
    check(same(plan_gemm_s(8192, 8192, 8192, 1, &c, &k),
               2.0 * 8192.0 * 8192 * 8192 / (0.57 * pow(8192.0 / 8256, 3) * 312e12)),
          "GEMM 8192^3 at 0.57 x (8192/8256)^3 x 312 TFLOP/s");
    check(same(plan_gemm_s(2048, 2048, 160, 16, &c, &k),
               2.0 * 2048 * 2048 * 160 * 16 / (0.57 * u64(2048) * u64(2048) * (160.0 / 224) * 312e12)),
          "attention GEMM 2048x2048x160 runs at 160/224 of a large GEMM's efficiency (shape term)");
    check(same(plan_gemm_s(1, 8192, 8192, 1, &c, &k), 2.0 * (8192.0 + 8192.0 * 8192 + 8192) / (0.8 * 2039e9)),
          "GEMM 1x8192x8192 is memory bound: bytes / (0.8 x 2039 GB/s)");
    /* one 530b layer forward on TP 8: all six GEMMs are compute bound */
    double g, mm;
    plan_layer_fwd(&m, 8, 1, &c, &k, &g, &mm);
    double s = 2048, H = 20480, sbh = s * H;
    /* six GEMMs, each at 0.57 x its shape term: QKV 2048x7680x20480, QK^T and att V
     * 2048x2048x160 (x 16 local heads), proj 2048x20480x2560, fc1 2048x10240x20480,
     * fc2 2048x20480x10240 */
    double pk = 0.57 * 312e12;
    double gw = 2.0 * s * 7680 * H / (pk * u64(s) * u64(7680) * u64(H)) +
                2 * (2.0 * s * s * 160 * 16 / (pk * u64(s) * u64(s) * u64(160))) +
                2.0 * s * H * 2560 / (pk * u64(s) * u64(H) * u64(2560)) +
                2.0 * s * 10240 * H / (pk * u64(s) * u64(10240) * u64(H)) +
                2.0 * s * H * 10240 / (pk * u64(s) * u64(H) * u64(10240));
    check(same(g, gw),
          "530b layer forward GEMMs: (24bsH^2 + 4bs^2H)/TP FLOPs, each GEMM at its shape's efficiency = %.2f ms",
          1e3 * g);
    check(same(mm, (20.0 * sbh + 32.0 * sbh / 8 + 4.0 * 128 * s * s / 8) / (0.8 * 2039e9)),
          "530b layer forward memory-bound traffic 20sbh + 32sbh/TP + 4as^2b/TP = %.2f ms", 1e3 * mm);

    /* placement: rank = tp + TP*dp + TP*DP*pp, 8 GPUs per node */
    check(plan_group_crosses_node(0, 1, 8, 8) == 0 && plan_group_crosses_node(8, 1, 16, 8) == 1 &&
              plan_group_crosses_node(4, 1, 8, 8) == 1 && plan_group_crosses_node(3, 64, 1, 8) == 0,
          "group spans nodes iff its first and last rank are on different nodes");
    int ti, pi, di;
    plan_links(&l, 8, &ti, &pi, &di);
    check(!ti && pi && di, "TP8 PP35 DP8 on 8-GPU nodes: TP inside a node, PP and DP across");
    PlanLayout l2 = l;
    l2.tp = 2;
    l2.dp = 4;
    l2.pp = 35;
    plan_links(&l2, 8, &ti, &pi, &di);
    check(!ti && pi && !di, "TP2 DP4 PP35: TP and DP inside a node, PP across");
    l2.tp = 16;
    l2.dp = 4;
    plan_links(&l2, 8, &ti, &pi, &di);
    check(ti, "TP16 on 8-GPU nodes crosses nodes");

    /* slot: TP all-reduces per slot on a middle stage = 3 layers x (4 + 2 recompute) */
    PlanSlot sl;
    plan_slot(&m, &c, &k, &l, 17, 0, 1, &sl);
    double ar = plan_ring_allreduce_s(2 * sbh, 8, 300 * k.net_eff, 2.0);
    check(same(sl.tp, 18 * ar), "middle-stage TP comm = 18 all-reduces of b*s*H bf16 on NVSwitch = %.2f ms",
          1e3 * sl.tp);
    check(same(sl.pp, 2 * plan_p2p_s(2 * sbh, 25 * k.net_eff, 5.0)),
          "middle-stage PP comm = 2 transfers of b*s*H bf16 on IB = %.2f ms", 1e3 * sl.pp);
    check(same(sl.gemm, 3 * 4 * g) && same(sl.mem, 3 * 4 * mm),
          "middle-stage compute = 3 layers x 4 passes (fwd, bwd 2x, recompute)");
    plan_slot(&m, &c, &k, &l, 34, 0, 1, &sl);
    double head = 2.0 * s * (51200.0 / 8) * H / (pk * u64(s) * u64(6400) * u64(H));
    check(same(sl.gemm, 3 * 4 * g + 3 * head) && sl.pp < 0.51 * 2 * plan_p2p_s(2 * sbh, 25 * k.net_eff, 5.0),
          "last stage adds the LM-head GEMM 2bsHV/TP x 3 (not recomputed, %.1f ms) and has one p2p per slot",
          3e3 * head);
    /* iteration: 1F1B sum + (m-1) max, DP all-reduce, optimizer */
    PlanTime t;
    plan_time(&m, &c, &k, &l, 1920, &t);
    double sum, mx;
    slot_sum_max(&m, &c, &k, &l, &sum, &mx);
    check(t.m == 240 && same(t.pipe_s, sum + 239 * mx) && same(t.bubble_s, sum - mx),
          "1F1B: pipeline = sum of stage slots + (m-1) x slowest, bubble %.2f s (%.1f%%)", t.bubble_s,
          100 * t.bubble_s / t.iter_s);
    plan_slot(&m, &c, &k, &l, 17, 0, 1, &sl);
    double tmid = sl.gemm + sl.mem + sl.tp + sl.pp;
    check(t.bubble_s > 34 * tmid * 0.99 && t.bubble_s < 34 * mx,
          "bubble between (PP-1) x middle slot and (PP-1) x slowest slot");
    check(same(t.dp_s, plan_ring_allreduce_s(4 * P0, 8, 25 * k.net_eff, 5.0)),
          "DP = fp32 all-reduce of stage-0 gradients over IB = %.3f s", t.dp_s);
    check(same(t.opt_s, 38.0 * P0 / (0.8 * 2039e9)), "AdamW = 38 B/param over HBM = %.1f ms", 1e3 * t.opt_s);
    check(same(t.emb_s, plan_ring_allreduce_s(4.0 * 51200 * 20480 / 8, 2, 25 * k.net_eff, 5.0)),
          "tied-embedding all-reduce between 2 stages");
    check(same(t.iter_s, t.pipe_s + t.dp_s + t.emb_s + t.norm_s + t.opt_s) &&
              same(t.compute_s + t.comm_s + t.idle_s, t.iter_s),
          "iteration = pipeline + DP + embedding + norm + optimizer = compute + comm + idle");
    l.zero = 1;
    plan_time(&m, &c, &k, &l, 1920, &t);
    check(same(t.dp_s, plan_reduce_scatter_s(4 * P0, 8, 20, 5.0) + plan_reduce_scatter_s(2 * P0, 8, 20, 5.0)) &&
              same(t.opt_s, 38.0 * P0 / 8 / (0.8 * 2039e9)),
          "ZeRO-1: reduce-scatter fp32 grads + all-gather bf16 weights; optimizer on 1/DP");
    l.zero = 0;
    /* single GPU: no bubble, no communication */
    PlanModel tiny;
    plan_model_preset("tiny", &tiny);
    PlanLayout l1 = {.tp = 1, .pp = 1, .dp = 1, .mb = 8, .recompute = 0, .zero = 0, .sp = 0, .vpp = 1};
    plan_time(&tiny, &c, &k, &l1, 64, &t);
    check(t.m == 8 && t.bubble_s == 0 && t.comm_s == 0 && t.tflops > 0, "one GPU: m = 8, no bubble, no communication");

    /* constraints */
    char why[96];
    PlanLayout b = l;
    check(plan_check_layout(&m, 2240, 1920, &l, why, sizeof(why)) == 0,
          "530b TP8 PP35 DP8 mb1 gb1920 satisfies doc/spec.md section 3");
    b.tp = 5;
    b.pp = 7;
    b.dp = 64;
    plan_check_layout(&m, 2240, 1920, &b, why, sizeof(why));
    check(strstr(why, "heads") != NULL, "tp 5 rejected: %s", why);
    b = l;
    b.pp = 2;
    b.dp = 2240 / 16;
    check(plan_check_layout(&m, 2240, 1920, &b, why, sizeof(why)) == 3 && strstr(why, "layers") != NULL,
          "pp 2 rejected for 105 layers: %s", why);
    b = l;
    b.pp = 5;
    b.dp = 56;
    check(plan_check_layout(&m, 2240, 1920, &b, why, sizeof(why)) == 2, "mb 1 x dp 56 does not divide 1920: %s", why);
    b = l;
    b.dp = 9;
    check(plan_check_layout(&m, 2240, 1920, &b, why, sizeof(why)) == 3, "tp*pp*dp != world rejected: %s", why);
}

/* sequence parallelism, selective recomputation, interleaved 1F1B, model vs hardware FLOPs */
static void test_sp_recompute_vpp(void) {
    PlanModel m;
    Cluster c;
    PlanConsts k;
    paper_setup(&m, &c, &k);
    double s = 2048, H = 20480, sbh = s * H; /* 41,943,040 */
    /* Korthikanti et al. 2022 per layer, bf16, without dropout: SP sbh/t (32 + 2as/h)
     * = 5,242,880 x (32 + 25.6) = 301,989,888; selective drops 2as/h: 5,242,880 x 32 =
     * 167,772,160; full with SP keeps the 1/t input shard 2sbh/8 = 10,485,760 */
    check(same(plan_layer_keep_bytes(&m, 8, 1, 1, PLAN_RC_NONE), 301989888.0),
          "SP activations per 530b layer, TP 8 = sbh/t(32 + 2as/h) = 301,989,888 B");
    check(same(plan_layer_keep_bytes(&m, 8, 1, 1, PLAN_RC_SELECTIVE), 167772160.0),
          "SP + selective per layer = 32 sbh/t = 167,772,160 B");
    check(same(plan_layer_keep_bytes(&m, 8, 1, 0, PLAN_RC_SELECTIVE), 11.0 * sbh),
          "selective without SP = sbh(8 + 24/8) = 11 sbh");
    check(same(plan_layer_keep_bytes(&m, 8, 1, 1, PLAN_RC_FULL), 10485760.0) &&
              same(plan_layer_keep_bytes(&m, 8, 1, 0, PLAN_RC_NONE), 595591168.0),
          "full + SP keeps 2sbh/t = 10,485,760 B; none without SP = the old 595,591,168 B");
    /* stage 0 of TP8 PP35 mb1, SP + selective: 35 micro-batches x 3 layers x 167,772,160 +
     * one attention-probability buffer 2*128*2048^2/8 = 134,217,728 */
    PlanLayout l = {.tp = 8, .pp = 35, .dp = 8, .mb = 1, .recompute = PLAN_RC_SELECTIVE, .zero = 0, .sp = 1, .vpp = 1};
    PlanMem mem;
    plan_memory_stage(&m, &k, &l, 240, 0, &mem);
    check(same(mem.act, 105.0 * 167772160.0 + 134217728.0) && same(mem.extra, 12.0 * sbh / 8 + 4.0 * 2048 * 35),
          "stage-0 activations with SP + selective = 105 x 32sbh/t + one probability buffer = %.2f GiB",
          mem.act / 1073741824.0);
    /* interleaved in-flight bound: rank 0, PP 35, V 3: 2*34 + 2*35 + 1 = 139 units of 1 layer;
     * last rank: 0 + 70 + 1 = 71; plain 1F1B rank 0: 35 micro-batches x 3 layers = 105 */
    check(same(plan_inflight_layers(105, 35, 3, 0, 245), 139.0) &&
              same(plan_inflight_layers(105, 35, 3, 34, 245), 71.0) &&
              same(plan_inflight_layers(105, 35, 1, 0, 245), 105.0) &&
              same(plan_inflight_layers(105, 35, 3, 0, 2), 6.0),
          "interleaved in-flight layers: 139 (rank 0), 71 (last), 105 plain, V*m cap 6");
    /* FLOPs: model 72BsLH^2(1 + s/6H) + 4.5BsVH (paper, f = 3) = 1.269482e19 for gb 1920; full adds one forward
     * of the layers (= the paper's f = 4 formula); selective adds 4Bs^2LH = 6.926923e16 */
    double mf = plan_model_flops(&m, 1920);
    check(relerr(mf, 1.269482e19) < 1e-6, "530b model FLOPs per iteration, gb 1920 = 1.269482e19 (%.6e)", mf);
    check(same(plan_hw_flops(&m, 1920, PLAN_RC_FULL), plan_paper_flops(&m, 1920, 1)),
          "hardware FLOPs with full recompute = the paper's formula with f = 4");
    check(relerr(plan_hw_flops(&m, 1920, PLAN_RC_SELECTIVE) - mf, 6.926923e16) < 1e-6 &&
              plan_hw_flops(&m, 1920, PLAN_RC_NONE) == mf,
          "selective adds 4Bs^2LH = 6.926923e16 hardware FLOPs (%.2f%% of model), none adds nothing",
          100 * (plan_hw_flops(&m, 1920, PLAN_RC_SELECTIVE) / mf - 1));
    PlanTime t, t0;
    l.recompute = PLAN_RC_FULL;
    l.sp = 0;
    plan_time(&m, &c, &k, &l, 1920, &t);
    check(same(t.mfu, mf / (t.iter_s * 2240 * 312e12)) &&
              same(t.tflops, plan_paper_flops(&m, 1920, 1) / (t.iter_s * 2240) / 1e12) && t.hfu > t.mfu * 1.3,
          "full recompute: MFU counts model FLOPs only (%.1f%%), hardware TFLOP/s the f = 4 formula (HFU %.1f%%)",
          100 * t.mfu, 100 * t.hfu);
    /* slots: SP keeps the TP communication (same ring volume), divides the p2p message by t;
     * selective adds the attention core (2 GEMMs + softmax) once, no TP all-reduce */
    PlanSlot a, b;
    l.recompute = PLAN_RC_NONE;
    l.sp = 0;
    plan_slot(&m, &c, &k, &l, 17, 0, 1, &a);
    l.sp = 1;
    plan_slot(&m, &c, &k, &l, 17, 0, 1, &b);
    double fm_sp = (20.0 * sbh / 8 + 32.0 * sbh / 8 + 4.0 * 128 * s * s / 8) / (0.8 * 2039e9);
    check(
        same(a.tp, b.tp) && same(b.pp, 2 * plan_p2p_s(2 * sbh / 8, 25 * k.net_eff, 5.0)) && same(b.mem, 3 * 3 * fm_sp),
        "SP slot: same TP cost (%.2f ms), p2p of the 1/8 shard, LN/residual traffic 20sbh/t", 1e3 * b.tp);
    l.recompute = PLAN_RC_SELECTIVE;
    plan_slot(&m, &c, &k, &l, 17, 0, 1, &a);
    double core = 2 * (2.0 * s * s * 160 * 16 / (0.57 * 312e12 * u64(s) * u64(s) * u64(160)));
    check(same(a.gemm, b.gemm + 3 * core) && same(a.tp, b.tp) &&
              same(a.mem, b.mem + 3 * 4.0 * 128 * s * s / 8 / (0.8 * 2039e9)),
          "selective slot: + the attention core's forward per layer (%.1f ms), no extra TP communication", 3e3 * core);
    /* interleaved: gb 1960 = 245 micro-batches per pipeline (a multiple of 35), V 3 */
    l.recompute = PLAN_RC_FULL;
    l.sp = 0;
    l.vpp = 1;
    plan_time(&m, &c, &k, &l, 1960, &t0);
    l.vpp = 3;
    plan_time(&m, &c, &k, &l, 1960, &t);
    double sum, mx;
    slot_sum_max(&m, &c, &k, &l, &sum, &mx);
    check(t.m == 245 && same(t.pipe_s, 245 * mx + (sum - mx) / 3),
          "interleaved pipeline = m x slowest + (sum - slowest)/V");
    /* equal stages: bubble = (PP-1)/(V m) of the ideal: 34/(3*245) = 4.63%, plain 34/245 = 13.9% */
    double fb = t.bubble_s / (t.m * t.slot_s), fb0 = t0.bubble_s / (t0.m * t0.slot_s);
    check(fabs(fb - 34.0 / 735) < 0.003 && fabs(fb0 - 34.0 / 245) < 0.01,
          "bubble / ideal: V 3 %.2f%% (formula 4.63%%), V 1 %.2f%% (formula 13.88%%)", 100 * fb, 100 * fb0);
    plan_slot(&m, &c, &k, &l, 17, 0, 1, &a);
    plan_slot(&m, &c, &k, &l, 0, 0, 1, &b);
    check(same(a.pp, 6 * plan_p2p_s(2 * sbh, 25 * k.net_eff, 5.0)) &&
              same(b.pp, 5 * plan_p2p_s(2 * sbh, 25 * k.net_eff, 5.0)),
          "interleaved p2p per micro-batch: 2V = 6 messages on a middle rank, 5 on rank 0 (V times 1F1B's)");
    /* constraints */
    char why[96];
    l.vpp = 3;
    check(plan_check_layout(&m, 2240, 1920, &l, why, sizeof(why)) == 2 && strstr(why, "vpp") != NULL,
          "V 3 with m = 240 (not a multiple of 35) rejected: %s", why);
    l.vpp = 2;
    check(plan_check_layout(&m, 2240, 1960, &l, why, sizeof(why)) == 3 && strstr(why, "vpp") != NULL,
          "V 2 with 105 layers %% 70 rejected: %s", why);
    PlanModel odd = m;
    odd.seq = 2044;
    l.vpp = 1;
    l.sp = 1;
    check(plan_check_layout(&odd, 2240, 1920, &l, why, sizeof(why)) == 3 && strstr(why, "sp") != NULL,
          "SP with seq 2044 %% tp 8 rejected: %s", why);
}

/* ---------------------------------------------------------------------------------- */
/* pipeline schedules: 1F1B, interleaved, ZB-H1                                         */

/* A small event simulation of one iteration on p equal stages: each stage runs its own fixed
 * order of passes, each starting when its stage is free and its input is ready: F after the
 * previous stage's F, B after the next stage's B (after its W too when B and W are one pass,
 * as in 1F1B), W after its own B. zb = 0: 1F1B (min(p-1-i, m) warm-up forwards, then F, B+W
 * pairs); zb = 1: ZB-H1 (Qi et al. 2024 section 2.1: stage i runs p-1-i forwards, i (F, B)
 * pairs, then F_x, B_(x-p+1+i), W_(x-p+1), then the rest of the B's and W's; needs m >= p).
 * Returns the bubble: the makespan less m (F+B+W). */
enum { SIM_F, SIM_B, SIM_W, SIM_P = 8, SIM_M = 32 };
static double sim_bubble(int p, int m, double F, double B, double W, int zb) {
    int kind[SIM_P][3 * SIM_M], mb[SIM_P][3 * SIM_M], len[SIM_P], pos[SIM_P];
    double done[3][SIM_P][SIM_M], free_at[SIM_P], dur[3] = {F, B, W}, end = 0.0;
    for (int i = 0; i < p; i++) {
        int n = 0, nf = 0, nb = 0, nw = 0;
#define SIM_PUSH(k, x)  \
    do {                \
        kind[i][n] = k; \
        mb[i][n] = x;   \
        n++;            \
    } while (0)
        int warm = zb ? p - 1 - i : (p - 1 - i < m ? p - 1 - i : m);
        for (int x = 0; x < warm; x++) SIM_PUSH(SIM_F, nf++);
        for (int k = 0; zb && k < i; k++) { /* ZB-H1: B starts early, W waits */
            SIM_PUSH(SIM_F, nf++);
            SIM_PUSH(SIM_B, nb++);
        }
        while (nf < m) {
            SIM_PUSH(SIM_F, nf++);
            SIM_PUSH(SIM_B, nb++);
            SIM_PUSH(SIM_W, nw++);
        }
        while (nb < m) {
            SIM_PUSH(SIM_B, nb++);
            SIM_PUSH(SIM_W, nw++);
        }
        while (nw < m) SIM_PUSH(SIM_W, nw++);
#undef SIM_PUSH
        len[i] = n;
        pos[i] = 0;
        free_at[i] = 0.0;
        for (int k = 0; k < 3; k++)
            for (int x = 0; x < m; x++) done[k][i][x] = -1.0;
    }
    for (int progress = 1; progress;) {
        progress = 0;
        for (int i = 0; i < p; i++) {
            while (pos[i] < len[i]) {
                int k = kind[i][pos[i]], x = mb[i][pos[i]];
                double ready = 0.0;
                if (k == SIM_F && i > 0) ready = done[SIM_F][i - 1][x];
                if (k == SIM_B) ready = i == p - 1 ? done[SIM_F][i][x] : done[zb ? SIM_B : SIM_W][i + 1][x];
                if (k == SIM_W) ready = done[SIM_B][i][x];
                if (ready < 0.0) break; /* its input is not there yet */
                double t0 = ready > free_at[i] ? ready : free_at[i];
                done[k][i][x] = free_at[i] = t0 + dur[k];
                pos[i]++;
                progress = 1;
            }
        }
    }
    for (int i = 0; i < p; i++) {
        if (pos[i] < len[i]) return -1.0; /* deadlock: a wrong order */
        if (free_at[i] > end) end = free_at[i];
    }
    return end - m * (F + B + W);
}

/* plan_pipe_s for p equal stages of F, B, W: the pipeline less the m slots */
static double pipe_bubble(int sched, int vpp, int p, int m, double F, double B, double W) {
    double t = F + B + W;
    return plan_pipe_s(sched, vpp, p, m, p * t, p * W, F, B, W) - m * t;
}

static void test_schedules(void) {
    /* the bubble formulas, p = 4, m = 8, F 2, B 3, W 1.5 (W <= min(F, B), the paper's regime):
     * 1F1B (p-1)(F+B+W) = 19.5, interleaved V 2 19.5/2 = 9.75, ZB-H1 (p-1)(F+B-W) = 10.5 */
    check(same(pipe_bubble(PLAN_SCHED_1F1B, 1, 4, 8, 2, 3, 1.5), 19.5) && same(sim_bubble(4, 8, 2, 3, 1.5, 0), 19.5),
          "1F1B bubble, p 4, m 8, F 2 B 3 W 1.5 = (p-1)(F+B+W) = 19.5 (planner and event simulation)");
    check(same(pipe_bubble(PLAN_SCHED_1F1B, 2, 4, 8, 2, 3, 1.5), 9.75),
          "interleaved V 2 bubble = (p-1)(F+B+W)/V = 9.75");
    check(same(pipe_bubble(PLAN_SCHED_ZBH1, 1, 4, 8, 2, 3, 1.5), 10.5) && same(sim_bubble(4, 8, 2, 3, 1.5, 1), 10.5),
          "ZB-H1 bubble, p 4, m 8, F 2 B 3 W 1.5 = (p-1)(F+B-W) = 10.5 (planner and event simulation)");
    /* F = B = W: ZB-H1's bubble is a third of 1F1B's (the paper's Figure 3); also with m = p */
    check(same(pipe_bubble(PLAN_SCHED_ZBH1, 1, 4, 8, 1, 1, 1), 3.0) && same(sim_bubble(4, 8, 1, 1, 1, 1), 3.0) &&
              same(sim_bubble(4, 4, 1, 1, 1, 1), 3.0) && same(sim_bubble(6, 12, 1, 1, 1, 0), 15.0) &&
              same(pipe_bubble(PLAN_SCHED_ZBH1, 1, 6, 12, 1, 1, 1), 5.0),
          "F = B = W: ZB-H1 bubble (p-1) t, a third of 1F1B's 3(p-1) t (p 4 and 6, m = p and more)");
    /* W longer than F or B: ZB-H1's fixed order cannot hide all of it. F 2 B 3 W 2.5: the
     * paper's (p-1)(F+B-W) would say 7.5; the simulation gives (p-1)(F+B-min(F,B,W)) = 9 */
    double sim_long = sim_bubble(4, 8, 2, 3, 2.5, 1);
    check(same(sim_long, 9.0) && same(pipe_bubble(PLAN_SCHED_ZBH1, 1, 4, 8, 2, 3, 2.5), 9.0),
          "ZB-H1 with W 2.5 > F 2: bubble (p-1)(F+B-min(F,B,W)) = 9 (simulated %.2f), not (p-1)(F+B-W) = 7.5",
          sim_long);
    check(fabs(pipe_bubble(PLAN_SCHED_ZBH1, 1, 1, 8, 2, 3, 1.5)) < 1e-12 &&
              fabs(pipe_bubble(PLAN_SCHED_1F1B, 1, 1, 8, 2, 3, 1.5)) < 1e-12,
          "one stage: no bubble under either schedule");

    /* F and W of a slot: W = w_share x 2 x the four weight GEMMs' forward (QKV, attention out,
     * fc1, fc2 at their shape efficiency; attention's Q K^T and att V have no weights) */
    PlanModel m;
    Cluster c;
    PlanConsts k;
    paper_setup(&m, &c, &k);
    double s = 2048, H = 20480, sbh = s * H, pk = 0.57 * 312e12;
    double lin = 2.0 * s * 7680 * H / (pk * u64(s) * u64(7680) * u64(H)) +
                 2.0 * s * H * 2560 / (pk * u64(s) * u64(H) * u64(2560)) +
                 2.0 * s * 10240 * H / (pk * u64(s) * u64(10240) * u64(H)) +
                 2.0 * s * H * 10240 / (pk * u64(s) * u64(H) * u64(10240));
    PlanLayout l = {.tp = 8, .pp = 35, .dp = 8, .mb = 1, .recompute = 1, .zero = 0, .sp = 0, .vpp = 1};
    PlanSlot sl;
    plan_slot(&m, &c, &k, &l, 17, 0, 1, &sl);
    check(same(sl.w, 0.5 * 2 * 3 * lin), "middle-stage W = 0.5 x 2 x 3 layers x weight GEMMs' forward = %.1f ms",
          1e3 * sl.w);
    PlanConsts k4 = k;
    k4.w_share = 0.25;
    PlanSlot sl4;
    plan_slot(&m, &c, &k4, &l, 17, 0, 1, &sl4);
    check(
        same(sl4.w, 0.25 * 2 * 3 * lin) && same(sl4.gemm + sl4.mem + sl4.tp + sl4.pp, sl.gemm + sl.mem + sl.tp + sl.pp),
        "-plan-w-share 0.25 halves W and leaves the slot's total");

    /* the iteration: same slots, only the fill and drain differ */
    PlanTime t1, tz;
    plan_time(&m, &c, &k, &l, 1920, &t1);
    l.sched = PLAN_SCHED_ZBH1;
    plan_time(&m, &c, &k, &l, 1920, &tz);
    double sum = 0, sum_w = 0, mx = 0, fw = 0, ww = 0;
    for (int j = 0; j < 35; j++) {
        plan_slot(&m, &c, &k, &l, j, 0, 1, &sl);
        double x = sl.gemm + sl.mem + sl.tp + sl.pp;
        sum += x;
        sum_w += sl.w;
        if (x > mx) {
            mx = x;
            fw = sl.f;
            ww = sl.w;
        }
    }
    double bw = mx - fw - ww, hide = fmin(ww, fmin(fw, bw));
    check(same(tz.slot_s, t1.slot_s) && same(tz.bubble_s, (sum - sum_w) - (fw + bw) - 34 * hide) &&
              same(t1.bubble_s, sum - mx) && same(tz.iter_s - t1.iter_s, tz.bubble_s - t1.bubble_s),
          "530b paper layout: ZB-H1 bubble = other stages' F+B - 34 W = %.2f s against 1F1B's %.2f s", tz.bubble_s,
          t1.bubble_s);

    /* memory: a deferred W keeps its weight GEMMs' inputs and output gradients, sbh(8/spd + 24/t)
     * bf16; stage r holds r + 1 of them on top of 1F1B's PP - r micro-batches (the paper's
     * (p-r) M_B + r M_W, and the trainers' stash of the unit between its B and W) */
    check(same(plan_layer_w_bytes(&m, 8, 1, 0), 11.0 * sbh) && same(plan_layer_w_bytes(&m, 8, 1, 1), 4.0 * sbh),
          "W stash per layer: 11 sbh without SP (LN1, LN2 outputs, two C-wide gradients 2 bytes each; attention out, "
          "GeLU out, fc1 and QKV gradients 24/8), 4 sbh with");
    check(plan_zb_backlog(35, 0, 240) == 0 && plan_zb_backlog(35, 34, 240) == 34 && plan_zb_backlog(35, 17, 240) == 17,
          "ZB-H1 deferred W's: r on stage r (0 on the first, 34 on the last of 35)");
    int rcs[3] = {PLAN_RC_NONE, PLAN_RC_SELECTIVE, PLAN_RC_FULL}, same0 = 1;
    for (int i = 0; i < 3; i++) {
        PlanLayout a = {.tp = 8, .pp = 35, .dp = 8, .mb = 1, .recompute = rcs[i], .zero = 1, .sp = 1, .vpp = 1};
        PlanLayout z = a;
        z.sched = PLAN_SCHED_ZBH1;
        PlanMem ma, mz;
        plan_memory_stage(&m, &k, &a, 240, 0, &ma);
        plan_memory_stage(&m, &k, &z, 240, 0, &mz);
        if (!same(mz.total - ma.total, (m.L / 35) * plan_layer_w_bytes(&m, 8, 1, 1))) same0 = 0;
    }
    check(same0, "ZB-H1 stage 0 memory = 1F1B's + one W stash for every recompute mode (no deferred W there)");
    for (int i = 0; i < 2; i++) {
        PlanLayout a = {.tp = 8, .pp = 35, .dp = 8, .mb = 1, .recompute = rcs[i], .zero = 1, .sp = i, .vpp = 1};
        PlanLayout z = a;
        z.sched = PLAN_SCHED_ZBH1;
        PlanMem ma, mz;
        plan_memory(&m, &k, &a, 240, &ma);
        plan_memory(&m, &k, &z, 240, &mz);
        check(same(mz.total - ma.total, (m.L / 35) * plan_layer_w_bytes(&m, 8, 1, i)) && ma.stage == mz.stage &&
                  mz.stage == 0,
              "ZB-H1 peak memory = 1F1B's + one W stash (%.1f GiB, stage %d), recompute %s sp %d: M_W <= M_B",
              mz.total / 1073741824.0, mz.stage, planx_rc_name(rcs[i]), i);
    }
    PlanLayout lf = {.tp = 8, .pp = 35, .dp = 8, .mb = 1, .recompute = PLAN_RC_FULL, .zero = 0, .sp = 0, .vpp = 1};
    PlanLayout lz = lf;
    lz.sched = PLAN_SCHED_ZBH1;
    PlanMem ma, mz;
    plan_memory_stage(&m, &k, &lf, 240, 34, &ma);
    plan_memory_stage(&m, &k, &lz, 240, 34, &mz);
    check(same(mz.act - ma.act, 35.0 * 3 * 11 * sbh),
          "full recompute: the last stage's 34 deferred W's and the current one keep 35 x 3 x 11 sbh more (%.1f GiB), "
          "above 1F1B's",
          (mz.act - ma.act) / 1073741824.0);

    /* constraints */
    char why[96];
    PlanLayout b = lz;
    b.vpp = 3;
    check(plan_check_layout(&m, 2240, 1960, &b, why, sizeof(why)) == 3 && strstr(why, "zb-h1") != NULL,
          "zb-h1 with V 3 rejected: %s", why);
    b = lz;
    b.dp = 64;
    b.pp = 35;
    b.tp = 1;
    check(plan_check_layout(&m, 2240, 1920, &b, why, sizeof(why)) == 2 && strstr(why, "zb-h1") != NULL,
          "zb-h1 with m 30 < pp 35 rejected: %s", why);

    /* the search: bubbles dominate the 530B on 280 nodes, so it picks ZB-H1; one stage has no
     * bubble, so ZB-H1 is never a candidate there; -plan-schedule fixes the schedule */
    PlanRequest r = request_530b(280);
    PlanRow best;
    plan_request_cluster(&r, &c);
    int ok = plan_recommend(&r, &c, 280, &best);
    check(ok == 0 && best.lay.sched == PLAN_SCHED_ZBH1 && best.lay.pp > 1,
          "530b on 280 nodes, schedule searched: recommended %s (PP %d, bubble %.1f%%, %.2f s)",
          plan_sched_name(&best.lay), best.lay.pp, 100 * best.time.bubble_s / best.time.iter_s, best.time.iter_s);
    PlanRequest r1 = r;
    plan_parse_flag(&r1, "-plan-schedule", "1f1b,interleaved");
    PlanRow best1;
    plan_recommend(&r1, &c, 280, &best1);
    check(best1.lay.sched == PLAN_SCHED_1F1B && best1.time.iter_s > best.time.iter_s,
          "-plan-schedule 1f1b,interleaved: recommended %s, %.2f s (slower than zb-h1)", plan_sched_name(&best1.lay),
          best1.time.iter_s);
    PlanRequest rs;
    plan_request_init(&rs);
    plan_model_preset("1.3b", &rs.model);
    rs.gb = 512;
    rs.pp = 1;
    int n = 0, nzb = 0;
    PlanRow* rows = planx_enumerate(&rs, &c, 1, &n);
    for (int i = 0; i < n; i++) nzb += rows[i].lay.sched == PLAN_SCHED_ZBH1;
    free(rows);
    check(n > 0 && nzb == 0, "PP 1: no zb-h1 rows among %d (it would equal 1F1B)", n);

    /* the paper's 1F1B reproductions are what they were before the schedules came in */
    const int nodes[3] = {280, 350, 420};
    const double before[3] = {61.23, 50.62, 43.55};
    for (int i = 0; i < 3; i++) {
        PlanRequest p = paper_request(nodes[i]);
        PlanRow w;
        eval_request(&p, &w);
        check(w.lay.sched == PLAN_SCHED_1F1B && fabs(w.time.iter_s - before[i]) < 0.005,
              "paper layout, 1f1b, %d nodes: %.2f s (%.2f before the schedule dimension)", nodes[i], w.time.iter_s,
              before[i]);
    }

    /* flags */
    PlanRequest f;
    plan_request_init(&f);
    char e[PLAN_ERR_LEN];
    check(plan_parse_flag(&f, "-plan-schedule", "1f1b,zb-h1") == 1 && f.sched_mask == (PLAN_SB_1F1B | PLAN_SB_ZBH1) &&
              plan_parse_flag(&f, "-plan-schedule", "any") == 1 && f.sched_mask == PLAN_SB_ALL &&
              plan_parse_flag(&f, "-plan-w-share", "0.3") == 1 && f.k.w_share == 0.3 &&
              plan_parse_flag(&f, "-plan-schedules", "1") == 1 && f.compare_sched == 1,
          "-plan-schedule 1f1b,zb-h1 / any, -plan-w-share 0.3, -plan-schedules 1 parsed");
    check(plan_parse_flag_err(&f, "-plan-schedule", "zb-v", e, sizeof(e)) == -1 &&
              plan_parse_flag_err(&f, "-plan-schedule", "1f1b,", e, sizeof(e)) == -1 &&
              plan_parse_flag_err(&f, "-plan-schedule", "", e, sizeof(e)) == -1 &&
              plan_parse_flag_err(&f, "-plan-w-share", "1.5", e, sizeof(e)) == -1 &&
              plan_parse_flag_err(&f, "-plan-schedules", "2", e, sizeof(e)) == -1,
          "bad -plan-schedule (zb-v, '1f1b,', ''), -plan-w-share 1.5, -plan-schedules 2 rejected: %s", e);
    PlanRequest pr = paper_request(280);
    FILE* devnull = fopen("/dev/null", "w");
    pr.compare_sched = 1;
    int rc_cmp = plan_run(&pr, devnull);
    pr.compare_sched = 0;
    pr.vpp = 3;
    plan_parse_flag(&pr, "-plan-schedule", "zb-h1");
    printf("(the next check expects one 'error: plan: -vpp 3 and -plan-schedule' message on stderr)\n");
    fflush(stdout);
    int rc_bad = plan_run(&pr, devnull);
    fclose(devnull);
    check(rc_cmp == 0 && rc_bad == 2, "plan_run with -plan-schedules 1 returns 0; -vpp 3 with zb-h1 only returns 2");
}

/* ---------------------------------------------------------------------------------- */
/* the per-kernel model of the h100 and h200 clusters (gpu_step.h)                     */

/* one 1.3b layout on one GPU of `cluster`, micro-batch mb, the given recompute and SP */
static void one_gpu(const char* cluster, const char* model, int tp, int mb, int rc, int sp, PlanSlot* sl, PlanTime* t,
                    double gemm_eff) {
    PlanModel m;
    Cluster c;
    PlanConsts k = plan_default_consts();
    if (gemm_eff > 0) k.kernel_gemm = gemm_eff;
    plan_model_preset(model, &m);
    cluster_preset(cluster, &c);
    PlanLayout l = {.tp = tp, .pp = 1, .dp = 1, .mb = mb, .recompute = rc, .zero = 0, .sp = sp, .vpp = 1};
    plan_slot(&m, &c, &k, &l, 0, 0, 0, sl);
    plan_time(&m, &c, &k, &l, 16, t);
}

static void test_kernel_model(void) {
    Cluster c;
    cluster_preset("h100", &c);
    int ok = c.kernels == 1 && c.sms == 132;
    cluster_preset("h200", &c);
    ok = ok && c.kernels == 1 && c.sms == 132;
    cluster_preset("selene-a100", &c);
    check(ok && c.kernels == 0 && c.sms == 108,
          "h100 and h200 use the per-kernel model (132 SMs); selene-a100 keeps the fitted one (108 SMs)");
    GpuStepDevice h100 = {989.0, 3350.0, 132};
    GpuStepCase g = gpu_step_case(GS_MID);
    check(g.a[GS_GEMM_SUSTAINED] == 0.72 && g.a[GS_HBM_EFF] == 0.80 && gpu_step_case(GS_SLOW).a[GS_K0] == 192.0 &&
              gpu_step_case(GS_FAST).a[GS_ATTN_DP_PASSES] == 0.5,
          "gpu_step.h's columns: GEMM_SUSTAINED mid 0.72, HBM_EFF mid 0.80, K0 slow 192, ATTN_DP_PASSES fast 0.5");

    /* one full wave of 128x256 tiles (12 x 11 = 132) at k = 8192: 2mnk / (0.72 x 989 TFLOP/s) + 3 us */
    double m_ = 128 * 12, n_ = 256 * 11, want = 2.0 * m_ * n_ * 8192 / (0.72 * 989e12) + 3e-6;
    check(same(gpu_step_gemm_s(m_, n_, 8192, 2, GS_EPI_NONE, &h100, &g), want),
          "GEMM 1536 x 2816 x 8192 on H100: one full wave at 0.72 x 989 TFLOP/s + 3 us = %.4f ms", 1e3 * want);
    /* 2304 x 2304: 128x256 gives 162 tiles in 2 waves (61.4%), 128x128 324 tiles in 3 waves (81.8%) x 0.90 */
    check(same(gpu_step_tile_eff(2304, 2304, 132, &g), 324.0 / 396 * 0.9),
          "tile choice 2304 x 2304: 128x128, 324 tiles in 3 waves x 0.90 = %.4f", 324.0 / 396 * 0.9);
    /* k = 2048: k/(k + 128) over 8192/(8192 + 128), and the DGELU_BGRAD epilogue: rate x 0.95 and
     * 0.5 x (2mn + 4m) bytes at 0.8 x 3350 GB/s */
    double keff = (2048.0 / 2176) / (8192.0 / 8320), mm = 8192, nn = 8192;
    want = 2.0 * mm * nn * 2048 / (0.72 * 989e12 * (1024.0 / 1056) * keff * 0.95) +
           0.5 * (2.0 * mm * nn + 4.0 * mm) / (0.8 * 3350e9) + 3e-6;
    check(same(gpu_step_gemm_s(mm, nn, 2048, 2, GS_EPI_DGELU_BGRAD, &h100, &g), want),
          "GEMM 8192 x 8192 x 2048 + DGELU_BGRAD: k-efficiency %.4f, wave 1024/1056, fused rate, half the aux read "
          "exposed = %.4f ms",
          keff, 1e3 * want);
    check(same(gpu_step_epilogue_bytes(100, 30, 4, GS_EPI_BGRADB), 6.0 * 3000 + 4.0 * 30),
          "fp32 weight gradient with BGRADB: 6mn (beta = 1) + 4n bytes");
    /* attention at 1.3b, micro-batch 4, one layer: forward 4 x 16 x 2048^2 x 128 x 2 x 0.5 FLOPs at 450;
     * backward 2.5x at 380 + the 537 MB dP workspace once at 0.8 x 3350 GB/s */
    double fl = 2.0 * 4 * 16 * 2048.0 * 2048 * 128;
    check(same(gpu_step_attn_fwd_s(4, 16, 2048, 128, &g), fl / 450e12) &&
              gpu_step_dp_bytes(4, 16, 2048) == 536870912.0 &&
              same(gpu_step_attn_bwd_s(4, 16, 2048, 128, &h100, &g), 2.5 * fl / 380e12 + 536870912.0 / (0.8 * 3350e9)),
          "1.3b attention per layer: forward %.3f ms, deterministic backward %.3f ms (dP workspace 536870912 B)",
          1e3 * fl / 450e12, 1e3 * (2.5 * fl / 380e12 + 536870912.0 / (0.8 * 3350e9)));

    /* the slot: the four forward GEMMs by hand (QKV + bias, projection, fc1 + GeLU, fc2), and the
     * attention forward, are what full recomputation adds */
    PlanSlot a, b;
    PlanTime ta, tb;
    double C = 2048, BT = 4 * 2048.0;
    double fwd = gpu_step_gemm_s(3 * C, BT, C, 2, GS_EPI_BIAS, &h100, &g) + gpu_step_gemm_s(C, BT, C, 2, 1, &h100, &g) +
                 gpu_step_gemm_s(4 * C, BT, C, 2, GS_EPI_GELU_AUX_BIAS, &h100, &g) +
                 gpu_step_gemm_s(C, BT, 4 * C, 2, 1, &h100, &g) + gpu_step_attn_fwd_s(4, 16, 2048, 128, &g);
    one_gpu("h100", "1.3b", 1, 4, PLAN_RC_NONE, 0, &a, &ta, 0);
    one_gpu("h100", "1.3b", 1, 4, PLAN_RC_FULL, 0, &b, &tb, 0);
    check(same(b.gemm - a.gemm, 24 * fwd),
          "h100 1.3b: full recompute adds 24 layers' forward GEMMs and attention = %.1f ms per micro-batch",
          1e3 * 24 * fwd);
    /* and its memory-bound forward: 28 bytes per B*T*C element per layer, 2 launches, and the gaps of 7 */
    check(same(b.mem - a.mem, 24 * (28.0 * BT * C / (0.8 * 3350e9) + 2 * 2e-6 + 7 * 1e-6)),
          "h100 1.3b: full recompute's memory-bound part = 24 x (28 B x B*T*C at HBM + 2 launches + 7 gaps)");
    one_gpu("h100", "1.3b", 1, 4, PLAN_RC_SELECTIVE, 0, &b, &tb, 0);
    check(same(b.gemm, a.gemm) && same(b.mem, a.mem),
          "h100: selective recomputes nothing with flash attention (the trainer keeps what none keeps)");
    /* the step: 4 slots and the once-per-step part (38 B per parameter, 18 launches, 2 drains, 2 reads) */
    PlanModel m13;
    plan_model_preset("1.3b", &m13);
    double P = plan_stage_params(&m13, 1, 1, 0);
    double opt = 38.0 * P / (0.8 * 3350e9) + 18 * (2e-6 + 1e-6) + 2 * 20e-6 + 2 * 4e-6 + 24.0 / 25e9;
    check(ta.m == 4 && same(ta.opt_s, opt) && same(ta.iter_s, 4 * ta.slot_s + opt),
          "h100 1.3b, 16 sequences: step = 4 slots + %.2f ms once per step (AdamW, grad norm, memset, host waits)",
          1e3 * opt);
    /* 1.3b one H100: the two predictions (0.532 s cost model, 0.84 s -plan) are now one: the
     * -plan step lies between the cost model's all-fast and all-slow corners of gpu_step.h */
    check(ta.iter_s > 0.45 && ta.iter_s < 0.68 && ta.mfu > 0.44 && ta.mfu < 0.66,
          "h100 1.3b one GPU: -plan %.1f ms/step, MFU %.1f%% (the fitted A100 model said 840 ms, 35.1%%)",
          1e3 * ta.iter_s, 100 * ta.mfu);
    /* TP 2: every GEMM and the attention on half the columns or heads: the compute part about halves */
    one_gpu("h100", "1.3b", 2, 4, PLAN_RC_NONE, 0, &b, &tb, 0);
    check(b.gemm < 0.53 * a.gemm && b.gemm > 0.47 * a.gemm && b.tp > 0,
          "h100 1.3b TP 2: GEMMs + attention %.1f ms of TP 1's %.1f (about half), plus TP all-reduces", 1e3 * b.gemm,
          1e3 * a.gemm);
    /* SP splits the 50 bytes per B*T*C element of LayerNorm/residual traffic per layer over TP */
    PlanSlot sp;
    one_gpu("h100", "1.3b", 2, 4, PLAN_RC_NONE, 1, &sp, &tb, 0);
    check(same(b.mem - sp.mem, (24 * 50.0 + 10.2) * BT * C / 2 / (0.8 * 3350e9)) && same(b.gemm, sp.gemm),
          "h100 1.3b TP 2 with SP: the layers' 50 B and the final LayerNorm's 10.2 B x B*T*C of traffic halve (%.1f ms "
          "less)",
          1e3 * (b.mem - sp.mem));
    /* -plan-eff on h100 is the per-kernel model's GEMM_SUSTAINED: 0.36 doubles the GEMMs' FLOP time */
    one_gpu("h100", "1.3b", 1, 4, PLAN_RC_NONE, 0, &b, &tb, 0.36);
    double attn = 24 * (gpu_step_attn_fwd_s(4, 16, 2048, 128, &g) + gpu_step_attn_bwd_s(4, 16, 2048, 128, &h100, &g));
    check(b.gemm - attn > 1.9 * (a.gemm - attn) && b.gemm - attn < 2.0 * (a.gemm - attn),
          "h100: GEMM efficiency 0.36 instead of 0.72 about doubles the GEMMs (%.1f -> %.1f ms)", 1e3 * (a.gemm - attn),
          1e3 * (b.gemm - attn));
    PlanRequest r;
    plan_request_init(&r);
    check(plan_parse_flag(&r, "-plan-eff", "0.6") == 1 && r.k.kernel_gemm == 0.6 && r.k.gemm_eff == 0.6 &&
              plan_parse_flag(&r, "-plan-hbm-eff", "0.9") == 1 && r.k.kernel_hbm == 0.9 && r.k.hbm_eff == 0.9,
          "-plan-eff and -plan-hbm-eff set both models' efficiency");
    /* W of ZB-H1: w_share of the weight-carrying GEMMs' backward (input and weight gradients) */
    PlanConsts k = plan_default_consts();
    PlanModel m;
    plan_model_preset("1.3b", &m);
    cluster_preset("h100", &c);
    PlanLayout l = {.tp = 1, .pp = 2, .dp = 1, .mb = 4, .recompute = 0, .zero = 0, .sp = 0, .vpp = 1};
    plan_slot(&m, &c, &k, &l, 0, 0, 0, &a);
    k.w_share = 0.25;
    plan_slot(&m, &c, &k, &l, 0, 0, 0, &b);
    check(same(b.w, 0.5 * a.w) && same(a.gemm + a.mem, b.gemm + b.mem) && a.f > 0 && a.f < a.gemm + a.mem - a.w,
          "h100 PP 2 stage 0: -plan-w-share 0.25 halves W (%.1f ms), the slot stays; F %.1f ms", 1e3 * b.w, 1e3 * a.f);
    /* a small model is host-bound: the slot is its launches x 5 us. L 4, C 128, T 128, V 1024: 4 layers
     * x (12 GEMMs + 4 attention + 8 kernels) + 3 head GEMMs + 4 embedding + 3 head kernels = 106 */
    PlanModel small = {.L = 4, .H = 128, .heads = 4, .seq = 128, .V = 1024};
    l.pp = 1;
    l.mb = 1;
    plan_slot(&small, &c, &k, &l, 0, 0, 0, &a);
    check(same(a.gemm + a.mem, 106 * 5e-6),
          "h100 L 4 C 128, micro-batch 1: host-bound, 106 x 5 us = %.3f ms (got %.3f)", 106 * 5e-3,
          1e3 * (a.gemm + a.mem));
}

static void test_plan_run(void) {
    PlanRequest r = request_530b(280);
    int lines = 0;
    int rc = plan_run_csv(&r, "test_planner_plan.tmp.csv", &lines);
    check(rc == 0 && lines > 200,
          "plan_run 530b on 280 selene-a100 nodes returns 0 and writes every evaluated layout to the CSV (%d lines)",
          lines);
    FILE* devnull = fopen("/dev/null", "w");
    r.nodes = 1;
    rc = plan_run(&r, devnull);
    check(rc == 1, "plan_run 530b on 1 node returns 1 (nothing fits)");
    r.nodes = 0;
    printf("(the next check expects one 'plan: give -nodes' message on stderr)\n");
    fflush(stdout);
    check(plan_run(&r, devnull) == 2, "plan_run without -nodes returns 2");
    plan_model_preset("1.3b", &r.model);
    r.nodes = 1;
    r.gb = 512;
    r.mb = 0;
    check(plan_run(&r, devnull) == 0, "plan_run 1.3b on one 8-GPU node returns 0");
    fclose(devnull);
}

/* ZeRO 2 and 3: memory per level, the per-micro-batch traffic hidden behind the layers'
 * compute or not, the reduction after the flush, the search; flash attention's memory on h100 */
static void test_zero(void) {
    PlanModel m;
    Cluster c;
    PlanConsts k;
    paper_setup(&m, &c, &k);
    /* 530b, TP 8, PP 35, DP 8, stage 0: P0 = 2,060,874,240 params; a layer 629,286,400; the rest
     * (token embedding V*H/8 + positions s*H) 173,015,040 */
    const double P0 = 2060874240.0, Pl = 629286400.0, rest0 = 131072000.0 + 41943040.0;
    PlanLayout l = {.tp = 8, .pp = 35, .dp = 8, .mb = 1, .recompute = 1, .zero = 2, .sp = 0, .vpp = 1};
    PlanMem z2, z3, z0;
    plan_memory_stage(&m, &k, &l, 240, 0, &z2);
    check(same(z2.weights, 2 * P0) && same(z2.grads, 4.0 * (P0 / 8 + rest0 + Pl)) && same(z2.optim, 12 * P0 / 8),
          "ZeRO-2 stage 0: bf16 weights whole, fp32 grads = 1/8 shard + rest + one layer's scratch = %.2f GiB, "
          "optimizer 12 B x P/8",
          z2.grads / 1073741824.0);
    l.zero = 3;
    plan_memory_stage(&m, &k, &l, 240, 0, &z3);
    check(same(z3.weights, 2.0 * (P0 / 8 + rest0 + 2 * Pl)) && same(z3.grads, z2.grads) && same(z3.optim, z2.optim) &&
              same(z3.act, z2.act),
          "ZeRO-3 stage 0: bf16 weights = 1/8 shard + rest + two layer windows = %.2f GiB (%.2f GiB whole)",
          z3.weights / 1073741824.0, 2 * P0 / 1073741824.0);
    /* one DP rank: every level is plain AdamW, as the trainers */
    PlanLayout one = {.tp = 8, .pp = 35, .dp = 1, .mb = 1, .recompute = 1, .zero = 3, .sp = 0, .vpp = 1};
    plan_memory_stage(&m, &k, &one, 240, 0, &z3);
    one.zero = 0;
    plan_memory_stage(&m, &k, &one, 240, 0, &z0);
    check(same(z3.total, z0.total) && plan_zero_eff(&one) == 0, "ZeRO-3 over DP 1 is ZeRO-0 (%.2f GiB)",
          z0.total / 1073741824.0);

    /* ZeRO-2 on 280 nodes (DP over InfiniBand, 20 GB/s after net_eff, 5 us): each micro-batch
     * reduce-scatters each layer's fp32 gradients, 7/8 x 4 x 629,286,400 B / 20 GB/s + 7 x 5 us
     * = 110.16 ms, against a middle stage's backward (recomputation included) of about 53 ms
     * per layer: the excess is on the critical path, three layers per slot */
    l.zero = 1;
    PlanSlot sl;
    plan_slot(&m, &c, &k, &l, 17, 0, 1, &sl);
    double rs = 0.875 * 4 * Pl / 20e9 + 7 * 5e-6, b_l = (sl.gemm + sl.mem + sl.tp + sl.pp - sl.f) / 3, fwd = -1;
    l.zero = 2;
    double x2 = plan_zero_slot_s(&m, &c, &k, &l, &sl, 1, &fwd);
    check(rs > b_l && same(x2, 3 * (rs - b_l)) && fwd == 0.0,
          "ZeRO-2, middle stage: 3 x (reduce-scatter %.1f ms - backward per layer %.1f ms) = %.1f ms per slot not "
          "hidden",
          1e3 * rs, 1e3 * b_l, 1e3 * x2);
    l.zero = 3;
    double ag = 0.875 * 2 * Pl / 20e9 + 7 * 5e-6, f_l = sl.f / 3;
    double x3 = plan_zero_slot_s(&m, &c, &k, &l, &sl, 1, &fwd);
    check(same(fwd, 3 * (ag - f_l)) && same(x3, 3 * (ag - f_l) + 3 * (rs + ag - b_l)),
          "ZeRO-3: + all-gathers of the bf16 layer (%.1f ms) before the forward (%.1f ms per layer) and the backward: "
          "%.1f ms per slot",
          1e3 * ag, 1e3 * f_l, 1e3 * x3);
    PlanTime t1, t2, t3;
    l.zero = 1;
    plan_time(&m, &c, &k, &l, 1920, &t1);
    l.zero = 2;
    plan_time(&m, &c, &k, &l, 1920, &t2);
    double dp2 = plan_reduce_scatter_s(4 * rest0, 8, 20, 5) + plan_reduce_scatter_s(4 * Pl, 8, 20, 5) +
                 plan_reduce_scatter_s(2 * P0, 8, 20, 5);
    check(same(t2.dp_s, dp2) && t2.slot_dp_s > 0 && t2.iter_s > t1.iter_s * 1.5,
          "ZeRO-2 after the flush: the rest's and the last layer's reduce-scatter + the weights' all-gather = %.3f s "
          "(ZeRO-1 %.3f s); 530b on 280 nodes at mb 1: %.1f s against ZeRO-1's %.1f s",
          t2.dp_s, t1.dp_s, t2.iter_s, t1.iter_s);
    l.zero = 3;
    plan_time(&m, &c, &k, &l, 1920, &t3);
    double dp3 = plan_reduce_scatter_s(4 * rest0, 8, 20, 5) + plan_reduce_scatter_s(4 * Pl, 8, 20, 5) +
                 plan_reduce_scatter_s(2 * rest0, 8, 20, 5);
    check(same(t3.dp_s, dp3) && t3.iter_s > t2.iter_s,
          "ZeRO-3 after the flush gathers only the rest (%.3f s); %.1f s per iteration", t3.dp_s, t3.iter_s);

    /* inside a node (NVLink) the gathers of 1.3b at micro-batch 8 hide behind a layer's compute */
    PlanModel s;
    plan_model_preset("1.3b", &s);
    PlanLayout n = {.tp = 1, .pp = 1, .dp = 8, .mb = 8, .recompute = 0, .zero = 3, .sp = 0, .vpp = 1};
    PlanTime n1, n3;
    plan_time(&s, &c, &k, &n, 480, &n3);
    n.zero = 1;
    plan_time(&s, &c, &k, &n, 480, &n1);
    /* rest = V*H + s*H + 2H (PP 1: the head is the embedding); a layer 12H^2 + 13H */
    double rs1 = 51200.0 * 2048 + 2048.0 * 2048 + 2 * 2048, pl1 = 12.0 * 2048 * 2048 + 13 * 2048;
    double dpn = plan_reduce_scatter_s(4 * rs1, 8, 240, 2) + plan_reduce_scatter_s(4 * pl1, 8, 240, 2) +
                 plan_reduce_scatter_s(2 * rs1, 8, 240, 2);
    check(n3.slot_dp_s == 0.0 && same(n3.slot_s, n1.slot_s) && same(n3.dp_s, dpn) && n3.iter_s < n1.iter_s,
          "1.3b, DP 8 on one node, mb 8: ZeRO-3's traffic hidden (slot %.1f ms both), after the flush %.1f ms "
          "against ZeRO-1's %.1f: %.3f s vs %.3f s per iteration",
          1e3 * n3.slot_s, 1e3 * n3.dp_s, 1e3 * n1.dp_s, n3.iter_s, n1.iter_s);

    /* the search: ZeRO 0-3 where DP > 1, only 0 where DP = 1 */
    PlanRequest r;
    plan_request_init(&r);
    r.model = s;
    r.nodes = 1;
    r.gb = 480;
    Cluster h;
    plan_request_cluster(&r, &h);
    int cnt = 0, seen[4] = {0, 0, 0, 0}, dp1_bad = 0;
    PlanRow* rows = planx_enumerate(&r, &h, 1, &cnt);
    for (int i = 0; i < cnt; i++) {
        if (rows[i].kind >= 2) continue;
        seen[rows[i].lay.zero & 3]++;
        if (rows[i].lay.dp == 1 && rows[i].lay.zero != 0) dp1_bad++;
    }
    free(rows);
    check(seen[0] && seen[1] && seen[2] && seen[3] && dp1_bad == 0,
          "the search covers ZeRO 0-3 (%d, %d, %d, %d rows), and only 0 where DP = 1", seen[0], seen[1], seen[2],
          seen[3]);

    /* h100: the CUDA trainer's flash attention keeps the log-sum-exp (4asb/t), not the
     * probabilities (2as^2b/t): 24 layers of 1.3b at mb 4 differ by 24 x (2x16x2048^2x4 - 4x16x2048x4) */
    Cluster hc;
    cluster_preset("h100", &hc);
    PlanLayout f = {.tp = 1, .pp = 1, .dp = 8, .mb = 4, .recompute = 0, .zero = 1, .sp = 0, .vpp = 1};
    PlanMem ma, mh, ms;
    plan_memory(&s, &k, &f, 15, &ma);
    plan_memory_c(&s, &hc, &k, &f, 15, &mh);
    f.recompute = PLAN_RC_SELECTIVE;
    plan_memory_c(&s, &hc, &k, &f, 15, &ms);
    check(same(ma.act - mh.act, 24.0 * (2.0 * 16 * 2048 * 2048 * 4 - 4.0 * 16 * 2048 * 4)) && same(ms.total, mh.total),
          "h100 (flash attention): %.2f GiB less activations than materialised; selective keeps the same",
          (ma.act - mh.act) / 1073741824.0);
}

/* ---------------------------------------------------------------------------------- */
/* context parallelism (-cp): terms by hand, placement, the search, the 32k example     */

static void test_cp(void) {
    PlanModel m;
    PlanConsts k = plan_default_consts();
    Cluster h, a;
    plan_model_preset("530b", &m);
    m.seq = 32768;
    cluster_preset("h100", &h);
    cluster_preset("selene-a100", &a);
    /* TP 8 x CP 4 x PP 35 x DP 2, micro-batch 1, SP, no recomputation, ZeRO-1, 120 sequences: m = 60 */
    PlanLayout l = {.tp = 8, .pp = 35, .dp = 2, .mb = 1, .recompute = 0, .zero = 1, .sp = 1, .vpp = 1, .cp = 4};
    char why[96];
    check(plan_check_layout(&m, 2240, 120, &l, why, sizeof(why)) == 0 && plan_cp(&l) == 4 && plan_grad_group(&l) == 8,
          "TP 8 x CP 4 x PP 35 x DP 2 is a layout of 2240 GPUs (%s), its gradient group CP x DP = 8 ranks", why);

    /* memory, stage 0: params 3 blocks + V*H/8 + the whole position embedding s*H
     * = 3 x 629,286,400 + 131,072,000 + 32768 x 20480 = 2,690,019,840; optimizer 12 B over CP x DP = 8 */
    PlanMem mh, ma, m1;
    plan_memory_c(&m, &h, &k, &l, 60, &mh);
    const double P0 = 2690019840.0;
    /* a rank's 8192 rows: sbh = 8192 x 20480 = 167,772,160; a layer keeps sbh(8/8 + 24/8) (SP) and the
     * fp32 lse 4 x 128 x 8192 / 8 = 671,612,928 B; 35 micro-batches x 3 layers in flight; the ring's buffers
     * 24 x 8192 x 2560 + 4 x 128 x 8192 / 8 = 503,840,768 B */
    const double keep = 671612928.0, ring = 503840768.0;
    check(mh.stage == 0 && same(mh.params, P0) && same(mh.optim, 12.0 * P0 / 8) && same(mh.act, 105 * keep + ring),
          "CP 4 stage 0: params %.0f, optimizer 12 B x P/8 (CP x DP), activations 105 layers x %.0f B + ring %.0f B "
          "= %.2f GiB",
          mh.params, keep, ring, mh.act / 1073741824.0);
    check(same(plan_cp_ring_bytes(&m, &l), ring), "the ring's buffers: K|V bf16 x 2, dK|dV fp32 x 2, D: %.0f B",
          plan_cp_ring_bytes(&m, &l));
    /* the materialised cluster keeps the lse too under CP (ring attention), so the same activations */
    plan_memory_c(&m, &a, &k, &l, 60, &ma);
    check(same(ma.act, mh.act), "CP on selene-a100: the ring keeps the lse, not s x s probabilities (%.2f GiB)",
          ma.act / 1073741824.0);
    /* activations fall by CP: the same layout at CP 1 keeps 4x per layer, no ring */
    PlanLayout l1 = l;
    l1.cp = 1;
    plan_memory_c(&m, &h, &k, &l1, 60, &m1);
    check(same(m1.act, 4.0 * (mh.act - ring)) && same(m1.optim, 12.0 * P0 / 2),
          "CP 1 of the same: activations %.2f GiB = 4 x CP 4's less its ring; optimizer over DP 2 only",
          m1.act / 1073741824.0);

    /* the ring's time, one layer: blocks of 8192 x 2560 = 20,971,520 elements; K|V 4 B each, dK|dV 8 B, over
     * InfiniBand (50 x 0.8 = 40 GB/s, 5 us): 2.102152 and 4.199304 ms; attention 4 ms forward, 10 ms backward
     * on the rank = 1 and 2.5 ms per block */
    double fx, bx, ft, bt;
    plan_cp_ring_s(&m, &h, &k, &l, 1, 4e-3, 10e-3, &fx, &bx, &ft, &bt);
    const double kv = 2.102152e-3, dkv = 4.199304e-3;
    check(same(fx, 3 * (kv - 1e-3)) && same(bx, 3 * (kv + dkv - 2.5e-3) + dkv),
          "ring, IB: exposed 3 x (K|V %.3f - block %.1f ms) = %.3f ms forward; 3 x (K|V + dK|dV - %.1f ms) + the "
          "last dK|dV hop = %.3f ms backward",
          1e3 * kv, 1.0, 1e3 * fx, 2.5, 1e3 * bx);
    check(same(ft, 3 * kv) && same(bt, 3 * (kv + dkv) + dkv), "ring, IB: %.3f ms moved forward, %.3f ms backward",
          1e3 * ft, 1e3 * bt);
    plan_cp_ring_s(&m, &h, &k, &l, 1, 0.1, 0.2, &fx, &bx, &ft, &bt);
    check(fx == 0.0 && same(bx, dkv), "ring, long blocks: only the last dK|dV hop is exposed (%.3f ms)", 1e3 * bx);
    plan_cp_ring_s(&m, &h, &k, &l1, 1, 4e-3, 10e-3, &fx, &bx, &ft, &bt);
    check(fx == 0.0 && bx == 0.0 && ft == 0.0 && bt == 0.0, "no ring at CP 1");

    /* placement: rank = tp + TP*cp + TP*CP*dp + TP*CP*DP*pp on nodes of 8 */
    int ti, pi, di, ci;
    PlanLayout p = {.tp = 2, .pp = 2, .dp = 2, .mb = 1, .vpp = 1, .cp = 4};
    plan_links_cp(&p, 8, &ti, &pi, &di, &ci);
    check(!ti && !ci && di && pi,
          "TP 2 x CP 4 x DP 2 x PP 2: TP, CP inside a node (ranks 0,2,4,6), CP x DP and PP "
          "across (stride 2 over 8 ranks, 16)");
    p.tp = 8;
    p.cp = 2;
    plan_links_cp(&p, 8, &ti, &pi, &di, &ci);
    check(!ti && ci && di && pi, "TP 8 x CP 2: TP inside a node, the CP ring across (ranks 0, 8)");
    p.tp = 1;
    p.cp = 8;
    p.dp = 1;
    plan_links_cp(&p, 8, &ti, &pi, &di, &ci);
    check(!ci && !di && pi, "TP 1 x CP 8: the CP ring and the gradient group fill a node");
    /* the pipeline's stride is TP x CP x DP: TP 2 x CP 2, DP 1, PP 2 on 8-GPU nodes stays inside */
    PlanLayout q = {.tp = 2, .pp = 2, .dp = 1, .mb = 1, .vpp = 1, .cp = 2};
    plan_links_cp(&q, 8, &ti, &pi, &di, &ci);
    check(!ti && !ci && !di && !pi, "TP 2 x CP 2 x PP 2 on one node: every group inside");

    /* the gradient group: ZeRO-1 reduce-scatters 4P and gathers 2P over CP x DP = 8 ranks */
    double bw = 40.0, lat = 5.0;
    double dz = plan_zero_dp_s(&m, &l, 0, bw, lat);
    check(same(dz, 7.0 / 8 * 6 * P0 / 40e9 + 14 * 5e-6), "ZeRO-1 after the flush over CP x DP = 8: %.3f s", dz);

    /* constraints */
    PlanLayout b = l;
    b.cp = 3;
    b.dp = 1;
    int kind = plan_check_layout(&m, 8 * 3 * 35, 120, &b, why, sizeof(why));
    check(kind == 3 && strstr(why, "2cp") != NULL, "CP 3 at seq 32768: refused (%s)", why);
    b.cp = 4;
    b.dp = 3;
    kind = plan_check_layout(&m, 2240, 120, &b, why, sizeof(why));
    check(kind == 3 && strstr(why, "tp*cp*pp*dp") != NULL, "TP*CP*PP*DP must be the world (%s)", why);
    PlanModel odd = m;
    odd.seq = 8 * 24; /* CP 8: 24 rows per rank, not a multiple of TP 16 */
    PlanLayout sp = {.tp = 16, .pp = 1, .dp = 1, .mb = 1, .recompute = 0, .zero = 0, .sp = 1, .vpp = 1, .cp = 8};
    kind = plan_check_layout(&odd, 128, 1, &sp, why, sizeof(why));
    check(kind == 3 && strstr(why, "seq/cp") != NULL, "-sp 1: TP must divide seq/CP (%s)", why);

    /* time: the batch does not change with CP (m = 120 / (1 x 2)), the attention core splits by CP */
    PlanTime t;
    plan_time(&m, &h, &k, &l, 120, &t);
    check(t.m == 60 && t.slot_cp_s > 0 && t.slot_ring_s >= t.slot_cp_s,
          "CP 4: m = %d micro-batches per pipeline; ring exposed %.1f of %.1f ms per slot", t.m, 1e3 * t.slot_cp_s,
          1e3 * t.slot_ring_s);
    PlanLayout ls = l;
    PlanTime tsel;
    ls.recompute = PLAN_RC_SELECTIVE;
    plan_time(&m, &h, &k, &ls, 120, &tsel);
    check(same(tsel.iter_s, t.iter_s) && same(tsel.tflops, t.tflops),
          "CP 4, selective recomputation: nothing rebuilt (the lse is kept), the time and HW TF/s of none (%.1f)",
          tsel.tflops);
    PlanConsts k0 = k;
    k0.gemm_dim0 = 0; /* no shape term: the GEMM time is the FLOPs' */
    double g1, m1s, g4, m4s;
    plan_attn_core_fwd_cp(&m, 8, 1, 1, &a, &k0, &g1, &m1s);
    plan_attn_core_fwd_cp(&m, 8, 1, 4, &a, &k0, &g4, &m4s);
    /* Q K^T and att V on one rank: 2 x 2 x (s/CP) x s x 160 x 16 heads FLOPs at 0.57 x 312 TFLOP/s */
    double flops4 = 4.0 * 8192 * 32768 * 160 * 16;
    check(same(g4, flops4 / (0.57 * 312e12)) && same(g4, g1 / 4) && same(m4s, m1s / 4),
          "attention core on a CP 4 rank: %.2f ms of GEMMs = 1/4 of the whole sequence's, softmax bytes 1/4", 1e3 * g4);

    /* the search: CP only from seq 8192 on, over CPs that split the world and the sequence with >= 1024 rows */
    PlanRequest r;
    plan_request_init(&r);
    r.model = m;
    r.nodes = 280;
    r.gb = 120;
    int cnt = 0, seen[64] = {0}, bad = 0;
    PlanRow* rows = planx_enumerate(&r, &h, 280, &cnt);
    for (int i = 0; i < cnt; i++) {
        int c = plan_cp(&rows[i].lay);
        if (c < 64) seen[c]++;
        if (c >= 64 || 32768 % (2 * c) || 32768 / c < 1024) bad++;
    }
    free(rows);
    check(seen[1] && seen[2] && seen[4] && seen[8] && seen[16] && seen[32] && !bad && !seen[3] && !seen[5],
          "seq 32768 on 2240 GPUs: CP 1, 2, 4, 8, 16, 32 searched (%d, %d, %d, %d, %d, %d rows), none else", seen[1],
          seen[2], seen[4], seen[8], seen[16], seen[32]);
    PlanRequest s2 = request_530b(280);
    rows = planx_enumerate(&s2, &a, 280, &cnt);
    bad = 0;
    for (int i = 0; i < cnt; i++) bad += plan_cp(&rows[i].lay) != 1;
    free(rows);
    check(cnt > 0 && bad == 0 && !plan_cp_searched(&s2), "seq 2048 (the paper's): CP not searched (%d rows, all CP 1)",
          cnt);
    r.cp = 8;
    rows = planx_enumerate(&r, &h, 280, &cnt);
    bad = 0;
    for (int i = 0; i < cnt; i++) bad += plan_cp(&rows[i].lay) != 8;
    free(rows);
    check(cnt > 0 && bad == 0, "-cp 8 pins it (%d rows, all CP 8)", cnt);

    /* the worked example (doc/planner.md): 530b at seq 32768, 120 sequences, 280 H100 nodes */
    PlanRow best, none;
    memset(&best, 0, sizeof(best));
    memset(&none, 0, sizeof(none));
    r.cp = 0;
    int ok = plan_recommend(&r, &h, 280, &best) == 0;
    r.cp = 1;
    ok = ok && plan_recommend(&r, &h, 280, &none) == 0;
    check(ok && plan_cp(&best.lay) > 1 && best.time.iter_s < none.time.iter_s,
          "530b seq 32768 on 280 H100 nodes: CP %d recommended, %.2f s against %.2f s without CP (PREDICTED)",
          plan_cp(&best.lay), best.time.iter_s, none.time.iter_s);
}

/* ---------------------------------------------------------------------------------- */
/* CLI: ./test_planner --plan [model/layout flags] [planner flags]                     */

static int cli(int argc, char** argv) {
    PlanRequest r;
    plan_request_init(&r);
    /* the model and layout flags (the trainer's own parser gives these to the planner) */
    const struct {
        const char* flag;
        int* field;
    } ints[] = {{"-L", &r.model.L},     {"-H", &r.model.H}, {"-heads", &r.model.heads},
                {"-seq", &r.model.seq}, {"-V", &r.model.V}, {"-tp", &r.tp},
                {"-cp", &r.cp},         {"-pp", &r.pp},     {"-dp", &r.dp},
                {"-mb", &r.mb},         {"-gb", &r.gb},     {"-recompute", &r.recompute},
                {"-zero", &r.zero},     {"-sp", &r.sp},     {"-vpp", &r.vpp}};
    for (int i = 2; i < argc; i++) {
        const char* f = argv[i];
        const char* v = i + 1 < argc ? argv[i + 1] : NULL;
        int* ip = NULL;
        if (strcmp(f, "-model") == 0) {
            if (v == NULL || plan_model_preset(v, &r.model) != 0) {
                fprintf(stderr, "unknown model %s\n", v ? v : "");
                return 2;
            }
            i++;
            continue;
        }
        for (size_t j = 0; j < sizeof(ints) / sizeof(ints[0]); j++)
            if (strcmp(f, ints[j].flag) == 0) ip = ints[j].field;
        if (ip != NULL) {
            if (v == NULL || !planx_parse_int(v, ip)) {
                fprintf(stderr, "bad value for %s\n", f);
                return 2;
            }
            i++;
            continue;
        }
        int rc = plan_parse_flag(&r, f, v);
        if (rc == 1) {
            i++;
            continue;
        }
        if (rc < 0) return 2;
        fprintf(stderr, "unknown flag %s\n", f);
        return 2;
    }
    return plan_run(&r, stdout);
}

/* The checkpoint terms by hand: 530b (V 51200, seq 2048, H 20480, L 105), TP 8 x PP 35 x DP 16,
 * ZeRO-1, 560 nodes. Per TP rank the checkpoint holds the sharded matrices and biases once and
 * the replicated parts (row-parallel biases 2H and LayerNorms 4H per layer, the position
 * embedding, the final LayerNorm 2H) TP times; with PP > 1 the tied embedding twice (first and
 * last stage). 12 B per value, 1 KiB of header per rank. Young/Daly: tau = sqrt(2 C M). */
static void test_checkpoint(void) {
    PlanModel m;
    plan_model_preset("530b", &m);
    Cluster c;
    cluster_preset("selene-a100", &c);
    c.fs_gbps = 100.0;
    c.d2h_gbps = 25.0;
    PlanLayout l = {8, 35, 16, 1, 1, 1, 0, 1, PLAN_SCHED_1F1B, 1};
    double H = m.H, L = m.L, V = m.V, T = m.seq;
    double unique = L * (12 * H * H + 13 * H) + V * H + T * H + 2 * H;
    double held = unique + 7.0 * (L * 6 * H + T * H + 2 * H) + V * H; /* TP - 1 = 7 more copies; the tied head */
    double total = 12.0 * held + 1024.0 * 8 * 35 * 16;
    /* the largest rank: the first stage (3 layers, the embedding slice and the position embedding) */
    double first = 3 * ((12 * H * H + 7 * H) / 8 + 6 * H) + V * H / 8 + T * H;
    double rank = 1024.0 + 4.0 * first + 8.0 * first / 16;
    double write = total / 100e9, copy = (rank - 1024.0) / 25e9;
    double M = 6300.0 * 3600.0 / 560; /* 40500 s */
    double iter = 35.0;
    PlanCkpt k;
    plan_checkpoint(&m, &l, &c, 560, iter, 6300.0, &k);
    check(same(k.total_bytes, total) && same(k.rank_bytes, rank),
          "checkpoint size: %.6g TB in all (hand %.6g), largest rank %.6g GB (hand %.6g)", k.total_bytes / 1e12,
          total / 1e12, k.rank_bytes / 1e9, rank / 1e9);
    check(same(k.write_s, write) && same(k.copy_s, copy) && same(k.stall_sync_s, write + copy) &&
              same(k.stall_async_s, copy) && same(k.mtbf_job_s, M),
          "write %.4g s (hand %.4g), copy %.4g s (hand %.4g), job MTBF %.6g s (hand 40500)", k.write_s, write, k.copy_s,
          copy, k.mtbf_job_s);
    int es = (int)floor(sqrt(2 * (write + copy) * M) / iter + 0.5), ea = (int)floor(sqrt(2 * copy * M) / iter + 0.5);
    if (ea < 1) ea = 1;
    while (ea * iter < write) ea++;
    double ls = (write + copy) / (es * iter) + es * iter / (2 * M),
           la = copy / (ea * iter) + (ea * iter / 2 + write) / M;
    check(k.every_sync == es && k.every_async == ea && same(k.lost_sync, ls) && same(k.lost_async, la),
          "Young/Daly: -ckpt-every %d synchronous (hand %d), %d in the background (hand %d); lost %.3f%% and %.3f%%",
          k.every_sync, es, k.every_async, ea, 100 * k.lost_sync, 100 * k.lost_async);
    /* the background interval is never shorter than the write (one save in flight) */
    c.fs_gbps = 1.0;
    plan_checkpoint(&m, &l, &c, 560, iter, 6300.0, &k);
    check(k.every_async * iter >= k.write_s && (k.every_async - 1) * iter < k.write_s,
          "a slow filesystem: the background interval %d steps covers the %.0f s write", k.every_async, k.write_s);
    /* the presets carry the constants, the flags override them */
    PlanRequest r;
    plan_request_init(&r);
    Cluster h;
    int ok = cluster_preset("h100", &h) == 0 && h.fs_gbps == 200 && h.d2h_gbps == 50 && r.mtbf_hours == 6300;
    ok = ok && plan_parse_flag(&r, "-fs-bw", "42") == 1 && plan_parse_flag(&r, "-d2h-bw", "7") == 1 &&
         plan_request_cluster(&r, &h) == 0 && h.fs_gbps == 42 && h.d2h_gbps == 7;
    check(ok, "checkpoint constants in the presets (h100: 200 and 50 GB/s), -fs-bw and -d2h-bw override them");
}

int main(int argc, char** argv) {
    if (argc > 1 && strcmp(argv[1], "--plan") == 0) return cli(argc, argv);
    test_presets_and_flags();
    test_terms();
    test_paper_points();
    test_memory_530b();
    test_recommendation();
    test_scaling();
    test_sp_recompute_vpp();
    test_schedules();
    test_plan_run();
    test_kernel_model();
    test_zero();
    test_checkpoint();
    test_cp();
    return test_summary();
}
