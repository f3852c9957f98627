#!/usr/bin/env python3
"""Every environment variable that grouplin reads is in the README's table of them, and every
variable in that table is still read somewhere.

The readers are found in the sources: getenv("NAME") and the CUDA backend's switch helpers
(gln_cuda_env_switch / gln_cuda_env_grid_cap) in src/ and tools/, os.environ.get("NAME") /
os.getenv("NAME") / os.environ["NAME"] in the Python package.  Only our own names count (GLN_*,
GROUPLIN_*); an MPI launcher's variables (OMPI_COMM_WORLD_RANK, ...) are the launcher's.
The table is the README's rows whose first cell holds backticked names.

usage: test_env_documented.py [REPO_ROOT]   (default: two levels above this file)
Exit status 0 when both sets agree, 1 with the differences listed otherwise."""
import os
import re
import sys

READERS = re.compile(
    r'(?:\bgetenv|gln_cuda_env_switch|gln_cuda_env_grid_cap|os\.environ\.get|os\.getenv)\(\s*"([A-Z0-9_]+)"'
    r'|os\.environ\[\s*"([A-Z0-9_]+)"\s*\]')
OURS = re.compile(r"^(GLN|GROUPLIN)_[A-Z0-9_]+$")
SOURCE_DIRS = ("src", "tools", os.path.join("python", "grouplin"))
SOURCE_EXT = (".c", ".h", ".cu", ".cuh", ".py")


def read_in_sources(root):
    """{name: [file, ...]} of our variables that some source file reads."""
    found = {}
    for top in SOURCE_DIRS:
        for dirpath, _, files in os.walk(os.path.join(root, top)):
            for f in sorted(files):
                if not f.endswith(SOURCE_EXT):
                    continue
                path = os.path.join(dirpath, f)
                with open(path, encoding="utf-8") as fh:
                    text = fh.read()
                for m in READERS.finditer(text):
                    name = m.group(1) or m.group(2)
                    if OURS.match(name):
                        found.setdefault(name, []).append(os.path.relpath(path, root))
    return found


def documented(root):
    """Names in the first cell of the README's table rows (`NAME`, `NAME`, ...)."""
    names = set()
    with open(os.path.join(root, "README.md"), encoding="utf-8") as fh:
        for line in fh:
            if not line.startswith("| `"):
                continue
            first = line.split("|")[1]
            names.update(n for n in re.findall(r"`([A-Z0-9_]+)`", first) if OURS.match(n))
    return names


def main():
    root = sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")
    read = read_in_sources(root)
    docs = documented(root)
    # The scan itself must work: these readers exist in every checkout (the PDL switch, the
    # grid caps through the helper, the Python package's library override).
    for anchor in ("GLN_CUDA_PDL", "GLN_CUDA_QUANT_GRID", "GROUPLIN_LIBRARY"):
        if anchor not in read:
            print("test_env_documented: the source scan did not find %s: the reader patterns are stale" % anchor)
            return 1
    missing = sorted(set(read) - docs)
    stale = sorted(docs - set(read))
    for name in missing:
        print("read but not in the README's table: %s (%s)" % (name, ", ".join(sorted(set(read[name])))))
    for name in stale:
        print("in the README's table but read nowhere: %s" % name)
    if missing or stale:
        return 1
    print("test_env_documented: %d variables, each read and documented" % len(read))
    return 0


if __name__ == "__main__":
    sys.exit(main())
