/* The zero-copy path of the device collectives (issue 50): the kernels read the peers' user
 * buffers where they are, mapped through the process's IPC cache (cuda_ipc_cache.c), with no copy
 * through the workspace.
 *
 * A call takes it only where every local rank agrees, twice. In the node's vote (coll/vote.c; a
 * call that may take it never goes on the hot path) each rank describes its buffers
 * (picoll_cuda_zc_export: a registered range's description, made once by picoll_register, or with
 * PICOLL_CUDA_ZERO_COPY=on any device buffer's, made now) in its data buffer of the node
 * workspace, and votes yes where it could; the vote's barrier publishes them. Where every rank
 * said yes, the call (picoll_cuda_zc_map, from cuda_colls.c) maps every peer's buffers through the
 * cache and a second barrier of the node says whether every rank mapped all of them: then the
 * kernel's zero-copy mode runs (one launch, cuda_kernel.h); else every rank copies, together.
 * The entries stay held until the kernel ended (picoll_cuda_zc_release): the cache never closes a
 * mapping a call reads through.
 *
 * The registry of ranges (picoll_register) is the process's, under one lock: a range is exported
 * once, when it is registered, and a call whose buffer lies inside one takes its description with
 * no driver call. A range must be deregistered before its memory is freed (as NCCL asks of
 * ncclCommRegister): its description names the allocation by buffer id, so a peer that meets a
 * freed and reallocated range opens the new allocation, never reads the old one, but the owner's
 * own description would be stale. */
#include "build-config.h"
#include "cuda/cuda_coll_int.h"
#include "cuda/cuda_ipc_cache.h"
#include "mem/memkind.h"
#include "util/config.h"
#include "util/export.h"
#include "util/log.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#define ZC_REG_MAX 4096 /* registered ranges at most in a process */

/* What a rank tells its peers of its call's buffers, in its data buffer of the node workspace. */
typedef struct {
    uint32_t ok;       /* described (the rest is meaningful) */
    uint32_t in_place; /* no send buffer: the input is in the receive buffer */
    picoll_cuda_ipc_buf_t send, recv;
} zc_desc_t;
_Static_assert(sizeof(zc_desc_t) <= PICOLL_CUDA_ZC_DESC_BYTES,
               "a rank's description fits what cuda_dev.h promises of it");

typedef struct {
    const void *scope; /* the communicator's context it is for; NULL: every one */
    char *ptr;         /* NULL: a free entry */
    size_t bytes;
    picoll_cuda_ipc_buf_t buf; /* ptr's description */
} zc_reg_t;

static zc_reg_t zc_reg[ZC_REG_MAX];
/* The scope of a range whose communicator was freed (picoll_cuda_zc_scope_end): no call matches
 * it, and its slot stays its handle's until picoll_deregister. */
static const char zc_scope_ended;
#define ZC_SCOPE_ENDED ((const void *)&zc_scope_ended)
static picoll_cuda_zc_stats_t zc_stats;
static pthread_mutex_t zc_lock = PTHREAD_MUTEX_INITIALIZER;

/* Whether a kernel may read bytes from the buffer at offset off of an allocation of size bytes
 * through a mapping: 16-byte aligned and its last 16-byte line inside the allocation (the
 * reduction loads whole lines, cuda/coll_kernel_reduce.cuh). */
static int zc_readable(uint64_t ptr, uint64_t off, uint64_t size, size_t bytes)
{
    return ptr % 16 == 0 && off <= size && ((bytes + 15) & ~(size_t)15) <= size - off;
}

picoll_status_t picoll_cuda_register(const void *scope, void *ptr, size_t bytes, void **handle)
{
    picoll_cuda_ipc_buf_t buf;
    if (ptr == NULL || bytes == 0 || handle == NULL) {
        return PICOLL_ERR_INVALID_PARAM;
    }
    if (picoll_cudrv_load() != PICOLL_OK) {
        return PICOLL_ERR_NOT_SUPPORTED; /* no driver: picoll_register says so */
    }
    picoll_status_t st = picoll_cuda_ipc_buf_export(ptr, 0, &buf, NULL);
    if (st == PICOLL_ERR_NOT_SUPPORTED) {
        picoll_warn("picoll_register: %p is not device memory that CUDA IPC exports (host or "
                    "managed memory)",
                    ptr);
        return PICOLL_ERR_INVALID_PARAM;
    }
    if (st != PICOLL_OK) {
        return st;
    }
    if (buf.offset + bytes > buf.size) {
        picoll_warn("picoll_register: %zu bytes at %p run past the end of their allocation (%llu "
                    "bytes from %p)",
                    bytes, ptr, (unsigned long long)buf.size, (void *)(uintptr_t)buf.base);
        return PICOLL_ERR_INVALID_PARAM;
    }
    pthread_mutex_lock(&zc_lock);
    for (int i = 0; i < ZC_REG_MAX; i++) {
        if (zc_reg[i].ptr == NULL) {
            zc_reg[i] = (zc_reg_t){.scope = scope, .ptr = ptr, .bytes = bytes, .buf = buf};
            *handle = &zc_reg[i];
            zc_stats.ranges++;
            pthread_mutex_unlock(&zc_lock);
            return PICOLL_OK;
        }
    }
    pthread_mutex_unlock(&zc_lock);
    picoll_warn("picoll_register: %d ranges are registered already (the most a process holds)",
                ZC_REG_MAX);
    return PICOLL_ERR_NO_MEMORY;
}

