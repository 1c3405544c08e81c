#include "build-config.h"
#include "mem/memkind.h"
#include "mem/cudrv.h"
#include "util/log.h"

#include <pthread.h>

static const picoll_meminfo_t host_info = {.kind = PICOLL_MEM_HOST, .device = -1};

/* picoll_memcache_query; returns the entry that holds ptr's allocation as it is now (its buffer id
 * asked in this call), or -1. */
static int memcache_lookup(picoll_memcache_t *cache, const picoll_memsource_t *src, const void *ptr,
                           picoll_meminfo_t *out)
{
    uintptr_t p = (uintptr_t)ptr, start = 0;
    size_t size = 0;
    unsigned long long id = src->buffer_id(ptr, src->arg);
    unsigned slot;

    if (id == 0) {
        *out = host_info;
        return -1;
    }
    /* every entry that holds ptr: one of them may be stale (freed, its range given to other
     * allocations) and still hold it, beside the live one */
    for (slot = 0; slot < PICOLL_MEMCACHE_ENTRIES; slot++) {
        if (p >= cache->entry[slot].start && p < cache->entry[slot].end &&
            cache->entry[slot].info.buffer_id == id) {
            *out = cache->entry[slot].info;
            return (int)slot;
        }
    }
    src->attributes(ptr, out, &start, &size, src->arg);
    if (size == 0 || out->buffer_id != id || p < start || p - start >= size) {
        return -1; /* nothing sound to cache */
    }
    /* live allocations do not overlap: an entry that overlaps this one is stale; emptied, its
     * slot takes the new entry */
    unsigned free_slot = PICOLL_MEMCACHE_ENTRIES;
    for (unsigned k = 0; k < PICOLL_MEMCACHE_ENTRIES; k++) {
        if (cache->entry[k].end != 0 && cache->entry[k].start < start + size &&
            start < cache->entry[k].end) {
            cache->entry[k].end = 0;
        }
        if (cache->entry[k].end == 0 && free_slot == PICOLL_MEMCACHE_ENTRIES) {
            free_slot = k;
        }
    }
    slot = free_slot;
    if (slot == PICOLL_MEMCACHE_ENTRIES) {
        slot = cache->next;
        cache->next = (cache->next + 1) % PICOLL_MEMCACHE_ENTRIES;
    }
    cache->entry[slot].start = start;
    cache->entry[slot].end = start + size;
    cache->entry[slot].info = *out;
    return (int)slot;
}

void picoll_memcache_query(picoll_memcache_t *cache, const picoll_memsource_t *src, const void *ptr,
                           picoll_meminfo_t *out)
{
    memcache_lookup(cache, src, ptr, out);
}

void picoll_memcache_query_pair(picoll_memcache_t *cache, const picoll_memsource_t *src,
                                const void *a, const void *b, picoll_meminfo_t *out_a,
                                picoll_meminfo_t *out_b)
{
    int slot = memcache_lookup(cache, src, a, out_a);
    uintptr_t q = (uintptr_t)b;
    if (b == NULL) {
        *out_b = *out_a;
    } else if (slot >= 0 && q >= cache->entry[slot].start && q < cache->entry[slot].end) {
        /* a's allocation is alive (its id just asked), and an allocation's range does not change
         * while it lives: b lies in the same one */
        *out_b = cache->entry[slot].info;
    } else {
        memcache_lookup(cache, src, b, out_b);
    }
}

/* ---- the real source: the CUDA driver ---- */

static unsigned long long cuda_buffer_id(const void *ptr, void *arg)
{
    unsigned long long id = 0;
    (void)arg;
    /* memory the driver does not know (plain malloc) answers an error: host */
    if (picoll_cu.pointer_get_attribute(&id, PICOLL_CU_POINTER_ATTRIBUTE_BUFFER_ID,
                                        (picoll_cu_deviceptr_t)(uintptr_t)ptr) != 0) {
        return 0;
    }
    return id;
}

