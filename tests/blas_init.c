// blas_init.c: linked into every C test program, before main: the program runs on the OpenBLAS
// kernels the mtac command chooses (cli/blas_core.h, the same function), restarting itself once
// when they differ from OpenBLAS's own choice, so that the tests check the kernels users get.
// OpenBLAS has chosen its kernels by now: a shared library is initialised before the program.
// A core named in OPENBLAS_CORETYPE that OpenBLAS does not take (a name this build lacks) is an
// error here, not a silent fallback: a run meant for other kernels must run on them.
#include "blas_core.h"

#include <cblas.h>
#include <stdio.h>
#include <stdlib.h>
#include <strings.h>

// glibc calls a program's constructors with argc, argv and envp, as main.
__attribute__((constructor)) static void blas_init(int argc, char **argv) {
    (void)argc;
    if (blas_core_setenv()) restart_self(argv);
    const char *want = getenv("OPENBLAS_CORETYPE"), *core = openblas_get_corename();
    if (want && *want && core && strcasecmp(want, core)) {
        fprintf(stderr, "OPENBLAS_CORETYPE=%s, but OpenBLAS runs on its %s kernels (a core this build lacks?)\n", want, core);
        exit(2);
    }
}
