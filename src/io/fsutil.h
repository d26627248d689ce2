// fsutil.h: small file-system helpers.
#ifndef MTAC_FSUTIL_H
#define MTAC_FSUTIL_H

// Creates a directory and its missing parents (like mkdir -p). 0 on success, -1 with errno set.
int mkdir_p(const char *path);

#endif
