"""grouplin.torch.GroupedLinear against a float64 torch reference, on every device available (the
CPU always; CUDA when torch sees a GPU and the library has the CUDA backend)."""
import pytest

torch = pytest.importorskip("torch")  # the numpy part (test_ops.py) runs without it

import grouplin  # noqa: E402
from grouplin.torch import (  # noqa: E402
    DelayedScaling, Float8BlockScaling, Float8CurrentScaling, GroupedLinear,
    MXFP8BlockScaling)
from conftest import DEVICES  # noqa: E402

N, K_IN, K_OUT = 4, 96, 80
SPLITS = [7, 0, 33, 17]          # an empty expert, odd sizes
RECIPES = {"none": None, "delayed": DelayedScaling(), "current": Float8CurrentScaling(),
           "mxfp8": MXFP8BlockScaling(), "block": Float8BlockScaling()}
# How each recipe quantizes forward operands (x, W), for the emulated reference: the same
# quantizer (grouplin.quantize, itself checked bit for bit in test_ops.py), FP64 GEMM after.
FWD_MODES = {"delayed": ("delayed", "delayed"), "current": ("current", "current"),
             "mxfp8": ("mxfp8", "mxfp8"), "block": ("block_1d", "block_2d")}
# Forward against the emulated reference: FP32 accumulation of exactly dequantized products, so
# relative to sum |x||w| the error is a few FP32 ulps of the K_IN-term sum on the CPU.  On CUDA
# FP8 tensor cores accumulate in reduced precision (and MXFP8 runs through bf16): 2^-9.
FWD_TOL = {"cpu": 1e-5, "cuda": 2.0 ** -9}
# Gradients against the unquantized float64 reference, as a norm ratio ||g - ref|| / ||ref||:
# E4M3 keeps 3 mantissa bits (relative rounding error <= 2^-4, ~2^-4/sqrt(3) rms per operand) and
# E5M2 2 bits (2^-3), so a GEMM of two quantized operands lands near 5 % rms for HYBRID (E5M2
# gradients) and 3-4 % for E4M3; the bounds leave 2x margin.  FP32 GEMMs: 1e-5.
GRAD_TOL = {"none": 1e-5, "delayed": 0.12, "current": 0.12, "mxfp8": 0.08, "block": 0.08}


def make(recipe, device, bias=True, dtype=torch.float32, **kw):
    torch.manual_seed(0)
    m = GroupedLinear(N, K_IN, K_OUT, bias=bias, recipe=RECIPES[recipe], params_dtype=dtype,
                      device=device, **kw)
    with torch.no_grad():
        for b in m.biases():
            b.normal_()
    return m


def splits_arg(path, device):
    return SPLITS if path == "split" else torch.tensor(SPLITS, dtype=torch.int64, device=device)


def reference(x, ws, bs, splits):
    """float64 y_i = x_i W_iᵀ + b_i."""
    xs = x.double().split(splits)
    return torch.cat([xs[i] @ ws[i].double().T + (bs[i].double() if bs else 0) for i in range(len(ws))])


def emulated(x, ws, bs, recipe):
    """float64 GEMMs of the operands quantized as the recipe's forward does (per expert)."""
    mx, mw = FWD_MODES[recipe]
    pow2 = recipe == "block"
    # quantized on the CPU backend (the reference; CUDA's quantizers match it bit for bit)
    deq = lambda t, mode: grouplin.dequantize(grouplin.quantize(  # noqa: E731
        t.detach().float().cpu().contiguous(), mode, scale=1.0, power_2_scale=pow2)).double().to(t.device)
    out = []
    for i, xi in enumerate(x.split(SPLITS)):
        y = deq(xi, mx) @ deq(ws[i], mw).T if xi.shape[0] else xi.new_zeros((0, K_OUT)).double()
        out.append(y + bs[i].to(torch.bfloat16).double())  # the bias is rounded to bf16 under FP8 (TE)
    return torch.cat(out), torch.cat([xi.double().abs() @ ws[i].double().abs().T + 1
                                      for i, xi in enumerate(x.split(SPLITS))])


