/*
The C side of tests/data/test_bpe.py, which compares llmc/host/bpe.h with the `tokenizers` library
(the expected ids come from there, never from here). Modes:
  bpe_check encode JSON STRINGS   STRINGS holds one text per line in hex (an empty line: "");
                                  prints one line per text: its ids, space-separated, or "ERR message"
  bpe_check load JSON [BIN]       "ok", or "ERR message" (with BIN: the pair check of bpe_check_decoder)
  bpe_check classes               the regex class of every code point 0..0x10FFFF as one line of
                                  L (letter), N (number), S (white space), O (other); surrogates O
*/
// llmc/host/bpe.h opens files with POSIX.1-2008 calls (via safeio.h)
#define _POSIX_C_SOURCE 200809L
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../../llmc/host/bpe.h"

static int hexval(int c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
}

static int encode_all(const char* json, const char* strings) {
    Bpe b;
    char err[1400];
    if (bpe_load(&b, json, err, sizeof(err)) != 0) {
        fprintf(stderr, "bpe_check: %s\n", err);
        return 1;
    }
    FILE* f = fopen(strings, "rb");
    if (f == NULL) {
        fprintf(stderr, "bpe_check: cannot open %s\n", strings);
        bpe_free(&b);
        return 1;
    }
    size_t cap = 1 << 16;
    char* line = (char*)malloc(cap);
    char* text = (char*)malloc(cap);
    int* ids = (int*)malloc(cap * sizeof(int));
    int rc = 0;
    while (line != NULL && text != NULL && ids != NULL && fgets(line, (int)cap, f) != NULL) {
        size_t n = strcspn(line, "\r\n");
        if (n == cap - 1) {
            fprintf(stderr, "bpe_check: a line longer than %zu\n", cap);
            rc = 1;
            break;
        }
        size_t m = 0;
        for (size_t k = 0; k + 1 < n; k += 2) {
            int hi = hexval(line[k]);
            int lo = hexval(line[k + 1]);
            if (hi < 0 || lo < 0) rc = 1;
            text[m++] = (char)(hi * 16 + lo);
        }
        long got = bpe_encode(&b, text, m, ids, (long)cap, err, sizeof(err));
        if (got < 0) {
            printf("ERR %s\n", err);
            continue;
        }
        for (long k = 0; k < got && k < (long)cap; k++) printf(k ? " %d" : "%d", ids[k]);
        printf("\n");
    }
    free(line);
    free(text);
    free(ids);
    fclose(f);
    bpe_free(&b);
    return rc;
}

static int load_only(const char* json, const char* bin) {
    Bpe b;
    char err[1400];
    if (bpe_load(&b, json, err, sizeof(err)) != 0) {
        printf("ERR %s\n", err);
        return 0;
    }
    if (bin != NULL) {
        Tokenizer t;
        if (tokenizer_load(&t, bin, err, sizeof(err)) != 0 || bpe_check_decoder(&b, &t, bin, err, sizeof(err)) != 0) {
            printf("ERR %s\n", err);
            tokenizer_free(&t);
            bpe_free(&b);
            return 0;
        }
        tokenizer_free(&t);
    }
    printf("ok\n");
    bpe_free(&b);
    bpe_free(&b); // safe twice
    return 0;
}

static int classes(void) {
    static const char letter[] = "LNSO"; // BPE_LETTER, BPE_NUMBER, BPE_SPACE, BPE_OTHER
    for (uint32_t cp = 0; cp <= 0x10FFFF; cp++) putchar(cp >= 0xD800 && cp <= 0xDFFF ? 'O' : letter[bpe_class(cp)]);
    putchar('\n');
    return 0;
}

int main(int argc, char** argv) {
    if (argc == 4 && strcmp(argv[1], "encode") == 0) return encode_all(argv[2], argv[3]);
    if ((argc == 3 || argc == 4) && strcmp(argv[1], "load") == 0) return load_only(argv[2], argc == 4 ? argv[3] : NULL);
    if (argc == 2 && strcmp(argv[1], "classes") == 0) return classes();
    fprintf(stderr, "usage: bpe_check encode JSON STRINGS | load JSON [BIN] | classes\n");
    return 2;
}
