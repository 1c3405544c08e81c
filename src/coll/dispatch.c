#include "coll/dispatch.h"
#include "coll/algs.h"
#include "coll/coll.h"
#include "coll/hier_cuda.h"
#include "coll/vote.h"
#include "util/config.h"
#include "util/log.h"
#include "util/reentry.h"
#include "cuda/cuda_kernel.h"
#include "cuda/cuda_dev.h"
#include "mem/cuda_state.h"
#include "mem/stage.h"
#include "coll/select.h"
#include "coll/stats.h"

/* Ends a call. Where picoll took it (status anything but PICOLL_DECLINED) the algorithm alg is
 * recorded, the outputs are set (*mpi_rc: rc, the MPI return code for the caller) and the entry
 * point returns PICOLL_OK; PICOLL_DECLINED: a rank voted no, and every rank hands the call to the
 * MPI. */
static picoll_status_t finish(picoll_coll_t coll, int alg, picoll_status_t status, size_t bytes,
                              int rc, int *alg_out, int *mpi_rc)
{
    if (status == PICOLL_DECLINED) {
        return PICOLL_DECLINED;
    }
    picoll_last_set(coll, alg);
    if (picoll_cfg.stats) {
        picoll_stats_add(coll, alg, bytes);
    }
    *alg_out = alg;
    *mpi_rc = rc;
    return PICOLL_OK;
}

/* The MPI return code of a call whose buffers picoll staged through host memory: the copy back's
 * (st or pipe). */
static int staged_rc(picoll_status_t out)
{
    return out == PICOLL_OK ? MPI_SUCCESS : MPI_ERR_OTHER;
}

/* A single-copy algorithm's two-bit vote (coll/algs.h) from the vote's. */
static uint32_t cma_vote(const picoll_vote_t *v)
{
    return v->vote ? PICOLL_CMA_VOTE_HOST | (v->direct ? PICOLL_CMA_VOTE_DIRECT : 0u) : 0u;
}

/* A call on one node: run on the path its ranks vote for (coll/vote.c), ended by finish(). */
static picoll_status_t run_voted(picoll_coll_ctx_t *ctx, const picoll_vote_call_t *call,
                                 picoll_coll_t coll, size_t bytes, int *alg, int *mpi_rc)
{
    int ran = PICOLL_ALG_FALLBACK;
    picoll_status_t status = picoll_vote_run(ctx, call, &ran);
    return finish(coll, ran, status, bytes, MPI_SUCCESS, alg, mpi_rc);
}

/* Between nodes: the device hierarchy where the buffers allow it (every rank's), else the host
 * hierarchy, on host buffers or CUDA buffers copied to the host and back chunk by chunk (where
 * picoll stages them), beside the chunks' node and network steps (mem/stage.h). */
