/* Peers' user buffers mapped through CUDA IPC, and the process's cache of those mappings (issue
 * 50: the zero-copy path reads a peer's input where the peer's buffer is).
 *
 * A mapping is kept past the call that opened it, so it may outlive the owner's allocation: the
 * owner may free its buffer as soon as its own call returns, and hand the same address to another
 * allocation. An entry is therefore keyed by the owner process, the allocation's start in it and
 * its buffer id (CU_POINTER_ATTRIBUTE_BUFFER_ID, new for every allocation, as UCX's cuda_ipc keys
 * its cache): the owner describes its buffer at every call (picoll_cuda_ipc_buf_export), and an
 * entry whose buffer id no longer matches is closed and the new allocation opened, never read.
 * (The emulated GPU fails any access through a mapping of a freed allocation: rule
 * "freed-mapping".) The cache holds at most PICOLL_CUDA_IPC_CACHE entries mapping at most
 * PICOLL_CUDA_IPC_CACHE_BYTES, the least recently used one not held by a call evicted first; it
 * measures what a miss costs (the open), against which a caller weighs the copy it saves. */
#ifndef PICOLL_CUDA_IPC_CACHE_H
#define PICOLL_CUDA_IPC_CACHE_H

#include <stdint.h>

#include "mem/cudrv.h"
#include "util/status.h"

/* What the owner of a buffer tells a peer of it, at every call. */
typedef struct {
    picoll_cu_ipc_handle_t handle; /* of the allocation holding the buffer */
    uint64_t base;                 /* the allocation's start, in the owner's process */
    uint64_t size;                 /* the allocation's bytes */
    uint64_t buffer_id;            /* the allocation's buffer id */
    uint64_t offset;               /* the buffer's offset in the allocation */
} picoll_cuda_ipc_buf_t;

typedef struct {
    long hits;           /* a live entry of the same allocation */
    long misses;         /* opened (the stale ones included) */
    long stale;          /* an entry of the same start whose buffer id no longer matched: closed */
    long evictions;      /* closed to keep the bound */
    long entries;        /* held now */
    double miss_s;       /* seconds the misses' opens took, in all */
    long exports;        /* this process's buffers described to its peers (the owner's side) */
    long export_handles; /* of those, the ones that took a cuIpcGetMemHandle (the others found
                          * their allocation's handle kept from an earlier export) */
    double export_s;     /* seconds their attribute queries and cuIpcGetMemHandle took, in all */
    long first_seen;     /* exports with PICOLL_CUDA_IPC_EXPORT_REUSED of an allocation met for
                          * the first time: recorded, not described */
} picoll_cuda_ipc_cache_stats_t;

/* The owner's side: describes the device allocation holding ptr (its start, size and buffer id in
 * one attribute query, and its IPC handle: kept by start and buffer id after the first export, so
 * that describing the same allocation again takes no cuIpcGetMemHandle). PICOLL_ERR_NOT_SUPPORTED
 * where ptr is not device memory that CUDA IPC exports (managed memory, host memory).
 * flags PICOLL_CUDA_IPC_EXPORT_REUSED: an allocation met for the first time (no kept entry of its
 * start and buffer id) is only recorded, with no cuIpcGetMemHandle, and *first set (out is not a
 * description then); its next export describes it. *first is 0 otherwise (first may be NULL
 * without the flag). */
#define PICOLL_CUDA_IPC_EXPORT_REUSED 1u
picoll_status_t picoll_cuda_ipc_buf_export(const void *ptr, unsigned flags,
                                           picoll_cuda_ipc_buf_t *out, int *first);

/* The peer's side: *out, the owner's buffer b as mapped in ctx (current), from the cache or opened
 * now; the owner is the process (pid, start: util/proc.h). The entry is held until
 * picoll_cuda_ipc_cache_release(*entry): never closed or evicted while a call reads through it.
 * The caller holds the import claim of the owner's GPU for ctx (cuda_ipc.c), as a workspace does.
 * PICOLL_ERR_NOT_SUPPORTED: the cache is off, b's allocation is larger than its bound, or it is
 * full of entries it cannot close now (held by a call, or mapped in another context);
 * PICOLL_ERR_CUDA: the open failed (logged). */
picoll_status_t picoll_cuda_ipc_cache_get(picoll_cu_context_t ctx, uint64_t pid, uint64_t start,
                                          const picoll_cuda_ipc_buf_t *b, void **out, int *entry);
void picoll_cuda_ipc_cache_release(int entry);
/* Closes every entry of ctx that no call holds (ctx current), or of every context where ctx is
 * NULL and close is 0 (forgets them without a driver call: their context is gone). */
void picoll_cuda_ipc_cache_flush(picoll_cu_context_t ctx, int close);
void picoll_cuda_ipc_cache_stats(picoll_cuda_ipc_cache_stats_t *out);

#endif
