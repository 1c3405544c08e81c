/* The device executor's kernel: one kernel for every collective step and element type, with the
 * mode, type and operation switched at run time (uniform across the grid, so the switches cost
 * nothing next to the memory traffic, and the build compiles one kernel per architecture rather
 * than one per type and operation).
 *
 * Memory rules. Data buffers and flags live in each rank's own device workspace; peers read them
 * through CUDA IPC mappings. A block arrives by storing the epoch into its flag with st.release
 * at system scope after a __syncthreads, and waits by loading the peers' flags with ld.acquire at
 * system scope, then a __syncthreads; data written by a peer is read with ld.global.cg (L2, never a
 * stale L1 line). That is all PTX's memory model needs: bar.sync is morally strong at CTA scope
 * and causality order is transitive, so thread 0's release covers every thread's stores before
 * the barrier, and one thread's acquire every thread's loads after it (cooperative groups' grid
 * sync relies on the same: a barrier, then one thread's fence and flag). No thread fences.
 * A wait for a peer is bounded by %globaltimer: past the launch's spin_ns (a few ms,
 * PICOLL_CUDA_SPIN) the block gives up, whatever the peer is doing (its GPU may still run work
 * queued before the call: late is not dead), records whom it waited for in the host-mapped status
 * and returns, giving its SMs back; the host waits for the peer and relaunches the call's
 * unfinished part, each block going on from the arrival its own flag records. Each block tells the
 * host when it started and when it finished
 * there too, so that the host waits without any driver call.
 *
 * The sync points the protocol needs carry an id (DEV_SYNCTHREADS, DEV_FLAG_STORE, DEV_FLAG_LOAD,
 * DEV_LINE_STORE, DEV_LINE_LOAD, DEV_WAIT): on the GPU the plain instruction; in the emulated
 * GPU's build (tests/cuda/emu) FAKECUDA_MUTANT weakens the one it names (no barrier, a relaxed
 * store or load, a line split into words, a wait deleted), and tests/cuda/mutants.sh proves
 * that the tests then fail, under the emulation's PTX memory model. Global stores go through
 * dev_st, a plain store here, where the emulation records them.
 *
 * The element arithmetic and the reductions are in coll_kernel_reduce.cuh; each mode's steps are
 * a function of their own (dev_mode_*), which dev_coll picks by the launch's mode. */
#include <stdint.h>

#include "cuda/cuda_kernel.h"
#include "util/dtype.h"

/* Built for the CPU by the test driver's emulated GPU (tests/cuda/emu), this file has CUDA's
 * built-in names (threadIdx, __syncthreads, uint4, __ldcg, ...) and the emu_* primitives used
 * below from a portability header included before it. */