static picoll_status_t hier_allreduce(picoll_coll_ctx_t *ctx, const picoll_allreduce_args_t *args,
                                      size_t bytes, int *alg_out, int *mpi_rc)
{
    picoll_status_t status;
    int rc;

    if (ctx->cuda_hier && bytes >= picoll_cfg.hier_cuda_min) {
        status = picoll_allreduce_hier_cuda(ctx, args, bytes, &rc);
        if (status != PICOLL_DECLINED) {
            return finish(PICOLL_COLL_ALLREDUCE, PICOLL_ALLREDUCE_HIER_CUDA, status, bytes, rc,
                          alg_out, mpi_rc);
        }
    }
    picoll_shm_t *shm = ctx->shm;
    picoll_hier_shape_t shape = {
        .num_nodes = ctx->hier->num_nodes, .even = ctx->hier->even, .slot_size = shm->slot_size};
    static const picoll_rail_method_t method[] = {[PICOLL_ALLREDUCE_HIER_RD] = PICOLL_RAIL_RD,
                                                  [PICOLL_ALLREDUCE_HIER_RAB] = PICOLL_RAIL_RAB,
                                                  [PICOLL_ALLREDUCE_HIER_RING] = PICOLL_RAIL_RING};
    int alg = picoll_select_hier_allreduce(&picoll_cfg, &shape, bytes,
                                           picoll_allreduce_hier_rail_block(shm, ctx->hier, args));
    if (alg == PICOLL_ALG_FALLBACK) {
        return PICOLL_DECLINED;
    }
    picoll_stage_pipe_t pipe;
    picoll_allreduce_args_t a = *args;
    int oneshot = alg == PICOLL_ALLREDUCE_HIER_ONESHOT;
    picoll_reentry++;
    int vote = picoll_stage_pipe_in(&pipe, picoll_cuda.staging, &a.sendbuf, &a.recvbuf, bytes,
                                    picoll_allreduce_hier_chunk_bytes(shm, args, oneshot),
                                    picoll_cfg.stage_depth);
    a.pipe = pipe.piped ? &pipe : NULL;
    status = oneshot ? picoll_allreduce_hier_oneshot(shm, ctx->hier, &a, vote)
                     : picoll_allreduce_hier(shm, ctx->hier, &a, vote, method[alg]);
    picoll_reentry--;
    rc = staged_rc(picoll_stage_pipe_out(&pipe, status == PICOLL_OK));
    if (pipe.piped || pipe.host_bytes > 0) {
        picoll_debug("MPI_Allreduce between nodes: %zu bytes staged in %zu chunk(s)%s, up to %d "
                     "copies in ahead of the chunk at work, %.2f bytes through host memory per "
                     "byte",
                     bytes, pipe.nchunks, pipe.piped ? " (pipelined)" : "", pipe.ahead_max,
                     bytes ? (double)pipe.host_bytes / (double)bytes : 0.0);
    }
    return finish(PICOLL_COLL_ALLREDUCE, alg, status, bytes, rc, alg_out, mpi_rc);
}

/* An allreduce on one node, as the vote's functions see it. */
typedef struct {
    const picoll_allreduce_args_t *args;
    size_t bytes;
} allreduce_call_t;

static int select_host_allreduce(const picoll_coll_ctx_t *ctx, const void *arg)
{
    const allreduce_call_t *c = arg;
    return picoll_select_allreduce(&picoll_cfg, ctx->shm->slot_size, ctx->size, c->bytes,
                                   ctx->shm->cma);
}

static int select_cuda_allreduce(const picoll_cuda_limits_t *lim, const void *arg)
{
    const allreduce_call_t *c = arg;
    return picoll_select_cuda_allreduce(&picoll_cfg, lim, c->bytes, picoll_cuda.staging);
}

static picoll_status_t run_cuda_allreduce(picoll_coll_ctx_t *ctx, int alg, const void *arg)
{
    const picoll_allreduce_args_t *args = ((const allreduce_call_t *)arg)->args;
    return picoll_cuda_allreduce(ctx->cuda, picoll_allreduce_kmode(alg), args->sendbuf,
                                 args->recvbuf, args->count, args->dtype, args->op);
}

static int zc_allreduce(const void *arg, int alg, size_t *sbytes, size_t *rbytes)
{
    const allreduce_call_t *c = arg;
    return picoll_zero_copy_form(PICOLL_COLL_ALLREDUCE, alg, c->bytes, 1, 0, sbytes, rbytes);
}

/* The host algorithm: one-shot, or two-shot in single copies where selected and every rank's
 * buffers allow it, else through the workspace. */
static picoll_status_t run_host_allreduce(picoll_coll_ctx_t *ctx, const picoll_vote_t *v,
                                          const void *arg, int *alg)
{
    const picoll_allreduce_args_t *args = ((const allreduce_call_t *)arg)->args;
    int vote = v->vote;

    *alg = v->host_alg;
    if (*alg == PICOLL_ALLREDUCE_ONESHOT) {
        return picoll_allreduce_oneshot(ctx->shm, args, vote);
    }
    if (*alg == PICOLL_ALLREDUCE_CMA) {
        picoll_status_t status = picoll_allreduce_cma(ctx->shm, args, cma_vote(v));
        if (status != PICOLL_ERR_NOT_SUPPORTED) {
            return status;
        }
        /* every rank can run picoll's algorithm, not every one single copy */
        *alg = PICOLL_ALLREDUCE_TWOSHOT;
        vote = 1;
    }
    return picoll_allreduce_twoshot(ctx->shm, args, vote);
}

