# Setup shared by the tests/cli/test_*.sh scripts; each sources it right after `set -u`:
#     . "$(dirname "$0")/lib.sh"
# It reads the script's arguments (<grouplin> <mpiexec-or-empty> <scratch-dir>, as
# tests/CMakeLists.txt passes them) into G, MPIEXEC and S, starts from an empty scratch directory
# (no file of an earlier run can make a check pass), and counts failures in `fails`.
G=$1
MPIEXEC=$2
S=$3
rm -rf "$S"
mkdir -p "$S"
fails=0
fail() { echo "FAIL: $*"; fails=$((fails + 1)); }

# mpi_launch <seconds> <mpiexec arguments...>: $MPIEXEC as these tests need it on a CI machine or
# in a container (run as root, more ranks than cores, no pinning of ranks to cores), killed after
# <seconds> so that a hang fails the test instead of stalling it.
mpi_launch() {
    local seconds=$1
    shift
    timeout "$seconds" "$MPIEXEC" --oversubscribe --allow-run-as-root --bind-to none "$@"
}

# maxrel <dump a> <dump b>: the largest relative difference of the decimal loss column of two
# --dump-losses files (same recipes and steps, same order).
maxrel() {
    paste -d' ' "$1" "$2" | awk '{ d = $4 - $8; if (d < 0) d = -d; r = d / ($4 < 0 ? -$4 : $4);
                                   if (r > m) m = r } END { printf "%.3g\n", m + 0 }'
}
