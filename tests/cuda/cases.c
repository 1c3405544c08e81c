/* The cases of tests/cuda/cuda_coll (see cases.h). Every reference is the left-to-right
 * reduction, in rank order, with the C operations of picoll's host reduction, over every rank's
 * input (each rank regenerates the others'): the device must give exactly those bytes.
 * MPIX_C_FLOAT16 (where the MPI defines it and the compiler has _Float16) and MPIX_BFLOAT16
 * (where defined) are summed and multiplied in float in rank order and rounded to the format once
 * (_Float16's conversion, and bfloat16 rounding by value here), as the device kernel does; their
 * MAX and MIN compare values (reference()). Inputs avoid NaN (whose payload a GPU does not propagate as the CPU
 * does). */
#include "cases.h"

#include <complex.h>
#include <dlfcn.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

MPI_Comm test_comm = MPI_COMM_WORLD;
int groups;
int expect_fallback;
int hier;
unsigned long long ncases;

#if defined(MPIX_C_FLOAT16) && defined(__FLT16_MAX__)
#define HAVE_FLOAT16 1
#endif
const char *const op_names[NOPS] = {"SUM", "PROD", "MAX",  "MIN", "LAND",
                                    "LOR", "LXOR", "BAND", "BOR", "BXOR"};

MPI_Op op_handle(op_t op)
{
    switch (op) {
    case SUM: return MPI_SUM;
    case PROD: return MPI_PROD;
    case MAX: return MPI_MAX;
    case MIN: return MPI_MIN;
    case LAND: return MPI_LAND;
    case LOR: return MPI_LOR;
    case LXOR: return MPI_LXOR;
    case BAND: return MPI_BAND;
    case BOR: return MPI_BOR;
    default: return MPI_BXOR;
    }
}

const type_t types[] = {
    {"MPI_INT8_T", MPI_INT8_T, K_INT, 1},
    {"MPI_UINT8_T", MPI_UINT8_T, K_UINT, 1},
    {"MPI_INT16_T", MPI_INT16_T, K_INT, 2},
    {"MPI_UINT16_T", MPI_UINT16_T, K_UINT, 2},
    {"MPI_INT32_T", MPI_INT32_T, K_INT, 4},
    {"MPI_UINT32_T", MPI_UINT32_T, K_UINT, 4},
    {"MPI_INT64_T", MPI_INT64_T, K_INT, 8},
    {"MPI_UINT64_T", MPI_UINT64_T, K_UINT, 8},
    {"MPI_C_BOOL", MPI_C_BOOL, K_BOOL, 1},
    {"MPI_BYTE", MPI_BYTE, K_BYTE, 1},
    {"MPI_FLOAT", MPI_FLOAT, K_FLOAT, 4},
    {"MPI_DOUBLE", MPI_DOUBLE, K_DOUBLE, 8},
    {"MPI_C_FLOAT_COMPLEX", MPI_C_FLOAT_COMPLEX, K_CFLOAT, 8},
    {"MPI_C_DOUBLE_COMPLEX", MPI_C_DOUBLE_COMPLEX, K_CDOUBLE, 16},
/* after the others: T_* in cases.h name types by index */
#ifdef HAVE_FLOAT16
    {"MPIX_C_FLOAT16", MPIX_C_FLOAT16, K_F16, 2},
#endif
#ifdef MPIX_BFLOAT16
    {"MPIX_BFLOAT16", MPIX_BFLOAT16, K_BF16, 2},
#endif
};
const size_t ntypes = sizeof(types) / sizeof(types[0]);
const type_t type_long_double = {"MPI_LONG_DOUBLE", MPI_LONG_DOUBLE, K_LDOUBLE,
                                 sizeof(long double)};

int op_allowed(const type_t *t, op_t op)
{
    switch (t->kind) {
    case K_INT:
    case K_UINT: return 1;
    case K_BOOL: return op == LAND || op == LOR || op == LXOR;
    case K_BYTE: return op == BAND || op == BOR || op == BXOR;
    case K_FLOAT:
    case K_DOUBLE:
    case K_LDOUBLE:
    case K_F16:
    case K_BF16: return op <= MIN;
    default: return op == SUM || op == PROD;
    }
}

op_t draw_op(const type_t *t, uint64_t seed, long k, uint64_t base, int d0)
{
    op_t op;
    int d = d0;
    do {
        op = (op_t)(mt_rand(seed, (uint64_t)k, base + (uint64_t)d++) % NOPS);
    } while (!op_allowed(t, op));
    return op;
}

/* ---------------------------------------------------------------- inputs and references */

uint64_t seed_of(int t, int op, size_t count, int extra)
{
    return mt_rand((uint64_t)t * 131 + (uint64_t)op, count, (uint64_t)extra);
}

/* bfloat16 <-> float: the bits of a bfloat16 are the top half of a float's. float -> bfloat16
 * rounds to nearest even by value: ulp = 2^(exponent - 7), never below 2^-133; NaN does not occur
 * (the inputs avoid it). */
static float bf16_to_float(uint16_t h)
{
    uint32_t u = (uint32_t)h << 16;
    float f;
    memcpy(&f, &u, 4);
    return f;
}

