/* Allgather through the workspace: each rank copies its block into its slot; after a barrier every
 * rank copies all blocks out. Blocks larger than a slot go in chunks. */
#include "coll/algs.h"

#include <mpi.h>
#include <string.h>

picoll_status_t picoll_allgather_shm(picoll_shm_t *shm, const picoll_blocks_args_t *args, int vote)
{
    size_t block = args->block_bytes;
    int in_place = args->sendbuf == MPI_IN_PLACE;
    const char *mine = in_place ? (const char *)args->recvbuf + (size_t)shm->me * block
                                : (const char *)args->sendbuf;
    char *dst = args->recvbuf;

    for (size_t off = 0; off < block; off += shm->slot_size) {
        size_t len = block - off < shm->slot_size ? block - off : shm->slot_size;
        uint64_t buf = shm->epoch + 1;
        if (vote) {
            memcpy(picoll_shm_slot(shm, shm->me, buf), mine + off, len);
        }
        if (!picoll_shm_barrier(shm, vote, "MPI_Allgather")) {
            return PICOLL_ERR_DISABLED;
        }
        vote = 1;
        for (int r = 0; r < shm->nlocal; r++) {
            if (r == shm->me) {
                if (!in_place) {
                    memcpy(dst + (size_t)r * block + off, mine + off, len);
                }
                continue;
            }
            memcpy(dst + (size_t)r * block + off, picoll_shm_slot(shm, r, buf), len);
        }
    }
    return PICOLL_OK;
}
