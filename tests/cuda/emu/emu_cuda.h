/* CUDA's built-in names for the CPU build of cuda/coll_kernel.cu (emu_kernel.cc includes this
 * header, then the kernel source). Each CUDA thread of a block is a fiber of the worker running the
 * launch (emu_launch.c): the indices are read from per-worker variables the scheduler sets before
 * it switches to a fiber, __syncthreads is a barrier among the block's fibers, and every flag load
 * hands the CPU to the next fiber, so that spin loops make progress. __shared__ variables are
 * thread_local: a worker runs one block at a time. Arithmetic is plain IEEE (the file is compiled
 * with -ffp-contract=off, so nothing is fused, as with nvcc's __fadd_rn and friends). */
#ifndef EMU_CUDA_H
#define EMU_CUDA_H

#include <stddef.h>
#include <stdint.h>

#define __global__
#define __device__
#define __host__
#define __forceinline__ inline
#define __launch_bounds__(threads, blocks)
#define __shared__ static thread_local

struct emu_dim3 {
    unsigned x, y, z;
};

extern "C" {
extern __thread emu_dim3 emu_thread_idx, emu_block_idx, emu_block_dim, emu_grid_dim;
void emu_syncthreads(void);
void emu_yield(void);
uint64_t emu_globaltimer(void);
/* rule "kernel-bounds": [p, p + n) must lie in live device, mapped or host-mapped memory */
void emu_check_load(const void *p, size_t n, const char *what);
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

inline void __syncthreads() { emu_syncthreads(); }
inline void __threadfence_system() { __atomic_thread_fence(__ATOMIC_SEQ_CST); }
inline void __nanosleep(unsigned) { emu_yield(); }

/* a load through L2 only: on the CPU a plain load, after the bound check */
template <typename T>
inline T __ldcg(const T *p)
{
    emu_check_load(p, sizeof(T), "__ldcg");
    return *p;
}

inline float __fadd_rn(float a, float b) { return a + b; }
inline float __fsub_rn(float a, float b) { return a - b; }
inline float __fmul_rn(float a, float b) { return a * b; }
inline double __dadd_rn(double a, double b) { return a + b; }
inline double __dsub_rn(double a, double b) { return a - b; }
inline double __dmul_rn(double a, double b) { return a * b; }

/* the flag protocol's release store and acquire load; a load yields to the next fiber */
inline void emu_flag_store(uint64_t *f, uint64_t v)
{
    emu_check_load(f, sizeof(*f), "flag store");
    __atomic_store_n(f, v, __ATOMIC_RELEASE);
}

inline uint64_t emu_flag_load(const uint64_t *f)
{
    emu_check_load(f, sizeof(*f), "flag load");
    uint64_t v = __atomic_load_n(f, __ATOMIC_ACQUIRE);
    emu_yield();
    return v;
}

#endif