picoll_status_t picoll_allreduce(picoll_coll_ctx_t *ctx, const picoll_allreduce_args_t *args,
                                 int *alg, int *mpi_rc)
{
    if (ctx->shm == NULL) {
        return PICOLL_DECLINED;
    }
    allreduce_call_t c = {.args = args, .bytes = args->count * picoll_dtype_size(args->dtype)};
    if (ctx->hier != NULL) {
        return hier_allreduce(ctx, args, c.bytes, alg, mpi_rc);
    }
    static const picoll_vote_ops_t ops = {
        .select_host = select_host_allreduce,
        .select_cuda = select_cuda_allreduce,
        .run_cuda = run_cuda_allreduce,
        .run_host = run_host_allreduce,
        .zero_copy = zc_allreduce,
    };
    picoll_vote_call_t call = {.name = "MPI_Allreduce",
                               .sendbuf = args->sendbuf,
                               .recvbuf = args->recvbuf,
                               .dtype = args->dtype,
                               .eligible = 1,
                               .ops = &ops,
                               .arg = &c};
    return run_voted(ctx, &call, PICOLL_COLL_ALLREDUCE, c.bytes, alg, mpi_rc);
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
    int (*select_cuda)(const picoll_config_t *, const picoll_cuda_limits_t *, size_t);
    picoll_status_t (*run_cuda)(picoll_cuda_ws_t *, const void *, void *, size_t);
    size_t (*hier_piece_max)(const picoll_hier_t *, size_t);
    int (*hier_select)(const picoll_config_t *, const picoll_hier_shape_t *, size_t, size_t);
    picoll_status_t (*hier_run)(picoll_shm_t *, picoll_hier_t *, const picoll_blocks_args_t *, int,
                                int alg);
    int hier_cuda_alg;
    picoll_status_t (*hier_cuda)(picoll_coll_ctx_t *, const picoll_blocks_args_t *, int *);
} blocks_coll_t;

/* Between nodes: the device hierarchy where the buffers allow it (every rank's: device memory,
 * nodes of equal size, ranks placed by node), else the host hierarchy, on host buffers or CUDA
 * buffers through host copies where picoll stages them. */
static picoll_status_t hier_blocks(picoll_coll_ctx_t *ctx, const picoll_blocks_args_t *args,
                                   const blocks_coll_t *c, int *alg_out, int *mpi_rc)
{
    picoll_shm_t *shm = ctx->shm;
    size_t total = args->block_bytes * (size_t)ctx->size;
    picoll_status_t status;
    int rc;

    if (ctx->cuda_hier_blocks &&
        args->block_bytes * (size_t)shm->nlocal >= picoll_cfg.hier_cuda_min) {
        status = c->hier_cuda(ctx, args, &rc);
        if (status != PICOLL_DECLINED) {
            return finish(c->coll, c->hier_cuda_alg, status, total, rc, alg_out, mpi_rc);
        }
    }
    picoll_hier_shape_t shape = {.num_nodes = ctx->hier->num_nodes,
                                 .even = ctx->hier->even,
                                 .slot_size = shm->slot_size,
                                 .rail_pieces = ctx->hier->rail_most};
    int alg = c->hier_select(&picoll_cfg, &shape, args->block_bytes,
                             c->hier_piece_max(ctx->hier, shm->slot_size));
    if (alg == PICOLL_ALG_FALLBACK) {
        return PICOLL_DECLINED;
    }
    picoll_stage_pair_t st = {0};
    picoll_blocks_args_t a = *args;
    picoll_reentry++;
    /* types picoll cannot copy as bytes: no vote, and nothing read through them */
    int vote =
        args->eligible &&
        picoll_stage_pair_in(&st, picoll_cuda.staging, &a.sendbuf, &a.recvbuf,
                             c->coll == PICOLL_COLL_ALLTOALL ? total : args->block_bytes, total);
    status = c->hier_run(shm, ctx->hier, &a, vote, alg);
    picoll_reentry--;
    rc = staged_rc(picoll_stage_pair_out(&st, status == PICOLL_OK));
    return finish(c->coll, alg, status, total, rc, alg_out, mpi_rc);
}

/* An allgather or alltoall on one node, as the vote's functions see it. */
typedef struct {
    const blocks_coll_t *c;
    const picoll_blocks_args_t *args;
    int size;
} blocks_call_t;

