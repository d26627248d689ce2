#!/usr/bin/env bash
# test_install.sh BUILD_DIR SOURCE_DIR SANITIZE(0|1): installs libmtac from BUILD_DIR into a
# temporary prefix and builds examples/ against it: with find_package(mtac) (mtac::mtac, the
# shared library, and mtac::mtac_static) and with pkg-config; runs each program; checks that the
# shared library exports only what include/mta.h declares and links none of the CLI's libraries.
set -euo pipefail
build=$1 src=$2 sanitize=$3
tmp=$(mktemp -d "${TMPDIR:-/tmp}/mtac_install.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
fail() { echo "test_install: FAIL: $*" >&2; exit 1; }

cmake --install "$build" --prefix "$tmp/prefix" >/dev/null
lib=$(find "$tmp/prefix" -name 'libmtac.so.*.*' | head -n1)
[ -n "$lib" ] || fail "no libmtac.so installed"
[ -f "$tmp/prefix/include/mta.h" ] || fail "mta.h not installed"
find "$tmp/prefix" -name libmtac.a | grep -q . || fail "no libmtac.a installed"

# Exported symbols: exactly the functions mta.h declares.
declared=$(grep -oE '\bmta_[a-z_]+\(' "$src/include/mta.h" | tr -d '(' | sort -u)
exported=$(nm -D --defined-only "$lib" | awk '{print $3}' | sort -u)
[ "$declared" = "$exported" ] || fail "exported symbols differ from mta.h: $(diff <(echo "$declared") <(echo "$exported") | grep '^[<>]' | tr '\n' ' ')"
if readelf -d "$lib" | grep NEEDED | grep -E 'cjson|png|mpi'; then fail "libmtac links a CLI library"; fi

flags=()
[ "$sanitize" = 1 ] && flags=(-DCMAKE_C_FLAGS=-fsanitize=address,undefined)
cmake -S "$src/examples" -B "$tmp/ex" -DCMAKE_PREFIX_PATH="$tmp/prefix" -DCMAKE_BUILD_TYPE=Release "${flags[@]}" >/dev/null
cmake --build "$tmp/ex" >/dev/null
"$tmp/ex/mta_example"
"$tmp/ex/mta_example_static"
readelf -d "$tmp/ex/mta_example" | grep -q 'NEEDED.*libmtac.so' || fail "mta_example does not use libmtac.so"

# pkg-config, from the installed mtac.pc (which finds its prefix from its own place).
pc=$(dirname "$(find "$tmp/prefix" -name mtac.pc | head -n1)")
libdir=$(PKG_CONFIG_PATH=$pc pkg-config --variable=libdir mtac)
cc_flags=()
[ "$sanitize" = 1 ] && cc_flags=(-fsanitize=address,undefined)
# shellcheck disable=SC2046
cc "${cc_flags[@]}" -std=c11 -O2 "$src/examples/mta_example.c" -o "$tmp/mta_example_pc" \
    $(PKG_CONFIG_PATH=$pc pkg-config --cflags --libs mtac) -lm -Wl,-rpath,"$libdir"
"$tmp/mta_example_pc"
echo "test_install: passed"
