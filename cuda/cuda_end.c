/* The end of a blocking device call: the kernel's completion polled in the host-mapped status, a
 * kernel that gave up waiting for a late peer resumed once the host has waited for that peer
 * without the GPU, a hot-path call a peer said no to vetoed; and the same wait for late peers,
 * looked at from the host, of the calls enqueued on an application's stream
 * (picoll_cuda_stream_watch). No driver call but the relaunches (cuda_launch.c). */
#include "build-config.h"
#include "cuda/cuda_coll_int.h"
#include "util/fatal.h"
#include "util/log.h"
#include "util/proc.h"
#include "util/wait.h"

#include <stdlib.h>
#include <string.h>

/* A call whose kernel gave up waiting for peers: how long it has waited, and what for. */
typedef struct {
    double start;  /* the first give-up of the call; 0 before */
    double expire; /* seconds from start of the next "still waiting" (timeout, 2x, ...) */
    double look;   /* when the peers' processes are next looked at */
    double pause;  /* before the next relaunch */
    size_t chunk;  /* the chunk that gave up last, and its blocks that had finished */
    int finished;
    unsigned char missing[PICOLL_CUDA_MAX_LOCAL]; /* the ranks the last give-up waited for */
} coll_late_t;

/* The host's wait for a late peer, between relaunches: the peers given up on are looked at once a
 * second (a gone process ends the job now, naming it, as the host executor's barrier does), and
 * past PICOLL_TIMEOUT, 2x, 4x, ... the ranks are named: still waiting, or with
 * PICOLL_TIMEOUT_ACTION=abort the end of the job. */
static void coll_late_tick(picoll_cuda_ws_t *ws, const char *coll, coll_late_t *late, double now)
{
    unsigned char missing[PICOLL_CUDA_MAX_LOCAL];
    /* PICOLL_TIMEOUT=0: no deadline, as in picoll_wait() */
    int ngone = 0, nunwatched = 0;
    int expired = ws->timeout > 0.0 && now - late->start >= late->expire;

    if (!expired && now < late->look) {
        return;
    }
    late->look = now + 1.0;
    /* the ranks whose launch had not started, where there are any: a peer that runs may only be
     * waiting for them itself */
    int not_started = 0;
    for (int r = 0; r < ws->nlocal; r++) {
        not_started |= late->missing[r] == 2;
    }
    for (int r = 0; r < ws->nlocal; r++) {
        missing[r] = not_started ? late->missing[r] == 2 : late->missing[r] != 0;
        if (!missing[r]) {
            continue;
        }
        if (!ws->watch[r]) {
            nunwatched++;
        } else if (picoll_proc_state((pid_t)ws->pid[r], ws->pstart[r]) == PICOLL_PROC_GONE) {
            missing[r] = 2;
            ngone++;
        }
    }
    if (expired) {
        late->expire *= 2.0;
    }
    picoll_wait_verdict(coll, ws->comm_size, ws->comm_ranks, missing, ws->nlocal, ngone, nunwatched,
                        expired, now - late->start, ws->timeout);
}

/* Some block of the attempt that began with chunk *from (launches from seq *floor on) gave up. Waits
 * until every launch of the attempt ended (the last one's blocks each finished or quit: stream
 * order, so all before it too), then waits for the peers without the GPU and relaunches the chunk
 * that gave up (resumed: its finished blocks return, the others go on from their last arrival)
 * and every chunk after it. No driver call but the launches: nothing that could wait behind a
 * kernel of this rank. Updates *from, *floor and *blocks (of the attempt's last launch). */
