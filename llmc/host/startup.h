/*
 * startup.h: what every rank of either trainer does first: parse the flags, validate the
 * model, the recipe and the layout for the whole ramp, answer -h, -check [-world N] and
 * -plan, and bring up MPI and the layout's groups. A bad configuration is detected
 * identically by every rank; rank 0 prints the one-line error and every rank exits 1, so
 * nothing hangs. The named input files are checked here too (before any work): the
 * tokenizer loads and covers V, -prompt-text encodes (startup_prompt_text), -init-from is a
 * complete checkpoint, -log is not a FIFO, and -check validates the shards of -i/-j when
 * they are given.
 */
#ifndef LLMC_STARTUP_H
#define LLMC_STARTUP_H

#include <stdio.h>
#include <stdlib.h>
#include "comm.h"
#include "config.h"
#include "dataloader.h"
#include "../planner/planner.h"
#include "autolayout.h"
#include "runrecord.h"
#include "stop.h"
#include "bpe.h"
#include "tokenizer.h"

// -plan, -check and -h answer on stdout: a failed write (stdout on a full disk) is an error
static int startup_stdout_failed(void) {
    if (fflush(stdout) == 0 && !ferror(stdout)) return 0;
    fprintf(stderr, "error: writing standard output failed: %s\n", strerror(errno ? errno : EIO));
    return 1;
}

// -prompt-text as token ids (at most cap): the text encoded with the tokenizer.json beside -tokenizer
// FILE.bin (dev/data/prepare.py writes the pair), which must be that .bin's pair; every id below V,
// and room left in -seq for the sample. 0, or 1 with one line in err (CFG_ERR_LEN).
static int startup_prompt_text(const Config* c, int* ids, int cap, int* n, char* err) {
    char json[CFG_PATH_LEN + 8];
    char e[1400];
    Bpe b;
    Tokenizer t;
    *n = 0;
    if (bpe_json_path(c->tokenizer, json, sizeof(json)) != 0) {
        snprintf(err, CFG_ERR_LEN, "-prompt-text: the path of -tokenizer %s is too long", c->tokenizer);
        return 1;
    }
    if (bpe_load(&b, json, e, sizeof(e)) != 0) {
        snprintf(err, CFG_ERR_LEN,
                 "-prompt-text: %s (dev/data/prepare.py writes PREFIX_tokenizer.json beside PREFIX_tokenizer.bin: "
                 "run it again, or give the -tokenizer that has one)",
                 e);
        return 1;
    }
    int bad = tokenizer_load(&t, c->tokenizer, e, sizeof(e)) != 0;
    if (!bad) bad = bpe_check_decoder(&b, &t, c->tokenizer, e, sizeof(e)) != 0;
    if (bad) {
        snprintf(err, CFG_ERR_LEN, "-prompt-text: %s (run dev/data/prepare.py again to write both files)", e);
        tokenizer_free(&t);
        bpe_free(&b);
        return 1;
    }
    tokenizer_free(&t);
    long got = bpe_encode(&b, c->prompt_text, strlen(c->prompt_text), ids, cap, e, sizeof(e));
    bpe_free(&b);
    if (got < 0) {
        snprintf(err, CFG_ERR_LEN, "-prompt-text: %s", e);
        return 1;
    }
    if (got + 1 >= c->seq || got > cap) { // as -prompt: the sample needs a position after the prompt
        snprintf(err, CFG_ERR_LEN, "-prompt-text is %ld tokens, too many for seq %d", got, c->seq);
        return 1;
    }
    for (long k = 0; k < got; k++) {
        if (ids[k] >= c->V) {
            snprintf(err, CFG_ERR_LEN, "-prompt-text encodes to token %d, not below V=%d: pass the tokenizer's -V",
                     ids[k], c->V);
            return 1;
        }
    }
    *n = (int)got;
    return 0;
}

