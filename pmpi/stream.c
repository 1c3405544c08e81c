/* Stream-ordered MPI calls: MPICH's MPIX_Stream extension on any MPI (declared in picoll.h).
 *
 * This is the path every enqueued call can take (host or device buffers, any type and op, any
 * placement of the ranks): a call enqueued on a stream communicator becomes, on the CUDA stream,
 *
 *   copies of its device inputs into pinned host memory            (cuMemcpyAsync)
 *   a host function that hands the call to the stream's thread     (cuLaunchHostFunc)
 *   a wait for the call's state word to say "done"                 (cuStreamWaitValue64)
 *   copies of its device outputs back from pinned host memory      (cuMemcpyAsync)
 *
 * The host function only queues the call (it runs once the copies before it are done, and makes
 * no CUDA call: CUDA forbids it there) and sets the state word to "pending"; the stream's progress
 * thread takes the calls in order, runs the blocking MPI call on host memory, through picoll like
 * any other call, then sets the word to "done", which releases the stream. The host function never
 * blocks: host functions of every stream may share one driver thread, and a collective blocked in
 * one could hold up another stream's that a peer waits for; the progress threads (one per stream)
 * have no such limit. The enqueue itself never waits: no stream or context synchronisation, no
 * host barrier.
 *
 * CUDA graph capture: an enqueue on a stream that captures records the same four steps into the
 * graph; nothing of the call is tied to the moment of the enqueue (the host function hands the
 * call over and resets the state word at each execution of the graph), so a graph launched N
 * times performs N calls, each on the inputs of that moment. A captured call keeps its staging
 * memory and state word until MPIX_Stream_free: a graph with enqueued calls must not be launched
 * after its stream is freed.
 *
 * The MPI calls run on the progress thread while the application's threads make their own: a
 * stream communicator needs MPI_THREAD_MULTIPLE (refused with an error otherwise). An MPI error
 * of an enqueued call goes to the communicator's error handler on the progress thread (fatal by
 * default, as the blocking call); with MPI_ERRORS_RETURN it is kept, and the stream's next enqueue
 * and MPIX_Stream_free return it. Either way the stream goes on: it never hangs on a failed call.
 *
 * MPIX_Isend/Irecv_enqueue return a generalized request that only MPIX_Wait(all)_enqueue takes
 * (as MPICH's); the irecv's data goes back to the device after its wait. They cannot be captured.
 *
 * Before all that, a collective of a stream communicator on one node, on any CUDA stream (one the
 * application created, or the legacy or per-thread default stream: issue 49), goes to picoll's
 * kernels on the stream itself where picoll's device selection takes it
 * (pmpi/stream_kernel.c, src/coll/enqueue.c, the workspace made at MPIX_Stream_comm_create):
 * only launches on the stream (buffers of other kinds copied through device memory of picoll's on
 * the stream first), no host function, no wait, no state word; a graph replays them with new
 * epochs (the kernels count them in device memory). The progress thread watches those kernels
 * about once a second for a peer that never comes (picoll_cuda_stream_watch). On a default
 * stream the kernels are ordered as any work there: after what every thread queued on the legacy
 * stream (and on blocking streams, for the legacy one), so the threads of a process that enqueue
 * on different communicators there must do so in the same order on every rank, as on any stream
 * shared by communicators. A communicator of one rank runs no kernel: its collectives are a copy
 * on the stream from the input to the output, or nothing in place (pmpi/stream_kernel.c).
 *
 * Device buffers of the calls the progress thread runs are copied on the stream through pinned
 * host memory, always. Handed to the progress thread as they are (PICOLL_STREAM_DIRECT=1, removed
 * in issue 40), its kernels went on a stream of its own while the application's stream waited at
 * the state word: where the driver maps both streams to one hardware queue (always possible; under
 * MPS often), the kernel queued behind the wait that waited for it, and the job hung
 * (docs/cuda.md). The progress thread has the stream's context current and its capture mode
 * relaxed: an application thread that records a graph in the global mode does not forbid it the
 * driver calls of a call (a copy).
 *
 * This file holds the stream objects and their stream communicators; the other files of the path,
 * by job, are listed in pmpi/stream_int.h.
 */
#pragma GCC visibility push(default)
#include <mpi.h>
#pragma GCC visibility pop

#include "build-config.h"
#include "util/config.h"
#include "util/export.h"
#include "mem/cudrv.h"
#include "pmpi/errors.h"
#include "pmpi/stream_int.h"
#include "core/comm.h"

#include <picoll.h>

#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define STREAM_MAGIC 0x5354524du

static int stream_keyval = MPI_KEYVAL_INVALID;
static pthread_mutex_t keyval_lock = PTHREAD_MUTEX_INITIALIZER;

