/* A rail's set-up over UCX: its worker, the endpoints to its partners (net/partners.h) and their
 * liveness watch, made collectively while every member is there; endpoints to every member for
 * alltoall (picoll_net_connect_all); the tear-down. What a member exchanges and holds grows as
 * log2 n, but for alltoall's table of all. */
#include "build-config.h"
#include "net/partners.h"
#include "net/ucx_net.h"
#include "util/config.h"
#include "util/fatal.h"
#include "util/log.h"
#include "util/wait.h"

#include <stdlib.h>
#include <string.h>

#define NET_ADDR_TAG 0x5a12 /* the partners' exchange of addresses on the rail's communicator */

/* An endpoint's peer failed: its requests complete with an error, reported by the wait. */
static void net_ep_error(void *arg, ucp_ep_h ep, ucs_status_t status)
{
    (void)arg;
    (void)ep;
    picoll_debug("UCX endpoint error: %s", picoll_net_status_string(status));
}

/* A flushing close: what was sent reaches the peer before the connection goes; bounded, so that
 * a peer that never progresses again cannot hold us here. */
static void net_close_ep(picoll_net_t *net, const net_peer_t *p)
{
    ucp_request_param_t prm = {.op_attr_mask = UCP_OP_ATTR_FIELD_FLAGS, .flags = 0};
    ucs_status_ptr_t r = picoll_ucx.ep_close_nbx(p->ep, &prm);
    if (!UCS_PTR_IS_PTR(r)) {
        return;
    }
    picoll_wait_t w;
    picoll_wait_init(&w, 2.0, picoll_spin_max());
    while (picoll_ucx.request_check_status(r) == UCS_INPROGRESS) {
        int moved = picoll_ucx.worker_progress(net->worker) != 0;
        if (picoll_wait(&w, moved) == PICOLL_WAIT_EXPIRED) {
            picoll_debug("closing the endpoint to rail member %d timed out", p->member);
            break;
        }
    }
    picoll_ucx.request_free(r);
}

static void net_free(picoll_net_t *net)
{
    if (net->registered) {
        picoll_net_unregister(net);
    }
    pthread_mutex_lock(&net->lock); /* another rank's wait may be progressing it */
    pthread_mutex_unlock(&net->lock);
    pthread_mutex_destroy(&net->lock);
    for (int i = 0; net->peers != NULL && i < net->npeers; i++) {
        if (net->peers[i].ep != NULL) {
            net_close_ep(net, &net->peers[i]);
        }
    }
    free(net->peers);
    if (net->worker != NULL) {
        picoll_ucx.worker_destroy(net->worker);
    }
    picoll_alive_destroy(net->alive); /* after the flushing closes: a peer may still wait */
    free(net->comm_ranks);
    free(net);
}

/* Progress the worker, under its lock once other threads may drive it too. */
static int net_progress_own(picoll_net_t *net)
{
    if (net == NULL) {
        return 0;
    }
    if (net->registered) {
        pthread_mutex_lock(&net->lock);
    }
    int moved = picoll_ucx.worker_progress(net->worker) != 0;
    if (net->registered) {
        pthread_mutex_unlock(&net->lock);
    }
    return moved;
}

