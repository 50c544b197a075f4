/*
 * outdir.h: a run's ownership of its -o directory. A run holds an exclusive flock on
 * DIR and DIR/lock for its whole life (the kernel releases it when the process dies, even by
 * kill -9), so two runs can never write one directory, and on every log file it writes, which
 * may not lie in another run's -o; it clears what a crashed save
 * left (ckpt_*.tmp, ckpt_*.old); after a resume it cuts the JSONL log back to the
 * checkpoint's step, so no step appears twice. Also the identity of the training data
 * (a hash of the sorted shard names, sizes and a sample of each shard's bytes) that a resume
 * compares with the checkpoint.
 */
#ifndef LLMC_OUTDIR_H
#define LLMC_OUTDIR_H

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <glob.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>
#include "blend.h"
#include "checkpoint.h"
#include "safeio.h"
#include "utils.h"

// 1 when fd's file or directory is flocked by another open file: a running run's
static int outdir_flock_held(int fd) { return flock(fd, LOCK_SH | LOCK_NB) != 0 && errno == EWOULDBLOCK; }

// Takes the lock on dir (created if missing): an exclusive flock on the directory itself, so
// deleting a file cannot release it, and on DIR/lock, which also names the holder's pid (and
// alone holds where a file system cannot flock a directory). Returns the lock file's
// descriptor and the directory's in *dir_fd (-1 where unsupported); keep both open for the
// run's life. Or -1 with a message in err.
static int outdir_lock(const char* dir, int* dir_fd, char* err, size_t n) {
    struct stat st;
    *dir_fd = -1;
    if (mkdir_p(dir) != 0) {
        snprintf(err, n, "cannot create -o directory %s: %s", dir, strerror(errno));
        return -1;
    }
    if (stat(dir, &st) != 0 || !S_ISDIR(st.st_mode)) {
        snprintf(err, n, "cannot create -o directory %s: a file of that name exists", dir);
        return -1;
    }
    char path[1100];
    snprintf(path, sizeof(path), "%s/lock", dir);
    int dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    int busy = 0;
    if (dfd >= 0 && flock(dfd, LOCK_EX | LOCK_NB) != 0) {
        busy = errno == EWOULDBLOCK;
        close(dfd);
        dfd = -1;
    }
    int fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0644);
    if (fd < 0) {
        snprintf(err, n, "cannot create the lock file %s: %s", path, strerror(errno));
        if (dfd >= 0) close(dfd);
        return -1;
    }
    if (busy || flock(fd, LOCK_EX | LOCK_NB) != 0) {
        char pid[32] = "?";
        ssize_t k = pread(fd, pid, sizeof(pid) - 1, 0);
        if (k > 0) {
            pid[k] = '\0';
            pid[strcspn(pid, "\n")] = '\0';
        }
        snprintf(err, n, "-o %s is in use by another run (pid %s holds %s): wait for it to end or use another -o", dir,
                 pid, path);
        close(fd);
        if (dfd >= 0) close(dfd);
        return -1;
    }
    char b[32];
    int len = snprintf(b, sizeof(b), "%ld\n", (long)getpid());
    if (ftruncate(fd, 0) != 0 || pwrite(fd, b, len, 0) != len) { /* the pid is only informative */
    }
    *dir_fd = dfd;
    return fd;
}

// 1 when dir is the -o of a running run (its directory or its lock file is locked)
static int outdir_busy(const char* dir) {
    int busy = 0;
    int dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (dfd >= 0) {
        busy = outdir_flock_held(dfd);
        close(dfd);
    }
    char path[1100];
    snprintf(path, sizeof(path), "%s/lock", dir);
    int fd = busy ? -1 : open(path, O_RDONLY | O_CLOEXEC);
    if (fd >= 0) {
        busy = outdir_flock_held(fd);
        close(fd);
    }
    return busy;
}

// 1 when a and b name the same directory
static int outdir_same(const char* a, const char* b) {
    struct stat sa, sb;
    return stat(a, &sa) == 0 && stat(b, &sb) == 0 && sa.st_dev == sb.st_dev && sa.st_ino == sb.st_ino;
}

