"""Prefill and decode speed of one pretrained model in mtac, transformers and llama.cpp, side by side
on the same machine and threads (docs/benchmarks.md). All three compute in float32: mtac its imported
run, transformers the Hugging Face directory, llama.cpp (llama-cpp-python) an F32 GGUF of the same
weights (bench/gguf_to_f32.py). Prefill: one forward over a PROMPT-token prompt; decode: TOKENS
greedy steps after it with each one's cache. Best of --reps. Prints one JSON line per engine and
a table.

usage: python bench_pretrained.py --mtac BUILD/mtac --run RUN --hf DIR --gguf F32.gguf
                                  [--threads N] [--prompt 512] [--tokens 64] [--reps 2]
"""
import argparse
import json
import os
import platform
import subprocess
import sys
import time


def prompt_ids(n, vocab):
    # Ids of ordinary tokens (above the few specials at the start of the vocabulary), fixed by a seed.
    import random
    rng = random.Random(1)
    return [rng.randrange(1000, min(vocab, 20000)) for _ in range(n)]


def bench_mtac(a, env=None):
    out = subprocess.run([a.mtac, "bench", "decode", "--run", a.run, "--contexts", str(a.prompt), "--tokens",
                          str(a.tokens), "--impl", "cache", "--threads", str(a.threads), "--json"],
                         check=True, capture_output=True, text=True, env=dict(os.environ, **(env or {}))).stdout
    r = [json.loads(l) for l in out.splitlines() if l.startswith("{")][0]
    return r["prefill_s"], r["tokens_per_s"]


def bench_transformers(a, ids):
    import torch
    from transformers import AutoModelForCausalLM
    torch.set_num_threads(a.threads)
    m = AutoModelForCausalLM.from_pretrained(a.hf, torch_dtype=torch.float32).eval()
    x = torch.tensor([ids])
    with torch.no_grad():
        t0 = time.perf_counter()
        o = m(x, use_cache=True)
        pre = time.perf_counter() - t0
        past, tok = o.past_key_values, o.logits[:, -1:].argmax(-1)
        t0 = time.perf_counter()
        for _ in range(a.tokens):
            o = m(tok, past_key_values=past, use_cache=True)
            past, tok = o.past_key_values, o.logits[:, -1:].argmax(-1)
        dec = a.tokens / (time.perf_counter() - t0)
    return pre, dec


def bench_llama(a, ids):
    from llama_cpp import Llama
    llm = Llama(model_path=a.gguf, n_ctx=a.prompt + a.tokens + 8, n_batch=a.prompt, n_ubatch=a.prompt,
                n_threads=a.threads, n_threads_batch=a.threads, logits_all=False, verbose=False)
    llm.reset()
    t0 = time.perf_counter()
    llm.eval(ids)
    pre = time.perf_counter() - t0
    import numpy as np
    t0 = time.perf_counter()
    for _ in range(a.tokens):
        # Without logits_all llama-cpp-python keeps no scores: the last token's logits from the context.
        tok = int(np.ctypeslib.as_array(llm._ctx.get_logits(), shape=(llm.n_vocab(),)).argmax())
        llm.eval([tok])
    dec = a.tokens / (time.perf_counter() - t0)
    return pre, dec


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--mtac", required=True)
    p.add_argument("--run", required=True)
    p.add_argument("--hf", required=True)
    p.add_argument("--gguf", required=True)
    p.add_argument("--threads", type=int, default=os.cpu_count())
    p.add_argument("--prompt", type=int, default=512)
    p.add_argument("--tokens", type=int, default=64)
    p.add_argument("--reps", type=int, default=2)
    a = p.parse_args()
    vocab = json.load(open(os.path.join(a.hf, "config.json")))["vocab_size"]
    ids = prompt_ids(a.prompt, vocab)
    # mtac waits passively by default (OpenMP threads sleep at once: for shared machines, README
    # "Threads"); transformers' OpenMP and llama.cpp's thread pool spin. "mtac spinning" is mtac with
    # a short spin (GOMP_SPINCOUNT), a user's setting for an idle machine of their own.
    engines = {"mtac": lambda: bench_mtac(a), "mtac spinning": lambda: bench_mtac(a, {"GOMP_SPINCOUNT": "10000"}),
               "transformers": lambda: bench_transformers(a, ids),
               "llama.cpp F32": lambda: bench_llama(a, ids)}
    res = {}
    for name, fn in engines.items():
        runs = [fn() for _ in range(a.reps)]
        res[name] = (min(r[0] for r in runs), max(r[1] for r in runs))
        print(json.dumps({"engine": name, "prefill_s": round(res[name][0], 4), "prefill_tokens_per_s":
                          round(a.prompt / res[name][0], 1), "decode_tokens_per_s": round(res[name][1], 2),
                          "prompt": a.prompt, "tokens": a.tokens, "threads": a.threads,
                          "cpu": platform.processor() or platform.machine()}), flush=True)
    print(f"\n{'engine':<16}{'prefill s':>10}{'prefill tok/s':>15}{'decode tok/s':>14}")
    for name, (pre, dec) in res.items():
        print(f"{name:<16}{pre:>10.3f}{a.prompt / pre:>15.1f}{dec:>14.2f}")
    print()
    for name in ("mtac", "mtac spinning"):
        m = res[name]
        for ref in ("transformers", "llama.cpp F32"):
            print(f"{name} / {ref}: prefill speed {res[ref][0] / m[0]:.2f}x, decode speed {m[1] / res[ref][1]:.2f}x")


if __name__ == "__main__":
    sys.exit(main())
