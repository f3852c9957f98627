"""numpy / DLPack operations over the library's numerics: scalar conversions, casts, amax,
quantize / dequantize per scaling mode, the expert activations (alone or fused with the grouped
quantization of their output), and the grouped GEMM.

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
    return float(_lib.lib().gln_bf16_to_fp32(_lib.integer("bits", bits, ctype=C.c_uint16)))


def fp32_to_fp16(x):
    return int(_lib.lib().gln_fp32_to_fp16(float(x)))


def fp16_to_fp32(bits):
    return float(_lib.lib().gln_fp16_to_fp32(_lib.integer("bits", bits, ctype=C.c_uint16)))


def fp32_to_fp8(x, fmt="e4m3"):
    """FP8 code (int) of the float x: 'e4m3' (max 448) or 'e5m2' (max 57344), saturating."""
    return int(_lib.lib().gln_fp32_to_fp8(float(x), _fp8_code(fmt, "fmt")))


def fp8_to_fp32(bits, fmt="e4m3"):
    return float(_lib.lib().gln_fp8_to_fp32(_lib.integer("bits", bits, ctype=C.c_uint8), _fp8_code(fmt, "fmt")))


def fp8_max(fmt="e4m3"):
    return float(_lib.lib().gln_fp8_max(_fp8_code(fmt, "fmt")))


def e8m0_from_amax(amax, fmt="e4m3", rounding="up"):
    """E8M0 code of a block whose max |x| is amax; rounding 'up' (TE / cuBLAS) or 'floor' (OCP)."""
    r = _ROUNDING.get(rounding) if isinstance(rounding, str) else None
    if r is None:
        raise ValueError("rounding: %r (expected 'up' or 'floor')" % (rounding,))
    return int(_lib.lib().gln_e8m0_from_amax(float(amax), _fp8_code(fmt, "fmt"), r))


def e8m0_to_fp32(code):
    return float(_lib.lib().gln_e8m0_to_fp32(_lib.integer("code", code, ctype=C.c_uint8)))


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
    tin, tout = b.tensor(), _lib.plain_tensor(code, r, c, _arrays.ptr(out))
    _lib.check(_lib.lib().gln_cast(_ctx(b.device), C.byref(tin), C.byref(tout)), "gln_cast")
    return out


def amax(x):
    """max |x| (NaN elements ignored, as TE's fmaxf reductions)."""
    b = _arrays.view(x, "x", _HP)
    out = C.c_float()
    t = b.tensor()
    _lib.check(_lib.lib().gln_amax(_ctx(b.device), C.byref(t), C.byref(out)), "gln_amax")
    return float(out.value)


def optimizer_step(master, grad, exp_avg=None, exp_avg_sq=None, *, step, working=None, kind="adam", lr=1e-3,
                   betas=(0.9, 0.999), eps=1e-8, weight_decay=0.0, adam_w_mode=True, momentum=0.0):
    """One optimizer step in place (gln_optimizer_step): master, exp_avg, exp_avg_sq (fp32, one
    shape) updated from grad (fp32); `working` (None, or an fp32 / bf16 / fp16 array of the same
    size) receives the new master rounded to nearest even in the same pass.  kind 'adam' (TE
    FusedAdam; adam_w_mode=True: decoupled weight decay) or 'sgd' (PyTorch's SGD; exp_avg is the
    momentum buffer, needed when momentum != 0).  step: 1-based.  Defaults are TE's."""
    kinds = {"adam": _lib.OPTIMIZER_ADAM, "sgd": _lib.OPTIMIZER_SGD}
    if kind not in kinds:
        raise ValueError("kind: %r (expected 'adam' or 'sgd')" % (kind,))
    named = [("master", master), ("grad", grad), ("exp_avg", exp_avg), ("exp_avg_sq", exp_avg_sq)]
    bufs = [(n, _arrays.view(a, n, (_lib.FP32,))) for n, a in named if a is not None]
    if working is not None:
        bufs.append(("working", _arrays.view(working, "working", _HP)))
    size = int(np.prod(bufs[0][1].shape))
    for n, b in bufs[1:]:
        if int(np.prod(b.shape)) != size:
            raise ValueError("%s: %d elements but master has %d" % (n, int(np.prod(b.shape)), size))
    dev = _arrays.same_device([b for _, b in bufs], [n for n, _ in bufs])
    p = {n: b.ptr for n, b in bufs}
    cfg = _lib.OptimizerConfig(C.sizeof(_lib.OptimizerConfig), kinds[kind], float(lr), float(betas[0]),
                               float(betas[1]), float(eps), float(weight_decay), int(bool(adam_w_mode)),
                               float(momentum))
    wdt = bufs[-1][1].dtype if working is not None else _lib.BF16
    _lib.check(_lib.lib().gln_optimizer_step(_ctx(dev), C.byref(cfg), _lib.integer("step", step), p["master"],
                                             p["grad"], p.get("exp_avg"), p.get("exp_avg_sq"), size,
                                             p.get("working"), wdt), "gln_optimizer_step")


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
    power_2_scale: bool = False
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
    scale = _lib.real("scale", scale) if delayed else None
    fp8 = _fp8_code(fp8_dtype)
    cfg = _quant_config(gmode, fp8, rowwise, columnwise, delayed, amax_epsilon, power_2_scale, e8m0_rounding)
    rows, cols = b.shape
    L = _lib.lib()
    lay = _lib.QuantLayout()
    _lib.check(L.gln_quant_layout(gmode, fp8, rows, cols, C.byref(lay)), "gln_quant_layout")
    scode = _lib.E8M0 if gmode == _lib.SCALING_MXFP8_1D else _lib.FP32
    q = Quantized(mode, fp8, (rows, cols), power_2_scale=bool(power_2_scale), _gln_mode=gmode)
    if rowwise:
        q.data = _arrays.empty(b, (rows, cols), fp8)
        q.scale_inv = _arrays.empty(b, (lay.scale_rows, lay.scale_cols), scode)
    if columnwise:
        q.col_data = _arrays.empty(b, (rows, cols) if gmode == _lib.SCALING_MXFP8_1D else (cols, rows), fp8)
        q.col_scale_inv = _arrays.empty(b, (lay.col_scale_rows, lay.col_scale_cols), scode)
    if gmode == _lib.SCALING_TENSOR:
        q.amax = _arrays.empty(b, (1,), _lib.FP32, fill=0.0)
        q.scale = _arrays.empty(b, (1,), _lib.FP32, fill=float(scale) if delayed else 1.0)
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
    tout = _lib.plain_tensor(code, q.shape[0], q.shape[1], _arrays.ptr(out))
    _lib.check(_lib.lib().gln_dequantize(_ctx(b.device), C.byref(tin), int(bool(columnwise)), C.byref(tout)),
               "gln_dequantize")
    return out


@dataclass
class GroupedQuantized:
    """N members quantized one by one (per-member amax / scales) and packed back to back in the
    library's grouped layout: `data` [rows, cols]; `col_data` the columnwise copies at the same
    element offsets (each member transposed where the mode transposes); `scale_inv` /
    `col_scale_inv` the members' scale grids concatenated (offsets: `scale_offsets`,
    `col_scale_offsets`); per-tensor modes keep N amax / scale / scale_inv values."""
    mode: str
    fp8_dtype: int
    shape: tuple
    splits: object
    data: object = None
    col_data: object = None
    scale_inv: object = None
    col_scale_inv: object = None
    amax: object = None
    scale: object = None
    scale_offsets: object = None
    col_scale_offsets: object = None
    power_2_scale: bool = False
    _gln_mode: int = field(default=0, repr=False)

    def grouped_tensor(self):
        t = _lib.Tensor(self.fp8_dtype, self.shape[0], self.shape[1], _arrays.ptr(self.data), self._gln_mode,
                        _arrays.ptr(self.scale_inv), _arrays.ptr(self.col_data), _arrays.ptr(self.col_scale_inv),
                        _arrays.ptr(self.amax), _arrays.ptr(self.scale))
        return _lib.GroupedTensor(len(self.splits), self.splits.ctypes.data, 0, t)

    def member(self, i):
        """Member i as a Quantized (views into the packed buffers)."""
        o = np.concatenate([[0], np.cumsum(self.splits)])
        m, cols = int(self.splits[i]), self.shape[1]
        lay = _lib.QuantLayout()
        _lib.check(_lib.lib().gln_quant_layout(self._gln_mode, self.fp8_dtype, m, cols, C.byref(lay)),
                   "gln_quant_layout")
        q = Quantized(self.mode, self.fp8_dtype, (m, cols), power_2_scale=self.power_2_scale, _gln_mode=self._gln_mode)
        tr = self._gln_mode != _lib.SCALING_MXFP8_1D
        if self.data is not None:
            q.data = self.data[o[i]:o[i + 1]]
            a, b = self.scale_offsets[i], self.scale_offsets[i + 1]
            q.scale_inv = self.scale_inv[a:b].reshape(lay.scale_rows, lay.scale_cols)
        if self.col_data is not None:
            flat = self.col_data[o[i] * cols:o[i + 1] * cols]
            q.col_data = flat.reshape((cols, m) if tr else (m, cols))
            a, b = self.col_scale_offsets[i], self.col_scale_offsets[i + 1]
            q.col_scale_inv = self.col_scale_inv[a:b].reshape(lay.col_scale_rows, lay.col_scale_cols)
        if self.amax is not None:
            q.amax, q.scale = self.amax[i:i + 1], self.scale[i:i + 1]
        return q


def grouped_quantize(x, m_splits, mode="current", fp8_dtype="e4m3", rowwise=True, columnwise=False, scale=None,
                     amax_epsilon=0.0, power_2_scale=False, e8m0_rounding="up"):
    """Quantize the N row blocks of x [rows, cols] (m_splits rows each; a list or host array)
    member by member, into one GroupedQuantized.  Modes as quantize(); 'delayed' takes N scales.
    CPU arrays and tensors (host splits)."""
    _check_mode(mode)
    b = _view_2d(x, "x")
    q, cfg = _grouped_output(b, b.shape[1], m_splits, mode, fp8_dtype, rowwise, columnwise, scale, amax_epsilon,
                             power_2_scale, e8m0_rounding)
    gin = _lib.GroupedTensor(len(q.splits), q.splits.ctypes.data, 0, b.tensor())
    gout = q.grouped_tensor()
    _lib.check(_lib.lib().gln_grouped_quantize(_ctx(b.device), C.byref(cfg), C.byref(gin), C.byref(gout)),
               "gln_grouped_quantize")
    return q


_ROUNDING = {"up": _lib.E8M0_ROUND_UP, "floor": _lib.E8M0_ROUND_FLOOR}


def _quant_config(gmode, fp8, rowwise, columnwise, delayed, amax_epsilon, power_2_scale, e8m0_rounding):
    """The gln_quant_config_t of the quantizing calls, every option checked (and named) before
    anything is allocated."""
    if e8m0_rounding not in _ROUNDING:
        raise ValueError("e8m0_rounding: %r (expected 'up' or 'floor')" % (e8m0_rounding,))
    eps = _lib.real("amax_epsilon", amax_epsilon)  # its range: the library's check
    return _lib.quant_config(mode=gmode, fp8_dtype=fp8, rowwise=int(bool(rowwise)), columnwise=int(bool(columnwise)),
                             delayed=delayed, amax_epsilon=eps, power_2_scale=int(bool(power_2_scale)),
                             e8m0_rounding=_ROUNDING[e8m0_rounding])


def _check_mode(mode):
    if mode not in _MODES:
        raise ValueError("mode: %r (expected one of %s)" % (mode, ", ".join(_MODES)))


def _view_2d(x, name):
    b = _arrays.view(x, name, _HP)
    if len(b.shape) != 2:
        raise ValueError("%s: expected a 2-D array, got shape %s" % (name, tuple(b.shape)))
    return b


def _grouped_output(b, cols, m_splits, mode, fp8_dtype, rowwise, columnwise, scale, amax_epsilon, power_2_scale,
                    e8m0_rounding):
    """(GroupedQuantized, QuantConfig) for quantizing b's rows, cut by m_splits, at `cols`
    columns: the output buffers allocated in b's kind and on its device (amax zeroed, scales 1 or
    the delayed scales), and the config the library takes."""
    splits = _lib.int64_array("m_splits", m_splits)
    n = splits.shape[0]
    gmode, delayed = _MODES[mode]
    if delayed and scale is None:
        raise ValueError("scale: mode 'delayed' needs N encode scales")
    if delayed:
        scale = np.array([_lib.real("scale[%d]" % i, v) for i, v in
                          enumerate(np.asarray(scale, dtype=object).reshape(-1))], np.float32)
        if scale.shape != (n,):
            raise ValueError("scale: expected %d encode scales (one per member), got %d" % (n, scale.shape[0]))
    fp8 = _fp8_code(fp8_dtype)
    cfg = _quant_config(gmode, fp8, rowwise, columnwise, delayed, amax_epsilon, power_2_scale, e8m0_rounding)
    rows = b.shape[0]
    ro, co = np.zeros(n + 1, np.int64), np.zeros(n + 1, np.int64)
    _lib.check(_lib.lib().gln_grouped_scale_offsets(gmode, n, splits.ctypes.data, cols, ro.ctypes.data,
                                                    co.ctypes.data),
               "gln_grouped_scale_offsets")
    scode = _lib.E8M0 if gmode == _lib.SCALING_MXFP8_1D else _lib.FP32
    q = GroupedQuantized(mode, fp8, (rows, cols), splits, scale_offsets=ro, col_scale_offsets=co,
                         power_2_scale=bool(power_2_scale), _gln_mode=gmode)
    if rowwise:
        q.data = _arrays.empty(b, (rows, cols), fp8)
        q.scale_inv = _arrays.empty(b, (max(int(ro[n]), 1),), scode)
    if columnwise:
        q.col_data = _arrays.empty(b, (rows * cols,), fp8)
        q.col_scale_inv = _arrays.empty(b, (max(int(co[n]), 1),), scode)
    if gmode == _lib.SCALING_TENSOR:
        q.amax = _arrays.empty(b, (n,), _lib.FP32, fill=0.0)
        q.scale = _arrays.empty(b, (n,), _lib.FP32, fill=1.0)
        if delayed:
            q.scale[...] = scale if not _arrays.is_torch(q.scale) else q.scale.new_tensor(scale)
    return q, cfg


# ---- expert activations -------------------------------------------------------------------------
_ACTIVATIONS = {"swiglu": _lib.ACT_SWIGLU, "gelu": _lib.ACT_GELU}


def _activation(act):
    """The gln_activation_t of an activation's name."""
    code = _ACTIVATIONS.get(act)
    if code is None:
        raise ValueError("activation: %r (expected one of %s)" % (act, ", ".join(_ACTIVATIONS)))
    return code


def _act_width(code, cols):
    """The output width H for an input of `cols` columns.  An odd SwiGLU input is passed on as it
    is: the library rejects it with its own message."""
    return cols // 2 if code == _lib.ACT_SWIGLU else cols


def activation_forward(x, activation="swiglu", out_dtype=None):
    """An expert activation, computed in FP32 and rounded once to out_dtype (default: x's dtype).

    'swiglu': x [rows, 2H] = [a | b] -> silu(a) * b, [rows, H].
    'gelu':   x [rows, H] -> gelu(x) (tanh form), [rows, H]."""
    code = _activation(activation)
    b = _view_2d(x, "x")
    out_code = b.dtype if out_dtype is None else _hp_code(out_dtype, "out_dtype")
    rows, h = b.shape[0], _act_width(code, b.shape[1])
    out = _arrays.empty(b, (rows, h), out_code)
    tin, tout = b.tensor(), _lib.plain_tensor(out_code, rows, h, _arrays.ptr(out))
    _lib.check(_lib.lib().gln_activation_forward(_ctx(b.device), code, C.byref(tin), C.byref(tout)),
               "gln_activation_forward")
    return out


def activation_forward_quantize(x, m_splits, activation="swiglu", mode="current", fp8_dtype="e4m3", hp_dtype=None,
                                rowwise=True, columnwise=False, scale=None, amax_epsilon=0.0, power_2_scale=False,
                                e8m0_rounding="up"):
    """The activation of x's rows quantized in the same pass, into one GroupedQuantized of
    [rows, H]: the input of an FP8 FC2 without writing the high-precision activation.

    x and activation as activation_forward(); m_splits, mode and the quantization options as
    grouped_quantize().  hp_dtype (default: x's dtype) is the dtype the activation's output is
    rounded to before it is quantized.  Every byte of the result equals
        grouped_quantize(activation_forward(x, activation, hp_dtype), m_splits, mode, ...)
    on the same backend (the CUDA backend fuses the two for bf16 input; other calls compose
    them).  CPU arrays and tensors (host splits)."""
    code = _activation(activation)
    _check_mode(mode)
    b = _view_2d(x, "x")
    hp = b.dtype if hp_dtype is None else _hp_code(hp_dtype, "hp_dtype")
    q, cfg = _grouped_output(b, _act_width(code, b.shape[1]), m_splits, mode, fp8_dtype, rowwise, columnwise, scale,
                             amax_epsilon, power_2_scale, e8m0_rounding)
    gin = _lib.GroupedTensor(len(q.splits), q.splits.ctypes.data, 0, b.tensor())
    gout = q.grouped_tensor()
    _lib.check(_lib.lib().gln_activation_forward_quantize(_ctx(b.device), code, hp, C.byref(cfg), C.byref(gin),
                                                          C.byref(gout)),
               "gln_activation_forward_quantize")
    return q


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
        s = _lib.int64_array("m_splits", m_splits)
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


def _grouped_operand(t, name, m_splits):
    """(GroupedTensor, rows, cols, device, n, keepalive) for a high-precision [rows, cols] array
    with m_splits, or a GroupedQuantized (its own splits)."""
    if isinstance(t, GroupedQuantized):
        if m_splits is not None and list(np.asarray(m_splits).reshape(-1)) != list(t.splits):
            raise ValueError("m_splits: differ from the splits %s %s was quantized with" % (list(t.splits), name))
        g = t.grouped_tensor()
        dev = _arrays.view(t.data if t.data is not None else t.col_data, name).device
        return g, t.shape[0], t.shape[1], dev, len(t.splits), (g, t)
    bb = _arrays.view(t, name, _HP)
    if len(bb.shape) != 2:
        raise ValueError("%s: expected a 2-D array, got shape %s" % (name, tuple(bb.shape)))
    if m_splits is None:
        raise ValueError("m_splits: required with high-precision operands")
    n = int(m_splits.numel()) if _arrays.is_torch(m_splits) else len(m_splits)
    sp, on_dev, s = _splits(m_splits, n, bb, bb.shape[0])
    g = _lib.GroupedTensor(n, sp, on_dev, bb.tensor())
    return g, bb.shape[0], bb.shape[1], bb.device, n, (g, s, bb)


def _weight_list(a, name):
    """(list of gln tensors, [rows, cols], device, keepalive) for weights: [N, R, C], a list of
    2-D arrays, or a list of Quantized."""
    if isinstance(a, (list, tuple)) and a and isinstance(a[0], Quantized):
        ts = [q.tensor() for q in a]
        dev = _arrays.view(a[0].data if a[0].data is not None else a[0].col_data, name).device
        return ts, a[0].shape, dev, list(a)
    ws = _weights(a, name)
    return [w.tensor() for w in ws], ws[0].shape, ws[0].device, ws


def _quantized(*ops):
    return [o for o in ops if isinstance(o, (Quantized, GroupedQuantized))] + \
        [q for o in ops if isinstance(o, (list, tuple)) for q in o if isinstance(q, Quantized)]


def grouped_gemm(a, b, m_splits=None, layout="TN", bias=None, out_dtype=None):
    """One grouped GEMM over N members (FP32 accumulation, one rounding of the output).

    layout 'TN' (fprop): a = weights [N, K_out, K_in], b = x [M, K_in]   -> y  [M, K_out], y_i = x_i a_iᵀ (+ bias_i)
    layout 'NN' (dgrad): a = weights [N, K_out, K_in], b = dy [M, K_out] -> dx [M, K_in],  dx_i = dy_i a_i
    layout 'NT' (wgrad): a = x [M, K_in], b = dy [M, K_out]             -> dW [N, K_out, K_in], dW_i = dy_iᵀ x_i
    m_splits: N row counts (a list, or an int64 tensor on the operands' device).  Weights may also
    be a list of N 2-D arrays; bias is [N, K_out] (TN only).  Rows past sum(m_splits) of the output
    are zero.

    Quantized operands (both or neither): weights as a list of Quantized (quantize(); rowwise for
    TN, columnwise for NN) and grouped operands as GroupedQuantized (grouped_quantize(); rowwise
    for TN / NN's b, columnwise for both NT operands), whose splits are used.  The output is then
    fp32 unless out_dtype says otherwise."""
    if layout not in _LAYOUTS:
        raise ValueError("layout: %r (expected 'TN', 'NN' or 'NT')" % (layout,))
    L = _lib.lib()
    gl = _LAYOUTS[layout]
    quant = _quantized(a, b)
    gb, rows_b, cols_b, dev, n, keep_b = _grouped_operand(b, "b", m_splits)
    if out_dtype is not None:
        code = _hp_code(out_dtype, "out_dtype")
    elif quant:
        code = _lib.FP32
    else:
        code = _arrays.view(b, "b").dtype
    like = _arrays.Buf(_pick_array(b), None, (), code, dev)
    args = _lib.GroupedGemmArgs()
    args.size = C.sizeof(_lib.GroupedGemmArgs)
    args.layout = gl
    args.block_scales_pow2 = int(bool(quant) and all(q.power_2_scale for q in quant))
    keep = [keep_b]
    if gl == _lib.LAYOUT_NT:
        ga, rows_a, cols_a, dev_a, n_a, keep_a = _grouped_operand(a, "a", m_splits if not quant else None)
        if dev_a != dev:
            raise ValueError("a: on %s:%d but b is on %s:%d" % (dev_a + dev))
        out = _arrays.empty(like, (n, cols_b, cols_a), code)
        step = cols_b * cols_a * L.gln_dtype_size(code)
        base = _arrays.ptr(out) or 0
        dl = (_lib.Tensor * n)(*[_lib.plain_tensor(code, cols_b, cols_a, (base + i * step) or None) for i in range(n)])
        args.a_grouped, args.b, args.d_list = C.pointer(ga), C.pointer(gb), dl
        keep += [keep_a, dl]
    else:
        ts, wshape, dev_a, keep_a = _weight_list(a, "a")
        if len(ts) != n:
            raise ValueError("m_splits: %d splits for %d weights in a (one per member)" % (n, len(ts)))
        if dev_a != dev:
            raise ValueError("a: on %s:%d but b is on %s:%d" % (dev_a + dev))
        al = (_lib.Tensor * n)(*ts)
        cols = wshape[0] if gl == _lib.LAYOUT_TN else wshape[1]
        out = _arrays.empty(like, (rows_b, cols), code, fill=0)
        gd = _lib.GroupedTensor(n, gb.splits, gb.splits_on_backend,
                                _lib.plain_tensor(code, rows_b, cols, _arrays.ptr(out)))
        args.a_list, args.b, args.d_grouped = al, C.pointer(gb), C.pointer(gd)
        keep += [al, gd, keep_a]
        if bias is not None:
            if gl != _lib.LAYOUT_TN:
                raise ValueError("bias: only the 'TN' (fprop) layout adds a bias")
            bs = _bias_list(bias, n)
            bl = (_lib.Tensor * n)(*[_lib.plain_tensor(x.dtype, 1, x.shape[-1], x.ptr)
                                     for x in bs])
            args.bias_list = bl
            keep += [bl, bs]
    _lib.check(L.gln_grouped_gemm(_ctx(dev), C.byref(args)), "gln_grouped_gemm")
    return out


def _pick_array(t):
    """An array of the operand's kind and device (for allocating the output like it)."""
    if isinstance(t, GroupedQuantized):
        return t.data if t.data is not None else t.col_data
    return t


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
