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
 * Before all that, a collective of a stream communicator on one node, on a stream the application
 * created, goes to picoll's kernels on the stream itself where picoll's device selection takes it
 * (enq_kernels, src/coll/enqueue.c, the workspace made at MPIX_Stream_comm_create): only launches
 * on the stream (buffers of other kinds copied through device memory of picoll's on the stream
 * first), no host function, no wait, no state word; a graph replays them with new epochs (the
 * kernels count them in device memory). The progress thread watches those kernels about once a
 * second for a peer that never comes (picoll_cuda_stream_watch).
 *
 * With PICOLL_STREAM_DIRECT=1 (default 0: it hung on an H100, docs/cuda.md), collectives on device
 * buffers skip the copies on a stream the application created: the progress thread hands the
 * device buffers themselves to the blocking call (picoll's device
 * kernels where every rank can, else picoll's staging, as for any blocking call), while the
 * stream waits at the state word, so nothing of the stream touches the buffers meanwhile. The
 * progress thread's own work goes on its per-thread stream, which synchronises with the legacy
 * stream only: on the legacy stream (handle 0 or CU_STREAM_LEGACY) or a per-thread stream handle
 * it would wait behind the wait that waits for it, so there the device buffers are staged on the
 * stream as above. The progress thread has the stream's context current and its capture mode
 * relaxed: an application thread that records a graph in the global mode does not forbid it the
 * driver calls of a collective (an allocation, a copy).
 */
#pragma GCC visibility push(default)
#include <mpi.h>
#pragma GCC visibility pop

#include "build-config.h"
#include "util/config.h"
#include "util/export.h"
#include "util/log.h"
#include "mem/cudrv.h"
#include "mem/memkind.h"
#include "pmpi/classify.h"
#include "pmpi/errors.h"
#include "core/comm.h"
#include "coll/algs.h"

#include <picoll.h>

#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#ifdef PICOLL_MPIX_STREAM

#define STREAM_MAGIC 0x5354524du

typedef enum {
    OP_SEND,
    OP_RECV,
    OP_ALLREDUCE,
    OP_ALLGATHER,
    OP_ALLTOALL,
    OP_REDUCE_SCATTER_BLOCK,
    OP_BCAST,
    OP_ISEND,
    OP_IRECV,
    OP_WAIT
} op_kind_t;

/* A request of MPIX_Isend_enqueue / MPIX_Irecv_enqueue: the application holds a generalized
 * request (user), completed and freed by the progress thread when the MPIX_Wait(all)_enqueue of it
 * runs; inner is the MPI's request of the call on host memory. */
typedef struct sreq {
    struct sreq *next;
    MPI_Request user, inner;
    MPI_Comm comm;
    struct staging *out; /* an irecv's staging, copied back at its wait; NULL: none */
    void *user_out;
    size_t out_bytes;
} sreq_t;

/* A pinned host buffer of the stream, free for another call once its event (recorded after the
 * last copy that used it) has completed; a captured call's is its own for good. */
typedef struct staging {
    struct staging *next;
    void *buf;
    size_t size;
    picoll_cu_event_t last_use;
    void *user;  /* a pinned hop of a kernel call (pageable host memory): the application's
                  * buffer its host functions copy from or to (hop_in, hop_out), and the bytes */
    size_t n;
    int pending; /* last_use recorded: busy until it completes */
    int taken;   /* handed to an enqueue not yet committed, or to a captured call */
    int device;  /* device memory of the stream's context (a kernel call's copy of a buffer of
                  * another kind), not pinned host memory */
} staging_t;

/* State words: pinned, mapped memory, one 8-byte word a call, in slabs of a page. */
#define CELLS_PER_SLAB 512
typedef struct slab {
    struct slab *next;
    uint64_t *words;
    picoll_cu_deviceptr_t dev;
    unsigned char used[CELLS_PER_SLAB];
} slab_t;

/* One enqueued call, as the progress thread runs it (buffers already the host ones). */
typedef struct op {
    struct op *next;      /* in the progress queue */
    struct op *next_kept; /* in the stream's list of calls to free (retiring or captured) */
    struct picoll_mpix_stream *s;
    op_kind_t kind;
    const void *sbuf;
    void *rbuf;
    int scount, rcount, peer, tag;
    MPI_Datatype stype, rtype;
    MPI_Op mop;
    MPI_Comm comm;
    MPI_Status *status;
    sreq_t *sreq;         /* isend, irecv, wait */
    slab_t *slab;
    int cell;
    volatile uint64_t *state; /* 0: pending, 1: done */
    picoll_cu_deviceptr_t state_dev;
    int captured;
    picoll_cu_event_t retired; /* not captured: recorded after the call's last step */
} op_t;

struct picoll_mpix_stream {
    uint32_t magic;
    picoll_cu_stream_t cu;
    picoll_cu_context_t ctx;
    pthread_mutex_t lock;
    pthread_cond_t cond;
    op_t *head, *tail;             /* handed over by the host functions, not yet run */
    int stop, thread_up;
    pthread_t thread;
    int ncomms;                    /* stream communicators made with it, not yet freed */
    int error;                     /* the first MPI error of an enqueued call; MPI_SUCCESS */
    int created;                   /* a stream the application created (not the legacy or a
                                    * per-thread stream's handle): picoll's kernels may go there */
    int direct_ok;                 /* an application-created stream: device buffers of collectives
                                    * go to the progress thread as they are */
    long staged, host, device;     /* calls so far: how their buffers went (staged on the stream,
                                    * host memory, device memory handed over as it is) */
    long captured;                 /* of them, recorded into a CUDA graph */
    long kernels;                  /* of them, picoll's kernels launched on the stream itself */
    picoll_cu_deviceptr_t warm;    /* a few device bytes for the stream communicators' first
                                    * collective (stream_warm); 0: none */
    long runs;                     /* calls the progress thread ran (graph replays included) */
    pthread_mutex_t enq_lock;      /* one enqueue at a time: the lists below, the staging */
    staging_t *staging;
    slab_t *slabs;
    op_t *kept, **kept_end;        /* calls not yet freed, oldest first (the enqueuing threads'
                                    * list) */
};

static int stream_keyval = MPI_KEYVAL_INVALID;
static pthread_mutex_t keyval_lock = PTHREAD_MUTEX_INITIALIZER;

static int stream_valid(MPIX_Stream s)
{
    return s != NULL && s->magic == STREAM_MAGIC;
}

/* ---- MPIX_Info_set_hex: the value's bytes, two lowercase hex digits each, in memory order ---- */

PICOLL_EXPORT int MPIX_Info_set_hex(MPI_Info info, const char *key, const void *value,
                                    int value_size)
{
    static const char digits[] = "0123456789abcdef";
    if (key == NULL || value == NULL || value_size <= 0 || value_size > 256) {
        return picoll_raise_stream(MPI_COMM_NULL, MPI_ERR_ARG,
                                   "picoll: MPIX_Info_set_hex: key, value and value_size (1 to "
                                   "256 bytes) are needed, value_size is %d", value_size);
    }
    char text[2 * 256 + 1];
    const unsigned char *b = value;
    for (int i = 0; i < value_size; i++) {
        text[2 * i] = digits[b[i] >> 4];
        text[2 * i + 1] = digits[b[i] & 15];
    }
    text[2 * value_size] = '\0';
    return PMPI_Info_set(info, key, text);
}

static int hex_digit(char c)
{
    return c >= '0' && c <= '9' ? c - '0'
           : c >= 'a' && c <= 'f' ? c - 'a' + 10
           : c >= 'A' && c <= 'F' ? c - 'A' + 10 : -1;
}

/* ---- the progress thread ---- */

static int run_op(op_t *o)
{
    switch (o->kind) {
    case OP_SEND: return MPI_Send(o->sbuf, o->scount, o->stype, o->peer, o->tag, o->comm);
    case OP_RECV:
        return MPI_Recv(o->rbuf, o->rcount, o->rtype, o->peer, o->tag, o->comm, o->status);
    case OP_ALLREDUCE:
        return MPI_Allreduce(o->sbuf, o->rbuf, o->rcount, o->rtype, o->mop, o->comm);
    case OP_ALLGATHER:
        return MPI_Allgather(o->sbuf, o->scount, o->stype, o->rbuf, o->rcount, o->rtype, o->comm);
    case OP_ALLTOALL:
        return MPI_Alltoall(o->sbuf, o->scount, o->stype, o->rbuf, o->rcount, o->rtype, o->comm);
    case OP_REDUCE_SCATTER_BLOCK:
        return MPI_Reduce_scatter_block(o->sbuf, o->rbuf, o->rcount, o->rtype, o->mop, o->comm);
    case OP_BCAST: return MPI_Bcast(o->rbuf, o->rcount, o->rtype, o->peer, o->comm);
    case OP_ISEND:
        return MPI_Isend(o->sbuf, o->scount, o->stype, o->peer, o->tag, o->comm, &o->sreq->inner);
    case OP_IRECV:
        return MPI_Irecv(o->rbuf, o->rcount, o->rtype, o->peer, o->tag, o->comm, &o->sreq->inner);
    case OP_WAIT: {
        MPI_Request user = o->sreq->user;
        int rc = MPI_Wait(&o->sreq->inner, o->status);
        /* the application's handle: complete, then free it (its variable was set to
         * MPI_REQUEST_NULL by the enqueue, as MPI_Wait does) */
        PMPI_Grequest_complete(user);
        PMPI_Wait(&user, MPI_STATUS_IGNORE);
        return rc;
    }
    }
    return MPI_ERR_INTERN;
}

/* The host function of a call, on the stream once the work before it is done: hands the call to
 * the progress thread. No CUDA call, no wait. */
static void post(void *arg)
{
    op_t *o = arg;
    MPIX_Stream s = o->s;
    *o->state = 0;
    pthread_mutex_lock(&s->lock);
    o->next = NULL;
    if (s->tail != NULL) {
        s->tail->next = o;
    } else {
        s->head = o;
    }
    s->tail = o;
    pthread_cond_broadcast(&s->cond);
    pthread_mutex_unlock(&s->lock);
}

static void *progress(void *arg)
{
    MPIX_Stream s = arg;
    /* the stream's context for the device buffers handed over as they are; never forbidden a
     * driver call by another thread's global-mode capture */
    picoll_cu.ctx_set_current(s->ctx);
    if (picoll_cu.thread_exchange_capture_mode != NULL) {
        int mode = PICOLL_CU_STREAM_CAPTURE_MODE_RELAXED;
        picoll_cu.thread_exchange_capture_mode(&mode);
    }
    pthread_mutex_lock(&s->lock);
    for (;;) {
        while (s->head == NULL && !s->stop) {
            /* about once a second, a look at the kernels of the stream communicators (every
             * stream's: cheap) for a peer that never arrives */
            struct timespec until;
            timespec_get(&until, TIME_UTC); /* C11: the realtime clock the wait takes */
            until.tv_sec += 1;
            if (pthread_cond_timedwait(&s->cond, &s->lock, &until) != 0) {
                pthread_mutex_unlock(&s->lock);
                picoll_cuda_stream_watch();
                pthread_mutex_lock(&s->lock);
            }
        }
        if (s->head == NULL) {
            break;
        }
        op_t *o = s->head;
        s->head = o->next;
        if (s->head == NULL) {
            s->tail = NULL;
        }
        pthread_mutex_unlock(&s->lock);
        int rc = run_op(o);
        pthread_mutex_lock(&s->lock);
        if (rc != MPI_SUCCESS && s->error == MPI_SUCCESS) {
            s->error = rc;
        }
        s->runs++;
        /* the stream goes on (its copies back, the application's work) whatever happened: a
         * stream never hangs on a failed call */
        __atomic_store_n(o->state, 1, __ATOMIC_RELEASE);
    }
    pthread_mutex_unlock(&s->lock);
    return NULL;
}

/* ---- state words, and freeing the calls the stream has passed ---- */

/* A free state word (caller holds the stream's context current); 0 on success. */
static int cell_get(MPIX_Stream s, op_t *o)
{
    slab_t *b;
    for (b = s->slabs; b != NULL; b = b->next) {
        for (int i = 0; i < CELLS_PER_SLAB; i++) {
            if (!b->used[i]) {
                goto found;
            }
        }
    }
    b = calloc(1, sizeof(*b));
    if (b == NULL) {
        return -1;
    }
    void *words = NULL;
    if (picoll_cu.mem_host_alloc(&words, CELLS_PER_SLAB * sizeof(uint64_t),
                                 PICOLL_CU_MEMHOSTALLOC_PORTABLE |
                                     PICOLL_CU_MEMHOSTALLOC_DEVICEMAP) != 0 ||
        picoll_cu.mem_host_get_device_pointer(&b->dev, words, 0) != 0) {
        if (words != NULL) {
            picoll_cu.mem_free_host(words);
        }
        free(b);
        return -1;
    }
    b->words = words;
    b->next = s->slabs;
    s->slabs = b;
found:
    for (int i = 0; i < CELLS_PER_SLAB; i++) {
        if (!b->used[i]) {
            b->used[i] = 1;
            o->slab = b;
            o->cell = i;
            o->state = b->words + i;
            o->state_dev = b->dev + (picoll_cu_deviceptr_t)i * sizeof(uint64_t);
            *o->state = 0;
            return 0;
        }
    }
    return -1;
}

/* Frees the calls (not captured) whose last step the stream has passed, oldest first, up to the
 * first it has not (one query per enqueue in the steady state); with wait, waits for every one.
 * Caller holds the stream's context current. */
static void retire(MPIX_Stream s, int wait)
{
    op_t **link = &s->kept;
    while (*link != NULL) {
        op_t *o = *link;
        if (o->captured) {
            link = &o->next_kept;
            continue;
        }
        if (wait) {
            picoll_cu.event_synchronize(o->retired);
        } else if (picoll_cu.event_query(o->retired) != 0) {
            break; /* the stream passes its calls in order: the later ones are not done either */
        }
        picoll_cu.event_destroy(o->retired);
        o->slab->used[o->cell] = 0;
        *link = o->next_kept;
        if (*link == NULL) {
            s->kept_end = link;
        }
        free(o);
    }
}

/* Frees a staging buffer's memory and the buffer (its event destroyed by the caller). */
static void staging_release(staging_t *g, int device)
{
    if (g->buf != NULL && device) {
        picoll_cu.mem_free((picoll_cu_deviceptr_t)(uintptr_t)g->buf);
    } else if (g->buf != NULL) {
        picoll_cu.mem_free_host(g->buf);
    }
    free(g);
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
    char type[64] = "", value[2 * sizeof(void *) + 2] = "";
    int flag = 0;
    picoll_cu_stream_t cu = NULL;

    if (stream == NULL) {
        return picoll_raise_stream(MPI_COMM_NULL, MPI_ERR_ARG,
                                   "picoll: MPIX_Stream_create: stream is NULL");
    }
    *stream = MPIX_STREAM_NULL;
    if (info != MPI_INFO_NULL) {
        PMPI_Info_get(info, "type", (int)sizeof(type) - 1, type, &flag);
    }
    if (!flag) {
        return picoll_raise_stream(MPI_COMM_NULL, MPI_ERR_ARG,
                                   "picoll: MPIX_Stream_create: the info has no key \"type\": "
                                   "picoll's streams are CUDA streams (type \"cudaStream_t\", "
                                   "value set with MPIX_Info_set_hex)");
    }
    if (strcmp(type, "cudaStream_t") != 0 && strcmp(type, "CUstream") != 0) {
        return picoll_raise_stream(MPI_COMM_NULL, MPI_ERR_ARG,
                                   "picoll: MPIX_Stream_create: info type \"%s\": picoll supports "
                                   "\"cudaStream_t\" only", type);
    }
    PMPI_Info_get(info, "value", (int)sizeof(value) - 1, value, &flag);
    if (!flag || strlen(value) != 2 * sizeof(void *)) {
        return picoll_raise_stream(MPI_COMM_NULL, MPI_ERR_ARG,
                                   "picoll: MPIX_Stream_create: info \"value\" must hold the "
                                   "stream handle (%zu bytes, MPIX_Info_set_hex)", sizeof(void *));
    }
    unsigned char bytes[sizeof(void *)];
    for (size_t i = 0; i < sizeof(void *); i++) {
        int hi = hex_digit(value[2 * i]), lo = hex_digit(value[2 * i + 1]);
        if (hi < 0 || lo < 0) {
            return picoll_raise_stream(MPI_COMM_NULL, MPI_ERR_ARG,
                                       "picoll: MPIX_Stream_create: info \"value\" \"%s\" is not "
                                       "hexadecimal", value);
        }
        bytes[i] = (unsigned char)(hi << 4 | lo);
    }
    memcpy(&cu, bytes, sizeof(cu));
    if (!driver_ready()) {
        return picoll_raise_stream(MPI_COMM_NULL, MPI_ERR_OTHER,
                                   "picoll: MPIX_Stream_create: no CUDA driver with stream memory "
                                   "operations and events (%s)", picoll_cudrv_why());
    }

    MPIX_Stream s = calloc(1, sizeof(*s));
    if (s == NULL) {
        return picoll_raise_stream(MPI_COMM_NULL, MPI_ERR_NO_MEM,
                                   "picoll: MPIX_Stream_create: out of memory");
    }
    s->cu = cu;
    s->created = cu != NULL && cu != PICOLL_CU_STREAM_LEGACY && cu != PICOLL_CU_STREAM_PER_THREAD;
    s->direct_ok = picoll_cfg.stream_direct && s->created;
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
    *stream = s;
    return MPI_SUCCESS;
}

PICOLL_EXPORT int MPIX_Stream_free(MPIX_Stream *stream)
{
    if (stream == NULL || !stream_valid(*stream)) {
        return picoll_raise_stream(MPI_COMM_NULL, MPI_ERR_ARG,
                                   "picoll: MPIX_Stream_free: not a stream");
    }
    MPIX_Stream s = *stream;
    pthread_mutex_lock(&s->lock);
    if (s->ncomms > 0) {
        int n = s->ncomms;
        pthread_mutex_unlock(&s->lock);
        return picoll_raise_stream(MPI_COMM_NULL, MPI_ERR_ARG,
                                   "picoll: MPIX_Stream_free: %d stream communicator(s) still use "
                                   "the stream: free them first", n);
    }
    int up = s->thread_up;
    pthread_mutex_unlock(&s->lock);
    picoll_cu_context_t popped;
    int entered = picoll_cu.ctx_push_current(s->ctx) == 0;
    /* the stream must have passed every call enqueued (not captured) before the thread stops:
     * their host functions hand them over only then */
    if (entered) {
        retire(s, 1);
    }
    pthread_mutex_lock(&s->lock);
    s->stop = 1;
    pthread_cond_broadcast(&s->cond);
    int err = s->error;
    pthread_mutex_unlock(&s->lock);
    if (up) {
        pthread_join(s->thread, NULL); /* it drains the queue first */
    }
    for (op_t *o = s->kept, *next; o != NULL; o = next) { /* the captured calls */
        next = o->next_kept;
        free(o);
    }
    if (entered) {
        for (staging_t *g = s->staging, *next; g != NULL; g = next) {
            next = g->next;
            picoll_cu.event_synchronize(g->last_use);
            picoll_cu.event_destroy(g->last_use);
            staging_release(g, g->device);
        }
        for (slab_t *b = s->slabs, *next; b != NULL; b = next) {
            next = b->next;
            picoll_cu.mem_free_host(b->words);
            free(b);
        }
        if (s->warm != 0) {
            picoll_cu.mem_free(s->warm);
        }
        picoll_cu.ctx_pop_current(&popped);
    }
    s->magic = 0;
    pthread_mutex_destroy(&s->lock);
    pthread_mutex_destroy(&s->enq_lock);
    pthread_cond_destroy(&s->cond);
    free(s);
    *stream = MPIX_STREAM_NULL;
    return err;
}

/* The first collective of a new stream communicator, on every rank, here on the creating thread:
 * an allreduce of a few bytes of device memory of the stream's context (host memory where none
 * could be had, or the stream takes no device buffers as they are: then every rank falls back
 * together), which makes the communicator's device workspace now. Made by the progress thread at
 * its first call instead, the workspace's allocations and module load would run while the
 * application's stream waits at that call's state word, and a driver call that synchronises
 * implicitly would wait for the stream that waits for it. */
static void stream_warm(MPIX_Stream s, MPI_Comm comm)
{
    unsigned host[4] = {0, 0, 0, 0};
    void *buf = host;
    picoll_cu_context_t popped;
    int entered = s->direct_ok && picoll_cu.ctx_push_current(s->ctx) == 0;
    if (entered && s->warm == 0 && picoll_cu.mem_alloc(&s->warm, sizeof(host)) != 0) {
        s->warm = 0;
    }
    if (entered && s->warm != 0) {
        buf = (void *)(uintptr_t)s->warm; /* its bits matter to nobody */
    }
    MPI_Allreduce(MPI_IN_PLACE, buf, 4, MPI_UNSIGNED, MPI_BOR, comm);
    if (entered) {
        picoll_cu.ctx_pop_current(&popped);
    }
}

static int comm_attr_delete(MPI_Comm comm, int keyval, void *value, void *extra)
{
    MPIX_Stream s = value;
    (void)comm, (void)keyval, (void)extra;
    if (stream_valid(s)) {
        pthread_mutex_lock(&s->lock);
        s->ncomms--;
        pthread_mutex_unlock(&s->lock);
    }
    return MPI_SUCCESS;
}

PICOLL_EXPORT int MPIX_Stream_comm_create(MPI_Comm comm, MPIX_Stream stream, MPI_Comm *newcomm)
{
    int provided = MPI_THREAD_SINGLE, rc;
    if (newcomm == NULL) {
        return picoll_raise_stream(comm, MPI_ERR_ARG,
                                   "picoll: MPIX_Stream_comm_create: newcomm is NULL");
    }
    if (stream != MPIX_STREAM_NULL && !stream_valid(stream)) {
        return picoll_raise_stream(comm, MPI_ERR_ARG,
                                   "picoll: MPIX_Stream_comm_create: stream is not a stream "
                                   "(MPIX_Stream_create) nor MPIX_STREAM_NULL");
    }
    PMPI_Query_thread(&provided);
    if (stream != MPIX_STREAM_NULL && provided != MPI_THREAD_MULTIPLE) {
        return picoll_raise_stream(comm, MPI_ERR_OTHER,
                                   "picoll: MPIX_Stream_comm_create: picoll runs a stream's MPI "
                                   "calls on a thread of its own: initialise MPI with "
                                   "MPI_Init_thread(MPI_THREAD_MULTIPLE) (provided: %d)", provided);
    }
    pthread_mutex_lock(&keyval_lock);
    if (stream_keyval == MPI_KEYVAL_INVALID) {
        PMPI_Comm_create_keyval(MPI_COMM_NULL_COPY_FN, comm_attr_delete, &stream_keyval, NULL);
    }
    pthread_mutex_unlock(&keyval_lock);
    if ((rc = PMPI_Comm_dup(comm, newcomm)) != MPI_SUCCESS) {
        return rc;
    }
    if (stream == MPIX_STREAM_NULL) {
        return MPI_SUCCESS;
    }
    pthread_mutex_lock(&stream->lock);
    stream->ncomms++;
    if (!stream->thread_up) {
        stream->thread_up = pthread_create(&stream->thread, NULL, progress, stream) == 0;
    }
    int up = stream->thread_up;
    pthread_mutex_unlock(&stream->lock);
    PMPI_Comm_set_attr(*newcomm, stream_keyval, stream);
    if (!up) {
        return picoll_raise_stream(comm, MPI_ERR_OTHER,
                                   "picoll: MPIX_Stream_comm_create: the stream's progress thread "
                                   "could not start");
    }
    stream_warm(stream, *newcomm);
#ifdef PICOLL_HAVE_CUDA
    /* collective: every rank asks, a rank that cannot says no (a legacy or per-thread stream
     * handle: kernels there would be ordered with every thread's work of the process) */
    picoll_comm_stream_enable(*newcomm, stream->created ? stream->ctx : NULL, stream->cu);
#endif
    return MPI_SUCCESS;
}

PICOLL_EXPORT int picoll_stream_query(MPIX_Stream stream, long *staged, long *host, long *device,
                                      long *captured, long *runs, long *kernels)
{
    if (!stream_valid(stream)) {
        return MPI_ERR_ARG;
    }
    long *out[] = {staged, host, device, captured, runs, kernels};
    pthread_mutex_lock(&stream->lock);
    long val[] = {stream->staged, stream->host, stream->device, stream->captured, stream->runs,
                  stream->kernels};
    pthread_mutex_unlock(&stream->lock);
    for (size_t i = 0; i < sizeof(out) / sizeof(out[0]); i++) {
        if (out[i] != NULL) {
            *out[i] = val[i];
        }
    }
    return MPI_SUCCESS;
}

/* ---- enqueue ---- */

/* Bytes from buf that count elements of type span (buf + true_lb .. the last element's end);
 * -1 where they reach below buf (a negative lower bound: not staged). */
static long long type_span(int count, MPI_Datatype type)
{
    MPI_Aint lb, extent, tlb, textent;
    if (count <= 0) {
        return 0;
    }
    PMPI_Type_get_extent(type, &lb, &extent);
    PMPI_Type_get_true_extent(type, &tlb, &textent);
    long long first = (long long)tlb, last = (long long)(count - 1) * extent + tlb + textent;
    if (extent < 0 || first < 0) {
        return -1;
    }
    return last;
}

/* A pinned buffer (device: device memory) of at least bytes, free now (its last copies done); NULL on failure. Caller
 * holds the stream's context current. */
static staging_t *staging_get(MPIX_Stream s, size_t bytes, int device)
{
    for (staging_t *g = s->staging; g != NULL; g = g->next) {
        if (!g->taken && g->size >= bytes && g->device == device &&
            (!g->pending || picoll_cu.event_query(g->last_use) == 0)) {
            g->pending = 0;
            g->taken = 1;
            return g;
        }
    }
    staging_t *g = calloc(1, sizeof(*g));
    if (g == NULL) {
        return NULL;
    }
    size_t size = bytes < 4096 ? 4096 : bytes;
    picoll_cu_deviceptr_t d = 0;
    int rc = device ? picoll_cu.mem_alloc(&d, size)
                    : picoll_cu.mem_host_alloc(&g->buf, size, PICOLL_CU_MEMHOSTALLOC_PORTABLE);
    if (device && rc == 0) {
        g->buf = (void *)(uintptr_t)d;
    }
    if (rc != 0 || picoll_cu.event_create(&g->last_use, PICOLL_CU_EVENT_DISABLE_TIMING) != 0) {
        staging_release(g, device);
        return NULL;
    }
    g->device = device;
    g->size = size;
    g->taken = 1;
    g->next = s->staging;
    s->staging = g;
    return g;
}

typedef struct {
    const char *fn;
    MPI_Comm comm;
    MPIX_Stream s;
    op_t *o;
    staging_t *in, *out;  /* staging of the send and receive sides; NULL: used in place */
    void *user_out;       /* the device buffer the receive staging goes back to */
    size_t out_bytes;
    int staged;
    int device;           /* device memory handed to the progress thread as it is */
    int mode, mode_set;   /* the thread's capture mode, relaxed while a capture is recorded */
    struct {              /* a kernel call's sides that are not device memory of the stream's
                           * context (enq_kernel_side) */
        staging_t *d, *h; /* their copy in device memory; the pinned hop of pageable memory */
        void *user;
        size_t bytes;
        int out;          /* copied back after the kernels */
    } ks[2];
    int nks;
} enq_t;

static int enq_fail(enq_t *e, int code, const char *what);

/* The stream of comm, or an MPI error naming fn. On success the stream's context is current
 * (enq_commit or enq_fail puts the caller's back). */
static int enq_begin(enq_t *e, const char *fn, MPI_Comm comm)
{
    void *v = NULL;
    int flag = 0, err, capture = PICOLL_CU_STREAM_CAPTURE_STATUS_NONE;
    memset(e, 0, sizeof(*e));
    e->fn = fn;
    e->comm = comm;
    if (stream_keyval != MPI_KEYVAL_INVALID && comm != MPI_COMM_NULL) {
        PMPI_Comm_get_attr(comm, stream_keyval, &v, &flag);
    }
    if (!flag || !stream_valid(v)) {
        return picoll_raise_stream(comm, MPI_ERR_COMM,
                                   "picoll: %s: the communicator has no stream (make it with "
                                   "MPIX_Stream_comm_create and a CUDA stream)", fn);
    }
    e->s = v;
    pthread_mutex_lock(&e->s->lock);
    err = e->s->error;
    e->s->error = MPI_SUCCESS;
    pthread_mutex_unlock(&e->s->lock);
    if (err != MPI_SUCCESS) {
        return err; /* an earlier enqueued call's error, raised on the progress thread already */
    }
    e->o = calloc(1, sizeof(op_t));
    if (e->o == NULL) {
        return picoll_raise_stream(comm, MPI_ERR_NO_MEM, "picoll: %s: out of memory", fn);
    }
    e->o->s = e->s;
    e->o->comm = comm;
    if (picoll_cu.ctx_push_current(e->s->ctx) != 0) {
        free(e->o);
        return picoll_raise_stream(comm, MPI_ERR_OTHER,
                                   "picoll: %s: the stream's CUDA context cannot be made current",
                                   fn);
    }
    pthread_mutex_lock(&e->s->enq_lock); /* until enq_leave */
    if (picoll_cu.stream_is_capturing(e->s->cu, &capture) != 0 ||
        capture > PICOLL_CU_STREAM_CAPTURE_STATUS_ACTIVE) {
        return enq_fail(e, MPI_ERR_OTHER, "the stream's CUDA graph capture was invalidated");
    }
    e->o->captured = capture == PICOLL_CU_STREAM_CAPTURE_STATUS_ACTIVE;
    if (e->o->captured) {
        /* allocations while this thread records a graph: relaxed, so that they neither fail nor
         * break the capture */
        e->mode = PICOLL_CU_STREAM_CAPTURE_MODE_RELAXED;
        e->mode_set = picoll_cu.thread_exchange_capture_mode(&e->mode) == 0;
    } else {
        retire(e->s, 0);
    }
    if (cell_get(e->s, e->o) != 0) {
        return enq_fail(e, MPI_ERR_NO_MEM, "no mapped pinned memory for the call's state word");
    }
    return MPI_SUCCESS;
}

/* Puts back what enq_begin changed for the calling thread. */
static void enq_leave(enq_t *e)
{
    picoll_cu_context_t popped;
    pthread_mutex_unlock(&e->s->enq_lock);
    if (e->mode_set) {
        picoll_cu.thread_exchange_capture_mode(&e->mode);
    }
    picoll_cu.ctx_pop_current(&popped);
}

static int enq_fail(enq_t *e, int code, const char *what)
{
    if (e->in != NULL) {
        e->in->taken = 0;
    }
    if (e->out != NULL) {
        e->out->taken = 0;
    }
    if (e->o->slab != NULL) {
        e->o->slab->used[e->o->cell] = 0;
    }
    enq_leave(e);
    free(e->o);
    return picoll_raise_stream(e->comm, code, "picoll: %s: %s", e->fn, what);
}

/* Whether e's call takes device buffers as they are (a collective, on a stream the application
 * created: see the top of this file). */
static int enq_direct(const enq_t *e)
{
    switch (e->o->kind) {
    case OP_ALLREDUCE:
    case OP_ALLGATHER:
    case OP_ALLTOALL:
    case OP_REDUCE_SCATTER_BLOCK:
    case OP_BCAST: return e->s->direct_ok;
    default: return 0;
    }
}

/* The buffer the MPI call uses for user buffer buf (bytes of it significant): buf itself unless
 * it is device memory of a call that does not take it as it is (enq_direct), then a staging
 * buffer, filled on the stream from buf where copy_in. Device memory of another context than the
 * stream's is refused. */
static int enq_side(enq_t *e, const void *buf, long long bytes, int copy_in, staging_t **g,
                    void **host, const char *arg)
{
    picoll_meminfo_t m;
    char why[160];
    *g = NULL;
    *host = (void *)buf;
    if (buf == MPI_IN_PLACE || buf == NULL || bytes == 0) {
        return MPI_SUCCESS;
    }
    picoll_memkind_query(buf, &m);
    if (m.kind != PICOLL_MEM_DEVICE) {
        return MPI_SUCCESS; /* host, pinned or managed: the progress thread reads it in place */
    }
    if (m.context != (void *)e->s->ctx) {
        snprintf(why, sizeof(why), "%s is memory of CUDA device %d, in another context than the "
                 "stream's", arg, m.device);
        return enq_fail(e, MPI_ERR_BUFFER, why);
    }
    if (enq_direct(e)) {
        e->device = 1; /* the blocking call gets the device buffer itself */
        return MPI_SUCCESS;
    }
    if (bytes < 0) {
        snprintf(why, sizeof(why), "%s: a datatype with a negative lower bound is not staged",
                 arg);
        return enq_fail(e, MPI_ERR_TYPE, why);
    }
    if ((*g = staging_get(e->s, (size_t)bytes, 0)) == NULL) {
        return enq_fail(e, MPI_ERR_NO_MEM, "no pinned staging memory");
    }
    if (copy_in && picoll_cu.memcpy_async((picoll_cu_deviceptr_t)(uintptr_t)(*g)->buf,
                                          (picoll_cu_deviceptr_t)(uintptr_t)buf, (size_t)bytes,
                                          e->s->cu) != 0) {
        return enq_fail(e, MPI_ERR_OTHER, "a copy on the stream failed");
    }
    *host = (*g)->buf;
    e->staged = 1;
    return MPI_SUCCESS;
}

/* Queue e's call after its copies in: the host function that hands it over, the stream's wait for
 * it, the copy back; then what frees it once the stream has passed it (a captured call: kept). */
static int enq_commit(enq_t *e)
{
    MPIX_Stream s = e->s;
    op_t *o = e->o;
    int rc = picoll_cu.launch_host_func(s->cu, post, o);
    if (rc == 0) {
        rc = picoll_cu.stream_wait_value64(s->cu, o->state_dev, 1,
                                           PICOLL_CU_STREAM_WAIT_VALUE_GEQ);
    }
    if (rc == 0 && e->out != NULL) {
        rc = picoll_cu.memcpy_async((picoll_cu_deviceptr_t)(uintptr_t)e->user_out,
                                    (picoll_cu_deviceptr_t)(uintptr_t)e->out->buf, e->out_bytes,
                                    s->cu);
    }
    if (rc == 0 && !o->captured) {
        rc = picoll_cu.event_create(&o->retired, PICOLL_CU_EVENT_DISABLE_TIMING);
        if (rc == 0 && (rc = picoll_cu.event_record(o->retired, s->cu)) != 0) {
            picoll_cu.event_destroy(o->retired);
        }
    }
    if (rc != 0) {
        char why[96];
        /* a host function already queued would hand over a call that is gone: the stream is
         * unusable then, as CUDA's own state after a failed launch */
        snprintf(why, sizeof(why), "queuing on the CUDA stream failed (CUresult %d)", rc);
        return enq_fail(e, MPI_ERR_OTHER, why);
    }
    /* the staging is free again once this point of the stream is passed (a captured call keeps
     * its own) */
    staging_t *used[2] = {e->in, e->out};
    for (int i = 0; i < 2; i++) {
        if (used[i] != NULL && !o->captured) {
            if (picoll_cu.event_record(used[i]->last_use, s->cu) == 0) {
                used[i]->pending = 1;
                used[i]->taken = 0;
            } /* else it stays taken: never reused */
        }
    }
    o->next_kept = NULL;
    *s->kept_end = o;
    s->kept_end = &o->next_kept;
    enq_leave(e);
    pthread_mutex_lock(&s->lock);
    s->staged += e->staged;
    s->device += e->device && !e->staged;
    s->host += !e->staged && !e->device;
    s->captured += o->captured;
    pthread_mutex_unlock(&s->lock);
    return MPI_SUCCESS;
}

/* ---- picoll's kernels on the stream itself ---- */

/* Host functions of a kernel call on pageable host memory: the copies between the application's
 * buffer and the pinned hop (no CUDA call). */
static void hop_in(void *arg)
{
    staging_t *h = arg;
    memcpy(h->buf, h->user, h->n);
}

static void hop_out(void *arg)
{
    staging_t *h = arg;
    memcpy(h->user, h->buf, h->n);
}

/* The device buffer a kernel call uses for user buffer buf (bytes of it): buf itself where it is
 * device memory of the stream's context, else a device copy of the stream's, filled on the stream
 * first where in (pinned or managed memory by a copy, pageable memory through a pinned hop that a
 * host function fills) and copied back after the kernels where out (enq_kernel_back). */
static int enq_kernel_side(enq_t *e, void *buf, size_t bytes, int in, int out, void **dev,
                           const char *arg)
{
    picoll_meminfo_t m;
    char why[160];
    MPIX_Stream s = e->s;
    *dev = buf;
    if (buf == MPI_IN_PLACE || buf == NULL || bytes == 0) {
        return MPI_SUCCESS;
    }
    picoll_memkind_query(buf, &m);
    if (m.kind == PICOLL_MEM_DEVICE && m.context == (void *)s->ctx) {
        return MPI_SUCCESS;
    }
    if (m.kind == PICOLL_MEM_DEVICE) {
        snprintf(why, sizeof(why), "%s is memory of CUDA device %d, in another context than the "
                 "stream's", arg, m.device);
        return enq_fail(e, MPI_ERR_BUFFER, why);
    }
    int k = e->nks++;
    memset(&e->ks[k], 0, sizeof(e->ks[k]));
    e->ks[k].user = buf;
    e->ks[k].bytes = bytes;
    e->ks[k].out = out;
    if ((e->ks[k].d = staging_get(s, bytes, 1)) == NULL ||
        (m.kind == PICOLL_MEM_HOST && (e->ks[k].h = staging_get(s, bytes, 0)) == NULL)) {
        return enq_fail(e, MPI_ERR_NO_MEM, "no device memory for a copy of a host buffer");
    }
    picoll_cu_deviceptr_t d = (picoll_cu_deviceptr_t)(uintptr_t)e->ks[k].d->buf;
    staging_t *h = e->ks[k].h;
    int rc = 0;
    if (h != NULL) {
        h->user = buf;
        h->n = bytes;
    }
    if (in && h != NULL) {
        rc = picoll_cu.launch_host_func(s->cu, hop_in, h);
        if (rc == 0) {
            rc = picoll_cu.memcpy_async(d, (picoll_cu_deviceptr_t)(uintptr_t)h->buf, bytes, s->cu);
        }
    } else if (in) {
        rc = picoll_cu.memcpy_async(d, (picoll_cu_deviceptr_t)(uintptr_t)buf, bytes, s->cu);
    }
    if (rc != 0) {
        return enq_fail(e, MPI_ERR_OTHER, "a copy on the stream failed");
    }
    *dev = e->ks[k].d->buf;
    return MPI_SUCCESS;
}

/* After the kernels: the copies back, the copies' memory free again once the stream passed them
 * (a captured call keeps its own); the call's state word and record are not needed. */
static int enq_kernel_back(enq_t *e)
{
    MPIX_Stream s = e->s;
    int captured = e->o->captured;
    for (int k = 0; k < e->nks; k++) {
        picoll_cu_deviceptr_t d = (picoll_cu_deviceptr_t)(uintptr_t)e->ks[k].d->buf;
        staging_t *h = e->ks[k].h;
        int rc = 0;
        if (e->ks[k].out && h != NULL) {
            rc = picoll_cu.memcpy_async((picoll_cu_deviceptr_t)(uintptr_t)h->buf, d,
                                        e->ks[k].bytes, s->cu);
            if (rc == 0) {
                rc = picoll_cu.launch_host_func(s->cu, hop_out, h);
            }
        } else if (e->ks[k].out) {
            rc = picoll_cu.memcpy_async((picoll_cu_deviceptr_t)(uintptr_t)e->ks[k].user, d,
                                        e->ks[k].bytes, s->cu);
        }
        if (rc != 0) {
            /* the kernels are queued: the peers go on; this rank's result is lost */
            return enq_fail(e, MPI_ERR_OTHER, "the copy back on the stream failed");
        }
    }
    for (int k = 0; k < e->nks && !captured; k++) {
        staging_t *used[2] = {e->ks[k].d, e->ks[k].h};
        for (int i = 0; i < 2; i++) {
            if (used[i] != NULL && picoll_cu.event_record(used[i]->last_use, s->cu) == 0) {
                used[i]->pending = 1;
                used[i]->taken = 0;
            }
        }
    }
    e->o->slab->used[e->o->cell] = 0;
    free(e->o);
    e->o = NULL;
    enq_leave(e);
    pthread_mutex_lock(&s->lock);
    s->kernels++;
    s->captured += captured;
    pthread_mutex_unlock(&s->lock);
    return MPI_SUCCESS;
}

/* Bytes of count elements of type where they lie contiguously from the buffer's start; -1 where
 * they do not (holes, a lower bound or extent of their own). */
static long long contig_bytes(int count, MPI_Datatype type)
{
    int size = 0;
    MPI_Aint lb, extent, tlb, textent;
    if (count <= 0) {
        return 0;
    }
    PMPI_Type_size(type, &size);
    PMPI_Type_get_extent(type, &lb, &extent);
    PMPI_Type_get_true_extent(type, &tlb, &textent);
    if (tlb != 0 || textent != size || extent != size) {
        return -1;
    }
    return (long long)count * size;
}

/* Runs e's collective on picoll's kernels on the stream where its communicator has them and they
 * take the call (picoll_enq_select: the same answer on every rank); returns 1 and *rc then, 0
 * where the call goes on the usual way. a: the call (its buffers the application's); sbytes and
 * rbytes: the send and receive buffers' bytes (-1: not contiguous); recv_in: the receive buffer is
 * also read (in place); send_out: bcast's root, whose buffer is only read. */
static int enq_kernels(enq_t *e, picoll_enq_args_t *a, long long sbytes, long long rbytes,
                       int recv_in, int *rc)
{
    picoll_comm_t *ctx = picoll_g.active ? picoll_comm_get(e->comm) : NULL;
    if (ctx == NULL || ctx->coll.cuda_enq == NULL) {
        return 0;
    }
    int alg = picoll_enq_select(&ctx->coll, a);
    if (alg == PICOLL_ALG_FALLBACK) {
        return 0;
    }
    if (sbytes < 0 || rbytes < 0) {
        /* the others launch: this rank cannot follow */
        *rc = enq_fail(e, MPI_ERR_TYPE, "a datatype that is not contiguous, where the stream "
                                        "communicator runs picoll's kernels (set "
                                        "PICOLL_STREAM_KERNELS=0 on every rank)");
        return 1;
    }
    void *sdev = (void *)a->sendbuf, *rdev = a->recvbuf;
    if (a->sendbuf != MPI_IN_PLACE &&
        (*rc = enq_kernel_side(e, (void *)a->sendbuf, (size_t)sbytes, 1, 0, &sdev, "sendbuf")) !=
            MPI_SUCCESS) {
        return 1;
    }
    int recv_out = !(a->coll == PICOLL_COLL_BCAST && recv_in);
    if ((*rc = enq_kernel_side(e, a->recvbuf, (size_t)rbytes, recv_in, recv_out, &rdev,
                               "recvbuf")) != MPI_SUCCESS) {
        return 1;
    }
    a->sendbuf = sdev;
    a->recvbuf = rdev;
    if (picoll_enq_run(&ctx->coll, a, alg) != PICOLL_OK) {
        *rc = enq_fail(e, MPI_ERR_INTERN, "picoll's kernels could not be queued");
        return 1;
    }
    *rc = enq_kernel_back(e);
    return 1;
}

/* The buffers of the call: a send side (sendbuf, scount elements of stype; MPI_IN_PLACE
 * allowed) and a receive side (recvbuf, rcount of rtype, read in first where recv_in says);
 * sets the call's buffers, types and counts (which the caller may then change for the MPI call:
 * the counts here are those of the whole buffers). */
static int enq_buffers(enq_t *e, const void *sendbuf, int scount, MPI_Datatype stype,
                       void *recvbuf, int rcount, MPI_Datatype rtype, int recv_in)
{
    void *hs, *hr;
    long long sb = type_span(scount, stype), rb = type_span(rcount, rtype);
    int rc = enq_side(e, sendbuf, sb, 1, &e->in, &hs, "sendbuf");
    if (rc != MPI_SUCCESS) {
        return rc;
    }
    if ((rc = enq_side(e, recvbuf, rb, recv_in, &e->out, &hr, "recvbuf")) != MPI_SUCCESS) {
        return rc;
    }
    if (e->out != NULL) {
        e->user_out = recvbuf;
        e->out_bytes = (size_t)rb;
    }
    e->o->sbuf = hs;
    e->o->scount = scount;
    e->o->stype = stype;
    e->o->rbuf = hr;
    e->o->rcount = rcount;
    e->o->rtype = rtype;
    return MPI_SUCCESS;
}

PICOLL_EXPORT int MPIX_Allreduce_enqueue(const void *sendbuf, void *recvbuf, int count,
                                         MPI_Datatype datatype, MPI_Op op, MPI_Comm comm)
{
    enq_t e;
    int rc = enq_begin(&e, "MPIX_Allreduce_enqueue", comm);
    if (rc != MPI_SUCCESS) {
        return rc;
    }
    e.o->kind = OP_ALLREDUCE;
    e.o->mop = op;
    picoll_enq_args_t a = {.coll = PICOLL_COLL_ALLREDUCE, .sendbuf = sendbuf, .recvbuf = recvbuf,
                           .count = (size_t)(count < 0 ? 0 : count),
                           .dtype = picoll_classify_dtype(datatype), .op = picoll_classify_op(op)};
    long long bytes = (long long)a.count * (long long)picoll_dtype_size(a.dtype);
    if (a.dtype != PICOLL_DT_NONE &&
        enq_kernels(&e, &a, bytes, bytes, sendbuf == MPI_IN_PLACE, &rc)) {
        return rc;
    }
    rc = enq_buffers(&e, sendbuf, count, datatype, recvbuf, count, datatype,
                     sendbuf == MPI_IN_PLACE);
    return rc != MPI_SUCCESS ? rc : enq_commit(&e);
}

PICOLL_EXPORT int MPIX_Reduce_scatter_block_enqueue(const void *sendbuf, void *recvbuf,
                                                    int recvcount, MPI_Datatype datatype,
                                                    MPI_Op op, MPI_Comm comm)
{
    enq_t e;
    int size = 1;
    int rc = enq_begin(&e, "MPIX_Reduce_scatter_block_enqueue", comm);
    if (rc != MPI_SUCCESS) {
        return rc;
    }
    PMPI_Comm_size(comm, &size);
    e.o->kind = OP_REDUCE_SCATTER_BLOCK;
    e.o->mop = op;
    /* in place: the input (recvcount * size elements) is in recvbuf */
    int in_place = sendbuf == MPI_IN_PLACE;
    picoll_enq_args_t a = {.coll = PICOLL_COLL_REDUCE_SCATTER_BLOCK, .sendbuf = sendbuf,
                           .recvbuf = recvbuf, .count = (size_t)(recvcount < 0 ? 0 : recvcount),
                           .dtype = picoll_classify_dtype(datatype), .op = picoll_classify_op(op)};
    long long piece = (long long)a.count * (long long)picoll_dtype_size(a.dtype);
    if (a.dtype != PICOLL_DT_NONE &&
        enq_kernels(&e, &a, piece * size, in_place ? piece * size : piece, in_place, &rc)) {
        return rc;
    }
    rc = enq_buffers(&e, sendbuf, in_place ? 0 : recvcount * size, datatype, recvbuf,
                     in_place ? recvcount * size : recvcount, datatype, in_place);
    if (rc != MPI_SUCCESS) {
        return rc;
    }
    e.o->rcount = recvcount;
    return enq_commit(&e);
}

/* allgather, alltoall: the receive side holds size blocks; in place, the input is in it */
static int enq_blocks(const char *fn, op_kind_t kind, const void *sendbuf, int sendcount,
                      MPI_Datatype sendtype, void *recvbuf, int recvcount, MPI_Datatype recvtype,
                      MPI_Comm comm)
{
    enq_t e;
    int size = 1;
    int rc = enq_begin(&e, fn, comm);
    if (rc != MPI_SUCCESS) {
        return rc;
    }
    PMPI_Comm_size(comm, &size);
    e.o->kind = kind;
    int in_place = sendbuf == MPI_IN_PLACE;
    int sblocks = kind == OP_ALLTOALL ? size : 1;
    /* the path by the block's bytes (the same on every rank: the type signatures match); a
     * type that is not contiguous here (-1) cannot follow the others onto the kernels */
    int tsize = 0;
    PMPI_Type_size(recvtype, &tsize);
    long long block = contig_bytes(recvcount, recvtype);
    picoll_enq_args_t a = {.coll = kind == OP_ALLTOALL ? PICOLL_COLL_ALLTOALL
                                                       : PICOLL_COLL_ALLGATHER,
                           .sendbuf = sendbuf, .recvbuf = recvbuf,
                           .count = recvcount < 0 ? 0 : (size_t)recvcount * (size_t)tsize,
                           .dtype = PICOLL_DT_NONE};
    long long sb = in_place ? 0 : contig_bytes(sendcount * sblocks, sendtype);
    if (enq_kernels(&e, &a, sb, block < 0 ? -1 : block * size, in_place, &rc)) {
        return rc;
    }
    rc = enq_buffers(&e, sendbuf, in_place ? 0 : sendcount * sblocks, sendtype, recvbuf,
                     recvcount * size, recvtype, in_place);
    if (rc != MPI_SUCCESS) {
        return rc;
    }
    /* the MPI call takes the counts per block */
    e.o->scount = sendcount;
    e.o->rcount = recvcount;
    return enq_commit(&e);
}

PICOLL_EXPORT int MPIX_Allgather_enqueue(const void *sendbuf, int sendcount,
                                         MPI_Datatype sendtype, void *recvbuf, int recvcount,
                                         MPI_Datatype recvtype, MPI_Comm comm)
{
    return enq_blocks("MPIX_Allgather_enqueue", OP_ALLGATHER, sendbuf, sendcount, sendtype,
                      recvbuf, recvcount, recvtype, comm);
}

PICOLL_EXPORT int MPIX_Alltoall_enqueue(const void *sendbuf, int sendcount, MPI_Datatype sendtype,
                                        void *recvbuf, int recvcount, MPI_Datatype recvtype,
                                        MPI_Comm comm)
{
    return enq_blocks("MPIX_Alltoall_enqueue", OP_ALLTOALL, sendbuf, sendcount, sendtype, recvbuf,
                      recvcount, recvtype, comm);
}

PICOLL_EXPORT int MPIX_Bcast_enqueue(void *buffer, int count, MPI_Datatype datatype, int root,
                                     MPI_Comm comm)
{
    enq_t e;
    int me = 0;
    int rc = enq_begin(&e, "MPIX_Bcast_enqueue", comm);
    if (rc != MPI_SUCCESS) {
        return rc;
    }
    PMPI_Comm_rank(comm, &me);
    e.o->kind = OP_BCAST;
    e.o->peer = root;
    int tsize = 0;
    PMPI_Type_size(datatype, &tsize);
    long long bytes = contig_bytes(count, datatype);
    picoll_enq_args_t a = {.coll = PICOLL_COLL_BCAST, .sendbuf = MPI_IN_PLACE, .recvbuf = buffer,
                           .count = count < 0 ? 0 : (size_t)count * (size_t)tsize,
                           .dtype = PICOLL_DT_NONE, .root = root};
    if (enq_kernels(&e, &a, 0, bytes, me == root, &rc)) {
        return rc;
    }
    /* the root's buffer is read (copied in, not back); the others' written (copied back) */
    rc = me == root ? enq_buffers(&e, buffer, count, datatype, NULL, 0, datatype, 0)
                    : enq_buffers(&e, NULL, 0, datatype, buffer, count, datatype, 0);
    if (rc != MPI_SUCCESS) {
        return rc;
    }
    if (me == root) {
        e.o->rbuf = (void *)e.o->sbuf;
    }
    e.o->rcount = count;
    e.o->rtype = datatype;
    return enq_commit(&e);
}

/* The start of a point-to-point enqueue: the stream, the call's kind and peer. */
static int enq_p2p(enq_t *e, const char *fn, op_kind_t kind, MPI_Comm comm, int peer, int tag)
{
    int rc = enq_begin(e, fn, comm);
    if (rc == MPI_SUCCESS) {
        e->o->kind = kind;
        e->o->peer = peer;
        e->o->tag = tag;
    }
    return rc;
}

PICOLL_EXPORT int MPIX_Send_enqueue(const void *buf, int count, MPI_Datatype datatype, int dest,
                                    int tag, MPI_Comm comm)
{
    enq_t e;
    int rc = enq_p2p(&e, "MPIX_Send_enqueue", OP_SEND, comm, dest, tag);
    if (rc != MPI_SUCCESS) {
        return rc;
    }
    rc = enq_buffers(&e, buf, count, datatype, NULL, 0, datatype, 0);
    return rc != MPI_SUCCESS ? rc : enq_commit(&e);
}

PICOLL_EXPORT int MPIX_Recv_enqueue(void *buf, int count, MPI_Datatype datatype, int source,
                                    int tag, MPI_Comm comm, MPI_Status *status)
{
    enq_t e;
    int rc = enq_p2p(&e, "MPIX_Recv_enqueue", OP_RECV, comm, source, tag);
    if (rc != MPI_SUCCESS) {
        return rc;
    }
    /* the status is written when the call runs, not before the stream gets there (MPICH's rule:
     * it must stay valid until then); a shorter message leaves the rest of buf as it was */
    e.o->status = status;
    rc = enq_buffers(&e, NULL, 0, datatype, buf, count, datatype, 1);
    return rc != MPI_SUCCESS ? rc : enq_commit(&e);
}

/* ---- nonblocking point to point ---- */

static sreq_t *sreqs; /* the requests made and not yet waited for (enqueued) */
static pthread_mutex_t sreq_lock = PTHREAD_MUTEX_INITIALIZER;

static int sreq_query(void *extra, MPI_Status *status)
{
    (void)extra;
    PMPI_Status_set_elements(status, MPI_BYTE, 0);
    PMPI_Status_set_cancelled(status, 0);
    status->MPI_SOURCE = MPI_UNDEFINED;
    status->MPI_TAG = MPI_UNDEFINED;
    return MPI_SUCCESS;
}

static int sreq_free(void *extra)
{
    free(extra);
    return MPI_SUCCESS;
}

static int sreq_cancel(void *extra, int complete)
{
    (void)extra, (void)complete;
    return MPI_SUCCESS;
}

/* The isend or irecv enqueued in e, its request returned in *request. Not capturable: its request
 * lives from one enqueue to another. */
static int enq_start(enq_t *e, MPI_Request *request)
{
    if (request == NULL) {
        return enq_fail(e, MPI_ERR_REQUEST, "request is NULL");
    }
    if (e->o->captured) {
        return enq_fail(e, MPI_ERR_OTHER, "not capturable in a CUDA graph (its request outlives "
                                          "the enqueue)");
    }
    sreq_t *q = calloc(1, sizeof(*q));
    if (q == NULL) {
        return enq_fail(e, MPI_ERR_NO_MEM, "out of memory");
    }
    q->comm = e->comm;
    q->inner = MPI_REQUEST_NULL;
    if (PMPI_Grequest_start(sreq_query, sreq_free, sreq_cancel, q, &q->user) != MPI_SUCCESS) {
        free(q);
        return enq_fail(e, MPI_ERR_OTHER, "no generalized request");
    }
    /* an irecv's data goes back to the device at its wait: its staging stays taken until then
     * (enq_commit releases only what e names) */
    q->out = e->out;
    q->user_out = e->user_out;
    q->out_bytes = e->out_bytes;
    e->out = NULL;
    e->o->sreq = q;
    int rc = enq_commit(e);
    if (rc != MPI_SUCCESS) {
        return rc;
    }
    pthread_mutex_lock(&sreq_lock);
    q->next = sreqs;
    sreqs = q;
    pthread_mutex_unlock(&sreq_lock);
    *request = q->user;
    return MPI_SUCCESS;
}

PICOLL_EXPORT int MPIX_Isend_enqueue(const void *buf, int count, MPI_Datatype datatype, int dest,
                                     int tag, MPI_Comm comm, MPI_Request *request)
{
    enq_t e;
    int rc = enq_p2p(&e, "MPIX_Isend_enqueue", OP_ISEND, comm, dest, tag);
    if (rc != MPI_SUCCESS) {
        return rc;
    }
    rc = enq_buffers(&e, buf, count, datatype, NULL, 0, datatype, 0);
    return rc != MPI_SUCCESS ? rc : enq_start(&e, request);
}

PICOLL_EXPORT int MPIX_Irecv_enqueue(void *buf, int count, MPI_Datatype datatype, int source,
                                     int tag, MPI_Comm comm, MPI_Request *request)
{
    enq_t e;
    int rc = enq_p2p(&e, "MPIX_Irecv_enqueue", OP_IRECV, comm, source, tag);
    if (rc != MPI_SUCCESS) {
        return rc;
    }
    rc = enq_buffers(&e, NULL, 0, datatype, buf, count, datatype, 1);
    return rc != MPI_SUCCESS ? rc : enq_start(&e, request);
}

PICOLL_EXPORT int MPIX_Wait_enqueue(MPI_Request *request, MPI_Status *status)
{
    sreq_t *q = NULL, **link;
    enq_t e;
    if (request == NULL || *request == MPI_REQUEST_NULL) {
        return MPI_SUCCESS; /* as MPI_Wait */
    }
    pthread_mutex_lock(&sreq_lock);
    for (link = &sreqs; *link != NULL; link = &(*link)->next) {
        if (memcmp(&(*link)->user, request, sizeof(MPI_Request)) == 0) {
            q = *link;
            *link = q->next;
            break;
        }
    }
    pthread_mutex_unlock(&sreq_lock);
    if (q == NULL) {
        return picoll_raise_stream(MPI_COMM_NULL, MPI_ERR_REQUEST,
                                   "picoll: MPIX_Wait_enqueue: not a request of "
                                   "MPIX_Isend_enqueue or MPIX_Irecv_enqueue (or waited for "
                                   "already)");
    }
    int rc = enq_begin(&e, "MPIX_Wait_enqueue", q->comm);
    if (rc != MPI_SUCCESS) {
        return rc;
    }
    if (e.o->captured) {
        return enq_fail(&e, MPI_ERR_OTHER, "not capturable in a CUDA graph");
    }
    e.o->kind = OP_WAIT;
    e.o->sreq = q;
    e.o->status = status;
    if (q->out != NULL) { /* the irecv's data back to the device, after the wait */
        e.out = q->out;
        e.user_out = q->user_out;
        e.out_bytes = q->out_bytes;
        e.staged = 1;
    }
    *request = MPI_REQUEST_NULL;
    return enq_commit(&e);
}

PICOLL_EXPORT int MPIX_Waitall_enqueue(int count, MPI_Request array_of_requests[],
                                       MPI_Status array_of_statuses[])
{
    for (int i = 0; i < count; i++) {
        int rc = MPIX_Wait_enqueue(&array_of_requests[i], array_of_statuses == MPI_STATUSES_IGNORE
                                                               ? MPI_STATUS_IGNORE
                                                               : &array_of_statuses[i]);
        if (rc != MPI_SUCCESS) {
            return rc;
        }
    }
    return MPI_SUCCESS;
}

#endif /* PICOLL_MPIX_STREAM */
