"""Values that do not fit their C field, and sizes past the library's limits: every one raises a
ValueError / TypeError naming the argument, before anything is allocated -- never a silent
truncation by ctypes or int(), a KeyError / OverflowError, or an allocation the library would
refuse anyway."""
import time

import numpy as np
import pytest

import grouplin
from grouplin import _lib

torch = pytest.importorskip("torch")
from grouplin.recipe import DelayedScaling, Float8CurrentScaling, QParams  # noqa: E402
from grouplin.torch import GroupedLinear  # noqa: E402


def _x(rows=8, cols=64):
    return np.random.default_rng(0).standard_normal((rows, cols)).astype(np.float32)


# ---- integers written through ctypes ------------------------------------------------------------
@pytest.mark.parametrize("kw, name", [
    (dict(margin=2**40), "DelayedScaling.margin"),
    (dict(margin=2**32 + 3), "DelayedScaling.margin"),
    (dict(margin=-2**31 - 1), "DelayedScaling.margin"),
    (dict(amax_history_len=2**32 + 1), "DelayedScaling.amax_history_len"),
    (dict(amax_history_len=0), "DelayedScaling.amax_history_len"),
    (dict(margin=1.5), "DelayedScaling.margin"),
])
def test_delayed_scaling_int_fields_do_not_truncate(kw, name):
    with pytest.raises(ValueError, match=name.replace(".", r"\.")):
        GroupedLinear(2, 32, 16, recipe=DelayedScaling(**kw))


def test_every_config_int_field_is_range_checked():
    """The one place the structs are filled: a value past its field's width never wraps."""
    for field, ctype in _lib.GroupedLinearConfig._fields_:
        if ctype not in _lib._INT_TYPES:
            continue
        lo, hi = _lib.int_range(ctype)
        for bad in (hi + 1, lo - 1):
            with pytest.raises(ValueError, match=field):
                _lib.layer_config(**{field: bad})
        with pytest.raises(TypeError, match=field):
            _lib.layer_config(**{field: "3"})
    for field, ctype in _lib.QuantConfig._fields_:
        if ctype in _lib._INT_TYPES:
            with pytest.raises(ValueError, match=field):
                _lib.quant_config(**{field: _lib.int_range(ctype)[1] + 1})
    with pytest.raises(ValueError, match="amax_epsilon"):
        _lib.quant_config(amax_epsilon=1e39)
    with pytest.raises(TypeError, match="amax_epsilon"):
        _lib.layer_config(amax_epsilon="small")
    # values that fit go through unchanged
    cfg = _lib.layer_config(margin=126, amax_history_len=2**31 - 1, seed=2**64 - 1)
    assert (cfg.margin, cfg.amax_history_len, cfg.seed) == (126, 2**31 - 1, 2**64 - 1)


def test_module_amax_epsilon_and_qparams_named():
    with pytest.raises(TypeError, match="amax_epsilon"):
        GroupedLinear(2, 32, 16, amax_epsilon="tiny")
    q = QParams(amax_epsilon="0.1")
    with pytest.raises(TypeError, match=r"Float8CurrentScaling\.QParams\.amax_epsilon"):
        GroupedLinear(2, 32, 16, recipe=Float8CurrentScaling(fp8_quant_fwd_inp=q, fp8_quant_fwd_weight=q,
                                                               fp8_quant_bwd_grad=q))


def test_scalar_bits_fit_their_width():
    for call, name in ((lambda: grouplin.bf16_to_fp32(0x10000), "bits"), (lambda: grouplin.fp16_to_fp32(-1), "bits"),
                       (lambda: grouplin.fp8_to_fp32(256), "bits"), (lambda: grouplin.e8m0_to_fp32(300), "code")):
        with pytest.raises(ValueError, match=name):
            call()
    assert grouplin.bf16_to_fp32(0x3F80) == 1.0 and grouplin.e8m0_to_fp32(127) == 1.0


