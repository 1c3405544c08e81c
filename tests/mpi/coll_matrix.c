/* Correctness matrix of the intercepted collectives, checked bit for bit against references
 * computed here by plain loops over every rank's input (each rank regenerates the others' inputs):
 *
 *   MPI_Allreduce  every predefined datatype x every op MPI defines on it (MPI 3.1 5.9.2), plus
 *                  MAXLOC/MINLOC on pair types;
 *   MPI_Allgather, MPI_Alltoall  several element types, and a derived send type;
 *
 * for several counts, in place and not, on MPI_COMM_WORLD, an even/odd split, a dup, a split in
 * reversed rank order and MPI_COMM_SELF. Guard bytes past the end of every receive buffer must be
 * untouched, and send buffers unchanged. Inputs are chosen so that every result is exact in any
 * order of evaluation: small integers for float sums, powers of two for float products, small
 * Gaussian integers for complex products, full-width bits for 8/16-bit integer sums and products
 * (wraparound) and unsigned ones, and no overflow for signed 32/64-bit sums and products.
 * MPI_CHAR, which the standard leaves out of the reductions but Open MPI and MPICH reduce as the
 * platform's char (osu_allreduce's default type): with every op the MPI itself takes (asked on
 * MPI_COMM_SELF at start), compared with the loops and, with picoll preloaded, byte for byte with
 * the MPI's own result (picoll bypassed), and taking the same path as the same call on the
 * explicitly signed or unsigned char type.
 * MPIX_C_FLOAT16, where the MPI defines it and the compiler has _Float16, runs only with picoll
 * preloaded: MPICH 4.0 itself aborts in MPI_Allreduce on it (picoll passes the calls it hands on
 * as MPI_UINT16_T with its own op); its inputs are exact in float16 as those of the other types.
 * Results are compared byte for byte, except long double (by value: the padding bytes of the x87
 * format are not data) and complex (by value: the sign of a zero part of a product depends on
 * the grouping). Every allreduce picoll takes must also give every rank the same bits (long
 * double without its padding), whatever the type: each rank hashes its result and the hashes are
 * compared through PMPI. Where the underlying MPI itself is known to be wrong (MIN/MAX
 * signedness bugs of Open MPI 4.1 and MPICH 4.0), its own result, taken with picoll bypassed, is
 * accepted too.
 *
 * Options: --expect-picoll   picoll's API must be present and each communicator get an enabled
 *                            context
 *          --colls LIST      allreduce,allgather,alltoall (default all)
 *          --counts LIST     element counts (default 0,1,7,33,4099)
 *          --big N           also run a subset of types with count N (default 0: none)
 *          --comms LIST      world,split,dup,rev,self (default all)
 *          --sparse          give each (type, op) one count, placement and communicator in turn
 *                            instead of all of them (for slow oversubscribed launchers)
 *          --path LIST       COLL[.inplace]=NAME,...: every allgather/alltoall call that picoll
 *                            can take (predefined types, or in place) with a block of at least
 *                            --path-min bytes must report NAME from picoll_last_algorithm(), e.g.
 *                            allgather=cma,alltoall=cma,alltoall.inplace=shm (COLL.inplace, when
 *                            given, applies to in-place calls instead of COLL); likewise every
 *                            allreduce of a type and op picoll reduces (all but MAXLOC/MINLOC) on
 *                            a communicator of more than one rank; NAME ending in '*' matches
 *                            every name it begins, e.g. allreduce=hier_*
 *          --path-min BYTES  (default 1)
 *          --bits-each       compare the ranks' bits after every allreduce, not once a
 *                            communicator (finds the call that differs) */
#include "mpitest.h"

#include <complex.h>
#include <float.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define GUARD 64
#define GUARD_BYTE 0xA5

/* ---------------------------------------------------------------- types and ops */

typedef enum { K_INT, K_BOOL, K_FLOAT, K_COMPLEX, K_BYTE, K_PAIR } kind_t;
typedef enum { FK_FLOAT, FK_DOUBLE, FK_LDOUBLE, FK_HALF } fkind_t;

/* MPIX_C_FLOAT16 as the compiler's _Float16 */
#if defined(MPIX_C_FLOAT16) && defined(__FLT16_MAX__)
#define HAVE_FLOAT16 1
#endif
typedef enum {
    OP_SUM,
    OP_PROD,
    OP_MAX,
    OP_MIN,
    OP_LAND,
    OP_LOR,
    OP_LXOR,
    OP_BAND,
    OP_BOR,
    OP_BXOR,
    OP_MAXLOC,
    OP_MINLOC,
    OP_COUNT
} op_t;

static const char *const op_names[OP_COUNT] = {"SUM",  "PROD", "MAX", "MIN",  "LAND",   "LOR",
                                               "LXOR", "BAND", "BOR", "BXOR", "MAXLOC", "MINLOC"};
static MPI_Op op_handle(op_t op)
{
    switch (op) {
    case OP_SUM: return MPI_SUM;
    case OP_PROD: return MPI_PROD;
    case OP_MAX: return MPI_MAX;
    case OP_MIN: return MPI_MIN;
    case OP_LAND: return MPI_LAND;
    case OP_LOR: return MPI_LOR;
    case OP_LXOR: return MPI_LXOR;
    case OP_BAND: return MPI_BAND;
    case OP_BOR: return MPI_BOR;
    case OP_BXOR: return MPI_BXOR;
    case OP_MAXLOC: return MPI_MAXLOC;
    case OP_MINLOC: return MPI_MINLOC;
    default: return MPI_OP_NULL;
    }
}

typedef struct {
    const char *name;
    MPI_Datatype dt;
    kind_t kind;
    size_t size;   /* bytes per element in memory (the extent) */
    int is_signed; /* K_INT */
    int nolog;     /* K_INT: no logical ops (the multi-language types MPI_AINT/OFFSET/COUNT) */
    fkind_t fk;    /* K_FLOAT, K_COMPLEX (per part), K_PAIR (the value) */
    int big;       /* part of the big-count subset */
} type_t;

typedef struct {
    int v;
    int i;
} pair_int_t;
typedef struct {
    double v;
    int i;
} pair_double_t;

#define INT_T(n, h, T, s, nl, big)                                                                 \
    {                                                                                              \
        n, h, K_INT, sizeof(T), s, nl, FK_FLOAT, big                                               \
    }
