"""Torch peers of bench/gpu_grouped_gemm.c and bench/gpu_layer.c, same machine, same run.

Per shape (Mixtral FC1, DeepSeek-like, Qwen3-like, DeepGEMM's) and split set (uniform, zipf,
empty, router, random: the same sets and numbers as bench_util.h), per recipe:
  bf16  torch._grouped_mm: fprop, dgrad, wgrad (out_dtype FP32 where torch has it) plus the
        main_grad add, all3 = the three; layer = autograd forward + backward of _grouped_mm
        followed by main_grad += the weights' gradient; forward = the forward alone.
  fp8   torch._scaled_grouped_mm with rowwise scales (E4M3, FP32 scales, bf16 out; fast
        accumulation in fprop as TE): fprop, dgrad on pre-quantized operands, wgrad8 (2d × 2d,
        when this torch supports it) into main_grad; layer = rowwise quantization of x, W (both
        layouts) and dy in torch ops, the two scaled GEMMs, a bf16 _grouped_mm wgrad and the
        main_grad add.
Median of CUDA-event timings.  --out FILE writes "shape splits recipe stage seconds" lines that
the C benchmarks read with --peer FILE (ratio columns); --quick: uniform splits, fewer repeats.

usage: python3 bench/peer_torch.py [SHAPE] [--out FILE] [--quick]"""
import sys

import torch

from peer_util import SPLIT_KINDS, make_splits, timed_cuda

SHAPES = [("mixtral-fc1", 8, 4096, 4096, 14336), ("deepseek", 32, 512, 7168, 2048),
          ("qwen3", 128, 128, 2048, 768), ("deepgemm", 8, 4096, 7168, 4096)]
E4M3 = torch.float8_e4m3fn


def rowwise(t):
    """E4M3 copy of t with one FP32 decode scale per row (of the last dimension)."""
    amax = t.abs().amax(dim=-1, keepdim=True).float().clamp(min=1e-12)
    scale = 448.0 / amax
    return (t.float() * scale).to(E4M3), (1.0 / scale).squeeze(-1)