def rel(a, b):
    return ((a.double() - b.double()).norm() / b.double().norm().clamp_min(1e-30)).item()


# bf16 layers: every output, dx, dW and db is rounded once to bf16 (2^-9 relative), and recipe
# NONE's operands are bf16 already; for the FP8 recipes this adds little to GRAD_TOL.
BF16_OUT = 2.0 ** -8


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=["fp32", "bf16"])
@pytest.mark.parametrize("path", ["split", "grouped"])
@pytest.mark.parametrize("recipe", list(RECIPES))
def test_forward_backward_against_float64(recipe, path, dtype, device):
    m = make(recipe, device, dtype=dtype)
    x = torch.randn(sum(SPLITS), K_IN, device=device, dtype=dtype, requires_grad=True)
    y = m(x, splits_arg(path, device))
    assert y.dtype == dtype
    ws, bs = m.weights(), m.biases()
    out_tol = BF16_OUT if dtype == torch.bfloat16 else 0.0
    if recipe == "none":
        ref = reference(x, ws, bs, SPLITS)
        assert ((y.double() - ref).abs() <= 1e-5 * (ref.abs().max() + 1) + out_tol * ref.abs()).all()
    else:
        ref, mag = emulated(x, ws, bs, recipe)
        assert ((y.double() - ref).abs() <= FWD_TOL[device] * mag + out_tol * ref.abs()).all()
    dy = torch.randn_like(y)
    y.backward(dy)
    xr = x.detach().double().requires_grad_()
    wr = [w.detach().double().requires_grad_() for w in ws]
    br = [b.detach().double().requires_grad_() for b in bs]
    reference(xr, wr, br, SPLITS).backward(dy.double())
    tol = GRAD_TOL[recipe] + out_tol
    assert rel(x.grad, xr.grad) <= tol
    for i in range(N):
        if SPLITS[i]:
            assert rel(ws[i].grad, wr[i].grad) <= tol
        else:
            assert ws[i].grad.abs().max().item() == 0  # no tokens, no gradient
        assert rel(bs[i].grad, br[i].grad) <= 1e-6 + out_tol or SPLITS[i] == 0  # dbias sums high-precision dy


@pytest.mark.parametrize("recipe", list(RECIPES))
def test_cpu_paths_give_the_same_bytes(recipe):
    outs = []
    for path in ("split", "grouped"):
        m = make(recipe, "cpu")
        x = torch.randn(sum(SPLITS), K_IN, generator=torch.Generator().manual_seed(5), requires_grad=True)
        y = m(x, splits_arg(path, "cpu"))
        y.backward(torch.ones_like(y))
        outs.append([y.detach(), x.grad] + [w.grad for w in m.weights()] + [b.grad for b in m.biases()])
    for a, b in zip(*outs):
        assert torch.equal(a, b)


@pytest.mark.parametrize("device", DEVICES)
def test_bf16_layer_and_3d_input(device):
    torch.manual_seed(1)
    m = GroupedLinear(N, K_IN, K_OUT, params_dtype=torch.bfloat16, device=device)
    x = torch.randn(1, sum(SPLITS), K_IN, dtype=torch.bfloat16, device=device)   # [..., K_in] is flattened
    y = m(x, SPLITS)
    assert y.shape == (1, sum(SPLITS), K_OUT) and y.dtype == torch.bfloat16
    ref = reference(x[0], m.weights(), m.biases(), SPLITS)
    # one rounding of an FP32 sum to bf16: half a bf16 ulp, 2^-9 relative, plus FP32 error
    assert ((y[0].double() - ref).abs() <= ref.abs() * 2.0 ** -8 + 1e-4).all()


