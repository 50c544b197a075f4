// fuzz_cloze.c: libFuzzer harness for the cloze file reader (llmc/host/eval.h): arbitrary
// bytes through fmemopen at V = 64, T = 16; a loaded set must hold only what the scorer may
// read (ids below V, 1 <= n_target <= T with a context id before the targets), and packing
// every item into a row of T positions must stay inside it (ASan checks).
#include "../../llmc/host/eval.h"

int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    enum { V = 64, T = 16 };
    if (size == 0) return 0;
    FILE* f = fmemopen((void*)data, size, "rb");
    if (f == NULL) return 0;
    ClozeSet s;
    char err[1400];
    if (cloze_load_stream(&s, f, "fuzz.jsonl", V, T, err, sizeof(err)) != 0) {
        if (s.n != 0 || s.ids != NULL) __builtin_trap(); // a failed load leaves *s zeroed
        return 0;
    }
    int row[T];
    for (int i = 0; i < s.n; i++) {
        int n = s.off[i + 1] - s.off[i];
        if (s.ntgt[i] < 1 || s.ntgt[i] > T || s.ntgt[i] >= n) __builtin_trap();
        for (int j = s.off[i]; j < s.off[i + 1]; j++)
            if (s.ids[j] < 0 || s.ids[j] >= V) __builtin_trap();
        int first = cloze_pack(&s, i, T, row, 0);
        if (first < 0 || first + s.ntgt[i] > T) __builtin_trap(); // every target predicted inside the row
    }
    cloze_free(&s);
    return 0;
}
