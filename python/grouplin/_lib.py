"""ctypes view of include/grouplin.h: loading the library, the structs field by field, the
prototypes, and the status -> exception mapping.  No numerics and no array handling live here.

The library is found, in order: $GROUPLIN_LIBRARY (a path to any libgrouplin.so, e.g. a CUDA
build tree's build/src/libgrouplin.so), then the copy installed inside this package.
"""
import ctypes as C
import math
import numbers
import operator
import os
import threading

# ---- enums (values from include/grouplin.h) ------------------------------------------------
FP32, BF16, FP16, E4M3, E5M2, E8M0, INT32, INT64 = range(8)
SCALING_NONE, SCALING_TENSOR, SCALING_MXFP8_1D, SCALING_BLOCK_1D, SCALING_BLOCK_2D = range(5)
BACKEND_CPU, BACKEND_CUDA = 0, 1
LAYOUT_TN, LAYOUT_NN, LAYOUT_NT = 0, 1, 2
RECIPE_NONE, RECIPE_FP8_DELAYED, RECIPE_FP8_CURRENT, RECIPE_MXFP8, RECIPE_FP8_BLOCK = range(5)
FP8_FORMAT_E4M3, FP8_FORMAT_HYBRID, FP8_FORMAT_RECIPE_DEFAULT = 0, 1, 2
PATH_SPLIT, PATH_GROUPED = 0, 1
MICROBATCH_UNSET, MICROBATCH_FIRST, MICROBATCH_NEXT = 0, 1, 2
AMAX_ALGO_MAX, AMAX_ALGO_MOST_RECENT = 0, 1
E8M0_ROUND_UP, E8M0_ROUND_FLOOR = 0, 1
COPY_HOST_TO_BACKEND, COPY_BACKEND_TO_HOST, COPY_BACKEND_TO_BACKEND = 0, 1, 2
ACT_SWIGLU, ACT_GELU = 0, 1

STATUS_SUCCESS, STATUS_INVALID_ARGUMENT, STATUS_NOT_SUPPORTED, STATUS_OUT_OF_MEMORY = 0, 1, 2, 3
STATUS_INVALID_STATE, STATUS_BACKEND_ERROR, STATUS_COMM_ERROR, STATUS_INTERNAL_ERROR = 4, 5, 6, 7


# ---- exceptions: one class per status, each also the matching builtin --------------------------
class GrouplinError(RuntimeError):
    """A grouplin call failed; `status` is the gln_status_t, the message is gln_last_error()."""
    status = STATUS_INTERNAL_ERROR


class InvalidArgumentError(GrouplinError, ValueError):
    status = STATUS_INVALID_ARGUMENT


class NotSupportedError(GrouplinError, NotImplementedError):
    status = STATUS_NOT_SUPPORTED


class OutOfMemoryError(GrouplinError, MemoryError):
    status = STATUS_OUT_OF_MEMORY


class InvalidStateError(GrouplinError):
    status = STATUS_INVALID_STATE


class BackendError(GrouplinError):
    status = STATUS_BACKEND_ERROR


class CommError(GrouplinError):
    status = STATUS_COMM_ERROR


_ERRORS = {c.status: c for c in (InvalidArgumentError, NotSupportedError, OutOfMemoryError,
                                 InvalidStateError, BackendError, CommError)}


# ---- structs ------------------------------------------------------------------------------------
class Tensor(C.Structure):
    _fields_ = [("dtype", C.c_int), ("rows", C.c_int64), ("cols", C.c_int64), ("data", C.c_void_p),
                ("scaling", C.c_int), ("scale_inv", C.c_void_p), ("col_data", C.c_void_p),
                ("col_scale_inv", C.c_void_p), ("amax", C.c_void_p), ("scale", C.c_void_p)]


def plain_tensor(dtype, rows, cols, ptr):
    """A high-precision tensor descriptor (no scaling, no scales): the fields left out are 0 / NULL."""
    return Tensor(dtype, rows, cols, ptr, SCALING_NONE)


