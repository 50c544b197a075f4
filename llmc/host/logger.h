/*
 * logger.h: the per-step log. Rank 0 prints one human line per step (fields separated by
 * " | ", each "name value") and every logging rank appends the same fields as one JSON
 * object per line to a JSONL file (type "train", "val" or "event"), which dev/plot.py
 * and the planner's calibration read. Every write is checked (a full disk or -log /dev/full
 * is a one-line error and exit 1, never a silently lost log), and a FIFO is refused as
 * the log instead of blocking the open.
 */
#ifndef LLMC_LOGGER_H
#define LLMC_LOGGER_H

#include <stdint.h>
#include <math.h>
#include <stdio.h>
#include "safeio.h"
#include "tokenizer.h"
#include "utils.h"

typedef struct {
    int64_t step; // 1-based index of the step just taken
    double loss, lr, gnorm;
    int64_t gb;                                // global batch, sequences
    int64_t tokens;                            // tokens consumed after the step
    double ms;                                 // wall time of the step
    double tok_s;                              // tokens per second, whole job
    double tflops;                             // model TFLOP/s per device, paper formula (f=4 with recompute, else 3)
    double mfu;                                // model FLOPs (f=3) over the device peak; < 0 when unknown (CPU)
    double t_compute_ms, t_comm_ms, t_idle_ms; // this rank's split of the step (compute = wall - comm - idle)
    double t_overlap_ms;                       // communication that ran beside compute (not in the split)
    int micro;                                 // micro-batches per DP rank this step
    int host_syncs;     // host waits on the device during the step (CUDA trainer); < 0: not counted
    double b_simple;    // gradient noise scale (sequences); < 0 when not measured
    double g2, trsigma; // this step's unbiased |G|^2 and tr(Sigma) estimates (valid when b_simple >= 0 or has_noise)
    int has_noise;
    const char* skip;             // NULL, or why the update was skipped ("spike", "nonfinite")
    double elapsed_s, pct, eta_s; // progress: since start, % of the run done, ETA (< 0 unknown)
    int64_t saving;               // > 0: the step of a background checkpoint written during this step
} StepLog;

// 75 -> "1m15s", 4000 -> "1h06m"
static void fmt_dur(char* b, size_t n, double s) {
    if (s < 0) {
        snprintf(b, n, "?");
        return;
    }
    long t = (long)(s + 0.5);
    if (t < 3600)
        snprintf(b, n, "%ldm%02lds", t / 60, t % 60);
    else
        snprintf(b, n, "%ldh%02ldm", t / 3600, (t % 3600) / 60);
}

// JSON has no NaN or Inf: write null
static void json_num(FILE* f, const char* key, double x) {
    if (isfinite(x))
        fprintf(f, "\"%s\":%.9g,", key, x);
    else
        fprintf(f, "\"%s\":null,", key);
}

typedef struct {
    FILE* f; // JSONL, or NULL
    int rank, tp, pp, dp;
    int print;       // print human lines (rank 0)
    char path[1100]; // for error messages
} Logger;

// after each record: a failed write (full disk) ends the run with one line
static void logger_check(Logger* lg) {
    if (lg->print && (fflush(stdout) != 0 || ferror(stdout)))
        die("writing standard output failed: %s", strerror(errno ? errno : EIO));
    if (lg->f && (fflush(lg->f) != 0 || ferror(lg->f)))
        die("writing log file %s failed: %s", lg->path, strerror(errno ? errno : EIO));
}

static void logger_open(Logger* lg, const char* path, int append, int rank, int tp, int pp, int dp, int print) {
    lg->f = NULL;
    lg->rank = rank;
    lg->tp = tp;
    lg->pp = pp;
    lg->dp = dp;
    lg->print = print;
    snprintf(lg->path, sizeof(lg->path), "%s", path != NULL ? path : "");
    if (path != NULL && path[0] != '\0') {
        char err[1400];
        lg->f = safeio_open_write(path, append, "log file", err, sizeof(err));
        if (lg->f == NULL) die("%s: check -log / -o", err);
    }
}

