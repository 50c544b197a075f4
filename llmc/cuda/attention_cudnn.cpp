// llmc/cuda/attention_cudnn.cpp - cuDNN fused flash attention behind llmc/cuda/attention_cudnn.h
// (buffer layouts and contract there). Built only with USE_CUDNN, as its own object file.
#include "attention_cudnn.h"

#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>
#include <unordered_map>
#include <cudnn.h>
#include <cudnn_frontend.h>

#include "cuda_common.cuh"

namespace fe = cudnn_frontend;

#define cudnnCheck(call)                                                                                        \
    do {                                                                                                        \
        cudnnStatus_t cudnn_status_ = (call);                                                                   \
        if (cudnn_status_ != CUDNN_STATUS_SUCCESS) {                                                            \
            fprintf(stderr,                                                                                     \
                    "[cuDNN ERROR] %s:%d: %s failed: %s\n"                                                      \
                    "  next: check that the cuDNN library found at run time (LD_LIBRARY_PATH) is the one\n"     \
                    "  the trainer was built against, or run with LLMC_ATTENTION=tc to use the own kernels.\n", \
                    __FILE__, __LINE__, #call, cudnnGetErrorString(cudnn_status_));                             \
            exit(1);                                                                                            \
        }                                                                                                       \
    } while (0)

// a frontend call that must succeed once the graph was accepted (execution)
#define feCheck(call)                                                                                       \
    do {                                                                                                    \
        fe::error_t fe_err_ = (call);                                                                       \
        if (fe_err_.is_bad()) {                                                                             \
            fprintf(stderr,                                                                                 \
                    "[cuDNN frontend ERROR] %s:%d: %s failed: %s\n"                                         \
                    "  next: rerun with CUDNN_FRONTEND_LOG_INFO=1 CUDNN_FRONTEND_LOG_FILE=stderr for the\n" \
                    "  frontend's reason, or with LLMC_ATTENTION=tc to use the own kernels.\n",             \
                    __FILE__, __LINE__, #call, fe_err_.get_message().c_str());                              \
            exit(1);                                                                                        \
        }                                                                                                   \
    } while (0)

// tensor ids in the variant packs
enum { UID_Q = 1, UID_K, UID_V, UID_O, UID_STATS, UID_DO, UID_DQ, UID_DK, UID_DV };

struct CudnnAttn {
    int B, T, NH, hs;
    cudnnHandle_t handle;
    std::shared_ptr<fe::graph::Graph> fwd, bwd;
    int deterministic;
    void* workspace;
    size_t workspace_bytes;
};

// Q, K, V (or dQ, dK, dV) as (B, NH, T, hs) views of the packed (B, T, 3*NH*hs) buffer.
static std::shared_ptr<fe::graph::Tensor_attributes> qkv_view(fe::graph::Graph& g, const char* name, int64_t uid, int B,
                                                              int T, int NH, int hs) {
    int64_t C3 = 3 * (int64_t)NH * hs;
    return g.tensor(fe::graph::Tensor_attributes()
                        .set_name(name)
                        .set_uid(uid)
                        .set_dim({B, NH, T, hs})
                        .set_stride({(int64_t)T * C3, hs, C3, 1}));
}

static void out_layout(std::shared_ptr<fe::graph::Tensor_attributes> t, int64_t uid, int B, int T, int NH, int hs) {
    int64_t Cl = (int64_t)NH * hs;
    t->set_uid(uid).set_dim({B, NH, T, hs}).set_stride({(int64_t)T * Cl, hs, Cl, 1});
}

static void stats_layout(std::shared_ptr<fe::graph::Tensor_attributes> t, int64_t uid, int B, int T, int NH) {
    t->set_uid(uid).set_data_type(fe::DataType_t::FLOAT).set_dim({B, NH, T, 1}).set_stride({(int64_t)NH * T, T, 1, 1});
}

static std::shared_ptr<fe::graph::Graph> new_graph() {
    auto g = std::make_shared<fe::graph::Graph>();
    g->set_io_data_type(fe::DataType_t::BFLOAT16)
        .set_intermediate_data_type(fe::DataType_t::FLOAT)
        .set_compute_data_type(fe::DataType_t::FLOAT);
    return g;
}

// validate, lower, pick a plan; false (with the reason) when cuDNN cannot run the graph
static bool finalize(fe::graph::Graph& g, cudnnHandle_t h, std::string* why) {
    fe::error_t e = g.validate();
    if (e.is_good()) e = g.build_operation_graph(h);
    if (e.is_good()) e = g.create_execution_plans({fe::HeurMode_t::A});
    if (e.is_good()) e = g.check_support(h);
    if (e.is_good()) e = g.build_plans(h);
    if (e.is_bad()) *why = e.get_message();
    return e.is_good();
}

static std::shared_ptr<fe::graph::Graph> build_forward(int B, int T, int NH, int hs, cudnnHandle_t h,
                                                       std::string* why) {
    auto g = new_graph();
    auto Q = qkv_view(*g, "Q", UID_Q, B, T, NH, hs);
    auto K = qkv_view(*g, "K", UID_K, B, T, NH, hs);
    auto V = qkv_view(*g, "V", UID_V, B, T, NH, hs);
    auto opts = fe::graph::SDPA_attributes()
                    .set_name("attention_forward")
                    .set_generate_stats(true)
                    .set_causal_mask(true)
                    .set_attn_scale(1.0f / sqrtf((float)hs));
    auto [O, stats] = g->sdpa(Q, K, V, opts);
    O->set_output(true);
    out_layout(O, UID_O, B, T, NH, hs);
    stats->set_output(true);
    stats_layout(stats, UID_STATS, B, T, NH);
    if (!finalize(*g, h, why)) return nullptr;
    return g;
}

static std::shared_ptr<fe::graph::Graph> build_backward(int B, int T, int NH, int hs, bool deterministic,
                                                        cudnnHandle_t h, std::string* why) {
    auto g = new_graph();
    auto Q = qkv_view(*g, "Q", UID_Q, B, T, NH, hs);
    auto K = qkv_view(*g, "K", UID_K, B, T, NH, hs);
    auto V = qkv_view(*g, "V", UID_V, B, T, NH, hs);
    auto O = g->tensor(fe::graph::Tensor_attributes().set_name("O"));
    out_layout(O, UID_O, B, T, NH, hs);
    auto dO = g->tensor(fe::graph::Tensor_attributes().set_name("dO"));
    out_layout(dO, UID_DO, B, T, NH, hs);
    auto stats = g->tensor(fe::graph::Tensor_attributes().set_name("Stats"));
    stats_layout(stats, UID_STATS, B, T, NH);
    auto opts = fe::graph::SDPA_backward_attributes()
                    .set_name("attention_backward")
                    .set_causal_mask(true)
                    .set_attn_scale(1.0f / sqrtf((float)hs))
                    .set_deterministic_algorithm(deterministic);
    auto [dQ, dK, dV] = g->sdpa_backward(Q, K, V, O, dO, stats, opts);
    int64_t C3 = 3 * (int64_t)NH * hs;
    dQ->set_output(true).set_uid(UID_DQ).set_dim({B, NH, T, hs}).set_stride({(int64_t)T * C3, hs, C3, 1});
    dK->set_output(true).set_uid(UID_DK).set_dim({B, NH, T, hs}).set_stride({(int64_t)T * C3, hs, C3, 1});
    dV->set_output(true).set_uid(UID_DV).set_dim({B, NH, T, hs}).set_stride({(int64_t)T * C3, hs, C3, 1});
    if (!finalize(*g, h, why)) return nullptr;
    return g;
}

CudnnAttn* cudnn_attn_create(int B, int T, int NH, int hs, cudaStream_t stream, char* why, size_t n) {
    CudnnAttn* ca = new CudnnAttn();
    ca->B = B;
    ca->T = T;
    ca->NH = NH;
    ca->hs = hs;
    cudnnCheck(cudnnCreate(&ca->handle));
    cudnnCheck(cudnnSetStream(ca->handle, stream));
    std::string reason;
    ca->fwd = build_forward(B, T, NH, hs, ca->handle, &reason);
    if (ca->fwd) {
        ca->deterministic = 1;
        ca->bwd = build_backward(B, T, NH, hs, true, ca->handle, &reason);
        if (!ca->bwd) {
            ca->deterministic = 0;
            ca->bwd = build_backward(B, T, NH, hs, false, ca->handle, &reason);
        }
    }
    if (!ca->fwd || !ca->bwd) {
        snprintf(why, n, "cuDNN %zu has no fused attention for B=%d T=%d heads=%d head size %d: %s", cudnnGetVersion(),
                 B, T, NH, hs, reason.c_str());
        cudnnCheck(cudnnDestroy(ca->handle));
        delete ca;
        return NULL;
    }
    int64_t wf = 0, wb = 0;
    feCheck(ca->fwd->get_workspace_size(wf));
    feCheck(ca->bwd->get_workspace_size(wb));
    ca->workspace_bytes = (size_t)(wf > wb ? wf : wb);
    ca->workspace = NULL;
    if (ca->workspace_bytes > 0) cudaCheck(cudaMalloc(&ca->workspace, ca->workspace_bytes));
    return ca;
}

void cudnn_attn_forward(CudnnAttn* ca, void* out, float* lse, const void* qkv, cudaStream_t stream) {
    int64_t Cl = (int64_t)ca->NH * ca->hs;
    char* base = (char*)const_cast<void*>(qkv);
    const size_t el = 2; // bf16
    std::unordered_map<int64_t, void*> pack = {
        {UID_Q, base}, {UID_K, base + el * Cl}, {UID_V, base + el * 2 * Cl}, {UID_O, out}, {UID_STATS, lse}};
    cudnnCheck(cudnnSetStream(ca->handle, stream));
    feCheck(ca->fwd->execute(ca->handle, pack, ca->workspace));
}

void cudnn_attn_backward(CudnnAttn* ca, void* dqkv, const void* dout, const void* out, const void* qkv,
                         const float* lse, cudaStream_t stream) {
    int64_t Cl = (int64_t)ca->NH * ca->hs;
    char* base = (char*)const_cast<void*>(qkv);
    char* dbase = (char*)dqkv;
    const size_t el = 2; // bf16
    std::unordered_map<int64_t, void*> pack = {{UID_Q, base},
                                               {UID_K, base + el * Cl},
                                               {UID_V, base + el * 2 * Cl},
                                               {UID_O, const_cast<void*>(out)},
                                               {UID_DO, const_cast<void*>(dout)},
                                               {UID_STATS, const_cast<float*>(lse)},
                                               {UID_DQ, dbase},
                                               {UID_DK, dbase + el * Cl},
                                               {UID_DV, dbase + el * 2 * Cl}};
    cudnnCheck(cudnnSetStream(ca->handle, stream));
    feCheck(ca->bwd->execute(ca->handle, pack, ca->workspace));
}

int cudnn_attn_deterministic(const CudnnAttn* ca) { return ca->deterministic; }
size_t cudnn_attn_workspace_bytes(const CudnnAttn* ca) { return ca->workspace_bytes; }
size_t cudnn_attn_version(void) { return cudnnGetVersion(); }

void cudnn_attn_destroy(CudnnAttn* ca) {
    if (ca == NULL) return;
    if (ca->workspace) cudaCheck(cudaFree(ca->workspace));
    cudnnCheck(cudnnDestroy(ca->handle));
    delete ca;
}