class QuantLayout(C.Structure):
    _fields_ = [("data_bytes", C.c_size_t), ("col_data_bytes", C.c_size_t), ("scale_bytes", C.c_size_t),
                ("col_scale_bytes", C.c_size_t), ("scale_rows", C.c_int64), ("scale_cols", C.c_int64),
                ("col_scale_rows", C.c_int64), ("col_scale_cols", C.c_int64)]


class QuantConfig(C.Structure):
    _fields_ = [("size", C.c_size_t), ("mode", C.c_int), ("fp8_dtype", C.c_int), ("rowwise", C.c_int),
                ("columnwise", C.c_int), ("delayed", C.c_int), ("amax_epsilon", C.c_float),
                ("power_2_scale", C.c_int), ("e8m0_rounding", C.c_int), ("amax_nan_propagate", C.c_int)]


class GroupedTensor(C.Structure):
    _fields_ = [("num", C.c_int32), ("splits", C.c_void_p), ("splits_on_backend", C.c_int),
                ("packed", Tensor)]


class GroupedGemmArgs(C.Structure):
    _fields_ = [("size", C.c_size_t), ("layout", C.c_int), ("a_list", C.POINTER(Tensor)),
                ("a_grouped", C.POINTER(GroupedTensor)), ("b", C.POINTER(GroupedTensor)),
                ("d_grouped", C.POINTER(GroupedTensor)), ("d_list", C.POINTER(Tensor)),
                ("bias_list", C.POINTER(Tensor)), ("accumulate", C.c_int), ("block_scales_pow2", C.c_int)]


class OptimizerConfig(C.Structure):
    _fields_ = [("size", C.c_size_t), ("kind", C.c_int), ("lr", C.c_float), ("beta1", C.c_float),
                ("beta2", C.c_float), ("eps", C.c_float), ("weight_decay", C.c_float), ("adam_w_mode", C.c_int),
                ("momentum", C.c_float), ("bias_corrections", C.c_void_p)]


OPTIMIZER_ADAM, OPTIMIZER_SGD = 0, 1


ALLOC_FN = C.CFUNCTYPE(C.c_void_p, C.c_size_t, C.c_void_p, C.c_void_p)
FREE_FN = C.CFUNCTYPE(None, C.c_void_p, C.c_void_p, C.c_void_p)


class ContextOptions(C.Structure):
    _fields_ = [("size", C.c_size_t), ("backend", C.c_int), ("device", C.c_int), ("num_threads", C.c_int),
                ("stream", C.c_void_p), ("alloc", ALLOC_FN), ("free", FREE_FN), ("alloc_user", C.c_void_p)]


# Distributed-weight protocol hooks (gln_dist_weights_t).
REQUIRES_GRAD_FN = C.CFUNCTYPE(C.c_int, C.c_void_p)
MATERIALIZE_FN = C.CFUNCTYPE(C.c_int, C.c_void_p, C.POINTER(Tensor))
GRAD_BUFFER_FN = C.CFUNCTYPE(C.c_int, C.c_void_p, C.c_int32, C.POINTER(C.POINTER(C.c_float)))
FINALIZE_FN = C.CFUNCTYPE(C.c_int, C.c_void_p, C.c_int, C.POINTER(C.c_int))
WAIT_FN = C.CFUNCTYPE(C.c_int, C.c_void_p)
PREFETCH_FN = C.CFUNCTYPE(C.c_int, C.c_void_p, C.c_int)


class DistWeights(C.Structure):
    _fields_ = [("size", C.c_size_t), ("impl", C.c_void_p), ("num_experts", C.c_int32),
                ("out_features", C.c_int64), ("in_features", C.c_int64),
                ("requires_grad", REQUIRES_GRAD_FN), ("materialize_forward", MATERIALIZE_FN),
                ("materialize_backward", MATERIALIZE_FN), ("release", MATERIALIZE_FN),
                ("grad_buffer", GRAD_BUFFER_FN), ("finalize_grads", FINALIZE_FN), ("wait", WAIT_FN),
                # version 2: optional (NULL when the Python object does not define prefetch)
                ("prefetch", PREFETCH_FN)]


