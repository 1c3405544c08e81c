/* The device executor on cudaMalloc buffers, checked bit for bit against plain host loops.
 *
 *   cuda_coll --probe [N]  no MPI: prints "SKIP: no CUDA device (<reason>)" and exits 77 where
 *                          there is no usable device (or fewer than N), else exits 0 (for the
 *                          test scripts)
 *   cuda_coll matrix       every datatype x op the host reduction covers, counts around the
 *                          one-shot limit and the workspace chunk edges (-1/0/+1 element), in place
 *                          and not, at odd byte offsets inside the allocation, guard bytes after
 *                          every receive buffer; allgather and alltoall likewise; a freed and
 *                          reallocated buffer; calls from a worker thread; an input still being
 *                          written on the legacy default stream when MPI_Allreduce is called; and,
 *                          where the underlying MPI takes device buffers (MPIX_Query_cuda_support),
 *                          ranks mixing host and device buffers and long double (both fall back)
 *   cuda_coll matrix --groups G   the same with the reference reduced within groups of G ranks
 *                          first (the hybrid cube mesh's order, run on a recorded DGX-1)
 *   cuda_coll quick        a few calls of each kind (for compute-sanitizer)
 *   cuda_coll rehome       (2 GPUs or more) a host-buffer call before the ranks choose their
 *                          devices, then device calls: they must run on the device all the same
 *   cuda_coll stall R      rank R sleeps before an allreduce: the others must end the job with
 *                          picoll's timeout error naming it
 *
 * Rank r uses device (local rank % device count): with more ranks than GPUs, several ranks share
 * one GPU through CUDA IPC. Every reference is the left-to-right reduction, in rank order, with
 * the C operations of picoll's host reduction, over every rank's input (each rank regenerates the
 * others'): the device must give exactly those bytes. MPIX_C_FLOAT16 (where the MPI defines it and
 * the compiler has _Float16) is reduced in the reference with _Float16 arithmetic, MPIX_BFLOAT16
 * (where defined) in float rounded to bfloat16 here: both are correctly rounded results, which the
 * device's float arithmetic rounded once to the half format must equal. Inputs avoid NaN (whose payload a GPU does
 * not propagate as the CPU does). The thresholds this test is run with (tests/cuda/
 * CTestTestfile.cmake.in): PICOLL_WORKSPACE_SIZE=128k (64 KiB buffers), one-shot up to 4 KiB. */
#include "mpitest.h"

#include <complex.h>
#include <cuda_runtime_api.h>
#include <dlfcn.h>
#include <math.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define GUARD 64
#define GUARD_BYTE 0xA5
#define ONESHOT_MAX 4096  /* PICOLL_NVLINK_ONESHOT_MAX of the tests */
#define SLOT 65536        /* PICOLL_WORKSPACE_SIZE / 2 */

