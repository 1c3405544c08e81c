/* osu-bench: the harness's own state, shared by its files (bench.h is the programs' view).
 *
 *   bench_options.c  the options: parsed, then checked against each other
 *   bench_buffers.c  the inputs, the buffers, the messages and the validation of a result
 *   bench_columns.c  the columns: plain MPI, staged MPI, picoll, NCCL, the floor
 *   bench_stream.c   the stream-ordered columns: enqueue and graph
 *   bench_osu.c      --osu-timing: picoll's call timed the way OSU 7.2 times it
 *   bench_output.c   the header, the rows and the lines under them
 *   bench.c          the set-up and the run over the sizes
 *
 * A column is an object (bench_column_t): what times one way of making the call, with its
 * set-up, its call, its timing, its header line and its close, and the line it is skipped with.
 * The run loop times the columns it holds; none of it asks which column it is running. */
#ifndef OSU_BENCH_IMPL_H
#define OSU_BENCH_IMPL_H

#include "bench.h"
#include "bench_floor.h"
#include "bench_options.h"

#include "picoll.h"

#include <mpi.h>
#include <stddef.h>

/* Output columns, as OSU prints them. */
#define COL_SIZE 10
#define COL_FIELD 18
#define COL_ITERS 12
#define COL_BUSBW 24 /* --ab: "staged MPI BusBW(MB/s)" */

/* Receive elements no input and no call wrote hold this. */
#define BENCH_SENTINEL 111
/* The longest reason a column is skipped for, or an error's text, with its nul. */
#define BENCH_WHY_LEN 256
/* Seconds to microseconds, the unit of every latency printed. */
#define BENCH_US_PER_S 1e6

typedef struct bench bench_t;
typedef struct bench_column bench_column_t;

/* One message: the call on the benchmark's buffers, and the bytes its buffers span. */
typedef struct {
    bench_call_t call;
    size_t send_bytes, recv_bytes;
} message_t;

/* A column: not asked for, timed, or skipped (one line says why). */
typedef enum { COLUMN_OFF, COLUMN_ON, COLUMN_SKIPPED } column_state_t;

/* The columns, in the order they are set up and their header lines printed. */
typedef enum {
    COLUMN_MPI,     /* --ab's A column: the collective with picoll bypassed */
    COLUMN_STAGED,  /* --ab's A column with --baseline staged */
    COLUMN_PICOLL,  /* the collective through picoll (without --ab: as the MPI runs it) */
    COLUMN_NCCL,    /* --nccl: --ab's C column */
    COLUMN_ENQUEUE, /* --enqueue */
    COLUMN_GRAPH,   /* --graph */
    COLUMN_FLOOR,   /* --floor: lines under the rows */
    COLUMN_OSU,     /* --osu-timing: picoll's call timed as OSU 7.2 does, a line under the rows */
    COLUMNS
} column_id_t;

/* The stream-ordered columns: the first, and how many (the floor's row takes their medians). */
#define COLUMN_STREAM_FIRST COLUMN_ENQUEUE
#define STREAM_COLUMNS 2

/* The columns of an --ab row: the A column (plain or staged MPI), picoll, NCCL where it runs. */
#define AB_COLUMNS 3

struct bench_column {
    column_id_t id;
    const char *name;   /* in its lines and messages: "plain MPI", "picoll", "NCCL", "enqueue" */
    const char *head;   /* its header's fields: "MPI" for "MPI(us)" and "MPI BusBW(MB/s)" */
    const char *option; /* the option asking for it, naming its "# nccl: ..." line; NULL: none */
    int picoll;         /* picoll runs its calls (--ab: bypass off) */
    /* Collective, for a column asked for: 0 where it runs, else -1 with why (rank 0's for its
     * line: its own reason, or that another rank failed). NULL: it always runs. */
    int (*setup)(bench_t *b, bench_column_t *c);
    /* One call of the message, returning with the result in the receive buffer. An error ends
     * the job (the MPI's errors are fatal on the benchmark's communicator). NULL: the floor. */
    void (*call)(bench_t *b, bench_column_t *c, const message_t *m);
    /* Collective: this rank's time per call (us) of iters calls of count elements after warmup
     * untimed ones; the floor's: its copy of the bytes a call moves, the mean over ranks. */
    double (*time)(bench_t *b, bench_column_t *c, size_t count, int iters, int warmup);
    /* Rank 0's header line saying what it is, where it runs. NULL: none. */
    void (*describe)(const bench_t *b, const bench_column_t *c);
    /* Collective: what setup made, where it was asked for (run or skipped). NULL: nothing. */
    void (*close)(bench_t *b, bench_column_t *c);