static int select_host_blocks(const picoll_coll_ctx_t *ctx, const void *arg)
{
    const blocks_call_t *b = arg;
    return b->c->select(&picoll_cfg, b->size, b->args->block_bytes, ctx->shm->cma);
}

static int select_cuda_blocks(const picoll_cuda_limits_t *lim, const void *arg)
{
    const blocks_call_t *b = arg;
    return b->c->select_cuda(&picoll_cfg, lim, b->args->block_bytes);
}

static picoll_status_t run_cuda_blocks(picoll_coll_ctx_t *ctx, int alg, const void *arg)
{
    const blocks_call_t *b = arg;
    if (b->c->coll == PICOLL_COLL_ALLGATHER) {
        return picoll_cuda_allgather_mode(ctx->cuda, picoll_allgather_kmode(alg), b->args->sendbuf,
                                          b->args->recvbuf, b->args->block_bytes);
    }
    return b->c->run_cuda(ctx->cuda, b->args->sendbuf, b->args->recvbuf, b->args->block_bytes);
}

static int zc_blocks(const void *arg, int alg, size_t *sbytes, size_t *rbytes)
{
    const blocks_call_t *b = arg;
    return picoll_zero_copy_form(b->c->coll, alg, b->args->block_bytes, b->size,
                                 b->args->sendbuf == MPI_IN_PLACE, sbytes, rbytes);
}

/* The host algorithm: single copy where selected and every rank's buffers allow it, else the
 * workspace. */
static picoll_status_t run_host_blocks(picoll_coll_ctx_t *ctx, const picoll_vote_t *v,
                                       const void *arg, int *alg)
{
    const blocks_call_t *b = arg;
    int vote = v->vote;

    *alg = v->host_alg;
    if (*alg == b->c->cma_alg) {
        picoll_status_t status = b->c->run_cma(ctx->shm, b->args, cma_vote(v));
        if (status != PICOLL_ERR_NOT_SUPPORTED) {
            return status;
        }
        /* every rank can run picoll's algorithm, not every one single copy */
        *alg = b->c->shm_alg;
        vote = 1;
    }
    return b->c->run(ctx->shm, b->args, vote);
}

static picoll_status_t run_blocks(picoll_coll_ctx_t *ctx, const picoll_blocks_args_t *args,
                                  const blocks_coll_t *c, int *alg, int *mpi_rc)
{
    if (ctx->shm == NULL) {
        return PICOLL_DECLINED;
    }
    if (ctx->hier != NULL) {
        return hier_blocks(ctx, args, c, alg, mpi_rc);
    }
    static const picoll_vote_ops_t ops = {
        .select_host = select_host_blocks,
        .select_cuda = select_cuda_blocks,
        .run_cuda = run_cuda_blocks,
        .run_host = run_host_blocks,
        .zero_copy = zc_blocks,
    };
    blocks_call_t b = {.c = c, .args = args, .size = ctx->size};
    picoll_vote_call_t call = {.name = c->name,
                               .sendbuf = args->sendbuf,
                               .recvbuf = args->recvbuf,
                               .dtype = PICOLL_DT_NONE,
                               .eligible = args->eligible,
                               .ops = &ops,
                               .arg = &b};
    return run_voted(ctx, &call, c->coll, args->block_bytes * (size_t)ctx->size, alg, mpi_rc);
}

/* The host hierarchy's network steps, as hier_blocks sees them: allgather's ring or Bruck's (its
 * selection picks), alltoall's one method. */
static picoll_status_t run_hier_allgather(picoll_shm_t *shm, picoll_hier_t *h,
                                          const picoll_blocks_args_t *args, int vote, int alg)
{
    return picoll_allgather_hier(shm, h, args, vote,
                                 alg == PICOLL_ALLGATHER_HIER_BRUCK ? PICOLL_RAIL_BRUCK
                                                                    : PICOLL_RAIL_RING);
}

static int select_hier_alltoall(const picoll_config_t *cfg, const picoll_hier_shape_t *shape,
                                size_t block_bytes, size_t piece_max)
{
    (void)shape;
    return picoll_select_hier_alltoall(cfg, block_bytes, piece_max);
}

