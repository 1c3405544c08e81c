/* cuda_coll devcoll: MPI_Reduce_scatter_block, MPI_Reduce_scatter, MPI_Bcast, MPI_Reduce,
 * MPI_Allgatherv and MPI_Alltoallv on device buffers, each call's result checked bit for bit
 * against plain host loops (the reduction in rank order, as the device path reduces) and its path
 * checked (picoll_last_algorithm()): every type x op the host reduction covers, counts of 1
 * element, a few, and around the workspace's chunk edges (one piece per rank of a data buffer for
 * reduce-scatter, a whole buffer for bcast and reduce), in place and not, roots first and last
 * (and in between at np 3 and up), buffers at odd offsets with guard bytes, a leaf's receive
 * buffer of MPI_Reduce left untouched; allgatherv's blocks even and uneven (one empty), in
 * reverse rank order with gaps that must keep their bytes; alltoallv's pieces uneven (some
 * empty), across the chunk edge, and one of three chunks that only its sender and receiver know
 * (the chunk count agreed in the vote), in four element sizes, at displacements out of rank
 * order with gaps that must keep their bytes; then the calls that must fall back on every rank
 * together: a rank with host buffers, long double, an uneven reduce-scatter in place, alltoallv
 * in place (those need an underlying MPI that takes device buffers: picoll's staging). --fast:
 * one op per type at the chunk edges. --zc / --register (cases.h): send buffers at the receive
 * buffer's offset, and reduce-scatter's calls of even pieces expected on the zero-copy path
 * (cuda_zc) where it is on and they qualify (want_zc). */
#include "cases.h"
#include "modes.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef enum { D_RSB, D_RS, D_REDUCE } red_kind_t;

static const char *const red_names[] = {"MPI_Reduce_scatter_block", "MPI_Reduce_scatter",
                                        "MPI_Reduce"};

/* Called right before each MPI call of the cases, their buffers ready (devcoll-late). */
static void (*before_call)(void);

static void call_soon(void)
{
    if (before_call != NULL) {
        before_call();
    }
}

/* The path a call should take: dev where every rank can run it on the device. */
static const char *want_dev(const char *dev, int falls_back)
{
    return falls_back || expect_fallback ? "fallback" : dev;
}

/* A case is done: count it, free its buffers. */
static void case_end(dbuf_t *sb, dbuf_t *rb, void *a, void *b, void *c)
{
    ncases++;
    dbuf_free(sb);
    dbuf_free(rb);
    free(a);
    free(b);
    free(c);
}

typedef struct {
    red_kind_t kind;
    int ti;
    const type_t *t;
    op_t op;
    const size_t *counts; /* reduce-scatter: every rank's piece; reduce: counts[0] */
    int in_place, root;
    size_t off;
    mem_t mem;
    int falls_back; /* every rank must hand the call over (then inputs reducible in any order) */
} red_case_t;

