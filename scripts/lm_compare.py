#!/usr/bin/env python3
"""lm_compare.py: the JSON and arithmetic steps of scripts/lm_compare.sh (standard library only).

    lm_compare.py options DIR/experiment.json KEY=VALUE...   store the options, or refuse a change
    lm_compare.py arm ARM PRESET_CONFIG OUT_CONFIG           the "model" object of an ablation arm
    lm_compare.py todo RESULT TEST NEEDLE EXAMPLES NEEDLES   what RESULT lacks: val, test, needle
    lm_compare.py record RESULT KEY=VALUE...                 update RESULT (empty values: unchanged)
    lm_compare.py needle NEEDLE_JSON                         the accuracy over every cell of mtac eval needle --json
    lm_compare.py table DIR                                  DIR/results.md and DIR/results.json

The arms are those docs/lm_compare.md lists; the table holds per arm and seed the validation (and
test) loss, per arm the mean and sample standard deviation over seeds, and the paired difference
arm - baseline per seed with its mean and SD. With --from (continued training of a pretrained run)
it also holds that run before training.
"""
import json
import math
import os
import sys

# The options that only change evaluations: they may change over an experiment (its finished runs
# are then evaluated on what they lack); the others are refused.
EVAL_OPTIONS = ('test', 'needle', 'needle_examples', 'needles')

# Each ablation as a change of the preset's "mta" object (docs/model.md): the key-query convolutions
# run only in qk_layers; head mixing, head convolution, group norm and gate in every layer.
ARMS = ('baseline', 'mta', 'mta-all', 'mta-every4', 'mta-nonorm', 'mta-kq', 'mta-heads')


def arm_mta(arm, mta, n_layers):
    if arm == 'mta-all':
        mta['qk_layers'] = list(range(n_layers))
    elif arm == 'mta-every4':
        mta['qk_layers'] = list(range(2, n_layers, 4))  # the presets' pattern (layers 2, 6, ...)
    elif arm == 'mta-nonorm':
        mta.update(group_norm=False, depth_scale=False, gate=False)
    elif arm == 'mta-kq':
        mta.update(pre_head_mix=False, post_ch=0)
    elif arm == 'mta-heads':
        mta['qk_layers'] = []
    return mta


def cmd_arm(arm, preset_config, out_config):
    with open(preset_config) as f:
        model = json.load(f)['model']
    if not model.get('mta'):
        sys.exit('lm_compare: the preset has no MTA layers to change for arm %s' % arm)
    model['mta'] = arm_mta(arm, model['mta'], model['n_layers'])
    with open(out_config, 'w') as f:
        json.dump({'model': model}, f, indent=1)
        f.write('\n')


def cmd_options(path, pairs):
    now = dict(p.split('=', 1) for p in pairs)
    if not os.path.exists(path):
        with open(path, 'w') as f:
            json.dump(now, f, indent=1, sort_keys=True)
            f.write('\n')
        return
    with open(path) as f:
        before = json.load(f)
    changed = ['--%s %s (was %s)' % (k.replace('_', '-'), now.get(k) or '(none)', before.get(k) or '(none)')
               for k in sorted(set(now) | set(before)) if k not in EVAL_OPTIONS and (now.get(k) or '') != (before.get(k) or '')]
    if changed:
        sys.stderr.write('lm_compare: %s holds an experiment with other options: %s.\n'
                         'Repeat its command to resume it, or choose another --out.\n'
                         % (os.path.dirname(path) or '.', '; '.join(changed)))
        sys.exit(2)
    # an option missing from an older experiment.json is an empty one
    if any((now.get(k) or '') != (before.get(k) or '') for k in EVAL_OPTIONS):
        write_json(path, dict(before, **{k: now.get(k, '') for k in EVAL_OPTIONS}))


def write_json(path, obj):
    with open(path + '.tmp', 'w') as f:
        json.dump(obj, f, indent=1, sort_keys=True)
        f.write('\n')
    os.replace(path + '.tmp', path)


def load(path):
    if not os.path.exists(path):
        return {}
    with open(path) as f:
        return json.load(f)


def needle_spec(contexts, examples, needles):
    return 'contexts %s, %s examples a cell, %s needles' % (contexts, examples, needles)


def cmd_todo(result, test, needle, examples, needles):
    """The evaluations RESULT lacks for these options (a result of an older lm_compare has no
    test or needle keys: its test_loss or needle is then missing if asked)."""
    r = load(result)
    todo = [] if 'val_loss' in r else ['val']
    if test and (r.get('test') != test or r.get('test_loss') is None):
        todo.append('test')
    if needle and (r.get('needle_spec') != needle_spec(needle, examples, needles) or r.get('needle') is None):
        todo.append('needle')
    print(' '.join(todo))


def cmd_record(result, pairs):
    kv = dict(p.split('=', 1) for p in pairs)
    r = load(result)
    if kv['val_loss']:
        r['val_loss'] = float(kv['val_loss'])
    if kv['test_loss']:
        r.update(test=kv['test'], test_loss=float(kv['test_loss']))
    if kv['needle_acc']:
        r.update(needle=float(kv['needle_acc']), needle_spec=needle_spec(kv['needle'], kv['needle_examples'], kv['needles']))
    write_json(result, r)
    print('  val loss %.4f%s%s' % (r['val_loss'], ', test loss %.4f' % r['test_loss'] if kv['test'] else '',
                                   ', needle accuracy %.4f' % r['needle'] if kv['needle'] else ''))


