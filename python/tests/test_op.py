"""mtac.torch.mta_attention against the independent autograd reference (tests/ref/mta_ref.py),
gradcheck, the errors it raises, threads, dropout."""
import math
import os
import random
import re
import shutil
import subprocess

import pytest
import torch

import mtac
from mtac.torch import mta_attention
from cases import make_case, reference, describe
from check_against_torch import combination_cases, compare, fixed_cases, random_case
from tol import chain_bound, close, mta_sums, scale_of
from mta_ref import PARAM_NAMES

BACKENDS = mtac._lib.host_backends()


def run_op(tensors, meta, backend, threads=None, deterministic=True):
    """Forward and backward of sum(out * dout) through the op; returns the outputs and gradients
    named like cases.reference's (numpy arrays)."""
    x = {n: t.clone().requires_grad_(n not in ('dout', 'doc')) for n, t in tensors.items()}
    params = {n: x[n] for n in PARAM_NAMES if n in x}
    doc = x['doc'].long() if 'doc' in x else None  # the cases hold ids as float32 (mtac attn's files)
    out = mta_attention(x['q'], x['k'], x['v'], **params, layer_id=int(meta.get('layer_id', '0')),
                        depth_scale=meta.get('depth_scale', '0') == '1', backend=backend, threads=threads, doc=doc,
                        deterministic=deterministic)
    out.backward(x['dout'])
    got = {'out': out.detach().numpy()}
    for n in ['q', 'k', 'v'] + list(params):
        got['grad.' + n] = x[n].grad.numpy()
    return got


def check_specs(specs, backend, seed):
    gen = torch.Generator().manual_seed(seed)
    failures = []
    for spec in specs:
        tensors, meta = make_case(spec, gen)
        # check_against_torch's measured bound: 32 times the case's own float32 rounding noise,
        # the reference run again in float32 (its module docstring; docs/testing.md).
        exp, exp32 = reference(tensors, meta), reference(tensors, meta, torch.float32)
        ok, worst, ratio, bound, msgs = compare(run_op(tensors, meta, backend), exp, exp32)
        if not ok:
            failures.append('%s: %s' % (describe(spec), '; '.join(msgs)))
    assert not failures, '\n'.join(failures)


@pytest.mark.parametrize('backend', BACKENDS)
def test_every_step_combination(backend):
    """The 64 on/off combinations of the six steps (check_against_torch's shapes), forward and every gradient."""
    check_specs(combination_cases(), backend, 91)


@pytest.mark.parametrize('backend', BACKENDS)
def test_random_problems(backend):
    rng = random.Random(4242)
    specs = fixed_cases(rng) + [random_case(rng) for _ in range(16)]
    check_specs(specs, backend, 4243)


def test_threads_same_result():
    """1 and 2 threads give the same numbers (the library reduces in a fixed order: same bits per
    thread count; across counts, within rounding)."""
    gen = torch.Generator().manual_seed(5)
    spec = dict(B=2, H=4, T=40, d=8, pre=(6, 11), pre_head=True, post=(6, 11), c_h=4, gn=True, gate=True)
    tensors, meta = make_case(spec, gen)
    a = run_op(tensors, meta, 'fused', threads=1)
    b = run_op(tensors, meta, 'fused', threads=2)
    c = run_op(tensors, meta, 'fused', threads=2)
    # Two float32 runs that sum in different orders: each within chain_bound * scale of the exact
    # values (tol.py), so within twice that of each other.
    bound, scale = 2 * chain_bound(mta_sums(**spec)), scale_of(*a.values())
    for n in a:
        assert (b[n] == c[n]).all(), n
        assert close(a[n], b[n], bound, scale), n


def _gradcheck_tol(f, inputs, lengths, eps):
    """gradcheck's atol for f, the float32 op behind a float64 interface: its numerical derivative is
    (f(x + eps) - f(x - eps)) / (2 eps), and each value of f is off by chain_bound * scale (tol.py;
    scale: the largest |f| here), so the quotient by chain_bound * scale / eps; its truncation error
    is eps^2 / 6 times f's third derivative, at most 6 for these smooth steps of order-1 inputs:
    eps^2. With rtol 0."""
    with torch.no_grad():
        scale = f(*inputs).abs().max().item()
    return chain_bound(lengths) * scale / eps + eps ** 2


