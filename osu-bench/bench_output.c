/* osu-bench: what rank 0 prints (bench_impl.h): the header (OSU's, or --ab's with a line per
 * column that says what it is or why it is skipped), the rows, and the lines under a row (driver
 * calls, picoll's path, each round's latencies, the stream's calls, the floor). */
#ifdef HAVE_CONFIG_H
#include "build-config.h"
#endif

#include "bench_cuda.h"
#include "bench_impl.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* A header field: a column's head and what follows it ("MPI" "(us)"). */
#define HEAD_LEN 32

/* Bus bandwidth in MB/s (bytes per microsecond) of a message of size bytes. */
static double busbw(const bench_t *b, size_t size, double us)
{
    return us > 0.0 ? (double)size * b->coll->busbw_factor(b->np) / us : 0.0;
}

/* The stream columns that run, in order; returns how many. */
static int stream_columns_on(const bench_t *b, const bench_column_t **on)
{
    int n = 0;
    for (int id = COLUMN_STREAM_FIRST; id < COLUMN_STREAM_FIRST + STREAM_COLUMNS; id++) {
        if (b->col[id].state == COLUMN_ON) {
            on[n++] = &b->col[id];
        }
    }
    return n;
}

/* ------------------------------------------------------------------ the header */

/* Each column's line: what it is where it runs (describe), or why it is skipped. */
static void print_column_lines(const bench_t *b)
{
    for (int id = 0; id < COLUMNS; id++) {
        const bench_column_t *c = &b->col[id];
        if (c->state == COLUMN_SKIPPED) {
            printf("# %s: skipped: %s\n", c->option, c->why);
        } else if (c->state == COLUMN_ON && c->describe != NULL) {
            c->describe(b, c);
        }
    }
}

/* --ab's column names: the A column's and picoll's latencies, the speed-up and their bus
 * bandwidths, then NCCL's latency, picoll/NCCL and its bus bandwidth where it runs. */
static void print_ab_heads(const bench_t *b)
{
    char lat[AB_COLUMNS][HEAD_LEN], bw[AB_COLUMNS][HEAD_LEN], ratio[HEAD_LEN];
    for (int i = 0; i < b->nab; i++) {
        snprintf(lat[i], sizeof(lat[i]), "%s(us)", b->ab[i]->head);
        snprintf(bw[i], sizeof(bw[i]), "%s BusBW(MB/s)", b->ab[i]->head);
    }
    printf("%-*s%*s%*s%*s%*s%*s", COL_SIZE, "# Size", COL_FIELD, lat[0], COL_FIELD, lat[1],
           COL_FIELD, "Speed-up", COL_BUSBW, bw[0], COL_BUSBW, bw[1]);
    if (b->nab == AB_COLUMNS) {
        snprintf(ratio, sizeof(ratio), "%s/%s", b->ab[1]->head, b->ab[2]->head);
        printf("%*s%*s%*s", COL_FIELD, lat[2], COL_FIELD, ratio, COL_BUSBW, bw[2]);
    }
}

void bench_print_header(const bench_t *b)
{
    const options_t *o = &b->opt;
    const bench_column_t *on[STREAM_COLUMNS];
    int n = stream_columns_on(b, on);
    char head[HEAD_LEN];
    printf("# OSU MPI%s %s Latency Test (picoll osu-bench %s)\n", o->mem == MEM_CUDA ? "-CUDA" : "",
           b->coll->title, PACKAGE_VERSION);
    printf("# Datatype: %s.\n", o->type->mpi_name);
    if (b->nab > 0) {
        printf("# picoll A/B: per size, %d round%s of %s (bypass) then picoll; "
               "latency is each rank's mean averaged over ranks, median over rounds\n",
               o->ab_rounds, o->ab_rounds == 1 ? "" : "s", b->ab[0]->name);
    }
    print_column_lines(b);
    if (b->nab > 0) {
        print_ab_heads(b);
    } else {
        printf("%-*s%*s", COL_SIZE, "# Size", COL_FIELD, "Avg Latency(us)");
        if (o->full) {
            printf("%*s%*s%*s%*s", COL_FIELD, "Min Latency(us)", COL_FIELD, "Max Latency(us)",
                   COL_ITERS, "Iterations", COL_FIELD, "Bus BW(MB/s)");
        }
    }
    for (int i = 0; i < n; i++) {
        snprintf(head, sizeof(head), "%s(us)", on[i]->head);
        printf("%*s", COL_FIELD, head);
    }
    if (o->validate) {
        printf("%*s", COL_FIELD, "Validation");
    }
    printf("\n");
    if (b->counts.n > 0) {
        printf("# driver calls: the loaded CUDA driver counts its calls (fakecuda_call_counts); "
               "under each row, the calls per timed call of %s, the most over ranks\n",
               b->nab > 0 ? "the picoll column" : "the collective");
    }
    fflush(stdout);
}

