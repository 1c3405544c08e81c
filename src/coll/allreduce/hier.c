/* Allreduce between nodes, in chunks: node reduce-scatter through the workspace (rail l reduces
 * block l of the chunk from every local rank, in local rank order), allreduce of each block on its
 * rail over the network (recursive doubling, Rabenseifner's or a ring: coll/netmodel.h chooses),
 * node all-gather (every local rank copies every block out of the rail ranks' slots). Small
 * messages on nodes of equal size skip the reduce-scatter: see picoll_allreduce_hier_oneshot.
 *
 * A rail member talks only to members (me + 2^k) mod n and (me - 2^k) mod n, 2^k < n (the
 * partners the network connects, net/partners.h): the XOR partners within the largest power of
 * two, the fold partners me +- p2 and the ring's neighbours are all such. */
#include "coll/algs.h"
#include "reduce/reduce.h"
#include "util/config.h"

#include <mpi.h>
#include <string.h>

#define HIER_CHUNK_MAX (1u << 20)
#define COLL_NAME "MPI_Allreduce"
#define FOLD_RESULT_STEP 1000

/* Whether a op b and b op a have the same bits, so a pair may reduce in place: all but MIN and
 * MAX of floating types, whose answer with a NaN depends on the order. */
static int order_free(const picoll_allreduce_args_t *args)
{
    int fp = args->dtype == PICOLL_DT_FLOAT || args->dtype == PICOLL_DT_DOUBLE ||
             args->dtype == PICOLL_DT_LONG_DOUBLE || args->dtype == PICOLL_DT_FLOAT16 ||
             args->dtype == PICOLL_DT_BFLOAT16;
    return !(fp && (args->op == PICOLL_OP_MIN || args->op == PICOLL_OP_MAX));
}

/* mine = the pair's reduction, the lower member's operand first: mine's where mine_lower, else
 * theirs (then theirs is overwritten on the way). */
static void reduce_pair(const picoll_allreduce_args_t *args, char *mine, char *theirs, size_t count,
                        int mine_lower)
{
    if (mine_lower || order_free(args)) {
        picoll_reduce_acc(args->dtype, args->op, mine, theirs, count);
        return;
    }
    picoll_reduce_acc(args->dtype, args->op, theirs, mine, count);
    memcpy(mine, theirs, count * picoll_dtype_size(args->dtype));
}

/* The largest power of two <= n. */
static int rail_p2(int n)
{
    int p2 = 1;
    while (p2 * 2 <= n) {
        p2 *= 2;
    }
    return p2;
}

/* The fold of the members beyond p2, for recursive doubling and Rabenseifner's. Member me >= p2
 * (fold_out) hands its input to me - p2 and gets the result back into the same buffer (the
 * partner sends it only after my input has fully arrived): returns the AND of every member's
 * vote, which comes with it. Member me < n - p2 (fold_in) reduces me + p2's input into buf (mine
 * first) and returns the vote it came with; fold_back sends the result. */
static int fold_out(picoll_net_t *net, int partner, char *buf, size_t bytes, int vote)
{
    picoll_net_req_t r[2];
    picoll_net_irecv(net, partner, FOLD_RESULT_STEP, buf, bytes, &r[0]);
    picoll_net_isend(net, partner, 0, buf, bytes, vote, &r[1]);
    return picoll_net_waitall(net, r, 2, COLL_NAME);
}

static int fold_in(picoll_hier_t *h, const picoll_allreduce_args_t *args, int partner, char *buf,
                   size_t count)
{
    picoll_net_req_t r;
    picoll_net_irecv(h->net, partner, 0, h->scratch[0], count * picoll_dtype_size(args->dtype), &r);
    int vote = picoll_net_waitall(h->net, &r, 1, COLL_NAME);
    picoll_reduce_acc(args->dtype, args->op, buf, h->scratch[0], count);
    return vote;
}