picoll_status_t picoll_cuda_deregister(void *handle)
{
    zc_reg_t *e = handle;
    uintptr_t at = (uintptr_t)handle - (uintptr_t)zc_reg;
    if ((uintptr_t)handle < (uintptr_t)zc_reg || at >= sizeof(zc_reg) || at % sizeof(*e) != 0) {
        return PICOLL_ERR_INVALID_PARAM;
    }
    pthread_mutex_lock(&zc_lock);
    picoll_status_t st = e->ptr != NULL ? PICOLL_OK : PICOLL_ERR_INVALID_PARAM;
    if (e->ptr != NULL) {
        zc_stats.ranges -= e->scope != ZC_SCOPE_ENDED; /* an ended one was counted off then */
        memset(e, 0, sizeof(*e));
    }
    pthread_mutex_unlock(&zc_lock);
    return st;
}

/* For the tests: the ranges registered now that a call may take (not those ended with their
 * communicator). */
PICOLL_EXPORT long picoll_test_zc_ranges(void);
long picoll_test_zc_ranges(void)
{
    pthread_mutex_lock(&zc_lock);
    long n = zc_stats.ranges;
    pthread_mutex_unlock(&zc_lock);
    return n;
}

void picoll_cuda_zc_scope_end(const void *scope)
{
    if (scope == NULL) {
        return;
    }
    pthread_mutex_lock(&zc_lock);
    for (int i = 0; i < ZC_REG_MAX; i++) {
        if (zc_reg[i].ptr != NULL && zc_reg[i].scope == scope) {
            zc_reg[i].scope = ZC_SCOPE_ENDED;
            zc_stats.ranges--;
        }
    }
    pthread_mutex_unlock(&zc_lock);
}

void *picoll_cuda_reg_find_ptr(const void *ptr)
{
    void *h = NULL;
    pthread_mutex_lock(&zc_lock);
    for (int i = 0; i < ZC_REG_MAX && h == NULL; i++) {
        h = zc_reg[i].ptr == ptr ? &zc_reg[i] : NULL;
    }
    pthread_mutex_unlock(&zc_lock);
    return h;
}

/* *out: the description of bytes at ptr from a range registered for scope (or for every one);
 * 1 where one holds them (counted in the stats). */
static int zc_reg_find(const void *scope, const char *ptr, size_t bytes, picoll_cuda_ipc_buf_t *out)
{
    int found = 0;
    pthread_mutex_lock(&zc_lock);
    for (int i = 0; i < ZC_REG_MAX && !found; i++) {
        const zc_reg_t *e = &zc_reg[i];
        if (e->ptr != NULL && (e->scope == NULL || e->scope == scope) && ptr >= e->ptr &&
            (size_t)(ptr - e->ptr) <= e->bytes && bytes <= e->bytes - (size_t)(ptr - e->ptr)) {
            *out = e->buf;
            out->offset += (uint64_t)(ptr - e->ptr);
            found = 1;
        }
    }
    zc_stats.registered += found;
    pthread_mutex_unlock(&zc_lock);
    return found;
}

/* One buffer's description: a registered range's, else (PICOLL_CUDA_ZERO_COPY=on, or reused
 * from the second call that meets its allocation) made now. Mode reused weighs a miss against the
 * copy it saves by what the buffer's past says of its future: a buffer met once (a temporary) is
 * copied, and costs its owner an attribute query and its peers nothing; one met again (a training
 * loop's buckets and shards, the caching allocator's blocks, the application's reused buffers) is
 * mapped once (cuIpcGetMemHandle at the owner, an open at each peer) and read in place at every
 * call after. Every rank's vote says no where its own buffer is met for the first time, so the
 * ranks copy together with no second barrier. */
