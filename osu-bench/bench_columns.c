/* osu-bench: the column objects (bench_impl.h) but the stream-ordered ones (bench_stream.c):
 * plain MPI and picoll (the collective on the benchmark's buffers, picoll bypassed or not),
 * staged MPI (the application's own staging through host buffers), NCCL (--nccl) and the floor
 * (--floor); the timing of a blocking call; the set-up and close of the columns asked for. */
#ifdef HAVE_CONFIG_H
#include "build-config.h"
#endif

#include "bench_cuda.h"
#include "bench_impl.h"
#include "bench_nccl.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ------------------------------------------------------------------ shared */

int bench_all_ranks(const bench_t *b, int ok)
{
    int all = 0;
    PMPI_Allreduce(&ok, &all, 1, MPI_INT, MPI_MIN, b->comm);
    return all;
}

int bench_mpi_why(int rc, const char *what, char *why, size_t len)
{
    char msg[MPI_MAX_ERROR_STRING] = "";
    int n = 0;
    if (rc == MPI_SUCCESS) {
        return 0;
    }
    PMPI_Error_string(rc, msg, &n);
    snprintf(why, len, "%s: %.200s", what, msg);
    return -1;
}

void bench_column_fail(const bench_t *b, const bench_column_t *c, const char *why)
{
    fprintf(stderr, "osu_%s: rank %d: %s column: %s\n", b->coll->name, b->rank, c->name, why);
    MPI_Abort(b->comm, 1);
}

/* ------------------------------------------------------------------ timing of a blocking call */

/* The driver calls of the timed iterations (not the warm-up's), added to the size's sum. The
 * barriers between calls are the MPI's own and reach no driver. */
static void count_start(bench_t *b)
{
    bench_cuda_call_counts(b->counts.start, b->counts.n);
}

static void count_stop(bench_t *b, int iters)
{
    bench_cuda_call_counts(b->counts.end, b->counts.n);
    for (int i = 0; i < b->counts.n; i++) {
        b->counts.sum[i] += b->counts.end[i] - b->counts.start[i];
    }
    b->counts.timed += iters;
}

/* On device buffers with picoll in the process: which path its last timed call took (a device
 * algorithm, or "fallback"), so that a count of driver calls is read with the path it belongs to. */
static void note_path(bench_t *b)
{
    if (b->opt.mem == MEM_CUDA && b->picoll.last_algorithm != NULL) {
        b->path = b->picoll.last_algorithm();
    }
}

/* This rank's mean latency (us) over iters calls, each timed alone between barriers, after warmup
 * untimed ones. The calls of a column that picoll runs have their driver calls counted (where the
 * driver counts them) and the path of the last one noted. */
static double time_calls(bench_t *b, bench_column_t *c, size_t count, int iters, int warmup)
{
    message_t m = bench_message_timed(b, count);
    int counting = c->picoll && b->counts.n > 0;
    double total = 0.0;
    PMPI_Barrier(b->comm);
    for (int i = 0; i < warmup + iters; i++) {
        if (i == warmup && counting) {
            count_start(b);
        }
        double t0 = MPI_Wtime();
        c->call(b, c, &m);
        double t1 = MPI_Wtime();
        if (i >= warmup) {
            total += t1 - t0;
        }
        PMPI_Barrier(b->comm);
    }
    if (counting) {
        count_stop(b, iters);
    }
    if (c->picoll) {
        note_path(b);
    }
    return total * BENCH_US_PER_S / iters;
}

/* ------------------------------------------------------------------ plain MPI and picoll */

/* The collective on the benchmark's buffers: plain MPI while picoll is bypassed, else through
 * picoll where it is in the process (without --ab, as OSU's program runs it). */
static void mpi_call(bench_t *b, bench_column_t *c, const message_t *m)
{
    (void)c;
    b->coll->call(&m->call);
}

/* --ab: picoll's version and state. */
static void picoll_describe(const bench_t *b, const bench_column_t *c)
{
    (void)c;
    if (b->nab == 0) {
        return; /* OSU's output: the collective, nothing to say */
    }
    printf("# picoll %s, active %d\n", b->picoll.version != NULL ? b->picoll.version() : "?",
           b->picoll.active != NULL ? b->picoll.active() : -1);
}

