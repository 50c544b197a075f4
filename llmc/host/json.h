/*
 * json.h: a small strict JSON reader for the project's own input files (the -blend file, the
 * run record DIR/config.json). RFC 8259 without extensions: no comments, no trailing commas, no
 * NaN, no byte-order mark, nothing after the value, no key twice in one object; strings may
 * hold any escape (\uXXXX with surrogate pairs becomes UTF-8, a lone surrogate is an error; a
 * string's len counts a \u0000 inside it, which its reader may refuse); nesting is limited to
 * JSON_MAX_DEPTH, so a hostile file cannot exhaust the stack. Errors name the line and column.
 * Header-only C (valid C++ for nvcc), no global state, no exit().
 *
 * API
 *   json_parse(text, n, &doc, err, errn)  0, or -1 with one line in err; doc.root is the value
 *   json_parse_opts(..., JSON_DUPS, ...)  the same, keeping duplicate keys (for a reader that
 *                                         names the key and its context itself: blend.h)
 *   json_get(obj, key)                    an object's member (the first of that name), or NULL
 *   json_dup_key(obj)                     a key that obj holds twice, or NULL
 *   json_free(&doc)                       frees every node (safe on a failed or zeroed doc)
 */
#ifndef LLMC_JSON_H
#define LLMC_JSON_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define JSON_MAX_DEPTH 64
#define JSON_DUPS 1 // json_parse_opts: keep an object's duplicate keys instead of refusing them

typedef enum { JSON_NULL, JSON_BOOL, JSON_NUM, JSON_STR, JSON_ARR, JSON_OBJ } JsonType;

typedef struct JsonNode {
    JsonType type;
    double num;            // JSON_NUM; JSON_BOOL: 0 or 1
    char* str;             // JSON_STR: the text (UTF-8, NUL-terminated; may hold NUL bytes before it)
    size_t len;            // JSON_STR: its bytes before the terminator (> strlen(str) when it holds a NUL)
    int n;                 // JSON_ARR, JSON_OBJ: members
    struct JsonNode* kids; // (n) values
    char** keys;           // JSON_OBJ: (n) member names
} JsonNode;

typedef struct {
    JsonNode root;
} JsonDoc;

typedef struct {
    const char* s;
    size_t n, i;
    char* err;
    size_t errn;
    int opts; // JSON_DUPS
} JsonParser;

static void json_node_free(JsonNode* v) {
    for (int k = 0; k < v->n; k++) {
        json_node_free(&v->kids[k]);
        if (v->keys) free(v->keys[k]);
    }
    free(v->kids);
    free(v->keys);
    free(v->str);
    memset(v, 0, sizeof(*v));
}

static void json_free(JsonDoc* d) { json_node_free(&d->root); }

// -1 with "line L column C: msg" in err (only the first error is kept)
static int json_fail(JsonParser* p, const char* msg) {
    int line = 1;
    int col = 1;
    for (size_t k = 0; k < p->i && k < p->n; k++) {
        col++;
        if (p->s[k] == '\n') {
            line++;
            col = 1;
        }
    }
    if (p->err[0] == '\0') snprintf(p->err, p->errn, "line %d column %d: %s", line, col, msg);
    return -1;
}

static void json_ws(JsonParser* p) {
    while (p->i < p->n && (p->s[p->i] == ' ' || p->s[p->i] == '\t' || p->s[p->i] == '\n' || p->s[p->i] == '\r')) p->i++;
}

static int json_hex4(JsonParser* p, unsigned* u) {
    *u = 0;
    for (int k = 0; k < 4; k++, p->i++) {
        char c = p->i < p->n ? p->s[p->i] : '\0';
        int d = c >= '0' && c <= '9'   ? c - '0'
                : c >= 'a' && c <= 'f' ? c - 'a' + 10
                : c >= 'A' && c <= 'F' ? c - 'A' + 10
                                       : -1;
        if (d < 0) return json_fail(p, "\\u wants 4 hex digits");
        *u = *u * 16 + (unsigned)d;
    }
    return 0;
}

