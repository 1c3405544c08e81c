/* The device hierarchy (ctx->cuda_hier): collectives between nodes on device buffers, their node
 * steps on the device, their network steps through pinned host memory. Private to the coll
 * layer: the algorithms (allreduce/hier_cuda.c, allgather/allgather_hier_cuda.c and
 * alltoall/alltoall_hier_cuda.c) and the steps they share (coll/hier_cuda.c). */
#ifndef PICOLL_COLL_HIER_CUDA_H
#define PICOLL_COLL_HIER_CUDA_H

#include "coll/dispatch.h"
#include "mem/cudrv.h"
#include "mem/memkind.h"

/* The algorithms. Every rank takes one or none does (picoll_vote_hier_cuda): each returns
 * PICOLL_DECLINED, before any buffer was touched, where some rank said no (the caller's path
 * then takes the call: the host hierarchy, staged or not, or the MPI), else PICOLL_OK once the
 * result is in the receive buffer (a failure past the vote ends the job). Allreduce: bytes, the
 * vector's; *mpi_rc, the MPI return code of its network step. Allgather and alltoall: ranks
 * placed by node (ctx->cuda_hier_blocks). */
picoll_status_t picoll_allreduce_hier_cuda(picoll_coll_ctx_t *ctx,
                                           const picoll_allreduce_args_t *args, size_t bytes,
                                           int *mpi_rc);
picoll_status_t picoll_allgather_hier_cuda(picoll_coll_ctx_t *ctx, const picoll_blocks_args_t *args,
                                           int *mpi_rc);
picoll_status_t picoll_alltoall_hier_cuda(picoll_coll_ctx_t *ctx, const picoll_blocks_args_t *args,
                                          int *mpi_rc);

/* Enters a call of the device hierarchy (picoll_reentry held) and votes (picoll_vote_hier_cuda,
 * the same arguments): PICOLL_OK, the call is on (every rank's), to be left with
 * picoll_hier_cuda_end; PICOLL_DECLINED, the call is left again. */
picoll_status_t picoll_hier_cuda_begin(picoll_coll_ctx_t *ctx, const void *sendbuf, void *recvbuf,
                                       picoll_dtype_t dt, int eligible, const char *name,
                                       picoll_meminfo_t *r);
/* Leaves a call that picoll_hier_cuda_begin entered with the status of its steps: a failure ends
 * the job (past the vote the other ranks are in the call; the device calls end it where a peer is
 * gone, so this one is local). */
void picoll_hier_cuda_end(const char *name, picoll_status_t status);
/* Pinned host memory of bytes for the network step, for copies in context; the job ends where
 * there is none (past the vote: the other ranks are in the call). */
void *picoll_hier_cuda_host(const char *name, size_t bytes, picoll_cu_context_t context);

/* The allgather's and alltoall's network steps: node k's piece, just received into the host
 * buffer, goes to its place in the receive buffer while the next exchange runs. */
typedef struct {
    picoll_cudrv_pipe_t *pipe; /* NULL: copied at once */
    picoll_cu_context_t ctx;
    char *host, *dev; /* slice k at host + k * len, to dev + k * stride */
    size_t len, stride;
    picoll_status_t status;
} picoll_hier_back_t;

/* The network step's arrived(k, arg), arg a picoll_hier_back_t. */
void picoll_hier_back_arrived(int k, void *arg);
/* Ends the copies back (back->pipe, where one was opened): the first failure of the network
 * step (status), the copies queued, or the wait for them. */
picoll_status_t picoll_hier_back_close(picoll_hier_back_t *back, picoll_status_t status);

#endif
