/* coll_shuffle [--calls N] [--seed S] [--expect-picoll]: N collectives on host buffers drawn
 * from one seed (S, default 1) that every rank shares, so that all make the same calls in the
 * same order: allreduce (twice as often as the others), allgather, alltoall, bcast, reduce,
 * reduce_scatter_block, reduce_scatter, allgatherv, alltoallv, gather, scatter, scan, exscan and
 * barrier, of any size from nothing to about 256 KiB (log-uniform, so that every threshold of
 * the host paths is crossed both ways), in place or not where MPI allows it, with a random root,
 * each on one of five communicators: the world, a dup of it, the world in reversed rank order,
 * its halves and its even and odd ranks (split by color, so that a communicator's ranks are not
 * a node's consecutive ones). Calls of every size and path follow each other in no fixed order
 * and calls of different communicators interleave, where the matrices run each communicator's
 * calls grouped and sorted. --threads T (MPI_THREAD_MULTIPLE): T threads at once, each with
 * communicators of its own (the first thread's world is MPI_COMM_WORLD, the others' dups of it)
 * and a sequence of its own (seed S + 7919 t). --churn N: before a call, one time in N (drawn), one
 * of the communicators but the world is freed and made again (from the thread's world), so that
 * picoll's contexts and workspaces are made and destroyed among the calls.
 *
 * Every result is checked bit for bit against a plain loop over every rank's input (each rank
 * regenerates the others' inputs), with inputs whose reduction is exact in any order (small
 * integers for sums of floating types, powers of two for their products, full-width bits for the
 * bitwise ops), so the MPI's own order (calls picoll hands over) gives the same bits; the guard
 * bytes after every receive buffer must be untouched and send buffers unchanged. With
 * --expect-picoll, picoll must be present and, under PICOLL_HOST=on, every allreduce, allgather
 * and alltoall of some bytes on a communicator of more than one rank must run on picoll's own
 * path (picoll_last_algorithm(): not "fallback"). */
#include "mpitest.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define GUARD 32
#define GUARD_BYTE 0xA5
#define MAXR 64

enum { C_WORLD, C_DUP, C_REV, C_HALF, C_PARITY, NCOMMS };
static const char *const comm_names[NCOMMS] = {"world", "dup", "reversed", "half", "parity"};

enum { OP_SUM, OP_PROD, OP_MAX, OP_MIN, OP_BAND, OP_BOR, OP_BXOR, NOPS };
static const char *const op_names[NOPS] = {"SUM", "PROD", "MAX", "MIN", "BAND", "BOR", "BXOR"};
static MPI_Op op_handle(int op)
{
    static const MPI_Op ops[NOPS] = {MPI_SUM,  MPI_PROD, MPI_MAX, MPI_MIN,
                                     MPI_BAND, MPI_BOR,  MPI_BXOR};
    return ops[op];
}

/* The element types and the ops each takes here: those whose results are exact in any order
 * with the inputs below, and that no MPI of the test command gets wrong (no MIN/MAX of unsigned
 * types: MPICH 4.0 compares them as signed). */
typedef enum { K_I32, K_U8, K_I64, K_F32, K_F64 } kind_t;
typedef struct {
    const char *name;
    MPI_Datatype dt;
    kind_t kind;
    size_t size;
    unsigned ops; /* bit op */
} type_t;
#define B(o) (1u << (o))
static const type_t types[] = {
    {"MPI_INT", MPI_INT, K_I32, 4,
     B(OP_SUM) | B(OP_MAX) | B(OP_MIN) | B(OP_BAND) | B(OP_BOR) | B(OP_BXOR)},
    {"MPI_UNSIGNED_CHAR", MPI_UNSIGNED_CHAR, K_U8, 1,
     B(OP_SUM) | B(OP_BAND) | B(OP_BOR) | B(OP_BXOR)},
    {"MPI_LONG_LONG", MPI_LONG_LONG, K_I64, 8, B(OP_SUM) | B(OP_MAX) | B(OP_MIN)},
    {"MPI_FLOAT", MPI_FLOAT, K_F32, 4, B(OP_SUM) | B(OP_PROD) | B(OP_MAX) | B(OP_MIN)},
    {"MPI_DOUBLE", MPI_DOUBLE, K_F64, 8, B(OP_SUM) | B(OP_PROD) | B(OP_MAX) | B(OP_MIN)},
};
#define NTYPES (sizeof(types) / sizeof(types[0]))

