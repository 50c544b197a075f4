/*
bpe.h: text -> token ids with a Hugging Face tokenizer.json, bit-identical to the `tokenizers`
library's Tokenizer.from_file(json).encode(text).ids for the tokenizers dev/data/prepare.py trains
(it writes PREFIX_tokenizer.json beside the llm.c decoder file PREFIX_tokenizer.bin): a BPE model,
the ByteLevel pre-tokenizer with GPT-2's regex, added tokens such as <|endoftext|>. Whatever else a
tokenizer.json can ask for (another model, a normalizer, another pre-tokenizer, dropout, byte
fallback, an unknown token, a post-processor that adds tokens, ...) is refused with one line,
never encoded differently. The trainer's -prompt-text uses it; tokenizer.h decodes.

Encoding, as `tokenizers` does it:
  1. added tokens are cut out of the text, leftmost-longest: first those with normalized=false in
     the whole text, then those with normalized=true in the pieces between (no normalizer runs);
     each maps to its id;
  2. every other piece (with a space in front if add_prefix_space and it has none) is cut by
     GPT-2's regex  's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+
     (matched by hand in bpe_regex_end_; the classes come from unicode_ranges.h);
  3. each regex piece starts as one symbol per byte (the vocab entry of the byte's character in
     GPT-2's bytes<->unicode table), and the adjacent pair with the lowest merge rank, leftmost
     on a tie, is merged until no pair has one (O(n^2) per piece: fine for prompts).
The text must be valid UTF-8, as every Python str that `tokenizers` can take is: invalid bytes are
refused with their offset, never replaced or guessed at.

API (header-only; C11, and valid C++ so that nvcc compiles it inside the .cu trainer; no global
state, no exit(): a function that can fail returns -1 and writes one line into err):
  int  bpe_load(Bpe* b, const char* path, char* err, size_t errn)    a tokenizer.json (64 MiB at most)
  int  bpe_load_mem(Bpe* b, const char* json, size_t n, const char* name, char* err, size_t errn)
  long bpe_encode(const Bpe* b, const char* text, size_t n, int* ids, long cap, char* err, size_t errn)
       the number of ids (the first cap of them are written to ids), or -1
  int  bpe_check_decoder(const Bpe* b, const Tokenizer* t, const char* bin, char* err, size_t errn)
       the llm.c .bin t holds the same tokens: their number, the <|endoftext|> id, every token's bytes
  int  bpe_json_path(const char* bin, char* out, size_t n)           FILE.bin -> FILE.json
  void bpe_free(Bpe* b)                                              safe on a zeroed or failed Bpe
*/
#ifndef LLMC_BPE_H
#define LLMC_BPE_H

#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "safeio.h"
#include "tokenizer.h"
#include "unicode_ranges.h"

#define BPE_MAX_FILE (64u << 20) // bytes of a tokenizer.json (GPT-2's is 1.4 MB, Llama 3's 9 MB)
#define BPE_MAX_DEPTH 64         // JSON nesting (a tokenizer.json needs 4)
#define BPE_MAX_IDS (1u << 24)   // vocabulary and added tokens together
#define BPE_EOT "<|endoftext|>"

typedef struct {
    uint32_t off, len; // the token's text (UTF-8, as the json spells it) in Bpe.pool
} BpeStr;

typedef struct {
    BpeStr s;
    uint32_t id;
    int normalized; // matched in the second pass, between the normalized=false tokens
} BpeAdded;

typedef struct {
    char* pool;           // every decoded json string
    BpeStr* vocab;        // (nvocab) the model's tokens by id: ids are 0..nvocab-1
    uint32_t nvocab;      // model tokens
    uint32_t* vocab_slot; // (vocab_cap) open addressing: id + 1, 0 = empty
    uint32_t vocab_cap;   // slots, a power of two
    uint64_t* merge_key;  // (merge_cap) left id << 32 | right id, UINT64_MAX = empty
    uint32_t* merge_rank; // (merge_cap) lower merges first
    uint32_t* merge_id;   // (merge_cap) the merged token
    uint32_t merge_cap;   // slots, a power of two
    uint32_t nmerges;     // merges with a rank (a pair listed twice keeps its last rank, as in tokenizers)
    int32_t byte_id[256]; // the token of each byte's character, -1 if the vocab lacks it
    BpeAdded* added;      // (nadded) in the json's order
    uint32_t nadded;      // added tokens
    uint32_t size;        // ids 0..size-1: the vocab, then added tokens it lacks
    int add_prefix_space; // pre_tokenizer.add_prefix_space
    int ignore_merges;    // model.ignore_merges: a piece that is a token is kept whole
    int init_ok;          // 1 after a successful load
} Bpe;

// ---------------------------------------------------------------------------------------
// GPT-2's bytes<->unicode table: the printable bytes stand for themselves, the other 68
// (0x00-0x20, 0x7F-0xA0, 0xAD) for U+0100.. in byte order, so every token is printable text.

static inline uint32_t bpe_byte_char(unsigned b) {
    if ((b >= 0x21 && b <= 0x7E) || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF)) return b;
    if (b <= 0x20) return 0x100 + b;
    if (b <= 0xA0) return 0x100 + 33 + (b - 0x7F);
    return 0x100 + 67; // 0xAD
}

// the byte a character stands for, or -1 (not one of the 256)
static inline int bpe_char_byte(uint32_t cp) {
    if (cp >= 0x100 && cp < 0x100 + 33) return (int)(cp - 0x100);
    if (cp >= 0x100 + 33 && cp < 0x100 + 67) return (int)(cp - 0x100 - 33 + 0x7F);
    if (cp == 0x100 + 67) return 0xAD;
    if (cp < 0x100 && bpe_byte_char(cp) == cp) return (int)cp;
    return -1;
}

// ---------------------------------------------------------------------------------------
// UTF-8

// Writes code point cp (<= U+10FFFF) as UTF-8 into out (4 bytes of room); returns the length.
static inline int bpe_utf8_put(uint32_t cp, unsigned char* out) {
    if (cp < 0x80) {
        out[0] = (unsigned char)cp;
        return 1;
    }
    if (cp < 0x800) {
        out[0] = (unsigned char)(0xC0 | (cp >> 6));
        out[1] = (unsigned char)(0x80 | (cp & 0x3F));
        return 2;
    }
    if (cp < 0x10000) {
        out[0] = (unsigned char)(0xE0 | (cp >> 12));
        out[1] = (unsigned char)(0x80 | ((cp >> 6) & 0x3F));
        out[2] = (unsigned char)(0x80 | (cp & 0x3F));
        return 3;
    }
    out[0] = (unsigned char)(0xF0 | (cp >> 18));
    out[1] = (unsigned char)(0x80 | ((cp >> 12) & 0x3F));
    out[2] = (unsigned char)(0x80 | ((cp >> 6) & 0x3F));
    out[3] = (unsigned char)(0x80 | (cp & 0x3F));
    return 4;
}

