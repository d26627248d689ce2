#!/usr/bin/env bash
# test_attn_plan.sh MTAC SOURCE_DIR: `mtac attn --plan` on the cuda-emu backend (docs/cuda.md,
# "Which kernels run: --plan"). It checks the mechanism, not today's kernel list (the tensor-core
# path's kernels change): a config the tensor-core path covers prints its kernels and `fallback:
# none`; one it cannot cover names its steps as the fallback; a backend without the path is
# refused; every kernel a call launches, and every MTA_LAUNCH of the sources, has a row in
# src/attn/cuda_kernel_steps.h and every row a launch (so the table cannot go stale).
set -u
MTAC=$1
SRC=$2
. "$(dirname "$0")/expect.sh"
export OMP_NUM_THREADS=1
plan() { "$MTAC" attn --plan --backend cuda-emu "$@"; }

expect 0 "--plan" -- "$MTAC" attn --help
expect 0 "--precision P" -- "$MTAC" attn --help

# Plain attention is on the tensor-core path whatever its kernels become.
out=$(plan --precision bf16 --model lm10m-baseline --layer 0 2>&1)
ok_if '[ $? = 0 ]' "plain attention's plan failed: $out"
case $out in *"path: tensor cores"*"forward:"*"  k_tc_"*"backward:"*"  k_tc_"*"fallback: none"*) ok ;;
*) bad "plain attention at bf16: no tensor-core kernels or fallback: none in: $out" ;; esac

# A head size no tensor-core tile takes (d = 512) falls back: the fallback names the config's steps.
out=$(plan --precision bf16 --model 830m --layer 2 --d 512 2>&1)
ok_if '[ $? = 0 ]' "the 830m conv layer's plan at d = 512 failed: $out"
on=$(echo "$out" | sed -n 's/^steps: //p' | grep -o '[0-9]\+' | sed 's/^/ /' | tr -d '\n')
fb=$(echo "$out" | sed -n 's/^fallback://p')
ok_if '[ -n "$on" ] && [ "$fb" = "$on" ]' "fallback '$fb' is not the config's steps '$on' in: $out"
case $out in *"path: float32 (not the tensor-core path: "*) ok ;; *) bad "no reason for the float32 path in: $out" ;; esac
case $out in *"  k_tc_"*) bad "a tensor-core kernel on the float32 path: $out" ;; *) ok ;; esac

# The 830M model's two layer patterns at its head sizes run every step on the tensor-core path
# (issue 46): layer 2 on the every-step kernels (both convolutions, mixing, head convolution),
# layer 3 on the head kernels; the fallback line says none.
for layer in 2 3; do
    for d in 64 96 128; do
        out=$(plan --precision bf16 --model 830m --layer $layer --d $d 2>&1)
        ok_if '[ $? = 0 ]' "830m layer $layer d $d: $out"
        case $out in *"path: tensor cores"*"fallback: none") ok ;;
        *) bad "830m layer $layer d $d: not every step on the tensor-core path: $out" ;; esac
    done
done

expect 0 "fallback: n/a (precision fp32" -- plan --model 830m --layer 2
expect 2 "no tensor-core path" -- "$MTAC" attn --plan --backend fused --model 830m --layer 2
expect 2 "needs --layer" -- plan --model 830m
expect 2 "has layers 0-23" -- plan --model 830m --layer 24
expect 2 "unknown preset" -- plan --model nope --layer 0
expect 2 "writes nothing" -- plan --model 830m --layer 2 --out x.safetensors
expect 2 "one of them" -- plan
# --plan runs its own small problem: the options of a run on the file's tensors are refused, at
# their defaults too, not ignored.
expect 2 "drop --tol" -- plan --model 830m --layer 2 --tol 0.01
expect 2 "drop --tol" -- plan --model 830m --layer 2 --tol 2e-4
expect 2 "drop --max-T" -- plan --model 830m --layer 2 --max-T 100
expect 2 "goes with --plan" -- "$MTAC" attn --in a --out b --layer 2

