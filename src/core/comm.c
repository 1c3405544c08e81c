/* The per-communicator context's life cycle: created collectively at a communicator's first
 * intercepted call (its set-up steps are in comm_setup.c), cached as an MPI attribute and in a
 * per-thread entry, destroyed by the attribute's delete callback (MPI_Comm_free, MPI_Finalize);
 * and picoll_comm_query, the public view of it. */
#include "build-config.h"
#include "core/comm.h"
#include "cuda/cuda_dev.h"
#include "core/core.h"
#include "net/hier.h"
#include "util/fatal.h"
#include "util/log.h"
#include <picoll.h>

#include <pthread.h>
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
    if ((ctx->coll.cuda != NULL || ctx->coll.cuda_enq != NULL) && ctx->coll.shm != NULL) {
        /* the device workspaces are freed once every rank of the node has unmapped them, later:
         * this rank goes on now, as the MPI's own free does (a peer may still wait in a
         * collective of another communicator for this rank); the node's segment goes with them */
        picoll_cuda_ws_retire(ctx->coll.cuda, ctx->coll.cuda_enq, ctx->coll.shm);
        ctx->coll.shm = NULL;
    } else {
        /* without a node segment (none is made without one): collective over the node */
        picoll_cuda_ws_destroy(ctx->coll.cuda, ctx->coll.shm);
        picoll_cuda_ws_destroy(ctx->coll.cuda_enq, ctx->coll.shm);
    }
    ctx->coll.cuda = NULL;
    ctx->coll.cuda_enq = NULL;
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
    /* the workspaces of freed communicators the peers let go of since: freed here, where a free
     * always freed them (not at a communicator's making, where a cuMemFree, which may wait for
     * the device, would be new) */
    picoll_cuda_retired_poll(0);
    picoll_reentry--;
    return MPI_SUCCESS;
}

/* Delete callback of a registration scope (MPI_Comm_free): the ranges registered for the
 * communicator end with it. Not copied by MPI_Comm_dup (a dup registers its own). */
static int reg_delete_fn(MPI_Comm comm, int keyval, void *attr, void *extra)
{
    (void)comm, (void)keyval, (void)extra;
    picoll_cuda_zc_scope_end(attr);
    free(attr);
    return MPI_SUCCESS;
}

picoll_status_t picoll_comm_keyval_create(void)
{
    if (PMPI_Comm_create_keyval(MPI_COMM_NULL_COPY_FN, comm_delete_fn, &picoll_g.comm_keyval,
                                NULL) != MPI_SUCCESS ||
        PMPI_Comm_create_keyval(MPI_COMM_NULL_COPY_FN, reg_delete_fn, &picoll_g.reg_keyval, NULL) !=
            MPI_SUCCESS) {
        picoll_error("MPI_Comm_create_keyval failed");
        return PICOLL_ERR_MPI;
    }
    return PICOLL_OK;
}

