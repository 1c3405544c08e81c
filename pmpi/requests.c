/* The MPI calls that complete what picoll staged: every completion call of requests, MPI_Start,
 * MPI_Request_free, and the synchronisations of one-sided windows, each handing the completed
 * calls to the registry of records (pmpi/records.c), which copies their outputs back. Each is one
 * atomic load and the PMPI call while no staged request, window operation or orphan is alive (host
 * buffers, no CUDA). Otherwise the handles are saved before the MPI call (which sets completed ones
 * to MPI_REQUEST_NULL), and each completed one's outputs are copied back before the call
 * returns. */
#pragma GCC visibility push(default)
#include <mpi.h>
#pragma GCC visibility pop

#include "build-config.h"
#include "util/export.h"
#include "pmpi/records.h"

#include <stdlib.h>

#define NONE_TRACKED() (atomic_load_explicit(&picoll_stage_tracked, memory_order_relaxed) == 0)

PICOLL_EXPORT int MPI_Wait(MPI_Request *request, MPI_Status *status)
{
    MPI_Status local;
    if (NONE_TRACKED()) {
        return PMPI_Wait(request, status);
    }
    MPI_Request saved = *request;
    MPI_Status *st = status == MPI_STATUS_IGNORE ? &local : status;
    int rc = PMPI_Wait(request, st);
    picoll_orphans_poll(0);
    return picoll_request_done(picoll_request_find(saved), rc, st, 0);
}

PICOLL_EXPORT int MPI_Test(MPI_Request *request, int *flag, MPI_Status *status)
{
    MPI_Status local;
    if (NONE_TRACKED()) {
        return PMPI_Test(request, flag, status);
    }
    MPI_Request saved = *request;
    MPI_Status *st = status == MPI_STATUS_IGNORE ? &local : status;
    int rc = PMPI_Test(request, flag, st);
    picoll_orphans_poll(0);
    if (rc != MPI_SUCCESS || !*flag) {
        return rc;
    }
    return picoll_request_done(picoll_request_find(saved), rc, st, 0);
}

/* MPI's empty status (MPI 4.1, section 3.7.3): source MPI_ANY_SOURCE, tag MPI_ANY_TAG, error
 * MPI_SUCCESS, no elements, not cancelled. */
static void empty_status(MPI_Status *st)
{
    st->MPI_SOURCE = MPI_ANY_SOURCE;
    st->MPI_TAG = MPI_ANY_TAG;
    st->MPI_ERROR = MPI_SUCCESS;
    (void)PMPI_Status_set_elements(st, MPI_BYTE, 0);
    (void)PMPI_Status_set_cancelled(st, 0);
}

PICOLL_EXPORT int MPI_Request_get_status(MPI_Request request, int *flag, MPI_Status *status)
{
    MPI_Status local;
    if (request == MPI_REQUEST_NULL) {
        /* the empty status, whole: Open MPI 4.1 sets its source and tag but leaves MPI_ERROR as
         * it was (MPICH's test pt2pt/rqstatus) */
        int rc = PMPI_Request_get_status(request, flag, status);
        if (rc == MPI_SUCCESS && status != MPI_STATUS_IGNORE) {
            empty_status(status);
        }
        return rc;
    }
    if (NONE_TRACKED()) {
        return PMPI_Request_get_status(request, flag, status);
    }
    MPI_Status *st = status == MPI_STATUS_IGNORE ? &local : status;
    int rc = PMPI_Request_get_status(request, flag, st);
    if (rc != MPI_SUCCESS || !*flag) {
        return rc;
    }
    /* the request lives on: the outputs are copied now, once, and its completion frees it */
    return picoll_request_done(picoll_request_find(request), rc, st, 1);
}

/* Room for n saved handles and statuses: on the stack up to 32, else on the heap. */
typedef struct {
    MPI_Request small_req[32], *req;
    MPI_Status small_st[32], *st;
} saved_t;

static void unsave(saved_t *s, MPI_Status *user_st);

static int save(saved_t *s, int n, const MPI_Request *reqs, MPI_Status *user_st, int want_st)
{
    s->req = n <= 32 ? s->small_req : malloc(sizeof(MPI_Request) * (size_t)n);
    s->st = user_st;
    if (want_st && user_st == MPI_STATUSES_IGNORE) {
        s->st = n <= 32 ? s->small_st : malloc(sizeof(MPI_Status) * (size_t)n);
    }
    if (s->req == NULL || (want_st && s->st == NULL)) {
        unsave(s, user_st);
        return -1;
    }
    for (int i = 0; i < n; i++) {
        s->req[i] = reqs[i];
    }
    return 0;
}

