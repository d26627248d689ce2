"""Multi-Token Attention for PyTorch on mtac's C operator (include/mta.h).

mta_attention(q, k, v, ...)   the MTA core as an autograd op (mta_forward / mta_backward)
MultiTokenAttention(...)      the core as an nn.Module, named like the authors' attention

Tensors are float32 on the CPU, contiguous, q, k, v of shape (B, H, T, d); the output has that
shape too (heads not concatenated, no output projection). CUDA tensors (float32, bfloat16) run on
the CUDA backend on torch's current stream (mtac._device; docs/python.md, "CUDA tensors"). The op
passes the tensors' own memory to the library: no copies (bfloat16 q, k, v, their gradients and the
output as the library's bfloat16 storage, mta_config.dtype; bfloat16 parameters, small, are widened).
Threads: torch.get_num_threads() unless threads= is given; run python with OMP_WAIT_POLICY=passive
(docs/python.md, "Threads").
"""
import collections.abc
import contextlib
import ctypes
import dataclasses
import inspect
import math
import numbers

import torch
from torch import nn

from mtac import _device
from mtac._lib import (MTA_DTYPE_BF16, MTA_DTYPE_F32, PARAM_NAMES, Context, Error, Grads, Params, backend_of,
                       check_config, config_from_shapes, lib, param_shape)

__all__ = ['mta_attention', 'MultiTokenAttention', 'Error']

_INT_MAX = 2 ** 31 - 1
# The largest float32 below 1: the library's dropout for a p in [0, 1) whose nearest float32 is 1.
_BELOW_ONE = 1.0 - 2.0 ** -24


def _ptr(t):
    return None if t is None else ctypes.c_void_p(t.data_ptr())


def _check_tensor(name, t, device, dtypes, rule):
    """t a contiguous torch.Tensor on device (q's) of one of dtypes; rule says which dtypes."""
    if not isinstance(t, torch.Tensor):
        raise Error('mtac: %s must be a torch.Tensor, not %s' % (name, type(t).__name__))
    if t.device != device:
        raise Error('mtac: %s is on device %s but q is on %s: the tensors of a call must be on one device'
                    % (name, t.device, device))
    if t.dtype not in dtypes:
        raise Error('mtac: %s has dtype %s; %s' % (name, t.dtype, rule))
    if not t.is_contiguous():
        raise Error('mtac: %s is not contiguous (strides %s); pass .contiguous()' % (name, tuple(t.stride())))


def _check_tensors(q, k, v, prm, place):
    """The tensors' devices, dtypes and layouts: on the host float32; on a device (place) q, k, v
    float32 or bfloat16, all of q's dtype, the parameters float32 or q's dtype."""
    if not isinstance(q, torch.Tensor):
        raise Error('mtac: q must be a torch.Tensor, not %s' % type(q).__name__)
    if place is None and q.device.type != 'cpu':
        raise Error('mtac: q is on device %s; the op takes CPU and CUDA tensors' % q.device)
    if place is None:
        qd, pd, rule = (torch.float32,), (torch.float32,), 'mtac computes in float32 (convert with .float())'
    else:
        both = (torch.float32, torch.bfloat16)
        qd = (q.dtype,) if q.dtype in both else both
        pd, rule = (torch.float32, q.dtype), 'on a device mtac takes float32 or bfloat16 (q\'s dtype for k and v)'
    for name, t in (('q', q), ('k', k), ('v', v)):
        _check_tensor(name, t, q.device, qd, rule)
    for name in PARAM_NAMES:
        if prm[name] is not None:
            _check_tensor(name, prm[name], q.device, pd, rule if place is None else
                          'the parameters are float32 or q\'s dtype')


def _dropout32(p):
    """The float32 that mta_config holds for dropout p, a number in [0, 1): the nearest float32 to p
    (p itself is rarely one: 0.1 is not), except below 1 where p rounds up to 1; raises Error."""
    if isinstance(p, bool) or not isinstance(p, numbers.Real) or not 0 <= p < 1:  # a NaN fails the range
        raise Error('mtac: dropout=%r must be a number in [0, 1)' % (p,))
    f = ctypes.c_float(float(p)).value
    return f if f < 1 else _BELOW_ONE


def _deterministic(v):
    """v, a bool (mta_set_deterministic's setting); raises Error for anything else (1, 'no', None)."""
    if not isinstance(v, bool):
        raise Error('mtac: deterministic=%r must be True or False' % (v,))
    return v


def _size(name, v, minimum=1):
    """v as an int >= minimum (a Python or numpy integer; not a bool, not a float); raises Error."""
    if isinstance(v, bool) or not isinstance(v, numbers.Integral) or not minimum <= v <= _INT_MAX:
        raise Error('mtac: %s=%r must be an int >= %d' % (name, v, minimum))
    return int(v)


