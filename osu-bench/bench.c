/* osu-bench harness: the set-up and the run over the sizes (bench.h; the parts in bench_impl.h).
 *
 * Timing follows the OSU micro-benchmarks' method: each rank times every call of the collective
 * (a barrier between calls, outside the timing), takes its mean over the timed iterations, and
 * the reported latency is that mean averaged over ranks (min and max over ranks with -f).
 *
 * The harness's own bookkeeping (barriers, reductions of timings and validation verdicts) calls
 * PMPI_* directly, so it never goes through an interposed library it is measuring. */
#ifdef HAVE_CONFIG_H
#include "build-config.h"
#endif
#ifndef _GNU_SOURCE
#define _GNU_SOURCE 1 /* RTLD_DEFAULT */
#endif

#include "bench_cuda.h"
#include "bench_impl.h"

#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
    double avg, min, max; /* over ranks of each rank's mean, us */
} latency_t;

/* ------------------------------------------------------------------ one size */

static void size_iterations(const options_t *o, size_t size, int *iters, int *warmup)
{
    int large = size > BENCH_LARGE_MESSAGE;
    *iters = o->iters > 0 ? o->iters : large ? BENCH_ITERS_LARGE : BENCH_ITERS_SMALL;
    *warmup = o->warmup >= 0 ? o->warmup : large ? BENCH_WARMUP_LARGE : BENCH_WARMUP_SMALL;
}

static latency_t gather_latency(const bench_t *b, double mine)
{
    latency_t l = {0.0, 0.0, 0.0};
    double sum = 0.0;
    PMPI_Reduce(&mine, &sum, 1, MPI_DOUBLE, MPI_SUM, 0, b->comm);
    PMPI_Reduce(&mine, &l.min, 1, MPI_DOUBLE, MPI_MIN, 0, b->comm);
    PMPI_Reduce(&mine, &l.max, 1, MPI_DOUBLE, MPI_MAX, 0, b->comm);
    l.avg = sum / b->np;
    return l;
}

/* The stream columns that run (--enqueue, --graph), after the others of a size or of a round of
 * --ab: each one's latency (OSU's average over ranks, on rank 0) into its lat[round], and when
 * validate_now its result checked after its timed calls (always, -c or not: a broken enqueue
 * must not give a fast figure; once per size). Returns 1 when every check passed. */
static int run_stream_columns(bench_t *b, size_t count, int iters, int warmup, int round,
                              int validate_now)
{
    int ok = 1;
    for (int id = COLUMN_STREAM_FIRST; id < COLUMN_STREAM_FIRST + STREAM_COLUMNS; id++) {
        bench_column_t *c = &b->col[id];
        if (c->state != COLUMN_ON) {
            continue;
        }
        c->lat[round] = gather_latency(b, c->time(b, c, count, iters, warmup)).avg;
        c->us = c->lat[round];
        if (validate_now) {
            ok &= bench_validate(b, c, count, c->name);
        }
    }
    return ok;
}

/* --osu-timing, after the others of a size or of a round of --ab (picoll on): its latency into
 * lat[round], and with -c its last timed call's result agreed on. Returns 1 when that passed or it
 * does not run. */
static int run_osu_timing(bench_t *b, size_t count, int iters, int warmup, int round)
{
    bench_column_t *c = &b->col[COLUMN_OSU];
    if (c->state != COLUMN_ON) {
        return 1;
    }
    PMPI_Barrier(b->comm);
    if (b->picoll.set_bypass != NULL) {
        b->picoll.set_bypass(0);
    }
    b->osu_ok = 1;
    c->lat[round] = gather_latency(b, c->time(b, c, count, iters, warmup)).avg;
    c->us = c->lat[round];
    return bench_all_ranks(b, b->osu_ok);
}

/* OSU's output: one row per size, the collective as the program runs it, then the stream
 * columns. Returns 1 when every validation passed. */
static int run_osu(bench_t *b, size_t count)
{
    bench_column_t *c = &b->col[COLUMN_PICOLL];
    size_t size = count * b->opt.type->size;
    int iters, warmup, ok = 1;
    latency_t l;
    size_iterations(&b->opt, size, &iters, &warmup);
    l = gather_latency(b, c->time(b, c, count, iters, warmup));
    if (b->opt.validate) {
        ok = bench_validate(b, c, count, "");
    }
    ok &= run_stream_columns(b, count, iters, warmup, 0, 1);
    ok &= bench_stream_check(b);
    ok &= run_osu_timing(b, count, iters, warmup, 0);
    if (b->rank == 0) {
        bench_print_osu_row(b, size, l.avg, l.min, l.max, iters, ok);
    }
    if (b->counts.n > 0) {
        bench_report_driver_calls(b);
    }
    bench_print_path(b);
    bench_print_stream_calls(b);
    bench_print_osu_timing(b, l.avg);
    return ok;
}

