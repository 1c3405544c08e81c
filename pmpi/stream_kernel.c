/* A collective enqueued on picoll's kernels on the stream itself (pmpi/stream_int.h): its
 * buffers copied to device memory of the stream's context where they are not, the kernels
 * launched (src/coll/enqueue.c), the copies back; no host function, no state word. */
#pragma GCC visibility push(default)
#include <mpi.h>
#pragma GCC visibility pop

#include "mem/cudrv.h"
#include "mem/memkind.h"
#include "pmpi/stream_int.h"
#include "core/comm.h"
#include "coll/coll.h"

#include <picoll.h>

#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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

/* Whether user buffer buf (bytes of it, of memory kind m) is one a kernel call uses as it is:
 * none, or device memory of the stream's context. */
static int enq_kernel_ready(const enq_t *e, const void *buf, long long bytes,
                            const picoll_meminfo_t *m)
{
    return buf == MPI_IN_PLACE || buf == NULL || bytes == 0 ||
           (m->kind == PICOLL_MEM_DEVICE && m->context == (void *)e->s->ctx);
}

/* The device buffer a kernel call uses for user buffer buf (bytes of it, of memory kind m): buf
 * itself where it is ready (enq_kernel_ready), else a device copy of the stream's, filled on the
 * stream first where in (pinned or managed memory by a copy, pageable memory through a pinned
 * hop that a host function fills) and copied back after the kernels where out (enq_kernel_back). */
static int enq_kernel_side(enq_t *e, void *buf, size_t bytes, int in, int out,
                           const picoll_meminfo_t *m, void **dev, const char *arg)
{
    char why[160];
    picoll_stream_t s = e->s;
    *dev = buf;
    if (enq_kernel_ready(e, buf, (long long)bytes, m)) {
        return MPI_SUCCESS;
    }
    if (m->kind == PICOLL_MEM_DEVICE) {
        snprintf(why, sizeof(why),
                 "%s is memory of CUDA device %d, in another context than the "
                 "stream's",
                 arg, m->device);
        return picoll_stream_enq_fail(e, MPI_ERR_BUFFER, why);
    }
    int k = e->nks++;
    memset(&e->ks[k], 0, sizeof(e->ks[k]));
    e->ks[k].user = buf;
    e->ks[k].bytes = bytes;
    e->ks[k].out = out;
    if ((e->ks[k].d = picoll_stream_staging_get(s, bytes, 1)) == NULL ||
        (m->kind == PICOLL_MEM_HOST &&
         (e->ks[k].h = picoll_stream_staging_get(s, bytes, 0)) == NULL)) {
        return picoll_stream_enq_fail(e, MPI_ERR_NO_MEM,
                                      "no device memory for a copy of a host buffer");
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
        return picoll_stream_enq_fail(e, MPI_ERR_OTHER, "a copy on the stream failed");
    }
    *dev = e->ks[k].d->buf;
    return MPI_SUCCESS;
}

/* After the kernels: the copies back, the copies' memory free again once the stream passed them
 * (a captured call keeps its own); the call has no state word and no record of its own. */
