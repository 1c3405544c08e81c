#include "coll/vote.h"
#include "coll/algs.h"
#include "coll/coll.h"
#include "util/config.h"
#include "util/reentry.h"

#include <string.h>

/* Which executor runs a call. The host algorithm is the same on every rank; the votes are not
 * (memory kinds may differ between ranks). Each buffer's memory kind is looked up once (both with
 * one query where they lie in one allocation), and the host algorithm is asked for only where the
 * path depends on it: where the host executor alone is possible, or buffers of a kind it takes.
 * Where only the host executor is possible its algorithm votes itself, as before. Where the device
 * one is, one barrier on the node carries both votes as bits and every rank takes the path all
 * voted for: device, host (whose algorithm then votes again, yes), or the underlying MPI. The
 * device workspace is made (or moved) here, collectively, when every rank voted for the device and
 * some rank's workspace is missing or in another context than its buffers; select_cuda then picks
 * the device algorithm from its reach (the same on every rank).
 *
 * The hot path (hot: the call's first pick): where the last vote agreed on the device
 * (ctx->cuda_hot, the same on every rank), the workspace's algorithm is known and the call needs
 * no agreement on sizes (agree NULL), there is no barrier: a rank whose own vote is yes, in the
 * workspace's context, returns PICOLL_PATH_CUDA with the device call armed (picoll_cuda_hot_arm):
 * its kernels wait for every rank's as always; a rank whose vote is no says so in the node
 * workspace (dev_no) and takes the full vote, and the yes ranks' device calls then stop their
 * kernels before any wrote the receive buffer and return PICOLL_RETRY: the caller picks again
 * with hot 0, and every rank meets in the full vote. */

/* Not paths: bits of the vote, 1 where a rank's device buffers are in its workspace's context
 * (PATH_HOME), where it described its buffers for the zero-copy path (PATH_ZC), and where it has
 * no range registered for it (PATH_NOREG: the next such votes are skipped where every rank said
 * so, cuda_dev.h's picoll_cuda_zc_skip_t).
 *
 * The zero-copy path (cuda/cuda_zc.c): a call whose device algorithm has a zero-copy form
 * (ops->zero_copy) of at least PICOLL_CUDA_ZERO_COPY_MIN received bytes, with the path not off,
 * never goes on the hot path: its rank describes its buffers in its data buffer of the vote's
 * epoch before the barrier, and where every rank could (and every workspace is home), the call is
 * armed to try it; the device call then maps the peers' buffers and the ranks agree once more. */
enum { PATH_HOME = 4, PATH_ZC = 8, PATH_NOREG = 16 };

/* The zero-copy form of the call's device algorithm alg where it may take it (the same on every
 * rank: the received bytes and the configuration decide, coll/algs.h); its reporting id, else 0. */
static int zc_candidate(const picoll_coll_ctx_t *ctx, const picoll_vote_call_t *call, int alg,
                        size_t *sbytes, size_t *rbytes)
{
    if (call->ops->zero_copy == NULL || ctx->cuda == NULL || alg == PICOLL_ALG_FALLBACK ||
        call->agree != NULL) {
        return 0;
    }
    return call->ops->zero_copy(call->arg, alg, sbytes, rbytes);
}

/* The scope of the ranges registered for ctx's communicator (picoll_register). */
static const void *zc_scope(const picoll_coll_ctx_t *ctx)
{
    return __atomic_load_n(&ctx->reg_scope, __ATOMIC_ACQUIRE);
}

/* The host algorithm, asked for once a call. */
static int host_alg(const picoll_coll_ctx_t *ctx, const picoll_vote_call_t *call, picoll_vote_t *v)
{
    if (!v->host_known) {
        v->host_alg = call->ops->select_host != NULL ? call->ops->select_host(ctx, call->arg)
                                                     : PICOLL_ALG_FALLBACK;
        v->host_known = 1;
    }
    return v->host_alg;
}

static int host_kind(picoll_memkind_t kind)
{
    return kind == PICOLL_MEM_HOST || kind == PICOLL_MEM_PINNED;
}

/* This rank's vote for the device: its buffers (s NULL: in place) are device memory the kernels
 * take, in a context where a workspace can be (not the one whose set-up last failed).
 * *bufctx: their context; *home: 1 where it is the workspace's. */
static int cuda_vote(const picoll_coll_ctx_t *ctx, const picoll_meminfo_t *s,
                     const picoll_meminfo_t *r, picoll_dtype_t dt, int eligible,
                     picoll_cu_context_t *bufctx, int *home, int quick)
{
    return eligible && picoll_cuda_vote(ctx->cuda, s, r, dt, bufctx, home, quick) &&
           (*home || *bufctx != ctx->cuda_failed);
}

