"""grouplin's numpy ops against numpy / ml_dtypes: the scalar conversions, cast, amax, quantize /
dequantize per scaling mode (bit for bit against the oracle's independent model) and the grouped
GEMM (against float64 numpy)."""
import numpy as np
import pytest

import grouplin

ml_dtypes = pytest.importorskip("ml_dtypes")  # the oracle's model needs it (the package does not)
import quant_oracle_ref as ref  # noqa: E402  (tests/oracle, put on sys.path by conftest.py)

RNG = np.random.default_rng(1234)
FLT_MAX = np.float32(np.finfo(np.float32).max)


def values(n=3000):
    """Random magnitudes over FP8 / bf16 ranges, plus edge values."""
    v = (RNG.standard_normal(n) * np.exp2(RNG.integers(-20, 20, n))).astype(np.float32)
    edge = np.array([0.0, -0.0, 448.0, 449.0, 464.0, 57344.0, 61440.0, 1e30, -1e30, np.inf, -np.inf,
                     2.0 ** -9, 2.0 ** -10, 2.0 ** -17, 1.0 + 2.0 ** -8], np.float32)
    return np.concatenate([v, edge])


def test_bf16_fp16_scalars_match_ml_dtypes():
    v = values()
    bf = np.array([grouplin.fp32_to_bf16(x) for x in v], np.uint16)
    assert np.array_equal(bf, v.astype(ml_dtypes.bfloat16).view(np.uint16))
    fp = np.array([grouplin.fp32_to_fp16(x) for x in v], np.uint16)
    with np.errstate(over="ignore"):
        assert np.array_equal(fp, v.astype(np.float16).view(np.uint16))
    back = np.array([grouplin.bf16_to_fp32(b) for b in bf], np.float32)
    assert np.array_equal(back, bf.view(ml_dtypes.bfloat16).astype(np.float32))
    assert grouplin.fp16_to_fp32(0x3C00) == 1.0


@pytest.mark.parametrize("fmt,code", [("e4m3", ref.E4M3), ("e5m2", ref.E5M2)])
def test_fp8_scalars_saturate_like_the_oracle(fmt, code):
    v = values()
    got = np.array([grouplin.fp32_to_fp8(x, fmt) for x in v], np.uint8)
    assert np.array_equal(got, ref.sat_fp8(v, code))
    dec = np.array([grouplin.fp8_to_fp32(c, fmt) for c in range(256)], np.float32)
    want = ref.fp8_to_f32(np.arange(256, dtype=np.uint8), code)
    assert np.array_equal(np.isnan(dec), np.isnan(want))
    assert np.array_equal(dec[~np.isnan(dec)], want[~np.isnan(want)])
    assert grouplin.fp8_max(fmt) == float(ref.FP8_MAX[code])


def test_e8m0_and_scale_rules():
    amaxes = np.abs(values(500))
    for a in amaxes:
        assert grouplin.e8m0_from_amax(a, "e4m3") == int(ref.e8m0_round_up(np.array([a]), ref.E4M3)[0])
        assert grouplin.e8m0_from_amax(a, "e4m3", "floor") == int(ref.e8m0_floor(np.array([a]), ref.E4M3)[0])
        s = ref.scale_from_amax(a, 448.0, False, 0.0, FLT_MAX)
        assert np.float32(grouplin.scale_from_amax(a, 448.0)) == s
    assert grouplin.e8m0_to_fp32(127) == 1.0


def test_cast_and_amax_match_numpy():
    x = RNG.standard_normal((37, 70)).astype(np.float32) * 100
    b = grouplin.cast(x, "bf16")
    assert b.dtype == ml_dtypes.bfloat16
    assert np.array_equal(b.view(np.uint16), x.astype(ml_dtypes.bfloat16).view(np.uint16))
    h = grouplin.cast(b, np.float16)
    assert np.array_equal(h, b.astype(np.float32).astype(np.float16))
    x[3, 5] = np.nan  # ignored by amax, as TE's fmaxf
    assert grouplin.amax(x) == float(np.nanmax(np.abs(x)))


