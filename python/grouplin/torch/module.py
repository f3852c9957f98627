"""grouplin.torch.GroupedLinear: TransformerEngine's GroupedLinear on grouplin's C layer.

Example: a complete training loop with gradient accumulation over two microbatches per step,
Megatron-style fused wgrad accumulation into FP32 main_grad buffers, and an FP8 recipe::

    import torch
    from grouplin.torch import GroupedLinear, MXFP8BlockScaling

    N, K_in, K_out, lr = 4, 256, 128, 5.0       # plain SGD on a mean-squared error
    torch.manual_seed(0)
    teacher = torch.randn(N, K_out, K_in) / K_in ** 0.5       # the maps to learn
    layer = GroupedLinear(N, K_in, K_out, recipe=MXFP8BlockScaling(), params_dtype=torch.bfloat16,
                          device="cpu", fuse_wgrad_accumulation=True)   # or device="cuda"
    for w in layer.weights():                     # FP32 gradient buffers, as Megatron sets them
        w.main_grad = torch.zeros(w.shape, dtype=torch.float32)
    for step in range(100):
        for mb in range(2):
            splits = torch.randint(0, 64, (N,)).tolist()      # rows routed to each expert
            x = torch.randn(sum(splits), K_in, dtype=torch.bfloat16)
            target = torch.cat([xi.float() @ teacher[i].T for i, xi in enumerate(x.split(splits))])
            y = layer(x, splits, is_first_microbatch=(mb == 0))   # FIRST overwrites main_grad
            torch.nn.functional.mse_loss(y.float(), target).backward()
        with torch.no_grad():                     # the optimizer step reads main_grad
            for w in layer.weights():
                w.sub_(lr * w.main_grad)
            for b in layer.biases():              # biases: ordinary .grad
                b.sub_(lr * b.grad)
                b.grad = None

An int64 tensor of splits on the input's device selects the grouped path (one grouped call per
stage, no host read of the splits: capturable in a CUDA graph).  CUDA tensors run on
torch.cuda.current_stream() with the library's scratch from torch's caching allocator.
"""
import operator
import weakref

import torch

from .. import _lib, recipe as _recipe
from . import _eager, _layer, _ops  # noqa: F401  (_ops registers torch.ops.grouplin.*)


_INT64_MAX = (1 << 63) - 1
_data_ptr = torch.Tensor.data_ptr
_INT_ONLY = {int}
_main_grad = operator.attrgetter("main_grad")