/* Frees what save took from the heap (the statuses: unless they are the application's). */
static void unsave(saved_t *s, MPI_Status *user_st)
{
    if (s->req != s->small_req) {
        free(s->req);
    }
    if (s->st != user_st && s->st != s->small_st) {
        free(s->st);
    }
}

/* The request i completed: copy back. rc of the whole call is kept unless a copy fails. */
static int done_one(saved_t *s, int i, int rc)
{
    int r = picoll_request_done(picoll_request_find(s->req[i]), MPI_SUCCESS, &s->st[i], 0);
    return r != MPI_SUCCESS && rc == MPI_SUCCESS ? r : rc;
}

/* After Waitall/Testall completed all (rc MPI_SUCCESS), or some (MPI_ERR_IN_STATUS: the statuses
 * say which). */
static int done_all(saved_t *s, int n, int rc)
{
    for (int i = 0; i < n; i++) {
        if (rc == MPI_SUCCESS || (rc == MPI_ERR_IN_STATUS && s->st[i].MPI_ERROR == MPI_SUCCESS)) {
            rc = done_one(s, i, rc);
        }
    }
    return rc;
}

PICOLL_EXPORT int MPI_Waitall(int count, MPI_Request requests[], MPI_Status statuses[])
{
    saved_t s;
    if (NONE_TRACKED() || count <= 0) {
        return PMPI_Waitall(count, requests, statuses);
    }
    if (save(&s, count, requests, statuses, 1) != 0) {
        return MPI_ERR_NO_MEM;
    }
    int rc = PMPI_Waitall(count, requests, s.st);
    picoll_orphans_poll(0);
    rc = done_all(&s, count, rc);
    unsave(&s, statuses);
    return rc;
}

PICOLL_EXPORT int MPI_Testall(int count, MPI_Request requests[], int *flag, MPI_Status statuses[])
{
    saved_t s;
    if (NONE_TRACKED() || count <= 0) {
        return PMPI_Testall(count, requests, flag, statuses);
    }
    if (save(&s, count, requests, statuses, 1) != 0) {
        return MPI_ERR_NO_MEM;
    }
    int rc = PMPI_Testall(count, requests, flag, s.st);
    picoll_orphans_poll(0);
    if (*flag || rc == MPI_ERR_IN_STATUS) {
        rc = done_all(&s, count, rc);
    }
    unsave(&s, statuses);
    return rc;
}

static int any_done(saved_t *s, int index, const MPI_Status *st, int rc)
{
    if (index == MPI_UNDEFINED || index < 0) {
        return rc;
    }
    int r = picoll_request_done(picoll_request_find(s->req[index]), rc, st, 0);
    return r;
}

PICOLL_EXPORT int MPI_Waitany(int count, MPI_Request requests[], int *index, MPI_Status *status)
{
    saved_t s;
    MPI_Status local;
    if (NONE_TRACKED() || count <= 0) {
        return PMPI_Waitany(count, requests, index, status);
    }
    if (save(&s, count, requests, MPI_STATUSES_IGNORE, 0) != 0) {
        return MPI_ERR_NO_MEM;
    }
    MPI_Status *st = status == MPI_STATUS_IGNORE ? &local : status;
    int rc = PMPI_Waitany(count, requests, index, st);
    picoll_orphans_poll(0);
    rc = any_done(&s, *index, st, rc);
    unsave(&s, MPI_STATUSES_IGNORE);
    return rc;
}

PICOLL_EXPORT int MPI_Testany(int count, MPI_Request requests[], int *index, int *flag,
                              MPI_Status *status)
{
    saved_t s;
    MPI_Status local;
    if (NONE_TRACKED() || count <= 0) {
        return PMPI_Testany(count, requests, index, flag, status);
    }
    if (save(&s, count, requests, MPI_STATUSES_IGNORE, 0) != 0) {
        return MPI_ERR_NO_MEM;
    }
    MPI_Status *st = status == MPI_STATUS_IGNORE ? &local : status;
    int rc = PMPI_Testany(count, requests, index, flag, st);
    picoll_orphans_poll(0);
    if (*flag) {
        rc = any_done(&s, *index, st, rc);
    }
    unsave(&s, MPI_STATUSES_IGNORE);
    return rc;
}

