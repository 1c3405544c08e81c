#!/bin/sh
# gpu_test.sh [--gpus N] PROGRAM EXPECT-ARGS... : skips (exit 77, with the program's one-line
# reason) where PROGRAM --probe finds no usable CUDA device (or fewer than N); otherwise runs
# tests/host/expect.sh EXPECT-ARGS...
need=1
if [ "$1" = "--gpus" ]; then need="$2"; shift 2; fi
prog="$1"; shift
why=$("$prog" --probe "$need")
rc=$?
if [ $rc = 77 ]; then echo "$why"; exit 77; fi
if [ $rc != 0 ]; then echo "gpu_test.sh: $prog --probe failed with status $rc: $why"; exit 1; fi
exec "$(dirname "$0")/../host/expect.sh" "$@"