static const bench_column_t mpi_column = {
    .id = COLUMN_MPI,
    .name = "plain MPI",
    .head = "MPI",
    .call = mpi_call,
    .time = time_calls,
};

static const bench_column_t picoll_column = {
    .id = COLUMN_PICOLL,
    .name = "picoll",
    .head = "picoll",
    .picoll = 1,
    .call = mpi_call,
    .time = time_calls,
    .describe = picoll_describe,
};

/* ------------------------------------------------------------------ staged MPI */

/* What an application does on an MPI that cannot read its buffers: the input copied to host
 * buffers (with -l the receive buffer), the collective on those, the result copied back. */
static void staged_call(bench_t *b, bench_column_t *c, const message_t *m)
{
    bench_call_t staged = m->call;
    (void)c;
    staged.recvbuf = b->stage_recv;
    if (b->opt.in_place) {
        bench_buffer_copy(b, m->call.recvbuf, b->stage_recv, m->recv_bytes, 0);
    } else {
        staged.sendbuf = b->stage_send;
        bench_buffer_copy(b, (void *)m->call.sendbuf, b->stage_send, m->send_bytes, 0);
    }
    b->coll->call(&staged);
    bench_buffer_copy(b, m->call.recvbuf, b->stage_recv, m->recv_bytes, 1);
}

static void staged_describe(const bench_t *b, const bench_column_t *c)
{
    printf("# %s: each timed call copies in (%s), runs the collective on the host buffers with "
           "picoll bypassed, copies the result out\n",
           c->name,
           b->opt.mem == MEM_CUDA
               ? "cuMemcpyDtoH/HtoD, device <-> pinned host buffers (cuMemHostAlloc)"
               : "memcpy, user <-> separate host buffers");
}

static const bench_column_t staged_column = {
    .id = COLUMN_STAGED,
    .name = "staged MPI",
    .head = "staged MPI",
    .call = staged_call,
    .time = time_calls,
    .describe = staged_describe,
};

/* ------------------------------------------------------------------ NCCL */

/* Where NCCL can run the collective on these buffers: a communicator of the same ranks and a
 * stream of the application. */
static int nccl_setup(bench_t *b, bench_column_t *c)
{
    const char *skip = NULL;
    if (b->opt.mem != MEM_CUDA) {
        skip = "--nccl needs -d cuda (NCCL takes device buffers): ignored";
    } else if (b->coll->id == BENCH_COLL_OTHER) {
        skip = "no NCCL counterpart of this collective";
    } else if (b->coll->id == BENCH_COLL_ALLTOALL && b->opt.in_place) {
        skip = "NCCL has no in-place alltoall (-l)";
    }
    if (skip != NULL) {
        snprintf(c->why, sizeof(c->why), "%s", skip);
        return -1;
    }
    return bench_nccl_open(b->comm, b->type, b->coll->op, c->why, sizeof(c->why));
}

/* The call on the same buffers, returning once the stream has run it. An NCCL error after a
 * communicator was made is a failure of the run, as an MPI error is. */
static void nccl_call(bench_t *b, bench_column_t *c, const message_t *m)
{
    char why[BENCH_WHY_LEN];
    const void *send = b->opt.in_place ? NULL : m->call.sendbuf;
    if (bench_nccl_call(b->coll->id, send, m->call.recvbuf, (size_t)m->call.count, why,
                        sizeof(why)) != 0) {
        bench_column_fail(b, c, why);
    }
}

static void nccl_describe(const bench_t *b, const bench_column_t *c)
{
    (void)b;
    printf("# %s: %s, a communicator of the same ranks, on a stream of the application "
           "(cuStreamCreate); each timed call is the NCCL call then cuStreamSynchronize; "
           "picoll/NCCL = NCCL / picoll latency\n",
           c->option, bench_nccl_describe());
}

static void nccl_close(bench_t *b, bench_column_t *c)
{
    (void)b;
    if (c->state == COLUMN_ON) {
        bench_nccl_close();
    }
}

static const bench_column_t nccl_column = {
    .id = COLUMN_NCCL,
    .name = "NCCL",
    .head = "NCCL",
    .option = "nccl",
    .setup = nccl_setup,
    .call = nccl_call,
    .time = time_calls,
    .describe = nccl_describe,
    .close = nccl_close,
};

/* ------------------------------------------------------------------ the floor */

