/* The device collectives' vote and launches: whether this rank's buffers can take the device path
 * (the vote, and the hot path's arming), one chunk's launch, and the launches of a call enqueued on
 * an application's stream. The end of a blocking call is cuda_end.c's, the collectives and their
 * dispatcher cuda_colls.c's.
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
 * Driver calls per call, on the hot path: one pointer attribute per buffer, or per allocation where
 * both lie in one (the memory-kind cache, src/mem/memkind.c), one stream-capture query (the
 * quick vote), one launch per chunk: 4 for an allreduce, allgather or alltoall of one chunk, 3 in
 * place or in one allocation. No current-context query: the buffers' context is taken as current
 * where it was at the thread's last call, and the launch checks it (refused in another context:
 * the call then says no). Five more where the caller's current context is not the buffers' (a
 * query, a push and a pop around the capture query, a switch and a switch back around the
 * launches). No fewer: each guards against what the application may change between calls (a
 * buffer freed and its address reused, a graph capture begun: docs/cuda.md). No host barrier
 * after a communicator's first device call: a call armed for the hot path (picoll_cuda_hot_arm)
 * launches without one, and a rank that said no to it never arrives, so no block gets past the
 * wait that needs it; the host reads that no in the node workspace while it polls, vetoes its
 * kernels through the host-mapped status (cuda_end.c) and returns PICOLL_RETRY for the full
 * vote. */
#include "build-config.h"
#include "cuda/cuda_coll_int.h"

#include <stdatomic.h>

picoll_cuda_type_t picoll_cuda_coll_type(picoll_dtype_t dt)
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

uint64_t picoll_cuda_dtype_mask(void)
{
    uint64_t mask = 0;
    for (int dt = 0; dt < PICOLL_DT_COUNT; dt++) {
        mask |= picoll_cuda_coll_type((picoll_dtype_t)dt) != PICOLL_CUDA_T_NONE ? 1ull << dt : 0;
    }
    return mask;
}

/* The calling thread's current context as its last full vote found it, for the call that follows
 * (one driver call fewer per collective). */
static _Thread_local picoll_cu_context_t coll_vote_current;
static _Thread_local int coll_vote_current_known;
/* This thread's current context was not the buffers' at its last vote or launch (a thread that
 * never chose a device, as PyTorch's MPI worker, or one working in another context): its votes
 * ask for it. */
static _Thread_local int coll_thread_switches;

int picoll_cuda_vote(const picoll_cuda_ws_t *ws, const picoll_meminfo_t *send,
                     const picoll_meminfo_t *recv, picoll_dtype_t dt, picoll_cu_context_t *ctx,
                     int *home, int quick)
{
    int status = PICOLL_CU_STREAM_CAPTURE_STATUS_NONE;
    picoll_status_t ok = PICOLL_OK;
    *ctx = NULL;
    *home = 0;
    coll_vote_current_known = 0;
    if (recv->kind != PICOLL_MEM_DEVICE ||
        (send != NULL && (send->kind != PICOLL_MEM_DEVICE || send->context != recv->context))) {
        return 0;
    }
    if (dt != PICOLL_DT_NONE && picoll_cuda_coll_type(dt) == PICOLL_CUDA_T_NONE) {
        return 0;
    }
    /* a CUDA graph being captured on the stream the kernel would be launched on (this thread's
     * per-thread stream of the buffers' context) would take the launch in, past the point where
     * this rank could still fall back: ask that stream */
    if (quick && !coll_thread_switches &&
        picoll_cu.stream_is_capturing(PICOLL_CU_STREAM_PER_THREAD, &status) == 0) {
        /* the buffers' context current, as at the thread's last call: the launch tells if it is
         * not (picoll_cuda_call_launch), and the call then says no. (Refused: no context is
         * current, the full check below tells; a probe, no check: nothing is logged.) */
    } else {
        status = PICOLL_CU_STREAM_CAPTURE_STATUS_NONE;
        /* the current context found here is the one the call then switches from (nothing of
         * picoll's runs in this thread in between). A failed query says no (the host path runs
         * the call), logged once */
        picoll_cu_context_t cur = NULL, popped;
        if (picoll_cudrv_check(picoll_cu.ctx_get_current(&cur), "cuCtxGetCurrent") != PICOLL_OK) {
            return 0;
        }
        if (cur == recv->context) {
            ok = picoll_cudrv_check(
                picoll_cu.stream_is_capturing(PICOLL_CU_STREAM_PER_THREAD, &status),
                "cuStreamIsCapturing");
        } else if ((ok = picoll_cudrv_check(picoll_cu.ctx_push_current(recv->context),
                                            "cuCtxPushCurrent")) == PICOLL_OK) {
            ok = picoll_cudrv_check(
                picoll_cu.stream_is_capturing(PICOLL_CU_STREAM_PER_THREAD, &status),
                "cuStreamIsCapturing");
            (void)picoll_cudrv_check(picoll_cu.ctx_pop_current(&popped), "cuCtxPopCurrent");
        }
        coll_thread_switches = cur != recv->context;
        coll_vote_current = cur;
        coll_vote_current_known = 1;
    }
    if (ok != PICOLL_OK || status != PICOLL_CU_STREAM_CAPTURE_STATUS_NONE) {
        coll_vote_current_known = 0;
        return 0;
    }
    *ctx = recv->context;
    /* the same handle is not the same context after a reset (issue 26, defect 4): the ids, which
     * the memory-kind cache holds, tell */
    *home = ws != NULL && ws->ctx == *ctx && ws->ctx_id == recv->context_id;
    return 1;
}

