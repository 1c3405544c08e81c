/* picoll_topo_node_build over 4 ranks on the recorded DGX-1: every rank gets the same result. */
#include "build-config.h"
#include "topo/node.h"
#include "topo/test_topo.h"

#include <stdlib.h>

int main(int argc, char **argv)
{
    int rank, size;
    char path[1024], err[512];
    picoll_topo_t *t = malloc(sizeof(*t));
    picoll_topo_node_t n;
    picoll_topo_gpu_id_t me = {.bus_id = "", .index = -1};

    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    if (argc != 2 || size != 4) {
        fprintf(stderr, "usage: mpirun -np 4 %s FIXTURE_DIR\n", argv[0]);
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    snprintf(path, sizeof(path), "%s/dgx1-v100.txt", argv[1]);
    CHECK_EQ(picoll_topo_parse_file(path, t, err, sizeof(err)), PICOLL_OK);

    /* one quad, one rank per GPU: a full mesh over NVLink */
    me.index = rank;
    CHECK_EQ(picoll_topo_node_build(MPI_COMM_WORLD, t, &me, &n), PICOLL_OK);
    CHECK_EQ(n.nranks, 4);
    CHECK_EQ(n.used.ngpus, 4);
    CHECK_EQ(n.used.cls.cls, PICOLL_TOPO_CLASS_FULL_MESH);
    CHECK_EQ(n.reach, PICOLL_TOPO_REACH_NVLINK);
    CHECK_EQ(n.shared, 0);
    CHECK_EQ(n.rank_gpu[rank], rank);
    picoll_topo_node_free(&n);

    /* two ranks per GPU on GPUs 0 and 4 (relays of each other: NV2) */
    me.index = rank < 2 ? 0 : 4;
    CHECK_EQ(picoll_topo_node_build(MPI_COMM_WORLD, t, &me, &n), PICOLL_OK);
    CHECK_EQ(n.used.ngpus, 2);
    CHECK_EQ(n.shared, 1);
    CHECK_EQ(n.used.cls.cls, PICOLL_TOPO_CLASS_FULL_MESH);
    CHECK_EQ(n.used.links[0][1].nvlinks, 2);
    CHECK_EQ(n.reach, PICOLL_TOPO_REACH_NVLINK);
    CHECK_EQ(n.rank_gpu[3], 1);
    picoll_topo_node_free(&n);

    /* GPUs 0,1,4,5: 0-5 and 1-4 cross sockets without peer access */
    static const int cross[4] = {0, 1, 4, 5};
    me.index = cross[rank];
    CHECK_EQ(picoll_topo_node_build(MPI_COMM_WORLD, t, &me, &n), PICOLL_OK);
    CHECK_EQ(n.used.cls.cls, PICOLL_TOPO_CLASS_MIXED);
    CHECK_EQ(n.reach, PICOLL_TOPO_REACH_NONE);
    picoll_topo_node_free(&n);

    /* rank 3 without GPU: nobody uses the device path */
    me.index = rank == 3 ? -1 : rank;
    CHECK_EQ(picoll_topo_node_build(MPI_COMM_WORLD, t, &me, &n), PICOLL_OK);
    CHECK_EQ(n.reach, PICOLL_TOPO_REACH_NONE);
    CHECK(strstr(n.why, "rank 3 has no GPU") != NULL);
    picoll_topo_node_free(&n);

    /* the detected topology of this node; on a machine without GPU: class none everywhere */
    CHECK_EQ(picoll_topo_detect(t), PICOLL_OK);
    me.index = -1;
    CHECK_EQ(picoll_topo_node_build(MPI_COMM_WORLD, t, &me, &n), PICOLL_OK);
    if (t->ngpus == 0) {
        CHECK_EQ(n.used.cls.cls, PICOLL_TOPO_CLASS_NONE);
        CHECK_EQ(n.reach, PICOLL_TOPO_REACH_NONE);
    }
    picoll_topo_node_free(&n);

    int fails = test_failures, total = 0;
    MPI_Allreduce(&fails, &total, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    free(t);
    MPI_Finalize();
    if (rank == 0) {
        printf(total ? "%d check(s) failed\n" : "all node checks passed\n", total);
    }
    return total ? 1 : 0;
}
