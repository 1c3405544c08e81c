/* osu-bench --floor (bench_floor.h): what the GPU allows, timed by picoll_device_floor and
 * picoll_device_barrier_floor in the same job, with the same ranks sharing the same GPUs as the
 * calls do. */
#include "bench_floor.h"
#include "bench_cuda.h"

#include "picoll.h"

#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The mean over comm's ranks of a time every rank measured at once, between two barriers. */
static double floor_mean(MPI_Comm comm, double mine)
{
    double sum = 0.0;
    int np = 1;
    PMPI_Comm_size(comm, &np);
    PMPI_Allreduce(&mine, &sum, 1, MPI_DOUBLE, MPI_SUM, comm);
    return sum / np;
}

/* Collective: one floor, every rank at once; 0 where every rank measured it, else -1. */
static int floor_time(const bench_floor_t *f, MPI_Comm comm, int what, int n, size_t bytes,
                      double *us)
{
    double s = 0.0;
    int rc = f->floor(what, f->stream, n, bytes, &s), bad = rc != MPI_SUCCESS, any = 0;
    PMPI_Allreduce(&bad, &any, 1, MPI_INT, MPI_MAX, comm);
    *us = floor_mean(comm, bad ? 0.0 : s * 1e6);
    return any ? -1 : 0;
}

int bench_floor_setup(bench_floor_t *f, MPI_Comm comm, void *stream, char *why, size_t len)
{
    int mine = 0, all = 0;
    *(void **)&f->floor = dlsym(RTLD_DEFAULT, "picoll_device_floor");
    f->stream = stream;
    if (f->floor == NULL) {
        snprintf(why, len, "picoll_device_floor is not in the process (libpicoll.so preloaded?)");
        mine = -1;
    } else if (stream == NULL && bench_cuda_stream_create(&f->stream, why, len) != 0) {
        mine = -1;
    } else {
        f->own_stream = stream == NULL;
    }
    PMPI_Allreduce(&mine, &all, 1, MPI_INT, MPI_MIN, comm);
    if (all < 0) {
        if (mine == 0) {
            snprintf(why, len, "the set-up failed on another rank");
        }
        return -1;
    }
    PMPI_Barrier(comm);
    if (floor_time(f, comm, PICOLL_FLOOR_LAUNCH, f->n, 0, &f->launch_us) != 0) {
        snprintf(why, len, "picoll_device_floor(PICOLL_FLOOR_LAUNCH) failed (see its warning)");
        return -1;
    }
    PMPI_Barrier(comm);
    if (floor_time(f, comm, PICOLL_FLOOR_QUEUE, f->n, 0, &f->queue_us) != 0) {
        snprintf(why, len, "picoll_device_floor(PICOLL_FLOOR_QUEUE) failed (its warning says why)");
        return -1;
    }
    f->on = 1;
    return 0;
}

void bench_floor_barrier(bench_floor_t *f, MPI_Comm comm)
{
    static const int what[BENCH_BARRIERS] = {PICOLL_FLOOR_BARRIER, PICOLL_FLOOR_BARRIER_QUEUE,
                                             PICOLL_FLOOR_BARRIER_GRAPH};
    int (*barrier)(MPI_Comm, int, void *, int, double *) = NULL;
    int mine = 0, all = 0, any = 0;
    *(void **)&barrier = dlsym(RTLD_DEFAULT, "picoll_device_barrier_floor");
    mine = barrier != NULL;
    PMPI_Allreduce(&mine, &all, 1, MPI_INT, MPI_MIN, comm);
    snprintf(f->barrier_why, sizeof(f->barrier_why), "%s",
             all ? "picoll_device_barrier_floor failed on some rank (its warning says why)"
                 : "picoll_device_barrier_floor is not in the process (an older libpicoll.so?)");
    for (int w = 0; w < BENCH_BARRIERS && all; w++) {
        double s = 0.0;
        PMPI_Barrier(comm);
        int bad = barrier(comm, what[w], f->stream, f->n, &s) != MPI_SUCCESS, worst = 0;
        PMPI_Allreduce(&bad, &worst, 1, MPI_INT, MPI_MAX, comm);
        f->barrier_us[w] = worst ? 0.0 : floor_mean(comm, s * 1e6);
        any |= !worst;
    }
    f->barrier_on = any;
}

