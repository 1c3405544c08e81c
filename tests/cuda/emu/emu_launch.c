/* Kernels: modules, the one function picoll loads (picoll_coll_kernel, the CPU build of
 * cuda/coll_kernel.cu in emu_kernel.cc), launches, and how a launch runs.
 *
 * A launch is an operation of its stream, run by the stream's worker thread: its blocks one after
 * the other (block b of one rank only ever waits for block b of the other ranks, never for another
 * block of its own launch), each block as blockDim.x cooperative fibers (ucontext) on 64 KiB
 * stacks made once per worker. A fiber runs until it reaches __syncthreads (a barrier) or loads a
 * flag (a spin loop may be waiting for another fiber or another process); when every fiber had its
 * turn the worker calls sched_yield(), so that the peers' processes run on a machine with fewer
 * cores than ranks.
 *
 * Rules checked here:
 *   "kernel-context": a launch in context X whose kernel parameters point (user source or
 *     destination, workspace buffers, flags) into device memory of another context;
 *   "kernel-bounds": a load (__ldcg) or flag access outside every live allocation, IPC mapping
 *     and host-mapped buffer (each worker caches the ranges it found, until memory is freed). */
#define _GNU_SOURCE
#include "emu.h"
#include "cuda/cuda_kernel.h"

#include <sched.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <ucontext.h>
#include <unistd.h>

#define EMU_STACK (64 * 1024)
#define EMU_GUARD 4096
#define EMU_RANGE_CACHE 16
#define EMU_FATBIN_MAGIC 0xBA55ED50u

/* the CPU build of the kernel (emu_kernel.cc) */
void picoll_coll_kernel(const picoll_cuda_kparams_t p);

__thread emu_dim3_t emu_thread_idx, emu_block_idx, emu_block_dim, emu_grid_dim;

typedef struct {
    ucontext_t uc;
    int done;
    int waiting;       /* at the barrier of generation wait_gen */
    unsigned wait_gen;
} emu_fiber_t;

/* One worker's block being run, and its caches. */
typedef struct {
    emu_fiber_t fiber[EMU_MAX_THREADS];
    ucontext_t sched;
    char *stacks;
    int n, live, cur;
    unsigned gen;      /* barrier generation */
    int arrived;
    int frozen;        /* fakecuda_freeze_next_kernel: no barrier ever opens */
    const picoll_cuda_kparams_t *params;
    struct {
        uintptr_t start, end;
    } range[EMU_RANGE_CACHE];
    unsigned long range_gen;
    int range_next;
} emu_block_t;

static __thread emu_block_t *emu_blk;
static int emu_freeze_next;

typedef struct {
    uint32_t magic;
    emu_ctx_t *ctx;
    unsigned long long ctx_id; /* ctx's id at the load: a reset since unloaded it */
    int live;
} emu_module_t;

typedef struct {
    uint32_t magic;
    emu_module_t *module;
} emu_function_t;

#define EMU_MODULE_MAGIC 0x4d6f646cu
#define EMU_FUNCTION_MAGIC 0x46756e63u

/* ---- test hooks ---- */

static __thread unsigned emu_launch_delay_ms;

/* Every later cuLaunchKernel of the calling thread sleeps ms before it queues its kernel (0: no
 * more): a host thread descheduled between picoll's vote and its launch, made to order. */
EMU_API void fakecuda_delay_launches(unsigned ms);
EMU_API void fakecuda_delay_launches(unsigned ms)
{
    emu_launch_delay_ms = ms;
}

EMU_API void fakecuda_freeze_next_kernel(void);
EMU_API void fakecuda_freeze_next_kernel(void)
{
    __atomic_store_n(&emu_freeze_next, 1, __ATOMIC_RELEASE);
}

/* ---- what the CPU build of the kernel calls (emu_cuda.h) ---- */

