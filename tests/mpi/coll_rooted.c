/* The collectives picoll intercepts only to stage CUDA buffers (MPI_Bcast, MPI_Reduce,
 * MPI_Gather, MPI_Scatter, MPI_Allgatherv, MPI_Alltoallv, MPI_Reduce_scatter_block), on host
 * buffers: results against plain loops, in place and not, roots 0 and last, several counts, and
 * the bytes between the blocks of the v-collectives left alone. Run preloaded, with staging on or
 * off: host buffers must pass through unchanged either way. Where the MPI defines MPIX_C_FLOAT16
 * (MPICH) and the compiler has _Float16, MPI_Reduce and MPI_Reduce_scatter_block on it too, with
 * picoll preloaded only: MPICH 4.0 alone aborts reducing it, picoll passes it on as MPI_UINT16_T
 * with its own op. */
#include "mpitest.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define SENTINEL (-777)

static int val(int rank, long i)
{
    return (int)((rank + 1) * 31 + (i * 7) % 1000);
}

static int *ints(size_t n)
{
    int *p = malloc((n + 1) * sizeof(int));
    for (size_t i = 0; i <= n; i++) {
        p[i] = SENTINEL;
    }
    return p;
}

static void bcast(int n, int root)
{
    int *b = ints(n);
    for (int i = 0; i < n; i++) {
        b[i] = mt_rank == root ? val(root, i) : SENTINEL;
    }
    MT_CHECK(MPI_Bcast(b, n, MPI_INT, root, MPI_COMM_WORLD) == MPI_SUCCESS, "bcast failed");
    for (int i = 0; i < n; i++) {
        MT_CHECK(b[i] == val(root, i), "bcast n=%d root=%d: [%d] = %d, expected %d", n, root, i,
                 b[i], val(root, i));
    }
    free(b);
}

static void reduce(int n, int root, int inplace)
{
    int *s = ints(n), *r = ints(n);
    int here = inplace && mt_rank == root;
    for (int i = 0; i < n; i++) {
        (here ? r : s)[i] = val(mt_rank, i);
    }
    MPI_Reduce(here ? MPI_IN_PLACE : s, mt_rank == root ? r : NULL, n, MPI_INT, MPI_SUM, root,
               MPI_COMM_WORLD);
    for (int i = 0; mt_rank == root && i < n; i++) {
        int e = 0;
        for (int k = 0; k < mt_size; k++) {
            e += val(k, i);
        }
        MT_CHECK(r[i] == e, "reduce n=%d root=%d%s: [%d] = %d, expected %d", n, root,
                 inplace ? " in place" : "", i, r[i], e);
    }
    free(s), free(r);
}

static void gather(int n, int root, int inplace)
{
    int *s = ints(n), *r = ints((size_t)n * mt_size);
    int here = inplace && mt_rank == root;
    for (int i = 0; i < n; i++) {
        s[i] = val(mt_rank, i);
        if (here) {
            r[mt_rank * n + i] = val(mt_rank, i);
        }
    }
    MPI_Gather(here ? MPI_IN_PLACE : s, n, MPI_INT, mt_rank == root ? r : NULL, n, MPI_INT, root,
               MPI_COMM_WORLD);
    for (int k = 0; mt_rank == root && k < mt_size; k++) {
        for (int i = 0; i < n; i++) {
            MT_CHECK(r[k * n + i] == val(k, i), "gather n=%d root=%d%s: block %d [%d] = %d", n,
                     root, inplace ? " in place" : "", k, i, r[k * n + i]);
        }
    }
    free(s), free(r);
}

static void scatter(int n, int root, int inplace)
{
    int *s = ints((size_t)n * mt_size), *r = ints(n);
    int here = inplace && mt_rank == root;
    for (long i = 0; i < (long)n * mt_size; i++) {
        s[i] = val(root, i);
    }
    MPI_Scatter(mt_rank == root ? s : NULL, n, MPI_INT, here ? MPI_IN_PLACE : r, n, MPI_INT, root,
                MPI_COMM_WORLD);
    for (int i = 0; !here && i < n; i++) {
        MT_CHECK(r[i] == val(root, (long)mt_rank * n + i), "scatter n=%d root=%d: [%d] = %d", n,
                 root, i, r[i]);
    }
    free(s), free(r);
}

static void allgatherv(int n, int inplace)
{
    int *counts = malloc(mt_size * sizeof(int)), *displs = malloc(mt_size * sizeof(int));
    int total = 0;
    for (int k = 0; k < mt_size; k++) {
        counts[k] = n + k;
        displs[k] = total;
        total += n + k + 1; /* one untouched int after each block */
    }
    int *s = ints(n + mt_rank), *r = ints(total);
    for (int i = 0; i < n + mt_rank; i++) {
        s[i] = val(mt_rank, i);
        if (inplace) {
            r[displs[mt_rank] + i] = val(mt_rank, i);
        }
    }
    MPI_Allgatherv(inplace ? MPI_IN_PLACE : s, n + mt_rank, MPI_INT, r, counts, displs, MPI_INT,
                   MPI_COMM_WORLD);
    for (int k = 0; k < mt_size; k++) {
        for (int i = 0; i < counts[k]; i++) {
            MT_CHECK(r[displs[k] + i] == val(k, i), "allgatherv n=%d%s: block %d [%d] = %d", n,
                     inplace ? " in place" : "", k, i, r[displs[k] + i]);
        }
        MT_CHECK(r[displs[k] + counts[k]] == SENTINEL,
                 "allgatherv n=%d: the gap after block %d "
                 "was written",
                 n, k);
    }
    free(s), free(r), free(counts), free(displs);
}

