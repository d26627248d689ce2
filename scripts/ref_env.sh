#!/usr/bin/env bash
# ref_env.sh: the Python environment of the pretrained-model references (docs/models.md): a venv of
# Debian's /usr/bin/python3 that sees its torch, with transformers, tokenizers, gguf and safetensors
# from PyPI, pinned (transformers 4.44 is the last that runs on Debian's torch 1.13).
#   scripts/ref_env.sh [VENV]           create or update VENV (default build/ref-venv); prints its python
#   scripts/ref_env.sh --llama [VENV]   also llama-cpp-python (builds llama.cpp from source, ~10 min
#                                       on 2 cores): the GGUF tokenizer and speed references
# Tests that need these skip when the venv is missing; scripts/test.sh makes it.
set -euo pipefail
cd "$(dirname "$0")/.."
llama=0
if [ "${1:-}" = --llama ]; then llama=1; shift; fi
venv=${1:-build/ref-venv}
pins=(transformers==4.44.2 tokenizers==0.19.1 gguf==0.19.0 safetensors==0.8.0 sentencepiece==0.2.3 jinja2==3.1.6)
if [ ! -x "$venv/bin/python" ]; then
    /usr/bin/python3 -m venv --system-site-packages "$venv" >&2
fi
if ! "$venv/bin/python" -c "import transformers, tokenizers, gguf, safetensors, jinja2, torch
assert transformers.__version__ == '4.44.2'" 2>/dev/null; then
    echo "ref_env: installing ${pins[*]} into $venv" >&2
    "$venv/bin/pip" install -q --disable-pip-version-check "${pins[@]}" >&2
fi
if [ "$llama" = 1 ] && ! "$venv/bin/python" -c "import llama_cpp" 2>/dev/null; then
    echo "ref_env: building llama-cpp-python==0.3.36 (llama.cpp from source)" >&2
    CMAKE_ARGS="-DGGML_NATIVE=ON -DGGML_BLAS=OFF" "$venv/bin/pip" install -q --disable-pip-version-check \
        llama-cpp-python==0.3.36 >&2
fi
# An absolute path: the tests run it from their own directories.
echo "$(cd "$venv" && pwd)/bin/python"