def _as64(fn):
    """A float64 interface around the float32 op, for gradcheck."""
    def f(*xs):
        return fn(*[x.float() for x in xs]).double()
    return f


@pytest.mark.parametrize('backend', BACKENDS)
def test_gradcheck(backend):
    """torch.autograd.gradcheck: the op runs in float32, so the inputs are float64 tensors cast to
    float32 inside, and the tolerance is float32's (_gradcheck_tol)."""
    torch.manual_seed(0)
    H, T, d = 2, 6, 3
    q, k, v = (torch.randn(1, H, T, d, dtype=torch.float64, requires_grad=True) for _ in range(3))
    w_pre = (torch.zeros(H, 2, 3, dtype=torch.float64).index_put_((torch.arange(H), torch.tensor(1), torch.tensor(1)),
                                                                  torch.tensor(1.0, dtype=torch.float64))
             + 0.3 * torch.randn(H, 2, 3, dtype=torch.float64)).requires_grad_()
    w_pre_head = (torch.eye(H, dtype=torch.float64) + 0.3 * torch.randn(H, H, dtype=torch.float64)).requires_grad_()
    w_post = (0.5 + 0.3 * torch.randn(H, 2, 3, dtype=torch.float64)).requires_grad_()
    w_post_head = (torch.eye(H, dtype=torch.float64) + 0.3 * torch.randn(H, H, dtype=torch.float64))[None].requires_grad_()
    gn = (1 + 0.3 * torch.randn(d, dtype=torch.float64)).requires_grad_()
    gw = (0.3 * torch.randn(d, dtype=torch.float64)).requires_grad_()
    gb = (0.3 * torch.randn(1, dtype=torch.float64)).requires_grad_()

    def fn(q, k, v, a, b, c, e, g, h, i):
        return mta_attention(q, k, v, w_pre=a, w_pre_head=b, w_post=c, w_post_head=e, gn_weight=g, gate_w=h,
                             gate_b=i, backend=backend)
    inputs = (q, k, v, w_pre, w_pre_head, w_post, w_post_head, gn, gw, gb)
    atol = _gradcheck_tol(_as64(fn), inputs, mta_sums(1, H, T, d, (2, 3), (2, 3), H), 1e-2)
    assert torch.autograd.gradcheck(_as64(fn), inputs, eps=1e-2, atol=atol, rtol=0)
    # Only some inputs requiring gradients: the others get none.
    for t in inputs[3:]:
        t.requires_grad_(False)
    assert torch.autograd.gradcheck(_as64(fn), inputs, eps=1e-2, atol=atol, rtol=0)


@pytest.mark.parametrize('backend', BACKENDS)
def test_grouped_query(backend):
    """k, v with fewer heads than q (H_kv dividing H): against the reference on repeated k, v
    (mta_ref.py's repeat_interleave), every step on and H_kv = 1, 2 of H = 4; and gradcheck."""
    for H_kv in (1, 2):
        check_specs([dict(B=2, H=4, T=17, d=5, pre=(3, 5), pre_head=True, post=(2, 3), c_h=2, gn=True, gate=True,
                          H_kv=H_kv), dict(B=1, H=4, T=9, d=3, H_kv=H_kv)], backend, 30 + H_kv)
    torch.manual_seed(1)
    q = torch.randn(1, 4, 6, 3, dtype=torch.float64, requires_grad=True)
    k, v = (torch.randn(1, 2, 6, 3, dtype=torch.float64, requires_grad=True) for _ in range(2))
    w_post = (0.5 + 0.3 * torch.randn(4, 2, 3, dtype=torch.float64)).requires_grad_()
    w_post_head = (torch.eye(2, dtype=torch.float64).repeat(2, 1, 1)
                   + 0.3 * torch.randn(2, 2, 2, dtype=torch.float64)).requires_grad_()

    def fn(q, k, v, a, b):
        return mta_attention(q, k, v, w_post=a, w_post_head=b, backend=backend)
    inputs = (q, k, v, w_post, w_post_head)
    atol = _gradcheck_tol(_as64(fn), inputs, mta_sums(1, 4, 6, 3, None, (2, 3), 2), 1e-2)
    assert torch.autograd.gradcheck(_as64(fn), inputs, eps=1e-2, atol=atol, rtol=0)