static void red_case(const red_case_t *c)
{
    const type_t *t = c->t;
    size_t es = t->size, total = 0, mine_at = 0, nout;
    int rs = c->kind != D_REDUCE, at_root = mt_rank == c->root,
        exact = c->falls_back || expect_fallback;
    uint64_t seed =
        seed_of(c->ti, (int)c->op, c->counts[0], (int)(c->kind * 64 + c->off * 2 + c->in_place));
    char name[128];

    for (int r = 0; r < (rs ? mt_size : 1); r++) {
        mine_at += r < mt_rank && rs ? c->counts[r] : 0;
        total += c->counts[r];
    }
    nout = rs ? c->counts[mt_rank] : total;
    unsigned char *in = malloc(total * es + 1), *want = malloc(nout * es + 1);
    unsigned char *got = malloc((c->in_place ? total : nout) * es + 1);
    for (size_t j = 0; j < total; j++) {
        gen(t, c->op, seed, mt_rank, j, exact, in + j * es);
    }
    for (size_t j = 0; j < nout; j++) {
        reference(t, c->op, seed, (rs ? mine_at : 0) + j, exact, want + j * es);
    }
    /* reduce: a leaf's receive buffer holds its own bytes, which must stay */
    dbuf_t sb = {0}, rb = {0};
    int host = c->mem == MEM_HOST;
    int ip = c->in_place && (rs || at_root);
    dbuf_alloc(&rb, ip ? total * es : nout * es, c->off, host);
    if (ip) {
        dbuf_put(&rb, 0, in, total * es);
    } else {
        dbuf_alloc(&sb, total * es, zc_aligned ? c->off : (c->off + 3) % 16, c->mem != MEM_DEVICE);
        dbuf_put(&sb, 0, in, total * es);
        if (!rs && !at_root) {
            dbuf_put(&rb, 0, in, nout * es);
        }
    }
    const void *send = ip ? MPI_IN_PLACE : sb.p;
    int counts_i[64], rc;
    MPI_Op op = op_handle(c->op);
    snprintf(name, sizeof(name), "%s %s %s%s root %d", red_names[c->kind], t->name, op_names[c->op],
             ip ? " in place" : "", c->root);
    call_soon();
    if (c->kind == D_RSB) {
        rc = MPI_Reduce_scatter_block(send, rb.p, (int)c->counts[0], t->dt, op, test_comm);
    } else if (c->kind == D_RS) {
        for (int r = 0; r < mt_size && r < 64; r++) {
            counts_i[r] = (int)c->counts[r];
        }
        rc = MPI_Reduce_scatter(send, rb.p, counts_i, t->dt, op, test_comm);
    } else {
        rc = MPI_Reduce(send, rb.p, (int)total, t->dt, op, c->root, test_comm);
    }
    MT_CHECK(rc == MPI_SUCCESS, "%s count %zu: MPI error %d", name, c->counts[0], rc);
    const char *path =
        want_dev(rs ? "cuda_ipc" : "cuda_oneshot", c->falls_back || t->kind == K_LDOUBLE);
    int even = rs;
    for (int r = 1; r < mt_size && even; r++) {
        even = c->counts[r] == c->counts[0];
    }
    if (even && c->counts[0] * es % 16 == 0) {
        /* the zero-copy form (--zc, --register): even pieces of 16-byte multiples, not in place,
         * from PICOLL_CUDA_ZERO_COPY_MIN bytes read; one mapping a peer, as alltoall's */
        path = want_zc(path, 1, send, rb.p, total * es);
    }
    check_path(name, c->counts[0], path);
    MT_CHECK(dbuf_read(&rb, got), "%s count %zu: guard bytes overwritten", name, c->counts[0]);
    if (!ip) {
        unsigned char *back = malloc(total * es + 1);
        MT_CHECK(dbuf_read(&sb, back) && memcmp(back, in, total * es) == 0,
                 "%s count %zu: send buffer or its guard bytes changed", name, c->counts[0]);
        free(back);
    }
    if (t->kind == K_LDOUBLE) {
        for (size_t j = 0; j < nout; j++) { /* x87: 10 bytes of value, then padding */
            memset(got + j * es + 10, 0, es - 10);
            memset(want + j * es + 10, 0, es - 10);
            memset(in + j * es + 10, 0, es - 10);
        }
    }
    if (rs || at_root) {
        check_bytes(name, t->name, op_names[c->op], nout, es, got, want);
    } else {
        check_bytes(name, t->name, "leaf's receive buffer changed", nout, es, got, in);
    }
    case_end(&sb, &rb, in, want, got);
}

/* One broadcast of count elements of dt (esize bytes) from root. */
static void bcast_case(size_t count, MPI_Datatype dt, size_t esize, int root, size_t off, mem_t mem,
                       int falls_back)
{
    size_t bytes = count * esize;
    uint64_t seed = mt_rand(bytes, (uint64_t)root, off);
    unsigned char *data = malloc(bytes + 1), *got = malloc(bytes + 1);
    char name[96];
    dbuf_t b;

    for (size_t i = 0; i < bytes; i++) {
        data[i] = (unsigned char)mt_rand(seed, 7, i);
    }
    dbuf_alloc(&b, bytes, off, mem == MEM_HOST);
    if (mt_rank == root) {
        dbuf_put(&b, 0, data, bytes);
    }
    snprintf(name, sizeof(name), "MPI_Bcast %zu bytes root %d", bytes, root);
    call_soon();
    int rc = MPI_Bcast(b.p, (int)count, dt, root, test_comm);
    MT_CHECK(rc == MPI_SUCCESS, "%s: MPI error %d", name, rc);
    /* the zero-copy form (--zc, --register): the others read the root's buffer (one mapping) */
    check_path(name, count,
               want_zc_maps(want_dev("cuda_ipc", falls_back), 0, MPI_IN_PLACE, b.p, bytes, 1));
    MT_CHECK(dbuf_read(&b, got), "%s: guard bytes overwritten", name);
    check_bytes(name, "", "", bytes, 1, got, data);
    ncases++;
    dbuf_free(&b);
    free(data);
    free(got);
}

