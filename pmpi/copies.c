/* The host copies of a staged call's buffers (see stage.h): the inputs copied in, the outputs
 * copied back, the copies given back. The engine (pmpi/stage.c) uses them for a blocking call, the
 * registry (pmpi/records.c) when a record completes or a persistent request starts.
 *
 * Stream ordering: every copy is the memory layer's host copy of a device buffer (mem/stage.h):
 * a copy in the buffer's own context on this thread's per-thread default stream, or on picoll's
 * own stream of that context while the per-thread stream is being captured into a CUDA graph
 * (picoll_cudrv_copy), synchronised before it returns. The per-thread stream synchronises with the
 * legacy default stream, so the inputs are read after the work the application queued there
 * (PyTorch's current stream by default), and the outputs are in place when the call (or the
 * completion call) returns. */
#pragma GCC visibility push(default)
#include <mpi.h>
#pragma GCC visibility pop

#include "build-config.h"
#include "pmpi/stage.h"

#include <stddef.h>

void picoll_call_release(picoll_call_t *c)
{
    for (int i = 0; i < c->n; i++) {
        picoll_hostcopy_put(&c->b[i].copy);
    }
}

int picoll_call_copy_in(picoll_call_t *c)
{
    int failed = 0;
    for (int i = 0; i < c->n; i++) {
        picoll_stagebuf_t *b = &c->b[i];
        if (b->copy.host != NULL && (b->flags & PICOLL_ROLE_IN) &&
            picoll_hostcopy_in(&b->copy) != PICOLL_OK) {
            failed = 1;
        }
    }
    return failed;
}

/* Copies the outputs back; the bytes of a PARTIAL output only as far as status says. */
int picoll_call_copy_out(picoll_call_t *c, const MPI_Status *status)
{
    int failed = 0, cancelled = 0, receive = 0;
    for (int i = 0; i < c->n; i++) {
        receive |= c->b[i].copy.host != NULL && (c->b[i].flags & PICOLL_ROLE_PARTIAL);
    }
    /* only a receive can be cancelled with its buffer unwritten; Open MPI leaves the cancelled
     * field of I/O statuses uninitialised, so it is not read for anything else */
    if (receive && status != NULL && status != MPI_STATUS_IGNORE) {
        PMPI_Test_cancelled(status, &cancelled);
    }
    for (int i = 0; i < c->n && !cancelled; i++) {
        picoll_stagebuf_t *b = &c->b[i];
        size_t bytes = b->bytes;
        if (b->copy.host == NULL || !(b->flags & PICOLL_ROLE_OUT)) {
            continue;
        }
        if ((b->flags & PICOLL_ROLE_PARTIAL) && !(b->flags & PICOLL_ROLE_IN) && status != NULL &&
            status != MPI_STATUS_IGNORE) {
            MPI_Count got = 0;
            if (PMPI_Get_elements_x(status, MPI_BYTE, &got) == MPI_SUCCESS && got >= 0 &&
                (size_t)got < bytes) {
                bytes = (size_t)got;
            }
        }
        if (bytes > 0 && picoll_hostcopy_back(&b->copy, bytes) != PICOLL_OK) {
            failed = 1;
        }
    }
    return failed;
}
