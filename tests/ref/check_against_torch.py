#!/usr/bin/env python3
"""Checks `mtac attn` against the independent PyTorch autograd reference on freshly drawn cases.

    /usr/bin/python3 tests/ref/check_against_torch.py --mtac build/mtac [--cases N] [--seed S] [--backend NAME]

Then every on/off combination of the six steps once (64 cases, on the shapes of the C tests'
combination sweep), and every combination on each of its shapes with grouped-query attention or
packed documents (4 x 64 cases; --no-combos leaves all these out).
For each case: draw a configuration and float32 tensors, write IN.safetensors (q, k, v, the present
parameters, dout, metadata layer_id/depth_scale), run `MTAC attn --in IN --out OUT`, read `out`,
`grad.q`, `grad.k`, `grad.v`, `grad.<param>` from OUT and compare each with the float64 reference
(gradients of sum(out * dout)). A tensor's error is measured as
    rel = max|mtac - ref| / max(max|ref|, FLOOR * case_scale)      (FLOOR 0.05)
where case_scale is the largest |value| among all expected tensors of the case: the error is
measured against the tensor's own scale, as float32 accumulation errors are, with a floor.
Why the floor: some gradients are zero in exact arithmetic by a symmetry, so any float32
implementation (torch's own float32 run included) returns pure rounding noise for them. Group
norm cancels any per-(head, position) scale of O, so with c_h = 1 the post head "convolution" is a
per-head scale and grad.w_post_head ~ 0; with T = 1 every attention map is a single number and
grad.w_post ~ 0 too. That noise grows with the size of the terms summed (B, H, T), hence a floor
relative to the case's scale rather than an absolute one.
The bound is measured on each case, as the C tests' (tests/testutil.h, docs/testing.md): the
same reference run in float32 (torch's own order of every sum) differs from the float64 one by
this case's float32 rounding through the whole chain, noise = its largest rel over the tensors
(the sums' lengths, their cancellation, the softmax, the group norm's 1/rms of a row all show
there). mtac is another float32 computation of the same chain: each of its at most 16 steps (the
backward of every step: scores, convolution, mixing, softmax, convolution, head convolution, P v,
norm, gate and their transposes) adds at most about what torch's whole run does, so a tensor
passes when
    rel <= ROUNDING_STEPS * max(noise, u)      (ROUNDING_STEPS 32, as the C tests' TU_ROUNDING_STEPS; u = 2^-24)
(--tol: a fixed bound instead). A wrong index or a missing term is off by a fraction of the
tensor, hundreds of times that.
Prints one line per case and ends with "N passed, M failed"; exit status 1 if any failed,
77 (CTest's skip code here) if torch is not importable, 2 on bad usage.
The cases use a different seed from the committed fixtures (tests/ref/gen_fixtures.py).
"""
import argparse
import os
import random
import subprocess
import sys
import tempfile

try:
    import torch
except ImportError:
    print('check_against_torch: torch is not importable with %s; skipping' % sys.executable)
    sys.exit(77)

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import st  # noqa: E402
from cases import make_case, reference, describe  # noqa: E402
from maxerr import max_abs, max_abs_diff, rel_err  # noqa: E402

DEFAULT_SEED = 777  # the fixtures use 20240601
FLOOR = 0.05  # see the module docstring
U = 2.0 ** -24  # float32's unit roundoff
ROUNDING_STEPS = 32  # the bound's steps of rounding (module docstring)


def C(B=1, H=2, T=13, d=4, **kw):
    s = dict(B=B, H=H, T=T, d=d)
    s.update(kw)
    return s