/* One allgatherv of MPI_BYTE (elem 1) or MPI_INT (elem 4) blocks: rank r's block has
 * counts[r] elements and lies at displacement displs[r], here the ranks' blocks in reverse order
 * with a gap of 3 elements after each; the gaps must keep the receive buffer's bytes. */
static void allgatherv_case(const size_t *counts, int in_place, size_t off, mem_t mem,
                            int falls_back)
{
    MPI_Datatype dt = off % 2 == 0 ? MPI_BYTE : MPI_INT;
    size_t elem = dt == MPI_BYTE ? 1 : 4, total = 0, at[64];
    int rcounts[64], displs[64];
    char name[96];
    for (int r = mt_size - 1; r >= 0; r--) {
        at[r] = total;
        rcounts[r] = (int)counts[r];
        displs[r] = (int)total;
        total += counts[r] + 3;
    }
    size_t bytes = total * elem;
    uint64_t seed = mt_rand(bytes, (uint64_t)in_place, off);
    unsigned char *want = malloc(bytes + 1), *got = malloc(bytes + 1);
    for (size_t i = 0; i < bytes; i++) {
        want[i] = (unsigned char)mt_rand(seed, 99, i); /* the receive buffer's own bytes */
    }
    dbuf_t sb = {0}, rb;
    dbuf_alloc(&rb, bytes, off, mem == MEM_HOST);
    /* my block where in place; every rank's where the call must put them */
    for (int r = 0; r < mt_size; r++) {
        for (size_t i = 0; i < counts[r] * elem; i++) {
            want[at[r] * elem + i] = (unsigned char)mt_rand(seed, (uint64_t)r, i);
        }
    }
    unsigned char *start = malloc(bytes + 1);
    for (size_t i = 0; i < bytes; i++) {
        start[i] = (unsigned char)mt_rand(seed, 99, i);
    }
    size_t mine = counts[mt_rank] * elem;
    memcpy(start + at[mt_rank] * elem, want + at[mt_rank] * elem, mine);
    dbuf_put(&rb, 0, start, bytes);
    if (!in_place) {
        dbuf_alloc(&sb, mine, (off + 3) % 16, mem != MEM_DEVICE);
        dbuf_put(&sb, 0, want + at[mt_rank] * elem, mine);
    }
    snprintf(name, sizeof(name), "MPI_Allgatherv %s%s", dt == MPI_BYTE ? "MPI_BYTE" : "MPI_INT",
             in_place ? " in place" : "");
    call_soon();
    int rc = MPI_Allgatherv(in_place ? MPI_IN_PLACE : sb.p, (int)counts[mt_rank], dt, rb.p, rcounts,
                            displs, dt, test_comm);
    MT_CHECK(rc == MPI_SUCCESS, "%s: MPI error %d", name, rc);
    check_path(name, counts[0], want_dev("cuda_ipc", falls_back));
    MT_CHECK(dbuf_read(&rb, got), "%s: guard bytes overwritten", name);
    check_bytes(name, "", "", bytes, 1, got, want);
    case_end(&sb, &rb, want, got, start);
}

