/*
 * safeio.h: opening user-named files without hanging, and checked closes. A FIFO named
 * as an input or a log would block fopen() forever (it waits for the other end), so
 * files are opened with O_NONBLOCK, their type is checked with fstat on the open
 * descriptor (no race between a stat and the open), and only then is blocking mode
 * restored. Nothing exits here: the functions return NULL / -1 with a one-line message
 * in err, so callers (the dataloader, the tokenizer, the logger) decide how to fail.
 */
#ifndef LLMC_SAFEIO_H
#define LLMC_SAFEIO_H

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <unistd.h>

static inline const char* safeio_kind(mode_t m) {
    if (S_ISDIR(m)) return "a directory";
    if (S_ISFIFO(m)) return "a FIFO";
    if (S_ISSOCK(m)) return "a socket";
    if (S_ISCHR(m)) return "a character device";
    if (S_ISBLK(m)) return "a block device";
    return "not a regular file";
}

// The opened fd's type, checked: regular files, and character devices if allow_chr. Closes
// fd and fills err on a failure (returns 0).
static inline int safeio_check_kind(int fd, struct stat* st, int allow_chr, const char* path, const char* what,
                                    char* err, size_t errn) {
    if (fstat(fd, st) != 0) {
        snprintf(err, errn, "cannot stat %s %s: %s", what, path, strerror(errno));
        close(fd);
        return 0;
    }
    if (!S_ISREG(st->st_mode) && !(allow_chr && S_ISCHR(st->st_mode))) {
        snprintf(err, errn, "%s %s is %s, not a regular file", what, path, safeio_kind(st->st_mode));
        close(fd);
        return 0;
    }
    return 1;
}

// Blocking again (the open was non-blocking, so a FIFO never hung it), then a FILE*.
static inline FILE* safeio_fdopen(int fd, const char* mode, const char* path, const char* what, char* err,
                                  size_t errn) {
    int fl = fcntl(fd, F_GETFL);
    if (fl < 0 || fcntl(fd, F_SETFL, fl & ~O_NONBLOCK) != 0) {
        snprintf(err, errn, "cannot set up %s %s: %s", what, path, strerror(errno));
        close(fd);
        return NULL;
    }
    FILE* f = fdopen(fd, mode);
    if (f == NULL) {
        snprintf(err, errn, "cannot open %s %s: %s", what, path, strerror(errno));
        close(fd);
    }
    return f;
}

// Opens an input file for reading; refuses anything but a regular file.
static inline FILE* safeio_open_read(const char* path, const char* what, char* err, size_t errn) {
    int fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
    if (fd < 0) {
        snprintf(err, errn, "cannot open %s %s: %s", what, path, strerror(errno));
        return NULL;
    }
    struct stat st;
    if (!safeio_check_kind(fd, &st, 0, path, what, err, errn)) return NULL;
    return safeio_fdopen(fd, "rb", path, what, err, errn);
}

// Opens an output file (truncated, or appended to). Regular files and character devices
// (/dev/null, a terminal) are accepted; a FIFO, socket or directory is refused. A FIFO
// without a reader fails the non-blocking open at once (ENXIO) instead of hanging.
// A whole regular file (of what, for messages) into a new NUL-terminated buffer (*n bytes
// before the NUL); a file over max bytes, a FIFO, directory or device is refused. NULL on any
// problem, with one line in err.
static inline char* safeio_read_all(const char* path, const char* what, size_t max, size_t* n, char* err, size_t errn) {
    FILE* f = safeio_open_read(path, what, err, errn);
    if (f == NULL) return NULL;
    size_t cap = 1 << 16;
    char* buf = (char*)malloc(cap + 1);
    *n = 0;
    while (buf != NULL) {
        *n += fread(buf + *n, 1, cap - *n, f);
        if (*n < cap || cap > max) break; // short read: the end (or an error); over max: refused below
        char* nb = (char*)realloc(buf, 2 * cap + 1);
        if (nb == NULL) free(buf);
        buf = nb;
        cap *= 2;
    }
    int bad = buf == NULL || ferror(f);
    fclose(f);
    if (!bad && *n > max) {
        snprintf(err, errn, "%s %s is over %zu MiB: not a %s?", what, path, max >> 20, what);
        free(buf);
        return NULL;
    }
    if (bad) {
        snprintf(err, errn, "%s %s cannot be read", what, path);
        free(buf);
        return NULL;
    }
    buf[*n] = '\0';
    return buf;
}

static inline FILE* safeio_open_write(const char* path, int append, const char* what, char* err, size_t errn) {
    int fd = open(path, O_WRONLY | O_CREAT | O_NONBLOCK | O_CLOEXEC | (append ? O_APPEND : 0), 0644);
    if (fd < 0) {
        if (errno == ENXIO)
            snprintf(err, errn, "%s %s is a FIFO, not a regular file", what, path);
        else
            snprintf(err, errn, "cannot open %s %s for writing: %s", what, path, strerror(errno));
        return NULL;
    }
    struct stat st;
    if (!safeio_check_kind(fd, &st, 1, path, what, err, errn)) return NULL;
    // truncate only once the file is known to be a regular file (never a FIFO)
    if (!append && S_ISREG(st.st_mode) && ftruncate(fd, 0) != 0) {
        snprintf(err, errn, "cannot truncate %s %s: %s", what, path, strerror(errno));
        close(fd);
        return NULL;
    }
    return safeio_fdopen(fd, append ? "ab" : "wb", path, what, err, errn);
}

// Flushes and closes a written file; 0, or -1 with a message (a full disk shows here or
// in the flush, since stdio buffers the writes).
static inline int safeio_close_write(FILE* f, const char* path, const char* what, char* err, size_t errn) {
    int bad = fflush(f) != 0 || ferror(f);
    int e = errno;
    if (fclose(f) != 0 && !bad) {
        bad = 1;
        e = errno;
    }
    if (bad) {
        snprintf(err, errn, "writing %s %s failed: %s", what, path, strerror(e ? e : EIO));
        return -1;
    }
    return 0;
}

#endif // LLMC_SAFEIO_H
