/* Collectives on CUDA buffers handed to an MPI that is not CUDA-aware: each buffer this rank
 * passes that is device or managed memory is copied to pinned host memory (the whole span its
 * count and datatype cover), the same PMPI_* function runs on the host copies, and the outputs
 * are copied back before the call returns. Purely local: the PMPI function called is the one
 * the application called, so ranks with different memory kinds stay matched. Called only while
 * picoll_g.staging is set and not from inside picoll (picoll_reentry). Invalid arguments, and
 * intercommunicators, go to PMPI untouched. */
#ifndef PICOLL_STAGING_H
#define PICOLL_STAGING_H

#include <mpi.h>

int picoll_staged_allreduce(const void *sendbuf, void *recvbuf, int count, MPI_Datatype type,
                            MPI_Op op, MPI_Comm comm);
int picoll_staged_allgather(const void *sendbuf, int sendcount, MPI_Datatype sendtype,
                            void *recvbuf, int recvcount, MPI_Datatype recvtype, MPI_Comm comm);
int picoll_staged_alltoall(const void *sendbuf, int sendcount, MPI_Datatype sendtype,
                           void *recvbuf, int recvcount, MPI_Datatype recvtype, MPI_Comm comm);

#endif
