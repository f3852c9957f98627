#!/usr/bin/env python3
"""The layering of docs/design.md holds in src/.

1. Each folder of src/ includes headers only from its own folder and the folders listed above it
   in the design's table of layers (the rows naming `src/<folder>`, lowest first).
2. The modules above the backend (src/layer, src/weights, src/moe, src/comm) reach the backend's
   table only through src/backend/ops.h: none includes backend/backend.h or touches ctx->ops.

usage: test_layering.py [REPO_ROOT]   (default: two levels above this file)
Exit status 0 when both hold, 1 with every offending line listed otherwise."""
import os
import re
import sys

ROW = re.compile(r"^\|\s*`src/([a-z_]+)`\s*\|")
INCLUDE = re.compile(r'^\s*#\s*include\s+"([a-z_]+)/[^"]+"', re.M)
ABOVE_BACKEND = ("layer", "weights", "moe", "comm")
TABLE_USE = re.compile(r"\bctx\s*->\s*ops\b|#\s*include\s+\"backend/backend\.h\"")
SOURCE_EXT = (".c", ".h", ".cu", ".cuh")


def layer_order(root):
    """The folders of the design's table of layers, lowest first."""
    order = []
    with open(os.path.join(root, "docs", "design.md"), encoding="utf-8") as fh:
        for line in fh:
            m = ROW.match(line)
            if m and m.group(1) not in order:
                order.append(m.group(1))
    return order


def sources(root, folder):
    for dirpath, _, files in os.walk(os.path.join(root, "src", folder)):
        for f in sorted(files):
            if f.endswith(SOURCE_EXT):
                path = os.path.join(dirpath, f)
                with open(path, encoding="utf-8") as fh:
                    yield os.path.relpath(path, root), fh.read()


def line_of(text, pos):
    return text.count("\n", 0, pos) + 1


def main():
    root = sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(__file__), "..", "..")
    order = layer_order(root)
    problems = []
    if len(order) < 5:
        problems.append("docs/design.md: the table of layers lists %d src/ folders" % len(order))
    on_disk = sorted(d for d in os.listdir(os.path.join(root, "src"))
                     if os.path.isdir(os.path.join(root, "src", d)))
    for d in on_disk:
        if d not in order:
            problems.append("src/%s: not in docs/design.md's table of layers" % d)
    for rank, folder in enumerate(order):
        allowed = set(order[: rank + 1])
        for path, text in sources(root, folder):
            for m in INCLUDE.finditer(text):
                if m.group(1) in order and m.group(1) not in allowed:
                    problems.append("%s:%d: src/%s includes %s/, a layer above it"
                                    % (path, line_of(text, m.start()), folder, m.group(1)))
            if folder in ABOVE_BACKEND:
                for m in TABLE_USE.finditer(text):
                    problems.append("%s:%d: '%s' reaches the backend's table; call backend/ops.h"
                                    % (path, line_of(text, m.start()), m.group(0)))
    for p in problems:
        print(p)
    print("layering: %d folders, %d problems" % (len(order), len(problems)))
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
