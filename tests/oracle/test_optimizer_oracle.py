"""gln_optimizer_step against an independent numpy model of the documented formula
(include/grouplin.h, "Optimizer": TE FusedAdam's operation order in FP32, SGD as PyTorch's).
Usage: test_optimizer_oracle.py path/to/libgrouplin.so

Every comparison is bitwise: master, exp_avg, exp_avg_sq as FP32 bit patterns, the bf16 / fp16
working copy against numpy / ml_dtypes rounding of the new master.  NaN results (from a NaN
gradient) must be NaN at the same places.  Exits non-zero on any mismatch.
"""
import ctypes as C
import sys

import ml_dtypes
import numpy as np

FP32, BF16, FP16 = 0, 1, 2
ADAM, SGD = 0, 1
RNG = np.random.default_rng(20261205)
FAILS = []
CHECKED = [0]


class OptimizerConfig(C.Structure):
    _fields_ = [("size", C.c_size_t), ("kind", C.c_int), ("lr", C.c_float), ("beta1", C.c_float),
                ("beta2", C.c_float), ("eps", C.c_float), ("weight_decay", C.c_float),
                ("adam_w_mode", C.c_int), ("momentum", C.c_float),
                ("bias_corrections", C.c_void_p)]  # NULL: from `step`


def load(path):
    L = C.CDLL(path)
    L.gln_last_error.restype = C.c_char_p
    L.gln_context_create.argtypes = [C.c_void_p, C.POINTER(C.c_void_p)]
    L.gln_context_destroy.argtypes = [C.c_void_p]
    L.gln_optimizer_step.argtypes = [C.c_void_p, C.POINTER(OptimizerConfig), C.c_int64, C.c_void_p, C.c_void_p,
                                     C.c_void_p, C.c_void_p, C.c_int64, C.c_void_p, C.c_int]
    return L


def ptr(a):
    return None if a is None else a.ctypes.data_as(C.c_void_p)


def f32(x):
    return np.float32(x)


def model(cfg, step, w, g, m, v):
    """The formula of grouplin.h, one float32 numpy operation at a time (no contraction)."""
    w, g = w.copy(), g.copy()
    lr, wd = f32(cfg.lr), f32(cfg.weight_decay)
    if cfg.kind == ADAM:
        b1, b2, eps = f32(cfg.beta1), f32(cfg.beta2), f32(cfg.eps)
        bc1 = f32(1.0 - float(b1) ** step)  # double on the host, rounded once (TE's std::pow)
        bc2 = f32(1.0 - float(b2) ** step)
        if not cfg.adam_w_mode:
            g = g + wd * w
        m = b1 * m + (f32(1) - b1) * g
        v = b2 * v + ((f32(1) - b2) * g) * g
        denom = np.sqrt(v / bc2) + eps
        update = (m / bc1) / denom
        if cfg.adam_w_mode:
            update = update + wd * w
        return w - lr * update, m, v
    if cfg.weight_decay != 0:
        g = g + wd * w
    if cfg.momentum != 0:
        m = g.copy() if step == 1 else f32(cfg.momentum) * m + g
        g = m
    return w - lr * g, m, v


def expect_bits(what, got, want):
    got, want = np.asarray(got), np.asarray(want)
    CHECKED[0] += want.size
    gn = np.isnan(got.astype(np.float32)) if got.dtype != np.float32 else np.isnan(got)
    wn = np.isnan(want.astype(np.float32)) if want.dtype != np.float32 else np.isnan(want)
    if not np.array_equal(gn, wn):
        FAILS.append("%s: NaN at different places (%d vs %d)" % (what, gn.sum(), wn.sum()))
        return
    u = np.uint32 if got.dtype == np.float32 else np.uint16
    gb, wb = got.view(u)[~gn], want.view(u)[~wn]
    bad = np.flatnonzero(gb != wb)
    if bad.size:
        i = bad[0]
        FAILS.append("%s: %d of %d differ, first got %#x want %#x" % (what, bad.size, gb.size, gb[i], wb[i]))