    column_state_t state;
    char why[BENCH_WHY_LEN]; /* COLUMN_SKIPPED: why */
    double *lat;             /* rank 0: each round's latency of the current size, in order */
    double us;               /* rank 0: the row's latency (with --ab, the median over rounds) */
    long issued, ran;        /* stream columns: calls issued, and those the stream ran, a size */
};

/* picoll's public functions (include/picoll.h), found at run time in the preloaded library
 * (--ab): the programs link MPI only. */
typedef struct {
    void (*set_bypass)(int bypass);
    int (*active)(void);
    const char *(*version)(void);
    int (*comm_query)(MPI_Comm comm, picoll_comm_info_t *info);
    const char *(*last_algorithm)(void); /* found without --ab too: the path of -d cuda calls */
} picoll_api_t;

/* picoll's MPIX_Stream calls (include/picoll.h), found at run time as picoll_api_t's. */
typedef struct {
    int (*info_set_hex)(MPI_Info info, const char *key, const void *value, int size);
    int (*create)(MPI_Info info, MPIX_Stream *stream);
    int (*free_)(MPIX_Stream *stream);
    int (*comm_create)(MPI_Comm comm, MPIX_Stream stream, MPI_Comm *newcomm);
    int (*allreduce)(const void *, void *, int, MPI_Datatype, MPI_Op, MPI_Comm);
    int (*allgather)(const void *, int, MPI_Datatype, void *, int, MPI_Datatype, MPI_Comm);
    int (*alltoall)(const void *, int, MPI_Datatype, void *, int, MPI_Datatype, MPI_Comm);
    int (*query)(MPIX_Stream stream, long *staged, long *host, long *device, long *captured,
                 long *runs, long *kernels);
} mpix_api_t;

/* What the stream columns share: the benchmark's CUDA stream, picoll's stream object of it and
 * the stream communicator; the graph of the current size (one call captured) and its count. */
typedef struct {
    int opened; /* 0: not yet; 1: open; -1: the set-up failed, why says why */
    char why[BENCH_WHY_LEN];
    mpix_api_t mpix;
    void *cstream;
    MPIX_Stream mpix_stream;
    MPI_Comm scomm;
    void *graph_exec;
    size_t graph_count;
    int graph_kernels; /* its captured call went to picoll's kernels on the stream */
} bench_stream_t;

/* Driver calls of the timed device calls, where the driver counts them (-d cuda on the emulated
 * GPU): entry points counted (0: none), each one's calls at the start and the end of a timed
 * loop, their differences summed over the timed loops of one size, and the calls of the
 * collective those loops made. */
typedef struct {
    int n;
    long *start, *end, *sum;
    long timed;
} bench_counts_t;

struct bench {
    const bench_coll_t *coll;
    options_t opt;
    MPI_Comm comm;
    MPI_Datatype type;
    int rank, np;
    int thread_level;
    long spread;         /* inputs lie in [-spread, spread] */
    void *send, *recv;   /* the buffers the collective is given: host or device */
    void *hsend, *hrecv; /* host copies: the same buffers for host memory, staging for CUDA */
    /* --baseline staged: the application's host buffers (pinned for CUDA); NULL otherwise */
    void *stage_send, *stage_recv;
    picoll_api_t picoll;
    bench_counts_t counts;
    const char *path; /* what picoll ran the last timed call of device buffers with, or NULL */
    bench_column_t col[COLUMNS];
    bench_column_t *ab[AB_COLUMNS]; /* --ab: the row's columns, nab of them */
    int nab;
    double *sorted; /* a round's worth of latencies, for the medians */
    double *cross;  /* rank 0: each round's cross floor of the current size (host --floor) */
    bench_stream_t stream;
    bench_floor_t floor;
    /* --osu-timing: with -c the validation warm-up's other buffers (as send and recv); the path
     * of its last timed call; its last timed call's result right on this rank */
    void *osu_send, *osu_recv;
    const char *osu_path;
    int osu_ok;
};

/* ------------------------------------------------------------------ bench_buffers.c */

/* Collective: the inputs' spread for the collective and type. 0, or 1 (rank 0 says why). */
int bench_inputs_spread(bench_t *b);
/* Collective, -d cuda: this rank's device, as cudaSetDevice(local rank) would choose it. 0, or -1
 * and why. */
