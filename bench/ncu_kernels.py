#!/usr/bin/env python3
"""Per-kernel time table from an `ncu --metrics gpu__time_duration.sum --print-summary per-kernel` log.

The evidence behind the stage breakdowns in bench/RESULTS.md: which kernels a layer step or a
training step spends its time in.  ncu serializes the kernels and (by default) runs the SMs at
the base clock, so the sum is larger than the step's wall time; the shares are what to read.

usage: ncu_kernels.py LOG [--top N] [--per N] [--categories]
  --per N        divide totals by N, e.g. the step count
  --categories   also the shares of GEMMs, quantization, the optimizer, MoE ops, communication
                 and the rest (the training step's profile), by kernel name
"""
import re
import sys


def short_name(name):
    """A readable kernel name: CUTLASS kernels by schedule and grid, others without arguments."""
    grid = re.search(r"\((\d+, \d+, \d+)\)x\((\d+, \d+, \d+)\)", name)
    where = f" [{grid.group(1)}]x[{grid.group(2)}]" if grid else ""
    if "cutlass" in name:
        kind = "blockwise" if "Blockwise" in name else "pingpong" if "Pingpong" in name else "cooperative"
        types = re.findall(r"cutlass::(float_e4m3_t|float_e5m2_t|bfloat16_t|half_t)", name)
        dtype = types[0].replace("float_", "").replace("_t", "") if types else ""
        return f"cutlass {kind} GEMM {dtype}{where}"
    base = re.sub(r"\(.*", "", name).strip()
    tmpl = re.search(r"<[^()]*>", base)
    base = re.sub(r"<.*>", "", base).replace("void ", "")
    return f"{base}{tmpl.group(0) if tmpl else ''}{where}"[:100]


# First match wins; the names are those of src/backend/cuda, tools/*.cu, CUTLASS, cuBLASLt, NCCL.
CATEGORIES = [
    ("GEMM", r"cutlass|gemm|cublas|xmma|nvjet|sm90_|blockwise_repack"),
    ("optimizer", r"optimizer|adam|clock_kernel|exact_round"),
    ("quantize", r"quant|tq_|mxq|bq_|amax|scales_from|dequant|fp8_state|transpose|dbias|cast"),
    ("MoE ops", r"moe_|router|permute|act_(fwd|bwd)|swiglu|gelu"),
    ("communication", r"nccl"),
]


def category(name):
    for label, pattern in CATEGORIES:
        if re.search(pattern, name, re.IGNORECASE):
            return label
    return "other"


def parse(path):
    lines = open(path, errors="replace").read().split("\n")
    rows = []
    for i, line in enumerate(lines):
        m = re.match(r"  (\S.*), Device \d+, CC [\d.]+, Invocations (\d+)$", line)
        if not m:
            continue
        for j in range(i + 1, min(i + 10, len(lines))):
            t = re.match(r"\s+gpu__time_duration.sum\s+(\S+)\s+\S+\s+\S+\s+(\S+)", lines[j])
            if t:
                scale = {"ms": 1000.0, "us": 1.0, "ns": 0.001, "s": 1e6}[t.group(1)]
                avg = float(t.group(2).replace(",", "")) * scale
                n = int(m.group(2))
                rows.append((n * avg, n, avg, short_name(m.group(1)), category(m.group(1))))
                break
    return sorted(rows, reverse=True)


def main():
    args = sys.argv[1:]
    if not args:
        print(__doc__)
        return 2
    top, per = 30, 1.0
    if "--top" in args:
        top = int(args[args.index("--top") + 1])
    if "--per" in args:
        per = float(args[args.index("--per") + 1])
    rows = parse(args[0])
    total = sum(r[0] for r in rows)
    if not rows:
        print(f"{args[0]}: no per-kernel summary found")
        return 1
    print(f"{'total us':>10} {'share':>6} {'calls':>6} {'avg us':>9}  kernel   (sum {total / per:.0f} us"
          f"{' per step' if per != 1.0 else ''})")
    for tot, n, avg, name, _ in rows[:top]:
        print(f"{tot / per:10.1f} {100 * tot / total:5.1f}% {n / per:6.1f} {avg:9.1f}  {name}")
    if "--categories" in args:
        shares = {}
        for tot, _, _, _, cat in rows:
            shares[cat] = shares.get(cat, 0.0) + tot
        print(f"{'total us':>10} {'share':>6}  category")
        for cat, tot in sorted(shares.items(), key=lambda kv: -kv[1]):
            print(f"{tot / per:10.1f} {100 * tot / total:5.1f}%  {cat}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
