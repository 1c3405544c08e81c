/* Streams, events and graph capture, with CUDA's ordering.
 *
 * Every stream is a FIFO of operations worked in order by a worker thread of its own (made at the
 * first operation). An operation also waits for the operations it depends on in other streams:
 *   - the legacy default stream (NULL, CU_STREAM_LEGACY) of a context: an operation queued on it
 *     waits for every operation queued before it on the context's blocking streams (the
 *     per-thread default streams are blocking);
 *   - a blocking stream: an operation waits for the operations queued before it on the legacy
 *     stream; CU_STREAM_NON_BLOCKING streams are exempt from both;
 *   - cuStreamWaitEvent: the operation waits for the event's record.
 * Synchronising the legacy stream queues a marker on it, so it also waits for the blocking
 * streams' earlier work, as in CUDA.
 * Dependencies only point to earlier operations, so they cannot form a cycle.
 *
 * Rule "hardware-queue" (FAKECUDA_QUEUES=N, default 0: off): a GPU maps a context's streams onto
 * a few hardware work queues (CUDA_DEVICE_MAX_CONNECTIONS, fewer under MPS), and a queue
 * dispatches its operations in the order they were queued, whatever their streams: an operation
 * waits until the one queued before it in its queue was dispatched. A kernel, copy, memset or
 * marker is dispatched when it starts; a stream memory wait (cuStreamWaitValue64) and a host
 * function only once they are done, and any operation only once its dependencies are met, so a
 * wait holds up every stream of its queue. With N queues the streams take them round robin, in
 * the order they were made: with N = 1 every stream of a context shares one, the case CUDA
 * allows (a stream may always share its queue) and that a protocol must survive; work that
 * waits for a kernel queued behind the wait then hangs, as it does on a GPU.
 *
 * Rule "stream-context": a stream made by cuStreamCreate (or an event) used while another context
 * is current is a failure (CUDA returns an error or, worse, orders the work with the wrong
 * device).
 *
 * Capture: operations queued on a capturing stream are recorded into its graph, in order (a
 * capture on one stream: a chain); cuGraphInstantiate copies the chain, and cuGraphLaunch queues a
 * copy of every operation on the launch stream, in order, as one unit of stream order (kernel
 * arguments as captured, host functions with their captured argument, copies and stream waits
 * with their captured addresses and values). Event records and waits captured are ordering only,
 * dropped. As
 * CUDA, while a GLOBAL-mode capture runs in some thread, a potentially unsafe call (allocation,
 * synchronous copy, synchronisation of the legacy stream or the context...) from a thread whose
 * capture mode is not RELAXED fails with CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED (the calls that ask
 * emu_capture_check_locked); queuing on the
 * legacy stream of a context one of whose blocking streams captures fails with
 * CUDA_ERROR_STREAM_CAPTURE_IMPLICIT. As in CUDA, a refused call also invalidates the capture it
 * would have broken: that capture's cuStreamEndCapture then fails with
 * CUDA_ERROR_STREAM_CAPTURE_INVALIDATED, so that a library call that spoils an application's graph
 * shows there. cuStreamIsCapturing on the legacy stream answers CUDA_ERROR_STREAM_CAPTURE_IMPLICIT
 * without invalidating anything (as CUDA documents). */
#define _GNU_SOURCE
#include "emu.h"

#include <stdlib.h>
#include <string.h>
#include <time.h>

#define EMU_ILLEGAL_STATE 401

typedef struct {
    uint32_t magic;
    emu_ctx_t *ctx;
    emu_stream_t *stream; /* of the last record; NULL: never recorded */
    uint64_t seq;
    int live;
} emu_event_t;

#define EMU_EVENT_MAGIC 0x45766e74u

static emu_stream_t *emu_all_streams[4096];
static int emu_nstreams;
static int emu_global_captures; /* GLOBAL-mode captures running in the process */
static __thread int thread_capture_mode = EMU_CAPTURE_GLOBAL;
static __thread int thread_captures;        /* captures (not relaxed) this thread began */
static __thread int thread_global_captures; /* of which GLOBAL mode */
static __thread struct {
    emu_ctx_t *ctx;
    emu_stream_t *stream;
} thread_pts[EMU_MAX_DEVICES * 4]; /* this thread's per-thread default streams */

/* A refused unsafe call invalidates the captures that forbade it: this thread's own (not relaxed),
 * or the other threads' global-mode ones. */