def _config(q, k, v, prm, layer_id, depth_scale, dropout, backend, threads, place=None):
    """The mta_config of the call, from the tensors' shapes, for the host backends or for a device's
    (place, a mtac._device.Place); raises Error for anything refused."""
    _check_tensors(q, k, v, prm, place)
    if q.dim() != 4:
        raise Error('mtac: q must have 4 dimensions (B, H, T, d), got shape %s' % (tuple(q.shape),))
    # k, v: (B, H_kv, T, d), H_kv dividing H (grouped-query attention when below H)
    if (k.dim() != 4 or k.shape != v.shape or k.shape[0] != q.shape[0] or k.shape[2:] != q.shape[2:]
            or not 1 <= k.shape[1] <= q.shape[1] or q.shape[1] % k.shape[1]):
        raise Error('mtac: k and v must have the same shape (B, H_kv, T, d), H_kv dividing H, for q of shape '
                    '(B, H, T, d): %s, %s, %s' % (tuple(q.shape), tuple(k.shape), tuple(v.shape)))
    B, H, T, d = q.shape
    if max(B, H, T, d) > _INT_MAX:
        raise Error('mtac: shape %s has a size above 2^31-1' % (tuple(q.shape),))
    if depth_scale and prm['gn_weight'] is None:
        raise Error('mtac: depth_scale applies to the group norm output: give gn_weight')
    cfg = lib.mta_config_default(B, H, T, d)
    cfg.H_kv = k.shape[1]
    # Each tensor given switches its step on and its shape sets the step's sizes: the library's
    # table (mta_config_from_shapes), which also refuses a step's tensors given apart (gate_w, gate_b).
    config_from_shapes(cfg, [None if prm[n] is None else tuple(prm[n].shape) for n in PARAM_NAMES])
    cfg.depth_scale = int(bool(depth_scale))
    cfg.layer_id = _size('layer_id', layer_id, 0)
    cfg.dropout = _dropout32(dropout)
    cfg.backend = backend_of(backend) if place is None else _device_backend(backend, place)
    # bfloat16 tensors: the library's bf16 arithmetic (tensor cores), and its bf16 storage of q, k,
    # v, out and their gradients (mta_config.dtype), so that the tensors' own memory is passed
    cfg.precision = int(q.dtype == torch.bfloat16)
    cfg.dtype = MTA_DTYPE_BF16 if q.dtype == torch.bfloat16 else MTA_DTYPE_F32
    threads = torch.get_num_threads() if threads is None else threads
    cfg.threads = _size('threads', threads)
    check_config(cfg)  # the library's own checks and messages (kernel sizes, c_h | H, ...)
    for i, name in enumerate(PARAM_NAMES):
        t, want = prm[name], param_shape(cfg, i)
        if t is not None and tuple(t.shape) != want:
            raise Error('mtac: %s has shape %s; for q of shape %s (H=%d heads of d=%d) it must be %s'
                        % (name, tuple(t.shape), tuple(q.shape), H, d, want))
    return cfg


def _device_backend(name, place):
    """The backend of a call on device tensors: the device's (None or its name); raises Error."""
    if name is not None and name != place.name:
        raise Error('mtac: backend=%r, but q is on %s, which the %s backend runs: pass backend=None (%r and the '
                    'other host backends take CPU tensors)' % (name, place.device, place.name, name))
    return place.backend


def _setup(mctx, place):
    """A host call needs nothing; a device call runs on torch's current stream (the backward's is the
    one autograd gives it: its forward's)."""
    if place is not None:
        _device.set_stream(mctx.h, place.stream())


