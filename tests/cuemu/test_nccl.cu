// tests/cuemu/test_nccl.cu - tests of the NCCL emulation (NCCL over MPI, cuemu).
// Run with 4 processes: mpirun --oversubscribe -np 4 build/cuemu/test_nccl
// (add --allow-run-as-root as root). The same source is valid CUDA + NCCL + MPI
// (`make cuemu-compile` builds it with nvcc). Every check is agreed by all ranks;
// rank 0 prints one line per check and "N passed, M failed".
#include <mpi.h>
#include <cuda_runtime.h>
#include <cuda_bf16.h>
#include <nccl.h>
#include <cmath>
#include <cstdarg>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>
#include "../../llmc/cuda/cuda_common.cuh"

static int g_rank = 0, g_size = 1, g_pass = 0, g_fail = 0;

// Collective: every rank calls it in the same order.
static void check(bool ok, const char* name, const char* fmt = nullptr, ...) {
    char detail[200] = "";
    if (!ok && fmt) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(detail, sizeof detail, fmt, ap);
        va_end(ap);
    }
    int mine = ok ? 1 : 0, all = 0;
    MPI_Allreduce(&mine, &all, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
    std::vector<char> details((size_t)g_size * sizeof detail);
    std::vector<int> oks(g_size);
    MPI_Gather(detail, (int)sizeof detail, MPI_CHAR, details.data(), (int)sizeof detail, MPI_CHAR, 0, MPI_COMM_WORLD);
    MPI_Gather(&mine, 1, MPI_INT, oks.data(), 1, MPI_INT, 0, MPI_COMM_WORLD);
    if (all)
        g_pass++;
    else
        g_fail++;
    if (g_rank == 0) {
        if (all) {
            printf("ok   - %s\n", name);
        } else {
            printf("FAIL - %s:", name);
            for (int r = 0; r < g_size; r++)
                if (!oks[r]) printf(" [rank %d] %s", r, &details[(size_t)r * sizeof detail]);
            printf("\n");
        }
        fflush(stdout);
    }
}

template <class T>
static T* dev_alloc(size_t n) {
    T* d = nullptr;
    cudaCheck(cudaMalloc(&d, n * sizeof(T)));
    return d;
}
template <class T>
static T* dev_upload(const std::vector<T>& h) {
    T* d = dev_alloc<T>(h.size());
    cudaCheck(cudaMemcpy(d, h.data(), h.size() * sizeof(T), cudaMemcpyHostToDevice));
    return d;
}
template <class T>
static std::vector<T> dev_download(const T* d, size_t n) {
    std::vector<T> h(n);
    cudaCheck(cudaMemcpy(h.data(), d, n * sizeof(T), cudaMemcpyDeviceToHost));
    return h;
}

