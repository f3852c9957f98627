#!/usr/bin/env bash
# Inputs and outputs of `grouplin train` that must fail at once and say why:
#   - --data naming a FIFO, /dev/zero, /dev/urandom or a text over the size limit: exit 1 at the
#     start with a message naming the option, the file and (for size) the limit -- never a wait
#     for a writer or an endless read (each run has a 60 s timeout, so a hang fails the test);
#     a directory holding a FIFO beside its text still trains (the FIFO is skipped);
#   - --dump-losses naming the loss.csv / loss.png the run writes into --out (directly, through
#     "..", or through a symbolic link): refused before training, the files left as they were;
#   - under mpirun -np 2, a failure of rank 1 alone (its --data is missing, or a FIFO) reaches
#     the user, prefixed "rank 1:", and the job exits non-zero without hanging;
#   - `grouplin train --help` gives --sync-every's default in its own description.
# usage: bash test_failures.sh <grouplin> <mpiexec-or-empty> <scratch-dir>
set -u
G=$1
MPIEXEC=$2
S=$3
rm -rf "$S"
mkdir -p "$S"
fails=0
fail() { echo "FAIL: $*"; fails=$((fails + 1)); }
SMALL="--steps 3 --tokens 32 --hidden 16 --ffn 16 --experts 4 --topk 2 --recipes bf16 --no-plot --quiet"
for i in $(seq 200); do echo "the quick brown fox jumps over the lazy dog $((i % 7))"; done >"$S/fox.txt"

# expect_fail <name> <stderr-needle> <args...>: exit 1 within 60 s, stderr has the needle, no
# loss.csv written into $S/<name> (the --out of the --data cases).
expect_fail() {
    local name=$1 needle=$2
    shift 2
    timeout 60 "$G" train "$@" >"$S/$name.out" 2>"$S/$name.err" </dev/null
    local rc=$?
    [ "$rc" -ne 124 ] || { fail "$name: still running after 60 s (killed)"; return; }
    [ "$rc" -eq 1 ] || { fail "$name: exit $rc, expected 1"; cat "$S/$name.err"; return; }
    grep -qF -- "$needle" "$S/$name.err" || { fail "$name: stderr lacks '$needle':"; cat "$S/$name.err"; return; }
    [ ! -e "$S/$name/loss.csv" ] || { fail "$name: training ran (loss.csv written)"; return; }
    echo "ok: $name -> 1 ($(head -1 "$S/$name.err"))"
}

mkfifo "$S/fifo"
expect_fail data_fifo "cannot read the text '$S/fifo': it is a FIFO; --data takes a regular file" \
    $SMALL --data "$S/fifo" --out "$S/data_fifo"
expect_fail data_zero "cannot read the text '/dev/zero': it is a character device; --data takes a regular file" \
    $SMALL --data /dev/zero --out "$S/data_zero"
expect_fail data_urandom "cannot read the text '/dev/urandom': it is a character device" $SMALL --data /dev/urandom --out "$S/data_urandom"
# A symbolic link to a device is the device.
ln -s /dev/zero "$S/zero.txt"
expect_fail data_link_zero "cannot read the text '$S/zero.txt': it is a character device" $SMALL --data "$S/zero.txt" --out "$S/data_link_zero"
# One byte over the limit (a sparse file: no disk space used), refused before it is read.
truncate -s $((1024 * 1024 * 1024 + 1)) "$S/big.txt"
expect_fail data_too_big \
    "cannot read the text '$S/big.txt': 1073741825 bytes, more than --data's limit of 1073741824 bytes (1 GiB)" \
    $SMALL --data "$S/big.txt" --out "$S/data_too_big"
rm -f "$S/big.txt"

# A directory: its regular files are the text, a FIFO among them is skipped.
mkdir -p "$S/dir"
cp "$S/fox.txt" "$S/dir/a.txt"
mkfifo "$S/dir/b.fifo"
timeout 60 "$G" train $SMALL --data "$S/dir" --out "$S/dirrun" >"$S/dir.out" 2>&1 </dev/null
rc=$?
[ "$rc" -eq 0 ] && [ -s "$S/dirrun/loss.csv" ] && echo "ok: a directory with a FIFO trains on its text" ||
    { fail "--data DIR with a FIFO: exit $rc"; cat "$S/dir.out"; }

