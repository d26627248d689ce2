#!/usr/bin/env python3
"""Writes tests/fixtures/chat_templates.json: what transformers' apply_chat_template renders for
one user message with add_generation_prompt=True, for the chat-template families mtac renders
(src/tok/chat.c) and for templates it must refuse (expected null).

Regenerate (from the repository root, with the reference Python of scripts/ref_env.sh):
    "$(scripts/ref_env.sh)" tests/ref/gen_chat_fixture.py
"""
import json
import os

from tokenizers import Tokenizer, models
from transformers import PreTrainedTokenizerFast

# SmolLM2-135M-Instruct's template, as its GGUF file holds it (a default system message).
SMOLLM2 = ("{% for message in messages %}{% if loop.first and messages[0]['role'] != 'system' %}"
           "{{ '<|im_start|>system\nYou are a helpful AI assistant named SmolLM, trained by Hugging Face<|im_end|>\n' }}"
           "{% endif %}{{'<|im_start|>' + message['role'] + '\n' + message['content'] + '<|im_end|>' + '\n'}}"
           "{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}")
# Qwen2-Instruct style: the same with Jinja escapes (\\n) inside the literals and quotes escaped.
QWEN2 = ("{% for message in messages %}{% if loop.first and messages[0]['role'] != 'system' %}"
         "{{ '<|im_start|>system\\nYou are a helpful assistant.\\nDon\\'t lie.<|im_end|>\\n' }}"
         "{% endif %}{{'<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>' + '\\n'}}"
         "{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}")
# ChatML without a default system message.
CHATML = ("{% for message in messages %}{{'<|im_start|>' + message['role'] + '\n' + message['content'] + "
          "'<|im_end|>' + '\n'}}{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}")
# Meta-Llama-3-8B-Instruct.
LLAMA3 = ("{% set loop_messages = messages %}{% for message in loop_messages %}{% set content = "
          "'<|start_header_id|>' + message['role'] + '<|end_header_id|>\n\n'+ message['content'] | trim + "
          "'<|eot_id|>' %}{% if loop.index0 == 0 %}{% set content = bos_token + content %}{% endif %}"
          "{{ content }}{% endfor %}{% if add_generation_prompt %}"
          "{{ '<|start_header_id|>assistant<|end_header_id|>\n\n' }}{% endif %}")
# Llama-2-7b-chat-hf.
LLAMA2 = ("{% if messages[0]['role'] == 'system' %}{% set loop_messages = messages[1:] %}{% set system_message = "
          "messages[0]['content'] %}{% else %}{% set loop_messages = messages %}{% set system_message = false %}"
          "{% endif %}{% for message in loop_messages %}{% if (message['role'] == 'user') != (loop.index0 % 2 == 0) %}"
          "{{ raise_exception('Conversation roles must alternate user/assistant/user/assistant/...') }}{% endif %}"
          "{% if loop.index0 == 0 and system_message != false %}{% set content = '<<SYS>>\\n' + system_message + "
          "'\\n<</SYS>>\\n\\n' + message['content'] %}{% else %}{% set content = message['content'] %}{% endif %}"
          "{% if message['role'] == 'user' %}{{ bos_token + '[INST] ' + content.strip() + ' [/INST]' }}"
          "{% elif message['role'] == 'assistant' %}{{ ' '  + content.strip() + ' ' + eos_token }}{% endif %}"
          "{% endfor %}")
# Zephyr (TinyLlama-1.1B-Chat): a family mtac does not render.
ZEPHYR = ("{% for message in messages %}\n{% if message['role'] == 'user' %}\n{{ '<|user|>\n' + message['content'] "
          "+ eos_token }}\n{% elif message['role'] == 'assistant' %}\n{{ '<|assistant|>\n'  + message['content'] + "
          "eos_token }}\n{% endif %}\n{% if loop.last and add_generation_prompt %}\n{{ '<|assistant|>' }}\n{% endif %}\n"
          "{% endfor %}")

CASES = [("ChatML", SMOLLM2, "<|im_start|>", "<|im_end|>"), ("ChatML", QWEN2, "<|endoftext|>", "<|im_end|>"),
         ("ChatML", CHATML, "<s>", "</s>"), ("Llama 3", LLAMA3, "<|begin_of_text|>", "<|eot_id|>"),
         ("Llama 2", LLAMA2, "<s>", "</s>"), (None, ZEPHYR, "<s>", "</s>")]
USERS = ["What is the capital of France?", "  spaced\tout \n", "quotes ' \" and \\n, é ✓ 🙂", ""]


def main():
    out = []
    for family, tmpl, bos, eos in CASES:
        tok = PreTrainedTokenizerFast(tokenizer_object=Tokenizer(models.WordLevel({"<unk>": 0}, unk_token="<unk>")),
                                      bos_token=bos, eos_token=eos)
        for user in USERS:
            text = tok.apply_chat_template([{"role": "user", "content": user}], chat_template=tmpl,
                                           tokenize=False, add_generation_prompt=True)
            out.append({"family": family, "template": tmpl, "bos": bos, "user": user,
                        "expected": text if family else None})
    path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "fixtures", "chat_templates.json")
    with open(path, "w", encoding="utf-8") as f:
        json.dump(out, f, ensure_ascii=False, indent=1)
        f.write("\n")


if __name__ == "__main__":
    main()
