"""mtac.torch.MultiTokenAttention: the authors' parameter names, shapes and identity
initialisation, the state-dict round trip, and a small PyTorch model trained with it equal to the
same model whose attention core is the independent reference (tests/ref/mta_ref.py)."""
import copy

import pytest
import torch
from torch import nn

import mtac
from mtac.torch import MultiTokenAttention
from mta_ref import mta_forward, plain_attention
from tol import chain_bound, close, mta_sums, scale_of

FULL = dict(query_kernel_size=6, key_kernel_size=11, after_sm_query_kernel_size=6, after_sm_key_kernel_size=11,
            pre_sm_linear_head=True, head_kernel_size=4, group_norm=True, add_gating=True)


class RefCore(nn.Module):
    """The same parameters as MultiTokenAttention (the authors' names), computed by mta_ref.mta_forward
    with its own reading of the authors' layout."""

    def __init__(self, m):
        super().__init__()
        for name, p in m.named_parameters(recurse=False):
            self.register_parameter(name, nn.Parameter(p.detach().clone()))
        for name in ('wpsm', 'wposm', 'subln', 'gate'):
            sub = getattr(m, name)
            setattr(self, name, None if sub is None else copy.deepcopy(sub))
        self.layer_id, self.rescale = m.layer_id, m.layer_norm_rescale

    def forward(self, q, k, v):
        g = lambda n: getattr(self, n, None)  # noqa: E731
        post_head = g('head_kernel')
        if post_head is None and self.wposm is not None:
            post_head = self.wposm.weight.t()[None]  # P2[o] = sum_n W[o, n] P1[n]
        return mta_forward(q, k, v,
                           w_pre=None if g('mta_kernel') is None else self.mta_kernel[:, 0],
                           w_pre_head=None if self.wpsm is None else self.wpsm.weight,
                           w_post=None if g('mta_kernel_after_sm') is None else self.mta_kernel_after_sm[:, 0],
                           w_post_head=post_head,
                           gn_weight=None if self.subln is None else self.subln.weight,
                           gate_w=None if self.gate is None else self.gate.weight[0],
                           gate_b=None if self.gate is None else self.gate.bias,
                           layer_id=self.layer_id, depth_scale=self.rescale)


def module_sums(m, B, T):
    """tol.mta_sums of module m on input (B, m.n_heads, T, m.head_dim)."""
    pre = None if m.mta_kernel is None else tuple(m.mta_kernel.shape[2:])
    post = None if m.mta_kernel_after_sm is None else tuple(m.mta_kernel_after_sm.shape[2:])
    c_h = m.head_kernel.shape[1] if m.head_kernel is not None else (m.n_heads if m.wposm is not None else None)
    return mta_sums(B, m.n_heads, T, m.head_dim, pre, post, c_h)


def perturb(m, scale=0.2, seed=0):
    gen = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for p in m.parameters():
            p.add_(scale * torch.randn(p.shape, generator=gen))


def qkv(B=2, H=4, T=23, d=8, seed=1):
    gen = torch.Generator().manual_seed(seed)
    return [torch.randn(B, H, T, d, generator=gen) for _ in range(3)]


def test_names_shapes_and_identity_init():
    m = MultiTokenAttention(4, 8, **FULL)
    shapes = {n: tuple(p.shape) for n, p in m.named_parameters()}
    assert shapes == {'mta_kernel': (4, 1, 6, 11), 'mta_kernel_after_sm': (4, 1, 6, 11), 'head_kernel': (1, 4, 4),
                      'wpsm.weight': (4, 4), 'subln.weight': (8,), 'gate.weight': (1, 8), 'gate.bias': (1,)}
    assert m.mta_kernel.sum() == 4 and (m.mta_kernel[:, 0, 5, 5] == 1).all()
    assert torch.equal(m.wpsm.weight, torch.eye(4)) and torch.equal(m.head_kernel[0], torch.eye(4))
    assert (m.subln.weight == 1).all() and m.gate.bias.item() == 0
    std = 32 ** -0.5
    assert 0 < m.gate.weight.abs().max() <= 3 * std
    # Identity kernels without norm and gate: plain causal attention.
    core = MultiTokenAttention(4, 8, query_kernel_size=6, key_kernel_size=11, after_sm_query_kernel_size=2,
                               after_sm_key_kernel_size=3, pre_sm_linear_head=True, post_sm_linear_head=True)
    q, k, v = qkv()
    exp = plain_attention(q, k, v)
    # Both in float32, each within chain_bound * scale of the exact values (tol.py).
    assert close(core(q, k, v), exp, 2 * chain_bound(mta_sums(2, 4, 23, 8, (6, 11), (2, 3), True)), scale_of(exp))