static uint16_t bf16_from_double(double v)
{
    if (v != 0 && !isinf(v)) {
        int e;
        frexp(v, &e);
        int qe = e - 8 < -133 ? -133 : e - 8;
        v = ldexp(nearbyint(ldexp(v, -qe)), qe);
        if (fabs(v) > ldexp(255.0, 120)) {
            v = v > 0 ? INFINITY : -INFINITY;
        }
    }
    float f = (float)v;
    uint32_t u;
    memcpy(&u, &f, 4);
    return (uint16_t)(u >> 16);
}

/* Element i of rank r's input. exact: values whose sums and products are exact in floating point
 * whatever the order, zeros' signs included (small integers; nonzero powers of two, so that a zero
 * only ever comes from an exact cancellation, +0), for calls that fall back: the underlying MPI
 * reduces in an order of its own, and with its own bugs. */
void gen(const type_t *t, op_t op, uint64_t seed, int r, size_t i, int exact, void *p)
{
    /* 2^-1, 2^0, 2^1: the products' exact factors (ldexp's values, without its call) */
    static const double pow2[3] = {0.5, 1.0, 2.0};
    uint64_t x = mt_rand(seed, (uint64_t)r, i);
    double re = 0.0, im = 0.0;
    /* the floating-point value, for the kinds that take it (the complex ones its second half):
     * the matrices' generator runs for every element of every rank, most of them integers */
    int fp = t->kind == K_FLOAT || t->kind == K_DOUBLE || t->kind == K_CFLOAT ||
             t->kind == K_CDOUBLE || t->kind == K_F16 || t->kind == K_BF16;
    int cplx = t->kind == K_CFLOAT || t->kind == K_CDOUBLE;
    if (fp && exact) {
        re = op == PROD ? ((x >> 4) & 1 ? -1.0 : 1.0) * pow2[x % 3]
                        : (double)(int64_t)(x % 33) - 16.0;
        if (cplx) {
            im = op == PROD ? ((x >> 20) & 1 ? -1.0 : 1.0) * pow2[1 - (int)((x >> 21) & 1)]
                            : (double)(int64_t)((x >> 20) % 33) - 16.0;
        }
    } else if (fp) {
        double f = (double)(int64_t)(x % 2000001 - 1000000) / 1024.0;
        re = op == PROD ? 0.75 + (double)(x % 1000) / 2000.0 : f;
        if (cplx) {
            im = op == PROD ? (double)((x >> 20) % 1000) / 2000.0 - 0.25 : f / 3.0;
        }
    }
    switch (t->kind) {
    case K_INT:
    case K_UINT:
    case K_BYTE:
        if (op == LAND || op == LOR || op == LXOR) {
            x = (x & 3) == 0 ? 0 : (x >> 8); /* zeros often, nonzero values with zero low bytes */
        } else if (op == BAND) {
            x |= mt_hash(x);
        } else if (exact && t->kind == K_UINT && (op == MAX || op == MIN)) {
            /* the top bit clear: MPICH 4.0.2 compares unsigned types as signed in MIN/MAX
             * (pmodels/mpich#6083) */
            x &= ~(1ull << (8 * t->size - 1));
        }
        memcpy(p, &x, t->size); /* little-endian: the low bytes */
        break;
    case K_BOOL: *(_Bool *)p = (x & 3) != 0; break;
    case K_FLOAT: *(float *)p = (float)re; break;
    case K_DOUBLE: *(double *)p = re; break;
    case K_LDOUBLE:
        *(long double *)p = (long double)(int)(x % 201) - 100; /* exact in any order */
        break;
    case K_CFLOAT: *(float _Complex *)p = CMPLXF((float)re, (float)im); break;
    case K_CDOUBLE: *(double _Complex *)p = CMPLX(re, im); break;
    case K_F16:
#ifdef HAVE_FLOAT16
        *(_Float16 *)p = (_Float16)re;
#endif
        break;
    case K_BF16: {
        uint16_t h = bf16_from_double(re);
        memcpy(p, &h, 2);
        break;
    }
    }
}

#define INT_OP(T, W)                                                                               \
    do {                                                                                           \
        T x = *(T *)acc, y = *(const T *)in;                                                       \
        T z;                                                                                       \
        switch (op) {                                                                              \
        case SUM: z = (T)((W)x + (W)y); break;                                                     \
        case PROD: z = (T)((W)x * (W)y); break;                                                    \
        case MAX: z = x > y ? x : y; break;                                                        \
        case MIN: z = x < y ? x : y; break;                                                        \
        case LAND: z = (T)((x != 0) & (y != 0)); break;                                            \
        case LOR: z = (T)((x != 0) | (y != 0)); break;                                             \
        case LXOR: z = (T)((x != 0) ^ (y != 0)); break;                                            \
        case BAND: z = (T)(x & y); break;                                                          \
        case BOR: z = (T)(x | y); break;                                                           \
        default: z = (T)(x ^ y); break;                                                            \
        }                                                                                          \
        *(T *)acc = z;                                                                             \
    } while (0)

#define REAL_OP(T)                                                                                 \
    do {                                                                                           \
        T x = *(T *)acc, y = *(const T *)in;                                                       \
        *(T *)acc = op == SUM    ? x + y                                                           \
                    : op == PROD ? x * y                                                           \
                    : op == MAX  ? (x > y ? x : y)                                                 \
                                 : (x < y ? x : y);                                                 \
    } while (0)

