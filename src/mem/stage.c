#include "build-config.h"
#include "mem/stage.h"
#include "mem/cudrv.h"
#include "mem/pinned.h"

#include <mpi.h>

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
static int stage_one(picoll_hostcopy_t *b, int staging, const void *user, size_t bytes,
                     int copy_in)
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

int picoll_stage_pair_in(picoll_stage_pair_t *st, int staging, const void **sendbuf,
                         void **recvbuf, size_t send_bytes, size_t recv_bytes)
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
