#!/usr/bin/env bash
# test_lm_compare.sh MTAC [HAVE_MPI]: scripts/lm_compare.sh --quick writes a table of the right shape whose
# every number is finite and a PNG of the curves; the same command again skips the finished runs
# and resumes a partial one; other options over the same directory, and bad flags, are refused.
set -u
MTAC=$1
HAVE_MPI=${2:-0}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
. "$(dirname "$0")/expect.sh"
compare="$(dirname "$0")/../scripts/lm_compare.sh"
x=$tmp/x
tail -c 3000 "$(dirname "$0")/data/corpus.txt" > "$tmp/held_out.txt"
run() { OMP_NUM_THREADS=1 "$compare" --mtac "$MTAC" "$@"; }

out=$(run --quick --out "$x" --test "$tmp/held_out.txt" 2>&1) && ok || bad "quick run: $out"

# rows: a table's data rows under its heading (up to the next blank line after it)
rows() { awk -v h="## $2" '$0 ~ "^" h {on = 1; next} on && /^\| [a-z]/ && !/^\| arm/ {n++} on && /^## / {on = 0} END {print n + 0}' "$1"; }
[ "$(rows "$x/results.md" Runs)" = 4 ] && ok || bad "Runs: $(rows "$x/results.md" Runs) rows, wanted 2 arms x 2 seeds"
[ "$(rows "$x/results.md" 'Per arm')" = 2 ] && ok || bad "Per arm: $(rows "$x/results.md" 'Per arm') rows, wanted 2"
[ "$(rows "$x/results.md" 'Paired')" = 4 ] && ok || bad "Paired: $(rows "$x/results.md" Paired) rows, wanted 2 seeds + mean + SD"
grep -q '| mta | SD | [0-9.-]* | [0-9.-]* |' "$x/results.md" && ok || bad "no SD of the val and test differences"

# every number in results.json is finite (NaN and Infinity are refused by the parser too); an SD
# is null only over one seed
finite() {
    python3 - "$1" <<'PY'
import json, math, sys
def nan(c): raise ValueError('not finite: ' + c)
def walk(v, path):
    if isinstance(v, dict):
        if 'sd' in v and v['sd'] is None and v.get('n') != 1: raise ValueError(path + ': sd null over %s' % v.get('n'))
        for k, w in v.items(): walk(w, path + '.' + k)
    elif isinstance(v, list):
        for i, w in enumerate(v): walk(w, '%s[%d]' % (path, i))
    elif isinstance(v, float) and not math.isfinite(v): raise ValueError(path + ' not finite')
r = json.load(open(sys.argv[1]), parse_constant=nan)
walk(r, '')
assert len(r['runs']) == 4 and all('test_loss' in x for x in r['runs']), r['runs']
assert set(r['differences']) == {'mta'} and len(r['differences']['mta']['val_loss']['per_seed']) == 2
PY
}
out=$(finite "$x/results.json" 2>&1) && ok || bad "results.json: $out"
[ "$(head -c 4 "$x/curves.png" | tail -c 3)" = PNG ] && ok || bad "curves.png is not a PNG"

