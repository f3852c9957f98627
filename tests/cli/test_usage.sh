#!/usr/bin/env bash
# Bad command lines: exit status 2 with a one-line reason and a pointer to --help on stderr,
# never a crash; --help / --version exit 0.
# usage: bash test_usage.sh <grouplin> <mpiexec-or-empty> <scratch-dir>
set -u
G=$1
S=$3
mkdir -p "$S"
fails=0

# expect_usage <stderr-needle> <args...>: exit 2, stderr mentions the needle and the help hint.
expect_usage() {
    local needle=$1
    shift
    "$G" "$@" >"$S/out" 2>"$S/err"
    local rc=$?
    if [ "$rc" -ne 2 ]; then
        echo "FAIL: grouplin $*: exit $rc, expected 2"; fails=$((fails + 1)); return
    fi
    if ! grep -q -- "$needle" "$S/err"; then
        echo "FAIL: grouplin $*: stderr does not mention '$needle':"; cat "$S/err"; fails=$((fails + 1)); return
    fi
    if ! grep -q -- "--help" "$S/err"; then
        echo "FAIL: grouplin $*: stderr does not point to --help"; fails=$((fails + 1)); return
    fi
    echo "ok: grouplin $* -> 2 ($(head -1 "$S/err"))"
}

# expect_ok <stdout-needle> <args...>: exit 0 and stdout mentions the needle.
expect_ok() {
    local needle=$1
    shift
    "$G" "$@" >"$S/out" 2>"$S/err"
    local rc=$?
    if [ "$rc" -ne 0 ] || ! grep -q -- "$needle" "$S/out"; then
        echo "FAIL: grouplin $*: exit $rc (expected 0) or stdout lacks '$needle'"; fails=$((fails + 1)); return
    fi
    echo "ok: grouplin $* -> 0"
}

expect_usage "no command" 
expect_usage "unknown command 'nope'" nope
expect_usage "unknown option '--bogus'" --bogus
expect_usage "unknown option '--bogus'" train --bogus
expect_usage "unknown option '-x'" train -x
expect_usage "'abc' is not an integer" train --steps abc
expect_usage "--steps 0 must be in" train --steps 0
expect_usage "is not an integer" train --tokens 12x
expect_usage "needs a value" train --steps
expect_usage "--microbatches 0 must be in" train --microbatches 0
expect_usage "--preset" train --preset llama
expect_usage "unknown recipe 'nope'" train --recipes nope
expect_usage "unknown recipe 'nope'" train --recipes bf16,nope
expect_usage "listed twice" train --recipes bf16,bf16
expect_usage "--backend cuda" train --backend cuda --task teacher
expect_usage "is not one of" train --backend tpu
# the embedding backward kernel's int32 indices (2^31 token-position pairs here)
expect_usage "--backend cuda takes --tokens x --context up to 1073741823" train --backend cuda --tokens 4194304 --context 512
expect_usage "is not one of" train --path diagonal
expect_usage "is not one of" train --activation relu
expect_usage "must be <= --experts" train --experts 4 --topk 5
expect_usage "--threads -1 must be in" train --threads -1
expect_usage "is not a number" train --lr fast
expect_usage "must be in" train --lr -1
expect_usage "is not a number" train --expect-loss-drop nan
expect_usage "unexpected argument 'extra'" train extra
expect_usage "unknown recipe" bench --recipes fp4
expect_usage "must be in" bench --repeat 0
expect_usage "unknown option" check --verbose
expect_usage "unexpected argument" check now

expect_ok "usage: grouplin" --help
expect_ok "train" --help
expect_ok "grouplin 0." --version
expect_ok "--recipes" train --help
expect_ok "--expect-loss-drop" train --help
expect_ok "--repeat" bench --help
expect_ok "PASS / FAIL" check --help

if [ "$fails" -ne 0 ]; then
    echo "$fails usage checks failed"
    exit 1
fi
echo "all usage checks passed"
