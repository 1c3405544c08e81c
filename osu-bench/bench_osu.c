/* osu-bench --osu-timing (bench_impl.h): the collective through picoll timed the way the OSU
 * micro-benchmarks 7.2 time it (issue 50, item 4), beside the picoll column, which times the same
 * call back to back with only the harness's PMPI_Barrier between calls.
 *
 * OSU's loop, per iteration: with -c, the buffers filled (a host-to-device copy of the inputs on
 * -d cuda) and BENCH_OSU_WARMUP_VALIDATION calls of the collective on other buffers (its
 * validation warm-up, each after an MPI_Barrier), then an MPI_Barrier; the call timed alone; an
 * MPI_Barrier; with -c the result copied back to the host. Its barriers are MPI_Barrier, as OSU
 * calls them (picoll takes no barrier: the MPI's own, as the harness's PMPI_Barrier). So a
 * difference between the two figures is what an isolated call costs more than a call right after
 * another one: the GPU's state after the fills and copies (clocks, caches), the warm-up calls on
 * other buffers (the memory kinds of other buffers looked up per call). */
#ifdef HAVE_CONFIG_H
#include "build-config.h"
#endif

#include "bench_impl.h"

#include <stdio.h>

/* The validation warm-up's call: the message's on the other buffers. */
static message_t osu_warmup_message(const bench_t *b, const message_t *m)
{
    message_t w = *m;
    w.call.sendbuf = b->opt.in_place ? MPI_IN_PLACE : b->osu_send;
    w.call.recvbuf = b->osu_recv;
    return w;
}

/* Before a timed call with -c: the buffers filled, the warm-up calls on the other buffers. */
static void osu_prepare(bench_t *b, const message_t *w, size_t count)
{
    bench_fill_inputs(b, count);
    for (int j = 0; j < BENCH_OSU_WARMUP_VALIDATION; j++) {
        MPI_Barrier(b->comm);
        b->coll->call(&w->call);
    }
    MPI_Barrier(b->comm);
}

/* This rank's mean latency (us) over iters calls timed as OSU times them, after warmup untimed
 * ones. The path of the last timed call is noted for the line under the row; with -c the last
 * timed call's result is checked element by element (every one is copied back, as OSU does). */
static double osu_time(bench_t *b, bench_column_t *c, size_t count, int iters, int warmup)
{
    message_t m = bench_message_timed(b, count), w = osu_warmup_message(b, &m);
    double total = 0.0;
    int ok = 1;
    MPI_Barrier(b->comm);
    for (int i = 0; i < warmup + iters; i++) {
        if (b->opt.validate) {
            osu_prepare(b, &w, count);
        }
        double t0 = MPI_Wtime();
        b->coll->call(&m.call);
        double t1 = MPI_Wtime();
        if (i == warmup + iters - 1 && b->picoll.last_algorithm != NULL) {
            b->osu_path = b->picoll.last_algorithm();
        }
        MPI_Barrier(b->comm);
        if (i >= warmup) {
            total += t1 - t0;
        }
        if (b->opt.validate && i < warmup + iters - 1) {
            bench_buffer_copy(b, m.call.recvbuf, b->hrecv, m.recv_bytes, 0);
        } else if (b->opt.validate) {
            ok = bench_check_result(b, count, c->name);
        }
    }
    b->osu_ok = ok;
    return total * BENCH_US_PER_S / iters;
}

/* One call of the message, for its validation. */
static void osu_call(bench_t *b, bench_column_t *c, const message_t *m)
{
    (void)c;
    b->coll->call(&m->call);
}

static int osu_setup(bench_t *b, bench_column_t *c)
{
    if (b->opt.validate && (b->osu_send == NULL || b->osu_recv == NULL)) {
        snprintf(c->why, sizeof(c->why), "the validation warm-up's buffers were not allocated");
        return -1;
    }
    return 0;
}

static void osu_describe(const bench_t *b, const bench_column_t *c)
{
    printf("# %s: the collective%s timed as the OSU micro-benchmarks 7.2 time it: each call "
           "alone between two MPI_Barrier calls, ",
           c->option, b->picoll.set_bypass != NULL ? " through picoll" : "");
    if (b->opt.validate) {
        printf("before each the buffers filled and %d calls on other buffers, after each the "
               "result copied back (-c)",
               BENCH_OSU_WARMUP_VALIDATION);
    } else {
        printf("no buffer fill and no calls on other buffers (no -c)");
    }
    printf("; under each row \"# osu timing (us):\" beside the %s column, whose calls only "
           "the harness's PMPI_Barrier separates\n",
           b->nab > 0 ? "picoll" : "latency");
}

const bench_column_t bench_column_osu = {
    .id = COLUMN_OSU,
    .name = "osu timing",
    .head = "OSU",
    .option = "osu-timing",
    .picoll = 1,
    .setup = osu_setup,
    .call = osu_call,
    .time = osu_time,
    .describe = osu_describe,
};

void bench_print_osu_timing(bench_t *b, double blocking_us)
{
    const bench_column_t *c = &b->col[COLUMN_OSU];
    if (c->state != COLUMN_ON || b->rank != 0) {
        return;
    }
    printf("# osu timing (us): %.2f, back to back %.2f, osu/back-to-back %.3fx", c->us, blocking_us,
           blocking_us > 0.0 ? c->us / blocking_us : 0.0);
    if (b->osu_path != NULL) {
        printf(", picoll path %s", b->osu_path);
    }
    printf("\n");
    fflush(stdout);
}
