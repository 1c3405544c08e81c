#include "coll/coll.h"
#include "coll/algs.h"

#define FALLBACK_ALG {.name = "fallback", .desc = "handed to the underlying MPI (PMPI_*)"}

static const picoll_alg_desc_t allreduce_algs[] = {
    [PICOLL_ALG_FALLBACK] = FALLBACK_ALG,
    [PICOLL_ALLREDUCE_ONESHOT] = {.name = "oneshot",
                                  .desc = "shared memory: every rank reduces all inputs in rank "
                                          "order (up to PICOLL_ALLREDUCE_ONESHOT_MAX)"},
    [PICOLL_ALLREDUCE_TWOSHOT] = {.name = "twoshot",
                                  .desc = "shared memory: reduce-scatter then all-gather, chunked "
                                          "by the workspace (up to PICOLL_ALLREDUCE_TWOSHOT_MAX)"},
    [PICOLL_ALLREDUCE_HIER_RD] = {.name = "hier_rd",
                                  .desc = "between nodes: node reduce-scatter, recursive doubling "
                                          "on each rail over UCX, node all-gather (rail blocks up "
                                          "to PICOLL_NET_RD_MAX)"},
    [PICOLL_ALLREDUCE_HIER_ONESHOT] = {.name = "hier_oneshot",
                                       .desc = "between nodes, small, nodes of equal size: every "
                                               "rank reduces its node's inputs, then recursive "
                                               "doubling of the whole vector on its rail over UCX "
                                               "(up to PICOLL_ALLREDUCE_ONESHOT_MAX)"},
    [PICOLL_ALLREDUCE_HIER_RING] = {.name = "hier_ring",
                                    .desc = "between nodes: node reduce-scatter, ring allreduce "
                                            "on each rail over UCX, node all-gather"},
};

static const picoll_alg_desc_t allgather_algs[] = {
    [PICOLL_ALG_FALLBACK] = FALLBACK_ALG,
    [PICOLL_ALLGATHER_SHM] = {.name = "shm",
                              .desc = "shared memory: blocks copied in, one barrier, copied out"},
    [PICOLL_ALLGATHER_HIER] = {.name = "hier",
                               .desc = "between nodes: blocks into the node's workspace, node "
                                       "parts round a ring on each rail over UCX, copied out"},
};

static const picoll_alg_desc_t alltoall_algs[] = {
    [PICOLL_ALG_FALLBACK] = FALLBACK_ALG,
    [PICOLL_ALLTOALL_SHM] = {.name = "shm",
                             .desc = "shared memory: pieces for every peer copied in, one barrier, "
                                     "own pieces copied out"},
    [PICOLL_ALLTOALL_HIER] = {.name = "hier",
                              .desc = "between nodes: pieces into the node's workspace, pairwise "
                                      "exchange of node parts on each rail over UCX "
                                      "(PICOLL_NET_INFLIGHT peers at a time), copied out"},
};

#define TABLE(n, a) {.name = n, .algs = a, .count = (int)(sizeof(a) / sizeof(a[0]))}

static const picoll_coll_desc_t coll_descs[PICOLL_COLL_COUNT] = {
    [PICOLL_COLL_ALLREDUCE] = TABLE("allreduce", allreduce_algs),
    [PICOLL_COLL_ALLGATHER] = TABLE("allgather", allgather_algs),
    [PICOLL_COLL_ALLTOALL] = TABLE("alltoall", alltoall_algs),
};

const picoll_coll_desc_t *picoll_coll_desc(picoll_coll_t coll)
{
    return coll < PICOLL_COLL_COUNT ? &coll_descs[coll] : 0;
}
