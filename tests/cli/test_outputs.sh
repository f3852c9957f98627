#!/usr/bin/env bash
# Output paths and setup failures of `grouplin train`:
#   - an --out directory that cannot be created fails at the start (exit 1, a message naming it)
#     before any step runs, and creates nothing;
#   - a --dump-losses file that cannot be opened fails at the start in the same way;
#   - a dump that fails while it is written (/dev/full: no space) leaves no loss.csv behind;
#   - buffers of the program itself that cannot be allocated are named, with their size;
#   - a good run creates a missing --out directory and writes loss.csv and the dump.
# usage: bash test_outputs.sh <grouplin> <mpiexec-or-empty> <scratch-dir>
set -u
G=$1
S=$3
rm -rf "$S"
mkdir -p "$S"
fails=0
fail() { echo "FAIL: $*"; fails=$((fails + 1)); }
# Enough steps that a run which reaches training is easy to tell from one stopped at the start:
# the checks below look for the absence of any progress, not for timing.
TINY="--task teacher --steps 3 --tokens 32 --hidden 16 --ffn 16 --experts 4 --topk 2 --recipes bf16 --no-plot"

# expect_fail <name> <stderr-needle> <args...>: exit 1, stderr has the needle, stdout is empty
# (no results table: no recipe was trained).
expect_fail() {
    local name=$1 needle=$2
    shift 2
    "$G" train "$@" >"$S/$name.out" 2>"$S/$name.err"
    local rc=$?
    [ "$rc" -eq 1 ] || { fail "$name: exit $rc, expected 1"; cat "$S/$name.err"; return; }
    grep -qF -- "$needle" "$S/$name.err" || { fail "$name: stderr lacks '$needle':"; cat "$S/$name.err"; return; }
    [ ! -s "$S/$name.out" ] || { fail "$name: training ran (stdout not empty):"; cat "$S/$name.out"; return; }
    echo "ok: $name -> 1 ($(head -1 "$S/$name.err"))"
}

# An --out below a regular file cannot be created.
touch "$S/file"
expect_fail out_under_file "cannot create --out directory '$S/file/out'" $TINY --out "$S/file/out"
# An --out that is an existing regular file is not a directory.
expect_fail out_is_file "--out '$S/file' is not a directory" $TINY --out "$S/file"
# A missing parent directory (no mkdir -p): fails, and nothing is created.
expect_fail out_no_parent "cannot create --out directory '$S/none/out'" $TINY --out "$S/none/out"
[ ! -e "$S/none" ] || fail "out_no_parent: $S/none was created"

# A dump file in a missing directory, or a dump path that is a directory: fails at the start, and
# neither loss.csv nor the --out directory's contents appear.
expect_fail dump_no_dir "cannot write --dump-losses file '$S/none/d.txt'" $TINY --out "$S/d1" \
    --dump-losses "$S/none/d.txt"
[ ! -e "$S/d1/loss.csv" ] || fail "dump_no_dir: loss.csv left in $S/d1"
mkdir -p "$S/adir"
expect_fail dump_is_dir "cannot write --dump-losses file '$S/adir'" $TINY --out "$S/d2" --dump-losses "$S/adir"
[ ! -e "$S/d2/loss.csv" ] || fail "dump_is_dir: loss.csv left in $S/d2"

# A dump that fails only while being written (ENOSPC from /dev/full, after the whole run):
# exit 1, the reason, and no loss.csv left behind.
if [ -w /dev/full ]; then
    "$G" train $TINY --quiet --out "$S/d3" --dump-losses /dev/full >"$S/full.out" 2>"$S/full.err"
    rc=$?
    before=$fails
    [ "$rc" -eq 1 ] || fail "dump to /dev/full: exit $rc, expected 1"
    grep -qF "cannot write /dev/full" "$S/full.err" || { fail "dump to /dev/full: no reason:"; cat "$S/full.err"; }
    [ ! -e "$S/d3/loss.csv" ] || fail "dump to /dev/full: loss.csv left behind in $S/d3"
    [ -c /dev/full ] || fail "dump to /dev/full: /dev/full is no longer a device"
    [ "$fails" -ne "$before" ] || echo "ok: dump to /dev/full -> $rc, no loss.csv"
else
    echo "note: no writable /dev/full here; the late dump failure is not checked"
fi

# The program's own buffers: 2^22 tokens x 16384 wide is 256 GiB per activation buffer, more
# than this machine has (the sanitizers' allocators must return NULL rather than abort here).
# The start-time probe of the dump file leaves no new file behind and an existing one as it was.
export ASAN_OPTIONS="${ASAN_OPTIONS:-}:allocator_may_return_null=1"
BIG="--task teacher --steps 1 --tokens 4194304 --hidden 16384 --recipes bf16 --no-plot --out $S/big"
expect_fail own_buffers "cannot allocate 274877906944 bytes of host memory for the inputs x" \
    $BIG --dump-losses "$S/new.dump"
grep -qF "setup failed: out of memory" "$S/own_buffers.err" || fail "own_buffers: no 'setup failed: out of memory'"
[ ! -e "$S/new.dump" ] || fail "own_buffers: the dump probe left $S/new.dump behind"
echo keep >"$S/keep.dump"
expect_fail own_buffers_keep "cannot allocate" $BIG --dump-losses "$S/keep.dump"
[ "$(cat "$S/keep.dump")" = keep ] || fail "own_buffers_keep: a failed start changed an existing dump file"

# A good run creates the missing --out (one level) and writes both files.
"$G" train $TINY --quiet --out "$S/good" --dump-losses "$S/good.dump" >"$S/good.out" 2>&1
rc=$?
[ "$rc" -eq 0 ] || { fail "good run: exit $rc"; cat "$S/good.out"; }
[ -s "$S/good/loss.csv" ] || fail "good run: no loss.csv"
[ "$(wc -l <"$S/good.dump")" -eq 3 ] || fail "good run: the dump does not have 3 lines (1 recipe x 3 steps)"

[ "$fails" -eq 0 ] || { echo "$fails output checks failed"; exit 1; }
echo "output checks passed"
