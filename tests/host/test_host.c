#define _POSIX_C_SOURCE 200809L /* nanosleep */
/* Host executor tests (run with PICOLL_HOST=on and libpicoll preloaded): each mode checks results
 * against a reference computed here by a plain loop over every rank's generated input.
 *   edges     sizes around the one-shot threshold and the workspace slot (size-1, size, size+1)
 *   loop N    N small allreduces in a tight loop, each checked (flag/epoch races)
 *   twocomms  calls alternating between two communicators (world and a reversed split)
 *   thread    MPI_THREAD_SERIALIZED, every call from a worker thread
 *   int8      8-bit sums that overflow (C wraparound)
 *   auto      allgather and alltoall at both sides of PICOLL_HOST=auto's limits (PICOLL_HOST_AUTO_MAX:
 *             ranks x block, ranks x ranks x block), each checked; the CTest entry checks from the
 *             statistics which calls took picoll's path
 *   mixed     allgather and alltoall where the last rank's type is derived (it votes no): all
 *             ranks must fall back together, then take picoll's path again
 *   stall R N rank R stops (SIGSTOP) at iteration N: the others must abort with picoll's timeout
 *   kill R N  rank R is killed (SIGKILL) at iteration N: likewise, where the launcher lets them
 *   late R S  rank R sleeps S seconds before each of an allreduce, an allgather and an alltoall
 *             (a checkpoint, an evaluation): the others wait for it, and every result is right
 *   volume N COUNT  N allreduces of COUNT int32 (sum), each checked: a known amount of traffic
 *   run S     allreduces, allgathers and alltoalls of several sizes, each checked, for S seconds
 *             (rank 0's clock); prints "loop running" once under way, so that a test can start a
 *             fault, and how long the longest iteration took */
#include <mpi.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static int rank, size, failures;

#define CHECK(cond, ...)                                                                           \
    do {                                                                                           \
        if (!(cond)) {                                                                             \
            if (failures++ < 10) {                                                                 \
                fprintf(stderr, "rank %d: ", rank);                                                \
                fprintf(stderr, __VA_ARGS__);                                                      \
                fprintf(stderr, "\n");                                                             \
            }                                                                                      \
        }                                                                                          \
    } while (0)

static int32_t gen(int r, size_t i)
{
    return (int32_t)((i * 2654435761u + (unsigned)r * 40503u) % 2001u) - 1000;
}

/* allreduce of count int32 (SUM) and of count doubles (MAX), in place and not, on comm */
static void check_allreduce(MPI_Comm comm, size_t count)
{
    int crank, csize;
    MPI_Comm_rank(comm, &crank);
    MPI_Comm_size(comm, &csize);
    int32_t *in = malloc((count + 1) * sizeof(int32_t));
    int32_t *out = malloc((count + 1) * sizeof(int32_t));
    double *din = malloc(count * sizeof(double)), *dout = malloc(count * sizeof(double));
    for (size_t i = 0; i < count; i++) {
        in[i] = gen(crank, i);
        din[i] = (double)gen(crank, i + 7);
    }
    for (int inplace = 0; inplace < 2; inplace++) {
        out[count] = 0x5a5a5a5a; /* guard */
        if (inplace) {
            memcpy(out, in, count * sizeof(int32_t));
            MPI_Allreduce(MPI_IN_PLACE, out, (int)count, MPI_INT32_T, MPI_SUM, comm);
        } else {
            MPI_Allreduce(in, out, (int)count, MPI_INT32_T, MPI_SUM, comm);
        }
        for (size_t i = 0; i < count; i++) {
            int32_t e = 0;
            for (int r = 0; r < csize; r++) {
                e += gen(r, i);
            }
            if (out[i] != e) {
                CHECK(0, "allreduce sum count %zu inplace %d: [%zu] = %d, expected %d", count,
                      inplace, i, out[i], e);
                break;
            }
        }
        CHECK(out[count] == 0x5a5a5a5a, "allreduce count %zu wrote past the end", count);
    }
    MPI_Allreduce(din, dout, (int)count, MPI_DOUBLE, MPI_MAX, comm);
    for (size_t i = 0; i < count; i++) {
        double e = -1e300;
        for (int r = 0; r < csize; r++) {
            e = (double)gen(r, i + 7) > e ? (double)gen(r, i + 7) : e;
        }
        if (dout[i] != e) {
            CHECK(0, "allreduce max count %zu: [%zu] = %g, expected %g", count, i, dout[i], e);
            break;
        }
    }
    free(in);
    free(out);
    free(din);
    free(dout);
}