/* ------------------------------------------------------------------ the rows */

/* The end of a row: the stream columns that run, then the validation's verdict (-c). */
static void print_row_end(const bench_t *b, int ok)
{
    const bench_column_t *on[STREAM_COLUMNS];
    int n = stream_columns_on(b, on);
    for (int i = 0; i < n; i++) {
        printf("%*.2f", COL_FIELD, on[i]->us);
    }
    if (b->opt.validate) {
        printf("%*s", COL_FIELD, ok ? "Pass" : "Fail");
    }
    printf("\n");
    fflush(stdout);
}

void bench_print_osu_row(const bench_t *b, size_t size, double avg, double min, double max,
                         int iters, int ok)
{
    printf("%-*zu%*.2f", COL_SIZE, size, COL_FIELD, avg);
    if (b->opt.full) {
        printf("%*.2f%*.2f%*d%*.2f", COL_FIELD, min, COL_FIELD, max, COL_ITERS, iters, COL_FIELD,
               busbw(b, size, avg));
    }
    print_row_end(b, ok);
}

void bench_print_ab_row(const bench_t *b, size_t size, int ok)
{
    double a = b->ab[0]->us, pic = b->ab[1]->us;
    printf("%-*zu%*.2f%*.2f%*.3f%*.2f%*.2f", COL_SIZE, size, COL_FIELD, a, COL_FIELD, pic,
           COL_FIELD, pic > 0.0 ? a / pic : 0.0, COL_BUSBW, busbw(b, size, a), COL_BUSBW,
           busbw(b, size, pic));
    if (b->nab == AB_COLUMNS) {
        double c = b->ab[2]->us;
        printf("%*.2f%*.3f%*.2f", COL_FIELD, c, COL_FIELD, pic > 0.0 ? c / pic : 0.0, COL_BUSBW,
               busbw(b, size, c));
    }
    print_row_end(b, ok);
}

void bench_print_picoll_comm(const bench_t *b)
{
    picoll_comm_info_t info;
    if (b->picoll.comm_query == NULL) {
        return;
    }
    memset(&info, 0, sizeof(info));
    if (b->picoll.comm_query(b->comm, &info) != MPI_SUCCESS) {
        printf("# picoll on MPI_COMM_WORLD: no context (picoll not active: the picoll column is "
               "plain MPI)\n");
    } else if (!info.enabled) {
        printf("# picoll on MPI_COMM_WORLD: disabled (%s): the picoll column is plain MPI\n",
               info.reason);
    } else {
        printf("# picoll on MPI_COMM_WORLD: enabled, %d ranks, %d local, %d node%s\n", info.size,
               info.local_size, info.num_nodes, info.num_nodes == 1 ? "" : "s");
    }
    fflush(stdout);
}

/* ------------------------------------------------------------------ under a row */

/* A count of calls over timed calls, per call: whole where it divides, else to two places. */
static void print_per_call(long calls, long timed)
{
    if (calls % timed == 0) {
        printf("%ld", calls / timed);
    } else {
        printf("%.2f", (double)calls / (double)timed);
    }
}

/* "# driver calls per call: 5 (cuCtxGetCurrent 1, ...)": the total (the most over ranks), then
 * each entry point called (its most over ranks), and the least total where ranks differ. */
static void print_driver_calls(const bench_t *b, const long *max, long most, long least)
{
    const char *sep = " (";
    printf("# driver calls per call: ");
    print_per_call(most, b->counts.timed);
    for (int i = 0; i < b->counts.n; i++) {
        if (max[i] != 0) {
            printf("%s%s ", sep, bench_cuda_call_name(i));
            print_per_call(max[i], b->counts.timed);
            sep = ", ";
        }
    }
    printf("%s", sep[0] == ',' ? ")" : "");
    if (least != most) {
        printf("; ranks differ, the least ");
        print_per_call(least, b->counts.timed);
    }
    printf("\n");
    fflush(stdout);
}

/* Rank 0 prints the driver calls per timed call of the collective, in total and per entry point
 * (launches, synchronisations, event records, pointer and context queries: what issue 12
 * counts). Ranks may differ (a rank that refills a cache), so the figures are the most over
 * ranks. */
