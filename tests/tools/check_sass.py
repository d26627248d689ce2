#!/usr/bin/env python3
"""The CUDA backend's compiled code against the tensor-core path's performance rules, without a GPU.

    python3 tests/tools/check_sass.py [--source FILE] [--arch 80,90] [--prefix k_fa_]
                                      [--require-prefix] [--markdown FILE] [--self-test]

Compiles FILE (default tests/tools/sass_launch.cu: src/attn/mta_cuda.cu whole, with a main that
prints each kernel's launch: threads and dynamic shared bytes, from the host code's own sizing
functions) with nvcc for each arch, with the flags CMake gives libmtac_cuda.so and -Xptxas -v;
reads ptxas's report per kernel (registers, static shared memory, stack, spills), the SASS
(cuobjdump -sass) per kernel, counting instruction classes, and runs the program for the launches.
Rules, broken ones make the exit status 1:
  (a) no kernel spills registers;
  (b) the tensor-core kernels (names starting with --prefix) load and store shared memory as such
      (no generic LD/ST: those are shared memory reached through a pointer whose space the compiler
      lost, as through mta_cuda_tc.cuh's tc_shared()), and have HMMA and LDSM instructions; a
      cluster kernel (its name has "_cl" before "_", "<" or its end) may have generic ST, as its
      stores to another block's shared memory (attn/cluster_ptx.cuh's cl_st*) compile to, but no
      generic LD (its kernels push, never pull);
  (c) a tensor-core kernel's registers and shared memory (static + dynamic + 1 KB per block) let at
      least 2 of its blocks and 8 warps run on an H100 SM (the sm_90 code; the sm_80 code's blocks
      per SM are those of an A100, shown, not checked), or for the kernels of ONE_BLOCK (each with
      its reason) 1 block of at least 8 warps; its launch must be printed by FILE's main.
--require-prefix also fails when no kernel has the prefix. Prints a table per arch (--markdown
writes them to FILE too, for docs/cuda.md). cuobjdump is the one of NVIDIA's PyPI wheel that
scripts/cuda_tools.sh unpacks into .cuda-tools/bin (or --tools DIR); without it the exit status is
77 (skipped), or 1 when CI=true (CI installs it).
--self-test: the checker against tests/fixtures/sass_probe.cu: its k_fa_probe_good and cluster
kernel k_fa_probe_cl must pass and k_fa_probe_bad must break rule (b); then each of MUTATIONS,
applied to a copy of the sources, must break the rules of its kernel.
"""
import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile
from collections import Counter

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
LAUNCH = 'tests/tools/sass_launch.cu'
PROBE = 'tests/fixtures/sass_probe.cu'
# CMake's flags for libmtac_cuda.so (CMakeLists.txt: CMAKE_BUILD_TYPE Release, the include dirs,
# the definitions) that change the device code; -fPIC and visibility change only the host's.
NVCC_FLAGS = ['-O3', '-DNDEBUG', '-D_POSIX_C_SOURCE=200809L', '-std=c++17', '-Iinclude', '-Isrc']

# (what, file, the text, what it becomes, the kernel whose rules it must break)
MUTATIONS = [
    ('a generic shared-memory pointer reintroduced (tc_shared()\'s uintptr_t rounding)', PROBE,
     '    probe_mma(sh, x, out);', '    probe_mma((bf16 *)(((uintptr_t)sh + 31) & ~(uintptr_t)31), x, out);',
     'k_fa_probe_good'),
    ('a cluster kernel that pulls (ld.shared::cluster: a generic LD)', PROBE,
     '    const uint32_t w = got[t];', '    const uint32_t w = cl_ld4(cl_map(got + t, 0));', 'k_fa_probe_cl'),
    ('a cluster kernel\'s pushes (generic ST) in a kernel not named as one', PROBE,
     '#define PROBE_CL k_fa_probe_cl\n', '#define PROBE_CL k_fa_probe_push\n', 'k_fa_probe_push'),
    # (the forward's and dQ's tiles are reached only by ldmatrix and cp.async, whose addresses are
    # converted to the shared window explicitly, so the pointer's space does not matter there)
    ('the FlashAttention-2 dK/dV\'s shared memory through tc_shared()\'s generic pointer', 'src/attn/mta_cuda_fa2.cuh',
     '    MTA_DYNAMIC_SHARED(bf16, sh);\n    const int dp = a.dp, ld = fa_ld(dp), tile = TC_M * ld, g = threadIdx.x % 32 / 4;\n',
     '    bf16 *const sh = (bf16 *)tc_shared();\n    const int dp = a.dp, ld = fa_ld(dp), tile = TC_M * ld, g = threadIdx.x % 32 / 4;\n',
     'k_fa_dkdv_t<128>'),
]

