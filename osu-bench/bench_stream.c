/* osu-bench: the stream-ordered columns (bench_impl.h). --enqueue: per size, N (-i)
 * MPIX_<coll>_enqueue calls on a stream communicator of the benchmark's CUDA stream, issued back
 * to back, then one cuStreamSynchronize. --graph: one such call captured into a CUDA graph per
 * size, the graph launched N times back to back, then one synchronise. Both go through picoll's
 * MPIX_Stream calls, found at run time, on one stream they share; each row checks that the
 * stream ran every call issued. */
#ifdef HAVE_CONFIG_H
#include "build-config.h"
#endif
#ifndef _GNU_SOURCE
#define _GNU_SOURCE 1 /* RTLD_DEFAULT */
#endif

#include "bench_cuda.h"
#include "bench_impl.h"

#include <ctype.h>
#include <dlfcn.h>
#include <stdio.h>

/* ------------------------------------------------------------------ the calls */

/* The collective's MPIX_*_enqueue on the stream communicator: returns at once. */
static int mpix_enqueue(const bench_t *b, const bench_call_t *c)
{
    const mpix_api_t *x = &b->stream.mpix;
    MPI_Comm scomm = b->stream.scomm;
    switch (b->coll->id) {
    case BENCH_COLL_ALLREDUCE:
        return x->allreduce(c->sendbuf, c->recvbuf, c->count, c->type, b->coll->op, scomm);
    case BENCH_COLL_ALLGATHER:
        return x->allgather(c->sendbuf, c->count, c->type, c->recvbuf, c->count, c->type, scomm);
    case BENCH_COLL_ALLTOALL:
        return x->alltoall(c->sendbuf, c->count, c->type, c->recvbuf, c->count, c->type, scomm);
    case BENCH_COLL_OTHER: break;
    }
    return MPI_ERR_OTHER;
}

/* The calls picoll's progress thread of the stream has run so far, a graph's replays included,
 * and those enqueued on picoll's kernels on the stream itself (*kernels: a graph's replays of
 * those are the GPU's alone, not counted). */
static long stream_runs(const bench_t *b, long *kernels)
{
    long staged = 0, host = 0, device = 0, captured = 0, runs = 0, k = 0;
    b->stream.mpix.query(b->stream.mpix_stream, &staged, &host, &device, &captured, &runs, &k);
    if (kernels != NULL) {
        *kernels = k;
    }
    return runs + k;
}

/* Calls column c ran between two readings of stream_runs (before: runs, after: the count now):
 * a graph whose captured call is on picoll's kernels ran every launch on the GPU, where the
 * stream's counts cannot see it (its results are checked by the validation as any call's). */
static long stream_ran_since(const bench_t *b, const bench_column_t *c, long runs, long issued)
{
    if (c->id == COLUMN_GRAPH && b->stream.graph_kernels) {
        return issued;
    }
    return stream_runs(b, NULL) - runs;
}

/* One call of column c on the stream, returning at once: the collective enqueued, or the size's
 * graph (its one captured call) launched. */
static void stream_issue(bench_t *b, bench_column_t *c, const message_t *m)
{
    char why[BENCH_WHY_LEN];
    if (c->id == COLUMN_GRAPH) {
        if (bench_cuda_graph_launch(b->stream.graph_exec, b->stream.cstream, why, sizeof(why)) !=
            0) {
            bench_column_fail(b, c, why);
        }
    } else if (bench_mpi_why(mpix_enqueue(b, &m->call), "the enqueue", why, sizeof(why)) != 0) {
        bench_column_fail(b, c, why);
    }
    c->issued++;
}

static void stream_synchronize(const bench_t *b, const bench_column_t *c)
{
    char why[BENCH_WHY_LEN];
    if (bench_cuda_stream_synchronize(b->stream.cstream, why, sizeof(why)) != 0) {
        bench_column_fail(b, c, why);
    }
}

/* --graph: the graph of the message, one call enqueued while the stream captures, instantiated
 * once per size and launched for every call of it. */
static void graph_prepare(bench_t *b, bench_column_t *c, const message_t *m)
{
    bench_stream_t *s = &b->stream;
    char why[BENCH_WHY_LEN];
    long kernels0 = 0, kernels1 = 0;
    int rc;
    if (s->graph_exec != NULL && s->graph_count == (size_t)m->call.count) {
        return;
    }
    bench_cuda_graph_destroy(s->graph_exec);
    s->graph_exec = NULL;
    if (bench_cuda_graph_begin(s->cstream, why, sizeof(why)) != 0) {
        bench_column_fail(b, c, why);
    }
    stream_runs(b, &kernels0);
    rc = mpix_enqueue(b, &m->call);
    stream_runs(b, &kernels1);
    s->graph_kernels = kernels1 > kernels0;
    if (bench_cuda_graph_end(s->cstream, &s->graph_exec, why, sizeof(why)) != 0) {
        bench_column_fail(b, c, why);
    }
    if (bench_mpi_why(rc, "the enqueue while capturing", why, sizeof(why)) != 0) {
        bench_column_fail(b, c, why);
    }
    s->graph_count = (size_t)m->call.count;
}

