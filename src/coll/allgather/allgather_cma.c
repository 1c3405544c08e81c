/* Allgather in one copy: each rank publishes the address of its block, and after a barrier reads
 * every peer's block straight into its receive buffer (process_vm_readv); a second barrier keeps
 * every rank in the call until no peer reads its block any more. */
#include "coll/algs.h"
#include "host/cma.h"

#include <mpi.h>
#include <string.h>

picoll_status_t picoll_allgather_cma(picoll_shm_t *shm, const picoll_blocks_args_t *args,
                                     uint32_t vote)
{
    size_t block = args->block_bytes;
    int n = shm->nlocal, me = shm->me;
    int in_place = args->sendbuf == MPI_IN_PLACE;
    char *dst = args->recvbuf;
    const char *mine = in_place ? dst + (size_t)me * block : (const char *)args->sendbuf;

    picoll_cma_publish(shm, mine);
    uint32_t all = picoll_shm_barrier_mask(shm, vote, "MPI_Allgather");
    if (!(all & PICOLL_CMA_VOTE_HOST)) {
        return PICOLL_DECLINED;
    }
    if (!(all & PICOLL_CMA_VOTE_DIRECT)) {
        return PICOLL_ERR_NOT_SUPPORTED;
    }
    /* starting at the next rank spreads the readers over the peers */
    for (int k = 1; k < n; k++) {
        int r = (me + k) % n;
        picoll_cma_read_peer(shm, r, dst + (size_t)r * block, 0, block, "MPI_Allgather");
    }
    picoll_shm_barrier(shm, 1, "MPI_Allgather");
    /* no peer waits for this one */
    if (!in_place) {
        memcpy(dst + (size_t)me * block, mine, block);
    }
    return PICOLL_OK;
}
