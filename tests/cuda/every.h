/* tests/cuda/every_call: every MPI function that takes a user buffer, run on device buffers and
 * again on host buffers with the same contents; the results must be bit-identical. This header
 * is the case table's interface: a case is one entry (every_p2p.c, every_coll.c, every_rma.c,
 * every_io.c), a run function that makes the call on the buffers of an env_t and a plan function
 * that says how large they are. every_call.c runs each case over its variants (datatype, count,
 * in place, root, completion call, topology, epoch) and compares. */
#ifndef PICOLL_TESTS_CUDA_EVERY_H
#define PICOLL_TESTS_CUDA_EVERY_H

#include <mpi.h>
#include <stddef.h>
#include <stdint.h>

#include "tbuf.h"

#define EV_NBUF 4   /* buffers of one call */
#define EV_MAXP 64  /* ranks */
#define EV_MAXREQ 8 /* requests a case completes at once */
#define EV_TAG 42

/* What a buffer is to the call. EV_HELPER: it belongs to the matching call on the other side
 * (a receive for a send under test, ...), which always gets host memory, so that a failure
 * names the function under test. */
enum {
    EV_IN = 1, /* read only: must come back unchanged */
    EV_OUT = 2,
    EV_INOUT = 3,
    EV_HELPER = 4,
};

/* How the case's call is made. */
enum {
    EV_BLOCKING,
    EV_NONBLOCKING,      /* completed by each completion call in turn */
    EV_PERSISTENT,       /* *_init, started twice with new data */
    EV_LARGE,            /* the MPI-4 _c variant (blocking) */
    EV_LARGE_NB,         /* the MPI-4 _c variant of a non-blocking call */
    EV_LARGE_PERSISTENT, /* the MPI-4 _init_c variant */
};

/* Case flags. */
enum {
    EV_F_INPLACE = 1 << 0,        /* MPI_IN_PLACE allowed: a variant passes it */
    EV_F_INTONLY = 1 << 1,        /* no derived-datatype variant */
    EV_F_FIXED = 1 << 2,          /* its count is fixed: no zero-count and large variants */
    EV_F_NEIGH = 1 << 3,          /* a neighbourhood collective: runs on a cart and a graph */
    EV_F_EPOCH = 1 << 4,          /* one-sided: runs in a fence and a lock epoch */
    EV_F_P2P = 1 << 5,            /* its requests may be freed once complete */
    EV_F_EXSCAN = 1 << 6,         /* rank 0's receive buffer is undefined: not compared */
    EV_F_COLL = 1 << 7,           /* collective: its requests must not be freed */
    EV_F_ROOTED = 1 << 8,         /* has a root: in place there only, roots vary */
    EV_F_SMALL = 1 << 9,          /* no large-count variant */
    EV_F_ONCE = 1 << 10,          /* persistent, but started once only */
    EV_F_NO_GET_STATUS = 1 << 11, /* not completed by MPI_Request_get_status loops */
};

typedef struct env env_t;

typedef struct {
    const char *name; /* the function under test, as failures name it */
    void (*run)(env_t *e);
    void (*plan)(env_t *e);
    int form;
    int flags;
    const void *arg; /* the case's own description, for run functions shared by several */
} ev_case_t;

enum { EV_EPOCH_FENCE, EV_EPOCH_LOCK };

/* The v layout's arrays as MPI-4's large-count functions (and the neighbourhood w forms) take
 * them: counts as MPI_Count, displacements as MPI_Aint. */
typedef struct {
    MPI_Count sc[EV_MAXP], rc[EV_MAXP];
    MPI_Aint sd[EV_MAXP], rd[EV_MAXP], sbd[EV_MAXP], rbd[EV_MAXP];
} ev_wide_t;

