/* The process's cache of peers' user buffers mapped through CUDA IPC (cuda_ipc_cache.h says what
 * it keys them by and why): one table for every context and communicator, under one lock. */
#include "build-config.h"
#include "cuda/cuda_ipc_cache.h"
#include "util/config.h"
#include "util/log.h"
#include "util/wait.h"

#include <pthread.h>
#include <string.h>

#define IPC_CACHE_SLOTS 1024 /* PICOLL_CUDA_IPC_CACHE at most */

typedef struct {
    picoll_cu_context_t ctx;   /* the context that maps it; NULL: a free slot */
    uint64_t pid, start;       /* the owner process */
    uint64_t base, size, id;   /* the owner's allocation: its start, bytes and buffer id */
    picoll_cu_deviceptr_t map; /* its mapping here */
    int held;                  /* calls reading through it now */
    uint64_t used; /* the cache's clock at its last use (least recently used: evicted) */
} ipc_cache_entry_t;

/* The owner's side: the IPC handles of its own allocations that it exported, by start and
 * buffer id (an allocation's handle is the same for its life; a new allocation at the same start
 * has another id, so a freed one's handle is never handed out), the least recently used one
 * replaced: a buffer described at every call (PICOLL_CUDA_ZERO_COPY=on or reused) costs its
 * attribute query, not cuIpcGetMemHandle too. With PICOLL_CUDA_IPC_EXPORT_REUSED (mode reused) an
 * allocation met for the first time gets an entry without a handle: its second export finds it,
 * and takes the handle then. 256 allocations: a training step's gradient buckets and FSDP's
 * per-layer buffers, each found again at the next step (one scan of 256 entries an export). */
#define OWN_SLOTS 256
typedef struct {
    uint64_t base, id; /* 0: a free slot */
    picoll_cu_ipc_handle_t handle;
    int has_handle; /* 0: met once (mode reused), not exported yet */
    uint64_t used;
} own_entry_t;
static own_entry_t own[OWN_SLOTS];
static uint64_t own_clock;

/* The kept entry of the allocation (start, id), or NULL; *lru (where not NULL): the least
 * recently used slot (a free one first). Lock held. */
static own_entry_t *own_find_locked(uint64_t start, uint64_t id, own_entry_t **lru)
{
    own_entry_t *oldest = &own[0];
    for (int i = 0; i < OWN_SLOTS; i++) {
        if (own[i].base == start && own[i].id == id) {
            return &own[i];
        }
        oldest = own[i].used < oldest->used ? &own[i] : oldest;
    }
    if (lru != NULL) {
        *lru = oldest;
    }
    return NULL;
}

static ipc_cache_entry_t cache[IPC_CACHE_SLOTS];
static uint64_t cache_clock;
static size_t cache_bytes; /* the live entries' sizes */
static picoll_cuda_ipc_cache_stats_t cache_stats;
static pthread_mutex_t cache_lock = PTHREAD_MUTEX_INITIALIZER;

