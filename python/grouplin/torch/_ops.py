"""The autograd function of GroupedLinear as two torch custom ops (forward, backward) with fake
implementations, so torch.compile traces a model through them without graph breaks.  Eager
calls do not come here (their Python dispatch costs tens of microseconds per call): they run
the same C calls (_core) through one autograd.Function (_eager).

The saved context of a training forward is identified by a one-element int64 CPU "token" the
forward returns and autograd saves (eager use of the ops: released with the autograd context
if backward never runs; torch.compile: with the token's storage, _layer._TokenMemory);
everything else backward needs (the C layer, distributed weight objects) is found through the
layer id, a plain integer on the autograd context.  No parameter and no distributed-weight
object is ever a saved tensor, so saved_tensors_hooks (activation offloading) only ever see the
token (plus, under torch.compile with fused wgrad accumulation, the main_grad buffers, which the
compiled backward must receive as inputs; and with allow_repeated_backward, the input and the
splits).

Under torch.compile(mode="reduce-overhead") both ops are tagged cudagraph_unsafe: inductor runs
them between its CUDA graphs, every call, as eager does.  Inside cudagraph trees they could not
be right: the library's saved activations are scratch blocks taken from torch's allocator, not
tensors the trees track (their pool check after the warm-up run fails on them, and a block the
backward frees would be handed to the next graph while a replayed forward still writes it), the
forward and the backward are captured or skipped separately (a forward replayed without its
Python would give a backward the token of a context released long ago), and the token is host
memory.  To capture a whole step, use torch.cuda.graph around the eager module (or around a
torch.compile'd one in the default mode): there the forward's saved context and its backward
are captured together.
"""
from typing import List, Optional, Tuple

import torch
from torch import Tensor
from torch._subclasses.fake_tensor import is_fake

from .. import _lib
from . import _core, _layer


_CUDAGRAPH_UNSAFE = getattr(torch.Tag, "cudagraph_unsafe", None)   # absent in older torch


def _custom_op(name, mutates_args):
    """torch.library.custom_op, tagged cudagraph_unsafe where torch knows the tag (older torch
    skips CUDA graphs for these graphs anyway: the token is a CPU tensor)."""
    if _CUDAGRAPH_UNSAFE is None:
        return torch.library.custom_op(name, mutates_args=mutates_args)
    return torch.library.custom_op(name, mutates_args=mutates_args, tags=(_CUDAGRAPH_UNSAFE,))


@_custom_op("grouplin::grouped_linear_forward", mutates_args=())
def grouped_linear_forward(inp: Tensor, weights: List[Tensor], biases: List[Tensor], main_grads: List[Tensor],
                           m_splits: Optional[Tensor], splits: List[int], layer_id: int, microbatch: int,
                           need_saved: bool, input_requires_grad: bool) -> Tuple[Tensor, Tensor]:
    """y [rows, out_features] and the token of the saved context (0: none).  main_grads is given
    only under torch.compile, so that the backward graph gets them as inputs (the C layer writes
    them through the pointers it took at create)."""
    st = _layer.layer(layer_id)
    grouped = m_splits is not None
    h = st.handle(_layer.device_key(inp.device), _layer.gln_dtype(inp.dtype, "inp"),
                  _lib.PATH_GROUPED if grouped else _lib.PATH_SPLIT)
    arr = None if grouped else _core.host_splits(splits)
    y, saved = _core.forward(st, h, inp, m_splits, arr, microbatch, need_saved, input_requires_grad)
    if saved is None:
        return y, torch.zeros(1, dtype=torch.int64)
    # the token's storage owns the saved context until an eager autograd context takes it over
    return y, saved.token()


@grouped_linear_forward.register_fake
def _(inp, weights, biases, main_grads, m_splits, splits, layer_id, microbatch, need_saved, input_requires_grad):
    st = _layer.layer(layer_id)
    y = inp.new_empty((inp.shape[0], st.fields["out_features"]))
    return y, torch.empty(1, dtype=torch.int64)


