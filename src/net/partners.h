/* The members of a rail that a member talks to and watches: (me + 2^k) mod n and (me - 2^k) mod n
 * for every 2^k < n. The set holds every partner of the rail's algorithms (recursive doubling's
 * and halving's within the largest power of two, and their fold, me +- p2; the ring's neighbours;
 * Bruck's dissemination partners), is symmetric (j is my partner when I am j's), and has at most
 * 2 ceil(log2 n) members, so what a rank holds per peer (an endpoint, a liveness connection, an
 * address, a host name) grows as log n. Only alltoall's pairwise exchange talks to every member:
 * picoll_net_connect_all. */
#ifndef PICOLL_NET_PARTNERS_H
#define PICOLL_NET_PARTNERS_H

#include <mpi.h>
#include <stddef.h>

/* Most partners a member of a rail of n can have: 2 ceil(log2 n). */
int picoll_net_partners_max(int n);

/* Member me's partners in a rail of n, sorted and distinct, into out (picoll_net_partners_max(n)
 * entries); returns how many. */
int picoll_net_partners(int n, int me, int *out);

/* Collective over comm among partners: sends rec bytes of mine to each of peers[0..np) and
 * receives theirs[i] (rec bytes each) from peers[i], with PMPI point-to-point on tag. Every
 * member of comm must call it with its own partner set (symmetric). Returns MPI's error code. */
int picoll_net_partner_exchange(MPI_Comm comm, const int *peers, int np, const void *mine,
                                void *theirs, size_t rec, int tag);

/* Index of member in the sorted peers, or -1. */
int picoll_net_partner_index(const int *peers, int np, int member);

#endif
