/* Every recorded machine: its class, HCM neighbours and relays, NVLink counts, nearest NICs, and
 * the device algorithm the selection (src/coll/select.c) picks for its reach around each
 * threshold. The expected values are written by hand from each
 * machine's published layout (see the comments of the fixture files), not from running this. */
#include "build-config.h"
#include "coll/algs.h"
#include "coll/coll.h"
#include "coll/select.h"
#include "test_topo.h"
#include "topo/topo.h"
#include "util/config.h"

#include <stdint.h>
#include <stdlib.h>

#define K 1024ul
#define M (1024ul * 1024ul)
#define G (1024ul * 1024ul * 1024ul)

static const char *dir;
static picoll_config_t cfg; /* defaults */

static picoll_topo_t *load(const char *name)
{
    static picoll_topo_t t;
    char path[1024], err[512];
    snprintf(path, sizeof(path), "%s/%s", dir, name);
    picoll_status_t st = picoll_topo_parse_file(path, &t, err, sizeof(err));
    if (st != PICOLL_OK) {
        fprintf(stderr, "%s: %s\n", name, err);
        exit(1);
    }
    return &t;
}

static picoll_topo_reach_t reach_of(const picoll_topo_t *t, int n, const int *gpus)
{
    return picoll_topo_reach(t, gpus, n);
}

/* The limits a workspace of n ranks with data buffers of slot bytes hands up under c
 * (cuda/cuda_dev.h); one rank and no bound on the buffer: the reach's table alone. */
static picoll_cuda_limits_t lim_of(const picoll_config_t *c, picoll_topo_reach_t r, size_t slot,
                                   int n)
{
    return picoll_cuda_limits(r, n, slot, c->cuda_ll_max);
}
static int ar_n(const picoll_config_t *c, picoll_topo_reach_t r, size_t slot, int n, size_t b)
{
    picoll_cuda_limits_t lim = lim_of(c, r, slot, n);
    return picoll_select_cuda_allreduce(c, &lim, b, 0);
}
static int ag_n(const picoll_config_t *c, picoll_topo_reach_t r, int n, size_t b)
{
    picoll_cuda_limits_t lim = lim_of(c, r, picoll_cuda_slot_bytes(c->workspace_size), n);
    return picoll_select_cuda_allgather(c, &lim, b);
}

/* bytes: allreduce: the message; allgather, alltoall: one rank's receive buffer (one block) */
static int ar_cfg(picoll_topo_reach_t r, size_t b, const picoll_config_t *c)
{
    return ar_n(c, r, SIZE_MAX, 1, b);
}
static int ar(picoll_topo_reach_t r, size_t b)
{
    return ar_cfg(r, b, &cfg);
}
static int ag(picoll_topo_reach_t r, size_t b)
{
    return ag_n(&cfg, r, 1, b);
}
static int aa(picoll_topo_reach_t r, size_t b)
{
    picoll_cuda_limits_t lim = lim_of(&cfg, r, SIZE_MAX, 1);
    return picoll_select_cuda_alltoall(&cfg, &lim, b);
}