int bench_device_setup(MPI_Comm comm, char *why, size_t len);
MPI_Datatype bench_type_handle(type_kind_t kind);
/* The buffers of messages up to max_count elements: 0, or -1 (bench_buffers_free frees what
 * was made). */
int bench_buffers_alloc(bench_t *b, size_t max_count);
void bench_buffers_free(bench_t *b);
/* Copies bytes from the host buffer host to buf, a buffer the collective is given (to_buf), or
 * back; a failure ends the job. */
void bench_buffer_copy(const bench_t *b, void *buf, void *host, size_t bytes, int to_buf);
/* The message of count elements on the benchmark's buffers. */
message_t bench_message(const bench_t *b, size_t count);
/* The same with its inputs written, for the timed calls. */
message_t bench_message_timed(bench_t *b, size_t count);
/* Collective: one call of column c on fresh inputs, every element of the result checked; state
 * names the column in the message of a failure. 1 when every rank passed. */
int bench_validate(bench_t *b, bench_column_t *c, size_t count, const char *state);
/* The inputs of a message of count elements written, as for bench_validate's call. */
void bench_fill_inputs(bench_t *b, size_t count);
/* This rank's result of a call on inputs bench_fill_inputs wrote, every element checked (a
 * message on stderr where one is wrong, state naming the column): 1 when right. */
int bench_check_result(bench_t *b, size_t count, const char *state);

/* ------------------------------------------------------------------ bench_columns.c */

/* The column objects into b->col, none asked for yet; b->ab and b->nab from the options. */
void bench_columns_init(bench_t *b);
/* Collective: the columns the options ask for set up, each on or skipped. */
void bench_columns_open(bench_t *b);
/* Collective: every column asked for closed, the last opened first. */
void bench_columns_close(bench_t *b);
/* Every rank learns whether all are ok (collective). */
int bench_all_ranks(const bench_t *b, int ok);
/* An MPI call's result: 0 on MPI_SUCCESS, else -1 and "WHAT: the error's text" in why. */
int bench_mpi_why(int rc, const char *what, char *why, size_t len);
/* A column's error after its set-up ends the job, as an MPI error of the blocking call does. */
void bench_column_fail(const bench_t *b, const bench_column_t *c, const char *why);

/* ------------------------------------------------------------------ bench_stream.c */

extern const bench_column_t bench_column_enqueue, bench_column_graph;
/* Collective: whether the stream's progress thread ran every call the stream columns issued
 * over a size (an enqueue that queued nothing would be fast), on every rank. */
int bench_stream_check(const bench_t *b);

/* ------------------------------------------------------------------ bench_osu.c */

extern const bench_column_t bench_column_osu;
/* Rank 0, under a row: --osu-timing's latency beside blocking_us, the picoll column's (without
 * --ab, the collective's). */
void bench_print_osu_timing(bench_t *b, double blocking_us);

/* ------------------------------------------------------------------ bench_output.c */

/* Rank 0: what the run measures and the column names; then what the driver-call lines count. */
void bench_print_header(const bench_t *b);
/* Rank 0: a size's row of OSU's output (l: the latency over ranks) or of --ab (the columns' us). */
void bench_print_osu_row(const bench_t *b, size_t size, double avg, double min, double max,
                         int iters, int ok);
void bench_print_ab_row(const bench_t *b, size_t size, int ok);
/* Rank 0, before the first --ab row: what picoll made of the communicator. */
void bench_print_picoll_comm(const bench_t *b);
/* Collective: under a row, the driver calls per timed call; the next size counts from zero. */
void bench_report_driver_calls(bench_t *b);
/* Under a row: picoll's path of the last timed call, where it was noted. */
void bench_print_path(bench_t *b);
/* Rank 0, under an --ab row: each round's latencies of the row's and the stream columns. */
void bench_print_rounds(const bench_t *b);
/* Under a row: the stream columns' calls issued and run (rank 0's); the next size from zero. */
void bench_print_stream_calls(bench_t *b);
/* Rank 0, under an --ab row of size bytes: the floors and picoll's ratios to them. */
/* The median of a round's worth of latencies (sorted in b->sorted; rounds kept in their order). */
double bench_rounds_median(const bench_t *b, const double *rounds);
void bench_print_floor(const bench_t *b, size_t size);

#endif
