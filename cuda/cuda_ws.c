/* The device workspace of a node communicator: the kernel module, allocation, IPC exchange, the
 * proof of peer access, the node's reach, and the release. Every CUDA call goes through the
 * driver table (src/cudrv.h). */
#include "build-config.h"
#include "cuda/cuda_ws.h"
#include "host/shm.h"
#include "topo/node.h"
#include "util/dtype.h"
#include "util/fatal.h"
#include "util/log.h"
#include "util/proc.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define WS_HELLO 0x7069636f6c6c0000ull /* "picoll" and the rank in the user's communicator */
#define CUDA_ERROR_NO_BINARY_FOR_GPU 209

/* Translate a CUDA error where it enters: log the call once, return PICOLL_ERR_CUDA (from a
 * function with nothing to undo: what it made so far, picoll_cuda_ws_destroy releases). */
#define WS_CHECK(call, name)                                                                  \
    do {                                                                                      \
        if (picoll_cudrv_check((call), (name)) != PICOLL_OK) {                                \
            return PICOLL_ERR_CUDA;                                                           \
        }                                                                                     \
    } while (0)

typedef struct {
    picoll_cu_ipc_handle_t handle;
    int ok;        /* the allocation and the handle exist */
    int comm_rank;
    int resident;  /* blocks of the kernel the GPU holds at once (SMs x blocks per SM) */
    int own;       /* of those, what this rank's context may hold: under MPS with an SM limit
                    * (CUDA_MPS_ACTIVE_THREAD_PERCENTAGE) its SMs x blocks per SM */
    int threads;   /* threads per block this rank can launch */
    int mps;       /* the device shares contexts through MPS (kernels of ranks run at once) */
    int device;
    char bus_id[PICOLL_TOPO_BUSID_LEN];
    uint64_t pid, start; /* who I am, for the peers that will wait for me (util/proc.h) */
} ws_msg_t;

int picoll_cuda_device_present(const picoll_config_t *cfg)
{
    return cfg->cuda && picoll_cudrv_device_count() > 0;
}

int picoll_cuda_enter_from(picoll_cu_context_t ctx, picoll_cu_context_t cur,
                           picoll_cuda_saved_ctx_t *saved)
{
    int rc = 0;
    saved->prev = cur;
    saved->switched = 0;
    saved->mode_set = 0;
    if (cur != ctx) {
        rc = picoll_cu.ctx_set_current(ctx);
        saved->switched = rc == 0;
    }
    return rc;
}

int picoll_cuda_enter(picoll_cu_context_t ctx, picoll_cuda_saved_ctx_t *saved)
{
    picoll_cu_context_t cur = NULL;
    int rc = picoll_cu.ctx_get_current(&cur);
    if (rc != 0) {
        saved->switched = 0;
        saved->mode_set = 0;
        return rc;
    }
    return picoll_cuda_enter_from(ctx, cur, saved);
}

int picoll_cuda_enter_setup(picoll_cu_context_t ctx, picoll_cuda_saved_ctx_t *saved)
{
    int rc = picoll_cuda_enter(ctx, saved);
    saved->mode = PICOLL_CU_STREAM_CAPTURE_MODE_RELAXED;
    if (rc == 0 && picoll_cu.thread_exchange_capture_mode(&saved->mode) == 0) {
        saved->mode_set = 1;
    }
    return rc;
}

void picoll_cuda_leave(const picoll_cuda_saved_ctx_t *saved)
{
    if (saved->mode_set) {
        int mode = saved->mode;
        picoll_cu.thread_exchange_capture_mode(&mode);
    }
    if (saved->switched) {
        picoll_cu.ctx_set_current(saved->prev);
    }
}

/* The kernel entries of fixed type, op and rank count, in PICOLL_CUDA_FIXED_LIST's order. */
static const struct {
    int type, op, nranks;
    const char *name;
} ws_fixed[] = {
#define WS_FIXED_ENTRY(tag, e, dtype, op, nr) {e, op, nr, PICOLL_CUDA_FIXED_NAME(tag, nr)},
#define WS_FIXED_RANKS(tag, e, dtype, op) PICOLL_CUDA_FIXED_RANKS(WS_FIXED_ENTRY, tag, e, dtype, op)
    PICOLL_CUDA_FIXED_LIST(WS_FIXED_RANKS)
#undef WS_FIXED_RANKS
#undef WS_FIXED_ENTRY
};
_Static_assert(sizeof(ws_fixed) / sizeof(ws_fixed[0]) == PICOLL_CUDA_FIXED_COUNT,
               "PICOLL_CUDA_FIXED_COUNT: the entries of PICOLL_CUDA_FIXED_LIST x RANKS");

