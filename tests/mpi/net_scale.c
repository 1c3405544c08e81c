/* net_scale: what a rank holds for picoll's network step, and what its set-up costs, on a
 * communicator of N nodes (tests/net/scale.sh runs it across N network-namespace hosts).
 *
 * Every rank first talks to every other with point-to-point messages (not picoll's), so that the
 * MPI's own connections are made before the count starts. Then, on a duplicate of the world:
 *   set-up   the first MPI_Allreduce (picoll's context, node shape, rails, endpoints, liveness
 *            connections) less the second one's time;
 *   calls    allreduce of 8 B, 32 KiB and 2 MiB of doubles and allgather of 8 B and 64 KiB a
 *            rank, each checked against a plain loop (integer values: exact in any order) and
 *            checked to have run on picoll's hierarchical path;
 *   held     UCX endpoints and liveness connections (picoll_comm_net_query), the sockets and
 *            resident memory the process gained since the count started;
 *   alltoall one MPI_Alltoall (whose pairwise exchange talks to every node), checked, and what
 *            is held after it.
 * Rank 0 prints one line of the largest figures over the ranks ("net_scale: nodes ..."). With
 * --max-held K it fails unless the endpoints and the liveness connections before the alltoall stay
 * within K each, with --max-sockets S unless the sockets gained before it stay within S; with
 * --nofile F every rank runs with its open-file limit lowered to F (ulimit -n F) from the start.
 * With --starve-alltoall no rank may open another file during the first alltoall (the limit
 * lowered to its highest open descriptor, the free numbers below it taken): picoll's
 * connections to every node fail, and every rank must fall back to the MPI together, that call
 * and the next one, with right results.
 * With --time R, rank 0 also prints the mean time of R allreduces of 8 B, 64 KiB and 1 MiB and R
 * allgathers of 8 B and 64 KiB a rank ("net_scale: time ..."), after 2 calls of warm-up each
 * (tests/net/scale.sh --methods: each network method forced in turn).
 * Prints "net_scale: passed" when every check held. */
#define _DEFAULT_SOURCE /* readlink */
#include <dirent.h>
#include <dlfcn.h>
#include <fcntl.h>
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

typedef int (*net_query_fn)(MPI_Comm, int *, int *, int *);
typedef const char *(*last_alg_fn)(void);

static int failures;

static void fail(int rank, const char *what)
{
    fprintf(stderr, "net_scale: rank %d: FAIL: %s\n", rank, what);
    failures++;
}

static int count_sockets(void)
{
    DIR *d = opendir("/proc/self/fd");
    struct dirent *e;
    int n = 0;
    char path[300], target[64];
    if (d == NULL) {
        return -1;
    }
    while ((e = readdir(d)) != NULL) {
        snprintf(path, sizeof(path), "/proc/self/fd/%s", e->d_name);
        ssize_t len = readlink(path, target, sizeof(target) - 1);
        if (len > 0) {
            target[len] = '\0';
            n += strncmp(target, "socket:", 7) == 0;
        }
    }
    closedir(d);
    return n;
}

static long rss_kb(void)
{
    FILE *f = fopen("/proc/self/status", "r");
    char line[256];
    long kb = -1;
    while (f != NULL && fgets(line, sizeof(line), f) != NULL) {
        if (strncmp(line, "VmRSS:", 6) == 0) {
            kb = strtol(line + 6, NULL, 10);
        }
    }
    if (f != NULL) {
        fclose(f);
    }
    return kb;
}

static const char *expect_path = "hier"; /* the prefix of every call's algorithm */

static void check_path(int rank, last_alg_fn last, const char *coll)
{
    const char *alg = last != NULL ? last() : NULL;
    if (alg == NULL || strncmp(alg, expect_path, strlen(expect_path)) != 0) {
        char msg[160];
        snprintf(msg, sizeof(msg), "%s ran '%s', not '%s'", coll, alg != NULL ? alg : "(unknown)",
                 expect_path);
        fail(rank, msg);
    }
}

/* The highest open descriptor. */
static int highest_fd(void)
{
    DIR *d = opendir("/proc/self/fd");
    struct dirent *e;
    int most = 2;
    while (d != NULL && (e = readdir(d)) != NULL) {
        int fd = atoi(e->d_name);
        most = fd > most ? fd : most;
    }
    if (d != NULL) {
        closedir(d);
    }
    return most;
}

static void allreduce_check(MPI_Comm c, int rank, int size, int count, last_alg_fn last)
{
    double *in = malloc((size_t)count * sizeof(double));
    double *out = malloc((size_t)count * sizeof(double));
    for (int i = 0; i < count; i++) {
        in[i] = (double)((rank * 7 + i) % 1000);
    }
    MPI_Allreduce(in, out, count, MPI_DOUBLE, MPI_SUM, c);
    check_path(rank, last, "MPI_Allreduce");
    for (int i = 0; i < count; i++) {
        double want = 0;
        for (int r = 0; r < size; r++) {
            want += (double)((r * 7 + i) % 1000);
        }
        if (out[i] != want) {
            fail(rank, "MPI_Allreduce: wrong result");
            break;
        }
    }
    free(in);
    free(out);
}

