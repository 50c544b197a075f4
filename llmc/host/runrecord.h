/*
 * runrecord.h: the run directory remembers its run. With -o, rank 0 writes DIR/config.json:
 * the flags that define the run (each flag once, as last given; without the flags that only steer
 * one start: -o, -resume, -overwrite, -init-from, -check, -world, -steps, -allow-data-change,
 * -dump-logits), every flag's resolved value, the layout, and the data ranges -on-spike rewind
 * passed over ("rewound"). log.jsonl's first record carries the same. `train_gpt -o DIR -resume`
 * parses the recorded flags first and its own on top, so it needs no other flag: a flag given
 * again overrides the record (reported, and recorded in its place for the next resume, so the
 * record never grows with restarts), and the resume's identity checks apply as always (model shape
 * and data order refused, recipe changes logged). The record is read as strict JSON (json.h): a
 * damaged one is refused, never half-read.
 *
 * API
 *   runrecord_merge(rec, n, ac, av, bc, bv, extra, user)  the flags of av with bv's on top (a flag
 *                                               of bv replaces av's), as the JSON array body rec;
 *                                               -1 when over n bytes
 *   runrecord_tokens(body, &argc, &argv)        a JSON array body back into an argv (argv[0] a name)
 *   runrecord_load(dir, &argc, &argv, rew, rn, err, errn)  DIR/config.json's flags and rewound
 *                                               ranges: 1 read, 0 no record, -1 damaged (err)
 *   runrecord_parse(text, n, &argc, &argv, rew, rn, err, errn)  the same from a record's text
 *   runrecord_json(f, c, comm)                  the record's fields, without the braces
 *   runrecord_report_changes(out, rec, now)     a resume's flags that differ from the record's
 *   runrecord_write(dir, c, comm, err)          DIR/config.json, atomically
 */
#ifndef LLMC_RUNRECORD_H
#define LLMC_RUNRECORD_H

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "comm.h"
#include "config.h"
#include "json.h"
#include "safeio.h"

#define RUNRECORD_MAX_BYTES ((size_t)1 << 20) // a record is a few KiB; a larger file is not one

// the flags of one start, never recorded: how many values follow the flag, or -1 for another flag.
// -steps ends this start only: a run stopped by it is not complete, and -o DIR -resume goes on.
static int runrecord_start_only(const char* f) {
    if (strcmp(f, "-resume") == 0 || strcmp(f, "-check") == 0 || strcmp(f, "-h") == 0 || strcmp(f, "--help") == 0 ||
        strcmp(f, "-plan") == 0)
        return 0;
    if (strcmp(f, "-o") == 0 || strcmp(f, "-overwrite") == 0 || strcmp(f, "-init-from") == 0 ||
        strcmp(f, "-world") == 0 || strcmp(f, "-steps") == 0 || strcmp(f, "-allow-data-change") == 0 ||
        strcmp(f, "-dump-logits") == 0)
        return 1;
    return -1;
}

// s as a JSON string into out at *k (n bytes in all); -1 when it does not fit
static int runrecord_put_string(char* out, size_t n, size_t* k, const char* s) {
    char buf[8];
    if (*k + 1 >= n) return -1;
    out[(*k)++] = '"';
    for (const unsigned char* p = (const unsigned char*)s; *p; p++) {
        const char* piece = buf;
        if (*p == '"')
            piece = "\\\"";
        else if (*p == '\\')
            piece = "\\\\";
        else if (*p < 0x20)
            snprintf(buf, sizeof(buf), "\\u%04x", *p);
        else {
            buf[0] = (char)*p;
            buf[1] = '\0';
        }
        size_t len = strlen(piece);
        if (*k + len + 1 >= n) return -1;
        memcpy(out + *k, piece, len);
        *k += len;
    }
    if (*k + 1 >= n) return -1;
    out[(*k)++] = '"';
    out[*k] = '\0';
    return 0;
}

// The words the flag at argv[i] takes, itself included (a table flag 2, -ramp 2 or 4, -resume 1),
// as config_parse reads them (into scratch, whose values are dropped); planner flags through extra
// (user: a scratch copy of its state)
static int runrecord_span(int argc, char** argv, int i, ExtraFlagFn extra, void* user, Config* scratch) {
#define RUNRECORD_SPAN(KIND, flag, field, def, group, what) \
    if (strcmp(argv[i], flag) == 0) return i + 1 < argc ? 2 : 1;
    CONFIG_FLAGS(RUNRECORD_SPAN)
#undef RUNRECORD_SPAN
    char err[CFG_ERR_LEN];
    int j = i;
    if (config_parse_special(scratch, argc, argv, &j, err) > 0) return j - i + 1;
    j = i;
    if (extra != NULL && extra(user, argc, argv, &j, err) == 1) return j - i + 1;
    return 1;
}

