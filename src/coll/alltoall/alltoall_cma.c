/* Alltoall in one copy: each rank publishes the address of its send buffer, and after a barrier
 * reads its own piece of every peer's straight into its receive buffer (process_vm_readv); a
 * second barrier keeps every rank in the call until no peer reads its send buffer any more. In
 * place, a rank would overwrite the pieces its peers are reading: it votes for the workspace
 * algorithm instead, which copies every chunk in before it is overwritten. */
#include "coll/algs.h"
#include "host/cma.h"

#include <mpi.h>
#include <string.h>

picoll_status_t picoll_alltoall_cma(picoll_shm_t *shm, const picoll_blocks_args_t *args,
                                    uint32_t vote)
{
    size_t block = args->block_bytes;
    int n = shm->nlocal, me = shm->me;
    const char *src = args->sendbuf;
    char *dst = args->recvbuf;

    if (src == MPI_IN_PLACE) {
        vote &= ~(uint32_t)PICOLL_CMA_VOTE_DIRECT;
        src = dst;
    }
    picoll_cma_publish(shm, src);
    uint32_t all = picoll_shm_barrier_mask(shm, vote, "MPI_Alltoall");
    if (!(all & PICOLL_CMA_VOTE_HOST)) {
        return PICOLL_DECLINED;
    }
    if (!(all & PICOLL_CMA_VOTE_DIRECT)) {
        return PICOLL_ERR_NOT_SUPPORTED;
    }
    for (int k = 1; k < n; k++) {
        int p = (me + k) % n;
        picoll_cma_read_peer(shm, p, dst + (size_t)p * block, (size_t)me * block, block,
                             "MPI_Alltoall");
    }
    picoll_shm_barrier(shm, 1, "MPI_Alltoall");
    memcpy(dst + (size_t)me * block, src + (size_t)me * block, block);
    return PICOLL_OK;
}
