/* Collectives from threads other than the one that initialised MPI:
 *   serialized  MPI_THREAD_SERIALIZED, every collective from one worker pthread while the main
 *               thread waits (as PyTorch's MPI backend does);
 *   multiple    MPI_THREAD_MULTIPLE, N threads at once, each on its own dup of MPI_COMM_WORLD;
 *               skipped (exit 77) if the MPI library does not provide MPI_THREAD_MULTIPLE.
 * Results are checked; with --expect-picoll every communicator ends with its own enabled context.
 * Usage: threads serialized|multiple [--threads N] [--iters N] [--expect-picoll] */
#include "mpitest.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
    int index;
    MPI_Comm comm; /* MPI_COMM_NULL: the worker makes its own */
    int iters;
    unsigned long id;
    pthread_t thread;
} worker_t;

static void round_trip(MPI_Comm comm, const char *name, int iter, int salt)
{
    int rank, size;
    MPI_Comm_rank(comm, &rank);
    MPI_Comm_size(comm, &size);
    int n = 1 + (iter * 37 + salt) % 3000; /* small and large, odd and even */
    long *in = malloc(sizeof(long) * (size_t)n), *out = malloc(sizeof(long) * (size_t)n);
    int *g = malloc(sizeof(int) * 3 * (size_t)size), *t = malloc(sizeof(int) * 2 * (size_t)size),
        *tt = malloc(sizeof(int) * 2 * (size_t)size);
    int mine[3] = {rank, iter, salt};

    for (int i = 0; i < n; i++) {
        in[i] = (long)(rank + 1) * (i + iter + salt);
    }
    MT_CHECK(MPI_Allreduce(in, out, n, MPI_LONG, MPI_SUM, comm) == MPI_SUCCESS,
             "%s: MPI_Allreduce failed", name);
    for (int i = 0; i < n; i++) {
        long expect = (long)size * (size + 1) / 2 * (i + iter + salt);
        if (out[i] != expect) {
            mt_fail("%s iteration %d: MPI_Allreduce [%d of %d] = %ld, expected %ld", name, iter, i,
                    n, out[i], expect);
            break;
        }
    }
    MT_CHECK(MPI_Allgather(mine, 3, MPI_INT, g, 3, MPI_INT, comm) == MPI_SUCCESS,
             "%s: MPI_Allgather failed", name);
    for (int s = 0; s < size; s++) {
        MT_CHECK(g[3 * s] == s && g[3 * s + 1] == iter && g[3 * s + 2] == salt,
                 "%s iteration %d: MPI_Allgather block %d = (%d,%d,%d)", name, iter, s, g[3 * s],
                 g[3 * s + 1], g[3 * s + 2]);
    }
    for (int d = 0; d < size; d++) {
        t[2 * d] = rank * 100 + d;
        t[2 * d + 1] = iter + salt;
    }
    MT_CHECK(MPI_Alltoall(t, 2, MPI_INT, tt, 2, MPI_INT, comm) == MPI_SUCCESS,
             "%s: MPI_Alltoall failed", name);
    for (int s = 0; s < size; s++) {
        MT_CHECK(tt[2 * s] == s * 100 + rank && tt[2 * s + 1] == iter + salt,
                 "%s iteration %d: MPI_Alltoall block %d = (%d,%d)", name, iter, s, tt[2 * s],
                 tt[2 * s + 1]);
    }
    free(in);
    free(out);
    free(g);
    free(t);
    free(tt);
}

static unsigned long context_id(MPI_Comm comm, const char *name)
{
    picoll_comm_info_t info;
    if (!mt_picoll.found) {
        return 0;
    }
    int rc = mt_picoll.comm_query(comm, &info);
    MT_CHECK(rc == MPI_SUCCESS, "%s: no context after collectives", name);
    if (rc != MPI_SUCCESS) {
        return 0;
    }
    MT_CHECK(info.enabled == 1, "%s: context disabled: %s", name, info.reason);
    return info.id;
}

