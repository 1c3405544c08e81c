/* The device collectives: each one's kernel parameters and its cut into chunks, beside the
 * dispatcher they all call (coll_call: the buffers' context made current, every chunk launched,
 * the end waited for). The vote and the launches are cuda_launch.c's, the end of a call
 * cuda_end.c's. */
#include "build-config.h"
#include "cuda/cuda_coll_int.h"
#include "util/config.h"
#include "util/log.h"

#include <stdatomic.h>
#include <string.h>

/* The parameters every launch on ws shares. */
static void coll_params(const picoll_cuda_ws_t *ws, int mode, picoll_cuda_kparams_t *p)
{
    memset(p, 0, sizeof(*p));
    p->mode = mode;
    p->nranks = ws->nlocal;
    p->me = ws->me;
    p->max_blocks = ws->max_blocks;
    p->spin_ns = (uint64_t)((ws->spin < 0.001 ? 0.001 : ws->spin) * 1e9);
    p->lean = picoll_cfg.cuda_fences == PICOLL_CUDA_FENCES_NEEDED;
    p->nap_ns = (unsigned)picoll_cfg.cuda_nap;
    p->status = ws->status_dev;
    p->veto_at = ws->veto_at;
    p->type = PICOLL_CUDA_T_NONE;
    p->esize = 1;
    p->root = -1;
    p->peers = ws->peers;
    p->slot_size = ws->slot_size;
    p->ll_size = ws->ll_size;
    for (int r = 0; r < ws->nlocal; r++) {
        if (ws->peer[r] != NULL) { /* hcm: only the quad and the relay are mapped */
            p->slot[0][r] = picoll_cuda_slot(ws, r, 0);
            p->slot[1][r] = picoll_cuda_slot(ws, r, 1);
            p->flags[r] = (uint64_t *)(void *)ws->peer[r];
        }
    }
    for (int k = 0; k < PICOLL_TOPO_HCM_QUAD; k++) {
        p->quad[k] = ws->quad[k];
    }
    p->relay = ws->relay;
    p->quad_first = ws->quad_first;
    if (ws->on_stream) {
        p->epoch_word = (uint64_t *)(void *)ws->base + PICOLL_CUDA_EPOCH_WORD;
        p->veto_at = PICOLL_CUDA_STREAM_ABORT;
    }
}

/* Launch every chunk of c, then wait for the last (resuming the call where a kernel gave up). */
static picoll_status_t coll_run(picoll_cuda_ws_t *ws, coll_call_t *c)
{
    uint64_t floor = ws->seq + 1;
    int blocks = 0;
    c->nchunks = (c->total + c->step - 1) / c->step;
    c->first = ws->epoch + 1;
    if (ws->on_stream) {
        return picoll_cuda_call_enqueue(ws, c);
    }
    for (size_t i = 0; i < c->nchunks; i++) {
        blocks = picoll_cuda_call_launch(ws, c, i, floor, 0, 0);
        if (blocks < 0) {
            /* as a rank that said no in the vote does (coll/vote.c): the peers' kernels wait for
             * this rank's arrival until their hosts see the no, and veto them */
            atomic_store_explicit(&ws->veto_shm->flags[ws->veto_shm->me].dev_no, c->p.veto_at,
                                  memory_order_release);
            ws->seq--;
            picoll_cuda_hot_skip(ws);
            picoll_debug("%s on the device: the calling thread's current context changed since "
                         "its last call: this rank says no",
                         c->coll);
            return PICOLL_RETRY;
        }
    }
    ws->epoch += (uint64_t)c->nchunks * (uint64_t)c->arrivals;
    if (c->nchunks == 0) {
        picoll_cuda_leave(&c->prev);
        if (c->p.veto_at != 0) {
            /* no launch to carry a no: every rank takes the vote (nchunks is the same on all) */
            picoll_cuda_hot_skip(ws);
            return PICOLL_RETRY;
        }
        return PICOLL_OK;
    }
    return picoll_cuda_call_end(ws, c, floor, blocks);
}

/* The parameters of a reduction of dtype under op. */
static void coll_reduce_params(picoll_dtype_t dtype, picoll_op_t op, picoll_cuda_kparams_t *p)
{
    p->type = picoll_cuda_coll_type(dtype);
    p->op = (int)op;
    p->esize = (int)picoll_dtype_size(dtype);
}

/* Runs the call c, its kernel parameters set: total bytes from src to dst in chunks of step
 * (c->arrivals per launch, 1 where unset), in the buffers' context. */
