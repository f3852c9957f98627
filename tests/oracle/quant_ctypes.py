"""ctypes bindings of libgrouplin's numerics and quantization API, for the quantization oracle.

Only marshalling lives here: no numerics.  Structures mirror include/grouplin.h field by field.
"""
import ctypes as C

import numpy as np

FP32, BF16, FP16, E4M3, E5M2, E8M0 = 0, 1, 2, 3, 4, 5
NONE, TENSOR, MXFP8, BLOCK_1D, BLOCK_2D = 0, 1, 2, 3, 4
ROUND_UP, ROUND_FLOOR = 0, 1


class Tensor(C.Structure):
    _fields_ = [("dtype", C.c_int), ("rows", C.c_int64), ("cols", C.c_int64), ("data", C.c_void_p),
                ("scaling", C.c_int), ("scale_inv", C.c_void_p), ("col_data", C.c_void_p),
                ("col_scale_inv", C.c_void_p), ("amax", C.c_void_p), ("scale", C.c_void_p)]


class QuantLayout(C.Structure):
    _fields_ = [("data_bytes", C.c_size_t), ("col_data_bytes", C.c_size_t), ("scale_bytes", C.c_size_t),
                ("col_scale_bytes", C.c_size_t), ("scale_rows", C.c_int64), ("scale_cols", C.c_int64),
                ("col_scale_rows", C.c_int64), ("col_scale_cols", C.c_int64)]


class QuantConfig(C.Structure):
    _fields_ = [("size", C.c_size_t), ("mode", C.c_int), ("fp8_dtype", C.c_int), ("rowwise", C.c_int),
                ("columnwise", C.c_int), ("delayed", C.c_int), ("amax_epsilon", C.c_float),
                ("power_2_scale", C.c_int), ("e8m0_rounding", C.c_int), ("amax_nan_propagate", C.c_int)]


class DelayedUpdateOptions(C.Structure):
    _fields_ = [("size", C.c_size_t), ("always_roll", C.c_int), ("amax_nan_propagate", C.c_int)]


class GroupedTensor(C.Structure):
    _fields_ = [("num", C.c_int32), ("splits", C.c_void_p), ("splits_on_backend", C.c_int),
                ("packed", Tensor)]


def ptr(a):
    return None if a is None else a.ctypes.data_as(C.c_void_p)


