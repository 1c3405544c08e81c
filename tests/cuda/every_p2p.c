/* every_call's point-to-point cases: each rank sends to its right neighbour and receives from
 * its left one. The call under test gets the buffers of the run's kind; the matching call on
 * the other side (EV_HELPER) host buffers, and is non-blocking, so that no order deadlocks. */
#include "every.h"

#include "mpitest.h"

typedef int (*send_fn)(const void *, int, MPI_Datatype, int, int, MPI_Comm);
typedef int (*isend_fn)(const void *, int, MPI_Datatype, int, int, MPI_Comm, MPI_Request *);

/* buffer 0 is sent, buffer 1 received; helper: which of them the other side's call owns */
static void plan_send(env_t *e)
{
    ev_plan(e, 0, e->n, EV_IN);
    ev_plan(e, 1, e->n, EV_OUT | EV_HELPER);
}

static void plan_recv(env_t *e)
{
    ev_plan(e, 0, e->n, EV_IN | EV_HELPER);
    ev_plan(e, 1, e->n, EV_OUT);
}

static void plan_both(env_t *e)
{
    ev_plan(e, 0, e->n, EV_IN);
    ev_plan(e, 1, e->n, EV_OUT);
}

static void plan_replace(env_t *e)
{
    ev_plan(e, 0, e->n, EV_INOUT);
}

/* the helper receive for a send under test */
static void post_recv(env_t *e, MPI_Request *h)
{
    EV_RC(e, MPI_Irecv(e->buf[1], e->n, e->type, e->left, EV_TAG, e->comm, h));
}

/* ---- blocking sends, and receives ---- */

static void send_with(env_t *e, send_fn send, int ready)
{
    MPI_Request *h = ev_req(e);
    post_recv(e, h);
    if (ready) {
        EV_RC(e, MPI_Barrier(e->comm)); /* every receive is posted */
    }
    EV_RC(e, send(e->buf[0], e->n, e->type, e->right, EV_TAG, e->comm));
    EV_RC(e, MPI_Wait(h, &e->st[0]));
    ev_log_status(e, &e->st[0]);
}

static void run_send(env_t *e)
{
    send_with(e, MPI_Send, 0);
}
static void run_bsend(env_t *e)
{
    send_with(e, MPI_Bsend, 0);
}
static void run_ssend(env_t *e)
{
    send_with(e, MPI_Ssend, 0);
}
static void run_rsend(env_t *e)
{
    send_with(e, MPI_Rsend, 1);
}

typedef int (*recv_fn)(void *, int, MPI_Datatype, int, int, MPI_Comm, MPI_Status *);
typedef int (*sendrecv_fn)(const void *, int, MPI_Datatype, int, int, void *, int, MPI_Datatype,
                           int, int, MPI_Comm, MPI_Status *);
typedef int (*replace_fn)(void *, int, MPI_Datatype, int, int, int, int, MPI_Comm, MPI_Status *);
typedef int (*mrecv_fn)(void *, int, MPI_Datatype, MPI_Message *, MPI_Status *);

static void recv_with(env_t *e, recv_fn recv)
{
    MPI_Request *h = ev_req(e);
    MPI_Status st;
    EV_RC(e, MPI_Isend(e->buf[0], e->n, e->type, e->right, EV_TAG, e->comm, h));
    EV_RC(e, recv(e->buf[1], e->n, e->type, e->left, EV_TAG, e->comm, &st));
    EV_RC(e, MPI_Wait(h, MPI_STATUS_IGNORE));
    ev_log_status(e, &st);
}

static void sendrecv_with(env_t *e, sendrecv_fn sendrecv)
{
    MPI_Status st;
    EV_RC(e, sendrecv(e->buf[0], e->n, e->type, e->right, EV_TAG, e->buf[1], e->n, e->type, e->left,
                      EV_TAG, e->comm, &st));
    ev_log_status(e, &st);
}

static void replace_with(env_t *e, replace_fn replace)
{
    MPI_Status st;
    EV_RC(e, replace(e->buf[0], e->n, e->type, e->right, EV_TAG, e->left, EV_TAG, e->comm, &st));
    ev_log_status(e, &st);
}

