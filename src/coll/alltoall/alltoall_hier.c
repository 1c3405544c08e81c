/* Alltoall between nodes, in chunks of each block. Every rank copies its pieces for every
 * destination into its slot, in node order. Rail l sends to rail l of every other node the pieces
 * that local ranks l, l + nrails, ... have for that node's ranks, a bounded number of peers at a
 * time (PICOLL_NET_INFLIGHT), and receives theirs into its slot; every rank then copies its own
 * pieces out of the rail ranks' slots. */
#include "coll/algs.h"

#include <mpi.h>
#include <string.h>

#define COLL_NAME "MPI_Alltoall"

static int max_rail_count(const picoll_hier_t *h, size_t *sum)
{
    int most = 0;
    *sum = 0;
    for (int x = 0; x < h->num_nodes; x++) {
        int k = picoll_hier_rail_count(h, x, 0);
        *sum += (size_t)k;
        most = k > most ? k : most;
    }
    return most;
}

/* Largest piece that fits: the copy-in (size pieces), a rail's send staging (its sources times
 * size pieces) and a rail's receive area (local size times the pieces of the rail). */
size_t picoll_alltoall_hier_piece_max(const picoll_hier_t *h, size_t slot_size)
{
    size_t rail_pieces;
    size_t size = (size_t)h->node_offset[h->num_nodes];
    size_t send = (size_t)max_rail_count(h, &rail_pieces) * size;
    size_t lmax = 0;
    for (int x = 0; x < h->num_nodes; x++) {
        lmax = (size_t)h->node_size[x] > lmax ? (size_t)h->node_size[x] : lmax;
    }
    size_t recv = lmax * rail_pieces;
    size_t most = send > recv ? send : recv;
    return slot_size / (most > size ? most : size);
}

/* Bytes before the part from node y in rail l's receive area, for pieces of c bytes. */
static size_t recv_offset(const picoll_hier_t *h, int l, int y, size_t c)
{
    size_t pieces = 0;
    for (int z = 0; z < y; z++) {
        pieces += (size_t)picoll_hier_rail_count(h, z, l);
    }
    return pieces * (size_t)h->node_size[h->node] * c;
}

/* Gather into `part` what the local ranks of rail l have for node y. */
static void gather_part(const picoll_shm_t *shm, const picoll_hier_t *h, uint64_t in, int l, int y,
                        size_t c, char *part)
{
    size_t len = (size_t)h->node_size[y] * c;
    for (int k = 0; k < picoll_hier_rail_count(h, h->node, l); k++) {
        memcpy(part + (size_t)k * len,
               picoll_shm_slot(shm, l + k * h->nrails, in) + (size_t)h->node_offset[y] * c, len);
    }
}

/* The network step of rail l: returns the AND of the votes. */
static int rail_exchange(const picoll_shm_t *shm, picoll_hier_t *h, uint64_t in, uint64_t out,
                         size_t c, int vote)
{
    int n = h->num_nodes, x0 = h->node, l = shm->me;
    char *recv = picoll_shm_slot(shm, l, out);
    size_t send_len = (size_t)picoll_hier_rail_count(h, x0, l) * c; /* times node_size[y] */
    picoll_net_req_t reqs[2 * h->inflight];
    int all = vote;

    gather_part(shm, h, in, l, x0, c, recv + recv_offset(h, l, x0, c));
    if (picoll_net_connect_all(h->net) != PICOLL_OK) {
        return 0; /* on every member of every rail: every rank falls back */
    }
    picoll_net_next(h->net);
    for (int s0 = 1; s0 < n; s0 += h->inflight) {
        int nreq = 0;
        for (int s = s0; s < n && s < s0 + h->inflight; s++) {
            int to = (x0 + s) % n, from = (x0 - s + n) % n;
            char *part = h->scratch[0] + send_len * (size_t)h->node_offset[to];
            gather_part(shm, h, in, l, to, c, part);
            picoll_net_irecv(h->net, from, 0, recv + recv_offset(h, l, from, c),
                             (size_t)picoll_hier_rail_count(h, from, l) * (size_t)h->node_size[x0] *
                                 c,
                             &reqs[nreq++]);
            picoll_net_isend(h->net, to, 0, part, send_len * (size_t)h->node_size[to], vote,
                             &reqs[nreq++]);
        }
        all &= picoll_net_waitall(h->net, reqs, nreq, COLL_NAME);
    }
    return all;
}

picoll_status_t picoll_alltoall_hier(picoll_shm_t *shm, picoll_hier_t *h,
                                     const picoll_blocks_args_t *args, int vote)
{
    size_t b = args->block_bytes;
    size_t cmax = picoll_alltoall_hier_piece_max(h, shm->slot_size);
    const char *src = args->sendbuf == MPI_IN_PLACE ? args->recvbuf : args->sendbuf;
    char *dst = args->recvbuf;
    int me = shm->me, nrails = h->nrails, n = h->num_nodes;
    int size = h->node_offset[n];
    int lsize = h->node_size[h->node];

    for (size_t o = 0; o < b; o += cmax) {
        size_t c = b - o < cmax ? b - o : cmax;
        uint64_t in = shm->epoch + 1, out = shm->epoch + 2;

        if (vote) {
            char *slot = picoll_shm_slot(shm, me, in);
            for (int q = 0; q < size; q++) {
                memcpy(slot + (size_t)q * c, src + (size_t)h->rank_of[q] * b + o, c);
            }
        }
        int all = picoll_shm_barrier(shm, vote, COLL_NAME);
        if (me < nrails) {
            all = rail_exchange(shm, h, in, out, c, all);
        }
        if (!picoll_shm_barrier(shm, all, COLL_NAME)) {
            return PICOLL_DECLINED;
        }
        vote = 1; /* only the first chunk votes */
        /* the piece of source (y, i) for me is in rail i % nrails's area: part from y, source
         * i / nrails of that rail, destination me */
        for (int y = 0; y < n; y++) {
            for (int i = 0; i < h->node_size[y]; i++) {
                int l = i % nrails, k = i / nrails;
                const char *piece = picoll_shm_slot(shm, l, out) + recv_offset(h, l, y, c) +
                                    ((size_t)k * (size_t)lsize + (size_t)me) * c;
                memcpy(dst + (size_t)h->rank_of[h->node_offset[y] + i] * b + o, piece, c);
            }
        }
    }
    return PICOLL_OK;
}

/* The device hierarchy's network step (alltoall_hier_cuda.c): pairwise exchange with the other
 * nodes on my rail, node x + k then x + 2k..., one pair at a time (each exchange is a whole
 * piece); arrived(k) as soon as node k's piece is in, so that its copy to the device overlaps the
 * next exchange. */
picoll_status_t picoll_alltoall_hier_rails(picoll_hier_t *h, const char *sbuf, char *rbuf,
                                           size_t len, void (*arrived)(int k, void *arg), void *arg)
{
    picoll_net_t *net = h->net;
    int n = picoll_net_size(net), me = picoll_net_rank(net);

    if (picoll_net_connect_all(net) != PICOLL_OK) {
        return PICOLL_ERR_UCX;
    }
    picoll_net_next(net);
    for (int k = 1; k < n; k++) {
        int to = (me + k) % n, from = (me - k + n) % n;
        if (!picoll_net_sendrecv(net, (unsigned)k, to, sbuf + (size_t)to * len, len, from,
                                 rbuf + (size_t)from * len, len, 1, COLL_NAME)) {
            return PICOLL_ERR_UCX;
        }
        arrived(from, arg);
    }
    return PICOLL_OK;
}
