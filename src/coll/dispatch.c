#include "coll/dispatch.h"
#include "coll/algs.h"
#include "coll/coll.h"
#include "core.h"
#include "cuda/cuda_dev.h"
#include "memkind.h"
#include "select.h"
#include "stats.h"

/* Whether the host executor may touch both buffers. This can differ between ranks (one passes a
 * device buffer, another a host one): it is this rank's vote, never a path decision on its own. */
static int host_vote(const void *sendbuf, const void *recvbuf)
{
    if (sendbuf != MPI_IN_PLACE && picoll_memkind(sendbuf) != PICOLL_MEM_HOST) {
        return 0;
    }
    return picoll_memkind(recvbuf) == PICOLL_MEM_HOST;
}

/* Run the chosen algorithm; a "no" vote anywhere turns the call back into a fallback. */
static int finish(picoll_coll_t coll, int alg, picoll_status_t status, size_t bytes, int *mpi_rc)
{
    if (status == PICOLL_ERR_DISABLED) {
        return PICOLL_ALG_FALLBACK;
    }
    *mpi_rc = MPI_SUCCESS;
    picoll_last_set(coll, alg);
    if (picoll_g.stats) {
        picoll_stats_add(coll, alg, bytes);
    }
    return alg;
}

/* PATH_HOME is not a path: a bit of the vote, 0 where a rank's device buffers are all on another
 * device than its workspace */
typedef enum { PATH_NONE = 0, PATH_HOST = 1, PATH_CUDA = 2, PATH_HOME = 4 } path_t;

/* Which executor runs the call. The algorithms chosen (host_alg, cuda_alg) are the same on every
 * rank; the votes are not (memory kinds may differ between ranks). Where only the host executor
 * is possible its algorithm votes itself, as before. Where the device one is, one barrier on the
 * node carries both votes as bits and every rank takes the path all voted for: device, host (whose
 * algorithm then votes again, yes), or the underlying MPI. *vote: the host algorithm's vote. */
static path_t pick_path(picoll_comm_t *ctx, int host_alg, int cuda_alg, const void *sendbuf,
                        const void *recvbuf, picoll_dtype_t dt, int eligible, const char *coll,
                        int *vote)
{
    int host_ok = host_alg != PICOLL_ALG_FALLBACK && eligible && host_vote(sendbuf, recvbuf);
    if (ctx->cuda == NULL || cuda_alg == PICOLL_ALG_FALLBACK) {
        *vote = host_ok;
        return host_alg == PICOLL_ALG_FALLBACK ? PATH_NONE : PATH_HOST;
    }
    int home = 1;
    uint32_t mine = (host_ok ? PATH_HOST : 0u) |
                    (eligible && picoll_cuda_vote(ctx->cuda, sendbuf, recvbuf, dt, &home) ? PATH_CUDA
                                                                                          : 0u);
    mine |= home ? PATH_HOME : 0u;
    uint32_t all = picoll_shm_barrier_mask(ctx->shm, mine, coll);
    *vote = 1;
    if (!(all & PATH_HOME)) {
        /* some rank's device buffers are on another GPU than its workspace: all move theirs, and
         * this call (which nobody voted to run on the device) goes on as voted */
        picoll_cuda_ws_rehome(&ctx->cuda, ctx->comm, ctx->node_comm, &picoll_g.cfg,
                              picoll_cuda_buffers_device(sendbuf, recvbuf));
    }
    return (all & PATH_CUDA) ? PATH_CUDA : (all & PATH_HOST) ? PATH_HOST : PATH_NONE;
}

/* Between nodes: the hierarchical algorithms (host buffers, or CUDA buffers through host copies
 * where picoll stages them). Ends like finish(), with the copy back's error code. */
static int hier_finish(picoll_coll_t coll, int alg, picoll_status_t status, size_t bytes,
                       picoll_hier_stage_t *st, int *mpi_rc)
{
    int rc = picoll_hier_stage_out(st, status == PICOLL_OK);
    alg = finish(coll, alg, status, bytes, mpi_rc);
    if (alg != PICOLL_ALG_FALLBACK) {
        *mpi_rc = rc;
    }
    return alg;
}

