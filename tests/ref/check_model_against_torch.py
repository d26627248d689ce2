#!/usr/bin/env python3
"""The C model against the PyTorch reference model (model_ref.py), like llm.c's test_gpt2.

    /usr/bin/python3 tests/ref/check_model_against_torch.py --model-step build/model_step

For the baseline, the all-steps MTA config and the all-steps MTA config with grouped-query
attention (4 heads on 2 kv heads), and that with packed documents (doc_mask, EOS tokens inside
the rows; the reference runs each document alone) in tests/ref/configs/: draw initial weights with
model_ref.init_weights (perturbing the MTA kernels away from identity so that every path carries
gradient), a batch with some ignored targets, then run both implementations from the same
weights and compare
  - step 0: logits, loss and the gradient of every weight:
        max|C - torch| <= 1e-4 * max(max|torch|, 1e-2)   per tensor
  - 10 AdamW steps (lr 1e-3, betas (0.9, 0.98), eps 1e-8, weight decay 0.05, clip 1.0):
        every loss within 1e-4 relative, and the final weights within 1e-3 * max|w|.
The C side computes in float32, torch in float64. Exit 77 without torch; last line "N passed, M failed".
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
from maxerr import rel_err  # noqa: E402

STEP_ARGS = ['--steps', '10', '--lr', '1e-3', '--beta1', '0.9', '--beta2', '0.98', '--eps', '1e-8',
             '--weight-decay', '0.05', '--clip', '1.0']


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
    for who, cmd in (('torch', [sys.executable, os.path.join(HERE, 'model_ref.py'), 'run']),
                     ('c', [model_step])):
        out = os.path.join(tmp, f'{name}_{who}.safetensors')
        subprocess.run(cmd + ['--config', cfg_path, '--weights', wpath, '--data', dpath, '--out', out] + STEP_ARGS,
                       check=True)
        outs[who] = st.load(out)[0]
    ref, got = outs['torch'], outs['c']
    fails = []
    worst = {}
    for k in ref:
        if k not in got:
            fails.append('missing ' + k)
            continue
        if k == 'losses':
            r = max_rel(got[k], ref[k], 1e-30)
            tol = 1e-4
        elif k.startswith('final.'):
            r = max_rel(got[k], ref[k], 1e-2)
            tol = 1e-3
        else:
            r = max_rel(got[k], ref[k], 1e-2)
            tol = 1e-4
        worst[k] = r
        if not r <= tol:
            fails.append(f'{k}: rel err {r:.3g} > {tol:g}')
    top = max(worst, key=worst.get)
    print(f'{name}: {len(worst)} tensors compared, worst {top} {worst[top]:.3g}; '
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
        for name in ('tiny_baseline', 'tiny_mta', 'tiny_gqa', 'tiny_docs'):
            ok = check(name, a.model_step, tmp, 5)
            passed += ok
            failed += not ok
    print(f'{passed} passed, {failed} failed')
    sys.exit(1 if failed else 0)


if __name__ == '__main__':
    main()