static type_t types[] = {
    INT_T("MPI_INT8_T", MPI_INT8_T, int8_t, 1, 0, 1),
    INT_T("MPI_UINT8_T", MPI_UINT8_T, uint8_t, 0, 0, 0),
    INT_T("MPI_INT16_T", MPI_INT16_T, int16_t, 1, 0, 0),
    INT_T("MPI_UINT16_T", MPI_UINT16_T, uint16_t, 0, 0, 1),
    INT_T("MPI_INT32_T", MPI_INT32_T, int32_t, 1, 0, 0),
    INT_T("MPI_UINT32_T", MPI_UINT32_T, uint32_t, 0, 0, 0),
    INT_T("MPI_INT64_T", MPI_INT64_T, int64_t, 1, 0, 0),
    INT_T("MPI_UINT64_T", MPI_UINT64_T, uint64_t, 0, 0, 0),
    INT_T("MPI_SIGNED_CHAR", MPI_SIGNED_CHAR, signed char, 1, 0, 0),
    INT_T("MPI_UNSIGNED_CHAR", MPI_UNSIGNED_CHAR, unsigned char, 0, 0, 0),
    INT_T("MPI_CHAR", MPI_CHAR, char, CHAR_MIN < 0, 0, 1),
    INT_T("MPI_SHORT", MPI_SHORT, short, 1, 0, 0),
    INT_T("MPI_UNSIGNED_SHORT", MPI_UNSIGNED_SHORT, unsigned short, 0, 0, 0),
    INT_T("MPI_INT", MPI_INT, int, 1, 0, 1),
    INT_T("MPI_UNSIGNED", MPI_UNSIGNED, unsigned, 0, 0, 0),
    INT_T("MPI_LONG", MPI_LONG, long, 1, 0, 0),
    INT_T("MPI_UNSIGNED_LONG", MPI_UNSIGNED_LONG, unsigned long, 0, 0, 1),
    INT_T("MPI_LONG_LONG", MPI_LONG_LONG, long long, 1, 0, 0),
    INT_T("MPI_UNSIGNED_LONG_LONG", MPI_UNSIGNED_LONG_LONG, unsigned long long, 0, 0, 0),
    INT_T("MPI_AINT", MPI_AINT, MPI_Aint, 1, 1, 0),
    INT_T("MPI_OFFSET", MPI_OFFSET, MPI_Offset, 1, 1, 0),
    INT_T("MPI_COUNT", MPI_COUNT, MPI_Count, 1, 1, 0),
    {"MPI_C_BOOL", MPI_C_BOOL, K_BOOL, sizeof(_Bool), 0, 0, FK_FLOAT, 1},
    {"MPI_FLOAT", MPI_FLOAT, K_FLOAT, sizeof(float), 0, 0, FK_FLOAT, 1},
    {"MPI_DOUBLE", MPI_DOUBLE, K_FLOAT, sizeof(double), 0, 0, FK_DOUBLE, 1},
    {"MPI_LONG_DOUBLE", MPI_LONG_DOUBLE, K_FLOAT, sizeof(long double), 0, 0, FK_LDOUBLE, 0},
#ifdef HAVE_FLOAT16
    {"MPIX_C_FLOAT16", MPIX_C_FLOAT16, K_FLOAT, sizeof(_Float16), 0, 0, FK_HALF, 1},
#endif
    {"MPI_C_COMPLEX", MPI_C_COMPLEX, K_COMPLEX, sizeof(float _Complex), 0, 0, FK_FLOAT, 0},
    {"MPI_C_FLOAT_COMPLEX", MPI_C_FLOAT_COMPLEX, K_COMPLEX, sizeof(float _Complex), 0, 0, FK_FLOAT,
     1},
    {"MPI_C_DOUBLE_COMPLEX", MPI_C_DOUBLE_COMPLEX, K_COMPLEX, sizeof(double _Complex), 0, 0,
     FK_DOUBLE, 0},
    {"MPI_C_LONG_DOUBLE_COMPLEX", MPI_C_LONG_DOUBLE_COMPLEX, K_COMPLEX,
     sizeof(long double _Complex), 0, 0, FK_LDOUBLE, 0},
    {"MPI_BYTE", MPI_BYTE, K_BYTE, 1, 0, 0, FK_FLOAT, 1},
    {"MPI_2INT", MPI_2INT, K_PAIR, sizeof(pair_int_t), 0, 0, FK_FLOAT, 0},
    {"MPI_DOUBLE_INT", MPI_DOUBLE_INT, K_PAIR, sizeof(pair_double_t), 0, 0, FK_DOUBLE, 0},
};
#define NTYPES (sizeof(types) / sizeof(types[0]))

/* The ops the underlying MPI itself reduces MPI_CHAR with (one bit per op_t), asked at start. */
static unsigned char_ops;

static void probe_char_ops(void)
{
    char in = 1, out;
    if (mt_picoll.found) {
        mt_picoll.set_bypass(1);
    }
    for (int op = 0; op <= OP_BXOR; op++) {
        if (MPI_Allreduce(&in, &out, 1, MPI_CHAR, op_handle((op_t)op), MPI_COMM_SELF) ==
            MPI_SUCCESS) {
            char_ops |= 1u << op;
        }
    }
    if (mt_picoll.found) {
        mt_picoll.set_bypass(0);
    }
}

/* The ops MPI defines on a type (MPI 3.1 section 5.9.2, 5.9.4), and on MPI_CHAR those the
 * underlying MPI takes. */
static int op_allowed(const type_t *t, op_t op)
{
    if (t->dt == MPI_CHAR) {
        return op <= OP_BXOR && (char_ops >> op & 1u);
    }
    switch (t->kind) {
    case K_INT:
        return op <= OP_BXOR && !(t->nolog && (op == OP_LAND || op == OP_LOR || op == OP_LXOR));
    case K_BOOL: return op == OP_LAND || op == OP_LOR || op == OP_LXOR;
    case K_FLOAT: return op <= OP_MIN;
    case K_COMPLEX: return op == OP_SUM || op == OP_PROD;
    case K_BYTE: return op == OP_BAND || op == OP_BOR || op == OP_BXOR;
    case K_PAIR: return op == OP_MAXLOC || op == OP_MINLOC;
    }
    return 0;
}

/* ---------------------------------------------------------------- integer elements */

static uint64_t load_int(const void *p, const type_t *t)
{
    switch (t->size) {
    case 1: return t->is_signed ? (uint64_t)(int64_t) * (const int8_t *)p : *(const uint8_t *)p;
    case 2: return t->is_signed ? (uint64_t)(int64_t) * (const int16_t *)p : *(const uint16_t *)p;
    case 4: return t->is_signed ? (uint64_t)(int64_t) * (const int32_t *)p : *(const uint32_t *)p;
    default: return *(const uint64_t *)p;
    }
}

static void store_int(void *p, const type_t *t, uint64_t v)
{
    switch (t->size) {
    case 1: *(uint8_t *)p = (uint8_t)v; break;
    case 2: *(uint16_t *)p = (uint16_t)v; break;
    case 4: *(uint32_t *)p = (uint32_t)v; break;
    default: *(uint64_t *)p = v; break;
    }
}

/* A nonzero value of the type, sometimes with a zero low byte (so that a byte-wise truth test
 * would get it wrong). */
static uint64_t nonzero(const type_t *t, uint64_t r)
{
    unsigned bits = (unsigned)t->size * 8;
    uint64_t mask = bits == 64 ? ~0ull : (1ull << bits) - 1;
    switch ((r >> 4) & 3) {
    case 0: return 1;
    case 1: return 1ull << (bits - 1);
    case 2: return bits > 8 ? ((r >> 16) & mask & ~0xffull) | 0x100 : ((r >> 16) & 0xfe) | 2;
    default: return (r >> 16) | 1;
    }
}

