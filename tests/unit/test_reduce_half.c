/* Unit test of the host reduction of float16 and bfloat16 (src/reduce/reduce.c through
 * picoll_reduce and picoll_reduce_acc). The references never use picoll's conversions
 * (src/reduce/half.h):
 *   float16   the compiler's _Float16 arithmetic (where the compiler has it: __FLT16_MAX__)
 *   bfloat16  the exact result in double, rounded to bfloat16 by scaling to the format's quantum
 *             and nearbyint (ties to even), then read back through a float
 * and a few results are spelled out by hand: ties to even, subnormals, overflow to inf, inf,
 * signed zeros, NaN, MAX/MIN. Every value is checked against the others: all 65536 bit patterns
 * against a set of edge values, and random pairs. NaN results must be NaN (any payload). */
#include "build-config.h" /* _GNU_SOURCE, as in src/ */
#include "util/dtype.h"
#include "reduce/reduce.h"
#include "check.h"

#include <fenv.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

static const picoll_op_t ops[] = {PICOLL_OP_SUM, PICOLL_OP_PROD, PICOLL_OP_MAX, PICOLL_OP_MIN};
#define NOPS 4

/* ---- references */

typedef int (*ref_fn)(picoll_op_t op, uint16_t a, uint16_t b, uint16_t *out); /* 1: NaN */

/* bfloat16 -> double: the bits are the top half of a float */
static double bf16_value(uint16_t h)
{
    uint32_t u = (uint32_t)h << 16;
    float f;
    memcpy(&f, &u, sizeof(f));
    return f;
}

/* double -> bfloat16, round to nearest even, by value: 8 significant bits, quantum 2^(e-8) for
 * v in [2^(e-1), 2^e), never below 2^-133 (the subnormal quantum); beyond the largest finite
 * bfloat16, inf. */
static uint16_t bf16_round(double v)
{
    if (v == 0 || isinf(v)) {
        float f = (float)v;
        uint32_t u;
        memcpy(&u, &f, sizeof(u));
        return (uint16_t)(u >> 16);
    }
    int e;
    frexp(v, &e);
    int qe = e - 8 < -133 ? -133 : e - 8;
    double r = ldexp(nearbyint(ldexp(v, -qe)), qe);
    const double max = ldexp(255.0, 120); /* (2 - 2^-7) * 2^127 */
    if (fabs(r) > max) {
        r = r > 0 ? INFINITY : -INFINITY;
    }
    if (r == 0) {
        r = copysign(0.0, v);
    }
    float f = (float)r; /* exact: r is a bfloat16 value */
    uint32_t u;
    memcpy(&u, &f, sizeof(u));
    return (uint16_t)(u >> 16);
}

static int ref_bf16(picoll_op_t op, uint16_t a, uint16_t b, uint16_t *out)
{
    double x = bf16_value(a), y = bf16_value(b), r;
    switch (op) {
    case PICOLL_OP_SUM: r = x + y; break;  /* rounded once in double: innocuous before bfloat16 */
    case PICOLL_OP_PROD: r = x * y; break; /* exact in double */
    case PICOLL_OP_MAX: *out = x > y ? a : b; return 0;
    default: *out = x < y ? a : b; return 0;
    }
    if (isnan(r)) {
        return 1;
    }
    *out = bf16_round(r);
    return 0;
}

#ifdef __FLT16_MAX__
static int ref_f16(picoll_op_t op, uint16_t a, uint16_t b, uint16_t *out)
{
    _Float16 x, y, r;
    memcpy(&x, &a, 2);
    memcpy(&y, &b, 2);
    switch (op) {
    case PICOLL_OP_SUM: r = x + y; break;
    case PICOLL_OP_PROD: r = x * y; break;
    case PICOLL_OP_MAX: *out = x > y ? a : b; return 0;
    default: *out = x < y ? a : b; return 0;
    }
    if (r != r) {
        return 1;
    }
    memcpy(out, &r, 2);
    return 0;
}
#endif

