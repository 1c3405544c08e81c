/* The device collectives on the workspace: the vote, the chunk loops and the kernel launches, and
 * the end of a call (the kernel's completion; a kernel that gave up waiting for a late peer,
 * resumed once the host has waited for that peer without the GPU).
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
 * kernels through the host-mapped status (coll_veto) and returns PICOLL_RETRY for the full
 * vote. */
#include "build-config.h"
#include "cuda/cuda_ws.h"
#include "util/config.h"
#include "util/fatal.h"
#include "util/log.h"
#include "util/proc.h"
#include "util/wait.h"

#include <stdlib.h>
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

int picoll_cuda_dtype_ok(picoll_dtype_t dt)
{
    return coll_type(dt) != PICOLL_CUDA_T_NONE;
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
    int status = PICOLL_CU_STREAM_CAPTURE_STATUS_NONE, rc = 0;
    *ctx = NULL;
    *home = 0;
    coll_vote_current_known = 0;
    if (recv->kind != PICOLL_MEM_DEVICE || (send != NULL && (send->kind != PICOLL_MEM_DEVICE ||
                                                             send->context != recv->context))) {
        return 0;
    }
    if (dt != PICOLL_DT_NONE && coll_type(dt) == PICOLL_CUDA_T_NONE) {
        return 0;
    }
    /* a CUDA graph being captured on the stream the kernel would be launched on (this thread's
     * per-thread stream of the buffers' context) would take the launch in, past the point where
     * this rank could still fall back: ask that stream */
    if (quick && !coll_thread_switches &&
        picoll_cu.stream_is_capturing(PICOLL_CU_STREAM_PER_THREAD, &status) == 0) {
        /* the buffers' context current, as at the thread's last call: the launch tells if it is
         * not (coll_launch), and the call then says no. (Refused: no context is current, the
         * full check below tells.) */
    } else {
        status = PICOLL_CU_STREAM_CAPTURE_STATUS_NONE;
        /* the current context found here is the one coll_call then switches from (nothing of
         * picoll's runs in this thread in between) */
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
        coll_thread_switches = cur != recv->context;
        coll_vote_current = cur;
        coll_vote_current_known = 1;
    }
    if (rc != 0 || status != PICOLL_CU_STREAM_CAPTURE_STATUS_NONE) {
        coll_vote_current_known = 0;
        return 0;
    }
    *ctx = recv->context;
    /* the same handle is not the same context after a reset (issue 26, defect 4): the ids, which
     * the memory-kind cache holds, tell */
    *home = ws != NULL && ws->ctx == *ctx && ws->ctx_id == recv->context_id;
    return 1;
}

void picoll_cuda_hot_arm(picoll_cuda_ws_t *ws, picoll_shm_t *shm, uint64_t call)
{
    ws->veto_at = call;
    ws->veto_shm = shm;
}

/* A vetoed call's arrivals: at most the first launch's first two epochs (no block passes a wait
 * that needs the rank that said no), so every rank goes on two epochs on, launched or not. */
#define COLL_VETO_EPOCHS 2

void picoll_cuda_hot_skip(picoll_cuda_ws_t *ws)
{
    ws->epoch += COLL_VETO_EPOCHS;
    ws->veto_at = 0;
}

/* Past the agreement a rank cannot fall back alone: a CUDA failure ends the job. */
static void coll_fatal(const char *coll, const char *call, int rc)
{
    const char *s = NULL;
    picoll_cu.get_error_string(rc, &s);
    picoll_fatal("%s on the device: %s failed (%s, CUresult %d): aborting the job", coll, call,
                 s != NULL ? s : "unknown error", rc);
}

/* One call: every collective cuts its operands alike, chunk i covering bytes [i * step,
 * min(total, (i + 1) * step)) of the source and the destination (allgather and alltoall: of each
 * block), one launch each, so that a resume can launch any chunk again. */
