#!/bin/sh
# Every function of the MPI's mpi.h that takes a buffer is in pmpi/calls.def (wrapped, refused or
# listed as carrying no message data). Checks the header this build was made with, the headers of
# the other MPIs installed here (mpicc.openmpi, mpicc.mpich), and that a function the table does not
# know makes the check fail.   Usage: table_complete.sh SRCDIR BUILDDIR PYTHON3
set -u
src=$1 build=$2 py=$3
gen="$py $src/pmpi/gen_wrappers.py --table $src/pmpi/calls.def"
tmp=$(mktemp -d) || exit 1
trap 'rm -rf "$tmp"' EXIT
status=0
check() { # check NAME HEADER.i
    if out=$($gen --header "$2" --check); then
        echo "$1: $(echo "$out" | tail -n 1)"
    else
        echo "FAIL $1:"; echo "$out"; status=1
    fi
}
check "this build's MPI" "$build/pmpi/mpi_h.i"
for cc in mpicc.openmpi mpicc.mpich; do
    if command -v $cc >/dev/null && echo '#include <mpi.h>' | $cc -E -x c - > "$tmp/$cc.i" 2>/dev/null; then
        check "$cc" "$tmp/$cc.i"
    fi
done
# a new MPI function with a buffer, unknown to the table, must fail the check
cp "$build/pmpi/mpi_h.i" "$tmp/new.i"
echo 'int MPI_Allfoo(const void *sendbuf, void *recvbuf, int count, MPI_Datatype datatype, MPI_Comm comm);' >> "$tmp/new.i"
if out=$($gen --header "$tmp/new.i" --check); then
    echo "FAIL: a header with an unknown MPI_Allfoo passed the check"; status=1
elif ! echo "$out" | grep -q '^MPI_Allfoo: carries a buffer and is not in pmpi/calls.def'; then
    echo "FAIL: the check of MPI_Allfoo did not name it:"; echo "$out"; status=1
else
    echo "an unknown MPI_Allfoo is reported: $(echo "$out" | head -n 1)"
fi
exit $status