/* Element i of rank r's input for op (seed: the call's). */
static void gen(const type_t *t, int op, uint64_t seed, int r, size_t i, void *out)
{
    uint64_t x = mt_rand(seed, (uint64_t)r, i);
    int64_t small = (int64_t)(x % 2001) - 1000; /* sums of 64 ranks stay exact and in range */
    int bits = op == OP_BAND || op == OP_BOR || op == OP_BXOR;
    switch (t->kind) {
    case K_I32: *(int32_t *)out = bits ? (int32_t)(uint32_t)x : (int32_t)small; break;
    case K_U8: *(uint8_t *)out = (uint8_t)x; break; /* sums wrap: defined for unsigned */
    case K_I64: *(int64_t *)out = op == OP_SUM ? small * 1000003 : (int64_t)x; break;
    case K_F32:
    case K_F64: {
        /* products: powers of two (and -1); else small integers */
        static const double pow2[] = {1.0, 2.0, 0.5, -1.0, 4.0, 0.25};
        double v = op == OP_PROD ? pow2[x % 6] : (double)(small % 17);
        if (t->kind == K_F32) {
            *(float *)out = (float)v;
        } else {
            *(double *)out = v;
        }
        break;
    }
    }
}

/* acc = acc op v, in t's arithmetic */
static void combine(const type_t *t, int op, void *acc, const void *v)
{
#define APPLY(T)                                                                                   \
    do {                                                                                           \
        T a = *(T *)acc, b = *(const T *)v;                                                        \
        switch (op) {                                                                              \
        case OP_SUM: a = (T)(a + b); break;                                                        \
        case OP_PROD: a = (T)(a * b); break;                                                       \
        case OP_MAX: a = a > b ? a : b; break;                                                     \
        case OP_MIN: a = a < b ? a : b; break;                                                     \
        default: break;                                                                            \
        }                                                                                          \
        *(T *)acc = a;                                                                             \
    } while (0)
#define BITS(T)                                                                                    \
    do {                                                                                           \
        T a = *(T *)acc, b = *(const T *)v;                                                        \
        a = (T)(op == OP_BAND ? a & b : op == OP_BOR ? a | b : op == OP_BXOR ? a ^ b : a);         \
        *(T *)acc = a;                                                                             \
    } while (0)
    switch (t->kind) {
    case K_I32:
        if (op >= OP_BAND) {
            BITS(uint32_t);
        } else {
            APPLY(int32_t);
        }
        break;
    case K_U8:
        if (op >= OP_BAND) {
            BITS(uint8_t);
        } else {
            APPLY(uint8_t);
        }
        break;
    case K_I64: APPLY(int64_t); break;
    case K_F32: APPLY(float); break;
    case K_F64: APPLY(double); break;
    }
#undef APPLY
#undef BITS
}

/* Element i of the reduction over ranks lo..hi-1 (of the communicator's ranks) */
static void reduce_ref(const type_t *t, int op, uint64_t seed, int lo, int hi, size_t i, void *out)
{
    unsigned char v[16];
    gen(t, op, seed, lo, i, out);
    for (int r = lo + 1; r < hi; r++) {
        gen(t, op, seed, r, i, v);
        combine(t, op, out, v);
    }
}

/* A byte of block (from, to) for the data movers */
static unsigned char byte_of(uint64_t seed, int from, int to, size_t i)
{
    return (unsigned char)mt_rand(seed, (uint64_t)(from * MAXR + to), i);
}

