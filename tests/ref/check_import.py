"""`mtac import` of tiny random Llama models against transformers: logits and greedy continuations.

  check_import.py MTAC IMPORT_TOOL WORKDIR

Hugging Face directories made with save_pretrained (GQA; tied and untied; rope_scaling llama3;
F32 and BF16; one sharded; a Mistral) and GGUF files written with the gguf package (F16, Q8_0,
Q4_1, Q6_K, q/k rows permuted as llama.cpp's converter does). Each is imported with
`mtac import`; the logits of a random sequence (import_tool logits) must agree with transformers
within TOL of the largest logit, and the greedy continuation (import_tool greedy, mtac's KV-cache
decoder) must be transformers' generate(do_sample=False). The transformers reference of a GGUF is
its dequantized weights with the permutation undone."""
import json
import os
import subprocess
import sys

import numpy as np
import torch
import gguf
from gguf import GGMLQuantizationType as Q
from tokenizers import ByteLevelBPETokenizer
from transformers import LlamaConfig, LlamaForCausalLM, MistralConfig, MistralForCausalLM

# Both sides compute in float32 (unit roundoff u = 2^-24 ~ 6e-8) with dot products of at most a
# few hundred terms through 2 layers: their differences are ~1e-6 of the logits' scale. A wrong
# permutation, tensor or norm changes the logits by O(1) of that scale, 4 orders above TOL.
TOL = 1e-4
T, NEW = 24, 12

mtac, tool, work = sys.argv[1:4]
torch.manual_seed(0)
rng = np.random.default_rng(0)
failed = []


def randomize(model):
    """Weights large enough that logits differ clearly (no near-ties for greedy), norms not 1."""
    with torch.no_grad():
        for name, p in model.named_parameters():
            if "norm" in name:
                p.copy_(1 + 0.5 * torch.rand_like(p))
            else:
                p.normal_(0, 1.0 / p.shape[-1] ** 0.5 * 1.5)
    return model


def reference(model, ids):
    model = model.float().eval()
    x = torch.tensor([ids])
    with torch.no_grad():
        logits = model(x).logits[0].numpy()
        out = model.generate(x, max_new_tokens=NEW, do_sample=False, min_new_tokens=NEW, pad_token_id=0,
                             eos_token_id=None, attention_mask=torch.ones_like(x))
    return logits, out[0, len(ids):].tolist()


def check(name, src, ref_model, vocab):
    ids = rng.integers(0, vocab, size=T).tolist()
    want_logits, want_next = reference(ref_model, ids)
    run = os.path.join(work, name + ".run")
    r = subprocess.run([mtac, "import", "--from", src, "--out", run], capture_output=True, text=True)
    if r.returncode:
        print(f"{name}: mtac import failed ({r.returncode}): {r.stderr.strip()}")
        failed.append(name)
        return
    out = os.path.join(work, name + ".logits")
    subprocess.run([tool, "logits", run, out] + [str(i) for i in ids], check=True)
    got = np.fromfile(out, dtype=np.float32).reshape(want_logits.shape)
    err = np.abs(got - want_logits).max() / np.abs(want_logits).max()
    nxt = subprocess.run([tool, "greedy", run, str(NEW)] + [str(i) for i in ids], check=True, capture_output=True,
                         text=True).stdout.split()
    nxt = [int(t) for t in nxt]
    ok = err <= TOL and nxt == want_next
    print(f"{name}: logits max error {err:.2e} of the largest (<= {TOL}); greedy {'equal' if nxt == want_next else f'DIFFERS: mtac {nxt}, transformers {want_next}'}")
    if not ok:
        failed.append(name)


def check_tokens(name, run, tok):
    """The run's tokenizer (import_tool tokenize) gives the ids `tokenizers` gives."""
    ok = True
    for text in TEXTS:
        got = subprocess.run([tool, "tokenize", run, text], capture_output=True, text=True)
        want = tok.encode(text, add_special_tokens=False).ids
        if got.returncode or [int(t) for t in got.stdout.split()] != want:
            print(f"{name}: tokenization of {text!r} DIFFERS: mtac {got.stdout.strip()} {got.stderr.strip()}, tokenizers {want}")
            ok = False
    if ok:
        print(f"{name}: tokenization of {len(TEXTS)} texts equal")
    else:
        failed.append(name + " (tokens)")


