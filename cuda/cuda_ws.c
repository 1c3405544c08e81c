/* The device workspace of a node communicator: this rank's allocation, the exchange of the IPC
 * handles, the block budget, the node's reach, and the release. The kernels' module is
 * cuda_module.c's, the peers' mappings cuda_ipc.c's, the stream workspaces' list cuda_watch.c's and
 * the thread's context around the driver calls cuda_ctx.c's. Every CUDA call goes through the
 * driver table (src/mem/cudrv.h). */
#include "build-config.h"
#include "cuda/cuda_ws_int.h"
#include "host/shm.h"
#include "topo/node.h"
#include "util/export.h"
#include "util/fatal.h"
#include "util/log.h"
#include "util/proc.h"

#include <limits.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* ws->peers holds a bit per local rank */
#define WS_PEERS_BITS ((int)(sizeof(uint32_t) * CHAR_BIT))
_Static_assert(PICOLL_CUDA_MAX_LOCAL <= WS_PEERS_BITS, "a bit of ws->peers per local rank");

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
                    "multiprocessors are assumed",
                    pct, sms);
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

    PICOLL_CU_TRY(picoll_cu.ctx_get_device(&ws->device), "cuCtxGetDevice");
    msg->device = ws->device;
    picoll_cu_function_t floor[PICOLL_CUDA_FLOOR_FNS];
    status =
        picoll_cuda_module_load(ws->ctx, ws->ctx_id, ws->device, &ws->kernel, ws->fixed, floor);
    if (status != PICOLL_OK) {
        return status;
    }
    PICOLL_CU_TRY(picoll_cu.device_get_attribute(
                      &sms, PICOLL_CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, ws->device),
                  "cuDeviceGetAttribute");
    PICOLL_CU_TRY(picoll_cu.device_get_attribute(
                      &dev_threads, PICOLL_CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK, ws->device),
                  "cuDeviceGetAttribute");
    PICOLL_CU_TRY(picoll_cu.func_get_attribute(
                      &fn_threads, PICOLL_CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK, ws->kernel),
                  "cuFuncGetAttribute");
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
                    "collectives fall back",
                    ws->device, ws->threads, ws->nlocal);
        return PICOLL_ERR_NOT_SUPPORTED;
    }
    PICOLL_CU_TRY(picoll_cu.occupancy_max_blocks(&per_sm, ws->kernel, ws->threads, 0),
                  "cuOccupancyMaxActiveBlocksPerMultiprocessor");
    per_sm = per_sm < 1 ? 1 : per_sm;
    picoll_cuda_fixed_fit(ws->fixed, ws->threads, per_sm);
    msg->resident = sms * per_sm;
    msg->own = ws_context_sms(sms, msg->mps) * per_sm;
    if (picoll_cfg.cuda_blocks > 0 && picoll_cfg.cuda_blocks < msg->own) {
        msg->own = (int)picoll_cfg.cuda_blocks; /* the fewest any rank asks for: agreed */
    }
    msg->threads = ws->threads;
    /* PICOLL_CUDA_SMALL_THREADS: whole warps, at least one per local rank's wait (one warp) */
    ws->small_threads = (int)((picoll_cfg.cuda_small_threads + 31) / 32 * 32);
    ws->small_threads = ws->small_threads > ws->threads ? ws->threads : ws->small_threads;
    PICOLL_CU_TRY(
        picoll_cu.device_get_pci_bus_id(msg->bus_id, (int)sizeof(msg->bus_id), ws->device),
        "cuDeviceGetPCIBusId");
    for (char *c = msg->bus_id; *c; c++) {
        *c = (char)(*c >= 'A' && *c <= 'F' ? *c - 'A' + 'a' : *c);
    }
    ws->slot_size = picoll_cuda_slot_bytes(cfg->workspace_size);
    ws->ll_size = picoll_cuda_ll_area_bytes(ws->nlocal, cfg->cuda_ll_max);
    size_t bytes = PICOLL_CUDA_FLAGS_BYTES + 2 * ws->slot_size + 2 * ws->ll_size;
    PICOLL_CU_TRY(picoll_cu.mem_alloc(&base, bytes), "cuMemAlloc");
    ws->base = (char *)(uintptr_t)base;
    /* on this thread's stream, not the legacy one, which would also wait for kernels other
     * threads have queued (and those for their peers); synchronised: peers read them next. The
     * line areas too: a low-latency line is taken when its flags match (cuda_kernel.h), and
     * memory that held another workspace's lines may hold those flags (the data buffers' bytes
     * are never read before they are written) */
    PICOLL_CU_TRY(
        picoll_cu.memset_d8_async(base, 0, PICOLL_CUDA_FLAGS_BYTES, PICOLL_CU_STREAM_PER_THREAD),
        "cuMemsetD8Async");
    if (ws->ll_size != 0) {
        PICOLL_CU_TRY(picoll_cu.memset_d8_async(base + PICOLL_CUDA_FLAGS_BYTES + 2 * ws->slot_size,
                                                0, 2 * ws->ll_size, PICOLL_CU_STREAM_PER_THREAD),
                      "cuMemsetD8Async");
    }
    PICOLL_CU_TRY(picoll_cu.memcpy_htod_async(base + PICOLL_CUDA_HELLO_WORD * sizeof(uint64_t),
                                              &hello, sizeof(hello), PICOLL_CU_STREAM_PER_THREAD),
                  "cuMemcpyHtoDAsync");
    PICOLL_CU_TRY(picoll_cu.stream_synchronize(PICOLL_CU_STREAM_PER_THREAD), "cuStreamSynchronize");
    PICOLL_CU_TRY(picoll_cu.ipc_get_mem_handle(&msg->handle, base), "cuIpcGetMemHandle");
    PICOLL_CU_TRY(picoll_cu.mem_host_alloc(&status_host, sizeof(picoll_cuda_status_t),
                                           PICOLL_CU_MEMHOSTALLOC_DEVICEMAP |
                                               PICOLL_CU_MEMHOSTALLOC_PORTABLE),
                  "cuMemHostAlloc");
    ws->status = status_host;
    memset(status_host, 0, sizeof(picoll_cuda_status_t));
    PICOLL_CU_TRY(picoll_cu.mem_host_get_device_pointer(&status_dev, status_host, 0),
                  "cuMemHostGetDevicePointer");
    ws->status_dev = (picoll_cuda_status_t *)(uintptr_t)status_dev;
    msg->ok = 1;
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
                                     : sharing > 0             ? sharing
                                                               : 1);
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