static uint64_t gen_int(const type_t *t, op_t op, uint64_t r, uint64_t r2)
{
    unsigned bits = (unsigned)t->size * 8;
    switch (op) {
    case OP_SUM:
        if (bits <= 16 || !t->is_signed) {
            return r; /* wraps: 8/16-bit through the conversion back, unsigned by definition */
        }
        return (uint64_t)((int64_t)(r % (1u << 21)) - (1 << 20));
    case OP_PROD:
        if (bits == 8) {
            return r;
        }
        if (bits == 16) {
            /* unsigned short promotes to int: keep each product below 2^31 */
            return t->is_signed ? r : r & 0x7fff;
        }
        if (!t->is_signed) {
            return r;
        }
        {
            static const int64_t small[] = {-3, -2, -1, 1, 2, 3};
            return (uint64_t)small[r % 6];
        }
    case OP_MAX:
    case OP_MIN:
    case OP_BXOR: return r;
    case OP_BAND: return r | r2;
    case OP_BOR: return r & r2;
    case OP_LAND: return (r & 7) != 0 ? nonzero(t, r2) : 0;
    case OP_LOR: return (r & 7) == 0 ? nonzero(t, r2) : 0;
    case OP_LXOR: return (r & 1) ? nonzero(t, r2) : 0;
    default: return 0;
    }
}

static uint64_t combine_int(const type_t *t, op_t op, uint64_t a, uint64_t b)
{
    switch (op) {
    case OP_SUM: return a + b;
    case OP_PROD: return a * b;
    case OP_MAX: return t->is_signed ? ((int64_t)a > (int64_t)b ? a : b) : (a > b ? a : b);
    case OP_MIN: return t->is_signed ? ((int64_t)a < (int64_t)b ? a : b) : (a < b ? a : b);
    case OP_LAND: return (a != 0) && (b != 0);
    case OP_LOR: return (a != 0) || (b != 0);
    case OP_LXOR: return (a != 0) != (b != 0);
    case OP_BAND: return a & b;
    case OP_BOR: return a | b;
    case OP_BXOR: return a ^ b;
    default: return 0;
    }
}

/* ---------------------------------------------------------------- floating elements */

static long double gen_real(op_t op, uint64_t r)
{
    switch (op) {
    case OP_SUM: return (long double)((int)(r % 201) - 100);
    case OP_PROD: return ((r >> 8) & 1 ? -1.0L : 1.0L) * ldexpl(1.0L, (int)(r % 7) - 3);
    default: return (long double)((int64_t)(r % 2000001) - 1000000) / 64.0L;
    }
}

static void store_real(void *p, fkind_t fk, long double v)
{
    switch (fk) {
    case FK_FLOAT: *(float *)p = (float)v; break;
    case FK_DOUBLE: *(double *)p = (double)v; break;
    case FK_LDOUBLE: *(long double *)p = v; break;
    case FK_HALF:
#ifdef HAVE_FLOAT16
        *(_Float16 *)p = (_Float16)v;
#endif
        break;
    }
}

static long double load_real(const void *p, fkind_t fk)
{
    switch (fk) {
    case FK_FLOAT: return *(const float *)p;
    case FK_DOUBLE: return *(const double *)p;
#ifdef HAVE_FLOAT16
    case FK_HALF: return *(const _Float16 *)p;
#endif
    default: return *(const long double *)p;
    }
}

static size_t real_size(fkind_t fk)
{
    return fk == FK_FLOAT    ? sizeof(float)
           : fk == FK_DOUBLE ? sizeof(double)
           : fk == FK_HALF   ? 2
                             : sizeof(long double);
}

/* complex inputs as Gaussian integers */
static void gen_gauss(op_t op, uint64_t r, long long *re, long long *im)
{
    if (op == OP_SUM) {
        *re = (long long)(r % 201) - 100;
        *im = (long long)((r >> 16) % 201) - 100;
    } else {
        /* the units times 1+i: products stay small and exact */
        static const int units[4][2] = {{1, 1}, {1, -1}, {-1, 1}, {-1, -1}};
        *re = units[r % 4][0];
        *im = units[r % 4][1];
    }
}

/* ---------------------------------------------------------------- one element */

/* Writes element i of comm rank `rank`'s input for case `seed` into p. */
static void gen_elem(const type_t *t, op_t op, uint64_t seed, int rank, size_t i, void *p)
{
    uint64_t r = mt_hash(seed + (uint64_t)rank * 0x9e3779b97f4a7c15ull + i * 0xd1b54a32d192ed03ull);
    uint64_t r2 = (r ^ (r >> 29)) * 0xbf58476d1ce4e5b9ull;
    switch (t->kind) {
    case K_INT:
    case K_BYTE: store_int(p, t, gen_int(t, op, r, r2)); break;
    case K_BOOL:
        *(_Bool *)p = op == OP_LAND ? (r & 7) != 0 : op == OP_LOR ? (r & 7) == 0 : (r & 1);
        break;
    case K_FLOAT: store_real(p, t->fk, gen_real(op, r)); break;
    case K_COMPLEX: {
        long long re, im;
        gen_gauss(op, r, &re, &im);
        store_real(p, t->fk, (long double)re);
        store_real((char *)p + real_size(t->fk), t->fk, (long double)im);
        break;
    }
    case K_PAIR:
        if (t->fk == FK_DOUBLE) {
            pair_double_t *e = p;
            e->v = (double)(int)(r % 5) - 2.0;
            e->i = (int)(r2 % 50);
        } else {
            pair_int_t *e = p;
            e->v = (int)(r % 5) - 2;
            e->i = (int)(r2 % 50);
        }
        break;
    }
}

typedef union {
    uint64_t u;
    long double f;
    struct {
        long long re, im;
    } c;
    struct {
        long double v;
        int i;
    } pair;
} acc_t;

static void acc_add(const type_t *t, op_t op, acc_t *acc, const void *elem, int first)
{
    switch (t->kind) {
    case K_INT:
    case K_BYTE: {
        uint64_t v = load_int(elem, t);
        if (first) {
            acc->u = v; /* one rank's value is the result as it is, even for logical ops */
        } else {
            acc->u = combine_int(t, op, acc->u, v);
        }
        break;
    }
    case K_BOOL: {
        uint64_t v = *(const _Bool *)elem;
        acc->u = first ? v : combine_int(t, op, acc->u, v);
        break;
    }
    case K_FLOAT: {
        long double v = load_real(elem, t->fk);
        if (first) {
            acc->f = v;
        } else if (op == OP_SUM) {
            acc->f += v;
        } else if (op == OP_PROD) {
            acc->f *= v;
        } else if (op == OP_MAX) {
            acc->f = v > acc->f ? v : acc->f;
        } else {
            acc->f = v < acc->f ? v : acc->f;
        }
        break;
    }
    case K_COMPLEX: {
        long long re = (long long)load_real(elem, t->fk);
        long long im = (long long)load_real((const char *)elem + real_size(t->fk), t->fk);
        if (first) {
            acc->c.re = re;
            acc->c.im = im;
        } else if (op == OP_SUM) {
            acc->c.re += re;
            acc->c.im += im;
        } else {
            long long nre = acc->c.re * re - acc->c.im * im;
            long long nim = acc->c.re * im + acc->c.im * re;
            acc->c.re = nre;
            acc->c.im = nim;
        }
        break;
    }
    case K_PAIR: {
        long double v;
        int i;
        if (t->fk == FK_DOUBLE) {
            v = ((const pair_double_t *)elem)->v;
            i = ((const pair_double_t *)elem)->i;
        } else {
            v = ((const pair_int_t *)elem)->v;
            i = ((const pair_int_t *)elem)->i;
        }
        if (first || (op == OP_MAXLOC ? v > acc->pair.v : v < acc->pair.v) ||
            (v == acc->pair.v && i < acc->pair.i)) {
            acc->pair.v = v;
            acc->pair.i = i;
        }
        break;
    }
    }
}

