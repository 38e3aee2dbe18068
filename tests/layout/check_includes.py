#!/usr/bin/env python3
"""The include graph of deltac's C++ sources: no cycle, no upward include.

A node is a file stem: a header and its source (Foo.h + Foo.cpp) are one
node, so `Foo.cpp` including `Bar.h` while `Bar.cpp` includes `Foo.h` is a
cycle even though no header includes itself. An edge is a quoted
`#include "path"` naming a file of the tree (TableGen'd `.inc` files and
system headers are not nodes). The rules:

  1. the graph has no cycle;
  2. nothing in dialect/ or passes/ includes anything in codegen/gpu/
     (the target-independent half never reaches into the NVIDIA back end);
  3. nothing in dialect/ includes passes/, codegen/ or tools/.

Usage: check_includes.py ROOT [DIR ...]   (default DIRs: dialect passes
codegen tools). Prints one line per violation and exits 1, or prints a
summary and exits 0.
"""
import os
import re
import sys

INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"', re.M)
SOURCE_EXTS = ('.h', '.cpp')


def node_of(path):
    return os.path.splitext(path)[0]


def collect(root, dirs):
    files = []
    for d in dirs:
        for base, _, names in os.walk(os.path.join(root, d)):
            for n in sorted(names):
                if n.endswith(SOURCE_EXTS):
                    files.append(os.path.relpath(os.path.join(base, n), root))
    return sorted(files)


def build_graph(root, files):
    known = set(files)
    edges = {}
    for f in files:
        with open(os.path.join(root, f), encoding='utf-8') as fh:
            text = fh.read()
        src = node_of(f)
        edges.setdefault(src, set())
        for inc in INCLUDE.findall(text):
            if inc in known and node_of(inc) != src:
                edges[src].add((node_of(inc), f, inc))
    return edges


def cycles(edges):
    """Strongly connected components with more than one node (Tarjan)."""
    index, low, stack, on, out = {}, {}, [], set(), []
    counter = [0]

    def visit(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w, _, _ in sorted(edges.get(v, ())):
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
                out.append(sorted(comp))

    sys.setrecursionlimit(10000)
    for v in sorted(edges):
        if v not in index:
            visit(v)
    return out


def main(argv):
    if len(argv) < 2:
        print(__doc__)
        return 2
    root = argv[1]
    dirs = argv[2:] or ['dialect', 'passes', 'codegen', 'tools']
    files = collect(root, dirs)
    edges = build_graph(root, files)
    problems = []
    for comp in cycles(edges):
        members = set(comp)
        links = sorted('%s -> %s' % (f, inc) for v in comp
                       for w, f, inc in edges[v] if w in members)
        problems.append('include cycle among %s: %s' %
                        (', '.join(comp), '; '.join(links)))
    for v, outs in sorted(edges.items()):
        for w, f, inc in sorted(outs):
            if v.startswith(('dialect/', 'passes/')) and w.startswith('codegen/gpu/'):
                problems.append('%s includes %s: the target-independent half '
                                'must not include codegen/gpu/' % (f, inc))
            if v.startswith('dialect/') and w.startswith(('passes/', 'codegen/', 'tools/')):
                problems.append('%s includes %s: the dialect is the bottom layer'
                                % (f, inc))
    for p in problems:
        print('error: ' + p)
    if problems:
        print('include graph: %d problem(s)' % len(problems))
        return 1
    n_edges = sum(len(o) for o in edges.values())
    print('include graph: %d nodes, %d edges, no cycle, no upward include'
          % (len(edges), n_edges))
    return 0


if __name__ == '__main__':
    sys.exit(main(sys.argv))