// a string at p->i (the opening quote) into a fresh NUL-terminated buffer (*len bytes before it)
static int json_string(JsonParser* p, char** out, size_t* len) {
    p->i++; // the quote
    size_t cap = 16;
    size_t k = 0;
    char* b = (char*)malloc(cap);
    if (b == NULL) return json_fail(p, "out of memory");
    for (;;) {
        if (k + 5 > cap) {
            char* nb = (char*)realloc(b, cap *= 2);
            if (nb == NULL) {
                free(b);
                return json_fail(p, "out of memory");
            }
            b = nb;
        }
        if (p->i >= p->n) {
            free(b);
            return json_fail(p, "unterminated string");
        }
        unsigned char c = (unsigned char)p->s[p->i++];
        if (c == '"') break;
        if (c < 0x20) {
            free(b);
            return json_fail(p, "control character in a string (escape it)");
        }
        if (c != '\\') {
            b[k++] = (char)c;
            continue;
        }
        char e = p->i < p->n ? p->s[p->i++] : '\0';
        const char* simple = strchr("\"\\/bfnrt", e);
        if (e != '\0' && simple != NULL) {
            b[k++] = "\"\\/\b\f\n\r\t"[simple - "\"\\/bfnrt"];
            continue;
        }
        unsigned u = 0;
        if (e != 'u' || json_hex4(p, &u) != 0) {
            free(b);
            return json_fail(p, "bad escape in a string");
        }
        if (u >= 0xDC00 && u <= 0xDFFF) {
            free(b);
            return json_fail(p, "lone low surrogate in a string");
        }
        if (u >= 0xD800 && u <= 0xDBFF) { // a high surrogate needs its low half
            unsigned lo = 0;
            if (p->i + 1 >= p->n || p->s[p->i] != '\\' || p->s[p->i + 1] != 'u') {
                free(b);
                return json_fail(p, "lone high surrogate in a string");
            }
            p->i += 2;
            if (json_hex4(p, &lo) != 0 || lo < 0xDC00 || lo > 0xDFFF) {
                free(b);
                return json_fail(p, "lone high surrogate in a string");
            }
            u = 0x10000 + ((u - 0xD800) << 10) + (lo - 0xDC00);
        }
        if (u < 0x80) {
            b[k++] = (char)u;
        } else if (u < 0x800) {
            b[k++] = (char)(0xC0 | (u >> 6));
            b[k++] = (char)(0x80 | (u & 0x3F));
        } else if (u < 0x10000) {
            b[k++] = (char)(0xE0 | (u >> 12));
            b[k++] = (char)(0x80 | ((u >> 6) & 0x3F));
            b[k++] = (char)(0x80 | (u & 0x3F));
        } else {
            b[k++] = (char)(0xF0 | (u >> 18));
            b[k++] = (char)(0x80 | ((u >> 12) & 0x3F));
            b[k++] = (char)(0x80 | ((u >> 6) & 0x3F));
            b[k++] = (char)(0x80 | (u & 0x3F));
        }
    }
    b[k] = '\0';
    *out = b;
    if (len != NULL) *len = k;
    return 0;
}

// a number in JSON's grammar (no leading zeros, no '+', no bare '.'), converted by strtod
static int json_number(JsonParser* p, double* x) {
    size_t a = p->i;
    const char* s = p->s;
    size_t i = p->i;
    if (i < p->n && s[i] == '-') i++;
    if (i < p->n && s[i] == '0') {
        i++;
    } else if (i < p->n && s[i] >= '1' && s[i] <= '9') {
        while (i < p->n && s[i] >= '0' && s[i] <= '9') i++;
    } else {
        return json_fail(p,
                         "unexpected character (a value must be a string, number, object, array, true, false "
                         "or null)");
    }
    if (i < p->n && s[i] == '.') {
        i++;
        if (i >= p->n || s[i] < '0' || s[i] > '9') return json_fail(p, "a digit must follow the decimal point");
        while (i < p->n && s[i] >= '0' && s[i] <= '9') i++;
    }
    if (i < p->n && (s[i] == 'e' || s[i] == 'E')) {
        i++;
        if (i < p->n && (s[i] == '+' || s[i] == '-')) i++;
        if (i >= p->n || s[i] < '0' || s[i] > '9') return json_fail(p, "an exponent needs digits");
        while (i < p->n && s[i] >= '0' && s[i] <= '9') i++;
    }
    char buf[64];
    if (i - a >= sizeof(buf)) return json_fail(p, "number too long");
    memcpy(buf, s + a, i - a);
    buf[i - a] = '\0';
    *x = strtod(buf, NULL);
    p->i = i;
    return 0;
}

static int json_value(JsonParser* p, JsonNode* v, int depth);

static int json_key_cmp(const void* a, const void* b) { return strcmp(*(char* const*)a, *(char* const*)b); }

// a key that obj holds twice (sorted copy of its keys: O(n log n) for a large object), or NULL
static const char* json_dup_key(const JsonNode* obj) {
    if (obj == NULL || obj->type != JSON_OBJ || obj->n < 2) return NULL;
    char** k = (char**)malloc(sizeof(char*) * (size_t)obj->n);
    if (k == NULL) return NULL;
    memcpy(k, obj->keys, sizeof(char*) * (size_t)obj->n);
    qsort(k, (size_t)obj->n, sizeof(char*), json_key_cmp);
    const char* dup = NULL;
    for (int i = 1; i < obj->n && dup == NULL; i++)
        if (strcmp(k[i - 1], k[i]) == 0) dup = k[i];
    free(k);
    return dup;
}

