/* osu_latency: ping-pong latency between ranks 0 and 1 in the OSU format ("# Size  Latency (us)"),
 * on host buffers. With --ab (libpicoll.so preloaded), each size alternates rounds of the same
 * ping-pong through the MPI's own PMPI_Send/PMPI_Recv (picoll bypassed) and through
 * MPI_Send/MPI_Recv (through picoll's wrappers) in one job, and prints both and their ratio: what
 * interposition costs a point-to-point message. Every received message is checked.
 *   osu_latency [-m MIN:MAX] [-i ITERS] [-x WARMUP] [--ab[=ROUNDS]] */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef int (*send_fn_t)(const void *, int, MPI_Datatype, int, int, MPI_Comm);
typedef int (*recv_fn_t)(void *, int, MPI_Datatype, int, int, MPI_Comm, MPI_Status *);

typedef struct {
    size_t min, max;
    int iters, warmup, rounds; /* rounds 0: OSU's output, through MPI_* only */
} opts_t;

static int parse(int argc, char **argv, opts_t *o)
{
    *o = (opts_t){.min = 1, .max = 1 << 22, .iters = 1000, .warmup = 100};
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "-m") && i + 1 < argc) {
            char *colon = strchr(argv[++i], ':');
            o->min = colon == argv[i] ? 1 : strtoull(argv[i], NULL, 10);
            o->max = colon != NULL ? strtoull(colon + 1, NULL, 10) : o->min;
        } else if (!strcmp(argv[i], "-i") && i + 1 < argc) {
            o->iters = atoi(argv[++i]);
        } else if (!strcmp(argv[i], "-x") && i + 1 < argc) {
            o->warmup = atoi(argv[++i]);
        } else if (!strncmp(argv[i], "--ab", 4)) {
            o->rounds = argv[i][4] == '=' ? atoi(argv[i] + 5) : 5;
        } else {
            return -1;
        }
    }
    return o->min == 0 || o->min > o->max || o->iters <= 0 || o->warmup < 0 || o->rounds < 0 ? -1
                                                                                             : 0;
}

/* Mean one-way latency in microseconds of iters ping-pongs of bytes (after warmup untimed);
 * -1 when a received message is wrong. */
static double pingpong(send_fn_t send, recv_fn_t recv, char *sbuf, char *rbuf, size_t bytes,
                       int iters, int warmup, int rank)
{
    double t0 = 0;
    int peer = 1 - rank, bad = 0;
    for (int i = 0; i < warmup + iters; i++) {
        char mark = (char)('a' + i % 26);
        if (i == warmup) {
            PMPI_Barrier(MPI_COMM_WORLD);
            t0 = PMPI_Wtime();
        }
        memset(sbuf, mark, bytes < 8 ? bytes : 8);
        if (rank == 0) {
            send(sbuf, (int)bytes, MPI_CHAR, peer, 1, MPI_COMM_WORLD);
            recv(rbuf, (int)bytes, MPI_CHAR, peer, 1, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        } else {
            recv(rbuf, (int)bytes, MPI_CHAR, peer, 1, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
            send(sbuf, (int)bytes, MPI_CHAR, peer, 1, MPI_COMM_WORLD);
        }
        bad |= rbuf[0] != mark || rbuf[bytes < 8 ? bytes - 1 : 7] != mark;
    }
    double us = (PMPI_Wtime() - t0) * 1e6 / (2.0 * iters);
    return bad ? -1 : us;
}

int main(int argc, char **argv)
{
    opts_t o;
    int rank, size, status = 0;
    MPI_Init(&argc, &argv);
    PMPI_Comm_rank(MPI_COMM_WORLD, &rank);
    PMPI_Comm_size(MPI_COMM_WORLD, &size);
    if (parse(argc, argv, &o) != 0 || size != 2) {
        if (rank == 0) {
            fprintf(stderr, "usage: osu_latency [-m MIN:MAX] [-i ITERS] [-x WARMUP] [--ab[=ROUNDS]]"
                            " (2 ranks)\n");
        }
        MPI_Finalize();
        return 2;
    }
    char *sbuf = malloc(o.max), *rbuf = malloc(o.max);
    if (rank == 0) {
        printf("# OSU MPI Latency Test (picoll osu-bench)\n");
        printf(o.rounds ? "# Size       MPI(us)    picoll(us)   MPI/picoll\n"
                        : "# Size          Latency (us)\n");
    }
    for (size_t bytes = o.min; bytes <= o.max && status == 0; bytes *= 2) {
        int iters = bytes > 8192 ? o.iters / 10 + 1 : o.iters;
        int warmup = bytes > 8192 ? o.warmup / 10 + 1 : o.warmup;
        double a = 0, b = 0;
        if (o.rounds == 0) {
            b = pingpong(MPI_Send, MPI_Recv, sbuf, rbuf, bytes, iters, warmup, rank);
        }
        for (int r = 0; r < o.rounds && a >= 0 && b >= 0; r++) {
            double ta = pingpong(PMPI_Send, PMPI_Recv, sbuf, rbuf, bytes, iters, warmup, rank);
            double tb = pingpong(MPI_Send, MPI_Recv, sbuf, rbuf, bytes, iters, warmup, rank);
            a = ta < 0 ? -1 : a + ta / o.rounds;
            b = tb < 0 ? -1 : b + tb / o.rounds;
        }
        if (a < 0 || b < 0) {
            fprintf(stderr, "osu_latency: rank %d received a wrong message at %zu bytes\n", rank,
                    bytes);
            status = 1;
        } else if (rank == 0 && o.rounds) {
            printf("%-10zu %12.2f %12.2f %12.2f\n", bytes, a, b, a / b);
        } else if (rank == 0) {
            printf("%-10zu %18.2f\n", bytes, b);
        }
    }
    free(sbuf);
    free(rbuf);
    MPI_Finalize();
    return status;
}