static picoll_status_t coll_call(picoll_cuda_ws_t *ws, coll_call_t *c, const void *src, void *dst,
                                 size_t total, size_t step)
{
    memset(&c->prev, 0, sizeof(c->prev));
    picoll_cu_context_t cur = NULL;
    /* on a stream the caller has the stream's context current (no vote before) */
    c->entered = !ws->on_stream && picoll_cuda_vote_current(&cur);
    if (c->entered) {
        /* after a full vote: the context it found current */
        PICOLL_CU_TRY_FATAL(picoll_cuda_enter_from(ws->ctx, cur, &c->prev), "cuCtxSetCurrent",
                            c->coll);
    }
    c->src = src;
    c->dst = dst;
    c->total = total;
    c->step = step;
    c->arrivals = c->arrivals != 0 ? c->arrivals : 1;
    ws->veto_at = 0; /* armed for one call */
    /* the vote armed the zero-copy path: one launch for the whole call where every rank mapped
     * every peer's buffers, the mappings held until it ended */
    ws->zc_last = picoll_cuda_zc_map(ws, c);
    if (!ws->zc_last) {
        return coll_run(ws, c);
    }
    c->step = total > 0 ? total : 1;
    picoll_status_t status = coll_run(ws, c);
    if (ws->on_stream) {
        picoll_cuda_zc_stream_release(ws, c); /* after the kernel, on the stream */
    } else {
        picoll_cuda_zc_release(c);
    }
    return status;
}

picoll_status_t picoll_cuda_allreduce(picoll_cuda_ws_t *ws, picoll_cuda_kmode_t mode,
                                      const void *sendbuf, void *recvbuf, size_t count,
                                      picoll_dtype_t dtype, picoll_op_t op)
{
    int two = mode == PICOLL_CUDA_K_TWOSHOT || mode == PICOLL_CUDA_K_HCM;
    coll_call_t c = {.coll = "MPI_Allreduce", .arrivals = two ? 2 : 1};

    coll_params(ws, mode, &c.p);
    coll_reduce_params(dtype, op, &c.p);
    size_t bytes = count * (size_t)c.p.esize;
    if (mode == PICOLL_CUDA_K_ONESHOT_LL && (bytes == 0 || bytes > ws->limits.ll_reduce_max)) {
        c.p.mode = PICOLL_CUDA_K_ONESHOT; /* the selection's job; the same on every rank */
    }
    /* a buffer is a multiple of 4 KiB: every chunk holds whole elements */
    return coll_call(ws, &c, sendbuf == MPI_IN_PLACE ? recvbuf : sendbuf, recvbuf, bytes,
                     ws->slot_size);
}

picoll_status_t picoll_cuda_allgather(picoll_cuda_ws_t *ws, const void *sendbuf, void *recvbuf,
                                      size_t block)
{
    return picoll_cuda_allgather_mode(ws, PICOLL_CUDA_K_ALLGATHER, sendbuf, recvbuf, block);
}

picoll_status_t picoll_cuda_allgather_mode(picoll_cuda_ws_t *ws, picoll_cuda_kmode_t mode,
                                           const void *sendbuf, void *recvbuf, size_t block)
{
    int in_place = sendbuf == MPI_IN_PLACE;
    coll_call_t c = {.coll = "MPI_Allgather"};

    if (mode == PICOLL_CUDA_K_ALLGATHER_LL && (block == 0 || block > ws->limits.ll_gather_max)) {
        mode = PICOLL_CUDA_K_ALLGATHER; /* the selection's job; the same on every rank */
    }
    coll_params(ws, mode, &c.p);
    c.p.skip_self = in_place;
    c.p.dst_stride = block;
    return coll_call(ws, &c, in_place ? (const char *)recvbuf + (size_t)ws->me * block : sendbuf,
                     recvbuf, block, ws->slot_size);
}

/* A data buffer's share of each rank, in 16-byte multiples (alltoall, reduce-scatter). */
static size_t coll_piece_step(const picoll_cuda_ws_t *ws)
{
    return ws->slot_size / (size_t)ws->nlocal / 16 * 16;
}

picoll_status_t picoll_cuda_alltoall(picoll_cuda_ws_t *ws, const void *sendbuf, void *recvbuf,
                                     size_t block)
{
    coll_call_t c = {.coll = "MPI_Alltoall"};

    coll_params(ws, PICOLL_CUDA_K_ALLTOALL, &c.p);
    c.p.src_stride = block;
    c.p.dst_stride = block;
    return coll_call(ws, &c, sendbuf == MPI_IN_PLACE ? recvbuf : sendbuf, recvbuf, block,
                     coll_piece_step(ws));
}

