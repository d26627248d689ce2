#!/usr/bin/env bash
# lm_compare.sh: does MTA help language modelling? Trains a baseline and MTA models of the same
# preset on the same shards for the same steps over several seeds, evaluates each on the whole
# validation set (and on a held-out text), and writes a table of the losses, their means and sample
# standard deviations over seeds, the paired differences arm - baseline, and the loss curves.
# Re-run the same command to resume an interrupted experiment (docs/lm_compare.md).
usage() {
    cat <<'EOF'
usage: scripts/lm_compare.sh --out DIR [options]

  --out DIR        the experiment: DIR/runs/ARM-seedS (ordinary runs), DIR/results.md,
                   DIR/results.json, DIR/curves.png, DIR/experiment.json (the options)
  --preset NAME    model preset; the baseline is NAME-baseline (default lm1m)
  --steps N        optimizer steps of every run (default 400)
  --seeds LIST     comma-separated training seeds (default 1,2,3)
  --arms LIST      baseline (required), mta (the preset's MTA), mta-all (key-query convolutions in
                   every layer), mta-every4 (in every fourth: layers 2, 6, ...), mta-nonorm (no
                   group norm, depth scaling or gate), mta-kq (key-query convolutions only),
                   mta-heads (head mixing and convolution only) (default baseline,mta)
  --data DIR       shards from `mtac data` (default data/kjv, made from the Bible if missing)
  --test FILE      also the loss on this held-out text (`mtac eval --text`)
  --batch B        sequences per batch (default: train's)
  --seq-len T      tokens per sequence (default: train's)
  --quick          a tiny budget for a smoke test: lm1m, 4 steps of 2 x 32 tokens, seeds 1,2, a
                   50 KB text (DIR/data); the options given override it
  --mtac PATH      the mtac binary (default build/mtac; not part of the experiment's options)
  --help           this text

The same command over an existing DIR resumes it: finished runs are skipped, a partial one
continues (mtac train --resume); other options over it are refused.
EOF
}
set -euo pipefail
here=$PWD
cd "$(dirname "$0")/.."
root=$PWD

die() { echo "lm_compare: $*" >&2; exit 1; }
bad_usage() { echo "lm_compare: $*; see --help" >&2; exit 2; }
abspath() { case $1 in /*) echo "$1" ;; *) echo "$here/$1" ;; esac; }

out='' preset='' steps='' seeds='' arms='' data='' test='' batch='' seqlen='' quick=0 mtac=$root/build/mtac
while [ $# -gt 0 ]; do
    case $1 in
        --help|-h) usage; exit 0 ;;
        --quick) quick=1; shift; continue ;;
        --out|--preset|--steps|--seeds|--arms|--data|--test|--batch|--seq-len|--mtac)
            [ $# -ge 2 ] || bad_usage "$1 needs a value" ;;
        *) bad_usage "unknown option '$1'" ;;
    esac
    case $1 in
        --out) out=$(abspath "$2") ;;
        --preset) preset=$2 ;;
        --steps) steps=$2 ;;
        --seeds) seeds=$2 ;;
        --arms) arms=$2 ;;
        --data) data=$(abspath "$2") ;;
        --test) test=$(abspath "$2") ;;
        --batch) batch=$2 ;;
        --seq-len) seqlen=$2 ;;
        --mtac) mtac=$(abspath "$2") ;;
    esac
    shift 2
done
[ -n "$out" ] || bad_usage "--out DIR is required"
if [ $quick = 1 ]; then
    : "${preset:=lm1m}" "${steps:=4}" "${seeds:=1,2}" "${arms:=baseline,mta}" "${batch:=2}" "${seqlen:=32}" "${data:=$out/data}"
fi
: "${preset:=lm1m}" "${steps:=400}" "${seeds:=1,2,3}" "${arms:=baseline,mta}" "${data:=$root/data/kjv}"

int_list='^[0-9]+(,[0-9]+)*$'
[[ $steps =~ ^[1-9][0-9]*$ ]] || bad_usage "--steps must be a positive integer, not '$steps'"
[[ $seeds =~ $int_list ]] || bad_usage "--seeds must be comma-separated integers, not '$seeds'"
[ -z "$batch" ] || [[ $batch =~ ^[1-9][0-9]*$ ]] || bad_usage "--batch must be a positive integer, not '$batch'"
[ -z "$seqlen" ] || [[ $seqlen =~ ^[1-9][0-9]*$ ]] || bad_usage "--seq-len must be a positive integer, not '$seqlen'"
[[ $preset =~ ^[a-z0-9]+$ ]] || bad_usage "--preset takes a preset's name without -baseline, not '$preset'"
IFS=, read -ra seed_list <<< "$seeds"
IFS=, read -ra arm_list <<< "$arms"
[ "$(printf '%s\n' "${seed_list[@]}" | sort -u | wc -l)" = ${#seed_list[@]} ] || bad_usage "--seeds repeats a seed"
[ "$(printf '%s\n' "${arm_list[@]}" | sort -u | wc -l)" = ${#arm_list[@]} ] || bad_usage "--arms repeats an arm"
for a in "${arm_list[@]}"; do
    case $a in
        baseline|mta|mta-all|mta-every4|mta-nonorm|mta-kq|mta-heads) ;;
        *) bad_usage "unknown arm '$a' (baseline, mta, mta-all, mta-every4, mta-nonorm, mta-kq, mta-heads)" ;;
    esac
done
[ "${arm_list[0]}" = baseline ] || bad_usage "--arms must start with baseline (the differences are against it)"
[ -z "$test" ] || [ -f "$test" ] || bad_usage "--test: no file $test"
[ -x "$mtac" ] || die "$mtac is missing: run scripts/setup.sh first, or give --mtac PATH"

mkdir -p "$out/runs" "$out/results" "$out/logs"
python3 scripts/lm_compare.py options "$out/experiment.json" preset="$preset" steps="$steps" seeds="$seeds" \
    arms="$arms" data="$data" test="$test" batch="$batch" seq_len="$seqlen"

if [ ! -f "$data/train.bin" ]; then
    if [ $quick = 1 ] && [ "$data" = "$out/data" ]; then
        head -c 50000 tests/data/corpus.txt > "$out/quick.txt"
        "$mtac" data --out "$data" --val-every 3 "$out/quick.txt" > /dev/null
    elif [ "$data" = "$root/data/kjv" ]; then
        "$mtac" data --out "$data"
    else
        die "no $data/train.bin: make the shards with mtac data --out $data FILE..."
    fi
fi

# The settings of every run: 10% warmup and ~10 validation points for the curves.
warmup=$((steps / 10)) every=$((steps / 10 > 0 ? steps / 10 : 1))
common=(--steps "$steps" --warmup "$warmup" --eval_every "$every" --data "$data")
[ -z "$batch" ] || common+=(--batch_size "$batch")
[ -z "$seqlen" ] || common+=(--seq_len "$seqlen")

# arm_args ARM: the model options of ARM's runs (a config file with the "model" object for the
# ablations, made from the preset's own config by a 1-step run of 8 tokens).
arm_args() {
    case $1 in
        baseline) echo "--preset $preset-baseline" ;;
        mta) echo "--preset $preset" ;;
        *)
            if [ ! -f "$out/preset/config.json" ]; then
                rm -rf "$out/preset"
                "$mtac" train --preset "$preset" --steps 1 --warmup 0 --batch_size 1 --seq_len 8 --eval_batches 1 \
                    --data "$data" --out "$out/preset" > "$out/logs/preset.log" 2>&1 || die "preset $preset: see $out/logs/preset.log"
            fi
            python3 scripts/lm_compare.py arm "$1" "$out/preset/config.json" "$out/runs/$1.json"
            echo "--config $out/runs/$1.json" ;;
    esac
}

# train_and_eval ARM SEED: trains (or resumes) the run, then writes results/ARM-seedSEED.json.
train_and_eval() {
    local name=$1-seed$2 run=$out/runs/$1-seed$2 log=$out/logs/$1-seed$2.log args rc=0
    if [ -f "$run/checkpoint.safetensors" ]; then
        echo "  resuming $run"
        "$mtac" train --resume "$run" --steps "$steps" >> "$log" 2>&1 || rc=$?
    else
        rm -rf "$run"  # stopped before its first checkpoint: nothing to resume
        args=$(arm_args "$1")
        # shellcheck disable=SC2086  # args is a list of options without spaces
        "$mtac" train $args "${common[@]}" --seed "$2" --out "$run" > "$log" 2>&1 || rc=$?
    fi
    # mtac train stops on a signal with 128 + its number, after saving a checkpoint
    [ $rc -lt 128 ] || die "$name: interrupted; the same command resumes the experiment"
    [ $rc = 0 ] || die "$name: training failed (exit status $rc), see $log"
    local val test_loss=null
    val=$("$mtac" eval --run "$run" --batches all 2>> "$log" | sed -n 's/^val loss \([^ ]*\) .*/\1/p')
    [ -n "$val" ] || die "$name: evaluation failed, see $log"
    if [ -n "$test" ]; then
        test_loss=$("$mtac" eval --run "$run" --text "$test" --json 2>> "$log" | sed -n 's/.*"loss": \([^,]*\),.*/\1/p')
        [ -n "$test_loss" ] || die "$name: evaluation of $test failed, see $log"
    fi
    echo "{\"val_loss\": $val, \"test_loss\": $test_loss}" > "$out/results/$name.json.tmp"
    mv "$out/results/$name.json.tmp" "$out/results/$name.json"
    echo "  val loss $val${test:+, test loss $(printf %.4f "$test_loss")}"
}

total=$((${#arm_list[@]} * ${#seed_list[@]})) i=0 trained=0 spent=0
for seed in "${seed_list[@]}"; do
    for arm in "${arm_list[@]}"; do
        i=$((i + 1))
        if [ -f "$out/results/$arm-seed$seed.json" ]; then
            echo "run $i/$total: $arm seed $seed: finished, skipped"
            continue
        fi
        echo "run $i/$total: $arm seed $seed ($preset, $steps steps; log $out/logs/$arm-seed$seed.log)"
        t0=$SECONDS
        train_and_eval "$arm" "$seed"
        trained=$((trained + 1)) spent=$((spent + SECONDS - t0))
        echo "  ${spent}s for $trained runs; ETA $((spent * (total - i) / trained))s for the $((total - i)) left"
    done
done

python3 scripts/lm_compare.py table "$out"
plot=()
for arm in "${arm_list[@]}"; do
    for seed in "${seed_list[@]}"; do
        # up to 8 curves: every run, or the first seed of each arm
        if [ $total -le 8 ] || [ "$seed" = "${seed_list[0]}" ]; then plot+=("$out/runs/$arm-seed$seed"); fi
    done
done
"$mtac" plot --out "$out/curves.png" "${plot[@]}" > /dev/null
echo "wrote $out/results.md, $out/results.json, $out/curves.png"
