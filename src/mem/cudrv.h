/* The CUDA driver, loaded with dlopen("libcuda.so.1") once, behind a table of function pointers.
 * No CUDA header is needed: the few types and constants used are declared here (values from
 * cuda.h, stable across CUDA versions). On a machine without the driver the table stays empty,
 * picoll_cudrv_load() answers PICOLL_ERR_NOT_SUPPORTED with the reason, and every buffer is host
 * memory. */
#ifndef PICOLL_CUDRV_H
#define PICOLL_CUDRV_H

#include <stddef.h>
#include "util/status.h"

typedef int picoll_cu_result_t; /* CUresult: 0 is CUDA_SUCCESS */
typedef unsigned long long picoll_cu_deviceptr_t;
typedef int picoll_cu_device_t;
typedef struct picoll_cu_ctx_st *picoll_cu_context_t;
typedef struct picoll_cu_stream_st *picoll_cu_stream_t;
typedef struct picoll_cu_module_st *picoll_cu_module_t;
typedef struct picoll_cu_func_st *picoll_cu_function_t;
typedef struct picoll_cu_event_st *picoll_cu_event_t;
typedef struct picoll_cu_graph_st *picoll_cu_graph_t;
typedef struct picoll_cu_graph_exec_st *picoll_cu_graph_exec_t;
typedef struct {
    char reserved[64];
} picoll_cu_ipc_handle_t; /* CUipcMemHandle */

#define PICOLL_CU_POINTER_ATTRIBUTE_CONTEXT 1
#define PICOLL_CU_POINTER_ATTRIBUTE_MEMORY_TYPE 2
#define PICOLL_CU_POINTER_ATTRIBUTE_BUFFER_ID 7
#define PICOLL_CU_POINTER_ATTRIBUTE_IS_MANAGED 8
#define PICOLL_CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL 9
#define PICOLL_CU_POINTER_ATTRIBUTE_RANGE_START_ADDR 11
#define PICOLL_CU_POINTER_ATTRIBUTE_RANGE_SIZE 12
#define PICOLL_CU_MEMORYTYPE_HOST 1
#define PICOLL_CU_MEMORYTYPE_DEVICE 2
#define PICOLL_CU_MEMHOSTALLOC_PORTABLE 0x01
#define PICOLL_CU_EVENT_DISABLE_TIMING 0x02
#define PICOLL_CU_MEMHOSTALLOC_DEVICEMAP 0x02
#define PICOLL_CU_STREAM_LEGACY ((picoll_cu_stream_t)0x1)
#define PICOLL_CU_STREAM_PER_THREAD ((picoll_cu_stream_t)0x2)
/* A default stream's handle: the legacy stream (NULL or CU_STREAM_LEGACY) or the calling thread's
 * per-thread stream. */
static inline int picoll_cu_stream_is_default(picoll_cu_stream_t s)
{
    return s == NULL || s == PICOLL_CU_STREAM_LEGACY || s == PICOLL_CU_STREAM_PER_THREAD;
}
#define PICOLL_CU_STREAM_NON_BLOCKING 0x1
#define PICOLL_CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS 0x1
#define PICOLL_CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK 1
#define PICOLL_CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT 16
#define PICOLL_CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR 75
#define PICOLL_CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR 76
#define PICOLL_CU_DEVICE_ATTRIBUTE_MPS_ENABLED 133
#define PICOLL_CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK 0
#define PICOLL_CU_STREAM_CAPTURE_STATUS_NONE 0
#define PICOLL_CU_STREAM_CAPTURE_STATUS_ACTIVE 1
#define PICOLL_CU_STREAM_WAIT_VALUE_GEQ 0
#define PICOLL_CU_STREAM_CAPTURE_MODE_RELAXED 2
#define PICOLL_CUDA_ERROR_NOT_READY 600
#define PICOLL_CU_ERROR_NO_BINARY_FOR_GPU 209
#define PICOLL_CU_EXEC_AFFINITY_TYPE_SM_COUNT 0

typedef struct {
    int type;                /* CUexecAffinityType */
    unsigned sm_count;       /* CUexecAffinitySmCount.val (the union's only member for SM_COUNT) */
} picoll_cu_exec_affinity_t; /* CUexecAffinityParam */

