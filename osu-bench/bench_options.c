/* osu-bench: the options (bench_options.h): OSU's flags and picoll's, parsed with getopt_long,
 * then checked against each other. */
#ifdef HAVE_CONFIG_H
#include "build-config.h"
#endif
#ifndef _GNU_SOURCE
#define _GNU_SOURCE 1 /* getopt_long */
#endif

#include "bench_options.h"

#include <errno.h>
#include <getopt.h>
#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const type_info_t bench_types[] = {
    {.flag = "mpi_char", .mpi_name = "MPI_CHAR", .kind = TYPE_CHAR, .size = sizeof(char)},
    {.flag = "mpi_int", .mpi_name = "MPI_INT", .kind = TYPE_INT, .size = sizeof(int)},
    {.flag = "mpi_float", .mpi_name = "MPI_FLOAT", .kind = TYPE_FLOAT, .size = sizeof(float)},
    {.flag = "mpi_double", .mpi_name = "MPI_DOUBLE", .kind = TYPE_DOUBLE, .size = sizeof(double)},
};
#define BENCH_NTYPES (sizeof(bench_types) / sizeof(bench_types[0]))

/* getopt_long's codes of the long options without a short one: past every character */
enum {
    OPT_AB = UCHAR_MAX + 1,
    OPT_FLOOR,
    OPT_FACTOR,
    OPT_CORRUPT,
    OPT_BASELINE,
    OPT_NCCL,
    OPT_ENQUEUE,
    OPT_GRAPH,
    OPT_OSU_TIMING,
};

static const struct option bench_longopts[] = {
    {"message-size", required_argument, NULL, 'm'},
    {"iterations", required_argument, NULL, 'i'},
    {"warmup", required_argument, NULL, 'x'},
    {"full", no_argument, NULL, 'f'},
    {"validation", no_argument, NULL, 'c'},
    {"type", required_argument, NULL, 'T'},
    {"accelerator", required_argument, NULL, 'd'},
    {"in-place", no_argument, NULL, 'l'},
    {"help", no_argument, NULL, 'h'},
    {"version", no_argument, NULL, 'v'},
    {"ab", optional_argument, NULL, OPT_AB},
    {"floor", optional_argument, NULL, OPT_FLOOR},
    {"factor", required_argument, NULL, OPT_FACTOR},
    {"test-corrupt", no_argument, NULL, OPT_CORRUPT},
    {"baseline", required_argument, NULL, OPT_BASELINE},
    {"nccl", no_argument, NULL, OPT_NCCL},
    {"enqueue", no_argument, NULL, OPT_ENQUEUE},
    {"graph", no_argument, NULL, OPT_GRAPH},
    {"osu-timing", no_argument, NULL, OPT_OSU_TIMING},
    {NULL, 0, NULL, 0},
};

