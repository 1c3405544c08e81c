/* The network step's methods on a rail, and the cost model that chooses among them.
 *
 * A rail of n members (one per node) runs the allreduce of a block of m bytes, or the allgather of
 * the nodes' parts of b bytes, by one of the methods below. The model prices each with
 * alpha (seconds a message costs besides its bytes, PICOLL_NET_LATENCY), beta (seconds a byte
 * costs on the link, 1 / PICOLL_NET_BANDWIDTH) and gamma (seconds a byte costs to reduce or copy
 * on the host, a constant); p2 is the largest power of two <= n, fold = (n != p2):
 *   rd    log2(p2) (alpha + m beta + m gamma) + fold (2 alpha + 2 m beta + m gamma)
 *   rab   2 log2(p2) alpha + 2 (p2-1)/p2 m beta + (p2-1)/p2 m gamma + the same fold
 *   ring  2 (n-1) alpha + 2 (n-1)/n m beta + (n-1)/n m gamma
 *   allgather ring   (n-1) (alpha + b beta)
 *   allgather bruck  ceil(log2 n) alpha + (n-1) b beta, plus alpha for each step whose ranges
 *                    wrap round the end of the nodes on some member (a second message)
 * and the cheapest wins, ties going to the simpler (rd, then ring, for allgather the ring): a
 * method replaces a simpler one only where predicted faster by more than a twentieth. The inputs
 * (n, the bytes, the configuration) are the same on every member, so every member chooses the
 * same. */
#ifndef PICOLL_NETMODEL_H
#define PICOLL_NETMODEL_H

#include <stddef.h>
#include "util/config.h"

typedef enum {
    PICOLL_RAIL_RD,   /* allreduce: recursive doubling (members beyond p2 folded in) */
    PICOLL_RAIL_RAB,  /* allreduce: Rabenseifner's (recursive halving, then doubling; folded) */
    PICOLL_RAIL_RING, /* allreduce: ring reduce-scatter and all-gather; allgather: the ring */
    PICOLL_RAIL_BRUCK /* allgather: Bruck's dissemination, ceil(log2 n) steps */
} picoll_rail_method_t;

typedef struct {
    double alpha, beta, gamma;
} picoll_netmodel_t;

/* The parameters of cfg. */
void picoll_netmodel_get(const picoll_config_t *cfg, picoll_netmodel_t *m);

/* Predicted seconds of a method on n members: allreduce of a block of `bytes`, allgather of
 * parts of `part` bytes. */
double picoll_netmodel_allreduce_time(const picoll_netmodel_t *m, picoll_rail_method_t how, int n,
                                      double bytes);
double picoll_netmodel_allgather_time(const picoll_netmodel_t *m, picoll_rail_method_t how, int n,
                                      double part);

/* The allreduce's method for a block of `bytes` on n members: PICOLL_NET_ALLREDUCE where set;
 * else recursive doubling on two members; else PICOLL_NET_RD_MAX's rule where it is not 0
 * (recursive doubling up to it, the ring above); else the model's cheapest. */
picoll_rail_method_t picoll_netmodel_allreduce(const picoll_config_t *cfg, int n, size_t bytes);

/* The allgather's method for parts of `part` bytes on n members: PICOLL_NET_ALLGATHER where set,
 * else the model's cheapest. */
picoll_rail_method_t picoll_netmodel_allgather(const picoll_config_t *cfg, int n, size_t part);

/* "rd", "rab", "ring", "bruck" */
const char *picoll_netmodel_name(picoll_rail_method_t how);

#endif
