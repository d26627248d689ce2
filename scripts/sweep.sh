#!/usr/bin/env bash
# sweep.sh [CASES]  (SEED=N picks the random cases): the long form of the correctness sweeps, beyond what CI runs.
#   - test_attn_backends' combination sweep (64 step combinations x 5 shapes x dropout on/off) with
#     every strip size from 1 to 17 rows, 64 and the default, on 1 to 4 threads (MTAC_SWEEP=full);
#   - CASES random cases (default 2000) plus the 64 combinations against the PyTorch reference,
#     on both backends.
# Build first (scripts/setup.sh). With 1000 cases: 15 min of CPU time (42 min on a busy two-core machine).
set -euo pipefail
cd "$(dirname "$0")/.."
cases=${1:-2000}
MTAC_SWEEP=full build/test_attn_backends fused
seed=${SEED:-$RANDOM}
for backend in fused reference; do
    echo "sweep: $cases random cases (seed $seed; SEED=$seed repeats them) and the 64 combinations against PyTorch, $backend backend"
    MTAC_BACKEND=$backend /usr/bin/python3 tests/ref/check_against_torch.py --mtac build/mtac --cases "$cases" --seed "$seed" | grep -v "^case .* ok "
done
