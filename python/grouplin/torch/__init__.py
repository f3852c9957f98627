"""grouplin for PyTorch: GroupedLinear (TransformerEngine's module on grouplin's C layer), the
recipe objects, and distributed expert weights.  See grouplin.torch.module for a training loop."""
from ..recipe import DelayedScaling, Float8BlockScaling, Float8CurrentScaling, Format, MXFP8BlockScaling, QParams
from .distributed import DistributedWeight, ShardedExperts
from ._layer import live_saved_contexts
from .module import GroupedLinear

__all__ = ["GroupedLinear", "DistributedWeight", "ShardedExperts", "DelayedScaling", "Float8CurrentScaling",
           "MXFP8BlockScaling", "Float8BlockScaling", "Format", "QParams",
           "live_saved_contexts"]
