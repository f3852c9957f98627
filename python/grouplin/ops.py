"""numpy / DLPack operations over the library's numerics: scalar conversions, casts, amax,
quantize / dequantize per scaling mode, and the grouped GEMM.

Every array argument may be a numpy array (or any CPU array numpy takes through DLPack) or a torch
tensor on the CPU or a CUDA device; results come back in the same kind, on the same device.  CUDA
tensors run on torch's current stream.  bf16 / fp8 numpy arrays use ml_dtypes' dtypes.

    >>> import numpy as np, grouplin
    >>> x = np.random.randn(64, 256).astype(np.float32)
    >>> q = grouplin.quantize(x, "mxfp8")                  # E4M3 data + E8M0 scale per 1x32 block
    >>> err = np.abs(grouplin.dequantize(q) - x).max()
    >>> w = np.random.randn(4, 128, 256).astype(np.float32)
    >>> y = grouplin.grouped_gemm(w, x, [16, 0, 40, 8])   # y_i = x_i @ w_i.T, shape [64, 128]
"""
import ctypes as C
from dataclasses import dataclass, field

import numpy as np

from . import _arrays, _context, _lib

_HP = (_lib.FP32, _lib.BF16, _lib.FP16)
_MODES = {"current": (_lib.SCALING_TENSOR, 0), "tensor": (_lib.SCALING_TENSOR, 0),
          "delayed": (_lib.SCALING_TENSOR, 1), "mxfp8": (_lib.SCALING_MXFP8_1D, 0),
          "block_1d": (_lib.SCALING_BLOCK_1D, 0), "block_2d": (_lib.SCALING_BLOCK_2D, 0)}
_LAYOUTS = {"TN": _lib.LAYOUT_TN, "NN": _lib.LAYOUT_NN, "NT": _lib.LAYOUT_NT}


def _fp8_code(fmt, name="fp8_dtype"):
    code = _arrays.DTYPE_NAMES.get(fmt, fmt) if isinstance(fmt, str) else fmt
    if code not in (_lib.E4M3, _lib.E5M2):
        raise ValueError("%s: %r is not an FP8 format (expected 'e4m3' or 'e5m2')" % (name, fmt))
    return code


def _hp_code(dtype, name="dtype"):
    code = _arrays.DTYPE_NAMES.get(dtype) if isinstance(dtype, str) else None
    if code is None:
        try:  # numpy / torch dtype objects
            code = _arrays._NP_CODES.get(np.dtype(dtype))
        except TypeError:
            code = _arrays._torch_codes().get(dtype) if "torch" in type(dtype).__module__ else None
    if code not in _HP:
        raise TypeError("%s: %r is not a high-precision dtype (fp32, bf16 or fp16)" % (name, dtype))
    return code


# ---- scalar conversions (round to nearest even, FP8 saturates to +-max, NaN kept) ---------------
def fp32_to_bf16(x):
    """bf16 bits (int) of the float x."""
    return int(_lib.lib().gln_fp32_to_bf16(float(x)))


def bf16_to_fp32(bits):
    return float(_lib.lib().gln_bf16_to_fp32(int(bits)))


def fp32_to_fp16(x):
    return int(_lib.lib().gln_fp32_to_fp16(float(x)))


def fp16_to_fp32(bits):
    return float(_lib.lib().gln_fp16_to_fp32(int(bits)))


def fp32_to_fp8(x, fmt="e4m3"):
    """FP8 code (int) of the float x: 'e4m3' (max 448) or 'e5m2' (max 57344), saturating."""
    return int(_lib.lib().gln_fp32_to_fp8(float(x), _fp8_code(fmt, "fmt")))


def fp8_to_fp32(bits, fmt="e4m3"):
    return float(_lib.lib().gln_fp8_to_fp32(int(bits), _fp8_code(fmt, "fmt")))


def fp8_max(fmt="e4m3"):
    return float(_lib.lib().gln_fp8_max(_fp8_code(fmt, "fmt")))


def e8m0_from_amax(amax, fmt="e4m3", rounding="up"):
    """E8M0 code of a block whose max |x| is amax; rounding 'up' (TE / cuBLAS) or 'floor' (OCP)."""
    r = {"up": _lib.E8M0_ROUND_UP, "floor": _lib.E8M0_ROUND_FLOOR}.get(rounding)
    if r is None:
        raise ValueError("rounding: %r (expected 'up' or 'floor')" % (rounding,))
    return int(_lib.lib().gln_e8m0_from_amax(float(amax), _fp8_code(fmt, "fmt"), r))


