/*
 * dataloader.h: token shards in llm.c's format and the layout-independent data
 * addressing of doc/spec.md section 4.
 *
 * Shard: 256 int32 header (magic 20240520, version 1, token count), then uint16 tokens.
 * The shards matched by a glob (sorted by name) form one token stream. Sample i is the
 * T+1 tokens starting at token i*T (inputs = first T, targets = last T), so there are
 * floor((ntokens-1)/T) samples. Sample number s of the run (counting every sample ever
 * consumed) maps to sample index perm_e(s mod N) of epoch e = s / N, where perm_e is a
 * seeded bijection (a Feistel network with cycle walking: no table, O(1) per sample) or
 * the identity without shuffling. Step k's global batch is run samples [c_k, c_k + B_k);
 * DP rank d takes the contiguous block [c_k + d*B_k/DP, c_k + (d+1)*B_k/DP) and splits it
 * into micro-batches of mb consecutive samples. A rank reads only its own samples.
 *
 * A blend (blend.h) is several such streams ("parts"), their shards laid back to back: run
 * sample s is sample n_d(s) of part d = the blend's pick, and each part runs through its own
 * epochs, shuffled with its own key (part 0's is the one-stream key, so a plain -i glob keeps
 * its order from before blends).
 *
 * Every shard is validated when it is opened (and by -check when -i/-j are given): a
 * regular file (a FIFO would block), header magic/version/count consistent with the file
 * size, and every token id < V (one vectorisable max-scan of the uint16s, ~2 GB/s), so a
 * poison token deep in a shard stops the run before step 1, naming shard and offset,
 * instead of killing it (and every resume) when that sample comes up.
 */
#ifndef LLMC_DATALOADER_H
#define LLMC_DATALOADER_H

#include <glob.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "blend.h"
#include "checkpoint.h"
#include "rand.h"
#include "safeio.h"
#include "utils.h"

#define SHARD_MAGIC 20240520
#define SHARD_VERSION 1
#define SHARD_HEADER_BYTES 1024

typedef struct {
    int64_t tok0, ntokens, nsamples; // its tokens in the stream, and its samples of T+1
    uint64_t key;                    // shuffle key; epoch e permutes with key + e
} DataPart;

typedef struct {
    int nshards;
    char** paths;
    int64_t* start;            // first stream token of each shard
    int64_t* count;            // tokens in each shard
    int64_t ntokens, nsamples; // over all parts
    int T, V;
    int shuffle;
    uint64_t seed;
    FILE* f;
    int f_shard;     // one open shard at a time
    uint16_t* buf;   // (T+1)
    BlendSpec* spec; // the parts' names, globs and weights
    DataPart* parts; // (spec->n)
    BlendOrder order;
    int nskip; // data passed over (-on-spike rewind): from run sample skip_at[i] on, skip_n[i] more
    int64_t skip_at[CKPT_MAX_SKIPS], skip_n[CKPT_MAX_SKIPS];
    int max_id; // the largest token id in the shards (a vocabulary far above it trains empty rows)
} DataSet;

// Checks a shard header (the first 256 int32) against the file size. Returns the token
// count, or -1 with a message in err. Pure: the fuzzer calls it on arbitrary bytes.
static int64_t shard_parse_header(const int32_t* h, int64_t file_bytes, const char* path, char* err, size_t errn) {
    if (file_bytes < SHARD_HEADER_BYTES) {
        snprintf(err, errn, "data shard %s is truncated (no complete 1024-byte header)", path);
        return -1;
    }
    if (h[0] != SHARD_MAGIC) {
        snprintf(err, errn, "data shard %s has wrong magic %d (want %d): not an llm.c token shard", path, h[0],
                 SHARD_MAGIC);
        return -1;
    }
    if (h[1] != SHARD_VERSION) {
        snprintf(err, errn, "data shard %s has version %d (want %d)", path, h[1], SHARD_VERSION);
        return -1;
    }
    int64_t n = (int64_t)(uint32_t)h[2];
    if (file_bytes != SHARD_HEADER_BYTES + 2 * n) {
        snprintf(err, errn,
                 "data shard %s is truncated or corrupt: header says %lld tokens, file holds %lld bytes (want %lld)",
                 path, (long long)n, (long long)file_bytes, (long long)(SHARD_HEADER_BYTES + 2 * n));
        return -1;
    }
    return n;
}