static picoll_status_t run_hier_alltoall(picoll_shm_t *shm, picoll_hier_t *h,
                                         const picoll_blocks_args_t *args, int vote, int alg)
{
    (void)alg;
    return picoll_alltoall_hier(shm, h, args, vote);
}

picoll_status_t picoll_allgather(picoll_coll_ctx_t *ctx, const picoll_blocks_args_t *args, int *alg,
                                 int *mpi_rc)
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
        .hier_run = run_hier_allgather,
        .hier_cuda_alg = PICOLL_ALLGATHER_HIER_CUDA,
        .hier_cuda = picoll_allgather_hier_cuda,
    };
    return run_blocks(ctx, args, &allgather, alg, mpi_rc);
}

picoll_status_t picoll_alltoall(picoll_coll_ctx_t *ctx, const picoll_blocks_args_t *args, int *alg,
                                int *mpi_rc)
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
        .hier_select = select_hier_alltoall,
        .hier_run = run_hier_alltoall,
        .hier_cuda_alg = PICOLL_ALLTOALL_HIER_CUDA,
        .hier_cuda = picoll_alltoall_hier_cuda,
    };
    return run_blocks(ctx, args, &alltoall, alg, mpi_rc);
}

/* The device-only collectives: every rank's vote for the device path (its buffers, the type),
 * else every rank hands the call over. */
typedef struct {
    const picoll_device_args_t *args;
    const char *name;
    size_t bytes; /* this rank's (the stats'); the same on every rank but alltoallv's */
    size_t agree[PICOLL_VOTE_AGREE_N]; /* alltoallv: the largest piece (its chunk count) and
                                        * receive bytes (its selection) of every rank's */
    int size;
} device_call_t;

/* Bcast's and reduce-scatter's zero-copy forms: reduce-scatter of even pieces only
 * (MPI_Reduce_scatter's counts are the same on every rank, so is the answer). */
static int zc_device_only(const void *arg, int alg, size_t *sbytes, size_t *rbytes)
{
    const device_call_t *d = arg;
    const picoll_device_args_t *args = d->args;
    if (args->coll == PICOLL_COLL_BCAST) {
        return picoll_zero_copy_form(PICOLL_COLL_BCAST, alg, d->bytes, d->size, 1, sbytes, rbytes);
    }
    if ((args->coll != PICOLL_COLL_REDUCE_SCATTER_BLOCK &&
         args->coll != PICOLL_COLL_REDUCE_SCATTER) ||
        args->dtype == PICOLL_DT_NONE) {
        return 0;
    }
    for (int r = 1; r < d->size; r++) {
        if (args->counts[r] != args->counts[0]) {
            return 0;
        }
    }
    return picoll_zero_copy_form(PICOLL_COLL_REDUCE_SCATTER_BLOCK, alg,
                                 args->counts[0] * picoll_dtype_size(args->dtype), d->size,
                                 args->sendbuf == MPI_IN_PLACE, sbytes, rbytes);
}

static int select_cuda_device_only(const picoll_cuda_limits_t *lim, const void *arg)
{
    const device_call_t *d = arg;
    picoll_coll_t coll = d->args->coll;
    picoll_topo_reach_t reach = lim->reach;
    return coll == PICOLL_COLL_ALLTOALLV ? picoll_select_cuda_bcast(&picoll_cfg, reach, d->agree[1])
           : coll == PICOLL_COLL_BCAST || coll == PICOLL_COLL_ALLGATHERV
               ? picoll_select_cuda_bcast(&picoll_cfg, reach, d->bytes)
               : picoll_select_cuda_reduce(&picoll_cfg, reach, d->bytes, picoll_cuda.staging);
}

