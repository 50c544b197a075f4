/*
 * eval.h: the zero-shot cloze evaluation (LAMBADA-style last-word prediction) and the
 * test-only logits dump, for both trainers and any layout. Device-free: a trainer gives
 * two hooks, one forward of a (B, T) token batch through its pipeline and one fetch of a
 * logits row on the last stage, and everything else (packing items, the TP reduction of
 * a row, scoring, the DP split, logging) is here.
 *
 * The cloze file (dev/eval/make_cloze.py writes it) is JSONL, one item per line, with at
 * least "ids": [context ids..., target ids...] and "n_target": k (the target word's
 * tokens, the last k ids). Scoring follows lm-evaluation-harness's loglikelihood exactly,
 * so the two can be compared on the same checkpoint: the window is the last T+1 ids, the
 * model reads its first T, and the k target tokens are scored at the last k positions.
 *   accuracy   = fraction of items where every target token is the argmax (greedy
 *                decoding would produce the whole word)
 *   perplexity = exp(-mean over items of the target word's summed log-probability)
 */
#ifndef LLMC_EVAL_H
#define LLMC_EVAL_H

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "comm.h"
#include "logger.h"
#include "safeio.h"
#include "utils.h"

typedef struct {
    int n;     // items
    int* off;  // (n+1) item i's ids are ids[off[i] .. off[i+1])
    int* ntgt; // (n) target tokens, the last ntgt[i] ids of the item
    int* ids;
} ClozeSet;

typedef struct {
    void* self;
    void (*forward)(void* self, const int* tokens);      // (B, T) through the pipeline, forward only; every rank
    void (*row)(void* self, int b, int pos, float* row); // last stage: this TP rank's logits of (b, pos) at their
                                                         // vocabulary offset, zeros elsewhere (Vp floats)
} EvalHooks;

typedef struct {
    double acc, ppl;
    int n;
} ClozeResult;

static void cloze_free(ClozeSet* s) {
    free(s->off);
    free(s->ntgt);
    free(s->ids);
    memset(s, 0, sizeof(*s));
}

// the longest line of a cloze file: an item of a million ids is far longer than any -seq
#define CLOZE_MAX_LINE (16 << 20)

// "n_target": a whole number in [1, T] (at most the T predictions a row makes), else -1
static int cloze_parse_ntarget(const char* q, int T) {
    while (*q == ' ') q++;
    char* end;
    errno = 0;
    long long k = strtoll(q, &end, 10);
    while (*end == ' ') end++;
    if (end == q || errno != 0 || (*end != ',' && *end != '}') || k < 1 || k > T) return -1;
    return (int)k;
}

