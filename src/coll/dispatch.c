#include "coll/dispatch.h"
#include "coll/coll.h"
#include "stats.h"

/* Algorithms are added to these by the executors that run them; until one applies, the call is
 * handed back to the PMPI layer. */

int picoll_allreduce(picoll_comm_t *ctx, const picoll_allreduce_args_t *args, int *mpi_rc)
{
    (void)ctx;
    (void)args;
    (void)mpi_rc;
    return PICOLL_ALG_FALLBACK;
}

int picoll_allgather(picoll_comm_t *ctx, const picoll_blocks_args_t *args, int *mpi_rc)
{
    (void)ctx;
    (void)args;
    (void)mpi_rc;
    return PICOLL_ALG_FALLBACK;
}

int picoll_alltoall(picoll_comm_t *ctx, const picoll_blocks_args_t *args, int *mpi_rc)
{
    (void)ctx;
    (void)args;
    (void)mpi_rc;
    return PICOLL_ALG_FALLBACK;
}
