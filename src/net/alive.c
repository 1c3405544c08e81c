/* Liveness of a rail's members (net/alive.h): /proc for those on this machine, an idle TCP
 * connection with keepalive for those on other hosts. */
#define _GNU_SOURCE /* accept4, POLLRDHUP */
#include "build-config.h"
#include "net/alive.h"
#include "net/partners.h"
#include "util/fatal.h"
#include "util/log.h"
#include "util/proc.h"
#include "util/status.h"
#include "util/wait.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <ifaddrs.h>
#include <math.h>
#include <net/if.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#define ALIVE_MAX_ADDRS 8
#define ALIVE_DIAL_S 1.0  /* a connection attempt to one address (all members are dialling now) */
#define ALIVE_REPLY_S 5.0 /* the handshake once connected */

/* What each member publishes at set-up. */
typedef struct {
    uint64_t token; /* random: names this member's listener in the handshake */
    uint64_t start; /* its process's start time (util/proc.h) */
    uint64_t pidns; /* inode of its pid namespace */
    int32_t pid;
    uint16_t port; /* its listener, network order; 0: none */
    uint16_t naddr;
    char boot[40];                  /* the machine's boot id */
    uint32_t addr[ALIVE_MAX_ADDRS]; /* IPv4, network order */
} alive_card_t;

/* The dialer's first message; the listener answers with its token, the dialer confirms with one
 * byte, and only then do both keep the connection (a dialer that gave up must not leave the
 * other side watching a connection it closed). */
typedef struct {
    uint64_t expect; /* the listener's token, as the dialer read it in the cards */
    uint64_t token;  /* the dialer's */
    int32_t index;   /* the dialer's member index */
    int32_t pad;
} alive_hello_t;

/* Per partner p (member peer[p], sorted): */
struct picoll_alive {
    int np, me;
    int *peer;            /* member index */
    int *fd;              /* connection to it, -1: none */
    unsigned char *watch; /* 1: its process is watched in /proc */
    pid_t *pid;
    uint64_t *start;
    picoll_peer_state_t *verdict; /* gone or lost once seen; alive otherwise */
};

static void alive_read_boot(char *boot, size_t len)
{
    memset(boot, 0, len);
    FILE *f = fopen("/proc/sys/kernel/random/boot_id", "r");
    if (f != NULL) {
        if (fgets(boot, (int)len, f) == NULL) {
            boot[0] = '\0';
        }
        fclose(f);
    }
}

static uint64_t alive_token(void)
{
    uint64_t t = 0;
    if (getrandom(&t, sizeof(t), GRND_NONBLOCK) != (ssize_t)sizeof(t) || t == 0) {
        t = ((uint64_t)getpid() << 32) ^ (uint64_t)(picoll_clock_now() * 1e9) ^ 0x9e3779b97f4a7c15u;
    }
    return t;
}

/* This machine's IPv4 addresses that are up, loopback only when there is nothing else. */
static int alive_addresses(uint32_t *addr, int max)
{
    struct ifaddrs *list = NULL;
    int n = 0;
    if (getifaddrs(&list) == 0) {
        for (struct ifaddrs *i = list; i != NULL && n < max; i = i->ifa_next) {
            if (i->ifa_addr == NULL || i->ifa_addr->sa_family != AF_INET ||
                !(i->ifa_flags & IFF_UP) || (i->ifa_flags & IFF_LOOPBACK)) {
                continue;
            }
            addr[n++] = ((const struct sockaddr_in *)(const void *)i->ifa_addr)->sin_addr.s_addr;
        }
        freeifaddrs(list);
    }
    if (n == 0) {
        addr[n++] = htonl(INADDR_LOOPBACK);
    }
    return n;
}

/* Keepalive: after a second without traffic, a probe every interval; the kernel drops the
 * connection once nothing has been acknowledged for `silence` seconds (TCP_USER_TIMEOUT, which
 * also governs keepalive on Linux), with the probe count as the bound where that option is
 * missing. */
