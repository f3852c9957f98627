#!/usr/bin/env bash
# Install the built tree into a scratch prefix, then build a consumer against it three ways:
# with CMake's find_package(grouplin), with pkg-config, and statically with pkg-config --static.
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

# Static: libgrouplin.a plus exactly what Libs.private lists (pkg-config --static); the program
# must not depend on the shared libgrouplin.
flags=$(PKG_CONFIG_PATH="$pc_dir" pkg-config --cflags --static --libs grouplin)
cc "$here/consumer.c" ${flags/-lgrouplin/-l:libgrouplin.a} -o "$scratch/consumer-static"
if readelf -d "$scratch/consumer-static" | grep -q 'libgrouplin\.so'; then
    echo "consumer-static links the shared libgrouplin" >&2
    exit 1
fi
"$scratch/consumer-static"
echo "find_package, pkg-config and static pkg-config consumers all work"