// the members of an array or object at p->i (its opening bracket)
static int json_members(JsonParser* p, JsonNode* v, int depth, int obj) {
    int cap = 0;
    size_t start = p->i;
    p->i++;
    json_ws(p);
    if (p->i < p->n && p->s[p->i] == (obj ? '}' : ']')) {
        p->i++;
        return 0;
    }
    for (;;) {
        if (v->n == cap) {
            cap = cap ? 2 * cap : 4;
            JsonNode* nk = (JsonNode*)realloc(v->kids, sizeof(JsonNode) * (size_t)cap);
            if (nk == NULL) return json_fail(p, "out of memory");
            v->kids = nk;
            if (obj) {
                char** nkeys = (char**)realloc(v->keys, sizeof(char*) * (size_t)cap);
                if (nkeys == NULL) return json_fail(p, "out of memory");
                v->keys = nkeys;
            }
        }
        memset(&v->kids[v->n], 0, sizeof(JsonNode));
        if (obj) {
            json_ws(p);
            v->keys[v->n] = NULL;
            if (p->i >= p->n || p->s[p->i] != '"') return json_fail(p, "an object member must start with a name");
            if (json_string(p, &v->keys[v->n], NULL) != 0) return -1;
            json_ws(p);
            if (p->i >= p->n || p->s[p->i] != ':') {
                v->n++; // its key is freed with the node
                return json_fail(p, "':' must follow a member name");
            }
            p->i++;
        }
        int rc = json_value(p, &v->kids[v->n], depth + 1);
        v->n++;
        if (rc != 0) return -1;
        json_ws(p);
        if (p->i < p->n && p->s[p->i] == ',') {
            p->i++;
            continue;
        }
        if (p->i < p->n && p->s[p->i] == (obj ? '}' : ']')) {
            p->i++;
            const char* dup = obj && !(p->opts & JSON_DUPS) ? json_dup_key(v) : NULL;
            if (dup != NULL) { // named where its object opens
                char msg[200];
                snprintf(msg, sizeof(msg), "the object here gives the key \"%.120s\" twice", dup);
                p->i = start;
                return json_fail(p, msg);
            }
            return 0;
        }
        return json_fail(p, obj ? "',' or '}' expected" : "',' or ']' expected");
    }
}

static int json_value(JsonParser* p, JsonNode* v, int depth) {
    memset(v, 0, sizeof(*v));
    if (depth > JSON_MAX_DEPTH) return json_fail(p, "nested too deeply");
    json_ws(p);
    if (p->i >= p->n) return json_fail(p, "unexpected end of the file");
    char c = p->s[p->i];
    if (c == '{' || c == '[') {
        v->type = c == '{' ? JSON_OBJ : JSON_ARR;
        return json_members(p, v, depth, c == '{');
    }
    if (c == '"') {
        v->type = JSON_STR;
        return json_string(p, &v->str, &v->len);
    }
    static const char* words[3] = {"true", "false", "null"};
    for (int w = 0; w < 3; w++) {
        size_t len = strlen(words[w]);
        if (p->n - p->i >= len && memcmp(p->s + p->i, words[w], len) == 0) {
            p->i += len;
            v->type = w == 2 ? JSON_NULL : JSON_BOOL;
            v->num = w == 0;
            return 0;
        }
    }
    v->type = JSON_NUM;
    return json_number(p, &v->num);
}

static int json_parse_opts(const char* text, size_t n, JsonDoc* doc, int opts, char* err, size_t errn) {
    JsonParser p = {text, n, 0, err, errn, opts};
    err[0] = '\0';
    memset(doc, 0, sizeof(*doc));
    if (n >= 3 && memcmp(text, "\xEF\xBB\xBF", 3) == 0) {
        json_fail(&p, "the file starts with a byte-order mark (BOM): save it as UTF-8 without one");
        return -1;
    }
    if (json_value(&p, &doc->root, 0) == 0) {
        json_ws(&p);
        if (p.i == p.n) return 0;
        json_fail(&p, "text after the JSON value");
    }
    json_free(doc);
    return -1;
}

static int json_parse(const char* text, size_t n, JsonDoc* doc, char* err, size_t errn) {
    return json_parse_opts(text, n, doc, 0, err, errn);
}

static const JsonNode* json_get(const JsonNode* obj, const char* key) {
    if (obj == NULL || obj->type != JSON_OBJ) return NULL;
    for (int k = 0; k < obj->n; k++)
        if (strcmp(obj->keys[k], key) == 0) return &obj->kids[k];
    return NULL;
}

#endif // LLMC_JSON_H
