#!/usr/bin/env bash
# `grouplin check` passes every self-check (exit 0, no FAIL line, a plausible number of PASS
# lines) and its report ends with the summary.
# usage: bash test_check.sh <grouplin> <mpiexec-or-empty> <scratch-dir>
set -u
G=$1
S=$3
mkdir -p "$S"
"$G" check >"$S/check.txt" 2>&1
rc=$?
cat "$S/check.txt"
[ "$rc" -eq 0 ] || { echo "FAIL: grouplin check exited $rc"; exit 1; }
if grep -q '^FAIL' "$S/check.txt"; then echo "FAIL: a check failed"; exit 1; fi
n=$(grep -c '^PASS' "$S/check.txt")
[ "$n" -ge 20 ] || { echo "FAIL: only $n PASS lines (expected >= 20)"; exit 1; }
grep -q "checks, 0 failed: PASS" "$S/check.txt" || { echo "FAIL: no summary line"; exit 1; }
echo "grouplin check: $n checks passed"
