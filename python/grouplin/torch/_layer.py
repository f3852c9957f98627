"""The C layer behind a GroupedLinear module, and the registries the custom ops use.

A custom op can only take tensors and plain values, so the module registers its state here under
an integer id, and every training forward registers its saved context under another id that
travels to backward in a one-element int64 "token" tensor.  The C layer reads the caller's
parameters through pointers captured at create, so the handle is cached per pointer set: a moved
or re-allocated parameter (module.to(), a new main_grad) gets a fresh C layer.
"""
import ctypes as C
import itertools
import threading
import weakref

import torch

from .. import _context, _lib

_DTYPES = {torch.float32: _lib.FP32, torch.bfloat16: _lib.BF16, torch.float16: _lib.FP16}
DTYPE_CODES = _DTYPES

_lock = threading.RLock()   # reentrant: a finalizer (SavedGuard, _TokenMemory) may run inside a locked block
_ids = itertools.count(1)
_layers = {}      # id -> LayerState
_saved = {}       # id -> Saved


def gln_dtype(dt, name):
    code = _DTYPES.get(dt)
    if code is None:
        raise TypeError("%s: dtype %s is not supported (float32, bfloat16 or float16)" % (name, dt))
    return code


def device_key(dev):
    if dev.type == "cuda":
        return ("cuda", dev.index if dev.index is not None else torch.cuda.current_device())
    if dev.type == "cpu":
        return ("cpu", 0)
    raise ValueError("device %s is not supported (cpu or cuda)" % dev)


class Handle:
    """One gln_grouped_linear_t, with everything its pointers point at kept alive."""

    def __init__(self, ctx, cfg, keep):
        self.ctx = ctx
        self.keep = keep
        h = C.c_void_p()
        _lib.check(_lib.lib().gln_grouped_linear_create(ctx.handle, C.byref(cfg), C.byref(h)),
                   "gln_grouped_linear_create")
        self.ptr = h
        self.live_saved = 0
        self.queued = 0               # delayed wgrads queued in this C layer
        self.retired = False

    def destroy_if_idle(self):
        if self.ptr and self.retired and self.live_saved == 0 and self.queued == 0:
            _lib.lib().gln_grouped_linear_destroy(self.ptr)
            self.ptr = None


class LayerState:
    """What a GroupedLinear tells the C layer: its static configuration (`fields`), how to find
    the current parameters (`params()` -> weights, biases, main_grads, distributed table), and the
    cache of C handles per (device, activation dtype, path, pointer set).  Each handle has its own
    FP8 weight cache and delayed-scaling state; handles of stale pointers are destroyed once no
    saved context or queued wgrad needs them."""

    def __init__(self, fields, params_fn, flags):
        self.fields = fields
        self.k_in, self.k_out = fields["in_features"], fields["out_features"]
        self.params_fn = params_fn    # -> (weights, biases, main_grads, distributed, pointer key)
        self.flags = flags            # dict: fused, delay, single_weight, single_bias, bias, n
        self.handles = {}
        self.current = None
        self._last = (None, None)     # (key, handle) of the last call: the usual case, one compare
        self.dw_queue = []            # handles with a queued wgrad, oldest first
        self.id = next(_ids)
        with _lock:
            _layers[self.id] = self

    def handle(self, device, act_dtype, path, params=None):
        """The C layer for these parameters (`params`: what params_fn() returns, when the caller
        has it already)."""
        if params is None:
            params = self.params_fn()
        weights, biases, main_grads, dist, pkey = params
        key = (device, act_dtype, path, pkey)
        last_key, h = self._last
        if key == last_key and h.ptr:
            return h
        h = self.handles.get(key)
        if h is not None and h.ptr:
            self._last = (key, h)
            self.current = h
            return h
        rg = pkey[-1]
        ctx = _context.get(device)
        f = dict(self.fields)
        f.update(path=path, activation_dtype=act_dtype, weights_require_grad=int(rg))
        if dist is None:
            f["param_dtype"] = gln_dtype(weights[0].dtype, "weight")
        cfg = _lib.layer_config(**f)
        keep = [weights, biases, main_grads, dist]
        P = cfg.params
        vp = lambda ts: (C.c_void_p * len(ts))(*[t.data_ptr() for t in ts])  # noqa: E731
        if dist is not None:
            P.distributed = C.pointer(dist.table())
        elif self.flags["single_weight"]:
            P.weight_packed = weights[0].data_ptr()
        else:
            P.weights = vp(weights)
        if self.flags["bias"]:
            if self.flags["single_bias"]:
                P.bias_packed = biases[0].data_ptr()
            else:
                P.biases = vp(biases)
        if self.flags["fused"] and main_grads and dist is None:
            if self.flags["single_weight"]:
                P.main_grad_packed = main_grads[0].data_ptr()
            else:
                P.main_grads = vp(main_grads)
        h = Handle(ctx, cfg, keep)
        for k, old in self.handles.items():
            if k[3] != pkey:              # stale parameter pointers: never used again
                old.retired = True
                old.destroy_if_idle()
        self.handles = {k: v for k, v in self.handles.items() if v.ptr}
        self.handles[key] = h
        self.current = h
        self._last = (key, h)
        return h

    def raise_from_hooks(self, status):
        """A distributed weight's Python hook that raised: re-raise its exception (the library's
        status and message are attached as the cause).  Call it on a failed status only."""
        if not status:
            return
        dist = self.params_fn()[3]
        exc = dist.take_exception() if dist is not None else None
        if exc is not None:
            try:
                _lib.check(status)
            except _lib.GrouplinError as lib_exc:
                raise exc from lib_exc
            raise exc

    def read_grads(self, h, weights):
        """The C layer's (non-fused) weight or bias gradients copied into one flat tensor, the
        parameters' gradients back to back in the order of the parameter list: one copy, since
        the layer keeps them in one block (checked: else one copy per expert)."""
        params = h.keep[0] if weights else h.keep[1]
        n = self.flags["n"]
        per = (self.k_out * self.k_in) if weights else self.k_out
        flat = torch.empty(n * per, dtype=params[0].dtype, device=params[0].device)
        L = _lib.lib()
        first, last = _grad_ptr(L, h, 0, weights), _grad_ptr(L, h, n - 1, weights)
        if last - first == (n - 1) * per * flat.element_size():
            copy_from(h.ctx, flat, first)
            return flat
        for i in range(n):
            copy_from(h.ctx, flat[i * per:(i + 1) * per], _grad_ptr(L, h, i, weights))
        return flat

    def close(self):
        for h in self.handles.values():
            h.retired = True
            h.destroy_if_idle()
        with _lock:
            _layers.pop(self.id, None)