# What an SM offers (CUDA C Programming Guide, "Compute capabilities", 8.0 and 9.0): registers,
# warps, blocks, shared memory per SM and per block (the opt-in), the 1 KB the system reserves per
# block; registers are allocated per warp in units of 256, shared memory in units of 128 bytes.
DEVICES = {
    '80': dict(name='A100', regs=65536, warps=64, blocks=32, smem_sm=164 * 1024, smem_block=163 * 1024),
    '90': dict(name='H100', regs=65536, warps=64, blocks=32, smem_sm=228 * 1024, smem_block=227 * 1024),
}
RESERVED, REG_UNIT, SMEM_UNIT = 1024, 256, 128
RULE_ARCH = '90'  # rule (c) is the H100's (issue 46)
# Rule (c)'s exceptions: kernels held to 1 block per H100 SM, with the reason; the block must then
# have 8 warps, as FlashAttention-2's own backward at d = 128 runs (one block of 8 warps per SM, its
# shared memory about 144 KB). (The head kernels' <2> instances, for groups of 17 to 32 heads, hold
# per entry of their tile pair every head's S1 (hi and lo) and P2 or dP2: their tiles have 16 keys,
# not 32, so that 2 blocks fit.)
ONE_BLOCK = {
    # The every-step backward's dQ and dK/dV hold per tile pair the 16 heads' S1, P, dS planes (hi
    # and lo) on the tile grown by both convolutions' halos (26 x 29 entries with 6 x 11 kernels, 67
    # KB) and their dP2, dP1 planes (26 x 42, one part, 58 KB), with a head's stage and Z: 187-214 KB.
    # The planes alone are over the 113 KB two blocks get, and they cannot share space: dS2 = P (dP -
    # D) reads P and dP1 together, and the head mixing needs all 16 heads of an entry at once. So one
    # block per SM, of 8 warps (FE_BWD_THREADS), as FlashAttention-2's backward.
    'k_fa_every_dq': "16 heads' planes on a tile grown by both convolutions' halos",
    'k_fa_every_dkdv': "16 heads' planes on a tile grown by both convolutions' halos",
    'k_fa_every_dqkv': "16 heads' planes on a tile grown by both convolutions' halos",
    # The cluster forward has a warp per head (O of a head, 16 rows by d, in its registers: two
    # heads a warp would spill at d = 128) and 8 heads a block, so that 16 heads take a cluster of
    # 2 blocks: each block sends its S1 and P to one other, a third of the distributed shared
    # memory traffic of 4 blocks of 4 heads, which bounds the kernel. 8 warps of 160-200 registers
    # are more than half the SM's 64 K, so one block of 8 warps per SM.
    'k_fa_head_cl_forward_t': "a warp per head, 8 heads a block (a cluster of 2 for 16)",
    # The head dK/dV on clusters keeps a head's dK and dV per warp in registers (dp floats a lane at
    # dp 128) and a block's 8 heads' k, v and q, dO stages (70 KB each at d = 128) in shared memory:
    # one block of 8 warps (FHD_THREADS) per SM, a head per warp, so that the exchanges' stores to
    # the cluster's other blocks are half those of 4-head blocks.
    'k_fa_head_cl_dkdv_t': "8 heads' dK, dV in registers and their k, v, q, dO staged",
    # The head dQ on clusters keeps a head's dq per warp in registers and the block's 8 heads' q and
    # dO resident with their k, v stages (70 KB each at d = 128), as the dK/dV kernel: one block of
    # 8 warps (FHC_THREADS) per SM.
    'k_fa_head_cl_dq_t': "8 heads' dq in registers, their q, dO resident and k, v staged",
}