static void alive_keepalive(int fd, double silence)
{
    double s = silence < 2.0 ? 2.0 : silence;
    int on = 1, idle = 1, intvl = 1;
    int cnt = (int)ceil(s) - idle;
    if (cnt > 120) {
        intvl = (int)ceil((s - idle) / 120.0);
        cnt = (int)ceil((s - idle) / intvl);
    }
    unsigned user = (unsigned)(s * 1000.0);
    setsockopt(fd, SOL_SOCKET, SO_KEEPALIVE, &on, sizeof(on));
    setsockopt(fd, IPPROTO_TCP, TCP_KEEPIDLE, &idle, sizeof(idle));
    setsockopt(fd, IPPROTO_TCP, TCP_KEEPINTVL, &intvl, sizeof(intvl));
    setsockopt(fd, IPPROTO_TCP, TCP_KEEPCNT, &cnt, sizeof(cnt));
#ifdef TCP_USER_TIMEOUT
    setsockopt(fd, IPPROTO_TCP, TCP_USER_TIMEOUT, &user, sizeof(user));
#else
    (void)user;
#endif
}

/* The set-up's closing barrier, for a member that has nothing to serve: nonblocking like the
 * others' (a blocking barrier would not match theirs). */
static void alive_barrier(MPI_Comm comm)
{
    MPI_Request r;
    PMPI_Ibarrier(comm, &r);
    PMPI_Wait(&r, MPI_STATUS_IGNORE);
}

/* A connection attempt of this member to a lower one. */
enum { DIAL_NEXT, DIAL_CONNECTING, DIAL_REPLY, DIAL_DONE, DIAL_FAILED };
typedef struct {
    int slot; /* the partner's */
    int fd;
    int phase;
    int addr; /* next address to try */
    double deadline;
    size_t got;
    uint64_t reply;
} alive_dial_t;

/* A connection accepted from a higher member. */
enum { ANSWER_HELLO, ANSWER_CONFIRM, ANSWER_CLOSED };
typedef struct {
    int fd;
    int phase;
    size_t got;
    alive_hello_t hello;
} alive_answer_t;

static void dial_fail_address(alive_dial_t *d)
{
    if (d->fd >= 0) {
        close(d->fd);
    }
    d->fd = -1;
    d->got = 0;
    d->phase = DIAL_NEXT;
}

static void dial_start(alive_dial_t *d, const alive_card_t *peer)
{
    while (d->phase == DIAL_NEXT) {
        if (d->addr >= peer->naddr) {
            d->phase = DIAL_FAILED;
            return;
        }
        struct sockaddr_in sa = {.sin_family = AF_INET,
                                 .sin_port = peer->port,
                                 .sin_addr.s_addr = peer->addr[d->addr++]};
        d->fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
        if (d->fd < 0) {
            d->phase = DIAL_FAILED;
            return;
        }
        d->deadline = picoll_clock_now() + ALIVE_DIAL_S;
        if (connect(d->fd, (struct sockaddr *)&sa, sizeof(sa)) == 0 || errno == EINPROGRESS) {
            d->phase = DIAL_CONNECTING;
        } else {
            dial_fail_address(d);
        }
    }
}

/* The connection is made: send the hello (24 bytes on a new socket: written whole). */
static void dial_hello(alive_dial_t *d, const alive_card_t *peer, const alive_card_t *mine, int me)
{
    int err = 0;
    socklen_t len = sizeof(err);
    alive_hello_t h = {.expect = peer->token, .token = mine->token, .index = me};
    if (getsockopt(d->fd, SOL_SOCKET, SO_ERROR, &err, &len) != 0 || err != 0 ||
        write(d->fd, &h, sizeof(h)) != (ssize_t)sizeof(h)) {
        dial_fail_address(d);
        return;
    }
    d->phase = DIAL_REPLY;
    d->deadline = picoll_clock_now() + ALIVE_REPLY_S;
}

static void dial_reply(alive_dial_t *d, const alive_card_t *peer, int *fd_out)
{
    ssize_t r = read(d->fd, (char *)&d->reply + d->got, sizeof(d->reply) - d->got);
    if (r < 0 && (errno == EAGAIN || errno == EINTR)) {
        return;
    }
    if (r <= 0) {
        dial_fail_address(d);
        return;
    }
    d->got += (size_t)r;
    if (d->got < sizeof(d->reply)) {
        return;
    }
    char confirm = 1;
    if (d->reply != peer->token || write(d->fd, &confirm, 1) != 1) {
        dial_fail_address(d); /* another process at that address */
        return;
    }
    *fd_out = d->fd;
    d->fd = -1;
    d->phase = DIAL_DONE;
}

