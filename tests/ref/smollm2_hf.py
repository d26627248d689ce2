"""Writes a Hugging Face directory of SmolLM2-135M-Instruct from its GGUF file, made independently of
mtac with the reference packages: weights dequantized by gguf.quants.dequantize, the q/k rows that
llama.cpp's converter permuted into adjacent-pair RoPE order put back into Hugging Face's
rotate-half order, saved by transformers' LlamaForCausalLM.save_pretrained (float32 safetensors, the
embedding tied to lm_head as in the original); the tokenizer rebuilt with the `tokenizers` library
as SmolLM2's own tokenizer.json is made (individual digits, then GPT-2's byte-level regex).

usage: python smollm2_hf.py GGUF OUTDIR
"""
import json
import os
import sys

import numpy as np
import torch
from gguf import GGUFReader
from gguf.quants import dequantize


def field(r, key):
    f = r.fields[key]
    if f.types[0].name == "STRING":
        return bytes(f.parts[f.data[0]]).decode()
    if f.types[0].name == "ARRAY":
        if f.types[1].name == "STRING":
            return [bytes(f.parts[i]).decode() for i in f.data]
        return [f.parts[i][0].item() for i in f.data]
    return f.parts[f.data[0]][0].item()


def unpermute(w, n_head):
    # llama.cpp's converter: w.reshape(n_head, 2, d/2, D).swapaxes(1, 2) (rotate-half -> pairs); undo it.
    d = w.shape[0] // n_head
    return w.reshape(n_head, d // 2, 2, w.shape[1]).swapaxes(1, 2).reshape(w.shape)


def weights(r, n_head, n_kv):
    names = {"token_embd": "model.embed_tokens", "output_norm": "model.norm"}
    blk = {"attn_q": "self_attn.q_proj", "attn_k": "self_attn.k_proj", "attn_v": "self_attn.v_proj",
           "attn_output": "self_attn.o_proj", "ffn_gate": "mlp.gate_proj", "ffn_up": "mlp.up_proj",
           "ffn_down": "mlp.down_proj", "attn_norm": "input_layernorm", "ffn_norm": "post_attention_layernorm"}
    sd = {}
    for t in r.tensors:
        w = dequantize(t.data, t.tensor_type).astype(np.float32).reshape([int(x) for x in reversed(t.shape)])
        base, _ = t.name.rsplit(".", 1)
        if base.startswith("blk."):
            _, l, kind = base.split(".", 2)
            if kind == "attn_q":
                w = unpermute(w, n_head)
            elif kind == "attn_k":
                w = unpermute(w, n_kv)
            name = f"model.layers.{l}.{blk[kind]}"
        else:
            name = names[base]
        sd[name + ".weight"] = torch.from_numpy(np.ascontiguousarray(w))
    return sd


def tokenizer(r, out):
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, AddedToken
    toks, types = field(r, "tokenizer.ggml.tokens"), field(r, "tokenizer.ggml.token_type")
    merges = [tuple(m.split(" ", 1)) for m in field(r, "tokenizer.ggml.merges")]
    bpe = models.BPE(vocab={t: i for i, t in enumerate(toks)}, merges=merges, unk_token=None, fuse_unk=False)
    tk = Tokenizer(bpe)
    tk.pre_tokenizer = pre_tokenizers.Sequence([pre_tokenizers.Digits(individual_digits=True),
                                                pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)])
    tk.decoder = decoders.ByteLevel()
    # GGUF token type 3 (control) marks SmolLM2's special tokens.
    tk.add_special_tokens([AddedToken(t, special=True, normalized=False) for t, ty in zip(toks, types) if ty == 3])
    tk.save(os.path.join(out, "tokenizer.json"))
    bos, eos = toks[field(r, "tokenizer.ggml.bos_token_id")], toks[field(r, "tokenizer.ggml.eos_token_id")]
    cfg = {"tokenizer_class": "GPT2Tokenizer", "add_bos_token": False, "add_prefix_space": False,
           "bos_token": bos, "eos_token": eos, "pad_token": eos, "unk_token": toks[0],
           "model_max_length": 8192, "clean_up_tokenization_spaces": False,
           "chat_template": field(r, "tokenizer.chat_template")}
    with open(os.path.join(out, "tokenizer_config.json"), "w") as f:
        json.dump(cfg, f, indent=2, ensure_ascii=False)


def main():
    path, out = sys.argv[1], sys.argv[2]
    from transformers import LlamaConfig, LlamaForCausalLM, GenerationConfig
    r = GGUFReader(path)
    assert field(r, "general.architecture") == "llama"
    n_head, n_kv = field(r, "llama.attention.head_count"), field(r, "llama.attention.head_count_kv")
    cfg = LlamaConfig(vocab_size=field(r, "llama.vocab_size"), hidden_size=field(r, "llama.embedding_length"),
                      intermediate_size=field(r, "llama.feed_forward_length"),
                      num_hidden_layers=field(r, "llama.block_count"), num_attention_heads=n_head,
                      num_key_value_heads=n_kv, max_position_embeddings=field(r, "llama.context_length"),
                      rms_norm_eps=field(r, "llama.attention.layer_norm_rms_epsilon"),
                      rope_theta=field(r, "llama.rope.freq_base"), tie_word_embeddings=True,
                      bos_token_id=field(r, "tokenizer.ggml.bos_token_id"),
                      eos_token_id=field(r, "tokenizer.ggml.eos_token_id"), torch_dtype="float32")
    cfg.architectures = ["LlamaForCausalLM"]
    model = LlamaForCausalLM(cfg)
    sd = weights(r, n_head, n_kv)
    sd["lm_head.weight"] = sd["model.embed_tokens.weight"]
    missing, unexpected = model.load_state_dict(sd, strict=False)
    assert not unexpected and set(missing) <= {"lm_head.weight"}, (missing, unexpected)
    model.tie_weights()
    os.makedirs(out, exist_ok=True)
    model.save_pretrained(out, safe_serialization=True)
    GenerationConfig(bos_token_id=cfg.bos_token_id, eos_token_id=cfg.eos_token_id).save_pretrained(out)
    tokenizer(r, out)


if __name__ == "__main__":
    main()
