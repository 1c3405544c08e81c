/* Whether the members of a rail are still there, for a rank that waits for them in the network
 * step. A late peer and a lost one look the same to a wait that only counts seconds; this tells
 * them apart without any help from the peer's own thread (which may be busy for minutes outside
 * MPI: a checkpoint, an evaluation):
 *
 * - a member on this machine (same boot and pid namespace, and its process seen at set-up) is
 *   looked up in /proc by pid and start time (util/proc.h): gone as soon as it has exited;
 * - a member on another host is watched through a TCP connection made at set-up that carries no
 *   data: the peer's kernel answers TCP keepalive probes (one a second after a second of silence)
 *   whatever its process does, closes the connection when the process exits (gone at once), and
 *   when the host or the link stops answering the connection fails after about `silence` seconds
 *   (lost; TCP_USER_TIMEOUT and the probe count bound it).
 *
 * A member neither watch covers (the connection could not be made, /proc shows another pid
 * namespace) is never called gone or lost: it is waited for.
 *
 * A member watches its partners only (net/partners.h: at most 2 ceil(log2 n) of them), so a rank
 * holds O(log n) connections. Every algorithm of the rail but alltoall's waits only for partners;
 * in alltoall, which waits for every member, a peer that is not a partner is unknown here, and
 * its own partners, which wait for it too, are the ones that name it and end the job. */
#ifndef PICOLL_NET_ALIVE_H
#define PICOLL_NET_ALIVE_H

#include <mpi.h>

#define PICOLL_ALIVE_HOST_MAX 64
#define PICOLL_ALIVE_TAG 0x5a11 /* the cards' exchange on the rail's communicator */

typedef struct picoll_alive picoll_alive_t;

typedef enum {
    PICOLL_PEER_ALIVE,  /* its process is there (and its host answers) */
    PICOLL_PEER_GONE,   /* its process exited */
    PICOLL_PEER_LOST,   /* its host, or the link to it, has not answered for `silence` seconds */
    PICOLL_PEER_UNKNOWN /* no watch on it */
} picoll_peer_state_t;

/* Collective over rail_comm (me: my member index; peers[0..np): my partners, sorted, and
 * hosts[p] partner p's host name, as the rail's set-up exchanged them; my_host: mine). Every
 * member takes part even when it cannot watch anything; returns NULL only when out of memory
 * (then every member is unknown). */
picoll_alive_t *picoll_alive_create(MPI_Comm rail_comm, const int *peers,
                                    const char (*hosts)[PICOLL_ALIVE_HOST_MAX], int np,
                                    const char *my_host, int me, double silence);
void picoll_alive_destroy(picoll_alive_t *a);

/* Connections held (for the scale measurements). */
int picoll_alive_connections(const picoll_alive_t *a);

/* Looks at member i now (a poll of its connection or a read of /proc: microseconds); unknown
 * for a member that is not a partner. A verdict of gone or lost is kept. */
picoll_peer_state_t picoll_alive_state(picoll_alive_t *a, int i);

/* How member i is watched, for messages: "process", "connection" or "none". */
const char *picoll_alive_how(const picoll_alive_t *a, int i);

#endif
