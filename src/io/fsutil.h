// fsutil.h: small file-system helpers.
#ifndef MTAC_FSUTIL_H
#define MTAC_FSUTIL_H

// Creates a directory and its missing parents (like mkdir -p). 0 on success, -1 with errno set.
int mkdir_p(const char *path);

#include <stddef.h>
#include <stdio.h>

// Opens a file the program was given to read (a config, a model, a problem, a shard) for binary
// reading. Only regular files are accepted: opening a FIFO for reading blocks until a writer
// appears (forever, when none does), and devices, sockets and directories have no size to trust.
// The check is made on the open descriptor, before anything can block, so nothing can swap the
// file in between. *size (when non-NULL) gets the file's size in bytes. NULL with a message that
// names the path on failure.
FILE *open_input_file(const char *path, size_t *size, char *err, size_t n);

// Reads a whole text file (at most max_bytes; a regular file, as open_input_file) into a
// NUL-terminated malloc'd string; NULL with a message on failure.
char *read_text_file(const char *path, size_t max_bytes, char *err, size_t n);

// Writes text to path atomically: a temporary file beside it, fsync, rename. 0, or -1 + message.
int write_text_atomic(const char *path, const char *text, char *err, size_t n);

#endif