/* The launch floors, on the stream columns' stream where they have one; then the barrier floor,
 * on the device workspace that one call of the collective through picoll makes (the smallest). */
static int floor_setup(bench_t *b, bench_column_t *c)
{
    b->floor.n = b->opt.floor;
    if (b->opt.mem != MEM_CUDA) {
        b->floor.host = 1; /* a copy a round (bench_floor_host_copy): nothing to set up */
        return 0;
    }
    if (bench_floor_setup(&b->floor, b->comm, b->stream.cstream, c->why, sizeof(c->why)) != 0) {
        return -1;
    }
    message_t m = bench_message(b, 1);
    PMPI_Barrier(b->comm);
    b->picoll.set_bypass(0);
    mpi_call(b, c, &m);
    bench_floor_barrier(&b->floor, b->comm);
    return 0;
}

/* A size's floor: the copy of the bytes a rank's call moves, every rank at once. */
static double floor_time(bench_t *b, bench_column_t *c, size_t count, int iters, int warmup)
{
    size_t moved = bench_floor_moved(b->coll->name, b->np, count * b->opt.type->size);
    (void)c;
    if (b->floor.host) {
        return bench_floor_host_copy(&b->floor, b->comm, moved, iters, warmup);
    }
    return bench_floor_copy(&b->floor, b->comm, moved, iters);
}

static void floor_describe(const bench_t *b, const bench_column_t *c)
{
    (void)c;
    if (b->floor.host) {
        bench_floor_host_header(b->coll->name);
        return;
    }
    bench_floor_header(&b->floor, b->coll->name, b->np);
}

static void floor_close(bench_t *b, bench_column_t *c)
{
    (void)c;
    bench_floor_close(&b->floor);
}

static const bench_column_t floor_column = {
    .id = COLUMN_FLOOR,
    .name = "floor",
    .option = "floor",
    .setup = floor_setup,
    .time = floor_time,
    .describe = floor_describe,
    .close = floor_close,
};

/* ------------------------------------------------------------------ the columns of a run */

static const bench_column_t *const column_kinds[COLUMNS] = {
    [COLUMN_MPI] = &mpi_column,
    [COLUMN_STAGED] = &staged_column,
    [COLUMN_PICOLL] = &picoll_column,
    [COLUMN_NCCL] = &nccl_column,
    [COLUMN_ENQUEUE] = &bench_column_enqueue,
    [COLUMN_GRAPH] = &bench_column_graph,
    [COLUMN_FLOOR] = &floor_column,
    [COLUMN_OSU] = &bench_column_osu,
};

void bench_columns_open(bench_t *b)
{
    const options_t *o = &b->opt;
    const int ab = o->ab_rounds > 0;
    const int asked[COLUMNS] = {
        [COLUMN_MPI] = ab && o->baseline == BASELINE_MPI,
        [COLUMN_STAGED] = ab && o->baseline == BASELINE_STAGED,
        [COLUMN_PICOLL] = 1,
        [COLUMN_NCCL] = o->nccl,
        [COLUMN_ENQUEUE] = o->enqueue,
        [COLUMN_GRAPH] = o->graph,
        [COLUMN_FLOOR] = o->floor > 0,
        [COLUMN_OSU] = o->osu_timing,
    };
    for (int id = 0; id < COLUMNS; id++) {
        bench_column_t *c = &b->col[id];
        *c = *column_kinds[id];
        if (asked[id]) {
            c->state = c->setup == NULL || c->setup(b, c) == 0 ? COLUMN_ON : COLUMN_SKIPPED;
        }
    }
    b->nab = 0;
    if (ab) {
        b->ab[b->nab++] = &b->col[o->baseline == BASELINE_STAGED ? COLUMN_STAGED : COLUMN_MPI];
        b->ab[b->nab++] = &b->col[COLUMN_PICOLL];
        if (b->col[COLUMN_NCCL].state == COLUMN_ON) {
            b->ab[b->nab++] = &b->col[COLUMN_NCCL];
        }
    }
}

void bench_columns_close(bench_t *b)
{
    for (int id = COLUMNS - 1; id >= 0; id--) {
        bench_column_t *c = &b->col[id];
        if (c->state != COLUMN_OFF && c->close != NULL) {
            c->close(b, c);
        }
        c->state = COLUMN_OFF;
    }
}
