#!/usr/bin/env python3
"""Every environment variable that grouplin reads is documented in the README, and every variable
the README documents is still read somewhere.

- GLN_* variables: the README's table of environment variables (the rows under its
  "| variable |" header), at most 8 rows.
- GROUPLIN_* variables (the Python package's): the README's "Python" section.

The readers are found in the sources as string literals that are exactly one of our names
("GLN_CUDA_PDL"), whatever function reads them (getenv, a switch helper, os.environ.get), in
src/, tools/ and python/grouplin/, and as `env = "NAME"` in pyproject.toml (the wheel's build
options).  Only our own names count (GLN_*, GROUPLIN_*); an MPI launcher's variables
(OMPI_COMM_WORLD_RANK, ...) are the launcher's, and a literal that spells an identifier of
include/grouplin.h (a status or enumerator name in a message table) is not a variable.

usage: test_env_documented.py [REPO_ROOT]   (default: two levels above this file)
Exit status 0 when the sources and the README agree, 1 with the differences listed otherwise."""
import os
import re
import sys

LITERAL = re.compile(r'["\']((?:GLN|GROUPLIN)_[A-Z0-9_]+)["\']')
PYPROJECT_ENV = re.compile(r'\benv\s*=\s*"((?:GLN|GROUPLIN)_[A-Z0-9_]+)"')
SOURCE_DIRS = ("src", "tools", os.path.join("python", "grouplin"))
SOURCE_EXT = (".c", ".h", ".cu", ".cuh", ".py")
MAX_TABLE_ROWS = 8


def public_identifiers(root):
    """GLN_* identifiers of the public header (enumerators, macros): names, not variables."""
    with open(os.path.join(root, "include", "grouplin.h"), encoding="utf-8") as fh:
        return set(re.findall(r"\b(GLN_[A-Z0-9_]+)\b", fh.read()))


def read_in_sources(root):
    """{name: [file, ...]} of our variables that some source file reads."""
    found = {}
    identifiers = public_identifiers(root)

    def scan(path, pattern):
        with open(path, encoding="utf-8") as fh:
            for m in pattern.finditer(fh.read()):
                if m.group(1) not in identifiers:
                    found.setdefault(m.group(1), []).append(os.path.relpath(path, root))

    for top in SOURCE_DIRS:
        for dirpath, _, files in os.walk(os.path.join(root, top)):
            for f in sorted(files):
                if f.endswith(SOURCE_EXT):
                    scan(os.path.join(dirpath, f), LITERAL)
    pyproject = os.path.join(root, "pyproject.toml")
    if os.path.exists(pyproject):
        scan(pyproject, PYPROJECT_ENV)
    return found


def readme_parts(root):
    """(names in the table's first cells, number of table rows, GROUPLIN_* names of the Python section)."""
    with open(os.path.join(root, "README.md"), encoding="utf-8") as fh:
        lines = fh.read().splitlines()
    table, rows, in_table = set(), 0, False
    python, in_python = set(), False
    for line in lines:
        if line.startswith("## "):
            in_python = line.lower().startswith("## python")
        if in_python:
            python.update(re.findall(r"GROUPLIN_[A-Z0-9_]+", line))
        if line.startswith("| variable |"):
            in_table = True
            continue
        if in_table:
            if not line.startswith("|"):
                in_table = False
                continue
            if line.startswith("|---"):
                continue
            rows += 1
            table.update(re.findall(r"`((?:GLN|GROUPLIN)_[A-Z0-9_]+)`", line.split("|")[1]))
    return table, rows, python


def main():
    root = sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")
    read = read_in_sources(root)
    table, rows, python = readme_parts(root)
    # The scan itself must work: these readers exist in every checkout (the PDL switch, the
    # grid cap, the Python package's library override, the wheel's CUDA switch).
    for anchor in ("GLN_CUDA_PDL", "GLN_CUDA_QUANT_GRID", "GROUPLIN_LIBRARY", "GROUPLIN_CUDA"):
        if anchor not in read:
            print("test_env_documented: the source scan did not find %s: the reader patterns are stale" % anchor)
            return 1
    failed = False
    if rows == 0 or rows > MAX_TABLE_ROWS:
        print("the README's table of environment variables has %d rows (1 to %d expected)" % (rows, MAX_TABLE_ROWS))
        failed = True
    read_gln = {n for n in read if n.startswith("GLN_")}
    read_py = {n for n in read if n.startswith("GROUPLIN_")}
    for name in sorted(read_gln - table):
        print("read but not in the README's table: %s (%s)" % (name, ", ".join(sorted(set(read[name])))))
    for name in sorted(table - read_gln):
        print("in the README's table but read nowhere: %s" % name)
    for name in sorted(read_py - python):
        print("read but not in the README's Python section: %s (%s)" % (name, ", ".join(sorted(set(read[name])))))
    for name in sorted(python - read_py):
        print("in the README's Python section but read nowhere: %s" % name)
    if failed or read_gln != table or read_py != python:
        return 1
    print("test_env_documented: %d variables, each read and documented" % len(read))
    return 0


if __name__ == "__main__":
    sys.exit(main())
