/* The device executor, as the rest of picoll sees it: a device workspace per node communicator
 * (CUDA IPC), made at the first call on device buffers, and the collectives run on it. No CUDA
 * header: when picoll is built without CUDA (no nvcc for the kernels) these are stubs that never
 * offer a device path. */
#ifndef PICOLL_CUDA_DEV_H
#define PICOLL_CUDA_DEV_H

#include <mpi.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "build-config.h"
#include "cuda/cuda_kernel.h"
#include "host/shm.h"
#include "mem/cudrv.h"
#include "mem/memkind.h"
#include "topo/topo.h"
#include "util/config.h"
#include "util/dtype.h"
#include "util/status.h"

typedef struct picoll_cuda_ws picoll_cuda_ws_t;

/* Which of the embedded kernel images device (an ordinal) would run, from its compute capability,
 * without creating a context: "sm_90 for compute capability 9.0", "PTX of compute_90, compiled by
 * the driver ...", or why none (also in a build without CUDA). */
void picoll_cuda_kernel_image(int device, char *out, size_t len);

enum {
    PICOLL_CUDA_FLOOR_LAUNCH = 1,
    PICOLL_CUDA_FLOOR_QUEUE = 2,
    PICOLL_CUDA_FLOOR_COPY = 3,
    PICOLL_CUDA_FLOOR_BARRIER = 4,
    PICOLL_CUDA_FLOOR_BARRIER_QUEUE = 5,
    PICOLL_CUDA_FLOOR_BARRIER_GRAPH = 6
};

/* What the algorithm layer's selection needs of a device workspace, computed once when the
 * workspace is made and handed up with it (picoll_cuda_ws_limits): selection reads its own copy,
 * with no call into the executor per call. */
typedef struct {
    picoll_topo_reach_t reach; /* the node's (topo/reach.c); PICOLL_TOPO_REACH_NONE: none */
    int nranks;                /* local ranks */
    size_t slot_size;          /* bytes of one data buffer */
    size_t ll_reduce_max;      /* the largest allreduce (bytes) on the low-latency lines: its lines
                                * fit the line area (PICOLL_CUDA_LL_MAX) and a slot holds the
                                * unpacked payload of every rank; 0: none */
    size_t ll_gather_max;      /* the largest allgather block on the lines: every rank's blocks
                                * within PICOLL_CUDA_LL_MAX (the payload goes to the receive
                                * buffer); 0: none */
    uint64_t dtypes;           /* bit dt: the kernels reduce elements of dt (not long double) */
} picoll_cuda_limits_t;

/* The limits of a workspace of nranks ranks, data buffers of slot_size bytes, lines up to ll_max
 * bytes (PICOLL_CUDA_LL_MAX) (dtypes: none; the workspace sets them). The one rule of the lines'
 * fit (cuda_kernel.h: the lines of B bytes are picoll_cuda_ll_bytes(B), 16-byte multiples). */
static inline picoll_cuda_limits_t picoll_cuda_limits(picoll_topo_reach_t reach, int nranks,
                                                      size_t slot_size, size_t ll_max)
{
    picoll_cuda_limits_t l = {.reach = reach, .nranks = nranks, .slot_size = slot_size};
    if (nranks >= 1 && nranks <= PICOLL_CUDA_MAX_LOCAL) {
        size_t room = slot_size / (size_t)nranks / 16 * 16;
        l.ll_reduce_max = ll_max < room ? ll_max : room;
        l.ll_gather_max = ll_max / (size_t)nranks;
    }
    return l;
}

/* ------------------------------------------------ zero-copy (cuda_zc.c; issue 50) */
/* What the zero-copy path did in this process: calls that took it, calls where the ranks had
 * described their buffers but some rank could not map a peer's (every rank copied), the
 * descriptions taken from registered ranges, and the ranges registered now. */