static void matrix_allgatherv(void)
{
    size_t counts[64];
    size_t shapes[][2] = {{1, 0},        {33, 1},       {SLOT - 1, 0},
                          {SLOT / 4, 1}, {SLOT + 1, 0}, {2 * SLOT / 4 + 3, 1}};
    for (size_t s = 0; s < sizeof(shapes) / sizeof(shapes[0]); s++) {
        for (int uneven = 0; uneven < 2; uneven++) {
            for (int r = 0; r < mt_size; r++) { /* uneven: rank 0's block empty, the others grow */
                counts[r] =
                    uneven ? (size_t)r * (shapes[s][0] / (size_t)mt_size + 1) : shapes[s][0];
            }
            /* off even: MPI_BYTE; odd: MPI_INT (element counts of a quarter of the bytes) */
            allgatherv_case(counts, (int)(s + (size_t)uneven) % 2, shapes[s][1] ? 5 : 2 * s,
                            MEM_DEVICE, 0);
        }
    }
}

/* Elements rank s sends rank r in alltoallv's shape (every rank knows the whole matrix; the
 * library only its own row and column); c: elements of a chunk's piece. */
static size_t a2av_count(int shape, int s, int r, size_t c)
{
    switch (shape) {
    case 0: /* a few, some none */
        return (s + 2 * r) % 3 == 0 ? 0 : 1 + 7 * (size_t)s + 3 * (size_t)r;
    case 1: /* across the chunk edge, one empty piece a rank */
        return r == (s + 1) % mt_size ? 0 : c - 1 + (size_t)((s + r) % 3);
    case 2: /* one piece of three chunks, from rank 0 to the last: only those two know it; the
             * others' pieces of 0 to 3 elements, sent over as many chunks */
        return s == 0 && r == mt_size - 1 ? 2 * c + 5 : (size_t)((3 * s + r) % 4);
    default: /* symmetric (what s sends r, r sends s), for in place */
        return (s + r) % 3 == 1 ? 0 : 2 + (size_t)(s + r);
    }
}

/* One alltoallv of elem-byte elements of dt in shape: the send pieces in reverse rank order 2
 * elements apart, the received ones from the next rank on, 3 elements apart; the gaps must keep
 * the receive buffer's bytes. In place (a symmetric shape): the pieces to send where the
 * received ones go. */
static void alltoallv_case(int shape, MPI_Datatype dt, size_t elem, int in_place, size_t off,
                           mem_t mem, int falls_back)
{
    size_t c = SLOT / (size_t)mt_size / 16 * 16 / elem, stotal = 0, rtotal = 0;
    int scounts[64], sdispls[64], rcounts[64], rdispls[64];
    char name[96];
    for (int k = 0; k < mt_size; k++) {
        int r = mt_size - 1 - k, s = (mt_rank + 1 + k) % mt_size;
        scounts[r] = (int)a2av_count(shape, mt_rank, r, c);
        sdispls[r] = (int)stotal;
        stotal += (size_t)scounts[r] + 2;
        rcounts[s] = (int)a2av_count(shape, s, mt_rank, c);
        rdispls[s] = (int)rtotal;
        rtotal += (size_t)rcounts[s] + 3;
    }
    size_t sbytes = stotal * elem, rbytes = rtotal * elem;
    uint64_t seed = mt_rand((uint64_t)shape, elem, off);
    unsigned char *in = malloc(sbytes + 1), *want = malloc(rbytes + 1), *got = malloc(rbytes + 1);
    /* byte i of the piece from rank s to rank r: mt_rand(seed, s * 64 + r, i) */
    for (size_t i = 0; i < sbytes; i++) {
        in[i] = (unsigned char)mt_rand(seed, 9999, i);
    }
    for (size_t i = 0; i < rbytes; i++) {
        want[i] = (unsigned char)mt_rand(seed, 10000 + (uint64_t)mt_rank, i);
    }
    dbuf_t sb = {0}, rb;
    dbuf_alloc(&rb, rbytes, off, mem == MEM_HOST);
    for (int r = 0; r < mt_size; r++) {
        uint64_t to = (uint64_t)(mt_rank * 64 + r);
        for (size_t i = 0; i < (size_t)scounts[r] * elem; i++) {
            in[(size_t)sdispls[r] * elem + i] = (unsigned char)mt_rand(seed, to, i);
        }
        for (size_t i = 0; in_place && i < (size_t)rcounts[r] * elem; i++) {
            want[(size_t)rdispls[r] * elem + i] = (unsigned char)mt_rand(seed, to, i);
        }
    }
    dbuf_put(&rb, 0, want, rbytes);
    for (int r = 0; r < mt_size; r++) {
        for (size_t i = 0; i < (size_t)rcounts[r] * elem; i++) {
            want[(size_t)rdispls[r] * elem + i] =
                (unsigned char)mt_rand(seed, (uint64_t)(r * 64 + mt_rank), i);
        }
    }
    if (!in_place) {
        dbuf_alloc(&sb, sbytes, (off + 3) % 16, mem != MEM_DEVICE);
        dbuf_put(&sb, 0, in, sbytes);
    }
    snprintf(name, sizeof(name), "MPI_Alltoallv shape %d of %zu-byte elements%s", shape, elem,
             in_place ? " in place" : "");
    call_soon();
    int rc = MPI_Alltoallv(in_place ? MPI_IN_PLACE : sb.p, scounts, sdispls, dt, rb.p, rcounts,
                           rdispls, dt, test_comm);
    MT_CHECK(rc == MPI_SUCCESS, "%s: MPI error %d", name, rc);
    check_path(name, (size_t)rcounts[0], want_dev("cuda_ipc", falls_back));
    MT_CHECK(dbuf_read(&rb, got), "%s: guard bytes overwritten", name);
    check_bytes(name, "", "", rbytes, 1, got, want);
    if (!in_place) {
        unsigned char *back = malloc(sbytes + 1);
        MT_CHECK(dbuf_read(&sb, back) && memcmp(back, in, sbytes) == 0,
                 "%s: send buffer or its guard bytes changed", name);
        free(back);
    }
    case_end(&sb, &rb, in, want, got);
}

