/* osu-bench: the inputs, the buffers (host, device, pinned), the messages and the validation of
 * a result (bench_impl.h). */
#ifdef HAVE_CONFIG_H
#include "build-config.h"
#endif
#ifndef _GNU_SOURCE
#define _GNU_SOURCE 1 /* posix_memalign */
#endif

#include "bench_cuda.h"
#include "bench_impl.h"

#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Host buffers start on a page. */
#define BENCH_BUFFER_ALIGN 4096
/* The inputs' spread: of a reduction, at most this (sums of a few ranks' inputs stay small and
 * exact in every type); of the others, this. */
#define BENCH_SPREAD_SUM 8
#define BENCH_SPREAD_COPY 100

/* ------------------------------------------------------------------ values */

/* Deterministic input of element idx on rank, in [-spread, spread] (splitmix64 of both). */
static long input_value(int rank, size_t idx, long spread)
{
    uint64_t x = (uint64_t)(rank + 1) * 0x9E3779B97F4A7C15ULL + (uint64_t)idx;
    x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ULL;
    x = (x ^ (x >> 27)) * 0x94D049BB133111EBULL;
    x ^= x >> 31;
    return (long)(x % (uint64_t)(2 * spread + 1)) - spread;
}

static void store_value(type_kind_t kind, void *buf, size_t i, long v)
{
    switch (kind) {
    case TYPE_CHAR: ((char *)buf)[i] = (char)(signed char)v; break;
    case TYPE_INT: ((int *)buf)[i] = (int)v; break;
    case TYPE_FLOAT: ((float *)buf)[i] = (float)v; break;
    case TYPE_DOUBLE: ((double *)buf)[i] = (double)v; break;
    }
}

/* Every value the benchmarks use is an integer exactly representable in each type. */
static double load_value(type_kind_t kind, const void *buf, size_t i)
{
    switch (kind) {
    case TYPE_CHAR: return (double)(signed char)((const char *)buf)[i];
    case TYPE_INT: return (double)((const int *)buf)[i];
    case TYPE_FLOAT: return (double)((const float *)buf)[i];
    case TYPE_DOUBLE: return ((const double *)buf)[i];
    }
    return 0.0;
}

MPI_Datatype bench_type_handle(type_kind_t kind)
{
    switch (kind) {
    case TYPE_CHAR: return MPI_CHAR;
    case TYPE_INT: return MPI_INT;
    case TYPE_FLOAT: return MPI_FLOAT;
    case TYPE_DOUBLE: return MPI_DOUBLE;
    }
    return MPI_DATATYPE_NULL;
}

int bench_inputs_spread(bench_t *b)
{
    if (!b->coll->reduces) {
        b->spread = BENCH_SPREAD_COPY;
        return 0;
    }
    /* sums of np inputs stay exact, and within a signed char */
    b->spread = b->opt.type->kind == TYPE_CHAR ? SCHAR_MAX / b->np : BENCH_SPREAD_SUM;
    if (b->spread > BENCH_SPREAD_SUM) {
        b->spread = BENCH_SPREAD_SUM;
    }
    if (b->spread < 1) {
        if (b->rank == 0) {
            fprintf(stderr, "osu_%s: mpi_char sums overflow beyond %d ranks: use -T mpi_int\n",
                    b->coll->name, SCHAR_MAX);
        }
        return 1;
    }
    return 0;
}

/* ------------------------------------------------------------------ memory */

int bench_device_setup(MPI_Comm comm, char *why, size_t len)
{
    MPI_Comm node;
    int local = 0;
    PMPI_Comm_split_type(comm, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &node);
    PMPI_Comm_rank(node, &local);
    PMPI_Comm_free(&node);
    return bench_cuda_setup(local, why, len);
}

/* Where a buffer lives: the user's host memory, the GPU, or pinned host memory the GPU copies to
 * and from directly (cuMemHostAlloc, as cudaMallocHost), which a careful application stages
 * through. */
typedef enum { ALLOC_HOST, ALLOC_DEVICE, ALLOC_PINNED } alloc_kind_t;

/* A zeroed buffer (its pages faulted in before anything is timed), or NULL. */
static void *buffer_alloc(alloc_kind_t kind, size_t bytes)
{
    void *p = NULL;
    switch (kind) {
    case ALLOC_HOST:
        if (posix_memalign(&p, BENCH_BUFFER_ALIGN, bytes == 0 ? 1 : bytes) != 0) {
            return NULL;
        }
        memset(p, 0, bytes);
        return p;
    case ALLOC_DEVICE: return bench_cuda_alloc_device(bytes);
    case ALLOC_PINNED: return bench_cuda_alloc_pinned(bytes);
    }
    return NULL;
}

