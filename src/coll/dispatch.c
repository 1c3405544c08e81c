#include "coll/dispatch.h"
#include "coll/algs.h"
#include "coll/coll.h"
#include "core.h"
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
    if (picoll_g.stats) {
        picoll_stats_add(coll, alg, bytes);
    }
    return alg;
}

int picoll_allreduce(picoll_comm_t *ctx, const picoll_allreduce_args_t *args, int *mpi_rc)
{
    picoll_shm_t *shm = ctx->shm;
    size_t bytes;
    int alg;
    picoll_status_t status;

    if (shm == NULL) {
        return PICOLL_ALG_FALLBACK;
    }
    bytes = args->count * picoll_dtype_size(args->dtype);
    if (ctx->hier != NULL) {
        picoll_hier_shape_t shape = {.num_nodes = ctx->hier->num_nodes,
                                     .even = ctx->hier->even,
                                     .slot_size = shm->slot_size};
        alg = picoll_select_hier_allreduce(&picoll_g.cfg, &shape, bytes,
                                           picoll_allreduce_hier_rail_block(shm, ctx->hier, args));
    } else {
        alg = picoll_select_allreduce(&picoll_g.cfg, shm->slot_size, ctx->size, bytes);
    }
    if (alg == PICOLL_ALG_FALLBACK) {
        return alg;
    }
    picoll_reentry++;
    if (ctx->hier != NULL) {
        picoll_hier_stage_t st;
        picoll_allreduce_args_t a = *args;
        int vote = picoll_hier_stage_in(&st, &a.sendbuf, &a.recvbuf, bytes, bytes);
        status = alg == PICOLL_ALLREDUCE_HIER_ONESHOT
                     ? picoll_allreduce_hier_oneshot(shm, ctx->hier, &a, vote)
                     : picoll_allreduce_hier(shm, ctx->hier, &a, vote,
                                             alg == PICOLL_ALLREDUCE_HIER_RING);
        picoll_reentry--;
        int rc = picoll_hier_stage_out(&st, status == PICOLL_OK);
        alg = finish(PICOLL_COLL_ALLREDUCE, alg, status, bytes, mpi_rc);
        if (alg != PICOLL_ALG_FALLBACK) {
            *mpi_rc = rc;
        }
        return alg;
    }
    int vote = host_vote(args->sendbuf, args->recvbuf);
    if (alg == PICOLL_ALLREDUCE_ONESHOT) {
        status = picoll_allreduce_oneshot(shm, args, vote);
    } else {
        status = picoll_allreduce_twoshot(shm, args, vote);
    }
    picoll_reentry--;
    return finish(PICOLL_COLL_ALLREDUCE, alg, status, bytes, mpi_rc);
}

/* Allgather and alltoall: select by block size (between nodes: also by what the workspace
 * holds), vote, run. */
typedef struct {
    picoll_coll_t coll;
    int (*select)(const picoll_config_t *, int, size_t);
    picoll_status_t (*run)(picoll_shm_t *, const picoll_blocks_args_t *, int);
    size_t (*hier_piece_max)(const picoll_hier_t *, size_t);
    int (*hier_select)(const picoll_config_t *, size_t, size_t);
    picoll_status_t (*hier_run)(picoll_shm_t *, picoll_hier_t *, const picoll_blocks_args_t *, int);
} blocks_coll_t;

static const blocks_coll_t allgather_coll = {
    .coll = PICOLL_COLL_ALLGATHER,
    .select = picoll_select_allgather,
    .run = picoll_allgather_shm,
    .hier_piece_max = picoll_allgather_hier_piece_max,
    .hier_select = picoll_select_hier_allgather,
    .hier_run = picoll_allgather_hier,
};

static const blocks_coll_t alltoall_coll = {
    .coll = PICOLL_COLL_ALLTOALL,
    .select = picoll_select_alltoall,
    .run = picoll_alltoall_shm,
    .hier_piece_max = picoll_alltoall_hier_piece_max,
    .hier_select = picoll_select_hier_alltoall,
    .hier_run = picoll_alltoall_hier,
};

static int run_blocks(picoll_comm_t *ctx, const picoll_blocks_args_t *args,
                      const blocks_coll_t *bc, int *mpi_rc)
{
    picoll_shm_t *shm = ctx->shm;
    int alg;
    picoll_status_t status;

    if (shm == NULL) {
        return PICOLL_ALG_FALLBACK;
    }
    if (ctx->hier != NULL) {
        alg = bc->hier_select(&picoll_g.cfg, args->block_bytes,
                              bc->hier_piece_max(ctx->hier, shm->slot_size));
    } else {
        alg = bc->select(&picoll_g.cfg, ctx->size, args->block_bytes);
    }
    if (alg == PICOLL_ALG_FALLBACK) {
        return alg;
    }
    picoll_reentry++;
    if (ctx->hier != NULL) {
        picoll_hier_stage_t st = {0};
        picoll_blocks_args_t a = *args;
        size_t total = args->block_bytes * (size_t)ctx->size;
        /* types picoll cannot copy as bytes: no vote, and nothing read through them */
        int vote = args->eligible &&
                   picoll_hier_stage_in(&st, &a.sendbuf, &a.recvbuf,
                                        bc->coll == PICOLL_COLL_ALLTOALL ? total : args->block_bytes,
                                        total);
        status = bc->hier_run(shm, ctx->hier, &a, vote);
        picoll_reentry--;
        int rc = picoll_hier_stage_out(&st, status == PICOLL_OK);
        alg = finish(bc->coll, alg, status, total, mpi_rc);
        if (alg != PICOLL_ALG_FALLBACK) {
            *mpi_rc = rc;
        }
        return alg;
    }
    int vote = args->eligible && host_vote(args->sendbuf, args->recvbuf);
    status = bc->run(shm, args, vote);
    picoll_reentry--;
    return finish(bc->coll, alg, status, args->block_bytes * (size_t)ctx->size, mpi_rc);
}

int picoll_allgather(picoll_comm_t *ctx, const picoll_blocks_args_t *args, int *mpi_rc)
{
    return run_blocks(ctx, args, &allgather_coll, mpi_rc);
}

int picoll_alltoall(picoll_comm_t *ctx, const picoll_blocks_args_t *args, int *mpi_rc)
{
    return run_blocks(ctx, args, &alltoall_coll, mpi_rc);
}