#define CK(call)                                                                        \
    do {                                                                                \
        cudaError_t ck_ = (call);                                                       \
        if (ck_ != cudaSuccess) {                                                       \
            fprintf(stderr, "rank %d: %s: %s\n", mt_rank, #call, cudaGetErrorString(ck_)); \
            MPI_Abort(MPI_COMM_WORLD, 2);                                               \
        }                                                                               \
    } while (0)

typedef enum {
    K_INT, K_UINT, K_BOOL, K_BYTE, K_FLOAT, K_DOUBLE, K_LDOUBLE, K_CFLOAT, K_CDOUBLE, K_F16, K_BF16
} kind_t;

#if defined(MPIX_C_FLOAT16) && defined(__FLT16_MAX__)
#define HAVE_FLOAT16 1
#endif
typedef enum { SUM, PROD, MAX, MIN, LAND, LOR, LXOR, BAND, BOR, BXOR, NOPS } op_t;
static const char *const op_names[NOPS] = {"SUM", "PROD", "MAX", "MIN", "LAND",
                                           "LOR", "LXOR", "BAND", "BOR", "BXOR"};
static MPI_Op op_handle(op_t op)
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

typedef struct {
    const char *name;
    MPI_Datatype dt;
    kind_t kind;
    size_t size;
} type_t;

static type_t types[] = {
    {"MPI_INT8_T", MPI_INT8_T, K_INT, 1},        {"MPI_UINT8_T", MPI_UINT8_T, K_UINT, 1},
    {"MPI_INT16_T", MPI_INT16_T, K_INT, 2},      {"MPI_UINT16_T", MPI_UINT16_T, K_UINT, 2},
    {"MPI_INT32_T", MPI_INT32_T, K_INT, 4},      {"MPI_UINT32_T", MPI_UINT32_T, K_UINT, 4},
    {"MPI_INT64_T", MPI_INT64_T, K_INT, 8},      {"MPI_UINT64_T", MPI_UINT64_T, K_UINT, 8},
    {"MPI_C_BOOL", MPI_C_BOOL, K_BOOL, 1},       {"MPI_BYTE", MPI_BYTE, K_BYTE, 1},
    {"MPI_FLOAT", MPI_FLOAT, K_FLOAT, 4},        {"MPI_DOUBLE", MPI_DOUBLE, K_DOUBLE, 8},
    {"MPI_C_FLOAT_COMPLEX", MPI_C_FLOAT_COMPLEX, K_CFLOAT, 8},
    {"MPI_C_DOUBLE_COMPLEX", MPI_C_DOUBLE_COMPLEX, K_CDOUBLE, 16},
    /* after the others: the cases below name types by index */
#ifdef HAVE_FLOAT16
    {"MPIX_C_FLOAT16", MPIX_C_FLOAT16, K_F16, 2},
#endif
#ifdef MPIX_BFLOAT16
    {"MPIX_BFLOAT16", MPIX_BFLOAT16, K_BF16, 2},
#endif
};
#define NTYPES (sizeof(types) / sizeof(types[0]))

static int op_allowed(const type_t *t, op_t op)
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

/* ---------------------------------------------------------------- inputs and references */

static uint64_t seed_of(int t, int op, size_t count, int extra)
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

/* Element i of rank r's input. */
static void gen(const type_t *t, op_t op, uint64_t seed, int r, size_t i, void *p)
{
    uint64_t x = mt_rand(seed, (uint64_t)r, i);
    double f = (double)(int64_t)(x % 2000001 - 1000000) / 1024.0;
    switch (t->kind) {
    case K_INT:
    case K_UINT:
    case K_BYTE:
        if (op == LAND || op == LOR || op == LXOR) {
            x = (x & 3) == 0 ? 0 : (x >> 8); /* zeros often, nonzero values with zero low bytes */
        } else if (op == BAND) {
            x |= mt_hash(x);
        }
        memcpy(p, &x, t->size); /* little-endian: the low bytes */
        break;
    case K_BOOL:
        *(_Bool *)p = (x & 3) != 0;
        break;
    case K_FLOAT:
        *(float *)p = (float)(op == PROD ? 0.75 + (double)(x % 1000) / 2000.0 : f);
        break;
    case K_DOUBLE:
        *(double *)p = op == PROD ? 0.75 + (double)(x % 1000) / 2000.0 : f;
        break;
    case K_LDOUBLE:
        *(long double *)p = (long double)(int)(x % 201) - 100; /* exact in any order */
        break;
    case K_CFLOAT: {
        float re = (float)(op == PROD ? 0.75 + (double)(x % 1000) / 2000.0 : f);
        float im = (float)(op == PROD ? (double)((x >> 20) % 1000) / 2000.0 - 0.25 : f / 3.0);
        *(float _Complex *)p = CMPLXF(re, im);
        break;
    }
    case K_CDOUBLE: {
        double re = op == PROD ? 0.75 + (double)(x % 1000) / 2000.0 : f;
        double im = op == PROD ? (double)((x >> 20) % 1000) / 2000.0 - 0.25 : f / 3.0;
        *(double _Complex *)p = CMPLX(re, im);
        break;
    }
    case K_F16:
#ifdef HAVE_FLOAT16
        *(_Float16 *)p = (_Float16)(op == PROD ? 0.75 + (double)(x % 1000) / 2000.0 : f);
#endif
        break;
    case K_BF16: {
        uint16_t h = bf16_from_double(op == PROD ? 0.75 + (double)(x % 1000) / 2000.0 : f);
        memcpy(p, &h, 2);
        break;
    }
    }
}

#define INT_OP(T, W)                                                                     \
    do {                                                                                 \
        T x = *(T *)acc, y = *(const T *)in;                                             \
        T z;                                                                             \
        switch (op) {                                                                    \
        case SUM: z = (T)((W)x + (W)y); break;                                           \
        case PROD: z = (T)((W)x * (W)y); break;                                          \
        case MAX: z = x > y ? x : y; break;                                              \
        case MIN: z = x < y ? x : y; break;                                              \
        case LAND: z = (T)((x != 0) & (y != 0)); break;                                  \
        case LOR: z = (T)((x != 0) | (y != 0)); break;                                   \
        case LXOR: z = (T)((x != 0) ^ (y != 0)); break;                                  \
        case BAND: z = (T)(x & y); break;                                                \
        case BOR: z = (T)(x | y); break;                                                 \
        default: z = (T)(x ^ y); break;                                                  \
        }                                                                                \
        *(T *)acc = z;                                                                   \
    } while (0)

#define REAL_OP(T)                                                                       \
    do {                                                                                 \
        T x = *(T *)acc, y = *(const T *)in;                                             \
        *(T *)acc = op == SUM ? x + y : op == PROD ? x * y : op == MAX ? (x > y ? x : y) \
                                                            : (x < y ? x : y);           \
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
        uint16_t z = op == SUM ? bf16_from_double(x + y) : op == PROD ? bf16_from_double(x * y)
                   : op == MAX ? (x > y ? a : b) : (x < y ? a : b);
        memcpy(acc, &z, 2);
        break;
    }
    }
}