// The files the flags name, checked the same way on every rank. 0, or 1 (err filled).
// dp: the layout's data-parallel size (a validation set needs a micro-batch per DP rank).
static int startup_check_inputs(const Config* c, int rank, int dp, int argc, char** argv, char* err) {
    char e[1400];
    struct stat st;
    if (c->tokenizer[0] != '\0') {
        Tokenizer t;
        if (tokenizer_load(&t, c->tokenizer, e, sizeof(e)) != 0) {
            snprintf(err, CFG_ERR_LEN, "%s", e);
            return 1;
        }
        uint32_t vocab = t.vocab_size;
        tokenizer_free(&t);
        if ((int64_t)vocab < c->V) {
            snprintf(err, CFG_ERR_LEN,
                     "tokenizer %s has %u tokens, fewer than the vocabulary V=%d: pass the right -V or -tokenizer",
                     c->tokenizer, vocab, c->V);
            return 1;
        }
    }
    if (c->prompt_text[0] != '\0') {
        int ids[CFG_PATH_LEN]; // at most one token per byte of the text
        int n;
        if (startup_prompt_text(c, ids, CFG_PATH_LEN, &n, err) != 0) return 1;
    }
    if (c->init_from[0] != '\0') {
        char done[CFG_PATH_LEN + 16];
        snprintf(done, sizeof(done), "%s/DONE", c->init_from);
        if (stat(c->init_from, &st) != 0 || !S_ISDIR(st.st_mode)) {
            snprintf(err, CFG_ERR_LEN, "-init-from %s is not a checkpoint directory", c->init_from);
            return 1;
        }
        if (stat(done, &st) != 0) {
            snprintf(err, CFG_ERR_LEN, "-init-from %s has no DONE marker: not a complete checkpoint", c->init_from);
            return 1;
        }
    }
    // the log itself is opened (non-blocking) later; refusing a FIFO here fails before any work
    if (c->log_path[0] != '\0' && stat(c->log_path, &st) == 0 &&
        (S_ISFIFO(st.st_mode) || S_ISSOCK(st.st_mode) || S_ISDIR(st.st_mode))) {
        snprintf(err, CFG_ERR_LEN, "log file %s is %s, not a regular file", c->log_path, safeio_kind(st.st_mode));
        return 1;
    }
    // a real run validates its shards when it opens them; -check does it for shards it is given
    // (shards that are not there are only noted: a dry run may check a recipe away from its data)
    if (c->check) {
        for (int k = 0; k < 2; k++) { // a blend: every dataset, with the epochs the run takes of each
            const char* g = k == 0 ? c->train_glob : c->val_glob;
            int given = plan_argv_has(argc, argv, k == 0 ? "-i" : "-j") && g[0] != '\0';
            BlendSpec b;
            memset(&b, 0, sizeof(b));
            int blend = 0;
            if (c->blend_file[0] != '\0')
                blend = blend_load_file(c->blend_file, k == 0 ? "train" : "valid", &b, e, sizeof(e));
            if (blend > 0 && k == 1 && given && strcmp(g, CFG_DEFAULT_VAL) != 0) {
                snprintf(err, CFG_ERR_LEN,
                         "-blend %s has a \"valid\" list and -j %s names validation data too: give one", c->blend_file,
                         g);
                return 1;
            }
            if (blend == 0 && given) blend = blend_parse_arg(g, &b, e, sizeof(e)) == 0 ? !b.plain : -1;
            if (blend > 0)
                blend = dataset_check_blend(&b, c->V, c->seq, c->total_tokens, rank == 0 && k == 0, e, sizeof(e)) == 0
                            ? 1
                            : -1;
            if (blend < 0) {
                snprintf(err, CFG_ERR_LEN, "%s", e);
                return 1;
            }
            if (blend > 0 || !given) continue;
            int64_t need = k == 0 ? 1 : (c->val_every > 0 ? (int64_t)c->mb * dp : 0);
            int r = dataset_validate_glob(g, c->V, c->seq, need, e, sizeof(e));
            if (r < 0) {
                snprintf(err, CFG_ERR_LEN, "%s", e);
                return 1;
            }
            if (r > 0 && rank == 0) printf("check: %s (not validated)\n", e);
        }
    }
    return 0;
}

