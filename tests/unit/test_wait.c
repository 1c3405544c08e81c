/* util/wait: a wait in which nothing moves for PICOLL_WAIT_NAP seconds sleeps between its polls
 * (a late peer gets the CPUs), one in which something keeps moving never does, and 0 turns the
 * sleep off. Counts polls and the waiting thread's CPU time, not the wall clock. */
#include "build-config.h" /* _GNU_SOURCE, as in src/ */
#include "check.h"
#include "util/config.h"
#include "util/wait.h"

#include <pthread.h>
#include <stdatomic.h>
#include <time.h>

static atomic_int done;
static atomic_uint polled;    /* the waiter's polls so far */
static atomic_llong first_ns; /* the waiter's first clock reading (its quiet's start), 0 before */

/* Late by `arg` seconds, and until the waiter has read its clock (once each 256 polls) after 50 ms
 * of quiet: 512 more polls from 50 ms after its first reading, and 2048 in all. On a loaded
 * machine the waiter can be kept off the CPU for most of the lateness and then run its polls in a
 * burst, whose clock readings span less than PICOLL_WAIT_NAP (unit.wait failed so twice in
 * clean-clone runs, 2026-11-29): the lateness it sees is what it read, not the peer's sleep. */
static void *late_peer(void *arg)
{
    struct timespec t = {0, (long)(*(double *)arg * 1e9)}, tick = {0, 1000000};
    nanosleep(&t, NULL);
    unsigned from = 0;
    for (;;) {
        long long first = atomic_load(&first_ns);
        unsigned n = atomic_load(&polled);
        if (from == 0 && first != 0 && picoll_clock_now() * 1e9 >= (double)first + 50e6) {
            from = n + 512;
        }
        if (from != 0 && n >= from && n >= 2048) {
            break;
        }
        nanosleep(&tick, NULL);
    }
    atomic_store(&done, 1);
    return NULL;
}

static double thread_cpu(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* Waits for a peer late by `late` seconds; moved_every: polls between movements (0: none).
 * Returns the polls that slept; *cpu: the waiting thread's CPU seconds; *napped: whether one did. */
static unsigned wait_for_late(double late, unsigned moved_every, double *cpu, int *napped)
{
    pthread_t t;
    atomic_store(&done, 0);
    atomic_store(&polled, 0);
    atomic_store(&first_ns, 0);
    pthread_create(&t, NULL, late_peer, &late);
    double c0 = thread_cpu();
    picoll_wait_t w;
    picoll_wait_init(&w, 0.0, 16);
    *napped = 0;
    unsigned slept = 0;
    while (!atomic_load(&done)) {
        int moved = moved_every != 0 && w.polls % moved_every == 0;
        picoll_wait(&w, moved);
        if (w.start != 0.0 && atomic_load(&first_ns) == 0) {
            atomic_store(&first_ns, (long long)(w.start * 1e9));
        }
        atomic_store(&polled, w.polls);
        *napped |= w.nap;
        slept += w.nap && w.idle > w.spin;
    }
    *cpu = thread_cpu() - c0;
    pthread_join(t, NULL);
    return slept;
}

int main(void)
{
    double cpu;
    int napped;

    /* a peer 0.4 s late, PICOLL_WAIT_NAP 0.02: polls of at least 0.1 ms each from about
     * 0.02 s on, so under 4000 of them and a few % of a CPU (yielding polls: a few us each,
     * the whole CPU) */
    picoll_cfg.wait_nap = 0.02;
    unsigned polls = wait_for_late(0.4, 0, &cpu, &napped);
    CHECK(napped, "a wait with nothing moving for PICOLL_WAIT_NAP sleeps");
    CHECK(polls < 5000, "%u sleeping polls in under 0.4 s", polls);
    CHECK(cpu < 0.2, "%.3f s of CPU for a 0.4 s wait", cpu);

    /* something moves every 100 polls: never asleep, however long */
    polls = wait_for_late(0.2, 100, &cpu, &napped);
    CHECK(!napped, "a wait in which something moves never sleeps (%u polls)", polls);

    /* 0: never sleeps */
    picoll_cfg.wait_nap = 0.0;
    polls = wait_for_late(0.2, 0, &cpu, &napped);
    CHECK(!napped, "PICOLL_WAIT_NAP=0 never sleeps (%u polls)", polls);
    return check_summary("test_wait");
}