/* The node's vote: one barrier carries every rank's bits (mine) and, where agree is not NULL,
 * its sizes (each becomes the largest of every rank's); where every rank voted for the device and
 * some workspace is not in its rank's buffers' context, the workspaces are made there again,
 * collectively. Returns the AND of the bits. */
static uint32_t node_vote(picoll_coll_ctx_t *ctx, uint32_t mine, size_t *agree,
                          picoll_cu_context_t bufctx, const char *name)
{
    picoll_shm_t *shm = ctx->shm;
    const size_t agree_bytes = PICOLL_VOTE_AGREE_N * sizeof(size_t);

    if (agree != NULL) {
        memcpy(picoll_shm_small(shm, shm->me, shm->epoch + 1, agree_bytes), agree, agree_bytes);
    }
    uint32_t all = picoll_shm_barrier_mask(shm, mine, name);
    /* read before any other barrier (the workspace's set-up below has some): a peer writes its
     * line of this parity again only past the next one */
    for (int r = 0; agree != NULL && r < shm->nlocal; r++) {
        size_t peer[PICOLL_VOTE_AGREE_N];
        memcpy(peer, picoll_shm_small(shm, r, shm->epoch, agree_bytes), agree_bytes);
        for (int k = 0; k < PICOLL_VOTE_AGREE_N; k++) {
            agree[k] = peer[k] > agree[k] ? peer[k] : agree[k];
        }
    }
    if ((all & PICOLL_PATH_CUDA) && !(all & PATH_HOME)) {
        picoll_cuda_ws_rehome(&ctx->cuda, ctx->comm, ctx->node_comm, shm, &picoll_cfg, bufctx);
        ctx->cuda_failed = ctx->cuda == NULL ? (void *)bufctx : NULL;
        if (ctx->cuda != NULL) {
            ctx->cuda_limits = picoll_cuda_ws_limits(ctx->cuda); /* once per workspace */
        }
    }
    return all;
}

/* Where only the host executor is possible: its algorithm votes itself (v->vote). */
static picoll_path_t host_only(const picoll_coll_ctx_t *ctx, const picoll_vote_call_t *call,
                               picoll_vote_t *v)
{
    picoll_meminfo_t s, r;

    if (host_alg(ctx, call, v) == PICOLL_ALG_FALLBACK || !call->eligible) {
        v->vote = 0;
        return v->host_alg == PICOLL_ALG_FALLBACK ? PICOLL_PATH_NONE : PICOLL_PATH_HOST;
    }
    picoll_memkind_query_pair(call->recvbuf, call->sendbuf == MPI_IN_PLACE ? NULL : call->sendbuf,
                              &r, &s);
    v->vote = host_kind(s.kind) && host_kind(r.kind);
    v->direct = v->vote && s.kind == PICOLL_MEM_HOST && r.kind == PICOLL_MEM_HOST;
    return PICOLL_PATH_HOST;
}

/* A call whose vote made or moved the workspace (some rank's was missing, or in another context
 * than its buffers: the same on every rank) could not describe its buffers before the barrier:
 * the algorithm was not known yet. Where it has a zero-copy form, the ranks describe them now and
 * agree in one more barrier (the first call of a communicator, or of a new context, only), so that
 * a communicator's first large call is not left to copy. Returns the form's id where every rank
 * described its buffers (the call is then armed), else 0. */
static int zc_after_setup(picoll_coll_ctx_t *ctx, const picoll_vote_call_t *call, int alg)
{
    size_t sbytes = 0, rbytes = 0;
    int zc = zc_candidate(ctx, call, alg, &sbytes, &rbytes);
    if (zc == 0) {
        return 0;
    }
    int mine =
        picoll_cuda_zc_export(ctx->cuda, zc_scope(ctx), call->sendbuf, call->recvbuf, sbytes,
                              rbytes, picoll_shm_slot(ctx->shm, ctx->shm->me, ctx->shm->epoch + 1));
    uint32_t all = picoll_shm_barrier_mask(
        ctx->shm, (mine ? PATH_ZC : 0u) | (picoll_cuda_zc_nothing_registered() ? PATH_NOREG : 0u),
        call->name);
    picoll_cuda_zc_skip_learn(&ctx->zc_skip, (all & PATH_NOREG) != 0);
    if (!(all & PATH_ZC)) {
        return 0;
    }
    picoll_cuda_zc_arm(ctx->cuda, ctx->shm);
    return zc;
}

