/* MPIX_Query_cuda_support: 1 whenever picoll's CUDA support is active (CUDA buffers are staged or
 * go to picoll's own algorithms), else the underlying MPI's own answer. */
#pragma GCC visibility push(default)
#include <mpi.h>
#pragma GCC visibility pop

#include "build-config.h"
#include "util/export.h"
#include "core/core.h"
#include "mem/cuda_state.h"

/* Open MPI declares it in mpi-ext.h, MPICH in mpi.h: declared here for both. */
int MPIX_Query_cuda_support(void);

PICOLL_EXPORT int MPIX_Query_cuda_support(void)
{
    const char *how;
    if (picoll_cuda.active) {
        return 1;
    }
    if (picoll_g.initialized) {
        return picoll_cuda.mpi_aware;
    }
    return picoll_mpi_cuda_aware(&how); /* before MPI_Init, or with picoll off */
}