// The largest token id in tok[0..n) (0 when n = 0). The max-reduction loop has no branch, so the
// compiler vectorises it.
static uint16_t shard_max_id(const uint16_t* tok, int64_t n) {
    uint16_t mx = 0;
    for (int64_t i = 0; i < n; i++) mx = tok[i] > mx ? tok[i] : mx;
    return mx;
}

// Index of the first token id >= V in tok[0..n), or -1; only a bad chunk is searched element by element.
static int64_t shard_scan_tokens(const uint16_t* tok, int64_t n, int V) {
    if ((int)shard_max_id(tok, n) < V) return -1;
    for (int64_t i = 0; i < n; i++)
        if ((int)tok[i] >= V) return i;
    return -1;
}

// Opens and validates one shard completely (type, header, size, every token < V); *max_id (when
// not NULL) gets its largest token id. Returns the token count, or -1 with a message in err.
static int64_t shard_validate_ids(const char* path, int V, int* max_id, char* err, size_t errn) {
    FILE* f = safeio_open_read(path, "data shard", err, errn);
    if (f == NULL) return -1;
    int32_t h[256];
    memset(h, 0, sizeof(h));
    size_t got = fread(h, 1, sizeof(h), f);
    struct stat st;
    if (fstat(fileno(f), &st) != 0) {
        snprintf(err, errn, "cannot stat data shard %s", path);
        fclose(f);
        return -1;
    }
    int64_t n = shard_parse_header(h, got < sizeof(h) ? (int64_t)got : (int64_t)st.st_size, path, err, errn);
    if (n < 0) {
        fclose(f);
        return -1;
    }
    const int64_t CHUNK = 1 << 20; // tokens per read
    uint16_t* buf = (uint16_t*)malloc_check(sizeof(uint16_t) * CHUNK);
    for (int64_t done = 0; done < n;) {
        int64_t take = n - done < CHUNK ? n - done : CHUNK;
        if (fread(buf, sizeof(uint16_t), (size_t)take, f) != (size_t)take) {
            snprintf(err, errn, "data shard %s is unreadable at token %lld", path, (long long)done);
            free(buf);
            fclose(f);
            return -1;
        }
        uint16_t mx = shard_max_id(buf, take);
        if (max_id != NULL && (int)mx > *max_id) *max_id = mx;
        int64_t bad = (int)mx < V ? -1 : shard_scan_tokens(buf, take, V);
        if (bad >= 0) {
            snprintf(err, errn,
                     "data shard %s: token id %d at token offset %lld is >= the vocabulary size %d: pass the right -V "
                     "or rebuild the shard",
                     path, buf[bad], (long long)(done + bad), V);
            free(buf);
            fclose(f);
            return -1;
        }
        done += take;
    }
    free(buf);
    fclose(f);
    return n;
}

static int64_t shard_validate(const char* path, int V, char* err, size_t errn) {
    return shard_validate_ids(path, V, NULL, err, errn);
}

// -check: every shard a glob matches, validated as dataset_open would, and together at least
// min_samples samples of T+1 tokens. 0 ok, 1 when nothing matches (err says so: a dry run
// may check a recipe away from its data), -1 (err).
static int dataset_validate_glob(const char* pattern, int V, int T, int64_t min_samples, char* err, size_t errn) {
    glob_t g;
    if (glob(pattern, 0, NULL, &g) != 0 || g.gl_pathc == 0) {
        snprintf(err, errn, "no data shards match '%s'", pattern);
        return 1;
    }
    int rc = 0;
    int64_t total = 0;
    for (size_t i = 0; i < g.gl_pathc && rc == 0; i++) {
        int64_t n = shard_validate(g.gl_pathv[i], V, err, errn);
        if (n < 0) rc = -1;
        total += n;
    }
    globfree(&g);
    int64_t ns = total > 0 ? (total - 1) / T : 0;
    if (rc == 0 && ns < min_samples) {
        snprintf(err, errn, "data '%s' has %lld tokens: %lld samples of %d+1 tokens, fewer than the %lld it needs",
                 pattern, (long long)total, (long long)ns, T, (long long)min_samples);
        rc = -1;
    }
    return rc;
}

