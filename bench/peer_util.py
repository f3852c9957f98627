"""Shared by the torch peers in bench/: the split sets of bench_util.h and the CUDA-event timer.

The scripts run as `python3 bench/<script>.py`, so this directory is on sys.path and they
import this module by its plain name.  torch is imported only where it is used: a script may
parse its arguments (and fail with 2) before torch loads."""
import statistics

SPLIT_KINDS = ["uniform", "zipf", "empty", "router", "random"]


def _zipf(e, live, rows, q):
    h = sum(1.0 / (i + 1) for i in range(live))
    return [int(rows / h / (i + 1)) // q * q if i < live else 0 for i in range(e)]


def _random_weights(e):
    """0.25 + 1.5·u for the first min(e, 4096) experts, u from bench_util.h's xorshift64."""
    mask, st, w = (1 << 64) - 1, 0x9E3779B97F4A7C15, []
    for _ in range(min(e, 4096)):
        st ^= (st << 13) & mask
        st ^= st >> 7
        st ^= (st << 17) & mask
        w.append(0.25 + 1.5 * (st >> 11) / 9007199254740992.0)
    return w


def make_splits(kind, e, tokens):
    """bench_make_splits of bench_util.h, the same numbers (rows per expert, summing to e·tokens)."""
    rows = e * tokens
    live = e - e // 4 if e > 4 else e
    if kind in ("zipf", "router"):
        s = _zipf(e, live, rows, 16 if kind == "zipf" else 1)
        if kind == "router":           # the remainder one row at a time to experts 1..live-1, then 0
            used, i = sum(s), 1
            while used < rows:
                s[i % live], used, i = s[i % live] + 1, used + 1, i % live + 1
    elif kind == "empty":
        on = e - e // 4 if e >= 4 else e
        s = [0 if (e >= 4 and i % 4 == 3) else rows // on // 16 * 16 for i in range(e)]
        left, i = rows - on * (rows // on // 16 * 16), 0
        while left >= 16 and rows // on >= 16:     # the remainder 16 rows at a time
            if s[i]:
                s[i], left = s[i] + 16, left - 16
            i = (i + 1) % e
    elif kind == "random":
        w = _random_weights(e)
        wsum = sum(w)
        s = [int(rows * w[i] / wsum) if i < len(w) else 0 for i in range(e)]
    else:
        s = [tokens] * e
    s[0] += rows - sum(s)
    return s


def timed_cuda(fn, warmup, repeat):
    """Median seconds of fn() between two CUDA events, the device idle at the start of each."""
    import torch
    for _ in range(warmup):
        fn()
    torch.cuda.synchronize()
    times = []
    for _ in range(repeat):
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        fn()
        b.record()
        torch.cuda.synchronize()
        times.append(a.elapsed_time(b) / 1e3)
    return statistics.median(times)
