/* Between nodes, CUDA buffers take the hierarchical path through pinned host copies of the whole
 * buffers (when picoll stages CUDA buffers: PICOLL_CUDA_STAGING, an MPI that is not CUDA-aware).
 * The copies use the buffer's own device context on the per-thread default stream (picoll_cudrv_copy),
 * so they follow the application's queued work, and the result is on the device at return. */
#include "coll/algs.h"
#include "core.h"
#include "cudrv.h"
#include "memkind.h"
#include "pinned.h"

#include <mpi.h>

static int stage_one(picoll_hier_stage_buf_t *b, const void *user, size_t bytes, int copy_in)
{
    picoll_meminfo_t info;
    b->user = (void *)user;
    b->host = NULL;
    b->bytes = bytes;
    picoll_memkind_query(user, &info);
    if (info.kind == PICOLL_MEM_HOST || info.kind == PICOLL_MEM_PINNED) {
        return 1;
    }
    if (!picoll_g.staging || bytes == 0) {
        return 0;
    }
    b->context = info.context;
    if (picoll_pinned_get(bytes, info.context, &b->host) != PICOLL_OK) {
        b->host = NULL;
        return 0;
    }
    return !copy_in || picoll_cudrv_copy(b->host, user, bytes, info.context) == PICOLL_OK;
}

int picoll_hier_stage_in(picoll_hier_stage_t *st, const void **sendbuf, void **recvbuf,
                         size_t send_bytes, size_t recv_bytes)
{
    int in_place = *sendbuf == MPI_IN_PLACE;
    int vote = 1;
    st->send.host = st->recv.host = NULL;
    if (!in_place) {
        vote &= stage_one(&st->send, *sendbuf, send_bytes, 1);
        if (st->send.host != NULL) {
            *sendbuf = st->send.host;
        }
    }
    vote &= stage_one(&st->recv, *recvbuf, recv_bytes, in_place);
    if (st->recv.host != NULL) {
        *recvbuf = st->recv.host;
    }
    return vote;
}

int picoll_hier_stage_out(picoll_hier_stage_t *st, int ok)
{
    int rc = MPI_SUCCESS;
    if (ok && st->recv.host != NULL &&
        picoll_cudrv_copy(st->recv.user, st->recv.host, st->recv.bytes, st->recv.context) !=
            PICOLL_OK) {
        rc = MPI_ERR_OTHER;
    }
    if (st->send.host != NULL) {
        picoll_pinned_put(st->send.host);
    }
    if (st->recv.host != NULL) {
        picoll_pinned_put(st->recv.host);
    }
    return rc;
}
