#!/usr/bin/env python3
"""cuda_perf_model.py: the performance model of issue 37 (docs/cuda.md, "Performance model
(predicted, not measured)").

PREDICTIONS ONLY. Nothing here has run on a GPU; every figure is computed from vendor peak rates,
the FlashAttention papers' published throughputs and counts of FLOPs, bytes and launches. The
first GPU measurements (bench_cuda, bench/bench_torch_cuda.py) replace it.

Predicts forward+backward time on one H100 SXM (bf16 inputs, float32 accumulation) of:
  (a) PyTorch SDPA's FlashAttention-2 backend, plain causal attention, from the FA2 anchors;
  (b) mtac's present CUDA backend (src/attn/mta_cuda.cu, cuda_kernels.cuh): float32 cuBLAS
      products and one-entry-per-thread map kernels, strip by strip;
  (c) the fused tensor-core design of issue 37: FlashAttention-2-style tiles on tensor cores
      (mma.sync), every head of a mixing group on one SM or one cluster of SMs, a statistics
      pass before the post-softmax steps, the key-query convolutions on CUDA cores from on-chip
      tiles with their halos or (pre-softmax only) as tensor-core products off the diagonal band;
  (d) issue 46's design: every step as MMAs (mma.sync m16n8k16, bf16 maps in shared memory): the
      key-query convolutions as products with banded Toeplitz matrices of their kernels, head
      mixing and head convolution as products over the heads of a group (K = H), per kernel
      (counts, shared memory per block, blocks per SM, roofline terms), at FA2-class and
      FA3-class tensor-core rates; its counts replaceable by measured ones (--kernel-counts);
      issue 46's goals on an H100 (--goals), the whole 830M training step among them;
and the tensor-core kernels as built (--every) and the head-only layer on thread block clusters
(--cluster).
for the issue's shapes: the 830M layer (B=2, H=16, d=96, T=4096) with and without the key-query
convolutions, and H=8 at d=64 and d=128, T=2048..16384 (B=1), both variants.

usage: bench/cuda_perf_model.py [--json | --markdown | --kernels | --goals | --every | --cluster | --dump-counts]
       [--measured FILE] [--counts]
       [--every-blocks KERNEL=BLOCKS[/THREADS]]
       [--terms] [--shape NAME] [--kernel-counts FILE] [--min-blocks N] [--check [ROOT]]
       [--probe FILE] [--dsmem-bw C=BYTES_PER_S] [--cluster-barrier C=SECONDS]
"""
import argparse
import heapq
import json
import math
import os

# ---- H100 SXM5: vendor figures (NVIDIA H100 datasheet and Hopper whitepaper) -----------------
TC_BF16 = 989e12   # dense bf16 tensor-core FLOP/s
FP32 = 67e12       # FP32 CUDA-core FLOP/s (an FMA counts 2): 132 SMs x 128 lanes x 2 x 1.98 GHz
MUFU = 3.9e12      # exp2 and other special functions per second (FlashAttention-3 paper)
HBM = 3.35e12      # HBM3 bytes/s
SMEM_BW = 33.4e12  # shared memory, all SMs: 128 B/clock/SM x 132 x 1.98 GHz
SMS = 132
SMEM_PER_SM = 227 * 1024  # usable by one block (228 KB per SM, 1 KB reserved)
REGS_FOR_MAPS = 128 * 1024  # half of the 256 KB register file per SM (assumption)
# Assumptions (not measured; the same as the section above it in docs/cuda.md where it has one):
L2_BW = 7e12       # L2 bytes/s
L1_BW = 29e12      # L1 bytes/s over all SMs
SGEMM = 45e12      # cuBLAS float32 SGEMM, no TF32
LAUNCH = 3e-6      # seconds per kernel when launches, not work, limit a stream
CUDA_FRAC = 0.5    # achieved fraction of FP32 peak by fused map code (FMAs among address
                   # arithmetic, masks and conversions; no paper gives this figure)
MUFU_FRAC = 0.8
SMEM_FRAC = 0.8
HBM_FRAC = 0.9
BLOCK_BW = 13.7e9  # bytes/s one 256-thread block pulls through a latency-bound loop (Little's
                   # law: 256 threads x 2 loads x 4 B x 4 in flight / 0.6 us)
ROW_LAT = 2.6e-6   # one row of k_normgate_t: ~4 block reductions of ~9 barrier steps (30 ns)
                   # and ~3 dependent global round trips (0.5 us)

# FlashAttention-2, H100 SXM, bf16, causal, forward+backward TFLOP/s (the FlashAttention papers'
# figures, as issue 37 cites them), counted as FlashAttention counts: 4*B*H*T^2*d/2 forward, x3.5 fwd+bwd.
FA2_ANCHORS = {64: {4096: 257, 8192: 273, 16384: 284}, 128: {4096: 294, 8192: 308, 16384: 328}}
FA3_RATE = 580e12  # FlashAttention-3, H100, bf16, causal forward, d=128 (579-616 TFLOP/s)
FA2_TILE = 128     # query rows per FA2 forward block (key columns per backward block)


def fa2_anchor_rate(d, T):
    """FA2's TFLOP/s at head dimension d and length T: linear in log2 T between the anchors (and
    below 4096 with the 4k-8k slope: an extrapolation), linear in d between 64 and 128."""
    def at(dd):
        a = FA2_ANCHORS[dd]
        lo, hi = (4096, 8192) if T <= 8192 else (8192, 16384)
        x = math.log2(T / lo)
        return a[lo] + (a[hi] - a[lo]) * x
    w = (min(max(d, 64), 128) - 64) / 64
    return ((1 - w) * at(64) + w * at(128)) * 1e12


def lpt_efficiency(works, machines):
    """Work over machines x makespan when items go longest first to the least loaded machine."""
    load = [0.0] * machines
    for w in sorted(works, reverse=True):
        heapq.heapreplace(load, load[0] + w)
    return sum(works) / (machines * max(load))


def causal_tiles(n_groups, T, tile):
    """Work of each causal row tile (tile rows by the keys up to its diagonal), n_groups times."""
    return [(t + 1) * tile for t in range(math.ceil(T / tile))] * n_groups


# ---- MTA settings of the shapes ---------------------------------------------------------------
def mta_config(H, conv):
    """The 830M layer's MTA (spec section 3): 6x11 key-query convolutions before and after the
    softmax (conv=True only), H x H head mixing, head convolution over all heads (c_h = H), group
    norm and gate; dropout off (the FlashAttention anchors have none)."""
    return {"cq": 6 if conv else 0, "ck": 11 if conv else 0, "cq2": 6 if conv else 0, "ck2": 11 if conv else 0,
            "mix": True, "ch": H, "drop": False}


def halos(m):
    """The halos of m's key-query convolutions (0 for one that is off): hq, hp the earlier rows of
    Z (pre conv) and of P (post conv) an output row reads, c_q - 1; p1, p2 the key columns on each
    side, (c_k - 1) / 2; cols the columns of both together, c_k - 1 each."""
    hq, hp = max(m["cq"] - 1, 0), max(m["cq2"] - 1, 0)
    c1, c2 = max(m["ck"] - 1, 0), max(m["ck2"] - 1, 0)
    return hq, hp, c1 // 2, c2 // 2, c1 + c2


def entry_flops(m, H):
    """CUDA-core FLOPs per causal map entry and head, per step of spec section 2 (an FMA is 2),
    forward and backward (the exact gradient, recomputation not included; softmax adds 1 exp
    forward). Checked
    against cuda_kernels.cuh: k_conv and k_conv_t do cq*ck fmaf per entry, k_conv_wgrad one fmaf
    per entry and tap, k_mix H fmaf per entry and head, k_pair_grad one fmaf per entry and head
    pair of a group, k_softmax max, exp, sum and scale, k_softmax_t p*g, g-D and *p."""
    kq1, kq2 = 2 * m["cq"] * m["ck"], 2 * m["cq2"] * m["ck2"]
    mix = 2 * H if m["mix"] else 0
    hc = 2 * m["ch"] if m["ch"] else 0
    drop = 1 if m["drop"] else 0
    fwd = {"2 pre conv": kq1, "3 head mixing": mix, "4 softmax": 4, "5 post conv": kq2, "6 head conv": hc,
           "7 dropout": drop}
    bwd = {"7 dropout": drop, "6 head conv^T": hc, "6 head conv grad": hc, "5 post conv^T": kq2,
           "5 post conv grad": kq2, "4 softmax^T": 4, "3 mixing^T": mix, "3 mixing grad": mix,
           "2 pre conv^T": kq1, "2 pre conv grad": kq1}
    return fwd, bwd


def product_flops(d):
    """Tensor-core (products) FLOPs per causal entry and head: S = q k^T and P v forward; dP2 = dO
    v^T, dv, dq and dk backward (recomputation not included)."""
    return {"fwd": 4 * d, "bwd": 8 * d}


