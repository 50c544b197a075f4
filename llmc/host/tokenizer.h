/*
Tokenizer decoding for sampling: loads a token-id -> bytes table in llm.c's
tokenizer file format and turns generated ids back into text.

File format (all little-endian):
  header: 256 x uint32: [0] = 20240328 (magic), [1] = 2 (version),
          [2] = vocab size, [3] = id of the <|endoftext|> token, rest 0
  then for each token id 0..vocab-1 in order: one uint8 length L (1..255)
          followed by L raw bytes (the token's bytes, not a unicode escape form)

Only decoding lives here: encoding text is done offline in Python
(dev/data/prepare_kjv.py), the trainer only ever needs ids -> bytes.
Header-only, C11 with POSIX.1-2008 (open/fstat/fdopen, via safeio.h), and valid C++ so it also compiles inside a .cu via
nvcc. No global state and no exit(): loading returns an error code and a one-line message, so the caller decides whether
a missing tokenizer is fatal (sampling can still print raw ids without one).
*/
#ifndef LLMC_TOKENIZER_H
#define LLMC_TOKENIZER_H

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "safeio.h"

#define TOKENIZER_MAGIC 20240328u
#define TOKENIZER_VERSION 2u
#define TOKENIZER_HEADER_WORDS 256

typedef struct {
    uint32_t vocab_size;
    uint32_t eot_token; // id of <|endoftext|>
    char** token_table; // token_table[id]: the token's bytes plus a NUL terminator
    uint8_t* token_len; // token_len[id]: byte count (a token may contain a 0 byte)
    int init_ok;        // 1 after a successful tokenizer_init
} Tokenizer;

// Frees what tokenizer_init allocated; safe on a zeroed or failed Tokenizer and
// safe to call twice.
static inline void tokenizer_free(Tokenizer* t) {
    if (t == NULL) {
        return;
    }
    if (t->token_table != NULL) {
        for (uint32_t i = 0; i < t->vocab_size; i++) {
            free(t->token_table[i]);
        }
        free(t->token_table);
    }
    free(t->token_len);
    memset(t, 0, sizeof(*t));
}

// Parses a tokenizer from an open stream (closed here in every case; the fuzzer feeds it
// arbitrary bytes through fmemopen). Returns 0 on success; on any problem (bad
// magic/version, truncated or oversized file) writes one line to err, leaves *t zeroed,
// and returns -1. Everything is read before it is trusted, so a corrupt file can cause
// an error but never an out-of-bounds access.
static inline int tokenizer_init_stream(Tokenizer* t, FILE* f, const char* filename, char* err, size_t errn) {
    memset(t, 0, sizeof(*t));
    uint32_t header[TOKENIZER_HEADER_WORDS];
    if (fread(header, sizeof(uint32_t), TOKENIZER_HEADER_WORDS, f) != TOKENIZER_HEADER_WORDS) {
        snprintf(err, errn, "tokenizer file %s: file too short for the 1024-byte header", filename);
        fclose(f);
        return -1;
    }
    if (header[0] != TOKENIZER_MAGIC) {
        snprintf(err, errn, "tokenizer file %s: bad magic %u (expected %u); not a tokenizer file?", filename, header[0],
                 TOKENIZER_MAGIC);
        fclose(f);
        return -1;
    }
    if (header[1] != TOKENIZER_VERSION) {
        snprintf(err, errn, "tokenizer file %s: unsupported version %u (expected %u)", filename, header[1],
                 TOKENIZER_VERSION);
        fclose(f);
        return -1;
    }
    uint32_t vocab = header[2];
    // ids are stored as uint16 in the data shards, so a larger vocab cannot be right
    if (vocab == 0 || vocab > 65536u) {
        snprintf(err, errn, "tokenizer file %s: vocab size %u out of range 1..65536", filename, vocab);
        fclose(f);
        return -1;
    }
    if (header[3] >= vocab) {
        snprintf(err, errn, "tokenizer file %s: EOT id %u not below vocab size %u", filename, header[3], vocab);
        fclose(f);
        return -1;
    }
    t->token_table = (char**)calloc(vocab, sizeof(char*));
    t->token_len = (uint8_t*)calloc(vocab, sizeof(uint8_t));
    if (t->token_table == NULL || t->token_len == NULL) {
        snprintf(err, errn, "tokenizer file %s: out of memory", filename);
        fclose(f);
        tokenizer_free(t);
        return -1;
    }
    // set before the loop so tokenizer_free releases exactly what was allocated so far
    t->vocab_size = vocab;
    for (uint32_t i = 0; i < vocab; i++) {
        unsigned char len;
        if (fread(&len, 1, 1, f) != 1) {
            snprintf(err, errn, "tokenizer file %s: truncated at token %u of %u", filename, i, vocab);
            fclose(f);
            tokenizer_free(t);
            return -1;
        }
        if (len == 0) {
            snprintf(err, errn, "tokenizer file %s: token %u has length 0", filename, i);
            fclose(f);
            tokenizer_free(t);
            return -1;
        }
        char* bytes = (char*)malloc((size_t)len + 1);
        if (bytes == NULL) {
            snprintf(err, errn, "tokenizer file %s: out of memory", filename);
            fclose(f);
            tokenizer_free(t);
            return -1;
        }
        t->token_table[i] = bytes; // owned by t from here on, even if the read fails
        if (fread(bytes, 1, len, f) != len) {
            snprintf(err, errn, "tokenizer file %s: truncated in token %u of %u", filename, i, vocab);
            fclose(f);
            tokenizer_free(t);
            return -1;
        }
        bytes[len] = '\0';
        t->token_len[i] = len;
    }
    // trailing bytes mean the header's vocab size and the table disagree
    if (fgetc(f) != EOF) {
        snprintf(err, errn, "tokenizer file %s: unexpected data after %u tokens", filename, vocab);
        fclose(f);
        tokenizer_free(t);
        return -1;
    }
    fclose(f);
    t->eot_token = header[3];
    t->init_ok = 1;
    return 0;
}

