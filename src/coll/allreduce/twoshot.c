/* Two-shot allreduce: reduce-scatter then all-gather through the workspace, in chunks. Each rank
 * copies into its slot only the blocks the others reduce; rank r reduces block r from every slot
 * and from its own input in place of its slot (in rank order, so the result is the same whoever
 * computes it), publishes it, and every rank copies all blocks out. */
#include "coll/algs.h"
#include "reduce/reduce.h"

#include <mpi.h>
#include <string.h>

/* Chunks stay small enough for the copy-in, the reduction and the copy-out of one chunk to hit the
 * caches: 512 KiB was the best of 128 KiB..4 MiB on a 2-core Xeon with 2 MiB of L2 per core. */
#define TWOSHOT_CHUNK_MAX (512u << 10)

picoll_status_t picoll_allreduce_twoshot(picoll_shm_t *shm, const picoll_allreduce_args_t *args,
                                         int vote)
{
    size_t esize = picoll_dtype_size(args->dtype);
    size_t chunk =
        (shm->slot_size < TWOSHOT_CHUNK_MAX ? shm->slot_size : TWOSHOT_CHUNK_MAX) / esize;
    const char *src = args->sendbuf == MPI_IN_PLACE ? args->recvbuf : args->sendbuf;
    char *dst = args->recvbuf;
    const void *srcs[shm->nlocal];
    int n = shm->nlocal;

    for (size_t off = 0; off < args->count; off += chunk) {
        size_t cnt = args->count - off < chunk ? args->count - off : chunk;
        size_t lo, hi;
        uint64_t in = shm->epoch + 1, out = shm->epoch + 2;

        picoll_split_block(cnt, esize, n, shm->me, &lo, &hi);
        if (vote) {
            /* all but my own block: the others never read it */
            char *slot = picoll_shm_slot(shm, shm->me, in);
            memcpy(slot, src + off * esize, lo * esize);
            memcpy(slot + hi * esize, src + (off + hi) * esize, (cnt - hi) * esize);
        }
        /* only the first chunk's barrier votes: later chunks run once all agreed */
        if (!picoll_shm_barrier(shm, vote, "MPI_Allreduce")) {
            return PICOLL_DECLINED;
        }
        vote = 1;
        if (hi > lo) {
            for (int r = 0; r < n; r++) {
                srcs[r] = picoll_shm_slot(shm, r, in) + lo * esize;
            }
            srcs[shm->me] = src + (off + lo) * esize;
            picoll_reduce(args->dtype, args->op, picoll_shm_slot(shm, shm->me, out) + lo * esize,
                          srcs, n, hi - lo);
        }
        picoll_shm_barrier(shm, 1, "MPI_Allreduce");
        for (int r = 0; r < n; r++) {
            picoll_split_block(cnt, esize, n, r, &lo, &hi);
            if (hi > lo) {
                memcpy(dst + (off + lo) * esize, picoll_shm_slot(shm, r, out) + lo * esize,
                       (hi - lo) * esize);
            }
        }
    }
    return PICOLL_OK;
}
