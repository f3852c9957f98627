"""GPU-only tests (skipped without a GPU and a CUDA build of the library): CUDA-graph capture of
forward + backward on the grouped path, torch's current stream and caching allocator, and
torch.compile on CUDA tensors.  The per-recipe comparison with the float64 torch reference runs
on CUDA through test_module.py (its tests are parametrized over the available devices)."""
import pytest

torch = pytest.importorskip("torch")  # the numpy part (test_ops.py) runs without it

from grouplin.torch import (  # noqa: E402
    DelayedScaling, Float8BlockScaling, Float8CurrentScaling, GroupedLinear,
    MXFP8BlockScaling)
from conftest import needs_cuda  # noqa: E402

pytestmark = needs_cuda
N, K_IN, K_OUT = 4, 256, 384
RECIPES = {"none": None, "current": Float8CurrentScaling(), "mxfp8": MXFP8BlockScaling(),
           "block": Float8BlockScaling(), "delayed": DelayedScaling()}


def twins(recipe):
    """Two layers with identical bf16 parameters: one for the graph, one for eager runs."""
    torch.manual_seed(0)
    a = GroupedLinear(N, K_IN, K_OUT, recipe=RECIPES[recipe], params_dtype=torch.bfloat16, device="cuda")
    b = GroupedLinear(N, K_IN, K_OUT, recipe=RECIPES[recipe], params_dtype=torch.bfloat16, device="cuda")
    b.load_state_dict(a.state_dict())
    with torch.no_grad():
        for p, q in zip(a.biases(), b.biases()):
            p.normal_()
            q.copy_(p)
    return a, b


@pytest.mark.parametrize("recipe", list(RECIPES))
def test_cuda_graph_capture_forward_backward(recipe):
    rows = 512
    layer, eager = twins(recipe)
    x = torch.randn(rows, K_IN, dtype=torch.bfloat16, device="cuda", requires_grad=True)
    dy = torch.randn(rows, K_OUT, dtype=torch.bfloat16, device="cuda")
    splits = torch.tensor([100, 0, 250, 130], dtype=torch.int64, device="cuda")
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):                   # warm up on the capture stream (C layer, caches)
        for _ in range(3):
            layer(x, splits).backward(dy)
    torch.cuda.current_stream().wait_stream(s)
    graph = torch.cuda.CUDAGraph()
    for p in list(layer.parameters()) + [x]:
        p.grad.zero_()
    with torch.cuda.graph(graph, stream=s):
        y = layer(x, splits)
        y.backward(dy)
    for new in ([10, 300, 0, 150], [0, 0, 0, 480]):   # other splits, read by the device at replay
        splits.copy_(torch.tensor(new))
        with torch.no_grad():
            x.copy_(torch.randn_like(x))
        for p in list(layer.parameters()) + [x]:
            p.grad.zero_()
        graph.replay()
        torch.cuda.synchronize()
        if recipe == "delayed":              # the scales evolve per step: check it ran and is finite
            assert torch.isfinite(y[:sum(new)].float()).all()
            continue
        xe = x.detach().clone().requires_grad_()
        ye = eager(xe, splits)
        ye.backward(dy)
        m = sum(new)
        assert torch.equal(y[:m], ye[:m]), "forward replay != eager"
        assert torch.equal(x.grad[:m], xe.grad[:m]), "dgrad replay != eager"
        for p, q in zip(layer.parameters(), eager.parameters()):
            assert torch.allclose(p.grad.float(), q.grad.float(), rtol=1e-2, atol=1e-2)
            q.grad = None


def test_runs_on_torch_current_stream_with_torch_memory():
    from grouplin import _context
    torch.manual_seed(1)
    layer = GroupedLinear(N, K_IN, K_OUT, recipe=MXFP8BlockScaling(), params_dtype=torch.bfloat16, device="cuda")
    x = torch.randn(300, K_IN, dtype=torch.bfloat16, device="cuda")
    ref = layer(x, [100, 50, 0, 150])
    ctx = _context.get(("cuda", torch.cuda.current_device()))
    before = ctx.allocs
    s = torch.cuda.Stream()
    with torch.cuda.stream(s):
        y = layer(x, [100, 50, 0, 150])
        assert ctx._stream == s.cuda_stream        # the context followed torch's current stream
    torch.cuda.current_stream().wait_stream(s)
    assert torch.equal(y, ref)
    assert ctx.allocs > before                     # the library's scratch came from torch


