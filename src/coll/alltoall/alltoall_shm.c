/* Alltoall through the workspace: each rank lays out, in its slot, the piece of its block for
 * every peer; after a barrier each rank copies its own piece from every slot, and its piece for
 * itself straight across. Larger blocks go in chunks, through the two buffers of the slot in turn.
 * In place works because a chunk is copied in before it is overwritten, and the rank's own piece
 * is already where it belongs. */
#include "coll/algs.h"

#include <mpi.h>
#include <string.h>

/* Bytes of a slot laid out per step, one core's L2 (picoll_shm_chunk): the pieces of one step stay
 * in the caches until the peers have copied them out. On the 2-core EPYC VM (512 KiB of L2 a
 * core), 512 KiB beat 256 KiB, 1 MiB and the whole 4 MiB slot (which lost to Open MPI from 4 MiB
 * blocks, 0.5x-0.9x). */

picoll_status_t picoll_alltoall_shm(picoll_shm_t *shm, const picoll_blocks_args_t *args, int vote)
{
    size_t block = args->block_bytes;
    int n = shm->nlocal, me = shm->me, in_place = args->sendbuf == MPI_IN_PLACE;
    size_t room = picoll_shm_chunk(shm, 1, 1);
    size_t piece_max = room / (size_t)n;
    if (piece_max == 0) {
        return PICOLL_DECLINED; /* more ranks than bytes in a slot: the same on every rank */
    }
    const char *src = in_place ? args->recvbuf : args->sendbuf;
    char *dst = args->recvbuf;

    for (size_t off = 0; off < block; off += piece_max) {
        size_t piece = block - off < piece_max ? block - off : piece_max;
        uint64_t buf = shm->epoch + 1;
        if (vote) {
            char *slot = picoll_shm_slot(shm, me, buf);
            for (int p = 0; p < n; p++) {
                if (p != me) {
                    memcpy(slot + (size_t)p * piece, src + (size_t)p * block + off, piece);
                }
            }
        }
        if (!picoll_shm_barrier(shm, vote, "MPI_Alltoall")) {
            return PICOLL_DECLINED;
        }
        vote = 1;
        for (int k = 1; k < n; k++) {
            int p = (me + k) % n;
            memcpy(dst + (size_t)p * block + off, picoll_shm_slot(shm, p, buf) + (size_t)me * piece,
                   piece);
        }
        /* my own piece goes straight across (in place it is already there) */
        if (!in_place) {
            memcpy(dst + (size_t)me * block + off, src + (size_t)me * block + off, piece);
        }
    }
    return PICOLL_OK;
}
