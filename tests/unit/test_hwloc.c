/* picoll_topo_hwloc_fill on a recorded two-socket machine (topo/fixtures/hwloc-2socket-2gpu.xml,
 * through HWLOC_XMLFILE): each GPU's NUMA node, its nearest NIC and the path to every NIC. The
 * GPU-to-NIC walk once used hwloc_get_common_ancestor_obj, which compares depths that are
 * negative for I/O objects and walked past the root (a crash on a real GPU machine): a GPU and a
 * NIC on different sockets exercise exactly that. Skips (77) when picoll is built without hwloc. */
#include "build-config.h"
#include "check.h"
#include "topo/topo.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int nic_index(const picoll_topo_t *t, const char *name)
{
    for (int n = 0; n < t->nnics; n++) {
        if (strcmp(t->nic_names[n], name) == 0) {
            return n;
        }
    }
    return -1;
}

int main(int argc, char **argv)
{
#ifndef PICOLL_HAVE_HWLOC
    (void)argc;
    (void)argv;
    printf("SKIP: picoll is built without hwloc\n");
    return 77;
#else
    picoll_topo_t t;
    if (argc != 2) {
        fprintf(stderr, "usage: test_hwloc FIXTURE.xml\n");
        return 2;
    }
    setenv("HWLOC_XMLFILE", argv[1], 1);
    picoll_topo_init(&t, "test");
    t.ngpus = 3;
    snprintf(t.gpus[0].bus_id, sizeof(t.gpus[0].bus_id), "0000:11:00.0");
    snprintf(t.gpus[1].bus_id, sizeof(t.gpus[1].bus_id), "0000:21:00.0");
    snprintf(t.gpus[2].bus_id, sizeof(t.gpus[2].bus_id), "0000:99:00.0"); /* not in the file */
    picoll_topo_hwloc_fill(&t);

    int eth1 = nic_index(&t, "eth1"), eth2 = nic_index(&t, "eth2");
    CHECK(t.nnics == 2, "NICs found: %d, expected 2 (eth1, eth2; the disk is none)", t.nnics);
    CHECK(eth1 >= 0 && eth2 >= 0, "eth1 at %d, eth2 at %d", eth1, eth2);
    if (eth1 < 0 || eth2 < 0) {
        return check_summary("test_hwloc");
    }
    CHECK(t.gpus[0].numa_node == 0, "GPU 0 NUMA node %d, expected 0", t.gpus[0].numa_node);
    CHECK(t.gpus[1].numa_node == 1, "GPU 1 NUMA node %d, expected 1", t.gpus[1].numa_node);
    CHECK(t.gpus[0].nic == eth1 && t.gpus[0].nic_path == PICOLL_TOPO_PATH_PIX,
          "GPU 0 nearest NIC %d by %s, expected eth1 (%d) by PIX", t.gpus[0].nic,
          picoll_topo_path_name(t.gpus[0].nic_path), eth1);
    CHECK(t.gpus[1].nic == eth2 && t.gpus[1].nic_path == PICOLL_TOPO_PATH_PHB,
          "GPU 1 nearest NIC %d by %s, expected eth2 (%d) by PHB", t.gpus[1].nic,
          picoll_topo_path_name(t.gpus[1].nic_path), eth2);
    CHECK(t.gpu_nic[0][eth2] == PICOLL_TOPO_PATH_SYS, "GPU 0 to eth2: %s, expected SYS",
          picoll_topo_path_name(t.gpu_nic[0][eth2]));
    CHECK(t.gpu_nic[1][eth1] == PICOLL_TOPO_PATH_SYS, "GPU 1 to eth1: %s, expected SYS",
          picoll_topo_path_name(t.gpu_nic[1][eth1]));
    CHECK(t.gpus[2].numa_node == -1 && t.gpus[2].nic == -1,
          "GPU 2 (absent from the machine): NUMA node %d, NIC %d, expected -1 and -1",
          t.gpus[2].numa_node, t.gpus[2].nic);
    return check_summary("test_hwloc");
#endif
}
