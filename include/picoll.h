/* picoll: MPI collectives on GPU buffers through PMPI interposition.
 *
 * Applications need nothing from this header: preload libpicoll.so (or link it before the MPI
 * library) and the MPI calls are intercepted. These few functions are for tools and tests. */
#ifndef PICOLL_H
#define PICOLL_H

#include <mpi.h>

#ifdef __cplusplus
extern "C" {
#endif

#define PICOLL_VERSION_MAJOR 0
#define PICOLL_VERSION_MINOR 1
#define PICOLL_VERSION_PATCH 0

/* "0.1.0" */
const char *picoll_version(void);

/* 1 when picoll intercepts collectives in this process (initialised through MPI_Init or
 * MPI_Init_thread with PICOLL_ENABLE=1 and a configuration accepted by every rank), else 0. */
int picoll_active(void);

/* While bypass is nonzero, every intercepted call goes straight to the underlying MPI, as with
 * PICOLL_ENABLE=0. Every rank of a communicator must make its calls in the same state: flip it
 * on all ranks between the same two collectives (benchmarks use it for A/B runs in one job). */
void picoll_set_bypass(int bypass);

typedef struct {
    unsigned long id;  /* unique per communicator context in this process */
    int enabled;       /* picoll may run its own algorithms on this communicator */
    int size;          /* communicator size */
    int local_size;    /* ranks of this communicator on this node */
    int num_nodes;     /* nodes the communicator spans */
    char reason[128];  /* why it is disabled, when it is */
} picoll_comm_info_t;

/* Describe picoll's context for comm. Returns MPI_SUCCESS and fills info if a context exists
 * (one is created by the first intercepted collective on comm), MPI_ERR_OTHER if none does. */
int picoll_comm_query(MPI_Comm comm, picoll_comm_info_t *info);

/* The algorithm that ran the calling thread's last MPI_Allreduce, MPI_Allgather, MPI_Alltoall,
 * MPI_Reduce_scatter_block, MPI_Reduce_scatter, MPI_Bcast or MPI_Reduce,
 * as PICOLL_STATS names it ("cuda_oneshot", "oneshot", "hier_rd", ...; "fallback" when the call
 * went to the underlying MPI), or NULL before the first. For tests that check each call's path. */
const char *picoll_last_algorithm(void);

#ifdef __cplusplus
}
#endif
#endif