// Reads a cloze JSONL from f (closed here; path names it in messages) for a model of vocabulary
// V and T positions. Returns 0, or -1 with a message in err (bad line, id >= V, n_target not
// in [1, T], ...).
static int cloze_load_stream(ClozeSet* s, FILE* f, const char* path, int V, int T, char* err, size_t errn) {
    memset(s, 0, sizeof(*s));
    size_t cap_items = 256, cap_ids = 4096, nids = 0;
    s->off = (int*)malloc_check(sizeof(int) * (cap_items + 1));
    s->ntgt = (int*)malloc_check(sizeof(int) * cap_items);
    s->ids = (int*)malloc_check(sizeof(int) * cap_ids);
    s->off[0] = 0;
    size_t linecap = 1 << 16;
    char* line = (char*)malloc_check(linecap);
    int lineno = 0, rc = 0;
    while (rc == 0) {
        // whole line, however long
        size_t len = 0;
        int ch;
        while ((ch = fgetc(f)) != EOF && ch != '\n' && len < CLOZE_MAX_LINE) {
            if (len + 1 >= linecap) {
                linecap *= 2;
                line = (char*)realloc(line, linecap);
                if (!line) die("out of memory reading %s", path);
            }
            line[len++] = (char)ch;
        }
        line[len] = '\0';
        if (ch == EOF && len == 0) break;
        lineno++;
        if (len == CLOZE_MAX_LINE) {
            snprintf(err, errn, "%s line %d is longer than %d bytes: not a cloze file", path, lineno, CLOZE_MAX_LINE);
            rc = -1;
            break;
        }
        if (len == 0) continue;
        char* p = strstr(line, "\"ids\"");
        char* q = strstr(line, "\"n_target\"");
        if (p == NULL || q == NULL || (p = strchr(p, '[')) == NULL || (q = strchr(q, ':')) == NULL) {
            snprintf(err, errn, "%s line %d: want \"ids\": [...] and \"n_target\": k", path, lineno);
            rc = -1;
            break;
        }
        int k = cloze_parse_ntarget(q + 1, T);
        if (k < 0) {
            snprintf(err, errn, "%s line %d: n_target must be a whole number in [1, %d] (the sequence length)", path,
                     lineno, T);
            rc = -1;
            break;
        }
        size_t start = nids;
        p++;
        while (1) {
            while (*p == ' ' || *p == ',') p++;
            if (*p == ']') break;
            char* end;
            long v = strtol(p, &end, 10);
            if (end == p || v < 0 || v >= V) {
                snprintf(err, errn, "%s line %d: bad token id (ids must be integers in [0, %d))", path, lineno, V);
                rc = -1;
                break;
            }
            if (nids == cap_ids) {
                cap_ids *= 2;
                s->ids = (int*)realloc(s->ids, sizeof(int) * cap_ids);
                if (!s->ids) die("out of memory reading %s", path);
            }
            s->ids[nids++] = (int)v;
            p = end;
        }
        if (rc != 0) break;
        if (k < 1 || (size_t)k >= nids - start) {
            snprintf(err, errn, "%s line %d: n_target %d must be >= 1 and leave at least one context id", path, lineno,
                     k);
            rc = -1;
            break;
        }
        if ((size_t)s->n == cap_items) {
            cap_items *= 2;
            s->off = (int*)realloc(s->off, sizeof(int) * (cap_items + 1));
            s->ntgt = (int*)realloc(s->ntgt, sizeof(int) * cap_items);
            if (!s->off || !s->ntgt) die("out of memory reading %s", path);
        }
        s->ntgt[s->n] = k;
        s->n++;
        s->off[s->n] = (int)nids;
    }
    free(line);
    fclose(f);
    if (rc == 0 && s->n == 0) {
        snprintf(err, errn, "cloze file %s has no items", path);
        rc = -1;
    }
    if (rc != 0) cloze_free(s);
    return rc;
}

// cloze_load_stream on the regular file path
static int cloze_load(ClozeSet* s, const char* path, int V, int T, char* err, size_t errn) {
    memset(s, 0, sizeof(*s));
    FILE* f = safeio_open_read(path, "cloze file", err, errn);
    if (f == NULL) return -1;
    return cloze_load_stream(s, f, path, V, T, err, errn);
}

// Item i packed into one row of T inputs (pad: the rest, never read by a causal model).
// Returns the input position of the first target token's prediction.
static int cloze_pack(const ClozeSet* s, int i, int T, int* row, int pad) {
    int n = s->off[i + 1] - s->off[i];
    const int* ids = s->ids + s->off[i];
    int w0 = n > T + 1 ? n - (T + 1) : 0; // the window: the last T+1 ids
    int nin = n - w0 - 1;                 // inputs: all of the window but its last id
    for (int t = 0; t < T; t++) row[t] = t < nin ? ids[w0 + t] : pad;
    return nin - s->ntgt[i];
}

// The full row (V real columns): max, first argmax, log-sum-exp.
static void eval_row_stats(const float* row, int V, int* argmax, double* lse) {
    float mx = -INFINITY;
    int am = 0;
    for (int v = 0; v < V; v++)
        if (row[v] > mx) {
            mx = row[v];
            am = v;
        }
    double s = 0.0;
    for (int v = 0; v < V; v++) s += exp((double)row[v] - mx);
    *argmax = am;
    *lse = mx + log(s);
}

