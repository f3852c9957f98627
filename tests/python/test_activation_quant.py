"""grouplin.activation_forward and grouplin.activation_forward_quantize.

activation_forward against float64 numpy (SwiGLU silu(a)·b and the tanh form of GELU, one
rounding of an FP32 result); activation_forward_quantize byte for byte against its contract,
activation_forward into hp_dtype followed by grouped_quantize (data, col_data, both scale
grids, amax and scale), per activation, recipe and dtype, on every available device (on CUDA
with bf16 input that is the fused kernel against the two separate calls); and the library's own
messages for arguments only the library checks."""
import numpy as np
import pytest

import grouplin
from conftest import DEVICES

ml_dtypes = pytest.importorskip("ml_dtypes")

RNG = np.random.default_rng(4321)
SPLITS = [7, 0, 40, 17, 1]     # an empty member and a one-row member
FIELDS = ("data", "col_data", "scale_inv", "col_scale_inv", "amax", "scale")


def _silu_mul(x):
    a, b = x[:, :x.shape[1] // 2], x[:, x.shape[1] // 2:]
    return a / (1.0 + np.exp(-a)) * b


def _gelu_tanh(x):
    return 0.5 * x * (1.0 + np.tanh(np.sqrt(2.0 / np.pi) * (x + 0.044715 * x ** 3)))


def _input(rows, cols, dtype):
    """Normal values, some large enough to saturate E4M3 after the activation, as `dtype`."""
    x = RNG.standard_normal((rows, cols)).astype(np.float32)
    x[rows // 2, :5] *= 300.0
    return x.astype(dtype)


def _on(x, device):
    """x as the array kind the device takes: numpy on the CPU, a torch tensor on CUDA."""
    if device == "cpu":
        return x
    import torch
    if x.dtype == ml_dtypes.bfloat16:
        return torch.from_numpy(x.view(np.int16)).view(torch.bfloat16).to(device)
    return torch.from_numpy(x).to(device)


def _bytes(a):
    """The raw bytes of a numpy array or a torch tensor (None stays None)."""
    if a is None:
        return None
    if isinstance(a, np.ndarray):
        return a.view(np.uint8).reshape(-1)
    import torch
    return a.contiguous().view(torch.uint8).reshape(-1).cpu().numpy()


@pytest.mark.parametrize("dtype", [np.float32, ml_dtypes.bfloat16])
@pytest.mark.parametrize("act", ["swiglu", "gelu"])
def test_activation_forward_matches_float64(act, dtype):
    x = _input(33, 96, dtype)
    got = grouplin.activation_forward(x, act, out_dtype="fp32")
    assert got.dtype == np.float32 and got.shape == (33, 48 if act == "swiglu" else 96)
    x64 = x.astype(np.float64)
    want = _silu_mul(x64) if act == "swiglu" else _gelu_tanh(x64)
    # FP32 arithmetic (exp / tanh of the library's libm, a few roundings) against float64
    assert np.allclose(got, want, rtol=1e-5, atol=1e-6)
    # out_dtype defaults to x's dtype: the same values rounded once more (RNE from FP32)
    same = grouplin.activation_forward(x, act)
    assert same.dtype == x.dtype
    assert np.array_equal(_bytes(same), _bytes(got.astype(dtype)))


RECIPES = [("current", {}), ("delayed", {"scale": [0.5, 2.0, 4.0, 1.0, 8.0]}), ("mxfp8", {}),
           ("block_1d", {"power_2_scale": True}), ("block_2d", {"power_2_scale": True}),
           ("block_1d", {})]


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype,hp", [(ml_dtypes.bfloat16, "bf16"), (np.float32, "bf16"), (np.float32, "fp32")])
@pytest.mark.parametrize("mode,opts", RECIPES)
@pytest.mark.parametrize("act", ["swiglu", "gelu"])
def test_fused_bytes_equal_activation_then_grouped_quantize(act, mode, opts, dtype, hp, device):
    h = 320                                 # not a multiple of 128: partial blocks and tiles
    cols = 2 * h if act == "swiglu" else h
    x = _on(_input(sum(SPLITS), cols, dtype), device)
    kw = dict(mode=mode, rowwise=True, columnwise=True, **opts)
    got = grouplin.activation_forward_quantize(x, SPLITS, act, hp_dtype=hp, **kw)
    want = grouplin.grouped_quantize(grouplin.activation_forward(x, act, out_dtype=hp), SPLITS, **kw)
    assert got.shape == want.shape == (sum(SPLITS), h)
    assert list(got.splits) == SPLITS
    assert np.array_equal(got.scale_offsets, want.scale_offsets)
    assert np.array_equal(got.col_scale_offsets, want.col_scale_offsets)
    for f in FIELDS:
        g, w = _bytes(getattr(got, f)), _bytes(getattr(want, f))
        assert (g is None) == (w is None), f
        if g is not None:
            assert np.array_equal(g, w), f


def test_rowwise_only_and_trailing_rows():
    """Rows past sum(m_splits) belong to no member: the members' bytes still equal the composition."""
    x = _input(sum(SPLITS) + 5, 256, ml_dtypes.bfloat16)
    got = grouplin.activation_forward_quantize(x, SPLITS, "swiglu", "mxfp8")
    want = grouplin.grouped_quantize(grouplin.activation_forward(x, "swiglu"), SPLITS, "mxfp8")
    assert got.col_data is None and got.col_scale_inv is None
    rows = sum(SPLITS)
    assert np.array_equal(_bytes(got.data[:rows]), _bytes(want.data[:rows]))
    n = got.scale_offsets[-1]
    assert np.array_equal(_bytes(got.scale_inv[:n]), _bytes(want.scale_inv[:n]))


def test_errors_carry_the_library_message():
    x = _input(sum(SPLITS), 64, ml_dtypes.bfloat16)
    # checked in Python (names the argument)
    with pytest.raises(ValueError, match="activation: 'relu'"):
        grouplin.activation_forward_quantize(x, SPLITS, "relu")
    with pytest.raises(ValueError, match="mode: 'nvfp4'"):
        grouplin.activation_forward_quantize(x, SPLITS, "gelu", "nvfp4")
    with pytest.raises(TypeError, match="hp_dtype"):
        grouplin.activation_forward_quantize(x, SPLITS, "gelu", hp_dtype="int32")
    # checked by the library: its message, naming the call and the argument, comes through
    odd = _input(sum(SPLITS), 63, ml_dtypes.bfloat16)
    with pytest.raises(grouplin.InvalidArgumentError,
                       match=r"gln_activation_forward_quantize: in->packed\.cols 63 must be even for swiglu"):
        grouplin.activation_forward_quantize(odd, SPLITS, "swiglu")
    with pytest.raises(grouplin.InvalidArgumentError, match=r"gln_activation_forward: in->cols 63 must be even"):
        grouplin.activation_forward(odd, "swiglu")
    with pytest.raises(grouplin.InvalidArgumentError, match=r"gln_activation_forward_quantize: .*splits"):
        grouplin.activation_forward_quantize(x, [SPLITS[0] + 100] + SPLITS[1:], "gelu")
    with pytest.raises(grouplin.InvalidArgumentError, match=r"gln_activation_forward_quantize: .*amax_epsilon"):
        grouplin.activation_forward_quantize(x, SPLITS, "gelu", amax_epsilon=-1.0)
