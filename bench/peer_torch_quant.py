"""Torch peers for bench/gpu_quantize.c, same machine and session: per-tensor FP8 current scaling
of a bf16 tensor, rowwise (q) and rowwise + transposed (q, qt), written the way a PyTorch user
would (amax, scale, cast, transpose), eager and under torch.compile.  Useful GB/s counts what
gpu_quantize counts: the input read once and every output written once (the scale_inv too).
Median of CUDA-event timings over rotating inputs (so a call never finds its input in L2).

usage: python3 bench/peer_torch_quant.py [ROWS COLS]   (default 16384 8192)"""
import sys

import torch

FP8_MAX = 448.0


def quant_r(x):
    amax = x.abs().amax().float()
    scale = FP8_MAX / torch.clamp(amax, min=1e-12)
    q = (x.float() * scale).to(torch.float8_e4m3fn)
    return q, scale.reciprocal()


def quant_rt(x):
    q, scale_inv = quant_r(x)
    return q, q.t().contiguous(), scale_inv


def timed(fn, xs, warmup=5, repeat=30):
    for i in range(warmup):
        fn(xs[i % len(xs)])
    torch.cuda.synchronize()
    times = []
    for r in range(repeat):
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        x = xs[r % len(xs)]
        a.record()
        fn(x)
        b.record()
        torch.cuda.synchronize()
        times.append(a.elapsed_time(b))
    times.sort()
    return times[len(times) // 2]


def main():
    rows, cols = (int(sys.argv[1]), int(sys.argv[2])) if len(sys.argv) == 3 else (16384, 8192)
    n = rows * cols
    copies = max(2, (256 << 20) // (2 * n) + 1)
    xs = [torch.randn(rows, cols, device="cuda", dtype=torch.bfloat16) for _ in range(copies)]
    print(f"torch {torch.__version__}, bf16 [{rows}, {cols}], FP8 E4M3 current scaling")
    for name, fn, useful in (("R", quant_r, 3 * n + 4), ("R+T", quant_rt, 4 * n + 4)):
        for mode, f in (("eager", fn), ("torch.compile", torch.compile(fn))):
            ms = timed(f, xs)
            print(f"{name:4s} {mode:14s} {ms * 1e3:9.1f} us {useful / (ms * 1e6):8.0f} GB/s")


if __name__ == "__main__":
    main()
