#!/usr/bin/env python3
"""The runtime's layers, checked: every file of runtime/<layer>/ includes only files of its own
layer or of the layers below it (docs/design.md, "The runtime's layers"), so that the include
graph has no upward edge. Also prints each layer's files and lines, and which layers each one
includes (--map).

  tools/check_layers.py [--map]

Exit status 1 when an include points up, names no layer, or a source file sits outside them.
"""
import argparse
import collections
import pathlib
import re
import sys

RUNTIME = pathlib.Path(__file__).resolve().parent.parent / "runtime"
# Bottom first: a layer may include its own files and those of the layers before it.
LAYERS = ["core", "validate", "parallel", "dispatch", "execute", "conventions", "ops", "api"]
# Files outside the layers: linked only into ThreadSanitizer builds, including nothing of ours.
LOOSE = {"tsan_memory_hooks.cpp"}
INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"', re.M)
EXTERNAL = ("poolgen/", "kernel_table.inc", "backward_kernel_table.inc")


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--map", action="store_true", help="print the layers, their files and edges")
    args = ap.parse_args()
    rank = {name: k for k, name in enumerate(LAYERS)}
    problems, edges = [], collections.defaultdict(set)
    files = collections.defaultdict(list)
    for path in sorted(RUNTIME.rglob("*")):
        if path.suffix not in (".cpp", ".hpp"):
            continue
        rel = path.relative_to(RUNTIME)
        if len(rel.parts) == 1:
            if rel.name not in LOOSE:
                problems.append(f"{rel}: outside every layer ({', '.join(LAYERS)})")
            continue
        layer = rel.parts[0]
        if layer not in rank:
            problems.append(f"{rel}: {layer}/ is no layer ({', '.join(LAYERS)})")
            continue
        text = path.read_text()
        files[layer].append((rel, text.count("\n")))
        for included in INCLUDE.findall(text):
            if included.startswith(EXTERNAL):
                continue
            target = included.split("/")[0]
            if target not in rank or not (RUNTIME / included).exists():
                problems.append(f"{rel}: includes \"{included}\", no file of a layer")
            elif rank[target] > rank[layer]:
                problems.append(f"{rel}: includes \"{included}\": {layer} may not include "
                                f"{target}, a layer above it")
            elif target != layer:
                edges[layer].add(target)
    if args.map:
        for layer in LAYERS:
            lines = sum(n for _, n in files[layer])
            below = ", ".join(sorted(edges[layer], key=rank.get)) or "-"
            print(f"{layer:12} {len(files[layer]):2} files {lines:5} lines  includes {below}")
            for rel, n in files[layer]:
                print(f"    {str(rel):40} {n:5}")
    for p in problems:
        print("check_layers: " + p)
    print(f"check_layers: {sum(len(v) for v in files.values())} files in {len(LAYERS)} layers, "
          f"{len(problems)} problems")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