// The code point at s[i] (n bytes in all) and its length in *len; 0 for invalid UTF-8 (an
// overlong form, a surrogate, beyond U+10FFFF, a cut sequence), as Rust's str refuses it.
static inline int bpe_utf8_get(const unsigned char* s, size_t n, size_t i, uint32_t* cp, size_t* len) {
    unsigned c = s[i];
    if (c < 0x80) {
        *cp = c;
        *len = 1;
        return 1;
    }
    size_t need;
    uint32_t v;
    uint32_t min;
    if (c >= 0xC2 && c <= 0xDF) {
        need = 2;
        v = c & 0x1F;
        min = 0x80;
    } else if (c >= 0xE0 && c <= 0xEF) {
        need = 3;
        v = c & 0x0F;
        min = 0x800;
    } else if (c >= 0xF0 && c <= 0xF4) {
        need = 4;
        v = c & 0x07;
        min = 0x10000;
    } else {
        return 0;
    }
    if (need > n - i) return 0;
    for (size_t k = 1; k < need; k++) {
        if ((s[i + k] & 0xC0) != 0x80) return 0;
        v = (v << 6) | (s[i + k] & 0x3F);
    }
    if (v < min || v > 0x10FFFF || (v >= 0xD800 && v <= 0xDFFF)) return 0;
    *cp = v;
    *len = need;
    return 1;
}

// ---------------------------------------------------------------------------------------
// the character classes of the regex

enum { BPE_LETTER, BPE_NUMBER, BPE_SPACE, BPE_OTHER };

static inline int bpe_in_ranges_(const uint32_t (*r)[2], int n, uint32_t cp) {
    int lo = 0;
    int hi = n - 1;
    while (lo <= hi) {
        int mid = (lo + hi) / 2;
        if (cp < r[mid][0])
            hi = mid - 1;
        else if (cp > r[mid][1])
            lo = mid + 1;
        else
            return 1;
    }
    return 0;
}

#define BPE_NRANGES_(t) ((int)(sizeof(t) / sizeof(t[0])))

static inline int bpe_class(uint32_t cp) {
    if (cp < 0x80) { // ASCII without a search
        if ((cp | 0x20) >= 'a' && (cp | 0x20) <= 'z') return BPE_LETTER;
        if (cp >= '0' && cp <= '9') return BPE_NUMBER;
        if (cp == ' ' || (cp >= 0x09 && cp <= 0x0D)) return BPE_SPACE;
        return BPE_OTHER;
    }
    if (bpe_in_ranges_(UNICODE_LETTER, BPE_NRANGES_(UNICODE_LETTER), cp)) return BPE_LETTER;
    if (bpe_in_ranges_(UNICODE_NUMBER, BPE_NRANGES_(UNICODE_NUMBER), cp)) return BPE_NUMBER;
    if (bpe_in_ranges_(UNICODE_SPACE, BPE_NRANGES_(UNICODE_SPACE), cp)) return BPE_SPACE;
    return BPE_OTHER;
}

// the class of the (valid) character at s[i], its length in *len
static inline int bpe_class_at_(const unsigned char* s, size_t n, size_t i, size_t* len) {
    uint32_t cp = 0;
    if (!bpe_utf8_get(s, n, i, &cp, len)) *len = 1; // the text was validated: not reached
    return bpe_class(cp);
}

// End of the regex match that starts at s[i] (i < n) in valid UTF-8. The alternatives are tried
// in the regex's order; one always matches, so the matches tile the text.
static inline size_t bpe_regex_end_(const unsigned char* s, size_t n, size_t i) {
    if (s[i] == '\'' && i + 1 < n) { // 's 't 're 've 'm 'll 'd (case-sensitive)
        unsigned char c = s[i + 1];
        if (c == 's' || c == 't' || c == 'm' || c == 'd') return i + 2;
        if (i + 2 < n &&
            ((c == 'r' && s[i + 2] == 'e') || (c == 'v' && s[i + 2] == 'e') || (c == 'l' && s[i + 2] == 'l')))
            return i + 3;
    }
    size_t len;
    size_t j = s[i] == ' ' ? i + 1 : i; // ' ?': only U+0020 joins what follows
    if (j < n) {
        int cls = bpe_class_at_(s, n, j, &len);
        if (cls != BPE_SPACE) { // ' ?\p{L}+', ' ?\p{N}+' or ' ?[^\s\p{L}\p{N}]+'
            size_t k = j + len;
            while (k < n && bpe_class_at_(s, n, k, &len) == cls) k += len;
            return k;
        }
    }
    // white space at i: '\s+(?!\S)' takes the run to the end of the text, or all of it but the
    // last character (which then goes with what follows); a lone one before a non-space is '\s+'
    size_t k = i;
    size_t last = i;
    while (k < n && bpe_class_at_(s, n, k, &len) == BPE_SPACE) {
        last = k;
        k += len;
    }
    if (k == n) return n;
    if (last > i) return last;
    return k;
}

// ---------------------------------------------------------------------------------------
// hash tables

static inline uint64_t bpe_hash_(const char* s, size_t n) {
    uint64_t h = 1469598103934665603ULL; // FNV-1a
    for (size_t i = 0; i < n; i++) {
        h ^= (unsigned char)s[i];
        h *= 1099511628211ULL;
    }
    return h;
}

static inline uint64_t bpe_mix_(uint64_t x) { // splitmix64's finalizer
    x ^= x >> 30;
    x *= 0xBF58476D1CE4E5B9ULL;
    x ^= x >> 27;
    x *= 0x94D049BB133111EBULL;
    return x ^ (x >> 31);
}

// the vocab id of the n bytes at s, or -1
static inline int64_t bpe_vocab_find_(const Bpe* b, const char* s, size_t n) {
    if (b->vocab_cap == 0) return -1;
    uint32_t mask = b->vocab_cap - 1;
    for (uint32_t h = (uint32_t)bpe_hash_(s, n) & mask;; h = (h + 1) & mask) {
        uint32_t slot = b->vocab_slot[h];
        if (slot == 0) return -1;
        const BpeStr* v = &b->vocab[slot - 1];
        if (v->len == n && memcmp(b->pool + v->off, s, n) == 0) return (int64_t)(slot - 1);
    }
}

// the merge of the pair (a, c): 1 with its rank and token, or 0
static inline int bpe_merge_find_(const Bpe* b, uint32_t a, uint32_t c, uint32_t* rank, uint32_t* id) {
    if (b->merge_cap == 0) return 0;
    uint64_t key = ((uint64_t)a << 32) | c;
    uint32_t mask = b->merge_cap - 1;
    for (uint32_t h = (uint32_t)bpe_mix_(key) & mask;; h = (h + 1) & mask) {
        if (b->merge_key[h] == UINT64_MAX) return 0;
        if (b->merge_key[h] == key) {
            *rank = b->merge_rank[h];
            *id = b->merge_id[h];
            return 1;
        }
    }
}

// ---------------------------------------------------------------------------------------
// a strict JSON reader (RFC 8259): the document becomes a tree of nodes; strings are decoded
// (escapes, surrogate pairs) into one pool; raw UTF-8 is validated; depth is limited

enum { BPEJ_NULL, BPEJ_FALSE, BPEJ_TRUE, BPEJ_NUM, BPEJ_STR, BPEJ_ARR, BPEJ_OBJ };

