#!/usr/bin/env bash
# bench_dp.sh [PRESETS] [STEPS] [REPEATS]: data-parallel training speed on this machine, side by
# side: 1 rank x 1 thread, 2 ranks x 1 thread (mpirun), 1 rank x 2 threads, each `mtac train` on
# the King James Bible with the same global batch (2 micro-batches of 8 x 256 tokens per step).
# Prints each run's median tokens/s over its steps after the first two, then per preset the
# medians over the repeats and the ratios to 1 rank x 1 thread. The runs alternate so that a
# change in the machine's load falls on all three alike.
set -euo pipefail
case ${1:-} in -h|--help) sed -n '2,7p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;; esac
cd "$(dirname "$0")/.."
presets=${1:-lm1m,lm10m}
steps=${2:-12}
repeats=${3:-3}
# tokens/s are taken from the steps after the first two: STEPS must leave at least one.
[[ $steps =~ ^[0-9]+$ ]] && [ "$steps" -ge 3 ] || { echo "bench_dp.sh: STEPS must be an integer >= 3 (the first two steps are not timed), got '$steps'" >&2; exit 2; }
[[ $repeats =~ ^[0-9]+$ ]] && [ "$repeats" -ge 1 ] || { echo "bench_dp.sh: REPEATS must be an integer >= 1, got '$repeats'" >&2; exit 2; }
[ -n "$presets" ] || { echo "bench_dp.sh: PRESETS is empty" >&2; exit 2; }
M=build/mtac
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMP_WAIT_POLICY=passive
"$M" data --out "$tmp/data" > /dev/null
echo "# $(lscpu | sed -nE 's/^Model name: *//p'), $(nproc) cores; OpenBLAS $(sed -nE 's/.*OpenBLAS ([0-9.]+).*/\1/p' \
    <(strings "$(ldd "$M" | awk '/openblas/{print $3}')" 2>/dev/null | grep -m1 'OpenBLAS [0-9]') || true) ($(ldd "$M" | awk '/openblas/{print $3}'))"
median() { sort -g | awk '{a[NR]=$1} END {print (NR % 2) ? a[(NR+1)/2] : (a[NR/2] + a[NR/2+1]) / 2}'; }
run() {  # run NAME PRESET: one training run; prints its median tokens/s
    local name=$1 preset=$2 out="$tmp/$1"
    rm -rf "$out"
    local args=(train --preset "$preset" --data "$tmp/data" --out "$out" --steps "$steps" --batch_size 8 --seq_len 256
                --grad_accum 2 --warmup 1 --eval_every 0 --save_every 0 --log_every 1000000)
    case $name in
        r1t1) OMP_NUM_THREADS=1 "$M" "${args[@]}" > /dev/null ;;
        r2t1) mpirun --oversubscribe -np 2 --bind-to core -x OMP_NUM_THREADS=1 -x OMP_WAIT_POLICY "$M" "${args[@]}" > /dev/null ;;
        r1t2) OMP_NUM_THREADS=2 "$M" "${args[@]}" > /dev/null ;;
    esac
    sed -nE 's/.*"step":([0-9]+).*"tokens_per_s":([0-9.]+).*/\1 \2/p' "$out/metrics.jsonl" | awk '$1 > 2 {print $2}' | median
}
for preset in ${presets//,/ }; do
    : > "$tmp/$preset.tsv"
    for rep in $(seq "$repeats"); do
        for cfg in r1t1 r2t1 r1t2; do
            tps=$(run "$cfg" "$preset")
            awk -v x="$tps" 'BEGIN {exit !(x > 0)}' || { echo "bench_dp.sh: $preset $cfg: no timed step in metrics.jsonl" >&2; exit 1; }
            echo "$preset $cfg repeat $rep: $tps tokens/s"
            echo "$cfg $tps" >> "$tmp/$preset.tsv"
        done
    done
    base=$(awk '$1 == "r1t1" {print $2}' "$tmp/$preset.tsv" | median)
    for cfg in r1t1 r2t1 r1t2; do
        m=$(awk -v c="$cfg" '$1 == c {print $2}' "$tmp/$preset.tsv" | median)
        printf '%s %-28s %10.0f tokens/s  %.2fx\n' "$preset" \
            "$(case $cfg in r1t1) echo '1 rank x 1 thread';; r2t1) echo '2 ranks x 1 thread';; r1t2) echo '1 rank x 2 threads';; esac)" \
            "$m" "$(echo "$m / $base" | bc -l)"
    done
done
