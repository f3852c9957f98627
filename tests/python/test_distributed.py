"""Distributed weights: the Python protocol wrapped into the C table (one process), and the
built-in ShardedExperts over 2 Gloo processes under saved_tensors_hooks."""
import ctypes as C
import os
import subprocess
import sys

import pytest

torch = pytest.importorskip("torch")  # the numpy part (test_ops.py) runs without it

from grouplin import _lib  # noqa: E402
from grouplin.torch import DistributedWeight, GroupedLinear  # noqa: E402

N, K_IN, K_OUT = 3, 16, 8
SPLITS = [4, 0, 6]


class LocalExperts(DistributedWeight):
    """A minimal implementer: full weights kept locally, counting every hook call."""

    def __init__(self, fail_in=None):
        self.num_experts, self.out_features, self.in_features = N, K_OUT, K_IN
        self.master = torch.nn.Parameter(torch.randn(N, K_OUT, K_IN))
        self.main_grad = torch.zeros(N, K_OUT, K_IN)
        self.grads = torch.zeros(N, K_OUT, K_IN)
        self.calls = []
        self.live = 0
        self.fail_in = fail_in

    def autograd_parameters(self):
        return [self.master]

    def _materialize(self, what):
        self.calls.append(what)
        if self.fail_in == what:
            raise KeyError("shard store unavailable")
        self.live += 1
        return [w.clone() for w in self.master.detach().unbind(0)]   # a fresh "gathered" copy

    def materialize_forward(self):
        return self._materialize("forward")

    def materialize_backward(self):
        return self._materialize("backward")

    def release(self, weights):
        self.calls.append("release")
        self.live -= 1

    def grad_buffer(self, expert):
        return self.grads[expert]

    def finalize_weight_grads(self, accumulate):
        self.calls.append("finalize(%s)" % accumulate)
        if accumulate:
            self.main_grad += self.grads
        else:
            self.main_grad.copy_(self.grads)
        return False


def test_python_protocol_drives_the_layer():
    torch.manual_seed(0)
    dw = LocalExperts()
    layer = GroupedLinear(N, K_IN, K_OUT, bias=False, params_dtype=torch.float32, device="cpu",
                          distributed_weight=dw)
    x = torch.randn(sum(SPLITS), K_IN, requires_grad=True)
    dy = torch.randn(sum(SPLITS), K_OUT)
    for mb in range(2):
        dw.calls.clear()
        layer(x, SPLITS, is_first_microbatch=(mb == 0)).backward(dy)
        assert dw.calls == ["forward", "release", "backward", "release", "finalize(%s)" % (mb == 1)]
        assert dw.live == 0                     # every materialized copy handed back
    xs, dys = x.detach().split(SPLITS), dy.split(SPLITS)
    want = torch.stack([dys[i].T @ xs[i] for i in range(N)]) * 2
    assert torch.allclose(dw.main_grad, want, atol=1e-4)
    assert dw.master.grad is None


def test_a_failing_hook_raises_its_own_exception():
    dw = LocalExperts(fail_in="backward")
    layer = GroupedLinear(N, K_IN, K_OUT, bias=False, params_dtype=torch.float32, device="cpu",
                          distributed_weight=dw)
    y = layer(torch.randn(sum(SPLITS), K_IN, requires_grad=True), SPLITS)
    with pytest.raises(KeyError, match="shard store unavailable"):
        y.sum().backward()
    dw = LocalExperts(fail_in="forward")
    layer = GroupedLinear(N, K_IN, K_OUT, bias=False, params_dtype=torch.float32, device="cpu",
                          distributed_weight=dw)
    with pytest.raises(KeyError, match="shard store unavailable"):
        layer(torch.randn(sum(SPLITS), K_IN), SPLITS)