// -resume with -o: the run's recorded flags (DIR/config.json) are parsed first and this command
// line on top, so `-o DIR -resume` needs no other flag. Either way cfg->argv_record gets the flags
// that define the run now (the record's, with this command line's in place of the same flags:
// a run resumed a thousand times records them once), which run_claim_outdir records, and
// cfg->rewound the record's rewound data ranges. 0, or 1 (err).
static int startup_replay_record(Config* cfg, int argc, char** argv, PlanRequest* plan, int rank, char* err) {
    cfg->argv_record[0] = '\0';
    int rargc = 1;
    char* none[2] = {(char*)"train_gpt", NULL};
    char** rargv = none;
    char rewound[CFG_PATH_LEN] = "";
    int have = cfg->resume && cfg->out_dir[0]
                   ? runrecord_load(cfg->out_dir, &rargc, &rargv, rewound, sizeof(rewound), err, CFG_ERR_LEN)
                   : 0;
    if (have < 0) return 1;
    PlanRequest scratch = *plan; // the planner flags' spans are read on a copy
    if (have > 0) {
        Config* both = (Config*)malloc_check(sizeof(Config));
        Config* rec = (Config*)malloc_check(sizeof(Config));
        config_defaults(both);
        config_defaults(rec);
        int bad = config_parse(both, rargc, rargv, plan_config_flag, plan, err) != 0 ||
                  config_parse(rec, rargc, rargv, plan_config_flag, plan, err) != 0 ||
                  config_parse(both, argc, argv, plan_config_flag, plan, err) != 0;
        if (!bad) {
            memcpy(cfg, both, sizeof(Config));
            snprintf(cfg->rewound, sizeof(cfg->rewound), "%s", rewound);
            if (rank == 0) {
                printf("resume: the flags recorded in %s/config.json, then this command line\n", cfg->out_dir);
                runrecord_report_changes(stdout, rec, cfg);
            }
        } else if (err[0] != '\0') { // the record's own flags: say where they come from
            char e[CFG_ERR_LEN];
            snprintf(e, sizeof(e), "%s", err);
            snprintf(err, CFG_ERR_LEN, "%.440s (the flags recorded in -o's config.json, then this command line)", e);
        }
        free(both);
        free(rec);
        if (bad) {
            runrecord_free_argv(rargc, rargv);
            return 1;
        }
    }
    int over = runrecord_merge(cfg->argv_record, sizeof(cfg->argv_record), rargc, rargv, argc, argv, plan_config_flag,
                               &scratch) != 0;
    if (have > 0) runrecord_free_argv(rargc, rargv);
    if (over) {
        snprintf(err, CFG_ERR_LEN, "the command line is too long to record in -o's config.json (%zu bytes at most)",
                 sizeof(cfg->argv_record));
        return 1;
    }
    return 0;
}

// 1 when every rank parsed the same configuration (-threads may differ between nodes): one run,
// one recipe. An MPMD launch with, say, another -lr on one rank would train a mix.
static int startup_same_flags(const Config* cfg, const Comm* comm) {
#ifdef USE_MPI
    if (!comm->mpi || comm->world == 1) return 1;
    Config c;
    memcpy(&c, cfg, sizeof(c)); // with its padding, zeroed by config_defaults
    c.threads = 0;
    uint64_t h = fnv1a64(FNV1A64_INIT, &c, sizeof(c));
    uint64_t lo = h;
    uint64_t hi = h;
    mpiCheck(MPI_Allreduce(MPI_IN_PLACE, &lo, 1, MPI_UINT64_T, MPI_MIN, MPI_COMM_WORLD));
    mpiCheck(MPI_Allreduce(MPI_IN_PLACE, &hi, 1, MPI_UINT64_T, MPI_MAX, MPI_COMM_WORLD));
    return lo == hi;
#else
    (void)cfg;
    (void)comm;
    return 1;
#endif
}

// -layout auto: the planner's choice into cfg, and into the run record, so that a resume keeps it
static int startup_auto_layout(Config* cfg, PlanRequest* plan, int world, double device_mem_gib, int rank, char* err) {
    // a resume whose record holds the other nine flags: its choice had no CP (autolayout_name records
    // -cp only above 1)
    if ((cfg->layout_pins & 0x1ff) == 0x1ff && cfg->resume) cfg->layout_pins |= AL_CP;
    int pinned_all = cfg->layout_pins == 0x3ff; // a resume: the record holds the choice already
    if (autolayout_choose(cfg, plan, world, device_mem_gib, rank, err) != 0) return 1;
    if (pinned_all) return 0;
    char buf[sizeof(cfg->layout_choice)];
    snprintf(buf, sizeof(buf), "%s", cfg->layout_choice);
    char* toks[24] = {(char*)"train_gpt"};
    int n = 1;
    for (char *save = NULL, *t = strtok_r(buf, " ", &save); t != NULL && n < 24; t = strtok_r(NULL, " ", &save))
        toks[n++] = t;
    int rc = 0;
    char** rec = NULL;
    PlanRequest scratch = *plan;
    int nrec = 0;
    char* merged = (char*)malloc_check(sizeof(cfg->argv_record));
    if (runrecord_tokens(cfg->argv_record, &nrec, &rec) != 0 ||
        runrecord_merge(merged, sizeof(cfg->argv_record), nrec, rec, n, toks, plan_config_flag, &scratch) != 0) {
        snprintf(err, CFG_ERR_LEN, "the command line is too long to record with -layout auto's choice");
        rc = 1;
    } else {
        memcpy(cfg->argv_record, merged, sizeof(cfg->argv_record));
    }
    if (rec != NULL) runrecord_free_argv(nrec, rec);
    free(merged);
    return rc;
}

