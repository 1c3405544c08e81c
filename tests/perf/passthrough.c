/* Loops of small MPI calls on one rank, for measuring what interposition costs per call:
 *   valgrind --tool=callgrind ./passthrough N
 * with and without LD_PRELOAD=libpicoll.so (PICOLL_HOST=off: picoll passes the calls through).
 * Each kind of call has a loop function of its own, N iterations: loop_allreduce (one
 * MPI_Allreduce), loop_send (MPI_Irecv, MPI_Send to itself, MPI_Wait), loop_isend (MPI_Irecv, MPI_Isend,
 * MPI_Wait on each). tests/perf/callgrind.sh reads each function's inclusive cost, with and
 * without picoll, and prints the difference per call. */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>

#define LOOP __attribute__((noinline)) static long

LOOP loop_allreduce(long n, int size)
{
    int in = 1, out = 0;
    long sum = 0;
    for (long i = 0; i < n; i++) {
        MPI_Allreduce(&in, &out, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
        sum += out / size;
    }
    return sum;
}

LOOP loop_send(long n)
{
    int in = 1, out = 0;
    long sum = 0;
    MPI_Request rq;
    for (long i = 0; i < n; i++) {
        /* the receive first: a send to oneself need not return before it (MPICH's does not) */
        MPI_Irecv(&out, 1, MPI_INT, 0, 1, MPI_COMM_SELF, &rq);
        MPI_Send(&in, 1, MPI_INT, 0, 1, MPI_COMM_SELF);
        MPI_Wait(&rq, MPI_STATUS_IGNORE);
        sum += out;
    }
    return sum;
}

LOOP loop_isend(long n)
{
    int in = 1, out = 0;
    long sum = 0;
    MPI_Request rq[2];
    for (long i = 0; i < n; i++) {
        MPI_Irecv(&out, 1, MPI_INT, 0, 1, MPI_COMM_SELF, &rq[0]);
        MPI_Isend(&in, 1, MPI_INT, 0, 1, MPI_COMM_SELF, &rq[1]);
        MPI_Wait(&rq[1], MPI_STATUS_IGNORE);
        MPI_Wait(&rq[0], MPI_STATUS_IGNORE);
        sum += out;
    }
    return sum;
}

int main(int argc, char **argv)
{
    long n = argc > 1 ? atol(argv[1]) : 100000;
    int size;
    MPI_Init(&argc, &argv);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    long a = loop_allreduce(n, size), s = loop_send(n), i = loop_isend(n);
    MPI_Finalize();
    if (a != n || s != n || i != n) {
        fprintf(stderr, "passthrough: wrong sums %ld %ld %ld, expected %ld\n", a, s, i, n);
        return 1;
    }
    return 0;
}
