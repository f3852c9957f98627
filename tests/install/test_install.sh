#!/usr/bin/env bash
# Install the built tree into a scratch prefix, then build a consumer against it twice:
# with CMake's find_package(grouplin) and with pkg-config.
# Usage: test_install.sh <build-dir> <scratch-dir>
set -euo pipefail
build=$1 scratch=$2
here=$(cd "$(dirname "$0")" && pwd)
rm -rf "$scratch" && mkdir -p "$scratch"
cmake --install "$build" --prefix "$scratch/prefix" >/dev/null

cmake -S "$here" -B "$scratch/cmake" -DCMAKE_PREFIX_PATH="$scratch/prefix" >/dev/null
cmake --build "$scratch/cmake" >/dev/null
LD_LIBRARY_PATH="$scratch/prefix/lib:$scratch/prefix/lib64:${LD_LIBRARY_PATH:-}" "$scratch/cmake/consumer"

pc_dir=$(dirname "$(find "$scratch/prefix" -name grouplin.pc | head -n 1)")
flags=$(PKG_CONFIG_PATH="$pc_dir" pkg-config --cflags --libs grouplin)
cc "$here/consumer.c" $flags -o "$scratch/consumer-pc"
LD_LIBRARY_PATH="$scratch/prefix/lib:$scratch/prefix/lib64:${LD_LIBRARY_PATH:-}" "$scratch/consumer-pc"
echo "find_package and pkg-config consumers both work"