static int coll_resume(picoll_cuda_ws_t *ws, coll_call_t *c, coll_late_t *late, size_t *from,
                       uint64_t *floor, int *blocks)
{
    volatile picoll_cuda_status_t *st = ws->status;
    uint64_t last = c->first + (uint64_t)c->nchunks * (uint64_t)c->arrivals - 1;
    uint64_t last_seq = ws->seq, mask = 0;
    picoll_wait_t w;
    int finished = 0;

    picoll_wait_init(&w, 0.0, picoll_spin_max());
    for (;;) {
        int b = 0;
        while (b < *blocks && (st->done[b] >= last || st->quit[b] >= last_seq)) {
            b++;
        }
        if (b == *blocks) {
            break;
        }
        picoll_wait(&w, 0);
    }
    __atomic_thread_fence(__ATOMIC_ACQUIRE);
    if (picoll_cuda_call_said_no(ws, c)) {
        return 1;
    }
    size_t k = *from + (size_t)(st->halted - *floor);
    int nb = picoll_cuda_call_chunk(c, k);
    uint64_t k_last = c->p.epoch + (uint64_t)c->arrivals - 1;
    for (int b = 0; b < nb; b++) {
        if (st->done[b] >= k_last) {
            mask |= 1ull << b;
            finished++;
        }
    }
    for (int r = 0; r < ws->nlocal; r++) {
        late->missing[r] = st->missing[r];
        st->missing[r] = 0;
    }
    st->halted = 0;

    /* a relaunch soon after progress, else a pause that doubles up to 20 spins (at most 1 s): a
     * late peer costs this GPU one spin in 21 at most (its SMs are free the rest of the time), and
     * the call at most one pause more than the peer's lateness (0.2 s at the default spin) */
    double now = picoll_clock_now();
    double shortest = ws->spin / 4.0, longest = 20.0 * ws->spin < 1.0 ? 20.0 * ws->spin : 1.0;
    longest = longest > shortest ? longest : shortest;
    if (late->start == 0.0) {
        late->start = now;
        late->expire = ws->timeout;
        late->look = now + 1.0;
        late->pause = shortest;
    } else if (k > late->chunk || finished > late->finished) {
        late->pause = shortest;
    } else {
        late->pause = late->pause * 2.0 < longest ? late->pause * 2.0 : longest;
    }
    late->chunk = k;
    late->finished = finished;
    picoll_debug("%s on the device: chunk %zu of %zu gave up waiting (%d of %d blocks finished): "
                 "relaunch in %.3f s",
                 c->coll, k, c->nchunks, finished, nb, late->pause);
    double until = now + late->pause;
    picoll_wait_init(&w, 0.0, picoll_spin_max());
    while (now < until) {
        if (picoll_cuda_call_said_no(ws, c)) {
            return 1;
        }
        coll_late_tick(ws, c->coll, late, now);
        if (picoll_wait(&w, 0) != PICOLL_WAIT_POLL) {
            now = w.now;
        }
    }
    if (picoll_cuda_call_said_no(ws, c)) {
        return 1;
    }
    coll_late_tick(ws, c->coll, late, now);

    *from = k;
    *floor = ws->seq + 1;
    *blocks = picoll_cuda_call_launch(ws, c, k, *floor, 1, mask);
    for (size_t i = k + 1; i < c->nchunks; i++) {
        *blocks = picoll_cuda_call_launch(ws, c, i, *floor, 0, 0);
    }
    return 0;
}

/* A peer said no to this hot-path call: stop this rank's kernels (status->veto, which their waits
 * read), wait until the last launch's blocks all quit (stream order: every launch before it
 * ended too), and leave the workspace where every rank's is (picoll_cuda_hot_skip). No block
 * wrote the receive buffer: each waits, before it writes it, for the rank that said no. */
static void coll_veto(picoll_cuda_ws_t *ws, coll_call_t *c, int blocks)
{
    volatile picoll_cuda_status_t *st = ws->status;
    uint64_t last = c->first + (uint64_t)c->nchunks * (uint64_t)c->arrivals - 1;
    picoll_wait_t w;

    __atomic_store_n(&st->veto, c->p.veto_at, __ATOMIC_RELEASE);
    picoll_wait_init(&w, 0.0, picoll_spin_max());
    for (;;) {
        int b = 0;
        while (b < blocks && st->quit[b] >= ws->seq) {
            b++;
        }
        if (b == blocks) {
            break;
        }
        if (st->done[b] >= last) {
            picoll_fatal("%s on the device: finished although a rank said no", c->coll);
        }
        picoll_wait(&w, 0);
    }
    __atomic_thread_fence(__ATOMIC_ACQUIRE);
    for (int r = 0; r < ws->nlocal; r++) {
        st->missing[r] = 0;
    }
    st->halted = 0;
    ws->epoch = c->first - 1 + COLL_VETO_EPOCHS;
    picoll_debug("%s on the device: a rank said no: every rank falls back", c->coll);
}