static picoll_status_t run_cuda_device_only(picoll_coll_ctx_t *ctx, int alg, const void *arg)
{
    const device_call_t *d = arg;
    const picoll_device_args_t *args = d->args;
    (void)alg;
    switch (args->coll) {
    case PICOLL_COLL_BCAST:
        return picoll_cuda_bcast(ctx->cuda, args->recvbuf, args->count, args->root);
    case PICOLL_COLL_ALLTOALLV:
        return picoll_cuda_alltoallv(ctx->cuda, args->sendbuf, args->recvbuf, args->counts,
                                     args->displs, args->rcounts, args->rdispls, d->agree[0]);
    case PICOLL_COLL_ALLGATHERV:
        return picoll_cuda_allgatherv(ctx->cuda, args->sendbuf, args->recvbuf, args->counts,
                                      args->displs);
    case PICOLL_COLL_REDUCE:
        return picoll_cuda_reduce(ctx->cuda, args->sendbuf, args->recvbuf, args->count, args->dtype,
                                  args->op, args->root);
    default:
        return picoll_cuda_reduce_scatter(ctx->cuda, d->name, args->sendbuf, args->recvbuf,
                                          args->counts, args->dtype, args->op);
    }
}

/* The bytes of a device-only call (d->bytes, d->agree); *send, *recv: the buffers it votes on. */
static void device_measure(int size, device_call_t *d, const void **send, const void **recv)
{
    const picoll_device_args_t *args = d->args;
    picoll_coll_t coll = args->coll;
    size_t esize = args->dtype == PICOLL_DT_NONE ? 1 : picoll_dtype_size(args->dtype);

    *send = args->sendbuf;
    *recv = args->recvbuf;
    d->bytes = args->count * esize;
    if (coll == PICOLL_COLL_REDUCE_SCATTER_BLOCK || coll == PICOLL_COLL_REDUCE_SCATTER ||
        coll == PICOLL_COLL_ALLGATHERV) {
        d->bytes = 0;
        for (int r = 0; r < size; r++) {
            d->bytes += args->counts[r] * esize;
        }
    } else if (coll == PICOLL_COLL_ALLTOALLV) {
        /* a rank's pieces are the peers' pieces for it: the largest of every rank's sent and
         * received pieces is the largest of the call */
        for (int r = 0; r < size; r++) {
            d->agree[0] = args->counts[r] > d->agree[0] ? args->counts[r] : d->agree[0];
            d->agree[0] = args->rcounts[r] > d->agree[0] ? args->rcounts[r] : d->agree[0];
            d->agree[1] += args->rcounts[r];
        }
        d->bytes = d->agree[1];
    } else if (coll == PICOLL_COLL_BCAST) {
        *send = MPI_IN_PLACE;
    } else if (args->root != args->me) {
        /* reduce: a leaf's receive buffer is not significant; it votes on its send buffer */
        *recv = *send;
        *send = MPI_IN_PLACE;
    }
}

picoll_status_t picoll_device_only(picoll_coll_ctx_t *ctx, const picoll_device_args_t *args,
                                   int *alg, int *mpi_rc)
{
    static const char *const names[PICOLL_COLL_COUNT] = {
        [PICOLL_COLL_REDUCE_SCATTER_BLOCK] = "MPI_Reduce_scatter_block",
        [PICOLL_COLL_REDUCE_SCATTER] = "MPI_Reduce_scatter",
        [PICOLL_COLL_BCAST] = "MPI_Bcast",
        [PICOLL_COLL_REDUCE] = "MPI_Reduce",
        [PICOLL_COLL_ALLGATHERV] = "MPI_Allgatherv",
        [PICOLL_COLL_ALLTOALLV] = "MPI_Alltoallv",
    };
    static const picoll_vote_ops_t ops = {
        .select_cuda = select_cuda_device_only,
        .run_cuda = run_cuda_device_only,
        .zero_copy = zc_device_only,
    };
    device_call_t d = {.args = args, .name = names[args->coll], .agree = {0, 0}, .size = ctx->size};
    picoll_vote_call_t call = {.name = d.name,
                               .dtype = args->dtype,
                               .eligible = args->eligible,
                               .ops = &ops,
                               .arg = &d,
                               .agree = args->coll == PICOLL_COLL_ALLTOALLV ? d.agree : NULL};

    if (ctx->shm == NULL || !ctx->cuda_possible || ctx->size > PICOLL_CUDA_MAX_LOCAL) {
        return PICOLL_DECLINED;
    }
    device_measure(ctx->size, &d, &call.sendbuf, &call.recvbuf);
    return run_voted(ctx, &call, args->coll, d.bytes, alg, mpi_rc);
}
