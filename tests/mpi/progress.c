/* A collective while a nonblocking send is in flight: the MPI's progress rule.
 *
 * Rank 0 starts MPI_Isend of a large message to rank 1, then calls MPI_Allreduce, then waits for
 * its send. Rank 1 receives the message with a blocking MPI_Recv, then calls MPI_Allreduce. The
 * program is correct: the MPI must complete the receive once it is posted, so long as rank 0 is
 * in MPI calls (MPI 4.1, section 3.5, progress), and a plain MPI's allreduce moves the send on
 * while it waits for rank 1. Where the transfer needs the sender's help (a rendezvous: MPICH's
 * shared memory, Open MPI without single-copy), picoll's allreduce must move the MPI on too,
 * else rank 0 waits in picoll for rank 1, which waits in MPI_Recv for rank 0: a hang.
 *
 * Each round checks the message, the sum, and that picoll ran the allreduce (a fallback would
 * pass without the fix). A watchdog ends a hung run after --limit seconds (default 30), naming
 * where each rank is. Ranks beyond 2 take part in the allreduce only. */
#include "mpitest.h"

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static volatile sig_atomic_t where; /* 0: elsewhere, 1: in the allreduce, 2: in MPI_Recv */
static int limit = 30;

static void watchdog(int sig)
{
    static const char *const what[] = {"elsewhere", "in MPI_Allreduce", "in MPI_Recv"};
    char line[160];
    (void)sig;
    int n = snprintf(line, sizeof(line),
                     "FAIL: progress: rank %d still %s after %d s (a hang: the MPI's transfer "
                     "was not moved on)\n",
                     mt_rank, what[where], limit);
    if (n > 0) {
        (void)!write(2, line, (size_t)n);
    }
    _exit(1);
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &mt_rank);
    MPI_Comm_size(MPI_COMM_WORLD, &mt_size);
    int expect = mt_flag(argc, argv, "--expect-picoll");
    mt_load_picoll(expect);
    for (int i = 1; i + 1 < argc; i++) {
        if (strcmp(argv[i], "--limit") == 0) {
            limit = atoi(argv[i + 1]);
        }
    }
    if (mt_size < 2) {
        return mt_skip("needs 2 ranks");
    }
    /* the allreduce's set-up (a communicator's first call) before any send is in flight */
    long warm = 1, warm_sum = 0;
    MPI_Allreduce(&warm, &warm_sum, 1, MPI_LONG, MPI_SUM, MPI_COMM_WORLD);
    MT_CHECK(warm_sum == mt_size, "warm-up sum %ld, not %d", warm_sum, mt_size);

    signal(SIGALRM, watchdog);
    /* 16 B (eager everywhere), 256 KiB and 8 MiB (a rendezvous in every MPI) */
    static const size_t sizes[] = {16, 256 << 10, 8 << 20};
    for (size_t k = 0; k < sizeof(sizes) / sizeof(sizes[0]); k++) {
        size_t n = sizes[k] / sizeof(uint64_t);
        uint64_t *msg = malloc(n * sizeof(uint64_t));
        if (msg == NULL) {
            mt_fail("no memory for %zu bytes", sizes[k]);
            break;
        }
        for (size_t j = 0; j < n; j++) {
            msg[j] = mt_rank == 0 ? mt_rand(k, 0, j) : 0;
        }
        long mine = 1000 * (long)k + mt_rank, sum = -1, expected = 0;
        for (int r = 0; r < mt_size; r++) {
            expected += 1000 * (long)k + r;
        }
        alarm((unsigned)limit);
        MPI_Request req = MPI_REQUEST_NULL;
        if (mt_rank == 0) {
            MPI_Isend(msg, (int)n, MPI_UINT64_T, 1, 42, MPI_COMM_WORLD, &req);
        } else if (mt_rank == 1) {
            where = 2;
            MPI_Recv(msg, (int)n, MPI_UINT64_T, 0, 42, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        }
        where = 1;
        MPI_Allreduce(&mine, &sum, 1, MPI_LONG, MPI_SUM, MPI_COMM_WORLD);
        where = 0;
        const char *alg = mt_picoll.last_algorithm ? mt_picoll.last_algorithm() : "none";
        MPI_Wait(&req, MPI_STATUS_IGNORE);
        alarm(0);
        MT_CHECK(sum == expected, "%zu B in flight: sum %ld, not %ld", sizes[k], sum, expected);
        if (expect) {
            MT_CHECK(strcmp(alg, "fallback") != 0 && strcmp(alg, "none") != 0,
                     "%zu B in flight: the allreduce took path '%s', not one of picoll's", sizes[k],
                     alg);
        }
        if (mt_rank == 1) {
            size_t bad = 0;
            for (size_t j = 0; j < n; j++) {
                bad += msg[j] != mt_rand(k, 0, j);
            }
            MT_CHECK(bad == 0, "%zu B received: %zu of %zu words wrong", sizes[k], bad, n);
        }
        if (mt_rank == 0) {
            printf("progress: %zu B in flight, allreduce on '%s'\n", sizes[k], alg);
            fflush(stdout);
        }
        free(msg);
    }
    return mt_finish("progress");
}
