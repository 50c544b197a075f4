/*
Checks llmc/host/tokenizer.h against the files dev/data/prepare_kjv.py writes:
  1. every id list in tokenizer_check.txt decodes to exactly its expected text;
  2. the safe printer keeps text and drops control bytes / broken UTF-8;
  3. corrupt tokenizer files (wrong magic, truncated, ...) give an error, not a crash;
  4. optional shard paths: header is llm.c's, every token is < vocab, stream starts with EOT.
Prints "N passed, M failed" last and exits non-zero on any failure.

usage: tokenizer_check TOKENIZER_BIN CHECK_TXT TMPDIR [SHARD.bin ...]
*/
// llmc/host/tokenizer.h opens files with POSIX.1-2008 calls (open, fstat, fdopen: FIFO-safe)
#define _POSIX_C_SOURCE 200809L
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../../llmc/host/tokenizer.h"

static int n_pass = 0, n_fail = 0;

static void report(int ok, const char* what) {
    if (ok) {
        n_pass++;
    } else {
        n_fail++;
        printf("FAIL: %s\n", what);
    }
}

// Reads a whole file into a malloc'd buffer; returns NULL on failure.
static unsigned char* read_file(const char* path, size_t* size) {
    FILE* f = fopen(path, "rb");
    if (f == NULL) {
        return NULL;
    }
    size_t cap = 1 << 16, n = 0;
    unsigned char* buf = (unsigned char*)malloc(cap);
    size_t got;
    while (buf != NULL && (got = fread(buf + n, 1, cap - n, f)) > 0) {
        n += got;
        if (n == cap) {
            cap *= 2;
            unsigned char* nb = (unsigned char*)realloc(buf, cap);
            if (nb == NULL) {
                free(buf);
                buf = NULL;
            } else {
                buf = nb;
            }
        }
    }
    fclose(f);
    *size = n;
    return buf;
}

static int write_file(const char* path, const unsigned char* data, size_t size) {
    FILE* f = fopen(path, "wb");
    if (f == NULL) {
        return -1;
    }
    size_t w = size > 0 ? fwrite(data, 1, size, f) : 0;
    return (fclose(f) == 0 && w == size) ? 0 : -1;
}

// Undoes the escapes prepare_kjv.py writes: \n, \t, \\. Returns the length.
static size_t unescape(char* s) {
    size_t r = 0, w = 0;
    while (s[r] != '\0') {
        if (s[r] == '\\' && s[r + 1] != '\0') {
            char c = s[r + 1];
            s[w++] = c == 'n' ? '\n' : c == 't' ? '\t' : c;
            r += 2;
        } else {
            s[w++] = s[r++];
        }
    }
    s[w] = '\0';
    return w;
}

static void check_decoding(const Tokenizer* t, const char* check_path) {
    size_t size;
    char* text = (char*)read_file(check_path, &size);
    if (text == NULL) {
        report(0, "read tokenizer_check.txt");
        return;
    }
    text = (char*)realloc(text, size + 1);
    text[size] = '\0';
    int cases = 0;
    char* next = text;
    while (*next != '\0') {
        char* line = next;
        char* nl = strchr(line, '\n');
        if (nl != NULL) {
            *nl = '\0';
            next = nl + 1;
        } else {
            next = line + strlen(line);
        }
        if (line[0] == '#' || line[0] == '\0') {
            continue;
        }
        char* tab = strchr(line, '\t');
        if (tab == NULL) {
            report(0, "check line has no tab");
            continue;
        }
        *tab = '\0';
        char* expected = tab + 1;
        size_t exp_len = unescape(expected);
        // decode the ids by concatenating their bytes
        char got[4096];
        size_t got_len = 0;
        int ok = 1;
        char* p = line;
        while (*p != '\0') {
            char* end;
            unsigned long id = strtoul(p, &end, 10);
            if (end == p) {
                ok = 0;
                break;
            }
            p = end;
            while (*p == ' ') {
                p++;
            }
            const char* piece = tokenizer_decode(t, (uint32_t)id);
            size_t n = tokenizer_token_len(t, (uint32_t)id);
            if (piece == NULL || got_len + n > sizeof(got)) {
                ok = 0;
                break;
            }
            memcpy(got + got_len, piece, n);
            got_len += n;
        }
        ok = ok && got_len == exp_len && memcmp(got, expected, exp_len) == 0;
        char what[160];
        snprintf(what, sizeof(what), "decode ids \"%.60s\" -> \"%.40s\"", line, expected);
        report(ok, what);
        cases++;
    }
    report(cases > 0, "tokenizer_check.txt has cases");
    free(text);
}