typedef struct {
    const char *coll;
    const char *src;
    char *dst;
    size_t total, step, nchunks;
    int arrivals;          /* per launch: 1, or 2 for two-shot and HCM */
    uint64_t first;        /* epoch of chunk 0's first arrival */
    picoll_cuda_saved_ctx_t prev; /* the thread's context before the call */
    int entered;           /* the call made ws's context current (prev is put back at its end) */
    picoll_cuda_kparams_t p;
} coll_call_t;

/* A hot-path call: whether a peer said no to it (its dev_no word; picoll_cuda_hot_arm). No peer
 * that said no ever launches for it: its kernels give up waiting, or are vetoed (coll_veto). */
static int coll_said_no(const picoll_cuda_ws_t *ws, const coll_call_t *c)
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

/* Sets the parameters of chunk i; returns its blocks. */
static int coll_chunk(coll_call_t *c, size_t i)
{
    size_t off = i * c->step;
    c->p.chunk_off = off;
    c->p.bytes = c->total - off < c->step ? c->total - off : c->step;
    c->p.src = c->src + off;
    c->p.dst = c->dst + off;
    c->p.epoch = c->first + (uint64_t)i * (uint64_t)c->arrivals;
    return picoll_cuda_kernel_blocks(&c->p);
}

/* Launch chunk i on this thread's per-thread default stream of the buffers' context (see the top
 * of the file): no event record or stream wait; its completion is polled in the host-mapped status
 * (coll_end). floor: the seq of the attempt's first launch. Returns the blocks, or -1 where a
 * hot-path call's first launch found another context current (the call then says no). */
static int coll_launch(picoll_cuda_ws_t *ws, coll_call_t *c, size_t i, uint64_t floor, int resume,
                       uint64_t done_mask)
{
    void *params[] = {&c->p};
    int blocks = coll_chunk(c, i);
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
         * queued: this rank says no (coll_run), and the full vote that follows finds the
         * context (or what else made the launch fail) */
        coll_thread_switches = 1;
        return -1;
    }
    if (rc != 0) {
        coll_fatal(c->coll, "cuLaunchKernel", rc);
    }
    return blocks;
}

/* A call whose kernel gave up waiting for peers: how long it has waited, and what for. */
typedef struct {
    double start;          /* the first give-up of the call; 0 before */
    double expire;         /* seconds from start of the next "still waiting" (timeout, 2x, ...) */
    double look;           /* when the peers' processes are next looked at */
    double pause;          /* before the next relaunch */
    size_t chunk;          /* the chunk that gave up last, and its blocks that had finished */
    int finished;
    unsigned char missing[PICOLL_CUDA_MAX_LOCAL]; /* the ranks the last give-up waited for */
} coll_late_t;

/* The host's wait for a late peer, between relaunches: the peers given up on are looked at once a
 * second (a gone process ends the job now, naming it, as the host executor's barrier does), and
 * past PICOLL_TIMEOUT, 2x, 4x, ... the ranks are named: still waiting, or with
 * PICOLL_TIMEOUT_ACTION=abort the end of the job. */
static void coll_late_tick(picoll_cuda_ws_t *ws, const char *coll, coll_late_t *late, double now)
{
    unsigned char missing[PICOLL_CUDA_MAX_LOCAL];
    /* PICOLL_TIMEOUT=0: no deadline, as in picoll_wait() */
    int ngone = 0, nunwatched = 0;
    int expired = ws->timeout > 0.0 && now - late->start >= late->expire;

    if (!expired && now < late->look) {
        return;
    }
    late->look = now + 1.0;
    /* the ranks whose launch had not started, where there are any: a peer that runs may only be
     * waiting for them itself */
    int not_started = 0;
    for (int r = 0; r < ws->nlocal; r++) {
        not_started |= late->missing[r] == 2;
    }
    for (int r = 0; r < ws->nlocal; r++) {
        missing[r] = not_started ? late->missing[r] == 2 : late->missing[r] != 0;
        if (!missing[r]) {
            continue;
        }
        if (!ws->watch[r]) {
            nunwatched++;
        } else if (picoll_proc_state((pid_t)ws->pid[r], ws->pstart[r]) == PICOLL_PROC_GONE) {
            missing[r] = 2;
            ngone++;
        }
    }
    if (expired) {
        late->expire *= 2.0;
    }
    picoll_wait_verdict(coll, ws->comm_size, ws->comm_ranks, missing, ws->nlocal, ngone,
                        nunwatched, expired, now - late->start, ws->timeout);
}