@pytest.mark.parametrize('args', [FULL, dict(FULL, head_kernel_size=None, post_sm_linear_head=True, layer_id=5,
                                             layer_norm_rescale=True),
                                  dict(query_kernel_size=2, key_kernel_size=9)])
def test_module_against_reference(args):
    m = MultiTokenAttention(4, 8, **args)
    perturb(m)
    ref = RefCore(m)
    q, k, v = qkv()
    for t in (q, k, v):
        t.requires_grad_()
    out = m(q, k, v)
    dout = torch.randn_like(out)
    out.backward(dout)
    got = [q.grad.clone(), k.grad.clone(), v.grad.clone()] + [p.grad for p in m.parameters()]
    for t in (q, k, v):
        t.grad = None
    exp_out = ref(q, k, v)
    exp_out.backward(dout)
    exp = [q.grad, k.grad, v.grad] + [p.grad for p in ref.parameters()]
    assert [n for n, _ in m.named_parameters()] == [n for n, _ in ref.named_parameters()]
    # Both in float32, each within chain_bound * scale of the exact values (tol.py), scale the largest
    # |value| of the case's expected tensors.
    bound, scale = 2 * chain_bound(module_sums(m, 2, 23)), scale_of(exp_out, *exp)
    assert close(out, exp_out, bound, scale)
    for a, b in zip(got, exp):
        assert close(a, b, bound, scale)


def test_state_dict_round_trip():
    a = MultiTokenAttention(4, 8, **FULL)
    perturb(a)
    sd = a.state_dict()
    assert sorted(sd) == sorted(['mta_kernel', 'mta_kernel_after_sm', 'head_kernel', 'wpsm.weight', 'subln.weight',
                                 'gate.weight', 'gate.bias'])
    b = MultiTokenAttention(4, 8, **FULL)
    assert not torch.equal(a(*qkv()), b(*qkv()))
    b.load_state_dict(sd)
    assert torch.equal(a(*qkv()), b(*qkv()))
    with pytest.raises(RuntimeError):
        MultiTokenAttention(4, 8, query_kernel_size=6, key_kernel_size=11).load_state_dict(sd)


def test_module_errors():
    with pytest.raises(mtac.Error, match='must be odd'):
        MultiTokenAttention(4, 8, query_kernel_size=2, key_kernel_size=4)
    with pytest.raises(mtac.Error, match='must divide H'):
        MultiTokenAttention(4, 8, head_kernel_size=3)
    with pytest.raises(mtac.Error, match='alternatives'):
        MultiTokenAttention(4, 8, head_kernel_size=2, post_sm_linear_head=True)
    with pytest.raises(mtac.Error, match='gate_1d'):
        MultiTokenAttention(4, 8, add_gating=True, gate_1d=False)


class Block(nn.Module):
    def __init__(self, dim, H, core):
        super().__init__()
        self.H, self.hd = H, dim // H
        self.norm1, self.norm2 = nn.LayerNorm(dim), nn.LayerNorm(dim)
        self.wq, self.wk, self.wv, self.wo = (nn.Linear(dim, dim, bias=False) for _ in range(4))
        self.core = core
        self.ffn = nn.Sequential(nn.Linear(dim, 2 * dim), nn.GELU(), nn.Linear(2 * dim, dim))

    def forward(self, x):
        B, T, D = x.shape
        h = self.norm1(x)
        q, k, v = (w(h).view(B, T, self.H, self.hd).transpose(1, 2).contiguous() for w in (self.wq, self.wk, self.wv))
        x = x + self.wo(self.core(q, k, v).transpose(1, 2).reshape(B, T, D))
        return x + self.ffn(self.norm2(x))


class TinyLM(nn.Module):
    def __init__(self, cores, vocab=17, dim=32, H=4):
        super().__init__()
        self.emb = nn.Embedding(vocab, dim)
        self.blocks = nn.ModuleList(Block(dim, H, c) for c in cores)
        self.out = nn.Linear(dim, vocab)

    def forward(self, tok):
        x = self.emb(tok)
        for b in self.blocks:
            x = b(x)
        return self.out(x)


