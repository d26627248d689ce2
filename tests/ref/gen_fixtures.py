#!/usr/bin/env python3
"""Generates tests/fixtures/NAME.safetensors from the independent PyTorch reference.

Regenerate (from the repository root):
    /usr/bin/python3 tests/ref/gen_fixtures.py

Each file holds float32 inputs q (B,H,T,d), k, v (B,H_kv,T,d), the present parameters (w_pre, w_pre_head,
w_post, w_post_head, gn_weight, gate_w, gate_b), dout, and the float64-computed (stored float32)
expect.out, expect.grad.q/k/v, expect.grad.<param> (gradients of sum(out*dout)).
Metadata: description; layer_id and depth_scale ("1"/"0") when used.
The cases: the TC_FIXTURE cases of tests/attn_cases.c (through tests/ref/attn_cases.json).
Deterministic: seed 20240601, one generator advanced case by case in the list's order.
"""
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import st  # noqa: E402
from cases import load_cases, make_case, reference, describe  # noqa: E402

SEED = 20240601


# The fixture cases of the C tests' list (tests/attn_cases.c, TC_FIXTURE), in its order.
CASES = load_cases('fixture')


def main():
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    outdir = os.path.join(root, 'tests', 'fixtures')
    os.makedirs(outdir, exist_ok=True)
    gen = torch.Generator().manual_seed(SEED)
    total = 0
    names = set()
    for name, spec in CASES:
        assert name not in names, name
        names.add(name)
        tensors, meta = make_case(spec, gen)
        exp = reference(tensors, meta)
        data = {n: v.numpy() for n, v in tensors.items()}
        for n, v in exp.items():
            data['expect.' + n] = v.to(torch.float32).numpy()
        meta = dict(meta)
        meta['description'] = describe(spec)
        path = os.path.join(outdir, name + '.safetensors')
        st.save(path, data, meta)
        total += os.path.getsize(path)
        print(f'{name}: {meta["description"]}')
    print(f'{len(CASES)} fixtures, {total} bytes in {outdir}')
    assert total < 2 * 1024 * 1024


if __name__ == '__main__':
    main()
