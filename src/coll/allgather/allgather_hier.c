/* Allgather between nodes, in chunks of each block: every rank copies its piece into its slot;
 * rail l gathers the pieces of local ranks l, l + nrails, ... into its node's part and passes the
 * parts round the ring of nodes; every rank copies every part out of the rail ranks' slots. */
#include "coll/algs.h"

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

picoll_status_t picoll_allgather_hier(picoll_shm_t *shm, picoll_hier_t *h,
                                      const picoll_blocks_args_t *args, int vote)
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
            char *slot = picoll_shm_slot(shm, me, out);
            int x0 = h->node;
            int right = (x0 + 1) % n, left = (x0 + n - 1) % n;
            /* my node's part: the pieces of the local ranks this rail carries */
            char *part = slot + part_offset(h, me, x0, c);
            for (int k = 0; k < picoll_hier_rail_count(h, x0, me); k++) {
                memcpy(part + (size_t)k * c, picoll_shm_slot(shm, me + k * nrails, in), c);
            }
            picoll_net_next(h->net);
            for (int s = 0; s < n - 1; s++) {
                int sx = (x0 - s + n) % n, rx = (x0 - s - 1 + 2 * n) % n;
                all &= picoll_net_sendrecv(
                    h->net, (unsigned)s, right, slot + part_offset(h, me, sx, c),
                    (size_t)picoll_hier_rail_count(h, sx, me) * c, left,
                    slot + part_offset(h, me, rx, c), (size_t)picoll_hier_rail_count(h, rx, me) * c,
                    all, COLL_NAME);
            }
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

/* The device hierarchy's network step (allgather_hier_cuda.c): a ring of the nodes on my rail,
 * each passing on the piece it received last; arrived(k) as soon as node k's piece is in, so that
 * its copy back to the device overlaps the next step. */
picoll_status_t picoll_allgather_hier_rails(picoll_hier_t *h, char *buf, size_t len,
                                            void (*arrived)(int k, void *arg), void *arg)
{
    picoll_net_t *net = h->net;
    int n = picoll_net_size(net), me = picoll_net_rank(net);
    int right = (me + 1) % n, left = (me + n - 1) % n;

    picoll_net_next(net);
    for (int s = 0; s < n - 1; s++) {
        int out = (me - s + n) % n, in = (me - s - 1 + n) % n;
        if (!picoll_net_sendrecv(net, (unsigned)s, right, buf + (size_t)out * len, len, left,
                                 buf + (size_t)in * len, len, 1, COLL_NAME)) {
            return PICOLL_ERR_UCX;
        }
        arrived(in, arg);
    }
    return PICOLL_OK;
}