static void mrecv_with(env_t *e, mrecv_fn mrecv)
{
    MPI_Request *h = ev_req(e);
    MPI_Message msg = MPI_MESSAGE_NULL;
    MPI_Status st;
    EV_RC(e, MPI_Isend(e->buf[0], e->n, e->type, e->right, EV_TAG, e->comm, h));
    EV_RC(e, MPI_Mprobe(e->left, EV_TAG, e->comm, &msg, &st));
    EV_RC(e, mrecv(e->buf[1], e->n, e->type, &msg, &st));
    EV_RC(e, MPI_Wait(h, MPI_STATUS_IGNORE));
    ev_log_status(e, &st);
}

static void run_recv(env_t *e)
{
    recv_with(e, MPI_Recv);
}
static void run_sendrecv(env_t *e)
{
    sendrecv_with(e, MPI_Sendrecv);
}
static void run_sendrecv_replace(env_t *e)
{
    replace_with(e, MPI_Sendrecv_replace);
}
static void run_mrecv(env_t *e)
{
    mrecv_with(e, MPI_Mrecv);
}

/* ---- non-blocking: the call's request first, the helper's second ---- */

static void isend_with(env_t *e, isend_fn isend, int ready)
{
    MPI_Request *s = ev_req(e), *h = ev_req(e);
    post_recv(e, h);
    if (ready) {
        EV_RC(e, MPI_Barrier(e->comm));
    }
    EV_RC(e, isend(e->buf[0], e->n, e->type, e->right, EV_TAG, e->comm, s));
    ev_complete(e);
    ev_log_status(e, &e->st[1]);
}

static void run_isend(env_t *e)
{
    isend_with(e, MPI_Isend, 0);
}
static void run_ibsend(env_t *e)
{
    isend_with(e, MPI_Ibsend, 0);
}
static void run_issend(env_t *e)
{
    isend_with(e, MPI_Issend, 0);
}
static void run_irsend(env_t *e)
{
    isend_with(e, MPI_Irsend, 1);
}

typedef int (*irecv_fn)(void *, int, MPI_Datatype, int, int, MPI_Comm, MPI_Request *);

static void irecv_with(env_t *e, irecv_fn irecv)
{
    MPI_Request *r = ev_req(e), *h = ev_req(e);
    EV_RC(e, irecv(e->buf[1], e->n, e->type, e->left, EV_TAG, e->comm, r));
    EV_RC(e, MPI_Isend(e->buf[0], e->n, e->type, e->right, EV_TAG, e->comm, h));
    ev_complete(e);
    ev_log_status(e, &e->st[0]);
}

static void run_irecv(env_t *e)
{
    irecv_with(e, MPI_Irecv);
}

static void run_imrecv(env_t *e)
{
    MPI_Request *r = ev_req(e), *h = ev_req(e);
    MPI_Message msg = MPI_MESSAGE_NULL;
    MPI_Status st;
    int flag = 0, rc = MPI_SUCCESS;
    EV_RC(e, MPI_Isend(e->buf[0], e->n, e->type, e->right, EV_TAG, e->comm, h));
    while (!flag && rc == MPI_SUCCESS) {
        rc = MPI_Improbe(e->left, EV_TAG, e->comm, &flag, &msg, &st);
    }
    ev_rc(e, rc, "MPI_Improbe");
    EV_RC(e, MPI_Imrecv(e->buf[1], e->n, e->type, &msg, r));
    ev_complete(e);
    ev_log_status(e, &e->st[0]);
}

/* ---- persistent: started twice, new data in between (round 0 MPI_Start, 1 MPI_Startall) ---- */

typedef int (*send_init_fn)(const void *, int, MPI_Datatype, int, int, MPI_Comm, MPI_Request *);

static void start(env_t *e, int n, MPI_Request *rq)
{
    if (e->round == 0) {
        for (int i = 0; i < n; i++) {
            EV_RC(e, MPI_Start(&rq[i]));
        }
    } else {
        EV_RC(e, MPI_Startall(n, rq));
    }
}

static void send_init_with(env_t *e, send_init_fn init, int ready)
{
    MPI_Request *s = ev_req(e), *h = ev_req(e);
    EV_RC(e, init(e->buf[0], e->n, e->type, e->right, EV_TAG, e->comm, s));
    for (e->round = 0; e->round < 2 && e->rc == MPI_SUCCESS; e->round++) {
        if (e->round == 1) {
            ev_refill(e);
        }
        post_recv(e, h);
        if (ready) {
            EV_RC(e, MPI_Barrier(e->comm));
        }
        start(e, 1, s);
        ev_complete(e);
        ev_log_status(e, &e->st[1]);
        ev_log_buf(e, 1);
    }
    if (*s != MPI_REQUEST_NULL) {
        EV_RC(e, MPI_Request_free(s));
    }
}