// A communicator over `members` (world ranks, in NCCL rank order), made the NCCL
// way: the first member makes the unique id and sends it to the others.
static ncclComm_t comm_over(const std::vector<int>& members, int tag) {
    int me = -1;
    for (size_t q = 0; q < members.size(); q++)
        if (members[q] == g_rank) me = (int)q;
    if (me < 0) return nullptr;
    ncclUniqueId id;
    if (me == 0) {
        ncclCheck(ncclGetUniqueId(&id));
        for (size_t q = 1; q < members.size(); q++) MPI_Send(&id, sizeof id, MPI_BYTE, members[q], tag, MPI_COMM_WORLD);
    } else {
        MPI_Recv(&id, sizeof id, MPI_BYTE, members[0], tag, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    }
    ncclComm_t c = nullptr;
    ncclCheck(ncclCommInitRank(&c, (int)members.size(), id, me));
    return c;
}

static float bf(float x) { return __bfloat162float(__float2bfloat16(x)); }

int main(int argc, char** argv) {
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &g_rank);
    MPI_Comm_size(MPI_COMM_WORLD, &g_size);
    if (g_size != 4) {
        if (g_rank == 0) fprintf(stderr, "test_nccl: run with exactly 4 processes (mpirun -np 4), not %d\n", g_size);
        MPI_Finalize();
        return 2;
    }
    int ndev = 1;
    cudaCheck(cudaGetDeviceCount(&ndev));
    cudaCheck(cudaSetDevice(g_rank % ndev));
    const int R = g_rank, N = g_size;

    // World communicator: id made by rank 0, broadcast over MPI.
    ncclUniqueId id;
    if (R == 0) ncclCheck(ncclGetUniqueId(&id));
    MPI_Bcast(&id, sizeof id, MPI_BYTE, 0, MPI_COMM_WORLD);
    ncclComm_t world;
    ncclCheck(ncclCommInitRank(&world, N, id, R));
    int cnt = 0, rk = -1;
    ncclCheck(ncclCommCount(world, &cnt));
    ncclCheck(ncclCommUserRank(world, &rk));
    check(cnt == N && rk == R, "ncclCommInitRank over 4 processes: count and rank", "count %d rank %d", cnt, rk);

    { // all-reduce sum, float, out of place, count not divisible by 4
        const int n = 1003;
        std::vector<float> h(n);
        for (int i = 0; i < n; i++) h[i] = R * 1000.0f + i * 0.5f;
        float *s = dev_upload(h), *d = dev_alloc<float>(n);
        ncclCheck(ncclAllReduce(s, d, n, ncclFloat, ncclSum, world, 0));
        std::vector<float> g = dev_download(d, n);
        int bad = 0;
        for (int i = 0; i < n; i++) bad += g[i] != 6000.0f + 2.0f * i;
        check(bad == 0, "ncclAllReduce sum float (1003 elements, out of place)", "%d wrong", bad);
        // average, in place
        for (int i = 0; i < n; i++) h[i] = (float)(R + 1) * (1.0f + i);
        cudaCheck(cudaMemcpy(s, h.data(), n * sizeof(float), cudaMemcpyHostToDevice));
        ncclCheck(ncclAllReduce(s, s, n, ncclFloat, ncclAvg, world, 0));
        g = dev_download(s, n);
        bad = 0;
        for (int i = 0; i < n; i++) bad += g[i] != 2.5f * (1.0f + i);
        check(bad == 0, "ncclAllReduce avg float, in place", "%d wrong", bad);
        cudaCheck(cudaFree(s));
        cudaCheck(cudaFree(d));
    }
    { // all-reduce max, int32, in place
        const int n = 517;
        std::vector<int> h(n);
        for (int i = 0; i < n; i++) h[i] = (i * 7 + R * 13) % 101;
        int* d = dev_upload(h);
        ncclCheck(ncclAllReduce(d, d, n, ncclInt32, ncclMax, world, 0));
        std::vector<int> g = dev_download(d, n);
        int bad = 0;
        for (int i = 0; i < n; i++) {
            int want = 0;
            for (int r = 0; r < N; r++) want = std::max(want, (i * 7 + r * 13) % 101);
            bad += g[i] != want;
        }
        check(bad == 0, "ncclAllReduce max int32, in place", "%d wrong", bad);
        cudaCheck(cudaFree(d));
    }
    { // all-reduce sum, bf16: rounding after every addition makes the order visible
        const int n = 300;
        auto val = [](int r, int i) { return bf(1.0f + (float)((r * 37 + i * 11) % 97) / 64.0f + (float)i / 256.0f); };
        std::vector<__nv_bfloat16> h(n);
        for (int i = 0; i < n; i++) h[i] = __float2bfloat16(val(R, i));
        __nv_bfloat16* d = dev_upload(h);
        ncclCheck(ncclAllReduce(d, d, n, ncclBfloat16, ncclSum, world, 0));
        std::vector<__nv_bfloat16> g = dev_download(d, n);
        int far = 0, not_rank_order = 0;
        uint64_t hash = 1469598103934665603ull;
        for (int i = 0; i < n; i++) {
            float got = __bfloat162float(g[i]);
            double exact = 0;
            float seq = val(0, i);
            for (int r = 0; r < N; r++) exact += val(r, i);
            for (int r = 1; r < N; r++) seq = bf(seq + val(r, i));
            far += fabs(got - exact) > fabs(exact) * (3.0 / 256.0);
            not_rank_order += got != seq;
            hash = (hash ^ __bfloat16_as_ushort(g[i])) * 1099511628211ull;
        }
        check(far == 0, "ncclAllReduce sum bf16 within 3 bf16 ulps of the exact sum", "%d far", far);
        std::vector<uint64_t> hashes(N);
        MPI_Allgather(&hash, 1, MPI_UINT64_T, hashes.data(), 1, MPI_UINT64_T, MPI_COMM_WORLD);
        int differ = 0;
        for (int r = 0; r < N; r++) differ += hashes[r] != hashes[0];
        check(differ == 0, "ncclAllReduce bf16: every rank gets bit-identical results", "%d ranks differ from rank 0",
              differ);
#ifdef CUEMU
        check(not_rank_order == 0, "emulation: bf16 sums are reduced in rank order, rounded after each addition",
              "%d differ", not_rank_order);
#endif
        cudaCheck(cudaFree(d));
    }
    { // reduce-scatter, out of place and in place
        const int rc = 250;
        std::vector<float> h((size_t)rc * N);
        for (int q = 0; q < N; q++)
            for (int i = 0; i < rc; i++) h[(size_t)q * rc + i] = (float)(R + q * 10 + i);
        float *s = dev_upload(h), *d = dev_alloc<float>(rc);
        ncclCheck(ncclReduceScatter(s, d, rc, ncclFloat, ncclSum, world, 0));
        std::vector<float> g = dev_download(d, rc);
        int bad = 0;
        for (int i = 0; i < rc; i++) bad += g[i] != (float)(6 + 40 * R + 4 * i);
        check(bad == 0, "ncclReduceScatter sum float: rank r gets reduced chunk r", "%d wrong", bad);
        ncclCheck(ncclReduceScatter(s, s + (size_t)R * rc, rc, ncclFloat, ncclSum, world, 0));
        g = dev_download(s + (size_t)R * rc, rc);
        bad = 0;
        for (int i = 0; i < rc; i++) bad += g[i] != (float)(6 + 40 * R + 4 * i);
        check(bad == 0, "ncclReduceScatter in place (recvbuff = sendbuff + rank * recvcount)", "%d wrong", bad);
        cudaCheck(cudaFree(s));
        cudaCheck(cudaFree(d));
    }
    { // all-gather, out of place and in place
        const int sc = 333;
        std::vector<int> h(sc);
        for (int i = 0; i < sc; i++) h[i] = R * 1000 + i;
        int *s = dev_upload(h), *d = dev_alloc<int>((size_t)sc * N);
        ncclCheck(ncclAllGather(s, d, sc, ncclInt32, world, 0));
        std::vector<int> g = dev_download(d, (size_t)sc * N);
        int bad = 0;
        for (int q = 0; q < N; q++)
            for (int i = 0; i < sc; i++) bad += g[(size_t)q * sc + i] != q * 1000 + i;
        check(bad == 0, "ncclAllGather int32, out of place", "%d wrong", bad);
        cudaCheck(cudaMemset(d, 0, (size_t)sc * N * sizeof(int)));
        cudaCheck(cudaMemcpy(d + (size_t)R * sc, h.data(), sc * sizeof(int), cudaMemcpyHostToDevice));
        ncclCheck(ncclAllGather(d + (size_t)R * sc, d, sc, ncclInt32, world, 0));
        g = dev_download(d, (size_t)sc * N);
        bad = 0;
        for (int q = 0; q < N; q++)
            for (int i = 0; i < sc; i++) bad += g[(size_t)q * sc + i] != q * 1000 + i;
        check(bad == 0, "ncclAllGather in place (sendbuff = recvbuff + rank * sendcount)", "%d wrong", bad);
        cudaCheck(cudaFree(s));
        cudaCheck(cudaFree(d));
    }
    { // broadcast / bcast / reduce
        const int n = 100;
        std::vector<double> h(n);
        for (int i = 0; i < n; i++) h[i] = R * 100.0 + i;
        double *s = dev_upload(h), *d = dev_alloc<double>(n);
        ncclCheck(ncclBroadcast(s, d, n, ncclDouble, 2, world, 0));
        std::vector<double> g = dev_download(d, n);
        int bad = 0;
        for (int i = 0; i < n; i++) bad += g[i] != 200.0 + i;
        ncclCheck(ncclBcast(s, n, ncclDouble, 3, world, 0));
        g = dev_download(s, n);
        for (int i = 0; i < n; i++) bad += g[i] != 300.0 + i;
        check(bad == 0, "ncclBroadcast (root 2) and ncclBcast in place (root 3)", "%d wrong", bad);
        for (int i = 0; i < n; i++) h[i] = R + 1.0 + i;
        cudaCheck(cudaMemcpy(s, h.data(), n * sizeof(double), cudaMemcpyHostToDevice));
        ncclCheck(ncclReduce(s, d, n, ncclDouble, ncclProd, 1, world, 0));
        bad = 0;
        if (R == 1) {
            g = dev_download(d, n);
            for (int i = 0; i < n; i++) bad += g[i] != (1.0 + i) * (2.0 + i) * (3.0 + i) * (4.0 + i);
        }
        check(bad == 0, "ncclReduce prod double to root 1", "%d wrong", bad);
        cudaCheck(cudaFree(s));
        cudaCheck(cudaFree(d));
    }
    float* one = dev_alloc<float>(1);
    auto sum_of = [&](ncclComm_t c, float x) {
        cudaCheck(cudaMemcpy(one, &x, sizeof x, cudaMemcpyHostToDevice));
        ncclCheck(ncclAllReduce(one, one, 1, ncclFloat, ncclSum, c, 0));
        return dev_download(one, 1)[0];
    };
    { // split: pairs {0,1} {2,3}, key reverses the order inside each pair
        ncclComm_t pair = nullptr;
        ncclConfig_t cfg = NCCL_CONFIG_INITIALIZER;
        ncclCheck(ncclCommSplit(world, R / 2, -R, &pair, &cfg));
        int c2 = 0, r2 = -1;
        ncclCheck(ncclCommCount(pair, &c2));
        ncclCheck(ncclCommUserRank(pair, &r2));
        float s = sum_of(pair, (float)R);
        check(c2 == 2 && r2 == 1 - R % 2 && s == (R < 2 ? 1.0f : 5.0f), "ncclCommSplit(color = rank/2, key = -rank)",
              "count %d rank %d sum %g", c2, r2, s);
        ncclComm_t three = nullptr;
        ncclCheck(ncclCommSplit(world, R == 3 ? NCCL_SPLIT_NOCOLOR : 7, R, &three, nullptr));
        bool ok = R == 3 ? three == nullptr : (sum_of(three, 1.0f) == 3.0f);
        check(ok, "ncclCommSplit with NCCL_SPLIT_NOCOLOR leaves that rank out (NULL communicator)");
        ncclCheck(ncclCommDestroy(pair));
        if (three) ncclCheck(ncclCommDestroy(three));
    }
    { // a communicator over a subset, made only by its members (ranks 3 and 1)
        ncclComm_t sub = comm_over({3, 1}, 11);
        bool ok = true;
        if (R == 1 || R == 3) {
            int c2 = 0, r2 = -1;
            ncclCheck(ncclCommCount(sub, &c2));
            ncclCheck(ncclCommUserRank(sub, &r2));
            ok = c2 == 2 && r2 == (R == 3 ? 0 : 1) && sum_of(sub, (float)R) == 4.0f;
            ncclCheck(ncclCommDestroy(sub));
        } else {
            ok = sub == nullptr;
        }
        check(ok, "ncclCommInitRank over a subset {3, 1}: ranks 0 and 2 take no part and do not block");
    }
    { // 2x2 layout: tensor-parallel pairs {0,1},{2,3} then data-parallel pairs {0,2},{1,3}
        ncclComm_t tp = comm_over(R < 2 ? std::vector<int>{0, 1} : std::vector<int>{2, 3}, 21);
        ncclComm_t dp = comm_over(R % 2 == 0 ? std::vector<int>{0, 2} : std::vector<int>{1, 3}, 22);
        float st = sum_of(tp, (float)(1 << R)), sd = sum_of(dp, (float)(1 << R));
        float wt = R < 2 ? 3.0f : 12.0f, wd = R % 2 == 0 ? 5.0f : 10.0f;
        check(st == wt && sd == wd, "TP and DP communicators made concurrently by all ranks from their own ids",
              "tp %g (want %g) dp %g (want %g)", st, wt, sd, wd);
        ncclCheck(ncclCommDestroy(tp));
        ncclCheck(ncclCommDestroy(dp));
    }
    { // grouped ring send/recv, large enough that a blocking send could not complete alone
        const int n = 1 << 18;
        std::vector<float> h(n);
        for (int i = 0; i < n; i++) h[i] = (float)(R * 1000000 + i);
        float *s = dev_upload(h), *d = dev_alloc<float>(n);
        int right = (R + 1) % N, left = (R + N - 1) % N;
        ncclCheck(ncclGroupStart());
        ncclCheck(ncclSend(s, n, ncclFloat, right, world, 0));
        ncclCheck(ncclRecv(d, n, ncclFloat, left, world, 0));
        ncclCheck(ncclGroupEnd());
        std::vector<float> g = dev_download(d, n);
        int bad = 0;
        for (int i = 0; i < n; i++) bad += g[i] != (float)(left * 1000000 + i);
        check(bad == 0, "grouped ring ncclSend/ncclRecv (1 MiB each) completes and delivers", "%d wrong", bad);

        // ungrouped pairwise exchange in a safe order (even ranks send first)
        int peer = R ^ 1;
        if (R % 2 == 0) {
            ncclCheck(ncclSend(s, 1000, ncclFloat, peer, world, 0));
            ncclCheck(ncclRecv(d, 1000, ncclFloat, peer, world, 0));
        } else {
            ncclCheck(ncclRecv(d, 1000, ncclFloat, peer, world, 0));
            ncclCheck(ncclSend(s, 1000, ncclFloat, peer, world, 0));
        }
        g = dev_download(d, 1000);
        bad = 0;
        for (int i = 0; i < 1000; i++) bad += g[i] != (float)(peer * 1000000 + i);
        check(bad == 0, "ungrouped ncclSend/ncclRecv between pairs, ordered send-first / recv-first", "%d wrong", bad);

        // one group: send to self, to both neighbours, and two all-reduces
        float *a = dev_alloc<float>(4), *b = dev_alloc<float>(4), *c = dev_alloc<float>(4);
        float* x = dev_upload(std::vector<float>{1.0f, 2.0f, 3.0f, 4.0f});
        float* y = dev_upload(std::vector<float>{(float)R, (float)R, (float)R, (float)R});
        ncclCheck(ncclGroupStart());
        ncclCheck(ncclSend(y, 4, ncclFloat, R, world, 0));
        ncclCheck(ncclRecv(a, 4, ncclFloat, R, world, 0));
        ncclCheck(ncclSend(y, 4, ncclFloat, right, world, 0));
        ncclCheck(ncclSend(y, 4, ncclFloat, left, world, 0));
        ncclCheck(ncclRecv(b, 4, ncclFloat, left, world, 0));
        ncclCheck(ncclRecv(c, 4, ncclFloat, right, world, 0));
        ncclCheck(ncclAllReduce(x, x, 4, ncclFloat, ncclSum, world, 0));
        ncclCheck(ncclAllReduce(x, x, 4, ncclFloat, ncclMax, world, 0));
        ncclCheck(ncclGroupEnd());
        std::vector<float> ga = dev_download(a, 4), gb = dev_download(b, 4), gc = dev_download(c, 4),
                           gx = dev_download(x, 4);
        bad = 0;
        for (int i = 0; i < 4; i++)
            bad += ga[i] != (float)R || gb[i] != (float)left || gc[i] != (float)right || gx[i] != 4.0f * (i + 1);
        check(bad == 0, "one group with send/recv to self, to both neighbours and two all-reduces", "%d wrong", bad);
        cudaCheck(cudaFree(a));
        cudaCheck(cudaFree(b));
        cudaCheck(cudaFree(c));
        cudaCheck(cudaFree(x));
        cudaCheck(cudaFree(y));
        cudaCheck(cudaFree(s));
        cudaCheck(cudaFree(d));
    }
    { // send and receive on their own streams, ungrouped, completed lazily: every rank first
      // sends to its right neighbour (stream ss), then receives from its left one (stream sr),
      // and a copy on a third stream waits for the receive's event. On a GPU the send kernel
      // waits for its receive while the other stream goes on; a send that blocked the host at
      // the call (as MPI_Ssend) would hang every rank here, each before posting its receive.
        const int n = 1 << 16, right = (R + 1) % N, left = (R + N - 1) % N;
        std::vector<float> h(n);
        for (int i = 0; i < n; i++) h[i] = (float)(R * 1000000 + i);
        float *s = dev_upload(h), *d = dev_alloc<float>(n), *e = dev_alloc<float>(n);
        cudaStream_t ss, sr, cs;
        cudaEvent_t got;
        cudaCheck(cudaStreamCreateWithFlags(&ss, cudaStreamNonBlocking));
        cudaCheck(cudaStreamCreateWithFlags(&sr, cudaStreamNonBlocking));
        cudaCheck(cudaStreamCreateWithFlags(&cs, cudaStreamNonBlocking));
        cudaCheck(cudaEventCreateWithFlags(&got, cudaEventDisableTiming));
        ncclCheck(ncclSend(s, n, ncclFloat, right, world, ss));
        ncclCheck(ncclRecv(d, n, ncclFloat, left, world, sr));
        cudaCheck(cudaEventRecord(got, sr));
        cudaCheck(cudaStreamWaitEvent(cs, got, 0));
        cudaCheck(cudaMemcpyAsync(e, d, sizeof(float) * n, cudaMemcpyDeviceToDevice, cs));
        cudaCheck(cudaStreamSynchronize(cs)); // runs the receive's completion, then the copy
        std::vector<float> g = dev_download(e, n);
        int bad = 0;
        for (int i = 0; i < n; i++) bad += g[i] != (float)(left * 1000000 + i);
        cudaCheck(cudaStreamSynchronize(ss));
        check(bad == 0,
              "ungrouped ncclSend then ncclRecv on two streams (ring, all send first) complete lazily and deliver "
              "after an event",
              "%d wrong", bad);
        cudaCheck(cudaEventDestroy(got));
        cudaCheck(cudaStreamDestroy(ss));
        cudaCheck(cudaStreamDestroy(sr));
        cudaCheck(cudaStreamDestroy(cs));
        cudaCheck(cudaFree(s));
        cudaCheck(cudaFree(d));
        cudaCheck(cudaFree(e));
    }
    check(ncclGroupEnd() == ncclInvalidUsage, "ncclGroupEnd without ncclGroupStart is ncclInvalidUsage");
    { // a 1-rank communicator
        ncclUniqueId id1;
        ncclCheck(ncclGetUniqueId(&id1));
        ncclComm_t solo;
        ncclCheck(ncclCommInitRank(&solo, 1, id1, 0));
        check(sum_of(solo, 42.0f) == 42.0f, "1-rank communicator from a local unique id");
        ncclCheck(ncclCommDestroy(solo));
    }
#ifdef CUEMU
    {
        std::vector<float> host(8, 1.0f);
        ncclResult_t r = ncclAllReduce(host.data(), host.data(), 8, ncclFloat, ncclSum, world, 0);
        check(r == ncclInvalidArgument, "emulation: a host buffer passed to ncclAllReduce is ncclInvalidArgument", "%s",
              ncclGetErrorString(r));
    }
#endif
    cudaCheck(cudaFree(one));
    ncclCheck(ncclCommDestroy(world));
    if (g_rank == 0) printf("%d passed, %d failed\n", g_pass, g_fail);
    MPI_Finalize();
    return g_fail ? 1 : 0;
}
