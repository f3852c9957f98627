#!/usr/bin/env bash
# `grouplin train --backend cuda`: the language-model step wholly on the GPU.  Skips (77) where the
# program says the CUDA backend is not available (no CUDA build or no GPU), after checking that
# refusal is a usage error that names the option.
#   - usage: --path split, --graph without cuda or with --task teacher are refused (exit 2);
#   - every recipe learns in a short run (validation loss < ln 256 - 1 = 4.545 nats, as the CPU
#     test test_lm.sh asks) and the table says "cuda backend, grouped path";
#   - run to run the losses are bitwise identical (--dump-losses files equal), and replaying a
#     captured step (--graph) gives the same bits as running it eagerly; the expert group over
#     NCCL (the default where the library has it) and over the self communicator give the same
#     bits (world size 1: the collectives are copies either way);
#   - the CPU and the GPU agree on the same seed: fp32, first 10 training losses within 1e-3
#     relative (only summation orders and expf / log differ: ~1e-6 at step 0, growing with
#     training's chaos); bf16, the first loss (before any update) within 1e-2;
#   - the teacher task on the GPU (models on the device, data and loss on the host): with
#     --exact-data the first loss of fp32 and bf16 (same weights, same inputs) equals the CPU's
#     within 1e-4 relative (only the router's softmax differs: device expf), and the loss halves.
# usage: bash test_train_cuda.sh <grouplin> <mpiexec-or-empty> <scratch-dir>
set -u
G=$1
S=$3
rm -rf "$S"
mkdir -p "$S"
fails=0
fail() { echo "FAIL: $*"; fails=$((fails + 1)); }
SMALL="--steps 60 --tokens 256 --hidden 32 --ffn 64 --experts 4 --topk 2 --no-plot"

"$G" train --backend cuda --steps 2 --tokens 64 --hidden 32 --ffn 64 --experts 4 --no-plot --quiet \
    --out "$S/probe" >"$S/probe.out" 2>"$S/probe.err"
rc=$?
if [ "$rc" -eq 2 ] && grep -qF -- "--backend cuda is not available" "$S/probe.err"; then
    echo "skipped: $(head -1 "$S/probe.err")"
    exit 77
fi
[ "$rc" -eq 0 ] || { fail "probe run: exit $rc"; cat "$S/probe.err"; }

expect_usage() {
    local needle=$1
    shift
    "$G" train "$@" >"$S/u.out" 2>"$S/u.err"
    local rc=$?
    [ "$rc" -eq 2 ] || { fail "$*: exit $rc, expected 2"; return; }
    grep -qF -- "$needle" "$S/u.err" || { fail "$*: stderr lacks '$needle'"; cat "$S/u.err"; }
}
expect_usage "needs --path grouped" --backend cuda --path split
expect_usage "--graph captures the step of --task lm on one rank" --backend cuda --task teacher --graph
expect_usage "--graph needs --backend cuda" --graph
expect_usage "--comm needs --backend cuda" --comm self

# every recipe learns on the GPU
"$G" train --backend cuda $SMALL --recipes bf16,fp8-delayed,fp8-current,mxfp8,fp8-block --out "$S/a" \
    --dump-losses "$S/a.dump" >"$S/a.txt" 2>&1
rc=$?
cat "$S/a.txt"
[ "$rc" -eq 0 ] || fail "five recipes: exit $rc"
grep -q "cuda backend, grouped path" "$S/a.txt" || fail "header does not say cuda backend, grouped path"
awk '$1 ~ /^(bf16|fp8-delayed|fp8-current|mxfp8|fp8-block)$/ { rows++; if (!($4 < 4.545)) { print "FAIL: " $1 " val " $4; bad = 1 } }
     END { if (rows != 5) { print "FAIL: " rows + 0 " recipe rows"; bad = 1 } exit bad }' "$S/a.txt" ||
    fail "validation loss"

# run to run, and eager against a captured step
"$G" train --backend cuda $SMALL --recipes bf16,fp8-delayed,fp8-current,mxfp8,fp8-block --out "$S/b" --quiet \
    --dump-losses "$S/b.dump" || fail "second run failed"
cmp -s "$S/a.dump" "$S/b.dump" || { fail "two runs differ"; diff "$S/a.dump" "$S/b.dump" | head -5; }
"$G" train --backend cuda $SMALL --recipes bf16,fp8-delayed,fp8-current,mxfp8,fp8-block --out "$S/g" --quiet \
    --graph --dump-losses "$S/g.dump" || fail "--graph run failed"
cmp -s "$S/a.dump" "$S/g.dump" || { fail "--graph differs from eager"; diff "$S/a.dump" "$S/g.dump" | head -5; }
"$G" train --backend cuda $SMALL --recipes bf16,fp8-delayed,fp8-current,mxfp8,fp8-block --out "$S/s" --quiet \
    --comm self --graph --dump-losses "$S/s.dump" || fail "--comm self run failed"
cmp -s "$S/a.dump" "$S/s.dump" || { fail "--comm self differs from the default"; diff "$S/a.dump" "$S/s.dump" | head -5; }
grep -q "expert weights sharded" "$S/a.txt" || fail "header does not name the expert group's communicator"

# the CPU and the GPU on the same seed
TEN="--steps 10 --tokens 256 --hidden 32 --ffn 64 --experts 4 --topk 2 --no-plot --quiet --recipes fp32,bf16"
"$G" train $TEN --out "$S/c" --dump-losses "$S/cpu.dump" || fail "CPU run failed"
"$G" train $TEN --backend cuda --out "$S/d" --dump-losses "$S/gpu.dump" || fail "GPU run failed"
paste -d' ' "$S/cpu.dump" "$S/gpu.dump" | awk '
    { d = $4 - $8; if (d < 0) d = -d; r = d / $4
      if ($1 == "fp32" && r > 1e-3) { print "FAIL: fp32 step " $2 ": cpu " $4 " gpu " $8; bad = 1 }
      if ($1 == "bf16" && $2 == 0 && r > 1e-2) { print "FAIL: bf16 step 0: cpu " $4 " gpu " $8; bad = 1 }
      if ($1 == "fp32" && r > m) m = r }
    END { printf "cpu vs gpu, fp32: largest relative difference of 10 losses %.3g\n", m; exit bad }' ||
    fail "CPU and GPU disagree"

# the teacher task on the GPU against the CPU
EXACT="--task teacher --exact-data --tokens 64 --hidden 16 --ffn 32 --experts 4 --topk 2 --steps 20
       --recipes fp32,bf16 --no-plot --quiet"
"$G" train $EXACT --out "$S/tc" --dump-losses "$S/tcpu.dump" || fail "teacher, CPU run failed"
"$G" train $EXACT --backend cuda --out "$S/tg" --dump-losses "$S/tgpu.dump" || fail "teacher, GPU run failed"
paste -d' ' "$S/tcpu.dump" "$S/tgpu.dump" | awk '
    $2 == 0 { d = $4 - $8; if (d < 0) d = -d; if (!(d <= 1e-4 * $4)) { print "FAIL: teacher " $1 " step 0: cpu " $4 " gpu " $8; bad = 1 } }
    $1 == "bf16" && $2 == 0 { f = $8 }
    $1 == "bf16" && $2 == 19 { l = $8 }
    END { if (!(l < f / 2)) { print "FAIL: teacher on the GPU: bf16 loss did not halve (" f " -> " l ")"; bad = 1 }
          exit bad }' || fail "teacher on the GPU"

if [ "$fails" -ne 0 ]; then
    echo "$fails failure(s)"
    exit 1
fi
echo "ok"