typedef struct {
    long calls, declined, registered, ranges;
    long pinned; /* mappings a stream's call captured into a graph keeps for the process's life */
    long first_seen; /* mode reused: this process's buffers met for the first time, so not
                      * described (their calls copied) */
} picoll_cuda_zc_stats_t;
/* Bytes of a rank's description of its call's buffers (picoll_cuda_zc_export), at most. */
#define PICOLL_CUDA_ZC_DESC_BYTES 256

/* Calls that may take the zero-copy path cost a node barrier (the vote's, or the stream's
 * exchange) even where no rank has a registered range (PICOLL_CUDA_ZERO_COPY=registered, the
 * default, and nothing registered: the common case). Where every rank said so in the last such
 * barrier, the next calls skip it: 1, then 2, 4 ... up to PICOLL_CUDA_ZC_SKIP_MAX calls, doubling
 * while nobody registers; a range registered since is seen at the next barrier. The counts follow
 * from what the ranks agreed, so every rank skips the same calls. */
#define PICOLL_CUDA_ZC_SKIP_MAX 64
typedef struct {
    uint32_t skip, backoff;
} picoll_cuda_zc_skip_t;
/* Whether this call skips the barrier (it then takes the copy path, as every rank does). */
static inline int picoll_cuda_zc_skip_take(picoll_cuda_zc_skip_t *s)
{
    if (s->skip == 0) {
        return 0;
    }
    s->skip--;
    return 1;
}
/* After a barrier: none, every rank had nothing registered. */
static inline void picoll_cuda_zc_skip_learn(picoll_cuda_zc_skip_t *s, int none)
{
    s->backoff = !none                                   ? 0
                 : s->backoff == 0                       ? 1
                 : s->backoff >= PICOLL_CUDA_ZC_SKIP_MAX ? PICOLL_CUDA_ZC_SKIP_MAX
                                                         : 2 * s->backoff;
    s->skip = s->backoff;
}

#ifdef PICOLL_HAVE_CUDA

/* 1 when the CUDA driver sees at least one device (and PICOLL_CUDA is on). Never creates a
 * context. */
int picoll_cuda_device_present(const picoll_config_t *cfg);

/* Collective over node_comm, the ranks of comm on this (one) node: allocates this rank's
 * workspace in ctx (the context of its device buffers; NULL: this rank has none, and the set-up
 * fails everywhere), exchanges IPC handles, maps every peer's and checks each mapping by reading a
 * known value through it, and finds the node's reach (NVLink, PCIe; none where ranks share a GPU
 * without MPS) from the topology. Every rank takes part in every exchange, even after a local
 * failure, and the ranks agree on the outcome: PICOLL_OK and *out a workspace (for
 * picoll_cuda_ws_destroy) on every rank, or an error on every rank (this rank's own, or
 * PICOLL_ERR_PEER_FAILED) and *out NULL, what each had made released, together. */
picoll_status_t picoll_cuda_ws_create(MPI_Comm comm, MPI_Comm node_comm, const picoll_config_t *cfg,
                                      picoll_cu_context_t ctx, picoll_cuda_ws_t **out);
/* Collective over the node when shm is not NULL (the node's barrier): closes the peers' mappings,
 * waits until every rank did, then frees. */
void picoll_cuda_ws_destroy(picoll_cuda_ws_t *ws, picoll_shm_t *shm);
/* The release of a freed communicator's workspaces a and b (either NULL) without waiting for the
 * node's other ranks: each waits for its kernels on an application's stream and closes its
 * mappings of the peers' workspaces now, arrives at shm's next barrier, and is freed once every
 * local rank has arrived there (each then maps nothing of this rank's), at a
 * picoll_cuda_retired_poll (the free's own, right after, or a later one). shm (the
 * communicator's, never used again) goes with them. So a rank that frees a communicator goes on
 * at once, as MPI_Comm_free does without picoll, while a peer still waits elsewhere. */