def e8m0_to_fp32(code):
    return float(_lib.lib().gln_e8m0_to_fp32(int(code)))


def scale_from_amax(amax, fp8_max_value, power_2_scale=False, epsilon=0.0, value_for_inf=3.4028234663852886e38):
    return float(_lib.lib().gln_scale_from_amax(float(amax), float(fp8_max_value), int(bool(power_2_scale)),
                                                float(epsilon), float(value_for_inf)))


# ---- array operations -----------------------------------------------------------------------------
def _ctx(device):
    return _context.get(device).on_current_stream()


def cast(x, dtype):
    """x (fp32 / bf16 / fp16) converted element-wise to `dtype`, one rounding (RNE)."""
    b = _arrays.view(x, "x", _HP)
    code = _hp_code(dtype)
    out = _arrays.empty(b, b.shape, code)
    r, c = b.rows_cols()
    tin, tout = b.tensor(), _lib.Tensor(code, r, c, _arrays.ptr(out), 0, None, None, None, None, None)
    _lib.check(_lib.lib().gln_cast(_ctx(b.device), C.byref(tin), C.byref(tout)), "gln_cast")
    return out


def amax(x):
    """max |x| (NaN elements ignored, as TE's fmaxf reductions)."""
    b = _arrays.view(x, "x", _HP)
    out = C.c_float()
    t = b.tensor()
    _lib.check(_lib.lib().gln_amax(_ctx(b.device), C.byref(t), C.byref(out)), "gln_amax")
    return float(out.value)


@dataclass
class Quantized:
    """A quantized 2-D tensor in the library's layout (include/grouplin.h, gln_quant_layout):
    `data` rowwise FP8 [rows, cols]; `col_data` the columnwise copy ([cols, rows] transposed for
    the per-tensor and block modes, [rows, cols] for MXFP8); `scale_inv` / `col_scale_inv` the
    decode scales (fp32, or E8M0 bytes for MXFP8) on their padded grids; `amax` / `scale` the
    per-tensor state ([1] fp32)."""
    mode: str
    fp8_dtype: int
    shape: tuple
    data: object = None
    col_data: object = None
    scale_inv: object = None
    col_scale_inv: object = None
    amax: object = None
    scale: object = None
    _gln_mode: int = field(default=0, repr=False)

    def tensor(self):
        return _lib.Tensor(self.fp8_dtype, self.shape[0], self.shape[1], _arrays.ptr(self.data), self._gln_mode,
                           _arrays.ptr(self.scale_inv), _arrays.ptr(self.col_data),
                           _arrays.ptr(self.col_scale_inv), _arrays.ptr(self.amax), _arrays.ptr(self.scale))

    def dequantize(self, columnwise=False, dtype="fp32"):
        return dequantize(self, columnwise, dtype)


def quantize(x, mode="current", fp8_dtype="e4m3", rowwise=True, columnwise=False, scale=None,
             amax_epsilon=0.0, power_2_scale=False, e8m0_rounding="up"):
    """Quantize a 2-D high-precision array.

    mode: 'current' (per-tensor, scale from this amax), 'delayed' (per-tensor with the given encode
    `scale`; the amax is returned for the history), 'mxfp8' (1x32 blocks, E8M0 scales),
    'block_1d' (1x128 blocks) or 'block_2d' (128x128 tiles).  Returns a Quantized."""
    if mode not in _MODES:
        raise ValueError("mode: %r (expected one of %s)" % (mode, ", ".join(_MODES)))
    b = _arrays.view(x, "x", _HP)
    if len(b.shape) != 2:
        raise ValueError("x: expected a 2-D array, got shape %s" % (tuple(b.shape),))
    gmode, delayed = _MODES[mode]
    if delayed and scale is None:
        raise ValueError("scale: mode 'delayed' needs the encode scale (a float)")
    fp8 = _fp8_code(fp8_dtype)
    rows, cols = b.shape
    L = _lib.lib()
    lay = _lib.QuantLayout()
    _lib.check(L.gln_quant_layout(gmode, fp8, rows, cols, C.byref(lay)), "gln_quant_layout")
    scode = _lib.E8M0 if gmode == _lib.SCALING_MXFP8_1D else _lib.FP32
    q = Quantized(mode, fp8, (rows, cols), _gln_mode=gmode)
    if rowwise:
        q.data = _arrays.empty(b, (rows, cols), fp8)
        q.scale_inv = _arrays.empty(b, (lay.scale_rows, lay.scale_cols), scode)
    if columnwise:
        q.col_data = _arrays.empty(b, (rows, cols) if gmode == _lib.SCALING_MXFP8_1D else (cols, rows), fp8)
        q.col_scale_inv = _arrays.empty(b, (lay.col_scale_rows, lay.col_scale_cols), scode)
    if gmode == _lib.SCALING_TENSOR:
        q.amax = _arrays.empty(b, (1,), _lib.FP32, fill=0.0)
        q.scale = _arrays.empty(b, (1,), _lib.FP32, fill=float(scale) if delayed else 1.0)
    cfg = _lib.quant_config(mode=gmode, fp8_dtype=fp8, rowwise=int(bool(rowwise)), columnwise=int(bool(columnwise)),
                            delayed=delayed, amax_epsilon=float(amax_epsilon),
                            power_2_scale=int(bool(power_2_scale)),
                            e8m0_rounding={"up": _lib.E8M0_ROUND_UP, "floor": _lib.E8M0_ROUND_FLOOR}[e8m0_rounding])
    tin, tout = b.tensor(), q.tensor()
    _lib.check(L.gln_quantize(_ctx(b.device), C.byref(cfg), C.byref(tin), C.byref(tout)), "gln_quantize")
    return q


