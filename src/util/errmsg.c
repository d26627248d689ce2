// errmsg.c: see errmsg.h.
#include "util/errmsg.h"

#include <stdarg.h>
#include <stdio.h>

int errmsg(char *err, size_t n, const char *fmt, ...) {
    if (err && n) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(err, n, fmt, ap);
        va_end(ap);
    }
    return -1;
}
