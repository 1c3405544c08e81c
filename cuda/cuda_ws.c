/* The device workspace of a node communicator: allocation, IPC exchange, the proof of peer access,
 * and the node's reach. */
#include "build-config.h"
#include "cuda/cuda_ws.h"
#include "log.h"
#include "topo/node.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define WS_HELLO 0x7069636f6c6c0000ull /* "picoll" and the rank in the user's communicator */

/* Translate a CUDA error where it enters: log the call once, return PICOLL_ERR_CUDA. */
#define WS_CHECK(call)                                                                        \
    do {                                                                                      \
        cudaError_t ws_err_ = (call);                                                         \
        if (ws_err_ != cudaSuccess) {                                                         \
            picoll_warn("%s failed: %s", #call, cudaGetErrorString(ws_err_));                 \
            status = PICOLL_ERR_CUDA;                                                         \
            goto out;                                                                         \
        }                                                                                     \
    } while (0)

typedef struct {
    cudaIpcMemHandle_t handle;
    int ok;        /* the allocation and the handle exist */
    int comm_rank;
    int resident;  /* blocks of the kernel the GPU holds at once (SMs x blocks per SM) */
    int device;
    char bus_id[PICOLL_TOPO_BUSID_LEN];
} ws_msg_t;

int picoll_cuda_device_present(const picoll_config_t *cfg)
{
    int n = 0;
    if (!cfg->cuda) {
        return 0;
    }
    cudaError_t err = cudaGetDeviceCount(&n);
    if (err != cudaSuccess) {
        picoll_debug("no CUDA device path: cudaGetDeviceCount: %s", cudaGetErrorString(err));
        cudaGetLastError(); /* not sticky, but leave nothing behind for the application */
        return 0;
    }
    return n > 0;
}

/* This rank's half: allocate, export, write the hello value. */
static picoll_status_t ws_alloc(picoll_cuda_ws_t *ws, const picoll_config_t *cfg, ws_msg_t *msg)
{
    picoll_status_t status = PICOLL_OK;
    uint64_t hello = WS_HELLO | (uint64_t)msg->comm_rank;
    void *err_host = NULL;

    int sms = 0, per_sm = 0;
    cudaError_t kerr;

    WS_CHECK(cudaGetDevice(&ws->device));
    msg->device = ws->device;
    WS_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, ws->device));
    kerr = (cudaError_t)picoll_cuda_kernel_occupancy(&per_sm);
    if (kerr != cudaSuccess || per_sm < 1) {
        int major = 0, minor = 0;
        cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, ws->device);
        cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, ws->device);
        cudaGetLastError();
        picoll_info("no device collectives on device %d (compute capability %d.%d; picoll's "
                    "kernels need 7.0 or later): %s", ws->device, major, minor,
                    kerr != cudaSuccess ? cudaGetErrorString(kerr) : "no block fits on an SM");
        status = PICOLL_ERR_NOT_SUPPORTED;
        goto out;
    }
    msg->resident = sms * per_sm;
    WS_CHECK(cudaDeviceGetPCIBusId(msg->bus_id, (int)sizeof(msg->bus_id), ws->device));
    for (char *c = msg->bus_id; *c; c++) {
        *c = (char)(*c >= 'A' && *c <= 'F' ? *c - 'A' + 'a' : *c);
    }
    ws->slot_size = (cfg->workspace_size / 2 + 4095) / 4096 * 4096;
    if (ws->slot_size < 65536) {
        ws->slot_size = 65536;
    }
    WS_CHECK(cudaMalloc((void **)&ws->base, PICOLL_CUDA_FLAGS_BYTES + 2 * ws->slot_size));
    WS_CHECK(cudaMemset(ws->base, 0, PICOLL_CUDA_FLAGS_BYTES));
    WS_CHECK(cudaMemcpy(ws->base + PICOLL_CUDA_HELLO_WORD * sizeof(uint64_t), &hello, sizeof(hello),
                        cudaMemcpyHostToDevice));
    /* a copy from pageable memory may return before the bytes land: a peer reads them next */
    WS_CHECK(cudaDeviceSynchronize());
    WS_CHECK(cudaIpcGetMemHandle(&msg->handle, ws->base));
    WS_CHECK(cudaStreamCreateWithFlags(&ws->stream, cudaStreamNonBlocking));
    WS_CHECK(cudaEventCreateWithFlags(&ws->ready, cudaEventDisableTiming));
    WS_CHECK(cudaHostAlloc(&err_host, sizeof(picoll_cuda_error_t), cudaHostAllocMapped));
    ws->err = err_host;
    memset(err_host, 0, sizeof(picoll_cuda_error_t));
    WS_CHECK(cudaHostGetDevicePointer((void **)&ws->err_dev, err_host, 0));
    msg->ok = 1;
