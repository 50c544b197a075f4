/*
 * blend.h: weighted corpus blends with Megatron-LM's semantics (doc/data.md, "Blends").
 *
 * A blend is a list of datasets, each a shard glob with a weight (and a name). It comes from
 * -i/-j, written as Megatron's --data-path is: "0.3 path/a_*.bin 0.7 path/b_*.bin" (a plain
 * glob is one dataset of weight 1), or from -blend FILE, a JSON file:
 *   {"source": "...", "note": "...",
 *    "train": [{"name": "books3", "weight": 14.3, "path": "data/books3_*.bin",
 *               "tokens": 25700000000, "epochs": 1.5}, ...],
 *    "valid": [{"name": "books3", "weight": 1, "path": "data/books3_val_*.bin"}, ...]}
 * Weights are normalised to sum 1. "tokens" and "epochs" are optional: what a source documents
 * about the dataset, which -check compares with the shards (or uses when they are absent).
 *
 * The order: run sample s comes from the dataset whose achieved count lags its weight most,
 * argmax_d w_d * max(s, 1) - n_d(s) (ties to the first), n_d(s) being the samples dataset d
 * gave to [0, s): Megatron's build_blending_indices rule, in double precision as Megatron
 * computes it (its rounding breaks the exact ties of weights like 0.3 and 0.2 the same way;
 * the product is rounded on its own, so no compiler fuses it into an FMA and both trainers
 * agree to the bit on every machine). Within dataset d, the n_d-th sample is its own epoch-wise shuffled stream
 * (dataloader.h). The order is a pure function of (weights, s): any layout, any resume.
 * Looking up s replays the rule from a memo of the counts every BLEND_STRIDE samples and a
 * cursor, so reading a rank's samples in order costs O(datasets) per sample.
 *
 * API
 *   blend_parse_arg(s, &spec, err, n)        -i / -j text into a spec; 0 or -1 (err)
 *   blend_load_file(path, which, &spec, ...) the "train" or "valid" list of a -blend file;
 *                                            1 read, 0 the file has no such list, -1 (err)
 *   blend_order_init(&o, spec) / _free       the order of a spec
 *   blend_locate(&o, s, &j)                  dataset of run sample s; *j its index within it
 *   blend_counts(&o, s, counts)              n_d(s) for every d
 */
#ifndef LLMC_BLEND_H
#define LLMC_BLEND_H

#include <ctype.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "config.h"
#include "json.h"
#include "safeio.h"
#include "utils.h"

#define BLEND_MAX 64           // datasets in one blend
#define BLEND_NAME 48          // bytes of a dataset's name
#define BLEND_PATH 512         // bytes of a dataset's glob (CFG_PATH_LEN)
#define BLEND_STRIDE 16384     // samples between memoised counts
#define BLEND_ONE 4294967296.0 // the data identity hashes weights at this resolution
#define BLEND_NAME_CHARS "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-."

typedef struct {
    int n;
    int plain; // -i/-j was one glob, not a weighted list (the pre-blend data order)
    char name[BLEND_MAX][BLEND_NAME];
    char path[BLEND_MAX][BLEND_PATH];
    double weight[BLEND_MAX];  // normalised: sum 1
    int64_t tokens[BLEND_MAX]; // documented size in tokens, -1 unknown
    double epochs[BLEND_MAX];  // documented epochs, < 0 unknown
} BlendSpec;

