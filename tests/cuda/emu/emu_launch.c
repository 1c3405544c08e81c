/* Kernels: modules, the functions picoll loads (picoll_coll_kernel and the entries of fixed type,
 * op and rank count, the CPU build of cuda/coll_kernel.cu in emu_kernel.cc), launches, how a
 * launch runs, and its memory model.
 *
 * A launch is an operation of its stream, run by the stream's worker thread: its blocks together,
 * as many as EMU_FIBERS threads hold (all of them at the default shape, two at a time at 512
 * threads a block; a finished block's place goes to the next one: block b of one rank only ever
 * waits for block b of the other ranks, never for another block of its own launch), each thread a
 * cooperative fiber (on x86-64 a switch of stacks that saves the callee-saved registers only,
 * elsewhere ucontext, whose swapcontext makes a system call for the signal mask at every switch)
 * on 64 KiB stacks made once per worker; each block has its own shared memory (DEV_SHARED). A
 * fiber runs until it reaches __syncthreads (a barrier), loads a flag (a spin loop may be waiting
 * for another fiber or another process), or, at random, touches global memory: the scheduler then
 * goes on with the next fiber of a rotation that starts at random and goes from block to block,
 * so that the threads of a launch interleave at any load or store, not only where the kernel
 * synchronises. Of a launch of several blocks, some start late (emu_late_start): CUDA promises
 * no co-scheduling. The choices
 * come from FAKECUDA_SEED (printed by each process at its first launch, and in every "kernel-race"
 * failure; random when unset). When every fiber that had a turn only read again a flag that had
 * not changed (each waits for another process), the worker calls sched_yield(), so that the
 * peers' processes run on a machine with fewer cores than ranks, and after EMU_STUCK_YIELDS such
 * rounds in a row it sleeps instead, so that the tests side by side get the CPU.
 *
 * The memory model: PTX's, for the accesses the kernel makes, checked rather than simulated.
 * Stores reach memory at once, but each 16-byte granule of device memory has a shadow (emu_mem.c:
 * shared with the processes that map it) saying who stored it last (process, block run, thread)
 * and whether that store is published, and when. A store is unpublished until its thread, or a
 * thread that a __syncthreads since the store orders after it (bar.sync is morally strong at CTA
 * scope, and release is cumulative), makes a release store (st.release.sys) or a system fence:
 * then every such store of the block is published at that time. The end of the launch publishes
 * the rest. A flag's shadow holds the time of the release that stored it (or of its thread's last
 * fence before a relaxed store: the release pattern), and an acquiring load of the flag (or a
 * relaxed load followed by a fence) makes that time the loading thread's acquire point; a
 * __syncthreads hands every thread the latest point of the block. A load (__ldcg) of a granule
 * passes when the store is its own thread's, or its block's with a __syncthreads between, or
 * published no later than the reader's acquire point (or before the launch began, for this
 * process's own stores: stream order); anything else is a data race under PTX, which a GPU may or
 * may not show as wrong bytes, and the emulation ends the test (rule "kernel-race"), naming the
 * address, both sides and the seed. The block's done and quit words tell the host that the block's
 * stores are visible (it hands the buffers back on them): every store of the block must be
 * published then, and none may follow done. The model is neither weaker nor stronger than PTX for
 * this kernel: a sync point that PTX does not need does not change a run, which is how the
 * mutation check (FAKECUDA_MUTANT, tests/cuda/mutants.sh) tells a needed one from a useless one.
 * Granules are 16 bytes: a granule stored by several threads is published with its last store.
 *
 * Rules checked here:
 *   "kernel-context": a launch in context X whose kernel parameters point (user source or
 *     destination, workspace buffers, flags) into device memory of another context;
 *   "kernel-bounds": a load, store or flag access outside every live allocation, IPC mapping
 *     and host-mapped buffer (each worker caches the ranges it found, until memory is freed);
 *   "kernel-align": a load, store or flag access of a unit at an address not aligned to it
 *     (16 bytes at most), which a GPU refuses;
 *   "freed-mapping": any access through an IPC mapping of an allocation its owner freed since
 *     (FAKECUDA_FREE_MAPPED, emu_mem.c; checked at every access, the cached ranges too);
 *   "kernel-race": a load of another thread's store not ordered after its publication, a block
 *     telling the host it finished (done) or gave up (quit) with a store unpublished, or storing
 *     after done;
 *   "line-on-data": a low-latency line loaded from a granule that a plain store wrote last. */
#define _GNU_SOURCE
#include "emu.h"
#include "cuda/cuda_kernel.h"

#include <sched.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <time.h>
#include <ucontext.h>
#include <unistd.h>

#define EMU_STACK (64 * 1024)
#define EMU_GUARD 4096
#define EMU_RANGE_CACHE 16
#define EMU_FATBIN_MAGIC 0xBA55ED50u
#define EMU_UNPUB (1ull << 63)
_Static_assert(EMU_MAX_THREADS <= 512, "emu_shadow_t's who has 9 bits for the thread");
#define EMU_SWITCH_EVERY 16 /* a global access switches fibers one time in 16, on average */
#define EMU_FIBERS 1024     /* fibers a worker runs at once: the blocks of a launch that fit */
#define EMU_WINDOW 64       /* blocks at once at most (PICOLL_CUDA_MAX_BLOCKS: a launch's most) */
/* Rounds of a launch in which every fiber only re-read an unchanged flag: the first
 * EMU_STUCK_YIELDS in a row each yield the CPU, every later one sleeps EMU_STUCK_NAP_NS (the
 * worker's timer slack 1 us) */
#define EMU_STUCK_YIELDS 32
#define EMU_STUCK_NAP_NS 20000L
#define EMU_SHARED 256 /* bytes of shared memory a block has (the kernel uses 4) */

/* the CPU build of the kernel's entries (emu_kernel.cc): entry `name`'s function, its name as
 * kept, and its index (below EMU_ENTRIES), or -1 */
typedef void (*emu_entry_fn)(const picoll_cuda_kparams_t);
int emu_kernel_entry(const char *name, emu_entry_fn *fn, const char **canon);
#define EMU_ENTRIES (3 + PICOLL_CUDA_FIXED_COUNT) /* the generic kernel, the fixed, the floors */
static long emu_entry_launches[EMU_ENTRIES];
static const char *emu_entry_names[EMU_ENTRIES];
static __thread const char *emu_last_entry;

__thread emu_dim3_t emu_thread_idx, emu_block_idx, emu_block_dim, emu_grid_dim;