/* Flushes the endpoints eps[0..k) (to members who[0..k)) until connected: returns the status. */
static picoll_status_t net_flush(picoll_net_t *net, ucp_ep_h *eps, const int *who, int k)
{
    picoll_status_t status = PICOLL_OK;
    ucp_request_param_t p = {.op_attr_mask = 0};
    void **reqs = calloc((size_t)k + 1, sizeof(void *));
    int pending = 0;

    if (reqs == NULL) {
        return PICOLL_ERR_NO_MEMORY;
    }
    if (net->registered) {
        pthread_mutex_lock(&net->lock);
    }
    for (int i = 0; i < k; i++) {
        ucs_status_ptr_t r = picoll_ucx.ep_flush_nbx(eps[i], &p);
        if (UCS_PTR_IS_ERR(r)) {
            picoll_error("connecting to rank %d on host %s over UCX failed: %s",
                         net->comm_ranks[who[i]], picoll_net_host(net, who[i]),
                         picoll_net_status_string(UCS_PTR_STATUS(r)));
            status = PICOLL_ERR_UCX;
        } else if (r != NULL) {
            reqs[i] = r;
            pending++;
        }
    }
    if (net->registered) {
        pthread_mutex_unlock(&net->lock);
    }
    picoll_wait_t w;
    picoll_wait_init(&w, net->timeout, picoll_spin_max());
    while (pending > 0) {
        int moved = net_progress_own(net);
        for (int i = 0; i < k; i++) {
            ucs_status_t st =
                reqs[i] != NULL ? picoll_ucx.request_check_status(reqs[i]) : UCS_INPROGRESS;
            if (reqs[i] == NULL || st == UCS_INPROGRESS) {
                continue;
            }
            if (st != UCS_OK) {
                picoll_error("connecting to rank %d on host %s over UCX failed: %s",
                             net->comm_ranks[who[i]], picoll_net_host(net, who[i]),
                             picoll_net_status_string(st));
                status = PICOLL_ERR_UCX;
            }
            picoll_ucx.request_free(reqs[i]);
            reqs[i] = NULL;
            pending--;
        }
        if (pending > 0 && picoll_wait(&w, moved) == PICOLL_WAIT_EXPIRED) {
            for (int i = 0; i < k; i++) {
                if (reqs[i] != NULL) {
                    picoll_error("connecting to rank %d on host %s over UCX did not finish within "
                                 "%g s (PICOLL_TIMEOUT)",
                                 net->comm_ranks[who[i]], picoll_net_host(net, who[i]),
                                 net->timeout);
                    picoll_ucx.request_free(reqs[i]); /* released by UCX once it completes */
                }
            }
            status = PICOLL_ERR_UCX;
            break;
        }
    }
    free(reqs);
    return status;
}

/* UCX connects an endpoint lazily, at its first message, and completing the connection takes
 * progress on both sides. A rail's worker progresses only inside that rail's collectives, so a
 * connection left half made could wait, for ever, for a peer that has gone on to another
 * communicator's collective or into the MPI (seen between two hosts under MPICH: the ranks of
 * one host stuck in a communicator's first network step while those of the other had left it).
 * So the endpoints made here (eps[0..k), to members who[]) are connected while every member is
 * here, and each member keeps progressing until all are done. net is NULL on a member that
 * failed: it only takes part. Returns PICOLL_OK on every member or an error on every member. */
static picoll_status_t net_wireup(picoll_net_t *net, MPI_Comm rail_comm, ucp_ep_h *eps,
                                  const int *who, int k, picoll_status_t status)
{
    MPI_Request barrier;
    int done = 0;

    if (net != NULL && status == PICOLL_OK) {
        status = net_flush(net, eps, who, k);
    }
    /* every member, failed or not, until all have connected */
    PMPI_Ibarrier(rail_comm, &barrier);
    picoll_wait_t w;
    picoll_wait_init(&w, 0.0, 0); /* no deadline: the MPI's barrier; yield whenever idle */
    for (;;) {
        int moved = net_progress_own(net);
        PMPI_Test(&barrier, &done, MPI_STATUS_IGNORE);
        if (done) {
            break;
        }
        picoll_wait(&w, moved);
    }
    int ok = status == PICOLL_OK, all_ok = 0;
    PMPI_Allreduce(&ok, &all_ok, 1, MPI_INT, MPI_LAND, rail_comm);
    return all_ok ? PICOLL_OK : status != PICOLL_OK ? status : PICOLL_ERR_UCX;
}

/* The rail's record, for n members (me among them; comm_ranks[i]: member i's rank in the user's
 * communicator of comm_size). */
static picoll_status_t net_alloc(MPI_Comm rail_comm, const int *comm_ranks, int comm_size,
                                 double timeout, picoll_net_t **out)
{
    picoll_net_t *net = calloc(1, sizeof(*net));
    int n, me;

    if (net == NULL) {
        return PICOLL_ERR_NO_MEMORY;
    }
    PMPI_Comm_size(rail_comm, &n);
    PMPI_Comm_rank(rail_comm, &me);
    pthread_mutex_init(&net->lock, NULL);
    net->rank = me;
    net->size = n;
    net->rail_comm = rail_comm;
    net->comm_size = comm_size;
    net->timeout = timeout;
    net->comm_ranks = malloc((size_t)n * sizeof(int));
    net->peers = calloc((size_t)picoll_net_partners_max(n) + 1, sizeof(net_peer_t));
    int *members = malloc(((size_t)picoll_net_partners_max(n) + 1) * sizeof(int));
    if (net->comm_ranks == NULL || net->peers == NULL || members == NULL) {
        free(members);
        net_free(net);
        return PICOLL_ERR_NO_MEMORY;
    }
    memcpy(net->comm_ranks, comm_ranks, (size_t)n * sizeof(int));
    net->npeers = picoll_net_partners(n, me, members);
    for (int p = 0; p < net->npeers; p++) {
        net->peers[p].member = members[p];
    }
    free(members);
    if (n > NET_MAX_MEMBERS) {
        picoll_warn("%d nodes: the network step supports at most %d", n, NET_MAX_MEMBERS);
        net_free(net);
        return PICOLL_ERR_NOT_SUPPORTED;
    }
    *out = net;
    return PICOLL_OK;
}

