/*
 * tests/attack/ckpt_points.h: the named points of a checkpoint write, for the test-only mutant
 * build/mutants/train_gpt_ckpt_points (Makefile; tests/attack/ckpt_points.py puts the calls into
 * a copy of the sources, the product has none). Force-included (-include) before train_gpt.c.
 * Environment, read only by the mutant:
 *   LLMC_TEST_CKPT_KILL=POINT:STEP[:RANK]  kill -9 this process (SIGKILL, no clean-up) when the
 *                                          save of STEP reaches POINT (on world rank RANK):
 *                                          before_data (its file created, nothing written),
 *                                          mid_file (header and weights written, not the moments),
 *                                          before_done (every file written, before rank 0's DONE)
 *   LLMC_TEST_CKPT_DELAY_MS=N              the background writer sleeps N ms before each file
 *                                          (POINT "write"): a slow filesystem
 */
#ifndef LLMC_TEST_CKPT_POINTS_H
#define LLMC_TEST_CKPT_POINTS_H

#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static void ckpt_test_point(const char* name, int64_t step) {
    const char* k = getenv("LLMC_TEST_CKPT_KILL");
    const char* rs = getenv("OMPI_COMM_WORLD_RANK");
    int rank = rs ? atoi(rs) : 0;
    char point[64];
    long long s = -1;
    int r = -1;
    int n = k ? sscanf(k, "%63[^:]:%lld:%d", point, &s, &r) : 0;
    if (n >= 2 && strcmp(point, name) == 0 && s == (long long)step && (n < 3 || r == rank)) {
        fprintf(stderr, "test point: kill -9 at %s of the save of step %lld (rank %d)\n", name, s, rank);
        fflush(stderr);
        raise(SIGKILL);
    }
    const char* d = getenv("LLMC_TEST_CKPT_DELAY_MS");
    if (d && strcmp(name, "write") == 0) {
        long ms = atol(d);
        struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
        nanosleep(&ts, NULL);
    }
}

#endif // LLMC_TEST_CKPT_POINTS_H