/* A 16-byte granule's shadow (emu_mem.c keeps them beside the arena). */
typedef struct {
    uint64_t state; /* EMU_UNPUB | the barrier generation of the store, else the time the store
                     * was published (0: no kernel stored here); of a flag: its release's time */
    uint64_t who;   /* the store's thread and bytes: pid << 42 | block run << 25 | thread << 16 |
                     * the granule's bytes it stored (an earlier thread's bytes lose their
                     * record: a load of only those passes) */
} emu_shadow_t;

#define EMU_WHO(w) ((w) >> 16) /* the thread */
#define EMU_RUN(w) ((w) >> 25) /* its block run */
#define EMU_PID(w) ((w) >> 42)
#define EMU_FIBER(w) ((unsigned)((w) >> 16 & 0x1ff)) /* 9 bits: EMU_MAX_THREADS */
#define EMU_BYTES(w) ((unsigned)((w)&0xffff))

/* The bytes [a, a + n) covers in granule g, as a mask. */
static unsigned emu_bytes(uintptr_t g, uintptr_t a, size_t n)
{
    uintptr_t lo = a > g ? a - g : 0, hi = a + n - g < 16 ? a + n - g : 16;
    return (unsigned)(((1u << hi) - 1) & ~((1u << lo) - 1));
}

/* A store of the running launch not yet published. */
typedef struct {
    emu_shadow_t *s; /* NULL: host-mapped memory, which has no shadow */
    void *addr;
    uint64_t who;
    unsigned gen; /* the block's barrier generation at the store */
} emu_pending_t;

typedef struct {
#ifdef __x86_64__
    void *sp; /* saved stack pointer: emu_switch's frame */
#else
    ucontext_t uc;
#endif
    int done;
    int waiting; /* at the barrier of generation wait_gen */
    unsigned wait_gen;
    uint64_t acq;            /* acquire point: publications up to this time are ordered before it */
    uint64_t fence_t;        /* its last system fence: a relaxed store after it still releases */
    uint64_t pend_acq;       /* release seen by a relaxed flag load: acquired at the next fence */
    const uint64_t *spin_at; /* its last flag load's word and the value it read there: a load */
    uint64_t spin_val;       /* of the same word that reads the same value spins */
} emu_fiber_t;

typedef struct {
    uintptr_t start, end;
    char *shadow;
    const uint64_t *owner_word; /* an IPC mapping's (emu_range_t), else NULL */
    unsigned long long owner_id;
} emu_cached_range_t;

typedef struct emu_worker emu_worker_t;

/* A block being run by a worker, and its caches. */
typedef struct {
    emu_fiber_t fiber[EMU_MAX_THREADS];
    emu_worker_t *wk;
    char *stacks; /* its fibers' stacks: a window slot's share of the worker's */
    unsigned idx; /* blockIdx.x */
    int active;   /* runs in the window */
    int n, live, cur;
    unsigned gen; /* barrier generation */
    int arrived;
    int frozen;      /* fakecuda_freeze_next_kernel: no barrier ever opens */
    unsigned late;   /* rounds before its threads start (emu_late_start); 0: started */
    emu_entry_fn fn; /* the launch's entry */
    const picoll_cuda_kparams_t *params;
    emu_cached_range_t range[EMU_RANGE_CACHE];
    unsigned long range_gen;
    int range_next;
    /* the memory model */
    uint64_t me;       /* pid << 42 | block run << 25: this block run's threads (emu_shadow_t) */
    uint64_t start;    /* when the block began: this process's earlier stores are ordered before */
    uint64_t acc_acq;  /* the latest acquire point of the threads at the barrier */
    uint64_t gen_acq;  /* that of the barrier that opened last */
    int told;          /* the block stored its done word */
    uint64_t last_pub; /* when a store of the block was published last */
    int spun;          /* the turn that just ended re-read an unchanged flag (or a line) */
    int range_last;    /* the cache entry found last */
    int range_prev;    /* and the one before it (a copy alternates between two ranges) */
    uint64_t rng;
    unsigned switch_in;                   /* global accesses before the next switch */
    _Alignas(16) char shared[EMU_SHARED]; /* its shared memory (DEV_SHARED) */
} emu_block_t;

/* A stream worker's launches: the window of blocks that run together, their stacks, and the
 * stores of the running launch that no release published yet (of every block of the launch:
 * the end of the launch publishes them). */
struct emu_worker {
    char *stacks; /* EMU_FIBERS stacks */
    emu_block_t *slot[EMU_WINDOW];
    emu_pending_t *pend;
    size_t npend, cap;
    uint64_t rng;
    pid_t pid;
};

/* initial-exec: every global access of the kernel reads it (no __tls_get_addr call). The block
 * whose fiber runs; NULL outside a launch. */
static __thread emu_block_t *emu_blk __attribute__((tls_model("initial-exec")));
static __thread emu_worker_t *emu_wk;
#ifdef __x86_64__
static __thread void *emu_sched_sp __attribute__((tls_model("initial-exec")));
#else
static __thread ucontext_t emu_sched;
#endif
static int emu_freeze_next;
static uint64_t emu_seed;
static int emu_seed_told;
static unsigned long emu_runs; /* block runs of this process */
static unsigned emu_workers;

typedef struct {
    uint32_t magic;
    emu_ctx_t *ctx;
    unsigned long long ctx_id; /* ctx's id at the load: a reset since unloaded it */
    int live;
} emu_module_t;

