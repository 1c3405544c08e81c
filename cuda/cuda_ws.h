/* The device workspace's internals, shared by its set-up (cuda_ws.c, cuda_ctx.c, cuda_module.c,
 * cuda_ipc.c, cuda_watch.c) and the collectives (cuda_launch.c, cuda_end.c, cuda_colls.c,
 * cuda_floor.c). Built only with CUDA; every CUDA call goes through the driver table (cudrv.h). */
#ifndef PICOLL_CUDA_WS_H
#define PICOLL_CUDA_WS_H

#include <stdint.h>

#include "cuda/cuda_dev.h"
#include "cuda/cuda_kernel.h"
#include "mem/cudrv.h"

/* ws is being freed (its stream synchronised): its stream exchange goes with it (cuda_zc.c). */
void picoll_cuda_zc_forget(picoll_cuda_ws_t *ws);

/* The kernels' fatbin, embedded by cuda/fatbin.c. */
extern const unsigned char picoll_cuda_fatbin[];

/* A rank's workspace, mapped by every peer. User data is copied into it by the kernels, except on
 * the zero-copy path (cuda_zc.c), where the peers' user buffers are mapped through the IPC cache
 * keyed by buffer id (cuda_ipc_cache.h: a freed and reused address never matches). */
struct picoll_cuda_ws {
    picoll_cu_context_t ctx;   /* the context it lives in: that of the buffers that made it */
    unsigned long long ctx_id; /* and its id (picoll_cudrv_ctx_id): a context reset since, or
                                 * destroyed and made again at the same handle, has another */
    int device;                /* ctx's device */
    int nlocal, me;            /* ranks on the node, and mine */
    int comm_size;             /* of the user's communicator, for error messages */
    int comm_ranks[PICOLL_CUDA_MAX_LOCAL]; /* rank in the user's communicator of each local rank */
    int max_blocks;    /* blocks per launch at most: all ranks' blocks resident at once */
    int sharing;       /* the most ranks of the node on one GPU (the same on every rank) */
    int threads;       /* threads per block */
    int small_threads; /* threads of a one-block launch (PICOLL_CUDA_SMALL_THREADS);
                                 * 0: threads */
    size_t slot_size;  /* bytes of one data buffer */
    size_t ll_size;    /* bytes of one parity's low-latency lines (after the two data
                                 * buffers: picoll_cuda_ll_area_bytes); 0: none */
    char *base;        /* my allocation: flags, then two data buffers */
    char *peer[PICOLL_CUDA_MAX_LOCAL]; /* the peers' allocations as mapped here (mine: base) */
    int mapped[PICOLL_CUDA_MAX_LOCAL]; /* peer[r] came from cuIpcOpenMemHandle */
    int import[PICOLL_CUDA_MAX_LOCAL]; /* mapped: its entry in the process's import table, +1 */
    picoll_cu_function_t kernel;       /* picoll_coll_kernel in ctx */
    picoll_cu_function_t fixed[PICOLL_CUDA_FIXED_COUNT]; /* the entries of PICOLL_CUDA_FIXED_LIST
                                                           * in ctx, in its order; NULL: not
                                                           * used (picoll_cuda_ws_function) */
    picoll_cuda_status_t *status; /* host view of the kernels' status (mapped pinned) */
    picoll_cuda_status_t *status_dev;
    uint64_t epoch;         /* arrivals so far (the same sequence on every rank) */
    uint64_t seq;           /* launches so far, relaunches included (this rank's own count) */
    uint64_t veto_at;       /* the next call is on the hot path: its number (the same on every
                                 * rank), 0 if not (picoll_cuda_hot_arm) */
    picoll_shm_t *veto_shm; /* and the node workspace where a rank says no to it (dev_no) */
    double timeout;         /* seconds, PICOLL_TIMEOUT */
    double spin;            /* seconds a block waits for a peer before it gives up,
                                 * PICOLL_CUDA_SPIN */
    uint64_t pid[PICOLL_CUDA_MAX_LOCAL];        /* each local rank's process, published at set-up */
    uint64_t pstart[PICOLL_CUDA_MAX_LOCAL];     /* and its start time (util/proc.h) */
    unsigned char watch[PICOLL_CUDA_MAX_LOCAL]; /* 1: that process can be looked at from here */
    picoll_topo_reach_t reach;
    /* what selection needs of it, and the lines' fit its calls check (set once, when it is
     * made: picoll_cuda_ws_limits) */
    picoll_cuda_limits_t limits;
    uint32_t peers;            /* local ranks mapped and waited for (not me) */
    int hcm;                   /* reach hcm with a plan: allreduce runs the HCM kernel */
    picoll_cu_stream_t stream; /* a workspace of an application's stream (on_stream): its
                                 * launches go there, the epoch in device memory
                                 * (PICOLL_CUDA_EPOCH_WORD), and the call returns at once */
    int on_stream;
    struct picoll_cuda_ws *watch_next; /* on_stream: the list picoll_cuda_stream_watch reads */
    uint64_t watch_first;              /* the first epoch of the launch the watch found waiting */
    void *watch_late;                  /* and its wait (coll_late_t, cuda_end.c); NULL: none */
    int quad[PICOLL_TOPO_HCM_QUAD], relay, quad_first; /* hcm: picoll_topo_hcm_plan_t */
    /* zero-copy (cuda_zc.c): the next call tries it (armed by the vote), the peers' descriptions
     * in zc_shm's data buffers of epoch zc_epoch; and whether the last call took it */
    picoll_shm_t *zc_shm;
    uint64_t zc_epoch;
    int zc_armed, zc_last;
    picoll_shm_t *zc_stream_shm;   /* on_stream: the node workspace its calls' descriptions go
                                  * through (picoll_cuda_ws_set_exchange; owned: freed with ws) */
    picoll_cuda_zc_skip_t zc_skip; /* on_stream: the exchanges skipped (nothing registered) */
};
_Static_assert(sizeof(((picoll_cuda_kparams_t *)0)->quad) == sizeof(((picoll_cuda_ws_t *)0)->quad),
               "the kernel's quad (cuda_kernel.h) is the workspace's: PICOLL_TOPO_HCM_QUAD ranks");