static int zc_describe(const picoll_cuda_ws_t *ws, const void *scope, const void *ptr, size_t bytes,
                       picoll_cuda_ipc_buf_t *out)
{
    if (zc_reg_find(scope, ptr, bytes, out)) {
        /* described when it was registered (counted there) */
    } else if (picoll_cfg.cuda_zero_copy == PICOLL_CUDA_ZC_ON ||
               picoll_cfg.cuda_zero_copy == PICOLL_CUDA_ZC_REUSED) {
        picoll_cuda_saved_ctx_t saved;
        int first = 0;
        /* relaxed capture mode: a stream call may be captured into a graph */
        if (picoll_cuda_enter_setup(ws->ctx, &saved) != PICOLL_OK) {
            return 0;
        }
        picoll_status_t st = picoll_cuda_ipc_buf_export(
            ptr,
            picoll_cfg.cuda_zero_copy == PICOLL_CUDA_ZC_REUSED ? PICOLL_CUDA_IPC_EXPORT_REUSED : 0,
            out, &first);
        picoll_cuda_leave(&saved);
        if (st != PICOLL_OK || first) {
            return 0;
        }
    } else {
        return 0;
    }
    return zc_readable((uint64_t)(uintptr_t)ptr, out->offset, out->size, bytes);
}

int picoll_cuda_zc_export(picoll_cuda_ws_t *ws, const void *scope, const void *sendbuf,
                          const void *recvbuf, size_t send_bytes, size_t recv_bytes, void *out)
{
    zc_desc_t d;
    memset(&d, 0, sizeof(d));
    d.in_place = sendbuf == MPI_IN_PLACE;
    /* every peer mapped (the hybrid cube mesh maps the quad and the relay only): the import
     * claims the cache's mappings need are the workspace's */
    int all = !ws->hcm && (!ws->on_stream || ws->zc_stream_shm != NULL) &&
              picoll_cfg.cuda_zero_copy != PICOLL_CUDA_ZC_OFF;
    for (int r = 0; r < ws->nlocal && all; r++) {
        all = ws->peer[r] != NULL;
    }
    /* both described even where the first fails: mode reused records each buffer it meets, so
     * that a call whose buffers are both met again takes the path */
    int rok = all && zc_describe(ws, scope, recvbuf, recv_bytes, &d.recv);
    int sok = d.in_place || (all && zc_describe(ws, scope, sendbuf, send_bytes, &d.send));
    d.ok = rok && sok;
    memcpy(out, &d, sizeof(d));
    return (int)d.ok;
}

void picoll_cuda_zc_arm(picoll_cuda_ws_t *ws, picoll_shm_t *shm)
{
    ws->zc_shm = shm;
    ws->zc_epoch =
        shm->epoch; /* the vote's barrier: the descriptions are in that epoch's buffers */
    ws->zc_armed = 1;
}

int picoll_cuda_zc_nothing_registered(void)
{
    pthread_mutex_lock(&zc_lock);
    int none = picoll_cfg.cuda_zero_copy == PICOLL_CUDA_ZC_REGISTERED && zc_stats.ranges == 0;
    pthread_mutex_unlock(&zc_lock);
    return none;
}

int picoll_cuda_zc_last(const picoll_cuda_ws_t *ws)
{
    return ws != NULL && ws->zc_last;
}

/* Peer r's buffer b mapped here (+ off), held in the call's entries; NULL where the cache
 * refused. */
static const char *zc_map_one(picoll_cuda_ws_t *ws, coll_call_t *c, int r,
                              const picoll_cuda_ipc_buf_t *b, size_t off)
{
    void *p = NULL;
    int entry = -1;
    if (picoll_cuda_ipc_cache_get(ws->ctx, ws->pid[r], ws->pstart[r], b, &p, &entry) != PICOLL_OK) {
        return NULL;
    }
    c->zc_entry[c->zc_n++] = entry;
    return (const char *)p + off;
}

/* Every peer's buffers of c's mode mapped (block: allgather's block bytes; bcast: the root's
 * buffer only); 1 where all were. Alltoall and reduce-scatter read the peers' send buffers, which
 * in place are receive buffers their owners write as they go: not in place only (on every rank:
 * each reads its own here). */
