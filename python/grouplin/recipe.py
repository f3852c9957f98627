"""Recipe configuration objects, with TransformerEngine's class and field names, so code written
for te.GroupedLinear carries over.  Each maps onto the library's gln_grouped_linear_config_t
(`_layer_fields()`); fields the library has no counterpart for are refused when set to a value
other than TE's default, instead of being silently ignored."""
import ctypes as C
import enum
from dataclasses import dataclass, field

from . import _lib


class Format(enum.Enum):
    """FP8 formats per direction: E4M3 everywhere, or HYBRID (E4M3 forward, E5M2 gradients)."""
    E4M3 = "E4M3"
    HYBRID = "HYBRID"


_FMT = {Format.E4M3: _lib.FP8_FORMAT_E4M3, Format.HYBRID: _lib.FP8_FORMAT_HYBRID}


def _fmt(name, value):
    if value not in _FMT:
        raise ValueError("%s.fp8_format: %r is not supported (Format.E4M3 or Format.HYBRID)" % (name, value))
    return _FMT[value]


def _qparams_epsilon(name, q):
    return _lib.real("%s.QParams.amax_epsilon" % name, q.amax_epsilon)


@dataclass
class QParams:
    """Per-role quantization parameters (TE's QParams)."""
    power_2_scale: bool = False
    amax_epsilon: float = 0.0


@dataclass
class DelayedScaling:
    """Per-tensor FP8 with scales from an amax history (TE's DelayedScaling)."""
    margin: int = 0
    fp8_format: Format = Format.HYBRID
    amax_history_len: int = 1024
    amax_compute_algo: str = "max"
    scaling_factor_compute_algo: object = None
    reduce_amax: bool = True

    def _layer_fields(self):
        if self.amax_compute_algo not in ("max", "most_recent"):
            raise ValueError("DelayedScaling.amax_compute_algo: %r (expected 'max' or 'most_recent'; "
                             "callables are not supported)" % (self.amax_compute_algo,))
        if self.scaling_factor_compute_algo is not None:
            raise ValueError("DelayedScaling.scaling_factor_compute_algo: only None is supported")
        # the C fields are 32-bit: checked here, not truncated by ctypes (the library checks the
        # recipe's ranges, margin 0..126, once the value has arrived intact)
        margin = _lib.integer("DelayedScaling.margin", self.margin, ctype=C.c_int)
        history = _lib.integer("DelayedScaling.amax_history_len", self.amax_history_len, lo=1, ctype=C.c_int)
        return dict(recipe=_lib.RECIPE_FP8_DELAYED, fp8_format=_fmt("DelayedScaling", self.fp8_format),
                    margin=margin, amax_history_len=history,
                    amax_algo=_lib.AMAX_ALGO_MAX if self.amax_compute_algo == "max" else _lib.AMAX_ALGO_MOST_RECENT)


@dataclass
class Float8CurrentScaling:
    """Per-tensor FP8 with the scale from the current amax (TE's Float8CurrentScaling)."""
    fp8_format: Format = Format.HYBRID
    fp8_quant_fwd_inp: QParams = field(default_factory=QParams)
    fp8_quant_fwd_weight: QParams = field(default_factory=QParams)
    fp8_quant_bwd_grad: QParams = field(default_factory=QParams)

    def _layer_fields(self):
        roles = (self.fp8_quant_fwd_inp, self.fp8_quant_fwd_weight, self.fp8_quant_bwd_grad)
        if len({(q.power_2_scale, q.amax_epsilon) for q in roles}) != 1:
            raise ValueError("Float8CurrentScaling: fp8_quant_fwd_inp / fp8_quant_fwd_weight / fp8_quant_bwd_grad "
                             "must be equal (the library has one power_2_scales / amax_epsilon per layer)")
        q = roles[0]
        return dict(recipe=_lib.RECIPE_FP8_CURRENT, fp8_format=_fmt("Float8CurrentScaling", self.fp8_format),
                    power_2_scales=int(bool(q.power_2_scale)),
                    amax_epsilon=_qparams_epsilon("Float8CurrentScaling", q))


@dataclass
class MXFP8BlockScaling:
    """FP8 E4M3 data with one E8M0 scale per 1x32 block (TE's MXFP8BlockScaling)."""
    fp8_format: Format = Format.E4M3
    margin: int = 0

    def _layer_fields(self):
        return dict(recipe=_lib.RECIPE_MXFP8, fp8_format=_fmt("MXFP8BlockScaling", self.fp8_format))


@dataclass
class Float8BlockScaling:
    """DeepSeek-style FP8 blocks: 1x128 activations / gradients, 128x128 weights (TE's
    Float8BlockScaling).  power_2_scale defaults to True (TE's default)."""
    fp8_format: Format = Format.E4M3
    fp8_quant_fwd_inp: QParams = field(default_factory=lambda: QParams(power_2_scale=True))
    fp8_quant_fwd_weight: QParams = field(default_factory=lambda: QParams(power_2_scale=True))
    fp8_quant_bwd_grad: QParams = field(default_factory=lambda: QParams(power_2_scale=True))
    x_block_scaling_dim: int = 1
    w_block_scaling_dim: int = 2
    grad_block_scaling_dim: int = 1

    def _layer_fields(self):
        if (self.x_block_scaling_dim, self.w_block_scaling_dim, self.grad_block_scaling_dim) != (1, 2, 1):
            raise ValueError("Float8BlockScaling: only x_block_scaling_dim=1, w_block_scaling_dim=2, "
                             "grad_block_scaling_dim=1 are supported")
        roles = (self.fp8_quant_fwd_inp, self.fp8_quant_fwd_weight, self.fp8_quant_bwd_grad)
        if len({(q.power_2_scale, q.amax_epsilon) for q in roles}) != 1:
            raise ValueError("Float8BlockScaling: the three QParams must be equal (one setting per layer)")
        q = roles[0]
        return dict(recipe=_lib.RECIPE_FP8_BLOCK, fp8_format=_fmt("Float8BlockScaling", self.fp8_format),
                    block_fp32_scales=int(not q.power_2_scale),
                    amax_epsilon=_qparams_epsilon("Float8BlockScaling", q))


def layer_fields(recipe):
    """gln_grouped_linear_config_t fields for a recipe object (None = activation-dtype GEMMs)."""
    if recipe is None:
        return dict(recipe=_lib.RECIPE_NONE)
    if not hasattr(recipe, "_layer_fields"):
        raise TypeError("recipe: expected None, DelayedScaling, Float8CurrentScaling, MXFP8BlockScaling or "
                        "Float8BlockScaling, got %s" % type(recipe).__name__)
    return recipe._layer_fields()