/* acc = acc op in, with the C semantics of picoll's host reduction (src/reduce/reduce.c). */
static void combine(const type_t *t, op_t op, void *acc, const void *in)
{
    switch (t->kind) {
    case K_INT:
        switch (t->size) {
        case 1: INT_OP(int8_t, unsigned); break;
        case 2: INT_OP(int16_t, unsigned); break;
        case 4: INT_OP(int32_t, uint32_t); break;
        default: INT_OP(int64_t, uint64_t); break;
        }
        break;
    case K_UINT:
    case K_BYTE:
        switch (t->size) {
        case 1: INT_OP(uint8_t, unsigned); break;
        case 2: INT_OP(uint16_t, unsigned); break;
        case 4: INT_OP(uint32_t, uint32_t); break;
        default: INT_OP(uint64_t, uint64_t); break;
        }
        break;
    case K_BOOL: {
        _Bool x = *(_Bool *)acc, y = *(const _Bool *)in;
        *(_Bool *)acc = op == LAND ? x && y : op == LOR ? x || y : x != y;
        break;
    }
    case K_FLOAT: REAL_OP(float); break;
    case K_DOUBLE: REAL_OP(double); break;
    case K_LDOUBLE: REAL_OP(long double); break;
    case K_CFLOAT: {
        float _Complex x = *(float _Complex *)acc, y = *(const float _Complex *)in;
        *(float _Complex *)acc = op == SUM ? x + y : x * y;
        break;
    }
    case K_CDOUBLE: {
        double _Complex x = *(double _Complex *)acc, y = *(const double _Complex *)in;
        *(double _Complex *)acc = op == SUM ? x + y : x * y;
        break;
    }
    case K_F16:
#ifdef HAVE_FLOAT16
        REAL_OP(_Float16); /* each operation rounded once to float16 */
#endif
        break;
    case K_BF16: {
        uint16_t a, b;
        memcpy(&a, acc, 2);
        memcpy(&b, in, 2);
        double x = bf16_to_float(a), y = bf16_to_float(b);
        uint16_t z = op == SUM    ? bf16_from_double(x + y)
                     : op == PROD ? bf16_from_double(x * y)
                     : op == MAX  ? (x > y ? a : b)
                                  : (x < y ? a : b);
        memcpy(acc, &z, 2);
        break;
    }
    }
}

void check_bytes(const char *what, const char *tname, const char *opname, size_t count,
                 size_t esize, const unsigned char *got, const unsigned char *want)
{
    for (size_t i = 0; i < count; i++) {
        if (memcmp(got + i * esize, want + i * esize, esize) != 0) {
            char g[40] = "", w[40] = "";
            for (size_t k = 0; k < esize && k < 16; k++) {
                snprintf(g + 2 * k, 3, "%02x", got[i * esize + k]);
                snprintf(w + 2 * k, 3, "%02x", want[i * esize + k]);
            }
            mt_fail("%s %s %s count %zu: element %zu is %s, expected %s", what, tname, opname,
                    count, i, g, w);
            return;
        }
    }
}

/* float16 and bfloat16 as float (exact), and float rounded to the format (to nearest even). */
static float half_value(const type_t *t, const void *p)
{
    uint16_t h;
    memcpy(&h, p, 2);
#ifdef HAVE_FLOAT16
    if (t->kind == K_F16) {
        _Float16 x;
        memcpy(&x, &h, 2);
        return (float)x;
    }
#endif
    (void)t;
    return bf16_to_float(h);
}

static void half_round(const type_t *t, float f, void *p)
{
    uint16_t h = bf16_from_double((double)f);
    (void)t;
#ifdef HAVE_FLOAT16
    if (t->kind == K_F16) {
        _Float16 x = (_Float16)f;
        memcpy(&h, &x, 2);
    }
#endif
    memcpy(p, &h, 2);
}

/* Element i of the result: left to right over the ranks; with --groups G, left to right within
 * each group of G consecutive ranks, then over the groups' results (the hybrid cube mesh's order
 * with its quads 0-3 and 4-7). float16 and bfloat16 sums and products as the device kernel does
 * them: each group's values accumulated in float and rounded to the format once; the groups'
 * results (in half precision: the hybrid cube mesh's quad results pass through a workspace
 * buffer) combined with one rounding each. */
void reference(const type_t *t, op_t op, uint64_t seed, size_t i, int exact, unsigned char *want)
{
    unsigned char elem[16], part[16];
    int g = groups > 0 ? groups : mt_size;
    int wide = (t->kind == K_F16 || t->kind == K_BF16) && (op == SUM || op == PROD);
    for (int lo = 0; lo < mt_size; lo += g) {
        gen(t, op, seed, lo, i, exact, part);
        float acc = wide ? half_value(t, part) : 0;
        for (int r = lo + 1; r < lo + g && r < mt_size; r++) {
            gen(t, op, seed, r, i, exact, elem);
            if (wide) {
                acc = op == SUM ? acc + half_value(t, elem) : acc * half_value(t, elem);
            } else {
                combine(t, op, part, elem);
            }
        }
        if (wide) {
            half_round(t, acc, part);
        }
        if (lo == 0) {
            memcpy(want, part, t->size);
        } else {
            combine(t, op, want, part);
        }
    }
}

/* One allreduce: in place or not, buffers at byte offset off. */

