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

// Reads f to its end (a file, a pipe, standard input) into *buf, malloc'd (NULL when f held
// nothing), *len bytes. 0, or -1 on a read error or out of memory (*buf then freed and NULL).
int read_stream(FILE *f, unsigned char **buf, size_t *len);

// A file being written (every file mtac writes goes through these). A regular file, or a path
// where nothing is yet, is replaced atomically: written to "<target>.tmp" beside it, fsync,
// renamed over it, so a reader sees the old file or the new one, never part of one. A symlink is
// followed: the file it points to (target) is replaced, the link kept. Anything else but a
// directory (a device such as /dev/null, a FIFO) is written in place: a rename would replace the
// device node itself. A directory is refused.
typedef struct {
    FILE *f;              // write to this
    char path[4096];      // the path given, for messages
    char target[4096];    // where the data ends up: path, or the file its symlinks lead to
    char tmp[4200];       // the temporary file; empty when written in place
} out_file;

// Opens path for writing (binary). 0, or -1 + a message naming path (nothing created).
int out_open(out_file *o, const char *path, char *err, size_t n);
// Flushes, syncs and closes o, then renames the temporary file into place. 0, or -1 + message
// (the temporary file removed, the old file untouched).
int out_close(out_file *o, char *err, size_t n);
// Gives up on o: closes it and removes the temporary file (the old file untouched).
void out_abort(out_file *o);

// Writes text to path atomically as out_open does. 0, or -1 + message.
int write_text_atomic(const char *path, const char *text, char *err, size_t n);

// Copies the file from to path to, written as out_open does. 0, or -1 + message naming the file.
int copy_file(const char *from, const char *to, char *err, size_t n);

// Whether a and b name the same existing file (after symlinks: same device and inode).
int same_file(const char *a, const char *b);

#endif