/* fully NVLink-connected set with default thresholds: 256k one-shot, 10M two-shot, 1G IPC */
static void check_nvlink_table(picoll_topo_reach_t r)
{
    CHECK_EQ(r, PICOLL_TOPO_REACH_NVLINK);
    CHECK_EQ(ar(r, 8), PICOLL_ALLREDUCE_CUDA_ONESHOT);
    CHECK_EQ(ar(r, 256 * K), PICOLL_ALLREDUCE_CUDA_ONESHOT);
    CHECK_EQ(ar(r, 256 * K + 1), PICOLL_ALLREDUCE_CUDA_TWOSHOT);
    CHECK_EQ(ar(r, 10 * M), PICOLL_ALLREDUCE_CUDA_TWOSHOT);
    CHECK_EQ(ar(r, 10 * M + 1), PICOLL_ALG_FALLBACK);
    CHECK_EQ(ag(r, 1 * G), PICOLL_ALLGATHER_CUDA_IPC);
    CHECK_EQ(ag(r, 1 * G + 1), PICOLL_ALG_FALLBACK);
    CHECK_EQ(aa(r, 4 * K), PICOLL_ALLTOALL_CUDA_IPC);

    /* PICOLL_CUDA_LL_MAX: the low-latency lines up to it, where a slot holds the 16-byte rounded
     * bytes of every rank (64 KiB slots: 8 ranks take 8192 bytes, not 8193) */
    picoll_config_t c2;
    char *env[] = {"PICOLL_CUDA_LL_MAX=4k", NULL};
    CHECK_EQ(picoll_config_load(&c2, env), PICOLL_OK);
    CHECK_EQ(ar_n(&c2, r, 64 * K, 2, 4 * K), PICOLL_ALLREDUCE_CUDA_LL);
    CHECK_EQ(ar_n(&c2, r, 64 * K, 2, 4 * K + 1), PICOLL_ALLREDUCE_CUDA_ONESHOT);
    char *big[] = {"PICOLL_CUDA_LL_MAX=64k", NULL};
    picoll_config_t c3;
    CHECK_EQ(picoll_config_load(&c3, big), PICOLL_OK);
    CHECK_EQ(ar_n(&c3, r, 64 * K, 8, 8 * K), PICOLL_ALLREDUCE_CUDA_LL);
    CHECK_EQ(ar_n(&c3, r, 64 * K, 8, 8 * K + 1), PICOLL_ALLREDUCE_CUDA_ONESHOT);
    CHECK_EQ(ar_n(&c2, r, 64 * K, 2, 0), PICOLL_ALG_FALLBACK);
    /* allgather: up to PICOLL_CUDA_LL_MAX received bytes, where the workspace's slot holds them */
    CHECK_EQ(ag_n(&c2, r, 4, 1 * K), PICOLL_ALLGATHER_CUDA_LL);
    CHECK_EQ(ag_n(&c2, r, 4, 1 * K + 1), PICOLL_ALLGATHER_CUDA_IPC);
    char *small[] = {"PICOLL_CUDA_LL_MAX=64k", "PICOLL_WORKSPACE_SIZE=128k", NULL};
    CHECK_EQ(picoll_config_load(&c2, small), PICOLL_OK);
    CHECK_EQ(ag_n(&c2, r, 8, 8 * K), PICOLL_ALLGATHER_CUDA_LL);
    CHECK_EQ(ag_n(&c2, r, 8, 8 * K + 1), PICOLL_ALLGATHER_CUDA_IPC);
    /* the default: none */
    CHECK_EQ(ar_n(&cfg, r, 64 * K, 2, 8), PICOLL_ALLREDUCE_CUDA_ONESHOT);
    CHECK_EQ(ag(r, 8), PICOLL_ALLGATHER_CUDA_IPC);
}

/* peer access over PCIe only: 64k one-shot, 1M IPC */
static void check_pcie_table(picoll_topo_reach_t r)
{
    CHECK_EQ(r, PICOLL_TOPO_REACH_PCIE);
    CHECK_EQ(ar(r, 64 * K), PICOLL_ALLREDUCE_CUDA_ONESHOT);
    CHECK_EQ(ar(r, 64 * K + 1), PICOLL_ALG_FALLBACK);
    CHECK_EQ(ar(r, 10 * M), PICOLL_ALG_FALLBACK);
    CHECK_EQ(ag(r, 1 * M), PICOLL_ALLGATHER_CUDA_IPC);
    CHECK_EQ(ag(r, 1 * M + 1), PICOLL_ALG_FALLBACK);
    CHECK_EQ(aa(r, 1 * M + 1), PICOLL_ALG_FALLBACK);
}

static void check_none_table(picoll_topo_reach_t r)
{
    CHECK_EQ(r, PICOLL_TOPO_REACH_NONE);
    CHECK_EQ(ar(r, 8), PICOLL_ALG_FALLBACK);
    CHECK_EQ(ag(r, 8), PICOLL_ALG_FALLBACK);
    CHECK_EQ(aa(r, 8), PICOLL_ALG_FALLBACK);
}