class _MTAFunction(torch.autograd.Function):
    """forward: mta_forward on a context kept for the backward (a new one on the host; one of the
    device's cache on a device, mtac._device.Lease); backward: mta_backward into zeroed gradient
    buffers (the library adds to them), only for the inputs that need one."""

    @staticmethod
    def forward(ctx, run, doc, q, k, v, *params):
        cfg, place, deterministic = run
        lease = None if place is None else _device.Lease(place, cfg)
        mctx = Context(cfg) if place is None else lease.mctx
        with contextlib.nullcontext() if place is None else place.guard():
            _setup(mctx, place)
            # The forward reads the ids (host backends keep the document starts for the backward).
            mctx.check(lib.mta_set_documents(mctx.h, _ptr(doc)), 'set_documents')
            if cfg.dropout > 0:
                # The mask is a function of the seed (include/mta.h): draw it from torch's generator
                # so that torch.manual_seed makes runs repeatable.
                mctx_seed = int(torch.randint(0, 2 ** 62, (1,)).item())
                lib.mta_set_dropout(mctx.h, 1, mctx_seed)
            # On every call: a cached context keeps the setting of the call that used it last. The
            # backward runs in the mode of its forward (nothing sets the context in between).
            lib.mta_set_deterministic(mctx.h, int(deterministic))
            p = Params(*[_ptr(t) for t in params])
            out = torch.empty_like(q)
            mctx.check(lib.mta_forward(mctx.h, _ptr(q), _ptr(k), _ptr(v), ctypes.byref(p), _ptr(out)), 'forward')
        if any(ctx.needs_input_grad):
            ctx.mctx, ctx.lease, ctx.place = mctx, lease, place
            ctx.save_for_backward(q, k, v, *params)
        elif lease is not None:
            lease.release()
        return out

    @staticmethod
    def backward(ctx, dout):
        # Grad mode is on in a backward exactly when it was asked for with create_graph=True. The
        # gradients computed here carry no graph, so refuse that instead of returning them as if
        # they did (once_differentiable does so silently when dout itself needs no gradient).
        if torch.is_grad_enabled():
            raise NotImplementedError('mtac: double backward is not supported: mta_attention\'s gradients are '
                                      'computed by mta_backward, which is not differentiable itself; call backward '
                                      'or torch.autograd.grad without create_graph=True')
        if ctx.mctx is None:
            raise Error('mtac: a second backward through mta_attention on device tensors (retain_graph=True) is not '
                        'supported: the first returned its context, which held the forward\'s statistics, to the '
                        'cache; run the forward again')
        q, k, v, *params = ctx.saved_tensors
        need = ctx.needs_input_grad[1:]  # (doc, q, k, v, params...): q, k, v at 1..3, the params from 4
        dout = dout.contiguous()
        if dout.dtype != q.dtype:  # the library reads dout in the tensors' storage (mta_config.dtype)
            dout = dout.to(q.dtype)
        dq, dk, dv = torch.zeros_like(q), torch.zeros_like(k), torch.zeros_like(v)
        dparams = [torch.zeros_like(t) if (t is not None and need[4 + i]) else None for i, t in enumerate(params)]
        p = Params(*[_ptr(t) for t in params])
        g = Grads(*[_ptr(t) for t in dparams])
        with contextlib.nullcontext() if ctx.place is None else ctx.place.guard():
            _setup(ctx.mctx, ctx.place)
            ctx.mctx.check(lib.mta_backward(ctx.mctx.h, _ptr(q), _ptr(k), _ptr(v), ctypes.byref(p), _ptr(dout),
                                            _ptr(dq), _ptr(dk), _ptr(dv), ctypes.byref(g)), 'backward')
        if ctx.lease is not None:
            # Back to the cache at once (not when autograd frees the graph, after the next step's
            # forward): a training loop then holds one context per layer, not two.
            ctx.lease.release()
            ctx.mctx = None
        return (None, None, dq if need[1] else None, dk if need[2] else None, dv if need[3] else None, *dparams)


def _doc_ids(doc, q):
    """doc as the library takes it: (B, T) int32 on q's device, contiguous; None stays None."""
    if doc is None:
        return None
    if not isinstance(doc, torch.Tensor) or doc.dtype.is_floating_point or doc.dtype.is_complex or doc.dtype == torch.bool:
        raise Error('mtac: doc must be an integer torch.Tensor of document ids, not %s'
                    % (doc.dtype if isinstance(doc, torch.Tensor) else type(doc).__name__))
    if doc.device != q.device:
        raise Error('mtac: doc is on device %s but q is on %s: the tensors of a call must be on one device'
                    % (doc.device, q.device))
    if tuple(doc.shape) != (q.shape[0], q.shape[2]):
        raise Error('mtac: doc has shape %s; for q of shape %s it must be (B, T) = %s'
                    % (tuple(doc.shape), tuple(q.shape), (q.shape[0], q.shape[2])))
    if doc.dtype != torch.int32 and doc.numel() and (int(doc.min()) < -2 ** 31 or int(doc.max()) >= 2 ** 31):
        raise Error('mtac: doc holds ids outside int32')
    return doc.to(torch.int32).contiguous()