// -plan's "memory per rank" rows come from the trainer that runs -plan: its own count of one
// rank's allocations (llmc/host/memplan.h), so each binary's -plan prints what its start-up
// table prints. stage_bytes: the bytes of params, grads, optimizer and activations (memplan.h's
// NUM_MEM kinds, in that order) on the first rank of pipeline stage `stage` in c's layout; 0, or
// -1 when it has none. The CPU trainer passes memplan.h's mem_plan_cpu_stage.
typedef struct {
    const char* name; // whose count, e.g. "the CPU trainer (fp32)"
    int (*stage_bytes)(const Config* c, size_t chunk, int stage, size_t bytes[4]);
} StartupMemPlan;
typedef struct {
    const Config* cfg;
    size_t chunk; // the trainer's largest MPI call (comm.h), which sizes ZeRO's staging
    const StartupMemPlan* mp;
} StartupMemHook;

// planner.h's PlanRankMemFn: the parsed configuration with the planner's layout l
static int startup_rank_mem(void* user, const PlanLayout* l, int stage, double bytes[4]) {
    const StartupMemHook* h = (const StartupMemHook*)user;
    Config c;
    memcpy(&c, h->cfg, sizeof(c));
    autolayout_apply(&c, l);
    size_t b[4];
    if (h->mp->stage_bytes(&c, h->chunk, stage, b) != 0) return -1;
    for (int k = 0; k < 4; k++) bytes[k] = (double)b[k];
    return 0;
}