/* Some block of the attempt that began with chunk *from (launches from seq *floor on) gave up. Waits
 * until every launch of the attempt ended (the last one's blocks each finished or quit: stream
 * order, so all before it too), then waits for the peers without the GPU and relaunches the chunk
 * that gave up (resumed: its finished blocks return, the others go on from their last arrival)
 * and every chunk after it. No driver call but the launches: nothing that could wait behind a
 * kernel of this rank. Updates *from, *floor and *blocks (of the attempt's last launch). */
static int coll_resume(picoll_cuda_ws_t *ws, coll_call_t *c, coll_late_t *late, size_t *from,
                       uint64_t *floor, int *blocks)
{
    volatile picoll_cuda_status_t *st = ws->status;
    uint64_t last = c->first + (uint64_t)c->nchunks * (uint64_t)c->arrivals - 1;
    uint64_t last_seq = ws->seq, mask = 0;
    picoll_wait_t w;
    int finished = 0;

    picoll_wait_init(&w, 0.0, picoll_spin_max());
    for (;;) {
        int b = 0;
        while (b < *blocks && (st->done[b] >= last || st->quit[b] >= last_seq)) {
            b++;
        }
        if (b == *blocks) {
            break;
        }
        picoll_wait(&w, 0);
    }
    __atomic_thread_fence(__ATOMIC_ACQUIRE);
    if (coll_said_no(ws, c)) {
        return 1;
    }
    size_t k = *from + (size_t)(st->halted - *floor);
    int nb = coll_chunk(c, k);
    uint64_t k_last = c->p.epoch + (uint64_t)c->arrivals - 1;
    for (int b = 0; b < nb; b++) {
        if (st->done[b] >= k_last) {
            mask |= 1ull << b;
            finished++;
        }
    }
    for (int r = 0; r < ws->nlocal; r++) {
        late->missing[r] = st->missing[r];
        st->missing[r] = 0;
    }
    st->halted = 0;

    /* a relaunch soon after progress, else a pause that doubles up to 20 spins (at most 1 s): a
     * late peer costs this GPU one spin in 21 at most (its SMs are free the rest of the time), and
     * the call at most one pause more than the peer's lateness (0.2 s at the default spin) */
    double now = picoll_clock_now();
    double shortest = ws->spin / 4.0, longest = 20.0 * ws->spin < 1.0 ? 20.0 * ws->spin : 1.0;
    longest = longest > shortest ? longest : shortest;
    if (late->start == 0.0) {
        late->start = now;
        late->expire = ws->timeout;
        late->look = now + 1.0;
        late->pause = shortest;
    } else if (k > late->chunk || finished > late->finished) {
        late->pause = shortest;
    } else {
        late->pause = late->pause * 2.0 < longest ? late->pause * 2.0 : longest;
    }
    late->chunk = k;
    late->finished = finished;
    picoll_debug("%s on the device: chunk %zu of %zu gave up waiting (%d of %d blocks finished): "
                 "relaunch in %.3f s", c->coll, k, c->nchunks, finished, nb, late->pause);
    double until = now + late->pause;
    picoll_wait_init(&w, 0.0, picoll_spin_max());
    while (now < until) {
        if (coll_said_no(ws, c)) {
            return 1;
        }
        coll_late_tick(ws, c->coll, late, now);
        if (picoll_wait(&w, 0) != PICOLL_WAIT_POLL) {
            now = w.now;
        }
    }
    if (coll_said_no(ws, c)) {
        return 1;
    }
    coll_late_tick(ws, c->coll, late, now);

    *from = k;
    *floor = ws->seq + 1;
    *blocks = coll_launch(ws, c, k, *floor, 1, mask);
    for (size_t i = k + 1; i < c->nchunks; i++) {
        *blocks = coll_launch(ws, c, i, *floor, 0, 0);
    }
    return 0;
}

