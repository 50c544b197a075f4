/*
 * autolayout.h: -layout auto. The trainer runs the layout planner's search (llmc/planner/)
 * for its own world size and launches the fastest feasible layout: TP, PP, DP, micro-batch,
 * -vpp, -sp, recomputation, the ZeRO level (0-3), the pipeline schedule (-pp-schedule) and, from
 * -seq 8192 on, context parallelism (-cp; planner.h's plan_cp_searched). A layout flag given on the
 * command line (or in the run record) pins that dimension, and the rest is searched. Feasible means the planner's
 * memory model fits the GPU with its headroom, and the trainer's own rules hold for every batch of the ramp
 * (config_validate_layout), because the layout is fixed for the whole run.
 *
 * Where the inputs come from:
 *   world          MPI (or -world with -check)
 *   GPUs per node  the launcher's local rank count (Open MPI, Slurm, MPICH), else -gpus-per-node
 *                  or the cluster preset; the nodes are world / GPUs per node
 *   GPU memory     -gpu-mem, else the device (the CUDA trainer passes it), else the preset
 *   cluster        -cluster NAME (a planner preset: bandwidths, peak), selene-a100 by default; the CPU
 *                  trainer plans for that cluster's GPUs and says so (it has no device to measure)
 * Every rank computes the same choice (pure arithmetic on the same inputs), so no collective
 * is needed. Rank 0 prints the choice, the runner-up, and why the choice is ahead (memory,
 * bubble, communication). The chosen flags are appended to the run record, so a resume keeps
 * the layout unless a flag given then says otherwise.
 *
 * API
 *   autolayout_gpus_per_node()                    the launcher's local rank count, or 0
 *   autolayout_choose(cfg, plan, world, mem, rank, err)   fills cfg's layout; 0, or 1 (err)
 */
#ifndef LLMC_AUTOLAYOUT_H
#define LLMC_AUTOLAYOUT_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "../planner/planner.h"
#include "config.h"

// the bits of config_layout_pins (config.h)
enum {
    AL_TP = 1,
    AL_PP = 2,
    AL_DP = 4,
    AL_MB = 8,
    AL_RECOMPUTE = 16,
    AL_ZERO = 32,
    AL_SP = 64,
    AL_VPP = 128,
    AL_SCHED = 256,
    AL_CP = 512
};

// ranks on this node, as the launcher says: Open MPI, Slurm, MPICH/Hydra; 0 when none says.
// Slurm: the step's own count first. An `srun -n 4` inside a job of --ntasks-per-node=8 keeps
// the job's SLURM_NTASKS_PER_NODE=8 in its environment; srun sets SLURM_STEP_TASKS_PER_NODE
// (and SLURM_TASKS_PER_NODE) to the step's 4.
static int autolayout_gpus_per_node(void) {
    const char* names[5] = {"OMPI_COMM_WORLD_LOCAL_SIZE", "SLURM_STEP_TASKS_PER_NODE", "SLURM_TASKS_PER_NODE",
                            "SLURM_NTASKS_PER_NODE", "MPI_LOCALNRANKS"};
    for (int k = 0; k < 5; k++) {
        const char* v = getenv(names[k]);
        int n = v ? atoi(v) : 0; // SLURM_TASKS_PER_NODE is "4(x2)": its first count
        if (n > 0) return n;
    }
    return 0;
}

// the layout of a planner row in cfg
static void autolayout_apply(Config* cfg, const PlanLayout* l) {
    cfg->tp = l->tp;
    cfg->cp = l->cp > 1 ? l->cp : 1;
    cfg->pp = l->pp;
    cfg->dp = l->dp;
    cfg->mb = l->mb;
    cfg->recompute = l->recompute;
    cfg->zero = l->zero;
    cfg->sp = l->sp;
    cfg->vpp = l->vpp > 0 ? l->vpp : 1;
    snprintf(cfg->pp_schedule, sizeof(cfg->pp_schedule), "%s", l->sched == PLAN_SCHED_ZBH1 ? "zb-h1" : "1f1b");
}

static void autolayout_name(char* s, size_t n, const PlanLayout* l) {
    static const char* rc[3] = {"0", "full", "selective"};
    char cp[24] = ""; // -cp last, and only above 1: a record without it resumes with none (startup.h)
    if (l->cp > 1) snprintf(cp, sizeof(cp), " -cp %d", l->cp);
    snprintf(s, n, "-tp %d -pp %d -dp %d -mb %d -vpp %d -sp %d -recompute %s -zero %d -pp-schedule %s%s", l->tp, l->pp,
             l->dp, l->mb, l->vpp > 0 ? l->vpp : 1, l->sp, rc[l->recompute >= 0 && l->recompute < 3 ? l->recompute : 0],
             l->zero, l->sched == PLAN_SCHED_ZBH1 ? "zb-h1" : "1f1b", cp);
}

// why a is ahead of b: the parts of the step time and the memory that differ most
static void autolayout_why(char* s, size_t n, const PlanRow* a, const PlanRow* b) {
    const char* what[4] = {"pipeline bubble", "communication", "compute (recomputation, GEMM shapes)", "memory"};
    double da[4] = {a->time.bubble_s, a->time.comm_s, a->time.compute_s, a->mem.total / 1073741824.0};
    double db[4] = {b->time.bubble_s, b->time.comm_s, b->time.compute_s, b->mem.total / 1073741824.0};
    int best = 0;
    for (int k = 1; k < 3; k++)
        if (db[k] - da[k] > db[best] - da[best]) best = k;
    snprintf(s, n, "%s %.3g s vs %.3g s; memory %.1f vs %.1f GiB per GPU", what[best], da[best], db[best], da[3],
             db[3]);
}