def test_training_loop_matches_reference_attention():
    """Two layers (the 830M pattern in layer 0, head mixing, norm and gate only in layer 1), 6 SGD
    steps: the model on MultiTokenAttention and the same model on the reference core lose the same."""
    torch.manual_seed(0)
    cores = [MultiTokenAttention(4, 8, **FULL, layer_id=0),
             MultiTokenAttention(4, 8, query_kernel_size=None, pre_sm_linear_head=True, head_kernel_size=2,
                                 group_norm=True, layer_norm_rescale=True, add_gating=True, layer_id=1)]
    assert cores[1].mta_kernel is None  # None: no key-query kernel (the default is the authors' 1x1)
    for i, c in enumerate(cores):
        perturb(c, 0.1, seed=i)
    a = TinyLM(cores)
    b = TinyLM([RefCore(c) for c in cores])
    b.load_state_dict(a.state_dict())
    opts = [torch.optim.SGD(m.parameters(), lr=0.1, momentum=0.9) for m in (a, b)]
    gen = torch.Generator().manual_seed(3)
    losses = []
    for step in range(6):
        tok = torch.randint(0, 17, (2, 33), generator=gen)
        pair = []
        for m, opt in zip((a, b), opts):
            opt.zero_grad()
            loss = nn.functional.cross_entropy(m(tok[:, :-1]).flatten(0, 1), tok[:, 1:].flatten())
            loss.backward()
            opt.step()
            pair.append(loss.item())
        losses.append(pair)
    # The two models differ only in their cores, each within 2 chain_bound of the other per call
    # (tol.py); the rest of the step runs the same float32 sums on both: per block LayerNorm and
    # the projections (dim), the FFN (dim, 2 dim), the weights' gradients (B T), the output layer
    # and the cross entropy (vocab, B T). An error made at step s is carried into every later
    # step (momentum and the weights); with an O(1) amplification per step (lr 0.1, gradients of
    # order 1), step s is off by at most s (s + 1) / 2 steps' worth.
    dense = [32] * 5 + [64] + [2 * 32] * 8
    lengths = [n for c in cores for n in module_sums(c, 2, 32) + dense] + [32, 17, 64]
    for s, (la, lb) in enumerate(losses, 1):
        assert abs(la - lb) <= s * (s + 1) / 2 * 2 * chain_bound(lengths) * abs(lb), losses
    assert losses[-1][0] < losses[0][0]
    pa, pb = a.state_dict(), b.state_dict()
    bound = 6 * 7 / 2 * 2 * chain_bound(lengths)
    for n in pa:
        assert close(pa[n], pb[n], bound, scale_of(*pb.values())), n


def test_dropout_in_training_mode():
    """dropout=0.1 (the authors' toy setting, not a float32) trains; eval mode is deterministic;
    a dropout outside [0, 1) is refused when the module is made, not at its first training step."""
    q, k, v = qkv(H=2)
    for m in (MultiTokenAttention(2, 8, query_kernel_size=2, key_kernel_size=3, dropout=0.1),
              MultiTokenAttention.from_config(dict(use_mta=True, query_kernel_size=2, key_kernel_size=9), n_heads=2,
                                              head_dim=8, dropout=0.1)):
        assert m.training and m.dropout == 0.1
        assert not torch.equal(m(q, k, v), m(q, k, v))  # a new mask per call
        m.eval()
        assert torch.equal(m(q, k, v), m(q, k, v))
    for p in (1.0, -0.5, float('nan'), '0.1'):
        with pytest.raises(mtac.Error, match='dropout'):
            MultiTokenAttention(2, 8, dropout=p)


def test_deterministic_reaches_library(monkeypatch):
    """The module's deterministic (and from_config's) goes to the library on each call
    (mta_set_deterministic, recorded here); anything but a bool is refused at construction."""
    calls, real = [], mtac._lib.lib.mta_set_deterministic
    monkeypatch.setattr(mtac._lib.lib, 'mta_set_deterministic', lambda h, on: (calls.append(on), real(h, on))[1])
    q, k, v = qkv(H=2)
    mods = (MultiTokenAttention(2, 8), MultiTokenAttention(2, 8, deterministic=False),
            MultiTokenAttention.from_config(dict(use_mta=True), n_heads=2, head_dim=8, deterministic=False))
    for m in mods:
        m(q, k, v)
    assert calls == [1, 0, 0]
    for bad in (1, None, 'yes'):
        with pytest.raises(mtac.Error, match='deterministic=%r must be True or False' % (bad,)):
            MultiTokenAttention(2, 8, deterministic=bad)
        with pytest.raises(mtac.Error, match='deterministic='):
            MultiTokenAttention.from_config({}, n_heads=2, head_dim=8, deterministic=bad)


