// fuzz_bpe.c: libFuzzer harness for the tokenizer.json reader and the encoder (llmc/host/bpe.h).
// An even first byte: the input is a tokenizer.json, then a 0x00 byte, then a text to encode with
// it (a load that fails must leave the Bpe zeroed). An odd first byte: the rest is a text for a
// small built-in tokenizer (bit 1: add_prefix_space, bit 2: ignore_merges). Every id must lie below
// the tokenizer's size, counting (cap 0) must give the same number, and where the tokens' bytes
// must spell the text again (byte-level BPE loses nothing) they must.
#include "../../llmc/host/bpe.h"

// the 256 byte characters, a few merges of them and <|endoftext|>, written as a tokenizer.json
static char* builtin_json(int prefix, int ignore) {
    static const char* merges[][2] = {{"t", "h"},         {"th", "e"},  {"\\u0120", "t"},       {"\\u0120t", "h"},
                                      {"\\u0120th", "e"}, {"i", "n"},   {"\\u0120", "\\u0120"}, {"\\u010a", "\\u010a"},
                                      {"a", "b"},         {"ab", "ab"}, {"\\u00c3", "\\u00a9"}, {"'", "s"},
                                      {"1", "2"}};
    static const char* results[] = {
        "th", "the",  "\\u0120t",       "\\u0120th", "\\u0120the", "in", "\\u0120\\u0120", "\\u010a\\u010a",
        "ab", "abab", "\\u00c3\\u00a9", "'s",        "12"};
    int nm = (int)(sizeof(results) / sizeof(results[0]));
    size_t cap = 1 << 16;
    char* s = (char*)malloc(cap);
    size_t k = 0;
    k += (size_t)snprintf(s + k, cap - k,
                          "{\"version\":\"1.0\",\"truncation\":null,\"padding\":null,\"added_tokens\":[{\"id\":%d,"
                          "\"content\":\"<|endoftext|>\",\"single_word\":false,\"lstrip\":false,\"rstrip\":false,"
                          "\"normalized\":false,\"special\":true}],\"normalizer\":null,\"pre_tokenizer\":{\"type\":"
                          "\"ByteLevel\",\"add_prefix_space\":%s,\"trim_offsets\":true,\"use_regex\":true},"
                          "\"post_processor\":null,\"decoder\":null,\"model\":{\"type\":\"BPE\",\"dropout\":null,"
                          "\"ignore_merges\":%s,\"vocab\":{",
                          256 + nm, prefix ? "true" : "false", ignore ? "true" : "false");
    for (int b = 0; b < 256; b++) k += (size_t)snprintf(s + k, cap - k, "\"\\u%04x\":%d,", bpe_byte_char(b), b);
    for (int m = 0; m < nm; m++)
        k += (size_t)snprintf(s + k, cap - k, "\"%s\":%d%s", results[m], 256 + m, m + 1 < nm ? "," : "");
    k += (size_t)snprintf(s + k, cap - k, "},\"merges\":[");
    for (int m = 0; m < nm; m++)
        k += (size_t)snprintf(s + k, cap - k, "[\"%s\",\"%s\"]%s", merges[m][0], merges[m][1], m + 1 < nm ? "," : "");
    snprintf(s + k, cap - k, "]}}");
    return s;
}

// the ids' bytes must be the text's (for a tokenizer whose added tokens are not in its vocab)
static void check_roundtrip(const Bpe* b, const int* ids, long n, const uint8_t* text, size_t len) {
    unsigned char piece[256];
    size_t at = 0;
    for (long i = 0; i < n; i++) {
        size_t m = bpe_token_bytes_(b, (uint32_t)ids[i], piece);
        if (at + m > len || memcmp(text + at, piece, m) != 0) __builtin_trap();
        at += m;
    }
    if (at != len) __builtin_trap();
}

static void encode_checked(const Bpe* b, const uint8_t* text, size_t len, int roundtrip) {
    char err[512];
    int* ids = (int*)malloc((len + 1) * sizeof(int)); // at most one token per byte
    long n = bpe_encode(b, (const char*)text, len, ids, (long)len + 1, err, sizeof(err));
    long count = bpe_encode(b, (const char*)text, len, NULL, 0, err, sizeof(err));
    if (n != count || n > (long)len + 1) __builtin_trap();
    for (long i = 0; i < n; i++)
        if (ids[i] < 0 || (uint32_t)ids[i] >= b->size) __builtin_trap();
    if (n >= 0 && roundtrip) check_roundtrip(b, ids, n, text, len);
    free(ids);
}

int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    static Bpe builtin[4];
    char err[1400];
    if (size == 0) return 0;
    if (data[0] & 1) {
        int v = (data[0] >> 1) & 3;
        if (!builtin[v].init_ok) {
            char* js = builtin_json(v & 1, v >> 1);
            if (bpe_load_mem(&builtin[v], js, strlen(js), "builtin", err, sizeof(err)) != 0) {
                fprintf(stderr, "fuzz_bpe: the built-in tokenizer does not load: %s\n", err);
                __builtin_trap();
            }
            free(js);
        }
        encode_checked(&builtin[v], data + 1, size - 1, !(v & 1));
        return 0;
    }
    const uint8_t* nul = (const uint8_t*)memchr(data + 1, 0, size - 1);
    size_t json_len = nul ? (size_t)(nul - data - 1) : size - 1;
    Bpe b;
    if (bpe_load_mem(&b, (const char*)data + 1, json_len, "fuzz.json", err, sizeof(err)) != 0) {
        if (b.init_ok || b.pool != NULL || b.vocab != NULL || b.merge_key != NULL) __builtin_trap();
        return 0;
    }
    if (nul != NULL) encode_checked(&b, nul + 1, size - (size_t)(nul + 1 - data), 0);
    bpe_free(&b);
    bpe_free(&b); // safe twice
    return 0;
}