typedef struct {
    int type;
    int32_t next;     // the next element or member of the parent, -1
    int32_t child;    // ARR/OBJ: the first element or member, -1
    uint32_t count;   // ARR/OBJ: elements or members
    uint32_t off;     // STR: the decoded text in the pool; NUM: the text in the source
    uint32_t len;     //
    uint32_t key_off; // a member's key in the pool
    uint32_t key_len; //
} BpeNode;

typedef struct {
    const unsigned char* s;
    size_t n, i;
    char* pool; // decoded strings: never longer than the source
    size_t npool;
    BpeNode* nodes;
    int32_t nnodes, cap;
    const char* name;
    char* err;
    size_t errn;
} BpeJson;

static inline int bpej_fail_(BpeJson* J, const char* what) {
    if (J->i >= J->n) what = "unexpected end (truncated file?)";
    snprintf(J->err, J->errn, "tokenizer json %s: invalid JSON at byte %zu: %s", J->name, J->i, what);
    return -1;
}

static inline void bpej_ws_(BpeJson* J) {
    while (J->i < J->n && (J->s[J->i] == ' ' || J->s[J->i] == '\t' || J->s[J->i] == '\n' || J->s[J->i] == '\r')) J->i++;
}

static inline int32_t bpej_node_(BpeJson* J, int type) {
    if (J->nnodes == J->cap) {
        int32_t cap = J->cap ? 2 * J->cap : 1024;
        BpeNode* nn = (BpeNode*)realloc(J->nodes, (size_t)cap * sizeof(BpeNode));
        if (nn == NULL) {
            bpej_fail_(J, "out of memory");
            return -1;
        }
        J->nodes = nn;
        J->cap = cap;
    }
    BpeNode* x = &J->nodes[J->nnodes];
    memset(x, 0, sizeof(*x));
    x->type = type;
    x->next = -1;
    x->child = -1;
    return J->nnodes++;
}

static inline int bpej_hex4_(BpeJson* J, uint32_t* v) {
    *v = 0;
    if (J->n - J->i < 4) return bpej_fail_(J, "a \\u escape needs 4 hex digits");
    for (int k = 0; k < 4; k++) {
        unsigned c = J->s[J->i + k];
        uint32_t d;
        if (c >= '0' && c <= '9')
            d = c - '0';
        else if ((c | 0x20) >= 'a' && (c | 0x20) <= 'f')
            d = (c | 0x20) - 'a' + 10;
        else
            return bpej_fail_(J, "a \\u escape needs 4 hex digits");
        *v = (*v << 4) | d;
    }
    J->i += 4;
    return 0;
}

// A string at J->i (the opening quote) into the pool: its offset and length.
static inline int bpej_string_(BpeJson* J, uint32_t* off, uint32_t* len) {
    J->i++;
    size_t start = J->npool;
    unsigned char* out = (unsigned char*)J->pool;
    for (;;) {
        if (J->i >= J->n) return bpej_fail_(J, "a string without its closing quote");
        unsigned c = J->s[J->i];
        if (c == '"') {
            J->i++;
            break;
        }
        if (c < 0x20) return bpej_fail_(J, "a control character inside a string (write it as an escape)");
        if (c == '\\') {
            if (J->i + 1 >= J->n) return bpej_fail_(J, "a string without its closing quote");
            unsigned e = J->s[J->i + 1];
            J->i += 2;
            static const char from[] = "\"\\/bfnrt";
            static const char to[] = "\"\\/\b\f\n\r\t";
            const char* simple = e != 0 ? strchr(from, (int)e) : NULL;
            if (simple != NULL) {
                out[J->npool++] = (unsigned char)to[simple - from];
                continue;
            }
            if (e != 'u') return bpej_fail_(J, "an unknown escape in a string");
            uint32_t cp;
            if (bpej_hex4_(J, &cp) != 0) return -1;
            if (cp >= 0xDC00 && cp <= 0xDFFF) return bpej_fail_(J, "a lone low surrogate escape");
            if (cp >= 0xD800 && cp <= 0xDBFF) { // a pair: \uD8xx\uDCxx
                uint32_t lo;
                if (J->n - J->i < 2 || J->s[J->i] != '\\' || J->s[J->i + 1] != 'u')
                    return bpej_fail_(J, "a high surrogate escape without its low half");
                J->i += 2;
                if (bpej_hex4_(J, &lo) != 0) return -1;
                if (lo < 0xDC00 || lo > 0xDFFF) return bpej_fail_(J, "a high surrogate escape without its low half");
                cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
            }
            // an escape is 6 or 12 source bytes, its UTF-8 at most 4: the pool cannot overrun
            J->npool += (size_t)bpe_utf8_put(cp, out + J->npool);
            continue;
        }
        uint32_t cp;
        size_t len;
        if (!bpe_utf8_get(J->s, J->n, J->i, &cp, &len)) return bpej_fail_(J, "invalid UTF-8 in a string");
        memcpy(out + J->npool, J->s + J->i, len);
        J->npool += len;
        J->i += len;
    }
    *off = (uint32_t)start;
    *len = (uint32_t)(J->npool - start);
    return 0;
}

static inline int bpej_digits_(BpeJson* J) {
    size_t k = J->i;
    while (J->i < J->n && J->s[J->i] >= '0' && J->s[J->i] <= '9') J->i++;
    return J->i > k;
}

// -?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?
static inline int bpej_number_(BpeJson* J, int32_t node) {
    size_t start = J->i;
    if (J->s[J->i] == '-') J->i++;
    if (J->i < J->n && J->s[J->i] == '0')
        J->i++;
    else if (!bpej_digits_(J))
        return bpej_fail_(J, "a malformed number");
    if (J->i < J->n && J->s[J->i] == '.') {
        J->i++;
        if (!bpej_digits_(J)) return bpej_fail_(J, "a malformed number");
    }
    if (J->i < J->n && (J->s[J->i] == 'e' || J->s[J->i] == 'E')) {
        J->i++;
        if (J->i < J->n && (J->s[J->i] == '+' || J->s[J->i] == '-')) J->i++;
        if (!bpej_digits_(J)) return bpej_fail_(J, "a malformed number");
    }
    J->nodes[node].off = (uint32_t)start;
    J->nodes[node].len = (uint32_t)(J->i - start);
    return 0;
}

static inline int32_t bpej_value_(BpeJson* J, int depth);

