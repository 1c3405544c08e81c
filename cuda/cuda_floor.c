/* The device's floor (picoll_device_floor, osu-bench --floor): what a launch, a queue of launches
 * and a copy cost on this process's GPU, with the launch shape of picoll's own calls, so that a
 * benchmark prints each call's time as a ratio to what the hardware allows in the same run; and
 * the barrier floor (picoll_device_barrier_floor): the cheapest kernel that crosses processes, a
 * flag exchange over a communicator's device workspace, blocking, queued and graph-launched. */
#include "build-config.h"
#include "cuda/cuda_ws.h"
#include "util/wait.h"

#include <stdio.h>
#include <string.h>

/* The floor kernel of the calling thread's current context (in the module the workspaces load,
 * picoll_cuda_floor_function), and what a launch of it passes. */
typedef struct {
    picoll_cu_function_t fn;
    int threads;                /* per block: as picoll's calls launch (cuda_ws.c) */
    picoll_cuda_kparams_t p;    /* all zero but status and seq: the generic kernel's block */
    picoll_cuda_status_t *host; /* host-mapped status (PICOLL_FLOOR_LAUNCH) */
} floor_t;

static picoll_status_t floor_check(int rc, const char *call, char *why, size_t len)
{
    if (rc == 0) {
        return PICOLL_OK;
    }
    const char *text = NULL;
    if (picoll_cu.get_error_string == NULL || picoll_cu.get_error_string(rc, &text) != 0) {
        text = NULL;
    }
    snprintf(why, len, "%s: CUDA error %d (%s)", call, rc, text != NULL ? text : "unknown");
    return PICOLL_ERR_CUDA;
}

/* The floor kernel which (PICOLL_CUDA_FLOOR_FN_*) of ctx and its threads; mapped: a host-mapped
 * status for it. */
static picoll_status_t floor_open(floor_t *f, picoll_cu_context_t ctx, int which, int mapped,
                                  char *why, size_t len)
{
    memset(f, 0, sizeof(*f));
    picoll_status_t st = picoll_cuda_floor_function(ctx, which, &f->fn);
    if (st != PICOLL_OK) {
        snprintf(why, len, "no %s in picoll's kernel module (%s)",
                 which == PICOLL_CUDA_FLOOR_FN_BARRIER ? PICOLL_CUDA_BARRIER_NAME
                                                       : PICOLL_CUDA_FLOOR_NAME,
                 picoll_status_string(st));
    }
    int fn_threads = 0;
    if (st == PICOLL_OK) {
        st = floor_check(picoll_cu.func_get_attribute(
                             &fn_threads, PICOLL_CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK, f->fn),
                         "cuFuncGetAttribute", why, len);
        f->threads = fn_threads < PICOLL_CUDA_THREADS ? fn_threads : PICOLL_CUDA_THREADS;
    }
    if (st == PICOLL_OK && mapped) {
        void *h = NULL;
        picoll_cu_deviceptr_t d = 0;
        st = floor_check(picoll_cu.mem_host_alloc(&h, sizeof(picoll_cuda_status_t),
                                                  PICOLL_CU_MEMHOSTALLOC_DEVICEMAP |
                                                      PICOLL_CU_MEMHOSTALLOC_PORTABLE),
                         "cuMemHostAlloc", why, len);
        if (st == PICOLL_OK) {
            f->host = h;
            memset(h, 0, sizeof(picoll_cuda_status_t));
            st = floor_check(picoll_cu.mem_host_get_device_pointer(&d, h, 0),
                             "cuMemHostGetDevicePointer", why, len);
            f->p.status = (picoll_cuda_status_t *)(uintptr_t)d;
        }
    }
    return st;
}

static void floor_close(floor_t *f)
{
    if (f->host != NULL) {
        picoll_cu.mem_free_host(f->host);
    }
}

static int floor_launch(floor_t *f, picoll_cu_stream_t stream)
{
    void *params[] = {&f->p};
    return picoll_cu.launch_kernel(f->fn, 1, 1, 1, (unsigned)f->threads, 1, 1, 0, stream, params,
                                   NULL);
}

/* PICOLL_OK where no launch of the barrier on ws gave up; else the ranks it waited for in why. */
static picoll_status_t barrier_check(const floor_t *f, const picoll_cuda_ws_t *ws, char *why,
                                     size_t len);

/* n launches (a tenth more first, untimed) on the per-thread stream, each waited for by polling
 * its done word with picoll's one wait loop, as a blocking call's end waits (spinning, then
 * yielding the CPU where more ranks than CPUs share the machine); ws: the barrier's workspace,
 * whose launch that gave up ends the wait, NULL for the empty kernel. */