def mta_attention(q, k, v, *, layer_id=0, depth_scale=False, dropout=0.0, backend=None, threads=None, doc=None,
                  deterministic=True, **params):
    """The MTA attention core (docs/spec.md section 2) of q (B, H, T, d), k, v (B, H_kv, T, d), float32,
    CPU, contiguous, or CUDA tensors (float32 or bfloat16: docs/python.md, "CUDA tensors"); returns
    (B, H, T, d) in q's dtype, on q's device. Differentiable in q, k, v and every parameter given.
    Grouped-query attention: H_kv (dividing H) key/value heads, query head h reading kv head
    h // (H // H_kv), without repeating k and v; dk, dv sum their query heads' gradients.

    The parameters are keywords named as in the library's table (mtac._lib.PARAM_NAMES, in the
    signature). Each parameter switches its step on; all None is plain causal softmax attention:
      w_pre        (H, c_q, c_k)      pre-softmax key-query convolution, c_k odd   (step 2)
      w_pre_head   (H, H)             pre-softmax head mixing S2[h] = sum_h' W[h,h'] S1[h']
      w_post       (H, c_q', c_k')    post-softmax key-query convolution           (step 5)
      w_post_head  (H/c_h, c_h, c_h)  post-softmax head convolution P2[g*c_h+o] = sum_n W[g,n,o] P1[g*c_h+n]
      gn_weight    (d,)               per-head RMS group norm (eps 1e-5); depth_scale multiplies it
                                      by 1 - (0.8 - 0.6 exp(-0.3 layer_id))
      gate_w (d,), gate_b (1,)        O * sigmoid(O . gate_w + gate_b)
    dropout: probability of dropping an attention weight (applied whenever > 0, like
    F.scaled_dot_product_attention's dropout_p; the mask's seed comes from torch's generator).
    doc: packed documents, (B, T) integer document ids; a run of equal ids is one document, which
    attends and convolves within itself alone, so its rows equal those of the document run as a
    sequence of its own (docs/spec.md section 2.3). None: each sequence is one document.
    backend: 'fused' (default: no (T,T) map) or 'reference' (materialises the maps); CUDA tensors
    run on 'cuda' (None or 'cuda').
    threads: OpenMP threads of the call; default torch.get_num_threads().
    deterministic: True (default) gives the same bits for the same inputs, run after run
    (mta_set_deterministic). False lets the CUDA backend's bfloat16 backward of a key-query
    convolution with another step compute dq and dk, dv in one kernel, adding dk, dv by atomics:
    their last bits then vary run to run (out, dq and the parameters' gradients do not). Elsewhere
    (the host backends, float32, other step combinations) it changes nothing. Bit-exact
    reproducibility (resuming a run) needs it True.
    dropout: a number in [0, 1); the library holds it as a float32, the nearest one to the value
    given (0.1 becomes 0.100000001490116...; below 1 for a value that would round to 1).
    Under torch.autocast('cpu') float16 and bfloat16 inputs are cast to float32 and the op returns
    float32, as for any float32-only op. Double backward (create_graph=True) raises NotImplementedError.
    Raises mtac.Error (a ValueError) with the library's message for anything it refuses."""
    for name in params:
        if name not in PARAM_NAMES:
            raise TypeError('mta_attention() got an unexpected keyword argument %r (its parameters: %s)'
                            % (name, ', '.join(PARAM_NAMES)))
    prm = {n: params.get(n) for n in PARAM_NAMES}
    place = _device.place_of(q)
    if place is None and torch.is_autocast_cpu_enabled():
        # A float32 op under autocast, as torch.cuda.amp.custom_fwd(cast_inputs=torch.float32) makes
        # one (on CUDA only in torch 1.13): float16 and bfloat16 inputs are cast to float32 (their
        # gradients come back in their dtype), the op runs with autocast off and returns float32.
        q, k, v = (_to_float32(x) for x in (q, k, v))
        prm = {n: _to_float32(t) for n, t in prm.items()}
        with torch.autocast('cpu', enabled=False):
            return mta_attention(q, k, v, layer_id=layer_id, depth_scale=depth_scale, dropout=dropout,
                                 backend=backend, threads=threads, doc=doc, deterministic=deterministic, **prm)
    cfg = _config(q, k, v, prm, layer_id, depth_scale, dropout, backend, threads, place)
    deterministic = _deterministic(deterministic)
    doc = _doc_ids(doc, q)
    # bfloat16 q, k, v go as they are (cfg.dtype); the parameters are float32 in the library, so
    # bfloat16 ones (a few numbers per head) are widened, differentiably (their gradients in bf16).
    w = [_to_float32(prm[n]) for n in PARAM_NAMES]
    return _MTAFunction.apply((cfg, place, deterministic), doc, q, k, v, *w)


def _to_float32(t):
    """t in float32 when it is a float16 or bfloat16 tensor (autocast's rule: float64 stays float64)."""
    if isinstance(t, torch.Tensor) and t.dtype in (torch.float16, torch.bfloat16):
        return t.float()
    return t