/* Bytes from an accepted connection: the hello (answered with my token when it names me and a
 * higher partner that needs me), then the confirmation. cards[p], need[p]: partner p's. */
static void answer_read(alive_answer_t *a, picoll_alive_t *al, const alive_card_t *cards,
                        const alive_card_t *mine, const unsigned char *need)
{
    if (a->phase == ANSWER_HELLO) {
        ssize_t r = read(a->fd, (char *)&a->hello + a->got, sizeof(a->hello) - a->got);
        if (r < 0 && (errno == EAGAIN || errno == EINTR)) {
            return;
        }
        if (r > 0) {
            a->got += (size_t)r;
            if (a->got < sizeof(a->hello)) {
                return;
            }
            int i = a->hello.index;
            int p = i > al->me ? picoll_net_partner_index(al->peer, al->np, i) : -1;
            if (a->hello.expect == mine->token && p >= 0 && need[p] && al->fd[p] < 0 &&
                a->hello.token == cards[p].token &&
                write(a->fd, &mine->token, sizeof(mine->token)) == (ssize_t)sizeof(mine->token)) {
                a->phase = ANSWER_CONFIRM;
                return;
            }
        }
    } else if (a->phase == ANSWER_CONFIRM) {
        char c;
        ssize_t r = read(a->fd, &c, 1);
        if (r < 0 && (errno == EAGAIN || errno == EINTR)) {
            return;
        }
        if (r == 1) {
            al->fd[picoll_net_partner_index(al->peer, al->np, a->hello.index)] = a->fd;
            a->phase = ANSWER_CLOSED; /* the fd now belongs to the member's slot */
            a->fd = -1;
            return;
        }
    }
    close(a->fd);
    a->fd = -1;
    a->phase = ANSWER_CLOSED;
}

/* alive_connect's connections in progress: the dials to lower members, the connections accepted
 * from higher ones (at most max_answers), and the poll set over them. */
typedef struct {
    alive_dial_t *dials;
    alive_answer_t *answers;
    struct pollfd *fds;
    int ndial, nanswer, max_answers;
    int polled; /* answers in the poll set (one accepted since is polled from the next round) */
} alive_conns_t;

static void alive_conns_free(alive_conns_t *c)
{
    free(c->dials);
    free(c->answers);
    free(c->fds);
}

/* The connections of a member: a dial to each lower partner on another host (need[p]) that
 * listens. */
static picoll_status_t alive_conns_create(const picoll_alive_t *al, const alive_card_t *cards,
                                          const unsigned char *need, alive_conns_t *out)
{
    int np = al->np;
    alive_conns_t c = {.max_answers = np * 2 + 1};

    c.dials = calloc((size_t)np + 1, sizeof(*c.dials));
    c.answers = calloc((size_t)np * 2 + 1, sizeof(*c.answers));
    c.fds = calloc((size_t)np * 3 + 2, sizeof(*c.fds));
    if (c.dials == NULL || c.answers == NULL || c.fds == NULL) {
        alive_conns_free(&c);
        return PICOLL_ERR_NO_MEMORY;
    }
    for (int p = 0; p < np && al->peer[p] < al->me; p++) {
        if (need[p] && cards[p].port != 0) {
            c.dials[c.ndial++] = (alive_dial_t){.slot = p, .fd = -1, .phase = DIAL_NEXT};
        }
    }
    *out = c;
    return PICOLL_OK;
}

/* Gives up the dials past their deadline and starts those that need their next address; returns
 * how many are still in progress. */
static int alive_dials_advance(alive_conns_t *c, const alive_card_t *cards)
{
    int pending = 0;
    double now = picoll_clock_now();
    for (int d = 0; d < c->ndial; d++) {
        alive_dial_t *x = &c->dials[d];
        if ((x->phase == DIAL_CONNECTING || x->phase == DIAL_REPLY) && now > x->deadline) {
            dial_fail_address(x);
        }
        if (x->phase == DIAL_NEXT) {
            dial_start(x, &cards[x->slot]);
        }
        pending += x->phase != DIAL_DONE && x->phase != DIAL_FAILED;
    }
    return pending;
}

/* What to watch, in c->fds: the listener, the dials in flight, the accepted connections. Returns
 * how many. */
