// fuzz_tokenizer.c: libFuzzer harness for the tokenizer file parser (llmc/host/tokenizer.h):
// arbitrary bytes through fmemopen, then every id decoded and written safely.
#include "../../llmc/host/tokenizer.h"

int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    if (size == 0) return 0;
    FILE* f = fmemopen((void*)data, size, "rb");
    if (f == NULL) return 0;
    Tokenizer t;
    char err[1400];
    if (tokenizer_init_stream(&t, f, "fuzz.bin", err, sizeof(err)) != 0) {
        if (t.init_ok || t.token_table != NULL) __builtin_trap(); // a failed load leaves *t zeroed
        return 0;
    }
    FILE* out = fopen("/dev/null", "wb");
    for (uint32_t id = 0; id <= t.vocab_size; id++) { // one past the end must be refused
        const char* p = tokenizer_decode(&t, id);
        if (id == t.vocab_size && p != NULL) __builtin_trap();
        if (out != NULL) tokenizer_print_token(out, &t, id);
    }
    if (out != NULL) fclose(out);
    tokenizer_free(&t);
    tokenizer_free(&t); // safe twice
    return 0;
}