// Loads a tokenizer file; a FIFO, directory or device is refused (it would block or
// make no sense) instead of opened. 0, or -1 with a one-line message in err.
static inline int tokenizer_load(Tokenizer* t, const char* filename, char* err, size_t errn) {
    memset(t, 0, sizeof(*t));
    FILE* f = safeio_open_read(filename, "tokenizer file", err, errn);
    if (f == NULL) return -1;
    return tokenizer_init_stream(t, f, filename, err, errn);
}

// As tokenizer_load, printing the message on stderr.
static inline int tokenizer_init(Tokenizer* t, const char* filename) {
    char err[1400];
    if (tokenizer_load(t, filename, err, sizeof(err)) == 0) return 0;
    fprintf(stderr, "error: %s\n", err);
    return -1;
}

// Returns the bytes of token `id` as a NUL-terminated string owned by the tokenizer
// (valid until tokenizer_free), or NULL if the tokenizer is not loaded or the id is
// out of range. A token containing a 0 byte reads short as a C string; use
// tokenizer_token_len for the exact byte count.
static inline const char* tokenizer_decode(const Tokenizer* t, uint32_t id) {
    if (t == NULL || !t->init_ok || id >= t->vocab_size) {
        return NULL;
    }
    return t->token_table[id];
}

// Byte count of token `id` (0 if unavailable, see tokenizer_decode).
static inline size_t tokenizer_token_len(const Tokenizer* t, uint32_t id) {
    if (t == NULL || !t->init_ok || id >= t->vocab_size) {
        return 0;
    }
    return t->token_len[id];
}

// Length of a complete, well-formed UTF-8 multi-byte sequence at s[0..n), or 0.
// Overlong forms, surrogates and code points above U+10FFFF count as malformed.
static inline size_t tokenizer_utf8_seq_len_(const unsigned char* s, size_t n) {
    unsigned char c = s[0];
    size_t len;
    uint32_t cp;
    if (c >= 0xC2 && c <= 0xDF) {
        len = 2;
        cp = c & 0x1Fu;
    } else if (c >= 0xE0 && c <= 0xEF) {
        len = 3;
        cp = c & 0x0Fu;
    } else if (c >= 0xF0 && c <= 0xF4) {
        len = 4;
        cp = c & 0x07u;
    } else {
        return 0;
    }
    if (len > n) {
        return 0;
    }
    for (size_t k = 1; k < len; k++) {
        if ((s[k] & 0xC0u) != 0x80u) {
            return 0;
        }
        cp = (cp << 6) | (s[k] & 0x3Fu);
    }
    if ((len == 3 && cp < 0x800u) || (len == 4 && cp < 0x10000u)) {
        return 0;
    }
    if ((cp >= 0xD800u && cp <= 0xDFFFu) || cp > 0x10FFFFu) {
        return 0;
    }
    return len;
}

// Writes a decoded piece of `len` bytes to `out`, keeping only what cannot garble a
// terminal: printable ASCII, space/tab/newline/carriage return, and complete UTF-8
// characters. Control bytes (escape sequences!) and stray or partial UTF-8 bytes are
// dropped. Works per piece, so a character that BPE split across two tokens is
// dropped too; that is rare (the KJV is ASCII) and safer than guessing.
static inline void tokenizer_safe_write(FILE* out, const char* piece, size_t len) {
    if (out == NULL || piece == NULL) {
        return;
    }
    const unsigned char* s = (const unsigned char*)piece;
    size_t i = 0;
    while (i < len) {
        unsigned char c = s[i];
        if ((c >= 0x20 && c < 0x7F) || c == '\n' || c == '\t' || c == '\r') {
            fputc(c, out);
            i++;
        } else if (c >= 0x80) {
            size_t n = tokenizer_utf8_seq_len_(s + i, len - i);
            if (n > 0) {
                fwrite(s + i, 1, n, out);
                i += n;
            } else {
                i++;
            }
        } else {
            i++; // other control byte
        }
    }
}

// Convenience: safely prints token `id` to `out` (nothing for an invalid id).
static inline void tokenizer_print_token(FILE* out, const Tokenizer* t, uint32_t id) {
    const char* piece = tokenizer_decode(t, id);
    if (piece != NULL) {
        tokenizer_safe_write(out, piece, tokenizer_token_len(t, id));
    }
}

#endif // LLMC_TOKENIZER_H
