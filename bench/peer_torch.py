"""Peers for bench/gpu_grouped_gemm.c, on the same machine in the same session: a per-expert loop
of torch matmuls and torch._grouped_mm (bf16), forward and forward + backward GEMM FLOPs
(fprop, dgrad, wgrad with an FP32 wgrad output like ours).  Median of CUDA-event timings."""
import sys

import torch

SHAPES = [("mixtral-fc1", 8, 4096, 4096, 14336), ("mixtral-fc2", 8, 4096, 14336, 4096),
          ("deepseek", 32, 512, 7168, 2048), ("qwen3", 128, 128, 2048, 768)]


def timed(fn, warmup=3, repeat=20):
    for _ in range(warmup):
        fn()
    times = []
    for _ in range(repeat):
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        fn()
        b.record()
        torch.cuda.synchronize()
        times.append(a.elapsed_time(b) / 1e3)
    times.sort()
    return times[len(times) // 2]


def main():
    dev = "cuda"
    print(f"{'shape':12s} | {'loop fprop':>10s} {'loop f+b':>9s} | {'gmm fprop':>9s} {'gmm f+b':>9s}  (TFLOP/s)")
    for name, e, t, k, n in SHAPES:
        if len(sys.argv) > 1 and sys.argv[1] != name:
            continue
        w = torch.randn(e, n, k, device=dev, dtype=torch.bfloat16)
        x = torch.randn(e * t, k, device=dev, dtype=torch.bfloat16)
        dy = torch.randn(e * t, n, device=dev, dtype=torch.bfloat16)
        dw = torch.empty(e, n, k, device=dev, dtype=torch.float32)
        flops = 2.0 * e * t * k * n
        xs, dys = x.view(e, t, k), dy.view(e, t, n)

        def loop_f():
            for i in range(e):
                torch.matmul(xs[i], w[i].t())

        def loop_fb():
            for i in range(e):
                torch.matmul(xs[i], w[i].t())
                torch.matmul(dys[i], w[i])
                dw[i] = torch.matmul(dys[i].t(), xs[i]).float()

        offs = torch.arange(t, e * t + 1, t, device=dev, dtype=torch.int32)

        def gmm_f():
            torch._grouped_mm(x, w.transpose(1, 2), offs=offs)

        def gmm_fb():
            torch._grouped_mm(x, w.transpose(1, 2), offs=offs)
            torch._grouped_mm(dy, w, offs=offs)
            torch._grouped_mm(dy.t(), x, offs=offs)

        row = [flops / timed(loop_f), 3 * flops / timed(loop_fb)]
        try:
            row += [flops / timed(gmm_f), 3 * flops / timed(gmm_fb)]
        except Exception as exc:  # older torch without _grouped_mm
            print(f"  torch._grouped_mm unavailable: {exc}")
            row += [float("nan")] * 2
        print(f"{name:12s} | {row[0]/1e12:10.1f} {row[1]/1e12:9.1f} | {row[2]/1e12:9.1f} {row[3]/1e12:9.1f}")


if __name__ == "__main__":
    main()
