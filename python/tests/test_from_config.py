"""MultiTokenAttention.from_config: the authors' config block (facebookresearch/RAM, projects/mta,
MTATransformerArgs, the `mta:` keys of configs/*.yaml) -> one layer's attention core. The 830M, 300M
and toy configurations (docs/spec.md section 3), their defaults (a 1x1 key-query kernel), the
non-MTA-layer rule, their weight names loading strictly, the refused keys, the gate bias option."""
import dataclasses
import math
import types
from typing import Optional

import pytest
import torch

import mtac
from mtac.torch import MultiTokenAttention
from mta_ref import mta_forward, plain_attention
from test_module import RefCore, module_sums, perturb, qkv
from tol import chain_bound, close, scale_of

# The `mta:` blocks of the authors' configs/830M_mta.yaml, 300M_mta.yaml (mta_layers apart) and
# toy_task/configs/find_block_mta.yaml, as written there.
MTA_830M = dict(use_mta=True, pre_sm_linear_head=True, query_kernel_size=6, key_kernel_size=11, head_kernel_size=16,
                after_sm_query_kernel_size=6, after_sm_key_kernel_size=11, init_method='identity', pad_key='both',
                mta_layers='2,6,10,14,18,22', group_norm=True, layer_norm_rescale=False, add_gating=True,
                gate_1d=True)
MTA_300M = dict(MTA_830M, mta_layers='2,6,10,14,18')
MTA_TOY = dict(use_mta=True, query_kernel_size=2, key_kernel_size=9, init_method='identity', pad_key='both')


@dataclasses.dataclass
class MTATransformerArgs:
    """A stand-in for the authors' dataclass: its fields and defaults."""
    use_mta: Optional[bool] = False
    query_kernel_size: Optional[int] = 1
    key_kernel_size: Optional[int] = 1
    pad_key: str = 'both'
    mta_layers: Optional[str] = None
    after_sm_query_kernel_size: Optional[int] = None
    after_sm_key_kernel_size: Optional[int] = None
    init_method: str = 'identity'
    head_kernel_size: Optional[int] = None
    group_norm: bool = False
    layer_norm_rescale: bool = False
    curse_norm: bool = False
    pre_sm_linear_head: bool = False
    post_sm_linear_head: bool = False
    add_gating: bool = False
    gate_1d: bool = True


