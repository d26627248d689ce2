// blas_core.h: which OpenBLAS kernels mtac runs on: one rule for the mtac command (main.c) and
// the C test programs (tests/blas_init.c), so that the tests check the kernels users get.
#ifndef MTAC_BLAS_CORE_H
#define MTAC_BLAS_CORE_H

// OpenBLAS 0.3.21 (Debian 12) does not recognise recent CPUs and falls back to its generic
// "Prescott" SSE3 kernels, several times slower than the AVX2/AVX-512 ones the CPU can run
// (docs/benchmarks.md). When that
// happened and the user chose no core (neither OPENBLAS_CORETYPE nor MTAC_KEEP_BLAS_CORE is
// set), sets OPENBLAS_CORETYPE to the kernels the CPU supports (SkylakeX with AVX-512, Haswell
// with AVX2) and MTAC_KEEP_BLAS_CORE=1 (the processes it starts, such as bench's PyTorch
// reference, inherit the choice), and returns 1: OpenBLAS reads the variable when it loads, so
// the process must restart (restart_self). Returns 0 when it changed nothing.
int blas_core_setenv(void);

// Executes the running program again, with argv and the present environment. Returns only if
// that failed (the caller carries on as it is).
void restart_self(char **argv);

#endif
