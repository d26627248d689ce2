#!/usr/bin/env bash
# quickstart.sh: the main job. The paper's toy task in a few minutes: trains the baseline
# Transformer and the MTA toy model on generated samples (seed 42), prints the sequence error
# rate and greedy exact match of both, and draws the error curves and where each model attends.
#   scripts/quickstart.sh [extra mtac toy options]
# The full reduced experiment (3 seeds, about 30 minutes) is `build/mtac toy`; language modelling
# on the King James Bible is scripts/quickstart_lm.sh.
set -euo pipefail
cd "$(dirname "$0")/.."
mtac=build/mtac
[ -x "$mtac" ] || { echo "quickstart: build/mtac is missing: run scripts/setup.sh first" >&2; exit 1; }
# --force: a second quickstart replaces the first one's results (mtac toy refuses without it)
"$mtac" toy --quick --out runs/toy-quick --force "$@"
echo
echo "pictures: runs/toy-quick/error_curves.png (test error against step)"
echo "          runs/toy-quick/attention.png (where each model attends on a test sample)"
