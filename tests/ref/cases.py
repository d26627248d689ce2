"""Shared helpers for the fixture generator and the randomised checker: the C tests' case list
(load_cases), build one MTA case (float32 inputs and parameters) from a small spec dict, and
compute the float64 reference output and gradients of sum(out * dout) with tests/ref/mta_ref.py."""
import json
import os

import torch

from mta_ref import mta_forward, PARAM_NAMES

# spec keys: B H T d, pre=(c_q,c_k)|None, pre_head=bool, post=(c_q,c_k)|None, c_h=int|None,
#            gn=bool, gate=bool, depth_scale=bool, layer_id=int|None, H_kv=int|None (k, v heads;
#            grouped-query attention when below H), docs=[lengths]|None (packed documents: doc_ids),
#            docs_first=int (doc_ids' first)

CASES_JSON = os.path.join(os.path.dirname(os.path.abspath(__file__)), 'attn_cases.json')


def load_cases(mode):
    """[(name, spec)] of the C tests' case list (tests/attn_cases.c, written to attn_cases.json by
    attn_cases_json; the test test_attn_cases checks the file) in mode ('fixture', 'grad', ...),
    in the list's order."""
    with open(CASES_JSON) as f:
        cases = json.load(f)
    return [(c['name'], {k: v for k, v in c.items() if k not in ('name', 'modes')})
            for c in cases if mode in c['modes']]


def doc_ids(lens, B, T, first=0):
    """(B, T) ids of documents of the given lengths, cycled from offset first + 3b in sequence b
    until T positions are filled; ids alternate 0, 1 (a document is a run of equal ids), as the C
    tests' tu_docs_cycle."""
    ids = torch.zeros(B, T, dtype=torch.float32)
    for b in range(B):
        i, k, cur = 0, first + 3 * b, 0
        while i < T:
            n = min(lens[k % len(lens)], T - i)
            ids[b, i:i + n] = cur
            i, k, cur = i + n, k + 1, cur ^ 1
    return ids


def make_case(spec, gen):
    """Returns (tensors: dict name -> float32 torch tensor, metadata: dict str -> str)."""
    B, H, T, d = spec['B'], spec['H'], spec['T'], spec['d']
    f32 = torch.float32

    def randn(*shape):
        return torch.randn(*shape, generator=gen, dtype=f32)

    def kernel(size):
        """An identity key-query kernel per head (1 at the current query's centred key) plus noise."""
        c_q, c_k = size
        w = torch.zeros(H, c_q, c_k, dtype=f32)
        w[:, c_q - 1, (c_k - 1) // 2] = 1
        return w + 0.3 * randn(H, c_q, c_k)

    H_kv = spec.get('H_kv') or H
    t = {'q': randn(B, H, T, d), 'k': randn(B, H_kv, T, d), 'v': randn(B, H_kv, T, d)}
    if spec.get('pre'):
        t['w_pre'] = kernel(spec['pre'])
    if spec.get('pre_head'):
        t['w_pre_head'] = torch.eye(H, dtype=f32) + 0.3 * randn(H, H)
    if spec.get('post'):
        t['w_post'] = kernel(spec['post'])
    if spec.get('c_h'):
        c_h = spec['c_h']
        assert H % c_h == 0
        t['w_post_head'] = torch.eye(c_h, dtype=f32).repeat(H // c_h, 1, 1) + 0.3 * randn(H // c_h, c_h, c_h)
    if spec.get('gn'):
        t['gn_weight'] = 1 + 0.3 * randn(d)
    if spec.get('gate'):
        t['gate_w'] = 0.3 * randn(d)
        t['gate_b'] = 0.3 * randn(1)
    t['dout'] = randn(B, H, T, d)
    if spec.get('docs'):
        t['doc'] = doc_ids(spec['docs'], B, T, spec.get('docs_first', 0))
    meta = {}
    if spec.get('depth_scale') or spec.get('layer_id') is not None:
        meta['layer_id'] = str(int(spec.get('layer_id') or 0))
        meta['depth_scale'] = '1' if spec.get('depth_scale') else '0'
    return t, meta


def reference(tensors, meta, dtype=torch.float64):
    """Forward + backward of sum(out*dout) in dtype (float64; float32 to measure a float32 run's
    rounding). Returns dict 'out', 'grad.q', ..., 'grad.<param>' (torch tensors of dtype)."""
    x = {n: v.detach().to(dtype).clone().requires_grad_(n not in ('dout', 'doc'))
         for n, v in tensors.items()}
    params = {n: x[n] for n in PARAM_NAMES if n in x}
    layer_id = int(meta.get('layer_id', '0'))
    depth_scale = meta.get('depth_scale', '0') == '1'
    out = mta_forward(x['q'], x['k'], x['v'], **params, layer_id=layer_id, depth_scale=depth_scale,
                      doc=x.get('doc'))
    (out * x['dout']).sum().backward()
    res = {'out': out.detach()}
    for n in ['q', 'k', 'v'] + list(params):
        res['grad.' + n] = x[n].grad.detach()
    return res


def describe(spec):
    parts = [f"B={spec['B']} H={spec['H']} T={spec['T']} d={spec['d']}"]
    if spec.get('H_kv') and spec['H_kv'] != spec['H']:
        parts.append(f"H_kv={spec['H_kv']}")
    if spec.get('pre'):
        parts.append('pre %dx%d' % tuple(spec['pre']))
    if spec.get('pre_head'):
        parts.append('pre head mix')
    if spec.get('post'):
        parts.append('post %dx%d' % tuple(spec['post']))
    if spec.get('c_h'):
        parts.append(f"post head conv c_h={spec['c_h']}")
    if spec.get('gn'):
        parts.append('group norm')
    if spec.get('depth_scale'):
        parts.append(f"depth scale l={spec.get('layer_id', 0)}")
    elif spec.get('layer_id') is not None:
        parts.append(f"layer_id={spec['layer_id']} depth scale off")
    if spec.get('gate'):
        parts.append('gate')
    if spec.get('docs'):
        parts.append('documents of %s' % '/'.join(map(str, spec['docs'])))
    return ', '.join(parts)