class GroupedLinear(torch.nn.Module):
    """N linear maps applied to consecutive row blocks of one input: y_i = x_i W_iᵀ + b_i.

    Arguments follow TransformerEngine's GroupedLinear:
      num_gemms, in_features, out_features, bias=True
      recipe: None (GEMMs in the activation dtype), DelayedScaling, Float8CurrentScaling,
              MXFP8BlockScaling or Float8BlockScaling
      params_dtype: parameter dtype (default torch.get_default_dtype())
      device: where the parameters live (default: torch's default device); CPU tensors run on the
              CPU backend, CUDA tensors on the CUDA backend
      init_method: callable(weight) initializing each expert weight (default N(0, 0.023²))
      fuse_wgrad_accumulation: the wgrad goes into each weight's FP32 `main_grad` (which the
              caller sets); is_first_microbatch=True (or weight0.overwrite_main_grad) overwrites,
              otherwise accumulates; `grad_added_to_main_grad`, when present, is set to True
      delay_wgrad_compute: backward computes dgrad (and dbias); the wgrad waits for backward_dw()
      single_grouped_weight / single_grouped_bias: one parameter `weight` [N, K_out, K_in] /
              `bias` [N, K_out] instead of weight0..weightN-1 / bias0..biasN-1
      save_original_input: keep the high-precision input for wgrad (re-quantized in backward)
      return_bias: do not add the bias; forward returns (y, [bias_i])
      allow_repeated_backward: keep a reference to the input so that a second backward over a
              retained graph (retain_graph=True, gradcheck) runs the forward again; off by default
              (the layer's own saved state serves one backward, and the input is not kept alive);
              eager mode only, and a repeated forward records amaxes again under DelayedScaling
      sequence_parallel, tp_group, tp_size, get_rng_state_tracker, rng_tracker_name, parallel_mode,
      ub_overlap_rs, ub_overlap_ag, ub_name, name, use_grouped_tensor: TE's, accepted so TE code
              ports unchanged; tensor parallelism (tp_size > 1) and Userbuffers are refused, the
              path follows the type of m_splits
      distributed_weight: a grouplin.torch.DistributedWeight (e.g. ShardedExperts) holding the
              expert weights instead of local parameters (gathered per GEMM stage, gradients
              reduced into its main_grad)

    forward(inp, m_splits, is_first_microbatch=None): inp [..., in_features]; m_splits a list of
    N ints (split path; they must sum to the rows) or an int64 tensor of shape (N,) on inp's device
    (grouped path; rows past the sum are ignored and their outputs are 0).
    """

    def __init__(self, num_gemms, in_features, out_features, bias=True, *, recipe=None, params_dtype=None,
                 device=None, init_method=None, fuse_wgrad_accumulation=False, delay_wgrad_compute=False,
                 single_grouped_weight=False, single_grouped_bias=False, save_original_input=False,
                 return_bias=False, distributed_weight=None, amax_epsilon=None, allow_repeated_backward=False,
                 sequence_parallel=False, tp_group=None, tp_size=1, get_rng_state_tracker=None, rng_tracker_name=None,
                 parallel_mode=None, ub_overlap_rs=False, ub_overlap_ag=False, ub_name=None, name=None,
                 use_grouped_tensor=None):
        super().__init__()
        # TE's other arguments, so TE code ports unchanged: what grouplin has no counterpart for
        # is refused unless it has TE's default effect
        if tp_group is not None:
            tp_size = tp_group.size()
        if tp_size != 1:
            raise NotImplementedError("tp_size: tensor parallelism inside the layer is not supported (tp_size %d); "
                                      "shard the experts instead (distributed_weight=ShardedExperts(...))" % tp_size)
        if parallel_mode not in (None, "row", "column"):
            raise ValueError("parallel_mode: %r (expected None, 'row' or 'column')" % (parallel_mode,))
        if ub_overlap_rs or ub_overlap_ag or ub_name is not None:
            raise ValueError("ub_overlap_rs / ub_overlap_ag / ub_name: Userbuffers are not supported")
        if use_grouped_tensor is not None and not isinstance(use_grouped_tensor, bool):
            raise TypeError("use_grouped_tensor: expected None or a bool, got %r" % (use_grouped_tensor,))
        self.name, self.sequence_parallel = name, bool(sequence_parallel)
        _lib.check_layer_sizes("GroupedLinear", num_gemms, out_features, in_features, n_name="num_gemms")
        params_dtype = params_dtype or torch.get_default_dtype()
        _layer.gln_dtype(params_dtype, "params_dtype")
        device = torch.device(device) if device is not None else torch.empty(0).device
        self.num_gemms, self.in_features, self.out_features = num_gemms, in_features, out_features
        self.use_bias, self.return_bias = bool(bias), bool(return_bias)
        self.fuse_wgrad_accumulation = bool(fuse_wgrad_accumulation)
        self.delay_wgrad_compute = bool(delay_wgrad_compute)
        self.single_grouped_weight, self.single_grouped_bias = bool(single_grouped_weight), bool(single_grouped_bias)
        self.recipe = recipe
        self.distributed_weight = distributed_weight
        self._wgrad_hooks = []
        self._param_cache = None      # (parameter ids, weights, biases, main_grad ids + pointers)
        fields = dict(num_experts=num_gemms, in_features=in_features, out_features=out_features,
                      bias=int(self.use_bias and not self.return_bias),
                      fuse_wgrad_accumulation=int(self.fuse_wgrad_accumulation),
                      delay_wgrad_compute=int(self.delay_wgrad_compute),
                      single_grouped_weight=int(self.single_grouped_weight and distributed_weight is None),
                      single_grouped_bias=int(self.single_grouped_bias and self.use_bias and not self.return_bias),
                      save_original_input=int(bool(save_original_input)))
        fields["param_dtype"] = _layer.gln_dtype(params_dtype, "params_dtype")  # the biases' dtype with a
        fields.update(_recipe.layer_fields(recipe))                               # distributed_weight
        if amax_epsilon is not None:
            fields["amax_epsilon"] = _lib.real("amax_epsilon", amax_epsilon)
        if distributed_weight is not None:
            if (distributed_weight.num_experts, distributed_weight.out_features,
                    distributed_weight.in_features) != (num_gemms, out_features, in_features):
                raise ValueError("distributed_weight: holds %d x [%d, %d] weights, the layer needs %d x [%d, %d]"
                                 % (distributed_weight.num_experts, distributed_weight.out_features,
                                    distributed_weight.in_features, num_gemms, out_features, in_features))
            if self.delay_wgrad_compute:
                raise ValueError("delay_wgrad_compute: not supported with a distributed_weight (the wgrad "
                                 "must be reduced in the backward that computes it)")
        elif get_rng_state_tracker is not None:
            with get_rng_state_tracker().fork(rng_tracker_name or "model-parallel-rng"):
                self._make_weights(params_dtype, device, init_method)
        else:
            self._make_weights(params_dtype, device, init_method)
        self._make_biases(params_dtype, device)
        if self.delay_wgrad_compute:
            for p in self.parameters():
                p.skip_backward_post_hook = True
        flags = dict(fused=self.fuse_wgrad_accumulation, delay=self.delay_wgrad_compute,
                     single_weight=bool(fields["single_grouped_weight"]),
                     single_bias=bool(fields["single_grouped_bias"]), bias=bool(fields["bias"]), n=num_gemms,
                     repeat=bool(allow_repeated_backward))
        me = weakref.ref(self)
        self._state = _layer.LayerState(fields, lambda: me()._params(), flags)
        self._layer_id = self._state.id
        weakref.finalize(self, self._state.close)

    # ---- parameters -----------------------------------------------------------------------------
    def _make_weights(self, dtype, device, init_method):
        init = init_method or (lambda w: torch.nn.init.normal_(w, 0.0, 0.023))
        shape = (self.out_features, self.in_features)
        ws = [torch.empty(shape, dtype=dtype, device=device) for _ in range(self.num_gemms)]
        with torch.no_grad():
            for w in ws:
                init(w)
        if self.single_grouped_weight:
            self.weight = torch.nn.Parameter(torch.stack(ws))
        else:
            for i, w in enumerate(ws):
                self.register_parameter("weight%d" % i, torch.nn.Parameter(w))

    def _make_biases(self, dtype, device):
        if not self.use_bias:
            return
        if self.single_grouped_bias:
            self.bias = torch.nn.Parameter(torch.zeros((self.num_gemms, self.out_features), dtype=dtype, device=device))
        else:
            for i in range(self.num_gemms):
                self.register_parameter("bias%d" % i, torch.nn.Parameter(
                    torch.zeros(self.out_features, dtype=dtype, device=device)))

    def weights(self):
        """The weight parameters handed to the C layer (weight0..N-1, or [weight])."""
        if self.distributed_weight is not None:
            return list(self.distributed_weight.autograd_parameters())
        if self.single_grouped_weight:
            return [self.weight]
        return [getattr(self, "weight%d" % i) for i in range(self.num_gemms)]

    def biases(self):
        if not self.use_bias:
            return []
        if self.single_grouped_bias:
            return [self.bias]
        return [getattr(self, "bias%d" % i) for i in range(self.num_gemms)]

    def _params(self):
        """(weights, biases, main_grads, distributed weight, key) for the C layer, key naming
        the pointers it captures.  Per call: O(1) Python work plus C-speed passes over the
        parameter list (ids, data pointers); the per-parameter Python checks run only when
        a parameter or a main_grad changed."""
        dist = self.distributed_weight
        if dist is not None:
            ws = list(dist.autograd_parameters())
            bs = [] if self.return_bias else self.biases()
            key = (tuple(map(_data_ptr, ws)), tuple(map(_data_ptr, bs)), (), id(dist), bool(dist.requires_grad))
            return ws, bs, [], dist, key
        ident = tuple(map(id, self._parameters.values()))
        cache = self._param_cache
        if cache is None or cache[0] != ident:
            cache = self._param_cache = (ident, self.weights(), [] if self.return_bias else self.biases(), None)
        ws, bs = cache[1], cache[2]
        rg = ws[0].requires_grad
        w_ptrs = tuple(map(_data_ptr, ws))
        mgs, mg_ptrs = [], ()
        if self.fuse_wgrad_accumulation and rg:
            try:
                mgs = list(map(_main_grad, ws))
                mg_ptrs = tuple(map(_data_ptr, mgs))
            except (AttributeError, TypeError):   # a weight without a main_grad tensor: the check names it
                mgs, mg_ptrs = [getattr(w, "main_grad", None) for w in ws], None
            mg_key = (tuple(map(id, mgs)), mg_ptrs, w_ptrs)
            if mg_ptrs is None or cache[3] != mg_key:
                self._check_main_grads(ws, mgs)
                self._param_cache = cache[:3] + (mg_key,)
        key = (w_ptrs, tuple(map(_data_ptr, bs)), mg_ptrs, ws[0].dtype, rg)
        return ws, bs, mgs, None, key

    def _params_traced(self):
        """_params() in plain Python that torch.compile traces (no pointer key: the custom op
        looks its C layer up with _params() when it runs)."""
        dist = self.distributed_weight
        ws, bs = self.weights(), ([] if self.return_bias else self.biases())
        mgs = []
        if self.fuse_wgrad_accumulation and dist is None and ws[0].requires_grad:
            mgs = [getattr(w, "main_grad", None) for w in ws]
            self._check_main_grads(ws, mgs)
        return ws, bs, mgs, dist, None

    def _check_main_grads(self, ws, mgs):
        for i, (w, mg) in enumerate(zip(ws, mgs)):
            name = "weight" if self.single_grouped_weight else "weight%d" % i
            if mg is None:
                raise ValueError("%s.main_grad: fuse_wgrad_accumulation=True needs an FP32 main_grad "
                                 "buffer on every weight (set it before the first forward)" % name)
            if not isinstance(mg, torch.Tensor) or mg.dtype != torch.float32 or mg.numel() != w.numel() \
                    or not mg.is_contiguous() or mg.device != w.device:
                raise ValueError("%s.main_grad: expected a contiguous float32 tensor of %d elements on %s, "
                                 "got %s" % (name, w.numel(), w.device, "%s %s on %s" % (
                                     mg.dtype, tuple(mg.shape), mg.device) if isinstance(mg, torch.Tensor)
                                     else type(mg).__name__))

    # ---- forward / backward_dw ------------------------------------------------------------------
    def forward(self, inp, m_splits, is_first_microbatch=None):
        compiling = torch.compiler.is_compiling()
        params = self._params_traced() if compiling else self._params()
        ws, bs, mgs, dist, _ = params
        if not isinstance(inp, torch.Tensor):
            raise TypeError("inp: expected a torch.Tensor, got %s" % type(inp).__name__)
        act = _layer.DTYPE_CODES.get(inp.dtype)
        if act is None:
            _layer.gln_dtype(inp.dtype, "inp")
        if inp.device != ws[0].device:
            raise ValueError("inp: on %s but the weights are on %s" % (inp.device, ws[0].device))
        if not inp.is_contiguous():
            raise ValueError("inp: tensor must be contiguous (call .contiguous())")
        if inp.dim() < 1 or inp.shape[-1] != self.in_features:
            raise ValueError("inp: last dimension %s != in_features %d"
                             % (inp.shape[-1] if inp.dim() else "()", self.in_features))
        splits, m_t = self._splits(m_splits, inp, compiling)
        mb = self._microbatch(is_first_microbatch, ws)
        x = inp if inp.dim() == 2 else inp.reshape(-1, self.in_features)
        w_rg = dist.requires_grad if dist is not None else ws[0].requires_grad
        need = torch.is_grad_enabled() and bool(inp.requires_grad or w_rg or any(b.requires_grad for b in bs))
        if compiling:
            mg_in = mgs if need else []
            y, _ = torch.ops.grouplin.grouped_linear_forward(x, ws, bs, mg_in, m_t, splits, self._layer_id, mb,
                                                             need, bool(inp.requires_grad))
        else:
            y = _eager.forward(self._state, params, x, m_t, splits, mb, need, bool(inp.requires_grad))
        if inp.dim() != 2:
            y = y.reshape(-1, *inp.shape[1:-1], self.out_features)
        if self.return_bias:
            return y, [b.to(inp.dtype) for b in (self.bias.unbind(0) if self.single_grouped_bias else self.biases())]
        return y

    def _splits(self, m_splits, inp, compiling=True):
        """(host splits, None) on the split path, ([], int64 tensor) on the grouped path."""
        n = self.num_gemms
        if not compiling and type(m_splits) in (list, tuple) and len(m_splits) == n \
                and set(map(type, m_splits)) == _INT_ONLY and min(m_splits) >= 0 and max(m_splits) <= _INT64_MAX:
            return m_splits, None          # the usual case, checked at C speed
        if isinstance(m_splits, torch.Tensor):
            if m_splits.is_floating_point() or m_splits.is_complex() or m_splits.dtype == torch.bool:
                raise TypeError("m_splits: expected an integer tensor, got %s" % m_splits.dtype)
            if tuple(m_splits.shape) != (n,):
                raise ValueError("m_splits: expected shape (%d,), got %s" % (n, tuple(m_splits.shape)))
            if m_splits.device != inp.device:
                raise ValueError("m_splits: a tensor of splits (grouped path) must be on the input's device %s, "
                                 "got %s" % (inp.device, m_splits.device))
            if m_splits.dtype != torch.int64 or not m_splits.is_contiguous():
                m_splits = m_splits.to(torch.int64).contiguous()
            return [], m_splits
        if not isinstance(m_splits, (list, tuple)):
            raise TypeError("m_splits: expected a list of %d ints or an int64 tensor, got %s"
                            % (n, type(m_splits).__name__))
        if len(m_splits) != n:
            raise ValueError("m_splits: expected %d splits (num_gemms), got %d" % (n, len(m_splits)))
        out = []
        for i, s in enumerate(m_splits):
            # plain int tests only: this runs inside torch.compile'd code without a graph break
            if isinstance(s, torch.Tensor):
                if s.is_floating_point() or s.is_complex() or s.dtype == torch.bool:
                    raise TypeError("m_splits[%d]: expected an int, got a %s tensor" % (i, s.dtype))
                s = int(s)
            if not isinstance(s, int) or isinstance(s, bool):
                raise TypeError("m_splits[%d]: expected an int, got %s" % (i, type(s).__name__))
            if s < 0:
                raise ValueError("m_splits[%d]: %d is negative" % (i, s))
            if s > _INT64_MAX:
                raise ValueError("m_splits[%d]: %d does not fit int64 (the library's split type)" % (i, s))
            out.append(s)
        return out, None

    def _microbatch(self, is_first_microbatch, ws):
        overwrite = self.fuse_wgrad_accumulation and bool(getattr(ws[0], "overwrite_main_grad", False))
        if is_first_microbatch is None:
            return _lib.MICROBATCH_FIRST if overwrite else _lib.MICROBATCH_UNSET
        if not isinstance(is_first_microbatch, bool):
            raise TypeError("is_first_microbatch: expected None, True or False, got %r" % (is_first_microbatch,))
        return _lib.MICROBATCH_FIRST if (is_first_microbatch or overwrite) else _lib.MICROBATCH_NEXT

    def backward_dw(self):
        """Run the oldest queued weight-gradient GEMM (delay_wgrad_compute): into main_grad when
        fused, else assigned (overwritten) to each weight's .grad; then the registered hooks."""
        st = self._state
        if not self.delay_wgrad_compute or not st.dw_queue:
            return
        h = st.dw_queue.pop(0)
        L = _lib.lib()
        h.ctx.on_current_stream()
        try:
            if not self.fuse_wgrad_accumulation:
                _lib.check(L.gln_grouped_linear_zero_grad(h.ptr), "gln_grouped_linear_zero_grad")
            _lib.check(L.gln_grouped_linear_backward_dw(h.ptr), "gln_grouped_linear_backward_dw")
        finally:
            h.queued -= 1
        if not self.fuse_wgrad_accumulation:
            flat, o = st.read_grads(h, weights=True), 0
            for p in self.weights():
                p.grad = flat[o:o + p.numel()].view(p.shape)
                o += p.numel()
        h.destroy_if_idle()
        for hook in self._wgrad_hooks:
            hook()

    def register_wgrad_accumulation_and_reduce_hooks(self, hook):
        """hook() runs after each backward_dw (where Megatron DDP reduces gradients)."""
        self._wgrad_hooks.append(hook)

    def weights_updated(self):
        """Tell the layer the weights changed (optimizer step): a later is_first_microbatch=False
        re-quantizes instead of reusing the cached FP8 weights."""
        for h in self._state.handles.values():
            if h.ptr:
                _lib.check(_lib.lib().gln_grouped_linear_weights_updated(h.ptr), "gln_grouped_linear_weights_updated")

    def fp8_state(self, backward=False):
        """DelayedScaling state of the C layer the last forward used, as CPU copies:
        (scale [slots], amax_history [history_len, slots]); forward slots per expert i: input
        3i, weight 3i+1, output 3i+2 (unused); backward slots: grad_output 2i.  None before the
        first forward or without DelayedScaling."""
        h = self._state.current
        if h is None or not h.ptr or not isinstance(self.recipe, _recipe.DelayedScaling):
            return None
        import ctypes as C
        import numpy as np
        sc, hist = C.POINTER(C.c_float)(), C.POINTER(C.c_float)()
        slots, length = C.c_int32(), C.c_int32()
        _lib.check(_lib.lib().gln_grouped_linear_fp8_state(h.ptr, int(bool(backward)), C.byref(sc), C.byref(hist),
                                                           C.byref(slots), C.byref(length)),
                   "gln_grouped_linear_fp8_state")
        n, L = slots.value, length.value
        scale = torch.from_numpy(np.ctypeslib.as_array(sc, (n,)).copy())
        history = torch.from_numpy(np.ctypeslib.as_array(hist, (L, n)).copy())
        return scale, history

    def extra_repr(self):
        return "num_gemms=%d, in_features=%d, out_features=%d, bias=%s, recipe=%s" % (
            self.num_gemms, self.in_features, self.out_features, self.use_bias, type(self.recipe).__name__
            if self.recipe is not None else None)
