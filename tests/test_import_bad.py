"""Bad input to `mtac import`: every case must exit 2 with a message naming the file and the
field or tensor, and leave nothing at --out (nor a temporary directory beside it).

  test_import_bad.py MTAC IMPORT_TOOL

Standard library only: the GGUF and safetensors files are written here, a valid tiny model first
(which must import), then one corruption of it per case."""
import json
import os
import random
import shutil
import signal
import struct
import subprocess
import sys
import tempfile

MTAC = sys.argv[1]
TOOL = sys.argv[2] if len(sys.argv) > 2 else None
random.seed(1)
D, H, F, V, L = 64, 2, 64, 32, 1


def floats(n):
    return struct.pack(f"<{n}f", *[random.uniform(-0.1, 0.1) for _ in range(n)])


def mtac_shapes():
    """(GGUF name, HF name, (rows, cols) or (n,))"""
    s = [("token_embd.weight", "model.embed_tokens.weight", (V, D)), ("output_norm.weight", "model.norm.weight", (D,))]
    for l in range(L):
        for g, h, shape in [("attn_norm", "input_layernorm", (D,)), ("attn_q", "self_attn.q_proj", (D, D)),
                            ("attn_k", "self_attn.k_proj", (D, D)), ("attn_v", "self_attn.v_proj", (D, D)),
                            ("attn_output", "self_attn.o_proj", (D, D)), ("ffn_norm", "post_attention_layernorm", (D,)),
                            ("ffn_gate", "mlp.gate_proj", (F, D)), ("ffn_up", "mlp.up_proj", (F, D)),
                            ("ffn_down", "mlp.down_proj", (D, F))]:
            s.append((f"blk.{l}.{g}.weight", f"model.layers.{l}.{h}.weight", shape))
    return s


# ---- GGUF ----
U32, I32, F32T, STR, ARR = 4, 5, 6, 8, 9


def gstr(s):
    b = s.encode()
    return struct.pack("<Q", len(b)) + b


def gkv(key, t, v):
    out = gstr(key) + struct.pack("<I", t)
    if t == U32:
        return out + struct.pack("<I", v)
    if t == F32T:
        return out + struct.pack("<f", v)
    if t == STR:
        return out + gstr(v)
    raise ValueError(t)


def base_kvs():
    return [("general.architecture", STR, "llama"), ("llama.embedding_length", U32, D), ("llama.block_count", U32, L),
            ("llama.feed_forward_length", U32, F), ("llama.attention.head_count", U32, H),
            ("llama.attention.head_count_kv", U32, H), ("llama.context_length", U32, 128),
            ("llama.attention.layer_norm_rms_epsilon", F32T, 1e-5)]


def base_tensors():
    return [(g, list(reversed(shape)), 0, floats(eval("*".join(map(str, shape))))) for g, _, shape in mtac_shapes()]


def write_gguf(path, kvs=None, tensors=None, magic=b"GGUF", version=3, n_tensors=None, n_kv=None):
    kvs = base_kvs() if kvs is None else kvs
    tensors = base_tensors() if tensors is None else tensors
    out = magic + struct.pack("<IQQ", version, len(tensors) if n_tensors is None else n_tensors,
                              len(kvs) if n_kv is None else n_kv)
    out += b"".join(gkv(*kv) for kv in kvs)
    off, data = 0, b""
    for name, ne, t, blob in tensors:
        out += gstr(name) + struct.pack("<I", len(ne)) + struct.pack(f"<{len(ne)}Q", *ne) + struct.pack("<IQ", t, off)
        pad = (-len(blob)) % 32
        data += blob + b"\0" * pad
        off += len(blob) + pad
    out += b"\0" * ((-len(out)) % 32)
    with open(path, "wb") as f:
        f.write(out + data)
    return len(out)


# ---- Hugging Face ----

def write_st(path, tensors, dtype="F32"):
    header, blobs, off = {}, [], 0
    for name, shape, blob in tensors:
        header[name] = {"dtype": dtype, "shape": list(shape), "data_offsets": [off, off + len(blob)]}
        blobs.append(blob)
        off += len(blob)
    h = json.dumps(header).encode()
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(h)) + h + b"".join(blobs))