static int enq_kernel_back(enq_t *e)
{
    picoll_stream_t s = e->s;
    int captured = e->o->captured;
    for (int k = 0; k < e->nks; k++) {
        picoll_cu_deviceptr_t d = (picoll_cu_deviceptr_t)(uintptr_t)e->ks[k].d->buf;
        staging_t *h = e->ks[k].h;
        int rc = 0;
        if (e->ks[k].out && h != NULL) {
            rc = picoll_cu.memcpy_async((picoll_cu_deviceptr_t)(uintptr_t)h->buf, d, e->ks[k].bytes,
                                        s->cu);
            if (rc == 0) {
                rc = picoll_cu.launch_host_func(s->cu, hop_out, h);
            }
        } else if (e->ks[k].out) {
            rc = picoll_cu.memcpy_async((picoll_cu_deviceptr_t)(uintptr_t)e->ks[k].user, d,
                                        e->ks[k].bytes, s->cu);
        }
        if (rc != 0) {
            /* the kernels are queued: the peers go on; this rank's result is lost */
            return picoll_stream_enq_fail(e, MPI_ERR_OTHER, "the copy back on the stream failed");
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
    e->o = NULL; /* e->here: no record, no state word, no lock */
    picoll_stream_enq_leave(e);
    __atomic_fetch_add(&s->kernels, 1L, __ATOMIC_RELAXED);
    __atomic_fetch_add(&s->captured, (long)captured, __ATOMIC_RELAXED);
    return MPI_SUCCESS;
}

/* A communicator of one rank (issue 49): every collective's output is its input, so the call is
 * a copy on the stream from the input to the output where they differ, and nothing in place or
 * for a bcast; no kernel, no host thread. Taken where both buffers are device memory of the
 * stream's context (other kinds, and sizes that do not match, take the usual path). */
static int enq_self(enq_t *e, const picoll_enq_args_t *a, long long sbytes, long long rbytes,
                    int *rc)
{
    picoll_stream_t s = e->s;
    int size = 0;
    if (PMPI_Comm_size(e->comm, &size) != MPI_SUCCESS || size != 1) {
        return 0;
    }
    int copy = a->coll != PICOLL_COLL_BCAST && a->sendbuf != MPI_IN_PLACE &&
               a->sendbuf != a->recvbuf && rbytes != 0;
    if (copy) {
        picoll_meminfo_t ms, mr;
        if (sbytes != rbytes || rbytes < 0) {
            return 0;
        }
        picoll_memkind_query(a->sendbuf, &ms);
        picoll_memkind_query(a->recvbuf, &mr);
        if (ms.kind != PICOLL_MEM_DEVICE || ms.context != (void *)s->ctx ||
            mr.kind != PICOLL_MEM_DEVICE || mr.context != (void *)s->ctx) {
            return 0;
        }
        if (picoll_cu.memcpy_async((picoll_cu_deviceptr_t)(uintptr_t)a->recvbuf,
                                   (picoll_cu_deviceptr_t)(uintptr_t)a->sendbuf, (size_t)rbytes,
                                   s->cu) != 0) {
            *rc = picoll_stream_enq_fail(e, MPI_ERR_OTHER, "the copy on the stream failed");
            return 1;
        }
    }
    int captured = e->o->captured;
    e->o = NULL; /* e->here: no record, no state word */
    picoll_stream_enq_leave(e);
    __atomic_fetch_add(&s->device, 1L, __ATOMIC_RELAXED);
    __atomic_fetch_add(&s->captured, (long)captured, __ATOMIC_RELAXED);
    *rc = MPI_SUCCESS;
    return 1;
}

/* A kernel call's buffers that are not ready (enq_kernel_ready), as the description's place
 * hook sees them: the sides' bytes (-1: not contiguous) and kinds, looked up once. */
typedef struct {
    enq_t *e;
    long long sbytes, rbytes;
    picoll_meminfo_t ms, mr;
    int recv_in, recv_out;
    int rc; /* MPI_SUCCESS, or the error raised (the call given up) */
} kernel_place_t;

/* The place hook (coll/dispatch.h): the kernels take the call; its buffers made device memory of
 * the stream's context (enq_kernel_side), or the call given up. */
static picoll_status_t enq_kernel_place(void *arg, const void **sendbuf, void **recvbuf)
{
    kernel_place_t *k = arg;
    void *sdev = (void *)*sendbuf, *rdev = *recvbuf;
    if (k->sbytes < 0 || k->rbytes < 0) {
        /* the others launch: this rank cannot follow */
        k->rc = picoll_stream_enq_fail(k->e, MPI_ERR_TYPE,
                                       "a datatype that is not contiguous, where the stream "
                                       "communicator runs picoll's kernels (set "
                                       "PICOLL_STREAM_KERNELS=0 on every rank)");
        return PICOLL_ERR_MPI;
    }
    if (*sendbuf != MPI_IN_PLACE &&
        (k->rc = enq_kernel_side(k->e, sdev, (size_t)k->sbytes, 1, 0, &k->ms, &sdev, "sendbuf")) !=
            MPI_SUCCESS) {
        return PICOLL_ERR_MPI;
    }
    if ((k->rc = enq_kernel_side(k->e, rdev, (size_t)k->rbytes, k->recv_in, k->recv_out, &k->mr,
                                 &rdev, "recvbuf")) != MPI_SUCCESS) {
        return PICOLL_ERR_MPI;
    }
    *sendbuf = sdev;
    *recvbuf = rdev;
    return PICOLL_OK;
}

int picoll_stream_enq_kernels(enq_t *e, picoll_enq_args_t *a, long long sbytes, long long rbytes,
                              int recv_in, int *rc)
{
    if (enq_self(e, a, sbytes, rbytes, rc)) {
        return 1;
    }
    picoll_comm_t *ctx = picoll_g.active ? picoll_comm_get(e->comm) : NULL;
    if (ctx == NULL || ctx->coll.cuda_enq == NULL) {
        return 0;
    }
    int in_place = a->sendbuf == MPI_IN_PLACE;
    kernel_place_t k = {.e = e,
                        .sbytes = sbytes,
                        .rbytes = rbytes,
                        .recv_in = recv_in,
                        .recv_out = !(a->coll == PICOLL_COLL_BCAST && recv_in),
                        .rc = MPI_SUCCESS};
    picoll_memkind_query_pair(a->recvbuf, in_place ? NULL : a->sendbuf, &k.mr, &k.ms);
    /* device memory of the stream's context (the usual case): nothing to place, and the call
     * goes down to the kernels without coming back here */
    if (sbytes < 0 || rbytes < 0 || !enq_kernel_ready(e, a->recvbuf, rbytes, &k.mr) ||
        (!in_place && !enq_kernel_ready(e, a->sendbuf, sbytes, &k.ms))) {
        a->place = enq_kernel_place;
        a->place_arg = &k;
    }
    picoll_status_t status = picoll_enq_call(&ctx->coll, a);
    if (status == PICOLL_DECLINED) {
        return 0;
    }
    if (k.rc != MPI_SUCCESS) {
        *rc = k.rc; /* placing failed: the call was given up */
        return 1;
    }
    if (status != PICOLL_OK) {
        *rc = picoll_stream_enq_fail(e, MPI_ERR_INTERN, "picoll's kernels could not be queued");
        return 1;
    }
    *rc = enq_kernel_back(e);
    return 1;
}
