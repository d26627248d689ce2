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
  --batch B        sequences per batch (default: train's; 4 with --from)
  --seq-len T      tokens per sequence (default: train's; 256 with --from)
  --needle LIST    also needle retrieval at these contexts (mtac eval needle on the validation
                   text, depths 0,0.5,1): the accuracy over every cell
  --needle-examples N  examples per context and depth (default 10)
  --needles N      needles in each example, one of them asked (default 4)
  --quick          a tiny budget for a smoke test: lm1m, 4 steps of 2 x 32 tokens, seeds 1,2, a
                   50 KB text (DIR/data); the options given override it
  --grad-accum N   micro-batches per step (default train's: 1)
  --launch CMD     run each mtac train under CMD, e.g. "mpirun -np 4 -x OMP_NUM_THREADS=2" (data
                   parallel: the same results bit for bit, docs/distributed.md; --grad-accum must
                   be at least the ranks); not part of the experiment's options
  --mtac PATH      the mtac binary (default build/mtac; not part of the experiment's options)
  --help           this text

Continued training of a pretrained run (the paper's retrofit, docs/lm_compare.md):
  --from RUN       a pretrained run (e.g. mtac import's): every arm starts from its weights, and
                   the table adds RUN itself before training. Arms: baseline (RUN trained on),
                   mta (MTA added at the identity by mtac convert --add-mta, every weight
                   trained), mta-only (only the MTA kernels trained) (default baseline,mta,mta-only).
                   --data defaults to DIR/data: the Bible in RUN's tokens (mtac data --tokenizer)
  --lr LR          learning rate of the arms that train every weight (default 3e-5)
  --mta-lr LR      learning rate of mta-only (default 1e-3); each decays to a tenth

The same command over an existing DIR resumes it: finished runs are skipped, a partial one
continues (mtac train --resume). --test, --needle, --needle-examples and --needles may change
over it: the finished runs are evaluated on what they lack; other options over it are refused.
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
from='' lr='' mta_lr='' needle='' needle_examples='' needles='' accum='' launch=''
while [ $# -gt 0 ]; do
    case $1 in
        --help|-h) usage; exit 0 ;;
        --quick) quick=1; shift; continue ;;
        --out|--preset|--steps|--seeds|--arms|--data|--test|--batch|--seq-len|--mtac|--from|--lr|--mta-lr|--needle|--needle-examples|--needles|--grad-accum|--launch)
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
        --from) from=$(abspath "$2") ;;
        --lr) lr=$2 ;;
        --mta-lr) mta_lr=$2 ;;
        --needle) needle=$2 ;;
        --needle-examples) needle_examples=$2 ;;
        --needles) needles=$2 ;;
        --grad-accum) accum=$2 ;;
        --launch) launch=$2 ;;
    esac
    shift 2
done
[ -n "$out" ] || bad_usage "--out DIR is required"
if [ -n "$from" ]; then
    [ -z "$preset" ] || bad_usage "--preset and --from exclude each other (the model is --from's)"
    [ $quick = 0 ] || : "${steps:=4}" "${seeds:=1,2}" "${batch:=2}" "${seqlen:=32}"
    : "${arms:=baseline,mta,mta-only}" "${batch:=4}" "${seqlen:=256}" "${lr:=3e-5}" "${mta_lr:=1e-3}" "${data:=$out/data}"
    known_arms='baseline, mta, mta-only'
else
    [ -z "$lr$mta_lr" ] || bad_usage "--lr and --mta-lr go with --from"
    [ $quick = 0 ] || : "${preset:=lm1m}" "${steps:=4}" "${seeds:=1,2}" "${batch:=2}" "${seqlen:=32}" "${data:=$out/data}"
    : "${preset:=lm1m}" "${data:=$root/data/kjv}"
    known_arms='baseline, mta, mta-all, mta-every4, mta-nonorm, mta-kq, mta-heads'
fi
: "${steps:=400}" "${seeds:=1,2,3}" "${arms:=baseline,mta}" "${needle_examples:=10}" "${needles:=4}"