def authors_shapes(c, H, d, mta_layer):
    """The weight names and shapes of the authors' attention core (without wq, wk, wv, wo) for a
    config block c, read off their Attention: the key-query kernels only in an MTA layer."""
    a = dataclasses.asdict(MTATransformerArgs(**c))
    s = {}
    heads = a['head_kernel_size'] is not None or a['pre_sm_linear_head'] or a['post_sm_linear_head']
    if a['use_mta'] and (mta_layer or heads):
        if mta_layer and a['query_kernel_size'] and a['key_kernel_size']:
            s['mta_kernel'] = (H, 1, a['query_kernel_size'], a['key_kernel_size'])
        if mta_layer and a['after_sm_query_kernel_size'] and a['after_sm_key_kernel_size']:
            s['mta_kernel_after_sm'] = (H, 1, a['after_sm_query_kernel_size'], a['after_sm_key_kernel_size'])
        if a['pre_sm_linear_head']:
            s['wpsm.weight'] = (H, H)
        if a['head_kernel_size']:
            s['head_kernel'] = (H // a['head_kernel_size'], a['head_kernel_size'], a['head_kernel_size'])
        elif a['post_sm_linear_head']:
            s['wposm.weight'] = (H, H)
    if a['group_norm']:
        s['subln.weight'] = (d,)
    if a['add_gating']:
        s['gate.weight'], s['gate.bias'] = (1, d), (1,)
    return s


def shapes(m):
    return {n: tuple(p.shape) for n, p in m.state_dict().items()}


@pytest.mark.parametrize('name, cfg, n_layers, H, d, mta_layers, extra', [
    # extra: the parameters the MTA blocks add over the baseline (spec section 3: 876,583,320 -
    # 876,553,728 for the 830M model; the same arithmetic for 300M: 20 x (256+256+64+65) + 5 x 2112).
    ('830M', MTA_830M, 24, 16, 96, {2, 6, 10, 14, 18, 22}, 876583320 - 876553728),
    ('300M', MTA_300M, 20, 16, 64, {2, 6, 10, 14, 18}, 23380),
    ('toy', MTA_TOY, 4, 2, 128, {0, 1, 2, 3}, 4 * 2 * 2 * 9),
])
def test_authors_configurations(name, cfg, n_layers, H, d, mta_layers, extra):
    total = 0
    for layer in range(n_layers):
        m = MultiTokenAttention.from_config(cfg, n_heads=H, head_dim=d, layer_id=layer, dim=H * d)
        assert shapes(m) == authors_shapes(cfg, H, d, layer in mta_layers), (name, layer)
        assert m.layer_id == layer and not m.layer_norm_rescale
        total += sum(p.numel() for p in m.parameters())
        if name == '830M':
            qk = layer in mta_layers
            assert (m.mta_kernel is not None) == qk and (m.mta_kernel_after_sm is not None) == qk
            assert m.wpsm is not None and m.head_kernel.shape == (1, 16, 16) and m.subln is not None
            assert m.gate is not None and m.wposm is None
    assert total == extra


def test_830m_layer_computes_as_reference():
    """A small-T run of an 830M MTA layer and a non-MTA layer (d reduced to 8), perturbed weights:
    the module equals the reference core on the same weights."""
    for layer in (2, 3):
        m = MultiTokenAttention.from_config(MTA_830M, n_heads=16, head_dim=8, layer_id=layer)
        perturb(m, 0.1, seed=layer)
        q, k, v = qkv(B=1, H=16, T=13, d=8)
        exp = RefCore(m)(q, k, v)
        # Both in float32, each within chain_bound * scale of the exact values (tol.py).
        assert close(m(q, k, v), exp, 2 * chain_bound(module_sums(m, 1, 13)), scale_of(exp))


def test_toy_dropout_and_model_keywords():
    m = MultiTokenAttention.from_config(MTA_TOY, n_heads=2, head_dim=128, layer_id=3, dropout=0.1, dim=256,
                                        init_std=0.02, threads=1, backend='reference')
    assert (m.dropout, m.dim, m.init_std, m.threads, m.backend) == (0.1, 256, 0.02, 1, 'reference')
    m.eval()
    q, k, v = qkv(H=2, d=128)
    exp = plain_attention(q, k, v)  # identity kernel, eval: no dropout; both float32 (tol.py)
    assert close(m(q, k, v), exp, 2 * chain_bound(module_sums(m, 2, 23)), scale_of(exp))


def test_config_objects():
    """A dict, the authors' dataclass and an object with attributes give the same layer."""
    ref = shapes(MultiTokenAttention.from_config(MTA_830M, n_heads=16, head_dim=8, layer_id=6))
    assert shapes(MultiTokenAttention.from_config(MTATransformerArgs(**MTA_830M), n_heads=16, head_dim=8,
                                                  layer_id=6)) == ref
    assert shapes(MultiTokenAttention.from_config(types.SimpleNamespace(**MTA_830M), n_heads=16, head_dim=8,
                                                  layer_id=6)) == ref
    # mta_layers as their comma-separated string, an int or a list.
    for layers in ('6', 6, [2, 6], (6,)):
        assert shapes(MultiTokenAttention.from_config(dict(MTA_830M, mta_layers=layers), n_heads=16, head_dim=8,
                                                      layer_id=6)) == ref


def test_defaults_1x1():
    """Their defaults: query_kernel_size = key_kernel_size = 1, so a plain use_mta layer (and the
    module without kernel arguments) has a 1x1 mta_kernel, initialised to 1: plain attention
    exactly, on both backends, and a real parameter with a gradient."""
    for m in (MultiTokenAttention(4, 8), MultiTokenAttention.from_config({'use_mta': True}, n_heads=4, head_dim=8),
              MultiTokenAttention.from_config(MTATransformerArgs(use_mta=True), n_heads=4, head_dim=8)):
        assert shapes(m) == {'mta_kernel': (4, 1, 1, 1)} and (m.mta_kernel == 1).all()
    q, k, v = qkv()
    for backend in mtac._lib.host_backends():
        one = MultiTokenAttention(4, 8, backend=backend)
        off = MultiTokenAttention(4, 8, query_kernel_size=None, backend=backend)
        assert shapes(off) == {}
        assert torch.equal(one(q, k, v), off(q, k, v))
        exp = plain_attention(q, k, v)  # both float32 (tol.py)
        assert close(one(q, k, v), exp, 2 * chain_bound(module_sums(one, 2, 23)), scale_of(exp))
        # The gradient of the 1x1 kernel: sum over (i, j <= i) of dS1 * S, against the reference.
        with torch.no_grad():
            one.mta_kernel.mul_(torch.tensor([0.5, 1.0, 1.5, 2.0]).view(4, 1, 1, 1))
        out = one(q, k, v)
        out.square().sum().backward()
        w = one.mta_kernel.detach().clone().requires_grad_()
        mta_forward(q, k, v, w_pre=w[:, 0]).square().sum().backward()
        # The chain's sums and the loss's, sum of out^2 over B H T d (tol.py).
        bound = 2 * chain_bound(module_sums(one, 2, 23) + [2 * 4 * 23 * 8])
        assert close(one.mta_kernel.grad, w.grad, bound, scale_of(w.grad))
    # A kernel exists only when both sizes are given (their rule).
    assert shapes(MultiTokenAttention(4, 8, key_kernel_size=None)) == {}
    assert shapes(MultiTokenAttention(4, 8, after_sm_query_kernel_size=3)) == {'mta_kernel': (4, 1, 1, 1)}
    assert shapes(MultiTokenAttention(4, 8, after_sm_query_kernel_size=3, after_sm_key_kernel_size=5)) == {
        'mta_kernel': (4, 1, 1, 1), 'mta_kernel_after_sm': (4, 1, 3, 5)}


def test_non_mta_layers():
    H, d = 4, 8
    # A layer outside mta_layers with a head step: head mixing, head convolution, norm and gate,
    # no key-query convolution.
    cfg = dict(MTA_830M, head_kernel_size=2, mta_layers='1')
    m = MultiTokenAttention.from_config(cfg, n_heads=H, head_dim=d, layer_id=0)
    assert shapes(m) == {'head_kernel': (2, 2, 2), 'wpsm.weight': (4, 4), 'subln.weight': (8,), 'gate.weight': (1, 8),
                         'gate.bias': (1,)}
    m = MultiTokenAttention.from_config(dict(cfg, pre_sm_linear_head=False, head_kernel_size=None,
                                             post_sm_linear_head=True), n_heads=H, head_dim=d, layer_id=0)
    assert shapes(m) == {'wposm.weight': (4, 4), 'subln.weight': (8,), 'gate.weight': (1, 8), 'gate.bias': (1,)}
    # Without a head step it is regular attention, with the group norm and gate still on.
    plain = dict(use_mta=True, query_kernel_size=3, key_kernel_size=5, mta_layers='1', group_norm=True,
                 layer_norm_rescale=True, add_gating=True)
    m = MultiTokenAttention.from_config(plain, n_heads=H, head_dim=d, layer_id=0)
    assert shapes(m) == {'subln.weight': (8,), 'gate.weight': (1, 8), 'gate.bias': (1,)} and m.layer_norm_rescale
    assert 'mta_kernel' in shapes(MultiTokenAttention.from_config(plain, n_heads=H, head_dim=d, layer_id=1))
    # use_mta false (their baselines): no MTA step in any layer, head steps included; the group
    # norm and gate when set; mta_layers is then unused.
    assert shapes(MultiTokenAttention.from_config({'use_mta': False}, n_heads=H, head_dim=d)) == {}
    m = MultiTokenAttention.from_config(dict(MTA_830M, use_mta=False), n_heads=16, head_dim=d, layer_id=2)
    assert shapes(m) == {'subln.weight': (8,), 'gate.weight': (1, 8), 'gate.bias': (1,)}
    q, k, v = qkv()
    base = MultiTokenAttention.from_config({}, n_heads=H, head_dim=d)
    exp = plain_attention(q, k, v)  # both float32 (tol.py)
    assert close(base(q, k, v), exp, 2 * chain_bound(module_sums(base, 2, 23)), scale_of(exp))
    # Their RMSNorm rescales only inside the group norm: layer_norm_rescale alone changes nothing.
    m = MultiTokenAttention.from_config(dict(use_mta=True, layer_norm_rescale=True), n_heads=H, head_dim=d)
    assert shapes(m) == {'mta_kernel': (4, 1, 1, 1)} and not m.layer_norm_rescale


@pytest.mark.parametrize('cfg, layer', [(MTA_830M, 2), (MTA_830M, 0), (MTA_TOY, 1),
                                        (dict(use_mta=True, group_norm=True), 0),
                                        (dict(MTA_830M, head_kernel_size=None, post_sm_linear_head=True), 6)])
def test_authors_state_dict_loads_strictly(cfg, layer):
    """A state dict with the authors' names and shapes (authors_shapes, written from their
    Attention class, not from the module) loads with strict=True, round-trips, and a missing or an
    extra key fails."""
    H, d = 4 if cfg is not MTA_830M else 16, 8
    cfg = dict(cfg, head_kernel_size=2) if cfg.get('head_kernel_size') else cfg
    theirs = authors_shapes(cfg, H, d, layer in ({2, 6} if 'mta_layers' in cfg else {layer}))
    gen = torch.Generator().manual_seed(layer)
    sd = {n: torch.randn(s, generator=gen) for n, s in theirs.items()}
    m = MultiTokenAttention.from_config(cfg, n_heads=H, head_dim=d, layer_id=layer)
    m.load_state_dict(sd, strict=True)
    back = m.state_dict()
    assert sorted(back) == sorted(sd) and all(torch.equal(back[n], sd[n]) for n in sd)
    again = MultiTokenAttention.from_config(cfg, n_heads=H, head_dim=d, layer_id=layer)
    again.load_state_dict(back, strict=True)
    q, k, v = qkv(H=H, d=d)
    assert torch.equal(m(q, k, v), again(q, k, v))
    missing = dict(sd)
    missing.pop(sorted(sd)[0])
    with pytest.raises(RuntimeError, match='Missing key'):
        m.load_state_dict(missing, strict=True)
    with pytest.raises(RuntimeError, match='Unexpected key'):
        m.load_state_dict(dict(sd, mta_kernel_extra=torch.zeros(1)), strict=True)


def test_unsupported_keys_refused_by_name():
    bad = dict(MTA_830M, pad_key='left', init_method='normal', gate_1d=False, curse_norm=True, use_mask=True,
               dropout_mask=0.1, head_kernel_size='16', group_norm='yes', mta_layers='2;6')
    with pytest.raises(ValueError) as e:
        MultiTokenAttention.from_config(bad, n_heads=16, head_dim=8)
    msg = str(e.value)
    for key, value in (('pad_key', "'left'"), ('init_method', "'normal'"), ('gate_1d', 'False'),
                       ('curse_norm', 'True'), ('use_mask', 'True'), ('dropout_mask', '0.1'),
                       ('head_kernel_size', "'16'"), ('group_norm', "'yes'"), ('mta_layers', "'2;6'")):
        assert '%s=%s' % (key, value) in msg, (key, msg)
    assert 'not supported' in msg
    # One at a time too, and the defaults of those keys are accepted.
    for key, value in (('pad_key', 'right'), ('init_method', 'const'), ('gate_1d', False), ('curse_norm', True),
                       ('triton', True), ('dim', 1536)):
        with pytest.raises(ValueError, match=key):
            MultiTokenAttention.from_config(dict(MTA_TOY, **{key: value}), n_heads=2, head_dim=8)
    MultiTokenAttention.from_config(dict(MTA_TOY, gate_1d=True, curse_norm=False), n_heads=2, head_dim=8)
    with pytest.raises(TypeError, match='cfg'):
        MultiTokenAttention.from_config(42, n_heads=2, head_dim=8)
    with pytest.raises(ValueError, match='layer_id'):
        MultiTokenAttention.from_config(MTA_TOY, n_heads=2, head_dim=8, layer_id=-1)
    # Sizes the library refuses: mtac.Error (a ValueError) with its message.
    with pytest.raises(mtac.Error, match='must be odd'):
        MultiTokenAttention.from_config(dict(MTA_TOY, key_kernel_size=8), n_heads=2, head_dim=8)
    with pytest.raises(mtac.Error, match='alternatives'):
        MultiTokenAttention.from_config(dict(MTA_830M, post_sm_linear_head=True), n_heads=16, head_dim=8)


def test_gate_bias_init():
    d = 16
    m = MultiTokenAttention(2, d, add_gating=True)
    assert m.gate.bias.item() == 0 and m.gate_bias_init == 'zero'
    torch.manual_seed(0)
    biases = [MultiTokenAttention(2, d, add_gating=True, gate_bias_init='linear').gate.bias.item() for _ in range(50)]
    bound = 1 / math.sqrt(d)
    assert all(-bound <= b <= bound for b in biases) and len(set(biases)) == 50
    assert max(biases) > 0.5 * bound and min(biases) < -0.5 * bound
    m = MultiTokenAttention.from_config(MTA_830M, n_heads=16, head_dim=d, layer_id=2, gate_bias_init='linear')
    assert m.gate.bias.item() != 0 and m.gate_bias_init == 'linear'
    m.gate.bias.data.fill_(7.0)
    m.reset_parameters()  # the same rule again
    assert -bound <= m.gate.bias.item() <= bound
    with pytest.raises(mtac.Error, match='gate_bias_init'):
        MultiTokenAttention(2, d, add_gating=True, gate_bias_init='uniform')


def test_grouped_kv_heads():
    """Their n_kv_heads: k and v with H_kv heads, which their repeat_kv repeats (query head h reads
    kv head h // (H / H_kv)) before the MTA steps; the module passes them to the op as they are."""
    m = MultiTokenAttention.from_config(MTA_830M, n_heads=16, head_dim=8, layer_id=2)
    perturb(m, 0.1)
    q = qkv(B=1, H=16, T=13, d=8)[0]
    k, v = qkv(B=1, H=4, T=13, d=8, seed=2)[:2]
    exp = RefCore(m)(q, k.repeat_interleave(4, 1), v.repeat_interleave(4, 1))
    assert close(m(q, k, v), exp, 2 * chain_bound(module_sums(m, 1, 13)), scale_of(exp))  # both float32 (tol.py)
