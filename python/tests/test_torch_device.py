"""mtac.torch on device tensors (docs/python.md, "CUDA tensors"), every test in two modes:
  emu   CPU tensors sent down the device path on the cuda-emu backend (mtac._device.emulate: the
        code that passes CUDA tensors' pointers, streams and cached contexts, run in CI without a
        GPU; needs a libmtac built with -DMTAC_CUDA_EMU=ON, as tests/test_python.sh builds it);
  cuda  CUDA tensors on the CUDA backend: needs a GPU (torch.cuda.is_available()) and the CUDA
        module (libmtac_cuda.so); reported skipped without them, never passed.
Each is checked against the fused CPU backend on the same inputs. unittest classes, so that pytest
runs them here and `python3 -m unittest` on the GPU machine of scripts/gpu_check.sh, which may
have no pytest."""
import contextlib
import copy
import math
import os
import sys
import unittest

import torch

HERE = os.path.dirname(os.path.abspath(__file__))
for _d in (HERE, os.path.join(os.path.dirname(os.path.dirname(HERE)), 'tests', 'ref')):
    if _d not in sys.path:
        sys.path.insert(0, _d)

import mtac  # noqa: E402
from mtac import _device, _lib  # noqa: E402
from mtac.torch import MultiTokenAttention, mta_attention  # noqa: E402
from cases import make_case  # noqa: E402
from maxerr import max_abs, max_abs_diff  # noqa: E402
from mta_ref import PARAM_NAMES  # noqa: E402
from tol import chain_bound, mta_sums  # noqa: E402

# Every step on, grouped-query attention, packed documents, the depth scale: the paths through
# the CUDA backend's host code (mta_cuda.cu) that a call can take. T = 20 crosses the 16-row tiles.
FULL = dict(B=2, H=4, H_kv=2, T=20, d=8, pre=(3, 5), pre_head=True, post=(2, 3), c_h=2, gn=True, gate=True,
            depth_scale=True, layer_id=3, docs=[7, 13])
PLAIN = dict(B=1, H=2, T=33, d=16)


def _available(name):
    try:
        return bool(_lib.lib.mta_backend_available(_device._backend_id(name)))
    except ImportError:  # a library without the backend's name
        return False


class _Mode:
    """The device of a mode: emu (CPU tensors, emulated) or cuda."""
    mode = None

    def setUp(self):
        if self.mode == 'emu' and not _available('cuda-emu'):
            self.skipTest('this libmtac has no cuda-emu backend (build it with -DMTAC_CUDA_EMU=ON)')
        if self.mode == 'cuda' and not torch.cuda.is_available():
            self.skipTest('no GPU: torch.cuda.is_available() is False')
        if self.mode == 'cuda' and not _available('cuda'):
            self.skipTest('this libmtac cannot run the CUDA backend (no libmtac_cuda.so beside it, or no GPU)')
        self.dev = torch.device('cuda', torch.cuda.current_device()) if self.mode == 'cuda' else torch.device('cpu')
        # A device other than q's: the CPU for CUDA tensors, meta for the emulator's CPU tensors.
        self.other = torch.device('cpu') if self.mode == 'cuda' else torch.device('meta')
        _device.clear_cache()

    def on(self, stream=0):
        """The block in which the mode's tensors take the device path."""
        return _device.emulate(stream) if self.mode == 'emu' else contextlib.nullcontext()

    def run_op(self, tensors, meta, dtype=torch.float32, device=True, **kw):
        """Forward and backward of sum(out * dout) on the device (device=False: the fused CPU
        backend, the reference) with q, k, v in dtype and mta_attention's keywords kw; the output
        and gradients named as cases.reference's, as float32 CPU tensors."""
        dev = self.dev if device else torch.device('cpu')
        x = {n: t.detach().to(dev, dtype if n in ('q', 'k', 'v', 'dout') else torch.float32, copy=True).requires_grad_(
            n not in ('dout', 'doc')) for n, t in tensors.items() if n != 'doc'}
        doc = tensors['doc'].to(dev, torch.int64) if 'doc' in tensors else None
        params = {n: x[n] for n in PARAM_NAMES if n in x}
        with self.on() if device else contextlib.nullcontext():
            out = mta_attention(x['q'], x['k'], x['v'], **params, doc=doc, layer_id=int(meta.get('layer_id', '0')),
                                depth_scale=meta.get('depth_scale') == '1', **kw)
            out.backward(x['dout'])
        self.assertEqual(out.dtype, dtype)
        got = {'out': out}
        got.update({'grad.' + n: x[n].grad for n in ['q', 'k', 'v'] + list(params)})
        for n, t in got.items():
            self.assertEqual(t.device, dev, n)
        return {n: t.detach().float().cpu() for n, t in got.items()}

    def assert_close(self, got, exp, bound, per_tensor=False):
        """max|got - exp| <= bound * scale for every tensor; scale the largest |value| of the
        expected tensors (tol.py), of each one when per_tensor."""
        self.assertEqual(sorted(got), sorted(exp))
        scale = max(max_abs(t) for t in exp.values())
        for n in exp:
            s = max_abs(exp[n]) if per_tensor else scale
            # max_abs is inf on a NaN or inf: a non-finite reference would let any result pass
            self.assertTrue(math.isfinite(s), n + ': the reference is not finite')
            self.assertLessEqual(max_abs_diff(got[n], exp[n]), bound * s, n)


