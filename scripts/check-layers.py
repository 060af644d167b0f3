#!/usr/bin/env python3
"""Checks the module order of docs/architecture.md over lib/, and the lock
discipline: every function named *_locked asserts its lock.

A module may use (include a header of, or call a function defined in) only
the modules below it that lib/meson.build lists for it in `accel_layers`, the
one place the order is written. Every arrow that breaks the order is printed
in the form

    lib/mem/pool.c -> stream/stream_impl.h: mem may not use stream
    lib/mem/pool.c calls accel_stream_submit (stream): mem may not use stream

and the exit status is 1; 0 when the order holds.

usage: check-layers.py [--root DIR]   (DIR: the source tree, default: ..)
"""
import argparse
import ast
import os
import re
import sys

INCLUDE_RE = re.compile(r'^\s*#\s*include\s+"([^"]+)"', re.M)
# A function definition at the start of a line: return type, name, '('.
DEFINE_RE = re.compile(
    r'^(?!static\b)(?:[A-Za-z_][\w \t\*]*?[\s\*])(accel_\w+)\s*\([^;{]*\)\s*\{',
    re.M)
CALL_RE = re.compile(r'\b(accel_\w+)\s*\(')
# A function named *_locked and the first statements of its body.
LOCKED_RE = re.compile(
    r'^[A-Za-z_][\w \t\*]*?[\s\*](\w+_locked)\s*\([^;{]*\)\s*\{((?:[^}]|\n){0,400})',
    re.M)
COMMENT_RE = re.compile(r'//[^\n]*|/\*.*?\*/', re.S)
STRING_RE = re.compile(r'"(?:\\.|[^"\\\n])*"')


# Headers a module may not include although their module is below it: the
# tracer takes plain numbers (kinds, bytes, ids), never the driver
# interface's commands or descriptors (docs/architecture.md).
FORBIDDEN_HEADERS = {
    'trace': ('core/driver', 'the trace hooks take plain numbers'),
}


def read_layers(root):
    """Parses `accel_layers = [[name, [uses...]], ...]` from lib/meson.build."""
    text = open(os.path.join(root, 'lib', 'meson.build')).read()
    m = re.search(r'accel_layers\s*=\s*(\[.*?\n\])', text, re.S)
    if m is None:
        sys.exit('check-layers: no accel_layers list in lib/meson.build')
    body = re.sub(r'#[^\n]*', '', m.group(1))
    layers = ast.literal_eval(body)
    return {name: set(uses) for name, uses in layers}


def module_of(rel, layers):
    """lib/<module>/... -> module name (drv/<backend> for backends)."""
    parts = rel.split('/')
    if len(parts) < 3 or parts[0] != 'lib':
        return None
    if parts[1] == 'drv' and len(parts) >= 4:
        return 'drv/' + parts[2]
    return parts[1] if parts[1] in layers else None


def header_module(path, layers):
    parts = path.split('/')
    if parts[0] == 'drv' and len(parts) >= 3:
        return 'drv/' + parts[1]
    return parts[0] if parts[0] in layers else None


def source_files(root):
    for dirpath, _, names in os.walk(os.path.join(root, 'lib')):
        for n in sorted(names):
            if n.endswith(('.c', '.h')):
                full = os.path.join(dirpath, n)
                yield os.path.relpath(full, root).replace(os.sep, '/'), full


def strip_comments(text):
    return COMMENT_RE.sub('', text)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    ap.add_argument('--root', default=os.path.join(
        os.path.dirname(os.path.abspath(__file__)), '..'))
    args = ap.parse_args()
    root = os.path.abspath(args.root)
    layers = read_layers(root)
    files = []
    defined = {}  # function -> module that defines it
    for rel, full in source_files(root):
        mod = module_of(rel, layers)
        if mod is None:
            continue
        text = strip_comments(open(full, errors='replace').read())
        code = STRING_RE.sub('""', text)
        files.append((rel, mod, text, code))
        if rel.endswith('.c'):
            for name in DEFINE_RE.findall(code):
                defined.setdefault(name, mod)
    problems = []
    for rel, mod, text, code in files:
        allowed = layers[mod] | {mod}
        for inc in INCLUDE_RE.findall(text):
            target = header_module(inc, layers)
            if target is not None and target not in allowed:
                problems.append('%s -> %s: %s may not use %s' %
                                (rel, inc, mod, target))
            deny = FORBIDDEN_HEADERS.get(mod)
            if deny is not None and inc.startswith(deny[0]):
                problems.append('%s -> %s: %s may not use the driver '
                                'interface (%s)' % (rel, inc, mod, deny[1]))
        for name in sorted(set(CALL_RE.findall(code))):
            target = defined.get(name)
            if target is not None and target not in allowed:
                problems.append('%s calls %s (%s): %s may not use %s' %
                                (rel, name, target, mod, target))
    # Lock discipline: a function that needs a lock held asserts it.
    for rel, mod, text, code in files:
        if not rel.endswith('.c'):
            continue
        for name, body in LOCKED_RE.findall(code):
            if 'ACCEL_ASSERT_HELD' not in body and \
                    'ACCEL_ASSERT_SPIN_HELD' not in body:
                problems.append('%s: %s does not assert its lock '
                                '(ACCEL_ASSERT_HELD, core/lock.h)' %
                                (rel, name))
    for p in problems:
        print(p)
    if problems:
        print('check-layers: %d arrow(s) against the module order' %
              len(problems))
        return 1
    print('check-layers: %d files in %d modules follow the order' %
          (len(files), len(layers)))
    return 0


if __name__ == '__main__':
    sys.exit(main())