/* ---------------------------------------------------------------- buffers */

typedef struct {
    unsigned char *alloc, *p;
    size_t len;
} buf_t;

static void buf_make(buf_t *b, size_t len, size_t off)
{
    b->alloc = malloc(off + len + GUARD);
    memset(b->alloc, GUARD_BYTE, off + len + GUARD);
    b->p = b->alloc + off;
    b->len = len;
}

static int buf_guard_ok(const buf_t *b)
{
    for (size_t i = 0; i < GUARD; i++) {
        if (b->p[b->len + i] != GUARD_BYTE) {
            return 0;
        }
    }
    return 1;
}

/* the calling thread's call (--threads: each thread draws its own) */
static _Thread_local const char *call_name;
static _Thread_local long call_no;
static _Thread_local int comm_rank, comm_size;

static void check(const unsigned char *got, const unsigned char *want, size_t n, const char *what)
{
    for (size_t i = 0; i < n; i++) {
        if (got[i] != want[i]) {
            mt_fail("%s (call %ld): %s byte %zu of %zu is %02x, expected %02x", call_name, call_no,
                    what, i, n, got[i], want[i]);
            return;
        }
    }
}

static void check_guard(const buf_t *b, const char *what)
{
    MT_CHECK(buf_guard_ok(b), "%s (call %ld): %s guard bytes overwritten", call_name, call_no,
             what);
}

static void check_rc(int rc)
{
    MT_CHECK(rc == MPI_SUCCESS, "%s (call %ld): MPI error %d", call_name, call_no, rc);
}

static int expect_path;

static void check_path(size_t bytes)
{
    if (!expect_path || comm_size < 2 || bytes == 0 || mt_picoll.last_algorithm == NULL) {
        return;
    }
    const char *alg = mt_picoll.last_algorithm();
    MT_CHECK(alg != NULL && strcmp(alg, "fallback") != 0,
             "%s (call %ld, %zu bytes): path %s, expected one of picoll's", call_name, call_no,
             bytes, alg ? alg : "(none)");
}

/* ---------------------------------------------------------------- the calls */

#define DRAW(d) mt_rand(seed, (uint64_t)call_no, (uint64_t)(d))

/* a count of elements of esize bytes, log-uniform up to about 256 KiB (0 one time in 16) */
static size_t draw_count(uint64_t seed, int d, size_t esize)
{
    if (DRAW(d) % 16 == 0) {
        return 0;
    }
    unsigned e = (unsigned)(DRAW(d + 1) % 18);
    double bytes = (double)(1ull << e) * (1.0 + (double)(DRAW(d + 2) % 1000) / 1000.0);
    size_t c = (size_t)bytes / esize;
    return c == 0 ? 1 : c;
}

static const type_t *draw_type_op(uint64_t seed, int *op)
{
    const type_t *t = &types[DRAW(10) % NTYPES];
    int o = (int)(DRAW(11) % NOPS);
    for (int d = 12; !(t->ops & B(o)); d++) {
        o = (int)(DRAW(d) % NOPS);
    }
    *op = o;
    return t;
}

static void do_allreduce(MPI_Comm comm, uint64_t seed, size_t off, int in_place)
{
    int op;
    const type_t *t = draw_type_op(seed, &op);
    size_t n = draw_count(seed, 20, t->size), es = t->size, bytes = n * es;
    uint64_t s = DRAW(30);
    unsigned char *in = malloc(bytes + 1), *want = malloc(bytes + 1);
    for (size_t i = 0; i < n; i++) {
        gen(t, op, s, comm_rank, i, in + i * es);
        reduce_ref(t, op, s, 0, comm_size, i, want + i * es);
    }
    buf_t sb = {0}, rb;
    buf_make(&rb, bytes, off);
    if (in_place) {
        memcpy(rb.p, in, bytes);
    } else {
        buf_make(&sb, bytes, (off + 3) % 16);
        memcpy(sb.p, in, bytes);
    }
    call_name = "MPI_Allreduce";
    check_rc(
        MPI_Allreduce(in_place ? MPI_IN_PLACE : sb.p, rb.p, (int)n, t->dt, op_handle(op), comm));
    check_path(bytes);
    char what[96];
    snprintf(what, sizeof(what), "%s %s count %zu%s", t->name, op_names[op], n,
             in_place ? " in place" : "");
    check(rb.p, want, bytes, what);
    check_guard(&rb, what);
    if (!in_place) {
        check(sb.p, in, bytes, "send buffer");
    }
    free(sb.alloc);
    free(rb.alloc);
    free(in);
    free(want);
}

