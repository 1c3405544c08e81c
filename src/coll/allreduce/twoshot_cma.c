/* Two-shot allreduce in single copies: each rank publishes the addresses of its input and of its
 * receive buffer; after one barrier rank r reads block r of every peer's input with
 * process_vm_readv, a chunk at a time, into its own workspace buffers (no peer reads them in this
 * call) and reduces it with its own input, in rank order, straight into its receive buffer; after
 * a second barrier every rank reads the peers' reduced blocks from their receive buffers into its
 * own, and a third keeps every rank in the call until nobody reads its buffers any more.
 *
 * Against the workspace's two-shot, the copy of the input into the workspace and the copy of the
 * result out of it are gone: every byte crosses between the processes once each way. The sums are
 * the same, bit for bit (same blocks, same rank order). In place, a rank's own block of its
 * receive buffer is its input, which only it reads: it is reduced into the workspace and copied
 * back (the reduction loops take no aliased operands). */
#include "coll/algs.h"
#include "host/cma.h"
#include "reduce/reduce.h"

#include <mpi.h>
#include <string.h>

/* Chunks small enough for the peers' chunks and the reduction's output to stay in the caches, as
 * in the workspace algorithms (not tuned on its own: with 256 KiB this algorithm already ran at
 * about half the speed of the workspace two-shot, bound by process_vm_readv's copy rate). */
#define CMA_CHUNK_MAX (256u << 10)

picoll_status_t picoll_allreduce_cma(picoll_shm_t *shm, const picoll_allreduce_args_t *args,
                                     uint32_t vote)
{
    const char *coll = "MPI_Allreduce";
    size_t esize = picoll_dtype_size(args->dtype);
    int n = shm->nlocal, me = shm->me;
    int in_place = args->sendbuf == MPI_IN_PLACE;
    const char *src = in_place ? args->recvbuf : args->sendbuf;
    char *dst = args->recvbuf;
    /* my two workspace buffers, one after the other: a chunk for each peer and one for the output
     * (selection keeps each at least PICOLL_CMA_SCRATCH_MIN bytes) */
    char *scratch = picoll_shm_slot(shm, me, 0);
    size_t room = 2 * shm->slot_size / (size_t)n;
    size_t chunk = (room < CMA_CHUNK_MAX ? room : CMA_CHUNK_MAX) / esize;
    const void *srcs[n];
    size_t lo, hi;

    picoll_cma_publish(shm, src);
    picoll_cma_publish_result(shm, dst);
    uint32_t all = picoll_shm_barrier_mask(shm, vote, coll);
    if (!(all & PICOLL_CMA_VOTE_HOST)) {
        return PICOLL_DECLINED;
    }
    if (!(all & PICOLL_CMA_VOTE_DIRECT)) {
        return PICOLL_ERR_NOT_SUPPORTED;
    }

    picoll_split_block(args->count, esize, n, me, &lo, &hi);
    for (size_t off = lo; off < hi; off += chunk) {
        size_t cnt = hi - off < chunk ? hi - off : chunk;
        /* starting at the next rank spreads the readers over the peers */
        for (int k = 1; k < n; k++) {
            int r = (me + k) % n;
            char *tmp = scratch + (size_t)(k - 1) * chunk * esize;
            picoll_cma_read_peer(shm, r, tmp, off * esize, cnt * esize, coll);
            srcs[r] = tmp;
        }
        srcs[me] = src + off * esize;
        if (in_place) {
            char *out = scratch + (size_t)(n - 1) * chunk * esize;
            picoll_reduce(args->dtype, args->op, out, srcs, n, cnt);
            memcpy(dst + off * esize, out, cnt * esize);
        } else {
            picoll_reduce(args->dtype, args->op, dst + off * esize, srcs, n, cnt);
        }
    }
    picoll_shm_barrier(shm, 1, coll);
    for (int k = 1; k < n; k++) {
        int r = (me + k) % n;
        picoll_split_block(args->count, esize, n, r, &lo, &hi);
        if (hi > lo) {
            picoll_cma_read_peer_result(shm, r, dst + lo * esize, lo * esize, (hi - lo) * esize,
                                        coll);
        }
    }
    picoll_shm_barrier(shm, 1, coll);
    return PICOLL_OK;
}
