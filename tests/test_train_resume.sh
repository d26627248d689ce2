#!/usr/bin/env bash
# test_train_resume.sh MTAC: training is deterministic, and a run killed with SIGKILL or stopped
# with SIGINT, then resumed, ends with exactly the same weights and losses as an uninterrupted run.
set -u
MTAC=$1
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
. "$(dirname "$0")/expect.sh"

# A constant seed, so that runs repeat; saves every 5 steps to resume from.
tiny_mta_run "$tmp" "$MTAC" '"steps": 300, "batch_size": 4, "seq_len": 32, "grad_accum": 2, "lr": 0.003, "warmup": 5,
 "schedule": "cosine", "save_every": 5, "eval_every": 100, "eval_batches": 2, "log_every": 1000, "seed": 7'
train() { OMP_NUM_THREADS=1 "$MTAC" train --config "$tmp/cfg.json" --data "$tmp/data" "$@"; }
losses() { sed -E 's/.*"step":([0-9]+),"loss":([0-9.]+).*/\1 \2/' "$1/metrics.jsonl"; }
steps_done() { lines "$1/metrics.jsonl"; }

train --out "$tmp/a" > /dev/null || bad "uninterrupted run"
train --out "$tmp/a2" > /dev/null || bad "second uninterrupted run"
cmp -s "$tmp/a/model.safetensors" "$tmp/a2/model.safetensors" && ok || bad "same seed, different weights"
[ "$(steps_done "$tmp/a")" = 300 ] && ok || bad "metrics.jsonl should have 300 lines"
grep -q '"val_loss"' "$tmp/a/metrics.jsonl" && ok || bad "no val_loss in metrics"

# eval, sample and plot on the finished run
out=$("$MTAC" eval --run "$tmp/a" --batches 2 2>&1) && echo "$out" | grep -q "perplexity" && ok || bad "eval: $out"
out=$("$MTAC" sample --run "$tmp/a" --prompt "int " --tokens 20 --seed 3 2>&1) && echo "$out" | grep -q "tokens/s" && ok || bad "sample: $out"
s1=$("$MTAC" sample --run "$tmp/a" --prompt "int " --tokens 20 --seed 3 2>/dev/null)
s2=$("$MTAC" sample --run "$tmp/a" --prompt "int " --tokens 20 --seed 3 2>/dev/null)
[ "$s1" = "$s2" ] && ok || bad "sampling with one seed is not repeatable"
"$MTAC" plot --out "$tmp/loss.png" "$tmp/a" > /dev/null && [ "$(head -c 4 "$tmp/loss.png" | tail -c 3)" = "PNG" ] && ok || bad "plot"
# greedy decoding with the KV cache and by full recomputation agree, also past seq_len (restarts)
g1=$("$MTAC" sample --run "$tmp/a" --prompt "int " --tokens 100 --temperature 0 2>/dev/null)
g2=$("$MTAC" sample --run "$tmp/a" --prompt "int " --tokens 100 --temperature 0 --no-cache 2>/dev/null)
[ -n "$g1" ] && [ "$g1" = "$g2" ] && ok || bad "cached and recomputed greedy samples differ: '$g1' vs '$g2'"
out=$("$MTAC" sample --run "$tmp/a" --prompt "int " --tokens 5 --top-k 3 2>&1) && echo "$out" | grep -q "tokens/s" && ok || bad "sample --top-k: $out"
out=$("$MTAC" sample --run "$tmp/nope" 2>&1); rc=$?
[ $rc -eq 1 ] && echo "$out" | grep -q "config.json" && ok || bad "sample of a missing run: rc $rc, $out"

# A micro-batch of more than 2^31 - 1 tokens is refused before anything is read or created (it
# was an unchecked malloc, then a store through NULL).
out=$(train --out "$tmp/huge" --batch_size 1000000 --seq_len 100000 2>&1); rc=$?
[ $rc -eq 2 ] && echo "$out" | grep -q "tokens per micro-batch" && [ ! -e "$tmp/huge" ] && ok || bad "huge batch: rc $rc, $out"
out=$("$MTAC" eval --run "$tmp/a" --batch-size 1000000000 --seq-len 1000 2>&1); rc=$?
[ $rc -eq 1 ] && echo "$out" | grep -q "tokens per micro-batch" && ok || bad "eval, huge batch: rc $rc, $out"

