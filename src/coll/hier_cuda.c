/* The steps the device hierarchy's algorithms share: entering and leaving a call, the network
 * step's host memory, the copies back of what arrives. */
#include "coll/hier_cuda.h"
#include "coll/vote.h"
#include "mem/pinned.h"
#include "util/fatal.h"
#include "util/reentry.h"

picoll_status_t picoll_hier_cuda_begin(picoll_coll_ctx_t *ctx, const void *sendbuf, void *recvbuf,
                                       picoll_dtype_t dt, int eligible, const char *name,
                                       picoll_meminfo_t *r)
{
    picoll_reentry++;
    picoll_status_t status = picoll_vote_hier_cuda(ctx, sendbuf, recvbuf, dt, eligible, name, r);
    if (status != PICOLL_OK) {
        picoll_reentry--;
    }
    return status;
}

void picoll_hier_cuda_end(const char *name, picoll_status_t status)
{
    picoll_reentry--;
    if (status != PICOLL_OK) {
        picoll_fatal("%s between nodes on the device failed (%s): aborting the job", name,
                     picoll_status_string(status));
    }
}

void *picoll_hier_cuda_host(const char *name, size_t bytes, picoll_cu_context_t context)
{
    void *host = NULL;

    if (picoll_pinned_get(bytes, context, &host) != PICOLL_OK) {
        picoll_fatal("%s between nodes: no host memory for %zu bytes of the device hierarchy's "
                     "network step: aborting the job",
                     name, bytes);
    }
    return host;
}

void picoll_hier_back_arrived(int k, void *arg)
{
    picoll_hier_back_t *b = arg;
    char *dst = b->dev + (size_t)k * b->stride;
    const char *src = b->host + (size_t)k * b->len;
    picoll_status_t st = b->pipe != NULL ? picoll_cudrv_pipe_copy(b->pipe, dst, src, b->len, -1)
                                         : picoll_cudrv_copy(dst, src, b->len, b->ctx);
    b->status = b->status != PICOLL_OK ? b->status : st;
}

picoll_status_t picoll_hier_back_close(picoll_hier_back_t *back, picoll_status_t status)
{
    picoll_status_t closed = back->pipe != NULL ? picoll_cudrv_pipe_close(back->pipe) : PICOLL_OK;
    return status != PICOLL_OK ? status : back->status != PICOLL_OK ? back->status : closed;
}
