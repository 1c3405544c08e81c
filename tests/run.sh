#!/usr/bin/env bash
# The whole test suite, from a fresh Debian 12 machine: installs what is missing, then configures,
# builds and runs CTest twice, against Open MPI (build-openmpi/) and MPICH (build-mpich/).
#   bash tests/run.sh            both MPIs
#   PICOLL_TEST_MPIS=openmpi bash tests/run.sh    one of them
set -euo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
cd "$top"

bash "$top/tests/install-deps.sh" autoconf automake libtool make pkg-config gcc g++ openmpi-bin libopenmpi-dev mpich libmpich-dev libhwloc-dev libucx-dev cmake valgrind python3 gfortran iproute2

echo "== autoreconf"
autoreconf -fi >/dev/null

jobs=$(nproc 2>/dev/null || echo 2)
status=0
for mpi in ${PICOLL_TEST_MPIS:-openmpi mpich}; do
    dir="build-$mpi"
    case $mpi in
        openmpi) mpicc=mpicc.openmpi ;;
        mpich) mpicc=mpicc.mpich ;;
        *) echo "unknown MPI '$mpi' in PICOLL_TEST_MPIS (openmpi, mpich)"; exit 2 ;;
    esac
    echo "== $mpi: configure, build and test in $dir"
    mkdir -p "$dir"
    (cd "$dir" && "$top/configure" -q MPICC="$mpicc") || { echo "== $mpi: configure failed"; status=1; continue; }
    if ! (cd "$dir" && make -j"$jobs" all tests > build.log 2>&1); then
        echo "== $mpi: build failed:"; tail -n 40 "$dir/build.log"; status=1; continue
    fi
    (cd "$dir" && ctest --output-on-failure --timeout 300) || status=1
done
exit $status
