/*
 * runrecord.h: the run directory remembers its run. With -o, rank 0 writes DIR/config.json:
 * the command line that defines the run (without the flags that only steer one start:
 * -o, -resume, -overwrite, -init-from, -check, -world), every flag's resolved value, and the
 * layout. log.jsonl's first record carries the same. `train_gpt -o DIR -resume` parses the
 * recorded command line first and its own on top, so it needs no other flag: a flag given
 * again overrides the record (and is recorded for the next resume), and the resume's identity
 * checks apply as always (model shape and data order refused, recipe changes logged).
 *
 * API
 *   runrecord_argv(rec, n, argc, argv)          append argv[1..] (start-only flags left out) to
 *                                               the JSON array body rec; -1 when over n bytes
 *   runrecord_load_argv(dir, &argc, &argv, err) the recorded command line of DIR/config.json:
 *                                               1 read, 0 no record, -1 unreadable (err)
 *   runrecord_json(f, c, comm)                  the record's fields, without the braces
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

static void runrecord_json(FILE* f, const Config* c, const Comm* comm) {
    fprintf(f, "\"argv\":[%s],\"layout\":{\"tp\":%d,\"pp\":%d,\"dp\":%d,\"world\":%d},", c->argv_record, comm->TP,
            comm->PP, comm->DP, comm->world);
    fprintf(f, "\"flags\":{\"-model\":\"%s\",\"-recompute\":%d,\"-ramp\":[%lld,%lld,%lld],\"-ramp-auto\":%d,", c->model,
            c->recompute, (long long)c->ramp_start, (long long)c->ramp_inc, (long long)c->ramp_tokens, c->ramp_auto);
    fprintf(f, "\"-lr\":%.17g,\"-lr-auto\":%d,\"-steps\":%lld,\"-seed\":%llu", c->lr, c->lr_auto,
            (long long)c->max_steps, (unsigned long long)c->seed);
    char s[CFG_PATH_LEN * 6 + 8]; // a value escaped: a control byte (-prompt-text's newlines) takes 6
#define RUNRECORD_INT(v) fprintf(f, "%d", (int)(v))
#define RUNRECORD_BOOL(v) fprintf(f, "%d", (int)(v))
#define RUNRECORD_I64(v) fprintf(f, "%lld", (long long)(v))
#define RUNRECORD_F64(v) fprintf(f, "%.17g", (double)(v))
#define RUNRECORD_WORD(v)                             \
    do {                                              \
        size_t k_ = 0;                                \
        s[0] = '\0';                                  \
        runrecord_put_string(s, sizeof(s), &k_, (v)); \
        fputs(s, f);                                  \
    } while (0)
#define RUNRECORD_PATH(v) RUNRECORD_WORD(v)
#define RUNRECORD_FLAG(KIND, flag, field, def, group, what) \
    fprintf(f, ",\"%s\":", flag);                           \
    RUNRECORD_##KIND(c->field);
    CONFIG_FLAGS(RUNRECORD_FLAG)
#undef RUNRECORD_FLAG
#undef RUNRECORD_PATH
#undef RUNRECORD_WORD
#undef RUNRECORD_F64
#undef RUNRECORD_I64
#undef RUNRECORD_BOOL
#undef RUNRECORD_INT
    fputs("}", f);
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