static int compare_doubles(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

double bench_rounds_median(const bench_t *b, const double *rounds)
{
    int n = b->opt.ab_rounds;
    double *v = b->sorted;
    memcpy(v, rounds, (size_t)n * sizeof(*v));
    qsort(v, (size_t)n, sizeof(*v), compare_doubles);
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

/* Median of c's rounds: with 2 rounds, their mean; with more, robust to a round that the machine
 * disturbed. */
static double median(const bench_t *b, const bench_column_t *c)
{
    return bench_rounds_median(b, c->lat);
}

/* A/B: rounds of the row's columns (the baseline, plain or staged MPI, with picoll bypassed,
 * then picoll, then with --nccl NCCL), then the stream columns with picoll on, on every rank
 * between the same barriers. Each round's latency is OSU's (each rank's mean averaged over
 * ranks); a row reports the median over rounds of each. Returns 1 when every validation passed. */
static int time_ab_rounds(bench_t *b, size_t count, int iters, int warmup)
{
    int ok = 1;
    for (int round = 0; round < b->opt.ab_rounds; round++) {
        for (int i = 0; i < b->nab; i++) {
            bench_column_t *c = b->ab[i];
            PMPI_Barrier(b->comm);
            b->picoll.set_bypass(!c->picoll);
            c->lat[round] = gather_latency(b, c->time(b, c, count, iters, warmup)).avg;
            if (b->opt.validate && round == 0) {
                ok &= bench_validate(b, c, count, c->name);
            }
        }
        /* the stream columns, with picoll on: it runs them */
        PMPI_Barrier(b->comm);
        b->picoll.set_bypass(0);
        ok &= run_stream_columns(b, count, iters, warmup, round, round == 0);
        ok &= run_osu_timing(b, count, iters, warmup, round);
        bench_column_t *fl = &b->col[COLUMN_FLOOR];
        if (fl->state == COLUMN_ON && b->floor.host) { /* host buffers: the floor every round */
            double us = fl->time(b, fl, count, iters, warmup); /* -1 on every rank alike */
            fl->lat[round] = us < 0.0 ? -1.0 : gather_latency(b, us).avg;
            if (us >= 0.0 && b->floor.cross > 0) { /* the same on every rank */
                b->cross[round] = gather_latency(b, b->floor.cross_us).avg;
            }
        }
    }
    PMPI_Barrier(b->comm);
    b->picoll.set_bypass(0);
    return ok;
}

/* One --ab row and the lines under it (a "# rounds" line with every round's latencies). */
static int run_ab(bench_t *b, size_t count, int first)
{
    size_t size = count * b->opt.type->size;
    bench_column_t *fl = &b->col[COLUMN_FLOOR];
    int iters, warmup, ok;
    size_iterations(&b->opt, size, &iters, &warmup);
    ok = time_ab_rounds(b, count, iters, warmup);
    ok &= bench_stream_check(b);
    if (fl->state == COLUMN_ON && !b->floor.host) {
        fl->us = fl->time(b, fl, count, iters, warmup);
    }
    if (b->rank == 0) {
        for (int id = 0; id < COLUMNS; id++) {
            bench_column_t *c = &b->col[id];
            if (c->state == COLUMN_ON &&
                (c->call != NULL || (id == COLUMN_FLOOR && b->floor.host))) {
                c->us = median(b, c);
            }
        }
        if (first) {
            bench_print_picoll_comm(b);
        }
        bench_print_ab_row(b, size, ok);
    }
    if (b->counts.n > 0) {
        bench_report_driver_calls(b);
    }
    bench_print_path(b);
    if (b->rank == 0) {
        bench_print_rounds(b);
    }
    bench_print_stream_calls(b);
    if (b->rank == 0) {
        bench_print_floor(b, size);
    }
    bench_print_osu_timing(b, b->col[COLUMN_PICOLL].us);
    return ok;
}

/* ------------------------------------------------------------------ the set-up */

/* Finds picoll's functions in the process (libpicoll.so preloaded or linked). */
static int picoll_lookup(picoll_api_t *api)
{
    *(void **)&api->set_bypass = dlsym(RTLD_DEFAULT, "picoll_set_bypass");
    *(void **)&api->active = dlsym(RTLD_DEFAULT, "picoll_active");
    *(void **)&api->version = dlsym(RTLD_DEFAULT, "picoll_version");
    *(void **)&api->comm_query = dlsym(RTLD_DEFAULT, "picoll_comm_query");
    return api->set_bypass != NULL ? 0 : -1;
}

/* Driver calls are counted where every rank's driver counts the same entry points (the reports
 * are collective); otherwise on none. */
static void counting_setup(bench_t *b)
{
    int n = bench_cuda_counted_calls(), least = 0, most = 0;
    long *calls = n > 0 ? calloc(3 * (size_t)n, sizeof(*calls)) : NULL;
    if (calls == NULL) {
        n = 0;
    }
    PMPI_Allreduce(&n, &least, 1, MPI_INT, MPI_MIN, b->comm);
    PMPI_Allreduce(&n, &most, 1, MPI_INT, MPI_MAX, b->comm);
    if (least != most || least == 0) {
        if (b->rank == 0 && most > 0) {
            fprintf(stderr,
                    "osu_%s: driver calls not counted: the ranks' drivers count %d to %d "
                    "entry points\n",
                    b->coll->name, least, most);
        }
        free(calls);
        return;
    }
    b->counts.n = n;
    b->counts.start = calls;
    b->counts.end = calls + n;
    b->counts.sum = calls + 2 * (size_t)n;
}

/* Collective: picoll's functions, the device of -d cuda and the buffers. 0, or 1 (rank 0 says
 * why; nothing is left to free). */
static int bench_setup(bench_t *b, size_t max_count)
{
    const options_t *o = &b->opt;
    char why[BENCH_WHY_LEN] = "";
    b->type = bench_type_handle(o->type->kind);
    if (bench_inputs_spread(b) != 0) {
        return 1;
    }
    *(void **)&b->picoll.last_algorithm = dlsym(RTLD_DEFAULT, "picoll_last_algorithm");
    if (o->ab_rounds > 0 && !bench_all_ranks(b, picoll_lookup(&b->picoll) == 0)) {
        if (b->rank == 0) {
            fprintf(stderr,
                    "osu_%s: --ab needs libpicoll.so in the process: run the ranks with "
                    "LD_PRELOAD=/path/to/libpicoll.so\n",
                    b->coll->name);
        }
        return 1;
    }
    if (o->mem == MEM_CUDA &&
        !bench_all_ranks(b, bench_device_setup(b->comm, why, sizeof(why)) == 0)) {
        if (b->rank == 0) {
            fprintf(stderr, "osu_%s: -d cuda: %s\n", b->coll->name,
                    why[0] ? why : "CUDA set-up failed on another rank");
        }
        return 1;
    }
    if (o->mem == MEM_CUDA) {
        counting_setup(b);
    }
    if (!bench_all_ranks(b, bench_buffers_alloc(b, max_count) == 0)) {
        if (b->rank == 0) {
            fprintf(stderr,
                    "osu_%s: cannot allocate the buffers of %zu-byte messages on %d ranks\n",
                    b->coll->name, max_count * o->type->size, b->np);
        }
        bench_buffers_free(b);
        free(b->counts.start);
        return 1;
    }
    return 0;
}

/* Every column's latencies of a size: a round's worth each (one without --ab), and one more for
 * the medians. NULL where out of memory. */
static double *rounds_alloc(bench_t *b)
{
    size_t rounds = b->opt.ab_rounds > 0 ? (size_t)b->opt.ab_rounds : 1;
    double *lat = calloc((COLUMNS + 2) * rounds, sizeof(*lat));
    if (lat == NULL) {
        return NULL;
    }
    for (int id = 0; id < COLUMNS; id++) {
        b->col[id].lat = lat + (size_t)id * rounds;
    }
    b->sorted = lat + COLUMNS * rounds;
    b->cross = lat + (COLUMNS + 1) * rounds;
    return lat;
}

static int bench_run(bench_t *b)
{
    const options_t *o = &b->opt;
    size_t esize = o->type->size, max_count = o->max_size / esize, count;
    double *lat;
    int status = 0, first = 1;

    if (bench_setup(b, max_count) != 0) {
        return 1;
    }
    bench_columns_open(b);
    lat = rounds_alloc(b);
    if (lat == NULL) {
        fprintf(stderr, "osu_%s: out of memory\n", b->coll->name);
        MPI_Abort(b->comm, 1);
    }
    if (b->rank == 0) {
        bench_print_header(b);
    }
    count = (o->min_size + esize - 1) / esize;
    if (count == 0) {
        count = 1;
    }
    for (; count <= max_count; count *= o->factor) {
        int ok = o->ab_rounds > 0 ? run_ab(b, count, first) : run_osu(b, count);
        first = 0;
        if (!ok) {
            status = 1;
        }
        if (count > max_count / o->factor) {
            break;
        }
    }
    bench_columns_close(b);
    bench_buffers_free(b);
    free(b->counts.start);
    free(lat);
    return status;
}

int bench_main(const bench_coll_t *coll, int argc, char **argv)
{
    bench_t b;
    char why[BENCH_WHY_LEN] = "";
    options_result_t parsed;
    int status;

    memset(&b, 0, sizeof(b));
    b.coll = coll;
    b.comm = MPI_COMM_WORLD;
    b.stream.scomm = MPI_COMM_NULL;
    b.stream.mpix_stream = MPIX_STREAM_NULL;
    parsed = bench_options_parse(argc, argv, &b.opt, why, sizeof(why));
    /* stream communicators (--enqueue, --graph) need MPI_THREAD_MULTIPLE: asked for only then, so
     * that the other runs measure MPI as OSU's programs initialise it */
    if (b.opt.enqueue || b.opt.graph) {
        MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &b.thread_level);
    } else {
        MPI_Init(&argc, &argv);
        PMPI_Query_thread(&b.thread_level);
    }
    PMPI_Comm_rank(b.comm, &b.rank);
    PMPI_Comm_size(b.comm, &b.np);
    status = bench_options_report(coll, parsed, why, b.rank);
    if (status == 0) {
        status = bench_run(&b);
    }
    MPI_Finalize();
    return status == 2 ? 0 : status;
}
