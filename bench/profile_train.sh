#!/usr/bin/env bash
# Where a training step's time goes: `grouplin train --backend cuda` on a preset under ncu
# (per-kernel GPU time), summarized by bench/ncu_kernels.py with the shares of the GEMMs,
# quantization, the optimizer and the MoE ops.  Run from a build directory on the GPU machine;
# the raw logs go to ./profile-train-<preset>-<M>-<recipe>.ncu.txt.  Two optimizer steps run (the
# first is the untimed warm-up of `grouplin train`, profiled all the same), so totals are per step
# with --per 2.  ncu serializes the kernels at base clocks: read the shares, not the sum.
#
#   bash ../bench/profile_train.sh "mixtral qwen3" "bf16 fp8-current" 4 [train options...]
set -u
presets=${1:-"mixtral"}
recipes=${2:-"bf16 fp8-current"}
micro=${3:-4}
shift 3 2>/dev/null || shift $#
here=$(cd "$(dirname "$0")" && pwd)
for p in $presets; do
  for r in $recipes; do
    log=profile-train-$p-$micro-$r.ncu.txt
    ncu --metrics gpu__time_duration.sum --print-summary per-kernel \
      tools/grouplin train --backend cuda --preset "$p" --microbatches "$micro" --steps 2 --recipes "$r" \
      --no-plot --quiet --out "profile-train-$p" "$@" >"$log" 2>&1
    echo "== $p, $micro microbatches, $r (ncu per-kernel; per optimizer step)"
    python3 "$here/ncu_kernels.py" "$log" --top 12 --per 2 --categories
  done
done