/* Whether the element MPI produced equals the reference; where it does not, fills what it
 * expected into `want` (formatted only then: formatting every element cost most of the time of
 * the large-count cases) */
static int acc_matches(const type_t *t, const acc_t *acc, const void *got, char *want, size_t len)
{
    int ok;
    switch (t->kind) {
    case K_INT:
    case K_BYTE: {
        unsigned char buf[8];
        store_int(buf, t, acc->u);
        ok = memcmp(buf, got, t->size) == 0;
        if (!ok) {
            snprintf(want, len, "0x%llx got 0x%llx", (unsigned long long)load_int(buf, t),
                     (unsigned long long)load_int(got, t));
        }
        return ok;
    }
    case K_BOOL: {
        unsigned char g;
        memcpy(&g, got, 1);
        ok = g == (unsigned char)acc->u;
        if (!ok) {
            snprintf(want, len, "%d got byte %d", (int)acc->u, g);
        }
        return ok;
    }
    case K_FLOAT: {
        long double g = load_real(got, t->fk);
        if (t->fk == FK_LDOUBLE) {
            ok = g == acc->f && !signbit(g) == !signbit(acc->f); /* padding bytes excluded */
        } else {
            unsigned char buf[8];
            store_real(buf, t->fk, acc->f);
            ok = memcmp(buf, got, t->size) == 0;
        }
        if (!ok) {
            snprintf(want, len, "%Lg got %Lg", acc->f, g);
        }
        return ok;
    }
    case K_COMPLEX: {
        long double gre = load_real(got, t->fk),
                    gim = load_real((const char *)got + real_size(t->fk), t->fk);
        /* by value: the parts are exact integers, but the sign of a zero part of a product
         * depends on how the partial products were grouped ((0-2i)(0-2i) has imaginary part
         * (+0)(-2) + (-2)(+0) = -0, while multiplying the four factors one by one gives +0) */
        ok = gre == (long double)acc->c.re && gim == (long double)acc->c.im;
        if (!ok) {
            snprintf(want, len, "(%lld,%lld) got (%Lg,%Lg)", acc->c.re, acc->c.im, gre, gim);
        }
        return ok;
    }
    case K_PAIR: {
        long double gv;
        int gi;
        if (t->fk == FK_DOUBLE) {
            gv = ((const pair_double_t *)got)->v;
            gi = ((const pair_double_t *)got)->i;
        } else {
            gv = ((const pair_int_t *)got)->v;
            gi = ((const pair_int_t *)got)->i;
        }
        ok = gv == acc->pair.v && gi == acc->pair.i;
        if (!ok) {
            snprintf(want, len, "(%Lg,%d) got (%Lg,%d)", acc->pair.v, acc->pair.i, gv, gi);
        }
        return ok;
    }
    }
    return 0;
}

/* ---------------------------------------------------------------- known MPI bugs */

/* (type, op) pairs that this MPI library itself gets wrong, found with this very test run
 * without picoll. For these the result may equal, bit for bit, what the underlying MPI gives with
 * picoll bypassed (picoll passed the call through), instead of the reference. */
static int mpi_flavour; /* 1 Open MPI 4.x, 2 MPICH 4.0.x, 0 other */
static long known_bug_hits;

static void detect_mpi(void)
{
    char v[MPI_MAX_LIBRARY_VERSION_STRING];
    int len = 0;
    MPI_Get_library_version(v, &len);
    if (strstr(v, "Open MPI v4.") != NULL) {
        mpi_flavour = 1;
    } else if (strstr(v, "MPICH Version:") != NULL && strstr(v, "4.0.") != NULL) {
        mpi_flavour = 2;
    }
}

static int known_mpi_bug(const type_t *t, op_t op)
{
    if (op != OP_MAX && op != OP_MIN) {
        return 0;
    }
    /* open-mpi/ompi#10525: MIN/MAX on MPI_UNSIGNED_LONG compare as signed (and likewise
     * MPI_OFFSET as unsigned) in Open MPI 4.1.x up to at least 4.1.4 */
    if (mpi_flavour == 1) {
        return t->dt == MPI_UNSIGNED_LONG || t->dt == MPI_OFFSET;
    }
    /* pmodels/mpich#6083: MIN/MAX on unsigned integer types compare as signed in MPICH 4.0.2 */
    if (mpi_flavour == 2) {
        return t->kind == K_INT && !t->is_signed;
    }
    return 0;
}

/* ---------------------------------------------------------------- communicators */

typedef struct {
    const char *name;
    MPI_Comm comm;
    int rank, size;
    int used;      /* a collective with data was run on it */
    uint64_t bits; /* the hashes of its allreduce results so far (check_same_bits) */
    long nbits;
} comm_t;

static comm_t comms[5];
static int ncomms;
static unsigned long long ncalls;

static void add_comm(const char *name, MPI_Comm comm)
{
    comm_t *c = &comms[ncomms++];
    c->name = name;
    c->comm = comm;
    MPI_Comm_rank(comm, &c->rank);
    MPI_Comm_size(comm, &c->size);
    MPI_Comm_set_errhandler(comm, MPI_ERRORS_RETURN);
}

static int in_list(const char *list, const char *word)
{
    size_t n = strlen(word);
    for (const char *p = list; (p = strstr(p, word)) != NULL; p += n) {
        if ((p == list || p[-1] == ',') && (p[n] == '\0' || p[n] == ',')) {
            return 1;
        }
    }
    return 0;
}

static void setup_comms(const char *list)
{
    MPI_Comm c;
    if (in_list(list, "world")) {
        add_comm("world", MPI_COMM_WORLD);
    }
    if (in_list(list, "split")) {
        MPI_Comm_split(MPI_COMM_WORLD, mt_rank % 2, mt_rank, &c);
        add_comm(mt_rank % 2 ? "split(odd)" : "split(even)", c);
    }
    if (in_list(list, "dup")) {
        MPI_Comm_dup(MPI_COMM_WORLD, &c);
        add_comm("dup", c);
    }
    if (in_list(list, "rev")) {
        MPI_Comm_split(MPI_COMM_WORLD, 0, mt_size - mt_rank, &c);
        add_comm("reversed", c);
    }
    if (in_list(list, "self")) {
        add_comm("self", MPI_COMM_SELF);
    }
}

/* ---------------------------------------------------------------- buffers */

static unsigned char *sendbuf, *recvbuf, *expect, *elem;
static size_t bufsize;

static void alloc_buffers(size_t bytes)
{
    bufsize = bytes + GUARD;
    sendbuf = malloc(bufsize);
    recvbuf = malloc(bufsize);
    expect = malloc(bufsize);
    elem = malloc(64);
    if (!sendbuf || !recvbuf || !expect || !elem) {
        mt_fail("out of memory for %zu-byte buffers", bufsize);
        exit(1);
    }
}

static int guard_ok(const unsigned char *p, size_t from)
{
    for (size_t i = from; i < from + GUARD; i++) {
        if (p[i] != GUARD_BYTE) {
            return 0;
        }
    }
    return 1;
}

