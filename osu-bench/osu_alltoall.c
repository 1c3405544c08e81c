/* osu_alltoall: MPI_Alltoall latency, OSU micro-benchmark flags and format. The size is the
 * block a rank sends to each peer. */
#include "bench.h"

static void alltoall_layout(int np, size_t count, size_t *send_elems, size_t *recv_elems)
{
    *send_elems = count * (size_t)np;
    *recv_elems = count * (size_t)np;
}

/* In place, the receive buffer starts as the send buffer. */
static int alltoall_in_place_source(int rank, int np, size_t count, size_t j, size_t *send_idx)
{
    (void)rank;
    (void)np;
    (void)count;
    *send_idx = j;
    return 1;
}

/* Block s of rank's receive buffer is block `rank` of rank s's send buffer. */
static void alltoall_source(int rank, int np, size_t count, size_t j, int *src_rank,
                            size_t *src_idx)
{
    (void)np;
    *src_rank = (int)(j / count);
    *src_idx = (size_t)rank * count + j % count;
}

/* Each rank sends (n-1) blocks to the others. */
static double alltoall_busbw_factor(int np)
{
    return (double)(np - 1);
}

static int alltoall_call(const bench_call_t *c)
{
    return MPI_Alltoall(c->sendbuf, c->count, c->type, c->recvbuf, c->count, c->type, c->comm);
}

static const bench_coll_t alltoall = {
    .name = "alltoall",
    .title = "Alltoall",
    .reduces = 0,
    .layout = alltoall_layout,
    .in_place_source = alltoall_in_place_source,
    .source = alltoall_source,
    .busbw_factor = alltoall_busbw_factor,
    .call = alltoall_call,
    .id = BENCH_COLL_ALLTOALL,
    .op = MPI_OP_NULL,
};

int main(int argc, char **argv)
{
    return bench_main(&alltoall, argc, argv);
}