@pytest.mark.parametrize('backend', BACKENDS)
def test_documents_errors_and_module(backend):
    """doc: integer (B, T) ids; refused otherwise, naming it; the module passes it on."""
    q = torch.randn(2, 4, 9, 8)
    k, v = torch.randn(2, 2, 9, 8), torch.randn(2, 2, 9, 8)
    for bad, words in ((torch.zeros(2, 9), 'integer'), (torch.zeros(2, 8, dtype=torch.long), 'must be (B, T) = (2, 9)'),
                       (torch.full((2, 9), 2 ** 40), 'outside int32'), ([0] * 18, 'integer torch.Tensor')):
        with pytest.raises(mtac.Error, match=words.replace('(', r'\(').replace(')', r'\)')):
            mta_attention(q, k, v, doc=bad, backend=backend)
    doc = torch.tensor([[0] * 4 + [1] * 5, [3] * 9])
    m = mtac.torch.MultiTokenAttention(4, 8, query_kernel_size=2, key_kernel_size=3, pre_sm_linear_head=True,
                                       backend=backend)
    packed = m(q, k, v, doc=doc)
    alone = m(*(x[:1, :, 4:].contiguous() for x in (q, k, v)))
    # Two float32 runs of the same document, each within chain_bound * scale of it (tol.py).
    bound, scale = 2 * chain_bound(mta_sums(2, 4, 9, 8, (2, 3))), scale_of(alone)
    assert close(packed[:1, :, 4:], alone, bound, scale)
    assert torch.equal(m(q[1:], k[1:], v[1:]), packed[1:])  # one document: the same bits as none
    assert not close(m(q, k, v)[:1, :, 4:], alone, 100 * bound, scale)  # without doc: far more than rounding


def test_only_requested_gradients():
    q, k, v = (torch.randn(1, 2, 5, 4) for _ in range(3))
    w = torch.randn(2, 1, 3, requires_grad=True)
    mta_attention(q, k, v, w_pre=w).sum().backward()
    assert w.grad is not None and q.grad is None
    with torch.no_grad():
        out = mta_attention(q, k, v, w_pre=w)
    assert not out.requires_grad


def test_dropout_follows_torch_seed():
    q, k, v = (torch.randn(1, 2, 16, 4) for _ in range(3))
    torch.manual_seed(1)
    a = mta_attention(q, k, v, dropout=0.5)
    torch.manual_seed(1)
    b = mta_attention(q, k, v, dropout=0.5)
    c = mta_attention(q, k, v, dropout=0.5)
    assert torch.equal(a, b) and not torch.equal(a, c)
    assert not torch.allclose(a, mta_attention(q, k, v))


def test_dropout_any_probability():
    """Any dropout in [0, 1) runs, not only the float32 values (0.1 is not one); the library's mask
    drops the float32 nearest to p: with v the identity, out is the dropped attention map itself,
    so its zeros among the causal entries count the drops and the rest are P / (1 - p32)."""
    B, H, T = 2, 4, 64
    gen = torch.Generator().manual_seed(2)
    q, k = (torch.randn(B, H, T, T, generator=gen) for _ in range(2))
    v = torch.eye(T).expand(B, H, T, T).contiguous()
    p_map = mta_attention(q, k, v)
    causal = torch.ones(T, T).tril().bool().expand(B, H, T, T)
    n = int(causal.sum())
    for p in (0.1, 1 / 3, 0.7, 0.9, 1e-3, 0.999999999, 0.5):
        p32 = torch.tensor(p, dtype=torch.float32).item()
        p32 = p32 if p32 < 1 else 1 - 2 ** -24  # the float32 below 1 for a p rounding up to 1
        torch.manual_seed(3)
        out = mta_attention(q, k, v, dropout=p)
        dropped = (out == 0) & causal
        # The drop count is binomial(n, p32): within 6 standard deviations (a chance of 2e-9 of a
        # false failure); a mask drawn with another p (0.1 against 0.25 with n = 16,640) is ~40 sd away.
        sd = math.sqrt(n * p32 * (1 - p32))
        assert abs(int(dropped.sum()) - n * p32) <= 6 * sd + 1, (p, int(dropped.sum()), n * p32)
        kept = ~dropped & causal
        # Kept entries: fl(P * fl(1 / fl(1 - p32))) in the library against fl(P * fl(1 / (1 - p32)))
        # here, the product by v = I exact in both: 3 roundings of relative u = 2^-24 on its side,
        # 2 on this one, so at most 5u apart; the factor of another p (1/0.9 against 1/0.75) is off
        # by 20%, 10^6 times more.
        scale = 1 / (1 - p32)
        assert ((out[kept] - p_map[kept] * scale).abs() <= 5 * 2 ** -24 * p_map[kept] * scale).all(), p
        assert (out[~causal] == 0).all()


