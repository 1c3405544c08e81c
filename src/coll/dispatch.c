#include "coll/dispatch.h"
#include "coll/algs.h"
#include "coll/coll.h"
#include "util/config.h"
#include "util/fatal.h"
#include "util/log.h"
#include "util/reentry.h"
#include "cuda/cuda_kernel.h"
#include "cuda/cuda_dev.h"
#include "mem/cuda_state.h"
#include "mem/memkind.h"
#include "mem/pinned.h"
#include "mem/stage.h"
#include "coll/select.h"
#include "coll/stats.h"

#include <string.h>

/* Run the chosen algorithm; a "no" vote anywhere turns the call back into a fallback. */
static int finish(picoll_coll_t coll, int alg, picoll_status_t status, size_t bytes, int *mpi_rc)
{
    if (status == PICOLL_ERR_DISABLED) {
        return PICOLL_ALG_FALLBACK;
    }
    *mpi_rc = MPI_SUCCESS;
    picoll_last_set(coll, alg);
    if (picoll_cfg.stats) {
        picoll_stats_add(coll, alg, bytes);
    }
    return alg;
}

/* PATH_HOME is not a path: a bit of the vote, 1 where a rank's device buffers are in its
 * workspace's context */
typedef enum { PATH_NONE = 0, PATH_HOST = 1, PATH_CUDA = 2, PATH_HOME = 4 } path_t;

/* Which executor runs the call. The host algorithm (host_alg) is the same on every rank; the votes
 * are not (memory kinds may differ between ranks). Each buffer's memory kind is looked up once
 * (both with one query where they lie in one allocation).
 * Where only the host executor is possible its algorithm votes itself, as before. Where the device
 * one is, one barrier on the node carries both votes as bits and every rank takes the path all
 * voted for: device, host (whose algorithm then votes again, yes), or the underlying MPI. The
 * device workspace is made (or moved) here, collectively, when every rank voted for the device and
 * some rank's workspace is missing or in another context than its buffers; select_cuda then picks
 * the device algorithm from its reach (the same on every rank). *vote: the host algorithm's
 * vote; *direct: both buffers are plain host memory, which peers may read with process_vm_readv
 * (CUDA-pinned memory is left to the workspace); *cuda_alg: the device algorithm when PATH_CUDA.
 * agree: NULL, or AGREE_N sizes that a rank knows only of its own (alltoallv's pieces): this
 * rank's on the way in, the largest of every rank's on the way out, carried in the barrier lines
 * of the vote (no barrier more); a selection that needs them is made after the vote only.
 *
 * The hot path (hot: the call's first pick): where the last vote agreed on the device
 * (ctx->cuda_hot, the same on every rank), the workspace's algorithm is known and the call needs
 * no agreement on sizes (agree NULL), there is no barrier: a rank whose own vote is yes, in the
 * workspace's context, returns PATH_CUDA with the device call armed (picoll_cuda_hot_arm): its
 * kernels wait for every rank's as always; a rank whose vote is no says so in the node workspace
 * (dev_no) and takes the full vote, and the yes ranks' device calls then stop their kernels before
 * any wrote the receive buffer and return PICOLL_ERR_VETOED: the caller picks again with hot 0,
 * and every rank meets in the full vote. */
enum { AGREE_N = 2 };