// the elements of an array or the members of an object, J->i after the opening bracket
static inline int bpej_container_(BpeJson* J, int32_t node, int depth, int is_obj) {
    char close = is_obj ? '}' : ']';
    int32_t last = -1;
    bpej_ws_(J);
    if (J->i < J->n && J->s[J->i] == close) {
        J->i++;
        return 0;
    }
    for (;;) {
        uint32_t koff = 0;
        uint32_t klen = 0;
        if (is_obj) {
            bpej_ws_(J);
            if (J->i >= J->n || J->s[J->i] != '"') return bpej_fail_(J, "expected a member name in quotes");
            if (bpej_string_(J, &koff, &klen) != 0) return -1;
            bpej_ws_(J);
            if (J->i >= J->n || J->s[J->i] != ':') return bpej_fail_(J, "expected ':' after a member name");
            J->i++;
        }
        int32_t v = bpej_value_(J, depth + 1);
        if (v < 0) return -1;
        J->nodes[v].key_off = koff;
        J->nodes[v].key_len = klen;
        if (last < 0)
            J->nodes[node].child = v;
        else
            J->nodes[last].next = v;
        last = v;
        J->nodes[node].count++;
        bpej_ws_(J);
        if (J->i < J->n && J->s[J->i] == ',') {
            J->i++;
            continue;
        }
        if (J->i < J->n && J->s[J->i] == (unsigned char)close) {
            J->i++;
            return 0;
        }
        return bpej_fail_(J, is_obj ? "expected ',' or '}'" : "expected ',' or ']'");
    }
}

static inline int32_t bpej_value_(BpeJson* J, int depth) {
    if (depth > BPE_MAX_DEPTH) {
        bpej_fail_(J, "nested deeper than 64 levels");
        return -1;
    }
    bpej_ws_(J);
    if (J->i >= J->n) {
        bpej_fail_(J, "unexpected end (truncated file?)");
        return -1;
    }
    unsigned c = J->s[J->i];
    static const char* words[3] = {"null", "false", "true"};
    for (int w = 0; w < 3; w++) {
        size_t len = strlen(words[w]);
        if (c == (unsigned char)words[w][0]) {
            if (J->n - J->i < len || memcmp(J->s + J->i, words[w], len) != 0) {
                bpej_fail_(J, "an unknown word (not null, false or true)");
                return -1;
            }
            J->i += len;
            return bpej_node_(J, BPEJ_NULL + w);
        }
    }
    int32_t node;
    if (c == '"') {
        node = bpej_node_(J, BPEJ_STR);
        uint32_t off;
        uint32_t len;
        if (node < 0 || bpej_string_(J, &off, &len) != 0) return -1;
        J->nodes[node].off = off;
        J->nodes[node].len = len;
        return node;
    }
    if (c == '-' || (c >= '0' && c <= '9')) {
        node = bpej_node_(J, BPEJ_NUM);
        if (node < 0 || bpej_number_(J, node) != 0) return -1;
        return node;
    }
    if (c == '[' || c == '{') {
        node = bpej_node_(J, c == '{' ? BPEJ_OBJ : BPEJ_ARR);
        J->i++;
        if (node < 0 || bpej_container_(J, node, depth, c == '{') != 0) return -1;
        return node;
    }
    bpej_fail_(J, "unexpected character");
    return -1;
}

// ---------------------------------------------------------------------------------------
// reading the tokenizer from the tree

static inline const char* bpej_str_(const BpeJson* J, int32_t v) { return J->pool + J->nodes[v].off; }

static inline int bpej_is_(const BpeJson* J, int32_t v, const char* s) {
    return v >= 0 && J->nodes[v].type == BPEJ_STR && J->nodes[v].len == strlen(s) &&
           memcmp(bpej_str_(J, v), s, J->nodes[v].len) == 0;
}

static inline int bpej_null_(const BpeJson* J, int32_t v) { return v < 0 || J->nodes[v].type == BPEJ_NULL; }

// member `key` of object obj into *out (-1 if absent); -1 (err) if the key is there twice
static inline int bpej_get_(BpeJson* J, int32_t obj, const char* key, const char* where, int32_t* out) {
    *out = -1;
    size_t kl = strlen(key);
    for (int32_t v = J->nodes[obj].child; v >= 0; v = J->nodes[v].next) {
        if (J->nodes[v].key_len != kl || memcmp(J->pool + J->nodes[v].key_off, key, kl) != 0) continue;
        if (*out >= 0) {
            snprintf(J->err, J->errn, "tokenizer json %s: %s has the member \"%s\" twice", J->name,
                     where[0] ? where : "the top level", key);
            return -1;
        }
        *out = v;
    }
    return 0;
}

// a member that must be absent, null, or (with allow) false or "": -1 with a message naming it otherwise
enum { BPEJ_OR_FALSE = 1, BPEJ_OR_EMPTY = 2 };
static inline int bpej_unset_(BpeJson* J, int32_t obj, const char* key, const char* where, int allow) {
    int32_t v;
    if (bpej_get_(J, obj, key, where, &v) != 0) return -1;
    if (bpej_null_(J, v)) return 0;
    if ((allow & BPEJ_OR_FALSE) && J->nodes[v].type == BPEJ_FALSE) return 0;
    if ((allow & BPEJ_OR_EMPTY) && J->nodes[v].type == BPEJ_STR && J->nodes[v].len == 0) return 0;
    snprintf(J->err, J->errn, "tokenizer json %s: %s%s%s is set, which this encoder does not support", J->name, where,
             where[0] ? "." : "", key);
    return -1;
}

// a boolean member: 0/1 into *out, def if absent (def < 0: required)
static inline int bpej_bool_(BpeJson* J, int32_t obj, const char* key, const char* where, int def, int* out) {
    int32_t v;
    if (bpej_get_(J, obj, key, where, &v) != 0) return -1;
    if (v < 0 && def >= 0) {
        *out = def;
        return 0;
    }
    if (v < 0 || (J->nodes[v].type != BPEJ_TRUE && J->nodes[v].type != BPEJ_FALSE)) {
        snprintf(J->err, J->errn, "tokenizer json %s: %s%s%s must be true or false", J->name, where,
                 where[0] ? "." : "", key);
        return -1;
    }
    *out = J->nodes[v].type == BPEJ_TRUE;
    return 0;
}

// a token id: an integer 0..BPE_MAX_IDS-1 written without fraction or exponent
static inline int bpej_id_(const BpeJson* J, int32_t v, uint32_t* out) {
    if (v < 0 || J->nodes[v].type != BPEJ_NUM) return 0;
    const unsigned char* p = J->s + J->nodes[v].off;
    uint32_t n = J->nodes[v].len;
    uint64_t x = 0;
    for (uint32_t k = 0; k < n; k++) {
        if (p[k] < '0' || p[k] > '9') return 0;
        x = 10 * x + (p[k] - '0');
        if (x >= BPE_MAX_IDS) return 0;
    }
    *out = (uint32_t)x;
    return 1;
}

// the type member of a component, for messages ("null" when it is null, "?" when it has none)
static inline void bpej_type_name_(BpeJson* J, int32_t v, char* out, size_t n) {
    int32_t t = -1;
    if (v >= 0 && J->nodes[v].type == BPEJ_OBJ && bpej_get_(J, v, "type", "a component", &t) != 0) t = -1;
    if (bpej_null_(J, v))
        snprintf(out, n, "null");
    else if (t >= 0 && J->nodes[t].type == BPEJ_STR)
        snprintf(out, n, "%.*s", (int)(J->nodes[t].len < 40 ? J->nodes[t].len : 40), bpej_str_(J, t));
    else
        snprintf(out, n, "?");
}

// one line "tokenizer json FILE: what" into err; returns -1
static inline int bpe_fail_(BpeJson* J, const char* fmt, ...) {
    char what[600];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(what, sizeof(what), fmt, ap);
    va_end(ap);
    snprintf(J->err, J->errn, "tokenizer json %s: %s", J->name, what);
    return -1;
}

