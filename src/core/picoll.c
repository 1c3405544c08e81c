#include "build-config.h"
#include "core/comm.h"
#include "core/core.h"
#include "cuda/cuda_dev.h"
#include "util/log.h"
#include "coll/stats.h"
#include <picoll.h>

#include <stdio.h>

extern char **environ;

PICOLL_EXPORT const char *picoll_version(void);
const char *picoll_version(void)
{
    return PACKAGE_VERSION;
}

PICOLL_EXPORT int picoll_active(void);
int picoll_active(void)
{
    return picoll_g.active;
}

void picoll_init(int thread_level)
{
    picoll_status_t cfg_status;
    int vote[4], agreed[4];

    picoll_reentry++;
    picoll_g.thread_level = thread_level;
    PMPI_Comm_rank(MPI_COMM_WORLD, &picoll_g.world_rank);
    PMPI_Comm_size(MPI_COMM_WORLD, &picoll_g.world_size);
    picoll_log_rank = picoll_g.world_rank;

    cfg_status = picoll_config_load(&picoll_cfg, environ);
    picoll_log_level = picoll_cfg.log_level;
    if (!picoll_cfg.enable) {
        /* pure pass-through: not one MPI call of picoll's own */
        picoll_debug("PICOLL_ENABLE=0: every call goes to the underlying MPI");
        picoll_reentry--;
        return;
    }

    /* Every rank must make the same choices, so the configuration must be valid and the same
     * everywhere: vote[0] valid, vote[1] and vote[2] the hash and its complement (MIN of both
     * tells whether all hashes are equal); vote[3]: this rank sees a CUDA device (MIN: every rank
     * does) */
    unsigned hash = picoll_config_hash(&picoll_cfg) & 0x7fffffffu;
    vote[0] = cfg_status == PICOLL_OK;
    vote[1] = (int)hash;
    vote[2] = -(int)hash;
    vote[3] = vote[0] && picoll_cuda_device_present(&picoll_cfg);
    if (PMPI_Allreduce(vote, agreed, 4, MPI_INT, MPI_MIN, MPI_COMM_WORLD) != MPI_SUCCESS) {
        picoll_error("configuration agreement failed: picoll disabled");
        picoll_reentry--;
        return;
    }
    if (!agreed[0]) {
        if (picoll_g.world_rank == 0 || !vote[0]) {
            picoll_error(
                "invalid PICOLL_* configuration on %s rank: picoll is disabled for this job, "
                "every call goes to the underlying MPI",
                vote[0] ? "another" : "this");
        }
        picoll_reentry--;
        return;
    }
    if (agreed[1] != -agreed[2]) {
        if (picoll_g.world_rank == 0) {
            picoll_error(
                "PICOLL_* variables differ between ranks: picoll is disabled for this job; "
                "set them alike on every rank (mpirun -x NAME)");
        }
        picoll_reentry--;
        return;
    }
    if (picoll_comm_keyval_create() != PICOLL_OK) {
        picoll_reentry--;
        return;
    }
    picoll_g.stats = picoll_cfg.stats;
    picoll_g.cuda_everywhere = agreed[3];
    picoll_cuda_state_init(picoll_cfg.cuda_staging, &picoll_cuda);
    picoll_g.staging = picoll_cuda.staging;
    picoll_debug("%s", picoll_cuda.why);
    picoll_g.initialized = 1;
    picoll_g.active = 1;
    picoll_debug("active on %d ranks, thread level %d", picoll_g.world_size, thread_level);
    picoll_reentry--;
}

PICOLL_EXPORT void picoll_set_bypass(int bypass);
void picoll_set_bypass(int bypass)
{
    picoll_g.active = picoll_g.initialized && !bypass;
}

void picoll_finalize(void)
{
    if (!picoll_g.initialized) {
        return;
    }
    picoll_reentry++;
    picoll_comm_finalize();
    if (picoll_g.stats) {
        picoll_stats_report(MPI_COMM_WORLD);
    }
    picoll_g.active = 0;
    picoll_g.staging = 0;
    picoll_g.initialized = 0;
    picoll_reentry--;
}