/* allgather (alltoall 0) or alltoall (1) of blocks of n elements of dt (esize bytes) */
static void do_blocks(MPI_Comm comm, uint64_t seed, size_t off, int in_place, int alltoall)
{
    MPI_Datatype dts[] = {MPI_BYTE, MPI_INT, MPI_DOUBLE};
    size_t sizes[] = {1, 4, 8}, k = DRAW(10) % 3, es = sizes[k];
    size_t n = draw_count(seed, 20, es * (size_t)comm_size), block = n * es;
    size_t total = block * (size_t)comm_size;
    uint64_t s = DRAW(30);
    unsigned char *in = malloc(total + 1), *want = malloc(total + 1);
    for (int r = 0; r < comm_size; r++) {
        for (size_t i = 0; i < block; i++) {
            in[(size_t)r * block + i] = byte_of(s, comm_rank, alltoall ? r : 0, i);
            want[(size_t)r * block + i] = byte_of(s, r, alltoall ? comm_rank : 0, i);
        }
    }
    buf_t sb = {0}, rb;
    buf_make(&rb, total, off);
    if (in_place) {
        if (alltoall) {
            memcpy(rb.p, in, total);
        } else {
            memcpy(rb.p + (size_t)comm_rank * block, in, block);
        }
    } else {
        buf_make(&sb, alltoall ? total : block, (off + 5) % 16);
        memcpy(sb.p, in, sb.len);
    }
    call_name = alltoall ? "MPI_Alltoall" : "MPI_Allgather";
    const void *send = in_place ? MPI_IN_PLACE : sb.p;
    check_rc(alltoall ? MPI_Alltoall(send, (int)n, dts[k], rb.p, (int)n, dts[k], comm)
                      : MPI_Allgather(send, (int)n, dts[k], rb.p, (int)n, dts[k], comm));
    check_path(total);
    char what[64];
    snprintf(what, sizeof(what), "block %zu bytes%s", block, in_place ? " in place" : "");
    check(rb.p, want, total, what);
    check_guard(&rb, what);
    if (!in_place) {
        check(sb.p, in, sb.len, "send buffer");
    }
    free(sb.alloc);
    free(rb.alloc);
    free(in);
    free(want);
}

static void do_bcast(MPI_Comm comm, uint64_t seed, size_t off, int root)
{
    size_t n = draw_count(seed, 20, 1);
    uint64_t s = DRAW(30);
    unsigned char *want = malloc(n + 1);
    for (size_t i = 0; i < n; i++) {
        want[i] = byte_of(s, root, 0, i);
    }
    buf_t b;
    buf_make(&b, n, off);
    if (comm_rank == root) {
        memcpy(b.p, want, n);
    }
    call_name = "MPI_Bcast";
    check_rc(MPI_Bcast(b.p, (int)n, MPI_BYTE, root, comm));
    check(b.p, want, n, "data");
    check_guard(&b, "buffer");
    free(b.alloc);
    free(want);
}

/* reduce (kind 0), reduce_scatter_block (1), reduce_scatter of uneven pieces (2), scan (3),
 * exscan (4) */