# Weights holding a NaN are refused by eval and sample, naming the tensor (a float32 NaN written
# over entry 2 of the first tensor in the data section).
mkdir "$tmp/nan" && cp "$tmp/a/config.json" "$tmp/a/model.safetensors" "$tmp/nan/"
hdr=$(od -An -tu8 -N8 "$tmp/nan/model.safetensors" | tr -d ' ')
printf '\x00\x00\xc0\x7f' | dd of="$tmp/nan/model.safetensors" bs=1 seek=$((8 + hdr + 8)) conv=notrunc 2>/dev/null
nan_refused() {
    local out rc
    out=$("$@" 2>&1); rc=$?
    [ $rc -eq 1 ] && echo "$out" | grep -q "tensor 'tok_embeddings.weight' holds nan at index 2" && ok || bad "$2 of NaN weights: rc $rc, $out"
}
nan_refused "$MTAC" eval --run "$tmp/nan" --batches 1
nan_refused "$MTAC" sample --run "$tmp/nan" --prompt "int " --tokens 5

# A diverging run (lr 10 and weight decay 10 multiply every weight by 1 - 100 each step) stops
# with exit status 3 and a message naming the step and the value; what the run directory held
# stays byte for byte, and no checkpoint is written from the bad step.
diverge() { train --lr 10 --weight_decay 10 --schedule constant --warmup 0 "$@"; }
diverge --out "$tmp/div" --steps 2 --save_every 0 > /dev/null || bad "diverging run, its first 2 steps"
cp "$tmp/div/checkpoint.safetensors" "$tmp/div.ckpt"
cp "$tmp/div/model.safetensors" "$tmp/div.weights"
out=$(OMP_NUM_THREADS=1 "$MTAC" train --resume "$tmp/div" --steps 50 2>&1); rc=$?
at=$(echo "$out" | sed -n 's/.*diverged: step \([0-9]*\): .*/\1/p')
[ $rc -eq 3 ] && [ "${at:-0}" -gt 2 ] && echo "$out" | grep -q "step $at: .*nan\|step $at: .*inf" && ok || bad "divergence: rc $rc, $out"
cmp -s "$tmp/div.ckpt" "$tmp/div/checkpoint.safetensors" && cmp -s "$tmp/div.weights" "$tmp/div/model.safetensors" && ok \
    || bad "a diverged run changed its checkpoint or weights"
grep -q nan "$tmp/div/metrics.jsonl" && bad "NaN in metrics.jsonl" || ok
# saving every step: the checkpoint left is that of the last finite step (the same weights as a
# run of that many steps)
out=$(diverge --out "$tmp/div1" --steps 50 --save_every 1 2>&1); rc=$?
at=$(echo "$out" | sed -n 's/.*diverged: step \([0-9]*\): .*/\1/p')
[ $rc -eq 3 ] && [ "${at:-0}" -gt 1 ] && echo "$out" | grep -q "still holds step $((at - 1))" && ok || bad "divergence, save_every 1: rc $rc, $out"
diverge --out "$tmp/div2" --steps $((${at:-2} - 1)) --save_every 0 > /dev/null
cmp -s "$tmp/div1/model.safetensors" "$tmp/div2/model.safetensors" && ok || bad "the diverged run's weights are not those of its last good step"

# interrupt: $1 = signal, $2 = run dir; wait until some steps are done, send the signal, resume.
interrupt_and_resume() {
    local sig=$1 dir=$2
    # run mtac itself in the background (not through a function, whose subshell would get the signal)
    OMP_NUM_THREADS=1 "$MTAC" train --config "$tmp/cfg.json" --data "$tmp/data" --out "$dir" > "$dir.log" 2>&1 &
    local pid=$!
    for _ in $(seq 1 400); do
        [ "$(steps_done "$dir")" -ge 12 ] && break
        sleep 0.01
    done
    kill -"$sig" $pid 2>/dev/null
    wait $pid 2>/dev/null
    local rc=$? done_at
    done_at=$(steps_done "$dir")
    if [ "$done_at" -ge 300 ]; then
        bad "the $sig run finished before the signal; nothing was interrupted"
    elif [ "$sig" != KILL ]; then
        # saved, then the exit status of a process the signal ended: 128 + 2 (INT), 128 + 15 (TERM)
        local want=$((128 + $(kill -l "$sig")))
        [ $rc -eq $want ] && grep -q "checkpoint saved: continue with --resume $dir" "$dir.log" && ok ||
            bad "SIG$sig should save, say how to resume and exit $want (rc $rc): $(cat "$dir.log")"
    fi
    train --resume "$dir" > "$dir.log2" 2>&1 || { bad "resume after $sig: $(tail -2 "$dir.log2")"; return; }
    cmp -s "$tmp/a/model.safetensors" "$dir/model.safetensors" && ok || bad "weights after $sig + resume differ"
    [ "$(losses "$tmp/a")" = "$(losses "$dir")" ] && ok || bad "losses after $sig + resume differ"
}
interrupt_and_resume KILL "$tmp/k"
interrupt_and_resume INT "$tmp/i"
interrupt_and_resume TERM "$tmp/t"