void *picoll_cuda_primary_context(int device)
{
    static picoll_cu_context_t ctx[64];
    static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
    picoll_cu_device_t dev;
    picoll_cu_context_t c = NULL;

    if (device < 0 || device >= 64) {
        return NULL;
    }
    pthread_mutex_lock(&lock);
    if (ctx[device] == NULL &&
        picoll_cudrv_check(picoll_cu.device_get(&dev, device), "cuDeviceGet") == PICOLL_OK &&
        picoll_cudrv_check(picoll_cu.primary_ctx_retain(&c, dev), "cuDevicePrimaryCtxRetain") ==
            PICOLL_OK) {
        ctx[device] = c;
    }
    c = ctx[device];
    pthread_mutex_unlock(&lock);
    return c;
}

static void cuda_attributes(const void *ptr, picoll_meminfo_t *info, uintptr_t *start, size_t *size,
                            void *arg)
{
    unsigned int type = 0, managed = 0;
    int device = -1;
    unsigned long long id = 0;
    picoll_cu_context_t ctx = NULL;
    picoll_cu_deviceptr_t range_start = 0;
    size_t range_size = 0;
    int attrs[] = {
        PICOLL_CU_POINTER_ATTRIBUTE_MEMORY_TYPE,    PICOLL_CU_POINTER_ATTRIBUTE_IS_MANAGED,
        PICOLL_CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL, PICOLL_CU_POINTER_ATTRIBUTE_BUFFER_ID,
        PICOLL_CU_POINTER_ATTRIBUTE_CONTEXT,        PICOLL_CU_POINTER_ATTRIBUTE_RANGE_START_ADDR,
        PICOLL_CU_POINTER_ATTRIBUTE_RANGE_SIZE,
    };
    void *data[] = {&type, &managed, &device, &id, &ctx, &range_start, &range_size};
    (void)arg;

    *info = host_info;
    *size = 0;
    /* unlike cuPointerGetAttribute, this answers success with zeroed values for unknown memory */
    if (picoll_cudrv_check(picoll_cu.pointer_get_attributes(sizeof(attrs) / sizeof(attrs[0]), attrs,
                                                            data,
                                                            (picoll_cu_deviceptr_t)(uintptr_t)ptr),
                           "cuPointerGetAttributes") != PICOLL_OK) {
        return;
    }
    if (managed) {
        info->kind = PICOLL_MEM_MANAGED;
    } else if (type == PICOLL_CU_MEMORYTYPE_DEVICE) {
        info->kind = PICOLL_MEM_DEVICE;
    } else if (type == PICOLL_CU_MEMORYTYPE_HOST) {
        info->kind = PICOLL_MEM_PINNED;
    } else {
        return;
    }
    info->device = info->kind == PICOLL_MEM_PINNED ? -1 : device;
    info->buffer_id = id;
    info->context = ctx != NULL ? (void *)ctx : picoll_cuda_primary_context(device);
    /* a reset context keeps its handle: its id tells the allocations made after the reset (a
     * new buffer id, so a new entry of the cache) from the workspace made before */
    info->context_id = picoll_cudrv_ctx_id(info->context);
    *start = (uintptr_t)range_start;
    *size = range_size;
}

static const picoll_memsource_t cuda_source = {
    .buffer_id = cuda_buffer_id,
    .attributes = cuda_attributes,
};

/* Not initial-exec: this is not on the pass-through path, and the cache is larger than what a
 * dlopen'ed library may take from the static TLS block. */
static _Thread_local picoll_memcache_t memcache;

int picoll_cuda_driver_present(void)
{
    return picoll_cudrv_load() == PICOLL_OK;
}

void picoll_memkind_query(const void *ptr, picoll_meminfo_t *out)
{
    picoll_memkind_query_pair(ptr, NULL, out, out);
}

void picoll_memkind_query_pair(const void *a, const void *b, picoll_meminfo_t *out_a,
                               picoll_meminfo_t *out_b)
{
    if (!picoll_cuda_driver_present()) {
        *out_a = host_info;
        *out_b = host_info;
        return;
    }
    picoll_memcache_query_pair(&memcache, &cuda_source, a, b, out_a, out_b);
}
