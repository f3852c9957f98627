"""pytest setup for the Python package tests.

The package under test is the installed one (pip install .), or python/ with GROUPLIN_LIBRARY
pointing at a built libgrouplin.so:
    GROUPLIN_LIBRARY=build/src/libgrouplin.so PYTHONPATH=python python -m pytest tests/python
CUDA tests run when torch sees a GPU and the loaded library has the CUDA backend.
"""
import os
import sys

import pytest

# the independent numpy + ml_dtypes quantization model of the oracle tests
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "oracle"))


def _cuda_ok():
    try:
        import torch
        import grouplin
        return torch.cuda.is_available() and grouplin.cuda_available()
    except Exception:
        return False


CUDA = _cuda_ok()
DEVICES = ["cpu"] + (["cuda"] if CUDA else [])
needs_cuda = pytest.mark.skipif(not CUDA, reason="needs a GPU and a libgrouplin built with the CUDA backend")