// device_mem_gib: the GPU's memory for -layout auto (the CUDA trainer), 0 on the CPU; memplan:
// -plan's memory rows (NULL: none)
static void startup(Config* cfg, Comm* comm, int argc, char** argv, double device_mem_gib,
                    const StartupMemPlan* memplan) {
    stop_ignore_write_signals();
    comm_init_single(comm);
#ifdef USE_MPI
    if (launched_by_mpi()) {
        mpiCheck(MPI_Init(&argc, &argv));
        comm->mpi = 1;
        mpiCheck(MPI_Comm_rank(MPI_COMM_WORLD, &comm->rank));
        mpiCheck(MPI_Comm_size(MPI_COMM_WORLD, &comm->world));
    }
#endif
    // srun -n N without a PMI plugin Open MPI speaks (it needs --mpi=pmix: Debian's Open MPI has
    // no PMI-2), or a binary built without MPI: every task would be rank 0 of 1 and train alone,
    // the same steps N times into the same -o. Refused before any work.
    const char* srun_tasks = getenv("SLURM_STEP_NUM_TASKS");
    if (!comm->mpi && srun_tasks != NULL && atoi(srun_tasks) > 1)
        die("srun started %s tasks, but this process is not a rank among them (%s): each would train alone; "
            "launch with srun --mpi=pmix (or MpiDefault=pmix in slurm.conf)",
            srun_tasks, launched_by_mpi() ? "this binary was built without MPI" : "no PMIx in its environment");
    config_defaults(cfg);
    char err[CFG_ERR_LEN];
    PlanRequest plan;
    plan_request_init(&plan);
    int bad = config_parse(cfg, argc, argv, plan_config_flag, &plan, err) != 0 ||
              startup_replay_record(cfg, argc, argv, &plan, comm->rank, err) != 0 || config_validate(cfg, err) != 0;
    if (!bad && cfg->plan) { // the layout planner: pure arithmetic, no MPI needed
        int rc = 0;
        if (comm->rank == 0) {
            plan.model.L = cfg->L;
            plan.model.H = cfg->H;
            plan.model.heads = cfg->heads;
            plan.model.seq = cfg->seq;
            plan.model.V = cfg->Vp;
            plan.gb = (int)cfg->gb;
            // layout flags the user gave are fixed; the others are searched
            plan.tp = plan_argv_has(argc, argv, "-tp") ? cfg->tp : 0;
            plan.cp = plan_argv_has(argc, argv, "-cp") ? cfg->cp : 0; // searched from seq 8192 on, else 1
            plan.pp = plan_argv_has(argc, argv, "-pp") ? cfg->pp : 0;
            plan.dp = plan_argv_has(argc, argv, "-dp") ? cfg->dp : 0;
            plan.mb = plan_argv_has(argc, argv, "-mb") ? cfg->mb : 0;
            plan.recompute = plan_argv_has(argc, argv, "-recompute") ? cfg->recompute : -1;
            plan.zero = plan_argv_has(argc, argv, "-zero") ? cfg->zero : -1;
            plan.sp = plan_argv_has(argc, argv, "-sp") ? cfg->sp : -1;
            plan.vpp = plan_argv_has(argc, argv, "-vpp") ? cfg->vpp : 0;
            // -pp-schedule pins the schedule as under -layout auto, unless -plan-schedule names some
            if (plan.sched_mask == 0 && plan_argv_has(argc, argv, "-pp-schedule"))
                plan.sched_mask = config_zb(cfg)                                 ? PLAN_SB_ZBH1
                                  : strcmp(cfg->pp_schedule, "interleaved") == 0 ? PLAN_SB_INTERLEAVED
                                                                                 : PLAN_SB_1F1B | PLAN_SB_INTERLEAVED;
            if (cfg->peak_tflops > 0) plan.o_peak = cfg->peak_tflops;
            StartupMemHook hook = {cfg, comm->chunk, memplan};
            if (memplan != NULL) {
                plan.rank_mem = startup_rank_mem;
                plan.rank_mem_user = &hook;
                plan.rank_mem_name = memplan->name;
            }
            plan.mtbf_hours = cfg->mtbf_hours;
            struct stat st; // fopen would block on a FIFO
            if (plan.csv_path != NULL && stat(plan.csv_path, &st) == 0 &&
                (S_ISFIFO(st.st_mode) || S_ISSOCK(st.st_mode) || S_ISDIR(st.st_mode))) {
                fprintf(stderr, "error: -plan-csv %s is %s, not a regular file\n", plan.csv_path,
                        safeio_kind(st.st_mode));
                rc = 2;
            } else {
                rc = plan_run(&plan, stdout);
            }
            if (startup_stdout_failed()) rc = 1;
        }
#ifdef USE_MPI
        if (comm->mpi) MPI_Finalize();
#endif
        exit(rc);
    }
    int world = comm->world;
    if (!bad && cfg->world > 0) {
        if (!cfg->check) {
            snprintf(err, sizeof(err), "-world only goes with -check (a real run takes its world size from mpirun)");
            bad = 1;
        } else
            world = cfg->world;
    }
    if (!bad && strcmp(cfg->layout, "auto") == 0 && !cfg->help)
        bad = startup_auto_layout(cfg, &plan, world, device_mem_gib, comm->rank, err) != 0;
    if (!bad) bad = config_validate_layout(cfg, world, err) != 0;
    if (!bad && !cfg->help)
        bad = startup_check_inputs(cfg, comm->rank, cfg->dp ? cfg->dp : world / (cfg->tp * cfg->pp * cfg->cp), argc,
                                   argv, err) != 0;
    if (bad) {
        if (comm->rank == 0) fprintf(stderr, "error: %s\n", err);
#ifdef USE_MPI
        if (comm->mpi) MPI_Finalize();
#endif
        exit(1);
    }
    if (cfg->dp == 0) cfg->dp = world / (cfg->tp * cfg->pp * cfg->cp);
    if (!startup_same_flags(cfg, comm)) {
        if (comm->rank == 0)
            fprintf(stderr,
                    "error: the ranks were started with different flags (an MPMD launch?): start every rank "
                    "with the same command line\n");
#ifdef USE_MPI
        if (comm->mpi) MPI_Finalize();
#endif
        exit(1);
    }
    if (cfg->help || cfg->check) {
        if (comm->rank == 0) {
            if (cfg->help)
                config_print_help(stdout);
            else
                printf("check: flags, model and layout are valid (tp=%d cp=%d pp=%d dp=%d, world %d)\n", cfg->tp,
                       cfg->cp, cfg->pp, cfg->dp, world);
            if (startup_stdout_failed()) {
#ifdef USE_MPI
                if (comm->mpi) MPI_Finalize();
#endif
                exit(1);
            }
        }
#ifdef USE_MPI
        if (comm->mpi) MPI_Finalize();
#endif
        exit(0);
    }
    if (cfg->dp * cfg->cp == 1) cfg->zero = 0; // ZeRO over one rank of the CP x DP group is plain AdamW
#ifdef USE_MPI
    if (comm->mpi) comm_init_groups(comm, cfg->tp, cfg->pp, cfg->dp, cfg->cp, (size_t)cfg->mb * cfg->seq * cfg->H);
#endif
}

#endif // LLMC_STARTUP_H