def bench_shape(name, e, t, k, n, splits_kinds, warmup, repeat, out):
    dev = "cuda"
    rows = e * t
    w = torch.randn(e, n, k, device=dev, dtype=torch.bfloat16)
    x = torch.randn(rows, k, device=dev, dtype=torch.bfloat16)
    dy = torch.randn(rows, n, device=dev, dtype=torch.bfloat16)
    mg = torch.zeros(e, n, k, device=dev, dtype=torch.float32)
    flops = 2.0 * rows * k * n
    # FP8 operands, quantized once (the stage timings exclude quantization, as in the C bench)
    xq, xs = rowwise(x)
    wq, ws = rowwise(w)                                  # [E, N, K] rowwise along K (fprop's B)
    wtq, wts = rowwise(w.transpose(1, 2).contiguous())   # [E, K, N] rowwise along N (dgrad's B)
    dyq, dys = rowwise(dy)
    dytq, dyts = rowwise(dy.t().contiguous())            # [N, M]: wgrad's A, K-major along the rows
    xtq, xts = rowwise(x.t().contiguous())               # [K, M]

    for kind in splits_kinds:
        sp = make_splits(kind, e, t)
        offs = torch.tensor([sum(sp[:i + 1]) for i in range(e)], device=dev, dtype=torch.int32)
        res = {}

        def put(recipe, stage, fn, f):
            try:
                sec = timed_cuda(fn, warmup, repeat)
            except Exception as exc:  # an op this torch lacks
                print(f"  {name} {kind} {recipe} {stage}: unavailable ({str(exc).splitlines()[0][:90]})")
                return
            res[(recipe, stage)] = (sec, f / sec / 1e12)
            if out:
                out.write(f"{name} {kind} {recipe} {stage} {sec:.9f}\n")

        def wgrad():
            try:
                g = torch._grouped_mm(dy.t(), x, offs=offs, out_dtype=torch.float32)
            except TypeError:
                g = torch._grouped_mm(dy.t(), x, offs=offs).float()
            mg.add_(g)

        put("bf16", "fprop", lambda: torch._grouped_mm(x, w.transpose(1, 2), offs=offs), flops)
        put("bf16", "dgrad", lambda: torch._grouped_mm(dy, w, offs=offs), flops)
        put("bf16", "wgrad", wgrad, flops)

        def all3():
            torch._grouped_mm(x, w.transpose(1, 2), offs=offs)
            torch._grouped_mm(dy, w, offs=offs)
            wgrad()
        put("bf16", "all3", all3, 3 * flops)

        wp = w.clone().requires_grad_(True)
        xa = x.clone().requires_grad_(True)

        def layer():
            wp.grad = None
            y = torch._grouped_mm(xa, wp.transpose(1, 2), offs=offs)
            y.backward(dy)
            mg.add_(wp.grad)
        put("bf16", "layer", layer, 3 * flops)
        put("bf16", "forward", lambda: torch._grouped_mm(xa, wp.transpose(1, 2), offs=offs), flops)

        sgm = getattr(torch, "_scaled_grouped_mm", None)
        if sgm is not None:
            def fprop8():
                return sgm(xq, wq.transpose(1, 2), xs, ws, offs=offs, out_dtype=torch.bfloat16, use_fast_accum=True)

            def dgrad8():
                return sgm(dyq, wtq.transpose(1, 2), dys, wts, offs=offs, out_dtype=torch.bfloat16)

            def wgrad8():
                g = sgm(dytq, xtq.t(), dyts.repeat(e), xts.repeat(e), offs=offs, out_dtype=torch.bfloat16)
                mg.add_(g)
            put("fp8", "fprop", fprop8, flops)
            put("fp8", "dgrad", dgrad8, flops)
            put("fp8", "wgrad8", wgrad8, flops)

            def all3_8():
                fprop8()
                dgrad8()
                wgrad8()
            put("fp8", "all3", all3_8, 3 * flops)

            def layer8(backward=True):
                aq, asc = rowwise(x)
                bq, bsc = rowwise(w)
                y = sgm(aq, bq.transpose(1, 2), asc, bsc, offs=offs, out_dtype=torch.bfloat16, use_fast_accum=True)
                if not backward:
                    return y
                gq, gsc = rowwise(dy)
                btq, btsc = rowwise(w.transpose(1, 2).contiguous())
                sgm(gq, btq.transpose(1, 2), gsc, btsc, offs=offs, out_dtype=torch.bfloat16)
                mg.add_(torch._grouped_mm(dy.t(), x, offs=offs))
                return y
            put("fp8", "layer", layer8, 3 * flops)
            put("fp8", "forward", lambda: layer8(False), flops)

        for (recipe, stage), (sec, tf) in sorted(res.items()):
            print(f"{name:11s} {kind:7s} {recipe:5s} {stage:7s} | {sec * 1e3:8.3f} ms {tf:7.1f} TFLOP/s")
        sys.stdout.flush()
    del w, x, dy, mg, xq, wq, wtq, dyq, dytq, xtq
    torch.cuda.empty_cache()


def main():
    args = sys.argv[1:]
    out_path, quick, only = None, False, None
    i = 0
    while i < len(args):
        if args[i] == "--out":
            out_path, i = args[i + 1], i + 2
        elif args[i] == "--quick":
            quick, i = True, i + 1
        else:
            only, i = args[i], i + 1
    kinds = ["uniform"] if quick else SPLIT_KINDS
    warmup, repeat = (1, 3) if quick else (2, 8)
    print(f"# torch {torch.__version__}, {torch.cuda.get_device_name()}; fp8 = _scaled_grouped_mm rowwise")
    out = open(out_path, "w") if out_path else None
    for name, e, t, k, n in SHAPES:
        if only and only != name:
            continue
        bench_shape(name, e, t, k, n, kinds, warmup, repeat, out)
    if out:
        out.close()


if __name__ == "__main__":
    main()
