/* Allgather between nodes, in chunks of each block: every rank copies its piece into its slot;
 * rail l gathers the pieces of local ranks l, l + nrails, ... into its node's part and passes the
 * parts round the ring of nodes, or by Bruck's steps (coll/netmodel.h chooses); every rank copies
 * every part out of the rail ranks' slots. */
#include "coll/algs.h"
#include "util/config.h"

#include <mpi.h>
#include <string.h>

#define COLL_NAME "MPI_Allgather"

/* Bytes before node x's part in rail l's slot, for pieces of c bytes. */
static size_t part_offset(const picoll_hier_t *h, int l, int x, size_t c)
{
    size_t pieces = 0;
    for (int y = 0; y < x; y++) {
        pieces += (size_t)picoll_hier_rail_count(h, y, l);
    }
    return pieces * c;
}

/* Largest piece the workspace holds: rail 0 carries the most pieces. */
size_t picoll_allgather_hier_piece_max(const picoll_hier_t *h, size_t slot_size)
{
    size_t pieces = 0;
    for (int x = 0; x < h->num_nodes; x++) {
        pieces += (size_t)picoll_hier_rail_count(h, x, 0);
    }
    return slot_size / pieces;
}

/* A rail's buffer of the nodes' parts, in node order: node x's part is bytes [part_at(x),
 * part_at(x + 1)). Host (h set): rail `rail`'s pieces of c bytes, rail_count of them a node;
 * device (h NULL): parts of c bytes. arrived: called for each node's part as it is in, or NULL. */
typedef struct {
    char *buf;
    const picoll_hier_t *h;
    int rail;
    size_t c;
    void (*arrived)(int k, void *arg);
    void *arg;
} rail_parts_t;

static size_t part_at(const rail_parts_t *p, int x)
{
    return p->h != NULL ? part_offset(p->h, p->rail, x, p->c) : (size_t)x * p->c;
}

/* The parts round the ring of the rail's members, each passing on the part it received last.
 * Returns the AND of every member's vote (after n - 1 steps each has heard from all). */
static int parts_ring(picoll_net_t *net, const rail_parts_t *p, int vote)
{
    int n = picoll_net_size(net), me = picoll_net_rank(net);
    int right = (me + 1) % n, left = (me + n - 1) % n;

    for (int s = 0; s < n - 1; s++) {
        int sx = (me - s + n) % n, rx = (me - s - 1 + 2 * n) % n;
        size_t so = part_at(p, sx), ro = part_at(p, rx);
        vote &= picoll_net_sendrecv(net, (unsigned)s, right, p->buf + so, part_at(p, sx + 1) - so,
                                    left, p->buf + ro, part_at(p, rx + 1) - ro, vote, COLL_NAME);
        if (p->arrived != NULL) {
            p->arrived(rx, p->arg);
        }
    }
    return vote;
}

/* Posts the transfer with peer of the parts of nodes x, x + 1, ..., x + cnt - 1 (mod n): one
 * message, or two where the range wraps past the last node (steps step and step + 1; sender and
 * receiver split the same range alike). Returns how many requests it posted into r. */
static int parts_post(picoll_net_t *net, const rail_parts_t *p, int peer, int x, int cnt,
                      unsigned step, int send, int vote, picoll_net_req_t *r)
{
    int n = picoll_net_size(net), k = 0;

    while (cnt > 0) {
        int end = x + cnt < n ? x + cnt : n;
        size_t off = part_at(p, x), len = part_at(p, end) - off;
        if (send) {
            picoll_net_isend(net, peer, step + (unsigned)k, p->buf + off, len, vote, &r[k]);
        } else {
            picoll_net_irecv(net, peer, step + (unsigned)k, p->buf + off, len, &r[k]);
        }
        k++;
        cnt -= end - x;
        x = 0;
    }
    return k;
}

/* Bruck's dissemination allgather, the parts staying at their nodes' places: before step k member
 * me holds the parts of nodes me ... me + 2^k - 1 (mod n); it sends the first cnt = min(2^k,
 * n - 2^k) of them to me - 2^k and receives those of nodes me + 2^k ... from me + 2^k. After
 * ceil(log2 n) steps every member holds every part, and has heard every member's vote: returns
 * their AND. */
