// fsutil.c: see fsutil.h.
#include "io/fsutil.h"

#include "util/errmsg.h"

#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

int mkdir_p(const char *path) {
    char buf[4096];
    size_t n = strlen(path);
    if (n == 0 || n >= sizeof buf) {
        errno = ENAMETOOLONG;
        return -1;
    }
    memcpy(buf, path, n + 1);
    for (size_t i = 1; i <= n; i++) {
        if (buf[i] != '/' && buf[i] != '\0') continue;
        char c = buf[i];
        buf[i] = '\0';
        if (mkdir(buf, 0777) && errno != EEXIST) return -1;
        buf[i] = c;
    }
    struct stat st;
    if (stat(path, &st) || !S_ISDIR(st.st_mode)) {
        errno = ENOTDIR;
        return -1;
    }
    return 0;
}

static const char *file_kind(mode_t m) {
    return S_ISDIR(m) ? "a directory" : S_ISFIFO(m) ? "a FIFO" : S_ISSOCK(m) ? "a socket" :
           S_ISCHR(m) || S_ISBLK(m) ? "a device" : "not a file";
}

FILE *open_input_file(const char *path, size_t *size, char *err, size_t n) {
    // O_NONBLOCK: an open of a FIFO returns at once instead of waiting for a writer.
    // O_NOCTTY: a terminal given by mistake must not become the controlling terminal.
    int fd = open(path, O_RDONLY | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);
    if (fd < 0) {
        errmsg(err, n, "%s: cannot open: %s", path, strerror(errno));
        return NULL;
    }
    struct stat st;
    if (fstat(fd, &st)) {
        errmsg(err, n, "%s: cannot stat: %s", path, strerror(errno));
        close(fd);
        return NULL;
    }
    if (!S_ISREG(st.st_mode)) {
        errmsg(err, n, "%s: not a regular file (%s)", path, file_kind(st.st_mode));
        close(fd);
        return NULL;
    }
    if (st.st_size < 0 || (uint64_t)st.st_size > SIZE_MAX - 1) {
        errmsg(err, n, "%s: file too large to read", path);
        close(fd);
        return NULL;
    }
    // Back to ordinary blocking reads (O_NONBLOCK means nothing for a regular file on Linux, but
    // POSIX leaves it unspecified).
    int fl = fcntl(fd, F_GETFL);
    if (fl < 0 || fcntl(fd, F_SETFL, fl & ~O_NONBLOCK) < 0) {
        errmsg(err, n, "%s: cannot set blocking mode: %s", path, strerror(errno));
        close(fd);
        return NULL;
    }
    FILE *f = fdopen(fd, "rb");
    if (!f) {
        errmsg(err, n, "%s: cannot open: %s", path, strerror(errno));
        close(fd);
        return NULL;
    }
    if (size) *size = (size_t)st.st_size;
    return f;
}

char *read_text_file(const char *path, size_t max_bytes, char *err, size_t n) {
    FILE *f = open_input_file(path, NULL, err, n);
    if (!f) return NULL;
    char *buf = NULL;
    size_t len = 0, cap = 0;
    for (;;) {
        if (len + 4096 + 1 > cap) {
            cap = 2 * cap + 8192;
            char *nb = cap <= max_bytes + 8192 ? realloc(buf, cap) : NULL;
            if (!nb) {
                free(buf);
                fclose(f);
                errmsg(err, n, "%s: larger than %zu bytes or out of memory", path, max_bytes);
                return NULL;
            }
            buf = nb;
        }
        size_t got = fread(buf + len, 1, 4096, f);
        len += got;
        if (got < 4096) break;
    }
    int bad = ferror(f);
    fclose(f);
    if (bad || len > max_bytes) {
        free(buf);
        if (bad) errmsg(err, n, "%s: read error", path);
        else errmsg(err, n, "%s: larger than %zu bytes", path, max_bytes);
        return NULL;
    }
    buf[len] = 0;
    return buf;
}

int write_text_atomic(const char *path, const char *text, char *err, size_t n) {
    char tmp[4200];
    if (snprintf(tmp, sizeof tmp, "%s.tmp", path) >= (int)sizeof tmp) return errmsg(err, n, "%s: path too long", path);
    FILE *f = fopen(tmp, "w");
    if (!f) return errmsg(err, n, "%s: cannot write: %s", tmp, strerror(errno));
    int ok = fputs(text, f) >= 0 && fflush(f) == 0 && fsync(fileno(f)) == 0;
    ok &= fclose(f) == 0;
    if (!ok || rename(tmp, path)) {
        remove(tmp);
        return errmsg(err, n, "%s: write failed", path);
    }
    return 0;
}