/* allgather (alltoall: 0) or alltoall (1) of `block` bytes a rank */
static void blocks_check(MPI_Comm c, int rank, int size, int block, int alltoall, last_alg_fn last)
{
    size_t total = (size_t)block * (size_t)size;
    unsigned char *in = malloc(alltoall ? total : (size_t)block), *out = malloc(total);
    for (size_t i = 0; i < (alltoall ? total : (size_t)block); i++) {
        in[i] = (unsigned char)(rank * 31 + (int)i * 7 + 1);
    }
    if (alltoall) {
        MPI_Alltoall(in, block, MPI_BYTE, out, block, MPI_BYTE, c);
    } else {
        MPI_Allgather(in, block, MPI_BYTE, out, block, MPI_BYTE, c);
    }
    check_path(rank, last, alltoall ? "MPI_Alltoall" : "MPI_Allgather");
    for (int r = 0; r < size; r++) {
        for (int i = 0; i < block; i++) {
            /* from r: its block for me (alltoall: at rank * block), or its only block */
            size_t at = alltoall ? (size_t)rank * (size_t)block + (size_t)i : (size_t)i;
            if (out[(size_t)r * (size_t)block + (size_t)i] !=
                (unsigned char)(r * 31 + (int)at * 7 + 1)) {
                fail(rank, alltoall ? "MPI_Alltoall: wrong result" : "MPI_Allgather: wrong result");
                r = size;
                break;
            }
        }
    }
    free(in);
    free(out);
}

/* Mean seconds of `reps` calls (allreduce of `bytes`, or allgather of `bytes` a rank), the
 * slowest rank's. */
static double time_calls(MPI_Comm c, int allgather, size_t bytes, int reps, int size)
{
    size_t n = allgather ? bytes * (size_t)size : bytes;
    char *in = calloc(bytes > 8 ? bytes : 8, 1), *out = calloc(n > 8 ? n : 8, 1);
    double t = 0;
    for (int r = -2; r < reps; r++) {
        MPI_Barrier(c);
        double t0 = MPI_Wtime();
        if (allgather) {
            MPI_Allgather(in, (int)bytes, MPI_BYTE, out, (int)bytes, MPI_BYTE, c);
        } else {
            MPI_Allreduce(in, out, (int)(bytes / sizeof(float)), MPI_FLOAT, MPI_SUM, c);
        }
        if (r >= 0) {
            t += MPI_Wtime() - t0;
        }
    }
    double most = 0;
    MPI_Allreduce(&t, &most, 1, MPI_DOUBLE, MPI_MAX, c);
    free(in);
    free(out);
    return most / reps;
}

typedef struct {
    int max_held, max_sockets, starve, reps;
} opts_t;

/* The options; --nofile applied at once. Returns 0, or 1 where the limit cannot be lowered. */
static int parse(int argc, char **argv, opts_t *o)
{
    *o = (opts_t){.max_held = -1, .max_sockets = -1};
    for (int i = 1; i < argc; i++) {
        o->starve |= strcmp(argv[i], "--starve-alltoall") == 0;
    }
    for (int i = 1; i + 1 < argc; i++) {
        if (strcmp(argv[i], "--max-held") == 0) {
            o->max_held = atoi(argv[i + 1]);
        } else if (strcmp(argv[i], "--time") == 0) {
            o->reps = atoi(argv[i + 1]);
        } else if (strcmp(argv[i], "--max-sockets") == 0) {
            o->max_sockets = atoi(argv[i + 1]);
        } else if (strcmp(argv[i], "--nofile") == 0) {
            struct rlimit rl;
            getrlimit(RLIMIT_NOFILE, &rl);
            rl.rlim_cur = (rlim_t)atol(argv[i + 1]);
            if (setrlimit(RLIMIT_NOFILE, &rl) != 0) {
                perror("net_scale: setrlimit");
                return 1;
            }
        }
    }
    return 0;
}