@pytest.mark.parametrize("fmt,code", [("e4m3", ref.E4M3), ("e5m2", ref.E5M2)])
@pytest.mark.parametrize("rows,cols", [(1, 1), (5, 17), (129, 300)])
def test_quantize_current_scaling_bitwise(fmt, code, rows, cols):
    x = (RNG.standard_normal((rows, cols)) * 3).astype(np.float32)
    q = grouplin.quantize(x, "current", fmt, columnwise=True)
    amax = ref.amax_fmax(x)
    scale = ref.scale_from_amax(amax, ref.FP8_MAX[code], False, 0.0, FLT_MAX)
    codes = ref.sat_fp8(x * scale, code)
    assert q.amax[0] == amax and q.scale[0] == scale
    assert q.scale_inv.reshape(-1)[0] == ref.recip(scale)
    assert np.array_equal(q.data.view(np.uint8), codes)
    assert np.array_equal(q.col_data.view(np.uint8), codes.T)
    deq = grouplin.dequantize(q)
    assert np.array_equal(deq, ref.fp8_to_f32(codes, code) * ref.recip(scale))
    assert np.array_equal(grouplin.dequantize(q, columnwise=True), deq)


def test_quantize_delayed_uses_the_given_scale():
    x = RNG.standard_normal((8, 40)).astype(np.float32)
    q = grouplin.quantize(x, "delayed", scale=16.0)
    assert np.array_equal(q.data.view(np.uint8), ref.sat_fp8(x * np.float32(16.0), ref.E4M3))
    assert q.amax[0] == ref.amax_fmax(x)


@pytest.mark.parametrize("rows,cols", [(1, 32), (5, 70), (130, 96)])
def test_quantize_mxfp8_bitwise(rows, cols):
    x = (RNG.standard_normal((rows, cols)) * np.exp2(RNG.integers(-8, 8, (rows, 1)))).astype(np.float32)
    q = grouplin.quantize(x, "mxfp8")
    nb = ref.ceil_div(cols, 32)
    for r in range(rows):
        for b in range(nb):
            blk = x[r, 32 * b:32 * (b + 1)]
            c = ref.e8m0_round_up(np.array([ref.amax_fmax(blk)]), ref.E4M3)[0]
            assert q.scale_inv.view(np.uint8)[r, b] == c
            assert np.array_equal(q.data.view(np.uint8)[r, 32 * b:32 * (b + 1)],
                                  ref.sat_fp8(blk * ref.e8m0_mult(c), ref.E4M3))
    assert np.abs(grouplin.dequantize(q) - x).max() <= np.abs(x).max() / 8


@pytest.mark.parametrize("pow2", [False, True])
def test_quantize_block_1d_bitwise(pow2):
    rows, cols = 6, 300
    x = RNG.standard_normal((rows, cols)).astype(np.float32)
    q = grouplin.quantize(x, "block_1d", power_2_scale=pow2)
    for r in range(rows):
        for b in range(ref.ceil_div(cols, 128)):
            blk = x[r, 128 * b:128 * (b + 1)]
            s = ref.scale_from_amax(ref.amax_fmax(blk), 448.0, pow2, 0.0, FLT_MAX)
            assert q.scale_inv[b, r] == ref.recip(s)
            assert np.array_equal(q.data.view(np.uint8)[r, 128 * b:128 * (b + 1)], ref.sat_fp8(blk * s, ref.E4M3))


def test_quantize_block_2d_roundtrip():
    x = RNG.standard_normal((200, 260)).astype(np.float32)
    q = grouplin.quantize(x, "block_2d", columnwise=True)
    d = grouplin.dequantize(q)
    assert np.abs(d - x).max() <= np.abs(x).max() * 2.0 ** -4
    assert np.array_equal(grouplin.dequantize(q, columnwise=True), d)


def _ref_groups(splits):
    return np.cumsum([0] + list(splits))


@pytest.mark.parametrize("dtype", [np.float32, ml_dtypes.bfloat16])
@pytest.mark.parametrize("splits", [[5, 0, 17, 1], [0, 0, 0, 23], [23, 0, 0, 0]])
def test_grouped_gemm_all_layouts(dtype, splits):
    n, k_in, k_out, m = 4, 40, 24, sum(splits)
    x = RNG.standard_normal((m, k_in)).astype(dtype)
    w = RNG.standard_normal((n, k_out, k_in)).astype(dtype)
    dy = RNG.standard_normal((m, k_out)).astype(dtype)
    bias = RNG.standard_normal((n, k_out)).astype(dtype)
    o = _ref_groups(splits)
    f = lambda a: np.asarray(a, np.float64)  # noqa: E731
    y_ref = np.concatenate([f(x[o[i]:o[i + 1]]) @ f(w[i]).T + f(bias[i]) for i in range(n)])
    dx_ref = np.concatenate([f(dy[o[i]:o[i + 1]]) @ f(w[i]) for i in range(n)])
    dw_ref = np.stack([f(dy[o[i]:o[i + 1]]).T @ f(x[o[i]:o[i + 1]]) for i in range(n)])
    # one rounding of an FP32 sum: bf16 outputs within half an ulp of bf16 (2^-8 relative), FP32
    # within FP32 accumulation error
    tol = 2.0 ** -8 if dtype != np.float32 else 1e-5
    for got, want, bound in ((grouplin.grouped_gemm(w, x, splits, bias=bias), y_ref, None),
                             (grouplin.grouped_gemm(list(w), dy, splits, "NN"), dx_ref, None),
                             (grouplin.grouped_gemm(x, dy, splits, "NT"), dw_ref, None)):
        assert got.dtype == np.dtype(dtype)
        scale = np.abs(want).max() + 1.0
        assert np.abs(f(got) - want).max() <= tol * scale * 4


