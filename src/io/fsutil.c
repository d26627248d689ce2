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

int read_stream(FILE *f, unsigned char **buf, size_t *len) {
    unsigned char chunk[65536];
    size_t got, cap = 0;
    *buf = NULL, *len = 0;
    while ((got = fread(chunk, 1, sizeof chunk, f)) > 0) {
        if (*len + got > cap) {
            unsigned char *nb = realloc(*buf, cap = (cap + got) * 2);
            if (!nb) break;
            *buf = nb;
        }
        memcpy(*buf + *len, chunk, got);
        *len += got;
    }
    if (got == 0 && !ferror(f)) return 0;
    free(*buf);
    *buf = NULL, *len = 0;
    return -1;
}

// The file path leads to through its symlinks, into buf (path itself when it is no link, or
// names nothing yet); a link's relative target counts from the link's own directory. 0, or -1
// with errno (ELOOP after 40 links, as the kernel counts).
static int follow_links(const char *path, char *buf, size_t n) {
    if ((size_t)snprintf(buf, n, "%s", path) >= n) return errno = ENAMETOOLONG, -1;
    for (int hops = 0; hops < 40; hops++) {
        struct stat st;
        if (lstat(buf, &st) || !S_ISLNK(st.st_mode)) return 0;
        char link[4096];
        const ssize_t len = readlink(buf, link, sizeof link - 1);
        if (len < 0) return -1;
        link[len] = 0;
        char *slash = strrchr(buf, '/');
        const size_t keep = link[0] == '/' || !slash ? 0 : (size_t)(slash - buf) + 1;
        if (keep + (size_t)len >= n) return errno = ENAMETOOLONG, -1;
        memcpy(buf + keep, link, (size_t)len + 1);
    }
    return errno = ELOOP, -1;
}

// After a rename, fsync the directory so that the new name itself survives a crash. Best effort:
// some file systems refuse fsync on a directory, and the data is on disk already.
static void sync_parent_dir(const char *path) {
    char dir[4096];
    const char *slash = strrchr(path, '/');
    if (!slash) snprintf(dir, sizeof dir, ".");
    else snprintf(dir, sizeof dir, "%.*s", (int)(slash - path) + (slash == path), path);
    int fd = open(dir, O_RDONLY | O_CLOEXEC);
    if (fd >= 0) {
        (void)fsync(fd);
        close(fd);
    }
}

// Opens o->target, a device or FIFO, for writing where it is; the descriptor, or -1 + message.
static int open_in_place(out_file *o, const struct stat *st, char *err, size_t n) {
    // O_NONBLOCK: a FIFO that nothing reads fails at once (ENXIO) instead of waiting forever.
    // O_NOCTTY: a terminal must not become the controlling terminal.
    int fd = open(o->target, O_WRONLY | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);
    if (fd < 0)
        return errmsg(err, n, "%s: cannot write to %s: %s", o->path, file_kind(st->st_mode),
                      errno == ENXIO && S_ISFIFO(st->st_mode) ? "nothing reads it" : strerror(errno));
    const int fl = fcntl(fd, F_GETFL);
    if (fl < 0 || fcntl(fd, F_SETFL, fl & ~O_NONBLOCK) < 0) {
        close(fd);
        return errmsg(err, n, "%s: cannot set blocking mode: %s", o->path, strerror(errno));
    }
    return fd;
}

int out_open(out_file *o, const char *path, char *err, size_t n) {
    o->f = NULL;
    o->tmp[0] = 0;
    if ((size_t)snprintf(o->path, sizeof o->path, "%s", path) >= sizeof o->path)
        return errmsg(err, n, "%.200s...: path too long", path);
    if (follow_links(path, o->target, sizeof o->target))
        return errmsg(err, n, "%s: cannot follow the symbolic link: %s", path, strerror(errno));
    struct stat st;
    const int exists = stat(o->target, &st) == 0;
    if (exists && S_ISDIR(st.st_mode)) return errmsg(err, n, "%s: is a directory, not a file to write", path);
    int fd;
    if (exists && !S_ISREG(st.st_mode)) {
        if ((fd = open_in_place(o, &st, err, n)) < 0) return -1;
    } else {
        if ((size_t)snprintf(o->tmp, sizeof o->tmp, "%s.tmp", o->target) >= sizeof o->tmp)
            return errmsg(err, n, "%s: path too long", path);
        fd = open(o->tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0666);
        if (fd < 0) return errmsg(err, n, "%s: cannot create %s: %s", path, o->tmp, strerror(errno));
        // the replacement keeps the permissions of the file it replaces
        if (exists) (void)fchmod(fd, st.st_mode & 07777);
    }
    if (!(o->f = fdopen(fd, "wb"))) {
        const int e = errno;
        close(fd);
        if (o->tmp[0]) remove(o->tmp);
        return errmsg(err, n, "%s: cannot open: %s", path, strerror(e));
    }
    return 0;
}

int out_close(out_file *o, char *err, size_t n) {
    // fsync before the rename, so a crash never leaves a renamed file with missing data (a device
    // or FIFO written in place has nothing to sync)
    int ok = !ferror(o->f) && fflush(o->f) == 0 && (!o->tmp[0] || fsync(fileno(o->f)) == 0);
    int e = errno;
    if (fclose(o->f) && ok) ok = 0, e = errno;
    o->f = NULL;
    if (ok && o->tmp[0] && rename(o->tmp, o->target)) ok = 0, e = errno;
    if (!ok) {
        if (o->tmp[0]) remove(o->tmp);
        return errmsg(err, n, "%s: write failed: %s", o->path, strerror(e));
    }
    if (o->tmp[0]) sync_parent_dir(o->target);
    return 0;
}

void out_abort(out_file *o) {
    if (o->f) fclose(o->f);
    o->f = NULL;
    if (o->tmp[0]) remove(o->tmp);
}

int write_text_atomic(const char *path, const char *text, char *err, size_t n) {
    out_file o;
    if (out_open(&o, path, err, n)) return -1;
    fputs(text, o.f);
    return out_close(&o, err, n);
}

int copy_file(const char *from, const char *to, char *err, size_t n) {
    FILE *f = open_input_file(from, NULL, err, n);
    if (!f) return -1;
    out_file o;
    if (out_open(&o, to, err, n)) {
        fclose(f);
        return -1;
    }
    char buf[1 << 16];
    size_t got;
    while ((got = fread(buf, 1, sizeof buf, f)) > 0)
        if (fwrite(buf, 1, got, o.f) != got) break;
    const int bad = ferror(f) || ferror(o.f);
    fclose(f);
    if (bad) {
        out_abort(&o);
        return errmsg(err, n, "copying %s to %s: %s", from, to, strerror(errno));
    }
    return out_close(&o, err, n);
}

int same_file(const char *a, const char *b) {
    struct stat x, y;
    return !stat(a, &x) && !stat(b, &y) && x.st_dev == y.st_dev && x.st_ino == y.st_ino;
}
