#!/usr/bin/env bash
# longctx.sh [--quick] [--out DIR] [--seeds "1 2 3"] [--steps N] [--mtac PATH]: the long-context
# experiment of docs/longctx.md from one command. For each seed, trains the baseline Transformer
# (lm1m-baseline) and the MTA model (lm1m: the paper's pattern scaled to 4 layers) side by side on
# the same sequences, each the King James Bible ending with a task example (needles, bAbI qa1-qa3
# and the copy task; loss on the answers); retrofits MTA onto the trained baseline (mtac convert
# --add-mta) and trains it a quarter of the steps more; scores all three with `mtac eval needle`
# (one one-word needle, and four compound-key needles) and `mtac eval babi` (qa1-qa3 and copy),
# and writes DIR/results.md (mean and per seed). Default: 3 seeds; --quick: 1 seed, few steps (a
# smoke test of the pipeline).
set -euo pipefail
cd "$(dirname "$0")/.."
out=runs/longctx seeds="1 2 3" steps=1800 examples=40 T=256 contexts=128,256,512,1024 contexts4=256,512,1024 babi_contexts=256,512 M=build/mtac
while [ $# -gt 0 ]; do
    case $1 in
        --quick) seeds=1 steps=60 examples=6 contexts=256 contexts4=256 babi_contexts=256 ;;
        --out) out=$2; shift ;;
        --seeds) seeds=$2; shift ;;
        --steps) steps=$2; shift ;;
        --mtac) M=$2; shift ;;
        -h|--help) sed -n '2,10p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
        *) echo "longctx.sh: unknown option '$1' (see --help)" >&2; exit 2 ;;
    esac
    shift
done
[ -x "$M" ] || { echo "longctx.sh: build mtac first (scripts/setup.sh)" >&2; exit 1; }
# the steps: two thirds in stage 1, the rest in stage 2; the retrofit trains a quarter more
stage1=$(( steps * 2 / 3 )) stage2=$(( steps - steps * 2 / 3 )) more=$(( steps / 4 > 0 ? steps / 4 : 1 ))
mkdir -p "$out"
[ -f "$out/data/train.bin" ] || "$M" data --out "$out/data"
# One seed's two models train side by side, each on half of the cores (the same tokens: the data
# and the mixture derive from the seed), then are scored; each run's output goes to its log. The
# baseline's side then retrofits MTA onto it (mtac convert --add-mta: identity kernels) and trains
# that a quarter of the steps more.
threads=$(( $(nproc) / 2 > 0 ? $(nproc) / 2 : 1 ))
warmup() { echo $(( $1 / 4 < 50 ? $1 / 4 : 50 )); }
complete() { [ -f "$1/model.safetensors" ] && grep -q "\"step\":$2," "$1/metrics.jsonl" 2>/dev/null; }
evaluate() {
    local run=$1
    OMP_NUM_THREADS=$threads "$M" eval needle --run "$run" --needles 1 --contexts "$contexts" --depths 0,0.5,1 \
        --examples "$examples" --show 2 --json "$run/needle1.json" --png "$run/needle1.png" || return 1
    OMP_NUM_THREADS=$threads "$M" eval needle --run "$run" --compound --needles 4 --contexts "$contexts4" \
        --depths 0,0.5,1 --examples "$examples" --show 2 --json "$run/needle4.json" --png "$run/needle4.png" || return 1
    OMP_NUM_THREADS=$threads "$M" eval babi --run "$run" --tasks qa1,qa2,qa3,copy --facts 4 --contexts "$babi_contexts" \
        --examples "$examples" --show 2 --json "$run/babi.json" --png "$run/babi.png" || return 1
}
# Two stages, one run each: needles and the copy task in short sequences (many examples per token:
# the induction retrieval is made of), then every task at the full length from those weights.
train_and_eval() {
    local preset=$1 seed=$2 run="$out/$1-s$2"
    if ! complete "$run-stage1" "$stage1"; then
        rm -rf "$run-stage1" "$run"
        OMP_NUM_THREADS=$threads "$M" train --preset "$preset" --data "$out/data" --out "$run-stage1" --seq_len 128 \
            --batch_size 16 --steps "$stage1" --lr 3e-3 --warmup "$(warmup "$stage1")" --mix 1 --mix_tasks needle,copy \
            --mix_loss answer --seed "$seed" --eval_every 0 --save_every 250 --log_every 100 || return 1
    fi
    if ! complete "$run" "$stage2"; then
        rm -rf "$run"
        OMP_NUM_THREADS=$threads "$M" train --preset "$preset" --init "$run-stage1/model.safetensors" --data "$out/data" \
            --out "$run" --seq_len "$T" --batch_size 8 --steps "$stage2" --lr 3e-3 --warmup "$(warmup "$stage2")" --mix 1 \
            --mix_tasks needle,qa1,qa2,qa3,copy --mix_loss answer --seed "$seed" --eval_every 0 --save_every 250 \
            --log_every 100 || return 1
    fi
    evaluate "$run"
}
retrofit_and_eval() {
    local seed=$1 run="$out/retro-s$1"
    if ! complete "$run" "$more"; then
        rm -rf "$run" "$run-init"
        "$M" convert --add-mta --run "$out/lm1m-baseline-s$seed" --out "$run-init" || return 1
        OMP_NUM_THREADS=$threads "$M" train --config "$run-init/config.json" --out "$run" --steps "$more" \
            --warmup "$(warmup "$more")" || return 1
    fi
    evaluate "$run"
}
for seed in $seeds; do
    echo "== seed $seed: lm1m-baseline and lm1m, $stage1 steps of 16 x 128 tokens then $stage2 of 8 x $T, $threads thread(s) each, then MTA retrofitted onto the baseline for $more steps (logs: $out/*-s$seed.log)"
    { train_and_eval lm1m-baseline "$seed" && retrofit_and_eval "$seed"; } > "$out/lm1m-baseline-s$seed.log" 2>&1 &
    train_and_eval lm1m "$seed" > "$out/lm1m-s$seed.log" 2>&1 &
    wait %1 || { echo "longctx.sh: lm1m-baseline or its retrofit, seed $seed failed: $out/lm1m-baseline-s$seed.log" >&2; exit 1; }
    wait %2 || { echo "longctx.sh: lm1m, seed $seed failed: $out/lm1m-s$seed.log" >&2; exit 1; }
    tail -n 6 "$out/lm1m-baseline-s$seed.log" "$out/lm1m-s$seed.log"