def _with_parameters(fn):
    """fn's signature with its **params spelled out as the table's keywords (default None), so that
    help() and inspect show mta_attention(q, k, v, *, w_pre=None, ..., gate_b=None, layer_id=0, ...)."""
    sig = inspect.signature(fn)
    ps = [p for p in sig.parameters.values() if p.kind != inspect.Parameter.VAR_KEYWORD]
    at = next(i for i, p in enumerate(ps) if p.kind == inspect.Parameter.KEYWORD_ONLY)
    ps[at:at] = [inspect.Parameter(n, inspect.Parameter.KEYWORD_ONLY, default=None) for n in PARAM_NAMES]
    fn.__signature__ = sig.replace(parameters=ps)
    return fn


_with_parameters(mta_attention)


class _SubLN(nn.Module):
    """Holds the group norm's weight under the authors' name (subln.weight)."""

    def __init__(self, dim):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(dim))


# The authors' config block (facebookresearch/RAM, projects/mta/mta_transformer.py,
# MTATransformerArgs, the `mta:` keys of their configs/*.yaml): every key and its default there.
_AUTHORS_DEFAULTS = dict(use_mta=False, query_kernel_size=1, key_kernel_size=1, pad_key='both', mta_layers=None,
                         after_sm_query_kernel_size=None, after_sm_key_kernel_size=None, init_method='identity',
                         head_kernel_size=None, group_norm=False, layer_norm_rescale=False, curse_norm=False,
                         pre_sm_linear_head=False, post_sm_linear_head=False, add_gating=False, gate_1d=True)
_AUTHORS_BOOLS = ('use_mta', 'group_norm', 'layer_norm_rescale', 'pre_sm_linear_head', 'post_sm_linear_head',
                  'add_gating')
_AUTHORS_SIZES = ('query_kernel_size', 'key_kernel_size', 'after_sm_query_kernel_size', 'after_sm_key_kernel_size',
                  'head_kernel_size')
# Keys that select an option mtac has only at one value: accepted at that value, refused otherwise.
_AUTHORS_FIXED = {
    'pad_key': ('both', "mtac centres the key window (the authors' 'both'); 'left' and 'right' are not supported"),
    'init_method': ('identity', "mtac's initialisation is 'identity' (docs/spec.md section 2.2); "
                                "'const', 'uniform', 'normal' and 'diagonal' are not supported"),
    'gate_1d': (True, 'mtac has the 1-d gate only (one scalar per head and position); the d x d gate is not '
                      'supported'),
    'curse_norm': (False, "it rescales the block's attention_norm and ffn_norm, outside the attention core; not "
                          "supported"),
}


def _config_items(cfg):
    """The keys and values of a config block: a mapping (dict, OmegaConf's DictConfig), a dataclass
    (their MTATransformerArgs) or an object with attributes (SimpleNamespace, argparse.Namespace)."""
    if isinstance(cfg, collections.abc.Mapping):
        return dict(cfg)
    if dataclasses.is_dataclass(cfg) and not isinstance(cfg, type):
        return {f.name: getattr(cfg, f.name) for f in dataclasses.fields(cfg)}
    if hasattr(cfg, 'keys') and hasattr(cfg, '__getitem__'):
        return {k: cfg[k] for k in cfg.keys()}
    if hasattr(cfg, '__dict__'):
        return {k: v for k, v in vars(cfg).items() if not k.startswith('_')}
    raise TypeError('MultiTokenAttention.from_config: cfg must be a dict or an object with attributes (the '
                    "authors' MTATransformerArgs), not %s" % type(cfg).__name__)


def _mta_layers(v):
    """The authors' mta_layers ("2,6,10", their format; an int or a list of ints too) as a set, None
    for all layers; raises ValueError."""
    if v is None:
        return None
    if isinstance(v, str):
        return {int(x) for x in v.split(',')}
    if isinstance(v, int) and not isinstance(v, bool):
        return {v}
    if isinstance(v, (list, tuple)) and all(isinstance(x, int) and not isinstance(x, bool) for x in v):
        return set(v)
    raise ValueError(v)