static uint64_t case_seed(const char *what, size_t a, size_t b, size_t count, const comm_t *c)
{
    uint64_t h = 1469598103934665603ull;
    for (const char *p = what; *p; p++) {
        h = (h ^ (unsigned char)*p) * 1099511628211ull;
    }
    for (const char *p = c->name; *p; p++) {
        h = (h ^ (unsigned char)*p) * 1099511628211ull;
    }
    return mt_hash(h ^ mt_hash(a * 1000003u + b * 7919u + count));
}

/* ---------------------------------------------------------------- allreduce */

/* Bytes of one real part that are data: an x87 long double's padding is not. */
static size_t real_data_bytes(fkind_t fk)
{
#if LDBL_MANT_DIG == 64
    if (fk == FK_LDOUBLE) {
        return 10;
    }
#endif
    return real_size(fk);
}

/* A hash of the data bits of count result elements. */
static uint64_t result_hash(const type_t *t, const unsigned char *buf, size_t count)
{
    uint64_t h = 1469598103934665603ull;
    size_t parts = t->kind == K_COMPLEX ? 2 : 1;
    for (size_t i = 0; i < count; i++) {
        const unsigned char *e = buf + i * t->size;
        for (size_t p = 0; p < parts; p++) {
            size_t len = t->size, off = 0;
            if (t->kind == K_FLOAT || t->kind == K_COMPLEX) {
                off = p * real_size(t->fk);
                len = real_data_bytes(t->fk);
            } else if (t->kind == K_PAIR) {
                len = t->fk == FK_DOUBLE ? sizeof(double) : sizeof(int); /* the value */
            }
            for (size_t b = 0; b < len; b++) {
                h = (h ^ e[off + b]) * 1099511628211ull;
            }
        }
        if (t->kind == K_PAIR) { /* and the index */
            int idx =
                t->fk == FK_DOUBLE ? ((const pair_double_t *)e)->i : ((const pair_int_t *)e)->i;
            h = mt_hash(h ^ (uint64_t)(unsigned)idx);
        }
    }
    return h;
}

/* The allreduce just made gave every rank of c the same bits, where picoll ran it (its own
 * algorithms; a call picoll hands to the MPI counts as 0 on every rank, so a rank that took
 * another path than the others shows too). The hashes of a communicator's calls are folded
 * together and compared once, after the allreduces (same_bits_flush: one PMPI_Allreduce a
 * communicator, where one a call doubled host.matrix.np3's time under MPICH's busy polling);
 * with --bits-each every call is compared at once, to find the one that differs. Every rank of a
 * job runs the same cases; nothing without picoll. */
static int bits_each;

static int same_bits_agree(uint64_t h, comm_t *c)
{
    uint64_t in[2] = {h, ~h}, out[2];
    if (PMPI_Allreduce(in, out, 2, MPI_UINT64_T, MPI_MAX, c->comm) != MPI_SUCCESS) {
        mt_fail("PMPI_Allreduce of the result hashes failed");
        return 1;
    }
    return out[0] == ~out[1];
}

static void check_same_bits(const type_t *t, op_t op, size_t count, int inplace, comm_t *c)
{
    if (!mt_picoll.found || mt_picoll.last_algorithm == NULL || c->size < 2) {
        return;
    }
    const char *path = mt_picoll.last_algorithm();
    int picolls = path != NULL && strcmp(path, "fallback") != 0;
    uint64_t h = picolls ? result_hash(t, recvbuf, count) : 0;
    if (!bits_each) {
        c->bits = mt_hash(c->bits ^ h);
        c->nbits++;
        return;
    }
    MT_CHECK(same_bits_agree(h, c),
             "MPI_Allreduce %s %s count %zu%s on %s (size %d, path %s): the ranks' results "
             "differ in their bits",
             t->name, op_names[op], count, inplace ? " in place" : "", c->name, c->size,
             path ? path : "(none)");
}

static void same_bits_flush(void)
{
    for (int ci = 0; ci < ncomms; ci++) {
        comm_t *c = &comms[ci];
        if (c->nbits > 0) {
            MT_CHECK(same_bits_agree(c->bits, c),
                     "MPI_Allreduce on %s (size %d): the ranks' results of its %ld allreduces "
                     "differ in their bits (--bits-each names the call)",
                     c->name, c->size, c->nbits);
        }
        c->bits = 0;
        c->nbits = 0;
    }
}

/* The MPI_CHAR call just made took the path that the same call on the char type of the same
 * signedness takes (picoll reduces MPI_CHAR as that type; "fallback" for both where it does not). */
static void char_same_path(const type_t *t, op_t op, size_t count, comm_t *c)
{
    const char *got, *want;
    if (mt_picoll.last_algorithm == NULL) {
        return;
    }
    got = mt_picoll.last_algorithm();
    MPI_Allreduce(sendbuf, expect, (int)count, CHAR_MIN < 0 ? MPI_SIGNED_CHAR : MPI_UNSIGNED_CHAR,
                  op_handle(op), c->comm);
    want = mt_picoll.last_algorithm();
    MT_CHECK(got != NULL && want != NULL && strcmp(got, want) == 0,
             "MPI_Allreduce %s %s count %zu on %s: path %s, but %s on the same call as %s", t->name,
             op_names[op], count, c->name, got ? got : "(none)", want ? want : "(none)",
             CHAR_MIN < 0 ? "MPI_SIGNED_CHAR" : "MPI_UNSIGNED_CHAR");
}

static void check_path_allreduce(const type_t *t, op_t op, size_t count, int inplace, comm_t *c);

