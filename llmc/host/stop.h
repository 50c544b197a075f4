/*
 * stop.h: graceful stop on SIGTERM, SIGINT or SIGUSR1 (what Slurm sends before a
 * preemption or, with --signal, before the time limit). The handler only records the
 * signal; the main loop (run.h) finishes the current step, agrees with every rank on
 * stopping after that same step (one small all-reduce per step), saves a checkpoint and
 * exits with RUN_EXIT_STOPPED. A second signal of the same kind kills at once
 * (SA_RESETHAND), so a user can still force an exit.
 *
 * Exit statuses of a training run: 0 finished; 1 error; 3 the spike guard stopped it
 * (do not restart); 4 stopped by a signal after saving (resume); 5 the step watchdog
 * ended a job that made no progress (restart).
 */
#ifndef LLMC_STOP_H
#define LLMC_STOP_H

#include <signal.h>
#include <string.h>

#define RUN_EXIT_SPIKE 3
#define RUN_EXIT_STOPPED 4
#define RUN_EXIT_WATCHDOG 5

// The signal received, 0 if none. Global because a signal handler can reach nothing else.
static volatile sig_atomic_t stop_signal_seen = 0;

static void stop_handler(int sig) { stop_signal_seen = sig; }

static void stop_install(void) {
    struct sigaction sa;
    memset(&sa, 0, sizeof(sa));
    sa.sa_handler = stop_handler;
    sa.sa_flags = SA_RESETHAND | SA_RESTART; // blocking reads and writes carry on
    sigemptyset(&sa.sa_mask);
    sigaction(SIGTERM, &sa, NULL);
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGUSR1, &sa, NULL);
}

static int stop_requested(void) { return (int)stop_signal_seen; }

// SIGPIPE (stdout into `head`, a closed pipe) and SIGXFSZ (a write past `ulimit -f`) would
// kill the process with no error line and no checkpoint. Ignored, the write fails with
// EPIPE or EFBIG instead, which every write checks: one "error:" line, exit 1, and a
// checkpoint save that fails leaves the previous one in place.
static void stop_ignore_write_signals(void) {
    signal(SIGPIPE, SIG_IGN);
    signal(SIGXFSZ, SIG_IGN);
}

#endif // LLMC_STOP_H