// Runs tokenizer_safe_write on `in` and compares what it wrote with `want`.
static void check_safe(const char* in, size_t in_len, const char* want, const char* what) {
    FILE* f = tmpfile();
    if (f == NULL) {
        report(0, "tmpfile");
        return;
    }
    tokenizer_safe_write(f, in, in_len);
    long n = ftell(f);
    rewind(f);
    char buf[256];
    size_t got = fread(buf, 1, sizeof(buf), f);
    fclose(f);
    report(n >= 0 && got == strlen(want) && memcmp(buf, want, got) == 0, what);
}

static void check_safe_printer(void) {
    check_safe("Amen.\n\tAnd", 10, "Amen.\n\tAnd", "safe: text and whitespace kept");
    check_safe("a\x1b[31mb\x07", 9, "a[31mb", "safe: ESC and BEL dropped");
    check_safe("caf\xc3\xa9 \xe2\x98\x83 \xf0\x9f\x98\x80", 14, "caf\xc3\xa9 \xe2\x98\x83 \xf0\x9f\x98\x80",
               "safe: complete UTF-8 kept");
    check_safe("x\xe2\x98", 3, "x", "safe: partial UTF-8 at end dropped");
    check_safe("\x98\x83y", 3, "y", "safe: stray continuation bytes dropped");
    check_safe("\xc0\xaf\xed\xa0\x80z", 6, "z", "safe: overlong and surrogate dropped");
    check_safe("a\0b", 3, "ab", "safe: NUL byte dropped");
}

// Writes `data` to a temp file and expects tokenizer_init to fail cleanly.
static void expect_load_error(const char* tmpdir, const unsigned char* data, size_t size, const char* what) {
    char path[1024];
    snprintf(path, sizeof(path), "%s/corrupt_tokenizer.bin", tmpdir);
    if (write_file(path, data, size) != 0) {
        report(0, "write corrupt file");
        return;
    }
    Tokenizer t;
    int rc = tokenizer_init(&t, path);
    int ok = rc != 0 && !t.init_ok && t.token_table == NULL && tokenizer_decode(&t, 0) == NULL;
    tokenizer_free(&t);
    tokenizer_free(&t); // freeing twice must be harmless
    char msg[160];
    snprintf(msg, sizeof(msg), "corrupt file rejected: %s", what);
    report(ok, msg);
    remove(path);
}

static void set_u32(unsigned char* buf, size_t word, uint32_t v) {
    memcpy(buf + 4 * word, &v, 4); // the format and all targets are little-endian
}