@pytest.mark.parametrize("device", DEVICES)
def test_grouped_path_ignores_rows_past_the_splits(device):
    m = make("none", device)
    x = torch.randn(sum(SPLITS) + 5, K_IN, device=device, requires_grad=True)
    y = m(x, torch.tensor(SPLITS, device=device))
    assert y.shape[0] == x.shape[0] and y[sum(SPLITS):].abs().max().item() == 0
    y.sum().backward()
    assert x.grad[sum(SPLITS):].abs().max().item() == 0


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("single", [False, True])
def test_fused_main_grad_first_microbatch(device, single):
    torch.manual_seed(2)
    m = GroupedLinear(N, K_IN, K_OUT, params_dtype=torch.float32, device=device, fuse_wgrad_accumulation=True,
                      single_grouped_weight=single)
    ws = m.weights()
    for w in ws:
        w.main_grad = torch.full(w.shape, 7.0, device=device)  # stale values FIRST must overwrite
        w.grad_added_to_main_grad = False
    xs = [torch.randn(sum(SPLITS), K_IN, device=device) for _ in range(2)]
    dys = [torch.randn(sum(SPLITS), K_OUT, device=device) for _ in range(2)]
    expect = []
    for mb in range(2):
        m(xs[mb], SPLITS, is_first_microbatch=(mb == 0)).backward(dys[mb])
        wr = [w.detach().double().requires_grad_() for w in (ws[0].unbind(0) if single else ws)]
        reference(xs[mb], wr, [], SPLITS).backward(dys[mb].double())
        expect = [g.grad + (expect[i] if expect else 0) for i, g in enumerate(wr)]
        got = ws[0].main_grad.view(N, K_OUT, K_IN).unbind(0) if single else [w.main_grad for w in ws]
        for g, e in zip(got, expect):
            assert (g.double() - e).abs().max().item() <= 1e-4 * (e.abs().max().item() + 1)
    for w in ws:
        assert w.grad_added_to_main_grad is True
        assert w.grad is not None and w.grad.abs().max().item() == 0  # a dummy, as TE returns


def test_fused_without_grad_added_attribute_leaves_grad_none():
    m = GroupedLinear(N, K_IN, K_OUT, params_dtype=torch.float32, device="cpu", fuse_wgrad_accumulation=True)
    for w in m.weights():
        w.main_grad = torch.zeros(w.shape)
    m(torch.randn(sum(SPLITS), K_IN), SPLITS).sum().backward()
    assert all(w.grad is None for w in m.weights())
    assert m.weights()[2].main_grad.abs().max().item() > 0


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("fused", [False, True])
def test_delay_wgrad_compute(device, fused):
    torch.manual_seed(3)
    m = GroupedLinear(N, K_IN, K_OUT, params_dtype=torch.float32, device=device, delay_wgrad_compute=True,
                      fuse_wgrad_accumulation=fused)
    ws, bs = m.weights(), m.biases()
    assert all(getattr(p, "skip_backward_post_hook", False) for p in m.parameters())
    if fused:
        for w in ws:
            w.main_grad = torch.zeros(w.shape, device=device)
    hooks = []
    m.register_wgrad_accumulation_and_reduce_hooks(lambda: hooks.append(1))
    x = torch.randn(sum(SPLITS), K_IN, device=device, requires_grad=True)
    dy = torch.randn(sum(SPLITS), K_OUT, device=device)
    m(x, SPLITS, is_first_microbatch=True).backward(dy)
    # dgrad and dbias now, the wgrad not yet
    assert x.grad is not None and bs[0].grad is not None
    if fused:
        assert all(w.main_grad.abs().max().item() == 0 for w in ws)
    else:
        assert all(w.grad is None for w in ws)
    m.backward_dw()
    assert hooks == [1]
    wr = [w.detach().double().requires_grad_() for w in ws]
    reference(x.detach(), wr, [], SPLITS).backward(dy.double())
    for w, r in zip(ws, wr):
        g = w.main_grad if fused else w.grad
        assert (g.double() - r.grad).abs().max().item() <= 1e-4 * (r.grad.abs().max().item() + 1)
    m.backward_dw()  # an empty queue is a no-op (TE)


@pytest.mark.filterwarnings("ignore:Input #")  # gradcheck prefers float64; this layer is FP32
def test_gradcheck_tiny_fp32_layer():
    torch.manual_seed(4)
    m = GroupedLinear(3, 5, 4, params_dtype=torch.float32, device="cpu", allow_repeated_backward=True)
    with torch.no_grad():
        for b in m.biases():
            b.normal_()
    x = torch.randn(6, 5, requires_grad=True)
    params = m.weights() + m.biases()

    def f(x, *p):  # gradcheck perturbs x and the parameters in place
        return m(x, [2, 0, 4])
    # FP32: central differences with eps 1e-2 have error ~ eps^2 * |f'''| + ulp(f) / eps ~ 1e-4
    assert torch.autograd.gradcheck(f, (x, *params), eps=1e-2, atol=2e-3, rtol=2e-3, nondet_tol=0.0)


