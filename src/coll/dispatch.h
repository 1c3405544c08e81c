/* Entry points from the PMPI layer into picoll's algorithms. Each picks an algorithm for the
 * call (the same on every rank of ctx) and runs it: PICOLL_OK, with *alg the algorithm that ran
 * and *mpi_rc the MPI return code for the caller; or PICOLL_DECLINED where picoll does not take
 * the call (on every rank; nothing was touched, the outputs are not set): the caller hands it to
 * the underlying MPI. */
#ifndef PICOLL_DISPATCH_H
#define PICOLL_DISPATCH_H

#include <mpi.h>
#include <stddef.h>
#include "coll/coll.h"
#include "cuda/cuda_dev.h"
#include "host/shm.h"
#include "mem/stage.h"
#include "net/hier.h"
#include "util/dtype.h"

/* What the algorithms see of a communicator: its executors, set up collectively by the core
 * (core/comm.c) when the communicator is first used, and the same on every rank. */
typedef struct {
    MPI_Comm comm; /* the user's communicator, not owned */
    int size;
    MPI_Comm node_comm;     /* ranks of comm on this (virtual) node, by rank; MPI_COMM_NULL
                               when unused */
    picoll_shm_t *shm;      /* node workspace in shared memory, NULL when not set up on every
                               rank: the host executor's, and the device executor's per-call vote */
    picoll_cuda_ws_t *cuda; /* device executor workspace; NULL when not set up on every rank */
    int cuda_possible;      /* every rank has a CUDA device, on one node: a call on device
                               buffers may make the workspace (the same on every rank) */
    int cuda_hier;          /* every rank has a CUDA device, on nodes of at least 2 ranks,
                               PICOLL_HIER_CUDA: a collective on device buffers between nodes may
                               run its node steps on the device (allgather and alltoall: nodes of
                               equal size); the same everywhere */
    int cuda_hier_blocks;   /* cuda_hier, nodes of equal size, ranks placed by node (node x holds
                               ranks x * n to x * n + n - 1): allgather and alltoall too */
    void *cuda_failed;      /* this rank's buffers' context when making the workspace there last
                               failed (on some rank): this rank votes no for buffers of that
                               context from then on, so the set-up is not tried on every call */
    picoll_hier_t *hier;    /* shape and network of a communicator spanning nodes; NULL when not
                               set up on every rank */
    int cuda_hot;           /* the last vote on the node agreed on the device (in cuda): the next
                               device call may take the hot path (coll/vote.c) */
    uint64_t hot_calls;     /* calls that took the hot path so far (the same on every rank) */
    picoll_cuda_zc_skip_t zc_skip; /* the zero-copy votes skipped (nothing registered on the
                                    * node: cuda_dev.h), the same on every rank */
    const void *reg_scope;         /* the ranges registered for this communicator are those of this
                            * scope (core/comm.c, picoll_comm_reg_scope); NULL: none (only those
                            * for every one). Read and written with __atomic */
    picoll_cuda_ws_t *cuda_enq;    /* a stream communicator's workspace on the application's stream
                                 * (MPIX_Stream_comm_create, on one node): its enqueued
                                 * collectives' kernels (picoll_enq_call); NULL: none, on every
                                 * rank */
    /* what device selection reads of cuda and of cuda_enq: their limits, copied once when each
     * is made (coll/vote.c, core/comm.c) */
    picoll_cuda_limits_t cuda_limits, cuda_enq_limits;
} picoll_coll_ctx_t;

typedef struct {
    const void *sendbuf; /* MPI_IN_PLACE allowed */
    void *recvbuf;
    size_t count;
    picoll_dtype_t dtype;
    picoll_op_t op;
    picoll_stage_pipe_t *pipe; /* the hierarchical algorithms: the buffers are host copies of
                                * device buffers, filled and emptied chunk by chunk (mem/stage.h);
                                * NULL: none */
} picoll_allreduce_args_t;

typedef struct {
    const void *sendbuf; /* MPI_IN_PLACE allowed */
    void *recvbuf;
    size_t
        block_bytes; /* bytes each rank contributes (allgather) or sends to each rank (alltoall) */
    int eligible;    /* both types are contiguous predefined ones picoll can copy as bytes */
} picoll_blocks_args_t;

