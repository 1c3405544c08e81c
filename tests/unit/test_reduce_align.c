/* Unit test: the host reductions (src/reduce/reduce.c) on operands at any byte address. MPI lets
 * an application pass a buffer of int32 or double at an odd address (a field of a packed record,
 * a pointer into a byte array), and picoll's reductions must read and write it as they do an
 * aligned one. This program is built with reduce.c compiled under the compiler's alignment check
 * (-fsanitize=alignment, no recovery; configure's PICOLL_UBSAN_ALIGN_CFLAGS): a load or store of
 * an element through a pointer of the element's alignment at a misaligned address ends it with a
 * runtime error. Each result is compared, bit for bit, with the same reduction of the same values
 * at aligned addresses, for every (type, op) pair MPI allows, two and three sources (the
 * half-precision types' wide path), picoll_reduce and picoll_reduce_acc. */
#include "build-config.h" /* _GNU_SOURCE, as in src/ */
#include "util/dtype.h"
#include "reduce/reduce.h"
#include "check.h"

#include <complex.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define COUNT 301 /* past a vector's width, with a tail */
#define NSRC 3

/* Element e of source s as bytes of type dt: small values every op keeps finite and exact. */
static void fill(picoll_dtype_t dt, unsigned char *p, int s, size_t e)
{
    int v = (int)((e * 7 + (size_t)s * 3) % 5) + 1; /* 1..5 */
    switch (dt) {
    case PICOLL_DT_FLOAT: {
        float f = (float)v;
        memcpy(p, &f, sizeof(f));
        break;
    }
    case PICOLL_DT_DOUBLE: {
        double d = v;
        memcpy(p, &d, sizeof(d));
        break;
    }
    case PICOLL_DT_LONG_DOUBLE: {
        long double d = v;
        memset(p, 0, sizeof(d));
        memcpy(p, &d, sizeof(d));
        break;
    }
    case PICOLL_DT_FLOAT_COMPLEX: {
        float _Complex c = (float)v + (float)(v % 3) * (float _Complex)I;
        memcpy(p, &c, sizeof(c));
        break;
    }
    case PICOLL_DT_DOUBLE_COMPLEX: {
        double _Complex c = v + (v % 3) * (double _Complex)I;
        memcpy(p, &c, sizeof(c));
        break;
    }
    case PICOLL_DT_LONG_DOUBLE_COMPLEX: {
        long double _Complex c = v + (v % 3) * (long double _Complex)I;
        memset(p, 0, sizeof(c));
        memcpy(p, &c, sizeof(c));
        break;
    }
    case PICOLL_DT_FLOAT16: { /* 1.0 .. 5.0 in binary16 */
        static const uint16_t h[] = {0x3c00, 0x4000, 0x4200, 0x4400, 0x4500};
        memcpy(p, &h[v - 1], 2);
        break;
    }
    case PICOLL_DT_BFLOAT16: { /* 1.0 .. 5.0 in bfloat16 */
        static const uint16_t h[] = {0x3f80, 0x4000, 0x4040, 0x4080, 0x40a0};
        memcpy(p, &h[v - 1], 2);
        break;
    }
    case PICOLL_DT_BOOL: *p = (unsigned char)(v & 1); break;
    default: { /* integers and bytes: v in the low byte, the rest zero (little or big endian) */
        size_t n = picoll_dtype_size(dt);
        uint64_t u = (uint64_t)v;
        memset(p, 0, n);
        if (n == 1) {
            *p = (unsigned char)u;
        } else if (n == 2) {
            uint16_t x = (uint16_t)u;
            memcpy(p, &x, 2);
        } else if (n == 4) {
            uint32_t x = (uint32_t)u;
            memcpy(p, &x, 4);
        } else {
            memcpy(p, &u, 8);
        }
        break;
    }
    }
}

int main(void)
{
    int pairs = 0;
    for (int d = 0; d < PICOLL_DT_COUNT; d++) {
        picoll_dtype_t dt = (picoll_dtype_t)d;
        size_t es = picoll_dtype_size(dt), bytes = es * COUNT;
        for (int o = 0; o < PICOLL_OP_COUNT; o++) {
            picoll_op_t op = (picoll_op_t)o;
            if (!picoll_op_valid(dt, op)) {
                continue;
            }
            pairs++;
            /* aligned: malloc's alignment suits every type; the reference */
            unsigned char *src[NSRC], *want = calloc(1, bytes), *want_acc = calloc(1, bytes);
            for (int s = 0; s < NSRC; s++) {
                src[s] = calloc(1, bytes); /* long double's padding zero */
                for (size_t e = 0; e < COUNT; e++) {
                    fill(dt, src[s] + e * es, s, e);
                }
            }
            for (int nsrc = 2; nsrc <= NSRC; nsrc++) {
                picoll_reduce(dt, op, want, (const void *const *)src, nsrc, COUNT);
                memcpy(want_acc, src[0], bytes);
                picoll_reduce_acc(dt, op, want_acc, src[1], COUNT);
                /* each source and the result at its own byte offset, none a multiple of the
                 * element's alignment where it has one */
                for (size_t off = 1; off < 16; off += 2) {
                    unsigned char *block = calloc(NSRC + 1, bytes + 16);
                    const void *mis[NSRC];
                    for (int s = 0; s < NSRC; s++) {
                        unsigned char *m =
                            block + (size_t)s * (bytes + 16) + (off + (size_t)s) % 16;
                        memcpy(m, src[s], bytes);
                        mis[s] = m;
                    }
                    unsigned char *dst = block + NSRC * (bytes + 16) + off;
                    picoll_reduce(dt, op, dst, mis, nsrc, COUNT);
                    CHECK(memcmp(dst, want, bytes) == 0,
                          "picoll_reduce %s %s, %d sources, at byte offset %zu: not the aligned "
                          "result",
                          picoll_dtype_name(dt), picoll_op_name(op), nsrc, off);
                    memcpy(dst, src[0], bytes);
                    picoll_reduce_acc(dt, op, dst, mis[1], COUNT);
                    CHECK(memcmp(dst, want_acc, bytes) == 0,
                          "picoll_reduce_acc %s %s at byte offset %zu: not the aligned result",
                          picoll_dtype_name(dt), picoll_op_name(op), off);
                    free(block);
                }
            }
            for (int s = 0; s < NSRC; s++) {
                free(src[s]);
            }
            free(want);
            free(want_acc);
        }
    }
    CHECK(pairs > 100, "only %d (type, op) pairs", pairs);
#ifndef PICOLL_TEST_ALIGN_CHECKED
    printf("reduce_align: %d pairs compared; SKIP the alignment check: the compiler has no "
           "-fsanitize=alignment (configure)\n",
           pairs);
    return check_failures == 0 ? 77 : 1;
#else
    printf("reduce_align: %d (type, op) pairs at odd byte offsets, under -fsanitize=alignment\n",
           pairs);
    return check_summary("reduce_align");
#endif
}
