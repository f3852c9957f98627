"""grouplin: grouped linear (mixture-of-experts) layers with FP8 / MXFP8 recipes.

The numpy part (this package) works without torch: scalar conversions, cast, amax, quantize /
dequantize per scaling mode, the expert activations (alone or fused with the grouped
quantization of their output) and the grouped GEMM, on numpy arrays or torch tensors
(grouplin.ops).  The PyTorch module lives in grouplin.torch (imports torch).

The shared library is the one installed inside this package, or $GROUPLIN_LIBRARY when set (a
libgrouplin.so from a build tree, e.g. a CUDA build).
"""
# The public names of the numpy part (re-exported).
from ._lib import (BackendError, CommError, GrouplinError, InvalidArgumentError, InvalidStateError,
                   NotSupportedError, OutOfMemoryError, library_path)  # noqa: F401
from .ops import (GroupedQuantized, Quantized, activation_forward, activation_forward_quantize, amax,
                  bf16_to_fp32, cast, dequantize, e8m0_from_amax, e8m0_to_fp32, fp8_max, fp8_to_fp32,
                  fp16_to_fp32, fp32_to_bf16, fp32_to_fp8, fp32_to_fp16, grouped_gemm, grouped_quantize,
                  optimizer_step, quantize, scale_from_amax)  # noqa: F401
from .recipe import DelayedScaling, Float8BlockScaling, Float8CurrentScaling, Format, MXFP8BlockScaling  # noqa: F401

__version__ = "0.1.0"


def version():
    """The loaded library's version (major, minor, patch)."""
    import ctypes as C
    from . import _lib
    v = [C.c_int(), C.c_int(), C.c_int()]
    _lib.lib().gln_version(*[C.byref(x) for x in v])
    return tuple(x.value for x in v)


def cuda_available():
    """True when the loaded library has the CUDA backend and a GPU is present."""
    from . import _lib
    return bool(_lib.lib().gln_backend_available(_lib.BACKEND_CUDA))