def fixed_cases(rng):
    """Hand-picked combinations drawn first: edge shapes, the 830M-like layer, a few bigger ones."""
    big_T = [rng.randint(64, 130) for _ in range(3)]
    return [
        C(T=rng.choice([5, 13, 33])),                                       # plain
        C(H=4, T=21, d=7, pre=(6, 11), pre_head=True, post=(6, 11), c_h=4, gn=True, gate=True),
        C(H=4, T=19, d=8, pre=(3, 5), pre_head=True, post=(2, 7), c_h=2, gn=True, gate=True,
          depth_scale=True, layer_id=rng.randint(1, 23)),
        C(H=2, T=3, d=5, pre=(2, 9), post=(4, 11), c_h=2),                  # T < c_k, T < c_q
        C(H=1, T=17, d=3, pre=(1, 5), pre_head=True, post=(3, 1), c_h=1, gn=True, gate=True),
        C(B=3, H=3, T=1, d=2, pre=(2, 3), pre_head=True, post=(2, 3), c_h=3, gn=True, gate=True),
        C(B=2, H=4, T=big_T[0], d=16, pre=(6, 11), pre_head=True, post=(6, 11), c_h=4, gn=True,
          gate=True),                                                       # 830M-like, bigger
        C(B=1, H=4, T=big_T[1], d=32, pre=(6, 11), post=(6, 11)),
        C(B=1, H=4, T=big_T[2], d=24, pre_head=True, c_h=2, gn=True, depth_scale=True, layer_id=3,
          gate=True),
        C(B=2, H=4, T=19, d=8, pre=(3, 5), pre_head=True, post=(2, 7), c_h=2, gn=True, gate=True,
          H_kv=2),                                                          # grouped-query, every step
        C(H=6, T=17, d=5, post=(3, 5), c_h=3, H_kv=1),                      # one kv head
        C(B=2, H=4, T=40, d=8, pre=(6, 11), pre_head=True, post=(6, 11), c_h=4, gn=True, gate=True,
          docs=[1, 5, 2, 9, 3, 13]),                                        # packed documents
        C(B=2, H=4, T=23, d=5, pre=(3, 5), post=(2, 3), c_h=2, H_kv=2, docs=[7, 1, 4]),
    ]


# The shapes of the C tests' combination sweep (tests/testutil.c tu_combo): H = 1 with c_k > T;
# B > 1, odd H, c_h = 1, pre c_q = 1; c_h = H odd, post c_q = 1; 1 < c_h < H with 6x11; d = 17;
# grouped-query attention with H_kv = 2 of H = 4 and H_kv = 1 of H = 6; packed documents (the
# lengths of tu_combo_docs), with grouped-query attention in the second.
DOC_LENS = [1, 5, 2, 9, 3, 13, 1, 7, 4]
COMBO_SHAPES = [
    dict(B=1, H=1, T=7, d=3, pre=(2, 9), post=(3, 11), c_h=1),
    dict(B=2, H=3, T=23, d=5, pre=(1, 3), post=(4, 5), c_h=1),
    dict(B=1, H=3, T=29, d=4, pre=(3, 5), post=(1, 3), c_h=3),
    dict(B=2, H=4, T=31, d=6, pre=(6, 11), post=(5, 7), c_h=2),
    dict(B=1, H=6, T=37, d=17, pre=(5, 3), post=(2, 13), c_h=3),
    dict(B=2, H=4, T=31, d=6, pre=(6, 11), post=(5, 7), c_h=2, H_kv=2),
    dict(B=1, H=6, T=37, d=5, pre=(3, 5), post=(2, 3), c_h=2, H_kv=1),
    dict(B=2, H=4, T=31, d=6, pre=(3, 5), post=(4, 7), c_h=2, docs=DOC_LENS),
    dict(B=2, H=6, T=29, d=5, pre=(5, 3), post=(2, 5), c_h=3, H_kv=2, docs=DOC_LENS[4:] + DOC_LENS[:4]),
]
STEPS = ['pre', 'pre_head', 'post', 'c_h', 'gn', 'gate']  # bit i of a combination's mask


def combination_cases():
    """Every on/off combination of the six steps once, each on one of the sweep's shapes in turn;
    then every combination on each shape with grouped-query attention or packed documents."""
    specs = [combination(COMBO_SHAPES[mask % len(COMBO_SHAPES)], mask) for mask in range(64)]
    for shape in COMBO_SHAPES:
        if shape.get('H_kv') or shape.get('docs'):
            specs += [combination(shape, mask) for mask in range(64)]
    return specs


