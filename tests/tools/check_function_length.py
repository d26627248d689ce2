#!/usr/bin/env python3
"""The function-length rule: no C, C++ or CUDA function over 80 lines, CUDA __global__ kernels aside.

    python3 tests/tools/check_function_length.py [--max N] [--root DIR] [FILE ...]
    python3 tests/tools/check_function_length.py --self-test

Without FILE, checks the tracked sources (git ls-files) of src, cli, bench, tests, examples,
include and python under --root (default: the repository holding this script). A function's
length is its lines from the first line of its signature to its closing brace. Prints each
offender as `file:line name (N lines)` and exits 1 if there is one. CTest runs it
(test_function_length) and its --self-test (test_function_length_self).

A heuristic, not a parser: comments, string and character literals and preprocessor lines are
blanked first (keeping the line count), then the braces are counted. At file scope (or inside a
namespace or extern "C" block) a `{` whose header has a `(` and is not an initializer (`= {`) or a
struct/enum/union opens a function. A kernel (`__global__` in its header) is skipped: a kernel's
body is one thread's whole program, and splitting it into device functions hides the memory
traffic and synchronization a reader must see at once.
"""
import argparse
import os
import re
import subprocess
import sys
import tempfile

DIRS = ('src', 'cli', 'bench', 'tests', 'examples', 'include', 'python')
EXTS = ('.c', '.h', '.cu', '.cuh', '.cpp', '.hpp', '.cc')


def blank(text):
    """text with comments, literals and preprocessor lines emptied, newlines kept."""
    keep_lines = lambda m: '\n' * m.group(0).count('\n')
    text = re.sub(r'/\*.*?\*/', keep_lines, text, flags=re.S)
    text = re.sub(r'//[^\n]*', '', text)
    text = re.sub(r'"(\\.|[^"\\\n])*"', '""', text)
    text = re.sub(r"'(\\.|[^'\\\n])*'", "''", text)
    text = re.sub(r'^\s*#[^\n]*(\\\n[^\n]*)*', keep_lines, text, flags=re.M)
    return text


def function_name(header):
    """The identifier before the parameter list of a function header."""
    m = re.search(r'([A-Za-z_~][\w:~]*)\s*\(', header)
    return m.group(1) if m else header.split('(')[0].strip()


def opens_function(header):
    if '(' not in header or re.search(r'=\s*$', header):
        return False
    return not re.match(r'^(typedef\s+)?(struct|enum|union|class)\b[^(]*$', header)


def functions(text):
    """(first line, line count, name, header) of each top-level function body in text."""
    found = []
    depth = 0
    line = 1
    header = head = ''
    start = 0
    is_fn = False
    name = ''
    for ch in blank(text):
        if ch == '\n':
            line += 1
        if depth > 0:
            if ch == '{':
                depth += 1
            elif ch == '}':
                depth -= 1
                if depth == 0 and is_fn:
                    found.append((start, line - start + 1, name, head))
            continue
        if ch == '{':
            head = header.strip()
            header = ''
            if re.match(r'^(namespace\b|extern\s*""$)', head):
                continue  # its contents are at file scope
            is_fn = opens_function(head)
            start = line - head.count('\n')
            name = function_name(head) if is_fn else ''
            depth = 1
        elif ch in ';}':
            header = ''  # a `}` here closes a namespace or extern "C" block
        else:
            header += ch
    return found


def offenders(paths, max_lines):
    out = []
    for path in paths:
        with open(path, errors='replace') as f:
            text = f.read()
        for start, n, name, head in functions(text):
            if n > max_lines and '__global__' not in head:
                out.append((path, start, name, n))
    return out


def tracked_sources(root):
    try:
        listed = subprocess.run(['git', '-C', root, 'ls-files', '--', *DIRS], check=True,
                                capture_output=True, text=True).stdout.split('\n')
    except (OSError, subprocess.CalledProcessError):
        sys.exit(f'check_function_length: {root} is not a git checkout: name the files to check')
    return [os.path.join(root, p) for p in listed if p.endswith(EXTS)]


def function_text(name, lines, qualifier=''):
    """A function of exactly `lines` lines (signature to closing brace)."""
    body = ['    x += "{ not a brace }"[0]; /* nor { this */ // nor {'] * (lines - 2)
    return '\n'.join([f'{qualifier}static int {name}(int x) {{', *body, '}'])


def self_test():
    """80 lines pass; 81 fail; kernels, structs, initializers and namespaces are told apart."""
    parts = [
        '#include <stdio.h>',
        function_text('fits', 80),
        function_text('too_long', 81),
        function_text('kernel', 200, '__global__ '),
        'struct big {\n' + '    int a;\n' * 100 + '};',
        'static const int table[] = {\n' + '    1,\n' * 100 + '};',
        'namespace outer {\n' + function_text('inner_long', 90) + '\n}',
        'extern "C" {\n' + function_text('c_long', 82) + '\n}',
        '#define NOT_A_FUNCTION(x) { \\\n' + '    (x); \\\n' * 100 + '}',
    ]
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, 'case.cu')
        with open(path, 'w') as f:
            f.write('\n'.join(parts) + '\n')
        got = sorted((name, n) for _, _, name, n in offenders([path], 80))
        with open(path) as f:
            first = [i + 1 for i, l in enumerate(f) if l.startswith('static int too_long(')]
        lines = [start for _, start, name, _ in offenders([path], 80) if name == 'too_long']
    want = [('c_long', 82), ('inner_long', 90), ('too_long', 81)]
    if got != want or lines != first:
        print(f'check_function_length: self-test failed: found {got} at {lines}, want {want} at {first}')
        return 1
    print('check_function_length: self-test passed (80 lines pass, 81 fail, kernels skipped)')
    return 0


def main():
    ap = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    ap.add_argument('files', nargs='*')
    ap.add_argument('--max', type=int, default=80, help='longest function allowed (lines)')
    ap.add_argument('--root', default=os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
    ap.add_argument('--self-test', action='store_true')
    a = ap.parse_args()
    if a.self_test:
        return self_test()
    paths = a.files or tracked_sources(a.root)
    found = offenders(paths, a.max)
    for path, start, name, n in sorted(found):
        print(f'{os.path.relpath(path, a.root) if not a.files else path}:{start} {name} ({n} lines)')
    if found:
        print(f'check_function_length: {len(found)} function(s) over {a.max} lines: split them into named steps')
        return 1
    print(f'check_function_length: no function over {a.max} lines in {len(paths)} files')
    return 0


if __name__ == '__main__':
    sys.exit(main())