static void logger_step(Logger* lg, const StepLog* s) {
    if (lg->print) {
        printf("step %6lld | loss %.6f | lr %.4e | gb %lld | tokens %lld | gnorm %.4f | ms %.1f | tok/s %.0f",
               (long long)s->step, s->loss, s->lr, (long long)s->gb, (long long)s->tokens, s->gnorm, s->ms, s->tok_s);
        if (s->mfu >= 0)
            printf(" | TFLOP/s %.1f | MFU %.1f%%", s->tflops, 100.0 * s->mfu);
        else
            printf(" | GFLOP/s %.2f", s->tflops * 1e3);
        if (s->b_simple >= 0) printf(" | B_simple %.1f", s->b_simple);
        if (s->skip) printf(" | SKIPPED %s", s->skip);
        if (s->saving > 0) printf(" | saving ckpt %lld", (long long)s->saving);
        char el[32], eta[32];
        fmt_dur(el, sizeof(el), s->elapsed_s);
        fmt_dur(eta, sizeof(eta), s->eta_s);
        printf(" | %.1f%% | elapsed %s | ETA %s\n", s->pct, el, eta);
        fflush(stdout);
    }
    if (lg->f) {
        fprintf(lg->f, "{\"type\":\"train\",\"step\":%lld,", (long long)s->step);
        json_num(lg->f, "loss", s->loss);
        json_num(lg->f, "lr", s->lr);
        fprintf(lg->f, "\"gb\":%lld,\"tokens\":%lld,", (long long)s->gb, (long long)s->tokens);
        json_num(lg->f, "gnorm", s->gnorm);
        fprintf(lg->f, "\"ms\":%.4f,\"tok_s\":%.3f,\"tflops\":%.6g,", s->ms, s->tok_s, s->tflops);
        if (s->mfu >= 0)
            fprintf(lg->f, "\"mfu\":%.6g,", s->mfu);
        else
            fprintf(lg->f, "\"gflops\":%.6g,", s->tflops * 1e3);
        if (s->has_noise) {
            json_num(lg->f, "g2", s->g2);
            json_num(lg->f, "trsigma", s->trsigma);
        }
        if (s->b_simple >= 0) json_num(lg->f, "b_simple", s->b_simple);
        if (s->skip) fprintf(lg->f, "\"skip\":\"%s\",", s->skip);
        if (s->host_syncs >= 0) fprintf(lg->f, "\"host_syncs\":%d,", s->host_syncs);
        fprintf(lg->f, "\"elapsed_s\":%.3f,\"pct\":%.4f,", s->elapsed_s, s->pct);
        json_num(lg->f, "eta_s", s->eta_s >= 0 ? s->eta_s : NAN);
        fprintf(lg->f, "\"t_overlap_ms\":%.4f,", s->t_overlap_ms);
        fprintf(lg->f,
                "\"micro\":%d,\"t_compute_ms\":%.4f,\"t_comm_ms\":%.4f,\"t_idle_ms\":%.4f,"
                "\"rank\":%d,\"tp\":%d,\"pp\":%d,\"dp\":%d}\n",
                s->micro, s->t_compute_ms, s->t_comm_ms, s->t_idle_ms, lg->rank, lg->tp, lg->pp, lg->dp);
    }
    logger_check(lg);
}

// extra: more fields for the JSON record ("name":value, each followed by a comma), or ""
static void logger_val(Logger* lg, int64_t step, int64_t tokens, double val_loss, const char* extra) {
    if (lg->print) printf("val  %6lld | val_loss %.6f | tokens %lld\n", (long long)step, val_loss, (long long)tokens);
    if (lg->f) {
        fprintf(lg->f, "{\"type\":\"val\",\"step\":%lld,\"tokens\":%lld,", (long long)step, (long long)tokens);
        json_num(lg->f, "val_loss", val_loss);
        fputs(extra, lg->f);
        fprintf(lg->f, "\"rank\":%d}\n", lg->rank);
    }
    logger_check(lg);
}

