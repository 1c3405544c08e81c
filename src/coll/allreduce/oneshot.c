/* One-shot allreduce: every rank copies its input into its slot (its barrier line, for a few
 * bytes), and after one barrier every rank reduces all slots in rank order 0..n-1 into its
 * receive buffer. */
#include "coll/algs.h"
#include "reduce/reduce.h"

#include <mpi.h>
#include <string.h>

picoll_status_t picoll_allreduce_oneshot(picoll_shm_t *shm, const picoll_allreduce_args_t *args,
                                         int vote)
{
    size_t bytes = args->count * picoll_dtype_size(args->dtype);
    const void *src = args->sendbuf == MPI_IN_PLACE ? args->recvbuf : args->sendbuf;
    const void *srcs[shm->nlocal];
    uint64_t buf = shm->epoch + 1;

    if (vote) {
        memcpy(picoll_shm_small(shm, shm->me, buf, bytes), src, bytes);
    }
    if (!picoll_shm_barrier(shm, vote, "MPI_Allreduce")) {
        return PICOLL_DECLINED;
    }
    for (int r = 0; r < shm->nlocal; r++) {
        srcs[r] = picoll_shm_small(shm, r, buf, bytes);
    }
    picoll_reduce(args->dtype, args->op, args->recvbuf, srcs, shm->nlocal, args->count);
    return PICOLL_OK;
}