picoll_status_t picoll_cuda_ipc_buf_export(const void *ptr, unsigned flags,
                                           picoll_cuda_ipc_buf_t *out, int *first)
{
    unsigned int type = 0, managed = 0;
    unsigned long long id = 0;
    picoll_cu_deviceptr_t start = 0;
    size_t size = 0;
    int attrs[] = {PICOLL_CU_POINTER_ATTRIBUTE_MEMORY_TYPE, PICOLL_CU_POINTER_ATTRIBUTE_IS_MANAGED,
                   PICOLL_CU_POINTER_ATTRIBUTE_BUFFER_ID,
                   PICOLL_CU_POINTER_ATTRIBUTE_RANGE_START_ADDR,
                   PICOLL_CU_POINTER_ATTRIBUTE_RANGE_SIZE};
    void *data[] = {&type, &managed, &id, &start, &size};
    picoll_cu_deviceptr_t p = (picoll_cu_deviceptr_t)(uintptr_t)ptr;
    double t0 = picoll_clock_now();
    PICOLL_CU_TRY(
        picoll_cu.pointer_get_attributes(sizeof(attrs) / sizeof(attrs[0]), attrs, data, p),
        "cuPointerGetAttributes");
    if (managed || type != PICOLL_CU_MEMORYTYPE_DEVICE || id == 0 || p < start ||
        p - start >= size) {
        return PICOLL_ERR_NOT_SUPPORTED;
    }
    memset(out, 0, sizeof(*out));
    if (first != NULL) {
        *first = 0;
    }
    pthread_mutex_lock(&cache_lock);
    own_entry_t *lru = NULL;
    own_entry_t *hit = own_find_locked(start, id, &lru);
    if (hit == NULL && (flags & PICOLL_CUDA_IPC_EXPORT_REUSED)) {
        /* met for the first time: recorded (the least recently used entry replaced), not
         * described; no handle taken for a buffer that may never come back */
        *lru = (own_entry_t){.base = start, .id = id, .used = ++own_clock};
        cache_stats.first_seen++;
        cache_stats.export_s += picoll_clock_now() - t0;
        pthread_mutex_unlock(&cache_lock);
        *first = 1;
        return PICOLL_OK;
    }
    int have = hit != NULL && hit->has_handle;
    if (hit != NULL) {
        hit->used = ++own_clock;
        if (have) {
            out->handle = hit->handle;
        }
    }
    pthread_mutex_unlock(&cache_lock);
    if (!have) {
        PICOLL_CU_TRY(picoll_cu.ipc_get_mem_handle(&out->handle, start), "cuIpcGetMemHandle");
    }
    out->base = start;
    out->size = size;
    out->buffer_id = id;
    out->offset = p - start;
    pthread_mutex_lock(&cache_lock);
    /* kept once: another thread may have kept the same allocation's handle meanwhile, or met it
     * (an entry without one), or replaced the entry found above */
    if (!have) {
        own_entry_t *e = own_find_locked(start, id, &lru);
        if (e == NULL) {
            e = lru;
            *e = (own_entry_t){.base = start, .id = id};
        }
        if (!e->has_handle) {
            e->handle = out->handle;
            e->has_handle = 1;
        }
        e->used = ++own_clock;
    }
    cache_stats.export_handles += !have;
    cache_stats.exports++;
    cache_stats.export_s += picoll_clock_now() - t0;
    pthread_mutex_unlock(&cache_lock);
    return PICOLL_OK;
}

/* Closes entry e's mapping (its context current) and frees its slot. Lock held. */
static void cache_close_locked(ipc_cache_entry_t *e, int close)
{
    if (close) {
        picoll_cudrv_check(picoll_cu.ipc_close_mem_handle(e->map), "cuIpcCloseMemHandle");
    }
    cache_bytes -= e->size;
    cache_stats.entries--;
    memset(e, 0, sizeof(*e));
}

/* The entry of the owner's allocation that starts at b->base, mapped in ctx, or NULL. Lock held.
 * The buffer id is what tells that allocation from a later one at the same start: an entry of
 * another id maps freed memory (*stale). */
static ipc_cache_entry_t *cache_find_locked(picoll_cu_context_t ctx, uint64_t pid, uint64_t start,
                                            const picoll_cuda_ipc_buf_t *b,
                                            ipc_cache_entry_t **stale)
{
    *stale = NULL;
    for (int i = 0; i < IPC_CACHE_SLOTS; i++) {
        ipc_cache_entry_t *e = &cache[i];
        if (e->ctx != ctx || e->pid != pid || e->start != start || e->base != b->base) {
            continue;
        }
#ifndef IPC_CACHE_MUTANT_NO_BUFFER_ID /* tests/cuda/ipc_cache's mutant deletes the check */
        if (e->id != b->buffer_id) {
            *stale = e;
            continue;
        }
#endif
        return e;
    }
    return NULL;
}

/* A free slot for an entry of bytes, evicting the least recently used entries of ctx (the context
 * current) that no call holds until the bound takes it; NULL when they are all held. Lock held. */
