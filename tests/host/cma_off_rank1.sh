#!/bin/sh
# cma_off_rank1.sh PROGRAM ARGS...: runs PROGRAM with PICOLL_CMA=off on world rank 1 only (the
# rank as Open MPI or MPICH's launcher tells it), so that one rank of the node says no to single
# copy and the whole node must agree on the workspace.
rank="${OMPI_COMM_WORLD_RANK:-${PMI_RANK:-}}"
if [ -z "$rank" ]; then
    echo "cma_off_rank1.sh: no OMPI_COMM_WORLD_RANK or PMI_RANK: not started by mpirun?" >&2
    exit 1
fi
if [ "$rank" = 1 ]; then
    PICOLL_CMA=off
    export PICOLL_CMA
fi
exec "$@"