picoll_cu_function_t picoll_cuda_ws_function(const picoll_cuda_ws_t *ws,
                                             const picoll_cuda_kparams_t *p)
{
    if (picoll_cfg.cuda_fixed && picoll_cuda_fixed_mode(p->mode)) {
        for (int k = 0; k < PICOLL_CUDA_FIXED_COUNT; k++) {
            if (ws_fixed[k].type == p->type && ws_fixed[k].op == p->op &&
                ws_fixed[k].nranks == p->nranks) {
                return ws->fixed[k] != NULL ? ws->fixed[k] : ws->kernel;
            }
        }
    }
    return ws->kernel;
}

/* The kernel in the current context ctx (id: its id): the fatbin is loaded once per context, for
 * the life of the context (a module cannot be unloaded while another communicator's workspace
 * uses it). A context reset since, at the same handle, has another id: its module went with the
 * reset, and is loaded again. */
static picoll_status_t ws_kernel(picoll_cu_context_t ctx, unsigned long long id, int device,
                                 picoll_cu_function_t *out, picoll_cu_function_t *fixed,
                                 picoll_cu_function_t *floor)
{
    static struct {
        picoll_cu_context_t ctx;
        unsigned long long id;
        picoll_cu_function_t fn, floor;
        picoll_cu_function_t fixed[PICOLL_CUDA_FIXED_COUNT];
    } cache[16];
    static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
    picoll_status_t status = PICOLL_OK;
    picoll_cu_module_t mod = NULL;
    int rc, slot = -1;

    pthread_mutex_lock(&lock);
    for (int i = 0; i < 16 && slot < 0; i++) {
        if (cache[i].ctx == ctx || cache[i].ctx == NULL) {
            slot = i;
        }
    }
    if (slot >= 0 && cache[slot].ctx == ctx && cache[slot].id == id) {
        *out = cache[slot].fn;
        *floor = cache[slot].floor;
        memcpy(fixed, cache[slot].fixed, sizeof(cache[slot].fixed));
        goto unlock;
    }
    rc = picoll_cu.module_load_data(&mod, picoll_cuda_fatbin);
    if (rc == CUDA_ERROR_NO_BINARY_FOR_GPU) {
        int major = 0, minor = 0;
        picoll_cu.device_get_attribute(&major, PICOLL_CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR,
                                       device);
        picoll_cu.device_get_attribute(&minor, PICOLL_CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR,
                                       device);
        picoll_info("no device collectives on device %d: no kernel image for compute capability "
                    "%d.%d (picoll's kernels need 7.0 or later; built for %s)", device, major,
                    minor, PICOLL_CUDA_ARCHS);
        status = PICOLL_ERR_NOT_SUPPORTED;
        goto unlock;
    }
    if (picoll_cudrv_check(rc, "cuModuleLoadData") != PICOLL_OK ||
        picoll_cudrv_check(picoll_cu.module_get_function(out, mod, PICOLL_CUDA_KERNEL_NAME),
                           "cuModuleGetFunction") != PICOLL_OK) {
        status = PICOLL_ERR_CUDA;
        goto unlock;
    }
    for (int k = 0; k < PICOLL_CUDA_FIXED_COUNT; k++) {
        /* a module without the entry (not expected: built from the same source) runs the
         * generic kernel for it */
        if (picoll_cu.module_get_function(&fixed[k], mod, ws_fixed[k].name) != 0) {
            picoll_debug("kernel entry %s not found in the module: its calls take %s",
                         ws_fixed[k].name, PICOLL_CUDA_KERNEL_NAME);
            fixed[k] = NULL;
        }
    }
    if (picoll_cu.module_get_function(floor, mod, PICOLL_CUDA_FLOOR_NAME) != 0) {
        *floor = NULL; /* picoll_device_floor says so */
    }
    if (slot >= 0) {
        cache[slot].ctx = ctx;
        cache[slot].id = id;
        cache[slot].fn = *out;
        cache[slot].floor = *floor;
        memcpy(cache[slot].fixed, fixed, sizeof(cache[slot].fixed));
    }
unlock:
    pthread_mutex_unlock(&lock);
    return status;
}

picoll_status_t picoll_cuda_floor_function(picoll_cu_context_t ctx, picoll_cu_function_t *fn)
{
    picoll_cu_function_t kernel, fixed[PICOLL_CUDA_FIXED_COUNT];
    picoll_cu_device_t device = 0;
    if (picoll_cu.ctx_get_device(&device) != 0) {
        return PICOLL_ERR_CUDA;
    }
    picoll_status_t st = ws_kernel(ctx, picoll_cudrv_ctx_id(ctx), (int)device, &kernel, fixed, fn);
    return st != PICOLL_OK ? st : *fn != NULL ? PICOLL_OK : PICOLL_ERR_NOT_SUPPORTED;
}

/* Multiprocessors the current context may use, of the device's sms (issue 26, defect 3): an MPS
 * client limited by CUDA_MPS_ACTIVE_THREAD_PERCENTAGE runs on that share only. The context's
 * execution affinity says so where the driver has cuCtxGetExecAffinity; else MPS's own variable,
 * read as its clients do (rounded down, at least 1: the effective limit is at SM granularity). */
