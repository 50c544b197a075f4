// fuzz_blend.c: libFuzzer harness for the blend readers (llmc/host/blend.h, json.h): arbitrary
// bytes as a -blend file's text ("train" and "valid" lists) and as the -i text. A spec that
// loads must be one the order can use (1..BLEND_MAX datasets, positive weights summing to 1,
// names and paths non-empty and terminated), and the order's picks must add up (ASan checks
// the JSON reader's memory, UBSan its arithmetic).
#include <math.h>
#include "../../llmc/host/blend.h"

static void check_spec(const BlendSpec* b) {
    if (b->n < 1 || b->n > BLEND_MAX) __builtin_trap();
    double sum = 0;
    for (int d = 0; d < b->n; d++) {
        if (!(b->weight[d] > 0) || !isfinite(b->weight[d])) __builtin_trap();
        if (strnlen(b->name[d], BLEND_NAME) == BLEND_NAME || b->name[d][0] == '\0') __builtin_trap();
        if (strnlen(b->path[d], BLEND_PATH) == BLEND_PATH || b->path[d][0] == '\0') __builtin_trap();
        sum += b->weight[d];
    }
    if (fabs(sum - 1.0) > 1e-9) __builtin_trap();
    BlendOrder o;
    blend_order_init(&o, b);
    int64_t seen[BLEND_MAX] = {0};
    for (int64_t s = 0; s < 300; s++) {
        int64_t j = -1;
        int d = blend_locate(&o, s, &j);
        if (d < 0 || d >= b->n || j != seen[d]) __builtin_trap(); // the n-th pick of d is its sample n
        seen[d]++;
    }
    blend_order_free(&o);
}

int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    static BlendSpec b; // 37 KB: not on the fuzzer's stack
    char err[1400];
    for (int k = 0; k < 2; k++)
        if (blend_parse_text((const char*)data, size, "fuzz.json", k ? "valid" : "train", &b, err, sizeof(err)) > 0)
            check_spec(&b);
    char text[4096];
    size_t n = size < sizeof(text) - 1 ? size : sizeof(text) - 1;
    memcpy(text, data, n);
    text[n] = '\0';
    if (blend_parse_arg(text, &b, err, sizeof(err)) == 0) check_spec(&b);
    return 0;
}