class GroupedLinearParams(C.Structure):
    _fields_ = [("weights", C.POINTER(C.c_void_p)), ("weight_packed", C.c_void_p),
                ("biases", C.POINTER(C.c_void_p)), ("bias_packed", C.c_void_p),
                ("main_grads", C.POINTER(C.c_void_p)), ("main_grad_packed", C.c_void_p),
                ("distributed", C.POINTER(DistWeights))]


class GroupedLinearConfig(C.Structure):
    _fields_ = [("size", C.c_size_t), ("num_experts", C.c_int32), ("in_features", C.c_int64),
                ("out_features", C.c_int64), ("bias", C.c_int), ("param_dtype", C.c_int),
                ("activation_dtype", C.c_int), ("recipe", C.c_int), ("fp8_format", C.c_int), ("path", C.c_int),
                ("fuse_wgrad_accumulation", C.c_int), ("delay_wgrad_compute", C.c_int),
                ("single_grouped_weight", C.c_int), ("single_grouped_bias", C.c_int),
                ("save_original_input", C.c_int), ("weights_require_grad", C.c_int),
                ("amax_history_len", C.c_int), ("margin", C.c_int), ("amax_algo", C.c_int),
                ("power_2_scales", C.c_int), ("block_fp32_scales", C.c_int), ("amax_epsilon", C.c_float),
                ("e8m0_rounding", C.c_int), ("seed", C.c_uint64), ("init_std", C.c_float),
                ("params", GroupedLinearParams), ("always_roll", C.c_int), ("amax_nan_propagate", C.c_int)]


class ForwardArgs(C.Structure):
    _fields_ = [("size", C.c_size_t), ("x", C.POINTER(Tensor)), ("m_splits", C.c_void_p),
                ("splits_on_backend", C.c_int), ("y", C.POINTER(Tensor)), ("microbatch", C.c_int),
                ("input_requires_grad", C.c_int)]


# ---- Python values into C fields ----------------------------------------------------------------
# ctypes stores an integer into a narrower field silently modulo 2^bits and float() truncates
# nothing but accepts strings: every value written into a C field or array passes through these
# checks first, so a value that does not fit raises ValueError naming the argument instead.
MAX_DIM = MAX_ELEMS = 1 << 56   # GLN_MAX_DIM, GLN_MAX_ELEMS
FLT_MAX = 3.4028234663852886e38
_INT_TYPES = {C.c_int8, C.c_int16, C.c_int32, C.c_int64, C.c_uint8, C.c_uint16, C.c_uint32, C.c_uint64,
              C.c_int, C.c_long, C.c_longlong, C.c_uint, C.c_ulong, C.c_ulonglong, C.c_size_t}


def int_range(ctype):
    """[lo, hi] of an integer ctypes type."""
    bits = 8 * C.sizeof(ctype)
    if ctype(-1).value < 0:
        return -(1 << (bits - 1)), (1 << (bits - 1)) - 1
    return 0, (1 << bits) - 1


def _scalar(value):
    """A numpy scalar, 0-d array or 0-d tensor as its Python value; anything else unchanged."""
    if getattr(value, "ndim", None) == 0 and hasattr(value, "item"):
        return value.item()
    return value


