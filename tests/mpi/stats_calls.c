/* A fixed sequence of collectives for the PICOLL_STATS test (run on 3 ranks; expect.sh --stats
 * checks the totals rank 0 prints at MPI_Finalize). Per rank:
 *   allreduce: MPI_COMM_WORLD 10 MPI_INT, the same in place, 3 MPI_DOUBLE; on an even/odd split
 *              5 MPI_SHORT; on MPI_COMM_SELF 7 MPI_BYTE (BXOR); one erroneous call (MPI_DATATYPE_NULL),
 *              which must not be counted
 *   allgather: MPI_COMM_WORLD 4 MPI_INT; the split 2 MPI_DOUBLE
 *   alltoall:  MPI_COMM_WORLD 2 MPI_INT in place; 3 MPI_INT received from a contiguous(3, MPI_INT)
 *   and on host buffers, which the MPI runs, once each on MPI_COMM_WORLD:
 *   reduce_scatter_block 2 MPI_INT; reduce_scatter (rank i gets i + 1 MPI_INT); bcast 5 MPI_INT
 *   from rank 1; reduce 4 MPI_DOUBLE to rank 0; allgatherv (rank i gives i + 1 MPI_DOUBLE);
 *   alltoallv of uneven pieces (rank i sends i + 2j + 1 MPI_INT to rank j)
 * Bytes are counted as the call's data on each rank (allreduce, bcast, reduce: count x size;
 * allgather and alltoall: recvcount x size x communicator size; reduce_scatter_block: recvcount x
 * size x communicator size; the v-forms: the receive counts' sum x size). Results are checked too,
 * and rank 0 prints the v-forms' totals as plain loops over every rank's counts compute them
 * ("stats_calls: expect alltoallv=CALLS/BYTES"), which the test matches against picoll's. */
#include "mpitest.h"

#include <stdio.h>
#include <string.h>

enum { MAXNP = 16 };

/* Rank i's piece for rank j in the alltoallv, in MPI_INT. */
static int piece(int i, int j)
{
    return i + 2 * j + 1;
}

/* Rank 0 prints what the stats must show for a v-form, every rank's receive counts summed by a
 * plain loop: CALLS (one a rank) and BYTES over all ranks. count(r, i): rank r's i-th count. */
static void expect_v(const char *coll, int rank, int size, int (*count)(int r, int i), int elem)
{
    long bytes = 0;
    for (int r = 0; r < size; r++) {
        for (int i = 0; i < size; i++) {
            bytes += (long)count(r, i) * elem;
        }
    }
    if (rank == 0) {
        printf("stats_calls: expect %s=%d/%ld\n", coll, size, bytes);
    }
}

/* The alltoallv's receive counts: rank i's piece for rank r. */
static int alltoallv_count(int r, int i)
{
    return piece(i, r);
}

/* The reduce-scatter's and allgatherv's receive counts, the same on every rank. */
static int rising_count(int r, int i)
{
    (void)r;
    return i + 1;
}

/* The other collectives on host buffers: the MPI runs them (picoll's device path only takes
 * device buffers); the stats count their bytes all the same. */
static void uneven_calls(int rank, int size)
{
    int a[MAXNP * (MAXNP + 1) / 2], b[MAXNP], counts[MAXNP], displs[MAXNP];
    int rcounts[MAXNP], rdispls[MAXNP];
    int send[3 * MAXNP * MAXNP], recv[3 * MAXNP * MAXNP], sum = 0, rsum = 0;

    for (int i = 0; i < 2 * size; i++) {
        a[i] = i;
    }
    MPI_Reduce_scatter_block(a, b, 2, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    MT_CHECK(b[1] == size * (2 * rank + 1), "reduce_scatter_block: %d", b[1]);
    for (int i = 0; i < size; i++) {
        counts[i] = i + 1;
        sum += counts[i];
    }
    for (int i = 0; i < sum; i++) {
        a[i] = 1;
    }
    MPI_Reduce_scatter(a, b, counts, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    MT_CHECK(b[rank] == size, "reduce_scatter: %d", b[rank]);
    expect_v("reduce_scatter", rank, size, rising_count, (int)sizeof(int));

    int c[5] = {rank, rank, rank, rank, rank};
    MPI_Bcast(c, 5, MPI_INT, 1 % size, MPI_COMM_WORLD);
    MT_CHECK(c[4] == 1 % size, "bcast: %d", c[4]);
    double d[4] = {1, 1, 1, rank}, e[4];
    MPI_Reduce(d, e, 4, MPI_DOUBLE, MPI_SUM, 0, MPI_COMM_WORLD);
    MT_CHECK(rank != 0 || e[0] == size, "reduce: %g", e[0]);

    double g[MAXNP], gg[MAXNP * (MAXNP + 1) / 2];
    for (int i = 0, off = 0; i < size; i++) {
        displs[i] = off;
        off += counts[i];
    }
    for (int i = 0; i <= rank; i++) {
        g[i] = rank;
    }
    MPI_Allgatherv(g, rank + 1, MPI_DOUBLE, gg, counts, displs, MPI_DOUBLE, MPI_COMM_WORLD);
    MT_CHECK(gg[displs[size - 1]] == size - 1, "allgatherv: %g", gg[displs[size - 1]]);
    expect_v("allgatherv", rank, size, rising_count, (int)sizeof(double));

    sum = 0;
    for (int j = 0; j < size; j++) {
        counts[j] = piece(rank, j);
        displs[j] = sum;
        rcounts[j] = piece(j, rank);
        rdispls[j] = rsum;
        for (int k = 0; k < counts[j]; k++) {
            send[sum + k] = rank * 1000 + j;
        }
        sum += counts[j];
        rsum += rcounts[j];
    }
    MPI_Alltoallv(send, counts, displs, MPI_INT, recv, rcounts, rdispls, MPI_INT, MPI_COMM_WORLD);
    for (int j = 0; j < size; j++) {
        int v = recv[rdispls[j] + rcounts[j] - 1];
        MT_CHECK(v == j * 1000 + rank, "alltoallv from rank %d: %d", j, v);
    }
    expect_v("alltoallv", rank, size, alltoallv_count, (int)sizeof(int));
}

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
    /* an erroneous call counts nowhere (MPICH 5.0 asserts on it, without picoll too) */
    if (mt_mpich_version() < 50000) {
        int rc = MPI_Allreduce(a, b, 10, MPI_DATATYPE_NULL, MPI_SUM, MPI_COMM_WORLD);
        MT_CHECK(rc != MPI_SUCCESS, "MPI_Allreduce with MPI_DATATYPE_NULL succeeded");
    }

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
    uneven_calls(rank, size);
    return mt_finish("stats_calls");
}
