/* What the files of the device collectives share, and nothing outside them sees: one call's
 * description, and the functions of the vote and the launches (cuda_launch.c) and of the end of a
 * blocking call (cuda_end.c) that the collectives' dispatcher (cuda_colls.c) calls. The files
 * call each other in that order only: cuda_colls.c -> cuda_end.c -> cuda_launch.c. */
#ifndef PICOLL_CUDA_COLL_INT_H
#define PICOLL_CUDA_COLL_INT_H

#include <stdint.h>

#include "cuda/cuda_ws.h"

/* A vetoed call's arrivals: at most the first launch's first two epochs (no block passes a wait
 * that needs the rank that said no), so every rank goes on two epochs on, launched or not. */
#define COLL_VETO_EPOCHS 2

/* One call: every collective cuts its operands alike, chunk i covering bytes [i * step,
 * min(total, (i + 1) * step)) of the source and the destination (allgather and alltoall: of each
 * block), one launch each, so that a resume can launch any chunk again. */
typedef struct {
    const char *coll;
    const char *src;
    char *dst;
    size_t total, step, nchunks;
    int arrivals;                 /* per launch: 1, or 2 for two-shot and HCM */
    uint64_t first;               /* epoch of chunk 0's first arrival */
    picoll_cuda_saved_ctx_t prev; /* the thread's context before the call */
    int entered; /* the call made ws's context current (prev is put back at its end) */
    int zc_entry[2 * PICOLL_CUDA_MAX_LOCAL]; /* zero-copy: the IPC cache's entries it holds */
    int zc_n;
    picoll_cuda_kparams_t p;
} coll_call_t;

/* ------------------------------------------------------------------ the vote (cuda_launch.c) */
/* The kernel's type of dt; PICOLL_CUDA_T_NONE where the device has no arithmetic for it. */
picoll_cuda_type_t picoll_cuda_coll_type(picoll_dtype_t dt);
/* The calling thread's current context as its last full vote found it (*cur), for the call that
 * follows, once: 0 where no full vote ran since the last call took it (the quick vote took the
 * buffers' context as current). */
int picoll_cuda_vote_current(picoll_cu_context_t *cur);

/* ------------------------------------------------------------------ launches (cuda_launch.c) */
/* A hot-path call: whether a peer said no to it (its dev_no word; picoll_cuda_hot_arm). */
int picoll_cuda_call_said_no(const picoll_cuda_ws_t *ws, const coll_call_t *c);
/* Sets the parameters of chunk i; returns its blocks. */
int picoll_cuda_call_chunk(coll_call_t *c, size_t i);
/* Launches chunk i on this thread's per-thread default stream of the buffers' context. floor: the
 * seq of the attempt's first launch; resume and done_mask: a relaunch of a chunk that gave up, and
 * its blocks that finished. Returns the blocks, or -1 where a hot-path call's first launch found
 * another context current (the call then says no). A failed launch otherwise ends the job. */
int picoll_cuda_call_launch(picoll_cuda_ws_t *ws, coll_call_t *c, size_t i, uint64_t floor,
                            int resume, uint64_t done_mask);
/* Launches every chunk of c on the workspace's stream (ws->on_stream), waiting for nothing. */
picoll_status_t picoll_cuda_call_enqueue(picoll_cuda_ws_t *ws, coll_call_t *c);

/* ------------------------------------------------------------------ zero-copy (cuda_zc.c) */
/* A call armed by the vote (picoll_cuda_zc_arm): maps every peer's buffers of c (its mode's:
 * two-shot, allgather, alltoall), and the node's ranks agree in
 * one barrier. 1: every rank mapped all, c's mode and arrivals are the zero-copy ones, zsrc and
 * zdst set, the entries held (picoll_cuda_zc_release after the end); 0: every rank copies. Not
 * armed: 0, no barrier. */
int picoll_cuda_zc_map(picoll_cuda_ws_t *ws, coll_call_t *c);
void picoll_cuda_zc_release(coll_call_t *c);
/* The same on a stream's workspace, its kernel queued: the entries released by a host function
 * queued behind it, or, in a graph being captured (replayed later through the same mappings),
 * kept for the process's life (counted: picoll_cuda_zc_stats_t.pinned). */
void picoll_cuda_zc_stream_release(picoll_cuda_ws_t *ws, coll_call_t *c);

/* ------------------------------------------------------------------ the end (cuda_end.c) */
/* Waits for the call's last launch (blocks of it, the attempt's first launch floor), resuming a
 * kernel that gave up waiting for a late peer; puts the thread's context back. PICOLL_RETRY where
 * a peer said no to a hot-path call (every rank falls back). */
picoll_status_t picoll_cuda_call_end(picoll_cuda_ws_t *ws, coll_call_t *c, uint64_t floor,
                                     int blocks);

#endif