static int zc_map_peers(picoll_cuda_ws_t *ws, coll_call_t *c, picoll_cuda_kmode_t zmode,
                        size_t block)
{
    if ((zmode == PICOLL_CUDA_K_ALLTOALL_ZC || zmode == PICOLL_CUDA_K_REDSCAT_ZC) &&
        c->src == c->dst) {
        return 0;
    }
    for (int r = 0; r < ws->nlocal; r++) {
        if (r == ws->me) {
            c->p.zsrc[r] = c->src;
            c->p.zdst[r] = c->dst;
            continue;
        }
        if (zmode == PICOLL_CUDA_K_BCAST_ZC && r != c->p.root) {
            continue; /* bcast reads the root's buffer only */
        }
        zc_desc_t d;
        memcpy(&d, picoll_shm_slot(ws->zc_shm, r, ws->zc_epoch), sizeof(d));
        if (!d.ok || ((zmode == PICOLL_CUDA_K_ALLTOALL_ZC || zmode == PICOLL_CUDA_K_REDSCAT_ZC) &&
                      d.in_place)) {
            return 0;
        }
        if (zmode == PICOLL_CUDA_K_ALLGATHER_ZC && d.in_place) {
            c->p.zsrc[r] = zc_map_one(ws, c, r, &d.recv, (size_t)r * block);
        } else {
            c->p.zsrc[r] = zc_map_one(ws, c, r, d.in_place ? &d.recv : &d.send, 0);
        }
        if (c->p.zsrc[r] == NULL) {
            return 0;
        }
        if (zmode == PICOLL_CUDA_K_TWOSHOT_ZC &&
            (c->p.zdst[r] = (char *)zc_map_one(ws, c, r, &d.recv, 0)) == NULL) {
            return 0;
        }
    }
    return 1;
}

int picoll_cuda_zc_map(picoll_cuda_ws_t *ws, coll_call_t *c)
{
    picoll_cuda_kmode_t zmode = c->p.mode == PICOLL_CUDA_K_TWOSHOT     ? PICOLL_CUDA_K_TWOSHOT_ZC
                                : c->p.mode == PICOLL_CUDA_K_ALLGATHER ? PICOLL_CUDA_K_ALLGATHER_ZC
                                : c->p.mode == PICOLL_CUDA_K_ALLTOALL  ? PICOLL_CUDA_K_ALLTOALL_ZC
                                : c->p.mode == PICOLL_CUDA_K_REDSCAT   ? PICOLL_CUDA_K_REDSCAT_ZC
                                : c->p.mode == PICOLL_CUDA_K_BCAST     ? PICOLL_CUDA_K_BCAST_ZC
                                                                       : PICOLL_CUDA_K_ONESHOT;
    if (!ws->zc_armed) {
        return 0;
    }
    ws->zc_armed = 0;
    c->zc_n = 0;
    /* every rank of the node takes part in the second barrier: the armed call's mode is the same
     * on all (the vote's algorithm). A stream's call may be captured into a graph: the opens in
     * relaxed capture mode */
    picoll_cuda_saved_ctx_t saved;
    int entered = ws->on_stream && picoll_cuda_enter_setup(ws->ctx, &saved) == PICOLL_OK;
    int ok = zmode != PICOLL_CUDA_K_ONESHOT && (!ws->on_stream || entered) &&
             zc_map_peers(ws, c, zmode, c->p.dst_stride);
    if (entered) {
        picoll_cuda_leave(&saved);
    }
    ok = (int)picoll_shm_barrier_mask(ws->zc_shm, ok ? 1u : 0u, c->coll);
    pthread_mutex_lock(&zc_lock);
    zc_stats.calls += ok;
    zc_stats.declined += !ok;
    pthread_mutex_unlock(&zc_lock);
    if (!ok) {
        picoll_cuda_zc_release(c);
        return 0;
    }
    c->p.mode = (int)zmode;
    c->arrivals = zmode == PICOLL_CUDA_K_TWOSHOT_ZC ? 3 : 2;
    return 1;
}

void picoll_cuda_zc_release(coll_call_t *c)
{
    for (int i = 0; i < c->zc_n; i++) {
        picoll_cuda_ipc_cache_release(c->zc_entry[i]);
    }
    c->zc_n = 0;
}

/* A stream's call: its entries, released by a host function queued after its kernel. */
typedef struct {
    int n;
    int entry[2 * PICOLL_CUDA_MAX_LOCAL];
} zc_held_t;

static void zc_release_host(void *arg)
{
    zc_held_t *h = arg;
    for (int i = 0; i < h->n; i++) {
        picoll_cuda_ipc_cache_release(h->entry[i]);
    }
    free(h);
}