static void run_send_init(env_t *e)
{
    send_init_with(e, MPI_Send_init, 0);
}
static void run_bsend_init(env_t *e)
{
    send_init_with(e, MPI_Bsend_init, 0);
}
static void run_ssend_init(env_t *e)
{
    send_init_with(e, MPI_Ssend_init, 0);
}
static void run_rsend_init(env_t *e)
{
    send_init_with(e, MPI_Rsend_init, 1);
}

static void run_recv_init(env_t *e)
{
    MPI_Request *r = ev_req(e), *h = ev_req(e);
    EV_RC(e, MPI_Recv_init(e->buf[1], e->n, e->type, e->left, EV_TAG, e->comm, r));
    for (e->round = 0; e->round < 2 && e->rc == MPI_SUCCESS; e->round++) {
        if (e->round == 1) {
            ev_refill(e);
        }
        start(e, 1, r);
        EV_RC(e, MPI_Isend(e->buf[0], e->n, e->type, e->right, EV_TAG, e->comm, h));
        ev_complete(e);
        ev_log_status(e, &e->st[0]);
        ev_log_buf(e, 1);
    }
    if (*r != MPI_REQUEST_NULL) {
        EV_RC(e, MPI_Request_free(r));
    }
}

/* a persistent send and receive, both under test, started together */
static void run_startall(env_t *e)
{
    MPI_Request *rq = ev_req(e);
    ev_req(e);
    EV_RC(e, MPI_Send_init(e->buf[0], e->n, e->type, e->right, EV_TAG, e->comm, &rq[0]));
    EV_RC(e, MPI_Recv_init(e->buf[1], e->n, e->type, e->left, EV_TAG, e->comm, &rq[1]));
    for (e->round = 0; e->round < 2 && e->rc == MPI_SUCCESS; e->round++) {
        if (e->round == 1) {
            ev_refill(e);
        }
        start(e, 2, rq);
        ev_complete(e);
        ev_log_status(e, &e->st[1]);
        ev_log_buf(e, 1);
    }
    for (int i = 0; i < 2; i++) {
        if (rq[i] != MPI_REQUEST_NULL) {
            EV_RC(e, MPI_Request_free(&rq[i]));
        }
    }
}

/* ---- request lifetime ---- */

/* An Isend whose request is freed at once: the send completes later, which the sender learns
 * from its right neighbour's acknowledgement; then its buffer is freed. */
static void run_request_free(env_t *e)
{
    MPI_Request s;
    MPI_Status st;
    int one = 1, ack = 0;
    EV_RC(e, MPI_Isend(e->buf[0], e->n, e->type, e->right, EV_TAG, e->comm, &s));
    EV_RC(e, MPI_Request_free(&s));
    EV_RC(e, MPI_Recv(e->buf[1], e->n, e->type, e->left, EV_TAG, e->comm, &st));
    ev_log_status(e, &st);
    EV_RC(e, MPI_Sendrecv(&one, 1, MPI_INT, e->left, EV_TAG + 1, &ack, 1, MPI_INT, e->right,
                          EV_TAG + 1, e->comm, MPI_STATUS_IGNORE));
    ev_log(e, &ack, sizeof(ack));
}

static void plan_cancel(env_t *e)
{
    ev_plan(e, 0, 0, 0);
    ev_plan(e, 1, e->n, EV_OUT);
}

/* An Irecv that nothing matches, cancelled: MPI_Test_cancelled says so, the buffer is untouched
 * (compared with the host run's, which MPI leaves as it was). */
static void run_cancel(env_t *e)
{
    MPI_Request r;
    MPI_Status st;
    int cancelled = 0;
    EV_RC(e, MPI_Irecv(e->buf[1], e->n, e->type, e->left, EV_TAG + 99, e->comm, &r));
    EV_RC(e, MPI_Cancel(&r));
    EV_RC(e, MPI_Wait(&r, &st));
    EV_RC(e, MPI_Test_cancelled(&st, &cancelled));
    MT_CHECK(cancelled,
             "MPI_Cancel of an unmatched MPI_Irecv on %s memory: MPI_Test_cancelled "
             "says it was not cancelled",
             tb_kind_name[e->test_kind]);
    ev_log(e, &cancelled, sizeof(cancelled));
    EV_RC(e, MPI_Barrier(e->comm));
}

