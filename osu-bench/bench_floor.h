/* osu-bench --floor: the GPU's floor in the same run as the calls (picoll_device_floor, and the
 * barrier floor of picoll_device_barrier_floor), and each row's ratio to it. */
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
    /* the barrier floor (picoll_device_barrier_floor): a barrier of the ranks over picoll's device
     * workspace, no data, every rank at once (mean), blocking, enqueued on the stream and
     * graph-launched (BENCH_BARRIERS); 0 where that one failed */
    int barrier_on;
    double barrier_us[3];
    char barrier_why[256]; /* !barrier_on: why not */
    /* host buffers (issue 52): in each --ab round, every rank copies (memcpy) half the bytes its
     * call must read and write, at once: the machine's memory in the same round as the calls */
    int host;
    char *hsrc, *hdst;
    size_t hbytes; /* the size of hsrc and hdst */
    /* and the cross floor: every rank copies as many bytes out of the next rank's memory, which
     * that rank wrote just before (MPI_Win_allocate_shared): the price of moving bytes between
     * processes (between CPUs, where they run apart), which every shared-memory collective pays
     * and a copy inside one rank's memory does not. cross: 0 not tried yet, 1 measured, -1 not
     * (the ranks are not on one node, or the window failed) */
    int cross;
    MPI_Win cwin;
    char *cmine, *cnext; /* this rank's part of the window, and the next rank's */
    size_t cbytes;       /* their size */
    double cross_us;     /* this rank's mean cross copy in the last bench_floor_host_copy */
} bench_floor_t;

/* The barrier floor's ways, in barrier_us's order. */
enum { BENCH_BARRIER_BLOCKING, BENCH_BARRIER_ENQUEUE, BENCH_BARRIER_GRAPH, BENCH_BARRIERS };

/* Collective: finds picoll_device_floor, times the two launch floors on every rank at once.
 * stream: the benchmark's stream, or NULL (one is made). 0, or -1 with why (every rank). */
int bench_floor_setup(bench_floor_t *f, MPI_Comm comm, void *stream, char *why, size_t len);
/* Collective, after a call of comm's on device buffers made picoll's device workspace: the barrier
 * floor, each way every rank at once (a way that failed on some rank stays 0; none: barrier_on 0,
 * with why). */
void bench_floor_barrier(bench_floor_t *f, MPI_Comm comm);
/* Rank 0's header lines; coll the collective's name ("allreduce"). */
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
/* Rank 0's line under a row, after the floor's: the barrier floor and the ratios to it of picoll
 * (blocking), the enqueue and graph columns (stream_us, <= 0 where not run). */
void bench_floor_barrier_row(const bench_floor_t *f, double picoll_us, const double *stream_us);
void bench_floor_close(bench_floor_t *f);
/* Host buffers: this rank's mean time (us) of iters copies of half of moved bytes between two
 * buffers of its own, each alone between barriers after warmup untimed ones, every rank at once;
 * -1 where the buffers could not be had (on every rank alike). Then, where every rank is on one
 * node, the cross floor the same way (f->cross 1, f->cross_us this rank's mean): each copy out of
 * the next rank's part of a shared window, which that rank wrote (untimed) before the barrier. */
double bench_floor_host_copy(bench_floor_t *f, MPI_Comm comm, size_t moved, int iters, int warmup);
/* Rank 0's lines for host buffers: the header, and under a row its rounds' floors and picoll's
 * and the MPI's ratios to their median. */
void bench_floor_host_header(const char *coll);
void bench_floor_host_row(size_t moved, const double *rounds, int n, double floor_us,
                          double picoll_us, double mpi_us);
/* Rank 0's lines under a row for the cross floor: its rounds and their median (cross_us), and
 * picoll's and the MPI's ratios to it. */
void bench_floor_cross_row(size_t moved, const double *rounds, int n, double cross_us,
                           double picoll_us, double mpi_us);

#endif
