"""Distributed expert weights from Python.

DistributedWeight is the protocol (TransformerEngine's contract, in grouplin's form): a Python
object holding N expert weights that live elsewhere (sharded over ranks, offloaded, ...).  The
layer calls it through the C protocol table (gln_dist_weights_t), which this module builds from the
object's methods with ctypes callbacks.  The layer keeps no gathered copy: it materializes for
each GEMM stage and releases right after; backward gathers again from the shards.

ShardedExperts is the built-in implementer: the N weights flattened into one FP32 master buffer
split evenly over a torch.distributed process group (NCCL or Gloo), one all-gather per
materialization, one reduce-scatter of the FP32 weight gradients into the shard's main_grad.

    dist.init_process_group("gloo")           # or "nccl" with CUDA tensors
    experts = ShardedExperts(N, K_out, K_in, device="cpu")
    layer = GroupedLinear(N, K_in, K_out, bias=False, distributed_weight=experts)
    y = layer(x, splits); y.sum().backward()
    experts.shard.main_grad                   # this rank's slice of the summed weight gradients
"""
import ctypes as C

import torch
import torch.distributed as dist

from .. import _lib
from . import _layer


class DistributedWeight:
    """Protocol for weights held outside the layer.  Subclasses set num_experts, out_features,
    in_features and implement:

      requires_grad (property)      whether the underlying parameters need gradients
      materialize_forward()         -> N full tensors [out_features, in_features] (fp32 or bf16,
                                       contiguous, on the layer's device) for the forward GEMM
      materialize_backward()        -> the same for dgrad (gather again; never a cached copy)
      release(weights)              the layer is done with a materialized list
      grad_buffer(expert)           -> FP32 [out_features, in_features] buffer the wgrad GEMM
                                       overwrites for `expert`
      finalize_weight_grads(accumulate) reduce the N grad_buffers into the owners' main_grad
                                       (accumulate=False overwrites: first microbatch); return True
                                       when it completes asynchronously (then wait() finishes it)
      wait()                        complete a pending finalize (no-op when none)
      prefetch(direction)           optional: start the gather of the next materialize_forward
                                    (direction 0) or materialize_backward (1) now, so that it
                                    overlaps the work that follows; that materialize then only
                                    waits for it and returns the same weights.  The layer never
                                    calls it: the caller does (e.g. for the next layer, before
                                    this one's forward).  Collective like the materialize it serves.
      autograd_parameters()         the torch Parameters autograd should see as the layer's weights

    A hook that raises fails the layer call; the exception reaches the caller unchanged.
    """
    num_experts = 0
    out_features = 0
    in_features = 0

    @property
    def requires_grad(self):
        return any(p.requires_grad for p in self.autograd_parameters())

    def release(self, weights):
        pass

    def wait(self):
        pass

    def autograd_parameters(self):
        raise NotImplementedError

    def prefetch(self, direction):
        """Not overridden: the protocol table has no prefetch hook (NULL), and this does nothing."""

    def _has_prefetch(self):
        return getattr(type(self), "prefetch", None) is not DistributedWeight.prefetch

    # ---- the C protocol table ---------------------------------------------------------------------
    def table(self):
        """The gln_dist_weights_t for this object (built once, kept alive by the object)."""
        t = getattr(self, "_gln_table", None)
        if t is None:
            self._gln_live = {}
            self._gln_exc = None
            cb = (_lib.REQUIRES_GRAD_FN(self._c_requires_grad), _lib.MATERIALIZE_FN(self._c_materialize_fwd),
                  _lib.MATERIALIZE_FN(self._c_materialize_bwd), _lib.MATERIALIZE_FN(self._c_release),
                  _lib.GRAD_BUFFER_FN(self._c_grad_buffer), _lib.FINALIZE_FN(self._c_finalize),
                  _lib.WAIT_FN(self._c_wait))
            t = _lib.DistWeights(C.sizeof(_lib.DistWeights), None, self.num_experts, self.out_features,
                                 self.in_features, *cb)
            if self._has_prefetch():
                pf = _lib.PREFETCH_FN(self._c_prefetch)
                t.prefetch = pf
                cb = cb + (pf,)
            self._gln_callbacks = cb
            self._gln_table = t
        return t

    def take_exception(self):
        exc, self._gln_exc = getattr(self, "_gln_exc", None), None
        return exc

    def _guard(self, fn, *args):
        """Run a hook; an exception is kept for the caller and becomes a failing status (no
        exception may unwind through C)."""
        try:
            fn(*args)
            return _lib.STATUS_SUCCESS
        except Exception as e:  # noqa: BLE001 - re-raised by the layer call after C returns
            if self._gln_exc is None:
                self._gln_exc = e
            return _lib.STATUS_INVALID_ARGUMENT if isinstance(e, (ValueError, TypeError)) \
                else _lib.STATUS_INTERNAL_ERROR

    def _c_requires_grad(self, impl):
        try:
            return int(bool(self.requires_grad))
        except Exception as e:  # noqa: BLE001
            self._gln_exc = self._gln_exc or e
            return 1

    def _fill(self, out, ws, what):
        ws = list(ws)
        if len(ws) != self.num_experts:
            raise ValueError("%s: returned %d weights, expected num_experts=%d" % (what, len(ws), self.num_experts))
        for i, w in enumerate(ws):
            if tuple(w.shape) != (self.out_features, self.in_features) or not w.is_contiguous():
                raise ValueError("%s: weight %d must be contiguous [%d, %d], got %s" %
                                 (what, i, self.out_features, self.in_features, tuple(w.shape)))
            out[i] = _lib.plain_tensor(_layer.gln_dtype(w.dtype, "%s()[%d]" % (what, i)), self.out_features,
                                       self.in_features, w.data_ptr() or None)
        self._gln_live[out[0].data] = ws

    def _c_materialize_fwd(self, impl, out):
        return self._guard(lambda: self._fill(out, self.materialize_forward(), "materialize_forward"))

    def _c_materialize_bwd(self, impl, out):
        return self._guard(lambda: self._fill(out, self.materialize_backward(), "materialize_backward"))

    def _c_release(self, impl, out):
        return self._guard(lambda: self.release(self._gln_live.pop(out[0].data, None)))

    def _c_grad_buffer(self, impl, expert, buf):
        def get():
            g = self.grad_buffer(int(expert))
            if g.dtype != torch.float32 or g.numel() != self.out_features * self.in_features or not g.is_contiguous():
                raise ValueError("grad_buffer(%d): expected a contiguous float32 [%d, %d] tensor"
                                 % (expert, self.out_features, self.in_features))
            buf[0] = C.cast(C.c_void_p(g.data_ptr()), C.POINTER(C.c_float))
        return self._guard(get)

    def _c_finalize(self, impl, accumulate, pending):
        def run():
            pending[0] = int(bool(self.finalize_weight_grads(bool(accumulate))))
        return self._guard(run)

    def _c_wait(self, impl):
        return self._guard(self.wait)

    def _c_prefetch(self, impl, direction):
        return self._guard(lambda: self.prefetch(int(direction)))