static int ws_context_sms(int sms, int mps)
{
    picoll_cu_exec_affinity_t aff = {.type = PICOLL_CU_EXEC_AFFINITY_TYPE_SM_COUNT};
    if (picoll_cu.ctx_get_exec_affinity != NULL &&
        picoll_cu.ctx_get_exec_affinity(&aff, PICOLL_CU_EXEC_AFFINITY_TYPE_SM_COUNT) == 0 &&
        aff.sm_count > 0) {
        return (int)aff.sm_count < sms ? (int)aff.sm_count : sms;
    }
    const char *pct = mps ? getenv("CUDA_MPS_ACTIVE_THREAD_PERCENTAGE") : NULL;
    char *end;
    double p = pct != NULL ? strtod(pct, &end) : 100.0;
    if (pct != NULL && (end == pct || *end != '\0' || p <= 0.0 || p > 100.0)) {
        picoll_warn("CUDA_MPS_ACTIVE_THREAD_PERCENTAGE=%s is not a percentage in (0, 100]: all %d "
                    "multiprocessors are assumed", pct, sms);
        p = 100.0;
    }
    int n = (int)((double)sms * p / 100.0);
    return n < 1 ? 1 : n > sms ? sms : n;
}

/* This rank's half, in the current context: kernel, allocation, export, hello value, status. */
static picoll_status_t ws_alloc(picoll_cuda_ws_t *ws, const picoll_config_t *cfg, ws_msg_t *msg)
{
    picoll_status_t status = PICOLL_OK;
    uint64_t hello = WS_HELLO | (uint64_t)msg->comm_rank;
    picoll_cu_deviceptr_t base = 0, status_dev = 0;
    void *status_host = NULL;
    int sms = 0, per_sm = 0, dev_threads = 0, fn_threads = 0;

    WS_CHECK(picoll_cu.ctx_get_device(&ws->device), "cuCtxGetDevice");
    msg->device = ws->device;
    picoll_cu_function_t floor;
    status = ws_kernel(ws->ctx, ws->ctx_id, ws->device, &ws->kernel, ws->fixed, &floor);
    if (status != PICOLL_OK) {
        return status;
    }
    WS_CHECK(picoll_cu.device_get_attribute(&sms, PICOLL_CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT,
                                            ws->device), "cuDeviceGetAttribute");
    WS_CHECK(picoll_cu.device_get_attribute(&dev_threads,
                                            PICOLL_CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK,
                                            ws->device), "cuDeviceGetAttribute");
    WS_CHECK(picoll_cu.func_get_attribute(&fn_threads,
                                          PICOLL_CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK,
                                          ws->kernel), "cuFuncGetAttribute");
    /* an older driver does not know the attribute: then no MPS is assumed */
    if (picoll_cu.device_get_attribute(&msg->mps, PICOLL_CU_DEVICE_ATTRIBUTE_MPS_ENABLED,
                                       ws->device) != 0) {
        msg->mps = 0;
    }
    ws->threads = PICOLL_CUDA_THREADS;
    ws->threads = dev_threads < ws->threads ? dev_threads : ws->threads;
    ws->threads = fn_threads < ws->threads ? fn_threads : ws->threads;
    if (ws->threads < ws->nlocal) { /* thread t of a block waits for local rank t */
        picoll_info("device %d runs %d threads per block, fewer than the %d local ranks: device "
                    "collectives fall back", ws->device, ws->threads, ws->nlocal);
        return PICOLL_ERR_NOT_SUPPORTED;
    }
    WS_CHECK(picoll_cu.occupancy_max_blocks(&per_sm, ws->kernel, ws->threads, 0),
             "cuOccupancyMaxActiveBlocksPerMultiprocessor");
    per_sm = per_sm < 1 ? 1 : per_sm;
    for (int k = 0; k < PICOLL_CUDA_FIXED_COUNT; k++) {
        /* an entry runs only where it takes the generic kernel's threads and keeps as many
         * blocks resident (the blocks per launch follow the generic kernel): the same launch
         * bounds give that, unless a build said otherwise */
        int k_threads = 0, k_per_sm = 0;
        if (ws->fixed[k] != NULL &&
            (picoll_cu.func_get_attribute(&k_threads,
                                          PICOLL_CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK,
                                          ws->fixed[k]) != 0 ||
             picoll_cu.occupancy_max_blocks(&k_per_sm, ws->fixed[k], ws->threads, 0) != 0 ||
             k_threads < ws->threads || k_per_sm < per_sm)) {
            picoll_debug("kernel entry %s: %d threads, %d blocks per multiprocessor, where %s has "
                         "%d and %d: its calls take %s", ws_fixed[k].name, k_threads, k_per_sm,
                         PICOLL_CUDA_KERNEL_NAME, ws->threads, per_sm, PICOLL_CUDA_KERNEL_NAME);
            ws->fixed[k] = NULL;
        }
    }
    msg->resident = sms * per_sm;
    msg->own = ws_context_sms(sms, msg->mps) * per_sm;
    if (picoll_cfg.cuda_blocks > 0 && picoll_cfg.cuda_blocks < msg->own) {
        msg->own = (int)picoll_cfg.cuda_blocks; /* the fewest any rank asks for: agreed */
    }
    msg->threads = ws->threads;
    /* PICOLL_CUDA_SMALL_THREADS: whole warps, at least one per local rank's wait (one warp) */
    ws->small_threads = (int)((picoll_cfg.cuda_small_threads + 31) / 32 * 32);
    ws->small_threads = ws->small_threads > ws->threads ? ws->threads : ws->small_threads;
    WS_CHECK(picoll_cu.device_get_pci_bus_id(msg->bus_id, (int)sizeof(msg->bus_id), ws->device),
             "cuDeviceGetPCIBusId");
    for (char *c = msg->bus_id; *c; c++) {
        *c = (char)(*c >= 'A' && *c <= 'F' ? *c - 'A' + 'a' : *c);
    }
    ws->slot_size = picoll_cuda_slot_bytes(cfg->workspace_size);
    ws->ll_size = picoll_cuda_ll_area_bytes(ws->nlocal, cfg->cuda_ll_max);
    size_t bytes = PICOLL_CUDA_FLAGS_BYTES + 2 * ws->slot_size + 2 * ws->ll_size;
    WS_CHECK(picoll_cu.mem_alloc(&base, bytes), "cuMemAlloc");
    ws->base = (char *)(uintptr_t)base;
    /* on this thread's stream, not the legacy one, which would also wait for kernels other
     * threads have queued (and those for their peers); synchronised: peers read them next. The
     * line areas too: a low-latency line is taken when its flags match (cuda_kernel.h), and
     * memory that held another workspace's lines may hold those flags (the data buffers' bytes
     * are never read before they are written) */
    WS_CHECK(picoll_cu.memset_d8_async(base, 0, PICOLL_CUDA_FLAGS_BYTES, PICOLL_CU_STREAM_PER_THREAD),
             "cuMemsetD8Async");
    if (ws->ll_size != 0) {
        WS_CHECK(picoll_cu.memset_d8_async(base + PICOLL_CUDA_FLAGS_BYTES + 2 * ws->slot_size, 0,
                                           2 * ws->ll_size, PICOLL_CU_STREAM_PER_THREAD),
                 "cuMemsetD8Async");
    }
    WS_CHECK(picoll_cu.memcpy_htod_async(base + PICOLL_CUDA_HELLO_WORD * sizeof(uint64_t), &hello,
                                         sizeof(hello), PICOLL_CU_STREAM_PER_THREAD),
             "cuMemcpyHtoDAsync");
    WS_CHECK(picoll_cu.stream_synchronize(PICOLL_CU_STREAM_PER_THREAD), "cuStreamSynchronize");
    WS_CHECK(picoll_cu.ipc_get_mem_handle(&msg->handle, base), "cuIpcGetMemHandle");
    WS_CHECK(picoll_cu.mem_host_alloc(&status_host, sizeof(picoll_cuda_status_t),
                                      PICOLL_CU_MEMHOSTALLOC_DEVICEMAP |
                                          PICOLL_CU_MEMHOSTALLOC_PORTABLE), "cuMemHostAlloc");
    ws->status = status_host;
    memset(status_host, 0, sizeof(picoll_cuda_status_t));
    WS_CHECK(picoll_cu.mem_host_get_device_pointer(&status_dev, status_host, 0),
             "cuMemHostGetDevicePointer");
    ws->status_dev = (picoll_cuda_status_t *)(uintptr_t)status_dev;
    msg->ok = 1;
    return PICOLL_OK;
}

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
} ws_import_t;