static int parts_bruck(picoll_net_t *net, const rail_parts_t *p, int vote)
{
    int n = picoll_net_size(net), me = picoll_net_rank(net);
    unsigned step = 0;

    for (int dist = 1; dist < n; dist *= 2, step += 2) {
        int cnt = dist < n - dist ? dist : n - dist, from = (me + dist) % n;
        picoll_net_req_t r[4];
        int nr = parts_post(net, p, from, from, cnt, step, 0, vote, r);
        nr += parts_post(net, p, (me - dist + n) % n, me, cnt, step, 1, vote, r + nr);
        vote &= picoll_net_waitall(net, r, nr, COLL_NAME);
        for (int i = 0; i < cnt && p->arrived != NULL; i++) {
            p->arrived((from + i) % n, p->arg);
        }
    }
    return vote;
}

picoll_status_t picoll_allgather_hier(picoll_shm_t *shm, picoll_hier_t *h,
                                      const picoll_blocks_args_t *args, int vote,
                                      picoll_rail_method_t how)
{
    size_t b = args->block_bytes;
    size_t cmax = picoll_allgather_hier_piece_max(h, shm->slot_size);
    int rank = h->rank_of[h->node_offset[h->node] + shm->me];
    const char *src = args->sendbuf == MPI_IN_PLACE ? (const char *)args->recvbuf + (size_t)rank * b
                                                    : args->sendbuf;
    char *dst = args->recvbuf;
    int me = shm->me, nrails = h->nrails, n = h->num_nodes;
    int on_rail = me < nrails;

    for (size_t o = 0; o < b; o += cmax) {
        size_t c = b - o < cmax ? b - o : cmax;
        uint64_t in = shm->epoch + 1, out = shm->epoch + 2;

        if (vote) {
            memcpy(picoll_shm_slot(shm, me, in), src + o, c);
        }
        int node_vote = picoll_shm_barrier(shm, vote, COLL_NAME);
        int all = node_vote;
        if (on_rail) {
            rail_parts_t p = {.buf = picoll_shm_slot(shm, me, out), .h = h, .rail = me, .c = c};
            /* my node's part: the pieces of the local ranks this rail carries */
            char *part = p.buf + part_at(&p, h->node);
            for (int k = 0; k < picoll_hier_rail_count(h, h->node, me); k++) {
                memcpy(part + (size_t)k * c, picoll_shm_slot(shm, me + k * nrails, in), c);
            }
            picoll_net_next(h->net);
            all = how == PICOLL_RAIL_BRUCK ? parts_bruck(h->net, &p, all)
                                           : parts_ring(h->net, &p, all);
        }
        if (!picoll_shm_barrier(shm, all, COLL_NAME)) {
            return PICOLL_DECLINED;
        }
        vote = 1; /* only the first chunk votes */
        for (int l = 0; l < nrails; l++) {
            const char *slot = picoll_shm_slot(shm, l, out);
            size_t pos = 0;
            for (int x = 0; x < n; x++) {
                for (int k = 0; k < picoll_hier_rail_count(h, x, l); k++, pos += c) {
                    int r = h->rank_of[h->node_offset[x] + l + k * nrails];
                    memcpy(dst + (size_t)r * b + o, slot + pos, c);
                }
            }
        }
    }
    return PICOLL_OK;
}

/* The device hierarchy's network step (allgather_hier_cuda.c): the nodes' parts on my rail, each
 * arrived(k) as soon as node k's part is in, so that its copy back to the device overlaps the
 * next step. */
picoll_status_t picoll_allgather_hier_rails(picoll_hier_t *h, char *buf, size_t len,
                                            void (*arrived)(int k, void *arg), void *arg)
{
    rail_parts_t p = {.buf = buf, .c = len, .arrived = arrived, .arg = arg};
    int n = picoll_net_size(h->net);

    picoll_net_next(h->net);
    /* len is the same on every member of the rail: they all choose alike */
    int ok = picoll_netmodel_allgather(&picoll_cfg, n, len) == PICOLL_RAIL_BRUCK
                 ? parts_bruck(h->net, &p, 1)
                 : parts_ring(h->net, &p, 1);
    return ok ? PICOLL_OK : PICOLL_ERR_UCX;
}
