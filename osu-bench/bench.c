/* osu-bench harness: options, buffers, timing, validation and output of the benchmarks.
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
#define _GNU_SOURCE 1 /* RTLD_DEFAULT, getopt_long, posix_memalign */
#endif

#include "bench.h"
#include "bench_cuda.h"
#include "bench_floor.h"

#include <dlfcn.h>
#include <errno.h>
#include <getopt.h>
#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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
#define BENCH_AB_ROUNDS_DEFAULT 2

/* Output columns, as OSU prints them. */
#define COL_SIZE 10
#define COL_FIELD 18
#define COL_ITERS 12
#define COL_BUSBW 24 /* --ab: "staged MPI BusBW(MB/s)" */

/* Receive elements no input and no call wrote hold this. */
#define BENCH_SENTINEL 111

typedef enum { TYPE_CHAR, TYPE_INT, TYPE_FLOAT, TYPE_DOUBLE } type_kind_t;

typedef struct {
    const char *flag;     /* -T value */
    const char *mpi_name; /* "# Datatype: MPI_CHAR." */
    type_kind_t kind;
    size_t size;
} type_info_t;

static const type_info_t bench_types[] = {
    {.flag = "mpi_char", .mpi_name = "MPI_CHAR", .kind = TYPE_CHAR, .size = sizeof(char)},
    {.flag = "mpi_int", .mpi_name = "MPI_INT", .kind = TYPE_INT, .size = sizeof(int)},
    {.flag = "mpi_float", .mpi_name = "MPI_FLOAT", .kind = TYPE_FLOAT, .size = sizeof(float)},
    {.flag = "mpi_double", .mpi_name = "MPI_DOUBLE", .kind = TYPE_DOUBLE, .size = sizeof(double)},
};
#define BENCH_NTYPES (sizeof(bench_types) / sizeof(bench_types[0]))

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
    baseline_t baseline;       /* --baseline; AUTO until parsed: STAGED with -d cuda, else MPI */
    int corrupt;               /* --test-corrupt */
    int nccl;                  /* --nccl: a C column, NCCL on the same buffers */
    int enqueue;               /* --enqueue: MPIX_*_enqueue on the benchmark's stream */
    int graph;                 /* --graph: the same call captured into a CUDA graph, replayed */
    int floor;                 /* --floor[=N]: the GPU's floor, N launches (0: off) */
} options_t;

/* The --nccl column: not asked for, timed, or skipped (one line says why). */
typedef enum { NCCL_OFF, NCCL_ON, NCCL_SKIPPED } nccl_state_t;

/* The stream-ordered columns (--enqueue, --graph): index of each in the arrays below. */
enum { STREAM_ENQUEUE, STREAM_GRAPH, STREAM_COLUMNS };
static const char *const stream_column_name[STREAM_COLUMNS] = {"enqueue", "graph"};

/* picoll's MPIX_Stream calls (include/picoll.h), found at run time in the preloaded library: the
 * programs are plain MPI programs and build without picoll's header. */
typedef struct {
    int (*info_set_hex)(MPI_Info info, const char *key, const void *value, int size);
    int (*create)(MPI_Info info, void **stream);
    int (*free_)(void **stream);
    int (*comm_create)(MPI_Comm comm, void *stream, MPI_Comm *newcomm);
    int (*allreduce)(const void *, void *, int, MPI_Datatype, MPI_Op, MPI_Comm);
    int (*allgather)(const void *, int, MPI_Datatype, void *, int, MPI_Datatype, MPI_Comm);
    int (*alltoall)(const void *, int, MPI_Datatype, void *, int, MPI_Datatype, MPI_Comm);
    int (*query)(void *stream, long *staged, long *host, long *device, long *captured,
                 long *runs, long *kernels);
} mpix_api_t;

/* picoll's public functions, found at run time in the preloaded library (--ab). */
typedef struct {
    void (*set_bypass)(int bypass);
    int (*active)(void);
    const char *(*version)(void);
    int (*comm_query)(MPI_Comm comm, void *info);
    const char *(*last_algorithm)(void); /* found without --ab too: the path of -d cuda calls */
} picoll_api_t;

/* picoll_comm_info_t of include/picoll.h, declared here so the benchmarks build without it. */
typedef struct {
    unsigned long id;
    int enabled;
    int size;
    int local_size;
    int num_nodes;
    char reason[128];
} picoll_info_copy_t;

typedef struct {
    const bench_coll_t *coll;
    options_t opt;
    MPI_Comm comm;
    MPI_Datatype type;
    int rank, np;
    long spread;          /* inputs lie in [-spread, spread] */
    void *send, *recv;    /* the buffers the collective is given: host or device */
    void *hsend, *hrecv;  /* host copies: the same buffers for host memory, staging for CUDA */
    /* --baseline staged: the application's host buffers (pinned for CUDA); NULL otherwise */
    void *stage_send, *stage_recv;
    int staging;          /* 1 while the staged column runs: calls go through stage_* */
    int in_nccl;          /* 1 while the NCCL column runs: calls go to NCCL on the same buffers */
    nccl_state_t nccl;
    char nccl_why[256];   /* NCCL_SKIPPED: why */
    size_t send_cap, recv_cap; /* bytes allocated */
    picoll_api_t picoll;
    /* Driver calls of the timed device calls, where the driver counts them (-d cuda on the
     * emulated GPU): entry points counted (0: none), each one's calls at the start and the end of
     * a timed loop, their differences summed over the timed loops of one size, and the calls of
     * the collective those loops made. */
    int ncounted;
    long *calls_start, *calls_end, *calls_sum;
    long calls_timed;
    int counting; /* 1 while the loop being timed is one whose driver calls are counted */
    const char *path; /* what picoll ran the last timed call of device buffers with, or NULL */
    /* --enqueue, --graph: each column's state (and why it was skipped); the benchmark's CUDA
     * stream, picoll's stream object of it and the stream communicator; the graph of the current
     * size (one call captured) and its count; the column a call goes to while one runs (-1: none);
     * per column, the calls issued (enqueued or launched) and those the stream's progress thread
     * ran, over one size (picoll_stream_query), so that a row shows every call ran. */
    int thread_level;
    nccl_state_t stream_state[STREAM_COLUMNS];
    char stream_why[STREAM_COLUMNS][256];
    mpix_api_t mpix;
    void *cstream, *mpix_stream;
    MPI_Comm scomm;
    void *graph_exec;
    size_t graph_count;
    int graph_kernels; /* its captured call went to picoll's kernels on the stream */
    int in_stream;
    long stream_issued[STREAM_COLUMNS], stream_ran[STREAM_COLUMNS];
    bench_floor_t floor; /* --floor */
    char floor_why[256]; /* --floor skipped: why */
} bench_t;

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
    case TYPE_CHAR:
        ((char *)buf)[i] = (char)(signed char)v;
        break;
    case TYPE_INT:
        ((int *)buf)[i] = (int)v;
        break;
    case TYPE_FLOAT:
        ((float *)buf)[i] = (float)v;
        break;
    case TYPE_DOUBLE:
        ((double *)buf)[i] = (double)v;
        break;
    }
}

/* Every value the benchmarks use is an integer exactly representable in each type. */
static double load_value(type_kind_t kind, const void *buf, size_t i)
{
    switch (kind) {
    case TYPE_CHAR:
        return (double)(signed char)((const char *)buf)[i];
    case TYPE_INT:
        return (double)((const int *)buf)[i];
    case TYPE_FLOAT:
        return (double)((const float *)buf)[i];
    case TYPE_DOUBLE:
        return ((const double *)buf)[i];
    }
    return 0.0;
}