const void *picoll_comm_reg_scope(MPI_Comm comm)
{
    void *scope = NULL;
    int found = 0;
    picoll_reentry++;
    if (PMPI_Comm_get_attr(comm, picoll_g.reg_keyval, &scope, &found) != MPI_SUCCESS || !found) {
        scope = malloc(1); /* a unique address, for as long as comm lives */
        if (scope != NULL && PMPI_Comm_set_attr(comm, picoll_g.reg_keyval, scope) != MPI_SUCCESS) {
            free(scope);
            scope = NULL;
        }
    }
    /* a context made before: its calls take the scope from now on (one made later reads it at
     * its creation) */
    picoll_comm_t *ctx = NULL;
    if (scope != NULL &&
        PMPI_Comm_get_attr(comm, picoll_g.comm_keyval, &ctx, &found) == MPI_SUCCESS && found &&
        ctx != NULL) {
        __atomic_store_n(&ctx->coll.reg_scope, scope, __ATOMIC_RELEASE);
    }
    picoll_reentry--;
    return scope;
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
    PMPI_Comm_free_keyval(&picoll_g.reg_keyval); /* the scopes go with their communicators */
    /* every rank releases every communicator here: the device workspaces still mapped by a
     * peer are freed once it has unmapped them */
    picoll_cuda_retired_poll(1);
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
        goto attach;
    }
    PMPI_Comm_rank(comm, &ctx->rank);
    PMPI_Comm_size(comm, &ctx->coll.size);

    /* Agreement: vote[0] = 1 if this rank is ready, vote[1] = its rank if not (MIN gives the
     * lowest failing rank), vote[2] = 1 if its shared-memory workspace is ready, vote[3] = 1 if
     * its network step is. */
    vote[0] = picoll_comm_setup(ctx, &shm_ok, &hier_ok);
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
    if (ctx->coll.hier == NULL) {
        ctx->coll.cuda_hier = 0;
        ctx->coll.cuda_hier_blocks = 0;
    }
    /* between nodes the workspace serves only the hierarchical algorithms */
    int shm_used = ctx->num_nodes > 1
                       ? ctx->coll.hier != NULL
                       : picoll_cfg.host != PICOLL_HOST_OFF || ctx->coll.cuda_possible;
    if ((!agreed[0] || !agreed[2] || !shm_used) && ctx->coll.shm != NULL) {
        picoll_shm_destroy(ctx->coll.shm);
        free(ctx->coll.shm);
        ctx->coll.shm = NULL;
    }
    if (!ctx->enabled && vote[0]) {
        snprintf(ctx->reason, sizeof(ctx->reason), "set-up failed on rank %d of the communicator",
                 agreed[1]);
    }

