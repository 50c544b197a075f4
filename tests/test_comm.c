/*
 * tests/test_comm.c: the host collectives and pipeline point-to-point of llmc/host/comm.h, chunked so
 * no MPI call gets more elements than its int count can hold. Run on 4 MPI processes with
 * a tiny chunk (make test does: LLMC_MPI_CHUNK=7 mpirun -np 4 ./test_comm):
 *   - every MPI call the code makes goes through the wrappers below (the MPI profiling
 *     interface: MPI_X here forwards to PMPI_X), which record the largest count each
 *     function received: none may exceed the chunk, and every chunked function must have
 *     been called (so the old, unchunked code fails here);
 *   - results are held to values computed here from each rank's inputs (small integers:
 *     the fp32 sums are exact whatever the order or the chunking);
 *   - layouts TP2 x PP2, PP2 x DP2 and DP4 (uneven ZeRO shards), buffer lengths that are
 *     not multiples of the chunk, and two pipeline messages received out of order;
 *   - the ZeRO bucket collectives of llmc/host/zero.h on DP4 and DP2: each layer's bucket
 *     (whole, compact and flat; zb-h1's B and W parts) and the rest reduce-scattered into
 *     the shards with every element summed in rank order, bit for bit against that sum
 *     done here on values whose order matters, and gathered back (blocking, and started /
 *     finished as -zero 3's prefetch) equal to the owners' values.
 * `./test_comm --parse` only reads LLMC_MPI_CHUNK (the bad-value check runs it).
 * Prints one line per check (rank 0) and `N passed, M failed` last; exit 1 on failure.
 */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include "../llmc/host/comm.h"
#include "../llmc/host/zero.h"
#include "common.h"

// ---------------------------------------------------------------------------------------
// the profiling wrappers: largest count (elements, or bytes for MPI_BYTE) and number of
// calls per function

enum {
    W_ALLREDUCE,
    W_ISEND,
    W_RECV,
    W_REDUCE_SCATTER,
    W_ALLGATHERV,
    W_BCAST,
    W_REDUCE,
    W_ALLTOALLV,
    W_IALLGATHERV,
    W_N
};
static const char* W_NAMES[W_N] = {"MPI_Allreduce",      "MPI_Isend",      "MPI_Recv",
                                   "MPI_Reduce_scatter", "MPI_Allgatherv", "MPI_Bcast",
                                   "MPI_Reduce",         "MPI_Alltoallv",  "MPI_Iallgatherv"};
static long w_max[W_N], w_calls[W_N];
static void w_note(int f, long count) {
    w_calls[f]++;
    if (count > w_max[f]) w_max[f] = count;
}
static int comm_size_of(MPI_Comm c) {
    int n = 0;
    PMPI_Comm_size(c, &n);
    return n;
}

int MPI_Allreduce(const void* s, void* r, int n, MPI_Datatype t, MPI_Op op, MPI_Comm c) {
    w_note(W_ALLREDUCE, n);
    return PMPI_Allreduce(s, r, n, t, op, c);
}
int MPI_Isend(const void* b, int n, MPI_Datatype t, int dest, int tag, MPI_Comm c, MPI_Request* req) {
    w_note(W_ISEND, n);
    return PMPI_Isend(b, n, t, dest, tag, c, req);
}
int MPI_Recv(void* b, int n, MPI_Datatype t, int src, int tag, MPI_Comm c, MPI_Status* st) {
    w_note(W_RECV, n);
    return PMPI_Recv(b, n, t, src, tag, c, st);
}
int MPI_Reduce_scatter(const void* s, void* r, const int counts[], MPI_Datatype t, MPI_Op op, MPI_Comm c) {
    long tot = 0;
    for (int i = 0; i < comm_size_of(c); i++) tot += counts[i];
    w_note(W_REDUCE_SCATTER, tot); // the send buffer holds the sum of the counts
    return PMPI_Reduce_scatter(s, r, counts, t, op, c);
}
int MPI_Allgatherv(const void* s, int sn, MPI_Datatype st, void* r, const int counts[], const int displs[],
                   MPI_Datatype rt, MPI_Comm c) {
    long most = sn;
    for (int i = 0; i < comm_size_of(c); i++)
        if (counts[i] > most) most = counts[i];
    w_note(W_ALLGATHERV, most); // the most any one rank contributes (displacements are ints too: < 2^31 here)
    return PMPI_Allgatherv(s, sn, st, r, counts, displs, rt, c);
}
int MPI_Alltoallv(const void* s, const int sc[], const int sd[], MPI_Datatype st, void* r, const int rc[],
                  const int rd[], MPI_Datatype rt, MPI_Comm c) {
    long most = 0;
    for (int i = 0; i < comm_size_of(c); i++) {
        if (sc[i] > most) most = sc[i];
        if (rc[i] > most) most = rc[i];
    }
    w_note(W_ALLTOALLV, most); // the most one rank sends to or receives from one other
    return PMPI_Alltoallv(s, sc, sd, st, r, rc, rd, rt, c);
}
int MPI_Iallgatherv(const void* s, int sn, MPI_Datatype st, void* r, const int counts[], const int displs[],
                    MPI_Datatype rt, MPI_Comm c, MPI_Request* req) {
    long most = sn;
    for (int i = 0; i < comm_size_of(c); i++)
        if (counts[i] > most) most = counts[i];
    w_note(W_IALLGATHERV, most);
    return PMPI_Iallgatherv(s, sn, st, r, counts, displs, rt, c, req);
}
int MPI_Bcast(void* b, int n, MPI_Datatype t, int root, MPI_Comm c) {
    w_note(W_BCAST, n);
    return PMPI_Bcast(b, n, t, root, c);
}
int MPI_Reduce(const void* s, void* r, int n, MPI_Datatype t, MPI_Op op, int root, MPI_Comm c) {
    w_note(W_REDUCE, n);
    return PMPI_Reduce(s, r, n, t, op, root, c);
}