done
# The table: accuracy per context, averaged over depths (needles) or per task (bAbI), per seed and mean.
/usr/bin/python3 - "$out" $seeds > "$out/results.md" <<'PY'
import json, sys
out, seeds = sys.argv[1], sys.argv[2:]
# per (task, context): the exact-match accuracy and the retrieved fraction (the answer right up to
# its end, whatever follows), each averaged over depths (needles)
def cells(path, name):
    res = {}
    for c in json.load(open(path))["results"]:
        r = res.setdefault((name or c["qa"], c["context"]), [[], []])
        r[0].append(c["accuracy"]), r[1].append(c["retrieved"] / c["total"])
    return {k: (sum(v[0]) / len(v[0]), sum(v[1]) / len(v[1])) for k, v in res.items()}
rows = {}
models = (("lm1m-baseline", "baseline"), ("lm1m", "MTA"), ("retro", "retrofit"))
for run_name, _ in models:
    for s in seeds:
        run = f"{out}/{run_name}-s{s}"
        acc = cells(f"{run}/needle1.json", "needle, 1 one-word key")
        acc.update(cells(f"{run}/needle4.json", "needles, 4 compound keys"))
        acc.update(cells(f"{run}/babi.json", None))
        for k, v in acc.items():
            rows.setdefault(k, {}).setdefault(run_name, []).append(v)
mean = lambda v, i: 100 * sum(x[i] for x in v) / len(v)
both = lambda v: f"{mean(v, 0):.1f}% ({mean(v, 1):.0f}%)" if v else "-"
per = lambda v: " / ".join(f"{100 * x[0]:.0f} ({100 * x[1]:.0f})" for x in v)
print("Exact match, mean over seeds (in brackets: the answer right up to its end, whatever follows).\n")
print("| task | context | " + " | ".join(f"{label} mean" for _, label in models) + " | "
      + " | ".join(f"{label} per seed" for _, label in models) + " |")
print("|---|---|" + "---|" * (2 * len(models)))
for (task, ctx), r in rows.items():
    vals = [r.get(run_name, []) for run_name, _ in models]
    print(f"| {task} | {ctx} | " + " | ".join(both(v) for v in vals) + " | " + " | ".join(per(v) for v in vals) + " |")
PY
cat "$out/results.md"