def test_ops_on_torch_tensors_match_numpy():
    torch = pytest.importorskip("torch")
    x = RNG.standard_normal((33, 64)).astype(np.float32)
    w = RNG.standard_normal((3, 16, 64)).astype(np.float32)
    q_np, q_t = grouplin.quantize(x, "mxfp8"), grouplin.quantize(torch.from_numpy(x), "mxfp8")
    assert isinstance(q_t.data, torch.Tensor)
    assert np.array_equal(q_np.data.view(np.uint8), q_t.data.view(torch.uint8).numpy())
    y_np = grouplin.grouped_gemm(w, x, [10, 20, 3])
    y_t = grouplin.grouped_gemm(torch.from_numpy(w), torch.from_numpy(x), torch.tensor([10, 20, 3]))
    assert np.array_equal(y_np, y_t.numpy())
    b = grouplin.cast(torch.from_numpy(x), torch.bfloat16)
    assert torch.equal(b, torch.from_numpy(x).to(torch.bfloat16))


def test_errors_name_the_argument():
    x = RNG.standard_normal((8, 64)).astype(np.float32)
    with pytest.raises(ValueError, match="mode"):
        grouplin.quantize(x, "nvfp4")
    with pytest.raises(ValueError, match="x: array must be C-contiguous"):
        grouplin.quantize(x[:, ::2], "current")
    with pytest.raises(TypeError, match="x: dtype int32"):
        grouplin.quantize(x.astype(np.int32), "current")
    with pytest.raises(ValueError, match="m_splits"):
        grouplin.grouped_gemm(np.zeros((2, 4, 64), np.float32), x, [1, 2, 3])
    with pytest.raises(ValueError, match="gln_grouped_gemm: .*splits sum 9"):  # the library's message
        grouplin.grouped_gemm(np.zeros((2, 4, 64), np.float32), x, [4, 5])


@pytest.mark.parametrize("mode,pow2", [("current", False), ("mxfp8", False), ("block_1d", True), ("block_2d", True)])
def test_grouped_quantize_members_equal_single_quantize(mode, pow2):
    splits = [7, 0, 33, 17]
    x = RNG.standard_normal((sum(splits) + 3, 300)).astype(np.float32)   # 3 trailing rows: ignored
    g = grouplin.grouped_quantize(x, splits, mode, columnwise=True, power_2_scale=pow2)
    o = _ref_groups(splits)
    for i in range(len(splits)):
        if splits[i] == 0:
            continue
        q, m = grouplin.quantize(x[o[i]:o[i + 1]], mode, columnwise=True, power_2_scale=pow2), g.member(i)
        for f in ("data", "col_data", "scale_inv", "col_scale_inv"):
            assert np.array_equal(getattr(q, f).view(np.uint8), getattr(m, f).view(np.uint8)), (i, f)


@pytest.mark.parametrize("mode,wmode,pow2", [("current", "current", False), ("mxfp8", "mxfp8", False),
                                             ("block_1d", "block_2d", True)])