def integer(name, value, lo=None, hi=None, ctype=C.c_int64):
    """`value` as a Python int: an integer (int, numpy integer, a 0-d integer array or tensor;
    bool as 0 / 1), or a float with an integral value; in [lo, hi] (default: the range of
    `ctype`).  TypeError / ValueError naming `name` otherwise -- never a silent truncation."""
    value = _scalar(value)
    if isinstance(value, (str, bytes)):
        raise TypeError("%s: expected an integer, got the string %r" % (name, value))
    try:
        v = operator.index(value)
    except TypeError:
        if not isinstance(value, numbers.Real):
            raise TypeError("%s: expected an integer, got %s" % (name, type(value).__name__)) from None
        f = float(value)
        if not math.isfinite(f) or f != math.floor(f):
            raise ValueError("%s: %r is not an integer" % (name, value)) from None
        v = int(f)
    clo, chi = int_range(ctype)
    lo = clo if lo is None else lo
    hi = chi if hi is None else hi
    if not lo <= v <= hi:
        raise ValueError("%s: %d is out of range (expected an integer in [%d, %d])" % (name, v, lo, hi))
    return v


def real(name, value, finite=False, minimum=None):
    """`value` as a Python float that a C float holds (|value| <= FLT_MAX, or NaN / Inf unless
    `finite`; >= minimum when given).  TypeError / ValueError naming `name` otherwise."""
    value = _scalar(value)
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise TypeError("%s: expected a number, got %r" % (name, value))
    f = float(value)
    if math.isfinite(f) and abs(f) > FLT_MAX:
        raise ValueError("%s: %r does not fit a 32-bit float (|x| <= %g)" % (name, value, FLT_MAX))
    if finite and not math.isfinite(f):
        raise ValueError("%s: %r must be finite" % (name, value))
    if minimum is not None and not f >= minimum:
        raise ValueError("%s: %r must be >= %g" % (name, value, minimum))
    return f


def int64_array(name, values):
    """A contiguous 1-D numpy int64 array of `values` (a list, tuple, numpy array or CPU tensor
    of integers), each checked by integer() as name[i]: no float truncation, no wrap at 2^63."""
    import numpy as np
    if hasattr(values, "detach") and hasattr(values, "cpu"):   # a torch tensor
        values = values.detach().cpu().numpy()
    if isinstance(values, np.ndarray):
        if values.dtype.kind in "iu" and (values.dtype.kind == "i" or values.dtype.itemsize < 8):
            return np.ascontiguousarray(values.astype(np.int64).reshape(-1))
        values = values.reshape(-1).tolist()
    if isinstance(values, (str, bytes)) or not hasattr(values, "__iter__"):
        raise TypeError("%s: expected a sequence of integers, got %s" % (name, type(values).__name__))
    return np.array([integer("%s[%d]" % (name, i), v) for i, v in enumerate(values)], dtype=np.int64)


def check_layer_sizes(what, num_experts, out_features, in_features, n_name="num_experts"):
    """The library's size limits for N expert weights [out_features, in_features], checked
    before anything is allocated: N in [1, 2^31 - 1], each dimension in [1, GLN_MAX_DIM], and
    N x out_features x in_features <= GLN_MAX_ELEMS.  ValueError naming the argument."""
    for name, v in ((n_name, num_experts), ("in_features", in_features), ("out_features", out_features)):
        if not isinstance(v, numbers.Integral) or isinstance(v, bool):
            raise ValueError("%s: %s must be a positive int, got %r" % (what, name, v))
    integer("%s: %s" % (what, n_name), num_experts, lo=1, hi=(1 << 31) - 1)
    integer("%s: in_features" % what, in_features, lo=1, hi=MAX_DIM)
    integer("%s: out_features" % what, out_features, lo=1, hi=MAX_DIM)
    if int(num_experts) * int(out_features) * int(in_features) > MAX_ELEMS:
        raise ValueError("%s: %s x out_features x in_features = %d x %d x %d weights exceed GLN_MAX_ELEMS = 2^56"
                         % (what, n_name, num_experts, out_features, in_features))


