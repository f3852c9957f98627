"""Torch peers for bench/gpu_quantize.c, same machine and run: per-tensor FP8 current scaling
of a bf16 tensor, rowwise (q) and rowwise + transposed (q, qt), written the way a PyTorch user
would (amax, scale, cast, transpose), eager and under torch.compile, and a device copy of the
same tensor (clone) as the bandwidth ceiling.  Useful GB/s counts what gpu_quantize counts: the
input read once and every output written once (the scale_inv too).  Median of CUDA-event timings
over rotating inputs (so a call never finds its input in L2).

The first shape is compiled for its static shape (the headline case); further shapes share
one dynamic-shape compile per function, which keeps the run short.  Every result line is also
printed in a form gpu_quantize --torch parses:
    peer <R|R+T|copy> <eager|compile|-> <rows> <cols> <us> <GB/s>

usage: python3 bench/peer_torch_quant.py [ROWS COLS [ROWS COLS ...]]   (default 16384 8192)"""
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
    args = [int(a) for a in sys.argv[1:]]
    if not args:
        args = [16384, 8192]
    if len(args) % 2:
        sys.exit(__doc__)
    shapes = list(zip(args[0::2], args[1::2]))
    print(f"torch {torch.__version__}, bf16, FP8 E4M3 current scaling")
    static = {"R": torch.compile(quant_r), "R+T": torch.compile(quant_rt)}
    dynamic = {"R": torch.compile(quant_r, dynamic=True), "R+T": torch.compile(quant_rt, dynamic=True)}
    for k, (rows, cols) in enumerate(shapes):
        n = rows * cols
        copies = max(2, (256 << 20) // (2 * n) + 1)
        xs = [torch.randn(rows, cols, device="cuda", dtype=torch.bfloat16) for _ in range(copies)]
        ms = timed(torch.clone, xs)
        print(f"[{rows}, {cols}] copy {ms * 1e3:9.1f} us {4 * n / (ms * 1e6):8.0f} GB/s (read + written)")
        print(f"peer copy - {rows} {cols} {ms * 1e3:.1f} {4 * n / (ms * 1e6):.0f}")
        compiled = static if k == 0 else dynamic
        for name, fn, useful in (("R", quant_r, 3 * n + 4), ("R+T", quant_rt, 4 * n + 4)):
            for mode, f in (("eager", fn), ("compile", compiled[name])):
                ms = timed(f, xs)
                gbps = useful / (ms * 1e6)
                label = "torch.compile" + ("" if k == 0 else " (dynamic)") if mode == "compile" else "eager"
                print(f"[{rows}, {cols}] {name:4s} {label:24s} {ms * 1e3:9.1f} us {gbps:8.0f} GB/s")
                print(f"peer {name} {mode} {rows} {cols} {ms * 1e3:.1f} {gbps:.0f}")
        del xs
        torch.cuda.empty_cache()


if __name__ == "__main__":
    main()