def combination(shape, mask):
    """The steps of mask (bit i: STEPS[i]) on a sweep shape."""
    s = C(B=shape['B'], H=shape['H'], T=shape['T'], d=shape['d'])
    for key in ('H_kv', 'docs'):
        if shape.get(key):
            s[key] = shape[key]
    for i, step in enumerate(STEPS):
        if mask >> i & 1:
            s[step] = shape.get(step, True)
    if s.get('gn') and mask % 2:
        s['depth_scale'], s['layer_id'] = True, 2
    return s


def random_case(rng):
    """A random configuration: each step on with probability 1/2, kernel sizes anywhere in range."""
    H = rng.choice([1, 2, 3, 4, 6])
    s = C(B=rng.choice([1, 1, 2, 3]), H=H, T=rng.choice([1, 2, 3, 5, 7, 13, 16, 17, 31, 37, 48, 70]),
          d=rng.choice([1, 2, 3, 4, 5, 8, 9, 16]))
    if rng.random() < 0.5:
        s['pre'] = (rng.randint(1, 6), rng.choice([1, 3, 5, 7, 9, 11]))
    if rng.random() < 0.5:
        s['pre_head'] = True
    if rng.random() < 0.5:
        s['post'] = (rng.randint(1, 6), rng.choice([1, 3, 5, 7, 9, 11]))
    if rng.random() < 0.5:
        s['c_h'] = rng.choice([c for c in range(1, H + 1) if H % c == 0])
    # group norm at d = 1 is sign(O)*|O|/sqrt(O^2+eps), badly conditioned near O = 0: rarer there
    if rng.random() < (0.5 if s['d'] > 1 else 0.15):
        s['gn'] = True
        if rng.random() < 0.4:
            s['depth_scale'] = True
            s['layer_id'] = rng.randint(0, 23)
    if rng.random() < 0.5:
        s['gate'] = True
    if rng.random() < 0.3:  # grouped-query attention: k, v with a divisor of H heads
        s['H_kv'] = rng.choice([c for c in range(1, H + 1) if H % c == 0])
    if rng.random() < 0.3:  # packed documents of random lengths
        s['docs'] = [rng.choice([1, 2, 3, 5, 8, 13, 21]) for _ in range(rng.randint(1, 5))]
    return s


def compare(got, exp, exp32, tol=None):
    """Returns (ok, worst_name, worst_ratio, bound, messages) over every expected tensor; rel is the
    error over max(max|ref|, FLOOR * case_scale), to be <= bound: tol, or ROUNDING_STEPS times the
    largest rel of the float32 reference exp32 (at least u); ratio is rel / bound. A NaN or infinity on
    either side fails (maxerr measures it as +inf, where a NaN would pass `rel > bound`)."""
    ok, worst, worst_ratio, msgs = True, '-', 0.0, []
    case_scale = max([max_abs(r) for r in exp.values()] + [1e-30])
    noise = max([rel_err(exp32[n].to(torch.float64), r, FLOOR * case_scale) for n, r in exp.items()] + [0.0])
    bound = tol if tol is not None else ROUNDING_STEPS * max(noise, U)
    for name, ref in exp.items():
        if name not in got:
            ok = False
            msgs.append(f'missing {name}')
            continue
        a = torch.from_numpy(got[name]).to(torch.float64)
        if tuple(a.shape) != tuple(ref.shape):
            ok = False
            msgs.append(f'{name}: shape {tuple(a.shape)}, want {tuple(ref.shape)}')
            continue
        if a.numel() == 0:
            continue
        if not torch.isfinite(a).all():
            ok = False
            msgs.append(f'{name}: non-finite values')
            continue
        err = max_abs_diff(a, ref)
        rel = rel_err(a, ref, FLOOR * case_scale)
        if not rel / bound <= worst_ratio:
            worst, worst_ratio = name, rel / bound
        if not rel <= bound:
            ok = False
            msgs.append(f'{name}: max err {err:.3g} (max|ref| {max_abs(ref):.3g}, case scale '
                        f'{case_scale:.3g}), rel {rel:.3g} > bound {bound:.3g}')
    extra = sorted(set(got) - set(exp))
    if extra:
        msgs.append('note: extra outputs ' + ', '.join(extra))
    return ok, worst, worst_ratio, bound, msgs