static int autolayout_choose(Config* cfg, PlanRequest* plan, int world, double device_mem_gib, int rank, char* err) {
    plan->model.L = cfg->L;
    plan->model.H = cfg->H;
    plan->model.heads = cfg->heads;
    plan->model.seq = cfg->seq;
    plan->model.V = cfg->Vp;
    plan->gb = (int)cfg->gb;
    int pin = cfg->layout_pins;
    plan->tp = pin & AL_TP ? cfg->tp : 0;
    plan->cp = pin & AL_CP ? cfg->cp : 0; // searched from seq 8192 on (planner.h's plan_cp_searched), else 1
    plan->pp = pin & AL_PP ? cfg->pp : 0;
    plan->dp = pin & AL_DP ? cfg->dp : 0;
    plan->mb = pin & AL_MB ? cfg->mb : 0;
    plan->recompute = pin & AL_RECOMPUTE ? cfg->recompute : -1;
    plan->zero = pin & AL_ZERO ? cfg->zero : -1;
    plan->sp = pin & AL_SP ? cfg->sp : -1;
    plan->vpp = pin & AL_VPP ? cfg->vpp : 0;
    if (cfg->peak_tflops > 0) plan->o_peak = cfg->peak_tflops;
    // the schedule: -pp-schedule pins it (1f1b: with or without chunks), else every one the
    // trainer runs (or those -plan-schedule names)
    if (pin & AL_SCHED)
        plan->sched_mask = config_zb(cfg)                                 ? PLAN_SB_ZBH1
                           : strcmp(cfg->pp_schedule, "interleaved") == 0 ? PLAN_SB_INTERLEAVED
                                                                          : PLAN_SB_1F1B | PLAN_SB_INTERLEAVED;
    int gpn_from = plan->o_gpus_per_node > 0 ? 0 : autolayout_gpus_per_node();
    if (gpn_from > 0) plan->o_gpus_per_node = gpn_from;
    if (plan->o_mem <= 0 && device_mem_gib > 0) plan->o_mem = device_mem_gib;
    Cluster cl;
    if (plan_request_cluster(plan, &cl) != 0) {
        snprintf(err, CFG_ERR_LEN, "-layout auto: unknown -cluster '%s' (selene-a100, h100, h200)", plan->cluster_name);
        return 1;
    }
    if (cl.gpus_per_node > world) cl.gpus_per_node = world; // a single node with fewer ranks than the preset's
    if (world % cl.gpus_per_node != 0) {
        snprintf(err, CFG_ERR_LEN,
                 "-layout auto: world size %d is not a whole number of nodes of %d GPUs: give "
                 "-gpus-per-node N",
                 world, cl.gpus_per_node);
        return 1;
    }
    plan->o_gpus_per_node = cl.gpus_per_node;
    int nodes = world / cl.gpus_per_node;
    int n = 0;
    PlanRow* rows = planx_enumerate(plan, &cl, nodes, &n);
    double cap = cl.mem_gb * 1073741824.0 * (1.0 - plan->k.headroom);
    int pick[2] = {-1, -1};
    for (int i = 0; i < n && rows[i].feasible && pick[1] < 0; i++) {
        Config t = *cfg;
        char why[CFG_ERR_LEN];
        autolayout_apply(&t, &rows[i].lay);
        if (rows[i].mem.total > cap || config_validate_layout(&t, world, why) != 0) continue;
        // config_validate refuses these: -ramp auto needs each replica's whole gradient
        if ((t.zero >= 2 || t.cp > 1) && t.ramp_auto) continue;
        pick[pick[0] < 0 ? 0 : 1] = i;
    }
    if (pick[0] < 0) {
        snprintf(err, CFG_ERR_LEN,
                 "-layout auto: no layout of %d ranks fits (%d candidates; memory %.0f GiB per GPU "
                 "with %.0f%% headroom, the ramp's batches, the model's shape): see ./train_gpt -plan with the same "
                 "flags",
                 world, n, cl.mem_gb, 100 * plan->k.headroom);
        free(rows);
        return 1;
    }
    const PlanRow* a = &rows[pick[0]];
    autolayout_apply(cfg, &a->lay);
    char name[160], why[200];
    autolayout_name(name, sizeof(name), &a->lay);
    snprintf(cfg->layout_choice, sizeof(cfg->layout_choice), "%s", name);
    if (rank == 0) {
        if (device_mem_gib <= 0) // the CPU trainer: no device to measure; say what the plan assumed
            printf(
                "layout auto: planned for %s GPUs (%.0f GiB, %.0f TFLOP/s each), not this machine: the CPU trainer "
                "has no device table; -cluster, -gpu-mem and -peak describe the machine to plan for\n",
                cl.name, cl.mem_gb, cl.peak_tflops);
        printf("layout auto: %s (PREDICTED %.3g s/step, %.1f GiB per GPU; %d nodes x %d %s, %d candidates)\n", name,
               a->time.iter_s, a->mem.total / 1073741824.0, nodes, cl.gpus_per_node, cl.name, n);
        if (pick[1] >= 0) {
            const PlanRow* b = &rows[pick[1]];
            autolayout_name(name, sizeof(name), &b->lay);
            autolayout_why(why, sizeof(why), a, b);
            printf("layout auto: runner-up %s (PREDICTED %.3g s/step, +%.1f%%): it loses on %s\n", name, b->time.iter_s,
                   100 * (b->time.iter_s / a->time.iter_s - 1), why);
        } else {
            printf("layout auto: no runner-up: this is the only feasible layout\n");
        }
        fflush(stdout);
    }
    free(rows);
    return 0;
}

#endif // LLMC_AUTOLAYOUT_H
