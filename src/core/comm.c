#define _GNU_SOURCE /* sched_getaffinity, CPU_COUNT */
#include "build-config.h"
#include "core/comm.h"
#include "cuda/cuda_dev.h"
#include "host/cma.h"
#include "core/core.h"
#include "util/fatal.h"
#include "util/log.h"
#include "util/wait.h"
#include <picoll.h>

#include <pthread.h>
#include <sched.h>
#include <unistd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

_Atomic unsigned long picoll_comm_generation = 1;
_Thread_local picoll_comm_cache_t picoll_comm_cache __attribute__((tls_model("initial-exec")));

picoll_comm_t *picoll_comm_lookup(MPI_Comm comm)
{
    picoll_comm_t *ctx;
    int found;
    /* read the generation first: a destruction after this makes the entry stale, never valid */
    unsigned long gen = atomic_load_explicit(&picoll_comm_generation, memory_order_acquire);
    if (PMPI_Comm_get_attr(comm, picoll_g.comm_keyval, &ctx, &found) != MPI_SUCCESS || !found) {
        ctx = picoll_comm_create(comm);
        gen = atomic_load_explicit(&picoll_comm_generation, memory_order_acquire);
    }
    if (ctx != NULL) {
        picoll_comm_cache.comm = comm;
        picoll_comm_cache.ctx = ctx;
        picoll_comm_cache.generation = gen;
    }
    return ctx;
}

static pthread_mutex_t comm_list_lock = PTHREAD_MUTEX_INITIALIZER;
static picoll_comm_t *comm_list;
static unsigned long comm_next_id = 1;

static void comm_list_add(picoll_comm_t *ctx)
{
    pthread_mutex_lock(&comm_list_lock);
    ctx->id = comm_next_id++;
    ctx->prev = NULL;
    ctx->next = comm_list;
    if (comm_list != NULL) {
        comm_list->prev = ctx;
    }
    comm_list = ctx;
    pthread_mutex_unlock(&comm_list_lock);
}

static void comm_list_remove(picoll_comm_t *ctx)
{
    pthread_mutex_lock(&comm_list_lock);
    if (ctx->prev != NULL) {
        ctx->prev->next = ctx->next;
    } else {
        comm_list = ctx->next;
    }
    if (ctx->next != NULL) {
        ctx->next->prev = ctx->prev;
    }
    pthread_mutex_unlock(&comm_list_lock);
}

static void comm_destroy(picoll_comm_t *ctx)
{
    picoll_debug("destroying context %lu (size %d)", ctx->id, ctx->coll.size);
    atomic_fetch_add_explicit(&picoll_comm_generation, 1, memory_order_acq_rel);
    comm_list_remove(ctx);
    picoll_hier_destroy(ctx->coll.hier);
    /* collective over the node (MPI_Comm_free and MPI_Finalize are) */
    picoll_cuda_ws_destroy(ctx->coll.cuda, ctx->coll.shm);
    ctx->coll.cuda = NULL;
    if (ctx->coll.shm != NULL) {
        picoll_shm_destroy(ctx->coll.shm);
        free(ctx->coll.shm);
    }
    if (ctx->coll.node_comm != MPI_COMM_NULL) {
        PMPI_Comm_free(&ctx->coll.node_comm);
    }
    free(ctx);
}

/* Delete callback: MPI_Comm_free, or MPI_Finalize through picoll_comm_finalize. */
static int comm_delete_fn(MPI_Comm comm, int keyval, void *attr, void *extra)
{
    (void)comm;
    (void)keyval;
    (void)extra;
    picoll_reentry++;
    comm_destroy(attr);
    picoll_reentry--;
    return MPI_SUCCESS;
}

picoll_status_t picoll_comm_keyval_create(void)
{
    if (PMPI_Comm_create_keyval(MPI_COMM_NULL_COPY_FN, comm_delete_fn, &picoll_g.comm_keyval,
                                NULL) != MPI_SUCCESS) {
        picoll_error("MPI_Comm_create_keyval failed");
        return PICOLL_ERR_MPI;
    }
    return PICOLL_OK;
}

void picoll_comm_finalize(void)
{
    for (;;) {
        pthread_mutex_lock(&comm_list_lock);
        picoll_comm_t *ctx = comm_list;
        pthread_mutex_unlock(&comm_list_lock);
        if (ctx == NULL) {
            break;
        }
        /* runs comm_delete_fn, which unlinks ctx */
        if (PMPI_Comm_delete_attr(ctx->coll.comm, picoll_g.comm_keyval) != MPI_SUCCESS) {
            comm_destroy(ctx);
        }
    }
    PMPI_Comm_free_keyval(&picoll_g.comm_keyval);
}

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
        picoll_warn("shared-memory workspace set-up failed (%s): picoll's collectives fall back",
                    picoll_status_string(st));
        return 0;
    }
    return 1;
}

/* The set-up steps of a context on this rank; collective over ctx->coll.comm. Every rank runs every
 * step whatever happened before, so that the exchanges stay matched; a failure is remembered and
 * agreed on at the end. */