/* -h: the usage, on rank 0. */
static void print_usage(const bench_coll_t *coll)
{
    printf(
        "Usage: osu_%s [options]\n"
        "OSU micro-benchmark compatible %s latency test (picoll osu-bench %s).\n"
        "  -m, --message-size [MIN:]MAX  message sizes in bytes, powers of two from MIN\n"
        "                                (default 1:%zu; K, M, G suffixes accepted)\n"
        "  -i, --iterations N            timed iterations per size (default %d, %d above %d "
        "bytes)\n"
        "  -x, --warmup N                untimed warm-up iterations (default %d, %d above %d "
        "bytes)\n"
        "  -f, --full                    also min and max latency over ranks, iterations, bus\n"
        "                                bandwidth (MB/s)\n"
        "  -c, --validation              check every result; adds a Validation column, exit 1\n"
        "                                on a mismatch\n"
        "  -T, --type TYPE               mpi_char (default), mpi_int, mpi_float, mpi_double\n"
        "  -d, --accelerator host|cuda   buffers in host memory (default) or on the GPU\n"
        "  -l, --in-place                MPI_IN_PLACE as the send buffer\n"
        "  -h, --help                    this text;  -v, --version  the version\n"
        "picoll extensions:\n"
        "      --ab[=ROUNDS]             with libpicoll.so preloaded: per size, ROUNDS times\n"
        "                                (default %d) plain MPI then picoll (picoll_set_bypass),\n"
        "                                printing both latencies (medians over rounds) and\n"
        "                                the speed-up, then a \"# rounds A/B (us):\" line with\n"
        "                                each round's pair\n"
        "      --baseline mpi|staged     the A column of --ab: mpi, the collective on the\n"
        "                                benchmark's buffers with picoll bypassed (default with\n"
        "                                host memory); staged (default with -d cuda): each call\n"
        "                                copies the input to host buffers (pinned, "
        "cuMemHostAlloc;\n"
        "                                memcpy to separate buffers with -d host), runs the\n"
        "                                collective there with picoll bypassed and copies the\n"
        "                                result back, all timed: an application's own staging\n"
        "                                on an MPI that is not CUDA-aware\n"
        "      --nccl                    with --ab and -d cuda: a third column per round, the\n"
        "                                same collective on the same device buffers with NCCL\n"
        "                                (libnccl.so.2 loaded at run time, or the file\n"
        "                                PICOLL_BENCH_NCCL names) on a stream of the application,\n"
        "                                each timed call the NCCL call then cuStreamSynchronize;\n"
        "                                skipped with one \"# nccl: skipped: ...\" line where\n"
        "                                NCCL or a GPU is missing\n"
        "      --enqueue                 with -d cuda and libpicoll.so preloaded: an Enqueue(us)\n"
        "                                column, per size N (-i) MPIX_<coll>_enqueue calls on a\n"
        "                                stream communicator of the benchmark's CUDA stream\n"
        "                                enqueued back to back, then one cuStreamSynchronize:\n"
        "                                the time per call (a column of each --ab round)\n"
        "      --graph                   a Graph(us) column: one such call captured into a CUDA\n"
        "                                graph per size, launched N times back to back, then one\n"
        "                                cuStreamSynchronize: the time per launch (= per call).\n"
        "                                Either one initialises MPI with MPI_THREAD_MULTIPLE\n"
        "                                (stream communicators need it); each column is skipped\n"
        "                                with one \"# enqueue: skipped: ...\" (\"# graph: ...\")\n"
        "                                line without picoll, a CUDA stream or that thread level\n"
        "      --floor[=N]               with --ab and -d cuda: the GPU's floor in the same job\n"
        "                                (picoll_device_floor, N launches, default %d): an\n"
        "                                empty kernel launched and waited for, N queued on the\n"
        "                                stream, and per size a device-to-device copy of the\n"
        "                                bytes a rank's call must move; under each row a\n"
        "                                \"# floor (us):\" line with picoll's ratios to them;\n"
        "                                and the barrier floor (picoll_device_barrier_floor): a\n"
        "                                barrier of the ranks' kernels over picoll's device\n"
        "                                workspace, no data, blocking, enqueued and graph-\n"
        "                                launched, with a \"# barrier floor (us):\" line of "
        "ratios;\n"
        "                                with host buffers: in every round, every rank's memcpy\n"
        "                                of half the bytes its call must move, at once, with a\n"
        "                                \"# rounds floor (us):\" and a \"# host floor (us):\"\n"
        "                                line under each row\n"
        "      --osu-timing              with picoll preloaded: picoll's call timed as the OSU\n"
        "                                micro-benchmarks 7.2 time it: each call alone between\n"
        "                                two MPI_Barrier calls, with -c before each the buffers\n"
        "                                filled and %d calls on other buffers; a \"# osu timing\n"
        "                                (us):\" line under each row beside the picoll column\n"
        "      --factor F                ratio of successive sizes (default %d)\n"
        "      --test-corrupt            testing only: damage one result so that -c must fail\n",
        coll->name, coll->title, PACKAGE_VERSION, BENCH_MAX_SIZE_DEFAULT, BENCH_ITERS_SMALL,
        BENCH_ITERS_LARGE, BENCH_LARGE_MESSAGE, BENCH_WARMUP_SMALL, BENCH_WARMUP_LARGE,
        BENCH_LARGE_MESSAGE, BENCH_AB_ROUNDS_DEFAULT, BENCH_FLOOR_LAUNCHES_DEFAULT,
        BENCH_OSU_WARMUP_VALIDATION, BENCH_FACTOR_DEFAULT);
}