class Lib:
    def __init__(self, path):
        L = C.CDLL(path)
        self.L = L
        L.gln_last_error.restype = C.c_char_p
        for name, res, args in [
            ("gln_fp32_to_bf16", C.c_uint16, [C.c_float]),
            ("gln_bf16_to_fp32", C.c_float, [C.c_uint16]),
            ("gln_fp32_to_fp16", C.c_uint16, [C.c_float]),
            ("gln_fp16_to_fp32", C.c_float, [C.c_uint16]),
            ("gln_fp32_to_fp8", C.c_uint8, [C.c_float, C.c_int]),
            ("gln_fp8_to_fp32", C.c_float, [C.c_uint8, C.c_int]),
            ("gln_e8m0_from_amax", C.c_uint8, [C.c_float, C.c_int, C.c_int]),
            ("gln_e8m0_to_fp32", C.c_float, [C.c_uint8]),
            ("gln_e8m0_inverse", C.c_float, [C.c_uint8]),
            ("gln_fp8_max", C.c_float, [C.c_int]),
            ("gln_scale_from_amax", C.c_float, [C.c_float, C.c_float, C.c_int, C.c_float, C.c_float]),
            ("gln_context_create", C.c_int, [C.c_void_p, C.POINTER(C.c_void_p)]),
            ("gln_context_destroy", C.c_int, [C.c_void_p]),
            ("gln_quant_layout", C.c_int, [C.c_int, C.c_int, C.c_int64, C.c_int64, C.POINTER(QuantLayout)]),
            ("gln_quantize", C.c_int, [C.c_void_p, C.POINTER(QuantConfig), C.POINTER(Tensor), C.POINTER(Tensor)]),
            ("gln_dequantize", C.c_int, [C.c_void_p, C.POINTER(Tensor), C.c_int, C.POINTER(Tensor)]),
            ("gln_grouped_quantize", C.c_int, [C.c_void_p, C.POINTER(QuantConfig), C.POINTER(GroupedTensor),
                                               C.POINTER(GroupedTensor)]),
            ("gln_mxfp8_swizzle_scales", C.c_int, [C.c_void_p, C.c_int64, C.c_int64, C.c_int, C.c_void_p,
                                                   C.c_void_p]),
            ("gln_amax_ex", C.c_int, [C.c_void_p, C.POINTER(Tensor), C.c_int, C.POINTER(C.c_float)]),
            ("gln_delayed_scaling_update", C.c_int, [C.c_int32, C.c_int32, C.c_void_p, C.c_void_p, C.c_void_p,
                                                     C.c_int, C.c_int]),
            ("gln_delayed_scaling_update_ex", C.c_int, [C.c_int32, C.c_int32, C.c_void_p, C.c_void_p,
                                                        C.c_void_p, C.c_int, C.c_int,
                                                        C.POINTER(DelayedUpdateOptions)]),
        ]:
            f = getattr(L, name)
            f.restype = res
            f.argtypes = args
        self.ctx = C.c_void_p()
        self.ok(L.gln_context_create(None, C.byref(self.ctx)), "gln_context_create")

    def ok(self, status, what):
        if status != 0:
            raise RuntimeError("%s failed: status %d: %s" % (what, status, self.L.gln_last_error().decode()))

    def layout(self, mode, dtype, rows, cols):
        l = QuantLayout()
        self.ok(self.L.gln_quant_layout(mode, dtype, rows, cols, C.byref(l)), "gln_quant_layout")
        return l

    @staticmethod
    def config(mode, fp8, rowwise=1, columnwise=0, delayed=0, eps=0.0, pow2=0, rounding=ROUND_UP, nanp=0):
        return QuantConfig(C.sizeof(QuantConfig), mode, fp8, rowwise, columnwise, delayed, eps, pow2, rounding,
                           nanp)

    def quantize(self, x_bits, in_dtype, cfg, scale=None, amax=None):
        """Quantize the 2-D array x_bits (float32, or uint16 bits of bf16/fp16).  Returns a dict of
        numpy arrays: data, col_data, scale_inv, col_scale_inv, amax, scale."""
        rows, cols = x_bits.shape
        l = self.layout(cfg.mode, cfg.fp8_dtype, rows, cols)
        sdt = np.uint8 if cfg.mode == MXFP8 else np.float32
        ssz = 1 if cfg.mode == MXFP8 else 4
        out = {
            "data": np.full(max(l.data_bytes, 1), 0xA5, np.uint8),
            "col_data": np.full(max(l.col_data_bytes, 1), 0xA5, np.uint8),
            "scale_inv": np.full(max(l.scale_bytes // ssz, 1), 0xA5 if ssz == 1 else np.nan, sdt),
            "col_scale_inv": np.full(max(l.col_scale_bytes // ssz, 1), 0xA5 if ssz == 1 else np.nan, sdt),
            "amax": np.array([0.0 if amax is None else amax], np.float32),
            "scale": np.array([np.nan if scale is None else scale], np.float32),
        }
        x = np.ascontiguousarray(x_bits)
        tin = Tensor(in_dtype, rows, cols, ptr(x), NONE, None, None, None, None, None)
        tout = Tensor(cfg.fp8_dtype, rows, cols, ptr(out["data"]), cfg.mode, ptr(out["scale_inv"]),
                      ptr(out["col_data"]), ptr(out["col_scale_inv"]), ptr(out["amax"]), ptr(out["scale"]))
        self.ok(self.L.gln_quantize(self.ctx, C.byref(cfg), C.byref(tin), C.byref(tout)), "gln_quantize")
        out["data"] = out["data"][:l.data_bytes]
        out["col_data"] = out["col_data"][:l.col_data_bytes]
        out["scale_inv"] = out["scale_inv"][:l.scale_bytes // ssz].reshape(l.scale_rows, l.scale_cols)
        out["col_scale_inv"] = out["col_scale_inv"][:l.col_scale_bytes // ssz].reshape(l.col_scale_rows,
                                                                                        l.col_scale_cols)
        out["layout"] = l
        return out
