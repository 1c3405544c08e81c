/* osu-bench: the benchmarks' options (OSU's flags and picoll's), parsed from the command line
 * before MPI starts (the thread level MPI is asked for depends on them), then checked against
 * each other; rank 0 reports once MPI runs. */
#ifndef OSU_BENCH_OPTIONS_H
#define OSU_BENCH_OPTIONS_H

#include "bench.h"

#include <stddef.h>

#ifndef PACKAGE_VERSION
#define PACKAGE_VERSION "0.1.0"
#endif

/* OSU's defaults: messages above 8 KiB take fewer iterations. */
#define BENCH_LARGE_MESSAGE 8192
#define BENCH_ITERS_SMALL 1000
#define BENCH_ITERS_LARGE 100
#define BENCH_WARMUP_SMALL 200
#define BENCH_WARMUP_LARGE 10
#define BENCH_MAX_SIZE_DEFAULT ((size_t)1 << 20)
/* picoll's: --ab's rounds, --factor's ratio of successive sizes and its bounds, --floor's launches */
#define BENCH_AB_ROUNDS_DEFAULT 2
#define BENCH_FACTOR_DEFAULT 2
#define BENCH_FACTOR_MIN 2
#define BENCH_FACTOR_MAX 1024
#define BENCH_FLOOR_LAUNCHES_DEFAULT 1000
/* --osu-timing -c: calls on other buffers before each timed one (OSU's VALIDATION_SKIP_DEFAULT) */
#define BENCH_OSU_WARMUP_VALIDATION 5

typedef enum { TYPE_CHAR, TYPE_INT, TYPE_FLOAT, TYPE_DOUBLE } type_kind_t;

typedef struct {
    const char *flag;     /* -T value */
    const char *mpi_name; /* "# Datatype: MPI_CHAR." */
    type_kind_t kind;
    size_t size;
} type_info_t;

typedef enum { MEM_HOST, MEM_CUDA } mem_kind_t;

/* The A column of --ab. MPI: the collective on the benchmark's buffers with picoll bypassed (on
 * CUDA buffers, only meaningful where the MPI is CUDA-aware). STAGED: what an application does by
 * hand on an MPI that cannot read device buffers: copy the input to host buffers, the collective
 * there with picoll bypassed, copy the result back, all timed. */
typedef enum { BASELINE_AUTO, BASELINE_MPI, BASELINE_STAGED } baseline_t;

typedef struct {
    size_t min_size, max_size; /* -m, bytes */
    size_t factor;             /* --factor: ratio of successive sizes */
    int iters, warmup;         /* -i, -x; -1: OSU's defaults by size */
    int full;                  /* -f */
    int validate;              /* -c */
    int in_place;              /* -l */
    const type_info_t *type;   /* -T */
    mem_kind_t mem;            /* -d */
    int ab_rounds;             /* --ab[=N]: 0 for OSU's output */
    baseline_t baseline;       /* --baseline; AUTO until checked: STAGED with -d cuda, else MPI */
    int corrupt;               /* --test-corrupt */
    int nccl;                  /* --nccl: a C column, NCCL on the same buffers */
    int enqueue;               /* --enqueue: MPIX_*_enqueue on the benchmark's stream */
    int graph;                 /* --graph: the same call captured into a CUDA graph, replayed */
    int floor;                 /* --floor[=N]: the GPU's floor, N launches (0: off) */
    int osu_timing;            /* --osu-timing: picoll's call timed as OSU 7.2 times it */
} options_t;

/* What the command line asks for. */
typedef enum {
    OPTIONS_RUN,     /* the benchmark */
    OPTIONS_ERROR,   /* a malformed or inconsistent command line */
    OPTIONS_HELP,    /* -h */
    OPTIONS_VERSION, /* -v */
} options_result_t;

/* Parses argv into *opt and checks the options against each other; prints nothing. On
 * OPTIONS_ERROR, why says what is wrong. */
options_result_t bench_options_parse(int argc, char **argv, options_t *opt, char *why, size_t len);

/* Rank 0 prints what the result asks for: the usage, the version, or why on stderr. Returns
 * bench_main's status: 0 to run, 1 on an error, 2 when -h or -v answered. */
int bench_options_report(const bench_coll_t *coll, options_result_t result, const char *why,
                         int rank);

#endif