/* Phase 1, where: my host name, and whether every member runs on this host (*local: then UCX's
 * shared memory only, when the user set no transports), from member 0's name and one AND. */
static void net_where(MPI_Comm rail_comm, char *my_host, int *local)
{
    char host[MPI_MAX_PROCESSOR_NAME], first[NET_HOST_MAX];
    int hlen = 0, same, all_same = 0;

    strcpy(my_host, "?");
    if (PMPI_Get_processor_name(host, &hlen) == MPI_SUCCESS) {
        host[NET_HOST_MAX - 1] = '\0';
        memcpy(my_host, host, strlen(host) + 1);
    }
    memcpy(first, my_host, NET_HOST_MAX);
    PMPI_Bcast(first, NET_HOST_MAX, MPI_CHAR, 0, rail_comm);
    same = strncmp(first, my_host, NET_HOST_MAX) == 0;
    PMPI_Allreduce(&same, &all_same, 1, MPI_INT, MPI_LAND, rail_comm);
    *local = all_same && getenv("UCX_TLS") == NULL && getenv("PICOLL_UCX_TLS") == NULL;
}

/* Phase 2, worker: this member's worker in the context of its rail (local: shared memory only). */
static picoll_status_t net_create_worker(picoll_net_t *net)
{
    ucp_context_h context;
    ucp_worker_params_t wp = {.field_mask = UCP_WORKER_PARAM_FIELD_THREAD_MODE,
                              .thread_mode = UCS_THREAD_MODE_SERIALIZED};
    ucs_status_t st = picoll_net_context(net->local, &context);

    if (st == UCS_OK) {
        st = picoll_ucx.worker_create(context, &wp, &net->worker);
        if (st != UCS_OK) {
            net->worker = NULL;
        }
    }
    if (st != UCS_OK) {
        picoll_error("creating a UCX worker failed: %s", picoll_net_status_string(st));
        return PICOLL_ERR_UCX;
    }
    return PICOLL_OK;
}

/* An endpoint to member p->member at address (p->ep). */
static picoll_status_t net_create_ep(picoll_net_t *net, net_peer_t *p, const ucp_address_t *address)
{
    /* Peer failure handling lets a transfer with a dead peer fail at once instead of at the
     * deadline, but UCX's shared-memory transports lack it (UCX would pick tcp instead): on this
     * machine's own rails the deadline alone catches a dead peer. */
    ucp_ep_params_t ep = {
        .field_mask = UCP_EP_PARAM_FIELD_REMOTE_ADDRESS | UCP_EP_PARAM_FIELD_ERR_HANDLING_MODE |
                      UCP_EP_PARAM_FIELD_ERR_HANDLER,
        .address = address,
        .err_mode = net->local ? UCP_ERR_HANDLING_MODE_NONE : UCP_ERR_HANDLING_MODE_PEER,
        .err_handler = {.cb = net_ep_error, .arg = net},
    };
    ucs_status_t st = picoll_ucx.ep_create(net->worker, &ep, &p->ep);
    if (st != UCS_OK) {
        picoll_error("connecting to rank %d on host %s over UCX failed: %s",
                     net->comm_ranks[p->member], p->host, picoll_net_status_string(st));
        p->ep = NULL;
        return PICOLL_ERR_UCX;
    }
    return PICOLL_OK;
}

/* A member's record in the exchanges: its address's length (0: it failed), host and address. */
typedef struct {
    size_t size; /* of a record: with room for the longest address */
    char *mine;
} net_card_t;

/* My card (net NULL on a member that failed: an empty address, which fails the others). The
 * longest address is agreed on with one MPI_MAX. Returns NULL when out of memory. */