void picoll_cuda_zc_stream_release(picoll_cuda_ws_t *ws, coll_call_t *c)
{
    int capturing = PICOLL_CU_STREAM_CAPTURE_STATUS_NONE;
    zc_held_t *h = NULL;
    if (c->zc_n == 0) {
        return;
    }
    /* a graph replays the kernel with these mappings: they stay held for the process's life */
    if (picoll_cu.stream_is_capturing(ws->stream, &capturing) == 0 &&
        capturing == PICOLL_CU_STREAM_CAPTURE_STATUS_NONE && picoll_cu.launch_host_func != NULL &&
        (h = malloc(sizeof(*h))) != NULL) {
        h->n = c->zc_n;
        memcpy(h->entry, c->zc_entry, sizeof(int) * (size_t)c->zc_n);
        if (picoll_cu.launch_host_func(ws->stream, zc_release_host, h) == 0) {
            c->zc_n = 0;
            return;
        }
        free(h);
    }
    pthread_mutex_lock(&zc_lock);
    zc_stats.pinned += c->zc_n;
    pthread_mutex_unlock(&zc_lock);
    c->zc_n = 0;
}

int picoll_cuda_zc_stream_exchange(picoll_cuda_ws_t *ws, const void *scope, const void *sendbuf,
                                   const void *recvbuf, size_t send_bytes, size_t recv_bytes,
                                   const char *coll)
{
    picoll_shm_t *shm = ws->zc_stream_shm;
    /* the same on every rank: made with the stream's workspace (or on none), and the skips
     * follow from the last exchange's agreed bits */
    if (shm == NULL || picoll_cuda_zc_skip_take(&ws->zc_skip)) {
        return 0;
    }
    int ok = picoll_cuda_zc_export(ws, scope, sendbuf, recvbuf, send_bytes, recv_bytes,
                                   picoll_shm_slot(shm, shm->me, shm->epoch + 1));
    uint32_t all = picoll_shm_barrier_mask(
        shm, (ok ? 1u : 0u) | (picoll_cuda_zc_nothing_registered() ? 2u : 0u), coll);
    picoll_cuda_zc_skip_learn(&ws->zc_skip, (all & 2u) != 0);
    if (!(all & 1u)) {
        return 0;
    }
    picoll_cuda_zc_arm(ws, shm);
    return 1;
}

void picoll_cuda_ws_set_exchange(picoll_cuda_ws_t *ws, picoll_shm_t *shm)
{
    ws->zc_stream_shm = shm;
}

void picoll_cuda_zc_forget(picoll_cuda_ws_t *ws)
{
    if (ws->zc_stream_shm != NULL) {
        picoll_shm_destroy(ws->zc_stream_shm);
        free(ws->zc_stream_shm);
        ws->zc_stream_shm = NULL;
    }
}

void picoll_cuda_zc_stats(picoll_cuda_zc_stats_t *out)
{
    picoll_cuda_ipc_cache_stats_t cs;
    picoll_cuda_ipc_cache_stats(&cs);
    pthread_mutex_lock(&zc_lock);
    *out = zc_stats;
    pthread_mutex_unlock(&zc_lock);
    out->first_seen = cs.first_seen;
}

/* The device's primary context (the runtime API's, PyTorch's), retained once per device. */
static picoll_cu_context_t zc_primary(int device)
{
    return picoll_cudrv_load() == PICOLL_OK ? picoll_cuda_primary_context(device) : NULL;
}

void *picoll_cuda_mem_alloc(size_t bytes, int device)
{
    picoll_cu_context_t ctx = bytes != 0 ? zc_primary(device) : NULL;
    picoll_cu_deviceptr_t p = 0;
    picoll_cuda_saved_ctx_t saved;
    void *handle;
    if (ctx == NULL || picoll_cuda_enter(ctx, &saved) != PICOLL_OK) {
        return NULL;
    }
    if (picoll_cudrv_check(picoll_cu.mem_alloc(&p, bytes), "cuMemAlloc") == PICOLL_OK &&
        picoll_cuda_register(NULL, (void *)(uintptr_t)p, bytes, &handle) != PICOLL_OK) {
        picoll_debug("picoll_cuda_alloc: %zu bytes not registered: plain device memory", bytes);
    }
    picoll_cuda_leave(&saved);
    return (void *)(uintptr_t)p;
}

void picoll_cuda_mem_free(void *ptr, int device)
{
    picoll_cu_context_t ctx = ptr != NULL ? zc_primary(device) : NULL;
    picoll_cuda_saved_ctx_t saved;
    if (ctx == NULL) {
        return;
    }
    void *h = picoll_cuda_reg_find_ptr(ptr);
    if (h != NULL) {
        picoll_cuda_deregister(h);
    }
    if (picoll_cuda_enter(ctx, &saved) == PICOLL_OK) {
        picoll_cudrv_check(picoll_cu.mem_free((picoll_cu_deviceptr_t)(uintptr_t)ptr), "cuMemFree");
        picoll_cuda_leave(&saved);
    }
}
