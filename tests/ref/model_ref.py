#!/usr/bin/env python3
"""PyTorch reference of the MTA transformer (docs/model.md, docs/spec.md section 3).

Llama-style pre-norm decoder around the MTA attention core of mta_ref.mta_forward:

    x = tok_embeddings[tokens]
    for each layer l:  x += wo(concat_heads(MTA_l(rope(q), rope(k), v)))   q,k,v from RMSNorm(x)
                       x += w2(silu(w1 h) * w3 h),  h = RMSNorm(x)
    logits = RMSNorm(x) @ tok_embeddings^T            (tied; output.weight^T when untied)

RoPE takes Hugging Face's llama3 frequency scaling when the config has "rope_scaling".

Weights are a dict name -> torch tensor with the names and shapes of docs/model.md.  Everything is
plain differentiable torch, computed in the dtype of the weights passed in.

Usage (always with /usr/bin/python3, which has torch):

  model_ref.py init --config CFG.json --seed S --out W.safetensors
  model_ref.py run  --config CFG.json --weights W.safetensors --data D.safetensors --out OUT.safetensors
                    [--steps N] [--lr LR] [--beta1 B1] [--beta2 B2] [--eps EPS]
                    [--weight-decay WD] [--clip C] [--dtype float64|float32]
  model_ref.py selfcheck

`run` reads `tokens` and `targets` (B,T) from D (float32 holding integers; target -1 = ignored) and
writes: `logits` (B,T,V), `loss` (1), `grad.<name>` for every weight (at the initial weights), and
when N > 0: `losses` (N) (the loss before each step), `final.<name>` (the weights after N
AdamW steps) and `adam_den_min.<name>` (per entry, the smallest AdamW denominator sqrt(v_hat) + eps
of the N steps).  One step = loss, backward, global-norm clip (skipped when C <= 0),
torch.optim.AdamW.step() with one parameter group (every weight decayed).
"""
import argparse
import json
import math
import os
import sys

import numpy as np
import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import st  # noqa: E402
from mta_ref import mta_forward  # noqa: E402

MULTIPLE_OF = 256
EOS = 257  # the token that ends a document (src/data/tokenizer.h)

# --------------------------------------------------------------------------------------------
# config


def _mta_defaults(m):
    """Fill absent MTA keys with 'off' values."""
    out = dict(qk_layers=[], pre_cq=0, pre_ck=0, post_cq=0, post_ck=0, pre_head_mix=False,
               post_ch=0, group_norm=False, depth_scale=False, gate=False)
    out.update(m)
    return out