def _from_authors(c, layer_id):
    """MultiTokenAttention's arguments for layer layer_id of the authors' config block c (a dict),
    or raises ValueError listing every key and value mtac does not support."""
    bad = []
    for k in c:
        if k not in _AUTHORS_DEFAULTS:
            bad.append('%s=%r (not a key of the authors\' MTATransformerArgs that mtac knows)' % (k, c[k]))
    a = dict(_AUTHORS_DEFAULTS, **{k: v for k, v in c.items() if k in _AUTHORS_DEFAULTS})
    for k in _AUTHORS_BOOLS:
        if a[k] is None:  # Optional[bool]: their code reads it as a truth value
            a[k] = False
        if not isinstance(a[k], bool):
            bad.append('%s=%r (must be true or false)' % (k, a[k]))
    for k in _AUTHORS_SIZES:
        v = a[k]
        if v is not None and (isinstance(v, bool) or not isinstance(v, int) or v < 1):
            bad.append('%s=%r (must be an int >= 1 or None)' % (k, v))
    for k, (want, why) in _AUTHORS_FIXED.items():
        if a[k] != want or type(a[k]) is not type(want):
            bad.append('%s=%r (%s)' % (k, a[k], why))
    try:
        layers = _mta_layers(a['mta_layers'])
    except ValueError:
        bad.append("mta_layers=%r (must be None or layer indices as \"2,6,10\")" % (a['mta_layers'],))
        layers = None
    if bad:
        raise ValueError('MultiTokenAttention.from_config: not supported by mtac: ' + '; '.join(bad))
    heads = a['head_kernel_size'] is not None or a['pre_sm_linear_head'] or a['post_sm_linear_head']
    # The authors' BaseTransformer: with use_mta, the layers of mta_layers (all when None) are
    # MTA layers; any other layer keeps the head steps without the key-query convolutions
    # (query_kernel_size and after_sm_query_kernel_size None) when a head step is on, else it
    # is a regular attention layer (use_mta False). Group norm and gate are in every layer.
    mta_layer = a['use_mta'] and (layers is None or layer_id in layers)
    qk = mta_layer
    head_steps = mta_layer or (a['use_mta'] and heads)
    return dict(query_kernel_size=a['query_kernel_size'] if qk else None, key_kernel_size=a['key_kernel_size'],
                after_sm_query_kernel_size=a['after_sm_query_kernel_size'] if qk else None,
                after_sm_key_kernel_size=a['after_sm_key_kernel_size'],
                pre_sm_linear_head=head_steps and a['pre_sm_linear_head'],
                head_kernel_size=a['head_kernel_size'] if head_steps else None,
                post_sm_linear_head=head_steps and a['post_sm_linear_head'],
                group_norm=a['group_norm'],
                # Their RMSNorm rescales only inside the group norm: no group norm, no rescale.
                layer_norm_rescale=a['group_norm'] and a['layer_norm_rescale'],
                add_gating=a['add_gating'], gate_1d=a['gate_1d'], layer_id=layer_id)


