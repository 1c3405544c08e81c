#include "build-config.h"
#include "util/wait.h"

#include <stdatomic.h>
#include <stddef.h>

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

int picoll_wait_slow(picoll_wait_t *w)
{
    void (*progress)(void) = atomic_load_explicit(&wait_progress, memory_order_acquire);
    if (progress != NULL) {
        progress();
    }
    if ((w->polls & 255) != 0) {
        return PICOLL_WAIT_POLL;
    }
    w->now = picoll_clock_now();
    if (w->start == 0.0) {
        w->start = w->now;
        w->next = w->start + w->timeout;
        return PICOLL_WAIT_TICK;
    }
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
