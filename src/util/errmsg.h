// errmsg.h: the library's way of reporting an error: a formatted message into the caller's
// buffer, and -1 to return.
#ifndef MTAC_ERRMSG_H
#define MTAC_ERRMSG_H

#include <stddef.h>

// Writes the message into err (when err and n are non-zero) and returns -1.
int errmsg(char *err, size_t n, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

#endif
