/* The device collectives on the workspace: the vote, the chunk loops and the kernel launches, and
 * the end of a call (the kernel's completion, a timeout).
 *
 * Stream ordering: the kernels run on the calling thread's per-thread default stream of the
 * buffers' context, which synchronises with the legacy default stream: they start after everything
 * the application queued on the legacy stream before the call (and on this thread's per-thread
 * stream, for applications built with --default-stream per-thread). Work on the application's own
 * streams must be synchronised by the application, as with any MPI. Not the legacy stream itself:
 * it is one queue for every thread of the process, so two threads calling collectives on two
 * communicators would have their kernels queued in different orders on different ranks, each
 * waiting for a peer kernel queued behind its own partner's (tests/cuda/staged's threads deadlock
 * so). The call returns once the host-mapped status says every block of the last launch finished:
 * the result is in the receive buffer.
 *
 * Driver calls per call, on the hot path: one pointer attribute per buffer (the memory-kind cache,
 * src/memkind.c), one current-context query and one stream-capture query (the vote), one launch
 * per chunk; four more where the caller's current context is not the buffers' (a push and a pop
 * around the capture query, a switch and a switch back around the launches). */
#include "build-config.h"
#include "cuda/cuda_ws.h"
#include "util/fatal.h"
#include "util/log.h"
#include "util/wait.h"

#include <string.h>

static picoll_cuda_type_t coll_type(picoll_dtype_t dt)
{
    switch (dt) {
    case PICOLL_DT_INT8: return PICOLL_CUDA_T_I8;
    case PICOLL_DT_UINT8: return PICOLL_CUDA_T_U8;
    case PICOLL_DT_INT16: return PICOLL_CUDA_T_I16;
    case PICOLL_DT_UINT16: return PICOLL_CUDA_T_U16;
    case PICOLL_DT_INT32: return PICOLL_CUDA_T_I32;
    case PICOLL_DT_UINT32: return PICOLL_CUDA_T_U32;
    case PICOLL_DT_INT64: return PICOLL_CUDA_T_I64;
    case PICOLL_DT_UINT64: return PICOLL_CUDA_T_U64;
    case PICOLL_DT_FLOAT: return PICOLL_CUDA_T_F32;
    case PICOLL_DT_DOUBLE: return PICOLL_CUDA_T_F64;
    case PICOLL_DT_FLOAT16: return PICOLL_CUDA_T_F16;
    case PICOLL_DT_BFLOAT16: return PICOLL_CUDA_T_BF16;
    case PICOLL_DT_FLOAT_COMPLEX: return PICOLL_CUDA_T_C32;
    case PICOLL_DT_DOUBLE_COMPLEX: return PICOLL_CUDA_T_C64;
    /* 0/1 bytes under LAND/LOR/LXOR and bytes under BAND/BOR/BXOR: uint8 gives the same bits */
    case PICOLL_DT_BOOL: return PICOLL_CUDA_T_U8;
    case PICOLL_DT_BYTE: return PICOLL_CUDA_T_U8;
    default: return PICOLL_CUDA_T_NONE; /* long double: no device arithmetic for it */
    }
}

/* The calling thread's current context as its last yes vote found it, for the call that follows
 * (one driver call fewer per collective). */
static _Thread_local picoll_cu_context_t coll_vote_current;
static _Thread_local int coll_vote_current_known;

int picoll_cuda_vote(const picoll_cuda_ws_t *ws, const picoll_meminfo_t *send,
                     const picoll_meminfo_t *recv, picoll_dtype_t dt, picoll_cu_context_t *ctx,
                     int *home)
{
    int status = PICOLL_CU_STREAM_CAPTURE_STATUS_NONE, rc = 0;
    *ctx = NULL;
    *home = 0;
    if (recv->kind != PICOLL_MEM_DEVICE || (send != NULL && (send->kind != PICOLL_MEM_DEVICE ||
                                                             send->context != recv->context))) {
        return 0;
    }
    if (dt != PICOLL_DT_NONE && coll_type(dt) == PICOLL_CUDA_T_NONE) {
        return 0;
    }
    /* a CUDA graph being captured on the stream the kernel would be launched on (this thread's
     * per-thread stream of the buffers' context) would take the launch in, past the point where
     * this rank could still fall back: ask that stream. The current context found here is the
     * one coll_begin then switches from (nothing of picoll's runs in this thread in between) */
    picoll_cu_context_t cur = NULL, popped;
    if (picoll_cu.ctx_get_current(&cur) != 0) {
        return 0;
    }
    if (cur == recv->context) {
        rc = picoll_cu.stream_is_capturing(PICOLL_CU_STREAM_PER_THREAD, &status);
    } else if ((rc = picoll_cu.ctx_push_current(recv->context)) == 0) {
        rc = picoll_cu.stream_is_capturing(PICOLL_CU_STREAM_PER_THREAD, &status);
        picoll_cu.ctx_pop_current(&popped);
    }
    if (rc != 0 || status != PICOLL_CU_STREAM_CAPTURE_STATUS_NONE) {
        return 0;
    }
    coll_vote_current = cur;
    coll_vote_current_known = 1;
    *ctx = recv->context;
    *home = ws != NULL && ws->ctx == *ctx;
    return 1;
}