static char *net_card(picoll_net_t *net, MPI_Comm rail_comm, const char *my_host, size_t *rec)
{
    ucp_address_t *addr = NULL;
    size_t addr_len = 0;
    int my_len = 0, max_len = 0;

    if (net != NULL && net->registered) {
        pthread_mutex_lock(&net->lock); /* the progress thread may drive the worker */
    }
    if (net != NULL && picoll_ucx.worker_get_address(net->worker, &addr, &addr_len) == UCS_OK) {
        my_len = (int)addr_len;
    }
    if (net != NULL && net->registered) {
        pthread_mutex_unlock(&net->lock);
    }
    PMPI_Allreduce(&my_len, &max_len, 1, MPI_INT, MPI_MAX, rail_comm);
    *rec = sizeof(int) + NET_HOST_MAX + (size_t)max_len;
    char *card = calloc(1, *rec);
    if (card != NULL) {
        memcpy(card, &my_len, sizeof(int));
        memcpy(card + sizeof(int), my_host, NET_HOST_MAX);
        if (my_len > 0) {
            memcpy(card + sizeof(int) + NET_HOST_MAX, addr, addr_len);
        }
    }
    if (addr != NULL) {
        picoll_ucx.worker_release_address(net->worker, addr); /* UCX's memory: no worker state */
    }
    return card;
}

/* Member p's host and endpoint from its card; PICOLL_ERR_UCX where that member failed. */
static picoll_status_t net_from_card(picoll_net_t *net, net_peer_t *p, const char *card)
{
    int len;
    memcpy(&len, card, sizeof(int));
    memcpy(p->host, card + sizeof(int), NET_HOST_MAX);
    p->host[NET_HOST_MAX - 1] = '\0';
    if (len == 0) {
        return PICOLL_ERR_UCX; /* that member failed; it says why */
    }
    return net_create_ep(net, p, (const ucp_address_t *)(card + sizeof(int) + NET_HOST_MAX));
}

/* Phase 3, partners: cards with each partner, their liveness watch (net/alive.h), an endpoint to
 * each, wired up. net is NULL on a member that failed: it takes part with an empty card. */
static picoll_status_t net_connect_partners(picoll_net_t *net, MPI_Comm rail_comm, int me,
                                            const char *my_host, double timeout,
                                            picoll_status_t status)
{
    int n, np = 0;
    PMPI_Comm_size(rail_comm, &n);
    int *members = malloc(((size_t)picoll_net_partners_max(n) + 1) * sizeof(int));
    size_t rec = 0;
    char *mine = net_card(net, rail_comm, my_host, &rec);
    char *cards = NULL;
    if (members != NULL) {
        np = picoll_net_partners(n, me, members);
        cards = calloc((size_t)np + 1, rec);
    }
    char(*hosts)[NET_HOST_MAX] = members != NULL ? calloc((size_t)np + 1, NET_HOST_MAX) : NULL;
    ucp_ep_h *eps = members != NULL ? calloc((size_t)np + 1, sizeof(ucp_ep_h)) : NULL;
    if (mine == NULL || cards == NULL || hosts == NULL || eps == NULL) {
        picoll_fatal("out of memory exchanging UCX addresses: aborting the job");
    }
    if (picoll_net_partner_exchange(rail_comm, members, np, mine, cards, rec, NET_ADDR_TAG) !=
        MPI_SUCCESS) {
        status = status == PICOLL_OK ? PICOLL_ERR_MPI : status;
    }
    for (int p = 0; p < np; p++) {
        memcpy(hosts[p], cards + (size_t)p * rec + sizeof(int), NET_HOST_MAX);
        hosts[p][NET_HOST_MAX - 1] = '\0';
    }
    /* collective: every member, failed or not */
    _Static_assert(NET_HOST_MAX == PICOLL_ALIVE_HOST_MAX, "host name records differ");
    picoll_alive_t *alive = picoll_alive_create(
        rail_comm, members, (const char(*)[NET_HOST_MAX])hosts, np, my_host, me, timeout);
    if (net != NULL) {
        net->alive = alive;
    } else {
        picoll_alive_destroy(alive);
    }
    for (int p = 0; net != NULL && status == PICOLL_OK && p < np; p++) {
        status = net_from_card(net, &net->peers[p], cards + (size_t)p * rec);
        eps[p] = net->peers[p].ep;
    }
    status = net_wireup(status == PICOLL_OK ? net : NULL, rail_comm, eps, members, np, status);
    free(eps);
    free(hosts);
    free(cards);
    free(mine);
    free(members);
    return status;
}

