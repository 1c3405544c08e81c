/* Unit test of the memory-kind cache (src/memkind.c, picoll_memcache_query) against a fake
 * attribute source: a table of allocations that the test frees and reallocates at will, and that
 * counts the full attribute queries. No CUDA, no MPI. */
#include "build-config.h"
#include "mem/memkind.h"
#include "check.h"

#include <stdint.h>
#include <string.h>

typedef struct {
    uintptr_t start;
    size_t size;
    picoll_meminfo_t info; /* buffer_id 0: slot unused */
} fake_alloc_t;

typedef struct {
    fake_alloc_t a[32];
    unsigned long long next_id;
    int attribute_calls;
    int id_calls;
} fake_t;

static fake_alloc_t *fake_find(fake_t *f, uintptr_t p)
{
    for (int i = 0; i < 32; i++) {
        if (f->a[i].info.buffer_id != 0 && p >= f->a[i].start && p - f->a[i].start < f->a[i].size) {
            return &f->a[i];
        }
    }
    return NULL;
}

static unsigned long long fake_buffer_id(const void *ptr, void *arg)
{
    fake_alloc_t *a = fake_find(arg, (uintptr_t)ptr);
    ((fake_t *)arg)->id_calls++;
    return a ? a->info.buffer_id : 0;
}

static void fake_attributes(const void *ptr, picoll_meminfo_t *info, uintptr_t *start, size_t *size,
                            void *arg)
{
    fake_t *f = arg;
    fake_alloc_t *a = fake_find(f, (uintptr_t)ptr);
    f->attribute_calls++;
    if (a == NULL) {
        *info = (picoll_meminfo_t){.kind = PICOLL_MEM_HOST, .device = -1};
        *size = 0;
        return;
    }
    *info = a->info;
    *start = a->start;
    *size = a->size;
}

/* A new allocation at start: a new buffer id, as CUDA gives one. */
static void fake_alloc(fake_t *f, uintptr_t start, size_t size, picoll_memkind_t kind, int device)
{
    for (int i = 0; i < 32; i++) {
        if (f->a[i].info.buffer_id == 0) {
            f->a[i] = (fake_alloc_t){.start = start,
                                     .size = size,
                                     .info = {.kind = kind,
                                              .device = device,
                                              .buffer_id = ++f->next_id,
                                              .context = (void *)(uintptr_t)(0x1000 + device)}};
            return;
        }
    }
}

static void fake_free(fake_t *f, uintptr_t start)
{
    fake_alloc_t *a = fake_find(f, start);
    if (a != NULL) {
        memset(a, 0, sizeof(*a));
    }
}