/* ---------------------------------------------------------------- device buffers */

/* A device allocation of len bytes at byte offset off, followed by GUARD guard bytes. */
typedef struct {
    char *alloc;
    char *p;
    size_t len, off;
} dbuf_t;

static void dbuf_alloc(dbuf_t *b, size_t len, size_t off)
{
    b->len = len;
    b->off = off;
    CK(cudaMalloc((void **)&b->alloc, len + off + GUARD));
    CK(cudaMemset(b->alloc, GUARD_BYTE, len + off + GUARD));
    b->p = b->alloc + off;
}

static void dbuf_free(dbuf_t *b)
{
    CK(cudaFree(b->alloc));
    b->alloc = b->p = NULL;
}

static int guard_intact(const dbuf_t *b)
{
    unsigned char g[GUARD];
    CK(cudaMemcpy(g, b->p + b->len, GUARD, cudaMemcpyDeviceToHost));
    for (int i = 0; i < GUARD; i++) {
        if (g[i] != GUARD_BYTE) {
            return 0;
        }
    }
    return 1;
}

/* ---------------------------------------------------------------- allreduce */

static unsigned long long ncases;
static int my_device;      /* local rank % device count */
static int host_rank = -1; /* mixed case: this rank passes host buffers */
static int groups;         /* --groups G: the reference's order (see reference) */

