/* The emulated GPU's internals, shared by its C files (tests/cuda/emu/). A test driver, not part of
 * picoll: it exports the CUDA driver entry points picoll (and the tests) call, as libcuda.so.1.
 *
 * Everything mutable is guarded by one process-wide lock (emu_lock) with one condition variable
 * (emu_cond, broadcast whenever a stream gains or finishes work): simple to reason about, and the
 * emulation is never the bottleneck of a test that spins across processes anyway. */
#ifndef EMU_H
#define EMU_H

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

#include "../cu_abi.h"
#include "emu_calls.h"

#define EMU_API __attribute__((visibility("default")))

typedef int CUdevice;

#define EMU_MAX_DEVICES 8
#define EMU_MAX_THREADS 512 /* threads per block at most: one fiber each (FAKECUDA_THREADS) */
#define EMU_THREADS 64      /* threads per block by default */
#define EMU_SMS 2           /* multiprocessors per device by default (FAKECUDA_SMS) */
#define EMU_BLOCKS_PER_SM 2 /* the occupancy answer by default (FAKECUDA_BLOCKS_PER_SM) */

#define EMU_IPC_LAZY_ENABLE_PEER_ACCESS 0x1

#define EMU_STREAM_LEGACY ((void *)0x1)
#define EMU_STREAM_PER_THREAD ((void *)0x2)
#define EMU_STREAM_NON_BLOCKING 0x1
#define EMU_CAPTURE_GLOBAL 0
#define EMU_CAPTURE_THREAD_LOCAL 1
#define EMU_CAPTURE_RELAXED 2

/* ---- driver state (emu_driver.c) ---- */
extern pthread_mutex_t emu_lock;
extern pthread_cond_t emu_cond;
extern int emu_ndevices;
extern int emu_initialised;

/* The devices' shape, from FAKECUDA_SMS, FAKECUDA_THREADS and FAKECUDA_BLOCKS_PER_SM at cuInit,
 * and the multiprocessors an MPS client may use (CUDA_MPS_ACTIVE_THREAD_PERCENTAGE, where
 * FAKECUDA_MPS is 1). */
extern int emu_sms, emu_threads, emu_blocks_per_sm, emu_client_sms;
/* Counts a call of an exported entry point (first statement of each). */
void emu_count(emu_call_t call);
/* A broken CUDA rule: one line "FAIL fakecuda: <rule>: <what>" on stderr, then abort(). */
__attribute__((noreturn, format(printf, 2, 3))) void emu_fail(const char *rule, const char *fmt,
                                                              ...);
/* Environment variable as an integer in [lo, hi], or def when unset. */
int emu_env_int(const char *name, int def, int lo, int hi);
/* 1 when kernels on device a may access memory of device b (b != a): every pair but those
 * FAKECUDA_NO_PEER lists. */
int emu_peer_access(int a, int b);
/* 1 when the caller's return address ra lies in a library whose file name contains libpicoll. */
int emu_called_from_picoll(void *ra);

/* ---- contexts (emu_ctx.c) ---- */
struct emu_stream;

#define EMU_MAX_QUEUES 32 /* FAKECUDA_QUEUES at most */

typedef struct emu_ctx {
    uint32_t magic;
    int device;
    int primary;                /* the device's primary context */
    int live;                   /* destroyed contexts stay allocated: stale handles are caught
                                   * (unless FAKECUDA_CTX_REUSE hands the address out again) */
    int retains;                /* primary: retain count */
    unsigned long long id;      /* cuCtxGetId: new for every context, and for the primary one
                                   * after each reset (its handle stays the same) */
    struct emu_stream *legacy;  /* its legacy default stream, made at first use */
    struct emu_stream *streams; /* every stream of the context (list through next_in_ctx) */
    /* FAKECUDA_QUEUES: the hardware work queues its streams share, round robin in the order the
     * streams were made: per queue the tickets handed out (one an operation, in the order they
     * were queued) and those dispatched, in that order (emu_stream.c) */
    int queue_next;
    uint64_t queue_ticket[EMU_MAX_QUEUES], queue_dispatched[EMU_MAX_QUEUES];
} emu_ctx_t;

#define EMU_CTX_MAGIC 0x43747845u

emu_ctx_t *emu_ctx_current(void);
/* The context handle h if it is one this driver made and still alive, else NULL. */
emu_ctx_t *emu_ctx_check(void *h);
/* cuDevicePrimaryCtxReset: frees every allocation and IPC mapping of c (emu_mem.c). Lock held. */
void emu_mem_reset_ctx_locked(emu_ctx_t *c);
/* Live device (and managed) allocations per device, kept by emu_mem.c for the context rule. */
extern int emu_dev_live_mem[EMU_MAX_DEVICES];

/* ---- memory (emu_mem.c) ---- */
typedef enum {
    EMU_MEM_NONE = 0,
    EMU_MEM_DEVICE,  /* cuMemAlloc: in the arena */
    EMU_MEM_MANAGED, /* cuMemAllocManaged: in the arena */
    EMU_MEM_HOST,    /* cuMemHostAlloc: pinned (and device-mapped) host memory */
    EMU_MEM_MAPPED   /* cuIpcOpenMemHandle: another process's device allocation */
} emu_memkind_t;