def test_torch_compile_without_graph_breaks():
    torch.manual_seed(5)

    class Model(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.proj = torch.nn.Linear(K_IN, K_IN)
            self.experts = GroupedLinear(N, K_IN, K_OUT, params_dtype=torch.float32, device="cpu")

        def forward(self, x, splits):
            return self.experts(torch.relu(self.proj(x)), splits).square().mean()

    model = Model()
    x = torch.randn(sum(SPLITS), K_IN, requires_grad=True)
    eager = model(x, SPLITS)
    eager.backward()
    grads = [p.grad.clone() for p in model.parameters()]
    model.zero_grad(set_to_none=True)
    torch._dynamo.reset()
    explain = torch._dynamo.explain(model)(x, SPLITS)
    assert explain.graph_break_count == 0 and explain.graph_count == 1
    compiled = torch.compile(model, fullgraph=True, backend="aot_eager")
    for splits in (SPLITS, torch.tensor(SPLITS)):
        model.zero_grad(set_to_none=True)
        out = compiled(x, splits)
        out.backward()
        assert torch.allclose(out, eager, rtol=1e-6, atol=0)
        for p, g in zip(model.parameters(), grads):
            assert torch.allclose(p.grad, g, rtol=1e-5, atol=1e-7)


def test_return_bias_and_single_grouped_bias():
    m = GroupedLinear(N, K_IN, K_OUT, params_dtype=torch.float32, device="cpu", return_bias=True)
    y, biases = m(torch.randn(sum(SPLITS), K_IN), SPLITS)
    assert len(biases) == N and y.shape == (sum(SPLITS), K_OUT)
    m = GroupedLinear(N, K_IN, K_OUT, params_dtype=torch.float32, device="cpu", single_grouped_weight=True,
                      single_grouped_bias=True)
    assert m.weight.shape == (N, K_OUT, K_IN) and m.bias.shape == (N, K_OUT)
    x = torch.randn(sum(SPLITS), K_IN)
    with torch.no_grad():
        m.bias.normal_()
    y = m(x, SPLITS)
    assert torch.allclose(y.double(), reference(x, m.weight.unbind(0), m.bias.unbind(0), SPLITS), atol=1e-4)
    y.sum().backward()
    assert m.weight.grad.shape == m.weight.shape and m.bias.grad.shape == m.bias.shape


def test_no_grad_forward_keeps_no_saved_state():
    from grouplin.torch import _layer
    m = make("current", "cpu")
    before = len(_layer._saved)
    with torch.no_grad():
        m(torch.randn(sum(SPLITS), K_IN), SPLITS)
    y = m(torch.randn(sum(SPLITS), K_IN, requires_grad=True), SPLITS)
    assert len(_layer._saved) == before + 1
    del y  # the graph goes, and with it the saved context
    assert len(_layer._saved) == before


def test_bad_inputs_raise_naming_the_argument():
    m = make("none", "cpu")
    x = torch.randn(sum(SPLITS), K_IN)
    with pytest.raises(TypeError, match="inp: dtype torch.int32"):
        m(x.int(), SPLITS)
    with pytest.raises(ValueError, match="inp: tensor must be contiguous"):
        m(torch.randn(K_IN, sum(SPLITS)).T, SPLITS)
    with pytest.raises(ValueError, match="inp: last dimension 95"):
        m(x[:, :95].contiguous(), SPLITS)
    with pytest.raises(ValueError, match="m_splits: expected 4 splits"):
        m(x, SPLITS[:3])
    with pytest.raises(ValueError, match=r"m_splits\[1\]: -1 is negative"):
        m(x, [8, -1, 33, 17])
    with pytest.raises(TypeError, match="m_splits: expected an integer tensor"):
        m(x, torch.tensor(SPLITS, dtype=torch.float32))
    with pytest.raises(ValueError, match="m_splits: expected shape"):
        m(x, torch.tensor(SPLITS[:2]))
    # the library's own message, naming the call and the argument
    with pytest.raises(ValueError, match="gln_grouped_linear_forward: .*m_splits sum 56 must equal x->rows 57"):
        m(x, [7, 0, 33, 16])
    with pytest.raises(grouplin.InvalidArgumentError, match="m_splits"):
        m(x, torch.tensor([7, 0, 33, 99]))
    with pytest.raises(TypeError, match="is_first_microbatch"):
        m(x, SPLITS, is_first_microbatch=1)
    with pytest.raises(TypeError, match="recipe"):
        GroupedLinear(N, K_IN, K_OUT, recipe="fp8", device="cpu")
    with pytest.raises(ValueError, match="in_features"):
        GroupedLinear(N, 0, K_OUT, device="cpu")
    fused = GroupedLinear(N, K_IN, K_OUT, params_dtype=torch.float32, device="cpu", fuse_wgrad_accumulation=True)
    with pytest.raises(ValueError, match="weight0.main_grad"):
        fused(x, SPLITS)


def test_torch_compile_with_fused_main_grad():
    layers = []
    for _ in range(2):
        torch.manual_seed(6)
        m = GroupedLinear(N, K_IN, K_OUT, params_dtype=torch.float32, device="cpu", fuse_wgrad_accumulation=True)
        for w in m.weights():
            w.main_grad = torch.full(w.shape, 5.0)
            w.grad_added_to_main_grad = False
        layers.append(m)
    compiled = torch.compile(layers[0], fullgraph=True, backend="aot_eager")
    x = torch.randn(sum(SPLITS), K_IN, requires_grad=True)
    for mb in range(2):
        compiled(x, SPLITS, is_first_microbatch=(mb == 0)).sum().backward()
        layers[1](x, SPLITS, is_first_microbatch=(mb == 0)).sum().backward()
        for a, b in zip(layers[0].weights(), layers[1].weights()):
            assert torch.equal(a.main_grad, b.main_grad)
    assert all(w.grad_added_to_main_grad for w in layers[0].weights())


def test_delayed_scaling_state_follows_te():
    """First training forward: data quantized with scale 1, the amaxes recorded, then one update:
    scale = fp8_max / amax of the window (448 for the E4M3 forward); backward slots likewise with
    E5M2's 57344 (HYBRID)."""
    m = GroupedLinear(N, K_IN, K_OUT, recipe=DelayedScaling(amax_history_len=4), params_dtype=torch.float32,
                      device="cpu")
    x = torch.randn(sum(SPLITS), K_IN, requires_grad=True)
    y = m(x, SPLITS)
    scale, hist = m.fp8_state()
    assert hist.shape == (4, 3 * N)
    for i, xi in enumerate(x.detach().split(SPLITS)):
        if SPLITS[i] == 0:              # no tokens: amax 0, no roll, scale kept (TE's bulk update)
            assert scale[3 * i] == 1.0 and hist[:, 3 * i].abs().max() == 0
            continue
        amax = xi.abs().max()
        assert hist[-1, 3 * i] == amax and hist[0, 3 * i] == 0      # rolled: the newest amax went to the end
        assert scale[3 * i] == torch.tensor(448.0) / amax
        wamax = m.weights()[i].detach().abs().max()
        assert scale[3 * i + 1] == torch.tensor(448.0) / wamax
    dy = torch.randn_like(y)
    y.backward(dy)
    bscale, _ = m.fp8_state(backward=True)
    for i, d in enumerate(dy.split(SPLITS)):
        if SPLITS[i]:
            assert bscale[2 * i] == torch.tensor(57344.0) / d.abs().max()


def test_first_microbatch_caches_fp8_weights():
    m = make("current", "cpu")
    x = torch.randn(sum(SPLITS), K_IN)
    with torch.no_grad():
        y1 = m(x, SPLITS, is_first_microbatch=True)
        for w in m.weights():
            w.mul_(2.0)                               # an optimizer step, without telling the layer
        y2 = m(x, SPLITS, is_first_microbatch=False)  # TE: reuse the cached FP8 weights
        assert torch.equal(y1, y2)
        m.weights_updated()
        y3 = m(x, SPLITS, is_first_microbatch=False)  # told: quantized again
        y4 = m(x, SPLITS)                             # None: no caching, always the current weights
    assert not torch.equal(y3, y1) and torch.equal(y3, y4)


def test_te_constructor_arguments():
    calls = []

    class Tracker:
        def fork(self, name):
            calls.append(name)
            return torch.random.fork_rng()
    m = GroupedLinear(N, K_IN, K_OUT, device="cpu", sequence_parallel=False, tp_size=1, parallel_mode="column",
                      get_rng_state_tracker=Tracker, rng_tracker_name="expert-rng", name="moe.fc1",
                      use_grouped_tensor=True)
    assert calls == ["expert-rng"] and m.name == "moe.fc1"
    with pytest.raises(NotImplementedError, match="tp_size"):
        GroupedLinear(N, K_IN, K_OUT, device="cpu", tp_size=2)
    with pytest.raises(ValueError, match="Userbuffers"):
        GroupedLinear(N, K_IN, K_OUT, device="cpu", ub_overlap_ag=True)
    with pytest.raises(ValueError, match="parallel_mode"):
        GroupedLinear(N, K_IN, K_OUT, device="cpu", parallel_mode="diagonal")


@pytest.mark.parametrize("single", [False, True])
def test_fused_wgrad_reaches_main_grad_when_only_weights_require_grad(single):
    # fused wgrad without grad_added_to_main_grad: one weight stands for all in autograd's
    # graph; the output must still require grad and backward must fill every main_grad
    m = make("none", "cpu", bias=False, fuse_wgrad_accumulation=True, single_grouped_weight=single)
    ws = m.weights()
    for w in ws:
        w.main_grad = torch.zeros(w.shape)
    x = torch.randn(sum(SPLITS), K_IN)
    dy = torch.randn(sum(SPLITS), K_OUT)
    y = m(x, torch.tensor(SPLITS), is_first_microbatch=True)
    assert y.requires_grad
    y.backward(dy)
    wr = [w.detach().double().requires_grad_() for w in (ws[0].unbind(0) if single else ws)]
    reference(x, wr, [], SPLITS).backward(dy.double())
    got = ws[0].main_grad.view(N, K_OUT, K_IN).unbind(0) if single else [w.main_grad for w in ws]
    for g, r in zip(got, wr):
        assert (g.double() - r.grad).abs().max().item() <= 1e-4 * (r.grad.abs().max().item() + 1)
    assert all(w.grad is None for w in ws)


def test_parameters_replaced_or_moved_reach_the_c_layer():
    # the module caches its parameter list and C layer per pointer set: a replaced parameter,
    # a new main_grad or new storage under a parameter must be seen on the next call
    m = make("none", "cpu", bias=False, fuse_wgrad_accumulation=True)
    for w in m.weights():
        w.main_grad = torch.zeros(w.shape)
    x = torch.randn(sum(SPLITS), K_IN, requires_grad=True)
    m(x, SPLITS).sum().backward()
    new = torch.nn.Parameter(torch.randn(K_OUT, K_IN))
    new.main_grad = torch.zeros(new.shape)
    m.weight1 = new                                   # replaced parameter
    with torch.no_grad():
        m.weight2.data = torch.randn(K_OUT, K_IN)     # new storage, same Parameter
    m.weight3.main_grad = torch.zeros(K_OUT, K_IN)    # new main_grad buffer
    y = m(x, SPLITS, is_first_microbatch=True)
    assert torch.allclose(y.double(), reference(x, m.weights(), [], SPLITS), rtol=1e-5, atol=1e-5)
    dy = torch.randn_like(y)
    y.backward(dy)
    wr = [w.detach().double().requires_grad_() for w in m.weights()]
    reference(x.detach(), wr, [], SPLITS).backward(dy.double())
    for w, r in zip(m.weights(), wr):
        assert (w.main_grad.double() - r.grad).abs().max().item() <= 1e-4 * (r.grad.abs().max().item() + 1)
    m.weight3.main_grad = torch.zeros(3)               # checked again once it changed
    with pytest.raises(ValueError, match="weight3.main_grad"):
        m(x, SPLITS)


@pytest.mark.parametrize("fused", [False, True])
def test_eager_and_compiled_give_the_same_bytes_on_the_grouped_path(fused):
    # eager runs the autograd function, torch.compile the custom ops: the same C calls
    layers = []
    for _ in range(2):
        m = make("current", "cpu", fuse_wgrad_accumulation=fused)
        if fused:
            for w in m.weights():
                w.main_grad = torch.zeros(w.shape)
        layers.append(m)
    compiled = torch.compile(layers[1], fullgraph=True, backend="aot_eager")
    torch.manual_seed(9)
    for splits in ([7, 0, 33, 17], [20, 20, 0, 5]):
        x = torch.randn(60, K_IN)
        dy = torch.randn(60, K_OUT)
        outs = []
        for run in (layers[0], compiled):
            xi = x.clone().requires_grad_()
            y = run(xi, torch.tensor(splits), is_first_microbatch=False)
            y.backward(dy)
            outs.append((y.detach(), xi.grad))
        assert torch.equal(outs[0][0], outs[1][0]) and torch.equal(outs[0][1], outs[1][1])
        for a, b in zip(layers[0].parameters(), layers[1].parameters()):
            assert (a.grad is None) == (b.grad is None) and (a.grad is None or torch.equal(a.grad, b.grad))
        if fused:
            for a, b in zip(layers[0].weights(), layers[1].weights()):
                assert torch.equal(a.main_grad, b.main_grad)


@pytest.mark.parametrize("backend", ["aot_eager", "inductor"])
@pytest.mark.parametrize("bias", [False, True])
def test_compiled_fused_layer_gives_eager_bytes_with_new_splits(backend, bias):
    # the benchmark's layer (one packed bf16 weight, fused wgrad into main_grad) with and without
    # a bias: without one, the backward op once returned one empty tensor for both gradients,
    # which torch refuses (outputs may not alias) in every compiled backward
    torch._dynamo.reset()        # each new layer is a recompile: stay under dynamo's limit of 8
    layers = []
    for _ in range(2):
        m = make("none", "cpu", bias=bias, dtype=torch.bfloat16, single_grouped_weight=True,
                 fuse_wgrad_accumulation=True)
        m.weight.main_grad = torch.zeros(m.weight.shape, dtype=torch.float32)
        layers.append(m)
    compiled = torch.compile(layers[1], fullgraph=True, backend=backend)
    torch.manual_seed(10)
    dy = torch.randn(64, K_OUT, dtype=torch.bfloat16)
    for mb, splits in enumerate(([7, 0, 33, 17], [20, 20, 0, 5], [0, 0, 0, 64])):
        x = torch.randn(64, K_IN, dtype=torch.bfloat16)
        outs = []
        for run in (layers[0], compiled):
            xi = x.clone().requires_grad_()
            y = run(xi, torch.tensor(splits), is_first_microbatch=(mb == 0))
            y.backward(dy)
            outs.append((y.detach(), xi.grad))
        assert torch.equal(outs[0][0], outs[1][0]) and torch.equal(outs[0][1], outs[1][1])
        assert torch.equal(layers[0].weight.main_grad, layers[1].weight.main_grad)   # accumulated
        if bias:
            assert torch.equal(layers[0].bias0.grad, layers[1].bias0.grad)


def test_custom_ops_stay_out_of_inductor_cuda_graphs():
    # the saved context is host state plus library scratch that cudagraph trees cannot track:
    # under mode="reduce-overhead" the ops must run every call, between inductor's graphs
    unsafe = getattr(torch.Tag, "cudagraph_unsafe", None)
    if unsafe is None:
        pytest.skip("this torch has no cudagraph_unsafe tag")
    for op in (torch.ops.grouplin.grouped_linear_forward, torch.ops.grouplin.grouped_linear_backward):
        assert unsafe in op.default.tags