def hf_case(name, cls, cfg, dtype=torch.float32, shard=None, tok=None):
    model = randomize(cls(cfg))
    d = os.path.join(work, name)
    kw = {"max_shard_size": shard} if shard else {}
    model.to(dtype).save_pretrained(d, safe_serialization=True, **kw)
    if tok:
        tok.save(os.path.join(d, "tokenizer.json"))
        with open(os.path.join(d, "tokenizer_config.json"), "w") as f:
            json.dump({"add_bos_token": False, "bos_token": "<s>", "eos_token": "</s>"}, f)
    ref = cls.from_pretrained(d, torch_dtype=torch.float32)  # what the files hold, in float32
    check(name, d, ref, cfg.vocab_size)
    if tok:
        for f in ["tokenizer.json", "tokenizer_config.json", "generation_config.json"]:
            if not os.path.exists(os.path.join(work, name + ".run", f)):
                print(f"{name}: the run lacks {f}")
                failed.append(name + " (files)")
        check_tokens(name, os.path.join(work, name + ".run"), tok)


def llama(**kw):
    base = dict(vocab_size=96, hidden_size=64, intermediate_size=160, num_hidden_layers=2, num_attention_heads=4,
                num_key_value_heads=2, max_position_embeddings=256, rms_norm_eps=1e-5, rope_theta=10000.0,
                tie_word_embeddings=True)
    base.update(kw)
    return LlamaConfig(**base)


# a small byte-level BPE tokenizer (GPT-2's pre-tokenizer), trained here
TEXTS = ["Hello world, this is a test.", "  spaces\tand tabs\r\nnew lines 12345", "caf\u00e9 \u65e5\u672c\u8a9e \U0001F600!",
         "it's the model's <s> token </s>"]
TOK = ByteLevelBPETokenizer()
TOK.train_from_iterator(TEXTS * 20 + ["the quick brown fox jumps over the lazy dog"] * 20, vocab_size=300,
                        special_tokens=["<s>", "</s>"], show_progress=False)

hf_case("hf_tied_f32", LlamaForCausalLM, llama())
hf_case("hf_tokenizer", LlamaForCausalLM, llama(vocab_size=320), tok=TOK)
hf_case("hf_untied_bf16_llama3", LlamaForCausalLM,
        llama(tie_word_embeddings=False, rope_theta=10000.0,
              rope_scaling={"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
                            "original_max_position_embeddings": 16}), dtype=torch.bfloat16)
hf_case("hf_sharded_untied", LlamaForCausalLM, llama(tie_word_embeddings=False, num_key_value_heads=1), shard="40KB")
hf_case("hf_mistral", MistralForCausalLM,
        MistralConfig(vocab_size=96, hidden_size=64, intermediate_size=160, num_hidden_layers=2, num_attention_heads=4,
                      num_key_value_heads=2, max_position_embeddings=256, sliding_window=128, tie_word_embeddings=False))


# ---- GGUF ----