static path_t pick_path(picoll_coll_ctx_t *ctx, int host_alg, const void *sendbuf, const void *recvbuf,
                        picoll_dtype_t dt, int eligible, const char *coll,
                        int (*select_cuda)(const picoll_cuda_ws_t *, const void *),
                        const void *select_arg, size_t *agree, int *vote, int *direct,
                        int *cuda_alg, int hot)
{
    picoll_meminfo_t s, r;
    int in_place = sendbuf == MPI_IN_PLACE;
    int host_possible = host_alg != PICOLL_ALG_FALLBACK && eligible;

    *direct = 0;
    if (!ctx->cuda_possible && !host_possible) {
        *vote = 0;
        return host_alg == PICOLL_ALG_FALLBACK ? PATH_NONE : PATH_HOST;
    }
    /* a workspace exists: its algorithm is known before the barrier, which a call that neither
     * executor takes need not pay */
    if (ctx->cuda != NULL && agree == NULL) {
        *cuda_alg = select_cuda(ctx->cuda, select_arg);
        if (*cuda_alg == PICOLL_ALG_FALLBACK && host_alg == PICOLL_ALG_FALLBACK) {
            *vote = 0;
            return PATH_NONE;
        }
    }
    picoll_memkind_query_pair(recvbuf, in_place ? NULL : sendbuf, &r, &s);
    int host_ok = host_possible && (s.kind == PICOLL_MEM_HOST || s.kind == PICOLL_MEM_PINNED) &&
                  (r.kind == PICOLL_MEM_HOST || r.kind == PICOLL_MEM_PINNED);
    *direct = host_ok && s.kind == PICOLL_MEM_HOST && r.kind == PICOLL_MEM_HOST;
    if (!ctx->cuda_possible) {
        *vote = host_ok;
        return PATH_HOST;
    }
    int home = 0;
    picoll_cu_context_t bufctx = NULL;
    int quick = hot && agree == NULL && ctx->cuda_hot && ctx->cuda != NULL &&
                *cuda_alg != PICOLL_ALG_FALLBACK;
    int dev = eligible &&
              picoll_cuda_vote(ctx->cuda, in_place ? NULL : &s, &r, dt, &bufctx, &home, quick);
    if (dev && !home && bufctx == ctx->cuda_failed) {
        dev = 0; /* no device kernels in that context (e.g. no kernel image for this GPU) */
    }
    if (quick) {
        uint64_t call = ++ctx->hot_calls;
        if (dev && home) {
            picoll_cuda_hot_arm(ctx->cuda, ctx->shm, call);
            return PATH_CUDA;
        }
        atomic_store_explicit(&ctx->shm->flags[ctx->shm->me].dev_no, call, memory_order_release);
        picoll_cuda_hot_skip(ctx->cuda);
        /* the full vote's answer goes into the barrier: the quick one took the thread's current
         * context on trust */
        dev = dev && picoll_cuda_vote(ctx->cuda, in_place ? NULL : &s, &r, dt, &bufctx, &home, 0) &&
              (home || bufctx != ctx->cuda_failed);
    }
    uint32_t mine = (host_ok ? PATH_HOST : 0u) | (dev ? PATH_CUDA : 0u) | (home ? PATH_HOME : 0u);
    picoll_shm_t *shm = ctx->shm;
    const size_t agree_bytes = AGREE_N * sizeof(size_t);
    if (agree != NULL) {
        memcpy(picoll_shm_small(shm, shm->me, shm->epoch + 1, agree_bytes), agree, agree_bytes);
    }
    uint32_t all = picoll_shm_barrier_mask(shm, mine, coll);
    /* read before any other barrier (the workspace's set-up below has some): a peer writes its
     * line of this parity again only past the next one */
    for (int r = 0; agree != NULL && r < shm->nlocal; r++) {
        size_t peer[AGREE_N];
        memcpy(peer, picoll_shm_small(shm, r, shm->epoch, agree_bytes), agree_bytes);
        for (int k = 0; k < AGREE_N; k++) {
            agree[k] = peer[k] > agree[k] ? peer[k] : agree[k];
        }
    }
    *vote = 1;
    if ((all & PATH_CUDA) && !(all & PATH_HOME)) {
        picoll_cuda_ws_rehome(&ctx->cuda, ctx->comm, ctx->node_comm, ctx->shm, &picoll_cfg,
                              bufctx);
        ctx->cuda_failed = ctx->cuda == NULL ? (void *)bufctx : NULL;
    }
    ctx->cuda_hot = 0;
    if ((all & PATH_CUDA) && ctx->cuda != NULL) {
        *cuda_alg = select_cuda(ctx->cuda, select_arg);
        if (*cuda_alg != PICOLL_ALG_FALLBACK) {
            ctx->cuda_hot = 1;
            return PATH_CUDA;
        }
    }
    if (all & PATH_HOST) {
        return host_alg == PICOLL_ALG_FALLBACK ? PATH_NONE : PATH_HOST;
    }
    return PATH_NONE;
}

/* A single-copy algorithm's two-bit vote (coll/algs.h) from pick_path's vote and direct. */
static uint32_t cma_vote(int vote, int direct)
{
    return vote ? PICOLL_CMA_VOTE_HOST | (direct ? PICOLL_CMA_VOTE_DIRECT : 0u) : 0u;
}

/* Between nodes: the hierarchical algorithms (host buffers, or CUDA buffers through host copies
 * where picoll stages them). Ends like finish(), with the copy back's error code. */
static int hier_finish(picoll_coll_t coll, int alg, picoll_status_t status, size_t bytes,
                       picoll_stage_pair_t *st, int *mpi_rc)
{
    int rc = picoll_stage_pair_out(st, status == PICOLL_OK) == PICOLL_OK ? MPI_SUCCESS
                                                                         : MPI_ERR_OTHER;
    alg = finish(coll, alg, status, bytes, mpi_rc);
    if (alg != PICOLL_ALG_FALLBACK) {
        *mpi_rc = rc;
    }
    return alg;
}

/* The device hierarchy's agreement (ctx->cuda_hier): each node's ranks agree in one node barrier
 * (their buffers are device memory of the workspace's context, the type is one the kernels take,
 * the node's ranks reach each other: the workspace is made or moved there), then the rails carry
 * the nodes' answers (the AND of a word), so every rail ends with the same; on nodes of unequal
 * size a second node barrier gives it to the ranks off the rails. Returns 1 where every rank of the
 * communicator said yes; *r: the receive buffer's memory kind. */