def main():
    ap = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    ap.add_argument('--mtac', required=True, help='path to the mtac executable')
    ap.add_argument('--cases', type=int, default=30, help='number of cases (default 30)')
    ap.add_argument('--seed', type=int, default=DEFAULT_SEED, help=f'seed (default {DEFAULT_SEED})')
    ap.add_argument('--tol', type=float, help='a fixed relative bound instead of the one measured per case')
    ap.add_argument('--no-combos', action='store_true',
                    help='leave out the 64 on/off combinations of the six steps (run after the N cases)')
    ap.add_argument('--keep', action='store_true', help='keep the files of failed cases')
    ap.add_argument('--backend', help='mtac attn --backend NAME (default: its own, MTAC_BACKEND or fused)')
    args = ap.parse_args()
    if not (os.path.isfile(args.mtac) and os.access(args.mtac, os.X_OK)):
        print(f'check_against_torch: {args.mtac} is not an executable file', file=sys.stderr)
        return 2
    torch.set_num_threads(max(1, min(4, os.cpu_count() or 1)))

    rng = random.Random(args.seed)
    gen = torch.Generator().manual_seed(args.seed)
    specs = fixed_cases(rng)
    while len(specs) < args.cases:
        specs.append(random_case(rng))
    specs = specs[:args.cases]
    if not args.no_combos:
        specs += combination_cases()

    passed = failed = 0
    worst_ratio = 0.0
    with tempfile.TemporaryDirectory(prefix='mtac_check_') as tmp:
        for n, spec in enumerate(specs):
            tensors, meta = make_case(spec, gen)
            exp, exp32 = reference(tensors, meta), reference(tensors, meta, torch.float32)
            inp = os.path.join(tmp, f'case{n}_in.safetensors')
            out = os.path.join(tmp, f'case{n}_out.safetensors')
            st.save(inp, {k: v.numpy() for k, v in tensors.items()}, meta)
            cmd = [args.mtac, 'attn', '--in', inp, '--out', out] + (['--backend', args.backend] if args.backend else [])
            try:
                r = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=600)
                rc, log = r.returncode, r.stdout.decode(errors='replace')
            except subprocess.TimeoutExpired:
                rc, log = 'timeout', ''
            if rc != 0:
                ok, worst, ratio, bound, msgs = False, '-', float('nan'), float('nan'), [f'mtac exit {rc}: {log.strip()[-500:]}']
            else:
                try:
                    got, _ = st.load(out)
                    ok, worst, ratio, bound, msgs = compare(got, exp, exp32, args.tol)
                except (OSError, ValueError, KeyError) as e:
                    ok, worst, ratio, bound, msgs = False, '-', float('nan'), float('nan'), [f'cannot read {out}: {e}']
            passed += ok
            worst_ratio = ratio if not ratio <= worst_ratio else worst_ratio
            failed += not ok
            print(f'case {n:2d} {"ok  " if ok else "FAIL"} worst {worst} {ratio:.2g} of bound {bound:.2e} | {describe(spec)}'
                  + (f' layer_id={meta["layer_id"]}' if 'layer_id' in meta and not spec.get('depth_scale') else ''))
            for m in msgs:
                print('        ' + m)
            if not ok and args.keep:
                keep = tempfile.mkdtemp(prefix=f'mtac_check_case{n}_')
                for p in (inp, out):
                    if os.path.exists(p):
                        os.replace(p, os.path.join(keep, os.path.basename(p)))
                print(f'        kept in {keep}')
            sys.stdout.flush()
    print(f'{passed} passed, {failed} failed; worst error over its bound {worst_ratio:.3g}')
    return 1 if failed else 0


if __name__ == '__main__':
    sys.exit(main())
