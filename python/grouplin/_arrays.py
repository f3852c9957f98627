"""Arrays in, arrays out, zero-copy: numpy arrays (and anything numpy can take through DLPack on
the CPU) and torch tensors (CPU or CUDA, through data_ptr).  Results come back in the kind of the
first input: numpy for numpy, torch on the same device for torch.
"""

import numpy as np

from . import _lib

try:  # numpy has no bf16 / fp8 dtypes of its own; ml_dtypes adds them when installed
    import ml_dtypes as _mld
except ImportError:  # pragma: no cover - the numpy part also works without it
    _mld = None

_NP_CODES = {np.dtype(np.float32): _lib.FP32, np.dtype(np.float16): _lib.FP16,
             np.dtype(np.int32): _lib.INT32, np.dtype(np.int64): _lib.INT64}
if _mld is not None:
    _NP_CODES[np.dtype(_mld.bfloat16)] = _lib.BF16
    _NP_CODES[np.dtype(_mld.float8_e4m3fn)] = _lib.E4M3
    _NP_CODES[np.dtype(_mld.float8_e5m2)] = _lib.E5M2
    if hasattr(_mld, "float8_e8m0fnu"):
        _NP_CODES[np.dtype(_mld.float8_e8m0fnu)] = _lib.E8M0

DTYPE_NAMES = {"fp32": _lib.FP32, "float32": _lib.FP32, "bf16": _lib.BF16, "bfloat16": _lib.BF16,
               "fp16": _lib.FP16, "float16": _lib.FP16, "e4m3": _lib.E4M3, "fp8_e4m3": _lib.E4M3,
               "e5m2": _lib.E5M2, "fp8_e5m2": _lib.E5M2}


def is_torch(a):
    t = type(a)
    return t.__module__.startswith("torch") and hasattr(a, "data_ptr")


def _torch_codes():
    import torch
    codes = {torch.float32: _lib.FP32, torch.bfloat16: _lib.BF16, torch.float16: _lib.FP16,
             torch.int32: _lib.INT32, torch.int64: _lib.INT64}
    for name, code in (("float8_e4m3fn", _lib.E4M3), ("float8_e5m2", _lib.E5M2), ("float8_e8m0fnu", _lib.E8M0)):
        if hasattr(torch, name):
            codes[getattr(torch, name)] = code
    return codes


class Buf:
    """One array seen by the library: pointer, shape, gln dtype, device, and the array itself
    (kept so the memory lives as long as this view)."""
    __slots__ = ("array", "ptr", "shape", "dtype", "device")

    def __init__(self, array, ptr, shape, dtype, device):
        self.array, self.ptr, self.shape, self.dtype, self.device = array, ptr, shape, dtype, device

    def rows_cols(self):
        if len(self.shape) == 0:
            return 1, 1
        cols = self.shape[-1]
        return (int(np.prod(self.shape[:-1])) if len(self.shape) > 1 else 1), cols

    def tensor(self):
        r, c = self.rows_cols()
        return _lib.plain_tensor(self.dtype, r, c, self.ptr)


def view(a, name, dtypes=None):
    """Buf for `a`; TypeError for an unknown kind or dtype, ValueError for a strided array.
    `name` is the argument's name in messages."""
    if is_torch(a):
        code = _torch_codes().get(a.dtype)
        if code is None or (dtypes is not None and code not in dtypes):
            raise TypeError("%s: dtype %s is not supported here (expected one of %s)"
                            % (name, a.dtype, _names(dtypes)))
        if not a.is_contiguous():
            raise ValueError("%s: tensor must be contiguous (call .contiguous())" % name)
        dev = ("cuda", a.device.index if a.device.index is not None else 0) if a.is_cuda else ("cpu", 0)
        if a.device.type not in ("cpu", "cuda"):
            raise ValueError("%s: device %s is not supported (cpu or cuda)" % (name, a.device))
        return Buf(a, a.data_ptr() or None, tuple(a.shape), code, dev)
    if not isinstance(a, np.ndarray):
        if hasattr(a, "__dlpack__"):
            a = np.from_dlpack(a)
        else:
            raise TypeError("%s: expected a numpy array, a torch tensor or a DLPack array, got %s"
                            % (name, type(a).__name__))
    code = _NP_CODES.get(a.dtype)
    if code is None or (dtypes is not None and code not in dtypes):
        raise TypeError("%s: dtype %s is not supported here (expected one of %s%s)"
                        % (name, a.dtype, _names(dtypes), "" if _mld else "; install ml_dtypes for bf16/fp8"))
    if not a.flags.c_contiguous:
        raise ValueError("%s: array must be C-contiguous (np.ascontiguousarray)" % name)
    return Buf(a, a.ctypes.data or None, a.shape, code, ("cpu", 0))


def _names(codes):
    if codes is None:
        return "fp32, bf16, fp16, fp8"
    inv = {_lib.FP32: "float32", _lib.BF16: "bfloat16", _lib.FP16: "float16", _lib.E4M3: "float8_e4m3fn",
           _lib.E5M2: "float8_e5m2", _lib.E8M0: "e8m0", _lib.INT32: "int32", _lib.INT64: "int64"}
    return ", ".join(inv[c] for c in codes)


def empty(like, shape, code, fill=None):
    """A new array of gln dtype `code` in the kind and on the device of Buf `like`.  FP8 / E8M0
    without a native dtype come back as uint8 bytes."""
    if is_torch(like.array):
        import torch
        inv = {v: k for k, v in _torch_codes().items()}
        dt = inv.get(code, torch.uint8)
        out = torch.empty(shape, dtype=dt, device=like.array.device)
        if fill is not None:
            out.view(torch.uint8).fill_(fill) if dt.itemsize == 1 and code not in (_lib.INT32, _lib.INT64) \
                else out.fill_(fill)
        return out
    inv = {v: k for k, v in _NP_CODES.items()}
    dt = inv.get(code, np.dtype(np.uint8))
    out = np.empty(shape, dtype=dt)
    if fill is not None:
        out.view(np.uint8 if dt.itemsize == 1 else dt)[...] = fill
    return out


def ptr(a):
    """Data pointer of an array made by empty() (None for an empty one)."""
    if a is None:
        return None
    if is_torch(a):
        return a.data_ptr() or None
    return a.ctypes.data or None


def same_device(bufs, names):
    dev = bufs[0].device
    for b, n in zip(bufs[1:], names[1:]):
        if b.device != dev:
            raise ValueError("%s: on %s:%d but %s is on %s:%d (every operand on one device)"
                             % (n, b.device[0], b.device[1], names[0], dev[0], dev[1]))
    return dev
