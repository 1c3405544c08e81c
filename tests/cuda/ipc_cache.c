/* The cache of peers' user buffers mapped through CUDA IPC (cuda/cuda_ipc_cache.h) on the emulated
 * GPU, at any number of ranks: a plain MPI program linking picoll's cuda layer (not preloaded).
 * Every rank allocates device buffers, describes them (picoll_cuda_ipc_buf_export), and every
 * rank reads every peer's buffers through the cache, byte for byte:
 *   1. first reads: misses; the same buffers again: hits;
 *   2. every rank frees its buffer, mapped by its peers (FAKECUDA_FREE_MAPPED=1), and allocates
 *      another at the same address (a new buffer id): the peers' entries are stale, closed and
 *      opened again, and read the new bytes (never the freed allocation: the emulated GPU fails
 *      any access through its mapping, rule "freed-mapping");
 *   3. more buffers than PICOLL_CUDA_IPC_CACHE holds: evicted, within the bound.
 * ipc_cache_mutant is the same program with the cache's buffer-id check deleted
 * (IPC_CACHE_MUTANT_NO_BUFFER_ID): step 2 reads through the stale mapping, and the emulated
 * GPU must end it. Prints the cache's counts and "ipc_cache: passed". */
#include "build-config.h"
#include "cuda/cuda_ipc_cache.h"
#include "mem/cudrv.h"
#include "util/config.h"
#include "util/proc.h"

#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define EXTRA 3 /* step 3's buffers per rank */

extern char **environ;

typedef struct {
    picoll_cuda_ipc_buf_t buf;
    uint64_t pid, start;
    uint64_t addr; /* the buffer, in the owner's process */
} msg_t;

static int rank, size;

static void fail(const char *what)
{
    printf("FAIL ipc_cache: rank %d: %s\n", rank, what);
    fflush(stdout);
    MPI_Abort(MPI_COMM_WORLD, 1);
}

#define CHECK(cond, what)                                                                          \
    do {                                                                                           \
        if (!(cond)) {                                                                             \
            fail(what);                                                                            \
        }                                                                                          \
    } while (0)

static unsigned char fill_value(int owner, int round, int which)
{
    return (unsigned char)(1 + owner * 31 + round * 7 + which * 3);
}

/* A buffer of bytes, filled with v; described in *m. */
static picoll_cu_deviceptr_t make(size_t bytes, unsigned char v, msg_t *m)
{
    picoll_cu_deviceptr_t d;
    unsigned char *h = malloc(bytes);
    CHECK(h != NULL && picoll_cu.mem_alloc(&d, bytes) == 0, "cuMemAlloc");
    memset(h, v, bytes);
    CHECK(picoll_cu.memcpy_htod_async(d, h, bytes, PICOLL_CU_STREAM_PER_THREAD) == 0 &&
              picoll_cu.stream_synchronize(PICOLL_CU_STREAM_PER_THREAD) == 0,
          "filling a buffer");
    free(h);
    CHECK(picoll_cuda_ipc_buf_export((void *)(uintptr_t)d, 0, &m->buf, NULL) == PICOLL_OK,
          "export");
    m->pid = (uint64_t)getpid();
    m->start = picoll_proc_start_time(getpid());
    m->addr = d;
    return d;
}

/* Reads every peer's buffer of all (one message per rank) through the cache: bytes of value
 * fill_value(peer, round, which). */
static void read_peers(picoll_cu_context_t ctx, const msg_t *all, size_t bytes, int round,
                       int which)
{
    unsigned char *h = malloc(bytes);
    CHECK(h != NULL, "malloc");
    for (int r = 0; r < size; r++) {
        void *p;
        int entry;
        if (r == rank) {
            continue;
        }
        CHECK(picoll_cuda_ipc_cache_get(ctx, all[r].pid, all[r].start, &all[r].buf, &p, &entry) ==
                  PICOLL_OK,
              "picoll_cuda_ipc_cache_get");
        CHECK(picoll_cu.memcpy_dtoh(h, (picoll_cu_deviceptr_t)(uintptr_t)p, bytes) == 0,
              "reading a peer's buffer through its mapping");
        picoll_cuda_ipc_cache_release(entry);
        for (size_t i = 0; i < bytes; i++) {
            CHECK(h[i] == fill_value(r, round, which), "a peer's byte read through the cache");
        }
    }
    free(h);
}