// a token's text for a message: at most 40 bytes
static inline void bpe_quote_(const char* s, size_t n, char* out, size_t outn) {
    size_t k = 0;
    for (size_t i = 0; i < n && i < 40 && k + 5 < outn; i++) {
        unsigned char c = (unsigned char)s[i];
        if (c >= 0x20 && c < 0x7F)
            out[k++] = (char)c;
        else
            k += (size_t)snprintf(out + k, outn - k, "\\x%02X", c);
    }
    out[k] = '\0';
}

static inline int bpe_vocab_insert_(Bpe* b, uint32_t id) {
    uint32_t mask = b->vocab_cap - 1;
    const BpeStr* v = &b->vocab[id];
    for (uint32_t h = (uint32_t)bpe_hash_(b->pool + v->off, v->len) & mask;; h = (h + 1) & mask) {
        uint32_t slot = b->vocab_slot[h];
        if (slot == 0) {
            b->vocab_slot[h] = id + 1;
            return 0;
        }
        const BpeStr* o = &b->vocab[slot - 1];
        if (o->len == v->len && memcmp(b->pool + o->off, b->pool + v->off, v->len) == 0) return -1;
    }
}

static inline void bpe_merge_insert_(Bpe* b, uint32_t a, uint32_t c, uint32_t rank, uint32_t id) {
    uint64_t key = ((uint64_t)a << 32) | c;
    uint32_t mask = b->merge_cap - 1;
    uint32_t h = (uint32_t)bpe_mix_(key) & mask;
    while (b->merge_key[h] != UINT64_MAX && b->merge_key[h] != key) h = (h + 1) & mask;
    if (b->merge_key[h] == UINT64_MAX) b->nmerges++;
    b->merge_key[h] = key; // a pair listed again takes the later rank (tokenizers builds a map)
    b->merge_rank[h] = rank;
    b->merge_id[h] = id;
}

static inline uint32_t bpe_pow2_(uint64_t n) {
    uint32_t c = 16;
    while (c < 2 * n) c *= 2;
    return c;
}

// model.vocab: every string to its id; the ids must be 0..n-1 (the llm.c .bin has one entry per id)
static inline int bpe_read_vocab_(Bpe* b, BpeJson* J, int32_t vocab) {
    if (vocab < 0 || J->nodes[vocab].type != BPEJ_OBJ)
        return bpe_fail_(J, "model.vocab must be an object of token: id");
    uint32_t n = J->nodes[vocab].count;
    if (n > BPE_MAX_IDS) return bpe_fail_(J, "model.vocab has more than 2^24 tokens");
    b->nvocab = n;
    b->vocab = (BpeStr*)calloc(n ? n : 1, sizeof(BpeStr));
    uint8_t* seen = (uint8_t*)calloc(n ? n : 1, 1);
    b->vocab_cap = bpe_pow2_(n);
    b->vocab_slot = (uint32_t*)calloc(b->vocab_cap, sizeof(uint32_t));
    if (b->vocab == NULL || seen == NULL || b->vocab_slot == NULL) {
        free(seen);
        return bpe_fail_(J, "out of memory for model.vocab");
    }
    for (int32_t v = J->nodes[vocab].child; v >= 0; v = J->nodes[v].next) {
        uint32_t id;
        if (!bpej_id_(J, v, &id) || id >= n || seen[id]) {
            char q[200];
            bpe_quote_(J->pool + J->nodes[v].key_off, J->nodes[v].key_len, q, sizeof(q));
            free(seen);
            return bpe_fail_(J, "model.vocab: the id of \"%s\" is not a whole number in 0..size-1 used once", q);
        }
        seen[id] = 1;
        b->vocab[id].off = J->nodes[v].key_off;
        b->vocab[id].len = J->nodes[v].key_len;
    }
    free(seen); // n distinct ids below n: every id 0..n-1 is there
    for (uint32_t id = 0; id < n; id++) {
        if (bpe_vocab_insert_(b, id) != 0) {
            char q[200];
            bpe_quote_(b->pool + b->vocab[id].off, b->vocab[id].len, q, sizeof(q));
            return bpe_fail_(J, "model.vocab lists \"%s\" twice", q);
        }
    }
    for (unsigned c = 0; c < 256; c++) {
        unsigned char u[4];
        int len = bpe_utf8_put(bpe_byte_char(c), u);
        int64_t id = bpe_vocab_find_(b, (const char*)u, (size_t)len);
        b->byte_id[c] = (int32_t)id; // a byte without a token is dropped, as tokenizers drops it (no unk_token)
    }
    return 0;
}

// model.merges: "a b" strings (the older format) or ["a", "b"] pairs; the rank is the position
static inline int bpe_read_merges_(Bpe* b, BpeJson* J, int32_t merges) {
    if (merges < 0 || J->nodes[merges].type != BPEJ_ARR) return bpe_fail_(J, "model.merges must be an array");
    uint32_t n = J->nodes[merges].count;
    if (n > 4 * BPE_MAX_IDS) return bpe_fail_(J, "model.merges has more than 2^26 merges");
    b->merge_cap = bpe_pow2_(n);
    b->merge_key = (uint64_t*)malloc((size_t)b->merge_cap * sizeof(uint64_t));
    b->merge_rank = (uint32_t*)malloc((size_t)b->merge_cap * sizeof(uint32_t));
    b->merge_id = (uint32_t*)malloc((size_t)b->merge_cap * sizeof(uint32_t));
    char* both = (char*)malloc(J->npool + 1); // a + b: never longer than the pool
    if (b->merge_key == NULL || b->merge_rank == NULL || b->merge_id == NULL || both == NULL) {
        free(both);
        return bpe_fail_(J, "out of memory for model.merges");
    }
    memset(b->merge_key, 0xFF, (size_t)b->merge_cap * sizeof(uint64_t));
    int first = n > 0 ? J->nodes[J->nodes[merges].child].type : BPEJ_STR;
    uint32_t rank = 0;
    uint32_t pos = 0;
    for (int32_t v = J->nodes[merges].child; v >= 0; v = J->nodes[v].next, pos++) {
        const char* a = NULL;
        const char* c = NULL;
        size_t an = 0;
        size_t cn = 0;
        int32_t x = J->nodes[v].child;
        int32_t y = x >= 0 ? J->nodes[x].next : -1;
        if (J->nodes[v].type != first) {
            free(both);
            return bpe_fail_(J, "model.merges mixes \"a b\" strings and [\"a\", \"b\"] pairs (at [%u])", pos);
        }
        if (first == BPEJ_STR) {
            a = bpej_str_(J, v);
            size_t len = J->nodes[v].len;
            if (len >= 8 && memcmp(a, "#version", 8) == 0) continue; // a merges.txt header: not a merge
            const char* sp = (const char*)memchr(a, ' ', len);
            if (sp == NULL || memchr(sp + 1, ' ', len - (size_t)(sp + 1 - a)) != NULL) {
                free(both);
                return bpe_fail_(J, "model.merges[%u] is not two tokens split by one space", pos);
            }
            an = (size_t)(sp - a);
            c = sp + 1;
            cn = len - an - 1;
        } else if (first == BPEJ_ARR && J->nodes[v].count == 2 && J->nodes[x].type == BPEJ_STR &&
                   J->nodes[y].type == BPEJ_STR) {
            a = bpej_str_(J, x);
            an = J->nodes[x].len;
            c = bpej_str_(J, y);
            cn = J->nodes[y].len;
        } else {
            free(both);
            return bpe_fail_(J, "model.merges[%u] is neither \"a b\" nor [\"a\", \"b\"]", pos);
        }
        memcpy(both, a, an);
        memcpy(both + an, c, cn);
        int64_t ia = bpe_vocab_find_(b, a, an);
        int64_t ic = bpe_vocab_find_(b, c, cn);
        int64_t iboth = bpe_vocab_find_(b, both, an + cn);
        if (ia < 0 || ic < 0 || iboth < 0) {
            char q[200];
            bpe_quote_(ia < 0 ? a : ic < 0 ? c : both, ia < 0 ? an : ic < 0 ? cn : an + cn, q, sizeof(q));
            free(both);
            return bpe_fail_(J, "model.merges[%u] uses \"%s\", which is not in model.vocab", pos, q);
        }
        bpe_merge_insert_(b, (uint32_t)ia, (uint32_t)ic, rank, (uint32_t)iboth);
        rank++;
    }
    free(both);
    return 0;
}