static int stream_valid(picoll_stream_t s)
{
    return s != NULL && s->magic == STREAM_MAGIC;
}

/* ---- handles ----
 *
 * With picoll's own MPIX_Stream (picoll.h) a handle is the stream object. With the MPI's own
 * (MPICH 4.1 and later: an int), picoll's streams are the entries of a table, with handles just
 * above MPIX_STREAM_NULL (MPIX_STREAM_NULL + 1 + index: in MPICH a stream's kind bits under the
 * "invalid" handle kind, never one of its own streams, and refused with an error by the calls of
 * MPICH's that picoll does not take); any other handle is the MPI's. */
#ifdef PICOLL_MPIX_STREAM

static picoll_stream_t stream_get(MPIX_Stream h)
{
    return stream_valid(h) ? h : NULL;
}

static int stream_handle_new(picoll_stream_t s, MPIX_Stream *h)
{
    *h = s;
    return 0;
}

static void stream_handle_drop(MPIX_Stream h)
{
    (void)h;
}

#else

#define STREAM_HANDLES_MAX 65536
static pthread_mutex_t handles_lock = PTHREAD_MUTEX_INITIALIZER;
static picoll_stream_t *handles;
static long handles_cap;

static long handle_index(MPIX_Stream h)
{
    return (long)((uintptr_t)h - (uintptr_t)MPIX_STREAM_NULL) - 1;
}

static picoll_stream_t stream_get(MPIX_Stream h)
{
    long i = handle_index(h);
    picoll_stream_t s = NULL;
    pthread_mutex_lock(&handles_lock);
    if (i >= 0 && i < handles_cap) {
        s = handles[i];
    }
    pthread_mutex_unlock(&handles_lock);
    return stream_valid(s) ? s : NULL;
}

static int stream_handle_new(picoll_stream_t s, MPIX_Stream *h)
{
    long i = 0;
    pthread_mutex_lock(&handles_lock);
    while (i < handles_cap && handles[i] != NULL) {
        i++;
    }
    if (i == handles_cap) {
        long cap = handles_cap ? 2 * handles_cap : 16;
        picoll_stream_t *more =
            cap <= STREAM_HANDLES_MAX ? realloc(handles, (size_t)cap * sizeof(*handles)) : NULL;
        if (more == NULL) {
            pthread_mutex_unlock(&handles_lock);
            return -1;
        }
        memset(more + handles_cap, 0, (size_t)(cap - handles_cap) * sizeof(*handles));
        handles = more;
        handles_cap = cap;
    }
    handles[i] = s;
    pthread_mutex_unlock(&handles_lock);
    *h = (MPIX_Stream)((uintptr_t)MPIX_STREAM_NULL + 1 + (uintptr_t)i);
    return 0;
}

#ifdef PICOLL_STREAM_MPI
/* Whether h is of picoll's kind: a stream of picoll's, live or not; never the MPI's. */
static int stream_handle_mine(MPIX_Stream h)
{
    long i = handle_index(h);
    return i >= 0 && i < STREAM_HANDLES_MAX;
}
#endif

static void stream_handle_drop(MPIX_Stream h)
{
    long i = handle_index(h);
    pthread_mutex_lock(&handles_lock);
    if (i >= 0 && i < handles_cap) {
        handles[i] = NULL;
    }
    pthread_mutex_unlock(&handles_lock);
}

#endif

picoll_stream_t picoll_stream_of_comm(MPI_Comm comm)
{
    void *v = NULL;
    int flag = 0;
    if (stream_keyval != MPI_KEYVAL_INVALID && comm != MPI_COMM_NULL) {
        PMPI_Comm_get_attr(comm, stream_keyval, &v, &flag);
    }
    return flag && stream_valid(v) ? v : NULL;
}

/* ---- stream objects ---- */

static int driver_ready(void)
{
    return picoll_cudrv_load() == PICOLL_OK && picoll_cu.stream_wait_value64 != NULL &&
           picoll_cu.event_create != NULL && picoll_cu.event_record != NULL &&
           picoll_cu.event_synchronize != NULL && picoll_cu.event_query != NULL &&
           picoll_cu.event_destroy != NULL && picoll_cu.launch_host_func != NULL;
}