// a name for a dataset given by its glob: the file name up to the first wildcard, without a
// trailing '_' or '.' ("data/books3_train_*.bin" -> "books3_train"), other characters than
// letters, digits, '_', '-' and '.' as '_'; "d<index>" when empty or taken
static void blend_default_name(BlendSpec* b, int d) {
    const char* base = strrchr(b->path[d], '/');
    base = base ? base + 1 : b->path[d];
    size_t len = strcspn(base, "*?[");
    if (len >= BLEND_NAME) len = BLEND_NAME - 1;
    memcpy(b->name[d], base, len);
    b->name[d][len] = '\0';
    char* dot = strstr(b->name[d], ".bin");
    if (dot) *dot = '\0';
    for (size_t k = strlen(b->name[d]); k > 0 && (b->name[d][k - 1] == '_' || b->name[d][k - 1] == '.'); k--)
        b->name[d][k - 1] = '\0';
    for (char* p = b->name[d]; *p; p++) // names go into JSON logs and table rows unquoted
        if (!isalnum((unsigned char)*p) && *p != '_' && *p != '-' && *p != '.') *p = '_';
    int clash = b->name[d][0] == '\0';
    for (int e = 0; e < d; e++) clash = clash || strcmp(b->name[e], b->name[d]) == 0;
    if (clash) snprintf(b->name[d], BLEND_NAME, "d%d", d);
}

// weights > 0 and finite, normalised to sum 1; 0 or -1 (err)
static int blend_normalise(BlendSpec* b, const char* what, char* err, size_t errn) {
    double sum = 0;
    for (int d = 0; d < b->n; d++) {
        if (!(b->weight[d] > 0) || b->weight[d] > 1e300) {
            snprintf(err, errn, "%s: dataset %s has weight %g; weights must be positive numbers", what, b->name[d],
                     b->weight[d]);
            return -1;
        }
        sum += b->weight[d];
    }
    for (int d = 0; d < b->n; d++) b->weight[d] /= sum;
    return 0;
}

// "0.3 a_*.bin 0.7 b_*.bin" (Megatron's --data-path) or one glob. Blanks separate the words; a
// path with a blank in it is written with a backslash before the blank ("data/my\ shard.bin"),
// which glob() reads as that blank (or the path goes in a -blend file, whose paths are strings)
static int blend_parse_arg(const char* s, BlendSpec* b, char* err, size_t errn) {
    memset(b, 0, sizeof(*b));
    char tok[2 * BLEND_MAX + 1][BLEND_PATH];
    int nt = 0;
    for (const char* p = s;;) {
        while (isspace((unsigned char)*p)) p++;
        if (*p == '\0') break;
        size_t len = 0;
        while (p[len] != '\0' && !isspace((unsigned char)p[len])) len += p[len] == '\\' && p[len + 1] != '\0' ? 2 : 1;
        if (nt == 2 * BLEND_MAX + 1 || len >= BLEND_PATH) {
            snprintf(err, errn, "data blend '%s': more than %d datasets or a path over %d bytes", s, BLEND_MAX,
                     BLEND_PATH - 1);
            return -1;
        }
        memcpy(tok[nt], p, len);
        tok[nt++][len] = '\0';
        p += len;
    }
    double w = 0;
    if (nt == 1 || (nt > 0 && !parse_f64(tok[0], &w))) { // one glob: the stream as before blends
        if (nt != 1) {
            snprintf(err, errn,
                     "data '%s': one glob, or weights and globs in turn (\"0.3 a_*.bin 0.7 b_*.bin\"); a path with a "
                     "blank in it takes a backslash before the blank ('data/my\\ shard.bin') or goes in a -blend file",
                     s);
            return -1;
        }
        b->n = 1;
        b->plain = 1;
        snprintf(b->path[0], BLEND_PATH, "%s", tok[0]);
        b->weight[0] = 1;
        b->tokens[0] = -1;
        b->epochs[0] = -1;
        blend_default_name(b, 0);
        return 0;
    }
    if (nt == 0 || nt % 2 != 0) {
        snprintf(err, errn, "data blend '%s': weights and globs in turn (\"0.3 a_*.bin 0.7 b_*.bin\")", s);
        return -1;
    }
    for (int k = 0; k < nt; k += 2) {
        int d = b->n++;
        if (!parse_f64(tok[k], &b->weight[d])) {
            snprintf(err, errn, "data blend '%s': '%s' is not a weight (weights and globs in turn)", s, tok[k]);
            return -1;
        }
        snprintf(b->path[d], BLEND_PATH, "%s", tok[k + 1]);
        b->tokens[d] = -1;
        b->epochs[d] = -1;
        blend_default_name(b, d);
    }
    return blend_normalise(b, "data blend", err, errn);
}