static void buffer_free(alloc_kind_t kind, void *p)
{
    switch (kind) {
    case ALLOC_HOST: free(p); break;
    case ALLOC_DEVICE: bench_cuda_free_device(p); break;
    case ALLOC_PINNED: bench_cuda_free_pinned(p); break;
    }
}

/* A synchronous driver copy for CUDA memory, memcpy for host memory, nothing when they are one
 * buffer. */
void bench_buffer_copy(const bench_t *b, void *buf, void *host, size_t bytes, int to_buf)
{
    char why[160];
    if (buf == host || bytes == 0) {
        return;
    }
    if (b->opt.mem == MEM_CUDA) {
        if (bench_cuda_copy(buf, host, bytes, to_buf, why, sizeof(why)) != 0) {
            fprintf(stderr, "osu_%s: rank %d: copy of %zu bytes %s the device failed: %s\n",
                    b->coll->name, b->rank, bytes, to_buf ? "to" : "from", why);
            MPI_Abort(b->comm, 1);
        }
        return;
    }
    if (to_buf) {
        memcpy(buf, host, bytes);
    } else {
        memcpy(host, buf, bytes);
    }
}

int bench_buffers_alloc(bench_t *b, size_t max_count)
{
    size_t send_elems, recv_elems, esize = b->opt.type->size, send_cap, recv_cap;
    b->coll->layout(b->np, max_count, &send_elems, &recv_elems);
    send_cap = send_elems * esize;
    recv_cap = recv_elems * esize;
    b->hsend = buffer_alloc(ALLOC_HOST, send_cap);
    b->hrecv = buffer_alloc(ALLOC_HOST, recv_cap);
    alloc_kind_t user = b->opt.mem == MEM_CUDA ? ALLOC_DEVICE : ALLOC_HOST;
    if (b->opt.mem == MEM_CUDA) {
        b->send = buffer_alloc(ALLOC_DEVICE, send_cap);
        b->recv = buffer_alloc(ALLOC_DEVICE, recv_cap);
    } else {
        b->send = b->hsend;
        b->recv = b->hrecv;
    }
    if (b->opt.osu_timing && b->opt.validate) { /* failing: its column is skipped */
        b->osu_send = buffer_alloc(user, send_cap);
        b->osu_recv = buffer_alloc(user, recv_cap);
    }
    if (b->opt.ab_rounds > 0 && b->opt.baseline == BASELINE_STAGED) {
        alloc_kind_t stage = b->opt.mem == MEM_CUDA ? ALLOC_PINNED : ALLOC_HOST;
        b->stage_send = buffer_alloc(stage, send_cap);
        b->stage_recv = buffer_alloc(stage, recv_cap);
        if (b->stage_send == NULL || b->stage_recv == NULL) {
            return -1;
        }
    }
    return b->hsend && b->hrecv && b->send && b->recv ? 0 : -1;
}

void bench_buffers_free(bench_t *b)
{
    alloc_kind_t stage = b->opt.mem == MEM_CUDA ? ALLOC_PINNED : ALLOC_HOST;
    alloc_kind_t user = b->opt.mem == MEM_CUDA ? ALLOC_DEVICE : ALLOC_HOST;
    if (b->opt.mem == MEM_CUDA) {
        buffer_free(ALLOC_DEVICE, b->send);
        buffer_free(ALLOC_DEVICE, b->recv);
    }
    buffer_free(user, b->osu_send);
    buffer_free(user, b->osu_recv);
    buffer_free(stage, b->stage_send);
    buffer_free(stage, b->stage_recv);
    buffer_free(ALLOC_HOST, b->hsend);
    buffer_free(ALLOC_HOST, b->hrecv);
}

/* Writes the inputs of a message of count elements: the send buffer, or with -l the input part
 * of the receive buffer (the rest gets the sentinel). */
