// fuzz_util.c: see fuzz_util.h.
#define _GNU_SOURCE  // memfd_create
#include "fuzz_util.h"

#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

static int write_all(int fd, const uint8_t *data, size_t size) {
    size_t done = 0;
    while (done < size) {
        ssize_t w = pwrite(fd, data + done, size - done, (off_t)done);
        if (w <= 0) return -1;
        done += (size_t)w;
    }
    return 0;
}

const char *fuzz_file(const uint8_t *data, size_t size) {
    static int fd = -1;
    static char path[64];
    if (fd < 0) {
        fd = memfd_create("mtac-fuzz", 0);
        fuzz_require(fd >= 0, "memfd_create");
        snprintf(path, sizeof path, "/proc/self/fd/%d", fd);
    }
    // Opening /proc/self/fd/N opens the memfd afresh (its own offset), so readers see a plain
    // regular file of exactly size bytes.
    fuzz_require(ftruncate(fd, 0) == 0 && write_all(fd, data, size) == 0, "writing the memfd");
    return path;
}

static char g_dir[4096];

// The directory is flat (the targets write plain files into it), so removing it is one level.
static void remove_dir(void) {
    DIR *d = opendir(g_dir);
    if (!d) return;
    struct dirent *e;
    char path[8192];
    while ((e = readdir(d))) {
        if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, "..")) continue;
        snprintf(path, sizeof path, "%s/%s", g_dir, e->d_name);
        unlink(path);
    }
    closedir(d);
    rmdir(g_dir);
}

const char *fuzz_dir(void) {
    if (!g_dir[0]) {
        const char *tmp = getenv("TMPDIR");
        snprintf(g_dir, sizeof g_dir, "%s/mtac-fuzz-XXXXXX", tmp && *tmp ? tmp : "/tmp");
        fuzz_require(mkdtemp(g_dir) != NULL, "mkdtemp");
        atexit(remove_dir);
    }
    return g_dir;
}

const char *fuzz_dir_path(const char *name) {
    static char path[8192];
    snprintf(path, sizeof path, "%s/%s", fuzz_dir(), name);
    return path;
}

const char *fuzz_dir_file(const char *name, const uint8_t *data, size_t size) {
    const char *path = fuzz_dir_path(name);
    FILE *f = fopen(path, "wb");
    fuzz_require(f != NULL, "creating a file in the temporary directory");
    int ok = size == 0 || fwrite(data, 1, size, f) == size;
    ok &= fclose(f) == 0;
    fuzz_require(ok, "writing a file in the temporary directory");
    return path;
}

void fuzz_require(int ok, const char *what) {
    if (ok) return;
    fprintf(stderr, "fuzz: property violated: %s\n", what);
    abort();
}