typedef struct {
    picoll_cu_result_t (*init)(unsigned flags);
    picoll_cu_result_t (*get_error_string)(picoll_cu_result_t, const char **);
    picoll_cu_result_t (*device_get_count)(int *);
    picoll_cu_result_t (*device_get)(picoll_cu_device_t *, int ordinal);
    picoll_cu_result_t (*pointer_get_attribute)(void *data, int attr, picoll_cu_deviceptr_t);
    picoll_cu_result_t (*pointer_get_attributes)(unsigned n, int *attrs, void **data,
                                                 picoll_cu_deviceptr_t);
    picoll_cu_result_t (*ctx_get_current)(picoll_cu_context_t *);
    picoll_cu_result_t (*ctx_set_current)(picoll_cu_context_t);
    picoll_cu_result_t (*ctx_push_current)(picoll_cu_context_t);
    picoll_cu_result_t (*ctx_pop_current)(picoll_cu_context_t *);
    picoll_cu_result_t (*primary_ctx_retain)(picoll_cu_context_t *, picoll_cu_device_t);
    picoll_cu_result_t (*memcpy_async)(picoll_cu_deviceptr_t dst, picoll_cu_deviceptr_t src, size_t,
                                       picoll_cu_stream_t);
    picoll_cu_result_t (*memcpy_dtoh)(void *dst, picoll_cu_deviceptr_t src, size_t);
    picoll_cu_result_t (*mem_host_alloc)(void **, size_t, unsigned flags);
    picoll_cu_result_t (*mem_free_host)(void *);
    picoll_cu_result_t (*stream_synchronize)(picoll_cu_stream_t);
    picoll_cu_result_t (*stream_create)(picoll_cu_stream_t *, unsigned flags);
    /* the device executor */
    picoll_cu_result_t (*driver_get_version)(int *);
    picoll_cu_result_t (*device_get_attribute)(int *, int attr, picoll_cu_device_t);
    picoll_cu_result_t (*device_get_pci_bus_id)(char *, int len, picoll_cu_device_t);
    picoll_cu_result_t (*device_get_by_pci_bus_id)(picoll_cu_device_t *, const char *);
    picoll_cu_result_t (*device_can_access_peer)(int *, picoll_cu_device_t, picoll_cu_device_t);
    picoll_cu_result_t (*ctx_get_device)(picoll_cu_device_t *);
    picoll_cu_result_t (*mem_alloc)(picoll_cu_deviceptr_t *, size_t);
    picoll_cu_result_t (*mem_free)(picoll_cu_deviceptr_t);
    picoll_cu_result_t (*memset_d8_async)(picoll_cu_deviceptr_t, unsigned char, size_t,
                                          picoll_cu_stream_t);
    picoll_cu_result_t (*memcpy_htod_async)(picoll_cu_deviceptr_t dst, const void *src, size_t,
                                            picoll_cu_stream_t);
    picoll_cu_result_t (*memcpy_dtoh_async)(void *dst, picoll_cu_deviceptr_t src, size_t,
                                            picoll_cu_stream_t);
    picoll_cu_result_t (*mem_host_get_device_pointer)(picoll_cu_deviceptr_t *, void *, unsigned);
    picoll_cu_result_t (*ipc_get_mem_handle)(picoll_cu_ipc_handle_t *, picoll_cu_deviceptr_t);
    picoll_cu_result_t (*ipc_open_mem_handle)(picoll_cu_deviceptr_t *, picoll_cu_ipc_handle_t,
                                              unsigned);
    picoll_cu_result_t (*ipc_close_mem_handle)(picoll_cu_deviceptr_t);
    picoll_cu_result_t (*stream_is_capturing)(picoll_cu_stream_t, int *status);
    picoll_cu_result_t (*thread_exchange_capture_mode)(int *mode);
    picoll_cu_result_t (*module_load_data)(picoll_cu_module_t *, const void *image);
    picoll_cu_result_t (*module_get_function)(picoll_cu_function_t *, picoll_cu_module_t,
                                              const char *);
    picoll_cu_result_t (*func_get_attribute)(int *, int attr, picoll_cu_function_t);
    picoll_cu_result_t (*occupancy_max_blocks)(int *, picoll_cu_function_t, int threads,
                                               size_t shmem);
    picoll_cu_result_t (*launch_kernel)(picoll_cu_function_t, unsigned gx, unsigned gy, unsigned gz,
                                        unsigned bx, unsigned by, unsigned bz, unsigned shmem,
                                        picoll_cu_stream_t, void **params, void **extra);
    /* optional (CUDA 12.0 and later; NULL where the driver lacks it): a context's id, unique for
     * the life of the process; the primary context gets a new one after a reset while its
     * handle stays the same. Use picoll_cudrv_ctx_id(). */
    picoll_cu_result_t (*ctx_get_id)(picoll_cu_context_t, unsigned long long *id);
    /* optional (CUDA 11.4 and later): the current context's execution affinity; with
     * PICOLL_CU_EXEC_AFFINITY_TYPE_SM_COUNT the multiprocessors it may use (an MPS client limited
     * by CUDA_MPS_ACTIVE_THREAD_PERCENTAGE gets fewer than the device has) */
    picoll_cu_result_t (*ctx_get_exec_affinity)(picoll_cu_exec_affinity_t *, int type);
    /* optional: the stream-ordered calls (pmpi/stream*.c, MPIX_*_enqueue); NULL where the driver
     * lacks them, and those calls then answer an MPI error */
    picoll_cu_result_t (*stream_get_ctx)(picoll_cu_stream_t, picoll_cu_context_t *);
    picoll_cu_result_t (*stream_wait_value64)(picoll_cu_stream_t, picoll_cu_deviceptr_t addr,
                                              unsigned long long value, unsigned flags);
    picoll_cu_result_t (*event_create)(picoll_cu_event_t *, unsigned flags);
    picoll_cu_result_t (*event_destroy)(picoll_cu_event_t);
    picoll_cu_result_t (*event_record)(picoll_cu_event_t, picoll_cu_stream_t);
    picoll_cu_result_t (*event_query)(picoll_cu_event_t);
    picoll_cu_result_t (*event_synchronize)(picoll_cu_event_t);
    picoll_cu_result_t (*launch_host_func)(picoll_cu_stream_t, void (*fn)(void *), void *arg);
    picoll_cu_result_t (*ctx_synchronize)(void);
    /* optional: CUDA graphs, for the barrier floor's graph launches only (cuda/cuda_floor.c,
     * picoll_device_barrier_floor); NULL where the driver lacks them */
    picoll_cu_result_t (*stream_begin_capture)(picoll_cu_stream_t, int mode);
    picoll_cu_result_t (*stream_end_capture)(picoll_cu_stream_t, picoll_cu_graph_t *);
    picoll_cu_result_t (*graph_instantiate)(picoll_cu_graph_exec_t *, picoll_cu_graph_t,
                                            unsigned long long flags);
    picoll_cu_result_t (*graph_launch)(picoll_cu_graph_exec_t, picoll_cu_stream_t);
    picoll_cu_result_t (*graph_destroy)(picoll_cu_graph_t);
    picoll_cu_result_t (*graph_exec_destroy)(picoll_cu_graph_exec_t);
} picoll_cudrv_t;