static void fill_inputs(bench_t *b, size_t count)
{
    type_kind_t kind = b->opt.type->kind;
    size_t send_elems, recv_elems, esize = b->opt.type->size;
    b->coll->layout(b->np, count, &send_elems, &recv_elems);
    if (b->opt.in_place) {
        for (size_t j = 0; j < recv_elems; j++) {
            size_t src;
            long v = BENCH_SENTINEL;
            if (b->coll->in_place_source(b->rank, b->np, count, j, &src)) {
                v = input_value(b->rank, src, b->spread);
            }
            store_value(kind, b->hrecv, j, v);
        }
    } else {
        for (size_t i = 0; i < send_elems; i++) {
            store_value(kind, b->hsend, i, input_value(b->rank, i, b->spread));
        }
        for (size_t j = 0; j < recv_elems; j++) {
            store_value(kind, b->hrecv, j, BENCH_SENTINEL);
        }
        bench_buffer_copy(b, b->send, b->hsend, send_elems * esize, 1);
    }
    bench_buffer_copy(b, b->recv, b->hrecv, recv_elems * esize, 1);
    if (b->stage_send != NULL) {
        /* the staging buffers must not hold an earlier call's inputs or results: a staged call
         * that skipped a copy would then still pass validation */
        for (size_t i = 0; i < send_elems; i++) {
            store_value(kind, b->stage_send, i, BENCH_SENTINEL);
        }
        for (size_t j = 0; j < recv_elems; j++) {
            store_value(kind, b->stage_recv, j, BENCH_SENTINEL);
        }
    }
}

/* ------------------------------------------------------------------ messages and validation */

message_t bench_message(const bench_t *b, size_t count)
{
    size_t send_elems, recv_elems;
    b->coll->layout(b->np, count, &send_elems, &recv_elems);
    return (message_t){
        .call =
            {
                .sendbuf = b->opt.in_place ? MPI_IN_PLACE : b->send,
                .recvbuf = b->recv,
                .count = (int)count,
                .type = b->type,
                .comm = b->comm,
            },
        .send_bytes = send_elems * b->opt.type->size,
        .recv_bytes = recv_elems * b->opt.type->size,
    };
}

message_t bench_message_timed(bench_t *b, size_t count)
{
    message_t m = bench_message(b, count);
    if (b->opt.in_place) {
        /* in place, results feed the next call: start from zeros so that sums stay finite */
        memset(b->hrecv, 0, m.recv_bytes);
        bench_buffer_copy(b, b->recv, b->hrecv, m.recv_bytes, 1);
    } else {
        fill_inputs(b, count);
    }
    return m;
}

void bench_fill_inputs(bench_t *b, size_t count)
{
    fill_inputs(b, count);
}

/* Checks every element of this rank's result against a plain computation from the inputs of
 * every rank. */
int bench_validate(bench_t *b, bench_column_t *c, size_t count, const char *state)
{
    message_t m = bench_message(b, count);
    int ok, all_ok = 0;
    fill_inputs(b, count);
    PMPI_Barrier(b->comm);
    c->call(b, c, &m);
    ok = bench_check_result(b, count, state);
    PMPI_Allreduce(&ok, &all_ok, 1, MPI_INT, MPI_MIN, b->comm);
    return all_ok;
}

int bench_check_result(bench_t *b, size_t count, const char *state)
{
    type_kind_t kind = b->opt.type->kind;
    size_t send_elems, recv_elems, bad = 0, first = 0;
    double got = 0.0;
    long want = 0;

    b->coll->layout(b->np, count, &send_elems, &recv_elems);
    bench_buffer_copy(b, b->recv, b->hrecv, recv_elems * b->opt.type->size, 0);
    if (b->opt.corrupt && b->rank == b->np - 1) {
        store_value(kind, b->hrecv, recv_elems - 1,
                    (long)load_value(kind, b->hrecv, recv_elems - 1) + 1);
    }
    for (size_t j = 0; j < recv_elems; j++) {
        long expect = 0;
        double v;
        if (b->coll->reduces) {
            for (int r = 0; r < b->np; r++) {
                expect += input_value(r, j, b->spread);
            }
        } else {
            int src_rank;
            size_t src_idx;
            b->coll->source(b->rank, b->np, count, j, &src_rank, &src_idx);
            expect = input_value(src_rank, src_idx, b->spread);
        }
        v = load_value(kind, b->hrecv, j);
        if (v != (double)expect) {
            if (bad++ == 0) {
                first = j;
                got = v;
                want = expect;
            }
        }
    }
    if (bad != 0) {
        fprintf(stderr,
                "osu_%s: validation failed on rank %d: %zu bytes%s%s: %zu of %zu elements wrong, "
                "first [%zu] = %g, expected %ld\n",
                b->coll->name, b->rank, count * b->opt.type->size, state[0] ? ", " : "", state, bad,
                recv_elems, first, got, want);
    }
    return bad == 0;
}