PICOLL_EXPORT int MPIX_Stream_create(MPI_Info info, MPIX_Stream *stream)
{
    picoll_cu_stream_t cu = NULL;

    if (stream == NULL) {
        return picoll_raise_stream(MPI_COMM_NULL, MPI_ERR_ARG,
                                   "picoll: MPIX_Stream_create: stream is NULL");
    }
#ifdef PICOLL_STREAM_MPI
    if (!picoll_stream_info_is_cuda(info)) {
        return PMPIX_Stream_create(info, stream); /* the MPI's own kind of stream */
    }
#endif
    *stream = MPIX_STREAM_NULL;
    int rc = picoll_stream_info_handle(info, &cu);
    if (rc != MPI_SUCCESS) {
        return rc;
    }
    if (!driver_ready()) {
        return picoll_raise_stream(MPI_COMM_NULL, MPI_ERR_OTHER,
                                   "picoll: MPIX_Stream_create: no CUDA driver with stream memory "
                                   "operations and events (%s)",
                                   picoll_cudrv_why());
    }

    picoll_stream_t s = calloc(1, sizeof(*s));
    if (s == NULL) {
        return picoll_raise_stream(MPI_COMM_NULL, MPI_ERR_NO_MEM,
                                   "picoll: MPIX_Stream_create: out of memory");
    }
    s->cu = cu;
    /* the stream's context: the driver says (cuStreamGetCtx), else the current one */
    if (picoll_cu.stream_get_ctx == NULL || picoll_cu.stream_get_ctx(cu, &s->ctx) != 0) {
        picoll_cu.ctx_get_current(&s->ctx);
    }
    if (s->ctx == NULL) {
        free(s);
        return picoll_raise_stream(MPI_COMM_NULL, MPI_ERR_ARG,
                                   "picoll: MPIX_Stream_create: the stream's CUDA context is "
                                   "unknown (no current context)");
    }
    s->magic = STREAM_MAGIC;
    s->error = MPI_SUCCESS;
    pthread_mutex_init(&s->lock, NULL);
    pthread_mutex_init(&s->enq_lock, NULL);
    s->kept_end = &s->kept;
    pthread_cond_init(&s->cond, NULL);
    if (stream_handle_new(s, stream) != 0) { /* (only a table's can fail: nothing started) */
        pthread_mutex_destroy(&s->lock);
        pthread_mutex_destroy(&s->enq_lock);
        pthread_cond_destroy(&s->cond);
        free(s);
        return picoll_raise_stream(MPI_COMM_NULL, MPI_ERR_NO_MEM,
                                   "picoll: MPIX_Stream_create: out of stream handles");
    }
    return MPI_SUCCESS;
}

PICOLL_EXPORT int MPIX_Stream_free(MPIX_Stream *stream)
{
    picoll_stream_t s = stream != NULL ? stream_get(*stream) : NULL;
#ifdef PICOLL_STREAM_MPI
    if (stream != NULL && !stream_handle_mine(*stream)) {
        return PMPIX_Stream_free(stream);
    }
#endif
    if (s == NULL) {
        return picoll_raise_stream(MPI_COMM_NULL, MPI_ERR_ARG,
                                   "picoll: MPIX_Stream_free: not a stream");
    }
    pthread_mutex_lock(&s->lock);
    if (s->ncomms > 0) {
        int n = s->ncomms;
        pthread_mutex_unlock(&s->lock);
        return picoll_raise_stream(MPI_COMM_NULL, MPI_ERR_ARG,
                                   "picoll: MPIX_Stream_free: %d stream communicator(s) still use "
                                   "the stream: free them first",
                                   n);
    }
    int up = s->thread_up;
    pthread_mutex_unlock(&s->lock);
    picoll_cu_context_t popped;
    int entered = picoll_cu.ctx_push_current(s->ctx) == 0;
    /* the stream must have passed every call enqueued (not captured) before the thread stops:
     * their host functions hand them over only then */
    if (entered) {
        picoll_stream_retire(s, 1);
    }
    pthread_mutex_lock(&s->lock);
    s->stop = 1;
    pthread_cond_broadcast(&s->cond);
    int err = __atomic_load_n(&s->error, __ATOMIC_ACQUIRE);
    pthread_mutex_unlock(&s->lock);
    if (up) {
        pthread_join(s->thread, NULL); /* it drains the queue first */
    }
    for (op_t *o = s->kept, *next; o != NULL; o = next) { /* the captured calls */
        next = o->next_kept;
        free(o);
    }
    if (entered) {
        picoll_stream_stage_free(s);
        picoll_cu.ctx_pop_current(&popped);
    }
    stream_handle_drop(*stream);
    s->magic = 0;
    pthread_mutex_destroy(&s->lock);
    pthread_mutex_destroy(&s->enq_lock);
    pthread_cond_destroy(&s->cond);
    free(s);
    *stream = MPIX_STREAM_NULL;
    return err;
}

/* The first collective of a new stream communicator, on every rank, here on the creating thread
 * (a few bytes of host memory): picoll's context of the communicator is made now, not by the
 * progress thread at its first call while the application's stream waits for that call. */
