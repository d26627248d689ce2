#!/usr/bin/env bash
# test_distributed.sh MTAC MPI: data-parallel training (docs/distributed.md) on this machine.
#   MPI = 1 (mtac built with MPI): runs of 1, 2, 3 and 4 ranks with the same global batch end with
#   the same weights, moments and losses, bit for bit (3 ranks do not divide the 4 micro-batches);
#   a run stopped by SIGUSR1 or SIGTERM to mpirun saves once and resumes on another number of ranks to the
#   uninterrupted result; a rank given another configuration, or killed, fails the job naming it,
#   and the last checkpoint still resumes to the same result; too few micro-batches is refused; a
#   doc_mask run on 2 ranks equals 1 process.
#   MPI = 0: mpirun of a build without MPI is refused with a clear message.
# Exits 77 (skipped) when mpirun is missing.
set -u
MTAC=$1
HAVE_MPI=$2
command -v mpirun > /dev/null || { echo "SKIP: mpirun not found (apt-get install openmpi-bin)"; exit 77; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
. "$(dirname "$0")/expect.sh"
# CI runs as root; more ranks than cores; one thread per rank (the same per-rank thread count is
# what makes the per-micro-batch gradients identical).
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMP_NUM_THREADS=1
# Containers often forbid the cross-process copies (CMA) of the shared-memory transport: copy twice.
export OMPI_MCA_btl_vader_single_copy_mechanism=none
# Open MPI's own allocations are not ours to report
export ASAN_OPTIONS="${ASAN_OPTIONS:-}:detect_leaks=0"
mpi() { local np=$1; shift; mpirun --oversubscribe -np "$np" "$@"; }

# A constant schedule, so that a run can be continued to more steps.
tiny_mta_run "$tmp" "$MTAC" '"steps": 24, "batch_size": 2, "seq_len": 32, "grad_accum": 4, "lr": 0.003, "warmup": 5,
 "schedule": "constant", "save_every": 4, "eval_every": 12, "eval_batches": 2, "log_every": 4, "seed": 7'
train() { "$MTAC" train --config "$tmp/cfg.json" --data "$tmp/data" "$@"; }

if [ "$HAVE_MPI" != 1 ]; then
    out=$(mpi 2 "$MTAC" train --config "$tmp/cfg.json" --data "$tmp/data" --out "$tmp/x" 2>&1); rc=$?
    [ $rc -ne 0 ] && echo "$out" | grep -q "built without MPI" && [ ! -e "$tmp/x" ] && ok || bad "mpirun of a build without MPI: rc $rc, $out"
    finish "test_distributed (no MPI)"
    exit
fi

# The tensors of a safetensors file (its data section; the header holds the run directory).
data_of() { local h; h=$(od -An -tu8 -N8 "$1" | tr -d ' '); tail -c +$((9 + h)) "$1"; }
same_run() {  # same weights, moments and per-step losses, gradient norms and validation losses
    cmp -s "$1/model.safetensors" "$2/model.safetensors" &&
        cmp -s <(data_of "$1/checkpoint.safetensors") <(data_of "$2/checkpoint.safetensors") &&
        cmp -s <(sed 's/,"tokens_per_s":[0-9.]*//' "$1/metrics.jsonl") <(sed 's/,"tokens_per_s":[0-9.]*//' "$2/metrics.jsonl")
}

train --out "$tmp/n1" > /dev/null || bad "1 process"
for np in 2 3 4; do
    out=$(mpi $np "$MTAC" train --config "$tmp/cfg.json" --data "$tmp/data" --out "$tmp/n$np" 2>&1) || bad "$np ranks: $out"
    echo "$out" | grep -q "on $np ranks" && ok || bad "$np ranks: no 'on $np ranks' in: $out"
    same_run "$tmp/n1" "$tmp/n$np" && ok || bad "$np ranks differ from 1 process"
done
[ "$(wc -l < "$tmp/n2/metrics.jsonl")" = 24 ] && ok || bad "metrics.jsonl of 2 ranks: one line per step"

# Packed documents (doc_mask) on shards of one verse per paragraph (sed G puts a blank line after
# every line): each micro-batch's document ids come from its tokens, whichever rank runs it.
sed G "$tmp/corpus.txt" > "$tmp/verses.txt"
"$MTAC" data --out "$tmp/pdata" --val-every 3 --documents paragraph "$tmp/verses.txt" > /dev/null || bad "mtac data --documents paragraph"
"$MTAC" train --config "$tmp/cfg.json" --data "$tmp/pdata" --doc-mask --out "$tmp/d1" --steps 8 > /dev/null || bad "doc_mask, 1 process"
mpi 2 "$MTAC" train --config "$tmp/cfg.json" --data "$tmp/pdata" --doc-mask --out "$tmp/d2" --steps 8 > /dev/null || bad "doc_mask, 2 ranks"
same_run "$tmp/d1" "$tmp/d2" && ok || bad "doc_mask: 2 ranks differ from 1 process"
grep -q '"doc_mask":[[:space:]]*1,' "$tmp/d2/config.json" && ok || bad "doc_mask: config.json of 2 ranks without it"

# Long-context task examples mixed into the data (docs/longctx.md) are a function of the step, the
# micro-batch and the sequence, not of the rank.
train --out "$tmp/m1" --steps 8 --seq_len 256 --mix 0.5 > /dev/null || bad "mixture, 1 process"
mpi 3 "$MTAC" train --config "$tmp/cfg.json" --data "$tmp/data" --out "$tmp/m3" --steps 8 --seq_len 256 --mix 0.5 > /dev/null || bad "mixture, 3 ranks"
same_run "$tmp/m1" "$tmp/m3" && ok || bad "mixture: 3 ranks differ from 1 process"

# Continue the 2-rank run to 48 steps on 3 ranks, and a 1-process run to 48 steps: the same.
train --out "$tmp/long" --steps 48 > /dev/null || bad "48 steps"
out=$(mpi 3 "$MTAC" train --resume "$tmp/n2" --steps 48 2>&1) && echo "$out" | grep -q "resumed" && ok || bad "resume on 3 ranks: $out"
cmp -s "$tmp/long/model.safetensors" "$tmp/n2/model.safetensors" && ok || bad "2 ranks, then 3 on resume, differ from 1 process"

# A signal to mpirun: every rank finishes its step, the run saves once and stops; resumed on 1
# process a few steps further it ends as an uninterrupted run of as many steps. mpirun forwards
# SIGUSR1 at once, SIGTERM and SIGINT after odls_base_sigkill_timeout (1 s, then SIGKILL 1 s later:
# enough for these short steps). The runs are given far more steps than they get to make, so the
# signal arrives mid-run however fast the machine is (the schedule is constant).
for sig in USR1 TERM; do
    mpirun --oversubscribe -np 2 "$MTAC" train --config "$tmp/cfg.json" --data "$tmp/data" --out "$tmp/s$sig" \
        --steps 5000 --save_every 0 --eval_every 0 --log_every 100000 > "$tmp/s.log" 2>&1 &
    job=$!
    for _ in $(seq 200); do [ "$(lines "$tmp/s$sig/metrics.jsonl")" -ge 20 ] && break; sleep 0.1; done
    kill -$sig $job
    wait $job
    stopped=$(sed -nE 's/.*stopped by signal at step ([0-9]+).*/\1/p' "$tmp/s.log")
    [ -n "$stopped" ] && [ "$stopped" -lt 5000 ] && [ "$(lines "$tmp/s$sig/metrics.jsonl")" = "$stopped" ] && ok ||
        bad "SIG$sig: stopped at '$stopped': $(cat "$tmp/s.log")"
    n=$((${stopped:-0} + 8))
    train --out "$tmp/u$sig" --steps $n --save_every 0 --eval_every 0 --log_every 100000 > /dev/null || bad "$n steps"
    "$MTAC" train --resume "$tmp/s$sig" --steps $n > /dev/null &&
        cmp -s "$tmp/u$sig/model.safetensors" "$tmp/s$sig/model.safetensors" && ok ||
        bad "SIG$sig, then resumed on 1 process to step $n, differs from $n uninterrupted steps"
done

# A rank given another configuration: the job fails before anything is written, naming it.
out=$(mpirun --oversubscribe -np 1 "$MTAC" train --config "$tmp/cfg.json" --data "$tmp/data" --out "$tmp/c" : \
      -np 1 "$MTAC" train --config "$tmp/cfg.json" --data "$tmp/data" --out "$tmp/c" --lr 0.1 2>&1); rc=$?
[ $rc -ne 0 ] && echo "$out" | grep -q "configuration of rank(s) 1 differs" && [ ! -e "$tmp/c" ] && ok || bad "different configs: rc $rc, $out"

# Fewer micro-batches than ranks.
out=$(mpi 3 "$MTAC" train --config "$tmp/cfg.json" --data "$tmp/data" --out "$tmp/g" --grad_accum 2 2>&1); rc=$?
[ $rc -ne 0 ] && echo "$out" | grep -q "each rank needs at least one" && ok || bad "grad_accum 2 on 3 ranks: rc $rc, $out"

# A rank killed mid-run (the kernel's OOM killer, a lost node): the job fails naming the rank; the
# last checkpoint is whole and resumes to the uninterrupted result (the checkpoint is at or before
# the last step logged, so n is past it).
mpirun --oversubscribe -np 2 "$MTAC" train --config "$tmp/cfg.json" --data "$tmp/data" --out "$tmp/k" --steps 5000 --save_every 7 \
    --eval_every 0 --log_every 100000 > "$tmp/k.log" 2>&1 &
job=$!
for _ in $(seq 200); do [ "$(lines "$tmp/k/metrics.jsonl")" -ge 30 ] && break; sleep 0.1; done
victim=$(pgrep -f -- "--out $tmp/k " | while read -r p; do [ "$(cat /proc/$p/comm 2>/dev/null)" = mtac ] && echo "$p"; done | tail -1)
[ -n "$victim" ] && kill -KILL "$victim"
wait $job; rc=$?
[ $rc -ne 0 ] && grep -q "rank [01]" "$tmp/k.log" && ok || bad "killed rank: rc $rc, $(cat "$tmp/k.log")"
n=$(($(lines "$tmp/k/metrics.jsonl") + 8))
train --out "$tmp/ku" --steps $n --save_every 7 --eval_every 0 --log_every 100000 > /dev/null
"$MTAC" train --resume "$tmp/k" --steps $n > /dev/null && cmp -s "$tmp/ku/model.safetensors" "$tmp/k/model.safetensors" && ok ||
    bad "resume after a killed rank to step $n differs"

finish test_distributed
