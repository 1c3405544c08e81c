#include "build-config.h"
#include "mem/stage.h"
#include "mem/cudrv.h"
#include "mem/pinned.h"
#include "util/fatal.h"

#include <mpi.h>
#include <string.h>

picoll_status_t picoll_hostcopy_get(picoll_hostcopy_t *h, const void *user, size_t bytes,
                                    void *context, int copy_in)
{
    h->user = (void *)user;
    h->context = context;
    h->bytes = bytes;
    if (picoll_pinned_get(bytes, context, &h->host) != PICOLL_OK) {
        h->host = NULL;
        return PICOLL_ERR_NO_MEMORY;
    }
    return copy_in ? picoll_hostcopy_in(h) : PICOLL_OK;
}

picoll_status_t picoll_hostcopy_in(const picoll_hostcopy_t *h)
{
    return picoll_cudrv_copy(h->host, h->user, h->bytes, h->context);
}

picoll_status_t picoll_hostcopy_back(const picoll_hostcopy_t *h, size_t bytes)
{
    return picoll_cudrv_copy(h->user, h->host, bytes, h->context);
}

void picoll_hostcopy_put(picoll_hostcopy_t *h)
{
    if (h->host != NULL) {
        picoll_pinned_put(h->host);
        h->host = NULL;
    }
}

/* 1 when user is host memory, or device memory now with a host copy in b. */
static int stage_one(picoll_hostcopy_t *b, int staging, const void *user, size_t bytes, int copy_in)
{
    picoll_meminfo_t info;
    b->user = (void *)user;
    b->host = NULL;
    b->bytes = bytes;
    picoll_memkind_query(user, &info);
    if (info.kind == PICOLL_MEM_HOST || info.kind == PICOLL_MEM_PINNED) {
        return 1;
    }
    if (!staging || bytes == 0) {
        return 0;
    }
    return picoll_hostcopy_get(b, user, bytes, info.context, copy_in) == PICOLL_OK;
}

int picoll_stage_pair_in(picoll_stage_pair_t *st, int staging, const void **sendbuf, void **recvbuf,
                         size_t send_bytes, size_t recv_bytes)
{
    int in_place = *sendbuf == MPI_IN_PLACE;
    int vote = 1;
    st->send.host = st->recv.host = NULL;
    if (!in_place) {
        vote &= stage_one(&st->send, staging, *sendbuf, send_bytes, 1);
        if (st->send.host != NULL) {
            *sendbuf = st->send.host;
        }
    }
    vote &= stage_one(&st->recv, staging, *recvbuf, recv_bytes, in_place);
    if (st->recv.host != NULL) {
        *recvbuf = st->recv.host;
    }
    return vote;
}

picoll_status_t picoll_stage_pair_out(picoll_stage_pair_t *st, int ok)
{
    picoll_status_t status = PICOLL_OK;
    if (ok && st->recv.host != NULL) {
        status = picoll_hostcopy_back(&st->recv, st->recv.bytes);
    }
    picoll_hostcopy_put(&st->send);
    picoll_hostcopy_put(&st->recv);
    return status;
}

static void pipe_queue(picoll_stage_pipe_t *p, size_t k);

