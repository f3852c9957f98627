#!/usr/bin/env bash
# Run every test: install what is missing, build (CPU backend + MPI; CUDA when nvcc is found),
# and run the whole ctest suite (unit, oracle, MPI multi-rank, CLI).
# Usage: scripts/test.sh [extra cmake args...]     Build dir: build/ (override with BUILD_DIR).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${BUILD_DIR:-$root/build}
"$root/scripts/deps.sh"
cmake -S "$root" -B "$build" -DGLN_BUILD_TESTS=ON -DGLN_BUILD_TOOLS=ON -DGLN_PYTHON="$root/.venv/bin/python" "$@"
cmake --build "$build" -j "$(nproc)"
OPENBLAS_NUM_THREADS=1 ctest --test-dir "$build" --output-on-failure --no-tests=error -j "$(nproc)"
