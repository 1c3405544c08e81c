#!/bin/sh
# Instructions picoll adds to MPI calls it passes through (one rank, one int, PICOLL_HOST=off, no
# CUDA driver): MPI_Allreduce; MPI_Irecv + MPI_Send + MPI_Wait; MPI_Irecv + MPI_Isend + 2 MPI_Wait. callgrind
# counts every instruction of tests/perf/passthrough, run once without and once with
# libpicoll.so preloaded; the inclusive cost of each loop function (N iterations, start-up and
# shut-down outside it) divided by N is its cost per iteration. Usage, from a build tree:
#   sh tests/perf/callgrind.sh [N]
# Exits 1 if a difference is over PASSTHROUGH_MAX_INSN (default 300) per MPI call.
set -e
command -v valgrind >/dev/null || { echo "SKIP: valgrind is not installed"; exit 77; }
command -v callgrind_annotate >/dev/null || { echo "SKIP: callgrind_annotate is not installed"; exit 77; }
n=${1:-20000}
max=${PASSTHROUGH_MAX_INSN:-300}
prog=./tests/perf/passthrough
lib=$PWD/.libs/libpicoll.so
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
for run in plain picoll; do
    pre=""; [ $run = picoll ] && pre=$lib
    env OMPI_MCA_op='^avx' PICOLL_HOST=off ${pre:+LD_PRELOAD=$pre} \
        valgrind --tool=callgrind --callgrind-out-file="$tmp/$run.out" "$prog" "$n" > "$tmp/$run.log" 2>&1 ||
        { cat "$tmp/$run.log"; exit 1; }
    callgrind_annotate --inclusive=yes "$tmp/$run.out" > "$tmp/$run.txt"
done
per_iteration() { # per_iteration RUN FUNCTION
    c=$(awk -v f="$2" '$0 ~ (":" f " ") { gsub(",", "", $1); print $1; exit }' "$tmp/$1.txt")
    [ -n "$c" ] || { echo "no cost for $2 in the $1 run" >&2; exit 1; }
    echo $((c / n))
}
status=0
for case in "loop_allreduce 1 MPI_Allreduce" "loop_send 3 MPI_Irecv+MPI_Send+MPI_Wait" "loop_isend 4 MPI_Irecv+MPI_Isend+2*MPI_Wait"; do
    set -- $case
    plain=$(per_iteration plain "$1")
    picoll=$(per_iteration picoll "$1")
    added=$((picoll - plain))
    per_call=$((added / $2))
    echo "$3 passed through: $plain instructions plain, $picoll with picoll preloaded: $added added, $per_call per call (limit $max)"
    [ "$per_call" -le "$max" ] || status=1
done
exit $status