void picoll_cuda_ws_retire(picoll_cuda_ws_t *a, picoll_cuda_ws_t *b, picoll_shm_t *shm);
/* Frees the retired workspaces whose node ranks have all arrived (wait 0: a look, no wait), or
 * all of them, waiting for the ranks as picoll_shm_barrier does (wait 1: MPI_Finalize, where
 * every rank releases every communicator). */
void picoll_cuda_retired_poll(int wait);

/* This rank's vote for running a call on the device (send is NULL in place): every buffer it
 * passes is device memory of one context (*ctx), the type is one the kernels reduce
 * (PICOLL_DT_NONE: copies only), and no CUDA graph capture would make the launch fail. *home: the
 * workspace ws exists and lives in *ctx, the same context still (its id: not one reset since).
 * quick: a call that may go on the hot path (no barrier after it): where the thread's current
 * context was the buffers' at its last call, taken as still current (one driver call, the capture
 * query); the launch checks it, and the call says no where it is not. */
int picoll_cuda_vote(const picoll_cuda_ws_t *ws, const picoll_meminfo_t *send,
                     const picoll_meminfo_t *recv, picoll_dtype_t dt, picoll_cu_context_t *ctx,
                     int *home, int quick);
/* When every local rank voted for the device but some workspace is missing or lives in another
 * context than that rank's buffers, every local rank calls this, collectively: the workspaces are
 * made again, each in its rank's buffers' context ctx, or *ws becomes NULL on every rank if that
 * fails anywhere. A workspace is thus only ever made for device buffers, on their device: never
 * on device 0 of a thread that has not chosen one. */
void picoll_cuda_ws_rehome(picoll_cuda_ws_t **ws, MPI_Comm comm, MPI_Comm node_comm,
                           picoll_shm_t *shm, const picoll_config_t *cfg, picoll_cu_context_t ctx);

/* The device hot path (coll/vote.c): the next device call on ws runs without a barrier
 * before it, as call number call (the same on every rank, never 0): every rank that said yes
 * launches; one that said no publishes it in shm (dev_no) instead and calls
 * picoll_cuda_hot_skip. Then every yes rank's call returns PICOLL_RETRY, having written
 * nothing the caller sees, and every rank's workspace is at the same epoch. */
void picoll_cuda_hot_arm(picoll_cuda_ws_t *ws, picoll_shm_t *shm, uint64_t call);
void picoll_cuda_hot_skip(picoll_cuda_ws_t *ws);

/* Makes ws (just made, collectively, for a stream communicator) a workspace of the application's
 * stream: the collectives below then launch their kernels on that stream and return at once, the
 * epochs counted in device memory (a graph that captured them replays them correctly), and the
 * workspace is watched by picoll_cuda_stream_watch. picoll_cuda_ws_destroy synchronises the
 * stream first (its kernels read the workspace). */
void picoll_cuda_ws_set_stream(picoll_cuda_ws_t *ws, picoll_cu_stream_t stream);
/* Looks once at every stream workspace's running launch (a stream's progress thread calls it about
 * once a second): a launch waiting for a peer past PICOLL_CUDA_SPIN is a late call, as the
 * blocking call's: the peers' processes are looked at, a gone one ends the job naming it, and
 * past PICOLL_TIMEOUT the ranks waited for are named (or the job ends, PICOLL_TIMEOUT_ACTION). */
void picoll_cuda_stream_watch(void);

/* What selection needs of ws, fixed when it was made: the caller keeps a copy. */
picoll_cuda_limits_t picoll_cuda_ws_limits(const picoll_cuda_ws_t *ws);
/* The most ranks of the node on one GPU (the same on every rank of the workspace). */
int picoll_cuda_ws_sharing(const picoll_cuda_ws_t *ws);

/* The device collectives, run after every rank agreed to (they cannot fall back any more), or
 * armed for the hot path (picoll_cuda_hot_arm: PICOLL_RETRY when a rank said no). The
 * result is in the receive buffer when they return PICOLL_OK; a peer that never arrives ends the
 * job.
 * sendbuf may be MPI_IN_PLACE. Allreduce runs kernel mode PICOLL_CUDA_K_ONESHOT, _TWOSHOT or _HCM
 * (the algorithm layer chooses); block: bytes one rank contributes (allgather) or sends to each
 * rank (alltoall). */
