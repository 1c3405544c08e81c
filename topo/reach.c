/* The reach of a set of ranks (picoll_topo_reach), decided by its weakest pair:
 *   nvlink  every pair of its distinct GPUs joined by NVLink or NVSwitch, or all ranks on one GPU.
 *           This includes a fully connected subset of an HCM or a mixed node (a DGX-1 quad).
 *   hcm     the node is an HCM and the set is its 8 GPUs, one rank each: the HCM algorithm
 *           relies on every GPU reading its 3 quad peers and its relay, nothing else.
 *   pcie    peer access between every pair, not all over NVLink (PCIe-only nodes, or a mixed
 *           set that includes a PCIe pair: the slowest link sets the pace).
 *   none    some pair without peer access (across sockets, or a rank without GPU).
 * Which algorithm runs at which size for each reach is the algorithm layer's choice
 * (src/coll/select.c): topology knows no thresholds. */
#include "build-config.h"
#include "topo/topo.h"

const char *picoll_topo_reach_name(picoll_topo_reach_t reach)
{
    static const char *const names[] = {
        [PICOLL_TOPO_REACH_NONE] = "none",
        [PICOLL_TOPO_REACH_NVLINK] = "nvlink",
        [PICOLL_TOPO_REACH_HCM] = "hcm",
        [PICOLL_TOPO_REACH_PCIE] = "pcie",
    };
    return (unsigned)reach < sizeof(names) / sizeof(names[0]) ? names[reach] : "?";
}

picoll_topo_reach_t picoll_topo_reach(const picoll_topo_t *t, const int *rank_gpu, int nranks)
{
    uint32_t set = 0;
    int ndistinct = 0, all_nv = 1, all_p2p = 1;

    if (t == NULL || nranks < 2 || t->ngpus < 1) {
        return PICOLL_TOPO_REACH_NONE;
    }
    for (int r = 0; r < nranks; r++) {
        if (rank_gpu[r] < 0 || rank_gpu[r] >= t->ngpus) {
            return PICOLL_TOPO_REACH_NONE;
        }
        set |= 1u << rank_gpu[r];
    }
    for (uint32_t a = set; a; a &= a - 1) {
        int i = __builtin_ctz(a);
        ndistinct++;
        for (uint32_t b = a & (a - 1); b; b &= b - 1) {
            int j = __builtin_ctz(b);
            if (picoll_topo_nvlinks(t, i, j) == 0 || t->links[i][j].p2p != PICOLL_TOPO_P2P_OK) {
                all_nv = 0;
            }
            if (t->links[i][j].p2p != PICOLL_TOPO_P2P_OK) {
                all_p2p = 0;
            }
        }
    }
    if (all_nv) {
        return PICOLL_TOPO_REACH_NVLINK; /* also: a single GPU shared by all ranks */
    }
    if (t->cls.cls == PICOLL_TOPO_CLASS_HCM && ndistinct == 8 && nranks == 8) {
        return PICOLL_TOPO_REACH_HCM;
    }
    if (all_p2p) {
        return PICOLL_TOPO_REACH_PCIE;
    }
    return PICOLL_TOPO_REACH_NONE;
}
