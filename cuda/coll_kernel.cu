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
 * The sync points the protocol needs carry an id (DEV_SYNCTHREADS, DEV_FLAG_STORE, DEV_FLAG_LOAD):
 * on the GPU the plain instruction; in the emulated GPU's build (tests/cuda/emu) FAKECUDA_MUTANT
 * weakens the one it names (no barrier, a relaxed store or load), and tests/cuda/mutants.sh proves
 * that the tests then fail, under the emulation's PTX memory model. Global stores go through dev_st,
 * a plain store here, where the emulation records them. */
#include <stdint.h>
#include <type_traits>

#include "cuda/cuda_kernel.h"
#include "util/dtype.h"

#ifdef __CUDACC__
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#else
/* Built for the CPU by the test driver's emulated GPU (tests/cuda/emu): a portability header
 * included before this file supplies CUDA's built-in names (threadIdx, __syncthreads, uint4,
 * __ldcg, ...) and the emu_* primitives used below; half precision converts as the host
 * reduction does (src/reduce/half.h), which gives the same bits as CUDA's conversions. */
#include "reduce/half.h"
#endif

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

__device__ __forceinline__ void dev_flag_store(uint64_t *f, uint64_t v)
{
    asm volatile("st.release.sys.global.u64 [%0], %1;" ::"l"(f), "l"(v) : "memory");
}

__device__ __forceinline__ uint64_t dev_flag_load(const uint64_t *f)
{
    uint64_t v;
    asm volatile("ld.acquire.sys.global.u64 %0, [%1];" : "=l"(v) : "l"(f) : "memory");
    return v;
}

/* A plain store to global memory. */
template <typename T>
__device__ __forceinline__ void dev_st(T *p, T v)
{
    *p = v;
}

/* The protocol's sync points, id for the mutation check (ids 1 to 7, each once) */
#define DEV_SYNCTHREADS(id) __syncthreads()
#define DEV_FLAG_STORE(id, f, v) dev_flag_store(f, v)
#define DEV_FLAG_LOAD(id, f) dev_flag_load(f)
/* A variable of the block's shared memory */
#define DEV_SHARED(T, name) __shared__ T name
#else
__device__ __forceinline__ uint64_t dev_globaltimer() { return emu_globaltimer(); }
__device__ __forceinline__ void dev_flag_store(uint64_t *f, uint64_t v) { emu_flag_store(f, v, 1); }
__device__ __forceinline__ uint64_t dev_flag_load(const uint64_t *f) { return emu_flag_load(f, 1); }

template <typename T>
__device__ __forceinline__ void dev_st(T *p, T v)
{
    emu_st(p, v);
}

#define DEV_MUTANT(id, what) emu_mutant(id, __LINE__, __func__, what)
#define DEV_SYNCTHREADS(id) (DEV_MUTANT(id, "__syncthreads") ? (void)0 : __syncthreads())
#define DEV_FLAG_STORE(id, f, v) emu_flag_store(f, v, !DEV_MUTANT(id, "st.release"))
#define DEV_FLAG_LOAD(id, f) emu_flag_load(f, !DEV_MUTANT(id, "ld.acquire"))
/* the blocks of a launch run together on one CPU thread: each has its own shared memory, where
 * the variable has the same offset (reserved once per process) */
