#!/usr/bin/env bash
# cuda_tools.sh: NVIDIA's cuobjdump and nvdisasm, which the CUDA toolkit's Debian-less install here
# lacks, from their PyPI wheels (nvidia-cuda-cuobjdump, nvidia-cuda-nvdisasm; pinned, checksummed)
# into .cuda-tools/bin (git-ignored), where tests/tools/check_sass.py finds them (CTest test_sass).
# A newer toolkit's reader reads an older nvcc's code. scripts/setup.sh runs it; without the registry
# it fails and the SASS tests report skipped (fail under CI=true).
#   scripts/cuda_tools.sh       fetch and unpack, unless .cuda-tools/bin already has both
#   scripts/cuda_tools.sh --help
set -euo pipefail
case "${1-}" in
-h | --help)
    awk 'NR > 1 && /^#/ { sub(/^# ?/, ""); print; next } NR > 1 { exit }' "$0"
    exit 0
    ;;
"") ;;
*)
    echo "cuda_tools.sh: unknown argument '$1' (see --help)" >&2
    exit 2
    ;;
esac
cd "$(dirname "$0")/.."
dir=.cuda-tools
version=13.5.37
# wheel name -> sha256 of nvidia_<name with _>-13.5.37-py3-none-manylinux2014_x86_64.manylinux_2_17_x86_64.whl
declare -A sha=(
    [nvidia-cuda-cuobjdump]=38780fee50863252a0b8926357faa91615ca1c8346490563f33a06100cd73f58
    [nvidia-cuda-nvdisasm]=d3fdbdd49fa53e2e4aacd3db8259d052bd2b049ececdcb69e92e083c6728e7ca
)
if [ "$(uname -m)" != x86_64 ]; then
    echo "cuda_tools: the pinned wheels are x86-64 ones; this is $(uname -m)" >&2
    exit 1
fi
if "$dir/bin/cuobjdump" --version >/dev/null 2>&1 && "$dir/bin/nvdisasm" --version >/dev/null 2>&1; then exit 0; fi
mkdir -p "$dir/wheels" "$dir/bin"
for name in "${!sha[@]}"; do
    wheel=$dir/wheels/${name//-/_}-$version-py3-none-manylinux2014_x86_64.manylinux_2_17_x86_64.whl
    if [ ! -s "$wheel" ] || ! echo "${sha[$name]}  $wheel" | sha256sum -c --status; then
        echo "cuda_tools: downloading $name==$version from PyPI into $dir/wheels" >&2
        python3 -m pip download -q --no-deps --disable-pip-version-check --only-binary=:all: \
            --platform manylinux2014_x86_64 "$name==$version" -d "$dir/wheels" >&2
        echo "${sha[$name]}  $wheel" | sha256sum -c --status ||
            { echo "cuda_tools: $wheel: checksum differs from the one this script knows" >&2; exit 1; }
    fi
    # The wheel is a zip: its nvidia/cu13/bin/ programs, made executable (the zip may not say so).
    python3 - "$wheel" "$dir/bin" <<'PY'
import os, shutil, sys, zipfile
with zipfile.ZipFile(sys.argv[1]) as z:
    for info in z.infolist():
        if info.filename.startswith("nvidia/cu13/bin/") and not info.is_dir():
            out = os.path.join(sys.argv[2], os.path.basename(info.filename))
            with z.open(info) as src, open(out + ".tmp", "wb") as dst:
                shutil.copyfileobj(src, dst)
            os.chmod(out + ".tmp", 0o755)
            os.replace(out + ".tmp", out)
PY
done
"$dir/bin/cuobjdump" --version >/dev/null && "$dir/bin/nvdisasm" --version >/dev/null
echo "cuda_tools: $("$dir/bin/cuobjdump" --version | tail -1) in $dir/bin" >&2