// Claims a file this run writes beside its checkpoints (the JSONL logs): refused when it lies in
// the -o directory of another running run (own_dir: this run's -o, or ""), or when another run
// holds it; else an exclusive flock on it (created if missing), held while the returned
// descriptor stays open. A character device (-log /dev/null) is not locked: -2. Or -1 with
// a message in err.
static int outdir_claim_file(const char* path, const char* own_dir, const char* what, char* err, size_t n) {
    char dir[1100];
    const char* slash = strrchr(path, '/');
    if (slash == NULL)
        snprintf(dir, sizeof(dir), ".");
    else
        snprintf(dir, sizeof(dir), "%.*s", (int)(slash == path ? 1 : slash - path), path);
    if (!(own_dir[0] && outdir_same(dir, own_dir)) && outdir_busy(dir)) {
        snprintf(err, n, "%s %s lies in the -o directory of a running run: write it outside %s", what, path, dir);
        return -1;
    }
    int fd = open(path, O_RDONLY | O_CREAT | O_NONBLOCK | O_CLOEXEC, 0644);
    if (fd < 0) {
        snprintf(err, n, "cannot open %s %s for writing: %s", what, path, strerror(errno));
        return -1;
    }
    struct stat st;
    if (!safeio_check_kind(fd, &st, 1, path, what, err, n)) return -1;
    if (S_ISCHR(st.st_mode)) {
        close(fd);
        return -2;
    }
    if (flock(fd, LOCK_EX | LOCK_NB) != 0) {
        snprintf(err, n, "%s %s is being written by another run: choose another path", what, path);
        close(fd);
        return -1;
    }
    return fd;
}

// Removes ckpt_*.tmp and ckpt_*.old directories (a save that died before its rename).
// Returns how many were removed.
static int outdir_clean_partial(const char* dir) {
    DIR* d = opendir(dir);
    if (d == NULL) return 0;
    int n = 0;
    struct dirent* e;
    char names[64][300];
    int k = 0;
    while ((e = readdir(d)) != NULL && k < 64) {
        size_t L = strlen(e->d_name);
        if (strncmp(e->d_name, "ckpt_", 5) == 0 && L > 4 && L < 300 &&
            (strcmp(e->d_name + L - 4, ".tmp") == 0 || strcmp(e->d_name + L - 4, ".old") == 0))
            snprintf(names[k++], 300, "%s", e->d_name);
    }
    closedir(d);
    for (int i = 0; i < k; i++) {
        char p[1400];
        snprintf(p, sizeof(p), "%s/%s", dir, names[i]);
        if (ckpt_remove_dir(p) == 0) {
            printf("removed the partial checkpoint %s (a save that did not complete)\n", p);
            n++;
        } else
            fprintf(stderr, "warning: cannot remove the partial checkpoint %s\n", p);
    }
    return n;
}

// Removes every complete checkpoint under dir (-overwrite 1). Returns how many.
static int outdir_remove_checkpoints(const char* dir) {
    int n = ckpt_list_complete(dir, NULL, 0);
    if (n == 0) return 0;
    int64_t* steps = (int64_t*)malloc_check(sizeof(int64_t) * n);
    n = ckpt_list_complete(dir, steps, n);
    for (int i = 0; i < n; i++) {
        char d[1100];
        ckpt_dir_name(d, sizeof(d), dir, steps[i]);
        if (ckpt_remove_dir(d) != 0) die("-overwrite: cannot remove %s: %s", d, strerror(errno));
    }
    free(steps);
    return n;
}

