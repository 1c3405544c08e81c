/* Conversions between float and the two half-precision formats picoll reduces, IEEE binary16
 * (float16) and bfloat16, both held as uint16_t bit patterns.
 *
 * A reduction of two half operands is done in float and rounded back once: float has more than
 * 2p + 2 bits of either format's precision and at least its exponent range, so the float sum or
 * product rounded to nearest-even is the correctly rounded half result (no double-rounding error).
 * The device kernel (cuda/coll_kernel.cu) computes the same way and gets the same bits. NaN
 * results become the canonical quiet NaN 0x7fff in both formats, as CUDA's conversions give. */
#ifndef PICOLL_HALF_H
#define PICOLL_HALF_H

#include <stdint.h>
#include <string.h>

#define PICOLL_HALF_NAN 0x7fffu /* canonical NaN, float16 and bfloat16 alike */

static inline uint32_t picoll_half_float_bits(float f)
{
    uint32_t u;
    memcpy(&u, &f, sizeof(u));
    return u;
}

static inline float picoll_half_bits_float(uint32_t u)
{
    float f;
    memcpy(&f, &u, sizeof(f));
    return f;
}

/* Exact: every float16 is a float (its subnormals are normal floats). */
static inline float picoll_f16_to_float(uint16_t h)
{
    uint32_t sign = (uint32_t)(h & 0x8000u) << 16;
    uint32_t exp = (h >> 10) & 0x1fu;
    uint32_t man = h & 0x3ffu;

    if (exp == 0x1fu) { /* inf, NaN (payload kept) */
        return picoll_half_bits_float(sign | 0x7f800000u | (man << 13));
    }
    if (exp != 0) { /* normal: rebias 15 -> 127 */
        return picoll_half_bits_float(sign | ((exp + 112u) << 23) | (man << 13));
    }
    /* zero or subnormal: man * 2^-24, exact in float */
    float mag = (float)man * 0x1p-24f;
    return picoll_half_bits_float(sign | picoll_half_float_bits(mag));
}

/* Round to nearest, ties to even; overflow gives inf. */
static inline uint16_t picoll_float_to_f16(float f)
{
    uint32_t x = picoll_half_float_bits(f);
    uint16_t sign = (uint16_t)((x >> 16) & 0x8000u);
    uint32_t ax = x & 0x7fffffffu;

    if (ax > 0x7f800000u) {
        return PICOLL_HALF_NAN;
    }
    if (ax >= 0x477ff000u) { /* >= 65520, halfway from the largest float16 up: inf */
        return (uint16_t)(sign | 0x7c00u);
    }
    if (ax >= 0x38800000u) { /* >= 2^-14: normal; a carry out of the mantissa bumps the exponent */
        uint32_t m = ax - (112u << 23);
        m += 0xfffu + ((m >> 13) & 1u);
        return (uint16_t)(sign | (m >> 13));
    }
    uint32_t e = ax >> 23;
    if (e < 102u) { /* below 2^-25, half the smallest subnormal: zero */
        return sign;
    }
    /* subnormal: (1.m * 2^(e-127)) / 2^-24 = mant >> (126 - e), shift in 14..24 */
    uint32_t mant = (ax & 0x7fffffu) | 0x800000u;
    uint32_t shift = 126u - e;
    uint32_t q = mant >> shift;
    uint32_t rem = mant & ((1u << shift) - 1u);
    uint32_t halfway = 1u << (shift - 1u);
    if (rem > halfway || (rem == halfway && (q & 1u))) {
        q++; /* may reach 0x400, the smallest normal: the right encoding */
    }
    return (uint16_t)(sign | q);
}

/* Exact: bfloat16 is the upper half of a float. */
static inline float picoll_bf16_to_float(uint16_t h)
{
    return picoll_half_bits_float((uint32_t)h << 16);
}

/* Round to nearest, ties to even; a carry runs into the exponent, up to inf. */
static inline uint16_t picoll_float_to_bf16(float f)
{
    uint32_t x = picoll_half_float_bits(f);
    if ((x & 0x7fffffffu) > 0x7f800000u) {
        return PICOLL_HALF_NAN;
    }
    x += 0x7fffu + ((x >> 16) & 1u);
    return (uint16_t)(x >> 16);
}

#endif