static void do_reduction(MPI_Comm comm, uint64_t seed, size_t off, int in_place, int root, int kind)
{
    int op;
    const type_t *t = draw_type_op(seed, &op);
    size_t es = t->size, piece = draw_count(seed, 20, es * (size_t)comm_size), counts[MAXR],
           total = 0, at = 0;
    int icounts[MAXR];
    for (int r = 0; r < comm_size; r++) {
        counts[r] = kind == 2 ? DRAW(40 + r) % (piece + 2) : piece;
        icounts[r] = (int)counts[r];
        at += r < comm_rank ? counts[r] : 0;
        total += counts[r];
    }
    if (kind == 0 || kind >= 3) {
        total = piece; /* reduce, scans: one vector */
        at = 0;
    }
    size_t nout = kind == 1 || kind == 2 ? counts[comm_rank] : total;
    uint64_t s = DRAW(30);
    unsigned char *in = malloc(total * es + 1), *want = malloc(nout * es + 1);
    for (size_t i = 0; i < total; i++) {
        gen(t, op, s, comm_rank, i, in + i * es);
    }
    /* scan: ranks 0..me; exscan: 0..me-1 (rank 0's result undefined: not checked) */
    int lo = 0, hi = kind == 3 ? comm_rank + 1 : kind == 4 ? comm_rank : comm_size;
    int checked = !(kind == 0 && comm_rank != root) && hi > lo;
    for (size_t i = 0; checked && i < nout; i++) {
        reduce_ref(t, op, s, lo, hi, at + i, want + i * es);
    }
    /* in place: reduce at its root, reduce-scatters, scan (MPI allows none for exscan's rank 0
     * alone: every rank or none, so exscan never) */
    int ip = in_place && kind != 4 && (kind != 0 || comm_rank == root) &&
             !(kind == 0 && mt_reduce_in_place_broken(root, total * es));
    buf_t sb = {0}, rb;
    size_t rlen = ip && (kind == 1 || kind == 2) ? total * es : nout * es;
    buf_make(&rb, rlen, off);
    if (ip) {
        memcpy(rb.p, in, kind == 1 || kind == 2 ? total * es : nout * es);
    } else {
        buf_make(&sb, total * es, (off + 3) % 16);
        memcpy(sb.p, in, total * es);
    }
    const void *send = ip ? MPI_IN_PLACE : sb.p; /* a reduce's leaves: always their buffer */
    MPI_Op o = op_handle(op);
    switch (kind) {
    case 0:
        call_name = "MPI_Reduce";
        check_rc(MPI_Reduce(send, rb.p, (int)total, t->dt, o, root, comm));
        break;
    case 1:
        call_name = "MPI_Reduce_scatter_block";
        check_rc(MPI_Reduce_scatter_block(send, rb.p, (int)piece, t->dt, o, comm));
        break;
    case 2:
        call_name = "MPI_Reduce_scatter";
        check_rc(MPI_Reduce_scatter(send, rb.p, icounts, t->dt, o, comm));
        break;
    case 3:
        call_name = "MPI_Scan";
        check_rc(MPI_Scan(send, rb.p, (int)total, t->dt, o, comm));
        break;
    default:
        call_name = "MPI_Exscan";
        check_rc(MPI_Exscan(send, rb.p, (int)total, t->dt, o, comm));
        break;
    }
    char what[96];
    snprintf(what, sizeof(what), "%s %s count %zu%s root %d", t->name, op_names[op], nout,
             ip ? " in place" : "", root);
    if (checked) {
        check(rb.p, want, nout * es, what);
    }
    check_guard(&rb, what);
    if (!ip && sb.p != NULL) {
        check(sb.p, in, total * es, "send buffer");
    }
    free(sb.alloc);
    free(rb.alloc);
    free(in);
    free(want);
}

/* allgatherv (0) or alltoallv (1) of MPI_INT pieces of random sizes (some empty), the received
 * pieces in reverse rank order with gaps that must keep their bytes */
