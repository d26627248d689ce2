#!/usr/bin/env python3
"""Benchmarks mtac's PyTorch op against naive PyTorch MTA, side by side in one run (docs/python.md).

    build/python-venv/bin/python bench/bench_torch_op.py [--threads N] [--T-step 2048] [--T-mem 4096]
                                                           [--T-op 2048] [--mtac build/mtac] [--skip-naive-step]

Run it with a Python where the mtac package is installed (pip install ./python; the test suite
leaves one in build/python-venv). It prints the CPU, OpenBLAS's core and configuration and the
thread count, then:
  1. step:   a training step (forward, cross-entropy, backward, AdamW) of the lm10m shape (dim 320,
             8 layers, 8 heads of 40, SwiGLU 864, vocab 259; MTA in the 830M pattern: 6x11 pre and
             post key-query convolutions in layers 2 and 6, head mixing, head convolution over all
             heads, group norm and gate in every layer), B=1 at T=--T-step, with the attention core
             either mtac.torch.MultiTokenAttention or the naive PyTorch MTA (tests/ref/mta_ref.py
             with F.conv2d, the authors' style); best of --reps steps after one warm-up.
  2. memory: the peak resident memory added by one attention core's forward and backward (B=1, H=8,
             d=40, the 830M layer setting) at T=--T-mem, each in a fresh process.
  3. op:     forward+backward of the op from Python against `mtac bench attn --impl mta` for the
             same shape (B=1, H=8, d=64, T=--T-op, the 830M layer setting), best of --reps.
Every measurement of one item runs in its own subprocess, one after the other, with the same
thread count. When OpenBLAS picks its generic Prescott kernels on a CPU it does not know, the
script restarts itself with OPENBLAS_CORETYPE set as `mtac` does (README, "OpenBLAS core").
"""
import argparse
import ctypes
import ctypes.util
import json
import os
import subprocess
import sys
import time

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(REPO, 'tests', 'ref'))


def openblas():
    """(corename, config) of the OpenBLAS loaded in this process (torch's and libmtac's)."""
    for name in ('libopenblas.so.0', 'libblas.so.3'):
        try:
            lib = ctypes.CDLL(name)
            lib.openblas_get_corename.restype = ctypes.c_char_p
            lib.openblas_get_config.restype = ctypes.c_char_p
            return lib.openblas_get_corename().decode(), lib.openblas_get_config().decode()
        except (OSError, AttributeError):
            continue
    return 'unknown', 'unknown'


def cpu_model():
    try:
        with open('/proc/cpuinfo') as f:
            for line in f:
                if line.startswith('model name'):
                    return line.split(':', 1)[1].strip()
    except OSError:
        pass
    return 'unknown'


def fix_blas_core():
    if os.environ.get('OPENBLAS_CORETYPE') or os.environ.get('MTAC_KEEP_BLAS_CORE'):
        return
    import torch  # noqa: F401  (loads the BLAS)
    core, _ = openblas()
    if core.lower() != 'prescott':
        return
    flags = open('/proc/cpuinfo').read()
    want = 'SkylakeX' if ' avx512f' in flags else 'Haswell' if ' avx2' in flags else None
    if want:
        env = dict(os.environ, OPENBLAS_CORETYPE=want, MTAC_KEEP_BLAS_CORE='1')
        os.execve(sys.executable, [sys.executable] + sys.argv, env)


def peak_reset():
    """Resets the peak RSS (VmHWM); returns the current RSS in kB."""
    ctypes.CDLL(ctypes.util.find_library('c')).malloc_trim(0)
    with open('/proc/self/clear_refs', 'w') as f:
        f.write('5')
    return status_kb('VmRSS')


def status_kb(field):
    with open('/proc/self/status') as f:
        for line in f:
            if line.startswith(field + ':'):
                return int(line.split()[1])
    return 0


def core_params(H, d, gen, qk=True):
    """The 830M layer setting's weights near identity (mtac's names)."""
    import torch
    w = torch.zeros(H, 6, 11)
    w[:, 5, 5] = 1
    p = dict(w_pre_head=torch.eye(H) + 0.1 * torch.randn(H, H, generator=gen),
             w_post_head=(torch.eye(H) + 0.1 * torch.randn(H, H, generator=gen))[None],
             gn_weight=1 + 0.1 * torch.randn(d, generator=gen), gate_w=0.1 * torch.randn(d, generator=gen),
             gate_b=torch.zeros(1))
    if qk:
        p['w_pre'] = w + 0.1 * torch.randn(H, 6, 11, generator=gen)
        p['w_post'] = w + 0.1 * torch.randn(H, 6, 11, generator=gen)
    return p


def naive_core(q, k, v, **p):
    from mta_ref import mta_forward
    return mta_forward(q, k, v, **p, use_conv2d=True)


def mtac_core(q, k, v, **p):
    from mtac.torch import mta_attention
    return mta_attention(q, k, v, **p)