/* A peer said no to this hot-path call: stop this rank's kernels (status->veto, which their waits
 * read), wait until the last launch's blocks all quit (stream order: every launch before it
 * ended too), and leave the workspace where every rank's is (picoll_cuda_hot_skip). No block
 * wrote the receive buffer: each waits, before it writes it, for the rank that said no. */
static void coll_veto(picoll_cuda_ws_t *ws, coll_call_t *c, int blocks)
{
    volatile picoll_cuda_status_t *st = ws->status;
    uint64_t last = c->first + (uint64_t)c->nchunks * (uint64_t)c->arrivals - 1;
    picoll_wait_t w;

    __atomic_store_n(&st->veto, c->p.veto_at, __ATOMIC_RELEASE);
    picoll_wait_init(&w, 0.0, picoll_spin_max());
    for (;;) {
        int b = 0;
        while (b < blocks && st->quit[b] >= ws->seq) {
            b++;
        }
        if (b == blocks) {
            break;
        }
        if (st->done[b] >= last) {
            picoll_fatal("%s on the device: finished although a rank said no", c->coll);
        }
        picoll_wait(&w, 0);
    }
    __atomic_thread_fence(__ATOMIC_ACQUIRE);
    for (int r = 0; r < ws->nlocal; r++) {
        st->missing[r] = 0;
    }
    st->halted = 0;
    ws->epoch = c->first - 1 + COLL_VETO_EPOCHS;
    picoll_debug("%s on the device: a rank said no: every rank falls back", c->coll);
}

/* Wait for the call's last launch by polling the host-mapped status: no driver call. A launch of
 * this rank that does not start (the GPU still runs work queued before the call) is waited for
 * with a warning; a kernel that gave up waiting for a peer is resumed (coll_resume). */
static picoll_status_t coll_end(picoll_cuda_ws_t *ws, coll_call_t *c, uint64_t floor, int blocks)
{
    volatile picoll_cuda_status_t *st = ws->status;
    uint64_t last = c->first + (uint64_t)c->nchunks * (uint64_t)c->arrivals - 1;
    double began = 0.0, asked = picoll_clock_now();
    int warned = 0, vetoed = 0;
    size_t from = 0;
    coll_late_t late;
    picoll_wait_t w;

    memset(&late, 0, sizeof(late));
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
        if (st->halted != 0) {
            if (coll_resume(ws, c, &late, &from, &floor, &blocks)) {
                vetoed = 1;
                break;
            }
            continue;
        }
        if (coll_said_no(ws, c)) {
            vetoed = 1;
            break;
        }
        if (picoll_wait(&w, 0) == PICOLL_WAIT_POLL) {
            continue;
        }
        double now = w.now;
        if (late.start != 0.0) {
            /* a relaunch runs: the peers are still looked at, the lines still come on time */
            coll_late_tick(ws, c->coll, &late, now);
        }
        if (began == 0.0 && st->started[0] >= c->first) {
            began = now;
        }
        if (began == 0.0 && !warned && now - asked > ws->timeout) {
            picoll_warn("%s on the device: this rank's kernel has not started after %.0f s: its "
                        "GPU still runs work queued before the call", c->coll, now - asked);
            warned = 1;
        }
    }
    if (vetoed) {
        coll_veto(ws, c, blocks);
    } else if (late.start != 0.0) {
        picoll_debug("%s on the device: done after waiting %.1f s for late peers", c->coll,
                     picoll_clock_now() - late.start);
    }
    picoll_cuda_leave(&c->prev);
    return vetoed ? PICOLL_RETRY : PICOLL_OK;
}

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