static void do_vector(MPI_Comm comm, uint64_t seed, size_t off, int alltoall)
{
    size_t base = draw_count(seed, 20, 4 * (size_t)comm_size) + 1;
    int scounts[MAXR], sdispls[MAXR], rcounts[MAXR], rdispls[MAXR];
    size_t stotal = 0, rtotal = 0;
    uint64_t s = DRAW(30);
    /* piece from rank f to rank t: (f, t) drawn; allgatherv: (f, 0) */
    for (int k = comm_size - 1; k >= 0; k--) {
        int to = alltoall ? k : 0;
        scounts[k] = (int)(mt_rand(s, (uint64_t)(comm_rank * MAXR + to), 1) % (base + 1));
        sdispls[k] = (int)stotal;
        stotal += alltoall ? (size_t)scounts[k] + 1 : 0;
        rcounts[k] =
            (int)(mt_rand(s, (uint64_t)(k * MAXR + (alltoall ? comm_rank : 0)), 1) % (base + 1));
        rdispls[k] = (int)rtotal;
        rtotal += (size_t)rcounts[k] + 2;
    }
    if (!alltoall) {
        stotal = (size_t)scounts[0];
    }
    buf_t sb, rb;
    buf_make(&sb, stotal * 4, (off + 3) % 16);
    buf_make(&rb, rtotal * 4, off);
    unsigned char *want = malloc(rtotal * 4 + 1);
    for (size_t i = 0; i < rtotal * 4; i++) {
        want[i] = rb.p[i] = (unsigned char)(0x11 + i % 7); /* the gaps' bytes */
    }
    for (int k = 0; k < comm_size; k++) {
        int to = alltoall ? k : 0;
        size_t at = alltoall ? (size_t)sdispls[k] * 4 : 0;
        for (size_t i = 0; i < (size_t)scounts[alltoall ? k : 0] * 4 && (alltoall || k == 0); i++) {
            sb.p[at + i] = byte_of(s, comm_rank, to, i);
        }
        for (size_t i = 0; i < (size_t)rcounts[k] * 4; i++) {
            want[(size_t)rdispls[k] * 4 + i] = byte_of(s, k, alltoall ? comm_rank : 0, i);
        }
    }
    unsigned char *sent = malloc(stotal * 4 + 1);
    memcpy(sent, sb.p, stotal * 4);
    if (alltoall) {
        call_name = "MPI_Alltoallv";
        check_rc(
            MPI_Alltoallv(sb.p, scounts, sdispls, MPI_INT, rb.p, rcounts, rdispls, MPI_INT, comm));
    } else {
        call_name = "MPI_Allgatherv";
        check_rc(MPI_Allgatherv(sb.p, scounts[0], MPI_INT, rb.p, rcounts, rdispls, MPI_INT, comm));
    }
    check(rb.p, want, rtotal * 4, "received pieces and gaps");
    check_guard(&rb, "receive buffer");
    check(sb.p, sent, stotal * 4, "send buffer");
    free(sb.alloc);
    free(rb.alloc);
    free(want);
    free(sent);
}

