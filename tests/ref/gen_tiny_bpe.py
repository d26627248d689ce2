#!/usr/bin/env python3
"""Writes tests/fixtures/tiny_bpe/: a small byte-level BPE tokenizer in Hugging Face's files
(tokenizer.json, tokenizer_config.json), trained with the `tokenizers` library on
tests/data/corpus.txt, shaped like SmolLM2's (digits split one by one before the byte-level
regex; <|endoftext|> 0, <|im_start|> 1 = BOS, <|im_end|> 2 = EOS; its ChatML chat template).
tests/test_tokcli.sh makes a run with it.

Regenerate (from the repository root, with the reference Python of scripts/ref_env.sh):
    "$(scripts/ref_env.sh)" tests/ref/gen_tiny_bpe.py
"""
import json
import os

from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")
SPECIAL = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]
CHAT = ("{% for message in messages %}{% if loop.first and messages[0]['role'] != 'system' %}"
        "{{ '<|im_start|>system\nYou are a tiny test model<|im_end|>\n' }}"
        "{% endif %}{{'<|im_start|>' + message['role'] + '\n' + message['content'] + '<|im_end|>' + '\n'}}"
        "{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}")


def main():
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.Sequence([pre_tokenizers.Digits(individual_digits=True),
                                                 pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)])
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=400, special_tokens=SPECIAL, show_progress=False,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    tok.train([os.path.join(ROOT, "tests", "data", "corpus.txt")], trainer)
    out = os.path.join(ROOT, "tests", "fixtures", "tiny_bpe")
    os.makedirs(out, exist_ok=True)
    tok.save(os.path.join(out, "tokenizer.json"))
    config = {"add_bos_token": False, "bos_token": "<|im_start|>", "eos_token": "<|im_end|>",
              "unk_token": "<|endoftext|>", "model_max_length": 2048, "chat_template": CHAT,
              "tokenizer_class": "GPT2Tokenizer"}
    with open(os.path.join(out, "tokenizer_config.json"), "w") as f:
        json.dump(config, f, indent=1)
        f.write("\n")


if __name__ == "__main__":
    main()
