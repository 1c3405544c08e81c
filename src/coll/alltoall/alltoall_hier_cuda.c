/* Alltoall between nodes on device buffers (ctx->cuda_hier, ranks placed by node, not in
 * place): for each other node y, one alltoall kernel within the node gathers in local rank l's
 * receive buffer, at node y's part (scratch until y's piece arrives), the pieces its node holds
 * for rank l of node y; those parts go to pinned host memory, then rail l exchanges them pairwise
 * with the other nodes, each arriving piece (the pieces from node y's ranks for me) copied
 * straight into node y's part of the receive buffer; the kernel of my own node's part gives the
 * pieces within the node. In place votes no. */
#include "coll/hier_cuda.h"
#include "coll/algs.h"
#include "coll/vote.h"
#include "mem/pinned.h"
#include "util/log.h"

picoll_status_t picoll_alltoall_hier_cuda(picoll_coll_ctx_t *ctx, const picoll_blocks_args_t *args,
                                          int *mpi_rc)
{
    static const char name[] = "MPI_Alltoall";
    picoll_hier_t *h = ctx->hier;
    int nodes = h->num_nodes, x = h->node;
    size_t part = args->block_bytes * (size_t)ctx->shm->nlocal;
    size_t total = args->block_bytes * (size_t)ctx->size;
    picoll_meminfo_t r;

    /* Alltoall talks to every node: the endpoints to all of them first (every rank is on a rail
     * here, nodes being of equal size), so that where that fails (out of files) every rank votes
     * no and all go on together (the host hierarchy then declines too: picoll_net_connect_all
     * keeps its outcome). In place: the parts of the receive buffer hold the input until the
     * last kernel. */
    int connected = picoll_net_connect_all(h->net) == PICOLL_OK;
    picoll_status_t status = picoll_hier_cuda_begin(
        ctx, args->sendbuf, args->recvbuf, PICOLL_DT_NONE,
        args->eligible && connected && args->sendbuf != MPI_IN_PLACE, name, &r);
    if (status != PICOLL_OK) {
        return status;
    }
    const char *send = args->sendbuf;
    char *recv = args->recvbuf;
    picoll_cudrv_pipe_t pipe;
    picoll_hier_back_t back = {.ctx = r.context, .dev = recv, .len = part, .stride = part};
    char *hsend = picoll_hier_cuda_host(name, 2 * part * (size_t)nodes, r.context);
    char *hrecv = hsend + part * (size_t)nodes;
    for (int k = 1; k < nodes && status == PICOLL_OK; k++) {
        int y = (x + k) % nodes;
        if (k > 1) {
            picoll_vote_relaunch(ctx, &r);
        }
        status = picoll_cuda_alltoall(ctx->cuda, send + (size_t)y * part, recv + (size_t)y * part,
                                      args->block_bytes);
        if (status == PICOLL_OK) {
            status = picoll_cudrv_copy(hsend + (size_t)y * part, recv + (size_t)y * part, part,
                                       r.context);
        }
    }
    if (status == PICOLL_OK) {
        back.host = hrecv;
        back.pipe = picoll_cudrv_pipe_open(&pipe, r.context, 1) == PICOLL_OK ? &pipe : NULL;
        status = picoll_alltoall_hier_rails(h, hsend, hrecv, part, picoll_hier_back_arrived, &back);
        status = picoll_hier_back_close(&back, status);
    }
    picoll_pinned_put(hsend);
    if (status == PICOLL_OK) {
        picoll_vote_relaunch(ctx, &r);
        status = picoll_cuda_alltoall(ctx->cuda, send + (size_t)x * part, recv + (size_t)x * part,
                                      args->block_bytes);
    }
    picoll_debug("MPI_Alltoall between nodes on the device: %zu bytes, node steps on the device, "
                 "%zu bytes to and from each of %d other nodes through host memory",
                 total, part, nodes - 1);
    picoll_hier_cuda_end(name, status);
    *mpi_rc = MPI_SUCCESS;
    return PICOLL_OK;
}
