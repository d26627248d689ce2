#!/usr/bin/env bash
# test_retrofit.sh MTAC: MTA onto a model like an imported one (docs/models.md): a run of an
# untied, grouped-query model with llama3 RoPE scaling and a vocabulary past 65536 (uint32 shards)
# and tokenizer files; mtac convert --add-mta --layers keeps its loss and copies the tokenizer;
# mtac train --init RUN continues it (--train mta moves only the MTA tensors, --train all every
# one), and a resumed run ends with exactly the weights of an uninterrupted one.
set -u
MTAC=$1
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
. "$(dirname "$0")/expect.sh"
V=70000

# uint32 shards of random ids over the whole vocabulary (docs/shards.md's format)
python3 - "$tmp/data" $V <<'PY' || { echo "FAIL: making shards"; exit 1; }
import os, random, struct, sys
out, V = sys.argv[1], int(sys.argv[2])
os.makedirs(out)
rng = random.Random(5)
for name, count in (('train.bin', 4000), ('val.bin', 600)):
    ids = [rng.randrange(V) for _ in range(count)]
    body = struct.pack('<%dI' % count, *ids)
    h = 0xcbf29ce484222325
    for b in body:
        h = ((h ^ b) * 0x100000001B3) & 0xFFFFFFFFFFFFFFFF
    with open(os.path.join(out, name), 'wb') as f:
        f.write(b'MTACTOK1' + struct.pack('<IIQQ', 1, 2, count, h) + bytes(32) + body)
PY
# compare.py A B: the names of the tensors that differ between two safetensors files, bit for bit
cat > "$tmp/differ.py" <<'PY'
import json, struct, sys
def tensors(p):
    raw = open(p, 'rb').read()
    (n,) = struct.unpack('<Q', raw[:8])
    h = json.loads(raw[8:8 + n]); h.pop('__metadata__', None)
    return {k: raw[8 + n + v['data_offsets'][0]:8 + n + v['data_offsets'][1]] for k, v in h.items()}
a, b = tensors(sys.argv[1]), tensors(sys.argv[2])
assert a.keys() == b.keys(), (sorted(a), sorted(b))
print(' '.join(sorted(k for k in a if a[k] != b[k])))
PY
differ() { python3 "$tmp/differ.py" "$1" "$2"; }

cat > "$tmp/base.json" <<JSON
{"steps": 2, "batch_size": 2, "seq_len": 16, "lr": 0.003, "warmup": 1, "schedule": "constant", "seed": 3,
 "eval_every": 0, "eval_batches": 1, "log_every": 1000,
 "model": {"dim": 32, "n_layers": 2, "n_heads": 4, "n_kv_heads": 2, "vocab_size": $V, "hidden_dim": 48,
           "tie_embeddings": false,
           "rope_scaling": {"rope_type": "llama3", "factor": 8, "low_freq_factor": 1, "high_freq_factor": 4,
                            "original_max_position_embeddings": 256}}}
JSON
# the settings of base.json, for the runs that take only the model from --init
train() {
    OMP_NUM_THREADS=1 "$MTAC" train --data "$tmp/data" --batch_size 2 --seq_len 16 --lr 0.003 --warmup 1 --schedule constant \
        --seed 3 --eval_every 0 --eval_batches 1 --log_every 1000 "$@" > /dev/null
}
train --config "$tmp/base.json" --out "$tmp/base" || bad "training the base run"
printf '{"model": {"type": "BPE"}}\n' > "$tmp/base/tokenizer.json"
printf '{"add_bos_token": false}\n' > "$tmp/base/tokenizer_config.json"

# convert: the convolutions in layer 0 only; the same loss; the tokenizer files copied
out=$("$MTAC" convert --add-mta --run "$tmp/base" --out "$tmp/conv" --layers 0 2>&1) && ok || bad "convert: $out"
python3 -c 'import json,sys; m=json.load(open(sys.argv[1]))["model"]; assert m["mta"]["qk_layers"] == [0] and m["tie_embeddings"] is False and m["rope_scaling"]["factor"] == 8 and m["n_kv_heads"] == 2' \
    "$tmp/conv/config.json" && ok || bad "converted config: $(cat "$tmp/conv/config.json")"
