/* The device's floor (picoll_device_floor, osu-bench --floor): what a launch, a queue of launches
 * and a copy cost on this process's GPU, with the launch shape of picoll's own calls, so that a
 * benchmark prints each call's time as a ratio to what the hardware allows in the same run. */
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

static picoll_status_t floor_open(floor_t *f, picoll_cu_context_t ctx, int mapped, char *why,
                                  size_t len)
{
    memset(f, 0, sizeof(*f));
    picoll_status_t st = picoll_cuda_floor_function(ctx, &f->fn);
    if (st != PICOLL_OK) {
        snprintf(why, len, "no %s in picoll's kernel module (%s)", PICOLL_CUDA_FLOOR_NAME,
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

/* n launches, each waited for by polling its done word, as a blocking call's end polls it. */
static picoll_status_t floor_blocking(floor_t *f, int n, double *seconds, char *why, size_t len)
{
    double t0 = 0.0;
    for (int i = -n / 10 - 1; i < n; i++) { /* a tenth more first, untimed */
        if (i == 0) {
            t0 = picoll_clock_now();
        }
        f->p.seq++;
        picoll_status_t st =
            floor_check(floor_launch(f, PICOLL_CU_STREAM_PER_THREAD), "cuLaunchKernel", why, len);
        if (st != PICOLL_OK) {
            return st;
        }
        double deadline = picoll_clock_now() + 10.0;
        while (__atomic_load_n(&f->host->done[0], __ATOMIC_ACQUIRE) < f->p.seq) {
            if (picoll_clock_now() > deadline) {
                snprintf(why, len, "the empty kernel did not end in 10 s");
                return PICOLL_ERR_CUDA;
            }
        }
    }
    *seconds = (picoll_clock_now() - t0) / n;
    return PICOLL_OK;
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
        st = floor_open(&f, ctx, what == PICOLL_CUDA_FLOOR_LAUNCH, why, len);
        if (st == PICOLL_OK) {
            st = what == PICOLL_CUDA_FLOOR_LAUNCH
                     ? floor_blocking(&f, n, seconds, why, len)
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
