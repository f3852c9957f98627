#!/usr/bin/env bash
# Before / after in one run on a GPU machine: builds a second source tree (an earlier commit, as a
# `git archive` tarball) beside this checkout's build, then runs the same benchmark commands on
# both builds, alternating A B A B so that clock and power drift fall on both alike.  Prints each
# command's output under "== before" / "== after" headings; logs packed into $OUT/compare.tgz (or
# ./gpu-out).
#
#   bench/compare_builds.sh BEFORE.tgz "bench/gpu_quantize" "bench/gpu_layer --quick" ...
#
# BEFORE.tgz: `git archive <commit> | gzip > BEFORE.tgz`, made where the history is.  The after
# build is this checkout's build-gpu/ (scripts/gpu_check.sh), built first if missing.  CUTLASS
# headers: as scripts/gpu_check.sh (.cutlass/include or $GLN_CUTLASS_DIR).  Two rounds by default
# (ROUNDS=N).
set -uo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
[ $# -ge 2 ] || { sed -n 2,12p "$0"; exit 2; }
tgz=$1
shift
dest=${OUT:-$root/gpu-out}
logs=$(mktemp -d)
mkdir -p "$dest"
trap 'tar czf "$dest/compare.tgz" -C "$logs" .' EXIT
cutlass=${GLN_CUTLASS_DIR:-}
[ -z "$cutlass" ] && [ -d "$root/.cutlass/include" ] && cutlass=$root/.cutlass/include
before=/tmp/gln-before
if [ ! -x "$before/build/bench/gpu_layer" ]; then
  rm -rf "$before" && mkdir -p "$before/src" && tar xzf "$tgz" -C "$before/src" || exit 1
  t0=$(date +%s)
  cmake -S "$before/src" -B "$before/build" -DGLN_CUDA=ON -DCMAKE_BUILD_TYPE=Release -DGLN_BUILD_TESTS=OFF \
        ${cutlass:+-DGLN_CUTLASS_DIR=$cutlass} >"$logs/before-configure.log" 2>&1 || exit 1
  cmake --build "$before/build" -j "$(nproc)" >"$logs/before-build.log" 2>&1 ||
    { grep -n error "$logs/before-build.log" | head -20; exit 1; }
  echo "before: built in $(( $(date +%s) - t0 )) s"
fi
after=$root/build-gpu
if [ ! -x "$after/bench/gpu_layer" ]; then
  "$root/scripts/gpu_check.sh" --tests "" || exit 1
fi
for round in $(seq "${ROUNDS:-2}"); do
  for cmd in "$@"; do
    for side in before after; do
      dir=$before/build
      [ "$side" = after ] && dir=$after
      echo "== $side (round $round): $cmd"
      name=$(echo "$side-$round-$cmd" | tr -c 'A-Za-z0-9_.-' '_' | cut -c1-80)
      (cd "$dir" && bash -c "$cmd") 2>&1 | tee "$logs/$name.log"
    done
  done
done
