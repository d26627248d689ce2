// blas_core.c: see blas_core.h.
#include "blas_core.h"

#include <cblas.h>
#include <stdlib.h>
#include <strings.h>
#include <unistd.h>

int blas_core_setenv(void) {
    if (getenv("OPENBLAS_CORETYPE") || getenv("MTAC_KEEP_BLAS_CORE")) return 0;
    const char *core = openblas_get_corename();
    if (!core || strcasecmp(core, "prescott")) return 0;
    const char *want = __builtin_cpu_supports("avx512f") ? "SkylakeX" : __builtin_cpu_supports("avx2") ? "Haswell" : NULL;
    return want && !setenv("MTAC_KEEP_BLAS_CORE", "1", 1) && !setenv("OPENBLAS_CORETYPE", want, 1);
}

void restart_self(char **argv) {
    // The binary's own path, not /proc/self/exe: the process takes its name (ps, top, pkill,
    // /proc/PID/comm) from the path it was executed as, and would be called "exe".
    char self[4096];
    const ssize_t len = readlink("/proc/self/exe", self, sizeof self - 1);
    if (len <= 0) return;
    self[len] = 0;
    execv(self, argv);
}
