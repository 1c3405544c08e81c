/* The collectives picoll intercepts and, for each, its table of algorithms. */
#ifndef PICOLL_COLL_H
#define PICOLL_COLL_H

typedef enum {
    PICOLL_COLL_ALLREDUCE,
    PICOLL_COLL_ALLGATHER,
    PICOLL_COLL_ALLTOALL,
    PICOLL_COLL_REDUCE_SCATTER_BLOCK, /* these six: CUDA device buffers only */
    PICOLL_COLL_REDUCE_SCATTER,
    PICOLL_COLL_BCAST,
    PICOLL_COLL_REDUCE,
    PICOLL_COLL_ALLGATHERV,
    PICOLL_COLL_ALLTOALLV,
    PICOLL_COLL_COUNT
} picoll_coll_t;

/* Index 0 of every table: the call goes to the underlying MPI. */
#define PICOLL_ALG_FALLBACK 0
#define PICOLL_ALG_MAX 16

typedef struct {
    const char *name;
    const char *desc;
} picoll_alg_desc_t;

typedef struct {
    const char *name;              /* "allreduce" */
    const picoll_alg_desc_t *algs; /* algs[PICOLL_ALG_FALLBACK] is "fallback" */
    int count;
} picoll_coll_desc_t;

const picoll_coll_desc_t *picoll_coll_desc(picoll_coll_t coll);

#endif