// s for an error line: at most n-1 bytes, a control byte or quote as '?' (a key may hold any text)
static const char* blend_printable(char* out, size_t n, const char* s) {
    size_t k = 0;
    for (; s[k] != '\0' && k + 1 < n; k++) out[k] = (unsigned char)s[k] < 0x20 || s[k] == '"' ? '?' : s[k];
    out[k] = '\0';
    return out;
}

// one dataset object of a -blend file's list (the k-th): every key known and given once,
// named with the dataset in the error
static int blend_file_entry(const JsonNode* e, int k, BlendSpec* b, const char* where, char* err, size_t errn) {
    int d = b->n;
    const JsonNode* name = json_get(e, "name");
    char who[BLEND_NAME + 48]; // the dataset, for errors: its name when it has a usable one
    if (name != NULL && name->type == JSON_STR && name->len == strlen(name->str) && name->len < BLEND_NAME &&
        name->len > 0 && strspn(name->str, BLEND_NAME_CHARS) == name->len)
        snprintf(who, sizeof(who), "dataset %d (\"%s\")", k + 1, name->str);
    else
        snprintf(who, sizeof(who), "dataset %d", k + 1);
    if (e->type != JSON_OBJ) {
        snprintf(err, errn, "%s: %s is not an object with \"name\", \"weight\" and \"path\"", where, who);
        return -1;
    }
    char key[64];
    for (int j = 0; j < e->n; j++) {
        if (strcmp(e->keys[j], "name") && strcmp(e->keys[j], "weight") && strcmp(e->keys[j], "path") &&
            strcmp(e->keys[j], "tokens") && strcmp(e->keys[j], "epochs") && strcmp(e->keys[j], "note")) {
            snprintf(err, errn,
                     "%s: %s has the unknown field \"%s\" (known: name, weight, path, tokens, epochs, note): "
                     "fix its spelling",
                     where, who, blend_printable(key, sizeof(key), e->keys[j]));
            return -1;
        }
    }
    const char* dup = json_dup_key(e);
    if (dup != NULL) {
        snprintf(err, errn, "%s: %s gives the field \"%s\" twice: keep one", where, who,
                 blend_printable(key, sizeof(key), dup));
        return -1;
    }
    const JsonNode* weight = json_get(e, "weight");
    const JsonNode* path = json_get(e, "path");
    const JsonNode* tokens = json_get(e, "tokens");
    const JsonNode* epochs = json_get(e, "epochs");
    if (name == NULL || name->type != JSON_STR || weight == NULL || weight->type != JSON_NUM || path == NULL ||
        path->type != JSON_STR) {
        snprintf(err, errn, "%s: %s needs \"name\" (string), \"weight\" (number) and \"path\" (a shard glob)", where,
                 who);
        return -1;
    }
    if (name->len != strlen(name->str) || path->len != strlen(path->str)) {
        snprintf(err, errn, "%s: %s has a NUL character (\\u0000) in its name or path", where, who);
        return -1;
    }
    size_t nl = strlen(name->str);
    if (nl == 0 || nl >= BLEND_NAME || strlen(path->str) == 0 || strlen(path->str) >= BLEND_PATH ||
        strspn(name->str, BLEND_NAME_CHARS) != nl) {
        snprintf(err, errn, "%s: a dataset name is 1-%d letters, digits, '_', '-' or '.', and a path 1-%d bytes", where,
                 BLEND_NAME - 1, BLEND_PATH - 1);
        return -1;
    }
    for (int k = 0; k < d; k++)
        if (strcmp(b->name[k], name->str) == 0) {
            snprintf(err, errn, "%s: the name %s is given twice", where, name->str);
            return -1;
        }
    int tok_ok = tokens == NULL || tokens->type == JSON_NULL ||
                 (tokens->type == JSON_NUM && tokens->num >= 1 && tokens->num < 9e18 &&
                  tokens->num == (double)(int64_t)tokens->num);
    int ep_ok = epochs == NULL || epochs->type == JSON_NULL ||
                (epochs->type == JSON_NUM && epochs->num > 0 && epochs->num < 1e9);
    if (!tok_ok || !ep_ok) {
        snprintf(err, errn,
                 "%s: dataset %s: \"tokens\" is a whole number of tokens, \"epochs\" a positive number (or "
                 "null when unknown)",
                 where, name->str);
        return -1;
    }
    snprintf(b->name[d], BLEND_NAME, "%s", name->str);
    snprintf(b->path[d], BLEND_PATH, "%s", path->str);
    b->weight[d] = weight->num;
    b->tokens[d] = tokens && tokens->type == JSON_NUM ? (int64_t)tokens->num : -1;
    b->epochs[d] = epochs && epochs->type == JSON_NUM ? epochs->num : -1;
    b->n++;
    return 0;
}

