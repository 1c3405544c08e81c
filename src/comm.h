/* picoll's per-communicator context, cached as an MPI attribute on the user's communicator. */
#ifndef PICOLL_COMM_H
#define PICOLL_COMM_H

#include <mpi.h>
#include "status.h"
#include "hier.h"
#include "host/shm.h"

typedef struct picoll_comm {
    MPI_Comm comm;          /* the user's communicator, not owned */
    unsigned long id;       /* unique in this process */
    int enabled;            /* agreed by every rank of comm at creation */
    int rank, size;
    MPI_Comm node_comm;     /* ranks of comm on this (virtual) node, by rank; owned, MPI_COMM_NULL
                               when unused */
    int local_rank, local_size;
    int num_nodes;
    char reason[128];       /* why it is disabled */
    picoll_shm_t *shm;      /* node workspace in shared memory, NULL when not set up on every
                               rank: the host executor's, and the device executor's per-call vote */
    struct picoll_cuda_ws *cuda; /* device executor workspace; NULL when not set up on every rank */
    int cuda_possible;      /* every rank has a CUDA device, on one node: a call on device
                               buffers may make the workspace (the same on every rank) */
    void *cuda_failed;      /* this rank's buffers' context when making the workspace there last
                               failed (on some rank): this rank votes no for buffers of that
                               context from then on, so the set-up is not tried on every call */
    picoll_hier_t *hier;    /* shape and network of a communicator spanning nodes; NULL when not
                               set up on every rank */
    struct picoll_comm *prev, *next; /* every live context, for MPI_Finalize */
} picoll_comm_t;

/* Create the keyval; once, from picoll_init. */
picoll_status_t picoll_comm_keyval_create(void);
/* Destroy every live context and free the keyval; from picoll_finalize. */
void picoll_comm_finalize(void);

/* Context of comm, created collectively over comm on first use. comm must be a valid
 * communicator. Every rank gets a context with the same `enabled`. */
static inline picoll_comm_t *picoll_comm_get(MPI_Comm comm);
picoll_comm_t *picoll_comm_create(MPI_Comm comm);
picoll_comm_t *picoll_comm_lookup(MPI_Comm comm);

#include <stdatomic.h>
#include "core.h"

/* The attribute lookup costs more than the rest of a passed-through call, so each thread keeps
 * its last (handle, context). Destroying any context bumps picoll_comm_generation, which
 * invalidates every thread's entry: a handle reused after MPI_Comm_free never finds a stale one. */
extern _Atomic unsigned long picoll_comm_generation;
typedef struct {
    MPI_Comm comm;
    picoll_comm_t *ctx;
    unsigned long generation;
} picoll_comm_cache_t;
extern _Thread_local picoll_comm_cache_t picoll_comm_cache __attribute__((tls_model("initial-exec")));

static inline picoll_comm_t *picoll_comm_get(MPI_Comm comm)
{
    picoll_comm_cache_t *c = &picoll_comm_cache;
    if (c->comm == comm && c->ctx != NULL &&
        c->generation == atomic_load_explicit(&picoll_comm_generation, memory_order_acquire)) {
        return c->ctx;
    }
    return picoll_comm_lookup(comm);
}

#endif