/* gather (0) or scatter (1) of blocks of bytes at root */
static void do_rooted(MPI_Comm comm, uint64_t seed, size_t off, int in_place, int root, int scatter)
{
    size_t block = draw_count(seed, 20, (size_t)comm_size), total = block * (size_t)comm_size;
    uint64_t s = DRAW(30);
    int at_root = comm_rank == root, ip = in_place && at_root;
    buf_t big, small;
    buf_make(&big, at_root ? total : 0, off);
    buf_make(&small, block, (off + 5) % 16);
    unsigned char *want = malloc(total + 1);
    for (int r = 0; r < comm_size; r++) {
        for (size_t i = 0; i < block; i++) {
            want[(size_t)r * block + i] = byte_of(s, scatter ? root : r, scatter ? r : root, i);
        }
    }
    if (scatter) {
        if (at_root) {
            memcpy(big.p, want, total);
        }
        call_name = "MPI_Scatter";
        check_rc(MPI_Scatter(big.p, (int)block, MPI_BYTE, ip ? MPI_IN_PLACE : small.p, (int)block,
                             MPI_BYTE, root, comm));
        if (!ip) {
            check(small.p, want + (size_t)comm_rank * block, block, "scattered block");
        }
        if (at_root) {
            check(big.p, want, total, "root's send buffer");
        }
    } else {
        memcpy(small.p, want + (size_t)comm_rank * block, block);
        if (ip) {
            memcpy(big.p + (size_t)root * block, small.p, block);
        }
        call_name = "MPI_Gather";
        check_rc(MPI_Gather(ip ? MPI_IN_PLACE : small.p, (int)block, MPI_BYTE, big.p, (int)block,
                            MPI_BYTE, root, comm));
        if (at_root) {
            check(big.p, want, total, "gathered blocks");
        }
    }
    check_guard(&big, "root's buffer");
    check_guard(&small, "block buffer");
    free(big.alloc);
    free(small.alloc);
    free(want);
}

/* One thread's sequence: calls calls drawn from seed on its communicators comm[] */
typedef struct {
    int index;
    uint64_t seed;
    long calls;
    MPI_Comm comm[NCOMMS];
    long made[NCOMMS], kinds[15], churn, remade;
    pthread_t thread;
} seq_t;

/* Communicator w (not the world) made from world: its dup, reversed, halves, parity. */
static void comm_make(MPI_Comm world, int w, MPI_Comm *c)
{
    int r, n;
    MPI_Comm_rank(world, &r);
    MPI_Comm_size(world, &n);
    switch (w) {
    case C_DUP: MPI_Comm_dup(world, c); break;
    case C_REV: MPI_Comm_split(world, 0, n - 1 - r, c); break;
    case C_HALF: MPI_Comm_split(world, r < n / 2, r, c); break;
    default: MPI_Comm_split(world, r % 2, r, c); break;
    }
}

static void *sequence(void *arg)
{
    seq_t *q = arg;
    uint64_t seed = q->seed;
    for (call_no = 0; call_no < q->calls; call_no++) {
        if (q->churn > 0 && call_no > 0 && DRAW(200) % (uint64_t)q->churn == 0) {
            int w = 1 + (int)(DRAW(201) % (NCOMMS - 1));
            MPI_Comm_free(&q->comm[w]);
            comm_make(q->comm[C_WORLD], w, &q->comm[w]);
            q->remade++;
        }
        int which = (int)(DRAW(0) % NCOMMS), kind = (int)(DRAW(1) % 15),
            in_place = (int)(DRAW(2) & 1);
        size_t off = (size_t[]){0, 1, 8}[DRAW(3) % 3];
        long failures = mt_failures;
        MPI_Comm c = q->comm[which];
        MPI_Comm_rank(c, &comm_rank);
        MPI_Comm_size(c, &comm_size);
        int root = (int)(DRAW(4) % (uint64_t)comm_size);
        switch (kind) {
        case 0:
        case 1: do_allreduce(c, seed, off, in_place); break;
        case 2: do_blocks(c, seed, off, in_place, 0); break;
        case 3: do_blocks(c, seed, off, in_place, 1); break;
        case 4: do_bcast(c, seed, off, root); break;
        case 5: do_reduction(c, seed, off, in_place, root, 0); break;
        case 6: do_reduction(c, seed, off, in_place, root, 1); break;
        case 7: do_reduction(c, seed, off, 0, root, 2); break;
        case 8: do_vector(c, seed, off, 0); break;
        case 9: do_vector(c, seed, off, 1); break;
        case 10: do_rooted(c, seed, off, in_place, root, 0); break;
        case 11: do_rooted(c, seed, off, in_place, root, 1); break;
        case 12: do_reduction(c, seed, off, in_place, root, 3); break;
        case 13: do_reduction(c, seed, off, 0, root, 4); break;
        default:
            call_name = "MPI_Barrier";
            check_rc(MPI_Barrier(c));
            break;
        }
        q->made[which]++;
        q->kinds[kind]++;
        if (mt_failures != failures) {
            printf("FAIL [rank %d] (above) thread %d's call %ld of seed %llu: %s on the %s "
                   "communicator (rank %d of %d)\n",
                   mt_rank, q->index, call_no, (unsigned long long)seed, call_name,
                   comm_names[which], comm_rank, comm_size);
        }
    }
    return NULL;
}

