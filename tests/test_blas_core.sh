#!/usr/bin/env bash
# test_blas_core.sh MTAC TESTPROG: the C test programs run on the OpenBLAS kernels mtac runs on
# (one rule: cli/blas_core.c, applied to the tests by tests/blas_init.c), as a user runs them
# (OPENBLAS_CORETYPE unset, with and without MTAC_KEEP_BLAS_CORE=1); a core the user names is the
# one both run on, and a test program refuses a name OpenBLAS does not take rather than run on
# other kernels. OPENBLAS_VERBOSE=2 makes OpenBLAS print the core it loads ("Core: X") at each
# start: the last one is the one used.
set -u
MTAC=$1 PROG=$2
fail=0
bad() { echo "FAIL: $*"; fail=$((fail + 1)); }
# core_of [NAME=VALUE...] PROGRAM [ARGS...]: the core PROGRAM runs on
core_of() { env -u OPENBLAS_CORETYPE -u MTAC_KEEP_BLAS_CORE OPENBLAS_VERBOSE=2 "$@" 2>&1 >/dev/null | grep -o 'Core: [A-Za-z0-9]*' | tail -1; }

for keep in "" MTAC_KEEP_BLAS_CORE=1; do
    want=$(core_of $keep "$MTAC" --help) got=$(core_of $keep "$PROG")
    [ -n "$want" ] || { echo "skipped: this OpenBLAS does not print its core (OPENBLAS_VERBOSE)"; exit 77; }
    [ "$got" = "$want" ] || bad "${keep:-by default}: mtac runs on '$want', the test program on '$got'"
done
for c in Prescott Sandybridge; do
    [ "$c" = Sandybridge ] && ! grep -qw avx /proc/cpuinfo 2>/dev/null && continue
    got=$(core_of OPENBLAS_CORETYPE=$c "$PROG")
    [ "$got" = "Core: $c" ] || bad "OPENBLAS_CORETYPE=$c: the test program runs on '$got'"
    got=$(core_of OPENBLAS_CORETYPE=$c "$MTAC" --help)
    [ "$got" = "Core: $c" ] || bad "OPENBLAS_CORETYPE=$c: mtac runs on '$got'"
done
err=$(OPENBLAS_CORETYPE=NoSuchCore "$PROG" 2>&1 >/dev/null)
rc=$?
[ $rc = 2 ] && [[ "$err" == *"OPENBLAS_CORETYPE=NoSuchCore, but OpenBLAS runs on"* ]] ||
    bad "OPENBLAS_CORETYPE=NoSuchCore: the test program exits $rc, saying: ${err:0:300}"
[ $fail = 0 ] && echo "test_blas_core: passed" || echo "test_blas_core: $fail failed"
exit $((fail > 0))
