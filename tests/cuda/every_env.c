/* The helpers that every_call's cases make their calls with (every.h): buffer plans, requests
 * and their completion by each completion call, the run's log. */
#include "every.h"

#include "mpitest.h"

#include <stdlib.h>
#include <string.h>

const char *const ev_mode_name[] = {
    "MPI_Wait",
    "MPI_Test loop",
    "MPI_Waitall",
    "MPI_Waitany",
    "MPI_Waitsome",
    "MPI_Testall",
    "MPI_Testany",
    "MPI_Testsome",
    "MPI_Request_get_status loop + MPI_Wait",
    "MPI_Request_get_status loop + MPI_Request_free",
};
enum {
    M_WAIT,
    M_TEST,
    M_WAITALL,
    M_WAITANY,
    M_WAITSOME,
    M_TESTALL,
    M_TESTANY,
    M_TESTSOME,
    M_STATUS_WAIT,
    M_STATUS_FREE,
    M_COUNT
};
int ev_nmodes = M_COUNT;

/* MPICH 4.0.2's MPI_Testall answers MPI_ERR_IN_STATUS on a completed persistent collective
 * request whose status holds no error (results right): only an error in a status counts. */
static int all_errors(env_t *e, int rc)
{
    if (rc != MPI_ERR_IN_STATUS) {
        return rc;
    }
    for (int i = 0; i < e->nrq; i++) {
        if (e->st[i].MPI_ERROR != MPI_SUCCESS) {
            return rc;
        }
    }
    return MPI_SUCCESS;
}

void ev_rc(env_t *e, int rc, const char *call)
{
    if (rc != MPI_SUCCESS && e->rc == MPI_SUCCESS) {
        e->rc = rc;
        e->rc_call = call;
    }
}

int ev_nonblocking(int form)
{
    return form != EV_BLOCKING && form != EV_LARGE;
}

int ev_persistent(int form)
{
    return form == EV_PERSISTENT || form == EV_LARGE_PERSISTENT;
}

int ev_in_place_here(const env_t *e)
{
    return e->inplace && (!(e->c->flags & EV_F_ROOTED) || e->rank == e->root);
}

const void *ev_sbuf(env_t *e, int i)
{
    return ev_in_place_here(e) ? MPI_IN_PLACE : e->buf[i];
}

void ev_plan_bytes(env_t *e, int i, size_t bytes, int role)
{
    e->bytes[i] = bytes;
    e->role[i] = role;
}

void ev_plan(env_t *e, int i, long count, int role)
{
    size_t bytes = count <= 0 ? 0 : (size_t)((count - 1) * e->extent + e->tlb + e->textent);
    ev_plan_bytes(e, i, bytes, role);
}

long ev_layout_v(env_t *e, int *counts, int *displs, int nblocks, int shift)
{
    long total = 0;
    for (int j = 0; j < nblocks; j++) {
        counts[j] = e->n == 0 ? 0 : e->n + (j + shift) % 3;
        displs[j] = (int)total;
        total += counts[j] + 1;
    }
    return total;
}

void ev_widen(env_t *e)
{
    ev_wide_t *w = &e->wide;
    for (int j = 0; j < EV_MAXP; j++) {
        w->sc[j] = e->scounts[j];
        w->rc[j] = e->rcounts[j];
        w->sd[j] = e->sdispls[j];
        w->rd[j] = e->rdispls[j];
        w->sbd[j] = e->sbdispls[j];
        w->rbd[j] = e->rbdispls[j];
    }
}