# --counts: the emulator's counts of each kernel's warp operations, as JSON that the performance
# model reads (its checks of the format are bench/cuda_perf_model.py --check's; the counts' own,
# test_launch_record's).
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
out=$(plan --precision bf16 --model lm10m-baseline --layer 0 --counts "$tmp/c.json" 2>&1)
ok_if '[ $? = 0 ] && [ -s "$tmp/c.json" ]' "--counts wrote no file: $out"
case $(tr -d ' \t\n' < "$tmp/c.json") in *'"forward":{'*'"k_fa_forward":{"launches":1,"mma":'[1-9]*'"backward":{'*) ok ;;
*) bad "--counts: no forward k_fa_forward with its MMAs in: $(head -c 600 "$tmp/c.json")" ;; esac
if command -v python3 >/dev/null; then
    out=$(python3 "$SRC"/bench/cuda_perf_model.py --kernel-counts "$tmp/c.json" 2>&1)
    case $out in *"k_fa_forward"*) ok ;; *) bad "the perf model on --counts' file: $out" ;; esac
fi
# The tensor-core kernels' counts that the performance model's --check compares with its formulas
# (tests/fixtures/every_counts.json: the every-step kernels; built_counts.json: the head kernels and
# FA2's) are still the emulator's: each file's last run (a small config) again, by its command.
if command -v python3 >/dev/null; then
    for fx in every_counts built_counts; do
        args=$(python3 -c 'import json, sys; print(*json.load(open(sys.argv[1]))["runs"][-1]["command"].split()[5:-2])' \
            "$SRC/tests/fixtures/$fx.json")
        out=$(cd "$SRC" && plan $args --counts "$tmp/e.json" 2>&1)
        ok_if '[ $? = 0 ]' "--counts on $fx.json's last run ($args): $out"
        out=$(python3 -c '
import json, sys
want = json.load(open(sys.argv[1]))["runs"][-1]["emulated"]
got = json.load(open(sys.argv[2]))["emulated"]
bad = [(k, want[ph][k], got[ph].get(k)) for ph in ("forward", "backward") for k in want[ph] if got[ph].get(k) != want[ph][k]]
print(bad or "same")' "$SRC/tests/fixtures/$fx.json" "$tmp/e.json" 2>&1)
        ok_if '[ "$out" = same ]' "$fx.json's last run is not the emulator's now (refresh it with its command): $out"
    done
fi
expect 2 "only the cuda-emu backend counts" -- "$MTAC" attn --plan --backend fused --model 830m --layer 2 --counts "$tmp/x"
expect 2 "--counts goes with --plan" -- "$MTAC" attn --in a --out b --counts "$tmp/x"
expect 1 "--counts" -- plan --model 830m --layer 3 --counts "$tmp/no/such/dir/x.json"

# Every fixture's config (documents, GQA, each step alone and together) on both paths: --plan
# fails when a launched kernel has no row, or is of the path that did not run.
for f in "$SRC"/tests/fixtures/*.safetensors; do
    out=$(plan --precision bf16 --in "$f" 2>&1)
    ok_if '[ $? = 0 ]' "--plan --in $(basename "$f"): $out"
done

# The table against the sources: each kernel launched has a row, each row a launch.
launched=$(grep -ho 'MTA_LAUNCH\(_CLUSTER\)\?(k_[A-Za-z0-9_]*' "$SRC"/src/attn/*.cu "$SRC"/src/attn/*.cuh | sed 's/MTA_LAUNCH\(_CLUSTER\)\?(//' | sort -u)
rows=$(grep -o '^    {"[A-Za-z0-9_]*"' "$SRC"/src/attn/cuda_kernel_steps.h | tr -d ' {"' | grep -v '^cublas' | sort -u)
ok_if '[ -n "$launched" ] && [ "$launched" = "$rows" ]' "kernels launched vs rows of cuda_kernel_steps.h: $(diff <(echo "$launched") <(echo "$rows"))"

finish test_attn_plan