# A corrupt or truncated checkpoint is refused with a clear message, and is not overwritten.
cp "$tmp/a/checkpoint.safetensors" "$tmp/good.safetensors"
size=$(stat -c %s "$tmp/a/checkpoint.safetensors")
printf "XXXX" | dd of="$tmp/a/checkpoint.safetensors" bs=1 seek=$((size - 100)) conv=notrunc 2>/dev/null
out=$(train --resume "$tmp/a" 2>&1); rc=$?
[ $rc -ne 0 ] && echo "$out" | grep -q "checksum mismatch" && ok || bad "corrupt checkpoint: rc $rc, $out"
head -c 3000 "$tmp/good.safetensors" > "$tmp/a/checkpoint.safetensors"
out=$(train --resume "$tmp/a" 2>&1); rc=$?
[ $rc -ne 0 ] && [ $rc -lt 128 ] && ok || bad "truncated checkpoint: rc $rc, $out"
out=$(train --out "$tmp/a2" 2>&1); rc=$?
[ $rc -ne 0 ] && echo "$out" | grep -q "already holds a run" && ok || bad "an existing run must not be overwritten"

# Every number is checked finite and in range, from a file as from a flag, before a run starts: a
# rope_theta of 1e39 (inf as a float32) used to train and write null into config.json, which
# eval, sample and --resume then refused.
cat > "$tmp/inf.json" <<'JSON'
{"steps": 2, "warmup": 0, "batch_size": 2, "seq_len": 8, "eval_batches": 1,
 "model": {"dim": 8, "n_layers": 1, "n_heads": 2, "vocab_size": 259, "rope_theta": 1e39}}
JSON
out=$("$MTAC" train --config "$tmp/inf.json" --data "$tmp/data" --out "$tmp/inf" 2>&1); rc=$?
[ $rc -eq 2 ] && echo "$out" | grep -q "'rope_theta' = 1e+39" && [ ! -e "$tmp/inf" ] && ok || bad "rope_theta 1e39: rc $rc, $out"
for kv in "eps 0" "lr 1e-50" "lr 1e400" "beta2 1" "seed 9007199254740992" "clip -1"; do
    set -- $kv
    out=$("$MTAC" train --"$1" "$2" 2>&1); rc=$?
    [ $rc -eq 2 ] && echo "$out" | grep -q "^mtac train: $1: " && ok || bad "--$1 $2: rc $rc, $out"
done
out=$("$MTAC" train --batch-size 1000000 --seq-len 1000000 2>&1); rc=$?
[ $rc -eq 2 ] && echo "$out" | grep -q "more than 2147483647" && ok || bad "batch_size * seq_len: rc $rc, $out"
# A config file's string is refused when too long, as the same value given as a flag is (it used
# to be cut at 511 characters), and so is a --resume directory that --out would refuse.
long=$(printf 'd%.0s' $(seq 600))
echo "{\"data\": \"$long\"}" > "$tmp/long.json"
out=$("$MTAC" train --config "$tmp/long.json" 2>&1); rc=$?
[ $rc -eq 2 ] && echo "$out" | grep -q "data: value too long (600 characters, at most 511)" && ok || bad "long string in a file: rc $rc, $out"
out=$("$MTAC" train --data "$long" 2>&1); rc=$?
[ $rc -eq 2 ] && echo "$out" | grep -q "data: value too long" && ok || bad "long --data: rc $rc, $out"
out=$(train --resume "$tmp/$(printf './%.0s' $(seq 300))k" 2>&1); rc=$?
[ $rc -eq 2 ] && echo "$out" | grep -q "value too long" && ok || bad "long --resume: rc $rc, $out"
# What training accepts, it writes into config.json in a form it reads back: the extremes of the
# floats (the smallest normal float32: training flushes subnormal ones to 0) and the seed survive
# eval, sample and --resume.
cat > "$tmp/edge.json" <<'JSON'
{"steps": 2, "batch_size": 2, "seq_len": 8, "warmup": 0, "eval_batches": 1, "seed": 9007199254740991,
 "lr": 1.1754943508222875e-38, "min_lr": 0, "eps": 1.1754943508222875e-38, "beta1": 0, "beta2": 0.999999, "clip": 1e9,
 "weight_decay": 10,
 "model": {"dim": 8, "n_layers": 1, "n_heads": 2, "vocab_size": 259, "rope_theta": 3.4028234663852886e38,
           "norm_eps": 1.1754943508222875e-38, "attn_dropout": 0.99999994}}