size_t bench_floor_moved(const char *coll, int np, size_t size)
{
    size_t p = (size_t)np;
    if (strcmp(coll, "allgather") == 0) {
        return (p + 1) * size; /* my block read, every rank's written */
    }
    if (strcmp(coll, "alltoall") == 0) {
        return 2 * p * size; /* np blocks read, np written */
    }
    return 2 * size; /* allreduce: my input read, my result written */
}

/* "blocking 5.10 us, enqueued 3.26 us, graph 3.10 us" of the ways that ran ("n/a" the others). */
static void barrier_ways(const bench_floor_t *f, const char *unit)
{
    static const char *const name[BENCH_BARRIERS] = {"blocking", "enqueued", "graph"};
    for (int w = 0; w < BENCH_BARRIERS; w++) {
        if (f->barrier_us[w] > 0.0) {
            printf("%s%s %.2f%s", w == 0 ? "" : ", ", name[w], f->barrier_us[w], unit);
        } else {
            printf("%s%s n/a", w == 0 ? "" : ", ", name[w]);
        }
    }
}

void bench_floor_header(const bench_floor_t *f, const char *coll, int np)
{
    (void)np;
    printf("# floor: every rank at once, on its GPU, with picoll's launch shape "
           "(picoll_device_floor, %d launches): an empty kernel launched and waited for %.2f us "
           "(blocking floor), queued on the stream %.2f us per launch (stream floor); per size a "
           "device-to-device copy of half the bytes a rank's %s must read and write (%s), each "
           "row's floor the larger of the launch's and the copy's\n",
           f->n, f->launch_us, f->queue_us, coll,
           strcmp(coll, "allgather") == 0  ? "(np+1) x size"
           : strcmp(coll, "alltoall") == 0 ? "2 x np x size"
                                           : "2 x size");
    if (f->barrier_on) {
        printf(
            "# barrier floor: every rank at once, a barrier of the ranks over picoll's device "
            "workspace (picoll_device_barrier_floor, %d barriers: one block of one warp, each "
            "rank's epoch stored into its flag in every peer's workspace, a spin on the peers' "
            "flags in its own, no data), waited for as a blocking call (blocking), queued on the "
            "stream (enqueued), a graph of one launched (graph): ",
            f->n);
        barrier_ways(f, " us");
        printf("\n");
    } else {
        printf("# barrier floor: skipped: %s\n", f->barrier_why);
    }
}

double bench_floor_copy(const bench_floor_t *f, MPI_Comm comm, size_t moved, int iters)
{
    double us = 0.0;
    size_t half = moved / 2 > 0 ? moved / 2 : 1;
    PMPI_Barrier(comm);
    if (floor_time(f, comm, PICOLL_FLOOR_COPY, iters, half, &us) != 0) {
        return -1.0;
    }
    return us;
}

static double ratio(double a, double b)
{
    return b > 0.0 ? a / b : 0.0;
}

void bench_floor_row(const bench_floor_t *f, size_t moved, double copy_us, double picoll_us,
                     const double *stream_us)
{
    if (copy_us < 0.0) {
        printf("# floor (us): the copy of %zu B failed (picoll_device_floor's warning says why)\n",
               moved);
        return;
    }
    double blocking = copy_us > f->launch_us ? copy_us : f->launch_us;
    double queued = copy_us > f->queue_us ? copy_us : f->queue_us;
    printf("# floor (us): blocking %.2f, stream %.2f (copy %.2f: %zu B read and written, %.1f "
           "GB/s); picoll/floor %.3fx",
           blocking, queued, copy_us, moved, copy_us > 0.0 ? (double)moved / copy_us / 1e3 : 0.0,
           ratio(picoll_us, blocking));
    if (stream_us != NULL && stream_us[0] > 0.0) {
        printf(", enqueue/floor %.3fx", ratio(stream_us[0], queued));
    }
    if (stream_us != NULL && stream_us[1] > 0.0) {
        printf(", graph/floor %.3fx", ratio(stream_us[1], queued));
    }
    printf("\n");
}