/* allgather and alltoall of `bytes` per block, in place and not */
static void check_blocks(MPI_Comm comm, size_t bytes)
{
    int crank, csize;
    MPI_Comm_rank(comm, &crank);
    MPI_Comm_size(comm, &csize);
    size_t total = bytes * (size_t)csize;
    unsigned char *in = malloc(total + 1), *out = malloc(total + 1);
    for (int inplace = 0; inplace < 2; inplace++) {
        for (size_t i = 0; i < bytes; i++) {
            in[i] = (unsigned char)(crank * 31 + i * 7);
        }
        out[total] = 0xa5;
        if (inplace) {
            memcpy(out + (size_t)crank * bytes, in, bytes);
            MPI_Allgather(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, out, (int)bytes, MPI_BYTE, comm);
        } else {
            MPI_Allgather(in, (int)bytes, MPI_BYTE, out, (int)bytes, MPI_BYTE, comm);
        }
        for (size_t i = 0; i < total; i++) {
            unsigned char e = (unsigned char)((int)(i / bytes) * 31 + (i % bytes) * 7);
            if (out[i] != e) {
                CHECK(0, "allgather %zu bytes inplace %d: [%zu] = %d, expected %d", bytes, inplace,
                      i, out[i], e);
                break;
            }
        }
        CHECK(out[total] == 0xa5, "allgather %zu bytes wrote past the end", bytes);

        /* alltoall: block p of rank r holds bytes (r * 13 + p * 5 + i) */
        for (size_t i = 0; i < total; i++) {
            in[i] = (unsigned char)(crank * 13 + (int)(i / bytes) * 5 + i % bytes);
        }
        out[total] = 0xa5;
        if (inplace) {
            memcpy(out, in, total);
            MPI_Alltoall(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, out, (int)bytes, MPI_BYTE, comm);
        } else {
            MPI_Alltoall(in, (int)bytes, MPI_BYTE, out, (int)bytes, MPI_BYTE, comm);
        }
        for (size_t i = 0; i < total; i++) {
            unsigned char e = (unsigned char)((int)(i / bytes) * 13 + crank * 5 + i % bytes);
            if (out[i] != e) {
                CHECK(0, "alltoall %zu bytes inplace %d: [%zu] = %d, expected %d", bytes, inplace,
                      i, out[i], e);
                break;
            }
        }
        CHECK(out[total] == 0xa5, "alltoall %zu bytes wrote past the end", bytes);
    }
    free(in);
    free(out);
}

static size_t env_size(const char *name, size_t def)
{
    const char *v = getenv(name);
    return v ? strtoull(v, NULL, 10) : def;
}

static void mode_edges(void)
{
    /* the test's CTest entry sets these variables to plain byte counts */
    size_t oneshot = env_size("PICOLL_ALLREDUCE_ONESHOT_MAX", 65536);
    size_t slot = env_size("PICOLL_WORKSPACE_SIZE", 8u << 20) / 2;
    /* between nodes: the rail block at which recursive doubling gives way to the ring (2 rails at
     * most in the tests) */
    size_t rd = env_size("PICOLL_NET_RD_MAX", 0);
    size_t edges[] = {oneshot, slot, slot / (size_t)size, rd ? rd : oneshot, rd ? 2 * rd : slot};
    for (size_t e = 0; e < sizeof(edges) / sizeof(edges[0]); e++) {
        for (long d = -1; d <= 1; d++) {
            size_t bytes = edges[e] + (size_t)d;
            check_allreduce(MPI_COMM_WORLD, bytes / 4 + (d > 0));
            check_blocks(MPI_COMM_WORLD, bytes);
        }
    }
    check_allreduce(MPI_COMM_WORLD, 3 * slot / 4 + 5); /* several two-shot chunks */
    check_blocks(MPI_COMM_WORLD, 2 * slot + 3);
}