cmp -s "$tmp/base/tokenizer.json" "$tmp/conv/tokenizer.json" && cmp -s "$tmp/base/tokenizer_config.json" "$tmp/conv/tokenizer_config.json" \
    && [ ! -e "$tmp/conv/generation_config.json" ] && ok || bad "tokenizer files not copied"
l1=$("$MTAC" eval --run "$tmp/base" --batches 2 2>&1) l2=$("$MTAC" eval --run "$tmp/conv" --batches 2 2>&1)
[ -n "$l1" ] && [ "$l1" = "$l2" ] && ok || bad "converted loss differs: '$l1' vs '$l2'"
out=$("$MTAC" convert --add-mta --run "$tmp/base" --out "$tmp/conv2" --layers 2 2>&1); rc=$?
[ $rc -eq 2 ] && echo "$out" | grep -q "layer 2 is past" && [ ! -e "$tmp/conv2" ] && ok || bad "--layers 2 of 2 layers: rc $rc, $out"

# --train mta from the converted run: only the MTA tensors move; the run has the model's tokenizer
train --init "$tmp/conv" --train mta --steps 4 --out "$tmp/mta" || bad "train --init --train mta"
moved=$(differ "$tmp/conv/model.safetensors" "$tmp/mta/model.safetensors")
echo "$moved" | tr ' ' '\n' | grep -qv '\.attention\.mta\.' && bad "--train mta moved non-MTA tensors: $moved" || ok
echo "$moved" | grep -q 'layers.0.attention.mta.w_pre' && echo "$moved" | grep -q 'layers.1.attention.mta.w_pre_head' && ok \
    || bad "--train mta left MTA tensors unmoved: $moved"
cmp -s "$tmp/base/tokenizer.json" "$tmp/mta/tokenizer.json" && ok || bad "train --init RUN did not copy the tokenizer"
grep -q '"init":.*conv' "$tmp/mta/config.json" && grep -q '"train":.*"mta"' "$tmp/mta/config.json" && ok || bad "config.json of the mta run"
# --train all moves every tensor; --init FILE (a weights file) still works
train --init "$tmp/conv" --steps 2 --out "$tmp/all" || bad "train --init --train all"
[ "$(differ "$tmp/conv/model.safetensors" "$tmp/all/model.safetensors" | wc -w)" -eq 27 ] && ok || bad "--train all: $(differ "$tmp/conv/model.safetensors" "$tmp/all/model.safetensors")"
train --config "$tmp/conv/config.json" --steps 2 --out "$tmp/file" || bad "train --init FILE (mtac convert's config)"
cmp -s "$tmp/all/model.safetensors" "$tmp/file/model.safetensors" && ok || bad "--init RUN and --init FILE differ"

# resume: 2 steps, then 2 more, equals 4 at once, bit for bit (both kinds of training)
for kind in mta all; do
    train --init "$tmp/conv" --train $kind --steps 4 --out "$tmp/u_$kind" || bad "uninterrupted $kind"
    train --init "$tmp/conv" --train $kind --steps 2 --out "$tmp/r_$kind" || bad "first half $kind"
    train --resume "$tmp/r_$kind" --steps 4 || bad "resume $kind"
    cmp -s "$tmp/u_$kind/model.safetensors" "$tmp/r_$kind/model.safetensors" && ok || bad "--train $kind: resumed weights differ"
    cmp -s <(cut -d, -f1-2 "$tmp/u_$kind/metrics.jsonl") <(cut -d, -f1-2 "$tmp/r_$kind/metrics.jsonl") && ok || bad "--train $kind: resumed losses differ"
done

out=$(train --init "$tmp/base" --train mta --out "$tmp/nomta" 2>&1 >/dev/null); rc=$?
[ $rc -eq 2 ] && echo "$out" | grep -q "no MTA parameters" && [ ! -e "$tmp/nomta" ] && ok || bad "--train mta of a model without MTA: rc $rc, $out"
out=$(train --init "$tmp/conv" --train some --out "$tmp/some" 2>&1 >/dev/null); rc=$?
[ $rc -eq 2 ] && echo "$out" | grep -q "train 'some'" && ok || bad "--train some: rc $rc, $out"

finish test_retrofit
