/* Memory: the device arena, allocations, pinned host memory, pointer attributes and CUDA IPC.
 *
 * Each process has one device arena: a memfd of FAKECUDA_ARENA_MB, mapped read/write at one
 * address (kernels run on the CPU and dereference device pointers) between two PROT_NONE guard
 * pages. Its first EMU_TABLE_BYTES hold a table shared with every process that opens one of its
 * allocations: per allocation its id, place, and how many mappings other processes hold, which
 * they update with atomics. cuIpcOpenMemHandle maps /proc/<owner>/fd/<memfd> at the allocation's
 * pages (again between guard pages), and the owner's cuMemFree fails the test when some process
 * still maps it (rule "free-while-mapped": CUDA leaves that undefined).
 *
 * With FAKECUDA_FREE_MAPPED=1 such a free is let through, as the driver does in practice (what a
 * cache of peers' mappings relies on, as UCX's cuda_ipc does): the allocation is gone, its address
 * and its buffer id's slot may be handed out again (the slot only once every mapping of it closed),
 * and any access through a mapping of it (a kernel's load or store, a copy) fails the test (rule
 * "freed-mapping": the bytes there are another allocation's, or none); closing it is allowed. The
 * mapping knows its allocation by the owner's buffer id, which the owner's table holds while the
 * allocation lives.
 *
 * The memfd is twice the arena: its second half is the shadow of the first, 16 bytes per 16-byte
 * granule at the same offset, where the kernel's memory model (emu_launch.c) records who stored
 * each granule and when it was published; an IPC mapping maps the allocation's shadow too, so that
 * a reader in another process sees the writer's record. Freed memory's shadow is cleared.
 *
 * Allocations are 256-byte aligned, first fit from the lowest address, so a freed range is handed
 * out again (with a new buffer id), as CUDA does. Freed memory is overwritten with 0xcd, so that a
 * kernel or copy reading it gets garbage rather than the old bytes. */
#define _GNU_SOURCE
#include "emu.h"

#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#define EMU_PAGE 4096
#define EMU_ALIGN 256
#define EMU_MAX_ALLOCS 4096
#define EMU_SHARED_SLOTS 1024
#define EMU_TABLE_BYTES 65536
#define EMU_SHARED_MAGIC 0x656d7547505521ull
#define EMU_IPC_MAGIC 0x49706345u

/* The table at the start of every arena, shared with the processes that map its allocations. */
typedef struct {
    uint64_t magic;
    uint64_t arena_bytes;
    struct {
        uint64_t id;     /* 0: free slot */
        uint64_t offset; /* in the arena */
        uint64_t size;
        int32_t opens; /* mappings other processes hold (atomic) */
        int32_t pad;
    } slot[EMU_SHARED_SLOTS];
} emu_shared_t;

_Static_assert(sizeof(emu_shared_t) <= EMU_TABLE_BYTES, "shared table larger than its pages");

/* What cuIpcGetMemHandle writes into the 64 bytes of a CUipcMemHandle. */
typedef struct {
    uint32_t magic;
    int32_t pid;    /* owner */
    int32_t fd;     /* the owner's arena memfd */
    int32_t slot;   /* in the owner's shared table */
    int32_t device; /* the owner's device */
    int32_t pad;
    uint64_t offset;
    uint64_t size;
    uint64_t id; /* the owner's buffer id: the slot still holds this allocation */
} emu_ipc_t;

typedef struct {
    char reserved[64];
} emu_ipc_handle_t; /* CUipcMemHandle */

_Static_assert(sizeof(emu_ipc_t) <= sizeof(emu_ipc_handle_t), "IPC handle too large");

typedef struct {
    emu_range_t r;
    int live;
    int slot; /* device allocations: their shared-table slot, else -1 */
    /* IPC mappings */
    void *map_base; /* the reservation, guard pages included */
    size_t map_len;
    void *shadow_base; /* the allocation's pages' shadow, mapped */
    int refs;          /* opens of the same handle in this process */
    int owner_pid;
    int owner_device;
    uint64_t owner_id;
    int32_t *opens; /* the owner's counter, in its table as mapped here */
} emu_alloc_t;