#define WS_IMPORTS 256
static ws_import_t ws_imports[WS_IMPORTS];
static pthread_mutex_t ws_imports_lock = PTHREAD_MUTEX_INITIALIZER;

/* Claims a mapping of peer's GPU in ws->ctx: its entry + 1, or 0 where another context of this
 * device maps that process's GPU (*holder: that context) or the table is full (*holder NULL). */
static int ws_import_claim(const picoll_cuda_ws_t *ws, const ws_msg_t *peer,
                           picoll_cu_context_t *holder)
{
    int found = -1, free_slot = -1;
    *holder = NULL;
    pthread_mutex_lock(&ws_imports_lock);
    for (int i = 0; i < WS_IMPORTS; i++) {
        ws_import_t *e = &ws_imports[i];
        if (e->maps == 0) {
            free_slot = free_slot < 0 ? i : free_slot;
        } else if (e->pid == peer->pid && e->start == peer->start && e->device == ws->device &&
                   strcmp(e->bus_id, peer->bus_id) == 0) {
            found = i;
            break;
        }
    }
    if (found >= 0 && ws_imports[found].ctx != ws->ctx) {
        *holder = ws_imports[found].ctx;
        found = -1;
    } else if (found < 0 && free_slot >= 0) {
        found = free_slot;
        ws_imports[found] = (ws_import_t){.pid = peer->pid, .start = peer->start,
                                          .device = ws->device, .ctx = ws->ctx};
        snprintf(ws_imports[found].bus_id, sizeof(ws_imports[found].bus_id), "%s", peer->bus_id);
    }
    if (found >= 0) {
        ws_imports[found].maps++;
    }
    pthread_mutex_unlock(&ws_imports_lock);
    return found + 1;
}