// -check of a blend: each dataset's shards validated as dataset_open would (or, where none are
// here, the size its "tokens" documents), and the epochs the run's total_tokens will take of it,
// printed beside the epochs its source documents. 0 ok, -1 (err).
static int dataset_check_blend(const BlendSpec* b, int V, int T, int64_t total_tokens, int print, char* err,
                               size_t errn) {
    for (int d = 0; d < b->n; d++) {
        int64_t tokens = 0;
        glob_t g;
        int found = glob(b->path[d], 0, NULL, &g) == 0 && g.gl_pathc > 0;
        for (size_t i = 0; found && i < g.gl_pathc; i++) {
            int64_t n = shard_validate(g.gl_pathv[i], V, err, errn);
            if (n < 0) {
                globfree(&g);
                return -1;
            }
            tokens += n;
        }
        if (found) globfree(&g);
        if (found && (tokens - 1) / T < 1) {
            snprintf(err, errn, "dataset %s ('%s') has %lld tokens: fewer than one sample of %d+1 tokens", b->name[d],
                     b->path[d], (long long)tokens, T);
            return -1;
        }
        if (!found) tokens = b->tokens[d];
        if (!print) continue;
        char size[96];
        char ep[96] = "";
        char doc[64] = "";
        if (tokens > 0)
            snprintf(size, sizeof(size), "%.4gB tokens (%s)", tokens / 1e9,
                     found ? "shards" : "documented; no shards here");
        else
            snprintf(size, sizeof(size), "no shards here and no documented size");
        if (tokens > 0)
            snprintf(ep, sizeof(ep), ", %.3f epochs over %.4gB tokens",
                     b->weight[d] * (double)total_tokens / (double)tokens, total_tokens / 1e9);
        if (b->epochs[d] > 0) snprintf(doc, sizeof(doc), " (source: %.3g)", b->epochs[d]);
        printf("check: dataset %-18s weight %.4f, %s%s%s\n", b->name[d], b->weight[d], size, ep, doc);
    }
    return 0;
}

// Validates a shard (see shard_validate_ids) or exits with the one-line error.
static int64_t shard_check(const char* path, int V, int* max_id) {
    char err[1400];
    int64_t n = shard_validate_ids(path, V, max_id, err, sizeof(err));
    if (n < 0) die("%s", err);
    return n;
}