static void test_dgx1(void)
{
    picoll_topo_t *t = load("dgx1-v100.txt");
    /* DGX-1V hybrid cube mesh: quads 0-3 and 4-7, GPU i joined to GPU i+4, which is its relay */
    static const int nbr[8][4] = {{1, 2, 3, 4}, {0, 2, 3, 5}, {0, 1, 3, 6}, {0, 1, 2, 7},
                                  {0, 5, 6, 7}, {1, 4, 6, 7}, {2, 4, 5, 7}, {3, 4, 5, 6}};
    static const int relay[8] = {4, 5, 6, 7, 0, 1, 2, 3};

    CHECK_EQ(t->ngpus, 8);
    CHECK_EQ(t->nnics, 4);
    CHECK_STR(picoll_topo_class_name(t->cls.cls), "hcm");
    for (int i = 0; i < 8; i++) {
        for (int k = 0; k < 4; k++) {
            CHECK_EQ(t->cls.hcm_neighbors[i][k], nbr[i][k]);
        }
        CHECK_EQ(t->cls.hcm_relay[i], relay[i]);
    }
    CHECK_EQ(t->links[0][1].nvlinks, 1);
    CHECK_EQ(t->links[0][3].nvlinks, 2);
    CHECK_EQ(t->links[0][4].nvlinks, 2);
    CHECK_EQ(t->links[1][2].nvlinks, 2);
    CHECK_EQ(t->links[6][2].nvlinks, 1);
    CHECK_EQ(picoll_topo_nvlinks(t, 0, 5), 0);
    CHECK_EQ(t->links[0][4].nvswitch_links, 0);
    CHECK_EQ(t->gpus[0].total_nvlinks, 6); /* V100: 6 NVLink ports, all used */
    CHECK_EQ(t->links[0][5].p2p, PICOLL_TOPO_P2P_NO);
    CHECK_EQ(t->links[0][5].path, PICOLL_TOPO_PATH_SYS);
    CHECK_STR(t->gpus[4].cpu_affinity, "20-39,60-79");
    CHECK_EQ(t->gpus[0].numa_node, -1); /* no NUMA column in this older format */
    CHECK_STR(t->nic_names[t->gpus[0].nic], "mlx5_0");
    CHECK_EQ(t->gpus[0].nic_path, PICOLL_TOPO_PATH_PIX);
    CHECK_STR(t->nic_names[t->gpus[6].nic], "mlx5_3");
    /* the two quads are the largest fully connected subsets */
    CHECK_EQ(t->cls.subset_size, 4);
    CHECK_EQ(t->cls.nsubsets, 2);
    CHECK((t->cls.subsets[0] == 0x0f && t->cls.subsets[1] == 0xf0) ||
          (t->cls.subsets[0] == 0xf0 && t->cls.subsets[1] == 0x0f));

    /* all 8, one rank each: HCM one-shot up to 256k, then hand over */
    int all[8] = {0, 1, 2, 3, 4, 5, 6, 7};
    picoll_topo_reach_t r = reach_of(t, 8, all);
    CHECK_EQ(r, PICOLL_TOPO_REACH_HCM);
    CHECK_EQ(ar(r, 1), PICOLL_ALLREDUCE_CUDA_HCM);
    CHECK_EQ(ar(r, 256 * K), PICOLL_ALLREDUCE_CUDA_HCM);
    CHECK_EQ(ar(r, 256 * K + 1), PICOLL_ALG_FALLBACK);
    CHECK_EQ(ag(r, 4 * K), PICOLL_ALG_FALLBACK); /* 0-5 etc. have no peer access */
    CHECK_EQ(aa(r, 4 * K), PICOLL_ALG_FALLBACK);
    /* a quad, and a quad in another order, behave as a full mesh */
    int quad[4] = {0, 1, 2, 3}, quad2[4] = {7, 5, 4, 6};
    check_nvlink_table(reach_of(t, 4, quad));
    check_nvlink_table(reach_of(t, 4, quad2));
    int pair[2] = {0, 4};
    check_nvlink_table(reach_of(t, 2, pair));
    /* 0,1,4,5: 0-5 and 1-4 cross sockets without NVLink */
    int cross[4] = {0, 1, 4, 5};
    check_none_table(reach_of(t, 4, cross));
    /* 16 ranks on 8 GPUs: not the one-rank-per-GPU HCM, and cross pairs lack peer access */
    int twice[16] = {0, 1, 2, 3, 4, 5, 6, 7, 0, 1, 2, 3, 4, 5, 6, 7};
    check_none_table(reach_of(t, 16, twice));
    /* ranks sharing GPUs of one quad */
    int shared[3] = {0, 0, 1};
    check_nvlink_table(reach_of(t, 3, shared));
    /* a quad restricted out of the node is a full mesh */
    picoll_topo_t *sub = malloc(sizeof(*sub));
    CHECK_EQ(picoll_topo_restrict(t, quad2, 4, sub), PICOLL_OK);
    CHECK_STR(picoll_topo_class_name(sub->cls.cls), "full-mesh");
    CHECK_EQ(picoll_topo_restrict(t, cross, 4, sub), PICOLL_OK);
    CHECK_STR(picoll_topo_class_name(sub->cls.cls), "mixed");
    free(sub);

    /* PICOLL_HCM_ONESHOT_MAX moves the HCM threshold */
    picoll_config_t c2;
    char *env[] = {"PICOLL_HCM_ONESHOT_MAX=1M", NULL};
    CHECK_EQ(picoll_config_load(&c2, env), PICOLL_OK);
    CHECK_EQ(ar_cfg(r, 1 * M, &c2), PICOLL_ALLREDUCE_CUDA_HCM);
    CHECK_EQ(ar_cfg(r, 1 * M + 1, &c2), PICOLL_ALG_FALLBACK);
    /* HCM's workspaces map only the quad and the relay: never the low-latency lines */
    char *ll[] = {"PICOLL_CUDA_LL_MAX=4k", NULL};
    CHECK_EQ(picoll_config_load(&c2, ll), PICOLL_OK);
    CHECK_EQ(ar_cfg(r, 8, &c2), PICOLL_ALLREDUCE_CUDA_HCM);
}