/* Wait for the call's last launch by polling the host-mapped status: no driver call. A launch of
 * this rank that does not start (the GPU still runs work queued before the call) is waited for
 * with a warning; a kernel that gave up waiting for a peer is resumed (coll_resume). */
picoll_status_t picoll_cuda_call_end(picoll_cuda_ws_t *ws, coll_call_t *c, uint64_t floor,
                                     int blocks)
{
    volatile picoll_cuda_status_t *st = ws->status;
    uint64_t last = c->first + (uint64_t)c->nchunks * (uint64_t)c->arrivals - 1;
    double began = 0.0, asked = picoll_clock_now();
    int warned = 0, vetoed = 0;
    size_t from = 0;
    coll_late_t late;
    picoll_wait_t w;

    memset(&late, 0, sizeof(late));
    /* no deadline of the wait's own: the clock readings below decide */
    picoll_wait_init(&w, 0.0, picoll_spin_max());
    for (;;) {
        int b = 0;
        while (b < blocks && st->done[b] >= last) {
            b++;
        }
        if (b == blocks) {
            break;
        }
        if (st->halted != 0) {
            if (coll_resume(ws, c, &late, &from, &floor, &blocks)) {
                vetoed = 1;
                break;
            }
            continue;
        }
        if (picoll_cuda_call_said_no(ws, c)) {
            vetoed = 1;
            break;
        }
        if (picoll_wait(&w, 0) == PICOLL_WAIT_POLL) {
            continue;
        }
        double now = w.now;
        if (late.start != 0.0) {
            /* a relaunch runs: the peers are still looked at, the lines still come on time */
            coll_late_tick(ws, c->coll, &late, now);
        }
        if (began == 0.0 && st->started[0] >= c->first) {
            began = now;
        }
        if (began == 0.0 && !warned && now - asked > ws->timeout) {
            picoll_warn("%s on the device: this rank's kernel has not started after %.0f s: its "
                        "GPU still runs work queued before the call",
                        c->coll, now - asked);
            warned = 1;
        }
    }
    if (vetoed) {
        coll_veto(ws, c, blocks);
    } else if (late.start != 0.0) {
        picoll_debug("%s on the device: done after waiting %.1f s for late peers", c->coll,
                     picoll_clock_now() - late.start);
    }
    picoll_cuda_leave(&c->prev);
    return vetoed ? PICOLL_RETRY : PICOLL_OK;
}

/* One look at a stream workspace: a launch that runs (block 0 started, not finished) and whose
 * blocks name peers they have waited for past PICOLL_CUDA_SPIN is a late call, treated as the
 * blocking call's (coll_late_tick): the peers' processes looked at once a second, a gone one ends
 * the job naming it, past PICOLL_TIMEOUT the ranks waited for are named. */
static void watch_one(picoll_cuda_ws_t *ws)
{
    volatile picoll_cuda_status_t *st = ws->status;
    uint64_t started = st->started[0], done = st->done[0];
    coll_late_t *late = ws->watch_late;
    int named = 0;

    for (int r = 0; r < ws->nlocal; r++) {
        named |= st->missing[r] != 0;
    }
    if (done >= started || !named) {
        if (late != NULL && late->start != 0.0 && (done >= started || started != ws->watch_first)) {
            late->start = 0.0; /* it went on */
        }
        return;
    }
    if (late == NULL && (late = ws->watch_late = calloc(1, sizeof(*late))) == NULL) {
        return;
    }
    double now = picoll_clock_now();
    if (late->start == 0.0 || started != ws->watch_first) {
        memset(late, 0, sizeof(*late));
        late->start = now;
        late->expire = ws->timeout;
        late->look = now;
        ws->watch_first = started;
    }
    /* the kernel names them again every spin while it waits: a peer that arrived drops out */
    for (int r = 0; r < ws->nlocal; r++) {
        late->missing[r] = st->missing[r];
        st->missing[r] = 0;
    }
    coll_late_tick(ws, "a collective enqueued on a stream", late, now);
}

void picoll_cuda_stream_watch(void)
{
    picoll_cuda_ws_each_stream(watch_one);
}
