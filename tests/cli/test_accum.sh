#!/usr/bin/env bash
# Gradient accumulation (--microbatches M) and the model presets of `grouplin train`.
#  * --microbatches 1 is the command as it was: the --exact-data loss curve of a small teacher run
#    equals, byte for byte, the dump the program wrote before --microbatches existed (commit
#    16fe520; exact data make it independent of the machine and of OpenBLAS).
#  * M microbatches of T tokens = one microbatch of M·T tokens, BITWISE under --exact-data (fp32
#    and bf16; every sum is exact, tools/exact.h, the wgrads' over M·T·k = 128 rows included): on
#    the split and the grouped path, and (with an mpiexec) on 2 and 4 ranks, where microbatch j of
#    rank r holds the step's global tokens [j·Tg + r·T, ...) of the big batch's global order.
#  * ordinary data: within a relative REL_TOL per step, teacher and language model (fp32, bf16).
#    The differences are FP32 summation orders (GEMM blocking for other row counts, main_grad
#    accumulated per microbatch), amplified by the bf16 roundings that follow; measured
#    (2026-12, this CPU) 3e-8 teacher, 2.3e-5 language model over 20 steps.  1e-3 leaves 40x,
#    while a lost or doubled microbatch, or a gradient not scaled by 1/M, moves the loss by far
#    more.  FP8 recipes are not compared: their per-tensor scales follow each microbatch's amax,
#    so the quantization itself differs from one big batch's.
#  * --quantized-weights on (the shards stored quantized, refreshed by each optimizer step) gives
#    the loss curve of off (the working dtype gathered and quantized in every forward and
#    backward) BITWISE, fp8-current and fp8-block, with 2 microbatches, one rank and (with an
#    mpiexec) 2 ranks: the stored FP8 equals quantizing the gathered weight byte for byte.
#  * --preset: a preset's banner, an explicit option overriding it (qwen3 with --experts 8 and
#    16 tokens: 38 M parameters, one step runs in seconds on the CPU), and an unknown name (exit 2).
# usage: bash test_accum.sh <grouplin> <mpiexec-or-empty> <scratch-dir>
set -u
. "$(dirname "$0")/lib.sh"
CFG="--task teacher --hidden 16 --ffn 32 --experts 4 --topk 2 --steps 20 --recipes fp32,bf16 --no-plot --quiet"
REL_TOL=1e-3

run() { local out=$1; shift; "$G" train $CFG --out "$S/o" --dump-losses "$S/$out" "$@"; }
runN() {
    local np=$1 out=$2
    shift 2
    mpi_launch 300 -np "$np" "$G" train $CFG --out "$S/o$np" --dump-losses "$S/$out" "$@"
}
same() { # label, file a, file b
    if cmp -s "$2" "$3"; then echo "ok: $1"; else
        echo "FAIL: $1:"; diff "$2" "$3" | head -6; fails=$((fails + 1)); fi
}
close() { # label, file a, file b
    local m
    m=$(maxrel "$2" "$3")
    if [ "$(wc -l <"$2")" -eq "$(wc -l <"$3")" ] && awk -v m="$m" -v t="$REL_TOL" 'BEGIN { exit !(m <= t) }'; then
        echo "ok: $1 within $m relative (tolerance $REL_TOL)"
    else
        echo "FAIL: $1 differs by $m relative (tolerance $REL_TOL)"; fails=$((fails + 1))
    fi
}

# the dump of `$CFG --exact-data --tokens 64` before gradient accumulation existed
cat >"$S/golden.txt" <<'GOLDEN'
fp32 0 0x1.c9053afd0adecp-1 0.89261802996537432
fp32 1 0x1.b385933a12067p-1 0.85062847217433279
fp32 2 0x1.d3a52aaefa04cp-1 0.91336949716515781
fp32 3 0x1.98b43a4c7293ep-1 0.79825002844999182
fp32 4 0x1.dce52b9a011f4p-2 0.46571796538799437
fp32 5 0x1.0fb61759887e5p-1 0.53068612068113608
fp32 6 0x1.2b81268c56162p-1 0.58496971572007461
fp32 7 0x1.1923f14e6493ap-1 0.54910234529442126
fp32 8 0x1.759b9e2036c4dp-2 0.36485144683473864
fp32 9 0x1.9543b69d7b738p-2 0.39576611839480647
fp32 10 0x1.c3ba3ede4c367p-2 0.44114015800282974
fp32 11 0x1.afe874559d336p-2 0.42178518078371796
fp32 12 0x1.425a12c5fd0e5p-2 0.31479672749925519
fp32 13 0x1.49ca761fb0e5ep-2 0.32206139152933655
fp32 14 0x1.74a4e797dc1fbp-2 0.36391031135920543
fp32 15 0x1.6a32078638215p-2 0.35370647198399868
fp32 16 0x1.1b52ea5505534p-2 0.2766834844963626
fp32 17 0x1.1563218c090a1p-2 0.2708859674187441
fp32 18 0x1.41703c1ff2ae6p-2 0.31390470452303842
fp32 19 0x1.31853900918bap-2 0.29835976663560937
bf16 0 0x1.c8fcffc205ba4p-1 0.89255522960126088
bf16 1 0x1.b452726d5e395p-1 0.85219152054843283
bf16 2 0x1.d447c73834e4bp-1 0.91461012421718502
bf16 3 0x1.97dc8e9d53be2p-1 0.79660459204194134
bf16 4 0x1.dcb4a2ba1dbffp-2 0.46553282032931514
bf16 5 0x1.0f7d9419fc989p-1 0.53025496308537001
bf16 6 0x1.29a762a93119bp-1 0.58135517421083038
bf16 7 0x1.1a016e3d322ecp-1 0.55079216477414894
bf16 8 0x1.75bfbe71d90cbp-2 0.36498925752517825
bf16 9 0x1.9505b7b2a734ep-2 0.39552962329780861
bf16 10 0x1.c4f5dc22a894ap-2 0.44234413110293203
bf16 11 0x1.b1a5639959e17p-2 0.42348247168999492
bf16 12 0x1.435fd86e519p-2 0.31579530881244011
bf16 13 0x1.498270a27a8fbp-2 0.32178665153209324
bf16 14 0x1.7489496c02689p-2 0.36380495759713277
bf16 15 0x1.6afeccca08751p-2 0.35448760970222276
bf16 16 0x1.1d0edae8c4acfp-2 0.27837698026375518
bf16 17 0x1.1588ddf0e57f6p-2 0.27102991850676916
bf16 18 0x1.420ac0c9adb16p-2 0.3144941447348385
bf16 19 0x1.323308b4251ap-2 0.29902280425565131
GOLDEN
run m1.txt --exact-data --tokens 64 || { echo "FAIL: exact run"; exit 1; }
run m1b.txt --exact-data --tokens 64 --microbatches 1 || { echo "FAIL: --microbatches 1 run"; exit 1; }
same "--microbatches 1 reproduces the earlier dump byte for byte" "$S/golden.txt" "$S/m1.txt"
same "--microbatches 1 is the default" "$S/m1.txt" "$S/m1b.txt"