out:
    return status;
}

/* Map the workspace of every peer in ws->peers and read its hello value through the mapping. */
static picoll_status_t ws_map_peers(picoll_cuda_ws_t *ws, const ws_msg_t *all)
{
    picoll_status_t status = PICOLL_OK;
    for (int r = 0; r < ws->nlocal; r++) {
        uint64_t v = 0;
        if (r == ws->me) {
            ws->peer[r] = ws->base;
            continue;
        }
        if (!(ws->peers >> r & 1u)) {
            continue; /* hcm: a GPU this one never reads (across sockets, no peer access) */
        }
        if (strcmp(all[r].bus_id, all[ws->me].bus_id) != 0) {
            /* another GPU: where this process sees it, ask whether kernels here can load from it
             * (a mapping without peer access would still serve cudaMemcpy below, but fault in a
             * kernel); where it does not, cudaIpcOpenMemHandle needs peer access itself */
            int dev = -1, can = 1;
            if (cudaDeviceGetByPCIBusId(&dev, all[r].bus_id) == cudaSuccess) {
                WS_CHECK(cudaDeviceCanAccessPeer(&can, ws->device, dev));
            }
            cudaGetLastError();
            if (!can) {
                picoll_info("no peer access from GPU %s to GPU %s of local rank %d: device "
                            "collectives fall back", all[ws->me].bus_id, all[r].bus_id, r);
                status = PICOLL_ERR_NOT_SUPPORTED;
                goto out;
            }
        }
        WS_CHECK(cudaIpcOpenMemHandle((void **)&ws->peer[r], all[r].handle,
                                      cudaIpcMemLazyEnablePeerAccess));
        ws->mapped[r] = 1;
        WS_CHECK(cudaMemcpy(&v, ws->peer[r] + PICOLL_CUDA_HELLO_WORD * sizeof(uint64_t), sizeof(v),
                            cudaMemcpyDeviceToHost));
        if (v != (WS_HELLO | (uint64_t)all[r].comm_rank)) {
            picoll_warn("device workspace of local rank %d (device %d) reads back %#llx through its "
                        "IPC mapping: no peer access, device collectives fall back",
                        r, all[r].device, (unsigned long long)v);
            status = PICOLL_ERR_CUDA;
            goto out;
        }
    }
out:
    return status;
}

/* Blocks per launch, the same on every rank: block b of every rank waits for block b of the
 * others, so with several ranks on one GPU running at once (MPS) all their blocks must be resident
 * together. The fewest, over the node's GPUs, of the blocks a GPU holds divided by the ranks on
 * it. */
