#!/usr/bin/env bash
# The main job: install what is missing, build, and run `grouplin train` with its defaults
# (bf16, MXFP8 and FP8 current scaling on a byte-level language model over the texts under
# /usr/share/common-licenses; --task teacher for the synthetic teacher task).  Writes loss.csv and
# loss.png into out/.  Extra arguments go to `grouplin train`; set RANKS=2 (or 4) to run it
# under mpirun with the expert weights sharded across the ranks.  On a GPU machine (a CUDA build),
# `scripts/train.sh --backend cuda` runs the whole step on the GPU (add --graph to replay a
# captured step); bench/peer_torch_moe.py is the PyTorch peer of the same model.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${BUILD_DIR:-$root/build}
"$root/scripts/deps.sh" --no-python
# As scripts/test.sh: the CUDA backend only where a GPU is present (its CUTLASS kernels take most
# of an hour to compile on 2 cores and cannot run without one).
cuda=OFF
nvidia-smi -L >/dev/null 2>&1 && cuda=AUTO
cmake -S "$root" -B "$build" -DGLN_BUILD_TOOLS=ON -DGLN_CUDA=$cuda >/dev/null
cmake --build "$build" -j "$(nproc)" >/dev/null
mkdir -p "$root/out"
if [ "${RANKS:-1}" -gt 1 ]; then
  exec mpirun -np "$RANKS" --oversubscribe --allow-run-as-root --bind-to none \
    "$build/tools/grouplin" train --out "$root/out" "$@"
fi
exec "$build/tools/grouplin" train --out "$root/out" "$@"