// Length of the valid UTF-8 sequence at s (n bytes left), or 0 when s starts an invalid one
// (overlong, surrogate, above U+10FFFF, truncated): JSON text must be valid UTF-8.
static int utf8_valid_len(const unsigned char* s, size_t n) {
    int len = 0;
    if (s[0] < 0x80)
        len = 1;
    else if (s[0] >= 0xC2 && s[0] <= 0xDF)
        len = 2;
    else if ((s[0] & 0xF0) == 0xE0)
        len = 3;
    else if (s[0] >= 0xF0 && s[0] <= 0xF4)
        len = 4;
    if (len == 0 || (size_t)len > n) return 0;
    for (int i = 1; i < len; i++)
        if ((s[i] & 0xC0) != 0x80) return 0;
    if (len == 3 && ((s[0] == 0xE0 && s[1] < 0xA0) || (s[0] == 0xED && s[1] >= 0xA0))) return 0;
    if (len == 4 && ((s[0] == 0xF0 && s[1] < 0x90) || (s[0] == 0xF4 && s[1] >= 0x90))) return 0;
    return len;
}

// n bytes as a JSON string: quotes, backslashes and control bytes escaped, every invalid
// UTF-8 byte written as U+FFFD (what Python's decode(errors="replace") shows)
static void json_put_bytes(FILE* f, const unsigned char* s, size_t n) {
    fputc('"', f);
    for (size_t i = 0; i < n;) {
        int len = utf8_valid_len(s + i, n - i);
        if (len == 0) {
            fputs("\\ufffd", f);
            i++;
        } else if (s[i] == '"' || s[i] == '\\') {
            fprintf(f, "\\%c", s[i]);
            i++;
        } else if (s[i] < 0x20) {
            fprintf(f, "\\u%04x", s[i]);
            i++;
        } else {
            fwrite(s + i, 1, (size_t)len, f);
            i += (size_t)len;
        }
    }
    fputc('"', f);
}

// A text sample as a "sample" record of rank 0's log: the prompt's and the generated ids
// (tokens[0..n0) and [n0..n)) and, with a tokenizer, the generated text.
static void logger_sample(Logger* lg, int64_t step, const int* tokens, int n0, int n, const Tokenizer* tok) {
    if (!lg->f || lg->rank != 0) return;
    fprintf(lg->f, "{\"type\":\"sample\",\"step\":%lld,\"prompt_ids\":[", (long long)step);
    for (int i = 0; i < n0; i++) fprintf(lg->f, i ? ",%d" : "%d", tokens[i]);
    fprintf(lg->f, "],\"ids\":[");
    for (int i = n0; i < n; i++) fprintf(lg->f, i > n0 ? ",%d" : "%d", tokens[i]);
    fprintf(lg->f, "]");
    if (tok != NULL) {
        size_t len = 0;
        for (int i = 0; i < n; i++) len += tokenizer_token_len(tok, (uint32_t)tokens[i]);
        unsigned char* text = (unsigned char*)malloc_check(len + 1);
        for (int pass = 0, k = 0; pass < 2; pass++, k = 0) { // the prompt's text, then the sample's
            for (int i = pass ? n0 : 0; i < (pass ? n : n0); i++) {
                size_t l = tokenizer_token_len(tok, (uint32_t)tokens[i]);
                if (l > 0) memcpy(text + k, tokenizer_decode(tok, (uint32_t)tokens[i]), l);
                k += (int)l;
            }
            fprintf(lg->f, pass ? ",\"text\":" : ",\"prompt\":");
            json_put_bytes(lg->f, text, (size_t)k);
        }
        free(text);
    }
    fprintf(lg->f, "}\n");
    logger_check(lg);
}

// at the end of the run: the last writes (and the samples on stdout) are checked too
static void logger_close(Logger* lg) {
    if (lg->print && (fflush(stdout) != 0 || ferror(stdout)))
        die("writing standard output failed: %s", strerror(errno ? errno : EIO));
    if (lg->f) {
        char err[1400];
        FILE* f = lg->f;
        lg->f = NULL;
        if (safeio_close_write(f, lg->path, "log file", err, sizeof(err)) != 0) die("%s", err);
    }
}

#endif // LLMC_LOGGER_H