unsigned char rank_byte_sum(int k)
{
    unsigned sum = 0;
    for (int r = 0; r < mt_size; r++) {
        sum += (unsigned)(r + 1) * (unsigned)k;
    }
    return (unsigned char)sum;
}

/* ---------------------------------------------------------------- buffers */

int zc_register, zc_aligned;

/* picoll_register and picoll_deregister, found in the process (libpicoll.so preloaded) */
static int (*reg_fn)(MPI_Comm, void *, size_t, void **);
static int (*dereg_fn)(void *);

void dbuf_alloc(dbuf_t *b, size_t len, size_t off, int host)
{
    size_t total = GUARD + off + len + GUARD;
    unsigned char *fill = malloc(total);

    memset(fill, GUARD_BYTE, total);
    b->len = len;
    b->off = off;
    b->host = host;
    if (host) {
        b->alloc = (char *)fill;
    } else {
        cu_ptr_t p;
        CK(drv.mem_alloc(&p, total));
        CK(drv.memcpy_htod(p, fill, total));
        b->alloc = (char *)(uintptr_t)p;
        free(fill);
    }
    b->p = b->alloc + GUARD + off;
    b->reg = NULL;
    if (zc_register && !host) {
        if (reg_fn == NULL) {
            *(void **)&reg_fn = dlsym(RTLD_DEFAULT, "picoll_register");
            *(void **)&dereg_fn = dlsym(RTLD_DEFAULT, "picoll_deregister");
            MT_CHECK(reg_fn != NULL && dereg_fn != NULL,
                     "--register: picoll_register is not in the process");
        }
        int rc = reg_fn(test_comm, b->alloc, total, &b->reg);
        MT_CHECK(rc == MPI_SUCCESS, "picoll_register of %zu device bytes: MPI error %d", total, rc);
    }
}

void dbuf_put(dbuf_t *b, size_t at, const void *src, size_t n)
{
    if (b->host) {
        memcpy(b->p + at, src, n);
    } else if (n > 0) {
        CK(drv.memcpy_htod((cu_ptr_t)(uintptr_t)(b->p + at), src, n));
    }
}

void dbuf_get(const dbuf_t *b, size_t at, void *dst, size_t n)
{
    if (b->host) {
        memcpy(dst, b->p + at, n);
    } else if (n > 0) {
        CK(drv.memcpy_dtoh(dst, (cu_ptr_t)(uintptr_t)(b->p + at), n));
    }
}

void dbuf_free(dbuf_t *b)
{
    if (b->alloc == NULL) {
        return;
    }
    if (b->host) {
        free(b->alloc);
    } else {
        if (b->reg != NULL) {
            int rc = dereg_fn(b->reg);
            MT_CHECK(rc == MPI_SUCCESS, "picoll_deregister: MPI error %d", rc);
            b->reg = NULL;
        }
        CK(drv.mem_free((cu_ptr_t)(uintptr_t)b->alloc));
    }
    b->alloc = b->p = NULL;
}

/* Reads the buffer's len bytes into dst; 1 when the guard bytes before and after are intact. */
int dbuf_read(const dbuf_t *b, void *dst)
{
    size_t total = GUARD + b->off + b->len + GUARD, lead = GUARD + b->off;
    unsigned char *all = malloc(total);
    int intact = 1;

    if (b->host) {
        memcpy(all, b->alloc, total);
    } else {
        CK(drv.memcpy_dtoh(all, (cu_ptr_t)(uintptr_t)b->alloc, total));
    }
    for (size_t i = 0; i < total; i++) {
        if ((i < lead || i >= lead + b->len) && all[i] != GUARD_BYTE) {
            intact = 0;
            break;
        }
    }
    memcpy(dst, all + lead, b->len);
    free(all);
    return intact;
}

/* ---------------------------------------------------------------- paths */

static const char *(*last_algorithm)(void);

void path_init(void)
{
    *(void **)&last_algorithm = dlsym(RTLD_DEFAULT, "picoll_last_algorithm");
    MT_CHECK(last_algorithm != NULL, "picoll_last_algorithm is not in the process (is "
                                     "libpicoll.so in LD_PRELOAD?): no call's path can be checked");
}

static int path_ok(const char *got, const char *want)
{
    size_t n = strlen(got);
    for (const char *w = want; *w != '\0';) {
        const char *bar = strchr(w, '|');
        size_t len = bar ? (size_t)(bar - w) : strlen(w);
        if (len == n && strncmp(w, got, n) == 0) {
            return 1;
        }
        w += len + (bar != NULL);
    }
    return 0;
}

void check_path(const char *call, size_t count, const char *want)
{
    const char *got;
    if (last_algorithm == NULL || want == NULL) {
        return;
    }
    got = last_algorithm();
    if (got == NULL || !path_ok(got, want)) {
        mt_fail("%s count=%zu: path %s, expected %s", call, count, got ? got : "(none)", want);
    }
}

/* --hier: what the host hierarchy takes: device buffers staged through host memory (the emulated
 * GPU's MPI is not CUDA-aware), or, where picoll does not stage (PICOLL_CUDA_STAGING=off: as on
 * a CUDA-aware MPI), the MPI */
static const char *hier_staged(const char *path)
{
    const char *staging = getenv("PICOLL_CUDA_STAGING");
    return staging != NULL && strcmp(staging, "off") == 0 ? "fallback" : path;
}
#define HIER_STAGED hier_staged("hier_oneshot|hier_rd|hier_ring|hier_rab")