/* Every shape in bytes, shorts, ints and doubles, at aligned and odd offsets. */
static void matrix_alltoallv(void)
{
    MPI_Datatype dts[] = {MPI_BYTE, MPI_SHORT, MPI_INT, MPI_DOUBLE};
    size_t elems[] = {1, sizeof(short), sizeof(int), sizeof(double)};
    for (int shape = 0; shape < 3; shape++) {
        for (size_t k = 0; k < 4; k++) {
            alltoallv_case(shape, dts[k], elems[k], 0, (k + (size_t)shape) % 3 == 0 ? 0 : 5 + k,
                           MEM_DEVICE, 0);
        }
    }
}

/* Counts (elements of esize) of 1, a few, and around the edge of a chunk of chunk bytes. */
static size_t dev_counts(size_t esize, size_t chunk, size_t *out)
{
    size_t n = 0, c = chunk / esize;
    out[n++] = 1;
    out[n++] = 33;
    out[n++] = c - 1;
    out[n++] = c;
    out[n++] = c + 1;
    out[n++] = 2 * c + 3;
    return n;
}

/* --fast: the counts 1 and 33 for every op; the edges for one op per type (a rotation). */
static int keep(size_t ti, op_t op, size_t k)
{
    int pos = 0;
    for (op_t o = 0; o < op; o++) {
        pos += op_allowed(&types[ti], o);
    }
    return k < 2 || !fast || pos == (int)(ti % 2);
}