def test_head_count_checked_first():
    """The module's own head count and head size against q's, named in the error, before any
    parameter's shape: a module whose parameters are all (d,) (group norm and gate) would take
    any H otherwise."""
    m = MultiTokenAttention(4, 8, query_kernel_size=None, group_norm=True, add_gating=True)
    for H, d in ((16, 8), (2, 8), (4, 16)):
        q, k, v = qkv(H=H, d=d)
        with pytest.raises(mtac.Error, match=r'q has shape \(2, %d, 23, %d\).*n_heads=4, head_dim=8' % (H, d)):
            m(q, k, v)
    with pytest.raises(mtac.Error, match='n_heads=4'):  # not "mta_kernel has shape ..."
        MultiTokenAttention(4, 8, query_kernel_size=2, key_kernel_size=3)(*qkv(H=2))
    m(*qkv(H=4))
    q, k, v = qkv(H=4)
    m(q, k[:, :2].contiguous(), v[:, :2].contiguous())  # 2 kv heads for 4 query heads


@pytest.mark.parametrize('name', ['query_kernel_size', 'key_kernel_size', 'after_sm_query_kernel_size',
                                  'after_sm_key_kernel_size', 'head_kernel_size', 'n_heads', 'head_dim', 'layer_id'])
def test_sizes_must_be_ints(name):
    """Kernel sizes, head count and size, layer_id: ints (a numpy integer too), never a float, a bool
    or a string: mtac.Error naming the argument."""
    args = dict(n_heads=4, head_dim=8, query_kernel_size=2, key_kernel_size=3, after_sm_query_kernel_size=2,
                after_sm_key_kernel_size=3, head_kernel_size=2, layer_id=1)
    good = 1 if name != 'n_heads' else 4
    MultiTokenAttention(**dict(args, **{name: good}))
    for bad in (float(good), True, str(good), -1, 2 ** 40):
        with pytest.raises(mtac.Error, match=name + '='):
            MultiTokenAttention(**dict(args, **{name: bad}))
    np = pytest.importorskip('numpy')
    MultiTokenAttention(**dict(args, **{name: np.int64(good)}))


def test_autocast_runs_in_float32():
    """Under torch.autocast('cpu', torch.bfloat16) the op takes bfloat16 inputs as float32 and returns
    float32, the same bits as called outside autocast on the inputs made float32; gradients reach
    bfloat16 inputs in bfloat16; float64 stays refused (autocast leaves float64 alone)."""
    m = MultiTokenAttention(4, 8, **FULL)
    perturb(m)
    q, k, v = (t.bfloat16().requires_grad_() for t in qkv())
    exp = m(*(t.detach().float() for t in (q, k, v)))
    with torch.autocast('cpu', dtype=torch.bfloat16):
        out = m(q, k, v)
        assert torch.is_autocast_cpu_enabled()
    assert out.dtype == torch.float32 and torch.equal(out, exp)
    out.sum().backward()
    assert q.grad.dtype == torch.bfloat16 and m.mta_kernel.grad.dtype == torch.float32
    # A block under autocast: the projections give bfloat16, the core float32, wo bfloat16 again.
    torch.manual_seed(0)
    lm = TinyLM([MultiTokenAttention(4, 8, **FULL)])
    with torch.autocast('cpu', dtype=torch.bfloat16):
        loss = nn.functional.cross_entropy(lm(torch.randint(0, 17, (2, 9))).flatten(0, 1).float(),
                                           torch.randint(0, 17, (18,)))
    loss.backward()
    assert torch.isfinite(loss) and lm.blocks[0].core.mta_kernel.grad is not None
    with torch.autocast('cpu', dtype=torch.bfloat16), pytest.raises(mtac.Error, match='float64'):
        m(*(t.double() for t in qkv()))
    with pytest.raises(mtac.Error, match='bfloat16'):  # outside autocast: refused as before
        m(*(t.bfloat16() for t in qkv()))


@pytest.mark.filterwarnings("ignore:Using backward")
def test_double_backward_refused():
    """create_graph=True asks for gradients with a graph, which mta_backward cannot give: refused
    with a clear error, whether the upstream gradient needs a gradient itself or is a constant
    (out.sum(); once_differentiable returned a gradient without a graph then). A plain backward works."""
    m = MultiTokenAttention(4, 8, **FULL)
    q, k, v = (t.requires_grad_() for t in qkv())
    with pytest.raises(NotImplementedError, match='double backward is not supported'):
        torch.autograd.grad(m(q, k, v).sum(), q, create_graph=True)
    out = m(q, k, v)
    with pytest.raises(NotImplementedError, match='double backward is not supported'):
        torch.autograd.grad(out, q, torch.randn_like(out, requires_grad=True), create_graph=True)
    with pytest.raises(NotImplementedError, match='double backward is not supported'):
        m(q, k, v).square().sum().backward(create_graph=True)
    g, = torch.autograd.grad(m(q, k, v).square().sum(), q)
    assert g.shape == q.shape and not g.requires_grad