class _Recorder:
    """Records the library calls of the op (the handle, stream and pointers each was given)."""

    def __enter__(self):
        self.calls, lib = [], _lib.lib
        self.saved = (lib.mta_set_stream, lib.mta_forward, lib.mta_backward)
        stream, fwd, bwd = self.saved

        def set_stream(h, s):
            self.calls.append(('stream', h.value, s))
            return stream(h, s)

        def forward(h, q, k, v, p, out):
            self.calls.append(('forward', h.value, q.value, k.value, v.value, p._obj, out.value))
            return fwd(h, q, k, v, p, out)

        def backward(h, q, k, v, p, dout, dq, dk, dv, g):
            self.calls.append(('backward', h.value, q.value, k.value, v.value, p._obj))
            return bwd(h, q, k, v, p, dout, dq, dk, dv, g)
        lib.mta_set_stream, lib.mta_forward, lib.mta_backward = set_stream, forward, backward
        return self

    def __exit__(self, *exc):
        _lib.lib.mta_set_stream, _lib.lib.mta_forward, _lib.lib.mta_backward = self.saved
        return False

    def of(self, kind):
        return [c for c in self.calls if c[0] == kind]


class _Launches:
    """Records the kernels each forward and its backward launch (mta_ctx_record_launches): one
    set of names per forward, in calls (with the context's handle)."""

    def __enter__(self):
        lib = _lib.lib
        self.saved = (lib.mta_forward, lib.mta_backward)
        fwd, bwd = self.saved
        self.calls = []

        def forward(h, *args):
            self.calls.append((h.value, set()))
            assert lib.mta_ctx_record_launches(h, 1) == 0
            return fwd(h, *args)

        def backward(h, *args):
            rc = bwd(h, *args)
            i, name = 0, lib.mta_ctx_launch(h, 0, None)
            while name is not None:
                self.calls[-1][1].add(name.decode())
                i, name = i + 1, lib.mta_ctx_launch(h, i + 1, None)
            lib.mta_ctx_record_launches(h, 0)
            return rc
        lib.mta_forward, lib.mta_backward = forward, backward
        return self

    def __exit__(self, *exc):
        _lib.lib.mta_forward, _lib.lib.mta_backward = self.saved
        return False