def hf_config(**kw):
    c = {"architectures": ["LlamaForCausalLM"], "hidden_size": D, "intermediate_size": F, "num_hidden_layers": L,
         "num_attention_heads": H, "num_key_value_heads": H, "vocab_size": V, "rms_norm_eps": 1e-5,
         "max_position_embeddings": 128, "tie_word_embeddings": True, "rope_scaling": None}
    c.update(kw)
    return c


def hf_tensors():
    return [(h, shape, floats(eval("*".join(map(str, shape))))) for _, h, shape in mtac_shapes()]


def write_hf(d, config=None, tensors=None, st=True):
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, "config.json"), "w") as f:
        json.dump(hf_config() if config is None else config, f)
    if st:
        write_st(os.path.join(d, "model.safetensors"), hf_tensors() if tensors is None else tensors)


def write_big(big):
    """A model of 100 MB (zeros), so that writing it takes long after the first progress line."""
    BD, BF, BL = 1024, 1024, 3
    kv = [k if k[0] not in ("llama.embedding_length", "llama.feed_forward_length", "llama.block_count")
          else (k[0], U32, {"llama.embedding_length": BD, "llama.feed_forward_length": BF, "llama.block_count": BL}[k[0]])
          for k in base_kvs()]
    tensors = [("token_embd.weight", [BD, V], 0, bytes(4 * V * BD)), ("output_norm.weight", [BD], 0, bytes(4 * BD))]
    for l in range(BL):
        for g, ne in [("attn_norm", [BD]), ("attn_q", [BD, BD]), ("attn_k", [BD, BD]), ("attn_v", [BD, BD]),
                      ("attn_output", [BD, BD]), ("ffn_norm", [BD]), ("ffn_gate", [BD, BF]), ("ffn_up", [BD, BF]),
                      ("ffn_down", [BF, BD])]:
            tensors.append((f"blk.{l}.{g}.weight", ne, 0, bytes(4 * eval("*".join(map(str, ne))))))
    write_gguf(big, kvs=kv, tensors=tensors)
    print(sum(len(t[3]) for t in tensors))


if sys.argv[1] == "--big":
    write_big(sys.argv[2])
    sys.exit(0)


failures = 0
work = tempfile.mkdtemp()


def expect(name, src, code, *want):
    global failures
    out = os.path.join(work, name + ".out")
    r = subprocess.run([MTAC, "import", "--from", src, "--out", out], capture_output=True, text=True)
    msg = r.stderr.strip().splitlines()[-1] if r.stderr.strip() else ""
    left = [e for e in os.listdir(work) if e.startswith(name + ".out")]
    ok = r.returncode == code and all(w in msg for w in want) and (code == 0) == bool(left)
    if code == 0 and left != [name + ".out"]:
        ok = False
    print(f"{'ok ' if ok else 'FAIL'} {name}: exit {r.returncode}: {msg}" + ("" if ok else f" (wanted exit {code}, {want}; left {left})"))
    failures += not ok


def gg(name, **kw):
    p = os.path.join(work, name + ".gguf")
    write_gguf(p, **kw)
    return p


def truncate(p, n):
    with open(p, "r+b") as f:
        f.truncate(n)
    return p


