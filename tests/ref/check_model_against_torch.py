#!/usr/bin/env python3
"""The C model against the PyTorch reference model (model_ref.py), like llm.c's test_gpt2.

    /usr/bin/python3 tests/ref/check_model_against_torch.py --model-step build/model_step

For the baseline, the all-steps MTA config and the all-steps MTA config with grouped-query
attention (4 heads on 2 kv heads), that with packed documents (doc_mask, EOS tokens inside
the rows; the reference runs each document alone), and that untied (output.weight) with llama3
RoPE scaling (one pair kept, one interpolated, two stretched) in tests/ref/configs/: draw initial weights with
model_ref.init_weights (perturbing the MTA kernels away from identity so that every path carries
gradient), a batch with some ignored targets, then run both implementations from the same
weights and compare
  - step 0: logits, loss and the gradient of every weight, max|C - torch| relative to the
    tensor's largest torch entry (bounds: chain_tol below);
  - 10 AdamW steps (lr 1e-3, betas (0.9, 0.98), eps 1e-8, weight decay 0.05, clip 1.0): every
    loss and the final weights, against bounds measured on this run (train_tols below) plus,
    per weight entry, what its gradient's rounding can do through Adam (adam_amplification).
The C side computes in float32, torch in float64 (and once more in float32, for train_tol).
Exit 77 without torch; last line "N passed, M failed".
"""
import argparse
import os
import subprocess
import sys
import tempfile

try:
    import torch
except ImportError:
    print('check_model_against_torch: torch is not importable with %s; skipping' % sys.executable)
    sys.exit(77)
import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import st  # noqa: E402
import model_ref  # noqa: E402
from maxerr import max_abs, rel_err  # noqa: E402

STEPS, LR, BETAS, CLIP = 10, 1e-3, (0.9, 0.98), 1.0
STEP_ARGS = ['--steps', str(STEPS), '--lr', str(LR), '--beta1', str(BETAS[0]), '--beta2', str(BETAS[1]),
             '--eps', '1e-8', '--weight-decay', '0.05', '--clip', str(CLIP)]


U = 2.0 ** -24  # float32 unit roundoff


def chain_tol(cfg, T, B):
    """The bounds of a float32 model against exact arithmetic, relative to a tensor's largest entry
    (tests/model_tol.h derives them; the same count): a float32 sum of n terms errs by about
    n*u times its result's scale, and along the chain from the embedding to a logit the sums'
    lengths add up to N. Logits and loss: 2u*N; gradients run the chain back (another N) and
    sum over the B*T positions: 2u*(2N + B*T). The factor 2 is the tests' margin of model_tol.h
    (there: two float32 sides); here torch's float64 side adds nothing."""
    m, D, H = cfg['mta'], cfg['dim'], cfg['n_heads']
    d = D // H
    pre = m['pre_cq'] * m['pre_ck'] + (H if m['pre_head_mix'] else 0) if m else 0
    post = m['post_cq'] * m['post_ck'] * max(m['post_ch'], 1) if m else 0
    #       norm, q/k/v, scores, kernels, softmax, P V, group norm, wo, norm, w1/w3, w2
    layer = 2 * D + d + pre + T + post + T + (d if m and m['group_norm'] else 0) + 3 * D + cfg['hidden_dim']
    N = cfg['n_layers'] * layer + 2 * D
    return 2 * U * N, 2 * U * (2 * N + B * T)


def train_tols(c32, ref, tol_fwd, tol_grad):
    """The bounds of the losses and of the final weights' well-conditioned entries after the AdamW
    steps, from the run itself. Torch's own float32 run commits rounding of the kind the C run
    does (float32 sums of the same lengths, in other orders) and meets the same amplification
    by the steps: its largest distance from float64 over the final tensors measures it. The C
    run's error is of that size: bounded by 4 times it (twice for two sides' errors, twice for
    their spread), and never below what the step-0 bounds give without amplification: the
    losses tol_fwd, the weights steps * lr * tol_grad (each step moves a weight by at most about
    lr). Entries whose update the rounding can turn get adam_amplification's bound on top."""
    final = max(max_rel(c32[k], ref[k], 1e-2) for k in ref if k.startswith('final.'))
    return max(4 * max_rel(c32['losses'], ref['losses'], 1e-30), tol_fwd), 4 * final + STEPS * LR * tol_grad


def adam_ratio_max():
    """The largest |m_hat| / sqrt(v_hat) of the steps, whatever the gradients: m_hat = sum_s a_s g_s
    and v_hat = sum_s b_s g_s^2 with the bias-corrected EMA weights a_s, b_s, so by Cauchy-Schwarz
    |m_hat| <= sqrt(sum_s a_s^2 / b_s) sqrt(v_hat)."""
    b1, b2 = BETAS
    worst = 0.0
    for t in range(1, STEPS + 1):
        a = [(1 - b1) * b1 ** (t - s) / (1 - b1 ** t) for s in range(1, t + 1)]
        b = [(1 - b2) * b2 ** (t - s) / (1 - b2 ** t) for s in range(1, t + 1)]
        worst = max(worst, sum(x * x / y for x, y in zip(a, b)) ** 0.5)
    return worst