static int hier_cuda_vote(picoll_coll_ctx_t *ctx, const void *sendbuf, void *recvbuf,
                          picoll_dtype_t dt, int eligible, const char *coll, picoll_meminfo_t *r)
{
    picoll_shm_t *shm = ctx->shm;
    int in_place = sendbuf == MPI_IN_PLACE, home = 0;
    picoll_meminfo_t s;
    picoll_cu_context_t bufctx = NULL;

    picoll_memkind_query_pair(recvbuf, in_place ? NULL : sendbuf, r, &s);
    int dev = eligible &&
              picoll_cuda_vote(ctx->cuda, in_place ? NULL : &s, r, dt, &bufctx, &home, 0);
    if (dev && !home && bufctx == ctx->cuda_failed) {
        dev = 0;
    }
    uint32_t all = picoll_shm_barrier_mask(shm, (dev ? PATH_CUDA : 0u) | (home ? PATH_HOME : 0u),
                                           coll);
    if ((all & PATH_CUDA) && !(all & PATH_HOME)) {
        picoll_cuda_ws_rehome(&ctx->cuda, ctx->comm, ctx->node_comm, shm, &picoll_cfg, bufctx);
        ctx->cuda_failed = ctx->cuda == NULL ? (void *)bufctx : NULL;
    }
    picoll_topo_reach_t reach = ctx->cuda != NULL ? picoll_cuda_ws_reach(ctx->cuda)
                                                  : PICOLL_TOPO_REACH_NONE;
    /* the node steps over the node's IPC mappings: NVLink or PCIe peer access between every pair
     * (the hybrid cube mesh maps only the quad and the relay) */
    int node_yes = (all & PATH_CUDA) && ctx->cuda != NULL &&
                   (reach == PICOLL_TOPO_REACH_NVLINK || reach == PICOLL_TOPO_REACH_PCIE);
    picoll_hier_t *h = ctx->hier;
    uint32_t yes = shm->me < h->nrails ? picoll_allreduce_hier_rail_and(h, node_yes ? 1u : 0u)
                                       : 1u;
    if (!h->even) {
        /* the ranks off the rails learn it from the node's rails (rail 0 is on every node) */
        yes = picoll_shm_barrier_mask(shm, yes, coll);
    }
    return yes != 0;
}

/* Before a device call of the device hierarchy after the first: the thread's current context
 * again for the launch (picoll_cuda_vote notes it; the first call took it). */
static void hier_cuda_relaunch(picoll_coll_ctx_t *ctx, const picoll_meminfo_t *r)
{
    picoll_cu_context_t bufctx;
    int home;
    picoll_cuda_vote(ctx->cuda, NULL, r, PICOLL_DT_NONE, &bufctx, &home, 0);
}

/* Between nodes on device buffers (ctx->cuda_hier): the node's reduce-scatter on the device
 * (picoll_cuda_reduce_scatter, block l of the vector to local rank l < nrails, into its place
 * in the receive buffer), block l's allreduce on rail l over the network through pinned host memory,
 * copied there and back chunk by chunk beside the network step (the staging pipe), then the
 * node's allgatherv on the device. Every rank takes it or none does (hier_cuda_vote). Returns
 * PICOLL_ALG_FALLBACK, before any buffer was touched, where some rank said no: the caller's path
 * (host hierarchy, staged or not, or the MPI) takes the call. */
static int hier_cuda_allreduce(picoll_coll_ctx_t *ctx, const picoll_allreduce_args_t *args,
                               size_t bytes, int *mpi_rc)
{
    picoll_hier_t *h = ctx->hier;
    int in_place = args->sendbuf == MPI_IN_PLACE, n = ctx->shm->nlocal, me = ctx->shm->me;
    picoll_meminfo_t r;

    picoll_reentry++;
    if (!hier_cuda_vote(ctx, args->sendbuf, args->recvbuf, args->dtype, 1, "MPI_Allreduce", &r)) {
        picoll_reentry--;
        return PICOLL_ALG_FALLBACK;
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
    picoll_status_t status = picoll_cuda_reduce_scatter(
        ctx->cuda, "MPI_Allreduce", in_place ? args->recvbuf : args->sendbuf, block, counts,
        args->dtype, args->op);
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
                         "the device hierarchy's network step: aborting the job", pbytes[me]);
        }
        a.pipe = pipe.piped ? &pipe : NULL;
        status = picoll_allreduce_hier_rails(h, &a, a.recvbuf, counts[me], chunk,
                                             (size_t)picoll_cfg.net_rd_max);
        rc = picoll_stage_pipe_out(&pipe, status == PICOLL_OK) == PICOLL_OK ? MPI_SUCCESS
                                                                            : MPI_ERR_OTHER;
    }
    if (status == PICOLL_OK) {
        hier_cuda_relaunch(ctx, &r);
        status = picoll_cuda_allgatherv(ctx->cuda, MPI_IN_PLACE, args->recvbuf, pbytes, displs);
    }
    picoll_reentry--;
    picoll_debug("MPI_Allreduce between nodes on the device: %zu bytes, node steps on the device, "
                 "my block of %zu bytes through host memory in %zu chunk(s)%s, up to %d copies "
                 "in ahead, %.2f bytes through host memory per byte", bytes, pbytes[me],
                 pipe.nchunks, pipe.piped ? " (pipelined)" : "", pipe.ahead_max,
                 bytes ? (double)pipe.host_bytes / (double)bytes : 0.0);
    if (status != PICOLL_OK) {
        /* the device calls end the job where a peer is gone: this is a local failure past the
         * vote */
        picoll_fatal("MPI_Allreduce between nodes on the device failed (%s): aborting the job",
                     picoll_status_string(status));
    }
    int alg = finish(PICOLL_COLL_ALLREDUCE, PICOLL_ALLREDUCE_HIER_CUDA, status, bytes, mpi_rc);
    *mpi_rc = rc;
    return alg;
}