picoll_status_t picoll_cuda_allreduce(picoll_cuda_ws_t *ws, picoll_cuda_kmode_t mode,
                                      const void *sendbuf, void *recvbuf, size_t count,
                                      picoll_dtype_t dtype, picoll_op_t op);
picoll_status_t picoll_cuda_allgather(picoll_cuda_ws_t *ws, const void *sendbuf, void *recvbuf,
                                      size_t block);
/* The same in kernel mode PICOLL_CUDA_K_ALLGATHER or _ALLGATHER_LL (the lines). */
picoll_status_t picoll_cuda_allgather_mode(picoll_cuda_ws_t *ws, picoll_cuda_kmode_t mode,
                                           const void *sendbuf, void *recvbuf, size_t block);
picoll_status_t picoll_cuda_alltoall(picoll_cuda_ws_t *ws, const void *sendbuf, void *recvbuf,
                                     size_t block);
/* Reduce-scatter: counts[r] elements for local rank r (MPI_Reduce_scatter_block: all equal); in
 * place, the input is in recvbuf. coll names the call in messages. */
picoll_status_t picoll_cuda_reduce_scatter(picoll_cuda_ws_t *ws, const char *coll,
                                           const void *sendbuf, void *recvbuf, const size_t *counts,
                                           picoll_dtype_t dtype, picoll_op_t op);
/* Broadcast of bytes from local rank root; reduce to local rank root (only its recvbuf is read
 * or written; in place at the root: sendbuf MPI_IN_PLACE). */
picoll_status_t picoll_cuda_bcast(picoll_cuda_ws_t *ws, void *buffer, size_t bytes, int root);
/* Allgatherv: bytes[r] of local rank r at byte offset displs[r] of recvbuf (in place: mine is
 * there already). */
picoll_status_t picoll_cuda_allgatherv(picoll_cuda_ws_t *ws, const void *sendbuf, void *recvbuf,
                                       const size_t *bytes, const size_t *displs);
picoll_status_t picoll_cuda_reduce(picoll_cuda_ws_t *ws, const void *sendbuf, void *recvbuf,
                                   size_t count, picoll_dtype_t dtype, picoll_op_t op, int root);
/* Alltoallv: sbytes[r] from byte offset soffs[r] of sendbuf to local rank r, rbytes[r] from rank r
 * to byte offset roffs[r] of recvbuf. largest: the largest piece of the call over every rank (the
 * same on every rank: it sets the chunk count). */
picoll_status_t picoll_cuda_alltoallv(picoll_cuda_ws_t *ws, const void *sendbuf, void *recvbuf,
                                      const size_t *sbytes, const size_t *soffs,
                                      const size_t *rbytes, const size_t *roffs, size_t largest);

/* picoll_device_floor (picoll.h): what is PICOLL_CUDA_FLOOR_*, the same numbers as
 * PICOLL_FLOOR_*; cuda_floor.c. why: the reason of an error. */
picoll_status_t picoll_cuda_floor(int what, void *stream, int n, size_t bytes, double *seconds,
                                  char *why, size_t len);
/* picoll_device_barrier_floor (picoll.h) on workspace ws, whose every local rank makes the same
 * call: what is PICOLL_CUDA_FLOOR_BARRIER, _BARRIER_QUEUE or _BARRIER_GRAPH; cuda_floor.c. */
picoll_status_t picoll_cuda_barrier_floor(picoll_cuda_ws_t *ws, int what, void *stream, int n,
                                          double *seconds, char *why, size_t len);

