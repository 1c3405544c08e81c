#!/bin/sh
# Instructions picoll adds to an MPI_Allreduce it passes through (one int, MPI_SUM,
# MPI_COMM_WORLD, one rank, PICOLL_HOST=off). callgrind counts every instruction of the program;
# running it with N and 2N calls and subtracting removes start-up and shut-down, leaving the cost
# of N calls. Done without and with libpicoll.so preloaded; prints both and the difference per
# call. Usage, from a build tree:  sh tests/perf/callgrind.sh [N]
# Exits 1 if the difference is over PASSTHROUGH_MAX_INSN (default 300).
set -e
command -v valgrind >/dev/null || { echo "SKIP: valgrind is not installed"; exit 77; }
n=${1:-20000}
max=${PASSTHROUGH_MAX_INSN:-300}
prog=./tests/perf/passthrough
lib=$PWD/.libs/libpicoll.so
total() { # total instructions of one run: total PRELOAD N
    env OMPI_MCA_op='^avx' PICOLL_HOST=off ${1:+LD_PRELOAD=$1} \
        valgrind --tool=callgrind --callgrind-out-file=/dev/null "$prog" "$2" 2>&1 |
        awk '/Collected :/ { print $NF }'
}
per_call() { # per_call PRELOAD
    a=$(total "$1" "$n")
    b=$(total "$1" $((2 * n)))
    echo $(( (b - a) / n ))
}
plain=$(per_call "")
picoll=$(per_call "$lib")
added=$((picoll - plain))
echo "MPI_Allreduce passed through: $plain instructions/call plain, $picoll with picoll preloaded: $added added (limit $max)"
[ "$added" -le "$max" ]
