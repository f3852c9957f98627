"""grouplin.torch.GroupedLinear against the C API and torch, same shapes, same process.

One training step of the layer as bench/gpu_layer times it: forward, then backward with dgrad
and the wgrad fused into an FP32 main_grad; one packed bf16 weight (single_grouped_weight), an
int64 splits tensor on the GPU (grouped path), no bias, weights quantized on every step
(is_first_microbatch=None; --cached-weights: False after one True, as gpu_layer
--cached-weights).  Per shape and recipe:
  module   GroupedLinear(...)(x, splits).backward(dy)
  C API    gln_grouped_linear_forward / _backward / _saved_release through ctypes on a context
           of its own (the library's stream-ordered pool, as gpu_layer), y and dx allocated by
           the library; with --gpu-layer PATH also bench/gpu_layer's own figure (a subprocess)
  torch    autograd over torch._grouped_mm + main_grad.add_ of the weight gradient (bf16, as
           bench/peer_torch.py's "layer"; the same bf16 step is printed for the FP8 recipes)
each eager (CUDA events around one step after a synchronization: host overhead included) and
under a CUDA graph (torch.cuda.graph of the same step, replayed); --modes adds "compile"
(torch.compile(mode="reduce-overhead") of the module).  Medians of --repeat steps after
--warmup.  Ratios: module / C API (1.00 = no overhead) and torch / module (> 1: faster).

--cpu: the host overhead on the CPU backend instead (no GPU needed): tiny shapes (8 experts x
16 rows, K = N = 64, and 128 x 1, K = N = 16), median microseconds per forward + backward of
the module, of the same C calls through ctypes, and of an autograd.Function that does nothing
but allocate y and dx (torch's own floor).

usage: python bench/peer_torch_module.py [--shape NAME|all] [--recipe NAME,...] [--modes eager,graph]
           [--warmup N] [--repeat N] [--cached-weights] [--gpu-layer PATH] [--cpu]
needs: the grouplin package importable with a CUDA build of libgrouplin.so (GROUPLIN_LIBRARY),
torch with CUDA; exits 77 without a GPU (like bench/gpu_layer), 2 on a usage error."""
import argparse
import ctypes as C
import os
import statistics
import subprocess
import sys
import time

from peer_util import timed_cuda

SHAPES = {"mixtral-fc1": (8, 4096, 4096, 14336), "deepseek": (32, 512, 7168, 2048), "qwen3": (128, 128, 2048, 768)}
RECIPES = ["bf16", "fp8-current", "fp8-delayed", "mxfp8", "fp8-block"]
MODES = ["eager", "graph", "compile"]


def parse_args(argv):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--shape", default="all", help="one of %s, or all" % ", ".join(SHAPES))
    p.add_argument("--recipe", default="bf16,fp8-current", help="comma-separated, from %s" % ", ".join(RECIPES))
    p.add_argument("--modes", default="eager,graph", help="comma-separated, from %s" % ", ".join(MODES))
    p.add_argument("--warmup", type=int, default=10)
    p.add_argument("--repeat", type=int, default=30)
    p.add_argument("--cached-weights", action="store_true")
    p.add_argument("--gpu-layer", metavar="PATH", help="bench/gpu_layer binary: also print its time")
    p.add_argument("--cpu", action="store_true", help="host overhead on the CPU backend (no GPU)")
    a = p.parse_args(argv)
    shapes = list(SHAPES) if a.shape == "all" else [a.shape]
    recipes, modes = a.recipe.split(","), a.modes.split(",")
    bad = [s for s in shapes if s not in SHAPES] + [r for r in recipes if r not in RECIPES] + \
        [m for m in modes if m not in MODES]
    if bad or a.warmup < 1 or a.repeat < 1:
        p.error("unknown %s" % ", ".join(bad) if bad else "--warmup and --repeat must be >= 1")
    if a.gpu_layer and not os.access(a.gpu_layer, os.X_OK):
        p.error("--gpu-layer %s: not an executable" % a.gpu_layer)
    a.shapes, a.recipes, a.mode_list = shapes, recipes, modes
    return a