static MPI_Datatype type_handle(type_kind_t kind)
{
    switch (kind) {
    case TYPE_CHAR:
        return MPI_CHAR;
    case TYPE_INT:
        return MPI_INT;
    case TYPE_FLOAT:
        return MPI_FLOAT;
    case TYPE_DOUBLE:
        return MPI_DOUBLE;
    }
    return MPI_DATATYPE_NULL;
}

/* ------------------------------------------------------------------ options */

static void print_usage(const bench_coll_t *coll)
{
    printf("Usage: osu_%s [options]\n"
           "OSU micro-benchmark compatible %s latency test (picoll osu-bench %s).\n"
           "  -m, --message-size [MIN:]MAX  message sizes in bytes, powers of two from MIN\n"
           "                                (default 1:%zu; K, M, G suffixes accepted)\n"
           "  -i, --iterations N            timed iterations per size (default %d, %d above %d bytes)\n"
           "  -x, --warmup N                untimed warm-up iterations (default %d, %d above %d bytes)\n"
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
           "                                copies the input to host buffers (pinned, cuMemHostAlloc;\n"
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
           "                                (picoll_device_floor, N launches, default 1000): an\n"
           "                                empty kernel launched and waited for, N queued on the\n"
           "                                stream, and per size a device-to-device copy of the\n"
           "                                bytes a rank's call must move; under each row a\n"
           "                                \"# floor (us):\" line with picoll's ratios to them\n"
           "      --factor F                ratio of successive sizes (default 2)\n"
           "      --test-corrupt            testing only: damage one result so that -c must fail\n",
           coll->name, coll->title, PACKAGE_VERSION, BENCH_MAX_SIZE_DEFAULT, BENCH_ITERS_SMALL,
           BENCH_ITERS_LARGE, BENCH_LARGE_MESSAGE, BENCH_WARMUP_SMALL, BENCH_WARMUP_LARGE,
           BENCH_LARGE_MESSAGE, BENCH_AB_ROUNDS_DEFAULT);
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

/* Returns 0 to run, 1 on an error (reported by rank 0), 2 when -h or -v answered. */
static int parse_options(const bench_coll_t *coll, int argc, char **argv, int rank,
                         options_t *opt)
{
    static const struct option longopts[] = {
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
        {"ab", optional_argument, NULL, 'A'},
        {"floor", optional_argument, NULL, 'L'},
        {"factor", required_argument, NULL, 'F'},
        {"test-corrupt", no_argument, NULL, 'C'},
        {"baseline", required_argument, NULL, 'B'},
        {"nccl", no_argument, NULL, 'N'},
        {"enqueue", no_argument, NULL, 'E'},
        {"graph", no_argument, NULL, 'G'},
        {NULL, 0, NULL, 0},
    };
    const char *bad = NULL;
    char what[96];
    int c, v;

    *opt = (options_t){
        .min_size = 1,
        .max_size = BENCH_MAX_SIZE_DEFAULT,
        .factor = 2,
        .iters = -1,
        .warmup = -1,
        .type = &bench_types[0],
        .mem = MEM_HOST,
    };
    opterr = 0;
    optind = 1;
    while (bad == NULL && (c = getopt_long(argc, argv, ":m:i:x:fcT:d:lhv", longopts, NULL)) != -1) {
        switch (c) {
        case 'm':
            if (parse_sizes(optarg, opt) != 0) {
                bad = "-m wants [MIN:]MAX in bytes";
            }
            break;
        case 'i':
            if (parse_int(optarg, 1, &opt->iters) != 0) {
                bad = "-i wants a positive number of iterations";
            }
            break;
        case 'x':
            if (parse_int(optarg, 0, &opt->warmup) != 0) {
                bad = "-x wants a number of warm-up iterations (0 or more)";
            }
            break;
        case 'f':
            opt->full = 1;
            break;
        case 'c':
            opt->validate = 1;
            break;
        case 'T':
            opt->type = NULL;
            for (size_t t = 0; t < BENCH_NTYPES; t++) {
                if (strcmp(optarg, bench_types[t].flag) == 0) {
                    opt->type = &bench_types[t];
                }
            }
            if (opt->type == NULL) {
                bad = "-T wants mpi_char, mpi_int, mpi_float or mpi_double";
            }
            break;
        case 'd':
            v = parse_either(optarg, "host", "cuda");
            if (v < 0) {
                bad = "-d wants host or cuda";
            }
            opt->mem = v == 1 ? MEM_CUDA : MEM_HOST;
            break;
        case 'l':
            opt->in_place = 1;
            break;
        case 'A':
            opt->ab_rounds = BENCH_AB_ROUNDS_DEFAULT;
            if (optarg != NULL && parse_int(optarg, 1, &opt->ab_rounds) != 0) {
                bad = "--ab wants a positive number of rounds";
            }
            break;
        case 'L':
            opt->floor = 1000;
            if (optarg != NULL && parse_int(optarg, 1, &opt->floor) != 0) {
                bad = "--floor wants a positive number of launches";
            }
            break;
        case 'F':
            if (parse_int(optarg, 2, &v) != 0 || v > 1024) {
                bad = "--factor wants a whole number from 2 to 1024";
            }
            opt->factor = (size_t)v;
            break;
        case 'C':
            opt->corrupt = 1;
            break;
        case 'B':
            v = parse_either(optarg, "mpi", "staged");
            if (v < 0) {
                bad = "--baseline wants mpi or staged";
            }
            opt->baseline = v == 1 ? BASELINE_STAGED : BASELINE_MPI;
            break;
        case 'N':
            opt->nccl = 1;
            break;
        case 'E': /* --enqueue */
        case 'G': /* --graph */
            *(c == 'E' ? &opt->enqueue : &opt->graph) = 1;
            break;
        case 'h':
            if (rank == 0) {
                print_usage(coll);
            }
            return 2;
        case 'v':
            if (rank == 0) {
                printf("# picoll osu-bench %s (osu_%s)\n", PACKAGE_VERSION, coll->name);
            }
            return 2;
        case ':':
            snprintf(what, sizeof(what), "%s is missing its value", argv[optind - 1]);
            bad = what;
            break;
        default:
            snprintf(what, sizeof(what), "unknown option %s", argv[optind - 1]);
            bad = what;
            break;
        }
    }
    if (bad == NULL && optind < argc) {
        snprintf(what, sizeof(what), "unexpected argument %s", argv[optind]);
        bad = what;
    }
    if (bad == NULL && opt->baseline != BASELINE_AUTO && opt->ab_rounds == 0) {
        bad = "--baseline chooses the A column of --ab: give --ab too";
    }
    if (bad == NULL && opt->floor > 0 && (opt->ab_rounds == 0 || opt->mem != MEM_CUDA)) {
        bad = "--floor adds lines to --ab -d cuda: give both";
    }
    if (bad == NULL && opt->nccl && opt->ab_rounds == 0) {
        bad = "--nccl adds a column to --ab: give --ab too";
    }
    if (opt->baseline == BASELINE_AUTO) {
        opt->baseline = opt->mem == MEM_CUDA ? BASELINE_STAGED : BASELINE_MPI;
    }
    if (bad == NULL && opt->min_size > opt->max_size) {
        bad = "-m: MIN is larger than MAX";
    }
    if (bad == NULL && opt->max_size < opt->type->size) {
        bad = "-m: MAX is smaller than one element of the datatype";
    }
    if (bad == NULL && opt->max_size / opt->type->size > (size_t)INT_MAX) {
        bad = "-m: MAX is more elements than an MPI count holds";
    }
    if (bad != NULL) {
        if (rank == 0) {
            fprintf(stderr, "osu_%s: %s (try -h)\n", coll->name, bad);
        }
        return 1;
    }
    return 0;
}

/* ------------------------------------------------------------------ memory */

/* Sets up the device of -d cuda on every rank: the device of its local rank, as cudaSetDevice
 * would choose it. Returns 0, or -1 and why. */
static int cuda_setup(MPI_Comm comm, char *why, size_t len)
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
        if (posix_memalign(&p, 4096, bytes == 0 ? 1 : bytes) != 0) {
            return NULL;
        }
        memset(p, 0, bytes);
        return p;
    case ALLOC_DEVICE:
        return bench_cuda_alloc_device(bytes);
    case ALLOC_PINNED:
        return bench_cuda_alloc_pinned(bytes);
    }
    return NULL;
}