static ipc_cache_entry_t *cache_slot_locked(picoll_cu_context_t ctx, uint64_t bytes)
{
    long max_entries = picoll_cfg.cuda_ipc_cache;
    for (;;) {
        ipc_cache_entry_t *free_slot = NULL, *lru = NULL;
        for (int i = 0; i < IPC_CACHE_SLOTS; i++) {
            ipc_cache_entry_t *e = &cache[i];
            if (e->ctx == NULL) {
                free_slot = free_slot != NULL ? free_slot : e;
            } else if (e->ctx == ctx && e->held == 0 && (lru == NULL || e->used < lru->used)) {
                lru = e;
            }
        }
        if (free_slot != NULL && cache_stats.entries < max_entries &&
            cache_bytes + bytes <= picoll_cfg.cuda_ipc_cache_bytes) {
            return free_slot;
        }
        if (lru == NULL) {
            return NULL;
        }
        cache_close_locked(lru, 1);
        cache_stats.evictions++;
    }
}

picoll_status_t picoll_cuda_ipc_cache_get(picoll_cu_context_t ctx, uint64_t pid, uint64_t start,
                                          const picoll_cuda_ipc_buf_t *b, void **out, int *entry)
{
    picoll_status_t st = PICOLL_OK;
    ipc_cache_entry_t *stale, *e;
    if (picoll_cfg.cuda_ipc_cache <= 0 || b->size > picoll_cfg.cuda_ipc_cache_bytes) {
        return PICOLL_ERR_NOT_SUPPORTED;
    }
    pthread_mutex_lock(&cache_lock);
    e = cache_find_locked(ctx, pid, start, b, &stale);
    if (e != NULL) {
        cache_stats.hits++;
    } else {
        if (stale != NULL && stale->held == 0) {
            cache_close_locked(stale, 1); /* a mapping of freed memory: never read again */
            cache_stats.stale++;
        }
        e = cache_slot_locked(ctx, b->size);
        if (e == NULL) {
            st = PICOLL_ERR_NOT_SUPPORTED;
            goto out;
        }
        double t0 = picoll_clock_now();
        picoll_cu_deviceptr_t map = 0;
        if (picoll_cudrv_check(picoll_cu.ipc_open_mem_handle(
                                   &map, b->handle, PICOLL_CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS),
                               "cuIpcOpenMemHandle") != PICOLL_OK) {
            st = PICOLL_ERR_CUDA;
            goto out;
        }
        cache_stats.miss_s += picoll_clock_now() - t0;
        cache_stats.misses++;
        cache_stats.entries++;
        cache_bytes += b->size;
        *e = (ipc_cache_entry_t){.ctx = ctx,
                                 .pid = pid,
                                 .start = start,
                                 .base = b->base,
                                 .size = b->size,
                                 .id = b->buffer_id,
                                 .map = map};
    }
    e->held++;
    e->used = ++cache_clock;
    *out = (char *)(uintptr_t)e->map + b->offset;
    *entry = (int)(e - cache);
out:
    pthread_mutex_unlock(&cache_lock);
    return st;
}

void picoll_cuda_ipc_cache_release(int entry)
{
    pthread_mutex_lock(&cache_lock);
    if (entry >= 0 && entry < IPC_CACHE_SLOTS && cache[entry].held > 0) {
        cache[entry].held--;
    }
    pthread_mutex_unlock(&cache_lock);
}

void picoll_cuda_ipc_cache_flush(picoll_cu_context_t ctx, int close)
{
    pthread_mutex_lock(&cache_lock);
    for (int i = 0; i < IPC_CACHE_SLOTS; i++) {
        ipc_cache_entry_t *e = &cache[i];
        if (e->ctx != NULL && (ctx == NULL || e->ctx == ctx) && e->held == 0) {
            cache_close_locked(e, close);
        }
    }
    pthread_mutex_unlock(&cache_lock);
}

void picoll_cuda_ipc_cache_stats(picoll_cuda_ipc_cache_stats_t *out)
{
    pthread_mutex_lock(&cache_lock);
    *out = cache_stats;
    pthread_mutex_unlock(&cache_lock);
}
