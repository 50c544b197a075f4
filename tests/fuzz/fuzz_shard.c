// fuzz_shard.c: libFuzzer harness for the token-shard header check and the poison scan
// (llmc/host/dataloader.h). The input is a whole shard file: header, then uint16 tokens.
#include "../../llmc/host/dataloader.h"

int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    int32_t h[256];
    memset(h, 0, sizeof(h));
    memcpy(h, data, size < sizeof(h) ? size : sizeof(h));
    char err[1400];
    int64_t n = shard_parse_header(h, (int64_t)size, "fuzz.bin", err, sizeof(err));
    if (n < 0) return 0;
    // a header that passed must describe exactly the bytes present
    if ((size_t)(SHARD_HEADER_BYTES + 2 * n) != size) __builtin_trap();
    size_t nt = (size - SHARD_HEADER_BYTES) / 2;
    uint16_t* tok = (uint16_t*)malloc(nt * sizeof(uint16_t) + 1);
    memcpy(tok, data + SHARD_HEADER_BYTES, nt * sizeof(uint16_t));
    int V = 1 + (h[3] & 0xFFFF); // any vocabulary 1..65536, chosen by the input
    int64_t bad = shard_scan_tokens(tok, (int64_t)nt, V);
    // the scan must agree with a plain search
    int64_t want = -1;
    for (size_t i = 0; i < nt; i++)
        if ((int)tok[i] >= V) {
            want = (int64_t)i;
            break;
        }
    if (bad != want) __builtin_trap();
    free(tok);
    return 0;
}