static void run_allreduce(const type_t *t, op_t op, size_t count, int inplace, comm_t *c)
{
    uint64_t seed = case_seed("allreduce", (size_t)(t - types), op, count, c);
    size_t bytes = count * t->size;
    int rc;
    char want[160];

    /* this rank's input */
    memset(sendbuf, 0, bytes);
    for (size_t i = 0; i < count; i++) {
        gen_elem(t, op, seed, c->rank, i, sendbuf + i * t->size);
    }
    memset(recvbuf, GUARD_BYTE, bytes + GUARD);
    if (inplace) {
        memcpy(recvbuf, sendbuf, bytes);
    } else {
        memset(sendbuf + bytes, GUARD_BYTE, GUARD);
    }
    rc = MPI_Allreduce(inplace ? MPI_IN_PLACE : sendbuf, recvbuf, (int)count, t->dt, op_handle(op),
                       c->comm);
    ncalls++;
    if (count > 0) {
        c->used = 1;
    }
    check_same_bits(t, op, count, inplace, c);
    if (rc != MPI_SUCCESS) {
        char err[MPI_MAX_ERROR_STRING];
        int len = 0;
        MPI_Error_string(rc, err, &len);
        mt_fail("MPI_Allreduce %s %s count %zu %s on %s: error %d (%s)", t->name, op_names[op],
                count, inplace ? "in place" : "", c->name, rc, err);
        return;
    }
    check_path_allreduce(t, op, count, inplace, c);
    /* for a known bug of the underlying MPI, what it gives on its own, picoll bypassed (every
     * rank takes this branch alike: the condition depends only on the case) */
    int known = known_mpi_bug(t, op);
    int vs_mpi = t->dt == MPI_CHAR && mt_picoll.found && count > 0;
    if (vs_mpi) {
        char_same_path(t, op, count, c);
    }
    if ((known || vs_mpi) && mt_picoll.found && count > 0) {
        unsigned char *in = malloc(bytes);
        if (in == NULL) {
            mt_fail("out of memory");
            return;
        }
        for (size_t i = 0; i < count; i++) {
            gen_elem(t, op, seed, c->rank, i, in + i * t->size);
        }
        mt_picoll.set_bypass(1);
        rc = MPI_Allreduce(in, expect, (int)count, t->dt, op_handle(op), c->comm);
        mt_picoll.set_bypass(0);
        free(in);
        MT_CHECK(rc == MPI_SUCCESS, "bypassed MPI_Allreduce %s %s failed: %d", t->name,
                 op_names[op], rc);
    }
    /* reference: every rank's input regenerated and reduced in rank order */
    size_t bad = 0, first_bad = 0, mpi_bad = 0;
    char first_want[160] = "";
    for (size_t i = 0; i < count; i++) {
        acc_t acc;
        memset(&acc, 0, sizeof(acc));
        for (int r = 0; r < c->size; r++) {
            memset(elem, 0, 64);
            gen_elem(t, op, seed, r, i, elem);
            acc_add(t, op, &acc, elem, r == 0);
        }
        if (vs_mpi && !acc_matches(t, &acc, expect + i * t->size, want, sizeof(want))) {
            mpi_bad++;
        }
        if (!acc_matches(t, &acc, recvbuf + i * t->size, want, sizeof(want))) {
            if (bad++ == 0) {
                first_bad = i;
                snprintf(first_want, sizeof(first_want), "%s", want);
            }
        }
    }
    /* the MPI's own bytes, where they are right: Open MPI's AVX reduction sums 8-bit types wrong
     * from 32 elements (open-mpi/ompi#8045), and there the loops' answer stands */
    if (vs_mpi && mpi_bad == 0 && memcmp(recvbuf, expect, bytes) != 0) {
        mt_fail("MPI_Allreduce %s %s count %zu%s on %s: not the bytes the MPI itself gives",
                t->name, op_names[op], count, inplace ? " in place" : "", c->name);
    }
    if (bad && known && (!mt_picoll.found || memcmp(recvbuf, expect, bytes) == 0)) {
        known_bug_hits++; /* the underlying MPI's own result, passed through unchanged */
        bad = 0;
    }
    if (bad) {
        mt_fail("MPI_Allreduce %s %s count %zu%s on %s (size %d): %zu wrong elements, first [%zu] "
                "expected %s",
                t->name, op_names[op], count, inplace ? " in place" : "", c->name, c->size, bad,
                first_bad, first_want);
    }
    if (!guard_ok(recvbuf, bytes)) {
        mt_fail("MPI_Allreduce %s %s count %zu%s on %s: wrote past the end of recvbuf", t->name,
                op_names[op], count, inplace ? " in place" : "", c->name);
    }
    if (!inplace) {
        int changed = !guard_ok(sendbuf, bytes);
        for (size_t i = 0; i < count && !changed; i++) {
            memset(elem, 0, 64);
            gen_elem(t, op, seed, c->rank, i, elem);
            changed = memcmp(elem, sendbuf + i * t->size, t->size) != 0;
        }
        MT_CHECK(!changed, "MPI_Allreduce %s %s count %zu on %s: sendbuf modified", t->name,
                 op_names[op], count, c->name);
    }
}

/* ---------------------------------------------------------------- allgather, alltoall */

typedef struct {
    const char *name;
    MPI_Datatype send, recv; /* recv may differ from send (derived on the sending side) */
    size_t size;             /* bytes of one recv element */
    int ratio;               /* recv elements per send element */
    int f64;                 /* fill with finite doubles rather than bytes */
} btype_t;

static MPI_Datatype contig3;
static btype_t btypes[9];
static int nbtypes;

static void setup_btypes(void)
{
    MPI_Type_contiguous(3, MPI_INT, &contig3);
    MPI_Type_commit(&contig3);
    btype_t list[] = {
        {"MPI_BYTE", MPI_BYTE, MPI_BYTE, 1, 1, 0},
        {"MPI_CHAR", MPI_CHAR, MPI_CHAR, 1, 1, 0},
        {"MPI_SHORT", MPI_SHORT, MPI_SHORT, sizeof(short), 1, 0},
        {"MPI_INT", MPI_INT, MPI_INT, sizeof(int), 1, 0},
        {"MPI_INT64_T", MPI_INT64_T, MPI_INT64_T, 8, 1, 0},
        {"MPI_DOUBLE", MPI_DOUBLE, MPI_DOUBLE, sizeof(double), 1, 1},
        {"MPI_C_DOUBLE_COMPLEX", MPI_C_DOUBLE_COMPLEX, MPI_C_DOUBLE_COMPLEX, 16, 1, 1},
        {"contiguous(3,MPI_INT)->MPI_INT", contig3, MPI_INT, sizeof(int), 3, 0},
#ifdef MPIX_C_FLOAT16 /* copied as bytes: MPICH moves it correctly on its own */
        {"MPIX_C_FLOAT16", MPIX_C_FLOAT16, MPIX_C_FLOAT16, 2, 1, 0},
#endif
    };
    memcpy(btypes, list, sizeof(list));
    nbtypes = (int)(sizeof(list) / sizeof(list[0]));
}

/* `bytes` bytes of data from rank src to rank dst (dst unused for allgather) */
static void gen_block(const btype_t *b, uint64_t seed, int src, int dst, size_t bytes,
                      unsigned char *p)
{
    uint64_t s = mt_rand(seed, (uint64_t)src, (uint64_t)dst);
    if (b->f64) {
        for (size_t i = 0; i < bytes / 8; i++) {
            double v = (double)(int32_t)mt_hash(s + i) / 8.0;
            memcpy(p + 8 * i, &v, 8);
        }
        return;
    }
    size_t i = 0;
    for (; i + 8 <= bytes; i += 8) {
        uint64_t v = mt_hash(s + i);
        memcpy(p + i, &v, 8);
    }
    if (i < bytes) {
        uint64_t v = mt_hash(s + i);
        memcpy(p + i, &v, bytes - i);
    }
}

static void check_blocks(const char *coll, const btype_t *b, size_t count, int inplace, comm_t *c,
                         int rc, size_t total)
{
    if (rc != MPI_SUCCESS) {
        char err[MPI_MAX_ERROR_STRING];
        int len = 0;
        MPI_Error_string(rc, err, &len);
        mt_fail("%s %s count %zu%s on %s: error %d (%s)", coll, b->name, count,
                inplace ? " in place" : "", c->name, rc, err);
        return;
    }
    if (memcmp(recvbuf, expect, total) != 0) {
        size_t i = 0;
        while (i < total && recvbuf[i] == expect[i]) {
            i++;
        }
        mt_fail("%s %s count %zu%s on %s (size %d): wrong data, first at byte %zu of %zu "
                "(block %zu): expected 0x%02x got 0x%02x",
                coll, b->name, count, inplace ? " in place" : "", c->name, c->size, i, total,
                i / (total / (size_t)c->size), expect[i], recvbuf[i]);
    }
    MT_CHECK(guard_ok(recvbuf, total), "%s %s count %zu%s on %s: wrote past the end of recvbuf",
             coll, b->name, count, inplace ? " in place" : "", c->name);
}

/* --path, --path-min */
static const char *path_list;
static size_t path_min = 1;

