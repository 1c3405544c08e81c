#include "coll/coll.h"

#define FALLBACK_ALG {.name = "fallback", .desc = "handed to the underlying MPI (PMPI_*)"}

static const picoll_alg_desc_t allreduce_algs[] = {
    [PICOLL_ALG_FALLBACK] = FALLBACK_ALG,
};

static const picoll_alg_desc_t allgather_algs[] = {
    [PICOLL_ALG_FALLBACK] = FALLBACK_ALG,
};

static const picoll_alg_desc_t alltoall_algs[] = {
    [PICOLL_ALG_FALLBACK] = FALLBACK_ALG,
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
