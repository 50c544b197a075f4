/*
 * fixture.h: reads the fixtures dev/train_gpt.py (the PyTorch reference) writes, for the
 * CPU and the CUDA tests: a file of tagged records (header: int32 magic 20261204, version
 * 1, record count; each record: char name[48], int32 dtype (0 f32, 1 i32), int32 ndim,
 * int32 dims[4], then the elements), and the fixture's model and recipe as a Config.
 */
#ifndef DEV_FIXTURE_H
#define DEV_FIXTURE_H

#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include "../llmc/host/config.h"
#include "../llmc/host/utils.h"

typedef struct {
    char name[48];
    int32_t dtype, ndim, dims[4];
    size_t n;
    void* data;
} Record;
typedef struct {
    int count;
    Record* recs;
} Fixture;

static int fixture_load(Fixture* fx, const char* path) {
    FILE* f = fopen(path, "rb");
    if (!f) return -1;
    int32_t head[3];
    if (fread(head, 4, 3, f) != 3 || head[0] != 20261204 || head[1] != 1) {
        fclose(f);
        return -1;
    }
    fx->count = head[2];
    fx->recs = (Record*)calloc_check(fx->count, sizeof(Record));
    for (int i = 0; i < fx->count; i++) {
        Record* r = &fx->recs[i];
        if (fread(r->name, 1, 48, f) != 48 || fread(&r->dtype, 4, 1, f) != 1 || fread(&r->ndim, 4, 1, f) != 1 ||
            fread(r->dims, 4, 4, f) != 4) {
            fclose(f);
            return -1;
        }
        r->name[47] = 0;
        r->n = (size_t)r->dims[0] * r->dims[1] * r->dims[2] * r->dims[3];
        r->data = malloc_check(r->n * 4);
        if (fread(r->data, 4, r->n, f) != r->n) {
            fclose(f);
            return -1;
        }
    }
    fclose(f);
    return 0;
}

static Record* fx_get(Fixture* fx, const char* name) {
    for (int i = 0; i < fx->count; i++)
        if (strcmp(fx->recs[i].name, name) == 0) return &fx->recs[i];
    die("fixture has no record '%s': regenerate it with make fixtures", name);
    return NULL;
}

// the fixture's model and recipe as a Config
static Config fixture_config(Fixture* fx, const char* dir) {
    const int32_t* c = (const int32_t*)fx_get(fx, "config")->data;
    const float* r = (const float*)fx_get(fx, "recipe")->data;
    Config cfg;
    config_defaults(&cfg);
    cfg.L = c[0];
    cfg.H = c[1];
    cfg.heads = c[2];
    cfg.seq = c[3];
    cfg.V = c[4];
    cfg.mb = c[6];
    cfg.seed = (uint64_t)c[8];
    cfg.vpad = c[5] - c[4] + 1; // any pad multiple in (Vp - V, Vp] rounds V up to Vp; pick one that does
    while (round_up(cfg.V, cfg.vpad) != c[5]) cfg.vpad++;
    cfg.lr = r[0];
    cfg.warmup_tokens = (int64_t)r[1];
    cfg.decay_tokens = (int64_t)r[2];
    cfg.minlr_frac = r[3];
    cfg.beta1 = r[4];
    cfg.beta2 = r[5];
    cfg.eps = r[6];
    cfg.wd = r[7];
    cfg.clip = r[8];
    cfg.ramp_start = (int64_t)r[9];
    cfg.ramp_inc = (int64_t)r[10];
    cfg.ramp_tokens = (int64_t)r[11];
    cfg.gb = (int64_t)r[12];
    cfg.total_tokens = 1LL << 40;
    cfg.shuffle = 0;
    cfg.tp = cfg.pp = cfg.dp = 1;
    snprintf(cfg.train_glob, sizeof(cfg.train_glob), "%s/data_train_000.bin", dir);
    cfg.val_glob[0] = 0;
    char err[CFG_ERR_LEN];
    if (config_validate(&cfg, err) != 0) die("fixture config invalid: %s", err);
    return cfg;
}

#endif // DEV_FIXTURE_H