run m4.txt --exact-data --tokens 16 --microbatches 4 || { echo "FAIL: exact run, 4 microbatches"; exit 1; }
same "4 x 16 tokens = 1 x 64 tokens, exact data, split path" "$S/m1.txt" "$S/m4.txt"
run m2g.txt --exact-data --tokens 32 --microbatches 2 --path grouped || { echo "FAIL: grouped run"; exit 1; }
same "2 x 32 tokens = 1 x 64 tokens, exact data, grouped path" "$S/m1.txt" "$S/m2g.txt"

run p1.txt --tokens 64 || { echo "FAIL: run"; exit 1; }
run p4.txt --tokens 16 --microbatches 4 || { echo "FAIL: run, 4 microbatches"; exit 1; }
close "teacher, 4 x 16 tokens vs 1 x 64" "$S/p1.txt" "$S/p4.txt"
LM="--steps 20 --recipes fp32,bf16 --hidden 32 --ffn 32 --no-plot --quiet --out $S/o"
"$G" train $LM --tokens 128 --dump-losses "$S/l1.txt" || { echo "FAIL: lm run"; exit 1; }
"$G" train $LM --tokens 32 --microbatches 4 --dump-losses "$S/l4.txt" || { echo "FAIL: lm run, 4 microbatches"; exit 1; }
close "language model, 4 x 32 tokens vs 1 x 128" "$S/l1.txt" "$S/l4.txt"

if [ -z "$MPIEXEC" ]; then
    echo "no mpiexec given: skipping the multi-rank comparisons"
else
    for np in 2 4; do
        if runN "$np" r$np.txt --exact-data --tokens $((8 * np)) --microbatches $((8 / np)); then
            same "-np $np, $((8 / np)) x $((8 * np)) tokens = one rank 1 x 64, exact data" "$S/m1.txt" "$S/r$np.txt"
        else
            echo "FAIL: mpirun -np $np failed"; fails=$((fails + 1))
        fi
    done
fi

# the quantized shard against quantizing in every microbatch
QW="--recipes fp8-current,fp8-block --tokens 32 --microbatches 2 --steps 8"
run qon.txt $QW --quantized-weights on || { echo "FAIL: --quantized-weights on"; exit 1; }
run qoff.txt $QW --quantized-weights off || { echo "FAIL: --quantized-weights off"; exit 1; }
same "--quantized-weights on = off, fp8-current and fp8-block, 2 microbatches" "$S/qoff.txt" "$S/qon.txt"
if [ -n "$MPIEXEC" ]; then
    for q in on off; do
        runN 2 q2$q.txt $QW --quantized-weights $q || { echo "FAIL: -np 2 --quantized-weights $q"; fails=$((fails + 1)); }
    done
    same "-np 2: --quantized-weights on = off" "$S/q2off.txt" "$S/q2on.txt"
fi

# presets
"$G" train --task teacher --preset qwen3 --experts 8 --tokens 16 --steps 1 --recipes bf16 --no-plot \
    --out "$S/q" >"$S/q.txt" 2>&1
rc=$?
[ "$rc" -eq 0 ] || { echo "FAIL: --preset qwen3 exit $rc"; cat "$S/q.txt"; fails=$((fails + 1)); }
grep -q "MoE MLP H=2048 F=768 E=8 k=8 swiglu (preset qwen3: Qwen3-30B-A3B-like, one MoE layer), 16 tokens/step" \
    "$S/q.txt" || { echo "FAIL: --preset qwen3 banner:"; head -2 "$S/q.txt"; fails=$((fails + 1)); }
"$G" train --preset llama --steps 1 >"$S/u.txt" 2>&1
rc=$?
[ "$rc" -eq 2 ] || { echo "FAIL: --preset llama exit $rc, expected 2"; fails=$((fails + 1)); }
grep -q "preset" "$S/u.txt" || { echo "FAIL: --preset llama: no message"; fails=$((fails + 1)); }

[ "$fails" -eq 0 ] || { echo "$fails accumulation checks failed"; exit 1; }
echo "accumulation checks passed"