static void stream_warm(MPI_Comm comm)
{
    unsigned host[4] = {0, 0, 0, 0};
    MPI_Allreduce(MPI_IN_PLACE, host, 4, MPI_UNSIGNED, MPI_BOR, comm);
}

static int comm_attr_delete(MPI_Comm comm, int keyval, void *value, void *extra)
{
    picoll_stream_t s = value;
    (void)comm, (void)keyval, (void)extra;
    if (stream_valid(s)) {
        pthread_mutex_lock(&s->lock);
        s->ncomms--;
        pthread_mutex_unlock(&s->lock);
    }
    return MPI_SUCCESS;
}

PICOLL_EXPORT int MPIX_Stream_comm_create(MPI_Comm comm, MPIX_Stream handle, MPI_Comm *newcomm)
{
    int provided = MPI_THREAD_SINGLE, rc;
    picoll_stream_t stream = stream_get(handle);
#ifdef PICOLL_STREAM_MPI
    if (!stream_handle_mine(handle)) {
        return PMPIX_Stream_comm_create(comm, handle, newcomm); /* the MPI's stream, or none */
    }
#endif
    if (newcomm == NULL) {
        return picoll_raise_stream(comm, MPI_ERR_ARG,
                                   "picoll: MPIX_Stream_comm_create: newcomm is NULL");
    }
    if (handle != MPIX_STREAM_NULL && stream == NULL) {
        return picoll_raise_stream(comm, MPI_ERR_ARG,
                                   "picoll: MPIX_Stream_comm_create: stream is not a stream "
                                   "(MPIX_Stream_create) nor MPIX_STREAM_NULL");
    }
    PMPI_Query_thread(&provided);
    if (stream != NULL && provided != MPI_THREAD_MULTIPLE) {
        return picoll_raise_stream(comm, MPI_ERR_OTHER,
                                   "picoll: MPIX_Stream_comm_create: picoll runs a stream's MPI "
                                   "calls on a thread of its own: initialise MPI with "
                                   "MPI_Init_thread(MPI_THREAD_MULTIPLE) (provided: %d)",
                                   provided);
    }
    pthread_mutex_lock(&keyval_lock);
    if (stream_keyval == MPI_KEYVAL_INVALID) {
        PMPI_Comm_create_keyval(MPI_COMM_NULL_COPY_FN, comm_attr_delete, &stream_keyval, NULL);
    }
    pthread_mutex_unlock(&keyval_lock);
    if ((rc = PMPI_Comm_dup(comm, newcomm)) != MPI_SUCCESS) {
        return rc;
    }
    if (stream == NULL) {
        return MPI_SUCCESS;
    }
    pthread_mutex_lock(&stream->lock);
    stream->ncomms++;
    if (!stream->thread_up) {
        stream->thread_up =
            pthread_create(&stream->thread, NULL, picoll_stream_progress, stream) == 0;
    }
    int up = stream->thread_up;
    pthread_mutex_unlock(&stream->lock);
    PMPI_Comm_set_attr(*newcomm, stream_keyval, stream);
    if (!up) {
        return picoll_raise_stream(comm, MPI_ERR_OTHER,
                                   "picoll: MPIX_Stream_comm_create: the stream's progress thread "
                                   "could not start");
    }
    stream_warm(*newcomm);
#ifdef PICOLL_HAVE_CUDA
    /* collective: every rank asks, a rank that cannot says no; a default stream's handle takes
     * the kernels too (issue 49: torch's calls on its default stream were staged before) */
    picoll_comm_stream_enable(*newcomm, stream->ctx, stream->cu);
#endif
    return MPI_SUCCESS;
}

PICOLL_EXPORT int picoll_stream_query(MPIX_Stream handle, long *staged, long *host, long *device,
                                      long *captured, long *runs, long *kernels)
{
    picoll_stream_t stream = stream_get(handle);
    if (stream == NULL) {
        return MPI_ERR_ARG;
    }
    long *out[] = {staged, host, device, captured, runs, kernels};
    long val[] = {__atomic_load_n(&stream->staged, __ATOMIC_RELAXED),
                  __atomic_load_n(&stream->host, __ATOMIC_RELAXED),
                  __atomic_load_n(&stream->device, __ATOMIC_RELAXED),
                  __atomic_load_n(&stream->captured, __ATOMIC_RELAXED),
                  __atomic_load_n(&stream->runs, __ATOMIC_RELAXED),
                  __atomic_load_n(&stream->kernels, __ATOMIC_RELAXED)};
    for (size_t i = 0; i < sizeof(out) / sizeof(out[0]); i++) {
        if (out[i] != NULL) {
            *out[i] = val[i];
        }
    }
    return MPI_SUCCESS;
}