int main(int argc, char **argv)
{
    int rank, size;
    opts_t opt;
    if (parse(argc, argv, &opt) != 0) {
        return 1;
    }
    int max_held = opt.max_held, max_sockets = opt.max_sockets, starve = opt.starve;
    int reps = opt.reps;
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    net_query_fn query = (net_query_fn)dlsym(RTLD_DEFAULT, "picoll_comm_net_query");
    last_alg_fn last = (last_alg_fn)dlsym(RTLD_DEFAULT, "picoll_last_algorithm");
    if (query == NULL || last == NULL) {
        fail(rank, "picoll is not loaded (picoll_comm_net_query not found)");
    }
    /* the MPI's own connections, to every rank, before the count starts */
    for (int k = 1; k < size; k++) {
        int s = rank, r;
        MPI_Sendrecv(&s, 1, MPI_INT, (rank + k) % size, 7, &r, 1, MPI_INT, (rank - k + size) % size,
                     7, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    }
    MPI_Comm c;
    MPI_Comm_dup(MPI_COMM_WORLD, &c);
    int sockets0 = count_sockets();
    long rss0 = rss_kb();
    double x = 1, y, t0 = MPI_Wtime();
    MPI_Allreduce(&x, &y, 1, MPI_DOUBLE, MPI_SUM, c);
    double t1 = MPI_Wtime();
    MPI_Allreduce(&x, &y, 1, MPI_DOUBLE, MPI_SUM, c);
    double t2 = MPI_Wtime();
    /* held: [0] endpoints, [1] liveness connections, [2] sockets gained, [3] rail members, then
     * [4..6] the same after the alltoall; [7] set-up in microseconds, [8] resident memory gained
     * in KiB, [9] the same after the alltoall */
    long held[10] = {0};
    held[7] = (long)(((t1 - t0) - (t2 - t1)) * 1e6);
    allreduce_check(c, rank, size, 1, last);
    allreduce_check(c, rank, size, 4096, last);
    allreduce_check(c, rank, size, 262144, last);
    blocks_check(c, rank, size, 8, 0, last);
    blocks_check(c, rank, size, 65536, 0, last);
    if (reps > 0) {
        double t[5] = {time_calls(c, 0, 8, reps, size), time_calls(c, 0, 65536, reps, size),
                       time_calls(c, 0, 1 << 20, reps, size), time_calls(c, 1, 8, reps, size),
                       time_calls(c, 1, 65536, reps, size)};
        if (rank == 0) {
            printf("net_scale: time allreduce 8 %.1f 64k %.1f 1m %.1f allgather 8 %.1f 64k %.1f "
                   "us\n",
                   t[0] * 1e6, t[1] * 1e6, t[2] * 1e6, t[3] * 1e6, t[4] * 1e6);
        }
    }
    int rail = 0, eps = 0, watched = 0;
    if (query != NULL && query(c, &rail, &eps, &watched) != MPI_SUCCESS) {
        fail(rank, "picoll_comm_net_query: no network step on the communicator");
    }
    held[0] = eps;
    held[1] = watched;
    held[2] = count_sockets() - sockets0;
    held[3] = rail;
    held[8] = rss_kb() - rss0;
    if (starve) {
        struct rlimit rl, keep;
        getrlimit(RLIMIT_NOFILE, &keep);
        rl = keep;
        rl.rlim_cur = (rlim_t)highest_fd() + 1;
        setrlimit(RLIMIT_NOFILE, &rl);
        /* and the free numbers below it taken */
        int fill[4096], nfill = 0;
        while (nfill < 4096 && (fill[nfill] = open("/dev/null", O_RDONLY)) >= 0) {
            nfill++;
        }
        expect_path = "fallback";
        blocks_check(c, rank, size, 8, 1, last);
        for (int i = 0; i < nfill; i++) {
            close(fill[i]);
        }
        setrlimit(RLIMIT_NOFILE, &keep);
    }
    blocks_check(c, rank, size, 8, 1, last);
    if (query != NULL) {
        query(c, &rail, &eps, &watched);
    }
    held[4] = eps;
    held[5] = watched;
    held[6] = count_sockets() - sockets0;
    held[9] = rss_kb() - rss0;
    long most[10];
    MPI_Reduce(held, most, 10, MPI_LONG, MPI_MAX, 0, MPI_COMM_WORLD);
    int bad = failures, all_bad = 0;
    MPI_Reduce(&bad, &all_bad, 1, MPI_INT, MPI_SUM, 0, MPI_COMM_WORLD);
    if (rank == 0) {
        printf("net_scale: nodes %ld ranks %d setup_us %ld endpoints %ld watched %ld sockets %ld "
               "rss_kb %ld | after alltoall: endpoints %ld watched %ld sockets %ld rss_kb %ld\n",
               most[3], size, most[7], most[0], most[1], most[2], most[8], most[4], most[5],
               most[6], most[9]);
        if (max_held >= 0 && (most[0] > max_held || most[1] > max_held)) {
            printf("net_scale: FAIL: a rank holds more than %d endpoints or liveness connections\n",
                   max_held);
            all_bad++;
        }
        if (max_sockets >= 0 && most[2] > max_sockets) {
            printf("net_scale: FAIL: a rank gained more than %d sockets\n", max_sockets);
            all_bad++;
        }
        if (all_bad == 0) {
            printf("net_scale: passed\n");
        }
        fflush(stdout);
    }
    MPI_Comm_free(&c);
    MPI_Finalize();
    return 0;
}
