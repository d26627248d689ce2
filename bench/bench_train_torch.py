#!/usr/bin/env python3
"""Training-step speed of the PyTorch reference model (what `mtac bench train` compares against).

    /usr/bin/python3 bench/bench_train_torch.py --config CFG.json --B 8 --T 256 --threads 2 --steps 3

One step = forward, mean cross-entropy, backward, global-norm clip 1.0, torch.optim.AdamW; float32;
the MTA convolutions use F.conv2d (mta_ref's fast path). No attention dropout (model_ref has none).
Prints one JSON line: {"impl": "torch_ref", "tokens_per_s": ..., "step_s": ...}; exit 77 without torch.
"""
import argparse
import functools
import json
import os
import sys
import time

try:
    import torch
except ImportError:
    print('bench_train_torch: torch is not importable with %s' % sys.executable, file=sys.stderr)
    sys.exit(77)

# the PyTorch reference (docs/reference.md)
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), '..', 'tests', 'ref'))
import model_ref  # noqa: E402
import mta_ref  # noqa: E402

model_ref.mta_forward = functools.partial(mta_ref.mta_forward, use_conv2d=True)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    ap.add_argument('--config', required=True)
    ap.add_argument('--B', type=int, required=True)
    ap.add_argument('--T', type=int, required=True)
    ap.add_argument('--threads', type=int, default=1)
    ap.add_argument('--steps', type=int, default=3)
    a = ap.parse_args()
    torch.set_num_threads(a.threads)
    cfg = model_ref.load_config(a.config)
    w = model_ref.as_leaves(model_ref.init_weights(cfg, 0), torch.float32)
    params = list(w.values())
    opt = torch.optim.AdamW(params, lr=1e-4, betas=(0.9, 0.98), eps=1e-8, weight_decay=0.0)
    g = torch.Generator().manual_seed(0)
    tokens = torch.randint(0, cfg['vocab_size'], (a.B, a.T), generator=g)
    targets = torch.randint(0, cfg['vocab_size'], (a.B, a.T), generator=g)

    def step():
        opt.zero_grad(set_to_none=True)
        model_ref.loss(w, cfg, tokens, targets).backward()
        torch.nn.utils.clip_grad_norm_(params, 1.0)
        opt.step()

    step()  # warm-up
    best = float('inf')
    for _ in range(a.steps):
        t0 = time.perf_counter()
        step()
        best = min(best, time.perf_counter() - t0)
    print(json.dumps({'impl': 'torch_ref', 'B': a.B, 'T': a.T, 'threads': a.threads, 'step_s': best,
                      'tokens_per_s': a.B * a.T / best}))


if __name__ == '__main__':
    main()