static int ws_max_blocks(const ws_msg_t *all, int nlocal)
{
    int best = PICOLL_CUDA_MAX_BLOCKS;
    for (int r = 0; r < nlocal; r++) {
        int sharing = 0;
        if (!all[r].ok) {
            continue;
        }
        for (int q = 0; q < nlocal; q++) {
            sharing += all[q].ok && strcmp(all[q].bus_id, all[r].bus_id) == 0;
        }
        int fit = all[r].resident / (sharing > 0 ? sharing : 1);
        if (fit < best) {
            best = fit;
        }
    }
    return best < 1 ? 1 : best;
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
                                      picoll_cuda_ws_t **out)
{
    picoll_status_t status = PICOLL_OK;
    ws_msg_t mine = {.ok = 0}, *all = NULL;
    picoll_cuda_ws_t *ws = calloc(1, sizeof(*ws));

    PMPI_Comm_rank(comm, &mine.comm_rank);
    if (ws == NULL) {
        /* the others are entering the exchanges below: leaving them would hang the job */
        picoll_error("out of memory setting up the device workspace: aborting the job");
        PMPI_Abort(comm, 1);
    }
    PMPI_Comm_size(comm, &ws->comm_size);
    PMPI_Comm_rank(node_comm, &ws->me);
    PMPI_Comm_size(node_comm, &ws->nlocal);
    ws->timeout = cfg->timeout;
    ws->device = -1;
    all = calloc((size_t)ws->nlocal, sizeof(*all));
    if (all == NULL) {
        picoll_error("out of memory setting up the device workspace: aborting the job");
        PMPI_Abort(comm, 1);
    }
    if (ws->nlocal > PICOLL_CUDA_MAX_LOCAL) {
        picoll_info("%d ranks on the node, more than the %d a device workspace serves: device "
                    "collectives fall back", ws->nlocal, PICOLL_CUDA_MAX_LOCAL);
        status = PICOLL_ERR_NOT_SUPPORTED;
    } else {
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
        }
    }
    ws->max_blocks = ws_max_blocks(all, ws->nlocal);
    /* the reach first: on a hybrid cube mesh each rank maps its quad and its relay only */
    ws->peers = (ws->nlocal >= 32 ? ~0u : (1u << ws->nlocal) - 1) & ~(1u << ws->me);
    ws->reach = ws_reach(ws, node_comm, cfg, all, &mine, all_ok ? ws->nlocal : 1);
    if (ws->reach == PICOLL_TOPO_REACH_HCM && !ws->hcm) {
        ws->reach = PICOLL_TOPO_REACH_NONE; /* no plan (not one rank per GPU): hand over */
    }
    /* all_ok is the same on every rank: either all map, or none */
    if (all_ok && ws_map_peers(ws, all) != PICOLL_OK) {
        status = PICOLL_ERR_CUDA;
    }
    if (!all_ok && status == PICOLL_OK) {
        status = PICOLL_ERR_PEER_FAILED;
    }
    picoll_debug("device workspace on device %d: %d local ranks, 2 x %zu bytes, %d blocks, reach %s: %s",
                 ws->device, ws->nlocal, ws->slot_size, ws->max_blocks,
                 picoll_topo_reach_name(ws->reach), picoll_status_string(status));
    free(all);
    *out = ws;
    return status;
}

void picoll_cuda_ws_rehome(picoll_cuda_ws_t **ws, MPI_Comm comm, MPI_Comm node_comm,
                           const picoll_config_t *cfg, int device)
{
    picoll_cuda_saved_ctx_t prev = {NULL, 0};
    picoll_status_t status = PICOLL_OK;
    int old = *ws != NULL ? (*ws)->device : -1, ok = 0, all_ok = 0;

    picoll_cuda_ws_destroy(*ws);
    *ws = NULL;
    if (device >= 0 && picoll_cuda_enter(device, &prev) != cudaSuccess) {
        cudaGetLastError();
        status = PICOLL_ERR_CUDA; /* still take part in the set-up: the others are in it */
    }
    picoll_status_t made = picoll_cuda_ws_create(comm, node_comm, cfg, ws);
    ok = status == PICOLL_OK && made == PICOLL_OK;
    if (device >= 0) {
        picoll_cuda_leave(&prev);
    }
    if (PMPI_Allreduce(&ok, &all_ok, 1, MPI_INT, MPI_MIN, node_comm) != MPI_SUCCESS) {
        all_ok = 0;
    }
    picoll_info("device workspace moved from device %d to device %d, where this rank's buffers "
                "are: %s", old, device, all_ok ? "ok" : "failed somewhere, device collectives fall back");
    if (!all_ok) {
        picoll_cuda_ws_destroy(*ws);
        *ws = NULL;
    }
}