namespace {

/* The three primitives that need PTX: the global nanosecond timer, and the flag store and load
 * (release and acquire at system scope). */
#ifdef __CUDACC__
__device__ __forceinline__ uint64_t dev_globaltimer()
{
    uint64_t t;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
    return t;
}

/* A 64-bit store (st_sem) and load (ld_sem) of global memory at system scope. */
#define DEV_PTX_WORD(store, st_sem, load, ld_sem)                                                  \
    __device__ __forceinline__ void store(uint64_t *f, uint64_t v)                                 \
    {                                                                                              \
        asm volatile("st." st_sem ".sys.global.u64 [%0], %1;" ::"l"(f), "l"(v) : "memory");        \
    }                                                                                              \
    __device__ __forceinline__ uint64_t load(const uint64_t *f)                                    \
    {                                                                                              \
        uint64_t v;                                                                                \
        asm volatile("ld." ld_sem ".sys.global.u64 %0, [%1];" : "=l"(v) : "l"(f) : "memory");      \
        return v;                                                                                  \
    }
/* the flags: release and acquire */
DEV_PTX_WORD(dev_flag_store, "release", dev_flag_load, "acquire")
/* a word that orders nothing (PICOLL_CUDA_FENCES=needed): relaxed, seen by the other side
 * eventually, with no fence */
DEV_PTX_WORD(dev_word_store, "relaxed", dev_word_load, "relaxed")
#undef DEV_PTX_WORD

/* A plain store to global memory. */
template <typename T>
__device__ __forceinline__ void dev_st(T *p, T v)
{
    *p = v;
}

/* A low-latency line (cuda_kernel.h): one 16-byte vector store or load, volatile (relaxed at
 * system scope, never cached in L1), each 8-byte half {data, flag} single-copy atomic. */
__device__ __forceinline__ void dev_line_store(uint4 *p, uint4 v)
{
    asm volatile("st.volatile.global.v4.u32 [%0], {%1, %2, %3, %4};" ::"l"(p), "r"(v.x), "r"(v.y),
                 "r"(v.z), "r"(v.w)
                 : "memory");
}
__device__ __forceinline__ uint4 dev_line_load(const uint4 *p)
{
    uint4 v;
    asm volatile("ld.volatile.global.v4.u32 {%0, %1, %2, %3}, [%4];"
                 : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
                 : "l"(p)
                 : "memory");
    return v;
}

/* The protocol's sync points, id for the mutation check (ids 1 to 14, each once); DEV_WAIT(id)
 * guards a wait loop, which the check deletes */
#define DEV_WAIT(id) true
#define DEV_SYNCTHREADS(id) __syncthreads()
#define DEV_FLAG_STORE(id, f, v) dev_flag_store(f, v)
#define DEV_FLAG_LOAD(id, f) dev_flag_load(f)
#define DEV_LINE_STORE(id, p, v) dev_line_store(p, v)
#define DEV_LINE_LOAD(id, p) dev_line_load(p)
/* A variable of the block's shared memory */
#define DEV_SHARED(T, name) __shared__ T name
#else
__device__ __forceinline__ uint64_t dev_globaltimer()
{
    return emu_globaltimer();
}
__device__ __forceinline__ void dev_flag_store(uint64_t *f, uint64_t v)
{
    emu_flag_store(f, v, 1);
}
__device__ __forceinline__ uint64_t dev_flag_load(const uint64_t *f)
{
    return emu_flag_load(f, 1);
}
__device__ __forceinline__ void dev_word_store(uint64_t *f, uint64_t v)
{
    emu_flag_store(f, v, 0);
}
__device__ __forceinline__ uint64_t dev_word_load(const uint64_t *f)
{
    return emu_flag_load(f, 0);
}

template <typename T>
__device__ __forceinline__ void dev_st(T *p, T v)
{
    emu_st(p, v);
}

__device__ __forceinline__ void dev_line_store(uint4 *p, uint4 v, bool whole)
{
    emu_line_store(p, &v, whole);
}
__device__ __forceinline__ uint4 dev_line_load(const uint4 *p, bool whole)
{
    uint4 v;
    emu_line_load(p, &v, whole);
    return v;
}

#define DEV_MUTANT(id, what) emu_mutant(id, __LINE__, __func__, what)
#define DEV_WAIT(id) (!DEV_MUTANT(id, "wait loop"))
#define DEV_SYNCTHREADS(id) (DEV_MUTANT(id, "__syncthreads") ? (void)0 : __syncthreads())
#define DEV_FLAG_STORE(id, f, v) emu_flag_store(f, v, !DEV_MUTANT(id, "st.release"))
#define DEV_FLAG_LOAD(id, f) emu_flag_load(f, !DEV_MUTANT(id, "ld.acquire"))
#define DEV_LINE_STORE(id, p, v) dev_line_store(p, v, !DEV_MUTANT(id, "16-byte line store"))
#define DEV_LINE_LOAD(id, p) dev_line_load(p, !DEV_MUTANT(id, "16-byte line load"))
/* the blocks of a launch run together on one CPU thread: each has its own shared memory, where
 * the variable has the same offset (reserved once per process) */
#define DEV_SHARED(T, name)                                                                        \
    static const size_t name##_at = emu_shared_reserve(sizeof(T), alignof(T));                     \
    T &name = *reinterpret_cast<T *>(emu_shared_base() + name##_at)
#endif

/* Block blockIdx.x starts: tell the peers (a block that gives up names a peer whose launch has
 * not started as the late one) and this rank's host. */
__device__ void dev_start(const picoll_cuda_kparams_t &p, uint64_t first)
{
    if (p.lean) {
        /* relaxed, from the second warp where there is one: thread 0's releases (the arrivals)
         * then wait for none of these stores, one of them across PCIe */
        if (threadIdx.x == (blockDim.x > 32 ? 32u : 0u)) {
            dev_word_store(p.flags[p.me] + PICOLL_CUDA_STARTED_WORD +
                               (size_t)blockIdx.x * PICOLL_CUDA_FLAG_STRIDE,
                           first);
            dev_word_store((uint64_t *)&p.status->started[blockIdx.x], first);
        }
        return;
    }
    if (threadIdx.x == 0) {
        dev_flag_store(p.flags[p.me] + PICOLL_CUDA_STARTED_WORD +
                           (size_t)blockIdx.x * PICOLL_CUDA_FLAG_STRIDE,
                       first);
        dev_flag_store((uint64_t *)&p.status->started[blockIdx.x], first);
    }
}

/* Tell the host that block blockIdx.x of this launch ends without finishing. */
__device__ void dev_quit(const picoll_cuda_kparams_t &p)
{
    if (threadIdx.x == 0) {
        dev_flag_store((uint64_t *)&p.status->quit[blockIdx.x], p.seq);
    }
}

/* Whether block blockIdx.x must not run: an earlier launch of this attempt gave up (the flag
 * protocol needs every rank's arrivals in order, so this one must not arrive before the one that
 * gave up is resumed), or, in a resumed launch, the block finished in an earlier attempt (its peers
 * may already reuse the slots it read). One load of this rank's own flag lines. */
__device__ bool dev_skip(const picoll_cuda_kparams_t &p)
{
    if (p.lean && p.epoch_word != nullptr) {
        return false; /* on a stream nothing gives up (seq_floor is seq) nor resumes */
    }
    uint64_t halt = dev_flag_load(p.flags[p.me] + PICOLL_CUDA_HALT_WORD);
    if (halt >= p.seq_floor && halt < p.seq) {
        dev_quit(p);
        return true;
    }
    return p.resume && (p.done_mask >> blockIdx.x & 1u) != 0;
}

/* Resumed launch: how many of the launch's arrivals block blockIdx.x made in earlier attempts (its
 * own flag is monotonic and only it writes the line). */
__device__ int dev_arrived(const picoll_cuda_kparams_t &p, uint64_t first)
{
    if (!p.resume) {
        return 0;
    }
    uint64_t mine = dev_flag_load(p.flags[p.me] + (size_t)blockIdx.x * PICOLL_CUDA_FLAG_STRIDE);
    return mine >= first + 2 ? 3 : mine >= first + 1 ? 2 : mine >= first ? 1 : 0;
}

/* After a wait, thread 0 of a block that gave up (gave_up: 1, a late peer, 2, the host's veto)
 * tells the host. Returns whether it gave up. */
__device__ bool dev_gave_up(const picoll_cuda_kparams_t &p, int gave_up)
{
    if (gave_up != 0 && threadIdx.x == 0) {
        /* the halt word first: the launches queued behind this one read it when they start (the
         * release of halted orders it before; a fence between adds nothing) */
        dev_flag_store(p.flags[p.me] + PICOLL_CUDA_HALT_WORD, p.seq);
        if (gave_up == 1) {
            dev_flag_store((uint64_t *)&p.status->halted, p.seq);
        }
        DEV_FLAG_STORE(5, (uint64_t *)&p.status->quit[blockIdx.x], p.seq);
    }
    return gave_up != 0;
}

/* One look of a waiting thread at the clock (every 64 spins) while it waits for peer t: 0 to go on
 * waiting, else why it stops (gave_up's value: 1, the peer is late past spin_ns, which is named in
 * the status; 2, the host vetoed the call). On a stream (epoch_word) nobody relaunches: the wait
 * goes on, naming the peer to the host's watch (picoll_cuda_stream_watch) every spin, until the
 * peer arrives or the host aborts the stream's calls (the veto word). since: 0 at the first. */
__device__ int dev_wait_tick(const picoll_cuda_kparams_t &p, int t, uint64_t first, uint64_t *since)
{
    if (p.veto_at != 0 && dev_flag_load((const uint64_t *)&p.status->veto) == p.veto_at) {
        return 2;
    }
    uint64_t now = dev_globaltimer();
    if (*since == 0) {
        *since = now;
    } else if (now - *since > p.spin_ns) {
        /* late, or running and waiting for somebody else (its block 0 or this block started
         * this launch)? */
        const size_t line = (size_t)blockIdx.x * PICOLL_CUDA_FLAG_STRIDE;
        const uint64_t *started = p.flags[t] + PICOLL_CUDA_STARTED_WORD;
        bool runs = dev_flag_load(started) >= first || dev_flag_load(started + line) >= first;
        dev_st((uint8_t *)&p.status->missing[t], (uint8_t)(runs ? 1 : 2));
        if (p.epoch_word != nullptr) {
            *since = now;
            return 0;
        }
        return 1;
    }
    return 0;
}

/* Arrive at epoch (unless an earlier attempt did) and wait for block blockIdx.x of every peer.
 * Returns true when some peer did not arrive within spin_ns: the block has told the host and
 * returns; its arrival stays stored, so the peers go on, and a relaunch waits again at epoch.
 * Also true, at once, when the host vetoed the call (a hot-path call, veto_at, that some rank
 * said no to: that rank never arrives, so no block of any rank gets past the wait that needs
 * it, nor writes dst): the halt word stops the launches queued behind, the host is told through
 * quit only (not halted: nothing is resumed). */
__device__ bool dev_arrive_wait(const picoll_cuda_kparams_t &p, uint64_t first, uint64_t epoch,
                                bool arrive)
{
    DEV_SHARED(int, gave_up);
    const size_t line = (size_t)blockIdx.x * PICOLL_CUDA_FLAG_STRIDE;

    /* No fence of each thread before the barrier: the barrier orders their data stores before
     * thread 0's st.release, and a release is cumulative. gave_up is reset before the same
     * barrier, not after it behind a second one: it is 0 wherever an earlier wait's late reader
     * may still read it (a wait that gave up returns), so thread 0 writes it only where it is
     * not 0 (the launch's first wait): a store of the 0 that is there would race with those
     * reads. Only thread 0 reads it here, through a volatile load inside its branch: a plain
     * one the compiler loads in every thread and predicates, which races with thread 0's store
     * (compute-sanitizer racecheck on an H100, 2026-11-26, reported both) */
    if (threadIdx.x == 0) {
        if (*(volatile int *)&gave_up != 0) {
            gave_up = 0;
        }
    }
    DEV_SYNCTHREADS(1);
    if (threadIdx.x == 0 && arrive) {
        DEV_FLAG_STORE(2, p.flags[p.me] + line, epoch);
    }
    int t = (int)threadIdx.x;
    if (t < p.nranks && t != p.me && (p.peers >> t & 1u)) {
        const uint64_t *f = p.flags[t] + line;
        uint64_t since = 0;
        for (unsigned spins = 1; DEV_FLAG_LOAD(3, f) < epoch; spins++) {
            if ((spins & 63) != 0) { /* the clock often enough for a spin of a few ms */
                continue;
            }
            /* several peers' threads may give up at once: atomicMax, so that a veto (2) wins
             * over a late peer (1) whatever their order, and the stores do not race */
            int why = dev_wait_tick(p, t, first, &since);
            if (why != 0) {
                atomicMax(&gave_up, why);
                break;
            }
            if (p.nap_ns != 0) { /* ranks sharing a GPU: leave the peer's kernel some room */
                __nanosleep(p.nap_ns);
            }
        }
    }
    /* thread t's acquire orders every thread's reads of peer t after this barrier (no fence:
     * causality order is transitive through bar.sync), and the missing word before thread 0's
     * release of quit */
    DEV_SYNCTHREADS(4);
    return dev_gave_up(p, gave_up);
}

/* The block is done: the host is told, with every thread's writes visible system-wide (thread 0's
 * release after the barrier covers them, as at an arrival: no fence per thread). */
__device__ void dev_finish(const picoll_cuda_kparams_t &p, uint64_t first, uint64_t epoch)
{
    DEV_SYNCTHREADS(6);
    if (p.epoch_word != nullptr && blockIdx.x == 0) {
        /* on a stream, block 0 advances the epoch word to this launch's last epoch, for the next
         * launch on the workspace (stream order: it starts after this one ended). Every block
         * read the word before its first arrival: the word changes only once each of this
         * rank's blocks arrived (its own flag lines), or the host aborted the stream's calls */
        int t = (int)threadIdx.x;
        if (t > 0 && t < (int)gridDim.x && DEV_WAIT(8)) {
            const uint64_t *f = p.flags[p.me] + (size_t)t * PICOLL_CUDA_FLAG_STRIDE;
            while (dev_flag_load(f) < first &&
                   dev_flag_load((const uint64_t *)&p.status->veto) != p.veto_at) {
                __nanosleep(64);
            }
        }
        __syncthreads();
        if (threadIdx.x == 0) {
            /* the next launch on the stream reads it after this one ended: stream order makes
             * it visible there, a release adds nothing (lean) */
            if (p.lean) {
                dev_word_store(p.epoch_word, epoch);
            } else {
                dev_flag_store(p.epoch_word, epoch);
            }
        }
    }
    if (threadIdx.x == 0) {
        if (p.lean && p.epoch_word != nullptr) {
            /* on a stream nothing waits for it: only the host's watch reads it */
            dev_word_store((uint64_t *)&p.status->done[blockIdx.x], epoch);
        } else {
            DEV_FLAG_STORE(7, (uint64_t *)&p.status->done[blockIdx.x], epoch);
        }
    }
}

/* Block-wide copy of n bytes for any alignment: units of V once dst is V-aligned (src has the same
 * alignment modulo sizeof(V)), single bytes before and after. */
template <typename V>
__device__ void dev_copy_units(char *dst, const char *src, size_t n)
{
    const size_t u = sizeof(V);
    size_t head = (u - (size_t)((uintptr_t)dst % u)) % u;
    if (head > n) {
        head = n;
    }
    size_t nv = (n - head) / u;
    const unsigned char *s8 = (const unsigned char *)src;
    unsigned char *d8 = (unsigned char *)dst;
    for (size_t i = threadIdx.x; i < head; i += blockDim.x) {
        dev_st(d8 + i, __ldcg(s8 + i));
    }
    const V *sv = (const V *)(src + head);
    V *dv = (V *)(dst + head);
    for (size_t i = threadIdx.x; i < nv; i += blockDim.x) {
        dev_st(dv + i, __ldcg(sv + i));
    }
    for (size_t i = head + nv * u + threadIdx.x; i < n; i += blockDim.x) {
        dev_st(d8 + i, __ldcg(s8 + i));
    }
}

__device__ void dev_copy(char *dst, const char *src, size_t n)
{
    uintptr_t x = (uintptr_t)dst ^ (uintptr_t)src;
    if ((x & 15) == 0) {
        dev_copy_units<uint4>(dst, src, n);
    } else if ((x & 7) == 0) {
        dev_copy_units<uint2>(dst, src, n);
    } else if ((x & 3) == 0) {
        dev_copy_units<unsigned int>(dst, src, n);
    } else if ((x & 1) == 0) {
        dev_copy_units<unsigned short>(dst, src, n);
    } else {
        dev_copy_units<unsigned char>(dst, src, n);
    }
}

} // namespace

/* the element arithmetic and the reductions (dev_reduce, dev_red_any, dev_red_fixed), which store
 * through dev_st */
#include "cuda/coll_kernel_reduce.cuh"

namespace {

__host__ __device__ __forceinline__ size_t dev_round16(size_t v)
{
    return (v + 15) & ~(size_t)15;
}

/* Part k of m of [lo, hi): multiples of 16 bytes (so of every element size), the last shorter. */
__device__ __forceinline__ void dev_part(size_t lo, size_t hi, int m, int k, size_t *plo,
                                         size_t *phi)
{
    size_t per = dev_round16((hi - lo + (size_t)m - 1) / (size_t)m);
    *plo = lo + per * (size_t)k < hi ? lo + per * (size_t)k : hi;
    *phi = *plo + per < hi ? *plo + per : hi;
}

/* Where the part in this chunk of a piece of len bytes ends, at most hi (offsets in the chunk). */
__device__ __forceinline__ size_t dev_len_end(const picoll_cuda_kparams_t &p, size_t len, size_t hi)
{
    size_t left = len > p.chunk_off ? len - p.chunk_off : 0;
    return left < hi ? left : hi;
}

/* Reduce-scatter, allgatherv, alltoallv: where piece r's part of this chunk ends, at most hi. */
__device__ __forceinline__ size_t dev_piece_end(const picoll_cuda_kparams_t &p, int r, size_t hi)
{
    return dev_len_end(p, p.piece[r], hi);
}

/* Reduce-scatter, alltoallv: [lo, hi) of this chunk of the piece for every rank r, cut to its
 * length, into my slot at r * slot_stride. */
__device__ void dev_pieces_in(const picoll_cuda_kparams_t &p, char *slot, size_t lo, size_t hi)
{
    for (int r = 0; r < p.nranks; r++) {
        size_t end = dev_piece_end(p, r, hi);
        if (end > lo) {
            dev_copy(slot + (size_t)r * p.slot_stride + lo, p.src + p.piece_off[r] + lo, end - lo);
        }
    }
}

/* Where block blockIdx.x of a launch stands, as every mode's step starts: the launch's first epoch
 * ep, the slots read at ep (in) and, by the modes of two arrivals, written at ep + 1 (out), the
 * block's part [lo, hi) of the chunk, and the arrivals it made in earlier attempts (dev_arrived).
 * A resumed block skips what it did before it gave up: its copy in (and, past the second arrival,
 * its reduction), whose results the peers may be reading; dst is written only after the last
 * wait, so nothing it did was lost. */
struct dev_block_t {
    uint64_t ep;
    char *const *in;
    char *const *out;
    size_t lo, hi;
    int arrived;
};

/* One-shot allreduce and reduce: every rank's part in its slot, then every rank (reduce: the
 * root) reduces the part of every slot into dst. */
template <class R>
__device__ __forceinline__ void dev_mode_oneshot(const picoll_cuda_kparams_t &p, R red,
                                                 const dev_block_t &b)
{
    if (b.arrived < 1) {
        dev_copy(b.in[p.me] + b.lo, p.src + b.lo, b.hi - b.lo);
    }
    if (dev_arrive_wait(p, b.ep, b.ep, b.arrived < 1)) {
        return;
    }
    if (p.mode == PICOLL_CUDA_K_ONESHOT || p.me == p.root) {
        red(p, p.dst + b.lo, b.in, p.nranks, b.lo, (b.hi - b.lo) / (size_t)p.esize);
    }
    dev_finish(p, b.ep, b.ep);
}

/* One-shot with low-latency lines (dev_mode_oneshot_ll) */
#include "cuda/coll_kernel_ll.cuh"

/* Zero-copy (issue 50; PICOLL_CUDA_K_*_ZC): every rank reads the peers' user buffers where they
 * are, through the mappings the host found in its IPC cache (zsrc, zdst), in one launch for the
 * whole call. The first arrival says my input is ready: what the application wrote before the
 * call precedes it in stream order, and the release covers it. The end (dev_zc_end) is an arrival
 * after the block's last read of a peer's buffer and a wait for every peer's: until then a peer
 * may still read mine, which the application may reuse or free as soon as the call returns (the
 * copy path has no such wait: the peers read only the workspace). The wait is the mutation
 * check's DEV_WAIT 14. Returns true where the block gave up. */
__device__ __forceinline__ bool dev_zc_end(const picoll_cuda_kparams_t &p, const dev_block_t &b,
                                           uint64_t epoch, bool arrive)
{
    if (DEV_WAIT(14) && dev_arrive_wait(p, b.ep, epoch, arrive)) {
        return true;
    }
    dev_finish(p, b.ep, epoch);
    return false;
}

/* Reduce-scatter: piece r of this chunk is [lo, hi) of its bytes [chunk_off, chunk_off + bytes),
 * cut to the piece's length (uneven pieces: some may be shorter, or over); it goes to slot
 * offset r * slot_stride, so my piece starts 16-aligned in every rank's slot. */
template <class R>
__device__ __forceinline__ void dev_mode_redscat(const picoll_cuda_kparams_t &p, R red,
                                                 const dev_block_t &b)
{
    if (b.arrived < 1) {
        dev_pieces_in(p, b.in[p.me], b.lo, b.hi);
    }
    if (dev_arrive_wait(p, b.ep, b.ep, b.arrived < 1)) {
        return;
    }
    size_t end = dev_piece_end(p, p.me, b.hi);
    if (end > b.lo) {
        red(p, p.dst + b.lo, b.in, p.nranks, (size_t)p.me * p.slot_stride + b.lo,
            (end - b.lo) / (size_t)p.esize);
    }
    dev_finish(p, b.ep, b.ep);
}

/* Zero-copy reduce-scatter (PICOLL_CUDA_K_REDSCAT_ZC: even pieces of 16-byte multiples, not in
 * place): my piece of every rank's send buffer (zsrc, at piece_off[me]) reduced in rank order
 * into dst, then dev_zc_end. (Folded into dev_mode_redscat it spilled registers.) */
template <class R>
__device__ __forceinline__ void dev_mode_redscat_zc(const picoll_cuda_kparams_t &p, R red,
                                                    const dev_block_t &b)
{
    if (b.arrived < 2) {
        if (dev_arrive_wait(p, b.ep, b.ep, b.arrived < 1)) {
            return;
        }
        size_t end = dev_piece_end(p, p.me, b.hi);
        if (end > b.lo) {
            red(p, p.dst + b.lo, (char *const *)p.zsrc, p.nranks, p.piece_off[p.me] + b.lo,
                (end - b.lo) / (size_t)p.esize);
        }
    }
    dev_zc_end(p, b, b.ep + 1, b.arrived < 2);
}

/* Allgatherv: as allgather, each rank's block cut to its length (dev_piece_end). */
__device__ __forceinline__ void dev_mode_allgatherv(const picoll_cuda_kparams_t &p,
                                                    const dev_block_t &b)
{
    size_t mine = dev_piece_end(p, p.me, b.hi);
    if (b.arrived < 1 && mine > b.lo) {
        dev_copy(b.in[p.me] + b.lo, p.src + b.lo, mine - b.lo);
    }
    if (dev_arrive_wait(p, b.ep, b.ep, b.arrived < 1)) {
        return;
    }
    for (int r = 0; r < p.nranks; r++) {
        size_t end = dev_piece_end(p, r, b.hi);
        if (end > b.lo && (r != p.me || !p.skip_self)) {
            dev_copy(p.dst + p.piece_off[r] + b.lo, b.in[r] + b.lo, end - b.lo);
        }
    }
    dev_finish(p, b.ep, b.ep);
}

/* Bcast: every rank arrives (a rank writes its slot again two epochs on only once every peer
 * arrived after reading it); only the root's slot carries data. Zero-copy
 * (PICOLL_CUDA_K_BCAST_ZC): no copy in, the others read the root's buffer (zsrc[root]), then
 * dev_zc_end: the root returns only once nobody reads its buffer. */
__device__ __forceinline__ void dev_mode_bcast(const picoll_cuda_kparams_t &p, const dev_block_t &b)
{
    const bool zc = p.mode == PICOLL_CUDA_K_BCAST_ZC;
    if (!zc && b.arrived < 1 && p.me == p.root) {
        dev_copy(b.in[p.me] + b.lo, p.src + b.lo, b.hi - b.lo);
    }
    if (b.arrived < 2) { /* the copy path's blocks arrive once: always */
        if (dev_arrive_wait(p, b.ep, b.ep, b.arrived < 1)) {
            return;
        }
        if (p.me != p.root) {
            dev_copy(p.dst + b.lo, (zc ? p.zsrc[p.root] : b.in[p.root]) + b.lo, b.hi - b.lo);
        }
    }
    if (zc) {
        dev_zc_end(p, b, b.ep + 1, b.arrived < 2);
    } else {
        dev_finish(p, b.ep, b.ep);
    }
}

/* Zero-copy two-shot allreduce: rank r reduces part r of the block's part of every rank's input
 * into its own output (in place too: part r of a peer's buffer is written by that peer only after
 * the second arrival, by which rank r has read it), then copies every other part from its
 * owner's output, reduced in rank order as the copy path's (the same bits). */
template <class R>
__device__ __forceinline__ void dev_mode_twoshot_zc(const picoll_cuda_kparams_t &p, R red,
                                                    const dev_block_t &b)
{
    size_t plo, phi;
    if (b.arrived < 2) {
        if (dev_arrive_wait(p, b.ep, b.ep, b.arrived < 1)) {
            return;
        }
        dev_part(b.lo, b.hi, p.nranks, p.me, &plo, &phi);
        red(p, p.dst + plo, (char *const *)p.zsrc, p.nranks, plo, (phi - plo) / (size_t)p.esize);
    }
    if (b.arrived < 3) {
        if (dev_arrive_wait(p, b.ep, b.ep + 1, b.arrived < 2)) {
            return;
        }
        for (int r = 0; r < p.nranks; r++) {
            if (r != p.me) {
                dev_part(b.lo, b.hi, p.nranks, r, &plo, &phi);
                dev_copy(p.dst + plo, p.zdst[r] + plo, phi - plo);
            }
        }
    }
    dev_zc_end(p, b, b.ep + 2, b.arrived < 3);
}

/* Two-shot allreduce: rank r reduces part r of the block's part of every slot into its out slot
 * (a reduce-scatter), then every rank copies every rank's reduced part into dst. */
template <class R>
__device__ __forceinline__ void dev_mode_twoshot(const picoll_cuda_kparams_t &p, R red,
                                                 const dev_block_t &b)
{
    size_t plo, phi;
    if (b.arrived < 1) {
        dev_copy(b.in[p.me] + b.lo, p.src + b.lo, b.hi - b.lo);
    }
    if (b.arrived < 2) {
        if (dev_arrive_wait(p, b.ep, b.ep, b.arrived < 1)) {
            return;
        }
        dev_part(b.lo, b.hi, p.nranks, p.me, &plo, &phi);
        red(p, b.out[p.me] + plo, b.in, p.nranks, plo, (phi - plo) / (size_t)p.esize);
    }
    if (dev_arrive_wait(p, b.ep, b.ep + 1, b.arrived < 2)) {
        return;
    }
    for (int r = 0; r < p.nranks; r++) {
        dev_part(b.lo, b.hi, p.nranks, r, &plo, &phi);
        dev_copy(p.dst + plo, b.out[r] + plo, phi - plo);
    }
    dev_finish(p, b.ep, b.ep + 1);
}

/* Hybrid cube mesh: every block reduces its slice of its quad's inputs (read over the quad's
 * NVLinks) into its out buffer, then combines that with the same slice of its relay's out buffer
 * (the other quad's result, read over the relay link): (quad of rank 0) op (other quad) on every
 * rank. Both arrivals wait for the quad and the relay, so that no buffer is written again while
 * one of them may still read it. */
template <class R>
__device__ __forceinline__ void dev_mode_hcm(const picoll_cuda_kparams_t &p, R red,
                                             const dev_block_t &b)
{
    char *quad_in[4], *pair[2];
    for (int k = 0; k < 4; k++) {
        quad_in[k] = b.in[p.quad[k]];
    }
    if (b.arrived < 1) {
        dev_copy(b.in[p.me] + b.lo, p.src + b.lo, b.hi - b.lo);
    }
    if (b.arrived < 2) {
        if (dev_arrive_wait(p, b.ep, b.ep, b.arrived < 1)) {
            return;
        }
        red(p, b.out[p.me] + b.lo, quad_in, 4, b.lo, (b.hi - b.lo) / (size_t)p.esize);
    }
    if (dev_arrive_wait(p, b.ep, b.ep + 1, b.arrived < 2)) {
        return;
    }
    pair[p.quad_first ? 0 : 1] = b.out[p.me];
    pair[p.quad_first ? 1 : 0] = b.out[p.relay];
    red(p, p.dst + b.lo, pair, 2, b.lo, (b.hi - b.lo) / (size_t)p.esize);
    dev_finish(p, b.ep, b.ep + 1);
}

/* Allgather: every rank's part in its slot, then every slot's part (skip_self: but mine) to its
 * place in dst. Zero-copy (PICOLL_CUDA_K_ALLGATHER_ZC): no copy in, every rank's block from its
 * input (zsrc; in place: its block of its dst), then dev_zc_end. */
__device__ __forceinline__ void dev_mode_allgather(const picoll_cuda_kparams_t &p,
                                                   const dev_block_t &b)
{
    const bool zc = p.mode == PICOLL_CUDA_K_ALLGATHER_ZC;
    if (!zc && b.arrived < 1) {
        dev_copy(b.in[p.me] + b.lo, p.src + b.lo, b.hi - b.lo);
    }
    if (b.arrived < 2) { /* the copy path's blocks arrive once: always */
        if (dev_arrive_wait(p, b.ep, b.ep, b.arrived < 1)) {
            return;
        }
        for (int r = 0; r < p.nranks; r++) {
            if (r != p.me || !p.skip_self) {
                dev_copy(p.dst + (size_t)r * p.dst_stride + b.lo, (zc ? p.zsrc[r] : b.in[r]) + b.lo,
                         b.hi - b.lo);
            }
        }
    }
    if (zc) {
        dev_zc_end(p, b, b.ep + 1, b.arrived < 2);
    } else {
        dev_finish(p, b.ep, b.ep);
    }
}

/* Alltoall: the block for rank r at slot offset r * bytes; out, the block from rank r at my
 * offset in its slot. Zero-copy (PICOLL_CUDA_K_ALLTOALL_ZC, not in place): no copy in, the block
 * for me from every rank's send buffer (zsrc), then dev_zc_end. */
__device__ __forceinline__ void dev_mode_alltoall(const picoll_cuda_kparams_t &p,
                                                  const dev_block_t &b)
{
    const bool zc = p.mode == PICOLL_CUDA_K_ALLTOALL_ZC;
    if (!zc && b.arrived < 1) {
        for (int r = 0; r < p.nranks; r++) {
            dev_copy(b.in[p.me] + (size_t)r * p.bytes + b.lo,
                     p.src + (size_t)r * p.src_stride + b.lo, b.hi - b.lo);
        }
    }
    if (b.arrived < 2) { /* the copy path's blocks arrive once: always */
        if (dev_arrive_wait(p, b.ep, b.ep, b.arrived < 1)) {
            return;
        }
        for (int r = 0; r < p.nranks; r++) {
            const char *from =
                zc ? p.zsrc[r] + (size_t)p.me * p.src_stride : b.in[r] + (size_t)p.me * p.bytes;
            dev_copy(p.dst + (size_t)r * p.dst_stride + b.lo, from + b.lo, b.hi - b.lo);
        }
    }
    if (zc) {
        dev_zc_end(p, b, b.ep + 1, b.arrived < 2);
    } else {
        dev_finish(p, b.ep, b.ep);
    }
}

/* Alltoallv: as reduce-scatter's copy in, the piece for rank r at slot offset r * slot_stride,
 * cut to its length; out, the piece from rank r at my offset in its slot, cut to the length I
 * receive from it (MPI: the length it sends me). */
__device__ __forceinline__ void dev_mode_alltoallv(const picoll_cuda_kparams_t &p,
                                                   const dev_block_t &b)
{
    if (b.arrived < 1) {
        dev_pieces_in(p, b.in[p.me], b.lo, b.hi);
    }
    if (dev_arrive_wait(p, b.ep, b.ep, b.arrived < 1)) {
        return;
    }
    for (int r = 0; r < p.nranks; r++) {
        size_t end = dev_len_end(p, p.rpiece[r], b.hi);
        if (end > b.lo) {
            dev_copy(p.dst + p.rpiece_off[r] + b.lo, b.in[r] + (size_t)p.me * p.slot_stride + b.lo,
                     end - b.lo);
        }
    }
    dev_finish(p, b.ep, b.ep);
}

/* Every step of every mode, reducing with red; an entry of a fixed reduction (R::FIXED) has the
 * modes that reduce over all nranks only (picoll_cuda_fixed_mode), the others compiled out. */
template <class R>
__device__ __forceinline__ void dev_coll(const picoll_cuda_kparams_t &p, R red)
{
    size_t lo, hi;
    /* the launch's first epoch: the host's count, or on a stream (epoch_word) the last epoch of
     * this rank's previous launch there, + 1 (dev_finish advances it) */
    const uint64_t ep = p.epoch_word == nullptr ? p.epoch
                        : p.lean                ? dev_word_load(p.epoch_word) + 1
                                                : dev_flag_load(p.epoch_word) + 1;
    char *const *in = p.slot[ep & 1];
    char *const *out = p.slot[(ep + 1) & 1];

    dev_part(0, p.bytes, (int)gridDim.x, (int)blockIdx.x, &lo, &hi);
    if (dev_skip(p)) {
        return;
    }
    dev_start(p, ep);
    const int arrived = dev_arrived(p, ep);
    const dev_block_t b = {ep, in, out, lo, hi, arrived};
    switch (p.mode) {
    case PICOLL_CUDA_K_ONESHOT:
    case PICOLL_CUDA_K_REDUCE: dev_mode_oneshot(p, red, b); break;
    case PICOLL_CUDA_K_ONESHOT_LL: dev_mode_oneshot_ll(p, red, b); break;
    case PICOLL_CUDA_K_ALLGATHER_LL:
        if constexpr (!R::FIXED) {
            dev_mode_allgather_ll(p, b);
        }
        break;
    case PICOLL_CUDA_K_REDSCAT: dev_mode_redscat(p, red, b); break;
    case PICOLL_CUDA_K_REDSCAT_ZC: dev_mode_redscat_zc(p, red, b); break;
    case PICOLL_CUDA_K_ALLGATHERV:
        if constexpr (!R::FIXED) {
            dev_mode_allgatherv(p, b);
        }
        break;
    case PICOLL_CUDA_K_BCAST:
    case PICOLL_CUDA_K_BCAST_ZC:
        if constexpr (!R::FIXED) {
            dev_mode_bcast(p, b);
        }
        break;
    case PICOLL_CUDA_K_TWOSHOT: dev_mode_twoshot(p, red, b); break;
    case PICOLL_CUDA_K_TWOSHOT_ZC: dev_mode_twoshot_zc(p, red, b); break;
    case PICOLL_CUDA_K_HCM:
        if constexpr (!R::FIXED) { /* a reduction over 4 ranks, then 2 */
            dev_mode_hcm(p, red, b);
        }
        break;
    case PICOLL_CUDA_K_ALLGATHER:
    case PICOLL_CUDA_K_ALLGATHER_ZC:
        if constexpr (!R::FIXED) {
            dev_mode_allgather(p, b);
        }
        break;
    case PICOLL_CUDA_K_ALLTOALL:
    case PICOLL_CUDA_K_ALLTOALL_ZC:
        if constexpr (!R::FIXED) {
            dev_mode_alltoall(p, b);
        }
        break;
    case PICOLL_CUDA_K_ALLTOALLV:
        if constexpr (!R::FIXED) {
            dev_mode_alltoallv(p, b);
        }
        break;
    default: break;
    }
}

} // namespace

/* The generic kernel, found by name (PICOLL_CUDA_KERNEL_NAME) in the module picoll loads from the
 * embedded fatbin, and launched with cuLaunchKernel: blocks as picoll_cuda_kernel_blocks() says,
 * threads as the launch says (at least PICOLL_CUDA_MAX_LOCAL: thread t waits for local rank t). */
extern "C" __global__ void __launch_bounds__(PICOLL_CUDA_THREADS, 2)
    picoll_coll_kernel(const picoll_cuda_kparams_t p)
{
    dev_coll(p, dev_red_any());
}

/* The floor of a launch (picoll_device_floor, osu-bench --floor): the generic kernel's launch
 * shape and parameter block, no work. With a status, thread 0 of block 0 stores the launch's seq
 * in done[0] as every call's block does when it finishes (the host polls that word, as a blocking
 * call's end does); without one, it does nothing. */
extern "C" __global__ void __launch_bounds__(PICOLL_CUDA_THREADS, 2)
    picoll_floor_kernel(const picoll_cuda_kparams_t p)
{
    if (p.status != nullptr && blockIdx.x == 0 && threadIdx.x == 0) {
        dev_flag_store((uint64_t *)&p.status->done[0], p.seq);
    }
}

/* The barrier floor (picoll_device_barrier_floor, osu-bench --floor): the cheapest kernel that
 * crosses processes, a flag exchange over the workspace's IPC mappings with no data. One block (one
 * warp: thread t serves local rank t). The launch's epoch is my barrier epoch word + 1, read when it
 * runs and advanced by thread 0 at its end (stream order makes it visible to the next launch), so
 * that launches queued back to back and a graph's replays take the next epochs. Thread t of a peer
 * stores the epoch into my barrier flag in rank t's workspace (pushed: a posted remote store, no
 * remote read) and spins on rank t's flag in my own workspace (a local load), spin_ns at most: past
 * it, rank t is named in status->missing and the launch quits (quit[0], the epoch word left as it
 * was: the next launch waits at the same epoch). Then thread 0 stores the epoch word and the
 * launch's seq in status->done[0], which the host polls as a blocking call's end does. The store
 * and the load are release and acquire, as a collective's arrival and wait must be; here they
 * order nothing (no data), so no test can tell them from relaxed ones and they carry no mutant
 * id. What makes it a barrier does: the wait (DEV_WAIT 12) and the block's barrier before done
 * (DEV_SYNCTHREADS 13), which tests/cuda/barrier_floor checks with a late rank. */
extern "C" __global__ void __launch_bounds__(PICOLL_CUDA_THREADS, 2)
    picoll_barrier_kernel(const picoll_cuda_kparams_t p)
{
    DEV_SHARED(int, late);
    uint64_t *mine = p.flags[p.me];
    const uint64_t epoch = dev_word_load(mine + PICOLL_CUDA_BARRIER_EPOCH_WORD) + 1;
    const int t = (int)threadIdx.x;
    if (t == 0) {
        late = 0;
    }
    __syncthreads();
    if (t < p.nranks && t != p.me && DEV_WAIT(12)) {
        dev_flag_store(
            p.flags[t] + PICOLL_CUDA_BARRIER_WORD + (size_t)p.me * PICOLL_CUDA_FLAG_STRIDE, epoch);
        const uint64_t *f = mine + PICOLL_CUDA_BARRIER_WORD + (size_t)t * PICOLL_CUDA_FLAG_STRIDE;
        uint64_t since = 0;
        for (unsigned spins = 1; dev_flag_load(f) < epoch; spins++) {
            if ((spins & 63) != 0) {
                continue;
            }
            uint64_t now = dev_globaltimer();
            if (since == 0) {
                since = now;
            } else if (now - since > p.spin_ns) {
                dev_st((uint8_t *)&p.status->missing[t], (uint8_t)1);
                atomicMax(&late, 1);
                break;
            }
            if (p.nap_ns != 0) { /* ranks sharing a GPU: leave the peer's kernel some room */
                __nanosleep(p.nap_ns);
            }
        }
    }
    DEV_SYNCTHREADS(13);
    if (t == 0) {
        if (late != 0) {
            dev_flag_store((uint64_t *)&p.status->quit[0], p.seq);
        } else {
            dev_word_store(mine + PICOLL_CUDA_BARRIER_EPOCH_WORD, epoch);
            dev_flag_store((uint64_t *)&p.status->done[0], p.seq);
        }
    }
}

/* The entries of fixed type, op and rank count (PICOLL_CUDA_FIXED_LIST x PICOLL_CUDA_FIXED_RANKS,
 * named by PICOLL_CUDA_FIXED_NAME): the same launch bounds, so that the generic kernel's occupancy
 * holds for them (the workspace checks it). */
#define DEV_FIXED_ENTRY(tag, e, dtype, op, nr)                                                     \
    extern "C" __global__ void __launch_bounds__(PICOLL_CUDA_THREADS, 2)                           \
        picoll_coll_##tag##_r##nr(const picoll_cuda_kparams_t p)                                   \
    {                                                                                              \
        dev_coll(p, dev_red_fixed<dtype, op, nr>());                                               \
    }
#define DEV_FIXED_RANKS(tag, e, dtype, op)                                                         \
    PICOLL_CUDA_FIXED_RANKS(DEV_FIXED_ENTRY, tag, e, dtype, op)
PICOLL_CUDA_FIXED_LIST(DEV_FIXED_RANKS)
#undef DEV_FIXED_RANKS
#undef DEV_FIXED_ENTRY
