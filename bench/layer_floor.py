#!/usr/bin/env python3
"""Lower bounds on one grouped-linear layer step (forward + backward) on a GPU, by recipe.

The layer targets (docs/performance.md) compare recipes on the same shape; this script says what each recipe
could reach at best, from arithmetic alone, so that a measured time can be read against it.  No
GPU is needed.  Each stage of the step is a separate kernel (the quantizers do not overlap the
GEMMs), so the step's floor is the sum of its stages' floors, and a stage's floor is the larger
of its arithmetic time (FLOPs over the unit's ceiling) and its memory time (the fewest bytes it
must move over the copy bandwidth).  Ceilings: PERFORMANCE.md's H200 measurements (copy 4.25
TB/s read + write, bf16 ~800 TFLOP/s, FP8 1561 TFLOP/s with fast accumulation) unless given.

Bytes counted per stage (M tokens in all, E experts, hidden K, expert width N; operands read once,
outputs written once, main_grad FP32 read and written once by the wgrad's epilogue):
  fprop  x[M,K], W[E,N,K] in, y[M,N] bf16 out
  dgrad  dy[M,N], W in, dx[M,K] bf16 out
  wgrad  x, dy in, main_grad[E,N,K] FP32 in and out
  (operands are 2 bytes in bf16, 1 byte in FP8; FP8 scales are negligible)
Quantization of x, dy and W (each needs its rowwise and its columnwise / transposed copy):
  current scaling  amax pass (read 2n) + cast pass (read 2n, write n + n) = 6n bytes
  delayed, block   one pass: 4n bytes
  mxfp8 (emulated) one pass 4n; the GEMMs then run in bf16 on E4M3 * 2^k values (exact in bf16).
                   Row "mxfp8" dequantizes inside the GEMM's main loop at no cost (the best any
                   emulation can do); row "mxfp8-pass" dequantizes in separate passes (read n,
                   write 2n for each of the two copies of x, dy and W), as the library does today;
                   row "mxfp8-fused" has the quantizer write both copies already dequantized (the
                   bf16 values E4M3 * 2^k, 2n bytes each: one pass of 6n, no dequantization pass)
With --cached-weights the weights are quantized once per several microbatches (TE's
is_first_microbatch = False): their quantization leaves the step.

usage: layer_floor.py [--shape NAME|all] [--cached-weights] [--copy TBPS] [--bf16 TFLOPS]
                      [--fp8 TFLOPS]
"""
import argparse

SHAPES = {  # name: (experts, tokens per expert, K hidden, N expert width), as in bench/gpu_layer.c
    "mixtral-fc1": (8, 4096, 4096, 14336),
    "deepseek": (32, 512, 7168, 2048),
    "qwen3": (128, 128, 2048, 768),
    "deepgemm": (8, 4096, 7168, 4096),
}
RECIPES = ("bf16", "fp8-current", "fp8-delayed", "fp8-block", "mxfp8", "mxfp8-pass", "mxfp8-fused")


def stage_floor(flops, nbytes, tflops, tbps):
    """Seconds: the larger of the arithmetic and the memory time."""
    return max(flops / (tflops * 1e12), nbytes / (tbps * 1e12))


def layer_floor(shape, recipe, cached, tbps, bf16_tf, fp8_tf):
    e, t, k, n = SHAPES[shape]
    m = e * t
    nx, nw, ndy = m * k, e * n * k, m * n  # elements of x, W, dy
    gemm_flops = 2.0 * m * k * n  # one of fprop / dgrad / wgrad
    fp8_gemm = recipe.startswith("fp8")
    op = 1 if fp8_gemm else 2  # operand bytes in the GEMMs
    tf = fp8_tf if fp8_gemm else bf16_tf
    stages = {
        "fprop": stage_floor(gemm_flops, op * (nx + nw) + 2 * m * n, tf, tbps),
        "dgrad": stage_floor(gemm_flops, op * (ndy + nw) + 2 * m * k, tf, tbps),
        "wgrad": stage_floor(gemm_flops, op * (nx + ndy) + 8 * nw, tf, tbps),
    }
    quantized = [nx, ndy] + ([] if cached else [nw])
    # 6n: current scaling reads twice and writes two 1-byte copies; mxfp8-fused reads once and
    # writes two 2-byte (bf16) copies
    if recipe in ("fp8-current", "mxfp8-fused"):
        stages["quantize"] = sum(6 * q for q in quantized) / (tbps * 1e12)
    elif recipe in ("fp8-delayed", "fp8-block"):
        stages["quantize"] = sum(4 * q for q in quantized) / (tbps * 1e12)
    elif recipe.startswith("mxfp8"):
        stages["quantize"] = sum(4 * q for q in quantized) / (tbps * 1e12)
        if recipe == "mxfp8-pass":  # both copies of each operand: read n as FP8, write 2n as bf16
            stages["dequantize"] = sum(6 * q for q in (nx, ndy, nw)) / (tbps * 1e12)
    return stages, 3 * gemm_flops


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--shape", default="all")
    ap.add_argument("--cached-weights", action="store_true")
    ap.add_argument("--copy", type=float, default=4.25, help="copy bandwidth, TB/s (read + write)")
    ap.add_argument("--bf16", type=float, default=800.0, help="bf16 GEMM ceiling, TFLOP/s")
    ap.add_argument("--fp8", type=float, default=1561.0, help="FP8 GEMM ceiling, TFLOP/s")
    args = ap.parse_args()
    shapes = list(SHAPES) if args.shape == "all" else [args.shape]
    for s in shapes:
        if s not in SHAPES:
            raise SystemExit(f"layer_floor.py: --shape must be one of {', '.join(SHAPES)} or all, not {s}")
    print(f"# floors: copy {args.copy} TB/s, bf16 {args.bf16}, FP8 {args.fp8} TFLOP/s"
          f"{', weights cached' if args.cached_weights else ', weights quantized every step'}")
    print(f"{'shape':12} {'recipe':12} {'fprop':>7} {'dgrad':>7} {'wgrad':>7} {'quant':>7} {'dequant':>7}"
          f" {'step ms':>8} {'TFLOP/s':>8} {'vs bf16':>8}")
    for s in shapes:
        base = None
        for r in RECIPES:
            st, flops = layer_floor(s, r, args.cached_weights, args.copy, args.bf16, args.fp8)
            total = sum(st.values())
            base = base or total
            cells = [st.get(x, 0.0) * 1e3 for x in ("fprop", "dgrad", "wgrad", "quantize", "dequantize")]
            print(f"{s:12} {r:12} " + " ".join(f"{c:7.3f}" for c in cells) +
                  f" {total * 1e3:8.3f} {flops / total / 1e12:8.0f} {base / total:7.2f}x")


if __name__ == "__main__":
    main()