# SASS opcodes (before the first '.') counted per kernel, by class.
CLASSES = [('HMMA', {'HMMA'}), ('LDSM', {'LDSM'}), ('LDS', {'LDS'}), ('STS', {'STS'}),
           ('LDGSTS', {'LDGSTS'}), ('LDG', {'LDG'}), ('STG', {'STG'}), ('LD/ST', {'LD', 'ST'}),
           ('atom', {'ATOM', 'ATOMG', 'ATOMS', 'RED', 'REDG'})]
# Generic loads and stores apart too (not in the tables): a cluster kernel may have the stores.
GENERIC = {'LD': 'generic LD', 'ST': 'generic ST'}


def is_cluster_kernel(name):
    return re.search(r'_cl(_|<|$)', name.split('(')[0]) is not None


def tool_dir(arg):
    return arg or os.path.join(ROOT, '.cuda-tools', 'bin')


def find_cuobjdump(tools):
    exe = os.path.join(tools, 'cuobjdump')
    return exe if os.access(exe, os.X_OK) else None


def compile_program(nvcc, src, archs, out, root):
    """nvcc src into the program out for every arch; returns ptxas's report (stderr)."""
    cmd = [nvcc] + NVCC_FLAGS + ['-Xptxas', '-v', src, '-o', out, '-lcublas']
    for a in archs:
        cmd += ['-gencode', 'arch=compute_%s,code=sm_%s' % (a, a)]
    r = subprocess.run(cmd, cwd=root, capture_output=True, text=True)
    if r.returncode != 0:
        sys.exit('check_sass: %s failed:\n%s' % (' '.join(cmd), r.stderr[-4000:]))
    return r.stderr


def parse_ptxas(text):
    """{(arch, mangled name): {regs, static, stack, spill_st, spill_ld}} of the entry functions."""
    out, cur = {}, None
    for line in text.splitlines():
        m = re.search(r"Compiling entry function '(\S+)' for 'sm_(\d+)'", line)
        if m:
            cur = out.setdefault((m.group(2), m.group(1)), dict(regs=0, static=0, stack=0, spill_st=0, spill_ld=0))
            continue
        if 'Compiling' in line and 'function' in line:
            cur = None  # a device function's report, not a kernel's
        if cur is None:
            continue
        m = re.search(r'(\d+) bytes stack frame, (\d+) bytes spill stores, (\d+) bytes spill loads', line)
        if m:
            cur['stack'], cur['spill_st'], cur['spill_ld'] = (int(x) for x in m.groups())
        m = re.search(r'Used (\d+) registers', line)
        if m:
            cur['regs'] = int(m.group(1))
            s = re.search(r'(\d+) bytes smem', line)
            cur['static'] = int(s.group(1)) if s else 0
    return out


def parse_sass(text):
    """{(arch, mangled name): Counter of CLASSES} from cuobjdump -sass."""
    out, arch, cur = {}, None, None
    opclass = {op: c for c, ops in CLASSES for op in ops}
    for line in text.splitlines():
        m = re.match(r'\s*arch = sm_(\d+)', line)
        if m:
            arch = m.group(1)
            continue
        m = re.match(r'\s*Function : (\S+)', line)
        if m:
            cur = out.setdefault((arch, m.group(1)), Counter())
            continue
        m = re.match(r'\s*/\*[0-9a-f]{4,}\*/\s+(?:@!?U?P[0-9T]+\s+)?([A-Z0-9_]+)', line)
        op = m.group(1).split('.')[0] if m else None
        if cur is not None and op in opclass:
            cur[opclass[op]] += 1
        if cur is not None and op in GENERIC:
            cur[GENERIC[op]] += 1
    return out


