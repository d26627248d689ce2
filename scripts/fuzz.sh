#!/usr/bin/env bash
# fuzz.sh: coverage-guided fuzzing of every reader of outside input (docs/fuzzing.md).
#   scripts/fuzz.sh [SECONDS] [TARGET...]
# builds the libFuzzer targets with clang into build-fuzz/ (ASan + UBSan), writes their seeds, and
# runs each target (all by default: safetensors shard model_config train_config attn_problem
# checkpoint toyplan tokenizer_json gguf) for SECONDS (default 60), one after the other. Prints each target's runs,
# speed, coverage and corpus, and whether it found anything; exits 1 if any target crashed.
#   build-fuzz/corpus/<target>/    what each target found interesting (kept: later runs go on from it)
#   build-fuzz/crashes/<target>/   inputs that crashed it (replay: build-fuzz/tests/fuzz/fuzz_<target> FILE)
#   build-fuzz/logs/<target>.log   libFuzzer's output
#   build-fuzz/summary.md          the table of the last run
# FUZZ_ARGS adds libFuzzer options to every run (e.g. FUZZ_ARGS=-fork=4: four processes). Without clang and its
# libFuzzer runtime (Debian: clang, libclang-rt-14-dev) it says so and exits 0.
set -euo pipefail
cd "$(dirname "$0")/.."

seconds=${1:-60}
[[ "$seconds" =~ ^[0-9]+$ ]] && [ "$seconds" -gt 0 ] || { echo "usage: scripts/fuzz.sh [SECONDS] [TARGET...]" >&2; exit 2; }
shift || true
all=(safetensors shard model_config train_config attn_problem checkpoint toyplan tokenizer_json gguf)
targets=("$@")
[ ${#targets[@]} -gt 0 ] || targets=("${all[@]}")
for t in "${targets[@]}"; do
    [[ " ${all[*]} " == *" $t "* ]] || { echo "fuzz: unknown target '$t' (targets: ${all[*]})" >&2; exit 2; }
done

# libFuzzer is part of clang's runtime library package: check that a fuzzer links, not just clang.
probe=$(mktemp -d)
trap 'rm -rf "$probe"' EXIT
echo 'int LLVMFuzzerTestOneInput(const unsigned char *d, unsigned long n) { (void)d; (void)n; return 0; }' > "$probe/p.c"
if ! command -v clang >/dev/null || ! clang -fsanitize=fuzzer,address,undefined "$probe/p.c" -o "$probe/p" 2>/dev/null; then
    echo "fuzz: SKIPPED: clang with libFuzzer not found (Debian: apt-get install clang libclang-rt-14-dev libomp-14-dev, as scripts/setup.sh does)"
    exit 0
fi

out=build-fuzz
cmake -S . -B "$out" -DCMAKE_C_COMPILER=clang -DMTAC_FUZZ=ON -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
cmake --build "$out" -j"$(nproc)" --target fuzz_all
rm -rf "$out/seeds"
"$out/tests/fuzz/fuzz_make_seeds" "$out/seeds" tests/fixtures

# The targets run one thread each, with their temporary files in a directory of the build.
export OMP_NUM_THREADS=1 TMPDIR="$PWD/$out/tmp"
mkdir -p "$TMPDIR" "$out/logs"

dict_of() {
    case $1 in
        model_config | train_config | toyplan | tokenizer_json) echo tests/fuzz/dict/json.dict ;;
        safetensors | attn_problem | checkpoint) echo tests/fuzz/dict/safetensors.dict ;;
        shard) echo tests/fuzz/dict/shard.dict ;;
        gguf) echo tests/fuzz/dict/gguf.dict ;;
    esac
}

summary="$out/summary.md"
{
    echo "| target | seconds | runs | exec/s | cov | ft | corpus (inputs/bytes) | result |"
    echo "|---|---|---|---|---|---|---|---|"
} > "$summary"
failed=0
for t in "${targets[@]}"; do
    corpus="$out/corpus/$t" crashes="$out/crashes/$t" log="$out/logs/$t.log"
    mkdir -p "$corpus" "$crashes"
    before=$(ls "$crashes" | wc -l)
    echo "fuzz: $t for ${seconds}s ..."
    rc=0
    # shellcheck disable=SC2086  # FUZZ_ARGS is a list of options
    "$out/tests/fuzz/fuzz_$t" -max_total_time="$seconds" -print_final_stats=1 -timeout=25 \
        -artifact_prefix="$crashes/" -dict="$(dict_of "$t")" ${FUZZ_ARGS:-} \
        "$corpus" "$out/seeds/$t" "tests/fuzz/regress/$t" >"$log" 2>&1 || rc=$?
    runs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -1)
    speed=$(sed -n 's/^stat::average_exec_per_sec: *//p' "$log" | tail -1)
    # libFuzzer's last status line: "#N DONE cov: C ft: F corp: I/B ..." (or the last before a crash)
    last=$(grep -E '^#[0-9]+' "$log" | grep -E ' cov: ' | tail -1 || true)
    # (with -fork=N, libFuzzer prints no stat:: lines; its status lines give the same figures)
    [ -n "$runs" ] || runs=$(sed -n 's/^#\([0-9]*\).*/\1/p' <<<"$last")
    [ -n "$speed" ] || speed=$(sed -n 's/.* exec\/s:\{0,1\} \([0-9]*\).*/\1/p' <<<"$last")
    cov=$(sed -n 's/.* cov: \([0-9]*\).*/\1/p' <<<"$last")
    ft=$(sed -n 's/.* ft: \([0-9]*\).*/\1/p' <<<"$last")
    corp=$(sed -n 's/.* corp: \([^ ]*\).*/\1/p' <<<"$last")
    new=$(( $(ls "$crashes" | wc -l) - before ))
    if [ "$rc" = 0 ]; then
        result="nothing found"
    else
        failed=1
        result="FOUND (exit $rc): $(grep -m1 -E 'ERROR:|runtime error|property violated' "$log" | sed 's/|/\\|/g' || echo see the log)"
    fi
    echo "fuzz: $t: ${runs:-?} runs, ${speed:-?} exec/s, cov ${cov:-?} ft ${ft:-?}, corpus ${corp:-?}: $result"
    if [ "$rc" != 0 ]; then
        echo "fuzz: $t: log $log; $new new input(s) in $crashes/:"
        ls -t "$crashes" | head -n "$((new > 0 ? new : 1))" | sed "s|^|    $crashes/|"
    fi
    echo "| $t | $seconds | ${runs:-?} | ${speed:-?} | ${cov:-?} | ${ft:-?} | ${corp:-?} | $result |" >> "$summary"
done
rm -rf "$TMPDIR"
echo
cat "$summary"
if [ "$failed" != 0 ]; then
    echo "fuzz: FAILED: crash inputs are in $out/crashes/ (logs in $out/logs/)"
    exit 1
fi
echo "fuzz: no findings"
