/*
 * startup.h: what every rank of either trainer does first: parse the flags, validate the
 * model, the recipe and the layout for the whole ramp, answer -h, -check [-world N] and
 * -plan, and bring up MPI and the layout's groups. A bad configuration is detected
 * identically by every rank; rank 0 prints the one-line error and every rank exits 1, so
 * nothing hangs.
 */
#ifndef LLMC_STARTUP_H
#define LLMC_STARTUP_H

#include <stdio.h>
#include <stdlib.h>
#include "comm.h"
#include "config.h"
#include "planner.h"

static void startup(Config* cfg, Comm* comm, int argc, char** argv) {
    comm_init_single(comm);
#ifdef USE_MPI
    if (launched_by_mpi()) {
        mpiCheck(MPI_Init(&argc, &argv));
        comm->mpi = 1;
        mpiCheck(MPI_Comm_rank(MPI_COMM_WORLD, &comm->rank));
        mpiCheck(MPI_Comm_size(MPI_COMM_WORLD, &comm->world));
    }
#endif
    config_defaults(cfg);
    char err[CFG_ERR_LEN];
    PlanRequest plan;
    plan_request_init(&plan);
    int bad = config_parse(cfg, argc, argv, plan_config_flag, &plan, err) != 0 || config_validate(cfg, err) != 0;
    if (!bad && cfg->plan && (cfg->recompute == RECOMPUTE_SELECTIVE || cfg->sp || cfg->vpp > 1)) {
        snprintf(err, sizeof(err), "-plan does not model -recompute selective, -sp 1 or -vpp > 1 yet (plan with -recompute 0/1, -sp 0, -vpp 1)");
        bad = 1;
    }
    if (!bad && cfg->plan) { // the layout planner: pure arithmetic, no MPI needed
        int rc = 0;
        if (comm->rank == 0) {
            plan.model.L = cfg->L; plan.model.H = cfg->H; plan.model.heads = cfg->heads;
            plan.model.seq = cfg->seq; plan.model.V = cfg->Vp;
            plan.gb = (int)cfg->gb;
            // layout flags the user gave are fixed; the others are searched
            plan.tp = plan_argv_has(argc, argv, "-tp") ? cfg->tp : 0;
            plan.pp = plan_argv_has(argc, argv, "-pp") ? cfg->pp : 0;
            plan.dp = plan_argv_has(argc, argv, "-dp") ? cfg->dp : 0;
            plan.mb = plan_argv_has(argc, argv, "-mb") ? cfg->mb : 0;
            plan.recompute = plan_argv_has(argc, argv, "-recompute") ? cfg->recompute : -1;
            plan.zero = plan_argv_has(argc, argv, "-zero") ? cfg->zero : -1;
            if (cfg->peak_tflops > 0) plan.o_peak = cfg->peak_tflops;
            rc = plan_run(&plan, stdout);
        }
#ifdef USE_MPI
        if (comm->mpi) MPI_Finalize();
#endif
        exit(rc);
    }
    int world = comm->world;
    if (!bad && cfg->world > 0) {
        if (!cfg->check) { snprintf(err, sizeof(err), "-world only goes with -check (a real run takes its world size from mpirun)"); bad = 1; }
        else world = cfg->world;
    }
    if (!bad) bad = config_validate_layout(cfg, world, err) != 0;
    if (bad) {
        if (comm->rank == 0) fprintf(stderr, "error: %s\n", err);
#ifdef USE_MPI
        if (comm->mpi) MPI_Finalize();
#endif
        exit(1);
    }
    if (cfg->dp == 0) cfg->dp = world / (cfg->tp * cfg->pp);
    if (cfg->help || cfg->check) {
        if (comm->rank == 0) {
            if (cfg->help) config_print_help(stdout);
            else printf("check: flags, model and layout are valid (tp=%d pp=%d dp=%d, world %d)\n", cfg->tp, cfg->pp, cfg->dp, world);
        }
#ifdef USE_MPI
        if (comm->mpi) MPI_Finalize();
#endif
        exit(0);
    }
    if (cfg->dp == 1) cfg->zero = 0; // ZeRO-1 over one data-parallel rank is plain AdamW
#ifdef USE_MPI
    if (comm->mpi) comm_init_groups(comm, cfg->tp, cfg->pp, cfg->dp, (size_t)cfg->mb * cfg->seq * cfg->H);
#endif
}

#endif // LLMC_STARTUP_H
