/* Collectives enqueued on an application's CUDA stream, on picoll's kernels there (issue 23): the
 * selection every rank makes alike without a word exchanged, and the launches. No vote, no
 * barrier, no wait: a stream communicator's workspace (ctx->cuda_enq) was agreed on by every rank
 * when the communicator was made, and what decides the path here is the same on every rank. */
#include "coll/algs.h"
#include "coll/dispatch.h"
#include "coll/select.h"
#include "coll/stats.h"
#include "mem/cuda_state.h"
#include "util/config.h"

int picoll_enq_select(const picoll_coll_ctx_t *ctx, const picoll_enq_args_t *args)
{
    const picoll_cuda_ws_t *ws = ctx->cuda_enq;
    if (ws == NULL) {
        return PICOLL_ALG_FALLBACK;
    }
    picoll_topo_reach_t reach = picoll_cuda_ws_reach(ws);
    size_t esize = args->dtype == PICOLL_DT_NONE ? 1 : picoll_dtype_size(args->dtype);
    int reduction =
        args->coll == PICOLL_COLL_ALLREDUCE || args->coll == PICOLL_COLL_REDUCE_SCATTER_BLOCK;
    if (reduction && (!picoll_cuda_dtype_ok(args->dtype) || args->op == PICOLL_OP_NONE ||
                      !picoll_op_valid(args->dtype, args->op))) {
        return PICOLL_ALG_FALLBACK;
    }
    switch (args->coll) {
    case PICOLL_COLL_ALLREDUCE:
        return picoll_select_cuda_allreduce(&picoll_cfg, reach, picoll_cuda_ws_slot_size(ws),
                                            ctx->size, args->count * esize, picoll_cuda.staging);
    case PICOLL_COLL_REDUCE_SCATTER_BLOCK:
        return picoll_select_cuda_reduce(
            &picoll_cfg, reach, args->count * esize * (size_t)ctx->size, picoll_cuda.staging);
    case PICOLL_COLL_ALLGATHER:
        return picoll_select_cuda_allgather(&picoll_cfg, reach, ctx->size, args->count);
    case PICOLL_COLL_ALLTOALL:
        return picoll_select_cuda_alltoall(&picoll_cfg, reach, ctx->size, args->count);
    case PICOLL_COLL_BCAST: return picoll_select_cuda_bcast(&picoll_cfg, reach, args->count);
    default: return PICOLL_ALG_FALLBACK;
    }
}

picoll_status_t picoll_enq_run(picoll_coll_ctx_t *ctx, const picoll_enq_args_t *args, int alg)
{
    picoll_cuda_ws_t *ws = ctx->cuda_enq;
    size_t esize = args->dtype == PICOLL_DT_NONE ? 1 : picoll_dtype_size(args->dtype);
    size_t bytes = args->count * esize;
    picoll_status_t status;

    switch (args->coll) {
    case PICOLL_COLL_ALLREDUCE:
        status = picoll_cuda_allreduce(ws, picoll_allreduce_kmode(alg), args->sendbuf,
                                       args->recvbuf, args->count, args->dtype, args->op);
        break;
    case PICOLL_COLL_REDUCE_SCATTER_BLOCK: {
        size_t counts[PICOLL_CUDA_MAX_LOCAL];
        for (int r = 0; r < ctx->size && r < PICOLL_CUDA_MAX_LOCAL; r++) {
            counts[r] = args->count;
        }
        bytes *= (size_t)ctx->size;
        status = picoll_cuda_reduce_scatter(ws, "MPIX_Reduce_scatter_block_enqueue", args->sendbuf,
                                            args->recvbuf, counts, args->dtype, args->op);
        break;
    }
    case PICOLL_COLL_ALLGATHER:
        bytes *= (size_t)ctx->size;
        status = picoll_cuda_allgather_mode(ws, picoll_allgather_kmode(alg), args->sendbuf,
                                            args->recvbuf, args->count);
        break;
    case PICOLL_COLL_ALLTOALL:
        bytes *= (size_t)ctx->size;
        status = picoll_cuda_alltoall(ws, args->sendbuf, args->recvbuf, args->count);
        break;
    case PICOLL_COLL_BCAST:
        status = picoll_cuda_bcast(ws, args->recvbuf, args->count, args->root);
        break;
    default: return PICOLL_ERR_NOT_SUPPORTED;
    }
    if (status == PICOLL_OK) {
        picoll_last_set(args->coll, alg);
        if (picoll_cfg.stats) {
            picoll_stats_add(args->coll, alg, bytes);
        }
    }
    return status;
}