// added_tokens: each keeps the id tokenizers gives it when it loads the file (the vocab's id of
// the same text, else the next id after the vocab and the added tokens before it); a json whose
// ids say otherwise is refused, since its .bin and its shards were written with those ids
static inline int bpe_read_added_(Bpe* b, BpeJson* J, int32_t arr) {
    b->size = b->nvocab;
    if (bpej_null_(J, arr)) return 0;
    if (J->nodes[arr].type != BPEJ_ARR) return bpe_fail_(J, "added_tokens must be an array");
    b->added = (BpeAdded*)calloc(J->nodes[arr].count + 1, sizeof(BpeAdded));
    if (b->added == NULL) return bpe_fail_(J, "out of memory for added_tokens");
    int64_t max_added = -1;
    for (int32_t t = J->nodes[arr].child; t >= 0; t = J->nodes[t].next) {
        const char* where = "added_tokens[]";
        if (J->nodes[t].type != BPEJ_OBJ) return bpe_fail_(J, "added_tokens holds something not an object");
        int32_t content;
        int32_t idv;
        uint32_t id;
        int normalized;
        if (bpej_get_(J, t, "content", where, &content) != 0 || bpej_get_(J, t, "id", where, &idv) != 0) return -1;
        if (content < 0 || J->nodes[content].type != BPEJ_STR || J->nodes[content].len == 0)
            return bpe_fail_(J, "an added token has no content (a non-empty string)");
        char q[200];
        bpe_quote_(bpej_str_(J, content), J->nodes[content].len, q, sizeof(q));
        if (!bpej_id_(J, idv, &id)) return bpe_fail_(J, "added token \"%s\" has no id (a whole number)", q);
        if (bpej_bool_(J, t, "normalized", where, -1, &normalized) != 0) return -1;
        if (bpej_unset_(J, t, "single_word", where, BPEJ_OR_FALSE) != 0 ||
            bpej_unset_(J, t, "lstrip", where, BPEJ_OR_FALSE) != 0 ||
            bpej_unset_(J, t, "rstrip", where, BPEJ_OR_FALSE) != 0)
            return -1;
        const char* text = bpej_str_(J, content);
        uint32_t len = J->nodes[content].len;
        for (uint32_t k = 0; k < b->nadded; k++)
            if (b->added[k].s.len == len && memcmp(b->pool + b->added[k].s.off, text, len) == 0)
                return bpe_fail_(J, "added token \"%s\" is listed twice", q);
        int64_t want = bpe_vocab_find_(b, text, len);
        if (want < 0) want = max_added >= (int64_t)b->nvocab || b->nvocab == 0 ? max_added + 1 : (int64_t)b->nvocab;
        if ((int64_t)id != want) {
            char ids[64];
            snprintf(ids, sizeof(ids), "%u, but tokenizers gives it %lld", id, (long long)want);
            return bpe_fail_(J, "added token \"%s\" has id %s", q, ids);
        }
        if (want >= (int64_t)b->nvocab && want > max_added) max_added = want;
        BpeAdded* a = &b->added[b->nadded++];
        a->s.off = J->nodes[content].off;
        a->s.len = len;
        a->id = id;
        a->normalized = normalized;
        if (id + 1 > b->size) b->size = id + 1;
    }
    if (b->size > BPE_MAX_IDS) return bpe_fail_(J, "more than 2^24 token ids");
    return 0;
}

// every top-level part: what this encoder implements, or a one-line refusal
static inline int bpe_read_(Bpe* b, BpeJson* J, int32_t root) {
    char t[64];
    int32_t v;
    if (J->nodes[root].type != BPEJ_OBJ) return bpe_fail_(J, "not a JSON object");
    if (bpej_get_(J, root, "version", "", &v) != 0) return -1;
    if (v >= 0 && !bpej_is_(J, v, "1.0")) return bpe_fail_(J, "version is not \"1.0\"");
    if (bpej_unset_(J, root, "truncation", "", 0) != 0 || bpej_unset_(J, root, "padding", "", 0) != 0) return -1;
    if (bpej_get_(J, root, "normalizer", "", &v) != 0) return -1;
    if (!bpej_null_(J, v)) {
        bpej_type_name_(J, v, t, sizeof(t));
        return bpe_fail_(J, "normalizer %s is not supported (only null)", t);
    }
    if (bpej_get_(J, root, "pre_tokenizer", "", &v) != 0) return -1;
    bpej_type_name_(J, v, t, sizeof(t));
    if (strcmp(t, "ByteLevel") != 0) return bpe_fail_(J, "pre_tokenizer %s is not supported (only ByteLevel)", t);
    int use_regex;
    int trim;
    if (bpej_bool_(J, v, "add_prefix_space", "pre_tokenizer", -1, &b->add_prefix_space) != 0 ||
        bpej_bool_(J, v, "trim_offsets", "pre_tokenizer", -1, &trim) != 0 ||
        bpej_bool_(J, v, "use_regex", "pre_tokenizer", 1, &use_regex) != 0)
        return -1;
    if (!use_regex) return bpe_fail_(J, "pre_tokenizer.use_regex is false (only GPT-2's regex is supported)");
    // a ByteLevel post-processor only trims offsets; the others (templates, BERT) add tokens
    if (bpej_get_(J, root, "post_processor", "", &v) != 0) return -1;
    bpej_type_name_(J, v, t, sizeof(t));
    if (strcmp(t, "null") != 0 && strcmp(t, "ByteLevel") != 0)
        return bpe_fail_(J, "post_processor %s is not supported (only null or ByteLevel)", t);
    int32_t model;
    if (bpej_get_(J, root, "model", "", &model) != 0) return -1;
    bpej_type_name_(J, model, t, sizeof(t));
    if (strcmp(t, "BPE") != 0) return bpe_fail_(J, "model type %s is not supported (only BPE)", t);
    // GPT-2's own tokenizer.json has "" for the prefix and the suffix: nothing to add, as null
    if (bpej_unset_(J, model, "dropout", "model", 0) != 0 || bpej_unset_(J, model, "unk_token", "model", 0) != 0 ||
        bpej_unset_(J, model, "continuing_subword_prefix", "model", BPEJ_OR_EMPTY) != 0 ||
        bpej_unset_(J, model, "end_of_word_suffix", "model", BPEJ_OR_EMPTY) != 0 ||
        bpej_unset_(J, model, "byte_fallback", "model", BPEJ_OR_FALSE) != 0)
        return -1;
    if (bpej_bool_(J, model, "ignore_merges", "model", 0, &b->ignore_merges) != 0) return -1;
    int32_t vocab;
    int32_t merges;
    int32_t added;
    if (bpej_get_(J, model, "vocab", "model", &vocab) != 0 || bpej_get_(J, model, "merges", "model", &merges) != 0 ||
        bpej_get_(J, root, "added_tokens", "", &added) != 0)
        return -1;
    if (bpe_read_vocab_(b, J, vocab) != 0 || bpe_read_merges_(b, J, merges) != 0 || bpe_read_added_(b, J, added) != 0)
        return -1;
    return 0;
}