void bench_floor_barrier_row(const bench_floor_t *f, double picoll_us, const double *stream_us)
{
    static const char *const column[BENCH_BARRIERS] = {"picoll", "enqueue", "graph"};
    const double us[BENCH_BARRIERS] = {picoll_us, stream_us[0], stream_us[1]};
    if (!f->barrier_on) {
        return;
    }
    printf("# barrier floor (us): ");
    barrier_ways(f, "");
    const char *sep = "; ";
    for (int w = 0; w < BENCH_BARRIERS; w++) {
        if (us[w] > 0.0 && f->barrier_us[w] > 0.0) {
            printf("%s%s/barrier %.3fx", sep, column[w], us[w] / f->barrier_us[w]);
            sep = ", ";
        }
    }
    printf("\n");
}

void bench_floor_close(bench_floor_t *f)
{
    if (f->own_stream) {
        bench_cuda_stream_destroy(f->stream);
    }
    f->stream = NULL;
    f->own_stream = 0;
    f->on = 0;
    free(f->hsrc);
    free(f->hdst);
    f->hsrc = f->hdst = NULL;
    f->hbytes = 0;
    if (f->cbytes > 0) {
        PMPI_Win_free(&f->cwin);
    }
    f->cbytes = 0;
    f->cmine = f->cnext = NULL;
}

/* ------------------------------------------------------------------ host buffers (issue 52) */

/* Collective: a shared window of bytes a rank (grown as sizes grow), f->cmine and f->cnext in it;
 * 0 where the cross floor can be measured (every rank alike: f->cross). */
static int cross_window(bench_floor_t *f, MPI_Comm comm, size_t bytes)
{
    int n, rank, node_n = 0, ok;
    MPI_Comm node;
    if (f->cross < 0) {
        return -1;
    }
    if (f->cross == 0) { /* every rank on one node: the window can be shared */
        PMPI_Comm_size(comm, &n);
        PMPI_Comm_split_type(comm, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &node);
        PMPI_Comm_size(node, &node_n);
        PMPI_Comm_free(&node);
        ok = node_n == n;
        int all = 0;
        PMPI_Allreduce(&ok, &all, 1, MPI_INT, MPI_MIN, comm);
        f->cross = all ? 1 : -1;
        if (!all) {
            return -1;
        }
    }
    if (bytes <= f->cbytes) {
        return 0;
    }
    if (f->cbytes > 0) {
        PMPI_Win_free(&f->cwin);
        f->cbytes = 0;
    }
    PMPI_Comm_size(comm, &n);
    PMPI_Comm_rank(comm, &rank);
    ok = PMPI_Win_allocate_shared((MPI_Aint)bytes, 1, MPI_INFO_NULL, comm, &f->cmine, &f->cwin) ==
         MPI_SUCCESS;
    if (ok) {
        MPI_Aint size;
        int unit;
        f->cbytes = bytes;
        ok = PMPI_Win_shared_query(f->cwin, (rank + 1) % n, &size, &unit, &f->cnext) ==
                 MPI_SUCCESS &&
             (size_t)size >= bytes;
        memset(f->cmine, 0x3c, bytes); /* the pages faulted in before any copy is timed */
    }
    int all = 0;
    PMPI_Allreduce(&ok, &all, 1, MPI_INT, MPI_MIN, comm);
    if (!all) {
        if (f->cbytes > 0) {
            PMPI_Win_free(&f->cwin);
        }
        f->cbytes = 0;
        f->cross = -1;
        return -1;
    }
    return 0;
}

/* Collective: this rank's mean time (us) of iters copies of bytes from src to dst after warmup
 * untimed ones, each alone between barriers; where mine is not NULL each copy reads what another
 * rank wrote into its mine (this rank's into mine) just before the barrier ahead of it. */
