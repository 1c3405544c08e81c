/* The partner set of a rail's members (net/partners.h). */
#include "net/partners.h"

#include <stdlib.h>

int picoll_net_partners_max(int n)
{
    int k = 0;
    while (k < 31 && (1 << k) < n) {
        k++;
    }
    return 2 * k;
}

static int cmp_int(const void *a, const void *b)
{
    int x = *(const int *)a, y = *(const int *)b;
    return (x > y) - (x < y);
}

int picoll_net_partners(int n, int me, int *out)
{
    int np = 0;
    for (long d = 1; d < n; d *= 2) {
        int up = (int)((me + d) % n), down = (int)((me - d % n + n) % n);
        out[np++] = up;
        out[np++] = down;
    }
    qsort(out, (size_t)np, sizeof(int), cmp_int);
    int k = 0;
    for (int i = 0; i < np; i++) {
        if (out[i] != me && (k == 0 || out[k - 1] != out[i])) {
            out[k++] = out[i];
        }
    }
    return k;
}

int picoll_net_partner_index(const int *peers, int np, int member)
{
    const int *p = bsearch(&member, peers, (size_t)np, sizeof(int), cmp_int);
    return p != NULL ? (int)(p - peers) : -1;
}

int picoll_net_partner_exchange(MPI_Comm comm, const int *peers, int np, const void *mine,
                                void *theirs, size_t rec, int tag)
{
    MPI_Request *r = malloc((size_t)(2 * np + 1) * sizeof(*r));
    int err = MPI_SUCCESS;

    if (r == NULL) {
        return MPI_ERR_NO_MEM;
    }
    for (int i = 0; i < np; i++) {
        int e = PMPI_Irecv((char *)theirs + (size_t)i * rec, (int)rec, MPI_BYTE, peers[i], tag,
                           comm, &r[i]);
        err = err == MPI_SUCCESS ? e : err;
        e = PMPI_Isend(mine, (int)rec, MPI_BYTE, peers[i], tag, comm, &r[np + i]);
        err = err == MPI_SUCCESS ? e : err;
    }
    /* one at a time: MPICH's MPI_STATUSES_IGNORE, a pointer constant, trips GCC's bounds check */
    for (int i = 0; i < 2 * np; i++) {
        int e = PMPI_Wait(&r[i], MPI_STATUS_IGNORE);
        err = err == MPI_SUCCESS ? e : err;
    }
    free(r);
    return err;
}