/* A call on a workspace of an application's stream: every chunk launched there, and nothing
 * waited for. The kernels take their epochs from the workspace's epoch word and advance it, so
 * that the host's count does not matter and a CUDA graph that captured the launches replays them
 * with new epochs each time. A launch the driver refuses (past the point where this rank could
 * still agree with the others to do something else) ends the job, as a failure after the vote
 * does. */
static picoll_status_t coll_enqueue(picoll_cuda_ws_t *ws, coll_call_t *c)
{
    void *params[] = {&c->p};
    for (size_t i = 0; i < c->nchunks; i++) {
        int blocks = coll_chunk(c, i);
        c->p.seq = ++ws->seq;
        c->p.seq_floor = c->p.seq; /* nothing gives up here (the halt word stays 0) */
        int rc = picoll_cu.launch_kernel(picoll_cuda_ws_function(ws, &c->p), (unsigned)blocks, 1,
                                         1, picoll_cuda_launch_threads(ws, blocks), 1, 1, 0,
                                         ws->stream, params, NULL);
        if (rc != 0) {
            coll_fatal(c->coll, "cuLaunchKernel on the communicator's stream", rc);
        }
    }
    return PICOLL_OK;
}

/* One look at a stream workspace: a launch that runs (block 0 started, not finished) and whose
 * blocks name peers they have waited for past PICOLL_CUDA_SPIN is a late call, treated as the
 * blocking call's (coll_late_tick): the peers' processes looked at once a second, a gone one ends
 * the job naming it, past PICOLL_TIMEOUT the ranks waited for are named. */
static void watch_one(picoll_cuda_ws_t *ws)
{
    volatile picoll_cuda_status_t *st = ws->status;
    uint64_t started = st->started[0], done = st->done[0];
    coll_late_t *late = ws->watch_late;
    int named = 0;

    for (int r = 0; r < ws->nlocal; r++) {
        named |= st->missing[r] != 0;
    }
    if (done >= started || !named) {
        if (late != NULL && late->start != 0.0 && (done >= started || started != ws->watch_first)) {
            late->start = 0.0; /* it went on */
        }
        return;
    }
    if (late == NULL && (late = ws->watch_late = calloc(1, sizeof(*late))) == NULL) {
        return;
    }
    double now = picoll_clock_now();
    if (late->start == 0.0 || started != ws->watch_first) {
        memset(late, 0, sizeof(*late));
        late->start = now;
        late->expire = ws->timeout;
        late->look = now;
        ws->watch_first = started;
    }
    /* the kernel names them again every spin while it waits: a peer that arrived drops out */
    for (int r = 0; r < ws->nlocal; r++) {
        late->missing[r] = st->missing[r];
        st->missing[r] = 0;
    }
    coll_late_tick(ws, "a collective enqueued on a stream", late, now);
}

void picoll_cuda_stream_watch(void)
{
    picoll_cuda_ws_each_stream(watch_one);
}

