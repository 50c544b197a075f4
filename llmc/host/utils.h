/*
 * utils.h: checked wrappers around the C library (files, memory) and the one-line
 * fatal error used everywhere. An error names the problem and what to do next, then
 * exits non-zero; under mpirun a non-zero exit of any rank ends the whole job, so no
 * rank is left waiting in a collective.
 */
#ifndef LLMC_UTILS_H
#define LLMC_UTILS_H

#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#ifdef __linux__
#include <sys/mman.h>
#endif

// one line on stderr, prefixed with "error:", then exit(1)
static void die(const char* fmt, ...) {
    // the whole line in one write: under mpirun the ranks' stderr and mpirun's own messages
    // are forwarded as they are written, so a line written in pieces can be split by another's
    char line[4096];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(line, sizeof(line), fmt, ap);
    va_end(ap);
    fprintf(stderr, "error: %s\n", line);
    fflush(stderr);
    exit(1);
}

static FILE* fopen_check(const char* path, const char* mode) {
    FILE* f = fopen(path, mode);
    if (f == NULL) {
        die("cannot open %s (mode %s): check the path and permissions", path, mode);
    }
    return f;
}

static void fread_check(void* ptr, size_t size, size_t n, FILE* f, const char* what) {
    size_t got = fread(ptr, size, n, f);
    if (got != n) {
        die("%s is truncated or unreadable (wanted %zu items, got %zu)", what, n, got);
    }
}

static void* malloc_check(size_t n) {
    void* p = malloc(n > 0 ? n : 1);
    if (p == NULL) {
        die("out of memory allocating %zu bytes: use a smaller model or micro-batch", n);
    }
    return p;
}

static void* realloc_check(void* q, size_t n) {
    void* p = realloc(q, n > 0 ? n : 1);
    if (p == NULL) {
        die("out of memory allocating %zu bytes", n);
    }
    return p;
}

static void* calloc_check(size_t count, size_t size) {
    void* p = calloc(count > 0 ? count : 1, size > 0 ? size : 1);
    if (p == NULL) {
        die("out of memory allocating %zu x %zu bytes", count, size);
    }
    return p;
}

// calloc for the big buffers (parameters, gradients, moments, activations): from 4 MiB
// up, 2 MiB-aligned and marked for transparent huge pages, which Debian's kernels (THP
// "madvise" mode) hand out only on request: the packing's strided reads and the streaming
// passes then miss the TLB far less. Placement only, the values are the same. Zeroed here,
// so the pages are faulted in at start-up, not in the first step. Freed with free().
static void* calloc_big(size_t count, size_t size) {
    const size_t huge = (size_t)2 << 20;
    if (size != 0 && count > SIZE_MAX / size) die("out of memory allocating %zu x %zu bytes", count, size);
    size_t n = count * size;
    if (n < 2 * huge) return calloc_check(count, size);
    size_t whole = (n + huge - 1) / huge * huge;
    void* p = aligned_alloc(huge, whole);
    if (p == NULL) die("out of memory allocating %zu x %zu bytes: use a smaller model or micro-batch", count, size);
#ifdef MADV_HUGEPAGE
    (void)madvise(p, whole, MADV_HUGEPAGE); // advice only: refused, the pages stay 4 KiB
#endif
    memset(p, 0, n);
    return p;
}

static double wall_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e3 + ts.tv_nsec * 1e-6;
}

// FNV-1a 64-bit, streaming: the checkpoint payload checksum
#define FNV1A64_INIT 14695981039346656037ULL
static uint64_t fnv1a64(uint64_t h, const void* data, size_t n) {
    const unsigned char* p = (const unsigned char*)data;
    for (size_t i = 0; i < n; i++) {
        h ^= p[i];
        h *= 1099511628211ULL;
    }
    return h;
}

#endif // LLMC_UTILS_H