/* One call, waited for (validation). */
static void stream_call(bench_t *b, bench_column_t *c, const message_t *m)
{
    long runs = stream_runs(b, NULL);
    stream_issue(b, c, m);
    stream_synchronize(b, c);
    c->ran += stream_ran_since(b, c, runs, 1);
}

/* This rank's time per call (us) of iters calls issued back to back on the stream and one
 * synchronise, after warmup untimed ones (issued, synchronised). The stream's progress thread
 * must have run every call issued (counted for the row). */
static double stream_time(bench_t *b, bench_column_t *c, size_t count, int iters, int warmup)
{
    message_t m = bench_message_timed(b, count);
    long runs;
    double t0, t1;
    if (c->id == COLUMN_GRAPH) {
        graph_prepare(b, c, &m);
    }
    runs = stream_runs(b, NULL);
    for (int i = 0; i < warmup; i++) {
        stream_issue(b, c, &m);
    }
    stream_synchronize(b, c);
    PMPI_Barrier(b->comm);
    t0 = MPI_Wtime();
    for (int i = 0; i < iters; i++) {
        stream_issue(b, c, &m);
    }
    stream_synchronize(b, c);
    t1 = MPI_Wtime();
    c->ran += stream_ran_since(b, c, runs, (long)warmup + iters);
    PMPI_Barrier(b->comm);
    return (t1 - t0) * BENCH_US_PER_S / iters;
}

int bench_stream_check(const bench_t *b)
{
    int ok = 1;
    for (int id = COLUMN_STREAM_FIRST; id < COLUMN_STREAM_FIRST + STREAM_COLUMNS; id++) {
        const bench_column_t *c = &b->col[id];
        if (c->state == COLUMN_ON && c->ran != c->issued) {
            fprintf(stderr, "osu_%s: rank %d: %s column: %ld calls issued, %ld ran on the stream\n",
                    b->coll->name, b->rank, c->name, c->issued, c->ran);
            ok = 0;
        }
    }
    return bench_all_ranks(b, ok);
}

/* ------------------------------------------------------------------ the shared stream */

/* picoll's MPIX_Stream calls in the process (picoll_stream_query tells picoll's from those of an
 * MPI that has its own): 0, or -1 where one is missing. */
static int mpix_lookup(mpix_api_t *x)
{
    *(void **)&x->info_set_hex = dlsym(RTLD_DEFAULT, "MPIX_Info_set_hex");
    *(void **)&x->create = dlsym(RTLD_DEFAULT, "MPIX_Stream_create");
    *(void **)&x->free_ = dlsym(RTLD_DEFAULT, "MPIX_Stream_free");
    *(void **)&x->comm_create = dlsym(RTLD_DEFAULT, "MPIX_Stream_comm_create");
    *(void **)&x->allreduce = dlsym(RTLD_DEFAULT, "MPIX_Allreduce_enqueue");
    *(void **)&x->allgather = dlsym(RTLD_DEFAULT, "MPIX_Allgather_enqueue");
    *(void **)&x->alltoall = dlsym(RTLD_DEFAULT, "MPIX_Alltoall_enqueue");
    *(void **)&x->query = dlsym(RTLD_DEFAULT, "picoll_stream_query");
    return x->info_set_hex && x->create && x->free_ && x->comm_create && x->allreduce &&
                   x->allgather && x->alltoall && x->query
               ? 0
               : -1;
}

/* This rank's part of the set-up: the benchmark's CUDA stream and picoll's stream object of it.
 * Returns 0, or -1 and why. */
static int stream_open_local(bench_t *b, char *why, size_t len)
{
    bench_stream_t *s = &b->stream;
    MPI_Info info;
    int rc;
    if (b->thread_level < MPI_THREAD_MULTIPLE) {
        snprintf(why, len,
                 "MPI gave thread level %d, not MPI_THREAD_MULTIPLE, which stream "
                 "communicators need",
                 b->thread_level);
        return -1;
    }
    if (mpix_lookup(&s->mpix) != 0) {
        snprintf(why, len,
                 "picoll's MPIX_Stream calls not found: run with libpicoll.so preloaded "
                 "(LD_PRELOAD=/path/to/libpicoll.so)");
        return -1;
    }
    if (bench_cuda_stream_create(&s->cstream, why, len) != 0) {
        return -1;
    }
    PMPI_Info_create(&info);
    PMPI_Info_set(info, "type", "cudaStream_t");
    rc = s->mpix.info_set_hex(info, "value", &s->cstream, (int)sizeof(s->cstream));
    if (rc == MPI_SUCCESS) {
        rc = s->mpix.create(info, &s->mpix_stream);
    }
    PMPI_Info_free(&info);
    return bench_mpi_why(rc, "MPIX_Stream_create", why, len);
}

/* Collective: every rank's part, then the stream communicator; errors come back as codes, to be
 * a skip line rather than an abort. 1 where every rank has them, else 0 (why: this rank's
 * reason, empty where another rank failed). */
