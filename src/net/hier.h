/* The shape of a communicator that spans nodes, for the hierarchical algorithms: its nodes (or
 * virtual nodes, PICOLL_VNODE_SIZE), the ranks of each, and the rails that join them.
 *
 * Nodes are numbered by their lowest rank in the communicator, local ranks by rank, so every
 * rank computes the same shape whatever the placement (block, round-robin, uneven). There are as
 * many rails as ranks on the smallest node: rail l joins local rank l of every node; local ranks
 * at or above that take part in the node steps only. */
#ifndef PICOLL_HIER_H
#define PICOLL_HIER_H

#include <mpi.h>
#include <stddef.h>
#include "net/net.h"
#include "util/status.h"

typedef struct {
    int num_nodes;
    int node;           /* my node's index */
    int nrails;         /* ranks on the smallest node */
    int even;           /* every node has nrails ranks: every rank is on a rail */
    int rail_most;      /* the most ranks one node has on a rail (rail 0's, the largest
                           * picoll_hier_rail_count) */
    int *node_size;     /* [num_nodes] */
    int *node_offset;   /* [num_nodes + 1]: prefix sums of node_size */
    int *rank_of;       /* [comm size]: rank_of[node_offset[x] + j] is local rank j of node x */
    MPI_Comm rail_comm; /* MPI_COMM_NULL off the rails */
    picoll_net_t *net;  /* NULL off the rails */
    char *scratch[2];   /* private buffers of scratch_size bytes, for the network steps */
    size_t scratch_size;
    int inflight; /* PICOLL_NET_INFLIGHT */
} picoll_hier_t;

/* Collective over comm. node_comm holds the ranks of my (virtual) node, ordered by rank;
 * scratch_size is the workspace's slot size. Every rank takes part in every exchange even after a
 * local failure; then it returns an error and *out is NULL (the caller agrees on the outcome). */
picoll_status_t picoll_hier_create(MPI_Comm comm, MPI_Comm node_comm, size_t scratch_size,
                                   double timeout, picoll_hier_t **out);
void picoll_hier_destroy(picoll_hier_t *h);

/* Ranks of node x that rail l carries: local ranks l, l + nrails, ... */
static inline int picoll_hier_rail_count(const picoll_hier_t *h, int x, int l)
{
    return (h->node_size[x] - l + h->nrails - 1) / h->nrails;
}

#endif