def demangle(names):
    """Each mangled name as `kernel<template args>`: c++filt's without namespace, return type, parameters."""
    try:
        r = subprocess.run(['c++filt'], input='\n'.join(names), capture_output=True, text=True, check=True)
        plain = r.stdout.splitlines()
    except (OSError, subprocess.CalledProcessError):
        sys.exit('check_sass: c++filt (binutils) failed: the kernels\' names cannot be read')
    out = {}
    for n, p in zip(names, plain):
        p = p.replace('(anonymous namespace)::', '')
        p = re.sub(r'^void ', '', p)
        depth, cut = 0, len(p)
        for i, ch in enumerate(p):  # the parameter list: the first '(' outside template arguments
            depth += ch == '<'
            depth -= ch == '>'
            if ch == '(' and depth == 0:
                cut = i
                break
        out[n] = p[:cut]
    return out


def launches(program):
    """{kernel: (threads, largest dynamic shared bytes, its case)} from the program's output."""
    r = subprocess.run([program], capture_output=True, text=True)
    if r.returncode != 0:
        sys.exit('check_sass: %s failed (status %d): %s' % (program, r.returncode, r.stderr[-2000:]))
    out = {}
    for line in r.stdout.splitlines():
        f = line.split()
        if len(f) < 3:
            sys.exit('check_sass: %s: a line not "kernel threads bytes [case]": %r' % (program, line))
        k, threads, nbytes = f[0], int(f[1]), int(f[2])
        if k not in out or nbytes > out[k][1]:
            out[k] = (threads, nbytes, f[3] if len(f) > 3 else '')
    return out