# the valid model first: the cases below fail only because of what each changes
expect("gguf_ok", gg("gguf_ok"), 0)
p = gg("gguf_truncated_header")
expect("gguf_truncated_header", truncate(p, 150), 2, p, "truncated")
p = gg("gguf_truncated_data")
expect("gguf_truncated_data", truncate(p, os.path.getsize(p) - 100), 2, p, "ffn_down.weight", "runs past the end")
expect("gguf_bad_magic", gg("gguf_bad_magic", magic=b"GGUX"), 2, "not a GGUF file")
expect("gguf_version_1", gg("gguf_version_1", version=1), 2, "GGUF version 1")
expect("gguf_count_absurd", gg("gguf_count_absurd", n_kv=1 << 60), 2, "key/values cannot fit")
expect("gguf_tensor_count_absurd", gg("gguf_tensor_count_absurd", n_tensors=1 << 40), 2, "tensors cannot fit")
kv = base_kvs()
kv[0] = ("general.architecture", STR, "gpt2")
expect("gguf_arch", gg("gguf_arch", kvs=kv), 2, "general.architecture gpt2 is not supported")
kv = base_kvs()[:-1] + [("llama.attention.layer_norm_rms_epsilon", STR, "x")]
expect("gguf_key_type", gg("gguf_key_type", kvs=kv), 2, "llama.attention.layer_norm_rms_epsilon", "not a number")
expect("gguf_key_missing", gg("gguf_key_missing", kvs=base_kvs()[:2]), 2, "llama.block_count", "missing")
kv = base_kvs() + [("llama.block_count", U32, 1)]
expect("gguf_dup_key", gg("gguf_dup_key", kvs=kv), 2, "llama.block_count", "appears twice")
t = base_tensors()
t[3] = (t[3][0], t[3][1], 99, t[3][3])
expect("gguf_unknown_type", gg("gguf_unknown_type", tensors=t), 2, "blk.0.attn_q.weight", "unknown ggml type 99")
t = base_tensors()
t[3] = (t[3][0], t[3][1], 10, t[3][3])
expect("gguf_unsupported_type", gg("gguf_unsupported_type", tensors=t), 2, "blk.0.attn_q.weight", "Q2_K")
t = base_tensors()
t[3] = (t[3][0], [D // 2, D * 2], 0, t[3][3])
expect("gguf_shape", gg("gguf_shape", tensors=t), 2, "blk.0.attn_q.weight", "has ne [32, 128]")
t = base_tensors()
expect("gguf_missing", gg("gguf_missing", tensors=[x for x in t if "ffn_up" not in x[0]]), 2, "blk.0.ffn_up.weight", "missing")
expect("gguf_dup_tensor", gg("gguf_dup_tensor", tensors=t + [t[2]]), 2, "blk.0.attn_norm.weight", "appears twice")
expect("gguf_extra", gg("gguf_extra", tensors=t + [("blk.0.attn_q.bias", [D], 0, floats(D))]), 2, "blk.0.attn_q.bias", "unexpected")
t = base_tensors()
t[0] = (t[0][0], t[0][1], 0, struct.pack("<f", float("nan")) * (V * D))
expect("gguf_nan", gg("gguf_nan", tensors=t), 2, "token_embd.weight", "finite")
expect("gguf_tokenizer_model", gg("gguf_tokenizer_model", kvs=base_kvs() + [("tokenizer.ggml.model", STR, "bert")]), 2,
       "tokenizer.ggml.model bert is not supported")
expect("gguf_tokenizer_tokens", gg("gguf_tokenizer_tokens", kvs=base_kvs() + [("tokenizer.ggml.model", STR, "gpt2")]), 2,
       "tokenizer.ggml.tokens", "missing")
expect("gguf_not_a_file", os.path.join(work, "nope.gguf"), 2, "nope.gguf")

d = os.path.join(work, "hf_ok")
write_hf(d)
expect("hf_ok", d, 0)
for name, cfg, want in [
        ("hf_arch", hf_config(architectures=["Qwen2ForCausalLM"]), ["architecture Qwen2ForCausalLM is not supported"]),
        ("hf_bias", hf_config(attention_bias=True), ["'attention_bias' true is not supported"]),
        ("hf_mlp_bias", hf_config(mlp_bias=True), ["'mlp_bias' true is not supported"]),
        ("hf_rope", hf_config(rope_scaling={"type": "linear", "factor": 2.0}), ["rope_scaling type linear is not supported"]),
        ("hf_head_dim", hf_config(head_dim=16), ["head_dim 16"]),
        ("hf_act", hf_config(hidden_act="gelu"), ["hidden_act gelu"]),
        ("hf_missing_key", {k: v for k, v in hf_config().items() if k != "vocab_size"}, ["'vocab_size' is missing"]),
        ("hf_bad_value", hf_config(num_hidden_layers=1.5), ["'num_hidden_layers' must be an integer"]),
        ("hf_eps_range", hf_config(rms_norm_eps=1e300), ["rms_norm_eps 1e+300", "not a float32"])]:
    d = os.path.join(work, name)
    write_hf(d, config=cfg)
    expect(name, d, 2, "config.json", *want)
d = os.path.join(work, "hf_bad_tokenizer")
write_hf(d)
with open(os.path.join(d, "tokenizer.json"), "w") as f:
    f.write('{"model": {"type": "Unigram", "vocab": []}}')
expect("hf_bad_tokenizer", d, 2, "tokenizer.json")
d = os.path.join(work, "hf_no_weights")
write_hf(d, st=False)
expect("hf_no_weights", d, 2, "no model.safetensors")
d = os.path.join(work, "hf_truncated")
write_hf(d)
truncate(os.path.join(d, "model.safetensors"), os.path.getsize(os.path.join(d, "model.safetensors")) - 10)
expect("hf_truncated", d, 2, "model.safetensors", "beyond the data section")
t = hf_tensors()
d = os.path.join(work, "hf_dtype")
write_hf(d, tensors=[])
write_st(os.path.join(d, "model.safetensors"), t, dtype="I32")
expect("hf_dtype", d, 2, "model.safetensors", "unsupported dtype I32")
d = os.path.join(work, "hf_shape")
t2 = list(t)
t2[3] = (t2[3][0], (D // 2, D * 2), t2[3][2])
write_hf(d, tensors=t2)
expect("hf_shape", d, 2, "model.layers.0.self_attn.q_proj.weight", "has shape [32, 128], config.json makes it [64, 64]")
d = os.path.join(work, "hf_missing")
write_hf(d, tensors=[x for x in t if "up_proj" not in x[0]])
expect("hf_missing", d, 2, "model.layers.0.mlp.up_proj.weight", "missing")
d = os.path.join(work, "hf_extra")
write_hf(d, tensors=t + [("model.layers.0.self_attn.q_proj.bias", (D,), floats(D))])
expect("hf_extra", d, 2, "model.layers.0.self_attn.q_proj.bias", "unexpected")
# shards: a tensor in two of them; an index naming a file outside the directory
d = os.path.join(work, "hf_dup_shard")
write_hf(d, st=False)
write_st(os.path.join(d, "a.safetensors"), t[:5])
write_st(os.path.join(d, "b.safetensors"), t[4:])
with open(os.path.join(d, "model.safetensors.index.json"), "w") as f:
    json.dump({"weight_map": {**{x[0]: "a.safetensors" for x in t[:4]}, **{x[0]: "b.safetensors" for x in t[4:]}}}, f)
expect("hf_dup_shard", d, 2, t[4][0], "is also in")
with open(os.path.join(d, "model.safetensors.index.json"), "w") as f:
    json.dump({"weight_map": {t[0][0]: "../hf_ok/model.safetensors"}}, f)
expect("hf_index_path", d, 2, "model.safetensors.index.json", "not a file name")

# --out: an existing non-empty directory is refused and left as it was
full = os.path.join(work, "full.out")
os.makedirs(full)
with open(os.path.join(full, "keep"), "w") as f:
    f.write("mine")
r = subprocess.run([MTAC, "import", "--from", os.path.join(work, "gguf_ok.gguf"), "--out", full], capture_output=True, text=True)
ok = r.returncode == 2 and "not an empty directory" in r.stderr and os.listdir(full) == ["keep"]
print(f"{'ok ' if ok else 'FAIL'} out_not_empty: exit {r.returncode}: {r.stderr.strip()}")
failures += not ok
# ... an empty one is filled
empty = os.path.join(work, "empty.out")
os.makedirs(empty)
r = subprocess.run([MTAC, "import", "--from", os.path.join(work, "gguf_ok.gguf"), "--out", empty], capture_output=True, text=True)
ok = r.returncode == 0 and sorted(os.listdir(empty)) == ["config.json", "model.safetensors"]
print(f"{'ok ' if ok else 'FAIL'} out_empty: exit {r.returncode}: {sorted(os.listdir(empty))}")
failures += not ok
# ... missing parents are made (as mkdir -p); a parent that is a file is an error, nothing made
deep = os.path.join(work, "made", "parents", "run.out")
r = subprocess.run([MTAC, "import", "--from", os.path.join(work, "gguf_ok.gguf"), "--out", deep], capture_output=True, text=True)
ok = r.returncode == 0 and sorted(os.listdir(deep)) == ["config.json", "model.safetensors"]
print(f"{'ok ' if ok else 'FAIL'} out_parents: exit {r.returncode}: {r.stderr.strip()[-200:]}")
failures += not ok
r = subprocess.run([MTAC, "import", "--from", os.path.join(work, "gguf_ok.gguf"), "--out",
                    os.path.join(work, "full.out", "keep", "run")], capture_output=True, text=True)
ok = r.returncode == 1 and "cannot create its directory" in r.stderr and os.listdir(full) == ["keep"]
print(f"{'ok ' if ok else 'FAIL'} out_parent_file: exit {r.returncode}: {r.stderr.strip()}")
failures += not ok
# SIGINT once the tensors are being read: exit 130, the temporary directory removed, no --out.
big = os.path.join(work, "big.gguf")
# written by a child: the peak RSS a child reports counts this process's own peak (vfork shares it)
model_kib = float(subprocess.run([sys.executable, __file__, "--big", big], check=True, capture_output=True,
                                 text=True).stdout) / 1024
out = os.path.join(work, "interrupted.out")
p = subprocess.Popen([MTAC, "import", "--from", big, "--out", out], stderr=subprocess.PIPE, text=True)
for line in p.stderr:
    if "tensor 1/" in line:
        p.send_signal(signal.SIGINT)
        break
rest = p.stderr.read()
code = p.wait()
left = [e for e in os.listdir(work) if e.startswith("interrupted.out")]
ok = code == 130 and "interrupted" in rest and not left
print(f"{'ok ' if ok else 'FAIL'} interrupted: exit {code}: {rest.strip().splitlines()[-1] if rest.strip() else ''}; left {left}")
failures += not ok

# Peak memory, over the process's own baseline (`mtac import --help`): an import holds the float32
# model and one tensor beside it, and opening the run (import_tool logits of one token) streams
# the weights into the model: each at most 1.5x the model (reading the file whole beside the
# model, as st_read does, would be 2x).
def peak_kib(args):
    p = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    _, status, ru = os.wait4(p.pid, 0)
    p.stderr.close()
    return os.waitstatus_to_exitcode(status), ru.ru_maxrss


_, base_kib = peak_kib([MTAC, "import", "--help"])
bigrun = os.path.join(work, "big.run")
for name, args, limit in [("import", [MTAC, "import", "--from", big, "--out", bigrun], 1.5),
                          ("open", [TOOL, "logits", bigrun, os.path.join(work, "big.logits"), "1"], 1.5)]:
    if not args[0]:
        continue
    code, kib = peak_kib(args)
    ratio = (kib - base_kib) / model_kib
    ok = code == 0 and ratio <= limit
    print(f"{'ok ' if ok else 'FAIL'} peak memory of {name}: {kib} KiB, baseline {base_kib} KiB, model {model_kib:.0f} KiB: {ratio:.2f}x (<= {limit}x)")
    failures += not ok
os.remove(big)

# the command line: --help, a missing --from
for args, code, want in [(["--help"], 0, "usage: mtac import"), (["--out", os.path.join(work, "x")], 2, "--from")]:
    r = subprocess.run([MTAC, "import"] + args, capture_output=True, text=True)
    ok = r.returncode == code and want in r.stdout + r.stderr
    print(f"{'ok ' if ok else 'FAIL'} import {' '.join(args)}: exit {r.returncode}")
    failures += not ok
left = [e for e in os.listdir(work) if ".import-" in e]
if left:
    print(f"FAIL temporary directories left: {left}")
    failures += 1
shutil.rmtree(work)
print(f"{failures} failures")
sys.exit(1 if failures else 0)