/* The local ranks 0 .. nlocal - 1 but me, as a set of ws->peers. */
static uint32_t ws_peers_all(int nlocal, int me)
{
    return (nlocal >= WS_PEERS_BITS ? ~0u : (1u << nlocal) - 1) & ~(1u << me);
}

/* The node's reach (topo/node.h: the ranks' GPUs in the node's topology, or one GPU or not where
 * there is none) for ws, and on a hybrid cube mesh the peers this rank maps and waits for: its
 * quad and its relay only. all: every local rank's message, nlocal of them valid. */
static picoll_topo_reach_t ws_reach(picoll_cuda_ws_t *ws, MPI_Comm node_comm,
                                    const picoll_config_t *cfg, const ws_msg_t *all,
                                    const ws_msg_t *mine, int nlocal)
{
    picoll_topo_gpu_id_t id = {.index = mine->device};
    picoll_topo_node_reach_t nr;
    int same = 1;

    for (int r = 1; r < nlocal; r++) {
        same &= strcmp(all[r].bus_id, all[0].bus_id) == 0;
    }
    snprintf(id.bus_id, sizeof(id.bus_id), "%s", mine->bus_id);
    picoll_topo_node_reach(node_comm, cfg, &id, ws->me, same, &nr);
    if (nr.known && nr.reach == PICOLL_TOPO_REACH_NONE) {
        picoll_info("device collectives fall back on this communicator: %s", nr.why);
    }
    if (nr.hcm) {
        ws->hcm = 1;
        ws->relay = nr.plan.relay;
        ws->quad_first = nr.plan.mine_first;
        ws->peers = 1u << nr.plan.relay;
        for (int k = 0; k < PICOLL_TOPO_HCM_QUAD; k++) {
            ws->quad[k] = nr.plan.quad[k];
            ws->peers |= 1u << nr.plan.quad[k];
        }
        ws->peers &= ~(1u << ws->me);
    }
    return nr.reach;
}