// 1 when the flag at argv[i] is among the flags of bv (a later command line that replaces it)
static int runrecord_given(const char* f, int bc, char** bv, ExtraFlagFn extra, void* user, Config* scratch) {
    for (int k = 1; k < bc; k += runrecord_span(bc, bv, k, extra, user, scratch))
        if (strcmp(bv[k], f) == 0) return 1;
    return 0;
}

// appends the flag group av[i..i+span) to the JSON array body rec (k bytes so far); -1 when full
static int runrecord_put_group(char* rec, size_t n, size_t* k, char** av, int i, int span) {
    for (int w = i; w < i + span; w++) {
        if (*k > 0) {
            if (*k + 2 >= n) return -1;
            rec[(*k)++] = ',';
            rec[*k] = '\0';
        }
        if (runrecord_put_string(rec, n, k, av[w]) != 0) return -1;
    }
    return 0;
}

static int runrecord_merge(char* rec, size_t n, int ac, char** av, int bc, char** bv, ExtraFlagFn extra, void* user) {
    size_t k = 0;
    int rc = 0;
    memset(rec, 0, n); // whole: the Config that holds it is compared byte for byte across ranks
    Config* scratch = (Config*)malloc_check(sizeof(Config)); // 15 KB: not on the stack
    config_defaults(scratch);
    for (int pass = 0; pass < 2 && rc == 0; pass++) {
        int c = pass ? bc : ac;
        char** v = pass ? bv : av;
        for (int i = 1, span; i < c && rc == 0; i += span) {
            span = runrecord_span(c, v, i, extra, user, scratch);
            if (runrecord_start_only(v[i]) >= 0) continue;
            if (pass == 0 && runrecord_given(v[i], bc, bv, extra, user, scratch)) continue;
            rc = runrecord_put_group(rec, n, &k, v, i, span);
        }
    }
    free(scratch);
    return rc;
}

static void runrecord_free_argv(int argc, char** argv) {
    for (int i = 1; i < argc; i++) free(argv[i]);
    free(argv);
}

// the strings of a JSON array node as an argv (argv[0] = "train_gpt"); -1 when one is not a
// string or holds a NUL character
static int runrecord_argv_of(const JsonNode* arr, int* argc, char*** argv) {
    char** av = (char**)malloc_check(sizeof(char*) * ((size_t)arr->n + 2));
    av[0] = (char*)"train_gpt";
    int n = 1;
    int ok = 1;
    for (int k = 0; k < arr->n && ok; k++) {
        const JsonNode* e = &arr->kids[k];
        ok = e->type == JSON_STR && e->len == strlen(e->str);
        if (ok) {
            av[n] = (char*)malloc_check(e->len + 1);
            memcpy(av[n++], e->str, e->len + 1);
        }
    }
    av[n] = NULL;
    if (!ok) {
        runrecord_free_argv(n, av);
        return -1;
    }
    *argc = n;
    *argv = av;
    return 0;
}

static int runrecord_tokens(const char* body, int* argc, char*** argv) {
    size_t n = strlen(body);
    char* text = (char*)malloc_check(n + 3);
    text[0] = '[';
    memcpy(text + 1, body, n);
    text[n + 1] = ']';
    text[n + 2] = '\0';
    JsonDoc doc;
    char err[256];
    int rc = json_parse(text, n + 2, &doc, err, sizeof(err)) == 0 ? runrecord_argv_of(&doc.root, argc, argv) : -1;
    json_free(&doc);
    free(text);
    return rc;
}