static void mode_auto(void)
{
    size_t limit = env_size("PICOLL_HOST_AUTO_MAX", 16384), n = (size_t)size;
    CHECK(limit / (n * n) > 0, "PICOLL_HOST_AUTO_MAX=%zu too small for %d ranks", limit, size);
    /* allgather: picoll's at limit/n and at limit/n^2 (twice), the MPI's at limit/n + 1;
     * alltoall: picoll's at limit/n^2 only */
    check_blocks(MPI_COMM_WORLD, limit / n);
    check_blocks(MPI_COMM_WORLD, limit / n + 1);
    check_blocks(MPI_COMM_WORLD, limit / (n * n));
    check_blocks(MPI_COMM_WORLD, limit / (n * n) + 1);
}

static void mode_mixed(void)
{
    enum { B = 4096 };
    MPI_Datatype four;
    unsigned char *in = malloc((size_t)B * size), *out = malloc((size_t)B * size);
    MPI_Type_contiguous(4, MPI_BYTE, &four);
    MPI_Type_commit(&four);
    int last = rank == size - 1;
    for (size_t i = 0; i < B; i++) {
        in[i] = (unsigned char)(rank * 3 + i);
    }
    MPI_Allgather(in, last ? B / 4 : B, last ? four : MPI_BYTE, out, B, MPI_BYTE, MPI_COMM_WORLD);
    for (size_t i = 0; i < (size_t)B * size; i++) {
        if (out[i] != (unsigned char)((int)(i / B) * 3 + i % B)) {
            CHECK(0, "mixed allgather: [%zu] = %d", i, out[i]);
            break;
        }
    }
    for (size_t i = 0; i < (size_t)B * size; i++) {
        in[i] = (unsigned char)(rank * 11 + (int)(i / B) * 5 + i % B);
    }
    MPI_Alltoall(in, last ? B / 4 : B, last ? four : MPI_BYTE, out, B, MPI_BYTE, MPI_COMM_WORLD);
    for (size_t i = 0; i < (size_t)B * size; i++) {
        if (out[i] != (unsigned char)((int)(i / B) * 11 + rank * 5 + i % B)) {
            CHECK(0, "mixed alltoall: [%zu] = %d", i, out[i]);
            break;
        }
    }
    MPI_Type_free(&four);
    free(in);
    free(out);
    check_blocks(MPI_COMM_WORLD, B); /* agreed again: picoll's path */
}

static void mode_loop(long n)
{
    for (long it = 0; it < n; it++) {
        long v[2] = {rank + it, (long)rank * it}, s[2];
        MPI_Allreduce(v, s, 2, MPI_LONG, MPI_SUM, MPI_COMM_WORLD);
        long e0 = (long)size * (size - 1) / 2 + (long)size * it;
        long e1 = (long)size * (size - 1) / 2 * it;
        if (s[0] != e0 || s[1] != e1) {
            CHECK(0, "loop iteration %ld: got %ld %ld, expected %ld %ld", it, s[0], s[1], e0, e1);
            return;
        }
    }
}