static void matrix_reductions(void)
{
    size_t piece = SLOT / (size_t)mt_size / 16 * 16; /* reduce-scatter's chunk per rank */
    size_t counts[64], edges[8];
    int roots[] = {0, mt_size - 1, mt_size / 2};
    int nroots = mt_size > 2 ? 3 : 2;
    for (size_t ti = 0; ti < ntypes; ti++) {
        const type_t *t = &types[ti];
        for (op_t op = 0; op < NOPS; op++) {
            if (!op_allowed(t, op)) {
                continue;
            }
            size_t ne = dev_counts(t->size, piece, edges);
            for (size_t k = 0; k < ne; k++) {
                if (!keep(ti, op, k)) {
                    continue;
                }
                for (int r = 0; r < mt_size; r++) {
                    counts[r] = edges[k];
                }
                int place = (int)((k + (size_t)op + ti) % 3);
                red_case(&(red_case_t){.kind = D_RSB,
                                       .ti = (int)ti,
                                       .t = t,
                                       .op = op,
                                       .counts = counts,
                                       .in_place = (int)(k + op) & 1,
                                       .off = place == 0   ? 0
                                              : place == 1 ? 1
                                                           : 8});
            }
            ne = dev_counts(t->size, SLOT, edges);
            for (size_t k = 0; k < ne; k++) {
                if (!keep(ti, op, k)) {
                    continue;
                }
                counts[0] = edges[k];
                red_case(&(red_case_t){.kind = D_REDUCE,
                                       .ti = (int)ti,
                                       .t = t,
                                       .op = op,
                                       .counts = counts,
                                       .in_place = (int)(k + ti) & 1,
                                       .root = roots[(k + op) % (size_t)nroots],
                                       .off = (k + ti) % 3 == 0 ? 0 : 5});
            }
        }
    }
    /* uneven pieces: one rank's empty, the others around the chunk edge, and a few */
    for (size_t ti = 0; ti < ntypes; ti += 3) {
        const type_t *t = &types[ti];
        op_t op = op_allowed(t, SUM) ? SUM : BXOR;
        size_t c = piece / t->size;
        for (int shape = 0; shape < 3; shape++) {
            for (int r = 0; r < mt_size; r++) {
                counts[r] = shape == 0   ? (size_t)r * 5
                            : shape == 1 ? c - 1 + (size_t)r
                                         : 2 * c + 7 * (size_t)r + 1;
            }
            red_case(&(red_case_t){.kind = D_RS,
                                   .ti = (int)ti,
                                   .t = t,
                                   .op = op,
                                   .counts = counts,
                                   .off = (size_t)shape});
        }
        for (int r = 0; r < mt_size; r++) { /* even, not in place: zero-copy where it is on */
            counts[r] = 2 * c;
        }
        red_case(&(red_case_t){
            .kind = D_RS, .ti = (int)ti, .t = t, .op = op, .counts = counts, .off = 0});
        for (int r = 0; r < mt_size; r++) { /* even, in place: on the device */
            counts[r] = 3 * c / 2;
        }
        red_case(&(red_case_t){.kind = D_RS,
                               .ti = (int)ti,
                               .t = t,
                               .op = op,
                               .counts = counts,
                               .in_place = 1,
                               .off = 1});
    }
}

static void matrix_bcast(void)
{
    size_t bytes[] = {1, 33, SLOT - 1, SLOT, SLOT + 1, 2 * SLOT + 3};
    for (size_t b = 0; b < sizeof(bytes) / sizeof(bytes[0]); b++) {
        for (int root = 0; root < mt_size; root++) {
            if (fast && root != 0 && root != mt_size - 1) {
                continue;
            }
            bcast_case(bytes[b], MPI_BYTE, 1, root, b % 3 == 0 ? 0 : 1 + b, MEM_DEVICE, 0);
        }
    }
    bcast_case(SLOT / 4 + 3, MPI_INT, sizeof(int), mt_size - 1, 4, MEM_DEVICE, 0);
}

/* Calls that every rank hands over together. */
static void fallbacks(void)
{
    size_t counts[64];
    if (!fallback_takes_device_buffers()) {
        if (mt_rank == 0) {
            printf("note: devcoll's fallback cases not run: the underlying MPI does not take "
                   "device buffers (MPIX_Query_cuda_support)\n");
        }
        return;
    }
    mem_t last_host = mt_rank == mt_size - 1 ? MEM_HOST : MEM_DEVICE;
    for (int r = 0; r < mt_size; r++) {
        counts[r] = 1000;
    }
    red_case(&(red_case_t){.kind = D_RSB,
                           .ti = 99,
                           .t = &type_long_double,
                           .op = SUM,
                           .counts = counts,
                           .falls_back = 1});
    red_case(&(red_case_t){.kind = D_RSB,
                           .ti = T_INT32,
                           .t = &types[T_INT32],
                           .op = SUM,
                           .counts = counts,
                           .mem = last_host,
                           .falls_back = 1});
    red_case(&(red_case_t){.kind = D_REDUCE,
                           .ti = T_DOUBLE,
                           .t = &types[T_DOUBLE],
                           .op = SUM,
                           .counts = counts,
                           .root = mt_size - 1,
                           .mem = last_host,
                           .falls_back = 1});
    red_case(&(red_case_t){.kind = D_REDUCE,
                           .ti = 98,
                           .t = &type_long_double,
                           .op = MAX,
                           .counts = counts,
                           .root = 0,
                           .falls_back = 1});
    bcast_case(5000, MPI_BYTE, 1, 0, 3, last_host, 1);
    allgatherv_case(counts, 0, 2, last_host, 1);
    alltoallv_case(2, MPI_INT, sizeof(int), 0, 1, last_host, 1);
    alltoallv_case(3, MPI_SHORT, sizeof(short), 1, 2, MEM_DEVICE, 1);
    for (int r = 0; r < mt_size; r++) {
        counts[r] = 100 + (size_t)r;
    }
    red_case(&(red_case_t){.kind = D_RS,
                           .ti = T_FLOAT,
                           .t = &types[T_FLOAT],
                           .op = SUM,
                           .counts = counts,
                           .in_place = 1,
                           .falls_back = 1});
}

