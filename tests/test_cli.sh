#!/usr/bin/env bash
# test_cli.sh MTAC: the command-line tool's handling of good and bad input.
# Every bad input must give a non-zero exit and a message on stderr, never a crash.
set -u
MTAC=$1
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
. "$(dirname "$0")/expect.sh"

expect 0 "usage: mtac" -- "$MTAC" --help
expect 2 "usage: mtac" -- "$MTAC"
expect 2 "unknown command" -- "$MTAC" frobnicate
expect 0 "usage: mtac attn" -- "$MTAC" attn --help
expect 0 "usage: mtac bench attn" -- "$MTAC" bench attn --help
expect 0 "usage: mtac demo" -- "$MTAC" demo --help
expect 2 "required" -- "$MTAC" attn --in x
expect 2 "needs a value" -- "$MTAC" attn --in
expect 2 "unknown option" -- "$MTAC" attn --bogus 1
expect 2 "positive integer" -- "$MTAC" attn --in a --out b --threads zero
# The backends as the program lists them (its option table: mta_backend_name over the backend ids).
backends=$("$MTAC" attn --help | sed -n 's/^  --backend NAME .*(\(.*\))$/\1/p')
case $backends in *fused*) ;; *) echo "FAIL: mtac attn --help lists no backends ('$backends')"; exit 1 ;; esac
expect 2 "expects one of $backends" -- "$MTAC" attn --in a --out b --backend gpu
# The CUDA backend needs a GPU (or a build with it): a message saying which, not a crash.
expect 2 "cuda backend" -- "$MTAC" attn --in a --out b --backend cuda
expect 2 "cuda backend" -- "$MTAC" bench attn --backend cuda
expect 2 "unknown benchmark" -- "$MTAC" bench nope
expect 2 "comma-separated" -- "$MTAC" bench attn --T 512,,x
expect 1 "No such file" -- "$MTAC" attn --in "$tmp/missing.safetensors" --out "$tmp/o.safetensors"

# A file that is not safetensors at all.
printf 'hello' > "$tmp/short.safetensors"
expect 1 "short.safetensors" -- "$MTAC" attn --in "$tmp/short.safetensors" --out "$tmp/o.safetensors"
head -c 4096 /dev/urandom > "$tmp/random.safetensors"
expect 1 "random.safetensors" -- "$MTAC" attn --in "$tmp/random.safetensors" --out "$tmp/o.safetensors"