static int is_nan16(picoll_dtype_t dt, uint16_t h)
{
    return dt == PICOLL_DT_FLOAT16 ? (h & 0x7c00) == 0x7c00 && (h & 0x3ff) != 0
                                   : (h & 0x7f80) == 0x7f80 && (h & 0x7f) != 0;
}

/* ---- checks */

/* Two arrays of n elements; 0 (and a failed check) when out of memory. */
static int alloc_two(size_t n, uint16_t **a, uint16_t **b)
{
    *a = malloc(n * 2);
    *b = malloc(n * 2);
    CHECK(*a != NULL && *b != NULL, "out of memory");
    if (*a == NULL || *b == NULL) {
        free(*a);
        free(*b);
        return 0;
    }
    return 1;
}

/* picoll_reduce (two sources) and picoll_reduce_acc of a[i] op b[i] against the reference. */
static void check_pairs(picoll_dtype_t dt, ref_fn ref, const uint16_t *a, const uint16_t *b,
                        size_t n, const char *what)
{
    uint16_t *two, *acc;
    if (!alloc_two(n, &two, &acc)) {
        return;
    }
    for (int k = 0; k < NOPS; k++) {
        picoll_op_t op = ops[k];
        const void *srcs[2] = {a, b};
        picoll_reduce(dt, op, two, srcs, 2, n);
        memcpy(acc, a, n * 2);
        picoll_reduce_acc(dt, op, acc, b, n);
        size_t bad = 0, first = 0;
        uint16_t want_first = 0;
        for (size_t i = 0; i < n; i++) {
            uint16_t want = 0;
            int nan = ref(op, a[i], b[i], &want);
            int ok = nan ? is_nan16(dt, two[i]) && is_nan16(dt, acc[i])
                         : two[i] == want && acc[i] == want;
            if (!ok && bad++ == 0) {
                first = i;
                want_first = nan ? 0x7fff : want;
            }
        }
        CHECK(bad == 0,
              "%s %s %s: %zu of %zu wrong, first 0x%04x %s 0x%04x: expected 0x%04x "
              "got 0x%04x (two sources) 0x%04x (accumulate)",
              picoll_dtype_name(dt), picoll_op_name(op), what, bad, n, a[first], picoll_op_name(op),
              b[first], want_first, two[first], acc[first]);
    }
    free(two);
    free(acc);
}

/* Every bit pattern against each edge value, both ways round, and random pairs. */
static void check_all(picoll_dtype_t dt, ref_fn ref, const uint16_t *edges, size_t nedges)
{
    enum { N = 65536 };
    uint16_t *all, *e;
    if (!alloc_two(N, &all, &e)) {
        return;
    }
    for (size_t i = 0; i < N; i++) {
        all[i] = (uint16_t)i;
    }
    for (size_t k = 0; k < nedges; k++) {
        for (size_t i = 0; i < N; i++) {
            e[i] = edges[k];
        }
        check_pairs(dt, ref, all, e, N, "every value op edge");
        check_pairs(dt, ref, e, all, N, "edge op every value");
    }
    srand(12345);
    for (size_t i = 0; i < N; i++) {
        all[i] = (uint16_t)(rand() & 0xffff);
        e[i] = (uint16_t)(rand() & 0xffff);
    }
    check_pairs(dt, ref, all, e, N, "random pairs");
    free(all);
    free(e);
}

/* The half format's value of bits h as a float, and float f rounded to the format: the
 * references' own conversions (bfloat16 by value, float16 through _Float16). */
static float half_value(picoll_dtype_t dt, uint16_t h)
{
#ifdef __FLT16_MAX__
    if (dt == PICOLL_DT_FLOAT16) {
        _Float16 x;
        memcpy(&x, &h, 2);
        return (float)x;
    }
#endif
    (void)dt;
    return (float)bf16_value(h);
}