/* ---- MPI_BOTTOM with a struct type of absolute addresses ---- */

static void plan_bottom(env_t *e)
{
    ev_plan_bytes(e, 0, (size_t)(e->n + 1) * sizeof(int), EV_IN);
    ev_plan_bytes(e, 1, (size_t)(e->n + 1) * sizeof(int), EV_OUT);
}

/* Buffer i's n ints as a struct of absolute addresses: the first half at its start, the rest one
 * int further (a gap). */
MPI_Datatype ev_absolute_type(env_t *e, int i);
MPI_Datatype ev_absolute_type(env_t *e, int i)
{
    MPI_Datatype t, types[2] = {MPI_INT, MPI_INT};
    int h = e->n / 2, len[2] = {h, e->n - h};
    MPI_Aint at[2];
    MPI_Get_address(e->buf[i], &at[0]);
    at[1] = at[0] + (MPI_Aint)(h + 1) * (MPI_Aint)sizeof(int);
    MPI_Type_create_struct(2, len, at, types, &t);
    MPI_Type_commit(&t);
    return t;
}

static void run_sendrecv_bottom(env_t *e)
{
    MPI_Datatype s = ev_absolute_type(e, 0), r = ev_absolute_type(e, 1);
    MPI_Status st;
    EV_RC(e, MPI_Sendrecv(MPI_BOTTOM, 1, s, e->right, EV_TAG, MPI_BOTTOM, 1, r, e->left, EV_TAG,
                          e->comm, &st));
    ev_log_status(e, &st);
    MPI_Type_free(&s);
    MPI_Type_free(&r);
}

/* ---- MPI-4 large counts ---- */

#if MPI_VERSION >= 4
static int send_c(const void *b, int n, MPI_Datatype t, int d, int g, MPI_Comm c)
{
    return MPI_Send_c(b, n, t, d, g, c);
}
static int bsend_c(const void *b, int n, MPI_Datatype t, int d, int g, MPI_Comm c)
{
    return MPI_Bsend_c(b, n, t, d, g, c);
}
static int ssend_c(const void *b, int n, MPI_Datatype t, int d, int g, MPI_Comm c)
{
    return MPI_Ssend_c(b, n, t, d, g, c);
}
static int rsend_c(const void *b, int n, MPI_Datatype t, int d, int g, MPI_Comm c)
{
    return MPI_Rsend_c(b, n, t, d, g, c);
}
static int isend_c(const void *b, int n, MPI_Datatype t, int d, int g, MPI_Comm c, MPI_Request *r)
{
    return MPI_Isend_c(b, n, t, d, g, c, r);
}
static int ibsend_c(const void *b, int n, MPI_Datatype t, int d, int g, MPI_Comm c, MPI_Request *r)
{
    return MPI_Ibsend_c(b, n, t, d, g, c, r);
}
static int issend_c(const void *b, int n, MPI_Datatype t, int d, int g, MPI_Comm c, MPI_Request *r)
{
    return MPI_Issend_c(b, n, t, d, g, c, r);
}
static int irsend_c(const void *b, int n, MPI_Datatype t, int d, int g, MPI_Comm c, MPI_Request *r)
{
    return MPI_Irsend_c(b, n, t, d, g, c, r);
}
static int send_init_c(const void *b, int n, MPI_Datatype t, int d, int g, MPI_Comm c,
                       MPI_Request *r)
{
    return MPI_Send_init_c(b, n, t, d, g, c, r);
}
static void run_send_c(env_t *e)
{
    send_with(e, send_c, 0);
}
static void run_bsend_c(env_t *e)
{
    send_with(e, bsend_c, 0);
}
static void run_ssend_c(env_t *e)
{
    send_with(e, ssend_c, 0);
}
static void run_rsend_c(env_t *e)
{
    send_with(e, rsend_c, 1);
}
static void run_isend_c(env_t *e)
{
    isend_with(e, isend_c, 0);
}
static void run_ibsend_c(env_t *e)
{
    isend_with(e, ibsend_c, 0);
}
static void run_issend_c(env_t *e)
{
    isend_with(e, issend_c, 0);
}
static void run_irsend_c(env_t *e)
{
    isend_with(e, irsend_c, 1);
}
static void run_send_init_c(env_t *e)
{
    send_init_with(e, send_init_c, 0);
}