static int hier_allreduce(picoll_comm_t *ctx, const picoll_allreduce_args_t *args, size_t bytes,
                          int *mpi_rc)
{
    picoll_shm_t *shm = ctx->shm;
    picoll_hier_shape_t shape = {.num_nodes = ctx->hier->num_nodes,
                                 .even = ctx->hier->even,
                                 .slot_size = shm->slot_size};
    int alg = picoll_select_hier_allreduce(&picoll_g.cfg, &shape, bytes,
                                           picoll_allreduce_hier_rail_block(shm, ctx->hier, args));
    if (alg == PICOLL_ALG_FALLBACK) {
        return alg;
    }
    picoll_hier_stage_t st;
    picoll_allreduce_args_t a = *args;
    picoll_reentry++;
    int vote = picoll_hier_stage_in(&st, &a.sendbuf, &a.recvbuf, bytes, bytes);
    picoll_status_t status =
        alg == PICOLL_ALLREDUCE_HIER_ONESHOT
            ? picoll_allreduce_hier_oneshot(shm, ctx->hier, &a, vote)
            : picoll_allreduce_hier(shm, ctx->hier, &a, vote, alg == PICOLL_ALLREDUCE_HIER_RING);
    picoll_reentry--;
    return hier_finish(PICOLL_COLL_ALLREDUCE, alg, status, bytes, &st, mpi_rc);
}