static int alive_poll_set(alive_conns_t *c, int listener)
{
    int k = 0;
    if (listener >= 0) {
        c->fds[k++] = (struct pollfd){.fd = listener, .events = POLLIN};
    }
    for (int d = 0; d < c->ndial; d++) {
        const alive_dial_t *x = &c->dials[d];
        if (x->phase == DIAL_CONNECTING || x->phase == DIAL_REPLY) {
            c->fds[k++] = (struct pollfd){.fd = x->fd,
                                          .events = x->phase == DIAL_CONNECTING ? POLLOUT : POLLIN};
        }
    }
    c->polled = c->nanswer;
    for (int a = 0; a < c->polled; a++) {
        if (c->answers[a].phase != ANSWER_CLOSED) {
            c->fds[k++] = (struct pollfd){.fd = c->answers[a].fd, .events = POLLIN};
        }
    }
    return k;
}

/* Serves what the poll of alive_poll_set's c->fds found: a connection to accept, a dial's
 * connection made or its reply, an accepted connection's bytes. */
static void alive_serve(alive_conns_t *c, picoll_alive_t *al, const alive_card_t *cards,
                        const alive_card_t *mine, const unsigned char *need, int listener)
{
    int k = 0;
    if (listener >= 0) {
        if (c->fds[k].revents & POLLIN) {
            int fd = accept4(listener, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
            if (fd >= 0 && c->nanswer < c->max_answers) {
                c->answers[c->nanswer++] = (alive_answer_t){.fd = fd, .phase = ANSWER_HELLO};
            } else if (fd >= 0) {
                close(fd);
            }
        }
        k++;
    }
    for (int d = 0; d < c->ndial; d++) {
        alive_dial_t *x = &c->dials[d];
        if (x->phase != DIAL_CONNECTING && x->phase != DIAL_REPLY) {
            continue;
        }
        short ev = c->fds[k++].revents;
        if (ev == 0) {
            continue;
        }
        if (x->phase == DIAL_CONNECTING) {
            dial_hello(x, &cards[x->slot], mine, al->me);
        } else {
            dial_reply(x, &cards[x->slot], &al->fd[x->slot]);
        }
    }
    for (int a = 0; a < c->polled; a++) {
        if (c->answers[a].phase == ANSWER_CLOSED) {
            continue;
        }
        if (c->fds[k++].revents != 0) {
            answer_read(&c->answers[a], al, cards, mine, need);
        }
    }
}

/* Every dialler has finished: a confirmation sent before its barrier may still be on the way.
 * Waits for those a little, then drops what is left unconfirmed, and the dials that failed. */
static void alive_conns_settle(alive_conns_t *c, picoll_alive_t *al, const alive_card_t *cards,
                               const alive_card_t *mine, const unsigned char *need)
{
    double until = picoll_clock_now() + ALIVE_REPLY_S;
    for (int a = 0; a < c->nanswer; a++) {
        alive_answer_t *x = &c->answers[a];
        while (x->phase == ANSWER_CONFIRM && picoll_clock_now() < until) {
            struct pollfd p = {.fd = x->fd, .events = POLLIN};
            if (poll(&p, 1, 10) > 0) {
                answer_read(x, al, cards, mine, need);
            }
        }
        if (x->phase != ANSWER_CLOSED) {
            close(x->fd);
        }
    }
    for (int d = 0; d < c->ndial; d++) {
        if (c->dials[d].fd >= 0) {
            close(c->dials[d].fd);
        }
    }
}

/* Connects this member with its partners on another host (need[p]): it dials the lower ones and
 * answers the higher ones, serving both until every member has finished dialling (a barrier
 * over the rail, tested while serving). At most 2 log2 n dials of a member are in flight. */
static void alive_connect(picoll_alive_t *al, MPI_Comm rail_comm, const alive_card_t *cards,
                          const alive_card_t *mine, const unsigned char *need, int listener,
                          double silence)
{
    alive_conns_t c;
    int barrier_started = 0, barrier_done = 0;
    MPI_Request barrier = MPI_REQUEST_NULL;

    if (alive_conns_create(al, cards, need, &c) != PICOLL_OK) {
        /* take part all the same: the others would wait in the barrier */
        alive_barrier(rail_comm);
        return;
    }
    while (!barrier_done) {
        int pending = alive_dials_advance(&c, cards);
        if (pending == 0 && !barrier_started) {
            PMPI_Ibarrier(rail_comm, &barrier);
            barrier_started = 1;
        }
        if (barrier_started) {
            PMPI_Test(&barrier, &barrier_done, MPI_STATUS_IGNORE);
            if (barrier_done) {
                break;
            }
        }
        int k = alive_poll_set(&c, listener);
        if (poll(c.fds, (nfds_t)k, 5) > 0) {
            alive_serve(&c, al, cards, mine, need, listener);
        }
    }
    alive_conns_settle(&c, al, cards, mine, need);
    for (int p = 0; p < al->np; p++) {
        if (al->fd[p] >= 0) {
            alive_keepalive(al->fd[p], silence);
        } else if (need[p]) {
            picoll_debug("no connection to watch rail member %d: it is waited for without a "
                         "liveness check",
                         al->peer[p]);
        }
    }
    alive_conns_free(&c);
}

static uint64_t alive_pidns(void)
{
    struct stat st;
    return stat("/proc/self/ns/pid", &st) == 0 ? (uint64_t)st.st_ino : 0;
}

static picoll_alive_t *alive_alloc(const int *peers, int np, int me)
{
    picoll_alive_t *al = calloc(1, sizeof(*al));
    if (al == NULL) {
        return NULL;
    }
    size_t k = (size_t)np + 1;
    al->np = np;
    al->me = me;
    al->peer = malloc(k * sizeof(int));
    al->fd = malloc(k * sizeof(int));
    al->watch = calloc(k, 1);
    al->pid = calloc(k, sizeof(pid_t));
    al->start = calloc(k, sizeof(uint64_t));
    al->verdict = calloc(k, sizeof(picoll_peer_state_t));
    if (al->peer == NULL || al->fd == NULL || al->watch == NULL || al->pid == NULL ||
        al->start == NULL || al->verdict == NULL) {
        picoll_alive_destroy(al);
        return NULL;
    }
    for (int p = 0; p < np; p++) {
        al->peer[p] = peers[p];
        al->fd[p] = -1;
    }
    return al;
}

/* My card; a listener (*listener) when some partner is on another host. */
static void alive_my_card(alive_card_t *mine, int remote, int np, int *listener)
{
    memset(mine, 0, sizeof(*mine));
    mine->token = alive_token();
    mine->pid = (int32_t)getpid();
    mine->start = picoll_proc_start_time(getpid());
    mine->pidns = alive_pidns();
    alive_read_boot(mine->boot, sizeof(mine->boot));
    *listener = -1;
    if (!remote) {
        return;
    }
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_ANY)};
    socklen_t len = sizeof(sa);
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd >= 0 && (bind(fd, (struct sockaddr *)&sa, sizeof(sa)) != 0 || listen(fd, np) != 0 ||
                    getsockname(fd, (struct sockaddr *)&sa, &len) != 0)) {
        close(fd);
        fd = -1;
    }
    if (fd >= 0) {
        mine->port = sa.sin_port;
        mine->naddr = (uint16_t)alive_addresses(mine->addr, ALIVE_MAX_ADDRS);
    }
    *listener = fd;
}