// Frees what a load allocated; safe on a zeroed or failed Bpe and safe to call twice.
static inline void bpe_free(Bpe* b) {
    if (b == NULL) return;
    free(b->pool);
    free(b->vocab);
    free(b->vocab_slot);
    free(b->merge_key);
    free(b->merge_rank);
    free(b->merge_id);
    free(b->added);
    memset(b, 0, sizeof(*b));
}

// Loads a tokenizer from the n bytes of json (name for messages). 0, or -1 with one line in err
// and *b zeroed.
static inline int bpe_load_mem(Bpe* b, const char* json, size_t n, const char* name, char* err, size_t errn) {
    memset(b, 0, sizeof(*b));
    BpeJson J;
    memset(&J, 0, sizeof(J));
    J.s = (const unsigned char*)json;
    J.n = n;
    J.name = name;
    J.err = err;
    J.errn = errn;
    if (n > BPE_MAX_FILE) {
        snprintf(err, errn, "tokenizer json %s: larger than %u MiB", name, BPE_MAX_FILE >> 20);
        return -1;
    }
    J.pool = (char*)malloc(n + 1);
    if (J.pool == NULL) {
        snprintf(err, errn, "tokenizer json %s: out of memory", name);
        return -1;
    }
    int32_t root = bpej_value_(&J, 0);
    int rc = root < 0 ? -1 : 0;
    if (rc == 0) {
        bpej_ws_(&J);
        if (J.i != J.n) rc = bpej_fail_(&J, "more after the end of the document");
    }
    b->pool = J.pool; // the tokens' texts stay in it
    if (rc == 0) rc = bpe_read_(b, &J, root);
    free(J.nodes);
    if (rc != 0) {
        bpe_free(b);
        return -1;
    }
    b->init_ok = 1;
    return 0;
}

// Loads a tokenizer.json file; a FIFO, directory or device is refused (safeio.h).
static inline int bpe_load(Bpe* b, const char* path, char* err, size_t errn) {
    memset(b, 0, sizeof(*b));
    size_t n = 0;
    char* buf = safeio_read_all(path, "tokenizer json", BPE_MAX_FILE, &n, err, errn);
    if (buf == NULL) return -1;
    int rc = bpe_load_mem(b, buf, n, path, err, errn);
    free(buf);
    return rc;
}

// FILE.bin -> FILE.json, the pair dev/data/prepare.py writes (a name without an extension gets
// .json appended). 0, or -1 when it does not fit in n bytes.
static inline int bpe_json_path(const char* bin, char* out, size_t n) {
    const char* slash = strrchr(bin, '/');
    const char* base = slash ? slash + 1 : bin;
    const char* dot = strrchr(base, '.');
    size_t keep = dot != NULL && dot != base ? (size_t)(dot - bin) : strlen(bin);
    if (keep + 6 > n) return -1;
    memcpy(out, bin, keep);
    memcpy(out + keep, ".json", 6);
    return 0;
}

// ---------------------------------------------------------------------------------------
// encoding

typedef struct {
    size_t start, end;
    int64_t id; // an added token's id, or -1 for text
} BpeSeg;

typedef struct {
    int* ids;
    long cap, n;
} BpeOut;

static inline void bpe_emit_(BpeOut* o, uint32_t id) {
    if (o->n < o->cap) o->ids[o->n] = (int)id;
    o->n++;
}

// One regex piece: its bytes as tokens, merged by rank. sym has room for n ids, map for 2n bytes.
static inline void bpe_word_(const Bpe* b, const unsigned char* p, size_t n, uint32_t* sym, char* map, BpeOut* o) {
    if (b->ignore_merges) { // a piece that is a token as a whole is that token
        size_t m = 0;
        for (size_t k = 0; k < n; k++) m += (size_t)bpe_utf8_put(bpe_byte_char(p[k]), (unsigned char*)map + m);
        int64_t id = bpe_vocab_find_(b, map, m);
        if (id >= 0) {
            bpe_emit_(o, (uint32_t)id);
            return;
        }
    }
    size_t m = 0;
    for (size_t k = 0; k < n; k++)
        if (b->byte_id[p[k]] >= 0) sym[m++] = (uint32_t)b->byte_id[p[k]];
    while (m > 1) {
        size_t best = m;
        uint32_t best_rank = UINT32_MAX;
        uint32_t best_id = 0;
        for (size_t k = 0; k + 1 < m; k++) {
            uint32_t rank;
            uint32_t id;
            if (bpe_merge_find_(b, sym[k], sym[k + 1], &rank, &id) && rank < best_rank) {
                best = k;
                best_rank = rank;
                best_id = id;
            }
        }
        if (best == m) break;
        sym[best] = best_id;
        memmove(sym + best + 1, sym + best + 2, (m - best - 2) * sizeof(uint32_t));
        m--;
    }
    for (size_t k = 0; k < m; k++) bpe_emit_(o, sym[k]);
}

// Cuts the added tokens of one pass (normalized 0 or 1) out of the text segments in[0..nin),
// leftmost-longest, into out (room for every split). Returns the new count.
static inline size_t bpe_split_added_(const Bpe* b, const unsigned char* s, const BpeSeg* in, size_t nin,
                                      int normalized, BpeSeg* out) {
    size_t nout = 0;
    for (size_t k = 0; k < nin; k++) {
        if (in[k].id >= 0) {
            out[nout++] = in[k];
            continue;
        }
        size_t start = in[k].start;
        size_t pos = start;
        size_t end = in[k].end;
        while (pos < end) {
            int64_t hit = -1;
            uint32_t hit_len = 0;
            for (uint32_t a = 0; a < b->nadded; a++) {
                const BpeAdded* t = &b->added[a];
                if (t->normalized != normalized || t->s.len <= hit_len || t->s.len > end - pos) continue;
                if (memcmp(s + pos, b->pool + t->s.off, t->s.len) == 0) {
                    hit = t->id;
                    hit_len = t->s.len;
                }
            }
            if (hit < 0) {
                pos++;
                continue;
            }
            if (pos > start) {
                BpeSeg g = {start, pos, -1};
                out[nout++] = g;
            }
            BpeSeg h = {pos, pos + hit_len, hit};
            out[nout++] = h;
            pos += hit_len;
            start = pos;
        }
        if (start < end) {
            BpeSeg g = {start, end, -1};
            out[nout++] = g;
        }
    }
    return nout;
}

