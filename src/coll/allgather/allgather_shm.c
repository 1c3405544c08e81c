/* Allgather through the workspace: each rank copies its block into its slot; after a barrier every
 * rank copies all blocks out. Larger blocks go in chunks, through the two buffers of the slot in
 * turn, so that a rank copies the next chunk in while its peers still copy the last one out. */
#include "coll/algs.h"

#include <mpi.h>
#include <string.h>

/* Chunks small enough that a chunk copied in is still in the caches when the peers copy it out:
 * half a core's L2 (picoll_shm_chunk). On the 2-core EPYC VM (512 KiB of L2 a core), at 1-4 MiB
 * blocks, chunks of a whole 4 MiB slot ran at 0.5x-0.7x of Open MPI, 256 KiB chunks at 1.2x-1.9x;
 * 64 KiB, 128 KiB and 512 KiB did worse. */
#define ALLGATHER_CHUNK_NUM 1
#define ALLGATHER_CHUNK_DEN 2

picoll_status_t picoll_allgather_shm(picoll_shm_t *shm, const picoll_blocks_args_t *args, int vote)
{
    size_t block = args->block_bytes;
    int in_place = args->sendbuf == MPI_IN_PLACE;
    const char *mine = in_place ? (const char *)args->recvbuf + (size_t)shm->me * block
                                : (const char *)args->sendbuf;
    char *dst = args->recvbuf;
    size_t chunk = picoll_shm_chunk(shm, ALLGATHER_CHUNK_NUM, ALLGATHER_CHUNK_DEN);

    for (size_t off = 0; off < block; off += chunk) {
        size_t len = block - off < chunk ? block - off : chunk;
        uint64_t buf = shm->epoch + 1;
        if (vote) {
            memcpy(picoll_shm_slot(shm, shm->me, buf), mine + off, len);
        }
        if (!picoll_shm_barrier(shm, vote, "MPI_Allgather")) {
            return PICOLL_DECLINED;
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