picoll_status_t picoll_net_create(MPI_Comm rail_comm, const int *comm_ranks, int comm_size,
                                  double timeout, picoll_net_t **out)
{
    picoll_net_t *net = NULL;
    char my_host[NET_HOST_MAX];
    int me, local;

    *out = NULL;
    PMPI_Comm_rank(rail_comm, &me);
    picoll_status_t status = net_alloc(rail_comm, comm_ranks, comm_size, timeout, &net);
    /* The phases exchange over the rail: a member that failed in an earlier one takes part in the
     * later exchanges all the same (net NULL), so that every member fails together. */
    net_where(rail_comm, my_host, &local);
    if (status == PICOLL_OK) {
        net->local = local;
        memcpy(net->my_host, my_host, NET_HOST_MAX);
        status = net_create_worker(net);
    }
    status = net_connect_partners(status == PICOLL_OK ? net : NULL, rail_comm, me, my_host, timeout,
                                  status);
    if (status != PICOLL_OK) {
        if (net != NULL) {
            net_free(net);
        }
        return status;
    }
    picoll_net_register(net, !local);
    *out = net;
    return PICOLL_OK;
}

void picoll_net_destroy(picoll_net_t *net)
{
    if (net != NULL) {
        net_free(net);
    }
}

/* The table of every member, at its index: the partners' records moved in, the others' made from
 * the cards of all (cards, rec bytes each); the new endpoints (eps, to members who) to wire up,
 * *k of them. */
static picoll_status_t net_table_all(picoll_net_t *net, const char *cards, size_t rec,
                                     ucp_ep_h *eps, int *who, int *k)
{
    picoll_status_t status = PICOLL_OK;
    net_peer_t *all = calloc((size_t)net->size, sizeof(net_peer_t));

    *k = 0;
    if (all == NULL) {
        return PICOLL_ERR_NO_MEMORY;
    }
    if (net->registered) {
        pthread_mutex_lock(&net->lock);
    }
    for (int i = 0; i < net->size; i++) {
        net_peer_t *old = picoll_net_peer(net, i);
        all[i].member = i;
        if (old != NULL) {
            all[i] = *old;
        } else if (i != net->rank && status == PICOLL_OK) {
            status = net_from_card(net, &all[i], cards + (size_t)i * rec);
            if (status == PICOLL_OK) {
                eps[*k] = all[i].ep;
                who[(*k)++] = i;
            }
        }
    }
    if (status != PICOLL_OK) {
        for (int j = 0; j < *k; j++) {
            net_close_ep(net, &all[who[j]]);
        }
        free(all);
        all = NULL;
        *k = 0;
    } else {
        free(net->peers);
        net->peers = all;
        net->npeers = net->size;
        net->all = 1;
    }
    if (net->registered) {
        pthread_mutex_unlock(&net->lock);
    }
    return status;
}

picoll_status_t picoll_net_connect_all(picoll_net_t *net)
{
    if (net->all_tried) {
        return net->all_status; /* the same on every member */
    }
    if (net->npeers == net->size - 1) {
        /* every member is a partner (rails of 2 to 5 members, or 7): the same on every member, as
         * the partners' offsets from a member are */
        net->all_tried = 1;
        net->all_status = PICOLL_OK;
        return PICOLL_OK;
    }
    size_t rec = 0;
    int n = net->size, k = 0;
    char *mine = net_card(net, net->rail_comm, net->my_host, &rec);
    char *cards = calloc((size_t)n, rec);
    ucp_ep_h *eps = calloc((size_t)n, sizeof(ucp_ep_h));
    int *who = calloc((size_t)n, sizeof(int));
    if (mine == NULL || cards == NULL || eps == NULL || who == NULL) {
        picoll_fatal("out of memory exchanging UCX addresses: aborting the job");
    }
    picoll_status_t status = PICOLL_OK;
    if (PMPI_Allgather(mine, (int)rec, MPI_BYTE, cards, (int)rec, MPI_BYTE, net->rail_comm) !=
        MPI_SUCCESS) {
        status = PICOLL_ERR_MPI;
    }
    if (status == PICOLL_OK) {
        status = net_table_all(net, cards, rec, eps, who, &k);
    }
    picoll_debug("rail of %d: endpoints to every member for alltoall (%d new)", n, k);
    status = net_wireup(net, net->rail_comm, eps, who, k, status);
    net->all_tried = 1;
    net->all_status = status;
    free(who);
    free(eps);
    free(cards);
    free(mine);
    return status;
}

void picoll_net_counts(const picoll_net_t *net, int *endpoints, int *watched)
{
    int e = 0;
    for (int i = 0; net != NULL && i < net->npeers; i++) {
        e += net->peers[i].ep != NULL;
    }
    *endpoints = e;
    *watched = net != NULL ? picoll_alive_connections(net->alive) : 0;
}