def set_fields(cfg, what, kw):
    """setattr for every keyword, each value checked against its field's C type (ValueError /
    TypeError naming the field, `what`.field)."""
    types = {}
    for klass in reversed(type(cfg).__mro__):
        types.update({f[0]: f[1] for f in getattr(klass, "_fields_", [])})
    for k, v in kw.items():
        t = types.get(k)
        if t is None:
            raise TypeError("%s: no field %r" % (what, k))
        if t in _INT_TYPES:
            v = integer(k, v, ctype=t)
        elif t in (C.c_float, C.c_double):
            v = real(k, v)
        setattr(cfg, k, v)
    return cfg


def quant_config(**kw):
    """GLN_QUANT_CONFIG_INIT with fields overridden by keyword (each value checked to fit)."""
    cfg = QuantConfig(C.sizeof(QuantConfig), SCALING_TENSOR, E4M3, 1, 0, 0, 0.0, 0, E8M0_ROUND_UP, 0)
    return set_fields(cfg, "gln_quant_config_t", kw)


def layer_config(**kw):
    """GLN_GROUPED_LINEAR_CONFIG_INIT with fields overridden by keyword."""
    cfg = GroupedLinearConfig()
    cfg.size = C.sizeof(GroupedLinearConfig)
    defaults = dict(num_experts=1, bias=1, param_dtype=BF16, activation_dtype=BF16, recipe=RECIPE_NONE,
                    fp8_format=FP8_FORMAT_RECIPE_DEFAULT, path=PATH_SPLIT, weights_require_grad=1,
                    amax_history_len=1024, amax_algo=AMAX_ALGO_MAX, e8m0_rounding=E8M0_ROUND_UP,
                    seed=1234, init_std=0.023)
    defaults.update(kw)
    return set_fields(cfg, "gln_grouped_linear_config_t", defaults)


# ---- prototypes ---------------------------------------------------------------------------------
_P = C.c_void_p
_PT = C.POINTER(Tensor)
_PROTOTYPES = [
    ("gln_status_string", C.c_char_p, [C.c_int]),
    ("gln_last_error", C.c_char_p, []),
    ("gln_clear_error", None, []),
    ("gln_version", None, [C.POINTER(C.c_int)] * 3),
    ("gln_dtype_size", C.c_size_t, [C.c_int]),
    ("gln_fp8_max", C.c_float, [C.c_int]),
    ("gln_fp32_to_bf16", C.c_uint16, [C.c_float]),
    ("gln_bf16_to_fp32", C.c_float, [C.c_uint16]),
    ("gln_fp32_to_fp16", C.c_uint16, [C.c_float]),
    ("gln_fp16_to_fp32", C.c_float, [C.c_uint16]),
    ("gln_fp32_to_fp8", C.c_uint8, [C.c_float, C.c_int]),
    ("gln_fp8_to_fp32", C.c_float, [C.c_uint8, C.c_int]),
    ("gln_e8m0_from_amax", C.c_uint8, [C.c_float, C.c_int, C.c_int]),
    ("gln_e8m0_to_fp32", C.c_float, [C.c_uint8]),
    ("gln_e8m0_inverse", C.c_float, [C.c_uint8]),
    ("gln_scale_from_amax", C.c_float, [C.c_float, C.c_float, C.c_int, C.c_float, C.c_float]),
    ("gln_backend_available", C.c_int, [C.c_int]),
    ("gln_context_create", C.c_int, [C.POINTER(ContextOptions), C.POINTER(_P)]),
    ("gln_context_destroy", C.c_int, [_P]),
    ("gln_context_set_stream", C.c_int, [_P, _P]),
    ("gln_context_async_error", C.c_int, [_P]),
    ("gln_synchronize", C.c_int, [_P]),
    ("gln_memcpy", C.c_int, [_P, _P, _P, C.c_size_t, C.c_int]),
    ("gln_quant_layout", C.c_int, [C.c_int, C.c_int, C.c_int64, C.c_int64, C.POINTER(QuantLayout)]),
    ("gln_grouped_scale_offsets", C.c_int, [C.c_int, C.c_int32, _P, C.c_int64, _P, _P]),
    ("gln_quantize", C.c_int, [_P, C.POINTER(QuantConfig), _PT, _PT]),
    ("gln_dequantize", C.c_int, [_P, _PT, C.c_int, _PT]),
    ("gln_grouped_quantize", C.c_int, [_P, C.POINTER(QuantConfig), C.POINTER(GroupedTensor),
                                       C.POINTER(GroupedTensor)]),
    ("gln_activation_forward", C.c_int, [_P, C.c_int, _PT, _PT]),
    ("gln_activation_forward_quantize", C.c_int, [_P, C.c_int, C.c_int, C.POINTER(QuantConfig),
                                                  C.POINTER(GroupedTensor), C.POINTER(GroupedTensor)]),
    ("gln_cast", C.c_int, [_P, _PT, _PT]),
    ("gln_amax", C.c_int, [_P, _PT, C.POINTER(C.c_float)]),
    ("gln_optimizer_step", C.c_int, [_P, C.POINTER(OptimizerConfig), C.c_int64, _P, _P, _P, _P, C.c_int64, _P,
                                     C.c_int]),
    ("gln_grouped_gemm", C.c_int, [_P, C.POINTER(GroupedGemmArgs)]),
    ("gln_grouped_linear_create", C.c_int, [_P, C.POINTER(GroupedLinearConfig), C.POINTER(_P)]),
    ("gln_grouped_linear_destroy", C.c_int, [_P]),
    ("gln_grouped_linear_forward", C.c_int, [_P, C.POINTER(ForwardArgs), C.POINTER(_P)]),
    ("gln_grouped_linear_backward", C.c_int, [_P, _PT, _PT]),
    ("gln_grouped_linear_backward_dw", C.c_int, [_P]),
    ("gln_grouped_linear_saved_release", C.c_int, [_P]),
    ("gln_grouped_linear_weights_updated", C.c_int, [_P]),
    ("gln_grouped_linear_grads", C.c_int, [_P, C.c_int32, C.POINTER(_P), C.POINTER(_P)]),
    ("gln_grouped_linear_zero_grad", C.c_int, [_P]),
    ("gln_grouped_linear_fp8_state", C.c_int, [_P, C.c_int, C.POINTER(C.POINTER(C.c_float)),
                                               C.POINTER(C.POINTER(C.c_float)), C.POINTER(C.c_int32),
                                               C.POINTER(C.c_int32)]),
]