/* The collectives picoll runs on CUDA device buffers only (the device executor): reduce-scatter
 * (block or not), bcast, reduce, allgatherv and alltoallv. Ranks are those of the communicator, on one
 * node. */
typedef struct {
    picoll_coll_t coll;    /* PICOLL_COLL_REDUCE_SCATTER_BLOCK, _REDUCE_SCATTER, _BCAST, _REDUCE,
                            * _ALLGATHERV, _ALLTOALLV */
    const void *sendbuf;   /* MPI_IN_PLACE allowed; bcast: unused */
    void *recvbuf;         /* bcast: the buffer; reduce: significant at the root only */
    const size_t *counts;  /* reduce-scatter: elements of each rank's piece; allgatherv: bytes of
                            * each rank's block; alltoallv: bytes of the piece for each rank */
    const size_t *displs;  /* allgatherv: byte offset of each rank's block in recvbuf; alltoallv:
                            * of the piece for each rank in sendbuf */
    const size_t *rcounts; /* alltoallv: bytes of the piece from each rank */
    const size_t *rdispls; /* alltoallv: its byte offset in recvbuf */
    size_t count;          /* reduce: elements; bcast: bytes */
    picoll_dtype_t dtype;  /* the reductions' type (bcast, allgatherv, alltoallv:
                            * PICOLL_DT_NONE) */
    picoll_op_t op;
    int root, me; /* bcast, reduce: the root's rank and mine (one node: local ranks) */
    int eligible; /* this rank's arguments allow the device path (voted on) */
} picoll_device_args_t;

/* A collective enqueued on a stream communicator's CUDA stream (MPIX_*_enqueue,
 * pmpi/stream_kernel.c), for picoll's kernels on that stream (ctx->cuda_enq): the call's
 * description, made once by the caller and handed down. Buffers: device memory of the stream's
 * context, or made so by place. */
typedef struct {
    picoll_coll_t coll;   /* PICOLL_COLL_ALLREDUCE, _ALLGATHER, _ALLTOALL, _REDUCE_SCATTER_BLOCK,
                           * _BCAST */
    const void *sendbuf;  /* MPI_IN_PLACE allowed; bcast: unused */
    void *recvbuf;        /* bcast: the buffer */
    size_t count;         /* allreduce: elements; reduce-scatter block: elements of each rank's
                           * piece; allgather, alltoall: bytes of a block; bcast: bytes */
    size_t bytes;         /* count x the type's size, computed once by the caller (allgather,
                           * alltoall, bcast: count) */
    picoll_dtype_t dtype; /* the reductions' (others: PICOLL_DT_NONE) */
    picoll_op_t op;
    int root; /* bcast */
    /* NULL where both buffers are device memory of the stream's context already; else the
     * caller's copies, asked for once the kernels take the call (after the selection, before the
     * launch): PICOLL_OK with the buffers to launch on, or the call given up by the caller (its
     * error raised) */
    picoll_status_t (*place)(void *place_arg, const void **sendbuf, void **recvbuf);
    void *place_arg;
} picoll_enq_args_t;

/* Runs args on picoll's kernels on the stream where a device algorithm takes it, in one pass:
 * the selection (from args and ctx->cuda_enq_limits: what every rank passes alike and the
 * workspace's limits, so every rank gets the same answer without a word exchanged), args->place
 * where set, the launches (returning at once: the result is there once the stream gets past
 * them), the count in PICOLL_STATS and picoll_last_algorithm() as the blocking call's device
 * algorithm. PICOLL_DECLINED where no algorithm takes it (nothing done: the caller hands the
 * call to the stream's progress thread); PICOLL_OK; else place's status, or the launch's. */
picoll_status_t picoll_enq_call(picoll_coll_ctx_t *ctx, picoll_enq_args_t *args);

picoll_status_t picoll_allreduce(picoll_coll_ctx_t *ctx, const picoll_allreduce_args_t *args,
                                 int *alg, int *mpi_rc);
picoll_status_t picoll_device_only(picoll_coll_ctx_t *ctx, const picoll_device_args_t *args,
                                   int *alg, int *mpi_rc);
picoll_status_t picoll_allgather(picoll_coll_ctx_t *ctx, const picoll_blocks_args_t *args, int *alg,
                                 int *mpi_rc);
picoll_status_t picoll_alltoall(picoll_coll_ctx_t *ctx, const picoll_blocks_args_t *args, int *alg,
                                int *mpi_rc);

#endif