def adam_amplification(name, got, ref, c32):
    """Per entry, how far the rounding of its gradients can move a final weight through AdamW.
    An update is lr * r with r = m_hat / (sqrt(v_hat) + eps), |r| <= R (adam_ratio_max). Gradient
    errors of at most e move m_hat by at most e and sqrt(v_hat) by at most e (a weighted 2-norm),
    so r by at most (1 + R) e / den, den the step's denominator, and never by more than 2R. Over
    the steps: lr * steps * min(2R, (1 + R) e / den_min), den_min the smallest of the reference
    run's denominators (model_ref.py's adam_den_min). e is this entry's step-0 gradient error,
    the larger of the C run's and torch float32's (two draws of float32 rounding at this entry),
    times 4 for the later steps' own draws (as train_tols), scaled as the clip scaled the gradient.
    Adam divides by the gradient's own size, so an entry whose gradient is near its rounding
    error (a cancellation) can move by up to lr a step; relative errors elsewhere cancel in r and
    leave this term far below train_tols' bound."""
    norm = sum(float(np.square(ref[k].astype(np.float64)).sum()) for k in ref if k.startswith('grad.')) ** 0.5
    clip_scale = min(1.0, CLIP / norm) if CLIP > 0 else 1.0
    g = ref['grad.' + name].astype(np.float64)
    e = np.maximum(np.abs(got['grad.' + name] - g), np.abs(c32['grad.' + name] - g))
    R = adam_ratio_max()
    return LR * STEPS * np.minimum(2 * R, (1 + R) * 4 * clip_scale * e / ref['adam_den_min.' + name])


def max_rel(a, b, floor):
    # +inf for a NaN or infinity in either: np.abs(a - b).max() would be a NaN, which `r > tol` passes
    return rel_err(a, b, floor)


def check(name, model_step, tmp, seed):
    cfg_path = os.path.join(HERE, 'configs', name + '.json')
    cfg = model_ref.load_config(cfg_path)
    w = model_ref.init_weights(cfg, seed)
    g = torch.Generator().manual_seed(seed + 1)
    for k in w:  # away from identity: every MTA kernel and norm gets its own gradient signal
        if '.mta.' in k or 'norm' in k:
            w[k] = w[k] + 0.2 * torch.randn(w[k].shape, generator=g)
    wpath = os.path.join(tmp, name + '_w.safetensors')
    st.save(wpath, {k: v.to(torch.float32).numpy() for k, v in w.items()})
    B, T, V = 2, 16, cfg['vocab_size']
    rng = np.random.default_rng(seed)
    tokens = rng.integers(0, V, size=(B, T))
    targets = rng.integers(0, V, size=(B, T))
    targets[:, ::5] = -1
    if cfg['doc_mask']:  # packed documents: EOS tokens inside the rows (a document of one token too)
        tokens[tokens == model_ref.EOS] = 0
        tokens[0, [3, 4, 10]] = model_ref.EOS
        tokens[1, [0, 8]] = model_ref.EOS
    dpath = os.path.join(tmp, name + '_d.safetensors')
    st.save(dpath, {'tokens': tokens.astype(np.float32), 'targets': targets.astype(np.float32)})
    outs = {}
    ref_cmd = [sys.executable, os.path.join(HERE, 'model_ref.py'), 'run']
    for who, cmd in (('torch', ref_cmd), ('torch32', ref_cmd + ['--dtype', 'float32']), ('c', [model_step])):
        out = os.path.join(tmp, f'{name}_{who}.safetensors')
        subprocess.run(cmd + ['--config', cfg_path, '--weights', wpath, '--data', dpath, '--out', out] + STEP_ARGS,
                       check=True)
        outs[who] = st.load(out)[0]
    ref, got = outs['torch'], outs['c']
    tol_fwd, tol_grad = chain_tol(cfg, T, B)
    tol_losses, tol_final = train_tols(outs['torch32'], ref, tol_fwd, tol_grad)
    fails = []
    worst = {}
    for k in ref:
        if k.startswith('adam_den_min.'):  # the reference's own, for adam_amplification
            continue
        if k not in got:
            fails.append('missing ' + k)
            continue
        # relative to the largest entry, or to 1e-2 for a tensor whose entries are all smaller
        # (a gradient at the scale of those it is summed with)
        if k == 'losses':
            r = max_rel(got[k], ref[k], 1e-30)
            tol = tol_losses
        elif k.startswith('final.'):  # per entry: |C - torch| / (tol_final * scale + amplification)
            scale = max(max_abs(ref[k]), 1e-2)
            bound = tol_final * scale + adam_amplification(k[len('final.'):], got, ref, outs['torch32'])
            r = max_abs(np.abs(got[k] - ref[k].astype(np.float64)) / bound)
            tol = 1.0
        else:
            r = max_rel(got[k], ref[k], 1e-2)
            tol = tol_grad if k.startswith('grad.') else tol_fwd
        worst[k] = r / tol
        if not r <= tol:
            fails.append(f'{k}: rel err {r:.3g} > {tol:g}')
    top = max(worst, key=worst.get)
    print(f'{name}: {len(worst)} tensors compared, worst {top} at {worst[top]:.2g} of its bound; '
          f'losses torch {ref["losses"][0]:.6f}..{ref["losses"][-1]:.6f}, C {got["losses"][0]:.6f}..{got["losses"][-1]:.6f}')
    for f in fails:
        print('   FAIL ' + f)
    return not fails


def main():
    ap = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    ap.add_argument('--model-step', required=True, help='path of the C model_step tool')
    a = ap.parse_args()
    passed = failed = 0
    with tempfile.TemporaryDirectory() as tmp:
        for name in ('tiny_baseline', 'tiny_mta', 'tiny_gqa', 'tiny_docs', 'tiny_untied'):
            ok = check(name, a.model_step, tmp, 5)
            passed += ok
            failed += not ok
    print(f'{passed} passed, {failed} failed')
    sys.exit(1 if failed else 0)


if __name__ == '__main__':
    main()
