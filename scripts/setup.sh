#!/usr/bin/env bash
# setup.sh: install what mtac needs on Debian/Ubuntu (apt-get), then build it into build/.
#   scripts/setup.sh            install packages (with sudo when not root) and build
#   MTAC_NO_TORCH=1 scripts/setup.sh   skip PyTorch (the reference and Python tests are then skipped)
set -euo pipefail
cd "$(dirname "$0")/.."

pkgs=(build-essential cmake pkg-config libopenblas-openmp-dev libcjson-dev libpcre2-dev libcmocka-dev libcairo2-dev fonts-dejavu-core bible-kjv)
# docs/lm_compare.md's second corpus and held-out text: public-domain books from dictd packages.
pkgs+=(dict-gcide dict-devil)
# Data-parallel training (docs/distributed.md): OpenMPI's library and mpirun.
pkgs+=(libopenmpi-dev openmpi-bin)
# The fuzz targets (scripts/fuzz.sh): clang, its libFuzzer and sanitizer runtimes, its OpenMP.
pkgs+=(clang libclang-rt-14-dev libomp-14-dev)
# The independent PyTorch reference (tests/ref) runs on Debian's torch, offline.
# The Python package (python/, pip install into a venv that sees Debian's torch) and its tests.
[ "${MTAC_NO_TORCH:-0}" = 1 ] || pkgs+=(python3 python3-numpy python3-torch python3-pytest python3-venv python3-pip python3-setuptools python3-wheel)

missing=()
for p in "${pkgs[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
    echo "setup: installing ${missing[*]}"
    SUDO=""
    [ "$(id -u)" = 0 ] || SUDO=sudo
    $SUDO apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

# Where nvcc is: NVIDIA's cuobjdump and nvdisasm from PyPI into .cuda-tools/ (scripts/cuda_tools.sh),
# for the checks of the CUDA backend's compiled code (CTest test_sass); they skip without them.
if command -v nvcc >/dev/null || [ -x /usr/local/cuda/bin/nvcc ]; then
    scripts/cuda_tools.sh || echo "setup: scripts/cuda_tools.sh failed: the SASS checks (test_sass) will skip" >&2
fi

cmake -S . -B build -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build build -j"$(nproc)"
echo "setup: built build/mtac"
