/* The network layer in a build without UCX (src/Makefile.inc builds this file instead of ucx.c):
 * no network step. Its set-up fails and every rank falls back together, so the transfers below are
 * never reached. */
#include "build-config.h"
#include "net/net.h"
#include "util/fatal.h"

#include <stdio.h>

static void net_absent(void)
{
    picoll_fatal("network step reached in a build without UCX (picoll bug): aborting the job");
}

void picoll_net_next(picoll_net_t *net)
{
    (void)net;
    net_absent();
}

void picoll_net_isend(picoll_net_t *net, int peer, unsigned step, const void *buf, size_t len,
                      int vote, picoll_net_req_t *req)
{
    (void)net, (void)peer, (void)step, (void)buf, (void)len, (void)vote, (void)req;
    net_absent();
}

void picoll_net_irecv(picoll_net_t *net, int peer, unsigned step, void *buf, size_t len,
                      picoll_net_req_t *req)
{
    (void)net, (void)peer, (void)step, (void)buf, (void)len, (void)req;
    net_absent();
}

int picoll_net_waitall(picoll_net_t *net, picoll_net_req_t *reqs, int n, const char *coll)
{
    (void)net, (void)reqs, (void)n, (void)coll;
    net_absent();
    return 0;
}

int picoll_net_sendrecv(picoll_net_t *net, unsigned step, int to, const void *sbuf, size_t slen,
                        int from, void *rbuf, size_t rlen, int vote, const char *coll)
{
    (void)net, (void)step, (void)to, (void)sbuf, (void)slen, (void)from, (void)rbuf, (void)rlen;
    (void)vote, (void)coll;
    net_absent();
    return 0;
}

int picoll_net_rank(const picoll_net_t *net)
{
    (void)net;
    return 0;
}

int picoll_net_size(const picoll_net_t *net)
{
    (void)net;
    return 1;
}

picoll_status_t picoll_net_create(MPI_Comm rail_comm, const int *comm_ranks, int comm_size,
                                  double timeout, picoll_net_t **out)
{
    (void)rail_comm;
    (void)comm_ranks;
    (void)comm_size;
    (void)timeout;
    *out = NULL;
    return PICOLL_ERR_NOT_SUPPORTED;
}

void picoll_net_destroy(picoll_net_t *net)
{
    (void)net;
}

picoll_status_t picoll_net_connect_all(picoll_net_t *net)
{
    (void)net;
    net_absent();
    return PICOLL_ERR_NOT_SUPPORTED;
}

void picoll_net_counts(const picoll_net_t *net, int *endpoints, int *watched)
{
    (void)net;
    *endpoints = 0;
    *watched = 0;
}

void picoll_net_print_ucx(FILE *out)
{
    fprintf(out, "none (built without UCX)\n");
}

void picoll_net_print_transports(FILE *out)
{
    fprintf(out, "none (built without UCX)\n");
}

void picoll_net_progress_all(void)
{
}