MPI_Request *ev_req(env_t *e)
{
    if (e->nrq >= EV_MAXREQ) {
        mt_fail("%s: more than %d requests", e->c->name, EV_MAXREQ);
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    e->rq[e->nrq] = MPI_REQUEST_NULL;
    return &e->rq[e->nrq++];
}

void ev_log(env_t *e, const void *p, size_t n)
{
    if (e->log_len + n > e->log_cap) {
        e->log_cap = (e->log_len + n) * 2 + 256;
        e->log = realloc(e->log, e->log_cap);
    }
    memcpy(e->log + e->log_len, p, n);
    e->log_len += n;
}

void ev_log_status(env_t *e, const MPI_Status *st)
{
    int v[3] = {st->MPI_SOURCE, st->MPI_TAG, -1};
    MPI_Get_count(st, e->type, &v[2]);
    ev_log(e, v, sizeof(v));
}

void ev_log_buf(env_t *e, int i)
{
    unsigned char *tmp = malloc(e->bytes[i] + 1);
    tb_get(&e->tb[i], tmp);
    ev_log(e, tmp, e->bytes[i]);
    free(tmp);
}

static void log_outputs(env_t *e)
{
    for (int i = 0; i < EV_NBUF; i++) {
        if (e->role[i] & EV_OUT) {
            ev_log_buf(e, i);
        }
    }
}

void ev_put(env_t *e, int i, const void *data)
{
    tb_put(&e->tb[i], data);
}

void ev_fill(unsigned char *p, size_t bytes, uint64_t seed)
{
    for (size_t i = 0; i < bytes; i += 4) {
        uint32_t v = (uint32_t)mt_rand(seed, (uint64_t)mt_rank, i) & 0xfffff; /* sums fit */
        memcpy(p + i, &v, bytes - i < 4 ? bytes - i : 4);
    }
}

void ev_refill(env_t *e)
{
    for (int i = 0; i < EV_NBUF; i++) {
        unsigned char *p;
        if (!(e->role[i] & EV_IN) || e->bytes[i] == 0) {
            continue;
        }
        p = malloc(e->bytes[i]);
        ev_fill(p, e->bytes[i], e->seed * 31 + 1000u * (unsigned)e->round + (unsigned)i);
        ev_put(e, i, p);
        free(p);
    }
}

/* ---- completion ---- */

static void wait_any(env_t *e)
{
    MPI_Status tmp;
    int idx;
    for (int k = 0; k < e->nrq; k++) {
        int rc = MPI_Waitany(e->nrq, e->rq, &idx, &tmp);
        ev_rc(e, rc, "MPI_Waitany");
        if (rc != MPI_SUCCESS || idx == MPI_UNDEFINED) {
            break;
        }
        e->st[idx] = tmp;
    }
}

/* Waitsome (test 0) or Testsome (test 1) until every request is done. */
static void some(env_t *e, int test)
{
    MPI_Status tmp[EV_MAXREQ];
    int idx[EV_MAXREQ], out, done = 0;
    while (done < e->nrq) {
        int rc = test ? MPI_Testsome(e->nrq, e->rq, &out, idx, tmp)
                      : MPI_Waitsome(e->nrq, e->rq, &out, idx, tmp);
        ev_rc(e, rc, test ? "MPI_Testsome" : "MPI_Waitsome");
        if (rc != MPI_SUCCESS || out == MPI_UNDEFINED) {
            break;
        }
        for (int j = 0; j < out; j++) {
            e->st[idx[j]] = tmp[j];
        }
        done += out;
    }
}

static void test_any(env_t *e)
{
    MPI_Status tmp;
    int idx, flag, done = 0;
    while (done < e->nrq) {
        int rc = MPI_Testany(e->nrq, e->rq, &idx, &flag, &tmp);
        ev_rc(e, rc, "MPI_Testany");
        if (rc != MPI_SUCCESS || (flag && idx == MPI_UNDEFINED)) {
            break;
        }
        if (flag) {
            e->st[idx] = tmp;
            done++;
        }
    }
}

static void test_loop(env_t *e, int all)
{
    int flag = 0, rc = MPI_SUCCESS;
    for (int i = 0; i < (all ? 1 : e->nrq) && rc == MPI_SUCCESS; i++) {
        flag = 0;
        while (!flag && rc == MPI_SUCCESS) {
            rc = all ? all_errors(e, MPI_Testall(e->nrq, e->rq, &flag, e->st))
                     : MPI_Test(&e->rq[i], &flag, &e->st[i]);
        }
    }
    ev_rc(e, rc, all ? "MPI_Testall" : "MPI_Test");
}

/* MPI_Request_get_status until each is complete; the output buffers must hold the results from
 * then on (recorded before the request is waited for or freed). A collective's or persistent
 * request is waited for, not freed: freeing an active one is erroneous. */
static void status_loop(env_t *e, int free_it)
{
    int rc = MPI_SUCCESS;
    for (int i = 0; i < e->nrq && rc == MPI_SUCCESS; i++) {
        int flag = 0;
        while (!flag && rc == MPI_SUCCESS) {
            rc = MPI_Request_get_status(e->rq[i], &flag, &e->st[i]);
        }
    }
    ev_rc(e, rc, "MPI_Request_get_status");
    log_outputs(e);
    for (int i = 0; i < e->nrq; i++) {
        if (free_it && (e->c->flags & EV_F_P2P) && !ev_persistent(e->c->form)) {
            ev_rc(e, MPI_Request_free(&e->rq[i]), "MPI_Request_free");
        } else {
            ev_rc(e, MPI_Wait(&e->rq[i], MPI_STATUS_IGNORE), "MPI_Wait");
        }
    }
}

void ev_complete(env_t *e)
{
    if (e->rc != MPI_SUCCESS) {
        return; /* a request may not exist */
    }
    switch (e->mode) {
    case M_WAIT:
        for (int i = 0; i < e->nrq; i++) {
            ev_rc(e, MPI_Wait(&e->rq[i], &e->st[i]), "MPI_Wait");
        }
        break;
    case M_TEST: test_loop(e, 0); break;
    case M_WAITALL: ev_rc(e, MPI_Waitall(e->nrq, e->rq, e->st), "MPI_Waitall"); break;
    case M_WAITANY: wait_any(e); break;
    case M_WAITSOME: some(e, 0); break;
    case M_TESTALL: test_loop(e, 1); break;
    case M_TESTANY: test_any(e); break;
    case M_TESTSOME: some(e, 1); break;
    case M_STATUS_WAIT: status_loop(e, 0); break;
    default: status_loop(e, 1); break;
    }
}

/* Starts the persistent requests twice, the second time with new input (round 0 with MPI_Start
 * each, round 1 with MPI_Startall), then frees them. */
static void persistent_rounds(env_t *e)
{
    int rounds = e->c->flags & EV_F_ONCE ? 1 : 2;
    for (e->round = 0; e->round < rounds && e->rc == MPI_SUCCESS; e->round++) {
        if (e->round == 1) {
            ev_refill(e);
            ev_rc(e, MPI_Startall(e->nrq, e->rq), "MPI_Startall");
        } else {
            for (int i = 0; i < e->nrq; i++) {
                ev_rc(e, MPI_Start(&e->rq[i]), "MPI_Start");
            }
        }
        ev_complete(e);
        log_outputs(e);
    }
    for (int i = 0; i < e->nrq; i++) {
        if (e->rq[i] != MPI_REQUEST_NULL) {
            ev_rc(e, MPI_Request_free(&e->rq[i]), "MPI_Request_free");
        }
    }
}

void ev_finish(env_t *e)
{
    if (ev_persistent(e->c->form)) {
        persistent_rounds(e);
    } else if (ev_nonblocking(e->c->form)) {
        ev_complete(e);
    }
}