def default_hidden_dim(dim):
    """multiple_of * ceil(int(2*4*dim/3) / multiple_of), multiple_of = 256."""
    h = int(2 * 4 * dim / 3)
    return MULTIPLE_OF * ((h + MULTIPLE_OF - 1) // MULTIPLE_OF)


def normalize_config(cfg):
    """Returns a copy with defaults applied (hidden_dim, rope_theta, norm_eps, mta keys), validated."""
    cfg = dict(cfg)
    if cfg.get('hidden_dim') is None:
        cfg['hidden_dim'] = default_hidden_dim(cfg['dim'])
    cfg.setdefault('rope_theta', 100000.0)
    cfg.setdefault('norm_eps', 1e-5)
    cfg.setdefault('attn_dropout', 0.0)
    cfg.setdefault('tie_embeddings', True)
    cfg.setdefault('rope_scaling', None)
    assert cfg['rope_scaling'] is None or cfg['rope_scaling']['rope_type'] == 'llama3'
    cfg['mta'] = None if cfg.get('mta') is None else _mta_defaults(cfg['mta'])
    D, H = cfg['dim'], cfg['n_heads']
    assert D % H == 0 and (D // H) % 2 == 0, 'dim must split into heads of even size'
    if not cfg.get('n_kv_heads'):  # 0 or absent: as many kv heads as query heads
        cfg['n_kv_heads'] = H
    assert H % cfg['n_kv_heads'] == 0, 'n_kv_heads must divide n_heads'
    cfg['doc_mask'] = int(cfg.get('doc_mask', 0))
    assert cfg['doc_mask'] in (0, 1), 'doc_mask must be 0 or 1'
    assert not cfg['doc_mask'] or cfg['vocab_size'] > EOS, 'doc_mask needs the EOS token in the vocabulary'
    m = cfg['mta']
    if m is not None:
        for l in m['qk_layers']:
            assert 0 <= l < cfg['n_layers'], f'qk layer {l} out of range'
        for ck in ('pre_ck', 'post_ck'):
            assert m[ck] == 0 or m[ck] % 2 == 1, f'{ck} must be odd'
        assert m['post_ch'] == 0 or H % m['post_ch'] == 0, 'post_ch must divide n_heads'
    return cfg


def load_config(path):
    with open(path) as f:
        return normalize_config(json.load(f))


def _has_pre(m):
    return m['pre_cq'] > 0 and m['pre_ck'] > 0


def _has_post(m):
    return m['post_cq'] > 0 and m['post_ck'] > 0


def weight_shapes(cfg):
    """Ordered dict name -> shape of every weight of the model (docs/model.md table)."""
    cfg = normalize_config(cfg)
    D, H, V, Fh = cfg['dim'], cfg['n_heads'], cfg['vocab_size'], cfg['hidden_dim']
    d = D // H
    KV = cfg['n_kv_heads'] * d
    m = cfg['mta']
    s = {'tok_embeddings.weight': (V, D)}
    for l in range(cfg['n_layers']):
        p = f'layers.{l}.'
        s[p + 'attention_norm.weight'] = (D,)
        for w in ('wq', 'wk', 'wv', 'wo'):
            s[p + f'attention.{w}.weight'] = (KV, D) if w in ('wk', 'wv') else (D, D)
        if m is not None:
            a = p + 'attention.mta.'
            if l in m['qk_layers'] and _has_pre(m):
                s[a + 'w_pre'] = (H, m['pre_cq'], m['pre_ck'])
            if l in m['qk_layers'] and _has_post(m):
                s[a + 'w_post'] = (H, m['post_cq'], m['post_ck'])
            if m['pre_head_mix']:
                s[a + 'w_pre_head'] = (H, H)
            if m['post_ch'] > 0:
                c = m['post_ch']
                s[a + 'w_post_head'] = (H // c, c, c)
            if m['group_norm']:
                s[a + 'gn_weight'] = (d,)
            if m['gate']:
                s[a + 'gate_w'] = (d,)
                s[a + 'gate_b'] = (1,)
        s[p + 'ffn_norm.weight'] = (D,)
        s[p + 'feed_forward.w1.weight'] = (Fh, D)
        s[p + 'feed_forward.w3.weight'] = (Fh, D)
        s[p + 'feed_forward.w2.weight'] = (D, Fh)
    s['norm.weight'] = (D,)
    if not cfg['tie_embeddings']:
        s['output.weight'] = (V, D)
    return s


# --------------------------------------------------------------------------------------------
# init


def _trunc_normal(shape, std):
    t = torch.empty(shape, dtype=torch.float32)
    torch.nn.init.trunc_normal_(t, mean=0.0, std=std, a=-3 * std, b=3 * std)
    return t


def init_weights(cfg, seed):
    """Spec section 3 init plus the MTA identity init of section 2 (float32 tensors).

    Truncated normal (cut at +-3 std) std dim^-0.5 for tok_embeddings, wq, wk, wv, wo, w1, w3 and
    the gate w; std hidden^-0.5 for w2; norms, gn 1; conv kernels 1 at [c_q-1, (c_k-1)/2];
    head mix / head conv identity; gate b 0.  Drawn in weight_shapes order with torch.manual_seed."""
    cfg = normalize_config(cfg)
    torch.manual_seed(seed)
    std, std2 = cfg['dim'] ** -0.5, cfg['hidden_dim'] ** -0.5
    w = {}
    for name, shape in weight_shapes(cfg).items():
        leaf = name.rsplit('.', 1)[-1] if '.mta.' in name else name.rsplit('.', 2)[-2]
        if name.endswith('norm.weight') or leaf == 'gn_weight':
            t = torch.ones(shape)
        elif leaf in ('w_pre', 'w_post'):
            t = torch.zeros(shape)
            t[:, shape[1] - 1, (shape[2] - 1) // 2] = 1
        elif leaf == 'w_pre_head':
            t = torch.eye(shape[0])
        elif leaf == 'w_post_head':
            t = torch.eye(shape[1]).repeat(shape[0], 1, 1)
        elif leaf == 'gate_b':
            t = torch.zeros(shape)
        elif leaf == 'w2':
            t = _trunc_normal(shape, std2)
        else:  # tok_embeddings, output, wq, wk, wv, wo, w1, w3, gate_w
            assert leaf in ('tok_embeddings', 'output', 'wq', 'wk', 'wv', 'wo', 'w1', 'w3', 'gate_w'), name
            t = _trunc_normal(shape, std)
        w[name] = t
    return w


# --------------------------------------------------------------------------------------------
# model


def rms_norm(x, w, eps):
    return x / torch.sqrt(x.pow(2).mean(dim=-1, keepdim=True) + eps) * w


def llama3_inv_freq(inv_freq, rs):
    """transformers 4.44 modeling_rope_utils._compute_llama3_parameters, on float64."""
    factor, low, high = rs['factor'], rs['low_freq_factor'], rs['high_freq_factor']
    old_context_len = rs['original_max_position_embeddings']
    low_freq_wavelen = old_context_len / low
    high_freq_wavelen = old_context_len / high
    wavelen = 2 * math.pi / inv_freq
    inv_freq_llama = torch.where(wavelen > low_freq_wavelen, inv_freq / factor, inv_freq)
    smooth_factor = (old_context_len / wavelen - low) / (high - low)
    smoothed_inv_freq = (1 - smooth_factor) * inv_freq_llama / factor + smooth_factor * inv_freq_llama
    is_medium_freq = ~(wavelen < high_freq_wavelen) * ~(wavelen > low_freq_wavelen)
    return torch.where(is_medium_freq, smoothed_inv_freq, inv_freq_llama)


def rope(x, theta, scaling=None):
    """Rotate adjacent pairs (2i, 2i+1) of x (B,H,T,d) by angle t * theta^(-2i/d) (llama3-scaled)."""
    T, d = x.shape[-2], x.shape[-1]
    freq = theta ** (-torch.arange(0, d, 2, dtype=torch.float64) / d)          # (d/2,)
    if scaling is not None:
        freq = llama3_inv_freq(freq, scaling)
    ang = torch.arange(T, dtype=torch.float64).view(T, 1) * freq.view(1, -1)   # (T, d/2)
    cos, sin = torch.cos(ang).to(x.dtype), torch.sin(ang).to(x.dtype)
    x0, x1 = x[..., 0::2], x[..., 1::2]
    y0 = x0 * cos - x1 * sin
    y1 = x0 * sin + x1 * cos
    return torch.stack((y0, y1), dim=-1).flatten(-2)


def attention(weights, cfg, l, x):
    """Attention block of layer l on normalised input x (B,T,D) -> (B,T,D)."""
    B, T, D = x.shape
    H, Hkv = cfg['n_heads'], cfg['n_kv_heads']
    d = D // H
    p = f'layers.{l}.attention.'

    def heads(y, n):  # (B,T,n*d) -> (B,n,T,d); feature h*d+e is head h, element e
        return y.view(B, T, n, d).transpose(1, 2)

    q = rope(heads(x @ weights[p + 'wq.weight'].t(), H), cfg['rope_theta'], cfg['rope_scaling'])
    k = rope(heads(x @ weights[p + 'wk.weight'].t(), Hkv), cfg['rope_theta'], cfg['rope_scaling'])
    v = heads(x @ weights[p + 'wv.weight'].t(), Hkv)
    # grouped-query attention as the authors' repeat_kv: kv head j serves query heads
    # j*H/Hkv .. (j+1)*H/Hkv - 1 (repeat_interleave over heads, after the projections and RoPE)
    k = k.repeat_interleave(H // Hkv, dim=1)
    v = v.repeat_interleave(H // Hkv, dim=1)
    m = cfg['mta']
    kw = {}
    if m is not None:  # pass exactly the MTA parameters this layer has
        for n in ('w_pre', 'w_pre_head', 'w_post', 'w_post_head', 'gn_weight', 'gate_w', 'gate_b'):
            if p + 'mta.' + n in weights:
                kw[n] = weights[p + 'mta.' + n]
        kw['depth_scale'] = bool(m['depth_scale'])
    o = mta_forward(q, k, v, layer_id=l, **kw)                 # (B,H,T,d)
    o = o.transpose(1, 2).reshape(B, T, D)
    return o @ weights[p + 'wo.weight'].t()


def feed_forward(weights, l, x):
    p = f'layers.{l}.feed_forward.'
    return (F.silu(x @ weights[p + 'w1.weight'].t()) * (x @ weights[p + 'w3.weight'].t())) \
        @ weights[p + 'w2.weight'].t()


def documents(row):
    """The documents of a row of token ids as (start, end) ranges: one starts at 0 and after each EOS."""
    starts = [0] + [t + 1 for t in range(len(row) - 1) if row[t] == EOS]
    return list(zip(starts, starts[1:] + [len(row)]))


def forward(weights, cfg, tokens):
    """tokens (B,T) long -> logits (B,T,V), in the weights' dtype.

    With doc_mask, each document of a row runs through the model alone, as a sequence of its own
    (positions from 0), and the row's logits are theirs side by side."""
    cfg = normalize_config(cfg)
    if not cfg['doc_mask']:
        return _forward(weights, cfg, tokens)
    rows = []
    for b in range(tokens.shape[0]):
        rows.append(torch.cat([_forward(weights, cfg, tokens[b:b + 1, s:e])
                               for s, e in documents(tokens[b].tolist())], dim=1))
    return torch.cat(rows, dim=0)


def _forward(weights, cfg, tokens):
    eps = cfg['norm_eps']
    emb = weights['tok_embeddings.weight']
    x = emb[tokens]
    for l in range(cfg['n_layers']):
        p = f'layers.{l}.'
        x = x + attention(weights, cfg, l, rms_norm(x, weights[p + 'attention_norm.weight'], eps))
        x = x + feed_forward(weights, l, rms_norm(x, weights[p + 'ffn_norm.weight'], eps))
    out = emb if cfg['tie_embeddings'] else weights['output.weight']
    return rms_norm(x, weights['norm.weight'], eps) @ out.t()


def loss(weights, cfg, tokens, targets):
    """Mean cross-entropy over targets != -1."""
    logits = forward(weights, cfg, tokens)
    return F.cross_entropy(logits.reshape(-1, logits.shape[-1]), targets.reshape(-1), ignore_index=-1)


# --------------------------------------------------------------------------------------------
# training helpers


def as_leaves(weights, dtype):
    """Copies of the weights in dtype, as leaf tensors requiring grad (same names/order)."""
    return {n: t.detach().to(dtype).clone().requires_grad_(True) for n, t in weights.items()}


def grads_at(weights, cfg, tokens, targets):
    """(loss, logits, dict name -> grad) at the given weights (leaves made internally)."""
    w = as_leaves(weights, next(iter(weights.values())).dtype)
    logits = forward(w, cfg, tokens)
    L = F.cross_entropy(logits.reshape(-1, logits.shape[-1]), targets.reshape(-1), ignore_index=-1)
    L.backward()
    return L.detach(), logits.detach(), {n: t.grad.detach().clone() for n, t in w.items()}


def train(weights, cfg, tokens, targets, steps, lr, betas=(0.9, 0.98), eps=1e-8, weight_decay=0.0,
          clip=1.0):
    """N AdamW steps on a single batch. Returns (losses (N,), final weights dict, smallest
    denominators dict).

    Step k: loss at the current weights (recorded), backward, global-norm clip of all gradients
    to `clip` (none when clip <= 0), torch.optim.AdamW step (decoupled decay on every weight).
    A weight's update is lr * m_hat / (sqrt(v_hat) + eps); the third dict holds, per weight entry,
    the smallest sqrt(v_hat) + eps of the N steps: an error e in its gradient moves its update by
    up to about lr * e / that (check_model_against_torch.py's amplification bound)."""
    w = as_leaves(weights, next(iter(weights.values())).dtype)
    params = list(w.values())
    opt = torch.optim.AdamW(params, lr=lr, betas=betas, eps=eps, weight_decay=weight_decay)
    losses = []
    den_min = {n: torch.full_like(t, math.inf) for n, t in w.items()}
    for k in range(1, steps + 1):
        opt.zero_grad(set_to_none=True)
        L = loss(w, cfg, tokens, targets)
        L.backward()
        losses.append(float(L))
        if clip > 0:
            torch.nn.utils.clip_grad_norm_(params, clip)
        opt.step()
        for n, p in w.items():  # torch's own denominator (torch/optim/adamw.py)
            den = opt.state[p]['exp_avg_sq'].sqrt() / math.sqrt(1 - betas[1] ** k) + eps
            den_min[n] = torch.minimum(den_min[n], den)
    final = {n: t.detach() for n, t in w.items()}
    return torch.tensor(losses, dtype=torch.float64), final, den_min


# --------------------------------------------------------------------------------------------
# CLI


def _np32(t):
    return t.detach().to(torch.float32).cpu().numpy()


def cmd_init(a):
    cfg = load_config(a.config)
    w = init_weights(cfg, a.seed)
    st.save(a.out, {n: t.numpy() for n, t in w.items()})


def cmd_run(a):
    cfg = load_config(a.config)
    dtype = {'float64': torch.float64, 'float32': torch.float32}[a.dtype]
    raw, _ = st.load(a.weights)
    expect = weight_shapes(cfg)
    missing = set(expect) - set(raw)
    extra = set(raw) - set(expect)
    if missing or extra:
        sys.exit(f'weights do not match config: missing {sorted(missing)}, unexpected {sorted(extra)}')
    for n, s in expect.items():
        if tuple(raw[n].shape) != tuple(s):
            sys.exit(f'{n}: shape {raw[n].shape}, expected {s}')
    weights = {n: torch.from_numpy(raw[n]).to(dtype) for n in expect}
    data, _ = st.load(a.data)
    tokens = torch.from_numpy(np.rint(data['tokens'])).long()
    targets = torch.from_numpy(np.rint(data['targets'])).long()
    assert tokens.shape == targets.shape and tokens.dim() == 2, (tokens.shape, targets.shape)

    L, logits, grads = grads_at(weights, cfg, tokens, targets)
    out = {'logits': _np32(logits), 'loss': _np32(L.reshape(1))}
    for n, g in grads.items():
        out['grad.' + n] = _np32(g)
    if a.steps > 0:
        losses, final, den_min = train(weights, cfg, tokens, targets, a.steps, a.lr, (a.beta1, a.beta2),
                                       a.eps, a.weight_decay, a.clip)
        out['losses'] = _np32(losses)
        for n, t in final.items():
            out['final.' + n] = _np32(t)
            out['adam_den_min.' + n] = _np32(den_min[n])
    st.save(a.out, out)
    print(f'loss {float(L):.9g}' + (f'  after {a.steps} steps: {out["losses"][-1]:.9g} (pre-step)'
                                    if a.steps > 0 else ''))


# --------------------------------------------------------------------------------------------
# self-check


def _perturb(w, scale, gen):
    """Random perturbation of every MTA weight (so kernels are not identity)."""
    out = dict(w)
    for n, t in w.items():
        if '.mta.' in n:
            out[n] = t + scale * torch.randn(t.shape, generator=gen, dtype=t.dtype)
    return out


def selfcheck():
    ok = True

    def report(name, cond):
        nonlocal ok
        print(('ok   ' if cond else 'FAIL ') + name)
        ok &= bool(cond)

    dt = torch.float64
    # The checks below compare float64 computations that sum in other orders (u = 2^-53 = 1.1e-16):
    # along a tiny model's chain the sums' lengths add up to a few hundred (tests/model_tol.h
    # counts them), so they agree within 2u*N ~ 1e-13 of the largest value (logits and losses of
    # these models are of order one). EXACT = 1e-12 is 10 times that; a wrong index or a missing
    # term moves them by 1e-3 or more.
    EXACT = 1e-12
    gen = torch.Generator().manual_seed(1)
    here = os.path.dirname(os.path.abspath(__file__))
    cfg_b = load_config(os.path.join(here, 'configs', 'tiny_baseline.json'))
    cfg_m = load_config(os.path.join(here, 'configs', 'tiny_mta.json'))
    report('hidden_dim default (dim 64 -> 256, 1536 -> 4096)',
           default_hidden_dim(64) == 256 and default_hidden_dim(1536) == 4096)

    # 1. identity MTA (kernels identity, no gn/gate) == baseline with the same other weights
    cfg_id = dict(cfg_m, mta=dict(cfg_m['mta'], qk_layers=[0, 1], group_norm=False, gate=False))
    cfg_id = normalize_config(cfg_id)
    w_id = {n: t.to(dt) for n, t in init_weights(cfg_id, 0).items()}
    w_base = {n: t for n, t in w_id.items() if '.mta.' not in n}
    report('baseline weight names == identity-MTA names minus mta.*', set(w_base) == set(weight_shapes(cfg_b)))
    tokens = torch.randint(0, cfg_b['vocab_size'], (2, 11), generator=gen)
    lb, lm = forward(w_base, cfg_b, tokens), forward(w_id, cfg_id, tokens)
    report('identity MTA model == baseline model', torch.allclose(lb, lm, atol=EXACT, rtol=0))

    # 2. causality: changing tokens at positions >= t leaves logits before t unchanged (full MTA)
    w_m = _perturb({n: t.to(dt) for n, t in init_weights(cfg_m, 3).items()}, 0.3, gen)
    t0 = 6
    tok2 = tokens.clone()
    tok2[:, t0:] = (tok2[:, t0:] + 1 + torch.randint(0, cfg_m['vocab_size'] - 1, tok2[:, t0:].shape,
                                                     generator=gen)) % cfg_m['vocab_size']
    la, lb2 = forward(w_m, cfg_m, tokens), forward(w_m, cfg_m, tok2)
    report('causality: logits before t unchanged', torch.allclose(la[:, :t0], lb2[:, :t0], atol=EXACT, rtol=0))
    # finite: a NaN is never allclose, so it would pass as a change; changed by more than
    # allclose's default (1e-8 + 1e-5 |x|, far above rounding): new tokens move logits by O(0.1)
    report('causality: logits from t changed', not torch.allclose(la[:, t0:], lb2[:, t0:])
           and bool(torch.isfinite(la).all() and torch.isfinite(lb2).all()))

    # 3. loss ignores -1 and equals a manual mean CE
    targets = torch.randint(0, cfg_m['vocab_size'], tokens.shape, generator=gen)
    targets[0, :3] = -1
    L = loss(w_m, cfg_m, tokens, targets)
    lp = torch.log_softmax(la, -1)
    keep = targets >= 0
    manual = -lp[keep, :].gather(-1, targets[keep].view(-1, 1)).mean()
    report('loss == manual mean CE over targets != -1', abs(float(L) - float(manual)) < EXACT)

    # 4. RoPE: position 0 untouched, norms preserved, relative-position property of q.k
    x = torch.randn(1, 1, 9, 8, dtype=dt, generator=gen)
    y = rope(x, 1e4)
    # a rotation: position 0 exactly (cos 0 = 1, sin 0 = 0), norms within a few u of |x| ~ 3
    report('rope: t=0 identity, norm preserved',
           torch.allclose(y[..., 0, :], x[..., 0, :], atol=EXACT, rtol=0)
           and torch.allclose(y.norm(dim=-1), x.norm(dim=-1), atol=EXACT, rtol=0))
    qv, kv = torch.randn(8, dtype=dt, generator=gen), torch.randn(8, dtype=dt, generator=gen)
    Q, K = rope(qv.expand(1, 1, 9, 8).contiguous(), 1e4), rope(kv.expand(1, 1, 9, 8).contiguous(), 1e4)
    report('rope: q_i.k_j depends only on i-j', abs(float(Q[0, 0, 5] @ K[0, 0, 2] - Q[0, 0, 7] @ K[0, 0, 4])) < EXACT)
    # explicit pair rotation for one element: pair i=1 of d=8 at t=3
    ang = 3 * 1e4 ** (-2 / 8)
    e0 = x[0, 0, 3, 2] * math.cos(ang) - x[0, 0, 3, 3] * math.sin(ang)
    e1 = x[0, 0, 3, 2] * math.sin(ang) + x[0, 0, 3, 3] * math.cos(ang)
    report('rope: explicit pair (2,3) rotation', abs(float(y[0, 0, 3, 2] - e0)) < EXACT
           and abs(float(y[0, 0, 3, 3] - e1)) < EXACT)

    # 5. gradcheck of a tiny full-MTA model in float64, w.r.t. every weight
    cfg_t = normalize_config({'dim': 8, 'n_layers': 2, 'n_heads': 2, 'vocab_size': 7, 'hidden_dim': 12,
                              'rope_theta': 10000.0,
                              'mta': {'qk_layers': [1], 'pre_cq': 2, 'pre_ck': 3, 'post_cq': 2, 'post_ck': 3,
                                      'pre_head_mix': True, 'post_ch': 2, 'group_norm': True,
                                      'depth_scale': True, 'gate': True}})
    w_t = _perturb({n: t.to(dt) for n, t in init_weights(cfg_t, 5).items()}, 0.3, gen)
    names = list(w_t)
    tk = torch.randint(0, 7, (1, 5), generator=gen)
    tg = torch.randint(0, 7, (1, 5), generator=gen)
    tg[0, 1] = -1
    leaves = [w_t[n].clone().requires_grad_(True) for n in names]
    f = lambda *xs: loss(dict(zip(names, xs)), cfg_t, tk, tg)
    # gradcheck's own float64 defaults: central differences at eps 1e-6 (truncation eps^2 ~ 1e-12,
    # rounding u/eps ~ 1e-10), atol 1e-5 + rtol 1e-3 on each gradient entry
    report('gradcheck tiny MTA model (float64, all weights)', torch.autograd.gradcheck(f, leaves))

    # 6. training helper: loss goes down, and train() with 0 steps leaves weights alone
    losses, final, _ = train(w_m, cfg_m, tokens, targets, 10, 1e-2, weight_decay=0.05, clip=1.0)
    report('10 AdamW steps reduce the loss', float(losses[-1]) < float(losses[0]))
    report('losses[0] == loss at initial weights', abs(float(losses[0]) - float(L)) < EXACT)

    print('selfcheck', 'OK' if ok else 'FAILED')
    return ok


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest='cmd', required=True)
    pi = sub.add_parser('init', help='write init_weights(config, seed)')
    pi.add_argument('--config', required=True)
    pi.add_argument('--seed', type=int, default=0)
    pi.add_argument('--out', required=True)
    pr = sub.add_parser('run', help='logits, loss, grads (+ N AdamW steps)')
    pr.add_argument('--config', required=True)
    pr.add_argument('--weights', required=True)
    pr.add_argument('--data', required=True)
    pr.add_argument('--out', required=True)
    pr.add_argument('--steps', type=int, default=0)
    pr.add_argument('--lr', type=float, default=1e-3)
    pr.add_argument('--beta1', type=float, default=0.9)
    pr.add_argument('--beta2', type=float, default=0.98)
    pr.add_argument('--eps', type=float, default=1e-8)
    pr.add_argument('--weight-decay', type=float, default=0.0)
    pr.add_argument('--clip', type=float, default=1.0, help='global grad-norm clip; <= 0 disables')
    pr.add_argument('--dtype', choices=('float64', 'float32'), default='float64')
    sub.add_parser('selfcheck', help='internal consistency checks; prints OK')
    a = ap.parse_args(argv)
    if a.cmd == 'init':
        cmd_init(a)
    elif a.cmd == 'run':
        cmd_run(a)
    else:
        return 0 if selfcheck() else 1
    return 0


if __name__ == '__main__':
    sys.exit(main())
