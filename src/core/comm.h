/* picoll's per-communicator context, cached as an MPI attribute on the user's communicator. */
#ifndef PICOLL_COMM_H
#define PICOLL_COMM_H

#include <mpi.h>
#include "coll/dispatch.h"
#include "util/status.h"

typedef struct picoll_comm {
    picoll_coll_ctx_t coll; /* the executors, as the algorithms see them (comm, size, node_comm,
                               shm, cuda, hier) */
    unsigned long id;       /* unique in this process */
    int enabled;            /* agreed by every rank of comm at creation */
    int rank;
    int local_rank, local_size;
    int num_nodes;
    char reason[128];                /* why it is disabled */
    struct picoll_comm *prev, *next; /* every live context, for MPI_Finalize */
} picoll_comm_t;

/* The set-up steps of a context on this rank (comm_setup.c); collective over its communicator.
 * Every rank runs every step whatever happened before, so that the exchanges stay matched.
 * Returns 0 when this rank failed (ctx->reason says why); *shm_ok and *hier_ok: this rank's
 * workspace and network step are ready. The caller agrees on the outcome. */
int picoll_comm_setup(picoll_comm_t *ctx, int *shm_ok, int *hier_ok);

/* Create the keyvals; once, from picoll_init. */
picoll_status_t picoll_comm_keyval_create(void);
/* The registration scope of comm (picoll_register): made and attached to comm on first use, a
 * local call (no context is made for it). Freeing comm ends the ranges registered for it
 * (picoll_cuda_zc_scope_end). NULL where the attribute cannot be set. */
const void *picoll_comm_reg_scope(MPI_Comm comm);
/* Destroy every live context and free the keyval; from picoll_finalize. */
void picoll_comm_finalize(void);

/* Context of comm, created collectively over comm on first use. comm must be a valid
 * communicator. Every rank gets a context with the same `enabled`. */
static inline picoll_comm_t *picoll_comm_get(MPI_Comm comm);
picoll_comm_t *picoll_comm_create(MPI_Comm comm);
picoll_comm_t *picoll_comm_lookup(MPI_Comm comm);

#ifdef PICOLL_HAVE_CUDA
/* MPIX_Stream_comm_create (pmpi/stream.c), collective over comm, after its first collective:
 * where comm lies on one node with a device workspace on every rank (and PICOLL_STREAM_KERNELS),
 * makes a second workspace in cu_ctx whose kernels go on stream (ctx->coll.cuda_enq, for
 * picoll_enq_call; its limits copied once into ctx->coll.cuda_enq_limits). Returns comm's context
 * where that succeeded on every rank, else NULL on every rank. */
picoll_comm_t *picoll_comm_stream_enable(MPI_Comm comm, picoll_cu_context_t cu_ctx,
                                         picoll_cu_stream_t stream);
#endif

#include <stdatomic.h>
#include "core/core.h"

/* The attribute lookup costs more than the rest of a passed-through call, so each thread keeps
 * its last (handle, context). Destroying any context bumps picoll_comm_generation, which
 * invalidates every thread's entry: a handle reused after MPI_Comm_free never finds a stale one. */
extern _Atomic unsigned long picoll_comm_generation;
typedef struct {
    MPI_Comm comm;
    picoll_comm_t *ctx;
    unsigned long generation;
} picoll_comm_cache_t;
extern _Thread_local picoll_comm_cache_t picoll_comm_cache
    __attribute__((tls_model("initial-exec")));

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
