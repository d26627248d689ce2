#!/usr/bin/env bash
# test_tokcli.sh MTAC: the commands on a run with a pretrained tokenizer (a small byte-level BPE,
# tests/fixtures/tiny_bpe, made by tests/ref/gen_tiny_bpe.py) and a random model: tokenize and
# --decode, sample (EOS, --json, --chat, --bos), eval --text against the shard evaluation, data
# --tokenizer, eval needle and babi in the run's tokens (the JSON's shape, every cell, errors).
# Needs python3 (standard library) for the JSON and file checks; exit 77 without.
set -u
MTAC=$1
here=$(cd "$(dirname "$0")" && pwd)
PY=${PYTHON:-python3}
command -v "$PY" >/dev/null || { echo "SKIP: no $PY"; exit 77; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
. "$here/expect.sh"

tok="$here/fixtures/tiny_bpe"
corpus="$here/data/corpus.txt"
head -c 6000 "$corpus" > "$tmp/text.txt"

# A run: shards in the tokenizer's ids, one training step of a small MTA model, its tokenizer files.
"$MTAC" data --tokenizer "$tok" --out "$tmp/data" --val-every 2 "$corpus" > /dev/null || { echo "FAIL: data --tokenizer"; exit 1; }
cat > "$tmp/cfg.json" <<'JSON'
{"steps": 1, "warmup": 0, "batch_size": 2, "seq_len": 64, "eval_batches": 1,
 "model": {"dim": 32, "n_layers": 2, "n_heads": 2, "vocab_size": 400, "hidden_dim": 64,
           "mta": {"qk_layers": [1], "pre_cq": 2, "pre_ck": 3, "post_cq": 2, "post_ck": 3,
                   "pre_head_mix": true, "post_ch": 2, "group_norm": true, "depth_scale": false, "gate": true}}}
JSON
run="$tmp/run"
OMP_NUM_THREADS=1 "$MTAC" train --config "$tmp/cfg.json" --data "$tmp/data" --out "$run" > /dev/null 2>&1 || { echo "FAIL: train"; exit 1; }
cp "$tok"/tokenizer.json "$tok"/tokenizer_config.json "$run/"

# tokenize: the ids the tokenizer gives (tests/fixtures/tiny_bpe, `tokenizers`), and back
ok_if '[ "$("$MTAC" tokenize --run "$run" --text "And God said 123")" = "35 262 396 333 223 19 20 21" ]' "tokenize ids"
ok_if '[ "$("$MTAC" tokenize --run "$run" --text "And God" --bos yes)" = "1 35 262 396" ]' "tokenize --bos yes"
ok_if '[ "$(printf "And God" | "$MTAC" tokenize --run "$run")" = "35 262 396" ]' "tokenize from standard input"
"$MTAC" tokenize --run "$run" < "$tmp/text.txt" > "$tmp/ids.txt"
"$MTAC" tokenize --run "$run" --decode < "$tmp/ids.txt" > "$tmp/back.txt"
ok_if 'cmp -s "$tmp/text.txt" "$tmp/back.txt"' "tokenize | tokenize --decode: not the text"
ok_if '[ "$("$MTAC" tokenize --run "$run" --decode --text "1 35 262 2")" = "<|im_start|>And<|im_end|>" ]' "--decode special tokens"
expect 1 "id 3 ('4x') is not a non-negative integer" -- "$MTAC" tokenize --run "$run" --decode --text "1 2 4x 5"
expect 1 "id 2 ('400') is outside the vocabulary" -- "$MTAC" tokenize --run "$run" --decode --text "7
400"
expect 1 "ids 0 to 399" -- "$MTAC" tokenize --run "$run" --decode --text "400"
expect 1 "id 1 ('-1') is not" -- "$MTAC" tokenize --run "$run" --decode --text "-1"
expect 2 "--bos is for encoding" -- "$MTAC" tokenize --run "$run" --decode --bos no --text 1
expect 2 "--bos expects one of no, yes" -- "$MTAC" tokenize --run "$run" --bos 1 --text 1
expect 0 "usage: mtac tokenize" -- "$MTAC" tokenize --help
expect 1 "--decode: the input holds a NUL byte" -- bash -c 'printf "1 \\0 2" | "$1" tokenize --run "$2" --decode' _ "$MTAC" "$run"
expect 1 "$tmp/none is not a run directory" -- "$MTAC" tokenize --run "$tmp/none" --text x
expect 1 "is not a run directory (not a directory)" -- "$MTAC" data --tokenizer "$tmp/text.txt" --out "$tmp/d9" "$tmp/text.txt"

# data --tokenizer: the shards hold the ids tokenize prints, then the EOS id (<|im_end|> = 2)
"$MTAC" data --tokenizer "$run" --out "$tmp/d2" --val-every 2 "$tmp/text.txt" > /dev/null 2>&1
ok_if '"$PY" - "$tmp/d2/train.bin" "$tmp/ids.txt" <<"PY"
import struct, sys
b = open(sys.argv[1], "rb").read()
assert b[:8] == b"MTACTOK1" and struct.unpack("<I", b[12:16])[0] == 1, "a uint16 shard"
n = struct.unpack("<Q", b[16:24])[0]
ids = list(struct.unpack("<%dH" % n, b[64:64 + 2 * n]))
assert ids == [int(x) for x in open(sys.argv[2]).read().split()] + [2], ids[:10]
PY' "data --tokenizer: train.bin is not tokenize's ids + EOS"

# A vocabulary above 65536 ids: uint32 shards, unless --dtype uint16 (whose ids must then fit)
mkdir -p "$tmp/big" && cp "$tok/tokenizer_config.json" "$tmp/big/"
"$PY" - "$tok/tokenizer.json" "$tmp/big/tokenizer.json" <<"PY"
import json, sys
t = json.load(open(sys.argv[1]))
v = t["model"]["vocab"]
for i in range(len(v), 65537):
    v["x%05d" % i] = i  # ids no merge makes: only their number matters here
json.dump(t, open(sys.argv[2], "w"))
PY
"$MTAC" data --tokenizer "$tmp/big" --out "$tmp/d32" --val-every 2 "$tmp/text.txt" > /dev/null 2>&1
"$MTAC" data --tokenizer "$tmp/big" --out "$tmp/d16" --val-every 2 --dtype uint16 "$tmp/text.txt" > /dev/null 2>&1
ok_if '"$PY" - "$tmp/d32/train.bin" "$tmp/d16/train.bin" "$tmp/ids.txt" <<"PY"
import struct, sys
want = [int(x) for x in open(sys.argv[3]).read().split()] + [2]
for path, dtype, fmt in ((sys.argv[1], 2, "I"), (sys.argv[2], 1, "H")):
    b = open(path, "rb").read()
    n = struct.unpack("<Q", b[16:24])[0]
    assert struct.unpack("<I", b[12:16])[0] == dtype, path
    assert list(struct.unpack("<%d%s" % (n, fmt), b[64:])) == want, path
PY' "data --tokenizer with 65537 ids: not uint32 (or --dtype uint16 not honoured)"

# sample --json: the ids of the streamed text, the prompt's ids as tokenize gives them
"$MTAC" sample --run "$run" --prompt "And God said" --tokens 150 --temperature 1 --seed 5 --json > "$tmp/s.out" 2> "$tmp/s.err"
ok_if '"$PY" - "$tmp/s.out" "$MTAC" "$run" <<"PY"
import json, subprocess, sys
out = open(sys.argv[1], "rb").read()
body, last = out.rstrip(b"\n").rsplit(b"\n", 1)
j = json.loads(last)
assert j["prompt_ids"] == [35, 262, 396, 333], j["prompt_ids"]
# 150 tokens, or fewer ending with the EOS (<|im_end|>, 2); past 64 the stream window restarts
assert len(j["ids"]) == 150 or (len(j["ids"]) > 64 and j["ids"][-1] == 2), j["ids"]
assert 2 not in j["ids"][:-1] and j["tokens_per_s"] > 0
assert body.startswith(b"And God said")
streamed = body[len(b"And God said"):]
assert streamed.decode("utf-8", "replace") == j["text"], (streamed, j["text"])
plain = [i for i in j["ids"] if i > 2]  # the special tokens are not written
dec = subprocess.run([sys.argv[2], "tokenize", "--run", sys.argv[3], "--decode"], input=" ".join(map(str, plain)).encode(),
                     capture_output=True, check=True).stdout
assert dec == streamed, (dec, streamed)
PY' "sample --json: ids, text and stream disagree"
# --tokens counts tokens; byte-level runs and --no-cache agree on the same draws
"$MTAC" sample --run "$run" --prompt "And God said" --tokens 150 --temperature 1 --seed 5 --json --no-cache > "$tmp/s2.out" 2>/dev/null
ok_if '[ "$(tail -1 "$tmp/s.out" | sed "s/,\"tokens_per_s.*//")" = "$(tail -1 "$tmp/s2.out" | sed "s/,\"tokens_per_s.*//")" ]' "sample: cache and --no-cache differ"
ok_if '"$MTAC" sample --run "$run" --prompt "And" --bos yes --tokens 1 --json 2>/dev/null | tail -1 | grep -q "\"prompt_ids\":\[1,35,262\]"' "sample --bos yes"
# --chat: the prompt in the template (the system message the template writes), no BOS added
ok_if '"$MTAC" sample --run "$run" --chat --prompt "hi" --tokens 1 --json 2>/dev/null | tail -1 | grep -q "\"prompt_ids\":\[$("$MTAC" tokenize --run "$run" --text "<|im_start|>system
You are a tiny test model<|im_end|>
<|im_start|>user
hi<|im_end|>
<|im_start|>assistant
" | tr " " ",")\]"' "sample --chat: not the template's ids"
"$PY" - "$tok/tokenizer_config.json" "$run/tokenizer_config.json" <<"PY"
import json, sys
c = json.load(open(sys.argv[1]))
c["chat_template"] = "{% for m in messages %}{{ '<|user|>\\n' + m['content'] + eos_token }}{% endfor %}"
json.dump(c, open(sys.argv[2], "w"))
PY
expect 1 "none of the families mtac renders" -- "$MTAC" sample --run "$run" --chat --prompt hi --tokens 1
cp "$tok/tokenizer_config.json" "$run/"

# Generation stops at an end-of-sequence id, which ends the ids: a model whose final norm is 0
# gives equal logits, so greedy decoding picks id 0 (<|endoftext|>), an EOS by generation_config.
"$PY" - "$run/model.safetensors" "$tmp/zero.safetensors" <<"PY"
import json, struct, sys
b = open(sys.argv[1], "rb").read()
n = struct.unpack("<Q", b[:8])[0]
h = json.loads(b[8:8 + n])
h.pop("__metadata__", None)  # its checksum no longer holds; a file without one loads unchecked
lo, hi = h["norm.weight"]["data_offsets"]
data = bytearray(b[8 + n:])
data[lo:hi] = bytes(hi - lo)
hj = json.dumps(h).encode()
hj += b" " * ((8 - len(hj) % 8) % 8)
open(sys.argv[2], "wb").write(struct.pack("<Q", len(hj)) + hj + bytes(data))
PY
mkdir -p "$tmp/eos" && cp "$run"/config.json "$run"/tokenizer*.json "$tmp/eos/" && cp "$tmp/zero.safetensors" "$tmp/eos/model.safetensors"
ok_if '[ "$("$MTAC" sample --run "$tmp/eos" --prompt x --tokens 5 --temperature 0 --json 2>/dev/null | tail -1 | grep -o "\"ids\":\[[0-9,]*\]")" = "\"ids\":[0,0,0,0,0]" ]' "sample without that EOS: 5 tokens"
echo '{"eos_token_id": [2, 0]}' > "$tmp/eos/generation_config.json"
ok_if '[ "$("$MTAC" sample --run "$tmp/eos" --prompt x --tokens 5 --temperature 0 --json 2>/dev/null | tail -1 | grep -o "\"ids\":\[[0-9,]*\]")" = "\"ids\":[0]" ]' "sample: did not stop at the EOS id"

# eval --text: the same number as the shard evaluation of the same ids in the same windows (B = 1)
"$PY" - "$tmp/ids.txt" "$tmp/val/val.bin" <<"PY"
import os, struct, sys
ids = [int(x) for x in open(sys.argv[1]).read().split()]
raw = struct.pack("<%dH" % len(ids), *ids)
h = 0xcbf29ce484222325
for c in raw:
    h = ((h ^ c) * 0x100000001b3) & 0xFFFFFFFFFFFFFFFF
os.makedirs(os.path.dirname(sys.argv[2]), exist_ok=True)
open(sys.argv[2], "wb").write(b"MTACTOK1" + struct.pack("<IIQQ", 1, 1, len(ids), h) + bytes(32) + raw)
PY
for ctx in 32 7; do
    a=$("$MTAC" eval --run "$run" --text "$tmp/text.txt" --ctx $ctx --json 2>/dev/null)
    b=$("$MTAC" eval --run "$run" --data "$tmp/val" --batch-size 1 --seq-len $ctx --batches all 2>/dev/null)
    # the shard line prints the loss to 4 decimals (5e-5); the two paths differ otherwise by float32
    # rounding of a log-softmax over 400 logits, about 400 u = 2.4e-5 relative at worst
    ok_if '"$PY" -c "
import json, math, sys
j = json.loads(sys.argv[1]); ref = float(sys.argv[2].split()[2])
assert j[\"tokens\"] == $(wc -w < "$tmp/ids.txt") - 1, j
assert abs(j[\"loss\"] - ref) <= 5e-5 + 2.4e-5 * ref, (j, ref)
assert abs(j[\"perplexity\"] - math.exp(j[\"loss\"])) <= 1e-12 * j[\"perplexity\"]
" "$a" "$b"' "eval --text --ctx $ctx: $a vs $b"
done
expect 2 "--text evaluates a text file" -- "$MTAC" eval --run "$run" --text "$tmp/text.txt" --seq-len 8
expect 2 "go with --text FILE" -- "$MTAC" eval --run "$run" --json
: > "$tmp/empty.txt"
expect 1 "nothing to predict" -- "$MTAC" eval --run "$run" --text "$tmp/empty.txt"
expect 1 "no-such" -- "$MTAC" eval --run "$run" --text "$tmp/no-such"

# eval needle (docs/longctx.md): every context x depth cell, each with its examples; the same JSON again (deterministic)
OMP_NUM_THREADS=1 "$MTAC" eval needle --run "$run" --contexts 128,300 --depths 0,0.5,1 --examples 3 --batch 2 --show 1 \
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
OMP_NUM_THREADS=1 "$MTAC" eval needle --run "$run" --contexts 128,300 --depths 0,0.5,1 --examples 3 --batch 3 --json "$tmp/again.json" 2> /dev/null > /dev/null
ok_if 'cmp -s "$tmp/needle.json" "$tmp/again.json"' "eval needle: another batch size, other results"

# eval babi: qa1 and qa2 at one context
OMP_NUM_THREADS=1 "$MTAC" eval babi --run "$run" --contexts 200 --tasks qa1,qa2 --facts 4 --examples 2 --json "$tmp/babi.json" > /dev/null 2> "$tmp/babi.err" \
    && ok || bad "eval babi: $(tail -3 "$tmp/babi.err")"
"$PY" -c 'import json,sys; j=json.load(open(sys.argv[1])); assert [(r["context"], r["qa"], r["total"]) for r in j["results"]] == [(200, "qa1", 2), (200, "qa2", 2)], j' \
    "$tmp/babi.json" && ok || bad "babi JSON: $(cat "$tmp/babi.json")"

# eval needle and babi: a context too short for 4 needles in these tokens; copy; shards of another tokenizer
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

finish test_tokcli