static int some_done(saved_t *s, int outcount, const int indices[], int rc)
{
    if (outcount == MPI_UNDEFINED) {
        return rc;
    }
    for (int k = 0; k < outcount; k++) {
        if (rc == MPI_SUCCESS || (rc == MPI_ERR_IN_STATUS && s->st[k].MPI_ERROR == MPI_SUCCESS)) {
            int r = picoll_request_done(picoll_request_find(s->req[indices[k]]), MPI_SUCCESS,
                                        &s->st[k], 0);
            rc = r != MPI_SUCCESS && rc == MPI_SUCCESS ? r : rc;
        }
    }
    return rc;
}

PICOLL_EXPORT int MPI_Waitsome(int incount, MPI_Request requests[], int *outcount, int indices[],
                               MPI_Status statuses[])
{
    saved_t s;
    if (NONE_TRACKED() || incount <= 0) {
        return PMPI_Waitsome(incount, requests, outcount, indices, statuses);
    }
    if (save(&s, incount, requests, statuses, 1) != 0) {
        return MPI_ERR_NO_MEM;
    }
    int rc = PMPI_Waitsome(incount, requests, outcount, indices, s.st);
    picoll_orphans_poll(0);
    rc = some_done(&s, *outcount, indices, rc);
    unsave(&s, statuses);
    return rc;
}

PICOLL_EXPORT int MPI_Testsome(int incount, MPI_Request requests[], int *outcount, int indices[],
                               MPI_Status statuses[])
{
    saved_t s;
    if (NONE_TRACKED() || incount <= 0) {
        return PMPI_Testsome(incount, requests, outcount, indices, statuses);
    }
    if (save(&s, incount, requests, statuses, 1) != 0) {
        return MPI_ERR_NO_MEM;
    }
    int rc = PMPI_Testsome(incount, requests, outcount, indices, s.st);
    picoll_orphans_poll(0);
    rc = some_done(&s, *outcount, indices, rc);
    unsave(&s, statuses);
    return rc;
}

PICOLL_EXPORT int MPI_Start(MPI_Request *request)
{
    if (NONE_TRACKED()) {
        return PMPI_Start(request);
    }
    int rc = picoll_request_start(*request);
    return rc == MPI_SUCCESS ? PMPI_Start(request) : rc;
}

PICOLL_EXPORT int MPI_Startall(int count, MPI_Request requests[])
{
    if (NONE_TRACKED()) {
        return PMPI_Startall(count, requests);
    }
    for (int i = 0; i < count; i++) {
        int rc = picoll_request_start(requests[i]);
        if (rc != MPI_SUCCESS) {
            return rc;
        }
    }
    return PMPI_Startall(count, requests);
}

PICOLL_EXPORT int MPI_Request_free(MPI_Request *request)
{
    int rc;
    if (NONE_TRACKED() || !picoll_request_free(request, &rc)) {
        return PMPI_Request_free(request);
    }
    return rc;
}

/* ---- one-sided synchronisation: the origin buffers of the completed operations ---- */

#define RMA_SYNC(call, win, target)                                                                \
    do {                                                                                           \
        if (NONE_TRACKED()) {                                                                      \
            return call;                                                                           \
        }                                                                                          \
        return picoll_rma_done(win, target, call);                                                 \
    } while (0)

PICOLL_EXPORT int MPI_Win_fence(int assert, MPI_Win win)
{
    RMA_SYNC(PMPI_Win_fence(assert, win), win, -1);
}

PICOLL_EXPORT int MPI_Win_complete(MPI_Win win)
{
    RMA_SYNC(PMPI_Win_complete(win), win, -1);
}

PICOLL_EXPORT int MPI_Win_unlock(int rank, MPI_Win win)
{
    RMA_SYNC(PMPI_Win_unlock(rank, win), win, rank);
}

PICOLL_EXPORT int MPI_Win_unlock_all(MPI_Win win)
{
    RMA_SYNC(PMPI_Win_unlock_all(win), win, -1);
}

PICOLL_EXPORT int MPI_Win_flush(int rank, MPI_Win win)
{
    RMA_SYNC(PMPI_Win_flush(rank, win), win, rank);
}

PICOLL_EXPORT int MPI_Win_flush_all(MPI_Win win)
{
    RMA_SYNC(PMPI_Win_flush_all(win), win, -1);
}

PICOLL_EXPORT int MPI_Win_flush_local(int rank, MPI_Win win)
{
    RMA_SYNC(PMPI_Win_flush_local(rank, win), win, rank);
}

PICOLL_EXPORT int MPI_Win_flush_local_all(MPI_Win win)
{
    RMA_SYNC(PMPI_Win_flush_local_all(win), win, -1);
}