# ---- (a) SDPA, FlashAttention-2 ---------------------------------------------------------------
def sdpa(B, H, d, T):
    flops = 3.5 * 4 * B * H * T * T * d / 2
    # the anchors ran at 16k tokens and hidden 2048 (FA2 paper's setting); the shape's imbalance
    # across 132 SMs against the anchors' is what changes the rate
    anchor = lpt_efficiency(causal_tiles((16384 // T) * (2048 // d), T, FA2_TILE), SMS)
    mine = lpt_efficiency(causal_tiles(B * H, T, FA2_TILE), SMS)
    rate = fa2_anchor_rate(d, T) * mine / anchor
    return {"ms": flops / rate * 1e3, "tflops_counted": flops / 1e12, "rate_tflops": rate / 1e12,
            "wave_eff": mine / anchor}


# ---- (b) mtac's present CUDA backend ----------------------------------------------------------
def strip_rows(B, H, d, T, m):
    """mta_cuda.cu's strip_rows_of: the largest of 64, 32, 16 whose rings fit the budget."""
    hq, hp = halos(m)[:2]
    L = hp + hq
    nmaps = 2 + (m["cq"] > 0) + m["mix"] + (m["cq2"] > 0) + (m["ch"] > 0) * 2 + (m["cq2"] > 0) + m["mix"]
    budget = max(256 * 2**20, 8 * B * H * T * d * 4)
    for R in (64, 32, 16):
        cap = (R + L + R - 1) // R * R
        if (cap * nmaps + 2 * R) * B * H * (T + 31) // 32 * 32 * 4 <= budget:
            return R
    return 8


def present(B, H, d, T, m):
    """Per strip, each launch as max(LAUNCH, its work); work from DRAM map traffic (fp32, 4 B an
    entry read or written), L1 gathers, L2 re-reads, CUDA-core FLOPs and SGEMM FLOPs."""
    R, BH = strip_rows(B, H, d, T, m), B * H
    K1, K2, ch = m["cq"] * m["ck"], m["cq2"] * m["ck2"], m["ch"]
    L2, L1 = halos(m)[:2]
    terms = {"launches": 0.0, "sgemm": 0.0, "map traffic": 0.0, "conv gathers": 0.0, "kernel grads": 0.0,
             "pair grads": 0.0, "normgate_t": 0.0}
    n_launch = [0]

    def k(term, t):
        terms[term] += t
        n_launch[0] += 1
        if t < LAUNCH:
            terms["launches"] += LAUNCH - t

    def ent(n, cols):  # causal entries of rows cols-n..cols-1, one head
        return n * cols - n * (n - 1) / 2

    def gemm(n, cols):  # whole strips: n rows by cols
        k("sgemm", 2 * BH * n * cols * d / SGEMM)

    def maps(n, cols, bytes_per_entry):  # a per-entry kernel: an entry read and written (4 B each)
        k("map traffic", BH * ent(n, cols) * bytes_per_entry / HBM)

    def conv(n, cols, taps):  # taps gathered through L1, the maps through DRAM once
        k("conv gathers", max(BH * ent(n, cols) * taps * 4 / L1_BW, BH * ent(n, cols) * 8 / HBM))

    def wgrad(n, cols, taps):  # one block per tap and head, each re-reading two rows an entry
        per_block = ent(n, cols) * 8
        k("kernel grads", max(taps * BH * per_block / L2_BW, per_block / BLOCK_BW))

    def pair(n, cols, gs):  # H*H*B blocks, those of a group busy, each reading two rows an entry
        per_block = ent(n, cols) * 8
        k("pair grads", max(B * H * gs * per_block / L2_BW, per_block / BLOCK_BW))

    def strip_maps(n, cols):
        gemm(n, cols)
        if K1:
            conv(n, cols, K1)
        if m["mix"]:
            maps(n, cols, 8)
        maps(n, cols, 8)  # softmax: the row in and out (its re-reads hit L1)
        if K2:
            conv(n, cols, K2)
        if ch:
            maps(n, cols, 8)
        k("map traffic", BH * (ent(n, cols) * 4 + n * cols * 4) / HBM)  # k_drop writes whole rows

    def kernel_grads(n, cols, heads, K):  # a stage's head step (mix_backward) and conv (conv_kernel_grad)
        if heads:
            maps(n, cols, 8)
            pair(n, cols, heads)
        if K:
            wgrad(n, cols, K)

    for a0 in range(0, T, R):  # forward
        a1 = min(T, a0 + R)
        strip_maps(a1 - a0, a1)
        gemm(a1 - a0, a1)
        k("map traffic", 0.0)  # k_normgate: a few KB
    fwd_launches = n_launch[0]
    for i0 in range(0, T + L1 + L2, R):  # backward, lagging rows as cuda_backward
        a0, a1 = i0, min(i0 + R, T)
        b0, b1 = max(0, i0 - L1), min(i0 + R - L1, T)
        c0, c1 = max(0, i0 - L1 - L2), min(i0 + R - L1 - L2, T)
        if a0 < a1:
            n = a1 - a0
            strip_maps(n, a1)
            gemm(n, a1)  # O again
            k("normgate_t", n * ROW_LAT)
            gemm(n, a1)  # dV
            gemm(n, a1)  # dP2
            maps(n, a1, 8)
            kernel_grads(n, a1, ch, K2)
        if b0 < b1:
            n = b1 - b0
            if K2:
                conv(n, b1, K2)
            maps(n, b1, 12)  # softmax^T: p and g in, g out
            kernel_grads(n, b1, H if m["mix"] else 0, K1)
        if c0 < c1:
            n = c1 - c0
            conv(n, c1, K1 if K1 else 1)
            gemm(n, c1)
            gemm(n, c1)
    for _ in range(7):  # k_sum_grad
        k("map traffic", 0.0)
    total = sum(terms.values())
    return {"ms": total * 1e3, "strip_rows": R, "launches": n_launch[0], "fwd_launches": fwd_launches,
            "terms_ms": {t: v * 1e3 for t, v in terms.items()}}


# ---- (c) the fused tensor-core design ---------------------------------------------------------
def conv_smem(cq, ck):
    """Shared-memory bytes an output of a convolution (or its transpose, or a kernel-gradient
    term) reads when each thread computes a 4x4 patch: (4+cq-1) x (4+ck-1) fp32 sources for 16."""
    return (3 + cq) * (3 + ck) / 16 * 4


def fused_passes(m, H, d, T, g, G, mode, Br, Bc):
    """The passes of the design, each a list of (kind, name, amount per entry, factor): kind tc
    (tensor-core FLOPs), cuda (CUDA-core FLOPs), exp, smem (bytes), xch (bytes between the SMs of
    a cluster), l2 (bytes); factor the halo recomputation (entries computed per output entry).
    Forward: row tiles of Br rows walking the keys (column halos carried along, row halos
    recomputed). Backward: a row pass for the softmax backward's row sums D, then column tiles of
    Bc keys walking the queries (row halos carried, column halos recomputed).
    mode: "cuda" every convolution on CUDA cores from on-chip tiles; "tc-pre" the pre conv and
    its transpose as products of q (or dZ) expanded over c_q shifted rows with keys convolved along
    the sequence (exact off the band of c_q-1+p columns at the diagonal, which CUDA cores redo);
    "tc-all" also every other convolution, transpose and kernel gradient as banded Toeplitz
    products of bf16 map tiles (k = 16 columns + c_k-1 halo, padded to 32)."""
    fl_f, _ = entry_flops(m, H)
    kq1, kq2, mix, hc = fl_f["2 pre conv"], fl_f["5 post conv"], fl_f["3 head mixing"], fl_f["6 head conv"]
    hq, hp, p1, p2, _ = halos(m)
    post = bool(m["cq2"] or m["ch"])       # post-softmax steps: normalised P needed first
    xch = (G - g) / g * 4                  # a mixing step's reads from the cluster's other SMs
    opnd = d / 8                           # B-operand bytes per entry: a warp's 16 rows share a tile

    def conv(name, cq, ck, f, tc):  # one convolution-like step (forward, transpose or kernel grad)
        if tc:
            kk = 2 * cq * 32
            return [("tc", name, kk, f), ("smem", name, 4 * cq, f)]  # a bf16 map slice per kernel row
        return [("cuda", name, 2 * cq * ck, f), ("smem", name, conv_smem(cq, ck) + 8, f)]

    def scores(f1, f0):  # S1 on f1 entries per output entry (S = Z on f0): q k^T and the pre conv
        if mode != "cuda" and kq1:
            band = (hq + p1) / (T / 2)  # share of entries within the band, redone exactly
            return [("tc", "S1 = Q_exp K~^T", 2 * m["cq"] * d, f1), ("smem", "operands", m["cq"] * opnd, f1),
                    ("cuda", "band of S1", kq1 * band, f1)]
        out = [("tc", "S = q k^T", 2 * d, f0), ("smem", "operands", opnd, f0)]
        return out + (conv("pre conv", m["cq"], m["ck"], f1, False) if kq1 else [])

    def mixing(name, f, n=1):
        return [("cuda", name, n * mix, f), ("smem", name, n * 8, f), ("xch", name, n * xch, f)] if mix else []

    def headconv(name, f, n=1):
        return [("cuda", name, n * hc, f), ("smem", name, n * 8, f), ("xch", name, n * xch, f)] if hc else []

    def postconv(name, f):
        return conv(name, m["cq2"], m["ck2"], f, mode == "tc-all") if kq2 else []

    def prod(name, f):
        return [("tc", name, 2 * d, f), ("smem", name, opnd, f)]

    fS1, fS = (Br + hp) / Br, (Br + hp + hq) / Br
    kv = [("l2", "K, V per row tile", 4 * d / Br, 1)]
    pre = scores(fS1, fS) + mixing("head mixing", fS1)
    if post:
        fwd = [("F1 statistics", pre + [("cuda", "softmax stats", 3, fS1), ("exp", "exp", 1, fS1)] + kv),
               ("F2 main", pre + [("cuda", "softmax", 2, fS1), ("exp", "exp", 1, fS1)] + postconv("post conv", 1)
                + headconv("head conv", 1) + prod("P v", 1) + kv)]
    else:  # FA2's online softmax in one pass
        fwd = [("F main", pre + [("cuda", "softmax", 5, 1), ("exp", "exp", 1, 1)] + prod("P v", 1) + kv)]

    # B1: D_i = sum_j P dP over row i (dP2 = dO v^T on hp later rows); without post steps
    # D = rowsum(dO * O), FA2's row kernel (counted in HBM)
    fb = (Br + hp) / Br
    b1 = (scores(1, 1 + hq / Br) + mixing("head mixing", 1) + [("cuda", "softmax", 2, 1), ("exp", "exp", 1, 1)]
          + prod("dP2 = dO v^T", fb) + headconv("head conv^T", fb) + postconv("post conv^T", 1)
          + [("cuda", "D", 2, 1)] + kv)
    # B2: columns of the tile's dP2 chain back to dZ: dP2, dP1 on Bc+2p1+2p2, dP, dS2, dS1 on
    # Bc+2p1; P on Bc+2max(p1,p2), its S on 2p1 more; P1, P2 and the products on Bc
    fc, fc1 = (Bc + 2 * p1 + 2 * p2) / Bc, (Bc + 2 * p1) / Bc
    fP = (Bc + 2 * max(p1, p2)) / Bc
    b2 = (scores(fP, fP + 2 * p1 / Bc) + mixing("head mixing", fP) + [("cuda", "softmax", 2, fP), ("exp", "exp", 1, fP)]
          + postconv("post conv", 1) + headconv("head conv", 1)
          + prod("dP2 = dO v^T", fc) + headconv("head conv^T, grad", fc) + postconv("post conv^T", fc1)
          + postconv("post conv grad", 1) + [("cuda", "softmax^T", 4, fc1), ("smem", "softmax^T", 12, fc1)]
          + mixing("mixing^T, grad", fc1, 2) + prod("dv = P2^T dO", 1)
          + [("l2", "q, dO per column tile; dq (fp32) summed in order", 12 * d / Bc, 1)])
    if kq1 and mode != "cuda":  # dq, dk from dS1 and the expanded operands; Z for the kernel grad
        b2 += [("tc", "dq, dk expanded", 2 * 2 * m["cq"] * d, 1), ("smem", "operands", 2 * m["cq"] * opnd, 1)]
        b2 += prod("Z = q k^T", 1) + conv("pre conv grad", m["cq"], m["ck"], 1, mode == "tc-all")
    else:
        if kq1:
            b2 += conv("pre conv^T", m["cq"], m["ck"], 1, False) + conv("pre conv grad", m["cq"], m["ck"], 1, False)
        b2 += prod("dq", 1) + prod("dk", 1)
    bwd = [("B1 row sums D", b1), ("B2 main", b2)] if post else [("B2 main", b2)]
    return fwd, bwd


def footprint(m, d, g, Br, Bc, mode):
    """On-chip bytes per SM (shared memory plus the registers assumed free for map tiles) of the
    largest pass of each direction: two fp32 map tiles with their halos for the g heads here, q
    (bf16) for the tile's rows, K and V (or the expanded K~) double-buffered for one head; in
    the backward four map windows, K and V of the column tile and the fp32 dk, dv accumulators."""
    hq, hp, _, _, halo_c = halos(m)
    kv = (m["cq"] + 1 if mode != "cuda" and m["cq"] else 2) * 2 * Bc * d * 2
    fwd = 2 * g * (Br + hp + hq) * (Bc + halo_c) * 4 + g * (Br + hp + hq) * d * 2 + kv
    bwd = 4 * g * (16 + hp + hq) * (Bc + halo_c) * 4 + g * Bc * d * (2 * 2 + 2 * 4) + kv
    return max(fwd, bwd)


def dominant(t):
    """The bound that sets the time: the cores' sum (named by its larger part) or a memory."""
    core = "tensor cores" if t["tensor cores"] > t["CUDA cores"] else "CUDA cores"
    bounds = {core: t["tensor cores"] + t["CUDA cores"], "shared memory": t["shared memory"], "L2": t["L2"],
              "HBM": t["HBM"]}
    return max(bounds, key=bounds.get)


def fused_at(B, H, d, T, m, cluster, Br, Bc, mode, rate_tc):
    G = H if m["mix"] else (m["ch"] or 1)   # heads that must meet: one SM or one cluster
    g = G // cluster
    on_chip = footprint(m, d, g, Br, Bc, mode)
    if on_chip > SMEM_PER_SM + REGS_FOR_MAPS:
        return None
    E = B * H * T * T / 2 * (1 + max(Br, Bc) / T)   # causal entries, diagonal tiles whole
    fwd, bwd = fused_passes(m, H, d, T, g, G, mode, Br, Bc)
    sums = {}
    for _, items in fwd + bwd:
        for kind, _, amount, f in items:
            sums[kind] = sums.get(kind, 0.0) + amount * f * E
    t = {"tensor cores": sums.get("tc", 0) / rate_tc,
         "CUDA cores": sums.get("cuda", 0) / (FP32 * CUDA_FRAC) + sums.get("exp", 0) / (MUFU * MUFU_FRAC),
         "shared memory": (sums.get("smem", 0) + sums.get("xch", 0)) / (SMEM_BW * SMEM_FRAC),
         "L2": sums.get("l2", 0) / L2_BW,
         "HBM": 16 * B * H * T * d * 2 / (HBM * HBM_FRAC)}   # q k v o dO dq dk dv, read or written twice
    # issue: tensor-core and CUDA-core work of a warp do not overlap (FA2-style code); memory
    # streams overlap with both
    busy = max(t["tensor cores"] + t["CUDA cores"], t["shared memory"], t["L2"], t["HBM"])
    slots = SMS // cluster
    eff_f = lpt_efficiency(causal_tiles(B * H // G, T, Br), slots)
    eff_b = lpt_efficiency(causal_tiles(B * H // G, T, Bc), slots)
    eff = 0.5 * (eff_f + eff_b)
    launches = (len(fwd) + len(bwd) + 2) * LAUNCH  # + the norm/gate row kernels
    total = busy / eff + launches
    tc_flops, cuda_flops = sums.get("tc", 0), sums.get("cuda", 0)
    return {"ms": total * 1e3, "cluster": cluster, "heads_per_sm": g, "Br": Br, "Bc": Bc,
            "conv": mode if m["cq"] else "-", "tc_rate_tflops": rate_tc / 1e12,
            "tc_fraction_of_peak": rate_tc / TC_BF16,
            "on_chip_kb": on_chip / 1024, "wave_eff": eff, "dominant": dominant(t),
            "terms_ms": {k: v * 1e3 for k, v in t.items()}, "tc_tflop": tc_flops / 1e12,
            "cuda_tflop": cuda_flops / 1e12, "tc_per_entry": tc_flops / (B * H * T * T / 2),
            "cuda_per_entry": cuda_flops / (B * H * T * T / 2)}


def fused(B, H, d, T, m, modes, tc="fa2"):
    """The best tile of the design: clusters of 1-8 SMs, Br and Bc in 16..128, the given ways of
    the convolutions; the fastest prediction whose working set fits on chip. tc: the tensor-core
    rate, "fa2" FA2's measured rate at this d and T (mma.sync code), "fa3" FA3's causal forward
    (580 TFLOP/s, wgmma and TMA: not what the emulator runs), a sensitivity bound."""
    rate_tc = fa2_anchor_rate(d, T) if tc == "fa2" else FA3_RATE
    best = None
    for cluster in (1, 2, 4, 8):
        if (H if m["mix"] else (m["ch"] or 1)) % cluster:
            continue
        for Br in (16, 32, 64, 128):
            for Bc in (16, 32, 64, 128):
                for mode in (modes if m["cq"] else ("cuda",)):
                    r = fused_at(B, H, d, T, m, cluster, Br, Bc, mode, rate_tc)
                    if r and (best is None or r["ms"] < best["ms"]):
                        best = r
    return best


# ---- (d) every step as MMAs (issue 46) ---------------------------------------------------------
# mma.sync.m16n8k16 (bf16 in, fp32 accumulate): one instruction does 2 x 16 x 8 x 16 FLOPs. ldmatrix
# gives each lane the address of one 8-element (16-byte) row, so an operand window starts and ends
# on 8 columns.
MMA_M, MMA_N, MMA_K = 16, 8, 16
LDSM_ROW = 8
# FA3-class tensor-core rates (FlashAttention-3 paper, Shah et al. 2024, arXiv 2407.08608, H100 80GB
# SXM5, FP16/bf16): causal forward, head dim 128, 580 TFLOP/s (Figure 5, 579-616 over 4k-16k, as
# FA3_RATE); backward at T = 4k, Figure 6: 453 TFLOP/s at head dim 64, 542 at 128 (FA2: 279, 310).
FA3_BWD = {64: 453e12, 128: 542e12}
GEMM_FRAC = 0.65   # cuBLAS bf16 GEMMs of the 830M model's shapes: fraction of dense peak (assumption)
GPU_MEM = 80e9     # H100 SXM: 80 GB HBM3
MIN_BLOCKS = 1     # resident blocks per SM a (d) tile kernel must allow (--min-blocks)
GOALS = {"conv": 4.0, "head-only": 1.5, "memory": 1.3, "step": 1.3}   # issue 46's goals (x SDPA / baseline)
# The counts of one kernel that --kernel-counts FILE may replace (per kernel, whole launch).
COUNT_FIELDS = ("tc_flops", "cuda_flops", "exp", "smem_bytes", "l2_bytes", "hbm_bytes", "smem_per_block")


def ceil_to(x, q):
    return -(-x // q) * q


def band_mma_flops(cq, ck, n=MMA_N):
    """Tensor-core FLOPs per output entry of a cq x ck key-query convolution done as one MMA per
    16 x n output tile: out[i, j] = sum_a sum_b w[a, b] X[i-a, j-b+p] is X's rows i-a (a < cq)
    side by side, each over the key window of the tile's n columns (p columns before, ck-1-p
    after, each rounded out to an ldmatrix row), times the banded Toeplitz matrix of w (its
    entries depend only on a and on j - j', so it sits in registers for the whole kernel). K =
    cq x window rounded up to MMA_K; an output entry costs 2 K. 6x11 (p = 5): n = 8 gives a
    window 8 + 8 + 8 = 24, K = 144 (9 k-steps), 288 FLOPs (132 useful); n = 16, one MMA per a,
    gives 6 x 32 x 2 = 384. The input gradient is the same product with the transposed band
    (rows i+a, 288); the kernel gradient puts (a, window) on M (144 = 9 m-tiles), the output
    columns on N and the rows on K, accumulating C[(a, j'), j] over every tile of the block, then
    sums C along its diagonals j - j' (once per block): 288 per entry too."""
    p = (ck - 1) // 2
    window = ceil_to(p, LDSM_ROW) + n + ceil_to(ck - 1 - p, LDSM_ROW)
    return 2 * ceil_to(cq * window, MMA_K)


def head_mma_flops(H):
    """Tensor-core FLOPs per entry and head of an H x H mix over the heads of a group (head mixing,
    head convolution with c_h = H, their transposes and weight gradients): M = entries, K = the
    H source heads (padded to MMA_K), N = the H output heads: 2 ceil16(H), 32 at H = 16."""
    return 2 * ceil_to(H, MMA_K)


# MMAs per product of each band and head step (x the single-bf16 FLOPs of band_mma_flops and
# head_mma_flops) and the parts of its A operand read from shared memory. A single bf16 input rounds
# to 2^-9 relative; a score's error of 2^-9 sum |w||Z| is absolute in the softmax's exponent, many
# times the path's other roundings (docs/cuda.md, "Tolerance of the test"). So the kernels split a
# float map x into hi = bf16(x) and lo = bf16(x - hi) (x = hi + lo to about 2^-17 |x|): the
# convolution multiplies Z's hi and lo by the bf16 band (2 MMAs); the head steps sum hi hi, lo hi
# and hi lo (fh_mma3: 3 MMAs). Where no MMA kernel exists yet the factor is an assumption, said so.
MMA_SPLIT = {  # step: (MMAs per product, A operand parts, the function doing it or None, where)
    "pre": (2, 2, "fc_conv", "k_fa_conv_forward: Z hi and lo, each times the bf16 band"),
    "pre^T": (2, 2, "fc_conv", "k_fa_conv_dkdv, k_fa_conv_dq: dS1 hi and lo, each times the flipped bf16 band"),
    "pre grad": (3, 2, "fcb_mma_t", "k_fa_conv_dq: dw from dS1^T Z_a (fcb_dw), dS1 and Z split (3 MMAs)"),
    "post": (2, 2, "fc_conv", "k_fa_post_forward, k_fa_post_dkdv's P1: P hi and lo, each times the bf16 band"),
    "post^T": (1, 1, None, "k_fa_post_dq, _dkdv: dP1 (one bf16 part) times the flipped band (fc_conv<false>)"),
    "post grad": (2, 1, None, "k_fa_post_dq: fcb_dw<false>, dP1 (one bf16 part) times P hi and lo (fcb_mma_t's text counts 3: pre grad's)"),
    "mix": (3, 2, "fh_mix", "k_fa_head_forward: S2 = S1 W1^T, S1 and W1 split"),
    "mix^T": (3, 2, "fhq_store_ds", "k_fa_head_dq: dS1 = dS2 W1, dS2 and W1 split"),
    "mix grad": (3, 2, "fhq_wgrad", "k_fa_head_dq: dW1 += dS2^T S1, both split"),
    "hc": (3, 2, "fh_mix_regs", "k_fa_head_forward: P2 = P W2', P and W2' split"),
    "hc^T": (2, 1, "fhq_dp", "k_fa_head_dq: dP = dP2 W2'^T, dP2 hi only times W2' hi and lo"),
    "hc grad": (3, 2, "fhq_wgrad", "k_fa_head_dq: dW2' += P^T dP2, P split, dP2 hi (3 MMAs, one on zeros)"),
}
# The MMAs one call in a kernel's text stands for (check_split counts them in the function above).
MMA_CALLS = {"mma_16816(": 1, "fh_mma3(": 3, "fh_mix_regs<NQ>(": 3, "fh_mixmat<NQ, 1>(": 3, "fh_mixmat<NQ, 0>(": 2}
SPLIT_SOURCES = ("src/attn/mta_cuda_fa_conv.cuh", "src/attn/mta_cuda_fa_conv_bwd.cuh", "src/attn/mta_cuda_fa_post.cuh",
                 "src/attn/mta_cuda_fa_heads.cuh",
                 "src/attn/mta_cuda_fa_heads_dq.cuh")


def mma_steps(m, H, d, g, G, cls):
    """Design (d)'s steps, per causal entry and head: each a function of the factor f (entries
    computed per output entry: halo recomputation) giving (kind, name, amount, f) items. The maps
    are bf16 in shared memory between steps (an MMA reads its A operand with ldmatrix: 2 B per
    entry, c_q row shifts for a convolution, and writes its result once); the Toeplitz and head
    matrices sit in registers; a cluster's other SMs send (G-g)/g bf16 values per mixing step. A
    product's B operand (K or V, d bf16 per key) is read once per 16-row warp tile (mma.sync,
    fa2) or per 64-row warpgroup (wgmma, fa3)."""
    xch, opnd = (G - g) / g * 2, 2 * d / (MMA_M if cls == "fa2" else 4 * MMA_M)

    def band(key, name, cq, ck):
        x, parts = MMA_SPLIT[key][:2]
        return lambda f: [("tc", name, x * band_mma_flops(cq, ck), f), ("smem", name, 2 * cq * parts + 2, f)]

    def heads(key, name, n):
        x, parts = MMA_SPLIT[key][:2]
        return lambda f: [("tc", name, x * head_mma_flops(n), f), ("smem", name, 2 * parts + 2, f),
                          ("xch", name, xch, f)]

    def prod(name):
        return lambda f: [("tc", name, 2 * d, f), ("smem", name, opnd + 2, f)]

    def cuda(name, fl, ex=0):
        return lambda f: [("cuda", name, fl, f)] + ([("exp", name, ex, f)] if ex else [])

    out = {"S": prod("S = q k^T"), "stats": cuda("softmax stats", 3, 1), "softmax": cuda("softmax", 2, 1),
           "online": cuda("online softmax", 5, 1), "softmax^T": cuda("softmax^T", 4), "D": cuda("D = rowsum(P dP)", 2),
           "Pv": prod("P v"), "dP3": prod("dP3 = dO v^T"), "dv": prod("dv = P3^T dO"), "dk": prod("dk = dZ^T q"),
           "dq": prod("dq = dZ k")}
    for key, name, cq, ck in (("pre", "pre conv", m["cq"], m["ck"]), ("post", "post conv", m["cq2"], m["ck2"])):
        for way in ("", "^T", " grad"):  # forward, input gradient, kernel gradient
            out[key + way] = band(key + way, name + way, cq, ck) if cq else (lambda f: [])
    for key, name, n in (("mix", "head mixing", H if m["mix"] else 0), ("hc", "head conv", m["ch"])):
        for way in ("", "^T", " grad"):
            out[key + way] = heads(key + way, name + way, n) if n else (lambda f: [])
    return out


def mma_tile_kernels(m, H, d, T, g, G, Br, Bc, cls):
    """Design (d)'s tile kernels: (name, direction, tiling, per-entry items). Forward: row tiles of
    Br queries walking the keys (column halos carried, row halos recomputed), a statistics kernel
    first when a post-softmax step needs normalised probabilities of other rows and heads.
    Backward: a row kernel for D_i = sum_j P dP (dP is no longer dO v^T), then dK/dV: column
    tiles of Bc keys walking the queries (row halos carried, column halos recomputed), dq added
    to an fp32 buffer in L2 in a fixed order (deterministic), the kernel gradients kept per block
    as MMA accumulators."""
    s = mma_steps(m, H, d, g, G, cls)
    hq, hp, p1, p2, _ = halos(m)
    post = bool(m["cq2"] or m["ch"])

    def run(*steps):  # [(step, factor)] -> items
        return [it for name, f in steps for it in s[name](f)]

    def scores(f1, f0):  # S on f0 entries per output entry, the pre conv and mixing on f1
        return run(("S", f0), ("pre", f1), ("mix", f1))

    kv_r = [("l2", "K, V per row tile", 4 * d / Br, 1)]
    fS1, fS = (Br + hp) / Br, (Br + hp + hq) / Br
    if not post:
        return [("forward", "fwd", "row", scores(1, fS / fS1) + run(("online", 1), ("Pv", 1)) + kv_r),
                ("dK/dV", "bwd", "col", scores(1, 1 + 2 * p1 / Bc) + run(("softmax", 1), ("dP3", 1), ("softmax^T", 1),
                 ("mix^T", 1), ("mix grad", 1), ("pre^T", 1), ("pre grad", 1), ("dv", 1), ("dk", 1), ("dq", 1))
                 + [("l2", "q, dO per column tile; dq (fp32) in order", 12 * d / Bc, 1)])]
    fb = (Br + hp) / Br
    fc, fc1 = (Bc + 2 * p1 + 2 * p2) / Bc, (Bc + 2 * p1) / Bc
    fP = (Bc + 2 * max(p1, p2)) / Bc
    return [("fwd statistics", "fwd", "row", scores(fS1, fS) + run(("stats", fS1)) + kv_r),
            ("forward", "fwd", "row",
             scores(fS1, fS) + run(("softmax", fS1), ("post", 1), ("hc", 1), ("Pv", 1)) + kv_r),
            ("bwd row sums D", "bwd", "row", scores(1, 1 + hq / Br) + run(("softmax", 1), ("dP3", fb), ("hc^T", fb),
             ("post^T", 1), ("D", 1)) + kv_r),
            ("dK/dV", "bwd", "col", scores(fP, fP + 2 * p1 / Bc) + run(
                ("softmax", fP), ("post", 1), ("hc", 1), ("dP3", fc), ("hc^T", fc), ("hc grad", 1), ("post^T", fc1),
                ("post grad", 1), ("softmax^T", fc1), ("mix^T", fc1), ("mix grad", 1), ("pre^T", 1), ("pre grad", 1),
                ("dv", 1), ("dk", 1), ("dq", 1))
             + [("l2", "q, dO per column tile; dq (fp32) in order", 12 * d / Bc, 1)])]


def mma_smem(m, d, g, Br, Bc):
    """Shared memory per block of (d)'s tile kernels: row tiles hold two bf16 map tiles with their
    halos for the g heads here, q for the tile's rows, K and V double-buffered; column tiles four
    16-row map windows, K and V of the column tile, q and dO double-buffered. The dK/dV (and O)
    accumulators are in registers: their fp32 bytes, the second value."""
    hq, hp, _, _, halo_c = halos(m)
    rows = Br + hp + hq
    row = 2 * g * rows * (Bc + halo_c) * 2 + g * rows * d * 2 + g * 2 * 2 * Bc * d * 2
    col = 4 * g * (MMA_M + hp + hq) * (Bc + halo_c) * 2 + g * 2 * Bc * d * 2 + g * 2 * 2 * MMA_M * d * 2
    return {"row": row, "col": col}, {"row": g * Br * d * 4, "col": g * Bc * d * 2 * 4}


def mma_rates(d, T, cls):
    """Tensor-core FLOP/s of (d)'s forward and backward kernels. fa2: FA2's measured fwd+bwd rate at
    this d and T (mma.sync code, as the emulator runs); fa3: FA3's causal forward and, for the
    backward, its Figure 6 at 4k interpolated linearly in d (wgmma and TMA: not what the emulator
    runs)."""
    if cls == "fa2":
        r = fa2_anchor_rate(d, T)
        return {"fwd": r, "bwd": r}
    w = (min(max(d, 64), 128) - 64) / 64
    return {"fwd": FA3_RATE, "bwd": (1 - w) * FA3_BWD[64] + w * FA3_BWD[128]}


def blocks_per_sm(smem):
    """Resident blocks per SM: 228 KB of shared memory, 1 KB reserved per block; at most 8 (2048
    threads of 256-thread blocks); 0 when one block does not fit."""
    return 0 if smem > SMEM_PER_SM else min(8, (SMEM_PER_SM + 1024) // (smem + 1024))


def mma_design(B, H, d, T, m, cluster, Br, Bc, cls):
    """Design (d)'s kernels for one tile choice, each with its counts for the whole launch (FLOPs,
    bytes) and its wave efficiency; None when its working set does not fit."""
    G = H if m["mix"] else (m["ch"] or 1)
    g = G // cluster
    smem, acc = mma_smem(m, d, g, Br, Bc)
    if max(acc.values()) > REGS_FOR_MAPS or min(blocks_per_sm(v) for v in smem.values()) < MIN_BLOCKS:
        return None
    post = bool(m["cq2"] or m["ch"])
    R, X = B * H * T, B * H * T * d * 2          # rows x heads; one bf16 (B, H, T, d) tensor
    tiles_of = {"row": Br, "col": Bc}
    eff = {t: lpt_efficiency(causal_tiles(B * H // G, T, n), SMS // cluster) for t, n in tiles_of.items()}
    nblocks = B * (H // G) * cluster * math.ceil(T / Bc)
    partials = nblocks * 4 * g * (m["cq"] * m["ck"] + m["cq2"] * m["ck2"] + (H if m["mix"] else 0) + m["ch"])
    hbm = {"fwd statistics": 2 * X + 8 * R, "bwd row sums D": 4 * X + 12 * R,
           "forward": 5 * X + (18 if post else 14) * R,
           "dK/dV": 6 * X + 12 * R + 8 * d * R + partials}
    out = []
    for name, direction, tiling, items in mma_tile_kernels(m, H, d, T, g, G, Br, Bc, cls):
        E = B * H * T * T / 2 * (1 + tiles_of[tiling] / T)   # causal entries, diagonal tiles whole
        k = {"name": name, "dir": direction, "tiling": f"{tiling} tiles of {tiles_of[tiling]}",
             "hbm_bytes": hbm[name], "smem_per_block": smem[tiling], "wave_eff": eff[tiling]}
        for f in ("tc", "cuda", "exp", "smem", "l2"):
            k[f if f == "exp" else f + ("_flops" if f in ("tc", "cuda") else "_bytes")] = sum(
                a * fac * E for kind, _, a, fac in items if kind == f or (f == "smem" and kind == "xch"))
        out.append(k)
    row = {"dir": "bwd", "tc_flops": 0, "exp": 0, "l2_bytes": 0, "wave_eff": 1.0}
    out.insert(2 if post else 1, dict(row, name="norm/gate bwd", tiling="row chunks of 64", cuda_flops=12 * d * R,
                                      smem_bytes=0, hbm_bytes=3 * X + (12 if post else 16) * R, smem_per_block=4096))
    out.append(dict(row, name="dQ convert", tiling="rows", cuda_flops=0, smem_bytes=0, hbm_bytes=4 * d * R + X,
                    smem_per_block=0))
    out.append(dict(row, name="kernel-gradient sums", tiling="one block per parameter tensor", cuda_flops=partials / 4,
                    smem_bytes=0, hbm_bytes=partials, smem_per_block=4096))
    return out


def kernel_time(k, rates, overlap):
    """A kernel's roofline terms (s) and its predicted time: the largest term over the wave
    efficiency, plus a launch. The cores' term is tensor-core plus CUDA-core time when a warp's
    MMAs and its softmax do not overlap (FA2-class, mma.sync), their maximum when they do (FA3's
    ping-pong of two warpgroups)."""
    t = {"tensor cores": k["tc_flops"] / rates[k["dir"]],
         "CUDA cores": k["cuda_flops"] / (FP32 * CUDA_FRAC) + k["exp"] / (MUFU * MUFU_FRAC),
         "shared memory": k["smem_bytes"] / (SMEM_BW * SMEM_FRAC), "L2": k["l2_bytes"] / L2_BW,
         "HBM": k["hbm_bytes"] / (HBM * HBM_FRAC)}
    core = (max if overlap else sum)((t["tensor cores"], t["CUDA cores"]))
    bounds = {"cores": core, "shared memory": t["shared memory"], "L2": t["L2"], "HBM": t["HBM"]}
    bound = max(bounds, key=bounds.get)
    if bound == "cores":
        bound = "tensor cores" if t["tensor cores"] >= t["CUDA cores"] else "CUDA cores"
    return t, max(bounds.values()) / k["wave_eff"] + LAUNCH, bound


def mma_predict(kernels, d, T, cls):
    """Each kernel's time and the total (ms) at the FA2- or FA3-class rates."""
    rates = mma_rates(d, T, cls)
    rows, total = [], 0.0
    for k in kernels:
        if blocks_per_sm(k["smem_per_block"]) < 1:
            raise ValueError(f"kernel {k['name']}: {k['smem_per_block']} B of shared memory per block do not fit")
        t, s, bound = kernel_time(k, rates, cls == "fa3")
        rows.append(dict(k, blocks_per_sm=blocks_per_sm(k["smem_per_block"]), ms=s * 1e3, bound=bound,
                         terms_ms={n: v * 1e3 for n, v in t.items()}))
        total += s
    return {"ms": total * 1e3, "kernels": rows}


def mma_best(B, H, d, T, m, cls):
    """(d)'s fastest tile: clusters of 1-8 SMs, Br and Bc in 16..128 whose working sets fit."""
    G = H if m["mix"] else (m["ch"] or 1)
    best = None
    for cluster in (c for c in (1, 2, 4, 8) if G % c == 0):
        for Br in (16, 32, 64, 128):
            for Bc in (16, 32, 64, 128):
                ks = mma_design(B, H, d, T, m, cluster, Br, Bc, cls)
                if ks is None:
                    continue
                r = mma_predict(ks, d, T, cls)
                if best is None or r["ms"] < best["ms"]:
                    best = dict(r, cluster=cluster, heads_per_sm=G // cluster, Br=Br, Bc=Bc, cls=cls)
    return best


def check_fields(where, fields, known, whole):
    """One kernel's counts in a --kernel-counts file: an object of counts named in known, each a
    finite number >= 0 (whole: an integer); else ValueError, its message starting with where."""
    if not isinstance(fields, dict):
        raise ValueError(f"{where}: an object of counts expected")
    for f, v in fields.items():
        if f not in known:
            raise ValueError(f"{where}: unknown count '{f}' (known: {', '.join(known)})")
        kind = isinstance(v, int) if whole else isinstance(v, (int, float)) and v != float("inf")
        if isinstance(v, bool) or not kind or not v >= 0:
            raise ValueError(f"{where}: {f} must be a {'whole' if whole else 'finite'} number >= 0, not {v!r}")


def apply_counts(best, d, T, counts):
    """best with the kernels' counts replaced by counts ({kernel name: {field: value}}), the times
    predicted again. Unknown kernels or fields are errors."""
    kernels = [dict(k) for k in best["kernels"]]
    names = {k["name"] for k in kernels}
    for name, fields in counts.items():
        if name not in names:
            raise ValueError(f"--kernel-counts: no kernel '{name}' (kernels: {', '.join(sorted(names))})")
        check_fields(f"--kernel-counts: kernel '{name}'", fields, COUNT_FIELDS, False)
        for k in kernels:
            if k["name"] == name:
                k.update(fields)
                k["measured"] = sorted(fields)
    return dict(best, **mma_predict(kernels, d, T, best["cls"]))


def load_counts(path):
    """--kernel-counts FILE: {"shapes": {shape name: {kernel name: {count: value}}}}, and/or the
    emulator's counts that `mtac attn --plan --counts` writes, {"emulated": ...} (check_emulated).
    Returns (shapes, emulated), either empty."""
    try:
        with open(path) as f:
            doc = json.load(f)
    except (OSError, ValueError) as e:
        raise ValueError(f"--kernel-counts {path}: {e}")
    if (not isinstance(doc, dict) or not ("shapes" in doc or "emulated" in doc)
            or not isinstance(doc.get("shapes", {}), dict)):
        raise ValueError(f"--kernel-counts {path}: expected an object with \"shapes\": "
                         "{shape: {kernel: {count: value}}} or \"emulated\" (mtac attn --plan --counts)")
    return doc.get("shapes", {}), check_emulated(doc.get("emulated", {}))


# The emulator's counts of a kernel (mta_kernel_ops, include/mta.h), as mtac attn --plan --counts
# writes them: whole warp instructions, and cp.async copies; and the FLOPs of one MMA of each shape.
EMU_FIELDS = ("launches", "mma", "ldmatrix", "ldmatrix_bytes", "cp_async", "cp_async_bytes", "shfl")
MMA_FLOPS = 2 * MMA_M * MMA_N * MMA_K


def check_emulated(e):
    """The "emulated" object of --kernel-counts: {"config": {"B", "H", "T", "d": ints > 0, ...},
    "forward": {kernel: {count: value}}, "backward": {...}}, the counts EMU_FIELDS, whole numbers
    >= 0. Returns it, or raises ValueError."""
    if e == {}:
        return e
    where = "--kernel-counts: \"emulated\""
    cfg = e.get("config") if isinstance(e, dict) else None
    if not isinstance(cfg, dict) or any(not isinstance(cfg.get(k), int) or cfg[k] < 1 for k in "BHTd"):
        raise ValueError(f"{where}: expected {{\"config\": {{\"B\", \"H\", \"T\", \"d\": counts}}, "
                         "\"forward\": {kernel: {count: n}}, \"backward\": ...}")
    for phase in ("forward", "backward"):
        if not isinstance(e.get(phase), dict):
            raise ValueError(f"{where}: no \"{phase}\" object of kernels")
        for name, fields in e[phase].items():
            check_fields(f"{where}: {phase} kernel '{name}'", fields, EMU_FIELDS, True)
    return e


def emulated_kernels(e):
    """Each emulated kernel as (d)'s kernels are described: tensor-core FLOPs from its MMAs, shared
    memory from its ldmatrix bytes, L2 from its cp.async bytes, nothing else (a lower bound: the
    CUDA-core work and other loads are not counted), and its time at FA2-class rates for the
    emulated config, one launch per launch counted."""
    cfg, out = e["config"], []
    rates = mma_rates(cfg["d"], cfg["T"], "fa2")
    for phase, direction in (("forward", "fwd"), ("backward", "bwd")):
        for name, c in e[phase].items():
            n = {f: c.get(f, 0) for f in EMU_FIELDS}
            k = {"name": name, "dir": direction, "tc_flops": MMA_FLOPS * n["mma"],
                 "cuda_flops": 0, "exp": 0, "smem_bytes": n["ldmatrix_bytes"], "l2_bytes": n["cp_async_bytes"],
                 "hbm_bytes": 0, "wave_eff": 1.0}
            t, s, bound = kernel_time(k, rates, False)
            out.append(dict(k, counts=n, us=(s + (max(n["launches"], 1) - 1) * LAUNCH) * 1e6,
                            bound=bound if max(t.values()) >= LAUNCH else "launch"))
    return out


def print_emulated(e, markdown):
    cfg = e["config"]
    print(f"Emulated counts (mtac attn --plan --counts): {cfg.get('label', 'a config')}, B={cfg['B']} H={cfg['H']} "
          f"T={cfg['T']} d={cfg['d']}; PREDICTED per kernel from its MMAs, ldmatrix and cp.async alone (a lower "
          "bound), FA2-class rates")
    rows = [(k["dir"], k["name"], *(str(k["counts"][f]) for f in ("launches", "mma", "ldmatrix", "cp_async", "shfl")),
             f"{k['tc_flops']:.3g}", f"{k['us']:.1f}", k["bound"]) for k in emulated_kernels(e)]
    table(("dir", "kernel", "launches", "mma", "ldmatrix", "cp.async", "shfl", "TC FLOPs", "us", "bound"),
          rows, markdown)


def attn_memory(B, H, d, T, kernels=None):
    """Device bytes of one attention layer's forward+backward: SDPA (kernels None) keeps q k v o
    dO dq dk dv (bf16), the log-sum-exp and D (fp32 per row) and FA2's fp32 dq accumulator. (d)
    adds o before the norm and gate and its gradient (bf16), the gate and its gradient, the norm's
    and the softmax's statistics per row, and the kernel-gradient partials of its blocks."""
    R, X = B * H * T, B * H * T * d * 2
    if kernels is None:
        return 8 * X + 8 * R + 4 * d * R
    sums = next(k for k in kernels if k["name"] == "kernel-gradient sums")
    return 10 * X + 24 * R + 4 * d * R + sums["hbm_bytes"]


# The 830M model (docs/spec.md section 3): dim 1536, 24 layers, FFN 4096, vocabulary 128,256, key-query
# convolutions in 6 layers, head mixing, head convolution, norm and gate in all.
M830 = {"dim": 1536, "layers": 24, "ffn": 4096, "vocab": 128256, "conv_layers": 6, "params": 876553728}


def step_830m(B, T, sdpa_ms, conv_ms, head_ms):
    """One training step of the 830M model (fwd+bwd, AdamW), ms: the baseline's and MTA's, and the
    terms they share. GEMMs: 6 N P_matmul FLOPs at GEMM_FRAC of peak. Elementwise passes through
    HBM (bf16), per token and layer: forward two RMSNorms (4 dim), RoPE on q, k (4 dim), two
    residual adds (6 dim), SwiGLU (3 ffn); the backward twice that. The loss: the logits written,
    read, their gradient written and read (4 x 2 B per logit). AdamW: fp32 parameter, gradient and
    two moments read, three written, a bf16 copy (30 B per parameter)."""
    c, N = M830, B * T
    hbm = HBM * HBM_FRAC
    shared = {"GEMMs": 6 * N * (c["layers"] * (4 * c["dim"] ** 2 + 3 * c["dim"] * c["ffn"]) + c["dim"] * c["vocab"])
              / (TC_BF16 * GEMM_FRAC) * 1e3,
              "elementwise": 3 * c["layers"] * N * (14 * c["dim"] + 3 * c["ffn"]) * 2 / hbm * 1e3,
              "loss": 8 * N * c["vocab"] / hbm * 1e3, "AdamW": 30 * c["params"] / hbm * 1e3}
    common = sum(shared.values())
    base = common + c["layers"] * sdpa_ms
    mta = common + c["conv_layers"] * conv_ms + (c["layers"] - c["conv_layers"]) * head_ms
    return {"baseline_ms": base, "mta_ms": mta, "ratio": mta / base, "shared_ms": shared}


def goals_830m(counts=None, occupancy=None):
    """Issue 46's goals for the 830M layer on an H100 (bf16, B=2, H=16, d=96, T=4096, fwd+bwd), each
    beside (d)'s predictions at FA2- and FA3-class rates and the conv and head-only layers as built
    (built_layer_ms, occupancy as built_kernels'; built_memory): [{goal, limit, fa2, fa3, built,
    meets}]."""
    B, H, d, T = 2, 16, 96, 4096
    a = sdpa(B, H, d, T)["ms"]
    res = {cls: {v: mma_for("830M " + v, B, H, d, T, v == "conv", cls, counts) for v in ("conv", "no-conv")}
           for cls in ("fa2", "fa3")}

    def ratio(goal, limit, val):
        return {"goal": goal, "limit": f"<= {limit:.1f}x", "limit_x": limit, **{c: f"{v:.2f}x" for c, v in val.items()},
                "meets": {c: v <= limit for c, v in val.items()}}
    out = [ratio("830M conv layer / SDPA", GOALS["conv"], {c: r["conv"]["ms"] / a for c, r in res.items()}),
           ratio("head-only layer / SDPA", GOALS["head-only"], {c: r["no-conv"]["ms"] / a for c, r in res.items()}),
           ratio("layer memory / SDPA's", GOALS["memory"],
                 {c: max(attn_memory(B, H, d, T, r[v]["kernels"]) for v in r) / attn_memory(B, H, d, T)
                  for c, r in res.items()})]
    long = {c: mma_for("830M conv T32768", B, H, d, 32768, True, c, counts) for c in res}
    gb = {c: attn_memory(B, H, d, 32768, r["kernels"]) / 1e9 for c, r in long.items()}
    out.append({"goal": "T=32768 runs (conv layer)", "limit": f"fits {GPU_MEM / 1e9:.0f} GB",
                **{c: f"{gb[c]:.1f} GB, {r['ms']:.0f} ms" for c, r in long.items()},
                "meets": {c: gb[c] * 1e9 <= GPU_MEM for c in long}})
    occupancy = occupancy or sass_occupancy(ROOT)
    built = {v: built_layer_ms(layer, B, H, d, T, res["fa2"][v], occupancy)
             for layer, v in (("conv", "conv"), ("head-only", "no-conv"))}
    mem = max(built_memory(layer, B, H, d, T) for layer in ("conv", "head-only")) / attn_memory(B, H, d, T)
    mem_nd = max(built_memory(layer, B, H, d, T) for layer in ("conv-atomic", "head-only")) / attn_memory(B, H, d, T)
    out[2]["built"], out[2]["meets"]["built"] = f"{mem:.2f}x", mem <= GOALS["memory"]
    out[2]["built_nd"], out[2]["meets"]["built_nd"] = f"{mem_nd:.2f}x", mem_nd <= GOALS["memory"]
    gb_built, gb_nd = built_memory("conv", B, H, d, 32768), built_memory("conv-atomic", B, H, d, 32768)
    out[3]["built"] = f"{gb_built / 1e9:.1f} GB, {built_layer_ms('conv', B, H, d, 32768, long['fa2'], occupancy):.0f} ms"
    out[3]["meets"]["built"] = gb_built <= GPU_MEM
    atomic = built_layer_ms("conv-atomic", B, H, d, T, res["fa2"]["conv"], occupancy)
    out[3]["built_nd"] = f"{gb_nd / 1e9:.1f} GB, " \
        f"{built_layer_ms('conv-atomic', B, H, d, 32768, long['fa2'], occupancy):.0f} ms"
    out[3]["meets"]["built_nd"] = gb_nd <= GPU_MEM
    steps = {c: step_830m(B, T, a, r["conv"]["ms"], r["no-conv"]["ms"]) for c, r in res.items()}
    steps["built"] = step_830m(B, T, a, built["conv"], built["no-conv"])
    steps["built_nd"] = step_830m(B, T, a, atomic, built["no-conv"])
    for g, v, nd in zip(out, ("conv", "no-conv"), (atomic, built["no-conv"])):
        g["built"], g["meets"]["built"] = f"{built[v] / a:.2f}x", built[v] / a <= g["limit_x"]
        g["built_nd"], g["meets"]["built_nd"] = f"{nd / a:.2f}x", nd / a <= g["limit_x"]
    out.append(ratio("830M training step / baseline", GOALS["step"], {c: st["ratio"] for c, st in steps.items()}))
    out[-1]["detail"] = ("step (ms): shared " + ", ".join(f"{k} {v:.1f}" for k, v in steps["fa2"]["shared_ms"].items())
                         + f"; baseline {steps['fa2']['baseline_ms']:.1f} (24 SDPA layers {24 * a:.1f}); MTA "
                         + ", ".join(f"{c.upper()}-class {st['mta_ms']:.1f}" for c, st in steps.items()
                                     if not c.startswith("built"))
                         + f", as built {steps['built']['mta_ms']:.1f} ({steps['built_nd']['mta_ms']:.1f} without "
                         "determinism)")
    return out


def mma_for(name, B, H, d, T, conv, cls, counts):
    """(d)'s best tile for a shape, with the measured counts of --kernel-counts where given."""
    best = mma_best(B, H, d, T, mta_config(H, conv), cls)
    return apply_counts(best, d, T, counts[name]) if counts and name in counts else best


# ---- the tensor-core kernels as built (issue 46 item 5: src/attn/mta_cuda_fa*.cuh) ----------------
# Their warp operations per tile pair (query rows x keys of every head of a group: the every-step
# kernels' 16 x 16 over the regions of fe_geo_of and feb_geo_of, mirrored below; the head kernels'
# 16 x fh_keys (32 keys for groups of up to 16 heads, 16 for 17-32); FA2's 64 x 64, plus its loads
# per row tile), derived from the kernels' loops, exact counts of what the emulator counts:
# mma.sync, ldmatrix (128 B per 8x8 matrix), cp.async (16 B each); and the expf of the softmax.
# --check compares them with `mtac attn --plan --counts` (BUILT_FIXTURES).
FE_M = FE_N = FE_G = 16
FH_M, FH_N = 16, 32   # the head kernels' tile with fh_nq 1 (mta_cuda_fa_heads.cuh)
FA_T = 64             # FA2's tile, rows and keys (mta_cuda_fa2.cuh: TC_M = TC_N)
BUILT_FIXTURES = ("tests/fixtures/every_counts.json", "tests/fixtures/built_counts.json")


def up16(x):
    return ceil_to(x, 16)


def fe_band(cq, ck, sh=0):
    """fc_geo_of's band (feb_band_geo's, shifted by sh): c_q, p and the largest delta dmax."""
    return {"cq": cq, "ck": ck, "p": (ck - 1) // 2, "dmax": (ck + sh + 6) // 8 * 8}


def fe_rg(top, left, rows, cols):
    return {"top": top, "left": left, "rows": rows, "cols": cols}


def fe_geo(stats, cq1, ck1, cq2, ck2):
    """fe_geo_of: the statistics kernel's (stats) or the forward's regions s (S1, P) and z (Z)."""
    g1, g2 = fe_band(cq1 or 1, ck1 if cq1 else 1), fe_band(cq2 or 1, ck2 if cq2 else 1)
    q1, q2 = g1["cq"] - 1, g2["cq"] - 1
    s = fe_rg(0, 0, FE_M, FE_N) if stats else fe_rg(q2, g2["p"], FE_M + q2, FE_N + 2 * g2["p"])
    z = fe_rg(s["top"] + q1, s["left"] + g1["p"], up16(up16(s["rows"]) + q1), up16(s["cols"]) + 2 * g1["p"])
    return {"g1": g1, "g2": g2, "s": s, "z": z}


def feb_geo(kind, cq1, ck1, cq2, ck2):
    """feb_geo_of for kind "D", "dq" or "dkdv": the planes pa (S1, P, dS2, dS1), pb (dP2, dP1), z and
    zq (Z) and their halos."""
    g1, g2 = fe_band(cq1 or 1, ck1 if cq1 else 1), fe_band(cq2 or 1, ck2 if cq2 else 1)
    full = kind != "D"
    q1, p1, q2, p2 = g1["cq"] - 1, g1["p"], g2["cq"] - 1, g2["p"]
    m = max(p1, p2) if full else 0
    LP = ceil_to(m, 8)
    L2, L1 = ceil_to(LP + p2, 8), ceil_to(p1, 8)
    r1, top = FE_M + (q1 if full else 0), q2 if full else 0
    pa = fe_rg(top, LP, top + r1, LP + FE_N + m)
    pb = fe_rg(0, L2, r1 + q2, L2 + FE_N + m + p2)
    z = fe_rg(top + q1, LP + p1, top + r1 + q1, pa["cols"] + 2 * p1)
    zq = fe_rg(q1, L1, r1, L1 + FE_N + p1)
    return {"g1": g1, "g2": g2, "q1": q1, "p1": p1, "p2": p2, "L1": L1, "pa": pa, "pb": pb, "z": z, "zq": zq}


class WarpOps:
    """Warp instructions of the engine's operations, as the emulator counts them (mta_kernel_ops)."""

    def __init__(self, dp):
        self.dp = dp
        self.n = {"mma": 0, "ldmatrix": 0, "ldmatrix_bytes": 0, "cp_async": 0, "cp_async_bytes": 0, "exp": 0,
                  "global_bytes": 0}

    def exp(self, n):  # expf of the softmax (not an emulator count)
        self.n["exp"] += n

    def store(self, rows):  # rows of d floats in global memory read and written (O, dq, dk, dv += ...; not an emulator count)
        self.n["global_bytes"] += 8 * rows * self.dp

    def ldsm(self, matrices, times=1):
        self.n["ldmatrix"] += times
        self.n["ldmatrix_bytes"] += 128 * matrices * times

    def mma(self, times):
        self.n["mma"] += times

    def load(self, rows):  # fa_load_rows: a 16-byte cp.async per 8 columns of each row
        self.n["cp_async"] += rows * self.dp // 8
        self.n["cp_async_bytes"] += 16 * rows * self.dp // 8

    def product(self, r):  # fe_product (fc_z_rect, fa_xyT): per 16 x 16 chunk and k step 2 ldmatrix x4, 2 MMAs
        n = up16(r["rows"]) // 16 * (up16(r["cols"]) // 16) * self.dp // 16
        self.ldsm(4, 2 * n)
        self.mma(2 * n)

    def conv(self, band, ncols, mtiles, ngroups, nt, lo):  # fe_conv (fc_conv's band MMAs)
        parts = 2 if lo else 1
        for ng in range(ngroups):
            nt0 = nt * ng
            ks0 = max((8 * nt0 - 8 + 15) // 16, 0)
            ks1 = min((8 * (nt0 + nt - 1) + band["dmax"]) // 16, ncols // 16 - 1)
            for ks in range(ks0, ks1 + 1):
                hits = sum(-8 <= 16 * ks - 8 * (nt0 + n) <= band["dmax"] for n in range(nt))
                self.ldsm(4, parts * mtiles * band["cq"])
                self.ldsm(2, hits * mtiles * band["cq"])
                self.mma(parts * hits * mtiles * band["cq"])

    def mix(self, rows, cols, al, nq=1, regs=False):
        """fe_mix, fe_mix_chunk, fh_mixmat: per (row, 16 columns) and NQ x NQ k steps and n-tile pairs
        of the heads, W hi and lo by ldmatrix x4 and (2 + al) MMAs per n-tile; A hi (and lo: al) by
        ldmatrix x4 per k step unless it is in registers (regs)."""
        n = rows * (up16(cols) // 16)
        self.ldsm(4, n * (0 if regs else nq * (1 + al)) + 2 * nq * nq * n)
        self.mma(2 * (2 + al) * nq * nq * n)

    def acc(self, chunks):  # fa_acc: per 16 x 16 A chunk in registers and 16 columns of d, y by ldmatrix x4, 2 MMAs
        n = chunks * self.dp // 16
        self.ldsm(4, n)
        self.mma(2 * n)

    def rows_acc(self, heads, kc=1, atomic=False):
        # fh_rows_acc: per head, 16 columns of d and 16-column chunk of X, A by ldmatrix x4, fa_acc;
        # atomic: added by atomicAdd (RED), 4 bytes a float, not a read and a write
        self.ldsm(4, heads * kc * self.dp // 16)
        self.acc(heads * kc)
        self.store(8 * heads if atomic else 16 * heads)

    def scores(self, heads, keys):
        """fh_scores: per head two warps, each x y^T of 16 rows by keys / 2: fa_xyT's 16 x 16 chunk
        (product), or fh_xyT1's 16 x 8 (per k step A by ldmatrix x4, B by x2, one MMA)."""
        if keys == 2 * MMA_M:
            for _ in range(heads):
                self.product(fe_rg(0, 0, FH_M, keys))
            return
        n = heads * 2 * self.dp // 16
        self.ldsm(4, n)
        self.ldsm(2, n)
        self.mma(n)

    def wgrad(self, rows, nq, yl, kc):  # fhq_wgrad_sum: per row, m-tile and 16-entry chunk A hi, lo; per n-tile Y hi (lo), 6 MMAs
        self.ldsm(4, rows * nq * kc * (2 + nq * (1 + yl)))
        self.mma(rows * nq * kc * nq * 6)

    def hh(self, x_lo, y_lo):  # feb_hh: per row of the tile, x (hi, lo), y (hi, lo) by ldmatrix x4, 6 MMAs
        self.ldsm(4, 16 * (2 + x_lo + y_lo))
        self.mma(16 * 6)

    def dw(self, band, s, heads, lo):  # feb_dw: per (head, kernel row) A (hi, lo), nb blocks of fcb_mma_t
        n, nb = heads * band["cq"], (15 + band["ck"] - 1 + s) // 16 + 1
        self.ldsm(4, n * (1 + lo + 2 * nb))
        self.mma(n * nb * 2 * (2 + lo))


def every_fwd_ops(stats, c):
    """k_fa_every_stats (stats) or k_fa_every_forward per tile pair of a group of c["G"] heads."""
    f, o = fe_geo(stats, c["cq1"], c["ck1"], c["cq2"], c["ck2"]), WarpOps(c["dp"])
    s, z = f["s"], f["z"]
    o.exp(c["G"] * (2 * FE_M * FE_N if stats else s["rows"] * s["cols"]))  # statistics: S2 and alpha's
    for _ in range(c["G"]):  # fe_s1: Z, then S1 by the pre band
        o.load(z["rows"] + up16(z["cols"]))
        o.product(z)
        o.conv(f["g1"], up16(z["cols"]), up16(s["rows"]) // 16, up16(s["cols"]) // 16, 2, True)
    if stats:  # S2 per row (fe_mix_chunk) for the online statistics
        o.mix(FE_M, FE_N, 1)
        return o.n
    o.mix(s["rows"], s["cols"], 1)  # P on s
    for _ in range(c["G"]):  # fe_p2: P1 on the tile, then P2 = W2' P1
        o.conv(f["g2"], up16(s["cols"]), 1, 2, 1, True)
    o.mix(FE_M, FE_N, 1)
    o.load(c["G"] * FE_N)  # v rows, two heads a stage
    o.rows_acc(c["G"])
    return o.n


def every_bwd_ops(kind, c):
    """k_fa_every_D, _dq, _dkdv or _dqkv (kind "D", "dq", "dkdv", "dqkv": dQ's chain with dK/dV's
    terms added by atomicAdd) per tile pair: fe_bwd_tile's chain."""
    dq = kind in ("dq", "dqkv")
    g, o, G = feb_geo("dq" if dq else kind, c["cq1"], c["ck1"], c["cq2"], c["ck2"]), WarpOps(c["dp"]), c["G"]
    pa, pb, z, zq, g1, g2 = g["pa"], g["pb"], g["z"], g["zq"], g["g1"], g["g2"]
    p1, p2, LP, L2 = g["p1"], g["p2"], pa["left"], pb["left"]
    o.exp(G * pa["rows"] * pa["cols"])  # P on pa
    for _ in range(G):  # feb_s1
        o.load(up16(z["rows"]) + up16(z["cols"]))
        o.product(z)
        o.conv(g1, up16(z["cols"]), up16(pa["rows"]) // 16, up16(pa["cols"]) // 16, 2, True)
    o.mix(pa["rows"], pa["cols"], 1)  # feb_probs
    p1_band = fe_band(g2["cq"], g2["ck"], LP - p2)
    if kind == "dkdv":  # P1, P2
        for _ in range(G):
            o.conv(p1_band, up16(pa["cols"]), 1, 1, 2, True)
        o.mix(FE_M, FE_N, 1)
    for _ in range(G):  # feb_dp2 (dK/dV: dv += P2^T dO)
        o.load(up16(pb["rows"]) + up16(pb["cols"]))
        o.product(pb)
    if kind == "dkdv":
        o.rows_acc(G)
    if dq:  # P1, dW2' += P1 (x) dP2
        for _ in range(G):
            o.conv(p1_band, up16(pa["cols"]), 1, 1, 2, True)
        if c["ch"]:
            o.hh(1, 0)
    if kind == "dqkv":  # feb_dv_add: P2, then per head dO's rows and dv += P2^T dO
        o.mix(FE_M, FE_N, 1)
        for _ in range(G):
            o.load(FE_M)
        o.rows_acc(G, atomic=True)
    o.mix(pb["rows"], pb["cols"], 0)  # dP1 = W2'^T dP2
    if dq and c["cq2"]:  # w_post's terms
        o.dw(g2, (LP - p2) % 8, G, False)
    if kind == "D":  # dP on the tile, D
        for _ in range(G):
            o.conv(fe_band(g2["cq"], g2["ck"], L2 - p2), up16(pb["cols"]), 1, 1, 2, False)
        return o.n
    for _ in range(G):  # feb_ds2: dP on R1, dS2
        o.conv(fe_band(g2["cq"], g2["ck"], L2 - LP - p2), up16(pb["cols"]), up16(FE_M + g["q1"]) // 16,
               up16(pa["cols"]) // 16, 2, False)
    if dq and c["mix"]:  # dW1 += dS2 (x) S1
        o.hh(1, 1)
    o.mix(FE_M + g["q1"], pa["cols"], 1)  # feb_ds1
    for _ in range(G):  # feb_dz: Z on zq, (dQ: w_pre's terms), dZ, dq or dk
        o.load(up16(zq["rows"]) + up16(zq["cols"]))
        o.product(zq)
        if dq and c["cq1"]:
            o.dw(g1, g["L1"] - p1, 1, True)
        o.conv(fe_band(g1["cq"], g1["ck"], LP - p1), up16(pa["cols"]), 1, 1, 2, True)
    o.rows_acc(G)
    if kind == "dqkv":  # and dk
        o.rows_acc(G, atomic=True)
    return o.n


def every_ops(c, atomic=False):
    """Each every-step kernel's warp operations per tile pair of a group, config c: {cq1, ck1, cq2,
    ck2 (0, 0: absent), G (heads of a group), mix, ch (head mixing, head convolution on), dp (d
    padded to 16)}; atomic: without determinism (mta_set_deterministic off: k_fa_every_dqkv for
    k_fa_every_dq and k_fa_every_dkdv)."""
    out = {"k_fa_every_stats": every_fwd_ops(True, c), "k_fa_every_forward": every_fwd_ops(False, c)}
    for kind in ("D", "dqkv") if atomic else ("D", "dq", "dkdv"):
        out["k_fa_every_" + kind] = every_bwd_ops(kind, c)
    return out


# The 830M layer 2's every-step config at head dimension d (mta_config: 6x11 both, 16 heads mixed).
def every_830m(d):
    return {"cq1": 6, "ck1": 11, "cq2": 6, "ck2": 11, "G": 16, "mix": True, "ch": 16, "dp": up16(d)}


def fh_nq(G):
    """fh_nq: the head kernels' mixing k steps for a group of G heads (1: G <= 16; 2: G <= 32)."""
    return 1 if G <= 16 else 2


def fh_keys(nq):
    """fh_keys: the keys of a head kernel's tile; two k steps (G > 16) hold twice the heads per
    entry, so half the keys (16)."""
    return FH_N // nq


def head_fwd_ops(c):
    """k_fa_head_forward per tile pair (16 query rows x fh_keys keys of the G heads of a group): per
    pass (two with step 6: statistics, then P) the q, k stages and S1 = q k^T per head, S2 = S1 W1^T
    per (row, 16 keys) and P; in the last pass P2 = P W2' in registers (step 6), the v stages and
    O += P2 v per head."""
    o, G, nq, passes = WarpOps(c["dp"]), c["G"], fh_nq(c["G"]), 2 if c["ch"] else 1
    N = fh_keys(nq)
    for p in range(passes):
        o.load(G * (FH_M + N))
        o.scores(G, N)
        o.mix(FH_M, N, 1, nq)  # fh_mix
        o.exp(G * FH_M * N)
        if p == passes - 1:
            if c["ch"]:
                o.mix(FH_M, N, 1, nq, regs=True)  # fh_mix_regs
            o.load(G * N)
            o.rows_acc(G, N // 16)  # fh_pv
    return o.n


def head_bwd_ops(kv, c):
    """k_fa_head_dq (kv False: passes D, then dq) or k_fa_head_dkdv (kv True: one) per tile pair:
    the q, k and dO, v stages, S1 and dP2 per head, S2 (fh_mix), dP (fhq_dp); in the last pass dS1
    (fhq_store_ds), and dQ's kernel-gradient terms (fhq_wgrad_sum) and k stages with dq += dS1 k,
    or dK/dV's P2 (step 6), q, dO stages and dv += P2^T dO, dk += dS1^T q per key half."""
    o, G, nq = WarpOps(c["dp"]), c["G"], fh_nq(c["G"])
    N = fh_keys(nq)
    for p in range(1 if kv else 2):
        for _ in range(2):  # q, k: S1; dO, v: dP2
            o.load(G * (FH_M + N))
            o.scores(G, N)
        o.mix(FH_M, N, 1, nq)
        o.exp(G * FH_M * N)
        o.mix(FH_M, N, 0, nq)  # fhq_dp
        if not (kv or p):
            continue
        if not kv and c["ch"]:
            o.wgrad(FH_M, nq, 0, N // 16)
        if not kv and c["mix"]:
            o.wgrad(FH_M, nq, 1, N // 16)
        o.mix(FH_M, N, 1, nq, regs=True)  # fhq_store_ds
        if kv and c["ch"]:
            o.mix(FH_M, N, 1, nq, regs=True)  # P2
        o.load(G * (2 * FH_M if kv else N))
        if kv:
            o.rows_acc(2 * N // 16 * G)  # fhk_acc: dV and dK of each 16-key chunk, X^T by ldmatrix .trans
        else:
            o.rows_acc(G, N // 16)  # fhq_dq
    return o.n


def head_ops(c):
    """Each head kernel's warp operations per tile pair of a group, config c: {G (heads of a group),
    mix, ch (head mixing, head convolution on), dp (d padded to 16)}. Groups of up to 16 heads run
    the cluster kernels k_fa_head_cl_forward, k_fa_head_cl_dq and k_fa_head_cl_dkdv (a device with
    clusters: an H100's, the emulator's; their pairs have FHC_N keys), larger ones
    k_fa_head_forward, k_fa_head_dq and k_fa_head_dkdv."""
    if fh_nq(c["G"]) == 1:
        cc = dict(c, C=fhc_cs(c["G"]))
        return {"k_fa_head_cl_forward": cluster_fwd_ops(cc), "k_fa_head_cl_dq": cluster_dq_ops(cc),
                "k_fa_head_cl_dkdv": cluster_dkdv_ops(cc)}
    return {"k_fa_head_forward": head_fwd_ops(c), "k_fa_head_dq": head_bwd_ops(False, c),
            "k_fa_head_dkdv": head_bwd_ops(True, c)}


CLUSTER_KERNELS = {"k_fa_head_cl_forward": "forward", "k_fa_head_cl_dq": "dQ",  # and cluster_tile_ops' names
                   "k_fa_head_cl_dkdv": "dK/dV"}


def head_tile(c, name=None):
    """The head kernels' tile pair (query rows, keys): the cluster kernels' FH_M x FHC_N, the others'
    FH_M x fh_keys."""
    return (FH_M, FHC_N) if name in CLUSTER_KERNELS else (FH_M, fh_keys(fh_nq(c["G"])))


def head_sass(name, c):
    """A head kernel's name in the SASS table: the cluster kernels' template is O's (dK's) width, the
    others' fh_nq."""
    if name in CLUSTER_KERNELS:
        return f"{name}_t<{64 if c['dp'] <= 64 else 128}>"
    return f"{name}_t<{fh_nq(c['G'])}>"


def head_tile_ops(c):
    """The cluster kernels' counts per row tile of a head (cluster_tile_ops' per cluster tile over
    its G heads: the forward's q, dQ's q and dO, dK/dV's k and v, resident, and the results written
    once); the others' are all per tile pair."""
    if fh_nq(c["G"]) != 1:
        return {}
    n = cluster_tile_ops(dict(c, C=fhc_cs(c["G"])))
    return {name: ({f: v / c["G"] for f, v in n[x].items()}, False) for name, x in CLUSTER_KERNELS.items()}


def fa2_ops(c):
    """FA2's k_fa_forward, k_fa_dq, k_fa_dkdv per tile pair (64 x 64 of one head): the walked
    tiles' copies (k, v; dK/dV's q, dO), S = q k^T (and the backward's dP2 = dO v^T) in 16 x 16
    chunks, and the products of the chunks in registers by the other tile: O += P v (16 chunks), dq
    += dS k (16), dv += P2^T dO and dk += dS^T q (32)."""
    out = {}
    for name, prods, accs in (("k_fa_forward", 1, 16), ("k_fa_dq", 2, 16), ("k_fa_dkdv", 2, 32)):
        o = WarpOps(c["dp"])
        o.load(2 * FA_T)
        for _ in range(prods):
            o.product(fe_rg(0, 0, FA_T, FA_T))
        o.acc(accs)
        o.exp(FA_T * FA_T)
        out[name] = o.n
    return out


def fa2_tile_ops(c):
    """FA2's copies per row tile a block keeps (64 rows): {kernel: (counts, per kv head)}: the
    forward's q tile, dQ's q and dO, dK/dV's k and v (per kv head); and its stores at the end: O
    to out and a.o, dq +=, dk and dv +=."""
    out = {}
    for name, rows, kv in (("k_fa_forward", FA_T, False), ("k_fa_dq", 2 * FA_T, False), ("k_fa_dkdv", 2 * FA_T, True)):
        o = WarpOps(c["dp"])
        o.load(rows)
        o.store(rows // 2 if name == "k_fa_dq" else rows)
        out[name] = (o.n, kv)
    return out


# Each family of kernels as built: its ops per tile pair, its tile (query rows, keys) at a config (and
# kernel, where its kernels' differ), its kernels'
# names in docs/cuda.md's SASS table (templates by G or d), and its counts per row tile (or None).
BUILT = {
    "every": (every_ops, lambda c, name=None: (FE_M, FE_N), lambda name, c: name, None),
    "every_atomic": (lambda c: every_ops(c, True), lambda c, name=None: (FE_M, FE_N), lambda name, c: name, None),
    "heads": (head_ops, head_tile, head_sass, head_tile_ops),
    "fa2": (fa2_ops, lambda c, name=None: (FA_T, FA_T), lambda name, c: f"{name}_t<{64 if c['dp'] <= 64 else 128}>",
            fa2_tile_ops),
}


def causal_pairs(T, M, N):
    """The tile pairs of M query rows and N keys a causal walk visits: each query tile's key tiles
    up to its last row (the dK/dV kernels walk the same pairs from the keys' side)."""
    return sum((min(i0 + M, T) - 1) // N + 1 for i0 in range(0, T, M))


def built_launch(fam, c, B, H, Hkv, T):
    """{kernel: counts of the whole launch} of family fam at config c: the per-tile-pair counts
    times the causal pairs of the B H / G groups, plus the per-row-tile counts times the tiles."""
    ops, tile, _, tile_ops = BUILT[fam]
    out = {}
    for name, n in ops(c).items():
        pairs = B * H // c["G"] * causal_pairs(T, *tile(c, name))
        out[name] = {f: v * pairs for f, v in n.items()}
    for name, (n, kv) in (tile_ops(c) if tile_ops else {}).items():
        tiles = B * (Hkv if kv else H) * -(-T // tile(c, name)[0])
        out[name] = {f: v + n[f] * tiles for f, v in out[name].items()}
    return out


ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))  # the source tree (docs/cuda.md)
FULL_WARPS = 8   # warps per SM an FA2-class rate needs to hide the MMAs' and loads' latency (FA2's
                 # kernels: 4-warp blocks, 2 per SM); fewer resident warps scale the rate down (assumption)


def sass_occupancy(root):
    """{kernel: (threads, blocks per SM)} of the H100 table of docs/cuda.md's "The compiled code"
    (tests/tools/check_sass.py --markdown writes it: refresh the docs, and this follows)."""
    out, on = {}, False
    for line in open(os.path.join(root, "docs/cuda.md")):
        if line.startswith("| kernel |"):
            on = line.rstrip().endswith("blocks/SM (H100) |")
        elif on and line.startswith("| `k_"):
            cells = [x.strip() for x in line.strip().strip("|").split("|")]
            if cells[1].isdigit() and cells[-1].isdigit():
                out[cells[0].strip("`")] = (int(cells[1]), int(cells[-1]))
    return out


def built_kernels(fam, B, H, d, T, c, occupancy, cls="fa2"):
    """The kernels of family fam (BUILT) as built for one shape: each kernel's counts for the whole
    launch (built_launch), its occupancy (threads, blocks per SM: occupancy of its SASS name) and
    time (kernel_time: MMAs at the class's tensor-core rate scaled by resident warps / FULL_WARPS,
    ldmatrix bytes as shared-memory traffic, cp.async bytes and the float32 accumulations' global
    reads and writes as L2 traffic, each expf of P at the MUFU rate; the other CUDA-core work and
    stores to shared memory not counted: a lower bound)."""
    _, tile, sass, _ = BUILT[fam]
    groups, rates = B * H // c["G"], mma_rates(d, T, cls)
    out = []
    for name, n in built_launch(fam, c, B, H, H, T).items():
        if sass(name, c) not in occupancy:
            raise ValueError(f"no occupancy for {sass(name, c)}: no row in docs/cuda.md's H100 SASS table, "
                             "nor --every-blocks")
        threads, blocks = occupancy[sass(name, c)]
        scale = min(1.0, blocks * threads / 32 / FULL_WARPS)
        M, N = tile(c, name)
        k = {"name": name, "dir": "fwd" if name.endswith(("forward", "stats")) else "bwd", "mma": n["mma"],
             "tc_flops": MMA_FLOPS * n["mma"], "cuda_flops": 0, "exp": n["exp"], "smem_bytes": n["ldmatrix_bytes"],
             "l2_bytes": n["cp_async_bytes"] + n["global_bytes"], "global_bytes": n["global_bytes"], "hbm_bytes": 0,
             "threads": threads, "blocks_per_sm": blocks,
             # the SM is the machine: its resident blocks share its rate (rate_scale), so more blocks
             # per SM than there are blocks to fill them idles no rate
             "wave_eff": lpt_efficiency(causal_tiles(groups, T, N if name.endswith("dkdv") else M), SMS),
             "rate_scale": scale}
        scaled = {dr: r * scale for dr, r in rates.items()}
        if name in CLUSTER_KERNELS:  # their clusters' terms too, their tiles on SMS / C slots
            C = fhc_cs(c["G"])
            k.update(C=C, dsmem_bytes=n["dsmem_bytes"], barriers=n["barriers"],
                     wave_eff=lpt_efficiency(causal_tiles(groups, T, M), SMS // C),
                     stage_buffers=cluster_nbuf(name, c))
            t, s, bound = cluster_time(k, scaled, blocks)
        else:
            t, s, bound = kernel_time(k, scaled, cls == "fa3")
        out.append(dict(k, ms=s * 1e3, bound=bound, terms_ms={x: v * 1e3 for x, v in t.items()}))
    return out


# The layers as built at issue 46's shape: (family, config at d, its design (d) variant, title).
BUILT_LAYERS = {
    "conv": ("every", lambda d: dict(every_830m(d), norm_gate=True), "conv",
             "The every-step kernels as built, 830M conv layer"),
    "conv-atomic": ("every_atomic", lambda d: dict(every_830m(d), norm_gate=True), "conv",
                    "The every-step kernels as built without determinism (mta_set_deterministic off: "
                    "k_fa_every_dqkv), 830M conv layer"),
    "head-only": ("heads", lambda d: {"G": 16, "mix": True, "ch": 16, "dp": up16(d), "norm_gate": True}, "no-conv",
                  "The head kernels as built, 830M head-only layer"),
    "plain": ("fa2", lambda d: {"G": 1, "dp": up16(d)}, None, "FA2's kernels as built (no MTA step), SDPA's work"),
}

BUILT_ASSUMPTIONS = (
    "as built: the 830M conv layer on the k_fa_every_* kernels and the head-only layer on the k_fa_head_* kernels "
    "of this revision (bench/cuda_perf_model.py --every: their MMAs, ldmatrix and cp.async bytes counted as the "
    "emulator counts them, blocks per SM from docs/cuda.md's H100 SASS table, which lists each kernel at its largest "
    f"shared memory over d = 64..128), the tensor-core rate FA2-class scaled by resident warps / {FULL_WARPS}, their "
    "float32 accumulations' global reads and writes as L2 traffic, their other CUDA-core work and stores to shared "
    "memory not counted (a lower bound), plus k_tc_head_kv's HBM traffic where it runs (not in the head-only "
    "layer, whose cluster dK/dV kernel adds into dk, dv itself) and (d)'s FA2-class "
    "norm/gate backward, dQ conversion and kernel-gradient sums. Memory as built: the caller's q, k, v, out, dout, "
    "dq, dk, dv in bf16 and the backend's device memory with bf16 storage (built_workspace: its float32 O, dK, "
    "dV per query head (none in the head-only layer; the conv layer's for a chunk of key tiles, whole ones "
    "without determinism) and dq buffer, q, k, v read in place; tc_carve's part checked against mta_ctx_workspace_bytes), the larger layer's; "
    "SDPA's: the same eight bf16 tensors, lse and D and FA2's float32 dq accumulator. A model, not a measurement.")


def head_kv_kernel(B, H, d, T):
    """k_tc_head_kv: dk, dv += the query heads' float32 dkp, dvp (H = H_kv at issue 46's shape):
    HBM-bound, each read once and dk, dv read and written."""
    n = B * H * T * d * 4
    return {"name": "k_tc_head_kv", "dir": "bwd", "tc_flops": 0, "cuda_flops": 2 * B * H * T * d, "exp": 0,
            "smem_bytes": 0, "l2_bytes": 0, "hbm_bytes": 2 * n + 4 * n, "wave_eff": 1.0}


def cluster_adds_kv(c, H, Hkv):
    """tc_adds_kv (mta_cuda_tc.cuh: fhd_adds_kv) on a device with clusters (the model's H100, the
    emulator's default): the head steps' cluster dK/dV kernel (groups of G <= 16 heads, d <= 128)
    adds each kv head's dK, dV into the caller's dk, dv itself where its rep = H / H_kv query heads
    lie in one block of FHC_HB (rep divides G and, past FHC_HB heads, FHC_HB): no per-query-head
    float32 dK, dV (built_workspace) and no k_tc_head_kv (built_layer_ms)."""
    rep, G = H // Hkv, c.get("G", 0)
    heads = (c.get("mix") or c.get("ch")) and "cq1" not in c
    return bool(heads) and G <= 16 and c["dp"] <= 128 and G % rep == 0 and (G <= FHC_HB or FHC_HB % rep == 0)


def built_layer_ms(layer, B, H, d, T, design, occupancy):
    """A layer as built (ms, BUILT_LAYERS): its tensor-core kernels (built_kernels) and, for the
    MTA layers, k_tc_head_kv (none where cluster_adds_kv) and design's (d's) kernels outside the
    tiles (norm/gate backward, dQ conversion, kernel-gradient sums)."""
    fam, config, _, _ = BUILT_LAYERS[layer]
    ms = sum(k["ms"] for k in built_kernels(fam, B, H, d, T, config(d), occupancy))
    if fam == "fa2":
        return ms
    kv = 0 if cluster_adds_kv(config(d), H, H) else \
        kernel_time(head_kv_kernel(B, H, d, T), mma_rates(d, T, "fa2"), False)[1] * 1e3
    rest = [k["ms"] for k in design["kernels"] if k["name"] in ("norm/gate bwd", "dQ convert", "kernel-gradient sums")]
    return ms + kv + sum(rest)


def fe_kv_rows(B, H, G, T, sms):
    """Rows per head of the every-step dK/dV kernel's per-query-head buffers (fe_kv_rows in
    src/attn/mta_cuda_fa_every_bwd.cuh): chunks of ceil(sms / (B H / G)) pairs of key tiles of FE_N,
    two tiles a pair; T where one chunk holds every tile."""
    pairs, nt = -(-sms // (B * H // G)), -(-T // FE_N)
    return T if 2 * pairs >= nt else 2 * pairs * FE_N


def built_workspace(c, B, H, Hkv, T, d, bf16_storage, sms=SMS, atomic=False):
    """The bf16 path's device bytes beyond the caller's tensors at config c (BUILT's, with
    norm_gate: group norm or gate on, which add only their partials), as src/attn/mta_cuda.cu allocates them: tc_carve's workspace
    (mta_cuda_tc.cuh: q, k, v, dO rounded to bf16 and padded to 64 rows and 16 columns, except,
    with bf16 storage already so laid out (T a multiple of 64, d of 16: tc_reads_caller), q, k, v
    and, without norm or gate, dO, which the kernels read in place (the caller's tensors taken as
    device memory at 16-byte starts, as torch's are: a call with one that is not copies it into a
    buffer of the backend's, tc_copy_carve, allocated then and not counted here); O in float32;
    lse, D; document starts; the norm/gate partials, 2d + 1 doubles per
    ng_slots chunk; the convolutions' kernel-gradient partials per query tile; with head steps each
    query head's float32 dK, dV (none where cluster_adds_kv; the every-step kernels' are the first
    backward's allocation, alloc_once's, not rounded: a chunk's rows, fe_kv_rows on a device of sms
    multiprocessors, or with atomic, the mode without determinism, whole ones) and the head
    kernels' partials per 16-row tile) and, with bf16
    storage (mta_config.dtype: the caller's tensors bf16), io_carve's float32 dq (dout is read as
    it is; out, dk, dv are rounded where written: tc_forward, tc_add_kv), each piece rounded
    up to 32 bytes (carver). --check compares it with mta_ctx_workspace_bytes of the fixtures' runs
    (`mtac attn --plan`: float32 storage, so tc_carve's part; io_carve's is read from its lines)."""
    def take(n, size):
        return ceil_to(n * size, 32)
    BH, BHkv, dp, tp = B * H, B * Hkv, up16(d), ceil_to(T, FA_T)
    rows = (T + 63) // 64 if T > 8 * 64 else 8           # ng_rows
    every = "cq1" in c
    taps = c.get("cq1", 0) * c.get("ck1", 0) + c.get("cq2", 0) * c.get("ck2", 0)
    ng = c.get("norm_gate", False)
    in_place = bf16_storage and T % FA_T == 0 and d == dp    # tc_reads_caller
    out = take(BH * -(-T // rows) * (2 * d + 1), 8)
    out += 0 if in_place else take(BH * tp * dp, 2) + 2 * take(BHkv * tp * dp, 2)      # q, k, v
    out += 0 if in_place and not ng else take(BH * tp * dp, 2)                        # dO
    out += take(BH * T * d, 4) + 2 * take(BH * T, 4) + take(B * T, 4)
    if taps:
        out += take(BH * (-(-T // FE_M) if every else tp // FA_T) * taps, 4)
    if c.get("mix") or c.get("ch") or every:
        G = c["G"]
        nw = (G * G if c.get("mix") else 0) + (G * c["ch"] if c.get("ch") else 0)
        if every:
            out += 2 * BH * (T if atomic else fe_kv_rows(B, H, G, T, sms)) * d * 4
        elif not cluster_adds_kv(c, H, Hkv):
            out += 2 * take(BH * T * d, 4)
        out += take(B * (H // G) * -(-T // FH_M) * nw, 4)
    return out + (take(BH * T * d, 4) if bf16_storage else 0)


def built_memory(layer, B, H, d, T):
    """Device bytes of a layer as built, forward+backward: the caller's q, k, v, out, dout, dq, dk,
    dv in bf16 (as SDPA's, attn_memory) and the backend's with bf16 storage (built_workspace); the
    MTA parameters and their gradients (a few KB) not counted."""
    fam, config, _, _ = BUILT_LAYERS[layer]
    return 8 * B * H * T * d * 2 + built_workspace(config(d), B, H, H, T, d, True, atomic=fam == "every_atomic")


def built_occupancy(overrides):
    """sass_occupancy(ROOT) with --every-blocks' KERNEL=BLOCKS[/THREADS] in place of a kernel's."""
    occ = sass_occupancy(ROOT)
    for o in overrides:
        name, _, val = o.partition("=")
        blocks, _, threads = val.partition("/")
        if not (name in occ and blocks.isdigit() and int(blocks) > 0 and (threads or "1").isdigit() and int(threads or 1) > 0):
            raise ValueError(f"--every-blocks {o}: expected KERNEL=BLOCKS[/THREADS], KERNEL one of the SASS table's")
        occ[name] = (int(threads) if threads else occ[name][0], int(blocks))
    return occ


def print_built(layer, occupancy, markdown):
    """A layer's kernels as built (BUILT_LAYERS) at issue 46's shape (B=2, H=16, d=96, T=4096,
    fwd+bwd, H100): per kernel its counts per head and tile pair, occupancy, terms, time."""
    B, H, d, T = 2, 16, 96, 4096
    fam, config, _, title = BUILT_LAYERS[layer]
    M, N = BUILT[fam][1](config(d))
    per = B * H * causal_pairs(T, M, N)   # head-tile pairs
    ks = built_kernels(fam, B, H, d, T, config(d), occupancy)
    rows = [[k["name"], f"{k['mma'] / per:.0f}", f"{k['smem_bytes'] / per / 1024:.1f}",
             f"{(k['l2_bytes'] - k['global_bytes']) / per / 1024:.1f}", f"{k['global_bytes'] / per / 1024:.1f}",
             f"{k['threads']}", f"{k['blocks_per_sm']}", f"{k['rate_scale']:.2f}", f"{k['wave_eff']:.2f}",
             f"{k['terms_ms']['tensor cores']:.2f}", f"{k['terms_ms']['shared memory']:.2f}", f"{k['terms_ms']['L2']:.2f}",
             k["bound"], f"{k['ms']:.2f}"] for k in ks]
    total, a = sum(k["ms"] for k in ks), sdpa(B, H, d, T)["ms"]
    rows.append(["total", f"{sum(k['mma'] for k in ks) / per:.0f}"] + [""] * 11 + [f"{total:.2f}"])
    print(f"{title} (B={B}, H={H}, d={d}, T={T}, fwd+bwd), H100, FA2-class rates, tile pairs of {M} x {N}: "
          "PREDICTED (a model, not measured)" + ("\n" if markdown else ""))
    table(["kernel", "MMAs per head and tile pair", "ldmatrix KB per head and pair", "cp.async KB per head and pair",
           "global float32 KB per head and pair", "threads", "blocks/SM", "rate scale", "wave eff", "tensor ms", "smem ms", "L2 ms", "bound", "ms"], rows, markdown)
    print(("\n" if markdown else "") + f"total {total:.2f} ms against SDPA's {a:.2f} ms: {total / a:.1f}x")


# ---- the cluster family: the head-only layer on thread block clusters (issue 46 item 5) ------------
# C blocks of a cluster (C = 2, 4) split a group's G = 16 heads, G / C each: a block keeps q (dQ: q
# and dO; dK/dV: k and v) of its own heads in shared memory for its whole walk, streams the others
# of its own heads once per tile (cp.async), keeps O (dq; dk and dv) in registers and writes it
# once, and all-gathers what the mixing of its own output heads needs of every head (S1 hi + lo;
# dP2 hi; dS2 and P hi + lo) into every block's shared memory (st.shared::cluster), one
# barrier.cluster per exchange (MEMBAR.ALL.GPU, UCGABAR_ARV, UCGABAR_WAIT on sm_90). At C = 2 its
# kernels are k_fa_head_cl_forward, k_fa_head_cl_dq and k_fa_head_cl_dkdv (src/attn/
# mta_cuda_fa_heads_cl*.cuh: blocks of FHC_HB = 8 warps, warp w head 8r + w, FH_M query rows by
# FHC_N keys, one block per SM; cluster_fwd_ops, cluster_dq_ops and cluster_dkdv_ops are the head
# family's in BUILT, which --check compares with the emulator's counts); at C = 4 (4 warps a
# block) they are designs. Two constants no paper
# measures for this use (assumptions, each printed halved and doubled by --cluster):
# DSMEM_BW: the SM-to-SM network's throughput over the GPU, 3.27 TB/s at cluster size 2 and 2.65
#   TB/s at 4: the ring copy of Luo et al., "Benchmarking and Dissecting the Nvidia Hopper GPU
#   Architecture" (IPDPS 2024, arXiv 2402.13499), on an H800 (132 SMs), taken as what the stores
#   of an all-gather get on an H100 (the figures as summaries of the paper quote them, unchecked
#   in the paper itself: to be measured first on a lent GPU);
# CLUSTER_BARRIER: one barrier.cluster, an arrival and its release across the network (2 x the
#   180-cycle SM-to-SM latency of the same paper) after MEMBAR.ALL.GPU drains the thread's memory
#   operations (an L2 round trip, its 263 cycles), at the H100's 1.98 GHz; a block waits it out,
#   its SM's other resident blocks run meanwhile.
# Measured figures replace both (--probe FILE: the JSON lines in the GPU check's bench.jsonl, made by
# scripts/gpu_check/cluster_probe.cu: its largest all-gather's throughput and its barrier after a
# 16-byte store a thread, per cluster size; --dsmem-bw C=BYTES_PER_S and --cluster-barrier
# C=SECONDS, which override the probe's); CLUSTER_BARRIER_C holds them, FIGURES_FROM says whence.
FHC_N, FHC_HB = 16, 8                 # keys of a cluster tile; heads (warps) of a forward block (mta_cuda_fa_heads_cl.cuh)
DSMEM_BW = {2: 3.27e12, 4: 2.65e12}   # bytes/s over all SMs, by cluster size
CLUSTER_BARRIER = (2 * 180 + 263) / 1.98e9
CLUSTER_BARRIER_C = {}                # measured barriers (s), by cluster size, instead of CLUSTER_BARRIER
FIGURES_FROM = []                     # where measured DSMEM_BW and CLUSTER_BARRIER_C figures came from
CLUSTER_BLOCKS = 2                    # blocks (of 4 warps) per SM assumed for the designs


def fhc_cs(G):
    """fhc_cs: the cluster forward's blocks for a group of G heads."""
    return -(-G // FHC_HB)


def cluster_time(k, rates, blocks, dsmem_x=1.0, barrier_x=1.0):
    """kernel_time of a cluster kernel k (with its C, dsmem_bytes, barriers) and two more terms: the
    stores between SMs at DSMEM_BW[C] (x dsmem_x) and the barriers' waits (CLUSTER_BARRIER x
    barrier_x a block, overlapped by an SM's `blocks` resident blocks); the largest over the wave
    efficiency, plus a launch. With one stage buffer (k["stage_buffers"] 1, one block an SM) a
    tile's copies start after the previous tile and it waits for them: the L2 term adds to the
    largest other."""
    t = kernel_time(k, rates, False)[0]
    C = k["C"]
    t["DSMEM"] = k["dsmem_bytes"] / (DSMEM_BW[C] * dsmem_x)
    t["barriers"] = k["barriers"] * C * CLUSTER_BARRIER_C.get(C, CLUSTER_BARRIER) * barrier_x / (SMS * blocks)
    cores = "tensor cores" if t["tensor cores"] >= t["CUDA cores"] else "CUDA cores"
    bounds = {cores: t["tensor cores"] + t["CUDA cores"],
              **{x: t[x] for x in ("shared memory", "L2", "HBM", "DSMEM", "barriers")}}
    if k.get("stage_buffers", 2) == 1:
        bounds = {f"{x} + L2": v + t["L2"] for x, v in bounds.items() if x != "L2"}
    top = max(bounds, key=bounds.get)
    return t, bounds[top] / k["wave_eff"] + LAUNCH, top


class ClusterOps(WarpOps):
    """WarpOps with a cluster's exchanges: bytes stored into the other blocks' shared memory and
    cluster barriers; writes of registers to global memory once (not read back)."""

    def __init__(self, dp, C, G):
        super().__init__(dp)
        self.C, self.G = C, G
        # heads of a block: the built kernels' FHC_HB (C = fhc_cs(G)), the C = 4 design's G / C
        self.hb = FHC_HB if C == fhc_cs(G) else -(-G // C)
        self.n.update(dsmem_bytes=0, barriers=0)

    def share(self, heads, bytes_per_entry):  # the blocks' heads (of all C) of a tile's entries to the C-1 others
        self.n["dsmem_bytes"] += heads * FH_M * FHC_N * bytes_per_entry * (self.C - 1)

    def sync(self, times=1):
        self.n["barriers"] += times

    def write(self, rows):  # rows of d floats written once from registers
        self.n["global_bytes"] += 4 * rows * self.dp

    def heads_mix(self, times, al=1, bl=1):
        """A mixing of the tile for the own output heads of each block (fhc_mix): per block and query
        row, A (16 heads: hi, lo) by ldmatrix x4, per n-tile of 8 own heads (C = 4: 4 padded to 8) B
        hi, lo by x2 and 2 + al MMAs (al: A's lo; bl: B's lo)."""
        n, nt = times * self.C * FH_M, -(-self.hb // 8)
        self.ldsm(4, n * (1 + al))
        self.ldsm(2, n * nt * (1 + bl))
        self.mma(n * nt * (2 + al))

    def head_acc(self, heads):  # per head a 16 x 16 A by ldmatrix x4 (or .trans) times 16 rows of dp: fa_acc
        self.ldsm(4, heads)
        self.acc(heads)


def cluster_fwd_ops(c):
    """k_fa_head_cl_forward per tile pair (FH_M query rows x FHC_N keys of the group's G heads, all C
    blocks): per pass the own heads' k stage, S1 per head (fa_xyT), S1 hi + lo to the others, a
    barrier, S2 for the own heads; with step 6 in the second pass P hi + lo to the others, a
    barrier, P2 = P W2'; in the last pass the v stage and O += P2 v in registers. A block sends
    S1 of all its 8 heads (fhc_share: 16 bytes an entry, heads past G as zeros), P of its heads
    below G in pairs (fhc_put_p: a lane's two)."""
    o, G = ClusterOps(c["dp"], c["C"], c["G"]), c["G"]
    passes = 2 if c["ch"] else 1
    for p in range(passes):
        o.load(G * FHC_N)
        for _ in range(G):
            o.product(fe_rg(0, 0, FH_M, FHC_N))
        o.share(o.C * o.hb, 4)
        o.sync()
        o.heads_mix(1)
        o.exp(G * FH_M * FHC_N)
        if p == passes - 1:
            if c["ch"]:
                o.share(G + G % 2, 4)
                o.sync()
                o.heads_mix(1)
            o.load(G * FHC_N)
            o.head_acc(G)
    return o.n


def cluster_dq_ops(c):
    """k_fa_head_cl_dq per tile pair (FH_M query rows x FHC_N keys of the group's G heads, all C
    blocks; q and dO resident), both passes: the own heads' k and v stage (fqc_stage_load), S1 and
    dP2 per head (fhd_x1: fa_xyT), X1 (S1 hi, lo, dP2 hi of a block's 8 heads, padding heads too)
    to the others and a barrier; fqc_mix1 per block and query row: S2 = S1 W1^T (3 MMAs), P, dP =
    dP2 W2'^T (2); pass 0 sums D; pass 1 the kernel gradients of the row (fqc_wgrad: dW1 += S1^T
    dS2, 3 MMAs, with mixing; dW2' += dP2^T P, 2, with step 6), X2 (dS2 hi, lo; P stays in the
    block) and a barrier, dS1 = dS2 W1 (fhd_ds1: 3) and dq += dS1 k per head in registers."""
    o, G = ClusterOps(c["dp"], c["C"], c["G"]), c["G"]
    for p in range(2):
        o.load(2 * G * FHC_N)
        for _ in range(2 * G):
            o.product(fe_rg(0, 0, FH_M, FHC_N))
        o.share(o.C * o.hb, 4 + 2)
        o.sync()
        o.heads_mix(1)
        o.exp(G * FH_M * FHC_N)
        o.heads_mix(1, al=0)
        if p:
            o.heads_mix(int(bool(c["mix"])))
            o.heads_mix(int(bool(c["ch"])), al=0)
            o.share(o.C * o.hb, 4)
            o.sync()
            o.heads_mix(1)
            o.head_acc(G)
    return o.n


def cluster_dkdv_ops(c):
    """k_fa_head_cl_dkdv per tile pair (FH_M query rows x FHC_N keys of the group's G heads, all C
    blocks; k and v resident): the own heads' q and dO stage (fhd_stage_load), S1 and dP2 per head
    (fhd_scores: fa_xyT), X1 (S1 hi, lo, dP2 hi of a block's 8 heads, padding heads too) to the
    others and a barrier; fhd_mix1 per block and query row: S2 = S1 W1^T (hi, lo: 3 MMAs), P, dP =
    dP2 W2'^T (hi: 2 MMAs); X2 (dS2 hi, lo and, with step 6, P hi, lo) and a barrier; fhd_mix2:
    with step 6 P2 = P W2', and dS1 = dS2 W1 (3 MMAs each); fhd_acc per head: dv += P2^T dO and
    dk += dS1^T q in registers (A by ldmatrix .trans, fa_acc)."""
    o, G, ch = ClusterOps(c["dp"], c["C"], c["G"]), c["G"], bool(c["ch"])
    o.load(2 * G * FH_M)
    for _ in range(2 * G):
        o.product(fe_rg(0, 0, FH_M, FHC_N))
    o.share(o.C * o.hb, 4 + 2)
    o.sync()
    o.heads_mix(1)
    o.exp(G * FH_M * FHC_N)
    o.heads_mix(1, al=0)
    o.share(o.C * o.hb, 4 + 4 * ch)
    o.sync()
    o.heads_mix(1 + ch)
    o.head_acc(2 * G)
    return o.n


def fhd_smem_bytes(nbuf, dp):
    """fhd_smem_bytes: k_fa_head_cl_dkdv's shared memory with nbuf stage buffers (fhd_carve's arrays,
    each rounded up to 32 bytes: k and v of 8 heads' key tile, the stages' q and dO, X1's 3 and X2's
    4 [entry][16 heads] arrays, P2 and dS1, the mixing blocks, lse and D)."""
    rows, arr, pa = FHC_HB * (dp + 8), FH_M * FHC_N * 16, FHC_HB * FH_M * FHC_N
    pieces = [2 * 2 * rows * FHC_N, nbuf * 2 * 2 * rows * FH_M, 2 * 3 * arr, 2 * 4 * arr, 2 * pa, 2 * pa,
              2 * 8 * FHC_HB * 24, 4 * FHC_HB * FH_M, 4 * FHC_HB * FH_M]
    return sum(ceil_to(x, 32) for x in pieces)


def fqc_smem_bytes(nbuf, dp):
    """fqc_smem_bytes: k_fa_head_cl_dq's shared memory with nbuf stage buffers (fqc_carve's arrays,
    each rounded up to 32 bytes: q and dO of 8 heads' query tile, the stages' k and v, X1's 3
    [entry][16 heads] arrays twice, X2's 2 (P stays in X1's S1), dS1, the mixing blocks)."""
    rows, arr = FHC_HB * (dp + 8), FH_M * FHC_N * 16
    pieces = [2 * 2 * rows * FH_M, nbuf * 2 * 2 * rows * FHC_N, 2 * 6 * arr, 2 * 2 * arr,
              2 * FHC_HB * FH_M * FHC_N, 2 * 6 * FHC_HB * 24]
    return sum(ceil_to(x, 32) for x in pieces)


def fh_cl_nbuf(smem_bytes, dp):
    """fh_cl_nbuf on an H100 for a cluster kernel whose shared memory with n stage buffers is
    smem_bytes(n, dp): 2 where they fit in SMEM_PER_SM, else 1."""
    return 2 if smem_bytes(2, dp) <= SMEM_PER_SM else 1


def cluster_nbuf(name, c):
    """The stage buffers of cluster kernel name at config c on an H100 (fh_cl_nbuf: 2 where
    they fit in SMEM_PER_SM, else 1); the forward's 2."""
    if name == "k_fa_head_cl_dkdv":
        return fh_cl_nbuf(fhd_smem_bytes, c["dp"])
    if name == "k_fa_head_cl_dq":
        return fh_cl_nbuf(fqc_smem_bytes, c["dp"])
    return 2


def cluster_tile_ops(c):
    """The family's counts per row tile a block keeps (per query tile for the forward and dQ, per key
    tile for dK/dV, all C blocks): the resident loads, the results written once (O to out and
    a.o; dq added, read and written; dK and dV), the barriers after the setup and before the exit."""
    out = {}
    for name, rows, writes in (("forward", FH_M, 2), ("dQ", 2 * FH_M, 2), ("dK/dV", 2 * FHC_N, 2)):
        o = ClusterOps(c["dp"], c["C"], c["G"])
        o.load(c["G"] * rows)
        o.write(c["G"] * FH_M * writes)
        o.sync(2)
        out[name] = o.n
    return out


def cluster_kernels(C, B, H, d, T, occupancy, dsmem_x=1.0, barrier_x=1.0):
    """The cluster family's kernels for the head-only layer at cluster size C: each one's counts for
    the whole launch and time (cluster_time: MMAs at the FA2-class rate, ldmatrix bytes as shared
    memory, cp.async and global bytes as L2, the stores between SMs, the barriers; the wave
    efficiency of the clusters' tiles over SMS / C slots). The kernels as built (C = fhc_cs(16))
    have the blocks per SM of occupancy (the SASS table) and cluster_nbuf's stage buffers, the
    designs CLUSTER_BLOCKS."""
    c = {"G": 16, "mix": True, "ch": 16, "dp": up16(d), "C": C}
    groups, rates = B * H // c["G"], mma_rates(d, T, "fa2")
    pairs, tiles = groups * causal_pairs(T, FH_M, FHC_N), groups * -(-T // FH_M)
    out = []
    for name, ops in (("forward", cluster_fwd_ops), ("dQ", cluster_dq_ops), ("dK/dV", cluster_dkdv_ops)):
        per, tile = ops(c), cluster_tile_ops(c)[name]
        n = {f: v * pairs + tile[f] * tiles for f, v in per.items()}
        kname = next((x for x, y in CLUSTER_KERNELS.items() if y == name), None)
        built = kname is not None and C == fhc_cs(c["G"])
        blocks = occupancy[head_sass(kname, c)][1] if built else CLUSTER_BLOCKS
        k = {"name": name, "dir": "fwd" if name == "forward" else "bwd", "tc_flops": MMA_FLOPS * n["mma"],
             "cuda_flops": 0, "exp": n["exp"], "smem_bytes": n["ldmatrix_bytes"],
             "l2_bytes": n["cp_async_bytes"] + n["global_bytes"], "hbm_bytes": 0, "C": C,
             "dsmem_bytes": n["dsmem_bytes"], "barriers": n["barriers"],
             "wave_eff": lpt_efficiency(causal_tiles(groups, T, FH_M), SMS // C),
             "stage_buffers": cluster_nbuf(kname, c) if built else 2}
        t, s, bound = cluster_time(k, rates, blocks, dsmem_x, barrier_x)
        out.append(dict(k, counts=n, per_pair=per, built=kname if built else None, blocks_per_sm=blocks,
                        terms_ms={x: v * 1e3 for x, v in t.items()}, bound=bound, ms=s * 1e3))
    return out


def cluster_layer_ms(C, B, H, d, T, design, occupancy, **x):
    """The head-only layer on the cluster family: its three kernels and design's (d's) kernels
    outside the tiles (norm/gate backward, dQ conversion, kernel-gradient sums); dk and dv are each
    query head's own (H = H_kv at issue 46's shape), so no k_tc_head_kv."""
    rest = [k["ms"] for k in design["kernels"] if k["name"] in ("norm/gate bwd", "dQ convert", "kernel-gradient sums")]
    return sum(k["ms"] for k in cluster_kernels(C, B, H, d, T, occupancy, **x)) + sum(rest)


def print_cluster(markdown):
    """The cluster family beside the head kernels as built, at issue 46's shape: per cluster size
    and kernel its counts per head and tile pair, terms and time; the layer; and how the layer
    moves with each unmeasured constant halved or doubled."""
    B, H, d, T = 2, 16, 96, 4096
    a = sdpa(B, H, d, T)["ms"]
    design = mma_for("830M no-conv", B, H, d, T, False, "fa2", None)
    occ = sass_occupancy(ROOT)
    rows, layer, c = [], {}, {"G": 16, "ch": 16, "dp": up16(d)}
    for C in (2, 4):
        for k in cluster_kernels(C, B, H, d, T, occ):
            n, t = k["per_pair"], k["terms_ms"]
            built = f"as built ({k['built']})" if k["built"] else "design"
            rows.append([str(C), k["name"], built, f"{n['mma'] / 16:.0f}", f"{n['ldmatrix_bytes'] / 16 / 1024:.1f}",
                         f"{n['cp_async_bytes'] / 16 / 1024:.1f}", f"{n['dsmem_bytes'] / 16 / 1024:.1f}",
                         str(n["barriers"]), *(f"{t[x]:.2f}" for x in ("tensor cores", "shared memory", "L2", "DSMEM",
                                                                      "barriers")), k["bound"], f"{k['ms']:.2f}"])
        layer[C] = cluster_layer_ms(C, B, H, d, T, design, occ)
        rows.append([str(C), "head-only layer", "", "", "", "", "", "", "", "", "", "", "", "",
                     f"{layer[C]:.2f} ({layer[C] / a:.1f}x)"])
    print(f"The cluster family, 830M head-only layer (B={B}, H={H}, d={d}, T={T}, fwd+bwd), H100, FA2-class rates, "
          f"tile pairs of {FH_M} x {FHC_N}, the forward, dQ and dK/dV as built "
          + " and ".join(sorted({str(occ[head_sass(x, {'dp': up16(d)})][1]) for x in CLUSTER_KERNELS}))
          + f" block of {FHC_HB} warps per SM (stage buffers: dQ {cluster_nbuf('k_fa_head_cl_dq', c)}, dK/dV "
          f"{cluster_nbuf('k_fa_head_cl_dkdv', c)}), the designs {CLUSTER_BLOCKS} "
          "blocks of 4: PREDICTED (a model, not measured)"
          + ("\n" if markdown else ""))
    table(["C", "kernel", "kernel is", "MMAs per head and tile pair", "ldmatrix KB per head and pair",
           "cp.async KB per head and pair", "DSMEM KB per head and pair", "cluster barriers per pair", "tensor ms",
           "smem ms", "L2 ms", "DSMEM ms", "barrier ms", "bound", "ms"], rows, markdown)
    print(("\n" if markdown else "") + f"the layer: the three kernels and (d)'s norm/gate backward, dQ conversion and "
          f"kernel-gradient sums, against SDPA's {a:.2f} ms; the head kernels as built: "
          f"{built_layer_ms('head-only', B, H, d, T, design, occ):.2f} ms. DSMEM bandwidth "
          f"{DSMEM_BW[2] / 1e12:.2f} TB/s (C = 2), {DSMEM_BW[4] / 1e12:.2f} TB/s (C = 4) over the GPU, a cluster barrier "
          + (f"{CLUSTER_BARRIER * 1e6:.2f} us: assumptions (bench/cuda_perf_model.py, DSMEM_BW)\n" if not FIGURES_FROM else
             f"{CLUSTER_BARRIER_C.get(2, CLUSTER_BARRIER) * 1e6:.2f} us (C = 2), "
             f"{CLUSTER_BARRIER_C.get(4, CLUSTER_BARRIER) * 1e6:.2f} us (C = 4): measured or given ("
             + ", ".join(FIGURES_FROM) + "; any other figure assumed)\n"))
    rows = []
    for C in (2, 4):
        moved = [cluster_layer_ms(C, B, H, d, T, design, occ, **{x: f})
                 for x in ("dsmem_x", "barrier_x") for f in (0.5, 2.0)]
        rows.append([str(C)] + [f"{v:.2f} ({v / a:.1f}x)" for v in [layer[C]] + moved])
    table(["C", "head-only layer ms", "DSMEM bandwidth x0.5", "x2", "cluster barrier x0.5", "x2"], rows, markdown)


# ---- the shapes and the table -----------------------------------------------------------------
def shapes():
    out = [("830M conv", 2, 16, 96, 4096, True), ("830M no-conv", 2, 16, 96, 4096, False)]
    for d in (64, 128):
        for T in (2048, 4096, 8192, 16384):
            for conv in (True, False):
                out.append((f"H8 d{d} T{T} {'conv' if conv else 'no-conv'}", 1, 8, d, T, conv))
    return out


def predict(name, B, H, d, T, conv, counts=None):
    m = mta_config(H, conv)
    a, b = sdpa(B, H, d, T), present(B, H, d, T, m)
    c = fused(B, H, d, T, m, ("cuda", "tc-pre"))
    c_all = fused(B, H, d, T, m, ("cuda", "tc-pre", "tc-all"))
    c_fa3 = fused(B, H, d, T, m, ("cuda", "tc-pre", "tc-all"), tc="fa3")
    goal = 3.0 if conv else 1.5
    goal46 = GOALS["conv"] if conv else GOALS["head-only"]
    dd = {cls: mma_for(name, B, H, d, T, conv, cls, counts) for cls in ("fa2", "fa3")}
    return {"shape": name, "B": B, "H": H, "d": d, "T": T, "convolutions": conv, "predicted": True,
            "measured": False, "a_sdpa_fa2": a, "b_present": b, "c_fused": c, "c_fused_all_tc": c_all,
            "c_fused_all_tc_fa3_rate": c_fa3, "c_over_a": c["ms"] / a["ms"], "goal": goal,
            "meets_goal": c["ms"] / a["ms"] <= goal, "d_mma_fa2": dd["fa2"], "d_mma_fa3": dd["fa3"],
            "d_over_a": {k: v["ms"] / a["ms"] for k, v in dd.items()}, "goal_issue46": goal46,
            "d_meets_goal": {k: v["ms"] / a["ms"] <= goal46 for k, v in dd.items()}}


def table(header, rows, markdown):
    """rows of cells under header: a markdown table, or columns padded to their widths."""
    if markdown:
        print("| " + " | ".join(header) + " |")
        print("|" + "---|" * len(header))
        for r in rows:
            print("| " + " | ".join(r) + " |")
        return
    w = [max(len(x) for x in col) for col in zip(header, *rows)]
    for r in [header] + rows:
        print("  ".join(x.ljust(n) for x, n in zip(r, w)).rstrip())


def print_mma(rows, markdown):
    """Design (d) per shape at FA2- and FA3-class rates against issue 46's goals."""
    out = []
    for r in rows:
        f2, f3, a = r["d_mma_fa2"], r["d_mma_fa3"], r["a_sdpa_fa2"]["ms"]
        meets = "/".join("yes" if r["d_meets_goal"][c] else "no" for c in ("fa2", "fa3"))
        out.append([r["shape"], f"{a:.2f}", f"{f2['ms']:.2f}", f"{f2['ms'] / a:.1f}x", f"{f3['ms']:.2f}",
                    f"{f3['ms'] / a:.1f}x", f"{r['goal_issue46']:.1f}x", meets,
                    f"cluster {f2['cluster']}, Br {f2['Br']}, Bc {f2['Bc']}"])
    table(["shape", "(a) SDPA", "(d) FA2-class", "(d)/(a)", "(d) FA3-class", "(d3)/(a)", "goal", "meets (FA2/FA3)",
           "(d) FA2-class tile"], out, markdown)


def print_kernels(r, cls, markdown):
    """(d)'s kernels for one shape and class: counts, occupancy, terms and time."""
    d = r["d_mma_" + cls]
    out = []
    for k in d["kernels"]:
        mark = " (measured: " + ", ".join(k["measured"]) + ")" if k.get("measured") else ""
        out.append([k["name"] + mark, k["tiling"], f"{k['tc_flops'] / 1e12:.2f}", f"{k['cuda_flops'] / 1e12:.3f}",
                    f"{k['exp'] / 1e9:.2f}", f"{k['smem_bytes'] / 1e9:.1f}", f"{k['l2_bytes'] / 1e9:.2f}",
                    f"{k['hbm_bytes'] / 1e6:.0f}", f"{k['smem_per_block'] / 1024:.0f}", str(k["blocks_per_sm"]),
                    f"{k['wave_eff']:.2f}", k["bound"], f"{k['ms']:.3f}"])
    out.append(["total", "", "", "", "", "", "", "", "", "", "", "", f"{d['ms']:.3f}"])
    table(["kernel", "tiling", "MMA TFLOP", "CUDA TFLOP", "exp G", "smem GB", "L2 GB", "HBM MB", "smem/block KB",
           "blocks/SM", "wave eff", "bound", "ms"], out, markdown)


def print_goals(goals, markdown):
    yn = {True: "yes", False: "no"}
    out = [[g["goal"], g["limit"], g.get("built", "-"), yn.get(g["meets"].get("built"), "-"), g.get("built_nd", "-"),
            yn.get(g["meets"].get("built_nd"), "-"), g["fa2"], yn[g["meets"]["fa2"]], g["fa3"], yn[g["meets"]["fa3"]]]
           for g in goals]
    table(["goal (H100, bf16, B=2, H=16, d=96, T=4096, fwd+bwd)", "goal", "as built", "meets",
           "as built, no determinism", "meets", "(d) FA2-class", "meets", "(d) FA3-class", "meets"], out, markdown)
    print(("\n" if markdown else "") + BUILT_ASSUMPTIONS)
    for g in goals:
        if "detail" in g:
            print(("\n" if markdown else "") + g["detail"])


# ---- issue 46's goals measured: the GPU check's goal rows (scripts/gpu_check/run.sh) ----------
GOAL_SHAPE = {"B": 2, "H": 16, "d": 96}


def load_measured(path):
    """The goal rows among path's JSON lines (bench.jsonl: bench/bench_cuda.c's and
    bench/bench_torch_cuda.py's; other lines skipped), by name: conv, conv_nd (without determinism),
    heads, sdpa at T=4096, conv_long and sdpa_long at T=32768: bf16 tensors (bench_cuda's with bf16
    precision), B=2, H=16, d=96; a name absent where no row matches; and device, the first row's."""
    try:
        with open(path) as f:
            lines = f.read().splitlines()
    except OSError as e:
        raise ValueError(f"--measured: {e}")
    rows = []
    for n, line in enumerate(lines, 1):
        if not line.startswith("{"):
            continue
        try:
            r = json.loads(line)
        except json.JSONDecodeError as e:
            raise ValueError(f"--measured {path}:{n}: not JSON ({e})")
        if "impl" in r and all(r.get(k) == v for k, v in GOAL_SHAPE.items()) and r.get("dtype") == "bfloat16":
            rows.append(r)
    want = {"conv": ("cuda_mta", 4096, True), "conv_nd": ("cuda_mta", 4096, False),
            "heads": ("cuda_mta_heads", 4096, True), "sdpa": ("torch_sdpa", 4096, None),
            "conv_long": ("cuda_mta", 32768, True), "sdpa_long": ("torch_sdpa", 32768, None)}
    out = {}
    for name, (impl, T, det) in want.items():
        for r in rows:
            cuda = impl.startswith("cuda")
            if r["impl"] == impl and r.get("T") == T and (not cuda or (r.get("precision") == "bf16"
                                                                        and r.get("deterministic") is det)):
                out[name] = r
                break
    if not out:
        raise ValueError(f"--measured {path}: no goal row (bf16, B=2, H=16, d=96: scripts/gpu_check/run.sh's)")
    out["device"] = rows[0].get("device", "?")
    return out


def measured_goals(m):
    """Issue 46's goals from load_measured's rows m, as goals_830m's list: [{goal, limit,
    measured, measured_nd, meets}] ("-" where a row is missing); the training step from the
    measured layers and step_830m's modelled shared terms."""
    def ms(name):
        r = m.get(name)
        return None if r is None or r.get("oom") or not isinstance(r.get("fwd_bwd_s"), (int, float)) \
            else r["fwd_bwd_s"] * 1e3

    def ratio(goal, limit, a, b, fmt="{:.2f}x"):
        x = None if a is None or b is None else a / b
        return {"goal": goal, "limit": f"<= {limit:.1f}x", "measured": "-" if x is None else fmt.format(x),
                "meets": None if x is None else x <= limit}
    sd = ms("sdpa")
    out = [ratio("830M conv layer / SDPA", GOALS["conv"], ms("conv"), sd),
           ratio("head-only layer / SDPA", GOALS["head-only"], ms("heads"), sd)]
    nd = ratio("", GOALS["conv"], ms("conv_nd"), sd)
    out[0]["measured_nd"], out[0]["meets_nd"] = nd["measured"], nd["meets"]
    peak = [m[n].get("peak_mb") for n in ("conv", "heads") if n in m and not m[n].get("oom")]
    mem = max(peak) if peak and None not in peak else None
    out.append(ratio("layer memory / SDPA's (peak)", GOALS["memory"], mem, (m.get("sdpa") or {}).get("peak_mb")))
    long = m.get("conv_long")
    fits = None if long is None else not long.get("oom") and long.get("peak_mb", math.inf) * 1e6 <= GPU_MEM
    out.append({"goal": "T=32768 runs (conv layer)", "limit": f"fits {GPU_MEM / 1e9:.0f} GB", "meets": fits,
                "measured": "-" if long is None else "oom" if long.get("oom") else
                f"{long['peak_mb'] / 1e3:.1f} GB, {long['fwd_bwd_s'] * 1e3:.0f} ms"})
    conv, heads = ms("conv"), ms("heads")
    step = None if None in (sd, conv, heads) else step_830m(2, 4096, sd, conv, heads)["ratio"]
    out.append(ratio("830M training step / baseline", GOALS["step"], step, None if step is None else 1.0))
    if ms("conv_nd") is not None and None not in (sd, heads):
        x = step_830m(2, 4096, sd, ms("conv_nd"), heads)["ratio"]
        out[-1]["measured_nd"], out[-1]["meets_nd"] = f"{x:.2f}x", x <= GOALS["step"]
    return out


def print_measured(path, occupancy, markdown):
    """The goals measured (load_measured, measured_goals) beside goals_830m's predictions."""
    m = load_measured(path)
    got = measured_goals(m)
    pred = goals_830m(None, occupancy)
    yn = {True: "yes", False: "no", None: "-"}
    rows = [[g["goal"], g["limit"], p.get("built", "-"), p.get("built_nd", "-"), g["measured"], yn[g["meets"]],
             g.get("measured_nd", "-"), yn[g.get("meets_nd")]] for g, p in zip(got, pred)]
    table(["goal (bf16, B=2, H=16, d=96, T=4096, fwd+bwd)", "goal", "predicted (H100)", "predicted, no determinism",
           f"measured ({m['device']})", "meets", "measured, no determinism", "meets"], rows, markdown)
    print(("\n" if markdown else "") + f"measured: {path}'s goal rows (bench_cuda and bench_torch_cuda.py's SDPA, "
          "median fwd+bwd, peak memory as each reports it); the training step from the measured layers and the "
          "model's other terms (step_830m, H100 rates): half measured. Predicted: --goals.")


def dump_counts(rows):
    """The analytic counts of (d)'s kernels (FA2-class tiles), in --kernel-counts' format."""
    shapes_ = {r["shape"]: {k["name"]: {f: round(k[f]) for f in COUNT_FIELDS} for k in r["d_mma_fa2"]["kernels"]}
               for r in rows}
    print(json.dumps({"shapes": shapes_}, indent=1, sort_keys=True))


def print_counts(H, d):
    for conv in (True, False):
        fwd, bwd = entry_flops(mta_config(H, conv), H)
        pf = product_flops(d)
        print(f"CUDA-core FLOPs per causal entry and head, H={H}, {'with' if conv else 'without'} the convolutions:")
        print("  forward:  " + ", ".join(f"{k} {v}" for k, v in fwd.items() if v) + f"  = {sum(fwd.values())} (+1 exp)")
        print("  backward: " + ", ".join(f"{k} {v}" for k, v in bwd.items() if v) + f"  = {sum(bwd.values())}")
        print(f"  products (tensor cores in (c)), d={d}: forward {pf['fwd']}, backward {pf['bwd']}")


def body(src, start):
    """The text between the brace after start and its match."""
    i = src.index("{", src.index(start))
    depth = 0
    for j in range(i, len(src)):
        depth += {"{": 1, "}": -1}.get(src[j], 0)
        if depth == 0:
            return src[i:j + 1]
    raise ValueError(start)


def check(root):
    """The model against the code: launches per strip (kernels and cuBLAS calls, counted in
    src/attn/mta_cuda.cu's strip loops with every step on) and the per-entry FLOP counts of the
    830M layer. Returns the failures."""
    src = open(os.path.join(root, "src/attn/mta_cuda.cu")).read()

    def own(text):
        return text.count("MTA_LAUNCH(") + text.count("gemm_kv(")
    helpers = {f: own(body(src, "void " + f + "(")) for f in ("strip_maps", "mix_backward", "conv_kernel_grad", "normgate_backward")}

    def launches(text):  # its own, and those of the helpers it calls
        return own(text) + sum(text.count(f + "(") * n for f, n in helpers.items())
    code_fwd = launches(body(body(src, "mta_status f32_forward("), "for (int i0"))
    code_bwd = sum(launches(body(src, f"void stage_{s}(")) for s in "abc")
    m = mta_config(16, True)
    T = 4096
    full = present(1, 16, 96, T, m)
    R = full["strip_rows"]
    one = present(1, 16, 96, R, m)  # one forward strip; its backward is one strip and the lag's flush
    model_fwd = one["fwd_launches"]
    model_bwd = one["launches"] - model_fwd - 7  # less the 7 parameter sums
    fails = []
    if (model_fwd, model_bwd) != (code_fwd, code_bwd):
        fails.append(f"launches per strip: model {model_fwd} + {model_bwd}, mta_cuda.cu {code_fwd} + {code_bwd}")
    fwd, bwd = entry_flops(m, 16)
    if (sum(fwd.values()), sum(bwd.values())) != (332, 660):
        fails.append(f"830M CUDA-core FLOPs per entry: {sum(fwd.values())} + {sum(bwd.values())}, not 332 + 660")
    if R != 32:
        fails.append(f"830M strip rows at B=1: {R}, docs/cuda.md says 32")
    print(f"launches per strip: forward {code_fwd}, backward {code_bwd} (mta_cuda.cu); model {model_fwd}, {model_bwd}")
    return fails


def print_markdown(rows):
    """The table of (a), (b) and (c) (issue 37's goals)."""
    print("| shape | B, H, d, T | (a) SDPA FA2 | (b) mtac now | (c) fused | (c)/(a) | goal | (c) tile, convolutions "
          "| (c) dominant | (c')/(a) | (c'')/(a) |")
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    for r in rows:
        c, a = r["c_fused"], r["a_sdpa_fa2"]["ms"]
        print(f"| {r['shape']} | {r['B']}, {r['H']}, {r['d']}, {r['T']} | {a:.2f} | {r['b_present']['ms']:.0f} "
              f"| {c['ms']:.2f} | {r['c_over_a']:.1f}x | {r['goal']:.1f}x | cluster {c['cluster']}, Br {c['Br']}, "
              f"Bc {c['Bc']}, {c['conv']} | {c['dominant']} | {r['c_fused_all_tc']['ms'] / a:.1f}x "
              f"| {r['c_fused_all_tc_fa3_rate']['ms'] / a:.1f}x |")


def print_text(rows, args):
    """The plain table of (a), (b) and (c), with --counts and --terms."""
    if args.counts:
        print_counts(16, 96)
        print()
    print("PREDICTED fwd+bwd ms on an H100 SXM (a model: nothing has run on a GPU)")
    print("(c) convolutions on CUDA cores, or the pre conv as tensor-core products; (c') also every other"
          " convolution as Toeplitz tensor-core products (bf16 maps); (c'') (c') at FA3's tensor-core rate")
    cp, cpp = "(c')/(a)", "(c'')/(a)"
    print(f"{'shape':<22} {'(a) SDPA':>8} {'(b) now':>8} {'(c)':>7} {'(c)/(a)':>7} {'goal':>5} "
          f"{'(c) tile':<22} {'(c) dominant':<13} {cp:>8} {cpp:>9}")
    for r in rows:
        c, a = r["c_fused"], r["a_sdpa_fa2"]["ms"]
        tile = f"cl{c['cluster']} Br{c['Br']} Bc{c['Bc']} {c['conv']}"
        print(f"{r['shape']:<22} {a:8.2f} {r['b_present']['ms']:8.1f} {c['ms']:7.2f} {r['c_over_a']:6.1f}x "
              f"{r['goal']:4.1f}x {tile:<22} {c['dominant']:<13} {r['c_fused_all_tc']['ms'] / a:7.1f}x "
              f"{r['c_fused_all_tc_fa3_rate']['ms'] / a:8.1f}x")
        if args.terms:
            print("    (b) " + ", ".join(f"{k} {v:.1f}" for k, v in r["b_present"]["terms_ms"].items()))
            print("    (c) " + ", ".join(f"{k} {v:.2f}" for k, v in c["terms_ms"].items())
                  + f"; wave eff {c['wave_eff']:.2f}, on chip {c['on_chip_kb']:.0f} KB")


def parse_args():
    ap = argparse.ArgumentParser(description="Predicted (not measured) fwd+bwd time of MTA on an H100 SXM: "
                                 "(a) SDPA FlashAttention-2, (b) mtac's present CUDA backend, (c) the fused "
                                 "tensor-core design of issue 37, (d) every step as MMAs (issue 46) with "
                                 "FA2- and FA3-class tensor-core rates, per kernel, and issue 46's goals. "
                                 "Nothing here has run on a GPU.")
    ap.add_argument("--json", action="store_true", help="one JSON object per shape instead of the table")
    ap.add_argument("--markdown", action="store_true", help="the tables of docs/cuda.md's performance model")
    ap.add_argument("--counts", action="store_true", help="print the per-entry FLOP counts first")
    ap.add_argument("--shape", help="only the shapes whose name contains this")
    ap.add_argument("--terms", action="store_true", help="also print (b)'s and (c)'s terms in ms")
    ap.add_argument("--kernels", action="store_true",
                    help="(d)'s kernels per shape (FA2- and FA3-class): counts, occupancy, roofline terms, time")
    ap.add_argument("--goals", action="store_true", help="only issue 46's goals beside (d)'s predictions")
    ap.add_argument("--measured", metavar="FILE",
                    help="issue 46's goals measured beside the predictions: the goal rows of FILE, the GPU check's "
                         "bench.jsonl (scripts/gpu_check/run.sh: bench_cuda's and PyTorch SDPA's)")
    ap.add_argument("--every", action="store_true",
                    help="the tensor-core kernels as built at issue 46's shape, per kernel: the every-step kernels "
                         "(830M conv layer), the head kernels (head-only layer) and FA2's (SDPA's work)")
    ap.add_argument("--cluster", action="store_true",
                    help="the head-only layer on thread block clusters of 2 and 4 blocks (the cluster forward as "
                         "built, dQ and dK/dV as designs) at issue 46's shape, per kernel, and its sensitivity to the "
                         "distributed shared memory's bandwidth and the cluster barrier's latency")
    ap.add_argument("--every-blocks", metavar="KERNEL=BLOCKS[/THREADS]", action="append", default=[],
                    help="a tensor-core kernel's blocks per H100 SM (and threads per block) instead of docs/cuda.md's "
                         "SASS table's (repeatable)")
    ap.add_argument("--kernel-counts", metavar="FILE",
                    help="measured counts replacing (d)'s analytic ones: JSON {\"shapes\": {SHAPE: {KERNEL: "
                         "{COUNT: value}}}}, COUNT one of " + ", ".join(COUNT_FIELDS) + " (whole launch; "
                         "--dump-counts prints the analytic ones in this format)")
    ap.add_argument("--dump-counts", action="store_true",
                    help="print (d)'s analytic counts as --kernel-counts reads them")
    ap.add_argument("--min-blocks", type=int, default=1, metavar="N",
                    help="(d)'s tiles only where every tile kernel keeps N blocks per SM (default 1)")
    ap.add_argument("--check", metavar="ROOT", nargs="?", const=".",
                    help="check the model's launch and FLOP counts against the source tree at ROOT (default .), "
                         "and the invariants of (d)")
    ap.add_argument("--probe", metavar="FILE",
                    help="measured cluster figures instead of the assumed DSMEM_BW and CLUSTER_BARRIER: the JSON lines "
                         "of scripts/gpu_check/cluster_probe.cu (the GPU check's bench.jsonl or machine.txt; other "
                         "lines skipped): per cluster size its largest all-gather's throughput and its barrier after "
                         "a 16-byte store a thread")
    ap.add_argument("--dsmem-bw", metavar="C=BYTES_PER_S", type=cluster_figure, action="append", default=[],
                    help="the distributed shared memory's store throughput over the GPU at cluster size C (2 or 4), "
                         "instead of DSMEM_BW's or --probe's (repeatable)")
    ap.add_argument("--cluster-barrier", metavar="C=SECONDS", type=cluster_figure, action="append", default=[],
                    help="one barrier.cluster after the stores at cluster size C (2 or 4), instead of "
                         "CLUSTER_BARRIER or --probe's (repeatable)")
    args = ap.parse_args()
    try:
        set_cluster_figures(args)
    except ValueError as e:
        ap.error(str(e))
    return args


def cluster_figure(text):
    """argparse's type of --dsmem-bw and --cluster-barrier: C=VALUE, C 2 or 4, VALUE a positive number."""
    c, eq, v = text.partition("=")
    try:
        C, x = int(c), float(v)
    except ValueError:
        C, x = None, None
    if not eq or C not in (2, 4) or x is None or not math.isfinite(x) or x <= 0:
        raise argparse.ArgumentTypeError(f"{text!r}: want C=VALUE, C the cluster size (2 or 4), VALUE a positive number")
    return C, x


def load_probe(path):
    """cluster_probe's figures in path's JSON lines of "probe": "cluster" (other lines skipped):
    {C: bytes/s of its largest all-gather}, {C: seconds of its barrier after a store}."""
    try:
        with open(path) as f:
            lines = f.read().splitlines()
    except OSError as e:
        raise ValueError(f"--probe: {e}")
    bw, bar = {}, {}
    for n, line in enumerate(lines, 1):
        try:
            r = json.loads(line) if line.startswith("{") else {}
        except json.JSONDecodeError as e:
            raise ValueError(f"--probe {path}:{n}: not JSON ({e})")
        if r.get("probe") != "cluster" or r.get("C") not in (2, 4):
            continue
        C, s, name = r["C"], r.get("seconds"), r.get("name")
        if not isinstance(s, (int, float)) or not math.isfinite(s) or s <= 0:
            raise ValueError(f"--probe {path}:{n}: {name} C={C}: {s!r} seconds a round is no time (not measured)")
        if name == "dsmem_allgather" and r.get("bytes", 0) >= bw.get(C, (0, 0))[0]:
            bw[C] = (r.get("bytes", 0), r.get("bytes_per_round", 0) / s)
        elif name == "barrier_store":
            bar[C] = s
    if not bw and not bar:
        raise ValueError(f"--probe {path}: no line of scripts/gpu_check/cluster_probe.cu's (\"probe\": \"cluster\")")
    if any(v <= 0 for _, v in bw.values()):
        raise ValueError(f"--probe {path}: an all-gather line moved no bytes")
    return {C: v for C, (_, v) in bw.items()}, bar


def set_cluster_figures(args):
    """DSMEM_BW and CLUSTER_BARRIER_C from --probe, then --dsmem-bw and --cluster-barrier."""
    bw, bar = load_probe(args.probe) if args.probe else ({}, {})
    bw.update(args.dsmem_bw)
    bar.update(args.cluster_barrier)
    FIGURES_FROM.extend(x for x, on in ((f"--probe {args.probe}", args.probe), ("--dsmem-bw", args.dsmem_bw),
                                        ("--cluster-barrier", args.cluster_barrier)) if on)
    DSMEM_BW.update(bw)
    CLUSTER_BARRIER_C.update(bar)


def check_mma():
    """Invariants of design (d) that can fail: the band and head MMA counts and one kernel's FLOPs
    against the hand derivation, predictions increasing with T, memory linear in T, and measured
    counts changing the kernel they name and no other. Returns the failures."""
    fails = []
    if (band_mma_flops(6, 11), band_mma_flops(6, 11, 16), head_mma_flops(16), head_mma_flops(8)) != (288, 384, 32, 32):
        fails.append("band/head MMA FLOPs per entry: not 288 (6x11, n 8), 384 (n 16), 32 (H 16), 32 (H 8)")
    B, H, d, T, m = 2, 16, 96, 4096, mta_config(16, True)
    ks = {k["name"]: k for k in mma_design(B, H, d, T, m, 8, 64, 64, "fa2")}
    # by hand, Br = Bc = 64, 6x11 (p = 5, 5 halo rows): forward S on (64+10)/64 entries, pre conv and
    # mixing on (64+5)/64, then post conv, head conv and P v once; dK/dV S on (64+2*5+2*5)/64, pre conv
    # and mixing (and P) on (64+10)/64, dP3 and head conv^T on (64+20)/64, post conv^T, softmax^T and
    # mixing^T on (64+10)/64, the rest once. The splits as the kernels' comments state them: a
    # convolution and its input gradient 2 MMAs per product (Z or dS1 hi and lo), the post-softmax
    # one's input gradient 1 (dP1 hi only), a kernel gradient 3 (the post-softmax one's 2: dP1 hi only
    # times P hi and lo); a head step 3 (hi hi, lo hi, hi lo),
    # the head convolution's transpose 2 (dP2 hi only).
    c, c2, cp2, c3, cg2, h, h2, h3 = 2 * 288, 2 * 288, 288, 3 * 288, 2 * 288, 3 * 32, 2 * 32, 3 * 32
    E = B * H * T * T / 2 * (1 + 64 / T)
    fwd = E * (192 * 74 / 64 + (c + h) * 69 / 64 + c + h + 192)
    dkdv = E * (192 * 84 / 64 + (c + h) * 74 / 64 + c + h + (192 + h2) * 84 / 64 + h3 + (cp2 + h) * 74 / 64
                + cg2 + h3 + c2 + c3 + 3 * 192)
    for name, want in (("forward", fwd), ("dK/dV", dkdv)):
        if abs(ks[name]["tc_flops"] - want) > 1e-9 * want:
            fails.append(f"(d) {name} MMA FLOPs at 830M, cluster 8, 64x64: {ks[name]['tc_flops']:.6g}, "
                         f"by hand {want:.6g}")
    for cls in ("fa2", "fa3"):
        ms = [mma_best(B, H, d, t, m, cls)["ms"] for t in (1024, 2048, 4096, 8192)]
        if any(b <= a for a, b in zip(ms, ms[1:])):
            fails.append(f"(d) {cls}-class not increasing in T: {[round(x, 3) for x in ms]}")
    best = mma_best(B, H, d, T, m, "fa2")
    long = mma_best(B, H, d, 8 * T, m, "fa2")
    grow = attn_memory(B, H, d, 8 * T, long["kernels"]) / attn_memory(B, H, d, T, best["kernels"])
    # every buffer is linear in T (8x); the kernel-gradient partials, under 1% of the bytes, depend on
    # the tile chosen at each T, which moves the ratio by less than 0.1; a T^2 buffer gives over 40x
    if not 7.9 < grow < 8.1:
        fails.append(f"(d) memory from T=4096 to 32768 grows {grow:.2f}x, not linearly (8x)")
    fails += check_counts(best, d, T)
    return fails


def check_measured():
    """--measured on made-up goal rows: each goal's ratio from the row it names (the conv layer's with
    and without determinism told apart, rows of other shapes and dtypes skipped), "-" where a row is
    missing, "oom" kept, a file without goal rows refused."""
    import tempfile
    base = {"device": "GPU", "dtype": "bfloat16", "precision": "bf16", "B": 2, "H": 16, "d": 96}
    made = [dict(base, impl="cuda_mta", deterministic=True, T=4096, fwd_bwd_s=0.04, peak_mb=520.0),
            dict(base, impl="cuda_mta", deterministic=False, T=4096, fwd_bwd_s=0.03, peak_mb=510.0),
            dict(base, impl="cuda_mta", deterministic=True, T=4096, H=8, fwd_bwd_s=9.0, peak_mb=1.0),
            dict(base, impl="cuda_mta", deterministic=True, T=32768, oom=True),
            dict(base, impl="torch_sdpa", T=4096, dtype="float32", fwd_bwd_s=0.5, peak_mb=1e4),
            dict(base, impl="torch_sdpa", T=4096, fwd_bwd_s=0.002, peak_mb=400.0)]
    fails = []
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "bench.jsonl")
        with open(path, "w") as f:
            f.write('{"probe": "cluster", "C": 2}\nnot a row\n' + "".join(json.dumps(r) + "\n" for r in made))
        g = measured_goals(load_measured(path))
        got = [(x["measured"], x["meets"], x.get("measured_nd")) for x in g]
        want = [("20.00x", False, "15.00x"), ("-", None, None), ("1.30x", True, None), ("oom", False, None),
                ("-", None, None)]
        if got != want:
            fails.append(f"--measured on made-up rows: {got}, not {want}")
        with open(path, "w") as f:
            f.write(json.dumps(dict(made[0], H=8)) + "\n")
        try:
            load_measured(path)
            fails.append("--measured took a file without goal rows")
        except ValueError:
            pass
    return fails


def check_cluster():
    """The cluster forward's counts per tile pair against the hand derivation (830M head-only layer,
    d = 96: 6 k steps; C = 2 blocks of 8 heads; two passes with step 6): S1 of 16 heads per pass (2
    MMAs a k step), three mixings (S2 twice, P2) of 2 blocks x 16 rows x 3 MMAs (8 heads, an
    n-tile), P2 v of 16 heads (2 MMAs a k step); three exchanges (S1 twice, P) of 16 heads x 256
    entries x 4 bytes to the one other block, a barrier each; k twice and v once, 16 heads x 16 rows
    x 96 x 2 bytes."""
    n = cluster_fwd_ops({"G": 16, "mix": True, "ch": 16, "dp": 96, "C": fhc_cs(16)})
    want = {"mma": 2 * 16 * 12 + 3 * 2 * 16 * 3 + 16 * 12, "dsmem_bytes": 1 * 16 * 256 * 4 * 3, "barriers": 3,
            "cp_async_bytes": 3 * 16 * 16 * 96 * 2}
    bad = {f: (n[f], v) for f, v in want.items() if n[f] != v}
    fails = [f"cluster forward per tile pair (model, by hand): {bad}"] if bad else []
    return fails + check_cluster_dkdv() + check_cluster_dq()


def check_cluster_dkdv():
    """k_fa_head_cl_dkdv's counts per tile pair against the hand derivation (the same layer and d):
    S1 and dP2 of 16 heads (2 MMAs a k step); fhd_mix1 per block and query row 3 + 2 MMAs and
    fhd_mix2's two mixings 3 each (2 blocks x 16 rows); dv and dk += of 16 heads (2 MMAs a k step
    each); X1 (3 arrays) and X2 (4) of 2 blocks x 256 entries x 16 bytes to the one other block, a
    barrier each; q and dO of 16 heads x 16 rows x 96 x 2 bytes. Its shared memory: two stage
    buffers at d = 96 (229376 bytes), one at d = 128 (208896), by fhd_carve's arrays."""
    n = cluster_dkdv_ops({"G": 16, "mix": True, "ch": 16, "dp": 96, "C": fhc_cs(16)})
    want = {"mma": 2 * 16 * 12 + 2 * 16 * (3 + 2) + 2 * 16 * 6 + 2 * 16 * 12, "dsmem_bytes": 2 * (3 + 4) * 256 * 16,
            "barriers": 2, "cp_async_bytes": 2 * 16 * 16 * 96 * 2}
    bad = {f: (n[f], v) for f, v in want.items() if n[f] != v}
    nbuf = {dp: fh_cl_nbuf(fhd_smem_bytes, dp) for dp in (96, 128)}
    smem = {dp: (n, fhd_smem_bytes(n, dp)) for dp, n in nbuf.items()}
    if smem != {96: (2, 229376), 128: (1, 208896)}:
        bad["stage buffers, shared bytes"] = smem
    return [f"cluster dK/dV per tile pair (model, by hand): {bad}"] if bad else []


def check_cluster_dq():
    """k_fa_head_cl_dq's counts per tile pair against the hand derivation (the same layer and d, C =
    2): per pass S1 and dP2 of 16 heads (2 MMAs a k step), S2 and dP per block and query row (3 + 2
    MMAs), X1 of 2 blocks x 256 entries x 3 arrays x 16 bytes to the other block, a barrier; in
    pass 1 dW1, dW2' and dS1 per block and row (3 + 2 + 3), dq += dS1 k of 16 heads (2 MMAs a k
    step), X2 (2 arrays), a barrier; k and v of 16 heads x 16 keys x 96 x 2 bytes per pass. Its
    shared memory by fqc_carve's arrays (2 x 8 heads' q, dO and k, v rows of d' + 8, X1 6 and X2 2
    arrays of 256 x 16, dS1, 6 mixing blocks): two stage buffers at d = 64 and 96, one at 128."""
    n = cluster_dq_ops({"G": 16, "mix": True, "ch": 16, "dp": 96, "C": fhc_cs(16)})
    want = {"mma": 2 * (2 * 16 * 12 + 2 * 16 * (3 + 2)) + 2 * 16 * (3 + 2 + 3) + 16 * 12,
            "dsmem_bytes": 2 * (2 * 3 + 2) * 256 * 16, "barriers": 3, "cp_async_bytes": 2 * 2 * 16 * 16 * 96 * 2}
    bad = {f: (n[f], v) for f, v in want.items() if n[f] != v}
    c = {"G": 16, "mix": True, "ch": 16}
    fixed = 2 * (6 + 2) * 4096 + 2 * 8 * 256 + 2 * 6 * 8 * 24
    smem = {dp: (cluster_nbuf("k_fa_head_cl_dq", dict(c, dp=dp)), fqc_smem_bytes(1, dp)) for dp in (64, 96, 128)}
    if smem != {dp: (2 if dp < 128 else 1, 2 * 2 * 2 * 8 * (dp + 8) * 16 + fixed) for dp in (64, 96, 128)}:
        bad["stage buffers, shared bytes"] = smem
    return [f"cluster dQ per tile pair (model, by hand): {bad}"] if bad else []


def check_split(root):
    """MMA_SPLIT against the kernels that exist: the MMAs of the function named beside a step (each
    mma_16816 call one, fh_mma3, fh_mix_regs and fh_mixmat<NQ, 1> three, fh_mixmat<NQ, 0> two: per
    k step and n-tile) equal the step's split factor."""
    src = "".join(open(os.path.join(root, f)).read() for f in SPLIT_SOURCES)
    fails = []
    for step, (x, _, fn, where) in MMA_SPLIT.items():
        if fn is None:
            continue
        text = body(src, "void " + fn + "(")
        got = sum(n * text.count(call) for call, n in MMA_CALLS.items())
        if got != x:
            fails.append(f"(d) split of {step}: MMA_SPLIT says {x} MMAs per product, {fn} ({where}) does {got}")
    return fails


def check_counts(best, d, T):
    """--kernel-counts: the analytic counts fed back change nothing; doubling one kernel's MMA FLOPs
    changes that kernel's time only; unknown names and bad values are errors."""
    fails = []
    same = apply_counts(best, d, T, {k["name"]: {f: k[f] for f in COUNT_FIELDS} for k in best["kernels"]})
    if abs(same["ms"] - best["ms"]) > 1e-12 * best["ms"]:
        fails.append(f"--kernel-counts with the analytic counts: {same['ms']} ms, not {best['ms']}")
    k0 = next(k for k in best["kernels"] if k["name"] == "dK/dV")
    more = apply_counts(best, d, T, {"dK/dV": {"tc_flops": 2 * k0["tc_flops"]}})
    changed = [a["name"] for a, b in zip(best["kernels"], more["kernels"]) if a["ms"] != b["ms"]]
    if changed != ["dK/dV"] or not more["ms"] > best["ms"]:
        fails.append(f"--kernel-counts doubling dK/dV's MMA FLOPs changed {changed}, "
                     f"total {best['ms']} -> {more['ms']}")
    for bad in ({"no such kernel": {"tc_flops": 1}}, {"dK/dV": {"flops": 1}}, {"dK/dV": {"tc_flops": -1}},
                {"forward": {"smem_per_block": 10 ** 9}}):
        try:
            apply_counts(best, d, T, bad)
            fails.append(f"--kernel-counts {bad}: accepted")
        except ValueError:
            pass
    return fails + check_emulated_counts()


def check_emulated_counts():
    """The emulator's counts: a kernel's MMAs set its tensor-core FLOPs (4096 each), more MMAs a
    longer time for it alone; an unknown count, a fraction or a missing config are errors."""
    fails = []
    k = {"launches": 1, "mma": 10 ** 7, "ldmatrix_bytes": 0, "cp_async_bytes": 0}
    e = {"config": {"B": 1, "H": 1, "T": 4096, "d": 64}, "forward": {"a": k, "b": dict(k)}, "backward": {}}
    base = emulated_kernels(check_emulated(e))
    e["forward"]["a"] = dict(k, mma=2 * k["mma"])
    more = emulated_kernels(check_emulated(e))
    if base[0]["tc_flops"] != 4096 * k["mma"] or not (more[0]["us"] > base[0]["us"] and more[1]["us"] == base[1]["us"]):
        fails.append(f"emulated counts: {k['mma']} MMAs give {base[0]['tc_flops']} FLOPs; doubling a's: "
                     f"{base[0]['us']} -> {more[0]['us']} us, b's {base[1]['us']} -> {more[1]['us']}")
    for bad in ({"forward": {"a": {"flops": 1}}}, {"forward": {"a": {"mma": 1.5}}}, {"config": {}}):
        try:
            check_emulated(dict(e, **bad))
            fails.append(f"emulated counts {bad}: accepted")
        except ValueError:
            pass
    return fails


def check_built(root):
    """built_launch against the emulator's counts in BUILT_FIXTURES: each run names its family by
    its config's key (BUILT: "every", "heads", "fa2"); the emulator's kernels of the run are the
    family's, counted over the causal tile pairs of its B H / G groups (no documents). Returns the
    failures."""
    fails, n = [], 0
    for path in BUILT_FIXTURES:
        with open(os.path.join(root, path)) as f:
            runs = json.load(f)["runs"]
        for run in runs:
            fam = next(k for k in run if k in BUILT)
            e, cfg = run["emulated"], run["emulated"]["config"]
            ops = built_launch(fam, run[fam], cfg["B"], cfg["H"], cfg["H_kv"], cfg["T"])
            emu = {**e["forward"], **e["backward"]}
            if sorted(emu) != sorted(ops):
                fails.append(f"{fam} kernels: the emulator ran {sorted(emu)}, the model has {sorted(ops)}")
                continue
            for name, c in ops.items():
                bad = {f: (v, emu[name][f]) for f, v in c.items() if f in EMU_FIELDS and v != emu[name][f]}
                if bad:
                    fails.append(f"{name} at {cfg['label']} d={cfg['d']}: (model, emulator) {bad}")
            # (the emulator's device has 1 multiprocessor: cuda_emu.cpp's sm_count)
            ws = built_workspace(run[fam], cfg["B"], cfg["H"], cfg["H_kv"], cfg["T"], cfg["d"], False, sms=1,
                                 atomic=fam == "every_atomic")
            if ws != cfg.get("workspace_bytes"):
                fails.append(f"workspace at {cfg['label']} d={cfg['d']}: model {ws}, emulator {cfg.get('workspace_bytes')}")
        n += len(runs)
    print(f"tensor-core kernels as built: the model's counts against the emulator's, {n} configs")
    return fails


def main():
    global MIN_BLOCKS
    args = parse_args()
    if not 1 <= args.min_blocks <= 8:
        raise SystemExit("cuda_perf_model: --min-blocks must be 1..8")
    MIN_BLOCKS = args.min_blocks
    if args.check:
        fails = (check(args.check) + check_mma() + check_split(args.check) + check_built(args.check)
                 + check_cluster() + check_measured())
        for f in fails:
            print("FAIL", f)
        print("check:", "FAILED" if fails else "ok")
        raise SystemExit(1 if fails else 0)
    try:
        counts, emulated = load_counts(args.kernel_counts) if args.kernel_counts else (None, None)
        if emulated:
            print_emulated(emulated, args.markdown)
            if not counts:
                return
        if counts:
            unknown = sorted(set(counts) - {s[0] for s in shapes()} - {"830M conv T32768"})
            if unknown:
                raise ValueError(f"--kernel-counts: unknown shape(s) {', '.join(unknown)}")
        occupancy = built_occupancy(args.every_blocks)
        if args.every:
            for n, layer in enumerate(BUILT_LAYERS):
                print("\n" if n else "", end="")
                print_built(layer, occupancy, args.markdown)
            return
        if args.goals:
            print_goals(goals_830m(counts, occupancy), args.markdown)
            return
        if args.measured:
            print_measured(args.measured, occupancy, args.markdown)
            return
        if args.cluster:
            print_cluster(args.markdown)
            return
        rows = [predict(*s, counts=counts) for s in shapes() if not args.shape or args.shape in s[0]]
    except ValueError as e:
        raise SystemExit(f"cuda_perf_model: {e}")
    if args.dump_counts:
        dump_counts(rows)
    elif args.json:
        for r in rows:
            print(json.dumps(r))
    elif args.kernels:
        for r in rows:
            for cls in ("fa2", "fa3"):
                print(f"\n{r['shape']}: design (d), {cls.upper()}-class, PREDICTED (not measured)\n")
                print_kernels(r, cls, args.markdown)
    elif args.markdown:
        print_markdown(rows)
        print()
        print_mma(rows, True)
    else:
        print_text(rows, args)
        print("\n(d) every step as MMAs, PREDICTED; goals of issue 46")
        print_mma(rows, False)
        if not args.shape:
            print("\nIssue 46's goals for the 830M layer, PREDICTED")
            print_goals(goals_830m(counts, occupancy), False)


if __name__ == "__main__":
    main()
