#!/bin/sh
# every_each.sh NP [RUN-ARGS...] -- [EVERY-ARGS...]: runs tests/cuda/every_call once per case, so
# that a case that crashes does not hide the others; prints one line per case (passed, FAILED,
# crashed) and the failure lines. Run from a build directory, e.g.
#   sh every_each.sh 2 --preload env LD_LIBRARY_PATH=$PWD/tests/cuda/fake --
np="$1"; shift
run=""
while [ $# -gt 0 ] && [ "$1" != "--" ]; do run="$run $1"; shift; done
[ "$1" = "--" ] && shift
prog=tests/cuda/every_call
"$prog" --list 2>/dev/null | while IFS= read -r c; do
    out=$(timeout 120 tests/mpirun.sh "$np" $run "$prog" --case "$c" "$@" 2>&1 < /dev/null)
    if echo "$out" | grep -q "every_call: passed"; then
        echo "passed   $c"
    elif echo "$out" | grep -q "crashed"; then
        echo "CRASHED  $c"; echo "$out" | grep "^FAIL" | head -4 | sed 's/^/    /'
    else
        echo "FAILED   $c"; echo "$out" | grep "^FAIL" | head -4 | sed 's/^/    /'
    fi
done
