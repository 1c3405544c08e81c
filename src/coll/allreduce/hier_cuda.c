/* Allreduce between nodes on device buffers (ctx->cuda_hier): the node's reduce-scatter on the
 * device (picoll_cuda_reduce_scatter, block l of the vector to local rank l < nrails, into its
 * place in the receive buffer), block l's allreduce on rail l over the network through pinned host
 * memory, copied there and back chunk by chunk beside the network step (the staging pipe), then
 * the node's allgatherv on the device. */
#include "coll/hier_cuda.h"
#include "coll/algs.h"
#include "coll/vote.h"
#include "util/config.h"
#include "util/fatal.h"
#include "util/log.h"

picoll_status_t picoll_allreduce_hier_cuda(picoll_coll_ctx_t *ctx,
                                           const picoll_allreduce_args_t *args, size_t bytes,
                                           int *mpi_rc)
{
    static const char name[] = "MPI_Allreduce";
    picoll_hier_t *h = ctx->hier;
    int in_place = args->sendbuf == MPI_IN_PLACE, n = ctx->shm->nlocal, me = ctx->shm->me;
    picoll_meminfo_t r;

    picoll_status_t status =
        picoll_hier_cuda_begin(ctx, args->sendbuf, args->recvbuf, args->dtype, 1, name, &r);
    if (status != PICOLL_OK) {
        return status;
    }
    /* block l: [lo_l, hi_l) of the vector, as the host hierarchy splits a chunk, for rail l; the
     * local ranks off the rails (nodes of unequal size) get none (at offset 0: a pointer into
     * the buffer, never written) */
    size_t esize = picoll_dtype_size(args->dtype), counts[PICOLL_CUDA_MAX_LOCAL];
    size_t pbytes[PICOLL_CUDA_MAX_LOCAL], displs[PICOLL_CUDA_MAX_LOCAL], lo = 0, hi = 0;
    for (int l = 0; l < n; l++) {
        lo = hi = 0;
        if (l < h->nrails) {
            picoll_split_block(args->count, esize, h->nrails, l, &lo, &hi);
        }
        counts[l] = hi - lo;
        pbytes[l] = counts[l] * esize;
        displs[l] = lo * esize;
    }
    char *block = (char *)args->recvbuf + displs[me];
    status = picoll_cuda_reduce_scatter(ctx->cuda, name, in_place ? args->recvbuf : args->sendbuf,
                                        block, counts, args->dtype, args->op);
    picoll_stage_pipe_t pipe = {0};
    int rc = MPI_SUCCESS;
    if (status == PICOLL_OK && counts[me] > 0) {
        /* my block to the host and back, in the network step's chunks */
        picoll_allreduce_args_t a = *args;
        a.sendbuf = MPI_IN_PLACE;
        a.recvbuf = block;
        size_t chunk = picoll_allreduce_hier_rails_chunk(h, esize, picoll_cfg.hier_cuda_chunk);
        if (!picoll_stage_pipe_in(&pipe, 1, &a.sendbuf, &a.recvbuf, pbytes[me], chunk,
                                  picoll_cfg.stage_depth)) {
            /* past the vote: the other ranks are in the call */
            picoll_fatal("MPI_Allreduce between nodes: no pinned host memory for %zu bytes of "
                         "the device hierarchy's network step: aborting the job",
                         pbytes[me]);
        }
        a.pipe = pipe.piped ? &pipe : NULL;
        status = picoll_allreduce_hier_rails(h, &a, a.recvbuf, counts[me], chunk);
        rc = picoll_stage_pipe_out(&pipe, status == PICOLL_OK) == PICOLL_OK ? MPI_SUCCESS
                                                                            : MPI_ERR_OTHER;
    }
    if (status == PICOLL_OK) {
        picoll_vote_relaunch(ctx, &r);
        status = picoll_cuda_allgatherv(ctx->cuda, MPI_IN_PLACE, args->recvbuf, pbytes, displs);
    }
    picoll_debug("MPI_Allreduce between nodes on the device: %zu bytes, node steps on the device, "
                 "my block of %zu bytes through host memory in %zu chunk(s)%s, up to %d copies "
                 "in ahead, %.2f bytes through host memory per byte",
                 bytes, pbytes[me], pipe.nchunks, pipe.piped ? " (pipelined)" : "", pipe.ahead_max,
                 bytes ? (double)pipe.host_bytes / (double)bytes : 0.0);
    picoll_hier_cuda_end(name, status);
    *mpi_rc = rc;
    return PICOLL_OK;
}
