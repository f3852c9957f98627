#!/usr/bin/env bash
# `mpirun -np N grouplin train --backend cuda --comm mpi`: several ranks, every one its own CUDA
# context on device 0 (one GPU shared), the expert weights' group over MPI on device memory.
#   - usage (no GPU needed): several ranks on --backend cuda without --comm mpi, and --graph on
#     several ranks, are refused on every rank (exit 2, the message names the option);
#   - then skips (77) where one rank says the CUDA backend is not available, or without mpiexec;
#   - teacher task, --exact-data (every GEMM reduction exact: tools/exact.h): the loss curves of
#     fp32 and bf16 at 2 and 4 ranks are BITWISE those of one rank (--dump-losses files equal), and
#     one rank with --comm mpi (the self communicator then) equals one rank's default;
#   - lm task (fp32, bf16, 10 steps): 2 ranks against one rank.  Each step's loss is summed in
#     global token order on both, so only the per-token losses can differ: at step 0 (same weights)
#     only through GEMM kernel choices for other row counts (within 1e-5 relative), later also
#     through the per-rank wgrad sums (reduce-scattered instead of one sum over all tokens) that
#     training amplifies: fp32 within 1e-3 relative, bf16 within 1e-2 (a master weight a few ulps
#     off can round to the neighbouring bf16 working value); the validation losses (fp32) within
#     1e-3 nats.  A wrong rank offset (both ranks on the same windows) or a lost shard moves step
#     0 by far more than 1e-5;
#   - every recipe learns at 2 ranks (validation loss < ln 256 - 1 = 4.545 nats, as test_lm.sh)
#     and the header says "2 ranks, cuda backend" and names the MPI transport.
# usage: bash test_train_cuda_mpi.sh <grouplin> <mpiexec-or-empty> <scratch-dir>
set -u
G=$1
MPIEXEC=$2
S=$3
rm -rf "$S"
mkdir -p "$S"
fails=0
fail() { echo "FAIL: $*"; fails=$((fails + 1)); }

if [ -z "$MPIEXEC" ]; then
    echo "skipped: no mpiexec (the library was built without MPI)"
    exit 77
fi
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OPENBLAS_NUM_THREADS=1
mpi() {
    local np=$1
    shift
    timeout 300 "$MPIEXEC" -np "$np" --oversubscribe --allow-run-as-root --bind-to none "$G" train "$@"
}

expect_usage() {
    local needle=$1
    shift
    mpi 2 "$@" >"$S/u.out" 2>"$S/u.err"
    local rc=$?
    [ "$rc" -eq 2 ] || { fail "-np 2 $*: exit $rc, expected 2"; cat "$S/u.err"; return; }
    grep -qF -- "$needle" "$S/u.err" || { fail "-np 2 $*: stderr lacks '$needle'"; cat "$S/u.err"; }
}
expect_usage "several ranks on --backend cuda need --comm mpi" --backend cuda --steps 1 --no-plot --out "$S/u"
expect_usage "several ranks on --backend cuda need --comm mpi" --backend cuda --comm self --steps 1 --no-plot \
    --out "$S/u"
expect_usage "--graph captures the step of --task lm on one rank" --backend cuda --comm mpi --graph --steps 1 \
    --no-plot --out "$S/u"

"$G" train --backend cuda --steps 2 --tokens 64 --hidden 32 --ffn 64 --experts 4 --no-plot --quiet \
    --out "$S/probe" >"$S/probe.out" 2>"$S/probe.err"
rc=$?
if [ "$rc" -eq 2 ] && grep -qF -- "--backend cuda is not available" "$S/probe.err"; then
    [ "$fails" -eq 0 ] || { echo "$fails failure(s)"; exit 1; }
    echo "skipped: $(head -1 "$S/probe.err")"
    exit 77
fi
[ "$rc" -eq 0 ] || { fail "probe run: exit $rc"; cat "$S/probe.err"; }

# teacher, --exact-data: bitwise at 1, 2 and 4 ranks
EXACT="--task teacher --exact-data --tokens 64 --hidden 16 --ffn 32 --experts 4 --topk 2 --steps 20
       --recipes fp32,bf16 --no-plot --backend cuda"