/* The NAME that --path gives for key ("alltoall.inplace"), copied to out; 0 when none. */
static int path_lookup(const char *key, char *out, size_t len)
{
    size_t klen = strlen(key);
    for (const char *p = path_list; p != NULL && *p != '\0';) {
        const char *end = strchr(p, ',');
        size_t n = end ? (size_t)(end - p) : strlen(p);
        if (n > klen && strncmp(p, key, klen) == 0 && p[klen] == '=') {
            snprintf(out, len, "%.*s", (int)(n - klen - 1), p + klen + 1);
            return 1;
        }
        p = end ? end + 1 : NULL;
    }
    return 0;
}

/* got is the path NAME asks for: the same name, or one that begins as NAME before its '*' */
static int path_matches(const char *got, const char *want)
{
    size_t n = strlen(want);
    if (got == NULL) {
        return 0;
    }
    if (n > 0 && want[n - 1] == '*') {
        return strncmp(got, want, n - 1) == 0;
    }
    return strcmp(got, want) == 0;
}

/* The NAME that --path gives for coll, in place or not; 0 when none. */
static int path_wanted(const char *coll, int inplace, char *want, size_t len)
{
    char key[32];
    snprintf(key, sizeof(key), "%s.inplace", coll);
    return (inplace && path_lookup(key, want, len)) || path_lookup(coll, want, len);
}

/* The call just made took the path --path asks for. Types that picoll copies as bytes are the
 * predefined ones on both sides; in place only the receive type counts. */
static void check_path(const char *coll, const char *call, const btype_t *b, size_t count,
                       int inplace, comm_t *c)
{
    char want[32];
    const char *got;
    size_t block = count * b->size;

    if (path_list == NULL || mt_picoll.last_algorithm == NULL || count == 0 || block < path_min ||
        (!inplace && b->send != b->recv) || !path_wanted(coll, inplace, want, sizeof(want))) {
        return;
    }
    got = mt_picoll.last_algorithm();
    MT_CHECK(path_matches(got, want),
             "%s %s count %zu (%zu-byte blocks)%s on %s: path %s, expected %s", call, b->name,
             count, block, inplace ? " in place" : "", c->name, got ? got : "(none)", want);
}

/* The same for the allreduce just made: every predefined type and op but the pair ones, which
 * picoll hands to the MPI, on a communicator of more than one rank. */
static void check_path_allreduce(const type_t *t, op_t op, size_t count, int inplace, comm_t *c)
{
    char want[32];
    const char *got;
    size_t bytes = count * t->size;

    if (path_list == NULL || mt_picoll.last_algorithm == NULL || count == 0 || bytes < path_min ||
        c->size < 2 || t->kind == K_PAIR || op == OP_MAXLOC || op == OP_MINLOC ||
        !path_wanted("allreduce", inplace, want, sizeof(want))) {
        return;
    }
    got = mt_picoll.last_algorithm();
    MT_CHECK(path_matches(got, want), "MPI_Allreduce %s %s count %zu%s on %s: path %s, expected %s",
             t->name, op_names[op], count, inplace ? " in place" : "", c->name,
             got ? got : "(none)", want);
}

static void run_allgather(const btype_t *b, size_t count, int inplace, comm_t *c)
{
    uint64_t seed = case_seed("allgather", (size_t)(b - btypes), 0, count, c);
    size_t block = count * b->size; /* bytes per rank */
    size_t total = block * (size_t)c->size;
    size_t scount = count / (size_t)b->ratio;
    int rc;

    if (count % (size_t)b->ratio != 0) {
        return;
    }
    for (int r = 0; r < c->size; r++) {
        gen_block(b, seed, r, 0, block, expect + (size_t)r * block);
    }
    memset(recvbuf, GUARD_BYTE, total + GUARD);
    if (inplace) {
        memcpy(recvbuf + (size_t)c->rank * block, expect + (size_t)c->rank * block, block);
        rc = MPI_Allgather(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, recvbuf, (int)count, b->recv,
                           c->comm);
    } else {
        memcpy(sendbuf, expect + (size_t)c->rank * block, block);
        memset(sendbuf + block, GUARD_BYTE, GUARD);
        rc = MPI_Allgather(sendbuf, (int)scount, b->send, recvbuf, (int)count, b->recv, c->comm);
        MT_CHECK(memcmp(sendbuf, expect + (size_t)c->rank * block, block) == 0 &&
                     guard_ok(sendbuf, block),
                 "MPI_Allgather %s count %zu on %s: sendbuf modified", b->name, count, c->name);
    }
    ncalls++;
    if (count > 0) {
        c->used = 1;
    }
    check_path("allgather", "MPI_Allgather", b, count, inplace, c);
    check_blocks("MPI_Allgather", b, count, inplace, c, rc, total);
}

static void run_alltoall(const btype_t *b, size_t count, int inplace, comm_t *c)
{
    uint64_t seed = case_seed("alltoall", (size_t)(b - btypes), 0, count, c);
    size_t block = count * b->size; /* bytes per pair of ranks */
    size_t total = block * (size_t)c->size;
    size_t scount = count / (size_t)b->ratio;
    int rc;

    if (count % (size_t)b->ratio != 0) {
        return;
    }
    /* what this rank receives from each source, and what it sends to each destination */
    for (int s = 0; s < c->size; s++) {
        gen_block(b, seed, s, c->rank, block, expect + (size_t)s * block);
    }
    memset(recvbuf, GUARD_BYTE, total + GUARD);
    unsigned char *mine = inplace ? recvbuf : sendbuf;
    for (int d = 0; d < c->size; d++) {
        gen_block(b, seed, c->rank, d, block, mine + (size_t)d * block);
    }
    if (inplace) {
        rc =
            MPI_Alltoall(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, recvbuf, (int)count, b->recv, c->comm);
    } else {
        memset(sendbuf + total, GUARD_BYTE, GUARD);
        rc = MPI_Alltoall(sendbuf, (int)scount, b->send, recvbuf, (int)count, b->recv, c->comm);
        int changed = !guard_ok(sendbuf, total);
        unsigned char *tmp = malloc(block ? block : 1);
        for (int d = 0; d < c->size && !changed && tmp; d++) {
            gen_block(b, seed, c->rank, d, block, tmp);
            changed = memcmp(tmp, sendbuf + (size_t)d * block, block) != 0;
        }
        free(tmp);
        MT_CHECK(!changed, "MPI_Alltoall %s count %zu on %s: sendbuf modified", b->name, count,
                 c->name);
    }
    ncalls++;
    if (count > 0) {
        c->used = 1;
    }
    check_path("alltoall", "MPI_Alltoall", b, count, inplace, c);
    check_blocks("MPI_Alltoall", b, count, inplace, c, rc, total);
}

/* ---------------------------------------------------------------- main */

static size_t parse_counts(const char *list, size_t *counts, size_t max)
{
    size_t n = 0;
    for (const char *p = list; *p && n < max;) {
        char *end;
        counts[n++] = strtoul(p, &end, 10);
        p = *end == ',' ? end + 1 : end;
        if (end == p && *p != '\0') {
            break;
        }
    }
    return n;
}

/* --sparse: the n-th case's count, communicator and placement, so that every combination of
 * the three comes up in turn */
/* MPIX_C_FLOAT16 only with picoll preloaded: MPICH 4.0 alone aborts reducing it. */
static int type_runs(const type_t *t)
{
    return t->fk != FK_HALF || mt_picoll.found;
}

