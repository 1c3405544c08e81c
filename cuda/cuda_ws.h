/* The device workspace's internals, shared by cuda_ws.c (set-up) and cuda_coll.c (the
 * collectives). Built only with CUDA. */
#ifndef PICOLL_CUDA_WS_H
#define PICOLL_CUDA_WS_H

#include <cuda_runtime_api.h>
#include <stdint.h>

#include "cuda/cuda_dev.h"
#include "cuda/cuda_kernel.h"
#include "cudrv.h"

/* Only picoll's own workspace is ever mapped: user data is copied into it by the kernels, so no
 * user buffer is exported through IPC and no cache of user-buffer mappings (with its stale-entry
 * problem when an address is freed and reused) is needed. */
struct picoll_cuda_ws {
    int device;                 /* where the workspace lives: the current device at set-up */
    int nlocal, me;             /* ranks on the node, and mine */
    int comm_size;              /* of the user's communicator, for error messages */
    int comm_ranks[PICOLL_CUDA_MAX_LOCAL]; /* rank in the user's communicator of each local rank */
    int max_blocks;             /* the fewest SMs among the node's GPUs, capped */
    size_t slot_size;           /* bytes of one data buffer */
    char *base;                 /* my allocation: flags, then two data buffers */
    char *peer[PICOLL_CUDA_MAX_LOCAL]; /* the peers' allocations as mapped here (mine: base) */
    int mapped[PICOLL_CUDA_MAX_LOCAL]; /* peer[r] came from cudaIpcOpenMemHandle */
    cudaStream_t stream;        /* non-blocking, picoll's own */
    cudaEvent_t ready;          /* the application's prior work on the default streams */
    picoll_cuda_error_t *err;   /* host view of the kernels' error word (mapped pinned memory) */
    picoll_cuda_error_t *err_dev;
    uint64_t epoch;             /* arrivals so far (the same sequence on every rank) */
    uint64_t last_epoch;        /* epoch of the last launch's last arrival, 0 before any */
    int last_blocks;            /* blocks of that launch */
    double timeout;             /* seconds, PICOLL_TIMEOUT */
    picoll_topo_reach_t reach;
    uint32_t peers;             /* local ranks mapped, waited for and told when done (not me) */
    int hcm;                    /* reach hcm with a plan: allreduce runs the HCM kernel */
    int quad[4], relay, quad_first; /* hcm: picoll_topo_hcm_plan_t */
};

/* The calling thread's current context, put back as it was at the end of a call: a thread that
 * never chose a device (PyTorch's MPI worker) must not be left on one, nor get a context created
 * on device 0 by a cudaSetDevice(0) meant to restore it. */
typedef struct {
    picoll_cu_context_t ctx;
    int saved;
} picoll_cuda_saved_ctx_t;
/* Makes device current (saving what was); returns a cudaError_t. */
cudaError_t picoll_cuda_enter(int device, picoll_cuda_saved_ctx_t *saved);
void picoll_cuda_leave(const picoll_cuda_saved_ctx_t *saved);

static inline char *picoll_cuda_slot(const picoll_cuda_ws_t *ws, int rank, uint64_t parity)
{
    return ws->peer[rank] + PICOLL_CUDA_FLAGS_BYTES + (parity & 1) * ws->slot_size;
}

#endif