def dequantize(q, columnwise=False, dtype="fp32"):
    """The high-precision [rows, cols] values of one copy of a Quantized (transposed copies are
    transposed back)."""
    if not isinstance(q, Quantized):
        raise TypeError("q: expected a grouplin.Quantized (from grouplin.quantize), got %s" % type(q).__name__)
    src = q.col_data if columnwise else q.data
    if src is None:
        raise ValueError("columnwise: the %s copy was not produced by quantize"
                         % ("columnwise" if columnwise else "rowwise"))
    b = _arrays.view(src, "q.data")
    code = _hp_code(dtype)
    out = _arrays.empty(b, q.shape, code)
    tin = q.tensor()
    tout = _lib.Tensor(code, q.shape[0], q.shape[1], _arrays.ptr(out), 0, None, None, None, None, None)
    _lib.check(_lib.lib().gln_dequantize(_ctx(b.device), C.byref(tin), int(bool(columnwise)), C.byref(tout)),
               "gln_dequantize")
    return out


def _splits(m_splits, n, like, rows):
    """(pointer, on_backend, keepalive) for m_splits: a list / numpy array (host) or an int64
    tensor on the operands' device (read by the device)."""
    if _arrays.is_torch(m_splits):
        import torch
        if m_splits.dtype != torch.int64 or m_splits.dim() != 1 or m_splits.numel() != n:
            raise ValueError("m_splits: expected an int64 tensor of shape (%d,), got %s %s"
                             % (n, m_splits.dtype, tuple(m_splits.shape)))
        s = m_splits.contiguous()
        if s.is_cuda:
            return s.data_ptr(), 1, s
        s = s.numpy()
    else:
        s = np.ascontiguousarray(np.asarray(m_splits, dtype=np.int64))
    if s.shape != (n,):
        raise ValueError("m_splits: expected %d splits (one per member), got shape %s" % (n, s.shape))
    return s.ctypes.data, 0, s


def _weights(a, name):
    """[N, R, C] array or a list of N [R, C] arrays -> (list of Buf, N, R, C)."""
    if isinstance(a, (list, tuple)):
        bufs = [_arrays.view(w, "%s[%d]" % (name, i), _HP) for i, w in enumerate(a)]
    else:
        whole = _arrays.view(a, name, _HP)
        if len(whole.shape) != 3:
            raise ValueError("%s: expected [N, rows, cols] or a list of N 2-D arrays, got shape %s"
                             % (name, tuple(whole.shape)))
        n, r, c = whole.shape
        step = r * c * _lib.lib().gln_dtype_size(whole.dtype)
        bufs = [_arrays.Buf(whole.array, (whole.ptr or 0) + i * step or None, (r, c), whole.dtype, whole.device)
                for i in range(n)]
    if not bufs:
        raise ValueError("%s: at least one member" % name)
    return bufs


