/* What the files of the device workspace's set-up share, and nothing outside them sees: the
 * message each local rank publishes at set-up, the hello value a mapping is proven by, and the
 * functions of the module cache (cuda_module.c), the IPC import table (cuda_ipc.c) and the stream
 * watch list (cuda_watch.c) that the workspace (cuda_ws.c) calls. */
#ifndef PICOLL_CUDA_WS_INT_H
#define PICOLL_CUDA_WS_INT_H

#include <stdint.h>

#include "cuda/cuda_ws.h"

#define WS_HELLO 0x7069636f6c6c0000ull /* "picoll" and the rank in the user's communicator */

/* What each local rank publishes at set-up (one PMPI_Allgather over the node). */
typedef struct {
    picoll_cu_ipc_handle_t handle;
    int ok; /* the allocation and the handle exist */
    int comm_rank;
    int resident; /* blocks of the kernel the GPU holds at once (SMs x blocks per SM) */
    int own;      /* of those, what this rank's context may hold: under MPS with an SM limit
                    * (CUDA_MPS_ACTIVE_THREAD_PERCENTAGE) its SMs x blocks per SM */
    int threads;  /* threads per block this rank can launch */
    int mps;      /* the device shares contexts through MPS (kernels of ranks run at once) */
    int device;
    char bus_id[PICOLL_TOPO_BUSID_LEN];
    uint64_t pid, start; /* who I am, for the peers that will wait for me (util/proc.h) */
} ws_msg_t;

/* ------------------------------------------------------------------ the module (cuda_module.c) */
/* The generic kernel (*out), the fixed entries (fixed[PICOLL_CUDA_FIXED_COUNT], NULL where the
 * module lacks one) and the floors' kernels (floor[PICOLL_CUDA_FLOOR_FNS], NULL where it lacks one)
 * in the current context
 * ctx (id: picoll_cudrv_ctx_id), loading the fatbin once per context. PICOLL_ERR_NOT_SUPPORTED
 * where the fatbin has no image for device, PICOLL_ERR_CUDA where the driver fails. */
picoll_status_t picoll_cuda_module_load(picoll_cu_context_t ctx, unsigned long long id, int device,
                                        picoll_cu_function_t *out, picoll_cu_function_t *fixed,
                                        picoll_cu_function_t *floor);
/* Drops (to NULL) each fixed entry that does not take threads per block or keeps fewer than
 * per_sm blocks resident per multiprocessor, as the generic kernel does: its calls take that. */
void picoll_cuda_fixed_fit(picoll_cu_function_t *fixed, int threads, int per_sm);

/* ------------------------------------------------------------------ IPC (cuda_ipc.c) */
/* Maps the workspace of every peer in ws->peers (all: every local rank's message) and reads its
 * hello value through the mapping; a failure leaves what it mapped in ws->mapped and ws->import,
 * for picoll_cuda_ipc_unmap_peers. */
picoll_status_t picoll_cuda_ipc_map_peers(picoll_cuda_ws_t *ws, const ws_msg_t *all);
/* Releases every peer's entry in the process's import table, closing its mapping first where
 * close (ws->ctx is current and still the one that mapped it). */
void picoll_cuda_ipc_unmap_peers(picoll_cuda_ws_t *ws, int close);

/* ------------------------------------------------------------------ the watch (cuda_watch.c) */
/* Takes a stream workspace off the watch list (picoll_cuda_ws_set_stream) and frees its late
 * call's wait. */
void picoll_cuda_watch_remove(picoll_cuda_ws_t *ws);

#endif
