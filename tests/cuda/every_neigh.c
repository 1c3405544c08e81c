/* every_call's neighbourhood collectives, on a periodic 1-d cart (left and right neighbours) and
 * on a dist graph (sources r-1 and r-2, destinations r+1 and r+2: self loops at 2 ranks), each
 * in its blocking, non-blocking, persistent and large-count forms. */
#include "every.h"

#include "mpitest.h"

#define INFO MPI_INFO_NULL

/* The in-neighbours, in the order MPI lists them. */
static void sources(env_t *e, int *src)
{
    int dst[2], w[2];
    if (e->topo == 0) {
        src[0] = e->left;
        src[1] = e->right;
        return;
    }
    MPI_Dist_graph_neighbors(e->comm, 2, src, w, 2, dst, w);
}

/* What rank q sends each neighbour in the v forms: n + q % 2 elements. */
static int count_of(const env_t *e, int q)
{
    return e->n == 0 ? 0 : e->n + q % 2;
}

static void plan_allgather(env_t *e)
{
    ev_plan(e, 0, e->n, EV_IN);
    ev_plan(e, 1, 2L * e->n, EV_OUT);
}

/* blocks one element apart; the w form's displacements in bytes */
static long blocks(env_t *e, const int *counts, int *displs, int *bdispls)
{
    long total = 0;
    for (int k = 0; k < 2; k++) {
        displs[k] = (int)total;
        bdispls[k] = (int)(total * e->extent);
        total += counts[k] + 1;
    }
    return total;
}

static void plan_allgatherv(env_t *e)
{
    int src[2];
    sources(e, src);
    for (int k = 0; k < 2; k++) {
        e->rcounts[k] = count_of(e, src[k]);
    }
    ev_plan(e, 0, count_of(e, e->rank), EV_IN);
    ev_plan(e, 1, blocks(e, e->rcounts, e->rdispls, e->rbdispls), EV_OUT);
}

static void plan_alltoall(env_t *e)
{
    ev_plan(e, 0, 2L * e->n, EV_IN);
    ev_plan(e, 1, 2L * e->n, EV_OUT);
}

/* n elements to and from each neighbour, in blocks with gaps */
static void plan_alltoallv(env_t *e)
{
    for (int k = 0; k < 2; k++) {
        e->scounts[k] = e->rcounts[k] = e->n;
    }
    ev_plan(e, 0, blocks(e, e->scounts, e->sdispls, e->sbdispls), EV_IN);
    ev_plan(e, 1, blocks(e, e->rcounts, e->rdispls, e->rbdispls), EV_OUT);
}

static void run_allgather(env_t *e)
{
    const void *s = e->buf[0];
    void *r = e->buf[1];
    MPI_Datatype t = e->type;
    int n = e->n;
    switch (e->c->form) {
    case EV_BLOCKING: EV_RC(e, MPI_Neighbor_allgather(s, n, t, r, n, t, e->comm)); break;
    case EV_NONBLOCKING:
        EV_RC(e, MPI_Ineighbor_allgather(s, n, t, r, n, t, e->comm, ev_req(e)));
        break;
#if MPI_VERSION >= 4
    case EV_PERSISTENT:
        EV_RC(e, MPI_Neighbor_allgather_init(s, n, t, r, n, t, e->comm, INFO, ev_req(e)));
        break;
    case EV_LARGE: EV_RC(e, MPI_Neighbor_allgather_c(s, n, t, r, n, t, e->comm)); break;
    case EV_LARGE_NB:
        EV_RC(e, MPI_Ineighbor_allgather_c(s, n, t, r, n, t, e->comm, ev_req(e)));
        break;
    case EV_LARGE_PERSISTENT:
        EV_RC(e, MPI_Neighbor_allgather_init_c(s, n, t, r, n, t, e->comm, INFO, ev_req(e)));
        break;
#endif
    }
    ev_finish(e);
}

static void run_allgatherv(env_t *e)
{
    const void *s = e->buf[0];
    void *r = e->buf[1];
    MPI_Datatype t = e->type;
    int sn = count_of(e, e->rank);
    const int *rc = e->rcounts, *rd = e->rdispls;
    MPI_Comm c = e->comm;
    switch (e->c->form) {
    case EV_BLOCKING: EV_RC(e, MPI_Neighbor_allgatherv(s, sn, t, r, rc, rd, t, c)); break;
    case EV_NONBLOCKING:
        EV_RC(e, MPI_Ineighbor_allgatherv(s, sn, t, r, rc, rd, t, c, ev_req(e)));
        break;
#if MPI_VERSION >= 4
    case EV_PERSISTENT:
        EV_RC(e, MPI_Neighbor_allgatherv_init(s, sn, t, r, rc, rd, t, c, INFO, ev_req(e)));
        break;
    case EV_LARGE:
        EV_RC(e, MPI_Neighbor_allgatherv_c(s, sn, t, r, e->wide.rc, e->wide.rd, t, c));
        break;
    case EV_LARGE_NB:
        EV_RC(e, MPI_Ineighbor_allgatherv_c(s, sn, t, r, e->wide.rc, e->wide.rd, t, c, ev_req(e)));
        break;
    case EV_LARGE_PERSISTENT:
        EV_RC(e, MPI_Neighbor_allgatherv_init_c(s, sn, t, r, e->wide.rc, e->wide.rd, t, c, INFO,
                                                ev_req(e)));
        break;
#endif
    }
    ev_finish(e);
}