/* Past the agreement a rank cannot fall back alone: a CUDA failure ends the job. */
static void coll_fatal(const char *coll, const char *call, int rc)
{
    const char *s = NULL;
    picoll_cu.get_error_string(rc, &s);
    picoll_fatal("%s on the device: %s failed (%s, CUresult %d): aborting the job", coll, call,
                 s != NULL ? s : "unknown error", rc);
}

static picoll_cuda_saved_ctx_t coll_begin(picoll_cuda_ws_t *ws, const char *coll)
{
    picoll_cuda_saved_ctx_t prev;
    int rc;
    if (coll_vote_current_known) {
        coll_vote_current_known = 0;
        rc = picoll_cuda_enter_from(ws->ctx, coll_vote_current, &prev);
    } else {
        rc = picoll_cuda_enter(ws->ctx, &prev);
    }
    if (rc != 0) {
        coll_fatal(coll, "cuCtxSetCurrent", rc);
    }
    return prev;
}

/* After a host deadline: the local ranks whose latest launch had not started (read through the
 * mappings: slow, but only on the way to ending the job). */
static void coll_not_started(picoll_cuda_ws_t *ws, uint64_t first, unsigned char *missing)
{
    for (int r = 0; r < ws->nlocal; r++) {
        uint64_t started = 0;
        missing[r] = 0;
        if (r == ws->me || !(ws->peers >> r & 1u)) {
            continue;
        }
        picoll_cu.memcpy_dtoh(&started, (picoll_cu_deviceptr_t)(uintptr_t)(ws->peer[r]) +
                                            PICOLL_CUDA_STARTED_WORD * sizeof(uint64_t),
                              sizeof(started));
        missing[r] = started < first;
    }
}

/* Wait for the last launch (first epoch first, last epoch last, blocks blocks) by polling the
 * host-mapped status: no driver call. The kernel times out peers that started and stopped; here,
 * a launch of this rank that does not start (the GPU still runs work queued before the call) is
 * waited for with a warning, and one that runs past PICOLL_TIMEOUT (plus a margin for the
 * kernel's own timeout to speak first) names the peers that never started. */
static void coll_end(picoll_cuda_ws_t *ws, picoll_cuda_saved_ctx_t prev, const char *coll,
                     uint64_t first, uint64_t last, int blocks)
{
    volatile picoll_cuda_status_t *st = ws->status;
    double began = 0.0, asked = picoll_clock_now();
    int warned = 0;
    unsigned char missing[PICOLL_CUDA_MAX_LOCAL];
    picoll_wait_t w;

    /* no deadline of the wait's own: the clock readings below decide */
    picoll_wait_init(&w, 0.0, picoll_spin_max());
    for (;;) {
        int b = 0;
        while (b < blocks && st->done[b] >= last) {
            b++;
        }
        if (b == blocks) {
            break;
        }
        if (st->timed_out) {
            for (int r = 0; r < ws->nlocal; r++) {
                missing[r] = st->missing[r];
            }
            picoll_fatal_missing(coll, ws->comm_size, ws->comm_ranks, missing, ws->nlocal,
                                 ws->timeout);
        }
        if (picoll_wait(&w, 0) == PICOLL_WAIT_POLL) {
            continue;
        }
        double now = w.now;
        if (began == 0.0 && st->started[0] >= first) {
            began = now;
        }
        if (began == 0.0 && !warned && now - asked > ws->timeout) {
            picoll_warn("%s on the device: this rank's kernel has not started after %.0f s: its "
                        "GPU still runs work queued before the call", coll, now - asked);
            warned = 1;
        }
        if (began != 0.0 && now - began > ws->timeout + 5.0) {
            coll_not_started(ws, first, missing);
            picoll_fatal_missing(coll, ws->comm_size, ws->comm_ranks, missing, ws->nlocal,
                                 ws->timeout);
        }
    }
    picoll_cuda_leave(&prev);
}

/* The parameters every launch on ws shares. */
static void coll_params(const picoll_cuda_ws_t *ws, int mode, picoll_cuda_kparams_t *p)
{
    memset(p, 0, sizeof(*p));
    p->mode = mode;
    p->nranks = ws->nlocal;
    p->me = ws->me;
    p->max_blocks = ws->max_blocks;
    p->timeout_ns = (uint64_t)(ws->timeout * 1e9);
    p->status = ws->status_dev;
    p->type = PICOLL_CUDA_T_NONE;
    p->esize = 1;
    p->peers = ws->peers;
    for (int r = 0; r < ws->nlocal; r++) {
        if (ws->peer[r] != NULL) { /* hcm: only the quad and the relay are mapped */
            p->slot[0][r] = picoll_cuda_slot(ws, r, 0);
            p->slot[1][r] = picoll_cuda_slot(ws, r, 1);
            p->flags[r] = (uint64_t *)(void *)ws->peer[r];
        }
    }
    for (int k = 0; k < 4; k++) {
        p->quad[k] = ws->quad[k];
    }
    p->relay = ws->relay;
    p->quad_first = ws->quad_first;
}