static uint16_t half_round(picoll_dtype_t dt, float f)
{
#ifdef __FLT16_MAX__
    if (dt == PICOLL_DT_FLOAT16) {
        _Float16 x = (_Float16)f;
        uint16_t h;
        memcpy(&h, &x, 2);
        return h;
    }
#endif
    return bf16_round((double)f);
}

/* picoll_reduce of nsrc > 2 sources: sums and products accumulated in float in source order and
 * rounded once (the device kernel's rule), which differs from rounding at every step (the pairwise
 * picoll_reduce_acc) in some elements of random inputs. */
static void check_wide(picoll_dtype_t dt, int nsrc)
{
    enum { N = 5000, MAXSRC = 8 };
    static uint16_t in[MAXSRC][N], got[N], step[N];
    const void *srcs[MAXSRC];
    srand(777 + nsrc);
    for (int s = 0; s < nsrc; s++) {
        for (size_t i = 0; i < N; i++) {
            /* finite values of moderate size: sign, exponent near the middle, any mantissa */
            uint16_t r = (uint16_t)(rand() & 0xffff);
            in[s][i] = dt == PICOLL_DT_FLOAT16
                           ? (uint16_t)((r & 0x83ff) | (0x3400 + (r >> 4 & 0x0c00)))
                           : (uint16_t)((r & 0x807f) | (0x3e00 + (r >> 4 & 0x0180)));
        }
        srcs[s] = in[s];
    }
    for (int k = 0; k < 2; k++) {
        picoll_op_t op = k == 0 ? PICOLL_OP_SUM : PICOLL_OP_PROD;
        picoll_reduce(dt, op, got, srcs, nsrc, N);
        memcpy(step, in[0], sizeof(step));
        for (int s = 1; s < nsrc; s++) {
            picoll_reduce_acc(dt, op, step, in[s], N);
        }
        size_t bad = 0, differ = 0, first = 0;
        uint16_t want_first = 0;
        for (size_t i = 0; i < N; i++) {
            float acc = half_value(dt, in[0][i]);
            for (int s = 1; s < nsrc; s++) {
                float y = half_value(dt, in[s][i]);
                acc = op == PICOLL_OP_SUM ? acc + y : acc * y;
            }
            uint16_t want = half_round(dt, acc);
            if (got[i] != want && bad++ == 0) {
                first = i;
                want_first = want;
            }
            differ += step[i] != want;
        }
        CHECK(bad == 0,
              "%s %s of %d sources: %zu of %d wrong, first element %zu: expected "
              "0x%04x got 0x%04x",
              picoll_dtype_name(dt), picoll_op_name(op), nsrc, bad, N, first, want_first,
              got[first]);
        CHECK(differ > 0,
              "%s %s of %d sources: rounding once never differs from rounding at "
              "every step (the check proves nothing)",
              picoll_dtype_name(dt), picoll_op_name(op), nsrc);
    }
}

typedef struct {
    picoll_op_t op;
    uint16_t a, b, want;
    const char *why;
} spelled_t;

static void check_spelled(picoll_dtype_t dt, const spelled_t *s, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        uint16_t got;
        const void *srcs[2] = {&s[i].a, &s[i].b};
        picoll_reduce(dt, s[i].op, &got, srcs, 2, 1);
        int ok = s[i].want == 0x7fff ? is_nan16(dt, got) : got == s[i].want;
        CHECK(ok, "%s: 0x%04x %s 0x%04x = 0x%04x, expected 0x%04x (%s)", picoll_dtype_name(dt),
              s[i].a, picoll_op_name(s[i].op), s[i].b, got, s[i].want, s[i].why);
    }
}

