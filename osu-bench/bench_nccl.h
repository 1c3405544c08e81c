/* osu-bench: NCCL as the --nccl column of --ab -d cuda uses it, loaded with dlopen("libnccl.so.2")
 * at run time (or the library PICOLL_BENCH_NCCL names), so that the programs build without NCCL and
 * run where it is missing: the column is then skipped with one line. No NCCL header: the few
 * types, constants and prototypes are declared in bench_nccl.c from NCCL's documented API. */
#ifndef OSU_BENCH_NCCL_H
#define OSU_BENCH_NCCL_H

#include "bench.h"

#include <mpi.h>
#include <stddef.h>

/* Collective over comm, on every rank after the CUDA set-up of -d cuda: loads NCCL, maps type and
 * op (MPI_OP_NULL where the collective reduces nothing) to NCCL's, creates a stream of the current
 * context and an NCCL communicator of comm's ranks (the unique id broadcast with PMPI). Returns 0
 * on every rank, or -1 on every rank with why (on rank 0: its own reason, or that another rank
 * failed) to print as the column's skip line. */
int bench_nccl_open(MPI_Comm comm, MPI_Datatype type, MPI_Op op, char *why, size_t len);

/* "NCCL 2.21.5 (/usr/lib/.../libnccl.so.2)" after a successful open. */
const char *bench_nccl_describe(void);

/* One call of the collective on count elements per message (as the MPI call's count) then
 * cuStreamSynchronize of the stream, so that it returns with the result in place, as an MPI
 * collective does. sendbuf NULL: in place (allreduce, allgather). Returns 0, or -1 and why. */
int bench_nccl_call(bench_coll_id_t coll, const void *sendbuf, void *recvbuf, size_t count,
                    char *why, size_t len);

/* Collective: the communicator and the stream. */
void bench_nccl_close(void);

#endif