def make_config(kind, lr, wd, w_mode=1, betas=(0.9, 0.999), eps=1e-8, momentum=0.0):
    return OptimizerConfig(C.sizeof(OptimizerConfig), kind, lr, betas[0], betas[1], eps, wd, w_mode, momentum)


def run_case(L, ctx, cfg, steps, n, name, nan_grad=False):
    w = RNG.standard_normal(n).astype(np.float32)
    m = np.zeros(n, np.float32)
    v = np.zeros(n, np.float32)
    if steps[0] > 1:  # moments as after many steps
        m = (RNG.standard_normal(n) * 1e-3).astype(np.float32)
        v = (RNG.random(n) * 1e-5).astype(np.float32)
    wm, mm, vm = w.copy(), m.copy(), v.copy()
    for step in steps:
        g = (RNG.standard_normal(n) * 10.0 ** RNG.integers(-6, 1, n)).astype(np.float32)
        if nan_grad:
            g[RNG.integers(0, n, 3)] = np.float32(np.nan)
        wk16 = np.zeros(n, np.uint16)
        st = L.gln_optimizer_step(ctx, C.byref(cfg), step, ptr(w), ptr(g), ptr(m), ptr(v), n, ptr(wk16),
                                  BF16 if step % 2 else FP16)
        if st != 0:
            FAILS.append("%s step %d: status %d (%s)" % (name, step, st, L.gln_last_error().decode()))
            return
        wm, mm, vm = model(cfg, step, wm, g, mm, vm)
        what = "%s step %d" % (name, step)
        expect_bits(what + " master", w, wm)
        if cfg.kind == ADAM or cfg.momentum != 0:
            expect_bits(what + " exp_avg", m, mm)
        if cfg.kind == ADAM:
            expect_bits(what + " exp_avg_sq", v, vm)
        if step % 2:
            expect_bits(what + " bf16 working", wk16.view(ml_dtypes.bfloat16), wm.astype(ml_dtypes.bfloat16))
        else:
            with np.errstate(over="ignore"):
                expect_bits(what + " fp16 working", wk16.view(np.float16), wm.astype(np.float16))


def main():
    L = load(sys.argv[1])
    ctx = C.c_void_p()
    if L.gln_context_create(None, C.byref(ctx)) != 0:
        print("cannot create a CPU context:", L.gln_last_error().decode())
        return 1
    np.seterr(all="ignore")
    cases = [
        ("adamw", make_config(ADAM, 1e-3, 0.0)),
        ("adamw wd", make_config(ADAM, 3e-3, 0.1)),
        ("adam l2", make_config(ADAM, 3e-3, 0.1, w_mode=0)),
        ("adam l2 wd 0", make_config(ADAM, 1e-2, 0.0, w_mode=0)),
        ("adamw betas", make_config(ADAM, 0.5, 0.01, betas=(0.8, 0.95), eps=1e-6)),
        ("sgd", make_config(SGD, 0.1, 0.0)),
        ("sgd wd", make_config(SGD, 0.1, 0.01)),
        ("sgd momentum", make_config(SGD, 0.1, 0.0, momentum=0.9)),
        ("sgd momentum wd", make_config(SGD, 0.05, 0.01, momentum=0.5)),
    ]
    for name, cfg in cases:
        for steps in ([1, 2, 3], [1000, 1001]):
            run_case(L, ctx, cfg, steps, 4099, name)
        run_case(L, ctx, cfg, [1, 2], 257, name + " NaN grad", nan_grad=True)
    L.gln_context_destroy(ctx)
    if FAILS:
        print("%d FAILURES:" % len(FAILS))
        for f in FAILS[:40]:
            print("  " + f)
        return 1
    print("all %d values match the numpy model" % CHECKED[0])
    return 0


if __name__ == "__main__":
    sys.exit(main())
