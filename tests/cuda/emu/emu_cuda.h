/* CUDA's built-in names for the CPU build of cuda/coll_kernel.cu (emu_kernel.cc includes this
 * header, then the kernel source). Each CUDA thread of a block is a fiber of the worker running the
 * launch (emu_launch.c): the indices are read from per-worker variables the scheduler sets before
 * it switches to a fiber, __syncthreads is a barrier among the block's fibers, and every access to
 * global memory may hand the CPU to another fiber (seeded, FAKECUDA_SEED), every flag load does,
 * so that spin loops make progress. The blocks of a launch run together on the worker's thread, so
 * shared memory is the running block's (the kernel declares it with DEV_SHARED, which calls
 * emu_shared_reserve and emu_shared_base; __shared__ itself does not compile). Arithmetic is plain IEEE (the file is compiled with -ffp-contract=off, so nothing is
 * fused, as with nvcc's __fadd_rn and friends).
 *
 * Global memory goes through the emulation's memory model (emu_launch.c says what it is): a store
 * (the kernel's dev_st) is unpublished until a release store or system fence that covers it, a
 * load (__ldcg) of another thread's store must be ordered after its publication by an acquire, and
 * the sync points the kernel marks with an id can be weakened one at a time (FAKECUDA_MUTANT). */
#ifndef EMU_CUDA_H
#define EMU_CUDA_H

#include <stddef.h>
#include <stdint.h>

#define __global__
#define __device__
#define __host__
#define __forceinline__ inline
#define __launch_bounds__(threads, blocks)
#define __shared__ __shared___is_per_block_declare_with_DEV_SHARED

struct emu_dim3 {
    unsigned x, y, z;
};

extern "C" {
extern __thread emu_dim3 emu_thread_idx, emu_block_idx, emu_block_dim, emu_grid_dim;
void emu_syncthreads(void);
void emu_yield(void);
uint64_t emu_globaltimer(void);
/* The memory model. Each checks rule "kernel-bounds" ([p, p + n) in live device, mapped or
 * host-mapped memory) and may switch fibers. emu_load: rule "kernel-race", the bytes are this
 * thread's, or published before the reader's last acquire; emu_store: stores v, unpublished;
 * emu_fence: __threadfence_system; emu_flag_store and emu_flag_load: st.release.sys and
 * ld.acquire.sys, or relaxed (release or acquire 0). */
void emu_load(const void *p, size_t n);
void emu_store(void *p, const void *v, size_t n);
void emu_fence(void);
void emu_flag_store(uint64_t *f, uint64_t v, int release);
uint64_t emu_flag_load(const uint64_t *f, int acquire);
/* a low-latency line (cuda_kernel.h): 16 bytes at p, 16-aligned, stored or loaded as two whole
 * 8-byte halves (whole 0: as four words, flags first on a store, last on a load) */
void emu_line_store(void *p, const void *v, int whole);
void emu_line_load(const void *p, void *out, int whole);
/* Shared memory: n bytes aligned to align at an offset, the same in every block (once per
 * variable and process); the running block's shared memory */
size_t emu_shared_reserve(size_t n, size_t align);
char *emu_shared_base(void);
/* 1 when FAKECUDA_MUTANT names sync point id (at line of func): the caller weakens it */
int emu_mutant(int id, int line, const char *func, const char *what);
}

#define threadIdx emu_thread_idx
#define blockIdx emu_block_idx
#define blockDim emu_block_dim
#define gridDim emu_grid_dim

/* CUDA's vector types, with their alignment */
struct alignas(8) uint2 {
    unsigned int x, y;
};
struct alignas(16) uint4 {
    unsigned int x, y, z, w;
};
struct alignas(8) float2 {
    float x, y;
};
struct alignas(16) double2 {
    double x, y;
};

inline uint4 make_uint4(unsigned x, unsigned y, unsigned z, unsigned w)
{
    return uint4{x, y, z, w};
}

inline void __syncthreads()
{
    emu_syncthreads();
}
inline void __threadfence_system()
{
    emu_fence();
}
inline void __nanosleep(unsigned)
{
    emu_yield();
}
/* shared-memory atomics: a block's fibers switch only at the emulation's own points, so a plain
 * read-modify-write is atomic here */
inline int atomicMax(int *p, int v)
{
    int old = *p;
    if (v > old) {
        *p = v;
    }
    return old;
}

/* a load through L2 only: on the CPU a plain load, once the model allows it */
template <typename T>
inline T __ldcg(const T *p)
{
    emu_load(p, sizeof(T));
    return *p;
}

inline float __fadd_rn(float a, float b)
{
    return a + b;
}
inline float __fsub_rn(float a, float b)
{
    return a - b;
}
inline float __fmul_rn(float a, float b)
{
    return a * b;
}
inline double __dadd_rn(double a, double b)
{
    return a + b;
}
inline double __dsub_rn(double a, double b)
{
    return a - b;
}
inline double __dmul_rn(double a, double b)
{
    return a * b;
}

/* a plain store to global memory (the kernel's dev_st) */
template <typename T>
inline void emu_st(T *p, T v)
{
    emu_store(p, &v, sizeof(T));
}

#endif