int main(int argc, char **argv)
{
    long calls = atol(mt_option(argc, argv, "--calls", "200"));
    uint64_t seed = strtoull(mt_option(argc, argv, "--seed", "1"), NULL, 0);
    int nthreads = atoi(mt_option(argc, argv, "--threads", "1")), provided = 0;
    seq_t seqs[8];

    if (nthreads > 1) {
        MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
    } else {
        MPI_Init(&argc, &argv);
    }
    expect_path = mt_flag(argc, argv, "--expect-picoll");
    mt_load_picoll(expect_path);
    if (expect_path) {
        const char *host = getenv("PICOLL_HOST");
        expect_path = host != NULL && strcmp(host, "on") == 0;
    }
    MT_CHECK(mt_size <= MAXR, "coll_shuffle: at most %d ranks", MAXR);
    if (nthreads < 1 || nthreads > 8) {
        mt_fail("coll_shuffle: --threads takes 1 to 8");
        return mt_finish("coll_shuffle");
    }
    if (nthreads > 1 && provided != MPI_THREAD_MULTIPLE) {
        return mt_skip("this MPI does not provide MPI_THREAD_MULTIPLE");
    }
    /* every thread's communicators, made here in the same order on every rank (the first
     * thread's world is MPI_COMM_WORLD itself) */
    for (int t = 0; t < nthreads; t++) {
        seq_t *q = &seqs[t];
        memset(q, 0, sizeof(*q));
        q->index = t;
        q->seed = seed + (uint64_t)t * 7919;
        q->calls = calls;
        if (t == 0) {
            q->comm[C_WORLD] = MPI_COMM_WORLD;
        } else {
            MPI_Comm_dup(MPI_COMM_WORLD, &q->comm[C_WORLD]);
        }
        for (int w = C_DUP; w < NCOMMS; w++) {
            comm_make(MPI_COMM_WORLD, w, &q->comm[w]);
        }
        q->churn = atol(mt_option(argc, argv, "--churn", "0"));
    }
    if (nthreads == 1) {
        sequence(&seqs[0]);
    } else {
        for (int t = 0; t < nthreads; t++) {
            MT_CHECK(pthread_create(&seqs[t].thread, NULL, sequence, &seqs[t]) == 0,
                     "pthread_create");
        }
        for (int t = 0; t < nthreads; t++) {
            pthread_join(seqs[t].thread, NULL);
        }
    }
    long made[NCOMMS] = {0}, allreduces = 0, remade = 0;
    for (int t = 0; t < nthreads; t++) {
        remade += seqs[t].remade;
        for (int w = 0; w < NCOMMS; w++) {
            made[w] += seqs[t].made[w];
            if (w != C_WORLD || t > 0) {
                MPI_Comm_free(&seqs[t].comm[w]);
            }
        }
        allreduces += seqs[t].kinds[0] + seqs[t].kinds[1];
    }
    if (mt_rank == 0) {
        printf("coll_shuffle: seed %llu, %ld calls in each of %d thread(s) on %d ranks (world %ld, "
               "dup %ld, reversed %ld, half %ld, parity %ld; allreduce %ld), %ld communicators "
               "made again\n",
               (unsigned long long)seed, calls, nthreads, mt_size, made[C_WORLD], made[C_DUP],
               made[C_REV], made[C_HALF], made[C_PARITY], allreduces, remade);
    }
    return mt_finish("coll_shuffle");
}