attach:
    comm_list_add(ctx);
    if (!ctx->enabled) {
        picoll_info("context %lu (size %d) disabled: %s", ctx->id, ctx->coll.size, ctx->reason);
    } else {
        picoll_debug("context %lu: size %d, %d on this node, %d nodes, host executor %s, single "
                     "copy %s, device executor %s, network step %s",
                     ctx->id, ctx->coll.size, ctx->local_size, ctx->num_nodes,
                     ctx->coll.shm && picoll_cfg.host != PICOLL_HOST_OFF ? "on" : "off",
                     ctx->coll.shm && ctx->coll.shm->cma ? "on" : "off",
                     ctx->coll.cuda_possible ? "on" : "off", ctx->coll.hier ? "on" : "off");
    }
    void *scope = NULL;
    int has_scope = 0;
    if (PMPI_Comm_get_attr(comm, picoll_g.reg_keyval, &scope, &has_scope) == MPI_SUCCESS &&
        has_scope) {
        __atomic_store_n(&ctx->coll.reg_scope, scope, __ATOMIC_RELEASE); /* registered before */
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

PICOLL_EXPORT int picoll_comm_net_query(MPI_Comm comm, int *rail_size, int *endpoints,
                                        int *watched);
int picoll_comm_net_query(MPI_Comm comm, int *rail_size, int *endpoints, int *watched)
{
    picoll_comm_t *ctx;
    int found = 0;

    if (!picoll_g.initialized || comm == MPI_COMM_NULL ||
        PMPI_Comm_get_attr(comm, picoll_g.comm_keyval, &ctx, &found) != MPI_SUCCESS || !found ||
        ctx->coll.hier == NULL || ctx->coll.hier->net == NULL) {
        return MPI_ERR_OTHER;
    }
    *rail_size = picoll_net_size(ctx->coll.hier->net);
    picoll_net_counts(ctx->coll.hier->net, endpoints, watched);
    return MPI_SUCCESS;
}

#ifdef PICOLL_HAVE_CUDA
/* The stream workspace's exchange for its zero-copy calls (cuda/cuda_zc.c): a node workspace of
 * its own, small, since the communicator's (ctx->coll.shm) also serves the blocking calls its
 * stream's progress thread makes meanwhile. Collective; none on any rank where one failed. */
static void stream_exchange(picoll_comm_t *ctx, MPI_Comm comm, picoll_cuda_ws_t *ws)
{
    int ok = 0, all = 0;
    picoll_shm_t *x = NULL;
    if (picoll_cfg.cuda_zero_copy == PICOLL_CUDA_ZC_OFF) {
        return; /* the same on every rank: the job's configuration */
    }
    x = calloc(1, sizeof(*x));
    /* every rank takes part in the creation's exchanges, even one without memory for it */
    picoll_status_t st = picoll_shm_create(comm, ctx->coll.node_comm, 4096, picoll_cfg.timeout,
                                           x != NULL ? x : &(picoll_shm_t){0});
    ok = x != NULL && st == PICOLL_OK;
    if (PMPI_Allreduce(&ok, &all, 1, MPI_INT, MPI_MIN, comm) != MPI_SUCCESS) {
        all = 0;
    }
    if (all) {
        picoll_cuda_ws_set_exchange(ws, x);
        return;
    }
    if (ok) {
        picoll_shm_destroy(x);
    }
    free(x);
    picoll_info("stream communicator: no node workspace for its zero-copy calls: they copy");
}

picoll_comm_t *picoll_comm_stream_enable(MPI_Comm comm, picoll_cu_context_t cu_ctx,
                                         picoll_cu_stream_t stream)
{
    picoll_comm_t *ctx = picoll_g.active ? picoll_comm_get(comm) : NULL;
    /* what decides is the same on every rank (the context's agreed set-up), but for the
     * variable, which a rank's environment may set otherwise: agreed below with the outcome */
    int ok = ctx != NULL && ctx->enabled && ctx->coll.shm != NULL && ctx->coll.cuda_possible &&
             ctx->num_nodes == 1 && ctx->coll.size <= PICOLL_CUDA_MAX_LOCAL &&
             picoll_cfg.stream_kernels && cu_ctx != NULL;
    int all = 0;
    picoll_reentry++;
    if (PMPI_Allreduce(&ok, &all, 1, MPI_INT, MPI_MIN, comm) != MPI_SUCCESS) {
        all = 0;
    }
    if (all) {
        picoll_cuda_ws_t *ws = NULL;
        ok =
            picoll_cuda_ws_create(comm, ctx->coll.node_comm, &picoll_cfg, cu_ctx, &ws) == PICOLL_OK;
        /* a default stream takes the kernels only where at most PICOLL_STREAM_DEFAULT_SHARING
         * ranks share a GPU (4: measured up to there, docs/cuda.md); each rank's own stream
         * kind, agreed below */
        int crowded = ok && picoll_cu_stream_is_default(stream) &&
                      picoll_cuda_ws_sharing(ws) > picoll_cfg.stream_default_sharing;
        if (crowded) {
            picoll_info("stream communicator on a default stream: %d ranks share a GPU, more than "
                        "PICOLL_STREAM_DEFAULT_SHARING=%ld: its calls take the stream's thread",
                        picoll_cuda_ws_sharing(ws), picoll_cfg.stream_default_sharing);
        }
        ok = ok && !crowded;
        if (PMPI_Allreduce(&ok, &all, 1, MPI_INT, MPI_MIN, comm) != MPI_SUCCESS) {
            all = 0;
        }
        if (all) {
            picoll_cuda_ws_set_stream(ws, stream);
            ctx->coll.cuda_enq = ws;
            ctx->coll.cuda_enq_limits = picoll_cuda_ws_limits(ws); /* once per workspace */
            stream_exchange(ctx, comm, ws);
        } else {
            /* NULL on every rank where the creation failed (it released its own); else made on
             * every rank, and released together */
            picoll_cuda_ws_destroy(ws, ctx->coll.shm);
            picoll_info("stream communicator: no device workspace on its stream on some rank: its "
                        "enqueued collectives run on the stream's thread");
        }
    }
    picoll_reentry--;
    return all ? ctx : NULL;
}
#endif