class PrefetchingExperts(LocalExperts):
    """LocalExperts with the optional prefetch hook: the copy is made early and handed out by the
    next materialize of that direction."""

    def __init__(self, **kw):
        super().__init__(**kw)
        self.early = {}

    def prefetch(self, direction):
        if direction in self.early:
            raise RuntimeError("prefetched already")
        self.calls.append("prefetch(%d)" % direction)
        self.early[direction] = [w.clone() for w in self.master.detach().unbind(0)]

    def materialize_forward(self):
        return self.early.pop(0, None) or self._materialize("forward")


def test_prefetch_hook_is_in_the_table_only_when_defined():
    assert not LocalExperts().table().prefetch            # NULL: the C side sees no hook
    dw = PrefetchingExperts()
    t = dw.table()
    assert t.prefetch and t.size == C.sizeof(_lib.DistWeights)
    assert t.prefetch(None, 0) == _lib.STATUS_SUCCESS
    assert dw.calls == ["prefetch(0)"]
    # an exception in the hook becomes a failing status and is kept for the caller
    assert t.prefetch(None, 0) != _lib.STATUS_SUCCESS
    exc = dw.take_exception()
    assert isinstance(exc, RuntimeError) and "prefetched already" in str(exc)


def test_forward_after_prefetch_equals_forward_without():
    torch.manual_seed(2)
    dw = PrefetchingExperts()
    layer = GroupedLinear(N, K_IN, K_OUT, bias=False, params_dtype=torch.float32, device="cpu",
                          distributed_weight=dw)
    x = torch.randn(sum(SPLITS), K_IN)
    with torch.no_grad():
        want = layer(x, SPLITS)
        dw.calls.clear()
        dw.prefetch(0)
        got = layer(x, SPLITS)
    assert torch.equal(got, want)
    assert dw.calls == ["prefetch(0)", "release"]           # the forward used the prefetched copy


def test_delay_wgrad_with_a_distributed_weight_is_refused():
    with pytest.raises(ValueError, match="delay_wgrad_compute"):
        GroupedLinear(N, K_IN, K_OUT, device="cpu", distributed_weight=LocalExperts(), delay_wgrad_compute=True)


@pytest.mark.skipif(not torch.distributed.is_available(), reason="torch.distributed not built")
def test_sharded_experts_two_gloo_ranks_under_saved_tensors_hooks(tmp_path):
    worker = os.path.join(os.path.dirname(os.path.abspath(__file__)), "dist_worker.py")
    init = str(tmp_path / "rendezvous")
    env = dict(os.environ, OPENBLAS_NUM_THREADS="1", OMP_NUM_THREADS="1")
    procs = [subprocess.Popen([sys.executable, worker, str(r), "2", init], env=env, stdout=subprocess.PIPE,
                              stderr=subprocess.STDOUT, text=True) for r in range(2)]
    outs = []
    for p in procs:
        try:
            outs.append(p.communicate(timeout=180)[0])
        except subprocess.TimeoutExpired:
            for q in procs:
                q.kill()
            pytest.fail("a rank hung")
    for r, (p, out) in enumerate(zip(procs, outs)):
        assert p.returncode == 0, "rank %d failed:\n%s" % (r, out)
        assert "rank %d ok" % r in out


def test_distributed_weight_with_bias():
    torch.manual_seed(1)
    dw = LocalExperts()
    layer = GroupedLinear(N, K_IN, K_OUT, bias=True, params_dtype=torch.float32, device="cpu",
                          distributed_weight=dw)
    with torch.no_grad():
        for b in layer.biases():
            b.normal_()
    x = torch.randn(sum(SPLITS), K_IN)
    y = layer(x, SPLITS)
    xs = x.split(SPLITS)
    want = torch.cat([xs[i] @ dw.master[i].detach().T + layer.biases()[i].detach() for i in range(N)])
    assert torch.allclose(y, want, atol=1e-5)
    y.sum().backward()
    assert torch.allclose(layer.biases()[2].grad, torch.full((K_OUT,), float(SPLITS[2])))