class MultiTokenAttention(nn.Module):
    """The MTA attention core as a module: forward(q, k, v) with q, k, v of shape (B, H, T, d)
    (after the projections and RoPE; k and v may have fewer heads, H_kv dividing H, as the
    authors' n_kv_heads) returns (B, H, T, d), computed by mta_attention.

    Arguments, defaults, parameters and initialisation follow the authors' attention
    (facebookresearch/RAM, projects/mta, class Attention with MTATransformerArgs), so that its
    weights load by name (strictly). MultiTokenAttention.from_config builds one layer from their
    config block (the `mta:` keys). Parameter (shape) <- argument that creates it; the mtac weight:
      mta_kernel          (H, 1, c_q, c_k)    query_kernel_size=c_q, key_kernel_size=c_k (default
                                              1 and 1, as theirs: a 1x1 kernel; None switches it off)
                                              -> w_pre = mta_kernel.view(H, c_q, c_k)
      wpsm.weight         (H, H)              pre_sm_linear_head=True -> w_pre_head (out, in)
      mta_kernel_after_sm (H, 1, c_q', c_k')  after_sm_query_kernel_size, after_sm_key_kernel_size
                                              (default None: off) -> w_post
      head_kernel         (H/c_h, c_h, c_h)   head_kernel_size=c_h -> w_post_head [g, in, out]
      wposm.weight        (H, H)              post_sm_linear_head=True (instead of head_kernel_size)
                                              -> w_post_head = wposm.weight.T[None] (c_h = H)
      subln.weight        (d,)                group_norm=True -> gn_weight; layer_norm_rescale=True
                                              adds the depth scaling of layer layer_id
      gate.weight (1, d), gate.bias (1,)      add_gating=True (gate_1d) -> gate_w, gate_b
    A convolution exists when both of its sizes are given (not None), as in the authors' code.
    Initialisation ("identity", the authors' init_method and docs/spec.md section 2.2): convolution
    kernels 1 at [c_q-1, (c_k-1)//2] (a 1x1 kernel is 1), wpsm, wposm and each head_kernel group
    the identity, subln.weight 1, gate.weight truncated normal (std init_std, cut at 3 std;
    init_std defaults to dim ** -0.5 with dim = n_heads * head_dim unless dim= is given, as the
    authors'). gate.bias: gate_bias_init='zero' (default; the spec's choice) sets 0,
    gate_bias_init='linear' keeps nn.Linear's default, uniform in +-1/sqrt(d), as the authors' code.
    With identity kernels and no norm or gate the module is plain causal attention.
    The authors' pad_key is "both" (the only one here); their gate_1d=False (a d x d gate) and
    triton path are not supported. dropout applies in training mode only (self.training).
    backend, threads and deterministic are mta_attention's, for each call.
    To load the authors' weights into a module named `core` inside your attention, map
    "attention.<name>" to "attention.core.<name>"."""

    def __init__(self, n_heads, head_dim, *, query_kernel_size=1, key_kernel_size=1,
                 after_sm_query_kernel_size=None, after_sm_key_kernel_size=None, pre_sm_linear_head=False,
                 head_kernel_size=None, post_sm_linear_head=False, group_norm=False, layer_norm_rescale=False,
                 add_gating=False, gate_1d=True, layer_id=0, dropout=0.0, dim=None, init_std=None,
                 gate_bias_init='zero', backend=None, threads=None, deterministic=True):
        super().__init__()
        if not gate_1d:
            raise Error('mtac: only the 1-d gate (gate_1d=True, one scalar per head and position) is supported')
        if head_kernel_size is not None and post_sm_linear_head:
            raise Error('mtac: head_kernel_size and post_sm_linear_head are alternatives (the authors\' rule)')
        if layer_norm_rescale and not group_norm:
            raise Error('mtac: layer_norm_rescale rescales the group norm: set group_norm=True')
        if gate_bias_init not in ('zero', 'linear'):
            raise Error("mtac: gate_bias_init=%r must be 'zero' (mtac's default) or 'linear' (nn.Linear's "
                        "default, the authors')" % (gate_bias_init,))
        # The authors' rule: a key-query kernel exists when both of its sizes are given.
        sizes = dict(query_kernel_size=query_kernel_size, key_kernel_size=key_kernel_size,
                     after_sm_query_kernel_size=after_sm_query_kernel_size,
                     after_sm_key_kernel_size=after_sm_key_kernel_size, head_kernel_size=head_kernel_size)
        sizes = {n: None if s is None else _size(n, s) for n, s in sizes.items()}
        pre = (None if sizes['query_kernel_size'] is None or sizes['key_kernel_size'] is None
               else (sizes['query_kernel_size'], sizes['key_kernel_size']))
        post = (None if sizes['after_sm_query_kernel_size'] is None or sizes['after_sm_key_kernel_size'] is None
                else (sizes['after_sm_query_kernel_size'], sizes['after_sm_key_kernel_size']))
        head_kernel_size = sizes['head_kernel_size']
        H, d = _size('n_heads', n_heads), _size('head_dim', head_dim)
        layer_id = _size('layer_id', layer_id, 0)
        _dropout32(dropout)
        if threads is not None:
            _size('threads', threads)
        self.n_heads, self.head_dim = H, d
        self.layer_id, self.layer_norm_rescale, self.dropout = layer_id, layer_norm_rescale, dropout
        self.backend, self.threads, self.deterministic = backend, threads, _deterministic(deterministic)
        self.dim = dim if dim is not None else H * d
        self.init_std, self.gate_bias_init = init_std, gate_bias_init
        # The same checks as a call (kernel sizes, c_h dividing H), at construction.
        probe = lib.mta_config_default(1, H, 1, d)
        probe.pre_cq, probe.pre_ck = pre or (0, 0)
        probe.post_cq, probe.post_ck = post or (0, 0)
        probe.post_ch = head_kernel_size or 0
        check_config(probe)
        self.mta_kernel = nn.Parameter(torch.empty(H, 1, *pre)) if pre is not None else None
        self.wpsm = nn.Linear(H, H, bias=False) if pre_sm_linear_head else None
        self.mta_kernel_after_sm = nn.Parameter(torch.empty(H, 1, *post)) if post is not None else None
        self.head_kernel = (nn.Parameter(torch.empty(H // head_kernel_size, head_kernel_size, head_kernel_size))
                            if head_kernel_size is not None else None)
        self.wposm = nn.Linear(H, H, bias=False) if post_sm_linear_head else None
        self.subln = _SubLN(d) if group_norm else None
        self.gate = nn.Linear(d, 1) if add_gating else None
        self.reset_parameters()

    @classmethod
    def from_config(cls, cfg, *, n_heads, head_dim, layer_id=0, dropout=0.0, dim=None, init_std=None,
                    gate_bias_init='zero', backend=None, threads=None, deterministic=True):
        """Layer layer_id's attention core from the authors' config block cfg (the `mta:` keys of
        their configs/*.yaml, a dict, or their MTATransformerArgs or any object with those
        attributes); absent keys take their defaults (use_mta false, 1x1 query/key kernel, ...).
        With use_mta, a layer in mta_layers (all layers when None) has every step configured;
        another layer keeps the head mixing, head convolution, group norm and gate without the
        key-query convolutions, or is plain attention with group norm and gate when no head step is
        on (their BaseTransformer's rule); without use_mta every layer is plain attention with the
        group norm and gate if set (as their Attention builds it). n_heads, head_dim, dropout (their
        model-level `dropout`) and dim (their model dim, for init_std's default dim ** -0.5) are
        their model's; backend, threads and deterministic go to the module as they are. Raises
        ValueError naming every key and value mtac does not support (an unknown key, pad_key other
        than 'both', init_method other than 'identity', gate_1d false, curse_norm true, ...), and
        mtac.Error for sizes the library refuses. See docs/python.md."""
        if isinstance(layer_id, bool) or not isinstance(layer_id, int) or layer_id < 0:
            raise ValueError('MultiTokenAttention.from_config: layer_id=%r must be an int >= 0' % (layer_id,))
        kw = _from_authors(_config_items(cfg), layer_id)
        return cls(n_heads, head_dim, **kw, dropout=dropout, dim=dim, init_std=init_std, gate_bias_init=gate_bias_init,
                   backend=backend, threads=threads, deterministic=deterministic)

    @torch.no_grad()
    def reset_parameters(self):
        """The identity initialisation (see the class docstring)."""
        for w in (self.mta_kernel, self.mta_kernel_after_sm):
            if w is not None:
                w.zero_()
                w[:, 0, -1, w.shape[-1] // 2] = 1.0
        for lin in (self.wpsm, self.wposm):
            if lin is not None:
                lin.weight.copy_(torch.eye(self.n_heads))
        if self.head_kernel is not None:
            g, c_h, _ = self.head_kernel.shape
            self.head_kernel.copy_(torch.eye(c_h).repeat(g, 1, 1))
        if self.subln is not None:
            self.subln.weight.fill_(1.0)
        if self.gate is not None:
            std = self.init_std if self.init_std is not None else self.dim ** -0.5
            nn.init.trunc_normal_(self.gate.weight, mean=0.0, std=std, a=-3 * std, b=3 * std)
            if self.gate_bias_init == 'zero':
                self.gate.bias.zero_()
            else:  # nn.Linear.reset_parameters' bias: uniform in +-1/sqrt(fan_in), fan_in = d
                bound = 1.0 / math.sqrt(self.head_dim)
                nn.init.uniform_(self.gate.bias, -bound, bound)

    def mtac_params(self):
        """The module's weights as mta_attention's keyword arguments (views, no copies, except
        wposm's transpose)."""
        H = self.n_heads
        p = {}
        if self.mta_kernel is not None:
            p['w_pre'] = self.mta_kernel.view(H, *self.mta_kernel.shape[2:])
        if self.wpsm is not None:
            p['w_pre_head'] = self.wpsm.weight
        if self.mta_kernel_after_sm is not None:
            p['w_post'] = self.mta_kernel_after_sm.view(H, *self.mta_kernel_after_sm.shape[2:])
        if self.head_kernel is not None:
            p['w_post_head'] = self.head_kernel
        elif self.wposm is not None:
            p['w_post_head'] = self.wposm.weight.t().contiguous().unsqueeze(0)
        if self.subln is not None:
            p['gn_weight'] = self.subln.weight
        if self.gate is not None:
            p['gate_w'] = self.gate.weight.view(-1)
            p['gate_b'] = self.gate.bias
        return p

    def forward(self, q, k, v, doc=None):
        """q (B, H, T, d), k, v (B, H_kv, T, d); doc: (B, T) document ids of packed documents
        (mta_attention), or None."""
        # First, as no parameter may tell: with only the group norm and gate (shapes (d,)), q of
        # another head count would pass every other check.
        if isinstance(q, torch.Tensor) and q.dim() == 4 and (q.shape[1], q.shape[3]) != (self.n_heads, self.head_dim):
            raise Error('mtac: q has shape %s, %d heads of size %d, but this MultiTokenAttention has n_heads=%d, '
                        'head_dim=%d' % (tuple(q.shape), q.shape[1], q.shape[3], self.n_heads, self.head_dim))
        return mta_attention(q, k, v, **self.mtac_params(), layer_id=self.layer_id,
                             depth_scale=self.layer_norm_rescale, dropout=self.dropout if self.training else 0.0,
                             backend=self.backend, threads=self.threads, doc=doc, deterministic=self.deterministic)

    def extra_repr(self):
        return 'n_heads=%d, head_dim=%d, layer_id=%d, dropout=%g' % (self.n_heads, self.head_dim, self.layer_id,
                                                                     self.dropout)
