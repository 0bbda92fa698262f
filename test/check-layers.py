#!/usr/bin/env python3
"""The sources' groups call down only: train -> models -> worker -> predict ->
store -> security -> counts -> core (src/<group>/; the top folder's files are
above them all), and no files call one another, directly or round a circle.

Read from the objects the build made (run it after `make`): an object calls
another when it needs (nm: undefined) a function the other defines (nm: text),
so a call from an inline function of a header counts where it is compiled in,
and nothing depends on how a definition is written.  Settings and other
variables are data, not calls: the top folder's settings are read everywhere.
Prints every call that goes up a group and every cycle; exits 1 if there is
any, or if an object is missing (not built).
Usage: test/check-layers.py [SRC_DIR]"""
import os
import subprocess
import sys

ORDER = ['(top)', 'train', 'models', 'worker', 'predict', 'store', 'security', 'counts', 'core']
src = sys.argv[1] if len(sys.argv) > 1 else 'src'
sources = sorted(os.path.join(d, f) for d, _, fs in os.walk(src) for f in fs if f.endswith('.c'))
missing = [f for f in sources if not os.path.exists(f[:-2] + '.o')]
if missing:
    print('not built: ' + ' '.join(missing))
    sys.exit(1)


def group(f):
    parts = os.path.relpath(f, src).split(os.sep)
    return parts[0] if len(parts) > 1 else '(top)'


defines, needs = {}, {}
for f in sources:
    out = subprocess.run(['nm', f[:-2] + '.o'], capture_output=True, text=True, check=True).stdout
    needs[f] = set()
    for line in out.splitlines():
        parts = line.split()
        if len(parts) == 3 and parts[1] == 'T':
            defines[parts[2]] = f
        elif len(parts) == 2 and parts[0] == 'U':
            needs[f].add(parts[1])
bad = 0
calls = {}
for f in sources:
    for name in needs[f]:
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
succ = {f: sorted(g for (a, g) in calls if a == f) for f in sources}
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


for f in sources:
    if f not in index:
        visit(f)
print(f'{len(sources)} objects, {len(defines)} functions, {len(calls)} object-to-object calls, '
      f'{bad} against the layering')
sys.exit(1 if bad else 0)