static double ws_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* Wait until every peer's blocks of the last launch said they will not read my buffers again. */
static void ws_wait_peers_done(picoll_cuda_ws_t *ws)
{
    static uint64_t done[PICOLL_CUDA_MAX_LOCAL * PICOLL_CUDA_MAX_BLOCKS];
    static pthread_mutex_t done_lock = PTHREAD_MUTEX_INITIALIZER;
    double deadline = ws_now() + ws->timeout;

    if (ws->last_epoch == 0) {
        return;
    }
    pthread_mutex_lock(&done_lock);
    for (;;) {
        int left = 0;
        /* on picoll's stream: the legacy stream would wait for the application's work too */
        if (cudaMemcpyAsync(done, ws->base + PICOLL_CUDA_DONE_WORD * sizeof(uint64_t), sizeof(done),
                            cudaMemcpyDeviceToHost, ws->stream) != cudaSuccess ||
            cudaStreamSynchronize(ws->stream) != cudaSuccess) {
            break;
        }
        for (int r = 0; r < ws->nlocal; r++) {
            for (int b = 0; (ws->peers >> r & 1u) && b < ws->last_blocks; b++) {
                left += done[r * PICOLL_CUDA_MAX_BLOCKS + b] < ws->last_epoch;
            }
        }
        if (left == 0) {
            break;
        }
        if (ws_now() > deadline) {
            picoll_warn("freeing the device workspace while %d peer block(s) may still read it", left);
            break;
        }
        struct timespec pause = {.tv_nsec = 100000};
        nanosleep(&pause, NULL);
    }
    pthread_mutex_unlock(&done_lock);
}

cudaError_t picoll_cuda_enter(int device, picoll_cuda_saved_ctx_t *saved)
{
    int dev = -1;
    saved->ctx = NULL;
    saved->saved = picoll_cudrv_load() == PICOLL_OK && picoll_cu.ctx_get_current(&saved->ctx) == 0;
    if (saved->saved && saved->ctx != NULL && cudaGetDevice(&dev) == cudaSuccess && dev == device) {
        return cudaSuccess;
    }
    return cudaSetDevice(device);
}

void picoll_cuda_leave(const picoll_cuda_saved_ctx_t *saved)
{
    if (saved->saved) {
        picoll_cu.ctx_set_current(saved->ctx);
    }
}

void picoll_cuda_ws_destroy(picoll_cuda_ws_t *ws)
{
    picoll_cuda_saved_ctx_t prev = {NULL, 0};
    if (ws == NULL) {
        return;
    }
    if (ws->device >= 0) {
        picoll_cuda_enter(ws->device, &prev);
    }
    for (int r = 0; r < ws->nlocal && r < PICOLL_CUDA_MAX_LOCAL; r++) {
        if (ws->mapped[r]) {
            cudaIpcCloseMemHandle(ws->peer[r]);
        }
    }
    if (ws->base != NULL) {
        ws_wait_peers_done(ws);
        cudaFree(ws->base);
    }
    if (ws->stream != NULL) {
        cudaStreamDestroy(ws->stream);
    }
    if (ws->ready != NULL) {
        cudaEventDestroy(ws->ready);
    }
    if (ws->err != NULL) {
        cudaFreeHost(ws->err);
    }
    picoll_cuda_leave(&prev);
    cudaGetLastError();
    free(ws);
}

picoll_topo_reach_t picoll_cuda_ws_reach(const picoll_cuda_ws_t *ws)
{
    return ws->reach;
}

size_t picoll_cuda_ws_slot_size(const picoll_cuda_ws_t *ws)
{
    return ws->slot_size;
}
