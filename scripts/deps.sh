#!/usr/bin/env bash
# Install what grouplin needs on a Debian/Ubuntu machine, idempotently:
#   Debian packages (only the missing ones, only when root), and a Python virtual environment
#   (.venv) with the oracle packages numpy + ml_dtypes, and torch + pytest for tests/python.
# Usage: scripts/deps.sh [--no-python]
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)

packages=(build-essential cmake pkg-config libopenblas-dev libopenmpi-dev openmpi-bin gnuplot-nox)
# A python3 that already has venv (the system one with python3-venv, or pyenv / conda) is enough.
if ! { command -v python3 >/dev/null && python3 -c 'import venv, ensurepip' 2>/dev/null; }; then
  packages+=(python3 python3-venv)
fi
wanted=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || wanted+=("$p")
done
if [ ${#wanted[@]} -gt 0 ]; then
  if [ "$(id -u)" = 0 ]; then
    echo "deps: installing ${wanted[*]}"
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq
    apt-get install -y -qq --no-install-recommends "${wanted[@]}" >/dev/null
  else
    echo "deps: missing Debian packages: ${wanted[*]} (run as root, or: sudo apt-get install ${wanted[*]})" >&2
    exit 1
  fi
fi

if [ "${1:-}" != "--no-python" ]; then
  if [ ! -x "$root/.venv/bin/python" ]; then
    echo "deps: creating $root/.venv"
    python3 -m venv "$root/.venv"
  fi
  if ! "$root/.venv/bin/python" -c 'import numpy, ml_dtypes' 2>/dev/null; then
    echo "deps: installing numpy + ml_dtypes into .venv"
    "$root/.venv/bin/python" -m pip install -q --disable-pip-version-check numpy ml_dtypes
  fi
  # The Python package's tests (tests/python): pytest and torch from PyPI.  PyPI's Linux torch
  # wheel is the CUDA build and needs its nvidia-* wheels even on a CPU-only machine (with
  # --no-deps `import torch` fails on libcufile): about 1 min and 4.7 GB on CI.  Pinned to the
  # GPU machine's version so both run the same torch.
  if ! "$root/.venv/bin/python" -c 'import torch, pytest' 2>/dev/null; then
    echo "deps: installing torch + pytest into .venv (PyPI; about 4.7 GB)"
    "$root/.venv/bin/python" -m pip install -q --disable-pip-version-check "torch==${GLN_TORCH_VERSION:-2.11.0}" pytest
  fi
  # CUTLASS headers for the Hopper grouped GEMMs of the CUDA backend: the nvidia-cutlass wheel
  # ships them (cutlass_library/source/include); --no-deps keeps its Python tooling's
  # dependencies out, we only read the headers.
  if ! "$root/.venv/bin/python" -c 'import importlib.util, sys; sys.exit(importlib.util.find_spec("cutlass_library") is None)' 2>/dev/null; then
    echo "deps: installing the CUTLASS headers (nvidia-cutlass) into .venv"
    "$root/.venv/bin/python" -m pip install -q --disable-pip-version-check --no-deps nvidia-cutlass==4.2.0.0
  fi
fi
