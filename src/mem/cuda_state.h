/* Whether picoll's CUDA support is active in this process, and whether device buffers of the
 * calls it hands to the underlying MPI are staged through pinned host memory. */
#ifndef PICOLL_CUDA_STATE_H
#define PICOLL_CUDA_STATE_H

#include <stddef.h>

typedef struct {
    int driver; /* the CUDA driver loaded and sees devices */
    int devices;
    int mpi_aware; /* the underlying MPI's own answer to MPIX_Query_cuda_support, 0 if none */
    int active;    /* driver && PICOLL_CUDA_STAGING != off: MPIX_Query_cuda_support answers 1 */
    int staging;   /* active && (PICOLL_CUDA_STAGING == on || !mpi_aware) */
    char why[256]; /* one line: what was found, or why CUDA support is inactive */
} picoll_cuda_state_t;

/* This process's state, decided at MPI_Init once picoll is initialised (picoll_cuda_state_init). */
extern picoll_cuda_state_t picoll_cuda;

/* The underlying MPI's answer to MPIX_Query_cuda_support (Open MPI, MPICH), or to MPICH's
 * MPIX_GPU_query_support for CUDA; 0 when it has neither. how names what was asked. */
int picoll_mpi_cuda_aware(const char **how);

/* Whether device buffers of calls handed to the MPI are staged, for a PICOLL_CUDA_STAGING mode
 * and the MPI's answer (picoll_mpi_cuda_aware), once a driver is loaded. */
int picoll_cuda_staging_rule(int mode, int mpi_aware);

/* Decides the state for a PICOLL_CUDA_STAGING mode (picoll_staging_mode_t); loads the driver
 * unless the mode is off. */
void picoll_cuda_state_init(int mode, picoll_cuda_state_t *st);

#endif
