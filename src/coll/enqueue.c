/* Collectives enqueued on an application's CUDA stream, on picoll's kernels there (issue 23): the
 * selection every rank makes alike without a word exchanged, and the launches. No vote, no
 * barrier, no wait: a stream communicator's workspace (ctx->cuda_enq) was agreed on by every rank
 * when the communicator was made, and what decides the path here is the same on every rank. One
 * pass down (issue 51): the call's description comes made (its bytes computed once, by the
 * caller), the selection reads the workspace's limits from ctx (handed up once, when the
 * workspace was made), and the executor is entered once, to launch. */
#include "coll/algs.h"
#include "coll/dispatch.h"
#include "coll/select.h"
#include "coll/stats.h"
#include "mem/cuda_state.h"
#include "util/config.h"

/* The device algorithm of a, or PICOLL_ALG_FALLBACK. */
static int enq_select(const picoll_coll_ctx_t *ctx, const picoll_enq_args_t *a)
{
    const picoll_cuda_limits_t *lim = &ctx->cuda_enq_limits;
    int reduction = a->coll == PICOLL_COLL_ALLREDUCE || a->coll == PICOLL_COLL_REDUCE_SCATTER_BLOCK;
    if (reduction && (a->dtype >= PICOLL_DT_COUNT || !((lim->dtypes >> a->dtype) & 1u) ||
                      a->op == PICOLL_OP_NONE || !picoll_op_valid(a->dtype, a->op))) {
        return PICOLL_ALG_FALLBACK;
    }
    switch (a->coll) {
    case PICOLL_COLL_ALLREDUCE:
        return picoll_select_cuda_allreduce(&picoll_cfg, lim, a->bytes, picoll_cuda.staging);
    case PICOLL_COLL_REDUCE_SCATTER_BLOCK:
        return picoll_select_cuda_reduce(&picoll_cfg, lim->reach, a->bytes * (size_t)ctx->size,
                                         picoll_cuda.staging);
    case PICOLL_COLL_ALLGATHER: return picoll_select_cuda_allgather(&picoll_cfg, lim, a->bytes);
    case PICOLL_COLL_ALLTOALL: return picoll_select_cuda_alltoall(&picoll_cfg, lim, a->bytes);
    case PICOLL_COLL_BCAST: return picoll_select_cuda_bcast(&picoll_cfg, lim->reach, a->bytes);
    default: return PICOLL_ALG_FALLBACK;
    }
}

/* The launches of a with algorithm alg on ws. */
static picoll_status_t enq_launch(picoll_cuda_ws_t *ws, int size, const picoll_enq_args_t *a,
                                  int alg)
{
    switch (a->coll) {
    case PICOLL_COLL_ALLREDUCE:
        return picoll_cuda_allreduce(ws, picoll_allreduce_kmode(alg), a->sendbuf, a->recvbuf,
                                     a->count, a->dtype, a->op);
    case PICOLL_COLL_REDUCE_SCATTER_BLOCK: {
        size_t counts[PICOLL_CUDA_MAX_LOCAL];
        for (int r = 0; r < size && r < PICOLL_CUDA_MAX_LOCAL; r++) {
            counts[r] = a->count;
        }
        return picoll_cuda_reduce_scatter(ws, "MPIX_Reduce_scatter_block_enqueue", a->sendbuf,
                                          a->recvbuf, counts, a->dtype, a->op);
    }
    case PICOLL_COLL_ALLGATHER:
        return picoll_cuda_allgather_mode(ws, picoll_allgather_kmode(alg), a->sendbuf, a->recvbuf,
                                          a->count);
    case PICOLL_COLL_ALLTOALL: return picoll_cuda_alltoall(ws, a->sendbuf, a->recvbuf, a->count);
    case PICOLL_COLL_BCAST: return picoll_cuda_bcast(ws, a->recvbuf, a->count, a->root);
    default: return PICOLL_ERR_NOT_SUPPORTED;
    }
}

picoll_status_t picoll_enq_call(picoll_coll_ctx_t *ctx, picoll_enq_args_t *args)
{
    int alg = ctx->cuda_enq != NULL ? enq_select(ctx, args) : PICOLL_ALG_FALLBACK;
    if (alg == PICOLL_ALG_FALLBACK) {
        return PICOLL_DECLINED;
    }
    picoll_status_t status = args->place != NULL
                                 ? args->place(args->place_arg, &args->sendbuf, &args->recvbuf)
                                 : PICOLL_OK;
    if (status != PICOLL_OK) {
        return status;
    }
    /* the zero-copy path: the ranks exchange their buffers' descriptions in one barrier of the
     * stream's own node workspace, here, at the enqueue (as MPI lets a collective wait for its
     * peers' calls), and the launch maps them and agrees once more */
    size_t sbytes = 0, rbytes = 0;
    int zc = picoll_zero_copy_form(args->coll, alg, args->bytes, ctx->size,
                                   args->sendbuf == MPI_IN_PLACE, &sbytes, &rbytes);
    zc = zc != 0 && picoll_cuda_zc_stream_exchange(
                        ctx->cuda_enq, __atomic_load_n(&ctx->reg_scope, __ATOMIC_ACQUIRE),
                        args->sendbuf, args->recvbuf, sbytes, rbytes, "an enqueued collective")
             ? zc
             : 0;
    status = enq_launch(ctx->cuda_enq, ctx->size, args, alg);
    alg = zc != 0 && picoll_cuda_zc_last(ctx->cuda_enq) ? zc : alg;
    if (status == PICOLL_OK) {
        /* what the node moves: every rank's piece or block, the vector or the message */
        int blocks = args->coll == PICOLL_COLL_REDUCE_SCATTER_BLOCK ||
                     args->coll == PICOLL_COLL_ALLGATHER || args->coll == PICOLL_COLL_ALLTOALL;
        picoll_last_set(args->coll, alg);
        if (picoll_cfg.stats) {
            picoll_stats_add(args->coll, alg, args->bytes * (size_t)(blocks ? ctx->size : 1));
        }
    }
    return status;
}
