/* The host executor's symmetric workspace: one POSIX shared-memory segment per node communicator,
 * with a flag line and two data buffers per local rank, and barriers that carry a vote. */
#ifndef PICOLL_SHM_H
#define PICOLL_SHM_H

#include <mpi.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include "topo/cpu.h"
#include "util/status.h"

#define PICOLL_CACHE_LINE 128 /* two lines: the adjacent-line prefetcher must not share them */
#define PICOLL_SHM_INLINE 48  /* bytes of data in a barrier line (picoll_shm_small) */

/* One rank's barrier line for the epochs of one parity: the epoch it last reached there, its vote,
 * and up to PICOLL_SHM_INLINE bytes of data written before it arrived, so that a peer waiting
 * for it gets the data in the same cache-line transfer as the news that it arrived. */
typedef struct {
    _Atomic uint64_t arrived;
    _Atomic uint32_t vote;
    uint32_t unused;
    unsigned char data[PICOLL_SHM_INLINE];
} picoll_shm_line_t;
_Static_assert(sizeof(picoll_shm_line_t) == 64, "a barrier line is one cache line");

typedef struct {
    picoll_shm_line_t line[2]; /* barriers of even and odd epochs (one writer: this rank) */
    _Atomic uint64_t block;    /* single-copy algorithms: address, in this rank's process, of
                                    what the peers read in this call (written before the call's
                                    first barrier, read between it and the second) */
    _Atomic uint64_t result;   /* single-copy allreduce: address of this rank's receive buffer,
                                    which the peers read after the reduction's barrier */
    uint64_t pid;              /* this rank's process and its start time (util/proc.h), written */
    uint64_t start;            /* at set-up: a peer that waits for it can tell late from gone */
    _Atomic uint64_t dev_no;   /* the device hot path (coll/vote.c): the number of the last
                                    hot call this rank said no to; its peers' kernels wait for it
                                    in vain, their hosts read this and stop them */
    char pad[PICOLL_CACHE_LINE - 5 * sizeof(uint64_t)];
} picoll_shm_flag_t;

typedef struct {
    void *base; /* mapping of the whole segment */
    size_t map_size;
    int nlocal, me;           /* ranks on the node, and mine */
    size_t slot_size;         /* bytes of one data buffer of one rank */
    uint64_t epoch;           /* barriers this rank has passed */
    picoll_shm_flag_t *flags; /* nlocal flag lines */
    char *data;               /* nlocal slots of two buffers each */
    int *comm_ranks;          /* rank in the user's communicator of each local rank */
    int comm_size;
    double timeout;       /* seconds; from PICOLL_TIMEOUT */
    int cma;              /* every local rank can read every other's memory with
                                  process_vm_readv (host/cma.h): agreed at set-up */
    int *pids;            /* pid of each local rank, where cma */
    unsigned char *watch; /* per local rank: 1 when its process can be seen from here (same
                                  pid namespace), so that a wait for it can tell late from gone */
    size_t cache_unit;    /* bytes the chunked algorithms scale by: the node leader's
                                  picoll_shm_cache_unit() (the same on every local rank) */
} picoll_shm_t;

/* Collective over node_comm: local rank 0 creates the segment (an unguessable name, mode 0600)
 * and every rank maps it; the name is unlinked as soon as all have mapped it. Every rank takes
 * part in every step even after a local failure (then it returns an error and leaves *shm
 * unusable); the caller agrees on the outcome over the whole communicator. */
picoll_status_t picoll_shm_create(MPI_Comm comm, MPI_Comm node_comm, size_t slot_size,
                                  double timeout, picoll_shm_t *shm);
void picoll_shm_destroy(picoll_shm_t *shm);

/* The cache unit of the CPU this thread runs on: PICOLL_HOST_CACHE, else the L2 of its core
 * (topo/cpu.h; cpu, when not NULL, receives what was detected). */
size_t picoll_shm_cache_unit(picoll_topo_cpu_t *cpu);

/* A chunk of num/den cache units: at least 64 KiB, at most a slot, a multiple of 4 KiB. Every
 * local rank computes the same. */
static inline size_t picoll_shm_chunk(const picoll_shm_t *shm, size_t num, size_t den)
{
    size_t c = shm->cache_unit * num / den;
    c = c < ((size_t)64 << 10) ? ((size_t)64 << 10) : c;
    c = c > shm->slot_size ? shm->slot_size : c;
    c &= ~(size_t)4095;
    return c < 4096 ? 4096 : c;
}

static inline char *picoll_shm_slot(const picoll_shm_t *shm, int rank, uint64_t buf)
{
    return shm->data + ((size_t)rank * 2 + (buf & 1)) * shm->slot_size;
}

/* Where local rank `rank` puts `len` bytes for the barrier of epoch `buf`: in its barrier line when
 * they fit (every rank passes the same len), else in its data buffer. */
static inline char *picoll_shm_small(picoll_shm_t *shm, int rank, uint64_t buf, size_t len)
{
    if (len <= PICOLL_SHM_INLINE) {
        return (char *)shm->flags[rank].line[buf & 1].data;
    }
    return picoll_shm_slot(shm, rank, buf);
}

/* Arrive at the next barrier with my vote and wait for every local rank. Returns the AND of all
 * votes. A rank that is late is waited for, as MPI waits: past PICOLL_TIMEOUT (and again at 2x,
 * 4x, ...) a warning names the collective, the communicator size and the ranks waited for, and
 * the wait goes on (with PICOLL_TIMEOUT_ACTION=abort, the job ends there instead). A rank whose
 * process is gone ends the job at once (within about a second), on every rank that waits for it,
 * with an error that names it. The data buffer of this barrier's epoch is
 * picoll_shm_slot(shm, r, shm->epoch) read before the call. */
int picoll_shm_barrier(picoll_shm_t *shm, int vote, const char *coll);
/* The same barrier with a vote of several bits: returns the bitwise AND of every rank's vote. */
uint32_t picoll_shm_barrier_mask(picoll_shm_t *shm, uint32_t vote, const char *coll);
/* The barrier in two halves, for a wait that may come later (the release of a device workspace
 * whose communicator was freed, cuda_ws.c): picoll_shm_arrive arrives at the next barrier with my
 * vote and returns its epoch; picoll_shm_reached says, without waiting, whether every local rank
 * has arrived there; picoll_shm_wait_all waits for them as picoll_shm_barrier does and returns
 * the AND of the votes (mine: vote). */
uint64_t picoll_shm_arrive(picoll_shm_t *shm, uint32_t vote);
int picoll_shm_reached(const picoll_shm_t *shm, uint64_t epoch);
uint32_t picoll_shm_wait_all(picoll_shm_t *shm, uint64_t epoch, uint32_t vote, const char *coll);
/* Exported for the tests, which count the barriers of a call: picoll_test_shm_barriers(), the
 * barriers this process has entered (every node workspace, every thread). */

#endif
