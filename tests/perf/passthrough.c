/* A loop of small MPI calls on one rank, for measuring what interposition costs per call:
 *   valgrind --tool=callgrind ./passthrough N [allreduce|send|isend]
 * with and without LD_PRELOAD=libpicoll.so (PICOLL_HOST=off: picoll passes the calls through).
 * allreduce: one MPI_Allreduce per iteration; send: MPI_Send to itself and MPI_Recv; isend:
 * MPI_Irecv, MPI_Isend, MPI_Wait on each. tests/perf/callgrind.sh runs each with and without
 * picoll and prints the difference per iteration. */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int main(int argc, char **argv)
{
    long n = argc > 1 ? atol(argv[1]) : 100000;
    const char *what = argc > 2 ? argv[2] : "allreduce";
    int in = 1, out = 0, size;
    long sum = 0;
    MPI_Request rq[2];
    MPI_Init(&argc, &argv);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    for (long i = 0; i < n; i++) {
        out = 0;
        if (strcmp(what, "send") == 0) {
            MPI_Send(&in, 1, MPI_INT, 0, 1, MPI_COMM_SELF); /* eager: it returns before the receive */
            MPI_Recv(&out, 1, MPI_INT, 0, 1, MPI_COMM_SELF, MPI_STATUS_IGNORE);
        } else if (strcmp(what, "isend") == 0) {
            MPI_Irecv(&out, 1, MPI_INT, 0, 1, MPI_COMM_SELF, &rq[0]);
            MPI_Isend(&in, 1, MPI_INT, 0, 1, MPI_COMM_SELF, &rq[1]);
            MPI_Wait(&rq[1], MPI_STATUS_IGNORE);
            MPI_Wait(&rq[0], MPI_STATUS_IGNORE);
        } else {
            MPI_Allreduce(&in, &out, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
            out /= size;
        }
        sum += out;
    }
    MPI_Finalize();
    if (sum != n) {
        fprintf(stderr, "passthrough %s: wrong sum %ld, expected %ld\n", what, sum, n);
        return 1;
    }
    return 0;
}
