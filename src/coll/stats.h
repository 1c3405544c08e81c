/* Per-collective, per-algorithm call and byte counters (PICOLL_STATS). */
#ifndef PICOLL_STATS_H
#define PICOLL_STATS_H

#include <stddef.h>
#include <mpi.h>
#include "coll/coll.h"

void picoll_stats_add(picoll_coll_t coll, int alg, size_t bytes);

/* The path of the calling thread's last intercepted collective (picoll_last_algorithm()):
 * set by every MPI_Allreduce, MPI_Allgather, MPI_Alltoall, MPI_Reduce_scatter(_block), MPI_Bcast
 * and MPI_Reduce that picoll intercepts (not their non-blocking forms), whatever
 * PICOLL_STATS says. */
extern _Thread_local int picoll_last_alg __attribute__((tls_model("initial-exec")));
static inline void picoll_last_set(picoll_coll_t coll, int alg)
{
    picoll_last_alg = 1 + (int)coll * PICOLL_ALG_MAX + alg; /* one store on the pass-through path */
}
/* Collective over comm: sums the counters and prints them from rank 0 to stdout. */
void picoll_stats_report(MPI_Comm comm);

#endif