// the list `which` ("train" or "valid") of a -blend file's text (n bytes, named path in errors):
// 1 read, 0 the file has none, -1 (err). Pure: the fuzzer calls it on arbitrary bytes.
static int blend_parse_text(const char* text, size_t n, const char* path, const char* which, BlendSpec* b, char* err,
                            size_t errn) {
    memset(b, 0, sizeof(*b));
    JsonDoc doc;
    char jerr[256];
    if (json_parse_opts(text, n, &doc, JSON_DUPS, jerr, sizeof(jerr)) != 0) { // blend_file_entry names duplicates
        snprintf(err, errn, "-blend file %s is not valid JSON (%s)", path, jerr);
        return -1;
    }
    char where[BLEND_PATH + 32];
    snprintf(where, sizeof(where), "-blend file %s, \"%s\"", path, which);
    const JsonNode* list = json_get(&doc.root, which);
    int rc = 0;
    const char* dup = json_dup_key(&doc.root);
    const char* unknown = NULL;
    for (int k = 0; doc.root.type == JSON_OBJ && k < doc.root.n && unknown == NULL; k++)
        if (strcmp(doc.root.keys[k], "train") && strcmp(doc.root.keys[k], "valid") &&
            strcmp(doc.root.keys[k], "source") && strcmp(doc.root.keys[k], "note"))
            unknown = doc.root.keys[k];
    if (doc.root.type != JSON_OBJ) {
        snprintf(err, errn, "-blend file %s must be a JSON object with a \"train\" list", path);
        rc = -1;
    } else if (unknown != NULL) { // a typo ("vaild") would fall back to -j or the default validation data
        char key[64];
        snprintf(err, errn,
                 "-blend file %s has the unknown key \"%s\" (known: train, valid, source, note): fix its spelling",
                 path, blend_printable(key, sizeof(key), unknown));
        rc = -1;
    } else if (dup != NULL) {
        char key[64];
        snprintf(err, errn, "-blend file %s gives the key \"%s\" twice: keep one", path,
                 blend_printable(key, sizeof(key), dup));
        rc = -1;
    } else if (list == NULL || list->type == JSON_NULL) {
        rc = 0;
    } else if (list->type != JSON_ARR || list->n == 0 || list->n > BLEND_MAX) {
        snprintf(err, errn, "%s must be a list of 1 to %d datasets", where, BLEND_MAX);
        rc = -1;
    } else {
        for (int k = 0; k < list->n && rc == 0; k++) rc = blend_file_entry(&list->kids[k], k, b, where, err, errn);
        rc = rc == 0 && blend_normalise(b, where, err, errn) == 0 ? 1 : -1;
    }
    json_free(&doc);
    return rc;
}

