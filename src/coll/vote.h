/* The vote (coll/vote.c): which executor runs a call on one node, agreed by every rank of the
 * node, and the device hierarchy's agreement between nodes. Private to the coll layer. */
#ifndef PICOLL_COLL_VOTE_H
#define PICOLL_COLL_VOTE_H

#include <stddef.h>
#include "coll/dispatch.h"
#include "mem/memkind.h"

/* The executor that takes the call; PICOLL_PATH_NONE: the underlying MPI. The values are bits of
 * the node's vote. */
typedef enum { PICOLL_PATH_NONE = 0, PICOLL_PATH_HOST = 1, PICOLL_PATH_CUDA = 2 } picoll_path_t;

/* Sizes a rank knows only of its own that the vote agrees on (picoll_vote_call_t.agree). */
enum { PICOLL_VOTE_AGREE_N = 2 };

/* What the vote decided on this rank: the path, the same on every rank of the node. */
typedef struct {
    picoll_path_t path;
    int host_alg;   /* the host algorithm (where host_known) */
    int cuda_alg;   /* path device: the device algorithm */
    int vote;       /* path host: the host algorithm's vote */
    int direct;     /* path host: both buffers are plain host memory, which peers may read with
                     * process_vm_readv (CUDA-pinned memory is left to the workspace) */
    int host_known; /* host_alg was asked for (select_host) */
    int zc_alg;     /* path device, the zero-copy path armed: the algorithm it reports where the
                     * call takes it (ops->zero_copy); 0: not armed */
} picoll_vote_t;

/* What the vote calls of a collective (each with the call's arg). */
typedef struct {
    /* the host algorithm (the same on every rank), asked only where the vote needs it; NULL:
     * none (PICOLL_ALG_FALLBACK) */
    int (*select_host)(const picoll_coll_ctx_t *ctx, const void *arg);
    /* the device algorithm on a workspace of limits lim (ctx->cuda_limits; the same on every
     * rank) */
    int (*select_cuda)(const picoll_cuda_limits_t *lim, const void *arg);
    /* the device call with algorithm cuda_alg: its status, PICOLL_RETRY where a rank said no on
     * the hot path (nothing written) */
    picoll_status_t (*run_cuda)(picoll_coll_ctx_t *ctx, int cuda_alg, const void *arg);
    /* the host call with v's algorithm and vote: its status, *alg the algorithm that ran; NULL
     * where select_host is */
    picoll_status_t (*run_host)(picoll_coll_ctx_t *ctx, const picoll_vote_t *v, const void *arg,
                                int *alg);
    /* the zero-copy form of device algorithm cuda_alg where the call may take it
     * (picoll_zero_copy_form, coll/algs.h): its reporting id and the bytes this rank's call reads
     * from its send buffer and writes to its receive buffer; 0: none. NULL: the collective has
     * none */
    int (*zero_copy)(const void *arg, int cuda_alg, size_t *send_bytes, size_t *recv_bytes);
} picoll_vote_ops_t;

/* A call as the vote sees it. */
typedef struct {
    const char *name;    /* the MPI function ("MPI_Allreduce"), for the barrier's diagnostics */
    const void *sendbuf; /* MPI_IN_PLACE: the receive buffer only */
    const void *recvbuf;
    picoll_dtype_t dtype; /* the device kernels' type (PICOLL_DT_NONE: bytes) */
    int eligible;         /* this rank's arguments allow picoll's algorithms */
    const picoll_vote_ops_t *ops;
    const void *arg; /* the ops' */
    /* NULL, or PICOLL_VOTE_AGREE_N sizes that a rank knows only of its own (alltoallv's pieces):
     * this rank's on the way in, the largest of every rank's on the way out, carried in the
     * barrier lines of the vote (no barrier more); a selection that needs them is made after the
     * vote only */
    size_t *agree;
} picoll_vote_call_t;

/* Runs a call on one node on the path its ranks agree on (coll/vote.c says how), picoll_reentry
 * held: on the device hot path a rank's "no" turns the device call back (PICOLL_RETRY) and every
 * rank votes again, in full. Returns the status of the algorithm that ran (*alg),
 * PICOLL_DECLINED where none did: every rank hands the call to the MPI. */
picoll_status_t picoll_vote_run(picoll_coll_ctx_t *ctx, const picoll_vote_call_t *call, int *alg);

/* The device hierarchy's agreement between nodes (ctx->cuda_hier): PICOLL_OK where every rank of
 * the communicator said yes, PICOLL_DECLINED where some rank said no; *r: the receive buffer's
 * memory kind. */
picoll_status_t picoll_vote_hier_cuda(picoll_coll_ctx_t *ctx, const void *sendbuf, void *recvbuf,
                                      picoll_dtype_t dt, int eligible, const char *name,
                                      picoll_meminfo_t *r);

/* Before a device call of the device hierarchy after the first: the thread's current context
 * again for the launch (picoll_cuda_vote notes it; the first call took it). */
void picoll_vote_relaunch(picoll_coll_ctx_t *ctx, const picoll_meminfo_t *r);

#endif