JSON
# a subnormal float32 is refused, from a flag or a file (it would act as 0)
out=$("$MTAC" train --eps 1e-45 2>&1); rc=$?
[ $rc -eq 2 ] && echo "$out" | grep -q "eps: '1e-45' is below the smallest normal float32" && ok || bad "--eps 1e-45: rc $rc, $out"
sed 's/"norm_eps": 1.1754943508222875e-38/"norm_eps": 1e-45/' "$tmp/edge.json" > "$tmp/sub.json"
out=$("$MTAC" train --config "$tmp/sub.json" 2>&1); rc=$?
[ $rc -eq 2 ] && echo "$out" | grep -q "norm_eps 1.4013e-45 is below the smallest normal" && ok || bad "norm_eps 1e-45: rc $rc, $out"
edge() { OMP_NUM_THREADS=1 "$MTAC" train --data "$tmp/data" "$@"; }
out=$(edge --config "$tmp/edge.json" --out "$tmp/edge" 2>&1) && ok || bad "edge-value run: $out"
out=$("$MTAC" eval --run "$tmp/edge" --batches 1 2>&1) && ok || bad "eval of the edge-value run: $out"
out=$("$MTAC" sample --run "$tmp/edge" --prompt "x" --tokens 2 2>&1) && ok || bad "sample of the edge-value run: $out"
out=$(edge --resume "$tmp/edge" --steps 3 2>&1) && ok || bad "resume of the edge-value run: $out"
grep -q '"seed":[[:space:]]*9007199254740991,' "$tmp/edge/config.json" && ok || bad "seed not kept exactly"

# Bad configs and shards.
echo '{"stepz": 3}' > "$tmp/bad.json"
out=$("$MTAC" train --config "$tmp/bad.json" 2>&1); rc=$?
[ $rc -eq 2 ] && echo "$out" | grep -q "unknown config key 'stepz'" && ok || bad "unknown key: rc $rc, $out"
printf '{"steps": 3}\n{"steps": 5}\n' > "$tmp/two.json"  # the second object used to be ignored
out=$("$MTAC" train --config "$tmp/two.json" 2>&1); rc=$?
[ $rc -eq 2 ] && echo "$out" | grep -q "not a JSON object (parse error near '{\"steps\": 5}')" && ok || bad "trailing text: rc $rc, $out"
echo '{"steps": 3, "seed": 1, "steps": 5}' > "$tmp/twice.json"  # the last one used to win silently
out=$("$MTAC" train --config "$tmp/twice.json" 2>&1); rc=$?
[ $rc -eq 2 ] && echo "$out" | grep -q "key 'steps' appears twice" && ok || bad "repeated key: rc $rc, $out"
echo '{"batch-size": 3, "batch_size": 5}' > "$tmp/twice.json"
out=$("$MTAC" train --config "$tmp/twice.json" 2>&1); rc=$?
[ $rc -eq 2 ] && echo "$out" | grep -q "key 'batch_size' appears twice" && ok || bad "repeated key: rc $rc, $out"
out=$("$MTAC" train --lr abc 2>&1); rc=$?
[ $rc -eq 2 ] && echo "$out" | grep -q "lr" && ok || bad "bad value: rc $rc, $out"
out=$("$MTAC" train --preset nope 2>&1); rc=$?
[ $rc -eq 2 ] && echo "$out" | grep -q "unknown preset" && ok || bad "bad preset: rc $rc, $out"
# mtac convert --add-mta: a baseline run as an MTA model with identity kernels has the baseline's
# validation loss exactly; training continues from it (init), and eval needle/babi score a run.
sed -e 's/"attn_dropout": 0.1,/"attn_dropout": 0.1}}/' -e '/"mta":/,$d' "$tmp/cfg.json" > "$tmp/base.json"
train --config "$tmp/base.json" --out "$tmp/base" --steps 20 > /dev/null || bad "baseline run"
out=$("$MTAC" convert --add-mta --run "$tmp/base" --out "$tmp/retro" 2>&1) && echo "$out" | grep -q "converted" && ok || bad "convert: $out"
e1=$("$MTAC" eval --run "$tmp/base" --batches 4 2>&1 | cut -d'(' -f1)
e2=$("$MTAC" eval --run "$tmp/retro" --batches 4 2>&1 | cut -d'(' -f1)
[ -n "$e1" ] && [ "$e1" = "$e2" ] && ok || bad "converted model: '$e2', baseline '$e1'"
grep -q '"qk_layers"' "$tmp/retro/config.json" && ok || bad "converted config has no MTA"
out=$(OMP_NUM_THREADS=1 "$MTAC" train --config "$tmp/retro/config.json" --out "$tmp/retro-run" --steps 6 2>&1) && ok || bad "training from a converted model: $out"
out=$("$MTAC" convert --add-mta --run "$tmp/retro" --out "$tmp/x" 2>&1); rc=$?
[ $rc -eq 2 ] && echo "$out" | grep -q "already an MTA model" && ok || bad "convert of an MTA run: rc $rc, $out"
out=$("$MTAC" eval needle --run "$tmp/retro" --contexts 256 --depths 0,1 --needles 2 --examples 2 --json "$tmp/n.json" --png "$tmp/n.png" 2>&1) &&
    grep -q '"accuracy"' "$tmp/n.json" && [ "$(head -c 4 "$tmp/n.png" | tail -c 3)" = "PNG" ] && ok || bad "eval needle: $out"