// the list `which` ("train" or "valid") of a -blend file: 1 read, 0 the file has none, -1 (err)
static int blend_load_file(const char* path, const char* which, BlendSpec* b, char* err, size_t errn) {
    memset(b, 0, sizeof(*b));
    size_t n = 0;
    char* text = safeio_read_all(path, "-blend file", (size_t)16 << 20, &n, err, errn);
    if (text == NULL) return -1;
    int rc = blend_parse_text(text, n, path, which, b, err, errn);
    free(text);
    return rc;
}

typedef struct {
    int n;
    double w[BLEND_MAX]; // normalised weights
    int64_t* memo;       // (nmemo, n): n_d(m * BLEND_STRIDE)
    int64_t nmemo, capmemo;
    int64_t cur_s; // the cursor: n_d(cur_s) in cur
    int64_t cur[BLEND_MAX];
} BlendOrder;

static void blend_order_init(BlendOrder* o, const BlendSpec* b) {
    memset(o, 0, sizeof(*o));
    o->n = b->n;
    for (int d = 0; d < b->n; d++) o->w[d] = b->weight[d];
    o->capmemo = 64;
    o->memo = (int64_t*)malloc_check(sizeof(int64_t) * (size_t)o->capmemo * (size_t)o->n);
    memset(o->memo, 0, sizeof(int64_t) * (size_t)o->n); // n_d(0) = 0
    o->nmemo = 1;
}

static void blend_order_free(BlendOrder* o) {
    free(o->memo);
    memset(o, 0, sizeof(*o));
}

// the dataset sample s comes from, given the counts n_d(s)
static int blend_pick(const BlendOrder* o, int64_t s, const int64_t* counts) {
    double best = 0;
    int arg = 0;
    double x = s > 1 ? (double)s : 1.0;
    for (int d = 0; d < o->n; d++) {
        volatile double wx = o->w[d] * x; // rounded on its own: never fused into an FMA with the subtraction
        double e = wx - (double)counts[d];
        if (d == 0 || e > best) {
            best = e;
            arg = d;
        }
    }
    return arg;
}

// moves the cursor to n_d(s): from itself when s is just ahead, else from the memo
static void blend_seek(BlendOrder* o, int64_t s) {
    if (s < o->cur_s || s - o->cur_s > BLEND_STRIDE) {
        int64_t m = s / BLEND_STRIDE;
        while (o->nmemo <= m) { // extend the memo by one stride from its last entry
            int64_t c[BLEND_MAX];
            memcpy(c, o->memo + (size_t)(o->nmemo - 1) * o->n, sizeof(int64_t) * o->n);
            for (int64_t t = (o->nmemo - 1) * BLEND_STRIDE; t < o->nmemo * BLEND_STRIDE; t++) c[blend_pick(o, t, c)]++;
            if (o->nmemo == o->capmemo) {
                o->capmemo *= 2;
                o->memo = (int64_t*)realloc_check(o->memo, sizeof(int64_t) * (size_t)o->capmemo * (size_t)o->n);
            }
            memcpy(o->memo + (size_t)o->nmemo * o->n, c, sizeof(int64_t) * o->n);
            o->nmemo++;
        }
        memcpy(o->cur, o->memo + (size_t)m * o->n, sizeof(int64_t) * o->n);
        o->cur_s = m * BLEND_STRIDE;
    }
    for (; o->cur_s < s; o->cur_s++) o->cur[blend_pick(o, o->cur_s, o->cur)]++;
}

// run sample s: its dataset, and in *j its index in that dataset's own stream
static int blend_locate(BlendOrder* o, int64_t s, int64_t* j) {
    blend_seek(o, s);
    int d = blend_pick(o, s, o->cur);
    *j = o->cur[d];
    return d;
}

// n_d(s): how many of the first s run samples each dataset gave
static void blend_counts(BlendOrder* o, int64_t s, int64_t* counts) {
    blend_seek(o, s);
    memcpy(counts, o->cur, sizeof(int64_t) * o->n);
}

#endif // LLMC_BLEND_H