def test_torch_compile_on_cuda():
    torch.manual_seed(2)
    layer = GroupedLinear(N, K_IN, K_OUT, recipe=Float8CurrentScaling(), params_dtype=torch.bfloat16,
                          device="cuda")
    x = torch.randn(300, K_IN, dtype=torch.bfloat16, device="cuda", requires_grad=True)
    splits = torch.tensor([100, 50, 0, 150], device="cuda")
    eager = layer(x, splits)
    compiled = torch.compile(layer, fullgraph=True)
    y = compiled(x, splits)
    assert torch.equal(y, eager)
    y.float().sum().backward()


def test_wrong_device_splits_raise():
    layer = GroupedLinear(N, K_IN, K_OUT, params_dtype=torch.bfloat16, device="cuda")
    x = torch.randn(10, K_IN, dtype=torch.bfloat16, device="cuda")
    with pytest.raises(ValueError, match="m_splits: a tensor of splits"):
        layer(x, torch.tensor([10, 0, 0, 0]))
    with pytest.raises(ValueError, match="inp: on cpu"):
        layer(x.cpu(), [10, 0, 0, 0])


def test_sharded_experts_on_nccl_one_rank(tmp_path):
    """ShardedExperts on CUDA tensors over NCCL (one rank: all-gather and reduce-scatter run, the
    machine has one GPU), bf16 working weights."""
    import torch.distributed as dist
    from grouplin.torch import ShardedExperts
    dist.init_process_group("nccl", init_method="file://" + str(tmp_path / "rendezvous"), rank=0, world_size=1)
    try:
        experts = ShardedExperts(N, K_OUT, K_IN, dtype=torch.bfloat16, device="cuda")
        layer = GroupedLinear(N, K_IN, K_OUT, bias=False, params_dtype=torch.bfloat16, device="cuda",
                              distributed_weight=experts)
        splits = [100, 50, 0, 150]
        x = torch.randn(300, K_IN, dtype=torch.bfloat16, device="cuda")
        dy = torch.randn(300, K_OUT, dtype=torch.bfloat16, device="cuda")
        for mb in range(2):
            y = layer(x, splits, is_first_microbatch=(mb == 0))
            y.backward(dy)
        w = experts.full_weight().to(torch.bfloat16).double()
        xs, dys = x.double().split(splits), dy.double().split(splits)
        ref = torch.cat([xs[i] @ w[i].T for i in range(N)])
        assert ((y.double() - ref).abs() <= 2.0 ** -7 * ref.abs() + 1e-2).all()
        want = 2 * torch.stack([dys[i].T @ xs[i] for i in range(N)]).reshape(-1)
        got = experts.shard.main_grad[:want.numel()].double()
        assert ((got - want).abs() <= 1e-3 * want.abs().max()).all()
    finally:
        dist.destroy_process_group()


def fused_single_layer(recipe, seed=3):
    """The benchmark's layer: one grouped bf16 weight, fused wgrad into an FP32 main_grad."""
    torch.manual_seed(seed)
    m = GroupedLinear(N, K_IN, K_OUT, bias=False, recipe=RECIPES[recipe], params_dtype=torch.bfloat16,
                      device="cuda", single_grouped_weight=True, fuse_wgrad_accumulation=True)
    m.weight.main_grad = torch.zeros(m.weight.shape, dtype=torch.float32, device="cuda")
    return m


@pytest.mark.parametrize("recipe", ["none", "current"])
def test_grouped_path_never_synchronizes_the_host(recipe):
    # an int64 splits tensor on the GPU: forward + backward must not read it (nor anything
    # else) on the host; torch raises on any synchronizing call in "error" mode
    layer = fused_single_layer(recipe)
    x = torch.randn(512, K_IN, dtype=torch.bfloat16, device="cuda", requires_grad=True)
    dy = torch.randn(512, K_OUT, dtype=torch.bfloat16, device="cuda")
    splits = torch.tensor([100, 0, 250, 130], dtype=torch.int64, device="cuda")
    layer(x, splits, is_first_microbatch=True).backward(dy)      # first call: C layer, caches
    torch.cuda.synchronize()
    torch.cuda.set_sync_debug_mode("error")
    try:
        for _ in range(2):
            layer(x, splits, is_first_microbatch=False).backward(dy)
    finally:
        torch.cuda.set_sync_debug_mode("default")
    torch.cuda.synchronize()


