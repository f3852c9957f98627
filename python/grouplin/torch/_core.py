"""One forward and one backward of the C layer on torch tensors: the calls both the eager
autograd function (_eager) and the torch.compile custom ops (_ops) run.

Kept to what the C call needs, because on small experts this host work is the layer's cost:
no host read of device data (the splits tensor is handed over by pointer), no per-expert Python
loop, the output from torch's caching allocator, the C entry points looked up once, and the
library's argument checks not repeated here (its status raises with its own message).
"""
import ctypes as C
import threading

import torch

from .. import _lib
from . import _layer

_byref, _pointer, _Tensor, _ForwardArgs = C.byref, C.pointer, _lib.Tensor, _lib.ForwardArgs
_ARGS_SIZE = C.sizeof(_lib.ForwardArgs)


class _Calls:
    """The library's entry points, looked up once (lib() takes a lock and CDLL attributes cost
    a dict lookup each)."""
    forward = backward = zero_grad = None

    @classmethod
    def load(cls):
        L = _lib.lib()
        cls.forward = L.gln_grouped_linear_forward
        cls.backward = L.gln_grouped_linear_backward
        cls.zero_grad = L.gln_grouped_linear_zero_grad
        return cls


def calls():
    return _Calls if _Calls.forward is not None else _Calls.load()


def host_splits(splits):
    """The split path's host int64 array (kept alive by the caller until the call returns)."""
    return (C.c_int64 * len(splits))(*splits)


class _Structs:
    """The ctypes arguments of one forward and one backward call, built once per thread and
    refilled per call (half the cost of building them).  `busy` while a call uses them: a
    call made from inside (a distributed weight's hook running another layer) builds its own."""

    def __init__(self):
        self.x, self.y, self.dy, self.dx = _Tensor(), _Tensor(), _Tensor(), _Tensor()
        self.args = _ForwardArgs(_ARGS_SIZE, _pointer(self.x), None, 0, _pointer(self.y), 0, 0)
        self.p_args, self.p_dy, self.p_dx = _byref(self.args), _byref(self.dy), _byref(self.dx)
        self.busy = False


_tls = threading.local()


def _structs():
    s = getattr(_tls, "structs", None)
    if s is None:
        s = _tls.structs = _Structs()
    elif s.busy:
        return _Structs()
    return s


def _fill(t, dtype, rows, cols, ptr):
    t.dtype, t.rows, t.cols, t.data = dtype, rows, cols, ptr


def forward(st, h, x, m_t, splits_arr, microbatch, need_saved, input_requires_grad):
    """y [rows, out_features] and the Saved context (None when not need_saved).  x is 2-D and
    contiguous; m_t an int64 tensor of splits on x's device (grouped path) or None with
    splits_arr a host_splits() array (split path)."""
    fn = calls()
    h.ctx.on_current_stream()
    rows, k_in = x.shape
    grouped = m_t is not None
    # rows past the splits' sum are never written on the grouped path: they read as 0
    y = (torch.zeros if grouped else torch.empty)((rows, st.k_out), dtype=x.dtype, device=x.device)
    act = _layer.DTYPE_CODES[x.dtype]
    c = _structs()
    c.busy = True
    try:
        _fill(c.x, act, rows, k_in, x.data_ptr() or None)
        _fill(c.y, act, rows, st.k_out, y.data_ptr() or None)
        a = c.args
        if grouped:
            a.m_splits, a.splits_on_backend = m_t.data_ptr(), int(m_t.is_cuda)
        else:
            a.m_splits, a.splits_on_backend = C.addressof(splits_arr), 0
        a.microbatch, a.input_requires_grad = microbatch, int(input_requires_grad)
        savedp = C.c_void_p() if need_saved else None
        status = fn.forward(h.ptr, c.p_args, _byref(savedp) if need_saved else None)
    finally:
        c.busy = False
    if status:
        st.raise_from_hooks(status)
        _lib.check(status, "gln_grouped_linear_forward")
    return y, (_layer.Saved(h, savedp, rows, grouped) if need_saved else None)


def backward(st, s, dy, want_dx, want_wgrad, want_bgrad):
    """dx (None when not wanted), the flat weight gradients and the flat bias gradients (None
    when not wanted) of the saved context s, which is released whatever happens."""
    fn = calls()
    h = s.handle
    c = _structs()
    c.busy = True
    try:
        h.ctx.on_current_stream()
        if want_wgrad or want_bgrad:
            # the layer accumulates into its own gradient buffers: start them at 0 when this
            # backward's gradients are read out (nothing to zero otherwise)
            _lib.check(fn.zero_grad(h.ptr), "gln_grouped_linear_zero_grad")
        if not dy.is_contiguous():
            dy = dy.contiguous()
        act = _layer.DTYPE_CODES.get(dy.dtype)
        if act is None:
            _layer.gln_dtype(dy.dtype, "grad_output")
        _fill(c.dy, act, s.rows, st.k_out, dy.data_ptr() or None)
        if want_dx:
            dx = (torch.zeros if s.grouped else torch.empty)((s.rows, st.k_in), dtype=dy.dtype, device=dy.device)
            _fill(c.dx, act, s.rows, st.k_in, dx.data_ptr() or None)
            status = fn.backward(s.ptr, c.p_dy, c.p_dx)
        else:
            dx = None
            status = fn.backward(s.ptr, c.p_dy, None)
        if status:
            st.raise_from_hooks(status)
            _lib.check(status, "gln_grouped_linear_backward")
        if st.flags["delay"]:
            st.dw_queue.append(h)
            h.queued += 1
    finally:
        c.busy = False
        s.release()
    wgrads = st.read_grads(h, weights=True) if want_wgrad else None
    bgrads = st.read_grads(h, weights=False) if want_bgrad else None
    return dx, wgrads, bgrads


_zeros = {}


def dummy_grad(p, cached=True):
    """What TE hands autograd for a weight whose gradient already went to main_grad: zeros of
    p's shape, as a stride-0 view of one scalar, cached eagerly (no allocation per weight); a
    traced backward (cached=False) makes its own."""
    if not cached:
        return torch.zeros((), dtype=p.dtype, device=p.device).expand(p.shape)
    key = (p.dtype, p.device)
    z = _zeros.get(key)
    if z is None:
        z = torch.zeros((), dtype=p.dtype, device=p.device)
        # made inside a CUDA graph capture, it lives in the graph's pool and holds 0 only once
        # the graph replays: not one to hand out eagerly later
        if not (z.is_cuda and torch.cuda.is_current_stream_capturing()):
            _zeros[key] = z
    return z.expand(p.shape)


def weight_grads_out(st, params, flat, cached=True):
    """Autograd's gradients for the weight parameters: the non-fused flat gradients as views,
    TE's dummy for fused / distributed weights that have grad_added_to_main_grad, else None."""
    weights, _, _, dist, _ = params
    f = st.flags
    if flat is not None:
        return split_flat(flat, weights)
    w_rg = dist.requires_grad if dist is not None else weights[0].requires_grad
    if w_rg and (f["fused"] or dist is not None):
        out = []
        for p in weights:
            if hasattr(p, "grad_added_to_main_grad"):
                p.grad_added_to_main_grad = True
                out.append(dummy_grad(p, cached))
            else:
                out.append(None)
        return out
    return [None] * len(weights)


def split_flat(flat, params):
    """The parameters' gradients as views of one flat tensor (the parameters back to back)."""
    if len(params) == 1:
        return [flat.view(params[0].shape)]
    return list(flat.view(len(params), *params[0].shape).unbind(0))
