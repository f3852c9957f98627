"""Bit-exact check of libgrouplin's conversions and quantizers against the independent numpy +
ml_dtypes model in quant_oracle_ref.py.  Usage: test_quant_oracle.py path/to/libgrouplin.so

Every comparison is exact (uint8 codes, FP32 bit patterns); NaN results must be NaN with the
input's sign.  Exits non-zero on any mismatch and prints how many values each part checked.
"""
import ctypes as C
import itertools
import os
import sys
import warnings

import ml_dtypes
import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import quant_ctypes as Q  # noqa: E402
import quant_oracle_ref as R  # noqa: E402

FAILS = []
COUNTS = {}
RNG = np.random.default_rng(20261202)
np.seterr(all="ignore")  # Inf / NaN arithmetic is the point of these tests
warnings.filterwarnings("ignore", category=RuntimeWarning)


def count(part, n):
    COUNTS[part] = COUNTS.get(part, 0) + int(n)


def expect_equal(part, got, want, what=""):
    got = np.asarray(got)
    want = np.asarray(want)
    count(part, want.size)
    if got.shape != want.shape:
        FAILS.append("%s %s: shape %s != %s" % (part, what, got.shape, want.shape))
        return
    bad = np.flatnonzero(got.ravel() != want.ravel())
    if bad.size:
        i = bad[0]
        FAILS.append("%s %s: %d mismatches, first at %d: got %r want %r" %
                     (part, what, bad.size, i, got.ravel()[i], want.ravel()[i]))


def expect_f32(part, got, want, what=""):
    """FP32 arrays equal bit for bit, except NaN == NaN (payloads may differ)."""
    got = R.f32(got).ravel()
    want = R.f32(want).ravel()
    gn, wn = np.isnan(got), np.isnan(want)
    gb, wb = got.view(np.uint32).copy(), want.view(np.uint32).copy()
    gb[gn & wn] = 0
    wb[gn & wn] = 0
    expect_equal(part, gb, wb, what)


def all_bf16():
    return np.arange(65536, dtype=np.uint32).astype(np.uint16)


# ---------------------------------------------------------------------------------------------
# bf16 / fp16 scalar conversions


def interesting_f32(n):
    """Random FP32 bit patterns (every exponent) plus halfway cases of bf16 and fp16."""
    bits = RNG.integers(0, 2**32, n, dtype=np.uint64).astype(np.uint32)
    b16 = all_bf16().astype(np.uint32) << 16
    halfway_bf16 = b16 | 0x8000  # exactly between two bf16 values
    h = all_bf16().view(np.float16).astype(np.float32).view(np.uint32)
    halfway_fp16 = h | 0x1000  # between two fp16 normals (subnormal ones get rounded too)
    return np.concatenate([bits, b16, halfway_bf16, halfway_fp16, h]).view(np.float32)


def check_half_conversions(L):
    pats = all_bf16()
    got = np.array([L.L.gln_bf16_to_fp32(int(p)) for p in pats], np.float32)
    expect_f32("bf16->fp32", got, pats.view(ml_dtypes.bfloat16).astype(np.float32))
    got = np.array([L.L.gln_fp16_to_fp32(int(p)) for p in pats], np.float32)
    expect_f32("fp16->fp32", got, pats.view(np.float16).astype(np.float32))

    xs = interesting_f32(100000)
    fin = ~np.isnan(xs)
    got = np.array([L.L.gln_fp32_to_bf16(float(x)) for x in xs], np.uint16)
    want = xs.astype(ml_dtypes.bfloat16).view(np.uint16)
    expect_equal("fp32->bf16", got[fin], want[fin])
    # NaN: stays NaN with its sign
    gn = got[~fin]
    expect_equal("fp32->bf16 NaN", ((gn & 0x7F80) == 0x7F80) & ((gn & 0x7F) != 0) | ((gn & 0x7FC0) == 0x7FC0),
                 np.ones(gn.size, bool))
    expect_equal("fp32->bf16 NaN", gn >> 15, np.signbit(xs[~fin]).astype(np.uint16))

    with np.errstate(over="ignore"):
        want = xs.astype(np.float16).view(np.uint16)
    got = np.array([L.L.gln_fp32_to_fp16(float(x)) for x in xs], np.uint16)
    expect_equal("fp32->fp16", got[fin], want[fin])
    gn = got[~fin]
    expect_equal("fp32->fp16 NaN", ((gn & 0x7C00) == 0x7C00) & ((gn & 0x3FF) != 0), np.ones(gn.size, bool))
    expect_equal("fp32->fp16 NaN", gn >> 15, np.signbit(xs[~fin]).astype(np.uint16))


# ---------------------------------------------------------------------------------------------
# FP8 codes