static void ws_import_release(int entry)
{
    pthread_mutex_lock(&ws_imports_lock);
    if (entry > 0 && ws_imports[entry - 1].maps > 0) {
        ws_imports[entry - 1].maps--;
    }
    pthread_mutex_unlock(&ws_imports_lock);
}

/* Map the workspace of every peer in ws->peers and read its hello value through the mapping. */
static picoll_status_t ws_map_peers(picoll_cuda_ws_t *ws, const ws_msg_t *all)
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
                WS_CHECK(picoll_cu.device_can_access_peer(&can, ws->device, dev),
                         "cuDeviceCanAccessPeer");
            }
            if (!can) {
                picoll_info("no peer access from GPU %s to GPU %s of local rank %d: device "
                            "collectives fall back", all[ws->me].bus_id, all[r].bus_id, r);
                return PICOLL_ERR_NOT_SUPPORTED;
            }
        }
        picoll_cu_context_t holder = NULL;
        ws->import[r] = ws_import_claim(ws, &all[r], &holder);
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
                            "peer GPUs mapped in this process", WS_IMPORTS);
            }
            return PICOLL_ERR_NOT_SUPPORTED;
        }
        if (picoll_cudrv_check(picoll_cu.ipc_open_mem_handle(
                                   &p, all[r].handle, PICOLL_CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS),
                               "cuIpcOpenMemHandle") != PICOLL_OK) {
            ws_import_release(ws->import[r]);
            ws->import[r] = 0;
            return PICOLL_ERR_CUDA;
        }
        ws->peer[r] = (char *)(uintptr_t)p;
        ws->mapped[r] = 1;
        WS_CHECK(picoll_cu.memcpy_dtoh_async(&v, p + PICOLL_CUDA_HELLO_WORD * sizeof(uint64_t),
                                             sizeof(v), PICOLL_CU_STREAM_PER_THREAD),
                 "cuMemcpyDtoHAsync");
        WS_CHECK(picoll_cu.stream_synchronize(PICOLL_CU_STREAM_PER_THREAD), "cuStreamSynchronize");
        if (v != (WS_HELLO | (uint64_t)all[r].comm_rank)) {
            picoll_warn("device workspace of local rank %d (device %d) reads back %#llx through its "
                        "IPC mapping: no peer access, device collectives fall back",
                        r, all[r].device, (unsigned long long)v);
            return PICOLL_ERR_CUDA;
        }
    }
    return PICOLL_OK;
}

/* More ranks than this on one GPU launch together at most half the blocks it holds (issue 49: 4
 * ranks on an H200, 64 blocks each of its 264, hung in PyTorch runs, the default stream's 16 MiB
 * all_reduce and DDP's 25 MiB buckets, 5 of 6 runs; 32 each passed every run, docs/torch.md) */
#define WS_FULL_SHARING 2

/* Blocks per launch, the same on every rank: block b of every rank waits for block b of the
 * others, so with several ranks on one GPU running at once (MPS) all their blocks must be resident
 * together. The fewest, over the node's ranks, of the blocks its GPU holds divided by the ranks on
 * it (by twice that where more than WS_FULL_SHARING share it: the rest of the processes' work
 * keeps room), and of the blocks its own context may hold (an MPS client limited to a share of
 * the SMs, or PICOLL_CUDA_BLOCKS). *most: the most ranks on one GPU. */
static int ws_max_blocks(const ws_msg_t *all, int nlocal, int *most)
{
    int best = PICOLL_CUDA_MAX_BLOCKS;
    *most = 1;
    for (int r = 0; r < nlocal; r++) {
        int sharing = 0;
        if (!all[r].ok) {
            continue;
        }
        for (int q = 0; q < nlocal; q++) {
            sharing += all[q].ok && strcmp(all[q].bus_id, all[r].bus_id) == 0;
        }
        *most = sharing > *most ? sharing : *most;
        int fit = all[r].resident / (sharing > WS_FULL_SHARING ? 2 * sharing
                                                               : sharing > 0 ? sharing : 1);
        fit = all[r].own < fit ? all[r].own : fit;
        if (fit < best) {
            best = fit;
        }
    }
    return best < 1 ? 1 : best;
}

/* Ranks that share a GPU without MPS have one context each, time-sliced: a kernel spinning on the
 * flags of a kernel that cannot run until its slice ends costs whole slices per call. Returns the
 * first such pair's lower local rank, or -1. */