int_list='^[0-9]+(,[0-9]+)*$' number='^[0-9]+(\.[0-9]*)?([eE][-+]?[0-9]+)?$'
[[ $steps =~ ^[1-9][0-9]*$ ]] || bad_usage "--steps must be a positive integer, not '$steps'"
[[ $seeds =~ $int_list ]] || bad_usage "--seeds must be comma-separated integers, not '$seeds'"
[ -z "$batch" ] || [[ $batch =~ ^[1-9][0-9]*$ ]] || bad_usage "--batch must be a positive integer, not '$batch'"
[ -z "$seqlen" ] || [[ $seqlen =~ ^[1-9][0-9]*$ ]] || bad_usage "--seq-len must be a positive integer, not '$seqlen'"
[ -z "$accum" ] || [[ $accum =~ ^[1-9][0-9]*$ ]] || bad_usage "--grad-accum must be a positive integer, not '$accum'"
[ -z "$needle" ] || [[ $needle =~ $int_list ]] || bad_usage "--needle takes comma-separated contexts, not '$needle'"
[[ $needle_examples =~ ^[1-9][0-9]*$ ]] || bad_usage "--needle-examples must be a positive integer, not '$needle_examples'"
[[ $needles =~ ^[1-9][0-9]*$ ]] || bad_usage "--needles must be a positive integer, not '$needles'"
[ -z "$lr" ] || [[ $lr =~ $number ]] || bad_usage "--lr must be a number, not '$lr'"
[ -z "$mta_lr" ] || [[ $mta_lr =~ $number ]] || bad_usage "--mta-lr must be a number, not '$mta_lr'"
[ -n "$from" ] || [[ $preset =~ ^[a-z0-9]+$ ]] || bad_usage "--preset takes a preset's name without -baseline, not '$preset'"
[ -z "$from" ] || [ -f "$from/config.json" ] || bad_usage "--from: no run in $from (no config.json)"
IFS=, read -ra seed_list <<< "$seeds"
IFS=, read -ra arm_list <<< "$arms"
[ "$(printf '%s\n' "${seed_list[@]}" | sort -u | wc -l)" = ${#seed_list[@]} ] || bad_usage "--seeds repeats a seed"
[ "$(printf '%s\n' "${arm_list[@]}" | sort -u | wc -l)" = ${#arm_list[@]} ] || bad_usage "--arms repeats an arm"
for a in "${arm_list[@]}"; do
    [[ ", $known_arms," == *", $a,"* ]] || bad_usage "unknown arm '$a' ($known_arms${from:+ with --from})"
done
[ "${arm_list[0]}" = baseline ] || bad_usage "--arms must start with baseline (the differences are against it)"
[ -z "$test" ] || [ -f "$test" ] || bad_usage "--test: no file $test"
[ -x "$mtac" ] || die "$mtac is missing: run scripts/setup.sh first, or give --mtac PATH"

mkdir -p "$out/runs" "$out/results" "$out/logs"
python3 scripts/lm_compare.py options "$out/experiment.json" preset="$preset" steps="$steps" seeds="$seeds" \
    arms="$arms" data="$data" test="$test" batch="$batch" seq_len="$seqlen" from="$from" lr="$lr" mta_lr="$mta_lr" \
    needle="$needle" needle_examples="$needle_examples" needles="$needles" grad_accum="$accum"

if [ ! -f "$data/train.bin" ]; then
    tok=()  # --from's own tokenizer, if it has one
    [ -z "$from" ] || [ ! -f "$from/tokenizer.json" ] || tok=(--tokenizer "$from")
    if [ $quick = 1 ] && [ "$data" = "$out/data" ]; then
        head -c 50000 tests/data/corpus.txt > "$out/quick.txt"
        "$mtac" data --out "$data" --val-every 3 "${tok[@]}" "$out/quick.txt" > /dev/null
    elif [ -n "$from" ] && [ "$data" = "$out/data" ]; then
        "$mtac" data --out "$data" "${tok[@]}"
    elif [ "$data" = "$root/data/kjv" ]; then
        "$mtac" data --out "$data"
    else
        die "no $data/train.bin: make the shards with mtac data --out $data FILE..."
    fi
fi

# The settings of every run: 10% warmup and ~10 validation points for the curves (4 of 8 batches
# when continuing a pretrained model, whose evaluations cost more).
warmup=$((steps / 10)) every=$((steps / 10 > 0 ? steps / 10 : 1))
[ -z "$from" ] || every=$((steps / 4 > 0 ? steps / 4 : 1))
common=(--steps "$steps" --warmup "$warmup" --eval_every "$every" --data "$data")
[ -z "$from" ] || common+=(--eval_batches 8)
[ -z "$batch" ] || common+=(--batch_size "$batch")
[ -z "$seqlen" ] || common+=(--seq_len "$seqlen")
[ -z "$accum" ] || common+=(--grad_accum "$accum")
read -ra launcher <<< "$launch"
# the validation loss: all of val.bin, in --from's batch shape for RUN itself too
eval_args=(--batches all)
[ -z "$from" ] || eval_args+=(--data "$data" --batch-size "$batch" --seq-len "$seqlen")

# schedule LR: a learning rate decaying to a tenth of it
schedule() { echo "--lr $1 --min_lr $(python3 -c "import sys; print(float(sys.argv[1]) / 10)" "$1")"; }

# arm_args ARM: the model options of ARM's runs (a config file with the "model" object for the
# ablations, made from the preset's own config by a 1-step run of 8 tokens; with --from, RUN or
# RUN with MTA added at the identity, made once in DIR/mta-init).
arm_args() {
    if [ -n "$from" ]; then
        if [ "$1" != baseline ] && [ ! -f "$out/mta-init/model.safetensors" ]; then
            rm -rf "$out/mta-init"
            "$mtac" convert --add-mta --run "$from" --out "$out/mta-init" > "$out/logs/mta-init.log" 2>&1 \
                || die "convert --add-mta: see $out/logs/mta-init.log"
        fi
        case $1 in
            baseline) echo "--init $from --train all $(schedule "$lr")" ;;
            mta) echo "--init $out/mta-init --train all $(schedule "$lr")" ;;
            mta-only) echo "--init $out/mta-init --train mta $(schedule "$mta_lr")" ;;
        esac
        return
    fi
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

# lacks NAME: the evaluations results/NAME.json lacks for these options (val, test, needle).
lacks() { python3 scripts/lm_compare.py todo "$out/results/$1.json" "$test" "$needle" "$needle_examples" "$needles"; }

# evaluate RUN NAME: results/NAME.json: the validation loss, the loss on --test's text and the
# needle accuracy (null where not asked); of a finished run, only what it lacks (a --test or
# --needle added to the experiment later).
evaluate() {
    local run=$1 name=$2 log=$out/logs/$2.log result=$out/results/$2.json todo val='' test_loss='' needle_acc=''
    todo=$(lacks "$name")
    if [[ $todo == *val* ]]; then
        val=$("$mtac" eval --run "$run" "${eval_args[@]}" 2>> "$log" | sed -n 's/^val loss \([^ ]*\) .*/\1/p')
        [ -n "$val" ] || die "$name: evaluation failed, see $log"
    fi
    if [[ $todo == *test* ]]; then
        test_loss=$("$mtac" eval --run "$run" --text "$test" --json 2>> "$log" | sed -n 's/.*"loss": \([^,]*\),.*/\1/p')
        [ -n "$test_loss" ] || die "$name: evaluation of $test failed, see $log"
    fi
    if [[ $todo == *needle* ]]; then
        "$mtac" eval needle --run "$run" --data "$data" --contexts "$needle" --depths 0,0.5,1 \
            --examples "$needle_examples" --needles "$needles" --json "$out/results/$name.needle.json" >> "$log" 2>&1 \
            || die "$name: eval needle failed, see $log"
        needle_acc=$(python3 scripts/lm_compare.py needle "$out/results/$name.needle.json")
    fi
    python3 scripts/lm_compare.py record "$result" val_loss="$val" test="$test" test_loss="$test_loss" \
        needle="$needle" needle_examples="$needle_examples" needles="$needles" needle_acc="$needle_acc"
}

# train_and_eval ARM SEED: trains (or resumes) the run, then writes results/ARM-seedSEED.json.
train_and_eval() {
    local name=$1-seed$2 run=$out/runs/$1-seed$2 log=$out/logs/$1-seed$2.log args rc=0
    if [ -f "$run/checkpoint.safetensors" ]; then
        echo "  resuming $run"
        "${launcher[@]}" "$mtac" train --resume "$run" --steps "$steps" >> "$log" 2>&1 || rc=$?
    else
        rm -rf "$run"  # stopped before its first checkpoint: nothing to resume
        args=$(arm_args "$1")
        # shellcheck disable=SC2086  # args is a list of options without spaces
        "${launcher[@]}" "$mtac" train $args "${common[@]}" --seed "$2" --out "$run" > "$log" 2>&1 || rc=$?
    fi
    # mtac train stops on a signal with 128 + its number, after saving a checkpoint
    [ $rc -lt 128 ] || die "$name: interrupted; the same command resumes the experiment"
    [ $rc = 0 ] || die "$name: training failed (exit status $rc), see $log"
    evaluate "$run" "$name"
}

if [ -n "$from" ]; then
    echo "before training: $from"
    evaluate "$from" pretrained
fi
total=$((${#arm_list[@]} * ${#seed_list[@]})) i=0 trained=0 spent=0
for seed in "${seed_list[@]}"; do
    for arm in "${arm_list[@]}"; do
        i=$((i + 1))
        if [ -f "$out/results/$arm-seed$seed.json" ]; then
            if [ -z "$(lacks "$arm-seed$seed")" ]; then
                echo "run $i/$total: $arm seed $seed: finished, skipped"
            else
                echo "run $i/$total: $arm seed $seed: finished, evaluating what it lacks"
                evaluate "$out/runs/$arm-seed$seed" "$arm-seed$seed"
            fi
            continue
        fi
        echo "run $i/$total: $arm seed $seed (${from:-$preset}, $steps steps; log $out/logs/$arm-seed$seed.log)"
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