# A 1x1x1x1 problem with the given little-endian float bytes of q and k (v = 1), built by hand.
tiny_problem() {
    local hdr='{"q":{"dtype":"F32","shape":[1,1,1,1],"data_offsets":[0,4]},"k":{"dtype":"F32","shape":[1,1,1,1],"data_offsets":[4,8]},"v":{"dtype":"F32","shape":[1,1,1,1],"data_offsets":[8,12]}}'
    { printf "\\x$(printf %02x ${#hdr})\\x00\\x00\\x00\\x00\\x00\\x00\\x00"; printf '%s' "$hdr"; printf "$2$3"'\x00\x00\x80\x3f'; } > "$1"
}
tiny_problem "$tmp/ok.safetensors" '\x00\x00\x80\x3f' '\x00\x00\x80\x3f'
expect 0 "wrote 1 tensor" -- "$MTAC" attn --in "$tmp/ok.safetensors" --out "$tmp/o.safetensors"
expect 2 "not a backend of host tensors" -- env MTAC_BACKEND=cuda "$MTAC" attn --in "$tmp/ok.safetensors" --out "$tmp/o2.safetensors"
# An expect.out beside q = k = v = 1 (T = 1: out = v = 1): 1 agrees; an infinite or NaN one never
# passes, whatever --tol
expect_problem() {
    local hdr='{"q":{"dtype":"F32","shape":[1,1,1,1],"data_offsets":[0,4]},"k":{"dtype":"F32","shape":[1,1,1,1],"data_offsets":[4,8]},"v":{"dtype":"F32","shape":[1,1,1,1],"data_offsets":[8,12]},"expect.out":{"dtype":"F32","shape":[1,1,1,1],"data_offsets":[12,16]}}'
    local n=${#hdr}
    { printf "\\x$(printf %02x $((n & 255)))\\x$(printf %02x $((n >> 8)))\\x00\\x00\\x00\\x00\\x00\\x00"; printf '%s' "$hdr"
      printf '\x00\x00\x80\x3f\x00\x00\x80\x3f\x00\x00\x80\x3f'"$2"; } > "$1"
}
expect_problem "$tmp/e1.safetensors" '\x00\x00\x80\x3f'
expect 0 "out                max |diff| 0, scale 1: ok" -- "$MTAC" attn --in "$tmp/e1.safetensors" --out "$tmp/o.safetensors"
expect_problem "$tmp/einf.safetensors" '\x00\x00\x80\x7f'
expect 1 "beyond --tol 1" -- "$MTAC" attn --in "$tmp/einf.safetensors" --out "$tmp/o.safetensors" --tol 1
expect_problem "$tmp/enan.safetensors" '\x00\x00\xc0\x7f'
expect 1 "beyond --tol 1" -- "$MTAC" attn --in "$tmp/enan.safetensors" --out "$tmp/o.safetensors" --tol 1
# NaN input: a clear error, not NaN output (and no undefined behaviour in the softmax's exp)
tiny_problem "$tmp/nan.safetensors" '\x00\x00\xc0\x7f' '\x00\x00\x80\x3f'
expect 1 "tensor q has a non-finite value" -- "$MTAC" attn --in "$tmp/nan.safetensors" --out "$tmp/o.safetensors"
# q = k = 1e30: finite inputs whose score overflows
tiny_problem "$tmp/big.safetensors" '\xca\xf2\x49\x71' '\xca\xf2\x49\x71'
expect 1 "overflow float32" -- "$MTAC" attn --in "$tmp/big.safetensors" --out "$tmp/o2.safetensors"
[ ! -e "$tmp/o2.safetensors" ] || { echo "FAIL: a non-finite result was written"; fail=$((fail + 1)); }

# A real problem from the fixtures works end to end; the output file appears atomically.
# (CTest runs this script in the build directory: the fixtures are found beside the script.)
fx=$(ls "$(dirname "$0")"/fixtures/*.safetensors 2>/dev/null | head -1)
[ -n "$fx" ] || { fail=$((fail + 1)); echo "FAIL: no fixture in $(dirname "$0")/fixtures"; }
if [ -n "$fx" ]; then
    # the fixtures hold expect.* tensors (PyTorch's results in float64): each is compared with
    # the result of its name, and a difference beyond --tol fails the command (mtac attn's default
    # bound; 1e-9 is below float32's own rounding of a result, u/2 = 3e-8 of it, so it must fail)
    expect 0 "grad.q             max |diff|" -- "$MTAC" attn --in "$fx" --out "$tmp/o.safetensors"
    expect 1 "differ from the file's expect.* beyond --tol 1e-09" -- "$MTAC" attn --in "$fx" --out "$tmp/o.safetensors" --tol 1e-9
    expect 2 "--tol expects a number in [0, 1]" -- "$MTAC" attn --in "$fx" --out "$tmp/o.safetensors" --tol 2
fi
expect 0 "identity kernels" -- "$MTAC" demo --T 64
expect 0 '"impl":"mtac_mta"' -- "$MTAC" bench attn --T 64 --H 2 --d 16 --impl plain,mta --json --threads 1
# With the CUDA emulator (-DMTAC_CUDA_EMU=ON): the CUDA source through both commands' upload and
# download (its results against PyTorch's: test_torch_reference_cuda-emu).
if "$MTAC" attn --in "$tmp/ok.safetensors" --out "$tmp/o3.safetensors" --backend cuda-emu 2>&1 | grep -q "no cuda-emu backend"; then
    echo "skip: this build has no cuda-emu backend"
else
    expect 0 "wrote 1 tensor" -- "$MTAC" attn --in "$tmp/ok.safetensors" --out "$tmp/o3.safetensors" --backend cuda-emu
    expect 0 '"backend":"cuda-emu"' -- "$MTAC" bench attn --T 24 --H 2 --d 8 --impl plain,mta --json --threads 1 --backend cuda-emu
fi

# decoding benchmark
expect 0 "usage: mtac bench decode" -- "$MTAC" bench decode --help
expect 2 "comma-separated" -- "$MTAC" bench decode --contexts 5,x
expect 2 "unknown preset" -- "$MTAC" bench decode --presets nope
expect 2 "cache and/or recompute" -- "$MTAC" bench decode --impl fast
expect 0 '"impl":"recompute_mta"' -- "$MTAC" bench decode --presets toy-baseline,toy --contexts 16 --tokens 2 --recompute-tokens 1 --threads 1 --json

# the toy task
expect 0 "usage: mtac toy" -- "$MTAC" toy --help
expect 0 "#" -- "$MTAC" toy gen --n 2 --blocks 8 --alphabet 12
expect 2 "query length" -- "$MTAC" toy gen --query-len 9
expect 2 "distractor" -- "$MTAC" toy gen --blocks 100 --block-len 2 --alphabet 4
expect 2 "unknown subcommand" -- "$MTAC" toy frob
expect 2 "toy-baseline, toy" -- "$MTAC" toy run --models lm1m --steps 1
expect 2 "unknown setting" -- "$MTAC" toy --setting huge
expect 2 "comma-separated" -- "$MTAC" toy --seeds 1,x
expect 2 "positive integer" -- "$MTAC" toy --quick --steps 0
expect 0 "Sequence error rate" -- "$MTAC" toy --quick --blocks 4 --block-len 3 --alphabet 10 --dim 16 --layers 1 --hidden 16 --steps 3 --batch 4 --test 8 --eval-every 3 --seeds 1,2 --out "$tmp/toy"
for f in run.json results.json results.md error_curves.png attention.png toy-seed2.safetensors toy-baseline-seed1.jsonl; do
    [ -s "$tmp/toy/$f" ] && pass=$((pass + 1)) || { fail=$((fail + 1)); echo "FAIL: toy output $f missing"; }
done
expect 0 '"average_error"' -- cat "$tmp/toy/results.json"
expect 0 "usage: mtac attnmap" -- "$MTAC" attnmap --help
expect 0 "wrote" -- "$MTAC" attnmap --run "$tmp/toy" --seed 2 --sample 3 --layers 0 --heads 1 --out "$tmp/toy/a.png"
[ -s "$tmp/toy/a.png" ] && pass=$((pass + 1)) || { fail=$((fail + 1)); echo "FAIL: attnmap picture missing"; }
expect 2 "is required" -- "$MTAC" attnmap --seed 1
expect 1 "cannot open" -- "$MTAC" attnmap --run "$tmp/nowhere"
expect 1 "layer 5" -- "$MTAC" attnmap --run "$tmp/toy" --layers 5
expect 1 "test samples" -- "$MTAC" attnmap --run "$tmp/toy" --sample 8
# a seed the run does not have: its seeds listed, not a file that cannot be opened
expect 1 "has no run of seed 7; its seeds: 1, 2" -- "$MTAC" attnmap --run "$tmp/toy" --seed 7
# the help says the settings' schedule (cosine after warmup), not constant-lr everywhere
expect 0 "warmup then cosine decay in reduced and quick" -- "$MTAC" toy --help
# --quick is a setting: with another --setting, refused (it used to run the paper setting silently)
expect 2 "cannot go with --setting paper" -- timeout 20 "$MTAC" toy --quick --setting paper --steps 1 --out "$tmp/toy-qp"
[ ! -e "$tmp/toy-qp" ] && pass=$((pass + 1)) || { fail=$((fail + 1)); echo "FAIL: toy --quick --setting paper wrote $tmp/toy-qp"; }
# seeds that are no uint64 or that run.json does not keep exactly: refused, never converted
expect 2 "more than 2^52" -- "$MTAC" toy --quick --blocks 4 --block-len 3 --alphabet 10 --dim 16 --layers 1 --hidden 16 --steps 3 --batch 4 --test 8 --eval-every 3 --seeds 1,4503599627370497 --out "$tmp/toy-big"
mkdir "$tmp/toy-seed"
for seed in 1e20 1.5 1e999; do
    sed "s/\"seeds\":.*/\"seeds\": [$seed],/" "$tmp/toy/run.json" > "$tmp/toy-seed/run.json"
    expect 1 "seeds: " -- "$MTAC" attnmap --run "$tmp/toy-seed"
done

# mtac data: one way to set the split
expect 2 "both set the split" -- "$MTAC" data --out "$tmp/split" --val-fraction 0.1 --val-every 3 /dev/null
# mtac plot: a 9th run is refused, not dropped
expect 2 "'$tmp/r9' is the 9th" -- "$MTAC" plot --out "$tmp/p9.png" "$tmp"/r{1,2,3,4,5,6,7,8,9}
# mtac bench attn with nothing that ran: an error, not an empty table with exit 0
expect 1 "nothing was measured" -- "$MTAC" bench attn --impl torch --python "$tmp/no-python" --T 64 --H 2 --d 8
# bench/bench_dp.sh with too few steps to time (it divided by zero and exited 0)
expect 2 "STEPS must be an integer >= 3" -- bash "$(dirname "$0")/../bench/bench_dp.sh" lm1m 2 1

# mtac train: the warmup error names the flags; the seed's limit (docs/training.md: 2^53-1); a
# resumed run refuses another preset and says that --steps stretches the lr schedule.
cp "$(dirname "$0")"/data/corpus.txt "$tmp/corpus.txt"  # a fixed text (Genesis and most of Exodus, KJV)
"$MTAC" data --out "$tmp/tdata" --val-every 3 "$tmp/corpus.txt" > /dev/null
expect 2 "lower --warmup or raise --steps" -- "$MTAC" train --data "$tmp/tdata" --steps 5 --out "$tmp/trun-w"
expect 2 "[0, 9007199254740991]" -- "$MTAC" train --data "$tmp/tdata" --seed 9007199254740992 --out "$tmp/trun-s"
tiny=(--data "$tmp/tdata" --batch_size 2 --seq_len 16 --warmup 0 --eval_every 0)
expect 0 "done: 2 steps" -- env OMP_NUM_THREADS=1 "$MTAC" train --preset lm1m-baseline "${tiny[@]}" --steps 2 --out "$tmp/trun"
expect 2 "--preset 'lm1m' cannot change it" -- "$MTAC" train --resume "$tmp/trun" --preset lm1m
expect 0 "the cosine lr schedule is recomputed over 4 steps" -- env OMP_NUM_THREADS=1 "$MTAC" train --resume "$tmp/trun" --steps 4

# Input files that are FIFOs are refused at once: opening one for reading would wait for a writer
# forever. `timeout` keeps a regression from hanging the suite (it exits 124, which fails).
mkdir -p "$tmp/fifo/run" "$tmp/fifo/run2" "$tmp/fifo/data"
for f in in.safetensors config.json run/config.json run/metrics.jsonl run/run.json run2/model.safetensors \
         data/train.bin; do
    mkfifo "$tmp/fifo/$f"
done
echo '{"model": {"dim": 8, "n_layers": 1, "n_heads": 2, "vocab_size": 259}}' > "$tmp/fifo/run2/config.json"
fifo="not a regular file (a FIFO)"
expect 1 "$fifo" -- timeout 10 "$MTAC" attn --in "$tmp/fifo/in.safetensors" --out "$tmp/o.safetensors"
expect 2 "$fifo" -- timeout 10 "$MTAC" train --config "$tmp/fifo/config.json"
expect 1 "$fifo" -- timeout 10 "$MTAC" eval --run "$tmp/fifo/run"
expect 1 "$fifo" -- timeout 10 "$MTAC" sample --run "$tmp/fifo/run" --prompt x
expect 1 "$fifo" -- timeout 10 "$MTAC" eval --run "$tmp/fifo/run2"
expect 1 "$fifo" -- timeout 10 "$MTAC" plot --out "$tmp/fifo/p.png" "$tmp/fifo/run"
expect 1 "$fifo" -- timeout 10 "$MTAC" attnmap --run "$tmp/fifo/run"
expect 1 "$fifo" -- timeout 10 "$MTAC" train --preset lm1m-baseline --steps 1 --warmup 0 --data "$tmp/fifo/data" --out "$tmp/fifo/out"
expect 1 "a directory" -- "$MTAC" attn --in "$tmp/fifo" --out "$tmp/o.safetensors"

# qkv_file FILE B H T D: a problem of all-zero q, k, v of shape (B,H,T,D), the data left sparse.
qkv_file() {
    local f=$1 s="[$2,$3,$4,$5]" n=$((4 * $2 * $3 * $4 * $5)) h len
    h="{\"q\":{\"dtype\":\"F32\",\"shape\":$s,\"data_offsets\":[0,$n]},"
    h+="\"k\":{\"dtype\":\"F32\",\"shape\":$s,\"data_offsets\":[$n,$((2 * n))]},"
    h+="\"v\":{\"dtype\":\"F32\",\"shape\":$s,\"data_offsets\":[$((2 * n)),$((3 * n))]}}"
    len=${#h}
    # the header length, a little-endian u64 (below 65536 here)
    printf "\\$(printf %03o $((len & 255)))\\$(printf %03o $((len >> 8)))\\0\\0\\0\\0\\0\\0%s" "$h" > "$f"
    truncate -s $((8 + len + 3 * n)) "$f"
}
# mtac attn refuses T above --max-T (default 16384) before any work: T = 200000 in a 2.4 MB file
# used to run for minutes (and the reference backend to ask for 160 GB maps). The reference
# backend also needs B*H*T*T <= max_T^2.
qkv_file "$tmp/long.safetensors" 1 1 200000 1
expect 1 "T = 200000 is above the limit of 16384" -- timeout 10 "$MTAC" attn --in "$tmp/long.safetensors" --out "$tmp/o.safetensors"
expect 1 "T = 200000" -- timeout 10 "$MTAC" attn --in "$tmp/long.safetensors" --out "$tmp/o.safetensors" --backend reference
qkv_file "$tmp/wide.safetensors" 4 2 12000 1
expect 1 "B*H*T*T = 1.15e+09" -- timeout 10 "$MTAC" attn --in "$tmp/wide.safetensors" --out "$tmp/o.safetensors" --backend reference
expect 1 "B*H*T*T = 1.15e+09" -- timeout 10 env MTAC_BACKEND=reference "$MTAC" attn --in "$tmp/wide.safetensors" --out "$tmp/o.safetensors"
qkv_file "$tmp/t64.safetensors" 1 2 64 8
expect 0 "T=64" -- "$MTAC" attn --in "$tmp/t64.safetensors" --out "$tmp/o.safetensors" --max-T 64
expect 1 "above the limit of 63" -- "$MTAC" attn --in "$tmp/t64.safetensors" --out "$tmp/o.safetensors" --max-T 63
expect 2 "positive integer" -- "$MTAC" attn --in "$tmp/t64.safetensors" --out "$tmp/o.safetensors" --max-T 0

# sample: --top-k 0 is the default (every token), so it is accepted and changes nothing; K < 0 is refused
expect 0 "same" -- bash -c 'cmp <("$1" sample --run "$2" --prompt x --tokens 20 --top-k 0 2>/dev/null) <("$1" sample --run "$2" --prompt x --tokens 20 2>/dev/null) && echo same' _ "$MTAC" "$tmp/trun"
expect 2 "--top-k expects an integer >= 0" -- "$MTAC" sample --run "$tmp/trun" --prompt x --top-k -1
# mtac logits: the forward's logits of given ids; bad ids named by position; float32 rows with --out.
expect 0 '"vocab_size": 259' -- "$MTAC" logits --run "$tmp/trun" --ids "72 105"
expect 2 "id 2 ('x') is not a token id in [0, 259)" -- "$MTAC" logits --run "$tmp/trun" --ids "72 x"
expect 2 "id 3 ('259') is not a token id" -- "$MTAC" logits --run "$tmp/trun" --ids "1,2,259"
expect 2 "no token ids given" -- "$MTAC" logits --run "$tmp/trun" --ids " "
expect 0 "2072" -- bash -c 'echo "1 2" | "$1" logits --run "$2" --out "$3/logits.bin" && stat -c %s "$3/logits.bin"' _ "$MTAC" "$tmp/trun" "$tmp"
# The JSON rows are the forward's: the same ids give the same first row whatever follows (causal).
expect 0 "same" -- bash -c 'a=$("$1" logits --run "$2" --ids "72 105" | python3 -c "import json,sys; print(json.load(sys.stdin)[\"logits\"][0][:5])"); b=$("$1" logits --run "$2" --ids "72 33 33" | python3 -c "import json,sys; print(json.load(sys.stdin)[\"logits\"][0][:5])"); [ "$a" = "$b" ] && echo same' _ "$MTAC" "$tmp/trun"

# Without OMP_WAIT_POLICY, mtac restarts itself with it set (cli/main.c): the restarted process
# must still be called mtac (ps, top, pkill; test_distributed's killed rank finds it by name).
env -u OMP_WAIT_POLICY -u GOMP_SPINCOUNT "$MTAC" toy --quick --steps 100000 --out "$tmp/comm" > /dev/null 2>&1 &
pid=$!
for _ in $(seq 100); do grep -qz '^OMP_WAIT_POLICY=passive$' /proc/$pid/environ 2>/dev/null && break; sleep 0.05; done
comm=$(cat /proc/$pid/comm 2>/dev/null)
kill $pid 2>/dev/null; wait $pid 2>/dev/null
[ "$comm" = mtac ] && pass=$((pass + 1)) || { fail=$((fail + 1)); echo "FAIL: restarted with OMP_WAIT_POLICY=passive, mtac is called '$comm'"; }

# ---- issue 42, helper cli-io: nothing of the user's clobbered ----
io=$tmp/io
mkdir "$io"
"$MTAC" attn --in "$tmp/ok.safetensors" --out "$io/ref.safetensors" > /dev/null  # what each write below must hold
# The atomic writer never replaces what is not a regular file. A symlink is followed: the file it
# points to is replaced, the link kept.
echo old > "$io/real.safetensors"
ln -s real.safetensors "$io/link.safetensors"
expect 0 "wrote 1 tensor" -- "$MTAC" attn --in "$tmp/ok.safetensors" --out "$io/link.safetensors"
ok_if '[ -L "$io/link.safetensors" ] && cmp -s "$io/real.safetensors" "$io/ref.safetensors"' "attn --out a symlink: the link was replaced, or its file not written"
# a device is written in place (a copy of /dev/null's node where mknod is allowed, else /dev/null itself,
# which an unprivileged rename cannot replace): still a character device afterwards
dev=/dev/null
mknod "$io/null" c 1 3 2>/dev/null && dev=$io/null
expect 0 "wrote 1 tensor" -- "$MTAC" attn --in "$tmp/ok.safetensors" --out "$dev"
ok_if '[ -c "$dev" ]' "attn --out $dev replaced the device node"
# a FIFO is written in place (its reader gets the file); with no reader, an error at once, no hang.
# On a busy machine the reader may open the FIFO after mtac tries to: "nothing reads it" comes at
# once and writes nothing, so that answer alone is retried, for up to 10 s.
mkfifo "$io/fifo"
timeout 20 cat "$io/fifo" > "$io/from-fifo" &
reader=$!
for _ in $(seq 100); do
    out=$(timeout 20 "$MTAC" attn --in "$tmp/ok.safetensors" --out "$io/fifo" 2>&1) && rc=0 || rc=$?
    case $out in *"nothing reads it"*) sleep 0.1 ;; *) break ;; esac
done
ok_if '[ $rc = 0 ] && [ "${out#*wrote 1 tensor}" != "$out" ]' "attn --out a FIFO with a reader -> exit $rc: $out"
wait $reader
ok_if '[ -p "$io/fifo" ] && cmp -s "$io/from-fifo" "$io/ref.safetensors"' "attn --out a FIFO: replaced, or its reader did not get the file"
expect 1 "cannot write to a FIFO: nothing reads it" -- timeout 20 "$MTAC" attn --in "$tmp/ok.safetensors" --out "$io/fifo"
ok_if '[ -p "$io/fifo" ]' "attn --out a FIFO without a reader replaced it"
# a directory is refused, and left alone
mkdir "$io/dir.safetensors"
expect 1 "is a directory" -- "$MTAC" attn --in "$tmp/ok.safetensors" --out "$io/dir.safetensors"
ok_if '[ -d "$io/dir.safetensors" ] && [ ! -e "$io/dir.safetensors.tmp" ]' "attn --out a directory: not left alone"
# every writer goes through it: plot's picture through a symlink, into a directory
echo old > "$io/real.png"
ln -s real.png "$io/link.png"
expect 0 "wrote" -- "$MTAC" plot --out "$io/link.png" "$tmp/trun"
ok_if '[ -L "$io/link.png" ] && [ "$(head -c 4 "$io/real.png" | tail -c 3)" = PNG ]' "plot --out a symlink: the link was replaced, or its file not written"
mkdir "$io/dir.png"
expect 1 "is a directory" -- "$MTAC" plot --out "$io/dir.png" "$tmp/trun"
# --out the same file as an input (whatever the name) is refused, the input untouched
cp "$tmp/ok.safetensors" "$io/in.safetensors"
ln -s in.safetensors "$io/in-link.safetensors"
expect 2 "is the input" -- "$MTAC" attn --in "$io/in.safetensors" --out "$io/in.safetensors"
expect 2 "is the input" -- "$MTAC" attn --in "$io/in.safetensors" --out "$io/in-link.safetensors"
expect 2 "is the input" -- "$MTAC" attn --in "$io/in.safetensors" --out "$io/../io/in.safetensors"
ok_if 'cmp -s "$io/in.safetensors" "$tmp/ok.safetensors"' "attn --out its input: the input changed"
expect 2 "is the input" -- "$MTAC" plot --out "$tmp/trun/metrics.jsonl" "$tmp/trun"
expect 2 "is the input" -- "$MTAC" data --out "$tmp/tdata" "$tmp/tdata/train.bin"
expect 2 "is the input" -- "$MTAC" convert --add-mta --run "$tmp/trun" --out "$tmp/trun/"
expect 2 "is the input" -- "$MTAC" attnmap --run "$tmp/toy" --out "$tmp/toy/toy-seed2.safetensors" --seed 2
# pictures: an extension the writer cannot write is refused as a bad flag, before any input is
# read (it wrote PNG bytes into p.jpg), and nothing is left behind; `mtac data` given a directory
# says so
expect 2 "cannot write a .jpg picture: name it .png or .svg" -- "$MTAC" plot --out "$io/p.jpg" "$tmp/trun"
expect 2 "cannot write a .jpg picture" -- "$MTAC" plot --out "$io/p.jpg" "$tmp/no-such-run"
expect 2 "cannot write a .jpg picture" -- "$MTAC" attnmap --run "$tmp/toy" --out "$io/a.jpg"
ok_if '[ ! -e "$io/p.jpg" ] && [ ! -e "$io/a.jpg" ]' "a .jpg picture was written"
expect 0 "wrote" -- "$MTAC" plot --out "$io/P.SVG" "$tmp/trun"
ok_if 'grep -q "<svg" "$io/P.SVG"' "plot --out P.SVG did not write an SVG"
expect 1 "$io is a directory" -- "$MTAC" data --out "$io/d" "$io"
# toy --out a folder that holds a toy run: refused (its results.json kept) unless --force
cp "$tmp/toy/results.json" "$io/results.json"
toyq=(--quick --blocks 4 --block-len 3 --alphabet 10 --dim 16 --layers 1 --hidden 16 --steps 3 --batch 4 --test 8 --eval-every 3)
expect 2 "already holds a toy run: use another --out, or --force" -- "$MTAC" toy "${toyq[@]}" --seeds 3 --out "$tmp/toy"
ok_if 'cmp -s "$tmp/toy/results.json" "$io/results.json"' "toy --out a finished run changed its results.json"
expect 0 "Sequence error rate" -- "$MTAC" toy "${toyq[@]}" --seeds 3 --out "$tmp/toy" --force
expect 0 '"3"' -- cat "$tmp/toy/results.json"
# a run's model.safetensors carries a checksum: one byte of the last weight changed (its lowest
# byte: low mantissa bits, so the value stays finite) is refused, naming the file
cp -r "$tmp/trun" "$io/run-bad"
size=$(stat -c %s "$io/run-bad/model.safetensors")
printf '\x55' | dd of="$io/run-bad/model.safetensors" bs=1 seek=$((size - 4)) conv=notrunc status=none
expect 1 "run-bad/model.safetensors: checksum mismatch (file corrupt)" -- "$MTAC" sample --run "$io/run-bad" --prompt x --tokens 2
# a prompt over 64 KiB is kept whole (it was cut to 65,536 bytes without a word): echoed whole,
# its last seq_len bytes condition the continuation, with a note; stdin and --prompt alike
head -c 70000 "$tmp/corpus.txt" > "$io/prompt"
ok_if '[ "$(wc -c < "$io/prompt")" = 70000 ]' "the corpus is shorter than the 70000-byte prompt"
"$MTAC" sample --run "$tmp/trun" --tokens 3 --temperature 0 < "$io/prompt" > "$io/stdin.out" 2> "$io/stdin.err"
ok_if 'cmp -s -n 70000 "$io/prompt" "$io/stdin.out" && [ "$(wc -c < "$io/stdin.out")" -gt 70000 ]' "sample < a 70000-byte prompt: not echoed whole"
expect 0 "the prompt is 70000 bytes, longer than the model's context (seq_len 16): its last 16 condition" -- cat "$io/stdin.err"
"$MTAC" sample --run "$tmp/trun" --tokens 3 --temperature 0 --prompt "$(cat "$io/prompt")" > "$io/arg.out" 2>/dev/null
# the continuation depends only on the last seq_len bytes: the same from the last 16 alone
"$MTAC" sample --run "$tmp/trun" --tokens 3 --temperature 0 --prompt "$(tail -c 16 "$io/prompt")" > "$io/tail.out" 2>/dev/null
ok_if 'cmp -s "$io/stdin.out" "$io/arg.out" && [ "$(tail -c +70001 "$io/arg.out")" = "$(tail -c +17 "$io/tail.out")" ]' "sample --prompt of 70000 bytes: another output than from stdin or from its last 16 bytes"
# --version (CMakeLists.txt's project version), `mtac help CMD [SUB]` as `mtac CMD [SUB] --help`
want=$(sed -n 's/^project(mtac VERSION \([0-9.]*\).*/mtac \1/p' "$(dirname "$0")/../CMakeLists.txt")
ok_if '[ -n "$want" ] && [ "$("$MTAC" --version)" = "$want" ] && [ "$("$MTAC" version)" = "$want" ]' "mtac --version is not '$want'"
for c in train plot "toy gen" "bench attn"; do
    ok_if 'cmp -s <("$MTAC" help $c) <("$MTAC" $c --help) && "$MTAC" help $c | grep -q "^usage: mtac $c"' "mtac help $c is not mtac $c --help"
done
expect 2 "mtac help: unknown command 'nope'" -- "$MTAC" help nope
expect 0 "mtac help <command>" -- "$MTAC" help
# ---- end cli-io ----

finish cli
