/* The peers' workspaces mapped through CUDA IPC: the process-wide table of what this process
 * imports (which context maps which peer process's GPU), the mapping of a workspace's peers with
 * its proof (a known value read through each mapping), and their release. */
#include "build-config.h"
#include "cuda/cuda_ws_int.h"
#include "util/log.h"

#include <pthread.h>
#include <stdio.h>
#include <string.h>

/* CUDA IPC lets one context per device of this process open the handles that one device of
 * another process exports ("CUipcMemHandles from each CUdevice in a given process may only be
 * opened by one CUcontext per CUdevice per other process", cuIpcOpenMemHandle): a second context
 * on the same device (a communicator whose buffers are in a context the application created,
 * beside one in the primary context) is refused. A mapping belongs to the context that opened it
 * (a kernel of another context cannot load through it), so it cannot be shared either: the
 * process keeps, per peer process, peer GPU and local device, the context that maps it and how
 * many mappings it holds, and a workspace in another context of that device falls back with a
 * line that says why, instead of a failed driver call. */
typedef struct {
    uint64_t pid, start;                /* the peer process */
    char bus_id[PICOLL_TOPO_BUSID_LEN]; /* its GPU */
    int device;                         /* the local device that maps it */
    picoll_cu_context_t ctx;            /* the context that does */
    int maps;                           /* its live mappings; 0: a free entry */
} ipc_import_t;

#define IPC_IMPORTS 256 /* peer processes' GPUs mapped at once, over every context */
static ipc_import_t ipc_imports[IPC_IMPORTS];
static pthread_mutex_t ipc_imports_lock = PTHREAD_MUTEX_INITIALIZER;

/* Claims a mapping of peer's GPU in ws->ctx: its entry + 1, or 0 where another context of this
 * device maps that process's GPU (*holder: that context) or the table is full (*holder NULL). */
static int ipc_import_claim(const picoll_cuda_ws_t *ws, const ws_msg_t *peer,
                            picoll_cu_context_t *holder)
{
    int found = -1, free_slot = -1;
    *holder = NULL;
    pthread_mutex_lock(&ipc_imports_lock);
    for (int i = 0; i < IPC_IMPORTS; i++) {
        ipc_import_t *e = &ipc_imports[i];
        if (e->maps == 0) {
            free_slot = free_slot < 0 ? i : free_slot;
        } else if (e->pid == peer->pid && e->start == peer->start && e->device == ws->device &&
                   strcmp(e->bus_id, peer->bus_id) == 0) {
            found = i;
            break;
        }
    }
    if (found >= 0 && ipc_imports[found].ctx != ws->ctx) {
        *holder = ipc_imports[found].ctx;
        found = -1;
    } else if (found < 0 && free_slot >= 0) {
        found = free_slot;
        ipc_imports[found] = (ipc_import_t){
            .pid = peer->pid, .start = peer->start, .device = ws->device, .ctx = ws->ctx};
        snprintf(ipc_imports[found].bus_id, sizeof(ipc_imports[found].bus_id), "%s", peer->bus_id);
    }
    if (found >= 0) {
        ipc_imports[found].maps++;
    }
    pthread_mutex_unlock(&ipc_imports_lock);
    return found + 1;
}

static void ipc_import_release(int entry)
{
    pthread_mutex_lock(&ipc_imports_lock);
    if (entry > 0 && ipc_imports[entry - 1].maps > 0) {
        ipc_imports[entry - 1].maps--;
    }
    pthread_mutex_unlock(&ipc_imports_lock);
}

picoll_status_t picoll_cuda_ipc_map_peers(picoll_cuda_ws_t *ws, const ws_msg_t *all)
{
    for (int r = 0; r < ws->nlocal; r++) {
        uint64_t v = 0;
        picoll_cu_deviceptr_t p = 0;
        if (r == ws->me) {
            ws->peer[r] = ws->base;
            continue;
        }
        if (!(ws->peers >> r & 1u)) {
            continue; /* hcm: a GPU this one never reads (across sockets, no peer access) */
        }
        if (strcmp(all[r].bus_id, all[ws->me].bus_id) != 0) {
            /* another GPU: where this process sees it, ask whether kernels here can load from it
             * (a mapping without peer access would still serve the copy below, but fault in a
             * kernel); where it does not, cuIpcOpenMemHandle needs peer access itself */
            picoll_cu_device_t dev = -1;
            int can = 1;
            if (picoll_cu.device_get_by_pci_bus_id(&dev, all[r].bus_id) == 0) {
                PICOLL_CU_TRY(picoll_cu.device_can_access_peer(&can, ws->device, dev),
                              "cuDeviceCanAccessPeer");
            }
            if (!can) {
                picoll_info("no peer access from GPU %s to GPU %s of local rank %d: device "
                            "collectives fall back",
                            all[ws->me].bus_id, all[r].bus_id, r);
                return PICOLL_ERR_NOT_SUPPORTED;
            }
        }
        picoll_cu_context_t holder = NULL;
        ws->import[r] = ipc_import_claim(ws, &all[r], &holder);
        if (ws->import[r] == 0) {
            if (holder != NULL) {
                picoll_info("device collectives fall back on this communicator: its buffers are in "
                            "context %p of device %d, and context %p of that device already maps "
                            "GPU %s of local rank %d's process for another communicator (CUDA IPC "
                            "lets one context per device open one process's handles: keep the "
                            "buffers of every communicator in one context per device)",
                            (void *)ws->ctx, ws->device, (void *)holder, all[r].bus_id, r);
            } else {
                picoll_info("device collectives fall back on this communicator: more than %d "
                            "peer GPUs mapped in this process",
                            IPC_IMPORTS);
            }
            return PICOLL_ERR_NOT_SUPPORTED;
        }
        /* refused: the claim stays in ws->import, for picoll_cuda_ipc_unmap_peers */
        PICOLL_CU_TRY(picoll_cu.ipc_open_mem_handle(&p, all[r].handle,
                                                    PICOLL_CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS),
                      "cuIpcOpenMemHandle");
        ws->peer[r] = (char *)(uintptr_t)p;
        ws->mapped[r] = 1;
        PICOLL_CU_TRY(picoll_cu.memcpy_dtoh_async(&v, p + PICOLL_CUDA_HELLO_WORD * sizeof(uint64_t),
                                                  sizeof(v), PICOLL_CU_STREAM_PER_THREAD),
                      "cuMemcpyDtoHAsync");
        PICOLL_CU_TRY(picoll_cu.stream_synchronize(PICOLL_CU_STREAM_PER_THREAD),
                      "cuStreamSynchronize");
        if (v != (WS_HELLO | (uint64_t)all[r].comm_rank)) {
            picoll_warn(
                "device workspace of local rank %d (device %d) reads back %#llx through its "
                "IPC mapping: no peer access, device collectives fall back",
                r, all[r].device, (unsigned long long)v);
            return PICOLL_ERR_CUDA;
        }
    }
    return PICOLL_OK;
}

void picoll_cuda_ipc_unmap_peers(picoll_cuda_ws_t *ws, int close)
{
    for (int r = 0; r < ws->nlocal && r < PICOLL_CUDA_MAX_LOCAL; r++) {
        if (close && ws->mapped[r]) {
            picoll_cu_deviceptr_t p = (picoll_cu_deviceptr_t)(uintptr_t)ws->peer[r];
            picoll_cudrv_check(picoll_cu.ipc_close_mem_handle(p), "cuIpcCloseMemHandle");
        }
        ipc_import_release(ws->import[r]);
    }
}
