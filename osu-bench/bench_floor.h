/* osu-bench --floor: the GPU's floor in the same run as the calls (picoll_device_floor), and each
 * row's ratio to it. */
#ifndef OSU_BENCH_FLOOR_H
#define OSU_BENCH_FLOOR_H

#include <mpi.h>
#include <stddef.h>

typedef struct {
    int on;           /* 1: measured, rows print their ratios */
    int n;            /* launches timed (--floor=N) */
    double launch_us; /* an empty kernel launched and waited for, every rank at once (mean) */
    double queue_us;  /* one of N empty kernels queued on the stream, then one synchronise */
    void *stream;     /* the stream of the queue and the copies */
    int own_stream;   /* made here (no --enqueue or --graph stream) */
    int (*floor)(int what, void *stream, int n, size_t bytes, double *seconds);
} bench_floor_t;

/* Collective: finds picoll_device_floor, times the two launch floors on every rank at once.
 * stream: the benchmark's stream, or NULL (one is made). 0, or -1 with why (every rank). */
int bench_floor_setup(bench_floor_t *f, MPI_Comm comm, void *stream, char *why, size_t len);
/* Rank 0's header line; coll the collective's name ("allreduce"). */
void bench_floor_header(const bench_floor_t *f, const char *coll, int np);
/* Bytes one rank's call of size bytes (one block for allgather and alltoall) must read and write
 * at least on its GPU, where the other ranks on that GPU make theirs at the same time. */
size_t bench_floor_moved(const char *coll, int np, size_t size);
/* Collective: every rank copies half of moved bytes on its GPU at once, iters times; the mean
 * time per copy (us) over ranks. */
double bench_floor_copy(const bench_floor_t *f, MPI_Comm comm, size_t moved, int iters);
/* Rank 0's line under a row: the floors and picoll's ratios to them. stream_us[2]: the enqueue
 * and graph latencies, <= 0 where not run. */
void bench_floor_row(const bench_floor_t *f, size_t moved, double copy_us, double picoll_us,
                     const double *stream_us);
void bench_floor_close(bench_floor_t *f);

#endif
