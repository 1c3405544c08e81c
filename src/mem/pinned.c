#include "build-config.h"
#include "mem/pinned.h"
#include "mem/cudrv.h"
#include "util/log.h"

#include <pthread.h>
#include <stdlib.h>

#define PINNED_HEADER 64 /* keeps the user part 64-byte aligned */
#define PINNED_MIN ((size_t)1 << 16)
#define PINNED_KEEP 8 /* free buffers kept for reuse */

typedef struct {
    size_t size; /* usable bytes after the header */
    void *ctx;   /* context it was allocated under, NULL: malloc'ed */
} pinned_header_t;

static pthread_mutex_t pool_lock = PTHREAD_MUTEX_INITIALIZER;
static pinned_header_t *pool_free[PINNED_KEEP];

static void pinned_release(pinned_header_t *h)
{
    picoll_cu_context_t popped;
    if (h->ctx == NULL) {
        free(h);
        return;
    }
    if (picoll_cudrv_check(picoll_cu.ctx_push_current(h->ctx), "cuCtxPushCurrent") == PICOLL_OK) {
        int mode = PICOLL_CU_STREAM_CAPTURE_MODE_RELAXED;
        int exchanged = picoll_cu.thread_exchange_capture_mode(&mode) == 0;
        (void)picoll_cudrv_check(picoll_cu.mem_free_host(h), "cuMemFreeHost");
        if (exchanged) {
            picoll_cu.thread_exchange_capture_mode(&mode);
        }
        (void)picoll_cudrv_check(picoll_cu.ctx_pop_current(&popped), "cuCtxPopCurrent");
    }
}

static pinned_header_t *pinned_alloc(size_t size, void *ctx)
{
    static int warned;
    picoll_cu_context_t popped;
    void *p = NULL;
    picoll_status_t status =
        picoll_cudrv_check(picoll_cu.ctx_push_current(ctx), "cuCtxPushCurrent");

    if (status == PICOLL_OK) {
        /* relaxed capture mode: allowed while the application captures a CUDA graph */
        int mode = PICOLL_CU_STREAM_CAPTURE_MODE_RELAXED;
        int exchanged = picoll_cu.thread_exchange_capture_mode(&mode) == 0;
        status = picoll_cudrv_check(
            picoll_cu.mem_host_alloc(&p, PINNED_HEADER + size, PICOLL_CU_MEMHOSTALLOC_PORTABLE),
            "cuMemHostAlloc");
        if (exchanged) {
            picoll_cu.thread_exchange_capture_mode(&mode);
        }
        (void)picoll_cudrv_check(picoll_cu.ctx_pop_current(&popped), "cuCtxPopCurrent");
    }
    if (status != PICOLL_OK) {
        if (!warned) {
            warned = 1;
            picoll_warn("pinned host memory unavailable: staging through pageable memory");
        }
        ctx = NULL;
        if (posix_memalign(&p, PINNED_HEADER, PINNED_HEADER + size) != 0) {
            return NULL;
        }
    }
    pinned_header_t *h = p;
    h->size = size;
    h->ctx = ctx;
    return h;
}

picoll_status_t picoll_pinned_get(size_t bytes, void *ctx, void **out)
{
    pinned_header_t *h = NULL;
    size_t size = PINNED_MIN;
    int best = -1;

    pthread_mutex_lock(&pool_lock);
    for (int i = 0; i < PINNED_KEEP; i++) {
        if (pool_free[i] != NULL && pool_free[i]->size >= bytes &&
            (best < 0 || pool_free[i]->size < pool_free[best]->size)) {
            best = i;
        }
    }
    if (best >= 0) {
        h = pool_free[best];
        pool_free[best] = NULL;
    }
    pthread_mutex_unlock(&pool_lock);
    if (h == NULL) {
        while (size < bytes && size <= ((size_t)-1 >> 1)) {
            size <<= 1; /* powers of two: buffers fit later calls of similar sizes */
        }
        h = pinned_alloc(size >= bytes ? size : bytes, ctx);
        if (h == NULL) {
            picoll_error("out of memory for a %zu-byte staging buffer", bytes);
            return PICOLL_ERR_NO_MEMORY;
        }
    }
    *out = (char *)h + PINNED_HEADER;
    return PICOLL_OK;
}

void picoll_pinned_put(void *buf)
{
    pinned_header_t *h = (pinned_header_t *)((char *)buf - PINNED_HEADER);
    int slot = -1;

    pthread_mutex_lock(&pool_lock);
    for (int i = 0; i < PINNED_KEEP; i++) {
        if (pool_free[i] == NULL) {
            slot = i;
            break;
        }
        if (slot < 0 || pool_free[i]->size < pool_free[slot]->size) {
            slot = i; /* full: the smallest kept one makes room */
        }
    }
    pinned_header_t *evicted = pool_free[slot];
    if (evicted != NULL && evicted->size > h->size) {
        evicted = h; /* every kept one is larger: free this one instead */
    } else {
        pool_free[slot] = h;
    }
    pthread_mutex_unlock(&pool_lock);
    if (evicted != NULL) {
        pinned_release(evicted);
    }
}
