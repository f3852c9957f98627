#!/bin/sh
# The grouped-GEMM benchmark table (docs/performance.md) in one go on the GPU machine: the torch peers (peer_torch.py, which
# writes their timings to a file), then the grouped GEMM stages (gpu_grouped_gemm) and the layer
# step per recipe (gpu_layer), both with the ratio to torch read from that file.  The full table
# (4 shapes × uniform / zipf / empty splits) takes under 4 minutes on an H200; --quick (uniform
# splits, fewer samples) about one.
# usage: bench/grouped_table.sh BUILD_DIR [--quick]
set -e
build=${1:?usage: $0 BUILD_DIR [--quick]}
quick=${2:-}
here=$(dirname "$0")
peer="$build/peer_torch.txt"
python3 "$here/peer_torch.py" --out "$peer" $quick
"$build/bench/gpu_grouped_gemm" --peer "$peer" $quick
"$build/bench/gpu_layer" --peer "$peer" $quick