// A record's text (n bytes, named path in errors): its flags as an argv and its rewound ranges.
// 1, or -1 (err: what is wrong, without the file's name). Pure: the fuzzer calls it on any bytes.
static int runrecord_parse(const char* text, size_t n, int* argc_out, char*** argv_out, char* rewound, size_t rn,
                           char* err, size_t errn) {
    JsonDoc doc;
    rewound[0] = '\0';
    int bad = json_parse(text, n, &doc, err, errn) != 0;
    const JsonNode* r = &doc.root;
    const JsonNode* av = bad ? NULL : json_get(r, "argv");
    const JsonNode* rw = bad ? NULL : json_get(r, "rewound");
    if (!bad && r->type != JSON_OBJ) snprintf(err, errn, "not a JSON object");
    bad = bad || r->type != JSON_OBJ;
    for (int k = 0; !bad && k < r->n; k++) { // the fields runrecord_json writes, and no other
        const char* key = r->keys[k];
        bad = strcmp(key, "argv") && strcmp(key, "layout") && strcmp(key, "layout_auto") && strcmp(key, "rewound") &&
              strcmp(key, "flags");
        if (bad) snprintf(err, errn, "an unknown field \"%.40s\"", key);
    }
    if (!bad && (av == NULL || av->type != JSON_ARR || runrecord_argv_of(av, argc_out, argv_out) != 0)) {
        snprintf(err, errn, "no \"argv\" list of strings");
        bad = 1;
    }
    if (!bad && rw != NULL) {
        int64_t at[CFG_MAX_SKIPS], cnt[CFG_MAX_SKIPS];
        char why[CFG_ERR_LEN];
        if (rw->type != JSON_STR || rw->len != strlen(rw->str) || rw->len >= rn ||
            config_skip_ranges(rw->str, at, cnt, why) < 0) {
            snprintf(err, errn, "its \"rewound\" is not a list of data ranges AT:N");
            runrecord_free_argv(*argc_out, *argv_out);
            bad = 1;
        } else {
            snprintf(rewound, rn, "%s", rw->str);
        }
    }
    json_free(&doc);
    return bad ? -1 : 1;
}

static int runrecord_load(const char* dir, int* argc_out, char*** argv_out, char* rewound, size_t rn, char* err,
                          size_t errn) {
    char path[CFG_PATH_LEN + 32];
    snprintf(path, sizeof(path), "%s/config.json", dir);
    rewound[0] = '\0';
    if (access(path, F_OK) != 0) return 0;
    char e[600];
    size_t n = 0;
    char* text = safeio_read_all(path, "run record", RUNRECORD_MAX_BYTES, &n, e, sizeof(e));
    if (text == NULL) {
        snprintf(err, errn, "%s: restore it, or delete it and resume with every flag given", e);
        return -1;
    }
    int rc = runrecord_parse(text, n, argc_out, argv_out, rewound, rn, e, sizeof(e));
    free(text);
    if (rc < 0)
        snprintf(err, errn,
                 "run record %s is damaged (%s): restore it, or delete it and resume with every flag given (-o %s "
                 "-resume FLAGS)",
                 path, e, dir);
    return rc;
}

// one flag's value as JSON into s (n bytes), by the flag table's kind
static void runrecord_value_INT(char* s, size_t n, int v) { snprintf(s, n, "%d", v); }
static void runrecord_value_BOOL(char* s, size_t n, int v) { snprintf(s, n, "%d", v); }
static void runrecord_value_I64(char* s, size_t n, int64_t v) { snprintf(s, n, "%lld", (long long)v); }
// the shortest %g form that reads back as v (0.0003, not 0.00029999999999999997)
static void runrecord_value_F64(char* s, size_t n, double v) {
    for (int digits = 15; digits <= 17; digits++) {
        snprintf(s, n, "%.*g", digits, v);
        if (strtod(s, NULL) == v) return;
    }
}
static void runrecord_value_WORD(char* s, size_t n, const char* v) {
    size_t k = 0;
    s[0] = '\0';
    runrecord_put_string(s, n, &k, v);
}
static void runrecord_value_PATH(char* s, size_t n, const char* v) { runrecord_value_WORD(s, n, v); }