# The dump would replace the loss table (or the plot) the run writes into --out.
mkdir -p "$S/o" "$S/o/sub"
echo keep >"$S/o/loss.csv"
expect_fail dump_is_csv "--dump-losses '$S/o/loss.csv' is the loss table (loss.csv) that the run writes into --out" \
    $SMALL --task teacher --dump-losses "$S/o/loss.csv" --out "$S/o"
[ "$(cat "$S/o/loss.csv")" = keep ] || fail "dump_is_csv: the existing loss.csv was changed"
expect_fail dump_dotdot "is the loss table (loss.csv)" $SMALL --task teacher --dump-losses "$S/o/sub/../loss.csv" --out "$S/o"
expect_fail dump_is_png "is the loss plot (loss.png)" $SMALL --task teacher --dump-losses "$S/o/loss.png" --out "$S/o"
ln -s "$S/o/loss.csv" "$S/link.dump"
expect_fail dump_link_csv "is the loss table (loss.csv)" $SMALL --task teacher --dump-losses "$S/link.dump" --out "$S/o"
[ "$(cat "$S/o/loss.csv")" = keep ] || fail "dump_link_csv: the existing loss.csv was changed"
# A dump beside loss.csv under another name is fine.
"$G" train $SMALL --task teacher --out "$S/o" --dump-losses "$S/o/losses.txt" >"$S/ok.out" 2>&1
rc=$?
[ "$rc" -eq 0 ] && [ "$(wc -l <"$S/o/losses.txt")" -eq 3 ] && [ "$(wc -l <"$S/o/loss.csv")" -eq 4 ] &&
    echo "ok: --dump-losses o/losses.txt beside o/loss.csv" || { fail "dump beside loss.csv: exit $rc"; cat "$S/ok.out"; }

# --help: each option's description is its own.
"$G" train --help >"$S/help.txt"
grep -A1 -- "--sync-every N" "$S/help.txt" | tail -1 | grep -qF "(default 50)" &&
    ! grep -A3 -- "--comm nccl|self" "$S/help.txt" | grep -qF "(default 50)" &&
    echo "ok: --help gives --sync-every's default under --sync-every" ||
    { fail "--help: --sync-every's default is not in its own description:"; grep -A5 -- "--sync-every" "$S/help.txt"; }

# Rank 1 fails alone: its message, prefixed by its rank, reaches the user.
# expect_rank1 <name> <stderr-needle> <rank 1's --data>
expect_rank1() {
    local name=$1 needle=$2 data1=$3
    timeout 120 "$MPIEXEC" --oversubscribe --allow-run-as-root --bind-to none \
        -np 1 "$G" train $SMALL --data "$S/fox.txt" --out "$S/$name" : \
        -np 1 "$G" train $SMALL --data "$data1" --out "$S/$name" >"$S/$name.out" 2>"$S/$name.err" </dev/null
    local rc=$?
    [ "$rc" -ne 124 ] || { fail "$name: mpirun still running after 120 s (killed)"; return; }
    [ "$rc" -ne 0 ] || { fail "$name: exit 0, expected a failure"; return; }
    grep -qF -- "$needle" "$S/$name.err" || { fail "$name: exit $rc, stderr lacks '$needle':"; cat "$S/$name.err"; return; }
    [ ! -e "$S/$name/loss.csv" ] || { fail "$name: training ran (loss.csv written)"; return; }
    echo "ok: $name -> $rc ($(grep -F -- "$needle" "$S/$name.err" | head -1))"
}
if [ -z "$MPIEXEC" ]; then
    echo "no mpiexec given: skipping the rank-1 failures"
else
    export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
    expect_rank1 rank1_missing "grouplin train: rank 1: cannot read the text '$S/none.txt': No such file or directory" \
        "$S/none.txt"
    expect_rank1 rank1_fifo "grouplin train: rank 1: cannot read the text '$S/fifo': it is a FIFO" "$S/fifo"
fi

[ "$fails" -eq 0 ] || { echo "$fails failure checks failed"; exit 1; }
echo "failure checks passed"
