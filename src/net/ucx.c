/* The network layer over UCX's ucp API: one process-wide context, a worker per rail. Built with
 * UCX only (src/Makefile.inc); no_ucx.c stands in for it without. */
#define _GNU_SOURCE /* open_memstream, strtok_r */
#include "build-config.h"
#include "net/ucx_net.h"
#include "util/config.h"
#include "util/fatal.h"
#include "util/log.h"
#include "util/wait.h"

#include <pthread.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* Every rail of the process. A send is complete once UCX has taken its data, which over tcp may
 * still wait in the endpoint's buffer and leave only while that worker is progressed; a rank that
 * has left a communicator's collective with such bytes buffered, and waits in another one's, would
 * then wait for ever for a peer still waiting for them (seen between two hosts: the ranks of one
 * host in the split communicator's allgather, those of the other still in the world's). So a
 * rank that waits progresses the other rails too, those no other thread is driving. */
static pthread_mutex_t nets_lock = PTHREAD_MUTEX_INITIALIZER;
static picoll_net_t *nets;

/* Progress outside picoll's own waits. A UCX transfer that is complete on one side may still need
 * the other side's worker: over tcp a completed send's last bytes wait in the endpoint's buffer,
 * and a rendezvous send completes only on an acknowledgement that the receiver's worker sends. A
 * rank that has left the network step for the MPI (a fallback call, a barrier, MPI_Finalize)
 * runs no picoll wait, while its peer waits for those bytes and the MPI call for the peer: seen
 * under MPICH between two hosts, rank 0 in the network step waiting for rank 2, rank 2 in the
 * MPI's next collective waiting for rank 0, about one run in ten of hosts.matrix.np4. So once a
 * rail uses UCX's network transports (other hosts, or PICOLL_UCX_TLS/UCX_TLS set), a thread of the
 * process progresses every rail no other thread is driving, every millisecond; rails on one
 * machine (UCX's shared memory, where a completed send has left) do without it. */
#define NET_PROGRESS_PERIOD_NS 1000000L
static pthread_once_t net_progress_once = PTHREAD_ONCE_INIT;

static void *net_progress_main(void *arg)
{
    (void)arg;
    for (;;) {
        struct timespec ts = {.tv_sec = 0, .tv_nsec = NET_PROGRESS_PERIOD_NS};
        nanosleep(&ts, NULL);
        picoll_net_progress_all();
    }
    return NULL;
}

static void net_progress_start(void)
{
    pthread_t t;
    pthread_attr_t attr;
    if (pthread_attr_init(&attr) != 0) {
        return;
    }
    pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
    if (pthread_create(&t, &attr, net_progress_main, NULL) != 0) {
        picoll_warn("cannot start the network step's progress thread: a peer between hosts may "
                    "wait for this rank's bytes until its next collective");
    }
    pthread_attr_destroy(&attr);
}

void picoll_net_register(picoll_net_t *net, int networked)
{
    /* every wait of the process (host barriers, device ends of calls) progresses the rails */
    picoll_wait_set_progress(picoll_net_progress_all);
    pthread_mutex_lock(&nets_lock);
    net->next = nets;
    nets = net;
    net->registered = 1;
    pthread_mutex_unlock(&nets_lock);
    if (networked) {
        pthread_once(&net_progress_once, net_progress_start);
    }
}

void picoll_net_unregister(picoll_net_t *net)
{
    pthread_mutex_lock(&nets_lock);
    for (picoll_net_t **p = &nets; *p != NULL; p = &(*p)->next) {
        if (*p == net) {
            *p = net->next;
            break;
        }
    }
    net->registered = 0;
    pthread_mutex_unlock(&nets_lock);
}

/* The wait's progress hook (util/wait.h): every rail no other thread is driving. A rail whose
 * lock the caller holds (its own wait) is skipped: trylock fails on it. */
void picoll_net_progress_all(void)
{
    if (pthread_mutex_trylock(&nets_lock) != 0) {
        return;
    }
    for (picoll_net_t *o = nets; o != NULL; o = o->next) {
        if (pthread_mutex_trylock(&o->lock) == 0) {
            picoll_ucx.worker_progress(o->worker);
            pthread_mutex_unlock(&o->lock);
        }
    }
    pthread_mutex_unlock(&nets_lock);
}