static picoll_status_t floor_blocking(floor_t *f, const picoll_cuda_ws_t *ws, int n,
                                      double *seconds, char *why, size_t len)
{
    double t0 = 0.0;
    for (int i = -n / 10 - 1; i < n; i++) {
        if (i == 0) {
            t0 = picoll_clock_now();
        }
        f->p.seq++;
        picoll_status_t st =
            floor_check(floor_launch(f, PICOLL_CU_STREAM_PER_THREAD), "cuLaunchKernel", why, len);
        if (st != PICOLL_OK) {
            return st;
        }
        picoll_wait_t wait;
        picoll_wait_init(&wait, (double)f->p.spin_ns / 1e9 + 10.0, picoll_spin_max());
        while (__atomic_load_n(&f->host->done[0], __ATOMIC_ACQUIRE) < f->p.seq) {
            if (ws != NULL && __atomic_load_n(&f->host->quit[0], __ATOMIC_ACQUIRE) != 0) {
                return barrier_check(f, ws, why, len);
            }
            if (picoll_wait(&wait, 0) == PICOLL_WAIT_EXPIRED) {
                snprintf(why, len, "the %s kernel did not end in time",
                         ws != NULL ? "barrier" : "empty");
                return PICOLL_ERR_TIMEOUT;
            }
        }
    }
    *seconds = (picoll_clock_now() - t0) / n;
    /* the last launch ended, not only told its end: the next floor may queue on another stream,
     * and a barrier's first launch reads the epoch word this one stored */
    return floor_check(picoll_cu.stream_synchronize(PICOLL_CU_STREAM_PER_THREAD),
                       "cuStreamSynchronize", why, len);
}

/* n launches queued on stream, then one synchronisation, as enqueued calls run. */
static picoll_status_t floor_queue(floor_t *f, picoll_cu_stream_t stream, int n, double *seconds,
                                   char *why, size_t len)
{
    double t0 = 0.0;
    for (int round = 0; round < 2; round++) { /* the first untimed */
        t0 = picoll_clock_now();
        for (int i = 0; i < n; i++) {
            picoll_status_t st = floor_check(floor_launch(f, stream), "cuLaunchKernel", why, len);
            if (st != PICOLL_OK) {
                return st;
            }
        }
        picoll_status_t st =
            floor_check(picoll_cu.stream_synchronize(stream), "cuStreamSynchronize", why, len);
        if (st != PICOLL_OK) {
            return st;
        }
    }
    *seconds = (picoll_clock_now() - t0) / n;
    return PICOLL_OK;
}

/* n device-to-device copies of bytes queued on stream, then one synchronisation. */
static picoll_status_t floor_copy(picoll_cu_stream_t stream, int n, size_t bytes, double *seconds,
                                  char *why, size_t len)
{
    picoll_cu_deviceptr_t a = 0, b = 0;
    picoll_status_t st = floor_check(picoll_cu.mem_alloc(&a, bytes), "cuMemAlloc", why, len);
    if (st == PICOLL_OK) {
        st = floor_check(picoll_cu.mem_alloc(&b, bytes), "cuMemAlloc", why, len);
    }
    double t0 = 0.0;
    for (int round = 0; round < 2 && st == PICOLL_OK; round++) { /* the first untimed */
        t0 = picoll_clock_now();
        for (int i = 0; i < n && st == PICOLL_OK; i++) {
            st =
                floor_check(picoll_cu.memcpy_async(b, a, bytes, stream), "cuMemcpyAsync", why, len);
        }
        if (st == PICOLL_OK) {
            st = floor_check(picoll_cu.stream_synchronize(stream), "cuStreamSynchronize", why, len);
        }
    }
    if (st == PICOLL_OK) {
        *seconds = (picoll_clock_now() - t0) / n;
    }
    if (b != 0) {
        picoll_cu.mem_free(b);
    }
    if (a != 0) {
        picoll_cu.mem_free(a);
    }
    return st;
}

