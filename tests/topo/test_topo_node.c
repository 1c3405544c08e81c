/* picoll_topo_node_build over 4 ranks on the recorded DGX-1: every rank gets the same result.
 * Over 8 ranks: the whole hybrid cube mesh, one rank per GPU in a shuffled order, and the HCM
 * allreduce's plan of every rank (its quad, its relay) against the DGX-1 layout written out here:
 * quads GPU0-3 and GPU4-7, GPU i joined to GPU i+4. */
#include "build-config.h"
#include "topo/node.h"
#include "test_topo.h"

#include <stdlib.h>

/* GPU of each rank in the 8-rank checks: not in GPU order, so that local ranks and GPU numbers
 * differ */
static const int hcm_gpu[8] = {5, 2, 7, 0, 3, 6, 1, 4};

static void check_hcm(const picoll_topo_t *t, int rank)
{
    picoll_topo_node_t n;
    picoll_topo_hcm_plan_t plan;
    picoll_topo_gpu_id_t me = {.bus_id = "", .index = hcm_gpu[rank]};

    CHECK_EQ(picoll_topo_node_build(MPI_COMM_WORLD, t, &me, &n), PICOLL_OK);
    CHECK_EQ(n.used.cls.cls, PICOLL_TOPO_CLASS_HCM);
    CHECK_EQ(n.reach, PICOLL_TOPO_REACH_HCM);
    CHECK_EQ(picoll_topo_hcm_plan(&n, rank, &plan), PICOLL_OK);
    int k = 0, relay = -1;
    for (int r = 0; r < 8; r++) {
        if (hcm_gpu[r] / 4 == hcm_gpu[rank] / 4) {
            CHECK_EQ(plan.quad[k], r); /* ascending */
            k++;
        }
        if (hcm_gpu[r] == (hcm_gpu[rank] + 4) % 8) {
            relay = r;
        }
    }
    CHECK_EQ(k, 4);
    CHECK_EQ(plan.relay, relay);
    CHECK_EQ(plan.mine_first, hcm_gpu[rank] / 4 == hcm_gpu[0] / 4);
    picoll_topo_node_free(&n);

    /* rank 7 on GPU 0 as well: 7 GPUs, no longer the hybrid cube mesh, and no plan */
    me.index = rank == 7 ? 0 : hcm_gpu[rank];
    CHECK_EQ(picoll_topo_node_build(MPI_COMM_WORLD, t, &me, &n), PICOLL_OK);
    CHECK(n.reach != PICOLL_TOPO_REACH_HCM);
    CHECK_EQ(picoll_topo_hcm_plan(&n, rank, &plan), PICOLL_ERR_NOT_SUPPORTED);
    picoll_topo_node_free(&n);
}

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
    if (argc != 2 || (size != 4 && size != 8)) {
        fprintf(stderr, "usage: mpirun -np 4|8 %s FIXTURE_DIR\n", argv[0]);
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    snprintf(path, sizeof(path), "%s/dgx1-v100.txt", argv[1]);
    CHECK_EQ(picoll_topo_parse_file(path, t, err, sizeof(err)), PICOLL_OK);
    if (size == 8) {
        check_hcm(t, rank);
        goto done;
    }

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

done:;
    int fails = test_failures, total = 0;
    MPI_Allreduce(&fails, &total, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    free(t);
    MPI_Finalize();
    if (rank == 0) {
        printf(total ? "%d check(s) failed\n" : "all node checks passed\n", total);
    }
    return total ? 1 : 0;
}
