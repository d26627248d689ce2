#!/usr/bin/env python3
"""Naive PyTorch MTA timing (the baseline `mtac bench attn` compares against).

    /usr/bin/python3 bench/bench_torch.py --T 1024 --H 4 --d 64 --threads 1 --config mta830m [--B 1] [--reps 3] [--warmup 1]

config plain   : causal softmax attention (tests/ref/mta_ref.plain_attention).
config mta830m : pre and post key-query conv c_q=6, c_k=11 (F.conv2d, groups=H), HxH pre-softmax
                 head mix, post-softmax head conv with c_h=H, group norm, gate (mta_ref.mta_forward).
Times forward + backward of (out*dout).sum() in float32 (best of --reps, after --warmup runs).
Peak memory: writes "5" to /proc/self/clear_refs (resets VmHWM), reads VmRSS as the baseline, and
after the timed runs reports peak_mb = (VmHWM - baseline) / 1024. Before that, glibc's
malloc_trim(0) hands memory freed by the warm-up runs back to the OS, so that with --warmup the
baseline does not already hold the warm-up's (now free) buffers.
Prints one JSON line. Exit 77 when torch is not importable.
"""
import argparse
import ctypes
import json
import os
import sys
import time

try:
    import torch
except ImportError:
    print('bench_torch: torch is not importable with %s (use /usr/bin/python3); skipping'
          % sys.executable, file=sys.stderr)
    sys.exit(77)

# the PyTorch reference (docs/reference.md)
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), '..', 'tests', 'ref'))
from mta_ref import mta_forward, plain_attention  # noqa: E402


def proc_status_kb(field):
    try:
        with open('/proc/self/status') as f:
            for line in f:
                if line.startswith(field + ':'):
                    return int(line.split()[1])
    except OSError:
        pass
    return None


def main():
    ap = argparse.ArgumentParser(description='naive PyTorch MTA timing')
    ap.add_argument('--T', type=int, required=True)
    ap.add_argument('--H', type=int, required=True)
    ap.add_argument('--d', type=int, required=True)
    ap.add_argument('--B', type=int, default=1)
    ap.add_argument('--threads', type=int, default=1)
    ap.add_argument('--config', choices=['plain', 'mta830m'], default='mta830m')
    ap.add_argument('--reps', type=int, default=1)
    ap.add_argument('--warmup', type=int, default=0)
    ap.add_argument('--seed', type=int, default=0)
    a = ap.parse_args()
    torch.set_num_threads(a.threads)
    torch.manual_seed(a.seed)
    B, H, T, d = a.B, a.H, a.T, a.d
    f32 = torch.float32
    q, k, v = (torch.randn(B, H, T, d, dtype=f32).requires_grad_(True) for _ in range(3))
    dout = torch.randn(B, H, T, d, dtype=f32)
    params = {}
    if a.config == 'mta830m':
        c_q, c_k = 6, 11
        w = torch.zeros(H, c_q, c_k, dtype=f32)
        w[:, c_q - 1, (c_k - 1) // 2] = 1
        params = dict(
            w_pre=w + 0.3 * torch.randn(H, c_q, c_k),
            w_pre_head=torch.eye(H) + 0.3 * torch.randn(H, H),
            w_post=w + 0.3 * torch.randn(H, c_q, c_k),
            w_post_head=(torch.eye(H) + 0.3 * torch.randn(H, H)).unsqueeze(0),
            gn_weight=1 + 0.3 * torch.randn(d),
            gate_w=0.3 * torch.randn(d),
            gate_b=0.3 * torch.randn(1))
        params = {n: t.to(f32).requires_grad_(True) for n, t in params.items()}

    def step():
        for t in [q, k, v] + list(params.values()):
            t.grad = None
        if a.config == 'mta830m':
            out = mta_forward(q, k, v, **params, use_conv2d=True)
        else:
            out = plain_attention(q, k, v)
        (out * dout).sum().backward()

    for _ in range(a.warmup):
        step()
    for t in [q, k, v] + list(params.values()):
        t.grad = None
    try:  # release freed heap pages so the RSS baseline is what is live now (glibc only)
        ctypes.CDLL(None).malloc_trim(0)
    except (OSError, AttributeError):
        pass
    try:
        with open('/proc/self/clear_refs', 'w') as f:
            f.write('5')
    except OSError:
        pass
    base = proc_status_kb('VmRSS')
    best = float('inf')
    for _ in range(max(1, a.reps)):
        t0 = time.perf_counter()
        step()
        best = min(best, time.perf_counter() - t0)
    hwm = proc_status_kb('VmHWM')
    peak_mb = (hwm - base) / 1024.0 if (hwm is not None and base is not None) else None
    print(json.dumps({'impl': 'torch_naive_mta' if a.config == 'mta830m' else 'torch_naive_plain',
                      'T': T, 'H': H, 'd': d, 'B': B, 'threads': a.threads,
                      'fwd_bwd_s': best, 'peak_mb': peak_mb}))


if __name__ == '__main__':
    main()