/* One of the collectives above drawn at random (cuda_coll shuffle's call k of seed): its kind,
 * type, op, counts (every rank's, for the v-forms), root, placement and offset, the same on every
 * rank; only calls that run on the device (no uneven reduce-scatter or alltoallv in place). */
void devcoll_drawn(uint64_t seed, long k)
{
#define DRAW(d) mt_rand(seed, (uint64_t)k, 100 + (uint64_t)(d))
    size_t counts[64], piece = SLOT / (size_t)mt_size / 16 * 16;
    int kind = (int)(DRAW(0) % 6), in_place = (int)(DRAW(1) & 1);
    size_t ti = DRAW(2) % ntypes;
    const type_t *t = &types[ti];
    op_t op = draw_op(t, seed, k, 100, 3);
    size_t es = t->size, big = 2 * SLOT / es + 3;
    size_t edges[8], ne = dev_counts(es, kind == 0 ? piece : SLOT, edges);
    size_t count = DRAW(20) & 1 ? edges[DRAW(21) % ne] : 1 + DRAW(22) % big;
    size_t off = (size_t[]){0, 1, 8}[DRAW(23) % 3];
    int root = (int)(DRAW(24) % (uint64_t)mt_size);
    MT_CHECK(mt_size <= 64, "devcoll: at most 64 ranks");
    switch (kind) {
    case 0: /* reduce-scatter of even pieces */
    case 1: /* reduce-scatter: uneven pieces (some empty) not in place, or even ones */
        for (int r = 0; r < mt_size; r++) {
            counts[r] = kind == 0 || (DRAW(25) & 1) ? count : DRAW(30 + r) % (count + 1);
        }
        counts[root] = count; /* not all empty: a call of nothing is handed over */
        for (int r = 1; r < mt_size; r++) {
            in_place = in_place && counts[r] == counts[0];
        }
        red_case(&(red_case_t){.kind = kind == 0 ? D_RSB : D_RS,
                               .ti = (int)ti,
                               .t = t,
                               .op = op,
                               .counts = counts,
                               .in_place = in_place,
                               .off = off});
        break;
    case 2:
        counts[0] = count;
        red_case(&(red_case_t){.kind = D_REDUCE,
                               .ti = (int)ti,
                               .t = t,
                               .op = op,
                               .counts = counts,
                               .in_place = in_place,
                               .root = root,
                               .off = off});
        break;
    case 3: bcast_case(count * es, MPI_BYTE, 1, root, off, MEM_DEVICE, 0); break;
    case 4: /* off even: MPI_BYTE blocks; odd: MPI_INT */
        for (int r = 0; r < mt_size; r++) {
            counts[r] = DRAW(30 + r) % (count + 1);
        }
        counts[root] = count;
        allgatherv_case(counts, in_place, off + (DRAW(26) & 1), MEM_DEVICE, 0);
        break;
    default: {
        MPI_Datatype dts[] = {MPI_BYTE, MPI_SHORT, MPI_INT, MPI_DOUBLE};
        size_t elems[] = {1, sizeof(short), sizeof(int), sizeof(double)};
        size_t e = DRAW(27) % 4;
        alltoallv_case((int)(DRAW(28) % 3), dts[e], elems[e], 0, off, MEM_DEVICE, 0);
        break;
    }
    }
#undef DRAW
}