@_custom_op("grouplin::grouped_linear_backward", mutates_args=("main_grads",))
def grouped_linear_backward(dy: Tensor, token: Tensor, main_grads: List[Tensor], layer_id: int, want_dx: bool,
                            want_wgrad: bool, want_bgrad: bool) -> Tuple[Tensor, Tensor, Tensor]:
    """dx ([0] when not wanted), the weight gradients and the bias gradients, each list flattened
    into one tensor ([0] when not wanted).  Flat, because torch cannot functionalize an op that
    mutates a tensor list (main_grads) and returns tensor lists."""
    st = _layer.layer(layer_id)
    s = _layer.saved(int(token[0]))
    h = s.handle
    dx, wgrads, bgrads = _core.backward(st, s, dy, want_dx, want_wgrad, want_bgrad)
    # torch.compile functionalizes the declared mutation: it hands us copies of main_grad and
    # copies them back after the op, while the C layer wrote the real buffers (the pointers
    # it took at create).  Give the copies the real contents so the copy-back keeps them.
    for mg, real in zip(main_grads, h.keep[2]):
        if mg.data_ptr() != real.data_ptr():
            mg.copy_(real)
    # a fresh empty tensor for each output left out: torch refuses a custom op whose outputs
    # alias each other (checked when inductor calls the op in place of auto_functionalized)
    none = dy.new_empty
    return (none((0,)) if dx is None else dx), (none((0,)) if wgrads is None else wgrads), \
        (none((0,)) if bgrads is None else bgrads)


@grouped_linear_backward.register_fake
def _(dy, token, main_grads, layer_id, want_dx, want_wgrad, want_bgrad):
    st = _layer.layer(layer_id)
    weights, biases = st.params_fn()[:2]
    dx = dy.new_empty((dy.shape[0], st.fields["in_features"])) if want_dx else dy.new_empty((0,))
    flat = lambda ps: dy.new_empty((sum(p.numel() for p in ps),), dtype=ps[0].dtype)  # noqa: E731
    none = dy.new_empty
    return dx, (flat(weights) if want_wgrad else none((0,))), (flat(biases) if want_bgrad else none((0,)))


def _setup_context(ctx, inputs, output):
    inp, weights, biases, main_grads, m_splits, splits, layer_id, microbatch, need_saved, input_requires_grad = inputs
    _, token = output
    ctx.layer_id = layer_id
    ctx.n_splits = len(splits)
    ctx.n_main_grads = len(main_grads)
    if _layer.layer(layer_id).flags["repeat"]:
        # allow_repeated_backward: keep what a second backward needs to run the forward again
        ctx.repeat = (list(weights), list(biases), list(splits), microbatch, input_requires_grad)
        ctx.save_for_backward(token, *main_grads, inp, m_splits)
    else:
        ctx.repeat = None
        ctx.save_for_backward(token, *main_grads)
    if need_saved and not torch.compiler.is_compiling() and not is_fake(token):
        # eager: a forward whose backward never runs releases its saved context with the graph.
        # (Under torch.compile this runs only while tracing; there the token's storage, saved by
        # the compiled graph, releases it: Saved.token.)
        ctx.guard = _layer.SavedGuard(int(token[0]))


def _backward(ctx, dy, dtoken):
    token = ctx.saved_tensors[0]
    st = _layer.layer(ctx.layer_id)
    if ctx.repeat is not None and int(token[0]) not in _layer._saved:
        # a second backward over a retained graph (gradcheck, autograd.functional.jacobian): the
        # C saved context went with the first one, so run the forward again for a fresh one
        ws, bs, splits, mb, irg = ctx.repeat
        _, token = grouped_linear_forward(ctx.saved_tensors[-2], ws, bs, [], ctx.saved_tensors[-1], splits,
                                          ctx.layer_id, mb, True, irg)
    params = st.params_fn()
    weights, biases, main_grads, dist, _ = params
    f = st.flags
    w_rg = (dist.requires_grad if dist is not None else weights[0].requires_grad)
    want_w = bool(w_rg and not f["fused"] and not f["delay"] and dist is None)
    want_b = bool(f["bias"] and biases[0].requires_grad)
    if ctx.n_main_grads:                      # torch.compile: the graph's own inputs
        main_grads = list(ctx.saved_tensors[1:1 + ctx.n_main_grads])
    dx, wg, bg = grouped_linear_backward(dy, token, main_grads if (f["fused"] and dist is None) else [],
                                         ctx.layer_id, bool(ctx.needs_input_grad[0]), want_w, want_b)
    w_out = _core.weight_grads_out(st, params, wg if want_w else None, cached=False)
    b_out = _core.split_flat(bg, biases) if want_b else [None] * len(biases)
    # (torch matches the structure of the inputs: an empty list of splits must come back as [])
    return ((dx if ctx.needs_input_grad[0] else None), w_out, b_out, [None] * ctx.n_main_grads, None,
            [] if ctx.n_splits == 0 else None, None, None, None, None)


grouped_linear_forward.register_autograd(_backward, setup_context=_setup_context)