picoll_status_t picoll_cuda_reduce_scatter(picoll_cuda_ws_t *ws, const char *coll,
                                           const void *sendbuf, void *recvbuf, const size_t *counts,
                                           picoll_dtype_t dtype, picoll_op_t op)
{
    size_t off = 0, largest = 0;
    coll_call_t c = {.coll = coll};

    coll_params(ws, PICOLL_CUDA_K_REDSCAT, &c.p);
    coll_reduce_params(dtype, op, &c.p);
    for (int r = 0; r < ws->nlocal; r++) {
        c.p.piece[r] = counts[r] * (size_t)c.p.esize;
        c.p.piece_off[r] = off;
        off += c.p.piece[r];
        largest = c.p.piece[r] > largest ? c.p.piece[r] : largest;
    }
    /* every rank's piece of a chunk in one data buffer, each 16-aligned (dev_reduce's loads) */
    c.p.slot_stride = coll_piece_step(ws);
    return coll_call(ws, &c, sendbuf == MPI_IN_PLACE ? recvbuf : sendbuf, recvbuf, largest,
                     c.p.slot_stride);
}

picoll_status_t picoll_cuda_allgatherv(picoll_cuda_ws_t *ws, const void *sendbuf, void *recvbuf,
                                       const size_t *bytes, const size_t *displs)
{
    int in_place = sendbuf == MPI_IN_PLACE;
    size_t largest = 0;
    coll_call_t c = {.coll = "MPI_Allgatherv"};

    coll_params(ws, PICOLL_CUDA_K_ALLGATHERV, &c.p);
    c.p.skip_self = in_place;
    for (int r = 0; r < ws->nlocal; r++) {
        c.p.piece[r] = bytes[r];
        c.p.piece_off[r] = displs[r];
        largest = bytes[r] > largest ? bytes[r] : largest;
    }
    return coll_call(ws, &c, in_place ? (const char *)recvbuf + displs[ws->me] : sendbuf, recvbuf,
                     largest, ws->slot_size);
}

picoll_status_t picoll_cuda_bcast(picoll_cuda_ws_t *ws, void *buffer, size_t bytes, int root)
{
    coll_call_t c = {.coll = "MPI_Bcast"};

    coll_params(ws, PICOLL_CUDA_K_BCAST, &c.p);
    c.p.root = root;
    return coll_call(ws, &c, buffer, buffer, bytes, ws->slot_size);
}

picoll_status_t picoll_cuda_reduce(picoll_cuda_ws_t *ws, const void *sendbuf, void *recvbuf,
                                   size_t count, picoll_dtype_t dtype, picoll_op_t op, int root)
{
    coll_call_t c = {.coll = "MPI_Reduce"};
    const void *src = sendbuf == MPI_IN_PLACE ? recvbuf : sendbuf;

    coll_params(ws, PICOLL_CUDA_K_REDUCE, &c.p);
    coll_reduce_params(dtype, op, &c.p);
    c.p.root = root;
    /* only the root's receive buffer is significant (and written) */
    return coll_call(ws, &c, src, ws->me == root ? recvbuf : (void *)src, count * (size_t)c.p.esize,
                     ws->slot_size);
}

picoll_status_t picoll_cuda_alltoallv(picoll_cuda_ws_t *ws, const void *sendbuf, void *recvbuf,
                                      const size_t *sbytes, const size_t *soffs,
                                      const size_t *rbytes, const size_t *roffs, size_t largest)
{
    coll_call_t c = {.coll = "MPI_Alltoallv"};

    coll_params(ws, PICOLL_CUDA_K_ALLTOALLV, &c.p);
    for (int r = 0; r < ws->nlocal; r++) {
        c.p.piece[r] = sbytes[r];
        c.p.piece_off[r] = soffs[r];
        c.p.rpiece[r] = rbytes[r];
        c.p.rpiece_off[r] = roffs[r];
    }
    /* a fixed stride per destination in a data buffer, as alltoall's: rank r finds the piece
     * for it in every rank's slot at r * slot_stride, whatever the other pieces' lengths; the
     * chunks cover the largest piece of every rank's, so that their count is the same on all */
    c.p.slot_stride = coll_piece_step(ws);
    return coll_call(ws, &c, sendbuf, recvbuf, largest, c.p.slot_stride);
}
