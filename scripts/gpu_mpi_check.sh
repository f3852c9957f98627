#!/usr/bin/env bash
# The multi-rank GPU tests on one GPU: the CUDA backend's sharded group and layer over the MPI
# communicator on device memory, every rank its own CUDA context on device 0 (docs/distributed.md,
# "MPI with device memory").  Builds like scripts/gpu_check.sh (same build directory; no tests run
# there), then runs mpi_cuda_sharded_layer under `mpirun -np N` for N = 2, 3, 4 and once at 2 ranks
# under compute-sanitizer (memcheck, every rank), plus the CPU-side MPI tests (ctest -L mpi) and the
# main job over MPI ranks on the GPU (cli_test_train_cuda_mpi: `mpirun -np 2|4 grouplin train
# --backend cuda --comm mpi` against one rank, the teacher task's --exact-data bitwise).
# Logs in $OUT/logs.tgz (or ./gpu-out/logs.tgz), as gpu_check.sh.
#
#   scripts/gpu_mpi_check.sh [--ranks "2 3 4"] [--no-sanitize] [CASE]
#
# CASE filters the test's cases by name (e.g. test_layer_grouped).  The GPU must let several
# processes share it (compute mode Default); the ranks are oversubscribed and not bound.
set -uo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
ranks="2 3 4"
sanitize=1
while [ $# -gt 0 ]; do
  case "$1" in
    --ranks) ranks=$2; shift 2 ;;
    --no-sanitize) sanitize=0; shift ;;
    *) break ;;
  esac
done
filter=${1:-}
"$root/scripts/gpu_check.sh" --tests "" || exit 1
build=$root/build-gpu
out=$build/logs
trap 'tar czf "${OUT:-$root/gpu-out}/logs.tgz" -C "$build" logs' EXIT
exe=$build/tests/mpi_cuda_sharded_layer
[ -x "$exe" ] || { echo "mpi_cuda_sharded_layer was not built (CUDA and MPI both needed)"; exit 1; }
mpirun_=(mpirun --oversubscribe --allow-run-as-root --bind-to none)
export OPENBLAS_NUM_THREADS=1 OMPI_MCA_rmaps_base_oversubscribe=1
nvidia-smi --query-gpu=compute_mode --format=csv,noheader | tee -a "$out/gpu.txt"
rc=0
for n in $ranks; do
  echo "== mpirun -np $n mpi_cuda_sharded_layer $filter"
  t0=$(date +%s)
  timeout 900 "${mpirun_[@]}" -np "$n" "$exe" $filter >"$out/mpi-gpu-np$n.log" 2>&1
  s=$?
  tail -12 "$out/mpi-gpu-np$n.log"
  echo "np $n: exit $s, $(( $(date +%s) - t0 )) s"
  [ $s -eq 0 ] || rc=1
done
if [ $sanitize -eq 1 ]; then
  echo "== compute-sanitizer (memcheck) on every rank, mpirun -np 2"
  timeout 1800 "${mpirun_[@]}" -np 2 compute-sanitizer --tool memcheck --error-exitcode 3 \
    "$exe" $filter >"$out/mpi-gpu-sanitize-np2.log" 2>&1 || rc=1
  grep -E "ERROR SUMMARY|cases on|FAILED" "$out/mpi-gpu-sanitize-np2.log" | tail -8
fi
echo "== the CPU-side MPI tests (ctest -L mpi)"
ctest --test-dir "$build" -L '^mpi$' --output-on-failure -j 4 >"$out/mpi-ctest.log" 2>&1 || rc=1
grep -E "tests passed|Failed|\*\*\*" "$out/mpi-ctest.log" | tail -10
echo "== grouplin train --backend cuda --comm mpi over 2 and 4 ranks (ctest cli_test_train_cuda_mpi)"
ctest --test-dir "$build" -R '^cli_test_train_cuda_mpi$' -V >"$out/mpi-train.log" 2>&1 || rc=1
grep -qE "Not Run|Skipped" "$out/mpi-train.log" && { echo "cli_test_train_cuda_mpi was skipped (no GPU or no MPI?)"; rc=1; }
grep -E "ok: |FAIL|largest relative|tests passed|Failed" "$out/mpi-train.log" | tail -12
exit $rc
