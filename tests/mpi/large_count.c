/* The MPI-4 large-count entry points of the accelerated collectives (MPI_Allreduce_c,
 * MPI_Allgather_c, MPI_Alltoall_c; MPICH 4 and the MPI-5 standard ABI have them, Open MPI 4.1
 * does not) reach picoll's own algorithms, not only the MPI: run with PICOLL_HOST=on, each
 * call's path (picoll_last_algorithm) must be one of picoll's, and each result equals a plain
 * loop's, bit for bit. Without the _c functions the test is skipped, saying so. */
#include "mpitest.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* the MPI-5 standard ABI's mpi.h (mpi_abi.h) declares them but names no implementation */
#if MPI_VERSION >= 4 && (defined(MPICH) || defined(MPI_ABI_VERSION))
#define HAVE_LARGE_COUNT 1
#endif

#ifdef HAVE_LARGE_COUNT
/* A zero-count MPI_Allreduce goes to the MPI: the last path reads "fallback" until a call of
 * picoll's own runs, so a _c call that never reached picoll is seen. */
static void mark(void)
{
    int x = 0;
    MPI_Allreduce(&x, &x + 1, 0, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
}

static void check_path(const char *call)
{
    const char *alg = mt_picoll.last_algorithm != NULL ? mt_picoll.last_algorithm() : "?";
    MT_CHECK(strcmp(alg, "fallback") != 0 && strcmp(alg, "?") != 0,
             "%s went to the MPI (path %s), not to picoll", call, alg);
}

static int value(int rank, MPI_Count i)
{
    return (int)(mt_rand(11, (uint64_t)rank, (uint64_t)i) % 1000);
}

static void run(MPI_Count n)
{
    int *s = malloc(sizeof(int) * (size_t)n * (size_t)mt_size);
    int *r = malloc(sizeof(int) * (size_t)n * (size_t)mt_size);
    for (MPI_Count i = 0; i < n * mt_size; i++) {
        s[i] = value(mt_rank, i);
    }
    mark();
    MPI_Allreduce_c(s, r, n, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    check_path("MPI_Allreduce_c");
    for (MPI_Count i = 0; i < n; i++) {
        int want = 0;
        for (int p = 0; p < mt_size; p++) {
            want += value(p, i);
        }
        MT_CHECK(r[i] == want, "MPI_Allreduce_c count %lld: [%lld] = %d, want %d", (long long)n,
                 (long long)i, r[i], want);
    }
    mark();
    MPI_Allgather_c(s, n, MPI_INT, r, n, MPI_INT, MPI_COMM_WORLD);
    check_path("MPI_Allgather_c");
    for (MPI_Count i = 0; i < n * mt_size; i++) {
        MT_CHECK(r[i] == value((int)(i / n), i % n), "MPI_Allgather_c count %lld: [%lld] wrong",
                 (long long)n, (long long)i);
    }
    mark();
    MPI_Alltoall_c(s, n, MPI_INT, r, n, MPI_INT, MPI_COMM_WORLD);
    check_path("MPI_Alltoall_c");
    for (MPI_Count i = 0; i < n * mt_size; i++) {
        /* block p of this rank's result is block rank of p's send buffer */
        MT_CHECK(r[i] == value((int)(i / n), mt_rank * n + i % n),
                 "MPI_Alltoall_c count %lld: [%lld] wrong", (long long)n, (long long)i);
    }
    free(s);
    free(r);
}
#endif

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    PMPI_Comm_rank(MPI_COMM_WORLD, &mt_rank);
    PMPI_Comm_size(MPI_COMM_WORLD, &mt_size);
#ifdef HAVE_LARGE_COUNT
    mt_load_picoll(1);
    run(1);
    run(1000);
    run(70000);
    return mt_finish("large_count");
#else
    (void)argc;
    (void)argv;
    return mt_skip("this MPI has no MPI-4 large-count functions (MPI_Allreduce_c)");
#endif
}