uint64_t emu_globaltimer(void);
uint64_t emu_globaltimer(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

void emu_yield(void);
void emu_yield(void)
{
    emu_block_t *b = emu_blk;
    if (b != NULL) {
        swapcontext(&b->fiber[b->cur].uc, &b->sched);
    }
}

void emu_syncthreads(void);
void emu_syncthreads(void)
{
    emu_block_t *b = emu_blk;
    if (b == NULL) {
        return;
    }
    emu_fiber_t *f = &b->fiber[b->cur];
    unsigned gen = b->gen;
    if (++b->arrived == b->live && !b->frozen) {
        b->arrived = 0;
        b->gen++;
        return;
    }
    f->waiting = 1;
    f->wait_gen = gen;
    while (b->gen == gen) {
        emu_yield();
    }
    f->waiting = 0;
}

void emu_check_load(const void *p, size_t n, const char *what);
void emu_check_load(const void *p, size_t n, const char *what)
{
    emu_block_t *b = emu_blk;
    uintptr_t a = (uintptr_t)p;
    emu_range_t r;
    if (b == NULL) {
        return;
    }
    unsigned long gen = __atomic_load_n(&emu_mem_generation, __ATOMIC_ACQUIRE);
    if (b->range_gen != gen) {
        memset(b->range, 0, sizeof(b->range));
        b->range_gen = gen;
    }
    for (int i = 0; i < EMU_RANGE_CACHE; i++) {
        if (a >= b->range[i].start && a + n <= b->range[i].end) {
            return;
        }
    }
    pthread_mutex_lock(&emu_lock);
    int found = emu_mem_find(a, n, &r);
    pthread_mutex_unlock(&emu_lock);
    if (!found) {
        emu_fail("kernel-bounds",
                 "%s of %zu bytes at %p by block %u thread %u of picoll_coll_kernel: outside every "
                 "live allocation, IPC mapping and host-mapped buffer", what, n, p,
                 emu_block_idx.x, emu_thread_idx.x);
    }
    b->range[b->range_next].start = r.start;
    b->range[b->range_next].end = r.start + r.size;
    b->range_next = (b->range_next + 1) % EMU_RANGE_CACHE;
}

/* ---- running a launch ---- */

static void emu_fiber_main(void)
{
    emu_block_t *b = emu_blk;
    picoll_coll_kernel(*b->params);
    b->fiber[b->cur].done = 1;
    b->live--;
    /* an exited thread no longer holds a barrier back */
    if (b->live > 0 && b->arrived == b->live && !b->frozen) {
        b->arrived = 0;
        b->gen++;
    }
    /* returning resumes uc_link: the scheduler */
}

static emu_block_t *emu_block_get(void)
{
    if (emu_blk != NULL) {
        return emu_blk;
    }
    emu_block_t *b = calloc(1, sizeof(*b));
    size_t len = (size_t)EMU_MAX_THREADS * (EMU_STACK + EMU_GUARD);
    char *s = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (b == NULL || s == MAP_FAILED) {
        emu_fail("emulator", "no memory for the fibers of a kernel launch");
    }
    /* a guard page below each stack: an overflow faults instead of corrupting a neighbour */
    for (int i = 0; i < EMU_MAX_THREADS; i++) {
        mprotect(s + (size_t)i * (EMU_STACK + EMU_GUARD), EMU_GUARD, PROT_NONE);
    }
    b->stacks = s;
    emu_blk = b;
    return b;
}

void emu_worker_release(void)
{
    if (emu_blk != NULL) {
        munmap(emu_blk->stacks, (size_t)EMU_MAX_THREADS * (EMU_STACK + EMU_GUARD));
        free(emu_blk);
        emu_blk = NULL;
    }
}

/* Runs block blockIdx of the launch until its fibers finish (or, frozen, all wait at a barrier
 * that never opens). */
static void emu_block_run(emu_block_t *b)
{
    b->live = b->n;
    b->arrived = 0;
    for (int i = 0; i < b->n; i++) {
        emu_fiber_t *f = &b->fiber[i];
        f->done = f->waiting = 0;
        getcontext(&f->uc);
        f->uc.uc_stack.ss_sp = b->stacks + (size_t)i * (EMU_STACK + EMU_GUARD) + EMU_GUARD;
        f->uc.uc_stack.ss_size = EMU_STACK;
        f->uc.uc_link = &b->sched;
        makecontext(&f->uc, emu_fiber_main, 0);
    }
    for (;;) {
        for (int i = 0; i < b->n; i++) {
            emu_fiber_t *f = &b->fiber[i];
            if (f->done || (f->waiting && f->wait_gen == b->gen)) {
                continue;
            }
            b->cur = i;
            emu_thread_idx.x = (unsigned)i;
            swapcontext(&b->sched, &f->uc);
        }
        if (b->live == 0 || (b->frozen && b->arrived == b->live)) {
            return;
        }
        sched_yield();
    }
}

void emu_kernel_run(emu_op_t *op)
{
    emu_block_t *b = emu_block_get();
    b->params = op->u.kernel.params;
    b->n = (int)op->u.kernel.block;
    b->frozen = op->u.kernel.frozen;
    emu_grid_dim = (emu_dim3_t){.x = op->u.kernel.grid, .y = 1, .z = 1};
    emu_block_dim = (emu_dim3_t){.x = op->u.kernel.block, .y = 1, .z = 1};
    emu_thread_idx = (emu_dim3_t){.x = 0, .y = 0, .z = 0};
    for (unsigned g = 0; g < op->u.kernel.grid; g++) {
        emu_block_idx = (emu_dim3_t){.x = g, .y = 0, .z = 0};
        emu_block_run(b);
    }
    if (b->frozen) {
        /* every block started and stopped before its first barrier: this stream never moves
         * again; the job ends when the peers' timeouts abort it */
        for (;;) {
            pause();
        }
    }
}

/* ---- modules and functions ---- */

/* Rule "stale-handle": a module (or function) loaded into a context that was reset or destroyed
 * since (its id changed; a reset primary context, or a context made again at a destroyed one's
 * address, FAKECUDA_CTX_REUSE, has the same handle) is gone with it. */
static emu_module_t *emu_module_check(void *h)
{
    emu_module_t *m = h;
    if (m == NULL || m->magic != EMU_MODULE_MAGIC || !m->live) {
        return NULL;
    }
    if (__atomic_load_n(&m->ctx->id, __ATOMIC_ACQUIRE) != m->ctx_id) {
        emu_fail("stale-handle", "module %p of context %p (device %d) used after that context "
                 "was reset or destroyed, which unloaded it", (void *)m, (void *)m->ctx,
                 m->ctx->device);
    }
    return m;
}

static emu_function_t *emu_function_check(void *h)
{
    emu_function_t *f = h;
    return f != NULL && f->magic == EMU_FUNCTION_MAGIC && emu_module_check(f->module) ? f : NULL;
}

EMU_API CUresult cuModuleLoadData(emu_module_t **out, const void *image)
{
    uint32_t magic;
    emu_count(EMU_CALL_cuModuleLoadData);
    emu_ctx_t *ctx = emu_ctx_current();
    if (ctx == NULL) {
        return CUDA_ERROR_INVALID_CONTEXT;
    }
    if (image == NULL) {
        return CUDA_ERROR_INVALID_VALUE;
    }
    memcpy(&magic, image, sizeof(magic));
    if (magic != EMU_FATBIN_MAGIC && memcmp(image, "\177ELF", 4) != 0) {
        return CUDA_ERROR_INVALID_IMAGE;
    }
    emu_module_t *m = calloc(1, sizeof(*m));
    if (m == NULL) {
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    m->magic = EMU_MODULE_MAGIC;
    m->ctx = ctx;
    m->ctx_id = __atomic_load_n(&ctx->id, __ATOMIC_ACQUIRE);
    m->live = 1;
    *out = m;
    return CUDA_SUCCESS;
}

EMU_API CUresult cuModuleUnload(void *h)
{
    emu_count(EMU_CALL_cuModuleUnload);
    emu_module_t *m = emu_module_check(h);
    if (m == NULL) {
        return CUDA_ERROR_INVALID_HANDLE;
    }
    m->live = 0; /* kept allocated: its functions become invalid handles */
    return CUDA_SUCCESS;
}

EMU_API CUresult cuModuleGetFunction(emu_function_t **out, void *h, const char *name)
{
    emu_count(EMU_CALL_cuModuleGetFunction);
    emu_module_t *m = emu_module_check(h);
    if (m == NULL) {
        return CUDA_ERROR_INVALID_HANDLE;
    }
    if (name == NULL || strcmp(name, PICOLL_CUDA_KERNEL_NAME) != 0) {
        return CUDA_ERROR_NOT_FOUND;
    }
    emu_function_t *f = calloc(1, sizeof(*f));
    if (f == NULL) {
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    f->magic = EMU_FUNCTION_MAGIC;
    f->module = m;
    *out = f;
    return CUDA_SUCCESS;
}

EMU_API CUresult cuFuncGetAttribute(int *v, int attr, void *h)
{
    emu_count(EMU_CALL_cuFuncGetAttribute);
    if (emu_function_check(h) == NULL) {
        return CUDA_ERROR_INVALID_HANDLE;
    }
    switch (attr) {
    case 0: *v = emu_threads; break;     /* MAX_THREADS_PER_BLOCK */
    case 1: *v = 16; break;              /* SHARED_SIZE_BYTES */
    case 4: *v = 32; break;              /* NUM_REGS */
    case 5: *v = 90; break;              /* PTX_VERSION */
    case 6: *v = 90; break;              /* BINARY_VERSION */
    default: *v = 0; break;
    }
    return CUDA_SUCCESS;
}

EMU_API CUresult cuOccupancyMaxActiveBlocksPerMultiprocessor(int *n, void *h, int threads,
                                                             size_t shmem)
{
    emu_count(EMU_CALL_cuOccupancyMaxActiveBlocksPerMultiprocessor);
    (void)shmem;
    if (emu_function_check(h) == NULL) {
        return CUDA_ERROR_INVALID_HANDLE;
    }
    *n = threads >= 1 && threads <= emu_threads ? emu_blocks_per_sm : 0;
    return CUDA_SUCCESS;
}

/* Rule "kernel-context": device memory a launch in ctx names must be ctx's (or managed). Lock
 * held. */
static void emu_launch_check_ptr_locked(emu_ctx_t *ctx, const void *p, const char *what)
{
    emu_range_t r;
    if (p == NULL || !emu_mem_find((uintptr_t)p, 1, &r)) {
        return;
    }
    if ((r.kind == EMU_MEM_DEVICE || r.kind == EMU_MEM_MAPPED) && r.ctx != ctx) {
        pthread_mutex_unlock(&emu_lock);
        emu_fail("kernel-context",
                 "cuLaunchKernel in context %p (device %d) with %s %p in device memory of context "
                 "%p (device %d)", (void *)ctx, ctx->device, what, p, (void *)r.ctx,
                 r.ctx->device);
    }
}

static void emu_launch_check_locked(emu_ctx_t *ctx, const picoll_cuda_kparams_t *p)
{
    if (p->bytes > 0) {
        emu_launch_check_ptr_locked(ctx, p->src, "source");
        emu_launch_check_ptr_locked(ctx, p->dst, "destination");
    }
    for (int r = 0; r < p->nranks && r < PICOLL_CUDA_MAX_LOCAL; r++) {
        emu_launch_check_ptr_locked(ctx, p->flags[r], "the flags of a rank");
        emu_launch_check_ptr_locked(ctx, p->slot[0][r], "a workspace buffer");
        emu_launch_check_ptr_locked(ctx, p->slot[1][r], "a workspace buffer");
    }
}

EMU_API CUresult cuLaunchKernel(void *h, unsigned gx, unsigned gy, unsigned gz, unsigned bx,
                                unsigned by, unsigned bz, unsigned shmem, void *stream,
                                void **params, void **extra)
{
    emu_stream_t *s;
    emu_count(EMU_CALL_cuLaunchKernel);
    emu_ctx_t *ctx = emu_ctx_current();
    emu_function_t *f = emu_function_check(h);
    if (ctx == NULL) {
        return CUDA_ERROR_INVALID_CONTEXT;
    }
    if (f == NULL || f->module->ctx != ctx) {
        return CUDA_ERROR_INVALID_HANDLE; /* a module is loaded into one context */
    }
    if (gx < 1 || gy != 1 || gz != 1 || bx < 1 || bx > (unsigned)emu_threads || by != 1 ||
        bz != 1 || shmem != 0 || params == NULL || params[0] == NULL || extra != NULL) {
        return CUDA_ERROR_INVALID_VALUE;
    }
    /* rule "launch-resident": block b of picoll's kernel waits for block b of the other ranks, so
     * every block of a launch must be resident at once: at most the multiprocessors this context
     * may use (all of the GPU, or its MPS share) times the blocks each holds */
    if (gx > (unsigned)(emu_client_sms * emu_blocks_per_sm)) {
        emu_fail("launch-resident",
                 "cuLaunchKernel of %u blocks of %u threads: this context holds %d at once (%d of "
                 "the device's %d multiprocessors x %d blocks)", gx, bx,
                 emu_client_sms * emu_blocks_per_sm, emu_client_sms, emu_sms, emu_blocks_per_sm);
    }
    if (emu_launch_delay_ms > 0) {
        usleep(emu_launch_delay_ms * 1000u);
    }
    emu_op_t *op = emu_op_new(EMU_OP_KERNEL);
    void *copy = malloc(sizeof(picoll_cuda_kparams_t));
    if (op == NULL || copy == NULL) {
        free(op);
        free(copy);
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    memcpy(copy, params[0], sizeof(picoll_cuda_kparams_t)); /* arguments are taken at launch */
    op->u.kernel.params = copy;
    op->u.kernel.grid = gx;
    op->u.kernel.block = bx;
    pthread_mutex_lock(&emu_lock);
    CUresult rc = emu_stream_resolve_locked(stream, "cuLaunchKernel", &s);
    if (rc == CUDA_SUCCESS) {
        emu_launch_check_locked(ctx, copy);
        if (!s->capturing) {
            op->u.kernel.frozen = __atomic_exchange_n(&emu_freeze_next, 0, __ATOMIC_ACQ_REL);
        }
        rc = emu_stream_enqueue_locked(s, op, NULL);
    } else {
        free(copy);
        free(op);
    }
    pthread_mutex_unlock(&emu_lock);
    return rc;
}