def model(impl, T, seed=0):
    """The lm10m shape (see the module docstring) with the attention core impl ('mtac' or 'naive')."""
    import torch
    from torch import nn
    import torch.nn.functional as F
    dim, L, H, hidden, vocab = 320, 8, 8, 864, 259
    hd = dim // H
    core = mtac_core if impl == 'mtac' else naive_core

    class RMSNorm(nn.Module):
        def __init__(self):
            super().__init__()
            self.weight = nn.Parameter(torch.ones(dim))

        def forward(self, x):
            return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-5) * self.weight

    class Layer(nn.Module):
        def __init__(self, l, gen):
            super().__init__()
            self.n1, self.n2 = RMSNorm(), RMSNorm()
            self.wq, self.wk, self.wv, self.wo = (nn.Linear(dim, dim, bias=False) for _ in range(4))
            self.w1, self.w3 = nn.Linear(dim, hidden, bias=False), nn.Linear(dim, hidden, bias=False)
            self.w2 = nn.Linear(hidden, dim, bias=False)
            self.p = nn.ParameterDict({n: nn.Parameter(t) for n, t in core_params(H, hd, gen, qk=l % 4 == 2).items()})

        def forward(self, x):
            B = x.shape[0]
            h = self.n1(x)
            q, k, v = (w(h).view(B, T, H, hd).transpose(1, 2).contiguous() for w in (self.wq, self.wk, self.wv))
            x = x + self.wo(core(q, k, v, **dict(self.p)).transpose(1, 2).reshape(B, T, dim))
            h = self.n2(x)
            return x + self.w2(F.silu(self.w1(h)) * self.w3(h))

    class LM(nn.Module):
        def __init__(self):
            super().__init__()
            gen = torch.Generator().manual_seed(seed)
            self.emb = nn.Embedding(vocab, dim)
            nn.init.normal_(self.emb.weight, std=dim ** -0.5)
            self.layers = nn.ModuleList(Layer(l, gen) for l in range(L))
            self.norm = RMSNorm()

        def forward(self, tok):
            x = self.emb(tok)
            for layer in self.layers:
                x = layer(x)
            return self.norm(x) @ self.emb.weight.t()

    torch.manual_seed(seed)
    return LM()


def child_step(a):
    import torch
    torch.set_num_threads(a.threads)
    T = a.T_step
    m = model(a.impl, T)
    opt = torch.optim.AdamW(m.parameters(), lr=1e-4)
    tok = torch.randint(0, 259, (1, T + 1), generator=torch.Generator().manual_seed(1))
    base = peak_reset()
    times, losses = [], []
    for _ in range(1 + a.reps):
        t0 = time.perf_counter()
        opt.zero_grad(set_to_none=True)
        loss = torch.nn.functional.cross_entropy(m(tok[:, :-1]).flatten(0, 1), tok[0, 1:])
        loss.backward()
        opt.step()
        times.append(time.perf_counter() - t0)
        losses.append(loss.item())
    return dict(step_s=min(times[1:]), steps_s=times, loss0=losses[0], peak_mb=(status_kb('VmHWM') - base) / 1024)


def core_inputs(threads, T, H, d):
    """Sets the threads; q, k, v, the 830M layer's parameters (all requiring gradients) and dout."""
    import torch
    torch.set_num_threads(threads)
    gen = torch.Generator().manual_seed(0)
    q, k, v = (torch.randn(1, H, T, d, generator=gen).requires_grad_() for _ in range(3))
    p = {n: t.requires_grad_() for n, t in core_params(H, d, gen).items()}
    return q, k, v, p, torch.randn(1, H, T, d, generator=gen)


def child_mem(a):
    q, k, v, p, dout = core_inputs(a.threads, a.T_mem, 8, 40)
    core = mtac_core if a.impl == 'mtac' else naive_core
    base = peak_reset()
    t0 = time.perf_counter()
    core(q, k, v, **p).backward(dout)
    return dict(s=time.perf_counter() - t0, peak_mb=(status_kb('VmHWM') - base) / 1024)


def child_op(a):
    from mtac.torch import mta_attention
    q, k, v, p, dout = core_inputs(a.threads, a.T_op, 8, 64)
    times = []
    for _ in range(1 + a.reps):
        for t in [q, k, v] + list(p.values()):
            t.grad = None
        t0 = time.perf_counter()
        mta_attention(q, k, v, **p).backward(dout)
        times.append(time.perf_counter() - t0)
    return dict(s=min(times[1:]), all_s=times)


def run_child(what, impl, a):
    cmd = [sys.executable, os.path.abspath(__file__), '--child', what, '--impl', impl, '--threads', str(a.threads),
           '--reps', str(a.reps), '--T-step', str(a.T_step), '--T-mem', str(a.T_mem), '--T-op', str(a.T_op)]
    r = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    if r.returncode != 0:
        return dict(error='exit %d: %s' % (r.returncode, r.stderr.strip()[-400:]))
    return json.loads(r.stdout.strip().splitlines()[-1])


