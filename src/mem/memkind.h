/* What kind of memory a pointer is, from the CUDA pointer attributes (driver loaded with dlopen,
 * src/cudrv.h). Without the driver every pointer is host memory. */
#ifndef PICOLL_MEMKIND_H
#define PICOLL_MEMKIND_H

#include <stddef.h>
#include <stdint.h>

typedef enum {
    PICOLL_MEM_HOST,    /* host memory: the host executor may touch it */
    PICOLL_MEM_DEVICE,  /* CUDA device memory */
    PICOLL_MEM_MANAGED, /* CUDA managed memory: staged like device memory */
    PICOLL_MEM_PINNED   /* host memory pinned or registered with CUDA: the CPU may touch it */
} picoll_memkind_t;

typedef struct {
    picoll_memkind_t kind;
    int device;                    /* ordinal of the device the allocation belongs to (not the
                                      current one); -1 for host memory */
    unsigned long long buffer_id;  /* CUDA's process-wide allocation id; 0: unknown to CUDA */
    void *context;                 /* CUcontext to copy it with; NULL for host memory */
    unsigned long long context_id; /* that context's id (picoll_cudrv_ctx_id) when the
                                      allocation was first looked up; 0: unknown */
} picoll_meminfo_t;

/* Kind, device, buffer id and context of ptr, through this thread's cache. */
void picoll_memkind_query(const void *ptr, picoll_meminfo_t *out);
/* Both of a call's buffers (b NULL: in place, *out_b = *out_a): one buffer-id query where b lies
 * in a's allocation (picoll_memcache_query_pair), two otherwise. */
void picoll_memkind_query_pair(const void *a, const void *b, picoll_meminfo_t *out_a,
                               picoll_meminfo_t *out_b);
/* 1 when the CUDA driver loaded, initialised and sees at least one device. */
int picoll_cuda_driver_present(void);
/* The primary context of device (an ordinal), retained once for the life of the process (the
 * driver loaded): for allocations whose attributes name no context (virtual memory management
 * API), and for picoll's allocator (cuda/cuda_zc.c). NULL where the driver refuses. */
void *picoll_cuda_primary_context(int device);

/* ---- the cache, a pure function of its attribute source (unit-tested with a fake one) ----
 * Entries are allocation ranges with their attributes. A lookup asks the source only for the
 * buffer id of ptr (cheap) and answers from the entry whose range holds ptr if the ids agree.
 * A freed allocation whose range was given to a new one at the same address has a new buffer
 * id, so its entry is never used again: it is replaced. Memory CUDA does not know (buffer id 0)
 * is host memory and is not cached. */
typedef struct {
    /* buffer id of the allocation holding ptr; 0 when CUDA does not know ptr */
    unsigned long long (*buffer_id)(const void *ptr, void *arg);
    /* all attributes of ptr, and the range of its allocation (*size 0 when unknown) */
    void (*attributes)(const void *ptr, picoll_meminfo_t *info, uintptr_t *start, size_t *size,
                       void *arg);
    void *arg;
} picoll_memsource_t;

#define PICOLL_MEMCACHE_ENTRIES 8
typedef struct {
    struct {
        uintptr_t start, end; /* [start, end); end == 0: empty */
        picoll_meminfo_t info;
    } entry[PICOLL_MEMCACHE_ENTRIES];
    unsigned next; /* the slot replaced by the next miss (round robin) */
} picoll_memcache_t;

void picoll_memcache_query(picoll_memcache_t *cache, const picoll_memsource_t *src, const void *ptr,
                           picoll_meminfo_t *out);
/* The same for a and b (b NULL: *out_b = *out_a). Where b lies in the range of a's allocation,
 * just validated by its buffer id, b's answer is that entry's, with no query of its own: an
 * allocation's range never changes while it lives (send and receive buffers of one caching
 * allocator's segment cost one query). */
void picoll_memcache_query_pair(picoll_memcache_t *cache, const picoll_memsource_t *src,
                                const void *a, const void *b, picoll_meminfo_t *out_a,
                                picoll_meminfo_t *out_b);

#endif