int main(void)
{
    static const spelled_t f16[] = {
        {PICOLL_OP_SUM, 0x6800, 0x3c00, 0x6800, "2048 + 1: tie, to even 2048"},
        {PICOLL_OP_SUM, 0x6801, 0x3c00, 0x6802, "2050 + 1: tie, to even 2052"},
        {PICOLL_OP_SUM, 0x7bff, 0x4c00, 0x7c00, "65504 + 16: tie at the top, to inf"},
        {PICOLL_OP_SUM, 0x7bff, 0x4bff, 0x7bff, "65504 + 15.99: stays 65504"},
        {PICOLL_OP_SUM, 0x0001, 0x0001, 0x0002, "subnormals add exactly"},
        {PICOLL_OP_SUM, 0x03ff, 0x0001, 0x0400, "largest subnormal + smallest: smallest normal"},
        {PICOLL_OP_SUM, 0x8000, 0x0000, 0x0000, "-0 + +0 = +0"},
        {PICOLL_OP_SUM, 0x8000, 0x8000, 0x8000, "-0 + -0 = -0"},
        {PICOLL_OP_SUM, 0x7c00, 0xfc00, 0x7fff, "inf - inf: NaN"},
        {PICOLL_OP_SUM, 0x7e00, 0x3c00, 0x7fff, "NaN + 1: NaN"},
        {PICOLL_OP_PROD, 0x0001, 0x3800, 0x0000, "2^-24 * 0.5: tie, to even 0"},
        {PICOLL_OP_PROD, 0x0003, 0x3800, 0x0002, "3 * 2^-24 * 0.5: tie, to even 2 * 2^-24"},
        {PICOLL_OP_PROD, 0x5c00, 0x5c00, 0x7c00, "256 squared: overflow to inf"},
        {PICOLL_OP_PROD, 0x7c00, 0x0000, 0x7fff, "inf * 0: NaN"},
        {PICOLL_OP_PROD, 0x8000, 0x3c00, 0x8000, "-0 * 1 = -0"},
        {PICOLL_OP_MAX, 0x3c00, 0xbc00, 0x3c00, "max(1, -1)"},
        {PICOLL_OP_MIN, 0x3c00, 0xbc00, 0xbc00, "min(1, -1)"},
        {PICOLL_OP_MAX, 0x7c00, 0x7bff, 0x7c00, "max(inf, 65504)"},
        {PICOLL_OP_MIN, 0x0000, 0x8000, 0x8000, "min(+0, -0): not less, the second"},
        {PICOLL_OP_MAX, 0x8000, 0x0000, 0x0000, "max(-0, +0): not greater, the second"},
        {PICOLL_OP_MAX, 0x0001, 0x0000, 0x0001, "max(smallest subnormal, 0)"},
    };
    static const spelled_t bf16[] = {
        {PICOLL_OP_SUM, 0x3f80, 0x3b80, 0x3f80, "1 + 2^-8: tie, to even 1"},
        {PICOLL_OP_SUM, 0x3f81, 0x3b80, 0x3f82, "(1 + 2^-7) + 2^-8: tie, to even 1 + 2^-6"},
        {PICOLL_OP_SUM, 0x7f7f, 0x7b00, 0x7f80, "max + half its ulp: tie, to inf"},
        {PICOLL_OP_SUM, 0x7f7f, 0x7a80, 0x7f7f, "max + a quarter ulp: stays max"},
        {PICOLL_OP_SUM, 0x0001, 0x0001, 0x0002, "subnormals add exactly"},
        {PICOLL_OP_SUM, 0x007f, 0x0001, 0x0080, "largest subnormal + smallest: smallest normal"},
        {PICOLL_OP_SUM, 0x8000, 0x0000, 0x0000, "-0 + +0 = +0"},
        {PICOLL_OP_SUM, 0x8000, 0x8000, 0x8000, "-0 + -0 = -0"},
        {PICOLL_OP_SUM, 0x7f80, 0xff80, 0x7fff, "inf - inf: NaN"},
        {PICOLL_OP_SUM, 0x7fc0, 0x3f80, 0x7fff, "NaN + 1: NaN"},
        {PICOLL_OP_PROD, 0x0001, 0x3f00, 0x0000, "2^-133 * 0.5: tie, to even 0"},
        {PICOLL_OP_PROD, 0x0003, 0x3f00, 0x0002, "3 * 2^-133 * 0.5: tie, to even 2 * 2^-133"},
        {PICOLL_OP_PROD, 0x7f00, 0x4000, 0x7f80, "2^127 * 2: overflow to inf"},
        {PICOLL_OP_PROD, 0xff80, 0x0000, 0x7fff, "-inf * 0: NaN"},
        {PICOLL_OP_MAX, 0x3f80, 0xbf80, 0x3f80, "max(1, -1)"},
        {PICOLL_OP_MIN, 0x3f80, 0xbf80, 0xbf80, "min(1, -1)"},
        {PICOLL_OP_MIN, 0xff80, 0xff7f, 0xff80, "min(-inf, -max)"},
        {PICOLL_OP_MIN, 0x0000, 0x8000, 0x8000, "min(+0, -0): not less, the second"},
    };
    /* zeros, smallest and largest subnormals, smallest normal, 1 and its neighbours, 0.5, 2, a
     * value with a ragged mantissa, the largest finite, inf, NaNs, and negatives */
    static const uint16_t f16_edges[] = {0x0000, 0x8000, 0x0001, 0x03ff, 0x0400, 0x3c00, 0x3c01,
                                         0x3bff, 0x3800, 0x4000, 0x5555, 0x7bff, 0x7c00, 0xfc00,
                                         0x7e00, 0xfd01, 0xbc00, 0x8001, 0xc248, 0x1400};
    static const uint16_t bf16_edges[] = {0x0000, 0x8000, 0x0001, 0x007f, 0x0080, 0x3f80, 0x3f81,
                                          0x3f7f, 0x3f00, 0x4000, 0x5555, 0x7f7f, 0x7f80, 0xff80,
                                          0x7fc0, 0xff81, 0xbf80, 0x8001, 0xc049, 0x3b80};

    CHECK(fegetround() == FE_TONEAREST, "the bfloat16 reference needs round to nearest");
    CHECK(picoll_dtype_size(PICOLL_DT_FLOAT16) == 2 && picoll_dtype_size(PICOLL_DT_BFLOAT16) == 2,
          "half types are not 2 bytes");
    check_spelled(PICOLL_DT_FLOAT16, f16, sizeof(f16) / sizeof(f16[0]));
    check_spelled(PICOLL_DT_BFLOAT16, bf16, sizeof(bf16) / sizeof(bf16[0]));
    /* the reference checked on the hand-made cases too, so that it cannot agree by being broken */
    for (size_t i = 0; i < sizeof(bf16) / sizeof(bf16[0]); i++) {
        uint16_t w = 0;
        int nan = ref_bf16(bf16[i].op, bf16[i].a, bf16[i].b, &w);
        CHECK(nan ? bf16[i].want == 0x7fff : w == bf16[i].want, "bfloat16 reference: %s",
              bf16[i].why);
    }
    check_all(PICOLL_DT_BFLOAT16, ref_bf16, bf16_edges, sizeof(bf16_edges) / sizeof(bf16_edges[0]));
    check_wide(PICOLL_DT_BFLOAT16, 3);
    check_wide(PICOLL_DT_BFLOAT16, 8);
#ifdef __FLT16_MAX__
    for (size_t i = 0; i < sizeof(f16) / sizeof(f16[0]); i++) {
        uint16_t w = 0;
        int nan = ref_f16(f16[i].op, f16[i].a, f16[i].b, &w);
        CHECK(nan ? f16[i].want == 0x7fff : w == f16[i].want, "float16 reference: %s", f16[i].why);
    }
    check_all(PICOLL_DT_FLOAT16, ref_f16, f16_edges, sizeof(f16_edges) / sizeof(f16_edges[0]));
    check_wide(PICOLL_DT_FLOAT16, 3);
    check_wide(PICOLL_DT_FLOAT16, 8);
#else
    printf("test_reduce_half: no _Float16 in this compiler: float16 checked on the spelled-out "
           "cases only\n");
#endif
    return check_summary("test_reduce_half");
}
