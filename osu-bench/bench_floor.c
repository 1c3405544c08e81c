/* osu-bench --floor (bench_floor.h): what the GPU allows, timed by picoll_device_floor in the
 * same job, with the same ranks sharing the same GPUs as the calls do. */
#include "bench_floor.h"
#include "bench_cuda.h"

#include "picoll.h"

#include <dlfcn.h>
#include <stdio.h>
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

void bench_floor_close(bench_floor_t *f)
{
    if (f->own_stream) {
        bench_cuda_stream_destroy(f->stream);
    }
    f->stream = NULL;
    f->own_stream = 0;
    f->on = 0;
}
