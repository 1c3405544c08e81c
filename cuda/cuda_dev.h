/* The device executor, as the rest of picoll sees it: a device workspace per node communicator
 * (CUDA IPC), and the collectives run on it. No CUDA header: when picoll is built without CUDA
 * these are stubs that never offer a device path. */
#ifndef PICOLL_CUDA_DEV_H
#define PICOLL_CUDA_DEV_H

#include <mpi.h>
#include <stddef.h>

#include "build-config.h"
#include "config.h"
#include "coll/dispatch.h"
#include "status.h"
#include "topo/topo.h"

typedef struct picoll_cuda_ws picoll_cuda_ws_t;

#ifdef PICOLL_HAVE_CUDA

/* 1 when the CUDA runtime sees at least one device (and PICOLL_CUDA is on). Cheap after the first
 * call; never initialises a device context. */
int picoll_cuda_device_present(const picoll_config_t *cfg);

/* Collective over node_comm, the ranks of comm on this (one) node, which all found a device:
 * allocates this rank's workspace on its current device, exchanges IPC handles, maps every peer's
 * and checks each mapping by reading a known value through it, and finds the node's reach
 * (NVLink, PCIe) from the topology. Every rank takes part in every exchange, even after a local
 * failure; the return value is this rank's outcome, for the caller's agreement. *out is set (to a
 * workspace the caller must destroy) whatever the outcome. */
picoll_status_t picoll_cuda_ws_create(MPI_Comm comm, MPI_Comm node_comm, const picoll_config_t *cfg,
                                      picoll_cuda_ws_t **out);
void picoll_cuda_ws_destroy(picoll_cuda_ws_t *ws);

/* This rank's vote for running a call on the device: every buffer it passes is device memory of
 * the workspace's device, and the type is one the kernels reduce (PICOLL_DT_NONE: copies only). */
int picoll_cuda_vote(const picoll_cuda_ws_t *ws, const void *sendbuf, const void *recvbuf,
                     picoll_dtype_t dt, int *home);
/* *home (above) is 0 when every buffer of this rank is device memory of one other device than the
 * workspace's, which was made on the device current when the communicator was first used (maybe
 * before the application chose one). Then every local rank calls this, collectively: the
 * workspace is made again, on device (this rank's buffers' device, or -1: the current one), or
 * *ws becomes NULL on every rank if that fails anywhere. */
void picoll_cuda_ws_rehome(picoll_cuda_ws_t **ws, MPI_Comm comm, MPI_Comm node_comm,
                           const picoll_config_t *cfg, int device);
/* The device of this rank's buffers when they are all on one device, else -1. */
int picoll_cuda_buffers_device(const void *sendbuf, const void *recvbuf);

/* Selection inputs: the node's reach and one data buffer's size. */
picoll_topo_reach_t picoll_cuda_ws_reach(const picoll_cuda_ws_t *ws);
size_t picoll_cuda_ws_slot_size(const picoll_cuda_ws_t *ws);

/* The device algorithms, run after every rank agreed to (they cannot fall back any more). The
 * result is in the receive buffer when they return; a peer that never arrives ends the job. */
/* alg: PICOLL_ALLREDUCE_CUDA_ONESHOT, _TWOSHOT or _HCM (coll/algs.h). */
picoll_status_t picoll_cuda_allreduce(picoll_cuda_ws_t *ws, const picoll_allreduce_args_t *args,
                                      int alg);
picoll_status_t picoll_cuda_allgather(picoll_cuda_ws_t *ws, const picoll_blocks_args_t *args);
picoll_status_t picoll_cuda_alltoall(picoll_cuda_ws_t *ws, const picoll_blocks_args_t *args);

#else /* !PICOLL_HAVE_CUDA */

static inline int picoll_cuda_device_present(const picoll_config_t *cfg)
{
    (void)cfg;
    return 0;
}
static inline picoll_status_t picoll_cuda_ws_create(MPI_Comm comm, MPI_Comm node_comm,
                                                    const picoll_config_t *cfg,
                                                    picoll_cuda_ws_t **out)
{
    (void)comm;
    (void)node_comm;
    (void)cfg;
    *out = NULL;
    return PICOLL_ERR_DISABLED;
}
static inline void picoll_cuda_ws_destroy(picoll_cuda_ws_t *ws)
{
    (void)ws;
}
static inline int picoll_cuda_vote(const picoll_cuda_ws_t *ws, const void *sendbuf,
                                   const void *recvbuf, picoll_dtype_t dt, int *home)
{
    (void)ws;
    (void)sendbuf;
    (void)recvbuf;
    (void)dt;
    *home = 1;
    return 0;
}
static inline void picoll_cuda_ws_rehome(picoll_cuda_ws_t **ws, MPI_Comm comm, MPI_Comm node_comm,
                                         const picoll_config_t *cfg, int device)
{
    (void)ws;
    (void)comm;
    (void)node_comm;
    (void)cfg;
    (void)device;
}
static inline int picoll_cuda_buffers_device(const void *sendbuf, const void *recvbuf)
{
    (void)sendbuf;
    (void)recvbuf;
    return -1;
}
static inline picoll_topo_reach_t picoll_cuda_ws_reach(const picoll_cuda_ws_t *ws)
{
    (void)ws;
    return PICOLL_TOPO_REACH_NONE;
}
static inline size_t picoll_cuda_ws_slot_size(const picoll_cuda_ws_t *ws)
{
    (void)ws;
    return 0;
}
static inline picoll_status_t picoll_cuda_allreduce(picoll_cuda_ws_t *ws,
                                                    const picoll_allreduce_args_t *args, int alg)
{
    (void)ws;
    (void)args;
    (void)alg;
    return PICOLL_ERR_DISABLED;
}
static inline picoll_status_t picoll_cuda_allgather(picoll_cuda_ws_t *ws,
                                                    const picoll_blocks_args_t *args)
{
    (void)ws;
    (void)args;
    return PICOLL_ERR_DISABLED;
}
static inline picoll_status_t picoll_cuda_alltoall(picoll_cuda_ws_t *ws,
                                                   const picoll_blocks_args_t *args)
{
    (void)ws;
    (void)args;
    return PICOLL_ERR_DISABLED;
}

#endif
#endif