static void test_dgx_a100(void)
{
    picoll_topo_t *t = load("dgx-a100.txt");
    static const int numa[8] = {3, 3, 1, 1, 7, 7, 5, 5};

    CHECK_EQ(t->ngpus, 8);
    CHECK_EQ(t->nnics, 10);
    CHECK_STR(picoll_topo_class_name(t->cls.cls), "nvswitch");
    /* NV12 to each of 7 peers: 84 links, more than A100's 12 ports, so through NVSwitches */
    CHECK_EQ(t->links[0][7].nvlinks, 0);
    CHECK_EQ(t->links[0][7].nvswitch_links, 12);
    CHECK_EQ(picoll_topo_nvlinks(t, 3, 4), 12);
    for (int i = 0; i < 8; i++) {
        CHECK_EQ(t->gpus[i].numa_node, numa[i]);
        CHECK_EQ(t->cls.hcm_relay[i], -1);
    }
    CHECK_STR(t->gpus[2].cpu_affinity, "16-31,144-159");
    CHECK_STR(t->nic_names[t->gpus[0].nic], "mlx5_0");
    CHECK_EQ(t->gpus[0].nic_path, PICOLL_TOPO_PATH_PXB);
    CHECK_STR(t->nic_names[t->gpus[7].nic], "mlx5_8");
    int all[8] = {0, 1, 2, 3, 4, 5, 6, 7};
    check_nvlink_table(reach_of(t, 8, all));
    int some[3] = {6, 1, 3};
    check_nvlink_table(reach_of(t, 3, some));
}