# ---- splits -------------------------------------------------------------------------------------
def test_module_splits_non_integral_refused():
    m = GroupedLinear(2, 32, 16)
    x = torch.randn(7, 32)
    with pytest.raises(TypeError, match=r"m_splits\[0\]"):
        m(x, [3.7, 3.3])
    with pytest.raises(TypeError, match=r"m_splits\[0\]"):
        m(x, [torch.tensor(3.5), 4])
    with pytest.raises(TypeError, match=r"m_splits\[1\]"):
        m(x, [3, "4"])
    with pytest.raises(ValueError, match=r"m_splits\[0\]"):
        m(x, [2**63, 0])
    assert m(x, [torch.tensor(3), 4]).shape == (7, 16)


@pytest.mark.parametrize("splits, exc", [
    ([3.7, 4.3], ValueError), ([2**63, 0], ValueError), ([-2**63 - 1, 0], ValueError),
    (["3", "5"], TypeError), ([None, 8], TypeError), (np.array([3.5, 4.5]), ValueError),
    (np.array([2**63, 0], dtype=np.uint64), ValueError),
])
def test_ops_splits_refused_with_their_name(splits, exc):
    x = _x()
    with pytest.raises(exc, match=r"m_splits\[0\]"):
        grouplin.grouped_quantize(x, splits)
    w = np.zeros((2, 16, 64), np.float32)
    with pytest.raises(exc, match=r"m_splits\[0\]"):
        grouplin.grouped_gemm(w, x, splits)


def test_ops_integral_splits_still_accepted():
    x = _x()
    for splits in ([3, 5], np.array([3, 5], np.int32), [np.int64(3), 5.0], torch.tensor([3, 5])):
        q = grouplin.grouped_quantize(x, splits)
        assert list(q.splits) == [3, 5]


# ---- options by name ----------------------------------------------------------------------------
def test_e8m0_rounding_named():
    for call in (lambda: grouplin.quantize(_x(), "mxfp8", e8m0_rounding="sideways"),
                 lambda: grouplin.grouped_quantize(_x(), [3, 5], "mxfp8", e8m0_rounding="sideways"),
                 lambda: grouplin.e8m0_from_amax(1.0, rounding=["up"])):
        with pytest.raises(ValueError, match=r"rounding: .*'up' or 'floor'"):
            call()


def test_scale_and_epsilon_named():
    with pytest.raises(TypeError, match="scale"):
        grouplin.quantize(_x(), "delayed", scale="big")
    with pytest.raises(ValueError, match="scale"):
        grouplin.quantize(_x(), "delayed", scale=1e300)
    with pytest.raises(TypeError, match=r"scale\[1\]"):
        grouplin.grouped_quantize(_x(), [3, 5], "delayed", scale=[1.0, "x"])
    with pytest.raises(ValueError, match="scale: expected 2"):
        grouplin.grouped_quantize(_x(), [3, 5], "delayed", scale=[1.0, 2.0, 3.0])
    for eps, exc in (("1e-3", TypeError), (float("nan"), ValueError), (-1.0, ValueError), (1e39, ValueError)):
        with pytest.raises(exc, match="amax_epsilon"):
            grouplin.quantize(_x(), "current", amax_epsilon=eps)
        with pytest.raises(exc, match="amax_epsilon"):
            grouplin.grouped_quantize(_x(), [3, 5], amax_epsilon=eps)


# ---- sizes before allocation --------------------------------------------------------------------
@pytest.mark.parametrize("args, needle", [
    ((2**40, 64, 16), "num_gemms"),
    ((2, 2**57, 16), "in_features"),
    ((2, 64, 2**57), "out_features"),
    ((2**20, 2**19, 2**18), "GLN_MAX_ELEMS"),
    ((0, 64, 16), "num_gemms"),
    ((2.0, 64, 16), "num_gemms"),
])
def test_module_sizes_checked_before_allocation(args, needle):
    # before the fix, GroupedLinear(2**40, 64, 16) allocated one tensor per expert until the OOM
    # killer ended the process: refused at once now
    t0 = time.monotonic()
    with pytest.raises(ValueError, match=needle):
        GroupedLinear(*args)
    assert time.monotonic() - t0 < 5.0


def test_sharded_experts_sizes_checked_before_allocation():
    from grouplin.torch import distributed
    with pytest.raises(ValueError, match="ShardedExperts: num_experts"):
        distributed.ShardedExperts(2**40, 64, 16)