// Every rank calls this. Items are dealt to DP replicas in micro-batches of B; the last
// stage's TP group reduces each scored row; TP rank 0 of each replica's last stage counts.
static ClozeResult cloze_evaluate(const ClozeSet* s, const EvalHooks* h, Comm* comm, int B, int T, int V, int Vp,
                                  int last_stage, int pad) {
    int* tokens = (int*)malloc_check(sizeof(int) * B * T);
    float* row = (float*)malloc_check(sizeof(float) * Vp);
    int* first = (int*)malloc_check(sizeof(int) * B);
    double sum_lp = 0.0, correct = 0.0, count = 0.0;
    int rounds = (s->n + B * comm->DP - 1) / (B * comm->DP);
    for (int r = 0; r < rounds; r++) {
        for (int b = 0; b < B; b++) {
            int i = (r * comm->DP + comm->dp) * B + b;
            if (i < s->n)
                first[b] = cloze_pack(s, i, T, tokens + (size_t)b * T, pad);
            else
                for (int t = 0; t < T; t++) tokens[(size_t)b * T + t] = pad;
        }
        h->forward(h->self, tokens);
        if (!last_stage) continue;
        for (int b = 0; b < B; b++) {
            int i = (r * comm->DP + comm->dp) * B + b;
            if (i >= s->n) continue;
            const int* tgt = s->ids + s->off[i + 1] - s->ntgt[i];
            double lp = 0.0;
            int greedy = 1;
            for (int j = 0; j < s->ntgt[i]; j++) {
                h->row(h->self, b, first[b] + j, row);
                tp_allreduce_sum(comm, row, Vp);
                int am;
                double lse;
                eval_row_stats(row, V, &am, &lse);
                lp += row[tgt[j]] - lse;
                if (am != tgt[j]) greedy = 0;
            }
            if (comm->tp == 0) {
                sum_lp += lp;
                correct += greedy;
                count += 1;
            }
        }
    }
    free(tokens);
    free(row);
    free(first);
    ClozeResult res;
    res.n = (int)world_sum(comm, count);
    res.acc = world_sum(comm, correct) / res.n;
    res.ppl = exp(-world_sum(comm, sum_lp) / res.n);
    return res;
}

static void eval_log(Logger* lg, int64_t step, int64_t tokens, const ClozeResult* r) {
    if (lg->print) {
        printf("eval %6lld | cloze_acc %.4f | cloze_ppl %.4f | items %d\n", (long long)step, r->acc, r->ppl, r->n);
        fflush(stdout);
    }
    if (lg->f) {
        fprintf(lg->f, "{\"type\":\"eval\",\"step\":%lld,\"tokens\":%lld,", (long long)step, (long long)tokens);
        json_num(lg->f, "cloze_acc", r->acc);
        json_num(lg->f, "cloze_ppl", r->ppl);
        fprintf(lg->f, "\"cloze_items\":%d,\"rank\":%d}\n", r->n, lg->rank);
        fflush(lg->f);
    }
}

// Test-only: the logits (B, T, V) of one token batch, as float32, written by the rank
// `writer` (its replica's last stage, TP 0). Every rank calls it.
static int eval_dump_logits(const EvalHooks* h, Comm* comm, const int* tokens, int B, int T, int V, int Vp,
                            int last_stage, int writer, const char* path) {
    h->forward(h->self, tokens);
    char err[1400];
    FILE* f = comm->rank == writer ? safeio_open_write(path, 0, "-dump-logits file", err, sizeof(err)) : NULL;
    int ok = comm->rank != writer || f != NULL;
    float* row = (float*)malloc_check(sizeof(float) * Vp);
    for (int b = 0; b < B && last_stage; b++) {
        for (int t = 0; t < T; t++) {
            h->row(h->self, b, t, row);
            tp_allreduce_sum(comm, row, Vp);
            if (f && fwrite(row, sizeof(float), V, f) != (size_t)V) ok = 0;
        }
    }
    free(row);
    if (f && fclose(f) != 0) ok = 0;
    return world_sum(comm, ok ? 0.0 : 1.0) == 0.0 ? 0 : -1;
}

#endif // LLMC_EVAL_H