static int comm_setup(picoll_comm_t *ctx, int *shm_ok, int *hier_ok)
{
    int ok = 1;
    int mine[2], sums[2];

    if (picoll_cfg.test_fail_setup == picoll_g.world_rank) {
        ok = 0;
        snprintf(ctx->reason, sizeof(ctx->reason), "set-up failure forced by PICOLL_TEST_FAIL_SETUP=%d",
                 picoll_g.world_rank);
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
    int want_hier = picoll_cfg.net && picoll_cfg.host != PICOLL_HOST_OFF &&
                    ctx->num_nodes > 1 && ctx->coll.node_comm != MPI_COMM_NULL;
    *shm_ok = 0;
    *hier_ok = 0;
    /* the device workspace is made later, by the first call whose buffers are device memory on
     * every rank, in their context (coll/dispatch.c) */
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
    }
    return ok;
}

picoll_comm_t *picoll_comm_create(MPI_Comm comm)
{
    picoll_comm_t *ctx;
    int inter = 0;
    int vote[4], agreed[4];
    int shm_ok = 0, hier_ok = 0;

    picoll_reentry++;
    ctx = calloc(1, sizeof(*ctx));
    if (ctx == NULL) {
        /* the other ranks are entering the set-up exchanges: leaving them would hang the job */
        picoll_fatal("out of memory creating a communicator context: aborting the job");
    }
    ctx->coll.comm = comm;
    ctx->coll.node_comm = MPI_COMM_NULL;
    ctx->local_size = 1;
    ctx->num_nodes = 1;
    PMPI_Comm_test_inter(comm, &inter);
    if (inter) {
        /* every rank sees an intercommunicator alike: no exchange needed */
        snprintf(ctx->reason, sizeof(ctx->reason), "intercommunicator");
        PMPI_Comm_remote_size(comm, &ctx->coll.size);
        goto out_attach;
    }
    PMPI_Comm_rank(comm, &ctx->rank);
    PMPI_Comm_size(comm, &ctx->coll.size);

    /* Agreement: vote[0] = 1 if this rank is ready, vote[1] = its rank if not (MIN gives the
     * lowest failing rank), vote[2] = 1 if its shared-memory workspace is ready, vote[3] = 1 if
     * its network step is. */
    vote[0] = comm_setup(ctx, &shm_ok, &hier_ok);
    vote[1] = vote[0] ? ctx->coll.size : ctx->rank;
    vote[2] = shm_ok;
    vote[3] = hier_ok;
    if (PMPI_Allreduce(vote, agreed, 4, MPI_INT, MPI_MIN, comm) != MPI_SUCCESS) {
        agreed[0] = 0;
        agreed[1] = ctx->rank;
        agreed[2] = 0;
        agreed[3] = 0;
    }
    ctx->enabled = agreed[0];
    if (!agreed[0] || !agreed[2]) {
        ctx->coll.cuda_possible = 0;
    }
    if ((!agreed[0] || !agreed[2] || !agreed[3]) && ctx->coll.hier != NULL) {
        picoll_hier_destroy(ctx->coll.hier);
        ctx->coll.hier = NULL;
    }
    /* between nodes the workspace serves only the hierarchical algorithms */
    int shm_used = ctx->num_nodes > 1 ? ctx->coll.hier != NULL
                                      : picoll_cfg.host != PICOLL_HOST_OFF || ctx->coll.cuda_possible;
    if ((!agreed[0] || !agreed[2] || !shm_used) &&
        ctx->coll.shm != NULL) {
        picoll_shm_destroy(ctx->coll.shm);
        free(ctx->coll.shm);
        ctx->coll.shm = NULL;
    }
    if (!ctx->enabled && vote[0]) {
        snprintf(ctx->reason, sizeof(ctx->reason), "set-up failed on rank %d of the communicator",
                 agreed[1]);
    }

out_attach:
    comm_list_add(ctx);
    if (!ctx->enabled) {
        picoll_info("context %lu (size %d) disabled: %s", ctx->id, ctx->coll.size, ctx->reason);
    } else {
        picoll_debug("context %lu: size %d, %d on this node, %d nodes, host executor %s, single "
                     "copy %s, device executor %s, network step %s", ctx->id, ctx->coll.size,
                     ctx->local_size, ctx->num_nodes,
                     ctx->coll.shm && picoll_cfg.host != PICOLL_HOST_OFF ? "on" : "off",
                     ctx->coll.shm && ctx->coll.shm->cma ? "on" : "off", ctx->coll.cuda_possible ? "on" : "off",
                     ctx->coll.hier ? "on" : "off");
    }
    if (PMPI_Comm_set_attr(comm, picoll_g.comm_keyval, ctx) != MPI_SUCCESS) {
        picoll_error("MPI_Comm_set_attr failed: context %lu not cached", ctx->id);
        comm_destroy(ctx);
        ctx = NULL;
    }
    picoll_reentry--;
    return ctx;
}

PICOLL_EXPORT int picoll_comm_query(MPI_Comm comm, picoll_comm_info_t *info);
int picoll_comm_query(MPI_Comm comm, picoll_comm_info_t *info)
{
    picoll_comm_t *ctx;
    int found = 0;

    if (!picoll_g.initialized || comm == MPI_COMM_NULL ||
        PMPI_Comm_get_attr(comm, picoll_g.comm_keyval, &ctx, &found) != MPI_SUCCESS || !found) {
        return MPI_ERR_OTHER;
    }
    info->id = ctx->id;
    info->enabled = ctx->enabled;
    info->size = ctx->coll.size;
    info->local_size = ctx->local_size;
    info->num_nodes = ctx->num_nodes;
    snprintf(info->reason, sizeof(info->reason), "%s", ctx->reason);
    return MPI_SUCCESS;
}
