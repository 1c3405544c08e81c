/* osu_allgather: MPI_Allgather latency, OSU micro-benchmark flags and format. The size is what
 * each rank contributes; every rank receives np times that. */
#include "bench.h"

static void allgather_layout(int np, size_t count, size_t *send_elems, size_t *recv_elems)
{
    *send_elems = count;
    *recv_elems = count * (size_t)np;
}

/* In place, rank's own block of the receive buffer holds its input. */
static int allgather_in_place_source(int rank, int np, size_t count, size_t j, size_t *send_idx)
{
    (void)np;
    if (j / count != (size_t)rank) {
        return 0;
    }
    *send_idx = j % count;
    return 1;
}

static void allgather_source(int rank, int np, size_t count, size_t j, int *src_rank,
                             size_t *src_idx)
{
    (void)rank;
    (void)np;
    *src_rank = (int)(j / count);
    *src_idx = j % count;
}

/* Each rank receives the (n-1) blocks of the others. */
static double allgather_busbw_factor(int np)
{
    return (double)(np - 1);
}

static int allgather_call(const bench_call_t *c)
{
    return MPI_Allgather(c->sendbuf, c->count, c->type, c->recvbuf, c->count, c->type, c->comm);
}

static const bench_coll_t allgather = {
    .name = "allgather",
    .title = "Allgather",
    .reduces = 0,
    .layout = allgather_layout,
    .in_place_source = allgather_in_place_source,
    .source = allgather_source,
    .busbw_factor = allgather_busbw_factor,
    .call = allgather_call,
    .id = BENCH_COLL_ALLGATHER,
    .op = MPI_OP_NULL,
};

int main(int argc, char **argv)
{
    return bench_main(&allgather, argc, argv);
}