out=$("$MTAC" eval babi --run "$tmp/retro" --contexts 512 --examples 2 2>&1) && echo "$out" | grep -q "qa3" && ok || bad "eval babi: $out"
out=$("$MTAC" eval needle --run "$tmp/retro" --contexts 100 2>&1); rc=$?
[ $rc -eq 1 ] && echo "$out" | grep -q "too short" && ok || bad "eval needle, short context: rc $rc, $out"

# Grouped-query attention (4 heads on 2 kv heads): a run of 10 steps resumed to 20 ends with the
# uninterrupted run's weights and losses; its config.json keeps n_kv_heads; greedy samples from
# the KV cache (of 2 heads) and by recomputation agree; convert --add-mta keeps n_kv_heads.
sed -e 's/"n_heads": 4,/"n_heads": 4, "n_kv_heads": 2,/' "$tmp/cfg.json" > "$tmp/gqa.json"
train --config "$tmp/gqa.json" --schedule constant --out "$tmp/gqa" --steps 20 > /dev/null || bad "GQA run"
train --config "$tmp/gqa.json" --schedule constant --out "$tmp/gqa2" --steps 10 > /dev/null || bad "GQA run, first 10 steps"
OMP_NUM_THREADS=1 "$MTAC" train --resume "$tmp/gqa2" --steps 20 > /dev/null 2>&1 || bad "GQA resume"
cmp -s "$tmp/gqa/model.safetensors" "$tmp/gqa2/model.safetensors" && [ "$(losses "$tmp/gqa")" = "$(losses "$tmp/gqa2")" ] &&
    ok || bad "GQA run: weights or losses after resume differ"
grep -q '"n_kv_heads":[[:space:]]*2,' "$tmp/gqa/config.json" && ok || bad "GQA config.json without n_kv_heads"
g1=$("$MTAC" sample --run "$tmp/gqa" --prompt "int " --tokens 40 --temperature 0 2>/dev/null)
g2=$("$MTAC" sample --run "$tmp/gqa" --prompt "int " --tokens 40 --temperature 0 --no-cache 2>/dev/null)
[ -n "$g1" ] && [ "$g1" = "$g2" ] && ok || bad "GQA: cached and recomputed greedy samples differ: '$g1' vs '$g2'"
sed -e 's/"n_heads": 4,/"n_heads": 4, "n_kv_heads": 2,/' "$tmp/base.json" > "$tmp/gqa-base.json"
train --config "$tmp/gqa-base.json" --out "$tmp/gqa-base" --steps 5 > /dev/null || bad "GQA baseline run"
out=$("$MTAC" convert --add-mta --run "$tmp/gqa-base" --out "$tmp/gqa-retro" 2>&1) || bad "convert of a GQA run: $out"
grep -q '"n_kv_heads":[[:space:]]*2,' "$tmp/gqa-retro/config.json" && ok || bad "converted GQA config lost n_kv_heads"
e1=$("$MTAC" eval --run "$tmp/gqa-base" --batches 2 2>&1 | cut -d'(' -f1)
e2=$("$MTAC" eval --run "$tmp/gqa-retro" --batches 2 2>&1 | cut -d'(' -f1)
[ -n "$e1" ] && [ "$e1" = "$e2" ] && ok || bad "converted GQA model: '$e2', baseline '$e1'"

