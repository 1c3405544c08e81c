/* The point-to-point enqueues (pmpi/stream_int.h): blocking, and the nonblocking ones with their
 * generalized requests, which only MPIX_Wait(all)_enqueue takes. */
#pragma GCC visibility push(default)
#include <mpi.h>
#pragma GCC visibility pop

#include "util/export.h"
#include "pmpi/errors.h"
#include "pmpi/stream_int.h"

#include <picoll.h>

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

/* The start of a point-to-point enqueue: the stream, the call's kind and peer. */
static int enq_p2p(enq_t *e, const char *fn, op_kind_t kind, MPI_Comm comm, int peer, int tag)
{
    int rc = picoll_stream_enq_begin(e, fn, comm);
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
    PICOLL_STREAM_OR_MPI(comm, PMPIX_Send_enqueue(buf, count, datatype, dest, tag, comm));
    int rc = enq_p2p(&e, "MPIX_Send_enqueue", OP_SEND, comm, dest, tag);
    if (rc != MPI_SUCCESS) {
        return rc;
    }
    rc = picoll_stream_enq_buffers(&e, buf, count, datatype, NULL, 0, datatype, 0);
    return rc != MPI_SUCCESS ? rc : picoll_stream_enq_commit(&e);
}

PICOLL_EXPORT int MPIX_Recv_enqueue(void *buf, int count, MPI_Datatype datatype, int source,
                                    int tag, MPI_Comm comm, MPI_Status *status)
{
    enq_t e;
    PICOLL_STREAM_OR_MPI(comm, PMPIX_Recv_enqueue(buf, count, datatype, source, tag, comm, status));
    int rc = enq_p2p(&e, "MPIX_Recv_enqueue", OP_RECV, comm, source, tag);
    if (rc != MPI_SUCCESS) {
        return rc;
    }
    /* the status is written when the call runs, not before the stream gets there (MPICH's rule:
     * it must stay valid until then); a shorter message leaves the rest of buf as it was */
    e.o->status = status;
    rc = picoll_stream_enq_buffers(&e, NULL, 0, datatype, buf, count, datatype, 1);
    return rc != MPI_SUCCESS ? rc : picoll_stream_enq_commit(&e);
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
        return picoll_stream_enq_fail(e, MPI_ERR_REQUEST, "request is NULL");
    }
    if (e->o->captured) {
        return picoll_stream_enq_fail(e, MPI_ERR_OTHER,
                                      "not capturable in a CUDA graph (its "
                                      "request outlives the enqueue)");
    }
    sreq_t *q = calloc(1, sizeof(*q));
    if (q == NULL) {
        return picoll_stream_enq_fail(e, MPI_ERR_NO_MEM, "out of memory");
    }
    q->comm = e->comm;
    q->inner = MPI_REQUEST_NULL;
    if (PMPI_Grequest_start(sreq_query, sreq_free, sreq_cancel, q, &q->user) != MPI_SUCCESS) {
        free(q);
        return picoll_stream_enq_fail(e, MPI_ERR_OTHER, "no generalized request");
    }
    /* an irecv's data goes back to the device at its wait: its staging stays taken until then
     * (picoll_stream_enq_commit releases only what e names) */
    q->out = e->out;
    q->user_out = e->user_out;
    q->out_bytes = e->out_bytes;
    e->out = NULL;
    e->o->sreq = q;
    int rc = picoll_stream_enq_commit(e);
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
    PICOLL_STREAM_OR_MPI(comm, PMPIX_Isend_enqueue(buf, count, datatype, dest, tag, comm, request));
    int rc = enq_p2p(&e, "MPIX_Isend_enqueue", OP_ISEND, comm, dest, tag);
    if (rc != MPI_SUCCESS) {
        return rc;
    }
    rc = picoll_stream_enq_buffers(&e, buf, count, datatype, NULL, 0, datatype, 0);
    return rc != MPI_SUCCESS ? rc : enq_start(&e, request);
}

PICOLL_EXPORT int MPIX_Irecv_enqueue(void *buf, int count, MPI_Datatype datatype, int source,
                                     int tag, MPI_Comm comm, MPI_Request *request)
{
    enq_t e;
    PICOLL_STREAM_OR_MPI(comm,
                         PMPIX_Irecv_enqueue(buf, count, datatype, source, tag, comm, request));
    int rc = enq_p2p(&e, "MPIX_Irecv_enqueue", OP_IRECV, comm, source, tag);
    if (rc != MPI_SUCCESS) {
        return rc;
    }
    rc = picoll_stream_enq_buffers(&e, NULL, 0, datatype, buf, count, datatype, 1);
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
#ifdef PICOLL_STREAM_MPI
    if (q == NULL) {
        return PMPIX_Wait_enqueue(request, status); /* a request of the MPI's own */
    }
#endif
    if (q == NULL) {
        return picoll_raise_stream(MPI_COMM_NULL, MPI_ERR_REQUEST,
                                   "picoll: MPIX_Wait_enqueue: not a request of "
                                   "MPIX_Isend_enqueue or MPIX_Irecv_enqueue (or waited for "
                                   "already)");
    }
    int rc = picoll_stream_enq_begin(&e, "MPIX_Wait_enqueue", q->comm);
    if (rc != MPI_SUCCESS) {
        return rc;
    }
    if (e.o->captured) {
        return picoll_stream_enq_fail(&e, MPI_ERR_OTHER, "not capturable in a CUDA graph");
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
    return picoll_stream_enq_commit(&e);
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