#define DEV_SHARED(T, name)                                                          \
    static const size_t name##_at = emu_shared_reserve(sizeof(T), alignof(T));       \
    T &name = *reinterpret_cast<T *>(emu_shared_base() + name##_at)
#endif

/* Block blockIdx.x starts: tell the peers (a block that gives up names a peer whose launch has
 * not started as the late one) and this rank's host. */
__device__ void dev_start(const picoll_cuda_kparams_t &p, uint64_t first)
{
    if (threadIdx.x == 0) {
        dev_flag_store(p.flags[p.me] + PICOLL_CUDA_STARTED_WORD +
                           (size_t)blockIdx.x * PICOLL_CUDA_FLAG_STRIDE, first);
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
    return mine >= first + 1 ? 2 : mine >= first ? 1 : 0;
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
            if (p.veto_at != 0 && dev_flag_load((const uint64_t *)&p.status->veto) == p.veto_at) {
                atomicMax(&gave_up, 2);
                break;
            }
            uint64_t now = dev_globaltimer();
            if (since == 0) {
                since = now;
            } else if (now - since > p.spin_ns) {
                /* late, or running and waiting for somebody else (its block 0 or this block
                 * started this launch)? */
                const uint64_t *started = p.flags[t] + PICOLL_CUDA_STARTED_WORD;
                bool runs = dev_flag_load(started) >= first ||
                            dev_flag_load(started + line) >= first;
                dev_st((uint8_t *)&p.status->missing[t], (uint8_t)(runs ? 1 : 2));
                if (p.epoch_word != nullptr) {
                    /* on a stream nobody relaunches: the block waits on, naming the peer to the
                     * host's watch (picoll_cuda_stream_watch) every spin, until the peer arrives
                     * or the host aborts the stream's calls (the veto word) */
                    since = now;
                    continue;
                }
                atomicMax(&gave_up, 1);
                break;
            }
            __nanosleep(256); /* ranks sharing a GPU: leave the peer's kernel some room */
        }
    }
    /* thread t's acquire orders every thread's reads of peer t after this barrier (no fence:
     * causality order is transitive through bar.sync), and the missing word before thread 0's
     * release of quit */
    DEV_SYNCTHREADS(4);
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
        if (t > 0 && t < (int)gridDim.x) {
            const uint64_t *f = p.flags[p.me] + (size_t)t * PICOLL_CUDA_FLAG_STRIDE;
            while (dev_flag_load(f) < first &&
                   dev_flag_load((const uint64_t *)&p.status->veto) != p.veto_at) {
                __nanosleep(64);
            }
        }
        __syncthreads();
        if (threadIdx.x == 0) {
            dev_flag_store(p.epoch_word, epoch);
        }
    }
    if (threadIdx.x == 0) {
        DEV_FLAG_STORE(7, (uint64_t *)&p.status->done[blockIdx.x], epoch);
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

/* Store the first nbytes of v at dst, whatever dst's alignment. */
__device__ __forceinline__ void dev_store_part(char *dst, uint4 v, int nbytes)
{
    uintptr_t a = (uintptr_t)dst;
    if (nbytes == 16 && (a & 15) == 0) {
        dev_st((uint4 *)dst, v);
        return;
    }
    union {
        uint4 v;
        uint2 d[2];
        unsigned int w[4];
        unsigned char b[16];
    } u;
    u.v = v;
    if ((a & 7) == 0 && (nbytes & 7) == 0) {
        for (int i = 0; i < nbytes / 8; i++) {
            dev_st((uint2 *)dst + i, u.d[i]);
        }
    } else if ((a & 3) == 0 && (nbytes & 3) == 0) {
        for (int i = 0; i < nbytes / 4; i++) {
            dev_st((unsigned int *)dst + i, u.w[i]);
        }
    } else {
        for (int i = 0; i < nbytes; i++) {
            dev_st(dst + i, (char)u.b[i]);
        }
    }
}

/* Rounded-to-nearest arithmetic that nvcc never contracts into an FMA. */
__device__ __forceinline__ float dev_add(float a, float b) { return __fadd_rn(a, b); }
__device__ __forceinline__ double dev_add(double a, double b) { return __dadd_rn(a, b); }
__device__ __forceinline__ float dev_sub(float a, float b) { return __fsub_rn(a, b); }
__device__ __forceinline__ double dev_sub(double a, double b) { return __dsub_rn(a, b); }
__device__ __forceinline__ float dev_mul(float a, float b) { return __fmul_rn(a, b); }
__device__ __forceinline__ double dev_mul(double a, double b) { return __dmul_rn(a, b); }

/* float16 and bfloat16 lanes: the element's bits, a trivially copyable 2-byte type for the vector
 * union of dev_reduce. Reduced through float as src/reduce/half.h does on the host: exact
 * conversion up, one rounded float operation, one round-to-nearest-even conversion down, NaN as
 * the canonical 0x7fff. */
struct dev_f16_t {
    uint16_t bits;
};
struct dev_bf16_t {
    uint16_t bits;
};

#ifdef __CUDACC__
__device__ __forceinline__ float dev_to_float(dev_f16_t h)
{
    return __half2float(__ushort_as_half(h.bits));
}
__device__ __forceinline__ float dev_to_float(dev_bf16_t h)
{
    return __bfloat162float(__ushort_as_bfloat16(h.bits));
}
__device__ __forceinline__ void dev_from_float(float f, dev_f16_t *h)
{
    h->bits = f != f ? (uint16_t)0x7fff : (uint16_t)__half_as_ushort(__float2half_rn(f));
}
__device__ __forceinline__ void dev_from_float(float f, dev_bf16_t *h)
{
    h->bits = f != f ? (uint16_t)0x7fff : (uint16_t)__bfloat16_as_ushort(__float2bfloat16_rn(f));
}
#else
__device__ __forceinline__ float dev_to_float(dev_f16_t h) { return picoll_f16_to_float(h.bits); }
__device__ __forceinline__ float dev_to_float(dev_bf16_t h) { return picoll_bf16_to_float(h.bits); }
__device__ __forceinline__ void dev_from_float(float f, dev_f16_t *h) { h->bits = picoll_float_to_f16(f); }
__device__ __forceinline__ void dev_from_float(float f, dev_bf16_t *h) { h->bits = picoll_float_to_bf16(f); }
#endif

template <typename T> struct dev_is_half : std::false_type {};
template <> struct dev_is_half<dev_f16_t> : std::true_type {};
template <> struct dev_is_half<dev_bf16_t> : std::true_type {};

template <typename T> struct dev_is_complex : std::false_type {};
template <> struct dev_is_complex<float2> : std::true_type {};
template <> struct dev_is_complex<double2> : std::true_type {};

/* x op y with the C semantics of src/reduce/reduce.c: integer sums and products in unsigned
 * arithmetic (wraparound), logical ops give 0 or 1, MAX/MIN as x > y ? x : y, complex products
 * as (ac - bd) + (ad + bc)i, half types compared through float (their sums and products are
 * accumulated in float: dev_reduce). Floating-point results are those of the host loops, bit for
 * bit. */
template <typename T>
__device__ __forceinline__ T dev_apply(int op, T x, T y)
{
    if constexpr (dev_is_complex<T>::value) {
        T z;
        if (op == PICOLL_OP_PROD) {
            z.x = dev_sub(dev_mul(x.x, y.x), dev_mul(x.y, y.y));
            z.y = dev_add(dev_mul(x.x, y.y), dev_mul(x.y, y.x));
        } else {
            z.x = dev_add(x.x, y.x);
            z.y = dev_add(x.y, y.y);
        }
        return z;
    } else if constexpr (dev_is_half<T>::value) {
        float a = dev_to_float(x), b = dev_to_float(y); /* MAX, MIN: sums go through float */
        return op == PICOLL_OP_MAX ? (a > b ? x : y) : (a < b ? x : y);
    } else if constexpr (std::is_floating_point<T>::value) {
        switch (op) {
        case PICOLL_OP_SUM: return dev_add(x, y);
        case PICOLL_OP_PROD: return dev_mul(x, y);
        case PICOLL_OP_MAX: return x > y ? x : y;
        default: return x < y ? x : y;
        }
    } else {
        typedef typename std::conditional<(sizeof(T) < sizeof(unsigned)), unsigned,
                                          typename std::make_unsigned<T>::type>::type W;
        switch (op) {
        case PICOLL_OP_SUM: return (T)((W)x + (W)y);
        case PICOLL_OP_PROD: return (T)((W)x * (W)y);
        case PICOLL_OP_MAX: return x > y ? x : y;
        case PICOLL_OP_MIN: return x < y ? x : y;
        case PICOLL_OP_LAND: return (T)((x != 0) & (y != 0));
        case PICOLL_OP_LOR: return (T)((x != 0) | (y != 0));
        case PICOLL_OP_LXOR: return (T)((x != 0) ^ (y != 0));
        case PICOLL_OP_BAND: return (T)(x & y);
        case PICOLL_OP_BOR: return (T)(x | y);
        default: return (T)(x ^ y);
        }
    }
}

/* The accumulator of a lane: float where WIDE (float16 and bfloat16 sums and products: every
 * rank's value summed in float, rounded to the half format once), the element type otherwise. */
template <typename T, bool WIDE>
using dev_acc_t = typename std::conditional<WIDE, float, T>::type;

template <typename A, typename T>
__device__ __forceinline__ A dev_widen(T x)
{
    if constexpr (std::is_same<A, T>::value) {
        return x;
    } else {
        return dev_to_float(x);
    }
}

/* Peer loads a thread issues before it uses any (dev_reduce): 4 ranks' vectors in one round trip
 * over NVLink instead of 4 dependent ones (8 ranks: 2 round trips, not 7). 8 at once spills
 * registers in this kernel (1640 bytes at sm_90, 64 registers a thread); 4 does not (CTest
 * cuda.kernel.usage). */
#define DEV_BATCH 4
#define DEV_BATCH_WIDE 2 /* float16 and bfloat16 sums and products (a float accumulator): 4 spill */
#define DEV_BATCH_FIXED 8 /* an entry of one type, op and rank count: every rank's load at once */

/* dst[0..nelem) = src_0 op src_1 op ... op src_{n-1}, left to right, where src_r = base[r] + off,
 * WIDE: in a float accumulator (float16 and bfloat16 sums and products: in rank order, rounded to
 * the format once). The sources are workspace buffers: 16-byte
 * aligned (off is a multiple of 16), with at least the rest of the 16-byte line readable, so every
 * load is a 16-byte vector; lanes past nelem are read but never stored. dst may have any
 * alignment. The loads of up to DEV_BATCH sources are issued together, then reduced in rank
 * order. */
template <typename T, bool WIDE, int OP = -1, int NR = 0>
__device__ void dev_reduce(char *dst, char *const *base, int n_run, size_t off, size_t nelem,
                           int op_run)
{
    typedef dev_acc_t<T, WIDE> A;
    constexpr int L = 16 / sizeof(T);
    /* an instance of a fixed op and rank count (a kernel entry of PICOLL_CUDA_FIXED_LIST): the
     * switch on the op folds away, and the loop over the ranks unrolls */
    const int op = OP >= 0 ? OP : op_run;
    const int n = NR > 0 ? NR : n_run;
    /* loads in flight: the float accumulator takes 8 registers more; a fixed instance has the
     * registers of the other types' and ops' code for more (DEV_BATCH_FIXED) */
    constexpr int B = NR > 0 ? (NR < DEV_BATCH_FIXED ? NR : DEV_BATCH_FIXED)
                             : WIDE ? DEV_BATCH_WIDE : DEV_BATCH;
    union lanes {
        uint4 v;
        T e[L];
    };
    struct wide {
        A e[L];
    };
    /* the element type's accumulator packed in a vector (4 registers), float lanes apart */
    typedef typename std::conditional<std::is_same<A, T>::value, lanes, wide>::type acc_t;
    size_t nv = (nelem + L - 1) / L;
    for (size_t i = threadIdx.x; i < nv; i += blockDim.x) {
        acc_t acc;
        uint4 in[B];
        for (int r0 = 0; r0 < n; r0 += B) {
            int m = n - r0 < B ? n - r0 : B;
#pragma unroll
            for (int k = 0; k < B; k++) {
                if (k < m) {
                    in[k] = __ldcg((const uint4 *)(base[r0 + k] + off) + i);
                }
            }
#pragma unroll
            for (int k = 0; k < B; k++) {
                if (k < m) {
                    lanes x;
                    x.v = in[k];
                    if (r0 + k == 0) {
                        if constexpr (WIDE) {
#pragma unroll
                            for (int l = 0; l < L; l++) {
                                acc.e[l] = dev_to_float(x.e[l]);
                            }
                        } else {
                            acc = x;
                        }
                        continue;
                    }
#pragma unroll
                    for (int l = 0; l < L; l++) {
                        acc.e[l] = dev_apply<A>(op, acc.e[l], dev_widen<A>(x.e[l]));
                    }
                }
            }
        }
        lanes out;
        if constexpr (WIDE) {
#pragma unroll
            for (int l = 0; l < L; l++) {
                dev_from_float(acc.e[l], &out.e[l]);
            }
        } else {
            out = acc;
        }
        size_t left = nelem - i * L;
        dev_store_part(dst + i * 16, out.v, left >= (size_t)L ? 16 : (int)(left * sizeof(T)));
    }
}

/* The instance for T and op: half sums and products in float. */
template <typename T>
__device__ __forceinline__ void dev_reduce_type(int op, char *dst, char *const *base, int n,
                                                size_t off, size_t nelem)
{
    if constexpr (dev_is_half<T>::value) {
        if (op == PICOLL_OP_SUM || op == PICOLL_OP_PROD) {
            dev_reduce<T, true>(dst, base, n, off, nelem, op);
            return;
        }
    }
    dev_reduce<T, false>(dst, base, n, off, nelem, op);
}

/* dst = base[0] op ... op base[n-1] at off, n elements of p's type. */
__device__ void dev_reduce_any(const picoll_cuda_kparams_t &p, char *dst, char *const *base, int n,
                               size_t off, size_t nelem)
{
    switch (p.type) {
#define DEV_REDUCE_CASE(e, dtype)                               \
    case e:                                                     \
        dev_reduce_type<dtype>(p.op, dst, base, n, off, nelem); \
        break;
        PICOLL_CUDA_TYPE_LIST(DEV_REDUCE_CASE)
#undef DEV_REDUCE_CASE
    default: break;
    }
}

/* The reductions a kernel entry does: any type and op of the parameters (picoll_coll_kernel), or
 * one type T, op OP and rank count NR fixed at compile time (the entries of
 * PICOLL_CUDA_FIXED_LIST: only the modes that reduce over every rank, FIXED). Both reduce in the
 * same order with the same accumulator, so give the same bits. */
struct dev_red_any {
    static constexpr bool FIXED = false;
    __device__ __forceinline__ void operator()(const picoll_cuda_kparams_t &p, char *dst,
                                               char *const *base, int n, size_t off,
                                               size_t nelem) const
    {
        dev_reduce_any(p, dst, base, n, off, nelem);
    }
};

template <typename T, int OP, int NR>
struct dev_red_fixed {
    static constexpr bool FIXED = true;
    __device__ __forceinline__ void operator()(const picoll_cuda_kparams_t &, char *dst,
                                               char *const *base, int, size_t off,
                                               size_t nelem) const
    {
        constexpr bool wide =
            dev_is_half<T>::value && (OP == PICOLL_OP_SUM || OP == PICOLL_OP_PROD);
        dev_reduce<T, wide, OP, NR>(dst, base, NR, off, nelem, OP);
    }
};

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

/* Every step of every mode, reducing with red; an entry of a fixed reduction (R::FIXED) has the
 * modes that reduce over all nranks only (picoll_cuda_fixed_mode), the others compiled out. */
template <class R>
__device__ __forceinline__ void dev_coll(const picoll_cuda_kparams_t &p, R red)
{
    size_t lo, hi, plo, phi;
    /* the launch's first epoch: the host's count, or on a stream (epoch_word) the last epoch of
     * this rank's previous launch there, + 1 (dev_finish advances it) */
    const uint64_t ep = p.epoch_word != nullptr ? dev_flag_load(p.epoch_word) + 1 : p.epoch;
    char *const *in = p.slot[ep & 1];
    char *const *out = p.slot[(ep + 1) & 1];

    dev_part(0, p.bytes, (int)gridDim.x, (int)blockIdx.x, &lo, &hi);
    if (dev_skip(p)) {
        return;
    }
    dev_start(p, ep);
    /* a resumed block skips what it did before it gave up: its copy in (and, past the second
     * arrival, its reduction), whose results the peers may be reading; dst is written only after
     * the last wait, so nothing it did was lost */
    const int arrived = dev_arrived(p, ep);
    switch (p.mode) {
    case PICOLL_CUDA_K_ONESHOT:
    case PICOLL_CUDA_K_REDUCE:
        if (arrived < 1) {
            dev_copy(in[p.me] + lo, p.src + lo, hi - lo);
        }
        if (dev_arrive_wait(p, ep, ep, arrived < 1)) {
            return;
        }
        if (p.mode == PICOLL_CUDA_K_ONESHOT || p.me == p.root) {
            red(p, p.dst + lo, in, p.nranks, lo, (hi - lo) / (size_t)p.esize);
        }
        dev_finish(p, ep, ep);
        break;
    case PICOLL_CUDA_K_REDSCAT:
        /* piece r of this chunk is [lo, hi) of its bytes [chunk_off, chunk_off + bytes), cut to
         * the piece's length (uneven pieces: some may be shorter, or over); it goes to slot
         * offset r * slot_stride, so my piece starts 16-aligned in every rank's slot */
        if (arrived < 1) {
            dev_pieces_in(p, in[p.me], lo, hi);
        }
        if (dev_arrive_wait(p, ep, ep, arrived < 1)) {
            return;
        }
        plo = dev_piece_end(p, p.me, hi);
        if (plo > lo) {
            red(p, p.dst + lo, in, p.nranks, (size_t)p.me * p.slot_stride + lo,
                           (plo - lo) / (size_t)p.esize);
        }
        dev_finish(p, ep, ep);
        break;
    case PICOLL_CUDA_K_ALLGATHERV:
        if constexpr (!R::FIXED) {
            /* as allgather, each rank's block cut to its length (dev_piece_end) */
            plo = dev_piece_end(p, p.me, hi);
            if (arrived < 1 && plo > lo) {
                dev_copy(in[p.me] + lo, p.src + lo, plo - lo);
            }
            if (dev_arrive_wait(p, ep, ep, arrived < 1)) {
                return;
            }
            for (int r = 0; r < p.nranks; r++) {
                size_t end = dev_piece_end(p, r, hi);
                if (end > lo && (r != p.me || !p.skip_self)) {
                    dev_copy(p.dst + p.piece_off[r] + lo, in[r] + lo, end - lo);
                }
            }
            dev_finish(p, ep, ep);
            break;
        }
        break;
    case PICOLL_CUDA_K_BCAST:
        if constexpr (!R::FIXED) {
            /* every rank arrives (a rank writes its slot again two epochs on only once every peer
             * arrived after reading it); only the root's slot carries data */
            if (arrived < 1 && p.me == p.root) {
                dev_copy(in[p.me] + lo, p.src + lo, hi - lo);
            }
            if (dev_arrive_wait(p, ep, ep, arrived < 1)) {
                return;
            }
            if (p.me != p.root) {
                dev_copy(p.dst + lo, in[p.root] + lo, hi - lo);
            }
            dev_finish(p, ep, ep);
            break;
        }
        break;
    case PICOLL_CUDA_K_TWOSHOT:
        if (arrived < 1) {
            dev_copy(in[p.me] + lo, p.src + lo, hi - lo);
        }
        if (arrived < 2) {
            if (dev_arrive_wait(p, ep, ep, arrived < 1)) {
                return;
            }
            dev_part(lo, hi, p.nranks, p.me, &plo, &phi);
            red(p, out[p.me] + plo, in, p.nranks, plo, (phi - plo) / (size_t)p.esize);
        }
        if (dev_arrive_wait(p, ep, ep + 1, arrived < 2)) {
            return;
        }
        for (int r = 0; r < p.nranks; r++) {
            dev_part(lo, hi, p.nranks, r, &plo, &phi);
            dev_copy(p.dst + plo, out[r] + plo, phi - plo);
        }
        dev_finish(p, ep, ep + 1);
        break;
    case PICOLL_CUDA_K_HCM: {
        if constexpr (!R::FIXED) {
            /* every block reduces its slice of its quad's inputs (read over the quad's NVLinks)
             * into its out buffer, then combines that with the same slice of its relay's out
             * buffer (the other quad's result, read over the relay link): (quad of rank 0) op
             * (other quad) on every rank. Both arrivals wait for the quad and the relay, so that
             * no buffer is written again while one of them may still read it. */
            char *quad_in[4], *pair[2];
            for (int k = 0; k < 4; k++) {
                quad_in[k] = in[p.quad[k]];
            }
            if (arrived < 1) {
                dev_copy(in[p.me] + lo, p.src + lo, hi - lo);
            }
            if (arrived < 2) {
                if (dev_arrive_wait(p, ep, ep, arrived < 1)) {
                    return;
                }
                red(p, out[p.me] + lo, quad_in, 4, lo, (hi - lo) / (size_t)p.esize);
            }
            if (dev_arrive_wait(p, ep, ep + 1, arrived < 2)) {
                return;
            }
            pair[p.quad_first ? 0 : 1] = out[p.me];
            pair[p.quad_first ? 1 : 0] = out[p.relay];
            red(p, p.dst + lo, pair, 2, lo, (hi - lo) / (size_t)p.esize);
            dev_finish(p, ep, ep + 1);
            break;
        }
        break;
    }
    case PICOLL_CUDA_K_ALLGATHER:
        if constexpr (!R::FIXED) {
            if (arrived < 1) {
                dev_copy(in[p.me] + lo, p.src + lo, hi - lo);
            }
            if (dev_arrive_wait(p, ep, ep, arrived < 1)) {
                return;
            }
            for (int r = 0; r < p.nranks; r++) {
                if (r != p.me || !p.skip_self) {
                    dev_copy(p.dst + (size_t)r * p.dst_stride + lo, in[r] + lo, hi - lo);
                }
            }
            dev_finish(p, ep, ep);
            break;
        }
        break;
    case PICOLL_CUDA_K_ALLTOALL:
        if constexpr (!R::FIXED) {
            if (arrived < 1) {
                for (int r = 0; r < p.nranks; r++) {
                    dev_copy(in[p.me] + (size_t)r * p.bytes + lo,
                             p.src + (size_t)r * p.src_stride + lo, hi - lo);
                }
            }
            if (dev_arrive_wait(p, ep, ep, arrived < 1)) {
                return;
            }
            for (int r = 0; r < p.nranks; r++) {
                dev_copy(p.dst + (size_t)r * p.dst_stride + lo, in[r] + (size_t)p.me * p.bytes + lo,
                         hi - lo);
            }
            dev_finish(p, ep, ep);
            break;
        }
        break;
    case PICOLL_CUDA_K_ALLTOALLV:
        if constexpr (!R::FIXED) {
            /* as reduce-scatter's copy in: the piece for rank r at slot offset r * slot_stride, cut
             * to its length; out, the piece from rank r at my offset in its slot, cut to the length
             * I receive from it (MPI: the length it sends me) */
            if (arrived < 1) {
                dev_pieces_in(p, in[p.me], lo, hi);
            }
            if (dev_arrive_wait(p, ep, ep, arrived < 1)) {
                return;
            }
            for (int r = 0; r < p.nranks; r++) {
                size_t end = dev_len_end(p, p.rpiece[r], hi);
                if (end > lo) {
                    dev_copy(p.dst + p.rpiece_off[r] + lo,
                             in[r] + (size_t)p.me * p.slot_stride + lo, end - lo);
                }
            }
            dev_finish(p, ep, ep);
            break;
        }
        break;
    default:
        break;
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

/* The entries of fixed type, op and rank count (PICOLL_CUDA_FIXED_LIST x PICOLL_CUDA_FIXED_RANKS,
 * named by PICOLL_CUDA_FIXED_NAME): the same launch bounds, so that the generic kernel's occupancy
 * holds for them (the workspace checks it). */
#define DEV_FIXED_ENTRY(tag, e, dtype, op, nr)                                              \
    extern "C" __global__ void __launch_bounds__(PICOLL_CUDA_THREADS, 2)                    \
        picoll_coll_##tag##_r##nr(const picoll_cuda_kparams_t p)                            \
    {                                                                                       \
        dev_coll(p, dev_red_fixed<dtype, op, nr>());                                        \
    }
#define DEV_FIXED_RANKS(tag, e, dtype, op) PICOLL_CUDA_FIXED_RANKS(DEV_FIXED_ENTRY, tag, e, dtype, op)
PICOLL_CUDA_FIXED_LIST(DEV_FIXED_RANKS)
#undef DEV_FIXED_RANKS
#undef DEV_FIXED_ENTRY

