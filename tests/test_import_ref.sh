#!/usr/bin/env bash
# test_import_ref.sh: the GGUF dequantizers and `mtac import` against the reference Python
# (transformers, gguf; scripts/ref_env.sh makes it).
#   test_import_ref.sh BUILD_DIR SOURCE_DIR dequant|models
# The python is $MTAC_REF_PYTHON, else BUILD_DIR/ref-venv/bin/python; without it (or without
# the packages) the test is skipped (exit 77).
set -euo pipefail
build=$1 src=$2 what=$3
py=${MTAC_REF_PYTHON:-$build/ref-venv/bin/python}
if [ ! -x "$py" ] || ! "$py" -c 'import gguf, numpy, transformers, torch' 2>/dev/null; then
    echo "SKIP: no reference python with gguf, transformers and torch at $py (scripts/ref_env.sh makes one; or set MTAC_REF_PYTHON)"
    # scripts/test.sh made the venv: a reference test that cannot find it is a failure, not a skip.
    [ "${MTAC_REF_REQUIRED:-0}" = 1 ] && exit 1
    exit 77
fi
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
case $what in
    dequant) "$py" "$src/tests/ref/check_dequant.py" "$build/import_tool" "$work" ;;
    models) "$py" "$src/tests/ref/check_import.py" "$build/mtac" "$build/import_tool" "$work" ;;
esac