/* A byte count with an optional K, M or G suffix (powers of 1024). */
static int parse_bytes(const char *text, size_t *out)
{
    char *end;
    unsigned long long v;
    unsigned shift = 0;
    if (*text < '0' || *text > '9') {
        return -1;
    }
    errno = 0;
    v = strtoull(text, &end, 10);
    if (errno != 0) {
        return -1;
    }
    if (*end == 'k' || *end == 'K') {
        shift = 10;
        end++;
    } else if (*end == 'm' || *end == 'M') {
        shift = 20;
        end++;
    } else if (*end == 'g' || *end == 'G') {
        shift = 30;
        end++;
    }
    if (*end != '\0' || v > (SIZE_MAX >> shift)) {
        return -1;
    }
    *out = (size_t)(v << shift);
    return 0;
}

static int parse_int(const char *text, int min, int *out)
{
    char *end;
    long v;
    errno = 0;
    v = strtol(text, &end, 10);
    if (errno != 0 || end == text || *end != '\0' || v < min || v > INT_MAX) {
        return -1;
    }
    *out = (int)v;
    return 0;
}

/* An option's value that is one of two words: 0 for the first, 1 for the second, else -1. */
static int parse_either(const char *text, const char *first, const char *second)
{
    return strcmp(text, first) == 0 ? 0 : strcmp(text, second) == 0 ? 1 : -1;
}

/* -m [MIN:]MAX, also MIN: */
static int parse_sizes(const char *text, options_t *opt)
{
    char buf[64];
    char *colon;
    if (strlen(text) >= sizeof(buf)) {
        return -1;
    }
    strcpy(buf, text);
    colon = strchr(buf, ':');
    if (colon == NULL) {
        return parse_bytes(buf, &opt->max_size);
    }
    *colon = '\0';
    if (parse_bytes(buf, &opt->min_size) != 0) {
        return -1;
    }
    return colon[1] == '\0' ? 0 : parse_bytes(colon + 1, &opt->max_size);
}

/* -T TYPE */
static const char *parse_type(const char *text, options_t *opt)
{
    opt->type = NULL;
    for (size_t t = 0; t < BENCH_NTYPES; t++) {
        if (strcmp(text, bench_types[t].flag) == 0) {
            opt->type = &bench_types[t];
        }
    }
    return opt->type == NULL ? "-T wants mpi_char, mpi_int, mpi_float or mpi_double" : NULL;
}

/* One option (c, as getopt_long returns it, other than -h, -v and its errors) and its value arg
 * into *opt. Returns NULL, or what is wrong (in what, len bytes, where it is formatted). */
static const char *parse_option(int c, const char *arg, options_t *opt, char *what, size_t len)
{
    int v = 0;
    switch (c) {
    case 'm': return parse_sizes(arg, opt) != 0 ? "-m wants [MIN:]MAX in bytes" : NULL;
    case 'i':
        return parse_int(arg, 1, &opt->iters) != 0 ? "-i wants a positive number of iterations"
                                                   : NULL;
    case 'x':
        return parse_int(arg, 0, &opt->warmup) != 0
                   ? "-x wants a number of warm-up iterations (0 or more)"
                   : NULL;
    case 'f': opt->full = 1; return NULL;
    case 'c': opt->validate = 1; return NULL;
    case 'T': return parse_type(arg, opt);
    case 'd':
        v = parse_either(arg, "host", "cuda");
        opt->mem = v == 1 ? MEM_CUDA : MEM_HOST;
        return v < 0 ? "-d wants host or cuda" : NULL;
    case 'l': opt->in_place = 1; return NULL;
    case OPT_AB:
        opt->ab_rounds = BENCH_AB_ROUNDS_DEFAULT;
        return arg != NULL && parse_int(arg, 1, &opt->ab_rounds) != 0
                   ? "--ab wants a positive number of rounds"
                   : NULL;
    case OPT_FLOOR:
        opt->floor = BENCH_FLOOR_LAUNCHES_DEFAULT;
        return arg != NULL && parse_int(arg, 1, &opt->floor) != 0
                   ? "--floor wants a positive number of launches"
                   : NULL;
    case OPT_FACTOR:
        if (parse_int(arg, BENCH_FACTOR_MIN, &v) != 0 || v > BENCH_FACTOR_MAX) {
            snprintf(what, len, "--factor wants a whole number from %d to %d", BENCH_FACTOR_MIN,
                     BENCH_FACTOR_MAX);
            return what;
        }
        opt->factor = (size_t)v;
        return NULL;
    case OPT_CORRUPT: opt->corrupt = 1; return NULL;
    case OPT_BASELINE:
        v = parse_either(arg, "mpi", "staged");
        opt->baseline = v == 1 ? BASELINE_STAGED : BASELINE_MPI;
        return v < 0 ? "--baseline wants mpi or staged" : NULL;
    case OPT_NCCL: opt->nccl = 1; return NULL;
    case OPT_ENQUEUE: opt->enqueue = 1; return NULL;
    case OPT_GRAPH: opt->graph = 1; return NULL;
    case OPT_OSU_TIMING: opt->osu_timing = 1; return NULL;
    }
    return NULL;
}