static void fold_back(picoll_net_t *net, int partner, const char *buf, size_t bytes, int vote)
{
    picoll_net_req_t r;
    picoll_net_isend(net, partner, FOLD_RESULT_STEP, buf, bytes, vote, &r);
    picoll_net_waitall(net, &r, 1, COLL_NAME);
}

/* Recursive doubling on the rail, folding the members beyond the largest power of two into the
 * first ones. Each pair reduces in the order (lower member, higher member), so both get the same
 * bits. Returns the AND of every member's vote. */
static int rail_rd(picoll_hier_t *h, const picoll_allreduce_args_t *args, char *buf, size_t count,
                   int vote)
{
    picoll_net_t *net = h->net;
    int n = picoll_net_size(net), me = picoll_net_rank(net), p2 = rail_p2(n);
    size_t bytes = count * picoll_dtype_size(args->dtype);
    char *bufs[3] = {buf, h->scratch[0], h->scratch[1]};
    int cur = 0;
    unsigned step = 1;

    if (me >= p2) {
        return fold_out(net, me - p2, buf, bytes, vote);
    }
    if (me + p2 < n) {
        vote &= fold_in(h, args, me + p2, buf, count);
    }
    for (int mask = 1; mask < p2; mask <<= 1, step++) {
        int partner = me ^ mask;
        int in = (cur + 1) % 3, out = (cur + 2) % 3;
        vote &= picoll_net_sendrecv(net, step, partner, bufs[cur], bytes, partner, bufs[in], bytes,
                                    vote, COLL_NAME);
        if (order_free(args)) {
            picoll_reduce_acc(args->dtype, args->op, bufs[cur], bufs[in], count);
            continue;
        }
        const void *srcs[2] = {me < partner ? bufs[cur] : bufs[in],
                               me < partner ? bufs[in] : bufs[cur]};
        picoll_reduce(args->dtype, args->op, bufs[out], srcs, 2, count);
        cur = out;
    }
    if (me + p2 < n) {
        fold_back(net, me + p2, bufs[cur], bytes, vote);
    }
    if (cur != 0) {
        memcpy(buf, bufs[cur], bytes);
    }
    return vote;
}

/* Element offset of block b of count elements split in p (picoll_split_block; b = p: count). */
static size_t block_at(size_t count, size_t esize, int p, int b)
{
    size_t lo, hi;
    picoll_split_block(count, esize, p, b, &lo, &hi);
    return lo;
}

/* Rabenseifner's on the rail, in place, the members beyond p2 folded in as in rail_rd. Recursive
 * halving (at each step a member keeps half of its range of blocks, sends the other half to its
 * partner and reduces the partner's copy of the half it keeps) leaves block me of p2 reduced on
 * member me; recursive doubling gathers the blocks. Each block is reduced on one member only, the
 * lower member's operand first, so every member gets the same bits. Returns the AND of every
 * member's vote: the halving is a butterfly, after which each has heard from all. */