/* r sends n + (r + j) % 3 ints to j; element i from r to j is r * 100003 + j * 1009 + i */
static void alltoallv(int n, int inplace)
{
    int *counts = malloc(mt_size * sizeof(int)), *displs = malloc(mt_size * sizeof(int));
    int total = 0;
    for (int j = 0; j < mt_size; j++) {
        counts[j] = n + (mt_rank + j) % 3;
        displs[j] = total;
        total += counts[j] + 1;
    }
    int *s = ints(total), *r = ints(total);
    for (int j = 0; j < mt_size; j++) {
        for (int i = 0; i < counts[j]; i++) {
            (inplace ? r : s)[displs[j] + i] = mt_rank * 100003 + j * 1009 + i;
        }
    }
    MPI_Alltoallv(inplace ? MPI_IN_PLACE : s, counts, displs, MPI_INT, r, counts, displs, MPI_INT,
                  MPI_COMM_WORLD);
    for (int j = 0; j < mt_size; j++) {
        for (int i = 0; i < counts[j]; i++) {
            int e = j * 100003 + mt_rank * 1009 + i;
            MT_CHECK(r[displs[j] + i] == e, "alltoallv n=%d%s: from %d [%d] = %d, expected %d", n,
                     inplace ? " in place" : "", j, i, r[displs[j] + i], e);
        }
        MT_CHECK(r[displs[j] + counts[j]] == SENTINEL,
                 "alltoallv n=%d: the gap after block %d "
                 "was written",
                 n, j);
    }
    free(s), free(r), free(counts), free(displs);
}

static void reduce_scatter_block(int n, int inplace)
{
    size_t all = (size_t)n * mt_size;
    int *s = ints(all), *r = ints(all);
    for (size_t i = 0; i < all; i++) {
        (inplace ? r : s)[i] = val(mt_rank, (long)i);
    }
    MPI_Reduce_scatter_block(inplace ? MPI_IN_PLACE : s, r, n, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    for (int i = 0; i < n; i++) {
        int e = 0;
        for (int k = 0; k < mt_size; k++) {
            e += val(k, (long)mt_rank * n + i);
        }
        MT_CHECK(r[i] == e, "reduce_scatter_block n=%d%s: [%d] = %d, expected %d", n,
                 inplace ? " in place" : "", i, r[i], e);
    }
    free(s), free(r);
}

#if defined(MPIX_C_FLOAT16) && defined(__FLT16_MAX__)
/* Small integers: every sum exact in float16, in any order. */
static _Float16 hval(int rank, long i)
{
    return (_Float16)((rank + 1) * 3 + i % 11);
}

static void half_reduces(int n, int root)
{
    size_t all = (size_t)n * mt_size;
    _Float16 *s = malloc((all + 1) * sizeof(_Float16)), *r = malloc((all + 1) * sizeof(_Float16));
    for (size_t i = 0; i < all; i++) {
        s[i] = hval(mt_rank, (long)i);
        r[i] = -1;
    }
    int rc = MPI_Reduce(s, r, n, MPIX_C_FLOAT16, MPI_MAX, root, MPI_COMM_WORLD);
    MT_CHECK(rc == MPI_SUCCESS, "float16 reduce n=%d: error %d", n, rc);
    for (int i = 0; mt_rank == root && i < n; i++) {
        _Float16 e = hval(mt_size - 1, i); /* the largest rank's value is the largest */
        MT_CHECK(r[i] == e, "float16 reduce MAX n=%d root=%d: [%d] = %g, expected %g", n, root, i,
                 (double)r[i], (double)e);
    }
    rc = MPI_Reduce_scatter_block(s, r, n, MPIX_C_FLOAT16, MPI_SUM, MPI_COMM_WORLD);
    MT_CHECK(rc == MPI_SUCCESS, "float16 reduce_scatter_block n=%d: error %d", n, rc);
    for (int i = 0; i < n; i++) {
        double e = 0;
        for (int k = 0; k < mt_size; k++) {
            e += (double)hval(k, (long)mt_rank * n + i);
        }
        MT_CHECK((double)r[i] == e, "float16 reduce_scatter_block SUM n=%d: [%d] = %g, expected %g",
                 n, i, (double)r[i], e);
    }
    free(s), free(r);
}
#endif

int main(int argc, char **argv)
{
    static const int counts[] = {0, 1, 5, 1000, 70000};
    MPI_Init(&argc, &argv);
    mt_load_picoll(mt_flag(argc, argv, "--expect-picoll"));
    for (unsigned c = 0; c < sizeof(counts) / sizeof(counts[0]); c++) {
        int n = counts[c];
        for (int root = 0; root<mt_size; root += mt_size> 1 ? mt_size - 1 : 1) {
            bcast(n, root);
            for (int inplace = 0; inplace < 2; inplace++) {
                if (!inplace || !mt_reduce_in_place_broken(root, (size_t)n * sizeof(int))) {
                    reduce(n, root, inplace);
                }
                gather(n, root, inplace);
                scatter(n, root, inplace);
            }
        }
        for (int inplace = 0; inplace < 2; inplace++) {
            allgatherv(n, inplace);
            alltoallv(n, inplace);
            reduce_scatter_block(n, inplace);
        }
#if defined(MPIX_C_FLOAT16) && defined(__FLT16_MAX__)
        if (mt_picoll.found && n > 0) {
            half_reduces(n, mt_size - 1);
        }
#endif
    }
    return mt_finish("coll_rooted");
}
