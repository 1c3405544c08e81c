/* The registry of staged calls that outlive their wrapper (see records.h): one lock over a table
 * of request records by handle, and lists of one-sided records, split collective I/O records and
 * orphans. A record owns its call's host copies; completing it copies the outputs back
 * (pmpi/copies.c) and, unless it is persistent, frees it. */
#pragma GCC visibility push(default)
#include <mpi.h>
#pragma GCC visibility pop

#include "build-config.h"
#include "pmpi/errors.h"
#include "pmpi/records.h"

#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

struct picoll_record {
    picoll_record_t *next;
    MPI_Request request; /* PICOLL_MODE_REQUEST / PERSISTENT: the table's key */
    picoll_stage_mode_t mode;
    int active;         /* persistent: started and not yet completed */
    int copied;         /* outputs already copied back (MPI_Request_get_status) */
    picoll_call_t call; /* its staged buffers own their host copies */
};

atomic_int picoll_stage_tracked;

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
#define NBUCKETS 256
static picoll_record_t *requests[NBUCKETS]; /* by request handle */
static picoll_record_t *windows;            /* one-sided records, newest first */
static picoll_record_t *splits;             /* split collective I/O, one per file at most */
static picoll_record_t *orphans;            /* freed by the application while active */

static picoll_record_t *record_of(const picoll_call_t *c, picoll_stage_mode_t mode)
{
    picoll_record_t *r = calloc(1, sizeof(*r));
    if (r != NULL) {
        r->mode = mode;
        r->call = *c;
        atomic_fetch_add(&picoll_stage_tracked, 1);
    }
    return r;
}

static void record_free(picoll_record_t *r)
{
    picoll_call_release(&r->call);
    atomic_fetch_sub(&picoll_stage_tracked, 1);
    free(r);
}

static unsigned bucket(MPI_Request req)
{
    uint64_t k = 0;
    memcpy(&k, &req, sizeof(req) < sizeof(k) ? sizeof(req) : sizeof(k));
    k ^= k >> 17;
    k *= 0x9e3779b97f4a7c15ull;
    return (unsigned)(k >> 56) % NBUCKETS;
}

/* ---- from the engine ---- */

int picoll_record_keep(const picoll_call_t *c, picoll_stage_mode_t mode, MPI_Request request)
{
    picoll_record_t *r = record_of(c, mode);
    if (r == NULL) {
        return -1;
    }
    if (mode == PICOLL_MODE_RMA) {
        /* one-sided: MPI reads and writes the copies until the window synchronises */
        pthread_mutex_lock(&lock);
        r->next = windows;
        windows = r;
        pthread_mutex_unlock(&lock);
    } else if (mode == PICOLL_MODE_SPLIT) {
        pthread_mutex_lock(&lock);
        r->next = splits;
        splits = r;
        pthread_mutex_unlock(&lock);
    } else {
        r->request = request;
        pthread_mutex_lock(&lock);
        unsigned k = bucket(r->request);
        r->next = requests[k];
        requests[k] = r;
        pthread_mutex_unlock(&lock);
    }
    return 0;
}

/* ---- requests ---- */

picoll_record_t *picoll_request_find(MPI_Request request)
{
    picoll_record_t **p, *r = NULL;
    if (request == MPI_REQUEST_NULL) {
        return NULL;
    }
    pthread_mutex_lock(&lock);
    for (p = &requests[bucket(request)]; *p != NULL; p = &(*p)->next) {
        if ((*p)->request == request) {
            r = *p;
            if (r->mode != PICOLL_MODE_PERSISTENT) {
                *p = r->next; /* the completing thread owns it now */
            }
            break;
        }
    }
    pthread_mutex_unlock(&lock);
    return r;
}

int picoll_request_done(picoll_record_t *r, int rc, const MPI_Status *status, int keep_copied)
{
    int failed = 0;
    if (r == NULL) {
        return rc;
    }
    if (rc == MPI_SUCCESS && !r->copied) {
        failed = picoll_call_copy_out(&r->call, status);
    }
    if (keep_copied) {
        r->copied = 1; /* MPI_Request_get_status: the request lives on; done once */
        if (r->mode != PICOLL_MODE_PERSISTENT) {
            /* it was taken out of the table by the find: put it back for the completion call */
            pthread_mutex_lock(&lock);
            unsigned k = bucket(r->request);
            r->next = requests[k];
            requests[k] = r;
            pthread_mutex_unlock(&lock);
        }
    } else if (r->mode == PICOLL_MODE_PERSISTENT) {
        r->active = 0;
        r->copied = 0;
    } else {
        record_free(r);
    }
    return rc == MPI_SUCCESS && failed ? picoll_raise_call(&r->call, MPI_ERR_OTHER) : rc;
}

