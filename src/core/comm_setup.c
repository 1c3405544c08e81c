/* A context's set-up steps, collective over its communicator: the node split (and virtual nodes),
 * oversubscription, the node count, and the executors: the shared-memory workspace (with single
 * copy's probe), the network step between nodes, and whether the device executor may be tried. */
#define _GNU_SOURCE /* sched_getaffinity, CPU_COUNT */
#include "build-config.h"
#include "core/comm.h"
#include "core/core.h"
#include "cuda/cuda_dev.h"
#include "host/cma.h"
#include "util/log.h"
#include "util/wait.h"

#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

/* More ranks of this communicator on the machine than CPUs this process may run on: then a
 * waiting rank must give its CPU to the one it waits for. Once seen, for every communicator. */
static void comm_check_oversubscribed(int local_size)
{
    cpu_set_t set;
    int ncpu = sched_getaffinity(0, sizeof(set), &set) == 0 ? CPU_COUNT(&set)
                                                            : (int)sysconf(_SC_NPROCESSORS_ONLN);
    if (ncpu > 0 && local_size > ncpu && !picoll_wait_oversubscribed) {
        picoll_debug("%d ranks on this node, %d CPUs: waits yield at once", local_size, ncpu);
        picoll_wait_oversubscribed = 1;
    }
}

/* PICOLL_VNODE_SIZE=k: split the node into virtual nodes of k local ranks, consecutive ones
 * (block) or dealt out round-robin (cyclic, PICOLL_VNODE_LAYOUT). */
static int comm_split_vnodes(picoll_comm_t *ctx)
{
    MPI_Comm vnode;
    long k = picoll_cfg.vnode_size;
    if (k <= 0 || ctx->coll.node_comm == MPI_COMM_NULL) {
        return 1;
    }
    long nvnodes = (ctx->local_size + k - 1) / k;
    int color = picoll_cfg.vnode_layout == PICOLL_VNODE_CYCLIC ? (int)(ctx->local_rank % nvnodes)
                                                               : (int)(ctx->local_rank / k);
    if (PMPI_Comm_split(ctx->coll.node_comm, color, ctx->local_rank, &vnode) != MPI_SUCCESS) {
        return 0;
    }
    PMPI_Comm_free(&ctx->coll.node_comm);
    ctx->coll.node_comm = vnode;
    PMPI_Comm_rank(vnode, &ctx->local_rank);
    PMPI_Comm_size(vnode, &ctx->local_size);
    return 1;
}

/* The host executor's workspace on this node (for the single-node algorithms, and for the node
 * steps of the hierarchical ones), and, when probe_cma (the same on every rank), whether its ranks
 * can read each other's buffers (host/cma.h). Returns 1 when the workspace is ready. */
static int comm_setup_shm(picoll_comm_t *ctx, int probe_cma)
{
    picoll_shm_t scratch;
    picoll_status_t st;
    int *pids = NULL, cma = 0;

    ctx->coll.shm = calloc(1, sizeof(*ctx->coll.shm));
    /* every rank takes part in the set-up exchanges, even one without memory for it */
    st = picoll_shm_create(ctx->coll.comm, ctx->coll.node_comm, picoll_cfg.workspace_size / 2,
                           picoll_cfg.timeout, ctx->coll.shm ? ctx->coll.shm : &scratch);
    if (probe_cma) {
        int want = ctx->coll.shm != NULL && st == PICOLL_OK && picoll_cfg.cma != PICOLL_CMA_OFF;
        if (picoll_cfg.cma == PICOLL_CMA_OFF) {
            picoll_debug("PICOLL_CMA=off: single-copy transfers off on this node");
        }
        cma = picoll_cma_probe(ctx->coll.node_comm, want, &pids);
    }
    if (ctx->coll.shm == NULL) {
        picoll_shm_destroy(&scratch);
        free(pids);
        return 0;
    }
    ctx->coll.shm->cma = cma;
    ctx->coll.shm->pids = pids;
    if (st != PICOLL_OK) {
        picoll_warn_once(
            "shared-memory workspace set-up failed (%s): picoll's collectives fall "
            "back on this communicator (said once; later ones at PICOLL_LOG_LEVEL=info)",
            picoll_status_string(st));
        return 0;
    }
    return 1;
}

/* The set-up steps of a context on this rank; collective over ctx->coll.comm. Every rank runs every
 * step whatever happened before, so that the exchanges stay matched; a failure is remembered and
 * agreed on at the end. */