static void mode_volume(long n, size_t count)
{
    int32_t *in = malloc(count * sizeof(int32_t)), *out = malloc(count * sizeof(int32_t));
    for (long it = 0; it < n; it++) {
        for (size_t i = 0; i < count; i++) {
            in[i] = gen(rank, i + (size_t)it);
        }
        MPI_Allreduce(in, out, (int)count, MPI_INT32_T, MPI_SUM, MPI_COMM_WORLD);
        for (size_t i = 0; i < count; i++) {
            int32_t e = 0;
            for (int r = 0; r < size; r++) {
                e += gen(r, i + (size_t)it);
            }
            if (out[i] != e) {
                CHECK(0, "volume iteration %ld: [%zu] = %d, expected %d", it, i, out[i], e);
                break;
            }
        }
    }
    free(in);
    free(out);
}

/* Until rank 0 has seen `seconds` pass: every rank learns it from the same allreduce, so all stop
 * after the same iteration. */
static void mode_run(double seconds)
{
    static const size_t counts[] = {1, 700, 20000, 100003};
    double start = MPI_Wtime(), longest = 0.0;
    long it;
    for (it = 0;; it++) {
        double t0 = MPI_Wtime();
        int stop = rank == 0 && t0 - start > seconds, any;
        MPI_Allreduce(&stop, &any, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
        if (any) {
            break;
        }
        check_allreduce(MPI_COMM_WORLD, counts[it % 4]);
        if (it % 4 == 1) {
            check_blocks(MPI_COMM_WORLD, (size_t)(it % 3) * 5000 + 3);
        }
        if (MPI_Wtime() - t0 > longest) {
            longest = MPI_Wtime() - t0;
        }
        if (it == 20 && rank == 0) {
            printf("test_host run: loop running\n");
            fflush(stdout);
        }
    }
    if (rank == 0) {
        printf("test_host run: %ld iterations, the longest took %.1f s\n", it, longest);
    }
}

/* Alltoall alone, for seconds (rank 0's stop flag travels in its blocks): a fault then strikes
 * inside an alltoall, whose exchange reaches peers beyond the network step's watched partners. */
static void mode_alltoall(double seconds)
{
    const size_t n = 4096; /* ints a block */
    int *in = malloc(n * (size_t)size * sizeof(int)), *out = malloc(n * (size_t)size * sizeof(int));
    double start = MPI_Wtime();
    for (int it = 0;; it++) {
        int stop = rank == 0 && MPI_Wtime() - start > seconds;
        for (int p = 0; p < size; p++) {
            for (size_t i = 0; i < n; i++) {
                in[(size_t)p * n + i] = i == 0 ? stop : rank * 100003 + p * 7 + (int)i + it;
            }
        }
        MPI_Alltoall(in, (int)n, MPI_INT, out, (int)n, MPI_INT, MPI_COMM_WORLD);
        for (int p = 0; p < size; p++) {
            for (size_t i = 1; i < n; i++) {
                int e = p * 100003 + rank * 7 + (int)i + it;
                if (out[(size_t)p * n + i] != e) {
                    CHECK(0, "alltoall %d: from rank %d [%zu] = %d, expected %d", it, p, i,
                          out[(size_t)p * n + i], e);
                    break;
                }
            }
        }
        if (out[0]) {
            break;
        }
        if (it == 20 && rank == 0) {
            printf("test_host alltoall: loop running\n");
            fflush(stdout);
        }
    }
    free(in);
    free(out);
}

static void mode_twocomms(void)
{
    MPI_Comm rev;
    MPI_Comm_split(MPI_COMM_WORLD, 0, size - rank, &rev);
    for (int it = 0; it < 200; it++) {
        MPI_Comm c = it % 2 ? rev : MPI_COMM_WORLD;
        check_allreduce(c, (size_t)(it % 7) * 1000 + 1);
        if (it % 10 == 0) {
            check_blocks(c, (size_t)it * 37 + 1);
        }
    }
    MPI_Comm_free(&rev);
}

static void *worker(void *arg)
{
    (void)arg;
    mode_twocomms();
    check_allreduce(MPI_COMM_WORLD, 300000);
    return NULL;
}

static void mode_int8(void)
{
    enum { N = 4099 };
    int8_t in[N], out[N];
    uint8_t uin[N], uout[N];
    for (int i = 0; i < N; i++) {
        in[i] = (int8_t)(100 + rank * 17 + i);
        uin[i] = (uint8_t)(200 + rank * 29 + i);
    }
    MPI_Allreduce(in, out, N, MPI_INT8_T, MPI_SUM, MPI_COMM_WORLD);
    MPI_Allreduce(uin, uout, N, MPI_UNSIGNED_CHAR, MPI_SUM, MPI_COMM_WORLD);
    for (int i = 0; i < N; i++) {
        unsigned e = 0, ue = 0;
        for (int r = 0; r < size; r++) {
            e += (unsigned)(uint8_t)(int8_t)(100 + r * 17 + i);
            ue += (uint8_t)(200 + r * 29 + i);
        }
        CHECK(out[i] == (int8_t)(uint8_t)e, "int8 sum [%d] = %d, expected %d", i, out[i],
              (int8_t)(uint8_t)e);
        CHECK(uout[i] == (uint8_t)ue, "uint8 sum [%d] = %d, expected %d", i, uout[i], (uint8_t)ue);
    }
}

static void mode_stall(int victim, long at, int sig)
{
    for (long it = 0;; it++) {
        if (rank == victim && it == at) {
            fprintf(stderr, "rank %d: %s at iteration %ld\n", rank,
                    sig == SIGKILL ? "killed" : "stopping", it);
            raise(sig);
        }
        long v = 1, s;
        MPI_Allreduce(&v, &s, 1, MPI_LONG, MPI_SUM, MPI_COMM_WORLD);
    }
}

static void mode_late(int victim, double seconds)
{
    enum { N = 1000 };
    int *in = malloc(N * sizeof(int)), *out = malloc((size_t)size * N * sizeof(int));
    struct timespec pause = {.tv_sec = (time_t)seconds,
                             .tv_nsec = (long)((seconds - (double)(time_t)seconds) * 1e9)};
    long warm = 1, warm_sum;
    /* the communicator's context is made at its first call, inside the MPI's own exchanges: warm
     * it up, so that the waits below are picoll's */
    MPI_Allreduce(&warm, &warm_sum, 1, MPI_LONG, MPI_SUM, MPI_COMM_WORLD);
    for (int step = 0; step < 3; step++) {
        if (rank == victim) {
            fprintf(stderr, "rank %d: sleeping %.1f s before step %d\n", rank, seconds, step);
            nanosleep(&pause, NULL);
        }
        for (int i = 0; i < N; i++) {
            in[i] = rank * 1000003 + i + step;
        }
        if (step == 0) {
            MPI_Allreduce(in, out, N, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
            for (int i = 0; i < N; i++) {
                int e = 0;
                for (int r = 0; r < size; r++) {
                    e += r * 1000003 + i + step;
                }
                CHECK(out[i] == e, "late allreduce [%d] = %d, expected %d", i, out[i], e);
            }
        } else if (step == 1) {
            MPI_Allgather(in, N, MPI_INT, out, N, MPI_INT, MPI_COMM_WORLD);
            for (int r = 0; r < size; r++) {
                for (int i = 0; i < N; i++) {
                    CHECK(out[r * N + i] == r * 1000003 + i + step, "late allgather [%d][%d]", r,
                          i);
                }
            }
        } else {
            int per = N / size;
            MPI_Alltoall(in, per, MPI_INT, out, per, MPI_INT, MPI_COMM_WORLD);
            for (int r = 0; r < size; r++) {
                for (int i = 0; i < per; i++) {
                    /* rank r sent me its piece number `rank`: its elements rank*per + i */
                    CHECK(out[r * per + i] == r * 1000003 + rank * per + i + step,
                          "late alltoall [%d][%d]", r, i);
                }
            }
        }
    }
    free(in);
    free(out);
}

int main(int argc, char **argv)
{
    const char *mode = argc > 1 ? argv[1] : "";
    int provided;

    /* TEST_HOST_CACHE_PER_RANK=A,B,...: world rank r runs with PICOLL_HOST_CACHE set to item
     * r % count, as ranks on cores with different caches would detect them (read before MPI_Init,
     * from the launcher's rank variable) */
    const char *per_rank = getenv("TEST_HOST_CACHE_PER_RANK");

    const char *launcher_rank = getenv("OMPI_COMM_WORLD_RANK");
    if (launcher_rank == NULL) {
        launcher_rank = getenv("PMI_RANK");
    }
    if (per_rank != NULL && launcher_rank != NULL) {
        char list[256], *save = NULL;
        char *items[16];
        int count = 0;
        snprintf(list, sizeof(list), "%s", per_rank);
        for (char *t = strtok_r(list, ",", &save); t != NULL && count < 16;
             t = strtok_r(NULL, ",", &save)) {
            items[count++] = t;
        }
        if (count > 0) {
            setenv("PICOLL_HOST_CACHE", items[atoi(launcher_rank) % count], 1);
        }
    }
    if (strcmp(mode, "thread") == 0) {
        MPI_Init_thread(&argc, &argv, MPI_THREAD_SERIALIZED, &provided);
    } else {
        MPI_Init(&argc, &argv);
    }
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);

    if (strcmp(mode, "edges") == 0) {
        mode_edges();
    } else if (strcmp(mode, "loop") == 0) {
        mode_loop(argc > 2 ? atol(argv[2]) : 100000);
    } else if (strcmp(mode, "twocomms") == 0) {
        mode_twocomms();
    } else if (strcmp(mode, "thread") == 0) {
        pthread_t t;
        if (provided < MPI_THREAD_SERIALIZED) {
            CHECK(0, "MPI provides thread level %d < MPI_THREAD_SERIALIZED", provided);
        } else {
            pthread_create(&t, NULL, worker, NULL);
            pthread_join(t, NULL);
        }
    } else if (strcmp(mode, "int8") == 0) {
        mode_int8();
    } else if (strcmp(mode, "mixed") == 0) {
        mode_mixed();
    } else if (strcmp(mode, "auto") == 0) {
        mode_auto();
    } else if (strcmp(mode, "stall") == 0) {
        mode_stall(argc > 2 ? atoi(argv[2]) : 1, argc > 3 ? atol(argv[3]) : 1000, SIGSTOP);
    } else if (strcmp(mode, "volume") == 0) {
        mode_volume(argc > 2 ? atol(argv[2]) : 10, argc > 3 ? strtoul(argv[3], NULL, 10) : 1000000);
    } else if (strcmp(mode, "run") == 0) {
        mode_run(argc > 2 ? atof(argv[2]) : 10.0);
    } else if (strcmp(mode, "alltoall") == 0) {
        mode_alltoall(argc > 2 ? atof(argv[2]) : 10.0);
    } else if (strcmp(mode, "late") == 0) {
        mode_late(argc > 2 ? atoi(argv[2]) : 1, argc > 3 ? atof(argv[3]) : 3.0);
    } else if (strcmp(mode, "kill") == 0) {
        mode_stall(argc > 2 ? atoi(argv[2]) : 1, argc > 3 ? atol(argv[3]) : 1000, SIGKILL);
    } else {
        fprintf(stderr, "usage: test_host edges|loop [N]|twocomms|thread|int8|auto|mixed|stall [R "
                        "N]|kill [R N]|late [R S]|volume [N COUNT]|run [S]|alltoall [S]\n");
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    int all;
    MPI_Allreduce(&failures, &all, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    if (rank == 0) {
        printf("test_host %s: %s (%d failures over %d ranks)\n", mode, all ? "FAILED" : "passed",
               all, size);
    }
    MPI_Finalize();
    return failures != 0;
}