def test_grouped_gemm_quantized_operands(mode, wmode, pow2):
    """Each GEMM of a layer on quantized operands against float64 GEMMs of the dequantized
    operands: the products of FP8 values times power-of-two or per-tensor scales are exact, so
    only the FP32 accumulation differs (bounded relative to sum |a||b|)."""
    splits = [7, 0, 33, 17]
    n, k_in, k_out = 4, 256, 128
    x = RNG.standard_normal((sum(splits), k_in)).astype(np.float32)
    dy = RNG.standard_normal((sum(splits), k_out)).astype(np.float32)
    w = RNG.standard_normal((n, k_out, k_in)).astype(np.float32)
    qx = grouplin.grouped_quantize(x, splits, mode, columnwise=True, power_2_scale=pow2)
    qdy = grouplin.grouped_quantize(dy, splits, mode, columnwise=True, power_2_scale=pow2)
    qw = [grouplin.quantize(w[i], wmode, columnwise=True, power_2_scale=pow2) for i in range(n)]
    o = _ref_groups(splits)
    f64 = lambda q, cw=False: np.asarray(grouplin.dequantize(q, cw), np.float64)  # noqa: E731
    xs = [f64(qx.member(i)) for i in range(n)]
    xs_c = [f64(qx.member(i), True) for i in range(n)]
    dys = [f64(qdy.member(i)) for i in range(n)]
    dys_c = [f64(qdy.member(i), True) for i in range(n)]
    ws, ws_c = [f64(q) for q in qw], [f64(q, True) for q in qw]
    cases = [(grouplin.grouped_gemm(qw, qx, layout="TN"),
              [(xs[i] @ ws[i].T, np.abs(xs[i]) @ np.abs(ws[i]).T) for i in range(n)]),
             (grouplin.grouped_gemm(qw, qdy, layout="NN"),
              [(dys[i] @ ws_c[i], np.abs(dys[i]) @ np.abs(ws_c[i])) for i in range(n)]),
             (grouplin.grouped_gemm(qx, qdy, layout="NT"),
              [(dys_c[i].T @ xs_c[i], np.abs(dys_c[i]).T @ np.abs(xs_c[i])) for i in range(n)])]
    for got, per in cases:
        assert got.dtype == np.float32
        want = np.concatenate([p[0] for p in per]) if got.ndim == 2 else np.stack([p[0] for p in per])
        mag = np.concatenate([p[1] for p in per]) if got.ndim == 2 else np.stack([p[1] for p in per])
        assert (np.abs(got - want) <= 1e-5 * mag + 1e-30).all()
    assert o[-1] == sum(splits)


def _adamw_model(w, g, m, v, step, lr, wd, b1=np.float32(0.9), b2=np.float32(0.999), eps=np.float32(1e-8)):
    """The documented AdamW (TE FusedAdam, decoupled weight decay) in float32 numpy."""
    bc1, bc2 = np.float32(1.0 - float(b1) ** step), np.float32(1.0 - float(b2) ** step)
    m = b1 * m + (np.float32(1) - b1) * g
    v = b2 * v + ((np.float32(1) - b2) * g) * g
    update = (m / bc1) / (np.sqrt(v / bc2) + eps) + np.float32(wd) * w
    return w - np.float32(lr) * update, m, v


def test_optimizer_step_matches_numpy():
    n = 1000
    w = RNG.standard_normal(n).astype(np.float32)
    m, v = np.zeros(n, np.float32), np.zeros(n, np.float32)
    wm, mm, vm = w.copy(), m.copy(), v.copy()
    wk = np.zeros(n, ml_dtypes.bfloat16)
    for step in (1, 2):
        g = (RNG.standard_normal(n) * 1e-2).astype(np.float32)
        grouplin.optimizer_step(w, g, m, v, step=step, working=wk, lr=3e-3, weight_decay=0.1)
        wm, mm, vm = _adamw_model(wm, g, mm, vm, step, np.float32(3e-3), np.float32(0.1))
        assert np.array_equal(w.view(np.uint32), wm.view(np.uint32))
        assert np.array_equal(m.view(np.uint32), mm.view(np.uint32))
        assert np.array_equal(v.view(np.uint32), vm.view(np.uint32))
        assert np.array_equal(wk.view(np.uint16), w.astype(ml_dtypes.bfloat16).view(np.uint16))
    buf = np.zeros(n, np.float32)
    g = np.ones(n, np.float32)
    w0 = w.copy()
    grouplin.optimizer_step(w, g, buf, step=1, kind="sgd", lr=0.5, momentum=0.9)
    assert np.array_equal(buf, g) and np.array_equal(w, w0 - np.float32(0.5) * g)
    with pytest.raises(grouplin.InvalidArgumentError, match="cfg->lr"):
        grouplin.optimizer_step(w, g, m, v, step=1, lr=-1.0)
    with pytest.raises(ValueError, match="grad: 999 elements"):
        grouplin.optimizer_step(w, g[:999], m, v, step=1)