picoll_alive_t *picoll_alive_create(MPI_Comm rail_comm, const int *peers,
                                    const char (*hosts)[PICOLL_ALIVE_HOST_MAX], int np,
                                    const char *my_host, int me, double silence)
{
    picoll_alive_t *al = alive_alloc(peers, np, me);
    alive_card_t mine, *cards = calloc((size_t)np + 1, sizeof(*cards));
    unsigned char *need = calloc((size_t)np + 1, 1);
    int listener = -1, remote = 0;
    int ok = al != NULL && cards != NULL && need != NULL;

    for (int p = 0; ok && p < np; p++) {
        need[p] = strncmp(hosts[p], my_host, PICOLL_ALIVE_HOST_MAX) != 0;
        remote |= need[p];
    }
    alive_my_card(&mine, ok && remote, np, &listener);
    if (cards == NULL) {
        /* cannot take part in the exchange: the others would wait in it */
        picoll_fatal("out of memory setting up the network step's liveness check: aborting the "
                     "job");
    }
    picoll_net_partner_exchange(rail_comm, peers, np, &mine, cards, sizeof(mine), PICOLL_ALIVE_TAG);
    /* the dials and their barrier: every member, even one that cannot watch anything */
    if (ok) {
        alive_connect(al, rail_comm, cards, &mine, need, listener, silence);
    } else {
        alive_barrier(rail_comm);
    }
    if (listener >= 0) {
        close(listener);
    }
    for (int p = 0; ok && p < np; p++) {
        /* same boot and pid namespace: the pid names the process; watched if seen now */
        if (mine.pidns != 0 && cards[p].pidns == mine.pidns && mine.boot[0] != '\0' &&
            memcmp(cards[p].boot, mine.boot, sizeof(mine.boot)) == 0 &&
            picoll_proc_watchable((pid_t)cards[p].pid, cards[p].start)) {
            al->watch[p] = 1;
            al->pid[p] = (pid_t)cards[p].pid;
            al->start[p] = cards[p].start;
        }
    }
    free(cards);
    free(need);
    if (!ok) {
        picoll_alive_destroy(al);
        return NULL;
    }
    return al;
}