/* The table; its entries are valid only after picoll_cudrv_load() returned PICOLL_OK. */
extern picoll_cudrv_t picoll_cu;

/* Loads and initialises the driver, once per process (thread safe). PICOLL_OK when it loaded,
 * cuInit succeeded and at least one device is visible; otherwise the reason stays available
 * from picoll_cudrv_why(). */
picoll_status_t picoll_cudrv_load(void);
/* Visible devices (0 without the driver), and a line saying what was found or why nothing. */
int picoll_cudrv_device_count(void);
const char *picoll_cudrv_why(void);

/* The id of context ctx (cuCtxGetId): what tells a context from a later one at the same handle
 * (cuDevicePrimaryCtxReset, cudaDeviceReset, a destroyed context's address reused). 0 where the
 * driver has no cuCtxGetId (older than CUDA 12.0: such a reset goes unnoticed) or ctx is no live
 * context. */
unsigned long long picoll_cudrv_ctx_id(picoll_cu_context_t ctx);

/* Translates a CUresult where it enters: PICOLL_OK, or PICOLL_ERR_CUDA after logging call and
 * cuGetErrorString once per call name. Alone, where a failure leaves nothing to do but say so (a
 * release, a pop of the context); else through PICOLL_CU_TRY and its variants. */
picoll_status_t picoll_cudrv_check(picoll_cu_result_t rc, const char *call);