static void test_dgx_h100(void)
{
    picoll_topo_t *t = load("dgx-h100.txt");
    static const char *nic[8] = {"mlx5_0", "mlx5_1", "mlx5_2", "mlx5_5",
                                 "mlx5_6", "mlx5_7", "mlx5_8", "mlx5_9"};

    CHECK_EQ(t->ngpus, 8);
    CHECK_EQ(t->nnics, 10);
    CHECK_STR(picoll_topo_class_name(t->cls.cls), "nvswitch");
    CHECK_EQ(t->links[3][4].nvswitch_links, 18);
    CHECK_EQ(t->links[3][4].nvlinks, 0);
    for (int i = 0; i < 8; i++) {
        CHECK_EQ(t->gpus[i].numa_node, i < 4 ? 0 : 1);
        CHECK_STR(t->nic_names[t->gpus[i].nic], nic[i]);
        CHECK_EQ(t->gpus[i].nic_path, PICOLL_TOPO_PATH_PIX);
    }
    int all[8] = {0, 1, 2, 3, 4, 5, 6, 7};
    picoll_topo_reach_t r = reach_of(t, 8, all);
    check_nvlink_table(r);
    /* overrides */
    picoll_config_t c2;
    char *env[] = {"PICOLL_NVLINK_ONESHOT_MAX=64k", "PICOLL_NVLINK_TWOSHOT_MAX=1G", NULL};
    CHECK_EQ(picoll_config_load(&c2, env), PICOLL_OK);
    CHECK_EQ(ar_cfg(r, 64 * K, &c2), PICOLL_ALLREDUCE_CUDA_ONESHOT);
    CHECK_EQ(ar_cfg(r, 64 * K + 1, &c2), PICOLL_ALLREDUCE_CUDA_TWOSHOT);
    CHECK_EQ(ar_cfg(r, 1 * G, &c2), PICOLL_ALLREDUCE_CUDA_TWOSHOT);
    CHECK_EQ(ar_cfg(r, 1 * G + 1, &c2), PICOLL_ALG_FALLBACK);
}

static void test_pcie4(void)
{
    picoll_topo_t *t = load("pcie-4gpu-2socket.txt");
    picoll_topo_t *sub = malloc(sizeof(*sub));

    CHECK_EQ(t->ngpus, 4);
    CHECK_STR(picoll_topo_class_name(t->cls.cls), "pcie");
    CHECK_EQ(t->cls.pcie_distance, PICOLL_TOPO_PATH_SYS);
    CHECK_EQ(picoll_topo_nvlinks(t, 0, 1), 0);
    CHECK_EQ(t->gpus[2].numa_node, 1);
    CHECK_EQ(t->gpus[0].nic, -1);
    int all[4] = {0, 1, 2, 3}, s0[2] = {0, 1}, s1[2] = {2, 3}, x[2] = {1, 2};
    check_none_table(reach_of(t, 4, all)); /* across sockets: no peer access */
    check_pcie_table(reach_of(t, 2, s0));
    check_pcie_table(reach_of(t, 2, s1));
    check_none_table(reach_of(t, 2, x));
    CHECK_EQ(picoll_topo_restrict(t, s1, 2, sub), PICOLL_OK);
    CHECK_STR(picoll_topo_class_name(sub->cls.cls), "pcie");
    CHECK_EQ(sub->cls.pcie_distance, PICOLL_TOPO_PATH_PHB);
    free(sub);
}

