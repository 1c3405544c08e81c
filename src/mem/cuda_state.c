#include "build-config.h"
#include "mem/cuda_state.h"
#include "util/config.h"
#include "mem/cudrv.h"

#include <dlfcn.h>
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>

picoll_cuda_state_t picoll_cuda;

/* MPICH's value for CUDA in MPIX_GPU_query_support (mpi.h: MPIX_GPU_SUPPORT_CUDA) */
#define MPICH_GPU_SUPPORT_CUDA 0

int picoll_mpi_cuda_aware(const char **how)
{
    /* RTLD_NEXT: the MPI library's own symbols, not the MPIX_Query_cuda_support picoll exports */
    int (*query)(void) = (int (*)(void))dlsym(RTLD_NEXT, "MPIX_Query_cuda_support");
    int (*gpu_query)(int, int *);
    int supported = 0, initialized = 0, finalized = 0;

    /* MPICH aborts when asked before MPI_Init */
    PMPI_Initialized(&initialized);
    PMPI_Finalized(&finalized);
    if (!initialized || finalized) {
        *how = "not asked outside MPI_Init and MPI_Finalize";
        return 0;
    }
    if (query != NULL) {
        *how = "MPIX_Query_cuda_support";
        return query() == 1;
    }
    gpu_query = (int (*)(int, int *))dlsym(RTLD_NEXT, "MPIX_GPU_query_support");
    if (gpu_query != NULL) {
        *how = "MPIX_GPU_query_support";
        return gpu_query(MPICH_GPU_SUPPORT_CUDA, &supported) == 0 && supported == 1;
    }
    *how = "no MPIX_Query_cuda_support in the MPI library";
    return 0;
}

int picoll_cuda_staging_rule(int mode, int mpi_aware)
{
    return mode == PICOLL_STAGING_ON || (mode == PICOLL_STAGING_AUTO && !mpi_aware);
}

void picoll_cuda_state_init(int mode, picoll_cuda_state_t *st)
{
    const char *how = "";

    st->driver = st->devices = st->active = st->staging = 0;
    st->mpi_aware = picoll_mpi_cuda_aware(&how);
    if (mode == PICOLL_STAGING_OFF) {
        snprintf(st->why, sizeof(st->why), "CUDA support off (PICOLL_CUDA_STAGING=off)");
        return;
    }
    if (picoll_cudrv_load() != PICOLL_OK) {
        snprintf(st->why, sizeof(st->why), "CUDA support inactive: %s", picoll_cudrv_why());
        return;
    }
    st->driver = 1;
    st->devices = picoll_cudrv_device_count();
    st->active = 1;
    st->staging = picoll_cuda_staging_rule(mode, st->mpi_aware);
    snprintf(st->why, sizeof(st->why),
             "CUDA support active, %d device(s); the MPI is %sCUDA-aware (%s): %s", st->devices,
             st->mpi_aware ? "" : "not ", how,
             st->staging ? "device buffers of calls it runs are staged through pinned host memory"
                         : "device buffers go to it directly");
}
