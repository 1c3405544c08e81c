/* The memory of a stream's calls (pmpi/stream_int.h): their state words (pinned, mapped
 * memory the stream waits on), the staging buffers of their copies, and the freeing of the calls
 * that the stream has passed. */
#pragma GCC visibility push(default)
#include <mpi.h>
#pragma GCC visibility pop

#include "mem/cudrv.h"
#include "pmpi/stream_int.h"

#include <picoll.h>

#include <stdint.h>
#include <stdlib.h>

/* ---- state words, and freeing the calls the stream has passed ---- */

int picoll_stream_cell_get(picoll_stream_t s, op_t *o)
{
    slab_t *b;
    for (b = s->slabs; b != NULL; b = b->next) {
        for (int i = 0; i < CELLS_PER_SLAB; i++) {
            if (!b->used[i]) {
                goto found;
            }
        }
    }
    b = calloc(1, sizeof(*b));
    if (b == NULL) {
        return -1;
    }
    void *words = NULL;
    if (picoll_cu.mem_host_alloc(&words, CELLS_PER_SLAB * sizeof(uint64_t),
                                 PICOLL_CU_MEMHOSTALLOC_PORTABLE |
                                     PICOLL_CU_MEMHOSTALLOC_DEVICEMAP) != 0 ||
        picoll_cu.mem_host_get_device_pointer(&b->dev, words, 0) != 0) {
        if (words != NULL) {
            picoll_cu.mem_free_host(words);
        }
        free(b);
        return -1;
    }
    b->words = words;
    b->next = s->slabs;
    s->slabs = b;
found:
    for (int i = 0; i < CELLS_PER_SLAB; i++) {
        if (!b->used[i]) {
            b->used[i] = 1;
            o->slab = b;
            o->cell = i;
            o->state = b->words + i;
            o->state_dev = b->dev + (picoll_cu_deviceptr_t)i * sizeof(uint64_t);
            *o->state = 0;
            return 0;
        }
    }
    return -1;
}

void picoll_stream_retire(picoll_stream_t s, int wait)
{
    op_t **link = &s->kept;
    while (*link != NULL) {
        op_t *o = *link;
        if (o->captured) {
            link = &o->next_kept;
            continue;
        }
        if (wait) {
            picoll_cu.event_synchronize(o->retired);
        } else if (picoll_cu.event_query(o->retired) != 0) {
            break; /* the stream passes its calls in order: the later ones are not done either */
        }
        picoll_cu.event_destroy(o->retired);
        o->slab->used[o->cell] = 0;
        *link = o->next_kept;
        if (*link == NULL) {
            s->kept_end = link;
        }
        free(o);
    }
}

/* ---- staging buffers ---- */

/* Frees a staging buffer's memory and the buffer (its event destroyed by the caller). */
static void staging_release(staging_t *g, int device)
{
    if (g->buf != NULL && device) {
        picoll_cu.mem_free((picoll_cu_deviceptr_t)(uintptr_t)g->buf);
    } else if (g->buf != NULL) {
        picoll_cu.mem_free_host(g->buf);
    }
    free(g);
}

staging_t *picoll_stream_staging_get(picoll_stream_t s, size_t bytes, int device)
{
    for (staging_t *g = s->staging; g != NULL; g = g->next) {
        if (!g->taken && g->size >= bytes && g->device == device &&
            (!g->pending || picoll_cu.event_query(g->last_use) == 0)) {
            g->pending = 0;
            g->taken = 1;
            return g;
        }
    }
    staging_t *g = calloc(1, sizeof(*g));
    if (g == NULL) {
        return NULL;
    }
    size_t size = bytes < 4096 ? 4096 : bytes;
    picoll_cu_deviceptr_t d = 0;
    int rc = device ? picoll_cu.mem_alloc(&d, size)
                    : picoll_cu.mem_host_alloc(&g->buf, size, PICOLL_CU_MEMHOSTALLOC_PORTABLE);
    if (device && rc == 0) {
        g->buf = (void *)(uintptr_t)d;
    }
    if (rc != 0 || picoll_cu.event_create(&g->last_use, PICOLL_CU_EVENT_DISABLE_TIMING) != 0) {
        staging_release(g, device);
        return NULL;
    }
    g->device = device;
    g->size = size;
    g->taken = 1;
    g->next = s->staging;
    s->staging = g;
    return g;
}

void picoll_stream_stage_free(picoll_stream_t s)
{
    for (staging_t *g = s->staging, *next; g != NULL; g = next) {
        next = g->next;
        picoll_cu.event_synchronize(g->last_use);
        picoll_cu.event_destroy(g->last_use);
        staging_release(g, g->device);
    }
    for (slab_t *b = s->slabs, *next; b != NULL; b = next) {
        next = b->next;
        picoll_cu.mem_free_host(b->words);
        free(b);
    }
}