// Cuts a JSONL log back to the records of steps <= step (records without a step stay).
// Returns 0, or -1 if the log exists but cannot be rewritten. A missing log is fine.
static int log_truncate_to_step(const char* path, int64_t step) {
    FILE* in = fopen(path, "rb");
    if (in == NULL) return 0;
    char tmp[1100];
    snprintf(tmp, sizeof(tmp), "%s.tmp", path);
    FILE* out = fopen(tmp, "wb");
    if (out == NULL) {
        fclose(in);
        return -1;
    }
    char* line = NULL;
    size_t cap = 0;
    ssize_t len;
    int ok = 1;
    while ((len = getline(&line, &cap, in)) > 0) {
        const char* s = strstr(line, "\"step\":");
        if (line[len - 1] != '\n') continue; // a torn last line (killed mid-write): drop it
        if (s != NULL && strtoll(s + 7, NULL, 10) > step) continue;
        if (fwrite(line, 1, (size_t)len, out) != (size_t)len) ok = 0;
    }
    free(line);
    fclose(in);
    if (fclose(out) != 0) ok = 0;
    if (!ok || rename(tmp, path) != 0) {
        unlink(tmp);
        return -1;
    }
    return 0;
}

// One shard's content sample for the data identity: its size, its first DATA_ID_HEAD bytes (the
// header and the first tokens) and DATA_ID_BLOCKS blocks of DATA_ID_BLOCK bytes evenly spaced to
// its end (the whole file when smaller). Rewriting a shard's tokens at the same size changes the
// hash unless every sampled byte stays the same (doc/formats.md: 68 KiB read per shard).
#define DATA_ID_HEAD 4096
#define DATA_ID_BLOCKS 16
#define DATA_ID_BLOCK 4096
static uint64_t data_identity_shard(uint64_t h, const char* path) {
    int fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC); // a FIFO is refused when the data opens
    struct stat st;
    int64_t size = fd >= 0 && fstat(fd, &st) == 0 && S_ISREG(st.st_mode) ? (int64_t)st.st_size : -1;
    h = fnv1a64(h, &size, sizeof(size));
    char buf[DATA_ID_BLOCK > DATA_ID_HEAD ? DATA_ID_BLOCK : DATA_ID_HEAD];
    for (int k = -1; size > 0 && k < DATA_ID_BLOCKS; k++) { // k = -1: the head
        int64_t len = k < 0 ? DATA_ID_HEAD : DATA_ID_BLOCK;
        if (len > size) len = size;
        int64_t off = k < 0 ? 0 : (size - len) * k / (DATA_ID_BLOCKS - 1);
        ssize_t got = pread(fd, buf, (size_t)len, (off_t)off);
        int64_t mark = got == (ssize_t)len ? off : -1 - off; // a short or failed read is part of the identity
        h = fnv1a64(h, &mark, sizeof(mark));
        if (got > 0) h = fnv1a64(h, buf, (size_t)got);
    }
    if (fd >= 0) close(fd);
    return h;
}

// The training data's identity: FNV-1a 64 over the sorted shard base names and each shard's
// content sample (data_identity_shard), so moving the shards elsewhere keeps it; adding,
// removing, resizing or rewriting one changes it.
static uint64_t data_identity(const char* pattern) {
    uint64_t h = FNV1A64_INIT;
    glob_t g;
    if (glob(pattern, 0, NULL, &g) != 0) return h;
    for (size_t i = 0; i < g.gl_pathc; i++) {
        const char* base = strrchr(g.gl_pathv[i], '/');
        base = base ? base + 1 : g.gl_pathv[i];
        h = fnv1a64(h, base, strlen(base) + 1);
        h = data_identity_shard(h, g.gl_pathv[i]);
    }
    globfree(&g);
    return h;
}

// A blend's identity: a plain glob keeps data_identity (checkpoints from before blends still
// resume); a blend hashes each dataset's weight (as the order uses it) and shards.
static uint64_t blend_identity(const BlendSpec* b) {
    if (b->plain) return data_identity(b->path[0]);
    uint64_t h = FNV1A64_INIT;
    for (int d = 0; d < b->n; d++) {
        int64_t w = (int64_t)(b->weight[d] * BLEND_ONE + 0.5);
        uint64_t id = data_identity(b->path[d]);
        h = fnv1a64(h, &w, sizeof(w));
        h = fnv1a64(h, &id, sizeof(id));
    }
    return h;
}

#endif // LLMC_OUTDIR_H