def recipe_object(name):
    from grouplin.torch import DelayedScaling, Float8BlockScaling, Float8CurrentScaling, MXFP8BlockScaling
    return {"bf16": None, "fp8-current": Float8CurrentScaling(), "fp8-delayed": DelayedScaling(),
            "mxfp8": MXFP8BlockScaling(), "fp8-block": Float8BlockScaling()}[name]


# ---- timing ------------------------------------------------------------------------------------
def graphed(torch, fn, warmup=3):
    """fn captured in a CUDA graph (warm-up on the capture stream first); returns replay."""
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        for _ in range(warmup):
            fn()
    torch.cuda.current_stream().wait_stream(s)
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g, stream=s):
        fn()
    return g.replay


# ---- the three steps ---------------------------------------------------------------------------
def module_step(torch, e, rows, k, n, recipe, cached, x, dy, splits):
    from grouplin.torch import GroupedLinear
    layer = GroupedLinear(e, k, n, bias=False, recipe=recipe_object(recipe), params_dtype=torch.bfloat16,
                          device="cuda", single_grouped_weight=True, fuse_wgrad_accumulation=True)
    layer.weight.main_grad = torch.zeros(layer.weight.shape, dtype=torch.float32, device="cuda")
    xa = x.clone().requires_grad_(True)
    first = [True]

    def step(run=layer):
        xa.grad = None                     # dx lands in a fresh .grad, no accumulation kernel
        mb = None
        if cached:
            mb, first[0] = first[0], False
        run(xa, splits, is_first_microbatch=mb).backward(dy)
    return layer, step


def c_api_step(torch, e, rows, k, n, recipe, cached, weight, main_grad, x, dy, splits):
    """The C calls of gpu_layer's step through ctypes, on torch's current stream (so the
    events bracket them) with the library's own scratch pool."""
    from grouplin import _lib
    L = _lib.lib()
    opts = _lib.ContextOptions()
    opts.size, opts.backend, opts.device = C.sizeof(opts), _lib.BACKEND_CUDA, torch.cuda.current_device()
    opts.stream = torch.cuda.current_stream().cuda_stream or 1       # 1: cudaStreamLegacy
    ctx = C.c_void_p()
    _lib.check(L.gln_context_create(C.byref(opts), C.byref(ctx)), "gln_context_create")
    code = {"bf16": _lib.RECIPE_NONE, "fp8-current": _lib.RECIPE_FP8_CURRENT, "fp8-delayed": _lib.RECIPE_FP8_DELAYED,
            "mxfp8": _lib.RECIPE_MXFP8, "fp8-block": _lib.RECIPE_FP8_BLOCK}[recipe]
    cfg = _lib.layer_config(num_experts=e, in_features=k, out_features=n, bias=0, recipe=code,
                            path=_lib.PATH_GROUPED, fuse_wgrad_accumulation=1, single_grouped_weight=1)
    cfg.params.weight_packed, cfg.params.main_grad_packed = weight.data_ptr(), main_grad.data_ptr()
    h = C.c_void_p()
    _lib.check(L.gln_grouped_linear_create(ctx, C.byref(cfg), C.byref(h)), "gln_grouped_linear_create")
    xt = _lib.plain_tensor(_lib.BF16, rows, k, x.data_ptr())
    dyt = _lib.plain_tensor(_lib.BF16, rows, n, dy.data_ptr())
    first = [True]
    stream = [opts.stream]

    def step():
        s = torch.cuda.current_stream().cuda_stream or 1           # follow a capture stream
        if s != stream[0]:
            _lib.check(L.gln_context_set_stream(ctx, C.c_void_p(s)), "gln_context_set_stream")
            stream[0] = s
        yt = _lib.plain_tensor(_lib.BF16, rows, n, None)
        dxt = _lib.plain_tensor(_lib.BF16, rows, k, None)
        mb = _lib.MICROBATCH_UNSET
        if cached:
            mb, first[0] = (_lib.MICROBATCH_FIRST if first[0] else _lib.MICROBATCH_NEXT), False
        args = _lib.ForwardArgs(C.sizeof(_lib.ForwardArgs), C.pointer(xt), splits.data_ptr(), 1, C.pointer(yt), mb, 1)
        saved = C.c_void_p()
        _lib.check(L.gln_grouped_linear_forward(h, C.byref(args), C.byref(saved)), "gln_grouped_linear_forward")
        try:
            _lib.check(L.gln_grouped_linear_backward(saved, C.byref(dyt), C.byref(dxt)), "gln_grouped_linear_backward")
        finally:
            L.gln_grouped_linear_saved_release(saved)

    def close():
        L.gln_grouped_linear_destroy(h)
        L.gln_context_destroy(ctx)
    return step, close


