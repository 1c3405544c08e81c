/* The clock, and the one way picoll waits for a peer: spin, then yield the CPU, run the progress
 * hook that a higher layer registered (the network's rails), and read the clock against a
 * deadline; a wait in which nothing has moved for PICOLL_WAIT_NAP seconds (a late peer; default
 * 0.05) sleeps PICOLL_WAIT_NAP_NS between polls instead of yielding, and runs both progress hooks and
 * reads the clock at every poll, so that the ranks that wait for a late one leave the CPUs to it
 * and to the rest of the machine while what they must move still moves (the wake-up is then that
 * much later: at most about 0.3% of such a wait). Every wait of every layer (the host executor's barriers, the network step, the device
 * executor's end of a call) is a loop around picoll_wait():
 *
 *     picoll_wait_t w;
 *     picoll_wait_init(&w, timeout, picoll_spin_max());
 *     while (!done()) {
 *         if (picoll_wait(&w, moved) == PICOLL_WAIT_EXPIRED) {
 *             ... name the peers that did not come, end the job (util/fatal.h)
 *         }
 *     }
 */
#ifndef PICOLL_WAIT_H
#define PICOLL_WAIT_H

#include <sched.h>
#include <time.h>

/* Seconds on CLOCK_MONOTONIC. */
static inline double picoll_clock_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static inline void picoll_cpu_relax(void)
{
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#elif defined(__aarch64__)
    __asm__ __volatile__("yield");
#endif
}

/* More ranks on this machine than CPUs they may run on (set by the core at a communicator's
 * set-up): spinning only delays the peer waited for, so waits yield almost at once. */
extern int picoll_wait_oversubscribed;

/* Polls of a wait before it yields the CPU: spinning helps only when the peer has a CPU too. */
static inline unsigned picoll_spin_max(void)
{
    return picoll_wait_oversubscribed ? 16 : 4096;
}

/* The progress hook: run every 64 polls of every wait, so that a rank waiting in one place still
 * moves the bytes its peers wait for elsewhere (a rail's worker). One hook per process, set by the
 * layer that owns what needs progress; NULL: none. */
void picoll_wait_set_progress(void (*progress)(void));
/* The MPI's progress hook: run at each clock reading of a wait but its first (every 256 polls
 * from the 512th on: a short wait never pays for it), so that a rank waiting in
 * picoll still moves the bytes of the MPI's own transfers that a peer waits for before it can
 * join (a nonblocking send's rendezvous, which plain MPI's collective would have moved along).
 * Set by the layer that calls the MPI; NULL: none. */
void picoll_wait_set_mpi_progress(void (*progress)(void));

typedef struct {
    unsigned polls; /* polls so far */
    unsigned idle;  /* polls since the awaited thing last moved */
    unsigned spin;  /* idle polls before each further one yields the CPU */
    double timeout; /* seconds from the first clock reading; <= 0: no deadline */
    double start;   /* the first clock reading, 0 before it */
    double now;     /* the latest clock reading */
    double next;    /* when the wait next expires: start + timeout, then 2x, 4x, ... */
    double quiet;   /* the clock reading since which nothing moved (as far as polls tell) */
    int nap;        /* nothing moved for PICOLL_WAIT_NAP: polls sleep instead of yielding */
} picoll_wait_t;

/* The sleep of a poll of a wait in which nothing moved for PICOLL_WAIT_NAP seconds. */
#define PICOLL_WAIT_NAP_NS 100000L

enum {
    PICOLL_WAIT_POLL = 0,   /* nothing to do but poll again */
    PICOLL_WAIT_TICK = 1,   /* the clock was read: w->now, w->start are current */
    PICOLL_WAIT_EXPIRED = 2 /* the clock was read and the deadline has passed: once at timeout,
                               then again at 2x, 4x, ... the timeout (a wait that goes on says
                               so at each) */
};

static inline void picoll_wait_init(picoll_wait_t *w, double timeout, unsigned spin)
{
    w->polls = 0;
    w->idle = 0;
    w->spin = spin;
    w->timeout = timeout;
    w->start = 0.0;
    w->now = 0.0;
    w->next = 0.0;
    w->quiet = 0.0;
    w->nap = 0;
}

int picoll_wait_slow(picoll_wait_t *w);
/* One sleep of PICOLL_WAIT_NAP_NS. */
void picoll_wait_nap(void);

/* One poll that found the wait not over; moved: something progressed since the last one (the
 * idle count starts again). Returns PICOLL_WAIT_POLL, _TICK or _EXPIRED. */
static inline int picoll_wait(picoll_wait_t *w, int moved)
{
    unsigned n = ++w->polls;
    if (moved) {
        w->idle = 0;
        w->nap = 0;
    }
    if (++w->idle <= w->spin) {
        picoll_cpu_relax();
    } else if (w->nap) {
        picoll_wait_nap();
    } else {
        sched_yield();
    }
    if ((n & 63) != 0 && !w->nap) {
        return PICOLL_WAIT_POLL;
    }
    return picoll_wait_slow(w);
}

#endif
