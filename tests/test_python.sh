#!/usr/bin/env bash
# test_python.sh BUILD_DIR SOURCE_DIR SANITIZE(0|1): installs the mtac Python package
# (pip install ./python) into a virtual environment in BUILD_DIR that sees Debian's torch
# (--system-site-packages), offline (--no-build-isolation --no-index), and runs its pytest suite
# (python/tests). The package's libmtac is built by CMake in BUILD_DIR/python-lib (kept, so a
# rebuild is incremental). Exit 77 (skipped) without torch or pytest, and in the sanitizer build.
set -euo pipefail
build=$1 src=$2 sanitize=$3
py=/usr/bin/python3
if [ "$sanitize" = 1 ]; then
    echo "test_python: skipped in the ASan/UBSan build: the sanitizer runtime would have to be preloaded into python (LD_PRELOAD) ahead of torch; the release build runs these tests"
    exit 77
fi
if ! $py -c 'import torch, pytest' 2>/dev/null; then
    echo "test_python: skipped: $py cannot import torch and pytest (scripts/setup.sh installs python3-torch, python3-pytest)"
    exit 77
fi
venv=$build/python-venv
[ -x "$venv/bin/python" ] || $py -m venv --system-site-packages "$venv"
MTAC_CMAKE_BUILD_DIR=$build/python-lib CMAKE_BUILD_PARALLEL_LEVEL=${CMAKE_BUILD_PARALLEL_LEVEL:-$(nproc)} \
    "$venv/bin/python" -m pip install --quiet --no-build-isolation --no-index --no-deps "$src/python"
# Outside the source tree, so that `import mtac` is the installed package.
cd "$build"
exec "$venv/bin/python" -m pytest -q -p no:cacheprovider "$src/python/tests"