# Packed documents (doc_mask, docs/model.md) on shards of paragraphs: one verse each (sed G puts
# a blank line after every line), so most windows of 33 tokens hold an EOS. A run of 10 steps
# resumed to 20 ends with the uninterrupted run's weights and losses, which are not those of the
# run without doc_mask; config.json keeps doc_mask; --doc-mask cannot turn it on in a resumed run;
# greedy samples from the cache and by recomputation agree; convert --add-mta keeps doc_mask.
sed G "$tmp/corpus.txt" > "$tmp/verses.txt"
"$MTAC" data --out "$tmp/pdata" --val-every 3 --documents paragraph "$tmp/verses.txt" > /dev/null || bad "mtac data --documents paragraph"
dm() { OMP_NUM_THREADS=1 "$MTAC" train --config "$tmp/cfg.json" --data "$tmp/pdata" --schedule constant "$@"; }
dm --doc-mask --out "$tmp/dm" --steps 20 > /dev/null || bad "doc_mask run"
dm --doc-mask --out "$tmp/dm2" --steps 10 > /dev/null || bad "doc_mask run, first 10 steps"
OMP_NUM_THREADS=1 "$MTAC" train --resume "$tmp/dm2" --steps 20 > /dev/null 2>&1 || bad "doc_mask resume"
cmp -s "$tmp/dm/model.safetensors" "$tmp/dm2/model.safetensors" && [ "$(losses "$tmp/dm")" = "$(losses "$tmp/dm2")" ] &&
    ok || bad "doc_mask run: weights or losses after resume differ"
dm --out "$tmp/nodm" --steps 20 > /dev/null || bad "run without doc_mask"
[ "$(losses "$tmp/dm")" != "$(losses "$tmp/nodm")" ] && ok || bad "doc_mask changed no loss: the windows hold no EOS?"
grep -q '"doc_mask":[[:space:]]*1,' "$tmp/dm/config.json" && ok || bad "doc_mask run's config.json without doc_mask"
grep -q doc_mask "$tmp/nodm/config.json" && bad "config.json of a run without doc_mask names it" || ok
out=$(OMP_NUM_THREADS=1 "$MTAC" train --resume "$tmp/nodm" --steps 22 --doc-mask 2>&1); rc=$?
[ $rc -eq 2 ] && echo "$out" | grep -q "has no doc_mask" && ok || bad "--doc-mask on resuming a run without it: rc $rc, $out"
g1=$("$MTAC" sample --run "$tmp/dm" --prompt "And " --tokens 60 --temperature 0 2>/dev/null)
g2=$("$MTAC" sample --run "$tmp/dm" --prompt "And " --tokens 60 --temperature 0 --no-cache 2>/dev/null)
[ -n "$g1" ] && [ "$g1" = "$g2" ] && ok || bad "doc_mask: cached and recomputed greedy samples differ: '$g1' vs '$g2'"
OMP_NUM_THREADS=1 "$MTAC" train --config "$tmp/base.json" --data "$tmp/pdata" --doc-mask --out "$tmp/dm-base" --steps 5 > /dev/null 2>&1 || bad "doc_mask baseline run"
out=$("$MTAC" convert --add-mta --run "$tmp/dm-base" --out "$tmp/dm-retro" 2>&1) || bad "convert of a doc_mask run: $out"
grep -q '"doc_mask":[[:space:]]*1,' "$tmp/dm-retro/config.json" && ok || bad "converted doc_mask config lost doc_mask"

# ---- issue 42, rows 2, 3, 5, 6, 8, 9, 12 (train-robust) -------------------------------------
# Row 2: a data directory without val.bin (or with a directory there) is refused before the
# first step (it used to train to the first evaluation and stop there, nothing saved).
mkdir -p "$tmp/noval" && cp "$tmp/data/train.bin" "$tmp/noval/"
out=$(train --data "$tmp/noval" --out "$tmp/nv" --steps 60 --eval_every 50 2>&1); rc=$?
[ $rc -eq 1 ] && echo "$out" | grep -q "noval/val.bin.*--data" && [ ! -s "$tmp/nv/metrics.jsonl" ] && ok ||
    bad "missing val.bin: rc $rc, $(steps_done "$tmp/nv") steps done, $out"
mkdir "$tmp/noval/val.bin"
out=$(train --data "$tmp/noval" --out "$tmp/nv2" --steps 60 --eval_every 50 2>&1); rc=$?
[ $rc -eq 1 ] && echo "$out" | grep -q "not a regular file" && [ ! -s "$tmp/nv2/metrics.jsonl" ] && ok ||
    bad "val.bin a directory: rc $rc, $out"