int mode_devcoll(int argc, char **argv)
{
    (void)argc;
    (void)argv;
    MT_CHECK(mt_size <= 64, "devcoll: at most 64 ranks");
    matrix_reductions();
    matrix_bcast();
    matrix_allgatherv();
    matrix_alltoallv();
    fallbacks();
    if (mt_rank == 0) {
        printf("cuda_coll devcoll: %llu cases on %d ranks%s\n", ncases, mt_size,
               fast ? " (--fast)" : "");
    }
    return mt_finish("cuda_coll devcoll");
}

/* devcoll-late R S: each collective with rank R's kernel S seconds late (a host function of that
 * length queued on its stream once the buffers are ready, right before the call): the peers'
 * kernels give up, their hosts wait and resume the call, chunk by chunk (several chunks each);
 * right results, the device path, and the call lasting at least the lateness. */
static unsigned late_us;
static int late_rank;

static void queue_late(void)
{
    CK(drv.ctx_synchronize());
    if (mt_rank == late_rank) {
        CK(drv.launch_host_func(CU_STREAM_PER_THREAD, sleep_host_fn, &late_us));
    }
}

int mode_devcoll_late(int argc, char **argv)
{
    static const size_t need[] = {DRV_FIELD(launch_host_func)};
    int victim = argc > 2 ? atoi(argv[2]) : 1, rc = skip_lacking(need, 1, "devcoll-late");
    double secs = argc > 3 ? atof(argv[3]) : 2.0;
    size_t piece = SLOT / (size_t)mt_size / 16 * 16, counts[64];

    if (rc >= 0) {
        return rc;
    }
    late_us = (unsigned)(secs * 1e6);
    late_rank = victim;
    bcast_case(100, MPI_BYTE, 1, 0, 0, MEM_DEVICE, 0); /* the workspace, made on time */
    before_call = queue_late;
    for (int k = 0; k < 6; k++) {
        /* every rank's clock from the same moment: a rank still checking the last call's result
         * when the late rank queued its delay would time less than the delay (1.8 s of 2 s, seen
         * in a clean-clone run) */
        MPI_Barrier(MPI_COMM_WORLD);
        double took = now_s();
        for (int r = 0; r < mt_size; r++) {
            /* --zc: reduce_scatter_block's pieces of 16-byte multiples, on the zero-copy path
             * where it is on (its kernel waits, gives up and resumes as the copy path's does) */
            counts[r] = k == 0   ? 2 * piece / 4 + (zc_aligned ? 4 : 3)
                        : k == 1 ? piece / 4 * (size_t)r + 5
                                 : 2 * SLOT / 4 + 3;
        }
        if (k == 0 || k == 1) {
            red_case(&(red_case_t){.kind = k == 0 ? D_RSB : D_RS,
                                   .ti = T_FLOAT,
                                   .t = &types[T_FLOAT],
                                   .op = SUM,
                                   .counts = counts});
        } else if (k == 2) {
            red_case(&(red_case_t){.kind = D_REDUCE,
                                   .ti = T_FLOAT,
                                   .t = &types[T_FLOAT],
                                   .op = SUM,
                                   .counts = counts,
                                   .root = victim});
        } else if (k == 3) {
            bcast_case(2 * SLOT + 3, MPI_BYTE, 1, 0, zc_aligned ? 0 : 1, MEM_DEVICE, 0);
        } else if (k == 4) {
            allgatherv_case(counts, 0, 2, MEM_DEVICE, 0);
        } else {
            alltoallv_case(2, MPI_INT, sizeof(int), 0, 3, MEM_DEVICE, 0);
        }
        took = now_s() - took;
        MT_CHECK(took > secs * 0.9,
                 "devcoll-late: call %d took %.1f s, less than rank %d's delay "
                 "of %.1f s",
                 k, took, victim, secs);
    }
    before_call = NULL;
    return mt_finish("cuda_coll devcoll-late");
}