class _Tests(_Mode):
    def test_matches_cpu_float32(self):
        """Every step, grouped-query attention and documents, and plain attention: the output and
        every gradient equal the fused CPU backend's within float32 rounding."""
        for spec in (FULL, PLAIN):
            tensors, meta = make_case(spec, torch.Generator().manual_seed(46))
            # Two float32 computations of one function, each within chain_bound * scale of the
            # exact values (tol.py), so within twice that of each other.
            self.assert_close(self.run_op(tensors, meta), self.run_op(tensors, meta, device=False),
                              2 * chain_bound(mta_sums(**spec)))

    def test_bfloat16(self):
        """bfloat16 q, k, v (float32 parameters) run with the library's bf16 precision and storage;
        the result and the gradients come back in bfloat16."""
        for spec in (PLAIN, dict(B=1, H=2, T=24, d=16, pre=(3, 5), gn=True, gate=True)):
            tensors, meta = make_case(spec, torch.Generator().manual_seed(47))
            for n in ('q', 'k', 'v', 'dout'):
                tensors[n] = tensors[n].bfloat16().float()
            # The CPU reference runs in float32 on the same bf16 values. The library's bf16 path
            # is within 3u kappa of each result's scale, u = 2^-9, kappa = 10 (20 with the group
            # norm): test_attn_backends.c's bf16_tolerance, derived there; the op adds one
            # rounding to bf16 of out and of dq, dk, dv (u of each value, at most u of the scale).
            kappa = 20 if spec.get('gn') else 10
            got = self.run_op(tensors, meta, torch.bfloat16)
            self.assert_close(got, self.run_op(tensors, meta, device=False), (3 * kappa + 1) * 2.0 ** -9,
                              per_tensor=True)
        # The bf16 arithmetic ran: the kernel's gradient (float32, not rounded by the op) is off
        # the float32 run's by far more than float32 rounding (the attention weights rounded to
        # bf16, 2^-9, against the bound below, about 2^-14).
        f32 = self.run_op(tensors, meta)
        bound = 2 * chain_bound(mta_sums(**spec)) * max_abs(f32['grad.w_pre'])
        self.assertGreater(max_abs_diff(got['grad.w_pre'], f32['grad.w_pre']), bound)

    def test_bfloat16_storage(self):
        """bfloat16 tensors go to the library as they are (mta_config.dtype; the library writes the
        bfloat16 output and gradients), and the result is the float32 tensors' within a derived
        bound."""
        for spec in (PLAIN, dict(B=1, H=2, T=24, d=16, pre=(3, 5))):
            tensors, meta = make_case(spec, torch.Generator().manual_seed(49))  # float32, not bf16 values
            got = self.run_op(tensors, meta, torch.bfloat16)
            # bf16 storage adds one rounding (u = 2^-9 relative) of each input and output. The
            # inputs' (q, k, v, dout) are roundings the bf16 arithmetic of precision MTA_BF16 makes
            # anyway (its tensor-core path rounds q, k, v and dO to bf16, no norm or gate here), so
            # they are within its bound, 3u kappa of each result's scale (kappa = 10:
            # test_attn_backends.c's bf16_tolerance); the outputs' adds u: (3 kappa + 1) u.
            self.assert_close(got, self.run_op(tensors, meta), (3 * 10 + 1) * 2.0 ** -9, per_tensor=True)

    def test_bfloat16_views_off_alignment(self):
        """bfloat16 q, k, v and dout that start 2 bytes into their storage (views) at whole tiles
        (T a multiple of 64, d of 16, where a backend could be tempted to read them in place with
        16-byte loads): the results are the aligned tensors' bit for bit."""
        spec = dict(B=1, H=2, T=64, d=16)
        tensors, meta = make_case(spec, torch.Generator().manual_seed(51))
        x = {n: tensors[n].to(self.dev, torch.bfloat16) for n in ('q', 'k', 'v', 'dout')}

        def run(view):
            def place(t):
                if not view:
                    return t.clone().requires_grad_(True)
                base = torch.zeros(t.numel() + 1, dtype=t.dtype, device=t.device)
                base[1:].copy_(t.reshape(-1))
                return base[1:].view(t.shape).requires_grad_(True)
            q, k, v, dout = (place(x[n]) for n in ('q', 'k', 'v', 'dout'))
            if view:
                self.assertNotEqual(q.data_ptr() % 16, 0)
            with self.on():
                out = mta_attention(q, k, v)
                out.backward(dout.detach())
            return [t.detach().cpu() for t in (out, q.grad, k.grad, v.grad)]
        for a, b in zip(run(False), run(True)):
            self.assertTrue(torch.equal(a, b))

    def test_deterministic_off(self):
        """deterministic=False on a bfloat16 every-step config (both key-query convolutions, both
        head steps, group norm, gate, grouped-query attention) runs k_fa_every_dqkv, which adds dk,
        dv by atomics, and a deterministic call after it on the same cached context does not; out,
        dq and the parameters' gradients are the deterministic run's bit for bit (the same chain and
        sums), dk and dv the same terms summed in another order; a non-bool is refused."""
        spec = dict(B=1, H=4, H_kv=2, T=40, d=16, pre=(3, 5), pre_head=True, post=(2, 3), c_h=2, gn=True, gate=True)
        tensors, meta = make_case(spec, torch.Generator().manual_seed(54))
        with _Launches() as r:
            det, atomic, again = (self.run_op(tensors, meta, torch.bfloat16, deterministic=flag)
                                  for flag in (True, False, True))
        self.assertEqual(len({h for h, _ in r.calls}), 1)  # one context, reused
        self.assertEqual(['k_fa_every_dqkv' in kernels for _, kernels in r.calls], [False, True, False])
        for n in det:
            self.assertTrue(torch.equal(again[n], det[n]), n)
            if n not in ('grad.k', 'grad.v'):
                self.assertTrue(torch.equal(atomic[n], det[n]), n)
        # dk, dv: float32 sums of the same terms in two orders, each within chain_bound * scale of
        # the exact sum (tol.py), so within twice that of each other; then each rounded once to
        # bfloat16 (2^-9 of the scale at most): 2 chain_bound + 2 * 2^-9 of each tensor's scale.
        bound = 2 * chain_bound(mta_sums(**spec)) + 2 * 2.0 ** -9
        self.assert_close({n: atomic[n] for n in ('grad.k', 'grad.v')}, {n: det[n] for n in ('grad.k', 'grad.v')},
                          bound, per_tensor=True)
        q = torch.zeros(1, 2, 4, 4, device=self.dev)
        with self.on():
            for flag in (1, None, 'off'):
                with self.assertRaisesRegex(mtac.Error, 'deterministic=.* must be True or False'):
                    mta_attention(q, q, q, deterministic=flag)

    def test_pointers_and_stream(self):
        """The tensors' own memory goes to the library (a q at an offset in its storage
        included), and the forward and its backward run on the stream current at the forward."""
        g = torch.Generator().manual_seed(48)
        base = torch.randn(2, 2, 12, 8, generator=g).to(self.dev)
        q = base[1:].requires_grad_()  # contiguous, at an offset in base's storage
        k, v = (torch.randn(1, 2, 12, 8, generator=g).to(self.dev).requires_grad_() for _ in range(2))
        w = torch.randn(2, 2, 3, generator=g).to(self.dev).requires_grad_()
        stream = 0x5140 if self.mode == 'emu' else torch.cuda.Stream(self.dev)
        with _Recorder() as r:
            if self.mode == 'emu':
                with self.on(stream):
                    out = mta_attention(q, k, v, w_pre=w)
                    out.sum().backward()
                want = stream
            else:
                stream.wait_stream(torch.cuda.current_stream(self.dev))  # q, k, v, w were made on that one
                with torch.cuda.stream(stream):
                    out = mta_attention(q, k, v, w_pre=w)
                out.sum().backward()  # autograd runs it on the forward's stream
                torch.cuda.synchronize()
                want = stream.cuda_stream
        (f,), (b,) = r.of('forward'), r.of('backward')
        self.assertEqual(f[2:5], (q.data_ptr(), k.data_ptr(), v.data_ptr()))
        self.assertEqual(b[2:5], (q.data_ptr(), k.data_ptr(), v.data_ptr()))
        self.assertEqual((f[5].w_pre, b[5].w_pre, f[6]), (w.data_ptr(), w.data_ptr(), out.data_ptr()))
        self.assertEqual(r.of('stream'), [('stream', f[1], want), ('stream', f[1], want)])
        self.assertEqual(b[1], f[1])
        exp = mta_attention(q.detach().cpu(), k.detach().cpu(), v.detach().cpu(), w_pre=w.detach().cpu())
        # As test_matches_cpu_float32 (one forward: the forward's sums alone would do).
        spec = dict(B=1, H=2, T=12, d=8, pre=(2, 3))
        self.assert_close({'out': out.detach().cpu()}, {'out': exp}, 2 * chain_bound(mta_sums(**spec)))

    def test_context_cache(self):
        """A context per device and config, reused: calls one after another share one; a forward
        holds its own until its backward, so two layers of one config each get theirs and their
        backwards stay right; a no-grad forward returns it at once; the cache frees its own."""
        spec = dict(B=1, H=2, T=16, d=8, pre=(2, 3), gn=True)
        layers = [make_case(spec, torch.Generator().manual_seed(s))[0] for s in (50, 51)]
        exp = [self.run_op(t, {}, device=False) for t in layers]
        with _Recorder() as r:
            got = [self.run_op(layers[0], {}), self.run_op(layers[0], {})]
        handles = {c[1] for c in r.of('forward')}
        self.assertEqual(len(handles), 1)
        self.assertEqual(list(_device.cached_contexts().values()), [1])
        bound = 2 * chain_bound(mta_sums(**spec))
        self.assert_close(got[1], exp[0], bound)
        # Two forwards, then the backwards in reverse order (as a model's).
        x = [{n: t.to(self.dev, copy=True).requires_grad_(n != 'dout') for n, t in layer.items()} for layer in layers]
        with _Recorder() as r, self.on():
            outs = [mta_attention(a['q'], a['k'], a['v'], w_pre=a['w_pre'], gn_weight=a['gn_weight']) for a in x]
            for o, a in reversed(list(zip(outs, x))):
                o.backward(a['dout'])
        self.assertEqual(len({c[1] for c in r.of('forward')}), 2)
        for o, a, e in zip(outs, x, exp):
            got = {'out': o.detach().cpu()}
            got.update({'grad.' + n: a[n].grad.cpu() for n in ('q', 'k', 'v', 'w_pre', 'gn_weight')})
            self.assert_close(got, e, bound)
        self.assertEqual(list(_device.cached_contexts().values()), [2])
        with self.on(), torch.no_grad():
            mta_attention(x[0]['q'], x[0]['k'], x[0]['v'], w_pre=x[0]['w_pre'], gn_weight=x[0]['gn_weight'])
        self.assertEqual(list(_device.cached_contexts().values()), [2])
        # retain_graph: the second backward would read a context the cache may have lent again.
        a = x[0]
        with self.on():
            out = mta_attention(a['q'], a['k'], a['v'], w_pre=a['w_pre'])
            out.sum().backward(retain_graph=True)
            with self.assertRaisesRegex(mtac.Error, 'second backward'):
                out.sum().backward()
        _device.clear_cache()
        self.assertEqual(_device.cached_contexts(), {})

    def test_errors(self):
        """Devices, dtypes and layouts are refused with clear messages, and shapes and settings
        with exactly the CPU's messages."""
        g = torch.Generator().manual_seed(52)
        q, k, v = (torch.randn(1, 2, 6, 4, generator=g).to(self.dev) for _ in range(3))
        w = torch.zeros(2, 2, 3, device=self.dev)
        bad = {
            'on one device': [lambda: mta_attention(q, k.to(self.other), v),
                              lambda: mta_attention(q, k, v, w_pre=w.to(self.other)),
                              lambda: mta_attention(q, k, v, doc=torch.zeros(1, 6, dtype=torch.long, device=self.other))],
            'dtype torch.float64': [lambda: mta_attention(q.double(), k.double(), v.double())],
            'dtype torch.float16': [lambda: mta_attention(q.half(), k.half(), v.half())],
            'k has dtype torch.bfloat16': [lambda: mta_attention(q, k.bfloat16(), v)],
            'w_pre has dtype torch.bfloat16': [lambda: mta_attention(q, k, v, w_pre=w.bfloat16())],
            'not contiguous': [lambda: mta_attention(q.transpose(2, 3), k.transpose(2, 3), v.transpose(2, 3))],
            'pass backend=None': [lambda: mta_attention(q, k, v, backend='fused')],
        }
        with self.on():
            for words, calls in bad.items():
                for call in calls:
                    with self.assertRaisesRegex(mtac.Error, words):
                        call()
        same = [lambda q, k, v: mta_attention(q, k[:, :, :4].contiguous(), v),
                lambda q, k, v: mta_attention(q[0], k[0], v[0]),
                lambda q, k, v: mta_attention(q, k, v, w_pre=torch.zeros(2, 2, 4, device=q.device)),
                lambda q, k, v: mta_attention(q, k, v, w_pre=torch.zeros(3, 2, 3, device=q.device)),
                lambda q, k, v: mta_attention(q, k, v, gate_w=torch.zeros(4, device=q.device)),
                lambda q, k, v: mta_attention(q, k, v, doc=torch.zeros(1, 5, dtype=torch.long, device=q.device)),
                lambda q, k, v: mta_attention(q, k, v, dropout=1.0)]
        for call in same:
            with self.assertRaises(mtac.Error) as cpu:
                call(q.cpu(), k.cpu(), v.cpu())
            with self.on(), self.assertRaises(mtac.Error) as dev:
                call(q, k, v)
            self.assertEqual(str(dev.exception), str(cpu.exception))

    def test_module(self):
        """MultiTokenAttention with the 830M layer's steps, moved to the device: its output and
        its parameters' gradients equal the module's on the CPU."""
        torch.manual_seed(53)
        m = MultiTokenAttention(4, 8, query_kernel_size=3, key_kernel_size=5, after_sm_query_kernel_size=2,
                                after_sm_key_kernel_size=3, pre_sm_linear_head=True, head_kernel_size=2,
                                group_norm=True, add_gating=True, gate_bias_init='linear')
        with torch.no_grad():
            for p in m.parameters():
                p.add_(0.1 * torch.randn_like(p))
        md = copy.deepcopy(m).to(self.dev)
        q, k, v = (torch.randn(1, 4, 18, 8) for _ in range(3))
        m(q, k, v).square().sum().backward()
        with self.on():
            out = md(q.to(self.dev), k.to(self.dev), v.to(self.dev))
            out.square().sum().backward()
        exp = {'out': m(q, k, v).detach()}
        exp.update({n: p.grad for n, p in m.named_parameters()})
        got = {'out': out.detach().cpu()}
        got.update({n: p.grad.cpu() for n, p in md.named_parameters()})
        # The loss's gradient 2 out adds one rounding to each input gradient: nothing next to the
        # chain's bound (tol.py), within twice which the two computations agree.
        spec = dict(B=1, H=4, T=18, d=8, pre=(3, 5), post=(2, 3), c_h=2)
        self.assert_close(got, exp, 2 * chain_bound(mta_sums(**spec)))


class TestEmulated(_Tests, unittest.TestCase):
    mode = 'emu'


class TestCuda(_Tests, unittest.TestCase):
    mode = 'cuda'


if __name__ == '__main__':
    unittest.main()