int picoll_cuda_vote_current(picoll_cu_context_t *cur)
{
    if (!coll_vote_current_known) {
        return 0;
    }
    coll_vote_current_known = 0;
    *cur = coll_vote_current;
    return 1;
}

void picoll_cuda_hot_arm(picoll_cuda_ws_t *ws, picoll_shm_t *shm, uint64_t call)
{
    ws->veto_at = call;
    ws->veto_shm = shm;
}

void picoll_cuda_hot_skip(picoll_cuda_ws_t *ws)
{
    ws->epoch += COLL_VETO_EPOCHS;
    ws->veto_at = 0;
}

/* No peer that said no ever launches for the call: its kernels give up waiting, or are vetoed
 * (cuda_end.c). */
int picoll_cuda_call_said_no(const picoll_cuda_ws_t *ws, const coll_call_t *c)
{
    const picoll_shm_t *shm = ws->veto_shm;
    if (c->p.veto_at == 0) {
        return 0;
    }
    for (int r = 0; r < shm->nlocal; r++) {
        if (r != shm->me &&
            atomic_load_explicit(&shm->flags[r].dev_no, memory_order_acquire) == c->p.veto_at) {
            return 1;
        }
    }
    return 0;
}

int picoll_cuda_call_chunk(coll_call_t *c, size_t i)
{
    size_t off = i * c->step;
    c->p.chunk_off = off;
    c->p.bytes = c->total - off < c->step ? c->total - off : c->step;
    c->p.src = c->src + off;
    c->p.dst = c->dst + off;
    c->p.epoch = c->first + (uint64_t)i * (uint64_t)c->arrivals;
    return picoll_cuda_kernel_blocks(&c->p);
}

/* See the top of the file: no event record or stream wait; the launch's completion is polled in
 * the host-mapped status (picoll_cuda_call_end). */
int picoll_cuda_call_launch(picoll_cuda_ws_t *ws, coll_call_t *c, size_t i, uint64_t floor,
                            int resume, uint64_t done_mask)
{
    void *params[] = {&c->p};
    int blocks = picoll_cuda_call_chunk(c, i);
    c->p.seq = ++ws->seq;
    c->p.seq_floor = floor;
    c->p.resume = resume;
    c->p.done_mask = done_mask;
    int rc = picoll_cu.launch_kernel(picoll_cuda_ws_function(ws, &c->p), (unsigned)blocks, 1, 1,
                                     picoll_cuda_launch_threads(ws, blocks), 1, 1, 0,
                                     PICOLL_CU_STREAM_PER_THREAD, params, NULL);
    if (rc != 0 && !c->entered && c->p.veto_at != 0 && i == 0 && !resume) {
        /* a hot-path call that took the buffers' context as current (the quick vote): the driver
         * refuses the launch of a module's kernel in another context than its own
         * (CUDA_ERROR_INVALID_HANDLE; another context made current since the thread's last
         * call), and then the capture query went to another context's stream. Nothing was
         * queued: this rank says no (cuda_colls.c), and the full vote that follows finds the
         * context (or what else made the launch fail). An answer, not an error: nothing is
         * logged */
        coll_thread_switches = 1;
        return -1;
    }
    PICOLL_CU_TRY_FATAL(rc, "cuLaunchKernel", c->coll);
    return blocks;
}

/* A call on a workspace of an application's stream: every chunk launched there, and nothing
 * waited for. The kernels take their epochs from the workspace's epoch word and advance it, so
 * that the host's count does not matter and a CUDA graph that captured the launches replays them
 * with new epochs each time. A launch the driver refuses (past the point where this rank could
 * still agree with the others to do something else) ends the job, as a failure after the vote
 * does. */
picoll_status_t picoll_cuda_call_enqueue(picoll_cuda_ws_t *ws, coll_call_t *c)
{
    void *params[] = {&c->p};
    for (size_t i = 0; i < c->nchunks; i++) {
        int blocks = picoll_cuda_call_chunk(c, i);
        c->p.seq = ++ws->seq;
        c->p.seq_floor = c->p.seq; /* nothing gives up here (the halt word stays 0) */
        PICOLL_CU_TRY_FATAL(picoll_cu.launch_kernel(picoll_cuda_ws_function(ws, &c->p),
                                                    (unsigned)blocks, 1, 1,
                                                    picoll_cuda_launch_threads(ws, blocks), 1, 1, 0,
                                                    ws->stream, params, NULL),
                            "cuLaunchKernel on the communicator's stream", c->coll);
    }
    return PICOLL_OK;
}