static int ws_time_sliced(const ws_msg_t *all, int nlocal, int *other)
{
    for (int r = 0; r < nlocal; r++) {
        for (int q = r + 1; q < nlocal; q++) {
            if (strcmp(all[q].bus_id, all[r].bus_id) == 0 && !(all[q].mps && all[r].mps)) {
                *other = q;
                return r;
            }
        }
    }
    return -1;
}

/* The node topology is detected once per process (NVML and hwloc are slow to load). */
static pthread_once_t ws_topo_once = PTHREAD_ONCE_INIT;
static picoll_topo_t *ws_topo;
static const picoll_config_t *ws_topo_cfg;

static void ws_topo_load(void)
{
    char err[256];
    ws_topo = calloc(1, sizeof(*ws_topo));
    if (ws_topo != NULL && picoll_topo_load(ws_topo_cfg, ws_topo, err, sizeof(err)) != PICOLL_OK) {
        picoll_warn("GPU topology not available (%s): device thresholds for PCIe are used", err);
        picoll_topo_init(ws_topo, "unavailable");
    }
}

/* Reach of the node's ranks: from the topology (none there: every device call falls back);
 * where there is no topology (no NVML), from the ranks' bus ids, since every mapping has just
 * been proven (one shared GPU: nvlink thresholds, else pcie). */
static picoll_topo_reach_t ws_reach(picoll_cuda_ws_t *ws, MPI_Comm node_comm,
                                    const picoll_config_t *cfg, const ws_msg_t *all,
                                    const ws_msg_t *mine, int nlocal)
{
    picoll_topo_node_t node;
    picoll_topo_gpu_id_t id = {.index = mine->device};
    picoll_topo_reach_t reach = PICOLL_TOPO_REACH_NONE;
    int same = 1;

    ws_topo_cfg = cfg;
    pthread_once(&ws_topo_once, ws_topo_load);
    snprintf(id.bus_id, sizeof(id.bus_id), "%s", mine->bus_id);
    if (cfg->topo_file[0] != '\0' && cfg->topo_file_gpu == PICOLL_TOPO_FILE_GPU_LOCAL_RANK) {
        id.bus_id[0] = '\0';
        id.index = ws->me;
    }
    int known = 0;
    if (ws_topo != NULL && picoll_topo_node_build(node_comm, ws_topo, &id, &node) == PICOLL_OK) {
        picoll_topo_hcm_plan_t plan;
        reach = node.reach;
        known = ws_topo->ngpus > 0;
        if (known && reach == PICOLL_TOPO_REACH_NONE) {
            picoll_info("device collectives fall back on this communicator: %s", node.why);
        }
        if (reach == PICOLL_TOPO_REACH_HCM && picoll_topo_hcm_plan(&node, ws->me, &plan) == PICOLL_OK) {
            ws->hcm = 1;
            ws->relay = plan.relay;
            ws->quad_first = plan.mine_first;
            ws->peers = 1u << plan.relay;
            for (int k = 0; k < 4; k++) {
                ws->quad[k] = plan.quad[k];
                ws->peers |= 1u << plan.quad[k];
            }
            ws->peers &= ~(1u << ws->me);
        }
        picoll_topo_node_free(&node);
    } else if (ws_topo == NULL) {
        /* still take part in the exchange the others make */
        picoll_topo_t none;
        picoll_topo_init(&none, "no memory");
        if (picoll_topo_node_build(node_comm, &none, &id, &node) == PICOLL_OK) {
            picoll_topo_node_free(&node);
        }
    }
    for (int r = 1; r < nlocal; r++) {
        same &= strcmp(all[r].bus_id, all[0].bus_id) == 0;
    }
    if (!known) {
        reach = same ? PICOLL_TOPO_REACH_NVLINK : PICOLL_TOPO_REACH_PCIE;
    }
    return reach;
}

