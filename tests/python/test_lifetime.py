"""Lifetime of the C saved contexts (gln_grouped_linear_saved_t) a training forward creates.

A forward whose backward never runs (an eval loop without no_grad, an output dropped) must give its
saved context back when autograd frees the graph, in eager mode and under torch.compile (where the
autograd context of the custom op exists only while tracing); a forward under no_grad must not
create one at all.  grouplin.torch.live_saved_contexts() counts the contexts not yet released
(each holds the library's saved activations and scratch)."""
import gc

import pytest

torch = pytest.importorskip("torch")

from grouplin.torch import GroupedLinear, live_saved_contexts  # noqa: E402

N, K_IN, K_OUT = 3, 16, 8
SPLITS = [4, 0, 6]
STEPS = 5


class Model(torch.nn.Module):
    def __init__(self, **kw):
        super().__init__()
        self.proj = torch.nn.Linear(K_IN, K_IN)
        self.experts = GroupedLinear(N, K_IN, K_OUT, params_dtype=torch.float32, device="cpu", **kw)

    def forward(self, x, splits):
        return self.experts(torch.relu(self.proj(x)), splits).square().mean()


def _settle():
    gc.collect()
    return live_saved_contexts()


@pytest.mark.parametrize("mode", ["eager", "compiled"])
def test_forwards_without_backward_release_their_saved_contexts(mode):
    torch.manual_seed(3)
    torch._dynamo.reset()
    model = Model()
    run = model if mode == "eager" else torch.compile(model, fullgraph=True, backend="aot_eager")
    x = torch.randn(sum(SPLITS), K_IN, requires_grad=True)
    base = _settle()
    outs = [run(x, SPLITS) for _ in range(STEPS)]
    assert live_saved_contexts() == base + STEPS      # each training forward holds one
    del outs                                           # no backward: the graphs go
    assert _settle() == base
    # and a forward whose backward runs still works afterwards (nothing released too early)
    model.zero_grad(set_to_none=True)
    out = run(x, SPLITS)
    out.backward()
    assert all(p.grad is not None for p in model.experts.parameters())
    del out
    assert _settle() == base


@pytest.mark.parametrize("mode", ["eager", "compiled"])
def test_no_grad_forwards_create_no_saved_context(mode):
    torch.manual_seed(4)
    torch._dynamo.reset()
    model = Model()
    run = model if mode == "eager" else torch.compile(model, fullgraph=True, backend="aot_eager")
    x = torch.randn(sum(SPLITS), K_IN, requires_grad=True)
    base = _settle()
    with torch.no_grad():
        outs = [run(x, SPLITS) for _ in range(STEPS)]
        assert live_saved_contexts() == base           # outputs alive, still nothing saved
    with torch.inference_mode():
        outs += [run(x.detach(), SPLITS) for _ in range(2)]
        assert live_saved_contexts() == base
    del outs
    assert _settle() == base


def test_saved_context_survives_an_offloading_hook_in_eager_mode():
    # saved_tensors_hooks replace the saved token by a copy: the original token tensor is freed
    # right after the forward, and its context must stay until backward (the eager guard owns it)
    torch.manual_seed(6)
    model = Model()
    x = torch.randn(sum(SPLITS), K_IN, requires_grad=True)
    base = _settle()
    with torch.autograd.graph.saved_tensors_hooks(lambda t: t.clone(), lambda t: t):
        out = model(x, SPLITS)
    assert _settle() == base + 1
    out.backward()
    assert _settle() == base