_lock = threading.Lock()
_lib = None


def library_path():
    """The libgrouplin.so this process loads: $GROUPLIN_LIBRARY, else the packaged copy."""
    env = os.environ.get("GROUPLIN_LIBRARY")
    if env:
        if not os.path.isfile(env):
            raise OSError("GROUPLIN_LIBRARY=%s: no such file (point it at a built libgrouplin.so)" % env)
        return os.path.abspath(env)
    here = os.path.join(os.path.dirname(os.path.abspath(__file__)), "libgrouplin.so")
    if os.path.isfile(here):
        return here
    raise OSError("libgrouplin.so not found: install the package (pip install .) or set "
                  "GROUPLIN_LIBRARY to a built library (e.g. build/src/libgrouplin.so)")


def lib():
    """The loaded library (loaded once per process, prototypes set)."""
    global _lib
    with _lock:
        if _lib is None:
            L = C.CDLL(library_path())
            for name, res, args in _PROTOTYPES:
                f = getattr(L, name)
                f.restype = res
                f.argtypes = args
            _lib = L
        return _lib


def last_error():
    return (lib().gln_last_error() or b"").decode(errors="replace")


def check(status, what=None):
    """Raise the exception class of a failing status, with the library's message (which names the
    call, the argument and the valid range).  `what` is added when the message is empty."""
    if status == STATUS_SUCCESS:
        return
    msg = last_error() or "%s failed" % (what or "grouplin call")
    name = (lib().gln_status_string(status) or b"").decode()
    raise _ERRORS.get(status, GrouplinError)("%s (%s)" % (msg, name))