def grouped_gemm(a, b, m_splits, layout="TN", bias=None, out_dtype=None):
    """One grouped GEMM over N members (FP32 accumulation, one rounding of the output).

    layout 'TN' (fprop): a = weights [N, K_out, K_in], b = x [M, K_in]   -> y  [M, K_out], y_i = x_i a_iᵀ (+ bias_i)
    layout 'NN' (dgrad): a = weights [N, K_out, K_in], b = dy [M, K_out] -> dx [M, K_in],  dx_i = dy_i a_i
    layout 'NT' (wgrad): a = x [M, K_in], b = dy [M, K_out]             -> dW [N, K_out, K_in], dW_i = dy_iᵀ x_i
    m_splits: N row counts (a list, or an int64 tensor on the operands' device).  Weights may also
    be a list of N 2-D arrays; bias is [N, K_out] (TN only).  Rows past sum(m_splits) of the output
    are zero."""
    if layout not in _LAYOUTS:
        raise ValueError("layout: %r (expected 'TN', 'NN' or 'NT')" % (layout,))
    L = _lib.lib()
    gl = _LAYOUTS[layout]
    bb = _arrays.view(b, "b", _HP)
    if len(bb.shape) != 2:
        raise ValueError("b: expected a 2-D array, got shape %s" % (tuple(bb.shape),))
    code = _hp_code(out_dtype, "out_dtype") if out_dtype is not None else bb.dtype
    args = _lib.GroupedGemmArgs()
    args.size = C.sizeof(_lib.GroupedGemmArgs)
    args.layout = gl
    keep = []
    if gl == _lib.LAYOUT_NT:
        ab = _arrays.view(a, "a", _HP)
        if len(ab.shape) != 2:
            raise ValueError("a: expected x as a 2-D array [M, K_in], got shape %s" % (tuple(ab.shape),))
        dev = _arrays.same_device([ab, bb], ["a", "b"])
        n = len(m_splits) if not _arrays.is_torch(m_splits) else int(m_splits.numel())
        sp, on_dev, s = _splits(m_splits, n, ab, ab.shape[0])
        ga = _lib.GroupedTensor(n, sp, on_dev, ab.tensor())
        gb = _lib.GroupedTensor(n, sp, on_dev, bb.tensor())
        out = _arrays.empty(bb, (n, bb.shape[1], ab.shape[1]), code)
        step = bb.shape[1] * ab.shape[1] * L.gln_dtype_size(code)
        base = _arrays.ptr(out) or 0
        dl = (_lib.Tensor * n)(*[_lib.Tensor(code, bb.shape[1], ab.shape[1], (base + i * step) or None, 0, None,
                                             None, None, None, None) for i in range(n)])
        args.a_grouped, args.b, args.d_list = C.pointer(ga), C.pointer(gb), dl
        keep += [ga, gb, dl, s]
    else:
        ws = _weights(a, "a")
        n = len(ws)
        dev = _arrays.same_device([bb] + ws, ["b"] + ["a[%d]" % i for i in range(n)])
        sp, on_dev, s = _splits(m_splits, n, bb, bb.shape[0])
        al = (_lib.Tensor * n)(*[w.tensor() for w in ws])
        cols = ws[0].shape[0] if gl == _lib.LAYOUT_TN else ws[0].shape[1]
        out = _arrays.empty(bb, (bb.shape[0], cols), code, fill=0)
        gb = _lib.GroupedTensor(n, sp, on_dev, bb.tensor())
        gd = _lib.GroupedTensor(n, sp, on_dev, _lib.Tensor(code, bb.shape[0], cols, _arrays.ptr(out), 0, None,
                                                           None, None, None, None))
        args.a_list, args.b, args.d_grouped = al, C.pointer(gb), C.pointer(gd)
        keep += [al, gb, gd, s]
        if bias is not None:
            if gl != _lib.LAYOUT_TN:
                raise ValueError("bias: only the 'TN' (fprop) layout adds a bias")
            bs = _bias_list(bias, n)
            bl = (_lib.Tensor * n)(*[_lib.Tensor(x.dtype, 1, x.shape[-1], x.ptr, 0, None, None, None, None, None)
                                     for x in bs])
            args.bias_list = bl
            keep += [bl, bs]
    _lib.check(L.gln_grouped_gemm(_ctx(dev), C.byref(args)), "gln_grouped_gemm")
    return out


def _bias_list(bias, n):
    """[N, K_out] array or a list of N [K_out] arrays -> N Bufs."""
    if isinstance(bias, (list, tuple)):
        bs = [_arrays.view(x, "bias[%d]" % i, _HP) for i, x in enumerate(bias)]
    else:
        whole = _arrays.view(bias, "bias", _HP)
        if len(whole.shape) != 2 or whole.shape[0] != n:
            raise ValueError("bias: expected [%d, K_out], got shape %s" % (n, tuple(whole.shape)))
        step = whole.shape[1] * _lib.lib().gln_dtype_size(whole.dtype)
        bs = [_arrays.Buf(whole.array, (whole.ptr or 0) + i * step or None, (whole.shape[1],), whole.dtype,
                          whole.device) for i in range(n)]
    if len(bs) != n:
        raise ValueError("bias: expected %d members, got %d" % (n, len(bs)))
    return bs