static int hier_allreduce(picoll_coll_ctx_t *ctx, const picoll_allreduce_args_t *args, size_t bytes,
                          int *mpi_rc)
{
    if (ctx->cuda_hier && bytes >= picoll_cfg.hier_cuda_min) {
        int alg = hier_cuda_allreduce(ctx, args, bytes, mpi_rc);
        if (alg != PICOLL_ALG_FALLBACK) {
            return alg;
        }
    }
    picoll_shm_t *shm = ctx->shm;
    picoll_hier_shape_t shape = {.num_nodes = ctx->hier->num_nodes,
                                 .even = ctx->hier->even,
                                 .slot_size = shm->slot_size};
    int alg = picoll_select_hier_allreduce(&picoll_cfg, &shape, bytes,
                                           picoll_allreduce_hier_rail_block(shm, ctx->hier, args));
    if (alg == PICOLL_ALG_FALLBACK) {
        return alg;
    }
    /* device buffers (where picoll stages): copied to the host and back chunk by chunk, beside
     * the chunks' node and network steps (mem/stage.h) */
    picoll_stage_pipe_t pipe;
    picoll_allreduce_args_t a = *args;
    int oneshot = alg == PICOLL_ALLREDUCE_HIER_ONESHOT;
    picoll_reentry++;
    int vote = picoll_stage_pipe_in(&pipe, picoll_cuda.staging, &a.sendbuf, &a.recvbuf, bytes,
                                    picoll_allreduce_hier_chunk_bytes(shm, args, oneshot),
                                    picoll_cfg.stage_depth);
    a.pipe = pipe.piped ? &pipe : NULL;
    picoll_status_t status =
        oneshot ? picoll_allreduce_hier_oneshot(shm, ctx->hier, &a, vote)
                : picoll_allreduce_hier(shm, ctx->hier, &a, vote, alg == PICOLL_ALLREDUCE_HIER_RING);
    picoll_reentry--;
    int rc = picoll_stage_pipe_out(&pipe, status == PICOLL_OK) == PICOLL_OK ? MPI_SUCCESS
                                                                             : MPI_ERR_OTHER;
    if (pipe.piped || pipe.host_bytes > 0) {
        picoll_debug("MPI_Allreduce between nodes: %zu bytes staged in %zu chunk(s)%s, up to %d "
                     "copies in ahead of the chunk at work, %.2f bytes through host memory per "
                     "byte", bytes, pipe.nchunks, pipe.piped ? " (pipelined)" : "",
                     pipe.ahead_max, bytes ? (double)pipe.host_bytes / (double)bytes : 0.0);
    }
    alg = finish(PICOLL_COLL_ALLREDUCE, alg, status, bytes, mpi_rc);
    if (alg != PICOLL_ALG_FALLBACK) {
        *mpi_rc = rc;
    }
    return alg;
}

static int select_cuda_allreduce(const picoll_cuda_ws_t *ws, const void *arg)
{
    return picoll_select_cuda_allreduce(&picoll_cfg, picoll_cuda_ws_reach(ws),
                                        picoll_cuda_ws_slot_size(ws), *(const size_t *)arg,
                                        picoll_cuda.staging);
}

/* The device executor's kernel mode for a device allreduce algorithm. */
static picoll_cuda_kmode_t cuda_kmode(int alg)
{
    return alg == PICOLL_ALLREDUCE_CUDA_HCM       ? PICOLL_CUDA_K_HCM
           : alg == PICOLL_ALLREDUCE_CUDA_TWOSHOT ? PICOLL_CUDA_K_TWOSHOT
                                                  : PICOLL_CUDA_K_ONESHOT;
}

int picoll_allreduce(picoll_coll_ctx_t *ctx, const picoll_allreduce_args_t *args, int *mpi_rc)
{
    picoll_shm_t *shm = ctx->shm;
    size_t bytes;
    int alg, cuda_alg = PICOLL_ALG_FALLBACK, vote, direct;
    picoll_status_t status;

    if (shm == NULL) {
        return PICOLL_ALG_FALLBACK;
    }
    bytes = args->count * picoll_dtype_size(args->dtype);
    if (ctx->hier != NULL) {
        return hier_allreduce(ctx, args, bytes, mpi_rc);
    }
    alg = picoll_select_allreduce(&picoll_cfg, shm->slot_size, ctx->size, bytes, shm->cma);
    picoll_reentry++;
    path_t path;
    int hot = 1;
    do { /* again after a veto on the hot path, with the full vote */
        path = pick_path(ctx, alg, args->sendbuf, args->recvbuf, args->dtype, 1, "MPI_Allreduce",
                         select_cuda_allreduce, &bytes, NULL, &vote, &direct, &cuda_alg, hot);
        status = path != PATH_CUDA ? PICOLL_OK
                                   : picoll_cuda_allreduce(ctx->cuda, cuda_kmode(cuda_alg),
                                                           args->sendbuf, args->recvbuf,
                                                           args->count, args->dtype, args->op);
        hot = 0;
    } while (status == PICOLL_ERR_VETOED);
    switch (path) {
    case PATH_CUDA:
        alg = cuda_alg;
        break;
    case PATH_HOST:
        if (alg == PICOLL_ALLREDUCE_ONESHOT) {
            status = picoll_allreduce_oneshot(shm, args, vote);
            break;
        }
        if (alg == PICOLL_ALLREDUCE_CMA) {
            status = picoll_allreduce_cma(shm, args, cma_vote(vote, direct));
            if (status != PICOLL_ERR_NOT_SUPPORTED) {
                break;
            }
            /* every rank can run picoll's algorithm, not every one single copy */
            alg = PICOLL_ALLREDUCE_TWOSHOT;
            vote = 1;
        }
        status = picoll_allreduce_twoshot(shm, args, vote);
        break;
    default:
        status = PICOLL_ERR_DISABLED;
        break;
    }
    picoll_reentry--;
    return finish(PICOLL_COLL_ALLREDUCE, alg, status, bytes, mpi_rc);
}

