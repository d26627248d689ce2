// fsutil.h: small file-system helpers.
#ifndef MTAC_FSUTIL_H
#define MTAC_FSUTIL_H

// Creates a directory and its missing parents (like mkdir -p). 0 on success, -1 with errno set.
int mkdir_p(const char *path);

#include <stddef.h>

// Reads a whole text file (at most max_bytes) into a NUL-terminated malloc'd string; NULL with a
// message on failure.
char *read_text_file(const char *path, size_t max_bytes, char *err, size_t n);

// Writes text to path atomically: a temporary file beside it, fsync, rename. 0, or -1 + message.
int write_text_atomic(const char *path, const char *text, char *err, size_t n);

#endif