static picoll_path_t pick_path(picoll_coll_ctx_t *ctx, const picoll_vote_call_t *call,
                               picoll_vote_t *v, int hot)
{
    const picoll_meminfo_t *sp;
    picoll_meminfo_t s, r;

    v->direct = 0;
    v->zc_alg = 0;
    if (!ctx->cuda_possible) {
        return host_only(ctx, call, v);
    }
    /* a workspace exists: its algorithm is known before the barrier, which a call that neither
     * executor takes need not pay */
    if (ctx->cuda != NULL && call->agree == NULL) {
        v->cuda_alg = call->ops->select_cuda(&ctx->cuda_limits, call->arg);
        if (v->cuda_alg == PICOLL_ALG_FALLBACK && host_alg(ctx, call, v) == PICOLL_ALG_FALLBACK) {
            v->vote = 0;
            return PICOLL_PATH_NONE;
        }
    }
    sp = call->sendbuf == MPI_IN_PLACE ? NULL : &s;
    picoll_memkind_query_pair(call->recvbuf, sp == NULL ? NULL : call->sendbuf, &r, &s);
    int host_ok = call->eligible && host_kind(s.kind) && host_kind(r.kind) &&
                  host_alg(ctx, call, v) != PICOLL_ALG_FALLBACK;
    v->direct = host_ok && s.kind == PICOLL_MEM_HOST && r.kind == PICOLL_MEM_HOST;
    int home = 0;
    picoll_cu_context_t bufctx = NULL;
    size_t zc_sbytes = 0, zc_rbytes = 0;
    int zc = zc_candidate(ctx, call, v->cuda_alg, &zc_sbytes, &zc_rbytes);
    /* where no rank had a registered range at the last such vote, the next few skip it (and go on
     * the hot path): the count is the same on every rank (the first pick of a call only) */
    int zc_skipped = zc != 0 && hot && picoll_cuda_zc_skip_take(&ctx->zc_skip);
    zc = zc_skipped ? 0 : zc;
    int quick = hot && call->agree == NULL && ctx->cuda_hot && ctx->cuda != NULL &&
                v->cuda_alg != PICOLL_ALG_FALLBACK && zc == 0;
    int dev = cuda_vote(ctx, sp, &r, call->dtype, call->eligible, &bufctx, &home, quick);
    if (quick) {
        uint64_t n = ++ctx->hot_calls;
        if (dev && home) {
            picoll_cuda_hot_arm(ctx->cuda, ctx->shm, n);
            return PICOLL_PATH_CUDA;
        }
        atomic_store_explicit(&ctx->shm->flags[ctx->shm->me].dev_no, n, memory_order_release);
        picoll_cuda_hot_skip(ctx->cuda);
        /* the full vote's answer goes into the barrier: the quick one took the thread's current
         * context on trust */
        dev = dev && cuda_vote(ctx, sp, &r, call->dtype, 1, &bufctx, &home, 0);
    }
    /* the description goes into this rank's data buffer of the barrier's epoch, which only the
     * host algorithms use otherwise (and they write theirs after this barrier) */
    int zc_mine = zc != 0 && dev && home &&
                  picoll_cuda_zc_export(
                      ctx->cuda, zc_scope(ctx), call->sendbuf, call->recvbuf, zc_sbytes, zc_rbytes,
                      picoll_shm_slot(ctx->shm, ctx->shm->me, ctx->shm->epoch + 1));
    uint32_t mine = (host_ok ? PICOLL_PATH_HOST : 0u) | (dev ? PICOLL_PATH_CUDA : 0u) |
                    (home ? PATH_HOME : 0u) | (zc_mine ? PATH_ZC : 0u) |
                    (zc != 0 && picoll_cuda_zc_nothing_registered() ? PATH_NOREG : 0u);
    uint32_t all = node_vote(ctx, mine, call->agree, bufctx, call->name);
    if (zc != 0) {
        picoll_cuda_zc_skip_learn(&ctx->zc_skip, (all & PATH_NOREG) != 0);
    }
    v->vote = 1;
    ctx->cuda_hot = 0;
    if ((all & PICOLL_PATH_CUDA) && ctx->cuda != NULL) {
        int alg = v->cuda_alg;
        v->cuda_alg = call->ops->select_cuda(&ctx->cuda_limits, call->arg);
        if (v->cuda_alg != PICOLL_ALG_FALLBACK) {
            /* every rank described its buffers, for the algorithm chosen before the barrier */
            if ((all & PATH_ZC) && (all & PATH_HOME) && v->cuda_alg == alg) {
                picoll_cuda_zc_arm(ctx->cuda, ctx->shm);
                v->zc_alg = zc;
            } else if (!(all & PATH_HOME) && !zc_skipped) {
                v->zc_alg = zc_after_setup(ctx, call, v->cuda_alg);
            }
            ctx->cuda_hot = 1;
            return PICOLL_PATH_CUDA;
        }
    }
    if (all & PICOLL_PATH_HOST) {
        return host_alg(ctx, call, v) == PICOLL_ALG_FALLBACK ? PICOLL_PATH_NONE : PICOLL_PATH_HOST;
    }
    return PICOLL_PATH_NONE;
}