/* The vote of a call that may take the zero-copy path (coll/vote.c), before the node's barrier:
 * describes this rank's buffers (send_bytes from sendbuf, MPI_IN_PLACE: none; recv_bytes from
 * recvbuf) into out (PICOLL_CUDA_ZC_DESC_BYTES, this rank's data buffer of the vote's epoch):
 * from ranges registered for scope (the communicator's context) or for all, else
 * (PICOLL_CUDA_ZERO_COPY=on) described now. Returns whether it could (the rank's vote). */
int picoll_cuda_zc_export(picoll_cuda_ws_t *ws, const void *scope, const void *sendbuf,
                          const void *recvbuf, size_t send_bytes, size_t recv_bytes, void *out);
/* After the barrier, where every rank could: the next allreduce (two-shot), allgather or alltoall
 * on ws tries the zero-copy path, the descriptions in shm's buffers of its current epoch. */
void picoll_cuda_zc_arm(picoll_cuda_ws_t *ws, picoll_shm_t *shm);
/* A stream workspace's calls (ws->on_stream, enqueued: no vote): shm, a node workspace of the
 * stream communicator's own (no other thread's barriers), carries its calls' descriptions; ws
 * owns it from here. Without one a stream's calls never take the zero-copy path. */
void picoll_cuda_ws_set_exchange(picoll_cuda_ws_t *ws, picoll_shm_t *shm);
/* A stream's call that may take the zero-copy path (the same on every rank: its size and the
 * configuration decide): describes this rank's buffers and, in one barrier of the stream's
 * exchange, learns whether every rank could; then the call on ws is armed as the vote arms a
 * blocking one (picoll_cuda_zc_arm). Returns whether it was armed. coll names the call in the
 * barrier's messages. */
int picoll_cuda_zc_stream_exchange(picoll_cuda_ws_t *ws, const void *scope, const void *sendbuf,
                                   const void *recvbuf, size_t send_bytes, size_t recv_bytes,
                                   const char *coll);
/* Whether the last call on ws took the zero-copy path. */
int picoll_cuda_zc_last(const picoll_cuda_ws_t *ws);
/* 1 where this process's calls can describe only registered ranges
 * (PICOLL_CUDA_ZERO_COPY=registered) and it has none now: its vote in picoll_cuda_zc_skip_learn. */
int picoll_cuda_zc_nothing_registered(void);
void picoll_cuda_zc_stats(picoll_cuda_zc_stats_t *out);
/* picoll_register / picoll_deregister (picoll.h): bytes at ptr, in one device allocation,
 * described once, for the calls of scope (NULL: every communicator). */
picoll_status_t picoll_cuda_register(const void *scope, void *ptr, size_t bytes, void **handle);
picoll_status_t picoll_cuda_deregister(void *handle);
/* The communicator of scope is freed: the ranges registered for it end with it (no call takes
 * them again, even one of a communicator made later at the same address); their handles stay
 * valid for picoll_cuda_deregister. */
void picoll_cuda_zc_scope_end(const void *scope);
/* picoll_cuda_alloc / picoll_cuda_free (picoll.h): device memory of device's primary context,
 * registered for every communicator. */
void *picoll_cuda_mem_alloc(size_t bytes, int device);
void picoll_cuda_mem_free(void *ptr, int device);

#else /* !PICOLL_HAVE_CUDA */