/* A CUDA failure past the ranks' agreement on a device call coll ("MPI_Allreduce"), where no rank
 * can fall back alone (the peers launched already): one error line naming coll, the call and
 * cuGetErrorString, then the end of the job (util/fatal.h). */
__attribute__((noreturn)) void picoll_cudrv_fatal(picoll_cu_result_t rc, const char *call,
                                                  const char *coll);

/* The CUDA checks, one family: a driver call's CUresult becomes picoll's status where it enters,
 * a failure logged once per call name with the driver's error string (picoll_cudrv_check). name:
 * the CUDA call, a string literal ("cuMemAlloc"). A call whose failure is an answer (a query of
 * an optional attribute or entry, a probe of memory the driver may not know) is no check: it is
 * tested as it is, and logs nothing.
 *   PICOLL_CU_TRY: returns PICOLL_ERR_CUDA from a function with nothing to undo (or whose
 *     caller's release undoes what it made so far);
 *   PICOLL_CU_TRY_GOTO: sets status to PICOLL_ERR_CUDA and jumps to label, which undoes what the
 *     function made so far, in reverse (goto-cleanup);
 *   PICOLL_CU_TRY_FATAL: past the agreement on device call coll, ends the job
 *     (picoll_cudrv_fatal; its one line is the log). */
#define PICOLL_CU_TRY(call, name)                                                                  \
    do {                                                                                           \
        if (picoll_cudrv_check((call), (name)) != PICOLL_OK) {                                     \
            return PICOLL_ERR_CUDA;                                                                \
        }                                                                                          \
    } while (0)
#define PICOLL_CU_TRY_GOTO(call, name, status, label)                                              \
    do {                                                                                           \
        if (picoll_cudrv_check((call), (name)) != PICOLL_OK) {                                     \
            (status) = PICOLL_ERR_CUDA;                                                            \
            goto label;                                                                            \
        }                                                                                          \
    } while (0)
#define PICOLL_CU_TRY_FATAL(call, name, coll)                                                      \
    do {                                                                                           \
        picoll_cu_result_t picoll_cu_try_rc_ = (call);                                             \
        if (picoll_cu_try_rc_ != 0) {                                                              \
            picoll_cudrv_fatal(picoll_cu_try_rc_, (name), (coll));                                 \
        }                                                                                          \
    } while (0)

/* Copies n bytes between any two of host, pinned, device or managed memory, with ctx (the
 * context of the device-side buffer) current for the copy, on this thread's per-thread default
 * stream: it starts after the work already queued on the legacy default stream (and on this
 * thread's stream) and returns when the bytes are at dst. In relaxed stream-capture mode. While
 * this thread's per-thread stream is being captured into a CUDA graph (where a copy would be
 * recorded, not run), on a stream of picoll's own instead, which waits for nothing. */
picoll_status_t picoll_cudrv_copy(void *dst, const void *src, size_t n, picoll_cu_context_t ctx);

/* Asynchronous copies in ctx on the stream picoll_cudrv_copy would use, with up to
 * PICOLL_CUDRV_PIPE_MAX events to wait for some of them (mem/stage.c's pipelined staging). From
 * open to close ctx is the calling thread's current context and its capture mode relaxed. */
#define PICOLL_CUDRV_PIPE_MAX 8
typedef struct {
    picoll_cu_stream_t stream;
    picoll_cu_event_t ev[PICOLL_CUDRV_PIPE_MAX];
    int nev, mode, exchanged;
} picoll_cudrv_pipe_t;
/* PICOLL_ERR_NOT_SUPPORTED where the driver lacks events; then nothing is left to close. */
picoll_status_t picoll_cudrv_pipe_open(picoll_cudrv_pipe_t *p, picoll_cu_context_t ctx, int nev);
/* Queues the copy of n bytes; ev >= 0: event ev then marks its end. */
picoll_status_t picoll_cudrv_pipe_copy(picoll_cudrv_pipe_t *p, void *dst, const void *src, size_t n,
                                       int ev);
/* Waits until the copies queued before event ev's last mark have ended. */
picoll_status_t picoll_cudrv_pipe_wait(picoll_cudrv_pipe_t *p, int ev);
/* Waits for every copy, frees the events, puts the thread's context and mode back. */
picoll_status_t picoll_cudrv_pipe_close(picoll_cudrv_pipe_t *p);

#endif