_Static_assert(sizeof(((picoll_net_req_t *)0)->iov[0]) == sizeof(ucp_dt_iov_t),
               "picoll_net_req_t's iov must have ucp_dt_iov_t's layout");

/* Two contexts, made on first use: [UCX_ANY] as UCX_* and PICOLL_UCX_* configure it, and
 * [UCX_LOCAL] restricted to shared memory, for rails whose members all run on this machine
 * (virtual nodes) when the user set no transports: there, a network transport's progress (an
 * epoll call per poll for tcp) would only add latency. */
enum { UCX_ANY, UCX_LOCAL, UCX_KINDS };
static pthread_mutex_t ucx_lock = PTHREAD_MUTEX_INITIALIZER;
static ucp_context_h ucx_context[UCX_KINDS];
static ucs_status_t ucx_init_status[UCX_KINDS] = {UCS_ERR_NO_RESOURCE, UCS_ERR_NO_RESOURCE};
static int ucx_tried[UCX_KINDS];

/* A UCX status in words; where UCX could not be loaded, why not. */
static const char *net_status_string(ucs_status_t st)
{
    return picoll_ucx_load() == 0 ? picoll_ucx.status_string(st) : picoll_ucx_why();
}

static ucs_status_t ucx_get(int kind, ucp_context_h *out)
{
    ucp_config_t *config;
    ucp_params_t params = {
        .field_mask = UCP_PARAM_FIELD_FEATURES | UCP_PARAM_FIELD_MT_WORKERS_SHARED,
        .features = UCP_FEATURE_TAG,
        /* rails of different communicators may be used by different threads */
        .mt_workers_shared = 1,
    };
    ucs_status_t st;

    pthread_mutex_lock(&ucx_lock);
    if (!ucx_tried[kind] && picoll_ucx_load() != 0) {
        static int warned;
        ucx_tried[kind] = 1;
        if (!warned++) {
            picoll_warn("%s", picoll_ucx_why());
        }
    }
    if (!ucx_tried[kind]) {
        ucx_tried[kind] = 1;
        /* UCX_* settings apply, and PICOLL_UCX_* ones override them for picoll's context only */
        st = picoll_ucx.config_read("PICOLL", NULL, &config);
        if (st == UCS_OK && kind == UCX_LOCAL) {
            st = picoll_ucx.config_modify(config, "TLS", "sm,self");
        }
        if (st == UCS_OK) {
            st = picoll_ucx.init_version(UCP_API_MAJOR, UCP_API_MINOR, &params, config,
                                         &ucx_context[kind]);
            picoll_ucx.config_release(config);
        }
        if (st != UCS_OK) {
            picoll_error("initialising UCX failed: %s", net_status_string(st));
        }
        ucx_init_status[kind] = st;
    }
    *out = ucx_context[kind];
    st = ucx_init_status[kind];
    pthread_mutex_unlock(&ucx_lock);
    return st;
}

ucs_status_t picoll_net_context(int local, ucp_context_h *out)
{
    return ucx_get(local ? UCX_LOCAL : UCX_ANY, out);
}

const char *picoll_net_status_string(ucs_status_t st)
{
    return net_status_string(st);
}

static int cmp_member(const void *a, const void *b)
{
    int x = *(const int *)a, y = ((const net_peer_t *)b)->member;
    return (x > y) - (x < y);
}

net_peer_t *picoll_net_peer(picoll_net_t *net, int i)
{
    if (net->all) {
        return i >= 0 && i < net->size && net->peers[i].ep != NULL ? &net->peers[i] : NULL;
    }
    return bsearch(&i, net->peers, (size_t)net->npeers, sizeof(net_peer_t), cmp_member);
}

const char *picoll_net_host(picoll_net_t *net, int i)
{
    if (i == net->rank) {
        return net->my_host;
    }
    net_peer_t *p = picoll_net_peer(net, i);
    return p != NULL ? p->host : "?";
}

void picoll_net_next(picoll_net_t *net)
{
    net->op++;
}

