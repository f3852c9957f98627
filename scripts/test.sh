#!/usr/bin/env bash
# Run every test: install what is missing, build (CPU backend + MPI; the CUDA backend too when this
# machine has a GPU), and run the whole ctest suite (unit, oracle, MPI multi-rank, CLI), then
# install the Python package (pip install .) and run its pytest suite (tests/python).
# Usage: scripts/test.sh [extra cmake args...]     Build dir: build/ (override with BUILD_DIR).
#
# Without a GPU the CUDA tests can only skip, and compiling the CUDA backend's ~40 CUTLASS kernels
# takes most of an hour on 2 cores: so the CUDA backend is built only where `nvidia-smi -L` lists
# a GPU.  Pass -DGLN_CUDA=ON (or OFF, AUTO) to decide yourself; CI's step 2 (.ci/run) proves the
# CUDA backend compiles on machines without one.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${BUILD_DIR:-$root/build}
"$root/scripts/deps.sh"

cuda_args=()
case " $* " in
  *" -DGLN_CUDA="* | *" -DGLN_CUDA:"* | *" GLN_CUDA="* | *" GLN_CUDA:"*) ;;   # the caller decides
  *) if nvidia-smi -L >/dev/null 2>&1; then
       cuda_args=(-DGLN_CUDA=AUTO)
     else
       echo "test.sh: no GPU (nvidia-smi -L failed): building without the CUDA backend (-DGLN_CUDA=OFF)"
       cuda_args=(-DGLN_CUDA=OFF)
     fi ;;
esac

cmake -S "$root" -B "$build" -DGLN_BUILD_TESTS=ON -DGLN_BUILD_TOOLS=ON -DGLN_PYTHON="$root/.venv/bin/python" \
  ${cuda_args[@]+"${cuda_args[@]}"} "$@"
cmake --build "$build" -j "$(nproc)"
OPENBLAS_NUM_THREADS=1 ctest --test-dir "$build" --output-on-failure --no-tests=error -j "$(nproc)"
# The Python package: pip install . (scikit-build-core builds its own CPU-only libgrouplin.so,
# in build-py/), then its tests against the installed package, run from outside the source tree.
"$root/.venv/bin/python" -m pip install -q --disable-pip-version-check "$root"
(cd "$root/tests/python" && OPENBLAS_NUM_THREADS=1 "$root/.venv/bin/python" -m pytest -q -p no:cacheprovider .)
