/* The progress thread of a stream object (pmpi/stream_int.h): the host function of each
 * enqueued call hands the call over, the thread runs it, in order, as a blocking MPI call, and
 * sets its state word to "done", which releases the stream. */
#pragma GCC visibility push(default)
#include <mpi.h>
#pragma GCC visibility pop

#include "mem/cudrv.h"
#include "pmpi/stream_int.h"
#include "cuda/cuda_dev.h"

#include <picoll.h>

#include <pthread.h>
#include <time.h>

/* Runs o as the blocking MPI call, through picoll like any other call. */
static int run_op(op_t *o)
{
    switch (o->kind) {
    case OP_SEND: return MPI_Send(o->sbuf, o->scount, o->stype, o->peer, o->tag, o->comm);
    case OP_RECV:
        return MPI_Recv(o->rbuf, o->rcount, o->rtype, o->peer, o->tag, o->comm, o->status);
    case OP_ALLREDUCE: return MPI_Allreduce(o->sbuf, o->rbuf, o->rcount, o->rtype, o->mop, o->comm);
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

void picoll_stream_post(void *arg)
{
    op_t *o = arg;
    picoll_stream_t s = o->s;
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

void *picoll_stream_progress(void *arg)
{
    picoll_stream_t s = arg;
    /* the stream's context (the calls' driver calls, a staging copy's); never forbidden a
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
        int none = MPI_SUCCESS;
        if (rc != MPI_SUCCESS) { /* the first error stays */
            __atomic_compare_exchange_n(&s->error, &none, rc, 0, __ATOMIC_ACQ_REL,
                                        __ATOMIC_ACQUIRE);
        }
        __atomic_fetch_add(&s->runs, 1L, __ATOMIC_RELAXED);
        /* the stream goes on (its copies back, the application's work) whatever happened: a
         * stream never hangs on a failed call */
        __atomic_store_n(o->state, 1, __ATOMIC_RELEASE);
    }
    pthread_mutex_unlock(&s->lock);
    return NULL;
}
