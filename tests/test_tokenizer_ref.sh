#!/usr/bin/env bash
# test_tokenizer_ref.sh BUILD_DIR SOURCE_DIR: mtac's tokenizers against Hugging Face's tokenizers
# and llama.cpp (tests/ref/check_tokenizer.py). The reference python is $MTAC_REF_PYTHON (default
# BUILD_DIR/ref-venv/bin/python, made by scripts/ref_env.sh); without it the test is skipped (77).
# The GGUF checks need $MTAC_SMOLLM2_GGUF (scripts/get_smollm2.sh).
set -euo pipefail
build=$1 src=$2
py=${MTAC_REF_PYTHON:-$build/ref-venv/bin/python}
if [ ! -x "$py" ]; then
    echo "SKIP: no reference python at $py (scripts/ref_env.sh, or set MTAC_REF_PYTHON)"
    # scripts/test.sh made the venv: a reference test that cannot find it is a failure, not a skip.
    [ "${MTAC_REF_REQUIRED:-0}" = 1 ] && exit 1
    exit 77
fi
exec "$py" "$src/tests/ref/check_tokenizer.py" --tool "$build/tok_tool"
