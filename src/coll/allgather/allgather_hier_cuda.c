/* Allgather between nodes on device buffers (ctx->cuda_hier, ranks placed by node: node x holds
 * ranks x * n to x * n + n - 1, so its part of the receive buffer is one piece): the node's
 * allgather on the device into its part; slice l of that part (a 1/n share) round the ring of
 * the nodes on rail l through pinned host memory, each node's slice copied into place as it
 * arrives; then, for each other node, the node's allgatherv of its slices on the device. */
#include "coll/hier_cuda.h"
#include "coll/algs.h"
#include "coll/vote.h"
#include "mem/pinned.h"
#include "util/log.h"

picoll_status_t picoll_allgather_hier_cuda(picoll_coll_ctx_t *ctx, const picoll_blocks_args_t *args,
                                           int *mpi_rc)
{
    static const char name[] = "MPI_Allgather";
    picoll_hier_t *h = ctx->hier;
    int n = ctx->shm->nlocal, me = ctx->shm->me, nodes = h->num_nodes;
    size_t part = args->block_bytes * (size_t)n, total = args->block_bytes * (size_t)ctx->size;
    picoll_meminfo_t r;

    picoll_status_t status = picoll_hier_cuda_begin(ctx, args->sendbuf, args->recvbuf,
                                                    PICOLL_DT_NONE, args->eligible, name, &r);
    if (status != PICOLL_OK) {
        return status;
    }
    char *recv = args->recvbuf, *mine = recv + (size_t)h->node * part;
    status = picoll_cuda_allgather(ctx->cuda, args->sendbuf, mine, args->block_bytes);
    /* slice l of a part: [lo_l, hi_l), 64-byte multiples but the last */
    size_t lens[PICOLL_CUDA_MAX_LOCAL], offs[PICOLL_CUDA_MAX_LOCAL], lo, hi;
    for (int l = 0; l < n; l++) {
        picoll_split_block(part, 1, n, l, &lo, &hi);
        lens[l] = hi - lo;
        offs[l] = lo;
    }
    size_t len = lens[me];
    picoll_cudrv_pipe_t pipe;
    picoll_hier_back_t back = {
        .ctx = r.context, .dev = recv + offs[me], .len = len, .stride = part};
    if (status == PICOLL_OK && len > 0) {
        back.host = picoll_hier_cuda_host(name, len * (size_t)nodes, r.context);
        back.pipe = picoll_cudrv_pipe_open(&pipe, r.context, 1) == PICOLL_OK ? &pipe : NULL;
        status =
            picoll_cudrv_copy(back.host + (size_t)h->node * len, mine + offs[me], len, r.context);
        if (status == PICOLL_OK) {
            status =
                picoll_allgather_hier_rails(h, back.host, len, picoll_hier_back_arrived, &back);
        }
        status = picoll_hier_back_close(&back, status);
        picoll_pinned_put(back.host);
    }
    for (int x = 0; x < nodes && status == PICOLL_OK; x++) {
        if (x != h->node) {
            picoll_vote_relaunch(ctx, &r);
            status = picoll_cuda_allgatherv(ctx->cuda, MPI_IN_PLACE, recv + (size_t)x * part, lens,
                                            offs);
        }
    }
    picoll_debug("MPI_Allgather between nodes on the device: %zu bytes, node steps on the device, "
                 "a slice of %zu bytes of each of %d nodes' parts through host memory",
                 total, len, nodes);
    picoll_hier_cuda_end(name, status);
    *mpi_rc = MPI_SUCCESS;
    return PICOLL_OK;
}
