#!/usr/bin/env bash
# test_python.sh BUILD_DIR SOURCE_DIR SANITIZE(0|1): installs the mtac Python package with
# README.md's commands, exactly as written there (the block marked for this test, read from
# README.md: a venv of Debian's /usr/bin/python3 that sees its torch, then pip install
# --no-build-isolation ./python), run in BUILD_DIR/python-readme, whose `python` is SOURCE_DIR's
# python/ (its .venv is kept between runs; BUILD_DIR/python-venv points to it), and runs the package's
# pytest suite (python/tests). The package's libmtac is built by CMake in BUILD_DIR/python-lib
# (MTAC_CMAKE_BUILD_DIR: kept, so a rebuild is incremental). Exit 77 (skipped) without torch or
# pytest, and in the sanitizer build.
set -euo pipefail
build=$(cd "$1" && pwd) src=$(cd "$2" && pwd) sanitize=$3
py=/usr/bin/python3
if [ "$sanitize" = 1 ]; then
    echo "test_python: skipped in the ASan/UBSan build: the sanitizer runtime would have to be preloaded into python (LD_PRELOAD) ahead of torch; the release build runs these tests"
    exit 77
fi
if ! $py -c 'import torch, pytest' 2>/dev/null; then
    echo "test_python: skipped: $py cannot import torch and pytest (scripts/setup.sh installs python3-torch, python3-pytest)"
    exit 77
fi
block=$(awk '/<!-- tests\/test_python.sh runs the next block -->/ {m = 1; next}
             m == 1 && /^```/ {m = 2; next}
             m == 2 && /^```/ {exit}
             m == 2 {print}' "$src/README.md")
[ -n "$block" ] || { echo "test_python: FAIL: README.md has no block marked '<!-- tests/test_python.sh runs the next block -->'" >&2; exit 1; }
work=$build/python-readme
venv=$work/.venv
mkdir -p "$work"
ln -sfn "$src/python" "$work/python"
# build/python-venv/bin/python, the name the docs' benchmark commands use (an older test's real
# venv there is replaced).
[ -L "$build/python-venv" ] || rm -rf "$build/python-venv"
ln -sfn python-readme/.venv "$build/python-venv"
echo "test_python: running README.md's commands:"
printf '%s\n' "$block" | sed 's/^/  /'
# The package's libmtac gets the cuda-emu backend, on which python/tests/test_torch_device.py runs
# the path of CUDA tensors with CPU tensors; not the CUDA module (-DMTAC_CUDA=OFF: no test here
# needs it, and nvcc would add minutes; the GPU check, scripts/gpu_check.sh, carries one).
(cd "$work" && MTAC_CMAKE_BUILD_DIR=$build/python-lib MTAC_CMAKE_ARGS="-DMTAC_CUDA_EMU=ON -DMTAC_CUDA=OFF ${MTAC_CMAKE_ARGS:-}" \
    CMAKE_BUILD_PARALLEL_LEVEL=${CMAKE_BUILD_PARALLEL_LEVEL:-$(nproc)} bash -euo pipefail -c "$block") ||
    { echo "test_python: FAIL: README.md's commands failed (above)" >&2; exit 1; }
# Outside the source tree, so that `import mtac` is the installed package.
cd "$build"
exec "$venv/bin/python" -m pytest -q -p no:cacheprovider "$src/python/tests"