static void run_alltoall(env_t *e)
{
    const void *s = e->buf[0];
    void *r = e->buf[1];
    MPI_Datatype t = e->type;
    int n = e->n;
    switch (e->c->form) {
    case EV_BLOCKING: EV_RC(e, MPI_Neighbor_alltoall(s, n, t, r, n, t, e->comm)); break;
    case EV_NONBLOCKING:
        EV_RC(e, MPI_Ineighbor_alltoall(s, n, t, r, n, t, e->comm, ev_req(e)));
        break;
#if MPI_VERSION >= 4
    case EV_PERSISTENT:
        EV_RC(e, MPI_Neighbor_alltoall_init(s, n, t, r, n, t, e->comm, INFO, ev_req(e)));
        break;
    case EV_LARGE: EV_RC(e, MPI_Neighbor_alltoall_c(s, n, t, r, n, t, e->comm)); break;
    case EV_LARGE_NB:
        EV_RC(e, MPI_Ineighbor_alltoall_c(s, n, t, r, n, t, e->comm, ev_req(e)));
        break;
    case EV_LARGE_PERSISTENT:
        EV_RC(e, MPI_Neighbor_alltoall_init_c(s, n, t, r, n, t, e->comm, INFO, ev_req(e)));
        break;
#endif
    }
    ev_finish(e);
}

static void run_alltoallv(env_t *e)
{
    const void *s = e->buf[0];
    void *r = e->buf[1];
    MPI_Datatype t = e->type;
    const int *sc = e->scounts, *sd = e->sdispls, *rc = e->rcounts, *rd = e->rdispls;
    MPI_Comm c = e->comm;
    switch (e->c->form) {
    case EV_BLOCKING: EV_RC(e, MPI_Neighbor_alltoallv(s, sc, sd, t, r, rc, rd, t, c)); break;
    case EV_NONBLOCKING:
        EV_RC(e, MPI_Ineighbor_alltoallv(s, sc, sd, t, r, rc, rd, t, c, ev_req(e)));
        break;
#if MPI_VERSION >= 4
    case EV_PERSISTENT:
        EV_RC(e, MPI_Neighbor_alltoallv_init(s, sc, sd, t, r, rc, rd, t, c, INFO, ev_req(e)));
        break;
    case EV_LARGE:
        EV_RC(e, MPI_Neighbor_alltoallv_c(s, e->wide.sc, e->wide.sd, t, r, e->wide.rc, e->wide.rd,
                                          t, c));
        break;
    case EV_LARGE_NB:
        EV_RC(e, MPI_Ineighbor_alltoallv_c(s, e->wide.sc, e->wide.sd, t, r, e->wide.rc, e->wide.rd,
                                           t, c, ev_req(e)));
        break;
    case EV_LARGE_PERSISTENT:
        EV_RC(e, MPI_Neighbor_alltoallv_init_c(s, e->wide.sc, e->wide.sd, t, r, e->wide.rc,
                                               e->wide.rd, t, c, INFO, ev_req(e)));
        break;
#endif
    }
    ev_finish(e);
}

static void run_alltoallw(env_t *e)
{
    const void *s = e->buf[0];
    void *r = e->buf[1];
    const MPI_Datatype *ty = e->types;
    const int *sc = e->scounts, *rc = e->rcounts;
    const MPI_Aint *sd, *rd;
    MPI_Comm c = e->comm;
    sd = e->wide.sbd; /* the w form's displacements are MPI_Aint, in bytes */
    rd = e->wide.rbd;
    switch (e->c->form) {
    case EV_BLOCKING: EV_RC(e, MPI_Neighbor_alltoallw(s, sc, sd, ty, r, rc, rd, ty, c)); break;
    case EV_NONBLOCKING:
        EV_RC(e, MPI_Ineighbor_alltoallw(s, sc, sd, ty, r, rc, rd, ty, c, ev_req(e)));
        break;
#if MPI_VERSION >= 4
    case EV_PERSISTENT:
        EV_RC(e, MPI_Neighbor_alltoallw_init(s, sc, sd, ty, r, rc, rd, ty, c, INFO, ev_req(e)));
        break;
    case EV_LARGE:
        EV_RC(e, MPI_Neighbor_alltoallw_c(s, e->wide.sc, sd, ty, r, e->wide.rc, rd, ty, c));
        break;
    case EV_LARGE_NB:
        EV_RC(e, MPI_Ineighbor_alltoallw_c(s, e->wide.sc, sd, ty, r, e->wide.rc, rd, ty, c,
                                           ev_req(e)));
        break;
    case EV_LARGE_PERSISTENT:
        EV_RC(e, MPI_Neighbor_alltoallw_init_c(s, e->wide.sc, sd, ty, r, e->wide.rc, rd, ty, c,
                                               INFO, ev_req(e)));
        break;
#endif
    }
    ev_finish(e);
}