static int rail_rab(picoll_hier_t *h, const picoll_allreduce_args_t *args, char *buf, size_t count,
                    int vote)
{
    picoll_net_t *net = h->net;
    int n = picoll_net_size(net), me = picoll_net_rank(net), p2 = rail_p2(n);
    size_t esize = picoll_dtype_size(args->dtype);
    int lo = 0, hi = p2; /* my range of blocks */
    unsigned step = 1;

    if (me >= p2) {
        return fold_out(net, me - p2, buf, count * esize, vote);
    }
    if (me + p2 < n) {
        vote &= fold_in(h, args, me + p2, buf, count);
    }
    for (int mask = p2 / 2; mask >= 1; mask /= 2, step++) {
        int partner = me ^ mask, mid = lo + (hi - lo) / 2, upper = (me & mask) != 0;
        size_t k0 = block_at(count, esize, p2, upper ? mid : lo);
        size_t k1 = block_at(count, esize, p2, upper ? hi : mid);
        size_t g0 = block_at(count, esize, p2, upper ? lo : mid);
        size_t g1 = block_at(count, esize, p2, upper ? mid : hi);
        vote &= picoll_net_sendrecv(net, step, partner, buf + g0 * esize, (g1 - g0) * esize,
                                    partner, h->scratch[0], (k1 - k0) * esize, vote, COLL_NAME);
        reduce_pair(args, buf + k0 * esize, h->scratch[0], k1 - k0, me < partner);
        lo = upper ? mid : lo;
        hi = upper ? hi : mid;
    }
    for (int mask = 1; mask < p2; mask <<= 1, step++) {
        /* my range is the aligned group of mask blocks holding me, the partner's the next one */
        int partner = me ^ mask, plo = lo ^ mask;
        size_t m0 = block_at(count, esize, p2, lo), m1 = block_at(count, esize, p2, lo + mask);
        size_t p0 = block_at(count, esize, p2, plo), p1 = block_at(count, esize, p2, plo + mask);
        vote &= picoll_net_sendrecv(net, step, partner, buf + m0 * esize, (m1 - m0) * esize,
                                    partner, buf + p0 * esize, (p1 - p0) * esize, vote, COLL_NAME);
        lo = lo < plo ? lo : plo;
    }
    if (me + p2 < n) {
        fold_back(net, me + p2, buf, count * esize, vote);
    }
    return vote;
}

/* Ring on the rail, in place: reduce-scatter (segment k is reduced along the ring and ends whole
 * on member k + 1) then all-gather. Each segment is reduced once, so every member gets the same
 * bits. Returns the AND of every member's vote: after n - 1 steps each has heard from all. */
static int rail_ring(picoll_hier_t *h, const picoll_allreduce_args_t *args, char *buf, size_t count,
                     int vote)
{
    picoll_net_t *net = h->net;
    int n = picoll_net_size(net), me = picoll_net_rank(net);
    int right = (me + 1) % n, left = (me + n - 1) % n;
    size_t esize = picoll_dtype_size(args->dtype);
    size_t slo, shi, rlo, rhi;

    for (int s = 0; s < n - 1; s++) {
        int sseg = (me - s + n) % n, rseg = (me - s - 1 + 2 * n) % n;
        picoll_split_block(count, esize, n, sseg, &slo, &shi);
        picoll_split_block(count, esize, n, rseg, &rlo, &rhi);
        vote &= picoll_net_sendrecv(net, (unsigned)s, right, buf + slo * esize, (shi - slo) * esize,
                                    left, h->scratch[0], (rhi - rlo) * esize, vote, COLL_NAME);
        picoll_reduce_acc(args->dtype, args->op, buf + rlo * esize, h->scratch[0], rhi - rlo);
    }
    for (int s = 0; s < n - 1; s++) {
        int sseg = (me + 1 - s + n) % n, rseg = (me - s + n) % n;
        picoll_split_block(count, esize, n, sseg, &slo, &shi);
        picoll_split_block(count, esize, n, rseg, &rlo, &rhi);
        vote &= picoll_net_sendrecv(net, (unsigned)(n + s), right, buf + slo * esize,
                                    (shi - slo) * esize, left, buf + rlo * esize,
                                    (rhi - rlo) * esize, vote, COLL_NAME);
    }
    return vote;
}

static size_t hier_chunk(const picoll_shm_t *shm, size_t esize)
{
    return (shm->slot_size < HIER_CHUNK_MAX ? shm->slot_size : HIER_CHUNK_MAX) / esize;
}

size_t picoll_allreduce_hier_chunk_bytes(const picoll_shm_t *shm,
                                         const picoll_allreduce_args_t *args, int oneshot)
{
    size_t esize = picoll_dtype_size(args->dtype);
    return oneshot ? args->count * esize : hier_chunk(shm, esize) * esize;
}