static int recv_c(void *b, int n, MPI_Datatype t, int s, int g, MPI_Comm c, MPI_Status *st)
{
    return MPI_Recv_c(b, n, t, s, g, c, st);
}
static int irecv_c(void *b, int n, MPI_Datatype t, int s, int g, MPI_Comm c, MPI_Request *r)
{
    return MPI_Irecv_c(b, n, t, s, g, c, r);
}
static int sendrecv_c(const void *sb, int sn, MPI_Datatype st, int d, int sg, void *rb, int rn,
                      MPI_Datatype rt, int s, int rg, MPI_Comm c, MPI_Status *status)
{
    return MPI_Sendrecv_c(sb, sn, st, d, sg, rb, rn, rt, s, rg, c, status);
}
static int replace_c(void *b, int n, MPI_Datatype t, int d, int sg, int s, int rg, MPI_Comm c,
                     MPI_Status *st)
{
    return MPI_Sendrecv_replace_c(b, n, t, d, sg, s, rg, c, st);
}
static int mrecv_c(void *b, int n, MPI_Datatype t, MPI_Message *m, MPI_Status *st)
{
    return MPI_Mrecv_c(b, n, t, m, st);
}
static void run_recv_c(env_t *e)
{
    recv_with(e, recv_c);
}

/* MPI-4's non-blocking sendrecv, and its _c variants */
static void run_isendrecv(env_t *e)
{
    MPI_Request *q = ev_req(e);
    if (e->c->form == EV_LARGE_NB) {
        EV_RC(e, MPI_Isendrecv_c(e->buf[0], e->n, e->type, e->right, EV_TAG, e->buf[1], e->n,
                                 e->type, e->left, EV_TAG, e->comm, q));
    } else {
        EV_RC(e, MPI_Isendrecv(e->buf[0], e->n, e->type, e->right, EV_TAG, e->buf[1], e->n, e->type,
                               e->left, EV_TAG, e->comm, q));
    }
    ev_complete(e);
    ev_log_status(e, &e->st[0]);
}

static void run_isendrecv_replace(env_t *e)
{
    MPI_Request *q = ev_req(e);
    if (e->c->form == EV_LARGE_NB) {
        EV_RC(e, MPI_Isendrecv_replace_c(e->buf[0], e->n, e->type, e->right, EV_TAG, e->left,
                                         EV_TAG, e->comm, q));
    } else {
        EV_RC(e, MPI_Isendrecv_replace(e->buf[0], e->n, e->type, e->right, EV_TAG, e->left, EV_TAG,
                                       e->comm, q));
    }
    ev_complete(e);
    ev_log_status(e, &e->st[0]);
}
static void run_irecv_c(env_t *e)
{
    irecv_with(e, irecv_c);
}
static void run_sendrecv_c(env_t *e)
{
    sendrecv_with(e, sendrecv_c);
}
static void run_sendrecv_replace_c(env_t *e)
{
    replace_with(e, replace_c);
}
static void run_mrecv_c(env_t *e)
{
    mrecv_with(e, mrecv_c);
}
#endif

/* Open MPI 4.1's persistent buffered send of a message above the eager limit delivers stale
 * data at its second start, on host buffers alone (a 20-line MPI program shows it) */
#ifdef OPEN_MPI
#define BSEND_INIT_FLAGS EV_F_SMALL
#else
#define BSEND_INIT_FLAGS 0
#endif

/* MPICH 4.0.2's MPI_Isendrecv crashes on the vector type, and its request may not be freed
 * after MPI_Request_get_status said complete (an error), on host buffers alone */
#define ISENDRECV (EV_F_INTONLY | EV_F_NO_GET_STATUS)

#define P2P(name, run, plan, form, flags)                                                          \
    {                                                                                              \
        name, run, plan, form, (flags) | EV_F_P2P, NULL                                            \
    }