// Encodes the n bytes of text (UTF-8). Returns the number of ids, of which the first cap are
// written to ids (call with cap 0 to count), or -1 with one line in err.
static inline long bpe_encode(const Bpe* b, const char* text, size_t n, int* ids, long cap, char* err, size_t errn) {
    const unsigned char* s = (const unsigned char*)text;
    if (b == NULL || !b->init_ok) {
        snprintf(err, errn, "no tokenizer loaded");
        return -1;
    }
    for (size_t i = 0; i < n;) {
        uint32_t cp;
        size_t len;
        if (!bpe_utf8_get(s, n, i, &cp, &len)) {
            snprintf(err, errn, "the text is not valid UTF-8 (byte %zu of %zu is 0x%02X)", i, n, s[i]);
            return -1;
        }
        i += len;
    }
    // every split at most doubles the segments plus one: 2n + 1 bounds each pass
    size_t room = 2 * n + 2;
    BpeSeg* seg = (BpeSeg*)malloc(room * sizeof(BpeSeg));
    BpeSeg* seg2 = (BpeSeg*)malloc(room * sizeof(BpeSeg));
    uint32_t* sym = (uint32_t*)malloc((n + 1) * sizeof(uint32_t));
    unsigned char* piece = (unsigned char*)malloc(n + 1);
    char* map = (char*)malloc(2 * n + 2);
    if (seg == NULL || seg2 == NULL || sym == NULL || piece == NULL || map == NULL) {
        free(seg);
        free(seg2);
        free(sym);
        free(piece);
        free(map);
        snprintf(err, errn, "out of memory encoding %zu bytes", n);
        return -1;
    }
    size_t nseg = 0;
    if (n > 0) {
        BpeSeg all = {0, n, -1};
        seg[nseg++] = all;
    }
    nseg = bpe_split_added_(b, s, seg, nseg, 0, seg2);
    nseg = bpe_split_added_(b, s, seg2, nseg, 1, seg);
    BpeOut o = {ids, cap, 0};
    for (size_t k = 0; k < nseg; k++) {
        if (seg[k].id >= 0) {
            bpe_emit_(&o, (uint32_t)seg[k].id);
            continue;
        }
        const unsigned char* t = s + seg[k].start;
        size_t m = seg[k].end - seg[k].start;
        if (b->add_prefix_space && t[0] != ' ') { // the piece as if it began with a space
            piece[0] = ' ';
            memcpy(piece + 1, t, m);
            t = piece;
            m++;
        }
        for (size_t i = 0; i < m;) {
            size_t e = bpe_regex_end_(t, m, i);
            bpe_word_(b, t + i, e - i, sym, map, &o);
            i = e;
        }
    }
    free(seg);
    free(seg2);
    free(sym);
    free(piece);
    free(map);
    return o.n;
}

// ---------------------------------------------------------------------------------------
// the json against the llm.c decoder file

// The bytes token id decodes to, as prepare.py writes them into the .bin: a vocab token made of
// the 256 byte characters as those bytes, any other token as its UTF-8 text. Returns the length
// (out has room for the text's length).
static inline size_t bpe_token_bytes_(const Bpe* b, uint32_t id, unsigned char* out) {
    const BpeStr* t = NULL;
    if (id < b->nvocab) t = &b->vocab[id];
    for (uint32_t a = 0; t == NULL && a < b->nadded; a++)
        if (b->added[a].id == id) t = &b->added[a].s;
    if (t == NULL) return 0;
    const unsigned char* s = (const unsigned char*)b->pool + t->off;
    size_t m = 0;
    int mapped = id < b->nvocab;
    for (size_t i = 0; mapped && i < t->len;) {
        uint32_t cp;
        size_t len;
        int byte = bpe_utf8_get(s, t->len, i, &cp, &len) ? bpe_char_byte(cp) : -1;
        if (byte < 0) {
            mapped = 0;
            break;
        }
        out[m++] = (unsigned char)byte;
        i += len;
    }
    if (mapped) return m;
    memcpy(out, s, t->len);
    return t->len;
}

// The id of <|endoftext|> (an added token first, as tokenizers looks it up), or -1.
static inline int64_t bpe_eot(const Bpe* b) {
    size_t n = strlen(BPE_EOT);
    for (uint32_t a = 0; a < b->nadded; a++)
        if (b->added[a].s.len == n && memcmp(b->pool + b->added[a].s.off, BPE_EOT, n) == 0) return b->added[a].id;
    return bpe_vocab_find_(b, BPE_EOT, n);
}

// The llm.c decoder file t (named bin) and this tokenizer must be one pair: the same number of
// ids, the same <|endoftext|>, the same bytes for every id. 0, or -1 with one line in err.
static inline int bpe_check_decoder(const Bpe* b, const Tokenizer* t, const char* bin, char* err, size_t errn) {
    if (!b->init_ok || !t->init_ok) {
        snprintf(err, errn, "no tokenizer loaded");
        return -1;
    }
    if (t->vocab_size != b->size) {
        snprintf(err, errn, "%s has %u tokens but its tokenizer json has %u: not a pair", bin, t->vocab_size, b->size);
        return -1;
    }
    int64_t eot = bpe_eot(b);
    if (eot != (int64_t)t->eot_token) {
        snprintf(err, errn, "%s ends text with token %u but its tokenizer json %s: not a pair", bin, t->eot_token,
                 eot < 0 ? "has no <|endoftext|>" : "gives <|endoftext|> another id");
        return -1;
    }
    size_t longest = 0;
    for (uint32_t id = 0; id < b->nvocab; id++)
        if (b->vocab[id].len > longest) longest = b->vocab[id].len;
    for (uint32_t a = 0; a < b->nadded; a++)
        if (b->added[a].s.len > longest) longest = b->added[a].s.len;
    unsigned char* buf = (unsigned char*)malloc(longest + 1);
    if (buf == NULL) {
        snprintf(err, errn, "out of memory comparing %s with its tokenizer json", bin);
        return -1;
    }
    for (uint32_t id = 0; id < b->size; id++) {
        size_t n = bpe_token_bytes_(b, id, buf);
        if (n != tokenizer_token_len(t, id) || memcmp(buf, tokenizer_decode(t, id), n) != 0) {
            snprintf(err, errn, "%s and its tokenizer json disagree on token %u: not a pair", bin, id);
            free(buf);
            return -1;
        }
    }
    free(buf);
    return 0;
}

#endif // LLMC_BPE_H