@pytest.mark.parametrize('backend', BACKENDS)
def test_deterministic_host(backend):
    """deterministic=False changes nothing on the host backends (they add no sums by atomics):
    every output and gradient equals the default run's bit for bit."""
    spec = dict(B=1, H=4, T=20, d=8, pre=(3, 5), pre_head=True, post=(2, 3), c_h=2, gn=True, gate=True)
    tensors, meta = make_case(spec, torch.Generator().manual_seed(6))
    a = run_op(tensors, meta, backend)
    b = run_op(tensors, meta, backend, deterministic=False)
    for n in a:
        assert (a[n] == b[n]).all(), n


def raises(match, fn):
    with pytest.raises(mtac.Error, match=match):
        fn()


def test_errors():
    q, k, v = (torch.randn(1, 2, 5, 4) for _ in range(3))
    raises('dtype torch.float64', lambda: mta_attention(q.double(), k, v))
    raises('not contiguous', lambda: mta_attention(q.transpose(2, 3), k.transpose(2, 3), v.transpose(2, 3)))
    raises('device meta', lambda: mta_attention(q.to('meta'), k, v))
    raises('4 dimensions', lambda: mta_attention(q[0], k[0], v[0]))
    raises('same shape', lambda: mta_attention(q, k[:, :, :4].contiguous(), v))
    q3 = torch.randn(1, 3, 5, 4)
    raises('H_kv dividing H', lambda: mta_attention(q3, k, v))  # 2 kv heads for 3 query heads
    raises('must be odd', lambda: mta_attention(q, k, v, w_pre=torch.zeros(2, 2, 4)))  # the library's message
    raises('must divide H', lambda: mta_attention(q, k, v, w_post_head=torch.zeros(1, 3, 3)))
    raises(r'w_pre has shape \(3, 2, 3\)', lambda: mta_attention(q, k, v, w_pre=torch.zeros(3, 2, 3)))
    raises(r'w_pre_head has shape', lambda: mta_attention(q, k, v, w_pre_head=torch.zeros(2, 3)))
    raises(r'gn_weight has shape', lambda: mta_attention(q, k, v, gn_weight=torch.zeros(5)))
    raises('go together', lambda: mta_attention(q, k, v, gate_w=torch.zeros(4)))
    raises('gn_weight', lambda: mta_attention(q, k, v, depth_scale=True))
    for p in (1.0, 1, -0.1, float('nan'), float('inf'), True, '0.1', None):
        raises(r'dropout=%s must be a number in \[0, 1\)' % re.escape(repr(p)),
               lambda: mta_attention(q, k, v, dropout=p))
    raises('unknown backend', lambda: mta_attention(q, k, v, backend='gpu'))
    raises('device pointers', lambda: mta_attention(q, k, v, backend='cuda'))  # registered, device memory
    raises('threads', lambda: mta_attention(q, k, v, threads=0))
    for flag in (1, 0, None, 'no', torch.tensor(True)):
        raises(r'deterministic=%s must be True or False' % re.escape(repr(flag)),
               lambda: mta_attention(q, k, v, deterministic=flag))
    raises('layer_id', lambda: mta_attention(q, k, v, layer_id=-1))
    raises('must be a torch.Tensor', lambda: mta_attention(q, k, [1.0]))
    assert issubclass(mtac.Error, ValueError)


def test_library_searches_no_current_directory():
    """The package's libmtac.so has no empty run path entry (a build tree's ':' padding), which
    would make the loader search the current directory for what libmtac opens (libmtac_cuda.so)."""
    readelf = shutil.which('readelf')
    if readelf is None:
        pytest.skip('no readelf')
    lib = os.path.join(os.path.dirname(mtac.__file__), 'libmtac.so')
    out = subprocess.run([readelf, '-d', lib], check=True, capture_output=True, text=True).stdout
    paths = [line.split('[', 1)[1].rstrip(']') for line in out.splitlines() if 'RPATH' in line or 'RUNPATH' in line]
    for p in paths:
        assert '' not in p.split(':'), 'libmtac.so run path %r has an empty entry (the current directory)' % p
