#!/usr/bin/env python3
"""scaling_model.py: the data-parallel scaling model of docs/distributed.md.

Predicts the time of one training step of `mtac train` on N ranks, and its efficiency (compute
time over step time), from the algorithm of src/train/step.c:

  per round (each rank one micro-batch of B x T tokens):
    forward, then backward; as the backward finishes a bucket (the final norm, each layer from the
    last, the tied embedding last of all) its exchange starts: to each other rank the slice of the
    bucket in that rank's shard, (N-1)/N of the bucket's gradient, N-1 messages. One link per rank
    carries the exchanges one after another (a queue); the round ends when the backward and the
    last exchange have both ended.
  per step (R rounds): the shard's sum, clip and AdamW (memory-bound, left out), the all-gather of
    the weights ((N-1)/N of all parameters, ring: N-1 messages), and three small collectives
    (losses, norm partials, stop flag: 3 log2(N) latencies).

  compute per micro-batch: FLOPs = B*T * (6 * matmul weights + 12 * layers * T * dim) (forward and
    backward of every weight product, and of QK^T and PV), the MTA convolutions left out, at F FLOP/s
    per rank. The backward is 2/3 of it, spread over the layers in proportion to their weights.
  communication: float32 (4 bytes) per value, bandwidth BW per rank and direction, latency alpha.

usage: bench/scaling_model.py [--flops F] [--micro R] [--B B] [--T T] [--markdown]
"""
import argparse
import math

# name: dim, layers, heads, vocab, hidden (src/model/presets.c; hidden as model_default_hidden)
PRESETS = {
    "lm1m": (128, 4, 4, 259, 384),
    "lm10m": (320, 8, 8, 259, 864),
    "300m": (1024, 20, 16, 128256, 0),
    "830m": (1536, 24, 16, 128256, 0),
}
NETWORKS = {"25 Gb/s Ethernet": (25e9 / 8, 10e-6), "200 Gb/s InfiniBand": (200e9 / 8, 2e-6)}


def hidden_of(dim, hidden):
    return hidden or 256 * math.ceil(int(8 * dim / 3) / 256)


def params(dim, layers, heads, vocab, hidden):
    """(total, per-layer list, embedding, matmul weights), as model.c lays them out for the MTA
    presets (6x11 pre/post kernels in layers 2, 6, 10, ...; head mix; head conv over all heads;
    group norm; gate)."""
    F, d = hidden_of(dim, hidden), dim // heads
    per_layer = []
    for l in range(layers):
        n = 2 * dim + 4 * dim * dim + 3 * dim * F  # norms, wq wk wv wo, w1 w2 w3
        if l % 4 == 2:
            n += 2 * heads * 6 * 11  # w_pre, w_post
        n += heads * heads + heads * heads + d + d + 1  # w_pre_head, w_post_head, gn, gate w and b
        per_layer.append(n)
    emb = vocab * dim
    total = emb + sum(per_layer) + dim
    matmul = emb + layers * (4 * dim * dim + 3 * dim * F)
    return total, per_layer, emb, matmul


def step_time(preset, N, R, B, T, flops, bw, alpha):
    dim, layers, heads, vocab, hidden = PRESETS[preset]
    P, per_layer, emb, matmul = params(dim, layers, heads, vocab, hidden)
    t_mb = B * T * (6 * matmul + 12 * layers * T * dim) / flops
    t_fwd, t_bwd = t_mb / 3, 2 * t_mb / 3
    frac = (N - 1) / N
    # buckets in the order the backward finishes them, with the time each is ready
    buckets, done, layer_w = [], 0.0, sum(per_layer)
    buckets.append((dim, 0.0))  # final norm: first
    for n in reversed(per_layer):
        done += n / layer_w * t_bwd
        buckets.append((n, done))
    buckets.append((emb, t_bwd))  # the tied embedding: complete only at the end
    link = 0.0
    for n, ready in buckets:
        if N > 1:
            link = max(link, ready) + frac * 4 * n / bw + (N - 1) * alpha
    exposed = max(0.0, link - t_bwd)
    t_ag = frac * 4 * P / bw + (N - 1) * alpha if N > 1 else 0.0
    t_small = 3 * math.log2(N) * alpha if N > 1 else 0.0
    t_step = R * (t_fwd + t_bwd + exposed) + t_ag + t_small
    return dict(P=P, t_mb=t_mb, exposed=exposed, t_ag=t_ag, t_step=t_step, eff=R * t_mb / t_step)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--flops", type=float, default=400e9, help="FLOP/s one rank computes (default 400e9)")
    ap.add_argument("--micro", type=int, default=1, help="micro-batches per rank per step (R)")
    ap.add_argument("--B", type=int, default=8)
    ap.add_argument("--T", type=int, default=2048)
    ap.add_argument("--presets", default="lm10m,300m,830m")
    ap.add_argument("--markdown", action="store_true")
    a = ap.parse_args()
    print(f"F = {a.flops:.3g} FLOP/s per rank, {a.micro} micro-batch(es) of {a.B} x {a.T} tokens per rank per step\n")
    print("| preset | parameters | network | ranks | compute/step s | exposed exchange s | all-gather s | step s | efficiency |")
    print("|---|---|---|---|---|---|---|---|---|")
    for p in a.presets.split(","):
        for net, (bw, alpha) in NETWORKS.items():
            for N in (1, 8, 64, 512):
                r = step_time(p, N, a.micro, a.B, a.T, a.flops, bw, alpha)
                print(f"| {p} | {r['P'] / 1e6:.1f}M | {net} | {N} | {a.micro * r['t_mb']:.3f} | {a.micro * r['exposed']:.4f} "
                      f"| {r['t_ag']:.4f} | {r['t_step']:.3f} | {100 * r['eff']:.1f}% |")


if __name__ == "__main__":
    main()
