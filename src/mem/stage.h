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
#include "mem/cudrv.h"
#include "mem/memkind.h"
#include "util/status.h"

typedef struct {
    void *user;    /* the device bytes this copy stands for */
    void *host;    /* the pinned copy; NULL: none (nothing to free) */
    void *context; /* the device buffer's CUDA context */
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
int picoll_stage_pair_in(picoll_stage_pair_t *st, int staging, const void **sendbuf, void **recvbuf,
                         size_t send_bytes, size_t recv_bytes);
/* When ok, copies the receive copy back; frees both. Returns PICOLL_OK or the failed copy's
 * status. */
picoll_status_t picoll_stage_pair_out(picoll_stage_pair_t *st, int ok);

/* The pair above for an algorithm that works through its buffers chunk by chunk (the
 * hierarchical allreduce): the device input is copied to the host chunk by chunk, up to depth
 * chunks ahead of the one the algorithm works on, and each result chunk goes back to the device as
 * soon as it is final, all on one stream while the algorithm runs the node and network steps of
 * the chunk between: device-to-host copies of the chunks ahead, the algorithm's chunk and the
 * host-to-device copy of the chunk before overlap. Where the driver has no events, or the two
 * buffers are in two contexts, or depth is 0, the whole input is copied at once as
 * picoll_stage_pair_in does (piped 0). */
typedef struct {
    picoll_stage_pair_t pair;
    picoll_cudrv_pipe_t pipe;
    int piped;
    const char *in_user; /* the device input and its host copy (piped, NULL: the input is host
                            * memory) */
    char *in_host;
    char *out_host; /* the result's host copy (NULL: the receive buffer is host memory) */
    void *out_user;
    size_t total, chunk, nchunks, queued; /* queued: chunks whose copy in is queued */
    int depth;
    int ahead_max;     /* the most copies in that were queued and not waited for at once */
    size_t host_bytes; /* bytes copied between device and host, both ways */
} picoll_stage_pipe_t;

/* As picoll_stage_pair_in (the same vote), for bytes bytes each way (allreduce) in chunks of chunk
 * bytes; the first copies in are queued. */
int picoll_stage_pipe_in(picoll_stage_pipe_t *p, int staging, const void **sendbuf, void **recvbuf,
                         size_t bytes, size_t chunk, int depth);
/* The input's bytes [off, off + n) (one chunk, in order) are on the host now; the next copy in is
 * queued. */
void picoll_stage_pipe_ready(picoll_stage_pipe_t *p, size_t off, size_t n);
/* The result's bytes [off, off + n) are final on the host: queued back to the device. */
void picoll_stage_pipe_done(picoll_stage_pipe_t *p, size_t off, size_t n);
/* Waits for every copy (when ok, the result's are all queued: piped, or copied back now); frees.
 * Returns PICOLL_OK or the failed copy's status. */
picoll_status_t picoll_stage_pipe_out(picoll_stage_pipe_t *p, int ok);

#endif