def torch_step(torch, e, t, x, dy, main_grad):
    """autograd over torch._grouped_mm plus the main_grad add (bench/peer_torch.py's layer)."""
    rows = x.shape[0]
    w = torch.randn(e, dy.shape[1], x.shape[1], device="cuda", dtype=torch.bfloat16).requires_grad_(True)
    xa = x.clone().requires_grad_(True)
    offs = torch.arange(1, e + 1, device="cuda", dtype=torch.int32) * (rows // e)
    mg = main_grad.view(w.shape)

    def step():
        w.grad = None
        xa.grad = None
        y = torch._grouped_mm(xa, w.transpose(1, 2), offs=offs)
        y.backward(dy)
        mg.add_(w.grad)
    return step


def scratch_allocs_per_step(torch, step, steps=5):
    """How many scratch blocks the module's C layer takes from torch per step (the context's
    allocator callbacks: a host cost per block)."""
    from grouplin import _context
    ctx = _context.get(("cuda", torch.cuda.current_device()))
    before = ctx.allocs
    for _ in range(steps):
        step()
    torch.cuda.synchronize()
    return (ctx.allocs - before) / steps


def gpu_layer_ms(path, shape, recipe, a):
    """bench/gpu_layer's median ms for (shape, uniform, recipe), or None."""
    cmd = [path, "--shape", shape, "--recipe", recipe, "--splits", "uniform", "--warmup", str(a.warmup),
           "--repeat", str(a.repeat)] + (["--cached-weights"] if a.cached_weights else [])
    try:
        out = subprocess.run(cmd, capture_output=True, text=True, timeout=600).stdout
    except (OSError, subprocess.TimeoutExpired) as exc:
        print("  gpu_layer: %s" % exc)
        return None
    for line in out.splitlines():
        f = line.split()
        if len(f) > 4 and f[0] == shape and f[1] == "uniform" and f[2] == recipe and f[3] == "|":
            return float(f[4])
    return None


# ---- GPU ---------------------------------------------------------------------------------------
def run_gpu(a):
    try:
        import torch
    except ImportError:
        print("peer_torch_module: torch is not installed", file=sys.stderr)
        return 77
    if not torch.cuda.is_available():
        print("peer_torch_module: no GPU visible to torch (this benchmark times CUDA; --cpu measures "
              "the host overhead on the CPU backend)", file=sys.stderr)
        return 77
    import grouplin
    if not grouplin.cuda_available():
        print("peer_torch_module: the loaded libgrouplin.so has no CUDA backend: set GROUPLIN_LIBRARY to a "
              "CUDA build (e.g. build/src/libgrouplin.so)", file=sys.stderr)
        return 77
    print("# torch %s, %s; %s; warmup %d, repeat %d%s" % (
        torch.__version__, torch.cuda.get_device_name(), os.environ.get("GROUPLIN_LIBRARY", "packaged library"),
        a.warmup, a.repeat, ", cached weights" if a.cached_weights else ""))
    print("# ms per forward + backward (uniform splits); mod/C: module over C API; torch/mod: torch bf16 over module")
    head = "%-11s %-12s %-7s | %9s %9s %9s %9s | %6s %9s" % ("shape", "recipe", "mode", "module", "C API",
                                                            "gpu_layer", "torch", "mod/C", "torch/mod")
    print(head)
    print("-" * len(head))
    for shape in a.shapes:
        e, t, k, n = SHAPES[shape]
        rows = e * t
        torch.manual_seed(0)
        x = torch.randn(rows, k, device="cuda", dtype=torch.bfloat16)
        dy = torch.randn(rows, n, device="cuda", dtype=torch.bfloat16)
        splits = torch.full((e,), t, dtype=torch.int64, device="cuda")
        mg_torch = torch.zeros(e * n * k, device="cuda", dtype=torch.float32)
        t_step = torch_step(torch, e, t, x, dy, mg_torch)
        torch_t = {"eager": timed_cuda(t_step, a.warmup, a.repeat)}
        if "graph" in a.mode_list:
            torch_t["graph"] = timed_cuda(graphed(torch, t_step), a.warmup, a.repeat)
        for recipe in a.recipes:
            layer, m_step = module_step(torch, e, rows, k, n, recipe, a.cached_weights, x, dy, splits)
            c_step, c_close = c_api_step(torch, e, rows, k, n, recipe, a.cached_weights, layer.weight.detach(),
                                         torch.zeros(e * n * k, device="cuda", dtype=torch.float32), x, dy, splits)
            gl = gpu_layer_ms(a.gpu_layer, shape, recipe, a) if a.gpu_layer else None
            allocs = float("nan")
            for mode in a.mode_list:
                try:
                    if mode == "eager":
                        tm, tc = timed_cuda(m_step, a.warmup, a.repeat), timed_cuda(c_step, a.warmup, a.repeat)
                        allocs = scratch_allocs_per_step(torch, m_step)
                    elif mode == "graph":
                        tm = timed_cuda(graphed(torch, m_step), a.warmup, a.repeat)
                        try:
                            tc = timed_cuda(graphed(torch, c_step), a.warmup, a.repeat)
                        except Exception as exc:   # the C API's own pool under capture
                            print("  C API under a CUDA graph: %s" % str(exc).splitlines()[0][:100])
                            tc = None
                    else:
                        compiled = torch.compile(layer, mode="reduce-overhead", fullgraph=True)
                        tm = timed_cuda(lambda: m_step(compiled), a.warmup, a.repeat)
                        tc = None
                except Exception as exc:
                    print("%-11s %-12s %-7s | failed: %s" % (shape, recipe, mode, str(exc).splitlines()[0][:100]))
                    continue
                tt = torch_t.get(mode, torch_t["eager"])
                fmt = lambda s: "%9.3f" % (s * 1e3) if s else "%9s" % "-"  # noqa: E731
                print("%-11s %-12s %-7s | %s %s %s %s | %6s %9.2f" % (
                    shape, recipe, mode, fmt(tm), fmt(tc), "%9.3f" % gl if gl and mode == "eager" else "%9s" % "-",
                    fmt(tt), "%.2f" % (tm / tc) if tc else "-", tt / tm))
                sys.stdout.flush()
            if "eager" in a.mode_list:
                print("  (%s %s: %.1f library scratch allocations per module step, each a Python callback into "
                      "torch's caching allocator)" % (shape, recipe, allocs))
            c_close()
            del layer
        torch.cuda.empty_cache()
    return 0


# ---- CPU: the host overhead --------------------------------------------------------------------
def run_cpu(a):
    import torch
    from grouplin import _lib, _context
    from grouplin.torch import GroupedLinear
    torch.manual_seed(0)

    def median_us(fn, repeat=400, warmup=50):
        for _ in range(warmup):
            fn()
        ts = []
        for _ in range(repeat):
            t0 = time.perf_counter()
            fn()
            ts.append(time.perf_counter() - t0)
        return statistics.median(ts) * 1e6

    print("# host overhead, CPU backend, bf16, fused main_grad, no bias, is_first_microbatch=False: "
          "median us per forward + backward")
    print("%-16s %-8s %-9s | %8s %8s %8s | %10s" % ("experts x rows", "K=N", "weights", "module", "C API",
                                                     "floor", "mod-C-flr"))
    L = _lib.lib()
    ctx = _context.cpu()
    for e, t, k in ((8, 16, 64), (128, 1, 16)):
        rows = e * t
        x = torch.randn(rows, k, dtype=torch.bfloat16, requires_grad=True)
        dy = torch.randn(rows, k, dtype=torch.bfloat16)
        sp = torch.full((e,), t, dtype=torch.int64)
        # C API alone, the same calls
        w = torch.randn(e, k, k, dtype=torch.bfloat16)
        mg = torch.zeros(e, k, k)
        cfg = _lib.layer_config(num_experts=e, in_features=k, out_features=k, bias=0, fuse_wgrad_accumulation=1,
                                single_grouped_weight=1, path=_lib.PATH_GROUPED)
        cfg.params.weight_packed, cfg.params.main_grad_packed = w.data_ptr(), mg.data_ptr()
        h = C.c_void_p()
        _lib.check(L.gln_grouped_linear_create(ctx.handle, C.byref(cfg), C.byref(h)))
        y, dx = torch.empty(rows, k, dtype=torch.bfloat16), torch.empty(rows, k, dtype=torch.bfloat16)
        xt, yt = _lib.plain_tensor(_lib.BF16, rows, k, x.data_ptr()), _lib.plain_tensor(_lib.BF16, rows, k, y.data_ptr())
        dyt = _lib.plain_tensor(_lib.BF16, rows, k, dy.data_ptr())
        dxt = _lib.plain_tensor(_lib.BF16, rows, k, dx.data_ptr())
        args = _lib.ForwardArgs(C.sizeof(_lib.ForwardArgs), C.pointer(xt), sp.data_ptr(), 0, C.pointer(yt),
                                _lib.MICROBATCH_NEXT, 1)
        saved = C.c_void_p()
        fwd, bwd, rel = L.gln_grouped_linear_forward, L.gln_grouped_linear_backward, L.gln_grouped_linear_saved_release
        pa, ps, pdy, pdx = C.byref(args), C.byref(saved), C.byref(dyt), C.byref(dxt)

        def c_api():
            fwd(h, pa, ps)
            bwd(saved, pdy, pdx)
            rel(saved)
        tc = median_us(c_api)
        L.gln_grouped_linear_destroy(h)

        class Floor(torch.autograd.Function):
            @staticmethod
            def forward(ctx, x, w):
                return torch.zeros(x.shape[0], k, dtype=x.dtype)

            @staticmethod
            def backward(ctx, g):
                return torch.zeros(g.shape[0], k, dtype=g.dtype), None
        wp = torch.nn.Parameter(w.clone())
        tf = median_us(lambda: Floor.apply(x, wp).backward(dy))
        for single in (True, False):
            layer = GroupedLinear(e, k, k, bias=False, params_dtype=torch.bfloat16, device="cpu",
                                  fuse_wgrad_accumulation=True, single_grouped_weight=single)
            for p in layer.weights():
                p.main_grad = torch.zeros(p.shape, dtype=torch.float32)
            tm = median_us(lambda: layer(x, sp, is_first_microbatch=False).backward(dy))
            print("%-16s %-8d %-9s | %8.1f %8.1f %8.1f | %10.1f" % (
                "%d x %d" % (e, t), k, "packed" if single else "separate", tm, tc, tf, tm - tc - tf))
    return 0


def main(argv=None):
    a = parse_args(sys.argv[1:] if argv is None else argv)
    return run_cpu(a) if a.cpu else run_gpu(a)


if __name__ == "__main__":
    sys.exit(main())
