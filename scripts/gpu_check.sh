#!/usr/bin/env bash
# One call on a GPU machine: build the CUDA backend (CUTLASS included), run the GPU tests, then the
# GPU benchmarks named on the command line.  The logs are packed into $OUT/logs.tgz (or
# ./gpu-out/logs.tgz).  Not part of CI (CI has no GPU); used for the H200 runs recorded in
# bench/RESULTS.md.
#
#   scripts/gpu_check.sh [--tests REGEX] [--sanitize "[racecheck:]TEST [CASE...]"]... [--] [BENCH COMMAND ...]
#
# CUTLASS headers: $GLN_CUTLASS_DIR, else .cutlass/include (a copy of the nvidia-cutlass wheel's
# headers carried to the machine), else what CMake finds in .venv.  Each BENCH COMMAND is one
# string run from the build directory, e.g. "bench/gpu_layer --shape qwen3 --forward-only".
# GLN_CMAKE_ARGS: extra configure arguments, e.g. "-DGLN_BUILD_LAB=ON" for the kernel lab.
set -uo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
dest=${OUT:-$root/gpu-out}
build=$root/build-gpu
out=$build/logs
mkdir -p "$dest" "$out"
trap 'tar czf "$dest/logs.tgz" -C "$build" logs' EXIT
tests="cuda|capture|context_stream|fp8_state"
sanitize=()
while [ $# -gt 0 ]; do
  case "$1" in
    --tests) tests=$2; shift 2 ;;
    --sanitize) sanitize+=("$2"); shift 2 ;;
    --) shift; break ;;
    *) break ;;
  esac
done
cutlass=${GLN_CUTLASS_DIR:-}
[ -z "$cutlass" ] && [ -d "$root/.cutlass/include" ] && cutlass=$root/.cutlass/include
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm,power.limit --format=csv,noheader | tee "$out/gpu.txt"
t0=$(date +%s)
cmake -S "$root" -B "$build" -DGLN_CUDA=ON -DCMAKE_BUILD_TYPE=Release -DGLN_BUILD_TOOLS=ON \
      ${cutlass:+-DGLN_CUTLASS_DIR=$cutlass} ${GLN_CMAKE_ARGS:-} >"$out/configure.log" 2>&1 || { tail -30 "$out/configure.log"; exit 1; }
cmake --build "$build" -j "$(nproc)" >"$out/build.log" 2>&1 || { grep -n "error" "$out/build.log" | head -40; exit 1; }
echo "build: $(( $(date +%s) - t0 )) s; ptxas C7510 warnings: $(grep -c C7510 "$out/build.log")"
rc=0
if [ -n "$tests" ]; then
  OPENBLAS_NUM_THREADS=1 ctest --test-dir "$build" -R "$tests" --output-on-failure -j 4 --timeout 600 \
    >"$out/ctest.log" 2>&1 || rc=1
  grep -E "tests passed|Failed|\*\*\*|Passed|Skipped" "$out/ctest.log" | tail -40
fi
for t in "${sanitize[@]}"; do  # "TEST [CASE...]", optionally "racecheck:TEST [CASE...]"
  tool=memcheck
  case "$t" in racecheck:*) tool=racecheck; t=${t#racecheck:} ;; esac
  name=$(echo "$tool-$t" | tr -c 'A-Za-z0-9_.-' '_')
  echo "== compute-sanitizer $tool $t"
  # shellcheck disable=SC2086  # the test name and its case names are separate words
  compute-sanitizer --tool "$tool" --error-exitcode 3 $build/tests/$t >"$out/sanitize-$name.log" 2>&1 || rc=1
  tail -3 "$out/sanitize-$name.log"
done
cd "$build" || exit 1
for cmd in "$@"; do
  echo "== $cmd"
  name=$(echo "$cmd" | tr -c 'A-Za-z0-9_.-' '_' | cut -c1-60)
  bash -c "$cmd" 2>&1 | tee "$out/bench-$name.log"
done
exit $rc
