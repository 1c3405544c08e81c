/* Entry points from the PMPI layer into picoll's algorithms. Each picks an algorithm for the
 * call (the same on every rank of ctx) and, unless it picked PICOLL_ALG_FALLBACK, runs it and
 * stores the MPI return code in *mpi_rc. */
#ifndef PICOLL_DISPATCH_H
#define PICOLL_DISPATCH_H

#include <stddef.h>
#include "comm.h"
#include "dtype.h"

typedef struct {
    const void *sendbuf;  /* MPI_IN_PLACE allowed */
    void *recvbuf;
    size_t count;
    picoll_dtype_t dtype;
    picoll_op_t op;
} picoll_allreduce_args_t;

typedef struct {
    const void *sendbuf;  /* MPI_IN_PLACE allowed */
    void *recvbuf;
    size_t block_bytes;   /* bytes each rank contributes (allgather) or sends to each rank (alltoall) */
    int eligible;         /* both types are contiguous predefined ones picoll can copy as bytes */
} picoll_blocks_args_t;

int picoll_allreduce(picoll_comm_t *ctx, const picoll_allreduce_args_t *args, int *mpi_rc);
int picoll_allgather(picoll_comm_t *ctx, const picoll_blocks_args_t *args, int *mpi_rc);
int picoll_alltoall(picoll_comm_t *ctx, const picoll_blocks_args_t *args, int *mpi_rc);

#endif
