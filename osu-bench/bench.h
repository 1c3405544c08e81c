/* osu-bench: the harness shared by the OSU-compatible collective benchmarks.
 *
 * Each benchmark program describes its collective with a bench_coll_t and hands it to
 * bench_main(), which parses OSU's flags, allocates host or CUDA buffers, times the call as the
 * OSU micro-benchmarks do (each rank's mean, averaged over ranks), validates it against an
 * independent computation (-c), and prints OSU's format, or with --ab the picoll A/B rows. */
#ifndef OSU_BENCH_H
#define OSU_BENCH_H

#include <mpi.h>
#include <stddef.h>

/* The collective a program times, for the columns that call it through another API than the
 * MPI call (NCCL's, MPIX_<coll>_enqueue). */
typedef enum {
    BENCH_COLL_OTHER, /* none of these: those columns are skipped */
    BENCH_COLL_ALLREDUCE,
    BENCH_COLL_ALLGATHER,
    BENCH_COLL_ALLTOALL,
} bench_coll_id_t;

typedef struct {
    const void *sendbuf; /* MPI_IN_PLACE with -l */
    void *recvbuf;
    int count; /* elements per message, as the collective's count argument */
    MPI_Datatype type;
    MPI_Comm comm;
} bench_call_t;

typedef struct {
    const char *name;  /* "allreduce": messages and the A/B output */
    const char *title; /* "Allreduce": "# OSU MPI Allreduce Latency Test" */
    int reduces;       /* results are sums of every rank's inputs: inputs are kept small */
    /* Elements of the send and receive buffers for messages of count elements on np ranks. */
    void (*layout)(int np, size_t count, size_t *send_elems, size_t *recv_elems);
    /* Element i of rank r's send buffer holds the input value (r, i). With -l, element j of
     * rank's receive buffer holds an input before the call: returns 1 and the send index whose
     * value it holds, or 0 where the element is output only. */
    int (*in_place_source)(int rank, int np, size_t count, size_t j, size_t *send_idx);
    /* Where element j of rank's receive buffer comes from: the send element src_idx of rank
     * src_rank. For a reduction, unused: element j is the sum over ranks of their element j. */
    void (*source)(int rank, int np, size_t count, size_t j, int *src_rank, size_t *src_idx);
    /* Bus bandwidth factor: bus bytes moved per message byte (the -m size) on np ranks. */
    double (*busbw_factor)(int np);
    int (*call)(const bench_call_t *c);
    /* Which collective it is (--nccl, --enqueue, --graph), and the operation of a reduction
     * (MPI_OP_NULL else). */
    bench_coll_id_t id;
    MPI_Op op;
} bench_coll_t;

/* Runs the benchmark program; returns main()'s exit status. */
int bench_main(const bench_coll_t *coll, int argc, char **argv);

#endif