/* Allgather and alltoall: select by block size, vote, run. */
typedef struct {
    picoll_coll_t coll;
    const char *name;
    int (*select)(const picoll_config_t *, int, size_t, int);
    int shm_alg;
    picoll_status_t (*run)(picoll_shm_t *, const picoll_blocks_args_t *, int);
    int cma_alg;
    picoll_status_t (*run_cma)(picoll_shm_t *, const picoll_blocks_args_t *, uint32_t);
    int (*select_cuda)(const picoll_config_t *, picoll_topo_reach_t, int, size_t);
    picoll_status_t (*run_cuda)(picoll_cuda_ws_t *, const void *, void *, size_t);
    size_t (*hier_piece_max)(const picoll_hier_t *, size_t);
    int (*hier_select)(const picoll_config_t *, size_t, size_t);
    picoll_status_t (*hier_run)(picoll_shm_t *, picoll_hier_t *, const picoll_blocks_args_t *, int);
} blocks_coll_t;

static int hier_blocks(picoll_coll_ctx_t *ctx, const picoll_blocks_args_t *args, const blocks_coll_t *c,
                       int *mpi_rc)
{
    picoll_shm_t *shm = ctx->shm;
    int alg = c->hier_select(&picoll_cfg, args->block_bytes,
                             c->hier_piece_max(ctx->hier, shm->slot_size));
    if (alg == PICOLL_ALG_FALLBACK) {
        return alg;
    }
    picoll_stage_pair_t st = {0};
    picoll_blocks_args_t a = *args;
    size_t total = args->block_bytes * (size_t)ctx->size;
    picoll_reentry++;
    /* types picoll cannot copy as bytes: no vote, and nothing read through them */
    int vote = args->eligible &&
               picoll_stage_pair_in(&st, picoll_cuda.staging, &a.sendbuf, &a.recvbuf,
                                    c->coll == PICOLL_COLL_ALLTOALL ? total : args->block_bytes,
                                    total);
    picoll_status_t status = c->hier_run(shm, ctx->hier, &a, vote);
    picoll_reentry--;
    return hier_finish(c->coll, alg, status, total, &st, mpi_rc);
}

/* The allgather's and alltoall's network steps: node k's piece, just received into the host
 * buffer, goes to its place in the receive buffer while the next exchange runs. */
typedef struct {
    picoll_cudrv_pipe_t *pipe; /* NULL: copied at once */
    picoll_cu_context_t ctx;
    char *host, *dev;          /* slice k at host + k * len, to dev + k * stride */
    size_t len, stride;
    picoll_status_t status;
} hier_back_t;

/* Ends the copies back (back->pipe, where one was opened): the first failure of the network
 * step, the copies queued, or the wait for them. */
static picoll_status_t hier_back_close(hier_back_t *back, picoll_status_t status)
{
    picoll_status_t closed = back->pipe != NULL ? picoll_cudrv_pipe_close(back->pipe) : PICOLL_OK;
    return status != PICOLL_OK ? status : back->status != PICOLL_OK ? back->status : closed;
}

static void hier_arrived(int k, void *arg)
{
    hier_back_t *b = arg;
    char *dst = b->dev + (size_t)k * b->stride;
    const char *src = b->host + (size_t)k * b->len;
    picoll_status_t st = b->pipe != NULL ? picoll_cudrv_pipe_copy(b->pipe, dst, src, b->len, -1)
                                         : picoll_cudrv_copy(dst, src, b->len, b->ctx);
    b->status = b->status != PICOLL_OK ? b->status : st;
}

/* Allgather between nodes on device buffers (ctx->cuda_hier, ranks placed by node: node x holds
 * ranks x * n to x * n + n - 1, so its part of the receive buffer is one piece): the node's
 * allgather on the device into its part; slice l of that part (a 1/n share) round the ring of
 * the nodes on rail l through pinned host memory, each node's slice copied into place as it
 * arrives; then, for each other node, the node's allgatherv of its slices on the device. Every
 * rank takes it or none does (hier_cuda_vote); PICOLL_ALG_FALLBACK before any buffer was
 * touched where some rank said no. */