static void stats(picoll_cuda_ipc_cache_stats_t *s, const char *when)
{
    picoll_cuda_ipc_cache_stats(s);
    printf("ipc_cache: rank %d %s: hits %ld misses %ld stale %ld evictions %ld entries %ld, "
           "%.1f us an open, %.1f us an export\n",
           rank, when, s->hits, s->misses, s->stale, s->evictions, s->entries,
           s->misses > 0 ? 1e6 * s->miss_s / (double)s->misses : 0.0,
           s->exports > 0 ? 1e6 * s->export_s / (double)s->exports : 0.0);
}

int main(int argc, char **argv)
{
    picoll_cu_context_t ctx;
    picoll_cu_device_t dev;
    picoll_cuda_ipc_cache_stats_t s;
    msg_t mine, *all;
    const size_t bytes = 65536 + 4096;
    (void)argc;
    (void)argv;
    MPI_Init(NULL, NULL);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    all = calloc((size_t)size, sizeof(*all));
    CHECK(all != NULL && picoll_config_load(&picoll_cfg, environ) == PICOLL_OK, "configuration");
    CHECK(picoll_cudrv_load() == PICOLL_OK && picoll_cudrv_device_count() > 0, "no CUDA device");
    CHECK(picoll_cu.device_get(&dev, rank % picoll_cudrv_device_count()) == 0 &&
              picoll_cu.primary_ctx_retain(&ctx, dev) == 0 && picoll_cu.ctx_set_current(ctx) == 0,
          "a context");
    /* 1. misses, then hits */
    picoll_cu_deviceptr_t d = make(bytes, fill_value(rank, 0, 0), &mine);
    MPI_Allgather(&mine, sizeof(mine), MPI_BYTE, all, sizeof(mine), MPI_BYTE, MPI_COMM_WORLD);
    read_peers(ctx, all, bytes, 0, 0);
    read_peers(ctx, all, bytes, 0, 0);
    stats(&s, "first buffers");
    CHECK(s.misses == size - 1 && s.hits == size - 1,
          "first reads: not one miss and one hit a peer");
    /* 2. freed while mapped and allocated again at the same address */
    MPI_Barrier(MPI_COMM_WORLD);
    uint64_t old_id = mine.buf.buffer_id;
    CHECK(picoll_cu.mem_free(d) == 0, "cuMemFree");
    picoll_cu_deviceptr_t d2 = make(bytes, fill_value(rank, 1, 0), &mine);
    CHECK(d2 == d && mine.buf.buffer_id != old_id,
          "the new buffer is not at the freed one's address with a new buffer id");
    MPI_Allgather(&mine, sizeof(mine), MPI_BYTE, all, sizeof(mine), MPI_BYTE, MPI_COMM_WORLD);
    read_peers(ctx, all, bytes, 1, 0);
    stats(&s, "after the free");
    CHECK(s.stale == size - 1 && s.misses == 2 * (size - 1), "the stale entries were not reopened");
    /* 3. more buffers than the bound */
    picoll_cu_deviceptr_t extra[EXTRA];
    for (int k = 0; k < EXTRA; k++) {
        extra[k] = make(4096, fill_value(rank, 2, k + 1), &mine);
        MPI_Allgather(&mine, sizeof(mine), MPI_BYTE, all, sizeof(mine), MPI_BYTE, MPI_COMM_WORLD);
        read_peers(ctx, all, 4096, 2, k + 1);
    }
    stats(&s, "after the extra buffers");
    CHECK(s.entries <= picoll_cfg.cuda_ipc_cache, "more entries than PICOLL_CUDA_IPC_CACHE");
    CHECK((size - 1) * (EXTRA + 1) <= picoll_cfg.cuda_ipc_cache || s.evictions > 0,
          "over the bound without an eviction");
    picoll_cuda_ipc_cache_flush(ctx, 1);
    MPI_Barrier(MPI_COMM_WORLD); /* every mapping closed before any owner frees */
    for (int k = 0; k < EXTRA; k++) {
        CHECK(picoll_cu.mem_free(extra[k]) == 0, "cuMemFree");
    }
    CHECK(picoll_cu.mem_free(d2) == 0, "cuMemFree");
    if (rank == 0) {
        printf("ipc_cache: passed\n");
    }
    free(all);
    MPI_Finalize();
    return 0;
}