int picoll_net_rank(const picoll_net_t *net)
{
    return net->rank;
}

int picoll_net_size(const picoll_net_t *net)
{
    return net->size;
}

/* operation (32 bits) | step (16 bits) | sender (16 bits) */
static ucp_tag_t net_tag(const picoll_net_t *net, unsigned step, int sender)
{
    return ((ucp_tag_t)net->op << 32) | ((ucp_tag_t)(step & 0xffff) << 16) |
           (ucp_tag_t)(unsigned)sender;
}

void picoll_net_isend(picoll_net_t *net, int peer, unsigned step, const void *buf, size_t len,
                      int vote, picoll_net_req_t *req)
{
    ucp_request_param_t p = {.op_attr_mask = UCP_OP_ATTR_FIELD_DATATYPE,
                             .datatype = ucp_dt_make_iov()};
    req->peer = peer;
    req->is_recv = 0;
    req->hdr[0] = vote != 0;
    req->hdr[1] = net->op;
    req->iov[0].buffer = req->hdr;
    req->iov[0].length = sizeof(req->hdr);
    req->iov[1].buffer = (void *)buf;
    req->iov[1].length = len;
    net_peer_t *to = picoll_net_peer(net, peer);
    if (to == NULL) {
        picoll_fatal("network step: no endpoint to rail member %d of %d (picoll bug): aborting the "
                     "job",
                     peer, net->size);
    }
    pthread_mutex_lock(&net->lock);
    req->ucx = picoll_ucx.tag_send_nbx(to->ep, req->iov, 2, net_tag(net, step, net->rank), &p);
    pthread_mutex_unlock(&net->lock);
}

void picoll_net_irecv(picoll_net_t *net, int peer, unsigned step, void *buf, size_t len,
                      picoll_net_req_t *req)
{
    ucp_request_param_t p = {.op_attr_mask = UCP_OP_ATTR_FIELD_DATATYPE,
                             .datatype = ucp_dt_make_iov()};
    req->peer = peer;
    req->is_recv = 1;
    req->hdr[0] = 0;
    req->hdr[1] = ~net->op;
    req->iov[0].buffer = req->hdr;
    req->iov[0].length = sizeof(req->hdr);
    req->iov[1].buffer = buf;
    req->iov[1].length = len;
    pthread_mutex_lock(&net->lock);
    req->ucx = picoll_ucx.tag_recv_nbx(net->worker, req->iov, 2, net_tag(net, step, peer),
                                       (ucp_tag_t)-1, &p);
    pthread_mutex_unlock(&net->lock);
}

static void net_failed(picoll_net_t *net, const picoll_net_req_t *req, const char *what,
                       const char *coll)
{
    picoll_fatal("%s on a communicator of size %d: network step with rank %d on host %s failed: "
                 "%s: aborting the job",
                 coll, net->comm_size, net->comm_ranks[req->peer], picoll_net_host(net, req->peer),
                 what);
}

/* The members of the rail that reqs still wait for (each named once), as "rank R on host H, ..."
 * into list; with `state` >= 0 only those the liveness check finds in that state. Returns how
 * many. */
static int net_pending(picoll_net_t *net, const picoll_net_req_t *reqs, int n, int state,
                       char *list, size_t len, int *nunknown)
{
    int off = 0, count = 0;
    list[0] = '\0';
    *nunknown = 0;
    for (int i = 0; i < n; i++) {
        if (reqs[i].ucx == NULL) {
            continue;
        }
        /* a peer we both send to and receive from is named once */
        int named = 0;
        for (int j = 0; j < i; j++) {
            named |= reqs[j].ucx != NULL && reqs[j].peer == reqs[i].peer;
        }
        if (named) {
            continue;
        }
        picoll_peer_state_t s = picoll_alive_state(net->alive, reqs[i].peer);
        *nunknown += s == PICOLL_PEER_UNKNOWN;
        if (state >= 0 && (int)s != state) {
            continue;
        }
        if (off < (int)len - 96) {
            off +=
                snprintf(list + off, len - (size_t)off, "%srank %d on host %s", count ? ", " : "",
                         net->comm_ranks[reqs[i].peer], picoll_net_host(net, reqs[i].peer));
        }
        count++;
    }
    return count;
}

