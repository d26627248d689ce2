#!/usr/bin/env bash
# test_install.sh BUILD_DIR SOURCE_DIR SANITIZE(0|1): installs libmtac from BUILD_DIR and builds
# examples/ against it, as a user would:
# - README.md's commands, exactly as written there (read from README.md, not copied here): its
#   `cmake --install build --prefix "$HOME/.local"` line, then the block marked for this test
#   (pkg-config), in a scratch directory whose `build` is BUILD_DIR and `examples` SOURCE_DIR's,
#   with HOME a temporary directory and no PKG_CONFIG_PATH or LD_LIBRARY_PATH of the caller's;
# - with find_package(mtac) (mtac::mtac, the shared library, and mtac::mtac_static);
# runs each program; checks that the shared library exports only what include/mta.h declares and
# links none of the CLI's libraries.
set -euo pipefail
build=$(cd "$1" && pwd) src=$(cd "$2" && pwd) sanitize=$3
tmp=$(mktemp -d "${TMPDIR:-/tmp}/mtac_install.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
fail() { echo "test_install: FAIL: $*" >&2; exit 1; }

# README.md's commands.
install_line=$(grep -m1 -E '^cmake --install build --prefix "\$HOME/\.local"' "$src/README.md") ||
    fail "README.md has no line 'cmake --install build --prefix \"\$HOME/.local\"'"
block=$(awk '/<!-- tests\/test_install.sh runs the next block -->/ {m = 1; next}
             m == 1 && /^```/ {m = 2; next}
             m == 2 && /^```/ {exit}
             m == 2 {print}' "$src/README.md")
[ -n "$block" ] || fail "README.md has no block marked '<!-- tests/test_install.sh runs the next block -->'"
mkdir -p "$tmp/home" "$tmp/work" "$tmp/bin"
ln -s "$build" "$tmp/work/build"
ln -s "$src/examples" "$tmp/work/examples"
path=$PATH
if [ "$sanitize" = 1 ]; then
    # The sanitizer build's libmtac needs its runtime: the one thing added to the README's `cc`.
    printf '#!/bin/sh\nexec %s -fsanitize=address,undefined "$@"\n' "$(command -v cc)" >"$tmp/bin/cc"
    chmod +x "$tmp/bin/cc"
    path=$tmp/bin:$PATH
fi
printf '%s\n' "$install_line" "$block" >"$tmp/readme.sh"
echo "test_install: running README.md's commands:"
sed 's/^/  /' "$tmp/readme.sh"
(cd "$tmp/work" && env -u PKG_CONFIG_PATH -u LD_LIBRARY_PATH HOME="$tmp/home" PATH="$path" \
    bash -euo pipefail "$tmp/readme.sh" >"$tmp/readme.out" 2>&1) ||
    { cat "$tmp/readme.out" >&2; fail "README.md's commands failed (above)"; }
sed 's/^/  /' "$tmp/readme.out"

prefix=$tmp/home/.local
lib=$(find "$prefix" -name 'libmtac.so.*.*' | head -n1)
[ -n "$lib" ] || fail "no libmtac.so installed"
[ -f "$prefix/include/mta.h" ] || fail "mta.h not installed"
find "$prefix" -name libmtac.a | grep -q . || fail "no libmtac.a installed"
pc=$(find "$prefix" -name mtac.pc | head -n1)
[ -n "$pc" ] || fail "no mtac.pc installed"
# mtac.pc: the shared library needs nothing but -lmtac; a static link, its private libraries
# (OpenMP, BLAS, libdl for the CUDA module, libm).
grep -q '^Libs: -L${libdir} -lmtac$' "$pc" || fail "mtac.pc: $(grep '^Libs:' "$pc")"
for l in -ldl -lm; do grep -q "^Libs.private:.* $l\b" "$pc" || fail "mtac.pc: Libs.private lacks $l"; done

# Exported symbols: exactly the functions mta.h declares.
declared=$(grep -oE '\bmta_[a-z_]+\(' "$src/include/mta.h" | tr -d '(' | sort -u)
exported=$(nm -D --defined-only "$lib" | awk '{print $3}' | sort -u)
[ "$declared" = "$exported" ] || fail "exported symbols differ from mta.h: $(diff <(echo "$declared") <(echo "$exported") | grep '^[<>]' | tr '\n' ' ')"
if readelf -d "$lib" | grep NEEDED | grep -E 'cjson|png|cairo|mpi'; then fail "libmtac links a CLI library"; fi

flags=()
[ "$sanitize" = 1 ] && flags=(-DCMAKE_C_FLAGS=-fsanitize=address,undefined)
cmake -S "$src/examples" -B "$tmp/ex" -DCMAKE_PREFIX_PATH="$prefix" -DCMAKE_BUILD_TYPE=Release "${flags[@]}" >/dev/null
cmake --build "$tmp/ex" >/dev/null
"$tmp/ex/mta_example"
"$tmp/ex/mta_example_static"
readelf -d "$tmp/ex/mta_example" | grep -q 'NEEDED.*libmtac.so' || fail "mta_example does not use libmtac.so"
readelf -d "$tmp/work/mta_example" | grep -q 'NEEDED.*libmtac.so' || fail "README's mta_example does not use libmtac.so"
echo "test_install: passed"