static void emu_capture_invalidate_locked(int own)
{
    pthread_t self = pthread_self();
    for (int i = 0; i < emu_nstreams; i++) {
        emu_stream_t *t = emu_all_streams[i];
        if (!t->capturing) {
            continue;
        }
        int mine = pthread_equal(t->capture_thread, self);
        if (own ? mine && t->capture_mode != EMU_CAPTURE_RELAXED
                : !mine && t->capture_mode == EMU_CAPTURE_GLOBAL) {
            t->capture_invalid = 1;
        }
    }
}

CUresult emu_capture_check_locked(void)
{
    if (thread_capture_mode == EMU_CAPTURE_RELAXED) {
        return CUDA_SUCCESS;
    }
    if (thread_captures > 0) {
        emu_capture_invalidate_locked(1);
        return CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
    }
    if (thread_capture_mode == EMU_CAPTURE_GLOBAL &&
        emu_global_captures - thread_global_captures > 0) {
        emu_capture_invalidate_locked(0);
        return CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
    }
    return CUDA_SUCCESS;
}

emu_op_t *emu_op_new(emu_op_type_t type)
{
    emu_op_t *op = calloc(1, sizeof(*op));
    if (op != NULL) {
        op->type = type;
    }
    return op;
}

static void emu_op_free(emu_op_t *op)
{
    if (op->type == EMU_OP_COPY) {
        free(op->u.copy.snapshot);
    } else if (op->type == EMU_OP_KERNEL) {
        free(op->u.kernel.params);
    }
    free(op->deps);
    free(op);
}

/* FAKECUDA_QUEUES, read once */
static int emu_queues(void)
{
    static int n = -1;
    if (n < 0) {
        n = emu_env_int("FAKECUDA_QUEUES", 0, 0, EMU_MAX_QUEUES);
    }
    return n;
}

static emu_stream_t *emu_stream_new_locked(emu_ctx_t *ctx, unsigned flags)
{
    if (emu_nstreams == (int)(sizeof(emu_all_streams) / sizeof(emu_all_streams[0]))) {
        return NULL;
    }
    emu_stream_t *s = calloc(1, sizeof(*s));
    if (s == NULL) {
        return NULL;
    }
    s->magic = EMU_STREAM_MAGIC;
    s->ctx = ctx;
    s->flags = flags;
    s->live = 1;
    s->queue = emu_queues() > 0 ? ctx->queue_next++ % emu_queues() : -1;
    s->next_in_ctx = ctx->streams;
    ctx->streams = s;
    emu_all_streams[emu_nstreams++] = s;
    return s;
}

static emu_stream_t *emu_per_thread_locked(emu_ctx_t *ctx)
{
    int n = (int)(sizeof(thread_pts) / sizeof(thread_pts[0])), free_slot = -1;
    for (int i = 0; i < n; i++) {
        if (thread_pts[i].ctx == ctx) {
            return thread_pts[i].stream;
        }
        if (thread_pts[i].ctx == NULL && free_slot < 0) {
            free_slot = i;
        }
    }
    if (free_slot < 0) {
        return NULL;
    }
    emu_stream_t *s = emu_stream_new_locked(ctx, 0);
    if (s != NULL) {
        s->per_thread = 1;
        thread_pts[free_slot].ctx = ctx;
        thread_pts[free_slot].stream = s;
    }
    return s;
}

CUresult emu_stream_resolve_locked(void *h, const char *call, emu_stream_t **out)
{
    emu_ctx_t *ctx = emu_ctx_current();
    if (h == NULL || h == EMU_STREAM_LEGACY || h == EMU_STREAM_PER_THREAD) {
        if (ctx == NULL) {
            return CUDA_ERROR_INVALID_CONTEXT;
        }
        if (h == EMU_STREAM_PER_THREAD) {
            *out = emu_per_thread_locked(ctx);
        } else {
            if (ctx->legacy == NULL && (ctx->legacy = emu_stream_new_locked(ctx, 0)) != NULL) {
                ctx->legacy->legacy = 1;
            }
            *out = ctx->legacy;
        }
        return *out != NULL ? CUDA_SUCCESS : CUDA_ERROR_OUT_OF_MEMORY;
    }
    emu_stream_t *s = h;
    if (s->magic != EMU_STREAM_MAGIC || !s->live) {
        return CUDA_ERROR_INVALID_HANDLE;
    }
    if (ctx != NULL && ctx != s->ctx) {
        pthread_mutex_unlock(&emu_lock);
        emu_fail("stream-context",
                 "%s on a stream of context %p (device %d) while context %p (device %d) is "
                 "current",
                 call, (void *)s->ctx, s->ctx->device, (void *)ctx, ctx->device);
    }
    *out = s;
    return CUDA_SUCCESS;
}