static void *serialized_worker(void *arg)
{
    worker_t *w = arg;
    MPI_Comm dup, split;
    if (mt_picoll.found) {
        MT_CHECK(mt_picoll.active() == 1, "picoll_active() = %d in the worker", mt_picoll.active());
    }
    MPI_Comm_dup(MPI_COMM_WORLD, &dup);
    MPI_Comm_split(MPI_COMM_WORLD, mt_rank % 2, -mt_rank, &split);
    for (int it = 0; it < w->iters; it++) {
        round_trip(MPI_COMM_WORLD, "worker on MPI_COMM_WORLD", it, 1);
        round_trip(dup, "worker on a dup", it, 2);
        round_trip(split, "worker on a split", it, 3);
    }
    unsigned long a = context_id(MPI_COMM_WORLD, "MPI_COMM_WORLD");
    unsigned long b = context_id(dup, "dup");
    unsigned long c = context_id(split, "split");
    MT_CHECK(!mt_picoll.found || (a != b && b != c && a != c), "contexts share ids %lu %lu %lu", a,
             b, c);
    MPI_Comm_free(&dup);
    MPI_Comm_free(&split);
    return NULL;
}

static void *multiple_worker(void *arg)
{
    worker_t *w = arg;
    char name[64];
    snprintf(name, sizeof(name), "thread %d", w->index);
    for (int it = 0; it < w->iters; it++) {
        round_trip(w->comm, name, it, 100 * w->index);
    }
    w->id = context_id(w->comm, name);
    return NULL;
}

int main(int argc, char **argv)
{
    const char *mode = argc > 1 ? argv[1] : "";
    int expect_picoll = mt_flag(argc, argv, "--expect-picoll");
    int nthreads = atoi(mt_option(argc, argv, "--threads", "3"));
    int iters = atoi(mt_option(argc, argv, "--iters", "20"));
    int multiple = strcmp(mode, "multiple") == 0;
    int required = multiple ? MPI_THREAD_MULTIPLE : MPI_THREAD_SERIALIZED;
    int provided = MPI_THREAD_SINGLE;

    if (!multiple && strcmp(mode, "serialized") != 0) {
        fprintf(stderr, "usage: threads serialized|multiple [--threads N] [--iters N] "
                        "[--expect-picoll]\n");
        return 2;
    }
    MPI_Init_thread(&argc, &argv, required, &provided);
    mt_load_picoll(expect_picoll);
    if (provided < required) {
        char why[128];
        snprintf(why, sizeof(why), "the MPI library provides thread level %d, not %s", provided,
                 multiple ? "MPI_THREAD_MULTIPLE" : "MPI_THREAD_SERIALIZED");
        return mt_skip(why);
    }
    if (!multiple) {
        worker_t w = {.index = 0, .comm = MPI_COMM_NULL, .iters = iters};
        if (pthread_create(&w.thread, NULL, serialized_worker, &w) != 0) {
            mt_fail("pthread_create failed");
        } else {
            pthread_join(w.thread, NULL);
        }
        /* and back on the main thread */
        round_trip(MPI_COMM_WORLD, "main thread after the worker", 0, 7);
        return mt_finish("threads serialized");
    }

    worker_t *w = calloc((size_t)nthreads, sizeof(worker_t));
    for (int i = 0; i < nthreads; i++) {
        w[i].index = i;
        w[i].iters = iters;
        MPI_Comm_dup(MPI_COMM_WORLD, &w[i].comm);
    }
    for (int i = 0; i < nthreads; i++) {
        if (pthread_create(&w[i].thread, NULL, multiple_worker, &w[i]) != 0) {
            mt_fail("pthread_create failed");
            MPI_Abort(MPI_COMM_WORLD, 1);
        }
    }
    for (int i = 0; i < nthreads; i++) {
        pthread_join(w[i].thread, NULL);
    }
    for (int i = 0; i < nthreads; i++) {
        for (int j = 0; j < i && mt_picoll.found; j++) {
            MT_CHECK(w[i].id != w[j].id, "threads %d and %d share context id %lu", j, i, w[i].id);
        }
        MPI_Comm_free(&w[i].comm);
    }
    free(w);
    return mt_finish("threads multiple");
}
