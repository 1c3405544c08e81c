/* osu_allreduce: MPI_Allreduce (MPI_SUM) latency, OSU micro-benchmark flags and format. */
#include "bench.h"

static void allreduce_layout(int np, size_t count, size_t *send_elems, size_t *recv_elems)
{
    (void)np;
    *send_elems = count;
    *recv_elems = count;
}

static int allreduce_in_place_source(int rank, int np, size_t count, size_t j, size_t *send_idx)
{
    (void)rank;
    (void)np;
    (void)count;
    *send_idx = j;
    return 1;
}

/* Ring allreduce moves 2(n-1)/n of the vector over each rank's link. */
static double allreduce_busbw_factor(int np)
{
    return 2.0 * (np - 1) / np;
}

static int allreduce_call(const bench_call_t *c)
{
    return MPI_Allreduce(c->sendbuf, c->recvbuf, c->count, c->type, MPI_SUM, c->comm);
}

static const bench_coll_t allreduce = {
    .name = "allreduce",
    .title = "Allreduce",
    .reduces = 1,
    .layout = allreduce_layout,
    .in_place_source = allreduce_in_place_source,
    .source = NULL,
    .busbw_factor = allreduce_busbw_factor,
    .call = allreduce_call,
    .id = BENCH_COLL_ALLREDUCE,
    .op = MPI_SUM,
};

int main(int argc, char **argv)
{
    return bench_main(&allreduce, argc, argv);
}