size_t picoll_allreduce_hier_rail_block(const picoll_shm_t *shm, const picoll_hier_t *h,
                                        const picoll_allreduce_args_t *args)
{
    size_t esize = picoll_dtype_size(args->dtype);
    size_t chunk = hier_chunk(shm, esize), lo, hi;
    picoll_split_block(args->count < chunk ? args->count : chunk, esize, h->nrails, 0, &lo, &hi);
    return (hi - lo) * esize;
}

/* Small messages on nodes of equal size: one node barrier, every local rank reduces the node's
 * inputs (in local rank order) and runs recursive doubling of the whole vector on its own rail,
 * so every rank ends with the result and the votes of all: no second barrier. My out buffer is
 * private here (nobody reads it in this call, and the next call's readers wait for my barrier). */
picoll_status_t picoll_allreduce_hier_oneshot(picoll_shm_t *shm, picoll_hier_t *h,
                                              const picoll_allreduce_args_t *args, int vote)
{
    size_t esize = picoll_dtype_size(args->dtype), bytes = args->count * esize;
    const char *src = args->sendbuf == MPI_IN_PLACE ? args->recvbuf : args->sendbuf;
    const void *srcs[shm->nlocal];
    uint64_t in = shm->epoch + 1;
    char *mine = picoll_shm_slot(shm, shm->me, shm->epoch + 2);

    if (args->pipe != NULL) {
        picoll_stage_pipe_ready(args->pipe, 0, bytes);
    }
    if (vote) {
        memcpy(picoll_shm_slot(shm, shm->me, in), src, bytes);
    }
    int all = picoll_shm_barrier(shm, vote, COLL_NAME);
    if (all) {
        for (int r = 0; r < shm->nlocal; r++) {
            srcs[r] = picoll_shm_slot(shm, r, in);
        }
        srcs[shm->me] = src;
        picoll_reduce(args->dtype, args->op, mine, srcs, shm->nlocal, args->count);
    }
    picoll_net_next(h->net);
    if (!rail_rd(h, args, mine, args->count, all)) {
        return PICOLL_DECLINED;
    }
    memcpy(args->recvbuf, mine, bytes);
    if (args->pipe != NULL) {
        picoll_stage_pipe_done(args->pipe, 0, bytes);
    }
    return PICOLL_OK;
}

/* The network step's method on my rail (the same on every member). */
static int rail_allreduce(picoll_hier_t *h, const picoll_allreduce_args_t *args, char *buf,
                          size_t count, int vote, picoll_rail_method_t how)
{
    switch (how) {
    case PICOLL_RAIL_RING: return rail_ring(h, args, buf, count, vote);
    case PICOLL_RAIL_RAB: return rail_rab(h, args, buf, count, vote);
    default: return rail_rd(h, args, buf, count, vote);
    }
}

