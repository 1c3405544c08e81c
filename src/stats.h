/* Per-collective, per-algorithm call and byte counters (PICOLL_STATS). */
#ifndef PICOLL_STATS_H
#define PICOLL_STATS_H

#include <stddef.h>
#include <mpi.h>
#include "coll/coll.h"

void picoll_stats_add(picoll_coll_t coll, int alg, size_t bytes);
/* Collective over comm: sums the counters and prints them from rank 0 to stdout. */
void picoll_stats_report(MPI_Comm comm);

#endif