typedef struct {
    uint32_t magic;
    emu_module_t *module;
    emu_entry_fn fn; /* the entry's CPU build */
    const char *name;
    int entry; /* its index (emu_kernel_entry) */
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

static unsigned long emu_block_switches;

/* Turns that went from a thread of one block to a thread of another block of the same launch
 * while both still ran (the blocks of a launch interleave): of this process, since it began. */
EMU_API unsigned long fakecuda_block_switches(void);
EMU_API unsigned long fakecuda_block_switches(void)
{
    return __atomic_load_n(&emu_block_switches, __ATOMIC_ACQUIRE);
}

/* The kernel entry the calling thread launched last (NULL: none yet), and how many launches of
 * the entry `name` this process made: which code a call ran (the generic kernel or one of fixed
 * type, op and rank count). */
EMU_API const char *fakecuda_last_kernel(void);
EMU_API const char *fakecuda_last_kernel(void)
{
    return emu_last_entry;
}

EMU_API long fakecuda_kernel_launches(const char *name);
EMU_API long fakecuda_kernel_launches(const char *name)
{
    for (int i = 0; i < EMU_ENTRIES; i++) {
        const char *n = __atomic_load_n(&emu_entry_names[i], __ATOMIC_ACQUIRE);
        if (n != NULL && name != NULL && strcmp(n, name) == 0) {
            return __atomic_load_n(&emu_entry_launches[i], __ATOMIC_ACQUIRE);
        }
    }
    return 0;
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

#ifdef __x86_64__
/* emu_switch(&save, to): saves the callee-saved registers, MXCSR and the x87 control word on this
 * stack, stores the stack pointer in save, and resumes the stack to as saved there. */
void emu_switch(void **save, void *to);
__asm__(".text\n"
        ".globl emu_switch\n"
        ".hidden emu_switch\n"
        ".type emu_switch, @function\n"
        "emu_switch:\n"
        "  pushq %rbp\n  pushq %rbx\n  pushq %r12\n  pushq %r13\n  pushq %r14\n  pushq %r15\n"
        "  subq $8, %rsp\n  stmxcsr (%rsp)\n  fnstcw 4(%rsp)\n"
        "  movq %rsp, (%rdi)\n"
        "  movq %rsi, %rsp\n"
        "  ldmxcsr (%rsp)\n  fldcw 4(%rsp)\n  addq $8, %rsp\n"
        "  popq %r15\n  popq %r14\n  popq %r13\n  popq %r12\n  popq %rbx\n  popq %rbp\n"
        "  ret\n"
        ".size emu_switch, .-emu_switch\n");
#endif

void emu_yield(void);
void emu_yield(void)
{
    emu_block_t *b = emu_blk;
    if (b != NULL) {
#ifdef __x86_64__
        emu_switch(&b->fiber[b->cur].sp, emu_sched_sp);
#else
        swapcontext(&b->fiber[b->cur].uc, &emu_sched);
#endif
    }
}

static uint64_t emu_rand(uint64_t *rng)
{
    /* xorshift64* */
    *rng ^= *rng >> 12;
    *rng ^= *rng << 25;
    *rng ^= *rng >> 27;
    return *rng * 0x2545F4914F6CDD1Dull;
}

/* At a global access: another fiber's turn, after a random number of accesses. */
static inline void emu_maybe_switch(emu_block_t *b)
{
    if (--b->switch_in == 0) {
        b->switch_in = 1 + (unsigned)(emu_rand(&b->rng) >> 33) % (2 * EMU_SWITCH_EVERY - 1);
        emu_yield();
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
    /* bar.sync: every thread leaves with the latest acquire point of any (and the stores made
     * before it are ordered before the others' accesses after it: the generation in their
     * records says so) */
    if (f->acq > b->acc_acq) {
        b->acc_acq = f->acq;
    }
    if (++b->arrived == b->live && !b->frozen) {
        b->arrived = 0;
        b->gen_acq = b->acc_acq;
        b->acc_acq = 0;
        b->gen++;
        f->acq = b->gen_acq;
        return;
    }
    f->waiting = 1;
    f->wait_gen = gen;
    while (b->gen == gen) {
        emu_yield();
    }
    f->waiting = 0;
    if (b->gen_acq > f->acq) {
        f->acq = b->gen_acq;
    }
}

static int emu_rank(void)
{
    static int rank = -2;
    if (rank == -2) {
        const char *v = getenv("OMPI_COMM_WORLD_RANK");
        v = v != NULL ? v : getenv("PMI_RANK");
        rank = v != NULL ? atoi(v) : -1;
    }
    return rank;
}

static const emu_cached_range_t *emu_range_slow(emu_block_t *b, const void *p, size_t n,
                                                const char *what);

/* Whether cache entry c holds [a, a + n) and its mapping is not of a freed allocation. */
static inline int emu_range_holds(const emu_cached_range_t *c, uintptr_t a, size_t n)
{
    return a >= c->start && a + n <= c->end && !emu_mapping_stale(c->owner_word, c->owner_id);
}

/* The range holding [p, p + n), from the worker's cache or the allocation table; rule
 * "kernel-bounds". The answer points into the block's cache: valid until the block's next
 * switch (emu_maybe_switch), when its other threads may refill the cache (held across one, it
 * named another range's shadow, or none, and the shadow read faulted: about one run in four of 40
 * enqueued allreduces of their own buffers at np 3). */
static inline __attribute__((always_inline)) const emu_cached_range_t *emu_range(emu_block_t *b,
                                                                                 const void *p,
                                                                                 size_t n,
                                                                                 const char *what)
{
    uintptr_t a = (uintptr_t)p;
    /* rule "kernel-align": a GPU's load or store of a unit of n bytes (1, 2, 4, 8 or 16) needs an
     * address aligned to it ("misaligned address", the context lost); a unit of another size to
     * the largest of those dividing it */
    size_t align = n & (~n + 1);
    if (align > 16) {
        align = 16;
    }
    if (__builtin_expect((a & (align - 1)) != 0, 0)) {
        emu_fail(
            "kernel-align",
            "%s of %zu bytes at %p by block %u thread %u of picoll_coll_kernel: not aligned to "
            "%zu bytes (a GPU stops the kernel: misaligned address)",
            what, n, p, emu_block_idx.x, emu_thread_idx.x, align);
    }
    if (b->range_gen == __atomic_load_n(&emu_mem_generation, __ATOMIC_ACQUIRE)) {
        emu_cached_range_t *last = &b->range[b->range_last];
        if (emu_range_holds(last, a, n)) {
            return last;
        }
        emu_cached_range_t *prev = &b->range[b->range_prev];
        if (emu_range_holds(prev, a, n)) {
            int k = b->range_prev;
            b->range_prev = b->range_last;
            b->range_last = k;
            return prev;
        }
    }
    return emu_range_slow(b, p, n, what);
}

__attribute__((noinline)) static const emu_cached_range_t *emu_range_slow(emu_block_t *b,
                                                                          const void *p, size_t n,
                                                                          const char *what)
{
    uintptr_t a = (uintptr_t)p;
    emu_range_t r;
    unsigned long gen = __atomic_load_n(&emu_mem_generation, __ATOMIC_ACQUIRE);
    if (b->range_gen != gen) {
        memset(b->range, 0, sizeof(b->range));
        b->range_gen = gen;
    }
    for (int i = 0; i < EMU_RANGE_CACHE; i++) {
        if (emu_range_holds(&b->range[i], a, n)) {
            if (i != b->range_last) {
                b->range_prev = b->range_last;
                b->range_last = i;
            }
            return &b->range[i];
        }
    }
    pthread_mutex_lock(&emu_lock);
    int found = emu_mem_find(a, n, &r);
    pthread_mutex_unlock(&emu_lock);
    if (found) {
        emu_mapping_check(&r, a, what); /* rule "freed-mapping" */
    }
    if (!found) {
        emu_fail("kernel-bounds",
                 "%s of %zu bytes at %p by block %u thread %u of picoll_coll_kernel: outside every "
                 "live allocation, IPC mapping and host-mapped buffer",
                 what, n, p, emu_block_idx.x, emu_thread_idx.x);
    }
    emu_cached_range_t *c = &b->range[b->range_next];
    c->start = r.start;
    c->end = r.start + r.size;
    c->shadow = r.shadow;
    c->owner_word = r.owner_word;
    c->owner_id = r.owner_id;
    b->range_prev = b->range_last;
    b->range_last = b->range_next;
    b->range_next = (b->range_next + 1) % EMU_RANGE_CACHE;
    return c;
}

static emu_shadow_t *emu_shadow_of(const emu_cached_range_t *r, uintptr_t a)
{
    return (emu_shadow_t *)(r->shadow + ((a & ~(uintptr_t)15) - r->start));
}

__attribute__((noreturn, format(printf, 2, 3))) static void emu_race(emu_block_t *b,
                                                                     const char *fmt, ...)
{
    char msg[400];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    emu_fail("kernel-race",
             "rank %d, block %u thread %u of picoll_coll_kernel: %s (FAKECUDA_SEED=%llu)",
             emu_rank(), emu_block_idx.x, (unsigned)b->cur, msg, (unsigned long long)emu_seed);
}

/* Publishes at time t the stores that thread fiber of block b's release covers: its own, and
 * those of the block a barrier since orders before it (all of the launch's when b is NULL). */
static void emu_publish(emu_worker_t *w, emu_block_t *b, int fiber, uint64_t t)
{
    size_t k = 0;
    for (size_t i = 0; i < w->npend; i++) {
        emu_pending_t *e = &w->pend[i];
        int mine = b != NULL && EMU_RUN(e->who) == EMU_RUN(b->me);
        int covered = b == NULL || (mine && ((int)EMU_FIBER(e->who) == fiber || e->gen < b->gen));
        if (!covered) {
            w->pend[k++] = *e;
            continue;
        }
        if (mine) {
            b->last_pub = t;
        }
        if (e->s != NULL &&
            EMU_WHO(__atomic_load_n(&e->s->who, __ATOMIC_RELAXED)) == EMU_WHO(e->who)) {
            __atomic_store_n(&e->s->state, t, __ATOMIC_RELEASE);
        }
    }
    w->npend = k;
    __atomic_thread_fence(__ATOMIC_SEQ_CST);
}

static void emu_pend(emu_block_t *b, emu_shadow_t *s, void *addr, uint64_t who)
{
    emu_worker_t *w = b->wk;
    emu_pending_t *last = w->npend > 0 ? &w->pend[w->npend - 1] : NULL;
    if (last != NULL && s != NULL && last->s == s && EMU_WHO(last->who) == EMU_WHO(who) &&
        last->gen == b->gen) {
        return;
    }
    if (w->npend == w->cap) {
        size_t cap = w->cap != 0 ? 2 * w->cap : 4096;
        emu_pending_t *p = realloc(w->pend, cap * sizeof(*p));
        if (p == NULL) {
            emu_fail("emulator", "no memory for the kernel's pending stores");
        }
        w->pend = p;
        w->cap = cap;
    }
    w->pend[w->npend++] = (emu_pending_t){.s = s, .addr = addr, .who = who, .gen = b->gen};
}

void emu_load(const void *p, size_t n);
void emu_load(const void *p, size_t n)
{
    emu_block_t *b = emu_blk;
    if (b == NULL) {
        return;
    }
    emu_maybe_switch(b); /* before emu_range: its answer lasts until the next switch */
    const emu_cached_range_t *r = emu_range(b, p, n, "__ldcg");
    if (r->shadow == NULL) {
        return;
    }
    emu_fiber_t *f = &b->fiber[b->cur];
    uint64_t me = b->me | (uint64_t)b->cur << 16;
    uintptr_t a = (uintptr_t)p;
    for (uintptr_t g = a & ~(uintptr_t)15; g < a + n; g += 16) {
        emu_shadow_t *s = emu_shadow_of(r, g);
        uint64_t st = __atomic_load_n(&s->state, __ATOMIC_ACQUIRE);
        uint64_t who = __atomic_load_n(&s->who, __ATOMIC_RELAXED);
        int same_run = EMU_RUN(who) == EMU_RUN(b->me);
        if (st == 0 || EMU_WHO(who) == EMU_WHO(me) || (EMU_BYTES(who) & emu_bytes(g, a, n)) == 0) {
            continue;
        }
        if ((st & EMU_UNPUB) != 0) {
            if (same_run && (unsigned)st < b->gen) {
                continue; /* a barrier since */
            }
            emu_race(b,
                     "__ldcg of %zu bytes at %p reads what thread %u of block run %llu of pid "
                     "%llu stored and has not published (no release or fence since, or none "
                     "that orders it before this load)",
                     n, p, EMU_FIBER(who), (unsigned long long)(EMU_RUN(who) & 0x1ffff),
                     (unsigned long long)EMU_PID(who));
        }
        if (same_run || st <= f->acq || (EMU_PID(who) == EMU_PID(b->me) && st <= b->start)) {
            continue;
        }
        emu_race(b,
                 "__ldcg of %zu bytes at %p reads what thread %u of pid %llu published %.6f "
                 "ms after this thread's last acquire (no acquire of a flag released after "
                 "it, and no __syncthreads after such an acquire)",
                 n, p, EMU_FIBER(who), (unsigned long long)EMU_PID(who),
                 (double)(st - f->acq) / 1e6);
    }
}

void emu_store(void *p, const void *v, size_t n);
void emu_store(void *p, const void *v, size_t n)
{
    emu_block_t *b = emu_blk;
    if (b == NULL) {
        memcpy(p, v, n);
        return;
    }
    emu_maybe_switch(b); /* before emu_range: its answer lasts until the next switch */
    const emu_cached_range_t *r = emu_range(b, p, n, "store");
    if (b->told) {
        emu_race(b,
                 "stores %zu bytes at %p after thread 0 told the host the block finished "
                 "(the done word): the host may already hand the buffer back",
                 n, p);
    }
    uint64_t me = b->me | (uint64_t)b->cur << 16;
    uintptr_t a = (uintptr_t)p;
    if (r->shadow == NULL) {
        emu_pend(b, NULL, p, me);
    }
    for (uintptr_t g = a & ~(uintptr_t)15; r->shadow != NULL && g < a + n; g += 16) {
        /* the record first: a racing reader sees it before the bytes */
        emu_shadow_t *s = emu_shadow_of(r, g);
        uint64_t was = __atomic_load_n(&s->who, __ATOMIC_RELAXED);
        uint64_t bytes = emu_bytes(g, a, n) | (EMU_WHO(was) == EMU_WHO(me) ? EMU_BYTES(was) : 0);
        __atomic_store_n(&s->who, me | bytes, __ATOMIC_RELAXED);
        __atomic_store_n(&s->state, EMU_UNPUB | b->gen, __ATOMIC_RELEASE);
        emu_pend(b, s, (void *)g, me);
    }
    __atomic_thread_fence(__ATOMIC_RELEASE);
    memcpy(p, v, n);
}

void emu_fence(void);
void emu_fence(void)
{
    emu_block_t *b = emu_blk;
    if (b == NULL) {
        __atomic_thread_fence(__ATOMIC_SEQ_CST);
        return;
    }
    emu_fiber_t *f = &b->fiber[b->cur];
    uint64_t t = emu_globaltimer();
    emu_publish(b->wk, b, b->cur, t);
    f->fence_t = t;
    if (f->pend_acq > f->acq) {
        f->acq = f->pend_acq; /* a relaxed load, then a fence: the acquire pattern */
    }
}

void emu_flag_store(uint64_t *fl, uint64_t v, int release);
void emu_flag_store(uint64_t *fl, uint64_t v, int release)
{
    emu_block_t *b = emu_blk;
    if (b == NULL) {
        __atomic_store_n(fl, v, __ATOMIC_RELEASE);
        return;
    }
    emu_maybe_switch(b); /* before emu_range: its answer lasts until the next switch */
    const emu_cached_range_t *r = emu_range(b, fl, sizeof(*fl), "flag store");
    emu_fiber_t *f = &b->fiber[b->cur];
    if (b->told) {
        emu_race(b, "stores a flag at %p after thread 0 told the host the block finished", fl);
    }
    uint64_t t = f->fence_t;
    if (release) {
        t = emu_globaltimer();
        emu_publish(b->wk, b, b->cur, t);
    }
    if (r->shadow != NULL) {
        emu_shadow_t *s = emu_shadow_of(r, (uintptr_t)fl);
        __atomic_store_n(&s->who, b->me | (uint64_t)b->cur << 16 | 0xffff, __ATOMIC_RELAXED);
        __atomic_store_n(&s->state, t, __ATOMIC_RELEASE);
    }
    __atomic_store_n(fl, v, release ? __ATOMIC_RELEASE : __ATOMIC_RELAXED);
    /* the host's acquire points: on done (or quit) it takes the block's stores as visible, so
     * this store must release them all (an earlier release of another word does not: the host
     * may have read that one before the block's last stores). Not done of a launch on a stream
     * (epoch_word): the stream's order ends that call, and its done word is the watch's only */
    volatile picoll_cuda_status_t *st = b->params->status;
    unsigned blk = emu_block_idx.x;
    int done = fl == (uint64_t *)&st->done[blk] && b->params->epoch_word == NULL,
        quit = fl == (uint64_t *)&st->quit[blk];
    if ((done || quit) && b->last_pub > t) {
        emu_race(b,
                 "tells the host the block %s with a store of its %s word that does not "
                 "release the block's stores (a relaxed store, and no fence of its thread "
                 "after their publication)",
                 done ? "finished" : "gave up", done ? "done" : "quit");
    }
    for (size_t i = 0; (done || quit) && i < b->wk->npend; i++) {
        emu_pending_t *e = &b->wk->pend[i];
        if (EMU_RUN(e->who) == EMU_RUN(b->me)) {
            emu_race(b,
                     "tells the host the block %s (its %s word) while thread %u's store at %p "
                     "is not published",
                     done ? "finished" : "gave up", done ? "done" : "quit", EMU_FIBER(e->who),
                     e->addr);
        }
    }
    b->told = b->told || fl == (uint64_t *)&st->done[blk];
}

uint64_t emu_flag_load(const uint64_t *fl, int acquire);
uint64_t emu_flag_load(const uint64_t *fl, int acquire)
{
    emu_block_t *b = emu_blk;
    if (b == NULL) {
        return __atomic_load_n(fl, __ATOMIC_ACQUIRE);
    }
    const emu_cached_range_t *r = emu_range(b, fl, sizeof(*fl), "flag load");
    uint64_t v = __atomic_load_n(fl, acquire ? __ATOMIC_ACQUIRE : __ATOMIC_RELAXED);
    if (r->shadow != NULL) {
        /* read after the value: its release's time, or a later one's */
        uint64_t t = __atomic_load_n(&emu_shadow_of(r, (uintptr_t)fl)->state, __ATOMIC_ACQUIRE);
        emu_fiber_t *f = &b->fiber[b->cur];
        uint64_t *into = acquire ? &f->acq : &f->pend_acq;
        if ((t & EMU_UNPUB) == 0 && t > *into) {
            *into = t;
        }
    }
    /* the fiber spins (reads again what it read last) or moves on (a new word or value) */
    emu_fiber_t *sf = &b->fiber[b->cur];
    if (sf->spin_at == fl && sf->spin_val == v) {
        b->spun = 1;
    } else {
        sf->spin_at = fl;
        sf->spin_val = v;
    }
    emu_yield();
    return v;
}

/* A low-latency line (cuda_kernel.h): 16 bytes {data, flag, data, flag} stored and loaded as one
 * vector, volatile (relaxed, system scope: a strong access, never a data race), of which PTX and
 * the GPUs keep each 8-byte half {data, flag} whole, not the 16 bytes: the emulation stores and
 * loads the two halves apart, another fiber (and another process) possibly between them, so that
 * a reader that checks one flag only can take half a line. The line is the arrival: no store is
 * published by it and no acquire point taken. whole 0 (a mutant): not even the halves are whole,
 * the flags stored before the data and loaded after it, with a pause between, as a store or load
 * split into words in the wrong order would be. A line store's shadow names no bytes (bytes 0):
 * rule "line-on-data" fails a line load of a granule that a plain store wrote last (raw data can
 * hold any words, a line's flags included: read as a line it is an arrival with wrong data). */
static void emu_line_words(uint32_t *w, const uint32_t *v, int first, int yield)
{
    __atomic_store_n(&w[first], __atomic_load_n(&v[first], __ATOMIC_RELAXED), __ATOMIC_RELAXED);
    __atomic_store_n(&w[first + 2], __atomic_load_n(&v[first + 2], __ATOMIC_RELAXED),
                     __ATOMIC_RELAXED);
    if (yield) {
        emu_yield();
        sched_yield();
    }
}

/* The running block of a line store or load at p (what: which), which must be 16-byte aligned. */
static emu_block_t *emu_line_block(const void *p, const char *what)
{
    emu_block_t *b = emu_blk;
    if (b == NULL || ((uintptr_t)p & 15) != 0) {
        emu_fail("emulator", "a 16-byte line %s at %p %s", what, p,
                 b == NULL ? "outside a kernel" : "not 16-byte aligned");
    }
    return b;
}

void emu_line_store(void *p, const void *v, int whole);
void emu_line_store(void *p, const void *v, int whole)
{
    emu_block_t *b = emu_line_block(p, "store");
    if (b->frozen) {
        /* a kernel that started and never arrives (fakecuda_freeze_next_kernel): with the lines
         * the arrival is the data, so it stops before its first one, at a barrier that never
         * opens */
        emu_syncthreads();
    }
    emu_maybe_switch(b);
    const emu_cached_range_t *r = emu_range(b, p, 16, "line store");
    if (b->told) {
        emu_race(b, "stores a line at %p after thread 0 told the host the block finished", p);
    }
    if (r->shadow != NULL) {
        emu_shadow_t *s = emu_shadow_of(r, (uintptr_t)p);
        __atomic_store_n(&s->who, b->me | (uint64_t)b->cur << 16, __ATOMIC_RELAXED);
        __atomic_store_n(&s->state, b->fiber[b->cur].fence_t | 1, __ATOMIC_RELEASE);
    }
    uint64_t *h = p;
    const uint64_t *src = v;
    if (!whole) {
        emu_line_words(p, v, 1, 1); /* the flags */
        emu_line_words(p, v, 0, 0); /* then the data */
        return;
    }
    __atomic_store_n(&h[0], src[0], __ATOMIC_RELAXED);
    emu_maybe_switch(b);
    __atomic_store_n(&h[1], src[1], __ATOMIC_RELAXED);
}

void emu_line_load(const void *p, void *out, int whole);
void emu_line_load(const void *p, void *out, int whole)
{
    emu_block_t *b = emu_line_block(p, "load");
    const emu_cached_range_t *r = emu_range(b, p, 16, "line load");
    if (r->shadow != NULL) {
        emu_shadow_t *s = emu_shadow_of(r, (uintptr_t)p);
        uint64_t st = __atomic_load_n(&s->state, __ATOMIC_ACQUIRE);
        uint64_t who = __atomic_load_n(&s->who, __ATOMIC_RELAXED);
        if (st != 0 && EMU_BYTES(who) != 0) {
            emu_fail("line-on-data",
                     "rank %d, block %u thread %u of picoll_coll_kernel: a line load at %p of a "
                     "granule that a plain store (raw data, thread %u of pid %llu) wrote last: "
                     "its words may look like the flags (FAKECUDA_SEED=%llu)",
                     emu_rank(), emu_block_idx.x, (unsigned)b->cur, p, EMU_FIBER(who),
                     (unsigned long long)EMU_PID(who), (unsigned long long)emu_seed);
        }
    }
    const uint64_t *h = p;
    uint64_t *o = out;
    if (!whole) {
        emu_line_words(out, p, 0, 1); /* the data */
        emu_line_words(out, p, 1, 0); /* then the flags */
    } else {
        o[0] = __atomic_load_n(&h[0], __ATOMIC_RELAXED);
        emu_maybe_switch(b);
        o[1] = __atomic_load_n(&h[1], __ATOMIC_RELAXED);
    }
    b->spun = 1;
    emu_yield();
}

static size_t emu_shared_used;

size_t emu_shared_reserve(size_t n, size_t align);
size_t emu_shared_reserve(size_t n, size_t align)
{
    pthread_mutex_lock(&emu_lock);
    size_t at = (emu_shared_used + align - 1) / align * align;
    emu_shared_used = at + n;
    pthread_mutex_unlock(&emu_lock);
    if (at + n > EMU_SHARED || align > 16) {
        emu_fail("emulator",
                 "the kernel's shared memory needs more than the %d bytes a block has "
                 "(EMU_SHARED)",
                 EMU_SHARED);
    }
    return at;
}

char *emu_shared_base(void)
{
    return emu_blk->shared;
}

int emu_mutant(int id, int line, const char *func, const char *what);
int emu_mutant(int id, int line, const char *func, const char *what)
{
    static int mutant = -1, told;
    if (mutant < 0) {
        mutant = emu_env_int("FAKECUDA_MUTANT", 0, 0, 1 << 20);
    }
    if (id != mutant) {
        return 0;
    }
    if (!__atomic_exchange_n(&told, 1, __ATOMIC_ACQ_REL)) {
        fprintf(stderr, "fakecuda: mutant %d: the %s at coll_kernel.cu:%d (%s) is weakened\n", id,
                what, line, func);
    }
    return 1;
}

/* ---- running a launch ---- */

static void emu_fiber_main(void)
{
    emu_block_t *b = emu_blk;
    b->fn(*b->params);
    b->fiber[b->cur].done = 1;
    b->live--;
    /* an exited thread no longer holds a barrier back */
    if (b->live > 0 && b->arrived == b->live && !b->frozen) {
        b->arrived = 0;
        b->gen_acq = b->acc_acq;
        b->acc_acq = 0;
        b->gen++;
    }
#ifdef __x86_64__
    void *gone;
    emu_switch(&gone, emu_sched_sp); /* never resumed */
#endif
    /* returning resumes uc_link: the scheduler */
}

/* FAKECUDA_SEED, or one made from the clock and the pid: said once per process. */
static uint64_t emu_seed_get(void)
{
    pthread_mutex_lock(&emu_lock);
    if (emu_seed == 0) {
        const char *v = getenv("FAKECUDA_SEED");
        char *end;
        unsigned long long x = v != NULL ? strtoull(v, &end, 0) : 0;
        if (v != NULL && (*v == '\0' || *end != '\0')) {
            pthread_mutex_unlock(&emu_lock);
            emu_fail("emulator", "FAKECUDA_SEED=%s is not a number", v);
        }
        emu_seed = x != 0 ? x : (emu_globaltimer() ^ (uint64_t)getpid() << 32) | 1;
    }
    uint64_t seed = emu_seed + 0x9E3779B97F4A7C15ull * ++emu_workers;
    pthread_mutex_unlock(&emu_lock);
    return seed != 0 ? seed : 1;
}

static emu_worker_t *emu_worker_get(void)
{
    if (emu_wk != NULL) {
        return emu_wk;
    }
    emu_worker_t *w = calloc(1, sizeof(*w));
    size_t len = (size_t)EMU_FIBERS * (EMU_STACK + EMU_GUARD);
    char *s =
        mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (w == NULL || s == MAP_FAILED) {
        emu_fail("emulator", "no memory for the fibers of a kernel launch");
    }
    /* a guard page below each stack: an overflow faults instead of corrupting a neighbour */
    for (int i = 0; i < EMU_FIBERS; i++) {
        mprotect(s + (size_t)i * (EMU_STACK + EMU_GUARD), EMU_GUARD, PROT_NONE);
    }
    w->stacks = s;
    w->pid = getpid(); /* a worker is a thread of one process: no system call per block run */
    prctl(PR_SET_TIMERSLACK, 1000UL, 0, 0, 0); /* its naps when stuck: 20 us, not 70 */
    w->rng = emu_seed_get();
    if (!__atomic_exchange_n(&emu_seed_told, 1, __ATOMIC_ACQ_REL)) {
        fprintf(stderr, "fakecuda: rank %d: kernel schedule seed FAKECUDA_SEED=%llu\n", emu_rank(),
                (unsigned long long)emu_seed);
    }
    emu_wk = w;
    return w;
}

void emu_worker_release(void)
{
    emu_worker_t *w = emu_wk;
    if (w != NULL) {
        munmap(w->stacks, (size_t)EMU_FIBERS * (EMU_STACK + EMU_GUARD));
        for (int k = 0; k < EMU_WINDOW; k++) {
            free(w->slot[k]);
        }
        free(w->pend);
        free(w);
        emu_wk = NULL;
    }
}

/* Whether a block starts late, and how late: CUDA promises no co-scheduling of a launch's blocks
 * outside cooperative launches (under MPS, or beside other work, a block may start after the
 * others ended), so a kernel must not rely on it. Of a launch of several blocks, one block in four
 * (the seed's choice) waits up to EMU_LATE_ROUNDS rounds of the others' turns, or until every
 * other block of the window has finished, whichever comes first: a block that waits for it (a
 * GPU holds it resident until it ends) still sees it start. FAKECUDA_LATE_BLOCKS=0: none late. */
#define EMU_LATE_ROUNDS 32
static unsigned emu_late_start(emu_worker_t *w, unsigned grid)
{
    static int on = -1;
    if (on < 0) {
        on = emu_env_int("FAKECUDA_LATE_BLOCKS", 1, 0, 1);
    }
    if (!on || grid < 2 || emu_rand(&w->rng) % 8 != 0) {
        return 0;
    }
    return 1 + (unsigned)(emu_rand(&w->rng) >> 33) % EMU_LATE_ROUNDS;
}

/* Starts block idx of the launch in window slot b: its fibers at their first instruction (late,
 * emu_late_start says). */
static void emu_block_start(emu_block_t *b, unsigned idx, uint64_t start, unsigned grid)
{
    b->late = emu_late_start(b->wk, grid);
    b->idx = idx;
    b->active = 1;
    b->live = b->n;
    b->arrived = 0;
    b->gen = 0;
    b->me = (uint64_t)b->wk->pid << 42 |
            (uint64_t)(__atomic_add_fetch(&emu_runs, 1, __ATOMIC_RELAXED) & 0x1ffffu) << 25;
    b->start = start;
    b->acc_acq = b->gen_acq = 0;
    b->told = 0;
    b->last_pub = 0;
    b->spun = 0;
    b->rng = emu_rand(&b->wk->rng) | 1;
    b->switch_in = 1;
    for (int i = 0; i < b->n; i++) {
        emu_fiber_t *f = &b->fiber[i];
        f->done = f->waiting = 0;
        f->acq = f->fence_t = f->pend_acq = 0;
        f->spin_at = NULL;
        char *stack = b->stacks + (size_t)i * (EMU_STACK + EMU_GUARD) + EMU_GUARD;
#ifdef __x86_64__
        /* a frame emu_switch resumes: zero registers, this thread's MXCSR and x87 control word,
         * then a return into emu_fiber_main with the stack aligned as after a call */
        uint64_t *top = (uint64_t *)(stack + EMU_STACK - 16);
        top[0] = (uint64_t)(uintptr_t)emu_fiber_main;
        top[1] = 0;
        uint64_t *frame = top - 7;
        memset(frame, 0, 7 * sizeof(uint64_t));
        __asm__ volatile("stmxcsr %0\n\tfnstcw %1"
                         : "=m"(*(uint32_t *)frame), "=m"(*((uint16_t *)frame + 2)));
        f->sp = frame;
#else
        getcontext(&f->uc);
        f->uc.uc_stack.ss_sp = stack;
        f->uc.uc_stack.ss_size = EMU_STACK;
        f->uc.uc_link = &emu_sched;
        makecontext(&f->uc, emu_fiber_main, 0);
#endif
    }
}

/* Runs a launch: as many of its blocks at once as EMU_FIBERS fibers hold (the window), their
 * threads taking turns in a random rotation that goes from block to block, a finished block's
 * slot taken by the next block of the grid. Block b of one rank only ever waits for block b of
 * the other ranks, and every rank starts its blocks in the same order, so a window smaller than
 * the grid cannot deadlock (a GPU holding fewer blocks than the grid would: the launch-resident
 * rule); the blocks that run together interleave at any global access, as a GPU's do. */
void emu_kernel_run(emu_op_t *op)
{
    emu_worker_t *w = emu_worker_get();
    unsigned grid = op->u.kernel.grid;
    int n = (int)op->u.kernel.block;
    int win = EMU_FIBERS / n;
    win = win < 1 ? 1 : win > EMU_WINDOW ? EMU_WINDOW : win;
    win = (unsigned)win > grid ? (int)grid : win;
    uint64_t start = emu_globaltimer();
    emu_grid_dim = (emu_dim3_t){.x = grid, .y = 1, .z = 1};
    emu_block_dim = (emu_dim3_t){.x = (unsigned)n, .y = 1, .z = 1};
    unsigned next = 0, stuck = 0;
    unsigned long switches = 0;
    emu_block_t *prev = NULL;
    for (int k = 0; k < win; k++) {
        if (w->slot[k] == NULL && (w->slot[k] = calloc(1, sizeof(emu_block_t))) == NULL) {
            emu_fail("emulator", "no memory for the blocks of a kernel launch");
        }
        emu_block_t *b = w->slot[k];
        b->wk = w;
        b->stacks = w->stacks + (size_t)k * (size_t)n * (EMU_STACK + EMU_GUARD);
        b->params = op->u.kernel.params;
        b->fn = (emu_entry_fn)op->u.kernel.fn;
        b->n = n;
        b->frozen = op->u.kernel.frozen;
        emu_block_start(b, next++, start, grid);
    }
    for (int active = win; active > 0;) {
        /* a round from a (thread, block) chosen at random, block after block */
        int total = win * n, first = (int)(emu_rand(&w->rng) >> 33) % total, spun = 0, moved = 0;
        /* x = (first + j) % total goes over slot x % win, thread x / win: counted, not divided */
        int sk = first % win, i = first / win;
        for (int j = 0; j < total;
             j++, sk = sk + 1 < win ? sk + 1 : (i = i + 1 < n ? i + 1 : 0, 0)) {
            emu_block_t *b = w->slot[sk];
            emu_fiber_t *f = &b->fiber[i];
            if (!b->active || b->late > 0 || f->done || (f->waiting && f->wait_gen == b->gen)) {
                continue;
            }
            if (prev != NULL && prev != b && prev->active && prev->live > 0) {
                switches++;
            }
            prev = b;
            emu_blk = b;
            b->cur = i;
            emu_block_idx = (emu_dim3_t){.x = b->idx, .y = 0, .z = 0};
            emu_thread_idx = (emu_dim3_t){.x = (unsigned)i, .y = 0, .z = 0};
            b->spun = 0;
#ifdef __x86_64__
            emu_switch(&emu_sched_sp, f->sp);
#else
            swapcontext(&emu_sched, &f->uc);
#endif
            /* the turn ended re-reading an unchanged flag (or a line), or having moved on */
            spun |= b->spun;
            moved |= !b->spun;
        }
        emu_blk = NULL;
        /* a late block starts once its rounds are up, or no other block of the window runs */
        int others = 0;
        for (int k = 0; k < win; k++) {
            others += w->slot[k]->active && w->slot[k]->late == 0 && w->slot[k]->live > 0;
        }
        for (int k = 0; k < win; k++) {
            emu_block_t *b = w->slot[k];
            if (b->active && b->late > 0 && (--b->late == 0 || others == 0)) {
                b->late = 0;
            }
        }
        for (int k = 0; k < win; k++) {
            emu_block_t *b = w->slot[k];
            /* a finished block (or, frozen, one whose threads all wait at a barrier that never
             * opens) gives its slot to the next block of the grid */
            if (b->active && (b->live == 0 || (b->frozen && b->arrived == b->live))) {
                b->active = 0;
                if (next < grid) {
                    emu_block_start(b, next++, start, grid);
                } else {
                    active--;
                }
            }
        }
        if (spun && !moved) {
            /* every fiber that had a turn waits for another process (or this one's host, or
             * the clock): let them run; after EMU_STUCK_YIELDS such rounds in a row, sleep, so
             * that a wait for a process without a CPU burns none (tests side by side on a few
             * cores: a yield there gives the CPU to whichever is next, a sleep to the others) */
            if (stuck < EMU_STUCK_YIELDS) {
                stuck++;
                sched_yield();
            } else {
                struct timespec nap = {0, EMU_STUCK_NAP_NS};
                nanosleep(&nap, NULL);
            }
        } else {
            stuck = 0;
        }
    }
    if (op->u.kernel.frozen) {
        /* every block started and stopped before its first barrier: this stream never moves
         * again; the job ends when the peers' timeouts abort it */
        for (;;) {
            pause();
        }
    }
    __atomic_add_fetch(&emu_block_switches, switches, __ATOMIC_RELEASE);
    /* the end of the kernel publishes what no release did */
    emu_publish(w, NULL, -1, emu_globaltimer());
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
        emu_fail("stale-handle",
                 "module %p of context %p (device %d) used after that context "
                 "was reset or destroyed, which unloaded it",
                 (void *)m, (void *)m->ctx, m->ctx->device);
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
    emu_entry_fn fn;
    const char *canon;
    int entry = emu_kernel_entry(name, &fn, &canon);
    if (entry < 0 || entry >= EMU_ENTRIES) {
        return CUDA_ERROR_NOT_FOUND;
    }
    emu_function_t *f = calloc(1, sizeof(*f));
    if (f == NULL) {
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    f->magic = EMU_FUNCTION_MAGIC;
    f->module = m;
    f->fn = fn;
    f->name = canon;
    f->entry = entry;
    __atomic_store_n(&emu_entry_names[entry], canon, __ATOMIC_RELEASE);
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
    case 0: *v = emu_threads; break; /* MAX_THREADS_PER_BLOCK */
    case 1: *v = 16; break;          /* SHARED_SIZE_BYTES */
    case 4: *v = 32; break;          /* NUM_REGS */
    case 5: *v = 90; break;          /* PTX_VERSION */
    case 6: *v = 90; break;          /* BINARY_VERSION */
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
                 "%p (device %d)",
                 (void *)ctx, ctx->device, what, p, (void *)r.ctx, r.ctx->device);
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
                 "the device's %d multiprocessors x %d blocks)",
                 gx, bx, emu_client_sms * emu_blocks_per_sm, emu_client_sms, emu_sms,
                 emu_blocks_per_sm);
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
    op->u.kernel.fn = (void (*)(void))f->fn;
    op->u.kernel.size = sizeof(picoll_cuda_kparams_t);
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
    if (rc == CUDA_SUCCESS) {
        __atomic_fetch_add(&emu_entry_launches[f->entry], 1, __ATOMIC_ACQ_REL);
        emu_last_entry = f->name;
    }
    return rc;
}