/* how: the method of every rail in every chunk, chosen once per call so that all agree */
picoll_status_t picoll_allreduce_hier(picoll_shm_t *shm, picoll_hier_t *h,
                                      const picoll_allreduce_args_t *args, int vote,
                                      picoll_rail_method_t how)
{
    size_t esize = picoll_dtype_size(args->dtype);
    size_t chunk = hier_chunk(shm, esize);
    const char *src = args->sendbuf == MPI_IN_PLACE ? args->recvbuf : args->sendbuf;
    char *dst = args->recvbuf;
    const void *srcs[shm->nlocal];
    int n = shm->nlocal, me = shm->me;
    int nrails = h->nrails;
    int on_rail = me < nrails;

    for (size_t off = 0; off < args->count; off += chunk) {
        size_t cnt = args->count - off < chunk ? args->count - off : chunk;
        size_t lo = 0, hi = 0;
        uint64_t in = shm->epoch + 1, out = shm->epoch + 2;

        if (on_rail) {
            picoll_split_block(cnt, esize, nrails, me, &lo, &hi);
        }
        if (args->pipe != NULL) {
            /* the device input's chunk is on the host (the next ones are on their way) */
            picoll_stage_pipe_ready(args->pipe, off * esize, cnt * esize);
        }
        if (vote) {
            /* all but my own block: the others never read it */
            char *slot = picoll_shm_slot(shm, me, in);
            memcpy(slot, src + off * esize, lo * esize);
            memcpy(slot + hi * esize, src + (off + hi) * esize, (cnt - hi) * esize);
        }
        /* a node that votes no still runs the network step, to tell the other nodes */
        int node_vote = picoll_shm_barrier(shm, vote, COLL_NAME);
        int all = node_vote;
        if (on_rail) {
            char *mine = picoll_shm_slot(shm, me, out) + lo * esize;
            picoll_net_next(h->net);
            if (hi > lo) {
                if (node_vote) {
                    for (int r = 0; r < n; r++) {
                        srcs[r] = picoll_shm_slot(shm, r, in) + lo * esize;
                    }
                    srcs[me] = src + (off + lo) * esize;
                    picoll_reduce(args->dtype, args->op, mine, srcs, n, hi - lo);
                }
                all = rail_allreduce(h, args, mine, hi - lo, node_vote, how);
            }
        }
        /* rail 0 always has a block: through it every local rank learns the global vote */
        if (!picoll_shm_barrier(shm, all, COLL_NAME)) {
            return PICOLL_DECLINED;
        }
        vote = 1; /* only the first chunk votes */
        for (int r = 0; r < nrails; r++) {
            picoll_split_block(cnt, esize, nrails, r, &lo, &hi);
            if (hi > lo) {
                memcpy(dst + (off + lo) * esize, picoll_shm_slot(shm, r, out) + lo * esize,
                       (hi - lo) * esize);
            }
        }
        if (args->pipe != NULL) {
            /* back to the device while the next chunk runs */
            picoll_stage_pipe_done(args->pipe, off * esize, cnt * esize);
        }
    }
    return PICOLL_OK;
}

/* ---- the network step of the device hierarchy (hier_cuda.c) ---- */

uint32_t picoll_allreduce_hier_rail_and(picoll_hier_t *h, uint32_t mask)
{
    picoll_allreduce_args_t a = {.count = 1, .dtype = PICOLL_DT_UINT32, .op = PICOLL_OP_BAND};
    picoll_net_next(h->net);
    if (!rail_rd(h, &a, (char *)&mask, 1, 1)) {
        return 0;
    }
    return mask;
}

size_t picoll_allreduce_hier_rails_chunk(const picoll_hier_t *h, size_t esize, size_t max)
{
    /* the network step's scratch buffers hold a chunk */
    size_t c = h->scratch_size < max ? h->scratch_size : max;
    c = c / esize * esize;
    return c > 0 ? c : esize;
}

picoll_status_t picoll_allreduce_hier_rails(picoll_hier_t *h, const picoll_allreduce_args_t *args,
                                            char *buf, size_t count, size_t chunk_bytes)
{
    size_t esize = picoll_dtype_size(args->dtype);
    size_t chunk = chunk_bytes / esize;
    int n = picoll_net_size(h->net);

    for (size_t off = 0; off < count; off += chunk) {
        size_t cnt = count - off < chunk ? count - off : chunk;
        if (args->pipe != NULL) {
            picoll_stage_pipe_ready(args->pipe, off * esize, cnt * esize);
        }
        picoll_net_next(h->net);
        /* the same on every member of the rail: they all hold this rank's block of the vector */
        picoll_rail_method_t how = picoll_netmodel_allreduce(&picoll_cfg, n, cnt * esize);
        int ok = rail_allreduce(h, args, buf + off * esize, cnt, 1, how);
        if (!ok) {
            return PICOLL_ERR_UCX;
        }
        if (args->pipe != NULL) {
            picoll_stage_pipe_done(args->pipe, off * esize, cnt * esize);
        }
    }
    return PICOLL_OK;
}
