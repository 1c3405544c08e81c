/* Inside the network layer over UCX: a rail's record, shared by ucx.c (context, progress,
 * transfers, waits) and ucx_setup.c (set-up, endpoints, tear-down). */
#ifndef PICOLL_UCX_NET_H
#define PICOLL_UCX_NET_H

#include "net/alive.h"
#include "net/net.h"
#include "net/ucx_load.h"

#include <pthread.h>

#define NET_HOST_MAX 64
#define NET_MAX_MEMBERS 65535 /* the sender's index has 16 bits of the tag */

/* A member this one talks to. */
typedef struct {
    int member;
    ucp_ep_h ep; /* NULL: not connected (myself, in the table of all) */
    char host[NET_HOST_MAX];
} net_peer_t;

struct picoll_net {
    ucp_worker_h worker;
    int rank, size;  /* in the rail */
    uint32_t op;     /* operations started on this rail */
    int *comm_ranks; /* rank in the user's communicator of each member */
    int comm_size;
    MPI_Comm rail_comm; /* not owned (net/hier.c frees it after the rail) */
    int local;          /* every member on this host: UCX's shared memory only */
    char my_host[NET_HOST_MAX];
    /* the partners (net/partners.h), sorted by member; once picoll_net_connect_all has run,
     * every member, at its own index (all = 1) */
    net_peer_t *peers;
    int npeers, all;
    int all_tried; /* picoll_net_connect_all ran, with all_status on every member */
    picoll_status_t all_status;
    double timeout;
    picoll_alive_t *alive; /* whether the partners are still there (net/alive.h) */
    pthread_mutex_t lock;  /* held by whoever drives the worker (it is serialized) */
    int registered;
    struct picoll_net *next; /* in the process's list of rails */
};

/* ucx.c: */
/* UCX's context for rails on this host only (local) or any; its status. */
ucs_status_t picoll_net_context(int local, ucp_context_h *out);
/* A UCX status in words; where UCX could not be loaded, why not. */
const char *picoll_net_status_string(ucs_status_t st);
/* In and out of the process's list of rails that waits progress (networked: the rail uses UCX's
 * network transports, so the progress thread runs). */
void picoll_net_register(picoll_net_t *net, int networked);
void picoll_net_unregister(picoll_net_t *net);

/* also ucx.c (ucx_setup.c calls ucx.c, never the other way): */
/* The record of member i, NULL when it is not connected. */
net_peer_t *picoll_net_peer(picoll_net_t *net, int i);
/* Member i's host name, "?" when this member never learnt it. */
const char *picoll_net_host(picoll_net_t *net, int i);

#endif
