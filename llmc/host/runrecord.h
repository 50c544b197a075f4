/*
 * runrecord.h: the run directory remembers its run. With -o, rank 0 writes DIR/config.json:
 * the command line that defines the run (without the flags that only steer one start:
 * -o, -resume, -overwrite, -init-from, -check, -world), every flag's resolved value, and the
 * layout. log.jsonl's first record carries the same. `train_gpt -o DIR -resume` parses the
 * recorded command line first and its own on top, so it needs no other flag: a flag given
 * again overrides the record (reported, and recorded for the next resume), and the resume's identity
 * checks apply as always (model shape and data order refused, recipe changes logged).
 *
 * API
 *   runrecord_argv(rec, n, argc, argv)          append argv[1..] (start-only flags left out) to
 *                                               the JSON array body rec; -1 when over n bytes
 *   runrecord_load_argv(dir, &argc, &argv, err) the recorded command line of DIR/config.json:
 *                                               1 read, 0 no record, -1 unreadable (err)
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
#include "safeio.h"

// the flags of one start, never replayed: name and how many values follow it
static int runrecord_start_only(const char* f) {
    if (strcmp(f, "-resume") == 0 || strcmp(f, "-check") == 0) return 0;
    if (strcmp(f, "-o") == 0 || strcmp(f, "-overwrite") == 0 || strcmp(f, "-init-from") == 0 ||
        strcmp(f, "-world") == 0)
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

static int runrecord_argv(char* rec, size_t n, int argc, char** argv) {
    size_t k = strlen(rec);
    for (int i = 1; i < argc; i++) {
        int skip = runrecord_start_only(argv[i]);
        if (skip >= 0) {
            i += skip;
            continue;
        }
        if (k > 0) {
            if (k + 2 >= n) return -1;
            rec[k++] = ',';
            rec[k] = '\0';
        }
        if (runrecord_put_string(rec, n, &k, argv[i]) != 0) return -1;
    }
    return 0;
}

// One JSON string at *p (just past its opening quote) into a new string; NULL if malformed
static char* runrecord_get_string(const char** p) {
    size_t cap = strlen(*p) + 1;
    char* s = (char*)malloc_check(cap);
    size_t k = 0;
    const char* q = *p;
    while (*q && *q != '"') {
        char ch = *q++;
        if (ch == '\\') {
            char e = *q++;
            if (e == '"' || e == '\\' || e == '/')
                ch = e;
            else if (e == 'u' && q[0] == '0' && q[1] == '0' && isxdigit((unsigned char)q[2]) &&
                     isxdigit((unsigned char)q[3])) {
                char hex[3] = {q[2], q[3], '\0'};
                ch = (char)strtol(hex, NULL, 16);
                q += 4;
            } else {
                free(s);
                return NULL;
            }
        }
        s[k++] = ch;
    }
    if (*q != '"') {
        free(s);
        return NULL;
    }
    s[k] = '\0';
    *p = q + 1;
    return s;
}

static void runrecord_free_argv(int argc, char** argv) {
    for (int i = 1; i < argc; i++) free(argv[i]);
    free(argv);
}

static int runrecord_load_argv(const char* dir, int* argc_out, char*** argv_out, char* err, size_t errn) {
    char path[CFG_PATH_LEN + 32];
    snprintf(path, sizeof(path), "%s/config.json", dir);
    if (access(path, F_OK) != 0) return 0;
    FILE* f = safeio_open_read(path, "run record", err, errn);
    if (f == NULL) return -1;
    char* text = NULL;
    size_t len = 0;
    size_t cap = 0;
    char chunk[4096];
    size_t got;
    while ((got = fread(chunk, 1, sizeof(chunk), f)) > 0 && len < (1u << 20)) {
        if (len + got + 1 > cap) {
            cap = 2 * (len + got + 1);
            text = (char*)realloc(text, cap);
            if (text == NULL) die("out of memory reading %s", path);
        }
        memcpy(text + len, chunk, got);
        len += got;
    }
    fclose(f);
    const char* p = text ? strstr(text, "\"argv\":") : NULL;
    p = p ? strchr(p, '[') : NULL;
    int n = 1;
    char** av = (char**)malloc_check(sizeof(char*) * (len / 2 + 2));
    av[0] = (char*)"train_gpt";
    int ok = p != NULL;
    if (ok) p++;
    while (ok) {
        while (*p == ' ' || *p == ',' || *p == '\n') p++;
        if (*p == ']') break;
        if (*p != '"') {
            ok = 0;
            break;
        }
        p++;
        char* s = runrecord_get_string(&p);
        if (s == NULL) {
            ok = 0;
            break;
        }
        av[n++] = s;
    }
    free(text);
    if (!ok) {
        runrecord_free_argv(n, av);
        snprintf(err, errn, "run record %s is damaged (no readable \"argv\" list): give every flag again", path);
        return -1;
    }
    *argc_out = n;
    *argv_out = av;
    return 1;
}

// one flag's value as JSON into s (n bytes), by the flag table's kind
static void runrecord_value_INT(char* s, size_t n, int v) { snprintf(s, n, "%d", v); }
static void runrecord_value_BOOL(char* s, size_t n, int v) { snprintf(s, n, "%d", v); }
static void runrecord_value_I64(char* s, size_t n, int64_t v) { snprintf(s, n, "%lld", (long long)v); }
static void runrecord_value_F64(char* s, size_t n, double v) { snprintf(s, n, "%.17g", v); }
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
        if (strcmp(a, b) != 0 && ++n) fprintf(out, "resume: %s %s replaces the recorded %s\n", name, b, a);
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