const char *want_staged_allreduce(void)
{
    return hier > 0 ? HIER_STAGED : "fallback";
}

/* PICOLL_CUDA_LL_MAX in bytes (a number, with k or M), 0 unset */
static size_t ll_max(void)
{
    const char *v = getenv("PICOLL_CUDA_LL_MAX");
    char *end;
    size_t n = v != NULL ? strtoull(v, &end, 10) : 0;
    return v == NULL ? 0 : *end == 'k' || *end == 'K' ? n << 10 : *end == 'M' ? n << 20 : n;
}

const char *want_allreduce(const type_t *t, size_t bytes)
{
    if (hier > 0) {
        /* long double: no device arithmetic, the host hierarchy on host copies */
        const char *min = getenv("PICOLL_HIER_CUDA_MIN"); /* cuda_coll sets 0, in bytes */
        return t->kind == K_LDOUBLE || bytes < strtoull(min ? min : "0", NULL, 10) ? HIER_STAGED
                                                                                   : "hier_cuda";
    }
    if (t->kind == K_LDOUBLE || expect_fallback) {
        return "fallback"; /* no device arithmetic for long double */
    }
    if (groups > 0) {
        return "cuda_hcm"; /* PICOLL_HCM_ONESHOT_MAX=1G */
    }
    /* the low-latency lines where one slot holds the 16-byte rounded bytes of every rank */
    int n = 1;
    MPI_Comm_size(test_comm, &n);
    if (bytes <= ll_max() && (size_t)n * ((bytes + 15) & ~(size_t)15) <= SLOT) {
        return "cuda_ll";
    }
    if (bytes <= ONESHOT_MAX) {
        return "cuda_oneshot";
    }
    /* NVLink (or one shared GPU): two-shot above PICOLL_NVLINK_ONESHOT_MAX; PCIe
     * (PICOLL_PCIE_ONESHOT_MAX=1G): one-shot up to a workspace buffer */
    return bytes <= SLOT ? "cuda_oneshot|cuda_twoshot" : "cuda_twoshot";
}

const char *want_blocks(int alltoall, int in_place, size_t total)
{
    if (hier > 0) {
        /* the device hierarchy from PICOLL_HIER_CUDA_MIN bytes in a node's part on (a block times
         * the ranks of a node), on nodes of equal size, but for alltoall in place; else the host
         * hierarchy, staged */
        const char *min = getenv("PICOLL_HIER_CUDA_MIN");
        return (alltoall && in_place) || mt_size % hier != 0 /* nodes of unequal size */ ||
                       total / (size_t)mt_size * (size_t)hier < strtoull(min ? min : "0", NULL, 10)
                   ? hier_staged(alltoall ? "hier" : "hier|hier_bruck")
                   : "hier_cuda";
    }
    /* the hybrid cube mesh has GPU pairs without peer access: copies hand over */
    if (expect_fallback || groups > 0) {
        return "fallback";
    }
    /* allgather's low-latency lines up to PICOLL_CUDA_LL_MAX received bytes (the payload goes
     * straight to the receive buffer: no slot bound) */
    if (!alltoall && total != 0 && total <= ll_max()) {
        return "cuda_ll";
    }
    return "cuda_ipc";
}

/* a size variable in bytes (a number, with k or M), def where unset */
static size_t env_bytes(const char *name, size_t def)
{
    const char *v = getenv(name);
    char *end;
    size_t n = v != NULL ? strtoull(v, &end, 10) : 0;
    return v == NULL ? def : *end == 'k' || *end == 'K' ? n << 10 : *end == 'M' ? n << 20 : n;
}

const char *want_zc(const char *want, int alltoall, const void *send, const void *recv,
                    size_t rbytes)
{
    return want_zc_maps(want, alltoall, send, recv, rbytes, -1);
}

const char *want_zc_maps(const char *want, int alltoall, const void *send, const void *recv,
                         size_t rbytes, long maps)
{
    const char *mode = getenv("PICOLL_CUDA_ZERO_COPY");
    /* reused: as on, where the caller knows every buffer of the call was met before (a call
     * meeting one for the first time copies: the caller does not ask here) */
    int on = mode != NULL && (strcmp(mode, "on") == 0 || strcmp(mode, "reused") == 0);
    int reg = (mode == NULL || strcmp(mode, "registered") == 0) && zc_register;
    if (want == NULL || (!on && !reg) ||
        rbytes < env_bytes("PICOLL_CUDA_ZERO_COPY_MIN", 1u << 20) ||
        (alltoall && send == MPI_IN_PLACE)) {
        return want;
    }
    int aligned = (uintptr_t)recv % 16 == 0 && (send == MPI_IN_PLACE || (uintptr_t)send % 16 == 0);
    /* the IPC cache holds fewer entries than a call maps (a peer's allocation each, both of a
     * two-shot's out of place: PICOLL_CUDA_IPC_CACHE): a rank cannot map them all, and every
     * rank copies (picoll stats: "declined") */
    const char *cache = getenv("PICOLL_CUDA_IPC_CACHE");
    int n = 1;
    MPI_Comm_size(test_comm, &n);
    long need =
        maps >= 0
            ? maps
            : (long)(n - 1) *
                  (!alltoall && strcmp(want, "cuda_ipc") != 0 && send != MPI_IN_PLACE ? 2 : 1);
    if (!aligned || (cache != NULL && atol(cache) < need)) {
        return want;
    }
    /* where the reach picks one-shot up to a workspace buffer (PCIe) it stays */
    return strcmp(want, "cuda_twoshot") == 0 || strcmp(want, "cuda_ipc") == 0 ? "cuda_zc"
           : strcmp(want, "cuda_oneshot|cuda_twoshot") == 0 ? "cuda_oneshot|cuda_zc"
                                                            : want;
}

