/* A fixed sequence of collectives for the PICOLL_STATS test (run on 3 ranks; expect.sh --stats
 * checks the totals rank 0 prints at MPI_Finalize). Per rank:
 *   allreduce: MPI_COMM_WORLD 10 MPI_INT, the same in place, 3 MPI_DOUBLE; on an even/odd split
 *              5 MPI_SHORT; on MPI_COMM_SELF 7 MPI_BYTE (BXOR); one erroneous call (MPI_DATATYPE_NULL),
 *              which must not be counted
 *   allgather: MPI_COMM_WORLD 4 MPI_INT; the split 2 MPI_DOUBLE
 *   alltoall:  MPI_COMM_WORLD 2 MPI_INT in place; 3 MPI_INT received from a contiguous(3, MPI_INT)
 * Bytes are counted as the data each rank receives (allreduce: count x size; allgather and
 * alltoall: recvcount x size x communicator size). Results are checked too. */
#include "mpitest.h"

#include <stdio.h>
#include <string.h>

int main(int argc, char **argv)
{
    MPI_Comm split;
    int rank, size, ssize;

    MPI_Init(&argc, &argv);
    mt_load_picoll(mt_flag(argc, argv, "--expect-picoll"));
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    MPI_Comm_split(MPI_COMM_WORLD, rank % 2, rank, &split);
    MPI_Comm_size(split, &ssize);

    int a[10], b[10];
    for (int i = 0; i < 10; i++) {
        a[i] = rank + i;
    }
    MPI_Allreduce(a, b, 10, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    MT_CHECK(b[9] == size * (size - 1) / 2 + 9 * size, "allreduce int: %d", b[9]);
    MPI_Allreduce(MPI_IN_PLACE, a, 10, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    MT_CHECK(a[0] == size * (size - 1) / 2, "allreduce int in place: %d", a[0]);
    double d[3] = {1, 2, 3}, e[3];
    MPI_Allreduce(d, e, 3, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
    MT_CHECK(e[2] == 3.0, "allreduce double: %g", e[2]);
    short s[5] = {1, 1, 1, 1, 1}, t[5];
    MPI_Allreduce(s, t, 5, MPI_SHORT, MPI_SUM, split);
    MT_CHECK(t[4] == ssize, "allreduce short on the split: %d", t[4]);
    unsigned char x[7] = {1, 2, 3, 4, 5, 6, 7}, y[7];
    MPI_Allreduce(x, y, 7, MPI_BYTE, MPI_BXOR, MPI_COMM_SELF);
    MT_CHECK(y[6] == 7, "allreduce byte on MPI_COMM_SELF: %d", y[6]);
    int rc = MPI_Allreduce(a, b, 10, MPI_DATATYPE_NULL, MPI_SUM, MPI_COMM_WORLD);
    MT_CHECK(rc != MPI_SUCCESS, "MPI_Allreduce with MPI_DATATYPE_NULL succeeded");

    int g[4] = {rank, rank, rank, rank}, gg[4 * 16];
    MPI_Allgather(g, 4, MPI_INT, gg, 4, MPI_INT, MPI_COMM_WORLD);
    MT_CHECK(gg[4 * (size - 1)] == size - 1, "allgather int: %d", gg[4 * (size - 1)]);
    double h[2] = {rank, rank}, hh[2 * 16];
    MPI_Allgather(h, 2, MPI_DOUBLE, hh, 2, MPI_DOUBLE, split);
    MT_CHECK(hh[0] == rank % 2, "allgather double on the split: %g", hh[0]);

    int u[2 * 16], v[3 * 16], w[3 * 16];
    for (int i = 0; i < 2 * size; i++) {
        u[i] = rank * 100 + i;
    }
    MPI_Alltoall(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, u, 2, MPI_INT, MPI_COMM_WORLD);
    MT_CHECK(u[0] == 2 * rank, "alltoall in place: %d", u[0]);
    MPI_Datatype c3;
    MPI_Type_contiguous(3, MPI_INT, &c3);
    MPI_Type_commit(&c3);
    for (int i = 0; i < 3 * size; i++) {
        v[i] = rank * 100 + i;
    }
    MPI_Alltoall(v, 1, c3, w, 3, MPI_INT, MPI_COMM_WORLD);
    MT_CHECK(w[3 * (size - 1)] == (size - 1) * 100 + 3 * rank, "alltoall derived: %d",
             w[3 * (size - 1)]);
    MPI_Type_free(&c3);
    MPI_Comm_free(&split);
    return mt_finish("stats_calls");
}
