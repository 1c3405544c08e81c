/* The one host copy of a device buffer: a pinned host buffer that stands in for (part of) a CUDA
 * buffer while a host algorithm or a non-CUDA-aware MPI works on it. Used by the PMPI layer's
 * staging of every call that carries a buffer (pmpi/stage.c) and by the hierarchical collectives
 * on device buffers (coll/dispatch.c).
 *
 * Copies run in the buffer's own context on this thread's per-thread default stream
 * (picoll_cudrv_copy): they follow the work the application queued on the legacy default stream,
 * and a copy is complete (on the host, or on the device) when the call returns. */
#ifndef PICOLL_MEM_STAGE_H
#define PICOLL_MEM_STAGE_H

#include <stddef.h>
#include "mem/memkind.h"
#include "util/status.h"

typedef struct {
    void *user;     /* the device bytes this copy stands for */
    void *host;     /* the pinned copy; NULL: none (nothing to free) */
    void *context;  /* the device buffer's CUDA context */
    size_t bytes;
} picoll_hostcopy_t;

/* A host copy of bytes bytes at user, in context; with copy_in, the device bytes are copied into
 * it. On failure h->host is NULL unless the copy in failed (then the caller still puts it back). */
picoll_status_t picoll_hostcopy_get(picoll_hostcopy_t *h, const void *user, size_t bytes,
                                    void *context, int copy_in);
/* The device bytes into the copy again (a persistent request's inputs at each start). */
picoll_status_t picoll_hostcopy_in(const picoll_hostcopy_t *h);
/* The first bytes bytes of the copy back to the device. */
picoll_status_t picoll_hostcopy_back(const picoll_hostcopy_t *h, size_t bytes);
/* Frees the host copy (none: nothing). */
void picoll_hostcopy_put(picoll_hostcopy_t *h);

/* The two buffers of a collective on this rank, replaced by host copies where they are device
 * memory and staging is on (the hierarchical algorithms run on host memory only). */
typedef struct {
    picoll_hostcopy_t send, recv;
} picoll_stage_pair_t;

/* Returns this rank's vote: 1 when both buffers are host memory or now have host copies (the send
 * copy holds the send buffer; in place, the receive copy holds the receive buffer), 0 when some
 * buffer is device memory that cannot be staged (staging 0, or no memory). *sendbuf (unless
 * MPI_IN_PLACE) and *recvbuf are replaced by their copies. */
int picoll_stage_pair_in(picoll_stage_pair_t *st, int staging, const void **sendbuf,
                         void **recvbuf, size_t send_bytes, size_t recv_bytes);
/* When ok, copies the receive copy back; frees both. Returns PICOLL_OK or the failed copy's
 * status. */
picoll_status_t picoll_stage_pair_out(picoll_stage_pair_t *st, int ok);

#endif