static int hier_cuda_allgather(picoll_coll_ctx_t *ctx, const picoll_blocks_args_t *args,
                               int *mpi_rc)
{
    picoll_hier_t *h = ctx->hier;
    int n = ctx->shm->nlocal, me = ctx->shm->me, nodes = h->num_nodes;
    size_t part = args->block_bytes * (size_t)n, total = args->block_bytes * (size_t)ctx->size;
    picoll_meminfo_t r;

    picoll_reentry++;
    if (!hier_cuda_vote(ctx, args->sendbuf, args->recvbuf, PICOLL_DT_NONE, args->eligible,
                        "MPI_Allgather", &r)) {
        picoll_reentry--;
        return PICOLL_ALG_FALLBACK;
    }
    char *recv = args->recvbuf, *mine = recv + (size_t)h->node * part;
    picoll_status_t status = picoll_cuda_allgather(ctx->cuda, args->sendbuf, mine,
                                                   args->block_bytes);
    /* slice l of a part: [lo_l, hi_l), 64-byte multiples but the last */
    size_t lens[PICOLL_CUDA_MAX_LOCAL], offs[PICOLL_CUDA_MAX_LOCAL], lo, hi;
    for (int l = 0; l < n; l++) {
        picoll_split_block(part, 1, n, l, &lo, &hi);
        lens[l] = hi - lo;
        offs[l] = lo;
    }
    size_t len = lens[me];
    void *host = NULL;
    picoll_cudrv_pipe_t pipe;
    hier_back_t back = {.ctx = r.context, .dev = recv + offs[me], .len = len, .stride = part};
    if (status == PICOLL_OK && len > 0) {
        if (picoll_pinned_get(len * (size_t)nodes, r.context, &host) != PICOLL_OK) {
            picoll_fatal("MPI_Allgather between nodes: no host memory for %zu bytes of the "
                         "device hierarchy's network step: aborting the job",
                         len * (size_t)nodes);
        }
        back.host = host;
        back.pipe = picoll_cudrv_pipe_open(&pipe, r.context, 1) == PICOLL_OK ? &pipe : NULL;
        status = picoll_cudrv_copy(back.host + (size_t)h->node * len, mine + offs[me], len,
                                   r.context);
        if (status == PICOLL_OK) {
            status = picoll_allgather_hier_rails(h, back.host, len, hier_arrived, &back);
        }
        status = hier_back_close(&back, status);
        picoll_pinned_put(host);
    }
    for (int x = 0; x < nodes && status == PICOLL_OK; x++) {
        if (x != h->node) {
            hier_cuda_relaunch(ctx, &r);
            status = picoll_cuda_allgatherv(ctx->cuda, MPI_IN_PLACE, recv + (size_t)x * part, lens,
                                            offs);
        }
    }
    picoll_reentry--;
    picoll_debug("MPI_Allgather between nodes on the device: %zu bytes, node steps on the device, "
                 "a slice of %zu bytes of each of %d nodes' parts through host memory", total, len,
                 nodes);
    if (status != PICOLL_OK) {
        picoll_fatal("MPI_Allgather between nodes on the device failed (%s): aborting the job",
                     picoll_status_string(status));
    }
    return finish(PICOLL_COLL_ALLGATHER, PICOLL_ALLGATHER_HIER_CUDA, status, total, mpi_rc);
}

/* Alltoall between nodes on device buffers (ctx->cuda_hier, ranks placed by node, not in
 * place): for each other node y, one alltoall kernel within the node gathers in local rank l's
 * receive buffer, at node y's part (scratch until y's piece arrives), the pieces its node holds
 * for rank l of node y; those parts go to pinned host memory, then rail l exchanges them pairwise
 * with the other nodes, each arriving piece (the pieces from node y's ranks for me) copied
 * straight into node y's part of the receive buffer; the kernel of my own node's part gives the
 * pieces within the node. Every rank takes it or none does (hier_cuda_vote; in place votes no);
 * PICOLL_ALG_FALLBACK before any buffer was touched where some rank said no. */