static void check_bytes(const char *what, const char *tname, const char *opname, size_t count,
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

/* Element i of the result: left to right over the ranks; with --groups G, left to right within
 * each group of G consecutive ranks, then over the groups' results (the hybrid cube mesh's order
 * with its quads 0-3 and 4-7). */
static void reference(const type_t *t, op_t op, uint64_t seed, size_t i, unsigned char *want)
{
    unsigned char elem[16], part[16];
    int g = groups > 0 ? groups : mt_size;
    for (int lo = 0; lo < mt_size; lo += g) {
        gen(t, op, seed, lo, i, part);
        for (int r = lo + 1; r < lo + g && r < mt_size; r++) {
            gen(t, op, seed, r, i, elem);
            combine(t, op, part, elem);
        }
        if (lo == 0) {
            memcpy(want, part, t->size);
        } else {
            combine(t, op, want, part);
        }
    }
}

/* One allreduce: in place or not, buffers at byte offset off. */
static void allreduce_case(int ti, const type_t *t, op_t op, size_t count, int in_place, size_t off)
{
    size_t bytes = count * t->size;
    uint64_t seed = seed_of(ti, op, count, (int)(off * 2 + (size_t)in_place));
    unsigned char *mine = malloc(bytes + 1), *want = malloc(bytes + 1), *got = malloc(bytes + 1);
    dbuf_t sb = {0}, rb = {0};
    int host = mt_rank == host_rank;

    for (size_t i = 0; i < count; i++) {
        gen(t, op, seed, mt_rank, i, mine + i * t->size);
        reference(t, op, seed, i, want + i * t->size);
    }
    if (host) {
        void *s = in_place ? MPI_IN_PLACE : mine;
        void *rcv = in_place ? (void *)mine : (void *)got;
        MPI_Allreduce(s, rcv, (int)count, t->dt, op_handle(op), MPI_COMM_WORLD);
        if (in_place) {
            memcpy(got, mine, bytes);
        }
    } else {
        dbuf_alloc(&rb, bytes, off);
        if (in_place) {
            CK(cudaMemcpy(rb.p, mine, bytes, cudaMemcpyHostToDevice));
        } else {
            dbuf_alloc(&sb, bytes, (off + 3) % 16);
            CK(cudaMemcpy(sb.p, mine, bytes, cudaMemcpyHostToDevice));
        }
        MPI_Allreduce(in_place ? MPI_IN_PLACE : sb.p, rb.p, (int)count, t->dt, op_handle(op),
                      MPI_COMM_WORLD);
        CK(cudaMemcpy(got, rb.p, bytes, cudaMemcpyDeviceToHost));
        MT_CHECK(guard_intact(&rb), "allreduce %s %s count %zu: guard bytes overwritten", t->name,
                 op_names[op], count);
        if (!in_place) {
            unsigned char *back = malloc(bytes + 1);
            CK(cudaMemcpy(back, sb.p, bytes, cudaMemcpyDeviceToHost));
            MT_CHECK(memcmp(back, mine, bytes) == 0, "allreduce %s %s: send buffer changed",
                     t->name, op_names[op]);
            free(back);
            dbuf_free(&sb);
        }
        dbuf_free(&rb);
    }
    if (t->kind == K_LDOUBLE) {
        /* x87 extended precision: 10 bytes of value, the rest padding that no one defines */
        for (size_t i = 0; i < count; i++) {
            memset(got + i * t->size + 10, 0, t->size - 10);
            memset(want + i * t->size + 10, 0, t->size - 10);
        }
    }
    check_bytes(in_place ? "allreduce in place" : "allreduce", t->name, op_names[op], count,
                t->size, got, want);
    ncases++;
    free(mine);
    free(want);
    free(got);
}

/* Counts around the limits, in elements of esize bytes. */
static size_t edge_counts(size_t esize, size_t *out)
{
    size_t n = 0;
    size_t edges[] = {ONESHOT_MAX, SLOT, 2 * SLOT};
    out[n++] = 1;
    out[n++] = 33;
    for (size_t e = 0; e < sizeof(edges) / sizeof(edges[0]); e++) {
        size_t c = edges[e] / esize;
        out[n++] = c - 1;
        out[n++] = c;
        out[n++] = c + 1;
    }
    out[n++] = 2 * SLOT / esize * 3 + 5;
    return n;
}

static void matrix_allreduce(void)
{
    size_t counts[16];
    for (size_t ti = 0; ti < NTYPES; ti++) {
        const type_t *t = &types[ti];
        size_t nc = edge_counts(t->size, counts);
        for (op_t op = 0; op < NOPS; op++) {
            if (!op_allowed(t, op)) {
                continue;
            }
            for (size_t c = 0; c < nc; c++) {
                /* every placement for the edges, a rotation of them elsewhere */
                int k = (int)(c + (size_t)op);
                allreduce_case((int)ti, t, op, counts[c], k & 1, (size_t)(k % 3 == 0 ? 0 : k % 3 == 1 ? 1 : 8));
            }
        }
    }
}

/* ---------------------------------------------------------------- allgather, alltoall */

static unsigned char block_byte(int from, int to, size_t i, uint64_t seed)
{
    return (unsigned char)mt_rand(seed, (uint64_t)from * 1000 + (uint64_t)to, i);
}

static void blocks_case(int alltoall, size_t block, int in_place, size_t off)
{
    size_t total = block * (size_t)mt_size;
    uint64_t seed = mt_rand(block, (uint64_t)alltoall, (uint64_t)in_place);
    unsigned char *in = malloc(total + 1), *want = malloc(total + 1), *got = malloc(total + 1);
    dbuf_t sb = {0}, rb = {0};

    for (int p = 0; p < mt_size; p++) {
        for (size_t i = 0; i < block; i++) {
            /* alltoall: what I send to p, what p sends me; allgather: my block, p's block */
            in[(size_t)p * block + i] = alltoall ? block_byte(mt_rank, p, i, seed)
                                                 : block_byte(mt_rank, 0, i, seed);
            want[(size_t)p * block + i] = alltoall ? block_byte(p, mt_rank, i, seed)
                                                   : block_byte(p, 0, i, seed);
        }
    }
    dbuf_alloc(&rb, total, off);
    if (in_place) {
        if (alltoall) {
            CK(cudaMemcpy(rb.p, in, total, cudaMemcpyHostToDevice));
        } else {
            CK(cudaMemcpy(rb.p + (size_t)mt_rank * block, in, block, cudaMemcpyHostToDevice));
        }
    } else {
        dbuf_alloc(&sb, alltoall ? total : block, (off + 5) % 16);
        CK(cudaMemcpy(sb.p, in, sb.len, cudaMemcpyHostToDevice));
    }
    const void *s = in_place ? MPI_IN_PLACE : sb.p;
    if (alltoall) {
        MPI_Alltoall(s, (int)block, MPI_BYTE, rb.p, (int)block, MPI_BYTE, MPI_COMM_WORLD);
    } else {
        MPI_Allgather(s, (int)block, MPI_BYTE, rb.p, (int)block, MPI_BYTE, MPI_COMM_WORLD);
    }
    CK(cudaMemcpy(got, rb.p, total, cudaMemcpyDeviceToHost));
    MT_CHECK(guard_intact(&rb), "%s block %zu: guard bytes overwritten",
             alltoall ? "alltoall" : "allgather", block);
    check_bytes(alltoall ? "alltoall" : "allgather", "MPI_BYTE", in_place ? "in place" : "",
                total, 1, got, want);
    if (!in_place) {
        dbuf_free(&sb);
    }
    dbuf_free(&rb);
    ncases++;
    free(in);
    free(want);
    free(got);
}

static void matrix_blocks(void)
{
    size_t piece = SLOT / (size_t)mt_size / 16 * 16; /* alltoall chunk per peer */
    size_t blocks[] = {1, 7, 4096, SLOT - 1, SLOT, SLOT + 1, piece - 1, piece, piece + 1,
                       2 * SLOT + 3};
    for (size_t b = 0; b < sizeof(blocks) / sizeof(blocks[0]); b++) {
        for (int a = 0; a < 2; a++) {
            blocks_case(a, blocks[b], (int)(b & 1), b % 3 == 0 ? 0 : 1 + b);
        }
    }
}

/* ---------------------------------------------------------------- special cases */

/* The same buffer freed and allocated again (most likely at the same address) between calls. */
static void realloc_case(void)
{
    for (int k = 0; k < 3; k++) {
        allreduce_case(4, &types[4], SUM, 1000 + (size_t)k, 0, 0);
        allreduce_case(4, &types[4], SUM, 1000 + (size_t)k, 1, 0);
    }
}

static void *thread_main(void *arg)
{
    (void)arg;
    CK(cudaSetDevice(my_device)); /* a fresh thread starts on device 0 */
    for (int k = 0; k < 4; k++) {
        allreduce_case(11, &types[11], SUM, 3000 + (size_t)k * 1000, k & 1, (size_t)k);
    }
    return NULL;
}

static void thread_case(void)
{
    pthread_t th;
    pthread_create(&th, NULL, thread_main, NULL);
    pthread_join(th, NULL);
}

static void CUDART_CB slow_host_fn(void *arg)
{
    (void)arg;
    usleep(300000);
}

/* The input is written on the legacy default stream, behind 0.3 s of other work, and
 * MPI_Allreduce is called without synchronising: picoll must wait for it. */
static void default_stream_case(void)
{
    size_t count = 20000;
    int32_t *host_in, *got = malloc(count * sizeof(int32_t));
    dbuf_t sb, rb;

    CK(cudaMallocHost((void **)&host_in, count * sizeof(int32_t)));
    for (size_t i = 0; i < count; i++) {
        host_in[i] = (int32_t)(i * 7 + (size_t)mt_rank);
    }
    dbuf_alloc(&sb, count * sizeof(int32_t), 0);
    dbuf_alloc(&rb, count * sizeof(int32_t), 0);
    CK(cudaMemset(sb.p, 0, count * sizeof(int32_t)));
    CK(cudaDeviceSynchronize());
    CK(cudaLaunchHostFunc(0, slow_host_fn, NULL));
    CK(cudaMemcpyAsync(sb.p, host_in, count * sizeof(int32_t), cudaMemcpyHostToDevice, 0));
    MPI_Allreduce(sb.p, rb.p, (int)count, MPI_INT32_T, MPI_SUM, MPI_COMM_WORLD);
    CK(cudaMemcpy(got, rb.p, count * sizeof(int32_t), cudaMemcpyDeviceToHost));
    for (size_t i = 0; i < count; i++) {
        int32_t want = 0;
        for (int r = 0; r < mt_size; r++) {
            want += (int32_t)(i * 7 + (size_t)r);
        }
        if (got[i] != want) {
            mt_fail("default stream: element %zu is %d, expected %d (input not waited for)", i,
                    got[i], want);
            break;
        }
    }
    dbuf_free(&sb);
    dbuf_free(&rb);
    cudaFreeHost(host_in);
    free(got);
    ncases++;
}

/* Whether the underlying MPI (or picoll's staging below it) accepts device buffers in a call
 * picoll hands over: only then may ranks mix memory kinds or pass long double on the device. */
static int fallback_takes_device_buffers(void)
{
    int (*query)(void) = (int (*)(void))dlsym(RTLD_DEFAULT, "MPIX_Query_cuda_support");
    return query != NULL && query();
}

static void fallback_cases(void)
{
    static const type_t ld = {"MPI_LONG_DOUBLE", MPI_LONG_DOUBLE, K_LDOUBLE, sizeof(long double)};
    if (!fallback_takes_device_buffers()) {
        if (mt_rank == 0) {
            printf("note: mixed host/device and long double cases not run: the underlying MPI "
                   "does not take device buffers (MPIX_Query_cuda_support)\n");
        }
        return;
    }
    allreduce_case(99, &ld, SUM, 777, 0, 0);
    host_rank = mt_size - 1;
    for (size_t ti = 0; ti < NTYPES; ti += 5) {
        if (types[ti].kind == K_F16 || types[ti].kind == K_BF16) {
            continue; /* picoll hands these to the MPI with a host user op: not on device buffers */
        }
        allreduce_case((int)ti, &types[ti], op_allowed(&types[ti], SUM) ? SUM : BXOR, 5000, 0, 0);
    }
    host_rank = -1;
}

/* ---------------------------------------------------------------- main */

static int probe(char *why, size_t len)
{
    int n = 0;
    cudaError_t err = cudaGetDeviceCount(&n);
    if (err != cudaSuccess) {
        snprintf(why, len, "cudaGetDeviceCount: %s", cudaGetErrorString(err));
        return 0;
    }
    if (n < 1) {
        snprintf(why, len, "cudaGetDeviceCount found 0 devices");
        return 0;
    }
    return n;
}

int main(int argc, char **argv)
{
    char why[256] = "";
    int ndev, provided, all_have;
    const char *mode = argc > 1 ? argv[1] : "matrix";

    if (strcmp(mode, "--probe") == 0) {
        int need = argc > 2 ? atoi(argv[2]) : 1, found = probe(why, sizeof(why));
        if (!found) {
            printf("SKIP: no CUDA device (%s)\n", why);
            return MT_SKIP;
        }
        if (found < need) {
            printf("SKIP: needs %d GPUs (found %d)\n", need, found);
            return MT_SKIP;
        }
        return 0;
    }
    for (int a = 2; a + 1 < argc; a++) {
        if (strcmp(argv[a], "--groups") == 0) {
            groups = atoi(argv[++a]);
        }
    }
    MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
    mt_load_picoll(1);
    ndev = probe(why, sizeof(why));
    PMPI_Allreduce(&(int){ndev > 0}, &all_have, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
    if (!all_have) {
        char msg[300];
        snprintf(msg, sizeof(msg), "no CUDA device (%s)", why[0] ? why : "on another rank");
        if (mt_rank == 0) {
            printf("SKIP: %s\n", msg);
        }
        MPI_Finalize();
        return MT_SKIP;
    }
    MPI_Comm node;
    int local;
    MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, mt_rank, MPI_INFO_NULL, &node);
    MPI_Comm_rank(node, &local);
    MPI_Comm_free(&node);
    my_device = local % ndev;
    if (strcmp(mode, "rehome") == 0) {
        /* the communicator's first collective runs before the ranks choose their devices: the
         * workspaces are made on device 0; the first call on device buffers moves them */
        int one = 1, sum = 0;
        if (ndev < 2) {
            mt_fail("rehome needs 2 GPUs (found %d): run it through gpu_test.sh --gpus 2", ndev);
            return mt_finish("cuda_coll rehome");
        }
        MPI_Allreduce(&one, &sum, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
        MT_CHECK(sum == mt_size, "host allreduce: %d", sum);
        CK(cudaSetDevice(my_device));
        for (int k = 0; k < 4; k++) {
            allreduce_case(4, &types[4], SUM, 1000 + (size_t)k, k & 1, 0);
        }
        return mt_finish("cuda_coll rehome");
    }
    CK(cudaSetDevice(my_device));

    if (strcmp(mode, "stall") == 0) {
        int victim = argc > 2 ? atoi(argv[2]) : 1;
        dbuf_t b;
        dbuf_alloc(&b, 4096, 0);
        MPI_Allreduce(MPI_IN_PLACE, b.p, 1024, MPI_INT, MPI_SUM, MPI_COMM_WORLD); /* set-up */
        if (mt_rank == victim) {
            sleep(30);
        }
        MPI_Allreduce(MPI_IN_PLACE, b.p, 1024, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
        dbuf_free(&b);
        return mt_finish("cuda_coll stall");
    }
    if (strcmp(mode, "quick") == 0) {
        /* one call of each kind, for the slow sanitizer runs of tests/cuda/run-gpu.sh */
        allreduce_case(10, &types[10], SUM, 33, 0, 1);
        allreduce_case(11, &types[11], PROD, 2 * SLOT / 8 + 3, 1, 0);
        allreduce_case(0, &types[0], BXOR, SLOT + 5, 0, 8);
        blocks_case(0, 4099, 0, 3);
        blocks_case(1, 4099, 1, 0);
        return mt_finish("cuda_coll quick");
    }
    matrix_allreduce();
    matrix_blocks();
    realloc_case();
    thread_case();
    default_stream_case();
    fallback_cases();
    if (mt_rank == 0) {
        printf("cuda_coll: %llu cases on %d ranks, %d device(s)\n", ncases, mt_size, ndev);
    }
    return mt_finish("cuda_coll matrix");
}
