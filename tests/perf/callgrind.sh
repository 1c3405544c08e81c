#!/bin/sh
# Instructions picoll adds to MPI calls it passes through (one rank, one int, PICOLL_HOST=off, no
# CUDA driver): MPI_Allreduce; MPI_Send + MPI_Recv; MPI_Irecv + MPI_Isend + 2 MPI_Wait.
# callgrind counts every instruction of the program; running it with N and 2N iterations and
# subtracting removes start-up and shut-down, leaving the cost of N iterations. Done without and
# with libpicoll.so preloaded; prints both and the difference per call. Usage, from a build tree:
#   sh tests/perf/callgrind.sh [N]
# Exits 1 if a difference is over PASSTHROUGH_MAX_INSN (default 300) per MPI call.
set -e
command -v valgrind >/dev/null || { echo "SKIP: valgrind is not installed"; exit 77; }
n=${1:-20000}
max=${PASSTHROUGH_MAX_INSN:-300}
prog=./tests/perf/passthrough
lib=$PWD/.libs/libpicoll.so
total() { # total instructions of one run: total PRELOAD N WHAT
    env OMPI_MCA_op='^avx' PICOLL_HOST=off ${1:+LD_PRELOAD=$1} \
        valgrind --tool=callgrind --callgrind-out-file=/dev/null "$prog" "$2" "$3" 2>&1 |
        awk '/Collected :/ { print $NF }'
}
per_iteration() { # per_iteration PRELOAD WHAT
    a=$(total "$1" "$n" "$2")
    b=$(total "$1" $((2 * n)) "$2")
    echo $(( (b - a) / n ))
}
status=0
for case in "allreduce 1 MPI_Allreduce" "send 2 MPI_Send+MPI_Recv" "isend 4 MPI_Irecv+MPI_Isend+2*MPI_Wait"; do
    set -- $case
    plain=$(per_iteration "" "$1")
    picoll=$(per_iteration "$lib" "$1")
    added=$((picoll - plain))
    per_call=$((added / $2))
    echo "$3 passed through: $plain instructions plain, $picoll with picoll preloaded: $added added, $per_call per call (limit $max)"
    [ "$per_call" -le "$max" ] || status=1
done
exit $status
