#!/usr/bin/env bash
# Run every test: install what is missing, build (CPU backend + MPI; CUDA when nvcc is found),
# and run the whole ctest suite (unit, oracle, MPI multi-rank, CLI), then install the Python package
# (pip install .) and run its pytest suite (tests/python).
# Usage: scripts/test.sh [extra cmake args...]     Build dir: build/ (override with BUILD_DIR).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${BUILD_DIR:-$root/build}
"$root/scripts/deps.sh"
cmake -S "$root" -B "$build" -DGLN_BUILD_TESTS=ON -DGLN_BUILD_TOOLS=ON -DGLN_PYTHON="$root/.venv/bin/python" "$@"
cmake --build "$build" -j "$(nproc)"
OPENBLAS_NUM_THREADS=1 ctest --test-dir "$build" --output-on-failure --no-tests=error -j "$(nproc)"
# The Python package: pip install . (scikit-build-core builds its own CPU-only libgrouplin.so,
# in build-py/), then its tests against the installed package, run from outside the source tree.
"$root/.venv/bin/python" -m pip install -q --disable-pip-version-check "$root"
(cd "$root/tests/python" && OPENBLAS_NUM_THREADS=1 "$root/.venv/bin/python" -m pytest -q -p no:cacheprovider .)