static void sparse_pick(unsigned long n, size_t ncounts, size_t *k, int *ci, int *inplace)
{
    *k = n % ncounts;
    *ci = (int)(n / ncounts % (unsigned long)ncomms);
    *inplace = (int)((n / ncounts / (unsigned long)ncomms + n) % 2);
}

int main(int argc, char **argv)
{
    int expect_picoll = mt_flag(argc, argv, "--expect-picoll");
    int sparse = mt_flag(argc, argv, "--sparse");
    bits_each = mt_flag(argc, argv, "--bits-each");
    const char *colls = mt_option(argc, argv, "--colls", "allreduce,allgather,alltoall");
    const char *comm_list = mt_option(argc, argv, "--comms", "world,split,dup,rev,self");
    size_t counts[16];
    size_t ncounts = parse_counts(mt_option(argc, argv, "--counts", "0,1,7,33,4099"), counts, 16);
    size_t big = strtoul(mt_option(argc, argv, "--big", "0"), NULL, 10);
    size_t maxcount = big;

    path_list = mt_option(argc, argv, "--path", NULL);
    path_min = strtoul(mt_option(argc, argv, "--path-min", "1"), NULL, 10);
    double t0;
    unsigned long rot = 0;

    MPI_Init(&argc, &argv);
    mt_load_picoll(expect_picoll);
    detect_mpi();
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    MPI_Comm_set_errhandler(MPI_COMM_SELF, MPI_ERRORS_RETURN);
    if (expect_picoll && mt_picoll.found) {
        MT_CHECK(mt_picoll.active() == 1, "picoll_active() is %d after MPI_Init, expected 1",
                 mt_picoll.active());
    }
    probe_char_ops();
    setup_comms(comm_list);
    setup_btypes();
    for (size_t k = 0; k < ncounts; k++) {
        maxcount = counts[k] > maxcount ? counts[k] : maxcount;
    }
    /* the largest element is 32 bytes; alltoall and allgather hold size blocks */
    alloc_buffers(maxcount * 32 * (size_t)mt_size + 64);
    t0 = MPI_Wtime();

    if (in_list(colls, "allreduce")) {
        for (size_t ti = 0; ti < NTYPES; ti++) {
            for (int op = 0; op < OP_COUNT; op++) {
                if (!op_allowed(&types[ti], (op_t)op) || !type_runs(&types[ti])) {
                    continue;
                }
                if (sparse) {
                    size_t k;
                    int ci, inplace;
                    sparse_pick(rot++, ncounts, &k, &ci, &inplace);
                    run_allreduce(&types[ti], (op_t)op, counts[k], inplace, &comms[ci]);
                    continue;
                }
                for (int ci = 0; ci < ncomms; ci++) {
                    for (size_t k = 0; k < ncounts; k++) {
                        for (int inplace = 0; inplace < 2; inplace++) {
                            run_allreduce(&types[ti], (op_t)op, counts[k], inplace, &comms[ci]);
                        }
                    }
                }
            }
        }
        if (big > 0) {
            for (size_t ti = 0; ti < NTYPES; ti++) {
                for (int op = 0; op < OP_COUNT && types[ti].big && type_runs(&types[ti]); op++) {
                    /* one op per big type, spread over the ops */
                    if (op_allowed(&types[ti], (op_t)op) && (op + (int)ti) % 3 == 0) {
                        for (int inplace = 0; inplace < 2; inplace++) {
                            run_allreduce(&types[ti], (op_t)op, big, inplace, &comms[0]);
                        }
                    }
                }
            }
        }
        same_bits_flush();
    }
    for (int which = 0; which < 2; which++) {
        const char *name = which == 0 ? "allgather" : "alltoall";
        if (!in_list(colls, name)) {
            continue;
        }
        for (int bi = 0; bi < nbtypes; bi++) {
            if (sparse) {
                for (size_t n = 0; n < ncounts; n++) {
                    size_t k;
                    int ci, inplace;
                    sparse_pick(rot++, ncounts, &k, &ci, &inplace);
                    size_t cnt = counts[k] * (size_t)btypes[bi].ratio;
                    if (which == 0) {
                        run_allgather(&btypes[bi], cnt, inplace, &comms[ci]);
                    } else {
                        run_alltoall(&btypes[bi], cnt, inplace, &comms[ci]);
                    }
                }
                continue;
            }
            for (int ci = 0; ci < ncomms; ci++) {
                for (size_t k = 0; k < ncounts; k++) {
                    for (int inplace = 0; inplace < 2; inplace++) {
                        size_t cnt = counts[k] * (size_t)btypes[bi].ratio;
                        if (which == 0) {
                            run_allgather(&btypes[bi], cnt, inplace, &comms[ci]);
                        } else {
                            run_alltoall(&btypes[bi], cnt, inplace, &comms[ci]);
                        }
                    }
                }
            }
        }
        if (big > 0) {
            for (int inplace = 0; inplace < 2; inplace++) {
                if (which == 0) {
                    run_allgather(&btypes[3], big, inplace, &comms[0]);
                } else {
                    run_alltoall(&btypes[0], big, inplace, &comms[0]);
                }
            }
        }
    }

    /* every communicator that carried data has an enabled context of its size */
    if (expect_picoll && mt_picoll.found) {
        unsigned long ids[5];
        for (int ci = 0; ci < ncomms; ci++) {
            picoll_comm_info_t info;
            int rc = mt_picoll.comm_query(comms[ci].comm, &info);
            ids[ci] = 0;
            if (!comms[ci].used) {
                continue;
            }
            MT_CHECK(rc == MPI_SUCCESS, "picoll_comm_query(%s) = %d after collectives: no context",
                     comms[ci].name, rc);
            if (rc != MPI_SUCCESS) {
                continue;
            }
            ids[ci] = info.id;
            MT_CHECK(info.enabled == 1, "%s: context not enabled (%s)", comms[ci].name,
                     info.reason);
            MT_CHECK(info.size == comms[ci].size, "%s: context size %d, communicator size %d",
                     comms[ci].name, info.size, comms[ci].size);
            for (int o = 0; o < ci; o++) {
                MT_CHECK(ids[o] == 0 || ids[o] != info.id, "%s and %s share context id %lu",
                         comms[o].name, comms[ci].name, info.id);
            }
        }
        MT_CHECK(mt_picoll.active() == 1, "picoll_active() is %d at the end, expected 1",
                 mt_picoll.active());
    }
    if (mt_rank == 0) {
        printf("coll_matrix: %llu calls in %.1f s\n", ncalls, MPI_Wtime() - t0);
        if (known_bug_hits > 0) {
            printf(
                "coll_matrix: note: %ld results wrong in the underlying MPI itself (known bug of "
                "this MPI, MIN/MAX signedness) were %s\n",
                known_bug_hits,
                mt_picoll.found ? "passed through unchanged, as the bypassed MPI gives them"
                                : "accepted: no picoll in this run");
        }
    }
    for (int ci = 0; ci < ncomms; ci++) {
        if (comms[ci].comm != MPI_COMM_WORLD && comms[ci].comm != MPI_COMM_SELF) {
            MPI_Comm_free(&comms[ci].comm);
        }
    }
    MPI_Type_free(&contig3);
    free(sendbuf);
    free(recvbuf);
    free(expect);
    free(elem);
    return mt_finish("coll_matrix");
}