def to_gguf_rows(w, heads):
    """llama.cpp's converter: each head's rows from rotate-half order to adjacent pairs."""
    return w.reshape(heads, 2, w.shape[0] // heads // 2, *w.shape[1:]).swapaxes(1, 2).reshape(w.shape)


def from_gguf_rows(w, heads):
    return w.reshape(heads, w.shape[0] // heads // 2, 2, *w.shape[1:]).swapaxes(1, 2).reshape(w.shape)


def random_blocks(shape, qtype):
    """Random Q6_K blocks (the gguf package cannot quantize to it): random quants, int8 sub-block
    scales in [-16, 16] and a block scale giving values of about 1.5/sqrt(cols), like randomize."""
    bs, ts = gguf.GGML_QUANT_SIZES[qtype]
    n = shape[0] * shape[1] // bs
    raw = rng.integers(0, 256, size=(n, ts), dtype=np.uint8)
    raw[:, 192:208] = rng.integers(-16, 17, size=(n, 16)).astype(np.int8).view(np.uint8)
    raw[:, 208:210] = np.full(n, 1.5 / shape[1] ** 0.5 / (16 * 32) * 2, dtype=np.float16).view(np.uint8).reshape(n, 2)
    return raw.reshape(shape[0], shape[1] // bs * ts)


def add_gguf_tokenizer(w, tok):
    """The tokenizer as llama.cpp's converter writes a GPT-2 style one."""
    spec = json.loads(tok.to_str())
    vocab = sorted(spec["model"]["vocab"].items(), key=lambda kv: kv[1])
    special = {t["content"] for t in spec["added_tokens"]}
    w.add_tokenizer_model("gpt2")
    w.add_tokenizer_pre("gpt-2")  # llama.cpp's name for GPT-2's own regex
    w.add_token_list([t for t, _ in vocab])
    w.add_token_types([3 if t in special else 1 for t, _ in vocab])
    w.add_token_merges([m if isinstance(m, str) else " ".join(m) for m in spec["model"]["merges"]])
    w.add_bos_token_id(spec["model"]["vocab"]["<s>"])
    w.add_eos_token_id(spec["model"]["vocab"]["</s>"])
    w.add_add_bos_token(False)


def gguf_case(name, qtype, tied, tok=None):
    # rows of 256 values: every block size (Q6_K's is 256) divides them
    cfg = llama(vocab_size=320 if tok else 64, hidden_size=256, intermediate_size=512, num_attention_heads=4, num_key_value_heads=2,
                tie_word_embeddings=tied)
    model = randomize(LlamaForCausalLM(cfg))
    sd = {k: v.detach().float().numpy() for k, v in model.state_dict().items()}
    path = os.path.join(work, name + ".gguf")
    w = gguf.GGUFWriter(path, "llama")
    w.add_context_length(256)
    w.add_embedding_length(cfg.hidden_size)
    w.add_block_count(cfg.num_hidden_layers)
    w.add_feed_forward_length(cfg.intermediate_size)
    w.add_head_count(cfg.num_attention_heads)
    w.add_head_count_kv(cfg.num_key_value_heads)
    w.add_layer_norm_rms_eps(cfg.rms_norm_eps)
    w.add_rope_freq_base(cfg.rope_theta)
    if tok:
        add_gguf_tokenizer(w, tok)
    names = {"model.embed_tokens.weight": "token_embd.weight", "model.norm.weight": "output_norm.weight",
             "lm_head.weight": "output.weight"}
    per = {"input_layernorm": "attn_norm", "self_attn.q_proj": "attn_q", "self_attn.k_proj": "attn_k",
           "self_attn.v_proj": "attn_v", "self_attn.o_proj": "attn_output", "post_attention_layernorm": "ffn_norm",
           "mlp.gate_proj": "ffn_gate", "mlp.up_proj": "ffn_up", "mlp.down_proj": "ffn_down"}
    for l in range(cfg.num_hidden_layers):
        for k, v in per.items():
            names[f"model.layers.{l}.{k}.weight"] = f"blk.{l}.{v}.weight"
    back = {}
    for hf, x in sd.items():
        if hf not in names or (tied and hf == "lm_head.weight"):
            continue
        heads = cfg.num_attention_heads if "q_proj" in hf else cfg.num_key_value_heads if "k_proj" in hf else 0
        if heads:
            x = to_gguf_rows(x, heads)
        t = qtype if x.ndim == 2 else Q.F32  # norms stay float32, as llama.cpp keeps them
        data = random_blocks(x.shape, t) if t == Q.Q6_K else gguf.quants.quantize(x, t) if t != Q.F32 else x
        w.add_tensor(names[hf], data, raw_dtype=t)
        deq = gguf.quants.dequantize(data, t).reshape(x.shape).astype(np.float32)
        back[hf] = from_gguf_rows(deq, heads) if heads else deq  # what the file holds, as transformers lays it out
    if tied:
        back["lm_head.weight"] = back["model.embed_tokens.weight"]
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    ref = LlamaForCausalLM(cfg)
    ref.load_state_dict({k: torch.from_numpy(np.ascontiguousarray(v)) for k, v in back.items()}, strict=False)
    if tied:
        ref.tie_weights()
    check(name, path, ref, cfg.vocab_size)
    if tok:
        check_tokens(name, os.path.join(work, name + ".run"), tok)


gguf_case("gguf_f16", Q.F16, True, tok=TOK)
gguf_case("gguf_q8_0", Q.Q8_0, False)
gguf_case("gguf_q4_1", Q.Q4_1, True)
gguf_case("gguf_q6_k", Q.Q6_K, False)

print("FAILED: " + ", ".join(failed) if failed else "all imports agree with transformers")
sys.exit(1 if failed else 0)