/* Rule hardware-queue: whether op (on s) is its queue's next to dispatch. */
static int emu_queue_turn_locked(const emu_stream_t *s, const emu_op_t *op)
{
    return op->ticket == 0 || s->ctx->queue_dispatched[s->queue] + 1 == op->ticket;
}

/* Op (on s) was dispatched: the next of its queue may go. */
static void emu_queue_dispatched_locked(const emu_stream_t *s, const emu_op_t *op)
{
    if (op->ticket != 0) {
        s->ctx->queue_dispatched[s->queue] = op->ticket;
        pthread_cond_broadcast(&emu_cond);
    }
}

static int emu_deps_met_locked(const emu_op_t *op)
{
    for (int i = 0; i < op->ndeps; i++) {
        if (op->deps[i].stream->completed < op->deps[i].seq) {
            return 0;
        }
    }
    return 1;
}

static void *emu_worker(void *arg)
{
    emu_stream_t *s = arg;
    pthread_mutex_lock(&emu_lock);
    for (;;) {
        while (s->head == NULL || !emu_deps_met_locked(s->head) ||
               !emu_queue_turn_locked(s, s->head)) {
            if (s->head == NULL && !s->live) { /* destroyed and drained */
                s->has_worker = 0;
                pthread_mutex_unlock(&emu_lock);
                emu_worker_release();
                return NULL;
            }
            pthread_cond_wait(&emu_cond, &emu_lock);
        }
        emu_op_t *op = s->head;
        /* a wait or a host function holds its queue until it is done; the others start */
        int holds = op->type == EMU_OP_WAITVAL || op->type == EMU_OP_HOSTFN;
        if (!holds) {
            emu_queue_dispatched_locked(s, op);
        }
        pthread_mutex_unlock(&emu_lock);
        switch (op->type) {
        case EMU_OP_COPY:
            memmove(op->u.copy.dst,
                    op->u.copy.snapshot != NULL ? op->u.copy.snapshot : op->u.copy.src,
                    op->u.copy.n);
            break;
        case EMU_OP_MEMSET: memset(op->u.memset.dst, op->u.memset.value, op->u.memset.n); break;
        case EMU_OP_HOSTFN: op->u.hostfn.fn(op->u.hostfn.arg); break;
        case EMU_OP_KERNEL: emu_kernel_run(op); break;
        case EMU_OP_WAITVAL:
            /* a stream memory operation: the stream goes on once the word reached the value
             * (written by a host thread or a kernel, with release) */
            while ((int64_t)(__atomic_load_n(op->u.waitval.addr, __ATOMIC_ACQUIRE) -
                             op->u.waitval.value) < 0) {
                struct timespec ts = {0, 20000};
                nanosleep(&ts, NULL);
            }
            break;
        case EMU_OP_MARKER: break;
        }
        pthread_mutex_lock(&emu_lock);
        if (holds) {
            emu_queue_dispatched_locked(s, op);
        }
        s->head = op->next;
        if (s->head == NULL) {
            s->tail = NULL;
        }
        s->completed = op->seq;
        emu_op_free(op);
        pthread_cond_broadcast(&emu_cond);
    }
}