static void test_pcie8(void)
{
    picoll_topo_t *t = load("pcie-8gpu-2socket.txt");
    picoll_topo_t *sub = malloc(sizeof(*sub));

    CHECK_EQ(t->ngpus, 8);
    CHECK_STR(picoll_topo_class_name(t->cls.cls), "pcie");
    CHECK_EQ(t->cls.pcie_distance, PICOLL_TOPO_PATH_SYS);
    CHECK_EQ(t->links[0][1].path, PICOLL_TOPO_PATH_PIX);
    CHECK_EQ(t->links[0][2].path, PICOLL_TOPO_PATH_NODE);
    CHECK_EQ(t->links[3][4].path, PICOLL_TOPO_PATH_SYS);
    CHECK_STR(t->nic_names[t->gpus[2].nic], "mlx5_0");
    CHECK_EQ(t->gpus[2].nic_path, PICOLL_TOPO_PATH_NODE);
    CHECK_STR(t->nic_names[t->gpus[5].nic], "mlx5_1");
    CHECK_EQ(t->gpus[5].nic_path, PICOLL_TOPO_PATH_PIX);
    int all[8] = {0, 1, 2, 3, 4, 5, 6, 7}, sock0[4] = {0, 1, 2, 3}, sock1[4] = {4, 5, 6, 7};
    int sw[2] = {6, 7}, x[2] = {0, 4};
    check_none_table(reach_of(t, 8, all));
    check_pcie_table(reach_of(t, 4, sock0));
    check_pcie_table(reach_of(t, 4, sock1));
    check_none_table(reach_of(t, 2, x));
    CHECK_EQ(picoll_topo_restrict(t, sw, 2, sub), PICOLL_OK);
    CHECK_EQ(sub->cls.pcie_distance, PICOLL_TOPO_PATH_PIX);
    CHECK_EQ(picoll_topo_restrict(t, sock0, 4, sub), PICOLL_OK);
    CHECK_EQ(sub->cls.pcie_distance, PICOLL_TOPO_PATH_NODE);
    /* PICOLL_PCIE_ONESHOT_MAX=0: PCIe allreduce all handed over */
    picoll_config_t c2;
    char *env[] = {"PICOLL_PCIE_ONESHOT_MAX=0", NULL};
    CHECK_EQ(picoll_config_load(&c2, env), PICOLL_OK);
    CHECK_EQ(ar_cfg(reach_of(t, 4, sock0), 1, &c2), PICOLL_ALG_FALLBACK);
    free(sub);
}

static void test_bridge(void)
{
    picoll_topo_t *t = load("nvlink-bridge-2plus2.txt");
    picoll_topo_t *sub = malloc(sizeof(*sub));

    CHECK_EQ(t->ngpus, 4);
    CHECK_STR(picoll_topo_class_name(t->cls.cls), "mixed");
    CHECK_EQ(t->links[0][1].nvlinks, 4); /* 4 links: direct, not a switch */
    CHECK_EQ(t->links[0][1].nvswitch_links, 0);
    CHECK_EQ(picoll_topo_nvlinks(t, 2, 3), 0);
    CHECK_EQ(t->cls.subset_size, 2);
    CHECK_EQ(t->cls.nsubsets, 1);
    CHECK_EQ(t->cls.subsets[0], 0x3);
    CHECK_EQ(t->cls.hcm_relay[0], -1);
    int all[4] = {0, 1, 2, 3}, br[2] = {0, 1}, nb[2] = {2, 3}, mix[2] = {1, 3};
    check_pcie_table(reach_of(t, 4, all)); /* the PCIe pairs set the pace */
    check_nvlink_table(reach_of(t, 2, br));
    check_pcie_table(reach_of(t, 2, nb));
    check_pcie_table(reach_of(t, 2, mix));
    CHECK_EQ(picoll_topo_restrict(t, br, 2, sub), PICOLL_OK);
    CHECK_STR(picoll_topo_class_name(sub->cls.cls), "full-mesh");
    CHECK_EQ(picoll_topo_restrict(t, nb, 2, sub), PICOLL_OK);
    CHECK_STR(picoll_topo_class_name(sub->cls.cls), "pcie");
    CHECK_EQ(sub->cls.pcie_distance, PICOLL_TOPO_PATH_PHB);
    int one[1] = {2};
    CHECK_EQ(picoll_topo_restrict(t, one, 1, sub), PICOLL_OK);
    CHECK_STR(picoll_topo_class_name(sub->cls.cls), "single");
    /* the device layer finds that the bridge pair's IPC mapping fails */
    picoll_topo_set_p2p(t, 0, 1, PICOLL_TOPO_P2P_NO);
    check_none_table(reach_of(t, 2, br));
    free(sub);
}

int main(int argc, char **argv)
{
    if (argc != 2) {
        fprintf(stderr, "usage: %s FIXTURE_DIR\n", argv[0]);
        return 2;
    }
    dir = argv[1];
    picoll_config_load(&cfg, NULL);
    test_dgx1();
    test_dgx_a100();
    test_dgx_h100();
    test_pcie4();
    test_pcie8();
    test_bridge();
    if (test_failures) {
        fprintf(stderr, "%d check(s) failed\n", test_failures);
        return 1;
    }
    printf("all fixture checks passed\n");
    return 0;
}
