"""One rank of test_distributed.py: ShardedExperts over a Gloo group, forward + backward of two
microbatches under saved_tensors_hooks (an activation-offloading stand-in), checked exactly:
small-integer data make every FP32 product and sum exact, so the sharded results must equal
the single-process reference bit for bit.   Usage: dist_worker.py RANK WORLD INIT_FILE"""
import sys

import torch
import torch.distributed as dist

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
    assert packed and all(t is torch.Tensor for t in packed), packed
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
    dist.barrier()
    dist.destroy_process_group()
    print("rank %d ok" % rank)


if __name__ == "__main__":
    main()
