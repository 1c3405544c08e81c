#include "build-config.h"
#include "util/wait.h"

#include "util/config.h"

#include <stdatomic.h>
#include <stddef.h>
#include <time.h>

int picoll_wait_oversubscribed;

static void (*_Atomic wait_progress)(void);
static void (*_Atomic wait_mpi_progress)(void);

void picoll_wait_set_progress(void (*progress)(void))
{
    atomic_store_explicit(&wait_progress, progress, memory_order_release);
}

void picoll_wait_set_mpi_progress(void (*progress)(void))
{
    atomic_store_explicit(&wait_mpi_progress, progress, memory_order_release);
}

void picoll_wait_nap(void)
{
    struct timespec nap = {0, PICOLL_WAIT_NAP_NS};
    nanosleep(&nap, NULL);
}

int picoll_wait_slow(picoll_wait_t *w)
{
    void (*progress)(void) = atomic_load_explicit(&wait_progress, memory_order_acquire);
    if (progress != NULL) {
        progress();
    }
    if ((w->polls & 255) != 0 && !w->nap) {
        return PICOLL_WAIT_POLL;
    }
    w->now = picoll_clock_now();
    if (w->start == 0.0) {
        w->start = w->now;
        w->quiet = w->now;
        w->next = w->start + w->timeout;
        return PICOLL_WAIT_TICK;
    }
    /* a poll of the last 256 saw movement: the quiet starts again */
    if (w->idle <= 256) {
        w->quiet = w->now;
    }
    w->nap = picoll_cfg.wait_nap > 0.0 && w->now - w->quiet >= picoll_cfg.wait_nap;
    progress = atomic_load_explicit(&wait_mpi_progress, memory_order_acquire);
    if (progress != NULL) {
        progress();
    }
    if (w->timeout <= 0.0 || w->now <= w->next) {
        return PICOLL_WAIT_TICK;
    }
    w->next = w->start + 2.0 * (w->next - w->start);
    return PICOLL_WAIT_EXPIRED;
}
