/* The barrier floor (picoll_device_barrier_floor, cuda/cuda_floor.c, osu-bench --floor) on the
 * emulated GPU or a real one, with libpicoll.so preloaded: the cheapest kernel that crosses
 * processes, a flag exchange over the communicator's device workspace.
 *
 *   - before any device call on the communicator there is no workspace: an error, at once;
 *   - after an allreduce on device buffers (on picoll's kernels), each way of running it
 *     (blocking, queued on a stream, graph-launched) times 20 barriers: a positive time;
 *   - each way once more with the last rank 0.3 s late: rank 0's barrier must last at least 0.2
 *     s (a barrier that did not wait for every rank, or told its end before its waits were over,
 *     returns at once: tests/cuda/mutants.sh weakens those points and this test must fail);
 *   - --give-up (with PICOLL_TIMEOUT=2): the last rank skips one blocking barrier; the others'
 *     must give up with an error naming it, and the next barrier of every rank then pass (the
 *     epochs stay in step).
 * The ways run one after the other on the same flags, so that epochs out of step between them
 * would hang (a timeout of the test) or fail. */
#include "drv.h"
#include "mpitest.h"

#include <dlfcn.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

typedef int (*barrier_floor_fn)(MPI_Comm comm, int what, void *stream, int n, double *seconds);

static const struct {
    int what;
    const char *name;
} ways[] = {
    {PICOLL_FLOOR_BARRIER, "blocking"},
    {PICOLL_FLOOR_BARRIER_QUEUE, "queued"},
    {PICOLL_FLOOR_BARRIER_GRAPH, "graph"},
};
#define WAYS (int)(sizeof(ways) / sizeof(ways[0]))

/* Every way with the last rank late by 0.3 s: rank 0's must wait for it. */
static void late_rank(barrier_floor_fn floor, cu_stream_t stream)
{
    for (int w = 0; w < WAYS; w++) {
        double s = 0.0;
        PMPI_Barrier(MPI_COMM_WORLD);
        if (mt_rank == mt_size - 1) {
            usleep(300000);
        }
        double t0 = MPI_Wtime();
        int rc = floor(MPI_COMM_WORLD, ways[w].what, stream, 1, &s);
        double took = MPI_Wtime() - t0;
        MT_CHECK(rc == MPI_SUCCESS, "%s barrier with a late rank: error %d", ways[w].name, rc);
        MT_CHECK(mt_rank != 0 || took >= 0.2,
                 "%s barrier: rank 0's returned after %.3f s while rank %d came 0.3 s late: it "
                 "did not wait for every rank",
                 ways[w].name, took, mt_size - 1);
    }
}

/* The last rank skips one blocking barrier: the others give up past PICOLL_TIMEOUT, then every
 * rank's next one passes. */
static void give_up(barrier_floor_fn floor)
{
    double s = 0.0;
    PMPI_Barrier(MPI_COMM_WORLD);
    if (mt_rank != mt_size - 1) {
        int rc = floor(MPI_COMM_WORLD, PICOLL_FLOOR_BARRIER, NULL, 1, &s);
        MT_CHECK(rc != MPI_SUCCESS, "a barrier that rank %d skipped passed", mt_size - 1);
    }
    PMPI_Barrier(MPI_COMM_WORLD);
    int rc = floor(MPI_COMM_WORLD, PICOLL_FLOOR_BARRIER, NULL, 5, &s);
    MT_CHECK(rc == MPI_SUCCESS, "the barriers after one that gave up: error %d", rc);
}

int main(int argc, char **argv)
{
    char why[256];
    MPI_Init(&argc, &argv);
    mt_load_picoll(1);
    barrier_floor_fn floor = NULL;
    *(void **)&floor = dlsym(RTLD_DEFAULT, "picoll_device_barrier_floor");
    if (floor == NULL || mt_picoll.last_algorithm == NULL) {
        mt_fail("picoll_device_barrier_floor is not in the process (is libpicoll.so preloaded?)");
        return mt_finish("barrier_floor");
    }
    int ndev = drv_load(why, sizeof(why));
    if (ndev == 0) {
        return mt_skip(why);
    }
    drv_choose_device(mt_rank % ndev);
    cu_stream_t stream;
    CK(drv.stream_create(&stream, CU_STREAM_DEFAULT));
    double s = 0.0;
    MT_CHECK(floor(MPI_COMM_WORLD, PICOLL_FLOOR_BARRIER, NULL, 1, &s) != MPI_SUCCESS,
             "a barrier floor before any device call on the communicator passed");

    /* the workspace: an allreduce on device buffers, on picoll's kernels */
    cu_ptr_t in, out;
    CK(drv.mem_alloc(&in, 64));
    CK(drv.mem_alloc(&out, 64));
    CK(drv.memset_d8(in, 1, 64));
    MPI_Allreduce((void *)in, (void *)out, 16, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    const char *alg = mt_picoll.last_algorithm();
    MT_CHECK(alg != NULL && strncmp(alg, "cuda_", 5) == 0,
             "the allreduce on device buffers took %s, not picoll's kernels", alg ? alg : "none");

    double us[WAYS];
    for (int w = 0; w < WAYS; w++) {
        int rc = floor(MPI_COMM_WORLD, ways[w].what, stream, 20, &s);
        us[w] = s * 1e6;
        MT_CHECK(rc == MPI_SUCCESS && s > 0.0, "%s barrier floor: error %d, %g s", ways[w].name, rc,
                 s);
    }
    if (mt_rank == 0) {
        printf("barrier floor (us): blocking %.2f, queued %.2f, graph %.2f\n", us[0], us[1], us[2]);
    }
    late_rank(floor, stream);
    if (mt_flag(argc, argv, "--give-up")) {
        give_up(floor);
    }
    CK(drv.stream_synchronize(stream));
    CK(drv.stream_destroy(stream));
    CK(drv.mem_free(in));
    CK(drv.mem_free(out));
    return mt_finish("barrier_floor");
}
