/* The steps of an enqueue (pmpi/stream_int.h): the stream of the communicator and the call's
 * state word (begin), the buffers the MPI call uses (staged on the stream where they are device
 * memory), then on the stream the host function, the wait and the copies back (commit). */
#pragma GCC visibility push(default)
#include <mpi.h>
#pragma GCC visibility pop

#include "mem/cudrv.h"
#include "mem/memkind.h"
#include "pmpi/errors.h"
#include "pmpi/stream_int.h"

#include <picoll.h>

#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- the stream and the call ---- */

int picoll_stream_enq_begin(enq_t *e, const char *fn, MPI_Comm comm)
{
    int err, capture = PICOLL_CU_STREAM_CAPTURE_STATUS_NONE;
    memset(e, 0, sizeof(*e));
    e->fn = fn;
    e->comm = comm;
    e->s = picoll_stream_of_comm(comm);
    if (e->s == NULL) {
        return picoll_raise_stream(comm, MPI_ERR_COMM,
                                   "picoll: %s: the communicator has no stream (make it with "
                                   "MPIX_Stream_comm_create and a CUDA stream)",
                                   fn);
    }
    err = __atomic_exchange_n(&e->s->error, MPI_SUCCESS, __ATOMIC_ACQ_REL);
    if (err != MPI_SUCCESS) {
        return err; /* an earlier enqueued call's error, raised on the progress thread already */
    }
    e->o = &e->here; /* zeroed with e */
    e->o->s = e->s;
    e->o->comm = comm;
    if (picoll_cu.ctx_push_current(e->s->ctx) != 0) {
        return picoll_raise_stream(comm, MPI_ERR_OTHER,
                                   "picoll: %s: the stream's CUDA context cannot be made current",
                                   fn);
    }
    pthread_mutex_lock(&e->s->enq_lock); /* until picoll_stream_enq_leave */
    if (picoll_cu.stream_is_capturing(e->s->cu, &capture) != 0 ||
        capture > PICOLL_CU_STREAM_CAPTURE_STATUS_ACTIVE) {
        return picoll_stream_enq_fail(e, MPI_ERR_OTHER,
                                      "the stream's CUDA graph capture was invalidated");
    }
    e->o->captured = capture == PICOLL_CU_STREAM_CAPTURE_STATUS_ACTIVE;
    if (e->o->captured) {
        /* allocations while this thread records a graph: relaxed, so that they neither fail nor
         * break the capture */
        e->mode = PICOLL_CU_STREAM_CAPTURE_MODE_RELAXED;
        e->mode_set = picoll_cu.thread_exchange_capture_mode(&e->mode) == 0;
    } else {
        picoll_stream_retire(e->s, 0);
    }
    return MPI_SUCCESS;
}

/* The call goes to the progress thread: its record of its own, and its state word (once). */
static int enq_own(enq_t *e)
{
    if (e->o != &e->here) {
        return MPI_SUCCESS;
    }
    op_t *o = malloc(sizeof(op_t));
    if (o == NULL) {
        return picoll_stream_enq_fail(e, MPI_ERR_NO_MEM, "out of memory");
    }
    *o = e->here;
    e->o = o;
    if (picoll_stream_cell_get(e->s, e->o) != 0) {
        return picoll_stream_enq_fail(e, MPI_ERR_NO_MEM,
                                      "no mapped pinned memory for the call's state word");
    }
    return MPI_SUCCESS;
}

void picoll_stream_enq_leave(enq_t *e)
{
    picoll_cu_context_t popped;
    pthread_mutex_unlock(&e->s->enq_lock);
    if (e->mode_set) {
        picoll_cu.thread_exchange_capture_mode(&e->mode);
    }
    picoll_cu.ctx_pop_current(&popped);
}

int picoll_stream_enq_fail(enq_t *e, int code, const char *what)
{
    if (e->in != NULL) {
        e->in->taken = 0;
    }
    if (e->out != NULL) {
        e->out->taken = 0;
    }
    if (e->o != NULL && e->o->slab != NULL) {
        e->o->slab->used[e->o->cell] = 0;
    }
    picoll_stream_enq_leave(e);
    if (e->o != &e->here) {
        free(e->o);
    }
    e->o = NULL;
    return picoll_raise_stream(e->comm, code, "picoll: %s: %s", e->fn, what);
}

/* ---- the buffers the MPI call uses ---- */

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

/* The buffer the MPI call uses for user buffer buf (bytes of it significant): buf itself unless
 * it is device memory, then a staging buffer, filled on the stream from buf where copy_in. Device
 * memory of another context than the stream's is refused. */
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
        snprintf(why, sizeof(why),
                 "%s is memory of CUDA device %d, in another context than the "
                 "stream's",
                 arg, m.device);
        return picoll_stream_enq_fail(e, MPI_ERR_BUFFER, why);
    }
    if (bytes < 0) {
        snprintf(why, sizeof(why), "%s: a datatype with a negative lower bound is not staged", arg);
        return picoll_stream_enq_fail(e, MPI_ERR_TYPE, why);
    }
    if ((*g = picoll_stream_staging_get(e->s, (size_t)bytes, 0)) == NULL) {
        return picoll_stream_enq_fail(e, MPI_ERR_NO_MEM, "no pinned staging memory");
    }
    if (copy_in && picoll_cu.memcpy_async((picoll_cu_deviceptr_t)(uintptr_t)(*g)->buf,
                                          (picoll_cu_deviceptr_t)(uintptr_t)buf, (size_t)bytes,
                                          e->s->cu) != 0) {
        return picoll_stream_enq_fail(e, MPI_ERR_OTHER, "a copy on the stream failed");
    }
    *host = (*g)->buf;
    e->staged = 1;
    return MPI_SUCCESS;
}

int picoll_stream_enq_buffers(enq_t *e, const void *sendbuf, int scount, MPI_Datatype stype,
                              void *recvbuf, int rcount, MPI_Datatype rtype, int recv_in)
{
    void *hs, *hr;
    long long sb = type_span(scount, stype), rb = type_span(rcount, rtype);
    int rc = enq_own(e);
    if (rc != MPI_SUCCESS) {
        return rc;
    }
    rc = enq_side(e, sendbuf, sb, 1, &e->in, &hs, "sendbuf");
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

/* ---- on the stream ---- */

int picoll_stream_enq_commit(enq_t *e)
{
    picoll_stream_t s = e->s;
    int own = enq_own(e);
    if (own != MPI_SUCCESS) {
        return own;
    }
    op_t *o = e->o;
    int rc = picoll_cu.launch_host_func(s->cu, picoll_stream_post, o);
    if (rc == 0) {
        rc = picoll_cu.stream_wait_value64(s->cu, o->state_dev, 1, PICOLL_CU_STREAM_WAIT_VALUE_GEQ);
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
        return picoll_stream_enq_fail(e, MPI_ERR_OTHER, why);
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
    picoll_stream_enq_leave(e);
    __atomic_fetch_add(&s->staged, (long)e->staged, __ATOMIC_RELAXED);
    __atomic_fetch_add(&s->host, (long)!e->staged, __ATOMIC_RELAXED);
    __atomic_fetch_add(&s->captured, (long)o->captured, __ATOMIC_RELAXED);
    return MPI_SUCCESS;
}