picoll_status_t picoll_vote_run(picoll_coll_ctx_t *ctx, const picoll_vote_call_t *call, int *alg)
{
    picoll_vote_t v = {.host_alg = PICOLL_ALG_FALLBACK, .cuda_alg = PICOLL_ALG_FALLBACK};
    picoll_status_t status;
    int hot = 1;

    picoll_reentry++;
    do { /* again after a veto on the hot path, with the full vote */
        v.path = pick_path(ctx, call, &v, hot);
        status = v.path != PICOLL_PATH_CUDA ? PICOLL_OK
                                            : call->ops->run_cuda(ctx, v.cuda_alg, call->arg);
        hot = 0;
    } while (status == PICOLL_RETRY);
    switch (v.path) {
    case PICOLL_PATH_CUDA:
        *alg = v.zc_alg != 0 && picoll_cuda_zc_last(ctx->cuda) ? v.zc_alg : v.cuda_alg;
        break;
    case PICOLL_PATH_HOST: status = call->ops->run_host(ctx, &v, call->arg, alg); break;
    default: status = PICOLL_DECLINED; break;
    }
    picoll_reentry--;
    return status;
}

/* The device hierarchy's agreement (ctx->cuda_hier): each node's ranks agree in one node barrier
 * (their buffers are device memory of the workspace's context, the type is one the kernels take,
 * the node's ranks reach each other: the workspace is made or moved there), then the rails carry
 * the nodes' answers (the AND of a word), so every rail ends with the same; on nodes of unequal
 * size a second node barrier gives it to the ranks off the rails. */
picoll_status_t picoll_vote_hier_cuda(picoll_coll_ctx_t *ctx, const void *sendbuf, void *recvbuf,
                                      picoll_dtype_t dt, int eligible, const char *name,
                                      picoll_meminfo_t *r)
{
    picoll_shm_t *shm = ctx->shm;
    int in_place = sendbuf == MPI_IN_PLACE, home = 0;
    picoll_meminfo_t s;
    picoll_cu_context_t bufctx = NULL;

    picoll_memkind_query_pair(recvbuf, in_place ? NULL : sendbuf, r, &s);
    int dev = cuda_vote(ctx, in_place ? NULL : &s, r, dt, eligible, &bufctx, &home, 0);
    uint32_t all =
        node_vote(ctx, (dev ? PICOLL_PATH_CUDA : 0u) | (home ? PATH_HOME : 0u), NULL, bufctx, name);
    picoll_topo_reach_t reach = ctx->cuda != NULL ? ctx->cuda_limits.reach : PICOLL_TOPO_REACH_NONE;
    /* the node steps over the node's IPC mappings: NVLink or PCIe peer access between every pair
     * (the hybrid cube mesh maps only the quad and the relay) */
    int node_yes = (all & PICOLL_PATH_CUDA) && ctx->cuda != NULL &&
                   (reach == PICOLL_TOPO_REACH_NVLINK || reach == PICOLL_TOPO_REACH_PCIE);
    picoll_hier_t *h = ctx->hier;
    uint32_t yes = shm->me < h->nrails ? picoll_allreduce_hier_rail_and(h, node_yes ? 1u : 0u) : 1u;
    if (!h->even) {
        /* the ranks off the rails learn it from the node's rails (rail 0 is on every node) */
        yes = picoll_shm_barrier_mask(shm, yes, name);
    }
    return yes != 0 ? PICOLL_OK : PICOLL_DECLINED;
}

void picoll_vote_relaunch(picoll_coll_ctx_t *ctx, const picoll_meminfo_t *r)
{
    picoll_cu_context_t bufctx;
    int home;
    picoll_cuda_vote(ctx->cuda, NULL, r, PICOLL_DT_NONE, &bufctx, &home, 0);
}