/* The members of the rail that this rank watches (its partners) and whose host or link stopped
 * answering, in list; their number. */
static int net_partners_down(picoll_net_t *net, char *list, size_t len)
{
    int off = 0, count = 0;
    list[0] = '\0';
    for (int r = 0; r < net->size; r++) {
        picoll_peer_state_t s = picoll_alive_state(net->alive, r);
        if (s != PICOLL_PEER_LOST) {
            continue;
        }
        if (off < (int)len - 96) {
            off += snprintf(list + off, len - (size_t)off, "%srank %d on host %s",
                            count ? ", " : "", net->comm_ranks[r], picoll_net_host(net, r));
        }
        count++;
    }
    return count;
}

/* A wait in the network step read the clock (expired: past PICOLL_TIMEOUT, 2x, 4x, ...). As in
 * the node step's barrier (host/shm.c): the peers waited for are looked at once a second from
 * the wait's first second on; one whose process is gone, or whose host or link stopped answering
 * (net/alive.h), ends the job now; late ones are reported when the wait expires, and waited for
 * unless PICOLL_TIMEOUT_ACTION=abort. */
static void net_wait_tick(picoll_net_t *net, const picoll_net_req_t *reqs, int n, const char *coll,
                          const picoll_wait_t *w, int expired, double *next_look)
{
    char list[512];
    int nunknown;

    if (*next_look == 0.0) {
        *next_look = w->start + 1.0;
    }
    if (!expired && w->now < *next_look) {
        return;
    }
    *next_look = w->now + 1.0;
    if (net_pending(net, reqs, n, PICOLL_PEER_GONE, list, sizeof(list), &nunknown) > 0) {
        picoll_fatal("%s on a communicator of size %d: network step: %s exited while the others "
                     "waited for it (its process is gone): aborting the job",
                     coll, net->comm_size, list);
    }
    if (net_pending(net, reqs, n, PICOLL_PEER_LOST, list, sizeof(list), &nunknown) > 0) {
        picoll_fatal("%s on a communicator of size %d: network step: %s did not answer within %g s "
                     "(PICOLL_TIMEOUT): its host, or the link to it, is down: aborting the job",
                     coll, net->comm_size, list, net->timeout);
    }
    /* Past the timeout, waiting for peers this rank does not watch (alltoall's exchange with
     * every node): a partner it watches whose host stopped answering says the network is cut
     * around it, this host or that one (a partner's process that exited is no such sign: it may
     * have ended its part). A host cut off from all others would otherwise wait forever for
     * a peer it cannot see, and its launcher cannot reach it to end it (hosts.linkdown.np8: the
     * link went down in an alltoall). */
    char down[512];
    if (nunknown > 0 && w->now - w->start >= net->timeout &&
        net_partners_down(net, down, sizeof(down)) > 0) {
        net_pending(net, reqs, n, PICOLL_PEER_UNKNOWN, list, sizeof(list), &nunknown);
        picoll_fatal("%s on a communicator of size %d: network step: still waiting after %.0f s "
                     "for %s, which picoll cannot watch, and %s, watched by this rank, did not "
                     "answer within %g s (PICOLL_TIMEOUT): this host, or a link, is down: aborting "
                     "the job",
                     coll, net->comm_size, w->now - w->start, list, down, net->timeout);
    }
    if (!expired) {
        return;
    }
    net_pending(net, reqs, n, -1, list, sizeof(list), &nunknown);
    if (picoll_cfg.timeout_action == PICOLL_TIMEOUT_ABORT) {
        picoll_fatal("%s on a communicator of size %d: network step: %s did not answer within %g s "
                     "(PICOLL_TIMEOUT, PICOLL_TIMEOUT_ACTION=abort): aborting the job",
                     coll, net->comm_size, list, net->timeout);
    }
    picoll_warn("%s on a communicator of size %d: network step: still waiting after %.0f s for %s; "
                "%s (PICOLL_TIMEOUT=%g; PICOLL_TIMEOUT_ACTION=abort ends the job instead)",
                coll, net->comm_size, w->now - w->start, list,
                nunknown == 0 ? "they are alive" : "picoll cannot see whether they are alive",
                net->timeout);
}

