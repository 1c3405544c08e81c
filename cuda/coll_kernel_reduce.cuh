/* The device kernel's element arithmetic and reductions, included by cuda/coll_kernel.cu (after
 * its primitives: dev_st, and in the emulated GPU's build the CUDA names of emu_cuda.h, __ldcg and
 * the vector types): x op y for every element type and op with the host reduction's semantics and
 * bits (src/reduce/reduce.c), the block-wide reduction of n ranks' slots (dev_reduce), and the two
 * reductions a kernel entry does, any type and op of the launch or one fixed at compile time. */
#ifndef PICOLL_CUDA_COLL_KERNEL_REDUCE_CUH
#define PICOLL_CUDA_COLL_KERNEL_REDUCE_CUH

#include <stdint.h>
#include <type_traits>

#include "cuda/cuda_kernel.h"
#include "util/dtype.h"

#ifdef __CUDACC__
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#else
/* half precision converts as the host reduction does (src/reduce/half.h), which gives the same
 * bits as CUDA's conversions */
#include "reduce/half.h"
#endif

namespace {

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
__device__ __forceinline__ void dev_from_float(float f, dev_f16_t *h)
{
    h->bits = picoll_float_to_f16(f);
}
__device__ __forceinline__ void dev_from_float(float f, dev_bf16_t *h)
{
    h->bits = picoll_float_to_bf16(f);
}
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

} // namespace

#endif