// Opens the parts of a blend spec (every shard validated). A part with less than one sample is
// a one-line error naming it.
static void dataset_open_spec(DataSet* ds, const BlendSpec* spec, int T, int V, int shuffle, uint64_t seed) {
    memset(ds, 0, sizeof(*ds));
    ds->spec = (BlendSpec*)malloc_check(sizeof(BlendSpec));
    memcpy(ds->spec, spec, sizeof(BlendSpec));
    ds->parts = (DataPart*)calloc_check((size_t)spec->n, sizeof(DataPart));
    int64_t total = 0;
    for (int d = 0; d < spec->n; d++) {
        glob_t g;
        if (glob(spec->path[d], 0, NULL, &g) != 0 || g.gl_pathc == 0) {
            if (spec->plain) die("no data shards match '%s': run `make data` (or pass -i/-j)", spec->path[d]);
            die("no data shards match '%s' (dataset %s of the blend)", spec->path[d], spec->name[d]);
        }
        int n0 = ds->nshards;
        ds->nshards += (int)g.gl_pathc;
        ds->paths = (char**)realloc_check(ds->paths, sizeof(char*) * ds->nshards);
        ds->start = (int64_t*)realloc_check(ds->start, sizeof(int64_t) * ds->nshards);
        ds->count = (int64_t*)realloc_check(ds->count, sizeof(int64_t) * ds->nshards);
        DataPart* p = &ds->parts[d];
        p->tok0 = total;
        for (int i = n0; i < ds->nshards; i++) {
            ds->paths[i] = strdup(g.gl_pathv[i - n0]);
            ds->count[i] = shard_check(ds->paths[i], V, &ds->max_id);
            ds->start[i] = total;
            total += ds->count[i];
        }
        globfree(&g);
        p->ntokens = total - p->tok0;
        p->nsamples = p->ntokens > 0 ? (p->ntokens - 1) / T : 0;
        // part 0 keeps the one-stream key; the golden-ratio step keeps the others' keys apart
        p->key = splitmix64(seed ^ 0xDA7A5EEDULL) + (uint64_t)d * 0x9E3779B97F4A7C15ULL;
        if (p->nsamples <= 0 && spec->plain)
            die("data '%s' has %lld tokens: fewer than one sample of %d+1 tokens", spec->path[d], (long long)p->ntokens,
                T);
        if (p->nsamples <= 0)
            die("dataset %s ('%s') of the blend has %lld tokens: fewer than one sample of %d+1 tokens", spec->name[d],
                spec->path[d], (long long)p->ntokens, T);
        ds->nsamples += p->nsamples;
    }
    ds->ntokens = total;
    ds->T = T;
    ds->V = V;
    ds->shuffle = shuffle;
    ds->seed = seed;
    ds->f = NULL;
    ds->f_shard = -1;
    ds->buf = (uint16_t*)malloc_check(sizeof(uint16_t) * (T + 1));
    blend_order_init(&ds->order, spec);
}

// -i / -j: one glob, or a blend written as Megatron's --data-path
static void dataset_open(DataSet* ds, const char* pattern, int T, int V, int shuffle, uint64_t seed) {
    BlendSpec spec;
    char err[1400];
    if (blend_parse_arg(pattern, &spec, err, sizeof(err)) != 0) die("%s", err);
    dataset_open_spec(ds, &spec, T, V, shuffle, seed);
}

static void dataset_close(DataSet* ds) {
    if (ds->f) fclose(ds->f);
    for (int i = 0; i < ds->nshards; i++) free(ds->paths[i]);
    free(ds->paths);
    free(ds->start);
    free(ds->count);
    free(ds->buf);
    free(ds->spec);
    free(ds->parts);
    blend_order_free(&ds->order);
    memset(ds, 0, sizeof(*ds));
}

// Seeded bijection of [0, n): balanced Feistel network over 2*half bits, cycle walking.
static int64_t feistel_permute(int64_t x, int64_t n, uint64_t key) {
    if (n <= 1) return 0;
    int bits = 0;
    while (((int64_t)1 << bits) < n) bits++;
    int half = (bits + 1) / 2;
    uint64_t mask = ((uint64_t)1 << half) - 1;
    uint64_t v = (uint64_t)x;
    do {
        uint64_t left = v >> half, right = v & mask;
        for (int r = 0; r < 4; r++) {
            uint64_t f = splitmix64(key ^ (right * 0x9E3779B97F4A7C15ULL) ^ ((uint64_t)r << 56)) & mask;
            uint64_t nl = right, nr = left ^ f;
            left = nl;
            right = nr;
        }
        v = (left << half) | right;
    } while (v >= (uint64_t)n);
    return (int64_t)v;
}

// run sample number s -> the stream token where its T+1 tokens start
static int64_t dataset_sample_pos(DataSet* ds, int64_t s) {
    int64_t j = s;
    int d = ds->spec->n > 1 ? blend_locate(&ds->order, s, &j) : 0;
    const DataPart* p = &ds->parts[d];
    int64_t epoch = j / p->nsamples;
    int64_t r = j % p->nsamples;
    int64_t idx = ds->shuffle ? feistel_permute(r, p->nsamples, p->key + (uint64_t)epoch) : r;
    return p->tok0 + idx * ds->T;
}

