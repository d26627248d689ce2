#!/usr/bin/env bash
# quickstart_lm.sh: language modelling in a minute. Tokenizes the King James Bible, trains a ~0.9M-parameter baseline
# Transformer and the same model with MTA side by side, reports validation perplexity, plots the
# loss curves and samples from the MTA model. About a minute on 2 cores.
#   scripts/quickstart_lm.sh [STEPS]   (default 400)
set -euo pipefail
cd "$(dirname "$0")/.."
steps=${1:-400}
mtac=build/mtac
[ -x "$mtac" ] || { echo "quickstart_lm: build/mtac is missing: run scripts/setup.sh first" >&2; exit 1; }

[ -f data/kjv/train.bin ] || "$mtac" data --out data/kjv
for preset in lm1m-baseline lm1m; do
    out=runs/quickstart-$preset
    rm -rf "$out"
    echo "== $preset"
    "$mtac" train --preset "$preset" --steps "$steps" --warmup 40 --eval-every 100 --log-every 50 --out "$out"
done
echo
echo "== validation (64 batches of 8 x 128 bytes)"
for preset in lm1m-baseline lm1m; do
    printf '%-14s ' "$preset"
    "$mtac" eval --run runs/quickstart-$preset --batches 64
done
"$mtac" plot --out runs/quickstart-loss.png runs/quickstart-lm1m-baseline runs/quickstart-lm1m
echo
echo "== a sample from the MTA model"
"$mtac" sample --run runs/quickstart-lm1m --prompt "And God said, " --tokens 200 --temperature 0.8 --seed 1