picoll_status_t picoll_cuda_ws_create(MPI_Comm comm, MPI_Comm node_comm, const picoll_config_t *cfg,
                                      picoll_cu_context_t ctx, picoll_cuda_ws_t **out)
{
    picoll_status_t status = PICOLL_OK;
    picoll_cuda_saved_ctx_t saved = {0};
    ws_msg_t mine = {.ok = 0}, *all = NULL;
    picoll_cuda_ws_t *ws = calloc(1, sizeof(*ws));
    int entered = 0;

    PMPI_Comm_rank(comm, &mine.comm_rank);
    mine.pid = (uint64_t)getpid();
    mine.start = picoll_proc_start_time(getpid());
    if (ws == NULL) {
        /* the others are entering the exchanges below: leaving them would hang the job */
        picoll_fatal("out of memory setting up the device workspace: aborting the job");
    }
    PMPI_Comm_size(comm, &ws->comm_size);
    PMPI_Comm_rank(node_comm, &ws->me);
    PMPI_Comm_size(node_comm, &ws->nlocal);
    ws->ctx = ctx;
    ws->ctx_id = picoll_cudrv_ctx_id(ctx);
    ws->timeout = cfg->timeout;
    ws->spin = cfg->cuda_spin;
    ws->device = -1;
    all = calloc((size_t)ws->nlocal, sizeof(*all));
    if (all == NULL) {
        picoll_fatal("out of memory setting up the device workspace: aborting the job");
    }
    if (ws->nlocal > PICOLL_CUDA_MAX_LOCAL) {
        picoll_info("%d ranks on the node, more than the %d a device workspace serves: device "
                    "collectives fall back", ws->nlocal, PICOLL_CUDA_MAX_LOCAL);
        status = PICOLL_ERR_NOT_SUPPORTED;
    } else if (ctx == NULL) {
        status = PICOLL_ERR_NOT_SUPPORTED; /* no device buffers here: nothing to make it on */
    } else if (picoll_cudrv_check(picoll_cuda_enter_setup(ctx, &saved), "cuCtxSetCurrent") !=
               PICOLL_OK) {
        status = PICOLL_ERR_CUDA;
    } else {
        entered = 1;
        status = ws_alloc(ws, cfg, &mine);
    }
    if (PMPI_Allgather(&mine, (int)sizeof(mine), MPI_BYTE, all, (int)sizeof(mine), MPI_BYTE,
                       node_comm) != MPI_SUCCESS) {
        picoll_warn("PMPI_Allgather of the device workspace handles failed");
        status = PICOLL_ERR_MPI;
        memset(all, 0, (size_t)ws->nlocal * sizeof(*all));
    }
    int all_ok = 1;
    for (int r = 0; r < ws->nlocal; r++) {
        all_ok &= all[r].ok;
        if (r < PICOLL_CUDA_MAX_LOCAL) {
            ws->comm_ranks[r] = all[r].comm_rank;
            /* a peer in another pid namespace publishes a pid that names nobody, or somebody
             * else, here: only peers whose start time matches what this rank sees are watched */
            ws->pid[r] = all[r].pid;
            ws->pstart[r] = all[r].start;
            ws->watch[r] = r != ws->me && picoll_proc_watchable((pid_t)all[r].pid, all[r].start);
        }
    }
    ws->max_blocks = ws_max_blocks(all, ws->nlocal, &ws->sharing);
    /* the reach first: on a hybrid cube mesh each rank maps its quad and its relay only */
    ws->peers = (ws->nlocal >= 32 ? ~0u : (1u << ws->nlocal) - 1) & ~(1u << ws->me);
    ws->reach = ws_reach(ws, node_comm, cfg, all, &mine, all_ok ? ws->nlocal : 1);
    if (ws->reach == PICOLL_TOPO_REACH_HCM && !ws->hcm) {
        ws->reach = PICOLL_TOPO_REACH_NONE; /* no plan (not one rank per GPU): hand over */
    }
    int other = -1, sliced = all_ok ? ws_time_sliced(all, ws->nlocal, &other) : -1;
    if (sliced >= 0) {
        if (ws->me == 0) {
            picoll_info("local ranks %d and %d share GPU %s without MPS: their kernels would be "
                        "time-sliced, so device collectives fall back (start MPS: "
                        "nvidia-cuda-mps-control -d)", sliced, other, all[sliced].bus_id);
        }
        ws->reach = PICOLL_TOPO_REACH_NONE;
    }
    /* all_ok is the same on every rank: either all map, or none */
    if (all_ok && ws_map_peers(ws, all) != PICOLL_OK) {
        status = PICOLL_ERR_CUDA;
    }
    if (!all_ok && status == PICOLL_OK) {
        status = PICOLL_ERR_PEER_FAILED;
    }
    if (entered) {
        picoll_cuda_leave(&saved);
    }
    picoll_debug("device workspace on device %d: %d local ranks (%d on one GPU at most), 2 x %zu "
                 "bytes, %d blocks of %d threads (resident: %d, this context's: %d), reach %s: %s",
                 ws->device, ws->nlocal, ws->sharing, ws->slot_size, ws->max_blocks, ws->threads,
                 all[ws->me].resident, all[ws->me].own,
                 picoll_topo_reach_name(ws->reach), picoll_status_string(status));
    free(all);
    *out = ws;
    return status;
}

void picoll_cuda_ws_rehome(picoll_cuda_ws_t **ws, MPI_Comm comm, MPI_Comm node_comm,
                           picoll_shm_t *shm, const picoll_config_t *cfg, picoll_cu_context_t ctx)
{
    int old = *ws != NULL ? (*ws)->device : -1, ok = 0, all_ok = 0;

    picoll_cuda_ws_destroy(*ws, shm);
    *ws = NULL;
    ok = picoll_cuda_ws_create(comm, node_comm, cfg, ctx, ws) == PICOLL_OK;
    if (PMPI_Allreduce(&ok, &all_ok, 1, MPI_INT, MPI_MIN, node_comm) != MPI_SUCCESS) {
        all_ok = 0;
    }
    if (old >= 0 || !all_ok) {
        picoll_info("device workspace %s device %d, where this rank's buffers are: %s",
                    old >= 0 ? "moved to" : "made on", *ws != NULL ? (*ws)->device : -1,
                    all_ok ? "ok" : "failed somewhere, device collectives fall back");
    }
    if (!all_ok) {
        picoll_cuda_ws_destroy(*ws, shm);
        *ws = NULL;
    }
}