picoll_status_t picoll_cuda_floor(int what, void *stream, int n, size_t bytes, double *seconds,
                                  char *why, size_t len)
{
    picoll_cu_context_t ctx = NULL;
    floor_t f;
    picoll_status_t st;

    if (picoll_cudrv_load() != PICOLL_OK) {
        snprintf(why, len, "no CUDA driver: %s", picoll_cudrv_why());
        return PICOLL_ERR_NOT_SUPPORTED;
    }
    if (picoll_cu.ctx_get_current(&ctx) != 0 || ctx == NULL) {
        snprintf(why, len, "the calling thread has no current CUDA context");
        return PICOLL_ERR_INVALID_PARAM;
    }
    if (n < 1 || (what == PICOLL_CUDA_FLOOR_COPY && bytes == 0)) {
        snprintf(why, len, "n must be 1 or more (%d), and bytes with a copy (%zu)", n, bytes);
        return PICOLL_ERR_INVALID_PARAM;
    }
    switch (what) {
    case PICOLL_CUDA_FLOOR_LAUNCH:
    case PICOLL_CUDA_FLOOR_QUEUE:
        st = floor_open(&f, ctx, PICOLL_CUDA_FLOOR_FN_LAUNCH, what == PICOLL_CUDA_FLOOR_LAUNCH, why,
                        len);
        if (st == PICOLL_OK) {
            st = what == PICOLL_CUDA_FLOOR_LAUNCH
                     ? floor_blocking(&f, NULL, n, seconds, why, len)
                     : floor_queue(&f, (picoll_cu_stream_t)stream, n, seconds, why, len);
        }
        floor_close(&f);
        return st;
    case PICOLL_CUDA_FLOOR_COPY:
        return floor_copy((picoll_cu_stream_t)stream, n, bytes, seconds, why, len);
    default:
        snprintf(why, len, "what %d is none of PICOLL_FLOOR_LAUNCH, _QUEUE, _COPY", what);
        return PICOLL_ERR_INVALID_PARAM;
    }
}

/* ------------------------------------------------------------------ the barrier floor */

/* The barrier kernel of ws's context with its parameters: every local rank's flag lines as mapped
 * here, one warp (thread t serves local rank t), a wait bounded by PICOLL_TIMEOUT, and a
 * host-mapped status of its own (ws->status is the collectives', whose done words must not move). */
static picoll_status_t barrier_open(floor_t *f, const picoll_cuda_ws_t *ws, char *why, size_t len)
{
    memset(f, 0, sizeof(*f));
    for (int r = 0; r < ws->nlocal; r++) {
        if (ws->peer[r] == NULL) {
            snprintf(why, len,
                     "local rank %d's workspace is not mapped here (hybrid cube mesh: the quad "
                     "and the relay only)",
                     r);
            return PICOLL_ERR_NOT_SUPPORTED;
        }
    }
    picoll_status_t st = floor_open(f, ws->ctx, PICOLL_CUDA_FLOOR_FN_BARRIER, 1, why, len);
    f->threads = PICOLL_CUDA_MAX_LOCAL;
    f->p.nranks = ws->nlocal;
    f->p.me = ws->me;
    for (int r = 0; r < ws->nlocal; r++) {
        f->p.flags[r] = (uint64_t *)(void *)ws->peer[r];
    }
    f->p.spin_ns = (uint64_t)((ws->timeout > 1.0 ? ws->timeout : 1.0) * 1e9);
    f->p.nap_ns = (unsigned)picoll_cfg.cuda_nap;
    return st;
}

static picoll_status_t barrier_check(const floor_t *f, const picoll_cuda_ws_t *ws, char *why,
                                     size_t len)
{
    if (__atomic_load_n(&f->host->quit[0], __ATOMIC_ACQUIRE) == 0) {
        return PICOLL_OK;
    }
    size_t used = (size_t)snprintf(why, len, "a barrier gave up waiting past PICOLL_TIMEOUT for");
    for (int r = 0; r < ws->nlocal && used < len; r++) {
        if (f->host->missing[r] != 0) {
            used += (size_t)snprintf(why + used, len - used, " rank %d", ws->comm_ranks[r]);
        }
    }
    return PICOLL_ERR_TIMEOUT;
}

/* One barrier queued on stream: launched, or (exec) a graph of it launched. */
static int barrier_issue(floor_t *f, picoll_cu_graph_exec_t exec, picoll_cu_stream_t stream)
{
    if (exec != NULL) {
        return picoll_cu.graph_launch(exec, stream);
    }
    f->p.seq++;
    return floor_launch(f, stream);
}

/* n barriers queued on stream back to back (a tenth more first, synchronised, untimed), then one
 * synchronisation; exec: each a launch of that graph of one barrier. */