int picoll_stage_pipe_in(picoll_stage_pipe_t *p, int staging, const void **sendbuf, void **recvbuf,
                         size_t bytes, size_t chunk, int depth)
{
    picoll_stage_pair_t *st = &p->pair;
    int in_place = *sendbuf == MPI_IN_PLACE;
    int vote = 1;
    const void *user_send = *sendbuf;
    void *user_recv = *recvbuf;

    memset(p, 0, sizeof(*p));
    p->total = bytes;
    p->chunk = chunk < 1 ? 1 : chunk;
    p->nchunks = (bytes + p->chunk - 1) / p->chunk;
    /* depth 0: the whole input at once, as picoll_stage_pair_in (an A/B of the pipeline) */
    p->depth = depth < 0 ? 0 : depth > PICOLL_CUDRV_PIPE_MAX ? PICOLL_CUDRV_PIPE_MAX : depth;
    st->send.host = st->recv.host = NULL;
    if (!in_place) {
        vote &= stage_one(&st->send, staging, user_send, bytes, 0);
    }
    vote &= stage_one(&st->recv, staging, user_recv, bytes, 0);
    picoll_hostcopy_t *in = in_place ? &st->recv : &st->send;
    p->in_user = in->host != NULL ? in->user : NULL;
    p->in_host = in->host;
    p->out_host = st->recv.host;
    p->out_user = user_recv;
    if (st->send.host != NULL) {
        *sendbuf = st->send.host;
    }
    if (st->recv.host != NULL) {
        *recvbuf = st->recv.host;
    }
    if (!vote || (p->in_host == NULL && p->out_host == NULL)) {
        return vote;
    }
    /* one stream for both ways: both copies in the input's context, else the output's */
    void *ctx = p->in_host != NULL ? in->context : st->recv.context;
    int one_ctx = p->in_host == NULL || p->out_host == NULL || in->context == st->recv.context;
    p->piped = one_ctx && p->nchunks > 0 && p->depth > 0 &&
               picoll_cudrv_pipe_open(&p->pipe, ctx, p->depth) == PICOLL_OK;
    if (!p->piped) {
        /* the whole input now, as picoll_stage_pair_in */
        if (p->in_host != NULL && picoll_hostcopy_in(in) != PICOLL_OK) {
            vote = 0;
        }
        p->host_bytes += p->in_host != NULL ? bytes : 0;
        return vote;
    }
    for (; p->in_host != NULL && p->queued < p->nchunks && p->queued < (size_t)p->depth;
         p->queued++) {
        pipe_queue(p, p->queued);
    }
    p->ahead_max = (int)p->queued;
    return vote;
}

/* Queues the copy in of chunk k (event k % depth marks its end). */
static void pipe_queue(picoll_stage_pipe_t *p, size_t k)
{
    size_t off = k * p->chunk, n = p->total - off < p->chunk ? p->total - off : p->chunk;
    if (picoll_cudrv_pipe_copy(&p->pipe, p->in_host + off, p->in_user + off, n,
                               (int)(k % (size_t)p->depth)) != PICOLL_OK) {
        /* past the vote: the other ranks are in the call already */
        picoll_fatal("a staged collective between nodes: queuing a copy of its device input "
                     "failed: aborting the job");
    }
    p->host_bytes += n;
}

void picoll_stage_pipe_ready(picoll_stage_pipe_t *p, size_t off, size_t n)
{
    (void)n;
    if (!p->piped || p->in_host == NULL) {
        return;
    }
    size_t k = off / p->chunk;
    if (picoll_cudrv_pipe_wait(&p->pipe, (int)(k % (size_t)p->depth)) != PICOLL_OK) {
        picoll_fatal("a staged collective between nodes: a copy of its device input failed: "
                     "aborting the job");
    }
    /* chunk k is in: its event may mark chunk k + depth */
    if (p->queued < p->nchunks) {
        pipe_queue(p, p->queued++);
    }
    int ahead = (int)(p->queued - k - 1);
    p->ahead_max = ahead > p->ahead_max ? ahead : p->ahead_max;
}

void picoll_stage_pipe_done(picoll_stage_pipe_t *p, size_t off, size_t n)
{
    if (!p->piped || p->out_host == NULL) {
        return;
    }
    if (picoll_cudrv_pipe_copy(&p->pipe, (char *)p->out_user + off, p->out_host + off, n, -1) !=
        PICOLL_OK) {
        picoll_fatal("a staged collective between nodes: queuing the copy of its result to the "
                     "device failed: aborting the job");
    }
    p->host_bytes += n;
}

picoll_status_t picoll_stage_pipe_out(picoll_stage_pipe_t *p, int ok)
{
    picoll_status_t status = PICOLL_OK;
    if (p->piped) {
        /* every copy ended before the host copies go back to the pool */
        status = picoll_cudrv_pipe_close(&p->pipe);
        picoll_hostcopy_put(&p->pair.send);
        picoll_hostcopy_put(&p->pair.recv);
        return status;
    }
    if (ok && p->out_host != NULL) {
        p->host_bytes += p->total;
    }
    return picoll_stage_pair_out(&p->pair, ok);
}