int main(void)
{
    static fake_t f;
    static picoll_memcache_t cache;
    picoll_memsource_t src = {
        .buffer_id = fake_buffer_id, .attributes = fake_attributes, .arg = &f};
    picoll_meminfo_t info;
    const uintptr_t A = 0x7f0000000000, B = 0x7f0000100000;

    /* host memory: CUDA does not know it, nothing is asked beyond the buffer id, nor cached */
    picoll_memcache_query(&cache, &src, (void *)0x1234, &info);
    CHECK(info.kind == PICOLL_MEM_HOST && info.device == -1 && info.buffer_id == 0,
          "unknown memory is host memory (kind %d)", info.kind);
    CHECK(f.attribute_calls == 0, "host memory made %d attribute queries", f.attribute_calls);

    /* device memory: one miss, then hits anywhere inside the allocation */
    fake_alloc(&f, A, 4096, PICOLL_MEM_DEVICE, 1);
    picoll_memcache_query(&cache, &src, (void *)A, &info);
    CHECK(info.kind == PICOLL_MEM_DEVICE && info.device == 1,
          "device memory on device 1: kind %d "
          "device %d",
          info.kind, info.device);
    CHECK(f.attribute_calls == 1, "first query: %d attribute queries, expected 1",
          f.attribute_calls);
    picoll_memcache_query(&cache, &src, (void *)(A + 4095), &info);
    picoll_memcache_query(&cache, &src, (void *)(A + 100), &info);
    CHECK(info.kind == PICOLL_MEM_DEVICE && f.attribute_calls == 1,
          "queries inside a cached allocation: %d attribute queries, expected 1",
          f.attribute_calls);

    /* one past the end is not in the allocation */
    picoll_memcache_query(&cache, &src, (void *)(A + 4096), &info);
    CHECK(info.kind == PICOLL_MEM_HOST, "one past the end of a device allocation: kind %d",
          info.kind);

    /* freed, and the same address given to managed memory on device 0: a new buffer id, so the
     * cached entry must not be used (kind, device and context all change) */
    fake_free(&f, A);
    fake_alloc(&f, A, 8192, PICOLL_MEM_MANAGED, 0);
    picoll_memcache_query(&cache, &src, (void *)(A + 16), &info);
    CHECK(info.kind == PICOLL_MEM_MANAGED && info.device == 0 &&
              info.context == (void *)(uintptr_t)0x1000,
          "reallocated at the same address: stale kind %d device %d", info.kind, info.device);
    CHECK(f.attribute_calls == 2, "the reallocation made %d attribute queries in all, expected 2",
          f.attribute_calls);
    picoll_memcache_query(&cache, &src, (void *)(A + 8000), &info);
    CHECK(info.kind == PICOLL_MEM_MANAGED && f.attribute_calls == 2,
          "the new allocation is cached in place of the stale one (%d queries)", f.attribute_calls);

    /* a pair in one allocation: one buffer-id query, the second answered from the entry just
     * validated; a pair across two: two; the second buffer freed and its address given to device
     * memory elsewhere while the first lives: its own query tells */
    const uintptr_t C = 0x7f0000200000, D = 0x7f0000300000;
    picoll_meminfo_t other;
    fake_alloc(&f, C, 65536, PICOLL_MEM_DEVICE, 1);
    picoll_memcache_query(&cache, &src, (void *)C, &info);
    f.id_calls = 0;
    f.attribute_calls = 0;
    picoll_memcache_query_pair(&cache, &src, (void *)(C + 32768), (void *)(C + 16), &info, &other);
    CHECK(info.kind == PICOLL_MEM_DEVICE && other.kind == PICOLL_MEM_DEVICE &&
              other.buffer_id == info.buffer_id && f.id_calls == 1 && f.attribute_calls == 0,
          "a pair in one cached allocation: kinds %d %d, %d id and %d attribute queries", info.kind,
          other.kind, f.id_calls, f.attribute_calls);
    picoll_memcache_query_pair(&cache, &src, (void *)C, NULL, &info, &other);
    CHECK(other.kind == PICOLL_MEM_DEVICE && f.id_calls == 2,
          "in place: %d id queries in all, "
          "expected 2",
          f.id_calls);
    fake_alloc(&f, D, 4096, PICOLL_MEM_MANAGED, 0);
    picoll_memcache_query_pair(&cache, &src, (void *)C, (void *)D, &info, &other);
    CHECK(info.kind == PICOLL_MEM_DEVICE && other.kind == PICOLL_MEM_MANAGED && f.id_calls == 4,
          "a pair in two allocations: kinds %d %d, %d id queries in all, expected 4", info.kind,
          other.kind, f.id_calls);
    picoll_memcache_query_pair(&cache, &src, (void *)(C + 65536), (void *)C, &info, &other);
    CHECK(info.kind == PICOLL_MEM_HOST && other.kind == PICOLL_MEM_DEVICE,
          "a pair whose first lies past an allocation: kinds %d %d", info.kind, other.kind);
    fake_free(&f, C);
    picoll_memcache_query_pair(&cache, &src, (void *)D, (void *)(C + 8), &info, &other);
    CHECK(info.kind == PICOLL_MEM_MANAGED && other.kind == PICOLL_MEM_HOST,
          "a pair whose second was freed: kinds %d %d", info.kind, other.kind);
    fake_free(&f, D);

    /* freed and not reallocated: host memory (buffer id 0), whatever the cache holds */
    fake_free(&f, A);
    picoll_memcache_query(&cache, &src, (void *)A, &info);
    CHECK(info.kind == PICOLL_MEM_HOST, "a freed allocation still reads as kind %d", info.kind);

    /* pinned host memory keeps its own kind here (the host executor treats it as host memory) */
    fake_alloc(&f, B, 100, PICOLL_MEM_PINNED, -1);
    picoll_memcache_query(&cache, &src, (void *)B, &info);
    CHECK(info.kind == PICOLL_MEM_PINNED, "pinned host memory: kind %d", info.kind);

    /* a stale entry met first must not shadow a live one (found on the emulated GPU, which hands
     * the same addresses out again in other sizes: hosts.staged.np5): P and Q cached side by
     * side, both freed, R over both cached through Q's address (its entry replaces Q's); R's
     * start, still covered by P's stale entry, is a hit, and no stale entry is left over R */
    {
        static picoll_memcache_t fresh;
        const uintptr_t X = 0x7d0000000000;
        fake_alloc(&f, X, 0x100, PICOLL_MEM_DEVICE, 0); /* P */
        picoll_memcache_query(&fresh, &src, (void *)X, &info);
        fake_alloc(&f, X + 0x100, 0x100, PICOLL_MEM_DEVICE, 0); /* Q */
        picoll_memcache_query(&fresh, &src, (void *)(X + 0x100), &info);
        fake_free(&f, X);
        fake_free(&f, X + 0x100);
        fake_alloc(&f, X, 0x200, PICOLL_MEM_DEVICE, 1); /* R */
        picoll_memcache_query(&fresh, &src, (void *)(X + 0x100), &info);
        f.attribute_calls = 0;
        picoll_memcache_query(&fresh, &src, (void *)X, &info);
        CHECK(info.device == 1 && f.attribute_calls == 0,
              "a live allocation behind a stale entry: %d attribute queries, expected 0 "
              "(device %d)",
              f.attribute_calls, info.device);
        int stale = 0;
        for (int k = 0; k < PICOLL_MEMCACHE_ENTRIES; k++) {
            stale += fresh.entry[k].end != 0 && fresh.entry[k].info.device != 1;
        }
        CHECK(stale == 0, "%d stale entries left over a live allocation", stale);
        fake_free(&f, X);
    }

    /* more allocations than entries: every answer stays right, round-robin replacement */
    f.attribute_calls = 0;
    for (int round = 0; round < 2; round++) {
        for (int i = 0; i < PICOLL_MEMCACHE_ENTRIES + 3; i++) {
            uintptr_t p = 0x7e0000000000 + (uintptr_t)i * 0x10000;
            if (round == 0) {
                fake_alloc(&f, p, 0x10000, i % 2 ? PICOLL_MEM_DEVICE : PICOLL_MEM_MANAGED, i % 4);
            }
            picoll_memcache_query(&cache, &src, (void *)(p + 8), &info);
            CHECK(info.kind == (i % 2 ? PICOLL_MEM_DEVICE : PICOLL_MEM_MANAGED) &&
                      info.device == i % 4,
                  "allocation %d of %d: kind %d device %d", i, PICOLL_MEMCACHE_ENTRIES + 3,
                  info.kind, info.device);
        }
    }
    CHECK(f.attribute_calls >= PICOLL_MEMCACHE_ENTRIES + 3,
          "%d attribute queries for %d allocations", f.attribute_calls,
          PICOLL_MEMCACHE_ENTRIES + 3);

    /* the last few are still cached */
    f.attribute_calls = 0;
    picoll_memcache_query(
        &cache, &src, (void *)(0x7e0000000000 + (uintptr_t)(PICOLL_MEMCACHE_ENTRIES + 2) * 0x10000),
        &info);
    CHECK(f.attribute_calls == 0, "the most recent allocation is not cached");
    return check_summary("test_memkind");
}
