#!/usr/bin/env python3
"""The sources' groups call down only: train -> models -> worker -> predict ->
store -> security -> counts -> core (src/<group>/; the top folder's files are
above them all).  A file calls a function when it names one that another
file defines without `static` (PostgreSQL style: the name at the start of a
line, followed by its arguments).  Prints every call that goes up a group,
and every cycle among files (files that call one another, directly or round
a circle); exits 1 if there is any.
Usage: test/check-layers.py [SRC_DIR]"""
import os
import re
import sys

ORDER = ['(top)', 'train', 'models', 'worker', 'predict', 'store', 'security', 'counts', 'core']
src = sys.argv[1] if len(sys.argv) > 1 else 'src'
files = sorted(os.path.join(d, f) for d, _, fs in os.walk(src) for f in fs if f.endswith('.c'))
strip = re.compile(r'/\*.*?\*/|//[^\n]*|"(?:\\.|[^"\\\n])*"|\'(?:\\.|[^\'\\\n])*\'', re.S)
text = {f: strip.sub(' ', open(f, errors='replace').read()) for f in files}


def group(f):
    parts = os.path.relpath(f, src).split(os.sep)
    return parts[0] if len(parts) > 1 else '(top)'


defines = {}
for f in files:
    lines = text[f].split('\n')
    for i, line in enumerate(lines):
        m = re.match(r'([A-Za-z_]\w*)\(', line)
        if m and i > 0 and lines[i - 1].strip() and not lines[i - 1].startswith(('static', '#')) \
                and not lines[i - 1].rstrip().endswith((';', '}', ',')):
            defines.setdefault(m.group(1), f)
bad = 0
calls = {}
for f in files:
    for name in set(re.findall(r'\b[A-Za-z_]\w*\b', text[f])):
        g = defines.get(name)
        if g is None or g == f:
            continue
        calls.setdefault((f, g), set()).add(name)
        if group(f) not in ORDER or group(g) not in ORDER:
            print(f'unknown group: {f} -> {g}')
            bad += 1
        elif ORDER.index(group(f)) > ORDER.index(group(g)):
            print(f'up: {f} ({group(f)}) -> {g} ({group(g)}): {name}')
            bad += 1
# files that call one another, directly or round a circle (Tarjan's
# strongly connected components)
succ = {f: sorted(g for (a, g) in calls if a == f) for f in files}
index, low, stack, on, counter = {}, {}, [], set(), [0]
sys.setrecursionlimit(10000)


def visit(v):
    global bad
    index[v] = low[v] = counter[0]
    counter[0] += 1
    stack.append(v)
    on.add(v)
    for w in succ[v]:
        if w not in index:
            visit(w)
            low[v] = min(low[v], low[w])
        elif w in on:
            low[v] = min(low[v], index[w])
    if low[v] == index[v]:
        comp = []
        while True:
            w = stack.pop()
            on.discard(w)
            comp.append(w)
            if w == v:
                break
        if len(comp) > 1:
            print('cycle: ' + ' '.join(sorted(comp)))
            for a in sorted(comp):
                for b in sorted(comp):
                    if (a, b) in calls:
                        print(f'  {a} -> {b}: {", ".join(sorted(calls[(a, b)])[:4])}')
            bad += 1


for f in files:
    if f not in index:
        visit(f)
print(f'{len(files)} files, {len(defines)} shared functions, {len(calls)} file-to-file calls, '
      f'{bad} against the layering')
sys.exit(1 if bad else 0)
