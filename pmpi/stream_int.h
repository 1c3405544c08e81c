/* Stream-ordered MPI calls (MPIX_Stream, MPIX_*_enqueue): what their files share. The design is
 * at the top of pmpi/stream.c; the files, by job:
 *
 *   pmpi/stream.c          stream objects, stream communicators (their attribute), the counters
 *   pmpi/stream_info.c     the info keys of a stream (MPIX_Info_set_hex, the handle they hold)
 *   pmpi/stream_thread.c   the progress thread, and the host function that hands it a call
 *   pmpi/stream_stage.c    the stream's memory: state words, staging buffers, freeing the calls
 *   pmpi/stream_enqueue.c  the steps of an enqueue: begin, the buffers, commit (or fail)
 *   pmpi/stream_kernel.c   a collective on picoll's kernels on the stream itself
 *   pmpi/stream_coll.c     the collective enqueues
 *   pmpi/stream_p2p.c      the point-to-point enqueues, blocking and not
 *
 * Private to these files: none of it is exported from libpicoll.so. */
#ifndef PICOLL_PMPI_STREAM_INT_H
#define PICOLL_PMPI_STREAM_INT_H

#include <mpi.h>

#include "build-config.h"
#include "coll/dispatch.h"
#include "mem/cudrv.h"

#include <picoll.h>

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

/* On an MPI with MPIX_Stream of its own and its PMPIX_ entry points (MPICH 4.1 and later):
 * streams, stream communicators, requests and calls that are not picoll's go to the MPI. */
#if !defined(PICOLL_MPIX_STREAM) && defined(HAVE_PMPIX_STREAM_CREATE)
#define PICOLL_STREAM_MPI 1
#endif

/* In an entry point MPICH also has: the MPI's own call where comm is no stream communicator of
 * picoll's. */
#ifdef PICOLL_STREAM_MPI
#define PICOLL_STREAM_OR_MPI(comm, call)                                                           \
    do {                                                                                           \
        if (picoll_stream_of_comm(comm) == NULL) {                                                 \
            return call;                                                                           \
        }                                                                                          \
    } while (0)
#else
#define PICOLL_STREAM_OR_MPI(comm, call) ((void)0)
#endif

/* A stream of picoll's (the application's handle, of the MPI's type: pmpi/stream.c). */
typedef struct picoll_mpix_stream *picoll_stream_t;

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
    void *user; /* a pinned hop of a kernel call (pageable host memory): the application's
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
    sreq_t *sreq; /* isend, irecv, wait */
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
    op_t *head, *tail; /* handed over by the host functions, not yet run */
    int stop, thread_up;
    pthread_t thread;
    int ncomms;                /* stream communicators made with it, not yet freed */
    int error;                 /* the first MPI error of an enqueued call; MPI_SUCCESS
                                    * (atomic: the enqueue takes it without the lock) */
    long staged, host, device; /* calls so far: how their buffers went (staged on the stream,
                                    * host memory; device: the collectives of a communicator of
                                    * one rank, a copy on the stream or nothing); these
                                    * counters and the next two are atomic (no lock on the
                                    * enqueue's path) */
    long captured;             /* of them, recorded into a CUDA graph */
    long kernels;              /* of them, picoll's kernels launched on the stream itself */
    long runs;                 /* calls the progress thread ran (graph replays included) */
    pthread_mutex_t enq_lock;  /* one enqueue at a time: the lists below, the staging */
    staging_t *staging;
    slab_t *slabs;
    op_t *kept, **kept_end; /* calls not yet freed, oldest first (the enqueuing threads'
                                    * list) */
};

/* One enqueue in progress, from picoll_stream_enq_begin to its commit or failure. */
typedef struct {
    const char *fn;
    MPI_Comm comm;
    picoll_stream_t s;
    op_t *o; /* &here until the call goes to the progress thread (enq_buffers): a
                           * call on picoll's kernels allocates nothing */
    op_t here;
    staging_t *in, *out; /* staging of the send and receive sides; NULL: used in place */
    void *user_out;      /* the device buffer the receive staging goes back to */
    size_t out_bytes;
    int staged;
    int mode, mode_set;   /* the thread's capture mode, relaxed while a capture is recorded */
    struct {              /* a kernel call's sides that are not device memory of the stream's
                           * context (enq_kernel_side) */
        staging_t *d, *h; /* their copy in device memory; the pinned hop of pageable memory */
        void *user;
        size_t bytes;
        int out; /* copied back after the kernels */
    } ks[2];
    int nks;
} enq_t;