/* Owners' tables as mapped here: kept for the life of the process (a few pages each). */
typedef struct {
    int pid, fd;
    emu_shared_t *table;
} emu_owner_t;

static emu_alloc_t emu_allocs[EMU_MAX_ALLOCS];
static int emu_allocs_hw; /* entries ever used: scans stop here */
static emu_owner_t emu_owners[64];
static unsigned long long emu_next_id = 1;
static uintptr_t arena_base;
static size_t arena_bytes;
static int arena_fd = -1;
static emu_shared_t *arena_table;
static char *arena_shadow; /* the shadow of arena_base's granule */
static long emu_attr_queries;
unsigned long emu_mem_generation;

size_t emu_arena_bytes(void)
{
    return arena_bytes;
}

EMU_API long fakecuda_attribute_queries(void);
EMU_API long fakecuda_attribute_queries(void)
{
    return __atomic_load_n(&emu_attr_queries, __ATOMIC_RELAXED);
}

/* Reserves len bytes between two PROT_NONE guard pages and maps fd's [off, off + len) read/write
 * in the middle. Returns the middle, or NULL. */
static void *emu_map_guarded(int fd, off_t off, size_t len, void **base)
{
    char *r = mmap(NULL, len + 2 * EMU_PAGE, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (r == MAP_FAILED) {
        return NULL;
    }
    if (mmap(r + EMU_PAGE, len, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_FIXED, fd, off) ==
        MAP_FAILED) {
        munmap(r, len + 2 * EMU_PAGE);
        return NULL;
    }
    *base = r;
    return r + EMU_PAGE;
}

int emu_mem_init_locked(void)
{
    void *base;
    arena_bytes = (size_t)emu_env_int("FAKECUDA_ARENA_MB", 256, 1, 65536) << 20;
    arena_fd = memfd_create("fakecuda-arena", MFD_CLOEXEC);
    if (arena_fd < 0 || ftruncate(arena_fd, (off_t)(2 * arena_bytes)) != 0) {
        perror("fakecuda: device arena");
        return -1;
    }
    arena_table = emu_map_guarded(arena_fd, 0, arena_bytes, &base);
    if (arena_table == NULL) {
        perror("fakecuda: mapping the device arena");
        return -1;
    }
    arena_base = (uintptr_t)arena_table;
    arena_shadow =
        mmap(NULL, arena_bytes, PROT_READ | PROT_WRITE, MAP_SHARED, arena_fd, (off_t)arena_bytes);
    if (arena_shadow == MAP_FAILED) {
        perror("fakecuda: mapping the device arena's shadow");
        return -1;
    }
    arena_table->arena_bytes = arena_bytes;
    arena_table->magic = EMU_SHARED_MAGIC;
    return 0;
}

/* ---- the allocation table ---- */

static emu_alloc_t *emu_alloc_find_locked(uintptr_t p, size_t n)
{
    for (int i = 0; i < emu_allocs_hw; i++) {
        emu_alloc_t *a = &emu_allocs[i];
        if (a->live && p >= a->r.start && p - a->r.start < a->r.size &&
            n <= a->r.size - (p - a->r.start)) {
            return a;
        }
    }
    return NULL;
}

int emu_mem_find(uintptr_t p, size_t n, emu_range_t *out)
{
    emu_alloc_t *a = emu_alloc_find_locked(p, n == 0 ? 1 : n);
    if (a == NULL) {
        return 0;
    }
    *out = a->r;
    return 1;
}

static emu_alloc_t *emu_alloc_record_locked(uintptr_t start, size_t size, emu_memkind_t kind,
                                            emu_ctx_t *ctx)
{
    for (int i = 0; i < EMU_MAX_ALLOCS; i++) {
        emu_alloc_t *a = &emu_allocs[i];
        if (!a->live) {
            memset(a, 0, sizeof(*a));
            a->r = (emu_range_t){
                .start = start, .size = size, .kind = kind, .ctx = ctx, .id = emu_next_id++};
            a->live = 1;
            a->slot = -1;
            if (i >= emu_allocs_hw) {
                emu_allocs_hw = i + 1;
            }
            return a;
        }
    }
    return NULL;
}

static void emu_alloc_forget_locked(emu_alloc_t *a)
{
    a->live = 0;
    __atomic_add_fetch(&emu_mem_generation, 1, __ATOMIC_RELEASE);
}

/* Lowest 256-byte aligned address past the table where size bytes fit. */
static uintptr_t emu_arena_fit_locked(size_t size)
{
    uintptr_t cand = arena_base + EMU_TABLE_BYTES;
    for (int moved = 1; moved;) {
        moved = 0;
        for (int i = 0; i < emu_allocs_hw; i++) {
            emu_alloc_t *a = &emu_allocs[i];
            if (a->live && (a->r.kind == EMU_MEM_DEVICE || a->r.kind == EMU_MEM_MANAGED) &&
                cand < a->r.start + a->r.size && a->r.start < cand + size) {
                cand = (a->r.start + a->r.size + EMU_ALIGN - 1) & ~(uintptr_t)(EMU_ALIGN - 1);
                moved = 1;
            }
        }
    }
    return cand + size <= arena_base + arena_bytes ? cand : 0;
}

static CUresult emu_arena_alloc(CUdeviceptr *out, size_t size, emu_memkind_t kind)
{
    emu_ctx_t *ctx = emu_ctx_current();
    CUresult rc = CUDA_SUCCESS;
    if (ctx == NULL) {
        return CUDA_ERROR_INVALID_CONTEXT;
    }
    if (size == 0) {
        return CUDA_ERROR_INVALID_VALUE;
    }
    pthread_mutex_lock(&emu_lock);
    rc = emu_capture_check_locked();
    uintptr_t p = rc == CUDA_SUCCESS ? emu_arena_fit_locked(size) : 0;
    emu_alloc_t *a = p != 0 ? emu_alloc_record_locked(p, size, kind, ctx) : NULL;
    int slot = -1;
    for (int i = 0; a != NULL && i < EMU_SHARED_SLOTS; i++) {
        /* a slot freed while mapped (FAKECUDA_FREE_MAPPED) waits for its last close */
        if (__atomic_load_n(&arena_table->slot[i].id, __ATOMIC_ACQUIRE) == 0 &&
            __atomic_load_n(&arena_table->slot[i].opens, __ATOMIC_ACQUIRE) == 0) {
            slot = i;
            break;
        }
    }
    if (rc == CUDA_SUCCESS && (a == NULL || slot < 0)) {
        if (a != NULL) {
            emu_alloc_forget_locked(a);
        }
        rc = CUDA_ERROR_OUT_OF_MEMORY;
    }
    if (rc == CUDA_SUCCESS) {
        a->slot = slot;
        a->r.shadow = arena_shadow + (p - arena_base);
        arena_table->slot[slot].offset = p - arena_base;
        arena_table->slot[slot].size = size;
        __atomic_store_n(&arena_table->slot[slot].id, a->r.id, __ATOMIC_RELEASE);
        emu_dev_live_mem[ctx->device]++;
        *out = p;
    }
    pthread_mutex_unlock(&emu_lock);
    return rc;
}

EMU_API CUresult cuMemAlloc_v2(CUdeviceptr *out, size_t size)
{
    emu_count(EMU_CALL_cuMemAlloc_v2);
    return emu_arena_alloc(out, size, EMU_MEM_DEVICE);
}

EMU_API CUresult cuMemAllocManaged(CUdeviceptr *out, size_t size, unsigned flags)
{
    emu_count(EMU_CALL_cuMemAllocManaged);
    (void)flags;
    return emu_arena_alloc(out, size, EMU_MEM_MANAGED);
}

EMU_API CUresult cuMemFree_v2(CUdeviceptr p)
{
    emu_count(EMU_CALL_cuMemFree_v2);
    pthread_mutex_lock(&emu_lock);
    emu_alloc_t *a = emu_alloc_find_locked((uintptr_t)p, 1);
    if (a == NULL || a->r.start != (uintptr_t)p ||
        (a->r.kind != EMU_MEM_DEVICE && a->r.kind != EMU_MEM_MANAGED)) {
        pthread_mutex_unlock(&emu_lock);
        return CUDA_ERROR_INVALID_VALUE;
    }
    CUresult rc = emu_capture_check_locked(); /* freeing is unsafe during a global capture */
    if (rc != CUDA_SUCCESS) {
        pthread_mutex_unlock(&emu_lock);
        return rc;
    }
    int opens = __atomic_load_n(&arena_table->slot[a->slot].opens, __ATOMIC_ACQUIRE);
    if (opens > 0 && !emu_env_int("FAKECUDA_FREE_MAPPED", 0, 0, 1)) {
        pthread_mutex_unlock(&emu_lock);
        emu_fail("free-while-mapped",
                 "cuMemFree_v2(%#llx): %zu bytes that %d IPC mapping(s) in other processes still "
                 "hold",
                 p, a->r.size, opens);
    }
    /* as CUDA, freeing waits for the device's work (which may still use the memory) */
    emu_device_idle_locked(a->r.ctx->device);
    __atomic_store_n(&arena_table->slot[a->slot].id, 0, __ATOMIC_RELEASE);
    emu_dev_live_mem[a->r.ctx->device]--;
    memset((void *)a->r.start, 0xcd, a->r.size);
    memset(a->r.shadow, 0, (a->r.size + 15) & ~(size_t)15);
    emu_alloc_forget_locked(a);
    pthread_mutex_unlock(&emu_lock);
    return CUDA_SUCCESS;
}

EMU_API CUresult cuMemHostAlloc(void **out, size_t size, unsigned flags)
{
    emu_count(EMU_CALL_cuMemHostAlloc);
    emu_ctx_t *ctx = emu_ctx_current();
    (void)flags; /* every allocation is portable and device-mapped */
    if (ctx == NULL) {
        return CUDA_ERROR_INVALID_CONTEXT;
    }
    if (size == 0) {
        return CUDA_ERROR_INVALID_VALUE;
    }
    void *m = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (m == MAP_FAILED) {
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    pthread_mutex_lock(&emu_lock);
    CUresult rc = emu_capture_check_locked();
    if (rc == CUDA_SUCCESS &&
        emu_alloc_record_locked((uintptr_t)m, size, EMU_MEM_HOST, ctx) == NULL) {
        rc = CUDA_ERROR_OUT_OF_MEMORY;
    }
    pthread_mutex_unlock(&emu_lock);
    if (rc != CUDA_SUCCESS) {
        munmap(m, size);
        return rc;
    }
    *out = m;
    return CUDA_SUCCESS;
}

EMU_API CUresult cuMemFreeHost(void *p)
{
    emu_count(EMU_CALL_cuMemFreeHost);
    pthread_mutex_lock(&emu_lock);
    emu_alloc_t *a = emu_alloc_find_locked((uintptr_t)p, 1);
    if (a == NULL || a->r.start != (uintptr_t)p || a->r.kind != EMU_MEM_HOST) {
        pthread_mutex_unlock(&emu_lock);
        return CUDA_ERROR_INVALID_VALUE;
    }
    CUresult rc = emu_capture_check_locked();
    if (rc != CUDA_SUCCESS) {
        pthread_mutex_unlock(&emu_lock);
        return rc;
    }
    emu_device_idle_locked(a->r.ctx->device);
    munmap(p, a->r.size);
    emu_alloc_forget_locked(a);
    pthread_mutex_unlock(&emu_lock);
    return CUDA_SUCCESS;
}

EMU_API CUresult cuMemHostGetDevicePointer_v2(CUdeviceptr *out, void *p, unsigned flags)
{
    emu_count(EMU_CALL_cuMemHostGetDevicePointer_v2);
    if (flags != 0) {
        return CUDA_ERROR_INVALID_VALUE;
    }
    pthread_mutex_lock(&emu_lock);
    emu_alloc_t *a = emu_alloc_find_locked((uintptr_t)p, 1);
    int ok = a != NULL && a->r.kind == EMU_MEM_HOST;
    pthread_mutex_unlock(&emu_lock);
    if (!ok) {
        return CUDA_ERROR_INVALID_VALUE;
    }
    *out = (CUdeviceptr)(uintptr_t)p; /* one address space: the host address */
    return CUDA_SUCCESS;
}

EMU_API CUresult cuMemGetInfo_v2(size_t *free_bytes, size_t *total)
{
    size_t used = EMU_TABLE_BYTES;
    emu_count(EMU_CALL_cuMemGetInfo_v2);
    if (emu_ctx_current() == NULL) {
        return CUDA_ERROR_INVALID_CONTEXT;
    }
    pthread_mutex_lock(&emu_lock);
    for (int i = 0; i < emu_allocs_hw; i++) {
        if (emu_allocs[i].live &&
            (emu_allocs[i].r.kind == EMU_MEM_DEVICE || emu_allocs[i].r.kind == EMU_MEM_MANAGED)) {
            used += emu_allocs[i].r.size;
        }
    }
    pthread_mutex_unlock(&emu_lock);
    *free_bytes = arena_bytes - used;
    *total = arena_bytes;
    return CUDA_SUCCESS;
}

/* ---- pointer attributes ---- */

/* One attribute of the range r (NULL: memory CUDA does not know, which reads as zeros): those
 * of the strict fake driver too (cu_abi.h), and the ones only this driver answers. */
static int emu_attribute(const emu_range_t *r, uintptr_t p, int attr, void *data)
{
    switch (attr) {
    case 3: /* DEVICE_POINTER */ *(CUdeviceptr *)data = r != NULL ? p : 0; return 0;
    case 4: /* HOST_POINTER */
        *(void **)data =
            r != NULL && (r->kind == EMU_MEM_HOST || r->kind == EMU_MEM_MANAGED) ? (void *)p : NULL;
        return 0;
    case 6: /* SYNC_MEMOPS */ *(int *)data = 0; return 0;
    case 13: /* MAPPED */ *(int *)data = r != NULL; return 0;
    default: break;
    }
    cu_abi_range_t c;
    if (r != NULL) {
        c = (cu_abi_range_t){.ctx = r->ctx,
                             .host = r->kind == EMU_MEM_HOST,
                             .managed = r->kind == EMU_MEM_MANAGED,
                             .device = r->ctx->device,
                             .id = r->id,
                             .start = r->start,
                             .size = r->size};
    }
    return cu_abi_attribute(r != NULL ? &c : NULL, attr, data);
}

EMU_API CUresult cuPointerGetAttribute(void *data, int attr, CUdeviceptr p)
{
    emu_range_t r;
    int rc = -1;
    emu_count(EMU_CALL_cuPointerGetAttribute);
    pthread_mutex_lock(&emu_lock);
    if (emu_mem_find((uintptr_t)p, 1, &r)) {
        rc = emu_attribute(&r, (uintptr_t)p, attr, data);
    }
    pthread_mutex_unlock(&emu_lock);
    /* unlike the plural call, CUDA answers an error for memory it does not know */
    return rc == 0 ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}

EMU_API CUresult cuPointerGetAttributes(unsigned n, int *attrs, void **data, CUdeviceptr p)
{
    emu_range_t r;
    CUresult rc = CUDA_SUCCESS;
    emu_count(EMU_CALL_cuPointerGetAttributes);
    __atomic_add_fetch(&emu_attr_queries, 1, __ATOMIC_RELAXED);
    pthread_mutex_lock(&emu_lock);
    int known = emu_mem_find((uintptr_t)p, 1, &r);
    for (unsigned i = 0; i < n; i++) {
        if (emu_attribute(known ? &r : NULL, (uintptr_t)p, attrs[i], data[i]) != 0) {
            rc = CUDA_ERROR_INVALID_VALUE;
        }
    }
    pthread_mutex_unlock(&emu_lock);
    return rc;
}

/* ---- CUDA IPC ---- */

EMU_API CUresult cuIpcGetMemHandle(emu_ipc_handle_t *h, CUdeviceptr p)
{
    emu_ipc_t ipc = {.magic = EMU_IPC_MAGIC, .pid = (int32_t)getpid(), .fd = arena_fd};
    (void)ipc.pad;
    emu_count(EMU_CALL_cuIpcGetMemHandle);
    pthread_mutex_lock(&emu_lock);
    emu_alloc_t *a = emu_alloc_find_locked((uintptr_t)p, 1);
    int ok = a != NULL && a->r.kind == EMU_MEM_DEVICE;
    if (ok) {
        ipc.slot = a->slot;
        ipc.device = a->r.ctx->device;
        ipc.offset = a->r.start - arena_base;
        ipc.size = a->r.size;
        ipc.id = a->r.id;
    }
    pthread_mutex_unlock(&emu_lock);
    if (!ok) {
        return CUDA_ERROR_INVALID_VALUE;
    }
    memset(h, 0, sizeof(*h));
    memcpy(h->reserved, &ipc, sizeof(ipc));
    return CUDA_SUCCESS;
}

/* The owner's shared table as mapped here, mapping it at the first use (fd: the owner's memfd,
 * opened here). Lock held. */
static emu_shared_t *emu_owner_table_locked(int pid, int owner_fd, int fd)
{
    int free_slot = -1;
    for (int i = 0; i < 64; i++) {
        if (emu_owners[i].table != NULL && emu_owners[i].pid == pid &&
            emu_owners[i].fd == owner_fd) {
            return emu_owners[i].table;
        }
        if (emu_owners[i].table == NULL && free_slot < 0) {
            free_slot = i;
        }
    }
    if (free_slot < 0) {
        return NULL;
    }
    emu_shared_t *t = mmap(NULL, EMU_TABLE_BYTES, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (t == MAP_FAILED) {
        return NULL;
    }
    if (t->magic != EMU_SHARED_MAGIC) {
        munmap(t, EMU_TABLE_BYTES);
        return NULL;
    }
    emu_owners[free_slot] = (emu_owner_t){.pid = pid, .fd = owner_fd, .table = t};
    return t;
}

/* An existing mapping of the same allocation in ctx: opened again, it is the same address. */
static emu_alloc_t *emu_mapping_find_locked(const emu_ipc_t *ipc, emu_ctx_t *ctx)
{
    for (int i = 0; i < emu_allocs_hw; i++) {
        emu_alloc_t *a = &emu_allocs[i];
        if (a->live && a->r.kind == EMU_MEM_MAPPED && a->owner_pid == ipc->pid &&
            a->owner_id == ipc->id && a->r.ctx == ctx) {
            return a;
        }
    }
    return NULL;
}

/* CUDA: "CUipcMemHandles from each CUdevice in a given process may only be opened by one
 * CUcontext per CUdevice per other process". Another context of ctx's device that holds a live
 * mapping of an allocation of the same owner process and owner device, or NULL. Lock held. */
static emu_ctx_t *emu_mapping_other_ctx_locked(const emu_ipc_t *ipc, emu_ctx_t *ctx)
{
    for (int i = 0; i < emu_allocs_hw; i++) {
        emu_alloc_t *a = &emu_allocs[i];
        if (a->live && a->r.kind == EMU_MEM_MAPPED && a->owner_pid == ipc->pid &&
            a->owner_device == ipc->device && a->r.ctx != ctx && a->r.ctx->device == ctx->device) {
            return a->r.ctx;
        }
    }
    return NULL;
}

/* Maps the allocation ipc names; counts the mapping in the owner's table. Lock held. */
static CUresult emu_ipc_map_locked(const emu_ipc_t *ipc, emu_ctx_t *ctx, CUdeviceptr *out)
{
    char path[64];
    CUresult rc = CUDA_ERROR_INVALID_VALUE;
    snprintf(path, sizeof(path), "/proc/%d/fd/%d", (int)ipc->pid, (int)ipc->fd);
    int fd = open(path, O_RDWR | O_CLOEXEC);
    if (fd < 0) {
        return CUDA_ERROR_INVALID_VALUE; /* the owner is gone */
    }
    emu_shared_t *t = emu_owner_table_locked(ipc->pid, ipc->fd, fd);
    if (t == NULL || ipc->slot < 0 || ipc->slot >= EMU_SHARED_SLOTS) {
        goto out;
    }
    int32_t *opens = &t->slot[ipc->slot].opens;
    __atomic_add_fetch(opens, 1, __ATOMIC_ACQ_REL);
    /* counted first, checked second: a free racing with this open sees the count */
    if (__atomic_load_n(&t->slot[ipc->slot].id, __ATOMIC_ACQUIRE) != ipc->id) {
        __atomic_sub_fetch(opens, 1, __ATOMIC_ACQ_REL);
        goto out; /* freed since the handle was made */
    }
    uint64_t page_off = ipc->offset & ~(uint64_t)(EMU_PAGE - 1);
    size_t delta = (size_t)(ipc->offset - page_off);
    size_t len = (delta + ipc->size + EMU_PAGE - 1) & ~(size_t)(EMU_PAGE - 1);
    void *base;
    char *m = emu_map_guarded(fd, (off_t)page_off, len, &base);
    char *sh = m != NULL ? mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED, fd,
                                (off_t)(t->arena_bytes + page_off))
                         : MAP_FAILED;
    emu_alloc_t *a = sh != MAP_FAILED ? emu_alloc_record_locked((uintptr_t)(m + delta), ipc->size,
                                                                EMU_MEM_MAPPED, ctx)
                                      : NULL;
    if (a == NULL) {
        if (sh != MAP_FAILED) {
            munmap(sh, len);
        }
        if (m != NULL) {
            munmap(base, len + 2 * EMU_PAGE);
        }
        __atomic_sub_fetch(opens, 1, __ATOMIC_ACQ_REL);
        rc = CUDA_ERROR_OUT_OF_MEMORY;
        goto out;
    }
    a->map_base = base;
    a->map_len = len + 2 * EMU_PAGE;
    a->shadow_base = sh;
    a->r.shadow = sh + delta;
    a->refs = 1;
    a->owner_pid = ipc->pid;
    a->owner_device = ipc->device;
    a->owner_id = ipc->id;
    a->r.owner_word = &t->slot[ipc->slot].id;
    a->r.owner_id = ipc->id;
    a->opens = opens;
    *out = a->r.start;
    rc = CUDA_SUCCESS;
out:
    close(fd);
    return rc;
}

/* CUDA's rules for opening a handle (documented under cuIpcOpenMemHandle): the one valid flag is
 * CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS; a handle of another device needs peer access to it
 * (cuDeviceCanAccessPeer, FAKECUDA_NO_PEER); handles of one device of a process are opened by one
 * context per device of the opening process (CUDA documents the rule, not the error code: this
 * answers CUDA_ERROR_INVALID_CONTEXT); the same handle opened again in the same context is the
 * same address, counted. */
EMU_API CUresult cuIpcOpenMemHandle_v2(CUdeviceptr *out, emu_ipc_handle_t h, unsigned flags)
{
    emu_ipc_t ipc;
    emu_count(EMU_CALL_cuIpcOpenMemHandle_v2);
    memcpy(&ipc, h.reserved, sizeof(ipc));
    emu_ctx_t *ctx = emu_ctx_current();
    if (ctx == NULL) {
        return CUDA_ERROR_INVALID_CONTEXT;
    }
    if (flags != EMU_IPC_LAZY_ENABLE_PEER_ACCESS) {
        return CUDA_ERROR_INVALID_VALUE;
    }
    if (ipc.magic != EMU_IPC_MAGIC || ipc.pid == (int32_t)getpid()) {
        return CUDA_ERROR_INVALID_VALUE; /* CUDA opens no handle of the calling process */
    }
    if (ipc.device != ctx->device && !emu_peer_access(ctx->device, ipc.device)) {
        return CUDA_ERROR_PEER_ACCESS_UNSUPPORTED;
    }
    pthread_mutex_lock(&emu_lock);
    CUresult rc = emu_capture_check_locked();
    emu_alloc_t *a = rc == CUDA_SUCCESS ? emu_mapping_find_locked(&ipc, ctx) : NULL;
    if (a != NULL) {
        a->refs++;
        *out = a->r.start;
    } else if (rc == CUDA_SUCCESS && emu_mapping_other_ctx_locked(&ipc, ctx) != NULL) {
        rc = CUDA_ERROR_INVALID_CONTEXT;
    } else if (rc == CUDA_SUCCESS) {
        rc = emu_ipc_map_locked(&ipc, ctx, out);
    }
    pthread_mutex_unlock(&emu_lock);
    return rc;
}

EMU_API CUresult cuIpcCloseMemHandle(CUdeviceptr p)
{
    emu_count(EMU_CALL_cuIpcCloseMemHandle);
    pthread_mutex_lock(&emu_lock);
    emu_alloc_t *a = emu_alloc_find_locked((uintptr_t)p, 1);
    if (a == NULL || a->r.kind != EMU_MEM_MAPPED || a->r.start != (uintptr_t)p) {
        pthread_mutex_unlock(&emu_lock);
        return CUDA_ERROR_INVALID_VALUE;
    }
    if (--a->refs == 0) {
        munmap(a->map_base, a->map_len);
        munmap(a->shadow_base, a->map_len - 2 * EMU_PAGE);
        __atomic_sub_fetch(a->opens, 1, __ATOMIC_ACQ_REL);
        emu_alloc_forget_locked(a);
    }
    pthread_mutex_unlock(&emu_lock);
    return CUDA_SUCCESS;
}

void emu_mem_reset_ctx_locked(emu_ctx_t *c)
{
    for (int i = 0; i < emu_allocs_hw; i++) {
        emu_alloc_t *a = &emu_allocs[i];
        if (!a->live || a->r.ctx != c) {
            continue;
        }
        switch (a->r.kind) {
        case EMU_MEM_DEVICE:
        case EMU_MEM_MANAGED:
            /* peers' mappings of it stay (as CUDA's, they now name freed memory) */
            __atomic_store_n(&arena_table->slot[a->slot].id, 0, __ATOMIC_RELEASE);
            emu_dev_live_mem[c->device]--;
            memset((void *)a->r.start, 0xcd, a->r.size);
            break;
        case EMU_MEM_HOST: munmap((void *)a->r.start, a->r.size); break;
        case EMU_MEM_MAPPED:
            munmap(a->map_base, a->map_len);
            __atomic_sub_fetch(a->opens, 1, __ATOMIC_ACQ_REL);
            break;
        default: break;
        }
        emu_alloc_forget_locked(a);
    }
}

void emu_mapping_check(const emu_range_t *r, uintptr_t p, const char *what)
{
    if (r->kind == EMU_MEM_MAPPED && emu_mapping_stale(r->owner_word, r->owner_id)) {
        emu_fail("freed-mapping",
                 "%s at %p: through an IPC mapping (at %p, %zu bytes) of an allocation its owner "
                 "freed since the mapping was opened (buffer id %llu): the bytes there are no "
                 "longer that buffer's",
                 what, (void *)p, (void *)r->start, r->size, r->owner_id);
    }
}

int emu_in_arena(uintptr_t p)
{
    return p >= arena_base && p - arena_base < arena_bytes;
}
