#!/usr/bin/env bash
# The byte-level language-model task (`grouplin train`, default --task lm):
#   - a short run on the default text learns: every recipe's validation loss is below
#     ln 256 - 1 = 4.545 nats (uniform guessing is 5.545; measured ~3.2 after these 60 steps,
#     so the margin is wide while a model that does not learn stays near 5.5), and the table
#     reports bits per byte consistent with the nats (nats / ln 2);
#   - --data FILE trains on that file; a highly repetitive text is learned far below that;
#   - a missing --data file: exit 1 and a message naming it and the option, nothing trained;
#   - a text too short for --context: exit 1; teacher-only options are usage errors here;
#   - under mpirun -np 2 the first 10 training losses (fp32, bf16) match one rank within 1e-4
#     relative: only FP32 summation orders differ (measured ~1e-10 at first; like any training
#     run, chaotic growth takes the difference to ~1e-3 after 50 steps, hence 10 steps).
# usage: bash test_lm.sh <grouplin> <mpiexec-or-empty> <scratch-dir>
set -u
. "$(dirname "$0")/lib.sh"
SMALL="--steps 60 --tokens 256 --hidden 32 --ffn 64 --experts 4 --topk 2 --no-plot"

# check_val <table file> <max nats>: each recipe row's validation loss (column 4) is below the
# bound and its bits/B (column 5) is nats / ln 2.
check_val() {
    awk -v max="$2" '
        $1 ~ /^(fp32|bf16|fp8-delayed|fp8-current|mxfp8|fp8-block)$/ {
            rows++
            if (!($4 < max)) { print "FAIL: " $1 " validation loss " $4 " >= " max; bad = 1 }
            d = $5 - $4 / log(2); if (d < 0) d = -d
            if (d > 2e-4) { print "FAIL: " $1 " bits/B " $5 " != " $4 " / ln 2"; bad = 1 }
        }
        END { if (rows == 0) { print "FAIL: no recipe rows"; bad = 1 } exit bad }' "$1"
}

"$G" train $SMALL --recipes bf16,fp8-current,mxfp8 --out "$S/a" --dump-losses "$S/a.dump" >"$S/a.txt" 2>&1
rc=$?
cat "$S/a.txt"
[ "$rc" -eq 0 ] || fail "default text: exit $rc"
check_val "$S/a.txt" 4.545 || fail "default text: validation loss / bits per byte"
grep -q "val bits/B" "$S/a.txt" || fail "no bits-per-byte column"
grep -q "byte-level LM on /usr/share/common-licenses" "$S/a.txt" || fail "header does not name the text"
[ "$(wc -l <"$S/a/loss.csv")" -eq 61 ] || fail "loss.csv does not have 61 lines"

# A repetitive text of our own: the model learns it almost perfectly.
for i in $(seq 400); do echo "the quick brown fox jumps over the lazy dog $((i % 7))"; done >"$S/fox.txt"
"$G" train $SMALL --recipes bf16 --data "$S/fox.txt" --out "$S/b" >"$S/b.txt" 2>&1
rc=$?
[ "$rc" -eq 0 ] || { fail "--data fox.txt: exit $rc"; cat "$S/b.txt"; }
grep -qF "byte-level LM on $S/fox.txt" "$S/b.txt" || fail "--data: header does not name the file"
check_val "$S/b.txt" 1.5 || { fail "--data fox.txt: not learned"; cat "$S/b.txt"; }

# expect_fail <name> <rc> <needle> <args...>: the exit status, stderr has the needle, no table.
expect_fail() {
    local name=$1 want=$2 needle=$3
    shift 3
    "$G" train "$@" >"$S/$name.out" 2>"$S/$name.err"
    local rc=$?
    [ "$rc" -eq "$want" ] || { fail "$name: exit $rc, expected $want"; cat "$S/$name.err"; return; }
    grep -qF -- "$needle" "$S/$name.err" || { fail "$name: stderr lacks '$needle':"; cat "$S/$name.err"; return; }
    [ ! -s "$S/$name.out" ] || { fail "$name: training ran"; return; }
    echo "ok: $name -> $want ($(head -1 "$S/$name.err"))"
}
expect_fail missing 1 "cannot read the text '$S/none.txt': No such file or directory (pass a text file with --data FILE)" \
    $SMALL --data "$S/none.txt" --out "$S/c"
printf 'tiny text\n' >"$S/tiny.txt"
expect_fail too_short 1 "the text '$S/tiny.txt' has 10 bytes; --context 8 needs at least" $SMALL --data "$S/tiny.txt" --out "$S/c"
expect_fail exact_lm 2 "--exact-data and --batches apply to --task teacher only" $SMALL --exact-data
expect_fail data_teacher 2 "--data and --context apply to --task lm only" $SMALL --task teacher --context 4

if [ -z "$MPIEXEC" ]; then
    echo "no mpiexec given: skipping the two-rank comparison"
else
    TEN="--steps 10 --tokens 256 --hidden 32 --ffn 64 --experts 4 --topk 2 --no-plot --quiet --recipes fp32,bf16"
    "$G" train $TEN --out "$S/one" --dump-losses "$S/one.dump" || fail "10-step single-rank run failed"
    mpi_launch 300 -np 2 "$G" train $TEN --out "$S/m" --dump-losses "$S/m.dump" || fail "mpirun -np 2 failed"
    m=$(maxrel "$S/one.dump" "$S/m.dump")
    awk -v m="$m" 'BEGIN { exit !(m <= 1e-4) }' && echo "ok: -np 2 within $m relative of one rank" ||
        fail "-np 2 differs from one rank by $m relative"
fi

[ "$fails" -eq 0 ] || { echo "$fails language-model checks failed"; exit 1; }
echo "language-model checks passed"
