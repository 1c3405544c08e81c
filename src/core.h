/* Process-wide state shared by the PMPI layer and the library. */
#ifndef PICOLL_CORE_H
#define PICOLL_CORE_H

#include <mpi.h>
#include "config.h"
#include "cuda_state.h"

#define PICOLL_EXPORT __attribute__((visibility("default")))

typedef struct {
    int active;        /* intercepting: initialised, enabled, agreed by every world rank, and
                          not bypassed (picoll_set_bypass) */
    int initialized;   /* picoll_init succeeded: active unless bypassed */
    int stats;         /* copy of cfg.stats, read on the hot path */
    int staging;       /* copy of cuda.staging, read on the hot path: CUDA buffers of calls
                          handed to PMPI are staged through pinned host memory */
    int thread_level;  /* provided by MPI_Init_thread */
    int world_rank;
    int world_size;
    int comm_keyval;   /* attribute caching picoll_comm_t on communicators */
    int oversubscribed; /* more ranks on this machine than CPUs we may run on: waits yield at once */
    picoll_config_t cfg;
    picoll_cuda_state_t cuda; /* decided at MPI_Init, once picoll is initialised */
} picoll_global_t;

extern picoll_global_t picoll_g;

/* Polls of a wait before it yields the CPU: spinning helps only when the peer has a CPU too. */
static inline unsigned picoll_spin_max(void)
{
    return picoll_g.oversubscribed ? 16 : 4096;
}

/* Nonzero while picoll itself is calling MPI on this thread: wrappers go straight to PMPI. */
extern _Thread_local int picoll_reentry __attribute__((tls_model("initial-exec")));

/* Called by the MPI_Init / MPI_Init_thread wrappers after PMPI_Init succeeded, by every rank. */
void picoll_init(int thread_level);
/* After an error that ends the job (a peer that never answers): flush, give the launcher a moment
 * to forward the message, MPI_Abort. */
void picoll_abort_job(void);
/* Called by the MPI_Finalize wrapper before PMPI_Finalize. */
void picoll_finalize(void);

#endif