// ---------------------------------------------------------------------------------------

static int g_rank, g_world;

// a check every rank evaluates: passes only if it passes on every rank (rank 0 prints)
static void check_all(int ok, const char* what) {
    int all = 0;
    PMPI_Allreduce(&ok, &all, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
    if (g_rank == 0) check(all, "%s", what);
}

// rank r's input at index i: a small integer, so every sum is exact in fp32
static float val(int rank, size_t i) { return (float)((rank + 1) * (int)(i % 13) - (int)(i % 5)); }

// world ranks of the group containing `rank` along one axis (0: tp, 1: dp, 2: pp)
static int same_group(int a, int b, int TP, int DP, int axis) {
    Coords x = layout_coords(a, TP, DP), y = layout_coords(b, TP, DP);
    if (axis == 0) return x.dp == y.dp && x.pp == y.pp;
    if (axis == 1) return x.tp == y.tp && x.pp == y.pp;
    return x.tp == y.tp && x.dp == y.dp;
}

// one layout: every collective on lengths 0, 3 and n (not multiples of the chunk)
static void test_layout(int TP, int PP, int DP) {
    Comm c;
    comm_init_single(&c);
    c.mpi = 1;
    c.rank = g_rank;
    c.world = g_world;
    const size_t n = 1000;
    comm_init_groups(&c, TP, PP, DP, 1, n);
    char what[256];
    const size_t lens[3] = {0, 3, n};
    float* buf = (float*)malloc_check(sizeof(float) * (2 * n + 8));
    float* out = (float*)malloc_check(sizeof(float) * (2 * n + 8));
    int ok = 1;
    // TP sum and max, DP sum, embedding-group sum: each element against the group's inputs
    for (int axis = 0; axis < 4; axis++) {
        int size = axis == 0 ? TP : axis == 1 ? TP : axis == 2 ? DP : 2;
        if (axis == 3 && PP == 1) continue;
        int in_emb = c.pp == 0 || c.pp == PP - 1;
        for (int li = 0; li < 3; li++) {
            size_t len = lens[li];
            for (size_t i = 0; i < len; i++) buf[i] = val(g_rank, i);
            if (axis == 0)
                tp_allreduce_sum(&c, buf, len);
            else if (axis == 1)
                tp_allreduce_max(&c, buf, len);
            else if (axis == 2)
                dp_allreduce_sum(&c, buf, len);
            else
                emb_allreduce_sum(&c, buf, len);
            for (size_t i = 0; i < len; i++) {
                double want = axis == 1 ? -1e30 : 0.0;
                for (int r = 0; r < g_world; r++) {
                    int member;
                    if (axis == 3) { // same tp, dp; first or last stage; only members take part
                        Coords y = layout_coords(r, TP, DP);
                        member = in_emb && same_group(g_rank, r, TP, DP, 2) && (y.pp == 0 || y.pp == PP - 1);
                        if (!in_emb) member = r == g_rank;
                    } else
                        member = same_group(g_rank, r, TP, DP, axis == 2 ? 1 : 0);
                    if (!member) continue;
                    if (axis == 1) {
                        if (val(r, i) > want) want = val(r, i);
                    } else
                        want += val(r, i);
                }
                if (size == 1 && axis != 3) want = val(g_rank, i);
                if ((double)buf[i] != want) ok = 0;
            }
        }
    }
    snprintf(what, sizeof(what),
             "layout %dx%dx%d: TP sum, TP max, DP sum, embedding sum of 0, 3, %zu floats equal the inputs' sums", TP,
             PP, DP, n);
    check_all(ok, what);
    // ZeRO-1 reduce-scatter (uneven shards: total not a multiple of DP) and all-gather
    ok = 1;
    size_t total = n + 1;
    for (size_t i = 0; i < total; i++) buf[i] = val(g_rank, i);
    size_t off, cnt;
    zero_shard(total, DP, c.dp, &off, &cnt);
    dp_reduce_scatter_sum(&c, buf, out, total);
    for (size_t j = 0; j < cnt; j++) {
        double want = 0;
        for (int r = 0; r < g_world; r++)
            if (same_group(g_rank, r, TP, DP, 1)) want += val(r, off + j);
        if ((double)out[j] != want) ok = 0;
    }
    for (size_t i = 0; i < total; i++) buf[i] = -777.0f; // everything but this rank's shard is overwritten
    for (size_t j = 0; j < cnt; j++) buf[off + j] = (float)(off + j);
    dp_allgather(&c, buf, total);
    for (size_t i = 0; i < total; i++)
        if (buf[i] != (float)i) ok = 0;
    snprintf(what, sizeof(what), "layout %dx%dx%d: ZeRO-1 reduce-scatter and all-gather of %zu floats in %d shards", TP,
             PP, DP, total, DP);
    check_all(ok, what);
    // pipeline: two messages each way between neighbouring stages, received in reverse order
    if (PP > 1) {
        ok = 1;
        for (int dir = 0; dir < 2; dir++) {
            int sender = dir == 0 ? c.pp < PP - 1 : c.pp > 0;
            int to = dir == 0 ? c.pp + 1 : c.pp - 1;
            for (int m = 0; m < 2 && sender; m++) {
                for (size_t i = 0; i < n; i++) buf[i] = val(g_rank, i) + 1000.0f * m;
                pp_send(&c, buf, m == 0 ? n : 3, to, 2 * m + dir);
            }
            int recver = dir == 0 ? c.pp > 0 : c.pp < PP - 1;
            int from = dir == 0 ? c.pp - 1 : c.pp + 1;
            for (int m = 1; m >= 0 && recver; m--) {
                size_t len = m == 0 ? n : 3;
                memset(out, 0, sizeof(float) * n);
                pp_recv(&c, out, len, from, 2 * m + dir);
                int src = c.tp + TP * c.dp + TP * DP * from; // world rank of the peer (layout.h)
                for (size_t i = 0; i < len; i++)
                    if (out[i] != val(src, i) + 1000.0f * m) ok = 0;
            }
        }
        pp_flush(&c);
        snprintf(what, sizeof(what),
                 "layout %dx%dx%d: pipeline sends of %zu and 3 floats arrive whole, matched by tag out of order", TP,
                 PP, DP, n);
        check_all(ok, what);
    }
    // whole job: a double sum and a broadcast of bytes
    ok = world_sum(&c, (double)g_rank) == (double)g_world * (g_world - 1) / 2;
    unsigned char bytes[100];
    for (int i = 0; i < 100; i++) bytes[i] = (unsigned char)(g_rank == g_world - 1 ? i * 3 : 0);
    world_bcast(&c, bytes, sizeof(bytes), g_world - 1);
    for (int i = 0; i < 100; i++)
        if (bytes[i] != (unsigned char)(i * 3)) ok = 0;
    snprintf(what, sizeof(what), "layout %dx%dx%d: world sum and a 100-byte broadcast", TP, PP, DP);
    check_all(ok, what);
    free(buf);
    free(out);
    comm_free(&c);
}

// rank r's gradient at flat element f: values whose sum depends on the order of the adds
static float zval(int rank, size_t f) {
    static const float V[4] = {1.0e8f, 3.0f, -1.0e8f, 0.3f};
    return V[(rank + f) % 4] * (1.0f + (float)(f % 7) * 0.125f);
}

// The ZeRO bucket collectives (llmc/host/zero.h) on 1 x PP x DP: a stage of L layers
// (L / PP per stage) of a small model, every bucket the trainers reduce and gather.
static void test_zero(int PP, int DP) {
    Comm c;
    comm_init_single(&c);
    c.mpi = 1;
    c.rank = g_rank;
    c.world = g_world;
    comm_init_groups(&c, 1, PP, DP, 1, 16);
    ParamLayout pl;
    param_layout_init(&pl, 4, 8, 2, 4, 24, 24, 0, 1, c.pp, PP); // L 4, C 8, 2 heads, T 4, V 24
    size_t so, sn, loff[NUM_PARAM_TENSORS];
    zero_shard(pl.total, DP, c.dp, &so, &sn);
    size_t nlayer = zero_layer_offsets(&pl, loff);
    float* flat = (float*)malloc_check(sizeof(float) * pl.total);
    float* shard = (float*)calloc_check(sn + 1, sizeof(float));
    float* want = (float*)calloc_check(sn + 1, sizeof(float));
    float* local = (float*)malloc_check(sizeof(float) * (pl.total + nlayer));
    ZeroComm zc;
    memset(&zc, 0, sizeof(zc));
    char what[300];
    // every bucket of the stage: layers whole (compact and flat), zb-h1's two parts (compact), the rest
    int ok = 1, nb = 0;
    for (size_t i = 0; i < sn; i++) { // the rank-order sum over the DP group of flat element so + i
        float s = zval(0, so + i);
        for (int r = 1; r < DP; r++) s += zval(r, so + i);
        want[i] = s;
    }
    for (size_t f = 0; f < pl.total; f++) flat[f] = zval(c.dp, f);
    for (int l = -1; l < pl.nlayers; l++)
        for (int kind = 0; kind < 4; kind++) { // 0 compact whole, 1 flat whole, 2 B part, 3 W part
            if (l < 0 && kind > 1) continue;
            ZeroBucket b;
            int part = kind == 2 ? ZB_B_PART : (kind == 3 ? ZB_W_PART : ZB_ALL);
            if (l < 0)
                zero_rest_bucket(&pl, kind == 1, &b);
            else
                zero_layer_bucket(&pl, l, part, kind == 1, &b);
            // the bucket's values in its local layout
            float* src = kind == 1 ? flat : local;
            for (int s2 = 0; s2 < b.nseg && kind != 1; s2++)
                for (size_t i = 0; i < b.n[s2]; i++) local[b.loc[s2] + i] = zval(c.dp, b.flat[s2] + i);
            memset(shard, 0, sizeof(float) * (sn + 1));
            dp_reduce_scatter_bucket(&c, &zc, &b, pl.total, src, shard);
            for (int s2 = 0; s2 < b.nseg; s2++)
                for (size_t i = 0; i < b.n[s2]; i++) {
                    size_t f = b.flat[s2] + i;
                    if (f >= so && f < so + sn && memcmp(&shard[f - so], &want[f - so], sizeof(float)) != 0) ok = 0;
                }
            nb++;
        }
    snprintf(what, sizeof(what),
             "1x%dx%d: %d buckets (layers compact and flat, zb-h1's B and W parts, the rest) reduce-scattered: "
             "each element the rank-order sum, bit for bit",
             PP, DP, nb);
    check_all(ok, what);
    // gathers: every rank's shard holds the owners' values; a layer gathered (blocking and as a
    // prefetch) and the rest (compact) equal them
    for (size_t i = 0; i < sn; i++) shard[i] = zval(0, so + i) + 1.0f;
    ok = 1;
    ZeroGather q;
    zero_gather_init(&q, nlayer, DP);
    for (int l = -1; l < pl.nlayers; l++)
        for (int mode = 0; mode < 2; mode++) {
            if (l < 0 && mode == 1) continue;
            ZeroBucket b;
            if (l < 0)
                zero_rest_bucket(&pl, 0, &b);
            else
                zero_layer_bucket(&pl, l, ZB_ALL, 0, &b);
            for (size_t i = 0; i < pl.total + nlayer; i++) local[i] = -7.0f;
            if (mode == 0)
                dp_gather_bucket(&c, &zc, &b, pl.total, shard, local);
            else { // a prefetch runs only when the bucket goes in one round: chunk at its default here
                size_t keep = c.chunk;
                c.chunk = COMM_CHUNK_DEFAULT;
                dp_gather_start(&c, &zc, &q, &b, pl.total, shard, local);
                dp_gather_finish(&c, &q);
                c.chunk = keep;
            }
            for (int s2 = 0; s2 < b.nseg; s2++)
                for (size_t i = 0; i < b.n[s2]; i++)
                    if (local[b.loc[s2] + i] != zval(0, b.flat[s2] + i) + 1.0f) ok = 0;
        }
    snprintf(what, sizeof(what),
             "1x%dx%d: every layer's weights and the rest gathered from their owners (blocking "
             "and started/finished as a prefetch)",
             PP, DP);
    check_all(ok, what);
    zero_gather_free(&q);
    zero_comm_free(&zc);
    free(flat);
    free(shard);
    free(want);
    free(local);
    comm_free(&c);
}

int main(int argc, char** argv) {
    if (argc > 1 && strcmp(argv[1], "--parse") == 0) {
        Comm c;
        comm_init_single(&c);
        printf("%zu\n", c.chunk);
        return 0;
    }
    // the knob rejects what is not a count, before MPI starts (no MPI in the child)
    int bad_rc = 0;
    if (getenv("OMPI_COMM_WORLD_RANK") && atoi(getenv("OMPI_COMM_WORLD_RANK")) == 0) {
        int rc = system("LLMC_MPI_CHUNK=12x ./test_comm --parse > /dev/null 2> /tmp/llmc_test_comm_err.txt");
        FILE* f = fopen("/tmp/llmc_test_comm_err.txt", "r");
        char line[512] = "";
        if (f) {
            if (!fgets(line, sizeof(line), f)) line[0] = 0;
            fclose(f);
        }
        bad_rc =
            WIFEXITED(rc) && WEXITSTATUS(rc) != 0 && strncmp(line, "error: environment LLMC_MPI_CHUNK=12x", 37) == 0;
    }
    MPI_Init(&argc, &argv);
    PMPI_Comm_rank(MPI_COMM_WORLD, &g_rank);
    PMPI_Comm_size(MPI_COMM_WORLD, &g_world);
    if (g_rank == 0) check(bad_rc, "LLMC_MPI_CHUNK=12x: one-line error and a non-zero exit");
    Comm probe;
    comm_init_single(&probe);
    size_t chunk = probe.chunk;
    char what[256];
    snprintf(what, sizeof(what), "LLMC_MPI_CHUNK sets the chunk (%zu elements; run with LLMC_MPI_CHUNK=7 on 4 ranks)",
             chunk);
    check_all(chunk == 7 && g_world == 4, what);
    if (chunk == 7 && g_world == 4) {
        test_layout(2, 2, 1);
        test_layout(1, 2, 2);
        test_layout(1, 1, 4);
        test_zero(1, 4);
        test_zero(2, 2);
    }
    // what the MPI library received: no call above the chunk; every chunked path taken
    for (int f = 0; f < W_N; f++) {
        long most = 0, calls = 0;
        PMPI_Allreduce(&w_max[f], &most, 1, MPI_LONG, MPI_MAX, MPI_COMM_WORLD);
        PMPI_Allreduce(&w_calls[f], &calls, 1, MPI_LONG, MPI_SUM, MPI_COMM_WORLD);
        // MPI_Reduce_scatter is used only for whole buffers up to a chunk (1001 floats > 7:
        // never here); MPI_Bcast carries the world broadcast and the gathers; MPI_Allgatherv,
        // MPI_Alltoallv and MPI_Iallgatherv the ZeRO buckets' rounds
        int need = f != W_REDUCE_SCATTER;
        // MPI_Iallgatherv: only for a bucket that fits one round (zero.h checks), run above at the
        // default chunk, so its count is not held to this one
        long bound = f == W_IALLGATHERV ? (long)COMM_CHUNK_DEFAULT : (long)chunk;
        if (g_rank == 0)
            check(most <= bound && (!need || calls > 0), "%-18s %6ld calls, largest count %ld (chunk %zu)%s",
                  W_NAMES[f], calls, most, chunk, need ? "" : ", unused above a chunk");
    }
    MPI_Finalize();
    return g_rank == 0 ? test_summary() : 0;
}