def blocks_per_sm(regs, smem, threads, dev):
    """Blocks of `threads` threads with `regs` registers each and `smem` shared bytes that fit on an SM."""
    warps = -(-threads // 32)
    if smem > dev['smem_block']:
        return 0
    per_warp = -(-regs * 32 // REG_UNIT) * REG_UNIT
    by_regs = dev['regs'] // per_warp // warps
    by_smem = dev['smem_sm'] // (-(-(smem + RESERVED) // SMEM_UNIT) * SMEM_UNIT)
    return min(by_regs, by_smem, dev['warps'] // warps, dev['blocks'])


def kernel_rows(ptx, sass, launch, names):
    """A row per (arch, kernel): its report, counts, launch and blocks per SM."""
    rows = []
    for (arch, mangled), rep in sorted(ptx.items(), key=lambda x: (x[0][0], names[x[0][1]])):
        row = dict(rep, arch=arch, name=names[mangled], counts=sass.get((arch, mangled), Counter()))
        row['counted'] = (arch, mangled) in sass
        lk = launch.get(row['name'].split('<')[0] if row['name'] not in launch else row['name'])
        row['threads'], row['dynamic'], row['case'] = lk if lk else (None, 0, '')
        row['blocks'] = (blocks_per_sm(rep['regs'], rep['static'] + row['dynamic'], row['threads'], DEVICES[arch])
                         if lk else None)
        rows.append(row)
    return rows


def violations(row, prefix):
    """The rules the row's kernel breaks."""
    bad = []
    if row['spill_st'] or row['spill_ld']:
        bad.append('(a) spills: %d bytes stored, %d loaded' % (row['spill_st'], row['spill_ld']))
    if not row['name'].startswith(prefix):
        return bad
    if re.search(r'_cl(_|<|$)', row['name']) and int(row['arch']) < 90:
        return bad  # a cluster kernel's code before sm_90 is a trap (attn/cluster_ptx.cuh)
    c = row['counts']
    if not row['counted']:
        bad.append('(b) no SASS found for it')
    if is_cluster_kernel(row['name']) and c['generic LD']:
        bad.append('(b) %d generic LD in a cluster kernel (shared memory through a pointer of unknown space, or a '
                   'pull from another block: its kernels push)' % c['generic LD'])
    elif not is_cluster_kernel(row['name']) and c['LD/ST']:
        bad.append('(b) %d generic LD/ST (shared memory through a pointer of unknown space)' % c['LD/ST'])
    for need in ('HMMA', 'LDSM'):
        if not c[need]:
            bad.append('(b) no %s' % need)
    if row['threads'] is None:
        bad.append('(c) its launch (threads, dynamic shared bytes) is not printed by the program')
    elif row['arch'] == RULE_ARCH and row['name'].split('<')[0] in ONE_BLOCK:  # either instance of a template
        if row['blocks'] < 1:
            bad.append('(c) it does not fit on an %s SM' % DEVICES[RULE_ARCH]['name'])
        elif row['blocks'] * -(-row['threads'] // 32) < 8:
            bad.append('(c) %d block of %d threads per SM on an %s: fewer than 8 warps' %
                       (row['blocks'], row['threads'], DEVICES[RULE_ARCH]['name']))
    elif row['arch'] == RULE_ARCH and (row['blocks'] < 2 or row['blocks'] * -(-row['threads'] // 32) < 8):
        bad.append('(c) %d blocks of %d threads per SM on an %s (%d registers, %d shared bytes): '
                   'fewer than 2 blocks or 8 warps' % (row['blocks'], row['threads'], DEVICES[RULE_ARCH]['name'],
                                                       row['regs'], row['static'] + row['dynamic']))
    return bad


def table(rows, arch):
    """A markdown table of the arch's kernels."""
    dev = DEVICES[arch]
    head = ['kernel', 'threads', 'regs', 'smem static + dynamic (B)', 'spills st/ld (B)', 'stack (B)'] + \
        [c for c, _ in CLASSES] + ['blocks/SM (%s)' % dev['name']]
    lines = ['| ' + ' | '.join(head) + ' |', '|' + '---|' * len(head)]
    for r in rows:
        if r['arch'] != arch:
            continue
        cells = ['`%s`' % r['name'], str(r['threads'] or '-'), str(r['regs']),
                 '%d + %d' % (r['static'], r['dynamic']) + (' (%s)' % r['case'] if r['case'] else ''),
                 '%d/%d' % (r['spill_st'], r['spill_ld']), str(r['stack'])]
        cells += [str(r['counts'][c]) for c, _ in CLASSES]
        cells.append('-' if r['blocks'] is None else str(r['blocks']))
        lines.append('| ' + ' | '.join(cells) + ' |')
    return '\n'.join(lines)


def check(nvcc, cuobjdump, src, archs, prefix, root, quiet=False):
    """Compiles and reads src (relative to root); returns (rows, {kernel@arch: violations})."""
    with tempfile.TemporaryDirectory() as tmp:
        prog = os.path.join(tmp, 'prog')
        ptx = parse_ptxas(compile_program(nvcc, src, archs, prog, root))
        r = subprocess.run([cuobjdump, '-sass', prog], capture_output=True, text=True)
        if r.returncode != 0:
            sys.exit('check_sass: cuobjdump -sass failed: %s' % r.stderr[-2000:])
        sass = parse_sass(r.stdout)
        rows = kernel_rows(ptx, sass, launches(prog), demangle(sorted({m for _, m in ptx})))
    bad = {}
    for row in rows:
        v = violations(row, prefix)
        if v:
            bad['%s@sm_%s' % (row['name'], row['arch'])] = v
    return rows, bad


def report(bad):
    for k, vs in sorted(bad.items()):
        for v in vs:
            print('check_sass: %s: %s' % (k, v))


def self_test(nvcc, cuobjdump, archs, prefix):
    """The probe's good and cluster kernels pass and its bad one breaks rule (b); each mutation breaks its
    kernel's rules."""
    ok = True
    _, bad = check(nvcc, cuobjdump, PROBE, archs, prefix, ROOT)
    for a in archs:
        good, worse = bad.get('k_fa_probe_good@sm_%s' % a), bad.get('k_fa_probe_bad@sm_%s' % a, [])
        cl = bad.get('k_fa_probe_cl@sm_%s' % a)
        print('self-test sm_%s: k_fa_probe_good %s; k_fa_probe_cl %s; k_fa_probe_bad %s' %
              (a, 'passes' if not good else 'FAILS: ' + '; '.join(good), 'passes' if not cl else 'FAILS: ' + '; '.join(cl),
               'flagged: ' + '; '.join(worse) if any('generic' in v for v in worse) else 'NOT FLAGGED'))
        ok &= not good and not cl and any('generic' in v for v in worse)
    for what, path, text, becomes, kernel in MUTATIONS:
        with tempfile.TemporaryDirectory() as tmp:
            for d in ('src', 'include', os.path.dirname(PROBE), os.path.dirname(LAUNCH)):
                if not os.path.exists(os.path.join(tmp, d)):
                    shutil.copytree(os.path.join(ROOT, d), os.path.join(tmp, d))
            with open(os.path.join(tmp, path)) as f:
                s = f.read()
            if s.count(text) != 1:
                print('self-test: mutation %r: its text is in %s %d times, not once' % (what, path, s.count(text)))
                ok = False
                continue
            with open(os.path.join(tmp, path), 'w') as f:
                f.write(s.replace(text, becomes))
            _, bad = check(nvcc, cuobjdump, PROBE if path == PROBE else LAUNCH, archs, prefix, tmp)
        caught = [k for k in bad if k.startswith(kernel + '@')]
        print('self-test: mutation %r: %s' % (what, 'caught: ' + '; '.join(bad[caught[0]]) if caught else 'MISSED'))
        ok &= bool(caught)
    return ok


def find_nvcc(arg):
    if arg:
        return arg
    for p in [shutil.which('nvcc'), '/usr/local/cuda/bin/nvcc']:
        if p and os.access(p, os.X_OK):
            return p
    return None


def missing(why):
    """A tool is not there: skipped (77), or a failure where CI installs it (CI=true)."""
    if os.environ.get('CI') == 'true':
        print('check_sass: %s, and CI=true: failing (scripts/setup.sh installs it in CI)' % why)
        return 1
    print('check_sass: skipped: %s' % why)
    return 77


def main():
    ap = argparse.ArgumentParser(description=__doc__.split('\n')[0], epilog=__doc__.split('\n', 2)[2],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument('--source', default=LAUNCH, help='the program to compile, relative to the root (default %(default)s)')
    ap.add_argument('--arch', default='80,90', help='compute capabilities, comma-separated (default %(default)s)')
    ap.add_argument('--prefix', default='k_fa_', help='the tensor-core kernels\' name prefix (default %(default)s)')
    ap.add_argument('--require-prefix', action='store_true', help='fail when no kernel has the prefix')
    ap.add_argument('--markdown', help='also write the tables to this file')
    ap.add_argument('--nvcc', help='nvcc (default: on PATH, else /usr/local/cuda/bin/nvcc)')
    ap.add_argument('--tools', help='the folder of cuobjdump (default: .cuda-tools/bin, scripts/cuda_tools.sh)')
    ap.add_argument('--self-test', action='store_true', help='the checker against its probe and mutations')
    a = ap.parse_args()
    archs = [x.strip() for x in a.arch.split(',') if x.strip()]
    for x in archs:
        if x not in DEVICES:
            ap.error('--arch %s: known are %s' % (x, ', '.join(sorted(DEVICES))))
    if a.nvcc and not os.access(a.nvcc, os.X_OK):
        ap.error('--nvcc %s: not an executable' % a.nvcc)
    nvcc = find_nvcc(a.nvcc)
    if not nvcc:
        return missing('no nvcc (CUDA toolkit) found')
    cuobjdump = find_cuobjdump(tool_dir(a.tools))
    if not cuobjdump:
        return missing('no cuobjdump in %s (scripts/cuda_tools.sh puts it there from PyPI)' % tool_dir(a.tools))
    if a.self_test:
        return 0 if self_test(nvcc, cuobjdump, archs, a.prefix) else 1
    rows, bad = check(nvcc, cuobjdump, a.source, archs, a.prefix, ROOT)
    text = '\n\n'.join('sm_%s:\n\n%s' % (x, table(rows, x)) for x in archs)
    print(text)
    if a.markdown:
        with open(a.markdown, 'w') as f:
            f.write(text + '\n')
    selected = {r['name'] for r in rows if r['name'].startswith(a.prefix)}
    if a.require_prefix and not selected:
        bad['(all)'] = ['no %s kernels in %s (--require-prefix)' % (a.prefix, a.source)]
    report(bad)
    print('check_sass: %d tensor-core kernels (%s*), %s' % (len(selected), a.prefix,
                                                            'rules broken' if bad else 'every rule kept'))
    return 1 if bad else 0


if __name__ == '__main__':
    sys.exit(main())
