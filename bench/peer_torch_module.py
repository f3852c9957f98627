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
--warmup.  --splits KIND: the experts' row counts, one of bench_util.h's sets (default uniform,
every count a multiple of 16; router: the unaligned counts a router gives, the last quarter of
the experts empty), the same for all three steps and for gpu_layer.  Ratios: module / C API (1.00 = no overhead) and torch / module (> 1: faster).
Every measurement runs in its own try: a failure is printed and listed, the others still run,
and the summary (times, ratios, and each target of the module MET / MISSED / not measured:
eager within max(5 %, 30 us) of the C API, within 3 % under CUDA graphs, torch bf16 / module
>= 1.0 and >= 1.5 on the 128-expert shape) is printed whatever failed.  After a sticky CUDA
error (an illegal memory access) the rest is not measured.  --profile adds torch.profiler
tables (CPU and CUDA activity) of the module's eager steps.  Exit status 1 when anything failed.

--cpu: the host overhead on the CPU backend instead (no GPU needed): tiny shapes (8 experts x
16 rows, K = N = 64, and 128 x 1, K = N = 16), median microseconds per forward + backward of
the module, of the same C calls through ctypes, and of an autograd.Function that does nothing
but allocate y and dx (torch's own floor); --profile adds the torch.profiler table of the module.

usage: python bench/peer_torch_module.py [--shape NAME|all] [--recipe NAME,...] [--modes eager,graph]
           [--splits uniform|zipf|empty|router|random] [--warmup N] [--repeat N] [--cached-weights] [--gpu-layer PATH] [--profile] [--cpu]
needs: the grouplin package importable with a CUDA build of libgrouplin.so (GROUPLIN_LIBRARY),
torch with CUDA; exits 77 without a GPU (like bench/gpu_layer), 2 on a usage error."""
import argparse
import ctypes as C
import os
import statistics
import subprocess
import sys
import time

from peer_util import SPLIT_KINDS, make_splits, timed_cuda

SHAPES = {"mixtral-fc1": (8, 4096, 4096, 14336), "deepseek": (32, 512, 7168, 2048), "qwen3": (128, 128, 2048, 768)}
RECIPES = ["bf16", "fp8-current", "fp8-delayed", "mxfp8", "fp8-block"]
MODES = ["eager", "graph", "compile"]


def parse_args(argv):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--shape", default="all", help="one of %s, or all" % ", ".join(SHAPES))
    p.add_argument("--recipe", default="bf16,fp8-current", help="comma-separated, from %s" % ", ".join(RECIPES))
    p.add_argument("--modes", default="eager,graph", help="comma-separated, from %s" % ", ".join(MODES))
    p.add_argument("--splits", default="uniform", choices=SPLIT_KINDS, help="the experts' row counts (GPU)")
    p.add_argument("--warmup", type=int, default=10)
    p.add_argument("--repeat", type=int, default=30)
    p.add_argument("--cached-weights", action="store_true")
    p.add_argument("--gpu-layer", metavar="PATH", help="bench/gpu_layer binary: also print its time")
    p.add_argument("--cpu", action="store_true", help="host overhead on the CPU backend (no GPU)")
    p.add_argument("--profile", action="store_true",
                   help="also torch.profiler tables of the module's steps (CPU and CUDA activity)")
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


class CApiStep:
    """The C calls of gpu_layer's step through ctypes, on torch's current stream (so the
    events bracket them) with the library's own scratch pool.  It owns every buffer the C
    layer points at (its main_grad above all: the layer writes it in every backward, so a
    caller's temporary would be freed while the layer still writes it, and the empty_cache()
    that torch.cuda.graph runs before a capture would unmap it: an illegal memory access).
    Call close() before dropping it; the CUDA graphs that replay it must go first."""

    def __init__(self, torch, e, rows, k, n, recipe, cached, weight, x, dy, splits):
        from grouplin import _lib
        self.L = L = _lib.lib()
        self._lib = _lib
        self.torch = torch
        # the tensors whose addresses the C layer and the step keep
        self.keep = (weight, x, dy, splits)
        self.main_grad = torch.zeros(e * n * k, device="cuda", dtype=torch.float32)
        opts = _lib.ContextOptions()
        opts.size, opts.backend, opts.device = C.sizeof(opts), _lib.BACKEND_CUDA, torch.cuda.current_device()
        opts.stream = torch.cuda.current_stream().cuda_stream or 1       # 1: cudaStreamLegacy
        self.ctx = C.c_void_p()
        _lib.check(L.gln_context_create(C.byref(opts), C.byref(self.ctx)), "gln_context_create")
        self.stream = opts.stream
        code = {"bf16": _lib.RECIPE_NONE, "fp8-current": _lib.RECIPE_FP8_CURRENT,
                "fp8-delayed": _lib.RECIPE_FP8_DELAYED, "mxfp8": _lib.RECIPE_MXFP8,
                "fp8-block": _lib.RECIPE_FP8_BLOCK}[recipe]
        cfg = _lib.layer_config(num_experts=e, in_features=k, out_features=n, bias=0, recipe=code,
                                path=_lib.PATH_GROUPED, fuse_wgrad_accumulation=1, single_grouped_weight=1)
        cfg.params.weight_packed, cfg.params.main_grad_packed = weight.data_ptr(), self.main_grad.data_ptr()
        self.h = C.c_void_p()
        try:
            _lib.check(L.gln_grouped_linear_create(self.ctx, C.byref(cfg), C.byref(self.h)),
                       "gln_grouped_linear_create")
        except Exception:
            L.gln_context_destroy(self.ctx)
            raise
        self.xt = _lib.plain_tensor(_lib.BF16, rows, k, x.data_ptr())
        self.dyt = _lib.plain_tensor(_lib.BF16, rows, n, dy.data_ptr())
        self.rows, self.k, self.n = rows, k, n
        self.splits_ptr = splits.data_ptr()
        self.cached, self.first = cached, True

    def __call__(self):
        _lib, L = self._lib, self.L
        s = self.torch.cuda.current_stream().cuda_stream or 1      # follow a capture stream
        if s != self.stream:
            _lib.check(L.gln_context_set_stream(self.ctx, C.c_void_p(s)), "gln_context_set_stream")
            self.stream = s
        # y and dx allocated by the library (owned by the saved context, freed by its release)
        yt = _lib.plain_tensor(_lib.BF16, self.rows, self.n, None)
        dxt = _lib.plain_tensor(_lib.BF16, self.rows, self.k, None)
        mb = _lib.MICROBATCH_UNSET
        if self.cached:
            mb, self.first = (_lib.MICROBATCH_FIRST if self.first else _lib.MICROBATCH_NEXT), False
        args = _lib.ForwardArgs(C.sizeof(_lib.ForwardArgs), C.pointer(self.xt), self.splits_ptr, 1,
                                C.pointer(yt), mb, 1)
        saved = C.c_void_p()
        _lib.check(L.gln_grouped_linear_forward(self.h, C.byref(args), C.byref(saved)), "gln_grouped_linear_forward")
        try:
            _lib.check(L.gln_grouped_linear_backward(saved, C.byref(self.dyt), C.byref(dxt)),
                       "gln_grouped_linear_backward")
        finally:
            L.gln_grouped_linear_saved_release(saved)

    def close(self):
        if self.h:
            self.L.gln_grouped_linear_destroy(self.h)
            self.h = None
        if self.ctx:
            self.L.gln_context_destroy(self.ctx)
            self.ctx = None


def torch_step(torch, e, x, dy, splits, main_grad):
    """autograd over torch._grouped_mm plus the main_grad add (bench/peer_torch.py's layer)."""
    w = torch.randn(e, dy.shape[1], x.shape[1], device="cuda", dtype=torch.bfloat16).requires_grad_(True)
    xa = x.clone().requires_grad_(True)
    offs = torch.cumsum(splits, 0).to(torch.int32)
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
    """bench/gpu_layer's median ms for (shape, a.splits, recipe), or None."""
    cmd = [path, "--shape", shape, "--recipe", recipe, "--splits", a.splits, "--warmup", str(a.warmup),
           "--repeat", str(a.repeat)] + (["--cached-weights"] if a.cached_weights else [])
    try:
        out = subprocess.run(cmd, capture_output=True, text=True, timeout=600).stdout
    except (OSError, subprocess.TimeoutExpired) as exc:
        print("  gpu_layer: %s" % exc)
        return None
    for line in out.splitlines():
        f = line.split()
        if len(f) > 4 and f[0] == shape and f[1] == a.splits and f[2] == recipe and f[3] == "|":
            return float(f[4])
    return None


# ---- GPU ---------------------------------------------------------------------------------------
# The targets of the module (H200, one run): eager within 5 % or 30 us of the C API, whichever is
# larger; under CUDA graphs within 3 %; at least torch's _grouped_mm autograd in bf16 on every
# shape, 1.5x on the 128-expert shape.
EAGER_REL, EAGER_ABS, GRAPH_REL = 0.05, 30e-6, 0.03
TORCH_MIN, TORCH_MIN_MANY = 1.0, 1.5
MANY_EXPERTS = 128


def first_line(exc):
    return (str(exc).splitlines() or [type(exc).__name__])[0][:110]


def cuda_alive(torch):
    """False once the CUDA context is lost (a sticky error such as an illegal memory access:
    every later call fails, so the remaining measurements are skipped, the table still printed)."""
    try:
        torch.cuda.synchronize()
        return True
    except Exception:
        return False


def attempt(label, fn, log):
    """fn() or None; a failure is printed with its label and recorded in log."""
    try:
        return fn()
    except Exception as exc:
        log.append("%s: %s" % (label, first_line(exc)))
        print("  %s failed: %s" % (label, first_line(exc)))
        sys.stdout.flush()
        return None


def fmt_ms(t):
    return "%9.3f" % (t * 1e3) if t else "%9s" % "-"


def target_line(shape, recipe, mode, r):
    """The issue's targets for one row: a list of (what, ok) with ok None when not measured."""
    out = []
    tm, tc, tt = r.get("module"), r.get("capi"), r.get("torch")
    if mode == "eager":
        ok = None if not (tm and tc) else tm - tc <= max(EAGER_REL * tc, EAGER_ABS)
        out.append(("module <= C API + max(5%, 30 us)", ok))
    elif mode == "graph":
        ok = None if not (tm and tc) else tm <= (1 + GRAPH_REL) * tc
        out.append(("module <= C API + 3%", ok))
    if recipe == "bf16":
        need = TORCH_MIN_MANY if SHAPES[shape][0] >= MANY_EXPERTS else TORCH_MIN
        out.append(("torch/module >= %.1f" % need, None if not (tm and tt) else tt / tm >= need))
    return out


def print_summary(a, results, failures):
    print()
    print("# summary: ratios and the targets (module within max(5 %%, 30 us) of the C API eager, within 3 %% "
          "under CUDA graphs; torch bf16 / module >= 1.0, >= 1.5 with %d experts)" % MANY_EXPERTS)
    head = "%-11s %-12s %-7s | %9s %9s %9s %9s | %7s %9s %9s | %s" % (
        "shape", "recipe", "mode", "module", "C API", "gpu_layer", "torch", "mod/C", "mod-C us", "torch/mod", "targets")
    print(head)
    print("-" * len(head))
    met = missed = unknown = 0
    for shape in a.shapes:
        for recipe in a.recipes:
            for mode in a.mode_list:
                r = results.get((shape, recipe, mode), {})
                tm, tc, tt, gl = r.get("module"), r.get("capi"), r.get("torch"), r.get("gpu_layer")
                marks = []
                for what, ok in target_line(shape, recipe, mode, r):
                    marks.append("%s %s" % (what, {True: "MET", False: "MISSED", None: "not measured"}[ok]))
                    met, missed, unknown = met + (ok is True), missed + (ok is False), unknown + (ok is None)
                print("%-11s %-12s %-7s | %s %s %s %s | %7s %9s %9s | %s" % (
                    shape, recipe, mode, fmt_ms(tm), fmt_ms(tc), fmt_ms(gl), fmt_ms(tt),
                    "%.3f" % (tm / tc) if tm and tc else "-", "%.1f" % ((tm - tc) * 1e6) if tm and tc else "-",
                    "%.2f" % (tt / tm) if tm and tt else "-", "; ".join(marks) or "-"))
    print("# targets: %d met, %d missed, %d not measured" % (met, missed, unknown))
    if failures:
        print("# failures (%d):" % len(failures))
        for f in failures:
            print("#   " + f)


def measure_recipe(torch, a, shape, recipe, x, dy, splits, torch_t, results, failures, state):
    """Every mode of one (shape, recipe); each measurement in its own try."""
    e, t, k, n = SHAPES[shape]
    rows = e * t
    log = []
    made = attempt("%s %s: module layer" % (shape, recipe),
                   lambda: module_step(torch, e, rows, k, n, recipe, a.cached_weights, x, dy, splits), log)
    layer, m_step = made if made else (None, None)
    capi = attempt("%s %s: C API layer" % (shape, recipe),
                   lambda: CApiStep(torch, e, rows, k, n, recipe, a.cached_weights, layer.weight.detach()
                                    if layer is not None else torch.randn(e, n, k, device="cuda",
                                                                          dtype=torch.bfloat16),
                                    x, dy, splits), log)
    gl = gpu_layer_ms(a.gpu_layer, shape, recipe, a) if a.gpu_layer else None
    try:
        for mode in a.mode_list:
            r = results.setdefault((shape, recipe, mode), {})
            r["torch"] = torch_t.get(mode)
            if mode == "eager" and gl:
                r["gpu_layer"] = gl / 1e3
            tag = "%s %s %s" % (shape, recipe, mode)
            if not state["alive"]:
                break
            if mode == "eager":
                if m_step:
                    r["module"] = attempt(tag + " module", lambda: timed_cuda(m_step, a.warmup, a.repeat), log)
                    allocs = attempt(tag + " module allocations", lambda: scratch_allocs_per_step(torch, m_step), log)
                    if allocs is not None:
                        print("  (%s %s: %.1f library scratch allocations per module step, each a Python "
                              "callback into torch's caching allocator)" % (shape, recipe, allocs))
                if capi:
                    r["capi"] = attempt(tag + " C API", lambda: timed_cuda(capi, a.warmup, a.repeat), log)
            elif mode == "graph":
                if m_step:
                    r["module"] = attempt(tag + " module under a CUDA graph",
                                          lambda: timed_cuda(graphed(torch, m_step), a.warmup, a.repeat), log)
                if capi:
                    r["capi"] = attempt(tag + " C API under a CUDA graph",
                                        lambda: timed_cuda(graphed(torch, capi), a.warmup, a.repeat), log)
            elif m_step:
                def compiled_time():
                    torch._dynamo.reset()        # each layer is a recompile: stay under dynamo's limit
                    compiled = torch.compile(layer, mode="reduce-overhead", fullgraph=True)
                    return timed_cuda(lambda: m_step(compiled), a.warmup, a.repeat)
                r["module"] = attempt(tag + " module, torch.compile(reduce-overhead)", compiled_time, log)
            if log and not cuda_alive(torch):
                state["alive"] = False
                log.append("%s: the CUDA context is lost; the rest is not measured" % tag)
                print("  the CUDA context is lost (a sticky error): the rest is not measured")
            print("%-11s %-12s %-7s | module %s  C API %s  torch %s" % (
                shape, recipe, mode, fmt_ms(r.get("module")), fmt_ms(r.get("capi")), fmt_ms(r.get("torch"))))
            sys.stdout.flush()
    finally:
        failures.extend(log)
        if capi is not None and state["alive"]:
            capi.close()


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
    print("# ms per forward + backward (%s splits), median of CUDA events around one step" % a.splits)
    results, failures, state = {}, [], {"alive": True}
    try:
        for shape in a.shapes:
            if not state["alive"]:
                break
            e, t, k, n = SHAPES[shape]
            rows = e * t
            torch.manual_seed(0)
            x = torch.randn(rows, k, device="cuda", dtype=torch.bfloat16)
            dy = torch.randn(rows, n, device="cuda", dtype=torch.bfloat16)
            splits = torch.tensor(make_splits(a.splits, e, t), dtype=torch.int64, device="cuda")
            mg_torch = torch.zeros(e * n * k, device="cuda", dtype=torch.float32)
            log = []
            t_step = attempt("%s torch step" % shape, lambda: torch_step(torch, e, x, dy, splits, mg_torch), log)
            torch_t = {}
            if t_step:
                torch_t["eager"] = attempt("%s torch eager" % shape, lambda: timed_cuda(t_step, a.warmup, a.repeat),
                                           log)
                if "graph" in a.mode_list:
                    torch_t["graph"] = attempt("%s torch under a CUDA graph" % shape,
                                               lambda: timed_cuda(graphed(torch, t_step), a.warmup, a.repeat), log)
                torch_t["compile"] = torch_t.get("graph")   # torch's step in a graph: the fair peer
            failures.extend(log)
            if log and not cuda_alive(torch):
                state["alive"] = False
                break
            for recipe in a.recipes:
                if not state["alive"]:
                    break
                measure_recipe(torch, a, shape, recipe, x, dy, splits, torch_t, results, failures, state)
            del t_step
            if state["alive"]:
                torch.cuda.empty_cache()
    finally:
        print_summary(a, results, failures)
        if a.profile and state["alive"]:
            profile_module(torch, a)
    return 1 if failures else 0


def profile_module(torch, a):
    """torch.profiler (CPU and CUDA activity) over eager module steps: where the host time goes."""
    from torch.profiler import ProfilerActivity, profile
    for shape in a.shapes:
        e, t, k, n = SHAPES[shape]
        rows = e * t
        x = torch.randn(rows, k, device="cuda", dtype=torch.bfloat16)
        dy = torch.randn(rows, n, device="cuda", dtype=torch.bfloat16)
        splits = torch.tensor(make_splits(a.splits, e, t), dtype=torch.int64, device="cuda")
        for recipe in a.recipes:
            _, step = module_step(torch, e, rows, k, n, recipe, a.cached_weights, x, dy, splits)
            for _ in range(a.warmup):
                step()
            torch.cuda.synchronize()
            with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
                for _ in range(10):
                    step()
                torch.cuda.synchronize()
            print("\n# profile: %s %s, 10 eager module steps" % (shape, recipe))
            print(prof.key_averages().table(sort_by="self_cpu_time_total", row_limit=14))


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
    profiles = []
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
            if a.profile:
                profiles.append(("%d x %d, K = N = %d, %s weight" % (e, t, k, "packed" if single else "separate"),
                                 cpu_profile(torch, lambda: layer(x, sp, is_first_microbatch=False).backward(dy))))
    for what, table in profiles:
        print("\n# profile: %s, 200 module steps (torch.profiler, CPU activity)" % what)
        print(table)
    return 0


def cpu_profile(torch, step, steps=200):
    from torch.profiler import ProfilerActivity, profile
    with profile(activities=[ProfilerActivity.CPU]) as prof:
        for _ in range(steps):
            step()
    return prof.key_averages().table(sort_by="self_cpu_time_total", row_limit=10)


def main(argv=None):
    a = parse_args(sys.argv[1:] if argv is None else argv)
    return run_cpu(a) if a.cpu else run_gpu(a)


if __name__ == "__main__":
    sys.exit(main())
