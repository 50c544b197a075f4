/*
 * seqpar.h: the two collectives of Megatron sequence parallelism (Korthikanti et al. 2022)
 * over the TP group, for activations laid out (B, T, C) with rows b*T + t. With -sp 1 each
 * TP rank keeps the rows of its sequence shard, t in [tp*Ts, (tp+1)*Ts) with Ts = T/TP, as
 * a (B, Ts, C) buffer. all-gather: every rank's shard -> the full (B, T, C) (the input of a
 * column-parallel GEMM); reduce-scatter: partial sums (B, T, C) of a row-parallel GEMM ->
 * this rank's summed shard. Each is the other's transpose, so backward uses the other one.
 * Together they move the same bytes as the all-reduce they replace.
 */
#ifndef LLMC_SEQPAR_H
#define LLMC_SEQPAR_H

#include <string.h>
#include "comm.h"

// full (B, T, C) <- shards (B, Ts, C) of every TP rank. tmp: B*T*C floats.
static void sp_allgather(Comm* c, float* full, const float* shard, int B, int Ts, int C, float* tmp) {
    size_t piece = (size_t)Ts * C, n = (size_t)B * piece;
#ifdef USE_MPI
    double t0 = wall_ms();
    ctrace_enter(&c->trace, CG_TP, "allgather", -1);
    mpiCheck(MPI_Allgather(shard, (int)n, MPI_FLOAT, tmp, (int)n, MPI_FLOAT, c->tp_comm)); // (TP, B, Ts, C)
    ctrace_leave(&c->trace);
    c->comm_ms += wall_ms() - t0;
#else
    memcpy(tmp, shard, sizeof(float) * n); // TP == 1
#endif
    for (int r = 0; r < c->TP; r++)
        for (int b = 0; b < B; b++)
            memcpy(full + ((size_t)b * c->TP + r) * piece, tmp + ((size_t)r * B + b) * piece, sizeof(float) * piece);
}

// shard (B, Ts, C) <- this rank's sequence rows of full (B, T, C), summed over the TP group.
// tmp: B*T*C floats.
static void sp_reduce_scatter(Comm* c, float* shard, const float* full, int B, int Ts, int C, float* tmp) {
    size_t piece = (size_t)Ts * C, n = (size_t)B * piece;
    for (int r = 0; r < c->TP; r++)
        for (int b = 0; b < B; b++)
            memcpy(tmp + ((size_t)r * B + b) * piece, full + ((size_t)b * c->TP + r) * piece, sizeof(float) * piece);
#ifdef USE_MPI
    double t0 = wall_ms();
    ctrace_enter(&c->trace, CG_TP, "reduce_scatter", -1);
    mpiCheck(MPI_Reduce_scatter_block(tmp, shard, (int)n, MPI_FLOAT, MPI_SUM, c->tp_comm));
    ctrace_leave(&c->trace);
    c->comm_ms += wall_ms() - t0;
#else
    memcpy(shard, tmp, sizeof(float) * n); // TP == 1
#endif
}

#endif // LLMC_SEQPAR_H
