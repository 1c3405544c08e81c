/* A loop of small MPI_Allreduce calls, for measuring what interposition costs per call:
 *   valgrind --tool=callgrind --toggle-collect=MPI_Allreduce ./passthrough 100000
 * with and without LD_PRELOAD=libpicoll.so (PICOLL_HOST=off: picoll passes the call through).
 * tests/perf/callgrind.sh does both and prints the difference per call. */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>

int main(int argc, char **argv)
{
    long n = argc > 1 ? atol(argv[1]) : 100000;
    int in = 1, out = 0;
    long sum = 0;
    MPI_Init(&argc, &argv);
    for (long i = 0; i < n; i++) {
        MPI_Allreduce(&in, &out, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
        sum += out;
    }
    int size;
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    MPI_Finalize();
    if (sum != n * size) {
        fprintf(stderr, "passthrough: wrong sum %ld, expected %ld\n", sum, n * size);
        return 1;
    }
    return 0;
}