"$G" train $EXACT --quiet --out "$S/e1" --dump-losses "$S/exact1.dump" || fail "teacher, one rank"
"$G" train $EXACT --quiet --comm mpi --out "$S/e1m" --dump-losses "$S/exact1m.dump" || fail "teacher, one rank, --comm mpi"
cmp -s "$S/exact1.dump" "$S/exact1m.dump" || fail "one rank: --comm mpi differs from the default"
[ "$(wc -l <"$S/exact1.dump" 2>/dev/null)" = 40 ] || fail "teacher dump does not have 40 lines"
first=$(awk '$1 == "bf16" && $2 == 0 { print $4 }' "$S/exact1.dump")
last=$(awk '$1 == "bf16" && $2 == 19 { print $4 }' "$S/exact1.dump")
awk -v f="$first" -v l="$last" 'BEGIN { exit !(l < f / 2) }' || fail "exact-data loss did not halve ($first -> $last)"
for np in 2 4; do
    mpi "$np" $EXACT --comm mpi --out "$S/e$np" --dump-losses "$S/exact$np.dump" >"$S/e$np.txt" 2>&1
    rc=$?
    cat "$S/e$np.txt"
    [ "$rc" -eq 0 ] || { fail "teacher, -np $np: exit $rc"; continue; }
    grep -q "$np ranks, cuda backend, grouped path, exact data, expert weights sharded over MPI on device memory" \
        "$S/e$np.txt" || fail "-np $np: the header does not say $np ranks, cuda backend, MPI"
    if cmp -s "$S/exact1.dump" "$S/exact$np.dump"; then
        echo "ok: -np $np --exact-data loss curve on the GPU is bitwise that of one rank"
    else
        fail "-np $np --exact-data differs from one rank"
        diff "$S/exact1.dump" "$S/exact$np.dump" | head -6
    fi
done

# lm: 2 ranks against one rank
TEN="--steps 10 --tokens 256 --hidden 32 --ffn 64 --experts 4 --topk 2 --no-plot --recipes fp32,bf16 --backend cuda"
"$G" train $TEN --out "$S/l1" --dump-losses "$S/lm1.dump" >"$S/lm1.txt" 2>&1 || fail "lm, one rank"
mpi 2 $TEN --comm mpi --out "$S/l2" --dump-losses "$S/lm2.dump" >"$S/lm2.txt" 2>&1 || fail "lm, -np 2"
cat "$S/lm2.txt"
[ "$(wc -l <"$S/lm2.dump" 2>/dev/null)" = 20 ] || fail "lm dump at -np 2 does not have 20 lines"
paste -d' ' "$S/lm1.dump" "$S/lm2.dump" | awk '
    { d = $4 - $8; if (d < 0) d = -d; r = d / $4
      tol = $2 == 0 ? 1e-5 : ($1 == "fp32" ? 1e-3 : 1e-2)
      if (!(r <= tol)) { print "FAIL: " $1 " step " $2 ": one rank " $4 ", two ranks " $8; bad = 1 }
      if ($2 == 0 && r > m0) m0 = r
      if (r > m[$1]) m[$1] = r }
    END { printf "lm, -np 2 vs one rank, largest relative difference: step 0 %.3g, fp32 %.3g, bf16 %.3g\n",
                 m0, m["fp32"], m["bf16"]; exit bad }' || fail "lm losses at -np 2 differ from one rank"
v1=$(awk '$1 == "fp32" { print $4 }' "$S/lm1.txt")
v2=$(awk '$1 == "fp32" { print $4 }' "$S/lm2.txt")
awk -v a="$v1" -v b="$v2" 'BEGIN { d = a - b; if (d < 0) d = -d; exit !(a != "" && d <= 1e-3) }' ||
    fail "fp32 validation loss: one rank $v1, two ranks $v2"

# every recipe learns at 2 ranks
SMALL="--steps 60 --tokens 256 --hidden 32 --ffn 64 --experts 4 --topk 2 --no-plot --backend cuda --comm mpi"
mpi 2 $SMALL --recipes bf16,fp8-delayed,fp8-current,mxfp8,fp8-block --out "$S/a" >"$S/a.txt" 2>&1
rc=$?
cat "$S/a.txt"
[ "$rc" -eq 0 ] || fail "five recipes at -np 2: exit $rc"
grep -q "2 ranks, cuda backend, grouped path, expert weights sharded over MPI on device memory" "$S/a.txt" ||
    fail "the header does not say 2 ranks, cuda backend, MPI"
awk '$1 ~ /^(bf16|fp8-delayed|fp8-current|mxfp8|fp8-block)$/ { rows++; if (!($4 < 4.545)) { print "FAIL: " $1 " val " $4; bad = 1 } }
     END { if (rows != 5) { print "FAIL: " rows + 0 " recipe rows"; bad = 1 } exit bad }' "$S/a.txt" ||
    fail "validation loss at -np 2"

if [ "$fails" -ne 0 ]; then
    echo "$fails failure(s)"
    exit 1
fi
echo "ok"