int picoll_comm_setup(picoll_comm_t *ctx, int *shm_ok, int *hier_ok)
{
    int ok = 1;
    int mine[2], sums[2];

    if (picoll_cfg.test_fail_setup == picoll_g.world_rank) {
        ok = 0;
        snprintf(ctx->reason, sizeof(ctx->reason),
                 "set-up failure forced by PICOLL_TEST_FAIL_SETUP=%d", picoll_g.world_rank);
    }
    if (PMPI_Comm_split_type(ctx->coll.comm, MPI_COMM_TYPE_SHARED, ctx->rank, MPI_INFO_NULL,
                             &ctx->coll.node_comm) != MPI_SUCCESS) {
        ctx->coll.node_comm = MPI_COMM_NULL;
        ok = 0;
        snprintf(ctx->reason, sizeof(ctx->reason), "MPI_Comm_split_type failed");
        ctx->local_rank = 0;
        ctx->local_size = 1;
    } else {
        PMPI_Comm_rank(ctx->coll.node_comm, &ctx->local_rank);
        PMPI_Comm_size(ctx->coll.node_comm, &ctx->local_size);
        comm_check_oversubscribed(ctx->local_size);
    }
    if (!comm_split_vnodes(ctx)) {
        ok = 0;
        snprintf(ctx->reason, sizeof(ctx->reason), "MPI_Comm_split into virtual nodes failed");
    }
    /* one exchange counts the nodes and the ranks without a CUDA device: the device executor is
     * tried only where every rank has one, and every rank knows it */
    mine[0] = ctx->local_rank == 0;
    mine[1] = !picoll_cuda_device_present(&picoll_cfg);
    if (PMPI_Allreduce(mine, sums, 2, MPI_INT, MPI_SUM, ctx->coll.comm) != MPI_SUCCESS) {
        ok = 0;
        sums[0] = 0;
        sums[1] = 1;
    }
    ctx->num_nodes = sums[0];

    /* The host and device executors run on one node; between nodes, the host executor's
     * workspace serves the node steps of the hierarchical path. The device executor needs the
     * shared-memory segment too: its per-call vote is a barrier there. The decision inputs are the
     * same on every rank; the outcome is agreed by the caller. */
    int one_node = ctx->num_nodes == 1 && ctx->coll.node_comm != MPI_COMM_NULL;
    int want_cuda = one_node && sums[1] == 0 && ctx->local_size > 1;
    int want_hier = picoll_cfg.net && picoll_cfg.host != PICOLL_HOST_OFF && ctx->num_nodes > 1 &&
                    ctx->coll.node_comm != MPI_COMM_NULL;
    *shm_ok = 0;
    *hier_ok = 0;
    /* the device workspace is made later, by the first call whose buffers are device memory on
     * every rank, in their context (coll/vote.c) */
    ctx->coll.cuda_possible = want_cuda;
    if ((one_node && (picoll_cfg.host != PICOLL_HOST_OFF || want_cuda)) || want_hier) {
        /* single copy serves the host algorithms of one node */
        *shm_ok = comm_setup_shm(ctx, one_node && picoll_cfg.host != PICOLL_HOST_OFF);
    }
    if (want_hier) {
        size_t slot = picoll_cfg.workspace_size / 2;
        picoll_status_t st = picoll_hier_create(ctx->coll.comm, ctx->coll.node_comm, slot,
                                                picoll_cfg.timeout, &ctx->coll.hier);
        if (st == PICOLL_ERR_NOT_SUPPORTED) {
            picoll_info("no network step (built without UCX): collectives between nodes fall "
                        "back");
        } else if (st != PICOLL_OK) {
            picoll_warn("network step set-up failed (%s): collectives between nodes fall back",
                        picoll_status_string(st));
        }
        *hier_ok = st == PICOLL_OK;
        picoll_hier_t *h = ctx->coll.hier;
        /* the device node steps need a workspace of the node's ranks (made at the first call):
         * at least 2 on every node, at most what a workspace serves */
        int largest = 0;
        for (int x = 0; *hier_ok && x < h->num_nodes; x++) {
            largest = h->node_size[x] > largest ? h->node_size[x] : largest;
        }
        ctx->coll.cuda_hier = *hier_ok && picoll_cfg.hier_cuda && sums[1] == 0 && h->nrails >= 2 &&
                              largest <= PICOLL_CUDA_MAX_LOCAL;
        int placed = ctx->coll.cuda_hier && h->even;
        for (int i = 0; placed && i < ctx->coll.size; i++) {
            placed = h->rank_of[i] == i;
        }
        ctx->coll.cuda_hier_blocks = placed;
    }
    return ok;
}
