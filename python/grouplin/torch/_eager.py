"""GroupedLinear outside torch.compile: one torch.autograd.Function straight over the C calls.

The custom ops of _ops (what torch.compile traces) cost tens of microseconds per call in torch's
Python dispatch (schema checks, pytree flattening, a Python autograd kernel), and their saved
context must travel in a token tensor.  Eagerly none of that is needed: the autograd context
holds the C saved context itself and releases it with the graph when backward never runs
(_layer.SavedGuard).  Both paths run the same calls (_core), so their results are the same bytes.
No tensor is saved for backward (saved_tensors_hooks see nothing), except with
allow_repeated_backward: the input and the splits, to run the forward again.
"""
import torch

from . import _core, _layer


def forward(st, params, x, m_t, splits, microbatch, need_saved, input_requires_grad):
    """y for the 2-D input x (see GroupedLinear.forward for the other arguments)."""
    path = _PATHS[m_t is not None]
    h = st.handle(_layer.device_key(x.device), _layer.DTYPE_CODES[x.dtype], path, params)
    arr = _core.host_splits(splits) if m_t is None else None
    if not need_saved:
        return _core.forward(st, h, x, m_t, arr, microbatch, False, input_requires_grad)[0]
    ws = params[0]
    if st.flags["fused"] and params[3] is None and len(ws) > 1 and not hasattr(ws[0], "grad_added_to_main_grad"):
        # the wgrad goes to main_grad and autograd gets None for every weight: one weight in
        # the graph suffices (the output requires grad when the weights do), and spares the
        # autograd engine a node per expert in forward and backward
        ws = ws[:1]
    call = (st, h, params, m_t, splits, arr, microbatch, input_requires_grad, len(ws))
    if _functorch_active():
        return _Function.apply(x, call, *ws, *params[1])
    # what Function.apply does without functorch transforms, less its Python pass over every
    # argument (unwrap_dead_wrappers: only x can be a dead functorch wrapper, never a Parameter)
    return _apply(_unwrap_if_dead(x), call, *ws, *params[1])


_PATHS = {False: 0, True: 1}   # _lib.PATH_SPLIT, _lib.PATH_GROUPED


class _Function(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, call, *params):
        st, h, prm, m_t, splits, arr, mb, irg, ctx.n_weights = call
        y, saved = _core.forward(st, h, x, m_t, arr, mb, True, irg)
        ctx.st, ctx.params, ctx.saved = st, prm, saved
        ctx.guard = _layer.SavedGuard(saved.id)   # releases it with the graph if backward never runs
        if st.flags["repeat"]:
            ctx.repeat = (h, splits, mb, irg)
            ctx.save_for_backward(x, m_t)
        else:
            ctx.repeat = None
        return y

    @staticmethod
    def backward(ctx, dy):
        st, params = ctx.st, ctx.params
        s = ctx.saved
        if s.ptr is None and ctx.repeat is not None:
            # a second backward over a retained graph (gradcheck, autograd.functional.jacobian):
            # the C saved context went with the first one, so run the forward again
            h, splits, mb, irg = ctx.repeat
            x, m_t = ctx.saved_tensors
            arr = _core.host_splits(splits) if m_t is None else None
            s = _core.forward(st, h, x, m_t, arr, mb, True, irg)[1]
        elif s.ptr is None:
            _layer.saved(-1)               # raises: backward twice without retain_graph
        ws, bs, _, dist, _ = params
        f = st.flags
        w_rg = dist.requires_grad if dist is not None else ws[0].requires_grad
        want_w = bool(w_rg and not f["fused"] and not f["delay"] and dist is None)
        want_b = bool(f["bias"] and bs and bs[0].requires_grad)
        dx, wg, bg = _core.backward(st, s, dy, bool(ctx.needs_input_grad[0]), want_w, want_b)
        w_out = _core.weight_grads_out(st, params, wg) if ctx.n_weights == len(ws) else [None] * ctx.n_weights
        b_out = _core.split_flat(bg, bs) if want_b else [None] * len(bs)
        return (dx, None, *w_out, *b_out)


_apply = super(torch.autograd.Function, _Function).apply
_functorch_active = torch._C._are_functorch_transforms_active
_unwrap_if_dead = torch._C._functorch.unwrap_if_dead