static double timed_copies(MPI_Comm comm, char *dst, const char *src, char *mine, size_t bytes,
                           int iters, int warmup)
{
    double total = 0.0;
    for (int i = 0; i < warmup + iters; i++) {
        if (mine != NULL) {
            memset(mine, 0x40 + (i & 15), bytes);
            PMPI_Barrier(comm);
        }
        double t0 = MPI_Wtime();
        memcpy(dst, src, bytes);
        double t1 = MPI_Wtime();
        if (i >= warmup) {
            total += t1 - t0;
        }
        PMPI_Barrier(comm);
    }
    return total * 1e6 / (iters > 0 ? iters : 1);
}

double bench_floor_host_copy(bench_floor_t *f, MPI_Comm comm, size_t moved, int iters, int warmup)
{
    size_t half = moved / 2 > 0 ? moved / 2 : 1;
    int ok = 1, all = 0;
    if (half > f->hbytes) {
        free(f->hsrc);
        free(f->hdst);
        f->hsrc = malloc(half);
        f->hdst = malloc(half);
        ok = f->hsrc != NULL && f->hdst != NULL;
        f->hbytes = ok ? half : 0;
        if (ok) { /* the pages faulted in before any copy is timed */
            memset(f->hsrc, 0x5a, half);
            memset(f->hdst, 0, half);
        }
    }
    PMPI_Allreduce(&ok, &all, 1, MPI_INT, MPI_MIN, comm);
    if (!all) {
        return -1.0;
    }
    PMPI_Barrier(comm);
    double us = timed_copies(comm, f->hdst, f->hsrc, NULL, half, iters, warmup);
    if (cross_window(f, comm, half) == 0) {
        f->cross_us = timed_copies(comm, f->hdst, f->cnext, f->cmine, half, iters, warmup);
    }
    return us;
}

void bench_floor_host_header(const char *coll)
{
    printf(
        "# host floor: in every --ab round, after the calls, every rank copies (memcpy) half the "
        "bytes a rank's %s must read and write (%s) between two buffers of its own, at once, "
        "each copy alone between barriers as the calls are: the machine's memory in the same "
        "round; under each row its rounds (\"# rounds floor (us):\") and the ratios to their "
        "median. Where every rank is on one node, then the cross floor: the same copies out of "
        "the next rank's memory (a shared window it wrote just before), the price of moving "
        "bytes between processes (\"# rounds cross (us):\", \"# cross floor (us):\")\n",
        coll,
        strcmp(coll, "allgather") == 0  ? "(np+1) x size"
        : strcmp(coll, "alltoall") == 0 ? "2 x np x size"
                                        : "2 x size");
}

/* "# rounds WHAT (us): ..." with n rounds. */
static void print_rounds(const char *what, const double *rounds, int n)
{
    printf("# rounds %s (us):", what);
    for (int r = 0; r < n; r++) {
        printf(" %.3f", rounds[r]);
    }
    printf("\n");
}

void bench_floor_cross_row(size_t moved, const double *rounds, int n, double cross_us,
                           double picoll_us, double mpi_us)
{
    print_rounds("cross", rounds, n);
    printf("# cross floor (us): %.3f (%zu B read and written, out of the next rank's memory, "
           "%.1f GB/s); picoll/cross %.3fx, MPI/cross %.3fx\n",
           cross_us, moved, cross_us > 0.0 ? (double)moved / cross_us / 1e3 : 0.0,
           ratio(picoll_us, cross_us), ratio(mpi_us, cross_us));
}

void bench_floor_host_row(size_t moved, const double *rounds, int n, double floor_us,
                          double picoll_us, double mpi_us)
{
    print_rounds("floor", rounds, n);
    if (floor_us <= 0.0) {
        printf("# host floor (us): the copy of %zu B failed (out of memory)\n", moved);
        return;
    }
    printf("# host floor (us): %.3f (%zu B read and written, %.1f GB/s); picoll/floor %.3fx, "
           "MPI/floor %.3fx\n",
           floor_us, moved, (double)moved / floor_us / 1e3, ratio(picoll_us, floor_us),
           ratio(mpi_us, floor_us));
}
