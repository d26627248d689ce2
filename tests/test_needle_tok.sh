#!/usr/bin/env bash
# test_needle_tok.sh MTAC: mtac eval needle and eval babi on a run with its own tokenizer (a small
# byte-level BPE, tests/fixtures/tiny_bpe) and a random model (docs/longctx.md): shards made with
# mtac data --tokenizer, every cell of the grid evaluated, the JSON's shape; clear errors for
# shards of another tokenizer, a haystack too short, a context too short for the needles, copy.
# Needs python3 (standard library) for the JSON checks and the shards; exit 77 without.
set -u
MTAC=$1
here=$(cd "$(dirname "$0")" && pwd)
PY=${PYTHON:-python3}
command -v "$PY" >/dev/null || { echo "SKIP: no $PY"; exit 77; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
. "$here/expect.sh"
export OMP_NUM_THREADS=1

# A run: shards in the tokenizer's ids, one training step of a small MTA model, its tokenizer files.
tok="$here/fixtures/tiny_bpe"
"$MTAC" data --tokenizer "$tok" --out "$tmp/data" --val-every 4 "$here/data/corpus.txt" > /dev/null || { echo "FAIL: data --tokenizer"; exit 1; }
cat > "$tmp/cfg.json" <<'JSON'
{"steps": 1, "warmup": 0, "batch_size": 2, "seq_len": 64, "eval_batches": 1,
 "model": {"dim": 32, "n_layers": 2, "n_heads": 2, "vocab_size": 400, "hidden_dim": 64,
           "mta": {"qk_layers": [1], "pre_cq": 2, "pre_ck": 3, "post_cq": 2, "post_ck": 3,
                   "pre_head_mix": true, "post_ch": 2, "group_norm": true, "depth_scale": false, "gate": true}}}
JSON
run="$tmp/run"
"$MTAC" train --config "$tmp/cfg.json" --data "$tmp/data" --out "$run" > /dev/null 2>&1 || { echo "FAIL: train"; exit 1; }
cp "$tok"/tokenizer.json "$tok"/tokenizer_config.json "$run/"

# needle: every context x depth cell, each with its examples; the same JSON again (deterministic)
"$MTAC" eval needle --run "$run" --contexts 128,300 --depths 0,0.5,1 --examples 3 --batch 2 --show 1 \
    --json "$tmp/needle.json" > "$tmp/needle.out" 2> "$tmp/needle.err" && ok || bad "eval needle: $(tail -3 "$tmp/needle.err")"
"$PY" - "$tmp/needle.json" <<'PY' && ok || bad "needle JSON: $(cat "$tmp/needle.json")"
import json, sys
j = json.load(open(sys.argv[1]))
cells = [(r["context"], r["depth"]) for r in j["results"]]
assert cells == [(c, d) for c in (128, 300) for d in (0, 0.5, 1)], cells
for r in j["results"]:
    assert r["total"] == 3 and 0 <= r["correct"] <= r["retrieved"] <= 3 and r["accuracy"] == r["correct"] / 3, r
assert j["task"] == "needle" and j["needles"] == 4 and j["haystack"].endswith("val.bin"), j
assert j["haystack_bytes_per_token"] > 1, j
PY
ok_if 'grep -q "answers scored on their text" "$tmp/needle.out" && [ $(grep -c "^ *\(128\|300\) " "$tmp/needle.out") = 2 ]' \
    "needle table: $(cat "$tmp/needle.out")"
# --show: the expected answer with its space, as the tokenizer writes it, and its EOS
ok_if 'grep -q "expected \" [a-z]\{5\}\.<|im_end|>\"" "$tmp/needle.err"' "--show: $(head -4 "$tmp/needle.err")"
"$MTAC" eval needle --run "$run" --contexts 128,300 --depths 0,0.5,1 --examples 3 --batch 3 --json "$tmp/again.json" 2> /dev/null > /dev/null
ok_if 'cmp -s "$tmp/needle.json" "$tmp/again.json"' "eval needle: another batch size, other results"

# babi: qa1 and qa2 at one context
"$MTAC" eval babi --run "$run" --contexts 200 --tasks qa1,qa2 --facts 4 --examples 2 --json "$tmp/babi.json" > /dev/null 2> "$tmp/babi.err" \
    && ok || bad "eval babi: $(tail -3 "$tmp/babi.err")"
"$PY" -c 'import json,sys; j=json.load(open(sys.argv[1])); assert [(r["context"], r["qa"], r["total"]) for r in j["results"]] == [(200, "qa1", 2), (200, "qa2", 2)], j' \
    "$tmp/babi.json" && ok || bad "babi JSON: $(cat "$tmp/babi.json")"

# errors: a context too short for 4 needles in these tokens; copy; shards of another tokenizer
# (ids past the vocabulary of 400); a haystack shorter than a context
expect 1 "context 40 tokens: too short for the question and its 4 needles" -- "$MTAC" eval needle --run "$run" --contexts 40 --examples 1
expect 1 "copy: for byte-level runs only" -- "$MTAC" eval babi --run "$run" --tasks copy --contexts 300 --examples 1
# shard DIR COUNT MOD: DIR/val.bin of COUNT uint32 ids i * 7 % MOD (docs/shards.md's format)
shard() {
    "$PY" - "$@" <<'PY'
import os, struct, sys
out, count, mod = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
os.makedirs(out)
body = struct.pack('<%dI' % count, *[i * 7 % mod for i in range(count)])
h = 0xcbf29ce484222325
for b in body:
    h = ((h ^ b) * 0x100000001B3) & 0xFFFFFFFFFFFFFFFF
with open(os.path.join(out, 'val.bin'), 'wb') as f:
    f.write(b'MTACTOK1' + struct.pack('<IIQQ', 1, 2, count, h) + bytes(32) + body)
PY
}
shard "$tmp/other" 5000 1000 && shard "$tmp/short" 100 300 || { echo "FAIL: making shards"; exit 1; }
expect 1 "outside the run's tokenizer's vocabulary (400)" -- "$MTAC" eval needle --run "$run" --data "$tmp/other" --contexts 128 --examples 1
expect 1 "shorter than the about" -- "$MTAC" eval needle --run "$run" --data "$tmp/short" --contexts 300 --examples 1

finish test_needle_tok