typedef struct {
    uintptr_t start;
    size_t size;
    emu_memkind_t kind;
    emu_ctx_t *ctx;
    unsigned long long id;
    void *shadow; /* device and mapped memory: the memory model's record of start's 16-byte
                        * granule (emu_launch.c), the next granules' after it; else NULL */
    /* an IPC mapping: the owner's buffer id word in its shared table, as mapped here, and the id
     * the mapping was opened for; the two differ once the owner freed the allocation (rule
     * "freed-mapping", emu_mapping_check). NULL for every other range. */
    const uint64_t *owner_word;
    unsigned long long owner_id;
} emu_range_t;

/* The live range holding [p, p + n), copied to *out; 0 when none. Lock held. */
int emu_mem_find(uintptr_t p, size_t n, emu_range_t *out);
/* Rule "freed-mapping": fails the test when r is an IPC mapping of an allocation its owner freed
 * (what: the access, for the message). */
void emu_mapping_check(const emu_range_t *r, uintptr_t p, const char *what);
static inline int emu_mapping_stale(const uint64_t *owner_word, unsigned long long owner_id)
{
    return owner_word != NULL && __atomic_load_n(owner_word, __ATOMIC_ACQUIRE) != owner_id;
}
/* Bumped whenever a range goes away: range caches compare it. */
extern unsigned long emu_mem_generation;
/* Waits for every stream of the device's contexts to be idle (emu_stream.c); lock held. */
void emu_device_idle_locked(int device);

/* ---- streams (emu_stream.c) ---- */
typedef enum {
    EMU_OP_MARKER,
    EMU_OP_COPY,
    EMU_OP_MEMSET,
    EMU_OP_HOSTFN,
    EMU_OP_KERNEL,
    EMU_OP_WAITVAL
} emu_op_type_t;

typedef struct {
    struct emu_stream *stream;
    uint64_t seq;
} emu_dep_t;

typedef struct emu_op {
    struct emu_op *next;
    emu_op_type_t type;
    uint64_t seq;
    uint64_t ticket; /* its place in its stream's hardware queue (FAKECUDA_QUEUES); 0: none */
    emu_dep_t *deps;
    int ndeps;
    union {
        struct {
            void *dst;
            const void *src;
            size_t n;
            void *snapshot; /* pageable source copied at enqueue (freed after) */
        } copy;
        struct {
            void *dst;
            unsigned char value;
            size_t n;
        } memset;
        struct {
            void (*fn)(void *);
            void *arg;
        } hostfn;
        struct {
            const uint64_t *addr; /* host-mapped or device word */
            uint64_t value;       /* wait until (int64_t)(*addr - value) >= 0 */
        } waitval;
        struct {
            void (*fn)(void); /* the entry (emu_launch.c's emu_entry_fn, emu_kernel_entry) */
            void *params;     /* the kernel's argument, copied at launch */
            size_t size;      /* its bytes (a graph's replay copies it) */
            unsigned grid, block;
            int frozen;
        } kernel;
    } u;
} emu_op_t;

typedef struct emu_stream {
    uint32_t magic;
    emu_ctx_t *ctx;
    int legacy, per_thread;
    unsigned flags; /* EMU_STREAM_NON_BLOCKING */
    int live;
    uint64_t enqueued, completed; /* sequence numbers of ops: the last queued, the last finished */
    emu_op_t *head, *tail;
    int has_worker;
    pthread_t worker;
    int capturing, capture_mode;
    struct emu_graph *capture_graph; /* the operations captured so far */
    int capture_invalid;      /* a refused call broke the capture: cuStreamEndCapture fails */
    pthread_t capture_thread; /* the thread that began it */
    struct emu_stream *next_in_ctx;
    int queue; /* its hardware queue (FAKECUDA_QUEUES); -1: one of its own */
} emu_stream_t;

#define EMU_STREAM_MAGIC 0x5374726du

/* Resolves a stream handle (NULL/legacy, per-thread, or made by cuStreamCreate) in the current
 * context; checks the stream rule (its context must be current). Lock held. */
CUresult emu_stream_resolve_locked(void *h, const char *call, emu_stream_t **out);
/* Queues op on s with CUDA's implicit ordering plus extra (may be NULL); *op is owned by the
 * stream afterwards. Returns the capture errors where CUDA does. Lock held. */
CUresult emu_stream_enqueue_locked(emu_stream_t *s, emu_op_t *op, const emu_dep_t *extra);
/* Waits until s finished op seq. Lock held. */
void emu_stream_wait_locked(emu_stream_t *s, uint64_t seq);
/* CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED when a capture forbids this thread a potentially unsafe
 * call now, else CUDA_SUCCESS. Lock held. */
CUresult emu_capture_check_locked(void);
emu_op_t *emu_op_new(emu_op_type_t type);

/* ---- kernels (emu_launch.c) ---- */
void emu_kernel_run(emu_op_t *op);
/* A worker thread ends: its fibers' stacks go. */
void emu_worker_release(void);

/* The fiber state the CPU build of the kernel reads (emu_cuda.h declares them for C++). */
typedef struct {
    unsigned x, y, z;
} emu_dim3_t;
extern __thread emu_dim3_t emu_thread_idx, emu_block_idx, emu_block_dim, emu_grid_dim;

#endif