static int stream_open_all(bench_t *b, char *why, size_t len)
{
    bench_stream_t *s = &b->stream;
    int ok;
    PMPI_Comm_set_errhandler(b->comm, MPI_ERRORS_RETURN);
    ok = bench_all_ranks(b, stream_open_local(b, why, len) == 0);
    if (ok) {
        int rc = s->mpix.comm_create(b->comm, s->mpix_stream, &s->scomm);
        if (bench_mpi_why(rc, "MPIX_Stream_comm_create", why, len) != 0) {
            s->scomm = MPI_COMM_NULL;
        }
        ok = bench_all_ranks(b, rc == MPI_SUCCESS);
    }
    PMPI_Comm_set_errhandler(b->comm, MPI_ERRORS_ARE_FATAL);
    if (ok) {
        PMPI_Comm_set_errhandler(s->scomm, MPI_ERRORS_RETURN);
    }
    return ok;
}

/* Collective, once for both columns: the shared stream. 0, or -1 with why in b->stream.why. */
static int stream_open(bench_t *b)
{
    bench_stream_t *s = &b->stream;
    int ok = 0;
    if (s->opened != 0) {
        return s->opened > 0 ? 0 : -1;
    }
    if (b->opt.mem != MEM_CUDA) {
        snprintf(s->why, sizeof(s->why),
                 "needs -d cuda (the calls are ordered on a CUDA stream): ignored");
    } else if (b->coll->id == BENCH_COLL_OTHER) {
        snprintf(s->why, sizeof(s->why), "no stream-ordered counterpart of this collective");
    } else {
        ok = stream_open_all(b, s->why, sizeof(s->why));
    }
    if (!ok && s->why[0] == '\0') {
        snprintf(s->why, sizeof(s->why), "the set-up failed on another rank");
    }
    s->opened = ok ? 1 : -1;
    return ok ? 0 : -1;
}

/* The stream's graph, communicator and streams, once (before the buffers are freed). */
static void stream_close(bench_t *b, bench_column_t *c)
{
    bench_stream_t *s = &b->stream;
    (void)c;
    bench_cuda_graph_destroy(s->graph_exec);
    s->graph_exec = NULL;
    if (s->scomm != MPI_COMM_NULL) {
        MPI_Comm_free(&s->scomm);
    }
    if (s->mpix_stream != MPIX_STREAM_NULL) {
        s->mpix.free_(&s->mpix_stream);
        s->mpix_stream = MPIX_STREAM_NULL;
    }
    bench_cuda_stream_destroy(s->cstream);
    s->cstream = NULL;
}

/* ------------------------------------------------------------------ the two columns */

static int enqueue_setup(bench_t *b, bench_column_t *c)
{
    if (stream_open(b) != 0) {
        snprintf(c->why, sizeof(c->why), "%s", b->stream.why);
        return -1;
    }
    return 0;
}

/* The shared stream, and the graph calls in every rank's driver. */
static int graph_setup(bench_t *b, bench_column_t *c)
{
    char why[BENCH_WHY_LEN] = "";
    if (enqueue_setup(b, c) != 0) {
        return -1;
    }
    if (!bench_all_ranks(b, bench_cuda_graph_check(why, sizeof(why)) == 0)) {
        snprintf(c->why, sizeof(c->why), "%s",
                 why[0] ? why : "no graph calls in another rank's CUDA driver");
        return -1;
    }
    return 0;
}

/* What column c is: how its calls go to the stream (how). */
static void stream_describe_how(const bench_t *b, const bench_column_t *c, const char *how)
{
    printf("# %s: MPIX_%c%s_enqueue on a stream communicator of the benchmark's CUDA stream "
           "(cuStreamCreate), through picoll: per size, %s, then one cuStreamSynchronize; "
           "latency is the time per call, each rank's averaged over ranks\n",
           c->option, toupper((unsigned char)b->coll->name[0]), b->coll->name + 1, how);
}

static void enqueue_describe(const bench_t *b, const bench_column_t *c)
{
    stream_describe_how(b, c, "each call enqueued, back to back");
}

static void graph_describe(const bench_t *b, const bench_column_t *c)
{
    stream_describe_how(b, c,
                        "one call captured into a CUDA graph (cuStreamBeginCapture), the graph "
                        "launched for each call, back to back");
}

const bench_column_t bench_column_enqueue = {
    .id = COLUMN_ENQUEUE,
    .name = "enqueue",
    .head = "Enqueue",
    .option = "enqueue",
    .picoll = 1,
    .setup = enqueue_setup,
    .call = stream_call,
    .time = stream_time,
    .describe = enqueue_describe,
    .close = stream_close,
};

const bench_column_t bench_column_graph = {
    .id = COLUMN_GRAPH,
    .name = "graph",
    .head = "Graph",
    .option = "graph",
    .picoll = 1,
    .setup = graph_setup,
    .call = stream_call,
    .time = stream_time,
    .describe = graph_describe,
    .close = stream_close,
};
