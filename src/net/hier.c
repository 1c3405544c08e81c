#include "build-config.h"
#include "net/hier.h"
#include "util/config.h"
#include "util/fatal.h"
#include "util/log.h"

#include <stdlib.h>
#include <string.h>

typedef struct {
    int leader; /* lowest rank of my node */
    int local_rank;
} hier_entry_t;

static int cmp_int(const void *a, const void *b)
{
    int x = *(const int *)a, y = *(const int *)b;
    return (x > y) - (x < y);
}

/* The node index of a leader: its position among the sorted distinct leaders. */
static int leader_index(const int *leaders, int num_nodes, int leader)
{
    const int *p = bsearch(&leader, leaders, (size_t)num_nodes, sizeof(int), cmp_int);
    return p != NULL ? (int)(p - leaders) : -1;
}

void picoll_hier_destroy(picoll_hier_t *h)
{
    if (h == NULL) {
        return;
    }
    picoll_net_destroy(h->net);
    if (h->rail_comm != MPI_COMM_NULL) {
        PMPI_Comm_free(&h->rail_comm);
    }
    free(h->scratch[0]);
    free(h->scratch[1]);
    free(h->node_size);
    free(h->node_offset);
    free(h->rank_of);
    free(h);
}

picoll_status_t picoll_hier_create(MPI_Comm comm, MPI_Comm node_comm, size_t scratch_size,
                                   double timeout, picoll_hier_t **out)
{
    picoll_status_t status = PICOLL_OK;
    int rank, size, local_rank;
    hier_entry_t mine, *all = NULL;
    int *leaders = NULL, *fill = NULL, *rail_ranks = NULL;
    picoll_hier_t *h = calloc(1, sizeof(*h));

    *out = NULL;
    PMPI_Comm_rank(comm, &rank);
    PMPI_Comm_size(comm, &size);
    PMPI_Comm_rank(node_comm, &local_rank);
    mine.local_rank = local_rank;
    PMPI_Allreduce(&rank, &mine.leader, 1, MPI_INT, MPI_MIN, node_comm);
    all = malloc((size_t)size * sizeof(*all));
    leaders = malloc((size_t)size * sizeof(int));
    fill = calloc((size_t)size, sizeof(int));
    if (h == NULL || all == NULL || leaders == NULL || fill == NULL) {
        picoll_fatal("out of memory setting up the hierarchical collectives: aborting the job");
    }
    h->rail_comm = MPI_COMM_NULL;
    if (PMPI_Allgather(&mine, 2, MPI_INT, all, 2, MPI_INT, comm) != MPI_SUCCESS) {
        status = PICOLL_ERR_MPI;
        goto out_split; /* the split below still needs every rank */
    }

    /* nodes, ordered by leader */
    int nn = 0;
    for (int r = 0; r < size; r++) {
        if (all[r].leader == r) {
            leaders[nn++] = r; /* a leader is its own node's lowest rank: already in order */
        }
    }
    h->num_nodes = nn;
    h->node_size = calloc((size_t)nn, sizeof(int));
    h->node_offset = calloc((size_t)nn + 1, sizeof(int));
    h->rank_of = malloc((size_t)size * sizeof(int));
    if (h->node_size == NULL || h->node_offset == NULL || h->rank_of == NULL) {
        status = PICOLL_ERR_NO_MEMORY;
        goto out_split;
    }
    for (int r = 0; r < size; r++) {
        int x = leader_index(leaders, nn, all[r].leader);
        if (x < 0) {
            status = PICOLL_ERR_MPI; /* a leader outside the list: node communicators disagree */
            goto out_split;
        }
        h->node_size[x]++;
    }
    h->nrails = size;
    for (int x = 0; x < nn; x++) {
        h->node_offset[x + 1] = h->node_offset[x] + h->node_size[x];
        if (h->node_size[x] < h->nrails) {
            h->nrails = h->node_size[x];
        }
    }
    h->even = h->nrails * nn == size;
    for (int x = 0; x < nn; x++) {
        int k = (h->node_size[x] + h->nrails - 1) / h->nrails;
        h->rail_most = k > h->rail_most ? k : h->rail_most;
    }
    /* ranks come in increasing order, and so do local ranks within a node */
    for (int r = 0; r < size; r++) {
        int x = leader_index(leaders, nn, all[r].leader);
        h->rank_of[h->node_offset[x] + fill[x]++] = r;
    }
    h->node = leader_index(leaders, nn, mine.leader);

out_split:
    /* rail l: local rank l of every node, ordered by node */
    {
        int on_rail = status == PICOLL_OK && local_rank < h->nrails;
        if (PMPI_Comm_split(comm, on_rail ? local_rank : MPI_UNDEFINED, h->node, &h->rail_comm) !=
            MPI_SUCCESS) {
            h->rail_comm = MPI_COMM_NULL;
            status = PICOLL_ERR_MPI;
        }
    }
    if (h->rail_comm != MPI_COMM_NULL) {
        int n;
        PMPI_Comm_size(h->rail_comm, &n);
        rail_ranks = malloc((size_t)n * sizeof(int));
        if (rail_ranks != NULL && status == PICOLL_OK && n == h->num_nodes) {
            for (int x = 0; x < n; x++) {
                rail_ranks[x] = h->rank_of[h->node_offset[x] + local_rank];
            }
        } else if (rail_ranks != NULL) {
            for (int x = 0; x < n; x++) {
                rail_ranks[x] = -1;
            }
            status = status == PICOLL_OK ? PICOLL_ERR_MPI : status;
        }
        /* collective over the rail: even a rank that failed above takes part */
        picoll_status_t st =
            rail_ranks != NULL ? picoll_net_create(h->rail_comm, rail_ranks, size, timeout, &h->net)
                               : PICOLL_ERR_NO_MEMORY;
        if (rail_ranks == NULL) {
            /* cannot even take part: the others would wait in the exchange */
            picoll_fatal("out of memory setting up the network step: aborting the job");
        }
        if (st != PICOLL_OK && status == PICOLL_OK) {
            status = st;
        }
        h->scratch[0] = malloc(scratch_size);
        h->scratch[1] = malloc(scratch_size);
        h->scratch_size = scratch_size;
        if (h->scratch[0] == NULL || h->scratch[1] == NULL) {
            status = PICOLL_ERR_NO_MEMORY;
        }
    }
    h->inflight = (int)picoll_cfg.net_inflight;
    free(all);
    free(leaders);
    free(fill);
    free(rail_ranks);
    if (status != PICOLL_OK) {
        picoll_hier_destroy(h);
        return status;
    }
    *out = h;
    return PICOLL_OK;
}