static inline int picoll_cuda_zc_export(picoll_cuda_ws_t *ws, const void *scope,
                                        const void *sendbuf, const void *recvbuf, size_t send_bytes,
                                        size_t recv_bytes, void *out)
{
    (void)ws, (void)scope, (void)sendbuf, (void)recvbuf, (void)send_bytes, (void)recv_bytes,
        (void)out;
    return 0;
}
static inline void picoll_cuda_zc_arm(picoll_cuda_ws_t *ws, picoll_shm_t *shm)
{
    (void)ws, (void)shm;
}
static inline void picoll_cuda_ws_set_exchange(picoll_cuda_ws_t *ws, picoll_shm_t *shm)
{
    (void)ws, (void)shm;
}
static inline int picoll_cuda_zc_stream_exchange(picoll_cuda_ws_t *ws, const void *scope,
                                                 const void *sendbuf, const void *recvbuf,
                                                 size_t send_bytes, size_t recv_bytes,
                                                 const char *coll)
{
    (void)ws, (void)scope, (void)sendbuf, (void)recvbuf, (void)send_bytes, (void)recv_bytes,
        (void)coll;
    return 0;
}
static inline int picoll_cuda_zc_last(const picoll_cuda_ws_t *ws)
{
    (void)ws;
    return 0;
}
static inline int picoll_cuda_zc_nothing_registered(void)
{
    return 1;
}
static inline void picoll_cuda_zc_stats(picoll_cuda_zc_stats_t *out)
{
    *out = (picoll_cuda_zc_stats_t){0};
}
static inline picoll_status_t picoll_cuda_register(const void *scope, void *ptr, size_t bytes,
                                                   void **handle)
{
    (void)scope, (void)ptr, (void)bytes, (void)handle;
    return PICOLL_ERR_NOT_SUPPORTED;
}
static inline picoll_status_t picoll_cuda_deregister(void *handle)
{
    (void)handle;
    return PICOLL_ERR_NOT_SUPPORTED;
}
static inline void picoll_cuda_zc_scope_end(const void *scope)
{
    (void)scope;
}
static inline void *picoll_cuda_mem_alloc(size_t bytes, int device)
{
    (void)bytes, (void)device;
    return NULL;
}
static inline void picoll_cuda_mem_free(void *ptr, int device)
{
    (void)ptr, (void)device;
}

static inline picoll_status_t picoll_cuda_barrier_floor(picoll_cuda_ws_t *ws, int what,
                                                        void *stream, int n, double *seconds,
                                                        char *why, size_t len)
{
    (void)ws, (void)what, (void)stream, (void)n, (void)seconds;
    snprintf(why, len, "picoll was built without CUDA");
    return PICOLL_ERR_NOT_SUPPORTED;
}

static inline picoll_status_t picoll_cuda_floor(int what, void *stream, int n, size_t bytes,
                                                double *seconds, char *why, size_t len)
{
    (void)what, (void)stream, (void)n, (void)bytes, (void)seconds;
    snprintf(why, len, "picoll was built without CUDA");
    return PICOLL_ERR_NOT_SUPPORTED;
}

