#!/usr/bin/env bash
# `grouplin train` under an address-space limit (ulimit -v).  OpenBLAS maps a
# GEMM buffer (128 MiB) per calling thread and used to retry that mapping forever when it did
# not fit, so the first sgemm hung.  A context now reserves those buffers when it is created:
#   - a limit with no room for one buffer: exit 1 at setup with the reason, never a hang;
#   - room for one buffer but --threads 2: exit 1 the same way ("1 of 2 buffers");
#   - enough room: the run completes under the limit, with 1 and with 2 threads.
# Limits are relative to the smallest one under which the program starts at all (its
# libraries' mappings: far more in a build linked with CUDA), found by bisection on
# `grouplin --version`.  Each run has a timeout, so a hang fails the test (exit 124) quickly.
# usage: bash test_memlimit.sh <grouplin> <mpiexec-or-empty> <scratch-dir>
set -u
G=$1
S=$3
rm -rf "$S"
mkdir -p "$S"
fails=0
fail() { echo "FAIL: $*"; fails=$((fails + 1)); }
# OpenBLAS's own worker threads (never used by grouplin) map their buffers when the library is
# loaded, before any grouplin code runs: the README's workaround, OPENBLAS_NUM_THREADS=1.
export OPENBLAS_NUM_THREADS=1
TINY="--steps 3 --tokens 64 --hidden 32 --ffn 32 --experts 4 --topk 2 --recipes bf16 --no-plot --quiet"
# GEMMs large enough to be split over 2 threads, so that both call sgemm at once.
MID="--steps 2 --tokens 1024 --hidden 128 --ffn 128 --experts 4 --topk 2 --recipes bf16 --no-plot --quiet"

starts() { sh -c 'ulimit -v "$1" && exec "$2" --version' sh "$1" "$G" >/dev/null 2>&1; }
lo=1024
hi=$((16 * 1024 * 1024))
if ! starts "$hi"; then
    echo "skipped: the program does not start under any address-space limit up to 16 GiB (a sanitizer build?)"
    exit 77
fi
while [ $((hi - lo)) -gt 1024 ]; do
    mid=$(((lo + hi) / 2))
    if starts "$mid"; then hi=$mid; else lo=$mid; fi
done
base=$hi
echo "the program starts under ulimit -v $base KiB"

# limited <name> <extra MiB over base> <args...>: grouplin train under the limit, 60 s at most.
limited() {
    local name=$1 kib=$((base + $2 * 1024))
    shift 2
    timeout 60 sh -c 'ulimit -v "$1" && shift && exec "$@"' sh "$kib" "$G" train "$@" \
        >"$S/$name.out" 2>"$S/$name.err"
}

# expect_oom <name> <extra MiB> <needle> <args...>
expect_oom() {
    local name=$1 extra=$2 needle=$3
    shift 3
    limited "$name" "$extra" "$@"
    local rc=$?
    if [ "$rc" -eq 124 ]; then fail "$name (+$extra MiB): hung (killed after 60 s)"; return; fi
    [ "$rc" -eq 1 ] || { fail "$name (+$extra MiB): exit $rc, expected 1"; cat "$S/$name.err"; return; }
    grep -qF "setup failed: out of memory: gln_context_create: out of address space for OpenBLAS's GEMM buffers: $needle" \
        "$S/$name.err" || { fail "$name (+$extra MiB): no reason with '$needle':"; cat "$S/$name.err"; return; }
    echo "ok: $name (+$extra MiB) -> 1 ($(cut -c1-150 "$S/$name.err"))"
}

# expect_run <name> <extra MiB> <args...>
expect_run() {
    local name=$1 extra=$2
    shift 2
    limited "$name" "$extra" "$@" --out "$S/$name"
    local rc=$?
    [ "$rc" -eq 0 ] || { fail "$name (+$extra MiB): exit $rc, expected 0"; cat "$S/$name.err"; return; }
    [ -s "$S/$name/loss.csv" ] || { fail "$name (+$extra MiB): no loss.csv"; return; }
    echo "ok: $name (+$extra MiB) -> 0"
}

expect_oom no_room 64 "0 of 1 buffers" $TINY --threads 1 --out "$S/a"
expect_oom one_of_two 200 "1 of 2 buffers" $MID --threads 2 --out "$S/b"
expect_run room_1 400 $TINY --threads 1
expect_run room_2 700 $MID --threads 2

[ "$fails" -eq 0 ] || { echo "$fails memory-limit checks failed"; exit 1; }
echo "memory-limit checks passed"