// the flags outside the table (their parsing has more than one form): name and value as JSON
#define RUNRECORD_SPECIAL 9
static const char* runrecord_special(const Config* c, int i, char* s, size_t n) {
    static const char* names[RUNRECORD_SPECIAL] = {"-model",   "-recompute", "-ramp", "-ramp-auto", "-lr",
                                                   "-lr-auto", "-steps",     "-seed", "-on-spike"};
    if (i == 0) runrecord_value_WORD(s, n, c->model);
    if (i == 1) runrecord_value_INT(s, n, c->recompute);
    if (i == 2)
        snprintf(s, n, "[%lld,%lld,%lld]", (long long)c->ramp_start, (long long)c->ramp_inc, (long long)c->ramp_tokens);
    if (i == 3) runrecord_value_BOOL(s, n, c->ramp_auto);
    if (i == 4) runrecord_value_F64(s, n, c->lr);
    if (i == 5) runrecord_value_BOOL(s, n, c->lr_auto);
    if (i == 6) runrecord_value_I64(s, n, c->max_steps);
    if (i == 7) snprintf(s, n, "%llu", (unsigned long long)c->seed);
    if (i == 8) runrecord_value_I64(s, n, c->rewind_batches); // 0: skip
    return names[i];
}

static void runrecord_json(FILE* f, const Config* c, const Comm* comm) {
    char s[CFG_PATH_LEN * 6 + 64]; // a value escaped: a control byte (-prompt-text's newlines) takes 6
    fprintf(f, "\"argv\":[%s],\"layout\":{\"tp\":%d,\"pp\":%d,\"dp\":%d,\"world\":%d},", c->argv_record, comm->TP,
            comm->PP, comm->DP, comm->world);
    if (c->layout_choice[0] != '\0') fprintf(f, "\"layout_auto\":\"%s\",", c->layout_choice); // flags: no quotes
    if (c->rewound[0] != '\0') fprintf(f, "\"rewound\":\"%s\",", c->rewound);                 // digits, ':' and ','
    fputs("\"flags\":{", f);
    for (int i = 0; i < RUNRECORD_SPECIAL; i++) {
        const char* name = runrecord_special(c, i, s, sizeof(s));
        fprintf(f, "%s\"%s\":%s", i ? "," : "", name, s);
    }
#define RUNRECORD_FLAG(KIND, flag, field, def, group, what) \
    runrecord_value_##KIND(s, sizeof(s), c->field);         \
    fprintf(f, ",\"%s\":%s", flag, s);
    CONFIG_FLAGS(RUNRECORD_FLAG)
#undef RUNRECORD_FLAG
    fputs("}", f);
}

// On a resume, each flag whose value this command line changes from the record's, one line each
// to out ("resume: -lr 0.001 replaces the recorded 0.0006"); returns how many. Whether a change
// may be made is the checkpoint's to decide (model shape and data order refused, recipe logged).
static int runrecord_report_changes(FILE* out, const Config* rec, const Config* now) {
    char a[CFG_PATH_LEN * 6 + 64], b[CFG_PATH_LEN * 6 + 64];
    int n = 0;
    for (int i = 0; i < RUNRECORD_SPECIAL; i++) {
        const char* name = runrecord_special(rec, i, a, sizeof(a));
        runrecord_special(now, i, b, sizeof(b));
        if (runrecord_start_only(name) < 0 && strcmp(a, b) != 0 && ++n)
            fprintf(out, "resume: %s %s replaces the recorded %s\n", name, b, a);
    }
#define RUNRECORD_DIFF(KIND, flag, field, def, group, what)         \
    runrecord_value_##KIND(a, sizeof(a), rec->field);               \
    runrecord_value_##KIND(b, sizeof(b), now->field);               \
    if (runrecord_start_only(flag) < 0 && strcmp(a, b) != 0 && ++n) \
        fprintf(out, "resume: %s %s replaces the recorded %s\n", flag, b, a);
    CONFIG_FLAGS(RUNRECORD_DIFF)
#undef RUNRECORD_DIFF
    return n;
}

static int runrecord_write(const char* dir, const Config* c, const Comm* comm, char* err, size_t errn) {
    char path[CFG_PATH_LEN + 32], tmp[CFG_PATH_LEN + 40];
    snprintf(path, sizeof(path), "%s/config.json", dir);
    snprintf(tmp, sizeof(tmp), "%s.tmp", path);
    FILE* f = safeio_open_write(tmp, 0, "run record", err, errn);
    if (f == NULL) return -1;
    fputs("{", f);
    runrecord_json(f, c, comm);
    fputs("}\n", f);
    if (safeio_close_write(f, tmp, "run record", err, errn) != 0) return -1;
    if (rename(tmp, path) != 0) {
        snprintf(err, errn, "cannot rename %s to %s: %s", tmp, path, strerror(errno));
        return -1;
    }
    return 0;
}

#endif // LLMC_RUNRECORD_H