static inline int picoll_cuda_device_present(const picoll_config_t *cfg)
{
    (void)cfg;
    return 0;
}
static inline void picoll_cuda_stream_watch(void)
{
}
static inline void picoll_cuda_ws_destroy(picoll_cuda_ws_t *ws, picoll_shm_t *shm)
{
    (void)ws;
    (void)shm;
}
static inline void picoll_cuda_ws_retire(picoll_cuda_ws_t *a, picoll_cuda_ws_t *b,
                                         picoll_shm_t *shm)
{
    (void)a, (void)b, (void)shm;
}
static inline void picoll_cuda_retired_poll(int wait)
{
    (void)wait;
}
static inline int picoll_cuda_vote(const picoll_cuda_ws_t *ws, const picoll_meminfo_t *send,
                                   const picoll_meminfo_t *recv, picoll_dtype_t dt,
                                   picoll_cu_context_t *ctx, int *home, int quick)
{
    (void)ws;
    (void)send;
    (void)recv;
    (void)dt;
    (void)quick;
    *ctx = NULL;
    *home = 0;
    return 0;
}
static inline void picoll_cuda_ws_rehome(picoll_cuda_ws_t **ws, MPI_Comm comm, MPI_Comm node_comm,
                                         picoll_shm_t *shm, const picoll_config_t *cfg,
                                         picoll_cu_context_t ctx)
{
    (void)ws;
    (void)comm;
    (void)node_comm;
    (void)shm;
    (void)cfg;
    (void)ctx;
}
static inline void picoll_cuda_hot_arm(picoll_cuda_ws_t *ws, picoll_shm_t *shm, uint64_t call)
{
    (void)ws;
    (void)shm;
    (void)call;
}
static inline void picoll_cuda_hot_skip(picoll_cuda_ws_t *ws)
{
    (void)ws;
}
static inline picoll_cuda_limits_t picoll_cuda_ws_limits(const picoll_cuda_ws_t *ws)
{
    (void)ws;
    return picoll_cuda_limits(PICOLL_TOPO_REACH_NONE, 0, 0, 0);
}
static inline int picoll_cuda_ws_sharing(const picoll_cuda_ws_t *ws)
{
    (void)ws;
    return 1;
}
static inline picoll_status_t picoll_cuda_allreduce(picoll_cuda_ws_t *ws, picoll_cuda_kmode_t mode,
                                                    const void *sendbuf, void *recvbuf,
                                                    size_t count, picoll_dtype_t dtype,
                                                    picoll_op_t op)
{
    (void)ws, (void)mode, (void)sendbuf, (void)recvbuf, (void)count, (void)dtype, (void)op;
    return PICOLL_DECLINED;
}
static inline picoll_status_t picoll_cuda_allgather(picoll_cuda_ws_t *ws, const void *sendbuf,
                                                    void *recvbuf, size_t block)
{
    (void)ws, (void)sendbuf, (void)recvbuf, (void)block;
    return PICOLL_DECLINED;
}
static inline picoll_status_t picoll_cuda_allgather_mode(picoll_cuda_ws_t *ws,
                                                         picoll_cuda_kmode_t mode,
                                                         const void *sendbuf, void *recvbuf,
                                                         size_t block)
{
    (void)ws, (void)mode, (void)sendbuf, (void)recvbuf, (void)block;
    return PICOLL_DECLINED;
}
static inline picoll_status_t picoll_cuda_alltoall(picoll_cuda_ws_t *ws, const void *sendbuf,
                                                   void *recvbuf, size_t block)
{
    (void)ws, (void)sendbuf, (void)recvbuf, (void)block;
    return PICOLL_DECLINED;
}

static inline picoll_status_t picoll_cuda_reduce_scatter(picoll_cuda_ws_t *ws, const char *coll,
                                                         const void *sendbuf, void *recvbuf,
                                                         const size_t *counts, picoll_dtype_t dtype,
                                                         picoll_op_t op)
{
    (void)ws, (void)coll, (void)sendbuf, (void)recvbuf, (void)counts, (void)dtype, (void)op;
    return PICOLL_DECLINED;
}
static inline picoll_status_t picoll_cuda_bcast(picoll_cuda_ws_t *ws, void *buffer, size_t bytes,
                                                int root)
{
    (void)ws, (void)buffer, (void)bytes, (void)root;
    return PICOLL_DECLINED;
}
static inline picoll_status_t picoll_cuda_allgatherv(picoll_cuda_ws_t *ws, const void *sendbuf,
                                                     void *recvbuf, const size_t *bytes,
                                                     const size_t *displs)
{
    (void)ws, (void)sendbuf, (void)recvbuf, (void)bytes, (void)displs;
    return PICOLL_DECLINED;
}
static inline picoll_status_t picoll_cuda_reduce(picoll_cuda_ws_t *ws, const void *sendbuf,
                                                 void *recvbuf, size_t count, picoll_dtype_t dtype,
                                                 picoll_op_t op, int root)
{
    (void)ws, (void)sendbuf, (void)recvbuf, (void)count, (void)dtype, (void)op, (void)root;
    return PICOLL_DECLINED;
}
static inline picoll_status_t picoll_cuda_alltoallv(picoll_cuda_ws_t *ws, const void *sendbuf,
                                                    void *recvbuf, const size_t *sbytes,
                                                    const size_t *soffs, const size_t *rbytes,
                                                    const size_t *roffs, size_t largest)
{
    (void)ws, (void)sendbuf, (void)recvbuf, (void)sbytes, (void)soffs, (void)rbytes, (void)roffs,
        (void)largest;
    return PICOLL_DECLINED;
}

#endif
#endif