/* The stream workspaces, for their watch (picoll_cuda_stream_watch). */
static picoll_cuda_ws_t *watch_list;
static pthread_mutex_t watch_lock = PTHREAD_MUTEX_INITIALIZER;

void picoll_cuda_ws_set_stream(picoll_cuda_ws_t *ws, picoll_cu_stream_t stream)
{
    ws->stream = stream;
    ws->on_stream = 1;
    pthread_mutex_lock(&watch_lock);
    ws->watch_next = watch_list;
    watch_list = ws;
    pthread_mutex_unlock(&watch_lock);
}

void picoll_cuda_ws_each_stream(void (*fn)(picoll_cuda_ws_t *ws))
{
    pthread_mutex_lock(&watch_lock);
    for (picoll_cuda_ws_t *ws = watch_list; ws != NULL; ws = ws->watch_next) {
        fn(ws);
    }
    pthread_mutex_unlock(&watch_lock);
}

static void ws_unwatch(picoll_cuda_ws_t *ws)
{
    pthread_mutex_lock(&watch_lock);
    for (picoll_cuda_ws_t **link = &watch_list; *link != NULL; link = &(*link)->watch_next) {
        if (*link == ws) {
            *link = ws->watch_next;
            break;
        }
    }
    pthread_mutex_unlock(&watch_lock);
    free(ws->watch_late);
    ws->watch_late = NULL;
}

/* CUDA leaves freeing memory that another process still maps undefined: every rank closes its
 * mappings, all pass a barrier (after which no rank maps anything, and no kernel can run: each
 * rank's last call ended with its own kernel's completion), then each frees its own. */
void picoll_cuda_ws_destroy(picoll_cuda_ws_t *ws, picoll_shm_t *shm)
{
    picoll_cuda_saved_ctx_t saved = {0};
    int entered;

    if (ws == NULL) {
        return;
    }
    /* a context reset (or destroyed) since the workspace was made took its memory, mappings and
     * module with it: nothing is closed or freed, as their addresses may belong to others now */
    int stale = ws->ctx != NULL && ws->ctx_id != picoll_cudrv_ctx_id(ws->ctx);
    if (stale) {
        picoll_debug("device workspace of a context reset or destroyed since: its memory and "
                     "mappings went with it");
    }
    entered = ws->ctx != NULL && !stale && picoll_cuda_enter_setup(ws->ctx, &saved) == 0;
    if (ws->on_stream) {
        ws_unwatch(ws);
        /* the kernels enqueued on the application's stream read the workspace until they end
         * (the stream must still exist: MPIX_Stream_free comes after the communicators') */
        if (entered && ws->stream == PICOLL_CU_STREAM_PER_THREAD &&
            picoll_cu.ctx_synchronize != NULL) {
            /* the per-thread handle names the freeing thread's stream, perhaps not the one that
             * took the kernels: the whole context (the legacy stream is one stream: just it) */
            picoll_cudrv_check(picoll_cu.ctx_synchronize(), "cuCtxSynchronize");
        } else if (entered) {
            picoll_cudrv_check(picoll_cu.stream_synchronize(ws->stream), "cuStreamSynchronize");
        }
    }
    for (int r = 0; r < ws->nlocal && r < PICOLL_CUDA_MAX_LOCAL; r++) {
        if (entered && ws->mapped[r]) {
            picoll_cudrv_check(picoll_cu.ipc_close_mem_handle((picoll_cu_deviceptr_t)(uintptr_t)ws->peer[r]),
                               "cuIpcCloseMemHandle");
        }
        ws_import_release(ws->import[r]);
    }
    if (shm != NULL) {
        picoll_shm_barrier(shm, 1, "the release of the device workspace");
    }
    if (entered && ws->base != NULL) {
        picoll_cudrv_check(picoll_cu.mem_free((picoll_cu_deviceptr_t)(uintptr_t)ws->base),
                           "cuMemFree");
    }
    if (entered && ws->status != NULL) {
        picoll_cudrv_check(picoll_cu.mem_free_host(ws->status), "cuMemFreeHost");
    }
    if (entered) {
        picoll_cuda_leave(&saved);
    }
    free(ws);
}

picoll_topo_reach_t picoll_cuda_ws_reach(const picoll_cuda_ws_t *ws)
{
    return ws->reach;
}

int picoll_cuda_ws_sharing(const picoll_cuda_ws_t *ws)
{
    return ws->sharing;
}

size_t picoll_cuda_ws_slot_size(const picoll_cuda_ws_t *ws)
{
    return ws->slot_size;
}
