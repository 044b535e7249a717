#!/usr/bin/python3
"""Fails when the library's files call or include each other against the
layer table in doc/ARCHITECTURE.md.

    check_layers.py TABLE_MD OBJDIR SRCDIR

Two graphs are checked, each between source files:
- calls, from `nm` of the library's objects (OBJDIR/<path>.o): file A uses a
  symbol that file B defines;
- includes, from `#include "x.h"` lines (x.h belongs to x.c's file, or to
  the layer the table gives the header itself).
The table names folders (`shim/base/`); a file is of its folder's layer.
A file may use only files of its own layer or lower ones, and no two files
may reach each other (a circle, even inside one layer). Every library file
must appear in the table, so a new file has to be given its place."""

import os
import re
import subprocess
import sys


def read_table(md):
    """{file path: (layer number, layer name)} from the table whose header
    is | layer | name | files |."""
    layers, inside = {}, False
    for line in open(md, encoding="utf-8"):
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if cells[:3] == ["layer", "name", "files"]:
            inside = True
            continue
        if not inside:
            continue
        if not line.startswith("|"):
            break
        if len(cells) < 3 or not cells[0].isdigit():
            continue
        for f in cells[2].replace("`", "").split():
            layers[f] = (int(cells[0]), cells[1])
    return layers


def nm_symbols(obj):
    out = subprocess.run(["nm", obj], capture_output=True, text=True, check=True).stdout
    defined, used = set(), set()
    for line in out.splitlines():
        parts = line.split()
        if len(parts) == 2 and parts[0] == "U":
            used.add(parts[1])
        elif len(parts) == 3 and parts[1] in "TDBRVW" and parts[1].isupper():
            defined.add(parts[2])
    return defined, used


def interposed(sym):
    """The names the boundary defines for the program (curl_*, dlopen): a
    call to one of them from inside is a call to the real library."""
    return sym.startswith("curl_") or sym == "dlopen" or "_curl_easy_" in sym


def call_edges(files, objdir):
    owner, uses = {}, {}
    for f in files:
        if not f.endswith(".c"):
            continue
        obj = os.path.join(objdir, f[:-2] + ".o")
        if not os.path.exists(obj):
            sys.exit("check_layers: %s is missing (build first)" % obj)
        d, u = nm_symbols(obj)
        for s in d:
            if not interposed(s):
                owner[s] = f
        uses[f] = u
    edges = {}
    for f, u in uses.items():
        for s in u:
            g = owner.get(s)
            if g and g != f:
                edges.setdefault((f, g), set()).add(s)
    return edges


INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"')


def include_edges(files, srcdir):
    by_name = {}
    for f in files:
        by_name.setdefault(os.path.basename(f), f)
    edges = {}
    for f in files:
        if not (f.endswith(".c") or f.endswith(".h")):
            continue
        me = f[:-2] + ".c" if f.endswith(".h") and f[:-2] + ".c" in files else f
        for line in open(os.path.join(srcdir, f), encoding="utf-8"):
            m = INCLUDE.match(line)
            if not m:
                continue
            h = by_name.get(os.path.basename(m.group(1)))
            if not h:
                continue
            target = h[:-2] + ".c" if h[:-2] + ".c" in files else h
            if target != me:
                edges.setdefault((me, target), set()).add("#include " + m.group(1))
    return edges


def circles(edges):
    """Strongly connected components of more than one file (Tarjan)."""
    graph = {}
    for a, b in edges:
        graph.setdefault(a, set()).add(b)
        graph.setdefault(b, set())
    index, low, stack, on, out = {}, {}, [], set(), []
    counter = [0]

    def visit(v):
        work = [(v, iter(sorted(graph[v])))]
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        while work:
            node, it = work[-1]
            nxt = next(it, None)
            if nxt is None:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[node])
                if low[node] == index[node]:
                    comp = []
                    while True:
                        w = stack.pop()
                        on.discard(w)
                        comp.append(w)
                        if w == node:
                            break
                    if len(comp) > 1:
                        out.append(sorted(comp))
            elif nxt not in index:
                index[nxt] = low[nxt] = counter[0]
                counter[0] += 1
                stack.append(nxt)
                on.add(nxt)
                work.append((nxt, iter(sorted(graph[nxt]))))
            elif nxt in on:
                low[node] = min(low[node], index[nxt])

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return out


def layer_of(layers, f):
    """A file's layer: its own row, else its folder's (a row naming a
    folder, `shim/x/`, holds every file below it but those of a deeper
    folder with a row of its own)."""
    if f in layers:
        return layers[f]
    if f.endswith(".h") and f[:-2] + ".c" in layers:
        return layers[f[:-2] + ".c"]
    d = os.path.dirname(f)
    while d:
        if d + "/" in layers:
            return layers[d + "/"]
        d = os.path.dirname(d)
    return None


def main():
    if len(sys.argv) != 4:
        sys.exit(__doc__)
    md, objdir, srcdir = sys.argv[1:]
    layers = read_table(md)
    if not layers:
        sys.exit("check_layers: no layer table in %s" % md)
    files = set()
    for root in ("shim",):
        for dirpath, _, names in os.walk(os.path.join(srcdir, root)):
            for n in names:
                if n.endswith((".c", ".h")):
                    files.add(os.path.relpath(os.path.join(dirpath, n), srcdir))
    bad = []
    for f in sorted(files):
        if layer_of(layers, f) is None:
            bad.append("%s: not in the layer table of %s" % (f, md))
    for kind, edges in (("calls", call_edges(files, objdir)),
                        ("includes", include_edges(files, srcdir))):
        for (a, b), why in sorted(edges.items()):
            la, lb = layer_of(layers, a), layer_of(layers, b)
            if la and lb and lb[0] > la[0]:
                bad.append("%s (layer %d %s) %s %s (layer %d %s): %s" % (
                    a, la[0], la[1], kind, b, lb[0], lb[1], ", ".join(sorted(why)[:4])))
        for comp in circles(edges):
            bad.append("circle (%s): %s" % (kind, " <-> ".join(comp)))
    for line in bad:
        print("layers: " + line)
    if bad:
        print("layers: %d violation(s); the table is in %s" % (len(bad), md))
        return 1
    print("layers: ok (%d files, no upward arrows, no circles)" % len(files))
    return 0


if __name__ == "__main__":
    sys.exit(main())
