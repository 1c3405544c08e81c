/* Process-wide state of the core, read by the PMPI layer on every call. */
#ifndef PICOLL_CORE_H
#define PICOLL_CORE_H

#include <mpi.h>
#include "util/config.h"
#include "util/export.h"
#include "util/reentry.h"
#include "mem/cuda_state.h"

typedef struct {
    int active;          /* intercepting: initialised, enabled, agreed by every world rank, and
                          not bypassed (picoll_set_bypass) */
    int initialized;     /* picoll_init succeeded: active unless bypassed */
    int stats;           /* copy of picoll_cfg.stats, read on the hot path */
    int staging;         /* copy of picoll_cuda.staging, read on the hot path: CUDA buffers of calls
                          handed to PMPI are staged through pinned host memory */
    int thread_level;    /* provided by MPI_Init_thread */
    int cuda_everywhere; /* every world rank sees a CUDA device (agreed at MPI_Init): the only jobs
                          * where the device-only collectives (reduce-scatter, bcast, reduce,
                          * allgatherv) look at a communicator at all */
    int world_rank;
    int world_size;
    int comm_keyval; /* attribute caching picoll_comm_t on communicators */
    int reg_keyval;  /* attribute holding a communicator's registration scope (picoll_register) */
} picoll_global_t;

extern picoll_global_t picoll_g;

/* Called by the MPI_Init / MPI_Init_thread wrappers after PMPI_Init succeeded, by every rank. */
void picoll_init(int thread_level);
/* Called by the MPI_Finalize wrapper before PMPI_Finalize. */
void picoll_finalize(void);

#endif