void picoll_alive_destroy(picoll_alive_t *al)
{
    if (al == NULL) {
        return;
    }
    for (int p = 0; al->fd != NULL && p < al->np; p++) {
        if (al->fd[p] >= 0) {
            close(al->fd[p]);
        }
    }
    free(al->peer);
    free(al->fd);
    free(al->watch);
    free(al->pid);
    free(al->start);
    free(al->verdict);
    free(al);
}

int picoll_alive_connections(const picoll_alive_t *al)
{
    int k = 0;
    for (int p = 0; al != NULL && p < al->np; p++) {
        k += al->fd[p] >= 0;
    }
    return k;
}

/* The connection to partner slot: open, closed by its process (gone) or dropped by the kernel
 * for lack of answers (lost). */
static picoll_peer_state_t alive_connection(picoll_alive_t *al, int slot)
{
    int fd = al->fd[slot];
    struct pollfd p = {.fd = fd, .events = POLLIN | POLLRDHUP};
    if (poll(&p, 1, 0) <= 0 || p.revents == 0) {
        return PICOLL_PEER_ALIVE;
    }
    int err = 0;
    if (p.revents & POLLERR) {
        socklen_t len = sizeof(err);
        getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len);
    } else {
        char c;
        ssize_t r = recv(fd, &c, 1, MSG_PEEK | MSG_DONTWAIT);
        if (r > 0 || (r < 0 && (errno == EAGAIN || errno == EINTR))) {
            return PICOLL_PEER_ALIVE; /* never sent to; nothing to conclude */
        }
        err = r == 0 ? ECONNRESET : errno;
    }
    switch (err) {
    case ETIMEDOUT:
    case EHOSTUNREACH:
    case ENETUNREACH:
    case EHOSTDOWN:
    case ENETDOWN: return PICOLL_PEER_LOST;
    case 0: return PICOLL_PEER_ALIVE;
    default: return PICOLL_PEER_GONE; /* closed or reset: its process ended */
    }
}

picoll_peer_state_t picoll_alive_state(picoll_alive_t *al, int i)
{
    if (al != NULL && i == al->me) {
        return PICOLL_PEER_ALIVE;
    }
    int p = al != NULL ? picoll_net_partner_index(al->peer, al->np, i) : -1;
    if (p < 0) {
        return PICOLL_PEER_UNKNOWN;
    }
    if (al->verdict[p] != PICOLL_PEER_ALIVE) {
        return al->verdict[p];
    }
    int known = 0;
    if (al->watch[p]) {
        known = 1;
        if (picoll_proc_state(al->pid[p], al->start[p]) == PICOLL_PROC_GONE) {
            al->verdict[p] = PICOLL_PEER_GONE;
            return PICOLL_PEER_GONE;
        }
    }
    if (al->fd[p] >= 0) {
        known = 1;
        picoll_peer_state_t s = alive_connection(al, p);
        if (s == PICOLL_PEER_GONE && al->watch[p]) {
            s = PICOLL_PEER_ALIVE; /* its process is there: it closed the connection itself */
        }
        if (s != PICOLL_PEER_ALIVE) {
            al->verdict[p] = s;
            return s;
        }
    }
    return known ? PICOLL_PEER_ALIVE : PICOLL_PEER_UNKNOWN;
}

const char *picoll_alive_how(const picoll_alive_t *al, int i)
{
    int p = al != NULL ? picoll_net_partner_index(al->peer, al->np, i) : -1;
    if (p < 0) {
        return "none";
    }
    return al->fd[p] >= 0 ? "connection" : al->watch[p] ? "process" : "none";
}