struct env {
    const ev_case_t *c;
    /* the variant */
    MPI_Datatype type; /* of each buffer element */
    const char *tname;
    int n; /* elements per block */
    int root;
    int inplace;
    int mode;      /* completion call, index into ev_mode_name */
    int topo;      /* neighbourhood: 0 cart, 1 dist graph */
    int epoch;     /* one-sided: EV_EPOCH_* */
    MPI_Comm comm; /* MPI_COMM_WORLD's duplicate, or the topology, errors returned */
    int rank, size, left, right;
    MPI_Aint extent, tlb, textent;
    /* the buffers (plan sets elems/bytes and role, every_call.c allocates) */
    size_t bytes[EV_NBUF];
    int role[EV_NBUF];
    tbuf_t tb[EV_NBUF];
    void *buf[EV_NBUF];
    int test_kind; /* the kind of the buffers under test in this run */
    /* layouts of the v and w variants, per rank of the communicator or neighbour */
    int scounts[EV_MAXP], sdispls[EV_MAXP], rcounts[EV_MAXP], rdispls[EV_MAXP];
    int sbdispls[EV_MAXP], rbdispls[EV_MAXP]; /* in bytes, for the w variants */
    MPI_Datatype types[EV_MAXP];
    ev_wide_t wide; /* the same, widened (after the plan) */
    int indeg, outdeg;
    /* requests of the call and its helpers */
    MPI_Request rq[EV_MAXREQ];
    MPI_Status st[EV_MAXREQ];
    int nrq;
    /* what the run recorded besides its buffers: statuses, positions, flags, window contents */
    unsigned char *log;
    size_t log_len, log_cap;
    /* the first MPI call that did not return MPI_SUCCESS */
    int rc;
    const char *rc_call;
    unsigned long seed;
    int round; /* persistent: which start */
};

extern const char *const ev_mode_name[];
extern int ev_nmodes;
#define EV_MODE_GET_STATUS(m) ((m) >= ev_nmodes - 2) /* the last two modes */
extern MPI_Comm ev_cart, ev_graph;

#define EV_RC(e, call) ev_rc((e), (call), #call)
void ev_rc(env_t *e, int rc, const char *call);

/* Whether the call completes later (a request), and whether it is persistent. */
int ev_nonblocking(int form);
int ev_persistent(int form);
/* Whether this rank passes MPI_IN_PLACE (a rooted call does at its root only), and then the
 * send buffer argument: buffer i or MPI_IN_PLACE. */
int ev_in_place_here(const env_t *e);
const void *ev_sbuf(env_t *e, int i);

/* plan helpers: buffer i holds count elements of the variant's type (bytes with ev_plan_bytes) */
void ev_plan(env_t *e, int i, long count, int role);
void ev_plan_bytes(env_t *e, int i, size_t bytes, int role);
/* the v layout: rank j's block has n + j % 3 elements, one element of gap between blocks;
 * returns the total span in elements */
long ev_layout_v(env_t *e, int *counts, int *displs, int nblocks, int shift);

void ev_widen(env_t *e); /* fills e->wide */

/* A new request slot for the call. */
MPI_Request *ev_req(env_t *e);
/* Completes e->rq[0..nrq) with the variant's completion call, statuses in e->st. */
void ev_complete(env_t *e);
/* Ends the call according to its form: completes a non-blocking call; for a persistent one,
 * starts and completes it twice, with new input between, and frees it. */
void ev_finish(env_t *e);

/* Records bytes in the run's log, compared between the host and device runs. */
void ev_log(env_t *e, const void *p, size_t n);
void ev_log_status(env_t *e, const MPI_Status *st);
void ev_log_buf(env_t *e, int i); /* the current contents of buffer i */
/* Deterministic contents: 20-bit integers in each 4 bytes, so that sums of 64 of them fit. */
void ev_fill(unsigned char *p, size_t bytes, uint64_t seed);
/* New contents for the input buffers (persistent calls' second start), the same in both runs. */
void ev_refill(env_t *e);
/* Writes host data into buffer i, whatever its kind. */
void ev_put(env_t *e, int i, const void *data);

/* Closes (and so deletes) the file of the MPI-IO cases. */
void ev_io_close(void);

extern const ev_case_t ev_p2p_cases[], ev_coll_cases[], ev_neigh_cases[], ev_pack_cases[],
    ev_rma_cases[], ev_io_cases[];
extern const int ev_p2p_ncases, ev_coll_ncases, ev_neigh_ncases, ev_pack_ncases, ev_rma_ncases,
    ev_io_ncases;

#endif