int picoll_allreduce(picoll_comm_t *ctx, const picoll_allreduce_args_t *args, int *mpi_rc)
{
    picoll_shm_t *shm = ctx->shm;
    size_t bytes;
    int alg, cuda_alg = PICOLL_ALG_FALLBACK, vote;
    picoll_status_t status;

    if (shm == NULL) {
        return PICOLL_ALG_FALLBACK;
    }
    bytes = args->count * picoll_dtype_size(args->dtype);
    if (ctx->hier != NULL) {
        return hier_allreduce(ctx, args, bytes, mpi_rc);
    }
    alg = picoll_select_allreduce(&picoll_g.cfg, shm->slot_size, ctx->size, bytes);
    if (ctx->cuda != NULL) {
        cuda_alg = picoll_select_cuda_allreduce(&picoll_g.cfg, picoll_cuda_ws_reach(ctx->cuda),
                                                picoll_cuda_ws_slot_size(ctx->cuda), bytes);
    }
    picoll_reentry++;
    switch (pick_path(ctx, alg, cuda_alg, args->sendbuf, args->recvbuf, args->dtype, 1,
                      "MPI_Allreduce", &vote)) {
    case PATH_CUDA:
        alg = cuda_alg;
        status = picoll_cuda_allreduce(ctx->cuda, args, alg);
        break;
    case PATH_HOST:
        if (alg == PICOLL_ALLREDUCE_ONESHOT) {
            status = picoll_allreduce_oneshot(shm, args, vote);
        } else {
            status = picoll_allreduce_twoshot(shm, args, vote);
        }
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
    int (*select)(const picoll_config_t *, int, size_t);
    picoll_status_t (*run)(picoll_shm_t *, const picoll_blocks_args_t *, int);
    int (*select_cuda)(const picoll_config_t *, picoll_topo_reach_t, int, size_t);
    picoll_status_t (*run_cuda)(picoll_cuda_ws_t *, const picoll_blocks_args_t *);
    size_t (*hier_piece_max)(const picoll_hier_t *, size_t);
    int (*hier_select)(const picoll_config_t *, size_t, size_t);
    picoll_status_t (*hier_run)(picoll_shm_t *, picoll_hier_t *, const picoll_blocks_args_t *, int);
} blocks_coll_t;

static int hier_blocks(picoll_comm_t *ctx, const picoll_blocks_args_t *args, const blocks_coll_t *c,
                       int *mpi_rc)
{
    picoll_shm_t *shm = ctx->shm;
    int alg = c->hier_select(&picoll_g.cfg, args->block_bytes,
                             c->hier_piece_max(ctx->hier, shm->slot_size));
    if (alg == PICOLL_ALG_FALLBACK) {
        return alg;
    }
    picoll_hier_stage_t st = {0};
    picoll_blocks_args_t a = *args;
    size_t total = args->block_bytes * (size_t)ctx->size;
    picoll_reentry++;
    /* types picoll cannot copy as bytes: no vote, and nothing read through them */
    int vote = args->eligible &&
               picoll_hier_stage_in(&st, &a.sendbuf, &a.recvbuf,
                                    c->coll == PICOLL_COLL_ALLTOALL ? total : args->block_bytes,
                                    total);
    picoll_status_t status = c->hier_run(shm, ctx->hier, &a, vote);
    picoll_reentry--;
    return hier_finish(c->coll, alg, status, total, &st, mpi_rc);
}

static int run_blocks(picoll_comm_t *ctx, const picoll_blocks_args_t *args, const blocks_coll_t *c,
                      int *mpi_rc)
{
    picoll_shm_t *shm = ctx->shm;
    int alg, cuda_alg = PICOLL_ALG_FALLBACK, vote;
    picoll_status_t status;

    if (shm == NULL) {
        return PICOLL_ALG_FALLBACK;
    }
    if (ctx->hier != NULL) {
        return hier_blocks(ctx, args, c, mpi_rc);
    }
    alg = c->select(&picoll_g.cfg, ctx->size, args->block_bytes);
    if (ctx->cuda != NULL) {
        cuda_alg = c->select_cuda(&picoll_g.cfg, picoll_cuda_ws_reach(ctx->cuda), ctx->size,
                                  args->block_bytes);
    }
    picoll_reentry++;
    switch (pick_path(ctx, alg, cuda_alg, args->sendbuf, args->recvbuf, PICOLL_DT_NONE,
                      args->eligible, c->name, &vote)) {
    case PATH_CUDA:
        alg = cuda_alg;
        status = c->run_cuda(ctx->cuda, args);
        break;
    case PATH_HOST:
        status = c->run(shm, args, vote);
        break;
    default:
        status = PICOLL_ERR_DISABLED;
        break;
    }
    picoll_reentry--;
    return finish(c->coll, alg, status, args->block_bytes * (size_t)ctx->size, mpi_rc);
}

int picoll_allgather(picoll_comm_t *ctx, const picoll_blocks_args_t *args, int *mpi_rc)
{
    static const blocks_coll_t allgather = {
        .coll = PICOLL_COLL_ALLGATHER,
        .name = "MPI_Allgather",
        .select = picoll_select_allgather,
        .run = picoll_allgather_shm,
        .select_cuda = picoll_select_cuda_allgather,
        .run_cuda = picoll_cuda_allgather,
        .hier_piece_max = picoll_allgather_hier_piece_max,
        .hier_select = picoll_select_hier_allgather,
        .hier_run = picoll_allgather_hier,
    };
    return run_blocks(ctx, args, &allgather, mpi_rc);
}

int picoll_alltoall(picoll_comm_t *ctx, const picoll_blocks_args_t *args, int *mpi_rc)
{
    static const blocks_coll_t alltoall = {
        .coll = PICOLL_COLL_ALLTOALL,
        .name = "MPI_Alltoall",
        .select = picoll_select_alltoall,
        .run = picoll_alltoall_shm,
        .select_cuda = picoll_select_cuda_alltoall,
        .run_cuda = picoll_cuda_alltoall,
        .hier_piece_max = picoll_alltoall_hier_piece_max,
        .hier_select = picoll_select_hier_alltoall,
        .hier_run = picoll_alltoall_hier,
    };
    return run_blocks(ctx, args, &alltoall, mpi_rc);
}
