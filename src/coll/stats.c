#include "build-config.h"
#include "coll/stats.h"
#include "cuda/cuda_dev.h"
#include "util/export.h"

#include <stdatomic.h>
#include <stdio.h>

_Thread_local int picoll_last_alg __attribute__((tls_model("initial-exec")));

PICOLL_EXPORT const char *picoll_last_algorithm(void);
const char *picoll_last_algorithm(void)
{
    if (picoll_last_alg == 0) {
        return NULL;
    }
    int v = picoll_last_alg - 1;
    return picoll_coll_desc((picoll_coll_t)(v / PICOLL_ALG_MAX))->algs[v % PICOLL_ALG_MAX].name;
}

static _Atomic unsigned long long stat_calls[PICOLL_COLL_COUNT][PICOLL_ALG_MAX];
static _Atomic unsigned long long stat_bytes[PICOLL_COLL_COUNT][PICOLL_ALG_MAX];

void picoll_stats_add(picoll_coll_t coll, int alg, size_t bytes)
{
    atomic_fetch_add_explicit(&stat_calls[coll][alg], 1, memory_order_relaxed);
    atomic_fetch_add_explicit(&stat_bytes[coll][alg], bytes, memory_order_relaxed);
}

void picoll_stats_report(MPI_Comm comm)
{
    enum { N = PICOLL_COLL_COUNT * PICOLL_ALG_MAX };
    /* and, after them, the zero-copy path's counts (cuda/cuda_zc.c): calls that took it, calls
     * whose ranks described their buffers but some rank could not map a peer's (all copied), and
     * buffers mode reused met for the first time (not described: their calls copied) */
    unsigned long long local[2 * N + 3], total[2 * N + 3];
    picoll_cuda_zc_stats_t zc;
    int rank;

    for (int c = 0; c < PICOLL_COLL_COUNT; c++) {
        for (int a = 0; a < PICOLL_ALG_MAX; a++) {
            local[c * PICOLL_ALG_MAX + a] = atomic_load(&stat_calls[c][a]);
            local[N + c * PICOLL_ALG_MAX + a] = atomic_load(&stat_bytes[c][a]);
        }
    }
    picoll_cuda_zc_stats(&zc);
    local[2 * N] = (unsigned long long)zc.calls;
    local[2 * N + 1] = (unsigned long long)zc.declined;
    local[2 * N + 2] = (unsigned long long)zc.first_seen;
    PMPI_Comm_rank(comm, &rank);
    if (PMPI_Reduce(local, total, 2 * N + 3, MPI_UNSIGNED_LONG_LONG, MPI_SUM, 0, comm) !=
            MPI_SUCCESS ||
        rank != 0) {
        return;
    }
    if (total[2 * N] + total[2 * N + 1] != 0) {
        printf("picoll stats: zero-copy  %llu calls, %llu declined (a rank could not map a peer's "
               "buffers: every rank copied)\n",
               total[2 * N], total[2 * N + 1]);
    }
    if (total[2 * N + 2] != 0) {
        printf("picoll stats: zero-copy  %llu buffers met for the first time, not mapped "
               "(PICOLL_CUDA_ZERO_COPY=reused: their calls copied)\n",
               total[2 * N + 2]);
    }
    for (int c = 0; c < PICOLL_COLL_COUNT; c++) {
        const picoll_coll_desc_t *desc = picoll_coll_desc((picoll_coll_t)c);
        for (int a = 0; a < desc->count; a++) {
            unsigned long long calls = total[c * PICOLL_ALG_MAX + a];
            if (calls == 0) {
                continue;
            }
            printf("picoll stats: %-10s %-12s calls %llu bytes %llu\n", desc->name,
                   desc->algs[a].name, calls, total[N + c * PICOLL_ALG_MAX + a]);
        }
    }
    fflush(stdout);
}