/* ---- pmpi/stream.c ---- */

/* The stream of stream communicator comm; NULL where it has none. */
picoll_stream_t picoll_stream_of_comm(MPI_Comm comm);

/* ---- pmpi/stream_info.c ---- */

/* Whether info describes a CUDA stream (key "type": "cudaStream_t" or "CUstream"). */
int picoll_stream_info_is_cuda(MPI_Info info);

/* The stream handle that the info keys "type" and "value" of MPIX_Stream_create hold, in *cu;
 * MPI_SUCCESS, or the error raised (naming MPIX_Stream_create). */
int picoll_stream_info_handle(MPI_Info info, picoll_cu_stream_t *cu);

/* ---- pmpi/stream_thread.c ---- */

/* The host function of a call (arg: its op_t), on the stream once the work before it is done:
 * hands the call to the progress thread. No CUDA call, no wait. */
void picoll_stream_post(void *arg);
/* The progress thread of a stream (arg): runs the calls handed over, in order, until the stream
 * stops and its queue is empty. */
void *picoll_stream_progress(void *arg);

/* ---- pmpi/stream_stage.c ---- */

/* A free state word for o (caller holds the stream's context current); 0 on success. */
int picoll_stream_cell_get(picoll_stream_t s, op_t *o);
/* Frees the calls (not captured) whose last step the stream has passed, oldest first, up to the
 * first it has not (one query per enqueue in the steady state); with wait, waits for every one.
 * Caller holds the stream's context current. */
void picoll_stream_retire(picoll_stream_t s, int wait);
/* A pinned buffer (device: device memory) of at least bytes, free now (its last copies done);
 * NULL on failure. Caller holds the stream's context current. */
staging_t *picoll_stream_staging_get(picoll_stream_t s, size_t bytes, int device);
/* Frees the stream's staging buffers (once their last copies are done) and state words, at
 * MPIX_Stream_free. Caller holds the stream's context current. */
void picoll_stream_stage_free(picoll_stream_t s);

/* ---- pmpi/stream_enqueue.c ---- */

/* The stream of comm, or an MPI error naming fn. On success the stream's context is current
 * (picoll_stream_enq_commit or picoll_stream_enq_fail puts the caller's back). */
int picoll_stream_enq_begin(enq_t *e, const char *fn, MPI_Comm comm);
/* Puts back what picoll_stream_enq_begin changed for the calling thread. */
void picoll_stream_enq_leave(enq_t *e);
/* Gives up e's call: releases what it took, leaves, and raises code with the text what. */
int picoll_stream_enq_fail(enq_t *e, int code, const char *what);
/* The buffers of the call: a send side (sendbuf, scount elements of stype; MPI_IN_PLACE
 * allowed) and a receive side (recvbuf, rcount of rtype, read in first where recv_in says);
 * sets the call's buffers, types and counts (which the caller may then change for the MPI call:
 * the counts here are those of the whole buffers). */
int picoll_stream_enq_buffers(enq_t *e, const void *sendbuf, int scount, MPI_Datatype stype,
                              void *recvbuf, int rcount, MPI_Datatype rtype, int recv_in);
/* Queue e's call after its copies in: the host function that hands it over, the stream's wait for
 * it, the copy back; then what frees it once the stream has passed it (a captured call: kept). */
int picoll_stream_enq_commit(enq_t *e);

/* ---- pmpi/stream_kernel.c ---- */

/* Runs e's collective on picoll's kernels on the stream where its communicator has them and they
 * take the call (picoll_enq_call, entered once: the same answer on every rank); returns 1 and *rc
 * then, 0 where the call goes on the usual way. a: the call's description, made once (its
 * buffers the application's; its bytes set); sbytes and rbytes: the send and receive buffers'
 * bytes (-1: not contiguous); recv_in: the receive buffer is also read (in place; bcast's root,
 * whose buffer is only read). Buffers that are not device memory of the stream's context are
 * copied once the kernels take the call (a's place hook); device memory of it goes down as it
 * is. */
int picoll_stream_enq_kernels(enq_t *e, picoll_enq_args_t *a, long long sbytes, long long rbytes,
                              int recv_in, int *rc);

#endif