static void buffer_free(alloc_kind_t kind, void *p)
{
    switch (kind) {
    case ALLOC_HOST:
        free(p);
        break;
    case ALLOC_DEVICE:
        bench_cuda_free_device(p);
        break;
    case ALLOC_PINNED:
        bench_cuda_free_pinned(p);
        break;
    }
}

/* Copies bytes from the host buffer host to buf, a buffer the collective is given (to_buf), or
 * back: a synchronous driver copy for CUDA memory, memcpy for host memory, nothing when they are
 * one buffer. */
static void sync_buffer(const bench_t *b, void *buf, void *host, size_t bytes, int to_buf)
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

static int buffers_alloc(bench_t *b, size_t max_count)
{
    size_t send_elems, recv_elems, esize = b->opt.type->size;
    b->coll->layout(b->np, max_count, &send_elems, &recv_elems);
    b->send_cap = send_elems * esize;
    b->recv_cap = recv_elems * esize;
    b->hsend = buffer_alloc(ALLOC_HOST, b->send_cap);
    b->hrecv = buffer_alloc(ALLOC_HOST, b->recv_cap);
    if (b->opt.mem == MEM_CUDA) {
        b->send = buffer_alloc(ALLOC_DEVICE, b->send_cap);
        b->recv = buffer_alloc(ALLOC_DEVICE, b->recv_cap);
    } else {
        b->send = b->hsend;
        b->recv = b->hrecv;
    }
    if (b->opt.ab_rounds > 0 && b->opt.baseline == BASELINE_STAGED) {
        alloc_kind_t stage = b->opt.mem == MEM_CUDA ? ALLOC_PINNED : ALLOC_HOST;
        b->stage_send = buffer_alloc(stage, b->send_cap);
        b->stage_recv = buffer_alloc(stage, b->recv_cap);
        if (b->stage_send == NULL || b->stage_recv == NULL) {
            return -1;
        }
    }
    return b->hsend && b->hrecv && b->send && b->recv ? 0 : -1;
}

static void buffers_free(bench_t *b)
{
    alloc_kind_t stage = b->opt.mem == MEM_CUDA ? ALLOC_PINNED : ALLOC_HOST;
    if (b->opt.mem == MEM_CUDA) {
        buffer_free(ALLOC_DEVICE, b->send);
        buffer_free(ALLOC_DEVICE, b->recv);
    }
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
        sync_buffer(b, b->send, b->hsend, send_elems * esize, 1);
    }
    sync_buffer(b, b->recv, b->hrecv, recv_elems * esize, 1);
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

/* ------------------------------------------------------------------ timing and validation */

/* One message: the call on the benchmark's buffers, and the bytes its buffers span. */
typedef struct {
    bench_call_t call;
    size_t send_bytes, recv_bytes;
} message_t;