/* ---------------------------------------------------------------- the worker thread */

static struct {
    pthread_mutex_t lock;
    pthread_cond_t cond;
    pthread_t thread;
    int running, busy, quit;
    void (*fn)(void *);
    void *arg;
} worker = {.lock = PTHREAD_MUTEX_INITIALIZER, .cond = PTHREAD_COND_INITIALIZER};
static _Thread_local int in_worker;

static void *worker_main(void *unused)
{
    (void)unused;
    in_worker = 1;
    pthread_mutex_lock(&worker.lock);
    for (;;) {
        if (worker.busy) {
            pthread_mutex_unlock(&worker.lock);
            worker.fn(worker.arg);
            pthread_mutex_lock(&worker.lock);
            worker.busy = 0;
            pthread_cond_broadcast(&worker.cond);
        } else if (worker.quit) {
            break;
        } else {
            pthread_cond_wait(&worker.cond, &worker.lock);
        }
    }
    pthread_mutex_unlock(&worker.lock);
    return NULL;
}

void worker_start(void)
{
    worker.quit = 0;
    if (pthread_create(&worker.thread, NULL, worker_main, NULL) != 0) {
        mt_fail("pthread_create failed");
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    worker.running = 1;
}

void worker_stop(void)
{
    pthread_mutex_lock(&worker.lock);
    worker.quit = 1;
    pthread_cond_broadcast(&worker.cond);
    pthread_mutex_unlock(&worker.lock);
    pthread_join(worker.thread, NULL);
    worker.running = 0;
}

void worker_run(void (*fn)(void *), void *arg)
{
    if (!worker.running) {
        fn(arg);
        return;
    }
    pthread_mutex_lock(&worker.lock);
    worker.fn = fn;
    worker.arg = arg;
    worker.busy = 1;
    pthread_cond_broadcast(&worker.cond);
    while (worker.busy) {
        pthread_cond_wait(&worker.cond, &worker.lock);
    }
    pthread_mutex_unlock(&worker.lock);
}

/* ---------------------------------------------------------------- calls */

typedef enum { C_ALLREDUCE, C_ALLGATHER, C_ALLTOALL } coll_t;
typedef struct {
    coll_t coll;
    const void *send;
    void *recv;
    int count;
    MPI_Datatype dt;
    MPI_Op op;
    const char *want;   /* accepted paths */
    const char *kernel; /* allreduce: the kernel entry a device call runs (want_kernel) */
    char name[96];      /* the call, for messages */
} call_t;

/* The kernel entry an allreduce of t and op on n local ranks runs where it takes picoll's one-shot
 * or two-shot kernels (cuda/cuda_kernel.h's PICOLL_CUDA_FIXED_LIST: sums of float, double,
 * float16 and bfloat16 on 2, 4, 6 or 8 ranks have their own; everything else, and every call
 * with PICOLL_CUDA_FIXED=0, the generic one). */
static const char *want_kernel(const type_t *t, op_t op, int n, char *buf, size_t len)
{
    const char *tag = t->kind == K_FLOAT && t->size == 4    ? "f32"
                      : t->kind == K_DOUBLE && t->size == 8 ? "f64"
                      : t->kind == K_F16                    ? "f16"
                      : t->kind == K_BF16                   ? "bf16"
                                                            : NULL;
    const char *on = getenv("PICOLL_CUDA_FIXED");
    if (tag == NULL || op != SUM || (n != 2 && n != 4 && n != 6 && n != 8) ||
        (on != NULL && strcmp(on, "0") == 0)) {
        return "picoll_coll_kernel";
    }
    snprintf(buf, len, "picoll_coll_%s_sum_r%d", tag, n);
    return buf;
}

/* On the emulated GPU (its hook fakecuda_last_kernel): a call that took the one-shot or two-shot
 * kernels ran the entry k->kernel (the hierarchical and HCM paths end with other modes) */
static void check_kernel(const call_t *k)
{
    if (k->kernel == NULL || drv.last_kernel == NULL || last_algorithm == NULL) {
        return;
    }
    const char *path = last_algorithm(), *got = drv.last_kernel();
    if (path == NULL || (strcmp(path, "cuda_oneshot") != 0 && strcmp(path, "cuda_twoshot") != 0 &&
                         strcmp(path, "cuda_ll") != 0 && strcmp(path, "cuda_zc") != 0)) {
        return;
    }
    if (got == NULL || strcmp(got, k->kernel) != 0) {
        mt_fail("%s count=%d: path %s ran the kernel entry %s, expected %s", k->name, k->count,
                path, got ? got : "(none)", k->kernel);
    }
}

static void call_exec(void *arg)
{
    call_t *k = arg;
    int rc;
    switch (k->coll) {
    case C_ALLREDUCE:
        rc = MPI_Allreduce(k->send, k->recv, k->count, k->dt, k->op, test_comm);
        break;
    case C_ALLGATHER:
        rc = MPI_Allgather(k->send, k->count, k->dt, k->recv, k->count, k->dt, test_comm);
        break;
    default:
        rc = MPI_Alltoall(k->send, k->count, k->dt, k->recv, k->count, k->dt, test_comm);
        break;
    }
    MT_CHECK(rc == MPI_SUCCESS, "%s count=%d: MPI error %d", k->name, k->count, rc);
    int tsize = 1, n = 1;
    MPI_Type_size(k->dt, &tsize);
    MPI_Comm_size(test_comm, &n);
    size_t rbytes = (size_t)k->count * (size_t)tsize * (size_t)(k->coll == C_ALLREDUCE ? 1 : n);
    check_path(k->name, (size_t)k->count,
               want_zc(k->want, k->coll == C_ALLTOALL, k->send, k->recv, rbytes));
    check_kernel(k);
    if (in_worker) {
        cu_ctx_t now = drv_current();
        MT_CHECK(now == NULL,
                 "%s count=%d from a thread that never chose a device: context %p "
                 "left current afterwards",
                 k->name, k->count, (void *)now);
    }
}

void call_allreduce(const void *send, void *recv, size_t count, MPI_Datatype dt, MPI_Op op,
                    const char *want, const char *name)
{
    call_t k = {.coll = C_ALLREDUCE,
                .send = send,
                .recv = recv,
                .count = (int)count,
                .dt = dt,
                .op = op,
                .want = want};
    snprintf(k.name, sizeof(k.name), "%s", name);
    worker_run(call_exec, &k);
}

void call_blocks(int alltoall, const void *send, void *recv, size_t block, const char *want,
                 const char *name)
{
    call_t k = {.coll = alltoall ? C_ALLTOALL : C_ALLGATHER,
                .send = send,
                .recv = recv,
                .count = (int)block,
                .dt = MPI_BYTE,
                .want = want};
    snprintf(k.name, sizeof(k.name), "%s", name);
    worker_run(call_exec, &k);
}

/* ---------------------------------------------------------------- allreduce */

void ar_prepare(ar_case_t *c)
{
    const type_t *t = c->t;
    uint64_t seed = seed_of(c->ti, (int)c->op, c->count, (int)(c->off * 2 + (size_t)c->in_place));
    /* the MPI's order, or recursive doubling over more than two nodes (the node folded in first
     * is not the next one): inputs whose sums are exact in any order */
    c->exact = c->exact || (hier > 0 && mt_size > 2 * hier);
    int exact = c->exact || expect_fallback;

    c->bytes = c->count * t->size;
    c->mine = malloc(c->bytes + 1);
    c->want = malloc(c->bytes + 1);
    c->got = malloc(c->bytes + 1);
    for (size_t i = 0; i < c->count; i++) {
        gen(t, c->op, seed, mt_rank, i, exact, c->mine + i * t->size);
        reference(t, c->op, seed, i, exact, c->want + i * t->size);
    }
    memset(&c->sb, 0, sizeof(c->sb));
    dbuf_alloc(&c->rb, c->bytes, c->off, c->mem == MEM_HOST);
    if (c->in_place) {
        dbuf_put(&c->rb, 0, c->mine, c->bytes);
    } else {
        dbuf_alloc(&c->sb, c->bytes, zc_aligned ? c->off : (c->off + 3) % 16, c->mem != MEM_DEVICE);
        dbuf_put(&c->sb, 0, c->mine, c->bytes);
    }
}

void ar_call(ar_case_t *c, const char *want_path)
{
    call_t k = {
        .coll = C_ALLREDUCE,
        .send = c->in_place ? MPI_IN_PLACE : c->sb.p,
        .recv = c->rb.p,
        .count = (int)c->count,
        .dt = c->t->dt,
        .op = op_handle(c->op),
        .want = want_path ? want_path : want_allreduce(c->t, c->bytes),
    };

    char kbuf[64];
    int n;
    MPI_Comm_size(test_comm, &n);
    k.kernel = want_kernel(c->t, c->op, n, kbuf, sizeof(kbuf));
    snprintf(k.name, sizeof(k.name), "MPI_Allreduce %s %s%s", c->t->name, op_names[c->op],
             c->in_place ? " in place" : "");
    worker_run(call_exec, &k);
}

/* Complex products of exact inputs in another order can differ in the sign of a zero component
 * ((-2 + 0i)(-1 + 0i) has imaginary part -0 + -0; the other order's cancellation gives +0): where
 * the MPI reduces, zero components compare without their sign. */
static int exact_zeros_unsigned(const ar_case_t *c)
{
    return (c->exact || expect_fallback) && (c->t->kind == K_CFLOAT || c->t->kind == K_CDOUBLE);
}

static void zeros_unsign(const type_t *t, unsigned char *v, size_t count)
{
    for (size_t i = 0; i < 2 * count; i++) {
        if (t->kind == K_CFLOAT) {
            float *f = (float *)(void *)v + i;
            *f = *f == 0.0f ? 0.0f : *f;
        } else {
            double *d = (double *)(void *)v + i;
            *d = *d == 0.0 ? 0.0 : *d;
        }
    }
}

void ar_check(ar_case_t *c)
{
    const type_t *t = c->t;
    MT_CHECK(dbuf_read(&c->rb, c->got), "allreduce %s %s count %zu: guard bytes overwritten",
             t->name, op_names[c->op], c->count);
    if (!c->in_place) {
        unsigned char *back = malloc(c->bytes + 1);
        MT_CHECK(dbuf_read(&c->sb, back) && memcmp(back, c->mine, c->bytes) == 0,
                 "allreduce %s %s count %zu: send buffer or its guard bytes changed", t->name,
                 op_names[c->op], c->count);
        free(back);
    }
    if (exact_zeros_unsigned(c)) {
        zeros_unsign(t, c->got, c->count);
        zeros_unsign(t, c->want, c->count);
    }
    if (t->kind == K_LDOUBLE) {
        /* x87 extended precision: 10 bytes of value, the rest padding that no one defines */
        for (size_t i = 0; i < c->count; i++) {
            memset(c->got + i * t->size + 10, 0, t->size - 10);
            memset(c->want + i * t->size + 10, 0, t->size - 10);
        }
    }
    check_bytes(c->in_place ? "allreduce in place" : "allreduce", t->name, op_names[c->op],
                c->count, t->size, c->got, c->want);
    ncases++;
    dbuf_free(&c->sb);
    dbuf_free(&c->rb);
    free(c->mine);
    free(c->want);
    free(c->got);
}

void allreduce_case(int ti, const type_t *t, op_t op, size_t count, int in_place, size_t off)
{
    ar_case_t c = {.ti = ti, .t = t, .op = op, .count = count, .in_place = in_place, .off = off};
    ar_prepare(&c);
    ar_call(&c, NULL);
    ar_check(&c);
}

/* ---------------------------------------------------------------- allgather, alltoall */

static unsigned char block_byte(int from, int to, size_t i, uint64_t seed)
{
    return (unsigned char)mt_rand(seed, (uint64_t)from * 1000 + (uint64_t)to, i);
}

void bl_prepare(bl_case_t *c)
{
    size_t block = c->block;
    uint64_t seed = mt_rand(block, (uint64_t)c->alltoall, (uint64_t)c->in_place);

    c->total = block * (size_t)mt_size;
    c->in = malloc(c->total + 1);
    c->want = malloc(c->total + 1);
    c->got = malloc(c->total + 1);
    for (int p = 0; p < mt_size; p++) {
        for (size_t i = 0; i < block; i++) {
            /* alltoall: what I send to p, what p sends me; allgather: my block, p's block */
            c->in[(size_t)p * block + i] =
                c->alltoall ? block_byte(mt_rank, p, i, seed) : block_byte(mt_rank, 0, i, seed);
            c->want[(size_t)p * block + i] =
                c->alltoall ? block_byte(p, mt_rank, i, seed) : block_byte(p, 0, i, seed);
        }
    }
    memset(&c->sb, 0, sizeof(c->sb));
    dbuf_alloc(&c->rb, c->total, c->off, c->mem == MEM_HOST);
    if (c->in_place) {
        if (c->alltoall) {
            dbuf_put(&c->rb, 0, c->in, c->total);
        } else {
            dbuf_put(&c->rb, (size_t)mt_rank * block, c->in, block);
        }
    } else {
        dbuf_alloc(&c->sb, c->alltoall ? c->total : block, zc_aligned ? c->off : (c->off + 5) % 16,
                   c->mem != MEM_DEVICE);
        dbuf_put(&c->sb, 0, c->in, c->sb.len);
    }
}

void bl_call(bl_case_t *c, const char *want_path)
{
    call_t k = {
        .coll = c->alltoall ? C_ALLTOALL : C_ALLGATHER,
        .send = c->in_place ? MPI_IN_PLACE : c->sb.p,
        .recv = c->rb.p,
        .count = (int)c->block,
        .dt = MPI_BYTE,
        .want = want_path ? want_path
                          : want_blocks(c->alltoall, c->in_place, c->block * (size_t)mt_size),
    };

    snprintf(k.name, sizeof(k.name), "%s MPI_BYTE%s",
             c->alltoall ? "MPI_Alltoall" : "MPI_Allgather", c->in_place ? " in place" : "");
    worker_run(call_exec, &k);
}

void bl_check(bl_case_t *c)
{
    const char *what = c->alltoall ? "alltoall" : "allgather";
    MT_CHECK(dbuf_read(&c->rb, c->got), "%s block %zu: guard bytes overwritten", what, c->block);
    if (!c->in_place) {
        unsigned char *back = malloc(c->sb.len + 1);
        MT_CHECK(dbuf_read(&c->sb, back) && memcmp(back, c->in, c->sb.len) == 0,
                 "%s block %zu: send buffer or its guard bytes changed", what, c->block);
        free(back);
    }
    check_bytes(what, "MPI_BYTE", c->in_place ? "in place" : "", c->total, 1, c->got, c->want);
    ncases++;
    dbuf_free(&c->sb);
    dbuf_free(&c->rb);
    free(c->in);
    free(c->want);
    free(c->got);
}

void blocks_case(int alltoall, size_t block, int in_place, size_t off)
{
    bl_case_t c = {.alltoall = alltoall, .block = block, .in_place = in_place, .off = off};
    bl_prepare(&c);
    bl_call(&c, NULL);
    bl_check(&c);
}