// reads stream tokens [pos, pos+n) into ds->buf, crossing shard boundaries
static void dataset_read_tokens(DataSet* ds, int64_t pos, int n) {
    int got = 0;
    while (got < n) {
        int64_t p = pos + got;
        int sh = 0;
        while (sh + 1 < ds->nshards && ds->start[sh + 1] <= p) sh++;
        if (ds->f_shard != sh) {
            if (ds->f) fclose(ds->f);
            ds->f = fopen_check(ds->paths[sh], "rb");
            ds->f_shard = sh;
        }
        int64_t in_shard = p - ds->start[sh];
        int take = (int)((ds->count[sh] - in_shard) < (n - got) ? (ds->count[sh] - in_shard) : (n - got));
        if (fseek(ds->f, SHARD_HEADER_BYTES + 2 * in_shard, SEEK_SET) != 0) die("cannot seek in %s", ds->paths[sh]);
        fread_check(ds->buf + got, sizeof(uint16_t), take, ds->f, ds->paths[sh]);
        got += take;
    }
}

// the skipped ranges (sorted by at): run sample s is stream sample s + the ranges at or before it
static void dataset_set_skips(DataSet* ds, int n, const int64_t* at, const int64_t* count) {
    ds->nskip = n;
    for (int i = 0; i < n; i++) {
        ds->skip_at[i] = at[i];
        ds->skip_n[i] = count[i];
    }
}

// inputs/targets (T each) of run sample number s
static void dataset_get(DataSet* ds, int64_t s, int* inputs, int* targets) {
    int64_t stream = s;
    for (int i = 0; i < ds->nskip && ds->skip_at[i] <= s; i++) stream += ds->skip_n[i];
    int64_t pos = dataset_sample_pos(ds, stream);
    dataset_read_tokens(ds, pos, ds->T + 1);
    for (int i = 0; i <= ds->T; i++) {
        if (ds->buf[i] >= ds->V) {
            int64_t p = pos + i;
            int sh = 0;
            while (sh + 1 < ds->nshards && ds->start[sh + 1] <= p) sh++;
            die("token id %d at position %lld of shard %s is >= the vocabulary size %d: pass the right -V", ds->buf[i],
                (long long)(p - ds->start[sh]), ds->paths[sh], ds->V);
        }
    }
    for (int i = 0; i < ds->T; i++) {
        inputs[i] = ds->buf[i];
        targets[i] = ds->buf[i + 1];
    }
}

// First run sample of micro-batch i of DP rank d in a global batch of B samples starting
// at run sample c (B divisible by DP*mb, checked at start-up for the whole ramp).
static inline int64_t microbatch_first_sample(int64_t c, int64_t B, int DP, int d, int mb, int i) {
    return c + (int64_t)d * (B / DP) + (int64_t)i * mb;
}

// loads a micro-batch: (mb, T) inputs and targets
static void dataset_load_microbatch(DataSet* ds, int64_t first, int mb, int* inputs, int* targets) {
    for (int b = 0; b < mb; b++) dataset_get(ds, first + b, inputs + (size_t)b * ds->T, targets + (size_t)b * ds->T);
}

// A shard of a that is also one of b's (the same file, however named), or NULL
static const char* dataset_shared_shard(const DataSet* a, const DataSet* b) {
    for (int i = 0; i < a->nshards; i++) {
        struct stat sa;
        if (stat(a->paths[i], &sa) != 0) continue;
        for (int j = 0; j < b->nshards; j++) {
            struct stat sb;
            if (stat(b->paths[j], &sb) == 0 && sa.st_dev == sb.st_dev && sa.st_ino == sb.st_ino) return a->paths[i];
        }
    }
    return NULL;
}

#endif // LLMC_DATALOADER_H