# ... and one that goes bad during the run fails that step's evaluation: the step is saved and the
# run resumes from it once val.bin is back (slow steps: grad_accum 20, so the swap comes first).
cp -r "$tmp/data" "$tmp/vdata"
OMP_NUM_THREADS=1 "$MTAC" train --config "$tmp/cfg.json" --data "$tmp/vdata" --out "$tmp/vb" --grad_accum 20 \
    --steps 60 --eval_every 50 --save_every 0 > "$tmp/vb.log" 2>&1 &
pid=$!
for _ in $(seq 1 1000); do [ "$(steps_done "$tmp/vb")" -ge 3 ] && break; sleep 0.01; done
mv "$tmp/vdata/val.bin" "$tmp/val.keep" && printf 'garbage' > "$tmp/vdata/val.bin"
wait $pid; rc=$?
mv "$tmp/val.keep" "$tmp/vdata/val.bin"
[ $rc -eq 1 ] && grep -q "step 50 is saved: continue with --resume" "$tmp/vb.log" && ok || bad "val.bin gone bad: rc $rc, $(cat "$tmp/vb.log")"
out=$(OMP_NUM_THREADS=1 "$MTAC" train --resume "$tmp/vb" 2>&1) && echo "$out" | grep -q "resumed .* at step 50" &&
    [ "$(losses "$tmp/vb" | cut -d' ' -f1 | tr '\n' ' ')" = "$(seq -s ' ' 60) " ] && ok ||
    bad "resume after a failed evaluation (metrics of steps $(losses "$tmp/vb" | cut -d' ' -f1 | tr '\n' ' ')): $out"

# Row 3: metrics.jsonl is JSON even when a number is not finite (lr 10: the first validation
# loss is above 1000, its perplexity e^1000 overflows): null, and mtac plot skips it, saying so.
train --out "$tmp/inf" --lr 10 --schedule constant --warmup 0 --eval_every 1 --steps 3 > /dev/null 2>&1
grep -q '"val_ppl":null' "$tmp/inf/metrics.jsonl" && ! grep -qi 'inf\|nan' "$tmp/inf/metrics.jsonl" && ok ||
    bad "non-finite metrics: $(head -2 "$tmp/inf/metrics.jsonl")"
mkdir -p "$tmp/nul" && printf '%s\n' '{"step":1,"loss":null,"val_loss":null}' '{"step":2,"loss":3.5}' \
    '{"step":3,"loss":3,"val_loss":3.2}' > "$tmp/nul/metrics.jsonl"
out=$("$MTAC" plot --out "$tmp/nul.png" "$tmp/inf" "$tmp/nul" 2>&1) &&
    echo "$out" | grep -q "nul/metrics.jsonl: skipped 1 training and 1 validation losses that are null" && ok || bad "plot of nulls: $out"
echo '{"loss":1}' >> "$tmp/nul/metrics.jsonl"
out=$("$MTAC" plot --out "$tmp/nul.png" "$tmp/nul" 2>&1); rc=$?
[ $rc -eq 1 ] && echo "$out" | grep -q 'line 4 has no number "step"' && ok || bad "plot, a line without step: rc $rc, $out"

# Row 5: a second Ctrl-C ends the run at once, mid-step, without saving: the checkpoint stays
# byte for byte (steps of 3000 micro-batches, seconds each, so the first signal's step is still
# running; bounded waits).
train --out "$tmp/c2" --steps 1 --schedule constant > /dev/null || bad "run of 1 step"
cp "$tmp/c2/checkpoint.safetensors" "$tmp/c2.ckpt"
OMP_NUM_THREADS=1 "$MTAC" train --resume "$tmp/c2" --steps 100 --grad_accum 3000 > "$tmp/c2.log" 2>&1 &
pid=$!
for _ in $(seq 1 1000); do grep -q "^training" "$tmp/c2.log" && break; sleep 0.01; done
kill -INT $pid
for _ in $(seq 1 500); do grep -q "stopping after this step" "$tmp/c2.log" && break; sleep 0.01; done
kill -INT $pid
for _ in $(seq 1 1000); do kill -0 $pid 2>/dev/null || break; sleep 0.01; done
kill -KILL $pid 2>/dev/null && bad "still running 10 s after the second SIGINT"
wait $pid; rc=$?
[ $rc -eq 130 ] && ! grep -q "checkpoint saved" "$tmp/c2.log" && cmp -s "$tmp/c2.ckpt" "$tmp/c2/checkpoint.safetensors" && ok ||
    bad "second SIGINT: rc $rc, $(cat "$tmp/c2.log")"