/* Adds to op the dependencies CUDA's implicit ordering gives it on s. */
static CUresult emu_implicit_deps_locked(emu_stream_t *s, emu_op_t *op, const emu_dep_t *extra)
{
    emu_ctx_t *ctx = s->ctx;
    int n = extra != NULL ? 1 : 0;
    for (emu_stream_t *t = ctx->streams; t != NULL; t = t->next_in_ctx) {
        n++;
    }
    op->deps = calloc((size_t)n, sizeof(*op->deps));
    if (n > 0 && op->deps == NULL) {
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    if (s->legacy) {
        for (emu_stream_t *t = ctx->streams; t != NULL; t = t->next_in_ctx) {
            if (t == s || (t->flags & EMU_STREAM_NON_BLOCKING)) {
                continue;
            }
            if (t->capturing) {
                t->capture_invalid = 1;
                return CUDA_ERROR_STREAM_CAPTURE_IMPLICIT;
            }
            if (t->enqueued > t->completed) {
                op->deps[op->ndeps++] = (emu_dep_t){.stream = t, .seq = t->enqueued};
            }
        }
    } else if (!(s->flags & EMU_STREAM_NON_BLOCKING) && ctx->legacy != NULL &&
               ctx->legacy->enqueued > ctx->legacy->completed) {
        op->deps[op->ndeps++] = (emu_dep_t){.stream = ctx->legacy, .seq = ctx->legacy->enqueued};
    }
    if (extra != NULL && extra->stream != NULL) {
        op->deps[op->ndeps++] = *extra;
    }
    return CUDA_SUCCESS;
}

/* ---- graphs: a chain of captured operations ---- */
#define EMU_GRAPH_MAGIC 0x47726170u
#define EMU_GRAPH_EXEC_MAGIC 0x47457865u

typedef struct emu_graph {
    uint32_t magic;
    emu_op_t *head, *tail;
} emu_graph_t;

static void emu_graph_append(emu_graph_t *g, emu_op_t *op)
{
    op->next = NULL;
    free(op->deps);
    op->deps = NULL;
    op->ndeps = 0;
    if (g->tail != NULL) {
        g->tail->next = op;
    } else {
        g->head = op;
    }
    g->tail = op;
}

/* A copy of op (its own kernel arguments and copy snapshot); NULL when out of memory. */
static emu_op_t *emu_op_clone(const emu_op_t *op)
{
    emu_op_t *c = emu_op_new(op->type);
    if (c == NULL) {
        return NULL;
    }
    c->u = op->u;
    if (op->type == EMU_OP_KERNEL) {
        c->u.kernel.params = malloc(op->u.kernel.size);
        if (c->u.kernel.params == NULL) {
            free(c);
            return NULL;
        }
        memcpy(c->u.kernel.params, op->u.kernel.params, op->u.kernel.size);
        c->u.kernel.frozen = 0;
    } else if (op->type == EMU_OP_COPY && op->u.copy.snapshot != NULL) {
        c->u.copy.snapshot = malloc(op->u.copy.n);
        if (c->u.copy.snapshot == NULL) {
            free(c);
            return NULL;
        }
        memcpy(c->u.copy.snapshot, op->u.copy.snapshot, op->u.copy.n);
    }
    return c;
}

static void emu_graph_free(emu_graph_t *g)
{
    for (emu_op_t *op = g->head, *next; op != NULL; op = next) {
        next = op->next;
        emu_op_free(op);
    }
    g->magic = 0;
    free(g);
}

CUresult emu_stream_enqueue_locked(emu_stream_t *s, emu_op_t *op, const emu_dep_t *extra)
{
    if (s->capturing) {
        if (s->capture_invalid || s->capture_graph == NULL || op->type == EMU_OP_MARKER) {
            emu_op_free(op);
        } else {
            emu_graph_append(s->capture_graph, op);
        }
        return s->capture_invalid ? CUDA_ERROR_STREAM_CAPTURE_INVALIDATED : CUDA_SUCCESS;
    }
    CUresult rc = emu_implicit_deps_locked(s, op, extra);
    if (rc != CUDA_SUCCESS) {
        emu_op_free(op);
        return rc;
    }
    if (!s->has_worker) {
        pthread_attr_t attr;
        pthread_attr_init(&attr);
        pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
        int err = pthread_create(&s->worker, &attr, emu_worker, s);
        pthread_attr_destroy(&attr);
        if (err != 0) {
            emu_op_free(op);
            return CUDA_ERROR_OUT_OF_MEMORY;
        }
        s->has_worker = 1;
    }
    op->seq = ++s->enqueued;
    if (s->queue >= 0) {
        op->ticket = ++s->ctx->queue_ticket[s->queue];
    }
    if (s->tail != NULL) {
        s->tail->next = op;
    } else {
        s->head = op;
    }
    s->tail = op;
    pthread_cond_broadcast(&emu_cond);
    return CUDA_SUCCESS;
}

void emu_stream_wait_locked(emu_stream_t *s, uint64_t seq)
{
    while (s->completed < seq) {
        pthread_cond_wait(&emu_cond, &emu_lock);
    }
}

void emu_ctx_idle_locked(emu_ctx_t *c)
{
    for (emu_stream_t *t = c->streams; t != NULL; t = t->next_in_ctx) {
        emu_stream_wait_locked(t, t->enqueued);
    }
}

void emu_device_idle_locked(int device)
{
    for (int i = 0; i < emu_nstreams; i++) {
        emu_stream_t *t = emu_all_streams[i];
        if (t->ctx->device == device) {
            emu_stream_wait_locked(t, t->enqueued);
        }
    }
}

/* ---- streams ---- */

EMU_API CUresult cuStreamCreate(emu_stream_t **out, unsigned flags)
{
    emu_count(EMU_CALL_cuStreamCreate);
    emu_ctx_t *ctx = emu_ctx_current();
    if (ctx == NULL) {
        return CUDA_ERROR_INVALID_CONTEXT;
    }
    if (flags & ~(unsigned)EMU_STREAM_NON_BLOCKING) {
        return CUDA_ERROR_INVALID_VALUE;
    }
    pthread_mutex_lock(&emu_lock);
    emu_stream_t *s = emu_stream_new_locked(ctx, flags);
    pthread_mutex_unlock(&emu_lock);
    if (s == NULL) {
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    *out = s;
    return CUDA_SUCCESS;
}

EMU_API CUresult cuStreamDestroy_v2(void *h)
{
    emu_stream_t *s;
    emu_count(EMU_CALL_cuStreamDestroy_v2);
    if (h == NULL || h == EMU_STREAM_LEGACY || h == EMU_STREAM_PER_THREAD) {
        return CUDA_ERROR_INVALID_HANDLE;
    }
    pthread_mutex_lock(&emu_lock);
    CUresult rc = emu_stream_resolve_locked(h, "cuStreamDestroy_v2", &s);
    if (rc == CUDA_SUCCESS) {
        /* as CUDA: queued work still completes; the stream stays allocated (other operations may
         * depend on it), unusable */
        s->live = 0;
        pthread_cond_broadcast(&emu_cond); /* its idle worker ends */
    }
    pthread_mutex_unlock(&emu_lock);
    return rc;
}

EMU_API CUresult cuStreamSynchronize(void *h)
{
    emu_stream_t *s;
    emu_count(EMU_CALL_cuStreamSynchronize);
    pthread_mutex_lock(&emu_lock);
    CUresult rc = emu_stream_resolve_locked(h, "cuStreamSynchronize", &s);
    if (rc == CUDA_SUCCESS && s->capturing) {
        s->capture_invalid = 1;
        rc = CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
    }
    if (rc == CUDA_SUCCESS && s->legacy) {
        rc = emu_capture_check_locked();
    }
    if (rc == CUDA_SUCCESS && s->legacy) {
        /* a legacy-stream operation: it also waits for the blocking streams' earlier work */
        emu_op_t *op = emu_op_new(EMU_OP_MARKER);
        rc = op != NULL ? emu_stream_enqueue_locked(s, op, NULL) : CUDA_ERROR_OUT_OF_MEMORY;
    }
    if (rc == CUDA_SUCCESS) {
        emu_stream_wait_locked(s, s->enqueued);
    }
    pthread_mutex_unlock(&emu_lock);
    return rc;
}

EMU_API CUresult cuStreamQuery(void *h)
{
    emu_stream_t *s;
    emu_count(EMU_CALL_cuStreamQuery);
    pthread_mutex_lock(&emu_lock);
    CUresult rc = emu_stream_resolve_locked(h, "cuStreamQuery", &s);
    if (rc == CUDA_SUCCESS && s->capturing) {
        s->capture_invalid = 1;
        rc = CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
    }
    if (rc == CUDA_SUCCESS && s->completed < s->enqueued) {
        rc = CUDA_ERROR_NOT_READY;
    }
    pthread_mutex_unlock(&emu_lock);
    return rc;
}

/* Queue op on stream h (taking the lock), or free it where h is no stream. */
static CUresult emu_stream_queue(void *h, const char *call, emu_op_t *op)
{
    emu_stream_t *s;
    pthread_mutex_lock(&emu_lock);
    CUresult rc = emu_stream_resolve_locked(h, call, &s);
    if (rc == CUDA_SUCCESS) {
        rc = emu_stream_enqueue_locked(s, op, NULL);
    } else {
        free(op);
    }
    pthread_mutex_unlock(&emu_lock);
    return rc;
}

EMU_API CUresult cuLaunchHostFunc(void *h, void (*fn)(void *), void *arg)
{
    emu_count(EMU_CALL_cuLaunchHostFunc);
    emu_op_t *op = emu_op_new(EMU_OP_HOSTFN);
    if (op == NULL || fn == NULL) {
        free(op);
        return op == NULL ? CUDA_ERROR_OUT_OF_MEMORY : CUDA_ERROR_INVALID_VALUE;
    }
    op->u.hostfn.fn = fn;
    op->u.hostfn.arg = arg;
    return emu_stream_queue(h, "cuLaunchHostFunc", op);
}

/* cuStreamWaitValue64 with CU_STREAM_WAIT_VALUE_GEQ (0), the one form picoll uses: later work on
 * the stream waits until the word at addr reaches value. */
EMU_API CUresult cuStreamWaitValue64_v2(void *h, uint64_t addr, uint64_t value, unsigned flags)
{
    emu_count(EMU_CALL_cuStreamWaitValue64_v2);
    if (flags != 0 || addr == 0 || (addr & 7) != 0) {
        return CUDA_ERROR_INVALID_VALUE;
    }
    emu_op_t *op = emu_op_new(EMU_OP_WAITVAL);
    if (op == NULL) {
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    op->u.waitval.addr = (const uint64_t *)(uintptr_t)addr;
    op->u.waitval.value = value;
    return emu_stream_queue(h, "cuStreamWaitValue64_v2", op);
}

/* The context of a stream (the legacy and per-thread handles: the current one). */
EMU_API CUresult cuStreamGetCtx(void *h, emu_ctx_t **out)
{
    emu_stream_t *s;
    emu_count(EMU_CALL_cuStreamGetCtx);
    pthread_mutex_lock(&emu_lock);
    CUresult rc = emu_stream_resolve_locked(h, "cuStreamGetCtx", &s);
    if (rc == CUDA_SUCCESS) {
        *out = s->ctx;
    }
    pthread_mutex_unlock(&emu_lock);
    return rc;
}

/* ---- capture ---- */

EMU_API CUresult cuStreamBeginCapture_v2(void *h, int mode)
{
    emu_stream_t *s;
    emu_count(EMU_CALL_cuStreamBeginCapture_v2);
    if (mode < EMU_CAPTURE_GLOBAL || mode > EMU_CAPTURE_RELAXED) {
        return CUDA_ERROR_INVALID_VALUE;
    }
    pthread_mutex_lock(&emu_lock);
    CUresult rc = emu_stream_resolve_locked(h, "cuStreamBeginCapture_v2", &s);
    if (rc == CUDA_SUCCESS && s->legacy) {
        rc = CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED; /* the legacy stream cannot be captured */
    }
    if (rc == CUDA_SUCCESS && s->capturing) {
        rc = EMU_ILLEGAL_STATE;
    }
    if (rc == CUDA_SUCCESS) {
        s->capture_graph = calloc(1, sizeof(emu_graph_t));
        if (s->capture_graph != NULL) {
            s->capture_graph->magic = EMU_GRAPH_MAGIC;
        }
        s->capturing = 1;
        s->capture_mode = mode;
        s->capture_invalid = 0;
        s->capture_thread = pthread_self();
        thread_captures += mode != EMU_CAPTURE_RELAXED;
        thread_global_captures += mode == EMU_CAPTURE_GLOBAL;
        emu_global_captures += mode == EMU_CAPTURE_GLOBAL;
    }
    pthread_mutex_unlock(&emu_lock);
    return rc;
}

EMU_API CUresult cuStreamEndCapture(void *h, void **graph)
{
    emu_stream_t *s;
    emu_count(EMU_CALL_cuStreamEndCapture);
    pthread_mutex_lock(&emu_lock);
    CUresult rc = emu_stream_resolve_locked(h, "cuStreamEndCapture", &s);
    if (rc == CUDA_SUCCESS && !s->capturing) {
        rc = EMU_ILLEGAL_STATE;
    }
    if (rc == CUDA_SUCCESS) {
        /* the capture must end in the thread that began it (CUDA's rule for non-relaxed modes) */
        s->capturing = 0;
        thread_captures -= s->capture_mode != EMU_CAPTURE_RELAXED;
        thread_global_captures -= s->capture_mode == EMU_CAPTURE_GLOBAL;
        emu_global_captures -= s->capture_mode == EMU_CAPTURE_GLOBAL;
        *graph = s->capture_invalid ? NULL : s->capture_graph;
        if (s->capture_invalid) {
            rc = CUDA_ERROR_STREAM_CAPTURE_INVALIDATED;
            if (s->capture_graph != NULL) {
                emu_graph_free(s->capture_graph);
            }
        } else if (s->capture_graph == NULL) {
            rc = CUDA_ERROR_OUT_OF_MEMORY;
        }
        s->capture_graph = NULL;
    }
    pthread_mutex_unlock(&emu_lock);
    return rc;
}

static emu_graph_t *emu_graph_check(void *h, uint32_t magic)
{
    emu_graph_t *g = h;
    return g != NULL && g->magic == magic ? g : NULL;
}

/* Frees graph h (of kind magic); CUDA_ERROR_INVALID_VALUE for anything else. */
static CUresult emu_graph_destroy(void *h, uint32_t magic)
{
    emu_graph_t *g = emu_graph_check(h, magic);
    if (g == NULL) {
        return CUDA_ERROR_INVALID_VALUE;
    }
    emu_graph_free(g);
    return CUDA_SUCCESS;
}

EMU_API CUresult cuGraphDestroy(void *graph)
{
    emu_count(EMU_CALL_cuGraphDestroy);
    return emu_graph_destroy(graph, EMU_GRAPH_MAGIC);
}

/* An executable graph: a copy of the graph's chain (the graph may be destroyed after). */
EMU_API CUresult cuGraphInstantiateWithFlags(void **exec, void *graph, unsigned long long flags)
{
    emu_count(EMU_CALL_cuGraphInstantiateWithFlags);
    emu_graph_t *g = emu_graph_check(graph, EMU_GRAPH_MAGIC);
    if (g == NULL || exec == NULL || flags != 0) {
        return CUDA_ERROR_INVALID_VALUE;
    }
    emu_graph_t *x = calloc(1, sizeof(*x));
    if (x == NULL) {
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    x->magic = EMU_GRAPH_EXEC_MAGIC;
    for (const emu_op_t *op = g->head; op != NULL; op = op->next) {
        emu_op_t *c = emu_op_clone(op);
        if (c == NULL) {
            emu_graph_free(x);
            return CUDA_ERROR_OUT_OF_MEMORY;
        }
        emu_graph_append(x, c);
    }
    *exec = x;
    return CUDA_SUCCESS;
}

EMU_API CUresult cuGraphExecDestroy(void *exec)
{
    emu_count(EMU_CALL_cuGraphExecDestroy);
    return emu_graph_destroy(exec, EMU_GRAPH_EXEC_MAGIC);
}

/* Queues a copy of every operation of exec on stream h, in order (a launch on a capturing stream
 * is refused here: not needed by the tests). */
EMU_API CUresult cuGraphLaunch(void *exec, void *h)
{
    emu_stream_t *s;
    emu_count(EMU_CALL_cuGraphLaunch);
    emu_graph_t *x = emu_graph_check(exec, EMU_GRAPH_EXEC_MAGIC);
    if (x == NULL) {
        return CUDA_ERROR_INVALID_VALUE;
    }
    pthread_mutex_lock(&emu_lock);
    CUresult rc = emu_stream_resolve_locked(h, "cuGraphLaunch", &s);
    if (rc == CUDA_SUCCESS && (s->capturing || s->legacy)) {
        rc = CUDA_ERROR_NOT_SUPPORTED;
    }
    for (const emu_op_t *op = x->head; rc == CUDA_SUCCESS && op != NULL; op = op->next) {
        emu_op_t *c = emu_op_clone(op);
        rc = c != NULL ? emu_stream_enqueue_locked(s, c, NULL) : CUDA_ERROR_OUT_OF_MEMORY;
    }
    pthread_mutex_unlock(&emu_lock);
    return rc;
}

EMU_API CUresult cuStreamIsCapturing(void *h, int *status)
{
    emu_stream_t *s;
    emu_count(EMU_CALL_cuStreamIsCapturing);
    pthread_mutex_lock(&emu_lock);
    CUresult rc = emu_stream_resolve_locked(h, "cuStreamIsCapturing", &s);
    if (rc == CUDA_SUCCESS && s->legacy) {
        for (emu_stream_t *t = s->ctx->streams; t != NULL; t = t->next_in_ctx) {
            if (t->capturing && !(t->flags & EMU_STREAM_NON_BLOCKING)) {
                rc = CUDA_ERROR_STREAM_CAPTURE_IMPLICIT;
            }
        }
    }
    if (rc == CUDA_SUCCESS) {
        /* CU_STREAM_CAPTURE_STATUS_NONE 0, _ACTIVE 1, _INVALIDATED 2 */
        *status = !s->capturing ? 0 : s->capture_invalid ? 2 : 1;
    }
    pthread_mutex_unlock(&emu_lock);
    return rc;
}

EMU_API CUresult cuThreadExchangeStreamCaptureMode(int *mode)
{
    emu_count(EMU_CALL_cuThreadExchangeStreamCaptureMode);
    if (*mode < EMU_CAPTURE_GLOBAL || *mode > EMU_CAPTURE_RELAXED) {
        return CUDA_ERROR_INVALID_VALUE;
    }
    int old = thread_capture_mode;
    thread_capture_mode = *mode;
    *mode = old;
    return CUDA_SUCCESS;
}

/* ---- events ---- */

static emu_event_t *emu_event_check(void *h)
{
    emu_event_t *e = h;
    return e != NULL && e->magic == EMU_EVENT_MAGIC && e->live ? e : NULL;
}

EMU_API CUresult cuEventCreate(emu_event_t **out, unsigned flags)
{
    emu_count(EMU_CALL_cuEventCreate);
    (void)flags;
    emu_ctx_t *ctx = emu_ctx_current();
    if (ctx == NULL) {
        return CUDA_ERROR_INVALID_CONTEXT;
    }
    emu_event_t *e = calloc(1, sizeof(*e));
    if (e == NULL) {
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    e->magic = EMU_EVENT_MAGIC;
    e->ctx = ctx;
    e->live = 1;
    *out = e;
    return CUDA_SUCCESS;
}

EMU_API CUresult cuEventDestroy_v2(void *h)
{
    emu_count(EMU_CALL_cuEventDestroy_v2);
    emu_event_t *e = emu_event_check(h);
    if (e == NULL) {
        return CUDA_ERROR_INVALID_HANDLE;
    }
    pthread_mutex_lock(&emu_lock);
    e->live = 0; /* kept allocated: a stale handle is an error, not a crash */
    pthread_mutex_unlock(&emu_lock);
    return CUDA_SUCCESS;
}

EMU_API CUresult cuEventRecord(void *h, void *stream)
{
    emu_stream_t *s;
    emu_count(EMU_CALL_cuEventRecord);
    emu_event_t *e = emu_event_check(h);
    emu_op_t *op = emu_op_new(EMU_OP_MARKER);
    if (e == NULL || op == NULL) {
        free(op);
        return e == NULL ? CUDA_ERROR_INVALID_HANDLE : CUDA_ERROR_OUT_OF_MEMORY;
    }
    pthread_mutex_lock(&emu_lock);
    CUresult rc = emu_stream_resolve_locked(stream, "cuEventRecord", &s);
    if (rc != CUDA_SUCCESS) {
        free(op);
        pthread_mutex_unlock(&emu_lock);
        return rc;
    }
    if (s->ctx != e->ctx) {
        pthread_mutex_unlock(&emu_lock);
        emu_fail("event-context",
                 "cuEventRecord of an event of context %p (device %d) on a stream of context %p "
                 "(device %d)",
                 (void *)e->ctx, e->ctx->device, (void *)s->ctx, s->ctx->device);
    }
    int captured = s->capturing;
    rc = emu_stream_enqueue_locked(s, op, NULL);
    if (rc == CUDA_SUCCESS && !captured) {
        e->stream = s;
        e->seq = s->enqueued;
    }
    pthread_mutex_unlock(&emu_lock);
    return rc;
}

EMU_API CUresult cuEventQuery(void *h)
{
    emu_count(EMU_CALL_cuEventQuery);
    emu_event_t *e = emu_event_check(h);
    if (e == NULL) {
        return CUDA_ERROR_INVALID_HANDLE;
    }
    pthread_mutex_lock(&emu_lock);
    CUresult rc =
        e->stream != NULL && e->stream->completed < e->seq ? CUDA_ERROR_NOT_READY : CUDA_SUCCESS;
    pthread_mutex_unlock(&emu_lock);
    return rc;
}

EMU_API CUresult cuEventSynchronize(void *h)
{
    emu_count(EMU_CALL_cuEventSynchronize);
    emu_event_t *e = emu_event_check(h);
    if (e == NULL) {
        return CUDA_ERROR_INVALID_HANDLE;
    }
    pthread_mutex_lock(&emu_lock);
    if (e->stream != NULL) {
        emu_stream_wait_locked(e->stream, e->seq);
    }
    pthread_mutex_unlock(&emu_lock);
    return CUDA_SUCCESS;
}

EMU_API CUresult cuStreamWaitEvent(void *stream, void *h, unsigned flags)
{
    emu_stream_t *s;
    emu_count(EMU_CALL_cuStreamWaitEvent);
    emu_event_t *e = emu_event_check(h);
    emu_op_t *op = emu_op_new(EMU_OP_MARKER);
    if (e == NULL || op == NULL || flags != 0) {
        free(op);
        return op == NULL  ? CUDA_ERROR_OUT_OF_MEMORY
               : e == NULL ? CUDA_ERROR_INVALID_HANDLE
                           : CUDA_ERROR_INVALID_VALUE;
    }
    pthread_mutex_lock(&emu_lock);
    /* the event may belong to another context (CUDA allows it); the stream may not */
    CUresult rc = emu_stream_resolve_locked(stream, "cuStreamWaitEvent", &s);
    if (rc == CUDA_SUCCESS) {
        emu_dep_t dep = {.stream = e->stream, .seq = e->seq};
        rc = emu_stream_enqueue_locked(s, op, &dep);
    } else {
        free(op);
    }
    pthread_mutex_unlock(&emu_lock);
    return rc;
}