void bench_report_driver_calls(bench_t *b)
{
    int n = b->counts.n;
    long mine = 0, most = 0, least = 0;
    long *max = malloc((size_t)n * sizeof(*max));
    if (max == NULL) {
        fprintf(stderr, "osu_%s: out of memory\n", b->coll->name);
        MPI_Abort(b->comm, 1);
    }
    for (int i = 0; i < n; i++) {
        mine += b->counts.sum[i];
    }
    PMPI_Reduce(b->counts.sum, max, n, MPI_LONG, MPI_MAX, 0, b->comm);
    PMPI_Reduce(&mine, &most, 1, MPI_LONG, MPI_MAX, 0, b->comm);
    PMPI_Reduce(&mine, &least, 1, MPI_LONG, MPI_MIN, 0, b->comm);
    if (b->rank == 0 && b->counts.timed > 0) {
        print_driver_calls(b, max, most, least);
    }
    memset(b->counts.sum, 0, (size_t)n * sizeof(*b->counts.sum));
    b->counts.timed = 0;
    free(max);
}

void bench_print_path(bench_t *b)
{
    if (b->rank == 0 && b->path != NULL) {
        printf("# picoll path: %s\n", b->path);
        fflush(stdout);
    }
    b->path = NULL;
}

/* "# rounds LABEL (us): A1/B1 A2/B2 ...": each round's latency of the n columns, in the order
 * they ran, so that the spread of the ratios over rounds can be shown (osu-bench/driver.py reads
 * it). */
static void print_rounds_line(const char *label, const bench_column_t *const *cols, int n,
                              int rounds)
{
    printf("# rounds %s (us):", label);
    for (int r = 0; r < rounds; r++) {
        for (int i = 0; i < n; i++) {
            printf("%s%.3f", i == 0 ? " " : "/", cols[i]->lat[r]);
        }
    }
    printf("\n");
}

/* Under an --ab row (after its driver-call and path lines): "# rounds A/B (us): ..." (A/B/C with
 * the NCCL column), then the stream columns' "# rounds enqueue/graph (us): ..." (or one). */
void bench_print_rounds(const bench_t *b)
{
    const bench_column_t *on[STREAM_COLUMNS];
    int n = stream_columns_on(b, on);
    char label[HEAD_LEN] = "";
    print_rounds_line(b->nab == AB_COLUMNS ? "A/B/C" : "A/B", (const bench_column_t *const *)b->ab,
                      b->nab, b->opt.ab_rounds);
    for (int i = 0; i < n; i++) {
        size_t used = strlen(label);
        snprintf(label + used, sizeof(label) - used, "%s%s", i == 0 ? "" : "/", on[i]->name);
    }
    if (n > 0) {
        print_rounds_line(label, on, n, b->opt.ab_rounds);
    }
    fflush(stdout);
}

/* "# stream calls ran: enqueue N of N, graph N of N" (rank 0's calls issued, those its stream
 * ran). */
void bench_print_stream_calls(bench_t *b)
{
    const char *sep = "# stream calls ran: ";
    for (int id = COLUMN_STREAM_FIRST; id < COLUMN_STREAM_FIRST + STREAM_COLUMNS; id++) {
        bench_column_t *c = &b->col[id];
        if (c->state == COLUMN_ON && b->rank == 0) {
            printf("%s%s %ld of %ld", sep, c->name, c->ran, c->issued);
            sep = ", ";
        }
        c->ran = c->issued = 0;
    }
    if (sep[0] == ',') {
        printf("\n");
        fflush(stdout);
    }
}

void bench_print_floor(const bench_t *b, size_t size)
{
    const bench_column_t *f = &b->col[COLUMN_FLOOR];
    double stream_us[STREAM_COLUMNS];
    if (f->state != COLUMN_ON) {
        return;
    }
    if (b->floor.host) {
        const bench_column_t *base = b->ab[0];
        size_t moved = bench_floor_moved(b->coll->name, b->np, size);
        bench_floor_host_row(moved, f->lat, b->opt.ab_rounds, f->us, b->col[COLUMN_PICOLL].us,
                             base->us);
        if (b->floor.cross > 0 && f->us > 0.0) {
            bench_floor_cross_row(moved, b->cross, b->opt.ab_rounds,
                                  bench_rounds_median(b, b->cross), b->col[COLUMN_PICOLL].us,
                                  base->us);
        }
        return;
    }
    for (int i = 0; i < STREAM_COLUMNS; i++) {
        const bench_column_t *c = &b->col[COLUMN_STREAM_FIRST + i];
        stream_us[i] = c->state == COLUMN_ON ? c->us : 0.0;
    }
    bench_floor_row(&b->floor, bench_floor_moved(b->coll->name, b->np, size), f->us,
                    b->col[COLUMN_PICOLL].us, stream_us);
    bench_floor_barrier_row(&b->floor, b->col[COLUMN_PICOLL].us, stream_us);
}