out=$(OMP_NUM_THREADS=1 "$MTAC" train --resume "$tmp/c2" --steps 2 2>&1) && ok || bad "resume after a second SIGINT: $out"

# Row 6: --steps below the run's step is refused, config.json untouched.
cp "$tmp/c2/config.json" "$tmp/c2.cfg"
out=$(OMP_NUM_THREADS=1 "$MTAC" train --resume "$tmp/c2" --steps 1 2>&1); rc=$?
[ $rc -eq 1 ] && echo "$out" | grep -q "steps 1 is below the run's step 2" && ! echo "$out" | grep -q "^training\|note:" &&
    cmp -s "$tmp/c2.cfg" "$tmp/c2/config.json" && ok || bad "--steps below the run's step: rc $rc, $out"

# Row 8: eval says how many batches it evaluated; --batches all is the whole set; progress on stderr.
nb=$(sed -nE 's/.*\(([0-9]+) batches.*/\1/p' <<< "$("$MTAC" eval --run "$tmp/a" --batches all 2>/dev/null)")
out=$("$MTAC" eval --run "$tmp/a" --batches 100000 2>&1)
[ -n "$nb" ] && [ "$nb" -lt 100000 ] && echo "$out" | grep -q "($nb batches of 4 x 32" && echo "$out" | grep -q "batch $nb/$nb" &&
    echo "$out" | grep -q "holds $nb batches" && ok || bad "eval --batches past the end ($nb): $out"
out=$("$MTAC" eval --run "$tmp/a" --batches 2 2>/dev/null) && echo "$out" | grep -q "(2 batches" && ok || bad "eval --batches 2: $out"
out=$("$MTAC" eval --run "$tmp/a" --batches some 2>&1); rc=$?
[ $rc -eq 2 ] && echo "$out" | grep -q "positive integer or 'all'" && ok || bad "eval --batches some: rc $rc, $out"

# Row 9: a run trained with a relative --data is evaluated and resumed from another directory;
# one whose data is gone says to give --data.
(cd "$tmp" && OMP_NUM_THREADS=1 "$MTAC" train --config cfg.json --data data --out rel --steps 2 --schedule constant > /dev/null) || bad "relative --data"
out=$(cd / && "$MTAC" eval --run "$tmp/rel" --batches 1 2>&1) && ok || bad "eval from another directory: $out"
out=$(cd / && OMP_NUM_THREADS=1 "$MTAC" train --resume "$tmp/rel" --steps 3 2>&1) && ok || bad "resume from another directory: $out"
cp -r "$tmp/data" "$tmp/gone"
train --data "$tmp/gone" --out "$tmp/g" --steps 2 --schedule constant > /dev/null || bad "run on a copy"
rm -r "$tmp/gone"
out=$("$MTAC" eval --run "$tmp/g" --batches 1 2>&1); rc=$?
[ $rc -eq 1 ] && echo "$out" | grep -q "give --data DIR" && ok || bad "eval, data gone: rc $rc, $out"
out=$(OMP_NUM_THREADS=1 "$MTAC" train --resume "$tmp/g" --steps 3 2>&1); rc=$?
[ $rc -eq 1 ] && echo "$out" | grep -q "gone/train.bin.*--data" && ok || bad "resume, data gone: rc $rc, $out"

# Row 12: a vocabulary smaller than the shards' tokens is refused before the first step, naming
# vocab_size and the file.
sed 's/"vocab_size": 259/"vocab_size": 100/' "$tmp/cfg.json" > "$tmp/v100.json"
out=$(OMP_NUM_THREADS=1 "$MTAC" train --config "$tmp/v100.json" --data "$tmp/data" --out "$tmp/v100" 2>&1); rc=$?
[ $rc -eq 1 ] && echo "$out" | grep -q "data/train.bin holds token [0-9]* (at [0-9]*), but the model's vocab_size is 100" &&
    [ ! -s "$tmp/v100/metrics.jsonl" ] && ok || bad "vocab_size 100: rc $rc, $out"
# ---- end of issue 42 (train-robust) ----------------------------------------------------------

head -c 100 "$tmp/data/train.bin" > "$tmp/data/val.bin"
out=$(train --out "$tmp/z" --steps 10 2>&1); rc=$?
[ $rc -eq 1 ] && echo "$out" | grep -q "val.bin" && ok || bad "truncated shard: rc $rc, $out"

finish train
