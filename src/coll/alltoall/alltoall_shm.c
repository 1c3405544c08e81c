/* Alltoall through the workspace: each rank lays out, in its slot, the piece of its block for
 * every peer; after a barrier each rank copies its own piece from every slot. Blocks larger than
 * slot/n go in chunks. In place works because a chunk is copied in before it is overwritten. */
#include "coll/algs.h"

#include <mpi.h>
#include <string.h>

picoll_status_t picoll_alltoall_shm(picoll_shm_t *shm, const picoll_blocks_args_t *args, int vote)
{
    size_t block = args->block_bytes;
    int n = shm->nlocal;
    size_t piece_max = shm->slot_size / (size_t)n;
    const char *src = args->sendbuf == MPI_IN_PLACE ? args->recvbuf : args->sendbuf;
    char *dst = args->recvbuf;

    for (size_t off = 0; off < block; off += piece_max) {
        size_t piece = block - off < piece_max ? block - off : piece_max;
        uint64_t buf = shm->epoch + 1;
        if (vote) {
            char *slot = picoll_shm_slot(shm, shm->me, buf);
            for (int p = 0; p < n; p++) {
                memcpy(slot + (size_t)p * piece, src + (size_t)p * block + off, piece);
            }
        }
        if (!picoll_shm_barrier(shm, vote, "MPI_Alltoall")) {
            return PICOLL_ERR_DISABLED;
        }
        vote = 1;
        for (int p = 0; p < n; p++) {
            memcpy(dst + (size_t)p * block + off,
                   picoll_shm_slot(shm, p, buf) + (size_t)shm->me * piece, piece);
        }
    }
    return PICOLL_OK;
}