int picoll_request_start(MPI_Request request)
{
    picoll_record_t *r = picoll_request_find(request);
    if (r == NULL || r->mode != PICOLL_MODE_PERSISTENT) {
        return MPI_SUCCESS;
    }
    r->active = 1;
    r->copied = 0;
    return picoll_call_copy_in(&r->call) ? picoll_raise_call(&r->call, MPI_ERR_OTHER) : MPI_SUCCESS;
}

int picoll_request_free(MPI_Request *request, int *rc)
{
    picoll_record_t *r = picoll_request_find(*request);
    if (r == NULL) {
        return 0;
    }
    if (r->mode != PICOLL_MODE_PERSISTENT && r->copied) {
        /* complete, and its outputs copied back already (MPI_Request_get_status said so): the
         * MPI touches the copies no more, and a later copy back would write a buffer that the
         * application may have freed since (it may, once it knows the request complete) */
        record_free(r);
        return 0; /* the MPI frees the request */
    }
    if (r->mode == PICOLL_MODE_PERSISTENT) {
        /* take it out of the table: the handle dies here */
        picoll_record_t **p;
        pthread_mutex_lock(&lock);
        for (p = &requests[bucket(r->request)]; *p != r; p = &(*p)->next) {
        }
        *p = r->next;
        pthread_mutex_unlock(&lock);
        if (!r->active) {
            record_free(r);
            return 0; /* the MPI frees the inactive request */
        }
    }
    /* still active: the MPI may still read or write the copies; picoll keeps the request and
     * completes it later (picoll_orphans_poll) */
    pthread_mutex_lock(&lock);
    r->next = orphans;
    orphans = r;
    pthread_mutex_unlock(&lock);
    *request = MPI_REQUEST_NULL;
    *rc = MPI_SUCCESS;
    return 1;
}

void picoll_orphans_poll(int wait)
{
    picoll_record_t *list, *keep = NULL, *r, *next;
    pthread_mutex_lock(&lock);
    list = orphans;
    orphans = NULL;
    pthread_mutex_unlock(&lock);
    for (r = list; r != NULL; r = next) {
        MPI_Status st;
        int flag = 0;
        next = r->next;
        if (wait) {
            flag = PMPI_Wait(&r->request, &st) == MPI_SUCCESS;
        } else if (PMPI_Test(&r->request, &flag, &st) != MPI_SUCCESS) {
            flag = 1;
        }
        if (!flag) {
            r->next = keep;
            keep = r;
            continue;
        }
        if (!r->copied) {
            picoll_call_copy_out(&r->call, &st);
        }
        if (r->request != MPI_REQUEST_NULL) {
            PMPI_Request_free(&r->request); /* a persistent one */
        }
        record_free(r);
    }
    if (keep != NULL) {
        pthread_mutex_lock(&lock);
        for (r = keep; r->next != NULL; r = r->next) {
        }
        r->next = orphans;
        orphans = keep;
        pthread_mutex_unlock(&lock);
    }
}

/* ---- one-sided ---- */

int picoll_rma_done(MPI_Win win, int target, int rc)
{
    picoll_record_t **p, *done = NULL, *r;
    int failed = 0;
    pthread_mutex_lock(&lock);
    for (p = &windows; *p != NULL;) {
        r = *p;
        if (r->call.obj.win == win && (target < 0 || r->call.target == target)) {
            *p = r->next;
            r->next = done;
            done = r;
        } else {
            p = &r->next;
        }
    }
    pthread_mutex_unlock(&lock);
    for (; done != NULL; done = r) {
        r = done->next;
        if (rc == MPI_SUCCESS) {
            failed |= picoll_call_copy_out(&done->call, NULL);
        }
        record_free(done);
    }
    return rc == MPI_SUCCESS && failed ? picoll_raise_on(PICOLL_OBJ_WIN, &win, MPI_ERR_OTHER) : rc;
}

/* ---- split collective I/O ---- */

picoll_record_t *picoll_split_take(MPI_File file)
{
    picoll_record_t **p, *r = NULL;
    if (atomic_load(&picoll_stage_tracked) == 0) {
        return NULL;
    }
    pthread_mutex_lock(&lock);
    for (p = &splits; *p != NULL; p = &(*p)->next) {
        if ((*p)->call.obj.file == file) {
            r = *p;
            *p = r->next;
            break;
        }
    }
    pthread_mutex_unlock(&lock);
    return r;
}

void *picoll_record_pass(picoll_record_t *r, int i)
{
    return r->call.b[i].pass;
}

int picoll_split_end(picoll_record_t *r, int rc, const MPI_Status *status)
{
    return picoll_request_done(r, rc, status, 0);
}