/* The options against each other, once all are parsed; the A column of --ab chosen where
 * --baseline did not choose it. Returns NULL, or what is wrong. */
static const char *check_options(options_t *opt)
{
    const char *bad = NULL;
    if (opt->baseline != BASELINE_AUTO && opt->ab_rounds == 0) {
        bad = "--baseline chooses the A column of --ab: give --ab too";
    } else if (opt->floor > 0 && opt->ab_rounds == 0) {
        bad = "--floor adds lines to --ab: give --ab too";
    } else if (opt->nccl && opt->ab_rounds == 0) {
        bad = "--nccl adds a column to --ab: give --ab too";
    }
    if (opt->baseline == BASELINE_AUTO) {
        opt->baseline = opt->mem == MEM_CUDA ? BASELINE_STAGED : BASELINE_MPI;
    }
    if (bad != NULL) {
        return bad;
    }
    if (opt->min_size > opt->max_size) {
        return "-m: MIN is larger than MAX";
    }
    if (opt->max_size < opt->type->size) {
        return "-m: MAX is smaller than one element of the datatype";
    }
    if (opt->max_size / opt->type->size > (size_t)INT_MAX) {
        return "-m: MAX is more elements than an MPI count holds";
    }
    return NULL;
}

options_result_t bench_options_parse(int argc, char **argv, options_t *opt, char *why, size_t len)
{
    const char *bad = NULL;
    char what[96];
    int c;

    *opt = (options_t){
        .min_size = 1,
        .max_size = BENCH_MAX_SIZE_DEFAULT,
        .factor = BENCH_FACTOR_DEFAULT,
        .iters = -1,
        .warmup = -1,
        .type = &bench_types[0],
        .mem = MEM_HOST,
    };
    opterr = 0;
    optind = 1;
    while (bad == NULL &&
           (c = getopt_long(argc, argv, ":m:i:x:fcT:d:lhv", bench_longopts, NULL)) != -1) {
        if (c == 'h') {
            return OPTIONS_HELP;
        }
        if (c == 'v') {
            return OPTIONS_VERSION;
        }
        if (c == ':' || c == '?') {
            snprintf(what, sizeof(what), c == ':' ? "%s is missing its value" : "unknown option %s",
                     argv[optind - 1]);
            bad = what;
        } else {
            bad = parse_option(c, optarg, opt, what, sizeof(what));
        }
    }
    if (bad == NULL && optind < argc) {
        snprintf(what, sizeof(what), "unexpected argument %s", argv[optind]);
        bad = what;
    }
    if (bad == NULL) {
        bad = check_options(opt);
    }
    if (bad != NULL) {
        snprintf(why, len, "%s", bad);
        return OPTIONS_ERROR;
    }
    return OPTIONS_RUN;
}

int bench_options_report(const bench_coll_t *coll, options_result_t result, const char *why,
                         int rank)
{
    switch (result) {
    case OPTIONS_RUN: return 0;
    case OPTIONS_HELP:
        if (rank == 0) {
            print_usage(coll);
        }
        return 2;
    case OPTIONS_VERSION:
        if (rank == 0) {
            printf("# picoll osu-bench %s (osu_%s)\n", PACKAGE_VERSION, coll->name);
        }
        return 2;
    case OPTIONS_ERROR: break;
    }
    if (rank == 0) {
        fprintf(stderr, "osu_%s: %s (try -h)\n", coll->name, why);
    }
    return 1;
}