const ev_case_t ev_p2p_cases[] = {
    P2P("MPI_Send", run_send, plan_send, EV_BLOCKING, 0),
    P2P("MPI_Bsend", run_bsend, plan_send, EV_BLOCKING, 0),
    P2P("MPI_Ssend", run_ssend, plan_send, EV_BLOCKING, 0),
    P2P("MPI_Rsend", run_rsend, plan_send, EV_BLOCKING, 0),
    P2P("MPI_Recv", run_recv, plan_recv, EV_BLOCKING, 0),
    P2P("MPI_Sendrecv", run_sendrecv, plan_both, EV_BLOCKING, 0),
    P2P("MPI_Sendrecv_replace", run_sendrecv_replace, plan_replace, EV_BLOCKING, 0),
    P2P("MPI_Mprobe+MPI_Mrecv", run_mrecv, plan_recv, EV_BLOCKING, 0),
    P2P("MPI_Isend", run_isend, plan_send, EV_NONBLOCKING, 0),
    P2P("MPI_Ibsend", run_ibsend, plan_send, EV_NONBLOCKING, 0),
    P2P("MPI_Issend", run_issend, plan_send, EV_NONBLOCKING, 0),
    P2P("MPI_Irsend", run_irsend, plan_send, EV_NONBLOCKING, 0),
    P2P("MPI_Irecv", run_irecv, plan_recv, EV_NONBLOCKING, 0),
    P2P("MPI_Improbe+MPI_Imrecv", run_imrecv, plan_recv, EV_NONBLOCKING, 0),
    P2P("MPI_Send_init", run_send_init, plan_send, EV_PERSISTENT, 0),
    P2P("MPI_Bsend_init", run_bsend_init, plan_send, EV_PERSISTENT, BSEND_INIT_FLAGS),
    P2P("MPI_Ssend_init", run_ssend_init, plan_send, EV_PERSISTENT, 0),
    P2P("MPI_Rsend_init", run_rsend_init, plan_send, EV_PERSISTENT, 0),
    P2P("MPI_Recv_init", run_recv_init, plan_recv, EV_PERSISTENT, 0),
    P2P("MPI_Send_init+MPI_Recv_init (MPI_Startall)", run_startall, plan_both, EV_PERSISTENT, 0),
    P2P("MPI_Request_free (MPI_Isend completed later)", run_request_free, plan_send, EV_BLOCKING,
        0),
    P2P("MPI_Cancel (unmatched MPI_Irecv)", run_cancel, plan_cancel, EV_BLOCKING, 0),
    P2P("MPI_Sendrecv (MPI_BOTTOM, absolute struct types)", run_sendrecv_bottom, plan_bottom,
        EV_BLOCKING, EV_F_INTONLY),
#if MPI_VERSION >= 4
    P2P("MPI_Send_c", run_send_c, plan_send, EV_BLOCKING, 0),
    P2P("MPI_Bsend_c", run_bsend_c, plan_send, EV_BLOCKING, 0),
    P2P("MPI_Ssend_c", run_ssend_c, plan_send, EV_BLOCKING, 0),
    P2P("MPI_Rsend_c", run_rsend_c, plan_send, EV_BLOCKING, 0),
    P2P("MPI_Recv_c", run_recv_c, plan_recv, EV_BLOCKING, 0),
    P2P("MPI_Sendrecv_c", run_sendrecv_c, plan_both, EV_BLOCKING, 0),
    P2P("MPI_Sendrecv_replace_c", run_sendrecv_replace_c, plan_replace, EV_BLOCKING, 0),
    P2P("MPI_Mprobe+MPI_Mrecv_c", run_mrecv_c, plan_recv, EV_BLOCKING, 0),
    P2P("MPI_Isend_c", run_isend_c, plan_send, EV_LARGE_NB, 0),
    P2P("MPI_Ibsend_c", run_ibsend_c, plan_send, EV_LARGE_NB, 0),
    P2P("MPI_Issend_c", run_issend_c, plan_send, EV_LARGE_NB, 0),
    P2P("MPI_Irsend_c", run_irsend_c, plan_send, EV_LARGE_NB, 0),
    P2P("MPI_Irecv_c", run_irecv_c, plan_recv, EV_LARGE_NB, 0),
    P2P("MPI_Send_init_c", run_send_init_c, plan_send, EV_PERSISTENT, 0),
    P2P("MPI_Isendrecv", run_isendrecv, plan_both, EV_NONBLOCKING, ISENDRECV),
    P2P("MPI_Isendrecv_replace", run_isendrecv_replace, plan_replace, EV_NONBLOCKING, ISENDRECV),
    P2P("MPI_Isendrecv_c", run_isendrecv, plan_both, EV_LARGE_NB, ISENDRECV),
    P2P("MPI_Isendrecv_replace_c", run_isendrecv_replace, plan_replace, EV_LARGE_NB, ISENDRECV),
#endif
};
const int ev_p2p_ncases = (int)(sizeof(ev_p2p_cases) / sizeof(ev_p2p_cases[0]));