static void check_corrupt(const char* good_path, const char* tmpdir) {
    size_t size;
    unsigned char* good = read_file(good_path, &size);
    if (good == NULL || size < 1025) {
        report(0, "read tokenizer file for corruption tests");
        free(good);
        return;
    }
    unsigned char* bad = (unsigned char*)malloc(size + 16);
    uint32_t vocab;
    memcpy(&vocab, good + 8, 4);

    char missing[1024];
    snprintf(missing, sizeof(missing), "%s/does_not_exist.bin", tmpdir);
    Tokenizer t;
    report(tokenizer_init(&t, missing) != 0 && !t.init_ok, "missing file rejected");

    expect_load_error(tmpdir, good, 0, "empty file");
    expect_load_error(tmpdir, good, 100, "truncated header");
    // one header word changed (0 magic, 1 version, 2 vocab size, 3 EOT id)
    const struct {
        size_t word;
        uint32_t value;
        const char* what;
    } words[] = {{0, 20240520u, "wrong magic (a data shard's)"},
                 {1, 1u, "wrong version"},
                 {2, 0u, "vocab size 0"},
                 {2, 70000u, "vocab size too large"},
                 {3, vocab, "EOT id out of range"},
                 {2, vocab + 1, "header vocab larger than table"}};
    for (size_t i = 0; i < sizeof(words) / sizeof(words[0]); i++) {
        memcpy(bad, good, size);
        set_u32(bad, words[i].word, words[i].value);
        expect_load_error(tmpdir, bad, size, words[i].what);
    }
    memcpy(bad, good, size); // EOT id 0 too: only the size may be wrong
    set_u32(bad, 2, vocab - 1);
    set_u32(bad, 3, 0u);
    expect_load_error(tmpdir, bad, size, "header vocab smaller than table");
    expect_load_error(tmpdir, good, 1024, "header only, no table");
    expect_load_error(tmpdir, good, 1025, "cut right after a length byte");
    expect_load_error(tmpdir, good, size / 2 + 1024 / 2, "table cut in the middle");
    expect_load_error(tmpdir, good, size - 1, "last byte missing");
    memcpy(bad, good, size);
    bad[size] = 'x';
    expect_load_error(tmpdir, bad, size + 1, "trailing garbage");
    memcpy(bad, good, size);
    bad[1024] = 0;
    expect_load_error(tmpdir, bad, size, "zero-length token");
    free(bad);
    free(good);
}

static void check_shard(const char* path, const Tokenizer* t) {
    size_t size;
    unsigned char* buf = read_file(path, &size);
    char what[1200];
    snprintf(what, sizeof(what), "shard %s: llm.c header, tokens < vocab, starts with EOT", path);
    int ok = buf != NULL && size >= 1024;
    if (ok) {
        int32_t h[3];
        memcpy(h, buf, sizeof(h));
        ok = h[0] == 20240520 && h[1] == 1 && h[2] > 0 && size == 1024 + 2 * (size_t)h[2];
        for (int32_t i = 0; ok && i < h[2]; i++) {
            uint16_t tok;
            memcpy(&tok, buf + 1024 + 2 * (size_t)i, 2);
            ok = tok < t->vocab_size && (i > 0 || tok == t->eot_token);
        }
        if (ok) {
            printf("shard %s: %d tokens\n", path, h[2]);
        }
    }
    report(ok, what);
    free(buf);
}

int main(int argc, char** argv) {
    if (argc < 4) {
        fprintf(stderr, "usage: %s TOKENIZER_BIN CHECK_TXT TMPDIR [SHARD.bin ...]\n", argv[0]);
        return 2;
    }
    Tokenizer t;
    report(tokenizer_decode(NULL, 0) == NULL, "decode on NULL tokenizer gives NULL");
    int rc = tokenizer_init(&t, argv[1]);
    report(rc == 0, "load tokenizer");
    if (rc == 0) {
        const char* eot = tokenizer_decode(&t, t.eot_token);
        report(eot != NULL && strcmp(eot, "<|endoftext|>") == 0, "EOT token decodes to <|endoftext|>");
        report(tokenizer_decode(&t, t.vocab_size) == NULL, "out-of-range id gives NULL");
        check_decoding(&t, argv[2]);
        for (int i = 4; i < argc; i++) {
            check_shard(argv[i], &t);
        }
        printf("tokenizer: vocab %u, EOT id %u\n", t.vocab_size, t.eot_token);
    }
    tokenizer_free(&t);
    check_safe_printer();
    printf("(the 'tokenizer:' error lines below are expected: corrupt files being rejected)\n");
    fflush(stdout);
    check_corrupt(argv[1], argv[3]);
    printf("%d passed, %d failed\n", n_pass, n_fail);
    return n_fail == 0 ? 0 : 1;
}
