#!/usr/bin/env bash
# Where a layer step's time goes: one forward + backward of bench/gpu_layer per shape and recipe
# under ncu (per-kernel GPU time), summarized by bench/ncu_kernels.py.  Run from a build
# directory on the GPU machine; the raw logs go to ./profile-<shape>-<recipe>.ncu.txt.
#
#   sh ../bench/profile_layer.sh "qwen3 deepseek" "bf16 fp8-current" [gpu_layer options...]
set -u
shapes=${1:-"mixtral-fc1 deepseek qwen3"}
recipes=${2:-"bf16 fp8-current fp8-block"}
shift 2 2>/dev/null || shift $#
here=$(cd "$(dirname "$0")" && pwd)
for s in $shapes; do
  for r in $recipes; do
    log=profile-$s-$r.ncu.txt
    ncu --metrics gpu__time_duration.sum --print-summary per-kernel \
      bench/gpu_layer --shape "$s" --recipe "$r" --splits uniform --repeat 1 --warmup 1 "$@" >"$log" 2>&1
    echo "== $s $r (ncu per-kernel, one warm-up + one timed step: halve the calls)"
    python3 "$here/ncu_kernels.py" "$log" --top 12 --per 2
  done
done