@pytest.mark.parametrize("recipe", ["none", "current"])
def test_cuda_graph_of_fused_single_weight_layer_replays_new_splits(recipe):
    layer, eager = fused_single_layer(recipe), fused_single_layer(recipe)
    rows = 512
    x = torch.randn(rows, K_IN, dtype=torch.bfloat16, device="cuda", requires_grad=True)
    dy = torch.randn(rows, K_OUT, dtype=torch.bfloat16, device="cuda")
    splits = torch.tensor([100, 0, 250, 130], dtype=torch.int64, device="cuda")
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        for _ in range(3):
            layer(x, splits, is_first_microbatch=False).backward(dy)
    torch.cuda.current_stream().wait_stream(s)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph, stream=s):
        y = layer(x, splits, is_first_microbatch=False)
        y.backward(dy)
    for new in ([10, 300, 0, 150], [0, 0, 0, 480]):
        splits.copy_(torch.tensor(new))
        with torch.no_grad():
            x.copy_(torch.randn_like(x))
        x.grad.zero_()
        layer.weight.main_grad.zero_()
        eager.weight.main_grad.zero_()
        graph.replay()
        torch.cuda.synchronize()
        xe = x.detach().clone().requires_grad_()
        ye = eager(xe, splits, is_first_microbatch=False)
        ye.backward(dy)
        m = sum(new)
        assert torch.equal(y[:m], ye[:m]) and torch.equal(x.grad[:m], xe.grad[:m])
        assert torch.equal(layer.weight.main_grad, eager.weight.main_grad)


@pytest.mark.parametrize("bias", [False, True])
def test_torch_compile_reduce_overhead_replays_new_splits(bias):
    """mode="reduce-overhead" gives eager's bytes, main_grad included, as the splits change
    (gradient accumulation: FIRST, then NEXT).  The grouplin ops are cudagraph_unsafe: inductor
    runs them every call between its graphs (their saved context is host state and library
    scratch that cudagraph trees cannot track); each result is read before the next call, as a
    CUDA-graph output must be."""
    torch._dynamo.reset()        # each new layer is a recompile: stay under dynamo's limit of 8
    layer, eager = fused_single_layer("none"), fused_single_layer("none")
    if bias:
        layer, eager = (GroupedLinear(N, K_IN, K_OUT, params_dtype=torch.bfloat16, device="cuda",
                                      single_grouped_weight=True, fuse_wgrad_accumulation=True) for _ in range(2))
        eager.load_state_dict(layer.state_dict())
        for m in (layer, eager):
            m.weight.main_grad = torch.zeros(m.weight.shape, dtype=torch.float32, device="cuda")
    compiled = torch.compile(layer, mode="reduce-overhead", fullgraph=True)
    dy = torch.randn(512, K_OUT, dtype=torch.bfloat16, device="cuda")
    for step, new in enumerate(([100, 0, 250, 130], [10, 300, 0, 150], [0, 0, 0, 480], [128, 128, 128, 128])):
        splits = torch.tensor(new, dtype=torch.int64, device="cuda")
        x = torch.randn(512, K_IN, dtype=torch.bfloat16, device="cuda", requires_grad=True)
        xe = x.detach().clone().requires_grad_()
        first = step % 2 == 0                    # FIRST overwrites main_grad, NEXT accumulates
        y = compiled(x, splits, is_first_microbatch=first)
        y.backward(dy)
        ye = eager(xe, splits, is_first_microbatch=first)
        ye.backward(dy)
        torch.cuda.synchronize()
        m = sum(new)
        assert torch.equal(y[:m], ye[:m]) and torch.equal(x.grad[:m], xe.grad[:m])
        assert torch.equal(layer.weight.main_grad, eager.weight.main_grad)
        if bias:
            assert torch.equal(layer.bias0.grad, eager.bias0.grad)
