"""Independent numpy + ml_dtypes model of grouplin's quantization numerics.

Nothing here calls libgrouplin.  FP8 casts use ml_dtypes (round to nearest even) with the
saturation done here (ml_dtypes maps overflow to NaN/Inf, grouplin saturates to +-max); the E8M0
rules are written in terms of log2 through np.frexp rather than on the bits.
"""
import ml_dtypes
import numpy as np

E4M3, E5M2 = 3, 4
FP32, BF16, FP16 = 0, 1, 2
FP8_MAX = {E4M3: np.float32(448.0), E5M2: np.float32(57344.0)}
FP8_NP = {E4M3: ml_dtypes.float8_e4m3fn, E5M2: ml_dtypes.float8_e5m2}
EMAX_ELEM = {E4M3: 8, E5M2: 15}
FLT_MAX = np.float32(np.finfo(np.float32).max)
HP_MAX = {FP32: FLT_MAX, BF16: np.float32(ml_dtypes.finfo(ml_dtypes.bfloat16).max), FP16: np.float32(65504.0)}


def f32(x):
    return np.asarray(x, dtype=np.float32)


def sat_fp8(y, fmt):
    """float32 array -> uint8 FP8 codes: RNE, saturate to +-max (Inf included), NaN -> sign|0x7F."""
    y = f32(y)
    m = FP8_MAX[fmt]
    codes = np.clip(y, -m, m).astype(FP8_NP[fmt]).view(np.uint8).copy()
    nan = np.isnan(y)
    codes[nan] = (np.signbit(y[nan]).astype(np.uint8) << 7) | 0x7F
    return codes


def fp8_to_f32(codes, fmt):
    return np.asarray(codes, np.uint8).view(FP8_NP[fmt]).astype(np.float32)


def widen(x_bits, dtype):
    """Input array (float32, or uint16 bits) -> float32 values."""
    if dtype == BF16:
        return np.asarray(x_bits, np.uint16).view(ml_dtypes.bfloat16).astype(np.float32)
    if dtype == FP16:
        return np.asarray(x_bits, np.uint16).view(np.float16).astype(np.float32)
    return f32(x_bits)


def amax_nan(a, axis=None):
    """max |a| with NaN propagating (numpy's max does propagate NaN); 0 for empty."""
    a = np.abs(f32(a))
    if a.size == 0:
        return np.float32(0.0)
    return np.max(a, axis=axis).astype(np.float32)


def amax_fmax(a, axis=None):
    """max |a| as TE's fmaxf reductions from 0: NaN elements ignored (all NaN gives 0); 0 for empty."""
    a = np.abs(f32(a))
    if a.size == 0:
        return np.float32(0.0)
    return np.fmax.reduce(a, axis=axis, initial=np.float32(0.0)).astype(np.float32)


def amax(a, nan_propagate, axis=None):
    """The amax under the amax_nan_propagate option (default 0: TE's NaN-ignoring rule)."""
    return amax_nan(a, axis) if nan_propagate else amax_fmax(a, axis)


def window_amax(h, algo, nan_propagate):
    """Delayed scaling amax per slot of a [len, slots] history: "max" (algo 0) or most recent."""
    if algo == 1:
        return f32(h[0]).copy()
    return (np.max(h, axis=0) if nan_propagate else np.fmax.reduce(h, axis=0)).astype(np.float32)


def e8m0_round_up(amax, fmt):
    """Smallest code c in [0, 254] with 2^(c-127) >= amax * (1/fp8_max as FP32); NaN 255, Inf 254."""
    amax = f32(amax)
    v = amax * (np.float32(1.0) / FP8_MAX[fmt])  # FP32 multiply by the FP32 constant
    out = np.zeros(v.shape, np.int64)
    m, e = np.frexp(v.astype(np.float64))  # v = m * 2^e, 0.5 <= m < 1
    ceil_log2 = np.where(m == 0.5, e - 1, e)
    fin = np.isfinite(v) & (v != 0)
    out[fin] = np.clip(ceil_log2[fin] + 127, 0, 254)
    out[np.isinf(v)] = 254
    out[np.isnan(v)] = 255
    return out.astype(np.uint8)


def e8m0_floor(amax, fmt):
    """OCP: floor(log2 amax) - emax_elem + 127 clamped to [0, 254]; 0 -> 0, Inf 254, NaN 255."""
    amax = f32(amax)
    out = np.zeros(amax.shape, np.int64)
    m, e = np.frexp(amax.astype(np.float64))
    fin = np.isfinite(amax) & (amax != 0)
    out[fin] = np.clip(e[fin] - 1 - EMAX_ELEM[fmt] + 127, 0, 254)
    out[np.isinf(amax)] = 254
    out[np.isnan(amax)] = 255
    return out.astype(np.uint8)


def e8m0_value(code):
    """2^(code-127) as float64 (NaN for 255)."""
    code = np.asarray(code, np.int64)
    return np.where(code == 255, np.nan, np.ldexp(1.0, code - 127))


def e8m0_mult(code):
    """2^(127-code) as float32 (exactly representable for every code < 255)."""
    code = np.asarray(code, np.int64)
    return np.where(code == 255, np.float32(np.nan), np.ldexp(np.float32(1.0), 127 - code).astype(np.float32))


def scale_from_amax(amax, fmt_max, pow2, eps, value_for_inf):
    amax = np.float32(amax)
    if amax < np.float32(eps):
        amax = np.float32(eps)
    if not np.isfinite(amax) or amax == 0:
        scale = np.float32(1.0)
    else:
        with np.errstate(over="ignore"):
            scale = np.float32(fmt_max) / amax
        if np.isinf(scale):
            scale = np.float32(value_for_inf)
    if pow2:
        _, e = np.frexp(np.float64(scale))
        scale = np.float32(np.ldexp(1.0, e - 1))
    return np.float32(scale)


def recip(s):
    with np.errstate(divide="ignore", over="ignore"):
        return np.float32(1.0) / f32(s)


def round_up(n, m):
    return (n + m - 1) // m * m


def ceil_div(n, m):
    return (n + m - 1) // m