# the same command again: every run finished, none trained
sum() { cat "$x"/runs/*/model.safetensors | cksum; }
before=$(sum)
out=$(run --quick --out "$x" --test "$tmp/held_out.txt" 2>&1) && ok || bad "second run: $out"
[ "$(echo "$out" | grep -c 'finished, skipped')" = 4 ] && ok || bad "second run did not skip 4 runs: $out"
[ "$(sum)" = "$before" ] && ok || bad "second run changed the weights"
# a run without its result (stopped during evaluation) is resumed, the others skipped
rm "$x/results/mta-seed2.json"
out=$(run --quick --out "$x" --test "$tmp/held_out.txt" 2>&1) && ok || bad "resumed run: $out"
echo "$out" | grep -q "resuming .*mta-seed2" && [ "$(echo "$out" | grep -c 'finished, skipped')" = 3 ] && ok \
    || bad "no resume of mta-seed2: $out"
[ -f "$x/results/mta-seed2.json" ] && out=$(finite "$x/results.json" 2>&1) && ok || bad "after resuming: $out"

# other options over the same directory, bad flags
expect 2 "other options: --steps 5 (was 4)" -- run --quick --out "$x" --test "$tmp/held_out.txt" --steps 5
# an evaluation added later: the finished runs are evaluated on it, none trained
out=$(run --quick --out "$x" --test "$tmp/held_out.txt" --needle 160 --needle-examples 1 2>&1) && ok || bad "--needle added: $out"
[ "$(echo "$out" | grep -c 'finished, evaluating what it lacks')" = 4 ] && [ "$(sum)" = "$before" ] && ok \
    || bad "--needle added: not 4 runs evaluated without training: $out"
grep -q '^| arm | seed | val loss | test loss | needle |' "$x/results.md" && ok || bad "--needle added: no needle column"
expect 2 "unknown option '--bogus'" -- run --quick --out "$tmp/y" --bogus
expect 2 "--seeds must be" -- run --quick --out "$tmp/y" --seeds 1,x
expect 2 "unknown arm 'mta-nope'" -- run --quick --out "$tmp/y" --arms baseline,mta-nope
expect 2 "must start with baseline" -- run --quick --out "$tmp/y" --arms mta
expect 2 "needs a value" -- run --quick --out
expect 2 "--out DIR is required" -- run --quick
expect 0 "usage: scripts/lm_compare.sh" -- run --help
[ ! -e "$tmp/y" ] && ok || bad "a refused command made its --out"

# one seed: the SDs are n/a (null), not 0
out=$(run --quick --out "$tmp/one" --seeds 3 2>&1) && ok || bad "one seed: $out"
grep -q '| baseline | 1 | [0-9.]* | n/a |' "$tmp/one/results.md" && ok || bad "one seed: no n/a SD"
python3 -c 'import json, sys; r = json.load(open(sys.argv[1])); assert r["arms"]["mta"]["val_loss"]["sd"] is None' \
    "$tmp/one/results.json" && ok || bad "one seed: sd is not null"

# --from: continued training of a (here tiny) pretrained run, with the run itself before training
# and the needle accuracy in the table
head -c 50000 "$(dirname "$0")/data/corpus.txt" > "$tmp/pre.txt"
OMP_NUM_THREADS=1 "$MTAC" data --out "$tmp/pre-data" --val-every 3 "$tmp/pre.txt" > /dev/null
OMP_NUM_THREADS=1 "$MTAC" train --preset lm1m-baseline --steps 2 --warmup 0 --batch_size 2 --seq_len 32 \
    --data "$tmp/pre-data" --out "$tmp/pre" > /dev/null 2>&1 && ok || bad "could not train the pretrained run"
f=$tmp/from
out=$(run --quick --from "$tmp/pre" --out "$f" --seeds 1 --needle 160 --needle-examples 1 --needles 2 2>&1) && ok || bad "--from: $out"
python3 -c 'import json, sys; assert json.load(open(sys.argv[1]))["needles"] == 2' "$f/results/pretrained.needle.json" && ok \
    || bad "--from: --needles 2 did not reach mtac eval needle"
[ "$(rows "$f/results.md" 'Before training')" = 1 ] && ok || bad "--from: no row before training"
[ "$(rows "$f/results.md" Runs)" = 3 ] && ok || bad "--from: $(rows "$f/results.md" Runs) runs, wanted baseline, mta, mta-only"
grep -q '| mta-only | SD | n/a | n/a |' "$f/results.md" && ok || bad "--from: no val loss and needle columns"
python3 -c 'import json, sys
r = json.load(open(sys.argv[1]))
assert set(r["before"]) == {"val_loss", "needle"} and len(r["runs"]) == 3, r
assert all(0 <= x["needle"] <= 1 for x in r["runs"] + [r["before"]])' "$f/results.json" && ok || bad "--from: results.json"
python3 -c 'import json, sys; assert json.load(open(sys.argv[1]))["train"] == "mta"' \
    "$f/runs/mta-only-seed1/config.json" && ok || bad "--from: mta-only did not train the MTA kernels only"
expect 2 "--preset and --from exclude" -- run --quick --from "$tmp/pre" --out "$tmp/y" --preset lm1m
expect 2 "--lr and --mta-lr go with --from" -- run --quick --out "$tmp/y" --lr 1e-3
expect 2 "unknown arm 'mta-all' (baseline, mta, mta-only with --from)" -- run --quick --from "$tmp/pre" --out "$tmp/y" --arms baseline,mta-all
expect 2 "--from: no run in" -- run --quick --from "$tmp/nothing" --out "$tmp/y"
expect 2 "--needle takes comma-separated" -- run --quick --out "$tmp/y" --needle 1k
[ ! -e "$tmp/y" ] && ok || bad "a refused command made its --out"

# --launch: the runs under mpirun (2 ranks) end with the weights of one process's runs
if [ "$HAVE_MPI" = 1 ] && command -v mpirun > /dev/null; then
    export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_btl_vader_single_copy_mechanism=none
    out=$(run --quick --out "$tmp/one-rank" --seeds 1 --arms baseline,mta --grad-accum 2 2>&1) && ok || bad "1 rank: $out"
    out=$(run --quick --out "$tmp/two-ranks" --seeds 1 --arms baseline,mta --grad-accum 2 \
          --launch "mpirun --oversubscribe -np 2 -x OMP_NUM_THREADS=1" 2>&1) && ok || bad "--launch mpirun: $out"
    for r in baseline-seed1 mta-seed1; do
        cmp -s "$tmp/one-rank/runs/$r/model.safetensors" "$tmp/two-ranks/runs/$r/model.safetensors" && ok \
            || bad "--launch mpirun: $r's weights differ from one process's"
    done
else
    echo "skipped the --launch check: no MPI build or no mpirun"
fi

finish test_lm_compare