/* The local half of a workspace's release: its kernels on an application's stream waited for,
 * the peers' workspaces unmapped. Returns whether its context was entered (into *saved: left by
 * ws_free); 0 for a context reset or destroyed since the workspace was made, which took its
 * memory, mappings and module with it: nothing is closed or freed then, as their addresses may
 * belong to others now. */
static int ws_enter(picoll_cuda_ws_t *ws, picoll_cuda_saved_ctx_t *saved)
{
    int stale = ws->ctx != NULL && ws->ctx_id != picoll_cudrv_ctx_id(ws->ctx);
    if (stale) {
        picoll_debug("device workspace of a context reset or destroyed since: its memory and "
                     "mappings went with it");
    }
    return ws->ctx != NULL && !stale && picoll_cuda_enter_setup(ws->ctx, saved) == PICOLL_OK;
}

static int ws_quiesce(picoll_cuda_ws_t *ws, picoll_cuda_saved_ctx_t *saved)
{
    int entered = ws_enter(ws, saved);
    if (ws->on_stream) {
        picoll_cuda_watch_remove(ws);
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
    picoll_cuda_ipc_unmap_peers(ws, entered);
    return entered;
}

/* The second half, once no peer maps this rank's workspace any more: its memory freed (in its
 * context, entered again where retired apart from the first half), ws with it. */
static void ws_free(picoll_cuda_ws_t *ws, int entered, picoll_cuda_saved_ctx_t *saved)
{
    if (entered && ws->base != NULL) {
        picoll_cudrv_check(picoll_cu.mem_free((picoll_cu_deviceptr_t)(uintptr_t)ws->base),
                           "cuMemFree");
    }
    if (entered && ws->status != NULL) {
        picoll_cudrv_check(picoll_cu.mem_free_host(ws->status), "cuMemFreeHost");
    }
    if (entered) {
        picoll_cuda_leave(saved);
    }
    picoll_cuda_zc_forget(ws);
    free(ws);
}

/* CUDA leaves freeing memory that another process still maps undefined: every rank closes its
 * mappings, all pass a barrier (after which no rank maps anything, and no kernel can run: each
 * rank's last call ended with its own kernel's completion), then each frees its own. The barrier:
 * the node's shared-memory one where shm is not NULL, else PMPI_Barrier over node_comm where that
 * is not MPI_COMM_NULL (a failed creation, which has no shm). */
static void ws_release(picoll_cuda_ws_t *ws, picoll_shm_t *shm, MPI_Comm node_comm)
{
    picoll_cuda_saved_ctx_t saved = {0};
    int entered = ws_quiesce(ws, &saved);
    if (shm != NULL) {
        picoll_shm_barrier(shm, 1, "the release of the device workspace");
    } else if (node_comm != MPI_COMM_NULL && PMPI_Barrier(node_comm) != MPI_SUCCESS) {
        picoll_warn("PMPI_Barrier before the release of the device workspace failed");
    }
    ws_free(ws, entered, &saved);
}

void picoll_cuda_ws_destroy(picoll_cuda_ws_t *ws, picoll_shm_t *shm)
{
    if (ws != NULL) {
        ws_release(ws, shm, MPI_COMM_NULL);
    }
}

/* The workspaces of freed communicators, waiting for the node's other ranks to unmap them: the
 * free's barrier, arrived at and not waited for (picoll_cuda_ws_retire). */
typedef struct retired {
    picoll_cuda_ws_t *ws[2];
    picoll_shm_t *shm;
    uint64_t epoch;
    struct retired *next;
} retired_t;
static retired_t *retired_list;
static pthread_mutex_t retired_lock = PTHREAD_MUTEX_INITIALIZER;
static _Atomic int retired_count;

static void retired_free(retired_t *r)
{
    for (int k = 0; k < 2; k++) {
        picoll_cuda_saved_ctx_t saved = {0};
        if (r->ws[k] != NULL) {
            /* a context reset or destroyed since (or before) the free took the memory with it */
            ws_free(r->ws[k], ws_enter(r->ws[k], &saved), &saved);
        }
    }
    picoll_shm_destroy(r->shm);
    free(r->shm);
    free(r);
}

void picoll_cuda_ws_retire(picoll_cuda_ws_t *a, picoll_cuda_ws_t *b, picoll_shm_t *shm)
{
    retired_t *r = calloc(1, sizeof(*r));
    if (r == NULL) {
        /* no room to keep them: the release as it was, a barrier of the node */
        picoll_cuda_ws_destroy(a, shm);
        picoll_cuda_ws_destroy(b, shm);
        picoll_shm_destroy(shm);
        free(shm);
        return;
    }
    r->ws[0] = a;
    r->ws[1] = b;
    for (int k = 0; k < 2; k++) {
        picoll_cuda_saved_ctx_t saved = {0};
        if (r->ws[k] != NULL && ws_quiesce(r->ws[k], &saved)) {
            picoll_cuda_leave(&saved);
        }
    }
    r->shm = shm;
    r->epoch = picoll_shm_arrive(shm, 1);
    pthread_mutex_lock(&retired_lock);
    r->next = retired_list;
    retired_list = r;
    atomic_fetch_add_explicit(&retired_count, 1, memory_order_relaxed);
    pthread_mutex_unlock(&retired_lock);
    picoll_debug("device workspace retired: freed once every rank of the node has unmapped it "
                 "(%d waiting)",
                 atomic_load_explicit(&retired_count, memory_order_relaxed));
}

void picoll_cuda_retired_poll(int wait)
{
    if (atomic_load_explicit(&retired_count, memory_order_relaxed) == 0) {
        return;
    }
    pthread_mutex_lock(&retired_lock);
    for (retired_t **at = &retired_list; *at != NULL;) {
        retired_t *r = *at;
        if (wait) {
            picoll_shm_wait_all(r->shm, r->epoch, 1,
                                "the release of a freed communicator's "
                                "device workspace");
        } else if (!picoll_shm_reached(r->shm, r->epoch)) {
            at = &r->next;
            continue;
        }
        *at = r->next;
        atomic_fetch_sub_explicit(&retired_count, 1, memory_order_relaxed);
        retired_free(r);
    }
    pthread_mutex_unlock(&retired_lock);
}

PICOLL_EXPORT int picoll_test_cuda_retired(void);
int picoll_test_cuda_retired(void)
{
    return atomic_load_explicit(&retired_count, memory_order_relaxed);
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
                    "collectives fall back",
                    ws->nlocal, PICOLL_CUDA_MAX_LOCAL);
        status = PICOLL_ERR_NOT_SUPPORTED;
    } else if (ctx == NULL) {
        status = PICOLL_ERR_NOT_SUPPORTED; /* no device buffers here: nothing to make it on */
    } else if ((status = picoll_cuda_enter_setup(ctx, &saved)) == PICOLL_OK) {
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
    ws->peers = ws_peers_all(ws->nlocal, ws->me);
    ws->reach = ws_reach(ws, node_comm, cfg, all, &mine, all_ok ? ws->nlocal : 1);
    if (ws->reach == PICOLL_TOPO_REACH_HCM && !ws->hcm) {
        ws->reach = PICOLL_TOPO_REACH_NONE; /* no plan (not one rank per GPU): hand over */
    }
    int other = -1, sliced = all_ok ? ws_time_sliced(all, ws->nlocal, &other) : -1;
    if (sliced >= 0) {
        if (ws->me == 0) {
            picoll_info("local ranks %d and %d share GPU %s without MPS: their kernels would be "
                        "time-sliced, so device collectives fall back (start MPS: "
                        "nvidia-cuda-mps-control -d)",
                        sliced, other, all[sliced].bus_id);
        }
        ws->reach = PICOLL_TOPO_REACH_NONE;
    }
    ws->limits = picoll_cuda_limits(ws->reach, ws->nlocal, ws->slot_size, cfg->cuda_ll_max);
    ws->limits.dtypes = picoll_cuda_dtype_mask();
    /* all_ok is the same on every rank: either all map, or none */
    if (all_ok && picoll_cuda_ipc_map_peers(ws, all) != PICOLL_OK) {
        status = PICOLL_ERR_CUDA;
    }
    if (!all_ok && status == PICOLL_OK) {
        status = PICOLL_ERR_PEER_FAILED;
    }
    /* fail together: a rank whose mapping of a peer failed is the only one that knows, and the
     * peers that mapped it must close their mappings before it frees */
    int ok = status == PICOLL_OK, every = 0;
    if (PMPI_Allreduce(&ok, &every, 1, MPI_INT, MPI_MIN, node_comm) != MPI_SUCCESS) {
        picoll_warn("PMPI_Allreduce of the device workspace's outcome failed");
        status = status == PICOLL_OK ? PICOLL_ERR_MPI : status;
        every = 0;
    }
    if (!every && status == PICOLL_OK) {
        status = PICOLL_ERR_PEER_FAILED;
    }
    if (entered) {
        picoll_cuda_leave(&saved);
    }
    picoll_debug("device workspace on device %d: %d local ranks (%d on one GPU at most), 2 x %zu "
                 "bytes, %d blocks of %d threads (resident: %d, this context's: %d), reach %s: %s",
                 ws->device, ws->nlocal, ws->sharing, ws->slot_size, ws->max_blocks, ws->threads,
                 all[ws->me].resident, all[ws->me].own, picoll_topo_reach_name(ws->reach),
                 picoll_status_string(status));
    free(all);
    if (status != PICOLL_OK) {
        ws_release(ws, NULL, node_comm); /* every rank: the outcome is agreed */
        *out = NULL;
        return status;
    }
    *out = ws;
    return PICOLL_OK;
}

void picoll_cuda_ws_rehome(picoll_cuda_ws_t **ws, MPI_Comm comm, MPI_Comm node_comm,
                           picoll_shm_t *shm, const picoll_config_t *cfg, picoll_cu_context_t ctx)
{
    int old = *ws != NULL ? (*ws)->device : -1;

    picoll_cuda_ws_destroy(*ws, shm);
    *ws = NULL;
    /* the same on every rank: a workspace everywhere, or none anywhere */
    int all_ok = picoll_cuda_ws_create(comm, node_comm, cfg, ctx, ws) == PICOLL_OK;
    if (!all_ok) {
        picoll_info("device workspace %s where this rank's buffers are: failed somewhere, device "
                    "collectives fall back",
                    old >= 0 ? "moved" : "made");
    } else if (old >= 0) {
        picoll_info("device workspace moved to device %d, where this rank's buffers are: ok",
                    (*ws)->device);
    }
}

picoll_cuda_limits_t picoll_cuda_ws_limits(const picoll_cuda_ws_t *ws)
{
    return ws->limits;
}

int picoll_cuda_ws_sharing(const picoll_cuda_ws_t *ws)
{
    return ws->sharing;
}