static picoll_status_t barrier_queue(floor_t *f, const picoll_cuda_ws_t *ws,
                                     picoll_cu_graph_exec_t exec, picoll_cu_stream_t stream, int n,
                                     double *seconds, char *why, size_t len)
{
    double t0 = 0.0;
    const char *call = exec != NULL ? "cuGraphLaunch" : "cuLaunchKernel";
    for (int round = 0; round < 2; round++) {
        int count = round == 0 ? n / 10 + 1 : n;
        t0 = picoll_clock_now();
        for (int i = 0; i < count; i++) {
            picoll_status_t st = floor_check(barrier_issue(f, exec, stream), call, why, len);
            if (st != PICOLL_OK) {
                return st;
            }
        }
        picoll_status_t st =
            floor_check(picoll_cu.stream_synchronize(stream), "cuStreamSynchronize", why, len);
        if (st == PICOLL_OK) {
            st = barrier_check(f, ws, why, len);
        }
        if (st != PICOLL_OK) {
            return st;
        }
    }
    *seconds = (picoll_clock_now() - t0) / n;
    return PICOLL_OK;
}

/* One barrier captured from stream into a graph (relaxed capture), instantiated into *exec. */
static picoll_status_t barrier_graph(floor_t *f, picoll_cu_stream_t stream,
                                     picoll_cu_graph_exec_t *exec, char *why, size_t len)
{
    picoll_cu_graph_t graph = NULL;
    if (picoll_cu.stream_begin_capture == NULL || picoll_cu.stream_end_capture == NULL ||
        picoll_cu.graph_instantiate == NULL || picoll_cu.graph_launch == NULL ||
        picoll_cu.graph_destroy == NULL || picoll_cu.graph_exec_destroy == NULL) {
        snprintf(why, len, "the CUDA driver lacks the graph calls");
        return PICOLL_ERR_NOT_SUPPORTED;
    }
    if (picoll_cu_stream_is_default(stream)) {
        snprintf(why, len,
                 "a graph is captured from a stream of the application, not a default one");
        return PICOLL_ERR_INVALID_PARAM;
    }
    picoll_status_t st =
        floor_check(picoll_cu.stream_begin_capture(stream, PICOLL_CU_STREAM_CAPTURE_MODE_RELAXED),
                    "cuStreamBeginCapture", why, len);
    if (st != PICOLL_OK) {
        return st;
    }
    f->p.seq++;
    int launched = floor_launch(f, stream);
    st = floor_check(picoll_cu.stream_end_capture(stream, &graph), "cuStreamEndCapture", why, len);
    if (st == PICOLL_OK) {
        st = floor_check(launched, "cuLaunchKernel", why, len);
    }
    if (st == PICOLL_OK) {
        st = floor_check(picoll_cu.graph_instantiate(exec, graph, 0), "cuGraphInstantiateWithFlags",
                         why, len);
    }
    if (graph != NULL) {
        picoll_cu.graph_destroy(graph);
    }
    return st;
}

picoll_status_t picoll_cuda_barrier_floor(picoll_cuda_ws_t *ws, int what, void *stream, int n,
                                          double *seconds, char *why, size_t len)
{
    picoll_cuda_saved_ctx_t saved;
    picoll_cu_graph_exec_t exec = NULL;
    floor_t f;
    if (n < 1 || what < PICOLL_CUDA_FLOOR_BARRIER || what > PICOLL_CUDA_FLOOR_BARRIER_GRAPH) {
        snprintf(why, len, "n must be 1 or more (%d), what a PICOLL_FLOOR_BARRIER* (%d)", n, what);
        return PICOLL_ERR_INVALID_PARAM;
    }
    if (picoll_cuda_enter(ws->ctx, &saved) != PICOLL_OK) {
        snprintf(why, len, "the workspace's context cannot be made current");
        return PICOLL_ERR_CUDA;
    }
    picoll_status_t st = barrier_open(&f, ws, why, len);
    if (st == PICOLL_OK && what == PICOLL_CUDA_FLOOR_BARRIER) {
        st = floor_blocking(&f, ws, n, seconds, why, len);
    } else if (st == PICOLL_OK) {
        if (what == PICOLL_CUDA_FLOOR_BARRIER_GRAPH) {
            st = barrier_graph(&f, (picoll_cu_stream_t)stream, &exec, why, len);
        }
        if (st == PICOLL_OK) {
            st = barrier_queue(&f, ws, exec, (picoll_cu_stream_t)stream, n, seconds, why, len);
        }
    }
    if (exec != NULL) {
        picoll_cu.graph_exec_destroy(exec);
    }
    floor_close(&f);
    picoll_cuda_leave(&saved);
    return st;
}