def main():
    ap = argparse.ArgumentParser(description='mtac torch op vs naive PyTorch MTA (see the module docstring)')
    ap.add_argument('--threads', type=int, default=os.cpu_count() or 1)
    ap.add_argument('--reps', type=int, default=2, help='timed repetitions after one warm-up (best is reported)')
    ap.add_argument('--T-step', dest='T_step', type=int, default=2048)
    ap.add_argument('--T-mem', dest='T_mem', type=int, default=4096)
    ap.add_argument('--T-op', dest='T_op', type=int, default=2048)
    ap.add_argument('--mtac', default=os.path.join(REPO, 'build', 'mtac'), help='the mtac CLI for bench attn')
    ap.add_argument('--skip-naive-step', action='store_true', help='leave out the naive model step (slow, big)')
    ap.add_argument('--child', choices=['step', 'mem', 'op'], help=argparse.SUPPRESS)
    ap.add_argument('--impl', choices=['mtac', 'naive'], help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.child:
        print(json.dumps({'step': child_step, 'mem': child_mem, 'op': child_op}[a.child](a)))
        return 0
    fix_blas_core()
    import torch
    import mtac.torch  # noqa: F401
    core, config = openblas()
    print('CPU: %s (%d cores)' % (cpu_model(), os.cpu_count()))
    print('OpenBLAS: core %s; %s%s' % (core, config, ' (OPENBLAS_CORETYPE=%s)' % os.environ['OPENBLAS_CORETYPE']
                                       if os.environ.get('OPENBLAS_CORETYPE') else ''))
    print('torch %s, threads %d (mtac and PyTorch alike)' % (torch.__version__, a.threads))
    sys.stdout.flush()

    print('\n1. training step, lm10m shape, B=1 T=%d (best of %d after a warm-up)' % (a.T_step, a.reps))
    res = {impl: run_child('step', impl, a) for impl in (['mtac'] if a.skip_naive_step else ['mtac', 'naive'])}
    for impl, r in res.items():
        print('   %-6s %s' % (impl, 'step %.3f s (all %s), loss %.4f, peak +%.0f MB' % (
            r['step_s'], ' '.join('%.2f' % t for t in r['steps_s']), r['loss0'], r['peak_mb'])
            if 'error' not in r else r['error']))
    if all('error' not in r for r in res.values()) and len(res) == 2:
        print('   naive / mtac: %.1fx time per step, %.1fx peak memory; loss difference %.2e' % (
            res['naive']['step_s'] / res['mtac']['step_s'], res['naive']['peak_mb'] / res['mtac']['peak_mb'],
            abs(res['naive']['loss0'] - res['mtac']['loss0'])))
    sys.stdout.flush()

    print('\n2. one attention core forward+backward, B=1 H=8 T=%d d=40, 830M layer setting: peak memory' % a.T_mem)
    res = {impl: run_child('mem', impl, a) for impl in ('mtac', 'naive')}
    for impl, r in res.items():
        print('   %-6s %s' % (impl, 'peak +%.1f MB, %.2f s' % (r['peak_mb'], r['s']) if 'error' not in r else r['error']))
    if all('error' not in r for r in res.values()):
        print('   naive / mtac: %.1fx peak memory' % (res['naive']['peak_mb'] / res['mtac']['peak_mb']))
    sys.stdout.flush()

    print('\n3. the op from Python vs mtac bench attn, B=1 H=8 T=%d d=64, 830M layer setting (best of %d)'
          % (a.T_op, a.reps))
    r = run_child('op', 'mtac', a)
    cli = None
    if os.access(a.mtac, os.X_OK):
        out = subprocess.run([a.mtac, 'bench', 'attn', '--json', '--impl', 'mta', '--T', str(a.T_op), '--H', '8',
                              '--d', '64', '--threads', str(a.threads), '--reps', str(a.reps)],
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        for line in out.stdout.splitlines():
            try:
                rec = json.loads(line)
            except ValueError:
                continue
            if isinstance(rec, dict) and rec.get('impl') == 'mtac_mta':
                cli = rec
    print('   python op      %s' % ('%.4f s (all %s)' % (r['s'], ' '.join('%.4f' % t for t in r['all_s']))
                                     if 'error' not in r else r['error']))
    if cli:
        s = cli['fwd_bwd_s']
        print('   mtac bench     %.4f s (%s)' % (s, json.dumps(cli)))
        if 'error' not in r and s:
            print('   python / CLI:  %.3f' % (r['s'] / s))
    else:
        print('   mtac bench attn: not run (%s not found or no JSON record)' % a.mtac)
    return 0


if __name__ == '__main__':
    sys.exit(main())