#define NEIGH(name, run, plan, form)                                                               \
    {                                                                                              \
        name, run, plan, form, EV_F_COLL | EV_F_NEIGH, NULL                                        \
    }
const ev_case_t ev_neigh_cases[] = {
    NEIGH("MPI_Neighbor_allgather", run_allgather, plan_allgather, EV_BLOCKING),
    NEIGH("MPI_Ineighbor_allgather", run_allgather, plan_allgather, EV_NONBLOCKING),
    NEIGH("MPI_Neighbor_allgatherv", run_allgatherv, plan_allgatherv, EV_BLOCKING),
    NEIGH("MPI_Ineighbor_allgatherv", run_allgatherv, plan_allgatherv, EV_NONBLOCKING),
    NEIGH("MPI_Neighbor_alltoall", run_alltoall, plan_alltoall, EV_BLOCKING),
    NEIGH("MPI_Ineighbor_alltoall", run_alltoall, plan_alltoall, EV_NONBLOCKING),
    NEIGH("MPI_Neighbor_alltoallv", run_alltoallv, plan_alltoallv, EV_BLOCKING),
    NEIGH("MPI_Ineighbor_alltoallv", run_alltoallv, plan_alltoallv, EV_NONBLOCKING),
    NEIGH("MPI_Neighbor_alltoallw", run_alltoallw, plan_alltoallv, EV_BLOCKING),
    NEIGH("MPI_Ineighbor_alltoallw", run_alltoallw, plan_alltoallv, EV_NONBLOCKING),
#if MPI_VERSION >= 4
    NEIGH("MPI_Neighbor_allgather_init", run_allgather, plan_allgather, EV_PERSISTENT),
    NEIGH("MPI_Neighbor_allgather_c", run_allgather, plan_allgather, EV_LARGE),
    NEIGH("MPI_Ineighbor_allgather_c", run_allgather, plan_allgather, EV_LARGE_NB),
    NEIGH("MPI_Neighbor_allgather_init_c", run_allgather, plan_allgather, EV_LARGE_PERSISTENT),
    NEIGH("MPI_Neighbor_allgatherv_init", run_allgatherv, plan_allgatherv, EV_PERSISTENT),
    NEIGH("MPI_Neighbor_allgatherv_c", run_allgatherv, plan_allgatherv, EV_LARGE),
    NEIGH("MPI_Ineighbor_allgatherv_c", run_allgatherv, plan_allgatherv, EV_LARGE_NB),
    NEIGH("MPI_Neighbor_allgatherv_init_c", run_allgatherv, plan_allgatherv, EV_LARGE_PERSISTENT),
    NEIGH("MPI_Neighbor_alltoall_init", run_alltoall, plan_alltoall, EV_PERSISTENT),
    NEIGH("MPI_Neighbor_alltoall_c", run_alltoall, plan_alltoall, EV_LARGE),
    NEIGH("MPI_Ineighbor_alltoall_c", run_alltoall, plan_alltoall, EV_LARGE_NB),
    NEIGH("MPI_Neighbor_alltoall_init_c", run_alltoall, plan_alltoall, EV_LARGE_PERSISTENT),
    NEIGH("MPI_Neighbor_alltoallv_init", run_alltoallv, plan_alltoallv, EV_PERSISTENT),
    NEIGH("MPI_Neighbor_alltoallv_c", run_alltoallv, plan_alltoallv, EV_LARGE),
    NEIGH("MPI_Ineighbor_alltoallv_c", run_alltoallv, plan_alltoallv, EV_LARGE_NB),
    NEIGH("MPI_Neighbor_alltoallv_init_c", run_alltoallv, plan_alltoallv, EV_LARGE_PERSISTENT),
    NEIGH("MPI_Neighbor_alltoallw_init", run_alltoallw, plan_alltoallv, EV_PERSISTENT),
    NEIGH("MPI_Neighbor_alltoallw_c", run_alltoallw, plan_alltoallv, EV_LARGE),
    NEIGH("MPI_Ineighbor_alltoallw_c", run_alltoallw, plan_alltoallv, EV_LARGE_NB),
    NEIGH("MPI_Neighbor_alltoallw_init_c", run_alltoallw, plan_alltoallv, EV_LARGE_PERSISTENT),
#endif
};
const int ev_neigh_ncases = (int)(sizeof(ev_neigh_cases) / sizeof(ev_neigh_cases[0]));
