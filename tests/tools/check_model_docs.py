#!/usr/bin/env python3
"""docs/cuda.md's tables of the performance model are its output today.

    python3 tests/tools/check_model_docs.py [--docs docs/cuda.md]

Runs bench/cuda_perf_model.py with each of OUTPUTS' arguments and requires every row of the
tables it names (by their order in the output) to be a line of the docs, so that a change to the
model, or to the SASS table its "as built" rows read, fails until the docs are regenerated with the
command beside each table. Exit status 1 with the rows that are missing.
"""
import argparse
import os
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
MODEL = os.path.join(ROOT, 'bench', 'cuda_perf_model.py')

# (the model's arguments, the indices of the tables of its output the docs hold)
OUTPUTS = [
    (['--markdown'], [0, 1]),
    (['--goals', '--markdown'], [0]),
    (['--every', '--markdown'], [0, 1, 2]),
    (['--kernels', '--markdown', '--shape', '830M conv'], [0]),  # FA2-class; the docs omit FA3-class
    (['--kernels', '--markdown', '--shape', '830M no-conv'], [0]),
    (['--cluster', '--markdown'], [0, 1]),
]


def tables(text):
    """The markdown tables of text, each a list of its rows (header and separator included)."""
    out, cur = [], None
    for line in text.splitlines():
        if line.startswith('|'):
            if cur is None:
                cur = []
                out.append(cur)
            cur.append(line.rstrip())
        else:
            cur = None
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    ap.add_argument('--docs', default=os.path.join(ROOT, 'docs', 'cuda.md'))
    args = ap.parse_args()
    try:
        with open(args.docs) as f:
            lines = set(line.rstrip() for line in f)
    except OSError as e:
        sys.exit('check_model_docs: cannot read %s: %s' % (args.docs, e.strerror))
    missing = 0
    for argv, which in OUTPUTS:
        r = subprocess.run([sys.executable, MODEL] + argv, capture_output=True, text=True, cwd=ROOT)
        if r.returncode != 0:
            sys.exit('check_model_docs: %s failed:\n%s' % (' '.join(argv), r.stderr[-2000:]))
        found = tables(r.stdout)
        for i in which:
            if i >= len(found):
                sys.exit('check_model_docs: %s prints %d tables, not %d' % (' '.join(argv), len(found), i + 1))
            rows = [row for row in found[i] if row not in lines]
            for row in rows:
                print('%s, table %d: not in the docs: %s' % (' '.join(argv), i, row))
            missing += len(rows)
    if missing:
        print('check_model_docs: %d rows of the model\'s tables are not in %s: regenerate them with '
              'the command beside each table' % (missing, os.path.relpath(args.docs, ROOT)))
        return 1
    print('check_model_docs: the model\'s %d tables are in %s' % (sum(len(w) for _, w in OUTPUTS),
                                                               os.path.relpath(args.docs, ROOT)))
    return 0


if __name__ == '__main__':
    sys.exit(main())