/* Launch on this thread's per-thread default stream of the buffers' context (see the top of the
 * file): no event record or stream wait; its completion is polled in the host-mapped status
 * (coll_end). */
static void coll_launch(picoll_cuda_ws_t *ws, picoll_cuda_kparams_t *p, int arrivals,
                        const char *coll, int *blocks)
{
    void *params[] = {p};
    p->epoch = ws->epoch + 1;
    *blocks = picoll_cuda_kernel_blocks(p);
    int rc = picoll_cu.launch_kernel(ws->kernel, (unsigned)*blocks, 1, 1, (unsigned)ws->threads, 1,
                                     1, 0, PICOLL_CU_STREAM_PER_THREAD, params, NULL);
    if (rc != 0) {
        coll_fatal(coll, "cuLaunchKernel", rc);
    }
    ws->epoch += (uint64_t)arrivals;
}

picoll_status_t picoll_cuda_allreduce(picoll_cuda_ws_t *ws, picoll_cuda_kmode_t mode,
                                      const void *sendbuf, void *recvbuf, size_t count,
                                      picoll_dtype_t dtype, picoll_op_t op)
{
    const char *coll = "MPI_Allreduce";
    size_t esize = picoll_dtype_size(dtype);
    size_t bytes = count * esize;
    const char *src = sendbuf == MPI_IN_PLACE ? recvbuf : sendbuf;
    char *dst = recvbuf;
    picoll_cuda_kparams_t p;
    int blocks = 0;
    picoll_cuda_saved_ctx_t prev = coll_begin(ws, coll);

    coll_params(ws, mode, &p);
    p.type = coll_type(dtype);
    p.op = (int)op;
    p.esize = (int)esize;
    /* slot_size is a multiple of 4 KiB: every chunk holds whole elements */
    for (size_t off = 0; off < bytes; off += ws->slot_size) {
        p.bytes = bytes - off < ws->slot_size ? bytes - off : ws->slot_size;
        p.src = src + off;
        p.dst = dst + off;
        coll_launch(ws, &p, mode == PICOLL_CUDA_K_ONESHOT ? 1 : 2, coll, &blocks);
    }
    coll_end(ws, prev, coll, p.epoch, ws->epoch, blocks);
    return PICOLL_OK;
}

picoll_status_t picoll_cuda_allgather(picoll_cuda_ws_t *ws, const void *sendbuf, void *recvbuf,
                                      size_t block)
{
    const char *coll = "MPI_Allgather";
    int in_place = sendbuf == MPI_IN_PLACE;
    const char *mine = in_place ? (const char *)recvbuf + (size_t)ws->me * block
                                : (const char *)sendbuf;
    picoll_cuda_kparams_t p;
    int blocks = 0;
    picoll_cuda_saved_ctx_t prev = coll_begin(ws, coll);

    coll_params(ws, PICOLL_CUDA_K_ALLGATHER, &p);
    p.skip_self = in_place;
    p.dst_stride = block;
    for (size_t off = 0; off < block; off += ws->slot_size) {
        p.bytes = block - off < ws->slot_size ? block - off : ws->slot_size;
        p.src = mine + off;
        p.dst = (char *)recvbuf + off;
        coll_launch(ws, &p, 1, coll, &blocks);
    }
    coll_end(ws, prev, coll, p.epoch, ws->epoch, blocks);
    return PICOLL_OK;
}

picoll_status_t picoll_cuda_alltoall(picoll_cuda_ws_t *ws, const void *sendbuf, void *recvbuf,
                                     size_t block)
{
    const char *coll = "MPI_Alltoall";
    size_t piece_max = ws->slot_size / (size_t)ws->nlocal / 16 * 16;
    const char *src = sendbuf == MPI_IN_PLACE ? recvbuf : sendbuf;
    picoll_cuda_kparams_t p;
    int blocks = 0;
    picoll_cuda_saved_ctx_t prev = coll_begin(ws, coll);

    coll_params(ws, PICOLL_CUDA_K_ALLTOALL, &p);
    p.src_stride = block;
    p.dst_stride = block;
    for (size_t off = 0; off < block; off += piece_max) {
        p.bytes = block - off < piece_max ? block - off : piece_max;
        p.src = src + off;
        p.dst = (char *)recvbuf + off;
        coll_launch(ws, &p, 1, coll, &blocks);
    }
    coll_end(ws, prev, coll, p.epoch, ws->epoch, blocks);
    return PICOLL_OK;
}
