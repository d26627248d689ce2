#!/usr/bin/env python3
"""Generates tests/fixtures/NAME.safetensors from the independent PyTorch reference.

Regenerate (from the repository root):
    /usr/bin/python3 tests/ref/gen_fixtures.py

Each file holds float32 inputs q (B,H,T,d), k, v (B,H_kv,T,d), the present parameters (w_pre, w_pre_head,
w_post, w_post_head, gn_weight, gate_w, gate_b), dout, and the float64-computed (stored float32)
expect.out, expect.grad.q/k/v, expect.grad.<param> (gradients of sum(out*dout)).
Metadata: description; layer_id and depth_scale ("1"/"0") when used.
Deterministic: seed 20240601, one generator advanced case by case in the order below.
"""
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import st  # noqa: E402
from cases import make_case, reference, describe  # noqa: E402

SEED = 20240601


def C(B=1, H=2, T=13, d=4, **kw):
    s = dict(B=B, H=H, T=T, d=d)
    s.update(kw)
    return s


FULL = dict(pre=(3, 5), pre_head=True, post=(2, 3), gn=True, gate=True)

CASES = [
    # plain attention (every step off)
    ('plain_T7', C(T=7)),
    ('plain_B3_H3_T37_d9', C(B=3, H=3, T=37, d=9)),
    ('plain_T1', C(T=1, d=5)),
    # each step alone
    ('pre_6x11_T13', C(pre=(6, 11))),
    ('pre_3x5_B2_T37', C(B=2, T=37, pre=(3, 5))),
    ('pre_cq1_ck5', C(T=13, pre=(1, 5))),
    ('pre_cq4_ck1', C(T=13, pre=(4, 1))),
    ('pre_1x1', C(T=7, pre=(1, 1))),
    ('pre_T3_2x9', C(T=3, pre=(2, 9))),
    ('prehead_H4', C(H=4, T=13, pre_head=True)),
    ('prehead_H1', C(H=1, T=7, d=5, pre_head=True)),
    ('post_6x11_T13', C(post=(6, 11))),
    ('post_2x3_T70', C(T=70, d=8, post=(2, 3))),
    ('post_cq1_ck7', C(T=13, post=(1, 7))),
    ('post_T3_3x9', C(T=3, post=(3, 9))),
    ('posthead_ch4_H4', C(H=4, T=13, c_h=4)),
    ('posthead_ch2_H4', C(H=4, T=13, c_h=2)),
    ('posthead_ch1_H3', C(H=3, T=7, c_h=1)),
    ('gn_d5', C(T=13, d=5, gn=True)),
    ('gn_depth_l3', C(T=13, gn=True, depth_scale=True, layer_id=3)),
    ('gn_depth_l0', C(T=7, gn=True, depth_scale=True, layer_id=0)),
    ('gn_layer5_depth_off', C(T=7, gn=True, layer_id=5)),
    ('gate_d9', C(T=13, d=9, gate=True)),
    # combinations
    ('pre_prehead_H4', C(H=4, T=13, pre=(3, 5), pre_head=True)),
    ('pre_post_B2_T37', C(B=2, T=37, pre=(6, 11), post=(3, 5))),
    ('post_posthead_ch2', C(H=4, T=13, post=(2, 3), c_h=2)),
    ('prehead_posthead_ch4', C(H=4, T=13, pre_head=True, c_h=4)),
    ('pre_gn', C(T=13, pre=(2, 3), gn=True)),
    ('post_gate_d5', C(T=13, d=5, post=(4, 7), gate=True)),
    ('gn_gate_B2', C(B=2, T=13, gn=True, gate=True)),
    # everything together
    ('all_H4_ch2_T37', C(H=4, T=37, c_h=2, **FULL)),
    ('all_H1_T13', C(H=1, T=13, d=5, c_h=1, **FULL)),
    ('all_B2_H4_ch4_T70_d8', C(B=2, H=4, T=70, d=8, c_h=4, **FULL)),
    ('all_B3_H2_T7_d5', C(B=3, H=2, T=7, d=5, c_h=2, **FULL)),
    ('all_T3_ck9', C(H=2, T=3, d=4, c_h=2, pre=(2, 9), pre_head=True, post=(3, 9), gn=True, gate=True)),
    ('all_1x1', C(H=4, T=13, c_h=2, pre=(1, 1), pre_head=True, post=(1, 1), gn=True, gate=True)),
    ('all_T1', C(H=2, T=1, c_h=2, **FULL)),
    ('all_depth_l3_T13', C(H=4, T=13, c_h=4, depth_scale=True, layer_id=3, **FULL)),
    # 830M-like layer: pre and post 6x11, head mix, head conv over all heads, group norm, gate
    ('mta830m_like_T20', C(H=4, T=20, d=16, pre=(6, 11), pre_head=True, post=(6, 11), c_h=4, gn=True, gate=True)),
    ('mta830m_like_depth_l3_T13', C(H=4, T=13, d=16, pre=(6, 11), pre_head=True, post=(6, 11), c_h=4,
                                    gn=True, gate=True, depth_scale=True, layer_id=3)),
    # grouped-query attention: k, v with H_kv heads (last: the cases above keep their draws)
    ('gqa_H4_kv2_all_T13', C(H=4, T=13, c_h=2, H_kv=2, **FULL)),
    ('gqa_H6_kv1_posthead_ch3', C(H=6, T=11, d=5, post=(2, 3), c_h=3, H_kv=1)),
    # packed documents: ids (B,T), each run of equal ids computed alone (last, likewise)
    ('docs_B2_H4_all_T29', C(B=2, H=4, T=29, d=6, c_h=2, docs=[1, 5, 2, 9, 3, 13], **FULL)),
    ('docs_gqa_H4_kv2_pre_post_T17', C(H=4, T=17, d=5, pre=(3, 5), post=(2, 3), H_kv=2, docs=[6, 1, 4])),
]


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