static message_t make_message(const bench_t *b, size_t count)
{
    size_t send_elems, recv_elems;
    b->coll->layout(b->np, count, &send_elems, &recv_elems);
    return (message_t){
        .call = {
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

/* The NCCL column's call on the same buffers, returning once the stream has run it. An NCCL error
 * after a communicator was made is a failure of the run, as an MPI error is. */
static int nccl_call(bench_t *b, const message_t *m)
{
    char why[256];
    const void *send = b->opt.in_place ? NULL : m->call.sendbuf;
    if (bench_nccl_call(b->coll->nccl, send, m->call.recvbuf, (size_t)m->call.count, why,
                        sizeof(why)) != 0) {
        fprintf(stderr, "osu_%s: rank %d: NCCL column: %s\n", b->coll->name, b->rank, why);
        MPI_Abort(b->comm, 1);
    }
    return MPI_SUCCESS;
}

/* ------------------------------------------------------------------ stream-ordered calls */

/* The collective's MPIX_*_enqueue on the stream communicator: returns at once. */
static int mpix_enqueue(const bench_t *b, const bench_call_t *c)
{
    switch (b->coll->nccl) {
    case BENCH_NCCL_ALLREDUCE:
        return b->mpix.allreduce(c->sendbuf, c->recvbuf, c->count, c->type, b->coll->op, b->scomm);
    case BENCH_NCCL_ALLGATHER:
        return b->mpix.allgather(c->sendbuf, c->count, c->type, c->recvbuf, c->count, c->type,
                                 b->scomm);
    case BENCH_NCCL_ALLTOALL:
        return b->mpix.alltoall(c->sendbuf, c->count, c->type, c->recvbuf, c->count, c->type,
                                b->scomm);
    case BENCH_NCCL_NONE:
        break;
    }
    return MPI_ERR_OTHER;
}

/* An MPI call's result: 0 on MPI_SUCCESS, else -1 and "WHAT: the error's text" in why. */
static int mpi_why(int rc, const char *what, char *why, size_t len)
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

/* An error of the stream columns after their set-up is a failure of the run, as an MPI error of
 * the blocking call is. */
static void stream_fail(const bench_t *b, int col, const char *why)
{
    fprintf(stderr, "osu_%s: rank %d: %s column: %s\n", b->coll->name, b->rank,
            stream_column_name[col], why);
    MPI_Abort(b->comm, 1);
}

/* The calls picoll's progress thread of the stream has run so far, a graph's replays included,
 * and those enqueued on picoll's kernels on the stream itself (*kernels: a graph's replays of
 * those are the GPU's alone, not counted). */
static long stream_runs(const bench_t *b, long *kernels)
{
    long staged = 0, host = 0, device = 0, captured = 0, runs = 0, k = 0;
    b->mpix.query(b->mpix_stream, &staged, &host, &device, &captured, &runs, &k);
    if (kernels != NULL) {
        *kernels = k;
    }
    return runs + k;
}

/* Calls a column ran between two readings of stream_runs (before: runs, after: the count now):
 * a graph whose captured call is on picoll's kernels ran every launch on the GPU, where the
 * stream's counts cannot see it (its results are checked by the validation as any call's). */
static long stream_ran_since(const bench_t *b, int col, long runs, long issued)
{
    if (col == STREAM_GRAPH && b->graph_kernels) {
        return issued;
    }
    return stream_runs(b, NULL) - runs;
}

/* One call of column col on the stream, returning at once: the collective enqueued, or the
 * size's graph (its one captured call) launched. */
static void stream_issue(bench_t *b, const message_t *m, int col)
{
    char why[256];
    if (col == STREAM_GRAPH) {
        if (bench_cuda_graph_launch(b->graph_exec, b->cstream, why, sizeof(why)) != 0) {
            stream_fail(b, col, why);
        }
    } else {
        if (mpi_why(mpix_enqueue(b, &m->call), "the enqueue", why, sizeof(why)) != 0) {
            stream_fail(b, col, why);
        }
    }
    b->stream_issued[col]++;
}

static void stream_synchronize(const bench_t *b, int col)
{
    char why[256];
    if (bench_cuda_stream_synchronize(b->cstream, why, sizeof(why)) != 0) {
        stream_fail(b, col, why);
    }
}

/* --graph: the graph of the message, one call enqueued while the stream captures, instantiated
 * once per size and launched for every call of it. */
static void graph_prepare(bench_t *b, const message_t *m)
{
    char why[256];
    int rc;
    if (b->graph_exec != NULL && b->graph_count == (size_t)m->call.count) {
        return;
    }
    bench_cuda_graph_destroy(b->graph_exec);
    b->graph_exec = NULL;
    if (bench_cuda_graph_begin(b->cstream, why, sizeof(why)) != 0) {
        stream_fail(b, STREAM_GRAPH, why);
    }
    long kernels0 = 0, kernels1 = 0;
    stream_runs(b, &kernels0);
    rc = mpix_enqueue(b, &m->call);
    stream_runs(b, &kernels1);
    b->graph_kernels = kernels1 > kernels0;
    if (bench_cuda_graph_end(b->cstream, &b->graph_exec, why, sizeof(why)) != 0) {
        stream_fail(b, STREAM_GRAPH, why);
    }
    if (mpi_why(rc, "the enqueue while capturing", why, sizeof(why)) != 0) {
        stream_fail(b, STREAM_GRAPH, why);
    }
    b->graph_count = (size_t)m->call.count;
}

/* One call of the stream column b->in_stream, waited for (validation). */
static void stream_call(bench_t *b, const message_t *m)
{
    int col = b->in_stream;
    long runs = stream_runs(b, NULL);
    stream_issue(b, m, col);
    stream_synchronize(b, col);
    b->stream_ran[col] += stream_ran_since(b, col, runs, 1);
}

/* One call of the collective, timed or validated as a whole. While b->staging, it is what an
 * application does on an MPI that cannot read its buffers: the input copied to host buffers
 * (with -l the receive buffer), the collective on those, the result copied back. */
static int message_call(bench_t *b, const message_t *m)
{
    bench_call_t staged;
    int rc;
    if (b->in_nccl) {
        return nccl_call(b, m);
    }
    if (b->in_stream >= 0) {
        stream_call(b, m);
        return MPI_SUCCESS;
    }
    if (!b->staging) {
        return b->coll->call(&m->call);
    }
    staged = m->call;
    staged.recvbuf = b->stage_recv;
    if (b->opt.in_place) {
        sync_buffer(b, m->call.recvbuf, b->stage_recv, m->recv_bytes, 0);
    } else {
        staged.sendbuf = b->stage_send;
        sync_buffer(b, (void *)m->call.sendbuf, b->stage_send, m->send_bytes, 0);
    }
    rc = b->coll->call(&staged);
    sync_buffer(b, m->call.recvbuf, b->stage_recv, m->recv_bytes, 1);
    return rc;
}

/* While b->counting: the driver calls of the timed iterations (not the warm-up's), added to
 * b->calls_sum. The barriers between calls are the MPI's own and reach no driver. */
static void count_start(bench_t *b)
{
    if (b->counting) {
        bench_cuda_call_counts(b->calls_start, b->ncounted);
    }
}

static void count_stop(bench_t *b, int iters)
{
    if (!b->counting) {
        return;
    }
    bench_cuda_call_counts(b->calls_end, b->ncounted);
    for (int i = 0; i < b->ncounted; i++) {
        b->calls_sum[i] += b->calls_end[i] - b->calls_start[i];
    }
    b->calls_timed += iters;
}

/* The message of count elements with its inputs written, for the timed calls. */
static message_t timed_message(bench_t *b, size_t count)
{
    message_t m = make_message(b, count);
    if (b->opt.in_place) {
        /* in place, results feed the next call: start from zeros so that sums stay finite */
        memset(b->hrecv, 0, m.recv_bytes);
        sync_buffer(b, b->recv, b->hrecv, m.recv_bytes, 1);
    } else {
        fill_inputs(b, count);
    }
    return m;
}

/* --enqueue, --graph: this rank's time per call (us) of iters calls of column col issued back to
 * back on the stream and one synchronise, after warmup untimed ones (issued, synchronised). The
 * stream's progress thread must have run every call issued (counted for the row). */
static double time_stream_calls(bench_t *b, size_t count, int iters, int warmup, int col)
{
    message_t m = timed_message(b, count);
    long runs;
    double t0, t1;
    if (col == STREAM_GRAPH) {
        graph_prepare(b, &m);
    }
    runs = stream_runs(b, NULL);
    for (int i = 0; i < warmup; i++) {
        stream_issue(b, &m, col);
    }
    stream_synchronize(b, col);
    PMPI_Barrier(b->comm);
    t0 = MPI_Wtime();
    for (int i = 0; i < iters; i++) {
        stream_issue(b, &m, col);
    }
    stream_synchronize(b, col);
    t1 = MPI_Wtime();
    b->stream_ran[col] += stream_ran_since(b, col, runs, (long)warmup + iters);
    PMPI_Barrier(b->comm);
    return (t1 - t0) * 1e6 / iters;
}

/* This rank's mean latency (us) over iters calls, after warmup untimed ones. */
static double time_calls(bench_t *b, size_t count, int iters, int warmup)
{
    message_t m = timed_message(b, count);
    double total = 0.0;
    PMPI_Barrier(b->comm);
    for (int i = 0; i < warmup + iters; i++) {
        if (i == warmup) {
            count_start(b);
        }
        double t0 = MPI_Wtime();
        message_call(b, &m);
        double t1 = MPI_Wtime();
        if (i >= warmup) {
            total += t1 - t0;
        }
        PMPI_Barrier(b->comm);
    }
    count_stop(b, iters);
    return total * 1e6 / iters;
}

/* Runs the collective once on fresh inputs and checks every element of this rank's result
 * against a plain computation from the inputs of every rank. Returns 1 when all ranks pass. */
static int validate(bench_t *b, size_t count, const char *state)
{
    type_kind_t kind = b->opt.type->kind;
    size_t send_elems, recv_elems, bad = 0, first = 0;
    double got = 0.0;
    long want = 0;
    message_t m = make_message(b, count);
    int ok, all_ok = 0;

    b->coll->layout(b->np, count, &send_elems, &recv_elems);
    fill_inputs(b, count);
    PMPI_Barrier(b->comm);
    message_call(b, &m);
    sync_buffer(b, b->recv, b->hrecv, recv_elems * b->opt.type->size, 0);
    if (b->opt.corrupt && b->rank == b->np - 1) {
        store_value(kind, b->hrecv, recv_elems - 1, (long)load_value(kind, b->hrecv, recv_elems - 1) + 1);
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
    ok = bad == 0;
    PMPI_Allreduce(&ok, &all_ok, 1, MPI_INT, MPI_MIN, b->comm);
    return all_ok;
}

typedef struct {
    double avg, min, max; /* over ranks of each rank's mean, us */
} latency_t;

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

/* Bus bandwidth in MB/s (bytes per microsecond) of a message of size bytes. */
static double busbw(const bench_t *b, size_t size, double us)
{
    return us > 0.0 ? (double)size * b->coll->busbw_factor(b->np) / us : 0.0;
}

/* ------------------------------------------------------------------ output */

/* The A column of --ab, as the header and the validation messages name it. */
static const char *baseline_name(const options_t *o)
{
    return o->baseline == BASELINE_STAGED ? "staged MPI" : "plain MPI";
}

/* --nccl: what the C column is, or the one line saying why there is none. */
static void print_nccl_line(const bench_t *b)
{
    if (b->nccl == NCCL_SKIPPED) {
        printf("# nccl: skipped: %s\n", b->nccl_why);
    } else if (b->nccl == NCCL_ON) {
        printf("# nccl: %s, a communicator of the same ranks, on a stream of the application "
               "(cuStreamCreate); each timed call is the NCCL call then cuStreamSynchronize; "
               "picoll/NCCL = NCCL / picoll latency\n", bench_nccl_describe());
    }
}

/* --enqueue, --graph: what each column asked for is, or the one line saying why there is none. */
static void print_stream_lines(const bench_t *b)
{
    static const char *const what[STREAM_COLUMNS] = {
        "each call enqueued, back to back",
        "one call captured into a CUDA graph (cuStreamBeginCapture), the graph launched "
        "for each call, back to back",
    };
    for (int col = 0; col < STREAM_COLUMNS; col++) {
        if (b->stream_state[col] == NCCL_SKIPPED) {
            printf("# %s: skipped: %s\n", stream_column_name[col], b->stream_why[col]);
        } else if (b->stream_state[col] == NCCL_ON) {
            printf("# %s: MPIX_%c%s_enqueue on a stream communicator of the benchmark's CUDA stream "
                   "(cuStreamCreate), through picoll: per size, %s, then one cuStreamSynchronize; "
                   "latency is the time per call, each rank's averaged over ranks\n",
                   stream_column_name[col], b->coll->name[0] - 'a' + 'A', b->coll->name + 1,
                   what[col]);
        }
    }
}

/* The column names of the stream columns that run. */
static void print_stream_header(const bench_t *b)
{
    static const char *const head[STREAM_COLUMNS] = {"Enqueue(us)", "Graph(us)"};
    for (int col = 0; col < STREAM_COLUMNS; col++) {
        if (b->stream_state[col] == NCCL_ON) {
            printf("%*s", COL_FIELD, head[col]);
        }
    }
}

/* A row's fields of the stream columns that run: lat[col]. */
static void print_stream_fields(const bench_t *b, const double *lat)
{
    for (int col = 0; col < STREAM_COLUMNS; col++) {
        if (b->stream_state[col] == NCCL_ON) {
            printf("%*.2f", COL_FIELD, lat[col]);
        }
    }
}

static void print_header(const bench_t *b)
{
    const options_t *o = &b->opt;
    printf("# OSU MPI%s %s Latency Test (picoll osu-bench %s)\n", o->mem == MEM_CUDA ? "-CUDA" : "",
           b->coll->title, PACKAGE_VERSION);
    printf("# Datatype: %s.\n", o->type->mpi_name);
    if (o->ab_rounds > 0) {
        const char *a = o->baseline == BASELINE_STAGED ? "staged MPI" : "MPI";
        char a_lat[32], a_bw[32];
        printf("# picoll A/B: per size, %d round%s of %s (bypass) then picoll; "
               "latency is each rank's mean averaged over ranks, median over rounds\n",
               o->ab_rounds, o->ab_rounds == 1 ? "" : "s", baseline_name(o));
        if (o->baseline == BASELINE_STAGED) {
            printf("# staged MPI: each timed call copies in (%s), runs the collective on the host "
                   "buffers with picoll bypassed, copies the result out\n",
                   o->mem == MEM_CUDA ? "cuMemcpyDtoH/HtoD, device <-> pinned host buffers (cuMemHostAlloc)"
                                      : "memcpy, user <-> separate host buffers");
        }
        printf("# picoll %s, active %d\n",
               b->picoll.version != NULL ? b->picoll.version() : "?",
               b->picoll.active != NULL ? b->picoll.active() : -1);
        print_nccl_line(b);
        print_stream_lines(b);
        if (b->floor.on) {
            bench_floor_header(&b->floor, b->coll->name, b->np);
        } else if (o->floor > 0) {
            printf("# floor: skipped: %s\n", b->floor_why);
        }
        snprintf(a_lat, sizeof(a_lat), "%s(us)", a);
        snprintf(a_bw, sizeof(a_bw), "%s BusBW(MB/s)", a);
        printf("%-*s%*s%*s%*s%*s%*s", COL_SIZE, "# Size", COL_FIELD, a_lat, COL_FIELD,
               "picoll(us)", COL_FIELD, "Speed-up", COL_BUSBW, a_bw, COL_BUSBW,
               "picoll BusBW(MB/s)");
        if (b->nccl == NCCL_ON) {
            printf("%*s%*s%*s", COL_FIELD, "NCCL(us)", COL_FIELD, "picoll/NCCL", COL_BUSBW,
                   "NCCL BusBW(MB/s)");
        }
    } else {
        print_stream_lines(b);
        printf("%-*s%*s", COL_SIZE, "# Size", COL_FIELD, "Avg Latency(us)");
        if (o->full) {
            printf("%*s%*s%*s%*s", COL_FIELD, "Min Latency(us)", COL_FIELD, "Max Latency(us)",
                   COL_ITERS, "Iterations", COL_FIELD, "Bus BW(MB/s)");
        }
    }
    print_stream_header(b);
    if (o->validate) {
        printf("%*s", COL_FIELD, "Validation");
    }
    printf("\n");
    fflush(stdout);
}

/* Says what the "# driver calls per call:" lines under the rows count. */
static void print_counting(const bench_t *b)
{
    if (b->ncounted > 0) {
        printf("# driver calls: the loaded CUDA driver counts its calls (fakecuda_call_counts); "
               "under each row, the calls per timed call of %s, the most over ranks\n",
               b->opt.ab_rounds > 0 ? "the picoll column" : "the collective");
    }
}

static void print_validation(const bench_t *b, int ok)
{
    if (b->opt.validate) {
        printf("%*s", COL_FIELD, ok ? "Pass" : "Fail");
    }
    printf("\n");
    fflush(stdout);
}

/* After the first collective on the communicator, what picoll made of it. */
static void print_picoll_comm(const bench_t *b)
{
    picoll_info_copy_t info;
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
    print_per_call(most, b->calls_timed);
    for (int i = 0; i < b->ncounted; i++) {
        if (max[i] != 0) {
            printf("%s%s ", sep, bench_cuda_call_name(i));
            print_per_call(max[i], b->calls_timed);
            sep = ", ";
        }
    }
    printf("%s", sep[0] == ',' ? ")" : "");
    if (least != most) {
        printf("; ranks differ, the least ");
        print_per_call(least, b->calls_timed);
    }
    printf("\n");
    fflush(stdout);
}

/* Rank 0 prints, under a size's row, the driver calls per timed call of the collective, in total
 * and per entry point (launches, synchronisations, event records, pointer and context queries:
 * what issue 12 counts). Ranks may differ (a rank that refills a cache), so the figures are the
 * most over ranks. Collective; starts the next size's count from zero. */
static void report_driver_calls(bench_t *b)
{
    int n = b->ncounted;
    long mine = 0, most = 0, least = 0;
    long *max = malloc((size_t)n * sizeof(*max));
    if (max == NULL) {
        fprintf(stderr, "osu_%s: out of memory\n", b->coll->name);
        MPI_Abort(b->comm, 1);
    }
    for (int i = 0; i < n; i++) {
        mine += b->calls_sum[i];
    }
    PMPI_Reduce(b->calls_sum, max, n, MPI_LONG, MPI_MAX, 0, b->comm);
    PMPI_Reduce(&mine, &most, 1, MPI_LONG, MPI_MAX, 0, b->comm);
    PMPI_Reduce(&mine, &least, 1, MPI_LONG, MPI_MIN, 0, b->comm);
    if (b->rank == 0 && b->calls_timed > 0) {
        print_driver_calls(b, max, most, least);
    }
    memset(b->calls_sum, 0, (size_t)n * sizeof(*b->calls_sum));
    b->calls_timed = 0;
    free(max);
}

/* On device buffers with picoll in the process: which path its last timed call took (a device
 * algorithm, or "fallback"), so that a count of driver calls is read with the path it belongs to. */
static void note_path(bench_t *b)
{
    if (b->opt.mem == MEM_CUDA && b->picoll.last_algorithm != NULL) {
        b->path = b->picoll.last_algorithm();
    }
}

static void print_path(bench_t *b)
{
    if (b->rank == 0 && b->path != NULL) {
        printf("# picoll path: %s\n", b->path);
        fflush(stdout);
    }
    b->path = NULL;
}

/* ------------------------------------------------------------------ the runs */

static void size_iterations(const options_t *o, size_t size, int *iters, int *warmup)
{
    int large = size > BENCH_LARGE_MESSAGE;
    *iters = o->iters > 0 ? o->iters : large ? BENCH_ITERS_LARGE : BENCH_ITERS_SMALL;
    *warmup = o->warmup >= 0 ? o->warmup : large ? BENCH_WARMUP_LARGE : BENCH_WARMUP_SMALL;
}

/* Every rank learns whether all succeeded. */
static int all_ranks(const bench_t *b, int ok)
{
    int all = 0;
    PMPI_Allreduce(&ok, &all, 1, MPI_INT, MPI_MIN, b->comm);
    return all;
}

/* The stream columns that run (--enqueue, --graph), after the others of a size or of a round of
 * --ab: each one's latency (OSU's average over ranks, on rank 0) into lat[col], and when validate_now
 * its result checked after its timed calls (always, -c or not: a broken enqueue must not give a
 * fast figure; once per size). Returns 1 when every check passed. */
static int run_stream_columns(bench_t *b, size_t count, int iters, int warmup, int validate_now,
                              double *lat)
{
    int ok = 1;
    for (int col = 0; col < STREAM_COLUMNS; col++) {
        if (b->stream_state[col] != NCCL_ON) {
            continue;
        }
        lat[col] = gather_latency(b, time_stream_calls(b, count, iters, warmup, col)).avg;
        if (validate_now) {
            b->in_stream = col;
            ok &= validate(b, count, stream_column_name[col]);
            b->in_stream = -1;
        }
    }
    return ok;
}

/* Whether the stream's progress thread ran every call the stream columns of a size issued (an
 * enqueue that queued nothing would be fast), on every rank. Collective. */
static int stream_check(const bench_t *b)
{
    int ok = 1;
    for (int col = 0; col < STREAM_COLUMNS; col++) {
        if (b->stream_state[col] == NCCL_ON && b->stream_ran[col] != b->stream_issued[col]) {
            fprintf(stderr, "osu_%s: rank %d: %s column: %ld calls issued, %ld ran on the stream\n",
                    b->coll->name, b->rank, stream_column_name[col], b->stream_issued[col],
                    b->stream_ran[col]);
            ok = 0;
        }
    }
    return all_ranks(b, ok);
}

/* Under a row: "# stream calls ran: enqueue N of N, graph N of N" (rank 0's calls issued, those
 * its stream ran), then the next size counts from zero. */
static void print_stream_calls(bench_t *b)
{
    const char *sep = "# stream calls ran: ";
    for (int col = 0; col < STREAM_COLUMNS; col++) {
        if (b->stream_state[col] == NCCL_ON && b->rank == 0) {
            printf("%s%s %ld of %ld", sep, stream_column_name[col], b->stream_ran[col],
                   b->stream_issued[col]);
            sep = ", ";
        }
        b->stream_ran[col] = b->stream_issued[col] = 0;
    }
    if (sep[0] == ',') {
        printf("\n");
        fflush(stdout);
    }
}

/* OSU's output: one row per size. Returns 1 when every validation passed. */
static int run_osu(bench_t *b, size_t count)
{
    size_t size = count * b->opt.type->size;
    int iters, warmup, ok = 1;
    double slat[STREAM_COLUMNS] = {0.0, 0.0};
    latency_t l;
    size_iterations(&b->opt, size, &iters, &warmup);
    b->counting = b->ncounted > 0;
    l = gather_latency(b, time_calls(b, count, iters, warmup));
    b->counting = 0;
    note_path(b);
    if (b->opt.validate) {
        ok = validate(b, count, "");
    }
    ok &= run_stream_columns(b, count, iters, warmup, 1, slat);
    ok &= stream_check(b);
    if (b->rank == 0) {
        printf("%-*zu%*.2f", COL_SIZE, size, COL_FIELD, l.avg);
        if (b->opt.full) {
            printf("%*.2f%*.2f%*d%*.2f", COL_FIELD, l.min, COL_FIELD, l.max, COL_ITERS, iters,
                   COL_FIELD, busbw(b, size, l.avg));
        }
        print_stream_fields(b, slat);
        print_validation(b, ok);
    }
    if (b->ncounted > 0) {
        report_driver_calls(b);
    }
    print_path(b);
    print_stream_calls(b);
    return ok;
}

static int compare_doubles(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* Median of n values (sorts them): with 2 rounds, their mean; with more, robust to a round that
 * the machine disturbed. */
static double median(double *v, int n)
{
    qsort(v, (size_t)n, sizeof(*v), compare_doubles);
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

/* Under an A/B row (after its driver-call and path lines): each round's latencies in the order
 * they ran, "# rounds A/B (us): A1/B1 A2/B2 ...", with the NCCL column "# rounds A/B/C (us):
 * A1/B1/C1 ...", so that the spread of the ratios over rounds can be shown (osu-bench/driver.py
 * reads it). raw: [baseline rounds, picoll rounds, NCCL rounds]; columns: 2 or 3. */
static void print_rounds(const double *raw, int rounds, int columns)
{
    printf("# rounds %s (us):", columns == 3 ? "A/B/C" : "A/B");
    for (int r = 0; r < rounds; r++) {
        printf(" %.3f/%.3f", raw[r], raw[rounds + r]);
        if (columns == 3) {
            printf("/%.3f", raw[2 * rounds + r]);
        }
    }
    printf("\n");
    fflush(stdout);
}

/* Under an A/B row, after its "# rounds A/B" line, the stream columns' rounds in the order they
 * ran: "# rounds enqueue/graph (us): E1/G1 E2/G2 ..." (or one of the two). slat: [round][column]. */
static void print_stream_rounds(const bench_t *b, const double *slat, int rounds)
{
    int on[STREAM_COLUMNS], n = 0;
    for (int col = 0; col < STREAM_COLUMNS; col++) {
        if (b->stream_state[col] == NCCL_ON) {
            on[n++] = col;
        }
    }
    if (n == 0) {
        return;
    }
    printf("# rounds %s (us):", n == 2 ? "enqueue/graph" : stream_column_name[on[0]]);
    for (int r = 0; r < rounds; r++) {
        for (int i = 0; i < n; i++) {
            printf("%s%.3f", i == 0 ? " " : "/", slat[r * STREAM_COLUMNS + on[i]]);
        }
    }
    printf("\n");
    fflush(stdout);
}

/* A/B: rounds of the baseline (plain or staged MPI, bypass on) then picoll, then with --nccl
 * NCCL (C), on every rank between the same barriers. Each round's latency is OSU's (each rank's
 * mean averaged over ranks); a row reports the median over rounds of each, and a "# rounds" line
 * under it every round's latencies. Returns 1 when every validation passed. */
static int run_ab(bench_t *b, size_t count, int first)
{
    size_t size = count * b->opt.type->size;
    int rounds = b->opt.ab_rounds, iters, warmup, ok = 1;
    int columns = b->nccl == NCCL_ON ? 3 : 2;
    /* [baseline rounds, picoll rounds, NCCL rounds], then the same in round order (median()
     * sorts the first) */
    double *lat = malloc(2 * (size_t)columns * (size_t)rounds * sizeof(*lat));
    /* the stream columns: [round][column], then the same sorted by column for the medians */
    double *slat = calloc(2 * STREAM_COLUMNS * (size_t)rounds, sizeof(*slat));
    if (lat == NULL || slat == NULL) {
        fprintf(stderr, "osu_%s: out of memory\n", b->coll->name);
        MPI_Abort(b->comm, 1);
    }
    size_iterations(&b->opt, size, &iters, &warmup);
    for (int round = 0; round < rounds; round++) {
        for (int col = 0; col < columns; col++) {
            int on = col == 1; /* picoll's column; the others bypass it */
            PMPI_Barrier(b->comm);
            b->picoll.set_bypass(!on);
            b->staging = col == 0 && b->opt.baseline == BASELINE_STAGED;
            b->in_nccl = col == 2;
            b->counting = on && b->ncounted > 0; /* picoll's calls, not the others' */
            lat[col * rounds + round] = gather_latency(b, time_calls(b, count, iters, warmup)).avg;
            b->counting = 0;
            if (on) {
                note_path(b);
            }
            if (b->opt.validate && round == 0) {
                ok &= validate(b, count, col == 2 ? "NCCL" : on ? "picoll" : baseline_name(&b->opt));
            }
        }
        /* the stream columns, with picoll on: it runs them */
        PMPI_Barrier(b->comm);
        b->picoll.set_bypass(0);
        b->staging = 0;
        b->in_nccl = 0;
        ok &= run_stream_columns(b, count, iters, warmup, round == 0, slat + round * STREAM_COLUMNS);
    }
    PMPI_Barrier(b->comm);
    b->staging = 0;
    b->in_nccl = 0;
    b->picoll.set_bypass(0);
    ok &= stream_check(b);
    size_t moved = b->floor.on ? bench_floor_moved(b->coll->name, b->np, size) : 0;
    double copy_us = b->floor.on ? bench_floor_copy(&b->floor, b->comm, moved, iters) : 0.0;
    double pic = 0.0, med[STREAM_COLUMNS] = {0.0, 0.0};
    if (b->rank == 0) {
        double mpi;
        memcpy(lat + columns * rounds, lat, (size_t)columns * (size_t)rounds * sizeof(*lat));
        mpi = median(lat, rounds);
        pic = median(lat + rounds, rounds);
        if (first) {
            print_picoll_comm(b);
        }
        printf("%-*zu%*.2f%*.2f%*.3f%*.2f%*.2f", COL_SIZE, size, COL_FIELD, mpi, COL_FIELD, pic,
               COL_FIELD, pic > 0.0 ? mpi / pic : 0.0, COL_BUSBW, busbw(b, size, mpi), COL_BUSBW,
               busbw(b, size, pic));
        if (columns == 3) {
            double nc = median(lat + 2 * rounds, rounds);
            printf("%*.2f%*.3f%*.2f", COL_FIELD, nc, COL_FIELD, pic > 0.0 ? nc / pic : 0.0,
                   COL_BUSBW, busbw(b, size, nc));
        }
        if (b->opt.enqueue || b->opt.graph) {
            double *by_col = slat + STREAM_COLUMNS * (size_t)rounds;
            for (int col = 0; col < STREAM_COLUMNS; col++) {
                for (int r = 0; r < rounds; r++) {
                    by_col[col * rounds + r] = slat[r * STREAM_COLUMNS + col];
                }
                med[col] = b->stream_state[col] == NCCL_ON ? median(by_col + col * rounds, rounds)
                                                           : 0.0;
            }
            print_stream_fields(b, med);
        }
        print_validation(b, ok);
    }
    if (b->ncounted > 0) {
        report_driver_calls(b);
    }
    print_path(b);
    if (b->rank == 0) {
        print_rounds(lat + columns * rounds, rounds, columns);
        print_stream_rounds(b, slat, rounds);
    }
    print_stream_calls(b);
    if (b->rank == 0 && b->floor.on) {
        bench_floor_row(&b->floor, moved, copy_us, pic, med);
    }
    free(lat);
    free(slat);
    return ok;
}

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
            fprintf(stderr, "osu_%s: driver calls not counted: the ranks' drivers count %d to %d "
                    "entry points\n", b->coll->name, least, most);
        }
        free(calls);
        return;
    }
    b->ncounted = n;
    b->calls_start = calls;
    b->calls_end = calls + n;
    b->calls_sum = calls + 2 * (size_t)n;
}

/* --nccl: the C column where NCCL can run the collective on these buffers, else why not (on
 * rank 0, which prints it). Collective. */
static void nccl_setup(bench_t *b)
{
    const char *skip = NULL;
    b->nccl = NCCL_SKIPPED;
    if (b->opt.mem != MEM_CUDA) {
        skip = "--nccl needs -d cuda (NCCL takes device buffers): ignored";
    } else if (b->coll->nccl == BENCH_NCCL_NONE) {
        skip = "no NCCL counterpart of this collective";
    } else if (b->coll->nccl == BENCH_NCCL_ALLTOALL && b->opt.in_place) {
        skip = "NCCL has no in-place alltoall (-l)";
    }
    if (skip != NULL) {
        snprintf(b->nccl_why, sizeof(b->nccl_why), "%s", skip);
        return;
    }
    if (bench_nccl_open(b->comm, b->type, b->coll->op, b->nccl_why, sizeof(b->nccl_why)) == 0) {
        b->nccl = NCCL_ON;
    }
}

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

/* This rank's part of the stream columns' set-up: the benchmark's CUDA stream and picoll's stream
 * object of it. Returns 0, or -1 and why. */
static int stream_open_local(bench_t *b, char *why, size_t len)
{
    MPI_Info info;
    int rc;
    if (b->thread_level < MPI_THREAD_MULTIPLE) {
        snprintf(why, len, "MPI gave thread level %d, not MPI_THREAD_MULTIPLE, which stream "
                 "communicators need", b->thread_level);
        return -1;
    }
    if (mpix_lookup(&b->mpix) != 0) {
        snprintf(why, len, "picoll's MPIX_Stream calls not found: run with libpicoll.so preloaded "
                 "(LD_PRELOAD=/path/to/libpicoll.so)");
        return -1;
    }
    if (bench_cuda_stream_create(&b->cstream, why, len) != 0) {
        return -1;
    }
    PMPI_Info_create(&info);
    PMPI_Info_set(info, "type", "cudaStream_t");
    rc = b->mpix.info_set_hex(info, "value", &b->cstream, (int)sizeof(b->cstream));
    if (rc == MPI_SUCCESS) {
        rc = b->mpix.create(info, &b->mpix_stream);
    }
    PMPI_Info_free(&info);
    return mpi_why(rc, "MPIX_Stream_create", why, len);
}

/* --enqueue, --graph: the stream columns asked for, each on where it can run, else skipped with
 * why (rank 0 prints it). Collective. */
static void stream_setup(bench_t *b)
{
    const options_t *o = &b->opt;
    int asked[STREAM_COLUMNS] = {o->enqueue, o->graph};
    char why[256] = "", gwhy[256] = "";
    int ok;
    for (int col = 0; col < STREAM_COLUMNS; col++) {
        b->stream_state[col] = asked[col] ? NCCL_ON : NCCL_OFF;
    }
    if (o->mem != MEM_CUDA) {
        snprintf(why, sizeof(why), "needs -d cuda (the calls are ordered on a CUDA stream): ignored");
        ok = 0;
    } else if (b->coll->nccl == BENCH_NCCL_NONE) {
        snprintf(why, sizeof(why), "no stream-ordered counterpart of this collective");
        ok = 0;
    } else {
        /* errors come back as codes, to be a skip line rather than an abort */
        PMPI_Comm_set_errhandler(b->comm, MPI_ERRORS_RETURN);
        ok = all_ranks(b, stream_open_local(b, why, sizeof(why)) == 0);
        if (ok) {
            int rc = b->mpix.comm_create(b->comm, b->mpix_stream, &b->scomm);
            if (mpi_why(rc, "MPIX_Stream_comm_create", why, sizeof(why)) != 0) {
                b->scomm = MPI_COMM_NULL;
            }
            ok = all_ranks(b, rc == MPI_SUCCESS);
        }
        PMPI_Comm_set_errhandler(b->comm, MPI_ERRORS_ARE_FATAL);
        if (ok) {
            PMPI_Comm_set_errhandler(b->scomm, MPI_ERRORS_RETURN);
        }
    }
    if (!ok && why[0] == '\0') {
        snprintf(why, sizeof(why), "the set-up failed on another rank");
    }
    if (ok && o->graph && !all_ranks(b, bench_cuda_graph_check(gwhy, sizeof(gwhy)) == 0)) {
        b->stream_state[STREAM_GRAPH] = NCCL_SKIPPED;
        snprintf(b->stream_why[STREAM_GRAPH], sizeof(b->stream_why[0]), "%s",
                 gwhy[0] ? gwhy : "no graph calls in another rank's CUDA driver");
    }
    for (int col = 0; col < STREAM_COLUMNS; col++) {
        if (asked[col] && !ok) {
            b->stream_state[col] = NCCL_SKIPPED;
            snprintf(b->stream_why[col], sizeof(b->stream_why[col]), "%s", why);
        }
    }
}

/* The stream columns' graph, stream communicator and streams (before the buffers are freed). */
static void stream_close(bench_t *b)
{
    bench_cuda_graph_destroy(b->graph_exec);
    b->graph_exec = NULL;
    if (b->scomm != MPI_COMM_NULL) {
        MPI_Comm_free(&b->scomm);
    }
    if (b->mpix_stream != NULL) {
        b->mpix.free_(&b->mpix_stream);
    }
    bench_cuda_stream_destroy(b->cstream);
    b->cstream = NULL;
}

static int bench_run(bench_t *b)
{
    const options_t *o = &b->opt;
    size_t esize = o->type->size, max_count = o->max_size / esize, count;
    char why[256] = "";
    int status = 0, first = 1;

    b->type = type_handle(o->type->kind);
    if (b->coll->reduces) {
        /* sums of np inputs stay exact, and within a signed char */
        b->spread = o->type->kind == TYPE_CHAR ? 127 / b->np : 8;
        if (b->spread > 8) {
            b->spread = 8;
        }
        if (b->spread < 1) {
            if (b->rank == 0) {
                fprintf(stderr, "osu_%s: mpi_char sums overflow beyond 127 ranks: use -T mpi_int\n",
                        b->coll->name);
            }
            return 1;
        }
    } else {
        b->spread = 100;
    }
    *(void **)&b->picoll.last_algorithm = dlsym(RTLD_DEFAULT, "picoll_last_algorithm");
    if (o->ab_rounds > 0 && !all_ranks(b, picoll_lookup(&b->picoll) == 0)) {
        if (b->rank == 0) {
            fprintf(stderr, "osu_%s: --ab needs libpicoll.so in the process: run the ranks with "
                    "LD_PRELOAD=/path/to/libpicoll.so\n", b->coll->name);
        }
        return 1;
    }
    if (o->mem == MEM_CUDA && !all_ranks(b, cuda_setup(b->comm, why, sizeof(why)) == 0)) {
        if (b->rank == 0) {
            fprintf(stderr, "osu_%s: -d cuda: %s\n", b->coll->name,
                    why[0] ? why : "CUDA set-up failed on another rank");
        }
        return 1;
    }
    if (o->mem == MEM_CUDA) {
        counting_setup(b);
    }
    if (!all_ranks(b, buffers_alloc(b, max_count) == 0)) {
        if (b->rank == 0) {
            fprintf(stderr, "osu_%s: cannot allocate the buffers of %zu-byte messages on %d ranks\n",
                    b->coll->name, max_count * esize, b->np);
        }
        buffers_free(b);
        free(b->calls_start);
        return 1;
    }
    if (o->nccl) {
        nccl_setup(b);
    }
    if (o->enqueue || o->graph) {
        stream_setup(b);
    }
    if (o->floor > 0) {
        b->floor.n = o->floor;
        bench_floor_setup(&b->floor, b->comm, b->cstream, b->floor_why, sizeof(b->floor_why));
    }
    if (b->rank == 0) {
        print_header(b);
        print_counting(b);
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
    if (b->nccl == NCCL_ON) {
        bench_nccl_close();
    }
    bench_floor_close(&b->floor);
    stream_close(b);
    buffers_free(b);
    free(b->calls_start);
    return status;
}

int bench_main(const bench_coll_t *coll, int argc, char **argv)
{
    bench_t b;
    int status;

    memset(&b, 0, sizeof(b));
    b.coll = coll;
    b.comm = MPI_COMM_WORLD;
    b.scomm = MPI_COMM_NULL;
    b.in_stream = -1;
    /* stream communicators (--enqueue, --graph) need MPI_THREAD_MULTIPLE: asked for only then, so
     * that the other runs measure MPI as OSU's programs initialise it */
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--enqueue") == 0 || strcmp(argv[i], "--graph") == 0) {
            b.thread_level = -1;
        }
    }
    if (b.thread_level < 0) {
        MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &b.thread_level);
    } else {
        MPI_Init(&argc, &argv);
        PMPI_Query_thread(&b.thread_level);
    }
    PMPI_Comm_rank(b.comm, &b.rank);
    PMPI_Comm_size(b.comm, &b.np);
    status = parse_options(coll, argc, argv, b.rank, &b.opt);
    if (status == 0) {
        status = bench_run(&b);
    }
    MPI_Finalize();
    return status == 2 ? 0 : status;
}