/* Progress the worker until every request in reqs is complete: no deadline for a peer that is
 * alive (net_wait_tick). */
static void net_wait(picoll_net_t *net, picoll_net_req_t *reqs, int n, const char *coll)
{
    picoll_wait_t w;
    double next_look = 0.0;
    /* the worker is progressed at every poll: yield only after a stretch without progress */
    picoll_wait_init(&w, net->timeout, picoll_spin_max() / 64);

    for (;;) {
        int pending = 0;
        for (int i = 0; i < n; i++) {
            if (reqs[i].ucx == NULL) {
                continue;
            }
            ucs_status_t st = picoll_ucx.request_check_status(reqs[i].ucx);
            if (st == UCS_INPROGRESS) {
                pending++;
                continue;
            }
            picoll_ucx.request_free(reqs[i].ucx);
            reqs[i].ucx = NULL;
            if (st != UCS_OK) {
                net_failed(net, &reqs[i], net_status_string(st), coll);
            }
        }
        if (pending == 0) {
            break;
        }
        /* the wait's progress hook moves the other rails even while this worker is busy: theirs
         * may hold up ours (this one is skipped there: its lock is ours) */
        int moved = picoll_ucx.worker_progress(net->worker) != 0;
        int step = picoll_wait(&w, moved);
        if (step != PICOLL_WAIT_POLL) {
            net_wait_tick(net, reqs, n, coll, &w, step == PICOLL_WAIT_EXPIRED, &next_look);
        }
    }
}

int picoll_net_waitall(picoll_net_t *net, picoll_net_req_t *reqs, int n, const char *coll)
{
    int all = 1;

    for (int i = 0; i < n; i++) {
        if (UCS_PTR_IS_ERR(reqs[i].ucx)) {
            net_failed(net, &reqs[i], net_status_string(UCS_PTR_STATUS(reqs[i].ucx)), coll);
        }
    }
    pthread_mutex_lock(&net->lock);
    net_wait(net, reqs, n, coll);
    pthread_mutex_unlock(&net->lock);
    for (int i = 0; i < n; i++) {
        if (!reqs[i].is_recv) {
            continue;
        }
        if (reqs[i].hdr[1] != net->op) {
            net_failed(net, &reqs[i], "a message of another operation arrived (picoll bug)", coll);
        }
        all &= reqs[i].hdr[0] != 0;
    }
    return all;
}

void picoll_net_print_ucx(FILE *out)
{
    picoll_ucx_print(out);
}

/* The transports, from UCX's own description of the context: its "resource" lines. */
void picoll_net_print_transports(FILE *out)
{
    char *text = NULL, *line, *save = NULL;
    size_t len = 0;
    int n = 0;
    FILE *mem;

    ucp_context_h context;
    ucs_status_t st = ucx_get(UCX_ANY, &context);
    if (st != UCS_OK) {
        fprintf(out, "none (UCX did not initialise: %s)\n", net_status_string(st));
        return;
    }
    mem = open_memstream(&text, &len);
    if (mem == NULL) {
        fprintf(out, "?\n");
        return;
    }
    picoll_ucx.context_print_info(context, mem);
    fclose(mem);
    for (line = strtok_r(text, "\n", &save); line != NULL; line = strtok_r(NULL, "\n", &save)) {
        const char *dashes = strstr(line, "-- ");
        if (strstr(line, "resource") != NULL && dashes != NULL) {
            fprintf(out, "%s%s", n++ ? ", " : "", dashes + 3);
        }
    }
    fprintf(out, "%s\n", n ? "" : "none");
    free(text);
}

int picoll_net_sendrecv(picoll_net_t *net, unsigned step, int to, const void *sbuf, size_t slen,
                        int from, void *rbuf, size_t rlen, int vote, const char *coll)
{
    picoll_net_req_t r[2];
    picoll_net_irecv(net, from, step, rbuf, rlen, &r[0]);
    picoll_net_isend(net, to, step, sbuf, slen, vote, &r[1]);
    return picoll_net_waitall(net, r, 2, coll);
}