class ShardedExperts(torch.nn.Module, DistributedWeight):
    """N expert weights [out_features, in_features] sharded evenly over a process group.

    `shard` (a Parameter, FP32 master) holds this rank's slice of the flattened weights (padded
    so every rank's slice has the same length); `shard.main_grad` receives this rank's slice of
    the weight gradients summed over ranks.  dtype is the working dtype gathered for the GEMMs.
    Every rank initializes the full weights identically (init_method after torch.manual_seed(seed))."""

    def __init__(self, num_experts, out_features, in_features, group=None, dtype=torch.float32, device=None,
                 init_method=None, seed=1234):
        torch.nn.Module.__init__(self)
        _lib.check_layer_sizes("ShardedExperts", num_experts, out_features, in_features)
        self.num_experts, self.out_features, self.in_features = num_experts, out_features, in_features
        self.group = group
        self.world = dist.get_world_size(group)
        self.rank = dist.get_rank(group)
        self.dtype = dtype
        self.total = num_experts * out_features * in_features
        self.shard_len = -(-self.total // self.world)
        device = torch.device(device) if device is not None else torch.empty(0).device
        full = torch.empty(self.total, dtype=torch.float32)
        gen = torch.Generator().manual_seed(seed)
        if init_method is None:
            full.normal_(0.0, 0.023, generator=gen)
        else:
            init_method(full.view(num_experts, out_features, in_features))
        self.shard = torch.nn.Parameter(torch.zeros(self.shard_len, dtype=torch.float32, device=device))
        self.load_full(full)
        self.shard.main_grad = torch.zeros_like(self.shard)
        self._grad_flat = None
        self._prefetched = [None, None]   # per direction: (async work handle, gathered flat buffer)

    def autograd_parameters(self):
        return [self.shard]

    def load_full(self, full):
        """Take this rank's slice of full weights [N, out, in] (identical on every rank)."""
        flat = full.reshape(-1).to(torch.float32)
        lo = self.rank * self.shard_len
        part = flat[lo:min(lo + self.shard_len, self.total)]
        with torch.no_grad():
            self.shard.zero_()
            self.shard[:part.numel()].copy_(part)

    def _gather(self, src, async_op=False):
        out = torch.empty(self.shard_len * self.world, dtype=src.dtype, device=src.device)
        work = dist.all_gather(list(out.chunk(self.world)), src.contiguous(), group=self.group,
                               async_op=async_op)
        return (work, out) if async_op else out

    def full_weight(self):
        """All N FP32 master weights [N, out, in], gathered (a collective: call on every rank)."""
        return self._gather(self.shard.detach())[:self.total].view(self.num_experts, self.out_features,
                                                                    self.in_features)

    def _materialize(self, direction):
        pending, self._prefetched[direction] = self._prefetched[direction], None
        if pending is not None:
            work, flat = pending
            work.wait()
        else:
            flat = self._gather(self.shard.detach().to(self.dtype))
        return list(flat[:self.total].view(self.num_experts, self.out_features, self.in_features).unbind(0))

    def materialize_forward(self):
        return self._materialize(0)

    def materialize_backward(self):
        return self._materialize(1)

    def prefetch(self, direction):
        """Start the all-gather of the next materialization of `direction` (0 forward, 1
        backward) asynchronously; it reads the shard now, so update the shard (optimizer step,
        load_full) before prefetching, not after.  A collective: call on every rank."""
        if direction not in (0, 1):
            raise ValueError("prefetch: direction %r must be 0 (forward) or 1 (backward)" % (direction,))
        if self._prefetched[direction] is not None:
            raise RuntimeError("prefetch: the %s weights are prefetched already (the next materialize "
                               "consumes them)" % ("backward" if direction else "forward"))
        self._prefetched[direction] = self._gather(self.shard.detach().to(self.dtype), async_op=True)

    def grad_buffer(self, expert):
        if self._grad_flat is None:
            self._grad_flat = torch.zeros(self.shard_len * self.world, dtype=torch.float32, device=self.shard.device)
        return self._grad_flat[:self.total].view(self.num_experts, self.out_features, self.in_features)[expert]

    def finalize_weight_grads(self, accumulate):
        g, self._grad_flat = self._grad_flat, None
        if g is None:
            return False
        mine = torch.empty(self.shard_len, dtype=torch.float32, device=g.device)
        if dist.get_backend(self.group) == "nccl":
            dist.reduce_scatter_tensor(mine, g, group=self.group)
        else:  # Gloo has no reduce-scatter of one flat tensor: all-reduce and keep our slice
            dist.all_reduce(g, group=self.group)
            mine.copy_(g.chunk(self.world)[self.rank])
        mg = self.shard.main_grad
        if accumulate:
            mg.add_(mine)
        else:
            mg.copy_(mine)
        return False