def _grad_ptr(L, h, expert, weights):
    w, b = C.c_void_p(), C.c_void_p()
    _lib.check(L.gln_grouped_linear_grads(h.ptr, expert, C.byref(w), C.byref(b)), "gln_grouped_linear_grads")
    return (w.value if weights else b.value) or 0


def layer(layer_id):
    st = _layers.get(layer_id)
    if st is None:
        raise RuntimeError("grouplin: layer %d no longer exists (its module was deleted)" % layer_id)
    return st


class _TokenMemory(bytearray):
    """The 8 bytes under a saved context's token tensor (torch.frombuffer: the token's storage
    keeps this object alive, and drops it when the last tensor on that storage goes, autograd's
    saved copies included).  Going, it releases the saved context unless disarmed: so a forward
    traced by torch.compile, whose autograd context exists only while tracing, gives its saved
    context back when the compiled graph's saved tensors are freed, backward or not."""

    def __del__(self):
        sid = getattr(self, "saved_id", 0)
        if sid:
            try:
                release_saved(sid)
            except Exception:
                pass


class Saved:
    """A gln_grouped_linear_saved_t in flight between a forward and its backward."""

    def __init__(self, handle, ptr, rows, grouped):
        self.handle, self.ptr, self.rows, self.grouped = handle, ptr, rows, grouped
        self._memory = None
        handle.live_saved += 1
        with _lock:
            self.id = next(_ids)
            _saved[self.id] = self

    def token(self):
        """The one-element int64 token naming this context; its storage owns the context (see
        _TokenMemory) until disarm_token()."""
        mem = _TokenMemory(8)
        t = torch.frombuffer(mem, dtype=torch.int64)
        t[0] = self.id
        mem.saved_id = self.id
        self._memory = weakref.ref(mem)   # weak: the context must not keep its token alive
        return t

    def disarm_token(self):
        """Another owner (the eager autograd context's SavedGuard) releases this context: the
        token may be copied or dropped (saved_tensors_hooks) without releasing it."""
        mem = self._memory() if self._memory is not None else None
        if mem is not None:
            mem.saved_id = 0

    def release(self):
        if self.ptr:
            _lib.lib().gln_grouped_linear_saved_release(self.ptr)
            self.ptr = None
            self.handle.live_saved -= 1
            self.handle.destroy_if_idle()
        with _lock:
            _saved.pop(self.id, None)


def saved(saved_id):
    s = _saved.get(saved_id)
    if s is None:
        raise RuntimeError("grouplin: backward of a forward whose saved state was already released "
                           "(backward called twice without retain_graph?)")
    return s


def live_saved_contexts():
    """How many C saved contexts (one per training forward, holding the library's saved
    activations and scratch) are not released yet: by their backward, or when autograd freed
    the graph of a forward whose backward never ran."""
    with _lock:
        return len(_saved)


def release_saved(saved_id):
    s = _saved.get(saved_id)
    if s is not None:
        s.release()


class SavedGuard:
    """Eager mode: releases a saved context whose backward never ran when autograd frees the
    graph node holding this object (and takes that duty over from the token's memory, which
    activation offloading may copy and free long before backward)."""

    def __init__(self, saved_id):
        self.saved_id = saved_id
        s = _saved.get(saved_id)
        if s is not None:
            s.disarm_token()

    def __del__(self):
        try:
            release_saved(self.saved_id)
        except Exception:
            pass


def copy_from(ctx, dst, src_ptr):
    """dst (a torch tensor on the context's device) <- the library buffer at src_ptr."""
    nbytes = dst.numel() * dst.element_size()
    if nbytes:
        _lib.check(_lib.lib().gln_memcpy(ctx.on_current_stream(), C.c_void_p(dst.data_ptr()), C.c_void_p(src_ptr),
                                         nbytes, _lib.COPY_BACKEND_TO_BACKEND), "gln_memcpy")
