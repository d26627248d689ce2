#!/usr/bin/env python3
"""PyTorch on the GPU: the baselines of the CUDA backend's benchmark (bench/bench_cuda.c).

    python3 bench/bench_torch_cuda.py --T 2048,4096 --H 8 --d 64 [--B 1] [--reps 5] [--impl sdpa,naive]
                                      [--sdpa-dtypes bfloat16,float32]

sdpa  : torch.nn.functional.scaled_dot_product_attention(is_causal=True) (FlashAttention where
        PyTorch picks it) in bfloat16 and float32 (--sdpa-dtypes): plain causal attention, the
        speed bar.
naive : the authors' formulation of MTA (tests/ref/mta_ref.mta_forward with F.conv2d), float32,
        with the 830M layer's steps: pre and post 6x11 convolutions, head mixing, head
        convolution over all heads, group norm, gate.
Times forward + backward of (out * dout).sum() (median of --reps after one warm-up, CUDA
events). peak_mb: torch.cuda.max_memory_allocated during the timed calls minus what was
allocated before the inputs. A size that runs out of GPU memory prints a row with "oom": true.
One JSON row per (impl, dtype, T). Exit 77 without torch or a GPU.
"""
import argparse
import json
import os
import sys

try:
    import torch
    import torch.nn.functional as F
except ImportError:
    print('bench_torch_cuda: torch is not importable; skipping', file=sys.stderr)
    sys.exit(77)

# mta_ref.py: in tests/ref/ of the repository, or beside this file in scripts/gpu_check.sh's bundle
_here = os.path.dirname(os.path.abspath(__file__))
sys.path[:0] = [_here, os.path.join(_here, '..', 'tests', 'ref')]
from mta_ref import identity_params, mta_forward  # noqa: E402


def mta_params(H, d, dev):
    """The 830M layer's MTA parameters: identity kernels (mta_ref.identity_params) plus noise."""
    p = {n: t + 0.1 * torch.randn_like(t) for n, t in identity_params(H, d, dtype=torch.float32).items()}
    p.update(gn_weight=1 + 0.1 * torch.randn(d), gate_w=0.1 * torch.randn(d), gate_b=0.1 * torch.randn(1))
    return {n: t.to(dev).requires_grad_(True) for n, t in p.items()}


def run(impl, dtype, B, H, T, d, reps):
    dev = 'cuda'
    torch.cuda.synchronize()
    torch.cuda.empty_cache()
    base = torch.cuda.memory_allocated()
    q, k, v = (torch.randn(B, H, T, d, device=dev, dtype=dtype).requires_grad_(True) for _ in range(3))
    dout = torch.randn(B, H, T, d, device=dev, dtype=dtype)
    params = mta_params(H, d, dev) if impl == 'naive' else {}

    def step():
        for t in [q, k, v] + list(params.values()):
            t.grad = None
        if impl == 'sdpa':
            out = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        else:
            out = mta_forward(q, k, v, **params, use_conv2d=True)
        (out * dout).sum().backward()

    step()
    torch.cuda.synchronize()
    torch.cuda.reset_peak_memory_stats()
    times = []
    for _ in range(reps):
        e0, e1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        e0.record()
        step()
        e1.record()
        torch.cuda.synchronize()
        times.append(e0.elapsed_time(e1) / 1e3)
    times.sort()
    peak = (torch.cuda.max_memory_allocated() - base) / 1e6
    return times[len(times) // 2], peak


def main():
    ap = argparse.ArgumentParser(description='PyTorch GPU baselines of the CUDA MTA benchmark')
    ap.add_argument('--T', default='2048,4096')
    ap.add_argument('--B', type=int, default=1)
    ap.add_argument('--H', type=int, default=8)
    ap.add_argument('--d', type=int, default=64)
    ap.add_argument('--reps', type=int, default=5)
    ap.add_argument('--impl', default='sdpa,naive')
    ap.add_argument('--sdpa-dtypes', default='bfloat16,float32', help="sdpa's dtypes (bfloat16, float32)")
    a = ap.parse_args()
    if any(n not in ('bfloat16', 'float32') for n in a.sdpa_dtypes.split(',')):
        ap.error('--sdpa-dtypes: a list of bfloat16, float32')
    sdpa_dtypes = [getattr(torch, n) for n in a.sdpa_dtypes.split(',')]
    if not torch.cuda.is_available():
        print('bench_torch_cuda: no GPU; skipping', file=sys.stderr)
        sys.exit(77)
    torch.manual_seed(0)
    name = torch.cuda.get_device_name(0)
    for T in [int(t) for t in a.T.split(',')]:
        for impl in a.impl.split(','):
            dtypes = sdpa_dtypes if impl == 'sdpa' else [torch.float32]
            for dt in dtypes:
                row = {'impl': 'torch_' + impl, 'device': name, 'dtype': str(dt).replace('torch.', ''),
                       'T': T, 'B': a.B, 'H': a.H, 'd': a.d}
                try:
                    row['fwd_bwd_s'], row['peak_mb'] = run(impl, dt, a.B, a.H, T, a.d, a.reps)
                except torch.OutOfMemoryError:
                    row['oom'] = True
                torch.cuda.empty_cache()
                print(json.dumps(row), flush=True)


if __name__ == '__main__':
    main()
