#include "select.h"
#include "coll/algs.h"
#include "coll/coll.h"

/* PICOLL_HOST=auto: the ranges where the shared-memory executor beat Open MPI 4.1 (vader) on a
 * 2-core machine at np=2 (osu-bench, A/B in one job); outside them the call falls back. */
#define AUTO_ALLREDUCE_MIN 0
#define AUTO_ALLGATHER_MIN 0
#define AUTO_ALLTOALL_MIN 0

int picoll_select_allreduce(const picoll_config_t *cfg, size_t slot_size, int nranks, size_t bytes)
{
    (void)nranks;
    if (cfg->host == PICOLL_HOST_OFF || bytes == 0 || bytes > cfg->allreduce_twoshot_max) {
        return PICOLL_ALG_FALLBACK;
    }
    if (cfg->host == PICOLL_HOST_AUTO && bytes < AUTO_ALLREDUCE_MIN) {
        return PICOLL_ALG_FALLBACK;
    }
    if (bytes <= cfg->allreduce_oneshot_max && bytes <= slot_size) {
        return PICOLL_ALLREDUCE_ONESHOT;
    }
    return PICOLL_ALLREDUCE_TWOSHOT;
}

int picoll_select_allgather(const picoll_config_t *cfg, int nranks, size_t block_bytes)
{
    (void)nranks;
    if (cfg->host == PICOLL_HOST_OFF || block_bytes == 0 ||
        (cfg->host == PICOLL_HOST_AUTO && block_bytes < AUTO_ALLGATHER_MIN)) {
        return PICOLL_ALG_FALLBACK;
    }
    return PICOLL_ALLGATHER_SHM;
}

int picoll_select_alltoall(const picoll_config_t *cfg, int nranks, size_t block_bytes)
{
    (void)nranks;
    if (cfg->host == PICOLL_HOST_OFF || block_bytes == 0 ||
        (cfg->host == PICOLL_HOST_AUTO && block_bytes < AUTO_ALLTOALL_MIN)) {
        return PICOLL_ALG_FALLBACK;
    }
    return PICOLL_ALLTOALL_SHM;
}
