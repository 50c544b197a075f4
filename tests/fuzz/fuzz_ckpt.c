// fuzz_ckpt.c: libFuzzer harness for checkpoint loading (llmc/host/checkpoint.h and
// llmc/host/reshard.h): the header reader, the rank-file set (ckpt_set_open) and, when the
// set opens and is small, the gather into a single-rank layout (ckpt_set_load_local).
// Input: byte 0 = number of rank files (1..4) and whether the harness fixes up each
// file's checksum (so the fuzzer reaches the checks behind it); the rest is split
// evenly into the files, each a 1024-byte header (zero padded) plus payload.
#include "../../llmc/host/reshard.h"

static char fuzz_dir[64];

static void fuzz_cleanup(void) {
    char path[128];
    for (int i = 0; i < 4; i++) {
        ckpt_rank_path(path, sizeof(path), fuzz_dir, i);
        unlink(path);
    }
    rmdir(fuzz_dir);
}

int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    if (size < 1 || size > (1 << 20)) return 0;
    if (fuzz_dir[0] == '\0') {
        snprintf(fuzz_dir, sizeof(fuzz_dir), "/tmp/fuzz_ckpt.XXXXXX");
        if (mkdtemp(fuzz_dir) == NULL) abort();
        atexit(fuzz_cleanup);
    }
    int nfiles = 1 + (data[0] & 3), fix = (data[0] >> 2) & 1;
    data++;
    size--;
    size_t per = size / nfiles;
    char path[128];
    for (int i = 0; i < 4; i++) {
        ckpt_rank_path(path, sizeof(path), fuzz_dir, i);
        unlink(path);
    }
    for (int i = 0; i < nfiles; i++) {
        const uint8_t* p = data + i * per;
        size_t n = per;
        CkptHeader h;
        memset(&h, 0, sizeof(h));
        memcpy(&h, p, n < sizeof(h) ? n : sizeof(h));
        const uint8_t* pay = n > sizeof(h) ? p + sizeof(h) : p;
        size_t pn = n > sizeof(h) ? n - sizeof(h) : 0;
        if (fix) {
            uint64_t s = fnv1a64(FNV1A64_INIT, pay, pn);
            memcpy(&h.h[CK_CHECKSUM], &s, sizeof(s));
        }
        ckpt_rank_path(path, sizeof(path), fuzz_dir, i);
        FILE* f = fopen(path, "wb");
        if (f == NULL) abort();
        fwrite(&h, 1, sizeof(h), f);
        if (pn) fwrite(pay, 1, pn, f);
        fclose(f);
    }
    char err[1024];
    CkptHeader one;
    ckpt_rank_path(path, sizeof(path), fuzz_dir, 0);
    (void)ckpt_read_header(path, &one, err, sizeof(err));
    CkptSet s;
    if (ckpt_set_open(&s, fuzz_dir, err, sizeof(err)) == 0) {
        const int64_t* h = s.hdr[0].h;
        // load into one rank holding everything, only for models of a sane size
        if (h[CK_L] > 0 && h[CK_L] <= 4 && h[CK_H] > 0 && h[CK_H] <= 64 && h[CK_HEADS] > 0 && h[CK_SEQ] > 0 &&
            h[CK_SEQ] <= 64 && h[CK_V] > 0 && h[CK_VP] >= h[CK_V] && h[CK_VP] <= 256) {
            ParamLayout pl;
            param_layout_init(&pl, (int)h[CK_L], (int)h[CK_H], (int)h[CK_HEADS], (int)h[CK_SEQ], (int)h[CK_V],
                              (int)h[CK_VP], 0, 1, 0, 1);
            float* w = (float*)malloc(sizeof(float) * (pl.total + 1));
            float* m = (float*)malloc(sizeof(float) * (pl.total + 1));
            float* v = (float*)malloc(sizeof(float) * (pl.total + 1));
            (void)ckpt_set_load_local(&s, &pl, w, m, v, 0, pl.total, err, sizeof(err));
            free(w);
            free(m);
            free(v);
        }
        ckpt_set_close(&s);
    } else if (s.paths != NULL || s.nfiles != 0) {
        ckpt_set_close(&s);
    }
    return 0;
}