/* The calling thread's current context, put back as it was at the end of a call: a thread that
 * never chose a device (PyTorch's MPI worker) must not be left with one. */
typedef struct {
    picoll_cu_context_t prev;
    int switched; /* prev was not ctx: restore it */
    int mode;     /* the thread's stream capture mode before set-up, when exchanged */
    int mode_set;
} picoll_cuda_saved_ctx_t;

/* Makes ctx current (saving what was): two driver calls at most, one where ctx is already
 * current. PICOLL_ERR_CUDA, logged (PICOLL_CU_TRY), where the driver fails. */
picoll_status_t picoll_cuda_enter(picoll_cu_context_t ctx, picoll_cuda_saved_ctx_t *saved);
/* The same where the caller knows cur, the thread's current context (no driver call unless a
 * switch is needed); returns the switch's CUresult, for the caller's check (the hot path's
 * failure ends the job: PICOLL_CU_TRY_FATAL). */
int picoll_cuda_enter_from(picoll_cu_context_t ctx, picoll_cu_context_t cur,
                           picoll_cuda_saved_ctx_t *saved);
/* The same as picoll_cuda_enter for set-up and release, which allocate, free and synchronise:
 * also switches this thread to relaxed stream-capture mode, so that an application capturing a
 * CUDA graph (global mode, in any thread) does not make those calls fail. */
picoll_status_t picoll_cuda_enter_setup(picoll_cu_context_t ctx, picoll_cuda_saved_ctx_t *saved);
void picoll_cuda_leave(const picoll_cuda_saved_ctx_t *saved);

/* Calls fn on every stream workspace (picoll_cuda_ws_set_stream), none of them destroyed
 * meanwhile. */
void picoll_cuda_ws_each_stream(void (*fn)(picoll_cuda_ws_t *ws));

/* The kernel entry a launch of p runs: the one of p's type, op and rank count
 * (PICOLL_CUDA_FIXED_LIST) where p's mode may take it, the workspace has it and PICOLL_CUDA_FIXED
 * is on, else the generic kernel. The same on every rank (it depends on what every rank's call passes alike). */
picoll_cu_function_t picoll_cuda_ws_function(const picoll_cuda_ws_t *ws,
                                             const picoll_cuda_kparams_t *p);

/* The element types the kernels reduce: bit dt set where they have arithmetic for dt
 * (cuda_launch.c, picoll_cuda_coll_type; not long double). */
uint64_t picoll_cuda_dtype_mask(void);

/* The floors' kernels: the empty one (PICOLL_CUDA_FLOOR_NAME) and the barrier
 * (PICOLL_CUDA_BARRIER_NAME), their index in the module's list. */
enum { PICOLL_CUDA_FLOOR_FN_LAUNCH, PICOLL_CUDA_FLOOR_FN_BARRIER, PICOLL_CUDA_FLOOR_FNS };
/* Floor kernel which (PICOLL_CUDA_FLOOR_FN_*) in the current context ctx, from the module the
 * workspaces load (once per context); PICOLL_ERR_NOT_SUPPORTED where the module lacks it. */
picoll_status_t picoll_cuda_floor_function(picoll_cu_context_t ctx, int which,
                                           picoll_cu_function_t *fn);

/* Threads per block of a launch of blocks blocks: fewer for one block where
 * PICOLL_CUDA_SMALL_THREADS asks (the kernel takes any multiple of 32: thread t waits for local
 * rank t, and on a stream block 0's thread t for the launch's block t). */
static inline unsigned picoll_cuda_launch_threads(const picoll_cuda_ws_t *ws, int blocks)
{
    return (unsigned)(blocks == 1 && ws->small_threads > 0 ? ws->small_threads : ws->threads);
}

static inline char *picoll_cuda_slot(const picoll_cuda_ws_t *ws, int rank, uint64_t parity)
{
    return ws->peer[rank] + PICOLL_CUDA_FLAGS_BYTES + (parity & 1) * ws->slot_size;
}

#endif
