/* The network layer: one UCX worker per rail communicator (the ranks with the same local index on
 * every node), endpoints to every other member, tagged transfers with a deadline.
 *
 * Every message carries an 8-byte header in front of its payload (sent as one UCX iov), holding
 * the sender's vote: the AND of what it has seen so far. The network steps of the hierarchical
 * algorithms spread it, so that every rank knows whether all agreed before it writes its receive
 * buffer, with no extra round trip. */
#ifndef PICOLL_NET_H
#define PICOLL_NET_H

#include <mpi.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include "util/status.h"

typedef struct picoll_net picoll_net_t;

/* A member talks to its partners only (net/partners.h: (me +- 2^k) mod n, at most 2 log2 n of
 * them), and holds an endpoint and a liveness watch for each; picoll_net_connect_all adds
 * endpoints to every member, for alltoall. */

/* One transfer in progress. */
typedef struct {
    void *ucx; /* UCX request, NULL once complete */
    int peer;  /* member of the rail */
    int is_recv;
    uint32_t hdr[2]; /* [0]: vote, [1]: the operation's number, checked on receipt */
    struct {
        void *buffer;
        size_t length;
    } iov[2]; /* header and payload; UCX may read it until completion */
} picoll_net_req_t;

/* Collective over rail_comm: create the worker, exchange addresses with the partners over PMPI,
 * connect to them, and set up their liveness check (net/alive.h; timeout: how long a host may be
 * silent before it counts as lost). rail_comm must outlive the rail. comm_ranks[i] is the rank,
 * in the user's communicator of size comm_size, of rail member i (for error messages). Every
 * rank takes part in every exchange even after a local failure; then it returns an error and
 * *out is NULL. */
picoll_status_t picoll_net_create(MPI_Comm rail_comm, const int *comm_ranks, int comm_size,
                                  double timeout, picoll_net_t **out);
void picoll_net_destroy(picoll_net_t *net);

/* Collective over the rail, at the same point of the same collective on every member (alltoall's
 * network step, which talks to every member, calls it first): endpoints to every member. The
 * first call exchanges the addresses of all and wires the new endpoints up; later ones return at
 * once. Returns PICOLL_OK on every member, or an error on every member (then always). */
picoll_status_t picoll_net_connect_all(picoll_net_t *net);

/* What this member holds: UCX endpoints, and connections that watch a partner's liveness. */
void picoll_net_counts(const picoll_net_t *net, int *endpoints, int *watched);

/* Start the next operation (a chunk of a collective): tags of earlier ones never match again. */
void picoll_net_next(picoll_net_t *net);

/* Nonblocking send of [header, buf) to rail member `peer` with this operation's `step`, and the
 * matching receive. The header carries `vote`. Buffers must stay valid until the wait. */
void picoll_net_isend(picoll_net_t *net, int peer, unsigned step, const void *buf, size_t len,
                      int vote, picoll_net_req_t *req);
void picoll_net_irecv(picoll_net_t *net, int peer, unsigned step, void *buf, size_t len,
                      picoll_net_req_t *req);

/* Wait for n transfers. Returns the AND of the votes received (1 if none was a receive). A peer
 * that is late is waited for, with a line past the timeout (2x, 4x, ...) that says so; a peer that
 * is gone (its process exited, its host or the link to it silent for the timeout: net/alive.h), a
 * transfer that fails, or a late peer under PICOLL_TIMEOUT_ACTION=abort ends the job through
 * MPI_Abort after an error naming the collective, the peer's rank and host, and what happened. */
int picoll_net_waitall(picoll_net_t *net, picoll_net_req_t *reqs, int n, const char *coll);

/* Send to `to` and receive from `from` at once; returns the vote received. */
int picoll_net_sendrecv(picoll_net_t *net, unsigned step, int to, const void *sbuf, size_t slen,
                        int from, void *rbuf, size_t rlen, int vote, const char *coll);

/* Progress every rail of the process that no other thread is driving. Any wait inside a
 * collective calls it now and then: over tcp a send counts as complete while its last bytes may
 * still wait for their worker to run, and the peer waiting for them may be what this rank waits
 * for, through a node step or another communicator. */
void picoll_net_progress_all(void);

int picoll_net_rank(const picoll_net_t *net);
int picoll_net_size(const picoll_net_t *net);

/* On one line, the UCX in use (its version and file: the process's own, its MPI's, or the one
 * picoll loaded) or why there is none. */
void picoll_net_print_ucx(FILE *out);

/* On one line, the transports UCX would use on this machine (UCX_TLS and PICOLL_UCX_TLS apply). */
void picoll_net_print_transports(FILE *out);

#endif
