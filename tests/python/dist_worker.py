"""One rank of test_distributed.py: ShardedExperts over a Gloo group, forward + backward of two
microbatches under saved_tensors_hooks (an activation-offloading stand-in), checked exactly:
small-integer data make every FP32 product and sum exact, so the sharded results must equal
the single-process reference bit for bit.  Then prefetch (protocol v2): through the C table and
directly, a prefetched materialization has the bytes of a plain one, FP32 and bf16, and a layer
step after a prefetch gives the same output.   Usage: dist_worker.py RANK WORLD INIT_FILE"""
import ctypes as C
import os
import sys

import torch
import torch.distributed as dist

from grouplin import _lib
from grouplin.torch import GroupedLinear, ShardedExperts

N, K_IN, K_OUT = 3, 40, 24    # 2880 weights: the shards split expert 1 between the ranks
SPLITS = [3, 0, 5]


def data(rank, mb):
    g = torch.Generator().manual_seed(100 * rank + mb)
    x = torch.randint(-3, 4, (sum(SPLITS), K_IN), generator=g).float()
    dy = torch.randint(-3, 4, (sum(SPLITS), K_OUT), generator=g).float()
    return x, dy


def main():
    rank, world, init = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
    dist.init_process_group("gloo", init_method="file://" + init, rank=rank, world_size=world)
    g = torch.Generator().manual_seed(7)
    experts = ShardedExperts(N, K_OUT, K_IN, device="cpu",
                             init_method=lambda w: w.copy_(torch.randint(-2, 3, w.shape, generator=g).float()))
    layer = GroupedLinear(N, K_IN, K_OUT, bias=False, params_dtype=torch.float32, device="cpu",
                          distributed_weight=experts)
    full = experts.full_weight().clone()
    experts.shard.main_grad.fill_(99.0)      # stale: the first microbatch must overwrite it
    packed = []

    def pack(t):                             # what activation offloading sees: only plain tensors
        packed.append(type(t))
        return ("offloaded", t.clone())

    def unpack(p):
        return p[1]

    for mb in range(2):
        x, dy = data(rank, mb)
        x.requires_grad_()
        with torch.autograd.graph.saved_tensors_hooks(pack, unpack):
            y = layer(x, SPLITS, is_first_microbatch=(mb == 0))
        y.backward(dy)
        xs = x.detach().split(SPLITS)
        assert torch.equal(y, torch.cat([xs[i] @ full[i].T for i in range(N)])), "forward"
        dys = dy.split(SPLITS)
        assert torch.equal(x.grad, torch.cat([dys[i] @ full[i] for i in range(N)])), "dgrad"
    # eagerly the layer saves no tensor at all (its autograd context holds the C saved context)
    assert all(t is torch.Tensor for t in packed), packed
    # main_grad: this rank's slice of the weight gradients summed over ranks and microbatches
    want = torch.zeros(N, K_OUT, K_IN)
    for r in range(world):
        for mb in range(2):
            x, dy = data(r, mb)
            xs, dys = x.split(SPLITS), dy.split(SPLITS)
            want += torch.stack([dys[i].T @ xs[i] for i in range(N)])
    flat = torch.zeros(experts.shard_len * world)
    flat[:want.numel()] = want.reshape(-1)
    mine = flat.chunk(world)[rank]
    assert torch.equal(experts.shard.main_grad, mine), "main_grad"
    assert experts.shard.grad is None
    check_prefetch(experts, layer, rank)
    g = torch.Generator().manual_seed(8)
    check_prefetch(ShardedExperts(N, K_OUT, K_IN, device="cpu", dtype=torch.bfloat16,
                                  init_method=lambda w: w.normal_(generator=g)), None, rank)
    dist.barrier()
    dist.destroy_process_group()
    print("rank %d ok" % rank, flush=True)
    # Every check has passed.  Leave without interpreter finalization: torch's Gloo backend can
    # still hold tensors of its finished all-gathers in its worker threads, and releasing them
    # while Python tears down aborts the process ("terminate called without an active
    # exception", SIGABRT) about one run in twelve on a 2-core machine even after
    # destroy_process_group (a torch teardown problem, pytorch/pytorch#179291's subject).
    os._exit(0)


def raw(ws):
    return [bytes(w.contiguous().view(torch.uint8).numpy()) for w in ws]


def check_prefetch(experts, layer, rank):
    plain = raw(experts.materialize_forward())
    assert raw(experts.materialize_backward()) == plain
    # through the C protocol table: prefetch, then materialize, both as the library calls them
    t = experts.table()
    assert t.size == C.sizeof(_lib.DistWeights) and t.prefetch, "the table must carry the prefetch hook"
    nbytes = K_OUT * K_IN * experts.shard.new_empty(0, dtype=experts.dtype).element_size()
    for direction, materialize in ((0, t.materialize_forward), (1, t.materialize_backward)):
        assert t.prefetch(None, direction) == _lib.STATUS_SUCCESS, experts.take_exception()
        out = (_lib.Tensor * N)()
        assert materialize(None, out) == _lib.STATUS_SUCCESS, experts.take_exception()
        got = [C.string_at(out[i].data, nbytes) for i in range(N)]
        assert got == plain, "prefetched materialization (direction %d) differs" % direction
        assert t.release(None, out) == _lib.STATUS_SUCCESS
    # directly from Python; a second prefetch of the same direction is refused on every rank
    experts.prefetch(1)
    experts.prefetch(0)
    try:
        experts.prefetch(0)
        raise AssertionError("a second prefetch(0) must raise")
    except RuntimeError as e:
        assert "prefetched already" in str(e)
    assert raw(experts.materialize_forward()) == plain
    assert raw(experts.materialize_backward()) == plain
    assert experts._prefetched == [None, None]
    try:
        experts.prefetch(2)
        raise AssertionError("prefetch(2) must raise")
    except ValueError as e:
        assert "direction" in str(e)
    if layer is not None:                    # a layer step after a prefetch: the same output
        x, _ = data(rank, 5)
        with torch.no_grad():
            want = layer(x, SPLITS)
            experts.prefetch(0)
            assert torch.equal(layer(x, SPLITS), want), "forward after prefetch"


if __name__ == "__main__":
    main()