def mean_sd(xs):
    """Mean and sample standard deviation (n - 1); the SD of one value is None (n/a)."""
    m = sum(xs) / len(xs)
    sd = math.sqrt(sum((x - m) ** 2 for x in xs) / (len(xs) - 1)) if len(xs) > 1 else None
    return {'n': len(xs), 'mean': m, 'sd': sd}


def cmd_needle(path):
    with open(path) as f:
        cells = json.load(f)['results']
    total = sum(c['total'] for c in cells)
    if not total:
        sys.exit('lm_compare: %s holds no examples' % path)
    print('%.4f' % (sum(c['correct'] for c in cells) / total))


def fmt(x):
    return 'n/a' if x is None else '%.4f' % x


def summaries(runs, arms, seeds, keys):
    """Per arm: mean and SD of each key; per arm but baseline: the paired differences."""
    by = {(r['arm'], r['seed']): r for r in runs}
    per_arm = {a: {k: mean_sd([by[a, s][k] for s in seeds]) for k in keys} for a in arms}
    diffs = {}
    for a in arms:
        if a == 'baseline':
            continue
        d = {k: [by[a, s][k] - by['baseline', s][k] for s in seeds] for k in keys}
        diffs[a] = {k: dict(mean_sd(d[k]), per_seed=dict(zip(map(str, seeds), d[k]))) for k in keys}
    return per_arm, diffs


def markdown(exp, runs, before, per_arm, diffs, keys):
    cols = ' | '.join(k.replace('_', ' ') for k in keys)
    model = 'from %s' % exp['from'] if exp.get('from') else exp['preset']
    out = ['# lm_compare: %s, %s steps, seeds %s' % (model, exp['steps'], exp['seeds']), '']
    if before:
        out += ['## Before training', '', '| run | %s |' % cols, '|---|%s' % ('---|' * len(keys)),
                '| %s | %s |' % (exp['from'], ' | '.join(fmt(before[k]) for k in keys)), '']
    out += ['## Runs', '', '| arm | seed | %s |' % cols, '|---|---|%s' % ('---|' * len(keys))]
    out += ['| %s | %d | %s |' % (r['arm'], r['seed'], ' | '.join(fmt(r[k]) for k in keys)) for r in runs]
    out += ['', '## Per arm: mean and sample SD over seeds', '',
            '| arm | seeds | %s |' % ' | '.join('{0} mean | {0} SD'.format(k.replace('_', ' ')) for k in keys),
            '|---|---|%s' % ('---|---|' * len(keys))]
    for a, s in per_arm.items():
        out.append('| %s | %d | %s |' % (a, s[keys[0]]['n'], ' | '.join('%s | %s' % (fmt(s[k]['mean']), fmt(s[k]['sd'])) for k in keys)))
    out += ['', '## Paired difference arm - baseline (negative: the arm has the lower loss%s)'
            % ('; positive: the higher needle accuracy' if 'needle' in keys else ''), '',
            '| arm | seed | %s |' % cols, '|---|---|%s' % ('---|' * len(keys))]
    for a, d in diffs.items():
        for s in d[keys[0]]['per_seed']:
            out.append('| %s | %s | %s |' % (a, s, ' | '.join(fmt(d[k]['per_seed'][s]) for k in keys)))
        out.append('| %s | mean | %s |' % (a, ' | '.join(fmt(d[k]['mean']) for k in keys)))
        out.append('| %s | SD | %s |' % (a, ' | '.join(fmt(d[k]['sd']) for k in keys)))
    return '\n'.join(out) + '\n'


def result(d, name, keys):
    """results/NAME.json's values of keys, each checked finite."""
    with open(os.path.join(d, 'results', name + '.json')) as f:
        r = json.load(f)
    for k in keys:
        if not isinstance(r.get(k), (int, float)) or not math.isfinite(r[k]):
            sys.exit('lm_compare: %s: %s is %r' % (name, k, r.get(k)))
    return {k: r[k] for k in keys}


def cmd_table(d):
    with open(os.path.join(d, 'experiment.json')) as f:
        exp = json.load(f)
    arms = exp['arms'].split(',')
    seeds = [int(s) for s in exp['seeds'].split(',')]
    keys = ['val_loss'] + (['test_loss'] if exp.get('test') else []) + (['needle'] if exp.get('needle') else [])
    runs = [dict(arm=a, seed=s, run='runs/%s-seed%d' % (a, s), **result(d, '%s-seed%d' % (a, s), keys))
            for a in arms for s in seeds]
    before = result(d, 'pretrained', keys) if exp.get('from') else None
    per_arm, diffs = summaries(runs, arms, seeds, keys)
    with open(os.path.join(d, 'results.json'), 'w') as f:
        json.dump({'experiment': exp, 'before': before, 'runs': runs, 'arms': per_arm, 'differences': diffs}, f,
                  indent=1, allow_nan=False)
        f.write('\n')
    md = markdown(exp, runs, before, per_arm, diffs, keys)
    with open(os.path.join(d, 'results.md'), 'w') as f:
        f.write(md)
    sys.stdout.write(md)


if __name__ == '__main__':
    cmd, args = sys.argv[1], sys.argv[2:]
    if cmd == 'options':
        cmd_options(args[0], args[1:])
    elif cmd == 'arm':
        cmd_arm(*args)
    elif cmd == 'todo':
        cmd_todo(*args)
    elif cmd == 'record':
        cmd_record(args[0], args[1:])
    elif cmd == 'needle':
        cmd_needle(*args)
    elif cmd == 'table':
        cmd_table(*args)
    else:
        sys.exit('lm_compare.py: unknown command %s' % cmd)