def check_fp8_scalar(L):
    for fmt in (R.E4M3, R.E5M2):
        codes = np.arange(256, dtype=np.uint8)
        got = np.array([L.L.gln_fp8_to_fp32(int(c), fmt) for c in codes], np.float32)
        expect_f32("fp8->fp32", got, R.fp8_to_f32(codes, fmt), "fmt %d" % fmt)
        xs = interesting_f32(30000)
        xs = np.concatenate([xs, R.fp8_to_f32(codes, fmt), np.float32([448, 464, 465, 480, 57344, 61440, 61441,
                                                                       np.inf, -np.inf, 1e-45, -0.0])])
        got = np.array([L.L.gln_fp32_to_fp8(float(x), fmt) for x in xs], np.uint8)
        expect_equal("fp32->fp8 scalar", got, R.sat_fp8(xs, fmt), "fmt %d" % fmt)


def check_fp8_tensor_all_bf16(L):
    """All 65536 bf16 patterns through delayed-scaling per-tensor quantization at several scales."""
    x = all_bf16().reshape(256, 256)
    xf = R.widen(x, R.BF16)
    scales = [1.0, 0.37, 2.0 ** -10, 3.3e3, 2.0 ** 20, 1.7e-30, 0.999, 448.0 / 3.0]
    for fmt in (R.E4M3, R.E5M2):
        for s in scales:
            s32 = np.float32(s)
            cfg = L.config(Q.TENSOR, fmt, rowwise=1, columnwise=1, delayed=1)
            o = L.quantize(x, Q.BF16, cfg, scale=s32, amax=0.0)
            with np.errstate(over="ignore"):
                want = R.sat_fp8(xf * s32, fmt)
            what = "fmt %d scale %g" % (fmt, s)
            expect_equal("fp8 tensor all-bf16", o["data"].reshape(256, 256), want, what)
            expect_equal("fp8 tensor all-bf16 (transposed copy)", o["col_data"].reshape(256, 256), want.T, what)
            expect_f32("fp8 tensor scale_inv", o["scale_inv"], R.recip(s32), what)
            expect_f32("fp8 tensor scale_inv", o["col_scale_inv"], R.recip(s32), what)
            expect_f32("fp8 tensor amax (NaN in input ignored)", o["amax"], [R.amax_fmax(xf)], what)
            expect_f32("fp8 tensor scale untouched", o["scale"], [s32], what)
    # fp16 and fp32 inputs
    xh = all_bf16().reshape(256, 256)
    xr = interesting_f32(60000)
    for fmt in (R.E4M3, R.E5M2):
        for s in (1.0, 0.37, 3.3e3):
            s32 = np.float32(s)
            cfg = L.config(Q.TENSOR, fmt, delayed=1)
            o = L.quantize(xh, Q.FP16, cfg, scale=s32)
            with np.errstate(over="ignore", invalid="ignore"):
                want = R.sat_fp8(R.widen(xh, R.FP16) * s32, fmt)
            expect_equal("fp8 tensor all-fp16", o["data"].reshape(256, 256), want)
            xr2 = xr[: (xr.size // 300) * 300].reshape(-1, 300)
            o = L.quantize(xr2, Q.FP32, cfg, scale=s32)
            with np.errstate(over="ignore", invalid="ignore"):
                want = R.sat_fp8(xr2 * s32, fmt)
            expect_equal("fp8 tensor random fp32", o["data"].reshape(xr2.shape), want)


def check_delayed_amax(L):
    """Delayed quantize max-accumulates max|x| (before scaling) into *amax, NaN elements ignored
    or (amax_nan_propagate) making it NaN; a NaN start stays NaN only under propagation."""
    x = RNG.normal(0, 3, (37, 53)).astype(np.float32)
    xn = x.copy()
    xn[5, 7] = np.nan
    for nanp in (0, 1):
        for xs, label in ((x, "finite"), (xn, "one NaN")):
            for start in (0.0, 1.0, 1e6, np.nan):
                o = L.quantize(xs, Q.FP32, L.config(Q.TENSOR, R.E4M3, delayed=1, nanp=nanp), scale=2.0, amax=start)
                a = R.amax(xs, nanp)
                want = np.maximum(np.float32(start), a) if nanp else np.fmax(np.float32(start), a)
                expect_f32("delayed amax accumulate", o["amax"], [want],
                           "nanp %d %s start %g" % (nanp, label, start))
                with np.errstate(over="ignore", invalid="ignore"):
                    expect_equal("delayed data", o["data"].reshape(xs.shape), R.sat_fp8(xs * np.float32(2.0), R.E4M3),
                                 "nanp %d %s" % (nanp, label))


def check_amax_ex(L):
    """gln_amax_ex: NaN ignored (0), or the first NaN by index with its sign cleared (1)."""
    for dtype in (R.FP32, R.BF16, R.FP16):
        for nan_at in (None, (0, 0), (3, 17), (6, 20)):
            x = RNG.normal(0, 5, (7, 21)).astype(np.float32)
            if nan_at is not None:
                x[nan_at] = -np.nan
                x[6, 20] = np.nan
            xb = np.ascontiguousarray(to_dtype_bits(x, dtype))
            xf = R.widen(xb, dtype)
            t = Q.Tensor(dtype, 7, 21, Q.ptr(xb), Q.NONE, None, None, None, None, None)
            for nanp in (0, 1):
                got = C.c_float(-1.0)
                L.ok(L.L.gln_amax_ex(L.ctx, C.byref(t), nanp, C.byref(got)), "gln_amax_ex")
                g = np.float32([got.value])
                if nanp and nan_at is not None:
                    first = np.flatnonzero(np.isnan(xf.ravel()))[0]
                    want = np.abs(xf.ravel()[first:first + 1])  # its payload, sign cleared
                    if dtype == R.FP16:  # fp16 NaN payloads widen by the library's rule: NaN, sign cleared
                        expect_equal("amax_ex first NaN (fp16)", [bool(np.isnan(g[0]) and not np.signbit(g[0]))],
                                     [True], "nan at %s" % (nan_at,))
                    else:
                        expect_equal("amax_ex first NaN", g.view(np.uint32), want.view(np.uint32),
                                     "dtype %d nan at %s" % (dtype, nan_at))
                else:
                    expect_f32("amax_ex", g, [R.amax(xf, nanp)], "dtype %d nanp %d" % (dtype, nanp))


# ---------------------------------------------------------------------------------------------
# E8M0


def e8m0_amaxes():
    pos = RNG.integers(0, 0x7F800000, 40000, dtype=np.uint64).astype(np.uint32).view(np.float32)
    k = np.arange(-149, 128)
    p2 = np.ldexp(np.float32(1), k).astype(np.float32)
    edges = []
    for fmt in (R.E4M3, R.E5M2):
        m = R.FP8_MAX[fmt]
        edges += [m * p2[(k > -140) & (k < 120)]]  # amax = fp8_max * 2^k (v rounds around 2^k)
    base = np.concatenate([p2] + edges).astype(np.float32)
    up = np.nextafter(base, np.float32(np.inf))
    down = np.nextafter(base, np.float32(0))
    # v near 2^-127 (the subnormal rule): amax around 448 * 2^-127 and 57344 * 2^-127
    sub = np.float32([np.ldexp(np.float32(f), -127 + j) for f in (448.0, 57344.0) for j in (-1, 0, 1)])
    sub = np.concatenate([sub, np.nextafter(sub, np.float32(np.inf)), np.nextafter(sub, np.float32(0))])
    special = np.float32([0, np.inf, np.nan, R.FLT_MAX, 448, 57344, 1e-45, 2.0 ** -126])
    return np.concatenate([pos, base, up, down, sub, special]).astype(np.float32)


def check_e8m0_scalar(L):
    a = e8m0_amaxes()
    for fmt in (R.E4M3, R.E5M2):
        got = np.array([L.L.gln_e8m0_from_amax(float(v), fmt, Q.ROUND_UP) for v in a], np.uint8)
        expect_equal("e8m0 round-up", got, R.e8m0_round_up(a, fmt), "fmt %d" % fmt)
        got = np.array([L.L.gln_e8m0_from_amax(float(v), fmt, Q.ROUND_FLOOR) for v in a], np.uint8)
        expect_equal("e8m0 floor", got, R.e8m0_floor(a, fmt), "fmt %d" % fmt)
    codes = np.arange(256)
    got = np.array([L.L.gln_e8m0_to_fp32(int(c)) for c in codes], np.float64)
    expect_f32("e8m0 decode", got.astype(np.float32), R.e8m0_value(codes).astype(np.float32))
    got = np.array([L.L.gln_e8m0_inverse(int(c)) for c in codes], np.float64)
    expect_f32("e8m0 inverse", got.astype(np.float32), R.e8m0_mult(codes))


# ---------------------------------------------------------------------------------------------
# MXFP8 arrays


def special_tensor(rows, cols, scale, fmt_max, block=32):
    """Random values with awkward blocks: zeros, NaN, +-Inf, subnormals, powers of two, fp8 max."""
    x = RNG.uniform(-2, 1, (rows, cols)).astype(np.float32) * np.float32(scale)
    if rows * cols == 0:
        return x
    n = rows * cols
    flat = x.ravel()
    idx = RNG.integers(0, n, 12)
    flat[idx[0]] = np.nan
    flat[idx[1]] = np.inf
    flat[idx[2]] = -np.inf
    flat[idx[3]] = 1e-40  # FP32 subnormal
    flat[idx[4]] = np.float32(fmt_max)
    flat[idx[5]] = np.float32(2.0 ** 7)
    flat[idx[6]] = np.nextafter(np.float32(2.0 ** 7), np.float32(np.inf))
    flat[idx[7]] = np.float32(fmt_max) * np.float32(2.0 ** -100)
    flat[idx[8]] = -np.float32(fmt_max) * np.float32(2.0 ** 60)
    x = flat.reshape(rows, cols)
    if rows >= 2 * block and cols >= 2 * block:
        x[:block, :block] = 0  # all-zero blocks
        x[block:2 * block, :block] = RNG.uniform(-1, 1, (block, block)).astype(np.float32) * np.float32(1e-42)
    return x


def block_amax_targets(fmt_max):
    """Block amaxes at the edges of the E8M0 rules: powers of two, just above them, the format max
    (and just above), v = amax/fp8_max at and around 2^-127, an FP32-subnormal amax."""
    p = np.float32(2.0 ** 7)
    m = np.float32(fmt_max)
    up = lambda v: np.nextafter(np.float32(v), np.float32(np.inf))  # noqa: E731
    sub = np.float32(m * np.float32(2.0 ** -100)) * np.float32(2.0 ** -27)  # fmt_max * 2^-127
    return np.float32([p, up(p), m, up(m), m * np.float32(0.5), up(m * np.float32(0.5)), 1.0, up(1.0),
                       sub, up(sub), np.float32(2.0 ** -130), np.float32(1e-44)])


def inject_block_edges(x, fmt_max, block):
    """Give the first row blocks (rowwise) and some column blocks (columnwise) exactly those amaxes."""
    rows, cols = x.shape
    for k, t in enumerate(block_amax_targets(fmt_max)):
        if k < rows and cols >= 1:
            w = min(block, cols)
            x[k, :w] = RNG.uniform(-0.5, 0.5, w).astype(np.float32) * t
            x[k, (3 * k) % w] = -t if k % 2 else t
        c = block + k
        if c < cols and rows >= 1:
            h = min(block, rows)
            x[:h, c] = RNG.uniform(-0.5, 0.5, h).astype(np.float32) * t
            x[(5 * k) % h, c] = t
    return x


def to_dtype_bits(x, dtype):
    if dtype == R.BF16:
        return x.astype(ml_dtypes.bfloat16).view(np.uint16)
    if dtype == R.FP16:
        with np.errstate(over="ignore"):
            return x.astype(np.float16).view(np.uint16)
    return x


def mx_oracle(xf, fmt, rounding, columnwise, nanp=0):
    """Compact scales [padded grid] and data for one MXFP8 copy."""
    rows, cols = xf.shape
    rule = R.e8m0_floor if rounding == Q.ROUND_FLOOR else R.e8m0_round_up
    data = np.zeros((rows, cols), np.uint8)
    if not columnwise:
        grid = np.zeros((R.round_up(rows, 128), R.round_up(R.ceil_div(cols, 32), 4)), np.uint8)
        for j in range(R.ceil_div(cols, 32)):
            blk = xf[:, 32 * j:32 * j + 32]
            code = rule(R.amax(blk, nanp, axis=1) if rows else np.zeros(0, np.float32), fmt)
            grid[:rows, j] = code
            with np.errstate(over="ignore", invalid="ignore"):
                data[:, 32 * j:32 * j + 32] = R.sat_fp8(blk * R.e8m0_mult(code)[:, None], fmt)
    else:
        grid = np.zeros((R.round_up(R.ceil_div(rows, 32), 4), R.round_up(cols, 128)), np.uint8)
        for i in range(R.ceil_div(rows, 32)):
            blk = xf[32 * i:32 * i + 32, :]
            code = rule(R.amax(blk, nanp, axis=0) if cols else np.zeros(0, np.float32), fmt)
            grid[i, :cols] = code
            with np.errstate(over="ignore", invalid="ignore"):
                data[32 * i:32 * i + 32, :] = R.sat_fp8(blk * R.e8m0_mult(code)[None, :], fmt)
    return grid, data


def check_mxfp8(L):
    shapes = [(1, 1), (5, 17), (64, 64), (65, 80), (33, 100), (128, 96), (127, 400), (0, 40), (40, 0), (256, 64)]
    for fmt in (R.E4M3, R.E5M2):
        for rounding in (Q.ROUND_UP, Q.ROUND_FLOOR):
            for dtype in (R.FP32, R.BF16, R.FP16):
                for (rows, cols) in shapes:
                    scale = 1e3 if dtype == R.FP16 else 3.0e4
                    x = inject_block_edges(special_tensor(rows, cols, scale, R.FP8_MAX[fmt]), R.FP8_MAX[fmt], 32)
                    x = to_dtype_bits(x, dtype)
                    xf = R.widen(x, dtype)
                    # the NaN-propagating variant on one rounding (the amax rule is independent of it)
                    for nanp in ((0, 1) if rounding == Q.ROUND_UP else (0,)):
                        cfg = L.config(Q.MXFP8, fmt, rowwise=1, columnwise=1, rounding=rounding, nanp=nanp)
                        o = L.quantize(x, dtype, cfg)
                        what = "fmt %d rnd %d dtype %d %dx%d nanp %d" % (fmt, rounding, dtype, rows, cols, nanp)
                        g, d = mx_oracle(xf, fmt, rounding, False, nanp)
                        expect_equal("mxfp8 row scales", o["scale_inv"], g, what)
                        expect_equal("mxfp8 row data", o["data"].reshape(rows, cols), d, what)
                        g, d = mx_oracle(xf, fmt, rounding, True, nanp)
                        expect_equal("mxfp8 col scales", o["col_scale_inv"], g, what)
                        expect_equal("mxfp8 col data (not transposed)", o["col_data"].reshape(rows, cols), d, what)
                        check_swizzle(L, rows, cols, o)
                        check_dequant(L, o, x, rows, cols, fmt, Q.MXFP8)


def check_swizzle(L, rows, cols, o):
    for colw, key in ((0, "scale_inv"), (1, "col_scale_inv")):
        compact = np.ascontiguousarray(o[key])
        grid = compact.T if colw else compact  # swizzle works on the transposed grid for colwise
        Ip, Jp = grid.shape
        want = np.zeros(Ip * Jp, np.uint8)
        T = Jp // 4
        for i in range(Ip):
            for j in range(Jp):
                k = ((i // 128) * T + j // 4) * 512 + (i % 32) * 16 + ((i % 128) // 32) * 4 + (j % 4)
                want[k] = grid[i, j]
        got = np.full(max(Ip * Jp, 1), 0xA5, np.uint8)
        if Ip * Jp:
            L.ok(L.L.gln_mxfp8_swizzle_scales(L.ctx, rows, cols, colw, Q.ptr(compact), Q.ptr(got)), "swizzle")
        expect_equal("mxfp8 swizzle", got[:Ip * Jp], want, "%dx%d colw %d" % (rows, cols, colw))


def check_dequant(L, o, x, rows, cols, fmt, mode):
    """gln_dequantize (fp32 out) == fp8 value x decode scale, one FP32 multiply, logical layout."""
    for colw in (0, 1):
        data = o["col_data" if colw else "data"]
        sc = o["col_scale_inv" if colw else "scale_inv"]
        q = data.reshape(rows, cols) if not (colw and mode != Q.MXFP8) else data.reshape(cols, rows).T
        v = R.fp8_to_f32(q, fmt)
        if mode == Q.MXFP8:
            s = R.e8m0_value(sc).astype(np.float32)
            s_el = s[np.arange(rows)[:, None] // 32, np.arange(cols)[None, :]] if colw else \
                s[np.arange(rows)[:, None], np.arange(cols)[None, :] // 32]
        elif mode == Q.TENSOR:
            s_el = np.full((rows, cols), sc.ravel()[0], np.float32)
        else:
            s_el = block_scale_per_element(sc, rows, cols, mode, colw)
        with np.errstate(over="ignore", invalid="ignore"):
            want = (v * s_el).astype(np.float32)
        got = np.full(max(rows * cols, 1), np.nan, np.float32)
        tin = Q.Tensor(fmt, rows, cols, Q.ptr(o["data"]), mode, Q.ptr(o["scale_inv"]), Q.ptr(o["col_data"]),
                       Q.ptr(o["col_scale_inv"]), None, None)
        tout = Q.Tensor(Q.FP32, rows, cols, Q.ptr(got), Q.NONE, None, None, None, None, None)
        L.ok(L.L.gln_dequantize(L.ctx, C.byref(tin), colw, C.byref(tout)), "gln_dequantize")
        expect_f32("dequantize mode %d" % mode, got[:rows * cols], want.ravel(), "colw %d" % colw)


# ---------------------------------------------------------------------------------------------
# FP8 current scaling and block scaling


def check_current(L):
    cases = [((37, 53), 1.0), ((1, 1), 1e-30), ((64, 16), 1e30), ((0, 5), 1.0), ((8, 8), 0.0)]
    for fmt in (R.E4M3, R.E5M2):
        for dtype in (R.FP32, R.BF16, R.FP16):
            for (shape, mag) in cases:
                for eps in (0.0, 1e-3, 100.0):
                    for pow2 in (0, 1):
                        for special, nanp in ((None, 0), (np.inf, 0), (np.nan, 0), (np.nan, 1)):
                            x = (RNG.normal(0, 1, shape) * mag).astype(np.float32)
                            if special is not None and x.size:
                                x.ravel()[RNG.integers(0, x.size)] = special
                            xb = to_dtype_bits(x, dtype)
                            xf = R.widen(xb, dtype)
                            cfg = L.config(Q.TENSOR, fmt, rowwise=1, columnwise=1, eps=eps, pow2=pow2, nanp=nanp)
                            o = L.quantize(xb, dtype, cfg)
                            amax = R.amax(xf, nanp)
                            s = R.scale_from_amax(amax, R.FP8_MAX[fmt], pow2, eps, R.FLT_MAX)
                            what = "fmt %d dt %d %s mag %g eps %g pow2 %d sp %s nanp %d" % (
                                fmt, dtype, shape, mag, eps, pow2, special, nanp)
                            expect_f32("current scale", o["scale"], [s], what)
                            expect_f32("current amax", o["amax"], [amax], what)
                            expect_f32("current scale_inv", o["scale_inv"], [R.recip(s)], what)
                            expect_f32("current col_scale_inv", o["col_scale_inv"], [R.recip(s)], what)
                            with np.errstate(over="ignore", invalid="ignore"):
                                want = R.sat_fp8(xf * s, fmt)
                            expect_equal("current data", o["data"].reshape(shape), want, what)
                            expect_equal("current col data", o["col_data"].reshape(shape[::-1]), want.T, what)
                            check_dequant(L, o, xb, shape[0], shape[1], fmt, Q.TENSOR)


def block_scale_per_element(sc, rows, cols, mode, colw):
    r = np.arange(rows)[:, None]
    c = np.arange(cols)[None, :]
    if mode == Q.BLOCK_1D:
        return sc[r // 128, c] if colw else sc[c // 128, r]
    return sc[c // 128, r // 128] if colw else sc[r // 128, c // 128]


def block_oracle(xf, fmt, dtype, mode, pow2, eps, nanp=0):
    rows, cols = xf.shape
    vinf = R.HP_MAX[dtype]
    fmax = R.FP8_MAX[fmt]
    scale_el_row = np.zeros((rows, cols), np.float32)
    scale_el_col = np.zeros((rows, cols), np.float32)
    if mode == Q.BLOCK_1D:
        grid = np.zeros((R.ceil_div(cols, 128), R.round_up(rows, 4)), np.float32)
        cgrid = np.zeros((R.ceil_div(rows, 128), R.round_up(cols, 4)), np.float32)
        for r in range(rows):
            for j in range(R.ceil_div(cols, 128)):
                s = R.scale_from_amax(R.amax(xf[r, 128 * j:128 * j + 128], nanp), fmax, pow2, eps, vinf)
                grid[j, r] = R.recip(s)
                scale_el_row[r, 128 * j:128 * j + 128] = s
        for i in range(R.ceil_div(rows, 128)):
            for c in range(cols):
                s = R.scale_from_amax(R.amax(xf[128 * i:128 * i + 128, c], nanp), fmax, pow2, eps, vinf)
                cgrid[i, c] = R.recip(s)
                scale_el_col[128 * i:128 * i + 128, c] = s
    else:
        grid = np.zeros((R.ceil_div(rows, 128), R.round_up(R.ceil_div(cols, 128), 4)), np.float32)
        cgrid = np.zeros((R.ceil_div(cols, 128), R.round_up(R.ceil_div(rows, 128), 4)), np.float32)
        for i in range(R.ceil_div(rows, 128)):
            for j in range(R.ceil_div(cols, 128)):
                tile = xf[128 * i:128 * i + 128, 128 * j:128 * j + 128]
                s = R.scale_from_amax(R.amax(tile, nanp), fmax, pow2, eps, vinf)
                grid[i, j] = R.recip(s)
                cgrid[j, i] = R.recip(s)
                scale_el_row[128 * i:128 * i + 128, 128 * j:128 * j + 128] = s
        scale_el_col = scale_el_row
    with np.errstate(over="ignore", invalid="ignore"):
        d = R.sat_fp8(xf * scale_el_row, fmt)
        cd = R.sat_fp8(xf * scale_el_col, fmt).T
    return grid, d, cgrid, cd


def check_block(L):
    shapes = [(1, 1), (5, 300), (130, 260), (257, 129), (128, 128), (0, 7), (3, 0)]
    for mode in (Q.BLOCK_1D, Q.BLOCK_2D):
        for fmt in (R.E4M3, R.E5M2):
            for dtype in (R.FP32, R.BF16, R.FP16):
                for (rows, cols) in shapes:
                    for pow2 in (1, 0):
                        for eps, nanp in ((0.0, 0), (1e-2, 0), (0.0, 1)):
                            x = special_tensor(rows, cols, 100.0, R.FP8_MAX[fmt], 128)
                            x = to_dtype_bits(inject_block_edges(x, R.FP8_MAX[fmt], 128), dtype)
                            xf = R.widen(x, dtype)
                            cfg = L.config(mode, fmt, rowwise=1, columnwise=1, pow2=pow2, eps=eps, nanp=nanp)
                            o = L.quantize(x, dtype, cfg)
                            g, d, cg, cd = block_oracle(xf, fmt, dtype, mode, pow2, eps, nanp)
                            what = "mode %d fmt %d dt %d %dx%d pow2 %d eps %g nanp %d" % (mode, fmt, dtype, rows,
                                                                                          cols, pow2, eps, nanp)
                            expect_f32("block row scales", o["scale_inv"], g, what)
                            expect_f32("block col scales", o["col_scale_inv"], cg, what)
                            expect_equal("block row data", o["data"].reshape(rows, cols), d, what)
                            expect_equal("block col data (transposed)", o["col_data"].reshape(cols, rows), cd, what)
                            check_dequant(L, o, x, rows, cols, fmt, mode)
    # value_for_inf = the input dtype's max: amax below fp8_max / dtype_max overflows the division
    for dtype in (R.FP32, R.BF16, R.FP16):
        tiny = np.float32(1e-45) if dtype == R.FP32 else (np.float32(9.2e-41) if dtype == R.BF16 else
                                                          np.float32(6e-8))
        x = np.full((1, 4), tiny, np.float32)
        xb = to_dtype_bits(x, dtype)
        xf = R.widen(xb, dtype)
        o = L.quantize(xb, dtype, L.config(Q.BLOCK_1D, R.E4M3, pow2=0))
        s = R.scale_from_amax(R.amax_fmax(xf), R.FP8_MAX[R.E4M3], 0, 0.0, R.HP_MAX[dtype])
        expect_f32("block value_for_inf", o["scale_inv"][0, 0], R.recip(s), "dtype %d" % dtype)
        if dtype != R.FP16:  # 448 / 6e-8 does not overflow: fp16 never reaches value_for_inf
            expect_f32("block value_for_inf is dtype max", [s], [R.HP_MAX[dtype]], "dtype %d" % dtype)


# ---------------------------------------------------------------------------------------------
# Grouped quantization: per-member statistics, member scales packed at their padded sizes


def member_oracle(xf, fmt, dtype, mode, nanp):
    """(data, col_data, row scales, col scales, scale, amax) of one member, flattened."""
    rows, cols = xf.shape
    if mode == Q.TENSOR:
        amax = R.amax(xf, nanp)
        s = R.scale_from_amax(amax, R.FP8_MAX[fmt], 0, 0.0, R.FLT_MAX)
        d = R.sat_fp8(xf * s, fmt)
        return d.ravel(), d.T.ravel(), [R.recip(s)], [R.recip(s)], s, amax
    if mode == Q.MXFP8:
        g, d = mx_oracle(xf, fmt, Q.ROUND_UP, False, nanp)
        cg, cd = mx_oracle(xf, fmt, Q.ROUND_UP, True, nanp)
        return d.ravel(), cd.ravel(), g.ravel(), cg.ravel(), None, None
    g, d, cg, cd = block_oracle(xf, fmt, dtype, mode, 1, 0.0, nanp)
    return d.ravel(), cd.ravel(), g.ravel(), cg.ravel(), None, None


def check_grouped(L):
    splits = np.array([0, 65, 0, 130, 1, 0, 33], np.int64)
    rows, cols = 260, 80  # 31 trailing rows that must stay untouched
    n = len(splits)
    for mode, nanp in itertools.product((Q.TENSOR, Q.MXFP8, Q.BLOCK_1D, Q.BLOCK_2D), (0, 1)):
        for dtype in (R.BF16, R.FP32):
            fmt = R.E4M3 if mode != Q.TENSOR else R.E5M2
            x = to_dtype_bits(special_tensor(rows, cols, 50.0, R.FP8_MAX[fmt], 128), dtype)
            xf = R.widen(x, dtype)
            members = []
            r0 = 0
            for m in splits:
                members.append(member_oracle(xf[r0:r0 + m], fmt, dtype, mode, nanp))
                r0 += m
            used = r0
            sdt = np.uint8 if mode == Q.MXFP8 else np.float32
            tot_s = sum(len(mo[2]) for mo in members)
            tot_cs = sum(len(mo[3]) for mo in members)
            poison = 0xA5 if sdt == np.uint8 else np.nan
            buf = {"data": np.full(rows * cols, 0xA5, np.uint8), "col_data": np.full(rows * cols, 0xA5, np.uint8),
                   "s": np.full(max(tot_s, 1), poison, sdt), "cs": np.full(max(tot_cs, 1), poison, sdt),
                   "amax": np.full(n, np.nan, np.float32), "scale": np.full(n, np.nan, np.float32)}
            xin = np.ascontiguousarray(x)
            gin = Q.GroupedTensor(n, Q.ptr(splits), 0, Q.Tensor(dtype, rows, cols, Q.ptr(xin), Q.NONE,
                                                               None, None, None, None, None))
            gout = Q.GroupedTensor(n, Q.ptr(splits), 0, Q.Tensor(fmt, rows, cols, Q.ptr(buf["data"]), mode,
                                                                Q.ptr(buf["s"]), Q.ptr(buf["col_data"]),
                                                                Q.ptr(buf["cs"]), Q.ptr(buf["amax"]),
                                                                Q.ptr(buf["scale"])))
            cfg = L.config(mode, fmt, rowwise=1, columnwise=1, pow2=0 if mode == Q.TENSOR else 1, nanp=nanp)
            L.ok(L.L.gln_grouped_quantize(L.ctx, C.byref(cfg), C.byref(gin), C.byref(gout)), "gln_grouped_quantize")
            what = "mode %d dtype %d nanp %d" % (mode, dtype, nanp)
            def cat(k):
                return np.concatenate([np.asarray(mo[k]).ravel() for mo in members]).astype(
                    np.uint8 if k < 2 else sdt)
            expect_equal("grouped data", buf["data"][:used * cols], cat(0), what)
            expect_equal("grouped col data", buf["col_data"][:used * cols], cat(1), what)
            tail = np.full((rows - used) * cols, 0xA5, np.uint8)
            expect_equal("grouped trailing rows untouched", buf["data"][used * cols:], tail, what)
            expect_equal("grouped trailing rows untouched", buf["col_data"][used * cols:], tail, what)
            if sdt == np.uint8:
                expect_equal("grouped row scales", buf["s"][:tot_s], cat(2), what)
                expect_equal("grouped col scales", buf["cs"][:tot_cs], cat(3), what)
            else:
                expect_f32("grouped row scales", buf["s"][:tot_s], cat(2), what)
                expect_f32("grouped col scales", buf["cs"][:tot_cs], cat(3), what)
            if mode == Q.TENSOR:
                expect_f32("grouped per-member scale", buf["scale"], [mo[4] for mo in members], what)
                expect_f32("grouped per-member amax", buf["amax"], [mo[5] for mo in members], what)


# ---------------------------------------------------------------------------------------------
# Delayed scaling update


def delayed_update_ref(h_ref, s_ref, fmax, margin, algo, always_roll, nan_prop):
    """One update step of TE's bulk rule (always_roll: its non-bulk rule); returns new (h, s)."""
    amax = R.window_amax(h_ref, algo, nan_prop)
    h_new = np.roll(h_ref, -1, axis=0)
    h_new[0] = 0
    scaled_max = (fmax * np.float32(2.0 ** -margin)).astype(np.float32)
    with np.errstate(divide="ignore", over="ignore", invalid="ignore"):
        cand = (scaled_max / amax).astype(np.float32)
    cand[np.isinf(cand)] = R.FLT_MAX
    upd = np.isfinite(amax) & (amax > 0)
    active = np.ones(h_ref.shape[1], bool) if always_roll else h_ref[0] != 0
    h_out = np.where(active[None, :], h_new, h_ref).astype(np.float32)
    s_out = np.where(active & upd, cand, s_ref).astype(np.float32)
    return h_out, s_out


def check_delayed_update(L):
    for algo, margin, always_roll, nan_prop in itertools.product((0, 1), (0, 1, 3), (0, 1), (0, 1)):
        slots, hl = 5, 4
        hist = np.zeros((hl, slots), np.float32)
        scale = np.ones(slots, np.float32)
        fmax = np.float32([448, 57344, 448, 448, 57344])
        h_ref, s_ref = hist.copy(), scale.copy()
        opts = Q.DelayedUpdateOptions(C.sizeof(Q.DelayedUpdateOptions), always_roll, nan_prop)
        for step in range(9):
            new = RNG.uniform(0.1, 10, slots).astype(np.float32)
            new[step % slots] = [0.0, np.nan, np.inf, 1e-45, 3.0][step % 5]
            hist[0] = np.maximum(hist[0], new)  # a NaN-propagating accumulation, to put NaN in the window
            h_ref[0] = np.maximum(h_ref[0], new)
            if always_roll == 0 and nan_prop == 0 and step % 2:
                L.ok(L.L.gln_delayed_scaling_update(slots, hl, Q.ptr(hist), Q.ptr(scale), Q.ptr(fmax),
                                                     margin, algo), "gln_delayed_scaling_update")
            else:
                L.ok(L.L.gln_delayed_scaling_update_ex(slots, hl, Q.ptr(hist), Q.ptr(scale), Q.ptr(fmax),
                                                        margin, algo, C.byref(opts)),
                     "gln_delayed_scaling_update_ex")
            h_ref, s_ref = delayed_update_ref(h_ref, s_ref, fmax, margin, algo, always_roll, nan_prop)
            what = "algo %d margin %d roll %d nanprop %d step %d" % (algo, margin, always_roll, nan_prop, step)
            expect_f32("delayed history", hist, h_ref, what)
            expect_f32("delayed scale", scale, s_ref, what)


def main():
    L = Q.Lib(sys.argv[1])
    for part in (check_half_conversions, check_fp8_scalar, check_fp8_tensor_all_bf16, check_delayed_amax, check_amax_ex,
                 check_e8m0_scalar, check_mxfp8, check_current, check_block, check_grouped,
                 check_delayed_update):
        part(L)
    for k in sorted(COUNTS):
        print("%-40s %10d values checked" % (k, COUNTS[k]))
    if FAILS:
        print("\n%d FAILURES:" % len(FAILS))
        for f in FAILS[:60]:
            print("  " + f)
        return 1
    print("all %d values match the oracle" % sum(COUNTS.values()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