static int hier_cuda_alltoall(picoll_coll_ctx_t *ctx, const picoll_blocks_args_t *args,
                              int *mpi_rc)
{
    picoll_hier_t *h = ctx->hier;
    int nodes = h->num_nodes, x = h->node;
    size_t part = args->block_bytes * (size_t)ctx->shm->nlocal;
    size_t total = args->block_bytes * (size_t)ctx->size;
    picoll_meminfo_t r;

    picoll_reentry++;
    /* in place: the parts of the receive buffer hold the input until the last kernel */
    if (!hier_cuda_vote(ctx, args->sendbuf, args->recvbuf, PICOLL_DT_NONE,
                        args->eligible && args->sendbuf != MPI_IN_PLACE, "MPI_Alltoall", &r)) {
        picoll_reentry--;
        return PICOLL_ALG_FALLBACK;
    }
    const char *send = args->sendbuf;
    char *recv = args->recvbuf;
    picoll_status_t status = PICOLL_OK;
    void *host = NULL;
    picoll_cudrv_pipe_t pipe;
    hier_back_t back = {.ctx = r.context, .dev = recv, .len = part, .stride = part};
    if (picoll_pinned_get(2 * part * (size_t)nodes, r.context, &host) != PICOLL_OK) {
        picoll_fatal("MPI_Alltoall between nodes: no host memory for %zu bytes of the device "
                     "hierarchy's network step: aborting the job", 2 * part * (size_t)nodes);
    }
    char *hsend = host, *hrecv = hsend + part * (size_t)nodes;
    for (int k = 1; k < nodes && status == PICOLL_OK; k++) {
        int y = (x + k) % nodes;
        if (k > 1) {
            hier_cuda_relaunch(ctx, &r);
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
        status = picoll_alltoall_hier_rails(h, hsend, hrecv, part, hier_arrived, &back);
        status = hier_back_close(&back, status);
    }
    picoll_pinned_put(host);
    if (status == PICOLL_OK) {
        hier_cuda_relaunch(ctx, &r);
        status = picoll_cuda_alltoall(ctx->cuda, send + (size_t)x * part, recv + (size_t)x * part,
                                      args->block_bytes);
    }
    picoll_reentry--;
    picoll_debug("MPI_Alltoall between nodes on the device: %zu bytes, node steps on the device, "
                 "%zu bytes to and from each of %d other nodes through host memory", total, part,
                 nodes - 1);
    if (status != PICOLL_OK) {
        picoll_fatal("MPI_Alltoall between nodes on the device failed (%s): aborting the job",
                     picoll_status_string(status));
    }
    return finish(PICOLL_COLL_ALLTOALL, PICOLL_ALLTOALL_HIER_CUDA, status, total, mpi_rc);
}

typedef struct {
    const blocks_coll_t *c;
    int size;
    size_t block_bytes;
} blocks_select_t;

static int select_cuda_blocks(const picoll_cuda_ws_t *ws, const void *arg)
{
    const blocks_select_t *b = arg;
    return b->c->select_cuda(&picoll_cfg, picoll_cuda_ws_reach(ws), b->size, b->block_bytes);
}

/* The host algorithm: single copy where selected and every rank's buffers allow it, else the
 * workspace. Sets *alg to the one that ran. */
static picoll_status_t run_blocks_host(picoll_shm_t *shm, const picoll_blocks_args_t *args,
                                       const blocks_coll_t *c, int vote, int direct, int *alg)
{
    if (*alg == c->cma_alg) {
        picoll_status_t status = c->run_cma(shm, args, cma_vote(vote, direct));
        if (status != PICOLL_ERR_NOT_SUPPORTED) {
            return status;
        }
        /* every rank can run picoll's algorithm, not every one single copy */
        *alg = c->shm_alg;
        vote = 1;
    }
    return c->run(shm, args, vote);
}

static int run_blocks(picoll_coll_ctx_t *ctx, const picoll_blocks_args_t *args, const blocks_coll_t *c,
                      int *mpi_rc)
{
    picoll_shm_t *shm = ctx->shm;
    int alg, cuda_alg = PICOLL_ALG_FALLBACK, vote, direct;
    picoll_status_t status;

    if (shm == NULL) {
        return PICOLL_ALG_FALLBACK;
    }
    if (ctx->hier != NULL) {
        if (ctx->cuda_hier_blocks &&
            args->block_bytes * (size_t)shm->nlocal >= picoll_cfg.hier_cuda_min) {
            int alg = c->coll == PICOLL_COLL_ALLGATHER ? hier_cuda_allgather(ctx, args, mpi_rc)
                                                       : hier_cuda_alltoall(ctx, args, mpi_rc);
            if (alg != PICOLL_ALG_FALLBACK) {
                return alg;
            }
        }
        return hier_blocks(ctx, args, c, mpi_rc);
    }
    alg = c->select(&picoll_cfg, ctx->size, args->block_bytes, shm->cma);
    blocks_select_t sel = {.c = c, .size = ctx->size, .block_bytes = args->block_bytes};
    picoll_reentry++;
    path_t path;
    int hot = 1;
    do { /* again after a veto on the hot path, with the full vote */
        path = pick_path(ctx, alg, args->sendbuf, args->recvbuf, PICOLL_DT_NONE, args->eligible,
                         c->name, select_cuda_blocks, &sel, NULL, &vote, &direct, &cuda_alg, hot);
        status = path != PATH_CUDA ? PICOLL_OK
                                   : c->run_cuda(ctx->cuda, args->sendbuf, args->recvbuf,
                                                 args->block_bytes);
        hot = 0;
    } while (status == PICOLL_ERR_VETOED);
    switch (path) {
    case PATH_CUDA:
        alg = cuda_alg;
        break;
    case PATH_HOST:
        status = run_blocks_host(shm, args, c, vote, direct, &alg);
        break;
    default:
        status = PICOLL_ERR_DISABLED;
        break;
    }
    picoll_reentry--;
    return finish(c->coll, alg, status, args->block_bytes * (size_t)ctx->size, mpi_rc);
}

int picoll_allgather(picoll_coll_ctx_t *ctx, const picoll_blocks_args_t *args, int *mpi_rc)
{
    static const blocks_coll_t allgather = {
        .coll = PICOLL_COLL_ALLGATHER,
        .name = "MPI_Allgather",
        .select = picoll_select_allgather,
        .shm_alg = PICOLL_ALLGATHER_SHM,
        .run = picoll_allgather_shm,
        .cma_alg = PICOLL_ALLGATHER_CMA,
        .run_cma = picoll_allgather_cma,
        .select_cuda = picoll_select_cuda_allgather,
        .run_cuda = picoll_cuda_allgather,
        .hier_piece_max = picoll_allgather_hier_piece_max,
        .hier_select = picoll_select_hier_allgather,
        .hier_run = picoll_allgather_hier,
    };
    return run_blocks(ctx, args, &allgather, mpi_rc);
}

int picoll_alltoall(picoll_coll_ctx_t *ctx, const picoll_blocks_args_t *args, int *mpi_rc)
{
    static const blocks_coll_t alltoall = {
        .coll = PICOLL_COLL_ALLTOALL,
        .name = "MPI_Alltoall",
        .select = picoll_select_alltoall,
        .shm_alg = PICOLL_ALLTOALL_SHM,
        .run = picoll_alltoall_shm,
        .cma_alg = PICOLL_ALLTOALL_CMA,
        .run_cma = picoll_alltoall_cma,
        .select_cuda = picoll_select_cuda_alltoall,
        .run_cuda = picoll_cuda_alltoall,
        .hier_piece_max = picoll_alltoall_hier_piece_max,
        .hier_select = picoll_select_hier_alltoall,
        .hier_run = picoll_alltoall_hier,
    };
    return run_blocks(ctx, args, &alltoall, mpi_rc);
}

/* The device-only collectives: every rank's vote for the device path (its buffers, the type),
 * else every rank hands the call over. */
typedef struct {
    picoll_coll_t coll;
    size_t bytes;          /* this rank's (the stats'); the same on every rank but alltoallv's */
    const size_t *agree;   /* alltoallv: the largest piece and receive bytes of every rank's */
} device_select_t;

static int select_cuda_device_only(const picoll_cuda_ws_t *ws, const void *arg)
{
    const device_select_t *d = arg;
    picoll_topo_reach_t reach = picoll_cuda_ws_reach(ws);
    return d->coll == PICOLL_COLL_ALLTOALLV
               ? picoll_select_cuda_bcast(&picoll_cfg, reach, d->agree[1])
           : d->coll == PICOLL_COLL_BCAST || d->coll == PICOLL_COLL_ALLGATHERV
               ? picoll_select_cuda_bcast(&picoll_cfg, reach, d->bytes)
               : picoll_select_cuda_reduce(&picoll_cfg, reach, d->bytes, picoll_cuda.staging);
}

int picoll_device_only(picoll_coll_ctx_t *ctx, const picoll_device_args_t *args, int *mpi_rc)
{
    static const char *const names[PICOLL_COLL_COUNT] = {
        [PICOLL_COLL_REDUCE_SCATTER_BLOCK] = "MPI_Reduce_scatter_block",
        [PICOLL_COLL_REDUCE_SCATTER] = "MPI_Reduce_scatter",
        [PICOLL_COLL_BCAST] = "MPI_Bcast",
        [PICOLL_COLL_REDUCE] = "MPI_Reduce",
        [PICOLL_COLL_ALLGATHERV] = "MPI_Allgatherv",
        [PICOLL_COLL_ALLTOALLV] = "MPI_Alltoallv",
    };
    int vote, direct, cuda_alg = PICOLL_ALG_FALLBACK;
    size_t esize = args->dtype == PICOLL_DT_NONE ? 1 : picoll_dtype_size(args->dtype);
    /* alltoallv: the largest piece (its chunk count) and receive bytes (its selection), agreed */
    size_t agree[AGREE_N] = {0, 0};
    device_select_t sel = {.coll = args->coll, .bytes = args->count * esize, .agree = agree};
    const void *send = args->sendbuf;
    void *recv = args->recvbuf;
    picoll_status_t status;

    if (ctx->shm == NULL || !ctx->cuda_possible || ctx->size > PICOLL_CUDA_MAX_LOCAL) {
        return PICOLL_ALG_FALLBACK;
    }
    if (args->coll == PICOLL_COLL_REDUCE_SCATTER_BLOCK || args->coll == PICOLL_COLL_REDUCE_SCATTER ||
        args->coll == PICOLL_COLL_ALLGATHERV) {
        sel.bytes = 0;
        for (int r = 0; r < ctx->size; r++) {
            sel.bytes += args->counts[r] * esize;
        }
    } else if (args->coll == PICOLL_COLL_ALLTOALLV) {
        /* a rank's pieces are the peers' pieces for it: the largest of every rank's sent and
         * received pieces is the largest of the call */
        for (int r = 0; r < ctx->size; r++) {
            agree[0] = args->counts[r] > agree[0] ? args->counts[r] : agree[0];
            agree[0] = args->rcounts[r] > agree[0] ? args->rcounts[r] : agree[0];
            agree[1] += args->rcounts[r];
        }
        sel.bytes = agree[1];
    } else if (args->coll == PICOLL_COLL_BCAST) {
        send = MPI_IN_PLACE;
    } else if (args->root != args->me) {
        /* reduce: a leaf's receive buffer is not significant; it votes on its send buffer */
        recv = (void *)send;
        send = MPI_IN_PLACE;
    }
    picoll_reentry++;
    int hot = 1;
    do { /* again after a veto on the hot path, with the full vote */
        if (pick_path(ctx, PICOLL_ALG_FALLBACK, send, recv, args->dtype, args->eligible,
                      names[args->coll], select_cuda_device_only, &sel,
                      args->coll == PICOLL_COLL_ALLTOALLV ? agree : NULL, &vote, &direct,
                      &cuda_alg, hot) != PATH_CUDA) {
            status = PICOLL_ERR_DISABLED;
        } else if (args->coll == PICOLL_COLL_BCAST) {
            status = picoll_cuda_bcast(ctx->cuda, args->recvbuf, args->count, args->root);
        } else if (args->coll == PICOLL_COLL_ALLTOALLV) {
            status = picoll_cuda_alltoallv(ctx->cuda, args->sendbuf, args->recvbuf, args->counts,
                                           args->displs, args->rcounts, args->rdispls, agree[0]);
        } else if (args->coll == PICOLL_COLL_ALLGATHERV) {
            status = picoll_cuda_allgatherv(ctx->cuda, args->sendbuf, args->recvbuf,
                                            args->counts, args->displs);
        } else if (args->coll == PICOLL_COLL_REDUCE) {
            status = picoll_cuda_reduce(ctx->cuda, args->sendbuf, args->recvbuf, args->count,
                                        args->dtype, args->op, args->root);
        } else {
            status = picoll_cuda_reduce_scatter(ctx->cuda, names[args->coll], args->sendbuf,
                                                args->recvbuf, args->counts, args->dtype,
                                                args->op);
        }
        hot = 0;
    } while (status == PICOLL_ERR_VETOED);
    picoll_reentry--;
    return finish(args->coll, cuda_alg, status, sel.bytes, mpi_rc);
}