/* Launch every chunk of c, then wait for the last (resuming the call where a kernel gave up). */
static picoll_status_t coll_run(picoll_cuda_ws_t *ws, coll_call_t *c)
{
    uint64_t floor = ws->seq + 1;
    int blocks = 0;
    c->nchunks = (c->total + c->step - 1) / c->step;
    c->first = ws->epoch + 1;
    if (ws->on_stream) {
        return coll_enqueue(ws, c);
    }
    for (size_t i = 0; i < c->nchunks; i++) {
        blocks = coll_launch(ws, c, i, floor, 0, 0);
        if (blocks < 0) {
            /* as a rank that said no in the vote does (coll/vote.c): the peers' kernels wait for
             * this rank's arrival until their hosts see the no, and veto them */
            atomic_store_explicit(&ws->veto_shm->flags[ws->veto_shm->me].dev_no, c->p.veto_at,
                                  memory_order_release);
            ws->seq--;
            picoll_cuda_hot_skip(ws);
            picoll_debug("%s on the device: the calling thread's current context changed since "
                         "its last call: this rank says no", c->coll);
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
    return coll_end(ws, c, floor, blocks);
}

/* The parameters of a reduction of dtype under op. */
static void coll_reduce_params(picoll_dtype_t dtype, picoll_op_t op, picoll_cuda_kparams_t *p)
{
    p->type = coll_type(dtype);
    p->op = (int)op;
    p->esize = (int)picoll_dtype_size(dtype);
}

/* Runs the call c, its kernel parameters set: total bytes from src to dst in chunks of step
 * (c->arrivals per launch, 1 where unset), in the buffers' context. */
static picoll_status_t coll_call(picoll_cuda_ws_t *ws, coll_call_t *c, const void *src, void *dst,
                                 size_t total, size_t step)
{
    memset(&c->prev, 0, sizeof(c->prev));
    /* on a stream the caller has the stream's context current (no vote before) */
    c->entered = !ws->on_stream && coll_vote_current_known;
    if (c->entered) {
        /* after a full vote: the context it found current */
        coll_vote_current_known = 0;
        int rc = picoll_cuda_enter_from(ws->ctx, coll_vote_current, &c->prev);
        if (rc != 0) {
            coll_fatal(c->coll, "cuCtxSetCurrent", rc);
        }
    }
    c->src = src;
    c->dst = dst;
    c->total = total;
    c->step = step;
    c->arrivals = c->arrivals != 0 ? c->arrivals : 1;
    ws->veto_at = 0; /* armed for one call */
    return coll_run(ws, c);
}

picoll_status_t picoll_cuda_allreduce(picoll_cuda_ws_t *ws, picoll_cuda_kmode_t mode,
                                      const void *sendbuf, void *recvbuf, size_t count,
                                      picoll_dtype_t dtype, picoll_op_t op)
{
    size_t bytes = count * picoll_dtype_size(dtype);
    if (mode == PICOLL_CUDA_K_ONESHOT_LL &&
        !picoll_cuda_ll_fits(ws->slot_size, picoll_cfg.cuda_ll_max, ws->nlocal, bytes, 0)) {
        mode = PICOLL_CUDA_K_ONESHOT; /* the selection's job; the same on every rank */
    }
    int two = mode == PICOLL_CUDA_K_TWOSHOT || mode == PICOLL_CUDA_K_HCM;
    coll_call_t c = {.coll = "MPI_Allreduce", .arrivals = two ? 2 : 1};

    coll_params(ws, mode, &c.p);
    coll_reduce_params(dtype, op, &c.p);
    /* a buffer is a multiple of 4 KiB: every chunk holds whole elements */
    return coll_call(ws, &c, sendbuf == MPI_IN_PLACE ? recvbuf : sendbuf, recvbuf,
                     count * (size_t)c.p.esize, ws->slot_size);
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

    if (mode == PICOLL_CUDA_K_ALLGATHER_LL &&
        !picoll_cuda_ll_fits(ws->slot_size, picoll_cfg.cuda_ll_max, ws->nlocal, block, 1)) {
        mode = PICOLL_CUDA_K_ALLGATHER; /* the selection's job; the same on every rank */
    }
    coll_params(ws, mode, &c.p);
    c.p.skip_self = in_place;
    c.p.dst_stride = block;
    return coll_call(ws, &c,
                     in_place ? (const char *)recvbuf + (size_t)ws->me * block : sendbuf,
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
                                           const void *sendbuf, void *recvbuf,
                                           const size_t *counts, picoll_dtype_t dtype,
                                           picoll_op_t op)
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
    return coll_call(ws, &c, in_place ? (const char *)recvbuf + displs[ws->me] : sendbuf,
                     recvbuf, largest, ws->slot_size);
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
    return coll_call(ws, &c, src, ws->me == root ? recvbuf : (void *)src,
                     count * (size_t)c.p.esize, ws->slot_size);
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
